/* Input data for the harness: random batches from a seed, .npy/IDX data sets sliced into batches,
 * directories of ready-made batches, and loader callbacks. Everything a batch needs (generation,
 * file reading, dtype conversion, copying) happens in alma__batcher_new/next, outside the timed
 * region, so it counts in total elapsed time but never in inference time. */
#include <dirent.h>
#include <errno.h>
#include <ctype.h>
#include <math.h>
#include <strings.h>
#include <sys/stat.h>

#include "bench/bench.h"

enum { D_RANDOM, D_NPY, D_IDX, D_DIR, D_LOADER };
#define MAX_OVERRIDES 64

typedef struct {
  char name[128];
  int has_shape;
  int rank;
  int64_t dims[ALMA_MAX_RANK];
  alma_dtype dtype;
} override_t;

struct alma_data {
  int kind;
  int n_over;
  override_t over[MAX_OVERRIDES];
  int n_paths;
  char **paths;
  double scale, offset;
  alma_data_next_fn next;
  alma_data_reset_fn reset;
  void *user;
};

static alma_status data_new(int kind, alma_data **out) {
  if (!out) return alma__errorf(ALMA_ERR_INVALID_ARG, "data: NULL output pointer");
  *out = calloc(1, sizeof **out);
  if (!*out) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  (*out)->kind = kind;
  (*out)->scale = 1;
  return ALMA_OK;
}

alma_status alma_data_random(alma_data **out) { return data_new(D_RANDOM, out); }

static alma_status data_with_paths(int kind, const char *const *paths, int n, alma_data **out) {
  if (!paths || n <= 0) return alma__errorf(ALMA_ERR_INVALID_ARG, "data: no file given");
  ALMA_TRY(data_new(kind, out));
  alma_data *d = *out;
  d->paths = calloc((size_t)n, sizeof *d->paths);
  if (!d->paths) goto oom;
  d->n_paths = n;
  for (int i = 0; i < n; i++) {
    if (!paths[i] || !*paths[i]) {
      alma_data_free(d);
      *out = NULL;
      return alma__errorf(ALMA_ERR_INVALID_ARG, "data: empty path #%d", i);
    }
    if (!(d->paths[i] = alma__strdup(paths[i]))) goto oom;
  }
  return ALMA_OK;
oom:
  alma_data_free(d);
  *out = NULL;
  return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
}

alma_status alma_data_from_npy(const char *const *paths, int n, alma_data **out) {
  return data_with_paths(D_NPY, paths, n, out);
}
alma_status alma_data_from_idx(const char *const *paths, int n, alma_data **out) {
  return data_with_paths(D_IDX, paths, n, out);
}
alma_status alma_data_from_dir(const char *dir, alma_data **out) {
  struct stat sb;
  if (!dir || stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return alma__errorf(ALMA_ERR_IO, "data directory '%s': %s", dir ? dir : "(null)",
                        dir && stat(dir, &sb) != 0 ? strerror(errno) : "not a directory");
  return data_with_paths(D_DIR, &dir, 1, out);
}

alma_status alma_data_from_loader(alma_data_next_fn next, alma_data_reset_fn reset, void *user, alma_data **out) {
  if (!next) return alma__errorf(ALMA_ERR_INVALID_ARG, "data loader: next() is required");
  ALMA_TRY(data_new(D_LOADER, out));
  (*out)->next = next;
  (*out)->reset = reset;
  (*out)->user = user;
  return ALMA_OK;
}

static int ends_with(const char *s, const char *suf) {
  size_t n = strlen(s), m = strlen(suf);
  return n >= m && !strcasecmp(s + n - m, suf);
}

/* IDX by name, or by its magic (0, 0, type, rank) when the name says nothing. */
static int looks_idx(const char *path) {
  if (ends_with(path, ".idx") || strstr(path, "-ubyte") || strstr(path, ".idx1") || strstr(path, ".idx3"))
    return 1;
  FILE *f;
  if (alma__fopen_regular(path, &f, NULL) != ALMA_OK) return 0; /* the loader reports why */
  unsigned char m[4] = {1, 1, 1, 1};
  size_t got = fread(m, 1, 4, f);
  fclose(f);
  return got == 4 && m[0] == 0 && m[1] == 0 && (m[2] == 8 || m[2] == 9 || (m[2] >= 0x0B && m[2] <= 0x0E)) &&
         m[3] >= 1 && m[3] <= ALMA_MAX_RANK;
}

alma_status alma_data_from_path(const char *path, alma_data **out) {
  if (!path || !*path) return alma__errorf(ALMA_ERR_INVALID_ARG, "data: empty path");
  char *copy = alma__strdup(path);
  if (!copy) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  const char *parts[64];
  int n = 0;
  for (char *save = NULL, *p = strtok_r(copy, ",", &save); p && n < 64; p = strtok_r(NULL, ",", &save))
    parts[n++] = p;
  alma_status st;
  struct stat sb;
  if (n == 0) {
    st = alma__errorf(ALMA_ERR_INVALID_ARG, "data: empty path '%s'", path);
  } else if (stat(parts[0], &sb) != 0) {
    st = alma__errorf(ALMA_ERR_IO, "data '%s': %s", parts[0], strerror(errno));
  } else if (S_ISDIR(sb.st_mode)) {
    st = n == 1 ? alma_data_from_dir(parts[0], out)
                : alma__errorf(ALMA_ERR_INVALID_ARG, "data: a directory cannot be combined with other paths ('%s')", path);
  } else if (ends_with(parts[0], ".npy")) {
    st = alma_data_from_npy(parts, n, out);
  } else if (looks_idx(parts[0])) {
    st = alma_data_from_idx(parts, n, out);
  } else if (ends_with(parts[0], ".gz")) {
    st = alma__errorf(ALMA_ERR_UNSUPPORTED, "data '%s' is gzip-compressed: gunzip it first", parts[0]);
  } else {
    st = alma__errorf(ALMA_ERR_UNSUPPORTED, "data '%s': not a directory, .npy or IDX file", parts[0]);
  }
  free(copy);
  return st;
}

alma_status alma_data_set_scale(alma_data *d, double scale, double offset) {
  if (!d) return alma__errorf(ALMA_ERR_INVALID_ARG, "data: NULL");
  if (!isfinite(scale) || !isfinite(offset)) return alma__errorf(ALMA_ERR_INVALID_ARG, "data scale/offset must be finite");
  d->scale = scale;
  d->offset = offset;
  return ALMA_OK;
}

void alma_data_free(alma_data *d) {
  if (!d) return;
  for (int i = 0; i < d->n_paths; i++) free(d->paths[i]);
  free(d->paths);
  free(d);
}

const char *alma_data_kind(const alma_data *d) {
  static const char *names[] = {"random", "npy", "idx", "dir", "loader"};
  return d ? names[d->kind] : "random";
}

alma_status alma_data_set_input(alma_data *d, const char *name, int rank, const int64_t *dims, alma_dtype dtype) {
  if (!d || !name || !*name) return alma__errorf(ALMA_ERR_INVALID_ARG, "data input: empty name");
  if (rank < -1 || rank > ALMA_MAX_RANK)
    return alma__errorf(ALMA_ERR_INVALID_ARG, "data input '%s': rank %d out of range (max %d)", name, rank, ALMA_MAX_RANK);
  if (strlen(name) >= sizeof d->over[0].name)
    return alma__errorf(ALMA_ERR_INVALID_ARG, "data input '%s': name too long", name);
  if (dtype != ALMA_DTYPE_UNDEFINED && alma_dtype_size(dtype) == 0)
    return alma__errorf(ALMA_ERR_INVALID_ARG, "data input '%s': dtype %s cannot be generated", name, alma_dtype_name(dtype));
  for (int i = 0; rank > 0 && i < rank; i++)
    if (!dims || dims[i] < 0)
      return alma__errorf(ALMA_ERR_INVALID_ARG, "data input '%s': dimension %d must be >= 0", name, i);
  override_t *o = NULL;
  for (int i = 0; i < d->n_over; i++)
    if (!strcmp(d->over[i].name, name)) o = &d->over[i];
  if (!o) {
    if (d->n_over >= MAX_OVERRIDES) return alma__errorf(ALMA_ERR_INVALID_ARG, "data: more than %d inputs given", MAX_OVERRIDES);
    o = &d->over[d->n_over++];
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", name);
  }
  o->has_shape = rank >= 0;
  o->rank = rank;
  for (int i = 0; i < rank; i++) o->dims[i] = dims[i];
  o->dtype = dtype;
  return ALMA_OK;
}

alma_status alma_data_set_input_spec(alma_data *d, const char *spec) {
  if (!d || !spec) return alma__errorf(ALMA_ERR_INVALID_ARG, "--input: empty");
  char buf[512];
  if (strlen(spec) >= sizeof buf) return alma__errorf(ALMA_ERR_INVALID_ARG, "--input '%s': too long", spec);
  snprintf(buf, sizeof buf, "%s", spec);
  /* Parse from the right: names may contain ':' (TensorFlow's "input:0"). */
  alma_dtype dt = ALMA_DTYPE_UNDEFINED;
  char *colon = strrchr(buf, ':');
  if (!colon) return alma__errorf(ALMA_ERR_INVALID_ARG, "--input '%s': expected NAME:SHAPE[:DTYPE], e.g. input:1x3x224x224:float32", spec);
  if (colon[1] && !strchr("0123456789", colon[1]) && strcasecmp(colon + 1, "scalar")) {
    if (alma_dtype_parse(colon + 1, &dt) != ALMA_OK)
      return alma__errorf(ALMA_ERR_INVALID_ARG, "--input '%s': unknown dtype '%s'", spec, colon + 1);
    *colon = 0;
    colon = strrchr(buf, ':');
    if (!colon) return alma__errorf(ALMA_ERR_INVALID_ARG, "--input '%s': expected NAME:SHAPE[:DTYPE]", spec);
  }
  *colon = 0;
  const char *shape = colon + 1;
  int rank = 0;
  int64_t dims[ALMA_MAX_RANK];
  if (*shape && strcasecmp(shape, "scalar")) {
    const char *p = shape;
    for (;;) {
      char *end;
      errno = 0;
      long long v = strtoll(p, &end, 10);
      if (end == p || errno || v < 0 || *p == '-' || *p == '+')
        return alma__errorf(ALMA_ERR_INVALID_ARG, "--input '%s': bad shape '%s' (dims joined by 'x', e.g. 1x3x224x224)", spec, shape);
      if (rank >= ALMA_MAX_RANK)
        return alma__errorf(ALMA_ERR_INVALID_ARG, "--input '%s': more than %d dims", spec, ALMA_MAX_RANK);
      dims[rank++] = v;
      if (!*end) break;
      if (*end != 'x' && *end != 'X' && *end != ',')
        return alma__errorf(ALMA_ERR_INVALID_ARG, "--input '%s': bad shape '%s' (dims joined by 'x', e.g. 1x3x224x224)", spec, shape);
      p = end + 1;
    }
  }
  if (!buf[0]) return alma__errorf(ALMA_ERR_INVALID_ARG, "--input '%s': empty input name", spec);
  /* The CLI form: a second --input for one name is a mistake, not an override. */
  for (int i = 0; i < d->n_over; i++)
    if (!strcmp(d->over[i].name, buf))
      return alma__errorf(ALMA_ERR_INVALID_ARG, "--input '%s': input '%s' is given twice", spec, buf);
  return alma_data_set_input(d, buf, rank, dims, dt);
}

const char *alma__data_describe(const alma_data *d, char *buf, size_t n) {
  size_t len = 0;
  int w = snprintf(buf, n, "%s", alma_data_kind(d));
  if (w > 0) len = (size_t)w < n ? (size_t)w : n - 1;
  if (!d) return buf;
  for (int i = 0; i < d->n_paths && len < n; i++) {
    w = snprintf(buf + len, n - len, "%s%s", i ? "," : ":", d->paths[i]);
    if (w < 0 || (size_t)w >= n - len) break;
    len += (size_t)w;
  }
  for (int i = 0; i < d->n_over && len < n; i++) {
    char shp[128] = "";
    if (d->over[i].has_shape) alma__shape_str(d->over[i].rank, d->over[i].dims, shp, sizeof shp);
    w = snprintf(buf + len, n - len, " %s=%s%s%s", d->over[i].name, shp,
                 d->over[i].dtype ? ":" : "", d->over[i].dtype ? alma_dtype_name(d->over[i].dtype) : "");
    if (w < 0 || (size_t)w >= n - len) break;
    len += (size_t)w;
  }
  if ((d->kind == D_NPY || d->kind == D_IDX || d->kind == D_DIR) && (d->scale != 1 || d->offset != 0))
    snprintf(buf + len, n - len, " scale=%g offset=%g", d->scale, d->offset);
  return buf;
}

/* ---- random numbers: splitmix64 seeding xoshiro256** (fast, reproducible everywhere) -------- */
typedef struct {
  uint64_t s[4];
} rng_t;

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static void rng_seed(rng_t *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng_t *r) {
  uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return res;
}

static double rng_uniform(rng_t *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

static double rng_normal(rng_t *r) {
  double u1 = rng_uniform(r), u2 = rng_uniform(r);
  if (u1 < 1e-300) u1 = 1e-300;
  return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

static alma_status fill_random(alma_tensor *t, uint64_t seed) {
  rng_t r;
  rng_seed(&r, seed);
  int64_t n = alma_tensor_numel(t);
  if (alma__dtype_is_float(t->dtype)) {
    for (int64_t i = 0; i < n; i++) alma__set_f64(t->data, t->dtype, i, rng_normal(&r));
  } else if (t->dtype == ALMA_DTYPE_BOOL) {
    for (int64_t i = 0; i < n; i++) ((uint8_t *)t->data)[i] = (uint8_t)(rng_next(&r) >> 63);
  } else if (alma__dtype_is_int(t->dtype)) {
    for (int64_t i = 0; i < n; i++) alma__set_i64(t->data, t->dtype, i, (int64_t)(rng_next(&r) % 10));
  } else if (alma__dtype_is_lowfloat(t->dtype)) { /* float8/float4: normal values rounded into the type */
    for (int64_t i = 0; i < n; i++) alma__set_f64(t->data, t->dtype, i, rng_normal(&r));
  } else if (alma__dtype_is_lowint(t->dtype)) { /* int4/uint4/int2/uint2: uniform over the type's range */
    int64_t lo, hi;
    alma__lowint_range(t->dtype, &lo, &hi);
    for (int64_t i = 0; i < n; i++)
      alma__set_i64(t->data, t->dtype, i, lo + (int64_t)(rng_next(&r) % (uint64_t)(hi - lo + 1)));
  } else {
    return alma__errorf(ALMA_ERR_UNSUPPORTED, "random data of dtype %s is not supported: give data files",
                        alma_dtype_name(t->dtype));
  }
  return ALMA_OK;
}

/* ---- batcher ------------------------------------------------------------------------------- */
#define RANDOM_POOL_MAX 8
#define RANDOM_POOL_BYTES ((size_t)256 << 20)

struct alma__batcher {
  alma_data *d;
  int kind;
  int n;                        /* model inputs */
  alma_tensor *shapes;          /* resolved batch shape + dtype per input (no data) */
  int64_t batch;
  int64_t index;                /* next batch number */
  /* random: pool[p * n + i] */
  int pool_n;
  alma_tensor *pool;
  /* npy/idx: whole data sets in the model's dtype and per-sample shape; an input without a batch
   * axis (unbatched[i]) holds its one value, fed whole to every batch */
  alma_tensor *full;
  unsigned char *unbatched;
  const char *samples_path;     /* the file n_samples was read from (the first batched input's) */
  int64_t n_samples;
  alma_tensor *scratch;         /* a wrapped batch copied here */
  /* dir: batches[b * n + i] */
  int n_batches;
  alma_tensor *batches;
  /* loader: the last batch it yielded */
  alma_tensor *cur;
};

static void free_tensors(alma_tensor *t, int64_t n) {
  if (!t) return;
  for (int64_t i = 0; i < n; i++) alma_tensor_free_data(&t[i]);
  free(t);
}

void alma__batcher_free(alma__batcher *b) {
  if (!b) return;
  free_tensors(b->pool, (int64_t)b->pool_n * b->n);
  free_tensors(b->full, b->full ? b->n : 0);
  free(b->unbatched);
  free_tensors(b->scratch, b->scratch ? b->n : 0);
  free_tensors(b->batches, (int64_t)b->n_batches * b->n);
  free_tensors(b->cur, b->cur ? b->n : 0);
  free(b->shapes);
  free(b);
}

static const override_t *find_override(const alma_data *d, const char *name) {
  for (int i = 0; d && i < d->n_over; i++)
    if (!strcmp(d->over[i].name, name)) return &d->over[i];
  return NULL;
}

static int contains_nocase(const char *s, const char *w) {
  for (size_t n = strlen(w); *s; s++)
    if (!strncasecmp(s, w, n)) return 1;
  return 0;
}

/* 1 when a symbolic dim's name says what it counts and that is not a batch ("frames", "seq_len",
 * "time"): exporters' generated names (unk__12, s0, DynamicDimension.0, dim_0) and one-letter
 * names say nothing, and "batch", "bs", "N" say batch. */
static int names_non_batch(const char *p) {
  size_t n = strlen(p), letters = 0;
  for (size_t i = 0; i < n; i++) letters += isalpha((unsigned char)p[i]) != 0;
  if (letters < 2 || contains_nocase(p, "batch") || !strcasecmp(p, "bs") || !strcasecmp(p, "bsz") || !strcasecmp(p, "nb") ||
      !strncasecmp(p, "unk", 3) || contains_nocase(p, "dynamic") || !strncasecmp(p, "dim", 3) || !strcasecmp(p, "none"))
    return 0;
  if ((p[0] == 's' || p[0] == 'd') && n > 1 && isdigit((unsigned char)p[1])) return 0; /* torch's s0, d1 */
  return 1;
}

/* Warns, once per input, about symbolic dims other than the first that nothing sized: they are
 * bound to 1, which a model whose pools or strided layers need more than 1 then fails on. */
static void warn_unsized(const alma_data *d, const alma__input_desc *in, const alma_tensor *t, alma__warn_fn warn,
                         void *user) {
  if (!warn || in->rank < 2 || find_override(d, in->name)) return;
  char names[160] = "", spec[200];
  size_t len = 0;
  int k = 0;
  for (int a = 1; a < in->rank; a++) {
    if (in->dims[a] >= 0 || t->rank != in->rank || t->dims[a] != 1) continue;
    int w = snprintf(names + len, sizeof names - len, "%s'%s' (axis %d)", k++ ? ", " : "",
                     in->dim_params[a][0] ? in->dim_params[a] : "?", a);
    if (w < 0 || (size_t)w >= sizeof names - len) break;
    len += (size_t)w;
  }
  if (!k) return;
  len = 0;
  for (int a = 0; a < in->rank && len < sizeof spec; a++) {
    int w = in->dims[a] >= 0 ? snprintf(spec + len, sizeof spec - len, "%s%lld", a ? "x" : "", (long long)in->dims[a])
                             : snprintf(spec + len, sizeof spec - len, "%s%s", a ? "x" : "",
                                        in->dim_params[a][0] ? in->dim_params[a] : "?");
    if (a == 0 && in->dims[0] < 0 && t->rank >= 1) /* the batch it runs at */
      w = snprintf(spec + len, sizeof spec - len, "%lld", (long long)t->dims[0]);
    if (w < 0 || (size_t)w >= sizeof spec - len) break;
    len += (size_t)w;
  }
  char msg[512];
  snprintf(msg, sizeof msg,
           "input '%s': symbolic %s %s bound to 1, as nothing gave %s size; a model that needs more (pools, strided "
           "layers) fails: give the real shape with --input %s:%s",
           in->name, k > 1 ? "dims" : "dim", names, k > 1 ? "their" : "its", in->name, spec);
  warn(user, msg);
}

/* Model input shape with symbols bound: first dim = batch, others 1; overrides win. */
static alma_status resolve_shape(const alma_data *d, const alma__input_desc *in, int64_t batch, alma_tensor *t) {
  memset(t, 0, sizeof *t);
  const override_t *o = find_override(d, in->name);
  if (alma__dtype_is_container(in->dtype))
    return alma__errorf(ALMA_ERR_UNSUPPORTED,
                        "input '%s' is a %s: alma bench makes and reads tensors only, so it cannot feed a model whose "
                        "graph input is a sequence or optional (sequences inside the graph and as outputs are fine)",
                        in->name, alma_dtype_name(in->dtype));
  /* Strings come only from the user's data: random text would exercise nothing a real input does. */
  if (in->dtype == ALMA_DTYPE_STRING && (!d || d->kind == D_RANDOM || d->kind == D_IDX))
    return alma__errorf(ALMA_ERR_UNSUPPORTED,
                        "input '%s' is a string tensor: alma cannot make random strings or read them from IDX files; "
                        "give its samples with --data FILE.npy (a numpy unicode or bytes array, one file per input) "
                        "or a directory of .npy batches", in->name);
  /* An override the model cannot take would fail every conversion alike: refused up front. */
  if (o && o->dtype && in->dtype != ALMA_DTYPE_UNDEFINED && o->dtype != in->dtype)
    return alma__errorf(ALMA_ERR_TYPE, "--input '%s': dtype %s, but the model's input is %s", in->name,
                        alma_dtype_name(o->dtype), alma_dtype_name(in->dtype));
  if (o && o->has_shape && in->rank >= 0) {
    char got[160], want[160];
    int bad = o->rank != in->rank;
    for (int a = 0; !bad && a < in->rank; a++) bad = in->dims[a] >= 0 && o->dims[a] != in->dims[a];
    if (bad) {
      alma__shape_str(o->rank, o->dims, got, sizeof got);
      size_t len = 0;
      want[0] = 0;
      for (int a = 0; a < in->rank && len + 1 < sizeof want; a++) {
        int w = in->dims[a] >= 0 ? snprintf(want + len, sizeof want - len, "%s%lld", a ? "," : "[", (long long)in->dims[a])
                                 : snprintf(want + len, sizeof want - len, "%s%s", a ? "," : "[",
                                            in->dim_params[a][0] ? in->dim_params[a] : "?");
        if (w < 0 || (size_t)w >= sizeof want - len) break;
        len += (size_t)w;
      }
      snprintf(want + len, sizeof want - len, in->rank ? "]" : "[]");
      return alma__errorf(ALMA_ERR_SHAPE, "--input '%s': shape %s does not fit the model's input %s (rank %d%s)", in->name,
                          got, want, in->rank, o->rank != in->rank ? "" : "; fixed dims must match");
    }
  }
  t->dtype = o && o->dtype ? o->dtype : in->dtype;
  if (t->dtype == ALMA_DTYPE_UNDEFINED) t->dtype = ALMA_DTYPE_FLOAT32;
  if (o && o->has_shape) {
    t->rank = o->rank;
    memcpy(t->dims, o->dims, sizeof t->dims);
    return ALMA_OK;
  }
  if (in->rank < 0)
    return alma__errorf(ALMA_ERR_SHAPE, "input '%s' has no declared shape: give one with --input %s:SHAPE",
                        in->name, in->name);
  t->rank = in->rank;
  for (int a = 0; a < in->rank; a++) t->dims[a] = in->dims[a] >= 0 ? in->dims[a] : (a == 0 ? batch : 1);
  return ALMA_OK;
}

/* Converts src into dst (same element count, dst allocated): exact for integer→integer,
 * x*scale+offset for anything→float. */
static void convert_elems(const alma_tensor *src, int64_t src_off, alma_tensor *dst, int64_t dst_off, int64_t n,
                          double scale, double offset) {
  /* strings are copied as they are (their handles are immutable and shared, see core.h): scale and
   * offset apply to numbers only */
  if (src->dtype == dst->dtype && ((scale == 1 && offset == 0) || src->dtype == ALMA_DTYPE_STRING)) {
    size_t es = alma_dtype_size(src->dtype);
    memcpy((char *)dst->data + dst_off * es, (const char *)src->data + src_off * es, (size_t)n * es);
    return;
  }
  if (alma__dtype_is_float(dst->dtype)) {
    for (int64_t i = 0; i < n; i++)
      alma__set_f64(dst->data, dst->dtype, dst_off + i, alma__get_f64(src->data, src->dtype, src_off + i) * scale + offset);
  } else if (alma__dtype_is_float(src->dtype)) {
    for (int64_t i = 0; i < n; i++)
      alma__set_f64(dst->data, dst->dtype, dst_off + i, alma__get_f64(src->data, src->dtype, src_off + i));
  } else {
    for (int64_t i = 0; i < n; i++)
      alma__set_i64(dst->data, dst->dtype, dst_off + i, alma__get_i64(src->data, src->dtype, src_off + i));
  }
}

/* Data for a string input must hold strings and data for any other input numbers: converting
 * between text and numbers is the model's job (Cast), not the data loader's. */
static alma_status check_string_kind(const alma_tensor *raw, alma_dtype want, const char *input, const char *path) {
  if (raw->dtype == ALMA_DTYPE_STRING && want != ALMA_DTYPE_STRING)
    return alma__errorf(ALMA_ERR_TYPE, "data '%s' holds strings, but input '%s' is %s", path, input,
                        alma_dtype_name(want));
  if (want == ALMA_DTYPE_STRING && raw->dtype != ALMA_DTYPE_STRING)
    return alma__errorf(ALMA_ERR_TYPE,
                        "data '%s' is %s, but input '%s' is a string tensor: give a numpy unicode (<U) or bytes (|S) "
                        "array", path, alma_dtype_name(raw->dtype), input);
  if (raw->dtype != ALMA_DTYPE_STRING && !alma__dtype_is_float(raw->dtype) && !alma__dtype_is_int(raw->dtype) &&
      raw->dtype != ALMA_DTYPE_BOOL)
    return alma__errorf(ALMA_ERR_TYPE, "data '%s': dtype %s is not numeric", path, alma_dtype_name(raw->dtype));
  return ALMA_OK;
}

/* The file of an input without a batch axis: exactly the input's shape (symbolic dims take the
 * file's), in the model's dtype, the same value in every batch. */
static alma_status load_unbatched(alma__batcher *b, int i, const alma__input_desc *in, const char *path) {
  alma_tensor raw;
  alma_status st = b->kind == D_NPY ? alma_npy_load(path, &raw) : alma_idx_load(path, &raw);
  if (st != ALMA_OK) return st;
  alma_tensor *shape = &b->shapes[i];
  if ((st = check_string_kind(&raw, shape->dtype, in->name, path)) == ALMA_OK) {
    int ok = raw.rank == shape->rank;
    for (int a = 0; ok && a < raw.rank; a++) ok = in->dims[a] < 0 || raw.dims[a] == shape->dims[a];
    if (!ok) {
      char fs[96], ms[96];
      alma__shape_str(raw.rank, raw.dims, fs, sizeof fs);
      alma__shape_str(shape->rank, shape->dims, ms, sizeof ms);
      st = alma__errorf(ALMA_ERR_SHAPE,
                        "data '%s' has shape %s, but input '%s' has no batch axis (its first dimension is fixed while "
                        "other inputs' are symbolic): give its one value, shape %s, fed whole to every batch",
                        path, fs, in->name, ms);
    }
  }
  if (st == ALMA_OK) {
    memcpy(shape->dims, raw.dims, sizeof shape->dims);
    st = alma__tensor_alloc(&b->full[i], shape->dtype, shape->rank, shape->dims);
    if (st == ALMA_OK) convert_elems(&raw, 0, &b->full[i], 0, alma_tensor_numel(&raw), b->d->scale, b->d->offset);
  }
  alma_tensor_free_data(&raw);
  return st;
}

/* A data set file [N, ...] becomes [N, model per-sample shape] in the model's dtype. */
static alma_status load_dataset(alma__batcher *b, int i, const alma__input_desc *in, const char *path,
                                alma__warn_fn warn, void *user) {
  alma_tensor raw;
  alma_status st = b->kind == D_NPY ? alma_npy_load(path, &raw) : alma_idx_load(path, &raw);
  if (st != ALMA_OK) return st;
  if (raw.rank < 1) {
    alma_tensor_free_data(&raw);
    return alma__errorf(ALMA_ERR_SHAPE, "data '%s' for input '%s' is a scalar: samples must be stacked along the first axis",
                        path, in->name);
  }
  if ((st = check_string_kind(&raw, b->shapes[i].dtype, in->name, path)) != ALMA_OK) {
    alma_tensor_free_data(&raw);
    return st;
  }
  int64_t N = raw.dims[0];
  int64_t per_file = N ? alma_tensor_numel(&raw) / N : 0;
  alma_tensor *shape = &b->shapes[i];
  /* Per-sample shape: the model's, with symbols taken from the file when ranks agree. */
  if (shape->rank == raw.rank) {
    const override_t *o = find_override(b->d, in->name);
    for (int a = 1; a < raw.rank; a++)
      if (!(o && o->has_shape) && (in->rank < 0 || in->dims[a] < 0)) shape->dims[a] = raw.dims[a];
  }
  int64_t per_model = shape->rank >= 1 ? alma__numel(shape->rank - 1, shape->dims + 1) : 1;
  if (N == 0 || per_model != per_file) {
    char fs[96], ms[96];
    alma__shape_str(raw.rank, raw.dims, fs, sizeof fs);
    alma__shape_str(shape->rank, shape->dims, ms, sizeof ms);
    alma_tensor_free_data(&raw);
    return alma__errorf(ALMA_ERR_SHAPE,
                        "data '%s' has shape %s: %s for input '%s' (batch shape %s, %lld elements per sample)",
                        path, fs, N == 0 ? "no samples" : "its samples do not match", in->name, ms,
                        (long long)per_model);
  }
  if (raw.dtype != shape->dtype) {
    char msg[256];
    snprintf(msg, sizeof msg, "data '%s' is %s, input '%s' is %s: converted value by value%s", path,
             alma_dtype_name(raw.dtype), in->name, alma_dtype_name(shape->dtype),
             b->d->scale != 1 || b->d->offset != 0 ? " (with scale/offset)" : "");
    if (warn && alma__dtype_is_float(raw.dtype) != alma__dtype_is_float(shape->dtype)) warn(user, msg);
  }
  int64_t dims[ALMA_MAX_RANK];
  dims[0] = N;
  int rank = shape->rank >= 1 ? shape->rank : 1;
  for (int a = 1; a < rank; a++) dims[a] = shape->dims[a];
  st = alma__tensor_alloc(&b->full[i], shape->dtype, rank, dims);
  if (st == ALMA_OK) convert_elems(&raw, 0, &b->full[i], 0, N * per_file, b->d->scale, b->d->offset);
  alma_tensor_free_data(&raw);
  if (st != ALMA_OK) return st;
  if (b->n_samples == 0) { /* the first batched input */
    b->n_samples = N;
    b->samples_path = path;
  } else if (N != b->n_samples) {
    return alma__errorf(ALMA_ERR_SHAPE, "data files disagree on the number of samples: %lld in '%s', %lld in '%s'",
                        (long long)b->n_samples, b->samples_path, (long long)N, path);
  }
  return ALMA_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted entries of dir: files ending in .npy (want_dirs 0) or subdirectories (want_dirs 1). */
static alma_status list_dir(const char *dir, int want_dirs, char ***out, int *n_out) {
  *out = NULL;
  *n_out = 0;
  DIR *dp = opendir(dir);
  if (!dp) return alma__errorf(ALMA_ERR_IO, "cannot open data directory '%s': %s", dir, strerror(errno));
  char **v = NULL;
  int n = 0, cap = 0;
  struct dirent *e;
  alma_status st = ALMA_OK;
  while ((e = readdir(dp))) {
    if (e->d_name[0] == '.') continue;
    size_t plen = strlen(dir) + strlen(e->d_name) + 2;
    char *full = malloc(plen);
    if (!full) {
      st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      break;
    }
    snprintf(full, plen, "%s/%s", dir, e->d_name);
    struct stat sb;
    int keep = stat(full, &sb) == 0 && (want_dirs ? S_ISDIR(sb.st_mode) : S_ISREG(sb.st_mode) && ends_with(e->d_name, ".npy"));
    if (!keep) {
      free(full);
      continue;
    }
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      char **nv = realloc(v, (size_t)cap * sizeof *v);
      if (!nv) {
        free(full);
        st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
        break;
      }
      v = nv;
    }
    v[n++] = full;
  }
  closedir(dp);
  if (st != ALMA_OK) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
    return st;
  }
  if (n) qsort(v, (size_t)n, sizeof *v, cmp_str);
  *out = v;
  *n_out = n;
  return ALMA_OK;
}

static alma_status load_batch_file(alma__batcher *b, int i, const char *input, const char *path, alma_tensor *dst) {
  alma_tensor raw;
  ALMA_TRY(alma_npy_load(path, &raw));
  alma_dtype want = b->shapes[i].dtype;
  alma_status st = check_string_kind(&raw, want, input, path);
  if (st != ALMA_OK) {
    alma_tensor_free_data(&raw);
    return st;
  }
  if (raw.dtype == want && ((b->d->scale == 1 && b->d->offset == 0) || want == ALMA_DTYPE_STRING)) {
    *dst = raw;
    return ALMA_OK;
  }
  st = alma__tensor_alloc(dst, want, raw.rank, raw.dims);
  if (st == ALMA_OK) convert_elems(&raw, 0, dst, 0, alma_tensor_numel(&raw), b->d->scale, b->d->offset);
  alma_tensor_free_data(&raw);
  return st;
}

static alma_status load_dir(alma__batcher *b, const alma__input_desc *in) {
  const char *dir = b->d->paths[0];
  char **ents = NULL;
  int ne = 0;
  alma_status st = list_dir(dir, b->n > 1, &ents, &ne);
  if (st != ALMA_OK) return st;
  if (ne == 0) {
    free(ents);
    return alma__errorf(ALMA_ERR_NOT_FOUND, "data directory '%s' has no %s", dir,
                        b->n > 1 ? "batch subdirectories (one per batch, holding <input>.npy files)" : ".npy files");
  }
  b->batches = calloc((size_t)ne * (size_t)b->n, sizeof *b->batches);
  if (!b->batches) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (int k = 0; st == ALMA_OK && k < ne; k++) {
    b->n_batches = k + 1;
    for (int i = 0; st == ALMA_OK && i < b->n; i++) {
      if (b->n == 1) {
        st = load_batch_file(b, 0, in[0].name, ents[k], &b->batches[k]);
        continue;
      }
      char path[4096];
      struct stat sb;
      snprintf(path, sizeof path, "%s/%s.npy", ents[k], in[i].name);
      if (stat(path, &sb) != 0) snprintf(path, sizeof path, "%s/input_%d.npy", ents[k], i);
      if (stat(path, &sb) != 0)
        st = alma__errorf(ALMA_ERR_NOT_FOUND, "batch directory '%s' has neither %s.npy nor input_%d.npy for input '%s'",
                          ents[k], in[i].name, i, in[i].name);
      else
        st = load_batch_file(b, i, in[i].name, path, &b->batches[(int64_t)k * b->n + i]);
    }
  }
  for (int k = 0; k < ne; k++) free(ents[k]);
  free(ents);
  if (st == ALMA_OK) {
    /* Report the first batch's shapes as the resolved ones. */
    for (int i = 0; i < b->n; i++) {
      b->shapes[i].rank = b->batches[i].rank;
      memcpy(b->shapes[i].dims, b->batches[i].dims, sizeof b->shapes[i].dims);
    }
    b->batch = b->batches[0].rank >= 1 ? b->batches[0].dims[0] : 1;
  }
  return st;
}

alma_status alma__batcher_new_ex(alma_data *d, const alma__input_desc *in, int n, int64_t batch_size, uint64_t seed,
                                 alma__warn_fn warn, void *user, alma__batcher **out) {
  *out = NULL;
  if (n < 0) return alma__errorf(ALMA_ERR_INVALID_ARG, "negative input count");
  if (batch_size < 1) return alma__errorf(ALMA_ERR_INVALID_ARG, "batch_size must be >= 1");
  /* Every override must name a real input: a typo would otherwise silently be ignored. */
  for (int k = 0; d && k < d->n_over; k++) {
    int found = 0;
    for (int i = 0; i < n; i++) found |= !strcmp(d->over[k].name, in[i].name);
    if (!found) {
      char names[512] = "";
      size_t len = 0;
      for (int i = 0; i < n; i++) {
        int w = snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", in[i].name);
        if (w < 0 || (size_t)w >= sizeof names - len) break;
        len += (size_t)w;
      }
      return alma__errorf(ALMA_ERR_INVALID_ARG, "--input '%s': the model has no such input (inputs: %s)",
                          d->over[k].name, names);
    }
  }
  if (d && (d->kind == D_NPY || d->kind == D_IDX) && d->n_paths != n)
    return alma__errorf(ALMA_ERR_SHAPE, "data: %d file(s) given for a model with %d input(s) (one per input, in model order)",
                        d->n_paths, n);
  alma__batcher *b = calloc(1, sizeof *b);
  if (!b) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  b->d = d;
  b->kind = d ? d->kind : D_RANDOM;
  b->n = n;
  b->shapes = calloc(n ? (size_t)n : 1, sizeof *b->shapes);
  alma_status st = b->shapes ? ALMA_OK : alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (int i = 0; st == ALMA_OK && i < n; i++) st = resolve_shape(d, &in[i], batch_size, &b->shapes[i]);
  if (st != ALMA_OK) goto fail;
  if (b->kind == D_RANDOM)
    for (int i = 0; i < n; i++) warn_unsized(d, &in[i], &b->shapes[i], warn, user);
  b->batch = n && b->shapes[0].rank >= 1 ? b->shapes[0].dims[0] : 1;
  if (n == 0) {
    /* A model without inputs (all constants) still runs: every batch is empty. */
    b->kind = D_RANDOM;
    b->batch = 1;
  } else if (b->kind == D_RANDOM) {
    if (b->shapes[0].rank >= 1 && b->batch != batch_size && warn) {
      char msg[256];
      snprintf(msg, sizeof msg, "input '%s' has a fixed first dimension %lld: batch size %lld used instead of %lld",
               in[0].name, (long long)b->batch, (long long)b->batch, (long long)batch_size);
      warn(user, msg);
    }
    size_t bytes = 0;
    for (int i = 0; i < n; i++) bytes += (size_t)alma_tensor_numel(&b->shapes[i]) * alma_dtype_size(b->shapes[i].dtype);
    b->pool_n = bytes ? (int)(RANDOM_POOL_BYTES / bytes) : RANDOM_POOL_MAX;
    if (b->pool_n > RANDOM_POOL_MAX) b->pool_n = RANDOM_POOL_MAX;
    if (b->pool_n < 1) b->pool_n = 1;
    b->pool = calloc((size_t)b->pool_n * (size_t)n, sizeof *b->pool);
    if (!b->pool) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    for (int p = 0; st == ALMA_OK && p < b->pool_n; p++)
      for (int i = 0; st == ALMA_OK && i < n; i++) {
        alma_tensor *t = &b->pool[p * n + i];
        st = alma__tensor_alloc(t, b->shapes[i].dtype, b->shapes[i].rank, b->shapes[i].dims);
        /* One stream per (batch, input): the same numbers whatever else changes. */
        if (st == ALMA_OK) st = fill_random(t, seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(p + 1)) ^ ((uint64_t)i << 40));
        if (st != ALMA_OK) alma__error_prefix(st, "input '%s': ", in[i].name);
      }
  } else if (b->kind == D_NPY || b->kind == D_IDX) {
    b->full = calloc((size_t)n, sizeof *b->full);
    b->scratch = calloc((size_t)n, sizeof *b->scratch);
    b->unbatched = calloc((size_t)n, 1);
    if (!b->full || !b->scratch || !b->unbatched) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    /* Samples are stacked along every input's first axis, except, when some inputs have a symbolic
     * first dimension, the inputs whose first dimension is fixed or that are scalars: those have no
     * batch axis (a merged decoder's use_cache_branch [1], a step count) and their file is their one
     * value. The batch comes from the first batched input. */
    int some_symbolic = 0, first = 0;
    for (int i = 0; i < n; i++) some_symbolic |= in[i].rank >= 1 && in[i].dims[0] < 0 && !find_override(d, in[i].name);
    for (int i = 0; st == ALMA_OK && some_symbolic && i < n; i++)
      b->unbatched[i] = in[i].rank >= 0 && (in[i].rank == 0 || in[i].dims[0] >= 0) && !find_override(d, in[i].name);
    while (st == ALMA_OK && first < n - 1 && b->unbatched[first]) first++;
    /* The batch: batch_size, unless that input's first dim is fixed (as for random data). */
    int64_t eb = b->shapes[first].rank >= 1 ? b->shapes[first].dims[0] : batch_size;
    if (eb != batch_size && warn) {
      char msg[256];
      snprintf(msg, sizeof msg, "input '%s' has a fixed first dimension %lld: batch size %lld used instead of %lld",
               in[first].name, (long long)eb, (long long)eb, (long long)batch_size);
      warn(user, msg);
    }
    if (eb < 1) eb = 1;
    for (int i = 0; st == ALMA_OK && i < n; i++) {
      if (b->unbatched[i]) {
        st = load_unbatched(b, i, &in[i], d->paths[i]);
        continue;
      }
      if (b->shapes[i].rank >= 1) b->shapes[i].dims[0] = eb;
      st = load_dataset(b, i, &in[i], d->paths[i], warn, user);
    }
    /* The first axis is sliced as the batch; when the model names it as something else (a
     * sequence of frames), say so: one frame per batch measures another workload. */
    for (int i = 0; st == ALMA_OK && warn && i < n; i++) {
      if (b->unbatched[i] || in[i].rank < 1 || in[i].dims[0] >= 0 || find_override(d, in[i].name) ||
          !names_non_batch(in[i].dim_params[0]) || b->n_samples == eb)
        continue;
      char msg[512];
      snprintf(msg, sizeof msg,
               "input '%s': data '%s' is sliced along its first axis as the batch (%lld per batch, %lld in the file), "
               "but the model names that axis '%s', not a batch; to feed the file whole, pass -b %lld",
               in[i].name, d->paths[i], (long long)eb, (long long)b->n_samples, in[i].dim_params[0],
               (long long)b->n_samples);
      warn(user, msg);
    }
    batch_size = eb;
    b->batch = batch_size;
    for (int i = 0; st == ALMA_OK && i < n; i++) {
      if (b->unbatched[i]) continue;
      if (b->shapes[i].rank < 1) {
        b->shapes[i].rank = 1;
        b->shapes[i].dims[0] = batch_size;
      }
      st = alma__tensor_alloc(&b->scratch[i], b->shapes[i].dtype, b->shapes[i].rank, b->shapes[i].dims);
    }
    if (st == ALMA_OK && b->n_samples < batch_size && warn) {
      char msg[256];
      snprintf(msg, sizeof msg, "the data set has %lld samples, fewer than the batch size %lld: samples repeat within a batch",
               (long long)b->n_samples, (long long)batch_size);
      warn(user, msg);
    }
  } else if (b->kind == D_DIR) {
    st = load_dir(b, in);
  } else {
    b->cur = calloc((size_t)n, sizeof *b->cur);
    if (!b->cur) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    if (st == ALMA_OK && d->reset) st = d->reset(d->user);
  }
  if (st != ALMA_OK) goto fail;
  *out = b;
  return ALMA_OK;
fail:
  alma__batcher_free(b);
  return st;
}

const alma_tensor *alma__batcher_shapes(const alma__batcher *b) { return b->shapes; }
int64_t alma__batcher_batch(const alma__batcher *b) { return b->batch; }

static int64_t samples_of(const alma_tensor *t) { return t->rank >= 1 ? t->dims[0] : 1; }

alma_status alma__batcher_next(alma__batcher *b, alma_tensor *inputs, int64_t *samples_out) {
  int64_t k = b->index++;
  if (b->n == 0) {
    *samples_out = 1;
    return ALMA_OK;
  }
  switch (b->kind) {
    case D_RANDOM:
      for (int i = 0; i < b->n; i++) inputs[i] = alma__tensor_view(&b->pool[(k % b->pool_n) * b->n + i]);
      *samples_out = samples_of(&inputs[0]);
      return ALMA_OK;
    case D_NPY:
    case D_IDX: {
      int64_t start = (k * b->batch) % b->n_samples;
      for (int i = 0; i < b->n; i++) {
        alma_tensor *full = &b->full[i];
        if (b->unbatched[i]) {
          inputs[i] = alma__tensor_view(full);
          continue;
        }
        int64_t per = full->dims[0] ? alma_tensor_numel(full) / full->dims[0] : 0;
        size_t es = alma_dtype_size(full->dtype);
        if (start + b->batch <= b->n_samples) {
          /* A contiguous slice: a view, no copy. */
          inputs[i] = alma__tensor_view(&b->scratch[i]);
          inputs[i].data = (char *)full->data + (size_t)(start * per) * es;
        } else {
          int64_t s = start;
          for (int64_t j = 0; j < b->batch; j++, s = (s + 1) % b->n_samples)
            memcpy((char *)b->scratch[i].data + (size_t)(j * per) * es, (char *)full->data + (size_t)(s * per) * es,
                   (size_t)per * es);
          inputs[i] = alma__tensor_view(&b->scratch[i]);
        }
      }
      *samples_out = b->batch;
      return ALMA_OK;
    }
    case D_DIR:
      for (int i = 0; i < b->n; i++) inputs[i] = alma__tensor_view(&b->batches[(k % b->n_batches) * b->n + i]);
      *samples_out = samples_of(&inputs[0]);
      return ALMA_OK;
    default: {
      alma_data *d = b->d;
      for (int i = 0; i < b->n; i++) alma_tensor_free_data(&b->cur[i]);
      for (int attempt = 0; attempt < 2; attempt++) {
        int end = 0;
        memset(b->cur, 0, (size_t)b->n * sizeof *b->cur);
        alma_status st = d->next(d->user, b->cur, b->n, &end);
        if (st != ALMA_OK) return alma__error_prefix(st, "data loader next() (batch %lld): ", (long long)k);
        if (!end) {
          for (int i = 0; i < b->n; i++) {
            if (!b->cur[i].data && alma_tensor_numel(&b->cur[i]) > 0)
              return alma__errorf(ALMA_ERR_INVALID_ARG, "data loader: batch %lld input %d has no data", (long long)k, i);
            inputs[i] = alma__tensor_view(&b->cur[i]);
          }
          if (k == 0) {
            for (int i = 0; i < b->n; i++) {
              b->shapes[i].rank = b->cur[i].rank;
              b->shapes[i].dtype = b->cur[i].dtype;
              memcpy(b->shapes[i].dims, b->cur[i].dims, sizeof b->shapes[i].dims);
            }
            b->batch = samples_of(&b->cur[0]);
          }
          *samples_out = samples_of(&inputs[0]);
          return ALMA_OK;
        }
        if (attempt == 0 && k == 0) break;  /* the very first pass is empty */
        if (!d->reset) return alma__errorf(ALMA_ERR_INVALID_ARG, "data loader ran out of batches after %lld and has no reset()",
                                            (long long)k);
        st = d->reset(d->user);
        if (st != ALMA_OK) return alma__error_prefix(st, "data loader reset(): ");
      }
      return alma__errorf(ALMA_ERR_INVALID_ARG, "data loader yields no batches");
    }
  }
}

alma_status alma__batcher_rewind(alma__batcher *b) {
  b->index = 0;
  if (b->kind == D_LOADER && b->d->reset) return b->d->reset(b->d->user);
  return ALMA_OK;
}

int64_t alma__batcher_samples(const alma__batcher *b) {
  if (b->kind == D_NPY || b->kind == D_IDX) return b->n_samples;
  if (b->kind != D_DIR || b->n == 0) return -1;
  int64_t n = 0;
  for (int k = 0; k < b->n_batches; k++) n += samples_of(&b->batches[(int64_t)k * b->n]);
  return n;
}

alma_status alma__labels_load(const char *path, int64_t **labels_out, int64_t *n_out, int64_t *max_out) {
  *labels_out = NULL;
  *n_out = 0;
  *max_out = -1;
  if (!path || !*path) return alma__errorf(ALMA_ERR_INVALID_ARG, "labels: empty path");
  alma_tensor t;
  alma_status st = ends_with(path, ".npy") ? alma_npy_load(path, &t) : alma_idx_load(path, &t);
  if (st != ALMA_OK) return alma__error_prefix(st, "labels: ");
  char shp[96];
  if (!alma__dtype_is_int(t.dtype)) {
    st = alma__errorf(ALMA_ERR_TYPE, "labels '%s' are %s: class labels must be integer ids (int8..int64, uint8..uint64)",
                      path, alma_dtype_name(t.dtype));
  } else if (!(t.rank == 1 || (t.rank == 2 && t.dims[1] == 1)) || t.dims[0] < 1) {
    st = alma__errorf(ALMA_ERR_SHAPE, "labels '%s' have shape %s: expected [N] (one class id per sample), N >= 1", path,
                      alma__shape_str(t.rank, t.dims, shp, sizeof shp));
  }
  int64_t n = st == ALMA_OK ? t.dims[0] : 0, max = -1;
  int64_t *v = st == ALMA_OK ? malloc((size_t)n * sizeof *v) : NULL;
  if (st == ALMA_OK && !v) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory for %lld labels", (long long)n);
  for (int64_t i = 0; st == ALMA_OK && i < n; i++) {
    if (t.dtype == ALMA_DTYPE_UINT64 && ((const uint64_t *)t.data)[i] > (uint64_t)INT64_MAX) {
      st = alma__errorf(ALMA_ERR_PARSE, "labels '%s': label %llu (sample %lld) is no class any output has", path,
                        (unsigned long long)((const uint64_t *)t.data)[i], (long long)i);
      break;
    }
    int64_t x = alma__get_i64(t.data, t.dtype, i);
    if (x < 0) {
      st = alma__errorf(ALMA_ERR_PARSE, "labels '%s': label %lld (sample %lld) is not a class id (>= 0)", path,
                        (long long)x, (long long)i);
      break;
    }
    v[i] = x;
    if (x > max) max = x;
  }
  alma_tensor_free_data(&t);
  if (st != ALMA_OK) {
    free(v);
    return st;
  }
  *labels_out = v;
  *n_out = n;
  *max_out = max;
  return ALMA_OK;
}
