/* DNNL runtime, int8: the classification of the quantization operators, the compile-time search for
 * QDQ clusters and their quantization parameters, and describe() / free. */
#ifdef ALMA_HAVE_DNNL

#include <math.h>

#include "runtimes/dnnl/dnnl_int8.h"

static int has_vnni(void) {
  int isa = (int)dnnl_get_effective_cpu_isa();
  return (isa & 0x40) != 0 || (isa & 0x400) != 0; /* avx512_core_vnni (and above), avx2_vnni */
}

dn_qstate *alma__dn_qstate(dn_plan *p) {
  if (p->q) return p->q;
  dn_qstate *S = calloc(1, sizeof *S);
  if (!S) return NULL;
  S->hint = malloc(sizeof(int) * ((size_t)p->g->n_nodes + 1));
  S->nprim = calloc((size_t)p->g->n_nodes + 1, sizeof *S->nprim);
  if (!S->hint || !S->nprim) {
    free(S->hint);
    free(S->nprim);
    free(S);
    return NULL;
  }
  for (int i = 0; i < p->g->n_nodes; i++) S->hint[i] = -1;
  S->run_id = -1;
  int vnni = has_vnni();
  const dn_opts *o = &p->opt;
  S->conv_s8 = vnni || o->int8_conv_src == DN_SRC_U8 ? 0 : o->int8_conv_src == DN_SRC_S8 ? 1 : 2;
  S->mm_off = !vnni && !o->int8_matmul;
  S->off = o->int8 == DN_INT8_OFF;
  S->fallback = o->int8 == DN_INT8_FALLBACK;
  S->move_off = !o->int8_move;
  S->dw_off = !o->dw_fuse;
  p->q = S;
  return S;
}

/* Constant scalar scale (float32, one element, positive and finite). */
static int const_scale(const alma_graph *g, int v, float *s) {
  const alma_tensor *t = v >= 0 ? alma__dn_const(g, v) : NULL;
  if (!t || t->dtype != F32 || alma_tensor_numel(t) != 1) return 0;
  *s = *(const float *)t->data;
  return *s > 0 && isfinite(*s);
}

/* Constant scalar zero point of an 8-bit type; absent: uint8 0 (or dflt when known). */
static int const_zp(const alma_graph *g, const alma_node *n, int k, int32_t *zp, alma_dtype *dt, alma_dtype dflt) {
  *zp = 0;
  *dt = dflt;
  if (n->n_inputs <= k || n->inputs[k] < 0) return 1;
  const alma_tensor *t = alma__dn_const(g, n->inputs[k]);
  if (!t || alma_tensor_numel(t) != 1 || !alma__dn_q_is_q8(t->dtype)) return 0;
  *dt = t->dtype;
  *zp = t->dtype == U8 ? *(const uint8_t *)t->data : *(const int8_t *)t->data;
  return 1;
}

/* Per-tensor Quantize/DequantizeLinear with constant parameters (opset 21's blocks excluded). */
static int qdq_params(const alma_graph *g, const alma_node *n, float *s, int32_t *zp, alma_dtype *dt) {
  if (n->n_inputs < 2 || alma__attr_i(n, "block_size", 0) != 0 || !const_scale(g, n->inputs[1], s)) return 0;
  alma_dtype dflt = ALMA_DTYPE_UNDEFINED;
  if (alma__dn_is_op(n, "QuantizeLinear")) {
    int64_t od = alma__attr_i(n, "output_dtype", 0);
    dflt = od ? (alma_dtype)od : U8;
  }
  if (!const_zp(g, n, 2, zp, dt, dflt)) return 0;
  return *dt == ALMA_DTYPE_UNDEFINED || alma__dn_q_is_q8(*dt);
}

const alma_node *alma__dn_q_producer(const alma_graph *g, int v) {
  if (v < 0 || v >= g->n_values) return NULL;
  int pi = g->values[v].producer;
  return pi >= 0 && pi < g->n_nodes ? &g->nodes[pi] : NULL;
}

/* ---- classification of the quantization operators ------------------------------------------------- */
int alma__dn_q_classify(const alma_graph *g, const alma_node *n, dn_node *d, const char **why) {
  if (n->domain[0]) return -1;
  int q = alma__dn_is_op(n, "QuantizeLinear"), dq = alma__dn_is_op(n, "DequantizeLinear");
  if (q || dq) {
    if (n->n_inputs < 2 || alma__attr_i(n, "block_size", 0) != 0) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "blocked quantization");
    }
    if (q && alma__attr_i(n, "saturate", 1) == 0) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "saturate = 0");
    }
    return DK_QDQ; /* types and per-axis zero points are checked when it runs */
  }
  if (alma__dn_is_op(n, "QLinearConv") || alma__dn_is_op(n, "QLinearMatMul") || alma__dn_is_op(n, "ConvInteger") || alma__dn_is_op(n, "MatMulInteger"))
    return DK_QLINEAR;
  if (alma__dn_is_op(n, "DynamicQuantizeLinear")) return DK_QDQ; /* run_dynq */
  (void)g;
  return -1;
}

/* ---- compile: the clusters ----------------------------------------------------------------------------- */
static const alma_node *dq_of(const alma_graph *g, int v) {
  const alma_node *d = alma__dn_q_producer(g, v);
  return d && alma__dn_is_op(d, "DequantizeLinear") ? d : NULL;
}

/* Weights W (int8 constant, or QuantizeLinear of a float constant to int8 computed here) behind
 * DequantizeLinear dq, scales per tensor or along oc_axis of W, zero points all 0. */
static int match_weights(const alma_graph *g, const alma_node *dq, int oc_axis, qclu *c) {
  if (dq->n_inputs < 2 || alma__attr_i(dq, "block_size", 0) != 0) return 0;
  const alma_tensor *W = alma__dn_const(g, dq->inputs[0]);
  const alma_node *qn = NULL;
  if (!W) { /* PyTorch QAT: QuantizeLinear(float W, s, zp) -> DequantizeLinear */
    qn = alma__dn_q_producer(g, dq->inputs[0]);
    if (!qn || !alma__dn_is_op(qn, "QuantizeLinear") || qn->n_inputs < 3 || alma__attr_i(qn, "block_size", 0) != 0) return 0;
    W = alma__dn_const(g, qn->inputs[0]);
    if (!W || W->dtype != F32) return 0;
  } else if (W->dtype != S8) {
    return 0;
  }
  if (W->rank < 2 || W->rank > ALMA_MAX_RANK || oc_axis >= W->rank) return 0;
  int64_t OC = W->dims[oc_axis];
  const alma_tensor *sc = alma__dn_const(g, dq->inputs[1]);
  if (!sc || sc->dtype != F32) return 0;
  int64_t ns = alma_tensor_numel(sc);
  int axis = (int)alma__attr_i(dq, "axis", 1);
  if (axis < 0) axis += W->rank;
  if (ns != 1 && (ns != OC || axis != oc_axis)) return 0;
  const float *sv = sc->data;
  for (int64_t k = 0; k < ns; k++)
    if (!(sv[k] > 0) || !isfinite(sv[k])) return 0;
  if (dq->n_inputs > 2 && dq->inputs[2] >= 0) { /* zero points: int8 zeros */
    const alma_tensor *z = alma__dn_const(g, dq->inputs[2]);
    if (!z || z->dtype != S8) return 0;
    for (int64_t k = 0; k < alma_tensor_numel(z); k++)
      if (((const int8_t *)z->data)[k]) return 0;
  }
  int64_t nw = alma_tensor_numel(W);
  if (qn) { /* quantize the float weights as QuantizeLinear does: saturate(round(w / s) + zp) */
    const alma_tensor *qs = alma__dn_const(g, qn->inputs[1]), *qz = alma__dn_const(g, qn->inputs[2]);
    if (!qs || qs->dtype != F32 || !qz || qz->dtype != S8) return 0;
    int64_t nqs = alma_tensor_numel(qs), nqz = alma_tensor_numel(qz);
    int qaxis = (int)alma__attr_i(qn, "axis", 1);
    if (qaxis < 0) qaxis += W->rank;
    if ((nqs != 1 && (nqs != W->dims[qaxis])) || (nqz != 1 && nqz != nqs) || qaxis < 0 || qaxis >= W->rank) return 0;
    int64_t inner = alma__numel(W->rank - qaxis - 1, W->dims + qaxis + 1), dim = W->dims[qaxis];
    if (!(c->w_own = malloc((size_t)nw))) return 0;
    for (int64_t i = 0; i < nw; i++) {
      int64_t ch = nqs == 1 ? 0 : (i / inner) % dim;
      float s = ((const float *)qs->data)[ch];
      int zp = ((const int8_t *)qz->data)[nqz == 1 ? 0 : ch];
      float v = rintf(((const float *)W->data)[i] / s) + (float)zp;
      v = v < -128.0f ? -128.0f : v > 127.0f ? 127.0f : v;
      if (v != v) v = (float)zp;
      c->w_own[i] = (int8_t)v;
    }
    c->w = c->w_own;
  } else {
    c->w = W->data;
  }
  c->wrank = W->rank;
  memcpy(c->wdims, W->dims, sizeof(int64_t) * (size_t)W->rank);
  if (!(c->ws = malloc(sizeof(float) * (size_t)ns))) return 0;
  memcpy(c->ws, sv, sizeof(float) * (size_t)ns);
  c->nws = ns;
  return 1;
}

/* Bias input v of Conv/Gemm: DequantizeLinear(int32 constant, scale, 0) or a float constant, OC values. */
static int match_bias(const alma_graph *g, int v, int64_t OC, qclu *c) {
  const alma_node *dq = dq_of(g, v);
  if (dq) {
    const alma_tensor *B = alma__dn_const(g, dq->inputs[0]);
    const alma_tensor *sc = dq->n_inputs > 1 ? alma__dn_const(g, dq->inputs[1]) : NULL;
    if (!B || B->dtype != S32 || alma_tensor_numel(B) != OC || !sc || sc->dtype != F32 ||
        alma__attr_i(dq, "block_size", 0) != 0)
      return 0;
    int64_t ns = alma_tensor_numel(sc);
    if (ns != 1 && ns != OC) return 0;
    if (dq->n_inputs > 2 && dq->inputs[2] >= 0) {
      const alma_tensor *z = alma__dn_const(g, dq->inputs[2]);
      if (!z || z->dtype != S32) return 0;
      for (int64_t k = 0; k < alma_tensor_numel(z); k++)
        if (((const int32_t *)z->data)[k]) return 0;
    }
    const int32_t *bv = B->data;
    const float *sv = sc->data;
    /* when the bias scale is x_scale * w_scale (as the spec asks and quantizers write), the int32
     * values are the accumulator units themselves: exact */
    int exact = 1;
    for (int64_t k = 0; k < OC && exact; k++)
      exact = sv[ns == 1 ? 0 : k] == c->xs * c->ws[c->nws == 1 ? 0 : k];
    if (exact) {
      if (!(c->bq = malloc(sizeof(int32_t) * (size_t)OC))) return 0;
      memcpy(c->bq, bv, sizeof(int32_t) * (size_t)OC);
    } else {
      if (!(c->bf = malloc(sizeof(float) * (size_t)OC))) return 0;
      for (int64_t k = 0; k < OC; k++) c->bf[k] = (float)bv[k] * sv[ns == 1 ? 0 : k];
    }
    c->dq_b = (int)(dq - g->nodes);
    return 1;
  }
  const alma_tensor *B = alma__dn_const(g, v);
  if (!B || B->dtype != F32 || alma_tensor_numel(B) != OC || (B->rank == 2 && B->dims[0] != 1) || B->rank > 2) return 0;
  if (!(c->bf = malloc(sizeof(float) * (size_t)OC))) return 0;
  memcpy(c->bf, B->data, sizeof(float) * (size_t)OC);
  return 1;
}

static void clu_free(qclu *c) {
  free(c->w_own);
  free(c->ws);
  free(c->bq);
  free(c->bf);
  free(c->wf);
  free(c->wsplit);
  alma__dn_qprim_free(&c->pr);
  alma__dn_qprim_free(&c->prdw);
  alma__dn_qprim_free(&c->pr2);
}

/* A float32 constant that multiplies or adds along the output channels only: out[OC] gets its
 * values (one value: broadcast). R: the output's rank with the channels on axis 1 (convolutions),
 * or 0 for a matmul (channels last, rank >= 2 unknown here, so the constant has rank <= 2). Either
 * the constant itself or, as ONNX Runtime writes Conv biases, Reshape(constant, constant shape). */
static int chan_const(const alma_graph *g, int v, int R, int64_t OC, float *out) {
  const alma_tensor *t = alma__dn_const(g, v);
  int64_t dims[ALMA_MAX_RANK];
  int rank;
  if (t) {
    rank = t->rank;
    memcpy(dims, t->dims, sizeof(int64_t) * (size_t)rank);
  } else {
    const alma_node *r = alma__dn_q_producer(g, v);
    if (!r || !alma__dn_is_op(r, "Reshape") || r->n_inputs < 2 || alma__attr_i(r, "allowzero", 0)) return 0;
    const alma_tensor *sh = alma__dn_const(g, r->inputs[1]);
    t = alma__dn_const(g, r->inputs[0]);
    if (!t || !sh || sh->dtype != ALMA_DTYPE_INT64 || sh->rank != 1 || sh->dims[0] > ALMA_MAX_RANK) return 0;
    rank = (int)sh->dims[0];
    int64_t known = 1, cnt = alma_tensor_numel(t);
    int neg = -1;
    for (int k = 0; k < rank; k++) {
      int64_t d = ((const int64_t *)sh->data)[k];
      if (d == -1 && neg < 0) neg = k, d = 1;
      else if (d <= 0) return 0; /* (0 copies an input dimension: not this form) */
      dims[k] = d;
      known *= d;
    }
    if (neg >= 0 && known > 0 && cnt % known == 0) dims[neg] = cnt / known;
    else if (neg >= 0 || known != cnt) return 0;
  }
  if (t->dtype != F32 || rank > (R ? R : 2)) return 0;
  int64_t cnt = alma_tensor_numel(t);
  const float *d = t->data;
  if (cnt == 1) {
    for (int64_t c = 0; c < OC; c++) out[c] = d[0];
    return 1;
  }
  if (cnt != OC) return 0;
  for (int k = 0; k < rank; k++) { /* aligned to the output's last axes */
    int chan = R ? R - rank + k == 1 : k == rank - 1;
    if (dims[k] != 1 && !chan) return 0;
  }
  memcpy(out, d, sizeof(float) * (size_t)OC);
  return 1;
}

/* The INT8_DYNAMIC form, as alma's pass and ONNX Runtime's dynamic quantizer write it, anchored at
 * ConvInteger / MatMulInteger node i:
 *   x -> DynamicQuantizeLinear -> (xq, xs, xzp)
 *   ConvInteger | MatMulInteger(xq, W constant, xzp [, W zero point constant]) -> Cast(float)
 *     -> Mul(xs * C) | Mul(xs) -> Mul(C) | Mul(C) -> Mul(xs)   (C: constants along the channels)
 *     [-> Add(constant bias along the channels)]
 * W becomes s8 (W - its zero point, which must fit: INT8_DYNAMIC's uint8 q + 128 with 128, ONNX
 * Runtime's int8 with 0) and the scales C the per-channel output scales; xs and xzp are read when
 * the cluster runs. A Mul(xs, C) read only here (after the anchor) becomes a member. *vout: the
 * chain's last value, where the generic post-op chain goes on. */
static int match_dyn(dn_plan *p, int i, const int *consumer, qclu *c, int *vout) {
  const alma_graph *g = p->g;
  const alma_node *n = &g->nodes[i];
  int conv = alma__dn_is_op(n, "ConvInteger");
  if (n->n_inputs < 3 || n->n_outputs != 1 || n->outputs[0] < 0 || n->inputs[0] < 0 || n->inputs[2] < 0) return 0;
  const alma_node *dq = alma__dn_q_producer(g, n->inputs[0]);
  if (!dq || !alma__dn_is_op(dq, "DynamicQuantizeLinear") || dq->n_outputs < 3 || dq->outputs[0] != n->inputs[0] ||
      dq->outputs[1] < 0 || dq->outputs[2] != n->inputs[2] || dq->n_inputs < 1 || dq->inputs[0] < 0)
    return 0;
  const alma_tensor *W = alma__dn_const(g, n->inputs[1]);
  if (!W || !alma__dn_q_is_q8(W->dtype) || W->rank < (conv ? 3 : 2) || W->rank > (conv ? 5 : ALMA_MAX_RANK)) return 0;
  int64_t OC = W->dims[conv ? 0 : W->rank - 1], nw = alma_tensor_numel(W);
  const alma_tensor *Z = n->n_inputs > 3 && n->inputs[3] >= 0 ? alma__dn_const(g, n->inputs[3]) : NULL;
  if (n->n_inputs > 3 && n->inputs[3] >= 0 && (!Z || Z->dtype != W->dtype)) return 0;
  int64_t nz = Z ? alma_tensor_numel(Z) : 1;
  if (OC < 1 || (nz != 1 && (nz != OC || (!conv && W->rank > 2) || Z->dims[Z->rank - 1] != OC))) return 0;
  c->kind = conv ? QK_CONV : QK_MATMUL;
  c->dyn = 1;
  c->xv = n->inputs[0];
  c->xdt = U8;
  c->xs_v = dq->outputs[1];
  c->xzp_v = dq->outputs[2];
  c->dq_x = c->dq_w = -1;
  float *tmp = malloc(sizeof(float) * (size_t)OC);
  c->w_own = malloc((size_t)nw);
  c->ws = malloc(sizeof(float) * (size_t)OC);
  if (!tmp || !c->w_own || !c->ws) goto no;
  int64_t inner = conv ? nw / OC : 1, wmax = 0;
  for (int64_t k = 0; k < nw; k++) { /* W - zero point as s8 */
    int64_t ch = nz == 1 ? 0 : conv ? k / inner : k % OC;
    int32_t wv = W->dtype == U8 ? ((const uint8_t *)W->data)[k] : ((const int8_t *)W->data)[k];
    int32_t zv = !Z ? 0 : Z->dtype == U8 ? ((const uint8_t *)Z->data)[ch] : ((const int8_t *)Z->data)[ch];
    int32_t d = wv - zv;
    if (d < -128 || d > 127) goto no;
    c->w_own[k] = (int8_t)d;
    if (d < 0) d = -d;
    if (d > wmax) wmax = d;
  }
  c->w = c->w_own;
  c->wrank = W->rank;
  memcpy(c->wdims, W->dims, sizeof(int64_t) * (size_t)W->rank);
  c->w7 = wmax <= 64; /* 255 * 64 * 2 < 32767: oneDNN's u8 x s8 pairs cannot saturate */
  c->nws = OC;
  for (int64_t k = 0; k < OC; k++) c->ws[k] = 1.0f;
  c->mem[c->nmem++] = i;
  int v = n->outputs[0], R = conv ? W->rank : 0;
  /* Cast to float */
  if (p->static_uses[v] != 1 || consumer[v] < 0) goto no;
  const alma_node *cn = &g->nodes[consumer[v]];
  if (!alma__dn_is_op(cn, "Cast") || alma__attr_i(cn, "to", 0) != ALMA_DTYPE_FLOAT32 || cn->n_outputs != 1 || cn->outputs[0] < 0 ||
      p->nodes[consumer[v]].q_role)
    goto no;
  c->mem[c->nmem++] = consumer[v];
  v = cn->outputs[0];
  /* the scales: xs once, constants along the channels, in one or two Muls */
  int nxs = 0;
  for (int nmul = 0; nmul < 2 && c->nmem < DN_MAX_MEMBERS - 1; nmul++) {
    if (p->static_uses[v] != 1 || consumer[v] < 0) break;
    int mi = consumer[v], sm = -1;
    const alma_node *mn = &g->nodes[mi];
    if (!alma__dn_is_op(mn, "Mul") || mn->n_inputs != 2 || mn->n_outputs != 1 || mn->outputs[0] < 0 || p->nodes[mi].q_role ||
        mn->inputs[0] == mn->inputs[1])
      break;
    int other = mn->inputs[0] == v ? mn->inputs[1] : mn->inputs[0];
    if (other == c->xs_v) {
      if (nxs++) break;
    } else if (chan_const(g, other, R, OC, tmp)) {
      for (int64_t k = 0; k < OC; k++) c->ws[k] *= tmp[k];
    } else {
      const alma_node *pm = alma__dn_q_producer(g, other);
      int cv = !pm || !alma__dn_is_op(pm, "Mul") || pm->n_inputs != 2 ? -1
               : pm->inputs[0] == c->xs_v                   ? pm->inputs[1]
               : pm->inputs[1] == c->xs_v                   ? pm->inputs[0]
                                                            : -1;
      if (cv < 0 || nxs || !chan_const(g, cv, R, OC, tmp)) break;
      nxs++;
      for (int64_t k = 0; k < OC; k++) c->ws[k] *= tmp[k];
      int pmi = (int)(pm - g->nodes);
      if (p->static_uses[other] == 1 && pmi > i && !p->nodes[pmi].q_role) sm = pmi;
    }
    if (sm >= 0) c->mem[c->nmem++] = sm;
    c->mem[c->nmem++] = mi;
    v = mn->outputs[0];
  }
  if (nxs != 1) goto no;
  for (int64_t k = 0; k < OC; k++) /* (the bias is divided by them) */
    if (!(c->ws[k] != 0) || !isfinite(c->ws[k])) goto no;
  /* a constant bias */
  if (p->static_uses[v] == 1 && consumer[v] >= 0 && c->nmem < DN_MAX_MEMBERS) {
    const alma_node *an = &g->nodes[consumer[v]];
    int other = an->n_inputs == 2 ? (an->inputs[0] == v ? an->inputs[1] : an->inputs[0]) : -1;
    if (alma__dn_is_op(an, "Add") && an->since_version >= 7 && an->n_outputs == 1 && an->outputs[0] >= 0 && other != v && other >= 0 &&
        !p->nodes[consumer[v]].q_role && chan_const(g, other, R, OC, tmp)) {
      if (!(c->bf = malloc(sizeof(float) * (size_t)OC))) goto no;
      memcpy(c->bf, tmp, sizeof(float) * (size_t)OC);
      c->mem[c->nmem++] = consumer[v];
      v = an->outputs[0];
    }
  }
  /* no exact int8 matmul on this CPU for 8-bit weights (see the top comment): float32 on the
   * dequantized values, or (dnnl.int8_dyn_matmul=split) two 7-bit halves W_hi = floor(W / 2)
   * and W_lo = W - W_hi (both within [-64, 64]) stacked along K times the source repeated,
   * [x, x] * [W_hi; W_lo] = x * W, one exact u8 matmul of twice the depth: measured slower than
   * float32 on the AVX2 machine (docs/quantization.md) */
  if (!conv && p->q->mm_off && !c->w7) {
    c->split = W->rank == 2 && p->opt.int8_dyn_split;
    c->emu = !c->split;
  }
  /* oneDNN 2.6's int8 depthwise convolutions apply binary post-ops (this run's x_scale) wrongly to
   * a last, partial block of channels (measured on AVX2: 10 and 12 channels; 16 are right): such
   * convolutions run in float32 on the dequantized values */
  int64_t G = conv ? alma__attr_i(n, "group", 1) : 1;
  if (conv && G > 1 && W->dims[1] == 1 && (G % 16 || OC % 16)) c->emu = 1;
  if (c->emu) {
    if (!(c->wf = malloc(sizeof(float) * (size_t)nw))) goto no;
    for (int64_t k = 0; k < nw; k++) c->wf[k] = (float)c->w_own[k] * c->ws[conv ? k / inner : k % OC];
  }
  if (c->split) {
    if (!(c->wsplit = malloc(2 * (size_t)nw))) goto no;
    for (int64_t k = 0; k < nw; k++) {
      int v = c->w_own[k], hi = v >= 0 ? v / 2 : -((1 - v) / 2); /* floor(v / 2) */
      c->wsplit[k] = (int8_t)hi;
      c->wsplit[nw + k] = (int8_t)(c->w_own[k] - hi);
    }
  }
  free(tmp);
  *vout = v;
  return 1;
no:
  free(tmp);
  return 0;
}

/* QK_MOVE: DequantizeLinear(x) -> MaxPool | Flatten | Reshape -> QuantizeLinear with the same
 * scale, zero point and type (INT8_STATIC's and ONNX Runtime's QDQ form). Max commutes with a
 * monotone quantization and the views only move elements, so the QuantizeLinear's output is the
 * op applied to x's 8-bit values: the node runs once on them (alma__dn_run_pool's uint8/int8 max pooling in
 * x's layout, alma__dn_run_view's alias of x made plain) and both conversions through float32 go. */
static int match_move(dn_plan *p, int i, const int *consumer, qclu *c) {
  const alma_graph *g = p->g;
  const alma_node *n = &g->nodes[i];
  const alma_node *dx = n->n_inputs >= 1 ? dq_of(g, n->inputs[0]) : NULL;
  int pool = alma__dn_is_op(n, "MaxPool");
  if (!dx || dx->inputs[0] < 0 || n->n_outputs < 1 || n->outputs[0] < 0 || !qdq_params(g, dx, &c->xs, &c->xzp, &c->xdt))
    return 0;
  if (p->nodes[i].kind != (pool ? DK_POOL : DK_VIEW)) return 0;
  if (pool && n->n_outputs > 1 && n->outputs[1] >= 0) return 0; /* Indices */
  if (alma__dn_is_op(n, "Reshape") && (n->n_inputs != 2 || !alma__dn_const(g, n->inputs[1]))) return 0;
  int v = n->outputs[0];
  if (p->static_uses[v] != 1 || consumer[v] < 0) return 0;
  int ci = consumer[v];
  const alma_node *qn = &g->nodes[ci];
  if (!alma__dn_is_op(qn, "QuantizeLinear") || qn->inputs[0] != v || qn->n_outputs != 1 || qn->outputs[0] < 0 ||
      p->nodes[ci].q_role || !qdq_params(g, qn, &c->ys, &c->yzp, &c->ydt))
    return 0;
  /* the same parameters on both sides (a DequantizeLinear without a zero point is checked against
   * the type when it runs) */
  if (c->ys != c->xs || c->yzp != c->xzp || !alma__dn_q_is_q8(c->ydt) || (c->xdt && c->xdt != c->ydt)) return 0;
  c->kind = QK_MOVE;
  c->xv = dx->inputs[0];
  c->dq_x = (int)(dx - g->nodes);
  c->dq_w = -1;
  c->yq = 1;
  c->mem[c->nmem++] = i;
  c->mem[c->nmem++] = ci;
  c->outv = qn->outputs[0];
  c->last = ci;
  return 1;
}

/* Node i as the anchor of a cluster: fills c (members: the anchor and its post chain). */
static int match_cluster(dn_plan *p, int i, const int *consumer, qclu *c) {
  const alma_graph *g = p->g;
  const alma_node *n = &g->nodes[i];
  memset(c, 0, sizeof *c);
  c->dq_b = -1;
  c->sum_other = -1;
  c->anchor = i;
  c->x2v = -1;
  int kind = 0, v;
  int64_t OC = 0;
  if (alma__dn_is_op(n, "ConvInteger") || alma__dn_is_op(n, "MatMulInteger")) {
    if (!match_dyn(p, i, consumer, c, &v)) goto no;
    kind = c->kind;
    OC = c->nws;
    goto chain;
  }
  if (alma__dn_is_op(n, "MaxPool") || alma__dn_is_op(n, "Flatten") || alma__dn_is_op(n, "Reshape")) return !p->q->move_off && match_move(p, i, consumer, c);
  if (alma__dn_is_op(n, "Add")) { /* DequantizeLinear(a) + DequantizeLinear(b): an int8 binary primitive */
    const alma_node *da = n->n_inputs == 2 ? dq_of(g, n->inputs[0]) : NULL;
    const alma_node *db = n->n_inputs == 2 ? dq_of(g, n->inputs[1]) : NULL;
    if (!da || !db || n->since_version < 7 || n->n_outputs != 1 || n->outputs[0] < 0 || da->inputs[0] < 0 ||
        db->inputs[0] < 0 || !qdq_params(g, da, &c->xs, &c->xzp, &c->xdt) || !qdq_params(g, db, &c->x2s, &c->x2zp, &c->x2dt))
      return 0;
    c->kind = QK_ADD;
    c->xv = da->inputs[0];
    c->dq_x = (int)(da - g->nodes);
    c->x2v = db->inputs[0];
    c->dq_w = (int)(db - g->nodes);
    goto post;
  }
  kind = alma__dn_is_op(n, "Conv") ? QK_CONV : alma__dn_is_op(n, "MatMul") ? QK_MATMUL : alma__dn_is_op(n, "Gemm") ? QK_GEMM : 0;
  if (!kind || n->n_inputs < 2 || n->n_outputs != 1 || n->outputs[0] < 0) return 0;
  if (kind != QK_CONV && p->q->mm_off) return 0; /* the float path keeps its own fusion */
  if (kind == QK_GEMM && (alma__attr_i(n, "transA", 0) || alma__attr_f(n, "alpha", 1.0f) != 1.0f ||
                          alma__attr_f(n, "beta", 1.0f) != 1.0f || n->since_version < 7))
    return 0;
  c->kind = kind;
  c->transb = kind == QK_GEMM && alma__attr_i(n, "transB", 0) != 0;
  const alma_node *dx = dq_of(g, n->inputs[0]), *dw = dq_of(g, n->inputs[1]);
  if (!dx || !dw || dx->n_inputs < 2 || dx->inputs[0] < 0) return 0;
  if (!qdq_params(g, dx, &c->xs, &c->xzp, &c->xdt)) return 0;
  c->xv = dx->inputs[0];
  c->dq_x = (int)(dx - g->nodes);
  c->dq_w = (int)(dw - g->nodes);
  int oc_axis = kind == QK_CONV ? 0 : c->transb ? 0 : 1;
  if (!match_weights(g, dw, oc_axis, c)) goto no;
  if (kind == QK_MATMUL && c->wrank != 2) goto no;
  OC = c->wdims[oc_axis];
  if (n->n_inputs > 2 && n->inputs[2] >= 0 && !match_bias(g, n->inputs[2], OC, c)) goto no;
  /* the post chain: single-consumer values through eltwise nodes, one Add, a QuantizeLinear */
post:
  c->mem[c->nmem++] = i;
  v = n->outputs[0];
chain:
  while (c->nmem < DN_MAX_MEMBERS) {
    if (p->static_uses[v] != 1 || consumer[v] < 0) break;
    int ci = consumer[v];
    const alma_node *cn = &g->nodes[ci];
    if (cn->n_outputs != 1 || cn->outputs[0] < 0 || p->nodes[ci].q_role) break;
    dn_elt e[DN_MAX_ELT];
    int ne = 0;
    if (alma__dn_is_op(cn, "QuantizeLinear")) {
      if (c->sum_other >= 0 || cn->inputs[0] != v || c->dyn) break; /* a sum needs a float destination */
      alma_dtype ydt;
      if (!qdq_params(g, cn, &c->ys, &c->yzp, &ydt) || !alma__dn_q_is_q8(ydt)) break;
      c->yq = 1;
      c->ydt = ydt;
      c->mem[c->nmem++] = ci;
      v = cn->outputs[0];
      break;
    }
    if ((ne = alma__dn_eltwise_steps(g, cn, e)) > 0 && cn->inputs[0] == v) {
      if (c->n_elt + ne > Q_MAX_ELT) break;
      memcpy(&c->elt[c->n_elt], e, sizeof(dn_elt) * (size_t)ne);
      c->n_elt += ne;
    } else if (c->kind != QK_ADD && alma__dn_is_op(cn, "Add") && cn->n_inputs == 2 && c->sum_other < 0 && cn->since_version >= 7) {
      int other = cn->inputs[0] == v ? cn->inputs[1] : cn->inputs[0];
      if (other == v || other < 0) break;
      const alma_tensor *ct = alma__dn_const(g, other);
      if (ct) { /* a MatMul's bias as a constant Add (PyTorch's Linear on 3-D inputs, ORT's QDQ MatMul) */
        if (kind != QK_MATMUL || c->nmem != 1 || c->bq || c->bf || ct->dtype != F32 || alma_tensor_numel(ct) != OC ||
            ct->rank < 1 || ct->dims[ct->rank - 1] != OC)
          break;
        if (!(c->bf = malloc(sizeof(float) * (size_t)OC))) break;
        memcpy(c->bf, ct->data, sizeof(float) * (size_t)OC);
      } else {
        c->sum_other = other;
        c->sum_pos = c->n_elt;
      }
    } else {
      break;
    }
    c->mem[c->nmem++] = ci;
    v = cn->outputs[0];
  }
  /* oneDNN 2.6 has only a reference kernel for int8 sources and a float32 destination: such an
   * add stays on the float path (its DequantizeLinear inputs as reorders) */
  if (c->kind == QK_ADD && !c->yq) goto no;
  c->outv = v;
  for (int a = 1; a < c->nmem; a++) /* in the graph's (topological) order: a dyn scale Mul may come early */
    for (int b = a; b > 0 && c->mem[b - 1] > c->mem[b]; b--) {
      int t = c->mem[b];
      c->mem[b] = c->mem[b - 1];
      c->mem[b - 1] = t;
    }
  c->last = c->mem[c->nmem - 1];
  return 1;
no:
  clu_free(c);
  return 0;
}

/* Eltwise steps that commute with a positive scale (1/y_scale folds into the output scales). */
static int elt_folds(const qclu *c) {
  for (int e = 0; e < c->n_elt; e++)
    if (c->elt[e].alg != dnnl_eltwise_relu && c->elt[e].alg != dnnl_eltwise_clip && c->elt[e].alg != dnnl_eltwise_clip_v2)
      return 0;
  return 1;
}

/* The int8 form of the float path's 1x1 + depthwise fusion (MobileNet's expand and depthwise
 * convolutions): a 1x1 convolution cluster A whose int8 output (zero point 0, u8: after Relu/Clip)
 * is read only through a lazy DequantizeLinear by a depthwise 3x3 cluster B of the same scale and
 * zero point, B with eltwise steps only and a u8/s8 destination of zero point 0. A then runs as one
 * oneDNN convolution with a depthwise post-op whose output is B's (the expand output never stored);
 * the geometry and oneDNN's answer are checked when it runs (alma__dn_q_exec_dw), else both run apart. */
static void plan_dw(dn_plan *p, dn_qstate *S, const int *consumer) {
  const alma_graph *g = p->g;
  for (int ci = 0; ci < S->nclu; ci++) {
    S->clu[ci].dw_next = S->clu[ci].dw_prev = -1;
    S->clu[ci].dw_done_run = INT64_MIN;
  }
  if (S->dw_off) return;
  for (int ci = 0; ci < S->nclu; ci++) {
    qclu *a = &S->clu[ci];
    if (a->kind != QK_CONV || a->dyn || a->emu || !a->yq || a->ydt != U8 || a->yzp != 0 || a->sum_other >= 0 ||
        a->wrank != 4 || a->wdims[2] != 1 || a->wdims[3] != 1 || !elt_folds(a) || a->dw_prev >= 0)
      continue;
    int v = a->outv;
    if (p->static_uses[v] != 1 || consumer[v] < 0) continue;
    int di = consumer[v];
    const alma_node *dq = &g->nodes[di];
    if (!alma__dn_is_op(dq, "DequantizeLinear") || p->nodes[di].q_role != DN_Q_LAZY || dq->inputs[0] != v || dq->outputs[0] < 0)
      continue;
    int dv = dq->outputs[0];
    if (p->static_uses[dv] != 1 || consumer[dv] < 0) continue;
    int bi = consumer[dv];
    if (p->nodes[bi].q_role != DN_Q_MEMBER) continue;
    qclu *b = &S->clu[p->nodes[bi].q_idx];
    const alma_node *bn = &g->nodes[b->anchor];
    if (b == a || b->anchor != bi || bn->inputs[0] != dv || b->kind != QK_CONV || b->dyn || b->emu || !b->yq ||
        !alma__dn_q_is_q8(b->ydt) || b->yzp != 0 || b->sum_other >= 0 || b->xv != v || b->xs != a->ys || b->xzp != a->yzp ||
        b->wrank != 4 || b->wdims[1] != 1 || b->wdims[2] != 3 || b->wdims[3] != 3 || !elt_folds(b) || b->dw_next >= 0 ||
        b->dw_prev >= 0 || alma__attr_i(bn, "group", 1) != b->wdims[0] || b->wdims[0] != a->wdims[0])
      continue;
    a->dw_next = p->nodes[bi].q_idx;
    b->dw_prev = ci;
  }
}

void alma__dn_q_plan(dn_plan *p) {
  const alma_graph *g = p->g;
  dn_qstate *S = alma__dn_qstate(p);
  if (!S || S->off) return;
  int nv = g->n_values, nn = g->n_nodes;
  int *consumer = malloc(sizeof(int) * (size_t)(nv + 1));
  qclu *clu = calloc((size_t)nn + 1, sizeof *clu);
  if (!consumer || !clu) {
    free(consumer);
    free(clu);
    return;
  }
  for (int v = 0; v < nv; v++) consumer[v] = -1;
  for (int i = 0; i < nn; i++)
    for (int k = 0; k < g->nodes[i].n_inputs; k++)
      if (g->nodes[i].inputs[k] >= 0) consumer[g->nodes[i].inputs[k]] = i;
  int nc = 0;
  for (int i = 0; i < nn; i++) {
    if (p->nodes[i].q_role || !match_cluster(p, i, consumer, &clu[nc])) continue;
    qclu *c = &clu[nc];
    for (int m = 0; m < c->nmem; m++) {
      p->nodes[c->mem[m]].q_role = DN_Q_MEMBER;
      p->nodes[c->mem[m]].q_idx = nc;
    }
    nc++;
  }
  S->clu = clu;
  S->nclu = nc;
  /* float groups overlapping a cluster are dissolved (their other nodes run alone) */
  for (int i = 0; i < nn; i++) {
    if (p->nodes[i].q_role != DN_Q_MEMBER || p->nodes[i].head < 0) continue;
    dn_node *h = &p->nodes[p->nodes[i].head];
    for (int m = 0; m < h->nmem; m++) p->nodes[h->mem[m]].head = -1;
    h->nmem = 0;
    h->npost = h->nself; /* an alma.Fused* head keeps its own post-ops */
  }
  /* lazy DequantizeLinear nodes: every reader is a cluster anchor */
  S->lazy = calloc((size_t)nn + 1, sizeof *S->lazy);
  for (int ci = 0; ci < nc && S->lazy; ci++) {
    qclu *c = &clu[ci];
    int dqs[3] = {c->dq_x, c->dq_w, c->dq_b};
    for (int k = 0; k < 3; k++) {
      int d = dqs[k];
      if (d < 0 || p->nodes[d].q_role) continue;
      int out = g->nodes[d].outputs[0], all = out >= 0 && !g->values[out].is_output;
      for (int j = 0; j < nn && all; j++)
        for (int q = 0; q < g->nodes[j].n_inputs && all; q++)
          if (g->nodes[j].inputs[q] == out)
            all = p->nodes[j].q_role == DN_Q_MEMBER && clu[p->nodes[j].q_idx].anchor == j && q < 3;
      for (int j = 0; j < nn && all; j++)
        for (int q = 0; q < g->nodes[j].n_implicit; q++) all &= g->nodes[j].implicit_inputs[q] != out;
      if (!all) continue;
      p->nodes[d].q_role = DN_Q_LAZY;
      p->nodes[d].q_idx = S->nlazy;
      S->lazy[S->nlazy].node = d;
      S->lazy[S->nlazy].out = out;
      S->nlazy++;
    }
  }
  for (int ci = 0; ci < nc; ci++) {
    qclu *c = &clu[ci];
    if (c->dyn) { /* the scale's reader may run on its own before the cluster: keep the scale alive */
      c->x_extra_use = 1;
      p->static_uses[c->xs_v]++;
      continue;
    }
    /* the DequantizeLinear of x runs anyway: keep xv alive for the cluster */
    if (p->nodes[c->dq_x].q_role != DN_Q_LAZY) {
      c->x_extra_use = 1;
      p->static_uses[c->xv]++;
    }
    if (c->kind == QK_ADD && p->nodes[c->dq_w].q_role != DN_Q_LAZY) {
      c->x2_extra_use = 1;
      p->static_uses[c->x2v]++;
    }
    if (c->kind == QK_ADD || c->kind == QK_MOVE) continue; /* these read their sources in the layout they come in */
    /* a QuantizeLinear writing xv writes it in this cluster's source layout */
    const alma_node *qn = alma__dn_q_producer(g, c->xv);
    if (qn && alma__dn_is_op(qn, "QuantizeLinear") && S->hint[qn - g->nodes] < 0) S->hint[qn - g->nodes] = ci;
  }
  plan_dw(p, S, consumer);
  free(consumer);
}

/* ---- describe and free --------------------------------------------------------------------------------- */
int alma__dn_q_describe(dn_plan *p, int idx, FILE *f) {
  dn_qstate *S = p->q;
  const alma_graph *g = p->g;
  const alma_node *n = &g->nodes[idx];
  const dn_node *d = &p->nodes[idx];
  if (!S || !d->q_role) return 0;
  if (d->q_role == DN_Q_LAZY) {
    fprintf(f, "  %-40s %-20s DNNL  absorbed: int8 primitives read its input directly\n", n->name, n->op_type);
    return 1;
  }
  const qclu *c = &S->clu[d->q_idx];
  if (idx != c->anchor) {
    const char *as = c->kind == QK_MOVE                ? "its int8 output (the same scale and zero point)"
                     : alma__dn_is_op(n, "QuantizeLinear") ? "its int8 destination (requantization)"
                     : alma__dn_is_op(n, "Cast")         ? "its float32 destination"
                     : alma__dn_is_op(n, "Mul")          ? "output scales (x_scale * w_scale)"
                     : !alma__dn_is_op(n, "Add")         ? "eltwise post-op"
                     : c->sum_other >= 0 && (n->inputs[0] == c->sum_other || n->inputs[1] == c->sum_other) ? "sum post-op"
                                                                                                          : "bias";
    fprintf(f, "  %-40s %-20s DNNL  fused into int8 '%s' as %s\n", n->name, n->op_type, g->nodes[c->anchor].name, as);
    return 1;
  }
  if (c->kind == QK_ADD) {
    fprintf(f, "  %-40s %-20s DNNL  int8 add (src %s + %s, %s dst)", n->name, n->op_type, c->xdt ? alma__dn_q_dt_name(c->xdt) : "u8/s8",
            c->x2dt ? alma__dn_q_dt_name(c->x2dt) : "u8/s8", c->yq ? alma__dn_q_dt_name(c->ydt) : "f32");
    goto tail;
  }
  if (c->kind == QK_MOVE) {
    fprintf(f, "  %-40s %-20s DNNL  %s on the %s values (one scale and zero point on both sides)", n->name, n->op_type,
            alma__dn_is_op(n, "MaxPool") ? "int8 max pooling" : "int8 view (plain layout)", alma__dn_q_dt_name(c->ydt));
    const dn_prim *np = p->nodes[idx].prim[DN_PRIM_SINGLE];
    if (np && np->valid && !np->declined && np->impl[0]) fprintf(f, " [%s]", np->impl);
    goto tail;
  }
  if (c->dyn && c->emu) {
    fprintf(f, "  %-40s %-20s DNNL  float32 %s on the dequantized u8 source (%s)", n->name, n->op_type,
            c->kind == QK_CONV ? "convolution" : "matmul",
            c->kind == QK_CONV ? "oneDNN 2.6's int8 depthwise kernels misapply binary post-ops to a partial channel block"
                               : "no exact int8 matmul for 8-bit weights without VNNI");
    goto tail;
  }
  if (c->dyn) {
    fprintf(f, "  %-40s %-20s DNNL  int8 %s (src u8 with this run's scale and zero point%s, weights s8 per channel%s, f32 dst)",
            n->name, n->op_type, c->kind == QK_CONV ? "convolution" : "matmul",
            c->pr2.valid && c->pr2.shift > 0 ? ", given as s8 when the zero point is not 0" : "",
            c->split ? " in two 7-bit halves along K (no VNNI)" : "");
    goto tail;
  }
  fprintf(f, "  %-40s %-20s DNNL  int8 %s (src %s%s, weights s8 %s, %s dst)", n->name, n->op_type,
          c->kind == QK_CONV ? "convolution" : "matmul", c->xdt ? alma__dn_q_dt_name(c->xdt) : "u8/s8",
          /* what ran (the fused 1x1 + depthwise primitive when it replaced the cluster's own) */
          c->pr.valid ? (c->pr.shift == 2 ? ", 7-bit weights" : c->pr.shift > 0 ? " given as s8" : c->pr.shift < 0 ? " given as u8" : "")
          : c->prdw.valid && !c->prdw.declined ? (c->prdw.shift == 2 ? ", 7-bit weights" : c->prdw.shift > 0 ? " given as s8" : "")
                                               : "",
          c->nws > 1 ? "per channel" : "per tensor", c->yq ? alma__dn_q_dt_name(c->ydt) : "f32");
tail:
  if (c->nmem > 1) fprintf(f, " + %d post-op node%s", c->nmem - 1, c->nmem > 2 ? "s" : "");
  if (c->pr.valid && !c->pr.declined) fprintf(f, " [%s]", c->pr.impl);
  if (c->pr2.valid && !c->pr2.declined) fprintf(f, " [%s with a zero point]", c->pr2.impl);
  if (c->pr.declined) fprintf(f, " [declined at run time: %s]", c->pr.why);
  if (c->pr2.declined) fprintf(f, " [declined at run time: %s]", c->pr2.why);
  if (c->n_fallback_runs) fprintf(f, " (%d runs on the float path)", c->n_fallback_runs);
  if (c->dw_next >= 0) {
    const qclu *b = &S->clu[c->dw_next];
    if (c->prdw.valid && !c->prdw.declined)
      fprintf(f, "; with '%s' as depthwise post-op [%s]", g->nodes[b->anchor].name, c->prdw.impl);
    else if (c->prdw.declined)
      fprintf(f, "; not fused with '%s': %s", g->nodes[b->anchor].name, c->prdw.why);
  }
  if (c->dw_prev >= 0 && c->dw_done_run >= 0)
    fprintf(f, " (computed by '%s' as its depthwise post-op)", g->nodes[S->clu[c->dw_prev].anchor].name);
  fputc('\n', f);
  return 1;
}

void alma__dn_q_summary(dn_plan *p, FILE *f) {
  dn_qstate *S = p->q;
  int nq = 0, nql = 0, ndq = 0, ndyn = 0, nemu = 0;
  for (int i = 0; i < p->g->n_nodes; i++) {
    int dq = alma__dn_is_op(&p->g->nodes[i], "DynamicQuantizeLinear");
    nq += p->nodes[i].kind == DK_QDQ && !p->nodes[i].q_role && !dq;
    ndq += p->nodes[i].kind == DK_QDQ && dq;
    nql += p->nodes[i].kind == DK_QLINEAR && !p->nodes[i].q_role;
  }
  int nmove = 0, ndw = 0, ndwr = 0;
  for (int k = 0; S && k < S->nclu; k++) {
    nmove += S->clu[k].kind == QK_MOVE;
    ndw += S->clu[k].dw_next >= 0;
    ndwr += S->clu[k].dw_next >= 0 && S->clu[k].prdw.valid && !S->clu[k].prdw.declined;
    ndyn += S->clu[k].dyn;
    nemu += S->clu[k].emu;
  }
  if (!S && !nq && !nql && !ndq) return;
  int nc = S ? S->nclu - ndyn : 0, nl = S ? S->nlazy : 0;
  if (!nc && !nq && !nql && !ndq && !ndyn) return;
  fprintf(f, "  DNNL int8: %d QDQ clusters as int8 primitives (%d DequantizeLinear absorbed), ", nc, nl);
  if (nmove) fprintf(f, "%d of them MaxPool/Flatten/Reshape on int8 values, ", nmove);
  if (ndw) fprintf(f, "%d 1x1 + depthwise pairs (%d fused in the last run), ", ndw, ndwr);
  if (ndyn || ndq)
    fprintf(f, "%d DynamicQuantizeLinear, %d dynamic clusters (%d as float32 matmuls), ", ndq, ndyn, nemu);
  fprintf(f,
          "%d QLinear/Integer nodes, %d Quantize/DequantizeLinear as reorders; %s%s",
          nql, nq,
          !S || !S->conv_s8     ? "u8/s8 sources as they are"
          : S->conv_s8 == 1 ? "no VNNI: convolution sources given as s8 (oneDNN's 7-bit weights)"
                            : "no VNNI: u8 convolution sources with a zero point given as s8 (oneDNN's 7-bit weights)",
          S && S->mm_off ? ", matmuls on the float path (oneDNN's int8 gemm saturates without VNNI)" : "");
  if (p->runs) fprintf(f, "; last run: %lld int8 primitives, %lld int8 reorders", (long long)p->n_int8, (long long)p->n_int8_reorder);
  fputc('\n', f);
}

void alma__dn_q_free(dn_plan *p) {
  dn_qstate *S = p->q;
  if (!S) return;
  for (int k = 0; k < S->nclu; k++) clu_free(&S->clu[k]);
  for (int i = 0; i < p->g->n_nodes; i++)
    if (S->nprim[i]) {
      alma__dn_qprim_free(S->nprim[i]);
      free(S->nprim[i]);
    }
  free(S->clu);
  free(S->lazy);
  free(S->hint);
  free(S->nprim);
  free(S);
  p->q = NULL;
}

#endif
