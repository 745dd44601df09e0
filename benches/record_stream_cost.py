"""What streaming records costs a worker process's loop: ``RecordStream.append`` + ``flush`` over a
real pipe (a reader process drains it, as the parent's loop does), per record and per batch, beside
what the end-of-level ``model_dump`` of the code before cost per record.

Run from the repository root (the argument: records per batch, default 640)::

    PYTHONPATH=src python benches/record_stream_cost.py 64
"""
import multiprocessing as mp
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent / "src")]
from wattbench.load.worker import RecordStream  # noqa: E402  (after the path line above)
from wattbench.core.schema import build_record  # noqa: E402

def reader(conn):
    n = 0
    while True:
        try:
            m = conn.recv()
        except EOFError:
            break
        n += len(m.records)
    conn.close()

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    a, b = ctx.Pipe(duplex=True)
    p = ctx.Process(target=reader, args=(b,))
    p.start()
    b.close()
    N, batch = 64_000, int(sys.argv[1]) if len(sys.argv) > 1 else 640
    recs = [build_record(id=i, level=0, worker=0, sent_ns=10**12 + i, first_token_ns=10**12 + i + 5,
                         last_token_ns=10**12 + i + 50, end_ns=10**12 + i + 51,
                         chunk_ns=[10**12 + i + 5 + 3 * k for k in range(16)], input_tokens=5, output_tokens=16,
                         requested_input_tokens=5, requested_output_tokens=16) for i in range(N)]
    import wattbench.load.worker as W

    W.RECORDS_PER_MESSAGE = batch  # append sends once this many wait (the worker's rule)
    s = RecordStream(a.send)
    stalls = []
    t0 = time.perf_counter()
    for r in recs:
        t = time.perf_counter()
        s.append(r)
        stalls.append(time.perf_counter() - t)
    s.flush()
    total = time.perf_counter() - t0
    stalls.sort()
    a.close()
    p.join()
    old = time.perf_counter()
    for r in recs[:10000]:
        r.model_dump()
    old = (time.perf_counter() - old) / 10000
    sends = stalls[-(N // batch):]  # the appends that sent a batch
    print(f"batch {batch}: {total / N * 1e6:.2f} us/record in all; an append that sends holds the loop "
          f"{sends[len(sends) // 2] * 1e3:.2f} ms (median), {stalls[-1] * 1e3:.2f} ms (worst); "
          f"the old end-of-level model_dump alone: {old * 1e6:.2f} us/record")
