/* Reference (EAGER) kernels of the fused "alma" domain ops (schemas in fused.h). FusedConv,
 * FusedGemm and FusedMatMul run the base op's kernel on a copy of the node bound to the base op,
 * then add the residual/bias and apply the activation in place, so their numerics are the base
 * op's plus one rounding per epilogue step. Attention is a row-at-a-time kernel: one row of scores
 * is live at a time, never the [Sq, Sk] matrix. */
#include <float.h>
#include <tgmath.h>

#include "ops/fused.h"
#include "ops/gemm_packed.h"
#include "ops/nn_util.h"
#include "ops/softmax_row.h"

/* ---- activations ----------------------------------------------------------------------------- */

static const struct {
  const char *name;
  alma_act_kind kind;
  int max_params;
} act_table[] = {
    {"Relu", ALMA_ACT_RELU, 0},   {"Clip", ALMA_ACT_CLIP, 2},       {"HardSwish", ALMA_ACT_HARDSWISH, 0},
    {"HardSigmoid", ALMA_ACT_HARDSIGMOID, 2}, {"Sigmoid", ALMA_ACT_SIGMOID, 0}, {"SiLU", ALMA_ACT_SILU, 0},
    {"Gelu", ALMA_ACT_GELU, 1},   {"Tanh", ALMA_ACT_TANH, 0},       {"LeakyRelu", ALMA_ACT_LEAKYRELU, 1},
};
#define N_ACTS ((int)(sizeof act_table / sizeof act_table[0]))

const char *alma__fused_act_name(alma_act_kind k) {
  if (k == ALMA_ACT_GELU_TANH) return "Gelu";
  for (int i = 0; i < N_ACTS; i++)
    if (act_table[i].kind == k) return act_table[i].name;
  return "";
}

alma_status alma__fused_act_parse(const alma_node *n, alma_fused_act *act) {
  memset(act, 0, sizeof *act);
  const alma_attr *a = alma__node_attr(n, "activation");
  const float *p = NULL;
  int np = alma__attr_floats(n, "activation_params", &p);
  if (!a) {
    if (np) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "activation_params given without an activation");
    return ALMA_OK;
  }
  if (a->type != ALMA_ATTR_STRING)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute 'activation' must be a string");
  int found = -1;
  for (int i = 0; i < N_ACTS; i++)
    if (!strcmp(a->s, act_table[i].name)) found = i;
  if (found < 0) {
    char names[256] = "";
    for (int i = 0; i < N_ACTS; i++) {
      strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
      strncat(names, act_table[i].name, sizeof names - strlen(names) - 1);
    }
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "activation '%s' (alma fuses %s)", a->s, names);
  }
  if (np > act_table[found].max_params)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "activation %s takes at most %d activation_params, %d given",
                          a->s, act_table[found].max_params, np);
  act->kind = act_table[found].kind;
  switch (act->kind) {
    case ALMA_ACT_CLIP:
      act->p0 = np > 0 ? p[0] : -INFINITY;
      act->p1 = np > 1 ? p[1] : INFINITY;
      break;
    case ALMA_ACT_HARDSIGMOID:
      act->p0 = np > 0 ? p[0] : 0.2f;
      act->p1 = np > 1 ? p[1] : 0.5f;
      break;
    case ALMA_ACT_LEAKYRELU: act->p0 = np > 0 ? p[0] : 0.01f; break;
    case ALMA_ACT_GELU:
      if (np > 0 && p[0] != 0 && p[0] != 1)
        return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "Gelu's activation_params[0] must be 0 (erf) or 1 (tanh)");
      if (np > 0 && p[0] == 1) act->kind = ALMA_ACT_GELU_TANH;
      break;
    default: break;
  }
  return ALMA_OK;
}

/* The same expressions as the standalone ops (activation.c, Clip in elementwise.c). */
#define ACT_LOOP(T, EXPR)                    \
  for (int64_t i = 0; i < cnt; i++) {        \
    T v = y[i];                              \
    y[i] = (EXPR);                           \
  }                                          \
  break;
#define ACT_KERNEL(fname, T)                                                                             \
  static void fname(const alma_fused_act *a, T *y, int64_t cnt) {                                        \
    const T p0 = (T)a->p0, p1 = (T)a->p1;                                                                \
    switch (a->kind) {                                                                                   \
      case ALMA_ACT_NONE: break;                                                                         \
      case ALMA_ACT_RELU: ACT_LOOP(T, v < 0 ? (T)0 : v)                                                 \
      case ALMA_ACT_CLIP: ACT_LOOP(T, v < p0 ? (p0 > p1 ? p1 : p0) : v > p1 ? p1 : v) /* min > max: max */ \
      case ALMA_ACT_HARDSWISH: ACT_LOOP(T, v * fmax((T)0, fmin((T)1, v / 6 + (T)0.5)))                  \
      case ALMA_ACT_HARDSIGMOID: ACT_LOOP(T, fmax((T)0, fmin((T)1, p0 * v + p1)))                       \
      case ALMA_ACT_SIGMOID: ACT_LOOP(T, v >= 0 ? 1 / (1 + exp(-v)) : exp(v) / (1 + exp(v)))            \
      case ALMA_ACT_SILU: ACT_LOOP(T, v * (v >= 0 ? 1 / (1 + exp(-v)) : exp(v) / (1 + exp(v))))         \
      case ALMA_ACT_GELU: ACT_LOOP(T, (T)0.5 * v * (1 + erf(v * (T)0.70710678118654752440)))            \
      case ALMA_ACT_GELU_TANH:                                                                           \
        ACT_LOOP(T, (T)0.5 * v * (1 + tanh((T)0.79788456080286535588 * (v + (T)0.044715 * v * v * v)))) \
      case ALMA_ACT_TANH: ACT_LOOP(T, tanh(v))                                                          \
      case ALMA_ACT_LEAKYRELU: ACT_LOOP(T, v < 0 ? p0 * v : v)                                          \
    }                                                                                                    \
  }
ACT_KERNEL(act_f32, float)
ACT_KERNEL(act_f64, double)

/* float32: Tanh, the tanh Gelu, Sigmoid and SiLU on the vectorised tanhf/expf (softmax_row.h), as their
 * standalone ops */
static void act_f32v(const alma_fused_act *act, float *y, int64_t cnt) {
  if (act->kind == ALMA_ACT_TANH) alma__tanh_row(y, y, cnt);
  else if (act->kind == ALMA_ACT_SIGMOID || act->kind == ALMA_ACT_SILU)
    alma__sigmoid_row(y, y, cnt, act->kind == ALMA_ACT_SILU);
  else if (act->kind == ALMA_ACT_GELU_TANH) alma__gelu_tanh_row(y, y, cnt);
  else act_f32(act, y, cnt);
}

void alma__fused_act_f32(const alma_fused_act *act, float *y, int64_t count) { act_f32v(act, y, count); }

alma_status alma__fused_act_apply(const alma_node *n, const alma_fused_act *act, alma_tensor *y) {
  if (act->kind == ALMA_ACT_NONE) return ALMA_OK;
  int64_t cnt = alma_tensor_numel(y);
  switch (y->dtype) {
    case ALMA_DTYPE_FLOAT32: act_f32v(act, y->data, cnt); return ALMA_OK;
    case ALMA_DTYPE_FLOAT64: act_f64(act, y->data, cnt); return ALMA_OK;
    case ALMA_DTYPE_FLOAT16:
    case ALMA_DTYPE_BFLOAT16: {
      float buf[1024];
      for (int64_t i = 0; i < cnt; i += 1024) {
        int64_t m = cnt - i < 1024 ? cnt - i : 1024;
        for (int64_t j = 0; j < m; j++) buf[j] = (float)alma__get_f64(y->data, y->dtype, i + j);
        act_f32v(act, buf, m);
        for (int64_t j = 0; j < m; j++) alma__set_f64(y->data, y->dtype, i + j, buf[j]);
      }
      return ALMA_OK;
    }
    default: return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "activation on dtype %s", alma_dtype_name(y->dtype));
  }
}

/* ---- shared epilogue helpers ----------------------------------------------------------------- */

/* z broadcasts unidirectionally to y (numpy rules, y's shape unchanged). */
static alma_status check_addend(const alma_node *n, const char *what, const alma_tensor *z, const alma_tensor *y) {
  if (z->dtype != y->dtype)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%s has dtype %s, the output %s", what, alma_dtype_name(z->dtype),
                          alma_dtype_name(y->dtype));
  int ok = z->rank <= y->rank;
  for (int i = 0; ok && i < z->rank; i++) {
    int64_t d = z->dims[i], w = y->dims[y->rank - z->rank + i];
    ok = d == 1 || d == w;
  }
  if (!ok) {
    char s1[128], s2[128];
    return alma__op_error(n, ALMA_ERR_SHAPE, "%s of shape %s does not broadcast to the output shape %s", what,
                          alma__shape_str(z->rank, z->dims, s1, sizeof s1), alma__shape_str(y->rank, y->dims, s2, sizeof s2));
  }
  return ALMA_OK;
}

/* y += z, z already checked by check_addend. */
static void add_into(alma_tensor *y, const alma_tensor *z) {
  int64_t cnt = alma_tensor_numel(y), zn = alma_tensor_numel(z);
  int64_t last = y->rank ? y->dims[y->rank - 1] : 1;
  int same = zn == cnt;
  /* a vector along the last axis: every other dim of z is 1 */
  int row = !same && z->rank >= 1 && z->dims[z->rank - 1] == last && zn == last;
  if (y->dtype == ALMA_DTYPE_FLOAT32) {
    float *ys = y->data;
    const float *zs = z->data;
    if (same) {
      for (int64_t i = 0; i < cnt; i++) ys[i] += zs[i];
      return;
    }
    if (row) {
      for (int64_t r = 0; r < cnt; r += last)
        for (int64_t j = 0; j < last; j++) ys[r + j] += zs[j];
      return;
    }
    for (int64_t i = 0; i < cnt; i++) ys[i] += zs[alma__broadcast_index(i, y->rank, y->dims, z->rank, z->dims)];
    return;
  }
  for (int64_t i = 0; i < cnt; i++) {
    int64_t zi = same ? i : row ? i % last : alma__broadcast_index(i, y->rank, y->dims, z->rank, z->dims);
    alma__set_f64(y->data, y->dtype, i, alma__get_f64(y->data, y->dtype, i) + alma__get_f64(z->data, z->dtype, zi));
  }
}

/* A copy of the fused node bound to its base op, so the base kernels read the same attributes. */
static alma_node as_base(const alma_node *n, const alma_op_def *op, int version, int nin) {
  alma_node b = *n;
  b.prepared = NULL; /* the copy neither owns nor replaces n's prepared state (graph/graph.h) */
  b.op = op;
  b.since_version = version;
  if (b.n_inputs > nin) b.n_inputs = nin;
  return b;
}


typedef struct fused_kind {
  const alma_op_def *base;
  int version;   /* base op version whose rules apply */
  int base_nin;  /* inputs that go to the base op */
  const char *addend; /* name of the extra input (index base_nin), NULL if none */
} fused_kind;

static fused_kind kind_of(const alma_node *n) {
  fused_kind k = {0};
  if (!strcmp(n->op_type, "FusedConv")) k = (fused_kind){&alma__op_Conv, 11, 3, "Z"};
  else if (!strcmp(n->op_type, "FusedGemm")) k = (fused_kind){&alma__op_Gemm, 13, 3, NULL};
  else k = (fused_kind){&alma__op_MatMul, 13, 2, "bias"};
  return k;
}

static alma_status fused_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  fused_kind k = kind_of(n);
  alma_fused_act act;
  ALMA_TRY(alma__fused_act_parse(n, &act));
  alma_node b = as_base(n, k.base, k.version, k.base_nin);
  ALMA_TRY(k.base->infer(&b, in, nin < k.base_nin ? nin : k.base_nin, out, nout));
  if (!alma__dtype_is_float(out[0].dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "dtype %s (fused ops take float types)",
                          alma_dtype_name(out[0].dtype));
  const alma_tensor *z = k.addend ? alma__nn_in(in, nin, k.base_nin) : NULL;
  if (z) ALMA_TRY(check_addend(n, k.addend, z, &out[0]));
  return ALMA_OK;
}

static alma_status fused_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                              alma_tensor *out, int nout) {
  fused_kind k = kind_of(n);
  alma_fused_act act;
  ALMA_TRY(alma__fused_act_parse(n, &act));
  alma_node b = as_base(n, k.base, k.version, k.base_nin);
  int bnin = nin < k.base_nin ? nin : k.base_nin;
  /* Gemm/MatMul keep packed constant weights in n's prepared slot, not the copy's */
  ALMA_TRY(k.base == &alma__op_Conv ? k.base->exec(ctx, &b, in, bnin, out, nout)
                                    : alma__gemm_exec_owned(ctx, &b, n, in, bnin, out, nout));
  const alma_tensor *z = k.addend ? alma__nn_in(in, nin, k.base_nin) : NULL;
  if (z) {
    ALMA_TRY(check_addend(n, k.addend, z, &out[0]));
    add_into(&out[0], z);
  }
  return alma__fused_act_apply(n, &act, &out[0]);
}

static void fused_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                       int64_t *macs, int64_t *flops) {
  fused_kind k = kind_of(n);
  alma_node b = as_base(n, k.base, k.version, k.base_nin);
  *macs = *flops = 0;
  if (k.base->cost) k.base->cost(&b, in, nin < k.base_nin ? nin : k.base_nin, out, nout, macs, flops);
  alma_fused_act act;
  int64_t cnt = nout > 0 ? alma_tensor_numel(&out[0]) : 0;
  if (k.addend && alma__nn_in(in, nin, k.base_nin)) *flops += cnt;
  if (alma__fused_act_parse(n, &act) == ALMA_OK && act.kind != ALMA_ACT_NONE) *flops += cnt;
}

const alma_op_def alma__op_FusedConv = {.name = "FusedConv", .domain = "alma", .versions = {1},
                                        .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
                                        .infer = fused_infer, .exec = fused_exec, .cost = fused_cost};
const alma_op_def alma__op_FusedGemm = {.name = "FusedGemm", .flags = ALMA_OP_FILLS_OUTPUTS, .domain = "alma", .versions = {1},
                                        .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
                                        .infer = fused_infer, .exec = fused_exec, .cost = fused_cost};
const alma_op_def alma__op_FusedMatMul = {.name = "FusedMatMul", .flags = ALMA_OP_FILLS_OUTPUTS, .domain = "alma", .versions = {1},
                                          .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
                                          .infer = fused_infer, .exec = fused_exec, .cost = fused_cost};

/* ---- Attention --------------------------------------------------------------------------------- */

typedef struct attn_shape {
  int qbr, kbr, vbr, sbr, obr; /* batch ranks: Q, K, V, scores, output */
  int64_t qbd[ALMA_MAX_RANK], kbd[ALMA_MAX_RANK], vbd[ALMA_MAX_RANK], sbd[ALMA_MAX_RANK], obd[ALMA_MAX_RANK];
  int64_t Sq, Sk, D, Dv;
  int64_t mcols; /* columns the mask is laid against: Sk, or the mask's own last dim under onnx_mask */
  int kt, onnx, causal;
  int64_t coff; /* causal: query i sees key j iff j <= i + coff */
  float scale;
} attn_shape;

/* The keys query row i may see under causal: [0, limit), limit clamped to [0, Sk]. */
static inline int64_t attn_causal_limit(const attn_shape *as, int64_t i) {
  if (!as->causal) return as->Sk;
  int64_t l = i + as->coff + 1;
  return l < 0 ? 0 : l > as->Sk ? as->Sk : l;
}

alma_status alma__attn_causal_offset(const alma_node *n, const alma_tensor *const *in, int nin, int64_t Sq,
                                     int64_t Sk, int *causal, int64_t *offset) {
  int64_t c = alma__attr_i(n, "causal", 0);
  if (c != 0 && c != 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "causal %lld (0 or 1)", (long long)c);
  const alma_tensor *nk = alma__nn_in(in, nin, 4);
  if (nk && !c) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input 'new_keys' is given without causal = 1");
  if (nk && nk->rank < 2)
    return alma__op_error(n, ALMA_ERR_SHAPE, "input 'new_keys' has rank %d (its dim -2 counts the new keys)", nk->rank);
  int64_t fresh = nk ? nk->dims[nk->rank - 2] : Sq;
  if (nk && fresh > Sk)
    return alma__op_error(n, ALMA_ERR_SHAPE, "input 'new_keys' holds %lld keys, more than the %lld attended",
                          (long long)fresh, (long long)Sk);
  *causal = (int)c;
  *offset = c ? Sk - fresh : 0; /* the keys before the newest ones: ONNX's past length */
  return ALMA_OK;
}

static alma_status attn_setup(const alma_node *n, const alma_tensor *const *in, int nin, attn_shape *as) {
  const alma_tensor *q = in[0], *k = alma__nn_in(in, nin, 1), *v = alma__nn_in(in, nin, 2), *m = alma__nn_in(in, nin, 3);
  if (!k || !v) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "Q, K and V are required");
  if (!alma__dtype_is_float(q->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "dtype %s (float types only)", alma_dtype_name(q->dtype));
  if (k->dtype != q->dtype || v->dtype != q->dtype || (m && m->dtype != q->dtype))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "Q, K, V and mask must share a dtype");
  if (q->rank < 2 || k->rank < 2 || v->rank < 2)
    return alma__op_error(n, ALMA_ERR_SHAPE, "Q, K and V must have rank >= 2 (got %d, %d, %d)", q->rank, k->rank,
                          v->rank);
  as->kt = alma__attr_i(n, "k_transposed", 0) != 0;
  as->Sq = q->dims[q->rank - 2];
  as->D = q->dims[q->rank - 1];
  as->Sk = k->dims[k->rank - (as->kt ? 1 : 2)];
  int64_t kd = k->dims[k->rank - (as->kt ? 2 : 1)];
  as->Dv = v->dims[v->rank - 1];
  if (kd != as->D || v->dims[v->rank - 2] != as->Sk) {
    char s1[128], s2[128], s3[128];
    return alma__op_error(n, ALMA_ERR_SHAPE, "Q %s, K %s%s and V %s do not agree", alma__shape_str(q->rank, q->dims, s1, sizeof s1),
                          alma__shape_str(k->rank, k->dims, s2, sizeof s2), as->kt ? " (transposed)" : "",
                          alma__shape_str(v->rank, v->dims, s3, sizeof s3));
  }
  as->qbr = q->rank - 2;
  as->kbr = k->rank - 2;
  as->vbr = v->rank - 2;
  memcpy(as->qbd, q->dims, sizeof(int64_t) * (size_t)as->qbr);
  memcpy(as->kbd, k->dims, sizeof(int64_t) * (size_t)as->kbr);
  memcpy(as->vbd, v->dims, sizeof(int64_t) * (size_t)as->vbr);
  alma_status st = alma__broadcast_shape(as->qbr, as->qbd, as->kbr, as->kbd, &as->sbr, as->sbd);
  if (st == ALMA_OK) st = alma__broadcast_shape(as->sbr, as->sbd, as->vbr, as->vbd, &as->obr, as->obd);
  if (st != ALMA_OK) return alma__error_prefix(st, "node '%s' (%s): batch dims: ", n->name, n->op_type);
  /* onnx_mask=1 (set by FUSE for ONNX's own Attention): a mask shorter than the keys is padded with
   * -inf, and a query whose keys are all masked outputs zeros, as ONNX Attention says; without it
   * the mask broadcasts and such a row is NaN, as Add + Softmax give. */
  as->onnx = alma__attr_i(n, "onnx_mask", 0) != 0;
  as->mcols = as->Sk;
  if (m) {
    int64_t ml = m->rank >= 1 ? m->dims[m->rank - 1] : 1; /* a scalar broadcasts */
    if (as->onnx && ml < as->Sk) {
      if (ml < 1) return alma__op_error(n, ALMA_ERR_SHAPE, "mask with an empty last dim and %lld keys", (long long)as->Sk);
      as->mcols = ml;
    }
    alma_tensor s = {.dtype = q->dtype, .rank = as->sbr + 2};
    memcpy(s.dims, as->sbd, sizeof(int64_t) * (size_t)as->sbr);
    s.dims[as->sbr] = as->Sq;
    s.dims[as->sbr + 1] = as->mcols;
    ALMA_TRY(check_addend(n, "mask", m, &s));
  }
  ALMA_TRY(alma__attn_causal_offset(n, in, nin, as->Sq, as->Sk, &as->causal, &as->coff));
  const alma_attr *sa = alma__node_attr(n, "scale");
  as->scale = sa ? alma__attr_f(n, "scale", 1.0f) : (float)(1.0 / sqrt((double)(as->D > 0 ? as->D : 1)));
  return ALMA_OK;
}

static alma_status attn_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  attn_shape as;
  ALMA_TRY(attn_setup(n, in, nin, &as));
  int64_t dims[ALMA_MAX_RANK];
  if (as.obr + 2 > ALMA_MAX_RANK) return alma__op_error(n, ALMA_ERR_SHAPE, "output rank above %d", ALMA_MAX_RANK);
  memcpy(dims, as.obd, sizeof(int64_t) * (size_t)as.obr);
  dims[as.obr] = as.Sq;
  dims[as.obr + 1] = as.Dv;
  alma__set_shape(&out[0], in[0]->dtype, as.obr + 2, dims);
  return ALMA_OK;
}

/* T is float or double; q/k/v/mask/y are T arrays of the full tensors. */
#define ATTN_KERNEL(fname, T)                                                                                   \
  static void fname(const attn_shape *as, const T *q, const T *k, const T *v, const T *mask,                    \
                    const alma_tensor *mt, T *y, T *s) {                                                        \
    int64_t Sq = as->Sq, Sk = as->Sk, D = as->D, Dv = as->Dv;                                                   \
    int64_t ob_n = alma__numel(as->obr, as->obd);                                                               \
    int srank = as->sbr + 2;                                                                                    \
    int64_t sdims[ALMA_MAX_RANK];                                                                               \
    memcpy(sdims, as->sbd, sizeof(int64_t) * (size_t)as->sbr);                                                  \
    sdims[as->sbr] = Sq;                                                                                        \
    int64_t mc = as->mcols;                                                                                     \
    sdims[as->sbr + 1] = mc;                                                                                    \
    int64_t mstep = mt && mt->rank >= 1 && mt->dims[mt->rank - 1] == mc && mc > 1 ? 1 : 0;                      \
    for (int64_t ob = 0; ob < ob_n; ob++) {                                                                     \
      int64_t sb = alma__broadcast_index(ob, as->obr, as->obd, as->sbr, as->sbd);                               \
      const T *qb = q + alma__broadcast_index(ob, as->obr, as->obd, as->qbr, as->qbd) * Sq * D;                 \
      const T *kb = k + alma__broadcast_index(ob, as->obr, as->obd, as->kbr, as->kbd) * Sk * D;                 \
      const T *vb = v + alma__broadcast_index(ob, as->obr, as->obd, as->vbr, as->vbd) * Sk * Dv;                \
      T *yb = y + ob * Sq * Dv;                                                                                 \
      for (int64_t i = 0; i < Sq; i++) {                                                                        \
        const T *qi = qb + i * D;                                                                               \
        T *yi = yb + i * Dv;                                                                                    \
        int64_t L = attn_causal_limit(as, i); /* keys past L are causally masked: never computed */             \
        if (as->kt) {                                                                                           \
          for (int64_t j = 0; j < L; j++) s[j] = 0;                                                            \
          for (int64_t d = 0; d < D; d++) {                                                                     \
            T qd = qi[d];                                                                                       \
            const T *kr = kb + d * Sk;                                                                          \
            for (int64_t j = 0; j < L; j++) s[j] += qd * kr[j];                                                \
          }                                                                                                     \
        } else {                                                                                                \
          for (int64_t j = 0; j < L; j++) {                                                                    \
            const T *kr = kb + j * D;                                                                           \
            T acc = 0;                                                                                          \
            for (int64_t d = 0; d < D; d++) acc += qi[d] * kr[d];                                               \
            s[j] = acc;                                                                                         \
          }                                                                                                     \
        }                                                                                                       \
        T scale = (T)as->scale;                                                                                 \
        for (int64_t j = 0; j < L; j++) s[j] *= scale;                                                         \
        if (mask) {                                                                                             \
          int64_t m0 = alma__broadcast_index((sb * Sq + i) * mc, srank, sdims, mt->rank, mt->dims);             \
          for (int64_t j = 0; j < L; j++) s[j] += j < mc ? mask[m0 + j * mstep] : (T)-INFINITY;                \
        }                                                                                                       \
        T mx = -INFINITY;                                                                                       \
        for (int64_t j = 0; j < L; j++) mx = s[j] > mx ? s[j] : mx;                                            \
        if (mx == (T)-INFINITY && Sk > 0) { /* all keys masked: zeros as ONNX says, else Softmax's NaN */  \
          for (int64_t e = 0; e < Dv; e++) yi[e] = as->onnx ? (T)0 : (T)NAN;                                    \
          continue;                                                                                             \
        }                                                                                                       \
        T sum = 0;                                                                                              \
        for (int64_t j = 0; j < L; j++) {                                                                      \
          s[j] = exp(s[j] - mx);                                                                                \
          sum += s[j];                                                                                          \
        }                                                                                                       \
        for (int64_t e = 0; e < Dv; e++) yi[e] = 0;                                                             \
        for (int64_t j = 0; j < L; j++) {                                                                      \
          T p = s[j] / sum;                                                                                     \
          const T *vr = vb + j * Dv;                                                                            \
          for (int64_t e = 0; e < Dv; e++) yi[e] += p * vr[e];                                                  \
        }                                                                                                       \
      }                                                                                                         \
    }                                                                                                           \
  }
ATTN_KERNEL(attn_f32, float)
ATTN_KERNEL(attn_f64, double)

static alma_status attn_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  (void)ctx;
  (void)nout;
  attn_shape as;
  ALMA_TRY(attn_setup(n, in, nin, &as));
  const alma_tensor *mt = alma__nn_in(in, nin, 3);
  alma_status st = ALMA_OK;
  if (in[0]->dtype == ALMA_DTYPE_FLOAT32) {
    float *s = alma__nn_alloc(n, (size_t)(as.Sk > 0 ? as.Sk : 1), sizeof *s);
    if (!s) return ALMA_ERR_NOMEM;
    attn_f32(&as, in[0]->data, in[1]->data, in[2]->data, mt ? mt->data : NULL, mt, out[0].data, s);
    free(s);
    return ALMA_OK;
  }
  /* other float types compute in double on converted copies */
  const double *x[4] = {0};
  int owned[4] = {0};
  double *y = alma__nn_alloc(n, (size_t)alma_tensor_numel(&out[0]) + 1, sizeof *y);
  double *s = alma__nn_alloc(n, (size_t)(as.Sk > 0 ? as.Sk : 1), sizeof *s);
  for (int i = 0; i < 4 && st == ALMA_OK; i++)
    if (alma__nn_in(in, nin, i) && !(x[i] = alma__nn_as_f64(in[i], &owned[i]))) st = ALMA_ERR_NOMEM;
  if (!y || !s) st = ALMA_ERR_NOMEM;
  if (st == ALMA_OK) {
    attn_f64(&as, x[0], x[1], x[2], x[3], mt, y, s);
    alma__nn_store_f64(&out[0], y);
  }
  for (int i = 0; i < 4; i++)
    if (owned[i]) free((void *)x[i]);
  free(y);
  free(s);
  return st;
}

static void attn_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                      int64_t *macs, int64_t *flops) {
  (void)out;
  (void)nout;
  attn_shape as;
  *macs = *flops = 0;
  if (attn_setup(n, in, nin, &as) != ALMA_OK) return;
  int64_t seen = 0; /* scores computed per batch entry: Sq * Sk, fewer under causal */
  for (int64_t i = 0; i < as.Sq; i++) seen += attn_causal_limit(&as, i);
  int64_t nb = alma__numel(as.obr, as.obd);
  *macs = nb * seen * (as.D + as.Dv);
  *flops = 2 * *macs + 4 * nb * seen; /* scale, mask, exp, normalize per score */
}

const alma_op_def alma__op_AlmaAttention = {.name = "Attention", .flags = ALMA_OP_FILLS_OUTPUTS, .domain = "alma", .versions = {1},
                                            .min_inputs = 3, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
                                            .infer = attn_infer, .exec = attn_exec, .cost = attn_cost};
