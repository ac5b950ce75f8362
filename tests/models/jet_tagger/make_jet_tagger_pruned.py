"""hls4ml's deployed jet tagger is pruned: 75 % of each Dense layer's weights are zero (the tutorial's
``prune_low_magnitude`` with ``PolynomialDecay(final_sparsity=0.75)``, the PYNQ-Z2 anchor in
reference/anchors.md). This writes jet_tagger_pruned.onnx from jet_tagger.onnx (make_jet_tagger.py): in each
of the four weight tensors (the float tensors quantized by Quant_0, 2, 4, 6), the 75 % of smallest magnitude set
to zero (ties broken by position); biases, quantizers, activations unchanged. Needs only onnx and numpy:

    python tests/models/jet_tagger/make_jet_tagger_pruned.py
"""
import os

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
SPARSITY = 0.75
WEIGHT_QUANTS = ("Quant_0", "Quant_2", "Quant_4", "Quant_6")


def main():
    model = onnx.load(os.path.join(HERE, "jet_tagger.onnx"))
    inits = {i.name: i for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type != "Quant" or node.output[0].rsplit("_out", 1)[0] not in WEIGHT_QUANTS:
            continue
        init = inits[node.input[0]]
        w = numpy_helper.to_array(init).copy()
        order = np.argsort(np.abs(w).ravel(), kind="stable")
        w.ravel()[order[:int(round(SPARSITY * w.size))]] = 0
        init.CopyFrom(numpy_helper.from_array(w, init.name))
        print(f"{node.output[0]}: {w.shape}, {np.mean(w == 0):.0%} zero")
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, "jet_tagger_pruned.onnx"))


if __name__ == "__main__":
    main()
