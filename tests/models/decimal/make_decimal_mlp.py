"""An MLP with decimal scales (input 0.05, weights/activations 0.1) built with onnx.helper: the model
for issue 17 item 6 (verify at rounding ties). Not used by tests yet."""
import numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper

def decimal_mlp(path, seed=0, f=32, h=24, o=10):
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)); return name
    def quant(name, x, scale, bits, signed, narrow=False):
        nodes.append(helper.make_node("Quant", [x, const(f"{name}_s", scale), const(f"{name}_z", 0.0),
                     const(f"{name}_b", float(bits))], [f"{name}_out"], name=name, domain="qonnx.custom_op.general",
                     signed=int(signed), narrow=int(narrow), rounding_mode="ROUND"))
        return f"{name}_out"
    cur = quant("Qin", "x", 0.05, 8, True)
    for k, (a, b) in enumerate([(f, h), (h, o)]):
        w = quant(f"Qw{k}", const(f"W{k}", rng.integers(-3, 4, (a, b)) * 0.1), 0.1, 3, True, True)
        nodes.append(helper.make_node("MatMul", [cur, w], [f"mm{k}"], name=f"MatMul_{k}"))
        if k == 0:
            nodes.append(helper.make_node("Relu", [f"mm{k}"], ["r0"], name="Relu_0"))
            cur = quant("Qa0", "r0", 0.1, 5, False)
        else:
            cur = quant("Qout", f"mm{k}", 0.1, 8, True)
    graph = helper.make_graph(nodes, "decimal_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, f])],
                              [helper.make_tensor_value_info(cur, TensorProto.FLOAT, [1, o])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
              helper.make_opsetid("qonnx.custom_op.general", 1)]), str(path))
