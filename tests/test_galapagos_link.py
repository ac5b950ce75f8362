"""The network link model: nothing lost or duplicated under random backpressure, exact latency, the wire
rate with header time (measured from the bench's transfer stamps), lossless when the far end is full,
and the probes against the stamps."""

import random
from fractions import Fraction

import pytest

from galapagos.link import LinkModel, LinkSpec
from sim.harness import FULL_RATE, Backpressure, simulate_streams
from tests.conftest import verilog_once
from tests.test_galapagos_bridges import encode_flit


def packets(n, flits_per_packet, fw, seed):
    rng = random.Random(seed)
    return [encode_flit({"tdata": rng.getrandbits(fw), "tkeep": (1 << fw // 8) - 1,
                         "tlast": int(j == flits_per_packet - 1), "tdest": 2, "tid": 1}, fw)
            for _ in range(n) for j in range(flits_per_packet)]


def run(spec, flits, simulator, backpressure=FULL_RATE):
    return simulate_streams(verilog_once(LinkModel, spec), inputs={"i": flits}, outputs={"o": len(flits)},
                            backpressure=backpressure, simulator=simulator,
                            probes=("flits", "packets", "first_end", "last_end", "max_level"))


CASES = [  # flit width, bits per cycle, latency, header flits, flits per packet, depth
    (64, Fraction(10), 50, 9, 5, None),             # 1 Gbit/s at 100 MHz, the PYNQ-Z2's link
    (64, Fraction(32, 3), 7, 2, 3, None),           # a rate that is not a whole number of bits per cycle
    (64, Fraction(64), 2, 0, 4, None),              # one flit per cycle, no headers: a pure delay line
    (512, Fraction(50), 20, 1, 2, 4),               # far-end buffer smaller than what is in flight
]
IDS = [f"fw{c[0]}-r{c[1]}-lat{c[2]}-h{c[3]}-p{c[4]}-d{c[5]}" for c in CASES]


@pytest.mark.sim
@pytest.mark.parametrize("fw, rate, latency, header, per_packet, depth", CASES, ids=IDS)
def test_full_rate_latency_and_wire_rate(fw, rate, latency, header, per_packet, depth, simulator):
    spec = LinkSpec(fw, rate, latency=latency, header_flits=header, depth=depth)
    n = 12
    flits = packets(n, per_packet, fw, seed=n)
    result = run(spec, flits, simulator)
    assert result.words("o") == flits
    ins, outs = result.in_cycles("i"), result.out_cycles("o")
    if depth is None:           # the buffer never fills: every flit arrives exactly `latency` cycles later
        assert [o - i for i, o in zip(ins, outs)] == [latency] * len(flits)
    else:
        assert all(o - i >= latency for i, o in zip(ins, outs))
    # packet ends on the wire, against the wire time computed here: (flits + header flit times) x flit
    # width / bits per cycle per packet, within the one cycle of rounding; a far-end buffer smaller than
    # what the latency keeps in flight can only slow it down
    wire = Fraction((per_packet + header) * fw) / rate
    ends = ins[per_packet - 1::per_packet]
    span = Fraction(ends[-1] - ends[0])
    if depth is None:
        assert abs(span - (n - 1) * wire) <= 1
    else:
        assert span >= (n - 1) * wire - 1
    assert result.probe("packets") == n and result.probe("flits") == len(flits)
    assert result.probe("last_end") - result.probe("first_end") == ends[-1] - ends[0]
    assert 1 <= result.probe("max_level") <= spec.depth


@pytest.mark.sim
@pytest.mark.parametrize("fw, rate, latency, header, per_packet, depth", CASES, ids=IDS)
def test_random_backpressure_loses_nothing(fw, rate, latency, header, per_packet, depth, simulator):
    spec = LinkSpec(fw, rate, latency=latency, header_flits=header, depth=depth)
    flits = packets(10, per_packet, fw, seed=3)
    result = run(spec, flits, simulator, Backpressure(seed=5, valid_prob=0.6, ready_prob=0.3))
    assert result.words("o") == flits
    assert all(o - i >= latency for i, o in zip(result.in_cycles("i"), result.out_cycles("o")))
    assert result.probe("max_level") <= spec.depth


def test_spec_figures_and_bad_parameters():
    spec = LinkSpec.ethernet(64, link_gbps=1.0, clock_mhz=100.0)
    assert spec.bits_per_cycle == 10 and spec.flit_cycles == Fraction(32, 5)
    assert spec.header_flits == 10 and spec.packet_cycles(13) == Fraction(23 * 64, 10)
    assert spec.frame_cycles([180, 180, 40]) == Fraction((400 + 30) * 64, 10)
    assert spec.in_flight == 79 + 2 and spec.depth == spec.in_flight + 64
    with pytest.raises(ValueError, match="flit_width must be one of 64, 512"):
        LinkSpec(32, 10)
    with pytest.raises(ValueError, match="latency must be an integer >= 2"):
        LinkSpec(64, 10, latency=1)
    with pytest.raises(ValueError, match="bits_per_cycle must be positive"):
        LinkSpec(64, 0)
