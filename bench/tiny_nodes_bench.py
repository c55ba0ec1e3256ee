#!/usr/bin/env python3
"""Per-node overhead: a graph of many tiny nodes, alma beside ONNX Runtime.

The graph repeats, BLOCKS times, the shape bookkeeping a decoder LLM's decode step does on every
step while its batch and past length are symbolic (FOLD cannot fold it):
    s = Shape(x); b = Gather(s, 0); u = Unsqueeze(b, [0]); c = Concat(u, [-1]); x = Reshape(x, c);
    x = Add(x, bias)
on an input x of [batch, WIDTH] (batch symbolic), so the time per run divided by the node count is
what one node costs to dispatch (6 * BLOCKS nodes). Each alma binary given (--alma a,b: e.g. a build
before and after a change) and ONNX Runtime are timed in alternating rounds; printed: p50 and
fastest run of each round, then the best p50, median p50 and fastest run over the rounds, and the
fastest run per node.

    .venv-test/bin/python bench/tiny_nodes_bench.py --alma build/alma --threads 1
"""
import argparse
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def build(path, blocks, width):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    nodes, inits = [], [numpy_helper.from_array(np.array([0], np.int64), "zero"),
                        numpy_helper.from_array(np.array(0, np.int64), "zero_scalar"),
                        numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
                        numpy_helper.from_array(np.arange(width, dtype=np.float32) * 1e-3, "bias")]
    x = "x"
    for i in range(blocks):
        nodes += [helper.make_node("Shape", [x], [f"s{i}"]),
                  helper.make_node("Gather", [f"s{i}", "zero_scalar"], [f"b{i}"], axis=0),
                  helper.make_node("Unsqueeze", [f"b{i}", "zero"], [f"u{i}"]),
                  helper.make_node("Concat", [f"u{i}", "minus1"], [f"c{i}"], axis=0),
                  helper.make_node("Reshape", [x, f"c{i}"], [f"r{i}"]),
                  helper.make_node("Add", [f"r{i}", "bias"], [f"x{i}"])]
        x = f"x{i}"
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    g = helper.make_graph(nodes, "tiny_nodes", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", width])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return len(nodes)


def bench_alma(alma, path, xfile, convs, threads, min_time, batch):
    sys.path.insert(0, HERE)
    from timing import alma_bench
    res = alma_bench(alma, path, ["--data", xfile, "-c", ",".join(convs), "--threads", str(threads), "-b", str(batch),
                                  "-n", "50", "--min-time", str(min_time)])
    return {c: lat and (lat["p50"], lat["min"]) for c, lat in res.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--alma", default="build/alma", help="one or more alma binaries, comma separated")
    ap.add_argument("--blocks", type=int, default=50)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--conversions", default="EAGER,FOLD+FUSE+DNNL,FOLD+FUSE+BLAS")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=4)
    a = ap.parse_args()
    import numpy as np
    import onnxruntime as ort
    sys.path.insert(0, HERE)
    from timing import time_samples
    almas = a.alma.split(",")
    convs = a.conversions.split(",")
    with tempfile.TemporaryDirectory() as td:
        path = os.path.join(td, "tiny.onnx")
        nn = build(path, a.blocks, a.width)
        x = np.random.default_rng(0).standard_normal((a.batch, a.width)).astype(np.float32)
        xfile = os.path.join(td, "x.npy")
        np.save(xfile, x)
        so = ort.SessionOptions()
        so.intra_op_num_threads = a.threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        keys = [f"{i}:{c}" for i in range(len(almas)) for c in convs] + ["ORT"]
        rows = {k: [] for k in keys}
        print(f"{nn} nodes; alma binaries: " + ", ".join(f"{i}={p}" for i, p in enumerate(almas)), flush=True)
        for r in range(a.rounds):
            for i, alma in enumerate(almas):
                res = bench_alma(alma, path, xfile, convs, a.threads, a.min_time, a.batch)
                for c in convs:
                    rows[f"{i}:{c}"].append(res.get(c))
            t = time_samples(lambda: sess.run(None, {"x": x}), 50, a.min_time)
            rows["ORT"].append((statistics.median(t), min(t)))
            print(f"round {r + 1} p50 (min) ms: " + ", ".join(
                f"{k} {v[-1][0]:.4f} ({v[-1][1]:.4f})" if v[-1] else f"{k} failed" for k, v in rows.items()), flush=True)
        for k, v in rows.items():
            ok = [x for x in v if x]
            if ok:
                fastest = min(x[1] for x in ok)
                print(f"{k}: p50 best {min(x[0] for x in ok):.4f} ms, median {statistics.median(x[0] for x in ok):.4f} ms; "
                      f"fastest run {fastest:.4f} ms = {fastest * 1e3 / nn:.3f} us/node ({len(ok)} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
