/* `alma run MODEL [--input NAME=FILE.npy]... [--output-dir DIR] [--conversion C] [--seed N]
 * [--batch-size N]`: one inference. Inputs not given are seeded random data; each output's shape,
 * dtype and a short summary are printed, and with --output-dir written to DIR/<output name>.npy
 * (a sequence or optional output: one file per element, DIR/<name>_<i>.npy; a sequence of maps,
 * ZipMap's: DIR/<name>.json, a list of objects, docs/cli.md). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/bench.h"
#include "runtimes/runtime.h"
#include "cli.h"
#include "core/core.h"
#include "report/report.h"
#include "runtimes/session.h"

static void run_usage(FILE *f) {
  fprintf(f,
          "usage: alma run MODEL [--input NAME=FILE]... [--output-dir DIR] [--conversion C]\n"
          "                [--seed N] [--batch-size N] [--threads N] [--profile[=N]] [--verbose]\n"
          "                [--timeout S] [--memory-limit MB]\n\n"
          "Runs one inference and prints each output's shape, dtype and a short summary.\n\n"
          "  -i, --input NAME=FILE   data for input NAME: a .npy file (or an IDX file: *.idx, *-ubyte);\n"
          "                          its dtype must be the input's and its shape must fit the input's\n"
          "                          (symbolic dims take any size)\n"
          "  -o, --output-dir DIR    write each output to DIR/<output name>.npy (characters outside\n"
          "                          A-Za-z0-9._- become '_'; a sequence of maps, ZipMap's, to\n"
          "                          <output name>.json: a list of objects); DIR is created if needed\n"
          "  -c, --conversion C      conversion chain, e.g. EAGER or FOLD+EAGER (default EAGER)\n"
          "  -s, --seed N            seed of the random data for inputs not given (default 0)\n"
          "  -b, --batch-size N      size of a symbolic first dim in random inputs (default 1; other\n"
          "                          symbolic dims are 1)\n"
          "  -t, --threads N         intra-op threads (default 0 = physical cores)\n"
          "  -O, --runtime-option RUNTIME.NAME=VALUE  a runtime setting (repeatable; alma list --options)\n"
          "  -v, --verbose           print the conversion's plan\n"
          "      --profile[=N]       after the inference, run N more (default 10) with every node timed\n"
          "                          and print the slowest nodes and op types with their placement\n"
          "      --timeout S         give up after S seconds (default 0 = none): the run is killed,\n"
          "                          its stack printed, exit status 1\n"
          "      --memory-limit MB   address-space limit (default: the machine's physical memory;\n"
          "                          0 = none): a runaway allocation fails with an error, exit 1\n"
          "  -h, --help              this help\n\n"
          "A conversion with INT8_STATIC calibrates on this inference's inputs (one batch).\n"
          "Random inputs: floating point ~ N(0, 1), integers uniform in [0, 10), bool uniform.\n");
}

/* ---- random data (splitmix64: small, seedable, the same on every platform) ------------------- */
static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double rng_uniform(uint64_t *s) { return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }

static double rng_normal(uint64_t *s) { /* Box-Muller; u1 in (0, 1] keeps log finite */
  double u1 = 1.0 - rng_uniform(s), u2 = rng_uniform(s);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static alma_status random_input(const alma_model *m, int i, int64_t batch, uint64_t seed, alma_tensor *t) {
  int rank = alma_model_input_rank(m, i);
  alma_dtype dt = alma_model_input_dtype(m, i);
  int64_t dims[ALMA_MAX_RANK];
  if (rank < 0 || rank > ALMA_MAX_RANK)
    return alma__errorf(ALMA_ERR_UNSUPPORTED, "input '%s' has an unknown or too large rank; give it with --input",
                        alma_model_input_name(m, i));
  for (int a = 0; a < rank; a++) {
    int64_t d = alma_model_input_dim(m, i, a);
    dims[a] = d >= 0 ? d : a == 0 ? batch : 1;
    if (d < 0 && a > 0) { /* a pool or strided layer needing more fails far from here: say why now */
      const char *p = alma_model_input_dim_param(m, i, a);
      fprintf(stderr, "warning: input '%s': symbolic dim '%s' (axis %d) bound to 1 in its random data; give data "
              "of the real shape with --input %s=FILE.npy\n", alma_model_input_name(m, i), p && p[0] ? p : "?", a,
              alma_model_input_name(m, i));
    }
  }
  if (!alma_dtype_size(dt) || dt == ALMA_DTYPE_STRING)
    return alma__errorf(ALMA_ERR_UNSUPPORTED, "input '%s' has dtype %s, for which alma makes no random data",
                        alma_model_input_name(m, i), alma_dtype_name(dt));
  alma_status st = alma__tensor_alloc(t, dt, rank, dims);
  if (st != ALMA_OK) return alma__error_prefix(st, "random data for input '%s': ", alma_model_input_name(m, i));
  /* each input its own stream, so adding --input for one input leaves the others' data unchanged */
  uint64_t s = seed * 0x100000001b3ull + (uint64_t)i * 0x9e3779b97f4a7c15ull;
  int64_t n = alma_tensor_numel(t);
  for (int64_t k = 0; k < n; k++) {
    if (alma__dtype_is_float(dt)) alma__set_f64(t->data, dt, k, rng_normal(&s));
    else if (dt == ALMA_DTYPE_BOOL) alma__set_i64(t->data, dt, k, (int64_t)(rng_next(&s) >> 63));
    else alma__set_i64(t->data, dt, k, (int64_t)(rng_next(&s) % 10));
  }
  return ALMA_OK;
}

/* ---- input files --------------------------------------------------------------------------- */
static int ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

static void shape_with_symbols(const alma_model *m, int i, char *buf, size_t n) {
  int rank = alma_model_input_rank(m, i);
  size_t o = (size_t)snprintf(buf, n, "[");
  for (int a = 0; a < rank && o < n; a++) {
    int64_t d = alma_model_input_dim(m, i, a);
    const char *p = alma_model_input_dim_param(m, i, a);
    if (d >= 0) o += (size_t)snprintf(buf + o, n - o, "%s%" PRId64, a ? "," : "", d);
    else o += (size_t)snprintf(buf + o, n - o, "%s%s", a ? "," : "", p && p[0] ? p : "?");
  }
  if (o < n) snprintf(buf + o, n - o, "]");
}

static alma_status load_input(const alma_model *m, int i, const char *file, alma_tensor *t) {
  const char *name = alma_model_input_name(m, i);
  alma_status st = ends_with(file, ".idx") || ends_with(file, "-ubyte") ? alma_idx_load(file, t)
                                                                           : alma_npy_load(file, t);
  if (st != ALMA_OK) return alma__error_prefix(st, "input '%s': ", name);
  alma_dtype want = alma_model_input_dtype(m, i);
  /* int4/int2 (uint4/uint2) inputs come as int8 (uint8) .npy files, numpy's narrowest: their values
   * are alma's bytes, once each is checked to be in the type's range */
  if (alma__dtype_is_lowint(want) &&
      t->dtype == (want == ALMA_DTYPE_INT4 || want == ALMA_DTYPE_INT2 ? ALMA_DTYPE_INT8 : ALMA_DTYPE_UINT8)) {
    int64_t lo, hi, n = alma_tensor_numel(t);
    alma__lowint_range(want, &lo, &hi);
    for (int64_t k = 0; k < n; k++) {
      int64_t v = alma__get_i64(t->data, t->dtype, k);
      if (v < lo || v > hi) {
        st = alma__errorf(ALMA_ERR_INVALID_ARG, "input '%s' is %s but '%s' holds %lld at element %lld (outside [%lld, %lld])",
                          name, alma_dtype_name(want), file, (long long)v, (long long)k, (long long)lo, (long long)hi);
        alma_tensor_free_data(t);
        return st;
      }
    }
    t->dtype = want;
  }
  char got[256], exp[256];
  alma__shape_str(t->rank, t->dims, got, sizeof got);
  shape_with_symbols(m, i, exp, sizeof exp);
  if (t->dtype != want) {
    st = alma__errorf(ALMA_ERR_TYPE, "input '%s' is %s %s but '%s' holds %s %s", name, alma_dtype_name(want), exp,
                      file, alma_dtype_name(t->dtype), got);
    alma_tensor_free_data(t);
    return st;
  }
  int rank = alma_model_input_rank(m, i);
  int bad = rank >= 0 && rank != t->rank;
  for (int a = 0; !bad && rank >= 0 && a < rank; a++) {
    int64_t d = alma_model_input_dim(m, i, a);
    if (d >= 0 && d != t->dims[a]) bad = 1;
  }
  if (bad) {
    st = alma__errorf(ALMA_ERR_SHAPE, "input '%s' has shape %s (%s) but '%s' holds shape %s", name, exp,
                      alma_dtype_name(want), file, got);
    alma_tensor_free_data(t);
  }
  return st;
}

/* ---- outputs ------------------------------------------------------------------------------- */
static void print_summary(const char *name, const alma_tensor *t) {
  char shp[256];
  alma__shape_str(t->rank, t->dims, shp, sizeof shp);
  int64_t n = alma_tensor_numel(t);
  printf("%s: %s %s", alma__safe(name), alma_dtype_name(t->dtype), shp);
  if (n == 0 || !alma_dtype_size(t->dtype)) {
    printf(" (empty)\n");
    return;
  }
  if (t->dtype == ALMA_DTYPE_STRING) { /* the first few, quoted, bytes outside printable ASCII as \xNN */
    printf("\n  first:");
    for (int64_t k = 0; k < n && k < 8; k++) {
      size_t len;
      const char *p = alma_tensor_string(t, k, &len);
      printf(" \"");
      for (size_t i = 0; i < len && i < 64; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch >= 32 && ch < 127 && ch != '"' && ch != '\\') putchar(ch);
        else printf("\\x%02x", ch);
      }
      printf(len > 64 ? "...\"" : "\"");
    }
    printf(n > 8 ? " ...\n" : "\n");
    return;
  }
  int is_float = alma__dtype_is_float(t->dtype);
  double mn = INFINITY, mx = -INFINITY, sum = 0;
  int64_t nan = 0, inf = 0, finite = 0;
  for (int64_t k = 0; k < n; k++) {
    double v = alma__get_f64(t->data, t->dtype, k);
    if (isnan(v)) {
      nan++;
      continue;
    }
    if (isinf(v)) inf++;
    if (v < mn) mn = v;
    if (v > mx) mx = v;
    if (!isinf(v)) {
      sum += v;
      finite++;
    }
  }
  if (t->dtype == ALMA_DTYPE_BOOL) {
    printf("  true %.0f of %" PRId64 "\n", sum, n);
  } else {
    if (nan < n)
      printf(is_float ? "  min %.6g  max %.6g  mean %.6g" : "  min %.0f  max %.0f  mean %.6g", mn, mx,
             finite ? sum / (double)finite : NAN);
    if (nan) printf("  NaN %" PRId64, nan);
    if (inf) printf("  Inf %" PRId64, inf);
    printf("\n");
  }
  printf("  first:");
  for (int64_t k = 0; k < n && k < 8; k++) {
    double v = alma__get_f64(t->data, t->dtype, k);
    if (is_float) printf(" %.6g", v);
    else printf(" %" PRId64, alma__get_i64(t->data, t->dtype, k));
  }
  printf(n > 8 ? " ...\n" : "\n");
}

/* A map or a sequence of maps (core.h: ZipMap's output). */
static int has_maps(const alma_tensor *t) {
  return t->dtype == ALMA__DTYPE_MAP || (t->dtype == ALMA__DTYPE_SEQUENCE && alma__container_elem(t) == ALMA__DTYPE_MAP);
}

/* A map's key k: a JSON string (int64 keys as their decimal text; bytes outside printable ASCII
 * and the JSON specials escaped, UTF-8 passed through) into f, or for printing (json 0) quoted the
 * same way for strings and bare for integers. */
static void put_key(FILE *f, const alma_tensor *keys, int64_t k, int json) {
  if (keys->dtype != ALMA_DTYPE_STRING) {
    fprintf(f, json ? "\"%" PRId64 "\"" : "%" PRId64, alma__get_i64(keys->data, keys->dtype, k));
    return;
  }
  size_t len;
  const char *p = alma_tensor_string(keys, k, &len);
  fputc('"', f);
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)p[i];
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch == '\n') fputs("\\n", f);
    else if (ch == '\t') fputs("\\t", f);
    else if (ch < 32 || ch == 127) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

/* A float value: %.9g (round-trips float32); NaN and infinities as Python's json writes them. */
static void put_value(FILE *f, const alma_tensor *vals, int64_t k) {
  double v = alma__get_f64(vals->data, vals->dtype, k);
  if (isnan(v)) fputs("NaN", f);
  else if (isinf(v)) fputs(v > 0 ? "Infinity" : "-Infinity", f);
  else fprintf(f, "%.9g", v);
}

static void put_map(FILE *f, const alma_tensor *m, int json, int64_t max_pairs) {
  const alma__seq *kv = alma__container(m);
  int64_t n = kv && kv->n == 2 ? alma_tensor_numel(&kv->items[0]) : 0;
  fputc('{', f);
  for (int64_t k = 0; k < n && k < max_pairs; k++) {
    if (k) fputs(", ", f);
    put_key(f, &kv->items[0], k, json);
    fputs(": ", f);
    put_value(f, &kv->items[1], k);
  }
  if (n > max_pairs) fputs(", ...", f);
  fputc('}', f);
}

/* A sequence of maps (or one map): its type and length, then the first maps. */
static void print_maps(const char *name, const alma_tensor *t) {
  char ty[96];
  alma__container_type_str(t, ty, sizeof ty);
  if (t->dtype == ALMA__DTYPE_MAP) {
    printf("%s: %s\n  ", alma__safe(name), ty);
    put_map(stdout, t, 0, 16);
    printf("\n");
    return;
  }
  const alma__seq *sq = alma__container(t);
  int n = sq ? sq->n : 0;
  printf("%s: %s of %d map%s\n", alma__safe(name), ty, n, n == 1 ? "" : "s");
  for (int e = 0; e < n && e < 4; e++) {
    printf("  [%d] ", e);
    put_map(stdout, &sq->items[e], 0, 16);
    printf("\n");
  }
  if (n > 4) printf("  ...\n");
}

/* A sequence of maps as a JSON list of objects (one map: the object), one map a line; ALMA_EXIT_OK
 * or the exit code of the failure. */
static int write_maps_json(const char *fpath, const alma_tensor *t, const char *name) {
  FILE *f = fopen(fpath, "w");
  if (!f) return alma_cli_fail(alma__errorf(ALMA_ERR_IO, "cannot write '%s': %s", fpath, strerror(errno)), name);
  if (t->dtype == ALMA__DTYPE_MAP) {
    put_map(f, t, 1, INT64_MAX);
    fputc('\n', f);
  } else {
    const alma__seq *sq = alma__container(t);
    int n = sq ? sq->n : 0;
    fputc('[', f);
    for (int e = 0; e < n; e++) {
      fputs(e ? ",\n " : "", f);
      put_map(f, &sq->items[e], 1, INT64_MAX);
    }
    fputs("]\n", f);
  }
  if (ferror(f) | (fclose(f) != 0))
    return alma_cli_fail(alma__errorf(ALMA_ERR_IO, "error writing '%s'", fpath), name);
  printf("  wrote %s\n", fpath);
  return ALMA_EXIT_OK;
}

/* A sequence/optional output: its length, then each element as NAME[i]. */
static void print_container(const char *name, const alma_tensor *t) {
  if (has_maps(t)) {
    print_maps(name, t);
    return;
  }
  const alma__seq *sq = alma__container(t);
  int n = sq ? sq->n : 0;
  printf("%s: %s of %d %s\n", alma__safe(name), alma_dtype_name(t->dtype), n,
         alma__container_elem_is_seq(t) ? "sequence" : n == 1 ? "tensor" : "tensors");
  for (int e = 0; e < n; e++) {
    char sub[300];
    snprintf(sub, sizeof sub, "%.250s[%d]", name, e);
    if (alma__dtype_is_container(sq->items[e].dtype)) print_container(sub, &sq->items[e]);
    else print_summary(sub, &sq->items[e]);
  }
}

/* Writes t to fpath (bfloat16 widened to float32: .npy has no bfloat16); ALMA_EXIT_OK or the exit
 * code of the failure. */
static int write_npy(const char *fpath, const alma_tensor *t, const char *name) {
  alma_tensor f;
  const alma_tensor *w = t;
  alma_status st;
  if (t->dtype == ALMA_DTYPE_BFLOAT16) {
    if ((st = alma__tensor_alloc(&f, ALMA_DTYPE_FLOAT32, t->rank, t->dims)) != ALMA_OK) return alma_cli_fail(st, name);
    for (int64_t k = 0; k < alma_tensor_numel(&f); k++) ((float *)f.data)[k] = alma__bf16_to_f32(((const uint16_t *)t->data)[k]);
    w = &f;
    printf("  (bfloat16 saved as float32)\n");
  }
  st = alma_npy_save(fpath, w);
  if (w == &f) alma_tensor_free_data(&f);
  if (st != ALMA_OK) return alma_cli_fail(st, name);
  printf("  wrote %s\n", fpath);
  return ALMA_EXIT_OK;
}

/* mkdir -p */
static alma_status make_dirs(const char *dir) {
  char p[4096];
  if (strlen(dir) >= sizeof p) return alma__errorf(ALMA_ERR_INVALID_ARG, "output directory path is too long");
  strcpy(p, dir);
  for (char *c = p + 1;; c++) {
    if (*c != '/' && *c) continue;
    char save = *c;
    *c = '\0';
    if (mkdir(p, 0777) != 0 && errno != EEXIST)
      return alma__errorf(ALMA_ERR_IO, "cannot create directory '%s': %s", p, strerror(errno));
    *c = save;
    if (!save) break;
  }
  struct stat sb;
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return alma__errorf(ALMA_ERR_IO, "'%s' is not a directory", dir);
  return ALMA_OK;
}

/* Output name → file name: characters outside A-Za-z0-9._- become '_'; "" → "_". */
static void sanitize(const char *name, char *out, size_t n) {
  size_t k = 0;
  for (; name[k] && k + 1 < n; k++) {
    char c = name[k];
    int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
             c == '-';
    out[k] = ok ? c : '_';
  }
  out[k] = '\0';
  if (!k && n > 1) strcpy(out, "_");
}

typedef struct {
  char *name;
  char *file;
} input_arg;

/* --profile: n more runs on the same inputs with every node timed (the first inference, which
 * pays lazy initialization, is not among them). A runtime without a per-node profile says so. */
static alma_status run_profile(alma_session *s, const char *conversion, const alma_tensor *in, int n_in, int n_out,
                               long n) {
  alma_profile p;
  alma_status st = alma__session_profile_start(s);
  if (st == ALMA_ERR_UNSUPPORTED) {
    ALMA_TRY(alma__profile_init(&p, alma__session_runtime_name(s), alma_last_error()));
    alma__error_clear();
    alma__profile_print(&p, stdout);
    alma__profile_clear(&p);
    return ALMA_OK;
  }
  ALMA_TRY(st);
  alma_tensor *out = calloc((size_t)n_out + 1, sizeof *out);
  if (!out) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  double t0 = alma__now_s(), in_runs = 0;
  for (long k = 0; k < n && st == ALMA_OK; k++) {
    double t = alma__now_s();
    st = alma_session_run(s, in, n_in, out, n_out);
    in_runs += alma__now_s() - t;
    for (int j = 0; j < n_out; j++) alma_tensor_free_data(&out[j]);
  }
  double seconds = alma__now_s() - t0;
  alma__prof_graph *graphs = NULL;
  int n_graphs = 0;
  if (st == ALMA_OK) st = alma__session_profile_read(s, &graphs, &n_graphs);
  if (st == ALMA_OK) st = alma__profile_init(&p, alma__session_runtime_name(s), NULL);
  if (st == ALMA_OK) {
    st = alma__profile_build(&p, graphs, n_graphs, n, seconds, 1e3 * in_runs / (double)n, NAN);
    if (st == ALMA_OK) {
      printf("profile of %s over %ld more run%s:\n", conversion, n, n == 1 ? "" : "s");
      alma__profile_print(&p, stdout);
    }
    alma__profile_clear(&p);
  }
  alma__prof_graphs_free(graphs, n_graphs);
  free(out);
  return st;
}

/* SIGINT, SIGTERM, SIGHUP while the child runs: it is killed (with what it started), and this
 * process ends by the same signal. */
static void on_stop_signal(int sig) { alma__interrupt(sig); }

static void catch_stop_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  int sigs[] = {SIGINT, SIGTERM, SIGHUP};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, NULL);
}

int alma_cmd_run(int argc, char **argv) {
  static const struct option opts[] = {
      {"input", required_argument, 0, 'i'},      {"output-dir", required_argument, 0, 'o'},
      {"conversion", required_argument, 0, 'c'}, {"seed", required_argument, 0, 's'},
      {"batch-size", required_argument, 0, 'b'}, {"threads", required_argument, 0, 't'},
      {"verbose", no_argument, 0, 'v'},          {"help", no_argument, 0, 'h'},
      {"profile", optional_argument, 0, 'P'},    {"timeout", required_argument, 0, 'T'},
      {"memory-limit", required_argument, 0, 'M'}, {"runtime-option", required_argument, 0, 'O'},
      {0, 0, 0, 0}};
  char rt_options[1024] = "";
  double timeout = 0;
  long long memory_mb = -1;
  const char *out_dir = NULL, *conversion = "EAGER";
  uint64_t seed = 0;
  int64_t batch = 1;
  int threads = 0, verbose = 0, n_args = 0, c;
  long profile = 0;
  input_arg *args = calloc((size_t)argc + 1, sizeof *args);
  if (!args) return alma_cli_fail(ALMA_ERR_NOMEM, "run");
  int rc = ALMA_EXIT_OK;
  alma_model *m = NULL;
  alma_session *s = NULL;
  alma_tensor *in = NULL, *out = NULL;
  int n_in = 0, n_out = 0;
  char *end;

  optind = 1;
  while ((c = getopt_long(argc, argv, "i:o:c:s:b:t:O:vh", opts, NULL)) != -1) {
    switch (c) {
      case 'i': {
        char *eq = strchr(optarg, '=');
        if (!eq || eq == optarg || !eq[1]) {
          fprintf(stderr, "alma: error: --input takes NAME=FILE, got '%s'\n", optarg);
          rc = ALMA_EXIT_USAGE;
          goto done;
        }
        *eq = '\0';
        args[n_args].name = optarg;
        args[n_args++].file = eq + 1;
        break;
      }
      case 'o': out_dir = optarg; break;
      case 'c': conversion = optarg; break;
      case 's':
        errno = 0;
        seed = strtoull(optarg, &end, 0);
        if (errno || *end || optarg[0] == '-') {
          fprintf(stderr, "alma: error: --seed takes a non-negative integer, got '%s'\n", optarg);
          rc = ALMA_EXIT_USAGE;
          goto done;
        }
        break;
      case 'b':
        errno = 0;
        batch = strtoll(optarg, &end, 10);
        if (errno || *end || batch < 1 || batch > (INT64_C(1) << 31)) {
          fprintf(stderr, "alma: error: --batch-size takes a positive integer, got '%s'\n", optarg);
          rc = ALMA_EXIT_USAGE;
          goto done;
        }
        break;
      case 't':
        errno = 0;
        threads = (int)strtol(optarg, &end, 10);
        if (errno || *end || threads < 0 || threads > 4096) {
          fprintf(stderr, "alma: error: --threads takes an integer in [0, 4096], got '%s'\n", optarg);
          rc = ALMA_EXIT_USAGE;
          goto done;
        }
        break;
      case 'O': {
        size_t len = strlen(rt_options);
        int w = snprintf(rt_options + len, sizeof rt_options - len, "%s%s", len ? "," : "", optarg);
        if (w < 0 || (size_t)w >= sizeof rt_options - len || alma__rt_options_check(rt_options) != ALMA_OK) {
          fprintf(stderr, "alma: error: --runtime-option: %s\n",
                  w < 0 || (size_t)w >= sizeof rt_options - len ? "too many options in all" : alma_last_error());
          rc = ALMA_EXIT_USAGE;
          goto done;
        }
        break;
      }
      case 'v': verbose = 1; break;
      case 'P':
        errno = 0;
        profile = optarg ? strtol(optarg, &end, 10) : 10;
        if (optarg && (errno || *end || profile < 1 || profile > 1000000)) {
          fprintf(stderr, "alma: error: --profile takes a number of runs in [1, 1000000], got '%s'\n", optarg);
          rc = ALMA_EXIT_USAGE;
          goto done;
        }
        break;
      case 'T':
        errno = 0;
        timeout = strtod(optarg, &end);
        if (errno || *end || end == optarg || !(timeout >= 0 && timeout <= 1e7)) {
          fprintf(stderr, "alma: error: --timeout takes seconds in [0, 1e7] (0 = none), got '%s'\n", optarg);
          rc = ALMA_EXIT_USAGE;
          goto done;
        }
        break;
      case 'M':
        errno = 0;
        memory_mb = strtoll(optarg, &end, 10);
        if (errno || *end || end == optarg || memory_mb < 0 || memory_mb > 1000000000) {
          fprintf(stderr, "alma: error: --memory-limit takes MiB in [0, 1e9] (0 = none), got '%s'\n", optarg);
          rc = ALMA_EXIT_USAGE;
          goto done;
        }
        break;
      case 'h': run_usage(stdout); goto done;
      default: run_usage(stderr); rc = ALMA_EXIT_USAGE; goto done;
    }
  }
  if (optind != argc - 1) {
    fprintf(stderr, "alma: error: run takes exactly one MODEL\n");
    run_usage(stderr);
    rc = ALMA_EXIT_USAGE;
    goto done;
  }
  const char *path = argv[optind];
  /* Everything from loading the model on runs in a child, under the time and memory limits: a
   * hang, a runaway allocation or a crash becomes this process's error message and exit 1. */
  alma__job_opts lim = {.timeout_s = timeout,
                        .memory_limit_bytes = memory_mb > 0 ? (int64_t)memory_mb << 20
                                              : memory_mb < 0 ? alma__default_memory_limit()
                                                              : 0};
  if (lim.timeout_s > 0 || lim.memory_limit_bytes > 0) {
    alma__job_outcome oc;
    catch_stop_signals();
    int who = alma__fork_supervised(&lim, &oc);
    if (who < 0) {
      rc = alma_cli_fail(ALMA_ERR_RUNTIME, "run");
      goto done;
    }
    if (who > 0) {
      if (alma__interrupted()) {
        int sig = alma__interrupted();
        signal(sig, SIG_DFL);
        raise(sig);
        rc = 128 + sig;
      } else if (oc.status == ALMA_OK) {
        rc = oc.exit_code;
      } else {
        fprintf(stderr, "alma: error: %s: the inference %s%s\n", alma_status_name(oc.status), oc.reason,
                oc.status == ALMA_ERR_TIMEOUT ? " (--timeout)" : "");
        rc = ALMA_EXIT_FAILED;
      }
      goto done;
    }
  }
  alma_status st = alma_model_load(path, &m);
  if (st != ALMA_OK) {
    rc = alma_cli_fail(st, NULL);
    goto done;
  }
  n_in = alma_model_num_inputs(m);
  n_out = alma_model_num_outputs(m);
  in = calloc((size_t)n_in + 1, sizeof *in);
  out = calloc((size_t)n_out + 1, sizeof *out);
  if (!in || !out) {
    rc = alma_cli_fail(alma__errorf(ALMA_ERR_NOMEM, "out of memory"), "run");
    goto done;
  }

  /* every --input must name a model input, once */
  for (int a = 0; a < n_args; a++) {
    int found = -1;
    for (int i = 0; i < n_in; i++)
      if (!strcmp(alma_model_input_name(m, i), args[a].name)) found = i;
    for (int b = 0; b < a && found >= 0; b++)
      if (!strcmp(args[b].name, args[a].name)) {
        rc = alma_cli_fail(alma__errorf(ALMA_ERR_INVALID_ARG, "input '%s' is given twice", args[a].name), NULL);
        goto done;
      }
    if (found < 0) {
      char names[2048];
      size_t o = 0;
      names[0] = '\0';
      for (int i = 0; i < n_in && o < sizeof names; i++)
        o += (size_t)snprintf(names + o, sizeof names - o, "%s'%s'", i ? ", " : "", alma_model_input_name(m, i));
      rc = alma_cli_fail(alma__errorf(ALMA_ERR_NOT_FOUND, "model '%s' has no input '%s'; its inputs are: %s", path,
                                      args[a].name, n_in ? names : "(none)"),
                         NULL);
      goto done;
    }
  }
  for (int i = 0; i < n_in; i++) {
    const char *file = NULL;
    for (int a = 0; a < n_args; a++)
      if (!strcmp(args[a].name, alma_model_input_name(m, i))) file = args[a].file;
    st = file ? load_input(m, i, file, &in[i]) : random_input(m, i, batch, seed, &in[i]);
    if (st != ALMA_OK) {
      rc = alma_cli_fail(st, NULL);
      goto done;
    }
    char shp[256];
    alma__shape_str(in[i].rank, in[i].dims, shp, sizeof shp);
    printf("input %s: %s %s from %s\n", alma__safe(alma_model_input_name(m, i)), alma_dtype_name(in[i].dtype), shp,
           file ? alma__safe(file) : "random data");
  }

  /* before the inference, so a bad DIR costs nothing */
  if (out_dir && (st = make_dirs(out_dir)) != ALMA_OK) {
    rc = alma_cli_fail(st, NULL);
    goto done;
  }

  alma_session_options so;
  alma_session_options_init(&so);
  so.threads = threads;
  so.verbose = verbose;
  so.runtime_options = rt_options;
  /* INT8_STATIC calibrates on this inference's inputs: they have the shapes the model is run at,
   * where the pass's own random batches would set every unknown dim but the batch to 1 */
  so.calibration_data = in;
  so.n_calibration_batches = 1;
  int any_random = 0;
  for (int i = 0; i < n_in; i++) {
    int given = 0;
    for (int a = 0; a < n_args; a++) given |= !strcmp(args[a].name, alma_model_input_name(m, i));
    any_random |= !given;
  }
  if (any_random && strstr(conversion, "INT8_STATIC"))
    fprintf(stderr, "warning: INT8_STATIC calibrates on this run's inputs, some of them random data, which "
                    "calibrates poorly: give real samples with -i\n");
  st = alma_session_create(m, conversion, &so, &s);
  if (st != ALMA_OK) {
    rc = alma_cli_fail(st, conversion);
    goto done;
  }
  double t0 = alma__now_s();
  st = alma_session_run(s, in, n_in, out, n_out);
  double dt = alma__now_s() - t0;
  if (st != ALMA_OK) {
    /* Options were valid: a failure while running is the model's or the data's (e.g. an index out
     * of range), not a usage error. */
    rc = alma_cli_fail(st, NULL);
    if (rc == ALMA_EXIT_USAGE) rc = ALMA_EXIT_INPUT;
    goto done;
  }
  printf("ran %s in %.3f ms\n", conversion, dt * 1e3);
  for (int j = 0; j < n_out; j++) {
    const char *name = alma_model_output_name(m, j);
    if (alma__dtype_is_container(out[j].dtype)) print_container(name, &out[j]);
    else print_summary(name, &out[j]);
    if (!out_dir) continue;
    char fname[512], fpath[4700];
    sanitize(name, fname, sizeof fname - 16);
    /* two names that sanitize alike ("a/b", "a:b") get the output's index appended */
    for (int k = 0; k < j; k++) {
      char other[512];
      sanitize(alma_model_output_name(m, k), other, sizeof other - 16);
      if (!strcmp(other, fname)) {
        snprintf(fname + strlen(fname), 16, "_%d", j);
        break;
      }
    }
    if (has_maps(&out[j])) { /* ZipMap's sequence of maps: NAME.json */
      snprintf(fpath, sizeof fpath, "%s/%s.json", out_dir, fname);
      if ((rc = write_maps_json(fpath, &out[j], name)) != ALMA_EXIT_OK) goto done;
      continue;
    }
    if (alma__dtype_is_container(out[j].dtype)) { /* one file per element: NAME_0.npy, NAME_1.npy ... */
      const alma__seq *sq = alma__container(&out[j]);
      for (int e = 0; sq && e < sq->n && rc == ALMA_EXIT_OK; e++) {
        if (alma__dtype_is_container(sq->items[e].dtype)) { /* optional(seq): NAME_0_0.npy ... */
          const alma__seq *in2 = alma__container(&sq->items[e]);
          for (int e2 = 0; in2 && e2 < in2->n && rc == ALMA_EXIT_OK; e2++) {
            snprintf(fpath, sizeof fpath, "%s/%s_%d_%d.npy", out_dir, fname, e, e2);
            rc = write_npy(fpath, &in2->items[e2], name);
          }
          continue;
        }
        snprintf(fpath, sizeof fpath, "%s/%s_%d.npy", out_dir, fname, e);
        rc = write_npy(fpath, &sq->items[e], name);
      }
      if (rc != ALMA_EXIT_OK) goto done;
      continue;
    }
    snprintf(fpath, sizeof fpath, "%s/%s.npy", out_dir, fname);
    if ((rc = write_npy(fpath, &out[j], name)) != ALMA_EXIT_OK) goto done;
  }
  if (profile > 0 && (st = run_profile(s, conversion, in, n_in, n_out, profile)) != ALMA_OK) {
    rc = alma_cli_fail(st, "--profile");
    if (rc == ALMA_EXIT_USAGE) rc = ALMA_EXIT_INPUT;
    goto done;
  }
  if (fflush(stdout) != 0) rc = ALMA_EXIT_FAILED;

done:
  for (int i = 0; i < n_in && in; i++) alma_tensor_free_data(&in[i]);
  for (int j = 0; j < n_out && out; j++) alma_tensor_free_data(&out[j]);
  free(in);
  free(out);
  alma_session_free(s);
  alma_model_free(m);
  free(args);
  return rc;
}
