/* XNNPACK runtime, int8: which QuantizeLinear / DequantizeLinear / QLinearConv / QLinearMatMul
 * nodes and QDQ clusters run quantized, in which XNNPACK type each 8-bit tensor lives, and the
 * quantized weights.
 *
 * What this XNNPACK (2022-02-16) offers, and the choices it forces:
 * - convolution_2d / depthwise_convolution_2d in qint8 with per-output-channel int8 weights
 *   (qcint8, zero point 0) and int32 bias (qcint32), or in quint8 with uint8 weights of one scale
 *   and zero point; fully_connected only with per-tensor weights. A fully-connected node therefore
 *   runs as a 1x1 convolution over [M, 1, 1, K] (static reshapes around it), which takes the
 *   per-channel weights INT8_STATIC writes.
 * - convert between fp32 and qint8 / quint8 (QuantizeLinear, DequantizeLinear), no convert between
 *   the two 8-bit types.
 * - add2 on qint8 or quint8 with each operand's own scale and zero point, numpy broadcasting, but
 *   one type for both operands and the result, and each operand's scale / the result's scale in
 *   [2^-10, 256) (its fixed-point multipliers). Any 8-bit value can live in either type (below), so
 *   mixed uint8 / int8 operands are taken; only a type already forced on one of them by a
 *   convolution of the other path makes the Add fall back.
 * INT8_STATIC writes uint8 activations and per-channel int8 weights, which only the qint8 path
 * takes: a uint8 tensor q with zero point z is held as the int8 tensor q - 128 with zero point
 * z - 128 (the same real values, exactly), flipped (q ^ 0x80) where it crosses the partition
 * boundary. Weights with non-zero zero points (QLinear models from other tools) take the quint8
 * path when w - zp does not fit int8; a tensor read by both kinds stays on the int8 path and the
 * quint8 reader falls back (QDQ: float convolution; QLinear*: EAGER).
 *
 * Numerics against EAGER's evaluation of the QDQ graph: the int32 accumulation is exact; XNNPACK
 * requantizes with the float multiplier x_scale * w_scale / y_scale, where EAGER rounds the float
 * convolution's result divided by y_scale, so the two differ only where a value falls within float
 * rounding of a half step: at most one quantization step. QuantizeLinear multiplies by 1 / scale
 * where ONNX divides (the same at powers of two, one step at most elsewhere); DequantizeLinear is
 * the same float arithmetic. Relu/Clip and MaxPool before the QuantizeLinear commute with it
 * (monotonic): Q(clip(y)) = clamp(Q(y)), Q(maxpool(y)) = maxpool(Q(y)), exactly. The quantized add
 * computes (a - za) * sa / sy + (b - zb) * sb / sy with 21-bit fixed-point multipliers and rounds
 * half up, where EAGER rounds the float sum divided by sy half to even: again one step at most. */
#ifdef ALMA_HAVE_XNNPACK
#include <math.h>

#include "runtimes/xnnpack/xnn_rt.h"

/* ---- constants -------------------------------------------------------------------------------- */
static int is8(alma_dtype t) { return t == ALMA_DTYPE_UINT8 || t == ALMA_DTYPE_INT8; }

static int get_i(const alma_tensor *t, int64_t i) {
  switch (t->dtype) {
    case ALMA_DTYPE_UINT8: return ((const uint8_t *)t->data)[i];
    case ALMA_DTYPE_INT8: return ((const int8_t *)t->data)[i];
    case ALMA_DTYPE_INT32: return ((const int32_t *)t->data)[i];
    default: return 0;
  }
}

/* a usable quantization scale: XNNPACK takes positive normal floats */
static int good_scale(float s) { return isnormal(s) && s > 0; }

static int scalar_scale(const alma_tensor *t, float *s) {
  if (!t || t->dtype != ALMA_DTYPE_FLOAT32 || alma_tensor_numel(t) != 1 || !t->data) return 0;
  *s = *(const float *)t->data;
  return good_scale(*s);
}

/* zero point of an 8-bit tensor of type dt: absent = 0 (then dt is the ONNX default uint8) */
static int scalar_zp(const alma_tensor *t, alma_dtype dt, int32_t *z) {
  if (!t) {
    *z = 0;
    return 1;
  }
  if (t->dtype != dt || alma_tensor_numel(t) != 1 || !t->data) return 0;
  *z = get_i(t, 0);
  return 1;
}

int alma__xrt_dq_const(const alma_graph *g, int v, xrt_dqc *out) {
  if (v < 0 || v >= g->n_values) return 0;
  int pr = g->values[v].producer;
  if (pr < 0 || pr >= g->n_nodes) return 0;
  const alma_node *n = &g->nodes[pr];
  if (n->domain[0] || strcmp(n->op_type, "DequantizeLinear") || n->n_outputs != 1 || n->n_inputs < 2 ||
      n->inputs[0] < 0 || n->inputs[1] < 0 || alma__attr_i(n, "block_size", 0))
    return 0;
  const alma_tensor *x = alma__xrt_const(g, n->inputs[0]), *s = alma__xrt_const(g, n->inputs[1]);
  const alma_tensor *z = n->n_inputs > 2 && n->inputs[2] >= 0 ? alma__xrt_const(g, n->inputs[2]) : NULL;
  if (!x || !s || !x->data || !s->data || s->dtype != ALMA_DTYPE_FLOAT32) return 0;
  if (!is8(x->dtype) && x->dtype != ALMA_DTYPE_INT32) return 0;
  if (n->n_inputs > 2 && n->inputs[2] >= 0 && (!z || !z->data || z->dtype != x->dtype)) return 0;
  int64_t ns = alma_tensor_numel(s);
  out->x = x;
  out->scale = s;
  out->zp = z;
  out->axis = -1;
  if (z && alma_tensor_numel(z) != ns) return 0;
  if (ns != 1) {
    int64_t axis = alma__attr_i(n, "axis", 1);
    if (axis < 0) axis += x->rank;
    if (s->rank != 1 || axis < 0 || axis >= x->rank || x->dims[axis] != ns) return 0;
    out->axis = (int)axis;
  }
  return 1;
}

alma_status alma__xrt_eval_dq_consts(const alma_graph *g, alma_tensor *cval) {
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    xrt_dqc d;
    if (n->n_outputs != 1 || n->outputs[0] < 0 || !n->op || !alma__xrt_dq_const(g, n->outputs[0], &d)) continue;
    const alma_tensor *in[3] = {d.x, d.scale, d.zp};
    alma_tensor out;
    memset(&out, 0, sizeof out);
    alma_status st = alma__op_run_node(NULL, n, in, d.zp ? 3 : 2, &out, 1);
    if (st == ALMA_ERR_NOMEM) return st;
    if (st != ALMA_OK || out.dtype != ALMA_DTYPE_FLOAT32) {
      /* EAGER will report it when it runs the node */
      alma_tensor_free_data(&out);
      alma__error_clear();
      continue;
    }
    cval[n->outputs[0]] = out;
  }
  return ALMA_OK;
}

/* ---- quantized convolution: what it reads ----------------------------------------------------- */
typedef struct qdesc {
  int x, y;                         /* the 8-bit values read and written */
  float xs, ys;
  int32_t xz, yz;                   /* ONNX zero points */
  const alma_tensor *W, *ws, *wzp;  /* 8-bit weights, scales (1 or chans), zero points (NULL, 1 or chans) */
  const alma_tensor *Bq, *bs;       /* int32 bias and its scales (1 or chans) */
  const alma_tensor *Bf;            /* or a float bias */
  int64_t chans;
  int fc, trans;                    /* fully connected: W is [N, K] (trans) or [K, N] */
} qdesc;

static const alma_tensor *in_cst(const alma_graph *g, const alma_node *n, int k) {
  return k < n->n_inputs && n->inputs[k] >= 0 ? alma__xrt_const(g, n->inputs[k]) : NULL;
}

/* Channel c of element e of the weights. */
static int64_t w_chan(const qdesc *d, int64_t e) {
  if (!d->fc) return e / alma__numel(d->W->rank - 1, d->W->dims + 1);
  return d->trans ? e / d->W->dims[1] : e % d->W->dims[1];
}

static float ws_at(const qdesc *d, int64_t c) { return ((const float *)d->ws->data)[alma_tensor_numel(d->ws) == 1 ? 0 : c]; }
static int32_t wzp_at(const qdesc *d, int64_t c) {
  return d->wzp ? get_i(d->wzp, alma_tensor_numel(d->wzp) == 1 ? 0 : c) : 0;
}

/* XQ_S8 when every w - zp fits int8 (per-channel scales allowed), XQ_U8 when the weights have one
 * scale and one zero point, else XQ_NONE. */
static int weight_form(const qdesc *d) {
  int64_t n = alma_tensor_numel(d->W);
  int fits = 1;
  for (int64_t e = 0; e < n && fits; e++) {
    int32_t v = get_i(d->W, e) - wzp_at(d, w_chan(d, e));
    fits = v >= -128 && v <= 127;
  }
  if (fits) return XQ_S8;
  int one_zp = 1;
  for (int64_t c = 1; d->wzp && c < alma_tensor_numel(d->wzp); c++) one_zp &= get_i(d->wzp, c) == get_i(d->wzp, 0);
  if (alma_tensor_numel(d->ws) == 1 && one_zp) return XQ_U8;
  return XQ_NONE;
}

/* Scales XNNPACK accepts: positive normal, and a requantization multiplier x_scale * w_scale /
 * y_scale in [2^-32, 256) for every channel (its operators refuse others; XNNPACK computes it in
 * float, hence the margins). */
static int scales_ok(const qdesc *d) {
  if (!good_scale(d->xs) || !good_scale(d->ys)) return 0;
  for (int64_t c = 0; c < d->chans; c++) {
    float w = ws_at(d, c);
    if (!good_scale(w)) return 0;
    double r = (double)d->xs * w / d->ys;
    if (!(r >= 0x1.0p-31 && r < 255.0)) return 0;
  }
  return 1;
}

/* per-channel parameter tensor: numel 1, or chans values in a 1-D tensor */
static int per_chan(const alma_tensor *t, int64_t chans) {
  int64_t k = alma_tensor_numel(t);
  return k == 1 || (k == chans && t->rank == 1);
}

/* The QLinearConv / QLinearMatMul node n. */
static int qdesc_qlinear(const alma_graph *g, const alma_dtype *vdt, const alma_node *n, qdesc *d) {
  memset(d, 0, sizeof *d);
  if (n->n_inputs < 8 || n->n_outputs != 1 || n->inputs[0] < 0 || n->inputs[3] < 0 || n->outputs[0] < 0) return 0;
  d->x = n->inputs[0];
  d->y = n->outputs[0];
  alma_dtype xt = vdt[d->x], yt = vdt[d->y];
  if (!is8(xt) || !is8(yt)) return 0;
  const alma_tensor *xs = in_cst(g, n, 1), *xz = in_cst(g, n, 2), *ys = in_cst(g, n, 6), *yz = in_cst(g, n, 7);
  if (!scalar_scale(xs, &d->xs) || !scalar_scale(ys, &d->ys)) return 0;
  /* an input given but not constant is not taken; absent zero points are 0 */
  if ((n->inputs[2] >= 0 && !xz) || (n->inputs[7] >= 0 && !yz) || (n->inputs[5] >= 0 && !in_cst(g, n, 5))) return 0;
  if (!scalar_zp(xz, xt, &d->xz) || !scalar_zp(yz, yt, &d->yz)) return 0;
  d->W = in_cst(g, n, 3);
  d->ws = in_cst(g, n, 4);
  d->wzp = in_cst(g, n, 5);
  if (!d->W || !d->W->data || !is8(d->W->dtype) || !d->ws || d->ws->dtype != ALMA_DTYPE_FLOAT32 || !d->ws->data) return 0;
  if (d->wzp && (d->wzp->dtype != d->W->dtype || !d->wzp->data)) return 0;
  if (!strcmp(n->op_type, "QLinearConv")) {
    if (d->W->rank != 4) return 0;
    d->chans = d->W->dims[0];
    if (n->n_inputs > 8 && n->inputs[8] >= 0) {
      d->Bq = in_cst(g, n, 8);
      if (!d->Bq || d->Bq->dtype != ALMA_DTYPE_INT32 || alma_tensor_numel(d->Bq) != d->chans || !d->Bq->data) return 0;
    }
  } else {
    if (d->W->rank != 2) return 0;
    d->fc = 1;
    d->chans = d->W->dims[1];
  }
  if (!per_chan(d->ws, d->chans) || (d->wzp && !per_chan(d->wzp, d->chans))) return 0;
  return 1;
}

/* The QDQ cluster of conv/fc node c (xn's qdq/qquant set). */
static int qdesc_cluster(const alma_graph *g, const alma_dtype *vdt, const xrt_node *xn, const alma_node *c, qdesc *d) {
  memset(d, 0, sizeof *d);
  const alma_node *dq = &g->nodes[xn->qdq], *qn = &g->nodes[xn->qquant];
  d->x = dq->inputs[0];
  d->y = qn->outputs[0];
  const alma_tensor *s, *z;
  s = in_cst(g, dq, 1), z = in_cst(g, dq, 2);
  if (!scalar_scale(s, &d->xs) || !scalar_zp(z, vdt[d->x], &d->xz)) return 0;
  s = in_cst(g, qn, 1), z = in_cst(g, qn, 2);
  if (!scalar_scale(s, &d->ys) || !scalar_zp(z, vdt[d->y], &d->yz)) return 0;
  xrt_dqc w;
  if (!alma__xrt_dq_const(g, c->inputs[1], &w) || !is8(w.x->dtype)) return 0;
  d->W = w.x;
  d->ws = w.scale;
  d->wzp = w.zp;
  int conv = !strcmp(c->op_type, "Conv"), gemm = !strcmp(c->op_type, "Gemm");
  int want_axis;
  if (conv) {
    if (d->W->rank != 4) return 0;
    d->chans = d->W->dims[0];
    want_axis = 0;
  } else {
    if (d->W->rank != 2) return 0;
    d->fc = 1;
    d->trans = gemm && alma__attr_i(c, "transB", 0) != 0;
    d->chans = d->W->dims[d->trans ? 0 : 1];
    want_axis = d->trans ? 0 : 1;
    if (gemm && (alma__attr_f(c, "alpha", 1.0f) != 1.0f || alma__attr_i(c, "transA", 0))) return 0;
  }
  if (w.axis >= 0 && w.axis != want_axis) return 0;
  if (!conv && !gemm) return 1; /* MatMul: no bias */
  if (c->n_inputs < 3 || c->inputs[2] < 0) return 1;
  if (gemm && alma__attr_f(c, "beta", 1.0f) != 1.0f) return 0;
  xrt_dqc b;
  if (alma__xrt_dq_const(g, c->inputs[2], &b)) {
    if (b.x->dtype != ALMA_DTYPE_INT32 || alma_tensor_numel(b.x) != d->chans || (b.axis >= 0 && b.axis != b.x->rank - 1)) return 0;
    for (int64_t k = 0; b.zp && k < alma_tensor_numel(b.zp); k++)
      if (get_i(b.zp, k)) return 0;
    d->Bq = b.x;
    d->bs = b.scale;
    return 1;
  }
  const alma_tensor *B = alma__xrt_const(g, c->inputs[2]);
  if (!B || B->dtype != ALMA_DTYPE_FLOAT32 || alma_tensor_numel(B) != d->chans || !B->data) return 0;
  d->Bf = B;
  return 1;
}

static int qdesc_make(const xrt_plan *p, int node, qdesc *d) {
  const xrt_node *xn = &p->xn[node];
  const alma_node *n = &p->g->nodes[node];
  return xn->qlin ? qdesc_qlinear(p->g, p->vdt, n, d) : qdesc_cluster(p->g, p->vdt, xn, n, d);
}

/* ---- analysis of single nodes ----------------------------------------------------------------- */
int alma__xrt_analyze_quant(const alma_graph *g, const alma_tensor *cval, const alma_dtype *vdt, const alma_node *n,
                            int rank_x, int rank_y, xrt_node *xn) {
  const char *t = n->op_type;
  int x = n->n_inputs > 0 ? n->inputs[0] : -1, y = n->outputs[0];
  if (x < 0 || alma__xrt_cst(g, cval, x) || rank_x < 1 || rank_x > XNN_MAX_TENSOR_DIMS || rank_y != rank_x) return 0;
  xn->out_rank = rank_y;
  xn->out_min = -INFINITY;
  xn->out_max = INFINITY;
  xn->can_plain = xn->can_nhwc = 1;
  if (!strcmp(t, "QuantizeLinear") || !strcmp(t, "DequantizeLinear")) {
    int quant = t[0] == 'Q';
    if (n->n_inputs < 2 || n->inputs[1] < 0 || alma__attr_i(n, "block_size", 0)) return 0;
    alma_dtype qt = quant ? vdt[y] : vdt[x];
    if (!is8(qt) || (quant ? vdt[x] : vdt[y]) != ALMA_DTYPE_FLOAT32) return 0;
    const alma_tensor *z = in_cst(g, n, 2);
    if (n->n_inputs > 2 && n->inputs[2] >= 0 && !z) return 0;
    int32_t zp;
    if (!scalar_scale(in_cst(g, n, 1), &xn->qs) || !scalar_zp(z, qt, &zp)) return 0;
    xn->qz = (float)zp;
    xn->kind = quant ? XK_QUANT : XK_DEQUANT;
    return 1;
  }
  int conv = !strcmp(t, "QLinearConv");
  if (!conv && strcmp(t, "QLinearMatMul")) return 0;
  qdesc d;
  if (!qdesc_qlinear(g, vdt, n, &d) || !scales_ok(&d)) return 0;
  if (conv) {
    int64_t G = alma__attr_i(n, "group", 1);
    const alma_tensor *W = d.W;
    if (rank_x != 4 || G < 1 || W->dims[0] % G || W->dims[0] <= 0 || W->dims[1] <= 0) return 0;
    const int64_t *ks = NULL;
    int nk = alma__attr_ints(n, "kernel_shape", &ks);
    if (nk && (nk != 2 || ks[0] != W->dims[2] || ks[1] != W->dims[3])) return 0;
    xn->kind = W->dims[1] == 1 && G > 1 ? XK_DWCONV : XK_CONV;
    xn->can_plain = 0;
  } else {
    if (rank_x < 2) return 0;
    xn->kind = XK_FC;
    xn->can_nhwc = rank_x != 4;
  }
  xn->q = weight_form(&d);
  if (!xn->q) return 0;
  xn->qlin = 1;
  return 1;
}

/* ---- before partitioning ---------------------------------------------------------------------- */
static int one_reader(const uses_t *u, int v) { return v >= 0 && !u->is_out[v] && u->off[v + 1] - u->off[v] == 1; }

/* The only reader of node ni's output, past one clamp (Relu/Clip: *act, else -1); *v becomes the
 * value that reader reads. -1 when a value on the way has other readers or is a graph output. */
static int reader_past_clamp(const alma_graph *g, const xrt_node *xn, const uses_t *u, int ni, int *v, int *act) {
  *act = -1;
  *v = g->nodes[ni].outputs[0];
  if (!one_reader(u, *v)) return -1;
  int r = u->list[u->off[*v]];
  if (xn[r].kind == XK_CLAMP) {
    *act = r;
    *v = g->nodes[r].outputs[0];
    if (!one_reader(u, *v)) return -1;
    r = u->list[u->off[*v]];
  }
  return r;
}

static void clear_cluster(xrt_node *xn) {
  xn->q = XQ_NONE;
  xn->qpass = xn->qadd = 0;
  xn->qdq = xn->qdq2 = xn->qact = xn->qpool = xn->qreshape = xn->qquant = -1;
}

/* XNNPACK does not take node (it runs on EAGER) */
static void drop_node(xrt_node *xn) {
  int part = xn->part;
  memset(xn, 0, sizeof *xn);
  xn->part = part;
  clear_cluster(xn);
}

/* Quantized clamp bounds of value vy for a float range: the dequantized values of the quantized
 * bounds (Q(lo), Q(hi)), or infinities for the type's limits. */
void alma__xrt_qclamp(const xrt_vq *vy, float lo, float hi, float *qlo, float *qhi) {
  double mn = vy->dom == XQ_S8 ? -128 : 0, mx = vy->dom == XQ_S8 ? 127 : 255;
  /* the float division QuantizeLinear does (EAGER's kernel), rounded half to even */
  double a = isinf(lo) && lo < 0 ? mn : nearbyint((double)(lo / vy->scale)) + vy->zp;
  double b = isinf(hi) && hi > 0 ? mx : nearbyint((double)(hi / vy->scale)) + vy->zp;
  a = a < mn ? mn : a > mx ? mx : a;
  b = b < mn ? mn : b > mx ? mx : b;
  *qlo = a <= mn ? -INFINITY : (float)((a - vy->zp) * vy->scale);
  *qhi = b >= mx ? INFINITY : (float)((b - vy->zp) * vy->scale);
}

/* whether node c (Conv/Gemm/MatMul on XNNPACK) heads a QDQ cluster; fills its cluster fields */
static int find_cluster(xrt_plan *p, const uses_t *u, int ci) {
  const alma_graph *g = p->g;
  xrt_node *xn = p->xn, *c = &xn[ci];
  const alma_node *n = &g->nodes[ci];
  if (c->qlin || c->fused_op || (c->kind != XK_CONV && c->kind != XK_DWCONV && c->kind != XK_FC)) return 0;
  int d = g->values[n->inputs[0]].producer;
  if (d < 0 || xn[d].kind != XK_DEQUANT) return 0;
  int v, act, pool = -1, reshape = -1;
  int r = reader_past_clamp(g, xn, u, ci, &v, &act);
  if (r < 0) return 0;
  if (xn[r].kind == XK_MAXPOOL && c->kind != XK_FC) {
    pool = r;
    v = g->nodes[r].outputs[0];
    if (!one_reader(u, v)) return 0;
    r = u->list[u->off[v]];
  }
  if (xn[r].kind == XK_RESHAPE) {
    reshape = r;
    v = g->nodes[r].outputs[0];
    if (!one_reader(u, v)) return 0;
    r = u->list[u->off[v]];
  }
  if (xn[r].kind != XK_QUANT || g->nodes[r].inputs[0] != v) return 0;
  c->qdq = d;
  c->qact = act;
  c->qpool = pool;
  c->qreshape = reshape;
  c->qquant = r;
  qdesc q;
  if (!qdesc_cluster(g, p->vdt, c, n, &q) || !scales_ok(&q) || !(c->q = weight_form(&q))) {
    clear_cluster(c);
    return 0;
  }
  /* A convolution with fewer than 4 input channels per group stays float: this XNNPACK's int8
   * kernels cost as much for 1 to 4 channels as for 4, float ones scale with the channels (one
   * thread, AVX2: 3x3, 3 channels at 112x112 0.81 ms int8 against 0.63 ms float; 5x5, one channel
   * 3x slower in int8; from 4 channels on int8 is as fast or faster, 2-3x from 8). The float
   * convolution computes the same within one step (it is the QDQ graph's own arithmetic). */
  if (c->kind == XK_CONV && q.W->dims[1] < 4) {
    clear_cluster(c);
    return 0;
  }
  if (act >= 0) {
    /* the activation's quantized bounds must leave a range (XNNPACK refuses min >= max) */
    int s8 = p->vdt[q.y] == ALMA_DTYPE_INT8;
    xrt_vq vy = {.q = 1, .dom = s8 ? XQ_S8 : XQ_U8, .scale = q.ys, .zp = q.yz};
    float lo, hi;
    alma__xrt_qclamp(&vy, xn[act].out_min, xn[act].out_max, &lo, &hi);
    if (!(lo < hi)) {
      clear_cluster(c);
      return 0;
    }
  }
  return 1;
}

/* DequantizeLinear -> MaxPool / Flatten / Reshape -> QuantizeLinear with equal parameters (ONNX
 * Runtime's QDQ models wrap these ops so): Q(maxpool(DQ(q))) = maxpool(q) and Q(reshape(DQ(q))) =
 * reshape(q) exactly, so the node runs on the 8-bit values and both converts vanish. */
static int find_passthrough(xrt_plan *p, const uses_t *u, int mi) {
  const alma_graph *g = p->g;
  xrt_node *xn = p->xn, *m = &xn[mi];
  const alma_node *n = &g->nodes[mi];
  if (m->kind != XK_MAXPOOL && m->kind != XK_RESHAPE) return 0;
  int d = g->values[n->inputs[0]].producer, v = n->outputs[0];
  if (d < 0 || xn[d].kind != XK_DEQUANT || !one_reader(u, v)) return 0;
  int r = u->list[u->off[v]];
  if (xn[r].kind != XK_QUANT || xn[r].qs != xn[d].qs || xn[r].qz != xn[d].qz ||
      p->vdt[g->nodes[d].inputs[0]] != p->vdt[g->nodes[r].outputs[0]])
    return 0;
  m->qpass = 1;
  m->qdq = d;
  m->qquant = r;
  return 1;
}

/* Add(DequantizeLinear(a), DequantizeLinear(b)) -> [Relu|Clip] -> QuantizeLinear (INT8_STATIC's
 * residual Adds, ONNX Runtime's QDQ Adds): Q(clip(DQ(a) + DQ(b))) is one quantized XNNPACK add of
 * the 8-bit a and b, clamped, writing Q's output; the float sum is never formed. Both operands
 * computed (a constant operand stays the float add), per-tensor parameters (the DequantizeLinear /
 * QuantizeLinear nodes XNNPACK takes are per tensor). */
static int find_qadd(xrt_plan *p, const uses_t *u, int ai) {
  const alma_graph *g = p->g;
  xrt_node *xn = p->xn, *a = &xn[ai];
  const alma_node *n = &g->nodes[ai];
  if (a->kind != XK_BINARY || a->sub != XB_ADD || a->fused_op || a->cst_slot >= 0) return 0;
  int d[2];
  for (int k = 0; k < 2; k++) {
    d[k] = g->values[n->inputs[k]].producer;
    if (d[k] < 0 || xn[d[k]].kind != XK_DEQUANT) return 0;
  }
  int v, act;
  int r = reader_past_clamp(g, xn, u, ai, &v, &act);
  if (r < 0) return 0;
  if (xn[r].kind != XK_QUANT || g->nodes[r].inputs[0] != v) return 0;
  /* XNNPACK takes operand-to-result scale ratios in [2^-10, 256), computed in float */
  for (int k = 0; k < 2; k++) {
    float ratio = xn[d[k]].qs / xn[r].qs;
    if (!(ratio >= 0x1.0p-10f && ratio < 256.0f)) return 0;
  }
  if (act >= 0) {
    /* the activation's quantized bounds must leave a range (XNNPACK refuses min >= max) */
    int y = g->nodes[r].outputs[0];
    xrt_vq vy = {.q = 1, .dom = p->vdt[y] == ALMA_DTYPE_INT8 ? XQ_S8 : XQ_U8, .scale = xn[r].qs, .zp = (int32_t)xn[r].qz};
    float lo, hi;
    alma__xrt_qclamp(&vy, xn[act].out_min, xn[act].out_max, &lo, &hi);
    if (!(lo < hi)) return 0;
  }
  a->qadd = 1;
  a->qdq = d[0];
  a->qdq2 = d[1];
  a->qact = act;
  a->qquant = r;
  return 1;
}

/* The 8-bit values a node running on them (a passthrough MaxPool/Flatten/Reshape, a quantized add)
 * reads and writes: they must share one XNNPACK type. Returns their number (0: not such a node). */
static int shared_type_values(const xrt_plan *p, int i, int *vs) {
  const xrt_node *xn = &p->xn[i];
  const alma_graph *g = p->g;
  if (!xn->qpass && !xn->qadd) return 0;
  int k = 0;
  vs[k++] = g->nodes[xn->qdq].inputs[0];
  if (xn->qadd) vs[k++] = g->nodes[xn->qdq2].inputs[0];
  vs[k++] = g->nodes[xn->qquant].outputs[0];
  return k;
}

/* the 8-bit values a quantized node reads and writes */
static void q_values(const xrt_plan *p, int i, int *in, int *out) {
  const xrt_node *xn = &p->xn[i];
  const alma_node *n = &p->g->nodes[i];
  *in = xn->qlin ? n->inputs[0] : p->g->nodes[xn->qdq].inputs[0];
  *out = xn->qlin ? n->outputs[0] : p->g->nodes[xn->qquant].outputs[0];
}

alma_status alma__xrt_quant_plan(xrt_plan *p, const uses_t *u) {
  const alma_graph *g = p->g;
  int nv = g->n_values;
  float *ps = malloc(sizeof(float) * ((size_t)nv + 1));
  float *pz = malloc(sizeof(float) * ((size_t)nv + 1));
  unsigned char *has = calloc((size_t)nv + 1, 1), *dem = calloc((size_t)nv + 1, 1);
  if (!ps || !pz || !has || !dem) {
    free(ps);
    free(pz);
    free(has);
    free(dem);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < g->n_nodes; i++) {
    xrt_node *xn = &p->xn[i];
    xn->qdq = xn->qdq2 = xn->qact = xn->qpool = xn->qreshape = xn->qquant = -1;
  }
  /* one scale and zero point per 8-bit value: the producer's (QuantizeLinear, QLinear*), else the
   * first reader's; a DequantizeLinear / QLinear* reading it with others stays on EAGER */
  for (int i = 0; i < g->n_nodes; i++) {
    const xrt_node *xn = &p->xn[i];
    const alma_node *n = &g->nodes[i];
    qdesc d;
    if (xn->kind == XK_QUANT) {
      int v = n->outputs[0];
      has[v] = 1, ps[v] = xn->qs, pz[v] = xn->qz;
    } else if (xn->qlin && qdesc_qlinear(g, p->vdt, n, &d)) {
      has[d.y] = 1, ps[d.y] = d.ys, pz[d.y] = (float)d.yz;
    }
  }
  for (int i = 0; i < g->n_nodes; i++) {
    xrt_node *xn = &p->xn[i];
    const alma_node *n = &g->nodes[i];
    float s, z;
    qdesc d;
    if (xn->kind == XK_DEQUANT) {
      s = xn->qs, z = xn->qz;
    } else if (xn->qlin && qdesc_qlinear(g, p->vdt, n, &d)) {
      s = d.xs, z = (float)d.xz;
    } else {
      continue;
    }
    int v = n->inputs[0];
    if (!has[v]) {
      has[v] = 1, ps[v] = s, pz[v] = z;
    } else if (ps[v] != s || pz[v] != z) {
      drop_node(xn);
    }
  }
  for (int i = 0; i < g->n_nodes; i++)
    if (!find_cluster(p, u, i) && !find_passthrough(p, u, i)) find_qadd(p, u, i);
  /* domains: the int8 path wins; a quint8 node touching an int8-path value falls back */
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < g->n_nodes; i++) {
      xrt_node *xn = &p->xn[i];
      if (xn->q != (pass ? XQ_U8 : XQ_S8)) continue;
      int in, out;
      q_values(p, i, &in, &out);
      if (pass && (dem[in] == XQ_S8 || dem[out] == XQ_S8)) {
        if (xn->qlin) drop_node(xn);
        else clear_cluster(xn);
        continue;
      }
      dem[in] = dem[out] = (unsigned char)xn->q;
    }
  /* a passthrough or a quantized add reads and writes one XNNPACK type: its values share a demand
   * (a conflict cancels it). A quantized add whose values nothing else constrains takes its
   * result's own type (an operand of the other signedness is flipped, exactly), so that mixed
   * uint8 / int8 operands still meet in one type. */
  for (int changed = 1; changed;) {
    changed = 0;
    for (int i = 0; i < g->n_nodes; i++) {
      int vs[3], k = shared_type_values(p, i, vs);
      unsigned char d = 0;
      for (int j = 0; j < k; j++) d |= dem[vs[j]];
      if (!d) continue;
      if (d == (XQ_S8 | XQ_U8)) {
        clear_cluster(&p->xn[i]);
        changed = 1;
        continue;
      }
      for (int j = 0; j < k; j++)
        if (dem[vs[j]] != d) dem[vs[j]] = d, changed = 1;
    }
    for (int i = 0; i < g->n_nodes && !changed; i++) {
      int vs[3], k = p->xn[i].qadd ? shared_type_values(p, i, vs) : 0;
      if (!k || dem[vs[0]] || dem[vs[1]] || dem[vs[2]]) continue;
      unsigned char d = p->vdt[vs[2]] == ALMA_DTYPE_INT8 ? XQ_S8 : XQ_U8;
      dem[vs[0]] = dem[vs[1]] = dem[vs[2]] = d;
      changed = 1;
    }
  }
  /* the 8-bit values on XNNPACK: read or written by a node taken above */
  memset(has, 0, (size_t)nv);
  for (int i = 0; i < g->n_nodes; i++) {
    const xrt_node *xn = &p->xn[i];
    const alma_node *n = &g->nodes[i];
    int in = -1, out = -1;
    if (xn->kind == XK_QUANT) out = n->outputs[0];
    /* (a passthrough node's values are a DequantizeLinear's input and a QuantizeLinear's output) */
    else if (xn->kind == XK_DEQUANT) in = n->inputs[0];
    else if (xn->q) q_values(p, i, &in, &out);
    if (in >= 0) has[in] = 1;
    if (out >= 0) has[out] = 1;
  }
  for (int v = 0; v < nv; v++) {
    if (!has[v]) continue;
    xrt_vq *q = &p->vq[v];
    int native = p->vdt[v] == ALMA_DTYPE_INT8 ? XQ_S8 : XQ_U8;
    q->q = 1;
    q->dom = (unsigned char)(dem[v] ? dem[v] : native);
    q->flip = q->dom != native;
    q->scale = ps[v];
    q->zp = (int32_t)pz[v] + (q->flip ? (q->dom == XQ_S8 ? -128 : 128) : 0);
  }
  /* a passthrough or a quantized add reads and writes one XNNPACK type */
  for (int i = 0; i < g->n_nodes; i++) {
    int vs[3], k = shared_type_values(p, i, vs), same = 1;
    for (int j = 1; j < k; j++) same &= p->vq[vs[j]].dom == p->vq[vs[0]].dom;
    if (!same) clear_cluster(&p->xn[i]);
  }
  free(ps);
  free(pz);
  free(has);
  free(dem);
  return ALMA_OK;
}

/* ---- after partitioning ----------------------------------------------------------------------- */
void alma__xrt_quant_fold(xrt_plan *p, const uses_t *u) {
  const alma_graph *g = p->g;
  xrt_node *xn = p->xn;
  p->n_qnodes = p->n_qother = p->n_qadds = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    xrt_node *c = &xn[i];
    if (c->part >= 0 && c->qadd) {
      int q = c->part;
      if (xn[c->qdq].part != q || xn[c->qdq2].part != q || xn[c->qquant].part != q || (c->qact >= 0 && xn[c->qact].part != q)) {
        clear_cluster(c); /* split apart: the float add between converts computes the same */
        continue;
      }
      /* the add writes Q's output, clamped by the activation's quantized bounds */
      if (c->qact >= 0) {
        xn[c->qact].fused_into = i;
        c->has_clamp = 1;
        c->out_min = xn[c->qact].out_min;
        c->out_max = xn[c->qact].out_max;
      }
      c->fused_act = c->qquant;
      xn[c->qquant].fused_into = i;
      p->n_qadds++;
      continue;
    }
    if (c->part >= 0 && c->qpass) {
      if (xn[c->qdq].part != c->part || xn[c->qquant].part != c->part) {
        clear_cluster(c);
        continue;
      }
      c->fused_act = c->qquant;
      xn[c->qquant].fused_into = i;
      p->n_qother++;
      continue;
    }
    if (c->part < 0 || !c->q) continue;
    if (c->qlin) {
      p->n_qnodes++;
      continue;
    }
    int q = c->part;
    if (xn[c->qdq].part != q || xn[c->qquant].part != q || (c->qact >= 0 && xn[c->qact].part != q) ||
        (c->qpool >= 0 && xn[c->qpool].part != q) || (c->qreshape >= 0 && xn[c->qreshape].part != q)) {
      clear_cluster(c); /* split apart: the float convolution computes the same */
      continue;
    }
    int qout = g->nodes[c->qquant].outputs[0];
    if (c->qact >= 0) {
      xn[c->qact].fused_into = i;
      c->has_clamp = 1;
      c->out_min = xn[c->qact].out_min;
      c->out_max = xn[c->qact].out_max;
    }
    /* conv -> [act] -> [MaxPool] -> [Reshape] -> Q: the conv writes its (clamped) output quantized
     * with Q's parameters, the max pooling and reshape run on int8, the last writes Q's output */
    int writer = i, z = c->qact >= 0 ? g->nodes[c->qact].outputs[0] : g->nodes[i].outputs[0];
    c->fused_act = c->qact;
    int chain[2] = {c->qpool, c->qreshape};
    for (int k = 0; k < 2; k++) {
      if (chain[k] < 0) continue;
      p->vq[z] = p->vq[qout];
      p->vq[z].flip = 0;
      writer = chain[k];
      z = g->nodes[writer].outputs[0];
      p->n_qother++;
    }
    xn[writer].fused_act = c->qquant;
    xn[c->qquant].fused_into = writer;
    p->n_qnodes++;
  }
  /* a DequantizeLinear read only by quantized nodes of its partition is not computed */
  for (int d = 0; d < g->n_nodes; d++) {
    if (xn[d].kind != XK_DEQUANT || xn[d].part < 0 || xn[d].fused_into >= 0) continue;
    int v = g->nodes[d].outputs[0], all = !u->is_out[v] && u->off[v + 1] > u->off[v];
    for (int j = u->off[v]; j < u->off[v + 1] && all; j++) {
      const xrt_node *r = &xn[u->list[j]];
      all = ((r->q || r->qpass) && !r->qlin && r->qdq == d && r->part == xn[d].part) ||
            (r->qadd && (r->qdq == d || r->qdq2 == d) && r->part == xn[d].part);
    }
    if (all) xn[d].fused_into = u->list[u->off[v]];
  }
}

/* ---- quantized weights -------------------------------------------------------------------------- */
void alma__xrt_qstatic_free(xrt_qstatic *s) {
  free(s->w);
  free(s->b);
  free(s->ws);
  free(s->bs);
  memset(s, 0, sizeof *s);
}

alma_status alma__xrt_prepare_qstatics(xrt_plan *p, int node) {
  xrt_node *xn = &p->xn[node];
  const alma_node *n = &p->g->nodes[node];
  xrt_qstatic *s = &xn->qw;
  qdesc d;
  if (!qdesc_make(p, node, &d)) return alma__op_error(n, ALMA_ERR_INTERNAL, "quantized node lost its parameters");
  const alma_tensor *W = d.W;
  size_t O = (size_t)d.chans, KH = 1, KW = 1, I;
  if (xn->flatten_perm && (!d.fc || (int64_t)W->dims[d.trans ? 1 : 0] != xn->flat_c * xn->flat_hw))
    return alma__op_error(n, ALMA_ERR_INTERNAL, "flattened size is not the weights' K");
  if (d.fc) {
    I = (size_t)W->dims[d.trans ? 1 : 0];
    s->rank = 4, s->dims[0] = O, s->dims[1] = s->dims[2] = 1, s->dims[3] = I;
  } else {
    I = (size_t)W->dims[1], KH = (size_t)W->dims[2], KW = (size_t)W->dims[3];
    s->rank = 4;
    if (xn->kind == XK_DWCONV) s->dims[0] = 1, s->dims[1] = KH, s->dims[2] = KW, s->dims[3] = O;
    else s->dims[0] = O, s->dims[1] = KH, s->dims[2] = KW, s->dims[3] = I;
  }
  s->chans = O;
  size_t nw = O * KH * KW * I;
  void *wp = NULL;
  if (posix_memalign(&wp, 64, nw + XNN_EXTRA_BYTES)) wp = NULL;
  s->w = wp;
  s->ws = malloc(sizeof(float) * O);
  s->bs = malloc(sizeof(float) * O);
  if (d.Bq || d.Bf) s->b = malloc(sizeof(int32_t) * O + XNN_EXTRA_BYTES);
  if (!s->w || !s->ws || !s->bs || ((d.Bq || d.Bf) && !s->b)) return alma__op_error(n, ALMA_ERR_NOMEM, "quantized weights");
  memset(s->w, 0, nw + XNN_EXTRA_BYTES);
  int u8 = xn->q == XQ_U8, s8src = W->dtype == ALMA_DTYPE_INT8;
  if (u8) {
    /* one scale and zero point; int8 weights move to uint8 (+128, the same values) */
    s->ws1 = ws_at(&d, 0);
    s->wzp = wzp_at(&d, 0) + (s8src ? 128 : 0);
  }
  int8_t *w8 = s->w;
  uint8_t *wu = s->w;
  for (size_t o = 0; o < O; o++)
    for (size_t h = 0; h < KH; h++)
      for (size_t x = 0; x < KW; x++)
        for (size_t i = 0; i < I; i++) {
          size_t src, dst;
          if (d.fc) src = d.trans ? o * I + i : i * O + o;
          else src = ((o * I + i) * KH + h) * KW + x; /* depthwise: I == 1 */
          dst = xn->kind == XK_DWCONV ? (h * KW + x) * O + o : ((o * KH + h) * KW + x) * I + i;
          if (xn->flatten_perm) {
            /* after a Flatten of NHWC data, input column i = c*HW + hw reads NHWC position hw*C + c */
            size_t fc = (size_t)xn->flat_c, fhw = (size_t)xn->flat_hw;
            dst = o * I + (i % fhw) * fc + i / fhw;
          }
          int32_t v = get_i(W, (int64_t)src);
          if (u8) wu[dst] = (uint8_t)(v + (s8src ? 128 : 0));
          else w8[dst] = (int8_t)(v - wzp_at(&d, (int64_t)o));
        }
  for (size_t o = 0; o < O; o++) {
    float ws = u8 ? s->ws1 : ws_at(&d, (int64_t)o);
    s->ws[o] = ws;
    /* the accumulator's unit: XNNPACK adds the int32 bias as is */
    float unit = d.xs * ws;
    s->bs[o] = unit;
    if (!s->b) continue;
    double q;
    if (d.Bq && !d.bs) {
      q = get_i(d.Bq, (int64_t)o); /* QLinearConv: in that unit by definition */
    } else if (d.Bq) {
      /* INT8_STATIC writes the bias in that unit; another scale is requantized (within half a unit) */
      int32_t bq = get_i(d.Bq, (int64_t)o);
      float bsc = ((const float *)d.bs->data)[alma_tensor_numel(d.bs) == 1 ? 0 : o];
      q = fabsf(bsc - unit) <= 1e-6f * unit ? bq : nearbyint((double)bq * bsc / unit);
    } else {
      q = nearbyint((double)((const float *)d.Bf->data)[o] / unit);
    }
    if (!(q >= -2147483647.0)) q = q != q ? 0 : -2147483647.0;
    if (q > 2147483647.0) q = 2147483647.0;
    s->b[o] = (int32_t)q;
  }
  return ALMA_OK;
}

#endif
