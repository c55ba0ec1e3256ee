"""Two merged sweeps of the same tasks hold the same rows: identical in content (model, conversion,
batch size, status, the output check's figures, threads, task numbers) apart from timings and where
they ran. With --slurm NODE PARTITION, the first one's rows must say they ran on that node and
partition, as array tasks of one Slurm job, each pinned to one CPU.

usage: compare.py A.json B.json ROWS [--slurm NODE PARTITION] [--csv A.csv]
"""
import csv
import json
import os
import re
import sys

args = sys.argv[1:]
a_path, b_path, want = args[0], args[1], int(args[2])
slurm = args[args.index("--slurm") + 1:args.index("--slurm") + 3] if "--slurm" in args else None
csv_path = args[args.index("--csv") + 1] if "--csv" in args else None
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def content(r):
    """What must not depend on where or when a task ran."""
    o, k = r["origin"], r["check"]
    return {
        "model": os.path.basename(o["model"]), "model_hash": o["model_hash"], "task": o["task"],
        "conversion": r["conversion"], "id": r["id"], "batch_size": r["batch_size"], "status": r["status"],
        "error": r["error"], "mode": r["mode"], "scenario": r["scenario"], "threads": r["threads"],
        "check": (k["performed"], k["passed"], k["max_abs_err"], k["max_rel_err"], k["argmax_agreement"], k["cosine"]),
    }


def rows(path):
    with open(path) as f:
        d = json.load(f)
    return d, sorted((content(r) for r in d["results"]), key=lambda c: c["task"])


da, a = rows(a_path)
db, b = rows(b_path)
check(len(a) == want and len(b) == want, f"rows: {len(a)} and {len(b)}, expected {want}")
check(len({(c["model"], c["conversion"], c["batch_size"]) for c in a}) == want, "rows are not distinct combinations")
check([c["task"] for c in a] == list(range(want)), f"task numbers {[c['task'] for c in a]}")
for x, y in zip(a, b):
    check(x == y, f"task {x['task']} differs:\n  {x}\n  {y}")
for c in a:
    check(c["status"] == "ok" and c["check"][1] is not False, f"task {c['task']}: {c['status']} {c['error']}")

if slurm:
    node, partition = slurm
    jobs = set()
    for r in da["results"]:
        o = r["origin"]
        check(o["node"] == node and o["partition"] == partition, f"task {o['task']} ran on {o['node']}/{o['partition']}")
        m = re.fullmatch(r"(\d+)_(\d+)", o["job"] or "")
        check(m is not None, f"task {o['task']}: job {o['job']!r} is no array task")
        if m:
            jobs.add(m.group(1))
            check(int(m.group(2)) == o["task"], f"task {o['task']} ran as array task {m.group(2)}")
        # pinned: one CPU given, one thread used
        check(re.fullmatch(r"\d+", o["cpus"] or "") is not None, f"task {o['task']}: CPUs {o['cpus']!r}, not one")
        check(r["threads"] == 1 and r["affinity"] == o["cpus"], f"task {o['task']}: threads {r['threads']}")
        check(o["machine"] == da["system"]["cpu_model"], f"task {o['task']}: machine {o['machine']}")
    check(len(jobs) == 1, f"jobs {jobs}: one array expected")
    for r in db["results"]:
        check(r["origin"]["partition"] is None and r["origin"]["job"] is None, f"local task {r['origin']}")

if csv_path:
    with open(csv_path, newline="") as f:
        cr = list(csv.DictReader(f))
    check(len(cr) == want, f"CSV rows {len(cr)}")
    check(all(r["model"] and r["origin_task"] != "" for r in cr), "CSV rows without their model or task")
    if slurm:
        check(all(r["origin_partition"] == slurm[1] and r["origin_node"] == slurm[0] for r in cr), "CSV origin")

print("FAILED: %d" % len(FAILS) if FAILS else f"{want} rows agree")
sys.exit(1 if FAILS else 0)
