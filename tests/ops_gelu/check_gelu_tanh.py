"""FUSE's tanh-GELU rule (src/passes/fuse_gelu.c) and the vectorised Tanh/Pow kernels.

usage: check_gelu_tanh.py ALMA MODELS_DIR WORK_DIR

1. Graphs built here with onnx.helper in the forms exporters write 0.5 x (1 + tanh(sqrt(2/pi) (x +
   0.044715 x^3))) (transformers' NewGELU with Pow or products, constants as Constant nodes or
   initializers, 0-d or 1-element, float32/float16/double; torch F.gelu(approximate='tanh') before
   opset 20; FastGELU; BLOOM; Keras/jax with the 0.5 on the sum; every Mul/Add operand order), and
   PyTorch 1.13's own exports (MODELS_DIR, export_torch_gelu.py) with PyTorch's outputs: each must
   become one Gelu node (or a MatMul/Gemm with a Gelu(tanh) activation) on FOLD+FUSE, and its outputs
   must match ONNX Runtime's on the original graph (and PyTorch's) under EAGER and FOLD+FUSE+ each
   runtime. Near misses (another constant, an intermediate read twice or a graph output, another
   power, two different x) must keep their Tanh.
2. Tanh and Pow with a scalar exponent (the kernels that skip libm's tanhf/powf) on edge values
   against ONNX Runtime and numpy.
"""
import math
import os
import re
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from alma_cli import alma_run, available  # noqa: E402

ALMA, MODELS, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(WORK, exist_ok=True)
CONVS = ["EAGER"] + available(ALMA, ["FOLD+FUSE+EAGER", "FOLD+FUSE+DNNL", "FOLD+FUSE+BLAS", "FOLD+FUSE+XNNPACK"])
K = math.sqrt(2 / math.pi)
NP = {TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16, TensorProto.DOUBLE: np.float64}
rng = np.random.default_rng(0)
failures = []


class G:
    """A graph under construction: x is the input, ops append nodes, constants are Constant nodes
    (const="node") or initializers, 0-d (shape=()) or of one element (shape=(1,))."""

    def __init__(self, dt=TensorProto.FLOAT, const="node", shape=()):
        self.dt, self.const, self.shape, self.nodes, self.inits, self.n = dt, const, shape, [], [], 0
        self.extra_outputs = []

    def c(self, v, dt=None):
        dt = dt or self.dt
        arr = np.full(self.shape, v, dtype=NP.get(dt, np.int64) if dt != TensorProto.INT64 else np.int64)
        name = f"c{self.n}"
        self.n += 1
        t = numpy_helper.from_array(arr, name)
        if self.const == "node":
            self.nodes.append(helper.make_node("Constant", [], [name], value=t))
        else:
            self.inits.append(t)
        return name

    def op(self, op, *ins):
        name = f"{op.lower()}{self.n}"
        self.n += 1
        self.nodes.append(helper.make_node(op, list(ins), [name], name=name))
        return name

    def model(self, y, opset=17, xshape=("batch", 40)):
        g = helper.make_graph(self.nodes, "g", [helper.make_tensor_value_info("x", self.dt, list(xshape))],
                              [helper.make_tensor_value_info(y, self.dt, None)] +
                              [helper.make_tensor_value_info(o, self.dt, None) for o in self.extra_outputs],
                              self.inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def newgelu(g, x="x", cube="pow", k=K, kappa=0.044715, half="x", swap=False, power=3.0, pow_dt=None):
    """0.5 * x * (1 + tanh(k * (x + kappa * x^3))): cube "pow" (Pow by power), "xxx" ((x*x)*x) or "x(xx)";
    half on "x", "sum" or "prod"; swap reverses every commutative operand pair."""
    s = (lambda a, b: (b, a)) if swap else (lambda a, b: (a, b))
    if cube == "pow":
        c3 = g.op("Pow", x, g.c(power, pow_dt))
    elif cube == "xxx":
        c3 = g.op("Mul", *s(g.op("Mul", x, x), x))
    else:
        c3 = g.op("Mul", *s(x, g.op("Mul", x, x)))
    inner = g.op("Mul", *s(g.op("Add", *s(x, g.op("Mul", *s(c3, g.c(kappa))))), g.c(k)))
    t1 = g.op("Add", *s(g.op("Tanh", inner), g.c(1.0)))
    if half == "x":
        return g.op("Mul", *s(g.op("Mul", *s(x, g.c(0.5))), t1))
    if half == "sum":
        return g.op("Mul", *s(x, g.op("Mul", *s(g.c(0.5), t1))))
    return g.op("Mul", *s(g.c(0.5), g.op("Mul", *s(x, t1))))


def bloom(g, x="x", k=0.79788456):
    """x * 0.5 * (1.0 + tanh(k * x * (1 + 0.044715 * x * x)))"""
    u = g.op("Mul", g.op("Mul", g.c(k), x), g.op("Add", g.c(1.0), g.op("Mul", g.op("Mul", g.c(0.044715), x), x)))
    return g.op("Mul", g.op("Mul", x, g.c(0.5)), g.op("Add", g.c(1.0), g.op("Tanh", u)))


def case(name, build, fused, dt=TensorProto.FLOAT, const="node", shape=(), **kw):
    g = G(dt, const, shape)
    y = build(g, **kw)
    return name, g.model(y), fused


def extra_consumer(g):
    """NewGELU whose x^3 is also read by a second output"""
    y = newgelu(g)
    pw = next(n for n in g.nodes if n.op_type == "Pow").output[0]
    g.extra_outputs.append(g.op("Neg", pw))
    return y


def tanh_is_output(g):
    y = newgelu(g)
    g.extra_outputs.append(next(n for n in g.nodes if n.op_type == "Tanh").output[0])
    return y


def two_xs(g):
    """the cube of another value: 0.5 x (1 + tanh(k (x + c relu(x)^3)))"""
    x2 = g.op("Relu", "x")
    s = g.op("Add", "x", g.op("Mul", g.op("Pow", x2, g.c(3.0)), g.c(0.044715)))
    t1 = g.op("Add", g.op("Tanh", g.op("Mul", s, g.c(K))), g.c(1.0))
    return g.op("Mul", g.op("Mul", "x", g.c(0.5)), t1)


def one_minus(g):
    """0.5 x (1 - tanh(...)): not GELU"""
    s = g.op("Add", "x", g.op("Mul", g.op("Pow", "x", g.c(3.0)), g.c(0.044715)))
    t1 = g.op("Sub", g.c(1.0), g.op("Tanh", g.op("Mul", s, g.c(K))))
    return g.op("Mul", g.op("Mul", "x", g.c(0.5)), t1)


CASES = [
    case("newgelu_pow_constants", newgelu, 1),
    case("newgelu_pow_initializers", newgelu, 1, const="init"),
    case("newgelu_one_element", newgelu, 1, const="init", shape=(1,)),
    case("newgelu_int_exponent", newgelu, 1, pow_dt=TensorProto.INT64),
    case("newgelu_xxx_half_on_sum", newgelu, 1, cube="xxx", half="sum"),
    case("newgelu_x_xx_half_on_product_swapped", newgelu, 1, cube="x(xx)", half="prod", swap=True),
    case("newgelu_swapped_half_on_x", newgelu, 1, swap=True),
    case("torch_form", newgelu, 1, cube="x(xx)", half="prod", swap=True, const="init"),
    case("keras_jax_form", newgelu, 1, cube="xxx", half="sum", swap=True),
    case("gpt2_rounded_k", newgelu, 1, k=0.7978846),
    case("bloom", bloom, 1),
    case("newgelu_float16", newgelu, 1, dt=TensorProto.FLOAT16),
    case("newgelu_double", newgelu, 1, dt=TensorProto.DOUBLE, const="init"),
    case("bloom_double", bloom, 1, dt=TensorProto.DOUBLE),
    # near misses
    case("kappa_0.044", newgelu, 0, kappa=0.044),
    case("k_0.8", newgelu, 0, k=0.8),
    case("pow_2", newgelu, 0, power=2.0),
    case("pow_read_twice", extra_consumer, 0),
    case("tanh_is_an_output", tanh_is_output, 0),
    case("cube_of_another_value", two_xs, 0),
    case("one_minus_tanh", one_minus, 0),
]


def plan_ops(text):
    """op types of the nodes in an `alma run -v` plan"""
    m = re.search(r"plan for [^\n]*\n(.*?)(?:\ninput |\Z)", text, re.S)
    return re.findall(r"^  \S+\s+(\S+)\s+(?:EAGER|DNNL|BLAS|XNNPACK)", m.group(1), re.M) if m else []


def compare(name, conv, got, want, dt, what):
    tol = {np.float16: 4e-3, np.float32: 2e-6, np.float64: 1e-7}[dt]
    w = want.astype(np.float64)
    err = float(np.abs(got.astype(np.float64) - w).max(initial=0)) / max(float(np.abs(w).max(initial=0)), 1)
    if got.shape != want.shape or got.dtype != want.dtype or not err <= tol:
        failures.append(f"{name} {conv}: max error {err:.3g} vs {what} (shape {got.shape} {got.dtype} vs "
                        f"{want.shape} {want.dtype})")


def run_case(name, path, fused, x, extra_refs=(), expect_fused_op="Gelu"):
    m = onnx.load(path)
    outs = [o.name for o in m.graph.output]
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for conv in CONVS:
        d = os.path.join(WORK, name, conv.replace("+", "_"))
        r = alma_run(ALMA, path, conv, {"x": x}, d, "-v", "--threads", "1", check=False, timeout=120)
        if r.returncode != 0:
            failures.append(f"{name} {conv}: alma failed: {r.stderr.strip()[-300:]}")
            continue
        log = r.stdout + r.stderr
        if "FUSE" in conv:
            mt = re.search(r"FUSE: .*gelu_tanh (\d+)", log)
            ops = plan_ops(log)
            n = int(mt.group(1)) if mt else -1
            if fused and (n != 1 or "Tanh" in ops or "Pow" in ops or expect_fused_op not in ops):
                failures.append(f"{name} {conv}: expected one fused GELU, FUSE said {mt and mt.group(0)}, plan {ops}")
            if not fused and (n != 0 or "Tanh" not in ops):
                failures.append(f"{name} {conv}: expected no fusion, FUSE said {mt and mt.group(0)}, plan {ops}")
        for i, o in enumerate(outs):
            got = np.load(os.path.join(d, "".join(c if c.isalnum() or c in "._-" else "_" for c in o) + ".npy"))
            compare(name, conv, got, want[i], x.dtype.type, "ONNX Runtime")
            if i == 0:
                for ref, what in extra_refs:
                    compare(name, conv, got, ref, x.dtype.type, what)


def gelu_tanh_exact(x):
    v = x.astype(np.float64)
    return (0.5 * v * (1 + np.tanh(K * (v + 0.044715 * v ** 3)))).astype(x.dtype)


# ---- 1. hand-built forms -------------------------------------------------------------------------------------------
base = np.concatenate([np.linspace(-12, 12, 160), 3 * rng.standard_normal(120), [0.0, -0.0, 1e-30, -1e-30, 40, -40]])
for name, m, fused in CASES:
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(m, path)
    dt = NP[m.graph.input[0].type.tensor_type.elem_type]
    x = base.astype(dt).reshape(-1, 40) if base.size % 40 == 0 else np.resize(base, (8, 40)).astype(dt)
    run_case(name, path, fused, x, [(gelu_tanh_exact(x), "the exact formula")] if fused else [])
    print(f"ok {name}", flush=True)

# ---- PyTorch 1.13's exports (export_torch_gelu.py), against PyTorch's outputs too ----------------------------------
for f in sorted(os.listdir(MODELS)):
    if not f.endswith(".onnx"):
        continue
    name = f[:-5]
    x = np.load(os.path.join(MODELS, name + ".x.npy"))
    yt = np.load(os.path.join(MODELS, name + ".torch.npy"))
    lin = name.startswith("linear")
    run_case(name, os.path.join(MODELS, f), 1, x, [(yt, "PyTorch")], "FusedGemm" if lin else "Gelu")
    if lin:  # the GELU is the Linear's activation: Gelu with activation_params [1] (tanh)
        d = os.path.join(WORK, name, "saved")
        import subprocess
        subprocess.run([ALMA, "bench", os.path.join(MODELS, f), "-c", "FOLD+FUSE+EAGER", "--save-converted", d,
                        "--input", "x:4x16", "-n", "1", "--min-time", "0"], capture_output=True, check=True)
        g = onnx.load(os.path.join(d, "FOLD+FUSE+EAGER.onnx")).graph
        acts = [(n.op_type, {a.name: helper.get_attribute_value(a) for a in n.attribute}) for n in g.node]
        if len(acts) != 1 or acts[0][1].get("activation") != b"Gelu" or list(acts[0][1].get("activation_params", [])) != [1.0]:
            failures.append(f"{name}: expected one fused Linear with the tanh Gelu activation, saved graph has {acts}")
    print(f"ok {name}", flush=True)

# ---- 2. Tanh and Pow kernels on edge values --------------------------------------------------------------------------
f32 = np.float32
tiny = np.finfo(f32).tiny
edge = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, tiny / 3, -tiny / 3, tiny, 1e-20, -1e-20,
                 0.624, 0.625, 0.626, -0.625, 1, -1, 9, 9.02, -9.02, 9.5, 20, -20, 88, 1e20, -1e20,
                 np.finfo(f32).max, -np.finfo(f32).max], f32)
# every 65537th float32 bit pattern (65536 values across the whole range, both signs), then the edges
sweep = np.concatenate([np.arange(0, 2 ** 32, 65537, dtype=np.uint64).astype(np.uint32).view(f32), edge])


def ulps(a, b):
    """distance in float32 steps between a and b (0 where both are NaN, huge where only one is)"""
    ia = a.view(np.int32).astype(np.int64)
    ib = b.view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(2 ** 31) - ia, ia)
    ib = np.where(ib < 0, -(2 ** 31) - ib, ib)
    d = np.abs(ia - ib)
    return np.where(np.isnan(a) & np.isnan(b), 0, np.where(np.isnan(a) | np.isnan(b), 2 ** 40, d))


def unary_model(op, x_len, exponent=None, exp_dt=TensorProto.FLOAT, exp_input=False):
    g = G(const="init")
    ins = ["x"]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [x_len])]
    if exponent is not None:
        if exp_input:
            inputs.append(helper.make_tensor_value_info("e", exp_dt, []))
            ins.append("e")
        else:
            ins.append(g.c(exponent, exp_dt))
    node = helper.make_node(op, ins, ["y"])
    gr = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], g.inits)
    return helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17)])


def run_unary(name, m, feeds):
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(m, path)
    r = alma_run(ALMA, path, "EAGER", feeds, os.path.join(WORK, name), check=False)
    if r.returncode:
        failures.append(f"{name}: alma failed: {r.stderr.strip()[-300:]}")
        return None
    return np.load(os.path.join(WORK, name, "y.npy"))


def same_sign_zero(got, want):
    z = want == 0
    return bool(np.all(np.signbit(got[z]) == np.signbit(want[z])))


# Tanh: within 2 ulps of libm's tanhf (numpy's float32 tanh), exact on denormals, odd at 0, NaN -> NaN
got = run_unary("tanh_edges", unary_model("Tanh", sweep.size), {"x": sweep})
if got is not None:
    want = np.tanh(sweep)
    u = ulps(got, want)
    if u.max() > 2 or not same_sign_zero(got, want):
        i = int(u.argmax())
        failures.append(f"Tanh: {int(u.max())} ulps from numpy at x = {sweep[i]!r} ({got[i]!r} vs {want[i]!r})")
    sub = (np.abs(sweep) < tiny) & (sweep != 0)
    if not np.array_equal(got[sub], sweep[sub]):
        failures.append("Tanh: a denormal x does not give x")
    ref = ort.InferenceSession(os.path.join(WORK, "tanh_edges.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": sweep})[0]
    d = np.abs(got.astype(np.float64) - ref)
    if not np.nanmax(d) <= 1e-6 or not np.array_equal(np.isnan(got), np.isnan(ref)):
        failures.append(f"Tanh: differs from ONNX Runtime by {np.nanmax(d):.3g}")
    print(f"ok Tanh: max {int(u.max())} ulps from numpy's tanhf over {sweep.size} values", flush=True)

# Pow with one exponent (constant, or a run-time scalar) against x^e in double rounded to float32: x^1
# exact, x*x, 1/x and sqrt (with powf's -0 -> +0 and -inf -> +inf) correctly rounded, x*x*x (two
# roundings, as ONNX Runtime) within 2 ulps, another exponent (powf) within 1
pw = sweep[np.abs(sweep) < 1e13]  # keep x^3 finite for most values; overflow is checked below
pw = np.concatenate([pw, [3e13, -3e13, 1e20, np.inf, -np.inf]]).astype(f32)
with np.errstate(all="ignore"):
    for e, bound in ((1.0, 0), (2.0, 0), (3.0, 2), (-1.0, 0), (0.5, 0), (2.5, 1)):
        for form, kw in (("const", {}), ("int_const", {"exp_dt": TensorProto.INT64}), ("input", {"exp_input": True})):
            if form == "int_const" and e != int(e):
                continue
            m = unary_model("Pow", pw.size, e, **kw)
            feeds = {"x": pw}
            if form == "input":
                feeds["e"] = np.array(e, f32)
            got = run_unary(f"pow_{e}_{form}", m, feeds)
            if got is None:
                continue
            want = np.power(pw.astype(np.float64), e).astype(f32)  # x^e rounded once (nearly always)
            for i in np.flatnonzero((pw == 0) | np.isinf(pw)):  # C's pow at ±0, ±inf (numpy takes sqrt for 0.5)
                v = float(pw[i])
                want[i] = math.copysign(math.inf, v) if v == 0 and e == -1 else math.pow(v, e)
            u = ulps(got, want)
            if u.max() > bound or not same_sign_zero(got, want):
                i = int(u.argmax())
                failures.append(f"Pow {e} ({form}): {int(u.max())} ulps from powf at x = {pw[i]!r} ({got[i]!r} vs {want[i]!r})")
            ref = ort.InferenceSession(os.path.join(WORK, f"pow_{e}_{form}.onnx"),
                                       providers=["CPUExecutionProvider"]).run(None, feeds)[0]
            if e in (2.0, 3.0) and not np.array_equal(got, ref, equal_nan=True):
                failures.append(f"Pow {e} ({form}): differs from ONNX Runtime's x*x / x*x*x")
            print(f"ok Pow {e} ({form}): max {int(u.max())} ulps", flush=True)

if failures:
    print("\n".join(["FAILED:"] + failures))
    sys.exit(1)
print("all ok")
