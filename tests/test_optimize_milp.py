"""Issue 42 (known gap): what HiGHS prints from C++ to file descriptor 1 during the compiler's 0/1 programs
(``HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();`` in ``rtlgen compile CNV
--fit``) never reaches the user's terminal (rtlgen/passes/milp.py), while Python's own lines still do, and
fd 1 is back afterwards, also after an exception."""

import os
import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import Bounds, LinearConstraint
from scipy.optimize import milp as scipy_milp

from rtlgen.passes.milp import milp, native_stdout_silenced

# a 0/1 program whose HiGHS log (disp) goes to fd 1 from C++: a stand-in for HiGHS's unconditional debug lines
PROGRAM = dict(c=np.array([1.0, 2.0, 3.0]), constraints=[LinearConstraint(np.ones((1, 3)), 2, 2)],
               integrality=np.ones(3), bounds=Bounds(0, 1), options={"disp": True})


def test_highs_output_does_not_reach_fd_1(capfd):
    scipy_milp(**PROGRAM)
    assert "HiGHS" in capfd.readouterr().out          # the program does print (else this test proves nothing)
    result = milp(**PROGRAM)
    print("after the solve")
    assert result.status == 0 and result.x.round().tolist() == [1, 1, 0]
    assert capfd.readouterr().out == "after the solve\n"


def test_fd_1_is_restored_after_an_exception(capfd):
    with pytest.raises(KeyboardInterrupt):
        with native_stdout_silenced():
            raise KeyboardInterrupt
    os.write(1, b"fd 1 is back\n")
    assert capfd.readouterr().out == "fd 1 is back\n"


SCRIPT = """
import ctypes
from rtlgen.passes.milp import native_stdout_silenced
libc = ctypes.CDLL(None)
libc.printf(b"before\\n")                 # C's stdout made block-buffered (fd 1 a pipe), this line kept in it
with native_stdout_silenced():
    libc.printf(b"native line\\n")          # into the same buffer
    print("python line", flush=True)       # a progress line from Python, meanwhile
print("after")
"""


def test_buffered_native_lines_are_dropped_and_python_lines_kept():
    # stdout a pipe, as in a log: C's stdout is block-buffered there, so what C printed before must be
    # flushed to the pipe before fd 1 moves, and the native line into /dev/null before fd 1 comes back
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}     # which would unbuffer C's stdout
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, env=env,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))).stdout
    assert out == "before\npython line\nafter\n"
