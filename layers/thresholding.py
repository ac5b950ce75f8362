"""Thresholding: y = ActVal + #{i : T[c, i] <= x} per channel, by a pipelined binary search.

The same search unit follows the MVAU and VVAU accumulators. Each of its N = ceil(log2(S + 1)) stages
decides one bit of the count (MSB first) with one compare against one threshold read from a small
per-stage memory, so 255 thresholds cost 8 comparators per lane, not 255.
"""

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from qonnx.core.datatype import DataType
from amaranth.hdl import C, Cat, Const, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from layers.datapath import (ChannelFolded, check_dtype, check_fits, ceil_thresholds, dtype_for_range, dtype_range, element_value,
                             legal_divisors, output_stage, register, shape_for_range, wrapping_increment)
from memstream.axilite import AXILiteSignature, accept_writes, refuse_reads
from memstream.memstream import BRAM_OR_LUT_STYLES
from layers.memcost import bram18_count, rom_bram_cost, rom_luts
from layers.timing import one_to_one
from layers.op import ArrayMemo, Lowering, Op, Resources, divisors_of, grid_examples, random_elements
from layers.small import shrink_channels
import golden
from layers.requant import requant_form
from layers.requant_hw import REQUANT_STAGES, requantize


__all__ = ["ThresholdTable", "ThresholdingSpec", "Thresholding", "threshold_search"]

RAM_STYLES = BRAM_OR_LUT_STYLES
AUTO_BRAM_MIN_DEPTH = 512        # ram_style auto: a stage's thresholds in block RAM from this many entries per lane
# a LUT ROM stage this deep folds into its compare's LUTs (the cost corpus, Yosys: held-out LUT median 4.6 %
# against 5.1 % counting its ROM, Thresholding records 6.0 % against 13.0 %; 8 entries: worse held out)
FOLDED_STAGE_DEPTH = 4
_VARYING_BITS = ArrayMemo()      # per thresholds array and PE: the bits of each stage's entries that vary
_CHECKED = ArrayMemo()           # thresholds arrays rounded up and checked ascending
_COSTS = ArrayMemo()             # per thresholds array: resource estimates per layout and ram_style


@dataclass(frozen=True, eq=False)
class ThresholdTable:
    """Ascending thresholds for ``channels`` channels compared against integers in ``value_range``.

    ``thresholds`` has shape (channels, S) or (1, S) (one row for every channel). The table clips each
    threshold to [lo, hi + 1] (same counts for every input in range) and pads each row to 2^N - 1
    entries with hi + 1, which no input reaches.
    """
    owner: str                  # layer kind, for error messages
    thresholds: np.ndarray      # (channels or 1, S) numbers, ascending per row
    channels: int
    pe: int
    value_range: tuple          # (lo, hi): every value the unit will compare
    writable_range: tuple = None    # (lo, hi) of thresholds that may be written at run time

    def __post_init__(self):
        object.__setattr__(self, "_source", self.thresholds)     # the caller's array: the memo's key
        t = np.asarray(self.thresholds)
        if t.ndim != 2 or t.shape[0] not in (1, self.channels) or t.shape[1] < 1:
            raise ValueError(f"{self.owner} thresholds must have shape ({self.channels}, S) or (1, S) with S >= 1, "
                             f"not {t.shape}")
        t = _CHECKED.get(self._source, ("checked", self.owner), lambda: self._checked(t))
        object.__setattr__(self, "thresholds", np.broadcast_to(t, (self.channels, t.shape[1])))

    def _checked(self, t):
        """The thresholds rounded up to integers (:func:`ceil_thresholds`), each row ascending."""
        t = ceil_thresholds(t, self.owner)
        bad = np.flatnonzero(np.any(np.diff(t, axis=1) < 0, axis=1))
        if len(bad):
            raise ValueError(f"{self.owner} thresholds row {bad[0]} is not ascending: {t[bad[0]].tolist()}")
        return t

    @property
    def steps(self):
        """S: thresholds per channel, so counts run 0..S."""
        return self.thresholds.shape[1]

    @property
    def stages(self):
        """N: bits of the count, one search stage each."""
        return self.steps.bit_length()

    @property
    def cf(self):
        return self.channels // self.pe

    @property
    def storage_shape(self):
        lo, hi = self.value_range
        wlo, whi = self.writable_range or (lo, hi)
        return shape_for_range(min(lo, wlo), max(hi + 1, whi))

    @property
    def index_bits(self):
        """Address bits of a threshold within its channel (FINN's AXI-Lite map: 2^N slots)."""
        return self.stages

    def resource_estimate(self, ram_style="auto"):
        """(LUT, FF, BRAM18) of the search unit: a compare per stage and lane, each stage's thresholds
        in LUT ROM or BRAM18 (:meth:`stage_ram_style`). A LUT ROM stage of up to
        :data:`FOLDED_STAGE_DEPTH` entries costs nothing of its own: each threshold bit is a function of
        two address bits, which the compare's LUT for that bit takes in beside the accumulator's bit.
        Remembered per thresholds array: the folding optimizer asks for every folding it tries."""
        key = ("cost", self.owner, self.channels, self.pe, tuple(self.value_range),
               None if self.writable_range is None else tuple(self.writable_range), ram_style)
        return _COSTS.get(self._source, key, lambda: self._resource_estimate(ram_style))

    def _resource_estimate(self, ram_style):
        width, lut, bram18 = self.storage_shape.width, 0, 0
        for s in range(self.stages):
            depth = self.cf << s
            if self.stage_ram_style(s, ram_style) == "block" and self.writable_range is None:
                # a ROM: Yosys folds it into a block's depth (UINT8 thresholds of 64 channels, PE 1:
                # the 8,192 x 24 stage in 11 RAMB18 with a 4:1 mux, where 12 would tile it)
                blocks, mux = rom_bram_cost(width, depth)
                bram18, lut = bram18 + self.pe * blocks, lut + self.pe * mux
            elif self.stage_ram_style(s, ram_style) == "block":
                bram18 += self.pe * bram18_count(width, depth)
            elif depth > FOLDED_STAGE_DEPTH or self.writable_range is not None:
                lut += sum(n * rom_luts(bits, depth) for bits, n in Counter(self._varying_bits(s)).items())
            lut += self.pe * width
        ff = self.pe * self.stages * (width + self.stages)
        return lut, ff, bram18

    def _varying_bits(self, stage):
        """Per lane, the bits of stage ``stage``'s thresholds that are not the same in every entry: a
        constant bit of a LUT ROM costs nothing (thresholds of one layer share their high bits, e.g.
        TFC-w1a1's MVAU_1: 7 bits stored, 4 to 5 varying per lane). All bits if writable at run time.
        Remembered per thresholds array: the folding optimizer asks for every PE it tries."""
        if self.writable_range is not None:
            return [self.storage_shape.width] * self.pe
        key = ("varying bits", self.pe, tuple(self.value_range))
        return _VARYING_BITS.get(self._source, key, self._all_varying_bits)[stage]

    def _all_varying_bits(self):
        mask = (1 << self.storage_shape.width) - 1
        changed = [np.bitwise_or.reduce((codes & mask) ^ (codes[:, :1] & mask), axis=1) for codes in self.stage_images()]
        return [[int(c).bit_count() for c in stage] for stage in changed]

    def stage_ram_style(self, stage, ram_style="auto"):
        """Where stage ``stage``'s thresholds are built, as Yosys is told: ``ram_style`` unless auto, which
        is block RAM from :data:`AUTO_BRAM_MIN_DEPTH` entries per lane and LUTs below (so that the
        estimate and the hardware agree)."""
        if ram_style != "auto":
            return ram_style
        return "block" if self.cf << stage >= AUTO_BRAM_MIN_DEPTH else "distributed"

    def padded(self):
        """(channels, 2^N - 1) thresholds clipped to [lo, hi + 1], padded with hi + 1."""
        lo, hi = self.value_range
        full = np.full((self.channels, (1 << self.stages) - 1), hi + 1, dtype=np.int64)
        full[:, :self.steps] = np.clip(self.thresholds, lo, hi + 1)
        return full

    def stage_images(self):
        """Memory contents: ``images[s][pe][(cf << s) | i] = T[cf*PE + pe][(2i + 1) * 2^(N-1-s) - 1]``.

        Stage s decides count bit N-1-s, having the s higher bits as ``i`` (FINN's RTL layout).
        """
        full, n = self.padded(), self.stages
        images = []
        for s in range(n):
            idx = (2 * np.arange(1 << s) + 1) * (1 << (n - 1 - s)) - 1
            per_channel = full[:, idx]                                    # (channels, 2^s)
            lanes = per_channel.reshape(self.cf, self.pe, 1 << s).transpose(1, 0, 2)
            images.append(lanes.reshape(self.pe, -1))
        return images


def threshold_search(m, advance, valid, values, cf, table, *, ram_style="auto", writer=None, name="thr"):
    """Build the search pipeline; returns (valid, counts) ``table.stages`` register stages later.

    ``values`` holds one Amaranth value per lane, ``cf`` the channel fold of this word. ``counts``
    are combinational from the last stage (compare on the last memory's read data). ``writer``
    (strobe, lane, cf, index, data) rewrites threshold ``index`` of one channel: the entry of the
    stage whose search visits it, see :meth:`ThresholdTable.stage_images`.
    """
    style_attr = "rom_style" if writer is None else "ram_style"
    n = table.stages
    if writer is not None:
        strobe, w_lane, w_cf, w_index, w_data = writer
        slot = w_index + 1      # threshold i sits at stage s where i + 1 = (2p + 1) * 2^(n-1-s)
    prefixes = [Const(0, 0)] * table.pe
    for s, image in enumerate(table.stage_images()):
        reads = []
        attrs = {style_attr: table.stage_ram_style(s, ram_style)}
        for lane in range(table.pe):
            mem = Memory(shape=table.storage_shape, depth=len(image[lane]), init=[int(v) for v in image[lane]],
                         attrs=attrs)
            m.submodules[f"{name}_s{s}_pe{lane}"] = mem
            rd = mem.read_port(domain="sync")
            m.d.comb += [rd.addr.eq(Cat(prefixes[lane], cf)), rd.en.eq(advance)]
            if writer is not None:
                low = n - 1 - s
                at_stage = slot[low] & (slot[:low] == 0 if low else 1)
                wr = mem.write_port()
                m.d.comb += [wr.addr.eq(Cat(slot[low + 1:n], w_cf)), wr.data.eq(w_data),
                             wr.en.eq(strobe & at_stage & (w_lane == lane))]
            reads.append(rd.data)
        valid = register(m, advance, valid, name=f"{name}_v{s + 1}", reset_less=False)
        cf = register(m, advance, cf, name=f"{name}_cf{s + 1}")
        values = [register(m, advance, v, name=f"{name}_x{s + 1}_{lane}") for lane, v in enumerate(values)]
        prefixes = [Cat(reads[lane] <= values[lane],
                        register(m, advance, prefixes[lane], name=f"{name}_p{s + 1}_{lane}"))
                    for lane in range(table.pe)]
    return valid, prefixes


def activation_lane(count, output_dtype, act_val):
    """Output element bits for a count: the count bit for BIPOLAR, else ActVal + count."""
    if output_dtype.name == "BIPOLAR":
        return count[0]
    ob = output_dtype.bitwidth()
    return (Cat(count, C(0, ob)) + act_val)[:ob]        # widen first: the count may be narrower than ob


def check_activation(owner, table, output_dtype, act_val):
    """The output datatype must hold ActVal .. ActVal + S (BIPOLAR: exactly one threshold, ActVal 0)."""
    if output_dtype.name == "BIPOLAR":
        if table.steps != 1 or act_val != 0:
            raise ValueError(f"{owner} output_dtype=BIPOLAR needs 1 threshold per channel and act_val=0, "
                             f"not {table.steps} and {act_val}")
        return
    check_fits(owner, "output_dtype", output_dtype, act_val, act_val + table.steps,
               f"act_val + counts (act_val={act_val}, {table.steps} thresholds)")


@dataclass(frozen=True, eq=False)
class ThresholdingSpec(ChannelFolded):
    """Contract of a standalone Thresholding layer (FINN ``Thresholding``)."""
    num_channels: int                   # NumChannels: C
    pe: int                             # PE: channels per word, divides C
    input_dtype: object                 # inputDataType
    output_dtype: object                # outputDataType
    thresholds: np.ndarray              # (C, S) or (1, S), ascending per channel
    act_val: int = 0                    # ActVal: added to the count
    num_input_vectors: tuple = (1,)     # numInputVectors: words per frame = prod(vecs) * C / PE
    ram_style: Literal["auto", "distributed", "block"] = "auto"
    threshold_dtype: object = None      # weightDataType; default: the smallest type holding inputs and T
    runtime_writeable: bool = False     # runtime_writeable_weights: AXI-Lite writes of any threshold_dtype value
    activation_style: Literal["auto", "thresholds", "requant"] = "auto"    # see layers.requant.requant_form
    table: ThresholdTable = field(init=False, repr=False)
    requant: object = field(init=False, repr=False)

    def __post_init__(self):
        owner = "Thresholding"
        for attr in ("num_channels", "pe"):
            if not isinstance(getattr(self, attr), int) or getattr(self, attr) < 1:
                raise ValueError(f"{owner} {attr} must be a positive integer, not {getattr(self, attr)!r}")
        if self.num_channels % self.pe:
            raise ValueError(f"{owner} pe={self.pe} must divide num_channels={self.num_channels}; "
                             f"legal pe: {legal_divisors(self.num_channels)}")
        object.__setattr__(self, "input_dtype", check_dtype(owner, "input_dtype", self.input_dtype))
        object.__setattr__(self, "output_dtype", check_dtype(owner, "output_dtype", self.output_dtype))
        vecs = tuple(self.num_input_vectors)
        if not vecs or any(not isinstance(v, int) or v < 1 for v in vecs):
            raise ValueError(f"{owner} num_input_vectors must be positive integers, not {self.num_input_vectors!r}")
        object.__setattr__(self, "num_input_vectors", vecs)
        if self.ram_style not in RAM_STYLES:
            raise ValueError(f"{owner} ram_style must be one of {', '.join(RAM_STYLES)}, not {self.ram_style!r}")
        if self.input_dtype.name == "BIPOLAR":
            raise ValueError(f"{owner} input_dtype=BIPOLAR is not supported; legal: integer types")
        lo, hi = dtype_range(self.input_dtype)
        t = ceil_thresholds(self.thresholds, owner)
        if self.threshold_dtype is None:
            tdt = dtype_for_range(min(lo, int(t.min(initial=lo))), max(hi, int(t.max(initial=hi))))
        else:
            tdt = check_dtype(owner, "threshold_dtype", self.threshold_dtype)
            check_fits(owner, "threshold_dtype", tdt, int(t.min(initial=0)), int(t.max(initial=0)), "thresholds")
        object.__setattr__(self, "threshold_dtype", tdt)
        writable = dtype_range(tdt) if self.runtime_writeable else None
        table = ThresholdTable(owner, self.thresholds, self.num_channels, self.pe, (lo, hi), writable)
        object.__setattr__(self, "table", table)
        check_activation(owner, table, self.output_dtype, self.act_val)
        object.__setattr__(self, "requant", requant_form(owner, self.activation_style, self.thresholds, table,
                                                         pe=self.pe, acc_width=self.input_dtype.bitwidth(),
                                                         writable=self.runtime_writeable))

    @property
    def axilite_addr_width(self):
        """FINN's map: word address (cf * 2^ceil(log2 PE) + pe) * 2^N + i, bytes = 4 x word."""
        return 2 + self.table.index_bits + _clog2(self.pe) + _clog2(self.cf)

    def threshold_address(self, channel, index):
        """Byte address of threshold ``index`` (0-based, ascending) of ``channel``."""
        cf, pe = divmod(channel, self.pe)
        return (((cf << _clog2(self.pe)) + pe) << self.table.index_bits | index) << 2

    @property
    def latency(self):
        """Cycles from an input transfer to its output being offered (register, the search's N stages or
        the requantizer's, output FIFO)."""
        return 1 + (REQUANT_STAGES if self.requant is not None else self.table.stages) + 2

    def timing(self, arrivals):
        """Takes a word whenever one is offered; its level ``latency`` cycles later (:mod:`layers.timing`)."""
        return one_to_one(self.latency, arrivals[0])

    def resource_estimate(self):
        if self.requant is not None:
            act = self.requant.resource_estimate(self.pe, self.input_dtype.bitwidth())
            lut, ff, bram18, dsp = act.lut, act.ff, act.bram18, act.dsp
        else:
            (lut, ff, bram18), dsp = self.table.resource_estimate(self.ram_style), 0
        return Resources(lut=lut + self.out_width, ff=ff + self.in_width + 3 * self.out_width, bram18=bram18,
                         dsp=dsp)


class Thresholding(wiring.Component):
    """Multi-threshold activation of a stream of ``pe``-lane words.

    Members
    -------
    i : In(stream.Signature(spec.in_width))
    o : Out(stream.Signature(spec.out_width))

    One word per cycle (``spec.exp_cycles`` per frame); latency ``spec.latency``. ``i.ready`` is a
    register (the output FIFO's), not a function of ``o.ready``; under backpressure the pipeline holds
    still. The thresholds sit in N memories per lane (stage s: CF * 2^s entries) with synchronous reads,
    LUT ROM or BRAM per ``ram_style``. Lane ``pe`` of word ``f`` is channel ``f * PE + pe``.

    With ``runtime_writeable`` an AXI-Lite slave (``s_axilite``, FINN's address map, see
    ``spec.threshold_address``) rewrites single thresholds: the low bits of ``wdata`` as a
    ``threshold_dtype`` value; rows must stay ascending. Writes take effect for words entering after
    the write response. A channel or index out of range gets SLVERR; reads are not supported (SLVERR).
    """

    def __init__(self, spec):
        self._spec = spec
        members = {
            "i": In(stream.Signature(spec.in_width)),
            "o": Out(stream.Signature(spec.out_width)),
        }
        if spec.runtime_writeable:
            members["s_axilite"] = In(AXILiteSignature(spec.axilite_addr_width))
        super().__init__(members)

    @property
    def spec(self):
        return self._spec

    def elaborate(self, platform):
        spec = self._spec
        m = Module()
        advance, fifo_in = output_stage(m, self.o, spec.out_width)

        cf = Signal(range(spec.cf))
        take = self.i.valid & advance
        m.d.comb += self.i.ready.eq(advance)
        with m.If(take):
            m.d.sync += cf.eq(wrapping_increment(cf, spec.cf))

        lanes = data.View(data.ArrayLayout(spec.input_dtype.bitwidth(), spec.pe), self.i.payload)
        v0 = register(m, advance, take, name="v0", reset_less=False)
        cf0 = register(m, advance, cf, name="cf0")
        x0 = [register(m, advance, element_value(lanes[p], spec.input_dtype), name=f"x0_{p}")
              for p in range(spec.pe)]
        if spec.requant is not None:
            valid, counts = requantize(m, advance, v0, x0, cf0, spec.requant, spec.pe)
        else:
            writer = self._axilite(m) if spec.runtime_writeable else None
            valid, counts = threshold_search(m, advance, v0, x0, cf0, spec.table, ram_style=spec.ram_style,
                                             writer=writer)
        m.d.comb += [
            fifo_in.valid.eq(valid),
            fifo_in.payload.eq(Cat(activation_lane(c, spec.output_dtype, spec.act_val) for c in counts)),
        ]
        return m


    def _axilite(self, m):
        spec, bus = self._spec, self.s_axilite
        n, pb = spec.table.index_bits, _clog2(spec.pe)
        index, lane, cf = bus.awaddr[2:2 + n], bus.awaddr[2 + n:2 + n + pb], bus.awaddr[2 + n + pb:]
        legal = (index != (1 << n) - 1) & (lane < spec.pe) & (cf < spec.cf)
        accept = accept_writes(m, bus, legal)
        refuse_reads(m, bus)
        data = bus.wdata[:spec.table.storage_shape.width]
        data = data.as_signed() if spec.table.storage_shape.signed else data
        return accept & legal, lane, cf, index, data


def _clog2(n):
    return max(0, (n - 1).bit_length())



def _golden(spec, xs, producer):
    return golden.multithreshold(xs[0], spec.table.thresholds, spec.act_val, spec.output_dtype.name == "BIPOLAR")


def _lower(ctx, node):
    """A quantizer on integer data, through the float ops before it: a standalone Thresholding layer."""
    t = ctx.input(node)
    act = ctx.activation(t, node)
    if act is None:
        return None
    if act.decreasing:
        raise ctx.error(f"{act.where}: the activation decreases with its input; a standalone Thresholding "
                        f"layer needs a non-decreasing one")
    ctx.add("Thresholding", dict(num_channels=act.channels, input_dtype=t.dtype, output_dtype=act.dtype,
                                 thresholds=act.thresholds, act_val=act.act_val, num_input_vectors=act.vectors),
            act.nodes)
    return act.output


def _finn_import(ctx, attrs, params, folding):
    """FINN names the AXI-Lite-writable thresholds ``runtime_writeable_weights``."""
    if "runtime_writeable_weights" in attrs:
        params["runtime_writeable"] = ctx.value("runtime_writeable", "runtime_writeable_weights")


def _examples():
    """Three thresholds per channel on a small feature map, then FINN's grid without its hls/rtl axis:
    ascending random thresholds over the threshold datatype (which may exceed the input's); a 1-step
    (BIPOLAR) quantizer has no narrow form."""
    def case(c):
        channels, act = c["channels"], DataType[c["act"]]
        pe = {-1: 1, 1: channels, 2: channels // 2}[c["fold"]]
        idt, tdt = c["types"]
        steps = 1 if act.name == "BIPOLAR" else (1 << act.bitwidth()) - 1 - int(c["narrow"])
        act_val = 0 if act.name == "BIPOLAR" else int(act.min()) + int(c["narrow"])
        t = np.sort(random_elements(tdt, (1 if c["per_tensor"] else channels, steps), channels + pe), axis=1)
        return dict(num_channels=channels, input_dtype=idt, output_dtype=act.name, thresholds=t, act_val=act_val,
                    num_input_vectors=c["vecs"]), {"PE": pe}
    grid = dict(channels=[6, 16], vecs=[(1,), (1, 2, 2)], act=["INT4", "BIPOLAR"],
                types=[("INT8", "INT8"), ("INT8", "INT9"), ("UINT8", "UINT8"), ("UINT8", "UINT9")],
                fold=[-1, 1, 2], narrow=[False, True], per_tensor=[False, True])
    thresholds = np.sort(np.random.default_rng(5).integers(-8, 8, (4, 3)), axis=1)
    return [(dict(num_channels=4, input_dtype="INT4", output_dtype="UINT2", thresholds=thresholds,
                  num_input_vectors=(1, 2, 2)), {"PE": 2}),
            *grid_examples(grid, case, stride=47, legal=lambda c: not (c["act"] == "BIPOLAR" and c["narrow"]))]


OP = Op("Thresholding", ThresholdingSpec, Thresholding,
        folding={"PE": "pe", "ram_style": "ram_style", "activation_style": "activation_style"},
        parallelism={"PE": divisors_of("num_channels")},
        finn_names={"num_channels": "NumChannels", "input_dtype": "inputDataType", "output_dtype": "outputDataType",
                    "act_val": "ActVal", "num_input_vectors": "numInputVectors"},
        old_names=("Thresholding_Batch",), golden=_golden,
        small_instance=shrink_channels("num_channels", "pe", ("thresholds",)), host_side=True,
        finn_import=_finn_import, finn_arrays=("thresholds",),
        lowers=(Lowering(rule=_lower, at="activation"),), examples=_examples)
