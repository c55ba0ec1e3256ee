/* DNNL runtime: the primitive plumbing the kernels share: a node's primitive slots keyed by layout,
 * declining, attributes with the fused post-ops, memories, execution and constant weights. */
#ifdef ALMA_HAVE_DNNL

#include "runtimes/dnnl/dnnl_rt.h"

#define F32 ALMA_DTYPE_FLOAT32

/* ---- primitive helpers ------------------------------------------------------------------------ */
void alma__dn_prim_free(dn_prim *pr) {
  if (pr->p) dnnl_primitive_destroy(pr->p);
  if (pr->p2) dnnl_primitive_destroy(pr->p2);
  if (pr->pd) dnnl_primitive_desc_destroy(pr->pd);
  for (int i = 0; i < pr->nmem; i++)
    if (pr->mem[i]) dnnl_memory_destroy(pr->mem[i]);
  free(pr->wei);
  free(pr->wei2);
  memset(pr, 0, sizeof *pr);
}

dn_prim *alma__dn_get_prim(dn_node *d, int which) {
  if (!d->prim[which]) d->prim[which] = calloc(1, sizeof(dn_prim));
  return d->prim[which];
}

int alma__dn_key_match(const dn_prim *pr, int nkey, const dnnl_memory_desc_t *key, const int64_t *ikey) {
  if (!pr->valid || pr->nkey != nkey) return 0;
  for (int k = 0; k < nkey; k++)
    if (!dnnl_memory_desc_equal(&pr->key[k], &key[k])) return 0;
  for (int k = 0; k < 8; k++)
    if (pr->ikey[k] != ikey[k]) return 0;
  return 1;
}

void alma__dn_prim_begin(dn_prim *pr, int nkey, const dnnl_memory_desc_t *key, const int64_t *ikey) {
  alma__dn_prim_free(pr);
  pr->valid = 1;
  pr->nkey = nkey;
  for (int k = 0; k < nkey; k++) pr->key[k] = key[k];
  for (int k = 0; k < 8; k++) pr->ikey[k] = ikey[k];
}

/* Frees what was built and records why: the node runs on EAGER for this key. */
alma_status alma__dn_prim_decline(dn_prim *pr, const alma_node *n, const char *fmt, ...) {
  char why[sizeof pr->why]; /* formatted first: the arguments may point into pr (its impl) */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  int nkey = pr->nkey;
  dnnl_memory_desc_t key[DN_MAX_KEY];
  int64_t ikey[8];
  memcpy(key, pr->key, sizeof key);
  memcpy(ikey, pr->ikey, sizeof ikey);
  alma__dn_prim_begin(pr, nkey, key, ikey);
  pr->declined = 1;
  memcpy(pr->why, why, sizeof why);
  ALMA_LOGD("DNNL: node '%s' (%s) runs on EAGER: %s", n->name, n->op_type, pr->why);
  return ALMA_OK;
}

static int add_mem(dn_plan *p, dn_prim *pr, int arg, const dnnl_memory_desc_t *md) {
  if (pr->nmem >= DN_MAX_MEM) return 0;
  if (dnnl_memory_create(&pr->mem[pr->nmem], md, p->eng, DNNL_MEMORY_NONE) != dnnl_success) return 0;
  pr->arg[pr->nmem++] = arg;
  return 1;
}

/* Creates the primitive from pr->pd and the scratchpad slot (last). */
static int prim_finish(dn_plan *p, dn_prim *pr) {
  if (dnnl_primitive_create(&pr->p, pr->pd) != dnnl_success) return 0;
  const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pr->pd, dnnl_query_scratchpad_md, 0);
  if (smd && smd->ndims > 0 && dnnl_memory_desc_get_size(smd) > 0) return add_mem(p, pr, DNNL_ARG_SCRATCHPAD, smd);
  return 1;
}

dnnl_status_t alma__dn_pd_create(dn_plan *p, dnnl_primitive_desc_t *pd, const void *op_desc,
                                 const_dnnl_primitive_attr_t attr, char *impl, size_t nimpl) {
  *pd = NULL;
  dnnl_status_t s = dnnl_primitive_desc_create(pd, op_desc, attr, p->eng, NULL);
  if (s == dnnl_success && impl) {
    const char *name = NULL;
    if (dnnl_primitive_desc_query(*pd, dnnl_query_impl_info_str, 0, &name) != dnnl_success || !name) name = "?";
    snprintf(impl, nimpl, "%s", name);
  }
  return s;
}

alma_status alma__dn_exec(dn_plan *p, dn_prim *pr, dnnl_primitive_t prim, void *const *ptrs, const alma_node *n) {
  dnnl_exec_arg_t args[DN_MAX_MEM];
  for (int i = 0; i < pr->nmem; i++) {
    void *ptr = ptrs[i];
    if (pr->arg[i] == DNNL_ARG_SCRATCHPAD) {
      const dnnl_memory_desc_t *md = NULL;
      dnnl_memory_get_memory_desc(pr->mem[i], &md);
      ptr = alma__dn_scratch(p, md ? dnnl_memory_desc_get_size(md) : 0);
      if (!ptr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory (oneDNN scratchpad)");
    }
    dnnl_memory_set_data_handle(pr->mem[i], ptr);
    args[i].arg = pr->arg[i];
    args[i].memory = pr->mem[i];
  }
  dnnl_status_t s = dnnl_primitive_execute(prim, p->strm, pr->nmem, args);
  if (s != dnnl_success) return alma__op_error(n, ALMA_ERR_INTERNAL, "oneDNN %s failed (status %d)", pr->impl, (int)s);
  return ALMA_OK;
}

dnnl_primitive_attr_t alma__dn_new_attr(void) {
  dnnl_primitive_attr_t a = NULL;
  if (dnnl_primitive_attr_create(&a) != dnnl_success) return NULL;
  dnnl_primitive_attr_set_scratchpad_mode(a, dnnl_scratchpad_mode_user);
  return a;
}

/* Attribute with the group's eltwise, sum and depthwise post-ops (bias and norm-relu are not
 * post-ops); fused as alma__dn_npost takes it. */
dnnl_primitive_attr_t alma__dn_post_attr(const dn_node *d, int fused, float out_scale, int extra_sum, float sum_scale) {
  dnnl_primitive_attr_t a = alma__dn_new_attr();
  if (!a) return NULL;
  if (out_scale != 1.0f) dnnl_primitive_attr_set_output_scales(a, 1, 0, &out_scale);
  dnnl_post_ops_t po = NULL;
  if (dnnl_post_ops_create(&po) != dnnl_success) {
    dnnl_primitive_attr_destroy(a);
    return NULL;
  }
  if (extra_sum) dnnl_post_ops_append_sum(po, sum_scale);
  for (int k = 0; k < alma__dn_npost(d, fused); k++) {
    const dn_post *q = &d->post[k];
    if (q->type == DP_ELT)
      for (int e = 0; e < q->n_elt; e++) dnnl_post_ops_append_eltwise(po, 1.0f, q->elt[e].alg, q->elt[e].alpha, q->elt[e].beta);
    else if (q->type == DP_SUM)
      dnnl_post_ops_append_sum(po, 1.0f);
    else if (q->type == DP_DW) /* 3x3, left/top padding 1 (the right/bottom follows from the output size) */
      dnnl_post_ops_append_dw(po, dnnl_f32, q->dw_bias ? dnnl_f32 : dnnl_data_type_undef, dnnl_f32, 3, q->stride, 1, 0, 0,
                              NULL);
  }
  if (dnnl_post_ops_len(po) > 0) dnnl_primitive_attr_set_post_ops(a, po);
  dnnl_post_ops_destroy(po);
  return a;
}

/* The primitive descriptor of a node for op_desc and attr (NULL: alma__dn_new_attr(); taken over and
 * destroyed either way), its implementation name in pr->impl. 0 when oneDNN has none: the node
 * is declined for this key. */
int alma__dn_prim_pd(dn_plan *p, dn_prim *pr, const alma_node *n, const void *op_desc, dnnl_primitive_attr_t attr,
                     const char *what) {
  if (!attr) attr = alma__dn_new_attr();
  dnnl_status_t s = alma__dn_pd_create(p, &pr->pd, op_desc, attr, pr->impl, sizeof pr->impl);
  dnnl_primitive_attr_destroy(attr);
  if (s == dnnl_success) return 1;
  alma__dn_prim_decline(pr, n, "no %s implementation (status %d)", what, (int)s);
  return 0;
}

/* The primitive from pr->pd with a memory per argument, in order (alma__dn_exec's ptrs follow it),
 * then the scratchpad; the layouts of SRC, WEIGHTS and DST are kept in pr->src_md/wei_md/dst_md.
 * 0 when oneDNN fails. */
int alma__dn_prim_mems(dn_plan *p, dn_prim *pr, int nargs, const dn_arg *args) {
  for (int k = 0; k < nargs; k++) {
    const dnnl_memory_desc_t *md = args[k].md;
    if (!md) md = dnnl_primitive_desc_query_md(pr->pd, dnnl_query_exec_arg_md, args[k].arg);
    if (!md || !add_mem(p, pr, args[k].arg, md)) return 0;
    if (args[k].arg == DNNL_ARG_SRC) pr->src_md = *md;
    else if (args[k].arg == DNNL_ARG_WEIGHTS) pr->wei_md = *md;
    else if (args[k].arg == DNNL_ARG_DST) pr->dst_md = *md;
  }
  return prim_finish(p, pr);
}

/* alma__dn_prim_mems for a node's own primitive: on failure the node is declined for this key. */
int alma__dn_prim_args(dn_plan *p, dn_prim *pr, const alma_node *n, int nargs, const dn_arg *args) {
  if (alma__dn_prim_mems(p, pr, nargs, args)) return 1;
  alma__dn_prim_decline(pr, n, "primitive creation failed");
  return 0;
}

/* The first post-op of type among those the primitive applies (fused: see alma__dn_npost). */
const dn_post *alma__dn_find_post(const dn_node *d, int fused, int type) {
  for (int k = 0; k < alma__dn_npost(d, fused); k++)
    if (d->post[k].type == type) return &d->post[k];
  return NULL;
}

int alma__dn_same_dims(const alma_tensor *a, const alma_tensor *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

/* The residual of a fused sum: live, of the output's dtype and exactly its shape. */
dn_val *alma__dn_sum_residual(dn_plan *p, const dn_node *d, int fused, const alma_tensor *os) {
  const dn_post *q = alma__dn_find_post(d, fused, DP_SUM);
  if (!q) return NULL;
  dn_val *r = &p->vals[q->other];
  return alma__dn_is_dt(r, os->dtype) && alma__dn_same_dims(&r->t, os) ? r : NULL;
}

/* v's plain data as float32: its own, or converted into *tmp (caller unrefs) from bfloat16. For
 * the parameters oneDNN takes in float32 only (normalization scale/shift/statistics) or best so
 * (biases: every bf16 convolution and matmul accepts an f32 bias). */
alma_status alma__dn_f32_of(dn_plan *p, dn_val *v, const alma_node *n, void **ptr, dn_buf **tmp) {
  *tmp = NULL;
  ALMA_TRY(alma__dn_val_plain(p, v, n));
  if (v->t.dtype == F32) {
    *ptr = v->t.data;
    return ALMA_OK;
  }
  int64_t cnt = alma__numel(v->t.rank, v->t.dims);
  if (!(*tmp = alma__dn_alloc(p, (size_t)cnt * sizeof(float)))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  float *d = (*tmp)->ptr;
  for (int64_t i = 0; i < cnt; i++) d[i] = (float)alma__get_f64(v->t.data, v->t.dtype, i);
  *ptr = d;
  return ALMA_OK;
}

/* A buffer in layout md holding r's data: r's own when it can be taken over, else a copy. */
alma_status alma__dn_sum_dst(dn_plan *p, dn_val *r, const dnnl_memory_desc_t *md, dn_buf **out, const alma_node *n) {
  *out = alma__dn_val_steal(r, md);
  if (*out) return ALMA_OK;
  dn_buf *b = alma__dn_alloc(p, dnnl_memory_desc_get_size(md));
  if (!b) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dnnl_memory_desc_t rmd;
  alma__dn_val_md(r, &rmd);
  alma_status st;
  if (dnnl_memory_desc_equal(&rmd, md)) {
    memcpy(b->ptr, r->has_blk ? r->bbuf->ptr : r->t.data, dnnl_memory_desc_get_size(md));
    st = ALMA_OK;
  } else {
    st = alma__dn_reorder(p, &rmd, r->has_blk ? r->bbuf->ptr : r->t.data, md, b->ptr, n);
    p->n_reorder_in++;
  }
  if (st != ALMA_OK) alma__dn_unref(p, b);
  else *out = b;
  return st;
}

/* Reorders constant weights (plain layout pmd) once into the primitive's layout. */
alma_status alma__dn_cache_weights(dn_plan *p, dn_prim *pr, const dnnl_memory_desc_t *pmd, const void *data,
                                   const alma_node *n) {
  size_t sz = dnnl_memory_desc_get_size(&pr->wei_md);
  pr->wei = aligned_alloc(64, (sz + 63) & ~(size_t)63);
  if (!pr->wei) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  pr->wei_const = 1;
  p->n_reorder_wei++;
  return alma__dn_reorder(p, pmd, (void *)data, &pr->wei_md, pr->wei, n);
}

void alma__dn_ext_dims(const alma_tensor *t, int r, int64_t *dims) {
  int off = r - t->rank;
  for (int i = 0; i < r; i++) dims[i] = i < off ? 1 : t->dims[i - off];
}

#endif
