"""Amaranth's Verilog conversions in the test processes, run by one long-lived Yosys process per test process.

The suite converts hundreds of small designs; Amaranth starts a new process for each (Python, wasmtime and the
30 MB ``yosys.wasm`` loaded again: 0.41 s of CPU a small conversion, measured, against 0.04 s with the module
loaded once). Loading the module in the test process itself (``rtlgen.backend.yosys_inprocess``) would make every
pool a test forks afterwards fall back to Amaranth's own process per conversion (wasmtime is not fork-safe), so
the module is loaded in one *spawned* process instead, which runs each conversion in a fresh instance
(``yosys_inprocess.run_yosys``: the same text as Amaranth's own process, tests/test_yosys_inprocess.py). The
test process never loads WebAssembly; a process forked from it (a compile's layer pool) uses Amaranth's or
``yosys_inprocess``'s choice as it would without this.
"""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from amaranth._toolchain.yosys import _BuiltinYosys
from amaranth.back import verilog

from rtlgen.backend import yosys_inprocess

AMARANTH_FIND_YOSYS = verilog.find_yosys
_server = {}            # pid -> the server process: only the process that started it uses it
_lock = threading.Lock()


def _process():
    pid = os.getpid()
    if pid not in _server or _server[pid].poll() is not None:
        _server.clear()         # a forked child's inherited entry is its parent's; a dead server is replaced
        _server[pid] = subprocess.Popen([sys.executable, "-m", "tests.yosys_server"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, cwd=Path(__file__).resolve().parents[1])
    return _server[pid]


def _ask(args, stdin):
    """(exit code, standard output, standard error) of Yosys run by the server: one JSON line each way."""
    with _lock:
        server = _process()
        server.stdin.write((json.dumps([args, stdin]) + "\n").encode())
        server.stdin.flush()
        line = server.stdout.readline()
    if not line:
        raise RuntimeError("the test process's Yosys server stopped (tests/yosys_server.py)")
    return tuple(json.loads(line))


class ServerYosys(_BuiltinYosys):
    """Amaranth's built-in Yosys, run by the test process's Yosys server."""

    @classmethod
    def run(cls, args, stdin="", *, ignore_warnings=False, src_loc_at=0):
        code, stdout, stderr = _ask(list(args), stdin)
        return cls._process_result(code, stdout, stderr, ignore_warnings, src_loc_at)


def install():
    """Route this process's conversions to the server where Amaranth would run its built-in Yosys (and only
    in this process: its forks keep Amaranth's choice). False (nothing changed) where
    ``yosys_inprocess`` would not replace Amaranth's Yosys either (other versions, RTLGEN_YOSYS_IN_PROCESS=0)."""
    if not yosys_inprocess.install():
        return False
    yosys_inprocess.uninstall()
    owner = os.getpid()

    def find_yosys(requirement):
        found = AMARANTH_FIND_YOSYS(requirement)
        return ServerYosys if found is _BuiltinYosys and os.getpid() == owner else found

    verilog.find_yosys = find_yosys
    return True


def serve():
    """The server: each line of standard input a JSON [args, stdin], answered by one JSON line."""
    out = sys.stdout.buffer
    sys.stdout = sys.stderr         # nothing else may write into the answers
    for line in sys.stdin.buffer:
        args, stdin = json.loads(line)
        out.write((json.dumps(yosys_inprocess.run_yosys(args, stdin)) + "\n").encode())
        out.flush()


if __name__ == "__main__":
    serve()
