#!/usr/bin/env python3
"""Process handling of the alma CLI (docs/cli.md):

- no child process outlives an alma killed with SIGKILL, SIGTERM, SIGHUP or SIGINT, and the
  catchable ones end alma by that same signal;
- inputs that cannot fit the model, or options that contradict each other, are refused up front
  with the documented exit code (2 usage, 3 model or data);
- a signal without a special case is named (SIGUSR1), a timeout row carries the hung thread's
  backtrace;
- `alma run --timeout` ends a hanging model, `--memory-limit` (and the default limit) turn a
  runaway allocation into an error instead of a crash or the kernel's OOM killer;
- the build cache drops a stored graph whose outputs failed the check or whose use crashed.

usage: proc_test.py ALMA_BINARY BENCH_DATA_DIR
"""
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ALMA, DATA = sys.argv[1], sys.argv[2]
LINEAR = os.path.join(DATA, "linear.onnx")
FAST = ["--min-time", "0.02", "-n", "10", "--warmup", "2", "--warmup-time", "0"]
NO_LIMIT = os.environ.get("ALMA_TEST_NO_MEMORY_LIMIT") == "1"
failures = []


def fail(msg):
    print("FAIL:", msg)
    failures.append(msg)


def run(args, env=None, timeout=120):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([ALMA] + args, env=e, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def expect(code, args, text=None, env=None):
    rc, out, err = run(args, env)
    if rc != code:
        fail("exit %d, expected %d: alma %s\n%s" % (rc, code, " ".join(args), err[-2000:]))
    elif text and text not in out + err:
        fail("alma %s: output lacks %r\n%s" % (" ".join(args), text, (out + err)[-2000:]))
    return out + err


# ---- /proc ---------------------------------------------------------------------------------
def stat(pid):
    """(state, ppid, pgrp) of pid, None when gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return None
    rest = s[s.rindex(")") + 2:].split()
    return rest[0], int(rest[1]), int(rest[2])


def processes():
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = stat(int(d))
            if st:
                yield int(d), st


def alive(pid):
    st = stat(pid)
    return st is not None and st[0] not in "ZX"


def parent_kill(sig, tmp):
    """alma bench with a conversion hanging in its child; sig to alma; nothing of it may survive."""
    log = open(os.path.join(tmp, "kill-%d.log" % sig), "w+")
    env = dict(os.environ, ALMA_TEST_FAULT="hang")
    p = subprocess.Popen([ALMA, "bench", LINEAR, "-c", "EAGER", "--no-cache", "--timeout", "120"] + FAST,
                         env=env, stdout=log, stderr=log, start_new_session=True)
    seen, first, deadline = set(), {}, time.time() + 60
    hung = None
    while time.time() < deadline and hung is None and p.poll() is None:
        for pid, (state, ppid, _) in processes():
            if ppid == p.pid and state not in "ZX":
                seen.add(pid)
                first.setdefault(pid, time.time())
                if time.time() - first[pid] > 1.0:  # the probe is gone in well under that: the worker
                    hung = pid
        time.sleep(0.05)
    name = signal.Signals(sig).name
    if hung is None:
        p.kill()
        p.wait()
        log.seek(0)
        fail("%s: no hanging child appeared (alma exited %s)\n%s" % (name, p.returncode, log.read()[-2000:]))
        return
    groups = {pid for pid in seen}
    os.kill(p.pid, sig)
    try:
        rc = p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
        fail("%s: alma did not exit within 30 s" % name)
    if rc != -sig:
        log.seek(0)
        fail("%s: alma ended with %s, expected death by the signal (%d)\n%s" % (name, rc, -sig, log.read()[-2000:]))
    survivors = set()
    end = time.time() + 10
    while time.time() < end:
        survivors = {pid for pid, (state, _, pgrp) in processes()
                     if state not in "ZX" and (pid in seen or pgrp in groups)}
        if not survivors:
            break
        time.sleep(0.05)
    if survivors:
        fail("%s: child process(es) %s outlived alma" % (name, sorted(survivors)))
        for pid in survivors:  # clean up what this test started
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    if sig != signal.SIGKILL:
        log.seek(0)
        text = log.read()
        if "interrupted by " + name not in text:
            fail("%s: alma did not say it was interrupted\n%s" % (name, text[-2000:]))


# ---- models --------------------------------------------------------------------------------
def save(g, path, opset=13):
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="alma-tests")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def endless_loop(path):
    """A Loop whose trip count is 2^62: one inference never ends."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["v_in", "one"], ["v_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1])],
        [numpy_helper.from_array(np.array([1.0], np.float32), "one")])
    g = helper.make_graph(
        [helper.make_node("Loop", ["M", "cond", "x"], ["y"], body=body)], "endless",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [numpy_helper.from_array(np.array(1 << 62, np.int64), "M"),
         numpy_helper.from_array(np.array(True), "cond")])
    save(g, path)


def matmul(path):
    """A 64x512 by 512x512 MatMul: big enough for the BLAS runtime to call OpenBLAS's sgemm."""
    w = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])], "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 512])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 512])],
        [numpy_helper.from_array(w, "W")])
    save(g, path)


def huge_output(path):
    """ConstantOfShape of 2^40 floats (4 TiB): more than any machine's memory."""
    g = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["shape"], ["big"],
                          value=numpy_helper.from_array(np.array([1.0], np.float32))),
         helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0)],
        "huge",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(np.array([1 << 20, 1 << 20], np.int64), "shape")])
    save(g, path)


# ---- the cache -----------------------------------------------------------------------------
def bench_json(args, path, env=None):
    rc, out, err = run(args + ["--json", path], env)
    try:
        with open(path) as f:
            return rc, json.load(f)["results"][0], out + err
    except (OSError, ValueError, KeyError, IndexError) as e:
        fail("alma %s: no result (%s, exit %d)\n%s" % (" ".join(args), e, rc, err[-2000:]))
        return rc, None, out + err


def cache_checks(tmp):
    cdir = os.path.join(tmp, "cache")
    args = ["bench", LINEAR, "-c", "FOLD+EAGER", "--cache-dir", cdir] + FAST
    j = os.path.join(tmp, "c.json")
    rc, r, _ = bench_json(args, j)
    if r is None:
        return
    if rc != 0 or r["cache"]["status"] != "built":
        fail("first cached run: exit %d, cache %s" % (rc, r["cache"]))
        return
    bdir = r["cache"]["dir"]
    graph, state_path = os.path.join(bdir, "graph.onnx"), os.path.join(bdir, "state.json")

    # A replaced graph with its checksum updated in the state: used once, fails the check, dropped.
    m = onnx.load(graph)
    for init in m.graph.initializer:
        if init.name == "W":
            w = numpy_helper.to_array(init) * 3
            init.CopyFrom(numpy_helper.from_array(w.astype(np.float32), "W"))
    onnx.save(m, graph)
    data = open(graph, "rb").read()
    with open(state_path) as f:
        state = json.load(f)
    state["graph"]["bytes"] = len(data)
    state["graph"]["sha256"] = hashlib.sha256(data).hexdigest()
    with open(state_path, "w") as f:
        json.dump(state, f)
    rc, r, text = bench_json(args, j)
    if r is None:
        return
    if r["cache"]["status"] != "hit" or r["check"]["passed"]:
        fail("replaced graph: exit %d, cache %s, check %s" % (rc, r["cache"], r.get("check")))
    if not any("dropped" in w for w in r["warnings"]):
        fail("replaced graph: no warning that it was dropped: %s" % r["warnings"])
    rc, r, _ = bench_json(args, j)
    if r is None:
        return
    if rc != 0 or r["cache"]["status"] != "built" or "output check failed" not in (r["cache"]["reason"] or ""):
        fail("after a failed check: exit %d, cache %s (expected a rebuild saying why)" % (rc, r["cache"]))

    # A crash while using the stored graph quarantines it: the next run rebuilds.
    rc, r, _ = bench_json(args, j, env={"ALMA_TEST_FAULT": "segv"})
    if r is None:
        return
    if rc != 1 or r["cache"]["status"] != "hit" or "SIGSEGV" not in (r["error"] or ""):
        fail("crash on a hit: exit %d, cache %s, error %s" % (rc, r["cache"], r["error"]))
    rc, r, _ = bench_json(args, j)
    if r is None:
        return
    if rc != 0 or r["cache"]["status"] != "built" or "quarantined" not in (r["cache"]["reason"] or ""):
        fail("after a crash on a hit: exit %d, cache %s (expected a rebuild saying why)" % (rc, r["cache"]))


def main():
    with tempfile.TemporaryDirectory(prefix="alma-proc-test-") as tmp:
        for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            parent_kill(sig, tmp)

        # refused up front: data that cannot fit the model (3), contradictory options (2)
        b = ["bench", LINEAR, "-c", "EAGER", "--no-cache"] + FAST
        expect(3, b + ["--input", "x:3x17"], "does not fit the model's input")
        expect(3, b + ["--input", "x:3x16x1"], "does not fit the model's input")
        expect(3, b + ["--input", "x:3x16:int64"], "dtype int64, but the model's input is float32")
        expect(3, b + ["--input", "x:0x16"], "a batch of 0 samples")
        expect(2, b + ["--input", "x:3x16", "--input", "x:2x16"], "given twice")
        x = os.path.join(DATA, "x.npy")
        expect(3, b + ["--data", x + "," + x], "2 file(s) given for a model with 1 input")
        expect(2, b + ["--json", "-", "--csv", "-"], "both write to standard output")
        expect(2, b + ["--instances", "1", "--workers", "100000"], "sessions, each a thread")

        # a signal with no special case is named; a timeout row has the hung thread's backtrace
        out = expect(1, b + ["--json", "-", "-q"], env={"ALMA_TEST_FAULT": "usr1"})
        if "SIGUSR1" not in out:
            fail("usr1 fault: the error does not name SIGUSR1\n" + out[-2000:])
        jt = os.path.join(tmp, "t.json")
        rc, r, _ = bench_json(b[:-len(FAST)] + FAST + ["--timeout", "2"], jt, env={"ALMA_TEST_FAULT": "hang"})
        if r is not None:
            tb = r.get("traceback") or ""
            if rc != 1 or "timed out" not in (r["error"] or "") or "timeout expired" not in tb or \
               "native backtrace" not in tb:
                fail("timeout: exit %d, error %s, traceback:\n%s" % (rc, r["error"], tb[-2000:]))

        # alma run: a hanging model ends at --timeout; a runaway allocation is an error
        loop, huge = os.path.join(tmp, "loop.onnx"), os.path.join(tmp, "huge.onnx")
        endless_loop(loop)
        huge_output(huge)
        t0 = time.time()
        expect(1, ["run", loop, "--timeout", "2"], "timed out after 2 s")
        if time.time() - t0 > 30:
            fail("alma run --timeout 2 took %.0f s" % (time.time() - t0))
        expect(2, ["run", loop, "--timeout", "x"], "--timeout takes seconds")
        if NO_LIMIT:
            print("SKIP: memory limits (sanitizer build: RLIMIT_AS cannot apply)")
        else:
            expect(1, ["run", huge, "--memory-limit", "512"], "out of memory")
            expect(1, ["run", huge], "out of memory")  # the default limit: the machine's memory
            # OpenBLAS retries a failed mmap for ever: a limit too tight for its buffers must be an
            # out-of-memory error, not a hang until the timeout
            if subprocess.run([ALMA, "list", "FOLD+BLAS"], capture_output=True).returncode == 0:
                mm = os.path.join(tmp, "mm.onnx")
                matmul(mm)
                t0 = time.time()
                out = expect(1, ["bench", mm, "-c", "FOLD+BLAS", "--no-cache"] + FAST + ["--memory-limit", "400", "--timeout", "60"],
                             "ERR_NOMEM")
                if "ERR_TIMEOUT" in out or time.time() - t0 > 45:
                    fail("FOLD+BLAS under --memory-limit 400: a hang, not an error\n" + out[-2000:])
            else:
                print("SKIP: FOLD+BLAS is not available here")
            # a limit below what the conversion's process starts with: an error row naming the
            # figures, not a SIGSEGV in the loader (the stack could not grow)
            out = expect(1, ["bench", huge, "-c", "EAGER", "--no-cache"] + FAST + ["--memory-limit", "20"],
                         "below what the conversion's process starts with")
            if "SIGSEGV" in out:
                fail("--memory-limit 20: a crash, not an error\n" + out[-2000:])
            expect(1, ["run", huge, "--memory-limit", "20"], "below what the conversion's process starts with")

        cache_checks(tmp)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
