/* DNNL runtime: Conv (its fused groups, the 1x1 + depthwise post-op, alma's Winograd kernel) and
 * ConvTranspose through oneDNN's deconvolution. */
#ifdef ALMA_HAVE_DNNL

#include <math.h>

#include "ops/nn_util.h"
#include "runtimes/dnnl/dnnl_native.h"
#include "runtimes/dnnl/dnnl_rt.h"

#define F32 ALMA_DTYPE_FLOAT32

/* ---- Conv --------------------------------------------------------------------------------------- */
enum { DN_NATIVE_WINO = 2 };

/* dnnl.winograd: off never, on wherever the shape qualifies (any AVX2+FMA CPU), auto: on CPUs with
 * AVX2+FMA and without AVX-512F where the measured heuristic says it is faster. 0 never, 1 by the
 * heuristic, 2 always. */
static int wino_mode(const dn_plan *p) {
  if (!alma__dn_wino_cpu() || p->opt.winograd == DN_WINO_OFF) return 0;
  if (p->opt.winograd == DN_WINO_ON) return 2;
  return alma__dn_wino_avx512() ? 0 : 1;
}

/* Whether a convolution asks oneDNN for its own Winograd algorithm first: by default (auto) on
 * AVX-512 CPUs, where alma's AVX2 kernel is off and oneDNN 2.x has F(2x2, 3x3) kernels; float32,
 * 2-D 3x3, stride 1, no dilation, one group, at least 16 input and output channels. oneDNN
 * declines what its kernels do not cover (then the direct algorithm runs). */
static int onednn_wino(const dn_plan *p, alma_dtype dt, int64_t G, int nspc, const dnnl_dims_t wd, int wnd,
                       const dnnl_dims_t st, const dnnl_dims_t dl) {
  if (p->opt.winograd != DN_WINO_AUTO || !alma__dn_wino_avx512() || dt != ALMA_DTYPE_FLOAT32 || G != 1 || nspc != 2)
    return 0;
  /* measured: on MNIST's 1-channel first layer the transforms cost more than they save */
  if (wd[0] < 16 || wd[1] < 16) return 0;
  return wd[wnd - 2] == 3 && wd[wnd - 1] == 3 && st[0] == 1 && st[1] == 1 && dl[0] == 0 && dl[1] == 0;
}

/* The group's post-ops as the Winograd kernel's steps; 0 when one has no equivalent there. */
static int wino_posts(const dn_node *d, int fused, dn_wino_geo *g) {
  g->npost = 0;
  for (int k = 0; k < alma__dn_npost(d, fused); k++) {
    const dn_post *q = &d->post[k];
    if (q->type == DP_SUM) {
      if (g->npost >= DN_WINO_MAX_POST) return 0;
      g->post[g->npost++] = (dn_wino_post){DN_WP_SUM, 0, 0};
      continue;
    }
    if (q->type != DP_ELT) return 0;
    for (int e = 0; e < q->n_elt; e++) {
      const dn_elt *t = &q->elt[e];
      dn_wino_post o;
      if (t->alg == dnnl_eltwise_relu) o = (dn_wino_post){DN_WP_RELU, t->alpha, 0};
      else if (t->alg == dnnl_eltwise_clip || t->alg == dnnl_eltwise_clip_v2) o = (dn_wino_post){DN_WP_CLIP, t->alpha, t->beta};
      else if (t->alg == dnnl_eltwise_bounded_relu) o = (dn_wino_post){DN_WP_CLIP, 0, t->alpha};
      else if (t->alg == dnnl_eltwise_linear) o = (dn_wino_post){DN_WP_LINEAR, t->alpha, t->beta};
      else return 0;
      if (g->npost >= DN_WINO_MAX_POST) return 0;
      g->post[g->npost++] = o;
    }
  }
  return 1;
}

/* Whether a 2-D convolution goes to the Winograd kernel (dnnl_wino.c), filling g: float32, 3x3,
 * stride 1, no dilation, one group, pads <= 2, constant weights, input in aBcd8b/aBcd16b (the
 * output then in the same layout, *omd), post-ops it has; and, unless forced, where it measured
 * faster than oneDNN's jit:avx2 direct convolution (see docs/runtimes/dnnl.md). */
static int wino_use(const dn_plan *p, const dn_node *d, int fused, const dn_val *x, const dnnl_memory_desc_t *xmd,
                    const alma_tensor *w, const alma__nn_geom *gm, const alma_tensor *os, int64_t G,
                    dn_wino_geo *g, dnnl_memory_desc_t *omd) {
  int mode = wino_mode(p);
  if (!mode || !w || x->t.dtype != ALMA_DTYPE_FLOAT32 || w->dtype != ALMA_DTYPE_FLOAT32 || x->t.rank != 4 || G != 1)
    return 0;
  if (w->dims[2] != 3 || w->dims[3] != 3) return 0;
  for (int i = 0; i < 2; i++)
    if (gm->s[i] != 1 || gm->d[i] != 1 || gm->pb[i] < 0 || gm->pb[i] > 2 || gm->pe[i] < 0 || gm->pe[i] > 2) return 0;
  memset(g, 0, sizeof *g);
  if (!wino_posts(d, fused, g)) return 0;
  static const dnnl_format_tag_t tags[] = {dnnl_aBcd8b, dnnl_aBcd16b};
  dnnl_dims_t xd = {x->t.dims[0], x->t.dims[1], x->t.dims[2], x->t.dims[3]};
  dnnl_dims_t od = {os->dims[0], os->dims[1], os->dims[2], os->dims[3]};
  int found = -1;
  for (int i = 0; i < 2 && found < 0; i++) {
    dnnl_memory_desc_t m;
    if (dnnl_memory_desc_init_by_tag(&m, 4, xd, dnnl_f32, tags[i]) == dnnl_success && dnnl_memory_desc_equal(&m, xmd))
      found = i;
  }
  if (found < 0 || dnnl_memory_desc_init_by_tag(omd, 4, od, dnnl_f32, tags[found]) != dnnl_success) return 0;
  g->N = x->t.dims[0];
  g->C = x->t.dims[1];
  g->OC = w->dims[0];
  g->H = x->t.dims[2];
  g->W = x->t.dims[3];
  g->OH = os->dims[2];
  g->OW = os->dims[3];
  g->ph = gm->pb[0];
  g->pw = gm->pb[1];
  g->B = found ? 16 : 8;
  alma__dn_wino_geo_fill(g);
  if (mode == 2) return 1;
  /* Measured (docs/runtimes/dnnl.md): faster on every ResNet-18 and MNIST CNN 3x3 layer at batch 32
   * and at batch 1 from 8 tiles on; with fewer (ResNet-18's 7x7 layer at batch 1: 4 tiles) the 4x
   * larger transformed weights, streamed from memory for a handful of tiles, make it a tie at best. */
  return g->C >= 16 && g->OC >= 16 && g->N * g->TH * g->TW >= 8;
}

/* The Winograd kernel's run: output (or the sum's destination) in pr->dst_md, then dnnl_wino.c. */
static alma_status run_wino(dn_plan *p, dn_prim *pr, const alma_node *n, dn_val *x, dn_val *b, dn_val *res,
                            const alma_tensor *os, dn_val **out, int *done) {
  const dn_wino_geo *g = pr->wei;
  const float *U = (const float *)((const char *)pr->wei + ((sizeof *g + 63) & ~(size_t)63));
  dn_buf *db = NULL, *btmp = NULL;
  void *bp = NULL;
  alma_status st = b ? alma__dn_f32_of(p, b, n, &bp, &btmp) : ALMA_OK;
  if (st == ALMA_OK) {
    if (res) st = alma__dn_sum_dst(p, res, &pr->dst_md, &db, n);
    else if (!(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md)))) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  float *scr = st == ALMA_OK ? alma__dn_scratch(p, alma__dn_wino_scratch(g, p->threads)) : NULL;
  if (st == ALMA_OK && !scr) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (st == ALMA_OK) alma__dn_wino(g, p->threads, U, bp, x->has_blk ? x->bbuf->ptr : x->t.data, db->ptr, scr);
  alma__dn_unref(p, btmp);
  return alma__dn_finish(p, st, db, out[0], &os[0], &pr->dst_md, done);
}

/* A 1x1 convolution group with its DP_DW post-op (fused == 2): one primitive whose output is the
 * depthwise convolution's. plan_fuse_dw (dnnl_runtime.c) checked what the graph fixes: a 1x1 Conv
 * of stride 1, no pads, group 1, constant weights, eltwise post-ops only, then a depthwise 3x3 Conv
 * (group = channels) of stride 1 or 2, pads 1, dilation 1, constant weights; here the run's dtype
 * and shapes. Declined (the runtime then runs the two parts apart) when oneDNN has no such
 * primitive or only a reference kernel for it. */
static alma_status run_conv_dw(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                               int *done) {
  const alma_graph *g = p->g;
  const alma_node *n = &g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  const dn_post *q = &d->post[d->dw_at - 1];
  const alma_node *nc = &g->nodes[q->node];
  dn_prim *pr = alma__dn_get_prim(d, DN_PRIM_DW);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0], *b = nin > 2 ? in[2] : NULL, *bd = q->dw_bias ? &p->vals[nc->inputs[2]] : NULL;
  const alma_tensor *w = alma__dn_const(g, n->inputs[1]), *wd = alma__dn_const(g, nc->inputs[1]);
  if (!alma__dn_is_f32(x) || x->t.rank != 4 || !w || !wd || w->dtype != F32 || wd->dtype != F32 || (b && !alma__dn_is_fp(b)) ||
      (bd && !alma__dn_is_fp(bd)) || os[0].dtype != F32 || os[0].rank != 4)
    return ALMA_OK;
  int64_t C = x->t.dims[1], OC = w->dims[0], s = q->stride;
  if (w->rank != 4 || w->dims[1] != C || w->dims[2] != 1 || w->dims[3] != 1 || wd->rank != 4 || wd->dims[0] != OC ||
      wd->dims[1] != 1 || wd->dims[2] != 3 || wd->dims[3] != 3 || os[0].dims[1] != OC ||
      os[0].dims[2] != x->t.dims[2] || os[0].dims[3] != x->t.dims[3])
    return ALMA_OK;
  if ((b && alma__numel(b->t.rank, b->t.dims) != OC) || (bd && alma__numel(bd->t.rank, bd->t.dims) != OC)) return ALMA_OK;
  /* the depthwise output: ONNX's floor((H + 1 + 1 - 3) / s) + 1 is oneDNN's ceil(H / s) for s = 1, 2 */
  alma_tensor ds = os[0];
  ds.dims[2] = (os[0].dims[2] - 1) / s + 1;
  ds.dims[3] = (os[0].dims[3] - 1) / s + 1;

  dnnl_memory_desc_t key[3];
  int64_t ikey[8] = {0};
  memset(key, 0, sizeof key);
  alma__dn_val_md(x, &key[0]);
  if (b) alma__dn_val_md(b, &key[1]);
  if (bd) alma__dn_val_md(bd, &key[2]);
  if (!alma__dn_key_match(pr, 3, key, ikey)) {
    alma__dn_prim_begin(pr, 3, key, ikey);
    dnnl_dims_t sd = {x->t.dims[0], C, x->t.dims[2], x->t.dims[3]}, wdd = {OC, C, 1, 1}, bdd = {OC};
    dnnl_dims_t dd = {os[0].dims[0], OC, os[0].dims[2], os[0].dims[3]}, one = {1, 1}, zero = {0, 0};
    dnnl_memory_desc_t s_any, w_any, b_md, d_any, wplain, dwplain;
    dnnl_memory_desc_init_by_tag(&s_any, 4, sd, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&w_any, 4, wdd, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&b_md, 1, bdd, dnnl_f32, dnnl_a);
    dnnl_memory_desc_init_by_tag(&d_any, 4, dd, dnnl_f32, dnnl_format_tag_any);
    dnnl_convolution_desc_t cd;
    if (dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &s_any, &w_any,
                                           b ? &b_md : NULL, &d_any, one, zero, zero) != dnnl_success)
      return alma__dn_prim_decline(pr, n, "convolution descriptor rejected");
    if (!alma__dn_prim_pd(p, pr, n, &cd, alma__dn_post_attr(d, 2, 1.0f, 0, 0), "1x1 convolution with a depthwise post-op")) return ALMA_OK;
    if (alma__dn_impl_is_ref(pr->impl)) return alma__dn_prim_decline(pr, n, "depthwise post-op only on a reference kernel (%s)", pr->impl);
    size_t il = strlen(pr->impl); /* oneDNN names the 1x1 kernel only: the plan shows the fusion */
    snprintf(pr->impl + il, sizeof pr->impl - il, "+dw%d", (int)s);
    const dnnl_memory_desc_t *omd = dnnl_primitive_desc_query_md(pr->pd, dnnl_query_dst_md, 0);
    if (!omd || omd->ndims != 4 || omd->dims[0] != ds.dims[0] || omd->dims[1] != OC || omd->dims[2] != ds.dims[2] ||
        omd->dims[3] != ds.dims[3])
      return alma__dn_prim_decline(pr, n, "depthwise post-op output of another shape");
    dn_arg args[6] = {{DNNL_ARG_SRC, NULL}, {DNNL_ARG_WEIGHTS, NULL}};
    int na = 2;
    if (b) args[na++] = (dn_arg){DNNL_ARG_BIAS, &b_md};
    args[na++] = (dn_arg){DNNL_ARG_DST, NULL};
    args[na++] = (dn_arg){DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS, NULL};
    if (bd) args[na++] = (dn_arg){DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS, NULL};
    if (!alma__dn_prim_args(p, pr, n, na, args)) return ALMA_OK;
    int64_t wd64[4] = {OC, C, 1, 1}, dw64[5] = {OC, 1, 1, 3, 3};
    alma__dn_plain_md_of(&wplain, 4, wd64, F32);
    alma__dn_plain_md_of(&dwplain, 5, dw64, F32); /* [C, 1, 3, 3] as groups x 1 x 1 x 3 x 3 */
    ALMA_TRY(alma__dn_cache_weights(p, pr, &wplain, w->data, n));
    const dnnl_memory_desc_t *dwmd =
        dnnl_primitive_desc_query_md(pr->pd, dnnl_query_exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS);
    if (!dwmd || dwmd->ndims == 0) return alma__dn_prim_decline(pr, n, "no depthwise weights layout");
    size_t sz = dnnl_memory_desc_get_size(dwmd);
    if (!(pr->wei2 = aligned_alloc(64, (sz + 63) & ~(size_t)63))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    p->n_reorder_wei++;
    ALMA_TRY(alma__dn_reorder(p, &dwplain, wd->data, dwmd, pr->wei2, n));
  }
  if (pr->declined) return ALMA_OK;

  dn_buf *stmp = NULL, *btmp = NULL, *bdtmp = NULL, *db = NULL;
  void *sp = NULL, *bp = NULL, *bdp = NULL;
  alma_status st = alma__dn_val_get(p, x, &pr->src_md, 1, &sp, &stmp, n);
  if (st == ALMA_OK && b) st = alma__dn_f32_of(p, b, n, &bp, &btmp);
  if (st == ALMA_OK && bd) st = alma__dn_f32_of(p, bd, nc, &bdp, &bdtmp);
  if (st == ALMA_OK && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md))))
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (st == ALMA_OK) {
    void *ptrs[DN_MAX_MEM] = {sp, pr->wei};
    int k = 2;
    if (b) ptrs[k++] = bp;
    ptrs[k++] = db->ptr;
    ptrs[k++] = pr->wei2;
    if (bd) ptrs[k++] = bdp;
    st = alma__dn_exec(p, pr, pr->p, ptrs, n);
  }
  alma__dn_unref(p, stmp);
  alma__dn_unref(p, btmp);
  alma__dn_unref(p, bdtmp);
  return alma__dn_finish(p, st, db, out[0], &ds, &pr->dst_md, done);
}

alma_status alma__dn_run_conv(dn_plan *p, int idx, int fused, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                              int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  if (fused == 2) return run_conv_dw(p, idx, in, nin, os, out, done);
  dn_prim *pr = alma__dn_get_prim(d, alma__dn_slot(fused));
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0], *w = nin > 1 ? in[1] : NULL, *b = nin > 2 ? in[2] : NULL;
  alma_dtype dt = x ? x->t.dtype : F32; /* src, weights and dst; the bias goes in as float32 */
  if (!alma__dn_is_fp(x) || !alma__dn_is_dt(w, dt) || (b && !alma__dn_is_fp(b)) || os[0].dtype != dt) return ALMA_OK;
  int r = x->t.rank, nsp = r - 2;
  if (r < 3 || r > 5 || w->t.rank != r) return ALMA_OK;
  int64_t G = alma__attr_i(n, "group", 1), C = x->t.dims[1], OC = w->t.dims[0];
  if (G < 1 || C % G || OC % G || w->t.dims[1] * G != C) return ALMA_OK;
  if (b && alma__numel(b->t.rank, b->t.dims) != OC) return ALMA_OK;
  alma__nn_geom gm;
  if (alma__nn_geom_read(n, nsp, x->t.dims + 2, w->t.dims + 2, 1, &gm) != ALMA_OK ||
      alma__nn_geom_forward(n, &gm, 0) != ALMA_OK) {
    alma__error_clear();
    return ALMA_OK;
  }
  for (int i = 0; i < nsp; i++)
    if (gm.out[i] != os[0].dims[2 + i]) return ALMA_OK;
  dn_val *res = NULL;
  if (fused && alma__dn_find_post(d, fused, DP_SUM) && !(res = alma__dn_sum_residual(p, d, fused, &os[0]))) return ALMA_OK;

  const alma_tensor *wc = alma__dn_const(p->g, n->inputs[1]);
  dnnl_memory_desc_t key[3];
  int64_t ikey[8] = {wc != NULL, b != NULL};
  alma__dn_val_md(x, &key[0]);
  alma__dn_val_md(w, &key[1]);
  memset(&key[2], 0, sizeof key[2]);
  if (b) alma__dn_val_md(b, &key[2]);
  /* Spatial dims of extent 1 under a unit kernel without padding (a [k,1] kernel over width 1, as
   * tf2onnx writes 1-D convolutions) leave the descriptors: the bytes are the same, and oneDNN's
   * brgconv blocks over the last spatial dim, so over a width of 1 it runs at a fraction of its
   * speed. The primitive sees rank rc; the values around it keep rank r. */
  int sp_keep[3], rc = 2;
  for (int i = 0; i < nsp; i++)
    if (x->t.dims[2 + i] != 1 || w->t.dims[2 + i] != 1 || gm.out[i] != 1 || gm.pb[i] || gm.pe[i]) sp_keep[rc++ - 2] = i;
  if (rc == 2 || alma__dn_find_post(d, fused, DP_DW)) {
    rc = r;
    for (int i = 0; i < nsp; i++) sp_keep[i] = i;
  }
  int nspc = rc - 2;
  int wnd = G > 1 ? rc + 1 : rc;
  dnnl_dims_t wd;
  int64_t wd64[DNNL_MAX_NDIMS];
  if (G > 1) {
    wd[0] = G;
    wd[1] = OC / G;
    wd[2] = C / G;
  } else {
    wd[0] = OC;
    wd[1] = C;
  }
  for (int i = 0; i < nspc; i++) wd[wnd - nspc + i] = w->t.dims[2 + sp_keep[i]];
  for (int i = 0; i < wnd; i++) wd64[i] = wd[i];
  dnnl_memory_desc_t wplain;
  alma__dn_plain_md_of(&wplain, wnd, wd64, dt);

  int fresh = !alma__dn_key_match(pr, 3, key, ikey);
  if (fresh) {
    alma__dn_prim_begin(pr, 3, key, ikey);
    dn_wino_geo wg;
    if (nsp == 2 && rc == r && wc && wino_use(p, d, fused, x, &key[0], wc, &gm, &os[0], G, &wg, &pr->dst_md)) {
      /* dnnl_wino.c: the geometry, then the transformed weights, in one block held by pr->wei */
      size_t off = (sizeof wg + 63) & ~(size_t)63, sz = off + alma__dn_wino_wsize(&wg);
      if (!(pr->wei = aligned_alloc(64, (sz + 63) & ~(size_t)63))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      memcpy(pr->wei, &wg, sizeof wg);
      alma__dn_wino_weights(&wg, wc->data, (float *)((char *)pr->wei + off));
      pr->wei_const = 1;
      pr->flags = DN_NATIVE_WINO;
      snprintf(pr->impl, sizeof pr->impl, "alma:wino4x3:%s", wg.B == 8 ? "aBcd8b" : "aBcd16b");
    }
  }
  if (pr->flags == DN_NATIVE_WINO) return run_wino(p, pr, n, x, b, res, os, out, done);
  if (fresh) {
    dnnl_dims_t sd, dd, bd = {OC}, st, dl, pl, pe;
    for (int i = 0; i < 2; i++) sd[i] = x->t.dims[i], dd[i] = os[0].dims[i];
    for (int i = 0; i < nspc; i++) {
      int k = sp_keep[i];
      sd[2 + i] = x->t.dims[2 + k];
      dd[2 + i] = os[0].dims[2 + k];
      st[i] = gm.s[k];
      dl[i] = gm.d[k] - 1;
      pl[i] = gm.pb[k];
      pe[i] = gm.pe[k];
    }
    dnnl_memory_desc_t s_any, w_any, b_md, d_any;
    dnnl_memory_desc_init_by_tag(&s_any, rc, sd, alma__dn_dtype(dt), dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&w_any, wnd, wd, alma__dn_dtype(dt), dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a);
    dnnl_memory_desc_init_by_tag(&d_any, rc, dd, alma__dn_dtype(dt), dnnl_format_tag_any);
    dnnl_convolution_desc_t cd;
    int wino = onednn_wino(p, dt, G, nspc, wd, wnd, st, dl);
    if (wino) {
      dnnl_primitive_attr_t a = alma__dn_post_attr(d, fused, 1.0f, 0, 0);
      if (!a) a = alma__dn_new_attr();
      wino = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_winograd, &s_any,
                                                        &w_any, b ? &b_md : NULL, &d_any, st, dl, pl, pe) == dnnl_success &&
             alma__dn_pd_create(p, &pr->pd, &cd, a, pr->impl, sizeof pr->impl) == dnnl_success;
      dnnl_primitive_attr_destroy(a);
    }
    if (!wino) {
      if (dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &s_any,
                                                     &w_any, b ? &b_md : NULL, &d_any, st, dl, pl, pe) != dnnl_success)
        return alma__dn_prim_decline(pr, n, "convolution descriptor rejected");
      if (!alma__dn_prim_pd(p, pr, n, &cd, alma__dn_post_attr(d, fused, 1.0f, 0, 0), "convolution")) return ALMA_OK;
    }
    if (fused && alma__dn_impl_is_ref(pr->impl)) {
      /* the post-ops would push the convolution onto a reference kernel: run the nodes apart */
      dnnl_primitive_desc_t plain_pd = NULL;
      dnnl_primitive_attr_t a0 = alma__dn_new_attr();
      char impl0[48] = "";
      if (alma__dn_pd_create(p, &plain_pd, &cd, a0, impl0, sizeof impl0) == dnnl_success && !alma__dn_impl_is_ref(impl0)) {
        dnnl_primitive_desc_destroy(plain_pd);
        dnnl_primitive_attr_destroy(a0);
        return alma__dn_prim_decline(pr, n, "post-ops only on a reference kernel (%s)", pr->impl);
      }
      if (plain_pd) dnnl_primitive_desc_destroy(plain_pd);
      dnnl_primitive_attr_destroy(a0);
    }
    dn_arg args[4] = {{DNNL_ARG_SRC, NULL}, {DNNL_ARG_WEIGHTS, NULL}};
    int na = 2;
    if (b) args[na++] = (dn_arg){DNNL_ARG_BIAS, &b_md};
    args[na++] = (dn_arg){DNNL_ARG_DST, NULL};
    if (!alma__dn_prim_args(p, pr, n, na, args)) return ALMA_OK;
    if (rc < r) {
      /* the values around the primitive see its layouts at their own rank */
      dnnl_dims_t xd, od;
      dnnl_memory_desc_t s_r, d_r;
      for (int i = 0; i < r; i++) xd[i] = x->t.dims[i], od[i] = os[0].dims[i];
      if (dnnl_memory_desc_reshape(&s_r, &pr->src_md, r, xd) != dnnl_success ||
          dnnl_memory_desc_reshape(&d_r, &pr->dst_md, r, od) != dnnl_success)
        return alma__dn_prim_decline(pr, n, "layout of the %d-D convolution not viewable at rank %d", nspc, r);
      pr->src_md = s_r;
      pr->dst_md = d_r;
    }
    if (wc) ALMA_TRY(alma__dn_cache_weights(p, pr, &wplain, wc->data, n));
  }
  if (pr->declined) return ALMA_OK;

  alma_status st = ALMA_OK;
  dn_buf *stmp = NULL, *wtmp = NULL, *db = NULL, *btmp = NULL;
  void *sp = NULL, *wp = pr->wei, *bp = NULL;
  st = alma__dn_val_get(p, x, &pr->src_md, 1, &sp, &stmp, n);
  if (st == ALMA_OK && !wp) {
    if ((st = alma__dn_val_plain(p, w, n)) == ALMA_OK) {
      if (dnnl_memory_desc_equal(&wplain, &pr->wei_md)) {
        wp = w->t.data;
      } else if (!(wtmp = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->wei_md)))) {
        st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      } else {
        st = alma__dn_reorder(p, &wplain, w->t.data, &pr->wei_md, wtmp->ptr, n);
        wp = wtmp->ptr;
        p->n_reorder_wei++;
      }
    }
  }
  if (st == ALMA_OK && b) st = alma__dn_f32_of(p, b, n, &bp, &btmp);
  if (st == ALMA_OK) {
    if (res) st = alma__dn_sum_dst(p, res, &pr->dst_md, &db, n);
    else if (!(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md)))) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  if (st == ALMA_OK) {
    void *ptrs[DN_MAX_MEM] = {sp, wp};
    int k = 2;
    if (b) ptrs[k++] = bp;
    ptrs[k++] = db->ptr;
    st = alma__dn_exec(p, pr, pr->p, ptrs, n);
  }
  alma__dn_unref(p, stmp);
  alma__dn_unref(p, wtmp);
  alma__dn_unref(p, btmp);
  return alma__dn_finish(p, st, db, out[0], &os[0], &pr->dst_md, done);
}

/* ---- ConvTranspose (oneDNN deconvolution) ------------------------------------------------------- */
/* The bias of a float32 deconvolution as a binary add after it (ba): oneDNN 2.6's deconvolution
 * adds its bias argument in a loop of its own, several times the primitive's cost on blocked
 * layouts (PP-OCRv4's 24-channel 160x224 output: 0.7 ms without, 2.5 ms with; a binary add is
 * about 0.1 ms). In the deconvolution's layout where src1 can follow it (more than one channel,
 * blocked by 8 or 16: 1), else in the plain layout after a reorder to it (2: one channel, whose
 * blocked layout pads it to 16 and on which oneDNN's binary and eltwise kernels are reference
 * loops). 0 when the add would land on a reference kernel: the caller passes the bias argument. */
static int deconv_bias_prim(dn_plan *p, const dn_prim *pr, dn_prim *ba, int r, const dnnl_dims_t dd, int64_t OC) {
  dnnl_dims_t bcd;
  for (int i = 0; i < r; i++) bcd[i] = i == 1 ? OC : 1;
  dnnl_memory_desc_t m0 = pr->dst_md, m1;
  int mode = 1;
  if (!alma__dn_blocked_src1(&m0, r, dd, bcd, F32, &m1)) {
    alma__dn_plain_md_of(&m0, r, dd, F32);
    alma__dn_plain_md_of(&m1, r, bcd, F32);
    mode = dnnl_memory_desc_equal(&m0, &pr->dst_md) ? 1 : 2;
  }
  alma__dn_prim_free(ba);
  dnnl_binary_desc_t bd;
  dnnl_primitive_attr_t a = alma__dn_new_attr();
  dnnl_status_t s = dnnl_binary_desc_init(&bd, dnnl_binary_add, &m0, &m1, &m0);
  if (s == dnnl_success) s = alma__dn_pd_create(p, &ba->pd, &bd, a, ba->impl, sizeof ba->impl);
  dnnl_primitive_attr_destroy(a);
  if (s == dnnl_success && !alma__dn_impl_is_ref(ba->impl) &&
      alma__dn_prim_mems(p, ba, 3, (dn_arg[]){{DNNL_ARG_SRC_0, &m0}, {DNNL_ARG_SRC_1, &m1}, {DNNL_ARG_DST, &m0}})) {
    ba->src_md = m0;
    ba->aux_md = m1;
    return mode;
  }
  alma__dn_prim_free(ba);
  return 0;
}

/* Adds the bias bp (OC floats) to the deconvolution's output *db as deconv_bias_prim planned;
 * mode 2 replaces *db by its plain copy. */
static alma_status deconv_bias_add(dn_plan *p, const dn_prim *pr, dn_prim *ba, dn_buf **db, void *bp, int64_t OC,
                                   const alma_node *n) {
  if (pr->flags == 2) {
    dn_buf *plain = alma__dn_alloc(p, dnnl_memory_desc_get_size(&ba->src_md));
    if (!plain) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    alma_status st = alma__dn_reorder(p, &pr->dst_md, (*db)->ptr, &ba->src_md, plain->ptr, n);
    alma__dn_unref(p, *db);
    *db = plain;
    if (st != ALMA_OK) return st;
  }
  /* src1 in its layout: OC floats, zeros to the end of the channel block */
  size_t nb = dnnl_memory_desc_get_size(&ba->aux_md);
  dn_buf *b1 = alma__dn_alloc(p, nb);
  if (!b1) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  memset(b1->ptr, 0, nb);
  memcpy(b1->ptr, bp, sizeof(float) * (size_t)OC);
  alma_status st = alma__dn_exec(p, ba, ba->p, (void *[DN_MAX_MEM]){(*db)->ptr, b1->ptr, (*db)->ptr}, n);
  alma__dn_unref(p, b1);
  return st;
}

alma_status alma__dn_run_deconv(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = alma__dn_get_prim(d, DN_PRIM_SINGLE), *ba = alma__dn_get_prim(d, DN_PRIM_AUX0);
  if (!pr || !ba) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0], *w = nin > 1 ? in[1] : NULL, *b = nin > 2 ? in[2] : NULL;
  alma_dtype dt = x ? x->t.dtype : F32;
  if (!alma__dn_is_fp(x) || !alma__dn_is_dt(w, dt) || (b && !alma__dn_is_fp(b)) || os[0].dtype != dt) return ALMA_OK;
  int r = x->t.rank, nsp = r - 2;
  if (r < 3 || r > 5 || w->t.rank != r || os[0].rank != r) return ALMA_OK;
  int64_t G = alma__attr_i(n, "group", 1), C = x->t.dims[1];
  if (G < 1 || C % G || w->t.dims[0] != C) return ALMA_OK;
  int64_t OCg = w->t.dims[1], OC = OCg * G, ICg = C / G;
  if (os[0].dims[1] != OC || (b && alma__numel(b->t.rank, b->t.dims) != OC)) return ALMA_OK;
  alma__nn_geom gm;
  if (alma__nn_geom_read(n, nsp, x->t.dims + 2, w->t.dims + 2, 1, &gm) != ALMA_OK) {
    alma__error_clear();
    return ALMA_OK;
  }
  /* begin pads as the EAGER kernel places the window; the end pad follows from the output size */
  const int64_t *ops = NULL, *pads = NULL;
  int nos = alma__attr_ints(n, "output_shape", &ops), have_pads = alma__attr_ints(n, "pads", &pads) > 0;
  int same = gm.auto_pad == ALMA__PAD_SAME_UPPER || gm.auto_pad == ALMA__PAD_SAME_LOWER;
  const int64_t *opad = NULL;
  int nop = alma__attr_ints(n, "output_padding", &opad);
  dnnl_dims_t st, dl, pl, pe;
  for (int i = 0; i < nsp; i++) {
    int64_t eff = (gm.k[i] - 1) * gm.d[i] + 1, outi = os[0].dims[2 + i];
    int64_t natural = gm.s[i] * (gm.in[i] - 1) + (nop == nsp ? opad[i] : 0) + eff;
    int64_t pb = gm.pb[i];
    if ((nos || same) && !(nos && have_pads && gm.auto_pad == ALMA__PAD_NOTSET)) {
      int64_t total = natural - outi, half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      pb = gm.auto_pad == ALMA__PAD_SAME_UPPER ? half : total - half;
    } else if (gm.auto_pad == ALMA__PAD_VALID) {
      pb = 0;
    }
    st[i] = gm.s[i];
    dl[i] = gm.d[i] - 1;
    pl[i] = pb;
    pe[i] = (gm.in[i] - 1) * gm.s[i] + eff - pb - outi;
    if (pb < 0 || pe[i] < 0) return ALMA_OK; /* oneDNN takes no negative padding */
  }
  const alma_tensor *wc = alma__dn_const(p->g, n->inputs[1]);
  dnnl_memory_desc_t key[3];
  int64_t ikey[8] = {wc != NULL, b != NULL};
  for (int i = 0; i < nsp; i++) ikey[2 + i] = pl[i] * 4096 + pe[i];
  alma__dn_val_md(x, &key[0]);
  alma__dn_val_md(w, &key[1]);
  memset(&key[2], 0, sizeof key[2]);
  if (b) alma__dn_val_md(b, &key[2]);
  /* ONNX weights are [C, M/group, k...]: oneDNN's (g)oihw dims with i before o in memory */
  int wnd = G > 1 ? r + 1 : r;
  dnnl_dims_t wd, ws;
  int64_t K = alma__numel(nsp, w->t.dims + 2);
  int o = G > 1 ? 1 : 0;
  if (G > 1) wd[0] = G, ws[0] = ICg * OCg * K;
  wd[o] = OCg;
  ws[o] = K;
  wd[o + 1] = ICg;
  ws[o + 1] = OCg * K;
  for (int i = 0; i < nsp; i++) wd[o + 2 + i] = w->t.dims[2 + i];
  if (nsp > 0) ws[wnd - 1] = 1;
  for (int i = wnd - 2; i >= o + 2; i--) ws[i] = ws[i + 1] * wd[i + 1];
  dnnl_memory_desc_t wsrc;
  dnnl_memory_desc_init_by_strides(&wsrc, wnd, wd, alma__dn_dtype(dt), ws);
  if (!alma__dn_key_match(pr, 3, key, ikey)) {
    dnnl_dims_t sd, dd, bd = {OC};
    for (int i = 0; i < r; i++) sd[i] = x->t.dims[i], dd[i] = os[0].dims[i];
    dnnl_memory_desc_t s_any, w_any, b_md, d_any;
    dnnl_memory_desc_init_by_tag(&s_any, r, sd, alma__dn_dtype(dt), dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&w_any, wnd, wd, alma__dn_dtype(dt), dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a);
    dnnl_memory_desc_init_by_tag(&d_any, r, dd, alma__dn_dtype(dt), dnnl_format_tag_any);
    /* float32: the bias as a binary add after the primitive (deconv_bias_add), not its bias
     * argument, which oneDNN's deconvolution adds in a slow loop of its own; the argument when
     * that add has no fast kernel */
    for (int with_bias = !(b && dt == F32);; with_bias = 1) {
      alma__dn_prim_begin(pr, 3, key, ikey); /* again on the second pass: frees the first one's */
      dnnl_deconvolution_desc_t dc;
      if (dnnl_dilated_deconvolution_forward_desc_init(&dc, dnnl_forward_inference, dnnl_deconvolution_direct, &s_any,
                                                       &w_any, b && with_bias ? &b_md : NULL, &d_any, st, dl, pl,
                                                       pe) != dnnl_success)
        return alma__dn_prim_decline(pr, n, "deconvolution descriptor rejected");
      dn_arg args[4] = {{DNNL_ARG_SRC, NULL}, {DNNL_ARG_WEIGHTS, NULL}};
      int na = 2;
      if (b && with_bias) args[na++] = (dn_arg){DNNL_ARG_BIAS, &b_md};
      args[na++] = (dn_arg){DNNL_ARG_DST, NULL};
      if (!alma__dn_prim_pd(p, pr, n, &dc, NULL, "deconvolution") || !alma__dn_prim_args(p, pr, n, na, args)) return ALMA_OK;
      if (with_bias || (pr->flags = deconv_bias_prim(p, pr, ba, r, dd, OC))) break;
    }
    if (wc) ALMA_TRY(alma__dn_cache_weights(p, pr, &wsrc, wc->data, n));
  }
  if (pr->declined) return ALMA_OK;
  alma_status stt = ALMA_OK;
  dn_buf *stmp = NULL, *wtmp = NULL, *db = NULL, *btmp = NULL;
  void *sp = NULL, *wp = pr->wei, *bp = NULL;
  stt = alma__dn_val_get(p, x, &pr->src_md, 1, &sp, &stmp, n);
  if (stt == ALMA_OK && !wp && (stt = alma__dn_val_plain(p, w, n)) == ALMA_OK) {
    if (!(wtmp = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->wei_md)))) {
      stt = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    } else {
      stt = alma__dn_reorder(p, &wsrc, w->t.data, &pr->wei_md, wtmp->ptr, n);
      wp = wtmp->ptr;
      p->n_reorder_wei++;
    }
  }
  if (stt == ALMA_OK && b) stt = alma__dn_f32_of(p, b, n, &bp, &btmp);
  if (stt == ALMA_OK && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md))))
    stt = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (stt == ALMA_OK) {
    void *ptrs[DN_MAX_MEM] = {sp, wp};
    int k = 2;
    if (b && !pr->flags) ptrs[k++] = bp;
    ptrs[k++] = db->ptr;
    stt = alma__dn_exec(p, pr, pr->p, ptrs, n);
    if (stt == ALMA_OK && pr->flags) stt = deconv_bias_add(p, pr, ba, &db, bp, OC, n);
  }
  alma__dn_unref(p, stmp);
  alma__dn_unref(p, wtmp);
  alma__dn_unref(p, btmp);
  if (stt != ALMA_OK) {
    alma__dn_unref(p, db);
    return stt;
  }
  alma__dn_val_set(out[0], &os[0], pr->flags == 2 ? &ba->src_md : &pr->dst_md, db);
  *done = 1;
  return ALMA_OK;
}

#endif
