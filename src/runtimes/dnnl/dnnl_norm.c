/* DNNL runtime: normalizations: BatchNormalization, LayerNormalization, Softmax / LogSoftmax, LRN
 * and InstanceNormalization. */
#ifdef ALMA_HAVE_DNNL

#include "runtimes/dnnl/dnnl_rt.h"

/* ---- batch normalization (inference) ------------------------------------------------------------- */
alma_status alma__dn_run_bnorm(dn_plan *p, int idx, int fused, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                               int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = alma__dn_get_prim(d, alma__dn_slot(fused));
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (nin < 5) return ALMA_OK;
  dn_val *x = in[0];
  if (!alma__dn_is_fp(x) || x->t.rank < 2 || x->t.rank > 5 || os[0].dtype != x->t.dtype || !alma__dn_same_dims(&x->t, &os[0]))
    return ALMA_OK;
  int64_t C = x->t.dims[1];
  for (int k = 1; k < 5; k++) /* scale, shift, mean, var: any float type, given to oneDNN as float32 */
    if (!alma__dn_is_fp(in[k]) || alma__numel(in[k]->t.rank, in[k]->t.dims) != C) return ALMA_OK;
  float eps = alma__attr_f(n, "epsilon", 1e-5f);
  dnnl_memory_desc_t key[1];
  int64_t ikey[8] = {0};
  alma__dn_val_md(x, &key[0]);
  if (!alma__dn_key_match(pr, 1, key, ikey)) {
    alma__dn_prim_begin(pr, 1, key, ikey);
    unsigned flags = dnnl_use_global_stats | dnnl_use_scale | dnnl_use_shift;
    if (fused && alma__dn_find_post(d, fused, DP_NORM_RELU)) flags |= dnnl_fuse_norm_relu;
    dnnl_batch_normalization_desc_t bd;
    if (dnnl_batch_normalization_forward_desc_init(&bd, dnnl_forward_inference, &key[0], eps, flags) != dnnl_success)
      return alma__dn_prim_decline(pr, n, "batch normalization descriptor rejected");
    dnnl_memory_desc_t cmd;
    int64_t cd = C;
    alma__dn_plain_md(&cmd, 1, &cd);
    const dn_arg args[] = {{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_DST, &key[0]}, {DNNL_ARG_SCALE, &cmd},
                           {DNNL_ARG_SHIFT, &cmd},  {DNNL_ARG_MEAN, &cmd},   {DNNL_ARG_VARIANCE, &cmd}};
    if (!alma__dn_prim_pd(p, pr, n, &bd, NULL, "batch normalization") || !alma__dn_prim_args(p, pr, n, 6, args)) return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  void *prm[4];
  dn_buf *ptmp[4] = {NULL, NULL, NULL, NULL};
  alma_status s = ALMA_OK;
  for (int k = 1; k < 5 && s == ALMA_OK; k++) s = alma__dn_f32_of(p, in[k], n, &prm[k - 1], &ptmp[k - 1]);
  void *sp = x->has_blk ? x->bbuf->ptr : x->t.data;
  dn_buf *db = s == ALMA_OK ? alma__dn_val_steal(x, &pr->dst_md) : NULL;
  if (s == ALMA_OK && !db && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md))))
    s = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (s == ALMA_OK) {
    void *ptrs[DN_MAX_MEM] = {sp, db->ptr, prm[0], prm[1], prm[2], prm[3]};
    s = alma__dn_exec(p, pr, pr->p, ptrs, n);
  }
  for (int k = 0; k < 4; k++) alma__dn_unref(p, ptmp[k]);
  if (s != ALMA_OK) {
    alma__dn_unref(p, db);
    return s;
  }
  alma__dn_val_set(out[0], &os[0], &pr->dst_md, db);
  *done = 1;
  return ALMA_OK;
}

/* ---- layer normalization ------------------------------------------------------------------------- */
alma_status alma__dn_run_lnorm(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = alma__dn_get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0], *sc = nin > 1 ? in[1] : NULL, *sh = nin > 2 ? in[2] : NULL;
  if (!alma__dn_is_fp(x) || !alma__dn_is_fp(sc) || (sh && !alma__dn_is_fp(sh)) || x->t.rank < 1 || os[0].dtype != x->t.dtype ||
      !alma__dn_same_dims(&x->t, &os[0]))
    return ALMA_OK;
  int axis;
  if (alma__norm_axis(alma__attr_i(n, "axis", -1), x->t.rank, &axis) != ALMA_OK) {
    alma__error_clear();
    return ALMA_OK;
  }
  int64_t M = alma__numel(axis, x->t.dims), D = alma__numel(x->t.rank - axis, x->t.dims + axis);
  if (alma__numel(sc->t.rank, sc->t.dims) != D || (sh && alma__numel(sh->t.rank, sh->t.dims) != D)) return ALMA_OK;
  int64_t d2[2] = {M, D};
  dnnl_memory_desc_t key[1];
  int64_t ikey[8] = {sh != NULL};
  alma__dn_plain_md_of(&key[0], 2, d2, x->t.dtype);
  float eps = alma__attr_f(n, "epsilon", 1e-5f);
  if (!alma__dn_key_match(pr, 1, key, ikey)) {
    alma__dn_prim_begin(pr, 1, key, ikey);
    unsigned flags = dnnl_use_scale | (sh ? dnnl_use_shift : 0);
    dnnl_layer_normalization_desc_t ld;
    if (dnnl_layer_normalization_forward_desc_init(&ld, dnnl_forward_inference, &key[0], NULL, eps, flags) != dnnl_success)
      return alma__dn_prim_decline(pr, n, "layer normalization descriptor rejected");
    dnnl_memory_desc_t dmd;
    alma__dn_plain_md(&dmd, 1, &D);
    const dn_arg args[] = {{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_DST, &key[0]}, {DNNL_ARG_SCALE, &dmd}, {DNNL_ARG_SHIFT, &dmd}};
    if (!alma__dn_prim_pd(p, pr, n, &ld, NULL, "layer normalization") || !alma__dn_prim_args(p, pr, n, sh ? 4 : 3, args)) return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  ALMA_TRY(alma__dn_val_plain(p, x, n));
  void *scp = NULL, *shp = NULL;
  dn_buf *sct = NULL, *sht = NULL, *db = NULL; /* scale and shift: float32 for oneDNN */
  alma_status s = alma__dn_f32_of(p, sc, n, &scp, &sct);
  if (s == ALMA_OK && sh) s = alma__dn_f32_of(p, sh, n, &shp, &sht);
  dnnl_memory_desc_t pl;
  alma__dn_plain_md_of(&pl, x->t.rank, x->t.dims, x->t.dtype);
  void *sp = x->t.data;
  if (s == ALMA_OK && !(db = alma__dn_val_steal(x, &pl)) && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pl))))
    s = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (s == ALMA_OK) {
    void *ptrs[DN_MAX_MEM] = {sp, db->ptr, scp, shp};
    s = alma__dn_exec(p, pr, pr->p, ptrs, n);
  }
  alma__dn_unref(p, sct);
  alma__dn_unref(p, sht);
  if (s != ALMA_OK) {
    alma__dn_unref(p, db);
    return s;
  }
  alma__dn_val_set(out[0], &os[0], &pl, db);
  *done = 1;
  return ALMA_OK;
}

/* ---- softmax / log-softmax ----------------------------------------------------------------------- */
alma_status alma__dn_run_softmax(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = alma__dn_get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0];
  if (!alma__dn_is_fp(x) || x->t.rank < 1 || os[0].dtype != x->t.dtype || !alma__dn_same_dims(&x->t, &os[0])) return ALMA_OK;
  int r = x->t.rank, axis;
  int64_t dflt = n->since_version >= 13 ? -1 : 1;
  if (alma__norm_axis(alma__attr_i(n, "axis", dflt), r, &axis) != ALMA_OK) {
    alma__error_clear();
    return ALMA_OK;
  }
  dnnl_memory_desc_t key[1];
  int64_t ikey[8] = {axis};
  int sm_axis = axis;
  if (n->since_version < 13) { /* coerced to 2-D at axis */
    int64_t d2[2] = {alma__numel(axis, x->t.dims), alma__numel(r - axis, x->t.dims + axis)};
    alma__dn_plain_md_of(&key[0], 2, d2, x->t.dtype);
    sm_axis = 1;
  } else {
    alma__dn_plain_md_of(&key[0], r, x->t.dims, x->t.dtype);
  }
  if (!alma__dn_key_match(pr, 1, key, ikey)) {
    alma__dn_prim_begin(pr, 1, key, ikey);
    /* A strided axis (elements after it): oneDNN 2.x runs its reference kernel there, 50x EAGER's
     * vectorised one on [1,16,4,2100] over axis 1 (YOLOv8's DFL head, CPU time, one thread). */
    if (n->since_version >= 13 && alma__numel(r - axis - 1, x->t.dims + axis + 1) > 1)
      return alma__dn_prim_decline(pr, n, "softmax over a strided axis: EAGER's kernel is faster");
    dnnl_softmax_v2_desc_t sd;
    dnnl_alg_kind_t alg = alma__dn_is_op(n, "LogSoftmax") ? dnnl_softmax_log : dnnl_softmax_accurate;
    if (dnnl_softmax_v2_forward_desc_init(&sd, dnnl_forward_inference, alg, &key[0], &key[0], sm_axis) != dnnl_success)
      return alma__dn_prim_decline(pr, n, "softmax descriptor rejected");
    if (!alma__dn_prim_pd(p, pr, n, &sd, NULL, "softmax") ||
        !alma__dn_prim_args(p, pr, n, 2, (dn_arg[]){{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_DST, &key[0]}}))
      return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  ALMA_TRY(alma__dn_val_plain(p, x, n));
  dnnl_memory_desc_t pl;
  alma__dn_plain_md_of(&pl, r, x->t.dims, x->t.dtype);
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pl));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  void *ptrs[DN_MAX_MEM] = {x->t.data, db->ptr};
  alma_status s = alma__dn_exec(p, pr, pr->p, ptrs, n);
  if (s != ALMA_OK) {
    alma__dn_unref(p, db);
    return s;
  }
  alma__dn_val_set(out[0], &os[0], &pl, db);
  *done = 1;
  return ALMA_OK;
}

/* ---- LRN across channels ------------------------------------------------------------------------------ */
/* oneDNN: dst = src * (k + alpha / n * sum over c-(n-1)/2 .. c+(n-1)/2 of src^2)^-beta, which is
 * ONNX's formula (alpha divided by size, bias as k) for an odd size n; even sizes stay on EAGER. */
alma_status alma__dn_run_lrn(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = alma__dn_get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0];
  if (!alma__dn_is_fp(x) || x->t.rank < 2 || x->t.rank > 5 || os[0].dtype != x->t.dtype || !alma__dn_same_dims(&x->t, &os[0]))
    return ALMA_OK;
  int64_t size = alma__attr_i(n, "size", 0);
  if (size < 1 || size % 2 == 0) return ALMA_OK;
  dnnl_memory_desc_t key[1];
  int64_t ikey[8] = {0};
  alma__dn_val_md(x, &key[0]);
  if (!alma__dn_key_match(pr, 1, key, ikey)) {
    alma__dn_prim_begin(pr, 1, key, ikey);
    dnnl_lrn_desc_t ld;
    if (dnnl_lrn_forward_desc_init(&ld, dnnl_forward_inference, dnnl_lrn_across_channels, &key[0], size,
                                   alma__attr_f(n, "alpha", 1e-4f), alma__attr_f(n, "beta", 0.75f),
                                   alma__attr_f(n, "bias", 1.0f)) != dnnl_success)
      return alma__dn_prim_decline(pr, n, "lrn descriptor rejected");
    if (!alma__dn_prim_pd(p, pr, n, &ld, NULL, "lrn") ||
        !alma__dn_prim_args(p, pr, n, 2, (dn_arg[]){{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_DST, NULL}}))
      return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  void *ptrs[DN_MAX_MEM] = {x->has_blk ? x->bbuf->ptr : x->t.data, db->ptr};
  alma_status st = alma__dn_exec(p, pr, pr->p, ptrs, n);
  return alma__dn_finish(p, st, db, out[0], &os[0], &pr->dst_md, done);
}

/* ---- InstanceNormalization ------------------------------------------------------------------------------ */
/* Plain [N, C, spatial...] data read as [1, N*C, S, 1]: batch normalization computing its own
 * statistics normalizes each (n, c) row over S, which is instance normalization; the per-channel
 * scale and B are repeated N times as that view's per-channel scale and shift. (4-D: oneDNN has
 * only its reference kernel for a 3-D plain view, 20x slower.) */
alma_status alma__dn_run_inorm(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = alma__dn_get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0], *sc = nin > 1 ? in[1] : NULL, *bi = nin > 2 ? in[2] : NULL;
  if (!alma__dn_is_fp(x) || !alma__dn_is_fp(sc) || !alma__dn_is_fp(bi) || x->t.rank < 3 || os[0].dtype != x->t.dtype || !alma__dn_same_dims(&x->t, &os[0]))
    return ALMA_OK;
  int64_t N = x->t.dims[0], C = x->t.dims[1], NC = N * C, S = alma__numel(x->t.rank - 2, x->t.dims + 2);
  if (alma__numel(sc->t.rank, sc->t.dims) != C || alma__numel(bi->t.rank, bi->t.dims) != C) return ALMA_OK;
  float eps = alma__attr_f(n, "epsilon", 1e-5f);
  int64_t vd[4] = {1, NC, S, 1};
  dnnl_memory_desc_t key[1];
  int64_t ikey[8] = {0};
  memcpy(&ikey[0], &eps, sizeof eps);
  alma__dn_plain_md_of(&key[0], 4, vd, x->t.dtype);
  if (!alma__dn_key_match(pr, 1, key, ikey)) {
    alma__dn_prim_begin(pr, 1, key, ikey);
    dnnl_batch_normalization_desc_t bd;
    if (dnnl_batch_normalization_forward_desc_init(&bd, dnnl_forward_inference, &key[0], eps,
                                                   dnnl_use_scale | dnnl_use_shift) != dnnl_success)
      return alma__dn_prim_decline(pr, n, "batch normalization descriptor rejected");
    if (!alma__dn_prim_pd(p, pr, n, &bd, NULL, "batch normalization")) return ALMA_OK;
    /* statistics memories, when this implementation wants them (it computes them) */
    const dnnl_memory_desc_t *mmd = dnnl_primitive_desc_query_md(pr->pd, dnnl_query_exec_arg_md, DNNL_ARG_MEAN);
    pr->flags = mmd && mmd->ndims > 0;
    dnnl_memory_desc_t cmd;
    alma__dn_plain_md(&cmd, 1, &NC);
    const dn_arg args[] = {{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_DST, &key[0]}, {DNNL_ARG_SCALE, &cmd},
                           {DNNL_ARG_SHIFT, &cmd},  {DNNL_ARG_MEAN, &cmd},   {DNNL_ARG_VARIANCE, &cmd}};
    if (!alma__dn_prim_args(p, pr, n, pr->flags ? 6 : 4, args)) return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  ALMA_TRY(alma__dn_val_plain(p, x, n));
  ALMA_TRY(alma__dn_val_plain(p, sc, n));
  ALMA_TRY(alma__dn_val_plain(p, bi, n));
  dn_buf *prm = alma__dn_alloc(p, sizeof(float) * (size_t)NC * (pr->flags ? 4 : 2));
  if (!prm) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  float *scale = prm->ptr, *shift = scale + NC;
  for (int64_t c = 0; c < C; c++) {
    float s = (float)alma__get_f64(sc->t.data, sc->t.dtype, c), t = (float)alma__get_f64(bi->t.data, bi->t.dtype, c);
    for (int64_t k = 0; k < N; k++) scale[k * C + c] = s, shift[k * C + c] = t;
  }
  void *sp = x->t.data;
  dnnl_memory_desc_t pl;
  alma__dn_plain_md_of(&pl, x->t.rank, x->t.dims, x->t.dtype);
  dn_buf *db = alma__dn_val_steal(x, &pl); /* in place when x dies here */
  if (!db && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pl)))) {
    alma__dn_unref(p, prm);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  void *ptrs[DN_MAX_MEM] = {sp, db->ptr, scale, shift, shift + NC, shift + 2 * NC};
  alma_status st = alma__dn_exec(p, pr, pr->p, ptrs, n);
  alma__dn_unref(p, prm);
  return alma__dn_finish(p, st, db, out[0], &os[0], &pl, done);
}

#endif
