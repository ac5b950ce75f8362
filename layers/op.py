"""What a layer module declares so the compiler can use it: its :class:`Op` (how a FINN op type becomes
this layer) and the :class:`LayerSpec` contract its spec keeps.

A layer lives in one module: the spec (a frozen dataclass whose fields are the op's attributes in snake
case, validated on construction with errors naming the attribute and its legal values), the Amaranth
component built from it, and at module level ``OP = Op(...)`` (or ``OPS = (Op(...), ...)`` for a module
with several ops). The compiler discovers the ops of every module of ``layers``, ``swg`` and ``galapagos``
(:func:`discover`), so a new layer touches its own module and its tests, nothing else; an op declared
anywhere else (a user's module, a test) joins the same registry with :func:`register`.
"""

import importlib
import itertools
import pkgutil
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Callable, NamedTuple, Protocol, runtime_checkable

import numpy as np
from qonnx.core.datatype import DataType

__all__ = ["Op", "Example", "examples_of", "grid_examples", "random_elements",
           "FoldContext", "FinnImportContext", "LayerSpec", "Resources", "StreamContract", "OneDatatype", "OneWidth", "divisors", "divisors_of", "discover",
           "input_dtypes", "input_widths",
           "Lowering", "LoweringContext", "REGISTRY", "register", "unregister",
           "ArrayMemo"]


@dataclass(frozen=True)
class Resources(Mapping):
    """A resource estimate (7-series primitives). Supports ``+`` and ``sum()``; reads as the mapping
    ``{"LUT": .., "FF": .., "BRAM18": .., "DSP": ..}`` that ``report.json`` carries."""
    lut: int = 0
    ff: int = 0
    bram18: int = 0
    dsp: int = 0

    def __add__(self, other):
        if not isinstance(other, Resources):
            return NotImplemented
        return Resources(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def __radd__(self, other):          # sum() starts from 0
        return self if other == 0 else NotImplemented

    def __getitem__(self, key):
        try:
            return getattr(self, key.lower())
        except AttributeError:
            raise KeyError(key) from None

    def __iter__(self):
        return iter(f.name.upper() for f in fields(self))

    def __len__(self):
        return len(fields(self))


@runtime_checkable
class LayerSpec(Protocol):
    """The contract every layer spec keeps (the stitcher, the FIFO sizer, the golden runner and the
    reports rely on nothing else). Stream ``k`` of a layer carries words of ``folded_input_shapes[k]``:
    all but the last dimension count words, the last is the lanes of a word. A layer whose inputs differ
    in datatype or word width (a product of two streams) also declares ``input_dtypes`` and ``in_widths``,
    one per input (``input_dtype`` and ``in_width`` are then its input 0's); read them through
    :func:`input_dtypes` and :func:`input_widths`."""
    input_dtype: object             # DataType of the elements on every input stream
    output_dtype: object            # DataType of the elements on every output stream
    in_width: int                   # bits of one input word (every input)
    out_width: int                  # bits of one output word (every output)
    num_inputs: int
    num_outputs: int
    folded_input_shapes: tuple      # per input; None for a FIFO (it carries frames of any shape)
    folded_output_shape: tuple      # every output's; None for a FIFO
    exp_cycles: int                 # cycles per frame in steady state (0: never limits the rate)
    lead_words: int                 # input words taken before the first output word that needs them
                                    # can leave (a window generator: its first window's last word)
    words_before_lead: int          # output words of a frame that may leave before its input word
                                    # lead_words is taken (a window generator's first window but its last
                                    # word, FMPadding's top and left padding); 0 for most layers
    latency: int                    # cycles from input word ``lead_words`` to the output word it
                                    # completes being offered, at full rate

    def resource_estimate(self) -> Resources: ...

    def timing(self, arrivals):     # when each word moves, given when the inputs arrive (layers.timing)
        ...



def input_dtypes(spec):
    """The datatype of each input stream of ``spec`` (``spec.input_dtypes``, or ``input_dtype`` on every input)."""
    declared = getattr(spec, "input_dtypes", None)
    return tuple(declared) if declared is not None else (spec.input_dtype,) * spec.num_inputs


def input_widths(spec):
    """The word width of each input stream of ``spec`` (``spec.in_widths``, or ``in_width`` on every input)."""
    declared = getattr(spec, "in_widths", None)
    return tuple(declared) if declared is not None else (spec.in_width,) * spec.num_inputs


class StreamContract:
    """Defaults of :class:`LayerSpec` for a layer with one input and one output stream."""
    num_inputs = 1
    num_outputs = 1

    @property
    def folded_input_shapes(self):
        return (self.folded_input_shape,) * self.num_inputs

    @property
    def lead_words(self):
        return 1

    words_before_lead = 0


class OneDatatype:
    """For a spec whose field ``dtype`` is the datatype of its input and output elements."""

    @property
    def input_dtype(self):
        return self.dtype

    @property
    def output_dtype(self):
        return self.dtype


class OneWidth:
    """For a spec whose property ``width`` is the word width of its inputs and outputs."""

    @property
    def in_width(self):
        return self.width

    @property
    def out_width(self):
        return self.width


def divisors(n):
    """FINN's ``divisors``: 1..n ascending."""
    return [d for d in range(1, int(n) + 1) if n % d == 0]


def divisors_of(*params):
    """Legal values of a folding axis: the common divisors of the spec fields ``params`` (a field holding a
    tuple counts each of its entries)."""
    def legal(values):
        counts = [c for p in params for c in (values[p] if isinstance(values[p], (tuple, list)) else (values[p],))]
        return [d for d in divisors(min(counts)) if all(c % d == 0 for c in counts)]
    return legal


@dataclass(frozen=True)
class Lowering:
    """One ONNX pattern an op lowers from (an entry of ``Op.lowers``). The compiler's ``lower`` pass walks the
    model; at a node whose data inputs are hardware streams it runs the one ``rule`` of the registry that
    matches, with a :class:`LoweringContext`; what no rule takes runs on the host."""
    onnx_ops: tuple = ()            # ONNX op types of the node the rule starts at (at="node" and "tail")
    rule: Callable = None           # rule(ctx, node) -> the stream tensor (ctx.tensor) of the model tensor
                                    # the lowering ends at, or None: the node runs on the host.
                                    # A rule that adds no node relabels the stream it reads (the
                                    # same words, e.g. a transpose read in stream order): it keeps the wire.
                                    # at="tail": rule(ctx, node, acc), see below; at="bias":
                                    # rule(ctx, sources, t, bias) -> the graph node (ctx.add) adding
                                    # the integers ``bias`` (one per channel) to stream t
    streams: object = 1             # inputs of the node that must be streams: a count, or "all"
    when: Callable = None           # when(ctx, node) -> bool: the rule applies (e.g. only depthwise Conv);
                                    # none: always. At most one rule may apply to a node
    at: str = "node"                # "node": a node of onnx_ops; "activation": a node starting the float ops
                                    # up to a quantizer on integer data (ctx.activation finds them);
                                    # "tail": a node of onnx_ops ending the float ops after a dot product
                                    # without quantizer; the rule gets that dot product's ctx.Accumulator;
                                    # "bias": the one op that adds a constant per channel to a stream (where
                                    # the lowering carries a dot product's accumulator and its bias into
                                    # the next layer with no quantizer between); onnx_ops unused
    legal: str = ""                 # how the legal-ops message names what this rule maps to hardware


class LoweringContext(Protocol):
    """What rtlgen's ``lower`` pass gives a :class:`Lowering` rule (a layer module imports nothing from
    ``rtlgen``: it asks this object). Model tensors on hardware streams are described by stream tensors:
    ``name, dtype, scale, shape`` (real = scale * code; scale a number, or (C,) per channel on axis 1; 4D
    tensors stream NHWC), ``spatial`` (4D), ``kind``
    ("codes"), ``row_order``, ``rounding``, ``values`` (see ``rtlgen.ir.graph.StreamTensor``)."""

    # --- the model ---
    def attrs(self, node) -> dict: ...          # the ONNX node's attributes, decoded
    def shape(self, tensor) -> tuple: ...       # a model tensor's shape
    def initializer(self, tensor): ...          # a constant's value, or None
    def consumers(self, tensor) -> list: ...    # the nodes reading a model tensor
    def is_graph_output(self, tensor) -> bool: ...
    def run_alone(self, node, x): ...           # the node alone on data input x (constants: the model's), as
                                                # qonnx runs it
    # --- streams ---
    def stream(self, tensor): ...               # the stream tensor carrying a model tensor, or None
    def input(self, node): ...                  # the one stream tensor a one-stream node reads
    def wire(self, t): ...                      # the graph wire carrying stream tensor t (for ``add(inputs=)``)
    def tensor(self, name, dtype, scale, shape=None, **fields): ...  # a new stream tensor (shape: the model's)
    def require_codes(self, t, node): ...       # error unless t is quantized codes (scale: a number, or
                                                # (C,) per channel: see dot_product)
    # --- weights ---
    def weights(self, node, index): ...         # (integer codes, scale per output channel, DataType) of the
                                                # node's constant input ``index``; errors if float or not constant
    def per_channel(self, scale, channels, node): ...  # a weight scale as a (channels,) array
    def dense_grouped_weights(self, codes, group, channels, node): ...  # a grouped Conv's weights as the
                                                # dense (block-diagonal) ones computing the same function
    # --- hardware ---
    def add(self, op_type, params, sources, inputs=None): ...  # a new node of the registry's op_type with spec
                                                # fields ``params``, implementing the ONNX nodes ``sources``,
                                                # reading ``inputs`` (wires; default: the previous node's
                                                # output, or the lowered node's input); returns the graph node
                                                # (``.spec()``, ``.outputs``, ``.sources``); the last node added
                                                # writes the tensor the rule returns
    def spec(self, op_type, params): ...        # the spec of such a node, without adding it
    # --- float ops turned into integer arithmetic (rtlgen's exact analyses) ---
    def dot_product(self, node, t, op_type, codes, wscale, wdtype, params, *, spatial, bias, channel_axis):
        """A dot-product layer for ``node`` (accumulators of ``codes`` over stream ``t``; the spec has
        ``acc_range()``, ``in_elems``, ``xnor``) with the float ops after it up to its quantizer as exact
        thresholds (a decreasing channel gets its weights negated along ``channel_axis``); without a
        quantizer, a plain accumulator output, or what an at="tail" lowering makes of the chain's end.
        ``params(weights, weight_dtype, **fields)`` -> the spec fields; ``fields`` are among thresholds,
        output_dtype, act_val. Returns the stream tensor it ends at. A ``t`` scaled per channel: a
        depthwise layer (weights (C, 1, kh, kw)) reads it as it is; a dense one (a matrix whose rows are in
        stream order) takes the channels' integer scale factors into its weights, or is refused."""
    def accumulator_output(self, acc, output_dtype): ...  # at="tail": the dot product without activation,
                                                # absorbing the chain's nodes; returns its graph node.
                                                # acc: .node, .t, .op_type, .spec (unit folding, no
                                                # activation), .chain, .wscale, .lo, .hi (accumulator
                                                # range), .bias
    def evaluate_chain(self, nodes, start, end, values, channels=1, spatial=False): ...  # the float ops
                                                # ``nodes`` from tensor start to end on values (N, channels)
    def per_tensor(self, node) -> bool: ...     # every constant of the node is one number
    def activation(self, t, node): ...          # the float ops from node up to a quantizer on stream t as
                                                # thresholds: .nodes, .thresholds, .dtype, .act_val,
                                                # .channels, .vectors, .output (stream tensor); or None.
                                                # .decreasing: some channel falls as its input rises (no
                                                # thresholds then); .where names the quantizer
    def sum_grid(self, a, b, where): ...        # (scale, integer factors, grid, rounding) adding streams a, b
    def sum_values(self, a, b, factors, dtype): ...  # real value of each integer sum (grid sums)
    def common_scale(self, scales, where): ...  # (scale, integer factors) every scale is a multiple of
    # --- messages ---
    def error(self, message) -> Exception: ...  # the compile error to raise (bad input, exit 2)
    def warn(self, message): ...                # a compile warning


@dataclass(frozen=True)
class Op:
    """How one FINN op type becomes hardware.

    ``folding`` maps FINN folding attributes to spec fields. ``parallelism`` lists the throughput axes in
    the order FINN's SetFolding raises them, each with its legal values as a function of the network's
    parameters (e.g. ``{"PE": divisors_of("num_channels")}``). ``finn_names`` maps the other spec fields
    to FINN attribute names (``model_hw.onnx`` is written with them); ``old_names`` are the op's names in
    older FINN versions. Its ``golden`` hook applies the module's ``golden_<op>``: the op on numpy from its
    definition, reading nothing of the hardware, built from the shared math of :mod:`golden` (which imports
    nothing of the project).
    """
    op_type: str
    spec: type
    component: Callable
    folding: dict = field(default_factory=dict)
    parallelism: dict = field(default_factory=dict)
    finn_names: dict = field(default_factory=dict)
    old_names: tuple = ()
    # --- Hooks: everything else the compiler asks of an op. Each is optional; the comment says what an op
    # without it gets. The compiler (``rtlgen``) names no op type: it reads these through the registry.
    role: str = "layer"             # "layer"; or the part the compiler's own passes give the op: "fifo",
                                    # "dwc" (inserted on every stream / width change), "fanout" (where a
                                    # tensor feeds several nodes), "join" (takes its inputs in lockstep)
    lowers: tuple = ()              # ONNX patterns it lowers from: (Lowering(...), ...); none: only reached
                                    # through FINN hardware-layer ONNX or another op's lowering
    fold: Callable = None           # fold(ctx, node, target_cycles): its folding for a target II (FINN's
                                    # SetFolding rule); none: each parallelism axis in order up its values
    choices: dict = field(default_factory=dict)   # optimizer's choices beyond parallelism: FINN attribute
                                    # -> legal values (resType, ram_style, ...), or a function of the node's
                                    # params giving them (empty: no choice for that node)
    folded_with: Callable = None    # folded_with(ctx, node): the node whose folding follows this one's
                                    # (a depthwise SWG follows its VVAU), or None
    golden: Callable = None         # golden(spec, inputs, producer_spec) -> outputs: its numpy reference
                                    # (the module's golden_<op>); inputs: per stream, integers (batch, vectors,
                                    # elements), the folded shape with its last two dimensions merged;
                                    # one array (every output) or a list (one per output)
    finn_import: Callable = None    # finn_import(ctx, attrs, params, folding): fix-ups, in place, of what
                                    # FINN hardware-layer ONNX gave (ctx: FinnImportContext; attrs: the
                                    # node's, decoded); none: attributes by ``finn_names`` only
    finn_arrays: tuple = ()         # FINN hardware-layer ONNX: spec fields read from its initializers,
                                    # inputs 1, 2, ... in order
    small_instance: Callable = None  # small_instance(spec) -> {spec field: value}: the changes making the
                                    # same generator small enough for ``rtlgen prove`` (same datatypes and
                                    # PE/SIMD, every loop still stepping and wrapping; layers.small helps),
                                    # or a list of such, instances that share the code paths out; none:
                                    # proven at the design's own size
    cost_group: Callable = None     # cost_group(spec) -> the cost model's calibration group; none: the
                                    # spec's class name without "Spec" (the names data/cost_model.json uses)
    follower_folding: Callable = None  # follower_folding(folding) -> the folding of the node ``folded_with``
                                    # names, from this node's (a depthwise SWG: SIMD = its VVAU's PE, ...)
    stitched_after: Callable = None  # stitched_after(spec) -> [spec, ...]: what stitching puts on the node's
                                    # output at this folding unless its consumer reads the word whole (a
                                    # parallel-window SWG: the FIFO on its wide side and the width
                                    # converter); the folding optimizer charges it to the option where the
                                    # consumer's option does not (rtlgen.passes.optimize_stitch), never to
                                    # its estimate (the inserted nodes are estimated as such); none: nothing
    host_side: bool = False         # FINN makes a layer of it where rtlgen may run it on the host (a model's
                                    # input/output thresholds, its top-K): a folding entry for it that
                                    # names no node warns (any other such entry is an error)
    finn_export: Callable = None    # finn_export(spec) -> {FINN attribute: value}: what model_hw.onnx
                                    # writes beyond the spec's fields and folding (MVAU: noActivation...);
                                    # none: those only
    extensions: tuple = ()          # folding attributes of rtlgen's own (FINN has none of that name): a
                                    # folding file carries one only where it differs from the spec's default
    examples: Callable = None       # examples() -> [Example(params, folding, slow)] (or (params, folding)):
                                    # instances of the op (a node's spec fields and its folding; the first
                                    # is its example, small), grown to FINN's test grid where it has one
                                    # (grid_examples; the larger part ``slow``). tests/test_layer_contract.py
                                    # checks the contract on each default one, tests/test_op_grid.py
                                    # simulates each against the golden; every op has one
    stimulus: Callable = None       # stimulus(spec, frames, seed) -> per input stream, (frames, words, lanes)
                                    # integer elements the op is defined on (the tests' inputs); none:
                                    # random elements of its input datatypes (FromGalapagos: the packets
                                    # a ToGalapagos of its geometry sends)

    def legal(self, attr, params):
        """Legal values of the parallelism axis ``attr`` for a node with ``params``."""
        return self.parallelism[attr](params)


class Example(NamedTuple):
    """One instance of an op: a node's spec fields and its folding; ``slow``: simulated only in the slow
    suite (the larger part of a FINN grid)."""
    params: dict
    folding: dict
    slow: bool = False


def examples_of(op):
    """``op.examples()`` as :class:`Example` s (an op may give plain (params, folding) pairs)."""
    return [Example(*example) for example in op.examples()]


def grid_examples(axes, make, *, stride, legal=lambda case: True):
    """Examples over the product of ``axes`` ({name: values}) that ``legal`` accepts; ``make(case)`` ->
    (params, folding) of one case ({name: value}). Every ``stride``-th case is a default example, the
    rest slow: a stride coprime to the axis sizes reaches every value of every axis in the default suite."""
    cases = [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]
    cases = [case for case in cases if legal(case)]
    return [Example(*make(case), slow=k % stride != 0) for k, case in enumerate(cases)]


def random_elements(dtype, shape, seed):
    """Random values of the FINN datatype ``dtype`` (BIPOLAR: -1 and +1), reproducible from ``seed``: an
    example's weights, parameters or thresholds."""
    dt, rng = DataType[str(dtype)], np.random.default_rng(seed)
    if dt.name == "BIPOLAR":
        return rng.choice(np.array([-1, 1]), size=shape)
    return rng.integers(int(dt.min()), int(dt.max()) + 1, size=shape)


class FoldContext(Protocol):
    """What the compiler's folding passes give ``Op.fold`` and ``Op.folded_with`` (a layer module imports
    nothing from ``rtlgen``: it asks this object instead)."""
    target: int                     # the target II, cycles per frame (fold only; None in the optimizer)
    mvau_wwidth_max: int            # FINN's mvau_wwidth_max: widest weight stream SetFolding gives an MVAU, bits

    def spec(self, node): ...       # node's spec at its current folding; errors name the node

    def cycles(self, node) -> int: ...      # node's exp_cycles at its current folding

    def walk(self, node, attr, values): ...  # FINN's optimize_attribute_val: node.folding[attr] up
                                    # ``values`` (ascending), stopping at the first meeting ``target``

    def producer(self, node): ...   # the node feeding node's first input, inserted FIFOs/DWCs skipped;
                                    # None at the graph input


class FinnImportContext(Protocol):
    """What rtlgen's reader of FINN hardware-layer ONNX gives ``Op.finn_import`` for one node."""
    op_type: str                    # the node's op type as the file spells it (MVAU_hls, ..._rtl ...)

    def value(self, field, attr): ...   # the node's attribute ``attr`` converted for the spec field ``field``
                                    # (a DataType, a tuple, a bool ...); bad values raise the compile error
    def error(self, message) -> Exception: ...  # the compile error naming the node (bad input, exit 2)


# The registry the compiler reads (``rtlgen.ir.graph.OPS`` is this dict): op_type -> Op. Filled by
# :func:`discover`; a plug-in declared anywhere else joins it with :func:`register`.
REGISTRY = {}


def register(op):
    """Add ``op`` (a plug-in from outside ``layers``/``swg``) to the registry the compiler reads; returns it."""
    if REGISTRY.get(op.op_type, op) is not op:
        raise TypeError(f"op {op.op_type} is already registered")
    REGISTRY[op.op_type] = op
    return op


def unregister(op):
    """Remove the plug-in ``op`` from the registry."""
    if REGISTRY.get(op.op_type) is op:
        del REGISTRY[op.op_type]


def discover(*packages):
    """{op_type: Op} of every module in ``packages`` that declares ``OP`` or ``OPS``: the :data:`REGISTRY`,
    with those ops added."""
    ops = REGISTRY
    for package in packages:
        modules = [package] + [importlib.import_module(f"{package.__name__}.{info.name}")
                               for info in pkgutil.iter_modules(package.__path__)]
        for module in modules:
            declared = getattr(module, "OPS", ()) + ((module.OP,) if hasattr(module, "OP") else ())
            for op in declared:
                if ops.get(op.op_type, op) is not op:
                    raise TypeError(f"op {op.op_type} is declared twice ({module.__name__})")
                ops[op.op_type] = op
    return ops


class ArrayMemo:
    """Results computed from a numpy array, remembered while that very array (not a copy) lives.

    Sound because the arrays specs hold (weights, thresholds) are never changed in place: specs are frozen
    and the compiler's graph params are shared, never mutated. The folding optimizer rebuilds a layer's
    spec thousands of times with other foldings; O(weights) checks and threshold fits then run once.
    """

    def __init__(self):
        self._entries = {}          # id(array) -> (weak reference, {key: result})

    def get(self, array, key, compute):
        entry = self._entries.get(id(array))
        if entry is None or entry[0]() is not array:
            try:
                ref = weakref.ref(array, lambda _, k=id(array): self._entries.pop(k, None))
            except TypeError:       # not weak-referenceable (a list): computed every time
                return compute()
            entry = self._entries[id(array)] = (ref, {})
        if key not in entry[1]:
            entry[1][key] = compute()
        return entry[1][key]

