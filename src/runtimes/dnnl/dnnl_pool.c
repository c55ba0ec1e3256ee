/* DNNL runtime: pooling, through oneDNN's pooling primitive or alma's pooling kernel on blocked
 * layouts. */
#ifdef ALMA_HAVE_DNNL

#include "ops/nn_util.h"
#include "runtimes/dnnl/dnnl_native.h"
#include "runtimes/dnnl/dnnl_rt.h"

/* ---- pooling ------------------------------------------------------------------------------------ */
enum { DN_NATIVE_POOL = 1 };

/* The 2-D layouts alma__dn_pool reads (channels blocked innermost by *B; float32, and uint8/int8
 * for MaxPool), with the output descriptor in the same layout; 0 for others (oneDNN's pooling
 * then). dnnl.native_pool=off turns the native kernel off (comparisons). */
static int native_pool_layout(const dn_plan *p, const dn_val *x, const dnnl_memory_desc_t *xmd, const dnnl_dims_t od,
                              dnnl_memory_desc_t *omd, int64_t *B) {
  alma_dtype t = x->t.dtype;
  if (!p->opt.native_pool || (t != ALMA_DTYPE_FLOAT32 && t != ALMA_DTYPE_UINT8 && t != ALMA_DTYPE_INT8) || x->t.rank != 4) return 0;
  static const dnnl_format_tag_t tags[] = {dnnl_aBcd8b, dnnl_aBcd16b, dnnl_abcd, dnnl_acdb};
  dnnl_dims_t xd = {x->t.dims[0], x->t.dims[1], x->t.dims[2], x->t.dims[3]};
  for (size_t i = 0; i < sizeof tags / sizeof *tags; i++) {
    dnnl_memory_desc_t m;
    if (dnnl_memory_desc_init_by_tag(&m, 4, xd, alma__dn_dtype(t), tags[i]) != dnnl_success || !dnnl_memory_desc_equal(&m, xmd))
      continue;
    if (dnnl_memory_desc_init_by_tag(omd, 4, od, alma__dn_dtype(t), tags[i]) != dnnl_success) return 0;
    *B = i == 0 ? 8 : i == 1 ? 16 : i == 2 ? 1 : x->t.dims[1];
    return 1;
  }
  return 0;
}

alma_status alma__dn_run_pool(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = alma__dn_get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0];
  int q8 = alma__dn_is_dt(x, ALMA_DTYPE_UINT8) || alma__dn_is_dt(x, ALMA_DTYPE_INT8);
  if (!(alma__dn_is_fp(x) || (q8 && d->alg == dnnl_pooling_max)) || os[0].dtype != x->t.dtype) return ALMA_OK;
  int r = x->t.rank, nsp = r - 2;
  if (r < 3 || r > 5 || os[0].rank != r) return ALMA_OK;
  int global = !strncmp(n->op_type, "Global", 6);
  alma__nn_geom gm;
  memset(&gm, 0, sizeof gm);
  if (global) {
    gm.nsp = nsp;
    for (int i = 0; i < nsp; i++) {
      gm.in[i] = gm.k[i] = x->t.dims[2 + i];
      gm.s[i] = gm.d[i] = 1;
      gm.out[i] = 1;
    }
  } else {
    const int64_t *ks = NULL;
    if (alma__attr_ints(n, "kernel_shape", &ks) != nsp) return ALMA_OK;
    int is_max = d->alg == dnnl_pooling_max;
    int with_dil = is_max ? n->since_version >= 10 : n->since_version >= 19;
    int ceil_mode = n->since_version >= 10 ? alma__attr_i(n, "ceil_mode", 0) != 0 : 0;
    if (alma__nn_geom_read(n, nsp, x->t.dims + 2, ks, with_dil, &gm) != ALMA_OK ||
        alma__nn_geom_forward(n, &gm, ceil_mode) != ALMA_OK) {
      alma__error_clear();
      return ALMA_OK;
    }
  }
  dnnl_dims_t st, kr, dl, pl, pe;
  for (int i = 0; i < nsp; i++) {
    if (gm.out[i] != os[0].dims[2 + i]) return ALMA_OK;
    int64_t eff = (gm.k[i] - 1) * gm.d[i] + 1;
    if (gm.pb[i] >= eff) return ALMA_OK; /* windows entirely in the padding */
    st[i] = gm.s[i];
    kr[i] = gm.k[i];
    dl[i] = gm.d[i] - 1;
    pl[i] = gm.pb[i];
    /* oneDNN wants the end padding that gives exactly out windows (ceil_mode adds some) */
    pe[i] = (gm.out[i] - 1) * gm.s[i] + eff - gm.in[i] - gm.pb[i];
    if ((gm.in[i] + gm.pb[i] + gm.pe[i] - eff) / gm.s[i] + 1 == gm.out[i]) pe[i] = gm.pe[i];
    if (pe[i] < 0 || pe[i] >= eff) return ALMA_OK;
    /* oneDNN (and the native kernel) would count ceil_mode's taps beyond the end padding in the
     * divisor; ONNX does not: EAGER runs those */
    if (d->alg == dnnl_pooling_avg_include_padding && pe[i] > gm.pe[i]) return ALMA_OK;
  }
  dnnl_memory_desc_t key[1];
  int64_t ikey[8] = {0};
  alma__dn_val_md(x, &key[0]);
  if (!alma__dn_key_match(pr, 1, key, ikey)) {
    alma__dn_prim_begin(pr, 1, key, ikey);
    dnnl_dims_t dd;
    for (int i = 0; i < r; i++) dd[i] = os[0].dims[i];
    if (!global && nsp == 2 && native_pool_layout(p, x, &key[0], dd, &pr->dst_md, &pr->m)) {
      pr->flags = DN_NATIVE_POOL;
      snprintf(pr->impl, sizeof pr->impl, "alma:pool:%s",
               pr->m == 1 ? "nchw" : pr->m == 8 ? "aBcd8b" : pr->m == 16 ? "aBcd16b" : "nhwc");
    } else {
      dnnl_memory_desc_t d_any;
      dnnl_memory_desc_init_by_tag(&d_any, r, dd, alma__dn_dtype(x->t.dtype), dnnl_format_tag_any);
      dnnl_pooling_v2_desc_t pdsc;
      if (dnnl_pooling_v2_forward_desc_init(&pdsc, dnnl_forward_inference, d->alg, &key[0], &d_any, st, kr, dl, pl,
                                            pe) != dnnl_success)
        return alma__dn_prim_decline(pr, n, "pooling descriptor rejected");
      if (!alma__dn_prim_pd(p, pr, n, &pdsc, NULL, "pooling") ||
          !alma__dn_prim_args(p, pr, n, 2, (dn_arg[]){{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_DST, NULL}}))
        return ALMA_OK;
    }
  }
  if (pr->flags == DN_NATIVE_POOL) { /* dnnl_native.c: faster than oneDNN 2.6's pooling */
    dn_pool_geo g = {.dt = x->t.dtype == ALMA_DTYPE_UINT8  ? DN_POOL_U8
                           : x->t.dtype == ALMA_DTYPE_INT8 ? DN_POOL_S8
                                                           : DN_POOL_F32,
                     .N = x->t.dims[0], .B = pr->m, .H = gm.in[0], .W = gm.in[1], .OH = gm.out[0], .OW = gm.out[1],
                     .kh = gm.k[0], .kw = gm.k[1], .sh = gm.s[0], .sw = gm.s[1], .dh = gm.d[0], .dw = gm.d[1],
                     .ph = gm.pb[0], .pw = gm.pb[1], .is_max = d->alg == dnnl_pooling_max,
                     .cip = d->alg == dnnl_pooling_avg_include_padding};
    g.CB = (x->t.dims[1] + g.B - 1) / g.B;
    float *scr = alma__dn_scratch(p, alma__dn_pool_scratch(&g, p->threads));
    dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md));
    if (!scr || !db) {
      alma__dn_unref(p, db);
      return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    }
    alma__dn_pool(&g, p->threads, x->has_blk ? x->bbuf->ptr : x->t.data, db->ptr, scr);
    return alma__dn_finish(p, ALMA_OK, db, out[0], &os[0], &pr->dst_md, done);
  }
  if (pr->declined) return ALMA_OK;
  void *sp = x->has_blk ? x->bbuf->ptr : x->t.data;
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  void *ptrs[DN_MAX_MEM] = {sp, db->ptr};
  alma_status s = alma__dn_exec(p, pr, pr->p, ptrs, n);
  if (s != ALMA_OK) {
    alma__dn_unref(p, db);
    return s;
  }
  alma__dn_val_set(out[0], &os[0], &pr->dst_md, db);
  *done = 1;
  return ALMA_OK;
}

#endif
