/* ONNX Runtime's contrib operators of transformer LLMs, as onnxruntime-genai's model builder and ONNX
 * Runtime's transformer optimizer write them (int4 and float LLMs beside MatMulNBits):
 *   SimplifiedLayerNormalization     RMSNorm (ONNX domain, version 1: ONNX Runtime registers it there)
 *   SkipSimplifiedLayerNormalization residual add (+ bias) then RMSNorm, the sum as optional output
 *   SkipLayerNormalization           residual add (+ bias) then LayerNorm
 *   RotaryEmbedding                  RoPE with position_ids and cos/sin caches
 *   GroupQueryAttention              the builder's attention: KV cache in BNSH, seqlens_k, optional RoPE
 *
 * The meaning is ONNX Runtime's contrib schemas (docs/ContribOperators.md) and its CPU kernels (1.32):
 *  - The normalizations compute each row in one higher precision and round once to the output type
 *    (ONNX Runtime's kernels compute float16 rows in float32 and round the result once; the ONNX
 *    RMSNormalization function body instead rounds the normalized value to X's type before the scale,
 *    so its kernel in transformer.c is not reused). alma sums in double; ONNX Runtime sums float32
 *    rows in float32 and takes LayerNorm's variance as E[x^2] - mean^2: the two agree to float32
 *    rounding (tests/ops_llm measures it).
 *  - RotaryEmbedding rotates the first rotary_embedding_dim elements of each head and copies the rest;
 *    position_ids of one element is the position of the first token (then +1 per token). ONNX
 *    Runtime's CPU kernel ignores scale and is_packed_batching (they only matter to its GPU kernels
 *    when the caches must be extended); alma accepts and ignores them too.
 *  - GroupQueryAttention: see the section below.
 * Inputs of float16 or bfloat16 are computed through float32 copies; EAGER is single-threaded (the BLAS
 * and DNNL runtimes run GroupQueryAttention and the Skip normalizations on their threads, see
 * contrib_llm.h and contrib_bert.h). */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "ops/contrib_bert.h" /* alma__skip_norm_exec_par */
#include "ops/contrib_llm.h"
#include "ops/nn_util.h"
#include "ops/op_args.h"
#include "ops/sgemm.h"
#include "ops/softmax_row.h"

static int llm_float(alma_dtype t) {
  return t == ALMA_DTYPE_FLOAT32 || t == ALMA_DTYPE_FLOAT16 || t == ALMA_DTYPE_BFLOAT16;
}

/* Row i of t (cols values from element off) as doubles: float32 directly, other types element-wise. */
static void load_row(const alma_tensor *t, int64_t off, int64_t cols, double *dst) {
  if (t->dtype == ALMA_DTYPE_FLOAT32) {
    const float *s = (const float *)t->data + off;
    for (int64_t j = 0; j < cols; j++) dst[j] = s[j];
  } else {
    for (int64_t j = 0; j < cols; j++) dst[j] = alma__get_f64(t->data, t->dtype, off + j);
  }
}
static void store_row(alma_tensor *t, int64_t off, int64_t cols, const double *src) {
  if (t->dtype == ALMA_DTYPE_FLOAT32) {
    float *d = (float *)t->data + off;
    for (int64_t j = 0; j < cols; j++) d[j] = (float)src[j];
  } else {
    for (int64_t j = 0; j < cols; j++) alma__set_f64(t->data, t->dtype, off + j, src[j]);
  }
}

/* ==== normalizations =========================================================================== */

typedef struct {
  int64_t rows, cols;
  int simplified;   /* RMSNorm: no mean subtracted, no beta */
  double eps;
  const alma_tensor *x, *skip, *gamma, *beta, *bias;
  int64_t skip_rows; /* rows of skip before it repeats (broadcast over the batch) */
} norm_job;

/* y = (v - mean) / sqrt(var + eps) * gamma + beta, v = x + skip + bias; or, simplified,
 * y = v / sqrt(mean(v^2) + eps) * gamma. out[1], out[2] (mean, inv_std_var) get one value a row
 * where wanted, out[3] (the sum v) likewise; outk < 0 means not produced by this op. */
/* rows [r0, r1), v a scratch of 4 * cols doubles */
static void norm_rows(const norm_job *j, int64_t r0, int64_t r1, alma_tensor *y, alma_tensor *mean_out,
                      alma_tensor *inv_out, alma_tensor *sum_out, double *v) {
  int64_t C = j->cols;
  double *t = v + C, *g = v + 2 * C, *b = v + 3 * C;
  load_row(j->gamma, 0, C, g);
  if (j->beta) load_row(j->beta, 0, C, b);
  else memset(b, 0, (size_t)C * sizeof *b);
  for (int64_t r = r0; r < r1; r++) {
    load_row(j->x, r * C, C, v);
    if (j->skip) {
      load_row(j->skip, (r % j->skip_rows) * C, C, t);
      for (int64_t c = 0; c < C; c++) v[c] += t[c];
    }
    if (j->bias) {
      load_row(j->bias, 0, C, t);
      for (int64_t c = 0; c < C; c++) v[c] += t[c];
    }
    if (sum_out) {
      /* the sum is a T tensor: round it first, and normalize that rounded sum as ONNX Runtime does */
      store_row(sum_out, r * C, C, v);
      if (sum_out->dtype != ALMA_DTYPE_FLOAT32) load_row(sum_out, r * C, C, v);
      else for (int64_t c = 0; c < C; c++) v[c] = (float)v[c];
    }
    double mean = 0, ms = 0;
    if (!j->simplified) {
      for (int64_t c = 0; c < C; c++) mean += v[c];
      mean /= (double)C;
    }
    for (int64_t c = 0; c < C; c++) ms += (v[c] - mean) * (v[c] - mean);
    double inv = 1.0 / sqrt(ms / (double)C + j->eps);
    for (int64_t c = 0; c < C; c++) t[c] = (v[c] - mean) * inv * g[c] + b[c];
    store_row(y, r * C, C, t);
    if (mean_out) alma__set_f64(mean_out->data, mean_out->dtype, r, mean);
    if (inv_out) alma__set_f64(inv_out->data, inv_out->dtype, r, inv);
  }
}

/* Rows per item of the parallel normalizations (fixed: every row is computed alone, so the split
 * changes nothing in the results). */
#define NORM_ROWS 16

typedef struct {
  const norm_job *j;
  alma_tensor *y, *mean_out, *inv_out, *sum_out;
  atomic_int failed;
} norm_par;

static void norm_item(void *arg, int64_t item) {
  norm_par *P = arg;
  int64_t r0 = item * NORM_ROWS, r1 = r0 + NORM_ROWS < P->j->rows ? r0 + NORM_ROWS : P->j->rows;
  double *v = malloc((size_t)P->j->cols * 4 * sizeof *v);
  if (!v) {
    atomic_store(&P->failed, 1);
    return;
  }
  norm_rows(P->j, r0, r1, P->y, P->mean_out, P->inv_out, P->sum_out, v);
  free(v);
}

/* every row: in order on the calling thread, or in items run by pf */
static alma_status norm_run_par(const alma_node *n, const norm_job *j, alma_tensor *y, alma_tensor *mean_out,
                                alma_tensor *inv_out, alma_tensor *sum_out, int threads, alma__nbits_parfor pf,
                                void *pctx) {
  int64_t items = (j->rows + NORM_ROWS - 1) / NORM_ROWS;
  if (pf && threads > 1 && items > 1) {
    norm_par P = {.j = j, .y = y, .mean_out = mean_out, .inv_out = inv_out, .sum_out = sum_out};
    atomic_init(&P.failed, 0);
    pf(pctx, items, norm_item, &P);
    return atomic_load(&P.failed) ? alma__op_error(n, ALMA_ERR_NOMEM, "out of memory for a row") : ALMA_OK;
  }
  double *v = alma__nn_alloc(n, (size_t)j->cols * 4, sizeof *v);
  if (!v) return ALMA_ERR_NOMEM;
  norm_rows(j, 0, j->rows, y, mean_out, inv_out, sum_out, v);
  free(v);
  return ALMA_OK;
}

static alma_status norm_run(const alma_node *n, const norm_job *j, alma_tensor *y, alma_tensor *mean_out,
                            alma_tensor *inv_out, alma_tensor *sum_out) {
  return norm_run_par(n, j, y, mean_out, inv_out, sum_out, 1, NULL, NULL);
}

static alma_status check_vec(const alma_node *n, const alma_tensor *t, const char *what, const alma_tensor *x,
                             int64_t C) {
  char s1[128];
  if (!t) return ALMA_OK;
  if (!llm_float(t->dtype) && t->dtype != ALMA_DTYPE_FLOAT64)
    return alma__op_error(n, ALMA_ERR_TYPE, "%s of dtype %s (float expected)", what, alma_dtype_name(t->dtype));
  if (t->dtype != x->dtype)
    return alma__op_error(n, ALMA_ERR_TYPE, "%s of dtype %s (input is %s)", what, alma_dtype_name(t->dtype),
                          alma_dtype_name(x->dtype));
  if (t->rank != 1 || t->dims[0] != C)
    return alma__op_error(n, ALMA_ERR_SHAPE, "%s of shape %s (expected [%lld], the hidden size)", what,
                          alma__shape_str(t->rank, t->dims, s1, sizeof s1), (long long)C);
  return ALMA_OK;
}

/* ---- SimplifiedLayerNormalization (ONNX domain, version 1 in ONNX Runtime) ----------------------
 * Y = X / sqrt(mean(X^2 over axes [axis, rank)) + epsilon) * scale; inv_std_var of shape X's dims
 * with those axes 1. T (X) and V (scale, Y) may differ; stash_type 1 (float) is what ONNX Runtime's
 * CPU kernel computes in, whatever it says (it ignores the attribute), and alma the same. */

typedef struct {
  int axis;
  int64_t rows, cols;
} sln_shape;

static alma_status sln_setup(const alma_node *n, const alma_tensor *const *in, sln_shape *s) {
  char s1[128], s2[128];
  const alma_tensor *x = in[0], *sc = in[1];
  if (!llm_float(x->dtype) && x->dtype != ALMA_DTYPE_FLOAT64)
    return alma__op_error(n, ALMA_ERR_TYPE, "X of dtype %s (float16, float, double or bfloat16)",
                          alma_dtype_name(x->dtype));
  if (!llm_float(sc->dtype) && sc->dtype != ALMA_DTYPE_FLOAT64)
    return alma__op_error(n, ALMA_ERR_TYPE, "scale of dtype %s (float16, float, double or bfloat16)",
                          alma_dtype_name(sc->dtype));
  if (x->rank < 1) return alma__op_error(n, ALMA_ERR_SHAPE, "X is a scalar (rank >= 1 expected)");
  int64_t axis = alma__attr_i(n, "axis", -1), st = alma__attr_i(n, "stash_type", 1);
  if (axis < -x->rank || axis >= x->rank)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis=%lld out of range for X of rank %d", (long long)axis, x->rank);
  if (st != 1 && st != 11)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "stash_type=%lld (1 float or 11 double)", (long long)st);
  s->axis = (int)(axis < 0 ? axis + x->rank : axis);
  s->rows = alma__numel(s->axis, x->dims);
  s->cols = alma__numel(x->rank - s->axis, x->dims + s->axis);
  /* ONNX Runtime takes a scale whose element count is the normalized size (of any shape) */
  if (alma_tensor_numel(sc) != s->cols)
    return alma__op_error(n, ALMA_ERR_SHAPE, "scale of shape %s for X of shape %s and axis %d (%lld elements expected)",
                          alma__shape_str(sc->rank, sc->dims, s1, sizeof s1),
                          alma__shape_str(x->rank, x->dims, s2, sizeof s2), s->axis, (long long)s->cols);
  return ALMA_OK;
}

static alma_status sln_infer(INFER_ARGS) {
  sln_shape s;
  ALMA_TRY(sln_setup(n, in, &s));
  alma__set_shape(&out[0], in[1]->dtype, in[0]->rank, in[0]->dims);
  if (nout > 1) {
    int64_t d[ALMA_MAX_RANK];
    for (int i = 0; i < in[0]->rank; i++) d[i] = i < s.axis ? in[0]->dims[i] : 1;
    alma_dtype u = alma__attr_i(n, "stash_type", 1) == 11 ? ALMA_DTYPE_FLOAT64 : ALMA_DTYPE_FLOAT32;
    alma__set_shape(&out[1], u, in[0]->rank, d);
  }
  return ALMA_OK;
}

static alma_status sln_exec(EXEC_ARGS) {
  (void)ctx;
  sln_shape s;
  ALMA_TRY(sln_setup(n, in, &s));
  if (s.rows == 0 || s.cols == 0) return ALMA_OK;
  /* scale of any shape with cols elements: view it as [cols] */
  alma_tensor g = *in[1];
  g.rank = 1;
  g.dims[0] = s.cols;
  norm_job j = {.rows = s.rows, .cols = s.cols, .simplified = 1, .eps = alma__attr_f(n, "epsilon", 1e-5f),
                .x = in[0], .gamma = &g, .skip_rows = 1};
  return norm_run(n, &j, &out[0], NULL, alma__nn_out_wanted(n, nout, 1) ? &out[1] : NULL, NULL);
}

const alma_op_def alma__op_MsSimplifiedLayerNormalization = {.name = "SimplifiedLayerNormalization", .domain = "",
  .versions = {1}, .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 2,
  .infer = sln_infer, .exec = sln_exec};

/* ---- SkipLayerNormalization, SkipSimplifiedLayerNormalization (com.microsoft 1) -----------------
 * input [B, S, H] or [T, H]; skip the same, or [1, S, H] / [S, H] repeated over the batch; gamma,
 * beta (Skip only), bias [H]. Outputs: output, mean and inv_std_var ([B, S, 1], float; ONNX Runtime's
 * CPU kernel leaves them unwritten, alma fills them), input_skip_bias_sum (input's shape and type). */

static alma_status skip_setup(const alma_node *n, const alma_tensor *const *in, int nin, int simplified,
                              norm_job *j) {
  char s1[128], s2[128];
  const alma_tensor *x = in[0], *sk = in[1];
  memset(j, 0, sizeof *j);
  j->simplified = simplified;
  if (!llm_float(x->dtype))
    return alma__op_error(n, ALMA_ERR_TYPE, "input of dtype %s (float, float16 or bfloat16)", alma_dtype_name(x->dtype));
  if (x->rank != 2 && x->rank != 3)
    return alma__op_error(n, ALMA_ERR_SHAPE, "input of shape %s (rank 2 or 3 expected)",
                          alma__shape_str(x->rank, x->dims, s1, sizeof s1));
  int64_t C = x->dims[x->rank - 1];
  if (sk->dtype != x->dtype)
    return alma__op_error(n, ALMA_ERR_TYPE, "skip of dtype %s (input is %s)", alma_dtype_name(sk->dtype),
                          alma_dtype_name(x->dtype));
  int64_t rows = alma__numel(x->rank - 1, x->dims), S = x->rank == 3 ? x->dims[1] : x->dims[0];
  int same = sk->rank == x->rank;
  for (int i = 0; same && i < x->rank; i++) same = sk->dims[i] == x->dims[i];
  int bcast = x->rank == 3 && ((sk->rank == 3 && sk->dims[0] == 1 && sk->dims[1] == S && sk->dims[2] == C) ||
                               (sk->rank == 2 && sk->dims[0] == S && sk->dims[1] == C));
  if (!same && !bcast)
    return alma__op_error(n, ALMA_ERR_SHAPE, "skip of shape %s for input %s (input's shape, or [1, S, H] / [S, H])",
                          alma__shape_str(sk->rank, sk->dims, s1, sizeof s1),
                          alma__shape_str(x->rank, x->dims, s2, sizeof s2));
  j->rows = rows;
  j->cols = C;
  j->skip_rows = same ? (rows ? rows : 1) : (S ? S : 1);
  j->x = x;
  j->skip = sk;
  j->gamma = in[2];
  j->beta = simplified ? NULL : alma__nn_in(in, nin, 3);
  j->bias = alma__nn_in(in, nin, simplified ? 3 : 4);
  if (!j->gamma) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "gamma is required");
  ALMA_TRY(check_vec(n, j->gamma, "gamma", x, C));
  ALMA_TRY(check_vec(n, j->beta, "beta", x, C));
  ALMA_TRY(check_vec(n, j->bias, "bias", x, C));
  j->eps = alma__attr_f(n, "epsilon", 1e-12f);
  return ALMA_OK;
}

static alma_status skip_infer_common(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                     int nout, int simplified) {
  norm_job j;
  ALMA_TRY(skip_setup(n, in, nin, simplified, &j));
  const alma_tensor *x = in[0];
  alma__set_shape(&out[0], x->dtype, x->rank, x->dims);
  int64_t d[3] = {x->dims[0], x->dims[1], 1};
  d[x->rank - 1] = 1;
  for (int k = 1; k < 3 && k < nout; k++) alma__set_shape(&out[k], ALMA_DTYPE_FLOAT32, x->rank, d);
  if (nout > 3) alma__set_shape(&out[3], x->dtype, x->rank, x->dims);
  return ALMA_OK;
}

alma_status alma__skip_norm_exec_par(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                     int nout, int simplified, int threads, alma__nbits_parfor pf, void *pctx) {
  norm_job j;
  ALMA_TRY(skip_setup(n, in, nin, simplified, &j));
  if (j.rows == 0 || j.cols == 0) return ALMA_OK;
  return norm_run_par(n, &j, &out[0], alma__nn_out_wanted(n, nout, 1) ? &out[1] : NULL,
                      alma__nn_out_wanted(n, nout, 2) ? &out[2] : NULL,
                      alma__nn_out_wanted(n, nout, 3) ? &out[3] : NULL, threads, pf, pctx);
}

static alma_status skip_exec_common(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                    int nout, int simplified) {
  return alma__skip_norm_exec_par(n, in, nin, out, nout, simplified, 1, NULL, NULL);
}

static alma_status sln_skip_infer(INFER_ARGS) { return skip_infer_common(n, in, nin, out, nout, 0); }
static alma_status sln_skip_exec(EXEC_ARGS) {
  (void)ctx;
  return skip_exec_common(n, in, nin, out, nout, 0);
}
static alma_status ssln_infer(INFER_ARGS) { return skip_infer_common(n, in, nin, out, nout, 1); }
static alma_status ssln_exec(EXEC_ARGS) {
  (void)ctx;
  return skip_exec_common(n, in, nin, out, nout, 1);
}

const alma_op_def alma__op_MsSkipLayerNormalization = {.name = "SkipLayerNormalization", .domain = "com.microsoft",
  .versions = {1}, .min_inputs = 3, .max_inputs = 5, .min_outputs = 1, .max_outputs = 4,
  .infer = sln_skip_infer, .exec = sln_skip_exec};
const alma_op_def alma__op_MsSkipSimplifiedLayerNormalization = {.name = "SkipSimplifiedLayerNormalization",
  .domain = "com.microsoft", .versions = {1}, .min_inputs = 3, .max_inputs = 4, .min_outputs = 1, .max_outputs = 4,
  .infer = ssln_infer, .exec = ssln_exec};

/* ==== RotaryEmbedding (com.microsoft 1) ======================================================== */

/* Rotates one head: out[i] = x[i] cos - x[j] sin (first of a pair), x[i] cos + x[j] sin (second), the
 * pairs (i, i + rot/2) or, interleaved, (2k, 2k + 1); elements from rot on are copied. */
static void rope_head(const float *x, float *y, int64_t D, int64_t rot, int il, const float *c, const float *s) {
  int64_t h = rot / 2;
  for (int64_t k = 0; k < h; k++) {
    int64_t i0 = il ? 2 * k : k, i1 = il ? 2 * k + 1 : k + h;
    float a = x[i0], b = x[i1];
    y[i0] = a * c[k] - b * s[k];
    y[i1] = b * c[k] + a * s[k];
  }
  if (y != x)
    for (int64_t i = rot; i < D; i++) y[i] = x[i];
}

typedef struct {
  int64_t B, S, N, D, rot, maxpos;
  int bnsh, pid_scalar;
} rope_geom;

static alma_status rope_setup(const alma_node *n, const alma_tensor *const *in, rope_geom *g) {
  char s1[128], s2[128];
  const alma_tensor *x = in[0], *pid = in[1], *cs = in[2], *sn = in[3];
  int64_t nh = alma__attr_i(n, "num_heads", 0), rot = alma__attr_i(n, "rotary_embedding_dim", 0);
  int64_t il = alma__attr_i(n, "interleaved", 0);
  if (!llm_float(x->dtype))
    return alma__op_error(n, ALMA_ERR_TYPE, "input of dtype %s (float, float16 or bfloat16)", alma_dtype_name(x->dtype));
  if (cs->dtype != x->dtype || sn->dtype != x->dtype)
    return alma__op_error(n, ALMA_ERR_TYPE, "cos_cache (%s) and sin_cache (%s) must have the input's dtype %s",
                          alma_dtype_name(cs->dtype), alma_dtype_name(sn->dtype), alma_dtype_name(x->dtype));
  if (pid->dtype != ALMA_DTYPE_INT64)
    return alma__op_error(n, ALMA_ERR_TYPE, "position_ids of dtype %s (int64 expected)", alma_dtype_name(pid->dtype));
  if (il != 0 && il != 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "interleaved=%lld (0 or 1)", (long long)il);
  if (nh < 0 || rot < 0 || (rot > 0 && nh == 0))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL,
                          "num_heads=%lld, rotary_embedding_dim=%lld (num_heads is required with rotary_embedding_dim)",
                          (long long)nh, (long long)rot);
  if (x->rank != 3 && x->rank != 4)
    return alma__op_error(n, ALMA_ERR_SHAPE, "input of shape %s (rank 3 [B, S, hidden] or 4 [B, N, S, H] expected)",
                          alma__shape_str(x->rank, x->dims, s1, sizeof s1));
  if (cs->rank != 2 || sn->rank != 2 || cs->dims[0] != sn->dims[0] || cs->dims[1] != sn->dims[1])
    return alma__op_error(n, ALMA_ERR_SHAPE, "cos_cache %s and sin_cache %s (equal 2-D shapes expected)",
                          alma__shape_str(cs->rank, cs->dims, s1, sizeof s1),
                          alma__shape_str(sn->rank, sn->dims, s2, sizeof s2));
  g->bnsh = x->rank == 4;
  g->B = x->dims[0];
  g->S = g->bnsh ? x->dims[2] : x->dims[1];
  int64_t hidden = g->bnsh ? x->dims[1] * x->dims[3] : x->dims[2];
  g->maxpos = cs->dims[0];
  /* ONNX Runtime's rule: the head size is 2 * the caches' width unless rotary_embedding_dim is given */
  if (rot == 0) g->D = g->bnsh ? x->dims[3] : 2 * cs->dims[1];
  else g->D = g->bnsh ? x->dims[3] : hidden / nh;
  if (g->D < 1 || hidden % g->D)
    return alma__op_error(n, ALMA_ERR_SHAPE, "hidden size %lld is not a multiple of the head size %lld", (long long)hidden,
                          (long long)g->D);
  g->N = nh > 0 && !g->bnsh ? nh : hidden / g->D;
  if (g->N * g->D != hidden)
    return alma__op_error(n, ALMA_ERR_SHAPE, "num_heads=%lld does not divide the hidden size %lld into heads of %lld",
                          (long long)g->N, (long long)hidden, (long long)g->D);
  g->rot = rot > 0 ? rot : g->D;
  if (g->rot > g->D || g->rot % 2)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "rotary_embedding_dim=%lld (even, at most the head size %lld)",
                          (long long)g->rot, (long long)g->D);
  if (cs->dims[1] != g->rot / 2)
    return alma__op_error(n, ALMA_ERR_SHAPE, "cos_cache of shape %s (expected [max_position, %lld])",
                          alma__shape_str(cs->rank, cs->dims, s1, sizeof s1), (long long)(g->rot / 2));
  g->pid_scalar = alma_tensor_numel(pid) == 1 && pid->rank <= 1;
  if (!g->pid_scalar && (pid->rank != 2 || pid->dims[0] != g->B || pid->dims[1] != g->S))
    return alma__op_error(n, ALMA_ERR_SHAPE, "position_ids of shape %s (expected [1] or [B, S] = [%lld, %lld])",
                          alma__shape_str(pid->rank, pid->dims, s1, sizeof s1), (long long)g->B, (long long)g->S);
  return ALMA_OK;
}

static alma_status rope_infer(INFER_ARGS) {
  (void)nin, (void)nout;
  rope_geom g;
  ALMA_TRY(rope_setup(n, in, &g));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

static alma_status rope_exec(EXEC_ARGS) {
  (void)ctx, (void)nin, (void)nout;
  rope_geom g;
  ALMA_TRY(rope_setup(n, in, &g));
  const alma_tensor *x = in[0], *pid = in[1];
  int ox = 0, oc = 0, os = 0;
  const float *xf = alma__nn_as_f32(x, &ox), *cf = alma__nn_as_f32(in[2], &oc), *sf = alma__nn_as_f32(in[3], &os);
  float *y = x->dtype == ALMA_DTYPE_FLOAT32 ? out[0].data : alma__nn_alloc(n, (size_t)alma_tensor_numel(x), sizeof *y);
  alma_status st = ALMA_OK;
  if (!xf || !cf || !sf || !y) {
    st = ALMA_ERR_NOMEM;
    goto done;
  }
  const int64_t *p = pid->data;
  int64_t hs = g.rot / 2;
  for (int64_t b = 0; b < g.B; b++)
    for (int64_t s = 0; s < g.S; s++) {
      int64_t pos = g.pid_scalar ? p[0] + s : p[b * g.S + s];
      if (pos < 0 || pos >= g.maxpos) {
        st = alma__op_error(n, ALMA_ERR_INVALID_ARG, "position %lld (batch %lld, token %lld) outside the caches' [0, %lld)",
                            (long long)pos, (long long)b, (long long)s, (long long)g.maxpos);
        goto done;
      }
      for (int64_t h = 0; h < g.N; h++) {
        int64_t off = g.bnsh ? ((b * g.N + h) * g.S + s) * g.D : ((b * g.S + s) * g.N + h) * g.D;
        rope_head(xf + off, y + off, g.D, g.rot, (int)alma__attr_i(n, "interleaved", 0), cf + pos * hs, sf + pos * hs);
      }
    }
  if (y != out[0].data) alma__nn_store_f32(&out[0], y);
done:
  if (y != out[0].data) free(y);
  if (ox) free((void *)xf);
  if (oc) free((void *)cf);
  if (os) free((void *)sf);
  return st;
}

const alma_op_def alma__op_MsRotaryEmbedding = {.name = "RotaryEmbedding", .domain = "com.microsoft", .versions = {1},
  .min_inputs = 4, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1, .infer = rope_infer, .exec = rope_exec};

/* ==== GroupQueryAttention (com.microsoft 1) ====================================================
 * query [B, S, N*D] (with key and value [B, S, Nkv*D]) or packed [B, S, (N + 2 Nkv) * D];
 * past_key/past_value [B, Nkv, P, D] (BNSH, P the buffer's length, rows past each row's own past
 * length unused); seqlens_k [B] int32 = each row's total length - 1; total_sequence_length int32
 * scalar = the largest total length. present_* [B, Nkv, max(P, total_sequence_length), D] hold the
 * past rows then the new ones. ONNX Runtime's CPU kernel's rules, which alma follows:
 *  - the first prompt is S == total_sequence_length: every row's past is empty and its valid tokens
 *    are the first seqlens_k[b] + 1 (right padding after them); otherwise row b's past length is
 *    seqlens_k[b] + 1 - S.
 *  - do_rotary rotates Q and the new K with cos/sin [max_pos, rot/2] (rot <= D; the rest of each head
 *    is copied) at position_ids when given, else at each token's absolute position.
 *  - query head h reads KV head h / (N / Nkv); scores are Q.K * scale (default 1/sqrt(D)), then
 *    softcap * tanh(x / softcap) when softcap > 0, then + attention_bias [B or 1, N or 1, S, total];
 *    causal: token s sees keys [0, past + s]; local_window_size w > 0 keeps the last w of them (the
 *    token itself and w - 1 before it: ONNX Runtime 1.32's CPU kernel; older ones kept w + 1).
 *  - softmax over the visible keys; smooth_softmax or head_sink add exp(sink - max) to the
 *    denominator (sink = head_sink[h], or 0), the max taken over the scores and the sink.
 *  - qk_output 1 writes the scores before the softmax, 2 the probabilities, into output_qk
 *    [B, N, S, total_sequence_length]; keys a row cannot see are 0 there.
 * Not supported (refused at load, naming the node): quantized KV caches (k_quant_type, v_quant_type,
 * kv_cache_bit_width, k_scale, v_scale), sliding_window_cache, query_seqlens, q_norm_weight and
 * k_norm_weight (ONNX Runtime's CPU kernel does not take them either).
 * Speed: the work is split into (batch, KV head) items (alma__gqa_exec_par: EAGER runs them in order,
 * the BLAS and DNNL runtimes on their threads). Decode steps and chunks under 16 tokens take tiles of 4 query rows
 * of a KV head's group (usually its heads at one token), so each K and V row is read once per tile:
 * vectorised dot products, the shared row softmax (softmax_row.c), then P.V as axpys. Longer prompts
 * go per query head in blocks of 64 tokens through alma__sgemm (Q.K^T into a 64 x total block, the
 * softmax per row, P.V), keys outside a token's causal or local window weighted 0. float32 outputs
 * are written in place: present_* receive the past rows once (none when past and present are the
 * same memory, ONNX Runtime's past_present_share_buffer). */

typedef struct {
  int64_t B, S, N, Nkv, D, P, T, present; /* T: total_sequence_length */
  int packed, rotary, il, causal, qk_mode, smooth;
  int64_t rot, window;
  float scale, softcap;
} gqa_geom;

static const char *const gqa_unsupported_in[] = {"k_scale", "v_scale", "q_norm_weight", "k_norm_weight",
                                                 "query_seqlens"};

static alma_status gqa_setup(const alma_node *n, const alma_tensor *const *in, int nin, int nout, gqa_geom *g) {
  char s1[128], s2[128];
  const alma_tensor *q = in[0], *k = alma__nn_in(in, nin, 1), *v = alma__nn_in(in, nin, 2),
                    *pk = alma__nn_in(in, nin, 3), *pv = alma__nn_in(in, nin, 4), *sl = alma__nn_in(in, nin, 5),
                    *ts = alma__nn_in(in, nin, 6), *cs = alma__nn_in(in, nin, 7), *sn = alma__nn_in(in, nin, 8),
                    *pid = alma__nn_in(in, nin, 9), *bias = alma__nn_in(in, nin, 10), *sink = alma__nn_in(in, nin, 11);
  memset(g, 0, sizeof *g);
  for (int i = 12; i < 17; i++)
    if (alma__nn_in(in, nin, i))
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input %d (%s) is not supported", i, gqa_unsupported_in[i - 12]);
  const char *kq = alma__attr_s(n, "k_quant_type", "NONE"), *vq = alma__attr_s(n, "v_quant_type", "NONE");
  if (strcmp(kq, "NONE") || strcmp(vq, "NONE") || alma__node_attr(n, "kv_cache_bit_width"))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "quantized KV cache (k_quant_type=%s, v_quant_type=%s) is not supported",
                          kq, vq);
  if (alma__attr_i(n, "sliding_window_cache", 0) != 0)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "sliding_window_cache=1 is not supported");
  if (!sl || !ts) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "seqlens_k and total_sequence_length are required");
  g->N = alma__attr_i(n, "num_heads", 0);
  g->Nkv = alma__attr_i(n, "kv_num_heads", 0);
  if (g->N < 1 || g->Nkv < 1 || g->N % g->Nkv)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "num_heads=%lld, kv_num_heads=%lld (positive, num_heads a multiple)",
                          (long long)g->N, (long long)g->Nkv);
  g->rotary = (int)alma__attr_i(n, "do_rotary", 0);
  g->il = (int)alma__attr_i(n, "rotary_interleaved", 0);
  g->causal = (int)alma__attr_i(n, "causal", 1);
  g->window = alma__attr_i(n, "local_window_size", -1);
  g->qk_mode = (int)alma__attr_i(n, "qk_output", 0);
  g->smooth = alma__attr_i(n, "smooth_softmax", -1) > 0;
  g->softcap = alma__attr_f(n, "softcap", 0.0f);
  if ((g->rotary != 0 && g->rotary != 1) || (g->il != 0 && g->il != 1) || (g->causal != 0 && g->causal != 1))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "do_rotary=%d, rotary_interleaved=%d, causal=%d (0 or 1 each)",
                          g->rotary, g->il, g->causal);
  if (!g->causal && g->window != -1)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "local_window_size=%lld with causal=0 (must be -1)",
                          (long long)g->window);
  if (g->qk_mode < 0 || g->qk_mode > 2)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "qk_output=%d (0, 1 or 2)", g->qk_mode);
  if (g->qk_mode == 0 && alma__nn_out_wanted(n, nout, 3))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "output_qk is wanted but qk_output is 0");
  if (!(g->softcap >= 0.0f)) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "softcap=%g (>= 0)", (double)g->softcap);
  if (!llm_float(q->dtype))
    return alma__op_error(n, ALMA_ERR_TYPE, "query of dtype %s (float, float16 or bfloat16)", alma_dtype_name(q->dtype));
  const alma_tensor *same[] = {k, v, pk, pv, cs, sn, bias, sink};
  static const char *const nm[] = {"key", "value", "past_key", "past_value", "cos_cache", "sin_cache",
                                   "attention_bias", "head_sink"};
  for (int i = 0; i < 8; i++)
    if (same[i] && same[i]->dtype != q->dtype)
      return alma__op_error(n, ALMA_ERR_TYPE, "%s of dtype %s (query is %s)", nm[i], alma_dtype_name(same[i]->dtype),
                            alma_dtype_name(q->dtype));
  if (sl->dtype != ALMA_DTYPE_INT32 || ts->dtype != ALMA_DTYPE_INT32)
    return alma__op_error(n, ALMA_ERR_TYPE, "seqlens_k (%s) and total_sequence_length (%s) must be int32",
                          alma_dtype_name(sl->dtype), alma_dtype_name(ts->dtype));
  if (q->rank != 3)
    return alma__op_error(n, ALMA_ERR_SHAPE, "query of shape %s ([B, S, hidden] expected)",
                          alma__shape_str(q->rank, q->dims, s1, sizeof s1));
  g->B = q->dims[0];
  g->S = q->dims[1];
  g->packed = !k && !v;
  if (!g->packed && (!k || !v)) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "key and value go together");
  int64_t heads = g->packed ? g->N + 2 * g->Nkv : g->N;
  if (q->dims[2] % heads)
    return alma__op_error(n, ALMA_ERR_SHAPE, "query's hidden size %lld is not a multiple of %lld heads",
                          (long long)q->dims[2], (long long)heads);
  g->D = q->dims[2] / heads;
  if (g->D < 1) return alma__op_error(n, ALMA_ERR_SHAPE, "head size 0");
  if (!g->packed)
    for (int i = 0; i < 2; i++) {
      const alma_tensor *t = i ? v : k;
      if (t->rank != 3 || t->dims[0] != g->B || t->dims[1] != g->S || t->dims[2] != g->Nkv * g->D)
        return alma__op_error(n, ALMA_ERR_SHAPE, "%s of shape %s (expected [%lld, %lld, %lld])", i ? "value" : "key",
                              alma__shape_str(t->rank, t->dims, s1, sizeof s1), (long long)g->B, (long long)g->S,
                              (long long)(g->Nkv * g->D));
    }
  if (!pk != !pv) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "past_key and past_value go together");
  if (pk) {
    if (pk->rank != 4 || pk->dims[0] != g->B || pk->dims[1] != g->Nkv || pk->dims[3] != g->D || pv->rank != 4 ||
        pv->dims[0] != pk->dims[0] || pv->dims[1] != pk->dims[1] || pv->dims[2] != pk->dims[2] ||
        pv->dims[3] != pk->dims[3])
      return alma__op_error(n, ALMA_ERR_SHAPE, "past_key %s, past_value %s (expected [%lld, %lld, P, %lld] each)",
                            alma__shape_str(pk->rank, pk->dims, s1, sizeof s1),
                            alma__shape_str(pv->rank, pv->dims, s2, sizeof s2), (long long)g->B, (long long)g->Nkv,
                            (long long)g->D);
    g->P = pk->dims[2];
  }
  if (sl->rank != 1 || sl->dims[0] != g->B)
    return alma__op_error(n, ALMA_ERR_SHAPE, "seqlens_k of shape %s (expected [%lld])",
                          alma__shape_str(sl->rank, sl->dims, s1, sizeof s1), (long long)g->B);
  if (alma_tensor_numel(ts) != 1)
    return alma__op_error(n, ALMA_ERR_SHAPE, "total_sequence_length of shape %s (a scalar expected)",
                          alma__shape_str(ts->rank, ts->dims, s1, sizeof s1));
  if (!ts->data) return alma__need_value(); /* the present buffers' length is its value */
  g->T = *(const int32_t *)ts->data;
  if (g->T < g->S)
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "total_sequence_length=%lld is below the sequence length %lld",
                          (long long)g->T, (long long)g->S);
  g->present = g->P > g->T ? g->P : g->T;
  g->rot = g->D;
  if (g->rotary) {
    if (!cs || !sn) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "do_rotary=1 needs cos_cache and sin_cache");
    if (cs->rank != 2 || sn->rank != 2 || cs->dims[0] != sn->dims[0] || cs->dims[1] != sn->dims[1] ||
        2 * cs->dims[1] > g->D || cs->dims[1] < 1)
      return alma__op_error(n, ALMA_ERR_SHAPE, "cos_cache %s, sin_cache %s (equal [max_pos, rot/2], rot <= head size %lld)",
                            alma__shape_str(cs->rank, cs->dims, s1, sizeof s1),
                            alma__shape_str(sn->rank, sn->dims, s2, sizeof s2), (long long)g->D);
    g->rot = 2 * cs->dims[1];
    if (pid && (pid->dtype != ALMA_DTYPE_INT64 || pid->rank != 2 || pid->dims[0] != g->B || pid->dims[1] != g->S))
      return alma__op_error(n, ALMA_ERR_SHAPE, "position_ids %s of shape %s (int64 [%lld, %lld] expected)",
                            alma_dtype_name(pid->dtype), alma__shape_str(pid->rank, pid->dims, s1, sizeof s1),
                            (long long)g->B, (long long)g->S);
  }
  if (bias && (bias->rank != 4 || (bias->dims[0] != 1 && bias->dims[0] != g->B) ||
               (bias->dims[1] != 1 && bias->dims[1] != g->N) || bias->dims[2] != g->S || bias->dims[3] != g->T))
    return alma__op_error(n, ALMA_ERR_SHAPE, "attention_bias of shape %s (expected [%lld or 1, %lld or 1, %lld, %lld])",
                          alma__shape_str(bias->rank, bias->dims, s1, sizeof s1), (long long)g->B, (long long)g->N,
                          (long long)g->S, (long long)g->T);
  if (sink && (sink->rank != 1 || sink->dims[0] != g->N))
    return alma__op_error(n, ALMA_ERR_SHAPE, "head_sink of shape %s (expected [%lld])",
                          alma__shape_str(sink->rank, sink->dims, s1, sizeof s1), (long long)g->N);
  float sc = alma__attr_f(n, "scale", 0.0f);
  g->scale = sc == 0.0f ? 1.0f / sqrtf((float)g->D) : sc;
  return ALMA_OK;
}

static alma_status gqa_infer(INFER_ARGS) {
  gqa_geom g;
  ALMA_TRY(gqa_setup(n, in, nin, nout, &g));
  alma_dtype t = in[0]->dtype;
  int64_t o[3] = {g.B, g.S, g.N * g.D}, p[4] = {g.B, g.Nkv, g.present, g.D}, qk[4] = {g.B, g.N, g.S, g.T};
  alma__set_shape(&out[0], t, 3, o);
  for (int i = 1; i < 3 && i < nout; i++) alma__set_shape(&out[i], t, 4, p);
  if (nout > 3) alma__set_shape(&out[3], t, 4, qk);
  return ALMA_OK;
}

/* x [B, S, heads * D] rows of heads h0 .. h0 + nh into BNSH dst [B, nh, S, D] (rows of `present`
 * length starting at row `at[b]`), rotated when cos is given at positions pos [B, S]. */
static void gqa_put(const gqa_geom *g, const float *x, int64_t heads, int64_t h0, int64_t nh, float *dst,
                    int64_t dst_len, const int64_t *at, const float *cs, const float *sn, const int64_t *pos) {
  for (int64_t b = 0; b < g->B; b++)
    for (int64_t h = 0; h < nh; h++)
      for (int64_t s = 0; s < g->S; s++) {
        if (at[b] + s >= dst_len) continue; /* padding of a right-padded first prompt past the buffer */
        const float *src = x + ((b * g->S + s) * heads + h0 + h) * g->D;
        float *d = dst + ((b * nh + h) * dst_len + at[b] + s) * g->D;
        if (cs) rope_head(src, d, g->D, g->rot, g->il, cs + pos[b * g->S + s] * (g->rot / 2),
                          sn + pos[b * g->S + s] * (g->rot / 2));
        else memcpy(d, src, (size_t)g->D * sizeof *d);
      }
}

/* ---- the attention itself: one item per (batch, KV head), query rows in tiles of GQA_R ---------- */
/* The query rows of an item are its group's heads for every token, token-major, so a tile is usually
 * the heads that share one KV head at one token: each K and V row read once serves GQA_R rows. */
#define GQA_R 4

typedef struct {
  const gqa_geom *g;
  float *kb, *vb;            /* present K, V [B, Nkv, L, D] */
  const float *qb;           /* Q [B, N, S, D] (rotated) */
  const float *pkf, *pvf;    /* past K, V [B, Nkv, P, D] or NULL */
  const int64_t *past, *total;
  const float *biasf;
  const alma_tensor *bias, *sinkt;
  float *ob, *qk; /* [B, S, N, D]; output_qk [B, N, S, T] or NULL */
  atomic_int failed;
} gqa_job;

/* out[r][j] = q_r . K_j for j in [lo, hi), R query rows (R a constant where inlined). Vector lanes
 * over D, its tail scalar; the order of the additions depends on D alone. */
static inline __attribute__((always_inline)) void gqa_dots_r(const int R, const float *const *q, const float *K,
                                                            int64_t lo, int64_t hi, int64_t D, float *const *out) {
  const int64_t D8 = D / 8 * 8;
  for (int64_t j = lo; j < hi; j++) {
    const float *kr = K + j * D;
    alma__v8f acc[GQA_R];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) acc[r] = (alma__v8f){0};
    for (int64_t c = 0; c < D8; c += 8) {
      alma__v8f kv = ALMA_LD8(kr + c);
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) acc[r] += ALMA_LD8(q[r] + c) * kv;
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      alma__v8f a = acc[r];
      float d = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
      for (int64_t c = D8; c < D; c++) d += q[r][c] * kr[c];
      out[r][j] = d;
    }
  }
}

ALMA_MULTIVERSION
static void gqa_dots(int R, const float *const *q, const float *K, int64_t lo, int64_t hi, int64_t D,
                     float *const *out) {
  switch (R) {
    case 1: gqa_dots_r(1, q, K, lo, hi, D, out); break;
    case 2: gqa_dots_r(2, q, K, lo, hi, D, out); break;
    case 3: gqa_dots_r(3, q, K, lo, hi, D, out); break;
    default: gqa_dots_r(4, q, K, lo, hi, D, out); break;
  }
}

/* o_r += sum over j in [st_r, en_r) of p_r[j] * V_j, R rows over the union of their ranges. */
ALMA_MULTIVERSION
static void gqa_pv(int R, float *const *p, const int64_t *st, const int64_t *en, const float *V, int64_t lo,
                   int64_t hi, int64_t D, float *const *o) {
  const int64_t D8 = D / 8 * 8;
  for (int64_t j = lo; j < hi; j++) {
    const float *vr = V + j * D;
    for (int r = 0; r < R; r++) {
      if (j < st[r] || j >= en[r]) continue;
      const float pj = p[r][j];
      float *orow = o[r];
      for (int64_t c = 0; c < D8; c += 8) ALMA_ST8(orow + c, ALMA_LD8(orow + c) + pj * ALMA_LD8(vr + c));
      for (int64_t c = D8; c < D; c++) orow[c] += pj * vr[c];
    }
  }
}

/* Scores -> probabilities of query row (b, h, s) over its keys [st, en): row[j - off] holds q . K_j
 * (and row[en - off] must exist: the sink goes there). Scale, softcap and bias, output_qk, the
 * softmax (the sink as one more score: the maximum covers it, the sum takes exp(sink - max)). */
static void gqa_row(gqa_job *J, int64_t b, int64_t h, int64_t s, float *row, int64_t off, int64_t st, int64_t en) {
  const gqa_geom *g = J->g;
  const alma_tensor *bias = J->bias;
  const float *brow = bias ? J->biasf + (((bias->dims[0] == 1 ? 0 : b) * bias->dims[1] + (bias->dims[1] == 1 ? 0 : h)) *
                                             g->S + s) * g->T
                           : NULL;
  float *r = row - off + st; /* keys st .. en-1 */
  const int64_t cnt = en - st;
  for (int64_t j = 0; j < cnt; j++) {
    float d = r[j] * g->scale;
    if (g->softcap > 0.0f) d = g->softcap * tanhf(d / g->softcap);
    if (brow) d += brow[st + j];
    r[j] = d;
  }
  float *qrow = J->qk ? J->qk + ((b * g->N + h) * g->S + s) * g->T : NULL;
  if (qrow && g->qk_mode == 1) memcpy(qrow + st, r, (size_t)cnt * sizeof *r);
  int use_sink = g->smooth || J->sinkt;
  if (use_sink) r[cnt] = J->sinkt ? (float)alma__get_f64(J->sinkt->data, J->sinkt->dtype, h) : 0.0f;
  float inv = 1.0f / alma__softmax_exp_row(r, cnt + use_sink, NULL, 0);
  for (int64_t j = 0; j < cnt; j++) r[j] *= inv;
  if (qrow && g->qk_mode == 2) memcpy(qrow + st, r, (size_t)cnt * sizeof *r);
}

/* Keys [st, en) that token s of batch row b sees. */
static void gqa_range(const gqa_job *J, int64_t b, int64_t s, int64_t *st, int64_t *en) {
  const gqa_geom *g = J->g;
  int64_t end = g->causal ? J->past[b] + s + 1 : J->total[b];
  if (end > J->total[b]) end = J->total[b]; /* a padding token of the first prompt */
  *st = g->window > 0 && end > g->window ? end - g->window : 0;
  *en = end;
}

/* Prompts and chunks of at least this many tokens take the GEMM form: per query head, blocks of
 * GQA_BLK tokens through alma__sgemm (Q.K^T, then P.V), rather than dot products row by row. */
#define GQA_GEMM_TOKENS 16
#define GQA_BLK 64

static void gqa_item(void *arg, int64_t item) {
  gqa_job *J = arg;
  const gqa_geom *g = J->g;
  const int64_t S = g->S, D = g->D, N = g->N, L = g->present, grp = N / g->Nkv;
  const int64_t b = item / g->Nkv, kvh = item % g->Nkv, rows = S * grp;
  float *Kp = J->kb + (b * g->Nkv + kvh) * L * D, *Vp = J->vb + (b * g->Nkv + kvh) * L * D;
  const float *K = Kp, *V = Vp;
  /* this item's past rows into present, on the thread that reads them next (still in its cache);
   * none when the model shares the buffer (past_present_share_buffer: the same memory); zeros after
   * the new tokens */
  if (J->pkf) {
    const float *pk = J->pkf + (b * g->Nkv + kvh) * g->P * D, *pv = J->pvf + (b * g->Nkv + kvh) * g->P * D;
    if (pk != Kp) memcpy(Kp, pk, (size_t)(J->past[b] * D) * sizeof *Kp);
    if (pv != Vp) memcpy(Vp, pv, (size_t)(J->past[b] * D) * sizeof *Vp);
  }
  const int64_t used = J->past[b] + S < L ? J->past[b] + S : L;
  memset(Kp + used * D, 0, (size_t)((L - used) * D) * sizeof *Kp);
  memset(Vp + used * D, 0, (size_t)((L - used) * D) * sizeof *Vp);
  const int gemm = S >= GQA_GEMM_TOKENS;
  /* a score row per tile row (or per token of a GEMM block), + the sink */
  float *buf = malloc((size_t)((gemm ? GQA_BLK : GQA_R) * (L + 1)) * sizeof *buf);
  if (!buf) {
    atomic_store(&J->failed, 1);
    return;
  }
  if (gemm) {
    for (int64_t hh = 0; hh < grp; hh++) {
      const int64_t h = kvh * grp + hh;
      const float *Q = J->qb + (b * N + h) * S * D;
      for (int64_t s0 = 0; s0 < S; s0 += GQA_BLK) {
        const int64_t sb = S - s0 < GQA_BLK ? S - s0 : GQA_BLK;
        int64_t st[GQA_BLK], en[GQA_BLK], lo = INT64_MAX, hi = 0;
        for (int64_t i = 0; i < sb; i++) {
          gqa_range(J, b, s0 + i, &st[i], &en[i]);
          lo = st[i] < lo ? st[i] : lo;
          hi = en[i] > hi ? en[i] : hi;
        }
        if (alma__sgemm(0, 1, sb, hi - lo, D, 1.0f, Q + s0 * D, D, K + lo * D, D, 0.0f, buf, L + 1) != ALMA_OK) {
          atomic_store(&J->failed, 1);
          break;
        }
        for (int64_t i = 0; i < sb; i++) {
          float *row = buf + i * (L + 1);
          gqa_row(J, b, h, s0 + i, row, lo, st[i], en[i]);
          /* keys of the block this token does not see weigh 0 in P.V */
          memset(row, 0, (size_t)(st[i] - lo) * sizeof *row);
          memset(row + (en[i] - lo), 0, (size_t)(hi - en[i]) * sizeof *row);
        }
        if (alma__sgemm(0, 0, sb, D, hi - lo, 1.0f, buf, L + 1, V + lo * D, D, 0.0f, J->ob + ((b * S + s0) * N + h) * D,
                        N * D) != ALMA_OK) {
          atomic_store(&J->failed, 1);
          break;
        }
      }
    }
    free(buf);
    return;
  }
  for (int64_t r0 = 0; r0 < rows; r0 += GQA_R) {
    int R = rows - r0 < GQA_R ? (int)(rows - r0) : GQA_R;
    const float *qr[GQA_R];
    float *sr[GQA_R], *orow[GQA_R];
    int64_t st[GQA_R], en[GQA_R], lo = INT64_MAX, hi = 0;
    for (int r = 0; r < R; r++) {
      int64_t s = (r0 + r) / grp, h = kvh * grp + (r0 + r) % grp;
      gqa_range(J, b, s, &st[r], &en[r]);
      lo = st[r] < lo ? st[r] : lo;
      hi = en[r] > hi ? en[r] : hi;
      qr[r] = J->qb + ((b * N + h) * S + s) * D;
      sr[r] = buf + r * (L + 1);
      orow[r] = J->ob + ((b * S + s) * N + h) * D;
    }
    gqa_dots(R, qr, K, lo, hi, D, sr);
    for (int r = 0; r < R; r++) {
      gqa_row(J, b, kvh * grp + (r0 + r) % grp, (r0 + r) / grp, sr[r], 0, st[r], en[r]);
      memset(orow[r], 0, (size_t)D * sizeof *orow[r]);
    }
    gqa_pv(R, sr, st, en, V, lo, hi, D, orow);
  }
  free(buf);
}

int alma__is_gqa(const alma_node *n) {
  return n->domain && !strcmp(n->domain, "com.microsoft") && !strcmp(n->op_type, "GroupQueryAttention");
}

alma_status alma__gqa_exec_par(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout,
                               int threads, alma__nbits_parfor pf, void *pctx) {
  gqa_geom g;
  ALMA_TRY(gqa_setup(n, in, nin, nout, &g));
  const alma_tensor *q = in[0], *k = alma__nn_in(in, nin, 1), *v = alma__nn_in(in, nin, 2),
                    *pk = alma__nn_in(in, nin, 3), *pv = alma__nn_in(in, nin, 4), *pidt = alma__nn_in(in, nin, 9),
                    *bias = alma__nn_in(in, nin, 10), *sinkt = alma__nn_in(in, nin, 11);
  const int32_t *seqlens = in[5]->data;
  int64_t B = g.B, S = g.S, D = g.D, N = g.N, Nkv = g.Nkv, L = g.present;
  int first_prompt = S == g.T;
  /* per-row past and total lengths, checked against the buffers */
  int64_t *past = alma__nn_alloc(n, (size_t)B * 2 + (size_t)(B * S), sizeof *past);
  if (!past) return ALMA_ERR_NOMEM;
  int64_t *total = past + B, *pos = past + 2 * B;
  alma_status st = ALMA_OK;
  for (int64_t b = 0; b < B; b++) {
    total[b] = (int64_t)seqlens[b] + 1;
    past[b] = first_prompt ? 0 : total[b] - S;
    if (total[b] < 1 || total[b] > g.T || past[b] < 0 || past[b] > g.P || (first_prompt && total[b] > S)) {
      st = alma__op_error(n, ALMA_ERR_INVALID_ARG,
                          "seqlens_k[%lld] = %d: total length %lld does not fit sequence length %lld, "
                          "total_sequence_length %lld and past buffer length %lld",
                          (long long)b, seqlens[b], (long long)total[b], (long long)S, (long long)g.T, (long long)g.P);
      free(past);
      return st;
    }
  }
  if (g.rotary) {
    int64_t maxpos = in[7]->dims[0];
    for (int64_t b = 0; b < B; b++)
      for (int64_t s = 0; s < S; s++) {
        int64_t p = pidt ? ((const int64_t *)pidt->data)[b * S + s] : past[b] + s;
        /* ONNX Runtime puts the first prompt's padding tokens at position 1 */
        if (!pidt && first_prompt && s >= total[b]) p = 1;
        if (p < 0 || p >= maxpos) {
          st = alma__op_error(n, ALMA_ERR_INVALID_ARG, "position %lld (batch %lld, token %lld) outside the caches' [0, %lld)",
                              (long long)p, (long long)b, (long long)s, (long long)maxpos);
          free(past);
          return st;
        }
        pos[b * S + s] = p;
      }
  }
  int own[8] = {0};
  const float *qf = alma__nn_as_f32(q, &own[0]), *kf = k ? alma__nn_as_f32(k, &own[1]) : NULL,
              *vf = v ? alma__nn_as_f32(v, &own[2]) : NULL, *pkf = pk ? alma__nn_as_f32(pk, &own[3]) : NULL,
              *pvf = pk ? alma__nn_as_f32(pv, &own[4]) : NULL,
              *csf = g.rotary ? alma__nn_as_f32(in[7], &own[5]) : NULL,
              *snf = g.rotary ? alma__nn_as_f32(in[8], &own[6]) : NULL,
              *biasf = bias ? alma__nn_as_f32(bias, &own[7]) : NULL;
  int64_t kvsz = B * Nkv * L * D;
  /* float32 outputs are written in place: present_* get the past rows once, output the attention */
  int f32 = q->dtype == ALMA_DTYPE_FLOAT32;
  int want_k = alma__nn_out_wanted(n, nout, 1), want_v = alma__nn_out_wanted(n, nout, 2);
  float *qb = alma__nn_alloc(n, (size_t)(B * N * S * D), sizeof *qb);
  float *kb = f32 && want_k ? out[1].data : alma__nn_alloc(n, (size_t)kvsz, sizeof *kb);
  float *vb = f32 && want_v ? out[2].data : alma__nn_alloc(n, (size_t)kvsz, sizeof *vb);
  float *ob = f32 ? out[0].data : alma__nn_alloc(n, (size_t)(B * S * N * D), sizeof *ob);
  float *qk = g.qk_mode && alma__nn_out_wanted(n, nout, 3) ? alma__nn_alloc(n, (size_t)(B * N * S * g.T), sizeof *qk)
                                                          : NULL;
  int64_t *qat = alma__nn_alloc(n, (size_t)B, sizeof *qat); /* Q rows start at 0 */
  if (!qf || (k && !kf) || (v && !vf) || (pk && (!pkf || !pvf)) || (g.rotary && (!csf || !snf)) || (bias && !biasf) ||
      !qb || !kb || !vb || !ob || !qat || (g.qk_mode && alma__nn_out_wanted(n, nout, 3) && !qk)) {
    st = ALMA_ERR_NOMEM;
    goto done;
  }
  if (qk) memset(qk, 0, (size_t)(B * N * S * g.T) * sizeof *qk);
  /* present = past rows [0, past[b]) (each item copies its own, see gqa_item), then the new tokens
   * (K rotated), then zeros */
  {
    int64_t heads = g.packed ? N + 2 * Nkv : N;
    memset(qat, 0, (size_t)B * sizeof *qat);
    gqa_put(&g, qf, heads, 0, N, qb, S, qat, csf, snf, pos);
    if (g.packed) {
      gqa_put(&g, qf, heads, N, Nkv, kb, L, past, csf, snf, pos);
      gqa_put(&g, qf, heads, N + Nkv, Nkv, vb, L, past, NULL, NULL, pos);
    } else {
      gqa_put(&g, kf, Nkv, 0, Nkv, kb, L, past, csf, snf, pos);
      gqa_put(&g, vf, Nkv, 0, Nkv, vb, L, past, NULL, NULL, pos);
    }
  }
  gqa_job J = {.g = &g, .qb = qb, .kb = kb, .vb = vb, .pkf = pkf, .pvf = pvf, .past = past, .total = total,
               .biasf = biasf, .bias = bias, .sinkt = sinkt, .ob = ob, .qk = qk};
  atomic_init(&J.failed, 0);
  if (pf && threads > 1 && B * Nkv > 1) pf(pctx, B * Nkv, gqa_item, &J);
  else
    for (int64_t i = 0; i < B * Nkv; i++) gqa_item(&J, i);
  if (atomic_load(&J.failed)) {
    st = alma__op_error(n, ALMA_ERR_NOMEM, "out of memory for a row of attention scores");
    goto done;
  }
  if (ob != out[0].data) alma__nn_store_f32(&out[0], ob);
  if (want_k && kb != out[1].data) alma__nn_store_f32(&out[1], kb);
  if (want_v && vb != out[2].data) alma__nn_store_f32(&out[2], vb);
  if (qk) alma__nn_store_f32(&out[3], qk);
done:
  for (int i = 0; i < 8; i++) {
    const float *ps[] = {qf, kf, vf, pkf, pvf, csf, snf, biasf};
    if (own[i]) free((void *)ps[i]);
  }
  free(qb);
  if (!want_k || kb != out[1].data) free(kb);
  if (!want_v || vb != out[2].data) free(vb);
  if (ob != out[0].data) free(ob);
  free(qk);
  free(qat);
  free(past);
  return st;
}

static alma_status gqa_exec(EXEC_ARGS) {
  (void)ctx;
  return alma__gqa_exec_par(n, in, nin, out, nout, 1, NULL, NULL);
}

static void gqa_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                     int64_t *macs, int64_t *flops) {
  (void)in, (void)nin, (void)nout;
  /* at most every query token against every present row, twice (Q.K and P.V) */
  int64_t L = nout > 1 ? out[1].dims[2] : 0;
  *macs = 2 * alma_tensor_numel(&out[0]) * L;
  *flops = 2 * *macs;
  (void)n;
}

const alma_op_def alma__op_MsGroupQueryAttention = {.name = "GroupQueryAttention", .domain = "com.microsoft",
  .versions = {1}, .min_inputs = 7, .max_inputs = 17, .min_outputs = 1, .max_outputs = 4,
  .flags = ALMA_OP_EMPTY_INPUTS_OK, /* key, value, past_* are optional; seqlens_k, total are checked */
  .infer = gqa_infer, .exec = gqa_exec, .cost = gqa_cost};
