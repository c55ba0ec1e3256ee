/* `alma bench MODEL ...`: benchmark a model across conversion options (see docs/cli.md). */
#include <errno.h>
#include <ctype.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "bench/bench.h"
#include "cli.h"
#include "conversions/conversions.h"
#include "report/report.h"

#if defined(__SANITIZE_ADDRESS__)
#define ALMA_CLI_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ALMA_CLI_ASAN 1
#endif
#endif
#ifdef ALMA_CLI_ASAN
/* Sanitizer builds: ASan would catch SIGSEGV/SIGBUS/SIGFPE in a conversion's child and exit 1;
 * the harness's own crash handler reports them (signal, step, native backtrace) instead. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "handle_segv=0:handle_sigbus=0:handle_sigfpe=0"; }
#endif

#define ALMA_RIGOROUS_REPEAT 5

static void bench_usage(FILE *f) {
  fprintf(f,
          "usage: alma bench MODEL [options]\n\n"
          "Benchmarks MODEL under each conversion option, each in its own process, checks every\n"
          "conversion's outputs against EAGER's, and prints a report.\n\n"
          "what to run\n"
          "  -c, --conversions LIST   comma list of preset IDs, names or chains, in order\n"
          "                           (e.g. 0,FOLD+EAGER); default: every conversion available here\n"
          "      --device cpu|cuda    where conversions are meant to run (default cpu)\n"
          "      --no-device-override mark conversions on another device unavailable instead\n"
          "      --threads N          intra-op threads (default 0 = physical cores)\n"
          "data\n"
          "  -b, --batch-size N       samples per batch (default 1)\n"
          "      --input NAME:SHAPE[:DTYPE]\n"
          "                           shape (and dtype) of a random input, e.g. x:8x3x224x224:float32;\n"
          "                           otherwise symbolic dims take the batch size (first) or 1 (others)\n"
          "      --data PATH          data instead of random: a .npy per input (comma list), IDX files,\n"
          "                           or a directory of .npy batches\n"
          "      --data-scale S[:O]   file data converted to float inputs as x*S + O (e.g. 0.00392157)\n"
          "      --labels FILE        integer class ids (.npy or IDX), one per sample of --data: top-1\n"
          "                           accuracy of every conversion over the whole data set\n"
          "      --seed N             random data seed (default 0)\n"
          "      --batch-sizes LIST   a batch-size sweep, e.g. 1,8,32: results per batch size\n"
          "measurement\n"
          "  -n, --n-samples N        samples to time at least (default 100)\n"
          "      --min-time S         time each conversion at least S seconds (default 1)\n"
          "      --max-time S         stop timing after S seconds (default 60; 0 = no cap)\n"
          "      --target-ci X        also time until the median's 95%% CI is within +-X (0.01 = 1%%)\n"
          "      --warmup N           warm-up batches at least (default 5)\n"
          "      --warmup-time S      warm-up at least S seconds (default 0.1)\n"
          "      --timeout S          kill a conversion after S seconds (default 600; 0 = none)\n"
          "      --memory-limit MB    address-space limit of each conversion's process\n"
          "      --repeat K           each conversion in K processes, interleaved (A B C A B C ...):\n"
          "                           median of medians with a CI across processes (default 1)\n"
          "      --rigorous           numbers to publish: --repeat 5, --min-time 2, --warmup-time 1\n"
          "                           and --raw, unless given otherwise\n"
          "      --no-multiprocessing run conversions in this process (debugging)\n"
          "      --keep-going         go on after a failed conversion (default: stop)\n"
          "      --no-check           do not compare outputs with EAGER's\n"
          "      --rtol X, --atol X   output check tolerances (default 1e-3, 1e-4)\n"
          "      -O, --runtime-option RUNTIME.NAME=VALUE  a runtime setting, e.g. dnnl.winograd=off or\n"
          "                           ort.spinning=off; repeatable (alma list --options lists them)\n"
          "      --set KEY=VALUE      any configuration key (see docs/cli.md)\n"
          "      --duration S         each timed phase lasts S seconds (n-samples still met; without\n"
          "                           -n, n-samples is 1: run for a time instead of a count)\n"
          "throughput scaling (after the latency mode, which runs one request at a time)\n"
          "      --throughput         run the throughput mode: every instances x workers configuration\n"
          "      --instances LIST     model copies kept busy, MAX = physical cores (default 1,MAX)\n"
          "      --workers LIST       threads feeding each copy (default 1,2)\n"
          "scenarios (MLPerf LoadGen's names; docs/methodology.md)\n"
          "      --scenario NAME      single-stream (the latency mode alone; default), offline (adds\n"
          "                           the throughput mode) or server: Poisson arrivals at --target-qps\n"
          "                           served by the smallest --instances x --workers, VALID when the\n"
          "                           --latency-percentile latency from arrival is within the bound\n"
          "      --target-qps Q|auto  server arrival rate, queries (batches) per second; auto (default)\n"
          "                           searches for the highest VALID rate\n"
          "      --latency-bound-ms L the server's latency bound (required by --scenario server)\n"
          "      --latency-percentile P  the percentile held to the bound (default 99)\n"
          "build cache (docs/cache.md)\n"
          "      --cache-dir DIR      where builds are kept (default $ALMA_CACHE_DIR or ~/.cache/alma)\n"
          "      --no-cache           neither use nor store builds\n"
          "      --rebuild POLICY     if_needed (stale builds rebuilt; default), always, never (use\n"
          "                           what is there, stale or not)\n"
          "      --build-only         convert (and cache) each conversion without timing it\n"
          "      --lean-cache         keep only state files, logs and benchmark records\n"
          "      --calibrator NAME    INT8_STATIC calibration: minmax (default), percentile, entropy\n"
          "      --calibration-batches N  calibrate on the first N batches of the data (default 8;\n"
          "                           0: the pass's own random batches)\n"
          "output\n"
          "      --json FILE          write results as JSON (docs/json.md); '-' for stdout\n"
          "      --csv FILE           write results as CSV; '-' for stdout\n"
          "      --raw                include every batch latency in the JSON (raw_ms)\n"
          "      --html FILE          write the HTML report: one self-contained page with charts\n"
          "                           (docs/report.md); '-' for stdout\n"
          "      --trace FILE         with --profile: the profiled batches as a Chrome trace-event\n"
          "                           JSON (chrome://tracing, ui.perfetto.dev)\n"
          "      --save-converted DIR write each conversion's converted graph as DIR/<conversion>.onnx\n"
          "      --profile[=N]        after timing, profile at least N batches (default 10) and\n"
          "                           --profile-time with every node timed: the slowest nodes and\n"
          "                           op types per conversion, with their placement\n"
          "      --profile-time S     the profile lasts at least S seconds (default 1)\n"
          "  -v, --verbose            tracebacks in the report, children's stderr echoed\n"
          "  -q, --quiet              only the summary table\n"
          "  -h, --help               this help\n\n"
          "Exit status: 0 every conversion ran, 1 some conversion failed or was unavailable,\n"
          "2 usage error (bad option, unknown conversion), 3 model or data error; killed by\n"
          "SIGINT/SIGTERM/SIGHUP, it kills the running conversion and ends by that signal.\n");
}

enum {
  O_INPUT = 256, O_DATA, O_DATA_SCALE, O_DEVICE, O_NO_OVERRIDE, O_THREADS, O_NO_MP, O_KEEP_GOING, O_WARMUP,
  O_WARMUP_TIME, O_MIN_TIME, O_MAX_TIME, O_TARGET_CI, O_TIMEOUT, O_MEMORY, O_SEED, O_NO_CHECK, O_RTOL, O_ATOL,
  O_SET, O_JSON, O_CSV, O_RAW, O_BATCH_SIZES, O_THROUGHPUT, O_INSTANCES, O_WORKERS, O_DURATION, O_CACHE_DIR,
  O_NO_CACHE, O_REBUILD, O_BUILD_ONLY, O_LEAN_CACHE, O_CALIBRATOR, O_CALIB_BATCHES, O_LABELS, O_SAVE_CONVERTED,
  O_PROFILE, O_PROFILE_TIME, O_REPEAT, O_RIGOROUS, O_SCENARIO, O_TARGET_QPS, O_LATENCY_BOUND, O_LATENCY_PCT
};
enum { O_HTML = 512, O_TRACE };

static const struct option long_opts[] = {
    {"conversions", required_argument, 0, 'c'},
    {"batch-size", required_argument, 0, 'b'},
    {"n-samples", required_argument, 0, 'n'},
    {"input", required_argument, 0, O_INPUT},
    {"data", required_argument, 0, O_DATA},
    {"data-scale", required_argument, 0, O_DATA_SCALE},
    {"device", required_argument, 0, O_DEVICE},
    {"no-device-override", no_argument, 0, O_NO_OVERRIDE},
    {"threads", required_argument, 0, O_THREADS},
    {"no-multiprocessing", no_argument, 0, O_NO_MP},
    {"keep-going", no_argument, 0, O_KEEP_GOING},
    {"warmup", required_argument, 0, O_WARMUP},
    {"warmup-time", required_argument, 0, O_WARMUP_TIME},
    {"min-time", required_argument, 0, O_MIN_TIME},
    {"max-time", required_argument, 0, O_MAX_TIME},
    {"target-ci", required_argument, 0, O_TARGET_CI},
    {"timeout", required_argument, 0, O_TIMEOUT},
    {"memory-limit", required_argument, 0, O_MEMORY},
    {"seed", required_argument, 0, O_SEED},
    {"no-check", no_argument, 0, O_NO_CHECK},
    {"rtol", required_argument, 0, O_RTOL},
    {"atol", required_argument, 0, O_ATOL},
    {"set", required_argument, 0, O_SET},
    {"runtime-option", required_argument, 0, 'O'},
    {"json", required_argument, 0, O_JSON},
    {"csv", required_argument, 0, O_CSV},
    {"raw", no_argument, 0, O_RAW},
    {"html", required_argument, 0, O_HTML},
    {"trace", required_argument, 0, O_TRACE},
    {"batch-sizes", required_argument, 0, O_BATCH_SIZES},
    {"throughput", no_argument, 0, O_THROUGHPUT},
    {"instances", required_argument, 0, O_INSTANCES},
    {"workers", required_argument, 0, O_WORKERS},
    {"duration", required_argument, 0, O_DURATION},
    {"cache-dir", required_argument, 0, O_CACHE_DIR},
    {"no-cache", no_argument, 0, O_NO_CACHE},
    {"rebuild", required_argument, 0, O_REBUILD},
    {"build-only", no_argument, 0, O_BUILD_ONLY},
    {"lean-cache", no_argument, 0, O_LEAN_CACHE},
    {"calibrator", required_argument, 0, O_CALIBRATOR},
    {"calibration-batches", required_argument, 0, O_CALIB_BATCHES},
    {"labels", required_argument, 0, O_LABELS},
    {"save-converted", required_argument, 0, O_SAVE_CONVERTED},
    {"profile", optional_argument, 0, O_PROFILE},
    {"profile-time", required_argument, 0, O_PROFILE_TIME},
    {"repeat", required_argument, 0, O_REPEAT},
    {"rigorous", no_argument, 0, O_RIGOROUS},
    {"scenario", required_argument, 0, O_SCENARIO},
    {"target-qps", required_argument, 0, O_TARGET_QPS},
    {"latency-bound-ms", required_argument, 0, O_LATENCY_BOUND},
    {"latency-percentile", required_argument, 0, O_LATENCY_PCT},
    {"verbose", no_argument, 0, 'v'},
    {"quiet", no_argument, 0, 'q'},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

/* The progress line: on a terminal only, rewritten in place, erased when the sweep ends. */
typedef struct {
  int active;
} progress_state;

static void progress(void *user, int index, int count, const char *conversion, const char *phase, int64_t done,
                     int64_t total, double elapsed) {
  progress_state *p = user;
  if (!strcmp(phase, "done")) {
    if (p->active) fputs("\r\033[K", stderr);
    p->active = 0;
    return;
  }
  if (index == 0)
    fprintf(stderr, "\r\033[Kexamining the model: %s, %.1f s", phase, elapsed);
  else if (!strcmp(phase, "server"))
    fprintf(stderr, "\r\033[K[%d/%d] %s: server scenario, %.1f s", index, count, conversion, elapsed);
  else if (!strcmp(phase, "throughput") && total > 0)
    fprintf(stderr, "\r\033[K[%d/%d] %s: throughput mode, configuration %lld of %lld, %.1f s", index, count, conversion,
            (long long)done + 1, (long long)total, elapsed);
  else if (total > 0)
    fprintf(stderr, "\r\033[K[%d/%d] %s: %s, %lld batches (at least %lld), %.1f s", index, count, conversion, phase,
            (long long)done, (long long)total, elapsed);
  else
    fprintf(stderr, "\r\033[K[%d/%d] %s: %s, %.1f s", index, count, conversion, phase, elapsed);
  fflush(stderr);
  p->active = 1;
}

/* Without -c, the sweep runs every preset available here and leaves the rest out: which, and why,
 * goes into the text report and the JSON ("unavailable"), so that a missing row is not mistaken
 * for a missing feature. A preset was left out when no result has its ID; the reason is its
 * steps' and runtime's (as `alma list` gives it), else the device rules'. An available preset
 * that is missing because a failure stopped the sweep early is not unavailable: it is not listed.
 * Runtimes initialize here, in the parent: fine, the children have all run by now. */
typedef struct {
  alma__unavailable *items;
  int n;
  char (*reasons)[600];
} unavailable_list;

static int has_result(const alma_results *res, int id) {
  for (int i = 0; i < alma_results_count(res); i++)
    if (alma_result_id(alma_results_get(res, i)) == id) return 1;
  return 0;
}

static alma_status list_unavailable(const alma_results *res, const alma_config *cfg, int stopped_early,
                                    unavailable_list *out) {
  int np = alma__preset_count();
  out->n = 0;
  out->items = calloc((size_t)np + 1, sizeof *out->items);
  out->reasons = calloc((size_t)np + 1, sizeof *out->reasons);
  if (!out->items || !out->reasons) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  int device_rules = !cfg->allow_device_override || !cfg->allow_cuda;
  for (int i = 0; i < np; i++) {
    const alma_preset *p = alma__preset_at(i);
    if (has_result(res, p->id)) continue;
    char *why = out->reasons[out->n];
    if (res->probed) { /* the probe's answers: runtimes are never initialized here, in the parent */
      const char *r = NULL;
      for (int k = 0; k < res->n_unavailable && !r; k++)
        if (res->unavailable[k].id == p->id) r = res->unavailable[k].reason;
      if (!r) { /* a preset whose runtime is not built in was not probed: parsing it says so */
        alma_conversion c2;
        alma__error_clear();
        if (alma__conversion_parse(p->name, &c2) == ALMA_OK) continue; /* available, not run: stopped early */
        r = alma_last_error()[0] ? alma_last_error() : "its runtime is not built in";
      }
      snprintf(why, sizeof out->reasons[0], "%s", r);
      out->items[out->n++] = (alma__unavailable){p->id, p->name, why};
      continue;
    }
    /* no probe answered (the model did not load): the reasons from here */
    alma_conversion conv;
    alma__error_clear();
    alma_status st = alma__conversion_parse(p->name, &conv);
    if (st == ALMA_OK) st = alma__conversion_available(&conv);
    if (st != ALMA_OK)
      snprintf(why, sizeof out->reasons[0], "%s", alma_last_error()[0] ? alma_last_error() : alma_status_str(st));
    else if (device_rules && !stopped_early)
      snprintf(why, sizeof out->reasons[0], "left out by the device rules (device %s, allow_device_override %s, allow_cuda %s)",
               cfg->device, cfg->allow_device_override ? "on" : "off", cfg->allow_cuda ? "on" : "off");
    else
      continue;
    out->items[out->n++] = (alma__unavailable){p->id, p->name, why};
  }
  alma__error_clear();
  return ALMA_OK;
}

static void unavailable_free(unavailable_list *u) {
  free(u->items);
  free(u->reasons);
}

static void print_not_run(FILE *f, const unavailable_list *u) {
  if (u->n) fprintf(f, "not run (unavailable here; `alma list` has them all):\n");
  for (int i = 0; i < u->n; i++) fprintf(f, "  %3d  %-24s %s\n", u->items[i].id, u->items[i].name, u->items[i].reason);
}

/* SIGINT, SIGTERM, SIGHUP: the running conversion's process (and what it started) is killed,
 * the sweep stops, what ran is reported, and alma ends by the same signal. A second one ends it
 * at once. */
static void on_stop_signal(int sig) {
  if (alma__interrupted()) {
    alma__interrupt(sig);
    _exit(128 + sig);
  }
  alma__interrupt(sig);
}

static void catch_stop_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0; /* no SA_RESTART: the wait for the child wakes up */
  int sigs[] = {SIGINT, SIGTERM, SIGHUP};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, NULL);
}

static int end_interrupted(void) {
  int sig = alma__interrupted();
  char sn[32];
  fflush(NULL);
  fprintf(stderr, "alma bench: interrupted by %s: the running conversion was killed, the rest not run\n",
          alma__signal_name(sig, sn, sizeof sn));
  signal(sig, SIG_DFL);
  raise(sig);
  return 128 + sig;
}

/* A failed throughput configuration or server scenario is a failure too, though its conversion's
 * row is ok (an INVALID server result is a result, not a failure). */
int alma_cli_failures(const alma_results *res) {
  int n = alma_results_n_failed(res);
  for (int i = 0; i < alma_results_count(res); i++) {
    const alma_result *r = alma_results_get(res, i);
    if (alma_result_status_code(r) != ALMA_RESULT_OK) continue;
    int bad = alma_result_server(r) && alma_result_server(r)->error;
    for (int j = 0; !bad && j < alma_result_n_scaling(r); j++) bad = alma_result_scaling(r, j)->error != NULL;
    n += bad;
  }
  return n;
}

static int usage_error(const char *fmt, const char *arg) {
  fputs("alma bench: ", stderr);
  fprintf(stderr, fmt, arg);
  fputs(" (see alma bench --help)\n", stderr);
  return ALMA_EXIT_USAGE;
}

/* Sets a config key from an option, reporting with the option's own name. */
static int set_key(alma_config *cfg, const char *opt, const char *key, const char *value) {
  if (alma_config_set(cfg, key, value) == ALMA_OK) return 0;
  fprintf(stderr, "alma bench: %s: %s\n", opt, alma_last_error());
  return 1;
}

int alma_cmd_bench(int argc, char **argv) {
  alma_config cfg;
  alma_config_init(&cfg);
  const char *conv_list = NULL, *data_path = NULL, *json_path = NULL, *csv_path = NULL, *scale = NULL;
  const char *html_path = NULL, *trace_path = NULL;
  const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
  int n_inputs = 0, raw = 0, verbose = 0, quiet = 0, bad = 0, n_given = 0, duration_given = 0;
  int rigorous = 0, repeat_given = 0, min_time_given = 0, warmup_time_given = 0, sessions_given = 0;
  if (!inputs) return alma_cli_fail(ALMA_ERR_NOMEM, "bench");
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":c:b:n:O:vqh", long_opts, NULL)) != -1) {
    switch (c) {
      case 'c': conv_list = optarg; break;
      case 'b': bad |= set_key(&cfg, "--batch-size", "batch_size", optarg); break;
      case 'n': bad |= set_key(&cfg, "--n-samples", "n_samples", optarg); n_given = 1; break;
      case O_INPUT: inputs[n_inputs++] = optarg; break;
      case O_DATA: data_path = optarg; break;
      case O_DATA_SCALE: scale = optarg; break;
      case O_DEVICE: bad |= set_key(&cfg, "--device", "device", optarg); break;
      case O_NO_OVERRIDE: cfg.allow_device_override = 0; break;
      case O_THREADS: bad |= set_key(&cfg, "--threads", "threads", optarg); break;
      case O_NO_MP: cfg.multiprocessing = 0; break;
      case O_KEEP_GOING: cfg.fail_on_error = 0; break;
      case O_WARMUP: bad |= set_key(&cfg, "--warmup", "warmup", optarg); break;
      case O_WARMUP_TIME: bad |= set_key(&cfg, "--warmup-time", "warmup_s", optarg); warmup_time_given = 1; break;
      case O_MIN_TIME: bad |= set_key(&cfg, "--min-time", "min_time_s", optarg); min_time_given = 1; break;
      case O_REPEAT: bad |= set_key(&cfg, "--repeat", "repeat", optarg); repeat_given = 1; break;
      case O_RIGOROUS: rigorous = 1; break;
      case O_MAX_TIME: bad |= set_key(&cfg, "--max-time", "max_time_s", optarg); break;
      case O_TARGET_CI: bad |= set_key(&cfg, "--target-ci", "target_rel_ci", optarg); break;
      case O_TIMEOUT: bad |= set_key(&cfg, "--timeout", "timeout_s", optarg); break;
      case O_MEMORY: bad |= set_key(&cfg, "--memory-limit", "memory_limit_mb", optarg); break;
      case O_SEED: bad |= set_key(&cfg, "--seed", "seed", optarg); break;
      case O_NO_CHECK: cfg.check_outputs = 0; break;
      case O_RTOL: bad |= set_key(&cfg, "--rtol", "rtol", optarg); break;
      case O_ATOL: bad |= set_key(&cfg, "--atol", "atol", optarg); break;
      case 'O': {
        /* repeatable: appended to what is there, each entry checked as it comes */
        char all[sizeof cfg.runtime_options];
        int w = snprintf(all, sizeof all, "%s%s%s", cfg.runtime_options, cfg.runtime_options[0] ? "," : "", optarg);
        if (w < 0 || (size_t)w >= sizeof all) return usage_error("--runtime-option '%s': too many options in all", optarg);
        bad |= set_key(&cfg, "--runtime-option", "runtime_options", all);
        break;
      }
      case O_SET: {
        char key[64];
        const char *eq = strchr(optarg, '=');
        if (!eq || eq == optarg || (size_t)(eq - optarg) >= sizeof key) {
          free(inputs);
          return usage_error("--set '%s': expected KEY=VALUE", optarg);
        }
        memcpy(key, optarg, (size_t)(eq - optarg));
        key[eq - optarg] = 0;
        bad |= set_key(&cfg, "--set", key, eq + 1);
        break;
      }
      case O_JSON: json_path = optarg; break;
      case O_CSV: csv_path = optarg; break;
      case O_RAW: raw = 1; break;
      case O_HTML: html_path = optarg; break;
      case O_TRACE: trace_path = optarg; break;
      case O_BATCH_SIZES: bad |= set_key(&cfg, "--batch-sizes", "batch_sizes", optarg); break;
      case O_THROUGHPUT: cfg.throughput = 1; break;
      case O_INSTANCES: bad |= set_key(&cfg, "--instances", "instances", optarg); sessions_given = 1; break;
      case O_WORKERS: bad |= set_key(&cfg, "--workers", "workers", optarg); sessions_given = 1; break;
      case O_DURATION: bad |= set_key(&cfg, "--duration", "duration_s", optarg); duration_given = 1; break;
      case O_CACHE_DIR: bad |= set_key(&cfg, "--cache-dir", "cache_dir", optarg); break;
      case O_NO_CACHE: cfg.cache = 0; break;
      case O_REBUILD: bad |= set_key(&cfg, "--rebuild", "rebuild", optarg); break;
      case O_BUILD_ONLY: cfg.build_only = 1; break;
      case O_LEAN_CACHE: cfg.lean_cache = 1; break;
      case O_CALIBRATOR: bad |= set_key(&cfg, "--calibrator", "calibrator", optarg); break;
      case O_CALIB_BATCHES: bad |= set_key(&cfg, "--calibration-batches", "calibration_batches", optarg); break;
      case O_LABELS: bad |= set_key(&cfg, "--labels", "labels", optarg); break;
      case O_SAVE_CONVERTED: bad |= set_key(&cfg, "--save-converted", "save_converted", optarg); break;
      case O_PROFILE:
        if (optarg && !strcmp(optarg, "0")) {  /* 0 would turn it off: not what --profile asks */
          free(inputs);
          return usage_error("--profile=%s: at least 1 batch", optarg);
        }
        bad |= set_key(&cfg, "--profile", "profile", optarg ? optarg : "10");
        break;
      case O_PROFILE_TIME: bad |= set_key(&cfg, "--profile-time", "profile_time_s", optarg); break;
      case O_SCENARIO: {
        /* SingleStream, single-stream and single_stream alike */
        char w[32];
        size_t k = 0;
        for (const char *p = optarg; *p && k + 1 < sizeof w; p++)
          if (*p != '-' && *p != '_') w[k++] = (char)tolower((unsigned char)*p);
        w[k] = 0;
        const char *key = !strcmp(w, "singlestream") ? "single_stream" : !strcmp(w, "offline") ? "offline"
                          : !strcmp(w, "server")      ? "server"
                                                      : NULL;
        if (!key) {
          free(inputs);
          return usage_error("--scenario '%s': expected single-stream, offline or server", optarg);
        }
        bad |= set_key(&cfg, "--scenario", "scenario", key);
        break;
      }
      case O_TARGET_QPS:
        bad |= set_key(&cfg, "--target-qps", "target_qps", !strcasecmp(optarg, "auto") ? "0" : optarg);
        if (!strcmp(optarg, "0")) {
          free(inputs);
          return usage_error("--target-qps %s: a rate > 0, or auto for the search", optarg);
        }
        break;
      case O_LATENCY_BOUND: bad |= set_key(&cfg, "--latency-bound-ms", "latency_bound_ms", optarg); break;
      case O_LATENCY_PCT: bad |= set_key(&cfg, "--latency-percentile", "latency_percentile", optarg); break;
      case 'v': verbose = 1; break;
      case 'q': quiet = 1; break;
      case 'h':
        bench_usage(stdout);
        free(inputs);
        return ALMA_EXIT_OK;
      case ':':
        free(inputs);
        return usage_error("option '%s' needs a value", argv[optind - 1]);
      default:
        free(inputs);
        return usage_error("unknown option '%s'", argv[optind - 1]);
    }
  }
  if (bad) {
    free(inputs);
    return ALMA_EXIT_USAGE;
  }
  if (optind != argc - 1) {
    free(inputs);
    if (optind >= argc) {
      fputs("alma bench: a model file is required\n\n", stderr);
      bench_usage(stderr);
      return ALMA_EXIT_USAGE;
    }
    return usage_error("one model only, got also '%s'", argv[optind + 1]);
  }
  const char *model = argv[optind];
  if (verbose && quiet) {
    free(inputs);
    return usage_error("%s", "-v and -q exclude each other");
  }
  {
    /* one writer per stream: two machine-readable outputs on stdout would interleave */
    const char *outs[] = {json_path, csv_path, html_path, trace_path}, *names[] = {"--json", "--csv", "--html", "--trace"};
    char which[96] = "";
    int on_stdout = 0;
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
      if (outs[i] && !strcmp(outs[i], "-"))
        snprintf(which + strlen(which), sizeof which - strlen(which), "%s%s -", on_stdout++ ? " and " : "", names[i]);
    if (on_stdout > 1) {
      free(inputs);
      return usage_error(on_stdout == 2 ? "%s both write to standard output: give one of them a file"
                                        : "%s all write to standard output: give all but one a file", which);
    }
  }
  if (trace_path && cfg.profile <= 0) {
    free(inputs);
    return usage_error("%s", "--trace needs --profile: the trace is the profiled batches' nodes");
  }
  cfg.verbose = verbose ? 2 : quiet ? 0 : 1;
  /* --instances/--workers ask for the throughput mode, unless they size the server's sessions. */
  if (sessions_given && strcmp(cfg.scenario, "server")) cfg.throughput = 1;
  if (!strcmp(cfg.scenario, "server") && !(cfg.latency_bound_ms > 0)) {
    free(inputs);
    return usage_error("%s", "--scenario server needs --latency-bound-ms L (the bound, ms)");
  }
  /* --rigorous: between-process variance in the CI, longer phases, the raw samples kept so that
   * alma compare can bootstrap them (docs/methodology.md, Repeats). */
  if (rigorous) {
    if (!repeat_given) cfg.repeat = ALMA_RIGOROUS_REPEAT;
    if (!min_time_given) cfg.min_time_s = 2;
    if (!warmup_time_given) cfg.warmup_s = 1;
    raw = 1;
  }
  /* --duration alone means "for a time instead of a count". */
  if (duration_given && !n_given) cfg.n_samples = 1;

  /* A directory or a list file of models: a suite (random data for each model). */
  char **suite = NULL;
  int n_suite = 0, is_suite = alma_cli_suite_models(model, &suite, &n_suite);
  if (is_suite < 0) {
    free(inputs);
    return alma_cli_fail(ALMA_ERR_IO, NULL);  /* exit 3, as a model that cannot be read */
  }
  if (is_suite && (data_path || n_inputs || cfg.labels[0])) {
    free(inputs);
    alma_cli_suite_free(suite, n_suite);
    return usage_error("%s", "a model suite (a directory or list of models) runs on random data: --data, --input and "
                             "--labels name one model's inputs");
  }

  /* Data description. */
  alma_data *data = NULL;
  alma_status st = data_path ? alma_data_from_path(data_path, &data) : alma_data_random(&data);
  if (st != ALMA_OK) {
    free(inputs);
    return alma_cli_fail(st, "--data");
  }
  for (int i = 0; i < n_inputs; i++)
    if ((st = alma_data_set_input_spec(data, inputs[i])) != ALMA_OK) {
      free(inputs);
      alma_data_free(data);
      return alma_cli_fail(st, NULL);
    }
  free(inputs);
  if (scale) {
    char *end;
    double s = strtod(scale, &end), o = 0;
    if (end == scale || (*end && *end != ':')) {
      alma_data_free(data);
      return usage_error("--data-scale '%s': expected S or S:OFFSET", scale);
    }
    if (*end == ':') {
      const char *p = end + 1;
      o = strtod(p, &end);
      if (end == p || *end) {
        alma_data_free(data);
        return usage_error("--data-scale '%s': expected S or S:OFFSET", scale);
      }
    }
    if ((st = alma_data_set_scale(data, s, o)) != ALMA_OK) {
      alma_data_free(data);
      return alma_cli_fail(st, "--data-scale");
    }
  }

  /* Conversions: a comma list, order kept. */
  char *conv_copy = conv_list ? strdup(conv_list) : NULL;
  const char *convs[256];
  int n_conv = 0;
  if (conv_list && !conv_copy) {
    alma_data_free(data);
    return alma_cli_fail(ALMA_ERR_NOMEM, "bench");
  }
  for (char *save = NULL, *p = conv_copy ? strtok_r(conv_copy, ",", &save) : NULL; p; p = strtok_r(NULL, ",", &save)) {
    while (*p == ' ') p++;
    if (n_conv == 256) {
      free(conv_copy);
      alma_data_free(data);
      return usage_error("%s", "more than 256 conversions");
    }
    convs[n_conv++] = p;
  }
  if (conv_list && n_conv == 0) {
    free(conv_copy);
    alma_data_free(data);
    return usage_error("--conversions '%s': empty list", conv_list);
  }

  progress_state ps = {0};
  if (isatty(2) && !quiet) {
    cfg.progress = progress;
    cfg.progress_user = &ps;
  }
  alma_results *res = NULL;
  catch_stop_signals();
  if (is_suite) {
    alma_data_free(data);
    int to_stdout = (json_path && !strcmp(json_path, "-")) || (csv_path && !strcmp(csv_path, "-"));
    alma_cli_suite_out so = {json_path, csv_path, raw, quiet, verbose, to_stdout};
    int code = alma_cli_bench_suite(model, suite, n_suite, &cfg, convs, n_conv, &so);
    if (ps.active) fputs("\r\033[K", stderr);
    free(conv_copy);
    alma_cli_suite_free(suite, n_suite);
    if (alma__interrupted()) return end_interrupted();
    return code;
  }
  st = alma_benchmark_model(model, &cfg, convs, n_conv, data, &res);
  if (ps.active) fputs("\r\033[K", stderr);
  free(conv_copy);
  alma_data_free(data);
  if (!res && alma__interrupted()) return end_interrupted();
  if (!res) return alma_cli_fail(st, NULL);

  /* JSON or CSV on stdout moves the human report to stderr. */
  int to_stdout = (json_path && !strcmp(json_path, "-")) || (csv_path && !strcmp(csv_path, "-")) ||
                  (html_path && !strcmp(html_path, "-")) || (trace_path && !strcmp(trace_path, "-"));
  FILE *report = to_stdout ? stderr : stdout;
  if (quiet) alma_results_print_summary(res, report);
  else alma_results_print(res, report, verbose);
  /* -1: with -c every conversion asked for has a row, unavailable ones too ("unavailable": null). */
  unavailable_list unav = {NULL, -1, NULL};
  if (!conv_list && list_unavailable(res, &cfg, st != ALMA_OK && cfg.fail_on_error, &unav) != ALMA_OK) {
    unavailable_free(&unav);
    alma_results_free(res);
    return alma_cli_fail(ALMA_ERR_NOMEM, "bench");
  }
  if (!conv_list && !quiet) print_not_run(report, &unav);
  int code = alma_cli_failures(res) ? ALMA_EXIT_FAILED : ALMA_EXIT_OK;
  if (json_path && alma__results_save_json_ex(res, json_path, raw, unav.items, unav.n) != ALMA_OK)
    code = alma_cli_fail(ALMA_ERR_IO, "--json");
  unavailable_free(&unav);
  if (csv_path && alma_results_save_csv(res, csv_path) != ALMA_OK) code = alma_cli_fail(ALMA_ERR_IO, "--csv");
  if (trace_path && alma__trace_save(res, trace_path) != ALMA_OK) code = alma_cli_fail(ALMA_ERR_IO, "--trace");
  if (html_path) {
    const alma_results *one = res;
    if (alma__html_write(html_path, &one, NULL, 1, NULL, NULL) != ALMA_OK) code = alma_cli_fail(ALMA_ERR_IO, "--html");
  }
  if (st != ALMA_OK && !quiet && cfg.fail_on_error && n_conv > alma_results_count(res)) {
    fflush(report);  /* after the report also when both streams go to one file */
    fprintf(stderr, "alma bench: stopped after the first failure (--keep-going runs the rest)\n");
  }
  alma_results_free(res);
  if (alma__interrupted()) return end_interrupted();
  return code;
}
