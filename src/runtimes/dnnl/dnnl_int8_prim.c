/* DNNL runtime, int8: the int8 convolution / matmul primitive of a cluster or QLinear node (built for
 * its key, run), and the fused 1x1 + depthwise form of two clusters. */
#ifdef ALMA_HAVE_DNNL

#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "runtimes/dnnl/dnnl_int8.h"

void alma__dn_qprim_free(qprim *q) {
  if (q->p) dnnl_primitive_destroy(q->p);
  if (q->pd) dnnl_primitive_desc_destroy(q->pd);
  dnnl_memory_t *ms[] = {&q->m_src, &q->m_wei, &q->m_bias, &q->m_dst, &q->m_scr, &q->m_zp, &q->m_xs, &q->m_dww, &q->m_dwb};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
    if (*ms[i]) dnnl_memory_destroy(*ms[i]);
  free(q->wei);
  free(q->bias);
  free(q->dww);
  free(q->dwb);
  if (q->cache && --q->cache->refs <= 0) { /* values hold it only during a run */
    free(q->cache->ptr);
    free(q->cache);
  }
  memset(q, 0, sizeof *q);
}

/* Frees q's primitive and marks it declined for its key, with the reason (formatted before the free:
 * the message may quote q->impl). */
static void decline_v(qprim *q, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void decline_v(qprim *q, const char *fmt, va_list ap) {
  char why[sizeof q->why];
  vsnprintf(why, sizeof why, fmt, ap);
  dnnl_memory_desc_t xmd = q->xmd;
  uint64_t k = q->pkey;
  alma__dn_qprim_free(q);
  q->valid = q->declined = 1;
  q->xmd = xmd;
  q->pkey = k;
  memcpy(q->why, why, sizeof why);
}

alma_status alma__dn_qdecline(qprim *q, const alma_node *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  decline_v(q, fmt, ap);
  va_end(ap);
  ALMA_LOGD("DNNL int8: node '%s' (%s) not in int8: %s", n->name, n->op_type, q->why);
  return ALMA_OK;
}

/* alma__dn_qdecline for the fused 1x1 + depthwise primitive: the two clusters then run apart, in int8. */
static alma_status dw_decline(qprim *q, const alma_node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static alma_status dw_decline(qprim *q, const alma_node *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  decline_v(q, fmt, ap);
  va_end(ap);
  ALMA_LOGD("DNNL int8: node '%s' (%s): no 1x1 + depthwise fusion, the two run apart: %s", n->name, n->op_type, q->why);
  return ALMA_OK;
}

/* The weights halved (round to nearest even, as oneDNN's own s8-source path rounds them): 7-bit
 * weights, whose u8 x s8 pair sums cannot saturate vpmaddubsw (255 * 64 * 2 < 32767). NULL on OOM. */
static int8_t *half_weights(const int8_t *w, int64_t n) {
  int8_t *h = malloc((size_t)(n > 0 ? n : 1));
  if (h)
    for (int64_t i = 0; i < n; i++) h[i] = (int8_t)nearbyintf((float)w[i] * 0.5f);
  return h;
}

/* dnnl.int8_halve=off: without VNNI, u8 sources with a zero point are shifted to s8 for oneDNN's s8
 * path (comparisons); on (default): given as u8 with the weights halved here (shift 2). */
static int q_halve_off(const dn_plan *p) { return !p->opt.int8_halve; }

/* dnnl.int8_zp_bias=off: source zero points of unpadded convolutions stay oneDNN attributes (comparisons). */
static int q_zp_fold_off(const dn_plan *p) { return !p->opt.int8_zp_bias; }

/* ---- the int8 primitive ------------------------------------------------------------------------------ */
/* Output shape of the convolution / matmul, or 0 when oneDNN's form does not apply. */
static int q_shape(const qargs *a, alma_tensor *os) {
  const alma_tensor *x = &a->x->t;
  memset(os, 0, sizeof *os);
  os->dtype = a->yq ? a->ydt : a->s32 ? S32 : F32;
  if (a->kind == QK_CONV) {
    int r = x->rank, nsp = r - 2;
    if (r < 3 || r > 5 || a->wrank != r) return 0;
    int64_t G = alma__attr_i(a->n, "group", 1), C = x->dims[1], OC = a->wdims[0];
    if (G < 1 || C % G || OC % G || a->wdims[1] * G != C) return 0;
    alma__nn_geom gm;
    if (alma__nn_geom_read(a->n, nsp, x->dims + 2, a->wdims + 2, 1, &gm) != ALMA_OK ||
        alma__nn_geom_forward(a->n, &gm, 0) != ALMA_OK) {
      alma__error_clear();
      return 0;
    }
    os->rank = r;
    os->dims[0] = x->dims[0];
    os->dims[1] = OC;
    for (int i = 0; i < nsp; i++) {
      if (gm.out[i] <= 0) return 0;
      os->dims[2 + i] = gm.out[i];
    }
    return 1;
  }
  if (a->kind == QK_GEMM) {
    if (x->rank != 2 || a->wrank != 2 || alma__attr_i(a->n, "transA", 0)) return 0;
    int64_t K = a->transb ? a->wdims[1] : a->wdims[0], N = a->transb ? a->wdims[0] : a->wdims[1];
    if (x->dims[1] != K) return 0;
    os->rank = 2;
    os->dims[0] = x->dims[0];
    os->dims[1] = N;
    return 1;
  }
  /* MatMul: [.., M, K] x [K, N], or the same batch dims on both sides */
  if (x->rank < 2 || a->wrank < 2) return 0;
  int64_t K = a->wdims[a->wrank - 2], N = a->wdims[a->wrank - 1];
  if (x->dims[x->rank - 1] != K) return 0;
  if (a->wrank > 2) {
    if (a->wrank != x->rank) return 0;
    for (int i = 0; i < x->rank - 2; i++)
      if (x->dims[i] != a->wdims[i]) return 0;
  }
  os->rank = x->rank;
  memcpy(os->dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  os->dims[x->rank - 1] = N;
  return 1;
}

/* A depthwise convolution (one input and one output channel per group). oneDNN's int8 depthwise
 * kernels multiply in 32 bits, so u8 sources are exact without VNNI too (checked against a direct
 * sum: kernels 1 to 7, 8 to 240 channels, strides 1 and 2, zero points 0 to 255), while oneDNN
 * 2.6's AVX2 kernel computes garbage for s8 sources with a zero point and a kernel wider than 3
 * (5x5 and 7x7 with 24 or more channels; MobileNet-V3's and EfficientNet's depthwise 5x5 layers
 * after HardSwish/SiLU). So these always take u8 sources: never shifted down, s8 shifted up. */
static int conv_is_dw(const qargs *a) {
  int64_t G = alma__attr_i(a->n, "group", 1);
  return a->kind == QK_CONV && G > 1 && a->wrank >= 3 && a->wdims[0] == G && a->wdims[1] == 1;
}

static uint64_t q_key(const qargs *a, const alma_tensor *os, int shift) {
  uint64_t h = 1469598103934665603ull;
  /* dyn: this run's scale and zero point are arguments; built in is only whether the zero point is 0
   * (a primitive without one: post-Relu values), which also decides the source form without VNNI */
  int32_t zkey = a->dyn ? a->xzp != 0 : a->xzp;
  int32_t ints[11] = {a->kind, zkey, a->yq, a->yzp, (int32_t)a->ydt, a->s32, a->n_elt, shift, a->dyn, a->emu, a->split};
  h = alma__dn_q_fnv(h, ints, sizeof ints);
  if (!a->dyn) h = alma__dn_q_fnv(h, &a->xs, sizeof a->xs);
  h = alma__dn_q_fnv(h, &a->ys, sizeof a->ys);
  h = alma__dn_q_fnv(h, a->wdims, sizeof(int64_t) * (size_t)a->wrank);
  h = alma__dn_q_fnv(h, os->dims, sizeof(int64_t) * (size_t)os->rank);
  if (a->ws) h = alma__dn_q_fnv(h, a->ws, sizeof(float) * (size_t)a->nws);
  int64_t OC = a->kind == QK_CONV ? a->wdims[0] : os->dims[os->rank - 1];
  int bias = a->bq ? 1 : a->bf ? 2 : 0; /* the values are baked into the primitive: hashed */
  h = alma__dn_q_fnv(h, &bias, sizeof bias);
  if (a->bq) h = alma__dn_q_fnv(h, a->bq, sizeof(int32_t) * (size_t)OC);
  if (a->bf) h = alma__dn_q_fnv(h, a->bf, sizeof(float) * (size_t)OC);
  h = alma__dn_q_fnv(h, a->elt, sizeof(dn_elt) * (size_t)a->n_elt);
  int has_res = a->res ? 1 + a->sum_pos : 0;
  h = alma__dn_q_fnv(h, &has_res, sizeof has_res);
  return h;
}

int alma__dn_q_add_memory(dn_plan *p, dnnl_memory_t *m, const dnnl_memory_desc_t *md) {
  return dnnl_memory_create(m, md, p->eng, DNNL_MEMORY_NONE) == dnnl_success;
}

/* Builds the primitive for a (its key is already in q). */
static alma_status q_build(dn_plan *p, qprim *q, const qargs *a, const alma_tensor *os, int shift) {
  const alma_node *n = a->n;
  const alma_tensor *x = &a->x->t;
  int half = shift == 2; /* u8 source as it is, weights halved here (7-bit), output scales doubled */
  if (half) shift = 0;
  dnnl_data_type_t sdt = a->emu ? dnnl_f32 : shift > 0 ? dnnl_s8 : shift < 0 ? dnnl_u8 : alma__dn_dtype(x->dtype);
  dnnl_data_type_t wdt = a->emu ? dnnl_f32 : dnnl_s8;
  int8_t *wh = half ? half_weights(a->w, alma__numel(a->wrank, a->wdims)) : NULL;
  if (half && !wh) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  const void *wsrc = half ? (const void *)wh : a->w;
  dnnl_data_type_t ddt = alma__dn_dtype(os->dtype);
  int64_t OC = a->kind == QK_CONV ? a->wdims[0] : os->dims[os->rank - 1];
  if (a->nws != 1 && a->nws != OC) return alma__dn_qdecline(q, n, "weight scales neither per tensor nor per output channel");
  dnnl_memory_desc_t s_md, w_md, b_md, d_md;
  int with_bias = a->bq || a->bf;
  int mask = 0;                     /* output scale mask: the output-channel axis of dst */
  int wnd = 0;
  dnnl_dims_t wd;
  if (a->kind == QK_CONV) {
    int r = x->rank, nsp = r - 2;
    int64_t G = alma__attr_i(n, "group", 1), C = x->dims[1];
    dnnl_dims_t sd, dd, bd = {OC};
    for (int i = 0; i < r; i++) sd[i] = x->dims[i], dd[i] = os->dims[i];
    wnd = G > 1 ? r + 1 : r;
    if (G > 1) {
      wd[0] = G;
      wd[1] = OC / G;
      wd[2] = C / G;
      for (int i = 0; i < nsp; i++) wd[3 + i] = a->wdims[2 + i];
    } else {
      for (int i = 0; i < r; i++) wd[i] = a->wdims[i];
    }
    dnnl_memory_desc_init_by_tag(&s_md, r, sd, sdt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&w_md, wnd, wd, wdt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a);
    dnnl_memory_desc_init_by_tag(&d_md, r, dd, ddt, dnnl_format_tag_any);
    mask = 1 << 1;
    int64_t wd64[DNNL_MAX_NDIMS];
    for (int i = 0; i < wnd; i++) wd64[i] = wd[i];
    alma__dn_plain_md_dt(&q->wplain, wnd, wd64, wdt);
  } else {
    /* matmul: A [M', K] (batch dims collapsed into rows for 2-D weights) or [B.., M, K] */
    int collapse = a->wrank == 2;
    int r = collapse ? 2 : x->rank;
    int64_t K = x->dims[x->rank - 1], N = os->dims[os->rank - 1];
    int64_t sa[DNNL_MAX_NDIMS], sdd[DNNL_MAX_NDIMS], bd[DNNL_MAX_NDIMS];
    if (collapse) {
      sa[0] = alma__numel(x->rank, x->dims) / (K ? K : 1);
      sa[1] = a->split ? 2 * K : K;
      sdd[0] = sa[0];
      sdd[1] = N;
    } else {
      memcpy(sa, x->dims, sizeof(int64_t) * (size_t)r);
      memcpy(sdd, os->dims, sizeof(int64_t) * (size_t)r);
    }
    for (int i = 0; i < r; i++) bd[i] = 1;
    bd[r - 1] = N;
    alma__dn_plain_md_dt(&s_md, r, sa, sdt);
    alma__dn_plain_md_dt(&d_md, r, sdd, ddt);
    alma__dn_plain_md_dt(&b_md, r, bd, dnnl_f32);
    /* weights: [K, N] (Gemm with transB: stored [N, K]) or [B.., K, N] */
    wnd = collapse ? 2 : a->wrank;
    if (a->transb) {
      dnnl_dims_t dB = {K, N}, sB = {1, K};
      dnnl_memory_desc_init_by_strides(&q->wplain, 2, dB, dnnl_s8, sB);
    } else if (a->split) {
      int64_t d2[2] = {2 * K, N};
      alma__dn_plain_md_dt(&q->wplain, 2, d2, wdt);
    } else {
      alma__dn_plain_md_dt(&q->wplain, wnd, a->wdims, wdt);
    }
    for (int i = 0; i < wnd; i++) wd[i] = q->wplain.dims[i];
    if (a->wconst) dnnl_memory_desc_init_by_tag(&w_md, wnd, wd, wdt, dnnl_format_tag_any);
    else w_md = q->wplain;
    mask = 1 << (r - 1);
  }
  /* attributes: scales, zero points, post-ops */
  dnnl_primitive_attr_t attr = alma__dn_new_attr();
  dnnl_post_ops_t po = NULL;
  float *sc = malloc(sizeof(float) * (size_t)(a->nws > 0 ? a->nws : 1));
  if (!attr || !sc || dnnl_post_ops_create(&po) != dnnl_success) {
    if (attr) dnnl_primitive_attr_destroy(attr);
    free(sc);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  /* 1/y_scale folds into the output scales when the post-ops commute with a positive scale (Relu,
   * LeakyRelu; Clip with its bounds scaled too), else it is a final linear post-op */
  dn_elt elt[Q_MAX_ELT];
  memcpy(elt, a->elt, sizeof elt);
  int fold_y = a->yq && !a->res;
  for (int e = 0; e < a->n_elt && fold_y; e++) {
    if (elt[e].alg == dnnl_eltwise_clip_v2 || elt[e].alg == dnnl_eltwise_clip) {
      elt[e].alpha /= a->ys;
      elt[e].beta /= a->ys;
    } else if (elt[e].alg != dnnl_eltwise_relu) {
      fold_y = 0;
    }
  }
  if (!fold_y) memcpy(elt, a->elt, sizeof elt);
  for (int64_t c = 0; c < a->nws; c++) {
    /* dyn: x_scale is this run's, a binary post-op (oneDNN 2.6's int8 convolutions take no run-time output scales) */
    double s = a->s32 ? 1.0 : (a->dyn ? 1.0 : (double)a->xs) * (a->ws ? a->ws[c] : 1.0f);
    if (fold_y) s /= a->ys;
    if (half) s *= 2.0;
    sc[c] = (float)s;
  }
  dnnl_status_t s = dnnl_success;
  if (!a->s32 && !a->emu) s = dnnl_primitive_attr_set_output_scales(attr, a->nws, a->nws > 1 ? mask : 0, sc);
  int32_t szp = a->emu ? 0 : a->xzp - 128 * shift, rtz = DNNL_RUNTIME_S32_VAL;
  int with_zp = a->dyn ? !a->emu && (a->xzp != 0 || shift) : szp != 0;
  /* A convolution without padding reads only real source values, so its source zero point is a
   * constant per output channel: sum(w * (x - zp)) = sum(w * x) - zp * sum(w). It goes into the
   * bias (in accumulator units) instead of oneDNN's zero-point attribute, whose compensation costs
   * every output (and which rules out oneDNN's fused 1x1 + depthwise kernel). */
  int zp_in_bias = 0;
  if (with_zp && !a->dyn && a->kind == QK_CONV && a->wconst && !q_zp_fold_off(p)) {
    alma__nn_geom gm;
    int nsp = x->rank - 2;
    zp_in_bias = alma__nn_geom_read(n, nsp, x->dims + 2, a->wdims + 2, 1, &gm) == ALMA_OK &&
                 alma__nn_geom_forward(n, &gm, 0) == ALMA_OK;
    alma__error_clear();
    for (int i = 0; i < nsp && zp_in_bias; i++) zp_in_bias = gm.pb[i] == 0 && gm.pe[i] == 0;
    if (zp_in_bias) with_zp = 0, with_bias = 1;
  }
  if (s == dnnl_success && with_zp) s = dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, a->dyn ? &rtz : &szp);
  int bin = a->dyn && !a->emu; /* post-op 0 multiplies by this run's x_scale */
  dnnl_memory_desc_t one_md;
  memset(&one_md, 0, sizeof one_md);
  if (bin) {
    int64_t od[DNNL_MAX_NDIMS];
    for (int i = 0; i < d_md.ndims; i++) od[i] = 1;
    alma__dn_plain_md_dt(&one_md, d_md.ndims, od, dnnl_f32);
    if (s == dnnl_success) s = dnnl_post_ops_append_binary(po, dnnl_binary_mul, &one_md);
  }
  if (s == dnnl_success && a->yq && a->yzp) s = dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_DST, 1, 0, &a->yzp);
  for (int e = 0; s == dnnl_success && e <= a->n_elt; e++) { /* in the graph's order */
    if (a->res && e == a->sum_pos) s = dnnl_post_ops_append_sum(po, 1.0f);
    if (s == dnnl_success && e < a->n_elt)
      s = dnnl_post_ops_append_eltwise(po, 1.0f, elt[e].alg, elt[e].alpha, elt[e].beta);
  }
  if (s == dnnl_success && a->yq && !fold_y) s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, 1.0f / a->ys, 0);
  if (s == dnnl_success && dnnl_post_ops_len(po) > 0) s = dnnl_primitive_attr_set_post_ops(attr, po);
  dnnl_post_ops_destroy(po);
  if (s != dnnl_success) {
    dnnl_primitive_attr_destroy(attr);
    free(sc);
    free(wh);
    return alma__dn_qdecline(q, n, "attributes rejected (status %d)", (int)s);
  }
  if (a->kind == QK_CONV) {
    dnnl_convolution_desc_t cd;
    int r = x->rank, nsp = r - 2;
    alma__nn_geom gm;
    alma__nn_geom_read(n, nsp, x->dims + 2, a->wdims + 2, 1, &gm);
    alma__nn_geom_forward(n, &gm, 0);
    dnnl_dims_t st, dl, pl, pe;
    for (int i = 0; i < nsp; i++) {
      st[i] = gm.s[i];
      dl[i] = gm.d[i] - 1;
      pl[i] = gm.pb[i];
      pe[i] = gm.pe[i];
    }
    s = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &s_md, &w_md,
                                                   with_bias ? &b_md : NULL, &d_md, st, dl, pl, pe);
    if (s == dnnl_success) s = alma__dn_pd_create(p, &q->pd, &cd, attr, q->impl, sizeof q->impl);
  } else {
    dnnl_matmul_desc_t md;
    s = dnnl_matmul_desc_init(&md, &s_md, &w_md, with_bias ? &b_md : NULL, &d_md);
    if (s == dnnl_success) s = alma__dn_pd_create(p, &q->pd, &md, attr, q->impl, sizeof q->impl);
  }
  dnnl_primitive_attr_destroy(attr);
  free(sc);
  if (s != dnnl_success) {
    free(wh);
    return alma__dn_qdecline(q, n, "no int8 implementation (status %d)", (int)s);
  }
  /* a reference int8 kernel is slower than the float path it replaces */
  if (alma__dn_impl_is_ref(q->impl)) {
    free(wh);
    return alma__dn_qdecline(q, n, "only a reference int8 kernel (%s)", q->impl);
  }
  q->src_md = *dnnl_primitive_desc_query_md(q->pd, dnnl_query_src_md, 0);
  q->wei_md = *dnnl_primitive_desc_query_md(q->pd, dnnl_query_weights_md, 0);
  q->dst_md = *dnnl_primitive_desc_query_md(q->pd, dnnl_query_dst_md, 0);
  q->bias_md = b_md;
  q->shift = half ? 2 : shift;
  q->has_sum = a->res != NULL;
  q->rt_zp = a->dyn && with_zp;
  dnnl_memory_desc_t zmd;
  int64_t one = 1;
  alma__dn_plain_md_dt(&zmd, 1, &one, dnnl_s32);
  if (dnnl_primitive_create(&q->p, q->pd) != dnnl_success || !alma__dn_q_add_memory(p, &q->m_src, &q->src_md) ||
      !alma__dn_q_add_memory(p, &q->m_wei, &q->wei_md) || (with_bias && !alma__dn_q_add_memory(p, &q->m_bias, &b_md)) ||
      !alma__dn_q_add_memory(p, &q->m_dst, &q->dst_md) || (bin && !alma__dn_q_add_memory(p, &q->m_xs, &one_md)) ||
      (q->rt_zp && !alma__dn_q_add_memory(p, &q->m_zp, &zmd))) {
    free(wh);
    return alma__dn_qdecline(q, n, "primitive creation failed");
  }
  const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(q->pd, dnnl_query_scratchpad_md, 0);
  if (smd && smd->ndims > 0 && (q->scr_size = dnnl_memory_desc_get_size(smd)) > 0 && !alma__dn_q_add_memory(p, &q->m_scr, smd)) {
    free(wh);
    return alma__dn_qdecline(q, n, "primitive creation failed");
  }
  /* bias in accumulator units: dst = scale * (acc + bias) in oneDNN 2.x (dyn: filled each run, as
   * x_scale changes; emu: no scale, real units) */
  if (with_bias) {
    if (!(q->bias = malloc(sizeof(float) * (size_t)OC))) {
      free(wh);
      return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    }
    int64_t per = OC > 0 ? alma__numel(a->wrank, a->wdims) / OC : 0; /* weights per output channel */
    for (int64_t c = 0; c < OC; c++) {
      double wsc = a->ws ? a->ws[a->nws > 1 ? c : 0] : 1.0;
      double b = a->bq ? (double)a->bq[c] : a->emu ? a->bf[c] : a->bf ? (double)a->bf[c] / ((double)a->xs * wsc) : 0.0;
      if (half) b *= 0.5; /* accumulator units of the halved weights */
      if (zp_in_bias) { /* - zp * sum(w[c]), exact in integers */
        const int8_t *wc = (const int8_t *)wsrc + c * per;
        int64_t sum = 0;
        for (int64_t k = 0; k < per; k++) sum += wc[k];
        b -= (double)szp * (double)sum;
      }
      q->bias[c] = (float)b;
    }
  }
  alma_status st = ALMA_OK;
  if (a->wconst) {
    size_t sz = dnnl_memory_desc_get_size(&q->wei_md);
    if (!(q->wei = aligned_alloc(64, (sz + 63) & ~(size_t)63))) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    p->n_reorder_wei++;
    if (st == ALMA_OK) st = alma__dn_reorder(p, &q->wplain, (void *)wsrc, &q->wei_md, q->wei, n);
  }
  free(wh);
  return st;
}

/* The u8 -> s8 (x - 128) or s8 -> u8 (x + 128) shift of the source (q->shift 1 or -1), from layout
 * from into the primitive's: both flip each byte's top bit, done here in from's layout, then a plain
 * reorder (cached by the plan) changes the layout. Not one oneDNN reorder with a source zero point:
 * oneDNN 2.6's gives wrong values when it also changes the layout of more than 16 channels that are
 * not a multiple of 4 (u8 NCHW -> s8 NHWC, 22 channels: tf2onnx's NASNet; cosine 0.2). */
static alma_status q_shift(dn_plan *p, const qprim *q, const dnnl_memory_desc_t *from, const void *sp, void *dp,
                           const alma_node *n) {
  dnnl_memory_desc_t flipped = *from;
  flipped.data_type = q->shift > 0 ? dnnl_s8 : dnnl_u8;
  size_t size = dnnl_memory_desc_get_size(from);
  int same = dnnl_memory_desc_equal(&flipped, &q->src_md);
  dn_buf *t = same ? NULL : alma__dn_alloc(p, size);
  if (!same && !t) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  const uint8_t *s8 = sp;
  uint8_t *d8 = same ? dp : t->ptr;
  for (size_t i = 0; i < size; i++) d8[i] = (uint8_t)(s8[i] ^ 0x80u);
  alma_status st = same ? ALMA_OK : alma__dn_reorder(p, &flipped, t->ptr, &q->src_md, dp, n);
  if (t) alma__dn_unref(p, t);
  p->n_int8_reorder++;
  return st;
}

/* Executes q with args (room for one more: the scratchpad, appended when q has one). */
alma_status alma__dn_q_execute(dn_plan *p, qprim *q, const alma_node *n, dnnl_exec_arg_t *args, int na) {
  if (q->m_scr) {
    void *scr = alma__dn_scratch(p, q->scr_size);
    if (!scr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory (oneDNN scratchpad)");
    dnnl_memory_set_data_handle(q->m_scr, scr);
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, q->m_scr};
  }
  dnnl_status_t s = dnnl_primitive_execute(q->p, p->strm, na, args);
  if (s != dnnl_success) return alma__op_error(n, ALMA_ERR_INTERNAL, "oneDNN %s failed (status %d)", q->impl, (int)s);
  return ALMA_OK;
}

/* y = (x - zp) * s for a uint8 x (the emu matmuls' float32 source). */
static void dequant_u8(const uint8_t *x, int64_t n, int32_t zp, float s, float *y) {
  int64_t i = 0;
#if defined(__SSE2__)
  const __m128i z = _mm_setzero_si128();
  const __m128 vz = _mm_set1_ps((float)zp), vs = _mm_set1_ps(s);
  for (; i + 16 <= n; i += 16) {
    __m128i b = _mm_loadu_si128((const __m128i *)(x + i)), lo = _mm_unpacklo_epi8(b, z), hi = _mm_unpackhi_epi8(b, z);
    __m128i w[4] = {_mm_unpacklo_epi16(lo, z), _mm_unpackhi_epi16(lo, z), _mm_unpacklo_epi16(hi, z), _mm_unpackhi_epi16(hi, z)};
    for (int k = 0; k < 4; k++) _mm_storeu_ps(y + i + 4 * k, _mm_mul_ps(_mm_sub_ps(_mm_cvtepi32_ps(w[k]), vz), vs));
  }
#endif
  for (; i < n; i++) y[i] = ((float)x[i] - (float)zp) * s;
}

/* The result db (layout md) becomes out's data when st is ALMA_OK, else it is dropped. */
alma_status alma__dn_q_done(dn_plan *p, alma_status st, dn_buf *db, dn_val *out, const alma_tensor *os,
                            const dnnl_memory_desc_t *md, int *done, int int8) {
  p->n_int8 += st == ALMA_OK && int8;
  return alma__dn_finish(p, st, db, out, os, md, done);
}

/* Runs a as one int8 primitive into *out (*done = 1), or declines (*done = 0). */
alma_status alma__dn_q_exec(dn_plan *p, qprim *q, const qargs *a, dn_val *out, int *done) {
  const alma_node *n = a->n;
  dn_qstate *S = p->q;
  dn_val *x = a->x;
  *done = 0;
  if (!x || !x->live || !alma__dn_q_is_q8(x->t.dtype)) return ALMA_OK;
  alma_tensor os;
  if (!q_shape(a, &os)) return ALMA_OK;
  if (alma__numel(os.rank, os.dims) == 0 || alma__numel(x->t.rank, x->t.dims) == 0) return ALMA_OK;
  if (a->res && (!a->res->live || a->res->t.dtype != F32 || a->res->t.rank != os.rank ||
                 memcmp(a->res->t.dims, os.dims, sizeof(int64_t) * (size_t)os.rank)))
    return ALMA_OK;
  int is_mm = a->kind != QK_CONV;
  if (is_mm && S->mm_off && !a->dyn) return ALMA_OK; /* (dyn matmuls there are exact: w7, or emu) */
  if (a->dyn && !(a->xs > 0 && isfinite(a->xs))) return ALMA_OK; /* EAGER says what that gives */
  int dw = !is_mm && conv_is_dw(a);
  int shift = a->emu || is_mm ? 0
              : dw ? (x->t.dtype == S8 ? -1 : 0)
              : x->t.dtype == U8 && !a->w7 && (S->conv_s8 == 1 || (S->conv_s8 == 2 && a->xzp != 0));
  /* without VNNI: rather than shifting the source to s8 (a pass over it, then oneDNN's s8 path,
   * which adds 128 back and halves the weights), the u8 source as it is with the weights halved here */
  if (shift == 1 && S->conv_s8 == 2 && !a->dyn && !a->s32 && a->wconst && !q_halve_off(p)) shift = 2;
  if (a->dyn && a->alt && !a->emu && a->xzp != 0) q = a->alt;
  /* the key: the source's dims and type (its layout is converted into the primitive's) */
  dnnl_memory_desc_t xmd, xpl;
  alma__dn_plain_md_dt(&xpl, x->t.rank, x->t.dims, alma__dn_dtype(x->t.dtype));
  alma__dn_val_md(x, &xmd);
  uint64_t key = q_key(a, &os, shift);
  if (!q->valid || q->pkey != key || !dnnl_memory_desc_equal(&q->xmd, &xpl)) {
    alma__dn_qprim_free(q);
    q->valid = 1;
    q->xmd = xpl;
    q->pkey = key;
    ALMA_LOGD("DNNL int8: node '%s': building its primitive (source %s%s, zero point %d)", n->name, alma__dn_q_dt_name(x->t.dtype),
              shift == 2 ? " with 7-bit weights" : shift > 0 ? " as s8" : shift < 0 ? " as u8" : "", a->xzp);
    ALMA_TRY(q_build(p, q, a, &os, shift));
  }
  if (q->declined) return ALMA_OK;
  alma_status st = ALMA_OK;
  dn_buf *stmp = NULL, *db = NULL;
  void *sp = NULL;
  if (is_mm) {
    /* plain source, read through the primitive's (collapsed) md */
    if ((st = alma__dn_val_plain(p, x, n)) != ALMA_OK) return st;
    sp = x->t.data;
    if (a->emu) { /* the dequantized source, (x - zp) * x_scale, for the float32 matmul */
      int64_t cnt = alma__numel(x->t.rank, x->t.dims);
      if (!(stmp = alma__dn_alloc(p, (size_t)cnt * sizeof(float)))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      dequant_u8(x->t.data, cnt, a->xzp, a->xs, stmp->ptr);
      sp = stmp->ptr;
    } else if (a->split) { /* each row twice: [x, x] */
      int64_t K = x->t.dims[x->t.rank - 1], rows = alma__numel(x->t.rank, x->t.dims) / (K ? K : 1);
      if (!(stmp = alma__dn_alloc(p, (size_t)(2 * rows * K)))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      const uint8_t *xs = x->t.data;
      uint8_t *d = stmp->ptr;
      for (int64_t r = 0; r < rows; r++) {
        memcpy(d + 2 * r * K, xs + r * K, (size_t)K);
        memcpy(d + 2 * r * K + K, xs + r * K, (size_t)K);
      }
      sp = stmp->ptr;
    } else if (shift) {
      if (!(stmp = alma__dn_alloc(p, dnnl_memory_desc_get_size(&q->src_md)))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      dnnl_memory_desc_t from = q->src_md;
      from.data_type = shift > 0 ? dnnl_u8 : dnnl_s8;
      st = q_shift(p, q, &from, sp, stmp->ptr, n);
      sp = stmp->ptr;
    }
  } else if (a->emu) { /* dequantized plain, then in the primitive's layout */
    if ((st = alma__dn_val_plain(p, x, n)) != ALMA_OK) return st;
    int64_t cnt = alma__numel(x->t.rank, x->t.dims);
    dn_buf *ftmp = alma__dn_alloc(p, (size_t)cnt * sizeof(float));
    if (!ftmp) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    dequant_u8(x->t.data, cnt, a->xzp, a->xs, ftmp->ptr);
    dnnl_memory_desc_t fpl;
    alma__dn_plain_md_dt(&fpl, x->t.rank, x->t.dims, dnnl_f32);
    if (dnnl_memory_desc_equal(&fpl, &q->src_md)) {
      stmp = ftmp;
    } else {
      if (!(stmp = alma__dn_alloc(p, dnnl_memory_desc_get_size(&q->src_md)))) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      else st = alma__dn_reorder(p, &fpl, ftmp->ptr, &q->src_md, stmp->ptr, n);
      alma__dn_unref(p, ftmp);
    }
    sp = stmp ? stmp->ptr : NULL;
  } else if (shift == 1 || shift == -1) {
    if (!(stmp = alma__dn_alloc(p, dnnl_memory_desc_get_size(&q->src_md)))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    st = q_shift(p, q, &xmd, x->has_blk ? x->bbuf->ptr : x->t.data, stmp->ptr, n);
    sp = stmp->ptr;
  } else {
    st = alma__dn_val_get(p, x, &q->src_md, 1, &sp, &stmp, n);
  }
  void *wp = q->wei;
  dn_buf *wtmp = NULL;
  if (st == ALMA_OK && !wp) { /* run-time weights: reordered for this run only */
    if (dnnl_memory_desc_equal(&q->wplain, &q->wei_md)) {
      wp = (void *)a->w;
    } else if (!(wtmp = alma__dn_alloc(p, dnnl_memory_desc_get_size(&q->wei_md)))) {
      st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    } else {
      st = alma__dn_reorder(p, &q->wplain, (void *)a->w, &q->wei_md, wtmp->ptr, n);
      wp = wtmp->ptr;
      p->n_reorder_wei++;
    }
  }
  dnnl_memory_desc_t omd = q->dst_md;
  if (is_mm) alma__dn_plain_md_dt(&omd, os.rank, os.dims, q->dst_md.data_type);
  if (st == ALMA_OK) {
    if (a->res) st = alma__dn_sum_dst(p, a->res, &omd, &db, n);
    else if (!(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&q->dst_md)))) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  if (st == ALMA_OK) {
    dnnl_exec_arg_t args[8];
    int na = 0;
    dnnl_memory_set_data_handle(q->m_src, sp);
    dnnl_memory_set_data_handle(q->m_wei, wp);
    dnnl_memory_set_data_handle(q->m_dst, db->ptr);
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, q->m_src};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, q->m_wei};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, q->m_dst};
    if (q->m_bias) {
      if (a->dyn && !a->emu) { /* accumulator units of this run: b / (x_scale * w_scale) */
        int64_t OC = a->kind == QK_CONV ? a->wdims[0] : os.dims[os.rank - 1];
        for (int64_t c = 0; c < OC; c++)
          q->bias[c] = (float)((double)a->bf[c] / ((double)a->xs * a->ws[a->nws > 1 ? c : 0]));
      }
      dnnl_memory_set_data_handle(q->m_bias, q->bias);
      args[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, q->m_bias};
    }
    if (q->m_xs) {
      q->xsv = a->xs;
      dnnl_memory_set_data_handle(q->m_xs, &q->xsv);
      args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, q->m_xs};
    }
    if (q->m_zp) {
      q->zpv = a->xzp - 128 * shift;
      dnnl_memory_set_data_handle(q->m_zp, &q->zpv);
      args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, q->m_zp};
    }
    st = alma__dn_q_execute(p, q, n, args, na);
  }
  alma__dn_unref(p, stmp);
  alma__dn_unref(p, wtmp);
  return alma__dn_q_done(p, st, db, out, &os, &omd, done, !a->emu);
}

/* Builds the fused 1x1 (a) + depthwise 3x3 (b) convolution: a's source (shift as alma__dn_q_exec chose it),
 * its zero point folded into the bias (no padding), output scales x_scale * w_scale / y_scale with
 * its Relu/Clip, the u8 intermediate, then oneDNN's depthwise post-op with b's weights, bias (in
 * b's accumulator units) and scales, and b's Relu/Clip, into b's int8 destination. */
static alma_status q_build_dw(dn_plan *p, qprim *q, const qargs *a, const qargs *b, const alma_tensor *os,
                              const alma_tensor *ds, int shift, int stride) {
  const alma_node *n = a->n;
  const alma_tensor *x = &a->x->t;
  int64_t N = x->dims[0], C = x->dims[1], OC = a->wdims[0], H = x->dims[2], W = x->dims[3];
  dnnl_dims_t sd = {N, C, H, W}, wd = {OC, C, 1, 1}, bd = {OC}, dd = {N, OC, os->dims[2], os->dims[3]};
  dnnl_dims_t one = {1, 1}, zero = {0, 0};
  int half = shift == 2; /* as in q_build */
  if (half) shift = 0;
  dnnl_data_type_t sdt = shift > 0 ? dnnl_s8 : alma__dn_dtype(x->dtype);
  dnnl_memory_desc_t s_md, w_md, b_md, d_md;
  dnnl_memory_desc_init_by_tag(&s_md, 4, sd, sdt, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&w_md, 4, wd, dnnl_s8, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a);
  dnnl_memory_desc_init_by_tag(&d_md, 4, dd, alma__dn_dtype(a->ydt), dnnl_format_tag_any);
  int32_t szp = a->xzp - 128 * shift;
  if (a->nws != 1 && a->nws != OC) return dw_decline(q, n, "weight scales neither per tensor nor per output channel");
  if (b->nws != 1 && b->nws != OC) return dw_decline(q, n, "depthwise weight scales neither per tensor nor per channel");
  float *sc = malloc(sizeof(float) * (size_t)OC), *scb = malloc(sizeof(float) * (size_t)OC);
  q->bias = malloc(sizeof(float) * (size_t)OC);
  float *bdw = malloc(sizeof(float) * (size_t)OC);
  int8_t *wdw = malloc((size_t)(OC * 9));
  int8_t *w1 = half ? half_weights(a->w, OC * C) : NULL;
  const int8_t *wa = half ? w1 : a->w;
  dnnl_primitive_attr_t attr = alma__dn_new_attr();
  dnnl_post_ops_t po = NULL;
  if (!sc || !scb || !q->bias || !bdw || !wdw || (half && !w1) || !attr || dnnl_post_ops_create(&po) != dnnl_success) {
    free(sc), free(scb), free(bdw), free(wdw), free(w1);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  for (int64_t c = 0; c < OC; c++) {
    double wsa = a->ws[a->nws > 1 ? c : 0], wsb = b->ws[b->nws > 1 ? c : 0];
    sc[c] = (float)((double)a->xs * wsa / a->ys * (half ? 2.0 : 1.0));
    scb[c] = (float)((double)b->xs * wsb / b->ys);
    const int8_t *wc = wa + c * C;
    int64_t sum = 0;
    for (int64_t k = 0; k < C; k++) sum += wc[k];
    double ba = a->bq ? (double)a->bq[c] : a->bf ? (double)a->bf[c] / ((double)a->xs * wsa) : 0.0;
    if (half) ba *= 0.5;
    q->bias[c] = (float)(ba - (double)szp * (double)sum);
    bdw[c] = b->bq ? (float)b->bq[c] : b->bf ? (float)((double)b->bf[c] / ((double)b->xs * wsb)) : 0.0f;
  }
  memcpy(wdw, b->w, (size_t)(OC * 9));
  dnnl_status_t s = dnnl_primitive_attr_set_output_scales(attr, OC, 1 << 1, sc);
  for (int e = 0; s == dnnl_success && e < a->n_elt; e++) {
    int clip = a->elt[e].alg != dnnl_eltwise_relu;
    s = dnnl_post_ops_append_eltwise(po, 1.0f, a->elt[e].alg, clip ? a->elt[e].alpha / a->ys : a->elt[e].alpha,
                                     clip ? a->elt[e].beta / a->ys : a->elt[e].beta);
  }
  if (s == dnnl_success)
    s = dnnl_post_ops_append_dw(po, dnnl_s8, dnnl_f32, alma__dn_dtype(b->ydt), 3, stride, 1, OC, 1 << 1, scb);
  for (int e = 0; s == dnnl_success && e < b->n_elt; e++) {
    int clip = b->elt[e].alg != dnnl_eltwise_relu;
    s = dnnl_post_ops_append_eltwise(po, 1.0f, b->elt[e].alg, clip ? b->elt[e].alpha / b->ys : b->elt[e].alpha,
                                     clip ? b->elt[e].beta / b->ys : b->elt[e].beta);
  }
  if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, po);
  dnnl_post_ops_destroy(po);
  free(sc);
  free(scb);
  dnnl_convolution_desc_t cd;
  if (s == dnnl_success)
    s = dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &s_md, &w_md, &b_md,
                                           &d_md, one, zero, zero);
  if (s == dnnl_success) s = alma__dn_pd_create(p, &q->pd, &cd, attr, q->impl, sizeof q->impl);
  dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) {
    free(bdw), free(wdw), free(w1);
    return dw_decline(q, n, "no int8 1x1 convolution with a depthwise post-op (status %d)", (int)s);
  }
  if (alma__dn_impl_is_ref(q->impl)) {
    free(bdw), free(wdw), free(w1);
    return dw_decline(q, n, "1x1 + depthwise only on a reference kernel (%s)", q->impl);
  }
  size_t il = strlen(q->impl); /* oneDNN names the 1x1 kernel only: the plan shows the fusion */
  snprintf(q->impl + il, sizeof q->impl - il, "+dw%d", stride);
  q->src_md = *dnnl_primitive_desc_query_md(q->pd, dnnl_query_src_md, 0);
  q->wei_md = *dnnl_primitive_desc_query_md(q->pd, dnnl_query_weights_md, 0);
  q->dst_md = *dnnl_primitive_desc_query_md(q->pd, dnnl_query_dst_md, 0);
  const dnnl_memory_desc_t *dwmd =
      dnnl_primitive_desc_query_md(q->pd, dnnl_query_exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS);
  const dnnl_memory_desc_t *dbmd =
      dnnl_primitive_desc_query_md(q->pd, dnnl_query_exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS);
  if (q->dst_md.ndims != 4 || q->dst_md.dims[0] != ds->dims[0] || q->dst_md.dims[1] != OC ||
      q->dst_md.dims[2] != ds->dims[2] || q->dst_md.dims[3] != ds->dims[3] || !dwmd || dwmd->ndims == 0 || !dbmd ||
      dbmd->ndims == 0) {
    free(bdw), free(wdw), free(w1);
    return dw_decline(q, n, "depthwise post-op output of another shape");
  }
  q->bias_md = b_md;
  q->shift = half ? 2 : shift;
  q->wplain = *dwmd; /* (the depthwise weights' layout) */
  q->dwb = bdw;
  dnnl_memory_desc_t dwplain;
  int64_t dw64[5] = {OC, 1, 1, 3, 3}, wd64[4] = {OC, C, 1, 1};
  alma__dn_plain_md_dt(&dwplain, 5, dw64, dnnl_s8);
  dnnl_memory_desc_t wplain;
  alma__dn_plain_md_dt(&wplain, 4, wd64, dnnl_s8);
  if (dnnl_primitive_create(&q->p, q->pd) != dnnl_success || !alma__dn_q_add_memory(p, &q->m_src, &q->src_md) ||
      !alma__dn_q_add_memory(p, &q->m_wei, &q->wei_md) || !alma__dn_q_add_memory(p, &q->m_bias, &b_md) || !alma__dn_q_add_memory(p, &q->m_dst, &q->dst_md) ||
      !alma__dn_q_add_memory(p, &q->m_dww, dwmd) || !alma__dn_q_add_memory(p, &q->m_dwb, dbmd)) {
    free(wdw), free(w1);
    return dw_decline(q, n, "primitive creation failed");
  }
  const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(q->pd, dnnl_query_scratchpad_md, 0);
  if (smd && smd->ndims > 0 && (q->scr_size = dnnl_memory_desc_get_size(smd)) > 0 && !alma__dn_q_add_memory(p, &q->m_scr, smd)) {
    free(wdw), free(w1);
    return dw_decline(q, n, "primitive creation failed");
  }
  size_t sz = dnnl_memory_desc_get_size(&q->wei_md), sz2 = dnnl_memory_desc_get_size(dwmd);
  q->wei = aligned_alloc(64, (sz + 63) & ~(size_t)63);
  q->dww = aligned_alloc(64, (sz2 + 63) & ~(size_t)63);
  if (!q->wei || !q->dww) {
    free(wdw), free(w1);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  p->n_reorder_wei += 2;
  alma_status st = alma__dn_reorder(p, &wplain, (void *)wa, &q->wei_md, q->wei, n);
  if (st == ALMA_OK) st = alma__dn_reorder(p, &dwplain, wdw, dwmd, q->dww, n);
  free(wdw), free(w1);
  return st;
}

/* Runs cluster a (a 1x1 convolution) fused with its depthwise cluster b into b's output (*done = 1),
 * or declines (*done = 0: both then run apart). */
alma_status alma__dn_q_exec_dw(dn_plan *p, qclu *ca, qclu *cb, int *done) {
  dn_qstate *S = p->q;
  qargs a, b;
  *done = 0;
  alma__dn_clu_args(p, ca, &a);
  alma__dn_clu_args(p, cb, &b);
  dn_val *x = a.x;
  const alma_node *n = a.n, *bn = b.n;
  if (!x || !x->live || !alma__dn_q_is_q8(x->t.dtype) || x->t.rank != 4 || (ca->xdt && ca->xdt != x->t.dtype)) return ALMA_OK;
  alma_tensor os, ds;
  if (!q_shape(&a, &os) || alma__numel(os.rank, os.dims) == 0) return ALMA_OK;
  /* a: 1x1, stride 1, no pads, one group; b: the depthwise 3x3 of stride 1 or 2, pads 1, no dilation */
  alma__nn_geom ga, gb;
  int ok = alma__attr_i(n, "group", 1) == 1 && alma__nn_geom_read(n, 2, x->t.dims + 2, a.wdims + 2, 1, &ga) == ALMA_OK &&
           alma__nn_geom_forward(n, &ga, 0) == ALMA_OK && alma__nn_geom_read(bn, 2, os.dims + 2, b.wdims + 2, 1, &gb) == ALMA_OK &&
           alma__nn_geom_forward(bn, &gb, 0) == ALMA_OK;
  alma__error_clear();
  for (int i = 0; i < 2 && ok; i++)
    ok = ga.s[i] == 1 && ga.d[i] == 1 && ga.pb[i] == 0 && ga.pe[i] == 0 && gb.s[i] == gb.s[0] && (gb.s[i] == 1 || gb.s[i] == 2) &&
         gb.d[i] == 1 && gb.pb[i] == 1 && gb.pe[i] == 1 && gb.out[i] == (os.dims[2 + i] - 1) / gb.s[i] + 1;
  if (!ok) return ALMA_OK;
  ds = os;
  ds.dtype = b.ydt;
  ds.dims[2] = gb.out[0];
  ds.dims[3] = gb.out[1];
  int shift = x->t.dtype == U8 && (S->conv_s8 == 1 || (S->conv_s8 == 2 && a.xzp != 0));
  if (shift == 1 && S->conv_s8 == 2 && !q_halve_off(p)) shift = 2; /* as in alma__dn_q_exec */
  qprim *q = &ca->prdw;
  dnnl_memory_desc_t xmd, xpl;
  alma__dn_plain_md_dt(&xpl, x->t.rank, x->t.dims, alma__dn_dtype(x->t.dtype));
  alma__dn_val_md(x, &xmd);
  uint64_t key = q_key(&a, &os, shift) * 31 + q_key(&b, &ds, 0) + 1;
  if (!q->valid || q->pkey != key || !dnnl_memory_desc_equal(&q->xmd, &xpl)) {
    alma__dn_qprim_free(q);
    q->valid = 1;
    q->xmd = xpl;
    q->pkey = key;
    ALMA_LOGD("DNNL int8: node '%s': building its primitive with '%s' as depthwise post-op", n->name, bn->name);
    ALMA_TRY(q_build_dw(p, q, &a, &b, &os, &ds, shift, (int)gb.s[0]));
  }
  if (q->declined) return ALMA_OK;
  alma_status st = ALMA_OK;
  dn_buf *stmp = NULL, *db = NULL;
  void *sp = NULL;
  if (shift == 1) {
    if (!(stmp = alma__dn_alloc(p, dnnl_memory_desc_get_size(&q->src_md)))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    st = q_shift(p, q, &xmd, x->has_blk ? x->bbuf->ptr : x->t.data, stmp->ptr, n);
    sp = stmp->ptr;
  } else {
    st = alma__dn_val_get(p, x, &q->src_md, 1, &sp, &stmp, n);
  }
  if (st == ALMA_OK && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&q->dst_md))))
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (st == ALMA_OK) {
    dnnl_exec_arg_t args[8];
    int na = 0;
    dnnl_memory_set_data_handle(q->m_src, sp);
    dnnl_memory_set_data_handle(q->m_wei, q->wei);
    dnnl_memory_set_data_handle(q->m_bias, q->bias);
    dnnl_memory_set_data_handle(q->m_dst, db->ptr);
    dnnl_memory_set_data_handle(q->m_dww, q->dww);
    dnnl_memory_set_data_handle(q->m_dwb, q->dwb);
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, q->m_src};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, q->m_wei};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, q->m_bias};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, q->m_dst};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS, q->m_dww};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS, q->m_dwb};
    st = alma__dn_q_execute(p, q, n, args, na);
  }
  alma__dn_unref(p, stmp);
  return alma__dn_q_done(p, st, db, &p->vals[cb->outv], &ds, &q->dst_md, done, 1);
}

#endif
