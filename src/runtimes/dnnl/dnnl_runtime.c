/* DNNL: oneDNN (Debian's libdnnl 2.x, C API) as an alma runtime.
 *
 * compile() classifies every node (a oneDNN primitive or EAGER) and groups a Conv/MatMul/Gemm or
 * BatchNormalization with the chain of single-consumer nodes after it that oneDNN can apply as
 * post-ops (eltwise activations, a residual Add as a `sum`, a constant bias Add). run() walks the
 * nodes in order with its own executor: values produced by primitives stay in the layout the
 * primitive picked (blocked nChw8c for convolutions on AVX2) across consecutive DNNL nodes, and
 * are reordered to plain only for EAGER nodes and graph outputs. Primitives are created on first
 * use for the concrete shapes and layouts and cached per node (re-created when they change);
 * constant weights are reordered once into the primitive's layout and kept. Activation buffers come
 * from a per-plan pool so that steady-state runs neither map nor fault pages.
 *
 * Graphs with subgraph operators (If, Loop) run through the shared executor (exec.h) with a hook
 * that takes the nodes oneDNN supports one by one, in plain layout and without fusion.
 *
 * Threads: Debian builds oneDNN with OpenMP; the plan sets the OpenMP thread count
 * (omp_set_num_threads, looked up in the process) before creating and running primitives. */
#ifdef ALMA_HAVE_DNNL

#include <dlfcn.h>
#include <math.h>

#include "ops/contrib_bert.h"
#include "ops/gemm_packed.h"
#include "runtimes/dnnl/dnnl_rt.h"
#include "runtimes/exec.h"

/* ---- threads ------------------------------------------------------------------------------- */
static int set_threads(int n) {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
  static void (*fn)(int);
  static int looked;
  if (!looked) {
    void *sym = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    memcpy(&fn, &sym, sizeof fn);
    looked = 1;
  }
  if (fn) fn(n);
  return fn != NULL;
#else
  (void)n;
  return 0;
#endif
}

static const char *threading_name(void) {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
  return "OpenMP";
#elif DNNL_CPU_RUNTIME == DNNL_RUNTIME_TBB
  return "TBB";
#elif DNNL_CPU_RUNTIME == DNNL_RUNTIME_SEQ
  return "sequential";
#else
  return "threadpool";
#endif
}

/* ---- memory pool ---------------------------------------------------------------------------- */
dn_buf *alma__dn_alloc(dn_plan *p, size_t size) {
  size = (size + 63) & ~(size_t)63;
  if (!size) size = 64;
  dn_buf *b = malloc(sizeof *b);
  if (!b) return NULL;
  int best = -1;
  for (int i = 0; i < p->npool; i++) /* best fit: the smallest free buffer that holds size */
    if (p->pool[i].size >= size && (best < 0 || p->pool[i].size < p->pool[best].size)) best = i;
  if (best >= 0) {
    b->ptr = p->pool[best].ptr;
    b->size = p->pool[best].size;
    p->pool_bytes -= b->size;
    p->pool[best] = p->pool[--p->npool];
  } else {
    b->ptr = aligned_alloc(64, size);
    b->size = size;
    if (!b->ptr) {
      free(b);
      return NULL;
    }
  }
  b->refs = 1;
  b->pooled = 1;
  return b;
}

void alma__dn_unref(dn_plan *p, dn_buf *b) {
  if (!b || --b->refs > 0) return;
  if (b->pooled && b->ptr) {
    if (p->npool == p->cappool) {
      int cap = p->cappool ? p->cappool * 2 : 64;
      dn_pool_ent *np = realloc(p->pool, (size_t)cap * sizeof *np);
      if (!np) {
        free(b->ptr);
        free(b);
        return;
      }
      p->pool = np;
      p->cappool = cap;
    }
    p->pool[p->npool].ptr = b->ptr;
    p->pool[p->npool++].size = b->size;
    p->pool_bytes += b->size;
  } else {
    free(b->ptr);
  }
  free(b);
}

void *alma__dn_scratch(dn_plan *p, size_t size) {
  if (size <= p->scratch_size) return p->scratch;
  free(p->scratch);
  size = (size + 4095) & ~(size_t)4095;
  p->scratch = aligned_alloc(64, size);
  p->scratch_size = p->scratch ? size : 0;
  return p->scratch;
}

/* ---- layouts and values --------------------------------------------------------------------- */
dnnl_data_type_t alma__dn_dtype(alma_dtype t) {
  switch (t) {
    case ALMA_DTYPE_FLOAT32: return dnnl_f32;
    case ALMA_DTYPE_BFLOAT16: return dnnl_bf16;
    case ALMA_DTYPE_FLOAT16: return dnnl_f16;
    case ALMA_DTYPE_INT8: return dnnl_s8;
    case ALMA_DTYPE_UINT8: return dnnl_u8;
    case ALMA_DTYPE_INT32: return dnnl_s32;
    default: return dnnl_data_type_undef;
  }
}

/* A value's own data type; types oneDNN lacks (int64 shapes, bool) keep the float32 md they always
 * had: such values are only ever read plain, never reordered. */
static dnnl_data_type_t val_dt(alma_dtype t) {
  dnnl_data_type_t d = alma__dn_dtype(t);
  return d == dnnl_data_type_undef ? dnnl_f32 : d;
}

void alma__dn_plain_md(dnnl_memory_desc_t *md, int rank, const int64_t *dims) {
  alma__dn_plain_md_dt(md, rank, dims, dnnl_f32);
}

void alma__dn_plain_md_dt(dnnl_memory_desc_t *md, int rank, const int64_t *dims, dnnl_data_type_t dt) {
  dnnl_dims_t d, s;
  int nd = rank > 0 ? rank : 1;
  if (rank <= 0) {
    d[0] = 1;
  } else {
    for (int i = 0; i < rank; i++) d[i] = dims[i];
  }
  s[nd - 1] = 1;
  for (int i = nd - 2; i >= 0; i--) s[i] = s[i + 1] * (d[i + 1] > 0 ? d[i + 1] : 1);
  dnnl_memory_desc_init_by_strides(md, nd, d, dt, s);
}

int alma__dn_is_plain(const dnnl_memory_desc_t *md) {
  if (md->format_kind != dnnl_blocked || md->format_desc.blocking.inner_nblks != 0 || md->offset0 != 0) return 0;
  dnnl_memory_desc_t pl;
  int64_t dims[DNNL_MAX_NDIMS];
  for (int i = 0; i < md->ndims; i++) dims[i] = md->dims[i];
  alma__dn_plain_md_dt(&pl, md->ndims, dims, md->data_type);
  return dnnl_memory_desc_equal(&pl, md);
}

void alma__dn_val_md(const dn_val *v, dnnl_memory_desc_t *md) {
  if (v->has_blk) *md = v->bmd;
  else alma__dn_plain_md_dt(md, v->t.rank, v->t.dims, val_dt(v->t.dtype));
}

alma_status alma__dn_reorder(dn_plan *p, const dnnl_memory_desc_t *smd, void *sptr, const dnnl_memory_desc_t *dmd,
                             void *dptr, const alma_node *n) {
  dn_reorder *r = NULL;
  for (int i = 0; i < p->nreorders && !r; i++)
    if (dnnl_memory_desc_equal(&p->reorders[i].src, smd) && dnnl_memory_desc_equal(&p->reorders[i].dst, dmd))
      r = &p->reorders[i];
  if (!r) {
    if (p->nreorders == p->capreorders) {
      int cap = p->capreorders ? p->capreorders * 2 : 16;
      dn_reorder *nr = realloc(p->reorders, (size_t)cap * sizeof *nr);
      if (!nr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      p->reorders = nr;
      p->capreorders = cap;
    }
    dn_reorder tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.src = *smd;
    tmp.dst = *dmd;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, smd, p->eng, dmd, p->eng, NULL);
    if (s == dnnl_success) s = dnnl_primitive_create(&tmp.p, pd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (s == dnnl_success) s = dnnl_memory_create(&tmp.ms, smd, p->eng, DNNL_MEMORY_NONE);
    if (s == dnnl_success) s = dnnl_memory_create(&tmp.md, dmd, p->eng, DNNL_MEMORY_NONE);
    if (s != dnnl_success) {
      if (tmp.p) dnnl_primitive_destroy(tmp.p);
      if (tmp.ms) dnnl_memory_destroy(tmp.ms);
      if (tmp.md) dnnl_memory_destroy(tmp.md);
      return n ? alma__op_error(n, ALMA_ERR_INTERNAL, "oneDNN reorder creation failed (status %d)", (int)s)
               : alma__errorf(ALMA_ERR_INTERNAL, "oneDNN reorder creation failed (status %d)", (int)s);
    }
    p->reorders[p->nreorders] = tmp;
    r = &p->reorders[p->nreorders++];
  }
  dnnl_memory_set_data_handle(r->ms, sptr);
  dnnl_memory_set_data_handle(r->md, dptr);
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, r->ms}, {DNNL_ARG_TO, r->md}};
  dnnl_status_t s = dnnl_primitive_execute(r->p, p->strm, 2, args);
  if (s != dnnl_success)
    return n ? alma__op_error(n, ALMA_ERR_INTERNAL, "oneDNN reorder failed (status %d)", (int)s)
             : alma__errorf(ALMA_ERR_INTERNAL, "oneDNN reorder failed (status %d)", (int)s);
  return ALMA_OK;
}

alma_status alma__dn_val_plain(dn_plan *p, dn_val *v, const alma_node *n) {
  if (v->has_plain) return ALMA_OK;
  if (!v->has_blk) return n ? alma__op_error(n, ALMA_ERR_INTERNAL, "value has no data") : ALMA_ERR_INTERNAL;
  dnnl_memory_desc_t pl;
  alma__dn_plain_md_dt(&pl, v->t.rank, v->t.dims, val_dt(v->t.dtype));
  dn_buf *b = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pl));
  if (!b) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  alma_status st = alma__dn_reorder(p, &v->bmd, v->bbuf->ptr, &pl, b->ptr, n);
  if (st != ALMA_OK) {
    alma__dn_unref(p, b);
    return st;
  }
  p->n_reorder_out++;
  v->pbuf = b;
  v->t.data = b->ptr;
  v->has_plain = 1;
  return ALMA_OK;
}

alma_status alma__dn_val_get(dn_plan *p, dn_val *v, const dnnl_memory_desc_t *want, int keep, void **ptr,
                             dn_buf **tmp, const alma_node *n) {
  *ptr = NULL;
  if (tmp) *tmp = NULL;
  if (v->has_blk && dnnl_memory_desc_equal(&v->bmd, want)) {
    *ptr = v->bbuf->ptr;
    return ALMA_OK;
  }
  dnnl_memory_desc_t pl;
  alma__dn_plain_md_dt(&pl, v->t.rank, v->t.dims, val_dt(v->t.dtype));
  int want_plain = dnnl_memory_desc_equal(&pl, want);
  if (v->has_plain && want_plain) {
    *ptr = v->t.data;
    return ALMA_OK;
  }
  dn_buf *b = alma__dn_alloc(p, dnnl_memory_desc_get_size(want));
  if (!b) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  alma_status st = v->has_blk ? alma__dn_reorder(p, &v->bmd, v->bbuf->ptr, want, b->ptr, n)
                              : alma__dn_reorder(p, &pl, v->t.data, want, b->ptr, n);
  if (st != ALMA_OK) {
    alma__dn_unref(p, b);
    return st;
  }
  if (want_plain) p->n_reorder_out++;
  else p->n_reorder_in++;
  *ptr = b->ptr;
  if (keep && want_plain && !v->has_plain) {
    v->pbuf = b;
    v->t.data = b->ptr;
    v->has_plain = 1;
  } else if (keep && !want_plain && !v->has_blk) {
    v->bmd = *want;
    v->bbuf = b;
    v->has_blk = 1;
  } else if (tmp) {
    *tmp = b;
  } else {
    alma__dn_unref(p, b);
    return alma__errorf(ALMA_ERR_INTERNAL, "reorder result dropped");
  }
  return ALMA_OK;
}

dn_buf *alma__dn_val_steal(dn_val *v, const dnnl_memory_desc_t *md) {
  if (v->uses != 1) return NULL;
  if (v->has_blk && v->bbuf->refs == 1 && dnnl_memory_desc_equal(&v->bmd, md)) {
    dn_buf *b = v->bbuf;
    v->bbuf = NULL;
    v->has_blk = 0;
    return b;
  }
  if (v->has_plain && v->pbuf && v->pbuf->refs == 1) {
    dnnl_memory_desc_t pl;
    alma__dn_plain_md_dt(&pl, v->t.rank, v->t.dims, val_dt(v->t.dtype));
    if (!dnnl_memory_desc_equal(&pl, md)) return NULL;
    dn_buf *b = v->pbuf;
    v->pbuf = NULL;
    v->has_plain = 0;
    v->t.data = NULL;
    return b;
  }
  return NULL;
}

void alma__dn_val_set(dn_val *v, const alma_tensor *shape, const dnnl_memory_desc_t *md, dn_buf *b) {
  memset(&v->t, 0, sizeof v->t);
  v->t.dtype = shape->dtype;
  v->t.rank = shape->rank;
  for (int i = 0; i < shape->rank; i++) v->t.dims[i] = shape->dims[i];
  v->t.nbytes = (size_t)alma__numel(shape->rank, shape->dims) * alma_dtype_size(shape->dtype);
  v->live = 1;
  dnnl_memory_desc_t pl;
  alma__dn_plain_md_dt(&pl, shape->rank, shape->dims, val_dt(shape->dtype));
  if (dnnl_memory_desc_equal(&pl, md)) {
    v->pbuf = b;
    v->t.data = b->ptr;
    v->has_plain = 1;
  } else {
    v->bmd = *md;
    v->bbuf = b;
    v->has_blk = 1;
  }
}

/* Follows Identity nodes (PyTorch exports shared weights as Identity of one initializer). */
const alma_tensor *alma__dn_const(const alma_graph *g, int v) {
  for (int hops = 0; hops < 16; hops++) {
    if (v < 0 || v >= g->n_values) return NULL;
    const alma_value *val = &g->values[v];
    if (val->init) return val->init;
    if (val->producer < 0 || val->producer >= g->n_nodes) return NULL;
    const alma_node *n = &g->nodes[val->producer];
    if (n->domain[0]) return NULL;
    if (!strcmp(n->op_type, "Constant")) {
      const alma_attr *a = alma__node_attr(n, "value");
      return a && a->type == ALMA_ATTR_TENSOR && a->t && a->t->data ? a->t : NULL;
    }
    if (strcmp(n->op_type, "Identity") || n->n_inputs != 1) return NULL;
    v = n->inputs[0];
  }
  return NULL;
}

static void val_release(dn_plan *p, dn_val *v) {
  alma__dn_unref(p, v->pbuf);
  alma__dn_unref(p, v->bbuf);
  v->pbuf = v->bbuf = NULL;
  v->has_plain = v->has_blk = 0;
  v->t.data = NULL;
  v->live = 0;
}

static void val_use_done(dn_plan *p, int v) {
  if (v < 0) return;
  dn_val *x = &p->vals[v];
  if (--x->uses <= 0 && x->live) val_release(p, x);
}

/* ---- the executor --------------------------------------------------------------------------- */
static int is_shape_only(const alma_node *n) {
  return !n->domain[0] && (!strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size"));
}

static alma_status run_eager(dn_plan *p, int idx) {
  const alma_node *n = &p->g->nodes[idx];
  const alma_tensor *in[1024];
  alma_tensor out[64];
  if (n->n_inputs > 1024 || n->n_outputs > 64) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "too many inputs or outputs");
  for (int k = 0; k < n->n_inputs; k++) {
    int v = n->inputs[k];
    in[k] = NULL;
    if (v < 0) continue;
    dn_val *x = &p->vals[v];
    if (!x->live) return alma__op_error(n, ALMA_ERR_INTERNAL, "input '%s' has no value", p->g->values[v].name);
    if (!is_shape_only(n)) ALMA_TRY(alma__dn_val_plain(p, x, n));
    in[k] = &x->t;
  }
  /* GroupQueryAttention, Attention, the Gelus, SkipLayerNormalization...: EAGER's kernels with their
   * items over the plan's threads (contrib_bert.h) */
  /* run_node_of: a context that knows the graph's constants (few-row Gemm/MatMul pack them) */
  ALMA_TRY(alma__contrib_par(n) ? alma__dn_run_contrib(p, n, in, out)
                                : alma__op_run_node_of(p->g, n, in, n->n_inputs, out, n->n_outputs, p->threads,
                                                       alma__dn_parfor, &p->threads));
  for (int k = 0; k < n->n_outputs; k++) {
    int v = n->outputs[k];
    if (v < 0) {
      alma_tensor_free_data(&out[k]);
      continue;
    }
    dn_val *y = &p->vals[v];
    dn_buf *b = malloc(sizeof *b);
    if (!b) {
      for (int j = k; j < n->n_outputs; j++) alma_tensor_free_data(&out[j]);
      return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    }
    b->ptr = out[k].data;
    b->size = out[k].nbytes;
    b->refs = 1;
    b->pooled = 0;
    y->t = out[k];
    y->t.owns_data = 0;
    y->pbuf = b;
    y->has_plain = 1;
    y->live = 1;
  }
  p->n_eager++;
  p->nodes[idx].n_eager++;
  return ALMA_OK;
}

/* Infers the output shapes of node idx from its live inputs (plain data where a shape needs it). */
static alma_status infer_node(dn_plan *p, const alma_node *n, dn_val **in, alma_tensor *outshape) {
  const alma_tensor *tin[64];
  for (int k = 0; k < n->n_inputs; k++) tin[k] = in[k] ? &in[k]->t : NULL;
  for (int k = 0; k < n->n_outputs; k++) memset(&outshape[k], 0, sizeof outshape[k]);
  alma_status st = n->op->infer(n, tin, n->n_inputs, outshape, n->n_outputs);
  if (st == ALMA_ERR_DYNAMIC) {
    for (int k = 0; k < n->n_inputs; k++)
      if (in[k]) ALMA_TRY(alma__dn_val_plain(p, in[k], n));
    for (int k = 0; k < n->n_outputs; k++) memset(&outshape[k], 0, sizeof outshape[k]);
    st = n->op->infer(n, tin, n->n_inputs, outshape, n->n_outputs);
    if (st == ALMA_ERR_DYNAMIC) return alma__op_error(n, ALMA_ERR_INTERNAL, "shape unknown with all inputs given");
  }
  return st;
}

/* Inputs whose emptiness sends a node to EAGER: all, but Resize's roi/scales/sizes, where an empty
 * tensor stands for an omitted input (as opset-11 exporters write them). */
static int data_inputs(const dn_node *d, int nin) { return d->kind == DK_RESAMPLE && nin > 1 ? 1 : nin; }

static int has_empty(const dn_val *const *in, int nin, const alma_tensor *out, int nout) {
  for (int k = 0; k < nin; k++)
    if (in[k] && in[k]->t.rank > 0 && alma__numel(in[k]->t.rank, in[k]->t.dims) == 0) return 1;
  for (int k = 0; k < nout; k++)
    if (out[k].rank > 0 && alma__numel(out[k].rank, out[k].dims) == 0) return 1;
  return 0;
}

/* A native node that computed on bfloat16 data (data movement and Cast aside): the stats' count. */
static int computes_bf16(const dn_node *d, const dn_val *y) {
  return y && y->t.dtype == ALMA_DTYPE_BFLOAT16 && d->kind != DK_VIEW && d->kind != DK_CAST &&
         d->kind != DK_TRANSPOSE && d->kind != DK_SLICE && d->kind != DK_CONCAT && d->kind != DK_PAD;
}

/* Tiny element-wise and data-movement nodes (a decode step's [batch, hidden] Adds, LayerNorms,
 * Casts and Slices: at most DN_TINY_ELEMS output elements) run on EAGER's kernel on this thread: a
 * oneDNN primitive would add its execute overhead (several microseconds a node even on one thread:
 * a 2x16 Add took 5-7 us as a primitive, 1-1.5 us on EAGER's kernel) and, with more than one
 * thread, an OpenMP fork/join across the plan's threads, several times the work itself (and far
 * more when a worker must be woken, or a busy machine has descheduled it). Only nodes whose inputs are all plain (no
 * reorder out of a blocked layout) and that are not lazy views. dnnl.tiny_eager=off keeps them
 * on oneDNN (the placement tests). */
#define DN_TINY_ELEMS 16384
/* Softmax and LayerNormalization cost EAGER's kernels several ns an element (an exp, a reduction
 * and a pass more per row), oneDNN's a fraction of one: past about 2K elements the primitive's
 * overhead is repaid (a small transformer's [1,6,47,47] Softmax: 60 us on EAGER, 12 us on oneDNN;
 * its [1,47,192] LayerNorms 22 us against 5). */
#define DN_TINY_HEAVY_ELEMS 2048
static int tiny_on_eager(const dn_plan *p, const dn_node *d, dn_val *const *in, int nin, const alma_tensor *outshape,
                         int nout) {
  if (!p->opt.tiny_eager) return 0;
  switch (d->kind) {
    case DK_ELTWISE: case DK_BINARY: case DK_LNORM: case DK_SOFTMAX: case DK_CONCAT: case DK_SLICE:
    case DK_TRANSPOSE: case DK_CAST: case DK_REDUCE: case DK_PAD: case DK_PRELU: break;
    default: return 0;
  }
  if (d->self_fused || d->lazy_view) return 0;
  int64_t n = 0;
  for (int k = 0; k < nout; k++) n += alma__numel(outshape[k].rank, outshape[k].dims);
  if (n > (d->kind == DK_SOFTMAX || d->kind == DK_LNORM ? DN_TINY_HEAVY_ELEMS : DN_TINY_ELEMS)) return 0;
  for (int k = 0; k < nin; k++)
    if (in[k] && !in[k]->has_plain) return 0;
  return 1;
}

/* A Gemm/MatMul (or FUSE's FusedGemm/FusedMatMul) of at most ALMA_PACKED_MAX_ROWS rows on a float32
 * 2-D weight that is a graph constant: EAGER's kernel on the node's packed weights (ops/gemm_packed.h)
 * streams B once from memory, its column panels over the plan's threads (alma__dn_parfor), where
 * oneDNN's primitive took 0.65 ms for [2,512]x[512,2048] at one thread (6.5 GB/s;
 * docs/performance.md). A group it heads runs member by member then (the bias or residual Add after
 * it as a tiny node on EAGER's kernel). */
static int few_rows_packed(const dn_plan *p, const dn_node *d, const alma_node *n) {
  if ((d->kind != DK_MATMUL && d->kind != DK_GEMM) || !alma__packed_gemm_enabled()) return 0;
  int gemm = !strcmp(n->op_type, "Gemm") || !strcmp(n->op_type, "FusedGemm");
  if (!gemm && strcmp(n->op_type, "MatMul") && strcmp(n->op_type, "FusedMatMul")) return 0;
  if (n->n_inputs < 2 || n->inputs[0] < 0 || n->inputs[1] < 0 || (gemm && alma__attr_i(n, "transA", 0))) return 0;
  const alma_tensor *w = p->g->values[n->inputs[1]].init;
  const dn_val *a = &p->vals[n->inputs[0]];
  if (!w || w->dtype != ALMA_DTYPE_FLOAT32 || w->rank != 2 || !a->live || a->t.dtype != ALMA_DTYPE_FLOAT32 ||
      a->t.rank < 1)
    return 0;
  int64_t rows = alma__numel(a->t.rank - 1, a->t.dims);
  return rows >= 1 && rows <= ALMA_PACKED_MAX_ROWS;
}

static alma_status run_single(dn_plan *p, int idx) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  int done = 0;
  int planned = d->kind != DK_NONE && n->n_inputs <= 64 && n->n_outputs <= 8;
  int chose_eager = planned && few_rows_packed(p, d, n); /* the plan's choice, not a decline (placement) */
  if (planned && !chose_eager) {
    dn_val *in[64], *out[8];
    alma_tensor outshape[8];
    int ok = 1;
    for (int k = 0; k < n->n_inputs; k++) {
      in[k] = n->inputs[k] >= 0 ? &p->vals[n->inputs[k]] : NULL;
      if (in[k] && !in[k]->live) ok = 0;
    }
    for (int k = 0; k < n->n_outputs; k++) out[k] = n->outputs[k] >= 0 ? &p->vals[n->outputs[k]] : NULL;
    if (ok) {
      ALMA_TRY(infer_node(p, n, in, outshape));
      if (!has_empty((const dn_val *const *)in, data_inputs(d, n->n_inputs), outshape, n->n_outputs)) {
        if (tiny_on_eager(p, d, in, n->n_inputs, outshape, n->n_outputs)) chose_eager = 1;
        else ALMA_TRY(alma__dn_run(p, idx, d->self_fused ? DN_FUSED_OWN : 0, in, n->n_inputs, outshape, out, n->n_outputs, &done));
      }
    }
    if (done) {
      p->n_native++;
      d->n_native++;
      if (computes_bf16(d, out[0])) p->n_native_bf16++;
    }
  }
  if (!done) {
    d->n_choice += chose_eager;
    ALMA_TRY(run_eager(p, idx));
  }
  for (int k = 0; k < n->n_inputs; k++) val_use_done(p, n->inputs[k]);
  for (int k = 0; k < n->n_outputs; k++) {
    int v = n->outputs[k];
    if (v >= 0 && p->vals[v].uses <= 0 && p->vals[v].live) val_release(p, &p->vals[v]);
  }
  return ALMA_OK;
}

/* For dnnl_int8_exec.c: a cluster declined at run time runs its nodes through these. */
alma_status alma__dn_run_node(dn_plan *p, int idx) { return run_single(p, idx); }
void alma__dn_use_done(dn_plan *p, int v) { val_use_done(p, v); }

/* Runs members mem[0..nm) of group h as one primitive (fused: alma__dn_run's, 1 or 2), writing
 * mem[nm-1]'s output; *done = 0 when it declines, nothing run then. */
static alma_status group_try(dn_plan *p, int h, int nm, int fused, int *done) {
  const alma_graph *g = p->g;
  dn_node *d = &p->nodes[h];
  const alma_node *hn = &g->nodes[h];
  *done = 0;
  {
    dn_val *in[16];
    alma_tensor outshape[8];
    int ok = hn->n_inputs <= 16 && hn->n_outputs <= 8;
    for (int k = 0; ok && k < hn->n_inputs; k++) {
      in[k] = hn->inputs[k] >= 0 ? &p->vals[hn->inputs[k]] : NULL;
      if (in[k] && !in[k]->live) ok = 0;
    }
    if (ok) {
      ALMA_TRY(infer_node(p, hn, in, outshape));
      const alma_node *ln = &g->nodes[d->mem[nm - 1]];
      dn_val *out = &p->vals[ln->outputs[0]];
      if (!has_empty((const dn_val *const *)in, hn->n_inputs, outshape, 1))
        ALMA_TRY(alma__dn_run(p, h, fused, in, hn->n_inputs, outshape, &out, 1, done));
    }
  }
  if (!*done) return ALMA_OK;
  p->n_native += nm;
  p->n_fused++;
  d->n_native++;
  d->n_group++;
  if (computes_bf16(d, &p->vals[g->nodes[d->mem[nm - 1]].outputs[0]])) p->n_native_bf16 += nm;
  for (int m = 0; m < nm; m++) {
    const alma_node *mn = &g->nodes[d->mem[m]];
    for (int k = 0; k < mn->n_inputs; k++) {
      int v = mn->inputs[k];
      if (v < 0) continue;
      int prod = g->values[v].producer, inside = 0;
      for (int j = 0; j < nm && !inside; j++) inside = prod >= 0 && prod != d->mem[m] && d->mem[j] == prod;
      if (inside) continue; /* internal, never materialized */
      val_use_done(p, v);
    }
  }
  int lv = g->nodes[d->mem[nm - 1]].outputs[0];
  if (p->vals[lv].uses <= 0 && p->vals[lv].live) val_release(p, &p->vals[lv]);
  return ALMA_OK;
}

/* A group alone, or one part of a declined depthwise group: each member on its own if it declines. */
static alma_status run_part(dn_plan *p, int h, int nm) {
  int done = 0;
  if (nm > 1 && !few_rows_packed(p, &p->nodes[h], &p->g->nodes[h])) ALMA_TRY(group_try(p, h, nm, 1, &done));
  for (int m = 0; m < nm && !done; m++) ALMA_TRY(run_single(p, p->nodes[h].mem[m]));
  return ALMA_OK;
}

static alma_status run_group(dn_plan *p, int h) {
  dn_node *d = &p->nodes[h];
  if (!d->dw_at) return run_part(p, h, d->nmem);
  int done = 0;
  ALMA_TRY(group_try(p, h, d->nmem, 2, &done));
  if (done) return ALMA_OK;
  /* the depthwise fusion declined: the 1x1 conv's part (alone, or as the group plan_fuse made), then
   * the depthwise conv's (likewise; its dn_node keeps its own group for this) */
  int c = d->post[d->dw_at - 1].node, k = 0;
  while (d->mem[k] != c) k++;
  if (k == 1) ALMA_TRY(run_single(p, h));
  else ALMA_TRY(run_part(p, h, k));
  const dn_node *dc = &p->nodes[c];
  return dc->nmem > 1 ? run_part(p, c, dc->nmem) : run_single(p, c);
}

/* Profiling (p->profile): DN_PROFILE_PRINT from dnnl.print_profile=on prints the slowest nodes when
 * the plan is freed; DN_PROFILE_API from profile_start (alma bench --profile) reads them through
 * profile_read. Both are the same per-node timers (nodes[].prof_s, prof_runs). */
enum { DN_PROFILE_PRINT = 1, DN_PROFILE_API = 2 };

static alma_status run_own(dn_plan *p, const alma_tensor *inputs, int n_inputs, alma_tensor *outputs, int n_outputs) {
  const alma_graph *g = p->g;
  int nv = g->n_values;
  alma_status st = ALMA_OK;
  memset(p->vals, 0, (size_t)nv * sizeof *p->vals);
  for (int v = 0; v < nv; v++) {
    p->vals[v].uses = p->static_uses[v];
    if (g->values[v].init) {
      p->vals[v].t = alma__tensor_view(g->values[v].init);
      p->vals[v].has_plain = p->vals[v].live = 1;
    }
  }
  for (int i = 0; i < n_inputs; i++) {
    dn_val *x = &p->vals[g->inputs[i]];
    x->t = alma__tensor_view(&inputs[i]);
    x->has_plain = x->live = 1;
  }
  for (int i = 0; i < g->n_nodes && st == ALMA_OK; i++) {
    const dn_node *d = &p->nodes[i];
    double t0 = p->profile ? alma__now_s() : 0;
    int at = i;
    if (d->q_role) { /* int8 cluster member or absorbed DequantizeLinear (dnnl_int8_exec.c) */
      st = alma__dn_q_step(p, i, &at);
    } else if (d->head >= 0) {
      if (i != p->nodes[d->head].last) continue;
      at = d->head;
      st = run_group(p, d->head);
    } else {
      st = run_single(p, i);
    }
    if (p->profile) p->nodes[at].prof_s += alma__now_s() - t0;
  }
  for (int i = 0; i < n_outputs && st == ALMA_OK; i++) {
    int v = g->outputs[i];
    dn_val *x = &p->vals[v];
    if (!x->live) {
      st = alma__errorf(ALMA_ERR_INTERNAL, "graph output '%s' was not computed", g->values[v].name);
      break;
    }
    if ((st = alma__dn_val_plain(p, x, NULL)) != ALMA_OK) break;
    int dup = 0;
    for (int k = i + 1; k < n_outputs; k++) dup |= g->outputs[k] == v;
    size_t nbytes = (size_t)alma__numel(x->t.rank, x->t.dims) * alma_dtype_size(x->t.dtype);
    /* Hand the buffer over, unless it is a pooled one much larger than the output: the pool's best
     * fit can give a small output a large free buffer, and handing that to the caller (who frees
     * it) made every run map and fault the large size anew (MobileNet-V2 batch 32: 57 MB a run). */
    if (!dup && x->pbuf && x->pbuf->refs == 1 && (!x->pbuf->pooled || x->pbuf->size <= nbytes + nbytes / 4 + 4096)) {
      outputs[i] = x->t;
      outputs[i].data = x->pbuf->ptr;
      outputs[i].nbytes = nbytes;
      outputs[i].owns_data = 1;
      free(x->pbuf);
      x->pbuf = NULL;
      x->has_plain = 0;
      x->t.data = NULL;
    } else if ((st = alma__tensor_copy(&outputs[i], &x->t)) != ALMA_OK) {
      break;
    }
  }
  if (st != ALMA_OK)
    for (int i = 0; i < n_outputs; i++) alma_tensor_free_data(&outputs[i]);
  for (int v = 0; v < nv; v++) val_release(p, &p->vals[v]);
  return st;
}

/* Hook mode: one node at a time in plain layout, results copied into the executor's outputs. */
static alma_status hook(void *user, int idx, const alma_node *n, const alma_tensor *const *in, int nin,
                        alma_tensor *out, int nout, int *handled) {
  dn_plan *p = user;
  dn_node *d = &p->nodes[idx];
  *handled = 0;
  if (d->kind == DK_NONE || d->kind == DK_VIEW || d->self_fused || nin > 64 || nout > 8) return ALMA_OK;
  dn_val iv[64], ov[8];
  dn_val *ip[64], *op[8];
  memset(iv, 0, sizeof(dn_val) * (size_t)nin);
  memset(ov, 0, sizeof(dn_val) * (size_t)nout);
  for (int k = 0; k < nin; k++) {
    ip[k] = NULL;
    if (!in[k]) continue;
    iv[k].t = alma__tensor_view(in[k]);
    iv[k].has_plain = iv[k].live = 1;
    iv[k].uses = 2; /* never taken over */
    ip[k] = &iv[k];
  }
  for (int k = 0; k < nout; k++) op[k] = n->outputs[k] >= 0 ? &ov[k] : NULL;
  if (has_empty((const dn_val *const *)ip, data_inputs(d, nin), out, nout)) return ALMA_OK;
  int done = 0;
  alma_status st = alma__dn_run(p, idx, 0, ip, nin, out, op, nout, &done);
  for (int k = 0; k < nout && st == ALMA_OK && done; k++) {
    if (!op[k] || !ov[k].live) continue;
    if ((st = alma__dn_val_plain(p, &ov[k], n)) == ALMA_OK && out[k].data)
      memcpy(out[k].data, ov[k].t.data, out[k].nbytes);
  }
  for (int k = 0; k < nout; k++) val_release(p, &ov[k]);
  for (int k = 0; k < nin; k++) val_release(p, &iv[k]);
  if (st == ALMA_OK && done) {
    *handled = 1;
    p->n_native++;
    d->n_native++;
    if (nout > 0 && out[0].dtype == ALMA_DTYPE_BFLOAT16 && computes_bf16(d, &ov[0])) p->n_native_bf16++;
  }
  return st;
}

/* ---- compile: classification and fusion ------------------------------------------------------ */
/* Per value, the last node reading it (-1: none); NULL when out of memory. Callers check the
 * use count where a single consumer matters. */
static int *value_consumers(const alma_graph *g) {
  int *consumer = malloc(sizeof(int) * (size_t)(g->n_values + 1));
  if (!consumer) return NULL;
  for (int v = 0; v < g->n_values; v++) consumer[v] = -1;
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_inputs; k++)
      if (g->nodes[i].inputs[k] >= 0) consumer[g->nodes[i].inputs[k]] = i;
  return consumer;
}

static void plan_fuse(dn_plan *p) {
  const alma_graph *g = p->g;
  int *consumer = value_consumers(g);
  if (!consumer) return;
  for (int i = 0; i < g->n_nodes; i++) {
    dn_node *d = &p->nodes[i];
    const alma_node *n = &g->nodes[i];
    if (d->head >= 0 || n->n_outputs < 1 || n->outputs[0] < 0) continue;
    int kind = d->kind;
    if (kind != DK_CONV && kind != DK_MATMUL && kind != DK_GEMM && kind != DK_BNORM) continue;
    if (kind == DK_GEMM && (alma__attr_f(n, "alpha", 1.0f) != 1.0f || alma__attr_f(n, "beta", 1.0f) != 1.0f)) continue;
    /* an alma.Fused* node's own post-ops come first (e.g. FusedMatMul's bias and activation, then the
     * residual Add after it as a sum: a transformer's linear2 + Add) */
    int outv = n->outputs[0], has_sum = 0, has_bias = kind == DK_GEMM || d->self_fused, nelt = 0;
    d->nmem = 1;
    d->mem[0] = i;
    d->npost = d->nself;
    for (int k = 0; k < d->nself; k++) {
      has_sum |= d->post[k].type == DP_SUM;
      if (d->post[k].type == DP_ELT) nelt += d->post[k].n_elt;
    }
    while (d->nmem < DN_MAX_MEMBERS && d->npost < DN_MAX_POST) {
      if (p->static_uses[outv] != 1 || consumer[outv] < 0) break;
      int c = consumer[outv];
      dn_node *dc = &p->nodes[c];
      const alma_node *nc = &g->nodes[c];
      if (dc->head >= 0 || dc->kind == DK_NONE || nc->n_outputs != 1 || nc->outputs[0] < 0) break;
      dn_post *po = &d->post[d->npost];
      memset(po, 0, sizeof *po);
      po->node = c;
      if (kind == DK_BNORM) {
        if (dc->kind != DK_ELTWISE || dc->rt_clip || dc->n_elt != 1 || dc->elt[0].alg != dnnl_eltwise_relu ||
            dc->elt[0].alpha != 0)
          break;
        po->type = DP_NORM_RELU;
      } else if (dc->kind == DK_ELTWISE && !dc->rt_clip) {
        if (nelt + dc->n_elt > 4) break;
        po->type = DP_ELT;
        po->n_elt = dc->n_elt;
        memcpy(po->elt, dc->elt, sizeof po->elt);
        nelt += dc->n_elt;
      } else if (dc->kind == DK_BINARY && !strcmp(nc->op_type, "Add") && nc->n_inputs == 2) {
        int other = nc->inputs[0] == outv ? nc->inputs[1] : nc->inputs[0];
        if (other == outv || other < 0) break;
        if (kind == DK_MATMUL && !has_bias && d->npost == 0 && alma__dn_const(g, other)) {
          po->type = DP_BIAS;
          has_bias = 1;
        } else if (!has_sum) {
          po->type = DP_SUM;
          has_sum = 1;
        } else {
          break;
        }
        po->other = other;
      } else {
        break;
      }
      d->npost++;
      d->mem[d->nmem++] = c;
      outv = nc->outputs[0];
      if (po->type == DP_NORM_RELU) break;
    }
    if (d->nmem > 1) {
      d->last = d->mem[d->nmem - 1];
      for (int m = 0; m < d->nmem; m++) p->nodes[d->mem[m]].head = i;
    } else {
      d->nmem = 0;
      d->npost = d->nself;
    }
  }
  free(consumer);
}

/* Whether a 2-D Conv's attributes are kernel k x k, strides s (all), pads pad (all), no dilation,
 * explicit padding. */
static int conv_attrs_are(const alma_node *n, int64_t k, int64_t s, int64_t pad) {
  const char *ap = alma__attr_s(n, "auto_pad", "NOTSET");
  if (strcmp(ap, "NOTSET")) return 0;
  const int64_t *v = NULL;
  int nv = alma__attr_ints(n, "kernel_shape", &v);
  if (nv && (nv != 2 || v[0] != k || v[1] != k)) return 0;
  nv = alma__attr_ints(n, "strides", &v);
  if (nv ? nv != 2 || v[0] != s || v[1] != s : s != 1) return 0;
  nv = alma__attr_ints(n, "dilations", &v);
  if (nv && (nv != 2 || v[0] != 1 || v[1] != 1)) return 0;
  nv = alma__attr_ints(n, "pads", &v);
  if (nv ? nv != 4 || v[0] != pad || v[1] != pad || v[2] != pad || v[3] != pad : pad != 0) return 0;
  return 1;
}

/* Constant rank-4 float32 weights of a Conv / alma.FusedConv node, or NULL. */
static const alma_tensor *conv_weights(const alma_graph *g, const alma_node *n) {
  const alma_tensor *w = n->n_inputs > 1 ? alma__dn_const(g, n->inputs[1]) : NULL;
  return w && w->dtype == ALMA_DTYPE_FLOAT32 && w->rank == 4 ? w : NULL;
}

static int posts_all_elt(const dn_node *d) {
  for (int k = 0; k < d->npost; k++)
    if (d->post[k].type != DP_ELT) return 0;
  return 1;
}

/* After plan_fuse and the int8 clusters: a float32 1x1 Conv (stride 1, no pads, group 1, constant
 * weights; alone, an alma.FusedConv or the head of an eltwise group) whose output, through its
 * eltwise post-ops, is read only by a depthwise 3x3 Conv (group = channels = the 1x1's output
 * channels, stride 1 or 2, pads 1, constant weights; alone, an alma.FusedConv without a residual or
 * the head of an eltwise group) takes that Conv and its group as a DP_DW post-op: one oneDNN
 * primitive writes the depthwise output, the 1x1 output is never stored (see run_conv_dw). The
 * depthwise node keeps its own group (nmem, mem, post) for when the fusion is declined. */
static void plan_fuse_dw(dn_plan *p) {
  const alma_graph *g = p->g;
  int *consumer = value_consumers(g);
  if (!consumer) return;
  for (int i = 0; i < g->n_nodes; i++) {
    dn_node *d = &p->nodes[i];
    const alma_node *n = &g->nodes[i];
    if (d->kind != DK_CONV || d->q_role || (d->head >= 0 && d->head != i) || n->n_outputs < 1 || n->outputs[0] < 0)
      continue;
    const alma_tensor *w = conv_weights(g, n);
    if (!w || w->dims[2] != 1 || w->dims[3] != 1 || alma__attr_i(n, "group", 1) != 1 || !conv_attrs_are(n, 1, 1, 0) ||
        !posts_all_elt(d))
      continue;
    int grouped = d->head == i, nm = grouped ? d->nmem : 1;
    int outv = g->nodes[grouped ? d->mem[nm - 1] : i].outputs[0], c = consumer[outv];
    if (outv < 0 || p->static_uses[outv] != 1 || c < 0) continue;
    dn_node *dc = &p->nodes[c];
    const alma_node *nc = &g->nodes[c];
    if (dc->kind != DK_CONV || dc->q_role || (dc->head >= 0 && dc->head != c) || nc->n_outputs != 1 ||
        nc->outputs[0] < 0 || nc->n_inputs < 2 || nc->inputs[0] != outv || !posts_all_elt(dc))
      continue;
    int has_bias = nc->n_inputs > 2 && nc->inputs[2] >= 0;
    if (nc->inputs[1] == outv || (has_bias && nc->inputs[2] == outv)) continue;
    const alma_tensor *wd = conv_weights(g, nc);
    const int64_t *sv = NULL;
    int64_t C = w->dims[0], s = alma__attr_ints(nc, "strides", &sv) == 2 ? sv[0] : 1;
    if (!wd || wd->dims[0] != C || wd->dims[1] != 1 || wd->dims[2] != 3 || wd->dims[3] != 3 ||
        alma__attr_i(nc, "group", 1) != C || (s != 1 && s != 2) || !conv_attrs_are(nc, 3, s, 1))
      continue;
    int cgrouped = dc->head == c, cm = cgrouped ? dc->nmem : 1;
    int npre = grouped || d->self_fused ? d->npost : 0;
    if (nm + cm > DN_MAX_MEMBERS || npre + 1 + dc->npost > DN_MAX_POST) continue;
    if (!grouped) {
      d->nmem = 1;
      d->mem[0] = i;
      d->npost = npre;
    }
    dn_post *q = &d->post[d->npost++];
    memset(q, 0, sizeof *q);
    q->type = DP_DW;
    q->node = c;
    q->stride = (int)s;
    q->dw_bias = has_bias;
    d->dw_at = d->npost;
    /* the depthwise conv's eltwise steps: its own (alma.FusedConv, node -1) or its group's */
    for (int k = 0; k < dc->npost; k++) d->post[d->npost++] = dc->post[k];
    for (int m = 0; m < cm; m++) d->mem[d->nmem++] = cgrouped ? dc->mem[m] : c;
    d->last = d->mem[d->nmem - 1];
    for (int m = 0; m < d->nmem; m++) p->nodes[d->mem[m]].head = i;
  }
  free(consumer);
}

/* An Attention whose output only a Transpose reads takes it as a DP_PERM post-op: the attention's
 * second matmul writes through permuted strides, so the Transpose's output (multi-head attention's
 * [heads, seq, d] -> [seq, heads, d]) is produced without a copy. */
static void plan_fuse_perm(dn_plan *p) {
  const alma_graph *g = p->g;
  int *consumer = value_consumers(g);
  if (!consumer) return;
  for (int i = 0; i < g->n_nodes; i++) {
    dn_node *d = &p->nodes[i];
    const alma_node *n = &g->nodes[i];
    if (d->kind != DK_ATTN || d->head >= 0 || d->q_role || n->n_outputs != 1 || n->outputs[0] < 0) continue;
    int outv = n->outputs[0], c = consumer[outv];
    if (p->static_uses[outv] != 1 || c < 0) continue;
    dn_node *dc = &p->nodes[c];
    const alma_node *nc = &g->nodes[c];
    if (dc->kind != DK_TRANSPOSE || dc->head >= 0 || dc->q_role || nc->n_outputs != 1 || nc->outputs[0] < 0) continue;
    dn_post *q = &d->post[0];
    memset(q, 0, sizeof *q);
    q->type = DP_PERM;
    q->node = c;
    q->other = -1;
    d->npost = 1;
    d->nmem = 2;
    d->mem[0] = i;
    d->mem[1] = c;
    d->last = c;
    d->head = dc->head = i;
  }
  free(consumer);
}

/* Data-movement nodes whose every reader takes strided inputs may leave their output as a view of
 * their input (lazy_view; see dnnl_layout.c): Transposes, Slices/Splits and
 * reshapes on the way to Attention's Q, K and V, as multi-head attention splits heads (Slice ->
 * Reshape -> Transpose), or to a convolution's data. A value qualifies when it has readers, is no
 * graph output, and each reader is an Attention taking it as Q, K or V, a float convolution or a
 * lazy node taking it as its data input; nodes are in
 * topological order, so one backward pass settles every reader before its producer. */
static void plan_lazy_views(dn_plan *p) {
  const alma_graph *g = p->g;
  char *st = calloc((size_t)g->n_values + 1, 1); /* 1: read, all strided so far; 2: a reader needs plain data */
  if (!st) return;
  for (int i = 0; i < g->n_outputs; i++) st[g->outputs[i]] = 2;
  for (int j = g->n_nodes - 1; j >= 0; j--) {
    const alma_node *n = &g->nodes[j];
    dn_node *d = &p->nodes[j];
    int movable = (d->kind == DK_TRANSPOSE || d->kind == DK_SLICE || d->kind == DK_VIEW) && d->head < 0 && !d->q_role;
    int all = movable && n->n_outputs > 0;
    for (int k = 0; all && k < n->n_outputs; k++) all = n->outputs[k] >= 0 && st[n->outputs[k]] == 1;
    d->lazy_view = all;
    int attn = d->kind == DK_ATTN && !d->q_role;
    /* a float convolution reorders its input from whatever layout it has (alma__dn_val_get), and
     * not at all when a transposed view already is the layout it chose (tf2onnx's NWC -> NCW
     * Transpose before a 1-D convolution that runs in nwc) */
    int conv = d->kind == DK_CONV && !d->q_role;
    for (int k = 0; k < n->n_inputs; k++) {
      int v = n->inputs[k];
      if (v < 0) continue;
      int ok = (attn && k < 3) || ((d->lazy_view || conv) && k == 0);
      st[v] = ok && st[v] != 2 ? 1 : 2;
    }
    for (int k = 0; k < n->n_implicit; k++) st[n->implicit_inputs[k]] = 2;
  }
  free(st);
}

static alma_status dn_init(void) {
  dnnl_engine_t e = NULL;
  if (dnnl_engine_get_count(dnnl_cpu) < 1) return alma__errorf(ALMA_ERR_UNAVAILABLE, "oneDNN reports no CPU engine");
  dnnl_status_t s = dnnl_engine_create(&e, dnnl_cpu, 0);
  if (s != dnnl_success) return alma__errorf(ALMA_ERR_UNAVAILABLE, "oneDNN CPU engine creation failed (status %d)", (int)s);
  dnnl_engine_destroy(e);
  return ALMA_OK;
}

static void dn_free(void *plan);
extern const alma_runtime alma__runtime_dnnl;

/* --runtime-option dnnl.NAME=VALUE (docs/runtimes/dnnl.md, Options): what the plan does differently,
 * mostly for comparisons; the defaults are the measured choices. */
static const alma__rt_option dn_options[] = {
    {"winograd", ALMA__OPT_CHOICE, "auto", "auto|on|off", 0, 0,
     "alma's Winograd F(2x2,3x3) kernel for 3x3 stride-1 convolutions: auto where measured faster (AVX2 CPUs "
     "without AVX-512), on wherever the shape qualifies (AVX2+FMA), off never"},
    {"native_pool", ALMA__OPT_BOOL, "on", NULL, 0, 0, "alma's pooling kernel on oneDNN's blocked layouts (off: oneDNN's)"},
    {"tiny_eager", ALMA__OPT_BOOL, "on", NULL, 0, 0,
     "elementwise, softmax, concat and slice nodes of fewer than 16384 elements on EAGER (cheaper than oneDNN's "
     "primitive call)"},
    {"dw_fuse", ALMA__OPT_BOOL, "on", NULL, 0, 0, "a 1x1 convolution and the depthwise one after it as one fused primitive"},
    {"strided", ALMA__OPT_BOOL, "on", NULL, 0, 0, "transposes, slices and reshapes as strided views instead of copies"},
    {"int8", ALMA__OPT_CHOICE, "on", "on|off|fallback", 0, 0,
     "QDQ clusters as oneDNN int8 primitives; off: none (float32 on the dequantized values); fallback: every "
     "cluster declined at run time, node by node (tests)"},
    {"int8_conv_src", ALMA__OPT_CHOICE, "auto", "auto|u8|s8", 0, 0,
     "without VNNI, how u8 sources of int8 convolutions reach oneDNN: auto (u8 with halved weights where it is "
     "exact), u8 (full weights, may saturate), s8 (shifted by 128)"},
    {"int8_matmul", ALMA__OPT_BOOL, "off", NULL, 0, 0,
     "int8 matmuls also on CPUs without VNNI (where they can saturate; with VNNI they always run)"},
    {"int8_move", ALMA__OPT_BOOL, "on", NULL, 0, 0, "transposes, reshapes and pools inside int8 clusters as int8 steps"},
    {"int8_halve", ALMA__OPT_BOOL, "on", NULL, 0, 0,
     "without VNNI: u8 sources with a zero point given as u8 with the weights halved (off: shifted to s8)"},
    {"int8_zp_bias", ALMA__OPT_BOOL, "on", NULL, 0, 0,
     "source zero points of unpadded int8 convolutions folded into the bias (off: oneDNN's zero-point attribute)"},
    {"int8_dyn_matmul", ALMA__OPT_CHOICE, "float", "float|split", 0, 0,
     "INT8_DYNAMIC matmuls with 8-bit weights on CPUs without VNNI: float32 on the dequantized values, or split "
     "(two exact 7-bit halves)"},
    {"print_profile", ALMA__OPT_BOOL, "off", NULL, 0, 0,
     "time every node and print the slowest on stderr when the plan is freed (diagnosis; slows each run)"},
};

static void read_opts(dn_opts *d, const alma_runtime_opts *o) {
  const alma_runtime *rt = &alma__runtime_dnnl;
  d->winograd = alma__rt_opt_index(rt, o, "winograd");
  d->native_pool = alma__rt_opt_on(rt, o, "native_pool");
  d->tiny_eager = alma__rt_opt_on(rt, o, "tiny_eager");
  d->dw_fuse = alma__rt_opt_on(rt, o, "dw_fuse");
  d->strided = alma__rt_opt_on(rt, o, "strided");
  d->int8 = alma__rt_opt_index(rt, o, "int8");
  d->int8_conv_src = alma__rt_opt_index(rt, o, "int8_conv_src");
  d->int8_matmul = alma__rt_opt_on(rt, o, "int8_matmul");
  d->int8_move = alma__rt_opt_on(rt, o, "int8_move");
  d->int8_halve = alma__rt_opt_on(rt, o, "int8_halve");
  d->int8_zp_bias = alma__rt_opt_on(rt, o, "int8_zp_bias");
  d->int8_dyn_split = alma__rt_opt_is(rt, o, "int8_dyn_matmul", "split");
  d->print_profile = alma__rt_opt_on(rt, o, "print_profile");
}

/* libgomp reads its wait policy when it loads, before main: alma cannot change it, only say it. */
static const char *dn_spin_advice(const alma_runtime_opts *o, int threads) {
  const char *w = getenv("OMP_WAIT_POLICY");
  if (threads <= 1 || (w && !strcasecmp(w, "passive"))) return NULL;
  return "oneDNN's OpenMP threads spin at every barrier: set OMP_WAIT_POLICY=passive in the environment alma "
         "starts in (docs/runtimes/dnnl.md, Threads), or --threads 1";
}

static alma_status dn_compile(const alma_graph *g, const alma_runtime_opts *opts, void **plan_out) {
  *plan_out = NULL;
  dn_plan *p = calloc(1, sizeof *p);
  if (!p) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  p->g = g;
  p->threads = opts && opts->threads > 0 ? opts->threads : 1;
  read_opts(&p->opt, opts);
  p->profile = p->opt.print_profile ? DN_PROFILE_PRINT : 0;
  set_threads(p->threads);
  if (dnnl_engine_create(&p->eng, dnnl_cpu, 0) != dnnl_success ||
      dnnl_stream_create(&p->strm, p->eng, dnnl_stream_default_flags) != dnnl_success) {
    dn_free(p);
    return alma__errorf(ALMA_ERR_UNAVAILABLE, "oneDNN CPU engine/stream creation failed");
  }
  int nv = g->n_values;
  p->nodes = calloc((size_t)g->n_nodes + 1, sizeof *p->nodes);
  p->static_uses = calloc((size_t)nv + 1, sizeof(int));
  p->vals = calloc((size_t)nv + 1, sizeof *p->vals);
  if (!p->nodes || !p->static_uses || !p->vals) {
    dn_free(p);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    if (n->op && (n->op->flags & (ALMA_OP_HAS_SUBGRAPH | ALMA_OP_ALLOCS_OUTPUTS))) p->hook_mode = 1;
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] >= 0) p->static_uses[n->inputs[k]]++;
    for (int k = 0; k < n->n_implicit; k++) p->static_uses[n->implicit_inputs[k]]++;
  }
  if (alma__graph_has_containers(g)) p->hook_mode = 1; /* sequences and optionals stay on EAGER */
  for (int i = 0; i < g->n_outputs; i++) p->static_uses[g->outputs[i]] += 1 << 20;
  for (int i = 0; i < g->n_nodes; i++) {
    dn_node *d = &p->nodes[i];
    d->head = -1;
    d->kind = alma__dn_classify(g, &g->nodes[i], d, &d->why);
  }
  if (!p->hook_mode) {
    plan_fuse(p);
    alma__dn_q_plan(p); /* int8 clusters; dissolves the float groups they overlap */
    if (p->opt.dw_fuse) plan_fuse_dw(p);
    if (p->opt.strided) {
      plan_fuse_perm(p);
      plan_lazy_views(p);
    }
  }
  *plan_out = p;
  return ALMA_OK;
}

/* Hook mode's node timer (the shared executor times every node, EAGER ones too). */
static void dn_timer(void *user, int idx, double seconds) {
  dn_plan *p = user;
  p->nodes[idx].prof_s += seconds;
}

static alma_status dn_run(void *plan, const alma_tensor *inputs, int n_inputs, alma_tensor *outputs, int n_outputs) {
  dn_plan *p = plan;
  set_threads(p->threads);
  p->n_reorder_in = p->n_reorder_out = p->n_reorder_wei = p->n_native = p->n_eager = p->n_fused = 0;
  p->n_native_bf16 = 0;
  alma_status st = p->hook_mode ? alma__exec_graph_timed(p->g, hook, p->profile ? dn_timer : NULL, p, inputs, n_inputs,
                                                         outputs, n_outputs)
                                : run_own(p, inputs, n_inputs, outputs, n_outputs);
  dnnl_stream_wait(p->strm);
  p->runs++;
  p->prof_runs++;
  ALMA_LOGD("DNNL run: %lld nodes on oneDNN (%lld fused groups, %lld in bfloat16), %lld on EAGER; reorders: %lld to "
            "blocked, %lld to plain, %lld weights; pool %zu bytes",
            (long long)p->n_native, (long long)p->n_fused, (long long)p->n_native_bf16, (long long)p->n_eager,
            (long long)p->n_reorder_in,
            (long long)p->n_reorder_out, (long long)p->n_reorder_wei, p->pool_bytes);
  return st;
}

static alma_status dn_profile_start(void *plan) {
  dn_plan *p = plan;
  p->profile |= DN_PROFILE_API;
  for (int i = 0; i < p->g->n_nodes; i++) p->nodes[i].prof_s = 0;
  p->prof_runs = 0;
  return ALMA_OK;
}

/* Groups count once, on their head: a fused float group's (its time is booked there at its last
 * member), an int8 cluster's on its anchor (the cluster's first member in topological order: the
 * convolution/matmul/add its post-ops follow; its other members' time, booked on themselves while
 * the cluster waits for its last member, moves there too). */
static alma_status dn_profile_read(void *plan, alma__prof_node *out) {
  dn_plan *p = plan;
  const alma_graph *g = p->g;
  if (!(p->profile & DN_PROFILE_API)) return alma__errorf(ALMA_ERR_INVALID_ARG, "DNNL: profile_read before profile_start");
  for (int i = 0; i < g->n_nodes; i++) {
    const dn_node *d = &p->nodes[i];
    out[i] = (alma__prof_node){.seconds = d->prof_s, .runs = p->prof_runs, .head = i, .members = 1};
    out[i].where = d->kind == DK_NONE        ? "EAGER"
                   : d->q_role == DN_Q_LAZY ? "DNNL (absorbed)"
                   : d->n_native            ? "DNNL"
                                            : "EAGER (declined)";
    int head = i;
    if (d->q_role == DN_Q_MEMBER) {
      for (int j = 0; j < i && head == i; j++)
        if (p->nodes[j].q_role == DN_Q_MEMBER && p->nodes[j].q_idx == d->q_idx) head = j;
    } else if (d->head >= 0) {
      head = d->head;
    }
    if (head != i) { /* a member: its time and count go to the head, which comes first */
      out[head].seconds += out[i].seconds;
      out[head].members++;
      out[i].seconds = 0;
      out[i].runs = 0;
      out[i].head = head;
      out[i].members = 0;
    }
  }
  return ALMA_OK;
}

/* Placement as data: classification decides EAGER at compile (why_reason); a node planned for
 * oneDNN that ran on EAGER's kernel (n_eager) did so by the plan's own choice for those shapes
 * (few rows on packed weights, tiny tensors: n_choice, CHOICE), or was declined when it ran: by
 * a oneDNN primitive that refused those shapes (LIBRARY, its words), or by the kernel's checks of
 * the inputs it met (empty tensors, types, non-constant parameters: DYNAMIC). Group members and
 * absorbed DequantizeLinears are computed by the head's primitive (FUSED) unless they had to run
 * on their own. */
static alma_status dn_placement(void *plan, alma__placement *out) {
  dn_plan *p = plan;
  const alma_graph *g = p->g;
  for (int i = 0; i < g->n_nodes; i++) {
    const dn_node *d = &p->nodes[i];
    if (d->kind == DK_NONE) {
      out[i] = (alma__placement){ALMA_PLACE_EAGER, d->why_reason ? d->why_reason : ALMA_DECLINE_OP, d->why};
      continue;
    }
    int member = d->q_role == DN_Q_LAZY || (d->head >= 0 && d->head != i);
    for (int j = 0; j < i && d->q_role == DN_Q_MEMBER && !member; j++)
      member = p->nodes[j].q_role == DN_Q_MEMBER && p->nodes[j].q_idx == d->q_idx;
    if (!d->n_eager) {
      out[i] = (alma__placement){member ? ALMA_PLACE_FUSED : ALMA_PLACE_RUNTIME, ALMA_DECLINE_NONE, NULL};
      continue;
    }
    const char *lib = NULL;
    for (int k = 0; k < DN_NPRIM && !lib; k++)
      if (d->prim[k] && d->prim[k]->declined) lib = d->prim[k]->why;
    /* a member runs on its own only when its group declined: the group's runs count for it */
    int also_native = d->n_native > 0 || (d->head >= 0 && d->head != i && !d->q_role && p->nodes[d->head].n_group > 0);
    for (int j = 0; j < g->n_nodes && d->q_role == DN_Q_MEMBER && !also_native; j++)
      also_native = p->nodes[j].q_role == DN_Q_MEMBER && p->nodes[j].q_idx == d->q_idx && p->nodes[j].n_native > 0;
    alma__decline r = lib ? ALMA_DECLINE_LIBRARY : d->n_choice >= d->n_eager ? ALMA_DECLINE_CHOICE : ALMA_DECLINE_DYNAMIC;
    out[i] = (alma__placement){also_native ? ALMA_PLACE_PARTIAL : ALMA_PLACE_EAGER, r,
                               lib                         ? lib
                               : r == ALMA_DECLINE_CHOICE ? "EAGER's kernel chosen for these shapes (few rows on packed "
                                                            "weights, tiny tensors)"
                                                          : "declined when it ran (empty tensors, the inputs' types, "
                                                            "parameters that are not constant)"};
  }
  return ALMA_OK;
}

/* dnnl.print_profile=on: mean time per run of the slowest nodes, by node and by op type. */
static void print_profile(const dn_plan *p) {
  const alma_graph *g = p->g;
  if (!p->prof_runs || !p->nodes) return;
  double total = 0;
  for (int i = 0; i < g->n_nodes; i++) total += p->nodes[i].prof_s;
  fprintf(stderr, "DNNL profile: %d runs, %.3f ms per run in nodes\n", p->prof_runs, total * 1e3 / p->prof_runs);
  int *order = malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
  if (!order) return;
  for (int i = 0; i < g->n_nodes; i++) order[i] = i;
  for (int i = 0; i < g->n_nodes; i++) /* selection of the top 25 */
    for (int j = i + 1; j < g->n_nodes && i < 25; j++)
      if (p->nodes[order[j]].prof_s > p->nodes[order[i]].prof_s) {
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
  for (int k = 0; k < g->n_nodes && k < 25; k++) {
    const dn_node *d = &p->nodes[order[k]];
    if (d->prof_s <= 0) break;
    fprintf(stderr, "  %8.3f ms  %-20s %-40s %s\n", d->prof_s * 1e3 / p->prof_runs, g->nodes[order[k]].op_type,
            g->nodes[order[k]].name, d->kind == DK_NONE ? "EAGER" : d->n_native ? "DNNL" : "EAGER (declined)");
  }
  free(order);
}

static void dn_free(void *plan) {
  dn_plan *p = plan;
  if (!p) return;
  if (p->profile & DN_PROFILE_PRINT) print_profile(p);
  alma__dn_q_free(p);
  if (p->nodes)
    for (int i = 0; i < p->g->n_nodes; i++) {
      for (int k = 0; k < DN_NPRIM; k++)
        if (p->nodes[i].prim[k]) {
          alma__dn_prim_free(p->nodes[i].prim[k]);
          free(p->nodes[i].prim[k]);
        }
    }
  for (int i = 0; i < p->nreorders; i++) {
    dnnl_primitive_destroy(p->reorders[i].p);
    dnnl_memory_destroy(p->reorders[i].ms);
    dnnl_memory_destroy(p->reorders[i].md);
  }
  free(p->reorders);
  for (int i = 0; i < p->npool; i++) free(p->pool[i].ptr);
  free(p->pool);
  free(p->scratch);
  if (p->strm) dnnl_stream_destroy(p->strm);
  if (p->eng) dnnl_engine_destroy(p->eng);
  free(p->nodes);
  free(p->static_uses);
  free(p->vals);
  free(p);
}

static const char *kind_name(int k) {
  static const char *names[DK_COUNT] = {"-", "convolution", "pooling", "eltwise", "binary", "batch_normalization",
                                        "layer_normalization", "softmax", "matmul", "matmul(gemm)", "view", "deconvolution",
                                        "attention (matmul, softmax, matmul)", "reorder (transpose)", "reduction", "concat", "reorder (slice)", "prelu",
                                        "cast (conversion, layout kept)", "reorder (quantize/dequantize)",
                                        "int8 convolution/matmul", "pad (fill + reorder into a view)",
                                        "lrn", "batch_normalization (instance statistics)", "resampling",
                                        "alma MatMulNBits kernel, output columns over the threads"};
  return k >= 0 && k < DK_COUNT ? names[k] : "?";
}

static const char *post_name(int t) {
  return t == DP_ELT         ? "eltwise"
         : t == DP_SUM       ? "sum"
         : t == DP_BIAS      ? "bias"
         : t == DP_NORM_RELU ? "fused relu"
         : t == DP_DW        ? "depthwise convolution"
         : t == DP_PERM      ? "output strides (transpose)"
                             : "?";
}

static void dn_describe(void *plan, FILE *f) {
  dn_plan *p = plan;
  const alma_graph *g = p->g;
  int native = 0, groups = 0, to_plain = 0, from_eager = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    const dn_node *d = &p->nodes[i];
    native += d->kind != DK_NONE;
    if (alma__dn_q_describe(p, i, f)) continue;
    if (d->head == i) groups++;
    if (d->head >= 0 && d->head != i) {
      const alma_node *hn = &g->nodes[d->head];
      const dn_node *hd = &p->nodes[d->head];
      const char *pn = "?";
      for (int k = 0; k < hd->npost; k++)
        if (hd->post[k].node == i) pn = post_name(hd->post[k].type);
      fprintf(f, "  %-40s %-20s DNNL  fused into '%s' (%s) as %s post-op\n", n->name, n->op_type, hn->name,
              hn->op_type, pn);
      continue;
    }
    if (d->kind == DK_NONE) {
      fprintf(f, "  %-40s %-20s EAGER%s%s%s\n", n->name, n->op_type, d->why ? "  (" : "", d->why ? d->why : "",
              d->why ? ")" : "");
      continue;
    }
    const dn_prim *pr = d->prim[d->head == i && d->dw_at                ? DN_PRIM_DW
                                : d->head == i && d->kind != DK_ATTN ? DN_PRIM_FUSED
                                                                     : DN_PRIM_SINGLE];
    fprintf(f, "  %-40s %-20s DNNL  %s", n->name, n->op_type,
            !strcmp(n->op_type, "DynamicQuantizeLinear") ? "dynamic quantization (min/max, quantize; layout kept)"
                                                         : kind_name(d->kind));
    if (d->lazy_view) fputs(" (a strided view of its input for its readers, no copy)", f);
    if (d->kind == DK_ATTN && alma__attr_i(n, "causal", 0))
      fputs(" (causal: sgemm per block of query rows, masked key blocks skipped)", f);
    if (d->kind == DK_ATTN && d->n_eager) fprintf(f, " (on EAGER %d of %d runs)", d->n_eager, d->n_eager + d->n_native);
    if (d->head == i) fprintf(f, " + %d post-op node%s", d->nmem - 1, d->nmem > 2 ? "s" : "");
    for (int k = 0; d->self_fused && k < alma__dn_npost(d, DN_FUSED_OWN); k++)
      fprintf(f, "%s%s", k ? ", " : " with ", post_name(d->post[k].type));
    if (pr && pr->valid && !pr->declined) fprintf(f, " [%s]", pr->impl);
    if (pr && pr->declined) fprintf(f, " [declined at run time: %s]", pr->why);
    fputc('\n', f);
    /* boundaries: DNNL values read by EAGER nodes or the caller need a reorder to plain */
    for (int k = 0; k < n->n_outputs; k++) {
      int v = n->outputs[k];
      if (v < 0) continue;
      if (g->values[v].is_output) to_plain++;
      for (int j = 0; j < g->n_nodes; j++)
        for (int q = 0; q < g->nodes[j].n_inputs; q++)
          if (g->nodes[j].inputs[q] == v && p->nodes[j].kind == DK_NONE) to_plain++;
    }
    for (int k = 0; k < n->n_inputs; k++) {
      int v = n->inputs[k];
      if (v >= 0 && g->values[v].producer >= 0 && p->nodes[g->values[v].producer].kind == DK_NONE) from_eager++;
    }
  }
  fprintf(f,
          "  DNNL: oneDNN %d.%d.%d, ISA %d, threads %d (%s%s), %d of %d nodes on oneDNN, %d fused groups%s; "
          "layout boundaries: %d DNNL->plain edges, %d EAGER->DNNL edges\n",
          dnnl_version()->major, dnnl_version()->minor, dnnl_version()->patch, (int)dnnl_get_effective_cpu_isa(),
          p->threads, threading_name(), set_threads(p->threads) ? "" : ", thread count not settable", native,
          g->n_nodes, groups, p->hook_mode ? " (subgraph ops: one node at a time, plain layout)" : "", to_plain,
          from_eager);
  if (p->runs)
    fprintf(f, "  DNNL last run: %lld nodes on oneDNN (%lld computing in bfloat16), %lld on EAGER; reorders %lld to "
               "blocked, %lld to plain, %lld weights\n",
            (long long)p->n_native, (long long)p->n_native_bf16, (long long)p->n_eager, (long long)p->n_reorder_in,
            (long long)p->n_reorder_out, (long long)p->n_reorder_wei);
  alma__dn_q_summary(p, f);
}

const alma_runtime alma__runtime_dnnl = {
    .name = "DNNL",
    .description = "oneDNN primitives (C API): convolution, matmul, pooling, eltwise, binary, normalization, softmax, "
                   "lrn, resampling, pad; post-op fusion, blocked layouts kept between oneDNN nodes",
    .init = dn_init,
    .placement = dn_placement,
    .compile = dn_compile,
    .run = dn_run,
    .free = dn_free,
    .describe = dn_describe,
    .profile_start = dn_profile_start,
    .profile_read = dn_profile_read,
    .spin_advice = dn_spin_advice,
    .option_prefix = "dnnl",
    .options = dn_options,
    .n_options = (int)(sizeof dn_options / sizeof dn_options[0]),
};

#endif
