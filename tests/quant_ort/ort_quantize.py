"""Quantizes a float model with ONNX Runtime's own quantizer, the way users arrive with int8
models, and records ONNX Runtime's outputs on the evaluation data as the reference.

usage: ort_quantize.py MODEL CALIB.npy TEST.npy OUTDIR

Runs in a python with onnxruntime (its quantization package needs onnx >= 1.16 and ml_dtypes).
Writes OUTDIR/<variant>.onnx for each variant below, OUTDIR/<variant>.ref_<k>.npy (ONNX Runtime,
graph optimizations "basic": QDQ models run as written, dequantized values through float kernels,
the spec's meaning; QOperator models through its integer kernels), OUTDIR/fp32.ref_<k>.npy, and
OUTDIR/variants.json (input name, variants, output count, onnxruntime version).
Variants (what ONNX Runtime's quantizer writes most often):
  qdq_u8s8_pc   QDQ format, uint8 activations, int8 weights per channel (ORT's default for CNNs)
  qdq_s8s8      QDQ format, int8 activations and weights per tensor
  qop_u8s8      QOperator format (QLinearConv, QGemm, QLinearAdd... com.microsoft ops), 7-bit weights
  dyn_u8s8      dynamic quantization: DynamicQuantizeLinear + MatMulInteger/ConvInteger
"""
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                      quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process


class Reader(CalibrationDataReader):
    def __init__(self, name, x, batch):
        self.items = [{name: x[i:i + batch]} for i in range(0, len(x), batch)]

    def get_next(self):
        return self.items.pop(0) if self.items else None


def run(path, name, x):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return s.run(None, {name: x})


def main():
    model, calib, test, out = sys.argv[1:5]
    os.makedirs(out, exist_ok=True)
    xc, xt = np.load(calib), np.load(test)
    name = onnx.load(model).graph.input[0].name
    pre = os.path.join(out, "fp32_pre.onnx")
    quant_pre_process(model, pre, skip_symbolic_shape=True)
    variants = {
        "qdq_u8s8_pc": lambda p: quantize_static(pre, p, Reader(name, xc, 8), quant_format=QuantFormat.QDQ,
                                                 activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                                                 per_channel=True),
        "qdq_s8s8": lambda p: quantize_static(pre, p, Reader(name, xc, 8), quant_format=QuantFormat.QDQ,
                                              activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                                              per_channel=False),
        # reduce_range (7-bit weights), as ORT's docs advise for CPUs without VNNI: there its u8*s8
        # kernels (vpmaddubsw) saturate 16-bit pair sums with full-range weights, and its outputs
        # stop being the exact integer result alma computes (13.8% of the largest logit on the
        # digits model here; identical with reduce_range).
        "qop_u8s8": lambda p: quantize_static(pre, p, Reader(name, xc, 8), quant_format=QuantFormat.QOperator,
                                              activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                                              per_channel=False, reduce_range=True),
        "dyn_u8s8": lambda p: quantize_dynamic(pre, p, weight_type=QuantType.QUInt8),
    }
    made = []
    for v, make in variants.items():
        p = os.path.join(out, v + ".onnx")
        make(p)
        for k, y in enumerate(run(p, name, xt)):
            np.save(os.path.join(out, f"{v}.ref_{k}.npy"), y)
        made.append(v)
    ys = run(model, name, xt)
    for k, y in enumerate(ys):
        np.save(os.path.join(out, f"fp32.ref_{k}.npy"), y)
    with open(os.path.join(out, "variants.json"), "w") as f:
        json.dump({"input": name, "variants": made, "outputs": len(ys), "onnxruntime": ort.__version__}, f)


if __name__ == "__main__":
    main()
