"""alma compare end to end: verdicts and exit codes on synthetic results files whose samples are
known, then two real alma bench runs compared.

usage: compare_test.py ALMA_BINARY MODEL.onnx
"""
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile

ALMA, MODEL = sys.argv[1], sys.argv[2]
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def run(*args):
    p = subprocess.run([ALMA, "compare", *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def median(xs):
    s = sorted(xs)
    n = len(s)
    if not n:
        return None
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def row(conv, samples, batch=1, raw=True, status="ok", threads=2):
    s = sorted(samples)
    n = len(s)
    r = {"id": None, "conversion": conv, "status": status, "batch_size": batch, "threads": threads,
         "latency_ms": {"p50": median(samples), "n": n,
                        # ranks 40 and 61 (1-based) for n = 100, as docs/json.md states
                        "median_ci95": [s[39], s[60]] if n == 100 else None},
         "error": None if status == "ok" else "ERR_CRASH: crashed"}
    if raw:
        r["raw_ms"] = list(samples)
    if status != "ok":
        r["latency_ms"] = None
        r.pop("raw_ms", None)
    return r


def doc(rows, cpu="Intel(R) Xeon(R) Platinum 8480+", isa=("avx2", "avx512f"), version="0.1.0", model_hash="ab" * 32):
    return {"alma_version": version, "schema_version": 2,
            "system": {"cpu_model": cpu, "isa": list(isa), "libraries": {"alma": version}},
            "model": {"hash": model_hash}, "config": {}, "results": rows, "unavailable": None}


def gauss(seed, mean, sd, n=100):
    g = random.Random(seed)
    return [max(0.01, g.gauss(mean, sd)) for _ in range(n)]


tmp = tempfile.mkdtemp(prefix="alma-compare-test-")


def write(name, d):
    p = os.path.join(tmp, name)
    with open(p, "w") as f:
        f.write(d if isinstance(d, str) else json.dumps(d))
    return p


def compared_rows(path):
    with open(path) as f:
        j = json.load(f)
    return j, {(r["conversion"], r["batch_size"]): r for r in j["comparisons"][0]["rows"]}


# --- identical runs: no significant change, exit 0 even with a gate
base_s = gauss(1, 10.0, 0.5)
base = write("base.json", doc([row("EAGER", base_s), row("FOLD+EAGER", gauss(2, 5.0, 0.3))]))
rc, out, err = run(base, base, "--fail-above", "5%", "--json", os.path.join(tmp, "same.json"))
check(rc == 0, f"identical files: exit {rc} ({err})")
j, rows = compared_rows(os.path.join(tmp, "same.json"))
check(all(r["verdict"] == "no significant change" and r["method"] == "bootstrap" for r in rows.values()),
      f"identical files: verdicts {rows}")
check(all(r["ratio"] == 1 and r["ratio_ci95"][0] <= 1 <= r["ratio_ci95"][1] for r in rows.values()),
      "identical files: ratio 1 inside its interval")
check(j["regression"] is False and j["resamples"] >= 2000, "identical files: regression false, resamples")
check("PASS" in out, "identical files: PASS line")

# --- a 20% slowdown with little noise: slower, and the gate fails (exit 1); without the gate exit 0
slow = write("slow.json", doc([row("EAGER", [x * 1.2 for x in gauss(3, 10.0, 0.5)]),
                               row("FOLD+EAGER", gauss(4, 5.0, 0.3))]))
rc, out, err = run(base, slow, "--fail-above", "5%", "--json", "-")
check(rc == 1, f"20% slower: exit {rc}, expected 1 ({err})")
j = json.loads(out)
rows = {(r["conversion"], r["batch_size"]): r for r in j["comparisons"][0]["rows"]}
e = rows[("EAGER", 1)]
check(e["verdict"] == "slower" and e["fails_gate"] and e["ratio_ci95"][0] > 1.05 and 1.15 < e["ratio"] < 1.25,
      f"20% slower: EAGER row {e}")
check(rows[("FOLD+EAGER", 1)]["verdict"] == "no significant change" and not rows[("FOLD+EAGER", 1)]["fails_gate"],
      "20% slower: the unchanged row is not flagged")
check("FAIL" in err and "slower (+" in err, "20% slower: the table (on stderr with --json -) says slower and FAIL")
rc, out, err = run(base, slow)
check(rc == 0 and "slower" in out, f"20% slower without --fail-above: exit {rc}, reported")
# the same slowdown under a 30% threshold passes: the gate needs the interval's lower bound above it
rc, out, err = run(base, slow, "--fail-above", "30")
check(rc == 0, f"20% slower with --fail-above 30: exit {rc}")

# --- faster
fast = write("fast.json", doc([row("EAGER", [x * 0.8 for x in gauss(5, 10.0, 0.5)]),
                               row("FOLD+EAGER", gauss(6, 5.0, 0.3))]))
rc, out, err = run(base, fast, "--fail-above", "5%", "--json", os.path.join(tmp, "fast_cmp.json"))
_, rows = compared_rows(os.path.join(tmp, "fast_cmp.json"))
check(rc == 0 and rows[("EAGER", 1)]["verdict"] == "faster", f"20% faster: exit {rc}, {rows[('EAGER', 1)]}")

# --- a 2% change under wide noise (CV 20%, 100 samples): no significant change
noisy_b = write("noisy_b.json", doc([row("EAGER", gauss(7, 10.0, 2.0))]))
noisy_n = write("noisy_n.json", doc([row("EAGER", [x * 1.02 for x in gauss(8, 10.0, 2.0)])]))
rc, out, err = run(noisy_b, noisy_n, "--fail-above", "5%", "--json", os.path.join(tmp, "noisy.json"))
_, rows = compared_rows(os.path.join(tmp, "noisy.json"))
check(rc == 0 and rows[("EAGER", 1)]["verdict"] == "no significant change",
      f"2% under wide noise: exit {rc}, {rows[('EAGER', 1)]}")

# --- --noise: a tight 3% slowdown is slower under the default 1% band, no change within a 5% band
t_b = write("tight_b.json", doc([row("EAGER", gauss(13, 10.0, 0.05))]))
t_n = write("tight_n.json", doc([row("EAGER", [x * 1.03 for x in gauss(14, 10.0, 0.05)])]))
rc, out, _ = run(t_b, t_n, "--fail-above", "5%")
check(rc == 0 and "slower (+" in out, f"3% slower, tight: exit {rc}\n{out}")
rc, out, _ = run(t_b, t_n, "--noise", "5%")
check(rc == 0 and "no significant change" in out, f"3% slower within --noise 5%: exit {rc}\n{out}")
rc, out, _ = run(t_b, t_n, "--fail-above", "2%")
check(rc == 1, f"3% slower, --fail-above 2%: exit {rc}")

# --- throughput-mode rows are keyed by instances x workers too (their latency has no raw samples)
def scaled(seed, factor):
    r = row("EAGER", gauss(seed, 10.0, 0.5))
    r["scaling"] = []
    for inst, sd in ((1, seed + 100), (2, seed + 200)):
        s = sorted(x * factor * inst for x in gauss(sd, 10.0, 0.2))
        r["scaling"].append({"instances": inst, "workers": 1, "threads_per_instance": 2 // inst,
                             "latency_ms": {"p50": median(s), "n": 100, "median_ci95": [s[39], s[60]]}, "error": None})
    return r
sc_b = write("sc_b.json", doc([scaled(20, 1.0)]))
sc_n = write("sc_n.json", doc([scaled(20, 1.0)]))
sc_s = write("sc_s.json", doc([scaled(30, 1.3)]))
rc, out, _ = run(sc_b, sc_n, "--fail-above", "5%", "--json", os.path.join(tmp, "sc.json"))
with open(os.path.join(tmp, "sc.json")) as f:
    srows = f.read()
check(rc == 0 and "EAGER b1 2x1" in out and '"instances":\t2' in srows and '"stored_ci"' in srows,
      f"scaling rows: exit {rc}\n{out}")
rc, out, _ = run(sc_b, sc_s, "--fail-above", "5%")
check(rc == 1 and out.count("FAIL") >= 2, f"scaling rows 30% slower: exit {rc}\n{out}")

# --- fixed seed: the same files give the same interval; another seed may differ only slightly
_, r1 = compared_rows(os.path.join(tmp, "noisy.json"))
run(noisy_b, noisy_n, "--json", os.path.join(tmp, "noisy2.json"))
_, r2 = compared_rows(os.path.join(tmp, "noisy2.json"))
check(r1[("EAGER", 1)]["ratio_ci95"] == r2[("EAGER", 1)]["ratio_ci95"], "same seed, same interval")

# --- the bootstrap against an independent one (Python's statistics.median, its own generator): the
# same interval within the Monte Carlo error of the two
def py_bootstrap(xb, xn, resamples, seed):
    g = random.Random(seed)
    rs = sorted(statistics.median(g.choices(xn, k=len(xn))) / statistics.median(g.choices(xb, k=len(xb)))
                for _ in range(resamples))
    def pct(p):
        h = (len(rs) - 1) * p
        lo = int(h)
        return rs[lo] + (h - lo) * (rs[min(lo + 1, len(rs) - 1)] - rs[lo])
    return pct(0.025), pct(0.975)

g = random.Random(40)
ref_b = [g.lognormvariate(0, 0.3) for _ in range(80)]
ref_n = [1.1 * g.lognormvariate(0, 0.3) for _ in range(80)]
rb, rn = write("ref_b.json", doc([row("EAGER", ref_b)])), write("ref_n.json", doc([row("EAGER", ref_n)]))
rc, out, err = run(rb, rn, "--resamples", "20000", "--json", os.path.join(tmp, "ref.json"))
_, rows = compared_rows(os.path.join(tmp, "ref.json"))
lo, hi = rows[("EAGER", 1)]["ratio_ci95"]
plo, phi = py_bootstrap(ref_b, ref_n, 10000, 42)
tol = 0.1 * (phi - plo)
check(rc == 0 and abs(lo - plo) < tol and abs(hi - phi) < tol and
      abs(rows[("EAGER", 1)]["ratio"] - statistics.median(ref_n) / statistics.median(ref_b)) < 1e-12,
      f"bootstrap vs reference: alma [{lo}, {hi}], reference [{plo}, {phi}]")

# --- rows of repeats (alma bench --repeat): five processes a side whose medians differ by a few
# percent while each process's batches hardly scatter. The pooled batches would call a 2% change
# significant; the hierarchical bootstrap (processes, then batches: docs/methodology.md) must not,
# and its interval must match an independent one (its own generator, real resampling of both levels)
def repeated_row(conv, centers, scale, seed, n=60):
    g = random.Random(seed)
    runs, raw = [], []
    for i, c in enumerate(centers):
        xs = [scale * c * (1 + g.gauss(0, 0.002)) for _ in range(n)]
        runs.append({"run_index": i, "n": n, "median_ms": statistics.median(xs), "cpu_share": None,
                     "disturbed": False, "reason": None})
        raw += xs
    meds = sorted(r["median_ms"] for r in runs)
    r = row(conv, raw)
    r["repeats"] = {"k": len(centers), "median_ms": statistics.median(meds), "ci95": [meds[1], meds[-2]],
                    "min_ms": meds[0], "max_ms": meds[-1], "spread": None, "cv": None, "n_disturbed": 0, "runs": runs}
    return r

def py_hier(rb, rn, resamples, seed):
    g = random.Random(seed)
    def slices(r):
        out, off = [], 0
        for run in r["repeats"]["runs"]:
            out.append(r["raw_ms"][off:off + run["n"]])
            off += run["n"]
        return out
    sb, sn = slices(rb), slices(rn)
    def rep(sl):
        return statistics.median(statistics.median(g.choices(p, k=len(p))) for p in g.choices(sl, k=len(sl)))
    rs = sorted(rep(sn) / rep(sb) for _ in range(resamples))
    def pct(p):
        h = (len(rs) - 1) * p
        lo = int(h)
        return rs[lo] + (h - lo) * (rs[min(lo + 1, len(rs) - 1)] - rs[lo])
    return pct(0.025), pct(0.975)

centers = [10.0, 10.3, 9.7, 10.5, 9.6]
hb = repeated_row("EAGER", centers, 1.0, 1)
hn = repeated_row("EAGER", [centers[i] for i in (3, 0, 4, 1, 2)], 1.02, 2)
pb, pn = write("rep_b.json", doc([hb])), write("rep_n.json", doc([hn]))
rc, out, err = run(pb, pn, "--resamples", "8000", "--json", os.path.join(tmp, "rep.json"))
_, rows = compared_rows(os.path.join(tmp, "rep.json"))
r = rows[("EAGER", 1)]
plo, phi = py_hier(hb, hn, 3000, 7)
tol = 0.12 * (phi - plo)
check(rc == 0 and r["method"] == "hierarchical_bootstrap" and r["verdict"] == "no significant change" and
      abs(r["ratio"] - hn["repeats"]["median_ms"] / hb["repeats"]["median_ms"]) < 1e-12 and
      abs(r["ratio_ci95"][0] - plo) < tol and abs(r["ratio_ci95"][1] - phi) < tol,
      f"repeats: alma {r}, reference [{plo}, {phi}]")
# the same files without their repeats: the pooled bootstrap sees only batches and calls it slower
for d in (hb, hn):
    d.pop("repeats")
rc, out, err = run(write("pool_b.json", doc([hb])), write("pool_n.json", doc([hn])), "--json", os.path.join(tmp, "pool.json"))
_, rows = compared_rows(os.path.join(tmp, "pool.json"))
check(rows[("EAGER", 1)]["method"] == "bootstrap" and rows[("EAGER", 1)]["ratio_ci95"][1] - rows[("EAGER", 1)]["ratio_ci95"][0] < 0.5 * (phi - plo),
      f"pooled: {rows[('EAGER', 1)]}")

# --- coverage: 300 rows of skewed (log-normal, CV ~10%) samples with a known true ratio of medians (1
# and 1.1); the 95% intervals must hold it about 95% of the time (binomial sd 1.3%: 0.90-0.99 is a
# wide margin), and the 10% slowdown (about 5 standard errors) must be flagged in nearly every pair
g = random.Random(50)
for true_ratio in (1.0, 1.1):
    rows_b, rows_n = [], []
    for i in range(300):
        rows_b.append(row(f"C{i}", [g.lognormvariate(0, 0.1) for _ in range(100)]))
        rows_n.append(row(f"C{i}", [true_ratio * g.lognormvariate(0, 0.1) for _ in range(100)]))
    cb, cn = write("cov_b.json", doc(rows_b)), write("cov_n.json", doc(rows_n))
    rc, out, err = run(cb, cn, "--noise", "0", "--resamples", "2000", "--json", os.path.join(tmp, "cov.json"))
    _, rows = compared_rows(os.path.join(tmp, "cov.json"))
    cover = sum(r["ratio_ci95"][0] <= true_ratio <= r["ratio_ci95"][1] for r in rows.values()) / len(rows)
    check(rc == 0 and len(rows) == 300 and 0.90 <= cover <= 0.99, f"coverage at ratio {true_ratio}: {cover:.3f}")
    if true_ratio == 1.0:
        nochange = sum(r["verdict"] == "no significant change" for r in rows.values()) / len(rows)
        check(nochange >= 0.90, f"no change reported for {nochange:.3f} of equal pairs")
    else:
        slower = sum(r["verdict"] == "slower" for r in rows.values()) / len(rows)
        check(slower >= 0.99, f"a 10% slowdown flagged in {slower:.3f} of pairs")

# --- rows in one file only are listed; batch size is part of the key
b2 = write("b2.json", doc([row("EAGER", base_s), row("EAGER", gauss(9, 20.0, 0.5), batch=8), row("DNNL", gauss(10, 3, 0.1))]))
n2 = write("n2.json", doc([row("EAGER", base_s), row("EAGER", gauss(11, 20.0, 0.5), batch=8), row("BLAS", gauss(12, 3, 0.1))]))
rc, out, err = run(b2, n2, "--json", os.path.join(tmp, "miss.json"))
j, rows = compared_rows(os.path.join(tmp, "miss.json"))
c = j["comparisons"][0]
check(rc == 0 and set(rows) == {("EAGER", 1), ("EAGER", 8)}, f"missing rows: compared {set(rows)}")
check([r["conversion"] for r in c["only_in_base"]] == ["DNNL"] and [r["conversion"] for r in c["only_in_new"]] == ["BLAS"],
      f"missing rows: only_in_base {c['only_in_base']}, only_in_new {c['only_in_new']}")
check("only in BASE (not compared): DNNL b1" in out and "only in NEW (not compared): BLAS b1" in out,
      "missing rows: listed in the table")

# --- a conversion that ran in BASE and fails in NEW fails the gate
broken = write("broken.json", doc([row("EAGER", base_s), row("FOLD+EAGER", [], status="error")]))
rc, out, err = run(base, broken, "--fail-above", "5%")
check(rc == 1 and "now failing" in out, f"now failing: exit {rc}")

# --- different machine, ISA, alma version, model: warnings (the comparison still runs)
other = write("other.json", doc([row("EAGER", base_s)], cpu="AMD EPYC 7763", isa=("avx2",), version="0.2.0",
                                model_hash="cd" * 32))
rc, out, err = run(base, other, "--json", os.path.join(tmp, "other_cmp.json"))
j, _ = compared_rows(os.path.join(tmp, "other_cmp.json"))
w = " | ".join(j["comparisons"][0]["warnings"])
for what in ("different CPU model", "different CPU ISA", "different alma version", "different model",
             "different library versions"):
    check(what in w and what in out, f"environment warning '{what}' (got: {w})")
check(rc == 0, f"different machine: exit {rc}")
rc, out, _ = run(base, base)
check("warning" not in out, "same machine: no warning")

# --- thread counts differing on a row are warned about
thr = write("thr.json", doc([row("EAGER", base_s, threads=1), row("FOLD+EAGER", gauss(2, 5.0, 0.3))]))
rc, out, _ = run(base, thr)
check("threads 2 in BASE, 1 in NEW" in out, "thread warning")

# --- no raw samples: bounds from the stored median intervals, said so
noraw_b = write("noraw_b.json", doc([row("EAGER", base_s, raw=False)]))
noraw_n = write("noraw_n.json", doc([row("EAGER", [x * 1.2 for x in gauss(3, 10.0, 0.5)], raw=False)]))
rc, out, err = run(noraw_b, noraw_n, "--fail-above", "5%", "--json", os.path.join(tmp, "noraw.json"))
_, rows = compared_rows(os.path.join(tmp, "noraw.json"))
e = rows[("EAGER", 1)]
check(rc == 1 and e["method"] == "stored_ci" and e["verdict"] == "slower" and "--raw" in out,
      f"no raw samples: exit {rc}, {e}")
rc, out, err = run(noraw_b, noraw_b, "--fail-above", "5%")
check(rc == 0 and "no significant change" in out, f"no raw samples, identical: exit {rc}")

# --- bad input: missing file, directory, not JSON, not a results file, a bad raw sample -> exit 3
bad_cases = {
    "missing": (os.path.join(tmp, "nope.json"), "cannot open"),
    "directory": (tmp, "not a regular file"),
    "not json": (write("garbage.json", "{not json"), "not valid JSON"),
    "wrong schema": (write("wrong.json", {"hello": 1}), "not an alma results file"),
    "future schema": (write("future.json", dict(doc([]), schema_version=99)), "schema_version 99"),
    "bad raw": (write("badraw.json", doc([dict(row("EAGER", base_s), raw_ms=[1, "x"])])), "raw_ms[1]"),
    "no conversion": (write("noconv.json", doc([{"status": "ok"}])), "no conversion name"),
}
for what, (path, msg) in bad_cases.items():
    rc, out, err = run(base, path)
    check(rc == 3 and msg in err and path in err, f"bad file ({what}): exit {rc}, stderr {err!r}")

# --- usage errors -> exit 2
for args, msg in ((["base.json"], "at least one NEW"), (["--fail-above", "x%", base, base], "--fail-above"),
                  (["--fail-above", "-5", base, base], "--fail-above"), (["--resamples", "10", base, base], "--resamples"),
                  (["--bogus", base, base], "unknown option"), (["--noise", "100%", base, base], "--noise"), ([base, base, "--json"], "needs a value")):
    rc, out, err = run(*args)
    check(rc == 2 and msg in err, f"usage {args}: exit {rc}, stderr {err!r}")
rc, out, _ = run("--help")
check(rc == 0 and "--fail-above" in out, "--help")

# --- two real alma bench runs of the MNIST example (same build, same machine) compared
runs = []
for i in range(2):
    p = os.path.join(tmp, f"mnist{i}.json")
    b = subprocess.run([ALMA, "bench", MODEL, "-c", "EAGER,FOLD+EAGER", "-n", "30", "--min-time", "0.05", "--warmup", "2",
                        "--warmup-time", "0", "--raw", "--no-cache", "-q", "--json", p], capture_output=True, text=True,
                       timeout=180)
    check(b.returncode == 0, f"alma bench run {i}: exit {b.returncode}: {b.stderr[-500:]}")
    runs.append(p)
if not FAILS:
    rc, out, err = run(runs[0], runs[1], "--json", os.path.join(tmp, "mnist_cmp.json"))
    j, rows = compared_rows(os.path.join(tmp, "mnist_cmp.json"))
    check(rc in (0, 1) and set(rows) == {("EAGER", 1), ("FOLD+EAGER", 1)}, f"real runs: exit {rc}, rows {set(rows)}")
    for k, r in rows.items():
        check(r["method"] == "bootstrap" and r["base_n"] >= 30 and r["new_n"] >= 30
              and r["ratio_ci95"][0] <= r["ratio"] <= r["ratio_ci95"][1], f"real runs: row {k}: {r}")
    check(not j["comparisons"][0]["warnings"], f"real runs: no environment warning: {j['comparisons'][0]['warnings']}")
    # a run compared with itself is no change (exit 0 under the gate)
    rc, out, err = run(runs[0], runs[0], "--fail-above", "5%")
    check(rc == 0 and out.count("no significant change") == 2, f"real run with itself: exit {rc}\n{out}")
    # a 10% slowdown injected into a real run's samples (every batch 1.1 times as long): the ratio
    # is exactly 1.1 and never "faster"; whether the interval clears the gate depends on the run's
    # own noise (under ASan on a loaded machine one row's interval was [0.48, 2.5]), so the gate
    # must trip exactly when some row's lower bound is above 1.02 (synthetic files above check
    # that a clean 10% slowdown is always caught)
    with open(runs[0]) as f:
        slowed = json.load(f)
    for r in slowed["results"]:
        r["raw_ms"] = [1.1 * x for x in r["raw_ms"]]
    slow_json = os.path.join(tmp, "mnist_slow_cmp.json")
    rc, out, err = run(runs[0], write("mnist_slow.json", slowed), "--fail-above", "2%", "--json", slow_json)
    j, rows = compared_rows(slow_json)
    tripped = any(r["ratio_ci95"][0] > 1.02 for r in rows.values())
    check(len(rows) == 2 and all(abs(r["ratio"] - 1.1) < 1e-9 for r in rows.values())
          and not any(str(r.get("verdict", "")).startswith("faster") for r in rows.values())
          and rc == (1 if tripped else 0), f"real run, 10% slower: exit {rc}\n{out}")

if FAILS:
    print(f"{len(FAILS)} failure(s); files kept in {tmp}")
    sys.exit(1)
if not os.environ.get("ALMA_TEST_KEEP"):
    shutil.rmtree(tmp)
print("compare: all checks passed")
