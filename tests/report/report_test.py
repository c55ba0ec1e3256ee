"""The HTML report, the trace and the roofline figures, without a browser.

Synthetic results files whose content is known go through `alma report` and `alma compare --html`;
the page is parsed and every chart's marks are counted against what the data says they must be
(the Pareto front computed here independently, the roofline's GFLOP/s from the FLOPs and the
median). Then real `alma bench` runs of the MNIST example: --html, --profile --trace (the trace
checked against the Trace Event Format's rules), the machine peak cached under its fingerprint.

usage: report_test.py ALMA_BINARY MODEL.onnx ARTIFACT_DIR
"""
import csv
import html.parser
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

ALMA, MODEL, ARTIFACTS = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(ARTIFACTS, exist_ok=True)
FAILS = []
tmp = tempfile.mkdtemp(prefix="alma-report-test-")


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def run(*args, timeout=300, env=None):
    p = subprocess.run([ALMA, *args], capture_output=True, text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout, p.stderr


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def pct(xs, p):
    s = sorted(xs)
    h = (len(s) - 1) * p
    lo = int(h)
    return s[lo] + (h - lo) * (s[min(lo + 1, len(s) - 1)] - s[lo])


class Page(html.parser.HTMLParser):
    """Every element with its attributes and its chart (the enclosing svg.chart), and the text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elems, self.stack, self.text, self.scripts = [], [], [], []
        self.in_script = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        chart = None
        for t, ta in reversed(self.stack):
            if t == "svg" and "chart" in (ta.get("class") or "").split():
                chart = ta.get("data-chart")
                break
        if tag == "svg" and "chart" in (a.get("class") or "").split():
            chart = a.get("data-chart")
        self.elems.append((tag, a, chart, len(self.elems)))
        if tag not in ("br", "meta", "line", "circle", "rect", "polyline", "input"):
            self.stack.append((tag, a))
        self.in_script = tag == "script"

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if self.stack and self.stack[-1][0] == tag:
            self.stack.pop()

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break
        self.in_script = False

    def handle_data(self, d):
        self.text.append(d)
        if self.in_script:
            self.scripts.append(d)


def parse(path):
    with open(path, encoding="utf-8") as f:
        src = f.read()
    p = Page()
    p.feed(src)
    return p, src


def marks(page, chart):
    return [e for e in page.elems if e[2] == chart and "mark" in (e[1].get("class") or "").split()]


def charts(page):
    return [e[1].get("data-chart") for e in page.elems if e[0] == "svg" and "chart" in (e[1].get("class") or "")]


def self_contained(page, src, what):
    for tag, a, _, _ in page.elems:
        for k in ("src", "href", "xlink:href", "action", "poster", "data"):
            v = a.get(k)
            check(v is None or v.startswith("#") or v.startswith("data:"), f"{what}: <{tag} {k}={v!r}> refers outside the page")
        check(tag not in ("link", "iframe", "object", "embed", "img"), f"{what}: <{tag}> element (loads something)")
    # the only URL allowed is the SVG namespace, which names, never loads
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", src)) - {"http://www.w3.org/2000/svg"}
    check(not urls, f"{what}: URLs in the page: {sorted(urls)[:5]}")
    check("default-src 'none'" in src, f"{what}: no Content-Security-Policy that forbids loading")
    js = "".join(page.scripts)
    for bad in ("fetch(", "XMLHttpRequest", "import(", "WebSocket", ".src=", "eval("):
        check(bad not in js, f"{what}: the inline script uses {bad}")


# ---- synthetic results ----------------------------------------------------------------------------
HOSTILE = "<script>alert(1)</script>&\"x'"


def gauss(seed, mean, sd, n=120):
    g = random.Random(seed)
    return [max(0.001, g.gauss(mean, sd)) for _ in range(n)]


def ok_row(conv, raw, batch=1, cosine=1.0, top1=None, profile=None, scaling=None, flops=2.0e8, bytes_=4.0e6):
    s = sorted(raw)
    n = len(s)
    r = {"id": None, "conversion": conv, "status": "ok", "batch_size": batch, "threads": 2, "mode": "latency",
         "samples": n * batch,
         "latency_ms": {"n": n, "p50": median(raw), "min": s[0], "max": s[-1], "mean": sum(raw) / n,
                        "p90": pct(raw, .9), "p95": pct(raw, .95), "p99": pct(raw, .99),
                        "median_ci95": [s[n // 2 - 8], s[n // 2 + 8]]},
         "raw_ms": list(raw), "check": {"performed": True, "passed": True, "max_abs_err": 1e-6, "cosine": cosine},
         "warnings": [], "error": None, "roofline": {"flops_per_batch": flops * batch, "bytes_per_batch": bytes_}}
    if top1 is not None:
        r["accuracy"] = {"top1": top1, "correct": int(top1 * 1000), "samples": 1000, "top1_drop": None, "baseline": None}
    if profile:
        r["profile"] = profile
    if scaling:
        r["scaling"] = scaling
    return r


def profile(runtime, ops):
    nodes = [{"name": f"{o}_{i}", "op_type": o, "placement": runtime, "members": 1, "runs": 10, "ms": ms,
              "share": ms / 2.0, "order": i} for i, (o, ms) in enumerate(ops)]
    byop = {}
    for o, ms in ops:
        byop[o] = byop.get(o, 0) + ms
    op_types = [{"op_type": o, "entries": 1, "nodes": 1, "ms": ms, "share": ms / 2.0}
                for o, ms in sorted(byop.items(), key=lambda kv: -kv[1])]
    return {"runtime": runtime, "available": True, "reason": None, "batches": 10, "seconds": 0.1, "batch_ms": 2.0,
            "nodes_ms": sum(ms for _, ms in ops), "overhead": 0.05, "nodes": nodes, "op_types": op_types}


def scaling(points):
    return [{"instances": i, "workers": w, "threads_per_instance": 1, "concurrent": i * w > 1, "inferences": 100,
             "samples": 100, "duration_s": 1.0, "throughput_avg": t, "throughput_peak": t * 1.1,
             "latency_ms": {"n": 100, "p50": 1000.0 / t}, "stop_reason": "duration", "error": None}
            for i, w, t in points]


def doc(rows, peak=True):
    d = {"alma_version": "0.1.0", "schema_version": 2, "created": "2026-01-01T00:00:00Z",
         "system": {"cpu_model": "Test CPU " + HOSTILE, "logical_cores": 4, "physical_cores": 2, "sockets": 1,
                    "isa": ["avx2"], "memory_bytes": 8 << 30, "os": "TestOS", "kernel": "k", "machine": "x86_64",
                    "governor": "performance", "load_average": [0.1, 0.1, 0.1]},
         "model": {"path": "models/test " + HOSTILE + ".onnx", "hash": "ab" * 32,
                   "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 3, 8, 8]}],
                   "outputs": [{"name": "y", "dtype": "float32", "shape": [1, 10]}]},
         "config": {"batch_size": 1}, "results": rows, "unavailable": None}
    if peak:
        d["machine_peak"] = {"measured": True, "sgemm_gflops": 100.0, "sgemm_library": "OpenBLAS", "bandwidth_gbs": 20.0,
                             "threads": 2, "fingerprint": "cd" * 32, "measured_at": "2026-01-01T00:00:00Z",
                             "load_average": 0.1, "cached": True, "reason": None}
    return d


def write(name, d):
    p = os.path.join(tmp, name)
    with open(p, "w") as f:
        json.dump(d, f)
    return p


rows = [
    ok_row("EAGER", gauss(1, 2.0, 0.05), cosine=1.0, top1=0.91,
           profile=profile("EAGER", [("Conv", 1.2), ("Relu", 0.3), ("Gemm", 0.4)]),
           scaling=scaling([(1, 1, 500), (1, 2, 700), (2, 1, 900), (2, 2, 950)])),
    ok_row("DNNL", gauss(2, 0.5, 0.02), cosine=1.0, top1=0.91,
           profile=profile("DNNL", [("Conv+Relu", 0.3), ("Gemm", 0.1)])),
    ok_row("FOLD+INT8_DYNAMIC+EAGER", gauss(3, 0.4, 0.02), cosine=0.98, top1=0.89),  # faster, less accurate: front
    ok_row("SLOW+LOSSY", gauss(4, 3.0, 0.1), cosine=0.95, top1=0.80),               # dominated
    ok_row(HOSTILE, gauss(5, 1.0, 0.05), cosine=0.99, top1=0.90),                   # dominated by DNNL
    ok_row("EAGER", gauss(6, 6.0, 0.2), batch=4, cosine=1.0, top1=0.91),
    ok_row("DNNL", gauss(7, 1.2, 0.05), batch=4, cosine=1.0, top1=0.91),
    {"id": 99, "conversion": "CRASHY", "status": "error", "batch_size": 1, "mode": "latency", "latency_ms": None,
     "error": "ERR_CRASH: killed by signal 11 (SIGSEGV)", "error_status": "ERR_CRASH", "failed_step": "timed",
     "traceback": "step timed\n--- native backtrace ---\n#0 boom() <here>\n--- end of backtrace ---", "warnings": []},
    {"id": 98, "conversion": "MISSING", "status": "unavailable", "batch_size": 1, "mode": "latency",
     "latency_ms": None, "error": "library libfoo not found", "error_status": "ERR_UNAVAILABLE", "warnings": []},
]
rows[1]["warnings"] = ["CV 12% above 10%: " + HOSTILE]
base = write("synthetic.json", doc(rows))
out = os.path.join(ARTIFACTS, "synthetic.html")
rc, so, se = run("report", base, "-o", out)
check(rc == 0, f"alma report exit {rc}: {se}")
page, src = parse(out)
self_contained(page, src, "report")
text = "".join(page.text)

# escaping: the hostile name is text, never markup
check("<script>alert(1)" not in src, "a name with markup reached the page unescaped")
check(HOSTILE in text, "the hostile conversion name is not shown as text")
check(src.count("<script>") == 1, f"{src.count('<script>')} script elements: only the table sorter is inline")

timed = [r for r in rows if r["status"] == "ok"]
kinds = charts(page)
for k in ("latency", "throughput", "pareto", "batch", "scaling", "profile", "roofline"):
    check(k in kinds, f"chart {k} missing (charts: {kinds})")
check(len(marks(page, "latency")) == len(timed), f"latency: {len(marks(page, 'latency'))} marks for {len(timed)} timed rows")
check(len(marks(page, "throughput")) == len(timed), "throughput: one bar per timed row")
boxes = [e for e in page.elems if e[2] == "latency" and "box" in (e[1].get("class") or "")]
cis = [e for e in page.elems if e[2] == "latency" and "ci" in (e[1].get("class") or "").split()]
p99s = [e for e in page.elems if e[2] == "latency" and "p99" in (e[1].get("class") or "").split()]
check(len(boxes) == len(timed) and len(cis) == len(timed) and len(p99s) == len(timed),
      f"latency: boxes {len(boxes)}, CI marks {len(cis)}, p99 marks {len(p99s)} for {len(timed)} rows")

# Pareto front, computed here: maximise throughput (batch / median) and top-1 (labels measured)
pts = [(r["batch_size"] * 1000.0 / median(r["raw_ms"]), r["accuracy"]["top1"], r["conversion"], r["batch_size"]) for r in timed]
front = [p for p in pts if not any(q[0] >= p[0] and q[1] >= p[1] and (q[0] > p[0] or q[1] > p[1]) for q in pts)]
pm = marks(page, "pareto")
on_front = [e for e in pm if "pareto" in e[1]["class"].split()]
check(len(pm) == len(pts), f"pareto: {len(pm)} points for {len(pts)} timed rows")
check(len(on_front) == len(front), f"pareto: {len(on_front)} marked on the front, expected {len(front)} ({front})")
check("top-1" in src, "pareto: plots top-1 when the rows have it")

# batch-size curves: one line per conversion with rows (EAGER, DNNL, and three single-batch ones)
convs = []
for r in timed:
    if r["conversion"] not in convs:
        convs.append(r["conversion"])
check(len(marks(page, "batch")) == len(convs), f"batch: {len(marks(page, 'batch'))} lines for {len(convs)} conversions")
check(len(marks(page, "scaling")) == 4, f"scaling: {len(marks(page, 'scaling'))} cells, expected 4 (2 x 2)")
check(len(marks(page, "profile")) == 3 + 2, f"profile: {len(marks(page, 'profile'))} bars, expected 5 op types")
check(len(marks(page, "roofline")) == len(timed), "roofline: one point per timed row")

# the summary table: sortable, one row per result, roofline columns computed from FLOPs and median
tables = [e for e in page.elems if e[0] == "table" and e[1].get("id") == "summary"]
check(tables and "sortable" in tables[0][1].get("class", ""), "summary table missing or not sortable")
m = re.search(r'<table class="sortable" id="summary">(.*?)</table>', src, re.S)
body = m.group(1) if m else ""
heads = re.findall(r"<th[^>]*>(.*?)</th>", body)
trs = re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>")[-1], re.S)
check(len(trs) == len(rows), f"summary: {len(trs)} rows for {len(rows)} results")
gi = heads.index("GFLOP/s") if "GFLOP/s" in heads else -1
check(gi >= 0 and "of peak" in heads and "bound" in heads, f"summary: roofline columns missing ({heads})")
for r, tr in zip(rows, trs):
    cells = re.findall(r'<td[^>]*data-v="([^"]*)"', tr)
    if r["status"] != "ok" or gi < 0:
        continue
    want = r["roofline"]["flops_per_batch"] / (median(r["raw_ms"]) * 1e-3) / 1e9
    got = float(cells[gi]) if cells[gi] else float("nan")
    check(abs(got - want) <= 1e-6 * want, f"{r['conversion']} b{r['batch_size']}: GFLOP/s {got}, expected {want}")
    share = float(cells[gi + 1])
    check(abs(share - want / 100.0) <= 1e-6, f"{r['conversion']}: share of peak {share}, expected {want / 100}")
    # intensity flops/bytes against the ridge 100/20 = 5 FLOP/byte
    intensity = r["roofline"]["flops_per_batch"] / r["roofline"]["bytes_per_batch"]
    want_bound = "memory" if intensity < 5 else "compute"
    check(cells[gi + 2] == want_bound, f"{r['conversion']} b{r['batch_size']}: bound {cells[gi + 2]}, expected {want_bound}")

# failures and warnings folded, with the traceback inside
check(re.search(r"<details class=\"failure\"><summary>.*?CRASHY.*?</summary><pre>step timed\n--- native backtrace", src, re.S),
      "the crashed row's traceback is not folded in a <details>")
check(re.search(r"<details class=\"failure\"><summary>.*?MISSING.*?library libfoo not found", src, re.S),
      "the unavailable row's reason is missing")
check(re.search(r"<details class=\"warnings\">", src), "warnings are not folded")

# the same file without raw samples: no boxes, a note saying why
norow = doc([dict(r, raw_ms=None) if r["status"] == "ok" else r for r in rows])
p2 = write("noraw.json", norow)
out2 = os.path.join(tmp, "noraw.html")
rc, so, se = run("report", p2, "-o", out2)
check(rc == 0, f"alma report (no raw) exit {rc}: {se}")
page2, src2 = parse(out2)
boxes2 = [e for e in page2.elems if e[2] == "latency" and "box" in (e[1].get("class") or "")]
check(not boxes2 and "without raw samples" in src2, "without raw_ms: boxes drawn anyway, or no note")
check(len(marks(page2, "latency")) == len(timed), "without raw_ms: the latency marks from the stored statistics")

# a file without machine_peak (an older alma): no roofline points, a reason instead
p3 = write("nopeak.json", doc(rows, peak=False))
rc, so, se = run("report", p3, "-o", os.path.join(tmp, "nopeak.html"))
page3, src3 = parse(os.path.join(tmp, "nopeak.html"))
check(rc == 0 and "roofline" not in charts(page3) and "peak is unknown" in src3, "without machine_peak: a roofline chart or no reason")

# text report of the same file, with the roofline lines
rc, so, se = run("report", base)
check(rc == 0 and "roofline: peak 100 GFLOP/s" in so, f"alma report (text): exit {rc}, roofline lines missing:\n{so[-800:]}")

# bad input
rc, so, se = run("report", os.path.join(tmp, "nope.json"), "-o", os.path.join(tmp, "x.html"))
check(rc == 3 and "nope.json" in se, f"missing file: exit {rc}, {se!r}")
bad = os.path.join(tmp, "bad.json")
with open(bad, "w") as f:
    f.write("{not json")
rc, so, se = run("report", bad, "-o", os.path.join(tmp, "x.html"))
check(rc == 3 and "bad.json" in se, f"bad JSON: exit {rc}, {se!r}")
rc, so, se = run("report")
check(rc == 2, f"no file: exit {rc}")
rc, so, se = run("report", base, "-o", os.path.join(tmp, "no-such-dir", "x.html"))
check(rc != 0 and "no-such-dir" in se, f"unwritable output: exit {rc}, {se!r}")

# ---- alma compare --html ------------------------------------------------------------------------
new_rows = [dict(r) for r in rows]
new_rows[0] = ok_row("EAGER", [x * 1.10 for x in gauss(11, 2.0, 0.05)])  # 10% slower
new_rows[1] = ok_row("DNNL", gauss(12, 0.5, 0.02))                        # the same
new_rows[2] = ok_row("FOLD+INT8_DYNAMIC+EAGER", [x * 0.8 for x in gauss(13, 0.4, 0.02)])  # faster
newp = write("new.json", doc(new_rows))
cmp_html = os.path.join(ARTIFACTS, "compare.html")
cmp_json = os.path.join(tmp, "compare.json")
rc, so, se = run("compare", base, newp, "--fail-above", "5%", "--html", cmp_html, "--json", cmp_json)
check(rc == 1, f"compare with a 10% slowdown and --fail-above 5%: exit {rc}, expected 1: {se}")
pc, srcc = parse(cmp_html)
self_contained(pc, srcc, "compare")
with open(cmp_json) as f:
    cj = json.load(f)
cmp_rows = [r for r in cj["comparisons"][0]["rows"] if r["ratio_ci95"]]
check(len(marks(pc, "compare")) == len(cmp_rows), f"compare: {len(marks(pc, 'compare'))} marks for {len(cmp_rows)} compared rows")
check("FAIL" in "".join(pc.text) and "slower" in "".join(pc.text) and "faster" in "".join(pc.text),
      "compare page: verdicts or the gate missing")
check(charts(pc).count("latency") == 2, "compare page: each file's own report should follow the comparison")
rc, so, se = run("compare", base, newp, "--html", "-", "--json", "-")
check(rc == 2, f"--html - with --json -: exit {rc}, expected 2")

# ---- real runs ----------------------------------------------------------------------------------
env = dict(os.environ)
env["ALMA_CACHE_DIR"] = os.path.join(tmp, "cache")
bench_json = os.path.join(tmp, "bench.json")
bench_html = os.path.join(ARTIFACTS, "bench.html")
trace = os.path.join(ARTIFACTS, "trace.json")
rc, so, se = run("bench", MODEL, "-c", "EAGER,FOLD+EAGER", "-n", "20", "--min-time", "0.05", "--warmup", "2",
                 "--profile=2", "--profile-time", "0.02", "--json", bench_json, "--html", bench_html,
                 "--trace", trace, "-q", env=env)
check(rc == 0, f"alma bench --html --trace exit {rc}: {se[-2000:]}")
pb, srcb = parse(bench_html)
self_contained(pb, srcb, "bench")
for k in ("latency", "throughput", "pareto", "profile", "roofline"):
    check(k in charts(pb) and marks(pb, k), f"bench page: chart {k} missing or empty")
with open(bench_json) as f:
    bj = json.load(f)
mp = bj.get("machine_peak") or {}
check(mp.get("measured") is True and mp.get("sgemm_gflops", 0) > 0 and mp.get("bandwidth_gbs", 0) > 0,
      f"machine_peak not measured: {mp}")
cache_files = [f for f in os.listdir(env["ALMA_CACHE_DIR"]) if f.startswith("machine-")]
check(len(cache_files) == 1 and mp.get("fingerprint", "").startswith(cache_files[0][8:24]) if cache_files else False,
      f"the machine peak is not cached under its fingerprint: {cache_files}")
rc, so, se = run("info", MODEL, "--json")
flops1 = json.loads(so)["flops_per_sample"] if rc == 0 else None
for r in bj["results"]:
    rf = r.get("roofline") or {}
    check(rf.get("flops_per_batch") == flops1, f"{r['conversion']}: flops_per_batch {rf.get('flops_per_batch')}, alma info says {flops1}")
    want = rf["flops_per_batch"] / (r["latency_ms"]["p50"] * 1e-3) / 1e9
    check(abs(rf.get("gflops", 0) - want) <= 1e-9 * want, f"{r['conversion']}: gflops {rf.get('gflops')}, expected {want}")
    check(abs(rf["share_of_peak"] - want / mp["sgemm_gflops"]) <= 1e-9, f"{r['conversion']}: share_of_peak")
    check(rf.get("bound") in ("memory", "compute"), f"{r['conversion']}: bound {rf.get('bound')}")
    check(rf["bytes_per_batch"] > 0, f"{r['conversion']}: bytes_per_batch {rf.get('bytes_per_batch')}")

# a second run reads the cached peak; a corrupt cache file is measured again, not trusted
rc, so, se = run("bench", MODEL, "-c", "EAGER", "-n", "5", "--min-time", "0.01", "--json", bench_json, "-q", env=env)
with open(bench_json) as f:
    mp2 = json.load(f)["machine_peak"]
check(rc == 0 and mp2["cached"] is True and mp2["sgemm_gflops"] == mp["sgemm_gflops"], f"second run did not use the cached peak: {mp2}")
with open(os.path.join(env["ALMA_CACHE_DIR"], cache_files[0]), "w") as f:
    f.write("{garbage")
rc, so, se = run("bench", MODEL, "-c", "EAGER", "-n", "5", "--min-time", "0.01", "--json", bench_json, "-q", env=env)
with open(bench_json) as f:
    mp3 = json.load(f)["machine_peak"]
check(rc == 0 and mp3["measured"] and mp3["cached"] is False, f"a corrupt cache file was not measured again: {mp3}")
rc, so, se = run("bench", MODEL, "-c", "EAGER", "-n", "5", "--min-time", "0.01", "--csv", "-", "-q", env=env)
csv_rows = list(csv.reader(io.StringIO(so))) if rc == 0 else [[]]
header = csv_rows[0]
check("roofline_gflops" in header and "roofline_bound" in header, f"CSV lacks the roofline columns: {header[-8:]}")
check(all(len(x) == len(header) for x in csv_rows[1:]), f"CSV rows' field counts {[len(x) for x in csv_rows]} for {len(header)} columns")
if len(csv_rows) > 1 and "roofline_gflops" in header:
    rec = dict(zip(header, csv_rows[1]))
    check(rec["roofline_bound"] in ("memory", "compute") and float(rec["roofline_gflops"]) > 0, f"CSV roofline values: {rec}")

# ---- the trace ------------------------------------------------------------------------------------
def validate_trace(path):
    """The Trace Event Format's JSON Object Format, as chrome://tracing and Perfetto's legacy JSON
    importer read it: a traceEvents array; every event with name, ph, pid, tid; complete events ("X")
    with numeric ts and dur >= 0 (microseconds); metadata events ("M") naming processes and threads
    through args.name; on each thread, complete events nest properly (a slice that starts inside
    another ends inside it)."""
    with open(path) as f:
        t = json.load(f)
    check(isinstance(t, dict) and isinstance(t.get("traceEvents"), list), "trace: no traceEvents array")
    check(t.get("displayTimeUnit") in (None, "ms", "ns"), "trace: displayTimeUnit must be ms or ns")
    evs = t.get("traceEvents", [])
    by_thread, named_p, named_t = {}, set(), set()
    for i, e in enumerate(evs):
        for k in ("name", "ph", "pid", "tid"):
            check(k in e, f"trace event {i}: no {k}: {e}")
        check(isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int), f"trace event {i}: pid/tid not integers")
        ph = e.get("ph")
        check(ph in ("X", "M"), f"trace event {i}: phase {ph!r} (alma writes X and M)")
        if ph == "X":
            check(isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0, f"trace event {i}: ts {e.get('ts')}")
            check(isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0, f"trace event {i}: dur {e.get('dur')}")
            check(isinstance(e.get("args", {}), dict), f"trace event {i}: args not an object")
            by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
        if ph == "M":
            check(e["name"] in ("process_name", "thread_name", "process_sort_index", "thread_sort_index"),
                  f"trace event {i}: metadata {e['name']}")
            if e["name"] in ("process_name", "thread_name"):
                check(isinstance(e.get("args", {}).get("name"), str), f"trace event {i}: metadata without args.name")
                (named_p if e["name"] == "process_name" else named_t).add((e["pid"], e["tid"]) if e["name"] == "thread_name" else e["pid"])
    for key, sl in by_thread.items():
        sl.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for a, b, n in sl:
            while stack and stack[-1] <= a + 1e-9:
                stack.pop()
            check(not stack or b <= stack[-1] + 1e-6, f"trace: slice {n} on {key} overlaps its parent without nesting")
            stack.append(b)
        check(key[0] in named_p and key in named_t, f"trace: track {key} has no process or thread name")
    return t, evs


t, evs = validate_trace(trace)
slices = [e for e in evs if e.get("ph") == "X" and e.get("cat") != "batch"]
ok_profiled = [r for r in bj["results"] if r.get("profile") and r["profile"].get("available")]
n_entries = sum(len(r["profile"]["nodes"]) for r in ok_profiled)
check(len(slices) == n_entries, f"trace: {len(slices)} node slices for {n_entries} profile entries")
check(len({e["pid"] for e in slices}) == len(ok_profiled), "trace: one process per profiled conversion")
for e in slices:
    check({"op_type", "placement"} <= set(e.get("args", {})), f"trace: slice {e['name']} lacks op_type/placement args")
# in execution order: the first slice of each process is the model's first node (a Conv in MNIST)
for r in ok_profiled:
    first = min(r["profile"]["nodes"], key=lambda n: n["order"])
    pid_slices = sorted([e for e in slices if e["name"] in {n["name"] for n in r["profile"]["nodes"]}], key=lambda e: e["ts"])
    check(pid_slices and pid_slices[0]["name"] == first["name"], f"trace: {r['conversion']}'s first slice is not its first node")
    orders = sorted(n["order"] for n in r["profile"]["nodes"])
    check(orders == sorted(set(orders)), f"{r['conversion']}: profile orders repeat: {orders}")
rc, so, se = run("bench", MODEL, "-c", "EAGER", "--trace", os.path.join(tmp, "t.json"), env=env)
check(rc == 2 and "--profile" in se, f"--trace without --profile: exit {rc}, {se!r}")
rc, so, se = run("bench", MODEL, "-c", "EAGER", "--json", "-", "--html", "-", env=env)
check(rc == 2, f"--json - and --html -: exit {rc}")

shutil.rmtree(tmp, ignore_errors=True)
if FAILS:
    print(f"{len(FAILS)} failure(s)")
    sys.exit(1)
print("ok")
