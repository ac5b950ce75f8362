"""How a cocotb test inside the simulator receives its job and hands back its result (JSON files).

:func:`sim.runner.run_cocotb` writes the job and names the file in ``$RTLGEN_JOB``; the test calls
:func:`load` and, when done, :func:`store`.
"""

import json
import os

__all__ = ["load", "store"]


def _paths():
    return json.loads(open(os.environ["RTLGEN_JOB"]).read())


def load():
    return _paths()["job"]


def store(result):
    with open(_paths()["result"], "w") as f:
        json.dump(result, f)
