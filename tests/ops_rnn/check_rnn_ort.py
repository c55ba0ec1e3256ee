"""ONNX LSTM and GRU through alma against ONNX Runtime, on random models.

usage: check_rnn_ort.py ALMA WORKDIR      (python with onnx, onnxruntime, numpy)

Each case is a single LSTM or GRU node written with onnx.helper (random weights scaled by
1/sqrt(hidden), every attribute and optional input drawn from a fixed list of combinations plus
seeded random ones), run by `alma run` on EAGER and on every other runtime available (DNNL,
XNNPACK, BLAS: they take these nodes from EAGER's kernel, with their threads: the two directions of a
bidirectional node in parallel) and by ONNX Runtime. Weights are initializers (packed once per node)
except in the cases that feed them as inputs (packed per run). ONNX Runtime's CPU
kernels refuse layout 1 (batch first), so those cases are compared with ONNX Runtime on the same
node in layout 0 with inputs and outputs transposed. Error: the largest absolute difference over
the output's largest magnitude (at least 1), at most 1e-4 for every output. Runs take 2 threads;
the LSTM cases with 512 hidden units or more (R larger than a core's L2, so each step is split over
the threads when there are more threads than directions or each thread's share fits L2) also run on
1 and 3 threads, whose outputs must be the same bits as on 2. Exit 0 when every case passes, 1 otherwise."""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from alma_cli import alma_run, read_outputs  # noqa: E402

TOL = 1e-4
# name, alpha, beta (None: the function takes none)
ACTS = [("Relu", None, None), ("Tanh", None, None), ("Sigmoid", None, None), ("Affine", 0.7, 0.1),
        ("LeakyRelu", 0.05, None), ("ThresholdedRelu", 0.2, None), ("ScaledTanh", 1.2, 0.8),
        ("HardSigmoid", 0.25, 0.45), ("Elu", 0.9, None), ("Softsign", None, None), ("Softplus", None, None)]
SQUASH = ["Sigmoid", "HardSigmoid", "Softsign"]  # gate functions ONNX Runtime's kernels accept as f


def conversions(alma):
    out = subprocess.run([alma, "list"], capture_output=True, text=True).stdout
    convs = ["EAGER"]
    for rt in ("DNNL", "XNNPACK", "BLAS"):
        if any(line.split()[1:2] == [rt] and "unavailable" not in line for line in out.splitlines()):
            convs.append(rt)
    return convs


def make_case(op, rng, direction="forward", layout=0, batch=2, seq=5, inp=7, hidden=16, bias=True, lens=False,
              init=False, peep=False, clip=None, input_forget=0, acts=None, lbr=0, weights_fed=False):
    nd = 2 if direction == "bidirectional" else 1
    G = 4 if op == "LSTM" else 3
    sc = 1.0 / np.sqrt(hidden)
    X = rng.standard_normal((seq, batch, inp)).astype(np.float32)
    inits = {
        "W": (rng.standard_normal((nd, G * hidden, inp)) * sc).astype(np.float32),
        "R": (rng.standard_normal((nd, G * hidden, hidden)) * sc).astype(np.float32),
    }
    feeds = {"X": X}
    if weights_fed:  # graph inputs, not constants: each run packs R itself (no copy kept)
        feeds.update(inits)
        inits = {}
    names = ["X", "W", "R"]
    if bias:
        inits["B"] = (rng.standard_normal((nd, 2 * G * hidden)) * 0.5).astype(np.float32)
    names.append("B" if bias else "")
    if lens:
        sl = rng.integers(1, seq + 1, size=batch).astype(np.int32)
        sl[0] = seq
        feeds["sequence_lens"] = sl
    names.append("sequence_lens" if lens else "")
    if init:
        feeds["initial_h"] = rng.standard_normal((nd, batch, hidden)).astype(np.float32)
    names.append("initial_h" if init else "")
    if op == "LSTM":
        if init:
            feeds["initial_c"] = rng.standard_normal((nd, batch, hidden)).astype(np.float32)
        names.append("initial_c" if init else "")
        if peep:
            inits["P"] = (rng.standard_normal((nd, 3 * hidden)) * 0.5).astype(np.float32)
        names.append("P" if peep else "")
    while names and names[-1] == "":
        names.pop()
    attrs = {"hidden_size": hidden, "direction": direction}
    if clip is not None:
        attrs["clip"] = clip
    if op == "LSTM" and input_forget:
        attrs["input_forget"] = input_forget
    if op == "GRU":
        attrs["linear_before_reset"] = lbr
    if acts:
        attrs["activations"] = [a[0] for a in acts]
        al = [a[1] for a in acts if a[1] is not None]
        be = [a[2] for a in acts if a[2] is not None]
        if al:
            attrs["activation_alpha"] = al
        if be:
            attrs["activation_beta"] = be
    return dict(op=op, layout=layout, feeds=feeds, inits=inits, names=names, attrs=attrs, nd=nd,
                dims=(seq, batch, hidden))


def build(case, layout):
    """The model of case in the given layout (feeds and outputs transposed to match)."""
    op, nd = case["op"], case["nd"]
    seq, batch, hidden = case["dims"]
    feeds = dict(case["feeds"])
    if layout:
        feeds["X"] = np.ascontiguousarray(feeds["X"].transpose(1, 0, 2))
        for k in ("initial_h", "initial_c"):
            if k in feeds:
                feeds[k] = np.ascontiguousarray(feeds[k].transpose(1, 0, 2))
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    attrs = dict(case["attrs"])
    opset = 14
    if layout:
        attrs["layout"] = 1
    node = helper.make_node(op, case["names"], outs, **attrs)
    vin = [helper.make_tensor_value_info(k, TensorProto.INT32 if k == "sequence_lens" else TensorProto.FLOAT,
                                         list(v.shape)) for k, v in feeds.items()]
    ydims = [batch, seq, nd, hidden] if layout else [seq, nd, batch, hidden]
    sdims = [batch, nd, hidden] if layout else [nd, batch, hidden]
    vout = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ydims)] + [
        helper.make_tensor_value_info(o, TensorProto.FLOAT, sdims) for o in outs[1:]]
    inits = [onnx.numpy_helper.from_array(v, k) for k, v in case["inits"].items()]
    g = helper.make_graph([node], "rnn", vin, vout, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m, feeds, outs


def ort_reference(case):
    """ONNX Runtime's outputs in the case's layout (computed in layout 0)."""
    m, feeds, outs = build(case, 0)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    res = sess.run(outs, feeds)
    if case["layout"]:
        res = [res[0].transpose(2, 0, 1, 3)] + [r.transpose(1, 0, 2) for r in res[1:]]
    return res


def cases(rng):
    out = []
    for op in ("LSTM", "GRU"):
        extra = [dict(lbr=0), dict(lbr=1)] if op == "GRU" else [dict(), dict(peep=True), dict(input_forget=1)]
        for d in ("forward", "reverse", "bidirectional"):
            for e in extra:
                out.append(make_case(op, rng, direction=d, **e))
        # batch 1 (decode-like), batch 20 (past the packed threshold), odd sizes for the vector tails
        out.append(make_case(op, rng, direction="bidirectional", batch=1, seq=9, inp=24, hidden=33, init=True))
        out.append(make_case(op, rng, direction="bidirectional", batch=20, seq=4, inp=5, hidden=12, lens=True,
                             init=True, **({"lbr": 1} if op == "GRU" else {"peep": True})))
        out.append(make_case(op, rng, direction="reverse", batch=3, seq=6, hidden=8, lens=True, bias=False))
        # W and R fed as inputs (packed per run, or not at all past the threshold); an input
        # projection of 120 rows x 600 (the packed kernel takes the rows in chunks)
        out.append(make_case(op, rng, direction="bidirectional", batch=3, seq=5, inp=11, hidden=20, init=True,
                             weights_fed=True))
        out.append(make_case(op, rng, direction="forward", batch=18, seq=3, inp=6, hidden=10, weights_fed=True))
        out.append(make_case(op, rng, direction="bidirectional", batch=3, seq=40, inp=600, hidden=24))
        out.append(make_case(op, rng, direction="bidirectional", layout=1, batch=3, seq=5, lens=True, init=True))
        out.append(make_case(op, rng, direction="forward", batch=2, seq=4, clip=0.7, init=True))
        out.append(make_case(op, rng, direction="bidirectional", batch=2, seq=3, hidden=1, inp=1))
        if op == "LSTM":  # R larger than a core's L2: each step split over the threads (by 16-unit panels)
            out.append(make_case(op, rng, direction="bidirectional", batch=3, seq=4, inp=9, hidden=528, lens=True,
                                 init=True, peep=True))
            out.append(make_case(op, rng, direction="forward", batch=1, seq=5, inp=3, hidden=544, clip=0.9,
                                 input_forget=1))
            out.append(make_case(op, rng, direction="reverse", layout=1, batch=2, seq=3, inp=4, hidden=528,
                                 weights_fed=True, init=True))
            # 4 MB of R a direction: on two threads with 2 MB of L2 a core, each thread's half fits,
            # so the directions run one after the other, each step split
            out.append(make_case(op, rng, direction="bidirectional", batch=1, seq=4, inp=5, hidden=512, init=True))
        # non-default activations (per direction lists, alpha/beta consumed in order)
        n_act = 3 if op == "LSTM" else 2
        for k in range(3):
            f = [a for a in ACTS if a[0] == SQUASH[k]][0]
            rest = [ACTS[(3 * k + j) % len(ACTS)] for j in range(n_act - 1)]
            acts = [f] + rest
            d = "bidirectional" if k == 1 else "forward"
            if d == "bidirectional":
                f2 = [a for a in ACTS if a[0] == SQUASH[(k + 1) % 3]][0]
                acts = acts + [f2] + [ACTS[(5 * k + j + 1) % len(ACTS)] for j in range(n_act - 1)]
            out.append(make_case(op, rng, direction=d, batch=2, seq=4, hidden=9, init=True, acts=acts,
                                 **({"lbr": k % 2} if op == "GRU" else {})))
        # seeded random mixes
        for _ in range(4):
            kw = dict(direction=["forward", "reverse", "bidirectional"][rng.integers(3)], layout=int(rng.integers(2)),
                      batch=int(rng.integers(1, 6)), seq=int(rng.integers(1, 8)), inp=int(rng.integers(1, 20)),
                      hidden=int(rng.integers(1, 40)), bias=bool(rng.integers(2)), lens=bool(rng.integers(2)),
                      init=bool(rng.integers(2)))
            if op == "LSTM":
                kw.update(peep=bool(rng.integers(2)), input_forget=int(rng.integers(2)))
            else:
                kw.update(lbr=int(rng.integers(2)))
            out.append(make_case(op, rng, **kw))
    return out


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    alma, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(22)
    convs = conversions(alma)
    print("conversions:", ", ".join(convs))
    bad = 0
    worst = 0.0
    for i, case in enumerate(cases(rng)):
        desc = f"{i:02d} {case['op']} " + " ".join(f"{k}={v}" for k, v in case["attrs"].items() if k != "activation_alpha"
                                                    and k != "activation_beta") + f" layout={case['layout']} " \
            f"S,B,H={case['dims']} inputs={','.join(n or '-' for n in case['names'])}"
        ref = ort_reference(case)
        m, feeds, outs = build(case, case["layout"])
        path = os.path.join(work, f"case{i:02d}.onnx")
        onnx.save(m, path)
        for conv in convs:
            cw = os.path.join(work, f"case{i:02d}_{conv}")
            try:
                alma_run(alma, path, conv, feeds, cw, "--threads", "2")
                got = read_outputs(cw, outs)
                for t in ("1", "3") if case["dims"][2] >= 512 else ():
                    alma_run(alma, path, conv, feeds, cw + "_t" + t, "--threads", t)
                    for nm, a, b in zip(outs, read_outputs(cw + "_t" + t, outs), got):
                        if a.shape != b.shape or a.tobytes() != b.tobytes():
                            print(f"FAIL {desc} {conv} {nm}: {t} and 2 threads differ "
                                  f"(max {float(np.max(np.abs(a - b))) if a.shape == b.shape else 'shape'})")
                            bad += 1
            except RuntimeError as e:
                print(f"FAIL {desc} {conv}: {e}")
                bad += 1
                continue
            for nm, g, r in zip(outs, got, ref):
                if g.shape != r.shape:
                    print(f"FAIL {desc} {conv} {nm}: shape {g.shape}, ONNX Runtime {r.shape}")
                    bad += 1
                    continue
                err = float(np.max(np.abs(g.astype(np.float64) - r))) / max(1.0, float(np.max(np.abs(r))))
                worst = max(worst, err)
                if not err <= TOL:
                    print(f"FAIL {desc} {conv} {nm}: error {err:.2e} > {TOL:.0e}")
                    bad += 1
        print(f"{'ok  ' if not bad else '    '}{desc}")
    print(f"worst error {worst:.2e}; {bad} failures")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
