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
from wattbench.load.worker import RecordStream
from wattbench.results.schema import build_record

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
    p = ctx.Process(target=reader, args=(b,)); p.start(); b.close()
    N, batch = 64_000, int(sys.argv[1]) if len(sys.argv) > 1 else 640
    recs = [build_record(id=i, level=0, worker=0, sent_ns=10**12 + i, first_token_ns=10**12 + i + 5,
                         last_token_ns=10**12 + i + 50, end_ns=10**12 + i + 51,
                         chunk_ns=[10**12 + i + 5 + 3 * k for k in range(16)], input_tokens=5, output_tokens=16,
                         requested_input_tokens=5, requested_output_tokens=16) for i in range(N)]
    s = RecordStream(a.send)
    app = fl = 0.0
    worst = 0.0
    for k in range(0, N, batch):
        t = time.perf_counter()
        for r in recs[k:k + batch]:
            s.append(r)
        t2 = time.perf_counter()
        s.flush()
        t3 = time.perf_counter()
        app += t2 - t; fl += t3 - t2; worst = max(worst, t3 - t2)
    a.close(); p.join()
    old = time.perf_counter()
    for r in recs[:10000]:
        r.model_dump()
    old = (time.perf_counter() - old) / 10000
    print(f"append {app / N * 1e6:.2f} us/record, flush {fl / N * 1e6:.2f} us/record "
          f"({fl / (N / batch) * 1e3:.2f} ms per {batch}-record batch, worst {worst * 1e3:.2f} ms); "
          f"the old end-of-level model_dump alone: {old * 1e6:.2f} us/record")
