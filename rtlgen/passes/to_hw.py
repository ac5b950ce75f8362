"""The ``to_hw`` pass: a loaded model -> the :class:`rtlgen.ir.graph.DataflowGraph` of hardware nodes and the
host's ONNX nodes before and after it; and :func:`stream_io`, how the model's input and output then meet the
graph's streams. Two front doors: a QONNX / FINN-ONNX network is lowered (:mod:`rtlgen.passes.lower`);
FINN's hardware-layer ONNX already is a dataflow graph and is read as one (:mod:`rtlgen.passes.finn_hw`)."""

from rtlgen.ir.host import submodel
from rtlgen.passes.finn_hw import finn_stream_io, lower_finn_hw
from rtlgen.passes.lower import lower
from sim.stream_io import StreamEnd, StreamIO

__all__ = ["to_hw", "stream_io"]


def to_hw(model, options=None):
    if getattr(model, "finn_hw", False):
        return lower_finn_hw(model)
    return lower(model)


def stream_io(model, graph, last=None):
    """How the model's input and output map onto ``graph``'s streams (its first consumer's and last
    producer's word widths); the output is ``last``'s when given (the last device of a partition)."""
    if getattr(model, "finn_hw", False):
        return finn_stream_io(model, graph, last)
    last_graph = last or graph
    node, port = graph.consumers(graph.input)[0]
    first, last = node.spec(), last_graph.producer(last_graph.output)[0].spec()
    t_in, t_out = graph.tensors[graph.input], last_graph.tensors[last_graph.output]
    in_bits, out_bits = t_in.dtype.bitwidth(), t_out.dtype.bitwidth()
    graph_in, graph_out = model.graph.input[0].name, model.graph.output[0].name
    ends = []
    for t, lanes in ((t_in, first.in_width // in_bits), (t_out, last.out_width // out_bits)):
        ends.append(StreamEnd(t.name, tuple(t.shape), t.dtype, t.scale, lanes, t.kind, t.gain, t.offset,
                              t.rounding, t.fixed))
    pre = submodel(model, graph.host_pre, [graph_in], [t_in.name], "host_pre")
    post = submodel(model, graph.host_post, [t_out.name], [graph_out], "host_post")
    return StreamIO(graph_in, tuple(model.get_tensor_shape(graph_in)), graph_out, *ends, pre, post)
