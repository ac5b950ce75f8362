"""The folding optimizer's worker processes (issue 42 item 1): forked, so that they inherit the graph
(weights and all) and the optimizer's caches instead of receiving them, and send back only what they
computed.

- :func:`fork_map`: independent jobs on a pool of one process per core (the candidates' costs);
- :class:`Forked`: one call run in a forked process beside this one (the spilled search while this process
  runs the plain one: two searches of MILP solves, each serial, independent of each other).

Nothing is decided in a worker that this process would decide otherwise: a worker runs the same
deterministic code on the same inherited state, so its answer is the one this process would have
computed (``tests/test_optimize_workers.py`` checks the optimizer's folding equal with and without them).
Where a process is lost (memory) or cannot be forked, the caller computes the same thing itself.
"""

import multiprocessing
import os
import traceback
from concurrent.futures.process import BrokenProcessPool

from rtlgen.forkpool import forked_map

__all__ = ["fork_map", "Forked", "WorkerLost", "cores", "cost_on_workers", "PARALLEL_FROM", "CHUNK"]

PARALLEL_FROM = 2000    # candidate foldings not yet costed worth forking worker processes for
CHUNK = 1000            # candidates per job


class WorkerLost(Exception):
    """A worker process died before it answered (killed for memory, a crash): compute it here instead."""


def cores():
    """Worker processes worth forking: one per core, at most 8."""
    return min(os.cpu_count() or 1, 8)


def fork_map(function, jobs, workers):
    """``function(job)`` for every job, on ``workers`` forked processes, as each finishes (unordered).
    ``function`` reads what it needs from module state the workers inherit. Raises :class:`WorkerLost`
    when the pool broke; on Ctrl-C or an error the workers are stopped at once (:mod:`rtlgen.forkpool`)."""
    try:
        for _, result in forked_map(function, jobs, workers):
            yield result
    except BrokenProcessPool as exc:
        raise WorkerLost(str(exc)) from None


def cost_on_workers(costs, groups, key_of, cost_of):
    """Put into ``costs`` ({key: cost}) the cost of every candidate of ``groups`` ([(nodes, candidates)])
    not in it yet, computed on worker processes (one per core), each job a slice of one group's
    candidates: ``key_of(nodes, candidate)`` its key (None: not remembered), ``cost_of(nodes, candidate)``
    its cost. The workers inherit the groups (weights and all) and send back the costs only. Where a pool
    is not worth it (one core, fewer than :data:`PARALLEL_FROM` to cost) or breaks, nothing or part is put
    in, and the caller computes the rest as it would have. Returns the number of candidates in ``groups``."""
    global _WORK
    jobs, keys = [], []
    for g, (nodes, candidates) in enumerate(groups):
        todo = [(c, key) for c in candidates if (key := key_of(nodes, c)) is not None and key not in costs]
        for i in range(0, len(todo), CHUNK):
            jobs.append((len(keys), g, [c for c, _ in todo[i:i + CHUNK]]))
            keys.append([key for _, key in todo[i:i + CHUNK]])
    count = sum(len(candidates) for _, candidates in groups)
    if cores() < 2 or sum(len(k) for k in keys) < PARALLEL_FROM:
        return count
    _WORK = groups, cost_of
    try:
        for job, found in fork_map(_cost_job, jobs, cores()):     # the costs in the job's order: its keys
            costs.update(zip(keys[job], found))                   # are not sent back and forth
    except WorkerLost:
        pass                        # a worker lost (memory): the caller costs the rest
    finally:
        _WORK = None
    return count


_WORK = None            # (groups, cost_of) while the workers are forked: inherited, not pickled


def _cost_job(job):
    """In a worker: (the job's number, [cost of each of its candidates of one group])."""
    groups, cost_of = _WORK
    number, g, candidates = job
    nodes = groups[g][0]
    return number, [cost_of(nodes, c) for c in candidates]


class Forked:
    """``function()`` started now in a forked child (which inherits this process's state as it is at this
    moment); :meth:`result` waits for its value. An exception in the child is raised again by
    :meth:`result` when it can be sent back (else :class:`WorkerLost`, as when the child dies)."""

    def __init__(self, function):
        context = multiprocessing.get_context("fork")
        self._receive, send = context.Pipe(duplex=False)
        self._process = context.Process(target=_run_and_send, args=(function, send))
        self._process.start()
        send.close()                # the child's end: EOF here when the child dies without an answer

    def result(self):
        try:
            try:
                ok, value = self._receive.recv()
            except (EOFError, OSError):
                raise WorkerLost(f"the forked process {self._process.pid} ended without an answer "
                                 f"(exit code {self._process.exitcode})") from None
            if ok:
                return value
            raise value
        finally:
            self.cancel()

    def cancel(self):
        """Stop the child (if still running) and release it."""
        if self._process.is_alive():
            self._process.terminate()
        self._process.join()
        self._receive.close()


def _run_and_send(function, send):
    try:
        answer = (True, function())
    except BaseException as exc:       # sent back to be raised there
        answer = (False, exc)
    try:
        send.send(answer)
    except Exception as exc:            # an answer or an exception that does not pickle
        what = "".join(traceback.format_exception(answer[1])) if not answer[0] else f"its answer: {exc}"
        send.send((False, WorkerLost(f"the forked process could not send back {what}")))
    finally:
        send.close()
        os._exit(0)                     # not the parent's atexit handlers and buffers: they are its own
