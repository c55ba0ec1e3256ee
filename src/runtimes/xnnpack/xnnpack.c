/* XNNPACK runtime: Debian's XNNPACK (2022-02-16 snapshot) through its subgraph API.
 *
 * compile: each node is checked against what XNNPACK can do (static shapes from alma__graph_infer
 * with the symbolic dims bound twice, to tell static dims from dynamic ones): float32 nodes,
 * FUSE's alma.Fused* nodes, and the int8 nodes and QDQ clusters of xnn_quant.c;
 * connected sets of such nodes become partitions (xnn_rt.h), split where a node outside the set
 * reads a partition value before the partition's last node runs, so that running the whole
 * partition at its last node is always in order. Activations (Relu, Clip) are folded into the
 * output clamp of the op producing their input; weights are laid out for XNNPACK once.
 *
 * run: the shared executor walks the graph; its hook records the shapes of the partition's values
 * and skips the partition's nodes until the last one, where the partition runs: the XNNPACK
 * runtime for this signature of input shapes (built at its first use and cached) reads the
 * external inputs (reordered to NHWC for rank 4 in NHWC mode) and writes the exported values into
 * the tensors the executor allocated for them. A shape XNNPACK rejects runs the partition's nodes
 * on EAGER kernels instead (describe() says why). */
#ifdef ALMA_HAVE_XNNPACK
#include <math.h>
#include <pthread.h>

#include "ops/contrib_bert.h"
#include "ops/contrib_nbits.h"
#include "ops/gemm_packed.h"
#include "runtimes/pool.h"
#include "runtimes/xnnpack/xnn_rt.h"

/* ---- static analysis: which nodes XNNPACK takes ----------------------------------------------- */
typedef struct actx {
  const alma_graph *g;
  const alma_tensor *i2, *i3; /* static inference with symbolic dims bound to 2 and to 3 */
  const alma_tensor *cval;    /* per value: evaluated DequantizeLinear of constants (may be NULL) */
  const alma_dtype *vdt;      /* per value: static dtype */
} actx;

static int f32(const actx *a, int v) { return v >= 0 && a->i2[v].rank >= 0 && a->i2[v].dtype == ALMA_DTYPE_FLOAT32; }
static int rank_of(const actx *a, int v) { return v >= 0 ? a->i2[v].rank : -1; }
/* dim d of v when it does not depend on the symbolic dims, else -1 */
static int64_t sdim(const actx *a, int v, int d) {
  if (v < 0 || a->i2[v].rank <= d || a->i3[v].rank != a->i2[v].rank) return -1;
  return a->i2[v].dims[d] == a->i3[v].dims[d] ? a->i2[v].dims[d] : -1;
}
static const alma_tensor *cst(const actx *a, const alma_node *n, int k) {
  return k < n->n_inputs ? alma__xrt_cst(a->g, a->cval, n->inputs[k]) : NULL;
}
static int cst_f32_scalar(const actx *a, const alma_node *n, int k, float *out) {
  const alma_tensor *t = cst(a, n, k);
  if (!t || t->dtype != ALMA_DTYPE_FLOAT32 || alma_tensor_numel(t) != 1) return 0;
  *out = *(const float *)t->data;
  return 1;
}
/* NCHW order equals NHWC order for rank-4 value v whatever the symbolic dims are */
static int static_layout_free(const actx *a, int v) {
  if (rank_of(a, v) != 4) return 1;
  int64_t c = sdim(a, v, 1), h = sdim(a, v, 2), w = sdim(a, v, 3);
  return c == 1 || (h == 1 && w == 1);
}

static int set(xrt_node *xn, int kind, int sub, int can_plain, int can_nhwc) {
  xn->kind = kind;
  xn->sub = sub;
  xn->can_plain = can_plain;
  xn->can_nhwc = can_nhwc;
  return 1;
}

/* FUSE's fused op n: the base op it computes ("Conv", "Gemm", "MatMul") and its activation in xn;
 * NULL when XNNPACK has no node for that activation (Gelu, Tanh, HardSigmoid). */
static const char *fused_base(const alma_node *n, xrt_node *xn) {
  static const char *map[][2] = {{"FusedConv", "Conv"}, {"FusedGemm", "Gemm"}, {"FusedMatMul", "MatMul"}};
  const char *base = NULL;
  for (int i = 0; i < 3; i++)
    if (!strcmp(n->op_type, map[i][0])) base = map[i][1];
  if (!base) return NULL;
  if (alma__fused_act_parse(n, &xn->fact) != ALMA_OK) {
    alma__error_clear();
    return NULL;
  }
  switch (xn->fact.kind) {
    case ALMA_ACT_NONE: case ALMA_ACT_HARDSWISH: case ALMA_ACT_SIGMOID: case ALMA_ACT_SILU: case ALMA_ACT_LEAKYRELU:
      break;
    case ALMA_ACT_RELU:
      xn->act_clamp = 1;
      break;
    case ALMA_ACT_CLIP:
      if (isnan(xn->fact.p0) || isnan(xn->fact.p1) || xn->fact.p0 > xn->fact.p1) return NULL;
      xn->act_clamp = 1;
      break;
    default:
      return NULL;
  }
  if (xn->fact.kind == ALMA_ACT_LEAKYRELU && !isfinite(xn->fact.p0)) return NULL;
  xn->fused_op = 1;
  return base;
}

/* Fills xn (kind, modes, parameters) when XNNPACK can run n; returns 0 otherwise. */
static int analyze(const actx *a, const alma_node *n, xrt_node *xn) {
  if (!n->op || n->n_implicit || n->n_outputs < 1 || n->outputs[0] < 0) return 0;
  const char *t = n->op_type;
  xn->zslot = -1;
  if (n->domain[0] && (strcmp(n->domain, "alma") || !(t = fused_base(n, xn)))) return 0;
  int x = n->n_inputs > 0 ? n->inputs[0] : -1, y = n->outputs[0];
  for (int k = 1; k < n->n_outputs; k++)
    if (n->outputs[k] >= 0) return 0; /* optional outputs (MaxPool Indices, BN statistics) */
  if (!strcmp(t, "QuantizeLinear") || !strcmp(t, "DequantizeLinear") || !strcmp(t, "QLinearConv") ||
      !strcmp(t, "QLinearMatMul"))
    return alma__xrt_analyze_quant(a->g, a->cval, a->vdt, n, rank_of(a, x), rank_of(a, y), xn);
  if (!f32(a, y)) return 0;
  /* a constant data input (not a binary op's operand) would be a value XNNPACK never computes */
  if (x >= 0 && alma__xrt_cst(a->g, a->cval, x) && strcmp(t, "Add") && strcmp(t, "Sub") && strcmp(t, "Mul") &&
      strcmp(t, "Div") && strcmp(t, "Max") && strcmp(t, "Min"))
    return 0;
  int ry = rank_of(a, y);
  if (ry < 1 || ry > XNN_MAX_TENSOR_DIMS) return 0;
  xn->out_rank = ry;
  xn->out_min = -INFINITY;
  xn->out_max = INFINITY;
  if (xn->act_clamp) {
    xn->out_min = xn->fact.kind == ALMA_ACT_RELU ? 0.0f : xn->fact.p0;
    xn->out_max = xn->fact.kind == ALMA_ACT_RELU ? INFINITY : xn->fact.p1;
  }

  if (!strcmp(t, "Conv")) {
    const alma_tensor *W = cst(a, n, 1), *B = n->n_inputs > 2 && n->inputs[2] >= 0 ? cst(a, n, 2) : NULL;
    /* rank 3 ([N, C, L], a 1-D conv): XNNPACK's 2-D conv with H = 1 on NLC data (NHWC mode) */
    int rx = rank_of(a, x);
    if (!f32(a, x) || (rx != 4 && rx != 3) || !W || W->dtype != ALMA_DTYPE_FLOAT32 || W->rank != rx || ry != rx) return 0;
    if (n->n_inputs > 2 && n->inputs[2] >= 0 && (!B || B->dtype != ALMA_DTYPE_FLOAT32 || alma_tensor_numel(B) != W->dims[0]))
      return 0;
    int64_t G = alma__attr_i(n, "group", 1);
    if (G < 1 || W->dims[0] % G || W->dims[0] <= 0 || W->dims[1] <= 0) return 0;
    const int64_t *ks = NULL;
    int nk = alma__attr_ints(n, "kernel_shape", &ks);
    if (nk && (nk != rx - 2 || ks[0] != W->dims[2] || (rx == 4 && ks[1] != W->dims[3]))) return 0;
    int dw = W->dims[1] == 1 && G > 1;
    if (xn->fused_op && n->n_inputs > 3 && n->inputs[3] >= 0) {
      /* FusedConv's residual: a computed rank-4 float tensor (an XNNPACK add after the conv) */
      int z = n->inputs[3];
      if (rx != 4 || !f32(a, z) || rank_of(a, z) != 4 || alma__xrt_cst(a->g, a->cval, z)) return 0;
      xn->zslot = 3;
    }
    return set(xn, dw ? XK_DWCONV : XK_CONV, 0, 0, 1);
  }
  if (!strcmp(t, "Gemm") || !strcmp(t, "MatMul")) {
    int gemm = t[0] == 'G';
    const alma_tensor *W = cst(a, n, 1);
    if (!f32(a, x) || !W || W->dtype != ALMA_DTYPE_FLOAT32 || W->rank != 2) return 0;
    int rx = rank_of(a, x);
    xn->fcg = gemm;
    if (!gemm && xn->fused_op && n->n_inputs > 2 && n->inputs[2] >= 0) {
      /* FusedMatMul's bias: constant, one value or N along the last axis */
      const alma_tensor *C = cst(a, n, 2);
      int64_t N = W->dims[1], cn = C ? alma_tensor_numel(C) : 0;
      if (!C || C->dtype != ALMA_DTYPE_FLOAT32 || (cn != 1 && !(cn == N && C->rank >= 1 && C->dims[C->rank - 1] == N)))
        return 0;
    }
    if (gemm) {
      /* alma.FusedGemm follows Gemm's opset-13 rules whatever its own version */
      if ((!xn->fused_op && n->since_version < 7) || alma__attr_i(n, "transA", 0) || rx != 2) return 0;
      int64_t N = alma__attr_i(n, "transB", 0) ? W->dims[0] : W->dims[1];
      if (n->n_inputs > 2 && n->inputs[2] >= 0) {
        const alma_tensor *C = cst(a, n, 2);
        if (!C || C->dtype != ALMA_DTYPE_FLOAT32) return 0;
        int64_t cn = alma_tensor_numel(C);
        /* a bias: one value, or N values along the last axis */
        if (cn != 1 && !(cn == N && C->rank >= 1 && C->dims[C->rank - 1] == N)) return 0;
      }
      return set(xn, XK_FC, 0, 1, 1);
    }
    if (rx < 2) return 0;
    return set(xn, XK_FC, 0, 1, rx != 4);
  }
  if (!strcmp(t, "MaxPool") || !strcmp(t, "AveragePool")) {
    int is_max = t[0] == 'M';
    if (!f32(a, x) || rank_of(a, x) != 4) return 0;
    const int64_t *ks = NULL, *d = NULL, *p = NULL;
    if (alma__attr_ints(n, "kernel_shape", &ks) != 2 || ks[0] * ks[1] <= 1) return 0; /* XNNPACK rejects 1x1 */
    int nd = alma__attr_ints(n, "dilations", &d), np = alma__attr_ints(n, "pads", &p);
    int dil = nd == 2 && (d[0] != 1 || d[1] != 1), pads = np == 4 && (p[0] | p[1] | p[2] | p[3]);
    if (is_max) {
      if (dil && pads) return 0;
    } else {
      if (dil || (pads && alma__attr_i(n, "count_include_pad", 0))) return 0;
    }
    return set(xn, is_max ? XK_MAXPOOL : XK_AVGPOOL, 0, 0, 1);
  }
  if (!strcmp(t, "GlobalAveragePool")) {
    if (!f32(a, x) || rank_of(a, x) != 4) return 0;
    return set(xn, XK_GAP, 0, 0, 1);
  }
  static const struct { const char *name; int sub; } binops[] = {
      {"Add", XB_ADD}, {"Sub", XB_SUB}, {"Mul", XB_MUL}, {"Div", XB_DIV}, {"Max", XB_MAX}, {"Min", XB_MIN}};
  for (size_t i = 0; i < sizeof binops / sizeof binops[0]; i++) {
    if (strcmp(t, binops[i].name)) continue;
    if (n->n_inputs != 2 || n->inputs[0] < 0 || n->inputs[1] < 0) return 0;
    xn->cst_slot = -1;
    int dyn_not4 = 0, ndyn = 0;
    for (int k = 0; k < 2; k++) {
      int v = n->inputs[k];
      if (!f32(a, v) || rank_of(a, v) > ry) return 0;
      if (cst(a, n, k)) {
        if (xn->cst_slot >= 0) return 0; /* both constant: nothing to run */
        xn->cst_slot = k;
      } else {
        if (rank_of(a, v) < 1) return 0; /* XNNPACK values have at least one dim */
        ndyn++;
        dyn_not4 |= rank_of(a, v) != 4;
      }
    }
    if (!ndyn) return 0;
    /* in NHWC mode a rank-4 result needs rank-4 dynamic operands (constants are reordered) */
    return set(xn, XK_BINARY, binops[i].sub, 1, ry != 4 || !dyn_not4);
  }
  static const struct { const char *name; int sub; } unops[] = {
      {"Abs", XU_ABS}, {"Neg", XU_NEG}, {"Floor", XU_FLOOR}, {"Ceil", XU_CEIL}, {"Sqrt", XU_SQRT},
      {"Round", XU_ROUND}, {"Sigmoid", XU_SIGMOID}, {"HardSwish", XU_HARDSWISH}};
  for (size_t i = 0; i < sizeof unops / sizeof unops[0]; i++)
    if (!strcmp(t, unops[i].name)) return f32(a, x) && n->n_inputs == 1 ? set(xn, XK_UNARY, unops[i].sub, 1, 1) : 0;
  if (!strcmp(t, "Relu")) {
    if (!f32(a, x)) return 0;
    xn->out_min = 0;
    return set(xn, XK_CLAMP, 0, 1, 1);
  }
  if (!strcmp(t, "Clip")) {
    if (!f32(a, x)) return 0;
    float lo = -INFINITY, hi = INFINITY;
    if (n->since_version < 11) {
      lo = alma__attr_f(n, "min", -3.402823e+38f);
      hi = alma__attr_f(n, "max", 3.402823e+38f);
    } else {
      if (n->n_inputs > 1 && n->inputs[1] >= 0 && !cst_f32_scalar(a, n, 1, &lo)) return 0;
      if (n->n_inputs > 2 && n->inputs[2] >= 0 && !cst_f32_scalar(a, n, 2, &hi)) return 0;
    }
    if (isnan(lo) || isnan(hi) || lo > hi) return 0;
    xn->out_min = lo;
    xn->out_max = hi;
    return set(xn, XK_CLAMP, 0, 1, 1);
  }
  if (!strcmp(t, "LeakyRelu") || !strcmp(t, "Elu")) {
    if (!f32(a, x)) return 0;
    int leaky = t[0] == 'L';
    xn->alpha = alma__attr_f(n, "alpha", leaky ? 0.01f : 1.0f);
    if (!isfinite(xn->alpha)) return 0;
    return set(xn, leaky ? XK_LEAKY : XK_ELU, 0, 1, 1);
  }
  if (!strcmp(t, "Softmax")) {
    if (!f32(a, x)) return 0;
    int64_t axis = alma__attr_i(n, "axis", n->since_version >= 13 ? -1 : 1);
    if (axis < 0) axis += ry;
    if (axis < 0 || axis >= ry) return 0;
    int last = axis == ry - 1;
    /* NHWC: channels are innermost, so axis 1 of a rank-4 tensor is XNNPACK's last axis; before
     * opset 13 axis 1 meant C*H*W, which is C alone when H = W = 1 */
    int nhwc_ok = ry != 4 ? last
                          : axis == 1 && (n->since_version >= 13 || (sdim(a, x, 2) == 1 && sdim(a, x, 3) == 1));
    return set(xn, XK_SOFTMAX, 0, last, nhwc_ok);
  }
  if (!strcmp(t, "Flatten") || !strcmp(t, "Reshape")) {
    if (!f32(a, x) || rank_of(a, x) < 1 || rank_of(a, x) > XNN_MAX_TENSOR_DIMS) return 0;
    if (t[0] == 'R' && (n->n_inputs < 2 || !cst(a, n, 1))) return 0;
    int free_order = static_layout_free(a, x) && static_layout_free(a, y);
    /* Flatten(axis 1) of NHWC data feeding fully-connected nodes only: those read the NHWC order
     * with their weights' columns reordered to match (checked once partitions are known) */
    int64_t c = sdim(a, x, 1), h = sdim(a, x, 2), wd = sdim(a, x, 3);
    if (!free_order && t[0] == 'F' && rank_of(a, x) == 4 && alma__attr_i(n, "axis", 1) == 1 && c > 0 && h > 0 && wd > 0) {
      xn->flat_c = c;
      xn->flat_hw = h * wd;
      return set(xn, XK_RESHAPE, 1, 1, 1);
    }
    return set(xn, XK_RESHAPE, 0, 1, free_order);
  }
  if (!strcmp(t, "PRelu")) {
    const alma_tensor *S = cst(a, n, 1);
    int64_t C = sdim(a, x, 1);
    if (!f32(a, x) || rank_of(a, x) != 4 || !S || S->dtype != ALMA_DTYPE_FLOAT32 || C <= 0) return 0;
    int64_t sn = alma_tensor_numel(S);
    /* per-channel slopes: [C,1,1] or [1,C,1,1] (or one slope for all) */
    int per_c = sn == C && S->rank >= 3 && S->dims[S->rank - 3] == C && S->dims[S->rank - 2] == 1 && S->dims[S->rank - 1] == 1;
    if (sn != 1 && !per_c) return 0;
    xn->chans = C;
    return set(xn, XK_PRELU, 0, 0, 1);
  }
  if (!strcmp(t, "Pad")) {
    if (!f32(a, x) || strcmp(alma__attr_s(n, "mode", "constant"), "constant")) return 0;
    int rx = rank_of(a, x);
    const int64_t *pads = NULL;
    int np = 0;
    if (n->since_version < 11) {
      np = alma__attr_ints(n, "pads", &pads);
      xn->alpha = alma__attr_f(n, "value", 0.0f);
    } else {
      const alma_tensor *P = cst(a, n, 1);
      if (!P || P->dtype != ALMA_DTYPE_INT64) return 0;
      pads = P->data;
      np = (int)alma_tensor_numel(P);
      xn->alpha = 0;
      if (n->n_inputs > 2 && n->inputs[2] >= 0 && !cst_f32_scalar(a, n, 2, &xn->alpha)) return 0;
      if (n->n_inputs > 3 && n->inputs[3] >= 0) return 0; /* axes (opset 18) */
    }
    if (np != 2 * rx || rx != ry) return 0;
    for (int i = 0; i < rx; i++) {
      if (pads[i] < 0 || pads[i + rx] < 0) return 0; /* negative pads crop: not a pad in XNNPACK */
      xn->pad_pre[i] = pads[i];
      xn->pad_post[i] = pads[i + rx];
    }
    return set(xn, XK_PAD, 0, 1, 1);
  }
  if (!strcmp(t, "BatchNormalization")) {
    if (n->since_version < 9 || alma__attr_i(n, "training_mode", 0) || n->n_inputs != 5 || !f32(a, x) || ry < 2) return 0;
    int64_t C = sdim(a, x, 1);
    if (C <= 0) return 0;
    for (int k = 1; k < 5; k++) {
      const alma_tensor *s = cst(a, n, k);
      if (!s || s->dtype != ALMA_DTYPE_FLOAT32 || alma_tensor_numel(s) != C) return 0;
    }
    xn->chans = C;
    return set(xn, XK_BN, 0, 1, 1);
  }
  return 0;
}

/* In NHWC mode a rank-3 value [N, C, L] is channels-last (NLC, XNNPACK dims [N, 1, L, C]), as a
 * rank-4 one is NHWC. Which nodes take that: 1-D convs, elementwise ops of one operand, and binary
 * ops whose operands are all computed rank-3 values (broadcasting over the permuted dims is the
 * same), per-tensor Quantize/DequantizeLinear; others touching a rank-3 value (constants in ONNX
 * order, axes, reshapes) stay out. */
static int nlc_ok(const actx *a, const alma_node *n, const xrt_node *xn) {
  int r3 = 0, all3 = 1;
  for (int k = 0; k < n->n_inputs; k++) {
    int v = n->inputs[k];
    if (v < 0) continue;
    int c = alma__xrt_cst(a->g, a->cval, v) != NULL;
    r3 |= !c && rank_of(a, v) == 3; /* constants (weights, a rank-4 op's [C,1,1] operand) keep their layout */
    all3 &= !c && rank_of(a, v) == 3;
  }
  r3 |= rank_of(a, n->outputs[0]) == 3;
  if (!r3) return 1;
  switch (xn->kind) {
    case XK_CONV: case XK_DWCONV: return !xn->q;
    case XK_UNARY: case XK_CLAMP: case XK_LEAKY: case XK_ELU: case XK_QUANT: case XK_DEQUANT: return 1; /* per element */
    case XK_BINARY: return all3 && rank_of(a, n->outputs[0]) == 3;
    default: return 0;
  }
}

/* ---- partitioning ------------------------------------------------------------------------------ */
static alma_status uses_build(const alma_graph *g, uses_t *u) {
  int nv = g->n_values, total = 0;
  u->off = calloc((size_t)nv + 2, sizeof(int));
  u->is_out = calloc((size_t)nv + 1, 1);
  if (!u->off || !u->is_out) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] >= 0) u->off[n->inputs[k] + 1]++, total++;
    for (int k = 0; k < n->n_implicit; k++) u->off[n->implicit_inputs[k] + 1]++, total++;
  }
  for (int v = 0; v < nv; v++) u->off[v + 1] += u->off[v];
  u->list = malloc(sizeof(int) * ((size_t)total + 1));
  int *fill = calloc((size_t)nv + 1, sizeof(int));
  if (!u->list || !fill) {
    free(fill);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs + n->n_implicit; k++) {
      int v = k < n->n_inputs ? n->inputs[k] : n->implicit_inputs[k - n->n_inputs];
      if (v >= 0) u->list[u->off[v] + fill[v]++] = i;
    }
  }
  free(fill);
  for (int i = 0; i < g->n_outputs; i++) u->is_out[g->outputs[i]] = 1;
  return ALMA_OK;
}

static void uses_free(uses_t *u) {
  free(u->off);
  free(u->list);
  free(u->is_out);
}

static int uf_find(int *par, int i) {
  while (par[i] != i) i = par[i] = par[par[i]];
  return i;
}

/* Appends partition nodes[0..n) to the plan (nodes ascending). */
static alma_status add_part(xrt_plan *p, const int *nodes, int n, int *cap) {
  if (p->n_parts == *cap) {
    int nc = *cap ? 2 * *cap : 8;
    xrt_part *np = realloc(p->parts, sizeof *np * (size_t)nc);
    if (!np) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    p->parts = np;
    *cap = nc;
  }
  xrt_part *P = &p->parts[p->n_parts];
  memset(P, 0, sizeof *P);
  P->nodes = malloc(sizeof(int) * (size_t)n);
  if (!P->nodes) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  memcpy(P->nodes, nodes, sizeof(int) * (size_t)n);
  P->n_nodes = n;
  P->anchor = nodes[n - 1];
  for (int k = 0; k < n; k++) p->xn[nodes[k]].part = p->n_parts;
  p->n_parts++;
  return ALMA_OK;
}

/* Splits the ascending node list L (all marked in `mark` with stamp) where a node outside it reads
 * one of its values before its last node, and appends the pieces. */
static alma_status split_and_add(xrt_plan *p, const uses_t *u, int *L, int n, int *mark, int stamp, int *cap) {
  const alma_graph *g = p->g;
  while (n > 0) {
    int anchor = L[n - 1], cut = INT32_MAX;
    for (int k = 0; k < n; k++) {
      const alma_node *nd = &g->nodes[L[k]];
      for (int o = 0; o < nd->n_outputs; o++) {
        int v = nd->outputs[o];
        if (v < 0) continue;
        for (int j = u->off[v]; j < u->off[v + 1]; j++) {
          int c = u->list[j];
          if (mark[c] != stamp && c < anchor && c < cut) cut = c;
        }
      }
    }
    if (cut == INT32_MAX) return add_part(p, L, n, cap);
    int lo = 0;
    while (lo < n && L[lo] < cut) lo++;
    ALMA_TRY(add_part(p, L, lo, cap));
    for (int k = 0; k < lo; k++) mark[L[k]] = -1;
    L += lo;
    n -= lo;
  }
  return ALMA_OK;
}

/* A Relu/Clip after node xn can become its output clamp: not after a fused activation that is an
 * XNNPACK node of its own (the clamp would come before it), nor after a second clamp. */
static int is_fusable_producer(const xrt_node *xn) {
  int kind = xn->kind, sub = xn->sub;
  if (xn->fact.kind != ALMA_ACT_NONE) return 0;
  switch (kind) {
    case XK_CONV: case XK_DWCONV: case XK_FC: case XK_MAXPOOL: case XK_AVGPOOL: case XK_GAP: case XK_BN:
      return 1;
    case XK_BINARY:
      return sub == XB_ADD || sub == XB_SUB || sub == XB_MUL || sub == XB_DIV;
    default:
      return 0;
  }
}

static int value_feeds_fc(const xrt_plan *p, const uses_t *u, int y, int q, int depth) {
  if (u->is_out[y] || u->off[y + 1] == u->off[y] || depth > 4) return 0;
  for (int j = u->off[y]; j < u->off[y + 1]; j++) {
    int c = u->list[j];
    const alma_node *cn = &p->g->nodes[c];
    if (p->xn[c].part != q) return 0;
    /* QuantizeLinear / DequantizeLinear keep each element in its place (INT8_STATIC's pair) */
    if (p->xn[c].kind == XK_QUANT || p->xn[c].kind == XK_DEQUANT) {
      if (!value_feeds_fc(p, u, cn->outputs[0], q, depth + 1)) return 0;
      continue;
    }
    if (p->xn[c].kind != XK_FC || cn->inputs[0] != y || (cn->n_inputs > 1 && cn->inputs[1] == y)) return 0;
  }
  return 1;
}

/* Flatten node f (NCHW order of NHWC data) is read only by fully-connected nodes of partition q,
 * as their data input, directly or through QuantizeLinear / DequantizeLinear, and is not a graph
 * output. */
static int flatten_feeds_fc(const xrt_plan *p, const uses_t *u, int f, int q) {
  return value_feeds_fc(p, u, p->g->nodes[f].outputs[0], q, 0);
}

/* The Flatten (sub 1) of partition q that a fully-connected node's input x comes from, directly or
 * through QuantizeLinear / DequantizeLinear nodes; -1 if none. */
static int flatten_source(const xrt_plan *p, int x, int q) {
  for (int depth = 0; x >= 0 && depth < 6; depth++) {
    int pr = p->g->values[x].producer;
    if (pr < 0 || p->xn[pr].part != q) return -1;
    if (p->xn[pr].kind == XK_RESHAPE && p->xn[pr].sub == 1) return pr;
    if (p->xn[pr].kind != XK_QUANT && p->xn[pr].kind != XK_DEQUANT) return -1;
    x = p->g->nodes[pr].inputs[0];
  }
  return -1;
}

static alma_status partition(xrt_plan *p, const uses_t *u) {
  const alma_graph *g = p->g;
  int nn = g->n_nodes, cap = 0;
  int *cand = calloc((size_t)nn + 1, sizeof(int)), *par = malloc(sizeof(int) * ((size_t)nn + 1));
  int *order = malloc(sizeof(int) * ((size_t)nn + 1)), *mark = malloc(sizeof(int) * ((size_t)nn + 1));
  int *start = malloc(sizeof(int) * ((size_t)nn + 1));
  alma_status st = ALMA_OK;
  if (!cand || !par || !order || !mark || !start) {
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    goto out;
  }
  for (int i = 0; i < nn; i++) cand[i] = p->xn[i].kind != XK_NONE;
  for (;;) {
    /* connected components of candidates, then the order split */
    for (int i = 0; i < p->n_parts; i++) free(p->parts[i].nodes);
    p->n_parts = 0;
    for (int i = 0; i < nn; i++) {
      par[i] = i;
      p->xn[i].part = -1;
      mark[i] = -1;
    }
    for (int i = 0; i < nn; i++) {
      if (!cand[i]) continue;
      const alma_node *n = &g->nodes[i];
      for (int k = 0; k < n->n_inputs; k++) {
        int v = n->inputs[k], pr = v >= 0 ? g->values[v].producer : -1;
        if (pr >= 0 && pr < nn && cand[pr]) par[uf_find(par, pr)] = uf_find(par, i);
      }
    }
    /* group the candidates by component, ascending within each (a counting sort by root) */
    for (int i = 0; i < nn; i++) start[i] = 0;
    for (int i = 0; i < nn; i++)
      if (cand[i]) start[uf_find(par, i)]++;
    for (int i = 0, acc = 0; i < nn; i++) {
      int c = start[i];
      start[i] = acc;
      acc += c;
    }
    int total = 0;
    for (int i = 0; i < nn; i++)
      if (cand[i]) {
        int r = uf_find(par, i);
        order[start[r]++] = i;
        mark[i] = r;
        total++;
      }
    for (int k = 0; k < total && st == ALMA_OK;) {
      int r = mark[order[k]], m = 1;
      while (k + m < total && mark[order[k + m]] == r) m++;
      st = split_and_add(p, u, order + k, m, mark, r, &cap);
      k += m;
    }
    if (st != ALMA_OK) goto out;
    /* mode per partition; drop nodes the mode cannot take and start over */
    int changed = 0;
    for (int q = 0; q < p->n_parts; q++) {
      xrt_part *P = &p->parts[q];
      /* reshapes alone would only add copies in and out */
      int only_reshape = 1;
      for (int k = 0; k < P->n_nodes; k++) only_reshape &= p->xn[P->nodes[k]].kind == XK_RESHAPE;
      if (only_reshape) {
        for (int k = 0; k < P->n_nodes; k++) cand[P->nodes[k]] = 0;
        changed = 1;
        continue;
      }
      P->nhwc = 0;
      for (int k = 0; k < P->n_nodes; k++) P->nhwc |= !p->xn[P->nodes[k]].can_plain;
      if (!P->nhwc) continue;
      for (int k = 0; k < P->n_nodes; k++)
        if (!p->xn[P->nodes[k]].can_nhwc || (p->xn[P->nodes[k]].kind == XK_RESHAPE && p->xn[P->nodes[k]].sub == 1 &&
                                             !flatten_feeds_fc(p, u, P->nodes[k], q)))
          cand[P->nodes[k]] = 0, changed = 1;
    }
    if (!changed) break;
  }
  for (int i = 0; i < nn; i++) {
    xrt_node *a = &p->xn[i];
    a->fused_into = a->fused_act = a->bias_node = -1;
    a->has_clamp = a->act_clamp; /* a fused Relu/Clip is the clamp already */
    a->flatten_perm = 0;
  }
  for (int i = 0; i < nn; i++) {
    xrt_node *a = &p->xn[i];
    if (a->part < 0) continue;
    int x = g->nodes[i].inputs[0], fl = a->kind == XK_FC ? flatten_source(p, x, a->part) : -1;
    /* a fully-connected node reading an NCHW Flatten of NHWC data (the partition's mode decides):
     * its weights take the Flatten's C and H*W */
    if (fl >= 0 && p->parts[a->part].nhwc) {
      a->flatten_perm = 1;
      a->flat_c = p->xn[fl].flat_c;
      a->flat_hw = p->xn[fl].flat_hw;
    }
    /* Add of a constant [N] after a fully-connected node without bias: its bias */
    if (a->kind == XK_BINARY && a->sub == XB_ADD && a->cst_slot >= 0) {
      int xv = g->nodes[i].inputs[1 - a->cst_slot], fp = g->values[xv].producer;
      if (fp < 0 || p->xn[fp].part != a->part || p->xn[fp].kind != XK_FC || p->xn[fp].fused_act >= 0 || u->is_out[xv] ||
          u->off[xv + 1] - u->off[xv] != 1 || p->xn[fp].fact.kind != ALMA_ACT_NONE || p->xn[fp].q)
        continue;
      const alma_node *f = &g->nodes[fp];
      if (f->n_inputs > 2 && f->inputs[2] >= 0) continue; /* Gemm with C, FusedMatMul with bias */
      const alma_tensor *W = alma__xrt_cst(g, p->cval, f->inputs[1]), *B = alma__xrt_cst(g, p->cval, g->nodes[i].inputs[a->cst_slot]);
      int64_t N = p->xn[fp].fcg && alma__attr_i(f, "transB", 0) ? W->dims[0] : W->dims[1];
      if (alma_tensor_numel(B) != N || B->rank < 1 || B->dims[B->rank - 1] != N || B->rank > p->xn[fp].out_rank) continue;
      p->xn[fp].bias_node = i;
      p->xn[fp].fused_act = i;
      a->fused_into = fp;
    }
  }
  /* QDQ clusters whose nodes share a partition run in int8 */
  alma__xrt_quant_fold(p, u);
  /* activations folded into their producer's output clamp */
  for (int i = 0; i < nn; i++) {
    xrt_node *a = &p->xn[i];
    if (a->part < 0 || a->kind != XK_CLAMP || a->fused_into >= 0) continue;
    int x = g->nodes[i].inputs[0], pr = g->values[x].producer;
    if (pr >= 0 && p->xn[pr].fused_into >= 0) pr = p->xn[pr].fused_into; /* x is that node's output now */
    if (pr < 0 || p->xn[pr].part != a->part || p->xn[pr].has_clamp || p->xn[pr].fused_into >= 0) continue;
    if (!is_fusable_producer(&p->xn[pr]) || u->is_out[x] || u->off[x + 1] - u->off[x] != 1) continue;
    p->xn[pr].fused_act = i;
    p->xn[pr].has_clamp = 1;
    p->xn[pr].out_min = a->out_min;
    p->xn[pr].out_max = a->out_max;
    a->fused_into = pr;
  }
  /* boundaries */
  int *seen = calloc((size_t)g->n_values + 1, sizeof(int));
  int *last_use = malloc(sizeof(int) * ((size_t)g->n_values + 1));
  if (!seen || !last_use) {
    free(seen);
    free(last_use);
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    goto out;
  }
  for (int v = 0; v < g->n_values; v++) {
    last_use[v] = -1;
    for (int j = u->off[v]; j < u->off[v + 1]; j++)
      if (u->list[j] > last_use[v]) last_use[v] = u->list[j];
  }
  for (int q = 0; q < p->n_parts && st == ALMA_OK; q++) {
    xrt_part *P = &p->parts[q];
    int cap_in = 0, cap_out = 0;
    for (int k = 0; k < P->n_nodes; k++) {
      const alma_node *n = &g->nodes[P->nodes[k]];
      cap_in += n->n_inputs;
      cap_out += n->n_outputs;
    }
    P->in = malloc(sizeof(int) * ((size_t)cap_in + 1));
    P->in_copy = calloc((size_t)cap_in + 1, 1);
    P->out = malloc(sizeof(int) * ((size_t)cap_out + 1));
    if (!P->in || !P->in_copy || !P->out) {
      st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      break;
    }
    int stamp = q + 1;
    for (int k = 0; k < P->n_nodes && st == ALMA_OK; k++) {
      int ni = P->nodes[k];
      const alma_node *n = &g->nodes[ni];
      xrt_node *xn = &p->xn[ni];
      xn->ext_slot = malloc(sizeof(int) * ((size_t)n->n_inputs + 1));
      if (!xn->ext_slot) {
        st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
        break;
      }
      for (int j = 0; j < n->n_inputs; j++) {
        int v = n->inputs[j], pr = v >= 0 ? g->values[v].producer : -1;
        xn->ext_slot[j] = -1;
        if (v < 0 || alma__xrt_cst(g, p->cval, v) || (pr >= 0 && p->xn[pr].part == q)) continue;
        if (seen[v] != stamp) {
          seen[v] = stamp;
          int is_in = g->values[v].is_input;
          /* the executor frees a value after its last reader: copy it if that is before the anchor */
          P->in_copy[P->n_in] = !is_in && !u->is_out[v] && last_use[v] < P->anchor;
          P->in[P->n_in++] = v;
        }
        for (int e = 0; e < P->n_in; e++)
          if (P->in[e] == v) xn->ext_slot[j] = e;
      }
      for (int o = 0; o < n->n_outputs; o++) {
        int v = n->outputs[o], ext = 0;
        if (v < 0) continue;
        /* a value nothing reads is exported too: XNNPACK gives an unread internal value no memory */
        ext = u->is_out[v] || u->off[v] == u->off[v + 1];
        for (int j = u->off[v]; j < u->off[v + 1] && !ext; j++) ext = p->xn[u->list[j]].part != q;
        if (ext) P->out[P->n_out++] = v, p->exported[v] = 1;
      }
    }
    if (st != ALMA_OK) break;
    for (int k = 0; k < P->n_nodes && st == ALMA_OK; k++)
      st = p->xn[P->nodes[k]].q ? alma__xrt_prepare_qstatics(p, P->nodes[k]) : alma__xrt_prepare_statics(p, P->nodes[k]);
  }
  free(seen);
  free(last_use);
out:
  free(start);
  free(cand);
  free(par);
  free(order);
  free(mark);
  return st;
}

/* ---- the runtime ------------------------------------------------------------------------------- */
static pthread_once_t xnn_once = PTHREAD_ONCE_INIT;
static enum xnn_status xnn_init_status;
static void xnn_init_once(void) { xnn_init_status = xnn_initialize(NULL); }

static alma_status xrt_init(void) {
  pthread_once(&xnn_once, xnn_init_once);
  if (xnn_init_status == xnn_status_unsupported_hardware)
    return alma__errorf(ALMA_ERR_UNAVAILABLE, "XNNPACK does not support this CPU (xnn_initialize: unsupported hardware)");
  if (xnn_init_status != xnn_status_success)
    return alma__errorf(ALMA_ERR_UNAVAILABLE, "xnn_initialize failed (status %d)", (int)xnn_init_status);
  return ALMA_OK;
}

static void plan_free(xrt_plan *p) {
  if (!p) return;
  for (int q = 0; q < p->n_parts; q++) {
    xrt_part *P = &p->parts[q];
    for (xrt_build *b = P->builds, *nb; b; b = nb) {
      nb = b->next;
      alma__xrt_build_free(b);
      free(b);
    }
    free(P->nodes);
    free(P->in);
    free(P->in_copy);
    free(P->out);
  }
  free(p->parts);
  free(p->prof_s);
  free(p->prof_runs);
  if (p->xn)
    for (int i = 0; i < p->g->n_nodes; i++) {
      alma__xrt_static_free(&p->xn[i].w);
      alma__xrt_static_free(&p->xn[i].b);
      alma__xrt_qstatic_free(&p->xn[i].qw);
      free(p->xn[i].ext_slot);
    }
  for (int v = 0; p->cval && v < p->g->n_values; v++) alma_tensor_free_data(&p->cval[v]);
  free(p->cval);
  free(p->vq);
  free(p->vdt);
  free(p->xn);
  free(p->defer);
  free(p->pooled);
  free(p->exported);
  if (p->pool) pthreadpool_destroy(p->pool);
  alma__pool_free(p->apool);
  free(p);
}

/* A Gemm / MatMul (or alma.FusedGemm / FusedMatMul) whose B is a 2-D float32 initializer: EAGER's
 * kernel packs B for few float32 rows (ops/gemm_packed.h) and splits it over a parallel loop. (The
 * static dtype of its output may be unknown: shapes computed at run time; the kernel checks.) */
static int gemm_on_const(const alma_graph *g, const alma_node *n) {
  const char *t = n->op_type;
  int std = !n->domain[0] && (!strcmp(t, "Gemm") || !strcmp(t, "MatMul"));
  int fused = !strcmp(n->domain, "alma") && (!strcmp(t, "FusedGemm") || !strcmp(t, "FusedMatMul"));
  if ((!std && !fused) || !n->op || n->n_inputs < 2 || n->inputs[0] < 0 || n->inputs[1] < 0 || n->n_outputs < 1 ||
      n->outputs[0] < 0)
    return 0;
  const alma_tensor *w = g->values[n->inputs[1]].init;
  return w && w->dtype == ALMA_DTYPE_FLOAT32 && w->rank == 2 && w->data;
}

static alma_status xrt_compile(const alma_graph *g, const alma_runtime_opts *opts, void **plan_out) {
  *plan_out = NULL;
  xrt_plan *p = calloc(1, sizeof *p);
  if (!p) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  p->g = g;
  p->threads = opts && opts->threads > 0 ? opts->threads : 1;
  p->xn = calloc((size_t)g->n_nodes + 1, sizeof *p->xn);
  p->defer = calloc((size_t)g->n_nodes + 1, 1);
  p->pooled = calloc((size_t)g->n_nodes + 1, 1);
  p->exported = calloc((size_t)g->n_values + 1, 1);
  p->cval = calloc((size_t)g->n_values + 1, sizeof *p->cval);
  p->vq = calloc((size_t)g->n_values + 1, sizeof *p->vq);
  p->vdt = calloc((size_t)g->n_values + 1, sizeof *p->vdt);
  if (!p->xn || !p->defer || !p->pooled || !p->exported || !p->cval || !p->vq || !p->vdt) {
    plan_free(p);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < g->n_nodes; i++) p->xn[i].part = p->xn[i].fused_into = p->xn[i].fused_act = -1;
  alma_infer_result r2 = {0}, r3 = {0};
  /* constant propagation of small values resolves shape subgraphs (Shape -> Gather -> Reshape) */
  alma_status st = alma__xrt_eval_dq_consts(g, p->cval);
  if (st == ALMA_OK) st = alma__graph_infer(g, NULL, 2, 1 << 16, &r2);
  if (st == ALMA_OK) st = alma__graph_infer(g, NULL, 3, 1 << 16, &r3);
  if (st == ALMA_ERR_NOMEM) {
    plan_free(p);
    return st;
  }
  if (st != ALMA_OK) {
    /* no static shapes: nothing is planned for XNNPACK, every node runs on EAGER */
    snprintf(p->why_none, sizeof p->why_none, "static shape inference failed: %s", alma_last_error());
    alma__error_clear();
  } else {
    for (int v = 0; v < g->n_values; v++) p->vdt[v] = r2.info[v].rank >= 0 ? r2.info[v].dtype : ALMA_DTYPE_UNDEFINED;
    actx a = {g, r2.info, r3.info, p->cval, p->vdt};
    for (int i = 0; i < g->n_nodes; i++) {
      xrt_node *xn = &p->xn[i];
      if (!analyze(&a, &g->nodes[i], xn)) {
        int part = xn->part;
        memset(xn, 0, sizeof *xn);
        xn->part = part;
      } else if (xn->can_nhwc && !nlc_ok(&a, &g->nodes[i], xn)) {
        xn->can_nhwc = 0;
        if (!xn->can_plain) {
          int part = xn->part;
          memset(xn, 0, sizeof *xn);
          xn->part = part;
        }
      }
      xn->cst_slot = xn->kind == XK_BINARY ? xn->cst_slot : -1;
    }
  }
  uses_t u = {0};
  st = uses_build(g, &u);
  if (st == ALMA_OK) st = alma__xrt_quant_plan(p, &u);
  if (st == ALMA_OK) st = partition(p, &u);
  for (int i = 0; i < g->n_nodes; i++) p->defer[i] = p->xn[i].part >= 0;
  /* Constant, Identity of a constant or DequantizeLinear of constants, read only as a weight by
   * partitions (directly or through more such Identities): the partitions baked the constant in,
   * so the node need not run */
  for (int i = g->n_nodes - 1; st == ALMA_OK && i >= 0; i--) {
    const alma_node *n = &g->nodes[i];
    int v = n->n_outputs == 1 ? n->outputs[0] : -1;
    if (p->xn[i].part >= 0 || n->domain[0] || v < 0 || u.is_out[v] || !alma__xrt_cst(g, p->cval, v) ||
        u.off[v + 1] == u.off[v] ||
        (strcmp(n->op_type, "Identity") && strcmp(n->op_type, "Constant") && strcmp(n->op_type, "DequantizeLinear")))
      continue;
    int all = 1;
    for (int j = u.off[v]; j < u.off[v + 1] && all; j++) all = p->defer[u.list[j]];
    p->defer[i] = (unsigned char)all;
  }
  uses_free(&u);
  /* float Gemm/MatMul nodes outside partitions on constant weights: EAGER's kernel with the pool as
   * its parallel loop (the packed few-row kernel splits its panels over it), as BLAS and DNNL run
   * them, instead of EAGER's one thread while the pool's workers spin */
  for (int i = 0; st == ALMA_OK && i < g->n_nodes; i++)
    if (p->xn[i].part < 0 && !p->defer[i] && gemm_on_const(g, &g->nodes[i])) p->pooled[i] = p->defer[i] = 1;
  /* partitions of few-row candidates: fully-connected nodes on constant weights (and what folds
   * into them, reshapes) in the plain layout */
  for (int q = 0; st == ALMA_OK && q < p->n_parts; q++) {
    xrt_part *P = &p->parts[q];
    int n_fc = 0, ok = !P->nhwc;
    for (int k = 0; k < P->n_nodes && ok; k++) {
      int ni = P->nodes[k];
      const xrt_node *xn = &p->xn[ni];
      if (xn->fused_into >= 0 || (xn->kind == XK_RESHAPE && !xn->q && !xn->qpass)) continue;
      ok = xn->kind == XK_FC && !xn->q && !xn->qlin && !xn->flatten_perm && gemm_on_const(g, &g->nodes[ni]);
      n_fc++;
    }
    P->fc_only = ok && n_fc > 0;
  }
  /* rank-4 boundary values of NHWC partitions are reordered on every run */
  for (int q = 0; st == ALMA_OK && r2.info && q < p->n_parts; q++) {
    xrt_part *P = &p->parts[q];
    for (int e = 0; P->nhwc && e < P->n_in + P->n_out; e++)
      P->reorders += r2.info[e < P->n_in ? P->in[e] : P->out[e - P->n_in]].rank == 4 ||
                     r2.info[e < P->n_in ? P->in[e] : P->out[e - P->n_in]].rank == 3;
  }
  alma__infer_result_free(&r2);
  alma__infer_result_free(&r3);
  if (st == ALMA_OK && p->threads > 1 && !(p->pool = pthreadpool_create((size_t)p->threads)))
    st = alma__errorf(ALMA_ERR_NOMEM, "could not create a thread pool of %d threads", p->threads);
  if (st == ALMA_OK && p->threads > 1 && !(p->apool = alma__pool_new(p->threads)))
    st = alma__errorf(ALMA_ERR_NOMEM, "could not create a thread pool of %d threads", p->threads);
  if (st != ALMA_OK) {
    plan_free(p);
    return st;
  }
  *plan_out = p;
  return ALMA_OK;
}

/* ---- running ------------------------------------------------------------------------------------ */
typedef struct xrt_run {
  xrt_plan *p;
  alma_tensor *shape;    /* per value: the partition values' tensors as the executor gave them (views) */
  alma_tensor **cap;     /* per partition: captured external inputs (views or owned copies) */
  unsigned char **have;  /* per partition, per external input: captured in this run */
} xrt_run;

/* a value reordered at the boundary: NCHW <-> NHWC, or NCL <-> NLC for rank 3 */
static int nhwc4(const xrt_part *P, const alma_tensor *t) { return P->nhwc && (t->rank == 4 || t->rank == 3); }
static size_t spatial(const alma_tensor *t) { return (size_t)(t->rank == 4 ? t->dims[2] * t->dims[3] : t->dims[2]); }

/* uint8 <-> int8 domain change of 8-bit data: q ^ 0x80 = q -/+ 128 */
static void flip8(void *data, size_t n) {
  uint8_t *d = data;
  for (size_t i = 0; i < n; i++) d[i] ^= 0x80;
}

/* Runs the partition's nodes with EAGER kernels (a shape XNNPACK rejected, or few rows of an
 * fc_only partition), with the pool as their parallel loop and the graph's constants known (a
 * few-row Gemm/MatMul packs its weights, ops/gemm_packed.h). */
static alma_status run_eager(xrt_run *rs, xrt_part *P, int q) {
  const alma_graph *g = rs->p->g;
  alma_tensor *loc = calloc((size_t)g->n_values + 1, sizeof(alma_tensor));
  if (!loc) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  alma_status st = ALMA_OK;
  for (int k = 0; k < P->n_nodes && st == ALMA_OK; k++) {
    int ni = P->nodes[k];
    const alma_node *n = &g->nodes[ni];
    const alma_tensor *in[16];
    alma_tensor out[8];
    if (n->n_inputs > 16 || n->n_outputs > 8) {
      st = alma__op_error(n, ALMA_ERR_INTERNAL, "too many inputs");
      break;
    }
    for (int j = 0; j < n->n_inputs; j++) {
      int v = n->inputs[j], e = rs->p->xn[ni].ext_slot[j];
      const alma_tensor *cv = v < 0 ? NULL : alma__xrt_cst(g, rs->p->cval, v);
      in[j] = v < 0 ? NULL : e >= 0 ? &rs->cap[q][e] : cv ? cv : &loc[v];
    }
    st = alma__op_run_node_of(g, n, in, n->n_inputs, out, n->n_outputs, rs->p->threads, alma__pool_parfor, rs->p->apool);
    for (int o = 0; st == ALMA_OK && o < n->n_outputs; o++) {
      if (n->outputs[o] >= 0) loc[n->outputs[o]] = out[o];
      else alma_tensor_free_data(&out[o]);
    }
  }
  for (int e = 0; st == ALMA_OK && e < P->n_out; e++) {
    int v = P->out[e];
    alma_tensor *dst = &rs->shape[v];
    if (!alma__same_shape(dst, &loc[v]) || dst->dtype != loc[v].dtype) {
      st = alma__errorf(ALMA_ERR_INTERNAL, "XNNPACK fallback: value '%s' changed shape", g->values[v].name);
      break;
    }
    memcpy(dst->data, loc[v].data, loc[v].nbytes);
  }
  for (int v = 0; v < g->n_values; v++) alma_tensor_free_data(&loc[v]);
  free(loc);
  return st;
}

/* An fc_only partition whose fully-connected nodes all have at most ALMA_PACKED_MAX_ROWS rows now:
 * the packed kernel streams each weight once, split over the pool (XNNPACK's fully_connected at
 * [2,512]x[512,2048]: see docs/runtimes/xnnpack.md, Performance). */
static int few_rows(const xrt_run *rs, const xrt_part *P, int q) {
  if (!P->fc_only || !alma__packed_gemm_enabled()) return 0;
  const xrt_plan *p = rs->p;
  for (int k = 0; k < P->n_nodes; k++) {
    int ni = P->nodes[k];
    const xrt_node *xn = &p->xn[ni];
    if (xn->kind != XK_FC || xn->fused_into >= 0) continue;
    int e = xn->ext_slot[0], x = p->g->nodes[ni].inputs[0];
    const alma_tensor *a = e >= 0 ? &rs->cap[q][e] : &rs->shape[x];
    if (a->rank < 1) return 0;
    int64_t rows = alma__numel(a->rank - 1, a->dims);
    if (rows < 1 || rows > ALMA_PACKED_MAX_ROWS) return 0;
  }
  return 1;
}

static alma_status run_part(xrt_run *rs, int q) {
  xrt_plan *p = rs->p;
  xrt_part *P = &p->parts[q];
  const alma_graph *g = p->g;
  alma_tensor *cap = rs->cap[q];
  if (few_rows(rs, P, q)) {
    P->packed_runs++;
    return run_eager(rs, P, q);
  }
  /* the signature: every external input's rank and dims */
  int64_t sig[(ALMA_MAX_RANK + 1) * 64], *sigp = sig;
  int n_sig = 0;
  for (int e = 0; e < P->n_in; e++) n_sig += 1 + cap[e].rank;
  if (n_sig > (int)(sizeof sig / sizeof sig[0]) && !(sigp = malloc(sizeof(int64_t) * (size_t)n_sig)))
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (int e = 0, o = 0; e < P->n_in; e++) {
    sigp[o++] = cap[e].rank;
    for (int d = 0; d < cap[e].rank; d++) sigp[o++] = cap[e].dims[d];
  }
  xrt_build *b = P->builds;
  while (b && (b->n_sig != n_sig || memcmp(b->sig, sigp, sizeof(int64_t) * (size_t)n_sig))) b = b->next;
  if (!b) {
    b = calloc(1, sizeof *b);
    int64_t *s = malloc(sizeof(int64_t) * ((size_t)n_sig + 1));
    if (!b || !s) {
      free(b);
      free(s);
      if (sigp != sig) free(sigp);
      return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    }
    memcpy(s, sigp, sizeof(int64_t) * (size_t)n_sig);
    b->sig = s;
    b->n_sig = n_sig;
    /* the executor's shapes for the boundary inputs are the captured ones */
    for (int e = 0; e < P->n_in; e++) {
      alma_tensor *t = &rs->shape[P->in[e]];
      alma__set_shape(t, cap[e].dtype, cap[e].rank, cap[e].dims);
    }
    alma_status st = alma__xrt_build(p, P, rs->shape, b);
    if (st != ALMA_OK) {
      alma__xrt_build_free(b);
      free(b);
      if (sigp != sig) free(sigp);
      return st;
    }
    if (b->failed) ALMA_LOGI("XNNPACK partition %d runs on EAGER for these shapes: %s", q, b->why);
    b->next = P->builds;
    P->builds = b;
    P->n_builds++;
  }
  if (sigp != sig) free(sigp);
  if (b->failed) return run_eager(rs, P, q);

  for (int e = 0; e < P->n_in; e++) {
    const alma_tensor *t = &cap[e];
    size_t es = alma_dtype_size(t->dtype), numel = (size_t)alma_tensor_numel(t);
    if (nhwc4(P, t))
      alma__xrt_transpose(p->pool, t->data, b->in_buf[e], es, (size_t)t->dims[0], (size_t)t->dims[1], spatial(t), 0);
    else
      memcpy(b->in_buf[e], t->data, numel * es);
    if (p->vq[P->in[e]].flip) flip8(b->in_buf[e], numel);
    b->ext[e].id = (uint32_t)e;
    b->ext[e].data = b->in_buf[e];
  }
  for (int e = 0; e < P->n_out; e++) {
    b->ext[P->n_in + e].id = (uint32_t)(P->n_in + e);
    b->ext[P->n_in + e].data = b->out_buf[e] ? b->out_buf[e] : rs->shape[P->out[e]].data;
  }
  if (!b->set_up) {
    /* XNNPACK's first setup of a runtime allocates (indirection buffers, workspace) and can crash
     * on a failed allocation instead of returning xnn_status_out_of_memory: under a memory limit,
     * check for room first (the external values' size twice over, plus 4 MiB of margin). */
    size_t need = ((size_t)4 << 20);
    for (int e = 0; e < P->n_in; e++) need += 2 * (size_t)alma_tensor_numel(&cap[e]) * alma_dtype_size(cap[e].dtype);
    for (int e = 0; e < P->n_out; e++) {
      const alma_tensor *t = &rs->shape[P->out[e]];
      need += 2 * (size_t)alma_tensor_numel(t) * alma_dtype_size(t->dtype);
    }
    ALMA_TRY(alma__address_space_check(need, "setting up an XNNPACK partition"));
  }
  enum xnn_status xst = xnn_setup_runtime(b->rt, (size_t)(P->n_in + P->n_out), b->ext);
  if (xst == xnn_status_success) b->set_up = 1;
  if (xst == xnn_status_out_of_memory)
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory: XNNPACK partition %d (ending at node '%s') could not be set up", q,
                        g->nodes[P->anchor].name);
  if (xst == xnn_status_success) xst = xnn_invoke_runtime(b->rt);
  if (xst != xnn_status_success)
    return alma__errorf(ALMA_ERR_INTERNAL, "XNNPACK partition %d (ending at node '%s'): running failed (status %d)", q,
                        g->nodes[P->anchor].name, (int)xst);
  for (int e = 0; e < P->n_out; e++) {
    alma_tensor *t = &rs->shape[P->out[e]];
    if (b->out_buf[e])
      alma__xrt_transpose(p->pool, b->out_buf[e], t->data, alma_dtype_size(t->dtype), (size_t)t->dims[0], spatial(t),
                          (size_t)t->dims[1], PTHREADPOOL_FLAG_YIELD_WORKERS);
    if (p->vq[P->out[e]].flip) flip8(t->data, (size_t)alma_tensor_numel(t));
  }
  return ALMA_OK;
}

/* A node outside every partition that has a threaded form (ONNX Runtime's transformer contrib ops,
 * MatMulNBits: contrib_bert.h, contrib_nbits.h) runs it on the plan's own pool (runtimes/pool.c), as BLAS
 * and DNNL do, instead of EAGER's single thread. The executor has allocated (and zeroed) its outputs. */
static int run_contrib(xrt_plan *p, const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                       int nout, alma_status *st) {
  if (alma__contrib_par(n)) {
    *st = alma__contrib_exec_par(n, in, nin, out, nout, p->threads, alma__pool_parfor, p->apool);
    return 1;
  }
  if (alma__is_mnb(n) && nin >= 1 && in[0] && in[0]->dtype == ALMA_DTYPE_FLOAT32 && nout >= 1 &&
      out[0].dtype == ALMA_DTYPE_FLOAT32) {
    *st = alma__mnb_exec_par(n, in, nin, &out[0], p->threads, alma__pool_parfor, p->apool);
    return 1;
  }
  return 0;
}

/* Every partition node is deferred (alma__exec_graph_deferred): the executor gives its inputs
 * and leaves its outputs to this hook, which infers their shapes, allocates the ones read outside
 * the partition and runs the whole partition at its last node. */
static alma_status hook(void *user, int idx, const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                        int nout, int *handled) {
  xrt_run *rs = user;
  xrt_plan *p = rs->p;
  const alma_graph *g = p->g;
  const xrt_node *xn = &p->xn[idx];
  if (xn->part < 0 && p->pooled[idx]) {
    /* deferred: the executor left the outputs to this call, which allocates them */
    *handled = 1;
    return alma__op_run_node_of(g, n, in, nin, out, nout, p->threads, alma__pool_parfor, p->apool);
  }
  if (xn->part < 0) {
    *handled = p->defer[idx]; /* a constant only partitions read */
    alma_status st = ALMA_OK;
    if (!*handled && run_contrib(p, n, in, nin, out, nout, &st)) *handled = st == ALMA_OK;
    return st;
  }
  int q = xn->part;
  xrt_part *P = &p->parts[q];
  const alma_tensor *sin[16];
  if (nin > 16 || nout > 8) return alma__op_error(n, ALMA_ERR_INTERNAL, "too many inputs for XNNPACK");
  for (int j = 0; j < nin; j++) {
    int v = j < n->n_inputs ? n->inputs[j] : -1, e = j < n->n_inputs ? xn->ext_slot[j] : -1;
    if (v < 0) {
      sin[j] = NULL;
    } else if (e >= 0) {
      if (!rs->have[q][e]) {
        alma_dtype want = p->vq[v].q ? p->vdt[v] : ALMA_DTYPE_FLOAT32;
        if (!in[j] || in[j]->dtype != want || (!in[j]->data && alma_tensor_numel(in[j])))
          return alma__op_error(n, ALMA_ERR_INTERNAL, "XNNPACK input '%s' has no %s value", g->values[v].name,
                                alma_dtype_name(want));
        if (P->in_copy[e]) ALMA_TRY(alma__tensor_copy(&rs->cap[q][e], in[j]));
        else rs->cap[q][e] = alma__tensor_view(in[j]);
        rs->have[q][e] = 1;
      }
      sin[j] = &rs->cap[q][e];
    } else if (alma__xrt_cst(g, p->cval, v)) {
      sin[j] = alma__xrt_cst(g, p->cval, v);
    } else {
      sin[j] = &rs->shape[v]; /* a partition value: its shape, data not computed yet */
    }
  }
  alma_tensor shp[8];
  memset(shp, 0, sizeof shp);
  alma_status st = n->op->infer(n, sin, nin, shp, nout);
  if (st == ALMA_ERR_DYNAMIC) return alma__op_error(n, ALMA_ERR_INTERNAL, "shape unknown with all inputs given");
  ALMA_TRY(st);
  for (int o = 0; o < nout && o < n->n_outputs; o++) {
    int v = n->outputs[o];
    if (v < 0) continue;
    if (p->exported[v]) {
      ALMA_TRY(alma__tensor_alloc(&out[o], shp[o].dtype, shp[o].rank, shp[o].dims));
      rs->shape[v] = alma__tensor_view(&out[o]);
    } else {
      rs->shape[v] = shp[o];
      rs->shape[v].data = NULL;
      rs->shape[v].owns_data = 0;
    }
  }
  *handled = 1;
  return idx == P->anchor ? run_part(rs, q) : ALMA_OK;
}

/* --profile: each node's wall time (shape inference, the hook, the EAGER kernel); a partition runs at
 * its last node, its other nodes only infer shapes, and profile_read gives the sum to the partition */
static void xrt_timer(void *user, int idx, double seconds) {
  xrt_plan *p = ((xrt_run *)user)->p;
  p->prof_s[idx] += seconds;
  p->prof_runs[idx]++;
}

static alma_status xrt_run_plan(void *plan, const alma_tensor *inputs, int n_inputs, alma_tensor *outputs, int n_outputs) {
  xrt_plan *p = plan;
  xrt_run rs = {.p = p};
  alma_status st = ALMA_OK;
  int total_in = 0;
  for (int q = 0; q < p->n_parts; q++) total_in += p->parts[q].n_in;
  rs.shape = calloc((size_t)p->g->n_values + 1, sizeof(alma_tensor));
  rs.cap = calloc((size_t)p->n_parts + 1, sizeof(alma_tensor *));
  rs.have = calloc((size_t)p->n_parts + 1, sizeof(unsigned char *));
  alma_tensor *caps = calloc((size_t)total_in + 1, sizeof(alma_tensor));
  unsigned char *haves = calloc((size_t)total_in + 1, 1);
  if (!rs.shape || !rs.cap || !rs.have || !caps || !haves) {
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    goto out;
  }
  for (int q = 0, o = 0; q < p->n_parts; q++) {
    rs.cap[q] = caps + o;
    rs.have[q] = haves + o;
    o += p->parts[q].n_in;
  }
  /* the hook also runs pooled nodes and contrib ops on the pool when no partition exists */
  st = alma__exec_graph_deferred(p->g, hook, p->prof_s ? xrt_timer : NULL, &rs, p->defer, inputs, n_inputs, outputs,
                                 n_outputs);
out:
  for (int i = 0; caps && i < total_in; i++) alma_tensor_free_data(&caps[i]);
  free(caps);
  free(haves);
  free(rs.shape);
  free(rs.cap);
  free(rs.have);
  return st;
}

static void xrt_free(void *plan) { plan_free(plan); }

static alma_status xrt_profile_start(void *plan) {
  xrt_plan *p = plan;
  return alma__prof_counters(p->g->n_nodes, &p->prof_s, &p->prof_runs);
}

/* One entry per partition (named by its first node, every node a member: XNNPACK runs it as one
 * call), and one per node outside partitions. */
static alma_status xrt_profile_read(void *plan, alma__prof_node *nodes) {
  xrt_plan *p = plan;
  const alma_graph *g = p->g;
  if (!p->prof_s) return alma__errorf(ALMA_ERR_INVALID_ARG, "XNNPACK: profile_read before profile_start");
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    const char *where = "EAGER";
    if (p->pooled[i] || alma__contrib_par(n) || alma__is_mnb(n)) where = "XNNPACK pool";
    else if (p->defer[i]) where = "XNNPACK (baked)"; /* a constant only partitions read */
    nodes[i] = (alma__prof_node){.seconds = p->prof_s[i], .runs = p->prof_runs[i], .head = i, .members = 1, .where = where};
  }
  for (int q = 0; q < p->n_parts; q++) {
    const xrt_part *P = &p->parts[q];
    int head = -1, failed = 0;
    for (int i = 0; i < g->n_nodes; i++)
      if (p->xn[i].part == q && head < 0) head = i;
    if (head < 0) continue;
    for (const xrt_build *b = P->builds; b; b = b->next) failed |= b->failed;
    double sum = 0;
    int members = 0;
    for (int i = 0; i < g->n_nodes; i++)
      if (p->xn[i].part == q) {
        sum += p->prof_s[i];
        members++;
        nodes[i] = (alma__prof_node){.runs = p->prof_runs[i], .head = head, .members = 0, .where = "XNNPACK"};
      }
    nodes[head].seconds = sum;
    nodes[head].members = members;
    nodes[head].runs = p->prof_runs[P->anchor];
    nodes[head].where = failed ? "XNNPACK (some runs on EAGER)" : P->fc_only && P->packed_runs ? "XNNPACK (packed)" : "XNNPACK";
  }
  return ALMA_OK;
}

/* Why analyze() took no XNNPACK kind for n, told apart after the fact: an op type it never
 * translates (the list of the op types analyze() and its int8 part handle), an output that is not
 * float32, a shape static inference left unknown, or else the node's attributes, ranks or
 * non-constant weights. */
static alma__decline unplanned_reason(const xrt_plan *p, const alma_node *n, const char **detail) {
  static const char *const ops[] = {"Conv", "Gemm", "MatMul", "MaxPool", "AveragePool", "GlobalAveragePool", "Add", "Sub",
                                    "Mul", "Div", "Max", "Min", "Abs", "Neg", "Floor", "Ceil", "Sqrt", "Round", "Sigmoid",
                                    "HardSwish", "Relu", "Clip", "LeakyRelu", "Elu", "Softmax", "Flatten", "Reshape", "PRelu",
                                    "Pad", "BatchNormalization", "QuantizeLinear", "DequantizeLinear", "QLinearConv",
                                    "QLinearMatMul", "FusedConv", "FusedGemm", "FusedMatMul"};
  if (p->why_none[0]) {
    *detail = p->why_none;
    return ALMA_DECLINE_DYNAMIC;
  }
  int known = 0;
  for (size_t k = 0; k < sizeof ops / sizeof ops[0] && !known; k++) known = !strcmp(n->op_type, ops[k]);
  if (!known || (n->domain[0] && strcmp(n->domain, "alma")) || (!n->domain[0] && !strncmp(n->op_type, "Fused", 5))) {
    *detail = "no XNNPACK operator";
    return ALMA_DECLINE_OP;
  }
  int y = n->n_outputs > 0 ? n->outputs[0] : -1;
  if (y >= 0 && p->vdt[y] == ALMA_DTYPE_UNDEFINED) {
    *detail = "output shape unknown before run time";
    return ALMA_DECLINE_DYNAMIC;
  }
  if (y >= 0 && p->vdt[y] != ALMA_DTYPE_FLOAT32 && strstr(n->op_type, "Quant") == NULL && strncmp(n->op_type, "QLinear", 7)) {
    *detail = "not float32";
    return ALMA_DECLINE_DTYPE;
  }
  *detail = "attributes, ranks or non-constant weights XNNPACK does not take";
  return ALMA_DECLINE_ATTR;
}

/* Placement as data, where the plan decides it: partitions (their folded nodes FUSED), constants
 * baked into them (FUSED), nodes on EAGER's kernels by choice on XNNPACK's threads, and partitions
 * that ran on EAGER for some shapes (XNNPACK refused the build: LIBRARY; few rows on packed
 * weights: CHOICE). */
static alma_status xrt_placement(void *plan, alma__placement *out) {
  xrt_plan *p = plan;
  const alma_graph *g = p->g;
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    const xrt_node *xn = &p->xn[i];
    const char *detail = NULL;
    if (xn->part >= 0) {
      const xrt_part *P = &p->parts[xn->part];
      int built = 0, failed = 0;
      for (const xrt_build *b = P->builds; b; b = b->next) {
        if (b->failed && !detail) detail = b->why;
        failed += b->failed;
        built += !b->failed;
      }
      if (!failed && !P->packed_runs) {
        out[i] = (alma__placement){xn->fused_into >= 0 ? ALMA_PLACE_FUSED : ALMA_PLACE_RUNTIME, ALMA_DECLINE_NONE, NULL};
        continue;
      }
      if (!failed) detail = "at most a few rows: EAGER's packed kernel on XNNPACK's threads";
      out[i] = (alma__placement){built ? ALMA_PLACE_PARTIAL : ALMA_PLACE_EAGER, failed ? ALMA_DECLINE_LIBRARY : ALMA_DECLINE_CHOICE,
                                 detail};
    } else if (p->defer[i]) {
      out[i] = (alma__placement){ALMA_PLACE_FUSED, ALMA_DECLINE_NONE, "constant baked into XNNPACK's weights"};
    } else if (p->pooled[i]) {
      out[i] = (alma__placement){ALMA_PLACE_EAGER, ALMA_DECLINE_CHOICE, "few rows on constant weights: EAGER's packed kernel on XNNPACK's threads"};
    } else if (xn->kind != XK_NONE) {
      out[i] = (alma__placement){ALMA_PLACE_EAGER, ALMA_DECLINE_CHOICE, "left out of XNNPACK's partitions (layout or partition boundary)"};
    } else {
      alma__decline r = unplanned_reason(p, n, &detail);
      if (r == ALMA_DECLINE_OP && (alma__contrib_par(n) || alma__is_mnb(n))) detail = "no XNNPACK operator: EAGER's kernel on XNNPACK's threads";
      out[i] = (alma__placement){ALMA_PLACE_EAGER, r, detail};
    }
  }
  return ALMA_OK;
}

static const char *kind_name(int k) {
  static const char *names[] = {"-", "conv", "dwconv", "fc", "maxpool", "avgpool", "gap", "binary", "unary",
                                "clamp", "leaky_relu", "elu", "softmax", "reshape", "prelu", "bn", "pad", "quantize",
                                "dequantize"};
  return k >= 0 && k < (int)(sizeof names / sizeof names[0]) ? names[k] : "?";
}

static void xrt_describe(void *plan, FILE *f) {
  xrt_plan *p = plan;
  const alma_graph *g = p->g;
  int n_x = 0, reorders = 0;
  for (int i = 0; i < g->n_nodes; i++) n_x += p->xn[i].part >= 0;
  for (int q = 0; q < p->n_parts; q++) reorders += p->parts[q].reorders;
  fprintf(f, "  XNNPACK (subgraph API, %d thread%s): %d of %d nodes in %d partition%s, %d NCHW<->NHWC reorder%s per run\n",
          p->threads, p->threads == 1 ? "" : "s", n_x, g->n_nodes, p->n_parts, p->n_parts == 1 ? "" : "s", reorders,
          reorders == 1 ? "" : "s");
  if (p->why_none[0]) fprintf(f, "  (%s)\n", p->why_none);
  if (p->n_qnodes) fprintf(f, "  %d convolution/matmul node%s computed in int8\n", p->n_qnodes, p->n_qnodes == 1 ? "" : "s");
  if (p->n_qother)
    fprintf(f, "  %d MaxPool/Flatten/Reshape node%s computed on int8 values\n", p->n_qother, p->n_qother == 1 ? "" : "s");
  if (p->n_qadds) fprintf(f, "  %d Add node%s computed in int8\n", p->n_qadds, p->n_qadds == 1 ? "" : "s");
  for (int q = 0; q < p->n_parts; q++) {
    xrt_part *P = &p->parts[q];
    fprintf(f, "  partition %d: %d nodes, %s, %d input%s, %d output%s, %d reorder%s, ends at '%s'\n", q, P->n_nodes,
            P->nhwc ? "NHWC" : "plain layout", P->n_in, P->n_in == 1 ? "" : "s", P->n_out, P->n_out == 1 ? "" : "s",
            P->reorders, P->reorders == 1 ? "" : "s", g->nodes[P->anchor].name);
    if (P->fc_only)
      fprintf(f, "    fully-connected on constant weights: at most %d rows run EAGER's packed kernel on XNNPACK's threads (%lld run%s so far)\n",
              ALMA_PACKED_MAX_ROWS, (long long)P->packed_runs, P->packed_runs == 1 ? "" : "s");
    for (xrt_build *b = P->builds; b; b = b->next)
      if (b->failed) fprintf(f, "    a shape signature runs on EAGER: %s\n", b->why);
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const xrt_node *xn = &p->xn[i];
    char where[128];
    if (xn->part < 0 && p->pooled[i]) snprintf(where, sizeof where, "EAGER kernel on XNNPACK's threads (packed weights for few rows)");
    else if (xn->part < 0 && p->defer[i]) snprintf(where, sizeof where, "skipped (constant baked into XNNPACK)");
    else if (xn->part < 0 && (alma__contrib_par(&g->nodes[i]) || alma__is_mnb(&g->nodes[i])))
      snprintf(where, sizeof where, "EAGER kernel on XNNPACK's threads");
    else if (xn->part < 0) snprintf(where, sizeof where, "EAGER");
    else if (xn->fused_into >= 0) snprintf(where, sizeof where, "XNNPACK p%d (folded into '%s')", xn->part, g->nodes[xn->fused_into].name);
    else if (xn->q)
      snprintf(where, sizeof where, "XNNPACK p%d %s %s%s", xn->part, kind_name(xn->kind),
               xn->q == XQ_S8 ? "int8 (qint8, per-channel weights)" : "int8 (quint8)",
               xn->flatten_perm ? " (weights in NHWC order)" : "");
    else if (xn->qadd)
      snprintf(where, sizeof where, "XNNPACK p%d add int8 (%s)", xn->part,
               p->vq[g->nodes[xn->qquant].outputs[0]].dom == XQ_S8 ? "qint8" : "quint8");
    else if (xn->kind == XK_FC && xn->flatten_perm) snprintf(where, sizeof where, "XNNPACK p%d fc (weights in NHWC order)", xn->part);
    else if (xn->part >= 0 && (xn->qpass || p->vq[g->nodes[i].inputs[0]].q) && (xn->kind == XK_MAXPOOL || xn->kind == XK_RESHAPE))
      snprintf(where, sizeof where, "XNNPACK p%d %s int8", xn->part, kind_name(xn->kind));
    else snprintf(where, sizeof where, "XNNPACK p%d %s", xn->part, kind_name(xn->kind));
    fprintf(f, "  %-40s %-20s %s\n", g->nodes[i].name, g->nodes[i].op_type, where);
  }
}

static const char *xrt_spin_advice(const alma_runtime_opts *o, int threads) {
  (void)o;
  return threads > 1 ? "pthreadpool's workers spin inside each XNNPACK subgraph and every join waits for all of them: "
                       "--threads 1 avoids it"
                     : NULL;
}

const alma_runtime alma__runtime_xnnpack = {
    .name = "XNNPACK",
    .description = "XNNPACK subgraphs (NHWC, its own thread pool) for connected float32 conv/pool/fc/elementwise nodes, "
                   "FUSE's fused conv/matmul nodes, int8 QDQ/QLinear convolutions and QDQ residual Adds; ONNX Runtime's "
                   "transformer contrib ops and MatMulNBits on its threads; EAGER for the rest",
    .init = xrt_init,
    .placement = xrt_placement,
    .compile = xrt_compile,
    .run = xrt_run_plan,
    .free = xrt_free,
    .describe = xrt_describe,
    .profile_start = xrt_profile_start,
    .profile_read = xrt_profile_read,
    .spin_advice = xrt_spin_advice,
};

#endif
