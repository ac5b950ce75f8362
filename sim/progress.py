"""Progress of long steps (a Verilator build, a simulation, a Yosys run), for whoever shows it.

The code that runs a step says what it is and, when it knows, how far along it is::

    with progress.task("simulating", total=words) as update:
        update(done)                            # how many of ``total`` are done
        update(description="draining")          # or what it is doing now

A step whose caller says its own line when it ends (a compiler pass) is a :func:`step`: no line at its
start or end, but shown while it runs.

A front end installs a reporter with :func:`reporting` (the CLI: rich progress bars on a terminal,
:func:`text_reporter` lines in a log or pipe); without one, as in tests and the Python API, a task
costs nothing. A reporter is a callable ``(description, total)``
returning a context manager that yields ``update(completed=None, description=None)``; one with a
``step(description)`` method of the same kind shows steps too.
"""

import threading
import time
from contextlib import contextmanager, nullcontext

__all__ = ["task", "step", "over", "line_written", "reporting", "text_reporter"]

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


@contextmanager
def step(description):
    """A step whose caller says a line when it is done (a compiler pass): shown while it runs, where the
    reporter shows steps; yields ``update`` as :func:`task` does."""
    show = getattr(_reporter, "step", None)
    with (show(description) if show is not None else nullcontext(_ignore)) as update:
        yield update


def line_written():
    """Tell the reporter that a line was just written beside it (a command's own output): a log's progress
    lines are due only after an interval without any."""
    wrote = getattr(_reporter, "wrote", None)
    if wrote is not None:
        wrote()


def over(items, description):
    """The items of a sequence, as a task counting them."""
    with task(description, total=len(items)) as update:
        for done, item in enumerate(items):
            update(done)
            yield item


def _ignore(completed=None, description=None):
    pass


def text_reporter(write, *, every=10.0):
    """A reporter for logs and pipes: a line when a task starts and when it ends (with its time), and
    while tasks or steps run, a line about the innermost one whenever ``every`` seconds passed without a
    line (with its count, where known), so that a log never goes quiet longer than that; ``write`` takes
    each line."""
    return _TextReporter(write, every)


class _TextReporter:
    """:func:`text_reporter`: one heartbeat thread for all the tasks and steps open at once."""

    def __init__(self, write, every):
        self._write, self.every = write, every
        self.active = []                # the open tasks and steps, innermost last
        self.lock = threading.Lock()
        self.last = time.monotonic()    # when the last line was written
        self.stop = self.thread = None

    def write(self, text):
        self.wrote()
        self._write(text)

    def wrote(self):
        with self.lock:
            self.last = time.monotonic()

    def __call__(self, description, total):
        return self._open(description, total, announce=True)

    def step(self, description):
        return self._open(description, None, announce=False)

    @contextmanager
    def _open(self, description, total, announce):
        state = {"description": description, "completed": None, "total": total, "start": time.monotonic()}
        if announce:
            self.write(f"{description} ...")
        self._push(state)

        def update(completed=None, description=None):
            if completed is not None:
                state["completed"] = completed
            if description is not None:
                state["description"] = description
        try:
            yield update
        finally:
            self._pop(state)
            if announce:
                self.write(f"{state['description']}: done in {time.monotonic() - state['start']:.1f} s")

    def _push(self, state):
        with self.lock:
            self.active.append(state)
            if self.thread is None:
                self.last = max(self.last, state["start"])      # the interval counts from the first step's start
                self.stop = threading.Event()
                self.thread = threading.Thread(target=self._beat, args=(self.stop,), daemon=True)
                self.thread.start()

    def _pop(self, state):
        with self.lock:
            self.active.remove(state)
            thread, stop = (self.thread, self.stop) if not self.active else (None, None)
            if thread is not None:
                self.thread = self.stop = None
        if thread is not None:
            stop.set()
            thread.join()

    def _beat(self, stop):
        while not stop.wait(min(self.every / 10, 0.5)):
            with self.lock:
                if not self.active or time.monotonic() - self.last < self.every:
                    continue
                state = self.active[-1]
            self.write(_running(state))


def _running(state):
    done, total = state["completed"], state["total"]
    count = "" if done is None or total is None else f" ({done:,} of {total:,})"
    return f"{state['description']}{count}: running for {time.monotonic() - state['start']:.0f} s"
