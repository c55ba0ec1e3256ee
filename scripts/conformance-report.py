#!/usr/bin/env python3
"""Writes docs/conformance.md from alma_conformance runs (EAGER and every other conversion given).

usage: conformance-report.py RUNNER NODE_DIR KNOWN_FILE OUT.md [CONVERSION...]
Groups the ONNX node test cases by the operator they test (the op types of the case's model) and
lists, for the operators of opsets up to 22 and those of opsets 23-28, passes / unsupported
/ deviations. Sections of OUT.md other than the generated ones (hand-written notes) are kept, in
order, after the generated part.
"""
import collections
import os
import subprocess
import sys

import onnx

REQUIRED = """Abs Acos Add And ArgMax ArgMin Asin Atan AveragePool BatchNormalization Cast Ceil Clip Concat Constant
ConstantOfShape Conv ConvTranspose Cos CumSum DepthToSpace Div Dropout Einsum Elu Equal Erf Exp Expand
Flatten Floor Gather GatherElements GatherND Gelu Gemm GlobalAveragePool GlobalMaxPool Greater
GreaterOrEqual GRU HardSigmoid HardSwish Identity If InstanceNormalization LayerNormalization LeakyRelu
Less LessOrEqual Log LogSoftmax Loop LRN LSTM MatMul Max MaxPool Mean Min Mod Mul Neg NonZero Not Or Pad
Pow PRelu Range Reciprocal ReduceL2 ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd
ReduceSum ReduceSumSquare Relu Reshape Resize Round ScatterElements ScatterND Selu Shape Sigmoid Sign
Sin Size Slice Softmax Softplus Softsign SpaceToDepth Split Sqrt Squeeze Sub Sum Tan Tanh Tile TopK
Transpose Trilu Unsqueeze Where Xor QuantizeLinear DequantizeLinear DynamicQuantizeLinear QLinearConv
QLinearMatMul MatMulInteger ConvInteger""".split()
NEWER = """Attention RMSNormalization RotaryEmbedding Swish SwiGLU TensorScatter CumProd BitCast LinearAttention
CausalConvWithState""".split()
GENERATED = ("## Totals", "## Required operators (EAGER)", "## Operators of opsets 23-28 (EAGER)",
             "## Unsupported cases of required operators, and why", "## Other operators")


def kept_sections(path):
    """The sections of an existing page that this script does not write."""
    try:
        text = open(path).read()
    except OSError:
        return []
    out, cur = [], None
    for line in text.splitlines():
        if line.startswith("## "):
            cur = None if line.strip() in GENERATED else [line]
            if cur is not None:
                out.append(cur)
        elif cur is not None:
            cur.append(line)
    return out


def run(runner, node_dir, known, conv):
    out = subprocess.run([runner, "-v", "--conversion", conv, "--known", known, node_dir],
                         capture_output=True, text=True).stdout
    res, total = {}, ""
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2 and parts[0] in ("PASS", "FAIL", "UNSUPPORTED", "DEVIATION"):
            res[parts[1]] = (parts[0], parts[2][4:] if len(parts) > 2 else "")
        if line.startswith("conformance ("):
            total = line
    return res, total


def main():
    runner, node_dir, known, out_path = sys.argv[1:5]
    convs = ["EAGER"] + sys.argv[5:]
    runs = {c: run(runner, node_dir, known, c) for c in convs}
    case_op = {}
    for case in sorted(os.listdir(node_dir)):
        try:
            m = onnx.load(os.path.join(node_dir, case, "model.onnx"), load_external_data=False)
            ops = [n.op_type for n in m.graph.node]
            case_op[case] = ops[0] if len(set(ops)) == 1 or not case.endswith("_expanded") else ops[0]
            # A case tests the op named in its directory where possible.
            low = case[5:].replace("_", "").lower()
            for op in set(ops):
                if low.startswith(op.lower()):
                    case_op[case] = op
        except Exception:  # unreadable by this onnx version: group as unknown
            case_op[case] = "?"
    eager = runs["EAGER"][0]
    by_op = collections.defaultdict(lambda: collections.Counter())
    for case, (status, _) in eager.items():
        by_op[case_op.get(case, "?")][status] += 1
    lines = ["# ONNX conformance", "",
             "alma runs ONNX's backend node tests (`model.onnx` + `test_data_set_*/*.pb`, taken from the",
             "`onnx` 1.22 wheel by `scripts/fetch-onnx-tests.sh`: opsets up to 27) with ONNX's default",
             "tolerances (rtol 1e-3, atol 1e-7). Regenerate this page with:", "",
             "```sh",
             "python3 scripts/conformance-report.py build/tests/ops/alma_conformance ONNX_TESTS/node \\",
             "  tests/ops/known_deviations.txt docs/conformance.md " + " ".join(convs[1:]),
             "```", "", "## Totals", ""]
    for c in convs:
        lines.append("- `" + runs[c][1] + "`")
    lines += ["", "PASS: matched ONNX's outputs. UNSUPPORTED: alma rejects the model at load time with a reason",
              "(an op outside alma's list, a dtype alma does not hold: string, float8, int4, sequences...).",
              "DEVIATION: ONNX's expected data contradicts ONNX's spec (see tests/ops/known_deviations.txt).",
              "`tests/ops/expected_pass_eager.txt` pins every passing case as a regression guard.", "",
              "## Required operators (EAGER)", "",
              "| operator | cases | pass | unsupported | deviation | fail |", "|---|---|---|---|---|---|"]
    def table(ops):
        for op in ops:
            c = by_op.get(op, collections.Counter())
            n = sum(c.values())
            lines.append(f"| {op} | {n} | {c['PASS']} | {c['UNSUPPORTED']} | {c['DEVIATION']} | {c['FAIL']} |")
    table(REQUIRED)
    lines += ["", "## Operators of opsets 23-28 (EAGER)", "",
              "| operator | cases | pass | unsupported | deviation | fail |", "|---|---|---|---|---|---|"]
    table(NEWER)
    lines += ["", "## Unsupported cases of required operators, and why", ""]
    for case, (status, why) in sorted(eager.items()):
        if status == "UNSUPPORTED" and case_op.get(case) in REQUIRED:
            why = why.split("model.onnx': ", 1)[-1]
            lines.append(f"- `{case}`: {why[:200]}")
    lines += ["", "## Other operators", "",
              "Cases of operators outside the required list that pass anyway, and those alma reports",
              "unsupported, are counted in the totals above."]
    keep = kept_sections(out_path)
    for sec in keep:
        while sec and not sec[-1].strip():
            sec.pop()
        lines += [""] + sec
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
