"""DuplicateStreams: a fan-out, every input word to each of several consumers (FINN's
``DuplicateStreams``), the op the compiler inserts where a tensor feeds several nodes (role ``fanout``):
spec, component, golden and ``OP``."""

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from layers.datapath import ChannelFolded, check_dtype, legal_divisors
from layers.fifo import StreamingFIFO, output_fifo_spec
from layers.op import Example, OneDatatype, Op, Resources
from layers.small import shrink_channels
from layers.timing import one_to_one

__all__ = ["DuplicateStreamsSpec", "DuplicateStreams", "OP"]


@dataclass(frozen=True)
class DuplicateStreamsSpec(ChannelFolded, OneDatatype):
    """Contract of a fan-out to several consumers (FINN ``DuplicateStreams``: NumChannels, PE,
    NumOutputStreams, inputDataType, numInputVectors)."""
    num_channels: int           # NumChannels: C
    pe: int                     # PE: channels per word, divides C
    num_output_streams: int = 2     # NumOutputStreams: n >= 2
    dtype: object = "INT8"      # inputDataType (= output datatype)
    num_input_vectors: tuple = (1,)

    def __post_init__(self):
        owner = "DuplicateStreams"
        for attr, least, what in (("num_channels", 1, "a positive integer"), ("pe", 1, "a positive integer"),
                                  ("num_output_streams", 2, "an integer >= 2")):
            value = getattr(self, attr)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"{owner} {attr} must be {what}, not {value!r}")
        if self.num_channels % self.pe:
            raise ValueError(f"{owner} pe={self.pe} must divide num_channels={self.num_channels}; "
                             f"legal: {legal_divisors(self.num_channels)}")
        object.__setattr__(self, "dtype", check_dtype(owner, "dtype", self.dtype))
        vecs = (self.num_input_vectors,) if isinstance(self.num_input_vectors, int) else tuple(self.num_input_vectors)
        if not vecs or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in vecs):
            raise ValueError(f"{owner} num_input_vectors must be positive integers, not {self.num_input_vectors!r}")
        object.__setattr__(self, "num_input_vectors", vecs)

    @property
    def num_outputs(self):
        return self.num_output_streams

    @property
    def buffer_words(self):
        """Words an output may fall behind the fastest one before the input stalls (its FIFO's capacity)."""
        return output_fifo_spec(self.in_width).capacity

    @property
    def latency(self):
        return output_fifo_spec(self.in_width).latency

    def timing(self, arrivals):
        """Takes a word whenever one is offered (every output FIFO has room, never stalled); each copy is
        offered ``latency`` cycles later (:mod:`layers.timing`)."""
        return one_to_one(self.latency, arrivals[0])

    def resource_estimate(self):
        """A depth-2 FIFO per output and the AND of their readies."""
        fifo = output_fifo_spec(self.in_width).resource_estimate()
        n = self.num_output_streams
        return Resources(lut=n * fifo.lut + n, ff=n * fifo.ff, bram18=0)


class DuplicateStreams(wiring.Component):
    """Every input word goes to every output ``o0`` .. ``o{n-1}``, in order, exactly once each.

    Members
    -------
    i : In(stream.Signature(spec.in_width))
    o0 .. o{n-1} : Out(stream.Signature(spec.in_width))

    Each output has its own depth-2 FIFO (``spec.buffer_words`` words with its output register); a word
    is taken only when every FIFO has room and then written to all of them in that cycle. So outputs
    run independently up to ``spec.buffer_words`` words apart; a stalled output stalls the input once
    its FIFO is full, and no output ever gets a word twice. ``i.ready`` is the AND of the FIFOs'
    registered readies, not a function of any ``o*.ready``. One word per cycle (``spec.exp_cycles`` per
    frame) when all consumers keep up; latency ``spec.latency``.
    """

    def __init__(self, spec):
        self._spec = spec
        members = {"i": In(stream.Signature(spec.in_width))}
        members.update({f"o{k}": Out(stream.Signature(spec.in_width)) for k in range(spec.num_output_streams)})
        super().__init__(members)

    @property
    def spec(self):
        return self._spec

    def elaborate(self, platform):
        spec = self._spec
        m = Module()
        fifos = []
        for k in range(spec.num_output_streams):
            fifo = StreamingFIFO(output_fifo_spec(spec.in_width))
            m.submodules[f"out_fifo{k}"] = fifo
            wiring.connect(m, wiring.flipped(getattr(self, f"o{k}")), fifo.o)
            fifos.append(fifo)
        all_room = Signal()
        m.d.comb += [all_room.eq(Cat(f.i.ready for f in fifos).all()), self.i.ready.eq(all_room)]
        for fifo in fifos:
            m.d.comb += [fifo.i.valid.eq(self.i.valid & all_room), fifo.i.payload.eq(self.i.payload)]
        self.formal_state = dict(fifos=fifos)       # for sim.formal's induction invariants
        return m


def _golden(spec, xs, producer):
    """Every output carries the input."""
    return xs[0]


def _examples():
    """A stream copied three ways, then (outputs, channels, PE, datatype, vectors) cases, the last two slow."""
    cases = [(2, 8, 2, "INT4", (1, 3, 3)), (3, 6, 3, "UINT2", (1, 4)), (2, 1, 1, "BIPOLAR", (5,)),
             (3, 16, 16, "INT8", (1, 2))]
    return [(dict(num_channels=4, num_output_streams=3, dtype="INT2", num_input_vectors=(1, 2)), {"PE": 2}),
            *(Example(dict(num_channels=c, num_output_streams=n, dtype=dtype, num_input_vectors=vecs), {"PE": pe},
                      slow=k >= 2) for k, (n, c, pe, dtype, vecs) in enumerate(cases))]


OP = Op("DuplicateStreams", DuplicateStreamsSpec, DuplicateStreams, folding={"PE": "pe"},
        finn_names={"num_channels": "NumChannels", "num_output_streams": "NumOutputStreams",
                    "dtype": "inputDataType", "num_input_vectors": "numInputVectors"},
        old_names=("DuplicateStreams_Batch",), role="fanout", golden=_golden,
        small_instance=shrink_channels("num_channels", "pe"), examples=_examples)
