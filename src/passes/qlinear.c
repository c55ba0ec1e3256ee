/* QLINEAR: QDQ patterns -> QLinearConv / QLinearMatMul, so that EAGER (or any runtime with those
 * kernels) computes them in integers instead of dequantizing to float.
 *
 *   DequantizeLinear(xq) ─┐
 *   DequantizeLinear(wq) ─┼─ Conv/MatMul ─ [Relu | Clip(0, c)] ─ QuantizeLinear ─ yq
 *   [DequantizeLinear(b)]─┘
 * becomes QLinearConv(xq, xs, xzp, wq, ws, wzp, ys, yzp, b_int32) -> yq (QLinearMatMul without the
 * bias). It applies to INT8_STATIC's output and to QDQ models from other tools. Conditions: x and
 * the output are quantized per tensor, w is constant and per tensor or per output channel, the
 * bias is constant (it is requantized to int32 with scale xs * ws), every intermediate value has
 * this one reader, and the activation disappears into the output's saturation: Relu when the
 * output zero point is the type's minimum, Clip(0, c) when in addition c quantizes to the maximum.
 * A Conv/MatMul whose output is not quantized (a residual Add reads it, or the graph output) keeps
 * its QDQ form. Gemm is not rewritten (QLinearMatMul has no bias input).
 *
 * For QDQ models from other tools: fake-quantized weights (QuantizeLinear of a float constant, as
 * PyTorch exports QAT models) are quantized at conversion, and a DequantizeLinear followed by a
 * data-movement op (MaxPool, Flatten, Reshape, Transpose, Squeeze, Unsqueeze) is moved after it, so
 * that it sits right before the next Conv/MatMul. */
#include <math.h>

#include "passes/quant.h"

typedef struct {
  alma_graph *g;
  alma_infer_result r;
  int serial;
} ql_ctx;

/* The constant behind v, seeing through Identity nodes (PyTorch's exporter shares a zero point
 * that way). */
static const alma_tensor *const_of(const alma_graph *g, int v) {
  for (int hops = 0; v >= 0 && hops < 16; hops++) {
    if (g->values[v].init) return g->values[v].init;
    int p = g->values[v].producer;
    if (p < 0 || g->nodes[p].dead || g->nodes[p].domain[0] || strcmp(g->nodes[p].op_type, "Identity")) return NULL;
    v = g->nodes[p].inputs[0];
  }
  return NULL;
}

static int producer_is(const alma_graph *g, int v, const char *op) {
  if (v < 0) return -1;
  int p = g->values[v].producer;
  if (p < 0 || g->nodes[p].dead || g->nodes[p].domain[0] || strcmp(g->nodes[p].op_type, op)) return -1;
  return p;
}

static int only_reader(const alma_graph *g, int v) {
  if (v < 0 || g->values[v].is_output || alma__q_used_by_subgraph(g, v) || alma__graph_count_uses(g, v) != 1) return -1;
  for (int i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].dead) continue;
    for (int k = 0; k < g->nodes[i].n_inputs; k++)
      if (g->nodes[i].inputs[k] == v) return i;
  }
  return -1;
}

static int is_q8(alma_dtype t) { return t == ALMA_DTYPE_UINT8 || t == ALMA_DTYPE_INT8; }

/* A scalar float32 scale and an optional scalar 8-bit zero point of a Q/DQ node. */
static int per_tensor_params(const alma_graph *g, const alma_node *n, float *scale, int *zp, alma_dtype *zdt) {
  const alma_tensor *s = const_of(g, n->n_inputs > 1 ? n->inputs[1] : -1);
  const alma_tensor *z = const_of(g, n->n_inputs > 2 ? n->inputs[2] : -1);
  if (!s || s->dtype != ALMA_DTYPE_FLOAT32 || alma_tensor_numel(s) != 1 || s->rank > 1) return 0;
  if (n->n_inputs > 2 && n->inputs[2] >= 0 && (!z || !is_q8(z->dtype) || alma_tensor_numel(z) != 1 || z->rank > 1)) return 0;
  *scale = ((const float *)s->data)[0];
  *zp = z ? (int)alma__get_i64(z->data, z->dtype, 0) : 0;
  *zdt = z ? z->dtype : ALMA_DTYPE_UNDEFINED;
  return *scale > 0 && isfinite(*scale);
}

/* The Clip bounds (attributes before opset 11, inputs after); 0 if not constant. */
static int clip_bounds(const alma_graph *g, const alma_node *c, double *lo, double *hi) {
  *lo = -INFINITY;
  *hi = INFINITY;
  if (c->since_version < 11) {
    *lo = alma__attr_f(c, "min", -INFINITY);
    *hi = alma__attr_f(c, "max", INFINITY);
    return 1;
  }
  for (int k = 1; k <= 2; k++) {
    if (c->n_inputs <= k || c->inputs[k] < 0) continue;
    const alma_tensor *t = const_of(g, c->inputs[k]);
    if (!t || alma_tensor_numel(t) != 1 || !alma__dtype_is_float(t->dtype)) return 0;
    *(k == 1 ? lo : hi) = alma__get_f64(t->data, t->dtype, 0);
  }
  return 1;
}

/* The constant quantized tensor behind value v: v itself when it is a constant, or, when v is a
 * QuantizeLinear of constants (how PyTorch exports fake-quantized weights), the quantized weights
 * computed now with EAGER's QuantizeLinear, as a new constant. -1 otherwise (or on error). */
static int const_quantized(alma_graph *g, int v) {
  if (v < 0) return -1;
  if (g->values[v].init) return v;
  int p = producer_is(g, v, "QuantizeLinear");
  if (p < 0) return -1;
  const alma_node *q = &g->nodes[p];
  const alma_tensor *in[3] = {NULL, NULL, NULL};
  for (int k = 0; k < q->n_inputs && k < 3; k++)
    if (q->inputs[k] >= 0 && !(in[k] = const_of(g, q->inputs[k]))) return -1;
  if (!in[0] || !in[1]) return -1;
  alma_tensor out;
  if (alma__op_run_node(NULL, q, in, q->n_inputs, &out, 1) != ALMA_OK) {
    alma__error_clear();
    return -1;
  }
  alma_tensor *t;
  int c = alma__q_new_const(g, g->values[v].name, "folded", out.dtype, out.rank, out.dims, &t);
  if (c >= 0) memcpy(t->data, out.data, out.nbytes);
  alma_tensor_free_data(&out);
  return c;
}

/* Bias m (b a float constant, or a dequantized integer one) in accumulator units into *q; 0 when
 * int32 cannot hold it at xs * ws[m] (then the node keeps its QDQ form, whose float bias
 * INT8_STATIC left for that reason). */
static int bias_q(const alma_tensor *bf, const alma_tensor *bq, const alma_tensor *bs, const alma_tensor *bz, float xs,
                  const alma_tensor *ws, int64_t m, int32_t *q) {
  double b;
  if (bf) {
    b = ((const float *)bf->data)[m];
  } else {
    int64_t nbs = alma_tensor_numel(bs);
    double zb = bz ? (double)alma__get_i64(bz->data, bz->dtype, nbs == 1 ? 0 : m) : 0;
    b = ((double)alma__get_i64(bq->data, bq->dtype, m) - zb) * alma__get_f64(bs->data, bs->dtype, nbs == 1 ? 0 : m);
  }
  return alma__q_bias_i32(b, xs, ((const float *)ws->data)[alma_tensor_numel(ws) == 1 ? 0 : m], q);
}

/* Tries node i; *done = 1 when rewritten. */
static alma_status try_node(ql_ctx *c, int i, int *done) {
  alma_graph *g = c->g;
  *done = 0;
  alma_node *n = &g->nodes[i];
  if (n->dead || n->domain[0] || n->n_outputs < 1) return ALMA_OK;
  int conv = !strcmp(n->op_type, "Conv"), mm = !strcmp(n->op_type, "MatMul");
  if (!conv && !mm) return ALMA_OK;
  if (n->n_inputs < 2) return ALMA_OK;
  /* x */
  int dx = producer_is(g, n->inputs[0], "DequantizeLinear");
  if (dx < 0) return ALMA_OK;
  float xs;
  int xzp;
  alma_dtype xzdt;
  int xq = g->nodes[dx].inputs[0];
  if (xq < 0 || xq >= c->r.n_values) return ALMA_OK;
  alma_dtype xdt = c->r.info[xq].dtype;
  if (!is_q8(xdt) || !per_tensor_params(g, &g->nodes[dx], &xs, &xzp, &xzdt)) return ALMA_OK;
  /* w: constant, per tensor or per output channel */
  int dw = producer_is(g, n->inputs[1], "DequantizeLinear");
  if (dw < 0) return ALMA_OK;
  if (!const_of(g, g->nodes[dw].inputs[0])) {
    /* fake-quantized weights: quantize them now (the new constant serves only if we rewrite) */
    int c = const_quantized(g, g->nodes[dw].inputs[0]);
    if (c < 0 || !const_of(g, g->nodes[dw].n_inputs > 1 ? g->nodes[dw].inputs[1] : -1)) return ALMA_OK;
    g->nodes[dw].inputs[0] = c; /* the same value: DQ(Q(w)) == DQ(c) */
  }
  const alma_node *Dw = &g->nodes[dw];
  const alma_tensor *wq = const_of(g, Dw->inputs[0]), *ws = const_of(g, Dw->n_inputs > 1 ? Dw->inputs[1] : -1);
  const alma_tensor *wz = const_of(g, Dw->n_inputs > 2 ? Dw->inputs[2] : -1);
  if (!wq || !ws || !is_q8(wq->dtype) || ws->dtype != ALMA_DTYPE_FLOAT32) return ALMA_OK;
  if (Dw->n_inputs > 2 && Dw->inputs[2] >= 0 && !wz) return ALMA_OK;
  int64_t nws = alma_tensor_numel(ws), M;
  if (conv) {
    if (wq->rank < 3) return ALMA_OK;
    M = wq->dims[0];
  } else {
    if (wq->rank != 2) return ALMA_OK;
    M = wq->dims[1];
  }
  if (nws != 1) {
    int axis;
    if (ws->rank != 1 || nws != M || alma__norm_axis(alma__attr_i(Dw, "axis", 1), wq->rank, &axis) != ALMA_OK) return ALMA_OK;
    if (axis != (conv ? 0 : 1)) return ALMA_OK;
  } else if (ws->rank > 1) {
    return ALMA_OK;
  }
  for (int64_t m = 0; m < nws; m++)
    if (!(((const float *)ws->data)[m] > 0)) return ALMA_OK;
  /* bias (Conv): a constant, float or dequantized */
  const alma_tensor *bf = NULL, *bq = NULL, *bs = NULL, *bz = NULL;
  if (conv && n->n_inputs > 2 && n->inputs[2] >= 0) {
    int b = n->inputs[2], db = producer_is(g, b, "DequantizeLinear");
    if (db >= 0) {
      const alma_node *Db = &g->nodes[db];
      bq = const_of(g, Db->inputs[0]);
      bs = const_of(g, Db->n_inputs > 1 ? Db->inputs[1] : -1);
      bz = const_of(g, Db->n_inputs > 2 ? Db->inputs[2] : -1);
      if (!bq || !bs || bq->rank != 1 || bq->dims[0] != M || bs->dtype != ALMA_DTYPE_FLOAT32) return ALMA_OK;
      int64_t nbs = alma_tensor_numel(bs);
      if (nbs != 1 && nbs != M) return ALMA_OK;
      if (Db->n_inputs > 2 && Db->inputs[2] >= 0 && (!bz || alma_tensor_numel(bz) != nbs)) return ALMA_OK;
    } else {
      bf = const_of(g, b);
      if (!bf || bf->dtype != ALMA_DTYPE_FLOAT32 || bf->rank != 1 || bf->dims[0] != M) return ALMA_OK;
    }
  }
  int32_t q32;
  for (int64_t m = 0; (bf || bq) && m < M; m++) /* a bias int32 cannot hold keeps the QDQ form */
    if (!bias_q(bf, bq, bs, bz, xs, ws, m, &q32)) return ALMA_OK;
  /* output: [activation] then a per-tensor QuantizeLinear, each the only reader */
  int y = n->outputs[0], act = -1, z = y;
  int rd = only_reader(g, y);
  if (rd < 0 || g->nodes[rd].domain[0]) return ALMA_OK;
  if (!strcmp(g->nodes[rd].op_type, "Relu") || !strcmp(g->nodes[rd].op_type, "Clip")) {
    act = rd;
    z = g->nodes[rd].outputs[0];
    rd = only_reader(g, z);
    if (rd < 0 || g->nodes[rd].domain[0]) return ALMA_OK;
  }
  if (strcmp(g->nodes[rd].op_type, "QuantizeLinear") || g->nodes[rd].inputs[0] != z) return ALMA_OK;
  int qz = rd;
  float ys;
  int yzp;
  alma_dtype yzdt;
  if (!per_tensor_params(g, &g->nodes[qz], &ys, &yzp, &yzdt)) return ALMA_OK;
  int qo = g->nodes[qz].outputs[0];
  if (qo < 0 || qo >= c->r.n_values) return ALMA_OK;
  alma_dtype ydt = c->r.info[qo].dtype;
  if (!is_q8(ydt)) return ALMA_OK;
  if (act >= 0) {
    int qmin = ydt == ALMA_DTYPE_UINT8 ? 0 : -128, qmax = ydt == ALMA_DTYPE_UINT8 ? 255 : 127;
    if (yzp != qmin) return ALMA_OK; /* relu(y) quantizes like y only when 0 is the type's minimum */
    if (!strcmp(g->nodes[act].op_type, "Clip")) {
      double lo, hi;
      if (!clip_bounds(g, &g->nodes[act], &lo, &hi) || lo != 0) return ALMA_OK;
      if (isfinite(hi) && rint(hi / ys) + yzp < qmax) return ALMA_OK;
    }
  }
  /* rewrite */
  const char *base = n->name;
  int in[9];
  in[0] = xq;
  in[1] = g->nodes[dx].inputs[1];
  in[2] = g->nodes[dx].n_inputs > 2 && g->nodes[dx].inputs[2] >= 0 ? g->nodes[dx].inputs[2]
                                                                     : alma__q_scalar_q8(g, base, "x_zero_point", xdt, 0);
  in[3] = Dw->inputs[0];
  in[4] = Dw->inputs[1];
  if (Dw->n_inputs > 2 && Dw->inputs[2] >= 0) {
    in[5] = Dw->inputs[2];
  } else {
    alma_tensor *t;
    int64_t d[1] = {nws};
    in[5] = alma__q_new_const(g, base, "w_zero_point", wq->dtype, ws->rank, d, &t);
  }
  in[6] = g->nodes[qz].inputs[1];
  in[7] = g->nodes[qz].n_inputs > 2 && g->nodes[qz].inputs[2] >= 0 ? g->nodes[qz].inputs[2]
                                                                     : alma__q_scalar_q8(g, base, "y_zero_point", ydt, 0);
  int nin = 8;
  if (bf || bq) {
    alma_tensor *tb;
    int64_t d[1] = {M};
    in[8] = alma__q_new_const(g, base, "bias_int32", ALMA_DTYPE_INT32, 1, d, &tb);
    if (in[8] < 0) return ALMA_ERR_NOMEM;
    /* re-read: adding values may have moved nothing the tensors point to (they are arena data),
     * but the node array may move: use indices from here on */
    ws = const_of(g, g->nodes[dw].inputs[1]);
    for (int64_t m = 0; m < M; m++) bias_q(bf, bq, bs, bz, xs, ws, m, &((int32_t *)tb->data)[m]); /* all fit */
    nin = 9;
  }
  for (int k = 0; k < nin; k++)
    if (in[k] < 0) return ALMA_ERR_NOMEM;
  int out = g->nodes[qz].outputs[0], ni;
  char nm[700];
  snprintf(nm, sizeof nm, "%.600s/%s", base, conv ? "QLinearConv" : "QLinearMatMul");
  ALMA_TRY(alma__q_add_node(g, conv ? "QLinearConv" : "QLinearMatMul", nm, in, nin, &out, 1, &ni));
  if (conv) ALMA_TRY(alma__q_copy_attrs(g, ni, i));
  g->nodes[i].dead = 1;
  g->nodes[qz].dead = 1;
  if (act >= 0) g->nodes[act].dead = 1;
  g->values[out].producer = ni;
  *done = 1;
  return ALMA_OK;
}

/* DequantizeLinear (per tensor) -> MaxPool / Flatten / Reshape / Transpose / Squeeze / Unsqueeze
 * becomes the op on the quantized tensor followed by the DequantizeLinear: the same values (these
 * ops only move or select elements, and dequantization is increasing), and the DQ then sits right
 * before the next Conv/MatMul, where the rewrite above can take it. */
static alma_status propagate_dq(ql_ctx *c, int *moved) {
  alma_graph *g = c->g;
  static const char *ops[] = {"MaxPool", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze"};
  int nn = g->n_nodes;
  for (int i = 0; i < nn; i++) {
    alma_node *n = &g->nodes[i];
    if (n->dead || n->domain[0] || n->n_inputs < 1 || n->n_outputs < 1 || n->outputs[0] < 0) continue;
    int known = 0;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) known |= !strcmp(n->op_type, ops[k]);
    if (!known || (n->n_outputs > 1 && n->outputs[1] >= 0)) continue;
    if (!strcmp(n->op_type, "MaxPool") && n->since_version < 12) continue; /* 8-bit MaxPool: opset 12 */
    int dq = producer_is(g, n->inputs[0], "DequantizeLinear");
    if (dq < 0) continue;
    float s;
    int zp;
    alma_dtype zdt;
    int q = g->nodes[dq].inputs[0];
    /* a value made in this round has no inferred dtype yet: the next round takes it */
    if (q >= c->r.n_values || !is_q8(c->r.info[q].dtype) || !per_tensor_params(g, &g->nodes[dq], &s, &zp, &zdt)) continue;
    int y = n->outputs[0];
    if (alma__q_used_by_subgraph(g, y)) continue;
    int yq = alma__q_new_value(g, g->values[y].name, "quantized");
    if (yq < 0) return ALMA_ERR_NOMEM;
    int din[3] = {yq, g->nodes[dq].inputs[1], g->nodes[dq].n_inputs > 2 ? g->nodes[dq].inputs[2] : -1};
    int nd = din[2] >= 0 ? 3 : 2;
    char nm[700];
    snprintf(nm, sizeof nm, "%.600s/DequantizeLinear", g->nodes[i].name);
    g->nodes[i].inputs[0] = q;
    g->nodes[i].outputs[0] = yq;
    g->values[yq].producer = i;
    ALMA_TRY(alma__q_add_node(g, "DequantizeLinear", nm, din, nd, &y, 1, NULL));
    (*moved)++;
  }
  return ALMA_OK;
}

static alma_status qlinear_run(alma_graph *g, const alma_pass_opts *opts) {
  if (alma__graph_opset(g, "") < 10) return ALMA_OK; /* no QLinear ops before opset 10: nothing to do */
  ql_ctx c = {.g = g};
  int moved = 0;
  /* move DQs past data-movement ops first (repeatedly: DQ -> MaxPool -> Flatten); inference is
   * redone after each round because new values need their dtypes */
  for (int round = 0; round < 8; round++) {
    int m = 0;
    ALMA_TRY(alma__graph_infer(g, NULL, 1, 1 << 16, &c.r));
    alma_status st = propagate_dq(&c, &m);
    alma__infer_result_free(&c.r);
    if (st != ALMA_OK) return st;
    if (!m) break;
    moved += m;
    ALMA_TRY(alma__graph_compact(g));
  }
  ALMA_TRY(alma__graph_infer(g, NULL, 1, 1 << 16, &c.r));
  int nn = g->n_nodes, n_conv = 0, n_mm = 0;
  alma_status st = ALMA_OK;
  for (int i = 0; i < nn && st == ALMA_OK; i++) {
    int done = 0;
    st = try_node(&c, i, &done);
    if (done) {
      n_conv += !strcmp(g->nodes[i].op_type, "Conv");
      n_mm += !strcmp(g->nodes[i].op_type, "MatMul");
    }
  }
  alma__infer_result_free(&c.r);
  if (st != ALMA_OK) return st;
  alma__q_remove_dead(g);
  ALMA_TRY(alma__graph_compact(g));
  if (opts && opts->verbose)
    fprintf(stderr, "QLINEAR: %d QLinearConv, %d QLinearMatMul (%d DequantizeLinear moved past data movement)\n", n_conv,
            n_mm, moved);
  return ALMA_OK;
}

const alma_pass alma__pass_qlinear = {
    .name = "QLINEAR",
    .description = "QDQ Conv/MatMul (+Relu/Clip) -> QLinearConv/QLinearMatMul, computed in integers (after INT8_STATIC, "
                   "or on QDQ models)",
    .run = qlinear_run,
    .lossy = 1, /* requantizes in integers: within a quantization step of the QDQ graph's result */
};
