"""RMSNormalization, RotaryEmbedding, Swish and SwiGLU through `alma run`, checked against ONNX Runtime.

usage: check_ort.py ALMA WORKDIR       (python with onnx >= 1.23, onnxruntime, numpy)

Random models written with onnx.helper cover what ONNX's node tests miss: RMSNormalization with
negative and zero axes, scale broadcast shapes (including a scale spanning non-normalized dims),
float16 / bfloat16 / float64 with stash_type, large magnitudes; RotaryEmbedding 3-D and 4-D, with
and without position_ids, interleaved, partial rotary_embedding_dim, float16; Swish alpha; SwiGLU.
Each runs under alma's EAGER and one runtime that falls back to EAGER for these ops (XNNPACK, DNNL
or BLAS, when built), and under ONNX Runtime; where ONNX Runtime cannot run a case (an op, dtype or
opset it lacks), onnx.reference.ReferenceEvaluator is the reference and the case says so.
Errors are relative to the reference's largest magnitude: 1e-5 for float32 and float64 (float64
with the default stash_type computes in float32, as the spec says), 2e-3 for float16 and 8e-3 for
bfloat16 (about an ulp at the largest magnitude: ONNX Runtime computes float16 RMSNormalization and
RotaryEmbedding in float32 and rounds once; ReferenceEvaluator's RMSNormalization computes bfloat16
in bfloat16 while the spec stashes in float32; alma rounds every step of the spec's function body).
Inputs of the bfloat16 cases are bfloat16-exact, so the Casts around the op never round.
Then models with bad attributes or shapes must fail at load with a message naming the problem.
Exit 0 when every case passes, 1 otherwise, 77 (skip) without onnx/onnxruntime."""
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto as TP
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from alma_cli import alma_run  # noqa: E402

F32, F16, F64, BF16 = TP.FLOAT, TP.FLOAT16, TP.DOUBLE, TP.BFLOAT16
NP = {F32: np.float32, F16: np.float16, F64: np.float64}
TOL = {F32: 1e-5, F64: 1e-5, F16: 2e-3, BF16: 8e-3}


def model(nodes, inputs, outputs, inits, opset):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def bf16_exact(a):
    """a with its float32 values cut to bfloat16 precision, so that every Cast to bfloat16 is exact
    whichever rounding it uses (alma's Cast truncates like ONNX's older test data, ONNX Runtime and
    onnx>=1.23's reference round to nearest even)."""
    a = np.ascontiguousarray(a, np.float32)
    return (a.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)


def wrap_bf16(node, x_names, out_name, shapes, inits, opset, extra_inputs=()):
    """bfloat16 has no .npy dtype: the model takes float32, casts to bfloat16 around node."""
    nodes, inputs = [], []
    for nm, shp in zip(x_names, shapes):
        inputs.append(vi(nm + "_f", F32, shp))
        nodes.append(helper.make_node("Cast", [nm + "_f"], [nm], to=BF16))
    nodes.append(node)
    nodes.append(helper.make_node("Cast", [out_name], [out_name + "_f"], to=F32))
    return model(nodes, inputs + list(extra_inputs), [vi(out_name + "_f", F32, None)], inits, opset)


def conversions(alma):
    out = subprocess.run([alma, "list"], capture_output=True, text=True).stdout
    for rt in ("XNNPACK", "DNNL", "BLAS"):
        if any(line.split()[1:2] == [rt] and "unavailable" not in line for line in out.splitlines()):
            return ["EAGER", rt]
    return ["EAGER"]


def reference(path, feeds, out_name):
    """ONNX Runtime's output, or ReferenceEvaluator's when ONNX Runtime cannot run the model."""
    try:
        s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        return s.run([out_name], feeds)[0], "onnxruntime"
    except Exception as e:  # noqa: BLE001 - any ORT refusal falls back
        why = str(e).splitlines()[0][:110]
        ref = ReferenceEvaluator(onnx.load(path))
        return ref.run([out_name], feeds)[0], f"ReferenceEvaluator (ORT: {why})"


# ---- cases ---------------------------------------------------------------------------------------

def rms_case(rng, xshape, sshape, axis, t=F32, stash=None, eps=None, mag=1.0):
    attrs = {"axis": axis}
    if stash is not None:
        attrs["stash_type"] = stash
    if eps is not None:
        attrs["epsilon"] = eps
    x = (rng.standard_normal(xshape) * mag).astype(np.float32)
    sc = rng.standard_normal(sshape).astype(np.float32)
    node = helper.make_node("RMSNormalization", ["X", "scale"], ["Y"], **attrs)
    if t == BF16:
        x, sc = bf16_exact(x), bf16_exact(sc)
        inits = [numpy_helper.from_array(sc, "scale_f")]
        m = wrap_bf16(node, ["X"], "Y", [list(xshape)], inits, 23)
        m.graph.node.insert(0, helper.make_node("Cast", ["scale_f"], ["scale"], to=BF16))
        return m, {"X_f": x}, "Y_f", t
    inits = [numpy_helper.from_array(sc.astype(NP[t]), "scale")]
    m = model([node], [vi("X", t, list(xshape))], [vi("Y", t, None)], inits, 23)
    return m, {"X": x.astype(NP[t])}, "Y", t


def rope_caches(rng, rows, half):
    ang = rng.uniform(0, 6.3, size=(*rows, half))
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def rope_case(rng, xshape, num_heads=0, rot=0, interleaved=0, pos=True, max_pos=16, t=F32, caches_as_inputs=False):
    four = len(xshape) == 4
    B = xshape[0]
    S = xshape[2] if four else xshape[1]
    D = xshape[3] if four else xshape[2] // num_heads
    half = (rot or D) // 2
    attrs = {"interleaved": interleaved}
    if num_heads:
        attrs["num_heads"] = num_heads
    if rot:
        attrs["rotary_embedding_dim"] = rot
    x = rng.standard_normal(xshape).astype(np.float32)
    cos, sin = rope_caches(rng, (max_pos,) if pos else (B, S), half)
    ins = ["X", "cos", "sin"] + (["pos"] if pos else [])
    node = helper.make_node("RotaryEmbedding", ins, ["Y"], **attrs)
    feeds = {"X": x.astype(NP.get(t, np.float32))}
    inputs = [vi("X", t, list(xshape))]
    inits = []
    if caches_as_inputs:
        feeds["cos"], feeds["sin"] = cos.astype(NP[t]), sin.astype(NP[t])
        inputs += [vi("cos", t, list(cos.shape)), vi("sin", t, list(sin.shape))]
    if pos:
        feeds["pos"] = rng.integers(0, max_pos, size=(B, S)).astype(np.int64)
        inputs.append(vi("pos", TP.INT64, [B, S]))
    if t == BF16:
        cos, sin = bf16_exact(cos), bf16_exact(sin)
        inits = [numpy_helper.from_array(cos, "cos_f"), numpy_helper.from_array(sin, "sin_f")]
        extra = [i for i in inputs if i.name == "pos"]
        m = wrap_bf16(node, ["X"], "Y", [list(xshape)], inits, 23, extra)
        m.graph.node.insert(0, helper.make_node("Cast", ["cos_f"], ["cos"], to=BF16))
        m.graph.node.insert(0, helper.make_node("Cast", ["sin_f"], ["sin"], to=BF16))
        feeds["X_f"] = bf16_exact(feeds.pop("X"))
        return m, feeds, "Y_f", t
    if not caches_as_inputs:
        inits = [numpy_helper.from_array(cos.astype(NP[t]), "cos"), numpy_helper.from_array(sin.astype(NP[t]), "sin")]
    return model([node], inputs, [vi("Y", t, None)], inits, 23), feeds, "Y", t


def swish_case(rng, shape, alpha=None, t=F32, glu=False, mag=3.0):
    attrs = {} if alpha is None else {"alpha": alpha}
    op, opset = ("SwiGLU", 28) if glu else ("Swish", 24)
    names = ["A", "B"] if glu else ["X"]
    node = helper.make_node(op, names, ["Y"], **attrs)
    feeds = {nm: (rng.standard_normal(shape) * mag).astype(np.float32) for nm in names}
    if t == BF16:
        return wrap_bf16(node, names, "Y", [list(shape)] * len(names), [], opset), \
            {k + "_f": bf16_exact(v) for k, v in feeds.items()}, "Y_f", t
    m = model([node], [vi(nm, t, list(shape)) for nm in names], [vi("Y", t, None)], [], opset)
    return m, {k: v.astype(NP[t]) for k, v in feeds.items()}, "Y", t


def cases(rng):
    c = []
    # RMSNormalization
    c.append(("rms f32 axis -1 scale [8]", rms_case(rng, (2, 3, 8), (8,), -1)))
    c.append(("rms f32 axis -2 scale [4,5]", rms_case(rng, (2, 3, 4, 5), (4, 5), -2)))
    c.append(("rms f32 axis 0 scale [3,4]", rms_case(rng, (3, 4), (3, 4), 0)))
    c.append(("rms f32 axis 1 scale [1,5] broadcast", rms_case(rng, (2, 3, 4, 5), (1, 5), 2)))
    c.append(("rms f32 axis -2 scale [4,1] broadcast", rms_case(rng, (2, 3, 4, 5), (4, 1), -2)))
    c.append(("rms f32 axis -1 scale [3,4] spans a kept dim", rms_case(rng, (2, 3, 4), (3, 4), -1)))
    c.append(("rms f32 axis 1 scale [1] epsilon 0.1", rms_case(rng, (4, 6), (1,), 1, eps=0.1)))
    c.append(("rms f32 large values 1e15", rms_case(rng, (3, 64), (64,), -1, mag=1e15)))
    c.append(("rms f32 tiny values 1e-4 (epsilon dominates)", rms_case(rng, (3, 16), (16,), -1, mag=1e-4)))
    c.append(("rms f32 long rows 4096", rms_case(rng, (2, 4096), (4096,), -1)))
    c.append(("rms f16 stash float", rms_case(rng, (2, 5, 32), (32,), -1, t=F16)))
    c.append(("rms f16 stash float, values 300 (squares overflow float16)",
              rms_case(rng, (2, 32), (32,), -1, t=F16, mag=300.0)))
    c.append(("rms f16 stash float16", rms_case(rng, (3, 24), (24,), -1, t=F16, stash=10)))
    c.append(("rms f64 stash double", rms_case(rng, (2, 3, 16), (16,), -1, t=F64, stash=11)))
    c.append(("rms f64 default stash (float)", rms_case(rng, (2, 3, 16), (3, 16), 1, t=F64)))
    c.append(("rms bf16 stash float", rms_case(rng, (2, 3, 16), (16,), -1, t=BF16)))
    # RotaryEmbedding
    c.append(("rope 4-D pos_ids", rope_case(rng, (2, 3, 5, 8))))
    c.append(("rope 4-D no pos_ids", rope_case(rng, (2, 3, 5, 8), pos=False)))
    c.append(("rope 4-D interleaved", rope_case(rng, (2, 3, 5, 8), interleaved=1)))
    c.append(("rope 4-D partial rot 4", rope_case(rng, (2, 3, 5, 8), rot=4)))
    c.append(("rope 4-D interleaved partial rot 6 no pos_ids",
              rope_case(rng, (1, 2, 4, 10), rot=6, interleaved=1, pos=False)))
    c.append(("rope 3-D num_heads 3 pos_ids", rope_case(rng, (2, 5, 24), num_heads=3)))
    c.append(("rope 3-D num_heads 2 no pos_ids interleaved",
              rope_case(rng, (2, 4, 16), num_heads=2, interleaved=1, pos=False)))
    c.append(("rope 3-D partial rot 2 caches as inputs",
              rope_case(rng, (1, 3, 12), num_heads=2, rot=2, caches_as_inputs=True)))
    c.append(("rope 4-D num_heads given", rope_case(rng, (1, 2, 3, 4), num_heads=2)))
    c.append(("rope f16 4-D", rope_case(rng, (2, 2, 4, 8), t=F16)))
    c.append(("rope f16 3-D interleaved partial", rope_case(rng, (2, 3, 16), num_heads=2, rot=4, interleaved=1, t=F16)))
    c.append(("rope bf16 4-D", rope_case(rng, (1, 2, 3, 8), t=BF16)))
    # Swish, SwiGLU
    c.append(("swish default alpha", swish_case(rng, (3, 7))))
    c.append(("swish alpha 0.5", swish_case(rng, (2, 3, 5), alpha=0.5)))
    c.append(("swish alpha -1.7 large inputs", swish_case(rng, (64,), alpha=-1.7, mag=60.0)))
    c.append(("swish f64 alpha 1.702", swish_case(rng, (4, 4), alpha=1.702, t=F64)))
    c.append(("swish f16 alpha 1.25", swish_case(rng, (4, 9), alpha=1.25, t=F16)))
    c.append(("swish bf16", swish_case(rng, (4, 9), t=BF16)))
    c.append(("swiglu default alpha", swish_case(rng, (2, 8), glu=True)))
    c.append(("swiglu alpha 1.702", swish_case(rng, (3, 4, 5), alpha=1.702, glu=True)))
    c.append(("swiglu f16", swish_case(rng, (3, 6), t=F16, glu=True)))
    c.append(("swiglu f64", swish_case(rng, (3, 6), alpha=0.8, t=F64, glu=True)))
    return c


# ---- bad inputs: each must fail at load with a message naming the problem ------------------------

def bad_cases():
    def rms(xs, ss, st=F32, **a):
        n = helper.make_node("RMSNormalization", ["X", "scale"], ["Y"], **a)
        sc = numpy_helper.from_array(np.ones(ss, NP[st]), "scale")
        return model([n], [vi("X", F32, xs)], [vi("Y", F32, None)], [sc], 23)

    def rope(xs, cs, pos=None, xt=F32, **a):
        ins = ["X", "cos", "sin"] + (["pos"] if pos else [])
        n = helper.make_node("RotaryEmbedding", ins, ["Y"], **a)
        inits = [numpy_helper.from_array(np.ones(cs, np.float32), nm) for nm in ("cos", "sin")]
        inputs = [vi("X", xt, xs)] + ([vi("pos", TP.INT64, pos)] if pos else [])
        return model([n], inputs, [vi("Y", xt, None)], inits, 23)

    glu = model([helper.make_node("SwiGLU", ["A", "B"], ["Y"])], [vi("A", F32, [2, 4]), vi("B", F32, [2, 1])],
                [vi("Y", F32, None)], [], 28)
    swish_int = model([helper.make_node("Swish", ["X"], ["Y"])], [vi("X", TP.INT32, [3])], [vi("Y", TP.INT32, None)],
                      [], 24)
    return [
        ("rms axis out of range", rms([2, 3, 4], [4], axis=3), "axis 3 is out of range"),
        ("rms axis below -rank", rms([2, 3, 4], [4], axis=-4), "axis -4 is out of range"),
        ("rms scale not broadcastable", rms([2, 3, 4], [5], axis=-1), "does not broadcast"),
        ("rms scale longer than X", rms([3, 4], [2, 3, 4], axis=-1), "does not broadcast"),
        ("rms bad stash_type", rms([2, 4], [4], stash_type=7), "stash_type 7"),
        ("rms mixed X/scale types", rms([2, 4], [4], st=F16), "differs from X dtype"),
        ("rope 3-D without num_heads", rope([1, 2, 8], [4, 4], pos=[1, 2]), "num_heads is required"),
        ("rope hidden not divisible", rope([1, 2, 10], [4, 2], pos=[1, 2], num_heads=3), "not divisible by num_heads"),
        ("rope odd rotary dim", rope([1, 2, 2, 8], [4, 2], pos=[1, 2], rotary_embedding_dim=5), "is odd"),
        ("rope rotary dim > head", rope([1, 2, 2, 8], [4, 8], pos=[1, 2], rotary_embedding_dim=16),
         "exceeds the head size"),
        ("rope odd head size", rope([1, 2, 2, 7], [4, 3], pos=[1, 2]), "is odd"),
        ("rope 3-D caches with position_ids", rope([1, 2, 2, 8], [1, 2, 4], pos=[1, 2]), "with position_ids it must be"),
        ("rope 2-D caches without position_ids", rope([1, 2, 2, 8], [16, 4]), "without position_ids it must be"),
        ("rope caches batch mismatch", rope([2, 2, 3, 8], [1, 3, 4]), "without position_ids it must be"),
        ("rope cache width", rope([1, 2, 2, 8], [16, 3], pos=[1, 2]), "with position_ids it must be"),
        ("rope position_ids shape", rope([1, 2, 3, 8], [16, 4], pos=[1, 2]), "position_ids has shape"),
        ("rope X rank 2", rope([2, 8], [16, 4], pos=[2, 1]), "must be 3-D"),
        ("rope num_heads vs 4-D X", rope([1, 2, 2, 8], [4, 4], pos=[1, 2], num_heads=4), "does not match"),
        ("rope float64 X", rope([1, 2, 2, 8], [4, 4], pos=[1, 2], xt=F64), "X dtype float64"),
        ("swiglu shape mismatch", glu, "same shape"),
        ("swish int32", swish_int, "dtype int32"),
    ]


def main():
    alma, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(2025)
    convs = conversions(alma)
    fails = 0
    worst = {}
    for i, (name, (m, feeds, out_name, t)) in enumerate(cases(rng)):
        path = os.path.join(work, f"case{i}.onnx")
        onnx.save(m, path)
        try:
            ref, who = reference(path, feeds, out_name)
        except Exception as e:  # noqa: BLE001
            print(f"FAIL {name}: no reference ran: {e}")
            fails += 1
            continue
        ref = np.asarray(ref, np.float64)
        scale = max(float(np.max(np.abs(ref))) if ref.size else 0.0, 1e-30)
        for conv in convs:
            cw = os.path.join(work, f"case{i}_{conv}")
            os.makedirs(cw, exist_ok=True)
            try:
                alma_run(alma, path, conv, feeds, cw)
                got = np.load(os.path.join(cw, out_name + ".npy")).astype(np.float64)
            except Exception as e:  # noqa: BLE001
                print(f"FAIL {name} [{conv}]: {e}")
                fails += 1
                continue
            if got.shape != ref.shape:
                print(f"FAIL {name} [{conv}]: shape {got.shape}, reference {ref.shape}")
                fails += 1
                continue
            err = float(np.max(np.abs(got - ref))) / scale if ref.size else 0.0
            ok = err <= TOL[t] and np.array_equal(np.isnan(got), np.isnan(ref))
            key = (TP.DataType.Name(t).lower(), "onnxruntime" if who == "onnxruntime" else "ReferenceEvaluator")
            worst[key] = max(worst.get(key, 0.0), err)
            print(f"{'ok  ' if ok else 'FAIL'} {name} [{conv}] vs {who}: max rel err {err:.2e} (tol {TOL[t]:.0e})")
            fails += not ok
    for (dt, who), e in sorted(worst.items()):
        print(f"worst {dt} vs {who}: {e:.2e}")

    for i, (name, m, want) in enumerate(bad_cases()):
        path = os.path.join(work, f"bad{i}.onnx")
        onnx.save(m, path)
        r = subprocess.run([alma, "run", path, "--output-dir", os.path.join(work, f"bad{i}")], capture_output=True,
                           text=True)
        msg = (r.stderr + r.stdout).strip().replace("\n", " | ")
        # exit 3: the model was refused at load (a crash shows as a signal or a sanitizer's code)
        ok = r.returncode == 3 and "loading" in msg and want in msg
        print(f"{'ok  ' if ok else 'FAIL'} bad input: {name}: rc {r.returncode}: {msg[:240]}")
        fails += not ok

    # a position id outside the caches is data, not a model error: it fails at run time
    m, feeds, out_name, _ = rope_case(rng, (1, 2, 3, 8), max_pos=4)
    feeds["pos"][0, 1] = 4
    path = os.path.join(work, "bad_pos.onnx")
    onnx.save(m, path)
    os.makedirs(os.path.join(work, "bad_pos"), exist_ok=True)
    try:
        alma_run(alma, path, "EAGER", feeds, os.path.join(work, "bad_pos"))
        print("FAIL position_ids out of range ran")
        fails += 1
    except RuntimeError as e:
        ok = "out of range [0, 4)" in str(e)
        print(f"{'ok  ' if ok else 'FAIL'} bad input: position id 4 of 4: {str(e)[:200]}")
        fails += not ok

    print(f"{'PASS' if not fails else 'FAIL'}: {fails} failure(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
