"""Bad-input tests through the alma CLI: each case runs `alma info` or `alma run` on a fixture from
make_bad_models.py and checks the exit code and a key phrase of the message.

usage: e2e.py --list                     case names, one per line (CMake makes one test each)
       e2e.py ALMA DATADIR CASE...       run cases; exit 0 when all pass

A case fails when alma is killed by a signal, exits with a code >= 128, prints a sanitizer report,
or exits 0 where an error was expected (or non-zero where success was), or when the expected phrase
is missing from its output. Cases marked `error` accept any exit code in 1..127 but the phrase must
be there: the message, not the number, is what the user reads.
"""
import os
import re
import subprocess
import sys
import tempfile

ERR = "error"  # any exit in 1..127
# name: (argv after `alma`, expected exit (0, ERR or a number), phrase in stderr+stdout (regex, case-insensitive))
CASES = {
    # files that are not models
    "missing_file": (["info", "{d}/no_such_model.onnx"], 3, r"cannot open.*no_such_model\.onnx"),
    "directory": (["info", "{d}"], ERR, r"director|cannot|read"),
    "empty_file": (["info", "{d}/empty.onnx"], 3, r"empty"),
    "random_bytes": (["info", "{d}/random.onnx"], 3, r"not a valid ONNX model|not an ONNX model"),
    "text_file": (["info", "{d}/text.onnx"], 3, r"not a valid ONNX model|not an ONNX model"),
    "truncated": (["info", "{d}/truncated.onnx"], 3, r"truncated|corrupt"),
    "truncated_tail": (["run", "{d}/truncated_tail.onnx"], 3, r"truncated|corrupt"),
    "tensorproto": (["info", "{d}/tensorproto.onnx"], 3, r"not a valid ONNX model|not an ONNX model"),
    "graphproto": (["info", "{d}/graphproto.onnx"], 3, r"not a valid ONNX model|not an ONNX model"),
    "nodeproto": (["run", "{d}/nodeproto.onnx"], 3, r"not a valid ONNX model|not an ONNX model"),
    # graphs alma must refuse when loading, naming the node / op / opset
    "unknown_op": (["info", "{d}/unknown_op.onnx"], 3, r"FrobnicateXYZ.*frob|frob.*FrobnicateXYZ"),
    "unknown_op_run": (["run", "{d}/unknown_op.onnx"], 3, r"operator FrobnicateXYZ.*opset 13"),
    "custom_domain": (["info", "{d}/custom_domain.onnx"], 3, r"com\.example"),
    "cycle": (["info", "{d}/cycle.onnx"], 3, r"cycle"),
    "dangling_input": (["info", "{d}/dangling.onnx"], 3, r"nowhere"),
    "duplicate_output": (["info", "{d}/dup_output.onnx"], 3, r"'y'.*already defined|defined twice"),
    "no_onnx_opset": (["info", "{d}/no_opset.onnx"], 3, r"opset"),
    "bad_transpose_perm": (["info", "{d}/bad_perm.onnx"], ERR, r"'tp'.*perm"),
    "bad_reshape": (["info", "{d}/bad_reshape.onnx"], 3, r"'rs'.*reshape"),
    "string_input": (["bench", "{d}/string_input.onnx", "-c", "EAGER"], 3, r"input 'x' is a string tensor"),
    "string_input_info": (["info", "{d}/string_input.onnx"], 0, r"x\s+string\s+\[2\]"),
    "short_initializer": (["info", "{d}/short_initializer.onnx"], 3, r"'w'.*raw_data"),
    # out-of-range indices: constant ones fail at load, input ones at run time; Slice clamps (spec)
    "gather_oob_const": (["info", "{d}/gather_oob_const.onnx"], ERR, r"gather_const.*out of range"),
    "gather_oob_input": (["run", "{d}/gather_input.onnx", "--input", "idx={d}/idx_oob.npy"], ERR,
                         r"gather_in.*index 99.*out of range"),
    "gather_oob_negative": (["run", "{d}/gather_input.onnx", "--input", "idx={d}/idx_oob_neg.npy"], ERR,
                            r"index -5.*out of range"),
    "gather_ok": (["run", "{d}/gather_input.onnx", "--input", "idx={d}/idx_ok.npy"], 0,
                  r"y: float32 \[3,3\]\s+min 0\s+max 11"),
    "gather_elements_oob": (["run", "{d}/gather_elements_input.onnx", "--input", "idx={d}/ge_oob.npy"], ERR,
                            r"'ge'.*out of range"),
    "slice_clamped": (["run", "{d}/slice_clamp.onnx"], 0, r"y: float32 \[4,5\]"),
    "slice_clamped_neg_step": (["run", "{d}/slice_clamp_neg_step.onnx"], 0, r"y: float32 \[4,3\]"),
    "slice_step_zero": (["info", "{d}/slice_step0.onnx"], ERR, r"'slice'.*step"),
    "slice_bad_axis": (["info", "{d}/slice_bad_axis.onnx"], ERR, r"'slice'.*axis 5"),
    "slice_duplicate_axis": (["info", "{d}/slice_dup_axis.onnx"], ERR, r"'slice'.*axis"),
    # external data
    "external_missing": (["info", "{d}/ext_missing.onnx"], 3, r"no_such_weights\.bin"),
    "external_too_short": (["info", "{d}/ext_short.onnx"], 3, r"short_weights\.bin.*too short"),
    "external_offset_past_end": (["info", "{d}/ext_offset.onnx"], 3, r"full_weights\.bin.*(too short|offset)"),
    "external_bad_length": (["info", "{d}/ext_bad_length.onnx"], 3, r"length"),
    "external_escapes_dir": (["info", "{d}/ext_escape.onnx"], 3, r"relative path inside"),
    "external_absolute": (["info", "{d}/ext_absolute.onnx"], 3, r"relative path inside"),
    "external_ok": (["run", "{d}/ext_ok.onnx"], 0, r"y: float32 \[256\]"),
    "external_link_out": (["run", "{d}/ext_link_file.onnx"], 3, r"link_out\.bin.*outside the model's directory"),
    "external_link_dir": (["run", "{d}/ext_link_dir.onnx"], 3, r"link_dir/secret\.bin.*outside the model's directory"),
    "external_link_root": (["run", "{d}/ext_link_root.onnx"], 3, r"link_root/etc/passwd.*outside the model's directory"),
    "external_link_inside": (["run", "{d}/ext_link_inside.onnx"], 0, r"y: float32 \[256\]"),
    "external_fifo": (["info", "{d}/ext_fifo.onnx"], 3, r"fifo_weights\.bin.*not a regular file"),
    "external_directory": (["info", "{d}/ext_directory.onnx"], 3, r"weights_dir.*not a regular file"),
    # inputs given to `alma run`
    "run_int8_static_dynamic_dims": (["run", "{d}/dyn_conv.onnx", "-c", "FOLD+INT8_STATIC+EAGER", "--input",
                                      "x={d}/dyn_conv_x.npy"], 0, r"y: int8|y: float32 \[1,4,6,6\]"),
    "wrong_input_name": (["run", "{d}/good.onnx", "--input", "nope={d}/x_ok.npy"], 3,
                         r"no input 'nope'.*inputs are: 'x'"),
    "wrong_input_dtype": (["run", "{d}/good.onnx", "--input", "x={d}/x_f64.npy"], 3,
                          r"'x' is float32.*float64"),
    "wrong_input_int_dtype": (["run", "{d}/good.onnx", "--input", "x={d}/x_i64.npy"], 3, r"float32.*int64"),
    "wrong_input_shape": (["run", "{d}/good.onnx", "--input", "x={d}/x_badshape.npy"], 3,
                          r"'x' has shape \[batch,4\].*\[2,5\]"),
    "wrong_input_rank": (["run", "{d}/good.onnx", "--input", "x={d}/x_badrank.npy"], 3, r"\[2,4,1\]"),
    "corrupt_input_npy": (["run", "{d}/good.onnx", "--input", "x={d}/x_corrupt.npy"], 3,
                          r"x_corrupt\.npy.*missing key 'fortran_order'"),
    "missing_input_npy": (["run", "{d}/good.onnx", "--input", "x={d}/nothing.npy"], 3, r"cannot open.*nothing\.npy"),
    "input_is_a_model": (["run", "{d}/good.onnx", "--input", "x={d}/good.onnx"], 3, r"not a \.npy file"),
    "input_given_twice": (["run", "{d}/good.onnx", "-i", "x={d}/x_ok.npy", "-i", "x={d}/x_ok.npy"], ERR, r"twice"),
    "batch_conflict": (["run", "{d}/shared_batch.onnx", "-i", "a={d}/a2.npy", "-i", "b={d}/b3.npy"], ERR,
                       r"batch"),
    "huge_input": (["run", "{d}/huge_input.onnx"], ERR, r"too large|memory"),
    "good_run": (["run", "{d}/good.onnx", "--input", "x={d}/x_ok.npy"], 0, r"y: float32 \[2,4\]"),
    "good_random_batch": (["run", "{d}/good.onnx", "--batch-size", "5", "--seed", "7"], 0,
                          r"x: float32 \[5,4\] from random data"),
    "output_dir_is_file": (["run", "{d}/good.onnx", "-o", "{d}/not_a_dir"], ERR, r"not_a_dir.*not a directory"),
    "output_names_sanitized": (["run", "{d}/odd_names.onnx", "-o", "{t}/out"], 0,
                               r"wrote .*/out/out_relu_0\.npy.*wrote .*/out/out_relu_0_1\.npy"),
    "unknown_conversion": (["run", "{d}/good.onnx", "--conversion", "NO_SUCH_RUNTIME"], ERR, r"NO_SUCH_RUNTIME"),
    "info_domains": (["info", "{d}/domains.onnx"], 0, r"opset +17 +\(also ai\.onnx\.ml 3, com\.microsoft 1\)"),
    "info_domains_json": (["info", "--json", "{d}/domains.onnx"], 0,
                          r'"opset_imports":\s*\{\s*"ai\.onnx":\s*17,\s*"ai\.onnx\.ml":\s*3,\s*"com\.microsoft":\s*1'),
    "future_opset_warns": (["info", "{d}/future_opset.onnx"], 0, r"opset 99"),
    # command-line usage
    "version_build_id": (["version"], 0, r"^alma \d+\.\d+\.\d+ \(build [0-9a-f]{16}\)"),
    "run_no_model": (["run"], 2, r"usage"),
    "run_bad_input_syntax": (["run", "{d}/good.onnx", "--input", "x"], 2, r"NAME=FILE"),
    "run_bad_batch": (["run", "{d}/good.onnx", "--batch-size", "0"], 2, r"batch-size"),
    "info_two_models": (["info", "{d}/good.onnx", "{d}/good.onnx"], 2, r"exactly one"),
    "info_unknown_option": (["info", "--frobnicate", "{d}/good.onnx"], 2, r"usage"),
}

SANITIZER = re.compile(r"==[0-9]+==ERROR: |SUMMARY: [A-Za-z]+Sanitizer|runtime error:")


def run_case(alma, d, name):
    argv, expect, phrase = CASES[name]
    with tempfile.TemporaryDirectory(prefix="alma-e2e-") as t:
        args = [alma] + [a.format(d=d, t=t) for a in argv]
        try:
            p = subprocess.run(args, capture_output=True, text=True, errors="replace", timeout=120)
        except subprocess.TimeoutExpired:
            return f"timed out: {' '.join(args)}"
        out = p.stdout + p.stderr
        rc = p.returncode
        why = None
        if rc < 0 or rc >= 128:
            why = f"killed by signal / crashed (exit {rc})"
        elif SANITIZER.search(out):
            why = "sanitizer report"
        elif expect == ERR and rc == 0:
            why = "exit 0, expected an error"
        elif expect != ERR and rc != expect:
            why = f"exit {rc}, expected {expect}"
        elif not re.search(phrase, out, re.I | re.S):
            why = f"output lacks /{phrase}/"
        if why:
            return f"{why}\n  $ {' '.join(args)}\n" + "".join(f"  | {line}\n" for line in out.splitlines()[-20:])
    return None


def main():
    if sys.argv[1:] == ["--list"]:
        print("\n".join(CASES))
        return 0
    alma, d, names = sys.argv[1], sys.argv[2], sys.argv[3:] or list(CASES)
    failed = 0
    for n in names:
        err = run_case(alma, os.path.abspath(d), n)
        print(f"{'FAIL' if err else 'ok  '} {n}" + (f": {err}" if err else ""))
        failed += bool(err)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
