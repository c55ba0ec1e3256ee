"""What CPU a PyTorch row's timed phase got, measured in its process as alma's harness measures its
own rows (src/bench/contention.c): CPU time, time its threads waited for a CPU (schedstat), other
processes' and the hypervisor's time on its CPUs (/proc/stat), CPU pressure, and the same verdict."""
import os
import resource
import time

MIN_CPU_SHARE = 0.90
MAX_OTHERS_SHARE = 0.10
MAX_STEAL_SHARE = 0.05


def _sched():
    out = {}
    try:
        for t in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{t}/schedstat") as f:
                    out[t] = 1e-9 * int(f.read().split()[1])
            except (OSError, IndexError, ValueError):
                pass
    except OSError:
        return None
    return out or None


def _stat(cpus):
    hz = os.sysconf("SC_CLK_TCK") or 100
    busy = steal = 0.0
    seen = False
    try:
        with open("/proc/stat") as f:
            for line in f:
                p = line.split()
                if not p or not p[0].startswith("cpu") or p[0] == "cpu" or len(p) < 9:
                    continue
                if int(p[0][3:]) in cpus:
                    v = [int(x) for x in p[1:9]]
                    busy += (v[0] + v[1] + v[2] + v[5] + v[6]) / hz
                    steal += v[7] / hz
                    seen = True
    except (OSError, ValueError):
        return None
    return (busy, steal) if seen else None


def _psi():
    try:
        with open("/proc/pressure/cpu") as f:
            for line in f:
                if line.startswith("some ") and "total=" in line:
                    return 1e-6 * float(line.split("total=")[1].split()[0])
    except (OSError, ValueError):
        pass
    return None


class Snapshot:
    def __init__(self):
        self.cpus = sorted(os.sched_getaffinity(0))
        ru = resource.getrusage(resource.RUSAGE_SELF)
        self.cpu_s, self.nvcsw, self.nivcsw = ru.ru_utime + ru.ru_stime, ru.ru_nvcsw, ru.ru_nivcsw
        self.sched, self.stat, self.psi = _sched(), _stat(set(self.cpus)), _psi()
        self.wall = time.monotonic()


def measure(start, threads):
    """The results JSON's "contention" object of the phase since `start` (a Snapshot)."""
    end = Snapshot()
    c = {"wall_s": end.wall - start.wall, "threads": max(threads, 1), "cpus": len(start.cpus),
         "cpu_s": end.cpu_s - start.cpu_s, "voluntary_switches": end.nvcsw - start.nvcsw,
         "involuntary_switches": end.nivcsw - start.nivcsw, "run_delay_s": None, "cpu_share": None,
         "others_cpu_s": None, "steal_s": None, "psi_some_s": None, "disturbed": False, "reason": None,
         "spinning": False, "advice": None}
    need_threads = max(1, min(c["threads"], c["cpus"]))
    c["utilization"] = c["cpu_s"] / (need_threads * c["wall_s"]) if c["wall_s"] > 0 else None
    notes = []
    if start.sched is not None and end.sched is not None:
        d = sum(max(0.0, v - start.sched.get(t, 0.0)) for t, v in end.sched.items())
        c["run_delay_s"] = d
        if c["cpu_s"] + d > 0:
            c["cpu_share"] = c["cpu_s"] / (c["cpu_s"] + d)
    else:
        notes.append("no per-thread schedstat (run-queue wait unknown)")
    if start.stat and end.stat:
        c["others_cpu_s"] = max(0.0, end.stat[0] - start.stat[0] - c["cpu_s"])
        c["steal_s"] = end.stat[1] - start.stat[1]
    else:
        notes.append("no /proc/stat (other processes' CPU time and steal unknown)")
    if start.psi is not None and end.psi is not None:
        c["psi_some_s"] = end.psi - start.psi
    else:
        notes.append("no /proc/pressure/cpu (CPU pressure unknown)")
    c["notes"] = "; ".join(notes) or None
    _judge(c, need_threads)
    return c


def _judge(c, need_threads):
    if not c["wall_s"] > 0:
        return
    need = need_threads * c["wall_s"]
    why = []
    if c["cpu_share"] is not None:
        if c["cpu_share"] < MIN_CPU_SHARE:
            why.append(f"it got {100 * c['cpu_share']:.0f}% of the CPU it was ready to use ({c['cpu_s']:.3g} s CPU, "
                       f"{c['run_delay_s']:.3g} s waiting for a CPU over {c['wall_s']:.3g} s"
                       + (", its threads outnumber its CPUs" if c["threads"] > c["cpus"] else "") + ")")
    elif c["others_cpu_s"] is not None:
        if c["others_cpu_s"] > MAX_OTHERS_SHARE * need and c["cpu_s"] < MIN_CPU_SHARE * need:
            why.append(f"it got {100 * c['cpu_s'] / need:.0f}% of the CPU time its {need_threads} "
                       f"thread{'' if need_threads == 1 else 's'} asked for while other processes used "
                       f"{c['others_cpu_s']:.3g} s on its CPUs")
    if c["steal_s"] is not None and c["steal_s"] > MAX_STEAL_SHARE * need:
        why.append(f"the hypervisor stole {c['steal_s']:.3g} s of its CPUs' time ({100 * c['steal_s'] / need:.0f}% of "
                   f"{need:.3g} s needed)")
    if not why:
        return
    ctx = ""
    if c["others_cpu_s"] is not None:
        ctx += f"; other processes used {c['others_cpu_s']:.3g} s of CPU on its {c['cpus']} CPU" + \
            ("" if c["cpus"] == 1 else "s")
    ctx += f"; {c['involuntary_switches']} involuntary context switches"
    c["disturbed"] = True
    c["reason"] = "; ".join(why) + ctx
    if c["threads"] > 1 and os.environ.get("OMP_WAIT_POLICY", "").lower() != "passive":
        # PyTorch's CPU parallel backend is OpenMP (libgomp), whose threads spin at barriers
        c["spinning"] = True
        c["advice"] = ("PyTorch's OpenMP threads spin at every barrier: set OMP_WAIT_POLICY=passive in the "
                       "environment the benchmark starts in, or threads 1")
