/* INT8_DYNAMIC and INT8_STATIC: integer quantization of Conv, MatMul and Gemm with constant
 * weights, expressed with standard ONNX operators so that the converted graph stays a valid ONNX
 * model that any runtime (and ONNX Runtime) can run.
 *
 * Weights: int8, symmetric (zero point 0, range [-127, 127]), one scale per output channel (Conv:
 * axis 0 of W [M, C/group, k...]; MatMul/Gemm: each column of the [K, N] matrix). Models below
 * opset 13 cannot express per-axis DequantizeLinear, so INT8_STATIC quantizes their weights per
 * tensor.
 *
 * INT8_DYNAMIC: activations are quantized per batch at run time (uint8, asymmetric):
 *   x -> DynamicQuantizeLinear -> (xq, xs, xzp)
 *   MatMulInteger(xq, Wq, xzp, 128) / ConvInteger(xq, Wq, xzp, 128) -> int32 -> Cast float
 *   -> Mul(xs * w_scale) [-> Add(bias)]
 * as ONNX Runtime's dynamic quantizer writes it. Needs opset >= 11 (DynamicQuantizeLinear). The
 * symmetric int8 weights are stored as uint8 q + 128 with zero point 128 (the same products): a
 * uint8 x int8 MatMulInteger runs on x86 without VNNI through vpmaddubsw, whose 16-bit pair sums
 * saturate (ONNX Runtime's MLAS does, giving wrong results for large activations), while
 * uint8 x uint8 is exact there.
 *
 * INT8_STATIC: post-training static quantization into a QDQ graph. The activation entering each
 * quantized node is calibrated (calibrate.c) and gets a QuantizeLinear/DequantizeLinear pair
 * (uint8, asymmetric, per tensor; one pair per value, shared by the quantized nodes reading it,
 * while other readers keep the float value); weights become int8 initializers behind a
 * DequantizeLinear; Conv and Gemm biases become int32 with scale x_scale * w_scale (the form
 * integer kernels consume directly; float32 where a value would not fit, bias_fits_int32).
 * Residual Adds of two computed values read both inputs through their pairs (match_add). MaxPool, Flatten and Reshape whose output only quantized nodes
 * read run between two pairs of one scale and zero point (match_passthrough), so that int8
 * runtimes run them on the 8-bit values; the converted graph computes the same bits as with a
 * pair on their output alone. Runtimes with int8 kernels execute the Q/DQ patterns in
 * integers; EAGER runs them as written (float arithmetic on dequantized values, which is the
 * reference meaning of the model). The QLINEAR pass rewrites the patterns into QLinearConv /
 * QLinearMatMul for EAGER's integer kernels. */
#include <math.h>

#include "graph/opset.h"
#include "passes/quant.h"

/* ---- graph-editing helpers (declared in quant.h) ------------------------------------------------ */

int alma__q_new_value(alma_graph *g, const char *base, const char *suffix) {
  char name[768];
  snprintf(name, sizeof name, "%.600s/%s", base && base[0] ? base : "v", suffix);
  for (int k = 1; alma__graph_find_value(g, name) >= 0; k++)
    snprintf(name, sizeof name, "%.600s/%s_%d", base && base[0] ? base : "v", suffix, k);
  int v = alma__graph_add_value(g, name);
  if (v < 0) alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  return v;
}

int alma__q_new_const(alma_graph *g, const char *base, const char *suffix, alma_dtype dt, int rank,
                      const int64_t *dims, alma_tensor **t_out) {
  alma_tensor *t = alma__arena_alloc(g->arena, sizeof *t);
  if (!t) {
    alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    return -1;
  }
  if (alma__tensor_alloc(t, dt, rank, dims) != ALMA_OK) return -1;
  int v = alma__q_new_value(g, base, suffix);
  if (v < 0) {
    alma_tensor_free_data(t);
    return -1;
  }
  alma_value *val = &g->values[v];
  val->init = t;
  val->dtype = dt;
  val->rank = rank;
  for (int k = 0; k < rank; k++) val->dims[k] = dims[k];
  if (t_out) *t_out = t;
  return v;
}

int alma__q_scalar_f32(alma_graph *g, const char *base, const char *suffix, float x) {
  alma_tensor *t;
  int v = alma__q_new_const(g, base, suffix, ALMA_DTYPE_FLOAT32, 0, NULL, &t);
  if (v >= 0) *(float *)t->data = x;
  return v;
}

int alma__q_scalar_q8(alma_graph *g, const char *base, const char *suffix, alma_dtype dt, int x) {
  alma_tensor *t;
  int v = alma__q_new_const(g, base, suffix, dt, 0, NULL, &t);
  if (v >= 0) {
    if (dt == ALMA_DTYPE_UINT8) *(uint8_t *)t->data = (uint8_t)x;
    else *(int8_t *)t->data = (int8_t)x;
  }
  return v;
}

alma_status alma__q_add_node(alma_graph *g, const char *op_type, const char *name, const int *inputs, int n_inputs,
                             const int *outputs, int n_outputs, int *idx_out) {
  char nm[768];
  snprintf(nm, sizeof nm, "%.700s", name && name[0] ? name : op_type);
  int i = alma__graph_add_node(g, op_type, "", nm, inputs, n_inputs, outputs, n_outputs);
  if (i < 0) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  g->nodes[i].attrs = NULL;
  g->nodes[i].n_attrs = 0;
  alma_status st = alma__op_resolve(&g->nodes[i], alma__graph_opset(g, ""));
  if (st != ALMA_OK) {
    g->nodes[i].dead = 1;
    return st;
  }
  if (idx_out) *idx_out = i;
  return ALMA_OK;
}

static alma_status attr_put(alma_graph *g, int i, alma_attr at) {
  alma_node *n = &g->nodes[i];
  alma_attr *a = alma__arena_alloc(g->arena, sizeof(alma_attr) * (size_t)(n->n_attrs + 1));
  at.name = alma__arena_strdup(g->arena, at.name);
  if (!a || !at.name) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  int k = 0;
  for (int j = 0; j < n->n_attrs; j++)
    if (strcmp(n->attrs[j].name, at.name)) a[k++] = n->attrs[j];
  a[k++] = at;
  n->attrs = a;
  n->n_attrs = k;
  return ALMA_OK;
}

alma_status alma__q_attr_i(alma_graph *g, int i, const char *name, int64_t v) {
  return attr_put(g, i, (alma_attr){.name = name, .type = ALMA_ATTR_INT, .i = v});
}

alma_status alma__q_attr_f(alma_graph *g, int i, const char *name, float v) {
  return attr_put(g, i, (alma_attr){.name = name, .type = ALMA_ATTR_FLOAT, .f = v});
}

alma_status alma__q_copy_attrs(alma_graph *g, int to, int from) {
  int n = g->nodes[from].n_attrs;
  alma_attr *a = alma__arena_alloc(g->arena, sizeof(alma_attr) * (size_t)(n + 1));
  if (!a) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (n) memcpy(a, g->nodes[from].attrs, sizeof(alma_attr) * (size_t)n);
  g->nodes[to].attrs = a;
  g->nodes[to].n_attrs = n;
  return ALMA_OK;
}

int alma__q_replace_uses(alma_graph *g, int from, int to, int skip) {
  int cnt = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    alma_node *n = &g->nodes[i];
    if (n->dead || i == skip) continue;
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] == from) n->inputs[k] = to, cnt++;
  }
  return cnt;
}

int alma__q_used_by_subgraph(const alma_graph *g, int v) {
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; !g->nodes[i].dead && k < g->nodes[i].n_implicit; k++)
      if (g->nodes[i].implicit_inputs[k] == v) return 1;
  return 0;
}

void alma__q_remove_dead(alma_graph *g) {
  for (int changed = 1; changed;) {
    changed = 0;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
      alma_node *n = &g->nodes[i];
      if (n->dead) continue;
      int used = 0;
      for (int k = 0; k < n->n_outputs && !used; k++)
        used = n->outputs[k] >= 0 && alma__graph_count_uses(g, n->outputs[k]) > 0;
      if (!used) n->dead = changed = 1;
    }
  }
}

/* ---- what can be quantized ------------------------------------------------------------------------ */

typedef enum { T_CONV, T_MATMUL, T_GEMM } target_kind;

typedef struct {
  int node;
  target_kind kind;
  int x, w, bias;        /* value indices; bias -1 when absent or kept in float */
  int w_axis;            /* per-channel axis of W as stored */
  int64_t channels;      /* output channels: M (Conv) or N (MatMul/Gemm) */
} target;

int alma__q_bias_i32(double b, float x_scale, float w_scale, int32_t *q) {
  float bs = x_scale * w_scale;
  double v = rint(b / bs);
  if (!(fabs(v) <= 2147483647.0)) return 0; /* also a zero or non-finite scale */
  *q = (int32_t)v;
  return 1;
}

/* Whether each bias value over its scale x_scale * w_scale[c] is an int32. A layer whose input hardly varies over the calibration data (a branch
 * that Relu nearly silences, vanishing activations of random weights: x_scale 1e-11 in
 * torchvision's LR-ASPP and GoogLeNet) would get its bias clamped to 2^31 steps, a tiny fraction
 * of it, and lose it; there the bias stays float32 (the node reads it as it is; int8 runtimes take
 * a float bias too). */
static int bias_fits_int32(const alma_tensor *B, float xs, const float *ws, int per_tensor) {
  const float *b = B->data;
  int32_t q;
  for (int64_t c = 0; c < B->dims[0]; c++)
    if (!alma__q_bias_i32(b[c], xs, ws[per_tensor ? 0 : c], &q)) return 0;
  return 1;
}

static int is_f32_const(const alma_graph *g, int v) {
  return v >= 0 && g->values[v].init && g->values[v].init->dtype == ALMA_DTYPE_FLOAT32 && g->values[v].init->data;
}

/* The activation input must be a computed float32 value (inferred dtype: r may be NULL). */
static int is_f32_activation(const alma_graph *g, const alma_infer_result *r, int v) {
  if (v < 0 || g->values[v].init) return 0;
  alma_dtype dt = r && r->info[v].dtype != ALMA_DTYPE_UNDEFINED ? r->info[v].dtype : g->values[v].dtype;
  return dt == ALMA_DTYPE_FLOAT32;
}

/* Whether node i is a Conv/MatMul/Gemm with a constant float weight that the passes handle;
 * fills t. Gemm's C is taken as a bias only when it is a constant [N] vector and alpha = beta = 1;
 * otherwise it stays a float input. */
static int match_target(const alma_graph *g, const alma_infer_result *r, int i, target *t) {
  const alma_node *n = &g->nodes[i];
  memset(t, 0, sizeof *t);
  t->node = i;
  t->bias = -1;
  if (n->dead || n->domain[0] || n->n_inputs < 2 || n->n_outputs < 1 || n->outputs[0] < 0) return 0;
  t->x = n->inputs[0];
  t->w = n->inputs[1];
  if (!is_f32_activation(g, r, t->x) || !is_f32_const(g, t->w)) return 0;
  const alma_tensor *W = g->values[t->w].init;
  if (alma_tensor_numel(W) <= 0) return 0;
  if (!strcmp(n->op_type, "Conv")) {
    if (W->rank < 3) return 0;
    t->kind = T_CONV;
    t->w_axis = 0;
    t->channels = W->dims[0];
    if (n->n_inputs > 2 && n->inputs[2] >= 0) {
      int b = n->inputs[2];
      if (!is_f32_const(g, b)) return 0; /* a computed bias: leave the node alone */
      const alma_tensor *B = g->values[b].init;
      if (B->rank != 1 || B->dims[0] != t->channels) return 0;
      t->bias = b;
    }
    return 1;
  }
  if (!strcmp(n->op_type, "MatMul")) {
    if (W->rank != 2) return 0;
    t->kind = T_MATMUL;
    t->w_axis = 1;
    t->channels = W->dims[1];
    return 1;
  }
  if (!strcmp(n->op_type, "Gemm")) {
    if (W->rank != 2 || alma__attr_i(n, "transA", 0)) return 0;
    t->kind = T_GEMM;
    int tb = alma__attr_i(n, "transB", 0) != 0;
    t->w_axis = tb ? 0 : 1;
    t->channels = W->dims[tb ? 0 : 1];
    if (n->n_inputs > 2 && n->inputs[2] >= 0) {
      int c = n->inputs[2];
      if (!g->values[c].init && !is_f32_activation(g, r, c)) return 0;
      const alma_tensor *C = g->values[c].init;
      if (C && C->dtype == ALMA_DTYPE_FLOAT32 && C->rank == 1 && C->dims[0] == t->channels &&
          alma__attr_f(n, "alpha", 1.0f) == 1.0f && alma__attr_f(n, "beta", 1.0f) == 1.0f)
        t->bias = c;
    }
    return 1;
  }
  return 0;
}

/* Per-channel symmetric scales of W along `axis` (or one scale when per_tensor): max|w| / 127. */
static void weight_scales(const alma_tensor *W, int axis, int per_tensor, float *scale, int64_t *n_scales) {
  int64_t outer = alma__numel(axis, W->dims), dim = W->dims[axis];
  int64_t inner = alma__numel(W->rank - axis - 1, W->dims + axis + 1);
  const float *w = W->data;
  int64_t ns = per_tensor ? 1 : dim;
  for (int64_t c = 0; c < ns; c++) scale[c] = 0;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t c = 0; c < dim; c++)
      for (int64_t i = 0; i < inner; i++) {
        float a = fabsf(w[(o * dim + c) * inner + i]);
        float *s = &scale[per_tensor ? 0 : c];
        if (a > *s) *s = a; /* NaN compares false: ignored */
      }
  for (int64_t c = 0; c < ns; c++) {
    scale[c] = isfinite(scale[c]) ? scale[c] / 127.0f : 0;
    if (!(scale[c] > 0)) scale[c] = 1.0f; /* an all-zero channel: any scale is exact */
  }
  *n_scales = ns;
}

static int8_t quant_w(float w, float s) {
  float q = rintf(w / s); /* round half to even, the default rounding mode */
  if (!(q >= -127.0f)) q = -127.0f; /* also NaN */
  if (q > 127.0f) q = 127.0f;
  return (int8_t)q;
}

/* Quantized copy of W: Wq int8 (same shape), its scales [ns] and zero points; returns the value
 * indices of Wq, scale and zero point (zero point int8 zeros of the scales' shape). transpose:
 * W is [N, K] and Wq is stored [K, N] (a Gemm with transB for MatMulInteger), axis refers to W.
 * offset_u8: the same symmetric values stored as uint8 q + 128 with one zero point 128. */
static alma_status quantize_weight(alma_graph *g, int wv, int axis, int per_tensor, int transpose, int offset_u8,
                                   float *scales, int64_t *n_scales, int *q_out, int *s_out, int *zp_out) {
  const alma_tensor *W = g->values[wv].init;
  const char *base = g->values[wv].name;
  weight_scales(W, axis, per_tensor, scales, n_scales);
  int64_t dims[ALMA_MAX_RANK];
  for (int d = 0; d < W->rank; d++) dims[d] = W->dims[d];
  if (transpose) dims[0] = W->dims[1], dims[1] = W->dims[0];
  alma_tensor *tq, *ts, *tz;
  int q = alma__q_new_const(g, base, "quantized", offset_u8 ? ALMA_DTYPE_UINT8 : ALMA_DTYPE_INT8, W->rank, dims, &tq);
  if (q < 0) return ALMA_ERR_NOMEM;
  W = g->values[wv].init;
  int64_t outer = alma__numel(axis, W->dims), dim = W->dims[axis];
  int64_t inner = alma__numel(W->rank - axis - 1, W->dims + axis + 1);
  const float *w = W->data;
  int8_t *wq = tq->data;
  uint8_t *wu = tq->data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t c = 0; c < dim; c++)
      for (int64_t i = 0; i < inner; i++) {
        int64_t src = (o * dim + c) * inner + i;
        int64_t dst = src;
        if (transpose) { /* W [N, K] (rank 2): element (o, c) of W goes to (c, o) */
          int64_t r0 = src / W->dims[1], c0 = src % W->dims[1];
          dst = c0 * W->dims[0] + r0;
        }
        int8_t qv = quant_w(w[src], scales[per_tensor ? 0 : c]);
        if (offset_u8) wu[dst] = (uint8_t)(qv + 128);
        else wq[dst] = qv;
      }
  int64_t sd[1] = {*n_scales};
  int srank = per_tensor ? 0 : 1;
  int s = alma__q_new_const(g, base, "scale", ALMA_DTYPE_FLOAT32, srank, sd, &ts);
  if (s < 0) return ALMA_ERR_NOMEM;
  memcpy(ts->data, scales, (size_t)*n_scales * sizeof(float));
  int z = offset_u8 ? alma__q_scalar_q8(g, base, "zero_point", ALMA_DTYPE_UINT8, 128)
                    : alma__q_new_const(g, base, "zero_point", ALMA_DTYPE_INT8, srank, sd, &tz);
  if (z < 0) return ALMA_ERR_NOMEM;
  *q_out = q;
  *s_out = s;
  *zp_out = z;
  return ALMA_OK;
}

/* ==== INT8_STATIC ============================================================================== */

/* uint8 asymmetric parameters for a range containing 0. */
static void act_params(double lo, double hi, float *scale, int *zp) {
  if (lo > 0) lo = 0;
  if (hi < 0) hi = 0;
  float s = (float)((hi - lo) / 255.0);
  if (!(s > 0) || !isfinite(s)) {
    *scale = 1.0f;
    *zp = 0;
    return;
  }
  double z = rint(-lo / s);
  *scale = s;
  *zp = z < 0 ? 0 : z > 255 ? 255 : (int)z;
}

typedef struct {
  int n_conv, n_matmul, n_gemm, n_add, n_act, n_pass;
} qstats;

/* An Add of two computed float32 values (a residual connection) whose sum is itself quantized: both
 * inputs are quantized, as ONNX Runtime's QDQ quantizer does, so that int8 runtimes keep the
 * residual stream in 8 bits (the producing convolution requantizes into its int8 destination, the
 * Add runs on int8 inputs) instead of leaving each block's output in float32. Opset 7+ (numpy
 * broadcasting). An Add whose sum stays float (a transformer's, before LayerNorm) is left alone:
 * quantizing its inputs would only add rounding and conversions. */
static int match_add(const alma_graph *g, const alma_infer_result *r, int i) {
  const alma_node *n = &g->nodes[i];
  if (n->dead || n->domain[0] || strcmp(n->op_type, "Add") || n->since_version < 7 || n->n_inputs != 2 ||
      n->n_outputs != 1 || n->outputs[0] < 0)
    return 0;
  return is_f32_activation(g, r, n->inputs[0]) && is_f32_activation(g, r, n->inputs[1]);
}

/* Whether value v is read by a quantized node (qin), directly or through a chain of Relu / Clip. */
static int sum_requantized(const alma_graph *g, int v, const int *qin) {
  for (int depth = 0; depth < 4 && v >= 0; depth++) {
    if (qin[v]) return 1;
    int next = -1;
    for (int i = 0; i < g->n_nodes && next < 0; i++) {
      const alma_node *n = &g->nodes[i];
      if (n->dead || n->domain[0] || n->n_inputs < 1 || n->inputs[0] != v || n->n_outputs < 1) continue;
      if (!strcmp(n->op_type, "Relu") || !strcmp(n->op_type, "Clip")) next = n->outputs[0];
    }
    v = next;
  }
  return 0;
}

/* MaxPool, Flatten or Reshape of a computed float32 value: ops that only select or move elements,
 * so that with one scale and zero point on both sides Q(op(x)) = op(Q(x)) exactly (quantization
 * is monotonic, max commutes with it). ONNX Runtime's QDQ quantizer gives them the same pair on
 * both sides (QDQDirect8BitOp; MaxPool from opset 12, for its QOperator form: the QDQ form is
 * valid ONNX at every opset, the op itself still runs on float values). A MaxPool whose Indices
 * output is used is left alone: quantization creates ties, which would move the indices.
 * Transpose, Squeeze and Unsqueeze would be as exact, but no int8 runtime here runs them on
 * 8-bit values, so their pairs would only add work. */
static int match_passthrough(const alma_graph *g, const alma_infer_result *r, int i) {
  const alma_node *n = &g->nodes[i];
  if (n->dead || n->domain[0] || n->n_inputs < 1 || n->n_outputs < 1 || n->outputs[0] < 0 || n->n_implicit) return 0;
  if (!strcmp(n->op_type, "MaxPool")) {
    if (n->n_outputs > 1 && n->outputs[1] >= 0 && alma__graph_count_uses(g, n->outputs[1]) > 0) return 0;
  } else if (strcmp(n->op_type, "Flatten") && strcmp(n->op_type, "Reshape")) {
    return 0;
  }
  return is_f32_activation(g, r, n->inputs[0]) && is_f32_activation(g, r, n->outputs[0]);
}

enum { ROLE_TARGET = 1, ROLE_ADD = 2, ROLE_PASS = 4 };
enum { Q_DIRECT = 1, Q_PASS = 2 }; /* a value read by a quantized Conv/MatMul/Gemm/Add, by a passthrough */

/* Whether value v can be 8-bit before a passthrough reading it, so that moving the pair there
 * costs nothing: v is quantized for another reader already, or comes (through Relu/Clip) from a
 * quantized Conv/MatMul/Gemm, a residual Add (quantized once its sum is read so), or a
 * passthrough of such a value: int8 runtimes write those in int8. After other producers
 * (GlobalAveragePool -> Flatten -> Gemm, BatchNormalization -> Relu -> MaxPool without FOLD) the
 * pair stays after the passthrough, where it costs the least. */
static int int8_source(const alma_graph *g, const alma_infer_result *r, int v, const int *qin, const unsigned char *role) {
  for (int depth = 0; depth < 8 && v >= 0; depth++) {
    if (qin[v]) return 1;
    int p = g->values[v].producer;
    if (p < 0) return 0;
    const alma_node *n = &g->nodes[p];
    if (n->dead || n->domain[0] || n->n_inputs < 1) return 0;
    if (role[p] & ROLE_TARGET) return 1;
    if (match_add(g, r, p)) return 1;
    if (!strcmp(n->op_type, "Relu") || !strcmp(n->op_type, "Clip") || match_passthrough(g, r, p)) {
      v = n->inputs[0];
      continue;
    }
    return 0;
  }
  return 0;
}

/* Whether every use of value v is the quantized input of a quantized node (role[]: a target's
 * data input, a quantized Add's operand, a passthrough's input), v being no graph output: then
 * moving v's pair before its passthrough producer changes what no float reader sees. */
static int read_quantized_only(const alma_graph *g, int v, const unsigned char *role) {
  for (int k = 0; k < g->n_outputs; k++)
    if (g->outputs[k] == v) return 0;
  int uses = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->n_implicit; k++)
      if (n->implicit_inputs[k] == v) return 0;
    for (int k = 0; k < n->n_inputs; k++) {
      if (n->inputs[k] != v) continue;
      int ok = (k == 0 && (role[i] & (ROLE_TARGET | ROLE_PASS))) || (k < 2 && (role[i] & ROLE_ADD));
      if (!ok) return 0;
      uses++;
    }
  }
  return uses > 0;
}

/* QuantizeLinear -> DequantizeLinear on value v with the scale and zero point constants s, z;
 * *dq_out receives the DequantizeLinear's output. */
static alma_status add_pair(alma_graph *g, int v, int s, int z, int *dq_out) {
  const char *base = g->values[v].name;
  int q = alma__q_new_value(g, base, "quantized");
  int d = q < 0 ? -1 : alma__q_new_value(g, base, "dequantized");
  if (d < 0) return ALMA_ERR_NOMEM;
  char nm[700];
  snprintf(nm, sizeof nm, "%.600s/QuantizeLinear", base);
  int in1[3] = {v, s, z}, in2[3] = {q, s, z};
  ALMA_TRY(alma__q_add_node(g, "QuantizeLinear", nm, in1, 3, &q, 1, NULL));
  snprintf(nm, sizeof nm, "%.600s/DequantizeLinear", base);
  ALMA_TRY(alma__q_add_node(g, "DequantizeLinear", nm, in2, 3, &d, 1, NULL));
  *dq_out = d;
  return ALMA_OK;
}

/* Raises g's default-domain opset to `to` when every node reads the same there (graph/opset.h):
 * nodes whose attributes became inputs by then are rewritten in that form (alma__opset_form: the
 * constants as new initializers), and every node is bound anew. *raised = 0 (g untouched) when some
 * node would read differently, or would need rewriting inside a subgraph (*sub_out: the first such
 * node). The int8 passes use it for models older than the operators they write. */
static const alma_node *form_in_subgraph(const alma_graph *g, int64_t to, int sub) {
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    if (n->dead) continue;
    alma_opset_form f;
    if (sub && alma__opset_form(g, n, to, NULL, &f) != 0) return n;
    for (int a = 0; a < n->n_attrs; a++) {
      const alma_attr *at = &n->attrs[a];
      const alma_node *b = at->type == ALMA_ATTR_GRAPH && at->g ? form_in_subgraph(at->g, to, 1) : NULL;
      for (int k = 0; !b && at->type == ALMA_ATTR_GRAPHS && k < at->n; k++)
        b = at->graphs[k] ? form_in_subgraph(at->graphs[k], to, 1) : NULL;
      if (b) return b;
    }
  }
  return NULL;
}

/* Binds every node of g and its subgraphs at `to`, which opsets (a list of g's length) says. */
static alma_status rebind(alma_graph *g, int64_t to, alma_opset_import *opsets) {
  g->opsets = opsets;
  for (int i = 0; i < g->n_nodes; i++) {
    alma_node *n = &g->nodes[i];
    if (n->dead) continue;
    if (alma__opset_is_onnx(n->domain)) ALMA_TRY(alma__op_resolve(n, to));
    for (int a = 0; a < n->n_attrs; a++) {
      alma_attr *at = &n->attrs[a];
      if (at->type == ALMA_ATTR_GRAPH && at->g) ALMA_TRY(rebind(at->g, to, opsets));
      for (int k = 0; at->type == ALMA_ATTR_GRAPHS && k < at->n; k++)
        if (at->graphs[k]) ALMA_TRY(rebind(at->graphs[k], to, opsets));
    }
  }
  return ALMA_OK;
}

/* Node i of g in form f: its data input, then f's constants (new values named <node>/<input>) or
 * empty inputs; f's attributes dropped, its int attribute set. */
static alma_status apply_form(alma_graph *g, int i, const alma_opset_form *f) {
  int *in = alma__calloc((size_t)f->n_inputs + 2, sizeof(int));
  if (!in) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  in[0] = g->nodes[i].inputs[0];
  for (int k = 0; k < f->n_inputs; k++) {
    const alma_tensor *src = &f->in[k].t;
    in[1 + k] = -1;
    if (src->dtype == ALMA_DTYPE_UNDEFINED) continue;
    alma_tensor *t = NULL;
    int v = alma__q_new_const(g, g->nodes[i].name, f->in[k].name, src->dtype, src->rank, src->dims, &t);
    if (v < 0) {
      free(in);
      return ALMA_ERR_NOMEM;
    }
    if (src->nbytes) memcpy(t->data, src->data, src->nbytes);
    g->values[v].producer = -1;
    in[1 + k] = v;
  }
  alma_node *n = &g->nodes[i];
  free(n->inputs);
  n->inputs = in;
  n->n_inputs = 1 + f->n_inputs;
  int kept = 0;
  for (int a = 0; a < n->n_attrs; a++) {
    int dropped = 0;
    for (int d = 0; d < f->n_drop && !dropped; d++) dropped = !strcmp(n->attrs[a].name, f->drop[d]);
    if (!dropped) n->attrs[kept++] = n->attrs[a];
  }
  n->n_attrs = kept;
  return f->set_attr ? alma__q_attr_i(g, i, f->set_attr, f->set_i) : ALMA_OK;
}

static alma_status raise_opset(alma_graph *g, int64_t to, const alma_opset_value *vals, int *raised,
                               const alma_node **sub_out) {
  *raised = 0;
  if (alma__opset_blocker(g, to, vals) || (*sub_out = form_in_subgraph(g, to, 0))) return ALMA_OK;
  for (int i = 0; i < g->n_nodes; i++) {
    alma_opset_form f;
    int r = g->nodes[i].dead ? 0 : alma__opset_form(g, &g->nodes[i], to, vals, &f);
    if (r < 0) return alma__errorf(ALMA_ERR_INTERNAL, "node '%s': no form at opset %lld", g->nodes[i].name,
                                   (long long)to); /* the blocker said every node has one */
    if (r > 0) ALMA_TRY(apply_form(g, i, &f));
  }
  /* a session's graph shares its opset list with the model's (graph/clone.c): replace it */
  alma_opset_import *os = alma__arena_alloc(g->arena, sizeof *os * (size_t)(g->n_opsets + 1));
  if (!os) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (int i = 0; i < g->n_opsets; i++) {
    os[i] = g->opsets[i];
    if (alma__opset_is_onnx(os[i].domain)) os[i].version = to;
  }
  ALMA_TRY(rebind(g, to, os));
  *raised = 1;
  return ALMA_OK;
}

/* The graph at an opset of at least `need` (an int8 pass's operators), `want` if possible (per-axis
 * scales): raised if it must and can be, else ALMA_ERR_UNSUPPORTED naming what blocks it. */
static alma_status need_opset(alma_graph *g, int64_t need, int64_t want, const char *what) {
  int64_t opset = alma__graph_opset(g, "");
  if (opset >= want) return ALMA_OK;
  /* value ranks and dtypes: the Softmax-family rule, Pad's and Clip's scalars (graph/opset.h) */
  alma_infer_result r;
  alma_status st = alma__graph_infer(g, NULL, 1, 1 << 16, &r);
  alma_opset_value *vals = alma__opset_values(g, st == ALMA_OK ? &r : NULL);
  if (st == ALMA_OK) alma__infer_result_free(&r);
  else alma__error_clear();
  if (!vals) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  int raised = 0;
  const alma_node *sub = NULL;
  st = raise_opset(g, want, vals, &raised, &sub);
  if (st == ALMA_OK && !raised && opset < need) st = raise_opset(g, need, vals, &raised, &sub);
  const alma_node *b = st == ALMA_OK && alma__graph_opset(g, "") < need ? alma__opset_blocker(g, need, vals) : NULL;
  free(vals);
  ALMA_TRY(st);
  if (raised) ALMA_LOGD("%s: the model's opset %lld raised to %lld", what, (long long)opset,
                        (long long)alma__graph_opset(g, ""));
  if (alma__graph_opset(g, "") < need) {
    if (!b && sub)
      return alma__errorf(ALMA_ERR_UNSUPPORTED,
                          "%s needs opset >= %lld; the model imports opset %lld, and node '%s' (%s-%d) inside a "
                          "subgraph would have to take attributes as inputs there, which alma does not rewrite",
                          what, (long long)need, (long long)opset, sub->name, sub->op_type, sub->since_version);
    return alma__errorf(ALMA_ERR_UNSUPPORTED,
                        "%s needs opset >= %lld; the model imports opset %lld, and alma raises it only where every node "
                        "keeps its meaning: node '%s' (%s-%d) does not at %lld",
                        what, (long long)need, (long long)opset, b ? b->name : "?", b ? b->op_type : "?",
                        b ? b->since_version : 0, (long long)need);
  }
  return ALMA_OK;
}

static alma_status static_run(alma_graph *g, const alma_pass_opts *opts) {
  double t0 = alma__now_s();
  ALMA_TRY(need_opset(g, 10, 13, "static quantization (QuantizeLinear; per-axis DequantizeLinear at 13)"));
  int64_t opset = alma__graph_opset(g, "");
  int per_tensor_w = opset < 13; /* per-axis DequantizeLinear arrived in opset 13 */
  alma__calibrator cal;
  ALMA_TRY(alma__calibrator_parse(opts ? opts->calibrator : NULL, &cal));
  alma_infer_result r;
  ALMA_TRY(alma__graph_infer(g, NULL, 1, 1 << 16, &r));
  int nn = g->n_nodes;
  target *tg = calloc((size_t)nn + 1, sizeof *tg);
  size_t nva = (size_t)g->n_values + 1; /* each calibrated activation is a distinct value */
  int *acts = malloc(nva * sizeof *acts);
  double *lo = malloc(nva * sizeof *lo), *hi = malloc(nva * sizeof *hi);
  int *seen = calloc(nva, sizeof *seen);
  int *adds = malloc(((size_t)nn + 1) * sizeof *adds), nadd = 0;
  int *pass = malloc(((size_t)nn + 1) * sizeof *pass), npass = 0; /* passthrough nodes, last first */
  int *act_of = malloc(((size_t)g->n_values + 1) * sizeof *act_of);
  int *dq_of = malloc(((size_t)g->n_values + 1) * sizeof *dq_of); /* activation value -> its DQ output */
  int *from = malloc(((size_t)g->n_values + 1) * sizeof *from);   /* passthrough output -> its input */
  int *qin = calloc((size_t)g->n_values + 1, sizeof *qin);        /* Q_* : value read by a quantized node */
  unsigned char *role = calloc((size_t)nn + 1, 1);                /* ROLE_* of each node */
  int *sz_of = NULL; /* per calibrated activation: its scale and zero point constants */
  float *scales = NULL;
  alma_status st = ALMA_OK;
  int nt = 0, na = 0;
  qstats stats = {0};
  if (!tg || !acts || !lo || !hi || !seen || !adds || !pass || !act_of || !dq_of || !from || !qin || !role) {
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    goto done;
  }
  for (int v = 0; v < g->n_values; v++) act_of[v] = dq_of[v] = from[v] = -1;
  int64_t max_ch = 1;
  for (int i = 0; i < nn; i++)
    if (match_target(g, &r, i, &tg[nt])) {
      qin[tg[nt].x] |= Q_DIRECT;
      role[i] |= ROLE_TARGET;
      if (tg[nt].channels > max_ch) max_ch = tg[nt].channels;
      nt++;
    }
  /* In reverse topological order, so that what reads a node's result is decided before the node:
   * - residual Adds whose sum a quantized node reads (directly or through Relu/Clip), so an Add
   *   feeding a later quantized Add (MobileNet-V2's chains) is seen;
   * - passthroughs (MaxPool, Flatten, Reshape) whose output only quantized nodes read: their input
   *   is quantized too, with their output's scale and zero point (below; conv -> Relu -> MaxPool
   *   -> conv: DQ -> Conv -> Relu -> Q -> DQ -> MaxPool -> Q -> DQ -> Conv, the MaxPool between
   *   two 8-bit tensors of one quantization). */
  for (int i = nn - 1; i >= 0 && nt > 0; i--) {
    const alma_node *n = &g->nodes[i];
    if (match_add(g, &r, i) && sum_requantized(g, n->outputs[0], qin)) {
      for (int k = 0; k < 2; k++) qin[n->inputs[k]] |= Q_DIRECT;
      role[i] |= ROLE_ADD;
      adds[nadd++] = i;
    } else if (match_passthrough(g, &r, i) && qin[n->outputs[0]] && !alma__q_used_by_subgraph(g, n->outputs[0]) &&
               read_quantized_only(g, n->outputs[0], role) && int8_source(g, &r, n->inputs[0], qin, role)) {
      qin[n->inputs[0]] |= Q_PASS;
      from[n->outputs[0]] = n->inputs[0];
      role[i] |= ROLE_PASS;
      pass[npass++] = i;
    }
  }
  if (nt == 0) {
    ALMA_LOGI("INT8_STATIC: no Conv/MatMul/Gemm with constant weights: nothing to quantize");
    goto done;
  }
  /* the activations to calibrate: every quantized value, the passthroughs' outputs too */
  for (int v = 0; v < g->n_values; v++)
    if (qin[v]) {
      act_of[v] = na;
      acts[na++] = v;
    }
  scales = malloc((size_t)max_ch * sizeof *scales);
  sz_of = malloc(((size_t)na + 1) * 2 * sizeof *sz_of);
  if (!scales || !sz_of) {
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    goto done;
  }
  if ((st = alma__calibrate(g, acts, na, opts, lo, hi, seen)) != ALMA_OK) goto done;
  /* A chain x -> passthrough(s) -> y has one pair, on x's slot, with the range of the values that
   * Conv/MatMul/Gemm/Add read (Q_DIRECT) in it. Where only the passthrough reads x, that is y's
   * own range, so the graph computes bit for bit what it did with y's pair alone: the op commutes
   * with y's quantization, clipping included (max(clip(x)) = clip(max(x))); x's values beyond
   * that range are those no window's maximum takes, or that y's calibrator clipped anyway. Where
   * x is also read directly (ONNX Runtime quantizes x's readers so), the union of x's and y's
   * ranges: x's under min-max; the others' clipping of y is kept. */
  {
    int *root_of = malloc(((size_t)na + 1) * sizeof *root_of), *gn = calloc((size_t)na + 1, sizeof *gn);
    double *glo = malloc(((size_t)na + 1) * sizeof *glo), *ghi = malloc(((size_t)na + 1) * sizeof *ghi);
    if (!root_of || !gn || !glo || !ghi) {
      free(root_of), free(gn), free(glo), free(ghi);
      st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      goto done;
    }
    for (int b = 0; b < na; b++) {
      int root = acts[b];
      while (from[root] >= 0) root = from[root];
      int a = root_of[b] = act_of[root];
      if (!(qin[acts[b]] & Q_DIRECT) || !seen[b]) continue;
      glo[a] = gn[a] && glo[a] < lo[b] ? glo[a] : lo[b];
      ghi[a] = gn[a] && ghi[a] > hi[b] ? ghi[a] : hi[b];
      gn[a]++;
    }
    for (int b = 0; b < na; b++) {
      if (root_of[b] != b || !gn[b]) continue; /* no direct reader seen: the root's own range */
      lo[b] = glo[b];
      hi[b] = ghi[b];
      seen[b] = 1;
    }
    for (int b = 0; b < na; b++) act_of[acts[b]] = root_of[b];
    free(root_of), free(gn), free(glo), free(ghi);
  }

  /* Q/DQ pair per calibrated activation */
  float *a_scale = malloc(((size_t)na + 1) * sizeof *a_scale);
  if (!a_scale) {
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    goto done;
  }
  for (int a = 0; a < na && st == ALMA_OK; a++) {
    if (!seen[a] || from[acts[a]] >= 0) continue; /* passthrough outputs: their chain's pair */
    int v = acts[a], zp;
    act_params(lo[a], hi[a], &a_scale[a], &zp);
    ALMA_LOGD("INT8_STATIC: '%s' range [%g, %g], scale %g, zero point %d", g->values[v].name, lo[a], hi[a], a_scale[a], zp);
    const char *base = g->values[v].name;
    int s = alma__q_scalar_f32(g, base, "scale", a_scale[a]);
    int z = alma__q_scalar_q8(g, base, "zero_point", ALMA_DTYPE_UINT8, zp);
    if (s < 0 || z < 0) {
      st = ALMA_ERR_NOMEM;
      break;
    }
    sz_of[2 * a] = s;
    sz_of[2 * a + 1] = z;
    st = add_pair(g, v, s, z, &dq_of[v]);
    stats.n_act++;
  }
  /* passthroughs, in topological order (MaxPool -> Flatten): they read their input's DQ and their
   * output gets a pair with the same scale and zero point constants */
  for (int k = npass - 1; k >= 0 && st == ALMA_OK; k--) {
    int i = pass[k], x = g->nodes[i].inputs[0], y = g->nodes[i].outputs[0], a = act_of[x];
    if (dq_of[x] < 0) continue; /* a value calibration never saw: stays float */
    g->nodes[i].inputs[0] = dq_of[x];
    st = add_pair(g, y, sz_of[2 * a], sz_of[2 * a + 1], &dq_of[y]);
    stats.n_pass++;
  }
  /* weights (shared by value and axis), biases, and the node inputs */
  int *wdq_of = dq_of; /* weights are constants, activations are not: the same map serves both */
  for (int k = 0; k < nt && st == ALMA_OK; k++) {
    target *t = &tg[k];
    int a = act_of[t->x];
    if (!seen[a] || dq_of[t->x] < 0) continue;
    int wd = wdq_of[t->w];
    int64_t ns = 0;
    if (wd < 0) {
      int q, s, z;
      if ((st = quantize_weight(g, t->w, t->w_axis, per_tensor_w, 0, 0, scales, &ns, &q, &s, &z)) != ALMA_OK) break;
      wd = alma__q_new_value(g, g->values[t->w].name, "dequantized");
      if (wd < 0) {
        st = ALMA_ERR_NOMEM;
        break;
      }
      char nm[700];
      snprintf(nm, sizeof nm, "%.600s/DequantizeLinear", g->values[t->w].name);
      int in[3] = {q, s, z}, di;
      if ((st = alma__q_add_node(g, "DequantizeLinear", nm, in, 3, &wd, 1, &di)) != ALMA_OK) break;
      if (!per_tensor_w && (st = alma__q_attr_i(g, di, "axis", t->w_axis)) != ALMA_OK) break;
      wdq_of[t->w] = wd;
    } else {
      /* the scales are needed again for the bias: recompute them (cheap next to the conversion) */
      weight_scales(g->values[t->w].init, t->w_axis, per_tensor_w, scales, &ns);
    }
    g->nodes[t->node].inputs[1] = wd;
    if (t->bias >= 0 && bias_fits_int32(g->values[t->bias].init, a_scale[a], scales, per_tensor_w)) {
      const alma_tensor *B = g->values[t->bias].init;
      const char *base = g->values[t->bias].name;
      int64_t nb = B->dims[0];
      alma_tensor *tq, *ts;
      int64_t sd[1] = {per_tensor_w ? 1 : nb};
      int q = alma__q_new_const(g, base, "quantized", ALMA_DTYPE_INT32, 1, &nb, &tq);
      int s = q < 0 ? -1 : alma__q_new_const(g, base, "scale", ALMA_DTYPE_FLOAT32, per_tensor_w ? 0 : 1, sd, &ts);
      int d = s < 0 ? -1 : alma__q_new_value(g, base, "dequantized");
      if (d < 0) {
        st = ALMA_ERR_NOMEM;
        break;
      }
      B = g->values[t->bias].init;
      const float *b = B->data;
      for (int64_t c = 0; c < nb; c++) { /* every value fits: bias_fits_int32 */
        float ws = scales[per_tensor_w ? 0 : c];
        if (c < sd[0]) ((float *)ts->data)[c] = a_scale[a] * ws;
        alma__q_bias_i32(b[c], a_scale[a], ws, &((int32_t *)tq->data)[c]);
      }
      char nm[700];
      snprintf(nm, sizeof nm, "%.600s/DequantizeLinear", base);
      int in[2] = {q, s}, di;
      if ((st = alma__q_add_node(g, "DequantizeLinear", nm, in, 2, &d, 1, &di)) != ALMA_OK) break;
      if (!per_tensor_w && (st = alma__q_attr_i(g, di, "axis", 0)) != ALMA_OK) break;
      g->nodes[t->node].inputs[2] = d;
    }
    g->nodes[t->node].inputs[0] = dq_of[t->x];
    stats.n_conv += t->kind == T_CONV;
    stats.n_matmul += t->kind == T_MATMUL;
    stats.n_gemm += t->kind == T_GEMM;
  }
  /* Add inputs: read through their DequantizeLinear when both were calibrated */
  for (int k = 0; k < nadd && st == ALMA_OK; k++) {
    alma_node *n = &g->nodes[adds[k]];
    int d0 = dq_of[n->inputs[0]], d1 = dq_of[n->inputs[1]];
    if (d0 < 0 || d1 < 0) continue; /* a value calibration never saw (dead branch): stays float */
    n->inputs[0] = d0;
    n->inputs[1] = d1;
    stats.n_add++;
  }
  free(a_scale);
  if (st == ALMA_OK) {
    alma__q_remove_dead(g);
    st = alma__graph_compact(g);
  }
  if (st == ALMA_OK && opts && opts->verbose) {
    static const char *cal_names[] = {"minmax", "percentile", "entropy"};
    fprintf(stderr,
            "INT8_STATIC: quantized %d Conv, %d MatMul, %d Gemm (weights int8 %s), %d Add, %d activations uint8 per "
            "tensor, %d MaxPool/Flatten/Reshape between pairs of one quantization; calibrator %s over %d batches, %.3f s\n",
            stats.n_conv, stats.n_matmul, stats.n_gemm, per_tensor_w ? "per tensor" : "per channel", stats.n_add, stats.n_act,
            stats.n_pass,
            cal_names[cal], opts->calib && opts->n_calib_batches > 0 ? opts->n_calib_batches : 8, alma__now_s() - t0);
  }
done:
  alma__infer_result_free(&r);
  free(adds);
  free(pass);
  free(from);
  free(qin);
  free(role);
  free(sz_of);
  free(tg);
  free(acts);
  free(lo);
  free(hi);
  free(seen);
  free(act_of);
  free(dq_of);
  free(scales);
  return st;
}

/* ==== INT8_DYNAMIC ============================================================================= */

static alma_status dynamic_run(alma_graph *g, const alma_pass_opts *opts) {
  ALMA_TRY(need_opset(g, 11, 13, "dynamic quantization (DynamicQuantizeLinear)"));
  alma_infer_result r;
  ALMA_TRY(alma__graph_infer(g, NULL, 1, 1 << 16, &r));
  int nn = g->n_nodes;
  int *dq_of = malloc(((size_t)g->n_values + 1) * 3 * sizeof *dq_of); /* x -> (xq, xs, xzp) */
  int64_t max_ch = 1;
  for (int i = 0; i < nn; i++) {
    target t;
    if (match_target(g, &r, i, &t) && t.channels > max_ch) max_ch = t.channels;
  }
  float *scales = malloc((size_t)max_ch * sizeof *scales);
  alma_status st = ALMA_OK;
  qstats stats = {0};
  if (!dq_of || !scales) {
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    goto done;
  }
  for (int v = 0; v < g->n_values * 3; v++) dq_of[v] = -1;
  for (int i = 0; i < nn && st == ALMA_OK; i++) {
    target t;
    if (!match_target(g, &r, i, &t)) continue;
    alma_node *n = &g->nodes[i];
    const char *nname = n->name;
    int y = n->outputs[0];
    if (alma__q_used_by_subgraph(g, y)) continue;
    /* Gemm: alpha scales the product, beta the bias (any constant C, broadcast by Add) */
    float alpha = 1.0f, beta = 1.0f;
    int cval = -1;
    if (t.kind == T_GEMM) {
      alpha = alma__attr_f(n, "alpha", 1.0f);
      beta = alma__attr_f(n, "beta", 1.0f);
      cval = n->n_inputs > 2 ? n->inputs[2] : -1;
      if (cval >= 0 && !is_f32_const(g, cval)) continue;
    } else if (t.kind == T_CONV) {
      cval = t.bias;
    }
    /* activation: one DynamicQuantizeLinear per value */
    int x = t.x;
    if (dq_of[3 * x] < 0) {
      const char *base = g->values[x].name;
      int o[3] = {alma__q_new_value(g, base, "quantized"), alma__q_new_value(g, base, "scale"),
                  alma__q_new_value(g, base, "zero_point")};
      char nm[700];
      snprintf(nm, sizeof nm, "%.600s/DynamicQuantizeLinear", base);
      if (o[0] < 0 || o[1] < 0 || o[2] < 0) {
        st = ALMA_ERR_NOMEM;
        break;
      }
      if ((st = alma__q_add_node(g, "DynamicQuantizeLinear", nm, &x, 1, o, 3, NULL)) != ALMA_OK) break;
      for (int k = 0; k < 3; k++) dq_of[3 * x + k] = o[k];
    }
    int xq = dq_of[3 * x], xs = dq_of[3 * x + 1], xzp = dq_of[3 * x + 2];
    /* weights: int8 per channel; a Gemm with transB stores them transposed for MatMulInteger */
    int transpose = t.kind == T_GEMM && t.w_axis == 0;
    int64_t ns;
    int wq, ws, wz;
    if ((st = quantize_weight(g, t.w, t.w_axis, 0, transpose, 1, scales, &ns, &wq, &ws, &wz)) != ALMA_OK) break;
    /* the product's scale: x_scale * w_scale (* alpha), shaped to broadcast over the output */
    alma_tensor *tsc;
    int64_t sdims[ALMA_MAX_RANK];
    int srank = 1;
    sdims[0] = ns;
    if (t.kind == T_CONV) { /* [M, 1, 1, ...] against [N, M, spatial...] */
      srank = g->values[t.w].init->rank - 1;
      for (int d = 1; d < srank; d++) sdims[d] = 1;
    }
    int wsc = alma__q_new_const(g, g->values[t.w].name, "output_scale", ALMA_DTYPE_FLOAT32, srank, sdims, &tsc);
    if (wsc < 0) {
      st = ALMA_ERR_NOMEM;
      break;
    }
    for (int64_t c = 0; c < ns; c++) ((float *)tsc->data)[c] = scales[c] * alpha;
    char nm[700];
    int acc = alma__q_new_value(g, nname, "int32");
    int accf = alma__q_new_value(g, nname, "float");
    int sc = alma__q_new_value(g, nname, "scale");
    int yb = cval >= 0 ? alma__q_new_value(g, nname, "unbiased") : y;
    if (acc < 0 || accf < 0 || sc < 0 || yb < 0) {
      st = ALMA_ERR_NOMEM;
      break;
    }
    n = &g->nodes[i];
    n->dead = 1;
    int in4[4] = {xq, wq, xzp, wz};
    snprintf(nm, sizeof nm, "%.600s/%s", nname, t.kind == T_CONV ? "ConvInteger" : "MatMulInteger");
    int ci, ki;
    if ((st = alma__q_add_node(g, t.kind == T_CONV ? "ConvInteger" : "MatMulInteger", nm, in4, 4, &acc, 1, &ci)) != ALMA_OK)
      break;
    if (t.kind == T_CONV && (st = alma__q_copy_attrs(g, ci, i)) != ALMA_OK) break;
    snprintf(nm, sizeof nm, "%.600s/Cast", nname);
    if ((st = alma__q_add_node(g, "Cast", nm, &acc, 1, &accf, 1, &ki)) != ALMA_OK) break;
    if ((st = alma__q_attr_i(g, ki, "to", ALMA_DTYPE_FLOAT32)) != ALMA_OK) break;
    int m1[2] = {xs, wsc}, m2[2] = {accf, sc};
    snprintf(nm, sizeof nm, "%.600s/scale_Mul", nname);
    if ((st = alma__q_add_node(g, "Mul", nm, m1, 2, &sc, 1, NULL)) != ALMA_OK) break;
    snprintf(nm, sizeof nm, "%.600s/Mul", nname);
    if ((st = alma__q_add_node(g, "Mul", nm, m2, 2, &yb, 1, NULL)) != ALMA_OK) break;
    if (cval >= 0) {
      /* bias: Conv's [M] as [M, 1, ...]; Gemm's C times beta, any shape Add broadcasts */
      const alma_tensor *C = g->values[cval].init;
      int64_t bd[ALMA_MAX_RANK];
      int br = C->rank;
      for (int d = 0; d < C->rank; d++) bd[d] = C->dims[d];
      if (t.kind == T_CONV) {
        br = srank;
        for (int d = 0; d < br; d++) bd[d] = sdims[d];
      }
      alma_tensor *tb;
      int bv = alma__q_new_const(g, g->values[cval].name, "bias", ALMA_DTYPE_FLOAT32, br, bd, &tb);
      if (bv < 0) {
        st = ALMA_ERR_NOMEM;
        break;
      }
      C = g->values[cval].init;
      int64_t cnt = alma_tensor_numel(C);
      for (int64_t e = 0; e < cnt; e++) ((float *)tb->data)[e] = ((const float *)C->data)[e] * beta;
      int a2[2] = {yb, bv};
      snprintf(nm, sizeof nm, "%.600s/bias_Add", nname);
      if ((st = alma__q_add_node(g, "Add", nm, a2, 2, &y, 1, NULL)) != ALMA_OK) break;
    }
    stats.n_conv += t.kind == T_CONV;
    stats.n_matmul += t.kind == T_MATMUL;
    stats.n_gemm += t.kind == T_GEMM;
  }
  if (st == ALMA_OK) {
    alma__q_remove_dead(g);
    st = alma__graph_compact(g);
  }
  if (st == ALMA_OK && opts && opts->verbose)
    fprintf(stderr, "INT8_DYNAMIC: quantized %d Conv, %d MatMul, %d Gemm (weights int8 per channel, activations per batch)\n",
            stats.n_conv, stats.n_matmul, stats.n_gemm);
done:
  alma__infer_result_free(&r);
  free(dq_of);
  free(scales);
  return st;
}

const alma_pass alma__pass_int8_static = {
    .name = "INT8_STATIC",
    .description = "post-training static int8 quantization (QDQ): calibrated uint8 activations per tensor, int8 weights "
                   "per channel, for Conv/MatMul/Gemm, residual Adds and the MaxPool/Flatten/Reshape between them",
    .run = static_run,
    .lossy = 1,
    .needs_calibration = 1,
};

const alma_pass alma__pass_int8_dynamic = {
    .name = "INT8_DYNAMIC",
    .description = "dynamic int8 quantization: int8 weights per channel, activations quantized per batch at run time "
                   "(MatMulInteger/ConvInteger)",
    .run = dynamic_run,
    .lossy = 1,
};
