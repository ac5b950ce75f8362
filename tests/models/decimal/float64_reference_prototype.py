"""Prototype (issue 17 item 6, not used by tests yet): the model executed node by node in float64
(qonnx int_quant for Quant). Reads /tmp/ties/*; see the closing note of the stop that added it."""
import numpy as np, onnx
from onnx import TensorProto, numpy_helper, helper
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_node
from qonnx.custom_op.general.intquant import int_quant
from qonnx.custom_op.registry import getCustomOp
from qonnx.util.basic import is_finn_op
from qonnx.util.cleanup import cleanup_model

def float64_reference(path, x):
    model = cleanup_model(ModelWrapper(str(path)))
    g = model.graph
    for i, init in enumerate(g.initializer):
        if init.data_type == TensorProto.FLOAT:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float64), init.name))
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    consts = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    name, out = g.input[0].name, g.output[0].name
    shape = model.get_tensor_shape(name)
    opset = next(o.version for o in model.model.opset_import if o.domain in ("", "ai.onnx"))
    results = []
    for s in np.asarray(x, dtype=np.float64):
        ctx = {k: (np.asarray(v, np.float64) if v is not None and np.asarray(v).dtype == np.float32 else v) for k, v in model.make_empty_exec_context().items()}; ctx.update(consts); ctx[name] = s.reshape(shape)
        for node in g.node:
            if node.op_type == "Quant":
                attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
                rm = attrs.get("rounding_mode", b"ROUND"); rm = rm.decode() if isinstance(rm, bytes) else rm
                ctx[node.output[0]] = np.asarray(int_quant(*[np.asarray(ctx[i], np.float64) for i in node.input],
                                                 attrs.get("signed", 1), attrs.get("narrow", 0), rm), np.float64)
            elif is_finn_op(node.domain):
                getCustomOp(node).execute_node(ctx, g)
                ctx[node.output[0]] = np.asarray(ctx[node.output[0]], np.float64)
            else:
                execute_node(node, ctx, g, opset)
        results.append(ctx[out])
    return np.concatenate(results)

x = np.load('/tmp/ties/x.npy')
r = float64_reference('/tmp/ties/m.onnx', x)
print(r.dtype, r[:1])
np.save('/tmp/ties/ref64.npy', r)
