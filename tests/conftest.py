import os

import pytest

from sim.runner import available_simulators, default_simulator


def simulators_under_test():
    """Every installed simulator (CI installs both); RTLGEN_SIM narrows it to one."""
    if os.environ.get("RTLGEN_SIM"):
        return [os.environ["RTLGEN_SIM"]]
    return available_simulators()


@pytest.fixture
def simulator():
    """The simulator for grid tests: RTLGEN_SIM, else Icarus when installed (fast builds), else Verilator."""
    return default_simulator()


def pytest_report_header(config):
    return f"rtlgen simulators: {', '.join(available_simulators())}; grid tests use {default_simulator()}"


# Simulation examples cost about a second each: generate, do not spend minutes shrinking a failure
# (the failing example is printed either way).
from hypothesis import Phase, settings  # noqa: E402

settings.register_profile("rtlgen", deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate),
                          print_blob=True)
settings.load_profile("rtlgen")
