/* `alma sweep`: a models x conversions (x batch sizes, x partitions) sweep as a Slurm job array, one
 * task per combination, each task an `alma bench` pinned to the CPUs Slurm gives it; without Slurm
 * (or with --local) the same tasks run here one after another, so the files are the same.
 * `alma merge` gathers the tasks' JSON into one result file (docs/cli.md, docs/sweeps.md).
 *
 * A sweep directory holds tasks.tsv (a task a line: number, partition, model, conversion, batch
 * size), bench-args (the options passed to every `alma bench`, one a line), sweep.sbatch (the job
 * script), logs/task-N.out and results/task-N.json. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "cli.h"
#include "report/report.h"

#define MAX_TASKS 100000

static void sweep_usage(FILE *f) {
  fprintf(f,
          "usage: alma sweep MODEL... -c LIST -o DIR [options] [-- BENCH_OPTIONS...]\n\n"
          "One task per model x conversion (x batch size, x partition), each an `alma bench` of that\n"
          "one combination writing DIR/results/task-N.json. With Slurm (sbatch on PATH), a job array\n"
          "is submitted and waited for; otherwise, or with --local, the tasks run here one after\n"
          "another. MODEL may be a .onnx file, a directory of them or a list file (*.txt, *.list).\n"
          "Then `alma merge DIR` gathers the results.\n\n"
          "  -c, --conversions LIST   comma list of conversions (required)\n"
          "  -o, --output DIR         the sweep directory (created; must not hold a sweep)\n"
          "      --batch-sizes LIST   one task per batch size too (default: alma bench's batch size)\n"
          "      --cpus N             CPUs per task: Slurm's --cpus-per-task, and the bench's --threads\n"
          "                           unless BENCH_OPTIONS set it (default 1)\n"
          "      --partition LIST     Slurm partitions: every task on each of them (default: the\n"
          "                           cluster's default partition)\n"
          "      --time-limit MIN     Slurm time limit per task, minutes (default 30)\n"
          "      --local              run the tasks here even when Slurm is present\n"
          "      --no-wait            submit and return (merge when the job is done)\n"
          "  -h, --help               this help\n\n"
          "Exit status: 0 every task ran, 1 some task or conversion failed, 2 usage error,\n"
          "3 a model or list cannot be read.\n");
}

static void merge_usage(FILE *f) {
  fprintf(f,
          "usage: alma merge DIR... [-o FILE.json] [--csv FILE.csv] [--html FILE.html] [--raw]\n\n"
          "Gathers the task results of sweep directories (DIR/results/task-N.json) into one result\n"
          "set: a row per model x conversion x batch size x machine, each naming its model, task,\n"
          "node, partition, machine and CPUs (docs/json.md, origin). Prints the sweep's table.\n\n"
          "  -o, --output FILE        write the merged JSON ('-' for stdout)\n"
          "      --csv FILE           write the merged CSV\n"
          "      --html FILE          write the merged set as the HTML report (docs/report.md)\n"
          "      --raw                keep every batch latency (raw_ms) in the JSON\n"
          "  -h, --help               this help\n\n"
          "Exit status: 0 every task has a result and ran fine, 1 some task is missing or failed,\n"
          "2 usage error, 3 a directory or result file cannot be read.\n");
}

static int usage_err(const char *cmd, const char *fmt, const char *arg) {
  fprintf(stderr, "alma %s: ", cmd);
  fprintf(stderr, fmt, arg);
  fprintf(stderr, " (see alma %s --help)\n", cmd);
  return ALMA_EXIT_USAGE;
}

static int mkdir_p(const char *path) {
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
      *p = '/';
    }
  return mkdir(tmp, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

/* Runs argv (argv[0] a path) and waits; returns its exit status, 128 + signal, or -1. */
static int run_wait(char *const *argv, const char *out_path) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (out_path) {
      FILE *o = freopen(out_path, "w", stdout);
      if (!o) _exit(127);
      dup2(1, 2);
    }
    execv(argv[0], argv);
    fprintf(stderr, "alma: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  int ws;
  while (waitpid(pid, &ws, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

static int self_exe(char *buf, size_t n) {
  ssize_t k = readlink("/proc/self/exe", buf, n - 1);
  if (k <= 0) return -1;
  buf[k] = 0;
  return 0;
}

/* The first program named `name` on PATH into buf; 0 when found. */
static int on_path(const char *name, char *buf, size_t n) {
  const char *path = getenv("PATH");
  if (!path) return -1;
  for (const char *p = path; *p;) {
    size_t len = strcspn(p, ":");
    snprintf(buf, n, "%.*s/%s", (int)len, p, name);
    if (len && access(buf, X_OK) == 0) return 0;
    p += len + (p[len] == ':');
  }
  return -1;
}

typedef struct {
  char *partition, *model, *conversion;
  long long batch;  /* 0: the bench's own */
} task_t;

static int split_list(char *text, char **out, int cap) {
  int n = 0;
  for (char *save = NULL, *p = strtok_r(text, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
    while (*p == ' ') p++;
    if (*p && n < cap) out[n++] = p;
  }
  return n;
}

/* ---- writing and submitting ---------------------------------------------------------------- */
static int write_sweep(const char *dir, task_t *t, int n, char **bench_args, int n_args, int cpus, int minutes,
                       const char *exe) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/tasks.tsv", dir);
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "# task\tpartition\tmodel\tconversion\tbatch_size\n");
  for (int i = 0; i < n; i++)
    fprintf(f, "%d\t%s\t%s\t%s\t%lld\n", i, t[i].partition ? t[i].partition : "", t[i].model, t[i].conversion, t[i].batch);
  if (fclose(f) != 0) return -1;
  snprintf(path, sizeof path, "%s/bench-args", dir);
  if (!(f = fopen(path, "w"))) return -1;
  fprintf(f, "--cpus=%d\n", cpus);  /* the sweep's own line first */
  for (int i = 0; i < n_args; i++) fprintf(f, "%s\n", bench_args[i]);
  if (fclose(f) != 0) return -1;
  snprintf(path, sizeof path, "%s/sweep.sbatch", dir);
  if (!(f = fopen(path, "w"))) return -1;
  fprintf(f,
          "#!/bin/sh\n"
          "# alma sweep's job script: array task N runs task N of tasks.tsv\n"
          "#SBATCH --job-name=alma-sweep\n"
          "#SBATCH --ntasks=1\n"
          "#SBATCH --cpus-per-task=%d\n"
          "#SBATCH --time=%d\n"
          "#SBATCH --output=%s/logs/task-%%a.out\n"
          "exec '%s' sweep --task '%s' \"$SLURM_ARRAY_TASK_ID\"\n",
          cpus, minutes, dir, exe, dir);
  if (fclose(f) != 0) return -1;
  chmod(path, 0755);
  return 0;
}

/* sbatch --parsable prints "JOBID" or "JOBID;CLUSTER". */
static int submit(const char *sbatch, const char *dir, const char *partition, int lo, int hi, char *job, size_t jn) {
  char cmd[PATH_MAX * 2 + 256], script[PATH_MAX + 32];
  snprintf(script, sizeof script, "%s/sweep.sbatch", dir);
  snprintf(cmd, sizeof cmd, "'%s' --parsable --array=%d-%d%s%s '%s'", sbatch, lo, hi, partition ? " --partition=" : "",
           partition ? partition : "", script);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  char line[256] = "";
  if (!fgets(line, sizeof line, p)) line[0] = 0;
  int rc = pclose(p);
  line[strcspn(line, ";\r\n")] = 0;
  if (rc != 0 || !line[0]) return -1;
  snprintf(job, jn, "%s", line);
  return 0;
}

/* Waits until squeue lists none of the jobs (comma list). */
static int wait_jobs(const char *squeue, const char *jobs, int n_tasks) {
  char cmd[PATH_MAX + 512];
  snprintf(cmd, sizeof cmd, "'%s' -h -r -j '%s' -o %%i 2>/dev/null", squeue, jobs);
  time_t last = 0;
  for (;;) {
    if (alma__interrupted()) return -1;
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    int left = 0;
    char line[256];
    while (fgets(line, sizeof line, p)) left++;
    if (pclose(p) != 0 && left == 0) return 0;  /* squeue forgets finished jobs */
    if (left == 0) return 0;
    if (time(NULL) - last >= 10) {
      fprintf(stderr, "alma sweep: %d of %d tasks pending or running (jobs %s)\n", left, n_tasks, jobs);
      last = time(NULL);
    }
    sleep(2);
  }
}

static void on_signal(int sig) { alma__interrupt(sig); }

int alma_cmd_sweep(int argc, char **argv) {
  if (argc >= 4 && !strcmp(argv[1], "--task")) return alma_cli_sweep_task(argv[2], argv[3]);
  enum { O_BATCH = 256, O_CPUS, O_PARTITION, O_TIME, O_LOCAL, O_NO_WAIT };
  static const struct option opts[] = {
      {"conversions", required_argument, 0, 'c'}, {"output", required_argument, 0, 'o'},
      {"batch-sizes", required_argument, 0, O_BATCH}, {"cpus", required_argument, 0, O_CPUS},
      {"partition", required_argument, 0, O_PARTITION}, {"time-limit", required_argument, 0, O_TIME},
      {"local", no_argument, 0, O_LOCAL}, {"no-wait", no_argument, 0, O_NO_WAIT},
      {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  const char *conv_arg = NULL, *out_dir = NULL, *batch_arg = NULL, *part_arg = NULL;
  int cpus = 1, minutes = 30, local = 0, no_wait = 0;
  /* What follows "--" goes to every alma bench: split there before getopt sees it. */
  int own_argc = argc, first_bench = argc;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--")) {
      own_argc = i;
      first_bench = i + 1;
      break;
    }
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(own_argc, argv, ":c:o:h", opts, NULL)) != -1) {
    char *end;
    switch (c) {
      case 'c': conv_arg = optarg; break;
      case 'o': out_dir = optarg; break;
      case O_BATCH: batch_arg = optarg; break;
      case O_CPUS:
        cpus = (int)strtol(optarg, &end, 10);
        if (*end || cpus < 1 || cpus > 4096) return usage_err("sweep", "--cpus '%s': an integer 1..4096", optarg);
        break;
      case O_PARTITION: part_arg = optarg; break;
      case O_TIME:
        minutes = (int)strtol(optarg, &end, 10);
        if (*end || minutes < 1) return usage_err("sweep", "--time-limit '%s': minutes >= 1", optarg);
        break;
      case O_LOCAL: local = 1; break;
      case O_NO_WAIT: no_wait = 1; break;
      case 'h': sweep_usage(stdout); return ALMA_EXIT_OK;
      case ':': return usage_err("sweep", "option '%s' needs a value", argv[optind - 1]);
      default: return usage_err("sweep", "unknown option '%s' (bench options go after --)", argv[optind - 1]);
    }
  }
  int n_models_args = own_argc - optind;
  if (!conv_arg) return usage_err("sweep", "%s", "-c LIST is required (the conversions)");
  if (!out_dir) return usage_err("sweep", "%s", "-o DIR is required (the sweep directory)");
  if (n_models_args <= 0) return usage_err("sweep", "%s", "no model given");

  int code = ALMA_EXIT_OK;
  task_t *t = NULL;
  char *conv_copy = NULL, *part_copy = NULL, **models = NULL;
  int n_models = 0;
  /* models: files, directories and list files */
  int cap = 0;
  for (int i = 0; i < n_models_args; i++) {
    char **sub = NULL;
    int ns = 0, k = alma_cli_suite_models(argv[optind + i], &sub, &ns);
    if (k < 0) { code = alma_cli_fail(ALMA_ERR_IO, "sweep"); goto out; }
    if (k == 0) {
      if (access(argv[optind + i], R_OK) != 0) {
        fprintf(stderr, "alma: error: sweep: cannot read model '%s': %s\n", argv[optind + i], strerror(errno));
        code = ALMA_EXIT_INPUT;
        goto out;
      }
      sub = malloc(sizeof *sub);
      if (!sub || !(sub[0] = strdup(argv[optind + i]))) { code = alma_cli_fail(ALMA_ERR_NOMEM, "sweep"); goto out; }
      ns = 1;
    }
    if (n_models + ns > cap) {
      cap = (n_models + ns) * 2;
      char **nm = realloc(models, (size_t)cap * sizeof *nm);
      if (!nm) { code = alma_cli_fail(ALMA_ERR_NOMEM, "sweep"); goto out; }
      models = nm;
    }
    for (int j = 0; j < ns; j++) {
      char abs[PATH_MAX];
      models[n_models++] = realpath(sub[j], abs) ? strdup(abs) : strdup(sub[j]);
      free(sub[j]);
    }
    free(sub);
  }
  conv_copy = strdup(conv_arg), part_copy = part_arg ? strdup(part_arg) : NULL;
  if (!conv_copy || (part_arg && !part_copy)) { code = alma_cli_fail(ALMA_ERR_NOMEM, "sweep"); goto out; }
  char *convs[256], *parts[64];
  int n_conv = split_list(conv_copy, convs, 256), n_parts = part_copy ? split_list(part_copy, parts, 64) : 0;
  int64_t bsv[64];
  int n_bs = 0;
  if (batch_arg && (n_bs = alma__config_list("batch_sizes", batch_arg, 0, bsv, 64)) < 0) {
    fprintf(stderr, "alma sweep: --batch-sizes: %s\n", alma_last_error());
    code = ALMA_EXIT_USAGE;
    goto out;
  }
  if (n_conv == 0) { code = usage_err("sweep", "-c '%s': an empty list", conv_arg); goto out; }
  long long n_tasks = (long long)(n_parts ? n_parts : 1) * n_models * n_conv * (n_bs ? n_bs : 1);
  if (n_tasks > MAX_TASKS) {
    fprintf(stderr, "alma sweep: %lld tasks, more than %d\n", n_tasks, MAX_TASKS);
    code = ALMA_EXIT_USAGE;
    goto out;
  }
  t = calloc((size_t)n_tasks, sizeof *t);
  if (!t) { code = alma_cli_fail(ALMA_ERR_NOMEM, "sweep"); goto out; }
  int n = 0;
  for (int p = 0; p < (n_parts ? n_parts : 1); p++)  /* partition-major: each partition a range */
    for (int m = 0; m < n_models; m++)
      for (int k = 0; k < n_conv; k++)
        for (int b = 0; b < (n_bs ? n_bs : 1); b++)
          t[n++] = (task_t){n_parts ? parts[p] : NULL, models[m], convs[k], n_bs ? (long long)bsv[b] : 0};

  char dir[PATH_MAX], exe[PATH_MAX], path[PATH_MAX + 64];
  if (mkdir_p(out_dir) != 0 || !realpath(out_dir, dir)) {
    fprintf(stderr, "alma: error: sweep: cannot create '%s': %s\n", out_dir, strerror(errno));
    code = ALMA_EXIT_INPUT;
    goto out;
  }
  snprintf(path, sizeof path, "%s/tasks.tsv", dir);
  if (access(path, F_OK) == 0) {
    fprintf(stderr, "alma sweep: '%s' holds a sweep already (tasks.tsv): give a new directory\n", dir);
    code = ALMA_EXIT_USAGE;
    goto out;
  }
  snprintf(path, sizeof path, "%s/logs", dir);
  mkdir_p(path);
  snprintf(path, sizeof path, "%s/results", dir);
  mkdir_p(path);
  if (self_exe(exe, sizeof exe) != 0) { code = alma_cli_fail(ALMA_ERR_IO, "sweep: /proc/self/exe"); goto out; }
  if (write_sweep(dir, t, n, argv + first_bench, argc - first_bench, cpus, minutes, exe) != 0) {
    fprintf(stderr, "alma: error: sweep: writing '%s': %s\n", dir, strerror(errno));
    code = ALMA_EXIT_INPUT;
    goto out;
  }
  char sbatch[PATH_MAX], squeue[PATH_MAX];
  int slurm = !local && on_path("sbatch", sbatch, sizeof sbatch) == 0 && on_path("squeue", squeue, sizeof squeue) == 0;
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  if (slurm) {
    char jobs[1024] = "";
    for (int p = 0; p < (n_parts ? n_parts : 1); p++) {
      int per = n / (n_parts ? n_parts : 1), lo = p * per, hi = lo + per - 1;
      char job[64];
      if (submit(sbatch, dir, n_parts ? parts[p] : NULL, lo, hi, job, sizeof job) != 0) {
        fprintf(stderr, "alma sweep: sbatch failed for tasks %d-%d%s%s (the job script is %s/sweep.sbatch; --local "
                        "runs the tasks here)\n", lo, hi, n_parts ? " on partition " : "", n_parts ? parts[p] : "", dir);
        code = ALMA_EXIT_FAILED;
        goto out;
      }
      size_t jl = strlen(jobs);
      snprintf(jobs + jl, sizeof jobs - jl, "%s%s", jl ? "," : "", job);
      printf("submitted job %s: tasks %d-%d%s%s, %d CPU%s each\n", job, lo, hi, n_parts ? " on partition " : "",
             n_parts ? parts[p] : "", cpus, cpus == 1 ? "" : "s");
    }
    fflush(stdout);
    if (no_wait) {
      printf("when it is done: alma merge %s\n", dir);
      code = ALMA_EXIT_OK;
      goto out;
    }
    if (wait_jobs(squeue, jobs, n) != 0) { code = alma__interrupted() ? 128 + alma__interrupted() : ALMA_EXIT_FAILED; goto out; }
  } else {
    if (!local) printf("no Slurm here (sbatch not on PATH): running the %d tasks here, one after another\n", n);
    for (int i = 0; i < n && !alma__interrupted(); i++) {
      char idx[16], log[PATH_MAX + 64];
      snprintf(idx, sizeof idx, "%d", i);
      snprintf(log, sizeof log, "%s/logs/task-%d.out", dir, i);
      printf("[%d/%d] %s %s%s%s\n", i + 1, n, t[i].model, t[i].conversion, t[i].batch ? " batch " : "",
             t[i].batch ? (snprintf(path, sizeof path, "%lld", t[i].batch), path) : "");
      fflush(stdout);
      char *av[] = {exe, "sweep", "--task", dir, idx, NULL};
      int rc = run_wait(av, log);
      if (rc != 0 && rc != ALMA_EXIT_FAILED) fprintf(stderr, "alma sweep: task %d exited %d (log %s)\n", i, rc, log);
      if (rc != 0) code = ALMA_EXIT_FAILED;
    }
  }
  /* every task's result there? */
  int missing = 0;
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/results/task-%d.json", dir, i);
    if (access(path, R_OK) != 0) {
      if (missing++ < 10) fprintf(stderr, "alma sweep: task %d has no result (log %s/logs/task-%d.out)\n", i, dir, i);
      code = ALMA_EXIT_FAILED;
    }
  }
  printf("%d of %d tasks have results in %s/results; alma merge %s gathers them\n", n - missing, n, dir, dir);
  if (alma__interrupted()) code = 128 + alma__interrupted();
out:
  free(t);
  free(conv_copy);
  free(part_copy);
  alma_cli_suite_free(models, n_models);
  return code;
}

/* ---- one task ------------------------------------------------------------------------------- */
static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = len >= 0 ? malloc((size_t)len + 1) : NULL;
  if (s && fread(s, 1, (size_t)len, f) != (size_t)len) {
    free(s);
    s = NULL;
  }
  if (s) s[len] = 0;
  fclose(f);
  return s;
}

static void add_str(cJSON *o, const char *k, const char *v) {
  cJSON_AddItemToObject(o, k, v && *v ? cJSON_CreateString(v) : cJSON_CreateNull());
}

int alma_cli_sweep_task(const char *dir, const char *index) {
  char path[PATH_MAX + 64], *end;
  long want = strtol(index ? index : "", &end, 10);
  if (!index || !*index || *end || want < 0) {
    fprintf(stderr, "alma sweep --task: task number '%s' is not an integer >= 0 (SLURM_ARRAY_TASK_ID unset?)\n",
            index ? index : "");
    return ALMA_EXIT_USAGE;
  }
  snprintf(path, sizeof path, "%s/tasks.tsv", dir);
  char *tasks = read_text(path);
  if (!tasks) {
    fprintf(stderr, "alma: error: sweep --task: cannot read '%s': %s\n", path, strerror(errno));
    return ALMA_EXIT_INPUT;
  }
  char *fields[5] = {0};
  for (char *save = NULL, *line = strtok_r(tasks, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (line[0] == '#' || strtol(line, NULL, 10) != want) continue;
    int k = 0;
    for (char *p = line; k < 5; k++) {
      fields[k] = p;
      char *tab = strchr(p, '\t');
      if (!tab) break;
      *tab = 0;
      p = tab + 1;
    }
    if (k < 4) fields[0] = NULL;
    break;
  }
  if (!fields[0]) {
    fprintf(stderr, "alma: error: sweep --task: no task %ld in '%s'\n", want, path);
    free(tasks);
    return ALMA_EXIT_USAGE;
  }
  const char *partition = fields[1], *model = fields[2], *conversion = fields[3];
  long long batch = fields[4] ? strtoll(fields[4], NULL, 10) : 0;
  snprintf(path, sizeof path, "%s/bench-args", dir);
  char *args = read_text(path);
  char *av[512];
  int n = 0, cpus = 1, threads_given = 0;
  char exe[PATH_MAX], bjson[PATH_MAX + 64], bs[32], th[32];
  if (self_exe(exe, sizeof exe) != 0) return alma_cli_fail(ALMA_ERR_IO, "sweep --task: /proc/self/exe");
  snprintf(bjson, sizeof bjson, "%s/results/task-%ld.bench.json", dir, want);
  av[n++] = exe, av[n++] = "bench", av[n++] = (char *)model, av[n++] = "-c", av[n++] = (char *)conversion;
  if (batch > 0) snprintf(bs, sizeof bs, "%lld", batch), av[n++] = "-b", av[n++] = bs;
  av[n++] = "--json", av[n++] = bjson;
  for (char *save = NULL, *line = args ? strtok_r(args, "\n", &save) : NULL; line && n < 500;
       line = strtok_r(NULL, "\n", &save)) {
    if (!strncmp(line, "--cpus=", 7)) {
      cpus = atoi(line + 7);
      continue;
    }
    threads_given |= !strcmp(line, "--threads") || !strncmp(line, "--threads=", 10);
    av[n++] = line;
  }
  /* The task's threads: the CPUs it was given. Outside Slurm, the first `cpus` CPUs this process
   * may use, so that a local sweep runs as its Slurm tasks do. */
  cpu_set_t set;
  if (!getenv("SLURM_JOB_ID") && sched_getaffinity(0, sizeof set, &set) == 0) {
    cpu_set_t mine;
    CPU_ZERO(&mine);
    for (int c = 0, k = 0; c < CPU_SETSIZE && k < cpus; c++)
      if (CPU_ISSET(c, &set)) CPU_SET(c, &mine), k++;
    sched_setaffinity(0, sizeof mine, &mine);
  }
  if (!threads_given) snprintf(th, sizeof th, "%d", cpus), av[n++] = "--threads", av[n++] = th;
  av[n] = NULL;
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  const char *node = getenv("SLURMD_NODENAME") ? getenv("SLURMD_NODENAME") : host;
  fprintf(stderr, "alma sweep: task %ld on %s%s%s: %s -c %s\n", want, node, partition[0] ? ", partition " : "", partition,
          model, conversion);
  int rc = run_wait(av, NULL);
  char *text = read_text(bjson);
  cJSON *root = text ? cJSON_Parse(text) : NULL;
  free(text);
  if (!root) {
    fprintf(stderr, "alma sweep: task %ld: alma bench exited %d and wrote no result\n", want, rc);
    free(tasks);
    free(args);
    return rc ? rc : ALMA_EXIT_FAILED;
  }
  /* Every row names where it ran: the merge keeps rows apart by model and machine. */
  char job[128] = "", aff[256];
  if (getenv("SLURM_ARRAY_JOB_ID"))
    snprintf(job, sizeof job, "%s_%s", getenv("SLURM_ARRAY_JOB_ID"), getenv("SLURM_ARRAY_TASK_ID") ? getenv("SLURM_ARRAY_TASK_ID") : "");
  const char *slurm_part = getenv("SLURM_JOB_PARTITION");
  const cJSON *sys = cJSON_GetObjectItemCaseSensitive(root, "system");
  const cJSON *cpu = cJSON_GetObjectItemCaseSensitive(sys, "cpu_model");
  const cJSON *mh = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "model"), "hash");
  const cJSON *res = cJSON_GetObjectItemCaseSensitive(root, "results"), *r;
  cJSON_ArrayForEach(r, res) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(r, "affinity");
    cJSON *o = cJSON_CreateObject();
    add_str(o, "model", model);
    add_str(o, "model_hash", cJSON_IsString(mh) ? mh->valuestring : NULL);
    cJSON_AddNumberToObject(o, "task", (double)want);
    add_str(o, "node", node);
    add_str(o, "partition", slurm_part ? slurm_part : partition);
    add_str(o, "machine", cJSON_IsString(cpu) ? cpu->valuestring : NULL);
    add_str(o, "job", job);
    add_str(o, "cpus", cJSON_IsString(a) ? a->valuestring : alma__affinity_str(aff, sizeof aff));
    cJSON_DeleteItemFromObjectCaseSensitive((cJSON *)r, "origin");
    cJSON_AddItemToObject((cJSON *)r, "origin", o);
  }
  char *out = cJSON_Print(root);
  cJSON_Delete(root);
  char final[PATH_MAX + 64], tmp[PATH_MAX + 80];
  snprintf(final, sizeof final, "%s/results/task-%ld.json", dir, want);
  snprintf(tmp, sizeof tmp, "%s.tmp", final);
  FILE *f = out ? fopen(tmp, "w") : NULL;
  int ok = f && fputs(out, f) >= 0;
  if (f && fclose(f) != 0) ok = 0;
  free(out);
  if (!ok || rename(tmp, final) != 0) {
    fprintf(stderr, "alma: error: sweep --task: cannot write '%s': %s\n", final, strerror(errno));
    rc = ALMA_EXIT_INPUT;
  }
  remove(bjson);
  free(tasks);
  free(args);
  return rc;
}

/* ---- alma merge ----------------------------------------------------------------------------- */
int alma_cmd_merge(int argc, char **argv) {
  static const struct option opts[] = {{"output", required_argument, 0, 'o'}, {"csv", required_argument, 0, 'C'},
                                       {"html", required_argument, 0, 'H'}, {"raw", no_argument, 0, 'r'},
                                       {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  const char *json = NULL, *csv = NULL, *html = NULL;
  int raw = 0, c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
    switch (c) {
      case 'o': json = optarg; break;
      case 'C': csv = optarg; break;
      case 'H': html = optarg; break;
      case 'r': raw = 1; break;
      case 'h': merge_usage(stdout); return ALMA_EXIT_OK;
      case ':': return usage_err("merge", "option '%s' needs a value", argv[optind - 1]);
      default: return usage_err("merge", "unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind >= argc) return usage_err("merge", "%s", "a sweep directory is required");
  if (json && csv && !strcmp(json, "-") && !strcmp(csv, "-"))
    return usage_err("merge", "%s", "-o - and --csv - both write to standard output");
  alma_results *all = NULL;
  int code = ALMA_EXIT_OK, n_files = 0;
  for (int d = optind; d < argc; d++) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/tasks.tsv", argv[d]);
    char *tasks = read_text(path);
    if (!tasks) {
      fprintf(stderr, "alma: error: merge: '%s' is no sweep directory (no tasks.tsv): %s\n", argv[d], strerror(errno));
      alma_results_free(all);
      return ALMA_EXIT_INPUT;
    }
    int n_tasks = 0;
    for (char *p = tasks; *p; p++)
      if (*p == '\n') n_tasks++;
    n_tasks -= 1;  /* the header */
    free(tasks);
    for (int i = 0; i < n_tasks; i++) {
      snprintf(path, sizeof path, "%s/results/task-%d.json", argv[d], i);
      if (access(path, F_OK) != 0) {
        fprintf(stderr, "alma merge: task %d of %s has no result (its log: %s/logs/task-%d.out)\n", i, argv[d], argv[d], i);
        code = ALMA_EXIT_FAILED;
        continue;
      }
      alma_results *r = NULL;
      if (alma_results_load_json(path, &r) != ALMA_OK) {
        alma_cli_fail(ALMA_ERR_PARSE, "merge");
        alma_results_free(all);
        return ALMA_EXIT_INPUT;
      }
      n_files++;
      if (alma_cli_failures(r)) code = ALMA_EXIT_FAILED;
      if (!all) {
        all = r;
      } else {
        alma__results_append(all, r);
        alma_results_free(r);
      }
    }
  }
  if (!all) {
    fprintf(stderr, "alma merge: no task results to merge\n");
    return ALMA_EXIT_FAILED;
  }
  alma__results_relabel(all, argc - optind == 1 ? argv[optind] : "several sweeps");
  int to_stdout = (json && !strcmp(json, "-")) || (csv && !strcmp(csv, "-"));
  FILE *report = to_stdout ? stderr : stdout;
  fprintf(report, "merged %d task results, %d rows\n", n_files, alma_results_count(all));
  alma_cli_print_suite(all, report);
  if (json && alma__results_save_json_ex(all, json, raw, NULL, -1) != ALMA_OK) code = alma_cli_fail(ALMA_ERR_IO, "-o");
  if (csv && alma_results_save_csv(all, csv) != ALMA_OK) code = alma_cli_fail(ALMA_ERR_IO, "--csv");
  if (html) {
    char title[PATH_MAX + 32];
    snprintf(title, sizeof title, "alma sweep %s", alma_results_model_path(all));
    const alma_results *one = all;
    if (alma__html_write(html, &one, NULL, 1, NULL, title) != ALMA_OK) code = alma_cli_fail(ALMA_ERR_IO, "--html");
  }
  alma_results_free(all);
  return code;
}
