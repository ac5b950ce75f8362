"""Export MLPerf Tiny's ResNet-8 at W8A8 (8-bit weights, 8-bit activations, 8-bit input) as resnet8_w8a8.onnx
with 4 inputs in resnet8_w8a8_inputs.npy (issue 43 item 1: INT8 convolutions on DSP48E1s).

Run in the Brevitas venv (the project's tests do not need torch; the .onnx and the inputs are committed):

    /work/brevitas-venv/bin/python tests/models/mlperf_tiny/make_resnet8_w8a8.py

The topology, the random weights, the calibration and the export are make_models.py's ResNet-8 (the W4A4
resnet8.onnx): only the bit widths differ, so this script sets make_models' widths before building the
network (its quantizer factories read them at call time). Seed 0 as there; weights RANDOM, BatchNorm
statistics and activation scales calibrated on random inputs: hardware figures and bit-exactness only.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_models   # noqa: E402  (the sibling script; torch and brevitas imported there)

make_models.W_BITS, make_models.A_BITS, make_models.IN_BITS = 8, 8, 8


def main():
    torch.manual_seed(0)
    net = make_models.ResNet8()
    make_models.calibrate(net, 0)
    make_models.export(net, "resnet8_w8a8")


if __name__ == "__main__":
    main()
