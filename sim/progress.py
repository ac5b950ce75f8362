"""Progress of long steps (a Verilator build, a simulation, a Yosys run), for whoever shows it.

The code that runs a step says what it is and, when it knows, how far along it is::

    with progress.task("simulating", total=words) as update:
        update(done)                            # how many of ``total`` are done
        update(description="draining")          # or what it is doing now

A front end (the CLI's rich progress bars) installs a reporter with :func:`reporting`; without one,
as in tests and the Python API, a task costs nothing. A reporter is a callable ``(description, total)``
returning a context manager that yields ``update(completed=None, description=None)``.
"""

from contextlib import contextmanager, nullcontext

__all__ = ["task", "over", "reporting"]

_reporter = None


@contextmanager
def reporting(reporter):
    """Route :func:`task` to ``reporter`` inside the ``with`` block."""
    global _reporter
    previous, _reporter = _reporter, reporter
    try:
        yield
    finally:
        _reporter = previous


@contextmanager
def task(description, total=None):
    """A long step; yields ``update(completed=None, description=None)``."""
    with (_reporter(description, total) if _reporter is not None else nullcontext(_ignore)) as update:
        yield update


def over(items, description):
    """The items of a sequence, as a task counting them."""
    with task(description, total=len(items)) as update:
        for done, item in enumerate(items):
            update(done)
            yield item


def _ignore(completed=None, description=None):
    pass
