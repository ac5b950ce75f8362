"""scipy's ``milp`` (HiGHS) for the compiler's 0/1 programs, with what HiGHS prints kept off the user's terminal.

HiGHS 1.12 (as bundled in scipy 1.17) prints debug lines from C++ straight to file descriptor 1, whatever its
options say (``HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();`` during
``rtlgen compile CNV --fit pynq-z2``; ERGO-Code/HiGHS#2783); scipy's ``disp`` (off by default) only
governs its log. So :func:`milp` points fd 1 at ``/dev/null`` for the solve, and ``sys.stdout`` at the
real stdout meanwhile: a progress line another thread prints during a long solve still shows.
(wurlitzer on PyPI captures C-level output the same way, through pipes and a reader thread; for dropping one
solver's stray line around one call, this module is smaller than a new dependency.)
"""

import ctypes
import os
import sys
import threading
from contextlib import contextmanager

__all__ = ["milp", "native_stdout_silenced"]


def milp(*args, **kwargs):
    """``scipy.optimize.milp(*args, **kwargs)`` under :func:`native_stdout_silenced`."""
    from scipy.optimize import milp as scipy_milp      # start-up: scipy.optimize, ~0.35 s
    with native_stdout_silenced():
        return scipy_milp(*args, **kwargs)


@contextmanager
def native_stdout_silenced():
    """File descriptor 1 to ``/dev/null`` for the duration (what C and C++ code print there is dropped);
    ``sys.stdout``, where it wrote to fd 1, writes to the real stdout meanwhile. Restored on any exit,
    an exception or Ctrl-C included. One at a time per process (fd 1 is the process's): the compiler's
    solves run one after another (the optimizer's parallel search forks processes, each its own fd 1)."""
    try:
        sys.stdout.flush()
        _flush_c_stdio()
        saved = os.dup(1)
    except (AttributeError, OSError, ValueError):      # no fd 1 (an embedding host): nothing to keep off it
        saved = None
    if saved is None:
        yield
        return
    python_stdout, standin = sys.stdout, None
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 1)
        finally:
            os.close(null)
        if _writes_to_fd1(python_stdout):
            standin = sys.stdout = _RealStdout(python_stdout, saved)
        yield
    finally:
        # C's stdout is block-buffered when fd 1 is a pipe or a file: what HiGHS printed may still sit in
        # its buffer, and would reach the real stdout at the next flush after fd 1 is back
        _flush_c_stdio()
        if standin is not None:
            standin.done()
            sys.stdout = python_stdout
        os.dup2(saved, 1)
        os.close(saved)


class _RealStdout:
    """``sys.stdout`` while fd 1 is silenced: its text to the real stdout (the saved fd), and once done, to
    the stream it stands in for (a thread may still hold it then)."""

    def __init__(self, stream, fd):
        self._stream, self._fd, self._lock = stream, fd, threading.Lock()

    def write(self, text):
        with self._lock:
            if self._fd is not None:
                data = text.encode(self._stream.encoding or "utf-8", self._stream.errors or "strict")
                while data:
                    data = data[os.write(self._fd, data):]
                return len(text)
        return self._stream.write(text)

    def flush(self):
        with self._lock:
            if self._fd is not None:
                return
        self._stream.flush()

    def done(self):
        with self._lock:
            self._fd = None

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _writes_to_fd1(stream):
    try:
        return stream.fileno() == 1
    except (AttributeError, OSError, ValueError):
        return False


def _flush_c_stdio():
    libc = _libc()
    if libc is not None:
        libc.fflush(None)


_LIBC = []


def _libc():
    if not _LIBC:
        try:
            _LIBC.append(ctypes.CDLL(None))         # the process's own symbols: the C library's stdio
        except OSError:
            _LIBC.append(None)
    return _LIBC[0]
