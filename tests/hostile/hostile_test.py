"""Hostile inputs through the alma CLI: models built to crash, hang or slow the loader, names
built to drive a terminal or break JSON, and files that are not regular files (a FIFO, /dev/zero)
given as the model, as data and inside the build cache.

usage: hostile_test.py --list                 case names, one per line (CMake makes one test each)
       hostile_test.py ALMA DATADIR CASE...   run cases (DATADIR from make_hostile.py); exit 0 if all pass

Every alma run has a wall-clock limit, so a regression to a hang fails instead of blocking the
suite; CPU-time bounds are generous (10x and more above what the fixed code takes) so that they
catch a return to quadratic loading (76 s for the 100k chain before), not machine speed.
"""
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile

WALL_LIMIT = 60


def run(alma, args, cwd=None, env=None, limit=WALL_LIMIT):
    """(exit code, stdout bytes, stderr bytes, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    e = dict(os.environ, ALMA_LOG="warn", **(env or {}))
    try:
        p = subprocess.run([alma] + args, cwd=cwd, env=e, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=limit)
    except subprocess.TimeoutExpired:
        raise AssertionError("alma %s did not finish within %d s (a hang)" % (" ".join(args), limit))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode < 0 or p.returncode >= 128:
        raise AssertionError("alma %s died (exit %d): %s" % (" ".join(args), p.returncode, p.stderr.decode(errors="replace")[-2000:]))
    if b"runtime error:" in p.stderr or b"AddressSanitizer" in p.stderr:
        raise AssertionError("sanitizer report: %s" % p.stderr.decode(errors="replace")[-3000:])
    return p.returncode, p.stdout, p.stderr, cpu


def expect(alma, args, code, phrase=None, cpu_max=None, **kw):
    rc, out, err, cpu = run(alma, args, **kw)
    text = (out + err).decode(errors="replace")
    if rc != code:
        raise AssertionError("alma %s: exit %d, expected %d\n%s" % (" ".join(args), rc, code, text[-2000:]))
    if phrase and not re.search(phrase, text, re.I | re.S):
        raise AssertionError("alma %s: no /%s/ in\n%s" % (" ".join(args), phrase, text[-2000:]))
    if cpu_max is not None and cpu > cpu_max:
        raise AssertionError("alma %s took %.2f s of CPU, more than %g" % (" ".join(args), cpu, cpu_max))
    print("ok: alma %s -> exit %d%s" % (" ".join(args)[:120], rc, ", %.2f s CPU" % cpu if cpu_max else ""))
    return out, err


def no_control(data, what):
    """Terminal output: no ESC/CR/BEL/other C0 control bytes but LF and TAB, valid UTF-8."""
    bad = [b for b in set(data) if (b < 0x20 and b not in (0x0A, 0x09)) or b == 0x7F]
    if bad:
        raise AssertionError("%s holds control bytes %s:\n%r" % (what, sorted(bad), data[:600]))
    data.decode("utf-8")  # raises on invalid UTF-8


# ---- cases ------------------------------------------------------------------------------------


def c_nested_subgraphs(a, d, tmp):
    for cmd in ("info", "run"):
        expect(a, [cmd, d + "/nested_if_3000.onnx"], 3, r"nested more than 256 deep")
    expect(a, ["info", d + "/nested_if_100.onnx"], 3, r"nested more than 256 deep")
    expect(a, ["info", d + "/nested_if_64.onnx"], 3, r"subgraphs nested more than 64 deep")
    expect(a, ["info", d + "/nested_if_60.onnx"], 0, r"If\s+1")


def c_nested_types(a, d, tmp):
    expect(a, ["info", d + "/nested_seq_type_5000.onnx"], 3, r"nested more than 256 deep.*TypeProto")
    expect(a, ["info", d + "/nested_seq_type_40.onnx"], 3, r"nested sequences")


def c_chain_100k(a, d, tmp):
    expect(a, ["info", d + "/chain_100k.onnx"], 0, r"nodes\s+100000", cpu_max=10)
    expect(a, ["info", d + "/chain_100k_reversed.onnx"], 0, r"nodes\s+100000", cpu_max=10)
    expect(a, ["run", d + "/chain_100k.onnx", "--input", "x=" + d + "/x_4.npy"], 0,
           r"y: float32 \[4\]\s+min -4\s+max 3", cpu_max=20)


def c_wide_graphs(a, d, tmp):
    expect(a, ["info", d + "/split_100k.onnx"], 3, r"'split'.*too many", cpu_max=5)
    expect(a, ["info", d + "/many_values_50k.onnx"], 0, r"Add\s+50000", cpu_max=10)


def c_names_text(a, d, tmp):
    out, err = expect(a, ["info", d + "/hostile_names.onnx"], 0, r"x\\x1B\]0;owned\\x07\\x1B\[31mRED\\r\\nFAKE LINE")
    no_control(out + err, "alma info")
    if b"y\\xFF\\xFE\\xC3(\\x80" not in out:
        raise AssertionError("invalid UTF-8 name not shown as \\x escapes:\n%r" % out)
    out, err = expect(a, ["run", d + "/hostile_names.onnx"], 0, r"y\\xFF")
    no_control(out + err, "alma run")


def c_names_json(a, d, tmp):
    out, _ = expect(a, ["info", "--json", d + "/hostile_names.onnx"], 0)
    info = json.loads(out.decode("utf-8"))  # strict: invalid UTF-8 raises
    names = [i["name"] for i in info["inputs"]] + [o["name"] for o in info["outputs"]]
    if "x\x1b]0;owned\x07\x1b[31mRED\r\nFAKE LINE" not in names or "y\ufffd\ufffd\ufffd(\ufffd" not in names:
        raise AssertionError("names in alma info --json: %r" % names)
    j, c = os.path.join(tmp, "r.json"), os.path.join(tmp, "r.csv")
    out, err = expect(a, ["bench", d + "/hostile_names.onnx", "-c", "EAGER", "-n", "4", "--min-time", "0",
                          "--warmup", "1", "--warmup-time", "0", "--no-cache", "--json", j, "--csv", c], 0)
    no_control(out + err, "alma bench")
    with open(j, "rb") as f:
        r = json.loads(f.read().decode("utf-8"))
    ins = r.get("model", {}).get("inputs", [])
    if not any("RED\r\n" in i.get("name", "") for i in ins):
        raise AssertionError("bench JSON lost the input name: %r" % ins)
    with open(c, "rb") as f:
        f.read().decode("utf-8")


def c_fifo_model(a, d, tmp):
    fifo = os.path.join(tmp, "model.onnx")
    os.mkfifo(fifo)
    for cmd in (["info", fifo], ["run", fifo], ["bench", fifo, "-c", "EAGER", "--no-cache"]):
        expect(a, cmd, 3, r"model\.onnx' is a FIFO, not a regular file", limit=30)


def c_dev_zero_model(a, d, tmp):
    for cmd in (["info", "/dev/zero"], ["run", "/dev/zero"], ["bench", "/dev/zero", "-c", "EAGER", "--no-cache"]):
        expect(a, cmd, 3, r"/dev/zero' is a character device", limit=30, cpu_max=5)


def c_fifo_data(a, d, tmp):
    fifo = os.path.join(tmp, "x.npy")
    os.mkfifo(fifo)
    expect(a, ["run", d + "/chain_small.onnx", "--input", "x=" + fifo], 3, r"x\.npy' is a FIFO", limit=30)
    expect(a, ["run", d + "/chain_small.onnx", "--input", "x=/dev/zero"], 3, r"character device", limit=30)
    expect(a, ["bench", d + "/chain_small.onnx", "-c", "EAGER", "--no-cache", "--data", fifo], 3, r"x\.npy' is a FIFO",
           limit=30)
    idx = os.path.join(tmp, "images.idx3-ubyte")
    os.mkfifo(idx)
    expect(a, ["bench", d + "/chain_small.onnx", "-c", "EAGER", "--no-cache", "--data", idx], 3, r"is a FIFO", limit=30)


def c_fifo_cache(a, d, tmp):
    cache = os.path.join(tmp, "cache")
    args = ["bench", d + "/chain_small.onnx", "-c", "FOLD+EAGER", "-n", "4", "--min-time", "0", "--warmup", "1",
            "--warmup-time", "0", "--cache-dir", cache]
    expect(a, args, 0)
    builds = os.path.join(cache, "builds")
    entries = [os.path.join(builds, e) for e in os.listdir(builds)]
    if len(entries) != 1:
        raise AssertionError("expected one build in %s, found %r" % (builds, entries))
    b = entries[0]
    # each file alma reads or appends to in an entry, replaced by a FIFO nobody writes
    bench_dir = os.path.join(b, "bench")
    victims = [os.path.join(b, "build.log")] + [os.path.join(bench_dir, f) for f in os.listdir(bench_dir)
                                                if f.endswith(".json")] if os.path.isdir(bench_dir) else []
    victims = victims or [os.path.join(b, "build.log")]
    for v in victims:
        if os.path.exists(v):
            os.unlink(v)
        os.mkfifo(v)
    expect(a, args, 0, limit=60)
    expect(a, ["cache", "--cache-dir", cache, "list"], 0, limit=30)
    state = os.path.join(b, "state.json")
    os.unlink(state)
    os.mkfifo(state)
    rc, out, err, _ = run(a, args, limit=60)
    if rc not in (0, 1):
        raise AssertionError("bench with a FIFO state.json: exit %d\n%s" % (rc, (out + err).decode(errors="replace")))
    expect(a, ["cache", "--cache-dir", cache, "list"], 0, limit=30)
    print("ok: cache entry with FIFOs for state.json, build.log and bench records: no hang")


def c_huge_shapes(a, d, tmp):
    # element counts past 2^63 (and past 2^62 once multiplied by 4 bytes): refused, never UB
    for shape in ("9223372036854775807x2", "3037000500x3037000500", "4611686018427387904x1"):
        rc, out, err, _ = run(a, ["bench", d + "/symbolic.onnx", "-c", "EAGER", "--no-cache", "-n", "1", "--input",
                                  "x:" + shape])
        text = (out + err).decode(errors="replace")
        if rc not in (1, 2, 3) or not re.search(r"overflow|too large|does not fit", text):
            raise AssertionError("--input x:%s: exit %d\n%s" % (shape, rc, text[-1500:]))
        print("ok: --input x:%s refused (exit %d)" % (shape, rc))
    for f in ("huge_shape.npy", "huge_shape2.npy"):
        expect(a, ["run", d + "/symbolic.onnx", "--input", "x=" + d + "/" + f], 3, r"too large|overflow|shape|bytes")


CASES = {k[2:]: v for k, v in sorted(globals().items()) if k.startswith("c_")}


def main():
    if sys.argv[1:] == ["--list"]:
        print("\n".join(CASES))
        return 0
    alma, d, names = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3:]
    failed = 0
    for n in names:
        tmp = tempfile.mkdtemp(prefix="alma-hostile-")
        try:
            CASES[n](alma, d, tmp)
        except AssertionError as e:
            print("FAIL %s: %s" % (n, e))
            failed += 1
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
