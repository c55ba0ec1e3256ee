"""Writes a tiny Linear+ReLU ONNX model with onnx.helper (no PyTorch needed).

usage: /usr/bin/python3 make_linear.py OUT.onnx [--in N] [--out N] [--seed N]

  x [batch, IN] float32 -> Gemm(W [OUT, IN], b [OUT], transB=1) -> Relu -> y [batch, OUT]

This is the graph torch.nn.Sequential(nn.Linear(IN, OUT), nn.ReLU()) exports to. "batch" is a
symbolic dimension: alma binds it to the configured batch size. Weights are drawn from a fixed
seed (Kaiming-uniform like nn.Linear), so the file is the same on every run.
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--in", dest="n_in", type=int, default=256)
    ap.add_argument("--out", dest="n_out", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    rng = np.random.default_rng(a.seed)
    bound = 1.0 / np.sqrt(a.n_in)
    w = rng.uniform(-bound, bound, (a.n_out, a.n_in)).astype(np.float32)
    b = rng.uniform(-bound, bound, (a.n_out,)).astype(np.float32)

    graph = helper.make_graph(
        [
            helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["h"], name="fc", transB=1),
            helper.make_node("Relu", ["h"], ["y"], name="relu"),
        ],
        "linear_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", a.n_in])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", a.n_out])],
        initializer=[numpy_helper.from_array(w, "fc.weight"), numpy_helper.from_array(b, "fc.bias")],
    )
    model = helper.make_model(graph, producer_name="alma-examples-linear",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7  # readable by any ONNX runtime of the opset-13 era
    onnx.checker.check_model(model)
    onnx.save(model, a.out)
    print(f"wrote {a.out}: Linear({a.n_in} -> {a.n_out}) + ReLU, opset 13")


if __name__ == "__main__":
    main()
