"""Ray's load actors without Ray, at the executor's seam (``distributed.executor``'s ``calls``).

The actor is the real ``distributed.actors.LoadWorker``; what Ray adds around it is replaced by a
thread pool of two threads per actor, which is how Ray runs a threaded actor (``max_concurrency=2``:
the level's run and the driver's progress polls, stops and cancels at the same time, in no
guaranteed order). ``thread_call(actor, method, *args)`` returns a ``concurrent.futures.Future`` as
``ObjectRef.future()`` does, carrying the method's exception when it raises (as a task error or a
dead actor does in Ray)."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

from wattbench.distributed.executor import LoadActor


class ThreadedActor:
    def __init__(self, obj, concurrency: int = 2):
        self.obj = obj
        self.pool = ThreadPoolExecutor(concurrency, thread_name_prefix=f"actor-{obj.index}")


def thread_call(handle: ThreadedActor, method: str, *args) -> Future:
    return handle.pool.submit(getattr(handle.obj, method), *args)


@contextmanager
def threaded_actors(workers):
    """``LoadActor``s (as ``RayCluster`` knows them: node ``node{i}``, host ``host{i}``) over the
    given ``LoadWorker`` objects; the threads are joined on exit."""
    handles = [ThreadedActor(w) for w in workers]
    try:
        yield [LoadActor(h, w.index, f"node{w.index}", f"host{w.index}", "127.0.0.1") for h, w in zip(handles, workers)]
    finally:
        for h in handles:
            h.pool.shutdown(wait=True)
