/* DNNL runtime: elementwise nodes: eltwise, binary, PRelu and Cast between float32 and bfloat16. */
#ifdef ALMA_HAVE_DNNL

#include <math.h>

#include "ops/nn_util.h"
#include "runtimes/dnnl/dnnl_rt.h"

#define F32 ALMA_DTYPE_FLOAT32

/* ---- eltwise ------------------------------------------------------------------------------------- */
/* The node's eltwise steps on layout md: the first in pr->pd, a second (HardSigmoid's clip,
 * Selu's scale) in pr->p2. Declines pr when oneDNN has none. */
static alma_status eltwise_prims(dn_plan *p, dn_prim *pr, const alma_node *n, const dn_node *d, const dn_elt *elt,
                                 const dnnl_memory_desc_t *md) {
  for (int e = 0; e < d->n_elt; e++) {
    dnnl_eltwise_desc_t ed;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, elt[e].alg, md, elt[e].alpha,
                                       elt[e].beta) != dnnl_success)
      return alma__dn_prim_decline(pr, n, "eltwise descriptor rejected");
    if (e == 0) {
      if (!alma__dn_prim_pd(p, pr, n, &ed, NULL, "eltwise")) return ALMA_OK;
      continue;
    }
    /* the second step (HardSigmoid's clip, Selu's scale): its own primitive on the same data */
    dnnl_primitive_attr_t attr = alma__dn_new_attr();
    dnnl_status_t s = alma__dn_pd_create(p, &pd, &ed, attr, NULL, 0);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return alma__dn_prim_decline(pr, n, "no eltwise implementation (status %d)", (int)s);
    s = dnnl_primitive_create(&pr->p2, pd);
    dnnl_primitive_desc_destroy(pd);
    if (s != dnnl_success) return alma__dn_prim_decline(pr, n, "primitive creation failed");
  }
  return ALMA_OK;
}

alma_status alma__dn_run_eltwise(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                                 int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = alma__dn_get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0];
  if (!alma__dn_is_fp(x) || os[0].dtype != x->t.dtype || !alma__dn_same_dims(&x->t, &os[0])) return ALMA_OK;
  dn_elt elt[DN_MAX_ELT];
  memcpy(elt, d->elt, sizeof elt);
  int64_t ikey[8] = {0};
  if (d->rt_clip) { /* scalar bounds (x's type) from the inputs, as EAGER reads them */
    float b[2] = {-INFINITY, INFINITY};
    for (int k = 1; k < 3 && k < nin; k++) {
      if (!in[k]) continue;
      if (!alma__dn_is_fp(in[k]) || alma__numel(in[k]->t.rank, in[k]->t.dims) != 1) return ALMA_OK;
      ALMA_TRY(alma__dn_val_plain(p, in[k], n));
      b[k - 1] = (float)alma__get_f64(in[k]->t.data, in[k]->t.dtype, 0);
    }
    if (isnan(b[0]) || isnan(b[1]) || b[0] > b[1]) return ALMA_OK;
    elt[0].alpha = b[0];
    elt[0].beta = b[1];
    memcpy(&ikey[0], &b[0], sizeof(float));
    memcpy(&ikey[1], &b[1], sizeof(float));
  }
  dnnl_memory_desc_t key[1];
  alma__dn_val_md(x, &key[0]);
  if (!alma__dn_key_match(pr, 1, key, ikey)) {
    /* A channel-blocked layout the jit kernel does not take (one channel padded to a block: a
     * detector's score map after its last convolution) lands on oneDNN's reference loop, 40x the
     * jit one on PP-OCRv4's [1,1,320,448] Sigmoid: the plain layout then (pr->flags), after a
     * reorder. */
    dnnl_memory_desc_t md = key[0];
    for (int plain = 0;; plain = 1) {
      alma__dn_prim_begin(pr, 1, key, ikey);
      pr->flags = plain;
      if (plain) alma__dn_plain_md_of(&md, x->t.rank, x->t.dims, x->t.dtype);
      ALMA_TRY(eltwise_prims(p, pr, n, d, elt, &md));
      if (pr->declined || plain || !x->has_blk || !alma__dn_impl_is_ref(pr->impl)) break;
    }
    if (!pr->declined &&
        !alma__dn_prim_args(p, pr, n, 2, (dn_arg[]){{DNNL_ARG_SRC, &md}, {DNNL_ARG_DST, &md}}))
      return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  if (pr->flags) ALMA_TRY(alma__dn_val_plain(p, x, n));
  void *sp = x->has_blk && !pr->flags ? x->bbuf->ptr : x->t.data;
  dn_buf *db = alma__dn_val_steal(x, &pr->dst_md); /* in place when x dies here */
  if (!db && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md))))
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  void *ptrs[DN_MAX_MEM] = {sp, db->ptr};
  alma_status s = alma__dn_exec(p, pr, pr->p, ptrs, n);
  if (s == ALMA_OK && pr->p2) {
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, pr->mem[1]}, {DNNL_ARG_DST, pr->mem[1]}};
    if (dnnl_primitive_execute(pr->p2, p->strm, 2, args) != dnnl_success)
      s = alma__op_error(n, ALMA_ERR_INTERNAL, "oneDNN eltwise failed");
  }
  if (s != ALMA_OK) {
    alma__dn_unref(p, db);
    return s;
  }
  alma__dn_val_set(out[0], &os[0], &pr->dst_md, db);
  *done = 1;
  return ALMA_OK;
}

/* ---- binary -------------------------------------------------------------------------------------- */
/* src1 of a binary that broadcasts per channel (N or 1 x C x 1 x 1: a squeeze-and-excitation scale,
 * a bias) next to a channel-blocked src0 (nChw8c, nChw16c): the same blocking, which oneDNN's jit
 * binary requires of both; given plain, it took the reference kernel (EfficientNet-B0's SE Muls 25-97
 * ms each at batch 1, where the jit kernel streams them in well under one). 0 when src0 is not
 * channel-blocked in a standard order or the broadcast is another shape. */
int alma__dn_blocked_src1(const dnnl_memory_desc_t *m0, int r, const int64_t *dout, const int64_t *d1, alma_dtype dt,
                          dnnl_memory_desc_t *m1) {
  /* One channel: the operand is a scalar per sample, and oneDNN 2.6's binary took a blocked scalar
   * src1 as no operand at all (a one-channel ConvTranspose + bias came out without the bias); its
   * plain layout broadcasts right. */
  if (m0->format_kind != dnnl_blocked || r < 3 || r > 5 || d1[1] != dout[1] || dout[1] == 1) return 0;
  const dnnl_blocking_desc_t *bk = &m0->format_desc.blocking;
  if (bk->inner_nblks != 1 || bk->inner_idxs[0] != 1 || (bk->inner_blks[0] != 8 && bk->inner_blks[0] != 16)) return 0;
  for (int k = 2; k < r; k++)
    if (d1[k] != 1) return 0;
  int b16 = bk->inner_blks[0] == 16;
  dnnl_format_tag_t tag = r == 3 ? (b16 ? dnnl_aBc16b : dnnl_aBc8b)
                          : r == 4 ? (b16 ? dnnl_aBcd16b : dnnl_aBcd8b)
                                   : (b16 ? dnnl_aBcde16b : dnnl_aBcde8b);
  dnnl_dims_t a, b;
  for (int k = 0; k < r; k++) a[k] = dout[k], b[k] = d1[k];
  dnnl_memory_desc_t same;
  dnnl_data_type_t t = alma__dn_dtype(dt);
  if (dnnl_memory_desc_init_by_tag(&same, r, a, t, tag) != dnnl_success || !dnnl_memory_desc_equal(&same, m0)) return 0;
  return dnnl_memory_desc_init_by_tag(m1, r, b, t, tag) == dnnl_success;
}

alma_status alma__dn_run_binary(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = alma__dn_get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *a = in[0], *b = in[1];
  alma_dtype dt = os[0].dtype;
  if (!alma__dn_dt_ok(dt) || !alma__dn_is_dt(a, dt) || !alma__dn_is_dt(b, dt)) return ALMA_OK;
  int r = os[0].rank > 0 ? os[0].rank : 1;
  if (a->t.rank > r || b->t.rank > r) return ALMA_OK;
  int64_t da[ALMA_MAX_RANK], db_[ALMA_MAX_RANK], dout[ALMA_MAX_RANK];
  alma_tensor o1 = os[0];
  if (o1.rank == 0) o1.rank = 1, o1.dims[0] = 1;
  alma__dn_ext_dims(&a->t, r, da);
  alma__dn_ext_dims(&b->t, r, db_);
  alma__dn_ext_dims(&o1, r, dout);
  int a_full = !memcmp(da, dout, sizeof(int64_t) * (size_t)r), b_full = !memcmp(db_, dout, sizeof(int64_t) * (size_t)r);
  int commut = d->alg == dnnl_binary_add || d->alg == dnnl_binary_mul || d->alg == dnnl_binary_max || d->alg == dnnl_binary_min;
  int swap;
  if (a_full) swap = 0;
  else if (b_full && commut) swap = 1;
  else return ALMA_OK;
  dn_val *s0 = swap ? b : a, *s1 = swap ? a : b;
  int64_t *d1 = swap ? da : db_;
  int s1_full = swap ? a_full : b_full;
  /* src0 keeps its layout when it has the output's rank; src1 follows it or broadcasts plain */
  dnnl_memory_desc_t m0, m1;
  if (s0->t.rank == r && !(os[0].rank == 0)) alma__dn_val_md(s0, &m0);
  else {
    ALMA_TRY(alma__dn_val_plain(p, s0, n));
    alma__dn_plain_md_of(&m0, r, dout, dt);
  }
  int s1_blocked = 0;
  if (s1_full && s1->t.rank == r) {
    m1 = m0;
  } else if ((s1_blocked = alma__dn_blocked_src1(&m0, r, dout, d1, dt, &m1))) {
    if (s1->t.rank != r) ALMA_TRY(alma__dn_val_plain(p, s1, n));
  } else {
    ALMA_TRY(alma__dn_val_plain(p, s1, n));
    alma__dn_plain_md_of(&m1, r, d1, dt);
  }
  dnnl_memory_desc_t key[2] = {m0, m1};
  int64_t ikey[8] = {swap};
  if (!alma__dn_key_match(pr, 2, key, ikey)) {
    alma__dn_prim_begin(pr, 2, key, ikey);
    dnnl_binary_desc_t bd;
    if (dnnl_binary_desc_init(&bd, d->alg, &m0, &m1, &m0) != dnnl_success)
      return alma__dn_prim_decline(pr, n, "binary descriptor rejected");
    pr->src_md = m0;
    pr->aux_md = m1;
    if (!alma__dn_prim_pd(p, pr, n, &bd, NULL, "binary")) return ALMA_OK;
    /* a broadcast the jit kernel does not take (Swin's window mask, [1,64,3,49,49] + [1,64,1,49,49])
     * lands on oneDNN's reference kernel, 50-100 ns an element: EAGER's loop is far faster */
    if (alma__dn_impl_is_ref(pr->impl)) return alma__dn_prim_decline(pr, n, "this broadcast only on a reference kernel (%s)", pr->impl);
    if (!alma__dn_prim_args(p, pr, n, 3, (dn_arg[]){{DNNL_ARG_SRC_0, &m0}, {DNNL_ARG_SRC_1, &m1}, {DNNL_ARG_DST, &m0}}))
      return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  void *p0 = s0->has_blk && dnnl_memory_desc_equal(&s0->bmd, &m0) ? s0->bbuf->ptr : s0->t.data;
  void *p1 = NULL;
  dn_buf *tmp1 = NULL;
  if ((s1_full || s1_blocked) && s1->t.rank == r) {
    ALMA_TRY(alma__dn_val_get(p, s1, &m1, 1, &p1, &tmp1, n));
  } else if (s1_blocked) { /* a lower rank broadcast ([C,1,1]): its plain data as the output's rank, reordered */
    dnnl_memory_desc_t pl;
    alma__dn_plain_md_of(&pl, r, d1, dt);
    if (!(tmp1 = alma__dn_alloc(p, dnnl_memory_desc_get_size(&m1)))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    alma_status rs = alma__dn_reorder(p, &pl, s1->t.data, &m1, tmp1->ptr, n);
    if (rs != ALMA_OK) {
      alma__dn_unref(p, tmp1);
      return rs;
    }
    p1 = tmp1->ptr;
  } else {
    p1 = s1->t.data;
  }
  dn_buf *db = s0 != s1 ? alma__dn_val_steal(s0, &m0) : NULL;
  if (!db && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&m0)))) {
    alma__dn_unref(p, tmp1);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  void *ptrs[DN_MAX_MEM] = {p0, p1, db->ptr};
  alma_status s = alma__dn_exec(p, pr, pr->p, ptrs, n);
  alma__dn_unref(p, tmp1);
  if (s != ALMA_OK) {
    alma__dn_unref(p, db);
    return s;
  }
  if (os[0].rank == 0 || s0->t.rank != r) { /* plain data of the output's own shape */
    dnnl_memory_desc_t pl;
    alma__dn_plain_md_of(&pl, os[0].rank, os[0].dims, dt);
    alma__dn_val_set(out[0], &os[0], &pl, db);
  } else {
    alma__dn_val_set(out[0], &os[0], &m0, db);
  }
  *done = 1;
  return ALMA_OK;
}

/* ---- PRelu -------------------------------------------------------------------------------------------- */
alma_status alma__dn_run_prelu(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = alma__dn_get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0], *sl = in[1];
  if (!alma__dn_is_fp(x) || !alma__dn_is_dt(sl, x->t.dtype) || os[0].dtype != x->t.dtype || x->t.rank < 1 || sl->t.rank > x->t.rank ||
      !alma__dn_same_dims(&x->t, &os[0]))
    return ALMA_OK;
  int64_t sd[ALMA_MAX_RANK];
  alma__dn_ext_dims(&sl->t, x->t.rank, sd);
  for (int i = 0; i < x->t.rank; i++)
    if (sd[i] != 1 && sd[i] != x->t.dims[i]) return ALMA_OK;
  dnnl_memory_desc_t key[2];
  int64_t ikey[8] = {0};
  alma__dn_val_md(x, &key[0]);
  alma__dn_plain_md_of(&key[1], x->t.rank, sd, sl->t.dtype);
  if (!alma__dn_key_match(pr, 2, key, ikey)) {
    alma__dn_prim_begin(pr, 2, key, ikey);
    dnnl_prelu_desc_t pd;
    if (dnnl_prelu_forward_desc_init(&pd, dnnl_forward_inference, &key[0], &key[1]) != dnnl_success)
      return alma__dn_prim_decline(pr, n, "prelu descriptor rejected");
    const dn_arg args[] = {{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_WEIGHTS, &key[1]}, {DNNL_ARG_DST, &key[0]}};
    if (!alma__dn_prim_pd(p, pr, n, &pd, NULL, "prelu") || !alma__dn_prim_args(p, pr, n, 3, args)) return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  ALMA_TRY(alma__dn_val_plain(p, sl, n));
  void *sp = x->has_blk && !pr->flags ? x->bbuf->ptr : x->t.data;
  dn_buf *db = alma__dn_val_steal(x, &pr->dst_md);
  if (!db && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md))))
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  void *ptrs[DN_MAX_MEM] = {sp, sl->t.data, db->ptr};
  alma_status st = alma__dn_exec(p, pr, pr->p, ptrs, n);
  return alma__dn_finish(p, st, db, out[0], &os[0], &pr->dst_md, done);
}

/* ---- Cast float32 <-> bfloat16 ----------------------------------------------------------------------- */
/* An elementwise conversion of the value's buffer in whatever layout it has: oneDNN memory
 * descriptors count strides in elements, so the same descriptor with the other data type describes
 * the converted buffer, and blocked values stay blocked for the next primitive (the padding of a
 * blocked layout holds zeros, which convert to zeros), rounding to nearest even as ONNX's Cast
 * (EAGER) does. */
static void f32_to_bf16(const float *s, uint16_t *d, size_t cnt) {
  for (size_t i = 0; i < cnt; i++) d[i] = alma__f32_to_bf16(s[i]);
}

static void bf16_to_f32(const uint16_t *s, uint32_t *d, size_t cnt) {
  for (size_t i = 0; i < cnt; i++) d[i] = (uint32_t)s[i] << 16;
}

alma_status alma__dn_run_cast(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done) {
  (void)idx;
  dn_val *x = in[0];
  if (!alma__dn_is_fp(x) || !alma__dn_dt_ok(os[0].dtype) || !alma__dn_same_dims(&x->t, &os[0])) return ALMA_OK;
  dnnl_memory_desc_t xmd, ymd;
  alma__dn_val_md(x, &xmd); /* blocked when it has that form: what the next primitive likely takes */
  ymd = xmd;
  ymd.data_type = alma__dn_dtype(os[0].dtype);
  const void *sp = x->has_blk ? x->bbuf->ptr : x->t.data;
  size_t cnt = dnnl_memory_desc_get_size(&xmd) / alma_dtype_size(x->t.dtype);
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&ymd));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (x->t.dtype == os[0].dtype) memcpy(db->ptr, sp, dnnl_memory_desc_get_size(&xmd));
  else if (x->t.dtype == F32) f32_to_bf16(sp, db->ptr, cnt);
  else bf16_to_f32(sp, db->ptr, cnt);
  alma__dn_val_set(out[0], &os[0], &ymd, db);
  *done = 1;
  return ALMA_OK;
}

#endif
