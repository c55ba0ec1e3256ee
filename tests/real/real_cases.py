"""Classes of bugs met on real models (ONNX files shipped inside PyPI packages), each as a small
generated model run through `alma run` on every conversion that can run here and compared with
ONNX Runtime's outputs on the same inputs.

usage: real_cases.py ALMA [CASE...]     (no CASE: all; --list prints the names)

Cases:
  empty_type      value_infos (If-branch outputs, graph value_info) with an empty TypeProto, as spox
                  and torch write them: loaded as unknown types, inferred
  strided_sym     a symbolic width through two (and five) stride-2 Conv/MaxPool layers, read back by
                  Shape -> Gather into a Reshape: FOLD must not fold it (2, 3 and 4 all give 1)
  deconv_bias     ConvTranspose (1 and 3 output channels) then Add (batch 1) or Mul (batch 2) of a
                  broadcast operand of every rank ([1], [1,1,1], [1,C,1,1], [C,1,1], a scalar); and
                  ConvTranspose with its own bias, 1-D to 3-D, 1, 5 and 24 output channels
  padded_eltwise  a ConvTranspose to 1 or 3 channels (its channel-blocked layout pads them to a block;
                  its output an output too, so no post-op) then Sigmoid, HardSigmoid (two oneDNN steps) or
                  Tanh: DNNL runs them on the plain layout
                  where its jit kernel does not take the padded one
  nwc_conv        tf2onnx's 1-D convolution: [N, L, C] -> Mul -> Unsqueeze -> Transpose to [N, C, L, 1] ->
                  Conv [k, 1] -> Squeeze -> Add -> Relu -> GlobalMaxPool (DNNL: the Transpose a view
                  the convolution reads, the Squeeze a view of its nwc output)
  const_weight    a weight built by ConstantOfShape + Mul from constants: FOLD folds both the small
                  one and one of 256 MiB (above what its probing inferences compute), same answer
  whole_slice     Slices that take every element (tf2onnx's ends of 1e9 and INT_MAX on a batch axis
                  that no address space can make longer, an end of 1 on a dim of 1, a negative start
                  of the whole dim): FOLD removes them; it keeps those it cannot prove whole (an end
                  of 1 on a symbolic batch, a reversing step, part of an axis, INT32_MAX on a
                  symbolic axis of bytes that could be longer)

  small_heavy     DNNL's placement of a [1,6,47,47] Softmax and a [1,47,192] LayerNormalization
                  (oneDNN) and a [2,16] Add (EAGER's kernel, by choice), from alma bench --json
  data_axes       alma bench's data rules: --data on a first axis the model names as a sequence,
                  a symbolic width bound to 1 (the report's warnings name the axis and the fix)
  info_constants  alma info counts weights held by Constant nodes as parameters

Exit 0 when every conversion that runs matches ONNX Runtime (max abs difference within 1e-4 of
the largest output, 1e-5 absolute floor), 1 otherwise; 77 when onnxruntime is missing.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import onnxruntime as ort
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

CONVERSIONS = ["EAGER", "FOLD+EAGER", "FUSE+EAGER", "FOLD+FUSE+EAGER", "DNNL", "FOLD+DNNL", "FOLD+FUSE+DNNL", "FOLD+XNNPACK",
               "FOLD+FUSE+XNNPACK", "FOLD+BLAS", "FOLD+FUSE+BLAS"]
F = TensorProto.FLOAT


def init(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def model(nodes, inputs, outputs, inits=(), value_info=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits), value_info=list(value_info))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def empty_vi(name):
    vi = onnx.ValueInfoProto()
    vi.name = name
    vi.type.CopyFrom(onnx.TypeProto())  # set, but no value case
    return vi


def case_empty_type(rng):
    then_g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"])], "then", [], [empty_vi("t")])
    else_g = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["e"])], "else", [], [empty_vi("e")])
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("If", ["c"], ["y0"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Add", ["y0", "r"], ["y"])]
    m = model(nodes, [helper.make_tensor_value_info("x", F, ["N", 3]), helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
              [helper.make_tensor_value_info("y", F, None)], value_info=[empty_vi("r"), empty_vi("y0")])
    x = rng.standard_normal((2, 3)).astype(np.float32)
    return [(m, {"x": x, "c": np.array(True)}), (m, {"x": x, "c": np.array(False)})]


def case_strided_sym(rng):
    out = []
    for layers, pool in ((2, False), (2, True), (5, False)):
        nodes, inits, cur, C = [], [], "x", 1
        for i in range(layers):
            if pool and i == 1:
                nodes.append(helper.make_node("MaxPool", [cur], [f"h{i}"], kernel_shape=[3, 3], strides=[2, 2],
                                              pads=[1, 1, 1, 1]))
            else:
                inits.append(init(f"w{i}", rng.standard_normal((4, C, 3, 3)).astype(np.float32) * 0.3))
                nodes.append(helper.make_node("Conv", [cur, f"w{i}"], [f"h{i}"], kernel_shape=[3, 3], strides=[2, 2],
                                              pads=[1, 1, 1, 1]))
                C = 4
            cur = f"h{i}"
        H = 64 >> layers
        inits += [init("idx", np.array(3, np.int64)), init("head", np.array([1, 4 * H], np.int64))]
        nodes += [helper.make_node("Shape", [cur], ["s"]), helper.make_node("Gather", ["s", "idx"], ["wd"]),
                  helper.make_node("Unsqueeze", ["wd", "zero"], ["wu"]),
                  helper.make_node("Concat", ["head", "wu"], ["shape"], axis=0),
                  helper.make_node("Reshape", [cur, "shape"], ["y"])]
        inits.append(init("zero", np.array([0], np.int64)))
        m = model(nodes, [helper.make_tensor_value_info("x", F, [1, 1, 64, "W"])],
                  [helper.make_tensor_value_info("y", F, None)], inits)
        for W in (37, 100):
            out.append((m, {"x": rng.standard_normal((1, 1, 64, W)).astype(np.float32)}))
    return out


def case_deconv_bias(rng):
    out = []
    for C in (1, 3):
        for bshape in ((1,), (1, 1, 1), (1, C, 1, 1), (C, 1, 1), ()):
            for op, N in (("Add", 1), ("Mul", 2)):
                w = rng.standard_normal((4, C, 2, 2)).astype(np.float32)
                b = (rng.standard_normal(bshape) + 1.5).astype(np.float32)
                nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["d"], kernel_shape=[2, 2], strides=[2, 2]),
                         helper.make_node(op, ["d", "b"], ["y"])]
                m = model(nodes, [helper.make_tensor_value_info("x", F, [N, 4, 8, 8])],
                          [helper.make_tensor_value_info("y", F, None)], [init("w", w), init("b", b)])
                out.append((m, {"x": rng.standard_normal((N, 4, 8, 8)).astype(np.float32)}))
    # the bias as ConvTranspose's own input, 1-D to 3-D, one channel to more than a block of 16
    for C in (1, 5, 24):
        for sp in ((9,), (6, 7), (3, 4, 5)):
            k = [2] * len(sp)
            w = rng.standard_normal((4, C, *k)).astype(np.float32)
            b = (rng.standard_normal(C) + 1.5).astype(np.float32)
            nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=k, strides=[2] * len(sp))]
            m = model(nodes, [helper.make_tensor_value_info("x", F, [2, 4, *sp])],
                      [helper.make_tensor_value_info("y", F, None)], [init("w", w), init("b", b)])
            out.append((m, {"x": rng.standard_normal((2, 4, *sp)).astype(np.float32)}))
    return out


def case_padded_eltwise(rng):
    out = []
    for C, act in ((1, "Sigmoid"), (1, "HardSigmoid"), (3, "Tanh"), (3, "Sigmoid")):
        w = (rng.standard_normal((16, C, 2, 2)) * 0.2).astype(np.float32)
        nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["c"], kernel_shape=[2, 2], strides=[2, 2]),
                 helper.make_node(act, ["c"], ["y"])]
        # c an output too: the activation is no post-op
        m = model(nodes, [helper.make_tensor_value_info("x", F, [1, 16, 20, 24])],
                  [helper.make_tensor_value_info("y", F, None), helper.make_tensor_value_info("c", F, None)],
                  [init("w", w)])
        out.append((m, {"x": rng.standard_normal((1, 16, 20, 24)).astype(np.float32)}))
    return out


def case_nwc_conv(rng):
    out = []
    for N, L, C, OC in ((2, 64, 32, 48), (1, 37, 16, 8)):
        w = (rng.standard_normal((OC, C, 5, 1)) / np.sqrt(5 * C)).astype(np.float32)
        b = rng.standard_normal((1, OC, 1)).astype(np.float32)
        nodes = [helper.make_node("Mul", ["x", "half"], ["h"]),  # DNNL's own buffer, as a LayerNorm's output
                 helper.make_node("Unsqueeze", ["h", "ax3"], ["u"]),
                 helper.make_node("Transpose", ["u"], ["t"], perm=[0, 2, 1, 3]),
                 helper.make_node("Conv", ["t", "w"], ["c"], kernel_shape=[5, 1]),
                 helper.make_node("Squeeze", ["c", "ax3"], ["s"]),
                 helper.make_node("Add", ["s", "b"], ["a"]),
                 helper.make_node("Relu", ["a"], ["r"]),
                 helper.make_node("GlobalMaxPool", ["r"], ["y"])]
        # s, the squeezed convolution output, an output too (a view of the nwc output, made plain)
        m = model(nodes, [helper.make_tensor_value_info("x", F, [N, L, C])],
                  [helper.make_tensor_value_info("y", F, None), helper.make_tensor_value_info("s", F, None)],
                  [init("w", w), init("b", b), init("ax3", np.array([3], np.int64)),
                   init("half", np.array(0.5, np.float32))])
        out.append((m, {"x": rng.standard_normal((N, L, C)).astype(np.float32)}))
    return out


def case_const_weight(rng):
    # y = x @ (ConstantOfShape([K, N], 0.5) * s): the weight depends on constants only
    out = []
    for K, N in ((16, 8), (4096, 16385)):  # the second is 256 MiB as float32: above FOLD's limit
        nodes = [helper.make_node("ConstantOfShape", ["shape"], ["c"],
                                  value=helper.make_tensor("v", F, [1], [0.5])),
                 helper.make_node("Mul", ["c", "s"], ["wt"]),
                 helper.make_node("MatMul", ["x", "wt"], ["y"])]
        s = rng.standard_normal((1, N)).astype(np.float32)
        m = model(nodes, [helper.make_tensor_value_info("x", F, [2, K])], [helper.make_tensor_value_info("y", F, None)],
                  [init("shape", np.array([K, N], np.int64)), init("s", s)])
        out.append((m, {"x": rng.standard_normal((2, K)).astype(np.float32)}, {"FOLD+EAGER": {"ConstantOfShape": 0, "Mul": 0}},
                    None if K < 4096 else ("EAGER", "FOLD+EAGER", "FOLD+DNNL", "FOLD+BLAS")))  # 256 MiB each: a few
    return out


def case_whole_slice(rng):
    I32, I64 = np.int32, np.int64
    big, i32max, i64max = 1000000000, 2147483647, 9223372036854775807

    def sl(x, y, starts, ends, axes, steps=None, dt=I64):
        names = [f"{y}_s", f"{y}_e", f"{y}_a"] + ([f"{y}_p"] if steps is not None else [])
        vals = [starts, ends, axes] + ([steps] if steps is not None else [])
        return helper.make_node("Slice", [x] + names, [y]), [init(k, np.array(v, dt)) for k, v in zip(names, vals)]

    # x [N, 512, 256, 1] floats: N is at most 2^48 / 2^19 = 2^29 elements (< 1e9) in any address space
    parts = [sl("x", "a", [0, 0, 0, 0], [big] * 4, [0, 2, 1, 3], [1, 1, 1, 1], I32),  # whole
             sl("a", "b", [0, 0, 0, 0], [i32max, i32max, i32max, 1], [0, 1, 2, 3]),  # whole: dim 3 is 1
             sl("b", "c", [-256], [i64max], [2]),  # whole: dim 2 is 256
             sl("x", "k1", [0], [1], [0]),  # kept: N is symbolic
             sl("x", "k2", [0], [3], [2]),  # kept: 3 of 256
             sl("x", "k3", [-1], [-i64max], [1], [-1]),  # kept: reversed
             sl("u", "k4", [0], [i32max], [0])]  # kept: u could hold more than 2^31 bytes
    nodes = [p[0] for p in parts] + [helper.make_node("Relu", ["c"], ["y0"])]
    inits = [t for p in parts for t in p[1]]
    outs = ["y0", "k1", "k2", "k3", "k4"]
    m = model(nodes, [helper.make_tensor_value_info("x", F, ["N", 512, 256, 1]),
                      helper.make_tensor_value_info("u", TensorProto.UINT8, ["M"])],
              [helper.make_tensor_value_info(o, TensorProto.UINT8 if o == "k4" else F, None) for o in outs], inits)
    out = []
    for N in (2, 3):
        feeds = {"x": rng.standard_normal((N, 512, 256, 1)).astype(np.float32), "u": np.arange(7, dtype=np.uint8)}
        out.append((m, feeds, {"FOLD+EAGER": {"Slice": 4}} if N == 2 else None))
    return out


def bench_warnings(alma, path, args, work):
    """alma bench's warnings (every result's) for MODEL with args, and its exit status."""
    js = os.path.join(work, "w.json")
    p = subprocess.run([alma, "bench", path, "-c", "EAGER", "-n", "2", "--min-time", "0", "--no-cache", "--json", js]
                       + args, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        return p.returncode, [p.stderr]
    w = []
    with open(js) as f:
        for r in json.load(f).get("results", []):
            w += r.get("warnings") or []
    return p.returncode, w


def case_data_axes(alma, work):
    """--data on a model whose first axis is named as a sequence (frames): the report says which axis
    it sliced and how to feed the file whole; a symbolic width bound to 1 in random data names the
    dim and the --input to give. A batch-named first axis gets no such warning."""
    bad = 0
    for name, want in (("frames", True), ("batch_size", False)):
        m = model([helper.make_node("MatMul", ["x", "w"], ["y"])], [helper.make_tensor_value_info("x", F, [name, 576])],
                  [helper.make_tensor_value_info("y", F, None)], [init("w", np.ones((576, 4), np.float32))])
        path = os.path.join(work, f"seq_{name}.onnx")
        onnx.save(m, path)
        np.save(os.path.join(work, "frames.npy"), np.ones((50, 576), np.float32))
        rc, w = bench_warnings(alma, path, ["--data", os.path.join(work, "frames.npy")], work)
        hit = [x for x in w if f"names that axis '{name}'" in x and "-b 50" in x]
        ok = rc == 0 and bool(hit) == want
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} data_axes first axis '{name}': exit {rc}, axis warning {'given' if hit else 'not given'}"
              f" (expected {'one' if want else 'none'}){'' if ok else ': ' + repr(w)}")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    m = model(nodes, [helper.make_tensor_value_info("x", F, ["N", 3, 48, "W"])], [helper.make_tensor_value_info("y", F, None)],
              [init("w", np.ones((4, 3, 3, 3), np.float32))])
    path = os.path.join(work, "width.onnx")
    onnx.save(m, path)
    rc, w = bench_warnings(alma, path, [], work)
    hit = [x for x in w if "'W' (axis 3) bound to 1" in x and "--input x:1x3x48xW" in x]
    bad += not hit
    print(f"{'ok  ' if hit else 'FAIL'} data_axes symbolic width: exit {rc}, hint {'given' if hit else 'missing: ' + repr(w)}")
    rc, w = bench_warnings(alma, path, ["--input", "x:1x3x48x64"], work)
    ok = rc == 0 and not [x for x in w if "bound to 1" in x]
    bad += not ok
    print(f"{'ok  ' if ok else 'FAIL'} data_axes symbolic width given by --input: exit {rc}, no hint{'' if ok else ': ' + repr(w)}")
    return bad


def case_info_constants(alma, work):
    """alma info counts weights written as Constant nodes (tf2onnx, paddle2onnx) as parameters."""
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "wv")
    m = model([helper.make_node("Constant", [], ["w"], value=w),
               helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3])],
              [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])], [helper.make_tensor_value_info("y", F, None)],
              [init("unused_scale", np.ones((5,), np.float32))])
    path = os.path.join(work, "constants.onnx")
    onnx.save(m, path)
    p = subprocess.run([alma, "info", path, "--json"], capture_output=True, text=True)
    info = json.loads(p.stdout) if p.returncode == 0 else {}
    got = (info.get("parameters"), info.get("parameter_bytes"), info.get("macs_per_sample"))
    ok = got == (108 + 5, 4 * (108 + 5), 4 * 6 * 6 * 27)
    print(f"{'ok  ' if ok else 'FAIL'} info_constants: parameters, bytes, MACs {got}, expected (113, 452, 3888)")
    return not ok


def case_small_heavy(alma, work):
    """DNNL runs a small transformer's Softmax and LayerNormalization on oneDNN (EAGER's kernels cost
    several ns an element there), while a tiny Add stays on EAGER's kernel (the primitive's overhead
    is more than the work): placement as data from alma bench --json."""
    if not available(alma, "DNNL"):
        print("SKIP small_heavy: DNNL is not available here")
        return False
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("LayerNormalization", ["h", "g", "b"], ["n"], axis=-1, epsilon=1e-5),
             helper.make_node("Add", ["t", "t"], ["u"])]
    m = model(nodes, [helper.make_tensor_value_info("s", F, [1, 6, 47, 47]),
                      helper.make_tensor_value_info("h", F, [1, 47, 192]),
                      helper.make_tensor_value_info("t", F, [2, 16])],
              [helper.make_tensor_value_info(o, F, None) for o in ("p", "n", "u")],
              [init("g", rng.standard_normal(192).astype(np.float32)),
               init("b", rng.standard_normal(192).astype(np.float32))])
    path, js = os.path.join(work, "small_heavy.onnx"), os.path.join(work, "small_heavy.json")
    onnx.save(m, path)
    subprocess.run([alma, "bench", path, "-c", "DNNL", "--threads", "2", "-n", "5", "--min-time", "0", "-q",
                    "--no-cache", "--json", js], capture_output=True, text=True)
    try:
        ops = {o["op_type"]: o for o in json.load(open(js))["results"][0]["placement"]["op_types"]}
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        print(f"FAIL small_heavy: no placement in the JSON ({e})")
        return True
    got = {t: (ops.get(t, {}).get("placements", {}), ops.get(t, {}).get("declined", {}))
           for t in ("Softmax", "LayerNormalization", "Add")}
    ok = (got["Softmax"][0].get("runtime") == 1 and got["LayerNormalization"][0].get("runtime") == 1 and
          got["Add"][0].get("eager") == 1 and got["Add"][1].get("choice") == 1)
    print(f"{'ok  ' if ok else 'FAIL'} small_heavy: {got}")
    return not ok


CHECKS = {"data_axes": case_data_axes, "info_constants": case_info_constants, "small_heavy": case_small_heavy}

CASES = {"empty_type": case_empty_type, "strided_sym": case_strided_sym, "deconv_bias": case_deconv_bias, "padded_eltwise": case_padded_eltwise,
         "nwc_conv": case_nwc_conv,
         "const_weight": case_const_weight, "whole_slice": case_whole_slice}


def available(alma, conv):
    return subprocess.run([alma, "list", conv], capture_output=True).returncode == 0


def check_counts(alma, name, path, expect, work):
    """expect: {conversion: {op: count}} in the graph the conversion runs (--save-converted)."""
    bad = 0
    for conv, counts in expect.items():
        sd = os.path.join(work, name + ".saved")
        p = subprocess.run([alma, "bench", path, "-c", conv, "--build-only", "--no-cache", "--save-converted", sd],
                           capture_output=True, text=True)
        if p.returncode != 0:
            print(f"FAIL {name} {conv}: --save-converted exit {p.returncode}: {p.stderr.strip()[-400:]}")
            bad += 1
            continue
        g = onnx.load(os.path.join(sd, conv + ".onnx"), load_external_data=False).graph
        for op, want in counts.items():
            got = sum(n.op_type == op for n in g.node)
            ok = got == want
            bad += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name} {conv}: {got} {op} node(s) after the passes, expected {want}")
        shutil.rmtree(sd, ignore_errors=True)
    return bad


def check(alma, name, m, feeds, expect=None, only=None, convs=(), work="."):
    if only:
        convs = [c for c in convs if c in only]
    path = os.path.join(work, name + ".onnx")
    onnx.save(m, path)
    bad = check_counts(alma, name, path, expect, work) if expect else 0
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)
    args = []
    for k, v in feeds.items():
        np.save(os.path.join(work, f"{name}.{k}.npy"), v)
        args += ["--input", f"{k}={os.path.join(work, name + '.' + k + '.npy')}"]
    for conv in convs:
        od = os.path.join(work, f"{name}.{conv}")
        p = subprocess.run([alma, "run", path, "-c", conv, "-o", od] + args, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"FAIL {name} {conv}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
            bad += 1
            continue
        for o, r in zip(m.graph.output, ref):
            y = np.load(os.path.join(od, o.name + ".npy"))
            if y.shape != r.shape:
                print(f"FAIL {name} {conv} {o.name}: shape {y.shape}, ONNX Runtime {r.shape}")
                bad += 1
                continue
            err = float(np.max(np.abs(y.astype(np.float64) - r))) if r.size else 0.0
            tol = max(1e-5, 1e-4 * float(np.max(np.abs(r))) if r.size else 0.0)
            ok = err <= tol
            bad += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name} {conv} {o.name}: shape {list(y.shape)} max diff {err:.3g} (tol {tol:.3g})")
    return bad


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--list":
        print("\n".join(list(CASES) + list(CHECKS)))
        return 0
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    alma, names = sys.argv[1], sys.argv[2:] or list(CASES) + list(CHECKS)
    convs = [c for c in CONVERSIONS if available(alma, c)]
    bad = 0
    with tempfile.TemporaryDirectory() as work:
        for name in names:
            if name in CHECKS:
                bad += CHECKS[name](alma, work)
                continue
            rng = np.random.default_rng(sum(map(ord, name)))
            for i, c in enumerate(CASES[name](rng)):
                bad += check(alma, f"{name}_{i}", *c, convs=convs, work=work)
    print(f"{bad} failure(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
