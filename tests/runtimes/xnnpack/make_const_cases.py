#!/usr/bin/env python3
"""Variants of the ONNX node tests whose inputs after the first are initializers.

ONNX's node tests feed weights (Conv's W, Gemm's B, PRelu's slope, Clip's bounds...) as graph
inputs, so a runtime that takes only constant weights (XNNPACK) never sees those ops there. Each
variant keeps input 0 as the graph input, turns the other inputs into initializers holding the
values of test_data_set_0, and keeps that data set's expected outputs: the same check, with
constant weights.

usage: make_const_cases.py NODE_TESTS_DIR OUT_DIR [--skip FILE] [GLOB...]
Writes OUT_DIR/<case>_const/{model.onnx,test_data_set_0/...} for every case with two or more
tensor inputs whose name matches a GLOB (default: all), except the cases named in FILE (first word
of each line, # comments; e.g. tests/ops/known_deviations.txt); prints how many it wrote."""
import fnmatch
import os
import shutil
import sys

import onnx


def convert(case_dir, out_root):
    name = os.path.basename(case_dir.rstrip("/"))
    ds = os.path.join(case_dir, "test_data_set_0")
    if not os.path.isdir(ds):
        return False
    try:
        model = onnx.load(os.path.join(case_dir, "model.onnx"))
    except Exception:
        return False
    g = model.graph
    inits = {i.name for i in g.initializer}
    fed = [i for i in g.input if i.name not in inits]
    if len(fed) < 2:
        return False
    values = []
    for k in range(len(fed)):
        p = os.path.join(ds, "input_%d.pb" % k)
        if not os.path.exists(p):
            return False
        t = onnx.TensorProto()
        with open(p, "rb") as f:
            t.ParseFromString(f.read())
        values.append(t)
    for k in range(1, len(fed)):
        if not fed[k].type.HasField("tensor_type"):
            return False  # sequences, optionals
        want = fed[k].type.tensor_type.elem_type
        if values[k].data_type != want:
            # ONNX stores bfloat16 test data as uint16 (same bits)
            if values[k].data_type == onnx.TensorProto.UINT16 and want == onnx.TensorProto.BFLOAT16:
                values[k].data_type = want
            else:
                return False
        if values[k].data_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED):
            return False
    keep = fed[0].name
    for k in range(1, len(fed)):
        t = values[k]
        t.name = fed[k].name
        g.initializer.append(t)
    kept = [i for i in g.input if i.name == keep or i.name in inits]
    del g.input[:]
    g.input.extend(kept)
    if model.ir_version < 4:
        # before IR 4 every initializer had to be listed as an input too
        model.ir_version = 4
    out = os.path.join(out_root, name + "_const")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "test_data_set_0"))
    onnx.save(model, os.path.join(out, "model.onnx"))
    shutil.copy(os.path.join(ds, "input_0.pb"), os.path.join(out, "test_data_set_0", "input_0.pb"))
    for f in os.listdir(ds):
        if f.startswith("output_"):
            shutil.copy(os.path.join(ds, f), os.path.join(out, "test_data_set_0", f))
    return True


def main():
    args = sys.argv[1:]
    skip = set()
    if "--skip" in args:
        k = args.index("--skip")
        with open(args[k + 1]) as f:
            skip = {ln.split()[0] for ln in f if ln.strip() and not ln.startswith("#")}
        del args[k:k + 2]
    if len(args) < 2:
        sys.exit(__doc__)
    src, dst, globs = args[0], args[1], args[2:] or ["*"]
    os.makedirs(dst, exist_ok=True)
    n = 0
    for case in sorted(os.listdir(src)):
        if case in skip or not any(fnmatch.fnmatch(case, g) for g in globs):
            continue
        if os.path.isdir(os.path.join(src, case)) and convert(os.path.join(src, case), dst):
            n += 1
    print("make_const_cases: %d cases with constant inputs in %s" % (n, dst))


if __name__ == "__main__":
    main()
