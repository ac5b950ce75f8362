"""The registry's lowering rules as the lowering asks them (read on each call: plug-ins registered after
import count): the rules at one place of the walk, the one rule that takes an ONNX node, and what maps to
hardware, as one clause for messages."""

from rtlgen.ir.graph import OPS
from rtlgen.passes.thresholds import ELEMENTWISE_OPS, QUANTIZERS, SHAPE_OPS

__all__ = ["lowerings", "rule_for", "may_lower", "supported_ops"]


def lowerings(at):
    """Every (op, lowering) of the registry (read now: plug-ins registered after import count) at ``at``."""
    return [(op, lowering) for op in OPS.values() for lowering in op.lowers if lowering.at == at]


def _legal_names(lowering):
    return lowering.legal.split(", ") if lowering.legal else list(lowering.onnx_ops)


def supported_ops():
    """The ONNX ops the lowering maps to hardware, as one clause for messages (from the registry)."""
    nodes = sorted({name for _, lw in lowerings("node") if lw.streams == 1 for name in _legal_names(lw)})
    tails = sorted({f"{name} (at the end)" for _, lw in lowerings("tail") for name in _legal_names(lw)})
    joins = sorted({lw.legal or f"{', '.join(lw.onnx_ops)} of streams" for _, lw in lowerings("node")
                    if lw.streams != 1})
    parts = nodes + tails + joins
    if lowerings("activation"):
        quantizers = ", ".join(sorted(QUANTIZERS))
        elementwise = ", ".join(sorted(set(ELEMENTWISE_OPS) - set(QUANTIZERS)))
        parts += [f"quantizers ({quantizers})", f"the float ops up to a quantizer ({elementwise})"]
    return (f"mapped to hardware: {', '.join(parts)} and reshapes ({', '.join(sorted(SHAPE_OPS))}); any other op "
            f"runs on the host, before the first hardware layer or after the last")


def rule_for(ctx, node, at, streams):
    """The one lowering of the registry at ``at`` that takes ``node`` (at="node": with ``streams``, its
    inputs on hardware streams), or None; ``ctx`` is the :class:`layers.op.LoweringContext` its ``when``
    is asked with."""
    found = []
    for op, lowering in lowerings(at):
        if at != "activation" and node.op_type not in lowering.onnx_ops:
            continue
        wanted = len(node.input) if lowering.streams == "all" else lowering.streams
        if at == "node" and len(streams) != wanted:
            continue
        if lowering.when is not None and not lowering.when(ctx, node):
            continue
        found.append((op, lowering))
    if len(found) > 1:
        raise RuntimeError(f"internal error: node {node.name} ({node.op_type}) matches the lowerings of "
                           f"{', '.join(op.op_type for op, _ in found)}; their Op.lowers must not overlap")
    return found[0][1] if found else None


def may_lower(node):
    """Whether some lowering of the registry may take ``node`` (a reshape, a quantizer, an op of a rule)."""
    return node.op_type in SHAPE_OPS | QUANTIZERS or \
        any(node.op_type in lowering.onnx_ops for _, lowering in lowerings("node"))
