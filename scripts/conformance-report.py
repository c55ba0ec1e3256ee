#!/usr/bin/env python3
"""Writes docs/conformance.md from alma_conformance runs (EAGER and every other conversion given).

usage: conformance-report.py RUNNER NODE_DIR KNOWN_FILE OUT.md [CONVERSION...]
Groups the ONNX node test cases by the operator they test (the op types of the case's model) and
lists, for the operators of opsets up to 22 and those of opsets 23-28, passes / unsupported
/ deviations. For each conversion it reads the CSV the runner writes (--csv: per case its result and
where its nodes ran) and tells apart the cases the conversion's runtime computed entirely from those
where some nodes fell back to EAGER's kernels. Sections of OUT.md other than the generated ones
(hand-written notes) are kept, in order, after the generated part.
"""
import collections
import concurrent.futures
import csv
import os
import subprocess
import sys
import tempfile

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
GENERATED = ("## Totals", "## What each runtime computes", "## Required operators on each runtime",
             "## Operators that fall back to EAGER", "## Required operators (EAGER)", "## Operators of opsets 23-28 (EAGER)",
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


def kept_totals(path):
    """The existing page's Totals items by conversion: [first line, continuation lines...]. A rerun
    conversion keeps its note (the text after the totals); one not rerun keeps its item."""
    try:
        text = open(path).read()
    except OSError:
        return {}
    items, cur, inside = {}, None, False
    for line in text.splitlines():
        if line.startswith("## "):
            inside = line.strip() == "## Totals"
            cur = None
        elif inside and line.startswith("- `conformance ("):
            cur = [line]
            items[line[len("- `conformance ("):].split(")", 1)[0]] = cur
        elif inside and cur is not None and line.startswith("  "):
            cur.append(line)
        else:
            cur = None
    return items


def run(runner, node_dir, known, conv):
    """The runner's verdicts {case: (status, why)}, its totals line, and its CSV rows {case: row}."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cases.csv")
        out = subprocess.run([runner, "-v", "--conversion", conv, "--known", known, "--csv", path, node_dir],
                             capture_output=True, text=True).stdout
        with open(path, newline="") as f:
            rows = {r["case"]: r for r in csv.DictReader(f)}
    res, total = {}, ""
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2 and parts[0] in ("PASS", "FAIL", "UNSUPPORTED", "DEVIATION"):
            res[parts[1]] = (parts[0], parts[2][4:] if len(parts) > 2 else "")
        if line.startswith("conformance ("):
            total = line
    return res, total, rows


def cpu_name():
    """The CPU's model name and its AVX-512 extensions that change kernels, from /proc/cpuinfo."""
    try:
        info = open("/proc/cpuinfo").read()
    except OSError:
        return "an unknown CPU"
    name = next((l.split(":", 1)[1].strip() for l in info.splitlines() if l.startswith("model name")), "an unknown CPU")
    flags = next((l.split(":", 1)[1].split() for l in info.splitlines() if l.startswith("flags")), [])
    isa = [label for flag, label in (("avx512f", "AVX-512"), ("avx512_vnni", "VNNI"), ("avx512_bf16", "BF16"))
           if flag in flags]
    return name + (" (" + ", ".join(isa) + ")" if isa else " (no AVX-512)")


def kind(r):
    """A passed case's placement: "own" (every node on the runtime), "choice" (the nodes on EAGER
    are there only by the runtime's choice, such as DNNL's tiny tensors), "declined"."""
    if r["placement"] != "fallback":
        return "own"
    reasons = {item.split(":", 1)[1].replace("(some runs)", "") for item in r["fallback_ops"].split()}
    return "choice" if reasons == {"choice"} else "declined"


def placement_sections(convs, runs, case_op):
    """Per conversion: passes whose every node ran on its runtime, passes with fallback; per
    required operator and node runtime, the same; the op types most often sent to EAGER."""
    lines = ["", "## What each runtime computes", "",
             "A declined node runs on EAGER's kernels, so a pass says little about a runtime by itself. The",
             "runner records, per case, where each node ran (the plan's placement, after the runs):",
             "`alma_conformance --csv FILE` writes it, one row per case. Placement can depend on the CPU",
             f"(oneDNN's bfloat16 primitives, for one); these were taken on {cpu_name()}.", "",
             "| conversion | cases | passed, every node on the runtime | passed, EAGER by the runtime's choice | passed, some nodes declined to EAGER | unsupported | deviation | failed |",
             "|---|---|---|---|---|---|---|---|"]
    for c in convs:
        rows = runs[c][2].values()
        n = collections.Counter(kind(r) if r["result"] == "PASS" else r["result"] for r in rows)
        lines.append(f"| {c} | {len(rows)} | {n['own']} | {n['choice']} | {n['declined']} | {n['UNSUPPORTED']} | "
                     f"{n['DEVIATION']} | {n['FAIL']} |")
    lines += ["", "Every node on the runtime: its own kernels, nodes folded into them, or the whole graph taken by a",
              "whole-graph runtime. EAGER by the runtime's choice: the nodes it left to EAGER's kernels are there",
              "because the runtime judged EAGER faster for them (DNNL sends elementwise, reduction and layout",
              "nodes of tensors this small to EAGER; `dnnl.tiny_eager=off` keeps them on oneDNN). Some nodes",
              "declined: the runtime has no kernel for them (an op type, an element type, an attribute, a shape)",
              "or refused them at run time, and EAGER's kernel computed them."]
    node_rts = [c for c in convs if any(r["runtime"] not in ("EAGER", "") for r in runs[c][2].values())]
    if not node_rts:
        return lines
    lines += ["", "## Required operators on each runtime", "",
              "Per operator: cases passed with every node on the runtime (+ those where the rest was EAGER by",
              "the runtime's choice) / cases passed.", "",
              "| operator | cases | " + " | ".join(node_rts) + " |", "|---|---|" + "---|" * len(node_rts)]
    for op in REQUIRED:
        cases = [k for k, o in case_op.items() if o == op]
        cells = []
        for c in node_rts:
            rows = [runs[c][2][k] for k in cases if k in runs[c][2]]
            passed = [r for r in rows if r["result"] == "PASS"]
            k = collections.Counter(kind(r) for r in passed)
            cells.append(f"{k['own']}" + (f" (+{k['choice']})" if k["choice"] else "") + f" / {len(passed)}")
        lines.append(f"| {op} | {len(cases)} | " + " | ".join(cells) + " |")
    lines += ["", "## Operators that fall back to EAGER", "",
              "Per runtime, the op types its passing cases ran on EAGER's kernels most often (cases, with why:",
              "`op` no kernel for the op type, `dtype` an element type, `attribute` an attribute or optional",
              "input/output, `shape` a rank or shape, `dynamic` what only the run showed, `library` the library",
              "refused it, `choice` EAGER's kernel chosen as faster there).", ""]
    for c in node_rts:
        fell = collections.Counter()
        for r in runs[c][2].values():
            if r["result"] == "PASS":
                for item in set(r["fallback_ops"].split()):
                    fell[item] += 1
        top = ", ".join(f"{k} {v}" for k, v in fell.most_common(20))
        lines.append(f"- {c}: {top if top else 'none'}")
    return lines


def main():
    runner, node_dir, known, out_path = sys.argv[1:5]
    convs = ["EAGER"] + sys.argv[5:]
    # two conversions at a time: each run is one process on one core
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {c: pool.submit(run, runner, node_dir, known, c) for c in convs}
        runs = {c: f.result() for c, f in futures.items()}
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
    old_totals = kept_totals(out_path)
    for c in convs:
        item = old_totals.pop(c, None)
        note = item[0].split("`", 2)[2] if item else ""
        lines.append("- `" + runs[c][1] + "`" + note)
        lines += item[1:] if item else []
    for item in old_totals.values():
        lines += item
    lines += ["", "PASS: matched ONNX's outputs. UNSUPPORTED: alma rejects the model at load time with a reason",
              "(an op outside alma's list, a dtype alma does not hold: float6, complex, maps...).",
              "DEVIATION: ONNX's expected data contradicts ONNX's spec (see tests/ops/known_deviations.txt).",
              "`tests/ops/expected_pass_eager.txt` pins every passing case as a regression guard."]
    lines += placement_sections(convs, runs, case_op)
    lines += ["", "## Required operators (EAGER)", "",
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
    n_before = len(lines)
    for case, (status, why) in sorted(eager.items()):
        if status == "UNSUPPORTED" and case_op.get(case) in REQUIRED:
            why = why.split("model.onnx': ", 1)[-1]
            lines.append(f"- `{case}`: {why[:200]}")
    if len(lines) == n_before:
        lines.append("None.")
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
