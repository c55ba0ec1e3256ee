/* ONNX Runtime's contrib operators of encoder transformers (BERT, DistilBERT, RoBERTa, ViT, GPT-2), as
 * its transformer optimizer (onnxruntime.transformers.optimizer, Optimum's ORT optimization) writes them:
 *   Gelu, BiasGelu, FastGelu, QuickGelu   activations (erf Gelu, + 1-D bias, tanh approximation, x*sigmoid(ax))
 *   BiasAdd, BiasSplitGelu                 diffusion UNet fusions (ONNX Runtime has CUDA kernels only)
 *   FusedMatMul                            MatMul with transposes (transA/B, transBatchA/B) and alpha
 *   EmbedLayerNormalization                word + position + segment embeddings, LayerNorm, mask_index
 *   Attention                              BERT's attention with the QKV projection packed in one weight
 *   MultiHeadAttention                     attention after separate projections (or packed QKV / KV)
 * all in domain com.microsoft, version 1. The meaning is ONNX Runtime's contrib schemas
 * (docs/ContribOperators.md) and its CPU kernels in 1.32, which tests/ops_bert compares against:
 *  - Masks follow ONNX Runtime's PrepareMask: a masked key adds mask_filter_value (default -10000)
 *    to the scaled score, it does not remove the key, so a row whose keys are all masked is the
 *    softmax of its unmasked scores (not zeros); the causal mask (unidirectional) removes keys
 *    after past + s. mask_index of shape [3 * B + 2] reads its first B values as key lengths, as
 *    ONNX Runtime's CPU kernel does.
 *  - Not implemented, refused at load with a message (ONNX Runtime's CPU kernel refuses the first
 *    two as well): Attention's 4-D Megatron mask, do_rotary, past_present_share_buffer; float16
 *    and bfloat16 attention (ONNX Runtime's CPU kernels are float32 only).
 * The attention core multiplies Q.K^T and P.V for one (batch, head) at a time with the shared sgemm,
 * the projections likewise. EAGER runs everything on the calling thread; the BLAS and DNNL runtimes
 * run the activations, BiasAdd, Attention and MultiHeadAttention (and SkipLayerNormalization,
 * contrib_llm.c) on their threads through alma__contrib_exec_par (contrib_bert.h), the same code
 * split into items: blocks of rows, blocks of the projection's columns, (batch, head) pairs. */
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "ops/contrib_bert.h"
#include "ops/nn_util.h"
#include "ops/op_args.h"
#include "ops/sgemm.h"
#include "ops/softmax_row.h"

/* an allocation count of at least 1 (empty tensors still get a buffer to free) */
static size_t cnt1(int64_t v) { return v > 0 ? (size_t)v : 1; }

static int bert_float(alma_dtype t) {
  return t == ALMA_DTYPE_FLOAT32 || t == ALMA_DTYPE_FLOAT16 || t == ALMA_DTYPE_BFLOAT16 || t == ALMA_DTYPE_FLOAT64;
}

/* ==== activations ============================================================================== */

enum { ACT_GELU, ACT_FAST, ACT_QUICK, ACT_ID };

static inline double act_d(int kind, double x, double alpha) {
  switch (kind) {
  case ACT_GELU: return 0.5 * x * (1.0 + erf(x * M_SQRT1_2));
  case ACT_FAST: return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  case ACT_QUICK: return x / (1.0 + exp(-alpha * x));
  default: return x;
  }
}
static inline float act_f(int kind, float x, float alpha) {
  switch (kind) {
  case ACT_GELU: return 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2));
  case ACT_FAST: return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
  case ACT_QUICK: return x / (1.0f + expf(-alpha * x));
  default: return x;
  }
}

/* y = act(x + bias) (+ skip), bias [C] along the last dim (may be NULL), skip x's shape (may be NULL).
 * float32 in float, float64 in double; float16/bfloat16 in float rounded once (as ONNX Runtime's
 * CUDA kernels, its CPU kernels have none for them). */
/* elements [i0, i1) */
static void act_range(int kind, float alpha, const alma_tensor *x, const alma_tensor *bias, const alma_tensor *skip,
                      alma_tensor *y, int64_t i0, int64_t i1) {
  int64_t C = bias ? bias->dims[0] : 1;
  if (x->dtype == ALMA_DTYPE_FLOAT32) {
    const float *xs = x->data, *b = bias ? bias->data : NULL, *sk = skip ? skip->data : NULL;
    float *ys = y->data;
    for (int64_t i = i0; i < i1; i++) {
      float v = xs[i] + (b ? b[i % C] : 0.0f);
      v = act_f(kind, v, alpha);
      ys[i] = sk ? v + sk[i] : v;
    }
    return;
  }
  int dbl = x->dtype == ALMA_DTYPE_FLOAT64;
  for (int64_t i = i0; i < i1; i++) {
    double v = alma__get_f64(x->data, x->dtype, i) + (bias ? alma__get_f64(bias->data, bias->dtype, i % C) : 0.0);
    if (!dbl) v = (float)v;
    v = dbl ? act_d(kind, v, alpha) : act_f(kind, (float)v, alpha);
    if (skip) v = dbl ? v + alma__get_f64(skip->data, skip->dtype, i) : (float)v + (float)alma__get_f64(skip->data, skip->dtype, i);
    alma__set_f64(y->data, y->dtype, i, v);
  }
}

/* Elements per item of the parallel activations: a fixed size, so the split does not depend on the
 * thread count (it does not change the results either: every element is computed alone). */
#define ACT_BLK 4096

typedef struct {
  int kind, fast;
  float alpha;
  const alma_tensor *x, *bias, *skip;
  alma_tensor *y;
  int64_t cnt;
} act_job;

/* elements [i0, i1) of a job: fast (float32 Gelus without skip) through alma__gelu_row a row segment
 * at a time (the bias restarts at each row), else act_range */
static void act_job_range(const act_job *j, int64_t i0, int64_t i1) {
  if (!j->fast) {
    act_range(j->kind, j->alpha, j->x, j->bias, j->skip, j->y, i0, i1);
    return;
  }
  const float *x = j->x->data, *b = j->bias ? j->bias->data : NULL;
  float *y = j->y->data;
  int64_t C = b ? j->bias->dims[0] : i1 - i0;
  int vk = j->kind == ACT_GELU ? 0 : j->kind == ACT_FAST ? 1 : 2;
  for (int64_t i = i0; i < i1;) {
    int64_t c = b ? i % C : 0, len = C - c < i1 - i ? C - c : i1 - i;
    alma__gelu_row(y + i, x + i, b ? b + c : NULL, len, vk, j->alpha);
    i += len;
  }
}

static void act_item(void *arg, int64_t item) {
  const act_job *j = arg;
  int64_t i0 = item * ACT_BLK, i1 = i0 + ACT_BLK < j->cnt ? i0 + ACT_BLK : j->cnt;
  act_job_range(j, i0, i1);
}

/* y = act(x + bias) (+ skip) over the whole tensor. With pf (a runtime's threads, even just one) the
 * float32 Gelus go through the vectorised alma__gelu_row in items run by pf; EAGER (pf NULL) keeps
 * act_range's libm erff/tanhf/expf. */
static void act_run_par(int kind, float alpha, const alma_tensor *x, const alma_tensor *bias, const alma_tensor *skip,
                        alma_tensor *y, int threads, alma__nbits_parfor pf, void *pctx) {
  act_job j = {.kind = kind, .alpha = alpha, .x = x, .bias = bias, .skip = skip, .y = y, .cnt = alma_tensor_numel(x)};
  j.fast = pf && kind != ACT_ID && !skip && x->dtype == ALMA_DTYPE_FLOAT32 && y->dtype == ALMA_DTYPE_FLOAT32;
  int64_t items = (j.cnt + ACT_BLK - 1) / ACT_BLK;
  if (pf && threads > 1 && items > 1) pf(pctx, items, act_item, &j);
  else act_job_range(&j, 0, j.cnt);
}

static alma_status check_float(const alma_node *n, const alma_tensor *t, const char *what) {
  if (!bert_float(t->dtype))
    return alma__op_error(n, ALMA_ERR_TYPE, "%s of dtype %s (float, float16, bfloat16 or double)", what,
                          alma_dtype_name(t->dtype));
  return ALMA_OK;
}

/* bias: 1-D, x's last dim, x's dtype */
static alma_status check_bias(const alma_node *n, const alma_tensor *x, const alma_tensor *b, const char *what) {
  char s1[128], s2[128];
  if (b->dtype != x->dtype)
    return alma__op_error(n, ALMA_ERR_TYPE, "%s of dtype %s (input is %s)", what, alma_dtype_name(b->dtype),
                          alma_dtype_name(x->dtype));
  if (x->rank < 1 || b->rank != 1 || b->dims[0] != x->dims[x->rank - 1])
    return alma__op_error(n, ALMA_ERR_SHAPE, "%s of shape %s for input %s (1-D, the input's last dim)", what,
                          alma__shape_str(b->rank, b->dims, s1, sizeof s1), alma__shape_str(x->rank, x->dims, s2, sizeof s2));
  return ALMA_OK;
}

static alma_status act_setup(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor **bias) {
  ALMA_TRY(check_float(n, in[0], "input"));
  *bias = alma__nn_in(in, nin, 1);
  if (*bias) ALMA_TRY(check_bias(n, in[0], *bias, "bias"));
  return ALMA_OK;
}

static alma_status act_infer(INFER_ARGS) {
  (void)nout;
  const alma_tensor *b;
  ALMA_TRY(act_setup(n, in, nin, &b));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

static int act_kind(const alma_node *n) {
  if (!strcmp(n->op_type, "FastGelu")) return ACT_FAST;
  if (!strcmp(n->op_type, "QuickGelu")) return ACT_QUICK;
  return ACT_GELU; /* Gelu, BiasGelu */
}

static alma_status act_exec_par(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                int threads, alma__nbits_parfor pf, void *pctx) {
  const alma_tensor *b;
  ALMA_TRY(act_setup(n, in, nin, &b));
  act_run_par(act_kind(n), alma__attr_f(n, "alpha", 1.702f), in[0], b, NULL, &out[0], threads, pf, pctx);
  return ALMA_OK;
}
static alma_status act_exec(EXEC_ARGS) {
  (void)ctx, (void)nout;
  return act_exec_par(n, in, nin, out, 1, NULL, NULL);
}

static void act_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                     int64_t *macs, int64_t *flops) {
  (void)n, (void)in, (void)nin, (void)nout;
  *macs = 0;
  *flops = 8 * alma_tensor_numel(&out[0]);
}

const alma_op_def alma__op_MsGelu = {.name = "Gelu", .domain = "com.microsoft", .versions = {1}, .min_inputs = 1,
  .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .infer = act_infer, .exec = act_exec, .cost = act_cost};
const alma_op_def alma__op_MsBiasGelu = {.name = "BiasGelu", .domain = "com.microsoft", .versions = {1},
  .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1, .infer = act_infer, .exec = act_exec,
  .cost = act_cost};
const alma_op_def alma__op_MsFastGelu = {.name = "FastGelu", .domain = "com.microsoft", .versions = {1},
  .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1, .infer = act_infer, .exec = act_exec,
  .cost = act_cost};
const alma_op_def alma__op_MsQuickGelu = {.name = "QuickGelu", .domain = "com.microsoft", .versions = {1},
  .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .infer = act_infer, .exec = act_exec,
  .cost = act_cost};

/* ---- BiasAdd: Y = X + bias + skip, X and skip [N, S, C], bias [C] (float, float16) -------------- */

static alma_status biasadd_setup(const alma_node *n, const alma_tensor *const *in) {
  char s1[128], s2[128];
  const alma_tensor *x = in[0], *sk = in[2];
  if (x->dtype != ALMA_DTYPE_FLOAT32 && x->dtype != ALMA_DTYPE_FLOAT16)
    return alma__op_error(n, ALMA_ERR_TYPE, "X of dtype %s (float or float16)", alma_dtype_name(x->dtype));
  if (x->rank != 3)
    return alma__op_error(n, ALMA_ERR_SHAPE, "X of shape %s ([N, S, C] expected)", alma__shape_str(x->rank, x->dims, s1, sizeof s1));
  ALMA_TRY(check_bias(n, x, in[1], "bias"));
  if (sk->dtype != x->dtype || sk->rank != 3 || sk->dims[0] != x->dims[0] || sk->dims[1] != x->dims[1] ||
      sk->dims[2] != x->dims[2])
    return alma__op_error(n, ALMA_ERR_SHAPE, "skip %s of shape %s (X's: %s %s)", alma_dtype_name(sk->dtype),
                          alma__shape_str(sk->rank, sk->dims, s1, sizeof s1), alma_dtype_name(x->dtype),
                          alma__shape_str(x->rank, x->dims, s2, sizeof s2));
  return ALMA_OK;
}
static alma_status biasadd_infer(INFER_ARGS) {
  (void)nin, (void)nout;
  ALMA_TRY(biasadd_setup(n, in));
  alma__set_shape(&out[0], in[0]->dtype, 3, in[0]->dims);
  return ALMA_OK;
}
static alma_status biasadd_exec_par(const alma_node *n, const alma_tensor *const *in, alma_tensor *out, int threads,
                                    alma__nbits_parfor pf, void *pctx) {
  ALMA_TRY(biasadd_setup(n, in));
  act_run_par(ACT_ID, 0.0f, in[0], in[1], in[2], &out[0], threads, pf, pctx);
  return ALMA_OK;
}
static alma_status biasadd_exec(EXEC_ARGS) {
  (void)ctx, (void)nin, (void)nout;
  return biasadd_exec_par(n, in, out, 1, NULL, NULL);
}
const alma_op_def alma__op_MsBiasAdd = {.name = "BiasAdd", .domain = "com.microsoft", .versions = {1},
  .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1, .infer = biasadd_infer,
  .exec = biasadd_exec, .cost = act_cost};

/* ---- BiasSplitGelu: v = X + bias, X [N, S, D], bias [D]; Y = v[..., :D/2] * Gelu(v[..., D/2:]) --- */

static alma_status bsg_setup(const alma_node *n, const alma_tensor *const *in) {
  char s1[128];
  const alma_tensor *x = in[0];
  if (x->dtype != ALMA_DTYPE_FLOAT32 && x->dtype != ALMA_DTYPE_FLOAT16)
    return alma__op_error(n, ALMA_ERR_TYPE, "X of dtype %s (float or float16)", alma_dtype_name(x->dtype));
  if (x->rank != 3 || x->dims[2] % 2)
    return alma__op_error(n, ALMA_ERR_SHAPE, "X of shape %s ([N, S, D] with D even expected)",
                          alma__shape_str(x->rank, x->dims, s1, sizeof s1));
  return check_bias(n, x, in[1], "bias");
}
static alma_status bsg_infer(INFER_ARGS) {
  (void)nin, (void)nout;
  ALMA_TRY(bsg_setup(n, in));
  int64_t d[3] = {in[0]->dims[0], in[0]->dims[1], in[0]->dims[2] / 2};
  alma__set_shape(&out[0], in[0]->dtype, 3, d);
  return ALMA_OK;
}
static alma_status bsg_exec(EXEC_ARGS) {
  (void)ctx, (void)nin, (void)nout;
  ALMA_TRY(bsg_setup(n, in));
  const alma_tensor *x = in[0], *b = in[1];
  int64_t D = x->dims[2], h = D / 2, rows = x->dims[0] * x->dims[1];
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < h; c++) {
      float l = (float)alma__get_f64(x->data, x->dtype, r * D + c) + (float)alma__get_f64(b->data, b->dtype, c);
      float g = (float)alma__get_f64(x->data, x->dtype, r * D + h + c) + (float)alma__get_f64(b->data, b->dtype, h + c);
      alma__set_f64(out[0].data, out[0].dtype, r * h + c, l * act_f(ACT_GELU, g, 0.0f));
    }
  return ALMA_OK;
}
const alma_op_def alma__op_MsBiasSplitGelu = {.name = "BiasSplitGelu", .domain = "com.microsoft", .versions = {1},
  .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1, .infer = bsg_infer, .exec = bsg_exec,
  .cost = act_cost};

/* ==== FusedMatMul ==============================================================================
 * Y = alpha * op(A) op(B), numpy matmul broadcasting over the batch dims. transBatchA moves A's first
 * dim behind its batch dims ([M, B1..Bn, K] read as [B1..Bn, M, K]) before transA swaps the last two;
 * ONNX Runtime then asks both inputs to have one rank >= 3. Computed in float32 (float64 in double). */

typedef struct {
  int ta, tb, tba, tbb;
  float alpha;
  int ra, rb, r;           /* logical ranks of A and B (after rank-1 promotion), output rank */
  int64_t ad[ALMA_MAX_RANK], bd[ALMA_MAX_RANK], od[ALMA_MAX_RANK]; /* logical A, B (after transBatch) */
  int64_t M, K, N;
  int a_vec, b_vec; /* rank-1 operand promoted */
} fmm_shape;

static alma_status fmm_setup(const alma_node *n, const alma_tensor *const *in, fmm_shape *s) {
  char s1[128], s2[128];
  const alma_tensor *a = in[0], *b = in[1];
  memset(s, 0, sizeof *s);
  s->ta = alma__attr_i(n, "transA", 0) != 0;
  s->tb = alma__attr_i(n, "transB", 0) != 0;
  s->tba = alma__attr_i(n, "transBatchA", 0) != 0;
  s->tbb = alma__attr_i(n, "transBatchB", 0) != 0;
  s->alpha = alma__attr_f(n, "alpha", 1.0f);
  if (a->dtype != ALMA_DTYPE_FLOAT32 && a->dtype != ALMA_DTYPE_FLOAT64 && a->dtype != ALMA_DTYPE_FLOAT16 &&
      a->dtype != ALMA_DTYPE_BFLOAT16)
    return alma__op_error(n, ALMA_ERR_TYPE, "A of dtype %s (float, float16, bfloat16 or double)", alma_dtype_name(a->dtype));
  if (b->dtype != a->dtype)
    return alma__op_error(n, ALMA_ERR_TYPE, "B of dtype %s (A is %s)", alma_dtype_name(b->dtype), alma_dtype_name(a->dtype));
  if (a->rank < 1 || b->rank < 1)
    return alma__op_error(n, ALMA_ERR_SHAPE, "A and B must not be scalars");
  if ((s->tba || s->tbb) && (a->rank != b->rank || a->rank < 3))
    return alma__op_error(n, ALMA_ERR_SHAPE,
                          "transBatchA/transBatchB need A and B of one rank >= 3 (A %s, B %s)",
                          alma__shape_str(a->rank, a->dims, s1, sizeof s1), alma__shape_str(b->rank, b->dims, s2, sizeof s2));
  /* logical shapes: rank-1 A is [1, K], rank-1 B is [K, 1] (transposes do not apply to them) */
  const alma_tensor *t[2] = {a, b};
  int64_t *ld[2] = {s->ad, s->bd};
  int *lr[2] = {&s->ra, &s->rb}, tbat[2] = {s->tba, s->tbb}, tr[2] = {s->ta, s->tb};
  for (int k = 0; k < 2; k++) {
    const alma_tensor *x = t[k];
    if (x->rank == 1) {
      *lr[k] = 2;
      ld[k][0] = k ? x->dims[0] : 1;
      ld[k][1] = k ? 1 : x->dims[0];
      if (k) s->b_vec = 1; else s->a_vec = 1;
      continue;
    }
    int r = x->rank;
    *lr[k] = r;
    if (tbat[k]) {
      for (int i = 1; i < r - 1; i++) ld[k][i - 1] = x->dims[i];
      ld[k][r - 2] = x->dims[0];
      ld[k][r - 1] = x->dims[r - 1];
    } else {
      memcpy(ld[k], x->dims, (size_t)r * sizeof(int64_t));
    }
    if (tr[k]) {
      int64_t tmp = ld[k][r - 2];
      ld[k][r - 2] = ld[k][r - 1];
      ld[k][r - 1] = tmp;
    }
  }
  s->M = s->ad[s->ra - 2];
  s->K = s->ad[s->ra - 1];
  s->N = s->bd[s->rb - 1];
  if (s->bd[s->rb - 2] != s->K)
    return alma__op_error(n, ALMA_ERR_SHAPE, "A %s and B %s do not multiply (transA=%d transB=%d transBatchA=%d "
                          "transBatchB=%d: inner dims %lld and %lld)", alma__shape_str(a->rank, a->dims, s1, sizeof s1),
                          alma__shape_str(b->rank, b->dims, s2, sizeof s2), s->ta, s->tb, s->tba, s->tbb,
                          (long long)s->K, (long long)s->bd[s->rb - 2]);
  int rbat;
  int64_t bat[ALMA_MAX_RANK];
  if (alma__broadcast_shape(s->ra - 2, s->ad, s->rb - 2, s->bd, &rbat, bat) != ALMA_OK)
    return alma__op_error(n, ALMA_ERR_SHAPE, "batch dims of A %s and B %s do not broadcast",
                          alma__shape_str(a->rank, a->dims, s1, sizeof s1), alma__shape_str(b->rank, b->dims, s2, sizeof s2));
  memcpy(s->od, bat, (size_t)rbat * sizeof(int64_t));
  s->r = rbat;
  if (!s->a_vec) s->od[s->r++] = s->M;
  if (!s->b_vec) s->od[s->r++] = s->N;
  return ALMA_OK;
}

static alma_status fmm_infer(INFER_ARGS) {
  (void)nin, (void)nout;
  fmm_shape s;
  ALMA_TRY(fmm_setup(n, in, &s));
  alma__set_shape(&out[0], in[0]->dtype, s.r, s.od);
  return ALMA_OK;
}

/* x (float32 or float64 copy of a tensor of rank r) with its first dim moved behind the batch dims */
static void *fmm_trans_batch(const alma_node *n, const void *x, size_t esz, int r, const int64_t *dims) {
  int64_t d0 = dims[0], bat = alma__numel(r - 2, dims + 1), inner = dims[r - 1];
  char *y = alma__nn_alloc(n, (size_t)(d0 * bat * inner), esz);
  if (!y) return NULL;
  /* x[i, b, j] -> y[b, i, j] */
  for (int64_t i = 0; i < d0; i++)
    for (int64_t b = 0; b < bat; b++)
      memcpy(y + ((b * d0 + i) * inner) * esz, (const char *)x + ((i * bat + b) * inner) * esz, (size_t)inner * esz);
  return y;
}

static alma_status fmm_exec(EXEC_ARGS) {
  (void)ctx, (void)nin, (void)nout;
  fmm_shape s;
  ALMA_TRY(fmm_setup(n, in, &s));
  const alma_tensor *a = in[0], *b = in[1];
  int dbl = a->dtype == ALMA_DTYPE_FLOAT64;
  size_t esz = dbl ? sizeof(double) : sizeof(float);
  int own[2] = {0, 0};
  const void *ap = dbl ? (const void *)alma__nn_as_f64(a, &own[0]) : (const void *)alma__nn_as_f32(a, &own[0]);
  const void *bp = dbl ? (const void *)alma__nn_as_f64(b, &own[1]) : (const void *)alma__nn_as_f32(b, &own[1]);
  void *ta = NULL, *tb = NULL, *y = NULL;
  alma_status st = ALMA_OK;
  if (!ap || !bp) {
    st = ALMA_ERR_NOMEM;
    goto done;
  }
  if (s.tba && !(ta = fmm_trans_batch(n, ap, esz, a->rank, a->dims))) st = ALMA_ERR_NOMEM;
  if (s.tbb && !(tb = fmm_trans_batch(n, bp, esz, b->rank, b->dims))) st = ALMA_ERR_NOMEM;
  int64_t total = alma_tensor_numel(&out[0]);
  int need_copy = a->dtype != ALMA_DTYPE_FLOAT32 && !dbl; /* float16/bfloat16: computed in a float32 copy */
  y = need_copy ? alma__nn_alloc(n, cnt1(total), esz) : out[0].data;
  if (st != ALMA_OK || !y) {
    st = ALMA_ERR_NOMEM;
    goto done;
  }
  {
    const char *A = ta ? ta : ap, *B = tb ? tb : bp;
    int rbat = s.r - !s.a_vec - !s.b_vec;
    int64_t nb = alma__numel(rbat, s.od), M = s.M, K = s.K, N = s.N;
    /* stored (pre-transpose) row lengths: op(A) is [M, K], stored [M, K] or [K, M] */
    int64_t lda = s.ta && !s.a_vec ? M : K, ldb = s.tb && !s.b_vec ? K : N;
    int ta_ = s.ta && !s.a_vec, tb_ = s.tb && !s.b_vec;
    for (int64_t i = 0; i < nb; i++) {
      int64_t ia = alma__broadcast_index(i, rbat, s.od, s.ra - 2, s.ad), ib = alma__broadcast_index(i, rbat, s.od, s.rb - 2, s.bd);
      if (dbl)
        alma__dgemm(ta_, tb_, M, N, K, s.alpha, (const double *)A + ia * M * K, lda, (const double *)B + ib * K * N, ldb,
                    0.0, (double *)y + i * M * N, N);
      else if ((st = alma__sgemm(ta_, tb_, M, N, K, s.alpha, (const float *)A + ia * M * K, lda,
                                 (const float *)B + ib * K * N, ldb, 0.0f, (float *)y + i * M * N, N)) != ALMA_OK)
        goto done;
    }
  }
  if (need_copy) alma__nn_store_f32(&out[0], y);
done:
  if (own[0]) free((void *)ap);
  if (own[1]) free((void *)bp);
  free(ta);
  free(tb);
  if (y != out[0].data) free(y);
  return st;
}

static void fmm_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                     int64_t *macs, int64_t *flops) {
  (void)nin, (void)nout;
  fmm_shape s;
  *macs = *flops = 0;
  if (fmm_setup(n, in, &s) != ALMA_OK) return;
  *macs = alma_tensor_numel(&out[0]) * s.K;
  *flops = 2 * *macs;
}

const alma_op_def alma__op_MsFusedMatMul = {.name = "FusedMatMul", .domain = "com.microsoft", .versions = {1},
  .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1, .infer = fmm_infer, .exec = fmm_exec,
  .cost = fmm_cost};

/* ==== EmbedLayerNormalization ==================================================================
 * input_ids, segment_ids [B, S] int32 (segment optional, with segment_embedding); word, position,
 * segment embeddings [*, H]; gamma, beta [H]; mask [B, S] int32 (optional); position_ids [B, S] or
 * [1, S] int32 (optional, else 0..S-1). Outputs: LayerNorm(word + position + segment) [B, S, H],
 * mask_index [B] (the count of mask values equal to 1, zeros without a mask: ONNX Runtime's
 * definition), embedding_sum (the sum before the LayerNorm). float32 and float16 (rows in double). */

static alma_status eln_setup(const alma_node *n, const alma_tensor *const *in, int nin, int64_t *B, int64_t *S,
                             int64_t *H) {
  char s1[128], s2[128];
  const alma_tensor *ids = in[0], *seg = alma__nn_in(in, nin, 1), *we = in[2], *pe = in[3],
                    *se = alma__nn_in(in, nin, 4), *g = in[5], *bt = in[6], *mask = alma__nn_in(in, nin, 7),
                    *pid = alma__nn_in(in, nin, 8);
  if (!ids || !we || !pe || !g || !bt)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "word_embedding, position_embedding, gamma and beta are required");
  if (ids->dtype != ALMA_DTYPE_INT32 || ids->rank != 2)
    return alma__op_error(n, ALMA_ERR_SHAPE, "input_ids %s of shape %s (int32 [B, S] expected)", alma_dtype_name(ids->dtype),
                          alma__shape_str(ids->rank, ids->dims, s1, sizeof s1));
  *B = ids->dims[0];
  *S = ids->dims[1];
  if (we->dtype != ALMA_DTYPE_FLOAT32 && we->dtype != ALMA_DTYPE_FLOAT16)
    return alma__op_error(n, ALMA_ERR_TYPE, "word_embedding of dtype %s (float or float16)", alma_dtype_name(we->dtype));
  if (we->rank != 2) return alma__op_error(n, ALMA_ERR_SHAPE, "word_embedding of rank %d (2 expected)", we->rank);
  *H = we->dims[1];
  const alma_tensor *tabs[] = {pe, se};
  static const char *const tn[] = {"position_embedding", "segment_embedding"};
  for (int i = 0; i < 2; i++)
    if (tabs[i] && (tabs[i]->dtype != we->dtype || tabs[i]->rank != 2 || tabs[i]->dims[1] != *H))
      return alma__op_error(n, ALMA_ERR_SHAPE, "%s %s of shape %s (word_embedding's dtype %s, [*, %lld])", tn[i],
                            alma_dtype_name(tabs[i]->dtype), alma__shape_str(tabs[i]->rank, tabs[i]->dims, s1, sizeof s1),
                            alma_dtype_name(we->dtype), (long long)*H);
  const alma_tensor *vecs[] = {g, bt};
  static const char *const vn[] = {"gamma", "beta"};
  for (int i = 0; i < 2; i++)
    if (vecs[i]->dtype != we->dtype || vecs[i]->rank != 1 || vecs[i]->dims[0] != *H)
      return alma__op_error(n, ALMA_ERR_SHAPE, "%s %s of shape %s (word_embedding's dtype %s, [%lld])", vn[i],
                            alma_dtype_name(vecs[i]->dtype), alma__shape_str(vecs[i]->rank, vecs[i]->dims, s1, sizeof s1),
                            alma_dtype_name(we->dtype), (long long)*H);
  if (!seg != !se)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "segment_ids and segment_embedding go together");
  const alma_tensor *same[] = {seg, mask};
  static const char *const sn[] = {"segment_ids", "mask"};
  for (int i = 0; i < 2; i++)
    if (same[i] && (same[i]->dtype != ALMA_DTYPE_INT32 || same[i]->rank != 2 || same[i]->dims[0] != *B ||
                    same[i]->dims[1] != *S))
      return alma__op_error(n, ALMA_ERR_SHAPE, "%s %s of shape %s (int32, input_ids' shape %s)", sn[i],
                            alma_dtype_name(same[i]->dtype), alma__shape_str(same[i]->rank, same[i]->dims, s1, sizeof s1),
                            alma__shape_str(2, ids->dims, s2, sizeof s2));
  if (pid && (pid->dtype != ALMA_DTYPE_INT32 || pid->rank != 2 || (pid->dims[0] != *B && pid->dims[0] != 1) ||
              pid->dims[1] != *S))
    return alma__op_error(n, ALMA_ERR_SHAPE, "position_ids %s of shape %s (int32 [%lld or 1, %lld])",
                          alma_dtype_name(pid->dtype), alma__shape_str(pid->rank, pid->dims, s1, sizeof s1),
                          (long long)*B, (long long)*S);
  return ALMA_OK;
}

static alma_status eln_infer(INFER_ARGS) {
  int64_t B, S, H;
  ALMA_TRY(eln_setup(n, in, nin, &B, &S, &H));
  int64_t d[3] = {B, S, H};
  alma__set_shape(&out[0], in[2]->dtype, 3, d);
  if (nout > 1) alma__set_shape(&out[1], ALMA_DTYPE_INT32, 1, d);
  if (nout > 2) alma__set_shape(&out[2], in[2]->dtype, 3, d);
  return ALMA_OK;
}

static alma_status eln_lookup(const alma_node *n, const char *what, const alma_tensor *tab, int64_t id, int64_t b,
                              int64_t s, double *acc) {
  int64_t rows = tab->dims[0], H = tab->dims[1];
  if (id < 0 || id >= rows)
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "%s %lld at [%lld, %lld] outside the table's %lld rows", what,
                          (long long)id, (long long)b, (long long)s, (long long)rows);
  if (tab->dtype == ALMA_DTYPE_FLOAT32) {
    const float *r = (const float *)tab->data + id * H;
    for (int64_t h = 0; h < H; h++) acc[h] += r[h];
  } else {
    for (int64_t h = 0; h < H; h++) acc[h] += alma__get_f64(tab->data, tab->dtype, id * H + h);
  }
  return ALMA_OK;
}

static alma_status eln_exec(EXEC_ARGS) {
  (void)ctx;
  int64_t B, S, H;
  ALMA_TRY(eln_setup(n, in, nin, &B, &S, &H));
  const alma_tensor *seg = alma__nn_in(in, nin, 1), *se = alma__nn_in(in, nin, 4), *mask = alma__nn_in(in, nin, 7),
                    *pid = alma__nn_in(in, nin, 8), *g = in[5], *bt = in[6];
  const int32_t *ids = in[0]->data;
  double eps = alma__attr_f(n, "epsilon", 1e-12f);
  double *v = alma__nn_alloc(n, (size_t)(H ? 3 * H : 1), sizeof *v);
  if (!v) return ALMA_ERR_NOMEM;
  double *gm = v + H, *bb = v + 2 * H;
  for (int64_t h = 0; h < H; h++) {
    gm[h] = alma__get_f64(g->data, g->dtype, h);
    bb[h] = alma__get_f64(bt->data, bt->dtype, h);
  }
  int want_sum = alma__nn_out_wanted(n, nout, 2);
  alma_status st = ALMA_OK;
  for (int64_t b = 0; b < B && st == ALMA_OK; b++)
    for (int64_t s = 0; s < S; s++) {
      int64_t r = b * S + s;
      memset(v, 0, (size_t)H * sizeof *v);
      int64_t p = pid ? ((const int32_t *)pid->data)[(pid->dims[0] == 1 ? 0 : b) * S + s] : s;
      if ((st = eln_lookup(n, "input_ids value", in[2], ids[r], b, s, v)) != ALMA_OK ||
          (st = eln_lookup(n, "position", in[3], p, b, s, v)) != ALMA_OK ||
          (seg && (st = eln_lookup(n, "segment_ids value", se, ((const int32_t *)seg->data)[r], b, s, v)) != ALMA_OK))
        break;
      if (want_sum)
        for (int64_t h = 0; h < H; h++) alma__set_f64(out[2].data, out[2].dtype, r * H + h, v[h]);
      double mean = 0, var = 0;
      for (int64_t h = 0; h < H; h++) mean += v[h];
      mean /= (double)H;
      for (int64_t h = 0; h < H; h++) var += (v[h] - mean) * (v[h] - mean);
      double inv = 1.0 / sqrt(var / (double)H + eps);
      for (int64_t h = 0; h < H; h++)
        alma__set_f64(out[0].data, out[0].dtype, r * H + h, (v[h] - mean) * inv * gm[h] + bb[h]);
    }
  if (st == ALMA_OK && alma__nn_out_wanted(n, nout, 1)) {
    int32_t *mi = out[1].data;
    for (int64_t b = 0; b < B; b++) {
      int32_t c = 0;
      for (int64_t s = 0; mask && s < S; s++) c += ((const int32_t *)mask->data)[b * S + s] == 1;
      mi[b] = c;
    }
  }
  free(v);
  return st;
}

const alma_op_def alma__op_MsEmbedLayerNormalization = {.name = "EmbedLayerNormalization", .domain = "com.microsoft",
  .versions = {1}, .min_inputs = 7, .max_inputs = 9, .min_outputs = 1, .max_outputs = 3,
  .flags = ALMA_OP_EMPTY_INPUTS_OK, /* segment_ids (1) is optional; the others are checked */
  .infer = eln_infer, .exec = eln_exec};

/* ==== the attention core =======================================================================
 * For every (batch b, head h): scores[S, T] = mask[b] + scale * Q K^T (+ attention_bias), softmax
 * over each row, out = P V. Q rows live at q + (b*S + s) * q_ld + h * q_hs (the projection's layout,
 * not copied); K and V are [B, N, T, D] (the present layout); out is [B, S, N * Dv]. mask is the
 * additive [B, S, T] mask of att_mask_build, or NULL. */

typedef struct {
  int64_t B, N, S, T, P, Dk, Dv;
  float scale;
  const float *q;
  int64_t q_ld, q_hs;
  const float *k, *v;
  const float *mask;      /* [B, S, T] or NULL */
  const float *bias;      /* attention_bias [bB, bN, S, T] or NULL */
  int64_t bias_b, bias_n; /* 1 or B, 1 or N */
  float *out;
  float *qk;              /* [B, N, S, T] scores before the softmax, or NULL */
} att_core;

/* one (batch b, head h) pair, sc a scratch of S * T floats */
static alma_status att_head(const att_core *c, int64_t b, int64_t h, float *sc) {
  int64_t S = c->S, T = c->T;
  if (c->mask) memcpy(sc, c->mask + b * S * T, (size_t)(S * T) * sizeof *sc);
  const float *K = c->k + (b * c->N + h) * T * c->Dk, *V = c->v + (b * c->N + h) * T * c->Dv;
  ALMA_TRY(alma__sgemm(0, 1, S, T, c->Dk, c->scale, c->q + b * S * c->q_ld + h * c->q_hs, c->q_ld, K, c->Dk,
                       c->mask ? 1.0f : 0.0f, sc, T));
  if (c->bias) {
    const float *br = c->bias + ((c->bias_b == 1 ? 0 : b) * c->bias_n + (c->bias_n == 1 ? 0 : h)) * S * T;
    for (int64_t i = 0; i < S * T; i++) sc[i] += br[i];
  }
  if (c->qk) memcpy(c->qk + (b * c->N + h) * S * T, sc, (size_t)(S * T) * sizeof *sc);
  for (int64_t s = 0; s < S; s++) {
    float *row = sc + s * T;
    float inv = 1.0f / alma__softmax_exp_row(row, T, NULL, 0);
    for (int64_t j = 0; j < T; j++) row[j] *= inv;
  }
  return alma__sgemm(0, 0, S, c->Dv, T, 1.0f, sc, T, V, c->Dv, 0.0f, c->out + b * S * c->N * c->Dv + h * c->Dv,
                     c->N * c->Dv);
}

typedef struct {
  const att_core *c;
  atomic_int failed;
} att_job;

static void att_item(void *arg, int64_t item) {
  att_job *J = arg;
  const att_core *c = J->c;
  float *sc = malloc(cnt1(c->S * c->T) * sizeof *sc);
  if (!sc || att_head(c, item / c->N, item % c->N, sc) != ALMA_OK) atomic_store(&J->failed, 1);
  free(sc);
}

/* every (batch, head) pair: in order on the calling thread, or as items run by pf */
static alma_status att_core_run(const alma_node *n, const att_core *c, int threads, alma__nbits_parfor pf,
                                void *pctx) {
  if (pf && threads > 1 && c->B * c->N > 1) {
    att_job J = {.c = c};
    atomic_init(&J.failed, 0);
    pf(pctx, c->B * c->N, att_item, &J);
    if (atomic_load(&J.failed)) return alma__op_error(n, ALMA_ERR_NOMEM, "out of memory for a head's attention scores");
    return ALMA_OK;
  }
  float *sc = alma__nn_alloc(n, cnt1(c->S * c->T), sizeof *sc);
  if (!sc) return ALMA_ERR_NOMEM;
  alma_status st = ALMA_OK;
  for (int64_t i = 0; i < c->B * c->N && st == ALMA_OK; i++) st = att_head(c, i / c->N, i % c->N, sc);
  free(sc);
  return st;
}

/* The input projection y [M, N] = x [M, K] w [K, N] + bias [N]: one call on the calling thread, or
 * blocks of PROJ_BLK columns (the last takes the remainder) run by pf. alma__sgemm_bias packs and sums
 * every element of a 16-column panel the same way whatever the columns around it, so the blocks give
 * the single call's result bit for bit (M >= 4 and blocks of at least 4 columns: its packed path). */
#define PROJ_BLK 64

typedef struct {
  int64_t M, N, K, blocks;
  const float *x, *w, *bias;
  float *y;
  atomic_int failed;
} proj_job;

static void proj_item(void *arg, int64_t item) {
  proj_job *J = arg;
  int64_t j0 = item * PROJ_BLK, j1 = item == J->blocks - 1 ? J->N : j0 + PROJ_BLK;
  if (alma__sgemm_bias(0, 0, J->M, j1 - j0, J->K, 1.0f, J->x, J->K, J->w + j0, J->N, 0.0f, J->y + j0, J->N, NULL,
                       J->bias ? J->bias + j0 : NULL) != ALMA_OK)
    atomic_store(&J->failed, 1);
}

static alma_status att_project(const alma_node *n, int64_t M, int64_t N, int64_t K, const float *x, const float *w,
                               const float *bias, float *y, int threads, alma__nbits_parfor pf, void *pctx) {
  proj_job J = {.M = M, .N = N, .K = K, .blocks = N / PROJ_BLK, .x = x, .w = w, .bias = bias, .y = y};
  if (!pf || threads <= 1 || J.blocks < 2)
    return alma__sgemm_bias(0, 0, M, N, K, 1.0f, x, K, w, N, 0.0f, y, N, NULL, bias);
  atomic_init(&J.failed, 0);
  pf(pctx, J.blocks, proj_item, &J);
  if (atomic_load(&J.failed)) return alma__op_error(n, ALMA_ERR_NOMEM, "out of memory in the QKV projection");
  return ALMA_OK;
}

/* ONNX Runtime's mask kinds (AttentionMaskType) */
enum { MASK_NONE, MASK_1D_LEN, MASK_1D_END_START, MASK_2D, MASK_3D };

/* Checks mask_index / key_padding_mask of shape [B], [2B] (Attention only), [3B+2], [B, T], [B, S, T]
 * and says its kind. */
static alma_status att_mask_kind(const alma_node *n, const alma_tensor *m, int64_t B, int64_t S, int64_t T,
                                 int allow_2b, const char *what, int *kind) {
  char s1[128];
  *kind = MASK_NONE;
  if (!m) return ALMA_OK;
  if (m->dtype != ALMA_DTYPE_INT32)
    return alma__op_error(n, ALMA_ERR_TYPE, "%s of dtype %s (int32 expected)", what, alma_dtype_name(m->dtype));
  if (m->rank == 1 && (m->dims[0] == B || m->dims[0] == 3 * B + 2)) *kind = MASK_1D_LEN;
  else if (m->rank == 1 && allow_2b && m->dims[0] == 2 * B) *kind = MASK_1D_END_START;
  else if (m->rank == 2 && m->dims[0] == B && m->dims[1] == T) *kind = MASK_2D;
  else if (m->rank == 3 && m->dims[0] == B && m->dims[1] == S && m->dims[2] == T) *kind = MASK_3D;
  else if (m->rank == 4)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "%s of shape %s: the 4-D (Megatron) mask is not implemented "
                          "(ONNX Runtime's CPU kernel does not implement it either)", what,
                          alma__shape_str(m->rank, m->dims, s1, sizeof s1));
  else
    return alma__op_error(n, ALMA_ERR_SHAPE, "%s of shape %s (expected [%lld]%s, [%lld], [%lld, %lld] or [%lld, %lld, %lld])",
                          what, alma__shape_str(m->rank, m->dims, s1, sizeof s1), (long long)B,
                          allow_2b ? ", [2 * B]" : "", (long long)(3 * B + 2), (long long)B, (long long)T, (long long)B,
                          (long long)S, (long long)T);
  return ALMA_OK;
}

/* The additive mask [B, S, T] ONNX Runtime's PrepareMask builds: mask_filter_value where the mask says
 * padding, -FLT_MAX after past + s when causal; NULL (no allocation) when neither applies. */
static alma_status att_mask_build(const alma_node *n, const alma_tensor *m, int kind, int causal, int64_t B, int64_t S,
                                  int64_t T, int64_t P, float filter, float **out) {
  *out = NULL;
  if (kind == MASK_NONE && !causal) return ALMA_OK;
  float *mk = alma__nn_alloc(n, cnt1(B * S * T), sizeof *mk);
  if (!mk) return ALMA_ERR_NOMEM;
  const int32_t *mi = m ? m->data : NULL;
  for (int64_t b = 0; b < B; b++) {
    float *p = mk + b * S * T;
    if (kind == MASK_3D) {
      for (int64_t i = 0; i < S * T; i++) p[i] = mi[b * S * T + i] > 0 ? 0.0f : filter;
    } else {
      for (int64_t j = 0; j < T; j++) p[j] = 0.0f;
      if (kind == MASK_2D) {
        for (int64_t j = 0; j < T; j++) p[j] = mi[b * T + j] > 0 ? 0.0f : filter;
      } else if (kind == MASK_1D_LEN || kind == MASK_1D_END_START) {
        int64_t end = mi[b];
        for (int64_t j = end < 0 ? 0 : end; j < T; j++) p[j] = filter;
        if (kind == MASK_1D_END_START) {
          int64_t start = mi[b + B] < T ? mi[b + B] : T;
          for (int64_t j = 0; j < start; j++) p[j] = filter;
        }
      }
      for (int64_t s = 1; s < S; s++) memcpy(p + s * T, p, (size_t)T * sizeof *p);
    }
    if (causal)
      for (int64_t s = 0; s < S; s++)
        for (int64_t j = P + s + 1; j < T; j++) p[s * T + j] = -FLT_MAX;
  }
  *out = mk;
  return ALMA_OK;
}

static alma_status att_bias_check(const alma_node *n, const alma_tensor *ab, int64_t B, int64_t N, int64_t S,
                                  int64_t T) {
  char s1[128];
  if (!ab) return ALMA_OK;
  if (ab->dtype != ALMA_DTYPE_FLOAT32)
    return alma__op_error(n, ALMA_ERR_TYPE, "attention_bias of dtype %s (float expected)", alma_dtype_name(ab->dtype));
  if (ab->rank != 4 || (ab->dims[0] != 1 && ab->dims[0] != B) || (ab->dims[1] != 1 && ab->dims[1] != N) ||
      ab->dims[2] != S || ab->dims[3] != T)
    return alma__op_error(n, ALMA_ERR_SHAPE, "attention_bias of shape %s (expected [%lld or 1, %lld or 1, %lld, %lld])",
                          alma__shape_str(ab->rank, ab->dims, s1, sizeof s1), (long long)B, (long long)N, (long long)S,
                          (long long)T);
  return ALMA_OK;
}

/* rows [B, L, N, D] (row stride ld, head stride hs, + bias[h * D + d] when given) after past [B, N, P, D]
 * into dst [B, N, P + L, D] */
static void att_put_bnsh(float *dst, const float *past, int64_t P, const float *x, int64_t ld, int64_t hs,
                         const float *bias, int64_t B, int64_t N, int64_t L, int64_t D) {
  int64_t T = P + L;
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < N; h++) {
      float *d = dst + (b * N + h) * T * D;
      if (P) memcpy(d, past + (b * N + h) * P * D, (size_t)(P * D) * sizeof *d);
      for (int64_t l = 0; l < L; l++) {
        const float *src = x + (b * L + l) * ld + h * hs;
        float *o = d + (P + l) * D;
        for (int64_t e = 0; e < D; e++) o[e] = src[e] + (bias ? bias[h * D + e] : 0.0f);
      }
    }
}

/* ==== Attention (com.microsoft 1) ==============================================================
 * input [B, S, Hin] times weights [Hin, Hq + Hk + Hv] (+ bias) gives Q, K, V; past [2, B, N, P, Dk]
 * comes before K and V, present [2, B, N, P + S, Dk] is the result. */

typedef struct {
  int64_t B, S, Hin, Hq, Hk, Hv, N, P, T;
  int causal, mask_kind;
  float scale, filter;
} attn_geom;

static alma_status attn_setup(const alma_node *n, const alma_tensor *const *in, int nin, int nout, attn_geom *g) {
  char s1[128], s2[128];
  const alma_tensor *x = in[0], *w = in[1], *bias = alma__nn_in(in, nin, 2), *mask = alma__nn_in(in, nin, 3),
                    *past = alma__nn_in(in, nin, 4), *ab = alma__nn_in(in, nin, 5), *psl = alma__nn_in(in, nin, 6);
  memset(g, 0, sizeof *g);
  g->N = alma__attr_i(n, "num_heads", 0);
  if (g->N <= 0) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "num_heads=%lld (positive, required)", (long long)g->N);
  if (alma__attr_i(n, "do_rotary", 0))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "do_rotary=1 is not implemented (ONNX Runtime's CPU kernel does not "
                          "implement it either: fuse to MultiHeadAttention + RotaryEmbedding)");
  if (alma__attr_i(n, "past_present_share_buffer", 0) || psl)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "past_present_share_buffer / past_sequence_length are not implemented");
  if (x->dtype != ALMA_DTYPE_FLOAT32)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input of dtype %s (alma implements float32 Attention only, "
                          "as ONNX Runtime's CPU kernel)", alma_dtype_name(x->dtype));
  if (x->rank != 3)
    return alma__op_error(n, ALMA_ERR_SHAPE, "input of shape %s ([B, S, hidden] expected)",
                          alma__shape_str(x->rank, x->dims, s1, sizeof s1));
  g->B = x->dims[0];
  g->S = x->dims[1];
  g->Hin = x->dims[2];
  if (w->dtype != x->dtype || w->rank != 2 || w->dims[0] != g->Hin)
    return alma__op_error(n, ALMA_ERR_SHAPE, "weights %s of shape %s (float [%lld, Hq + Hk + Hv] expected)",
                          alma_dtype_name(w->dtype), alma__shape_str(w->rank, w->dims, s1, sizeof s1), (long long)g->Hin);
  const int64_t *qkv;
  int nq = alma__attr_ints(n, "qkv_hidden_sizes", &qkv);
  if (nq) {
    if (nq != 3 || qkv[0] <= 0 || qkv[1] <= 0 || qkv[2] <= 0 || qkv[0] != qkv[1])
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "qkv_hidden_sizes must be 3 positive values with Q's equal to K's");
    g->Hq = qkv[0];
    g->Hk = qkv[1];
    g->Hv = qkv[2];
  } else {
    if (w->dims[1] % 3)
      return alma__op_error(n, ALMA_ERR_SHAPE, "weights' second dim %lld is not divisible by 3 (and no qkv_hidden_sizes)",
                            (long long)w->dims[1]);
    g->Hq = g->Hk = g->Hv = w->dims[1] / 3;
  }
  if (g->Hq + g->Hk + g->Hv != w->dims[1])
    return alma__op_error(n, ALMA_ERR_SHAPE, "weights of shape %s: second dim is not Hq + Hk + Hv = %lld",
                          alma__shape_str(2, w->dims, s1, sizeof s1), (long long)(g->Hq + g->Hk + g->Hv));
  if (g->Hq % g->N || g->Hv % g->N)
    return alma__op_error(n, ALMA_ERR_SHAPE, "hidden sizes %lld (Q, K) and %lld (V) must be multiples of num_heads %lld",
                          (long long)g->Hq, (long long)g->Hv, (long long)g->N);
  if (bias && (bias->dtype != x->dtype || bias->rank != 1 || bias->dims[0] != w->dims[1]))
    return alma__op_error(n, ALMA_ERR_SHAPE, "bias %s of shape %s (float [%lld])", alma_dtype_name(bias->dtype),
                          alma__shape_str(bias->rank, bias->dims, s1, sizeof s1), (long long)w->dims[1]);
  int64_t Dk = g->Hq / g->N;
  if (past) {
    if (g->Hq != g->Hv)
      return alma__op_error(n, ALMA_ERR_SHAPE, "past needs equal Q, K and V hidden sizes (%lld, %lld, %lld)",
                            (long long)g->Hq, (long long)g->Hk, (long long)g->Hv);
    if (past->dtype != x->dtype || past->rank != 5 || past->dims[0] != 2 || past->dims[1] != g->B ||
        past->dims[2] != g->N || past->dims[4] != Dk)
      return alma__op_error(n, ALMA_ERR_SHAPE, "past %s of shape %s (float [2, %lld, %lld, P, %lld] expected)",
                            alma_dtype_name(past->dtype), alma__shape_str(past->rank, past->dims, s1, sizeof s1),
                            (long long)g->B, (long long)g->N, (long long)Dk);
    g->P = past->dims[3];
  }
  if (nout > 1 && n->outputs && n->n_outputs > 1 && n->outputs[1] >= 0 && g->Hq != g->Hv)
    return alma__op_error(n, ALMA_ERR_SHAPE, "present needs equal K and V hidden sizes (%lld, %lld)", (long long)g->Hk,
                          (long long)g->Hv);
  g->T = g->P + g->S;
  g->causal = alma__attr_i(n, "unidirectional", 0) != 0;
  ALMA_TRY(att_mask_kind(n, mask, g->B, g->S, g->T, 1, "mask_index", &g->mask_kind));
  ALMA_TRY(att_bias_check(n, ab, g->B, g->N, g->S, g->T));
  float sc = alma__attr_f(n, "scale", 0.0f);
  g->scale = sc == 0.0f ? 1.0f / sqrtf((float)Dk) : sc;
  g->filter = alma__attr_f(n, "mask_filter_value", -10000.0f);
  (void)s2;
  return ALMA_OK;
}

static alma_status attn_infer(INFER_ARGS) {
  attn_geom g;
  ALMA_TRY(attn_setup(n, in, nin, nout, &g));
  int64_t o[3] = {g.B, g.S, g.Hv}, p[5] = {2, g.B, g.N, g.T, g.Hq / g.N};
  alma__set_shape(&out[0], ALMA_DTYPE_FLOAT32, 3, o);
  if (nout > 1) alma__set_shape(&out[1], ALMA_DTYPE_FLOAT32, 5, p);
  return ALMA_OK;
}

static alma_status attn_exec_par(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                 int nout, int threads, alma__nbits_parfor pf, void *pctx) {
  attn_geom g;
  ALMA_TRY(attn_setup(n, in, nin, nout, &g));
  const alma_tensor *bias = alma__nn_in(in, nin, 2), *past = alma__nn_in(in, nin, 4), *ab = alma__nn_in(in, nin, 5);
  int64_t B = g.B, S = g.S, N = g.N, Dk = g.Hq / N, Dv = g.Hv / N, Ht = g.Hq + g.Hk + g.Hv, T = g.T, P = g.P;
  float *qkv = alma__nn_alloc(n, cnt1(B * S * Ht), sizeof *qkv);
  float *kv = alma__nn_alloc(n, cnt1(B * N * T * (Dk + Dv)), sizeof *kv);
  float *mask = NULL;
  alma_status st = ALMA_OK;
  if (!qkv || !kv) {
    st = ALMA_ERR_NOMEM;
    goto done;
  }
  /* one GEMM for the three projections, the bias folded into its store */
  st = att_project(n, B * S, Ht, g.Hin, in[0]->data, in[1]->data, bias ? bias->data : NULL, qkv, threads, pf, pctx);
  if (st != ALMA_OK) goto done;
  float *kb = kv, *vb = kv + B * N * T * Dk;
  const float *pk = past ? past->data : NULL;
  att_put_bnsh(kb, pk, P, qkv + g.Hq, Ht, Dk, NULL, B, N, S, Dk);
  att_put_bnsh(vb, pk ? pk + B * N * P * Dk : NULL, P, qkv + g.Hq + g.Hk, Ht, Dv, NULL, B, N, S, Dv);
  st = att_mask_build(n, alma__nn_in(in, nin, 3), g.mask_kind, g.causal, B, S, T, P, g.filter, &mask);
  if (st != ALMA_OK) goto done;
  att_core c = {.B = B, .N = N, .S = S, .T = T, .P = P, .Dk = Dk, .Dv = Dv, .scale = g.scale, .q = qkv, .q_ld = Ht,
                .q_hs = Dk, .k = kb, .v = vb, .mask = mask, .bias = ab ? ab->data : NULL,
                .bias_b = ab ? ab->dims[0] : 1, .bias_n = ab ? ab->dims[1] : 1, .out = out[0].data};
  st = att_core_run(n, &c, threads, pf, pctx);
  if (st == ALMA_OK && alma__nn_out_wanted(n, nout, 1)) memcpy(out[1].data, kv, (size_t)(2 * B * N * T * Dk) * sizeof *kv);
done:
  free(qkv);
  free(kv);
  free(mask);
  return st;
}

static alma_status attn_exec(EXEC_ARGS) {
  (void)ctx;
  return attn_exec_par(n, in, nin, out, nout, 1, NULL, NULL);
}

static void attn_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                      int64_t *macs, int64_t *flops) {
  attn_geom g;
  (void)out;
  *macs = *flops = 0;
  if (attn_setup(n, in, nin, nout, &g) != ALMA_OK) return;
  *macs = g.B * g.S * g.Hin * (g.Hq + g.Hk + g.Hv) + g.B * g.S * g.T * (g.Hq + g.Hv);
  *flops = 2 * *macs;
}

const alma_op_def alma__op_MsAttention = {.name = "Attention", .domain = "com.microsoft", .versions = {1},
  .min_inputs = 2, .max_inputs = 7, .min_outputs = 1, .max_outputs = 2, .infer = attn_infer, .exec = attn_exec,
  .cost = attn_cost};

/* ==== MultiHeadAttention (com.microsoft 1) =====================================================
 * query [B, S, Hq] with key [B, L, Hq] and value [B, L, Hv] (+ bias [Hq + Hq + Hv]), or key and value
 * already [B, N, L, D] (cross attention: bias adds to Q only), or packed QKV query [B, S, N, 3, D]
 * without key and value, or packed KV key [B, L, N, 2, D] without value (the packed forms have no
 * bias; ONNX Runtime's CPU kernel refuses them, alma computes them as the unpacked ones).
 * past_key / past_value [B, N, P, D] come before the new K, V; present_key / present_value are
 * [B, N, P + L, D]; qk [B, N, S, T] is the scaled Q K^T plus masks and bias, before the softmax. */

typedef struct {
  int64_t B, S, L, N, Dk, Dv, P, T;
  int form; /* 0: 3-D K, V; 1: BNSH K, V; 2: packed QKV; 3: packed KV */
  int causal, mask_kind;
  float scale, filter;
} mha_geom;

static alma_status mha_setup(const alma_node *n, const alma_tensor *const *in, int nin, mha_geom *g) {
  char s1[128], s2[128], s3[128];
  const alma_tensor *q = in[0], *k = alma__nn_in(in, nin, 1), *v = alma__nn_in(in, nin, 2),
                    *bias = alma__nn_in(in, nin, 3), *mask = alma__nn_in(in, nin, 4), *ab = alma__nn_in(in, nin, 5),
                    *pk = alma__nn_in(in, nin, 6), *pv = alma__nn_in(in, nin, 7);
  memset(g, 0, sizeof *g);
  g->N = alma__attr_i(n, "num_heads", 0);
  if (g->N <= 0) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "num_heads=%lld (positive, required)", (long long)g->N);
  if (alma__nn_in(in, nin, 8) || alma__nn_in(in, nin, 9))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "past_sequence_length and cache_indirection (beam search buffer "
                          "sharing) are not implemented");
  const alma_tensor *fl[] = {q, k, v, bias, ab, pk, pv};
  static const char *const fn[] = {"query", "key", "value", "bias", "attention_bias", "past_key", "past_value"};
  for (int i = 0; i < 7; i++)
    if (fl[i] && fl[i]->dtype != ALMA_DTYPE_FLOAT32)
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "%s of dtype %s (alma implements float32 MultiHeadAttention only, "
                            "as ONNX Runtime's CPU kernel)", fn[i], alma_dtype_name(fl[i]->dtype));
  g->B = q->dims[0];
  if (q->rank == 5) {
    if (k || v || bias || q->dims[3] != 3 || q->dims[2] != g->N)
      return alma__op_error(n, ALMA_ERR_SHAPE, "packed QKV query of shape %s ([B, S, %lld, 3, D], without key, value "
                            "and bias)", alma__shape_str(q->rank, q->dims, s1, sizeof s1), (long long)g->N);
    g->form = 2;
    g->S = g->L = q->dims[1];
    g->Dk = g->Dv = q->dims[4];
  } else {
    if (q->rank != 3)
      return alma__op_error(n, ALMA_ERR_SHAPE, "query of shape %s ([B, S, hidden] or [B, S, N, 3, D])",
                            alma__shape_str(q->rank, q->dims, s1, sizeof s1));
    if (!k) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "key is required with a 3-D query");
    g->S = q->dims[1];
    if (q->dims[2] % g->N)
      return alma__op_error(n, ALMA_ERR_SHAPE, "query's hidden size %lld is not a multiple of num_heads %lld",
                            (long long)q->dims[2], (long long)g->N);
    g->Dk = q->dims[2] / g->N;
    if (k->rank == 5) {
      if (v || bias || k->dims[0] != g->B || k->dims[2] != g->N || k->dims[3] != 2 || k->dims[4] != g->Dk)
        return alma__op_error(n, ALMA_ERR_SHAPE, "packed KV key of shape %s ([%lld, L, %lld, 2, %lld], without value "
                              "and bias)", alma__shape_str(k->rank, k->dims, s1, sizeof s1), (long long)g->B,
                              (long long)g->N, (long long)g->Dk);
      g->form = 3;
      g->L = k->dims[1];
      g->Dv = g->Dk;
    } else if (k->rank == 3) {
      if (!v || v->rank != 3 || k->dims[0] != g->B || v->dims[0] != g->B || k->dims[2] != q->dims[2] ||
          v->dims[1] != k->dims[1] || v->dims[2] % g->N)
        return alma__op_error(n, ALMA_ERR_SHAPE, "query %s, key %s, value %s (expected [B, L, %lld] and [B, L, N * Dv])",
                              alma__shape_str(q->rank, q->dims, s1, sizeof s1),
                              alma__shape_str(k->rank, k->dims, s2, sizeof s2),
                              v ? alma__shape_str(v->rank, v->dims, s3, sizeof s3) : "(none)", (long long)q->dims[2]);
      g->L = k->dims[1];
      g->Dv = v->dims[2] / g->N;
    } else if (k->rank == 4) {
      if (!v || v->rank != 4 || k->dims[0] != g->B || k->dims[1] != g->N || k->dims[3] != g->Dk ||
          v->dims[0] != g->B || v->dims[1] != g->N || v->dims[2] != k->dims[2])
        return alma__op_error(n, ALMA_ERR_SHAPE, "key %s, value %s (expected [%lld, %lld, L, %lld] and [%lld, %lld, L, Dv])",
                              alma__shape_str(k->rank, k->dims, s1, sizeof s1),
                              v ? alma__shape_str(v->rank, v->dims, s2, sizeof s2) : "(none)", (long long)g->B,
                              (long long)g->N, (long long)g->Dk, (long long)g->B, (long long)g->N);
      g->form = 1;
      g->L = k->dims[2];
      g->Dv = v->dims[3];
      if (pk || pv)
        return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "past_key/past_value with key and value in [B, N, L, D] (they are "
                              "the cache already)");
    } else {
      return alma__op_error(n, ALMA_ERR_SHAPE, "key of shape %s (rank 3, 4 or 5)", alma__shape_str(k->rank, k->dims, s1, sizeof s1));
    }
  }
  if (bias && (bias->rank != 1 || bias->dims[0] != g->N * (2 * g->Dk + g->Dv)))
    return alma__op_error(n, ALMA_ERR_SHAPE, "bias of shape %s (expected [%lld])", alma__shape_str(bias->rank, bias->dims, s1, sizeof s1),
                          (long long)(g->N * (2 * g->Dk + g->Dv)));
  if (!pk != !pv) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "past_key and past_value go together");
  if (pk) {
    if (pk->rank != 4 || pk->dims[0] != g->B || pk->dims[1] != g->N || pk->dims[3] != g->Dk || pv->rank != 4 ||
        pv->dims[0] != g->B || pv->dims[1] != g->N || pv->dims[2] != pk->dims[2] || pv->dims[3] != g->Dv)
      return alma__op_error(n, ALMA_ERR_SHAPE, "past_key %s, past_value %s (expected [%lld, %lld, P, %lld] and [.., %lld])",
                            alma__shape_str(pk->rank, pk->dims, s1, sizeof s1),
                            alma__shape_str(pv->rank, pv->dims, s2, sizeof s2), (long long)g->B, (long long)g->N,
                            (long long)g->Dk, (long long)g->Dv);
    g->P = pk->dims[2];
  }
  g->T = g->P + g->L;
  g->causal = alma__attr_i(n, "unidirectional", 0) != 0;
  ALMA_TRY(att_mask_kind(n, mask, g->B, g->S, g->T, 0, "key_padding_mask", &g->mask_kind));
  ALMA_TRY(att_bias_check(n, ab, g->B, g->N, g->S, g->T));
  float sc = alma__attr_f(n, "scale", 0.0f);
  g->scale = sc == 0.0f ? 1.0f / sqrtf((float)g->Dk) : sc;
  g->filter = alma__attr_f(n, "mask_filter_value", -10000.0f);
  return ALMA_OK;
}

static alma_status mha_infer(INFER_ARGS) {
  mha_geom g;
  ALMA_TRY(mha_setup(n, in, nin, &g));
  int64_t o[3] = {g.B, g.S, g.N * g.Dv}, pk[4] = {g.B, g.N, g.T, g.Dk}, pv[4] = {g.B, g.N, g.T, g.Dv},
          qk[4] = {g.B, g.N, g.S, g.T};
  alma__set_shape(&out[0], ALMA_DTYPE_FLOAT32, 3, o);
  if (nout > 1) alma__set_shape(&out[1], ALMA_DTYPE_FLOAT32, 4, pk);
  if (nout > 2) alma__set_shape(&out[2], ALMA_DTYPE_FLOAT32, 4, pv);
  if (nout > 3) alma__set_shape(&out[3], ALMA_DTYPE_FLOAT32, 4, qk);
  return ALMA_OK;
}

static alma_status mha_exec_par(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                int nout, int threads, alma__nbits_parfor pf, void *pctx) {
  mha_geom g;
  ALMA_TRY(mha_setup(n, in, nin, &g));
  const alma_tensor *q = in[0], *k = alma__nn_in(in, nin, 1), *v = alma__nn_in(in, nin, 2),
                    *bias = alma__nn_in(in, nin, 3), *ab = alma__nn_in(in, nin, 5), *pk = alma__nn_in(in, nin, 6),
                    *pv = alma__nn_in(in, nin, 7);
  int64_t B = g.B, S = g.S, L = g.L, N = g.N, Dk = g.Dk, Dv = g.Dv, T = g.T, P = g.P;
  const float *bq = bias ? bias->data : NULL;
  float *qb = NULL, *kb = NULL, *vb = NULL, *mask = NULL;
  alma_status st = ALMA_OK;
  const float *qp = q->data;
  int64_t q_ld = N * Dk, q_hs = Dk;
  if (g.form == 2) {
    q_ld = N * 3 * Dk;
    q_hs = 3 * Dk;
  }
  if (bq) { /* Q + bias, once */
    qb = alma__nn_alloc(n, cnt1(B * S * N * Dk), sizeof *qb);
    if (!qb) return ALMA_ERR_NOMEM;
    for (int64_t r = 0; r < B * S; r++)
      for (int64_t c = 0; c < N * Dk; c++) qb[r * N * Dk + c] = qp[r * N * Dk + c] + bq[c];
    qp = qb;
  }
  if (g.form == 1) { /* BNSH key and value are used as they are */
    kb = (float *)k->data;
    vb = (float *)v->data;
  } else {
    kb = alma__nn_alloc(n, cnt1(B * N * T * Dk), sizeof *kb);
    vb = alma__nn_alloc(n, cnt1(B * N * T * Dv), sizeof *vb);
    if (!kb || !vb) {
      st = ALMA_ERR_NOMEM;
      goto done;
    }
    const float *pkd = pk ? pk->data : NULL, *pvd = pv ? pv->data : NULL;
    if (g.form == 0) {
      att_put_bnsh(kb, pkd, P, k->data, N * Dk, Dk, bq ? bq + N * Dk : NULL, B, N, L, Dk);
      att_put_bnsh(vb, pvd, P, v->data, N * Dv, Dv, bq ? bq + 2 * N * Dk : NULL, B, N, L, Dv);
    } else if (g.form == 2) {
      att_put_bnsh(kb, pkd, P, (const float *)q->data + Dk, N * 3 * Dk, 3 * Dk, NULL, B, N, L, Dk);
      att_put_bnsh(vb, pvd, P, (const float *)q->data + 2 * Dk, N * 3 * Dk, 3 * Dk, NULL, B, N, L, Dv);
    } else {
      att_put_bnsh(kb, pkd, P, k->data, N * 2 * Dk, 2 * Dk, NULL, B, N, L, Dk);
      att_put_bnsh(vb, pvd, P, (const float *)k->data + Dk, N * 2 * Dk, 2 * Dk, NULL, B, N, L, Dv);
    }
  }
  st = att_mask_build(n, alma__nn_in(in, nin, 4), g.mask_kind, g.causal, B, S, T, P, g.filter, &mask);
  if (st != ALMA_OK) goto done;
  {
    att_core c = {.B = B, .N = N, .S = S, .T = T, .P = P, .Dk = Dk, .Dv = Dv, .scale = g.scale, .q = qp,
                  .q_ld = q_ld, .q_hs = q_hs, .k = kb, .v = vb, .mask = mask, .bias = ab ? ab->data : NULL,
                  .bias_b = ab ? ab->dims[0] : 1, .bias_n = ab ? ab->dims[1] : 1, .out = out[0].data,
                  .qk = alma__nn_out_wanted(n, nout, 3) ? out[3].data : NULL};
    st = att_core_run(n, &c, threads, pf, pctx);
  }
  if (st == ALMA_OK && alma__nn_out_wanted(n, nout, 1)) memcpy(out[1].data, kb, (size_t)(B * N * T * Dk) * sizeof *kb);
  if (st == ALMA_OK && alma__nn_out_wanted(n, nout, 2)) memcpy(out[2].data, vb, (size_t)(B * N * T * Dv) * sizeof *vb);
done:
  free(qb);
  if (g.form != 1) {
    free(kb);
    free(vb);
  }
  free(mask);
  return st;
}

static alma_status mha_exec(EXEC_ARGS) {
  (void)ctx;
  return mha_exec_par(n, in, nin, out, nout, 1, NULL, NULL);
}

static void mha_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                     int64_t *macs, int64_t *flops) {
  mha_geom g;
  (void)out, (void)nout;
  *macs = *flops = 0;
  if (mha_setup(n, in, nin, &g) != ALMA_OK) return;
  *macs = g.B * g.N * g.S * g.T * (g.Dk + g.Dv);
  *flops = 2 * *macs;
}

const alma_op_def alma__op_MsMultiHeadAttention = {.name = "MultiHeadAttention", .domain = "com.microsoft",
  .versions = {1}, .min_inputs = 1, .max_inputs = 10, .min_outputs = 1, .max_outputs = 4,
  .infer = mha_infer, .exec = mha_exec, .cost = mha_cost};

/* ==== the runtimes' entry point (contrib_bert.h) ============================================== */

static const char *const par_ops[] = {"Attention", "MultiHeadAttention", "Gelu", "BiasGelu", "FastGelu",
                                      "QuickGelu", "BiasAdd", "SkipLayerNormalization",
                                      "SkipSimplifiedLayerNormalization", "GroupQueryAttention"};

int alma__contrib_par(const alma_node *n) {
  if (!n->domain || strcmp(n->domain, "com.microsoft")) return 0;
  for (size_t i = 0; i < sizeof par_ops / sizeof par_ops[0]; i++)
    if (!strcmp(n->op_type, par_ops[i])) return 1;
  return 0;
}

alma_status alma__contrib_exec_par(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                   int nout, int threads, alma__nbits_parfor pf, void *pctx) {
  const char *t = n->op_type;
  if (!strcmp(t, "GroupQueryAttention")) return alma__gqa_exec_par(n, in, nin, out, nout, threads, pf, pctx);
  if (!strcmp(t, "SkipLayerNormalization") || !strcmp(t, "SkipSimplifiedLayerNormalization"))
    return alma__skip_norm_exec_par(n, in, nin, out, nout, t[4] == 'S', threads, pf, pctx);
  if (!strcmp(t, "Attention")) return attn_exec_par(n, in, nin, out, nout, threads, pf, pctx);
  if (!strcmp(t, "MultiHeadAttention")) return mha_exec_par(n, in, nin, out, nout, threads, pf, pctx);
  if (!strcmp(t, "BiasAdd")) return biasadd_exec_par(n, in, out, threads, pf, pctx);
  return act_exec_par(n, in, nin, out, threads, pf, pctx); /* the Gelu family */
}
