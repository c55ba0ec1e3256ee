/* ONNX Attention (ai.onnx 23, 24, 25): scaled dot-product attention with 3-D [B, S, H*D] or 4-D
 * [B, H, S, D] inputs, grouped-query heads, a bool or additive mask, an internal KV cache
 * (past/present), causal and sliding-window masks, softcap, the optional 4th output
 * (qk_matmul_output_mode) and opset 24's nonpad_kv_seqlen.
 *
 * The kernel is row at a time: one row of total_sequence_length scores is live per query, never
 * the [Sq, T] matrix. It follows the spec's decomposition step by step, rounding to Q's dtype at the
 * same points as ONNX's reference (Q and K each scaled by sqrt(scale), the QK product, softcap, the
 * bias add, the probabilities), so float16/bfloat16 results track the reference; arithmetic is in
 * float32, or float64 when an input is float64 or softmax_precision asks for it.
 *
 * Where the spec text and ONNX's reference implementation disagree:
 *  - qk_matmul_output_mode 0 is the raw QK product as the spec says (ONNX 1.23's reference returns
 *    it after softcap; ONNX Runtime returns the raw product).
 *  - a mask whose last dim is shorter than total_sequence_length is padded with -inf (false) from
 *    opset 24, as its text says; opset 23 asks for the full length (the reference pads there too,
 *    ONNX Runtime rejects it).
 * A fully masked row (every key's bias -inf) gives a zero row of Y and of the mode-3 output, as
 * the spec and the reference say. */
#include <string.h>
#include <tgmath.h>

#include "ops/nn_util.h"

typedef struct att_shape {
  int is3d;
  int64_t B, Hq, Hkv, Sq, Skv, P, T, D, Dv;
  alma_dtype qt, vt;
  double sc; /* sqrt(scale) in Q's dtype: the spec scales Q and K by it before the product */
  double softcap;
  int mode, causal;
  alma_dtype smt; /* softmax precision, UNDEFINED: Q's dtype */
  int64_t lw, rw; /* sliding window, -1 = unbounded */
  int64_t mdims[4]; /* mask dims right-aligned to [B, Hq, Sq, ML] */
  int64_t ML;       /* mask's last dim (<= T; keys past it are masked) */
} att_shape;

static const alma_tensor *att_in(const alma_tensor *const *in, int nin, int i) {
  const alma_tensor *t = alma__nn_in(in, nin, i);
  return t && t->dtype != ALMA_DTYPE_UNDEFINED ? t : NULL;
}

static int att_is_float(alma_dtype t) {
  return t == ALMA_DTYPE_FLOAT32 || t == ALMA_DTYPE_FLOAT16 || t == ALMA_DTYPE_BFLOAT16 ||
         t == ALMA_DTYPE_FLOAT64;
}

static alma_status att_setup(const alma_node *n, const alma_tensor *const *in, int nin, att_shape *a) {
  memset(a, 0, sizeof *a);
  int ver = n->since_version;
  const alma_tensor *q = att_in(in, nin, 0), *k = att_in(in, nin, 1), *v = att_in(in, nin, 2);
  const alma_tensor *m = att_in(in, nin, 3), *pk = att_in(in, nin, 4), *pv = att_in(in, nin, 5);
  const alma_tensor *nps = att_in(in, nin, 6);
  char s1[96], s2[96], s3[96];
  if (!q || !k || !v) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "Q, K and V are required");
  if (nps && ver < 24)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "nonpad_kv_seqlen (input 6) needs opset >= 24");
  if (!att_is_float(q->dtype) || !att_is_float(v->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "Q dtype %s, V dtype %s (float types only)",
                          alma_dtype_name(q->dtype), alma_dtype_name(v->dtype));
  if (k->dtype != q->dtype || (pk && pk->dtype != q->dtype) || (pv && pv->dtype != v->dtype))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL,
                          "K and past_key must have Q's dtype (%s), past_value V's (%s)",
                          alma_dtype_name(q->dtype), alma_dtype_name(v->dtype));
  a->qt = q->dtype;
  a->vt = v->dtype;
  if ((q->rank != 3 && q->rank != 4) || k->rank != q->rank || v->rank != q->rank)
    return alma__op_error(n, ALMA_ERR_SHAPE, "Q, K and V must all be 3-D or all 4-D (ranks %d, %d, %d)",
                          q->rank, k->rank, v->rank);
  a->is3d = q->rank == 3;
  int has_qh = alma__node_attr(n, "q_num_heads") != NULL, has_kvh = alma__node_attr(n, "kv_num_heads") != NULL;
  int64_t qh = alma__attr_i(n, "q_num_heads", 0), kvh = alma__attr_i(n, "kv_num_heads", 0);
  a->B = q->dims[0];
  if (a->is3d) {
    if (!has_qh || !has_kvh || qh <= 0 || kvh <= 0)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL,
                            "3-D inputs need positive q_num_heads and kv_num_heads attributes");
    if (q->dims[2] % qh || k->dims[2] % kvh || v->dims[2] % kvh)
      return alma__op_error(n, ALMA_ERR_SHAPE,
                            "hidden sizes (Q %lld, K %lld, V %lld) must be divisible by q_num_heads %lld "
                            "(Q) and kv_num_heads %lld (K, V)",
                            (long long)q->dims[2], (long long)k->dims[2], (long long)v->dims[2], (long long)qh,
                            (long long)kvh);
    a->Hq = qh;
    a->Hkv = kvh;
    a->Sq = q->dims[1];
    a->D = q->dims[2] / qh;
    a->Skv = k->dims[1];
    if (k->dims[2] / kvh != a->D)
      return alma__op_error(n, ALMA_ERR_SHAPE, "K's head size %lld differs from Q's %lld",
                            (long long)(k->dims[2] / kvh), (long long)a->D);
    a->Dv = v->dims[2] / kvh;
    if (v->dims[1] != a->Skv || k->dims[0] != a->B || v->dims[0] != a->B)
      return alma__op_error(n, ALMA_ERR_SHAPE, "Q %s, K %s and V %s: batch or kv sequence lengths differ",
                            alma__shape_str(3, q->dims, s1, sizeof s1), alma__shape_str(3, k->dims, s2, sizeof s2),
                            alma__shape_str(3, v->dims, s3, sizeof s3));
  } else {
    /* opset 25 forbids the head attributes with 4-D inputs; before, they must agree with the dims */
    if (ver >= 25 && (has_qh || has_kvh))
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL,
                            "q_num_heads and kv_num_heads must not be given with 4-D inputs (opset 25)");
    a->Hq = q->dims[1];
    a->Sq = q->dims[2];
    a->D = q->dims[3];
    a->Hkv = k->dims[1];
    a->Skv = k->dims[2];
    a->Dv = v->dims[3];
    if (k->dims[0] != a->B || v->dims[0] != a->B || v->dims[1] != a->Hkv || k->dims[3] != a->D ||
        v->dims[2] != a->Skv)
      return alma__op_error(n, ALMA_ERR_SHAPE,
                            "Q %s, K %s and V %s do not agree (batch, kv heads, kv sequence or head size)",
                            alma__shape_str(4, q->dims, s1, sizeof s1), alma__shape_str(4, k->dims, s2, sizeof s2),
                            alma__shape_str(4, v->dims, s3, sizeof s3));
    if ((has_qh && qh != a->Hq) || (has_kvh && kvh != a->Hkv))
      return alma__op_error(n, ALMA_ERR_SHAPE,
                            "q_num_heads %lld / kv_num_heads %lld disagree with the 4-D inputs' heads %lld / %lld",
                            (long long)qh, (long long)kvh, (long long)a->Hq, (long long)a->Hkv);
  }
  if (a->Hq <= 0 || a->Hkv <= 0 || a->Hq % a->Hkv)
    return alma__op_error(n, ALMA_ERR_SHAPE, "q heads (%lld) must be a positive multiple of kv heads (%lld)",
                          (long long)a->Hq, (long long)a->Hkv);
  if (!pk != !pv)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "past_key and past_value must be given together");
  if (pk) {
    if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != a->B || pv->dims[0] != a->B || pk->dims[1] != a->Hkv ||
        pv->dims[1] != a->Hkv || pk->dims[3] != a->D || pv->dims[3] != a->Dv || pk->dims[2] != pv->dims[2])
      return alma__op_error(n, ALMA_ERR_SHAPE,
                            "past_key %s / past_value %s must be [%lld, %lld, P, %lld] / [%lld, %lld, P, %lld]",
                            alma__shape_str(pk->rank, pk->dims, s1, sizeof s1),
                            alma__shape_str(pv->rank, pv->dims, s2, sizeof s2), (long long)a->B, (long long)a->Hkv,
                            (long long)a->D, (long long)a->B, (long long)a->Hkv, (long long)a->Dv);
    a->P = pk->dims[2];
  }
  a->T = a->P + a->Skv;
  if (nps) {
    if (pk)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "nonpad_kv_seqlen cannot be combined with past_key/past_value");
    if (nps->dtype != ALMA_DTYPE_INT64 || nps->rank != 1 || nps->dims[0] != a->B)
      return alma__op_error(n, ALMA_ERR_SHAPE, "nonpad_kv_seqlen must be int64 [%lld] (got %s %s)", (long long)a->B,
                            alma_dtype_name(nps->dtype), alma__shape_str(nps->rank, nps->dims, s1, sizeof s1));
    if (nps->data)
      for (int64_t b = 0; b < a->B; b++) {
        int64_t l = ((const int64_t *)nps->data)[b];
        if (l < 0 || l > a->T)
          return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "nonpad_kv_seqlen[%lld] = %lld outside [0, %lld]",
                                (long long)b, (long long)l, (long long)a->T);
      }
  }
  if (m) {
    if (!att_is_float(m->dtype) && m->dtype != ALMA_DTYPE_BOOL && !alma__dtype_is_int(m->dtype))
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "attn_mask dtype %s", alma_dtype_name(m->dtype));
    if (m->rank < 1 || m->rank > 4)
      return alma__op_error(n, ALMA_ERR_SHAPE, "attn_mask must have rank 1 to 4 (got %d)", m->rank);
    int64_t want[4] = {a->B, a->Hq, a->Sq, a->T};
    for (int d = 0; d < 4; d++) a->mdims[d] = 1;
    for (int d = 0; d < m->rank; d++) a->mdims[4 - m->rank + d] = m->dims[d];
    a->ML = a->mdims[3];
    /* a shorter mask (padded with -inf) is opset 24's addition; 23 asks for a broadcastable one, and
     * a last dim of 1 would pad in the reference but broadcast by the text, so 23 takes T exactly */
    if (ver < 24 && a->ML != a->T)
      return alma__op_error(n, ALMA_ERR_SHAPE,
                            "attn_mask %s: its last dim must equal total_sequence_length %lld at opset 23 "
                            "(opset 24 allows a shorter mask)",
                            alma__shape_str(m->rank, m->dims, s1, sizeof s1), (long long)a->T);
    int bad = a->ML > a->T || (a->ML < 1 && a->T > 0);
    for (int d = 0; d < 3; d++) bad |= a->mdims[d] != 1 && a->mdims[d] != want[d];
    if (bad)
      return alma__op_error(n, ALMA_ERR_SHAPE,
                            "attn_mask %s does not broadcast to [batch %lld, q heads %lld, q seq %lld, "
                            "total seq %lld] (its last dim may be shorter, not longer)",
                            alma__shape_str(m->rank, m->dims, s1, sizeof s1), (long long)a->B, (long long)a->Hq,
                            (long long)a->Sq, (long long)a->T);
  }
  int64_t mode = alma__attr_i(n, "qk_matmul_output_mode", 0), causal = alma__attr_i(n, "is_causal", 0);
  if (mode < 0 || mode > 3)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "qk_matmul_output_mode %lld (0 to 3)", (long long)mode);
  if (causal != 0 && causal != 1)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "is_causal %lld (0 or 1)", (long long)causal);
  a->mode = (int)mode;
  a->causal = (int)causal;
  float softcap = alma__attr_f(n, "softcap", 0.0f);
  if (!(softcap >= 0) || isinf(softcap))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "softcap %g (must be finite and >= 0)", softcap);
  a->softcap = softcap;
  double scale = 1.0 / sqrt((double)(a->D > 0 ? a->D : 1));
  if (alma__node_attr(n, "scale")) {
    float s = alma__attr_f(n, "scale", 1.0f);
    if (!(s >= 0) || isinf(s))
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "scale %g (must be finite and >= 0)", s);
    scale = s;
  }
  a->sc = sqrt(scale);
  a->smt = ALMA_DTYPE_UNDEFINED;
  if (alma__node_attr(n, "softmax_precision")) {
    int64_t p = alma__attr_i(n, "softmax_precision", 0);
    if (p != ALMA_DTYPE_FLOAT32 && p != ALMA_DTYPE_FLOAT16 && p != ALMA_DTYPE_FLOAT64 && p != ALMA_DTYPE_BFLOAT16)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL,
                            "softmax_precision %lld (%s): must be 1 (float), 10 (float16), 11 (double) or 16 "
                            "(bfloat16)",
                            (long long)p, alma__onnx_type_name(p));
    a->smt = (alma_dtype)p;
  }
  a->lw = a->rw = -1;
  if (ver >= 25) {
    a->lw = alma__attr_i(n, "left_window_size", -1);
    a->rw = alma__attr_i(n, "right_window_size", -1);
    if (a->lw < -1 || a->rw < -1)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "left_window_size %lld / right_window_size %lld (must be >= -1)",
                            (long long)a->lw, (long long)a->rw);
  }
  return ALMA_OK;
}

static alma_status att_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  att_shape a;
  ALMA_TRY(att_setup(n, in, nin, &a));
  if (a.is3d) {
    int64_t y[3] = {a.B, a.Sq, a.Hq * a.Dv};
    alma__set_shape(&out[0], a.qt, 3, y);
  } else {
    int64_t y[4] = {a.B, a.Hq, a.Sq, a.Dv};
    alma__set_shape(&out[0], a.qt, 4, y);
  }
  int64_t pk[4] = {a.B, a.Hkv, a.T, a.D}, pv[4] = {a.B, a.Hkv, a.T, a.Dv}, qk[4] = {a.B, a.Hq, a.Sq, a.T};
  if (nout > 1) alma__set_shape(&out[1], a.qt, 4, pk);
  if (nout > 2) alma__set_shape(&out[2], a.vt, 4, pv);
  if (nout > 3) alma__set_shape(&out[3], a.qt, 4, qk);
  return ALMA_OK;
}

static inline void att_store(void *data, alma_dtype t, int64_t i, double v) {
  if (t == ALMA_DTYPE_FLOAT32)
    ((float *)data)[i] = (float)v;
  else
    alma__set_f64(data, t, i, v);
}

/* Index of element (b, h, s, d) of a Q/K/V tensor: 3-D is [B, S, H*hd], 4-D [B, H, S, hd]. */
static inline int64_t att_idx(int is3d, int64_t H, int64_t S, int64_t hd, int64_t b, int64_t h, int64_t s,
                              int64_t d) {
  return is3d ? ((b * S + s) * H + h) * hd + d : ((b * H + h) * S + s) * hd + d;
}

/* The per-row work, shared by the float and double kernels. W is the working type; Qw [B,Hq,Sq,D]
 * and Kw [B,Hkv,D,T] (transposed) are pre-scaled, Vw is [B,Hkv,T,Dv]; mw is the mask as an additive bias in W
 * (NULL without mask); nps the nonpad lengths or NULL; q4 the 4th output or NULL. */
#define ATT_KERNEL(fname, W)                                                                                   \
  static void fname(const att_shape *a, const W *Qw, const W *Kw, const W *Vw, const W *mw, const int64_t *nps, \
                    alma_tensor *y, alma_tensor *q4, W *s, W *yr, int has_bias) {                              \
    int64_t T = a->T, D = a->D, Dv = a->Dv, g = a->Hq / a->Hkv;                                                \
    int rq = (sizeof(W) == sizeof(float)) ? a->qt != ALMA_DTYPE_FLOAT32 : a->qt != ALMA_DTYPE_FLOAT64;         \
    int rsm = a->smt != ALMA_DTYPE_UNDEFINED && a->smt != a->qt;                                               \
    int64_t ms[4]; /* mask strides, 0 on broadcast dims */                                                     \
    ms[3] = 1;                                                                                                 \
    for (int d = 2; d >= 0; d--) ms[d] = ms[d + 1] * a->mdims[d + 1];                                          \
    for (int d = 0; d < 3; d++)                                                                                \
      if (a->mdims[d] == 1) ms[d] = 0;                                                                         \
    for (int64_t b = 0; b < a->B; b++)                                                                         \
      for (int64_t h = 0; h < a->Hq; h++) {                                                                    \
        const W *kb = Kw + (b * a->Hkv + h / g) * D * T;                                                       \
        const W *vb = Vw + (b * a->Hkv + h / g) * T * Dv;                                                      \
        int64_t off = nps ? nps[b] - a->Sq : a->P; /* causal/window frontier: keys before this block */        \
        for (int64_t i = 0; i < a->Sq; i++) {                                                                  \
          const W *qi = Qw + ((b * a->Hq + h) * a->Sq + i) * D;                                                \
          int64_t row = ((b * a->Hq + h) * a->Sq + i) * T;                                                     \
          /* K is stored transposed per head, so the inner loop runs along the keys and vectorizes */       \
          for (int64_t j = 0; j < T; j++) s[j] = 0;                                                            \
          for (int64_t d = 0; d < D; d++) {                                                                    \
            W qd = qi[d];                                                                                      \
            const W *kr = kb + d * T;                                                                          \
            for (int64_t j = 0; j < T; j++) s[j] += qd * kr[j];                                                \
          }                                                                                                    \
          if (rq)                                                                                              \
            for (int64_t j = 0; j < T; j++) s[j] = (W)alma__round_to(a->qt, s[j]);                                  \
          if (q4 && a->mode == 0)                                                                              \
            for (int64_t j = 0; j < T; j++) att_store(q4->data, a->qt, row + j, s[j]);                          \
          if (a->softcap > 0) {                                                                                \
            W c = (W)a->softcap;                                                                               \
            for (int64_t j = 0; j < T; j++) s[j] = (W)alma__round_to(a->qt, c * tanh(s[j] / c));                    \
          }                                                                                                    \
          if (q4 && a->mode == 1)                                                                              \
            for (int64_t j = 0; j < T; j++) att_store(q4->data, a->qt, row + j, s[j]);                          \
          int all_masked = 1;                                                                                  \
          if (has_bias) {                                                                                      \
            const W *mr = mw ? mw + b * ms[0] + h * ms[1] + i * ms[2] : NULL;                                  \
            for (int64_t j = 0; j < T; j++) {                                                                  \
              W bias = mr ? (j < a->ML ? mr[j] : (W)-INFINITY) : 0;                              \
              int64_t diff = i + off - j; /* query's absolute position minus the key's */                      \
              if ((a->causal && diff < 0) || (a->lw >= 0 && diff > a->lw) || (a->rw >= 0 && -diff > a->rw) ||  \
                  (nps && j >= nps[b]))                                                                        \
                bias = (W)-INFINITY;                                                                           \
              all_masked &= bias == (W)-INFINITY;                                                              \
              s[j] = rq ? (W)alma__round_to(a->qt, s[j] + bias) : s[j] + bias;                                      \
            }                                                                                                  \
          } else                                                                                               \
            all_masked = T == 0;                                                                               \
          if (q4 && a->mode == 2)                                                                              \
            for (int64_t j = 0; j < T; j++) att_store(q4->data, a->qt, row + j, s[j]);                          \
          if (rsm)                                                                                             \
            for (int64_t j = 0; j < T; j++) s[j] = (W)alma__round_to(a->smt, s[j]);                                 \
          W mx = -INFINITY;                                                                                    \
          for (int64_t j = 0; j < T; j++) mx = s[j] > mx ? s[j] : mx;                                          \
          if (mx == -INFINITY) mx = 0; /* all -inf: exp gives zeros, the sum guard keeps them */               \
          W sum = 0;                                                                                           \
          for (int64_t j = 0; j < T; j++) sum += (s[j] = exp(s[j] - mx));                                      \
          if (sum == 0) sum = 1;                                                                               \
          W inv = 1 / sum;                                                                                     \
          for (int64_t j = 0; j < T; j++) {                                                                    \
            W p = all_masked ? 0 : s[j] * inv;                                                                 \
            if (rsm) p = (W)alma__round_to(a->smt, p);                                                              \
            s[j] = rq ? (W)alma__round_to(a->qt, p) : p;                                                            \
          }                                                                                                    \
          if (q4 && a->mode == 3)                                                                              \
            for (int64_t j = 0; j < T; j++) att_store(q4->data, a->qt, row + j, s[j]);                          \
          for (int64_t e = 0; e < Dv; e++) yr[e] = 0;                                                          \
          for (int64_t j = 0; j < T; j++) {                                                                    \
            W p = s[j];                                                                                        \
            const W *vr = vb + j * Dv;                                                                         \
            for (int64_t e = 0; e < Dv; e++) yr[e] += p * vr[e];                                               \
          }                                                                                                    \
          for (int64_t e = 0; e < Dv; e++)                                                                     \
            att_store(y->data, a->qt, att_idx(a->is3d, a->Hq, a->Sq, Dv, b, h, i, e), yr[e]);                  \
        }                                                                                                      \
      }                                                                                                        \
  }
ATT_KERNEL(att_rows_f32, float)
ATT_KERNEL(att_rows_f64, double)

/* Gathers Q (scaled), past+K (scaled) and past+V into working arrays of type W, and the mask into
 * an additive bias (bool: true 0, false -inf). */
#define ATT_GATHER(fname, W)                                                                                   \
  static void fname(const att_shape *a, const alma_tensor *const *in, int nin, W *Qw, W *Kw, W *Vw, W *mw) {   \
    const alma_tensor *q = in[0], *k = in[1], *v = in[2], *m = att_in(in, nin, 3);                             \
    const alma_tensor *pk = att_in(in, nin, 4), *pv = att_in(in, nin, 5);                                      \
    double sc = alma__round_to(a->qt, a->sc);                                                                       \
    for (int64_t b = 0; b < a->B; b++)                                                                         \
      for (int64_t h = 0; h < a->Hq; h++)                                                                      \
        for (int64_t i = 0; i < a->Sq; i++)                                                                    \
          for (int64_t d = 0; d < a->D; d++)                                                                   \
            *Qw++ = (W)alma__round_to(a->qt, sc * alma__get_f64(q->data, a->qt,                                     \
                                                           att_idx(a->is3d, a->Hq, a->Sq, a->D, b, h, i, d))); \
    for (int64_t b = 0; b < a->B; b++)                                                                         \
      for (int64_t h = 0; h < a->Hkv; h++)                                                                     \
        for (int64_t t = 0; t < a->T; t++) {                                                                   \
          for (int64_t d = 0; d < a->D; d++) {                                                                 \
            double x = t < a->P ? alma__get_f64(pk->data, a->qt, ((b * a->Hkv + h) * a->P + t) * a->D + d)     \
                                : alma__get_f64(k->data, a->qt,                                                \
                                                att_idx(a->is3d, a->Hkv, a->Skv, a->D, b, h, t - a->P, d));    \
            Kw[((b * a->Hkv + h) * a->D + d) * a->T + t] = (W)alma__round_to(a->qt, sc * x);                        \
          }                                                                                                    \
          for (int64_t d = 0; d < a->Dv; d++)                                                                  \
            *Vw++ = (W)(t < a->P ? alma__get_f64(pv->data, a->vt, ((b * a->Hkv + h) * a->P + t) * a->Dv + d)   \
                                 : alma__get_f64(v->data, a->vt,                                               \
                                                 att_idx(a->is3d, a->Hkv, a->Skv, a->Dv, b, h, t - a->P, d))); \
        }                                                                                                      \
    if (m) {                                                                                                   \
      int64_t nm = alma_tensor_numel(m);                                                                       \
      for (int64_t i = 0; i < nm; i++) {                                                                       \
        double x = alma__get_f64(m->data, m->dtype, i);                                                        \
        mw[i] = m->dtype == ALMA_DTYPE_BOOL ? (x != 0 ? (W)0 : (W)-INFINITY) : (W)x;                           \
      }                                                                                                        \
    }                                                                                                          \
  }
ATT_GATHER(att_gather_f32, float)
ATT_GATHER(att_gather_f64, double)

/* present_key / present_value: past then the new keys, in the inputs' own dtype, bit for bit. */
static void att_present(const att_shape *a, const alma_tensor *past, const alma_tensor *x, int64_t hd,
                        alma_tensor *out) {
  size_t es = alma_dtype_size(x->dtype), row = (size_t)hd * es;
  char *o = out->data;
  for (int64_t b = 0; b < a->B; b++)
    for (int64_t h = 0; h < a->Hkv; h++)
      for (int64_t t = 0; t < a->T; t++, o += row) {
        const char *src = t < a->P ? (const char *)past->data + (size_t)(((b * a->Hkv + h) * a->P + t) * hd) * es
                                   : (const char *)x->data +
                                         (size_t)att_idx(a->is3d, a->Hkv, a->Skv, hd, b, h, t - a->P, 0) * es;
        if (row) memcpy(o, src, row);
      }
}

static alma_status att_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, int nout) {
  (void)ctx;
  att_shape a;
  ALMA_TRY(att_setup(n, in, nin, &a));
  const alma_tensor *m = att_in(in, nin, 3), *nps = att_in(in, nin, 6);
  if (alma__nn_out_wanted(n, nout, 1)) att_present(&a, att_in(in, nin, 4), in[1], a.D, &out[1]);
  if (alma__nn_out_wanted(n, nout, 2)) att_present(&a, att_in(in, nin, 5), in[2], a.Dv, &out[2]);
  alma_tensor *q4 = alma__nn_out_wanted(n, nout, 3) ? &out[3] : NULL;
  int has_bias = m || a.causal || a.lw >= 0 || a.rw >= 0 || nps;
  int dbl = a.qt == ALMA_DTYPE_FLOAT64 || a.vt == ALMA_DTYPE_FLOAT64 || a.smt == ALMA_DTYPE_FLOAT64;
  size_t es = dbl ? sizeof(double) : sizeof(float);
  size_t nq = (size_t)(a.B * a.Hq * a.Sq * a.D), nk = (size_t)(a.B * a.Hkv * a.T * a.D),
         nv = (size_t)(a.B * a.Hkv * a.T * a.Dv), nm = m ? (size_t)alma_tensor_numel(m) : 0;
  size_t total = nq + nk + nv + nm + (size_t)a.T + (size_t)a.Dv + 1;
  char *buf = alma__nn_alloc(n, total, es);
  if (!buf) return ALMA_ERR_NOMEM;
  char *Qw = buf, *Kw = Qw + nq * es, *Vw = Kw + nk * es, *mw = Vw + nv * es, *s = mw + nm * es,
       *yr = s + (size_t)a.T * es;
  const int64_t *np = nps ? nps->data : NULL;
  if (dbl) {
    att_gather_f64(&a, in, nin, (double *)Qw, (double *)Kw, (double *)Vw, (double *)mw);
    att_rows_f64(&a, (double *)Qw, (double *)Kw, (double *)Vw, m ? (double *)mw : NULL, np, &out[0], q4,
                 (double *)s, (double *)yr, has_bias);
  } else {
    att_gather_f32(&a, in, nin, (float *)Qw, (float *)Kw, (float *)Vw, (float *)mw);
    att_rows_f32(&a, (float *)Qw, (float *)Kw, (float *)Vw, m ? (float *)mw : NULL, np, &out[0], q4, (float *)s,
                 (float *)yr, has_bias);
  }
  free(buf);
  return ALMA_OK;
}

static void att_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                     int64_t *macs, int64_t *flops) {
  (void)out;
  (void)nout;
  att_shape a;
  *macs = *flops = 0;
  if (att_setup(n, in, nin, &a) != ALMA_OK) return;
  int64_t rows = a.B * a.Hq * a.Sq;
  *macs = rows * a.T * (a.D + a.Dv);
  *flops = 2 * *macs + 4 * rows * a.T; /* bias, exp, sum and normalize per score */
}

const alma_op_def alma__op_Attention = {.name = "Attention", .domain = "", .versions = {23, 24, 25},
                                        .min_inputs = 3, .max_inputs = 7, .min_outputs = 1, .max_outputs = 4,
                                        .infer = att_infer, .exec = att_exec, .cost = att_cost};
