"""Independent jobs (a layer's Verilog, a node's proof, a design of a sweep) run in parallel: on a local
process pool by default, or on a Dask distributed cluster with ``--cluster ADDRESS`` (``$RTLGEN_CLUSTER``).

    for index, result in jobs.completed(function, items):       # as each finishes
        ...

``function`` is a module-level function (picklable by name) and each item picklable; results come back to
this process, which keeps every cache and writes every file, so a worker on another machine needs only
rtlgen installed at the same sources (checked: a worker whose sources differ is refused, never used).

Why Dask distributed rather than Ray: it is pure Python and installs from PyPI in seconds with no
services; its ``LocalCluster`` of worker processes runs inside the test suite; a cluster is one
``dask scheduler`` and any number of ``dask worker ADDRESS`` processes (or dask-jobqueue on SLURM/PBS,
dask-kubernetes), and the job runner needs no more of it than submit and as-completed. Ray would do the
same jobs, but its wheel is several times larger and ``ray.init`` starts a native runtime (a GCS server,
a raylet per machine, a dashboard), heavier to start and stop in a test run on 2 cores.

Where the jobs run is a setting of the process (:func:`using`), so that the compile's layer conversion
deep below the CLI needs no parameter threaded through every pass.
"""

import os
import signal
import warnings
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path

from rtlgen.forkpool import forked_map

__all__ = ["ClusterError", "WorkersLost", "completed", "using", "connect", "cluster_address", "local_workers",
           "kill_tree", "ENV"]

ENV = "RTLGEN_CLUSTER"          # the scheduler's address when --cluster is not given
CONNECT_SECONDS = 10            # to reach the scheduler, and for it to have a worker
PACKAGE = "dask[distributed]"   # the extra: pip install 'rtlgen[cluster]'

_SETTING = {"cluster": None, "jobs": None}


class ClusterError(Exception):
    """``--cluster ADDRESS`` cannot be used: Dask missing, no scheduler or no worker there, a worker with
    other sources (one line, exit 2)."""


class WorkersLost(Exception):
    """The local pool broke (a worker killed, e.g. for memory): the caller may run the jobs here instead."""


@contextmanager
def using(cluster=None, jobs=None):
    """Run the jobs started inside this block on the Dask scheduler at ``cluster`` (None: ``$RTLGEN_CLUSTER``
    or a local pool) and, locally, on at most ``jobs`` processes (None: one per core)."""
    saved = dict(_SETTING)
    _SETTING.update(cluster=cluster or saved["cluster"], jobs=jobs or saved["jobs"])
    try:
        yield
    finally:
        _SETTING.update(saved)


def cluster_address(cluster=None):
    """The scheduler address the jobs go to: ``cluster``, else :func:`using`'s, else ``$RTLGEN_CLUSTER``."""
    return cluster or _SETTING["cluster"] or os.environ.get(ENV) or None


def local_workers(jobs=None):
    return max(1, jobs or _SETTING["jobs"] or os.cpu_count() or 1)


def completed(function, items, *, cluster=None, jobs=None, local_from=2, check=None):
    """(index into ``items``, ``function(item)``) for every item, as each finishes. On the Dask cluster of
    :func:`cluster_address` if there is one; else on a pool of :func:`local_workers` processes when there
    are at least ``local_from`` items, in this process otherwise. ``check``: a module-level function whose
    value on a cluster's worker must equal its value here (the sources a result depends on). A job's
    exception is raised here; :class:`WorkersLost` when the local pool broke."""
    items = list(items)
    address = cluster_address(cluster)
    if address:
        yield from _on_cluster(address, function, items, check)
    elif len(items) < max(local_from, 2) or local_workers(jobs) == 1:
        for index, item in enumerate(items):
            yield index, function(item)
    else:
        yield from _on_pool(function, items, min(local_workers(jobs), len(items)))


# ---- a local process pool ----

def _on_pool(function, items, workers):
    # the children run Amaranth and the solvers, never the onnxruntime whose threads the parent may hold
    try:
        yield from forked_map(function, items, workers, initializer=_worker_start)
    except BrokenProcessPool as exc:
        raise WorkersLost(str(exc)) from None


def _worker_start():
    # a terminated worker takes its job's processes with it: a proof's solver lives in a session of its
    # own, which no signal to the worker's process group reaches
    def stop(*_):
        kill_tree(os.getpid(), itself=False)
        os._exit(1)
    signal.signal(signal.SIGTERM, stop)


def kill_tree(pid, itself=True):
    """SIGKILL every process below ``pid`` (and ``pid`` itself): a tool that starts its helpers in process
    groups or sessions of their own (sby: smtbmc and the solver) leaves them running when only its group
    is killed."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo += children.get(p, [])
    for p in tree if itself else tree[1:]:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass                    # already gone


# ---- a Dask distributed cluster ----

_CLIENTS = {}


def connect(cluster=None):
    """Reach the cluster the jobs would go to now (if any), so that a bad address is said before a long
    step rather than at its first job; :class:`ClusterError` if it cannot be used."""
    address = cluster_address(cluster)
    if address:
        _client(address)


def _client(address):
    """A connected :class:`distributed.Client` with at least one worker (one per address per process)."""
    try:
        import distributed
    except ImportError:
        raise ClusterError(f"--cluster {address}: Dask distributed is not installed; pip install '{PACKAGE}' "
                           f"(or rtlgen[cluster])") from None
    client = _CLIENTS.get(address)
    if client is not None and client.status == "running":
        return client
    where = f"--cluster {address}" + (f" (${ENV})" if address == os.environ.get(ENV) else "")
    try:
        _scheduler_listens(address)
        client = distributed.Client(address, timeout=CONNECT_SECONDS, set_as_default=False)
    except (OSError, ValueError, TypeError) as exc:
        raise ClusterError(f"{where}: no Dask scheduler reached ({_first_line(exc)}); start one with "
                           f"`dask scheduler` and workers with `dask worker tcp://HOST:8786`, and give its "
                           f"address as tcp://HOST:PORT") from None
    try:
        client.wait_for_workers(1, timeout=CONNECT_SECONDS)
    except (TimeoutError, OSError) as exc:
        client.close()
        raise ClusterError(f"{where}: the scheduler has no worker ({_first_line(exc)}); start some with "
                           f"`dask worker {address}`") from None
    _CLIENTS[address] = client
    return client


def _scheduler_listens(address):
    """OSError/ValueError unless something accepts a TCP connection at a tcp:// or tls:// ``address``.

    Said before a :class:`distributed.Client` is made, because a Client first starts its IO-loop thread
    and asserts that it started within 10 s: on a loaded machine that assertion, not the address, was what
    failed (an AssertionError from Dask's LoopRunner, seen in the test suite under xdist)."""
    import socket
    from distributed.comm import parse_address
    from distributed.comm.addressing import parse_host_port

    scheme, location = parse_address(address)
    if scheme in ("tcp", "tls"):
        socket.create_connection(parse_host_port(location), timeout=CONNECT_SECONDS).close()


def _on_cluster(address, function, items, check):
    import distributed

    client = _client(address)
    call = function
    if check is not None:
        expected = check()
        call = _Checked(function, check, expected)
    # pure=False: every item is a job of its own (the callers send no duplicates; hashing specs of
    # megabits of weights to find some would cost more than it saves)
    with warnings.catch_warnings():
        # each item goes to one worker once (a layer's weights, a node's spec): nothing to gain from
        # Dask's advice to scatter it first
        warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
        futures = client.map(call, items, pure=False)
    index = {future.key: i for i, future in enumerate(futures)}
    try:
        for future in distributed.as_completed(futures, loop=client.loop):
            yield index[future.key], future.result()
    except BaseException:
        client.cancel(futures)
        raise


class _Checked:
    """``function`` on a worker that first checks ``check()`` there equals ``expected`` (picklable)."""

    def __init__(self, function, check, expected):
        self.function, self.check, self.expected = function, check, expected
        self.__name__ = getattr(function, "__name__", "job")       # Dask names its tasks after it

    def __call__(self, item):
        found = self.check()
        if found != self.expected:
            import socket
            raise ClusterError(f"a Dask worker on {socket.gethostname()} (pid {os.getpid()}) runs other rtlgen "
                               f"sources than this machine ({self.check.__name__}: {str(found)[:12]} there, "
                               f"{str(self.expected)[:12]} here); install the same rtlgen on every worker")
        return self.function(item)


def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
