/* alma — the benchmark harness: one call measures a model under many conversion options, each in
 * its own forked child, and checks every conversion's outputs against EAGER's.
 *
 *   alma_config cfg;
 *   alma_config_init(&cfg);
 *   alma_config_set(&cfg, "n_samples", "500");
 *   const char *convs[] = {"EAGER", "FOLD+EAGER"};
 *   alma_results *r = NULL;
 *   alma_status st = alma_benchmark_model("model.onnx", &cfg, convs, 2, NULL, &r);
 *   if (r) alma_results_print(r, stdout, 0);
 *   alma_results_free(r);
 *
 * Included by alma/alma.h; see docs/json.md for the result schema and docs/cli.md for `alma bench`.
 */
#ifndef ALMA_BENCH_H
#define ALMA_BENCH_H

#include "alma/alma.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Configuration. alma_config_init sets the defaults documented next to each field; set fields
 * directly or by name with alma_config_set (the key names are the field names).
 * ------------------------------------------------------------------------------------------- */

/* Called by the parent while a conversion runs (about 4 times a second, and at each phase change).
 * phase: "load", "convert", "first", "warmup", "timed", "check", "done" (and "accuracy", "profile",
 * "throughput" when asked for). done/total: batches of the current phase when known (total 0 when
 * open-ended; the profile's total is its minimum batch count). */
typedef void (*alma_progress_fn)(void *user, int index, int count, const char *conversion,
                                 const char *phase, int64_t done, int64_t total, double elapsed_s);

/* Pre- and post-processing hooks, timed apart from inference (preprocess_ms / postprocess_ms in
 * the results). preprocess gets the batch as the data source gives it (read-only views) and fills
 * inputs[0..n_inputs), which start as those same views: it may replace any of them with its own
 * tensor (owns_data = 1: alma frees it after the batch; 0: it must stay valid until the batch is
 * done). postprocess sees the outputs of each timed batch. Both run in the conversion's child
 * process, also on the first batch (the output check's; the EAGER reference sees pre-processed
 * inputs too), and in throughput mode from several worker threads at once: they must be
 * thread-safe. An error status fails the conversion, naming the hook. */
typedef alma_status (*alma_preprocess_fn)(void *user, const alma_tensor *batch, alma_tensor *inputs, int n_inputs);
typedef alma_status (*alma_postprocess_fn)(void *user, const alma_tensor *outputs, int n_outputs);

typedef struct alma_config {
  int64_t n_samples;          /* samples to time at least (default 100)                           */
  int64_t batch_size;         /* samples per batch; symbolic first dims take it (default 1)       */
  char device[8];             /* "cpu" (default) or "cuda": where conversions are meant to run    */
  int multiprocessing;        /* 1: each conversion in its own forked child (default 1)           */
  int fail_on_error;          /* 1: stop the sweep at the first failed conversion (default 1)     */
  int allow_device_override;  /* 1: run a conversion whose runtime lives on another device than
                                 `device` there, with a warning; 0: mark it unavailable (default 1) */
  int allow_cuda;             /* 0: CUDA conversions are unavailable (default 1)                  */
  int non_blocking;           /* GPU runtimes: pinned memory and asynchronous copies; recorded with
                                 every result (default 0)                                         */
  int64_t warmup;             /* warm-up batches at least (default 5)                             */
  double warmup_s;            /* ... and at least this long, seconds (default 0.1)                */
  double min_time_s;          /* timed phase lasts at least this long, seconds (default 1.0)      */
  double max_time_s;          /* timed phase stops after this long even if n_samples is not reached,
                                 with a warning; 0 = no cap (default 60)                         */
  double target_rel_ci;       /* optional precision target: also time until the 95% CI of the
                                 median is within ±target_rel_ci of it (0.01 = 1%); 0 = off (default 0) */
  int threads;                /* intra-op threads; 0 = physical cores (default 0)                 */
  uint64_t seed;              /* random input data seed (default 0)                               */
  double timeout_s;           /* per conversion, whole child; 0 = none (default 600)              */
  int64_t memory_limit_mb;    /* address-space limit of each child (RLIMIT_AS); 0 = none; -1 (the
                                 default): the machine's physical memory, none in sanitizer builds
                                 and for runtimes on a GPU                                         */
  int check_outputs;          /* compare outputs with EAGER's on the first batch (default 1)      */
  double rtol, atol;          /* check passes when |x - ref| <= atol + rtol*|ref| (1e-3, 1e-4)    */
  int verbose;                /* 0 quiet, 1 normal, 2 verbose: children's stderr is echoed (default 1) */
  alma_progress_fn progress;  /* optional (default NULL)                                          */
  void *progress_user;

  /* Sweeps and scaling (docs/cli.md, docs/methodology.md). */
  char batch_sizes[128];      /* "1,8,32": one result per conversion and batch size; "" = only
                                 batch_size (default "")                                         */
  int throughput;             /* 1: after the latency mode (one request at a time), run the
                                 throughput mode: every instances x workers configuration (default 0) */
  char instances[128];        /* model copies to keep busy, list; MAX = physical cores (default "1,MAX") */
  char workers[128];          /* threads feeding each copy, list (default "1,2")                */
  double duration_s;          /* > 0: every timed phase (latency mode and each throughput
                                 configuration) lasts this long, n_samples still met; 0: min_time_s
                                 rules (default 0)                                               */
  /* Build cache (docs/cache.md). */
  int cache;                  /* store each conversion's build and reuse it (default 1)          */
  char cache_dir[512];        /* "" = $ALMA_CACHE_DIR, else ~/.cache/alma (default "")           */
  char rebuild[16];           /* "if_needed" (stale builds rebuilt), "always", "never" (use what is
                                 there, stale or not, and say so) (default "if_needed")           */
  int build_only;             /* convert (and cache) without benchmarking (default 0)            */
  int lean_cache;             /* keep only state files, logs and benchmark records (default 0)   */
  /* Runtime settings: "runtime.name=value" entries separated by commas, e.g.
   * "dnnl.winograd=off,ort.spinning=off"; each conversion's runtime reads its own (alma list
   * --options, docs/runtimes/); checked when set (default "": the runtimes' defaults). */
  char runtime_options[1024];
  /* INT8_STATIC calibration. */
  char calibrator[16];        /* "minmax", "percentile", "entropy" (default "minmax")             */
  int64_t calibration_batches;/* > 0: calibrate on the first N batches of the benchmark data (with
                                 a warning when that data is random); 0: the pass's own random
                                 batches (default 8)                                              */
  /* Outputs beyond timings (docs/cli.md). */
  char save_converted[512];   /* "" = off; a directory: each conversion's final graph (after its
                                 passes) is written there as <conversion>.onnx, with _b<batch> when
                                 a batch-size sweep runs several (default "")                     */
  char labels[512];           /* "" = none; a .npy or IDX file of integer class ids, one per
                                 sample of the data set (alma_data_from_npy/idx/dir): top-1
                                 accuracy of every conversion over the whole set (default "")    */
  /* Per-node profile (docs/cli.md --profile): after the timed phase, extra batches with per-node
   * timing on; the timed batches never have it. */
  int64_t profile;            /* 0 = off; N >= 1: profile at least N batches (default 0)         */
  double profile_time_s;      /* ... and at least this long, seconds; max_time_s caps (default 1) */
  /* Hooks (not config keys). */
  alma_preprocess_fn preprocess;
  alma_postprocess_fn postprocess;
  void *hook_user;
  /* Repeats (docs/methodology.md): each conversion in `repeat` separate processes, interleaved
   * across conversions; >= 2 adds the between-process figures (alma_result_repeats). */
  int repeat;                 /* 0..100, 0 = 1 (default 1)                                        */
  /* Scenarios (docs/methodology.md, Scenarios): "single_stream" (the latency mode alone),
   * "offline" (the same as throughput = 1) or "server": after the latency mode, queries arrive as
   * a Poisson process at target_qps and are served by the first instances x the first workers
   * value; VALID when the latency_percentile latency from arrival is within latency_bound_ms. */
  char scenario[16];          /* (default "single_stream")                                       */
  double target_qps;          /* queries (batches) per second; 0 = search for the highest VALID
                                 one (default 0)                                                  */
  double latency_bound_ms;    /* the server's latency bound, required by scenario server (default 0) */
  double latency_percentile;  /* the percentile held to the bound, 50..99.999 (default 99)        */
} alma_config;

void alma_config_init(alma_config *cfg);
/* Dictionary-style setting: key is a field name above (except progress*, the hooks), value its text form
 * ("500", "1e-3", "true"/"false"/"on"/"off"/"1"/"0", "cuda"). An unknown key, a value of the wrong
 * type or out of range fails with ALMA_ERR_INVALID_ARG naming the key. */
alma_status alma_config_set(alma_config *cfg, const char *key, const char *value);
/* The text form of one key's value into buf (snprintf semantics). ALMA_ERR_NOT_FOUND for an
 * unknown key. */
alma_status alma_config_get(const alma_config *cfg, const char *key, char *buf, size_t n);
/* Keys in documentation order, for iteration: NULL past the end. */
const char *alma_config_key(int i);
/* One line describing a key (type, default, range). NULL for an unknown key. */
const char *alma_config_key_doc(const char *key);

/* ---------------------------------------------------------------------------------------------
 * Input data. NULL data means random batches shaped by the model's inputs. Every conversion gets
 * the same batches in the same order (random ones are generated from config.seed).
 * ------------------------------------------------------------------------------------------- */
typedef struct alma_data alma_data;

/* Random batches: floats ~ N(0, 1), integers uniform in [0, 10), bool uniform. Shapes come from
 * the model: a symbolic first dim takes batch_size, any other symbolic dim 1; alma_data_set_input
 * overrides an input's shape and dtype (the shape then is the whole batch). */
alma_status alma_data_random(alma_data **data_out);
/* dtype ALMA_DTYPE_UNDEFINED keeps the model's. The input must exist in the model (checked when
 * the benchmark starts). */
alma_status alma_data_set_input(alma_data *d, const char *name, int rank, const int64_t *dims,
                                alma_dtype dtype);
/* The CLI form "NAME:1x3x224x224[:dtype]" ("NAME:" alone, or a scalar "NAME:scalar"). Unlike
 * alma_data_set_input, a name given before is refused (ALMA_ERR_INVALID_ARG). */
alma_status alma_data_set_input_spec(alma_data *d, const char *spec);

/* Whole data sets, samples stacked along the first axis: one .npy per model input (in model
 * order), or IDX files (MNIST's format, any element type). Batches are consecutive slices of
 * batch_size samples, wrapping around at the end. Each sample is reshaped to the model input's
 * per-sample shape when the element counts agree, and converted to its dtype (value by value,
 * after x*scale + offset, see alma_data_set_scale). */
alma_status alma_data_from_npy(const char *const *paths, int n_paths, alma_data **data_out);
alma_status alma_data_from_idx(const char *const *paths, int n_paths, alma_data **data_out);
/* A directory of ready-made batches, taken in name order: for a one-input model, *.npy files,
 * each one batch; for several inputs, one subdirectory per batch holding <input name>.npy (or
 * input_<i>.npy) files. */
alma_status alma_data_from_dir(const char *dir, alma_data **data_out);
/* By what the path is: a directory, a .npy file, an IDX file (*.idx, *-ubyte, magic checked);
 * several comma-separated paths for several inputs. */
alma_status alma_data_from_path(const char *path, alma_data **data_out);
/* x*scale + offset applied when file data is converted to a floating-point input (e.g. 1/255 for
 * uint8 images). Defaults 1 and 0. */
alma_status alma_data_set_scale(alma_data *d, double scale, double offset);

/* A loader callback: next() fills inputs[0..n_inputs) with one batch (model input order) and
 * returns ALMA_OK, or sets *end_out = 1 when the pass is over (then inputs are ignored).
 * Tensors it marks owns_data = 1 are freed by alma after the batch; views (owns_data = 0) must
 * stay valid until the next call. reset() starts a new pass; alma calls it before each conversion
 * and whenever a pass ends before enough batches were timed. With multiprocessing, both run in
 * the conversion's child process (a fork: the loader's state as it was at the call). */
typedef alma_status (*alma_data_next_fn)(void *user, alma_tensor *inputs, int n_inputs, int *end_out);
typedef alma_status (*alma_data_reset_fn)(void *user);
alma_status alma_data_from_loader(alma_data_next_fn next, alma_data_reset_fn reset, void *user,
                                  alma_data **data_out);
void alma_data_free(alma_data *d);
/* "random", "npy", "idx", "dir" or "loader". */
const char *alma_data_kind(const alma_data *d);

/* ---------------------------------------------------------------------------------------------
 * Results
 * ------------------------------------------------------------------------------------------- */
typedef enum { ALMA_RESULT_OK = 0, ALMA_RESULT_ERROR = 1, ALMA_RESULT_UNAVAILABLE = 2 } alma_result_status;

/* Per-batch latency in milliseconds. Percentiles interpolate linearly between order statistics
 * (NumPy's default). mean_ci95: Student-t interval of the mean; median_ci95: distribution-free
 * interval between order statistics from the binomial(n, 1/2) law (NaN when n < 6). */
typedef struct alma_latency_stats {
  int64_t n;                    /* timed batches */
  double mean, stdev, cv;       /* stdev: sample (n-1); cv = stdev/mean */
  double min, p50, p90, p95, p99, max;
  double mean_ci95[2];
  double median_ci95[2];
} alma_latency_stats;

/* The harness's statistics of batch latencies ms[0..n) (milliseconds, in run order), for latencies
 * timed outside alma_benchmark_model (the Python package's PyTorch rows): the same percentiles,
 * intervals and rounding as every result's latency. n = 0 gives n 0 and NaNs. */
alma_status alma_latency_stats_of(const double *ms, int64_t n, alma_latency_stats *out);
/* The warnings the harness attaches to a row with these latencies and statistics (high variability,
 * drift between the run's halves, a p99 from too few batches), one per line, each ending in '\n',
 * into buf (NUL-terminated; lines that do not fit are left out). Returns the length all of them
 * take, without the NUL: a buffer of that + 1 holds every line. */
size_t alma_latency_warnings_of(const double *ms, int64_t n, const alma_latency_stats *s, char *buf, size_t size);

/* Output check against EAGER's outputs on the first batch. */
typedef struct alma_output_check {
  int performed;                /* 0: not checked (check_outputs off, or no reference; see warnings) */
  int passed;                   /* every element within atol + rtol*|ref|, same shapes, NaNs alike */
  double max_abs_err;
  double max_rel_err;           /* max |x - ref| / max(|ref|, atol) */
  double argmax_agreement;      /* rows (last axis) whose argmax agrees, 0..1; NaN if no float output */
  double cosine_similarity;     /* over all floating outputs flattened; NaN if none (JSON "cosine") */
} alma_output_check;

/* The harness's output check of `out` against `ref` (outputs in the same order, unnamed: output_0
 * ...), for outputs computed outside alma_benchmark_model (the Python package's PyTorch rows):
 * every element within atol + rtol*|ref|, or, when `lossy` (int8, bf16, fp16), cosine >= 0.99 and
 * argmax agreement >= 99%. The warning the harness would attach ("" when none) goes to warning
 * (may be NULL). ALMA_ERR_INVALID_ARG for NULL data, a rank over ALMA_MAX_RANK or too few bytes. */
alma_status alma_outputs_check(const alma_tensor *ref, int n_ref, const alma_tensor *out, int n_out, double rtol,
                               double atol, int lossy, alma_output_check *c, char *warning, size_t warning_size);

typedef struct alma_result alma_result;
typedef struct alma_results alma_results;

/* Machine description recorded with every run. Strings are "" when unknown. */
typedef struct alma_system_info {
  char cpu_model[128];
  int logical_cores, physical_cores, sockets;
  char isa[512];                /* SIMD/ML-relevant flags from /proc/cpuinfo, space separated */
  int64_t memory_bytes;
  char os[128];                 /* /etc/os-release PRETTY_NAME */
  char kernel[192];             /* uname: sysname release version */
  char machine[32];
  char governor[32];            /* cpufreq scaling governor of cpu0 */
  char alma_version[32], protobuf_c_version[32], cjson_version[32], openssl_version[64];
  char libc_version[32], compiler[96], build_flags[256];
  char runtimes[256];           /* runtimes built in, "EAGER DNNL(unavailable) ..." */
  double load_average[3];       /* 1, 5 and 15 minute load averages when the info was taken */
} alma_system_info;

/* Fills the description of this machine (no model needed). */
alma_status alma_system_info_get(alma_system_info *out);

/* Runs the sweep. model_path: loaded inside each child (one copy alive at a time), or use
 * alma_benchmark_loaded_model with a model loaded already. conversions: names, IDs or chains
 * ("EAGER", "3", "FOLD+EAGER"), order kept; NULL/0 = every conversion available here.
 * data: NULL = random. config: NULL = defaults.
 * Returns ALMA_OK when every conversion ran fine, else the status of the first failure. *results_out
 * is set whenever the sweep started (also on failure: print it), NULL when the arguments, a
 * conversion name or the model itself (load, input shapes) were rejected first. */
alma_status alma_benchmark_model(const char *model_path, const alma_config *config,
                                 const char *const *conversions, int n_conversions,
                                 alma_data *data, alma_results **results_out);
alma_status alma_benchmark_loaded_model(const alma_model *model, const alma_config *config,
                                        const char *const *conversions, int n_conversions,
                                        alma_data *data, alma_results **results_out);
#if !defined(__cplusplus)
/* In C, alma_benchmark_model also takes an alma_model pointer in place of the path. */
#define alma_benchmark_model(model, ...)                                               \
  _Generic((model), alma_model *: alma_benchmark_loaded_model,                        \
           const alma_model *: alma_benchmark_loaded_model,                          \
           default: alma_benchmark_model)((model), __VA_ARGS__)
#endif

void alma_results_free(alma_results *r);
int alma_results_count(const alma_results *r);
const alma_result *alma_results_get(const alma_results *r, int i);
int alma_results_n_failed(const alma_results *r);       /* status != ok */
const alma_system_info *alma_results_system(const alma_results *r);
const alma_config *alma_results_config(const alma_results *r);
const char *alma_results_model_path(const alma_results *r);  /* "" for a loaded model */
const char *alma_results_model_hash(const alma_results *r);  /* alma_model_hash, "" if unknown */

int alma_result_id(const alma_result *r);                  /* preset ID, -1 for a chain */
const char *alma_result_conversion(const alma_result *r);  /* canonical name */
alma_result_status alma_result_status_code(const alma_result *r);
const char *alma_result_status_name(const alma_result *r); /* "ok" | "error" | "unavailable" */
const char *alma_result_device(const alma_result *r);      /* "cpu" | "cuda" */
int64_t alma_result_batch_size(const alma_result *r);
int64_t alma_result_samples(const alma_result *r);         /* timed samples */
double alma_result_throughput(const alma_result *r);       /* samples / inference_s */
double alma_result_total_elapsed_s(const alma_result *r);  /* the child's whole life */
double alma_result_inference_s(const alma_result *r);      /* sum of timed batch latencies */
double alma_result_load_s(const alma_result *r);
double alma_result_convert_s(const alma_result *r);
double alma_result_first_inference_ms(const alma_result *r);
int64_t alma_result_peak_rss_bytes(const alma_result *r);  /* -1 if unknown */
int64_t alma_result_warmup_batches(const alma_result *r);
double alma_result_warmup_s(const alma_result *r);
const alma_latency_stats *alma_result_latency(const alma_result *r);
const alma_output_check *alma_result_check(const alma_result *r);

/* Top-1 accuracy against the labels (config `labels`): argmax over the last axis of the first
 * output, one row per sample, over every sample of the data set once (after timing). */
typedef struct alma_accuracy {
  int64_t samples;              /* labelled samples run; 0: not measured (no labels, or failed) */
  int64_t correct;              /* samples whose argmax is their label */
  double top1;                  /* correct / samples */
  double top1_drop;             /* the baseline's top1 minus this one's (0.01 = 1 point worse);
                                   NaN without a baseline */
  const char *baseline;         /* the first conversion at this batch size without a lossy step
                                   (int8, bf16, fp16) that measured accuracy, "" if none */
  double seconds;               /* the accuracy pass's wall time (not in any timing) */
} alma_accuracy;
/* NULL when accuracy was not measured. */
const alma_accuracy *alma_result_accuracy(const alma_result *r);
/* The converted graph written by save_converted ("" when none), and how many of its nodes are
 * alma-domain ops (FUSE's fused ops), which ONNX Runtime and other ONNX tools cannot run. */
const char *alma_result_saved_path(const alma_result *r);
int alma_result_saved_alma_ops(const alma_result *r);
/* The runtime's settings (alma_config.runtime_options): every option of the conversion's runtime
 * with the value it ran with, as the text of one JSON object ("" for a runtime without options),
 * and the ones the configuration set, "name=value,..." ("" when none). */
const char *alma_result_runtime_options(const alma_result *r);
const char *alma_result_runtime_options_given(const alma_result *r);
/* The runtime's facts about its build of the model, as the text of one JSON object ("" when the
 * runtime reports none): for ORT the onnxruntime version, the settings and the binding's
 * measured per-call cost (docs/json.md). */
const char *alma_result_runtime_info(const alma_result *r);
/* Where the nodes ran: the results' `placement` object as JSON text (docs/json.md), "" when none. */
const char *alma_result_placement(const alma_result *r);
int alma_result_threads(const alma_result *r);
const char *alma_result_affinity(const alma_result *r);    /* CPU list, "0-7" */
double alma_result_timer_overhead_ns(const alma_result *r);
const char *alma_result_stop_reason(const alma_result *r);
int alma_result_n_warnings(const alma_result *r);
const char *alma_result_warning(const alma_result *r, int i);
/* "latency" (one request at a time: the numbers above) or "build" (build_only: no timing). */
const char *alma_result_mode(const alma_result *r);
/* Pre-/post-processing hook time per batch (n = 0 when no hook was given). */
const alma_latency_stats *alma_result_preprocess(const alma_result *r);
const alma_latency_stats *alma_result_postprocess(const alma_result *r);

/* Per-node profile (config `profile`): where a conversion's time goes, measured in extra batches
 * after the timed phase with per-node timing on (docs/methodology.md). Nodes a runtime ran as one
 * (a fused chain, an int8 cluster) are one entry under the group's first node. */
typedef struct alma_profile_node {
  const char *name;           /* the node, or the first node of the group */
  const char *op_type;        /* its op type; a group's: its nodes' joined by '+' ("Conv+Add+Relu") */
  const char *placement;      /* where it ran, in the runtime's words: "DNNL", "BLAS", "EAGER (declined)", ... */
  int members;                /* graph nodes in the entry: 1, or a group's size */
  int64_t runs;               /* times it ran in the profiled batches */
  double ms;                  /* per batch: its time over the profiled batches / batches */
  double share;               /* ms / batch_ms (0..1) */
  int order;                  /* its place in execution order (0-based; an If's branch nodes follow
                                 the If): the entries are listed by ms, the trace by this */
  /* placement as data (appended: the fields above keep their offsets) */
  const char *place;          /* "runtime", "fused", "eager", "partial", "graph" (docs/json.md, `placement`) */
  const char *declined;       /* why on EAGER (place "eager" or "partial"): "op", "dtype", "attribute",
                               * "shape", "dynamic", "library", "choice"; "" otherwise */
} alma_profile_node;

typedef struct alma_profile_op {
  const char *op_type;        /* as in alma_profile_node */
  int entries;                /* entries of this op type */
  int nodes;                  /* graph nodes they cover */
  double ms, share;           /* per batch, summed over the entries; ms / batch_ms */
} alma_profile_op;

typedef struct alma_profile {
  const char *runtime;        /* the conversion's runtime */
  const char *unavailable;    /* NULL when profiled; otherwise why not ("the XNNPACK runtime has no
                                 per-node profile"): then nothing below was measured */
  int64_t batches;            /* profiled batches */
  double seconds;             /* wall time of the profiled phase */
  double batch_ms;            /* mean latency of the profiled batches (per-node timing on) */
  double nodes_ms;            /* per batch, in nodes: the entries' ms summed (the rest of batch_ms
                                 is the runtime's own work between nodes) */
  double overhead;            /* batch_ms / the timed phase's mean latency - 1: what timing every
                                 node costs (NaN without a timed phase) */
  int n_nodes;                /* entries, by ms descending */
  const alma_profile_node *nodes;
  int n_ops;                  /* op types, by ms descending */
  const alma_profile_op *ops;
} alma_profile;
/* NULL when the profile was not asked for (or the conversion failed before it). */
const alma_profile *alma_result_profile(const alma_result *r);

/* The build cache's part in a result. status: "hit" (a cached build was loaded: no passes ran),
 * "built" (converted now and stored), "off" (cache disabled or unusable: see reason). */
typedef struct alma_cache_info {
  const char *status;
  const char *reason;         /* why built ("no build in the cache", "stale: model hash changed",
                                 "corrupt: graph checksum mismatch", "rebuild always") or notes on
                                 a hit ("stale (options changed) but rebuild never") */
  int stale;                  /* the build used or replaced did not match every key part */
  const char *build;          /* build name (`alma cache print BUILD`) */
  const char *dir;            /* its directory */
  const char *key;            /* hex SHA-256 of the key parts */
  double build_s;             /* the build's own conversion time (for a hit: when it was built) */
  int64_t graph_bytes;        /* size of the stored graph, -1 when none (lean cache) */
} alma_cache_info;
const alma_cache_info *alma_result_cache(const alma_result *r);

/* Throughput mode: one point per instances x workers configuration. Each worker thread has its
 * own session (sessions share the model's weights) with threads_per_instance intra-op threads. */
typedef struct alma_scaling_point {
  int instances, workers;
  int threads_per_instance;   /* intra-op threads of each session: threads / instances, at least 1 */
  int concurrent;             /* more than one request in flight: latencies include contention */
  int64_t inferences;         /* batches completed in the timed window */
  int64_t samples;
  double duration_s;          /* the timed window: start to the stop signal, or to the last
                                 completion when later */
  double throughput_avg;      /* samples / duration_s */
  double throughput_peak;     /* samples completed in the busiest 1-second window (the whole window
                                 when shorter), per second */
  alma_latency_stats latency; /* per-batch latency of every worker, ms */
  const char *stop_reason;
  const char *error;          /* NULL unless this configuration failed */
} alma_scaling_point;
int alma_result_n_scaling(const alma_result *r);
const alma_scaling_point *alma_result_scaling(const alma_result *r, int i);

/* Server scenario (config scenario "server", MLPerf LoadGen's Server): queries (one batch each)
 * arrive as a Poisson process from a fixed seed and wait in one FIFO queue for the next free
 * session of instances x workers; latency runs from a query's scheduled arrival to its completion,
 * queueing included. One run per target rate; a search (target_qps 0) runs several. */
typedef struct alma_server_run {
  double target_qps;          /* the arrival rate asked for, queries/s                         */
  double scheduled_qps;       /* queries / the schedule's span (target_qps: the schedule is a
                                 Poisson process conditioned on its count)                      */
  double achieved_qps;        /* completed queries / duration_s                                */
  int64_t queries;            /* queries in the schedule                                       */
  int64_t completed;
  int64_t over_bound;         /* completed queries slower than latency_bound_ms                */
  double duration_s;          /* start to the last completion, at least the schedule's span    */
  double percentile_ms;       /* latency at latency_percentile over the completed queries      */
  alma_latency_stats latency; /* from arrival (queueing included), ms                          */
  alma_latency_stats service; /* the inference call alone, ms                                  */
  int valid;                  /* every query completed, percentile_ms <= the bound, and the
                                 minimum duration and query count met                           */
  int early_stopped;          /* a search's run stopped once over_bound made it INVALID         */
  const char *reason;         /* why INVALID; NULL when VALID                                  */
} alma_server_run;
typedef struct alma_server_result {
  int instances, workers;     /* sessions: instances x workers, one query each at a time       */
  int threads_per_instance;
  double latency_bound_ms, percentile;
  int search;                 /* 1: target_qps was 0, the runs are the search's                */
  double min_duration_s;      /* each run's schedule spans at least this long ...              */
  int64_t min_queries;        /* ... and holds at least this many queries                      */
  int best;                   /* the reported run: a search's highest VALID target, a fixed
                                 target's one run; -1 when the search found none VALID          */
  int n_runs;
  const alma_server_run *runs;/* in the order run                                              */
  const char *error;          /* NULL unless the scenario failed                               */
} alma_server_result;
/* NULL when the server scenario did not run for this result. */
const alma_server_result *alma_result_server(const alma_result *r);

/* Where a row came from, in a result set that gathers several models or machines: a model suite
 * (alma bench over a directory or list of models) or alma merge of a sweep's tasks. NULL strings
 * where unknown. */
typedef struct alma_result_origin {
  const char *model;          /* the model file                                                */
  const char *model_hash;     /* alma_model_hash of it                                         */
  int task;                   /* the sweep's task number, -1 outside a sweep                    */
  const char *node;           /* the host it ran on (Slurm's node name)                        */
  const char *partition;      /* the Slurm partition; NULL for a local run                     */
  const char *machine;        /* the host's CPU model: rows are per machine type               */
  const char *job;            /* Slurm's job and array task ("1234_5"); NULL for a local run    */
  const char *cpus;           /* the CPUs it was given and pinned to ("0-3")                  */
} alma_result_origin;
/* NULL when the row has no origin (a plain one-model run). */
const alma_result_origin *alma_result_origin_of(const alma_result *r);

/* Contention over the timed phase (docs/methodology.md, Contention): what CPU the conversion's
 * process got, measured in the process itself. Figures that cannot be read here are NaN (-1 for
 * counts) and `notes` says which. */
typedef struct alma_contention {
  int measured;               /* 0: no timed phase measured (failed before it, build_only)      */
  double wall_s;              /* the timed phase's wall time (CLOCK_MONOTONIC around it)        */
  int threads;                /* threads asked for (1 for a single-threaded runtime)            */
  int cpus;                   /* CPUs the process may run on (sched_getaffinity)                */
  double cpu_s;               /* CPU time the process received, user + system (getrusage)       */
  double utilization;         /* cpu_s / (min(threads, cpus) x wall_s)                          */
  double run_delay_s;         /* time its threads were runnable but waited for a CPU
                                 (/proc/self/task/N/schedstat); NaN when unavailable            */
  double cpu_share;           /* cpu_s / (cpu_s + run_delay_s): the share of the CPU it asked for
                                 that it got; NaN without run_delay_s                           */
  int64_t voluntary_switches, involuntary_switches; /* context switches (getrusage)             */
  double others_cpu_s;        /* CPU time of other processes on its CPUs (/proc/stat busy time of
                                 those CPUs minus cpu_s)                                        */
  double steal_s;             /* time the hypervisor ran something else on its CPUs (/proc/stat) */
  double psi_some_s;          /* /proc/pressure/cpu "some" total over the phase; NaN when absent */
  int disturbed;              /* the phase clearly got less CPU than it needed: see reason      */
  const char *reason;         /* why disturbed, with the figures; NULL when not                 */
  int spinning;               /* disturbed while the runtime spin-waits: latencies can be many
                                 times the quiet ones                                           */
  const char *advice;         /* the setting that avoids the spin-wait; NULL when not spinning  */
  const char *notes;          /* what could not be measured here; NULL when everything was      */
} alma_contention;
/* NULL when not measured. For a row of several repeats (config repeat), the row is disturbed
 * when any repeat was; the figures are the first disturbed repeat's (else the first's). */
const alma_contention *alma_result_contention(const alma_result *r);
int alma_result_disturbed(const alma_result *r);
/* The same measurement around a phase a caller times itself (the Python package's PyTorch rows):
 * alma_contention_begin reads the counters now (NULL when out of memory); alma_contention_end
 * reads them again, frees the snapshot and fills *out with the figures and the same verdict the
 * harness gives its own rows. threads: the threads the phase asked for; spin_advice: when those
 * threads spin-wait, the words naming the setting that avoids it (NULL or "": they do not).
 * *out's strings are owned: free them with alma_contention_clear. */
typedef struct alma_cpu_snapshot alma_cpu_snapshot;
alma_cpu_snapshot *alma_contention_begin(void);
alma_status alma_contention_end(alma_cpu_snapshot *snapshot, int threads, const char *spin_advice,
                                alma_contention *out);
void alma_contention_clear(alma_contention *c);
/* The outside check of alma's clock: the timed phase's wall time, and the share of it that the
 * batch latencies (plus hook times and one timer overhead per batch) account for: 1 when nothing
 * but the timed calls ran in the loop (NaN when not measured). */
double alma_result_clock_agreement(const alma_result *r);

/* Repeats across processes (config repeat = K >= 2): the conversion ran in K separate processes,
 * interleaved with the other conversions (A B C A B C ...). The row's latency_ms pools every
 * batch; these are the figures that include the between-process variance. */
typedef struct alma_repeat_run {
  int run_index;              /* its place in the sweep's run order (0-based)                  */
  int64_t n;                  /* timed batches (its slice of raw_ms, in repeat order)          */
  double median_ms;
  double cpu_share;           /* as in alma_contention (NaN when unknown)                      */
  int disturbed;
  const char *reason;         /* NULL when not disturbed                                       */
} alma_repeat_run;
typedef struct alma_repeat_stats {
  int k;                      /* processes                                                     */
  double median_ms;           /* the median of the processes' medians                          */
  double ci95[2];             /* 95% CI of it: a hierarchical bootstrap, processes then batches
                                 (docs/methodology.md)                                         */
  double min_ms, max_ms;      /* the lowest and highest process median                         */
  double spread;              /* (max_ms - min_ms) / median_ms                                 */
  double cv;                  /* stdev / mean of the process medians                           */
  int n_disturbed;            /* repeats disturbed                                             */
  const alma_repeat_run *runs;/* k entries, in repeat order                                    */
  double next95[2];           /* where one more process's median should land, 95%: a prediction
                                 interval on the log of the process medians (t with k - 1 degrees
                                 of freedom; docs/methodology.md); NaN for k < 3                */
} alma_repeat_stats;
/* NULL unless the row has repeats. */
const alma_repeat_stats *alma_result_repeats(const alma_result *r);
/* The latency a row is ranked and compared by: the median of medians for a row of repeats, the
 * median batch latency otherwise; ci gets its 95% interval (may be NULL). */
double alma_result_median_ms(const alma_result *r, double ci[2]);

/* Failures: the status of the failure (ALMA_ERR_CRASH, ALMA_ERR_TIMEOUT, ...), ALMA_OK otherwise;
 * the one-line error, the step it happened in, and the full traceback (step chain, library
 * message, the child's stderr tail, native backtrace for crashes). "" when none. */
alma_status alma_result_error_status(const alma_result *r);
const char *alma_result_error(const alma_result *r);
const char *alma_result_failed_step(const alma_result *r);
const char *alma_result_traceback(const alma_result *r);
/* Every timed batch latency in ms, in run order. */
int64_t alma_result_n_raw(const alma_result *r);
const double *alma_result_raw_ms(const alma_result *r);

/* A block per conversion, then a table sorted by throughput with the speed-up over the first
 * conversion. include_traceback: print failures' tracebacks in full. */
alma_status alma_results_print(const alma_results *r, FILE *f, int include_traceback);
/* Only the summary table. */
alma_status alma_results_print_summary(const alma_results *r, FILE *f);
/* JSON as in docs/json.md; include_raw adds raw_ms. */
alma_status alma_results_save_json(const alma_results *r, const char *path, int include_raw);
/* malloc'd JSON text (free with free()). */
alma_status alma_results_to_json(const alma_results *r, int include_raw, char **json_out);
/* Reads a file written by alma_results_save_json back (for comparisons): system, model, config
 * and every result with its latencies when saved with raw. ALMA_ERR_PARSE naming what is wrong. */
alma_status alma_results_load_json(const char *path, alma_results **results_out);
alma_status alma_results_from_json(const char *json, alma_results **results_out);
/* One row per result (conversion and batch size: its latency mode), then one per throughput
 * configuration of it; header first (docs/json.md lists the columns). */
alma_status alma_results_save_csv(const alma_results *r, const char *path);
alma_status alma_results_write_csv(const alma_results *r, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
