"""Models quantized by ONNX Runtime into its com.microsoft contrib ops, with ONNX Runtime's outputs.

usage: ort_contrib_models.py MODEL CALIB.npy TEST.npy OUTDIR [VARIANT...]

Writes OUTDIR/<variant>.onnx, OUTDIR/<variant>.ref_<k>.npy (ONNX Runtime, CPU provider, one
thread, graph optimizations "basic": the contrib ops run as written), OUTDIR/fp32.ref_<k>.npy and
OUTDIR/variants.json, the layout tests/quant_ort/check_ort_quant.py reads. Variants (default all):
  qop_u8s8      QOperator format, uint8 activations, int8 weights per tensor (the quantizer's default)
  qop_u8s8_rr   the same with reduce_range (7-bit weights), ONNX Runtime's advice for x86 CPUs
                without VNNI, whose u8s8 kernels add pairs of products in saturating 16-bit lanes
  qop_u8s8_pc   int8 weights per channel (QGemm with per-column b_scale)
  qop_u8u8      uint8 weights
  qop_s8s8      int8 activations and weights (QLinearAdd/Softmax... in int8)
  dyn_fused     quantize_dynamic, then ONNX Runtime's own graph fusions that turn its
                DynamicQuantizeLinear + MatMulInteger + Mul chains into MatMulIntegerToFloat and
                DynamicQuantizeMatMul, saved (other fusions off: they write contrib ops that are not
                quantized ones)
A variant the quantizer cannot write is skipped with its reason. When ONNX Runtime rejects a model
its quantizer wrote (its QOperator transformer output feeds an int32 bias into QLinearAdd), the
offending nodes are excluded from quantization and the variant is written again; the excluded nodes
are listed in variants.json.
"""
import json
import os
import re
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                      quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process

# ONNX Runtime's graph fusions other than the two that write the dynamically quantized MatMul ops.
OTHER_FUSIONS = ["AttentionFusion", "EmbedLayerNormFusion", "SkipLayerNormFusion", "LayerNormFusion",
                 "SimplifiedLayerNormFusion", "GeluFusion", "BiasGeluFusion", "FastGeluFusion", "QuickGeluFusion",
                 "BiasSoftmaxFusion", "BiasDropoutFusion", "MatMulAddFusion", "GemmActivationFusion",
                 "ConvActivationFusion", "MatMulScaleFusion", "MatMulActivationFusion", "ConvAddActivationFusion",
                 "NchwcTransformer", "GatherToSliceFusion", "GatherToSplitFusion", "GatherSliceToSplitFusion",
                 "ConvAddFusion", "ConvMulFusion", "ConvBNFusion", "ReluClipFusion", "QDQS8ToU8Transformer",
                 "QDQSelectorActionTransformer", "QDQFinalCleanupTransformer", "MatMulNBitsFusion",
                 "TransposeOptimizer", "RotaryEmbeddingFusion", "GroupQueryAttentionFusion", "MatmulTransposeFusion"]
OTHER_FUSIONS += [f + level for f in OTHER_FUSIONS for level in ("L1", "L2")]  # names with their level


class Reader(CalibrationDataReader):
    def __init__(self, name, x, batch):
        self.items = [{name: x[i:i + batch]} for i in range(0, len(x), batch)]

    def get_next(self):
        return self.items.pop(0) if self.items else None


def session(path, level=ort.GraphOptimizationLevel.ORT_ENABLE_BASIC, save=None, disabled=None):
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.intra_op_num_threads = 1
    if save:
        so.optimized_model_filepath = save
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"], disabled_optimizers=disabled or [])


def static(pre, name, xc, fmt_kw, exclude):
    def make(path):
        quantize_static(pre, path, Reader(name, xc, 8), quant_format=QuantFormat.QOperator,
                        nodes_to_exclude=list(exclude), **fmt_kw)
    return make


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    model, calib, test, out = sys.argv[1:5]
    wanted = sys.argv[5:]
    os.makedirs(out, exist_ok=True)
    xc, xt = np.load(calib), np.load(test)
    name = onnx.load(model).graph.input[0].name
    pre = os.path.join(out, "fp32_pre.onnx")
    quant_pre_process(model, pre, skip_symbolic_shape=True)
    u8, s8 = QuantType.QUInt8, QuantType.QInt8
    kinds = {
        "qop_u8s8": dict(activation_type=u8, weight_type=s8),
        "qop_u8s8_rr": dict(activation_type=u8, weight_type=s8, reduce_range=True),
        "qop_u8s8_pc": dict(activation_type=u8, weight_type=s8, per_channel=True),
        "qop_u8u8": dict(activation_type=u8, weight_type=u8),
        "qop_s8s8": dict(activation_type=s8, weight_type=s8),
        "dyn_fused": None,
    }
    made, excluded, skipped = [], {}, {}
    for v, kw in kinds.items():
        if wanted and v not in wanted:
            continue
        path = os.path.join(out, v + ".onnx")
        try:
            if kw is None:
                raw = os.path.join(out, "dyn_raw.onnx")
                quantize_dynamic(pre, raw, weight_type=u8)
                session(raw, ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, save=path, disabled=OTHER_FUSIONS)
                s = session(path)
            else:
                exclude = []
                for _ in range(50):
                    static(pre, name, xc, kw, exclude)(path)
                    try:
                        s = session(path)
                        break
                    except Exception as e:  # noqa: BLE001  the quantizer wrote a model ONNX Runtime rejects
                        m = re.search(r"in node \(([^)]*)\)", str(e))
                        if not m:
                            raise
                        exclude.append(re.sub(r"_quant$", "", m.group(1)))
                if exclude:
                    excluded[v] = exclude
        except Exception as e:  # noqa: BLE001
            skipped[v] = str(e).splitlines()[0][:200]
            print(f"{v}: skipped: {skipped[v]}")
            continue
        for k, y in enumerate(s.run(None, {name: xt})):
            np.save(os.path.join(out, f"{v}.ref_{k}.npy"), y)
        ops = sorted({f"{n.domain}:{n.op_type}" if n.domain else n.op_type for n in onnx.load(path).graph.node})
        print(f"{v}: {', '.join(ops)}" + (f" (excluded: {', '.join(excluded[v])})" if v in excluded else ""))
        made.append(v)
    ys = session(model).run(None, {name: xt})
    for k, y in enumerate(ys):
        np.save(os.path.join(out, f"fp32.ref_{k}.npy"), y)
    with open(os.path.join(out, "variants.json"), "w") as fh:
        json.dump({"input": name, "variants": made, "outputs": len(ys), "onnxruntime": ort.__version__,
                   "excluded": excluded, "skipped": skipped}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
