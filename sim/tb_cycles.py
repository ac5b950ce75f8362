"""Generic cocotb test: clock and reset a design, run until an output reaches a value (or a cycle limit),
then read outputs. For designs without streams at their ports, e.g. the self-test shell.

Job: ``clock``, ``reset``, ``reset_active_high``, ``until`` ([port, value] or null), ``max_cycles``,
``probes`` (ports read at the end). Result: ``cycles`` run, ``reached`` (bool), ``probes``.
"""

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from sim import tb_job
from sim.axis import reset, unsigned_value


@cocotb.test()
async def run_cycles(dut):
    job = tb_job.load()
    await reset(dut, clock=job["clock"], reset=job["reset"], active_high=job["reset_active_high"])
    clk = getattr(dut, job["clock"])
    until = job["until"]
    cycles, reached = 0, False
    while cycles < job["max_cycles"]:
        await RisingEdge(clk)
        cycles += 1
        if until is not None and cycles % 64 == 0:
            await ReadOnly()
            if unsigned_value(getattr(dut, until[0]).value) >= until[1]:
                reached = True
                break
    if not reached:
        await ReadOnly()
    tb_job.store({"cycles": cycles, "reached": reached,
                  "probes": {p: unsigned_value(getattr(dut, p).value) for p in job["probes"]}})
