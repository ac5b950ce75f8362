"""cocotb test of the ``zynq`` shell without the PS7: cocotbext-axi's AxiRam is the DDR behind HP0 and
an AxiLiteMaster is the CPU on GP0. Job: ``ddr_size``, ``stalls`` (random pauses on every HP0 channel),
``batches``: [{"src", "dst", "frames", "input" (hex bytes), "out_bytes", "reset_after" (bool)}].
Result per batch: ``status``, ``done``, ``cycles``, ``output`` (hex bytes at dst), ``polls``."""

import itertools
import random

import cocotb
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam

from boards.zynq import REGISTERS
from sim import tb_job
from sim.axis import reset

POLL_LIMIT = 20_000         # STATUS reads before a batch counts as hung


def _pauses(seed):
    rng = random.Random(seed)
    return itertools.cycle([rng.random() < 0.4 for _ in range(1009)])


@cocotb.test()
async def run_batches(dut):
    job = tb_job.load()
    await reset(dut, clock="clk", reset="rst", active_high=True)
    cpu = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_control_"), dut.clk, dut.rst)
    ram = AxiRam(AxiBus.from_prefix(dut, "m_axi_hp0_"), dut.clk, dut.rst, size=job["ddr_size"])
    if job["stalls"]:
        for k, channel in enumerate((ram.write_if.aw_channel, ram.write_if.w_channel, ram.write_if.b_channel,
                                     ram.read_if.ar_channel, ram.read_if.r_channel)):
            channel.set_pause_generator(_pauses(k))

    async def write(name, value):
        await cpu.write_dword(REGISTERS[name], value)

    async def read(name):
        return await cpu.read_dword(REGISTERS[name])

    results = []
    for batch in job["batches"]:
        ram.write(batch["src"] % job["ddr_size"], bytes.fromhex(batch["input"]))
        ram.write(batch["dst"] % job["ddr_size"], b"\xee" * batch["out_bytes"])
        await write("FRAMES", batch["frames"])
        await write("SRC", batch["src"])
        await write("DST", batch["dst"])
        await write("CTRL", 1)
        polls, status = 0, 0
        while polls < POLL_LIMIT:
            status = await read("STATUS")
            polls += 1
            if status & 0b10:
                break
            await ClockCycles(dut.clk, 16)
        results.append({"status": status, "polls": polls, "done": await read("DONE"),
                        "cycles": await read("CYCLES"), "magic": await read("MAGIC"),
                        "in_bytes": await read("IN_BYTES"), "out_bytes": await read("OUT_BYTES"),
                        "output": ram.read(batch["dst"] % job["ddr_size"], batch["out_bytes"]).hex()})
        await write("CTRL", 0b110 if batch.get("reset_after") else 0b010)
        await ClockCycles(dut.clk, 4)
    tb_job.store({"batches": results})
