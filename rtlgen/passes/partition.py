"""The partitioner (issue 16): a dataflow graph cut into contiguous segments, one per device, with every
node's folding chosen jointly with the cuts, for the lowest II that every device's budget and every
link's bandwidth allow.

The problem
-----------
The nodes are taken in the graph's (topological) order, ``n_0 .. n_{N-1}``; device ``d`` holds a
contiguous run of them, and the device index never decreases along the order: devices ``0 .. m-1`` hold
one segment each, and the last ``devices - m`` are left empty when a cut would not lower the II.
**Cuts are restricted** to the positions where exactly one stream crosses: between ``n_i`` and
``n_{i+1}`` only if the one tensor written by ``n_0 .. n_i`` (or the graph input) and read by
``n_{i+1} ..`` is the output of ``n_i`` (in a chain: everywhere; in a residual block: not inside the
block). A depthwise SWG and its VVAU, whose foldings the optimizer chooses together, stay together.
Each stream that crosses a cut leaves its device through a :class:`galapagos.ToGalapagosSpec` bridge
(word width: the producer's ``out_width``) and enters the next through a :class:`galapagos.FromGalapagosSpec`
(word width: the consumer's ``in_width``), one frame per packet, ``flit_width``-bit flits; both bridges'
estimates count against their devices. A cut carrying ``bits`` payload bits per frame at II ``T`` moves
``bits * clock_hz / T`` bits/s, at most ``link_bps``: the cut is usable only at ``T >= ceil(bits *
clock_hz / link_bps)`` (its *link bound*), where ``bits`` counts whole flits (the last one padded) plus
the header time of :func:`galapagos.link.header_flits` for each packet of at most ``max_packet_bytes``
(the Ethernet MTU: a frame travels as several packets when it is larger), as the simulation's link model
does. The host (Galapagos' software kernel, on another node) sends the graph input to device 0 and
receives the graph output from the last device over such links too: their bounds are a floor on the II.

The search (bisection over the II, a greedy start, the 0/1 program solved by HiGHS) is in
:mod:`rtlgen.passes.partition_program`; what it returns, in :mod:`rtlgen.passes.partition_plan`.
"""

import time

from galapagos.bridges import MAX_PACKET_BYTES
from rtlgen.passes.partition_plan import Cut, DevicePlan, Partition, PartitionError, legal_cuts
from rtlgen.passes.partition_program import SOLVE_SECONDS, PartitionProgram

__all__ = ["partition", "Partition", "DevicePlan", "Cut", "PartitionError", "legal_cuts", "DEFAULT_FLIT_WIDTH"]

DEFAULT_FLIT_WIDTH = 64         # the 64-bit flits of the HLS Galapagos bridges (1 Gbit/s boards such as the PYNQ-Z2)


def partition(graph, devices, budgets, *, link_gbps=1.0, clock_mhz=100.0, fixed=None,
              flit_width=DEFAULT_FLIT_WIDTH, host_links=True, max_packet_bytes=MAX_PACKET_BYTES,
              solve_seconds=SOLVE_SECONDS):
    """Cut ``graph`` into at most ``devices`` contiguous segments and fold every node, for the lowest II
    (cycles per frame at ``clock_mhz``) that fits each device's :class:`~rtlgen.fit.Budget` (``budgets``:
    one per device, or one for all) and each cut's link (``link_gbps`` Gbit/s of payload per link).
    ``fixed`` maps node names to device indices (a user's partition file): honoured as constraints.
    ``host_links``: the host's links (graph input and output) bound the II too; off when the host
    feeds the first and drains the last device some other way (e.g. the PS's DMA on a one-board run).
    ``max_packet_bytes``: the largest network packet (1,440 B; 8,992 B with jumbo frames).
    ``solve_seconds``: HiGHS's time limit per program; where it is reached the result says so in
    ``solver_note``. ``graph`` is not changed. Formulation and objective: :mod:`rtlgen.passes.partition_program`.

    Raises :class:`PartitionError` (one line) for more devices than the graph has legal parts, a budget
    list of the wrong length, a partition map naming an unknown node, a device out of range or breaking
    contiguity, or when no partition fits at any II."""
    start = time.perf_counter()
    problem = PartitionProgram.build(graph, devices, budgets, link_gbps=link_gbps, clock_mhz=clock_mhz,
                                     fixed=fixed, flit_width=flit_width, host_links=host_links,
                                     max_packet_bytes=max_packet_bytes, solve_seconds=solve_seconds)
    found = problem.smallest()
    if found is None:
        raise PartitionError(problem.no_fit_message())
    ii, (solution, _) = found
    balanced = problem.attempt(ii, balance=True)
    if balanced is not None:
        solution = balanced[0]
    return problem.result(solution, time.perf_counter() - start)
