"""The delay model distributed arithmetic places its registers by (:mod:`layers.distributed`), and the
greedy placement itself: each register as late as the clock allows along a channel's steps.

xc7z020 -1: Yosys's xc7 cell library (techlibs/xilinx/cells_sim.v specify blocks) with boards/timing.py's
routing model (0.5 ns a routed net, 0.3 ns setup and clock uncertainty), the model the Fmax estimate of
`rtlgen build` uses.
"""

import math

from layers.bit_heap import LUT_INPUTS, tie_groups

__all__ = ["NET_NS", "SETUP_NS", "CLOCK_TO_Q_NS", "LUT_NS", "NEXT_FIFO_NS", "counter_ns", "carry_chain_ns",
           "tie_ns", "cycle_budget_ns", "place_registers"]

NET_NS = 0.5
SETUP_NS = 0.3
CLOCK_TO_Q_NS = 0.303           # FDRE C -> Q
LUT_NS = {1: 0.127, 2: 0.238, 3: 0.407, 4: 0.472, 5: 0.631, 6: 0.642}    # LUTk, its slowest pin (I0)
LUT6_NS = LUT_NS[6]
LUT2_NS = LUT_NS[2]             # an adder bit's LUT2
CARRY_IN_NS = 0.508             # CARRY4 S[0] -> CO[3]
CARRY_THROUGH_NS = 0.114        # CARRY4 CI -> CO[3], per further CARRY4
CARRY_OUT_NS = 0.313            # CARRY4 CI -> O[3]
LUT3_NS = 0.407                 # LUT3, slowest pin
# The FIFO the stitcher puts behind the layer takes its word through its fall-through mux (a net, a LUT3)
NEXT_FIFO_NS = NET_NS + LUT3_NS


def counter_ns(inputs=LUT_INPUTS):
    """A level of counters of at most ``inputs`` bits: a net into a LUT of that many inputs."""
    return NET_NS + LUT_NS[max(1, min(LUT_INPUTS, inputs))]


def carry_chain_ns(width, rows=2):
    """The last ``rows`` rows of ``width`` bits added by one carry chain: a net, each bit's LUT (two rows: a
    LUT2; three, a ternary adder: a LUT6 of its column's three bits and the three below, the chain's S, from
    a module of its own, :class:`layers.bit_heap.TernaryFront`), the net from the LUT to the CARRY4 (a routed
    net to the Fmax estimate, which counts all but the chain's own: left out, the pruned jet tagger's MVAU_1
    planned for 200 MHz was ~183 MHz by it), the chain to its top bit."""
    front = LUT2_NS if rows <= 2 else LUT6_NS
    return 2 * NET_NS + front + CARRY_IN_NS + CARRY_THROUGH_NS * max(0, math.ceil(width / 4) - 2) + CARRY_OUT_NS


def tie_ns(bits, rows=2):
    """Half-even's tie beside the carry chain (:class:`layers.bit_heap.TieTest`), from the chain's inputs:
    whether its low ``bits`` bits come out all zero, from its operands (three rows: from its S and DI, a
    LUT6 after the rows; two: the rows): bit i is zero iff its operands' parity equals the carry into it,
    and the carry into i, given the bits below zero, is the OR of bit i-1's operands, so the tests of bits
    i..j need the operands of i-1..j alone: a LUT6 tests bits 0-2, then two bits each; then their AND, a
    LUT level for each factor of six."""
    levels, terms = 1, len(tie_groups(bits))
    while terms > 1:
        terms, levels = -(-terms // LUT_INPUTS), levels + 1
    return (NET_NS + LUT6_NS) * (levels + (rows > 2))


def cycle_budget_ns(clock_mhz):
    """What logic may take between two registers: the period less clock-to-out, the last net and setup."""
    return 1000.0 / clock_mhz - CLOCK_TO_Q_NS - NET_NS - SETUP_NS


def place_registers(steps, budget, start_ns=0.0, end_ns=NEXT_FIFO_NS):
    """Step indices after which a register goes: greedily, as late as the budget allows, from ``start_ns``
    already used (a chained producer's tail); the last segment also carries ``end_ns`` (the next FIFO's
    mux; where the last step alone leaves no room for it, a register after the last step). -1 first: the first
    step does not fit after ``start_ns`` (a register on the input)."""
    registers, used = [], start_ns
    for k, (_, ns) in enumerate(steps):
        last = k == len(steps) - 1
        need = ns + (end_ns if last else 0.0)
        if used > 0 and used + need > budget:
            if k == 0 and used + ns <= budget:     # the one step fits after the input, the next FIFO's
                return [k]                          # mux does not: the register after it, not on the input
            registers.append(k - 1)
            used = 0.0
        used += ns
        if last and used <= budget < used + end_ns:
            registers.append(k)     # the last step alone leaves no room for what takes the output: registered
    return registers
