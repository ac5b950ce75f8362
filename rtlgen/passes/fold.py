"""Folding: FINN's folding config JSON (read, apply, write) and FINN's ``SetFolding`` (a target throughput).

Both work on a chain of :class:`~rtlgen.ir.graph.HWNode` and only change ``node.folding`` (FINN attribute
names: ``PE``, ``SIMD``, ``parallel_window``, ``mem_mode``, ``ram_style``, ``ram_style_thresholds``,
``activation_style`` (ours: auto, thresholds, requant; see :func:`layers.requant.requant_form`),
``resType``, FIFO ``depth``); every choice is checked by building the node's spec, whose errors name the
node, the attribute and its legal values.

Config format (FINN ``ApplyConfig`` / ``final_hw_config.json``)::

    {"Defaults": {"ram_style": ["block", ["MVAU_hls"]], "mem_mode": "internal_decoupled"},
     "MVAU_hls_0": {"PE": 4, "SIMD": 16, "mem_mode": "internal_decoupled", "ram_style": "block"},
     ...}

Node keys may come from any FINN generation (``MVAU_0``, ``MVAU_hls_0``, ``MatrixVectorActivation_0``,
``StreamingFCLayer_Batch_0``, ``ConvolutionInputGenerator_rtl_0``...): they match our node of the same
canonical op type and index.
"""

import dataclasses
import json
import re
import warnings
from pathlib import Path

from layers.op import divisors
from memstream.memstream import BRAM_OR_LUT_STYLES
from rtlgen.analyses.board_rate import graph_shell_cycles
from rtlgen.errors import CompileError, CompileWarning
from rtlgen.ir.graph import INSERTED_ROLES, OPS, canonical_op_type, ops_with_role
from rtlgen.options import check_folding_config, load_folding_config
from rtlgen.passes.optimize import NoFit, optimize_folding
from rtlgen.passes.setfolding import max_cycles, set_folding, spec_of

__all__ = ["apply_folding_config", "folding_config", "write_folding_config", "set_folding", "divisors", "max_cycles",
           "resolve_weight_styles"]

DEFAULTS_KEY = "Defaults"

# FINN attributes that folding configs carry but that we do not take from them (FIFO depths are sized by
# the stitcher, the implementation style is always ours): ignored with a warning.
IGNORED_ATTRS = ("inFIFODepths", "outFIFODepths", "depth_trigger_uram", "depth_trigger_bram",
                 "runtime_writeable_weights", "preferred_impl_style", "impl_style")
# Attributes that change throughput or the stream layout: never silently dropped.
PARALLEL_ATTRS = ("PE", "SIMD", "parallel_window")
# Ops the stitcher inserts after folding: a config written after FINN's FIFO/DWC insertion names them.
INSERTED_OPS = tuple(op.op_type for op in ops_with_role(*INSERTED_ROLES))
# FINN makes layers of a model's input / output thresholds and top-K that rtlgen may run on the host: a
# folding entry for one of them warns; an entry for any other op that matches no node is an error
HOST_SIDE_OPS = tuple(op.op_type for op in OPS.values() if op.host_side)


def _known_attrs():
    """Every folding attribute of the registry's ops (read at each use: a plug-in may be registered late)."""
    return {a for op in OPS.values() for a in op.folding}


# ---------------------------------------------------------------------------------------------- config I/O

def _split_name(name):
    """'MVAU_hls_3' -> ('MVAU', 3); None when the name has no trailing index."""
    m = re.fullmatch(r"(.+)_(\d+)", name)
    return (canonical_op_type(m[1]), int(m[2])) if m else None


def _match_keys(nodes, config):
    """{config key: node}; raises on unknown or doubly matched names. Also returns warnings."""
    by_name = {n.name: n for n in nodes}
    by_index = {}
    for n in nodes:
        split = _split_name(n.name)
        if split is not None and canonical_op_type(split[0]) == n.op_type:
            by_index.setdefault(split, n)
    matched, warns, claimed = {}, [], {}
    for key in config:
        if key == DEFAULTS_KEY:
            continue
        node = by_name.get(key)
        split = _split_name(key)
        if node is None and split is not None:
            node = by_index.get(split)
        if node is None:
            if split is not None and split[0] in INSERTED_OPS:
                warns.append(f"{key}: no such node; {split[0]} nodes are inserted later by stitching "
                             f"(their depths and widths are computed there), entry ignored")
                continue
            if split is not None and split[0] in HOST_SIDE_OPS:
                warns.append(f"folding config entry {key!r}: no such node in the dataflow graph (known: "
                             f"{', '.join(n.name for n in nodes)}; rtlgen runs a model's input and output "
                             f"{' / '.join(HOST_SIDE_OPS)} on the host where FINN makes them layers), ignored")
                continue
            raise ValueError(f"folding config names node {key!r}, which is not in the dataflow graph; "
                             f"known nodes: {', '.join(n.name for n in nodes) or 'none'} (FINN names of any "
                             f"version match by op type and index: MVAU_hls_3 = MatrixVectorActivation_3 = MVAU_3)")
        if node.name in claimed:
            raise ValueError(f"folding config entries {claimed[node.name]!r} and {key!r} both match node "
                             f"{node.name} (FINN numbers _hls and _rtl variants separately, so a config mixing "
                             f"them for one op type cannot be matched by index: rename the keys to ours)")
        claimed[node.name] = key
        matched[key] = node
    return matched, warns


def _defaults_for(node, defaults):
    """The Defaults entries that apply to ``node`` ({attr: value}); as FINN, a later (value, ops) pair wins."""
    out = {}
    for attr, spec in defaults.items():
        pairs = None
        if isinstance(spec, list) and spec and len(spec) % 2 == 0 and all(
                ops == "all" or (isinstance(ops, list) and all(isinstance(o, str) for o in ops))
                for ops in spec[1::2]):
            pairs = list(zip(spec[::2], spec[1::2]))
        if pairs is None:
            pairs = [(spec, "all")]
        for value, ops in pairs:
            if ops == "all" or node.op_type in {canonical_op_type(o) for o in ops}:
                if attr in node.op.folding:
                    _settable(f"Defaults ({node.name})", attr, value)
                    out[attr] = _normalize(node, attr, value)
    return out


# what a folding file may set where the layer knows more: UltraRAM weights need runtime-writable weights,
# which no folding file sets (and the xc7z020 has no UltraRAM)
SETTABLE = {"ram_style": BRAM_OR_LUT_STYLES}


def _settable(where, attr, value):
    legal = SETTABLE.get(attr)
    if legal is not None and value not in legal:
        why = (" (ultra: UltraRAM needs runtime-writable weights, which a folding file cannot set, and the xc7z020 "
               "has no UltraRAM)" if value == "ultra" else "")
        raise ValueError(f"{where}: {attr}={value!r} cannot be set by a folding file; legal: "
                         f"{', '.join(legal)}{why}")


def _normalize(node, attr, value):
    """A value read from a folding file as the spec holds it: FINN's 0/1 for a flag as a bool (an SWG's
    parallel_window, an MVAU's shared_activation), so that the spec is the one the compile that wrote the
    file had, down to the layer's cache key (rtlgen.backend.layer_verilog)."""
    field = node.op.folding[attr]
    flag = any(f.name == field and isinstance(f.default, bool) for f in dataclasses.fields(node.op.spec))
    if flag and not isinstance(value, bool) and value in (0, 1):
        return bool(value)
    return value


def apply_folding_config(nodes, config):
    """Set ``node.folding`` from a FINN folding config (dict from :func:`load_folding_config`, or a path).

    ``Defaults`` (``{attr: value}`` or FINN's ``{attr: [value, [op types] or "all", ...]}``) apply first, to
    the nodes whose op has that attribute; node entries then override. Other folding already on a node is
    kept. Attributes in :data:`IGNORED_ATTRS` (and FINN attributes this op does not have here, such as a
    v0.9 Thresholding ``mem_mode``) are skipped; entries for FIFO/DWC nodes the stitcher inserts later too.

    Every node is validated (``node.spec()``) before anything changes: an illegal value raises ValueError
    naming the node, the attribute and the legal values; so do an unknown node name and a parallelism
    attribute the op does not have. Returns the list of warnings (ignored attributes/entries).
    """
    if not isinstance(config, dict):
        config = load_folding_config(config)
    check_folding_config(config)
    warns = []
    matched, match_warns = _match_keys(nodes, config)
    warns += match_warns
    defaults = config.get(DEFAULTS_KEY, {})
    for attr in defaults:
        if not any(attr in n.op.folding for n in nodes):
            if attr in IGNORED_ATTRS or attr in _known_attrs():
                warns.append(f"Defaults: attribute {attr!r} is not used by any node here, ignored")
            else:
                raise ValueError(f"folding config Defaults: unknown attribute {attr!r}; "
                                 f"known: {', '.join(sorted(_known_attrs()))}")
    entry_of = {node.name: key for key, node in matched.items()}
    new = {}
    for node in nodes:
        folding = {**node.folding, **_defaults_for(node, defaults)}
        key = entry_of.get(node.name)
        for attr, value in (config[key] if key is not None else {}).items():
            where = f"{node.name} ({node.op_type}, config entry {key!r})" if key != node.name \
                else f"{node.name} ({node.op_type})"
            if attr in node.op.folding:
                _settable(where, attr, value)
                folding[attr] = _normalize(node, attr, value)
            elif attr in PARALLEL_ATTRS or not (attr in IGNORED_ATTRS or attr in _known_attrs()):
                raise ValueError(f"{where} has no folding attribute {attr!r}; "
                                 f"legal: {', '.join(node.op.folding) or 'none'}")
            else:
                warns.append(f"{where}: attribute {attr!r}={value!r} is not implemented here, ignored")
        try:
            spec_of(node, folding)
        except ValueError as exc:
            msg = str(exc)
            if key is not None and key != node.name:
                msg = f"{msg} (config entry {key!r})"
            raise ValueError(msg) from None
        new[node.name] = folding
    for node in nodes:
        node.folding = new[node.name]
    return warns


def _json_value(value):
    if isinstance(value, bool):
        return int(value)           # FINN stores parallel_window & co as 0/1
    if hasattr(value, "item"):      # numpy scalar
        return value.item()
    return value


# rtlgen's own folding attributes, written only where set: a config that does not use them stays FINN's
def folding_config(nodes):
    """The config in effect, FINN format: {"Defaults": {}, name: {FINN attribute: value}} with every folding
    attribute of each op as its spec resolved it (defaults included, mem_mode in the current FINN names;
    rtlgen's own attributes, ``Op.extensions``, only where they differ from the spec's default)."""
    config = {DEFAULTS_KEY: {}}
    for node in nodes:
        spec = spec_of(node)
        defaults = {f.name: f.default for f in dataclasses.fields(spec)}
        config[node.name] = {attr: _json_value(getattr(spec, field))
                             for attr, field in node.op.folding.items()
                             if hasattr(spec, field) and not (attr in node.op.extensions
                                                              and getattr(spec, field) == defaults.get(field))}
    return config


def write_folding_config(nodes, path):
    """Write :func:`folding_config` as JSON to ``path``; returns the dict."""
    config = folding_config(nodes)
    Path(path).write_text(json.dumps(config, indent=2) + "\n")
    return config


def resolve_weight_styles(nodes):
    """Each weight memory's ``ram_style`` ``auto`` set to the style its spec resolves it to
    (``weight_ram_style``: block RAM from a depth, else LUTs), as the optimizer costed it. Its folding.json
    then says where the weights are, and a compile from that file builds the same memories: ``auto`` there
    would let ``place_memories`` (which leaves an optimizer's design alone) move LUT weights into free
    block RAM."""
    for node in nodes:
        if "ram_style" not in node.op.folding or node.folding.get("ram_style", "auto") != "auto":
            continue
        resolved = getattr(node.spec(), "weight_ram_style", None)
        if resolved is not None:
            node.folding["ram_style"] = resolved


def fold(graph, options):
    """The ``fold`` pass: the user's folding file, the folding optimizer under a budget (``--fit``,
    ``--budget``), FINN's own folding in its hardware-layer ONNX, or FINN's SetFolding for a target II."""
    graph = graph.copy()
    if options.folding:
        if options.target_fps is not None:
            raise CompileError("give either --folding or --target-fps, not both")
        try:
            notes = apply_folding_config(graph.nodes, load_folding_config(options.folding))
        except ValueError as exc:       # the user's file: a bad entry, an illegal PE/SIMD for a node
            raise CompileError(str(exc)) from None
        for note in notes:
            warnings.warn(note, CompileWarning, stacklevel=2)
    elif options.optimizer_budget() is not None:
        target = options.target_cycles() if options.target_fps is not None else None
        try:
            if getattr(options, "objective", "throughput") == "latency":
                from rtlgen.passes.latency import optimize_latency        # start-up: scipy.optimize, ~0.35 s
                graph.optimizer = optimize_latency(graph, options.optimizer_budget(), target_cycles=target,
                                                   clock_mhz=options.clock_mhz)
            else:       # no faster II than the zynq shell's DMA can feed (rtlgen.analyses.board_rate)
                graph.optimizer = optimize_folding(graph, options.optimizer_budget(), target_cycles=target,
                                                   io_cycles=lambda g: graph_shell_cycles(g, options.clock_mhz))
            resolve_weight_styles(graph.nodes)
        except NoFit as exc:           # what to try: the budget, the target, more devices
            lower = "lower --target-fps, " if options.target_fps is not None else ""
            budget = "a larger --max-utilization" if options.fit is not None else "a larger --budget"
            raise CompileError(f"{exc}; {lower}give {budget}, or split the network across devices (rtlgen "
                               f"partition)") from None
    elif options.target_fps is None and getattr(graph.model, "finn_hw", False):
        pass                        # FINN's hardware-layer ONNX carries the user's folding: kept
    else:
        set_folding(graph, options.target_cycles())
    return graph
