"""Generic cocotb test: stream words through a design's AXI-Stream ports (job from :mod:`sim.harness`)."""

import cocotb

from sim import tb_job
from sim.axis import StreamBench, unsigned_value, reset


@cocotb.test()
async def stream_words(dut):
    job = tb_job.load()
    for name in job["tie_low"]:
        getattr(dut, name).value = 0
    bench = StreamBench(
        dut,
        sources={n: (s["ports"], [int(w, 16) for w in s["words"]]) for n, s in job["sources"].items()},
        sinks={n: (s["ports"], s["count"]) for n, s in job["sinks"].items()},
        clock=job["clock"], seed=job["seed"], valid_prob=job["valid_prob"], ready_prob=job["ready_prob"],
    )
    await reset(dut, clock=job["clock"], reset=job["reset"], active_high=job["reset_active_high"])
    responses = await _axilite_writes(dut, job)
    result = await bench.run(max_cycles=job["max_cycles"], drain=job["drain"])
    result["axilite_responses"] = responses
    result["probes"] = {name: unsigned_value(getattr(dut, name).value) for name in job["probes"]}
    tb_job.store(result)


async def _axilite_writes(dut, job):
    """Runtime writes before streaming (e.g. weights or thresholds); returns the BRESP of each."""
    if not job.get("axilite_writes"):
        return []
    from cocotbext.axi import AxiLiteBus, AxiLiteMaster     # test extra: only benches with writes need it

    clock, reset_signal = getattr(dut, job["clock"]), getattr(dut, job["reset"])
    master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, job["axilite_prefix"]), clock, reset_signal,
                           reset_active_level=job["reset_active_high"])
    responses = []
    for addr, data in job["axilite_writes"]:
        resp = await master.write(addr, int(data).to_bytes(4, "little"))
        responses.append(int(resp.resp))
    return responses
