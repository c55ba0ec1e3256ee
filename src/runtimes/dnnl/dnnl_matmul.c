/* DNNL runtime: MatMul and Gemm through the matmul primitive, and alma.Attention (matmul, softmax,
 * matmul primitives, or alma's blocked kernel of dnnl_attn.c). */
#ifdef ALMA_HAVE_DNNL

#include <math.h>

#include "ops/fused.h"
#include "ops/nn_util.h"
#include "runtimes/dnnl/dnnl_native.h"
#include "runtimes/dnnl/dnnl_rt.h"

#define F32 ALMA_DTYPE_FLOAT32

/* ---- MatMul and Gemm through the matmul primitive ------------------------------------------------ */
/* Constant weights that the matmul reads plain ([K, N] or its transpose) get a row stride of an odd
 * number of 64-byte lines: with an even number (N = 256, 512, 768, 1024, ... floats) gemm:jit's
 * packing of B maps the rows it reads together onto a few L1 sets. Measured on AVX2 with 2
 * threads: 256x512x512 1.03 -> 0.70 ms, 512x2048x512 8.4 -> 5.8 ms, 1024x256x256 0.81 -> 0.69 ms,
 * 128x256x768 0.30 -> 0.26 ms; 1024x256x1024 unchanged. Redoes pr->pd with the padded layout
 * (attr: a fresh one, consumed); keeps the first choice when oneDNN declines or picks another kernel. */
static void matmul_pad_weights(dn_plan *p, dn_prim *pr, const dnnl_memory_desc_t *amd, const dnnl_memory_desc_t *bias,
                               const dnnl_memory_desc_t *dmd, dnnl_primitive_attr_t attr) {
  const dnnl_memory_desc_t *w = dnnl_primitive_desc_query_md(pr->pd, dnnl_query_weights_md, 0);
  dnnl_memory_desc_t wmd;
  dnnl_primitive_desc_t pd = NULL;
  char impl[sizeof pr->impl];
  int ok = w && w->ndims == 2 && w->format_kind == dnnl_blocked && w->format_desc.blocking.inner_nblks == 0;
  if (ok) {
    wmd = *w;
    dnnl_dims_t st = {wmd.format_desc.blocking.strides[0], wmd.format_desc.blocking.strides[1]};
    int row = st[1] == 1 ? 0 : 1; /* the axis whose stride steps between rows */
    int64_t es = (int64_t)dnnl_data_type_size(wmd.data_type), bytes = st[row] * es, lines = (bytes + 63) / 64;
    ok = st[1 - row] == 1 && wmd.dims[1 - row] > 1 && bytes >= 256 && (bytes % 64 || lines % 2 == 0);
    if (ok) {
      st[row] = (lines | 1) * 64 / es;
      ok = dnnl_memory_desc_init_by_strides(&wmd, 2, wmd.dims, wmd.data_type, st) == dnnl_success;
    }
  }
  dnnl_matmul_desc_t md;
  if (ok && attr && dnnl_matmul_desc_init(&md, amd, &wmd, bias, dmd) == dnnl_success &&
      alma__dn_pd_create(p, &pd, &md, attr, impl, sizeof impl) == dnnl_success) {
    if (!strcmp(impl, pr->impl)) {
      dnnl_primitive_desc_destroy(pr->pd);
      pr->pd = pd;
      pd = NULL;
    }
  }
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (attr) dnnl_primitive_attr_destroy(attr);
}

/* Output buffer of a matmul: the fused residual (taken over or copied), else a new one. */
static alma_status mm_dst(dn_plan *p, dn_val *res, const alma_tensor *os, dn_buf **db, const alma_node *n) {
  dnnl_memory_desc_t pl;
  alma__dn_plain_md_of(&pl, os->rank, os->dims, os->dtype);
  if (res) return alma__dn_sum_dst(p, res, &pl, db, n);
  *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pl));
  return *db ? ALMA_OK : alma__errorf(ALMA_ERR_NOMEM, "out of memory");
}

alma_status alma__dn_run_matmul(dn_plan *p, int idx, int fused, dn_val **in, const alma_tensor *os, dn_val **out,
                                int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = alma__dn_get_prim(d, alma__dn_slot(fused));
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *a = in[0], *b = in[1];
  alma_dtype dt = os[0].dtype; /* A, B and the output; a fused bias goes in as float32 */
  if (!alma__dn_dt_ok(dt) || !alma__dn_is_dt(a, dt) || !alma__dn_is_dt(b, dt) || a->t.rank < 1 || b->t.rank < 1) return ALMA_OK;
  int64_t ad[ALMA_MAX_RANK + 1], bd[ALMA_MAX_RANK + 1];
  int ra = a->t.rank, rb = b->t.rank;
  if (ra == 1) ad[0] = 1, ad[1] = a->t.dims[0], ra = 2;
  else memcpy(ad, a->t.dims, sizeof(int64_t) * (size_t)ra);
  if (rb == 1) bd[0] = b->t.dims[0], bd[1] = 1, rb = 2;
  else memcpy(bd, b->t.dims, sizeof(int64_t) * (size_t)rb);
  int64_t K = ad[ra - 1], N = bd[rb - 1];
  if (bd[rb - 2] != K) return ALMA_OK;
  const alma_tensor *bc = alma__dn_const(p->g, n->inputs[1]);
  int collapse = rb == 2; /* [.., M, K] x [K, N]: one 2-D product over all rows of A */
  int r = collapse ? 2 : (ra > rb ? ra : rb);
  int64_t sa[DNNL_MAX_NDIMS], sb[DNNL_MAX_NDIMS], sd[DNNL_MAX_NDIMS];
  if (collapse) {
    sa[0] = alma__numel(ra, ad) / (K ? K : 1);
    sa[1] = K;
    sb[0] = K;
    sb[1] = N;
    sd[0] = sa[0];
    sd[1] = N;
  } else {
    for (int i = 0; i < r; i++) {
      sa[i] = i < r - ra ? 1 : ad[i - (r - ra)];
      sb[i] = i < r - rb ? 1 : bd[i - (r - rb)];
      sd[i] = i < r - 2 ? (sa[i] > sb[i] ? sa[i] : sb[i]) : 0;
    }
    sd[r - 2] = sa[r - 2];
    sd[r - 1] = N;
  }
  if (alma__numel(r, sd) != alma__numel(os[0].rank, os[0].dims)) return ALMA_OK;
  /* fused bias (a constant Add operand) and residual */
  dn_val *res = NULL, *bias = NULL;
  int64_t biasd[DNNL_MAX_NDIMS];
  if (fused) {
    const dn_post *q = alma__dn_find_post(d, fused, DP_BIAS);
    if (q) {
      bias = &p->vals[q->other];
      if (!alma__dn_is_fp(bias) || bias->t.rank > os[0].rank) return ALMA_OK;
      int64_t ob[ALMA_MAX_RANK];
      alma__dn_ext_dims(&bias->t, os[0].rank, ob);
      for (int i = 0; i < os[0].rank; i++)
        if (ob[i] != 1 && ob[i] != os[0].dims[i]) return ALMA_OK;
      if (collapse) {
        int64_t nb = alma__numel(bias->t.rank, bias->t.dims);
        if (nb != N && nb != 1) return ALMA_OK;
        if (nb == N && N != 1 && bias->t.rank > 0 && bias->t.dims[bias->t.rank - 1] != N) return ALMA_OK;
        biasd[0] = 1;
        biasd[1] = nb;
      } else {
        int off = r - os[0].rank; /* bias over the output's rank, extended like it */
        for (int i = 0; i < r; i++) biasd[i] = i < off ? 1 : ob[i - off];
        if (ra == 1 && rb > 1) return ALMA_OK; /* the dropped M axis would shift the bias */
        for (int i = 0; i < r; i++)
          if (biasd[i] != 1 && biasd[i] != sd[i]) return ALMA_OK;
      }
    }
    if (alma__dn_find_post(d, fused, DP_SUM) && !(res = alma__dn_sum_residual(p, d, fused, &os[0]))) return ALMA_OK;
  }
  dnnl_memory_desc_t amd, bmd_plain, dmd, biasmd;
  alma__dn_plain_md_of(&amd, r, sa, dt);
  alma__dn_plain_md_of(&bmd_plain, r, sb, dt);
  alma__dn_plain_md_of(&dmd, r, sd, dt);
  memset(&biasmd, 0, sizeof biasmd);
  if (bias) alma__dn_plain_md(&biasmd, r, biasd);
  dnnl_memory_desc_t key[4] = {amd, bmd_plain, dmd, biasmd};
  int64_t ikey[8] = {bc != NULL, collapse};
  if (!alma__dn_key_match(pr, 4, key, ikey)) {
    alma__dn_prim_begin(pr, 4, key, ikey);
    dnnl_memory_desc_t wmd = bmd_plain;
    if (bc && collapse) {
      dnnl_dims_t wd = {K, N};
      dnnl_memory_desc_init_by_tag(&wmd, 2, wd, alma__dn_dtype(dt), dnnl_format_tag_any);
    }
    dnnl_matmul_desc_t md;
    if (dnnl_matmul_desc_init(&md, &amd, &wmd, bias ? &biasmd : NULL, &dmd) != dnnl_success)
      return alma__dn_prim_decline(pr, n, "matmul descriptor rejected");
    if (!alma__dn_prim_pd(p, pr, n, &md, alma__dn_post_attr(d, fused, 1.0f, 0, 0), "matmul")) return ALMA_OK;
    if (bc && collapse) matmul_pad_weights(p, pr, &amd, bias ? &biasmd : NULL, &dmd, alma__dn_post_attr(d, fused, 1.0f, 0, 0));
    if (fused && alma__dn_impl_is_ref(pr->impl)) return alma__dn_prim_decline(pr, n, "post-ops only on a reference kernel (%s)", pr->impl);
    dn_arg args[4] = {{DNNL_ARG_SRC, &amd}, {DNNL_ARG_WEIGHTS, NULL}};
    int na = 2;
    if (bias) args[na++] = (dn_arg){DNNL_ARG_BIAS, &biasmd};
    args[na++] = (dn_arg){DNNL_ARG_DST, &dmd};
    if (!alma__dn_prim_args(p, pr, n, na, args)) return ALMA_OK;
    if (bc && !dnnl_memory_desc_equal(&pr->wei_md, &bmd_plain)) ALMA_TRY(alma__dn_cache_weights(p, pr, &bmd_plain, bc->data, n));
  }
  if (pr->declined) return ALMA_OK;
  ALMA_TRY(alma__dn_val_plain(p, a, n));
  void *wp = pr->wei;
  if (!wp) {
    ALMA_TRY(alma__dn_val_plain(p, b, n));
    wp = b->t.data;
  }
  void *biasp = NULL;
  dn_buf *biast = NULL, *db = NULL;
  if (bias) ALMA_TRY(alma__dn_f32_of(p, bias, n, &biasp, &biast));
  alma_status s = mm_dst(p, res, &os[0], &db, n);
  if (s == ALMA_OK) {
    void *ptrs[DN_MAX_MEM] = {a->t.data, wp};
    int k = 2;
    if (bias) ptrs[k++] = biasp;
    ptrs[k++] = db->ptr;
    s = alma__dn_exec(p, pr, pr->p, ptrs, n);
  }
  alma__dn_unref(p, biast);
  if (s != ALMA_OK) {
    alma__dn_unref(p, db);
    return s;
  }
  dnnl_memory_desc_t pl;
  alma__dn_plain_md_of(&pl, os[0].rank, os[0].dims, dt);
  alma__dn_val_set(out[0], &os[0], &pl, db);
  *done = 1;
  return ALMA_OK;
}

alma_status alma__dn_run_gemm(dn_plan *p, int idx, int fused, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                              int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = alma__dn_get_prim(d, alma__dn_slot(fused));
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *a = in[0], *b = in[1], *c = nin > 2 ? in[2] : NULL;
  alma_dtype dt = os[0].dtype; /* A, B, the output and C; C as a bias goes in as float32 */
  if (!alma__dn_dt_ok(dt) || !alma__dn_is_dt(a, dt) || !alma__dn_is_dt(b, dt) || (c && !alma__dn_is_dt(c, dt)) || a->t.rank != 2 || b->t.rank != 2 ||
      os[0].rank != 2)
    return ALMA_OK;
  int ta = alma__attr_i(n, "transA", 0) != 0, tb = alma__attr_i(n, "transB", 0) != 0;
  float alpha = alma__attr_f(n, "alpha", 1.0f), beta = alma__attr_f(n, "beta", 1.0f);
  int64_t M = ta ? a->t.dims[1] : a->t.dims[0], K = ta ? a->t.dims[0] : a->t.dims[1];
  int64_t N = tb ? b->t.dims[0] : b->t.dims[1], Kb = tb ? b->t.dims[1] : b->t.dims[0];
  if (K != Kb || os[0].dims[0] != M || os[0].dims[1] != N) return ALMA_OK;
  if (c && beta == 0.0f) c = NULL;
  int64_t cd[2] = {1, 1};
  if (c) {
    if (c->t.rank > 2) return ALMA_OK;
    if (c->t.rank == 2) cd[0] = c->t.dims[0], cd[1] = c->t.dims[1];
    else if (c->t.rank == 1) cd[1] = c->t.dims[0];
    if ((cd[0] != 1 && cd[0] != M) || (cd[1] != 1 && cd[1] != N)) return ALMA_OK;
  }
  int as_bias = c && alpha == 1.0f && beta == 1.0f;
  int prefill = c && !as_bias; /* dst = alpha A B + beta C through a sum post-op over C */
  dn_val *res = NULL;
  if (fused && alma__dn_find_post(d, fused, DP_SUM) && !(res = alma__dn_sum_residual(p, d, fused, &os[0]))) return ALMA_OK;
  if (res && prefill) return ALMA_OK;
  const alma_tensor *bc = alma__dn_const(p->g, n->inputs[1]);
  dnnl_dims_t dA = {M, K}, sA = {ta ? 1 : K, ta ? M : 1}, dB = {K, N}, sB = {tb ? 1 : N, tb ? K : 1};
  dnnl_memory_desc_t amd, bmd, dmd, cmd;
  dnnl_memory_desc_init_by_strides(&amd, 2, dA, alma__dn_dtype(dt), sA);
  dnnl_memory_desc_init_by_strides(&bmd, 2, dB, alma__dn_dtype(dt), sB);
  alma__dn_plain_md_of(&dmd, 2, (int64_t[]){M, N}, dt);
  memset(&cmd, 0, sizeof cmd);
  if (as_bias) alma__dn_plain_md(&cmd, 2, cd);
  dnnl_memory_desc_t key[4] = {amd, bmd, dmd, cmd};
  int64_t ikey[8] = {bc != NULL, prefill, cd[0], cd[1]};
  if (!alma__dn_key_match(pr, 4, key, ikey)) {
    alma__dn_prim_begin(pr, 4, key, ikey);
    dnnl_memory_desc_t wmd = bmd;
    if (bc) dnnl_memory_desc_init_by_tag(&wmd, 2, dB, alma__dn_dtype(dt), dnnl_format_tag_any);
    dnnl_matmul_desc_t md;
    if (dnnl_matmul_desc_init(&md, &amd, &wmd, as_bias ? &cmd : NULL, &dmd) != dnnl_success)
      return alma__dn_prim_decline(pr, n, "matmul descriptor rejected");
    if (!alma__dn_prim_pd(p, pr, n, &md, alma__dn_post_attr(d, fused, as_bias ? 1.0f : alpha, prefill, beta), "matmul")) return ALMA_OK;
    if (bc) matmul_pad_weights(p, pr, &amd, as_bias ? &cmd : NULL, &dmd, alma__dn_post_attr(d, fused, as_bias ? 1.0f : alpha, prefill, beta));
    if (fused && alma__dn_impl_is_ref(pr->impl)) return alma__dn_prim_decline(pr, n, "post-ops only on a reference kernel (%s)", pr->impl);
    dn_arg args[4] = {{DNNL_ARG_SRC, &amd}, {DNNL_ARG_WEIGHTS, NULL}};
    int na = 2;
    if (as_bias) args[na++] = (dn_arg){DNNL_ARG_BIAS, &cmd};
    args[na++] = (dn_arg){DNNL_ARG_DST, &dmd};
    if (!alma__dn_prim_args(p, pr, n, na, args)) return ALMA_OK;
    if (bc) ALMA_TRY(alma__dn_cache_weights(p, pr, &bmd, bc->data, n));
  }
  if (pr->declined) return ALMA_OK;
  ALMA_TRY(alma__dn_val_plain(p, a, n));
  void *wp = pr->wei;
  dn_buf *wtmp = NULL;
  if (!wp) {
    ALMA_TRY(alma__dn_val_plain(p, b, n));
    wp = b->t.data;
    if (!dnnl_memory_desc_equal(&pr->wei_md, &bmd)) { /* never expected: weights of a runtime B stay strided */
      if (!(wtmp = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->wei_md)))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      alma_status s = alma__dn_reorder(p, &bmd, wp, &pr->wei_md, wtmp->ptr, n);
      if (s != ALMA_OK) {
        alma__dn_unref(p, wtmp);
        return s;
      }
      wp = wtmp->ptr;
    }
  }
  void *cp = NULL;
  dn_buf *ctmp = NULL, *db = NULL;
  alma_status s = ALMA_OK;
  if (c) s = as_bias ? alma__dn_f32_of(p, c, n, &cp, &ctmp) : alma__dn_val_plain(p, c, n);
  if (s == ALMA_OK) s = mm_dst(p, res, &os[0], &db, n);
  if (s == ALMA_OK && prefill) { /* C broadcast into the output (same dtype), the sum post-op scales it */
    size_t es = alma_dtype_size(dt);
    char *y = db->ptr;
    const char *cv = c->t.data;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++)
        memcpy(y + (size_t)(i * N + j) * es, cv + (size_t)((cd[0] == 1 ? 0 : i) * cd[1] + (cd[1] == 1 ? 0 : j)) * es, es);
  }
  if (s == ALMA_OK) {
    void *ptrs[DN_MAX_MEM] = {a->t.data, wp};
    int k = 2;
    if (as_bias) ptrs[k++] = cp;
    ptrs[k++] = db->ptr;
    s = alma__dn_exec(p, pr, pr->p, ptrs, n);
  }
  alma__dn_unref(p, wtmp);
  alma__dn_unref(p, ctmp);
  if (s != ALMA_OK) {
    alma__dn_unref(p, db);
    return s;
  }
  alma__dn_val_set(out[0], &os[0], &dmd, db);
  *done = 1;
  return ALMA_OK;
}

/* ---- alma.Attention: softmax(scale Q K^T + mask) V ------------------------------------------------ */
/* v's own strided view (a lazy Transpose's, Slice's or Reshape's output) when it has one of rank r
 * that a gemm can read (unit stride on one of the last two axes), as its layout (offset dropped:
 * view_or_plain adds it to the pointer); 0 otherwise. */
static int strided_view(const dn_val *v, int r, dnnl_memory_desc_t *md) {
  if (!alma__dn_is_strided_view(v) || v->t.rank != r || v->bmd.ndims != r || v->bmd.data_type != dnnl_f32) return 0;
  const dnnl_dims_t *st = &v->bmd.format_desc.blocking.strides;
  if ((*st)[r - 1] != 1 && (*st)[r - 2] != 1) return 0;
  *md = v->bmd;
  md->offset0 = 0; /* view_or_plain passes the data from the offset on */
  return 1;
}

/* Whether a strided V ([.., Sk, D], rows along Sk) has a row stride that is a multiple of 2 KiB:
 * gemm:jit then reads it about 1.4x (2 KiB) to 2x (4 KiB and up) slower than from a plain copy, the
 * rows falling into the same few L1 sets (measured on AVX2 with [32, 128, 64] at stride 2048,
 * batch-8 multi-head attention's V: 0.74 ms against 0.37 ms plain; 768 or 2064 stay at plain's
 * speed). Such a V is copied instead (a 0.05 ms reorder). */
static int aliasing_rows(const dnnl_memory_desc_t *md) {
  const dnnl_dims_t *st = &md->format_desc.blocking.strides;
  int r = md->ndims;
  return (*st)[r - 1] == 1 && (*st)[r - 2] * (dnnl_dim_t)sizeof(float) % 2048 == 0;
}

/* The data of v: its strided view's (strided, from strided_view) or its plain data. */
static alma_status view_or_plain(dn_plan *p, dn_val *v, int strided, const alma_node *n, void **ptr) {
  if (strided) {
    *ptr = (char *)v->bbuf->ptr + v->bmd.offset0 * (dnnl_dim_t)sizeof(float);
    return ALMA_OK;
  }
  ALMA_TRY(alma__dn_val_plain(p, v, n));
  *ptr = v->t.data;
  return ALMA_OK;
}

/* md with its last two axes swapped (K [.., Sk, D] read as [.., D, Sk]). */
static void md_swap_last2(dnnl_memory_desc_t *out, const dnnl_memory_desc_t *in) {
  dnnl_memory_desc_t src = *in; /* out may be in */
  int pm[DNNL_MAX_NDIMS], r = src.ndims;
  for (int i = 0; i < r; i++) pm[i] = i;
  pm[r - 2] = r - 1;
  pm[r - 1] = r - 2;
  dnnl_memory_desc_permute_axes(out, &src, pm);
}

/* Creates Attention's primitives for these layouts: Q K^T (scaled, the mask as a binary post-op
 * when a real kernel takes it, else a binary primitive after), softmax, then (.) V. Declines pr
 * when oneDNN has none. */
static alma_status attn_build(dn_plan *p, dn_prim *pr, dn_prim *sm, dn_prim *mm2, dn_prim *bin, const alma_node *n,
                              int r, float scale, int has_mask, const dnnl_memory_desc_t *qmd,
                              const dnnl_memory_desc_t *kmd, const dnnl_memory_desc_t *vmd,
                              const dnnl_memory_desc_t *smd, const dnnl_memory_desc_t *mmd,
                              const dnnl_memory_desc_t *omd) {
  dnnl_matmul_desc_t m1;
  if (dnnl_matmul_desc_init(&m1, qmd, kmd, NULL, smd) != dnnl_success) return alma__dn_prim_decline(pr, n, "matmul descriptor rejected");
  for (int try_post = has_mask ? 1 : 0; try_post >= 0; try_post--) {
    dnnl_primitive_attr_t attr = alma__dn_new_attr();
    dnnl_primitive_attr_set_output_scales(attr, 1, 0, &scale);
    if (try_post) {
      dnnl_post_ops_t po = NULL;
      dnnl_post_ops_create(&po);
      dnnl_post_ops_append_binary(po, dnnl_binary_add, mmd);
      dnnl_primitive_attr_set_post_ops(attr, po);
      dnnl_post_ops_destroy(po);
    }
    dnnl_status_t s = alma__dn_pd_create(p, &pr->pd, &m1, attr, pr->impl, sizeof pr->impl);
    dnnl_primitive_attr_destroy(attr);
    if (s == dnnl_success && try_post && alma__dn_impl_is_ref(pr->impl)) {
      dnnl_primitive_desc_destroy(pr->pd);
      pr->pd = NULL;
      continue;
    }
    if (s != dnnl_success) {
      if (try_post) continue;
      return alma__dn_prim_decline(pr, n, "no matmul implementation (status %d)", (int)s);
    }
    pr->flags = try_post; /* 1: mask applied by the post-op */
    break;
  }
  const dn_arg args[] = {{DNNL_ARG_SRC, qmd},
                         {DNNL_ARG_WEIGHTS, kmd},
                         {DNNL_ARG_DST, smd},
                         {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, mmd}};
  if (!alma__dn_prim_args(p, pr, n, pr->flags ? 4 : 3, args)) return ALMA_OK;
  if (has_mask && !pr->flags) {
    dnnl_binary_desc_t bd;
    dnnl_primitive_attr_t a = alma__dn_new_attr();
    dnnl_status_t s = dnnl_binary_desc_init(&bd, dnnl_binary_add, smd, mmd, smd);
    if (s == dnnl_success) s = alma__dn_pd_create(p, &bin->pd, &bd, a, bin->impl, sizeof bin->impl);
    dnnl_primitive_attr_destroy(a);
    if (s != dnnl_success ||
        !alma__dn_prim_mems(p, bin, 3, (dn_arg[]){{DNNL_ARG_SRC_0, smd}, {DNNL_ARG_SRC_1, mmd}, {DNNL_ARG_DST, smd}}))
      return alma__dn_prim_decline(pr, n, "mask add not available");
  }
  dnnl_softmax_v2_desc_t sdsc;
  dnnl_primitive_attr_t a = alma__dn_new_attr();
  dnnl_status_t s = dnnl_softmax_v2_forward_desc_init(&sdsc, dnnl_forward_inference, dnnl_softmax_accurate, smd, smd, r - 1);
  if (s == dnnl_success) s = alma__dn_pd_create(p, &sm->pd, &sdsc, a, sm->impl, sizeof sm->impl);
  dnnl_primitive_attr_destroy(a);
  if (s != dnnl_success || !alma__dn_prim_mems(p, sm, 2, (dn_arg[]){{DNNL_ARG_SRC, smd}, {DNNL_ARG_DST, smd}}))
    return alma__dn_prim_decline(pr, n, "softmax not available");
  dnnl_matmul_desc_t m2;
  a = alma__dn_new_attr();
  s = dnnl_matmul_desc_init(&m2, smd, vmd, NULL, omd);
  if (s == dnnl_success) s = alma__dn_pd_create(p, &mm2->pd, &m2, a, mm2->impl, sizeof mm2->impl);
  dnnl_primitive_attr_destroy(a);
  if (s != dnnl_success || !alma__dn_prim_mems(p, mm2, 3, (dn_arg[]){{DNNL_ARG_SRC, smd}, {DNNL_ARG_WEIGHTS, vmd}, {DNNL_ARG_DST, omd}}))
    return alma__dn_prim_decline(pr, n, "second matmul not available");
  return ALMA_OK;
}

/* Whether x[0..n) is -inf throughout: a query row every key of which is masked. */
static int row_closed(const float *x, int64_t n) {
  for (int64_t j = 0; j < n; j++)
    if (x[j] != -INFINITY) return 0;
  return 1;
}

/* Strides (elements) of a rank-r layout: a strided view's own, or plain dims'. */
static void md_strides(const dnnl_memory_desc_t *md, int strided, int r, const int64_t *dims, int64_t *st) {
  if (strided) {
    for (int i = 0; i < r; i++) st[i] = md->format_desc.blocking.strides[i];
    return;
  }
  int64_t acc = 1;
  for (int i = r - 1; i >= 0; i--) st[i] = acc, acc *= dims[i];
}

/* Element offset of batch entry b (over the scores' batch dims bd[0..nb)) in a tensor of dims d and
 * strides st: its dims of 1 broadcast. */
static int64_t batch_offset(int64_t b, int nb, const int64_t *bd, const int64_t *d, const int64_t *st) {
  int64_t off = 0;
  for (int i = nb - 1; i >= 0; i--) {
    int64_t ix = b % bd[i];
    b /= bd[i];
    if (d[i] != 1) off += ix * st[i];
  }
  return off;
}

/* Attention by blocks of query rows on oneDNN's sgemm (dnnl_attn.c): causal attention, whose masked
 * key blocks are skipped, and decoding's few query rows. Q, K, V are read in place when they are
 * strided views with a contiguous last dim; the output goes through omd (a fused Transpose's axes).
 * Returns with *done 0 when the layouts do not fit (the caller then has the primitives' path or
 * EAGER). */
static alma_status attn_native(dn_plan *p, const alma_node *n, dn_val *q, dn_val *k, dn_val *v, dn_val *m, int r,
                               const int64_t *qd, const int64_t *kd, const int64_t *vd, const int64_t *sd,
                               const int64_t *mdims, int kt, float scale, int causal, int64_t coff, int onnx,
                               const dnnl_memory_desc_t *omd, const dnnl_memory_desc_t *tmd, const alma_tensor *ts,
                               dn_val *y, int *done) {
  dnnl_memory_desc_t qmd, kmd, vmd;
  int sq = strided_view(q, r, &qmd), sk = strided_view(k, r, &kmd), sv = strided_view(v, r, &vmd) && !aliasing_rows(&vmd);
  int64_t qs[ALMA_MAX_RANK], ks[ALMA_MAX_RANK], vs[ALMA_MAX_RANK], ms[ALMA_MAX_RANK], ys[ALMA_MAX_RANK];
  md_strides(&qmd, sq, r, qd, qs);
  md_strides(&kmd, sk, r, kd, ks);
  md_strides(&vmd, sv, r, vd, vs);
  /* a strided view whose last dim is not contiguous is read from a plain copy */
  if (sq && qs[r - 1] != 1) sq = 0, md_strides(&qmd, 0, r, qd, qs);
  if (sk && ks[r - 1] != 1) sk = 0, md_strides(&kmd, 0, r, kd, ks);
  if (sv && vs[r - 1] != 1) sv = 0, md_strides(&vmd, 0, r, vd, vs);
  for (int i = 0; i < r; i++) ys[i] = omd->format_desc.blocking.strides[i];
  if (omd->format_kind != dnnl_blocked || omd->format_desc.blocking.inner_nblks || ys[r - 1] != 1) return ALMA_OK;
  if (m) md_strides(NULL, 0, r, mdims, ms);
  dn_attn_geo a = {.Sq = sd[r - 2], .Sk = sd[r - 1], .D = qd[r - 1], .Dv = vd[r - 1], .kt = kt, .causal = causal,
                   .zero_masked = onnx, .coff = coff, .scale = scale, .q_ld = qs[r - 2], .k_ld = ks[r - 2],
                   .v_ld = vs[r - 2], .y_ld = ys[r - 2]};
  a.batch = alma__numel(r - 2, sd);
  if (m) {
    a.m_row = mdims[r - 2] == a.Sq && a.Sq > 1 ? ms[r - 2] : 0;
    a.m_col = mdims[r - 1] == a.Sk && a.Sk > 1 ? 1 : 0;
  }
  alma__dn_attn_plan(&a, p->threads);
  size_t offs = sizeof(int64_t) * (size_t)a.batch * 5, scr = alma__dn_attn_scratch(&a, p->threads);
  void *qp, *kp, *vp;
  ALMA_TRY(view_or_plain(p, q, sq, n, &qp));
  ALMA_TRY(view_or_plain(p, k, sk, n, &kp));
  ALMA_TRY(view_or_plain(p, v, sv, n, &vp));
  if (m) ALMA_TRY(alma__dn_val_plain(p, m, n));
  dn_buf *wb = alma__dn_alloc(p, offs + scr);
  dn_buf *ob = wb ? alma__dn_alloc(p, dnnl_memory_desc_get_size(tmd)) : NULL;
  if (!ob) {
    alma__dn_unref(p, wb);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  int64_t *o = wb->ptr;
  for (int64_t b = 0; b < a.batch; b++) {
    o[b] = batch_offset(b, r - 2, sd, qd, qs);
    o[a.batch + b] = batch_offset(b, r - 2, sd, kd, ks);
    o[2 * a.batch + b] = batch_offset(b, r - 2, sd, vd, vs);
    o[3 * a.batch + b] = m ? batch_offset(b, r - 2, sd, mdims, ms) : 0;
    o[4 * a.batch + b] = batch_offset(b, r - 2, sd, sd, ys);
  }
  a.q_off = o, a.k_off = o + a.batch, a.v_off = o + 2 * a.batch, a.m_off = o + 3 * a.batch, a.y_off = o + 4 * a.batch;
  a.q = qp, a.k = kp, a.v = vp, a.mask = m ? m->t.data : NULL, a.y = ob->ptr;
  alma_status st = alma__dn_attn(&a, p->threads, (float *)((char *)wb->ptr + offs))
                       ? ALMA_OK
                       : alma__op_error(n, ALMA_ERR_INTERNAL, "oneDNN's sgemm failed");
  alma__dn_unref(p, wb);
  return alma__dn_finish(p, st, ob, y, ts, tmd, done);
}

/* Q, K and V are read in their own strided layout when they are lazy Transposes' views (the
 * head-splitting transposes of multi-head attention cost no copy then); fused (a group with a
 * DP_PERM post-op, see plan_fuse_perm) writes the output through the Transpose after it, so that
 * the Transpose's output is produced directly. oneDNN's gemm takes such strides; if it ever
 * declines them, the node falls back to plain layouts for good (attn_plain). */
alma_status alma__dn_run_attn(dn_plan *p, int idx, int fused, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                              int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_val *q = in[0], *k = nin > 1 ? in[1] : NULL, *v = nin > 2 ? in[2] : NULL, *m = nin > 3 ? in[3] : NULL;
  if (!alma__dn_is_f32(q) || !alma__dn_is_f32(k) || !alma__dn_is_f32(v) || (m && !alma__dn_is_f32(m)) || os[0].dtype != F32) return ALMA_OK;
  int r = q->t.rank;
  if (k->t.rank > r) r = k->t.rank;
  if (v->t.rank > r) r = v->t.rank;
  if (q->t.rank < 2 || k->t.rank < 2 || v->t.rank < 2 || os[0].rank != r || (m && m->t.rank > r)) return ALMA_OK;
  int kt = alma__attr_i(n, "k_transposed", 0) != 0;
  int64_t qd[ALMA_MAX_RANK], kd[ALMA_MAX_RANK], vd[ALMA_MAX_RANK], sd[ALMA_MAX_RANK], md_[ALMA_MAX_RANK];
  alma__dn_ext_dims(&q->t, r, qd);
  alma__dn_ext_dims(&k->t, r, kd);
  alma__dn_ext_dims(&v->t, r, vd);
  int64_t Sq = qd[r - 2], D = qd[r - 1], Sk = kt ? kd[r - 1] : kd[r - 2];
  if ((kt ? kd[r - 2] : kd[r - 1]) != D || vd[r - 2] != Sk) return ALMA_OK;
  for (int i = 0; i < r - 2; i++) sd[i] = qd[i] > kd[i] ? qd[i] : kd[i];
  sd[r - 2] = Sq;
  sd[r - 1] = Sk;
  int onnx = alma__attr_i(n, "onnx_mask", 0) != 0;
  if (m) {
    alma__dn_ext_dims(&m->t, r, md_);
    for (int i = 0; i < r; i++)
      if (md_[i] != 1 && md_[i] != sd[i]) return ALMA_OK;
    /* ONNX's rules pad a shorter mask with -inf rather than broadcast it: the EAGER kernel does that */
    if (onnx && md_[r - 1] != Sk) return ALMA_OK;
  }
  /* the output through the Transpose after it (fused): its plain layout seen in the output's axes */
  alma_tensor ts = os[0];
  dnnl_memory_desc_t omd, tmd;
  const dn_post *pp = fused ? alma__dn_find_post(d, fused, DP_PERM) : NULL;
  if (fused && (!pp || d->attn_plain)) return ALMA_OK;
  if (pp) {
    int pm[DNNL_MAX_NDIMS], perm[DNNL_MAX_NDIMS];
    if (!alma__dn_transpose_perm(&p->g->nodes[pp->node], r, pm, perm)) return ALMA_OK;
    for (int i = 0; i < r; i++) ts.dims[i] = os[0].dims[perm[i]];
    alma__dn_plain_md(&tmd, r, ts.dims);
    dnnl_memory_desc_permute_axes(&omd, &tmd, perm);
  } else {
    alma__dn_plain_md(&omd, os[0].rank, os[0].dims);
    tmd = omd;
  }
  const alma_attr *sa = alma__node_attr(n, "scale");
  float scale = sa ? alma__attr_f(n, "scale", 1.0f) : (float)(1.0 / sqrt((double)(D > 0 ? D : 1)));
  int causal;
  int64_t coff;
  const alma_tensor *tin[5] = {&q->t, &k->t, &v->t, m ? &m->t : NULL, nin > 4 && in[4] ? &in[4]->t : NULL};
  ALMA_TRY(alma__attn_causal_offset(n, tin, nin < 5 ? nin : 5, Sq, Sk, &causal, &coff));
  if (causal) /* only the blocked kernel applies a causal frontier; EAGER when the layouts do not fit */
    return attn_native(p, n, q, k, v, m, r, qd, kd, vd, sd, m ? md_ : NULL, kt, scale, causal, coff, onnx, &omd, &tmd,
                       &ts, out[0], done);
  dnnl_memory_desc_t qmd, kmd, vmd, smd, mmd;
  int sq = 0, sk = 0, sv = 0;
  dn_prim *pr = alma__dn_get_prim(d, DN_PRIM_SINGLE), *sm = alma__dn_get_prim(d, DN_PRIM_AUX0), *mm2 = alma__dn_get_prim(d, DN_PRIM_AUX1),
          *bin = alma__dn_get_prim(d, DN_PRIM_AUX2);
  if (!pr || !sm || !mm2 || !bin) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (;;) {
    if (!d->attn_plain) {
      sq = strided_view(q, r, &qmd);
      sk = strided_view(k, r, &kmd);
      sv = strided_view(v, r, &vmd) && !aliasing_rows(&vmd);
    }
    if (!sq) alma__dn_plain_md(&qmd, r, qd);
    if (!sk) alma__dn_plain_md(&kmd, r, kd);
    if (!kt) md_swap_last2(&kmd, &kmd);
    if (!sv) alma__dn_plain_md(&vmd, r, vd);
    alma__dn_plain_md(&smd, r, sd);
    memset(&mmd, 0, sizeof mmd);
    if (m) alma__dn_plain_md(&mmd, r, md_);
    dnnl_memory_desc_t key[5] = {qmd, kmd, vmd, mmd, omd};
    int64_t ikey[8] = {kt};
    memcpy(&ikey[1], &scale, sizeof scale);
    if (alma__dn_key_match(pr, 5, key, ikey)) break;
    alma__dn_prim_begin(pr, 5, key, ikey);
    alma__dn_prim_free(sm);
    alma__dn_prim_free(mm2);
    alma__dn_prim_free(bin);
    ALMA_TRY(attn_build(p, pr, sm, mm2, bin, n, r, scale, m != NULL, &qmd, &kmd, &vmd, &smd, &mmd, &omd));
    if (!pr->declined || d->attn_plain || !(sq || sk || sv || pp)) break;
    d->attn_plain = 1; /* strided forms declined: plain from now on, no fused output transpose */
    sq = sk = sv = 0;
    if (pp) return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  void *qp, *kp, *vp;
  ALMA_TRY(view_or_plain(p, q, sq, n, &qp));
  ALMA_TRY(view_or_plain(p, k, sk, n, &kp));
  ALMA_TRY(view_or_plain(p, v, sv, n, &vp));
  if (m) ALMA_TRY(alma__dn_val_plain(p, m, n));
  dn_buf *sb = alma__dn_alloc(p, dnnl_memory_desc_get_size(&smd));
  dn_buf *ob = sb ? alma__dn_alloc(p, dnnl_memory_desc_get_size(&tmd)) : NULL;
  if (!ob) {
    alma__dn_unref(p, sb);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  void *p1[DN_MAX_MEM] = {qp, kp, sb->ptr, m ? m->t.data : NULL};
  alma_status st = alma__dn_exec(p, pr, pr->p, p1, n);
  if (st == ALMA_OK && m && !pr->flags) {
    void *pb[DN_MAX_MEM] = {sb->ptr, m->t.data, sb->ptr};
    st = alma__dn_exec(p, bin, bin->p, pb, n);
  }
  /* onnx_mask: a query whose keys are all masked gets zeros (softmax would give NaN). Such a row
   * needs a fully -inf mask row, so the scores are scanned only when the (smaller) mask has one. */
  uint8_t *zero_rows = NULL;
  int64_t rows = Sk > 0 ? (int64_t)(dnnl_memory_desc_get_size(&smd) / sizeof(float)) / Sk : 0;
  int closed_mask_row = 0;
  if (st == ALMA_OK && onnx && m && Sk > 0)
    for (int64_t i = 0, mn = alma_tensor_numel(&m->t); !closed_mask_row && i + Sk <= mn; i += Sk)
      closed_mask_row = row_closed((const float *)m->t.data + i, Sk);
  if (closed_mask_row) {
    if (!(zero_rows = calloc((size_t)rows, 1))) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; zero_rows && i < rows; i++) zero_rows[i] = (uint8_t)row_closed((const float *)sb->ptr + i * Sk, Sk);
  }
  if (st == ALMA_OK) {
    void *ps[DN_MAX_MEM] = {sb->ptr, sb->ptr};
    st = alma__dn_exec(p, sm, sm->p, ps, n);
  }
  if (zero_rows) {
    float *pr_ = sb->ptr;
    for (int64_t i = 0; i < rows; i++)
      if (zero_rows[i]) memset(pr_ + i * Sk, 0, sizeof(float) * (size_t)Sk);
    free(zero_rows);
  }
  if (st == ALMA_OK) {
    void *p2[DN_MAX_MEM] = {sb->ptr, vp, ob->ptr};
    st = alma__dn_exec(p, mm2, mm2->p, p2, n);
  }
  alma__dn_unref(p, sb);
  return alma__dn_finish(p, st, ob, out[0], &ts, &tmd, done);
}

#endif
