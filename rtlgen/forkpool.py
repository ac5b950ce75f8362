"""A pool of forked worker processes that stops at once: what the compile's jobs (:mod:`rtlgen.backend.jobs`)
and the folding optimizer's workers (:mod:`rtlgen.passes.optimize_workers`) both run on.

Forked, not spawned: the workers inherit the caller's state (a graph and its weights, the optimizer's
caches) instead of receiving it, and spawn would re-import the caller's ``__main__``, which breaks unguarded
user scripts. Leaving the block on an error, Ctrl-C or a caller that stops reading drops the queued jobs and
terminates the workers now (``ProcessPoolExecutor`` alone waits for every queued job: minutes on CNV)."""

import multiprocessing
from concurrent.futures import ProcessPoolExecutor, as_completed

__all__ = ["forked_map"]


def forked_map(function, items, workers, initializer=None):
    """``(index, function(item))`` for every item, as each finishes, on ``workers`` forked processes.
    A worker that dies raises ``concurrent.futures.process.BrokenProcessPool``."""
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=initializer) as pool:
        futures = {pool.submit(function, item): index for index, item in enumerate(items)}
        try:
            for future in as_completed(futures):
                yield futures[future], future.result()
        except BaseException:
            processes = list((getattr(pool, "_processes", None) or {}).values())   # shutdown forgets them
            pool.shutdown(wait=False, cancel_futures=True)
            for process in processes:
                process.terminate()
            raise
