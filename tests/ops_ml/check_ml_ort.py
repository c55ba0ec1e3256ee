"""The ai.onnx.ml operators (src/ops/ml_*.c) through alma, checked against ONNX Runtime.

usage: check_ml_ort.py ALMA WORKDIR     (python with onnx >= 1.16, onnxruntime, numpy)

Each case writes a one-node model with onnx.helper covering one attribute variant (dtypes, the
*_as_tensor forms, every post_transform and aggregate function, binary classifiers, NaN features,
BRANCH_* modes and set membership, random forests of several trees), runs it with `alma run` on
EAGER (a few also through FOLD+EAGER and DNNL, where the ops fall back to EAGER) and with ONNX
Runtime's CPU kernels, and compares every output: int64 labels exactly, float scores within 2e-5
of the reference's largest magnitude (at least 1). Where ONNX Runtime disagrees with
onnx.reference on a form alma follows the reference for (docs/ml-ops.md), the case says so and
compares with onnx.reference.ReferenceEvaluator instead.

Then the committed pipelines under tests/ops_ml/models (scikit-learn models exported by
make_sklearn_models.py) run on random batches against ONNX Runtime, and malformed or string-typed
models must fail at load with a message naming the problem; ZipMap's sequence of maps (alma run's
NAME.json) against ONNX Runtime's list of dicts. Exit 0 when every check passes."""
import glob
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from alma_cli import alma_run, read_outputs  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NP2TP = {np.float32: TP.FLOAT, np.float64: TP.DOUBLE, np.int64: TP.INT64, np.int32: TP.INT32,
         np.int16: TP.INT16, np.float16: TP.FLOAT16}
TOL = 2e-5
rng = np.random.RandomState(7)
failures = []
checked = 0


def tp(a):
    return NP2TP[a.dtype.type]


def one_node(op, feeds, outs, attrs, ml=3, dynamic_batch=True):
    """outs: [(name, TensorProto type)]; inputs typed from feeds with a symbolic batch dim."""
    node = helper.make_node(op, list(feeds), [o for o, _ in outs], domain="ai.onnx.ml", **attrs)
    gi = []
    for k, v in feeds.items():
        shape = list(v.shape)
        if dynamic_batch and len(shape) == 2 and k != "Y":
            shape[0] = "N"
        gi.append(helper.make_tensor_value_info(k, tp(v), shape))
    go = [helper.make_tensor_value_info(o, t, None) for o, t in outs]
    g = helper.make_graph([node], op, gi, go)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", ml)])
    m.ir_version = 8
    return m


def compare(name, got, want, out_names):
    global checked
    for nm, g, w in zip(out_names, got, want):
        w = np.asarray(w)
        if w.dtype == object or w.dtype.kind == "U":  # strings: alma writes |S bytes
            gs = [b.decode("utf-8") for b in g.ravel()] if g.dtype.kind == "S" else None
            if g.shape != w.shape or gs != [str(v) for v in w.ravel()]:
                failures.append(f"{name}: output {nm} {g.dtype}{g.shape} {g.ravel()[:8]} differs from the reference "
                                f"{w.ravel()[:8]}")
            continue
        if g.shape != w.shape:
            failures.append(f"{name}: output {nm} shape {g.shape}, reference {w.shape}")
            continue
        if w.dtype.kind in "iu":
            if g.dtype != w.dtype or not np.array_equal(g, w):
                failures.append(f"{name}: output {nm} ({g.dtype}) differs from the reference ({w.dtype}):\n"
                                f"  alma {g.ravel()[:12]}\n  want {w.ravel()[:12]}")
            continue
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        if np.isnan(g64).tolist() != np.isnan(w64).tolist():
            failures.append(f"{name}: output {nm} NaNs differ:\n  alma {g.ravel()[:12]}\n  want {w.ravel()[:12]}")
            continue
        fin = ~np.isnan(w64)
        scale = max(1.0, float(np.abs(w64[fin]).max()) if fin.any() else 1.0)
        err = float(np.abs(g64[fin] - w64[fin]).max()) / scale if fin.any() else 0.0
        if err > TOL:
            failures.append(f"{name}: output {nm} error {err:.3g} > {TOL}:\n  alma {g.ravel()[:12]}\n"
                            f"  want {w.ravel()[:12]}")
    checked += 1


def case(alma, work, name, m, feeds, reference="ort", why="", convs=("EAGER",), ort_model=None):
    """Runs m through alma (each conversion) and the reference (ort_model instead of m for ONNX
    Runtime when given), compares outputs."""
    path = os.path.join(work, name + ".onnx")
    onnx.save(m, path)
    ort_path = path
    if ort_model is not None:
        ort_path = os.path.join(work, name + "_ort.onnx")
        onnx.save(ort_model, ort_path)
    out_names = [o.name for o in m.graph.output]
    try:
        if reference == "ort":
            want = ort.InferenceSession(ort_path, providers=["CPUExecutionProvider"]).run(None, feeds)
        else:
            want = ReferenceEvaluator(m).run(None, feeds)
    except Exception as e:  # noqa: BLE001 - a case the reference cannot run is a broken case
        failures.append(f"{name}: the reference ({reference}) failed: {str(e)[:300]}")
        return
    for conv in convs:
        d = os.path.join(work, name + "_" + conv.replace("+", "_"))
        try:
            alma_run(alma, path, conv, feeds, d)
        except RuntimeError as e:
            failures.append(f"{name} [{conv}]: {e}")
            continue
        compare(f"{name} [{conv}]{' (vs onnx.reference: ' + why + ')' if why else ''}", read_outputs(d, out_names),
                want, out_names)


def zipmap_case(alma, work, name, m, feeds):
    """A model whose one output is ZipMap's sequence of maps: alma's Z.json (docs/cli.md) against
    ONNX Runtime's list of dicts, keys as text, values within TOL."""
    global checked
    path = os.path.join(work, name + ".onnx")
    onnx.save(m, path)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    d = os.path.join(work, name)
    try:
        alma_run(alma, path, "EAGER", feeds, d)
        with open(os.path.join(d, m.graph.output[0].name + ".json")) as f:
            got = json.load(f)
    except (RuntimeError, OSError, ValueError) as e:
        failures.append(f"{name}: {e}")
        return
    wk = [{str(k): v for k, v in row.items()} for row in want]
    if len(got) != len(wk) or any(sorted(g) != sorted(w) or any(abs(g[k] - w[k]) > TOL for k in w)
                                  for g, w in zip(got, wk)):
        failures.append(f"{name}: alma {got[:2]}, ONNX Runtime {wk[:2]}")
    checked += 1


def must_fail(alma, work, name, m, feeds, needle):
    """m must fail in alma (load or run) with a message containing needle."""
    global checked
    path = os.path.join(work, name + ".onnx")
    onnx.save(m, path)
    r = alma_run(alma, path, "EAGER", feeds, os.path.join(work, name), check=False)
    msg = (r.stderr + r.stdout).strip()
    if r.returncode == 0:
        failures.append(f"{name}: alma accepted a model it must refuse")
    elif needle not in msg:
        failures.append(f"{name}: message lacks '{needle}': {msg}")
    elif r.returncode < 0 or "Sanitizer" in msg or "runtime error" in msg:
        failures.append(f"{name}: crashed: {msg}")
    checked += 1


F, L, Z = TP.FLOAT, TP.INT64, "Z"
CLS_OUTS = [("Y", TP.INT64), ("Z", TP.FLOAT)]


def feats(n=6, f=4, dtype=np.float32, scale=1.0):
    return (rng.randn(n, f) * scale).astype(dtype)


# ---- random trees -------------------------------------------------------------------------------
def random_forest(n_trees, depth, n_feats, n_out, per_leaf, modes=("BRANCH_LEQ",), shuffle=True, seed=0):
    """Complete trees in the TreeEnsemble{Regressor,Classifier} layout: dict of nodes_* lists and
    the leaf outputs [(tree id, node id, output id, weight)]. Tree ids are not contiguous and the
    nodes of a tree after its root are shuffled (node ids are not positions)."""
    r = np.random.RandomState(seed)
    att = {k: [] for k in ["nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                           "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true"]}
    leaves = []
    for t in range(n_trees):
        tid = 3 * t + 1
        n_nodes = 2 ** (depth + 1) - 1
        ids = r.permutation(n_nodes)  # node k of the complete tree gets id ids[k] (ONNX Runtime wants ids < n)
        order = [0] + (list(r.permutation(np.arange(1, n_nodes))) if shuffle else list(range(1, n_nodes)))
        for k in order:
            interior = 2 * k + 1 < n_nodes
            att["nodes_treeids"].append(tid)
            att["nodes_nodeids"].append(int(ids[k]))
            att["nodes_featureids"].append(int(r.randint(n_feats)) if interior else 0)
            att["nodes_modes"].append(modes[r.randint(len(modes))] if interior else "LEAF")
            att["nodes_values"].append(float(np.float32(r.randn() * 0.7)) if interior else 0.0)
            att["nodes_truenodeids"].append(int(ids[2 * k + 1]) if interior else 0)
            att["nodes_falsenodeids"].append(int(ids[2 * k + 2]) if interior else 0)
            att["nodes_missing_value_tracks_true"].append(int(r.randint(2)) if interior else 0)
            if not interior:
                outs = r.permutation(n_out)[:per_leaf]
                for o in outs:
                    leaves.append((tid, int(ids[k]), int(o), float(np.float32(r.randn()))))
    return att, leaves


def legacy_attrs(att, leaves, prefix, as_tensor=False, missing=True):
    a = dict(att)
    if not missing:
        del a["nodes_missing_value_tracks_true"]
    a[prefix + "_treeids"] = [lf[0] for lf in leaves]
    a[prefix + "_nodeids"] = [lf[1] for lf in leaves]
    a[prefix + "_ids"] = [lf[2] for lf in leaves]
    w = [lf[3] for lf in leaves]
    if as_tensor:
        a[prefix + "_weights_as_tensor"] = numpy_helper.from_array(np.array(w, np.float64))
        a["nodes_values_as_tensor"] = numpy_helper.from_array(np.array(a.pop("nodes_values"), np.float64))
    else:
        a[prefix + "_weights"] = w
    return a


def to_v5(att, leaves, n_targets, dtype=np.float32):
    """The same forest in TreeEnsemble-5's layout (interior nodes and leaves apart)."""
    mode_num = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4, "BRANCH_NEQ": 5}
    pos = {}
    interior, leaf_list = [], []
    for i, (t, nid, md) in enumerate(zip(att["nodes_treeids"], att["nodes_nodeids"], att["nodes_modes"])):
        if md == "LEAF":
            pos[t, nid] = ("leaf", len(leaf_list))
            leaf_list.append((t, nid))
        else:
            pos[t, nid] = ("node", len(interior))
            interior.append(i)
    lw = {}
    for t, nid, o, w in leaves:
        lw.setdefault((t, nid), []).append((o, w))
    # TreeEnsemble-5 has one (target, weight) per leaf: keep the first
    leaf_t = [lw[k][0][0] for k in leaf_list]
    leaf_w = [lw[k][0][1] for k in leaf_list]
    v = dict(nodes_featureids=[], nodes_splits=[], nodes_modes=[], nodes_truenodeids=[], nodes_falsenodeids=[],
             nodes_trueleafs=[], nodes_falseleafs=[], nodes_missing_value_tracks_true=[])
    for i in interior:
        t = att["nodes_treeids"][i]
        v["nodes_featureids"].append(att["nodes_featureids"][i])
        v["nodes_splits"].append(att["nodes_values"][i])
        v["nodes_modes"].append(mode_num[att["nodes_modes"][i]])
        v["nodes_missing_value_tracks_true"].append(att["nodes_missing_value_tracks_true"][i])
        for side, key in (("true", "nodes_truenodeids"), ("false", "nodes_falsenodeids")):
            kind, p = pos[t, att[key][i]]
            v[f"nodes_{side}nodeids"].append(p)
            v[f"nodes_{side}leafs"].append(int(kind == "leaf"))
    roots = []
    seen = set()
    for i, t in enumerate(att["nodes_treeids"]):
        if t not in seen:
            seen.add(t)
            roots.append(pos[t, att["nodes_nodeids"][i]][1])
    v["tree_roots"] = roots
    v["nodes_splits"] = numpy_helper.from_array(np.array(v["nodes_splits"], dtype))
    v["nodes_modes"] = numpy_helper.from_array(np.array(v["nodes_modes"], np.uint8))
    v["leaf_targetids"] = leaf_t
    v["leaf_weights"] = numpy_helper.from_array(np.array(leaf_w, dtype))
    v["n_targets"] = n_targets
    return v


def tree_input(n, f, att, dtype=np.float32, nan=True):
    """Random features with some exactly on thresholds and some NaN."""
    x = rng.randn(n, f).astype(np.float64) * 0.8
    th = [v for v, md in zip(att["nodes_values"], att["nodes_modes"]) if md != "LEAF"]
    for i in range(n):
        if i % 3 == 0:
            x[i, rng.randint(f)] = th[rng.randint(len(th))]
    if nan:
        x[1, 0] = np.nan
        x[4 % n, f - 1] = np.nan
    return x.astype(dtype)


def preprocessing_cases(alma, work):
    x = feats()
    xi = rng.randint(-5, 10, size=(5, 4)).astype(np.int64)
    # ArrayFeatureExtractor
    for nm, data, idx in [("f32_2d", x, [3, 0, 3]), ("i64_2d", xi, [1]), ("f64_3d", rng.randn(2, 3, 5), [4, 0]),
                          ("i32_1d", np.arange(7, dtype=np.int32), [6, 2]), ("f32_idx2d", x, [[2, 1]])]:
        feeds = {"X": data, "Y": np.array(idx, np.int64)}
        m = one_node("ArrayFeatureExtractor", feeds, [("Z", tp(data))], {})
        case(alma, work, "afe_" + nm, m, feeds)
    # Binarizer
    xn = x.copy()
    xn[0, 0] = np.nan
    for nm, data, th, why in [("f32_nan", xn, 0.25, "ONNX Runtime refuses NaN; NaN > t is false"),
                              ("f32_default", x, None, ""), ("f32", x, 0.3, ""),
                              ("f64", rng.randn(3, 4), -0.5, "ONNX Runtime has no double kernel"),
                              ("i64", xi, 2.0, "ONNX Runtime has no int64 kernel")]:
        attrs = {} if th is None else {"threshold": th}
        m = one_node("Binarizer", {"X": data}, [("Y", tp(data))], attrs)
        case(alma, work, "binarizer_" + nm, m, {"X": data}, convs=("EAGER", "FOLD+EAGER", "DNNL"),
             reference="ref" if why else "ort", why=why)
    # Normalizer (MAX: the spec's max(X), as ONNX Runtime; rows with only negatives included)
    xneg = x.copy()
    xneg[1] = -np.abs(xneg[1])
    xneg[2] = 0
    for norm in ["MAX", "L1", "L2"]:
        for nm, data in [("f32", xneg), ("i64", xi), ("f64_1d", rng.randn(5))]:
            m = one_node("Normalizer", {"X": data}, [("Y", F)], {"norm": norm})
            case(alma, work, f"normalizer_{norm}_{nm}", m, {"X": data})
    # Scaler
    for nm, data, off, sc in [("f32", x, [0.1, -0.2, 0.3, 1.0], [2.0, 0.5, -1.0, 3.0]), ("one_value", x, [0.5], [2.0]),
                              ("i32", xi.astype(np.int32), [1.0, 2.0, 3.0, 4.0], [0.5, 1.0, 2.0, -1.0]),
                              ("f64", rng.randn(3, 4), [0.25, 0.0, 1.0, 2.0], [1.0, 2.0, 3.0, 4.0])]:
        m = one_node("Scaler", {"X": data}, [("Y", F)], {"offset": off, "scale": sc})
        case(alma, work, "scaler_" + nm, m, {"X": data})
    # Imputer
    xm = x.copy()
    xm[rng.rand(*xm.shape) < 0.3] = np.nan
    xr = x.copy()
    xr[:, 1] = -1.0
    xim = xi.copy()
    xim[xim == 3] = -1
    for nm, data, attrs in [("nan_per_feature", xm, {"imputed_value_floats": [1.0, 2.0, 3.0, 4.0], "replaced_value_float": float("nan")}),
                            ("nan_one_value", xm, {"imputed_value_floats": [9.5], "replaced_value_float": float("nan")}),
                            ("value", xr, {"imputed_value_floats": [0.5, 7.0, 1.0, 1.0], "replaced_value_float": -1.0}),
                            ("i64", xim, {"imputed_value_int64s": [100], "replaced_value_int64": -1}),
                            ("i64_default_replaced", xi, {"imputed_value_int64s": [1, 2, 3, 4]})]:
        m = one_node("Imputer", {"X": data}, [("Y", tp(data))], attrs)
        case(alma, work, "imputer_" + nm, m, {"X": data})
    # OneHotEncoder
    cats = [4, 0, 7, 2, -3]
    for nm, data, zeros in [("i64_2d", rng.choice([4, 0, 7, 2, -3], size=(3, 4)).astype(np.int64), 0),
                            ("i64_1d_unknown", np.array([4, 1, -3, 99, 2], np.int64), 1),
                            ("f32_cast", np.array([[4.0, 0.0, 7.0], [2.0, 1.0, -3.0]], np.float32), 1),
                            ("f64", np.array([[4.0, 0.0], [2.0, -3.0]]), 0)]:
        m = one_node("OneHotEncoder", {"X": data}, [("Y", F)], {"cats_int64s": cats, "zeros": zeros})
        case(alma, work, "onehot_" + nm, m, {"X": data})
    # LabelEncoder 2 (lists) and 4 (tensors)
    ki = np.array([[1, 5, 9, 2], [7, 5, 0, 1]], np.int64)
    kf = np.array([[0.5, 1.5, np.nan], [2.5, 0.5, -1.0]], np.float32)
    le_cases = [
        ("v2_i64_to_f32", 2, ki, {"keys_int64s": [1, 5, 9, 0], "values_floats": [0.1, 0.5, 0.9, 0.0], "default_float": 42.0}),
        ("v2_i64_to_i64_default", 2, ki, {"keys_int64s": [5, 9], "values_int64s": [50, 90]}),
        ("v2_f32_to_i64", 2, kf, {"keys_floats": [0.5, 2.5, 1.5], "values_int64s": [5, 25, 15], "default_int64": -7}),
        ("v4_f32_nan_key", 4, kf, {"keys_floats": [0.5, float("nan")], "values_int64s": [1, 2]}),
        ("v4_tensor_i64_to_i16", 4, ki, {"keys_tensor": numpy_helper.from_array(np.array([1, 5, 9], np.int64)),
                                         "values_tensor": numpy_helper.from_array(np.array([10, 50, 90], np.int16)),
                                         "default_tensor": numpy_helper.from_array(np.array([-2], np.int16))}),
        ("v4_tensor_f64_to_f64", 4, rng.choice([0.25, 0.5, 3.0], size=(2, 3)),
         {"keys_tensor": numpy_helper.from_array(np.array([0.25, 3.0])),
          "values_tensor": numpy_helper.from_array(np.array([2.5, 30.0])),
          "default_tensor": numpy_helper.from_array(np.array([-1.5]))}),
        ("v4_tensor_i32_to_f32", 4, np.array([[3, 1], [2, 3]], np.int32),
         {"keys_tensor": numpy_helper.from_array(np.array([1, 3], np.int32)),
          "values_tensor": numpy_helper.from_array(np.array([0.5, 1.5], np.float32)),
          "default_tensor": numpy_helper.from_array(np.array([9.0], np.float32))}),
    ]
    for nm, ver, data, attrs in le_cases:
        vt = {"values_floats": TP.FLOAT, "values_int64s": TP.INT64}
        out_t = next((t for k, t in vt.items() if k in attrs), None)
        if out_t is None:
            out_t = attrs["values_tensor"].data_type
        m = one_node("LabelEncoder", {"X": data}, [("Y", out_t)], attrs, ml=ver)
        no_ort = "i16" in nm or "i32" in nm  # ONNX Runtime's LabelEncoder-4 has no int16/int32 kernels
        case(alma, work, "labelencoder_" + nm, m, {"X": data}, reference="ref" if no_ort else "ort",
             why="ONNX Runtime has no kernel for these types" if no_ort else "")
    # FeatureVectorizer: a float and an int64 input, cut and padded
    a, b, bi = feats(5, 3), feats(5, 4), rng.randint(0, 9, size=(5, 4)).astype(np.int64)
    for nm, dims in [("exact", [3, 4]), ("cut_pad", [2, 6])]:
        m = one_node("FeatureVectorizer", {"A": a, "B": b}, [("Y", F)], {"inputdimensions": dims})
        case(alma, work, "featurevectorizer_" + nm, m, {"A": a, "B": b})
    # inputs of different types: ONNX Runtime binds them to one type and refuses this model
    m = one_node("FeatureVectorizer", {"A": a, "B": bi}, [("Y", F)], {"inputdimensions": [3, 5]})
    case(alma, work, "featurevectorizer_mixed_types", m, {"A": a, "B": bi}, reference="ref",
         why="ONNX Runtime wants one input type")


POSTS = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"]


def linear_cases(alma, work):
    x = feats(7, 4)
    coef3 = (rng.randn(3, 4) * 0.6).astype(np.float32)
    for pt in POSTS:
        xx = x * 0.05 if pt == "PROBIT" else x  # PROBIT needs scores in (0, 1) for a number
        attrs = {"coefficients": coef3.ravel().tolist(), "intercepts": [0.1, 0.2, 0.35],
                 "classlabels_ints": [10, 20, 30], "post_transform": pt}
        if pt == "PROBIT":
            attrs["intercepts"] = [0.3, 0.5, 0.7]
        m = one_node("LinearClassifier", {"X": xx}, CLS_OUTS, attrs)
        case(alma, work, "linearclassifier_3_" + pt, m, {"X": xx})
    # binary written as two rows (what skl2onnx writes for a binary LogisticRegression)
    w = rng.randn(4).astype(np.float32)
    for pt in ["NONE", "LOGISTIC"]:
        attrs = {"coefficients": np.concatenate([-w, w]).tolist(), "intercepts": [-0.3, 0.3],
                 "classlabels_ints": [0, 1], "post_transform": pt}
        m = one_node("LinearClassifier", {"X": x}, CLS_OUTS, attrs)
        case(alma, work, "linearclassifier_binary2_" + pt, m, {"X": x})
    # binary as one row with two labels: ONNX Runtime writes [1 - s, s] untransformed for NONE and
    # the softmaxes and one column per row for PROBIT; onnx.reference transforms [-s, s]
    for pt in POSTS:
        xx = x * 0.1 if pt == "PROBIT" else x
        attrs = {"coefficients": w.tolist(), "intercepts": [0.1], "classlabels_ints": [3, 7], "post_transform": pt}
        m = one_node("LinearClassifier", {"X": xx}, CLS_OUTS, attrs)
        ref = "ort" if pt == "LOGISTIC" else "ref"
        case(alma, work, "linearclassifier_binary1_" + pt, m, {"X": xx}, reference=ref,
             why="" if ref == "ort" else "ONNX Runtime's binary one-row scores differ")
    xi = rng.randint(-3, 4, size=(5, 4)).astype(np.int64)
    m = one_node("LinearClassifier", {"X": xi}, CLS_OUTS, {"coefficients": coef3.ravel().tolist(),
                                                           "intercepts": [0.0, 0.1, 0.2], "classlabels_ints": [1, 2, 3]})
    case(alma, work, "linearclassifier_int64_input", m, {"X": xi}, convs=("EAGER", "FOLD+EAGER", "DNNL"))
    # LinearRegressor
    for nm, t, pts in [("1", 1, ["NONE", "PROBIT", "LOGISTIC"]), ("3", 3, POSTS)]:
        for pt in pts:
            xx = x * 0.05 if pt == "PROBIT" else x
            attrs = {"coefficients": (rng.randn(t * 4) * 0.5).tolist(), "intercepts": (rng.rand(t) * 0.5 + 0.25).tolist(),
                     "targets": t, "post_transform": pt}
            m = one_node("LinearRegressor", {"X": xx}, [("Y", F)], attrs)
            case(alma, work, f"linearregressor_{nm}_{pt}", m, {"X": xx})
    m = one_node("LinearRegressor", {"X": x.astype(np.float64)}, [("Y", F)], {"coefficients": [1.0, 2.0, 3.0, 4.0],
                                                                            "intercepts": [0.5]})
    case(alma, work, "linearregressor_f64", m, {"X": x.astype(np.float64)}, reference="ref",
         why="ONNX Runtime has no double kernel")
    m = one_node("LinearRegressor", {"X": x}, [("Y", F)], {"coefficients": [1.0, 2.0, 3.0, 4.0]})
    case(alma, work, "linearregressor_no_intercepts", m, {"X": x})


def svm_cases(alma, work):
    f = 3
    x = feats(8, f)
    sv = rng.randn(5, f).astype(np.float32)
    kernels = [("LINEAR", [0.0, 0.0, 0.0]), ("RBF", [0.7, 0.0, 0.0]), ("POLY", [0.5, 0.3, 3.0]), ("SIGMOID", [0.4, 0.1, 0.0])]
    for kt, kp in kernels:
        attrs = {"kernel_type": kt, "kernel_params": kp, "n_supports": 5, "support_vectors": sv.ravel().tolist(),
                 "coefficients": rng.randn(5).tolist(), "rho": [0.2]}
        m = one_node("SVMRegressor", {"X": x}, [("Y", F)], attrs)
        case(alma, work, "svmregressor_" + kt, m, {"X": x})
    m = one_node("SVMRegressor", {"X": x}, [("Y", F)], {"kernel_params": [0.0, 0.0, 0.0], "n_supports": 0,
                                                      "coefficients": [0.5, -1.0, 2.0], "rho": [0.1]})
    case(alma, work, "svmregressor_linear_mode", m, {"X": x})
    m = one_node("SVMRegressor", {"X": x}, [("Y", F)], {"kernel_type": "RBF", "kernel_params": [0.5, 0, 0], "n_supports": 5,
                                                      "support_vectors": sv.ravel().tolist(), "coefficients": rng.randn(5).tolist(),
                                                      "rho": [-0.1], "one_class": 1})
    case(alma, work, "svmregressor_one_class", m, {"X": x})
    # SVMClassifier, SVC mode: 3 classes (one-vs-one votes), with and without probabilities
    vpc = [2, 3, 2]
    nv = sum(vpc)
    sv7 = rng.randn(nv, f).astype(np.float32)
    for kt, kp in kernels:
        for proba in [False, True]:
            attrs = {"kernel_type": kt, "kernel_params": kp, "vectors_per_class": vpc, "support_vectors": sv7.ravel().tolist(),
                     "coefficients": rng.randn(2 * nv).tolist(), "rho": rng.randn(3).tolist(), "classlabels_ints": [0, 1, 2]}
            if proba:
                attrs.update(prob_a=(-rng.rand(3) * 2).tolist(), prob_b=(rng.randn(3) * 0.1).tolist())
            m = one_node("SVMClassifier", {"X": x}, CLS_OUTS, attrs)
            case(alma, work, f"svmclassifier_3_{kt}{'_proba' if proba else ''}", m, {"X": x})
    # binary SVC (one class pair): scores [-s, s]; with post transforms and probabilities
    sv4 = rng.randn(4, f).astype(np.float32)
    for pt in ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"]:
        for proba in [False, True]:
            attrs = {"kernel_type": "RBF", "kernel_params": [0.3, 0, 0], "vectors_per_class": [2, 2],
                     "support_vectors": sv4.ravel().tolist(), "coefficients": [0.7, -0.4, 0.9, -1.2], "rho": [0.05],
                     "classlabels_ints": [5, 9], "post_transform": pt}
            if proba:
                attrs.update(prob_a=[-1.7], prob_b=[0.05])
            m = one_node("SVMClassifier", {"X": x}, CLS_OUTS, attrs)
            # ONNX Runtime writes [1 - s, s] untransformed for the softmaxes on one pair score
            ref = "ref" if pt.startswith("SOFTMAX") and not proba else "ort"
            case(alma, work, f"svmclassifier_binary_{pt}{'_proba' if proba else ''}", m, {"X": x}, reference=ref,
                 why="ONNX Runtime's binary scores differ" if ref == "ref" else "")
    # linear mode: one score per class
    attrs = {"coefficients": rng.randn(3 * f).tolist(), "rho": [0.1, 0.2, 0.3], "classlabels_ints": [4, 5, 6],
             "kernel_params": [0.0, 0.0, 0.0]}
    m = one_node("SVMClassifier", {"X": x}, CLS_OUTS, attrs)
    case(alma, work, "svmclassifier_linear_mode", m, {"X": x})


def tree_cases(alma, work):
    f = 4
    modes_all = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ")
    # regressors
    for nm, kw, extra, ml in [
        ("sum", dict(n_trees=3, depth=3, n_out=1, per_leaf=1), {}, 1),
        ("average_2targets", dict(n_trees=4, depth=2, n_out=2, per_leaf=2), {"aggregate_function": "AVERAGE"}, 1),
        ("min_3targets", dict(n_trees=3, depth=3, n_out=3, per_leaf=3), {"aggregate_function": "MIN"}, 1),
        ("max_3targets", dict(n_trees=3, depth=3, n_out=3, per_leaf=3), {"aggregate_function": "MAX"}, 1),
        # one target per leaf: some rows reach no leaf of some target (0, as ONNX Runtime)
        ("min_unreached", dict(n_trees=2, depth=2, n_out=4, per_leaf=1), {"aggregate_function": "MIN"}, 1),
        ("max_unreached", dict(n_trees=2, depth=2, n_out=4, per_leaf=1), {"aggregate_function": "MAX"}, 1),
        ("all_modes", dict(n_trees=5, depth=3, n_out=2, per_leaf=1, modes=modes_all), {}, 1),
        ("base_values", dict(n_trees=2, depth=2, n_out=2, per_leaf=2), {"base_values": [0.5, -1.5]}, 1),
        ("v3_as_tensor", dict(n_trees=3, depth=3, n_out=2, per_leaf=2), {"base_values_as_tensor": numpy_helper.from_array(np.array([0.25, 0.5]))}, 3),
        ("softmax_3targets", dict(n_trees=2, depth=2, n_out=3, per_leaf=3), {"post_transform": "SOFTMAX"}, 3),
        ("logistic_3targets", dict(n_trees=2, depth=2, n_out=3, per_leaf=3), {"post_transform": "LOGISTIC"}, 3),
        ("logistic_1target", dict(n_trees=2, depth=2, n_out=1, per_leaf=1), {"post_transform": "LOGISTIC"}, 3),
    ]:
        att, leaves = random_forest(n_feats=f, seed=len(nm) * 7 + kw["n_trees"], **kw)
        attrs = legacy_attrs(att, leaves, "target", as_tensor=nm.startswith("v3"))
        attrs.update(extra, n_targets=kw["n_out"])
        # ONNX Runtime takes the double *_as_tensor forms only with a double input
        for dt in [np.float32, np.float64] if nm in ("sum", "all_modes") else [np.float64] if "v3" in nm else [np.float32]:
            xx = tree_input(9, f, att, dt)
            m = one_node("TreeEnsembleRegressor", {"X": xx}, [("Y", F)], attrs, ml=ml)
            case(alma, work, f"treeregressor_{nm}_{np.dtype(dt).name}", m, {"X": xx},
                 convs=("EAGER", "FOLD+EAGER") if nm == "sum" else ("EAGER",))
    # classifiers: multi-class with base values, every transform
    for pt in POSTS:
        att, leaves = random_forest(3, 3, f, 3, 3, seed=11)
        if pt == "PROBIT":
            leaves = [(t, n, o, abs(w) * 0.1) for t, n, o, w in leaves]
        attrs = legacy_attrs(att, leaves, "class", as_tensor=(pt == "SOFTMAX"))
        attrs.update(classlabels_int64s=[2, 4, 6], post_transform=pt)
        if pt != "PROBIT":
            attrs["base_values"] = [0.1, -0.2, 0.05]
        xx = tree_input(9, f, att, np.float64 if pt == "SOFTMAX" else np.float32)
        m = one_node("TreeEnsembleClassifier", {"X": xx}, CLS_OUTS, attrs, ml=3 if pt == "SOFTMAX" else 1)
        case(alma, work, "treeclassifier_3_" + pt, m, {"X": xx})
    # binary as GradientBoosting writes it: every weight on class 0, LOGISTIC, one base value
    for pt in ["LOGISTIC", "NONE"]:
        att, leaves = random_forest(4, 2, f, 1, 1, seed=5)
        attrs = legacy_attrs(att, leaves, "class")
        attrs.update(classlabels_int64s=[0, 1], post_transform=pt, base_values=[0.3])
        xx = tree_input(9, f, att)
        m = one_node("TreeEnsembleClassifier", {"X": xx}, CLS_OUTS, attrs)
        # NONE: onnx.reference writes [1 - s, s]; ONNX Runtime [-s, s] when the weights have mixed signs
        ref = "ref" if pt == "NONE" else "ort"
        case(alma, work, "treeclassifier_binary_gb_" + pt, m, {"X": xx}, reference=ref,
             why="ONNX Runtime's binary NONE scores differ" if ref == "ref" else "")
    # binary as a RandomForest: probabilities for both classes, averaged by the weights
    att, leaves = random_forest(5, 3, f, 2, 2, seed=9)
    p1 = {(t, n): float(np.float32(rng.choice([0.0, 0.2, 0.25, 0.4, 0.6, 0.75, 1.0]))) for t, n, _, _ in leaves}
    leaves = [(t, n, o, (p1[t, n] if o == 1 else 1 - p1[t, n]) / 5) for t, n, o, w in leaves]
    attrs = legacy_attrs(att, leaves, "class")
    attrs.update(classlabels_int64s=[0, 1])
    xi = (tree_input(9, f, att, nan=False) * 3).astype(np.int64)
    m = one_node("TreeEnsembleClassifier", {"X": xi}, CLS_OUTS, attrs)
    # ONNX Runtime labels two classes that both get weights by "score 1 > 0", not the argmax
    case(alma, work, "treeclassifier_binary_rf_int64_input", m, {"X": xi}, convs=("EAGER", "DNNL"), reference="ref",
         why="ONNX Runtime labels 2 weighted classes by score 1 > 0")
    # TreeEnsemble (ai.onnx.ml 5): the same forests, every aggregate function and transform
    for nm, kw, agg, pt, dt in [
        ("sum", dict(n_trees=3, depth=3, n_out=2, per_leaf=1), 1, 0, np.float32),
        ("average", dict(n_trees=4, depth=2, n_out=1, per_leaf=1), 0, 0, np.float32),
        ("min", dict(n_trees=3, depth=3, n_out=2, per_leaf=1), 2, 0, np.float32),
        ("max_f64", dict(n_trees=3, depth=3, n_out=2, per_leaf=1), 3, 0, np.float64),
        ("all_modes", dict(n_trees=4, depth=3, n_out=2, per_leaf=1, modes=modes_all), 1, 0, np.float32),
        ("softmax", dict(n_trees=3, depth=2, n_out=3, per_leaf=1), 1, 1, np.float32),
        ("logistic", dict(n_trees=3, depth=2, n_out=3, per_leaf=1), 1, 2, np.float32),
    ]:
        att, leaves = random_forest(n_feats=f, seed=len(nm) * 3 + 1, **kw)
        attrs = to_v5(att, leaves, kw["n_out"], dt)
        attrs.update(aggregate_function=agg, post_transform=pt)
        xx = tree_input(9, f, att, dt)
        m = one_node("TreeEnsemble", {"X": xx}, [("Y", tp(xx))], attrs, ml=5)
        # ONNX Runtime reads post_transform 1 as LOGISTIC and 2 as SOFTMAX (its own enum), the
        # spec says 1 SOFTMAX, 2 LOGISTIC: its reference output comes from the swapped number
        ort_m = None
        if pt in (1, 2):
            ort_m = one_node("TreeEnsemble", {"X": xx}, [("Y", tp(xx))], dict(attrs, post_transform=3 - pt), ml=5)
        case(alma, work, "treeensemble5_" + nm, m, {"X": xx}, ort_model=ort_m)
    # 150 rows: alma walks a tree with 8 rows side by side over blocks of 64 rows (tails of both),
    # and has walks specialized to forests of only BRANCH_LEQ or only BRANCH_LT without missing
    # value tracking: one case for each, and the general walk
    att, leaves = random_forest(12, 5, f, 2, 2, seed=21)
    attrs = legacy_attrs(att, leaves, "target", missing=False)
    attrs.update(n_targets=2, aggregate_function="AVERAGE")
    xx = tree_input(150, f, att)
    case(alma, work, "treeregressor_leq_150_rows", one_node("TreeEnsembleRegressor", {"X": xx}, [("Y", F)], attrs),
         {"X": xx})
    att, leaves = random_forest(7, 4, f, 3, 3, modes=("BRANCH_LT",), seed=22)
    attrs = legacy_attrs(att, leaves, "class", missing=False)
    attrs.update(classlabels_int64s=[1, 2, 3], post_transform="SOFTMAX")
    xx = tree_input(150, f, att)
    case(alma, work, "treeclassifier_lt_150_rows", one_node("TreeEnsembleClassifier", {"X": xx}, CLS_OUTS, attrs),
         {"X": xx})
    att, leaves = random_forest(9, 4, f, 2, 1, modes=modes_all, seed=23)
    attrs = to_v5(att, leaves, 2)
    attrs.update(aggregate_function=2, post_transform=0)
    xx = tree_input(150, f, att)
    case(alma, work, "treeensemble5_min_150_rows", one_node("TreeEnsemble", {"X": xx}, [("Y", F)], attrs, ml=5),
         {"X": xx})
    # set membership and a one-leaf tree, against onnx.reference (ONNX Runtime agrees on these)
    attrs = dict(nodes_featureids=[0, 1, 0], nodes_modes=numpy_helper.from_array(np.array([6, 0, 6], np.uint8)),
                 nodes_splits=numpy_helper.from_array(np.array([0, 0.5, 0], np.float32)),
                 membership_values=numpy_helper.from_array(np.array([1, 3, 5, np.nan, 2, 4, np.nan], np.float32)),
                 nodes_truenodeids=[1, 0, 2], nodes_trueleafs=[0, 1, 1], nodes_falsenodeids=[2, 1, 3],
                 nodes_falseleafs=[0, 1, 1], tree_roots=[0, 2], leaf_targetids=[0, 1, 0, 1, 0],
                 leaf_weights=numpy_helper.from_array(np.array([1, 10, 100, 1000, 7], np.float32)), n_targets=2,
                 aggregate_function=1)
    xx = np.array([[1, 0.2], [3, 0.9], [2, 0], [4, 1], [0, 0], [5, np.nan]], np.float32)
    m = one_node("TreeEnsemble", {"X": xx}, [("Y", F)], attrs, ml=5)
    case(alma, work, "treeensemble5_member", m, {"X": xx})


def fixture_cases(alma, work):
    """The scikit-learn pipelines committed under models/, on random batches."""
    for path in sorted(glob.glob(os.path.join(HERE, "models", "*.onnx"))):
        m = onnx.load(path)
        name = os.path.splitext(os.path.basename(path))[0]
        inp = m.graph.input[0]
        nfeat = inp.type.tensor_type.shape.dim[1].dim_value
        for batch in [1, 17]:
            x = rng.randn(batch, nfeat).astype(np.float32) * 1.5
            case(alma, work, f"sklearn_{name}_b{batch}", m, {inp.name: x}, convs=("EAGER", "FOLD+EAGER", "DNNL"))


def refusal_cases(alma, work):
    x = feats(3, 4)
    att, leaves = random_forest(2, 2, 4, 1, 1, shuffle=False, seed=3)
    good = legacy_attrs(att, leaves, "target")
    good["n_targets"] = 1

    def reg(name, needle, **change):
        attrs = dict(good)
        attrs.update(change)
        must_fail(alma, work, name, one_node("TreeEnsembleRegressor", {"X": x}, [("Y", F)], attrs), {"X": x}, needle)

    t_ids = list(good["nodes_truenodeids"])
    t_ids[0] = 999
    reg("bad_tree_child_id", "true branch node id 999 is not in the tree", nodes_truenodeids=t_ids)
    reg("bad_tree_lengths", "differ in length", nodes_featureids=good["nodes_featureids"][:-1])
    fids = list(good["nodes_featureids"])
    fids[0] = 17
    reg("bad_tree_feature", "reads feature 17", nodes_featureids=fids)
    reg("bad_tree_target", "out of range", target_ids=[5] * len(good["target_ids"]))
    reg("bad_tree_weight_node", "which is not given", target_nodeids=[12345] * len(good["target_ids"]))
    cyc = list(good["nodes_truenodeids"])
    cyc[1] = good["nodes_nodeids"][0]  # node 1 goes back to the root
    reg("bad_tree_cycle", "cycle", nodes_truenodeids=cyc)
    reg("bad_tree_mode", "is not a node mode", nodes_modes=["BRANCH_XX"] + good["nodes_modes"][1:])
    v5 = to_v5(att, leaves, 1)
    bad = dict(v5, nodes_truenodeids=[50] + v5["nodes_truenodeids"][1:])
    must_fail(alma, work, "bad_v5_child", one_node("TreeEnsemble", {"X": x}, [("Y", F)], bad, ml=5), {"X": x}, "out of range")
    bad = dict(v5, tree_roots=[0, 77])
    must_fail(alma, work, "bad_v5_root", one_node("TreeEnsemble", {"X": x}, [("Y", F)], bad, ml=5), {"X": x}, "tree_roots[1] = 77")
    bad = dict(v5, nodes_modes=numpy_helper.from_array(np.array([6] * len(v5["nodes_featureids"]), np.uint8)))
    must_fail(alma, work, "bad_v5_members", one_node("TreeEnsemble", {"X": x}, [("Y", F)], bad, ml=5), {"X": x},
              "membership_values")
    # string class labels: a string label tensor (tests/ops_ml/check_ml_skl.py runs skl2onnx's exports)
    xs = feats(6, 4)
    sl = {"coefficients": [1.0, -1, 0.5, 2, -0.5, 1, 1, -2], "intercepts": [0.1, -0.2], "classlabels_strings": ["a", "b"]}
    m = one_node("LinearClassifier", {"X": xs}, [("Y", TP.STRING), ("Z", F)], sl)
    case(alma, work, "string_labels_linear", m, {"X": xs}, convs=("EAGER", "FOLD+EAGER", "DNNL"))
    sl1 = {"coefficients": [1.0, -1, 0.5, 2], "intercepts": [0.3], "classlabels_strings": ["a", "b"]}
    m = one_node("LinearClassifier", {"X": xs}, [("Y", TP.STRING), ("Z", F)], sl1)
    case(alma, work, "string_labels_linear_one_row", m, {"X": xs}, reference="ref",
         why="ONNX Runtime writes [1 - s, s] scores for one coefficient row")
    m = one_node("LinearClassifier", {"X": xs}, [("Y", TP.STRING), ("Z", F)], dict(sl1, classlabels_strings=["a"]))
    must_fail(alma, work, "refuse_one_string_label", m, {"X": xs}, "two labels are expected")
    # a float input with only string categories: cats_int64s is what it needs
    m = one_node("OneHotEncoder", {"X": x}, [("Y", F)], {"cats_strings": ["a", "b"]})
    must_fail(alma, work, "refuse_string_cats", m, {"X": x}, "cats_int64s")
    # string values and LabelEncoder-1 run now (string tensors): against ONNX Runtime
    xk = np.array([[1.0, 2.0], [1.0, np.nan]], np.float32)
    m = one_node("LabelEncoder", {"X": xk}, [("Y", TP.STRING)], {"keys_floats": [1.0, 2.0], "values_strings": ["a", "b"],
                                                                  "default_string": "zz"}, ml=2)
    case(alma, work, "label_encoder_float_to_string", m, {"X": xk})
    xi = np.array([[0, 1], [2, 5]], np.int64)
    m = one_node("LabelEncoder", {"X": xi}, [("Y", TP.STRING)], {"classes_strings": ["a", "b", "c"],
                                                                  "default_string": "?"}, ml=1)
    case(alma, work, "label_encoder_1_int_to_string", m, {"X": xi})
    node = helper.make_node("ZipMap", ["X"], ["Z"], domain="ai.onnx.ml", classlabels_int64s=[0, 1, 2, 3])
    g = helper.make_graph([node], "zm", [helper.make_tensor_value_info("X", F, [None, 4])],
                          [helper.make_value_info("Z", helper.make_sequence_type_proto(
                              helper.make_map_type_proto(TP.INT64, helper.make_tensor_type_proto(F, []))))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)])
    zipmap_case(alma, work, "zipmap_int64", m, {"X": x})  # more in check_ml_skl.py (skl2onnx's default exports)
    m = one_node("SVMClassifier", {"X": x}, CLS_OUTS, {"coefficients": [1.0] * 8, "rho": [0.0], "classlabels_ints": [0, 1],
                                                      "vectors_per_class": [1, 1], "support_vectors": [1.0] * 3})
    must_fail(alma, work, "bad_svm_vectors", m, {"X": x}, "support_vectors values")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    alma, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    for group in [preprocessing_cases, linear_cases, svm_cases, tree_cases, fixture_cases, refusal_cases]:
        group(alma, work)
    for f in failures:
        print("FAIL", f)
    print(f"ops_ml: {checked} checks, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
