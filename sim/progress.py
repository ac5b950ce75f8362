"""Progress of long steps (a Verilator build, a simulation, a Yosys run), for whoever shows it.

The code that runs a step says what it is and, when it knows, how far along it is::

    with progress.task("simulating", total=words) as update:
        update(done)                            # how many of ``total`` are done
        update(description="draining")          # or what it is doing now

A front end installs a reporter with :func:`reporting` (the CLI: rich progress bars on a terminal,
:func:`text_reporter` lines in a log or pipe); without one, as in tests and the Python API, a task
costs nothing. A reporter is a callable ``(description, total)``
returning a context manager that yields ``update(completed=None, description=None)``.
"""

from contextlib import contextmanager, nullcontext

__all__ = ["task", "over", "reporting", "text_reporter"]

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


def text_reporter(write, *, every=10.0):
    """A reporter for logs and pipes: a line when a task starts, one every ``every`` seconds while it runs
    (with its count, where known), and one when it ends, with its time; ``write`` takes each line."""
    import threading
    import time

    @contextmanager
    def reporter(description, total):
        state = {"description": description, "completed": None}
        start = time.monotonic()
        done = threading.Event()

        def line(what):
            count = "" if state["completed"] is None or total is None else f" ({state['completed']:,} of {total:,})"
            return f"{state['description']}{count}: {what} {time.monotonic() - start:.0f} s"

        def heartbeat():
            while not done.wait(every):
                write(line("running for"))

        write(f"{description} ...")
        thread = threading.Thread(target=heartbeat, daemon=True)
        thread.start()

        def update(completed=None, description=None):
            if completed is not None:
                state["completed"] = completed
            if description is not None:
                state["description"] = description
        try:
            yield update
        finally:
            done.set()
            thread.join()
            write(f"{state['description']}: done in {time.monotonic() - start:.1f} s")
    return reporter
