/* Internal interface of the benchmark harness (src/bench) and its writers (src/report). */
#ifndef ALMA_BENCH_INTERNAL_H
#define ALMA_BENCH_INTERNAL_H

#include "core/core.h"

/* ---- statistics (stats.c) ------------------------------------------------------------------ */
/* Linear interpolation between order statistics of sorted x[0..n): NumPy's default ("linear",
 * Hyndman & Fan type 7): h = (n-1)p, x[floor h] + (h - floor h)(x[floor h + 1] - x[floor h]). */
double alma__percentile_sorted(const double *sorted, int64_t n, double p);
/* Quantile of Student's t with df degrees of freedom (df > 0), p in (0, 1). */
double alma__t_quantile(double p, double df);
/* Regularized incomplete beta I_x(a, b). */
double alma__betainc(double a, double b, double x);
/* Ranks (1-based) of the order statistics bounding a distribution-free confidence interval of the
 * median: the largest j with 2*P(B <= j-1) <= 1-conf for B ~ Binomial(n, 1/2); the interval is
 * [x_(j), x_(n+1-j)] with coverage >= conf. Returns 0 (and lo = hi = 0) when n is too small. */
int alma__median_ci_ranks(int64_t n, double conf, int64_t *lo, int64_t *hi);
/* All of alma_latency_stats from samples (ms), any order. n == 0 gives NaNs and n = 0. */
alma_status alma__latency_stats(const double *ms, int64_t n, alma_latency_stats *out);

/* Warnings on a timed series (in run order). The thresholds are documented in docs/json.md. */
#define ALMA__CV_WARN 0.10           /* CV above 10% */
#define ALMA__DRIFT_WARN 0.05        /* halves' medians differ by more than 5% ... */
#define ALMA__P99_MIN_SAMPLES 100    /* p99 from fewer samples is flagged */
typedef void (*alma__warn_fn)(void *user, const char *msg);
void alma__latency_warnings(const double *ms, int64_t n, const alma_latency_stats *s,
                            alma__warn_fn warn, void *user);

/* ---- timers (timer.c) ---------------------------------------------------------------------- */
double alma__bench_now(void);                  /* CLOCK_MONOTONIC seconds */
/* Median cost of reading the clock twice back to back, in ns (what one timed batch pays). */
double alma__timer_overhead_ns(void);

/* ---- system (sysinfo.c) -------------------------------------------------------------------- */
int alma__physical_cores(void);
/* "0-3,8" from sched_getaffinity into buf. */
const char *alma__affinity_str(char *buf, size_t n);
/* Peak RSS of this process in bytes from getrusage, -1 if unknown. */
int64_t alma__peak_rss_bytes(void);
/* Everything but the runtimes list (which initializes runtimes: never in the parent before a fork,
 * so that CUDA is first touched in a child). */
void alma__system_info_basic(alma_system_info *s);
/* "EAGER DNNL(unavailable) ..." */
struct alma_conversion;
void alma__system_info_runtimes(char *out, size_t n);
/* The same for a sweep: only the runtimes of conv[0..n_conv) are checked (ORT's check starts an
 * interpreter, a second or more); the others are listed "NAME(unchecked)". n_conv < 0: all. */
void alma__system_info_runtimes_for(char *out, size_t n, const struct alma_conversion *conv, int n_conv);

/* ---- config (config.c) --------------------------------------------------------------------- */
/* Room for any key's value in text form (the paths: cache_dir, save_converted, labels). */
#define ALMA__CONFIG_VALUE_MAX 600
/* Parses a list config value ("1,8,32"; MAX = max_value when max_value > 0) into out (ascending,
 * duplicates dropped). Returns the count, or -1 with the error set naming key. */
int alma__config_list(const char *key, const char *text, int64_t max_value, int64_t *out, int cap);
/* Iterates keys with their value in text form and their type: 'i' integer, 'f' float, 'b' bool,
 * 's' string. Returns 0 past the end. */
int alma__config_entry(const alma_config *c, int i, const char **key, char *buf, size_t n, char *type);

/* ---- data (data.c) ------------------------------------------------------------------------- */
typedef struct alma__input_desc {
  char name[128];
  alma_dtype dtype;             /* the model's */
  int rank;                     /* -1 if unknown */
  int64_t dims[ALMA_MAX_RANK];  /* -1 where symbolic */
  char dim_params[ALMA_MAX_RANK][32];
} alma__input_desc;

/* A batch cursor over a data source for one conversion. Creating it does all the slow work
 * (random generation, file reading, dtype conversion), and resolves every input's batch shape:
 * overrides from the data description, then the model's dims with symbols bound (first dim =
 * batch_size, others 1), or the files' own shapes. warn (may be NULL) hears about adjustments. */
typedef struct alma__batcher alma__batcher;
alma_status alma__batcher_new_ex(alma_data *d, const alma__input_desc *in, int n, int64_t batch_size,
                                 uint64_t seed, alma__warn_fn warn, void *user, alma__batcher **out);
/* Resolved batch shapes and dtypes (no data), one per input; for a loader, known after the first
 * batch. */
const alma_tensor *alma__batcher_shapes(const alma__batcher *b);
int64_t alma__batcher_batch(const alma__batcher *b);
/* Fills inputs (views, valid until the next call or free) with batch number i of the sequence. The
 * sequence is the same for every conversion. *samples_out: samples in this batch. */
alma_status alma__batcher_next(alma__batcher *b, alma_tensor *inputs, int64_t *samples_out);
/* Back to the first batch. */
alma_status alma__batcher_rewind(alma__batcher *b);
/* Samples in one pass over the data set: npy/IDX files' first dim, a batch directory's batches
 * summed; -1 for random data and loaders (no fixed set). */
int64_t alma__batcher_samples(const alma__batcher *b);
/* Class labels from a .npy or IDX file: integer dtype, shape [N] (or [N,1]), every value >= 0.
 * *labels_out (malloc'd) gets them as int64, *max_out the largest. ALMA_ERR_TYPE for non-integer
 * labels, ALMA_ERR_SHAPE for another shape, ALMA_ERR_PARSE for a negative one, naming path. */
alma_status alma__labels_load(const char *path, int64_t **labels_out, int64_t *n_out, int64_t *max_out);
void alma__batcher_free(alma__batcher *b);
/* "random", "npy", ... and a one-line description (paths, specs) for the JSON. */
const char *alma__data_describe(const alma_data *d, char *buf, size_t n);

/* ---- isolation (isolate.c) ----------------------------------------------------------------- */
/* A job writes lines: "step NAME", "progress PHASE DONE TOTAL", "record {json}". In a child they go
 * to a pipe; in-process to a buffer. */
typedef struct alma__chan alma__chan;
void alma__chan_line(alma__chan *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes a record line from a string with no newline. */
void alma__chan_record(alma__chan *c, const char *json);
int alma__chan_is_child(const alma__chan *c);

typedef void (*alma__job_fn)(void *arg, alma__chan *ch);
typedef void (*alma__line_fn)(void *user, const char *line, double elapsed_s);

typedef struct alma__job_opts {
  int isolate;                  /* fork a child */
  double timeout_s;             /* 0 = none */
  int64_t memory_limit_bytes;   /* RLIMIT_AS in the child; 0 = none */
  int echo_stderr;              /* copy the child's stderr to ours as it comes */
  alma__line_fn on_line;        /* every line but records, as it arrives; also called with NULL
                                   about 4 times a second while waiting */
  void *user;
} alma__job_opts;

typedef struct alma__job_outcome {
  alma_status status;           /* OK: the job wrote a record and exited 0 */
  char reason[512];             /* why not: "killed by signal 11 (SIGSEGV)", "timed out after 5 s" */
  char *record;                 /* the record's JSON or NULL (malloc'd) */
  char last_step[64];           /* the last "step" line seen */
  char marks[256];              /* the words of every "mark WORD" line, space separated */
  char *stderr_tail;            /* last lines of the child's stderr (malloc'd, may be NULL) */
  char *backtrace;              /* native backtrace printed by the crash handler, or NULL */
  int exit_code;                /* -1 if signalled */
  int term_signal;              /* 0 if exited */
  int timed_out;
  double wall_s;
} alma__job_outcome;

alma_status alma__job_run(alma__job_fn fn, void *arg, const alma__job_opts *o, alma__job_outcome *out);
void alma__job_outcome_free(alma__job_outcome *o);

/* Test-only fault injection: ALMA_TEST_FAULT=KIND[@CONVERSION] with KIND one of segv, abort,
 * hang, oom, exit, error. Called in the job at the start of the timed phase. Crashing kinds act
 * only in an isolated child (in-process they are ignored with a warning). Returns ALMA_OK when
 * nothing was injected, or the injected error. */
alma_status alma__test_fault(const char *conversion, int in_child);

/* Installs SIGSEGV/SIGBUS/SIGILL/SIGFPE/SIGABRT handlers that print a native backtrace to stderr
 * between "--- native backtrace ---" and "--- end of backtrace ---", then die of the signal; and
 * one for ALMA__DUMP_SIGNAL that prints the receiving thread's backtrace the same way and returns
 * (a job past its timeout gets it on its main thread before the kill). */
#define ALMA__DUMP_SIGNAL SIGUSR2
void alma__install_crash_handler(void);

/* Async-signal-safe: records sig as the reason alma stops (the first one wins) and SIGKILLs the
 * running job child's process group. alma__job_run then starts nothing more, and returns an
 * outcome saying so; the sweep stops after it. For the CLI's SIGINT/SIGTERM/SIGHUP handlers. */
void alma__interrupt(int sig);
/* For a command that runs in a child of its own (alma run): forks; the child (its own process
 * group, dying with the parent, o->memory_limit_bytes as RLIMIT_AS, the crash handler installed)
 * gets 0 and goes on. The parent waits for it, killing it after o->timeout_s (its main thread
 * first prints its backtrace on the shared stderr) or on alma__interrupt, fills out (status OK
 * with exit_code when it exited; else status and reason) and gets 1. -1: fork failed (error set).
 * Only o->timeout_s and o->memory_limit_bytes are used. */
int alma__fork_supervised(const alma__job_opts *o, alma__job_outcome *out);
/* The memory limit a child gets by default: the machine's physical memory, so that a runaway
 * allocation fails there rather than at the kernel's OOM killer; 0 (none) in sanitizer builds,
 * whose shadow memory needs terabytes of address space. */
int64_t alma__default_memory_limit(void);
/* The signal passed to alma__interrupt, 0 if none. */
int alma__interrupted(void);

/* "SIGSEGV", "SIGUSR1", "SIGRTMIN+3", or "signal N" for a number without a name, into buf. */
const char *alma__signal_name(int sig, char *buf, size_t n);

/* ---- output check (harness.c) ---------------------------------------------------------------- */
/* Compares a conversion's outputs with EAGER's (see alma_output_check): every numeric element within
 * atol + rtol*|ref| (NaN matches NaN, inf matches the same inf), shapes equal; metrics over all
 * outputs. m (may be NULL) names outputs in detail, which gets the first problem ("" if none). */
/* Top-1 over the first n_take rows of out (argmax of the last axis; out holds one row per sample of
 * a batch of `samples` samples) against labels[0..n_take): adds to *correct. Fails naming the
 * output (name, may be NULL) when it is not [samples, ..., classes] with one row per sample, not
 * numeric, or has fewer classes than a label needs. */
alma_status alma__count_top1(const alma_tensor *out, const char *name, int64_t samples, const int64_t *labels,
                             int64_t n_take, int64_t *correct);
void alma__compare_outputs(const alma_tensor *ref, int n_ref, const alma_tensor *out, int n_out, const alma_model *m,
                           double rtol, double atol, alma_output_check *c, char *detail, size_t dn);
/* The compare, then the judgment (lossy: cosine and argmax agreement), and the warning the result
 * gets ("" when none) in warning. */
void alma__check_outputs(const alma_tensor *ref, int n_ref, const alma_tensor *out, int n_out, const alma_model *m,
                         double rtol, double atol, int lossy, alma_output_check *c, char *warning, size_t wn);

/* ---- contention (contention.c) ----------------------------------------------------------- */
/* Counters read at the start of the timed phase; alma__contention_end turns them into figures. */
#define ALMA__MAX_CPUS 1024
#define ALMA__MAX_TASKS 1024
typedef struct alma__cpu_snap {
  double wall, cpu_s;
  int64_t nvcsw, nivcsw;
  int n_tasks;
  int tid[ALMA__MAX_TASKS];
  double task_delay[ALMA__MAX_TASKS]; /* seconds waited on a run queue, per thread */
  int have_sched;
  int n_cpus;
  int cpu[ALMA__MAX_CPUS];            /* the CPUs this process may use */
  double busy[ALMA__MAX_CPUS], steal[ALMA__MAX_CPUS]; /* seconds, from /proc/stat */
  int have_stat;
  double psi_some;                    /* seconds, NaN when /proc/pressure/cpu is absent */
} alma__cpu_snap;
void alma__contention_begin(alma__cpu_snap *s);
/* Fills c (its strings malloc'd) from the counters now against s; threads: asked for; advice: when
 * the threads spin-wait, the words naming the setting that avoids it (NULL: they do not). */
void alma__contention_end(const alma__cpu_snap *s, int threads, const char *advice, alma_contention *c);
/* Sets c->disturbed, reason, spinning and advice from its figures (the rule of docs/json.md);
 * frees what was there. Exposed for tests. */
void alma__contention_judge(alma_contention *c, const char *advice);
/* The spin advice of the runtime named `runtime` (alma_runtime.spin_advice) under those options and
 * threads; NULL when it does not spin or is not in this build. */
const char *alma__spin_advice_of(const char *runtime, const char *runtime_options, int threads);
void alma__contention_clear(alma_contention *c);
/* The CPU share thresholds: below them a timed phase is disturbed. */
#define ALMA__MIN_CPU_SHARE 0.90      /* of its runnable time, it ran at least 90% */
#define ALMA__MAX_OTHERS_SHARE 0.10   /* others took at most 10% of the CPU time it needed */
#define ALMA__MAX_STEAL_SHARE 0.05

/* ---- repeats (repeat.c) -------------------------------------------------------------------- */
/* Hierarchical percentile bootstrap of the median of per-process medians: each of `resamples`
 * replicates draws k processes with replacement, then each drawn process's batches with
 * replacement (its resampled median drawn exactly from the order statistics), and takes the
 * median of the k medians. sorted[i][0..n[i]) sorted ascending. reps (may be NULL) gets the
 * replicates (resamples of them, unsorted). Returns 0, or -1 when k < 1, some n < 1 or out of
 * memory. */
int alma__hier_bootstrap(const double *const *sorted, const int64_t *n, int k, int resamples, uint64_t seed,
                         double conf, double ci[2], double *reps);
#define ALMA__REPEAT_RESAMPLES 4000
/* Uniform in (0, 1), never 0 or 1, from a splitmix64 stream: the same numbers for the same seed
 * everywhere. */
double alma__uniform01(uint64_t *state);
/* Folds one more repeat (a process's result, run at run_index of the sweep) into row: its raw
 * latencies appended, its contention and warnings kept, counts summed. The first repeat is the
 * row itself (call with row == run's copy first: alma__repeat_start). */
alma_status alma__repeat_start(alma_result *row, int run_index);
alma_status alma__repeat_add(alma_result *row, const alma_result *run, int run_index);
/* Computes the row's repeat statistics and pooled latency once every repeat is in. */
alma_status alma__repeat_finish(alma_result *row, uint64_t seed);
/* The 95% prediction interval of one more process's median from k process medians (NaN for k < 3
 * or a median that is not positive). */
void alma__repeat_next95(const double *med, int k, double out[2]);
void alma__repeat_clear(alma_repeat_stats *s);
/* Adds a run to s (reason copied). */
alma_status alma__repeat_push(alma_repeat_stats *s, const alma_repeat_run *run);

/* ---- results (results.c) ------------------------------------------------------------------- */
struct alma_result {
  int id;
  char *conversion;
  alma_result_status status;
  char device[8];
  int64_t batch_size, samples;
  double throughput, total_elapsed_s, inference_s, load_s, convert_s, first_inference_ms;
  int64_t peak_rss_bytes;
  int64_t warmup_batches;
  double warmup_s;
  alma_latency_stats latency;
  alma_output_check check;
  int threads;
  char *affinity;
  double timer_overhead_ns;
  char *stop_reason;
  int n_warnings;
  char **warnings;
  alma_status error_status;
  char *error;
  char *failed_step;
  char *traceback;
  int64_t n_raw;
  double *raw_ms;
  /* mode, hooks, cache, throughput mode */
  char mode[12];                  /* "latency" | "build" */
  alma_latency_stats pre, post;   /* hook times per batch (n = 0: no hook) */
  alma_cache_info cache;          /* strings owned (malloc'd), status NULL = no cache info */
  int n_scaling;
  alma_scaling_point *scaling;    /* stop_reason/error owned */
  /* saved converted graph */
  char *saved_path;               /* save_converted: the file written, NULL when none */
  int saved_alma_ops;             /* alma-domain nodes in it */
  alma_accuracy acc;              /* acc.samples 0: not measured; acc.baseline owned (NULL: none) */
  /* per-node profile */
  int has_profile;                /* prof filled (config profile); its strings and arrays owned */
  alma_profile prof;
  char *runtime_info;             /* the runtime's facts, a JSON object's text (alma_runtime.info), or NULL */
  char *runtime_options;          /* every option of the runtime with its value, a JSON object's text, or
                                     NULL (a runtime without options) */
  char *runtime_options_given;    /* those the configuration set, "name=value,..." (NULL: none) */
  char *placement;                /* where the nodes ran, a JSON object's text (alma__placement_json), or NULL */
  /* contention and the clock check over the timed phase (contention.c), repeats (repeat.c) */
  alma_contention cont;           /* cont.measured 0: none; strings owned */
  double clock_agreement;         /* NaN when not measured */
  alma_repeat_stats rep;          /* rep.k 0: no repeats; runs and their reasons owned */
  /* the roofline's model side at this batch size (roofline.c): NaN when unknown */
  double flops_per_batch, bytes_per_batch;
  int has_server;                 /* the server scenario ran: server filled (server.c), owned */
  alma_server_result server;
  int has_origin;                 /* origin filled (a suite or a merged sweep), strings owned */
  alma_result_origin origin;
};

typedef struct alma__model_io {
  char name[128];
  char dtype[16];
  int rank;
  int64_t dims[ALMA_MAX_RANK];    /* as run (resolved); -1 if unknown */
  char declared[160];             /* declared shape with symbols: "[batch,3,224,224]" */
} alma__model_io;

/* The machine's SGEMM peak and memory bandwidth (roofline.c, docs/methodology.md). */
typedef struct alma__machine_peak {
  int measured;                 /* 0: unknown, reason says why                                  */
  int cached;                   /* read from the cache file, measured by an earlier run         */
  double gflops;                /* best SGEMM rate, GFLOP/s                                     */
  char sgemm_library[32];       /* "OpenBLAS", "oneDNN", ...: the faster one                    */
  double bandwidth_gbs;         /* best STREAM-triad bandwidth, GB/s                            */
  int threads;                  /* threads of both probes (the physical cores)                  */
  char fingerprint[65];         /* hex SHA-256 of what identifies the machine                   */
  char measured_at[32];         /* UTC, ISO 8601                                                */
  double load_average;          /* 1-minute load average when measured                          */
  char path[600];               /* the cache file ("" when none)                                */
  char reason[512];
} alma__machine_peak;

struct alma_results {
  alma_system_info system;
  alma_config config;
  char *model_path;
  char model_hash[65];
  char model_file_sha256[65];
  int64_t model_file_bytes;
  int n_inputs, n_outputs;
  alma__model_io *inputs, *outputs;
  char *data_desc;
  int n;
  alma_result *items;
  double total_s;
  alma__machine_peak peak;        /* measured == 0 with a reason when unknown */
  /* Without a conversion list ("every conversion available here"): the presets the probe (a
   * child) found unavailable, with why, so that the parent never initializes a runtime itself. */
  int probed;                     /* the probe answered */
  int n_unavailable;
  struct alma__probe_unavailable {
    int id;
    char *reason;
  } *unavailable;
};

void alma__result_init(alma_result *r);
void alma__result_clear(alma_result *r);
void alma__result_warn(alma_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Returns the new result (zero-initialized by alma__result_init) or NULL on OOM. */
alma_result *alma__results_add(alma_results *rs);
const char *alma__result_status_str(alma_result_status s);
/* Replaces the result's cache info (strings copied). */
void alma__result_set_cache(alma_result *r, const char *status, const char *reason, int stale, const char *build,
                            const char *dir, const char *key, double build_s, int64_t graph_bytes);
/* Sets acc.baseline (copied; "" = none) and acc.top1_drop. */
void alma__result_set_baseline(alma_result *r, const char *baseline, double drop);
/* Replaces r's origin (strings copied; NULL leaves one unknown). */
void alma__result_set_origin(alma_result *r, const alma_result_origin *o);
/* Moves every result of src to the end of dst (src is left with none); a row without an origin
 * gets one naming src's model. */
alma_status alma__results_append(alma_results *dst, alma_results *src);
/* Turns rs into a set of several models named label (a directory, a list file, a sweep): the
 * top-level model becomes label with no hash or inputs, each row keeping its own in its origin. */
void alma__results_relabel(alma_results *rs, const char *label);
/* A new zeroed scaling point (NaN numbers) at the end of r's list, or NULL on OOM. */
alma_scaling_point *alma__result_add_scaling(alma_result *r);

/* ---- per-node profile (profile.c) ----------------------------------------------------------- */
struct alma__prof_graph;
/* An empty profile of `runtime` (NaN numbers), or one that says why it is unavailable (reason not
 * NULL). */
alma_status alma__profile_init(alma_profile *p, const char *runtime, const char *reason);
void alma__profile_clear(alma_profile *p);
/* Fills p (from alma__profile_init) from a session's per-node times over `batches` batches
 * (alma__session_profile_read: the model's graph, then its compiled If branches): one entry per
 * node that heads itself or a group, named by it (a branch's node by its path, "If/then_branch/
 * node"; an If keeps the time outside its branch's entries; a branch's nodes that never ran are
 * left out), its op type (a group's: its members' joined by '+'), sorted by time, and the op-type
 * table. batch_ms: the profiled batches' mean latency; timed_mean_ms: the timed phase's (for the
 * overhead). */
alma_status alma__profile_build(alma_profile *p, const struct alma__prof_graph *graphs, int n_graphs, int64_t batches,
                                double seconds, double batch_ms, double timed_mean_ms);
/* Appends one entry / op type (strings copied), for reading a profile back; the caller keeps the
 * order. */
alma_status alma__profile_add_node(alma_profile *p, const alma_profile_node *n);
alma_status alma__profile_add_op(alma_profile *p, const alma_profile_op *o);

/* ---- throughput mode (scaling.c) ------------------------------------------------------------ */
/* Runs one instances x workers configuration: sessions of `conversion` on model (one per worker,
 * threads_per_instance threads each), fed round-robin from the ring of ready batches (n_batches x
 * n_inputs tensors, read-only), until duration and n_samples are both met (or max_time_s). Fills
 * out (its strings malloc'd); a failure sets out->error and returns its status. */
typedef struct alma__scaling_job {
  const alma_model *model;
  const char *conversion;
  const alma_tensor *batches;
  int n_batches, n_inputs, n_outputs;
  int64_t samples_per_batch;
  const alma_config *cfg;
  int total_threads;
} alma__scaling_job;
alma_status alma__scaling_run(const alma__scaling_job *job, int instances, int workers, alma_scaling_point *out);
/* Batch k of the ring (k modulo n_batches) on session s, hooks around the timed call: *t_start and
 * *t_done bracket alma_session_run (monotonic seconds). On failure *what names the step. */
alma_status alma__scaling_batch(const alma__scaling_job *j, alma_session *s, int64_t k, alma_tensor *in, alma_tensor *out,
                                double *t_start, double *t_done, const char **what);
void alma__scaling_point_clear(alma_scaling_point *p);
/* Session i of n for the job, with threads_per_instance threads (the instances x workers runs share
 * it); on failure msg says which session and why. */
alma_status alma__scaling_session(const alma__scaling_job *job, int threads_per_instance, int i, int n, alma_session **s,
                                  char *msg, size_t msg_size);
/* The busiest window of `window` seconds: the most completions (sorted times, seconds) in any
 * half-open window (t - window, t], as completions per second (times samples_per). */
double alma__peak_rate(const double *sorted_t, int64_t n, double window, int64_t samples_per);

/* ---- roofline (roofline.c) ------------------------------------------------------------------ */
/* FLOPs of one batch at the given input shapes (the ops' cost rules) and the bytes an unfused
 * execution moves: every weight once, every tensor a node reads or writes once per use. NaN for
 * what is unknown (an op without a cost rule, a shape not inferred). */
alma_status alma__model_cost(const alma_model *m, const alma_tensor *shapes, int n_shapes, double *flops_out,
                             double *bytes_out);
/* The machine's peak at `threads` threads: from cache_dir's machine-<fingerprint>.json when there,
 * else measured in a child process and stored there (cache_dir NULL or "": not stored). */
void alma__machine_peak_get(const char *cache_dir, const alma_system_info *sys, int threads, alma__machine_peak *p);
/* rs->peak for a sweep: the cache's directory when open, else the one it would use. */
void alma__results_measure_peak(alma_results *rs, const void *cache, const alma_config *cfg);
struct cJSON;
struct cJSON *alma__machine_peak_to_cjson(const alma__machine_peak *p);
void alma__machine_peak_from_cjson(const struct cJSON *o, alma__machine_peak *p);
/* A result's roofline figures (NaN / NULL where unknown): achieved GFLOP/s from flops_per_batch
 * and the median latency, its share of the SGEMM peak, the arithmetic intensity (FLOPs per byte
 * moved), the attainable rate min(peak, intensity x bandwidth), and which roof bounds it. */
typedef struct alma__roofline {
  double flops, bytes, achieved_gflops, share_of_peak, intensity, attainable_gflops, share_of_attainable;
  const char *bound;            /* "memory" (intensity below peak / bandwidth) or "compute" */
} alma__roofline;
alma__roofline alma__result_roofline(const alma_results *rs, const alma_result *x);
/* ---- server scenario (server.c) ------------------------------------------------------------ */
/* Arrival times t[0..n) (seconds from the start, ascending) of a Poisson process of rate qps
 * conditioned on n arrivals in n / qps seconds: n + 1 exponential gaps -ln(U) from a splitmix64
 * stream seeded with seed, scaled so that they sum to n / qps (the schedule's rate is qps
 * exactly; the arrivals are n sorted uniform times over the span). */
void alma__poisson_arrivals(double qps, int64_t n, uint64_t seed, double *t);
/* Serves query q on worker's session; *t_start and *t_done bracket the inference (monotonic
 * seconds). An error fills err. */
typedef alma_status (*alma__serve_fn)(void *user, int worker, int64_t query, double *t_start, double *t_done, char *err,
                                      size_t errn);
typedef struct alma__server_plan {
  double qps;                 /* arrival rate                                                   */
  double min_duration_s;      /* the schedule spans at least this long ...                     */
  int64_t min_queries;        /* ... and holds at least this many queries                      */
  double max_time_s;          /* the run stops after this long (0 = no cap): INVALID            */
  double bound_ms, percentile;
  int early_stop;             /* stop once the over-bound count alone makes the run INVALID     */
  uint64_t seed;
  int n_workers;              /* threads, each serving one query at a time                     */
  alma__serve_fn serve;
  void *user;
} alma__server_plan;
/* The most queries one run's schedule may hold (its arrays take 32 bytes a query). */
#define ALMA__SERVER_MAX_QUERIES 20000000
/* One run at plan->qps into out (its reason malloc'd). Fails (err filled) only when the run
 * itself could not be made: a serve error, out of memory, too many queries. */
alma_status alma__server_run(const alma__server_plan *p, alma_server_run *out, char *err, size_t errn);
/* The scenario over sessions of job->conversion: a run at cfg->target_qps, or the search for the
 * highest VALID rate (cfg->target_qps 0) starting from the capacity est_ms (the single-stream
 * median latency) suggests. Fills out (owned strings and runs); a failure sets out->error. */
alma_status alma__server_scenario(const alma__scaling_job *job, int instances, int workers, double est_ms,
                                  alma_server_result *out);
void alma__server_result_clear(alma_server_result *s);
/* A new run (NaN numbers) at the end of s's list, or NULL on OOM. */
alma_server_run *alma__server_add_run(alma_server_result *s);

/* ---- CSV fields (report/csv.c) -------------------------------------------------------------- */
void alma__csv_str(FILE *f, const char *s);   /* RFC 4180 quoting when needed; NULL = empty */
void alma__csv_num(FILE *f, double v);        /* shortest exact form; empty for NaN/inf */

/* ---- JSON (report/json.c) ------------------------------------------------------------------ */
struct cJSON;
struct cJSON *alma__result_to_cjson(const alma_result *r, int include_raw);
/* Fills r from one result object (the child's record or a saved file's entry). */
alma_status alma__result_from_cjson(const struct cJSON *j, alma_result *r);
struct cJSON *alma__system_to_cjson(const alma_system_info *s);
struct cJSON *alma__config_to_cjson(const alma_config *c);

#endif
