/* alma_benchmark_model: the sweep. A probe job (a child, like every job when multiprocessing is
 * on) loads the model, resolves input shapes, checks which conversions can run here and computes
 * the EAGER reference outputs of the first batch into a temporary file; then each conversion runs
 * in its own child: load, convert, first inference, warm-up, timed batches, output check against
 * the reference. Results come back as JSON records; failures become result rows. The parent never
 * loads the model or initializes a runtime itself (one copy of the model alive at a time, and no
 * CUDA context inherited across fork). */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <malloc.h>
#include <math.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "cache/cache.h"
#include "conversions/conversions.h"
#include "graph/model.h"
#include "runtimes/session.h"

#define MAX_CONVERSIONS 256
#define MAX_TIMED_BATCHES 1000000
#define MAX_SESSIONS 1024 /* instances x workers in the throughput mode */

/* ---- the job arguments ----------------------------------------------------------------------- */
typedef struct {
  const char *model_path;          /* NULL when model is given */
  const alma_model *model;
  const alma_config *cfg;
  alma_data *data;
  int threads;
  const char *ref_path;            /* reference outputs file, or NULL */
  /* probe: the conversions to check */
  int n_conv;
  const alma_conversion *conv;
  /* worker: the one to run, and what the build cache decided for it (NULL: cache off) */
  const alma_conversion *one;
  const alma__cache_plan *plan;
  /* labels (config labels): one class id per sample of the data set, or NULL */
  const int64_t *labels;
  int64_t n_labels;
  int batch_suffix;                /* save_converted names carry _b<batch> (a batch-size sweep) */
} job_args;

static const char *runtime_device(const alma_runtime *rt) { return alma__rt_device_name(rt->device); }

static void describe_shape(const alma_model *m, int i, int is_input, char *buf, size_t n) {
  int rank = is_input ? alma_model_input_rank(m, i) : alma_model_output_rank(m, i);
  if (rank < 0) {
    snprintf(buf, n, "unknown");
    return;
  }
  size_t len = 0;
  buf[0] = 0;
  for (int a = 0; a < rank && len + 1 < n; a++) {
    int64_t d = is_input ? alma_model_input_dim(m, i, a) : alma_model_output_dim(m, i, a);
    const char *p = is_input ? alma_model_input_dim_param(m, i, a) : alma_model_output_dim_param(m, i, a);
    int w = d >= 0 ? snprintf(buf + len, n - len, "%s%lld", a ? "," : "[", (long long)d)
                   : snprintf(buf + len, n - len, "%s%s", a ? "," : "[", p && *p ? p : "?");
    if (w < 0 || (size_t)w >= n - len) return;
    len += (size_t)w;
  }
  snprintf(buf + len, n - len, rank ? "]" : "[]");
}

static int input_descs(const alma_model *m, alma__input_desc **out) {
  int n = alma_model_num_inputs(m);
  *out = calloc(n > 0 ? (size_t)n : 1, sizeof **out);
  if (!*out) return -1;
  for (int i = 0; i < n; i++) {
    alma__input_desc *d = &(*out)[i];
    snprintf(d->name, sizeof d->name, "%s", alma_model_input_name(m, i));
    d->dtype = alma_model_input_dtype(m, i);
    d->rank = alma_model_input_rank(m, i);
    for (int a = 0; a < d->rank && a < ALMA_MAX_RANK; a++) {
      d->dims[a] = alma_model_input_dim(m, i, a);
      const char *p = alma_model_input_dim_param(m, i, a);
      snprintf(d->dim_params[a], sizeof d->dim_params[a], "%s", p ? p : "");
    }
  }
  return n;
}

/* ---- reference outputs file: "ALMAREF1", u32 count, then per tensor: i32 dtype, i32 rank,
 * i64 dims[rank], u64 nbytes, bytes. Private to one sweep (a temporary directory). */
/* A sequence/optional output (core.h's container) is written as i32 dtype, i32 rank 2, dims
 * {element dtype, element-is-sequence}, u64 item count, then its items in this same format. */
static int ref_write_one(FILE *f, const alma_tensor *t) {
  int32_t dt = t->dtype, rank = t->rank;
  if (alma__dtype_is_container(t->dtype)) {
    const alma__seq *s = alma__container(t);
    uint64_t cnt = s ? (uint64_t)s->n : 0;
    int32_t two = 2;
    int ok = fwrite(&dt, 4, 1, f) == 1 && fwrite(&two, 4, 1, f) == 1 && fwrite(t->dims, 8, 2, f) == 2 &&
             fwrite(&cnt, 8, 1, f) == 1;
    for (uint64_t i = 0; ok && i < cnt; i++) ok = ref_write_one(f, &s->items[i]);
    return ok;
  }
  if (t->dtype == ALMA_DTYPE_STRING) {
    /* handles are process-local (core.h): the payload is each element's u64 length and bytes */
    int64_t ne = alma_tensor_numel(t);
    uint64_t nb = 0;
    for (int64_t i = 0; i < ne; i++) nb += 8 + alma__str_len(alma__strs(t)[i]);
    int ok = fwrite(&dt, 4, 1, f) == 1 && fwrite(&rank, 4, 1, f) == 1 &&
             (rank == 0 || fwrite(t->dims, 8, (size_t)rank, f) == (size_t)rank) && fwrite(&nb, 8, 1, f) == 1;
    for (int64_t i = 0; ok && i < ne; i++) {
      uint64_t len = alma__str_len(alma__strs(t)[i]);
      ok = fwrite(&len, 8, 1, f) == 1 && (len == 0 || fwrite(alma__str_ptr(alma__strs(t)[i]), 1, len, f) == len);
    }
    return ok;
  }
  uint64_t nb = t->nbytes;
  return fwrite(&dt, 4, 1, f) == 1 && fwrite(&rank, 4, 1, f) == 1 &&
         (rank == 0 || fwrite(t->dims, 8, (size_t)rank, f) == (size_t)rank) && fwrite(&nb, 8, 1, f) == 1 &&
         (nb == 0 || fwrite(t->data, 1, nb, f) == nb);
}

static alma_status ref_save(const char *path, const alma_tensor *t, int n) {
  FILE *f = fopen(path, "wb");
  if (!f) return alma__errorf(ALMA_ERR_IO, "cannot write reference outputs '%s': %s", path, strerror(errno));
  uint32_t cnt = (uint32_t)n;
  int ok = fwrite("ALMAREF1", 1, 8, f) == 8 && fwrite(&cnt, 4, 1, f) == 1;
  for (int i = 0; ok && i < n; i++) ok = ref_write_one(f, &t[i]);
  ok &= fclose(f) == 0;
  return ok ? ALMA_OK : alma__errorf(ALMA_ERR_IO, "error writing reference outputs '%s'", path);
}

static void free_outputs(alma_tensor *t, int n) {
  if (!t) return;
  for (int i = 0; i < n; i++) alma_tensor_free_data(&t[i]);
  free(t);
}

/* One value of ref_save's format at *off; 0 if the file is truncated or malformed. */
static int ref_read_one(const uint8_t *buf, size_t n, size_t *off, alma_tensor *t, int depth) {
  int32_t dt, rank;
  uint64_t nb;
  memset(t, 0, sizeof *t);
  if (depth > 8 || *off + 8 > n) return 0;
  memcpy(&dt, buf + *off, 4);
  memcpy(&rank, buf + *off + 4, 4);
  *off += 8;
  if (rank < 0 || rank > ALMA_MAX_RANK || *off + 8 * (size_t)rank + 8 > n) return 0;
  if (alma__dtype_is_container((alma_dtype)dt)) {
    int64_t d[2];
    uint64_t cnt;
    if (rank != 2) return 0;
    memcpy(d, buf + *off, 16);
    memcpy(&cnt, buf + *off + 16, 8);
    *off += 24;
    if (cnt > n || alma__container_alloc(t, (alma_dtype)dt, (alma_dtype)d[0], d[1] != 0) != ALMA_OK) return 0;
    for (uint64_t i = 0; i < cnt; i++) {
      alma_tensor item;
      if (!ref_read_one(buf, n, off, &item, depth + 1) || alma__container_insert(t, -1, &item) != ALMA_OK) {
        alma_tensor_free_data(&item);
        alma_tensor_free_data(t);
        return 0;
      }
    }
    return 1;
  }
  t->dtype = (alma_dtype)dt;
  t->rank = rank;
  memcpy(t->dims, buf + *off, 8 * (size_t)rank);
  *off += 8 * (size_t)rank;
  memcpy(&nb, buf + *off, 8);
  *off += 8;
  if (nb > n - *off) return 0;
  if (t->dtype == ALMA_DTYPE_STRING) {
    int64_t ne = alma__numel(rank, t->dims);
    size_t end = *off + nb;
    int64_t dims[ALMA_MAX_RANK];
    memcpy(dims, t->dims, sizeof dims); /* alma__tensor_alloc clears t first */
    if (ne < 0 || (uint64_t)ne > nb / 8 || alma__tensor_alloc(t, ALMA_DTYPE_STRING, rank, dims) != ALMA_OK) return 0;
    for (int64_t i = 0; i < ne; i++) {
      uint64_t len;
      if (*off + 8 > end) break;
      memcpy(&len, buf + *off, 8);
      *off += 8;
      if (len > end - *off || alma__str_make((const char *)buf + *off, len, alma__strs(t) + i) != ALMA_OK) {
        alma_tensor_free_data(t);
        return 0;
      }
      *off += len;
    }
    if (*off != end) {
      alma_tensor_free_data(t);
      return 0;
    }
    return 1;
  }
  t->data = malloc(nb ? nb : 1);
  if (!t->data) return 0;
  memcpy(t->data, buf + *off, nb);
  t->nbytes = nb;
  t->owns_data = 1;
  *off += nb;
  return 1;
}

static alma_status ref_load(const char *path, alma_tensor **out, int *n_out) {
  *out = NULL;
  *n_out = 0;
  uint8_t *buf;
  size_t n;
  ALMA_TRY(alma__read_file(path, &buf, &n));
  alma_status st = ALMA_OK;
  size_t off = 12;
  uint32_t cnt = 0;
  if (n < 12 || memcmp(buf, "ALMAREF1", 8)) st = alma__errorf(ALMA_ERR_PARSE, "'%s' is not a reference file", path);
  else memcpy(&cnt, buf + 8, 4);
  alma_tensor *t = st == ALMA_OK ? calloc(cnt ? cnt : 1, sizeof *t) : NULL;
  if (st == ALMA_OK && !t) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (uint32_t i = 0; st == ALMA_OK && i < cnt; i++)
    if (!ref_read_one(buf, n, &off, &t[i], 0)) st = alma__errorf(ALMA_ERR_PARSE, "reference file '%s' is truncated", path);
  free(buf);
  if (st != ALMA_OK) {
    free_outputs(t, (int)cnt);
    return st;
  }
  *out = t;
  *n_out = (int)cnt;
  return ALMA_OK;
}

/* ---- output check ------------------------------------------------------------------------------ */
/* Accuracy a lossy conversion (a pass with .lossy: int8, bf16, fp16) must keep against fp32 EAGER
 * (cosine >= 0.99 and argmax agreement >= 99%, docs/methodology.md). */
#define ALMA__LOSSY_MIN_COSINE 0.99
#define ALMA__LOSSY_MIN_ARGMAX 0.99
static int numeric(alma_dtype t) { return alma__dtype_is_float(t) || alma__dtype_is_int(t) || t == ALMA_DTYPE_BOOL; }

/* Sequence/optional outputs are compared element by element: flattened into their tensors (named
 * "S[0]", "S[1]", ... and "S[0][1]" inside an optional of a sequence) once their kinds and lengths
 * agree. */
typedef struct flat_outs {
  alma_tensor *t;
  char (*name)[96];
  int n, cap;
} flat_outs;

static int flat_add(flat_outs *f, const alma_tensor *t, const char *name) {
  if (alma__dtype_is_container(t->dtype)) {
    const alma__seq *s = alma__container(t);
    for (int i = 0; s && i < s->n; i++) {
      char sub[96];
      snprintf(sub, sizeof sub, "%.80s[%d]", name, i);
      if (!flat_add(f, &s->items[i], sub)) return 0;
    }
    return 1;
  }
  if (f->n == f->cap) {
    int cap = f->cap ? 2 * f->cap : 16;
    alma_tensor *nt = realloc(f->t, sizeof *nt * (size_t)cap);
    if (nt) f->t = nt;
    char(*nn)[96] = realloc(f->name, sizeof *nn * (size_t)cap);
    if (nn) f->name = nn;
    if (!nt || !nn) return 0;
    f->cap = cap;
  }
  f->t[f->n] = alma__tensor_view(t);
  snprintf(f->name[f->n], sizeof f->name[f->n], "%s", name);
  f->n++;
  return 1;
}

/* The same container structure (kinds and lengths, recursively); else a detail naming where. */
static int same_structure(const alma_tensor *r, const alma_tensor *x, const char *name, char *detail, size_t dn) {
  int rc = alma__dtype_is_container(r->dtype), xc = alma__dtype_is_container(x->dtype);
  if (!rc && !xc) return 1;
  if (r->dtype != x->dtype) {
    snprintf(detail, dn, "output '%s' is a %s, the reference a %s", name, alma_dtype_name(x->dtype), alma_dtype_name(r->dtype));
    return 0;
  }
  const alma__seq *a = alma__container(r), *b = alma__container(x);
  if (a->n != b->n) {
    snprintf(detail, dn, "output '%s' holds %d tensors, the reference %d", name, b->n, a->n);
    return 0;
  }
  for (int i = 0; i < a->n; i++) {
    char sub[96];
    snprintf(sub, sizeof sub, "%.80s[%d]", name, i);
    if (!same_structure(&a->items[i], &b->items[i], sub, detail, dn)) return 0;
  }
  return 1;
}

static void compare_flat(const alma_tensor *ref, int n_ref, const alma_tensor *out, int n_out, const alma_model *m,
                         char (*names)[96], double rtol, double atol, alma_output_check *c, char *detail, size_t dn);

void alma__compare_outputs(const alma_tensor *ref, int n_ref, const alma_tensor *out, int n_out, const alma_model *m,
                           double rtol, double atol, alma_output_check *c, char *detail, size_t dn) {
  int any = 0;
  for (int k = 0; k < n_ref && k < n_out; k++)
    any |= alma__dtype_is_container(ref[k].dtype) || alma__dtype_is_container(out[k].dtype);
  if (!any || n_ref != n_out) {
    compare_flat(ref, n_ref, out, n_out, m, NULL, rtol, atol, c, detail, dn);
    return;
  }
  for (int k = 0; k < n_ref; k++)
    if (!same_structure(&ref[k], &out[k], m ? alma_model_output_name(m, k) : "?", detail, dn)) {
      memset(c, 0, sizeof *c);
      c->performed = 1;
      c->max_abs_err = c->max_rel_err = c->argmax_agreement = c->cosine_similarity = NAN;
      return;
    }
  flat_outs fr = {0}, fo = {0};
  int ok = 1;
  for (int k = 0; ok && k < n_ref; k++) {
    const char *name = m ? alma_model_output_name(m, k) : "?";
    ok = flat_add(&fr, &ref[k], name) && flat_add(&fo, &out[k], name);
  }
  if (ok) {
    compare_flat(fr.t, fr.n, fo.t, fo.n, m, fr.name, rtol, atol, c, detail, dn);
  } else {
    memset(c, 0, sizeof *c);
    snprintf(detail, dn, "out of memory comparing sequence outputs");
  }
  free(fr.t);
  free(fr.name);
  free(fo.t);
  free(fo.name);
}

static void compare_flat(const alma_tensor *ref, int n_ref, const alma_tensor *out, int n_out, const alma_model *m,
                         char (*names)[96], double rtol, double atol, alma_output_check *c, char *detail, size_t dn) {
  memset(c, 0, sizeof *c);
  c->performed = 1;
  c->passed = 1;
  detail[0] = 0;
  double max_abs = 0, max_rel = 0, dot = 0, na = 0, nb = 0;
  int64_t rows = 0, agree = 0, bad = 0, total = 0, nfloat = 0;
  if (n_ref != n_out) {
    c->passed = 0;
    snprintf(detail, dn, "%d outputs, the reference has %d", n_out, n_ref);
  }
  double rel_floor = atol > 0 ? atol : DBL_MIN;
  for (int k = 0; k < n_ref && k < n_out; k++) {
    const alma_tensor *r = &ref[k], *x = &out[k];
    char unnamed[32];
    snprintf(unnamed, sizeof unnamed, "output_%d", k);
    const char *name = names ? names[k] : m ? alma_model_output_name(m, k) : unnamed;
    if (r->dtype == ALMA_DTYPE_STRING || x->dtype == ALMA_DTYPE_STRING) { /* exact, byte for byte */
      char a[96], b[96];
      int64_t ne = alma_tensor_numel(r), first = -1, nbad = 0;
      if (r->dtype != x->dtype || !alma__same_shape(r, x)) {
        c->passed = 0;
        if (!detail[0])
          snprintf(detail, dn, "output '%s' is %s %s, the reference %s %s", name, alma_dtype_name(x->dtype),
                   alma__shape_str(x->rank, x->dims, a, sizeof a), alma_dtype_name(r->dtype),
                   alma__shape_str(r->rank, r->dims, b, sizeof b));
        continue;
      }
      for (int64_t i = 0; i < ne; i++)
        if (alma__str_cmp(alma__strs(r)[i], alma__strs(x)[i]) && nbad++ == 0) first = i;
      total += ne;
      bad += nbad;
      if (first >= 0 && !detail[0])
        snprintf(detail, dn, "output '%s' element %lld is \"%.60s\", the reference \"%.60s\"", name, (long long)first,
                 alma__str_ptr(alma__strs(x)[first]), alma__str_ptr(alma__strs(r)[first]));
      continue;
    }
    if (!numeric(r->dtype) || !numeric(x->dtype)) continue;
    if (!alma__same_shape(r, x)) {
      char a[96], b[96];
      c->passed = 0;
      if (!detail[0])
        snprintf(detail, dn, "output '%s' has shape %s, the reference %s", name, alma__shape_str(x->rank, x->dims, a, sizeof a),
                 alma__shape_str(r->rank, r->dims, b, sizeof b));
      continue;
    }
    int64_t n = alma_tensor_numel(r);
    int is_float = alma__dtype_is_float(r->dtype) || alma__dtype_is_float(x->dtype);
    int64_t first_bad = -1;
    for (int64_t i = 0; i < n; i++) {
      double a = alma__get_f64(x->data, x->dtype, i), b = alma__get_f64(r->data, r->dtype, i);
      total++;
      if (isnan(a) || isnan(b)) {
        if (!(isnan(a) && isnan(b))) {
          bad++;
          if (first_bad < 0) first_bad = i;
        }
        continue;
      }
      if (isinf(a) || isinf(b)) {
        if (a != b) {
          bad++;
          if (first_bad < 0) first_bad = i;
        }
        continue;
      }
      double d = fabs(a - b);
      if (d > max_abs) max_abs = d;
      double rel = d / fmax(fabs(b), rel_floor);
      if (rel > max_rel) max_rel = rel;
      if (d > atol + rtol * fabs(b)) {
        bad++;
        if (first_bad < 0) first_bad = i;
      }
      if (is_float) {
        dot += a * b;
        na += a * a;
        nb += b * b;
      }
    }
    if (first_bad >= 0 && !detail[0])
      snprintf(detail, dn, "output '%s' element %lld is %.6g, the reference %.6g", name, (long long)first_bad,
               alma__get_f64(x->data, x->dtype, first_bad), alma__get_f64(r->data, r->dtype, first_bad));
    if (is_float) {
      nfloat++;
      int64_t last = r->rank >= 1 ? r->dims[r->rank - 1] : 0;
      if (last >= 2) {
        for (int64_t row = 0; row < n / last; row++) {
          int64_t ia = 0, ib = 0;
          for (int64_t j = 1; j < last; j++) {
            if (alma__get_f64(x->data, x->dtype, row * last + j) > alma__get_f64(x->data, x->dtype, row * last + ia)) ia = j;
            if (alma__get_f64(r->data, r->dtype, row * last + j) > alma__get_f64(r->data, r->dtype, row * last + ib)) ib = j;
          }
          rows++;
          agree += ia == ib;
        }
      }
    }
  }
  if (bad) {
    c->passed = 0;
    char tail[160];
    snprintf(tail, sizeof tail, "%s%lld of %lld elements outside atol + rtol*|ref|", detail[0] ? "; " : "",
             (long long)bad, (long long)total);
    strncat(detail, tail, dn - strlen(detail) - 1);
  }
  c->max_abs_err = max_abs;
  c->max_rel_err = max_rel;
  c->argmax_agreement = rows ? (double)agree / (double)rows : NAN;
  c->cosine_similarity = !nfloat ? NAN : (na == 0 && nb == 0) ? 1.0 : (na == 0 || nb == 0) ? 0.0 : dot / sqrt(na * nb);
}

void alma__check_outputs(const alma_tensor *ref, int n_ref, const alma_tensor *out, int n_out, const alma_model *m,
                         double rtol, double atol, int lossy, alma_output_check *c, char *warning, size_t wn) {
  char detail[512];
  alma__compare_outputs(ref, n_ref, out, n_out, m, rtol, atol, c, detail, sizeof detail);
  warning[0] = 0;
  if (lossy) {
    /* int8/bf16/fp16 never meet float tolerances elementwise: judged by what quantization promises
     * (cosine similarity and argmax agreement with fp32 EAGER), saying still how far the elements are. */
    double cos = c->cosine_similarity, am = c->argmax_agreement;
    int ok = isfinite(cos) && cos >= ALMA__LOSSY_MIN_COSINE && (!isfinite(am) || am >= ALMA__LOSSY_MIN_ARGMAX);
    if (!c->passed)
      snprintf(warning, wn,
               "reduced precision: outputs differ from EAGER's beyond rtol %g, atol %g (%s); judged by cosine %.6f "
               "(>= %.2f needed) and argmax agreement %.1f%% (>= %.0f%% needed)",
               rtol, atol, detail, cos, ALMA__LOSSY_MIN_COSINE, 100 * am, 100 * ALMA__LOSSY_MIN_ARGMAX);
    c->passed = ok;
  } else if (!c->passed) {
    snprintf(warning, wn, "outputs differ from EAGER's (rtol %g, atol %g): %s", rtol, atol, detail);
  }
}

alma_status alma_outputs_check(const alma_tensor *ref, int n_ref, const alma_tensor *out, int n_out, double rtol,
                               double atol, int lossy, alma_output_check *c, char *warning, size_t warning_size) {
  char w[1024];
  if (!c || n_ref < 0 || n_out < 0 || (n_ref && !ref) || (n_out && !out))
    return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_outputs_check: %s", !c ? "c is NULL" : "no tensors");
  /* a caller's tensors: what the compare reads must be there */
  for (int k = 0; k < n_ref + n_out; k++) {
    const alma_tensor *t = k < n_ref ? &ref[k] : &out[k - n_ref];
    const char *what = k < n_ref ? "reference" : "output";
    int at = k < n_ref ? k : k - n_ref;
    int64_t ne = t->rank >= 0 && t->rank <= ALMA_MAX_RANK ? alma_tensor_numel(t) : -1;
    if (ne < 0)
      return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_outputs_check: %s %d has rank %d or a dimension that is negative or "
                          "overflows", what, at, t->rank);
    if (!numeric(t->dtype))
      return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_outputs_check: %s %d is %s: numeric and bool tensors only", what, at,
                          alma_dtype_name(t->dtype));
    int64_t need;
    if (alma__mul_overflow_i64(ne, (int64_t)alma_dtype_size(t->dtype), &need) || (uint64_t)need > t->nbytes ||
        (ne > 0 && !t->data))
      return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_outputs_check: %s %d holds %zu bytes%s, fewer than its shape needs",
                          what, at, t->nbytes, t->data ? "" : " (no data)");
  }
  alma__check_outputs(ref, n_ref, out, n_out, NULL, rtol, atol, lossy, c, w, sizeof w);
  if (warning && warning_size) snprintf(warning, warning_size, "%s", w);
  return ALMA_OK;
}

/* ---- top-1 accuracy against labels ------------------------------------------------------------ */
alma_status alma__count_top1(const alma_tensor *out, const char *name, int64_t samples, const int64_t *labels,
                             int64_t n_take, int64_t *correct) {
  char shp[96];
  if (!name) name = "?";
  if (!alma__dtype_is_float(out->dtype) && !alma__dtype_is_int(out->dtype))
    return alma__errorf(ALMA_ERR_TYPE, "top-1: output '%s' is %s, not class scores", name, alma_dtype_name(out->dtype));
  int64_t classes = out->rank >= 1 ? out->dims[out->rank - 1] : 0, n = alma_tensor_numel(out);
  if (classes < 1 || n % classes || n / classes != samples)
    return alma__errorf(ALMA_ERR_SHAPE,
                        "top-1: output '%s' has shape %s for a batch of %lld samples: top-1 needs one row of class "
                        "scores per sample ([batch, classes])",
                        name, alma__shape_str(out->rank, out->dims, shp, sizeof shp), (long long)samples);
  if (n_take < 0 || n_take > samples)
    return alma__errorf(ALMA_ERR_INTERNAL, "top-1: %lld labels for a batch of %lld", (long long)n_take, (long long)samples);
  for (int64_t i = 0; i < n_take; i++) {
    if (labels[i] < 0 || labels[i] >= classes)
      return alma__errorf(ALMA_ERR_SHAPE, "top-1: label %lld is not a class of output '%s', whose last axis has %lld entries",
                          (long long)labels[i], name, (long long)classes);
    /* The first maximum, as NumPy's argmax; a row of NaNs has none and counts as wrong. */
    int64_t best = -1;
    double bv = 0;
    for (int64_t j = 0; j < classes; j++) {
      double v = alma__get_f64(out->data, out->dtype, i * classes + j);
      if (!isnan(v) && (best < 0 || v > bv)) {
        best = j;
        bv = v;
      }
    }
    *correct += best == labels[i];
  }
  return ALMA_OK;
}

/* ---- the worker: one conversion ------------------------------------------------------------- */
static void warn_into_result(void *user, const char *msg) { alma__result_warn((alma_result *)user, "%s", msg); }

static void add_double(double **v, int64_t *n, int64_t *cap, double x, int *oom) {
  if (*n == *cap) {
    int64_t nc = *cap ? *cap * 2 : 1024;
    double *nv = realloc(*v, (size_t)nc * sizeof *nv);
    if (!nv) {
      *oom = 1;
      return;
    }
    *v = nv;
    *cap = nc;
  }
  (*v)[(*n)++] = x;
}

static void send_result(alma__chan *ch, alma_result *r) {
  cJSON *j = alma__result_to_cjson(r, 1);
  char *text = j ? cJSON_PrintUnformatted(j) : NULL;
  if (text) alma__chan_record(ch, text);
  else alma__chan_record(ch, "{\"status\":\"error\",\"error\":\"out of memory writing the result\",\"error_status\":\"ERR_NOMEM\"}");
  free(text);
  cJSON_Delete(j);
}

/* Copies of n batches of n_in tensors each (owned). */
static void free_batches(alma_tensor *t, int64_t n) {
  for (int64_t i = 0; t && i < n; i++) alma_tensor_free_data(&t[i]);
  free(t);
}

/* The preprocess hook (when given) turns the data source's batch into the model's inputs; then
 * one timed run; then the postprocess hook. Inputs the hook allocated are freed here; outputs stay
 * with the caller. Times in ms (hooks: NaN when absent). */
static alma_status hooked_run(const alma_config *cfg, alma_session *s, const alma_tensor *batch, alma_tensor *in, int n_in,
                              alma_tensor *out, int n_out, double *pre_ms, double *infer_ms, double *post_ms) {
  alma_status st = ALMA_OK;
  double t0, t1;
  *pre_ms = *post_ms = NAN;
  for (int i = 0; i < n_in; i++) in[i] = batch[i];
  if (cfg->preprocess) {
    t0 = alma__bench_now();
    st = cfg->preprocess(cfg->hook_user, batch, in, n_in);
    *pre_ms = 1e3 * (alma__bench_now() - t0);
    if (st != ALMA_OK) alma__error_prefix(st, "preprocess hook: ");
  }
  if (st == ALMA_OK) {
    t0 = alma__bench_now();
    st = alma_session_run(s, in, n_in, out, n_out);
    t1 = alma__bench_now();
    *infer_ms = 1e3 * (t1 - t0);
  }
  if (st == ALMA_OK && cfg->postprocess) {
    t0 = alma__bench_now();
    st = cfg->postprocess(cfg->hook_user, out, n_out);
    *post_ms = 1e3 * (alma__bench_now() - t0);
    if (st != ALMA_OK) alma__error_prefix(st, "postprocess hook: ");
  }
  for (int i = 0; i < n_in; i++)
    if (in[i].owns_data && in[i].data != batch[i].data) alma_tensor_free_data(&in[i]);
  return st;
}

/* n batches from the batcher, deep-copied (and pre-processed when pre is set): the ring the
 * throughput mode cycles through, or INT8_STATIC's calibration batches. */
static alma_status copy_batches(alma__batcher *b, const alma_config *cfg, int pre, int n_in, int64_t n, alma_tensor **out,
                                int64_t *samples_out) {
  *out = NULL;
  alma_tensor *v = calloc((size_t)(n * n_in + 1), sizeof *v), *in = calloc((size_t)n_in + 1, sizeof *in);
  alma_tensor *hooked = calloc((size_t)n_in + 1, sizeof *hooked);
  alma_status st = v && in && hooked ? ALMA_OK : alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (int64_t k = 0; st == ALMA_OK && k < n; k++) {
    int64_t ns;
    if ((st = alma__batcher_next(b, in, &ns)) != ALMA_OK) break;
    if (samples_out && k == 0) *samples_out = ns;
    for (int i = 0; i < n_in; i++) hooked[i] = in[i];
    if (pre && cfg->preprocess && (st = cfg->preprocess(cfg->hook_user, in, hooked, n_in)) != ALMA_OK) {
      alma__error_prefix(st, "preprocess hook: ");
      break;
    }
    for (int i = 0; i < n_in && st == ALMA_OK; i++) st = alma__tensor_copy(&v[k * n_in + i], &hooked[i]);
    for (int i = 0; i < n_in; i++)
      if (hooked[i].owns_data && hooked[i].data != in[i].data) alma_tensor_free_data(&hooked[i]);
  }
  free(in);
  free(hooked);
  if (st != ALMA_OK) {
    free_batches(v, n * n_in);
    return st;
  }
  *out = v;
  return ALMA_OK;
}

/* A pass that reads calibration batches (INT8_STATIC): its build depends on them. */
static int calibrates(const alma_conversion *c) {
  for (int i = 0; i < c->n_passes; i++)
    if (c->passes[i]->needs_calibration) return 1;
  return 0;
}

/* A step that changes the numbers on purpose (int8, bf16, fp16). */
static int is_lossy(const alma_conversion *c) {
  if (c->runtime->lossy) return 1;
  for (int i = 0; i < c->n_passes; i++)
    if (c->passes[i]->lossy) return 1;
  return 0;
}

/* The latency mode's stop rule: n_samples (as batches) and min_time_s, or duration_s in its place;
 * max_time_s caps (raised to duration_s). */
static double timed_min_s(const alma_config *cfg) { return cfg->duration_s > 0 ? cfg->duration_s : cfg->min_time_s; }
static double timed_cap_s(const alma_config *cfg) {
  return cfg->max_time_s > 0 ? fmax(cfg->max_time_s, cfg->duration_s) : 0;
}

/* What the throughput mode and the server scenario run: sessions made from the converted graph
 * (the cached one on a hit; otherwise this session's graph serialized and loaded back, so the
 * passes run once), fed from a ring of batches prepared beforehand. */
typedef struct {
  alma_model *conv_model;
  alma_tensor *ring;
  int64_t nring;
  int n_in;
  alma__scaling_job job;
} multi_t;

static void multi_free(multi_t *mt) {
  free_batches(mt->ring, mt->nring * mt->n_in);
  alma_model_free(mt->conv_model);
}

/* 0 when ready, with the instances and workers lists (ascending) in inst[0..*ni), work[0..*nw);
 * otherwise a warning naming `what` was added to r. */
static int multi_prepare(const job_args *a, alma_result *r, const char *what, const alma_model *m, alma_session *s,
                         int hit, alma__batcher *b, int n_in, int n_out, multi_t *mt, int64_t inst[64], int *ni,
                         int64_t work[64], int *nw) {
  const alma_config *cfg = a->cfg;
  const alma_conversion *conv = a->one;
  memset(mt, 0, sizeof *mt);
  *ni = alma__config_list("instances", cfg->instances, alma__physical_cores(), inst, 64);
  *nw = alma__config_list("workers", cfg->workers, 0, work, 64);
  if (*ni <= 0 || *nw <= 0) {
    alma__result_warn(r, "%s skipped: %s", what, alma_last_error());
    return -1;
  }
  mt->n_in = n_in;
  const alma_model *sm = m;
  const char *chain = hit ? conv->runtime->name : conv->name;
  if (!hit && conv->n_passes > 0) {
    uint8_t *bytes = NULL;
    size_t nb = 0;
    alma_status st = alma__onnx_serialize(alma__session_graph(s), NULL, &bytes, &nb);
    if (st == ALMA_OK) st = alma_model_load_from_memory(bytes, nb, NULL, &mt->conv_model);
    free(bytes);
    if (st != ALMA_OK) {
      alma__result_warn(r, "%s skipped: the converted graph could not be written and read back: %s", what,
                        alma_last_error());
      return -1;
    }
    sm = mt->conv_model;
    chain = conv->runtime->name;
  }
  /* The ring: up to 8 distinct batches, at most 256 MiB. */
  size_t batch_bytes = 0;
  const alma_tensor *shapes = alma__batcher_shapes(b);
  for (int i = 0; i < n_in; i++) batch_bytes += (size_t)alma_tensor_numel(&shapes[i]) * alma_dtype_size(shapes[i].dtype);
  int64_t nring = batch_bytes ? (int64_t)((256u << 20) / batch_bytes) : 8;
  nring = nring < 1 ? 1 : nring > 8 ? 8 : nring;
  int64_t spb = alma__batcher_batch(b);
  if (copy_batches(b, cfg, 0, n_in, nring, &mt->ring, &spb) != ALMA_OK) {
    alma__result_warn(r, "%s skipped: preparing batches: %s", what, alma_last_error());
    alma_model_free(mt->conv_model);
    return -1;
  }
  mt->nring = nring;
  mt->job = (alma__scaling_job){.model = sm, .conversion = chain, .batches = mt->ring, .n_batches = (int)nring,
                                .n_inputs = n_in, .n_outputs = n_out, .samples_per_batch = spb, .cfg = cfg,
                                .total_threads = a->threads};
  return 0;
}

/* The throughput mode (scenario Offline), after the latency mode: every instances x workers
 * configuration. */
static void throughput_mode(const job_args *a, alma__chan *ch, alma_result *r, const alma_model *m, alma_session *s, int hit,
                            alma__batcher *b, int n_in, int n_out) {
  int64_t inst[64], work[64];
  int ni, nw;
  multi_t mt;
  if (multi_prepare(a, r, "throughput mode", m, s, hit, b, n_in, n_out, &mt, inst, &ni, work, &nw) != 0) return;
  int total = ni * nw, k = 0, any_concurrent = 0;
  for (int i = 0; i < ni; i++)
    for (int w = 0; w < nw; w++) {
      alma__chan_line(ch, "progress throughput %d %d", k++, total);
      alma_scaling_point *p = alma__result_add_scaling(r);
      if (!p) {
        alma__result_warn(r, "throughput mode: out of memory");
        i = ni;
        break;
      }
      if (alma__scaling_run(&mt.job, (int)inst[i], (int)work[w], p) != ALMA_OK)
        alma__result_warn(r, "throughput mode, %lld instances x %lld workers: %s", (long long)inst[i], (long long)work[w],
                          p->error ? p->error : "failed");
      any_concurrent |= p->concurrent && !p->error;
      if (p->stop_reason && strstr(p->stop_reason, "max_time_s"))
        alma__result_warn(r, "throughput mode, %lld instances x %lld workers: %s", (long long)inst[i], (long long)work[w],
                          p->stop_reason);
    }
  if (any_concurrent)
    alma__result_warn(r, "throughput mode: latencies of configurations with more than one request in flight (concurrent) "
                         "were read from a concurrent run and include contention; single-stream latency is the latency mode's");
  multi_free(&mt);
}

/* The server scenario, after the latency mode: Poisson arrivals served by the smallest instances
 * x the smallest workers value, at target_qps or the highest VALID rate a search finds. */
static void server_mode(const job_args *a, alma__chan *ch, alma_result *r, const alma_model *m, alma_session *s, int hit,
                        alma__batcher *b, int n_in, int n_out) {
  const alma_config *cfg = a->cfg;
  int64_t inst[64], work[64];
  int ni, nw;
  multi_t mt;
  if (multi_prepare(a, r, "server scenario", m, s, hit, b, n_in, n_out, &mt, inst, &ni, work, &nw) != 0) return;
  alma__chan_line(ch, "progress server 0 0");
  r->has_server = 1;
  if (alma__server_scenario(&mt.job, (int)inst[0], (int)work[0], r->latency.p50, &r->server) != ALMA_OK)
    alma__result_warn(r, "server scenario: %s", r->server.error ? r->server.error : "failed");
  else if (r->server.search && r->server.best < 0)
    alma__result_warn(r,
                      "server scenario: no arrival rate met p%g <= %g ms (the lowest tried: %.4g queries/s, where "
                      "the sessions were nearly idle: single queries exceed the bound; more queries (-n) give the "
                      "percentile room for rare stalls)",
                      cfg->latency_percentile, cfg->latency_bound_ms,
                      r->server.n_runs ? r->server.runs[r->server.n_runs - 1].target_qps : NAN);
  multi_free(&mt);
}

/* Stores the build's graph from a forked copy of this process when isolated: serializing holds
 * every byte of the model once more, which would otherwise count in this conversion's peak RSS. */
static alma_status save_graph(const alma_session *s, const char *path, int isolated) {
  int fds[2];
  if (!isolated || pipe(fds) != 0) return alma_session_save(s, path);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return alma_session_save(s, path);
  }
  if (pid == 0) {
    close(fds[0]);
    alma_status st = alma_session_save(s, path);
    if (st != ALMA_OK) {
      const char *m = alma_last_error();
      ssize_t w = write(fds[1], m, strlen(m));
      (void)w;
    }
    _exit(st == ALMA_OK ? 0 : 1);
  }
  close(fds[1]);
  char msg[1024];
  size_t len = 0;
  ssize_t n;
  while (len < sizeof msg - 1 && ((n = read(fds[0], msg + len, sizeof msg - 1 - len)) > 0 || (n < 0 && errno == EINTR)))
    if (n > 0) len += (size_t)n;
  msg[len] = 0;
  close(fds[0]);
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
  if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) return ALMA_OK;
  return alma__errorf(ALMA_ERR_IO, "%s", len ? msg : "the process writing it died");
}

/* mkdir -p: the save_converted directory and its parents. */
static alma_status make_dirs(const char *dir) {
  char p[1024];
  struct stat sb;
  if (!*dir || strlen(dir) >= sizeof p) return alma__errorf(ALMA_ERR_INVALID_ARG, "directory name '%s' empty or too long", dir);
  snprintf(p, sizeof p, "%s", dir);
  for (char *q = p + 1;; q++) {
    if (*q != '/' && *q) continue;
    char c = *q;
    *q = 0;
    if (mkdir(p, 0777) != 0 && errno != EEXIST)
      return alma__errorf(ALMA_ERR_IO, "cannot create directory '%s': %s", p, strerror(errno));
    *q = c;
    if (!c) break;
  }
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return alma__errorf(ALMA_ERR_IO, "'%s' is not a directory", dir);
  return ALMA_OK;
}

/* Nodes of the alma domain (FUSE's fused ops), subgraphs included. */
static int count_alma_ops(const alma_graph *g) {
  int n = 0;
  for (int i = 0; g && i < g->n_nodes; i++) {
    const alma_node *nd = &g->nodes[i];
    if (nd->dead) continue;
    n += nd->domain && !strcmp(nd->domain, "alma");
    for (int k = 0; k < nd->n_attrs; k++) {
      const alma_attr *at = &nd->attrs[k];
      if (at->type == ALMA_ATTR_GRAPH) n += count_alma_ops(at->g);
      for (int j = 0; at->type == ALMA_ATTR_GRAPHS && j < at->n; j++) n += count_alma_ops(at->graphs[j]);
    }
  }
  return n;
}

/* save_converted: the session's graph as DIR/<conversion>[_b<batch>].onnx, the name keeping only
 * [A-Za-z0-9+-._] of the conversion's. */
static alma_status save_converted(const job_args *a, const alma_session *s, alma_result *r, int isolated) {
  const char *dir = a->cfg->save_converted;
  char name[256], path[1400];
  size_t k = 0;
  for (const char *p = a->one->name; *p && k < 200; p++)
    name[k++] = isalnum((unsigned char)*p) || strchr("+-._", *p) ? *p : '_';
  name[k] = 0;
  if (a->batch_suffix) snprintf(name + k, sizeof name - k, "_b%lld", (long long)a->cfg->batch_size);
  alma_status st = make_dirs(dir);
  if (st == ALMA_OK) {
    snprintf(path, sizeof path, "%s%s%s.onnx", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name);
    st = save_graph(s, path, isolated);
  }
  if (st != ALMA_OK) return alma__error_prefix(st, "save_converted: ");
  r->saved_path = alma__strdup(path);
  r->saved_alma_ops = count_alma_ops(alma__session_graph(s));
  if (r->saved_alma_ops)
    alma__result_warn(r, "saved graph %s has %d alma-domain op%s (FUSE's fused operators): alma loads it, ONNX Runtime "
                      "and other ONNX tools cannot run it",
                      path, r->saved_alma_ops, r->saved_alma_ops == 1 ? "" : "s");
  return ALMA_OK;
}

/* Top-1 over the whole labelled data set, once, after timing: batches from the first, the last
 * one cut to the samples left (a wrapped batch repeats samples from the start: counted once). The
 * postprocess hook is not called (it sees timed batches only). */
static alma_status accuracy_pass(const job_args *a, alma__chan *ch, alma_result *r, alma_session *s, const alma_model *m,
                                 alma__batcher *b, alma_tensor *batch, alma_tensor *inputs, int n_in, alma_tensor *outs,
                                 int n_out) {
  int64_t total = alma__batcher_samples(b), done = 0, correct = 0;
  if (total != a->n_labels)
    return alma__errorf(ALMA_ERR_SHAPE, "%lld labels for %lld samples in the data", (long long)a->n_labels, (long long)total);
  if (n_out < 1) return alma__errorf(ALMA_ERR_INVALID_MODEL, "the model has no output to take top-1 from");
  alma_config nopost = *a->cfg;
  nopost.postprocess = NULL;
  double t0 = alma__bench_now(), last = t0;
  ALMA_TRY(alma__batcher_rewind(b));
  for (int64_t k = 0; done < total; k++) {
    int64_t ns;
    double pm, im, qm;
    ALMA_TRY(alma__batcher_next(b, batch, &ns));
    alma_status st = hooked_run(&nopost, s, batch, inputs, n_in, outs, n_out, &pm, &im, &qm);
    int64_t take = ns < total - done ? ns : total - done;
    if (st == ALMA_OK) st = alma__count_top1(&outs[0], alma_model_output_name(m, 0), ns, a->labels + done, take, &correct);
    for (int i = 0; i < n_out; i++) alma_tensor_free_data(&outs[i]);
    if (st != ALMA_OK) return alma__error_prefix(st, "batch %lld (samples %lld..): ", (long long)k, (long long)done);
    if (take <= 0) return alma__errorf(ALMA_ERR_INTERNAL, "batch %lld has no samples", (long long)k);
    done += take;
    if (alma__bench_now() - last >= 0.25) {
      alma__chan_line(ch, "progress accuracy %lld %lld", (long long)done, (long long)total);
      last = alma__bench_now();
    }
  }
  r->acc.samples = total;
  r->acc.correct = correct;
  r->acc.top1 = (double)correct / (double)total;
  r->acc.seconds = alma__bench_now() - t0;
  alma__result_set_baseline(r, "", NAN);
  return ALMA_OK;
}

/* The per-node profile (config profile), after the timed phase and the accuracy pass: at least
 * `profile` batches and profile_time_s seconds (max_time_s caps, one batch at least) with every
 * node timed, on the batches that follow in the sequence. The postprocess hook is not called (it
 * sees timed batches only). A runtime without a per-node profile gets one that says so. */
static alma_status profile_pass(const job_args *a, alma__chan *ch, alma_result *r, alma_session *s, alma__batcher *b,
                                alma_tensor *batch, alma_tensor *inputs, int n_in, alma_tensor *outs, int n_out) {
  const alma_config *cfg = a->cfg;
  alma_status st = alma__session_profile_start(s);
  if (st == ALMA_ERR_UNSUPPORTED) {
    char why[512];
    snprintf(why, sizeof why, "%s", alma_last_error());
    alma__error_clear();
    if ((st = alma__profile_init(&r->prof, alma__session_runtime_name(s), why)) == ALMA_OK) r->has_profile = 1;
    return st;
  }
  ALMA_TRY(st);
  alma_config nopost = *cfg;
  nopost.postprocess = NULL;
  double t0 = alma__bench_now(), last = t0, sum_ms = 0;
  int64_t n = 0;
  while (n < cfg->profile || alma__bench_now() - t0 < cfg->profile_time_s) {
    int64_t ns;
    double pm, im = 0, qm;
    ALMA_TRY(alma__batcher_next(b, batch, &ns));
    st = hooked_run(&nopost, s, batch, inputs, n_in, outs, n_out, &pm, &im, &qm);
    for (int i = 0; i < n_out; i++) alma_tensor_free_data(&outs[i]);
    if (st != ALMA_OK) return alma__error_prefix(st, "profiled batch %lld: ", (long long)n);
    sum_ms += im;
    n++;
    double now = alma__bench_now();
    if (cfg->max_time_s > 0 && now - t0 >= cfg->max_time_s) {
      alma__result_warn(r, "profile stopped by max_time_s (%g s) after %lld batches", cfg->max_time_s, (long long)n);
      break;
    }
    if (now - last >= 0.25) {
      alma__chan_line(ch, "progress profile %lld %lld", (long long)n, (long long)cfg->profile);
      last = now;
    }
  }
  double seconds = alma__bench_now() - t0;
  alma__prof_graph *graphs = NULL;
  int n_graphs = 0;
  st = alma__session_profile_read(s, &graphs, &n_graphs);
  if (st == ALMA_OK && (st = alma__profile_init(&r->prof, alma__session_runtime_name(s), NULL)) == ALMA_OK) {
    r->has_profile = 1;
    st = alma__profile_build(&r->prof, graphs, n_graphs, n, seconds, sum_ms / (double)n, r->latency.mean);
  }
  alma__prof_graphs_free(graphs, n_graphs);
  return st;
}

/* ---- the child's run of one conversion, in phases ----------------------------------------------
 * load (the model, or its cached build) > data > convert (passes and runtime; save) > first
 * inference > warm-up > timed > check > accuracy / profile > the runtime's facts > throughput or
 * server mode. Each phase says its name on the channel (the parent's record of where a crash
 * happened) and returns a status; the first failure ends the run with that phase named. */
typedef struct {
  const job_args *a;
  const alma_config *cfg;
  const alma_conversion *conv;
  const alma__cache_plan *plan;
  alma__chan *ch;
  alma_result *r;
  alma_model *owned, *cached; /* what this run loaded (freed at the end) */
  const alma_model *m;        /* the model converted: the caller's, owned or cached */
  alma_session *s;
  alma__batcher *b;
  alma__input_desc *in;
  alma_tensor *inputs, *outs, *first, *ref, *batch, *calib;
  int n_in, n_out, n_ref;
  int64_t n_calib;
  double *raw, *pre, *post; /* the timed phase's latencies (ms) */
  int64_t n_raw, cap_raw, n_pre, cap_pre, n_post, cap_post;
  int convert_failed, hit;
  alma__cpu_snap *snap; /* contention counters at the start of the timed phase */
  const char *step;
  char chain[256]; /* the phases run so far, for the traceback */
} run_state;

static void run_step(run_state *w, const char *name) {
  w->step = name;
  alma__chan_line(w->ch, "step %s", name);
  size_t l = strlen(w->chain);
  snprintf(w->chain + l, sizeof w->chain - l, "%s%s", l ? " > " : "", name);
}

static void run_init(run_state *w, const job_args *a, alma__chan *ch, alma_result *r) {
  memset(w, 0, sizeof *w);
  w->a = a;
  w->cfg = a->cfg;
  w->conv = a->one;
  w->plan = a->plan;
  w->ch = ch;
  w->r = r;
  w->m = a->model;
  alma__result_init(r);
  r->conversion = alma__strdup(w->conv->name);
  r->id = w->conv->id;
  snprintf(r->device, sizeof r->device, "%s", runtime_device(w->conv->runtime));
  r->threads = w->conv->runtime->single_threaded ? 1 : a->threads;
  if (w->conv->runtime->n_options) {
    char ro[2048];
    alma__rt_options_json(w->conv->runtime, w->cfg->runtime_options, ro, sizeof ro, NULL);
    r->runtime_options = alma__strdup(ro);
    if (alma__rt_options_given(w->conv->runtime, w->cfg->runtime_options, ro, sizeof ro) > 0)
      r->runtime_options_given = alma__strdup(ro);
  }
  char aff[256];
  r->affinity = alma__strdup(alma__affinity_str(aff, sizeof aff));
}

static alma_status run_load(run_state *w) {
  const alma__cache_plan *plan = w->plan;
  alma_result *r = w->r;
  char cache_note[700] = "";
  alma_status st = ALMA_OK;
  run_step(w, "load");
  double t = alma__bench_now();
  if (plan && plan->use) {
    /* A cached build: only ever loaded once its bytes match the state's checksum. The parent
     * hears that this child uses it, so that a crash from here on drops it from the cache. */
    alma__chan_line(w->ch, "mark cached_graph");
    uint8_t *bytes = NULL;
    size_t nb = 0;
    alma_status cs = alma__cache_read_graph(plan, &bytes, &nb);
    if (cs != ALMA_OK) {
      snprintf(cache_note, sizeof cache_note, "corrupt: %s", alma_last_error());
    } else if ((cs = alma_model_load_from_memory(bytes, nb, plan->dir, &w->cached)) != ALMA_OK) {
      snprintf(cache_note, sizeof cache_note, "the cached graph does not load (%s)", alma_last_error());
    } else {
      w->hit = 1;
      w->m = w->cached;
    }
    free(bytes);
    alma__error_clear();
  }
  if (!w->m) {
    st = alma_model_load(w->a->model_path, &w->owned);
    w->m = w->owned;
  }
  r->load_s = w->a->model && !w->hit ? 0 : alma__bench_now() - t;
  if (plan)
    alma__result_set_cache(r, w->hit ? "hit" : "built", cache_note[0] ? cache_note : plan->reason,
                           plan->stale && !cache_note[0], "", "", "", w->hit ? plan->build_s : NAN,
                           w->hit ? plan->graph_bytes : -1);
  return st;
}

static alma_status run_data(run_state *w) {
  const alma_config *cfg = w->cfg;
  run_step(w, "data");
  w->n_in = input_descs(w->m, &w->in);
  w->n_out = alma_model_num_outputs(w->m);
  if (w->n_in < 0) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  ALMA_TRY(alma__batcher_new_ex(w->a->data, w->in, w->n_in, cfg->batch_size, cfg->seed, warn_into_result, w->r, &w->b));
  size_t ni = (size_t)(w->n_in > 0 ? w->n_in : 1), no = (size_t)(w->n_out > 0 ? w->n_out : 1);
  w->inputs = calloc(ni, sizeof *w->inputs);
  w->batch = calloc(ni, sizeof *w->batch);
  w->outs = calloc(no, sizeof *w->outs);
  w->first = calloc(no, sizeof *w->first);
  if (!w->inputs || !w->batch || !w->outs || !w->first) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  /* INT8_STATIC on the benchmark's own batches (pre-processed as they will be fed). */
  if (!w->hit && cfg->calibration_batches > 0 && calibrates(w->conv)) {
    w->n_calib = cfg->calibration_batches;
    ALMA_TRY(copy_batches(w->b, cfg, 1, w->n_in, w->n_calib, &w->calib, NULL));
    ALMA_TRY(alma__batcher_rewind(w->b));
  }
  /* Said on a hit too: the cached build was calibrated the same way (the options are in its key). */
  if (calibrates(w->conv) && (cfg->calibration_batches == 0 || !strcmp(alma_data_kind(w->a->data), "random")))
    alma__result_warn(w->r, "%s calibrated on %s, which calibrates poorly: give real samples (--data)", w->conv->name,
                      cfg->calibration_batches == 0 ? "the pass's own random batches (calibration_batches 0)"
                                                    : "the benchmark's random data");
  return ALMA_OK;
}

static alma_status run_convert(run_state *w) {
  const alma_config *cfg = w->cfg;
  alma_result *r = w->r;
  run_step(w, "convert");
  alma_session_options so;
  alma_session_options_init(&so);
  so.threads = w->a->threads;
  so.verbose = cfg->verbose >= 2;
  so.calibrator = cfg->calibrator[0] ? cfg->calibrator : NULL;
  so.runtime_options = cfg->runtime_options;
  so.calibration_data = w->calib;
  so.n_calibration_batches = (int)w->n_calib;
  double t = alma__bench_now();
  /* A hit skips the passes: the cached graph is what they produced; only the runtime compiles. */
  alma_status st = alma_session_create(w->m, w->hit ? w->conv->runtime->name : w->conv->name, &so, &w->s);
  r->convert_s = alma__bench_now() - t;
  w->convert_failed = st != ALMA_OK;
  free_batches(w->calib, w->n_calib * w->n_in);
  w->calib = NULL;
  if (st != ALMA_OK) return st;
  const alma__cache_plan *plan = w->plan;
  if (plan && !w->hit) {
    r->cache.build_s = r->convert_s;
    if (plan->tmp_graph[0] && save_graph(w->s, plan->tmp_graph, alma__chan_is_child(w->ch)) != ALMA_OK) {
      alma__result_warn(r, "cache: the build could not be stored: %s", alma_last_error());
      unlink(plan->tmp_graph);
      alma__error_clear();
    } else if (plan->tmp_graph[0]) {
      /* The parent stores the file only after this: a child killed while writing it leaves a
       * partial file, never a cached graph. */
      alma__chan_line(w->ch, "mark graph_saved");
    }
  }
  if (cfg->save_converted[0]) {
    run_step(w, "save");
    ALMA_TRY(save_converted(w->a, w->s, r, alma__chan_is_child(w->ch)));
  }
  return ALMA_OK;
}

/* The first inference (batch 0) is timed on its own: it pays lazy initialization. Its outputs
 * are the ones checked, on the same inputs the reference saw. */
static alma_status run_first(run_state *w) {
  run_step(w, "first");
  int64_t ns;
  double pre_ms, infer_ms, post_ms;
  ALMA_TRY(alma__batcher_next(w->b, w->batch, &ns));
  w->r->batch_size = alma__batcher_batch(w->b);
  alma_status st = hooked_run(w->cfg, w->s, w->batch, w->inputs, w->n_in, w->first, w->n_out, &pre_ms, &infer_ms,
                              &post_ms);
  w->r->first_inference_ms = infer_ms;
  return st;
}

static alma_status run_warmup(run_state *w) {
  const alma_config *cfg = w->cfg;
  run_step(w, "warmup");
  ALMA_TRY(alma__test_fault(w->conv->name, alma__chan_is_child(w->ch)));
  double tw = alma__bench_now(), pre_ms, infer_ms, post_ms;
  int64_t nw = 0, ns;
  while (nw < cfg->warmup || alma__bench_now() - tw < cfg->warmup_s) {
    ALMA_TRY(alma__batcher_next(w->b, w->batch, &ns));
    alma_status st = hooked_run(cfg, w->s, w->batch, w->inputs, w->n_in, w->outs, w->n_out, &pre_ms, &infer_ms, &post_ms);
    for (int i = 0; i < w->n_out; i++) alma_tensor_free_data(&w->outs[i]);
    if (st != ALMA_OK) return st;
    nw++;
    if (cfg->max_time_s > 0 && alma__bench_now() - tw > cfg->max_time_s) break;
  }
  w->r->warmup_batches = nw;
  w->r->warmup_s = alma__bench_now() - tw;
  return ALMA_OK;
}

/* The timed phase's sums, from its loop to its results. */
typedef struct {
  double tt;            /* its start */
  double infer, hooks_s; /* seconds in inference, in the pre/post hooks */
  int64_t samples;
  char why[192];        /* why it stopped */
} timed_acc;

/* Why the timed loop stops after n_raw batches el seconds in (into acc->why), or 0 to go on. */
static int timed_stop(run_state *w, timed_acc *acc, int64_t min_batches, double min_s, double cap_s, double el) {
  const alma_config *cfg = w->cfg;
  alma_result *r = w->r;
  int64_t n_raw = w->n_raw;
  const char *min_key = cfg->duration_s > 0 ? "duration_s" : "min_time_s";
  if (n_raw >= MAX_TIMED_BATCHES && n_raw >= min_batches) {
    /* Every latency is kept and shipped as JSON: bound that for microsecond models. */
    snprintf(acc->why, sizeof acc->why, "stopped at %d batches, the cap on kept samples", MAX_TIMED_BATCHES);
    alma__result_warn(r, "%s: batches are very short (%.3g ms); a larger batch measures more per batch", acc->why,
                      1e3 * acc->infer / (double)n_raw);
    return 1;
  }
  if (cap_s > 0 && el >= cap_s) {
    if (n_raw < min_batches || el < min_s) {
      snprintf(acc->why, sizeof acc->why, "stopped by max_time_s (%g s) after %lld of %lld batches", cap_s,
               (long long)n_raw, (long long)min_batches);
      alma__result_warn(r, "%s: fewer samples than asked for", acc->why);
    } else {
      snprintf(acc->why, sizeof acc->why, "stopped by max_time_s (%g s) before the precision target", cap_s);
      alma__result_warn(r, "%s", acc->why);
    }
    return 1;
  }
  if (n_raw < min_batches || el < min_s) return 0;
  if (cfg->target_rel_ci <= 0) {
    snprintf(acc->why, sizeof acc->why, "reached n_samples (%lld batches) and %s (%g s)", (long long)min_batches,
             min_key, min_s);
    return 1;
  }
  /* Precision target: re-evaluated every 16 batches (a sort each time). */
  if (n_raw % 16) return 0;
  alma_latency_stats ls;
  alma__latency_stats(w->raw, n_raw, &ls);
  double half = 0.5 * (ls.median_ci95[1] - ls.median_ci95[0]);
  if (!(isfinite(half) && half <= cfg->target_rel_ci * ls.p50)) return 0;
  snprintf(acc->why, sizeof acc->why, "reached n_samples, %s and the precision target (median 95%% CI within +-%g%%)",
           min_key, 100 * cfg->target_rel_ci);
  return 1;
}

static alma_status timed_loop(run_state *w, timed_acc *acc) {
  const alma_config *cfg = w->cfg;
  int64_t min_batches = (cfg->n_samples + w->r->batch_size - 1) / (w->r->batch_size > 0 ? w->r->batch_size : 1);
  if (min_batches < 1) min_batches = 1;
  double min_s = timed_min_s(cfg), cap_s = timed_cap_s(cfg);
  /* Read before the phase's clock starts: reading /proc is not the phase's work. */
  if ((w->snap = malloc(sizeof *w->snap))) alma__contention_begin(w->snap);
  acc->tt = alma__bench_now();
  double last_progress = acc->tt, pre_ms, infer_ms, post_ms;
  int oom = 0;
  for (;;) {
    int64_t ns;
    ALMA_TRY(alma__batcher_next(w->b, w->batch, &ns));
    alma_status st = hooked_run(cfg, w->s, w->batch, w->inputs, w->n_in, w->outs, w->n_out, &pre_ms, &infer_ms, &post_ms);
    double t1 = alma__bench_now();
    for (int i = 0; i < w->n_out; i++) alma_tensor_free_data(&w->outs[i]);
    if (st != ALMA_OK) return st;
    add_double(&w->raw, &w->n_raw, &w->cap_raw, infer_ms, &oom);
    if (cfg->preprocess) add_double(&w->pre, &w->n_pre, &w->cap_pre, pre_ms, &oom);
    if (cfg->postprocess) add_double(&w->post, &w->n_post, &w->cap_post, post_ms, &oom);
    if (oom) return alma__errorf(ALMA_ERR_NOMEM, "out of memory keeping %lld latencies", (long long)w->n_raw);
    acc->infer += 1e-3 * infer_ms;
    if (cfg->preprocess) acc->hooks_s += 1e-3 * pre_ms;
    if (cfg->postprocess) acc->hooks_s += 1e-3 * post_ms;
    acc->samples += ns;
    if (t1 - last_progress >= 0.25) {
      alma__chan_line(w->ch, "progress timed %lld %lld", (long long)w->n_raw, (long long)min_batches);
      last_progress = t1;
    }
    if (timed_stop(w, acc, min_batches, min_s, cap_s, t1 - acc->tt)) return ALMA_OK;
  }
}

/* The warnings about the machine during the timed phase: contention, the clock check, the load
 * average, the timer's resolution. */
static void timed_warnings(run_state *w) {
  const alma_config *cfg = w->cfg;
  alma_result *r = w->r;
  if (r->cont.disturbed) {
    alma__result_warn(r, "disturbed: the timed phase got less CPU than it needed: %s", r->cont.reason);
    if (r->cont.spinning)
      alma__result_warn(r, "spin-wait under contention (%s): latencies can be several times the quiet ones; %s",
                        w->conv->runtime->name, r->cont.advice);
  }
  if (isfinite(r->clock_agreement) && r->latency.p50 >= 1 && fabs(r->clock_agreement - 1) > 0.02)
    alma__result_warn(r, "clock check: the batch latencies account for %.1f%% of the timed phase's wall time "
                      "(within 2%% expected for batches of 1 ms and more)", 100 * r->clock_agreement);
  /* Other processes competing for the CPU: the 1-minute load average (which counts this run's own
   * threads too) above the number of CPUs this process may use. */
  double load;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (getloadavg(&load, 1) == 1 && ncpu > 0 && load > (double)ncpu + 0.5) {
    alma__result_warn(r, "system load average %.1f on %ld CPUs during the run: other processes competed for the CPU",
                      load, ncpu);
    /* a spinning runtime makes load far worse than its share: said even when this phase was not
     * caught disturbed (the contention figures say so themselves when it was) */
    alma_runtime_opts ro = {.threads = w->a->threads, .options = cfg->runtime_options};
    const char *adv = w->conv->runtime->spin_advice && ncpu > 1 ? w->conv->runtime->spin_advice(&ro, w->a->threads) : NULL;
    if (adv && !r->cont.spinning)
      alma__result_warn(r, "%s under load: its threads spin-wait and can take the time slice a preempted partner "
                        "needs (several times the quiet latency): %s", w->conv->runtime->name, adv);
  }
  if (isfinite(r->latency.min) && r->timer_overhead_ns * 1e-6 > 0.01 * r->latency.min)
    alma__result_warn(r, "timer overhead %.0f ns is more than 1%% of the fastest batch (%.4g ms): use a larger batch",
                      r->timer_overhead_ns, r->latency.min);
}

static alma_status run_timed(run_state *w) {
  alma_result *r = w->r;
  run_step(w, "timed");
  r->timer_overhead_ns = alma__timer_overhead_ns();
  timed_acc acc = {0};
  ALMA_TRY(timed_loop(w, &acc));
  /* The outside check of the clock: the phase's own wall time against what the batches account
   * for (their latencies, the hooks, one clock read per batch outside the latency). */
  double t_end = alma__bench_now();
  if (w->snap)
    alma__contention_end(w->snap, r->threads,
                         alma__spin_advice_of(w->conv->runtime->name, w->cfg->runtime_options, r->threads), &r->cont);
  if (t_end > acc.tt)
    r->clock_agreement = (acc.infer + acc.hooks_s + (double)w->n_raw * 1e-9 * r->timer_overhead_ns) / (t_end - acc.tt);
  r->inference_s = acc.infer;
  r->samples = acc.samples;
  r->throughput = acc.infer > 0 ? (double)acc.samples / acc.infer : NAN;
  r->stop_reason = alma__strdup(acc.why);
  r->raw_ms = w->raw;
  r->n_raw = w->n_raw;
  w->raw = NULL;
  alma__latency_stats(r->raw_ms, r->n_raw, &r->latency);
  alma__latency_warnings(r->raw_ms, r->n_raw, &r->latency, warn_into_result, r);
  if (w->n_pre) alma__latency_stats(w->pre, w->n_pre, &r->pre);
  if (w->n_post) alma__latency_stats(w->post, w->n_post, &r->post);
  timed_warnings(w);
  return ALMA_OK;
}

/* The first inference's outputs against EAGER's reference; a check that cannot run is a warning. */
static void run_check(run_state *w) {
  alma_result *r = w->r;
  run_step(w, "check");
  if (!w->cfg->check_outputs) return;
  if (!w->a->ref_path) {
    alma__result_warn(r, "output check skipped: no EAGER reference outputs (see the first warning of the sweep)");
  } else if (ref_load(w->a->ref_path, &w->ref, &w->n_ref) != ALMA_OK) {
    alma__result_warn(r, "output check skipped: %s", alma_last_error());
  } else {
    char warning[1024];
    alma__check_outputs(w->ref, w->n_ref, w->first, w->n_out, w->m, w->cfg->rtol, w->cfg->atol, is_lossy(w->conv),
                        &r->check, warning, sizeof warning);
    if (warning[0]) alma__result_warn(r, "%s", warning);
  }
}

static alma_status run_accuracy_profile(run_state *w) {
  alma_result *r = w->r;
  if (w->a->labels) {
    run_step(w, "accuracy");
    ALMA_TRY(accuracy_pass(w->a, w->ch, r, w->s, w->m, w->b, w->batch, w->inputs, w->n_in, w->outs, w->n_out));
  }
  if (w->cfg->profile > 0) {
    run_step(w, "profile");
    /* The timed numbers stand without it: a profile that fails is a warning, and says why. */
    if (profile_pass(w->a, w->ch, r, w->s, w->b, w->batch, w->inputs, w->n_in, w->outs, w->n_out) != ALMA_OK) {
      char why[700];
      snprintf(why, sizeof why, "the profile failed: %s", alma_last_error());
      alma__result_warn(r, "%s", why);
      if (r->has_profile) alma__profile_clear(&r->prof);
      r->has_profile = alma__profile_init(&r->prof, alma__session_runtime_name(w->s), why) == ALMA_OK;
      alma__error_clear();
    }
  }
  return ALMA_OK;
}

/* The runtime's facts (version, settings, its binding's per-call cost) and placement as data:
 * after the timed phase, since measuring that cost runs the runtime and placement includes what
 * it declined at run time. */
static void run_facts(run_state *w) {
  alma_result *r = w->r;
  char info[2048];
  if (alma__session_runtime_info(w->s, info, sizeof info) != ALMA_OK) {
    alma__result_warn(r, "runtime info: %s", alma_last_error());
    alma__error_clear();
  } else if (info[0]) {
    r->runtime_info = alma__strdup(info);
  }
  if (alma__session_placement_json(w->s, &r->placement) != ALMA_OK) {
    alma__result_warn(r, "placement: %s", alma_last_error());
    alma__error_clear();
  }
}

static void run_fail(run_state *w, alma_status st) {
  alma_result *r = w->r;
  /* A runtime that turns out unusable when it compiles is unavailable, not broken. */
  r->status = st == ALMA_ERR_UNAVAILABLE && w->convert_failed ? ALMA_RESULT_UNAVAILABLE : ALMA_RESULT_ERROR;
  r->error_status = st;
  const char *msg = alma_last_error();
  char line[1200];
  snprintf(line, sizeof line, "%s: %s", alma_status_name(st), msg && *msg ? msg : alma_status_str(st));
  r->error = alma__strdup(line);
  r->failed_step = alma__strdup(w->step);
  size_t tn = strlen(line) + strlen(w->chain) + 256;
  r->traceback = malloc(tn);
  if (r->traceback)
    snprintf(r->traceback, tn, "conversion %s (%d pass%s, runtime %s)\nsteps: %s  <- failed here\n%s", w->conv->name,
             w->conv->n_passes, w->conv->n_passes == 1 ? "" : "es", w->conv->runtime->name, w->chain, line);
}

static void run_free(run_state *w) {
  free(w->snap);
  free(w->raw);
  free(w->pre);
  free(w->post);
  free_batches(w->calib, w->n_calib * w->n_in);
  free_outputs(w->ref, w->n_ref);
  if (w->first) free_outputs(w->first, w->n_out);
  free(w->outs);
  free(w->inputs);
  free(w->batch);
  alma__batcher_free(w->b);
  free(w->in);
  alma_session_free(w->s);
  alma_model_free(w->owned);
  alma_model_free(w->cached);
}

static void worker(void *arg, alma__chan *ch) {
  double t_start = alma__bench_now();
  alma_result res, *r = &res;
  run_state w;
  run_init(&w, arg, ch, r);
  const alma_config *cfg = w.cfg;
  alma_status st = run_load(&w);
  if (st == ALMA_OK) st = run_data(&w);
  if (st == ALMA_OK) st = run_convert(&w);
  if (st == ALMA_OK && cfg->build_only) {
    snprintf(r->mode, sizeof r->mode, "build");
    r->stop_reason = alma__strdup("build_only: converted, not timed");
    r->status = ALMA_RESULT_OK;
  } else {
    if (st == ALMA_OK) st = run_first(&w);
    if (st == ALMA_OK) st = run_warmup(&w);
    if (st == ALMA_OK) st = run_timed(&w);
    if (st == ALMA_OK) run_check(&w);
    if (st == ALMA_OK) st = run_accuracy_profile(&w);
    if (st == ALMA_OK) {
      /* The latency mode's peak: the throughput mode's extra sessions come after. */
      r->peak_rss_bytes = alma__peak_rss_bytes();
      run_facts(&w);
      if (cfg->throughput || !strcmp(cfg->scenario, "offline")) {
        run_step(&w, "throughput");
        throughput_mode(w.a, ch, r, w.m, w.s, w.hit, w.b, w.n_in, w.n_out);
      }
      if (!strcmp(cfg->scenario, "server")) {
        run_step(&w, "server");
        server_mode(w.a, ch, r, w.m, w.s, w.hit, w.b, w.n_in, w.n_out);
      }
      r->status = ALMA_RESULT_OK;
    }
  }
  if (st != ALMA_OK) run_fail(&w, st);
  if (r->peak_rss_bytes < 0 || r->status != ALMA_RESULT_OK) r->peak_rss_bytes = alma__peak_rss_bytes();
  r->total_elapsed_s = alma__bench_now() - t_start;
  if (!alma__chan_is_child(ch) && r->peak_rss_bytes >= 0)
    alma__result_warn(r, "peak RSS is the whole process's (multiprocessing off)");
  alma__chan_line(ch, "step done");
  send_result(ch, r);
  alma__result_clear(r);
  run_free(&w);
}

/* ---- the probe: model facts, availability, reference outputs ---------------------------------- */
static cJSON *io_json(const alma_model *m, int is_input, const alma_tensor *resolved) {
  cJSON *arr = cJSON_CreateArray();
  int n = is_input ? alma_model_num_inputs(m) : alma_model_num_outputs(m);
  for (int i = 0; i < n; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", is_input ? alma_model_input_name(m, i) : alma_model_output_name(m, i));
    cJSON_AddStringToObject(o, "dtype", alma_dtype_name(is_input ? alma_model_input_dtype(m, i) : alma_model_output_dtype(m, i)));
    char decl[160];
    describe_shape(m, i, is_input, decl, sizeof decl);
    cJSON_AddStringToObject(o, "declared", decl);
    int rank = resolved ? resolved[i].rank : (is_input ? alma_model_input_rank(m, i) : alma_model_output_rank(m, i));
    cJSON *sh = cJSON_AddArrayToObject(o, "shape");
    for (int d = 0; d < rank; d++) {
      int64_t v = resolved ? resolved[i].dims[d] : is_input ? alma_model_input_dim(m, i, d) : alma_model_output_dim(m, i, d);
      cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)v));
    }
    if (rank < 0) cJSON_AddNumberToObject(o, "rank", -1);
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

static void probe_fail(alma__chan *ch, cJSON *rec, alma_status st, const char *what) {
  char msg[1400];
  snprintf(msg, sizeof msg, "%s: %s", what, alma_last_error()[0] ? alma_last_error() : alma_status_str(st));
  cJSON_AddStringToObject(rec, "error", msg);
  cJSON_AddStringToObject(rec, "error_status", alma_status_name(st));
  char *text = cJSON_PrintUnformatted(rec);
  alma__chan_record(ch, text ? text : "{\"error\":\"out of memory\",\"error_status\":\"ERR_NOMEM\"}");
  free(text);
}

/* SHA-256 of the first n batches (dtype, shape and bytes of every input): what INT8_STATIC
 * calibrates on, for the build cache's key. */
static alma_status hash_batches(alma__batcher *b, int n_in, int64_t n, char hex[65]) {
  alma_tensor *in = calloc((size_t)n_in + 1, sizeof *in);
  alma_sha256 *h = alma__sha256_new();
  alma_status st = in && h ? alma__batcher_rewind(b) : alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (int64_t k = 0; st == ALMA_OK && k < n; k++) {
    int64_t ns;
    if ((st = alma__batcher_next(b, in, &ns)) != ALMA_OK) break;
    for (int i = 0; i < n_in; i++) {
      int32_t head[2] = {(int32_t)in[i].dtype, (int32_t)in[i].rank};
      alma__sha256_update(h, head, sizeof head);
      alma__sha256_update(h, in[i].dims, sizeof in[i].dims[0] * (size_t)(in[i].rank > 0 ? in[i].rank : 0));
      size_t nb = (size_t)alma_tensor_numel(&in[i]) * alma_dtype_size(in[i].dtype);
      if (in[i].data && nb) alma__sha256_update(h, in[i].data, nb);
    }
  }
  if (h) alma__sha256_final(h, hex);  /* frees h */
  free(in);
  return st;
}

static void probe(void *arg, alma__chan *ch) {
  const job_args *a = arg;
  const alma_config *cfg = a->cfg;
  cJSON *rec = cJSON_CreateObject();
  alma_model *owned = NULL;
  const alma_model *m = a->model;
  alma_status st = ALMA_OK;
  alma__input_desc *in = NULL;
  alma__batcher *b = NULL;
  alma_session *s = NULL;
  alma_tensor *inputs = NULL, *outs = NULL;
  int n_in = 0, n_out = 0;
  alma__chan_line(ch, "step load");
  if (!m) {
    if ((st = alma_model_load(a->model_path, &owned)) != ALMA_OK) {
      probe_fail(ch, rec, st, "loading the model");
      goto out;
    }
    m = owned;
  }
  cJSON_AddStringToObject(rec, "hash", alma_model_hash(m));
  char rts[256];
  alma__system_info_runtimes_for(rts, sizeof rts, a->conv, a->n_conv);
  cJSON_AddStringToObject(rec, "runtimes", rts);

  /* Availability of each conversion, by the device rules of the config. */
  cJSON *av = cJSON_AddArrayToObject(rec, "available");
  for (int i = 0; i < a->n_conv; i++) {
    const alma_conversion *c = &a->conv[i];
    const char *dev = runtime_device(c->runtime);
    cJSON *o = cJSON_CreateObject();
    char reason[600] = "";
    alma_status as = alma__conversion_available(c);
    if (as != ALMA_OK)
      snprintf(reason, sizeof reason, "%s", alma_last_error()[0] ? alma_last_error() : alma_status_str(as));
    else if (!strcmp(dev, "cuda") && !cfg->allow_cuda)
      snprintf(reason, sizeof reason, "runtime %s runs on CUDA and allow_cuda is off", c->runtime->name);
    else if (strcmp(dev, cfg->device) && !cfg->allow_device_override)
      snprintf(reason, sizeof reason, "runtime %s runs on %s, not on the configured device %s (allow_device_override is off)",
               c->runtime->name, dev, cfg->device);
    cJSON_AddBoolToObject(o, "ok", reason[0] == 0);
    cJSON_AddStringToObject(o, "reason", reason);
    cJSON_AddItemToArray(av, o);
  }

  alma__chan_line(ch, "step data");
  n_in = input_descs(m, &in);
  n_out = alma_model_num_outputs(m);
  if (n_in < 0) {
    probe_fail(ch, rec, alma__errorf(ALMA_ERR_NOMEM, "out of memory"), "model inputs");
    goto out;
  }
  cJSON *warns = cJSON_AddArrayToObject(rec, "warnings");
  if ((st = alma__batcher_new_ex(a->data, in, n_in, cfg->batch_size, cfg->seed, NULL, NULL, &b)) != ALMA_OK) {
    probe_fail(ch, rec, st, "preparing input data");
    goto out;
  }
  inputs = calloc((size_t)(n_in > 0 ? n_in : 1), sizeof *inputs);
  outs = calloc((size_t)(n_out > 0 ? n_out : 1), sizeof *outs);
  int64_t ns = 0;
  if (!inputs || !outs) {
    probe_fail(ch, rec, alma__errorf(ALMA_ERR_NOMEM, "out of memory"), "preparing input data");
    goto out;
  }
  if ((st = alma__batcher_next(b, inputs, &ns)) != ALMA_OK) {
    probe_fail(ch, rec, st, "reading the first batch");
    goto out;
  }
  if (n_in > 0 && ns <= 0) {
    char shp[160];
    alma__shape_str(inputs[0].rank, inputs[0].dims, shp, sizeof shp);
    probe_fail(ch, rec, alma__errorf(ALMA_ERR_SHAPE, "input '%s' is %s: a batch of 0 samples, nothing to time", in[0].name, shp),
               "preparing input data");
    goto out;
  }
  cJSON_AddItemToObject(rec, "inputs", io_json(m, 1, alma__batcher_shapes(b)));
  cJSON_AddNumberToObject(rec, "samples", (double)alma__batcher_samples(b));
  {
    double fl, by;  /* the roofline's model side: a model without cost rules has none */
    if (alma__model_cost(m, alma__batcher_shapes(b), n_in, &fl, &by) == ALMA_OK) {
      if (isfinite(fl)) cJSON_AddNumberToObject(rec, "flops_per_batch", fl);
      if (isfinite(by)) cJSON_AddNumberToObject(rec, "bytes_per_batch", by);
    }
    alma__error_clear();
  }
  cJSON_AddItemToObject(rec, "outputs", io_json(m, 0, NULL));

  if (cfg->check_outputs && a->ref_path) {
    alma__chan_line(ch, "step reference");
    alma_session_options so;
    alma_session_options_init(&so);
    so.threads = a->threads;
    st = alma_session_create(m, "EAGER", &so, &s);
    /* The reference sees what the conversions will see: pre-processed inputs. */
    alma_tensor *hin = calloc((size_t)(n_in > 0 ? n_in : 1), sizeof *hin);
    double pm, im, qm;
    if (st == ALMA_OK && !hin) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    if (st == ALMA_OK) st = hooked_run(cfg, s, inputs, hin, n_in, outs, n_out, &pm, &im, &qm);
    free(hin);
    if (st == ALMA_OK) st = ref_save(a->ref_path, outs, n_out);
    if (st != ALMA_OK) {
      char w[1400];
      snprintf(w, sizeof w, "no EAGER reference outputs, so no output check: %s: %s", alma_status_name(st), alma_last_error());
      cJSON_AddItemToArray(warns, cJSON_CreateString(w));
    } else {
      cJSON_AddBoolToObject(rec, "reference", 1);
    }
  }
  int any_calib = 0;
  for (int i = 0; i < a->n_conv; i++) any_calib |= calibrates(&a->conv[i]);
  if (any_calib && cfg->calibration_batches > 0 && cfg->cache) {
    /* After the reference: rewinding invalidates the views of batch 0. */
    char hex[65];
    if (hash_batches(b, n_in, cfg->calibration_batches, hex) == ALMA_OK) cJSON_AddStringToObject(rec, "calibration_sha256", hex);
    alma__error_clear();
  }
  char *text = cJSON_PrintUnformatted(rec);
  if (text) alma__chan_record(ch, text);
  else alma__chan_record(ch, "{\"error\":\"out of memory\",\"error_status\":\"ERR_NOMEM\"}");
  free(text);
out:
  cJSON_Delete(rec);
  if (outs) for (int i = 0; i < n_out; i++) alma_tensor_free_data(&outs[i]);
  free(outs);
  free(inputs);
  alma_session_free(s);
  alma__batcher_free(b);
  free(in);
  alma_model_free(owned);
}

/* ---- the parent --------------------------------------------------------------------------------- */
typedef struct {
  const alma_config *cfg;
  int index, count;
  const char *name;
  char phase[32];
  int64_t done, total;
} progress_ctx;

static void on_line(void *user, const char *line, double elapsed) {
  progress_ctx *p = user;
  if (line) {
    char ph[32];
    long long d, t;
    if (!strncmp(line, "step ", 5)) {
      snprintf(p->phase, sizeof p->phase, "%s", line + 5);
      p->done = p->total = 0;
    } else if (sscanf(line, "progress %31s %lld %lld", ph, &d, &t) == 3) {
      snprintf(p->phase, sizeof p->phase, "%s", ph);
      p->done = d;
      p->total = t;
    }
  }
  if (p->cfg->progress)
    p->cfg->progress(p->cfg->progress_user, p->index, p->count, p->name, p->phase, p->done, p->total, elapsed);
}

static void job_opts(const alma_config *cfg, progress_ctx *pc, alma__job_opts *o) {
  memset(o, 0, sizeof *o);
  o->isolate = cfg->multiprocessing;
  o->timeout_s = cfg->timeout_s;
  o->memory_limit_bytes = cfg->memory_limit_mb > 0   ? cfg->memory_limit_mb * ((int64_t)1 << 20)
                          : cfg->memory_limit_mb < 0 ? alma__default_memory_limit()
                                                     : 0;
  o->echo_stderr = cfg->verbose >= 2 || alma__log_level() >= ALMA_LOG_DEBUG;
  o->on_line = on_line;
  o->user = pc;
}

/* An outcome without a usable record becomes an error row with the whole story in its traceback. */
static void outcome_to_error(alma_result *r, const alma__job_outcome *oc) {
  r->status = ALMA_RESULT_ERROR;
  r->error_status = oc->status;
  char line[700];
  snprintf(line, sizeof line, "%s: %s", alma_status_name(oc->status), oc->reason);
  free(r->error);
  r->error = alma__strdup(line);
  free(r->failed_step);
  r->failed_step = alma__strdup(oc->last_step[0] ? oc->last_step : "start");
  size_t n = strlen(line) + (oc->stderr_tail ? strlen(oc->stderr_tail) : 0) + (oc->backtrace ? strlen(oc->backtrace) : 0) + 512;
  free(r->traceback);
  r->traceback = malloc(n);
  if (r->traceback)
    snprintf(r->traceback, n, "conversion %s: the child process failed during step '%s'\n%s\n%s%s%s%s",
             r->conversion ? r->conversion : "?", r->failed_step, line,
             oc->backtrace ? "--- native backtrace ---\n" : "", oc->backtrace ? oc->backtrace : "",
             oc->stderr_tail && *oc->stderr_tail ? "--- child stderr (last lines) ---\n" : "",
             oc->stderr_tail ? oc->stderr_tail : "");
  r->total_elapsed_s = oc->wall_s;
}

static alma_status hash_file(const char *path, char hex[65], int64_t *bytes) {
  FILE *f;
  ALMA_TRY(alma__fopen_regular(path, &f, NULL)); /* /dev/zero would never end, a FIFO never start */
  alma_sha256 *h = alma__sha256_new();
  if (!h) {
    fclose(f);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  enum { CHUNK = 1 << 16 };
  char *buf = malloc(CHUNK);
  size_t n;
  *bytes = 0;
  while (buf && (n = fread(buf, 1, CHUNK, f)) > 0) {
    alma__sha256_update(h, buf, n);
    *bytes += (int64_t)n;
  }
  fclose(f);
  free(buf);
  alma__sha256_final(h, hex);
  return ALMA_OK;
}

static void fill_io(alma__model_io **out, int *n_out, const cJSON *arr) {
  int n = cJSON_GetArraySize(arr);
  *out = calloc(n > 0 ? (size_t)n : 1, sizeof **out);
  *n_out = 0;
  if (!*out) return;
  const cJSON *it;
  cJSON_ArrayForEach(it, arr) {
    alma__model_io *io = &(*out)[(*n_out)++];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(it, "name");
    snprintf(io->name, sizeof io->name, "%s", cJSON_IsString(v) ? v->valuestring : "");
    v = cJSON_GetObjectItemCaseSensitive(it, "dtype");
    snprintf(io->dtype, sizeof io->dtype, "%s", cJSON_IsString(v) ? v->valuestring : "");
    v = cJSON_GetObjectItemCaseSensitive(it, "declared");
    snprintf(io->declared, sizeof io->declared, "%s", cJSON_IsString(v) ? v->valuestring : "");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape"), *d;
    io->rank = cJSON_GetObjectItemCaseSensitive(it, "rank") ? -1 : 0;
    if (io->rank == 0)
      cJSON_ArrayForEach(d, sh) if (io->rank < ALMA_MAX_RANK) io->dims[io->rank++] = (int64_t)d->valuedouble;
  }
}

static void remove_tmpdir(char *dir, const char *ref) {
  if (!dir[0]) return;
  if (ref) unlink(ref);
  rmdir(dir);
  dir[0] = 0;
}

/* "x:float32:[2,16];mask:bool:[2,8]": the inputs as fed, for the cache key. */
static void inputs_text(const alma__model_io *io, int n, char *buf, size_t cap) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < n; i++) {
    char shp[160];
    alma__shape_str(io[i].rank < 0 ? 0 : io[i].rank, io[i].dims, shp, sizeof shp);
    int w = snprintf(buf + len, cap - len, "%s%s:%s:%s", i ? ";" : "", io[i].name, io[i].dtype, io[i].rank < 0 ? "?" : shp);
    if (w < 0 || (size_t)w >= cap - len) break;
    len += (size_t)w;
  }
}

/* The options a conversion's build depends on: calibration (INT8_STATIC). Threads are not among
 * them: the cache keeps graphs, and runtime plans (which may depend on threads) are compiled anew
 * from them at every run. */
static void build_options(const alma_conversion *c, const alma_config *cfg, const char *data_desc, const char *calib_sha,
                          char *buf, size_t n) {
  buf[0] = 0;
  if (!calibrates(c)) return;
  int w = snprintf(buf, n, "calibrator=%s calibration_batches=%lld", cfg->calibrator[0] ? cfg->calibrator : "minmax",
                   (long long)cfg->calibration_batches);
  /* The data by name and by content (files rewritten under the same name, another loader): the
   * same calibration batches make the same build. */
  if (cfg->calibration_batches > 0 && w > 0 && (size_t)w < n)
    snprintf(buf + w, n - (size_t)w, " data=%s seed=%llu preprocess=%s calibration_sha256=%s",
             data_desc ? data_desc : "random", (unsigned long long)cfg->seed, cfg->preprocess ? "hook" : "none",
             calib_sha && *calib_sha ? calib_sha : "unknown");
}

/* The cache's side of one conversion run: after the job, store the build (or its failure) and the
 * benchmark record, and complete the result's cache info. */
static void cache_after(alma__cache *cache, const alma__cache_key *k, const alma__cache_plan *plan, alma_result *r,
                        const alma__job_outcome *oc) {
  const char *fs = r->failed_step;
  /* Nothing was built when the run failed before converting, or the runtime is unusable here. */
  int before = fs && (!strcmp(fs, "start") || !strcmp(fs, "load") || !strcmp(fs, "data"));
  int unavailable = r->status == ALMA_RESULT_UNAVAILABLE;
  int built = r->cache.status ? !strcmp(r->cache.status, "built") : !plan->use;
  if (!r->cache.status)
    alma__result_set_cache(r, built ? "built" : "hit", plan->reason, plan->stale, "", "", "", plan->build_s,
                           plan->graph_bytes);
  int64_t graph_bytes = r->cache.graph_bytes;
  double build_s = r->cache.build_s;
  /* A stored graph that crashed the process using it (the loader included), or whose outputs
   * failed the check, is dropped: otherwise every later run would fail the same way. */
  char why[400] = "";
  int used = plan->use && oc && strstr(oc->marks, "cached_graph");
  if (used && oc->status == ALMA_ERR_CRASH)
    snprintf(why, sizeof why, "quarantined: the process using it %.300s", oc->reason);
  else if (used && !built && r->check.performed && !r->check.passed)
    snprintf(why, sizeof why, "the output check failed on it (max abs error %.3g)", r->check.max_abs_err);
  if (why[0]) {
    if (alma__cache_drop_graph(cache, plan, why) == ALMA_OK)
      alma__result_warn(r, "cache: the stored graph was dropped (the next run rebuilds it): %s", why);
    alma__error_clear();
  }
  /* A graph file the child did not finish writing (killed meanwhile) is never stored. */
  if (plan->tmp_graph[0] && !(oc && strstr(oc->marks, "graph_saved"))) unlink(plan->tmp_graph);
  if (before || unavailable) {
    if (plan->tmp_graph[0]) unlink(plan->tmp_graph);
  } else {
    int ok = !(fs && !strcmp(fs, "convert"));
    /* The log: warnings, the error with its traceback, and what the child printed (passes' notes). */
    size_t n = 256 + (r->traceback ? strlen(r->traceback) : 0) + (oc && oc->stderr_tail ? strlen(oc->stderr_tail) : 0);
    for (int i = 0; i < r->n_warnings; i++) n += strlen(r->warnings[i]) + 16;
    char *log = malloc(n);
    if (log) {
      size_t len = 0;
      log[0] = 0;
      for (int i = 0; i < r->n_warnings; i++) len += (size_t)snprintf(log + len, n - len, "warning: %s\n", r->warnings[i]);
      if (r->traceback) len += (size_t)snprintf(log + len, n - len, "%s\n", r->traceback);
      if (oc && oc->stderr_tail && *oc->stderr_tail)
        snprintf(log + len, n - len, "--- output ---\n%s", oc->stderr_tail);
    }
    if (alma__cache_commit(cache, k, plan, built, ok, built ? r->convert_s : build_s, r->error, log, &graph_bytes) != ALMA_OK)
      alma__result_warn(r, "cache: %s", alma_last_error());
    free(log);
    if (built) build_s = r->convert_s;
  }
  char *status = alma__strdup(r->cache.status), *reason = alma__strdup(r->cache.reason);
  alma__result_set_cache(r, status, reason, r->cache.stale, k->name, plan->dir, k->key, build_s, graph_bytes);
  free(status);
  free(reason);
  if (before || unavailable) return;
  cJSON *rec = cJSON_CreateObject();
  char when[64] = "";
  time_t now = time(NULL);
  struct tm tmv;
  if (gmtime_r(&now, &tmv)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tmv);
  cJSON_AddStringToObject(rec, "recorded_at", when);
  cJSON_AddStringToObject(rec, "build", k->name);
  cJSON_AddStringToObject(rec, "model_path", k->model_path);
  cJSON_AddItemToObject(rec, "result", alma__result_to_cjson(r, 0));
  char *text = cJSON_Print(rec);
  cJSON_Delete(rec);
  if (!text || alma__cache_record_benchmark(cache, k, text) != ALMA_OK)
    alma__result_warn(r, "cache: the benchmark record could not be stored: %s", text ? alma_last_error() : "out of memory");
  free(text);
}

/* Runs the probe for one batch size: *pr gets its record (model facts, availability, reference).
 * Returns the failure (with the message set) when the model cannot be examined. */
static alma_status run_probe(job_args *ja, progress_ctx *pc, const alma__job_opts *jo, cJSON **pr, char **load_warnings) {
  alma__job_outcome oc;
  *pr = NULL;
  *load_warnings = NULL;
  pc->index = 0;
  pc->name = "(model)";
  alma_status st = alma__job_run(probe, ja, jo, &oc);
  cJSON *rec = st == ALMA_OK && oc.status == ALMA_OK ? cJSON_Parse(oc.record) : NULL;
  if (st == ALMA_OK && oc.status != ALMA_OK) {
    st = alma__errorf(oc.status, "examining the model failed: %s%s%s%s%s", oc.reason,
                      oc.backtrace ? "\n--- native backtrace ---\n" : "", oc.backtrace ? oc.backtrace : "",
                      oc.stderr_tail && *oc.stderr_tail ? "\n--- stderr ---\n" : "", oc.stderr_tail ? oc.stderr_tail : "");
  } else if (st == ALMA_OK && !rec) {
    st = alma__errorf(ALMA_ERR_INTERNAL, "examining the model: unreadable record");
  } else if (rec && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(rec, "error"))) {
    const cJSON *es = cJSON_GetObjectItemCaseSensitive(rec, "error_status");
    alma_status code = ALMA_ERR_INVALID_MODEL;
    for (int s = 1; cJSON_IsString(es) && s < ALMA_STATUS_COUNT; s++)
      if (!strcmp(alma_status_name((alma_status)s), es->valuestring)) code = (alma_status)s;
    st = alma__errorf(code, "%s", cJSON_GetObjectItemCaseSensitive(rec, "error")->valuestring);
  }
  /* The library's own warnings while loading the model (newer opset, ...) would otherwise stay in
   * the probe's captured stderr: they go to every result. */
  if (st == ALMA_OK && oc.stderr_tail) *load_warnings = alma__strdup(oc.stderr_tail);
  alma__job_outcome_free(&oc);
  if (st != ALMA_OK) {
    cJSON_Delete(rec);
    return st;
  }
  *pr = rec;
  return ALMA_OK;
}

/* After the first probe: as many labels as the data has samples, and every label a class of the
 * first output when its last axis is known statically (else each conversion checks at run time). */
static alma_status check_labels(const char *path, int64_t n_labels, int64_t max_label, const cJSON *pr) {
  const cJSON *ns = cJSON_GetObjectItemCaseSensitive(pr, "samples");
  int64_t samples = cJSON_IsNumber(ns) ? (int64_t)ns->valuedouble : -1;
  if (samples != n_labels)
    return alma__errorf(ALMA_ERR_SHAPE, "labels '%s': %lld labels for %lld samples in the data: one class id per sample, in data order",
                        path, (long long)n_labels, (long long)samples);
  const cJSON *out = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(pr, "outputs"), 0);
  if (!out) return alma__errorf(ALMA_ERR_INVALID_MODEL, "labels '%s': the model has no output to take top-1 from", path);
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(out, "shape"), *name = cJSON_GetObjectItemCaseSensitive(out, "name");
  int rank = cJSON_IsArray(shape) && !cJSON_GetObjectItemCaseSensitive(out, "rank") ? cJSON_GetArraySize(shape) : -1;
  const cJSON *last = rank > 0 ? cJSON_GetArrayItem(shape, rank - 1) : NULL;
  int64_t classes = cJSON_IsNumber(last) ? (int64_t)last->valuedouble : -1;
  const char *nm = cJSON_IsString(name) ? name->valuestring : "?";
  if (rank == 0)
    return alma__errorf(ALMA_ERR_SHAPE, "labels '%s': the first output '%s' is a scalar, not class scores per sample", path, nm);
  if (classes >= 0 && max_label >= classes)
    return alma__errorf(ALMA_ERR_SHAPE, "labels '%s': label %lld is not a class of the first output '%s', whose last axis has %lld entries",
                        path, (long long)max_label, nm, (long long)classes);
  return ALMA_OK;
}

/* top1_drop of every result from `from` on (one batch size) against the first of them without a
 * lossy step that measured accuracy: fp32 EAGER when it is in the list. */
static void set_baselines(alma_results *rs, int from, const alma_conversion *conv, int n_conv) {
  const alma_result *base = NULL;
  for (int i = from; i < rs->n && !base; i++) {
    const alma_result *x = &rs->items[i];
    for (int c = 0; x->acc.samples > 0 && c < n_conv; c++)
      if (x->conversion && !strcmp(conv[c].name, x->conversion)) {
        if (!is_lossy(&conv[c])) base = x;
        break;
      }
  }
  for (int i = from; i < rs->n; i++) {
    alma_result *x = &rs->items[i];
    if (x->acc.samples > 0)
      alma__result_set_baseline(x, base ? base->conversion : "", base ? base->acc.top1 - x->acc.top1 : NAN);
  }
}

/* One repeat's result r (from the sweep's run run_index) into its row: the first starts the row's
 * list of runs; a later one is folded in, or, when it failed, turns the row into its error. */
static void fold_repeat(alma_results *rs, int row_index, alma_result *r, int rep, int n_rep, int run_index) {
  alma_result *row = &rs->items[row_index];
  alma_status st = ALMA_OK;
  if (rep == 0) {
    if (row->status == ALMA_RESULT_OK) st = alma__repeat_start(row, run_index);
  } else if (r->status == ALMA_RESULT_OK) {
    st = alma__repeat_add(row, r, run_index);
  } else {
    alma__result_clear(row);
    *row = *r;  /* moved: r is left empty */
    alma__result_init(r);
    alma__result_warn(row, "repeat %d of %d failed; the earlier repeats are dropped", rep + 1, n_rep);
    return;
  }
  if (st != ALMA_OK) {
    alma__result_warn(row, "repeats: %s", alma_last_error());
    alma__error_clear();
  }
}

static void finish_repeats(alma_result *row, uint64_t seed) {
  if (alma__repeat_finish(row, seed) != ALMA_OK) {
    alma__result_warn(row, "repeats: %s", alma_last_error());
    alma__error_clear();
    return;
  }
  const alma_repeat_stats *s = &row->rep;
  if (s->k >= 2 && isfinite(s->spread) && s->spread > 0.05)
    alma__result_warn(row, "between processes: the %d repeats' medians range %.4g..%.4g ms (spread %.1f%% of the median "
                      "of medians)%s", s->k, s->min_ms, s->max_ms, 100 * s->spread,
                      s->n_disturbed ? ", disturbed repeats among them" : "");
}

static alma_status bench_common(const char *path, const alma_model *model, const alma_config *config,
                                const char *const *names, int n_names, alma_data *data, alma_results **out) {
  if (!out) return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_benchmark_model: results_out is NULL");
  *out = NULL;
  if (!path && !model) return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_benchmark_model: no model given");
  if (n_names < 0 || n_names > MAX_CONVERSIONS)
    return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_benchmark_model: %d conversions (0..%d)", n_names, MAX_CONVERSIONS);
  alma_config dflt;
  if (!config) {
    alma_config_init(&dflt);
    config = &dflt;
  }
  /* A struct filled by hand gets the same checks as alma_config_set. */
  const char *key;
  char val[ALMA__CONFIG_VALUE_MAX], type;
  for (int i = 0; alma__config_entry(config, i, &key, val, sizeof val, &type); i++) {
    alma_config tmp = *config;
    ALMA_TRY(alma_config_set(&tmp, key, val));
  }
  int64_t bsv[64], lst[64];
  int nbs = 1;
  bsv[0] = config->batch_size;
  if (config->batch_sizes[0] && (nbs = alma__config_list("batch_sizes", config->batch_sizes, 0, bsv, 64)) < 0)
    return ALMA_ERR_INVALID_ARG;
  if (!strcmp(config->scenario, "server") && !(config->latency_bound_ms > 0))
    return alma__errorf(ALMA_ERR_INVALID_ARG,
                        "scenario server needs latency_bound_ms > 0 (--latency-bound-ms): the bound its percentile "
                        "latency is held to");
  if (config->throughput || strcmp(config->scenario, "single_stream")) {
    int64_t wl[64];
    int ni = alma__config_list("instances", config->instances, alma__physical_cores(), lst, 64);
    int nw = ni < 0 ? -1 : alma__config_list("workers", config->workers, 0, wl, 64);
    if (ni < 0 || nw < 0) return ALMA_ERR_INVALID_ARG;
    /* Each session is a thread of the child: thousands only fail to start (lists are ascending). */
    if (lst[ni - 1] * wl[nw - 1] > MAX_SESSIONS)
      return alma__errorf(ALMA_ERR_INVALID_ARG,
                          "instances %lld x workers %lld = %lld sessions, each a thread: at most %d",
                          (long long)lst[ni - 1], (long long)wl[nw - 1], (long long)(lst[ni - 1] * wl[nw - 1]),
                          MAX_SESSIONS);
  }
  alma__rebuild policy;
  ALMA_TRY(alma__rebuild_parse(config->rebuild, &policy));
  /* Labels belong to a data set with a known number of samples, in order. */
  int64_t *labels = NULL, n_labels = 0, max_label = -1;
  if (config->labels[0]) {
    const char *kind = alma_data_kind(data);
    if (!strcmp(kind, "random"))
      return alma__errorf(ALMA_ERR_INVALID_ARG,
                          "labels '%s' need the data set they label (--data: .npy, IDX or a batch directory): random "
                          "inputs have no labels",
                          config->labels);
    if (!strcmp(kind, "loader"))
      return alma__errorf(ALMA_ERR_UNSUPPORTED,
                          "labels '%s' with a data loader: alma cannot count a loader's samples; give the data as "
                          ".npy/IDX files or a batch directory",
                          config->labels);
    ALMA_TRY(alma__labels_load(config->labels, &labels, &n_labels, &max_label));
  }

  /* Conversions are parsed before anything runs: an unknown name fails the whole call. */
  alma_conversion *conv = calloc(MAX_CONVERSIONS, sizeof *conv);
  if (!conv) {
    free(labels);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  int n_conv = 0, all = !names || n_names == 0;
  if (all) {
    for (int i = 0; i < alma__preset_count() && n_conv < MAX_CONVERSIONS; i++)
      if (alma__conversion_parse(alma__preset_at(i)->name, &conv[n_conv]) == ALMA_OK) n_conv++;
  } else {
    for (int i = 0; i < n_names; i++) {
      alma_status st = alma__conversion_parse(names[i], &conv[n_conv]);
      if (st != ALMA_OK) {
        free(conv);
        free(labels);
        return st;
      }
      n_conv++;
    }
  }

  alma_results *rs = calloc(1, sizeof *rs);
  if (!rs) {
    free(conv);
    free(labels);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  double t_sweep = alma__bench_now();
  alma__system_info_basic(&rs->system);
  rs->config = *config;
  rs->config.progress = NULL;
  rs->config.progress_user = NULL;
  rs->config.preprocess = NULL;
  rs->config.postprocess = NULL;
  rs->config.hook_user = NULL;
  rs->model_path = alma__strdup(path ? path : "");
  char dd[1024];
  rs->data_desc = alma__strdup(alma__data_describe(data, dd, sizeof dd));
  alma_status st = ALMA_OK;
  if (path && (st = hash_file(path, rs->model_file_sha256, &rs->model_file_bytes)) != ALMA_OK) {
    alma_results_free(rs);
    free(conv);
    free(labels);
    return st;
  }

  /* The build cache: a directory that cannot be used turns it off, with a warning on each result. */
  alma__cache *cache = NULL;
  char cache_off[700] = "";
  alma__cache_key ckey;
  alma__cache_key_init(&ckey);
  if (config->cache && alma__cache_open(config->cache_dir, &cache) != ALMA_OK)
    snprintf(cache_off, sizeof cache_off, "cache off: %s", alma_last_error());
  if (path && !realpath(path, ckey.model_path)) snprintf(ckey.model_path, sizeof ckey.model_path, "%s", path);

  job_args ja = {.model_path = path, .model = model, .cfg = config, .data = data, .n_conv = n_conv, .conv = conv,
                 .labels = labels, .n_labels = n_labels, .batch_suffix = nbs > 1};
  ja.threads = config->threads > 0 ? config->threads : alma__physical_cores();
  char tmpdir[512] = "", ref[600] = "";
  if (config->check_outputs && !config->build_only) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/alma-bench-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
      ALMA_LOGW("cannot create a temporary directory (%s): outputs will not be checked", strerror(errno));
      tmpdir[0] = 0;
    } else {
      snprintf(ref, sizeof ref, "%s/reference.bin", tmpdir);
    }
  }

  progress_ctx pc = {.cfg = config, .index = 0, .count = n_conv, .name = "(model)"};
  alma__job_opts jo, probe_jo;
  job_opts(config, &pc, &jo);
  /* memory_limit_mb bounds the conversions, not the probe: a limit too tight for the model gives
   * error rows (out of memory) rather than a failed look at the model. The default (the machine's
   * memory) bounds the probe too: beyond it is the kernel's OOM killer. */
  probe_jo = jo;
  probe_jo.memory_limit_bytes = config->memory_limit_mb < 0 ? jo.memory_limit_bytes : 0;
  /* Likewise timeout_s: a timeout set for the conversions (`--timeout 1`) is no bound for the look
   * at the model, which also asks each runtime whether it can run here (ORT starts an interpreter:
   * over a second on a busy machine). The probe keeps a bound, never under a minute. */
  if (probe_jo.timeout_s > 0 && probe_jo.timeout_s < 60) probe_jo.timeout_s = 60;
  alma__job_outcome oc;
  alma_status first_failure = ALMA_OK;
  int index = 0, stop = 0, count = 0;
  int n_rep = config->repeat > 1 ? config->repeat : 1, run_index = 0;
  for (int ib = 0; ib < nbs && !stop && st == ALMA_OK; ib++) {
    alma_config cb = *config;
    cb.batch_size = bsv[ib];
    ja.cfg = &cb;
    ja.ref_path = ref[0] ? ref : NULL;
    pc.cfg = &cb;
    cJSON *pr = NULL;
    char *load_warnings = NULL;
    if ((st = run_probe(&ja, &pc, &probe_jo, &pr, &load_warnings)) == ALMA_OK && ib == 0 && labels)
      st = check_labels(config->labels, n_labels, max_label, pr);
    if (st != ALMA_OK) {
      if (ib == 0) {
        cJSON_Delete(pr);
        free(load_warnings);
        remove_tmpdir(tmpdir, ref);
        alma__cache_close(cache);
        alma_results_free(rs);
        free(conv);
        free(labels);
        return st;
      }
      /* A later batch size the model cannot take: the sweep ends here, with what it has. */
      break;
    }
    alma__model_io *io = NULL;
    int n_io = 0;
    fill_io(&io, &n_io, cJSON_GetObjectItemCaseSensitive(pr, "inputs"));
    if (ib == 0) {
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(pr, "hash");
      if (cJSON_IsString(v)) snprintf(rs->model_hash, sizeof rs->model_hash, "%s", v->valuestring);
      v = cJSON_GetObjectItemCaseSensitive(pr, "runtimes");
      if (cJSON_IsString(v)) snprintf(rs->system.runtimes, sizeof rs->system.runtimes, "%s", v->valuestring);
      fill_io(&rs->inputs, &rs->n_inputs, cJSON_GetObjectItemCaseSensitive(pr, "inputs"));
      fill_io(&rs->outputs, &rs->n_outputs, cJSON_GetObjectItemCaseSensitive(pr, "outputs"));
      snprintf(ckey.model_hash, sizeof ckey.model_hash, "%s", rs->model_hash);
      if (!config->build_only) alma__results_measure_peak(rs, cache, config);
    }
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pr, "reference"))) ja.ref_path = NULL;
    const cJSON *sweep_warnings = cJSON_GetObjectItemCaseSensitive(pr, "warnings");
    const cJSON *avail = cJSON_GetObjectItemCaseSensitive(pr, "available");
    if (ib == 0) {
      if (all && !rs->unavailable) rs->unavailable = calloc((size_t)n_conv + 1, sizeof *rs->unavailable);
      rs->probed = all && rs->unavailable;
      for (int i = 0; i < n_conv; i++) {
        const cJSON *a = cJSON_GetArrayItem(avail, i);
        int ok = a && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "ok"));
        count += ok || !all;
        if (!ok && rs->probed) {
          const cJSON *why = a ? cJSON_GetObjectItemCaseSensitive(a, "reason") : NULL;
          rs->unavailable[rs->n_unavailable].id = conv[i].id;
          rs->unavailable[rs->n_unavailable++].reason =
              alma__strdup(cJSON_IsString(why) && why->valuestring[0] ? why->valuestring : "unavailable");
        }
      }
      count *= nbs * n_rep;
    }
    int first_result = rs->n;
    /* Repeats run interleaved, A B C A B C ...: drift over the minutes hits every conversion
     * alike. The first repeat makes the row; later ones run in a scratch result folded into it. */
    int *row_of = malloc(((size_t)n_conv + 1) * sizeof *row_of);
    if (!row_of) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    for (int i = 0; row_of && i < n_conv; i++) row_of[i] = -1;
    alma_result scratch;
    alma__result_init(&scratch);
    for (int rep = 0; rep < n_rep && !stop && st == ALMA_OK; rep++)
    for (int i = 0; i < n_conv && !stop; i++) {
      const cJSON *a = cJSON_GetArrayItem(avail, i);
      int ok = a && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "ok"));
      if (!ok && all) continue;  /* "every conversion available here" */
      alma_result *r;
      if (rep == 0) {
        r = alma__results_add(rs);
        if (!r) {
          st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
          break;
        }
        row_of[i] = rs->n - 1;
      } else {
        /* an unavailable or failed row is not run again */
        if (row_of[i] < 0 || rs->items[row_of[i]].status != ALMA_RESULT_OK) continue;
        alma__result_clear(&scratch);
        r = &scratch;
      }
      index++;
      r->conversion = alma__strdup(conv[i].name);
      r->id = conv[i].id;
      r->batch_size = cb.batch_size;
      snprintf(r->device, sizeof r->device, "%s", runtime_device(conv[i].runtime));
      if (!ok) {
        const cJSON *why = a ? cJSON_GetObjectItemCaseSensitive(a, "reason") : NULL;
        r->status = ALMA_RESULT_UNAVAILABLE;
        r->error_status = ALMA_ERR_UNAVAILABLE;
        r->error = alma__strdup(cJSON_IsString(why) ? why->valuestring : "unavailable");
        if (first_failure == ALMA_OK) first_failure = ALMA_ERR_UNAVAILABLE;
        continue;
      }
      /* What the cache holds for this conversion at these input shapes. */
      alma__cache_plan plan;
      int cached = 0;
      if (cache) {
        snprintf(ckey.conversion, sizeof ckey.conversion, "%s", conv[i].name);
        inputs_text(io, n_io, ckey.inputs, sizeof ckey.inputs);
        const cJSON *csha = cJSON_GetObjectItemCaseSensitive(pr, "calibration_sha256");
        build_options(&conv[i], &cb, rs->data_desc, cJSON_IsString(csha) ? csha->valuestring : NULL, ckey.options,
                      sizeof ckey.options);
        alma__cache_key_finish(&ckey);
        if (alma__cache_plan_build(cache, &ckey, policy, cb.lean_cache, &plan) == ALMA_OK) cached = 1;
        else snprintf(cache_off, sizeof cache_off, "cache off: %s", alma_last_error());
      }
      ja.plan = cached ? &plan : NULL;
      pc.index = index;
      pc.count = count;
      pc.name = conv[i].name;
      pc.phase[0] = 0;
      ja.one = &conv[i];
      alma__job_opts cjo = jo;
      /* A GPU runtime maps device memory into the address space: the default limit is for CPUs. */
      if (config->memory_limit_mb < 0 && !strcmp(runtime_device(conv[i].runtime), "cuda")) cjo.memory_limit_bytes = 0;
      if (alma__job_run(worker, &ja, &cjo, &oc) != ALMA_OK) {
        /* Could not even start (fork/pipe failure): that is this conversion's error. */
        oc.status = ALMA_ERR_RUNTIME;
        snprintf(oc.reason, sizeof oc.reason, "%s", alma_last_error());
      }
      cJSON *rec = oc.status == ALMA_OK ? cJSON_Parse(oc.record) : NULL;
      if (rec && alma__result_from_cjson(rec, r) == ALMA_OK) {
        if (!r->conversion) {  /* a short record (the child ran out of memory writing its own) */
          r->conversion = alma__strdup(conv[i].name);
          r->id = conv[i].id;
        }
        if (oc.reason[0]) alma__result_warn(r, "the child process %s", oc.reason);
      } else {
        if (oc.status == ALMA_OK) {
          oc.status = ALMA_ERR_INTERNAL;
          snprintf(oc.reason, sizeof oc.reason, "unreadable result record");
        }
        if (!r->conversion) r->conversion = alma__strdup(conv[i].name);
        r->id = conv[i].id;
        outcome_to_error(r, &oc);
      }
      cJSON_Delete(rec);
      if (r->batch_size <= 0) r->batch_size = cb.batch_size;
      {
        const cJSON *fl = cJSON_GetObjectItemCaseSensitive(pr, "flops_per_batch");
        const cJSON *by = cJSON_GetObjectItemCaseSensitive(pr, "bytes_per_batch");
        r->flops_per_batch = cJSON_IsNumber(fl) ? fl->valuedouble : NAN;
        r->bytes_per_batch = cJSON_IsNumber(by) ? by->valuedouble : NAN;
      }
      const cJSON *w;
      cJSON_ArrayForEach(w, sweep_warnings) if (cJSON_IsString(w)) alma__result_warn(r, "%s", w->valuestring);
      for (const char *p = load_warnings; p && (p = strstr(p, "alma: warning: ")); p++) {
        const char *e = strchr(p, '\n');
        int len = e ? (int)(e - p) : (int)strlen(p);
        alma__result_warn(r, "model: %.*s", len - 15, p + 15);
      }
      if (cached) cache_after(cache, &ckey, &plan, r, &oc);
      else if (config->cache) {
        alma__result_set_cache(r, "off", cache_off, 0, "", "", "", NAN, -1);
        alma__result_warn(r, "%s", cache_off);
      }
      alma__job_outcome_free(&oc);
      /* Give the parsed record's memory back: the next child inherits our resident pages, and they
       * would count in its peak RSS. */
      malloc_trim(0);
      if (pc.phase[0] || config->progress) on_line(&pc, "step done", 0);
      if (strcmp(r->device, config->device) && r->status == ALMA_RESULT_OK)
        alma__result_warn(r, "ran on %s although device is %s (allow_device_override)", r->device, config->device);
      if (r->status != ALMA_RESULT_OK) {
        if (first_failure == ALMA_OK) first_failure = r->error_status != ALMA_OK ? r->error_status : ALMA_ERR_RUNTIME;
        if (config->fail_on_error) stop = 1;
      }
      if (alma__interrupted()) stop = 1; /* SIGINT/SIGTERM/SIGHUP: what ran is reported, no more */
      if (n_rep > 1) fold_repeat(rs, row_of[i], r, rep, n_rep, run_index);
      run_index++;
    }
    for (int i = 0; row_of && i < n_conv && n_rep > 1; i++) {
      alma_result *row = row_of[i] >= 0 ? &rs->items[row_of[i]] : NULL;
      if (row && row->status == ALMA_RESULT_OK && row->rep.k > 0) finish_repeats(row, config->seed);
    }
    alma__result_clear(&scratch);
    free(row_of);
    set_baselines(rs, first_result, conv, n_conv);
    free(io);
    cJSON_Delete(pr);
    free(load_warnings);
  }
  free(labels);
  int probe_failed = st != ALMA_OK && rs->n > 0;
  remove_tmpdir(tmpdir, ref);
  alma__cache_close(cache);
  free(conv);
  rs->total_s = alma__bench_now() - t_sweep;
  *out = rs;
  if (probe_failed) return alma__error_prefix(st, "batch size sweep: ");
  if (st != ALMA_OK) return st;
  if (first_failure != ALMA_OK) {
    const alma_result *f = NULL;
    for (int i = 0; i < rs->n && !f; i++)
      if (rs->items[i].status != ALMA_RESULT_OK) f = &rs->items[i];
    return alma__errorf(first_failure, "conversion %s failed: %s", f ? f->conversion : "?", f && f->error ? f->error : "");
  }
  alma__error_clear();
  return ALMA_OK;
}

alma_status(alma_benchmark_model)(const char *model_path, const alma_config *config, const char *const *conversions,
                                  int n_conversions, alma_data *data, alma_results **results_out) {
  if (!model_path || !*model_path) {
    if (results_out) *results_out = NULL;
    return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_benchmark_model: empty model path");
  }
  return bench_common(model_path, NULL, config, conversions, n_conversions, data, results_out);
}

alma_status alma_benchmark_loaded_model(const alma_model *model, const alma_config *config,
                                        const char *const *conversions, int n_conversions, alma_data *data,
                                        alma_results **results_out) {
  if (!model) {
    if (results_out) *results_out = NULL;
    return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_benchmark_loaded_model: NULL model");
  }
  return bench_common(NULL, model, config, conversions, n_conversions, data, results_out);
}
