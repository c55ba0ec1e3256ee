/* Contention over the timed phase, measured in the conversion's own process: the CPU time it
 * received (getrusage), how long its threads waited on a run queue (schedstat), context switches,
 * the other processes' CPU time and the steal time on its CPUs (/proc/stat), and CPU pressure
 * (/proc/pressure/cpu). The rule that calls a phase disturbed is in alma__contention_judge and
 * docs/methodology.md. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity */
#endif
#include <dirent.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench/bench.h"
#include "runtimes/runtime.h"

static double tv_s(struct timeval t) { return (double)t.tv_sec + 1e-6 * (double)t.tv_usec; }

static void read_rusage(alma__cpu_snap *s) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) == 0) {
    s->cpu_s = tv_s(ru.ru_utime) + tv_s(ru.ru_stime);
    s->nvcsw = ru.ru_nvcsw;
    s->nivcsw = ru.ru_nivcsw;
  } else {
    s->cpu_s = NAN;
    s->nvcsw = s->nivcsw = -1;
  }
}

/* Per thread: the second field of /proc/self/task/TID/schedstat, ns spent runnable on a run
 * queue without running. */
static void read_sched(alma__cpu_snap *s) {
  s->n_tasks = 0;
  s->have_sched = 0;
  DIR *d = opendir("/proc/self/task");
  if (!d) return;
  struct dirent *e;
  int any = 0;
  while ((e = readdir(d)) && s->n_tasks < ALMA__MAX_TASKS) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%.20s/schedstat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    unsigned long long run, wait, slices;
    if (fscanf(f, "%llu %llu %llu", &run, &wait, &slices) == 3) {
      s->tid[s->n_tasks] = atoi(e->d_name);
      s->task_delay[s->n_tasks] = 1e-9 * (double)wait;
      s->n_tasks++;
      any = 1;
    }
    fclose(f);
  }
  closedir(d);
  s->have_sched = any;
}

static void read_stat(alma__cpu_snap *s) {
  s->have_stat = 0;
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return;
  double hz = (double)sysconf(_SC_CLK_TCK);
  if (!(hz > 0)) hz = 100;
  char line[512];
  for (int i = 0; i < s->n_cpus; i++) s->busy[i] = s->steal[i] = NAN;
  while (fgets(line, sizeof line, f)) {
    int cpu;
    unsigned long long v[8] = {0};
    /* cpuN user nice system idle iowait irq softirq steal (guest time is inside user) */
    if (sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
               &v[6], &v[7]) < 8)
      continue;
    for (int i = 0; i < s->n_cpus; i++)
      if (s->cpu[i] == cpu) {
        s->busy[i] = (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / hz;
        s->steal[i] = (double)v[7] / hz;
        s->have_stat = 1;
      }
  }
  fclose(f);
}

static double read_psi(void) {
  FILE *f = fopen("/proc/pressure/cpu", "r");
  if (!f) return NAN;
  char line[256];
  double out = NAN;
  while (fgets(line, sizeof line, f)) {
    const char *t = strstr(line, "total=");
    if (!strncmp(line, "some ", 5) && t) {
      out = 1e-6 * strtod(t + 6, NULL);
      break;
    }
  }
  fclose(f);
  return out;
}

static void read_affinity(alma__cpu_snap *s) {
  cpu_set_t set;
  s->n_cpus = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE && s->n_cpus < ALMA__MAX_CPUS; c++)
      if (CPU_ISSET(c, &set)) s->cpu[s->n_cpus++] = c;
  }
  if (s->n_cpus == 0) { /* unknown: count every online CPU */
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (int c = 0; c < n && c < ALMA__MAX_CPUS; c++) s->cpu[s->n_cpus++] = c;
  }
}

void alma__contention_begin(alma__cpu_snap *s) {
  memset(s, 0, sizeof *s);
  read_affinity(s);
  s->psi_some = read_psi();
  read_stat(s);
  read_sched(s);
  read_rusage(s);
  s->wall = alma__bench_now();
}

void alma__contention_clear(alma_contention *c) {
  free((char *)c->reason);
  free((char *)c->advice);
  free((char *)c->notes);
  memset(c, 0, sizeof *c);
}

void alma__contention_end(const alma__cpu_snap *s, int threads, const char *advice, alma_contention *c) {
  double wall = alma__bench_now();
  alma__cpu_snap *e = malloc(sizeof *e);
  alma__contention_clear(c);
  c->measured = 1;
  c->wall_s = wall - s->wall;
  c->threads = threads > 0 ? threads : 1;
  c->cpus = s->n_cpus;
  c->cpu_s = c->utilization = c->run_delay_s = c->cpu_share = c->others_cpu_s = c->steal_s = c->psi_some_s = NAN;
  c->voluntary_switches = c->involuntary_switches = -1;
  if (!e) return;
  memcpy(e->cpu, s->cpu, sizeof e->cpu);
  e->n_cpus = s->n_cpus;
  read_rusage(e);
  read_sched(e);
  read_stat(e);
  e->psi_some = read_psi();
  char notes[256] = "";
  c->cpu_s = e->cpu_s - s->cpu_s;
  int need_threads = c->threads < c->cpus ? c->threads : c->cpus;
  if (need_threads < 1) need_threads = 1;
  if (c->wall_s > 0) c->utilization = c->cpu_s / ((double)need_threads * c->wall_s);
  if (s->nvcsw >= 0 && e->nvcsw >= 0) {
    c->voluntary_switches = e->nvcsw - s->nvcsw;
    c->involuntary_switches = e->nivcsw - s->nivcsw;
  }
  if (s->have_sched && e->have_sched) {
    /* threads that started during the phase waited from zero; ones that ended are lost (rare:
     * runtimes keep their pools) */
    double d = 0;
    for (int i = 0; i < e->n_tasks; i++) {
      double before = 0;
      for (int j = 0; j < s->n_tasks; j++)
        if (s->tid[j] == e->tid[i]) before = s->task_delay[j];
      d += e->task_delay[i] - before > 0 ? e->task_delay[i] - before : 0;
    }
    c->run_delay_s = d;
    if (c->cpu_s + d > 0) c->cpu_share = c->cpu_s / (c->cpu_s + d);
  } else {
    strncat(notes, "no per-thread schedstat (run-queue wait unknown); ", sizeof notes - strlen(notes) - 1);
  }
  if (s->have_stat && e->have_stat) {
    double busy = 0, steal = 0;
    for (int i = 0; i < e->n_cpus; i++) {
      if (isfinite(e->busy[i]) && isfinite(s->busy[i])) busy += e->busy[i] - s->busy[i];
      if (isfinite(e->steal[i]) && isfinite(s->steal[i])) steal += e->steal[i] - s->steal[i];
    }
    /* /proc/stat counts in clock ticks: a difference within a tick per CPU is noise */
    c->others_cpu_s = busy - c->cpu_s > 0 ? busy - c->cpu_s : 0;
    c->steal_s = steal;
  } else {
    strncat(notes, "no /proc/stat (other processes' CPU time and steal unknown); ", sizeof notes - strlen(notes) - 1);
  }
  if (isfinite(s->psi_some) && isfinite(e->psi_some)) c->psi_some_s = e->psi_some - s->psi_some;
  else strncat(notes, "no /proc/pressure/cpu (CPU pressure unknown); ", sizeof notes - strlen(notes) - 1);
  size_t nl = strlen(notes);
  if (nl >= 2) {
    notes[nl - 2] = 0;
    c->notes = alma__strdup(notes);
  }
  free(e);
  alma__contention_judge(c, advice);
}

const char *alma__spin_advice_of(const char *runtime, const char *runtime_options, int threads) {
  const alma_runtime *rt = runtime ? alma__runtime_find(runtime) : NULL;
  alma_runtime_opts o = {.threads = threads, .options = runtime_options};
  return rt && rt->spin_advice ? rt->spin_advice(&o, threads) : NULL;
}

void alma__contention_judge(alma_contention *c, const char *advice) {
  free((char *)c->reason);
  free((char *)c->advice);
  c->reason = c->advice = NULL;
  c->disturbed = c->spinning = 0;
  if (!c->measured || !(c->wall_s > 0)) return;
  int need_threads = c->threads < c->cpus ? c->threads : c->cpus;
  if (need_threads < 1) need_threads = 1;
  double need = (double)need_threads * c->wall_s;
  char why[512] = "";
  size_t len = 0;
#define ADD(...)                                                                        \
  do {                                                                                  \
    int w_ = snprintf(why + len, sizeof why - len, "%s", len ? "; " : "");              \
    if (w_ > 0 && (size_t)w_ < sizeof why - len) len += (size_t)w_;                     \
    w_ = snprintf(why + len, sizeof why - len, __VA_ARGS__);                            \
    if (w_ > 0 && (size_t)w_ < sizeof why - len) len += (size_t)w_;                     \
  } while (0)
  if (isfinite(c->cpu_share)) {
    /* the direct measure: its threads were ready to run and waited for a CPU */
    if (c->cpu_share < ALMA__MIN_CPU_SHARE)
      ADD("it got %.0f%% of the CPU it was ready to use (%.3g s CPU, %.3g s waiting for a CPU over %.3g s%s)",
          100 * c->cpu_share, c->cpu_s, c->run_delay_s, c->wall_s,
          c->threads > c->cpus ? ", its threads outnumber its CPUs" : "");
  } else if (isfinite(c->others_cpu_s) && isfinite(c->cpu_s)) {
    /* without schedstat: others ran on its CPUs while it got less than it asked for */
    if (c->others_cpu_s > ALMA__MAX_OTHERS_SHARE * need && c->cpu_s < ALMA__MIN_CPU_SHARE * need)
      ADD("it got %.0f%% of the CPU time its %d thread%s asked for while other processes used %.3g s on its CPUs",
          100 * c->cpu_s / need, need_threads, need_threads == 1 ? "" : "s", c->others_cpu_s);
  }
  if (isfinite(c->steal_s) && c->steal_s > ALMA__MAX_STEAL_SHARE * need)
    ADD("the hypervisor stole %.3g s of its CPUs' time (%.0f%% of %.3g s needed)", c->steal_s,
        100 * c->steal_s / need, need);
#undef ADD
  if (!len) return;
  c->disturbed = 1;
  /* the context a reader needs to weigh it: other processes' time on these CPUs, pressure */
  char ctx[256] = "";
  int w = 0;
  if (isfinite(c->others_cpu_s))
    w = snprintf(ctx, sizeof ctx, "; other processes used %.3g s of CPU on its %d CPU%s", c->others_cpu_s, c->cpus,
                 c->cpus == 1 ? "" : "s");
  if (w >= 0 && (size_t)w < sizeof ctx && c->involuntary_switches >= 0)
    snprintf(ctx + w, sizeof ctx - (size_t)w, "; %lld involuntary context switches", (long long)c->involuntary_switches);
  char full[800];
  snprintf(full, sizeof full, "%s%s", why, ctx);
  c->reason = alma__strdup(full);
  /* threads that spin-wait suffer most: say what avoids it */
  if (advice && c->threads > 1) {
    c->spinning = 1;
    c->advice = alma__strdup(advice);
  }
}

/* ---- the public pair, for phases timed outside the harness (the Python package's PyTorch rows) */
struct alma_cpu_snapshot {
  alma__cpu_snap s;
};

alma_cpu_snapshot *alma_contention_begin(void) {
  alma_cpu_snapshot *p = malloc(sizeof *p);
  if (p) alma__contention_begin(&p->s);
  else alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  return p;
}

alma_status alma_contention_end(alma_cpu_snapshot *snap, int threads, const char *spin_advice, alma_contention *out) {
  if (!snap || !out) {
    free(snap);
    return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_contention_end: NULL %s", snap ? "out" : "snapshot");
  }
  memset(out, 0, sizeof *out);
  alma__contention_end(&snap->s, threads, spin_advice && spin_advice[0] ? spin_advice : NULL, out);
  free(snap);
  return ALMA_OK;
}

void alma_contention_clear(alma_contention *c) {
  if (c) alma__contention_clear(c);
}
