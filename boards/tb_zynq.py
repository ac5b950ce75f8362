"""cocotb test of the ``zynq`` shell without the PS7: cocotbext-axi's AxiRam is the DDR behind HP0 and
an AxiLiteMaster is the CPU on GP0. Job: ``ddr_size``, ``stalls`` (random pauses on every HP0 channel),
``read_latency`` / ``write_latency`` (cycles from a burst's address handshake to its first read beat, and from
its last write beat to its response: the DDR behind the PS's interconnect; AxiRam alone answers at once),
``batches``: [{"src", "dst", "frames", "input" (hex bytes), "out_bytes", "reset_after" (bool)}].
Result per batch: ``status``, ``done``, ``cycles``, ``output`` (hex bytes at dst), ``polls``. With ``progress``
(a file path): every ``PROGRESS_SECONDS`` of wall clock while a batch runs, ``batch index, frames DONE`` written
there, for the caller's progress line (DONE is read on AXI-Lite, which the accelerator's timing does not see)."""

import itertools
import random
import time
from pathlib import Path

import cocotb
from cocotb.queue import Queue
from cocotb.triggers import ClockCycles, Timer
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam

from boards.zynq import REGISTERS
from sim import tb_job
from sim.axis import CLOCK_NS, reset

POLL_LIMIT = 20_000         # STATUS reads before a batch counts as hung
PROGRESS_SECONDS = 1.0      # wall clock between the frames-done reports (job "progress")
HP_READS_ACCEPTED = 8       # read bursts HP0 takes before its AR waits (UG585: the AFI's read acceptance)


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

    _delay_reads(ram.read_if.ar_channel, job.get("read_latency", 0))
    _delay_responses(ram.write_if.b_channel, job.get("write_latency", 0))

    async def write(name, value):
        await cpu.write_dword(REGISTERS[name], value)

    async def read(name):
        return await cpu.read_dword(REGISTERS[name])

    results = []
    for index, batch in enumerate(job["batches"]):
        ram.write(batch["src"] % job["ddr_size"], bytes.fromhex(batch["input"]))
        ram.write(batch["dst"] % job["ddr_size"], b"\xee" * batch["out_bytes"])
        await write("FRAMES", batch["frames"])
        await write("SRC", batch["src"])
        await write("DST", batch["dst"])
        await write("CTRL", 1)
        polls, status, reported = 0, 0, time.monotonic()
        while polls < POLL_LIMIT:
            status = await read("STATUS")
            polls += 1
            if status & 0b10:
                break
            if job.get("progress") and time.monotonic() - reported > PROGRESS_SECONDS:
                Path(job["progress"]).write_text(f"{index} {await read('DONE')}\n")
                reported = time.monotonic()
            await ClockCycles(dut.clk, 16)
        results.append({"status": status, "polls": polls, "done": await read("DONE"),
                        "cycles": await read("CYCLES"), "magic": await read("MAGIC"),
                        "in_bytes": await read("IN_BYTES"), "out_bytes": await read("OUT_BYTES"),
                        "output": ram.read(batch["dst"] % job["ddr_size"], batch["out_bytes"]).hex()})
        await write("CTRL", 0b110 if batch.get("reset_after") else 0b010)
        await ClockCycles(dut.clk, 4)
    tb_job.store({"batches": results})


def _delay_reads(ar_channel, cycles):
    """AxiRam reads a burst once it takes it from its AR queue: hold each burst there until ``cycles`` clock
    periods after its handshake (stamped as the sink samples it), so bursts in flight overlap their latency
    as they do on the board."""
    if not cycles:
        return
    ar_channel.queue_occupancy_limit = HP_READS_ACCEPTED
    make, recv = ar_channel._transaction_obj, ar_channel.recv

    def stamped():
        obj = make()
        obj.stamp = get_sim_time("ns")
        return obj

    async def delayed():
        ar = await recv()
        wait = ar.stamp + (cycles - 1) * CLOCK_NS - get_sim_time("ns")
        if wait > 0:
            await Timer(wait, "ns")
        return ar

    ar_channel._transaction_obj, ar_channel.recv = stamped, delayed


def _delay_responses(b_channel, cycles):
    """Each write response ``cycles`` clock periods after the burst's last beat, without holding up the
    next burst (AxiRam sends B as it takes the last beat and waits for the send): responses wait in a queue
    of their own, in order."""
    if not cycles:
        return
    send, waiting = b_channel.send, Queue()

    async def forward():
        while True:
            due, b = await waiting.get()
            wait = due - get_sim_time("ns")
            if wait > 0:
                await Timer(wait, "ns")
            await send(b)

    async def delayed(b):
        waiting.put_nowait((get_sim_time("ns") + (cycles - 1) * CLOCK_NS, b))

    cocotb.start_soon(forward())
    b_channel.send = delayed
