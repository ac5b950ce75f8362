"""`rtlgen inspect`: what the compiler makes of a model before any hardware is generated. The lowered and
folded dataflow graph node by node (the ONNX nodes each absorbs, datatypes, folded shapes, cycles, the
estimate) with every folding axis's current value and legal values, and the ONNX nodes left to the host
and why: read off the graph the ``INSPECT`` flow (:mod:`rtlgen.flows`) made, where a model that cannot be
lowered fails with the same one-line error as `compile`."""

import numpy as np
from rich import box
from rich.table import Table

from rtlgen.costmodel import estimate

__all__ = ["describe", "print_description"]


def _scale(scale):
    scale = np.asarray(scale, dtype=np.float64).reshape(-1)
    return float(scale[0]) if scale.size == 1 else f"per channel ({scale.size})"


def describe(model_path, model, graph):
    """A JSON-able dict of ``graph``, the lowered and folded graph of ``model`` (the qonnx model loaded from
    ``model_path``)."""
    ops = {n.name: n.op_type for n in model.graph.node}
    nodes = []
    for node in graph.nodes:
        spec = node.spec()
        legal = {attr: {"value": getattr(spec, node.op.folding[attr]),
                        "legal": [int(v) if not isinstance(v, bool) else v for v in node.op.legal(attr, node.params)]}
                 for attr in node.op.parallelism}
        tensors = {t: graph.tensors[t] for t in node.outputs if t in graph.tensors}
        nodes.append({
            "name": node.name, "op_type": node.op_type,
            "onnx_nodes": [f"{s} ({ops.get(s, '?')})" for s in node.sources],
            "inputs": list(node.inputs), "outputs": list(node.outputs),
            "input_dtype": getattr(spec.input_dtype, "name", None), "output_dtype": getattr(spec.output_dtype, "name", None),
            "folded_output_shape": list(spec.folded_output_shape), "in_width": spec.in_width,
            "out_width": spec.out_width, "exp_cycles": spec.exp_cycles, "folding": legal,
            "model_tensors": {t: {"shape": list(s.shape), "dtype": s.dtype.name, "scale": _scale(s.scale)}
                              for t, s in tensors.items()},
            "resources": dict(estimate(spec)),
        })
    t_in = graph.tensors[graph.input]
    return {
        "model": str(model_path),
        "input": {"tensor": graph.input, "shape": list(t_in.shape), "dtype": t_in.dtype.name,
                  "scale": _scale(t_in.scale)},
        "host_before": [{"node": n, "op_type": ops[n], "why": "before the first integer tensor (the input "
                         "quantizer and what precedes it run on the host)"} for n in graph.host_pre],
        "nodes": nodes,
        "host_after": [{"node": n, "op_type": ops[n], "why": "after the last hardware layer (float output "
                        "ops: the hardware hands over integer codes)"} for n in graph.host_post],
        "analytic_cycles_per_frame": max(n["exp_cycles"] for n in nodes),
    }


def print_description(info, console):
    inp = info["input"]
    console.print(f"{info['model']}: input {inp['tensor']} {tuple(inp['shape'])} {inp['dtype']} "
                  f"(scale {inp['scale']})", soft_wrap=True)
    for key, title in (("host_before", "host, before"), ("host_after", "host, after")):
        for h in info[key]:
            console.print(f"  {title}: {h['node']} ({h['op_type']}): {h['why']}", soft_wrap=True)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for name in ("node", "op", "from ONNX", "dtype in>out", "folded out", "cycles", "folding: value [legal]"):
        table.add_column(name, no_wrap=name not in ("from ONNX", "folding: value [legal]"))
    for n in info["nodes"]:
        folding = "\n".join(f"{a}={v['value']} [{', '.join(map(str, v['legal']))}]" for a, v in n["folding"].items())
        table.add_row(n["name"], n["op_type"], "\n".join(n["onnx_nodes"]) or "-",
                      f"{n['input_dtype']}>{n['output_dtype']}", str(tuple(n["folded_output_shape"])),
                      f"{n['exp_cycles']:,}", folding or "-")
    console.print(table)
    console.print(f"II {info['analytic_cycles_per_frame']:,} cycles/frame at this folding; pass another with "
                  f"--folding FILE.json (FINN format) or --target-fps", soft_wrap=True)
