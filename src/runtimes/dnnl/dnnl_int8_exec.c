/* DNNL runtime, int8: running the clusters (their int8 Add and move forms, fallbacks to the float path)
 * and the QuantizeLinear / DequantizeLinear / QLinear / DynamicQuantizeLinear nodes. */
#ifdef ALMA_HAVE_DNNL

#include <float.h>
#include <math.h>

#include "ops/quant_kernels.h"
#include "runtimes/dnnl/dnnl_int8.h"
#include "runtimes/dnnl/dnnl_native.h"

/* A new run resets the per-run state (counters, lazy nodes). */
static void new_run(dn_plan *p, dn_qstate *S) {
  if (S->run_id == p->runs) return;
  S->run_id = p->runs;
  p->n_int8 = p->n_int8_reorder = 0;
  for (int k = 0; k < S->nlazy; k++) {
    S->lazy[k].pending = p->static_uses[S->lazy[k].out];
    S->lazy[k].ran = 0;
  }
}

/* ---- run: Add and move clusters ----------------------------------------------------------------------- */
/* QK_ADD: y = Q(DQ(a) + DQ(b)) [through eltwise steps] as one oneDNN binary primitive on the int8
 * sources in the layout a arrives in (b reordered into it when it differs). Binary takes scales
 * but no zero points, so the primitive computes xs * a + x2s * b and a linear post-op subtracts
 * xs * xzp + x2s * x2zp; the eltwise steps follow on real values, then a linear post-op divides
 * by y_scale and adds y's zero point before the saturating, round-to-nearest-even conversion to the
 * int8 destination (float32 destination without a QuantizeLinear). */
static alma_status q_build_add(dn_plan *p, qprim *q, const qargs *a, const dnnl_memory_desc_t *s0, const dnnl_memory_desc_t *s1,
                               const dnnl_memory_desc_t *d) {
  const alma_node *n = a->n;
  dnnl_primitive_attr_t attr = alma__dn_new_attr();
  dnnl_post_ops_t po = NULL;
  if (!attr || dnnl_post_ops_create(&po) != dnnl_success) {
    if (attr) dnnl_primitive_attr_destroy(attr);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  /* v = xs * a + x2s * b; the real sum is v - off. A Relu or Clip of it is a clip of v with
   * bounds moved by off (oneDNN 2.6's int8 binary kernel was measured to give wrong results for a
   * linear post-op followed by an eltwise one, so the chain is at most clip -> linear) */
  double off = (double)a->xs * a->xzp + (double)a->x2s * a->x2zp;
  double alpha = a->yq ? 1.0 / a->ys : 1.0, beta = a->yq ? a->yzp - off / a->ys : -off;
  dnnl_status_t s = dnnl_primitive_attr_set_scales(attr, DNNL_ARG_SRC_0, 1, 0, &a->xs);
  if (s == dnnl_success) s = dnnl_primitive_attr_set_scales(attr, DNNL_ARG_SRC_1, 1, 0, &a->x2s);
  if (a->n_elt > 1) s = dnnl_unimplemented;
  for (int e = 0; s == dnnl_success && e < a->n_elt; e++) {
    dnnl_alg_kind_t alg = a->elt[e].alg;
    float lo, hi;
    if (alg == dnnl_eltwise_relu && a->elt[e].alpha == 0) lo = 0, hi = FLT_MAX;
    else if (alg == dnnl_eltwise_clip || alg == dnnl_eltwise_clip_v2) lo = a->elt[e].alpha, hi = a->elt[e].beta;
    else s = dnnl_unimplemented;
    if (s == dnnl_success)
      s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip_v2, (float)(lo + off), hi == FLT_MAX ? FLT_MAX : (float)(hi + off));
  }
  if (s == dnnl_success && (alpha != 1.0 || beta != 0))
    s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, (float)alpha, (float)beta);
  if (s == dnnl_success && dnnl_post_ops_len(po) > 0) s = dnnl_primitive_attr_set_post_ops(attr, po);
  dnnl_post_ops_destroy(po);
  dnnl_binary_desc_t bd;
  if (s == dnnl_success) s = dnnl_binary_desc_init(&bd, dnnl_binary_add, s0, s1, d);
  if (s == dnnl_success) s = alma__dn_pd_create(p, &q->pd, &bd, attr, q->impl, sizeof q->impl);
  dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) return alma__dn_qdecline(q, n, "no int8 binary implementation for this add (status %d)", (int)s);
  if (alma__dn_impl_is_ref(q->impl)) return alma__dn_qdecline(q, n, "only a reference int8 kernel (%s)", q->impl);
  q->src_md = *s0;
  q->wei_md = *s1; /* (the second source's layout) */
  q->dst_md = *d;
  if (dnnl_primitive_create(&q->p, q->pd) != dnnl_success || !alma__dn_q_add_memory(p, &q->m_src, s0) || !alma__dn_q_add_memory(p, &q->m_wei, s1) ||
      !alma__dn_q_add_memory(p, &q->m_dst, d))
    return alma__dn_qdecline(q, n, "primitive creation failed");
  const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(q->pd, dnnl_query_scratchpad_md, 0);
  if (smd && smd->ndims > 0 && (q->scr_size = dnnl_memory_desc_get_size(smd)) > 0 && !alma__dn_q_add_memory(p, &q->m_scr, smd))
    return alma__dn_qdecline(q, n, "primitive creation failed");
  return ALMA_OK;
}

static alma_status q_exec_add(dn_plan *p, qprim *q, const qargs *a, dn_val *out, int *done) {
  const alma_node *n = a->n;
  dn_val *x = a->x, *x2 = a->x2;
  *done = 0;
  if (!x || !x2 || !x->live || !x2->live || !alma__dn_q_is_q8(x->t.dtype) || !alma__dn_q_is_q8(x2->t.dtype) || x->t.rank != x2->t.rank ||
      memcmp(x->t.dims, x2->t.dims, sizeof(int64_t) * (size_t)x->t.rank) || alma__numel(x->t.rank, x->t.dims) == 0)
    return ALMA_OK; /* broadcasting adds stay on the float path */
  alma_tensor os;
  memset(&os, 0, sizeof os);
  os.dtype = a->yq ? a->ydt : F32;
  os.rank = x->t.rank;
  memcpy(os.dims, x->t.dims, sizeof(int64_t) * (size_t)os.rank);
  dnnl_memory_desc_t s0, s1, d;
  alma__dn_val_md(x, &s0);
  s1 = s0;
  s1.data_type = alma__dn_dtype(x2->t.dtype);
  d = s0;
  d.data_type = alma__dn_dtype(os.dtype);
  uint64_t h = 1469598103934665603ull;
  int32_t ints[6] = {a->xzp, a->x2zp, a->yq, a->yzp, (int32_t)os.dtype, a->n_elt};
  float fl[3] = {a->xs, a->x2s, a->ys};
  h = alma__dn_q_fnv(h, ints, sizeof ints);
  h = alma__dn_q_fnv(h, fl, sizeof fl);
  h = alma__dn_q_fnv(h, a->elt, sizeof(dn_elt) * (size_t)a->n_elt);
  int32_t x2dt = (int32_t)x2->t.dtype; /* (s1 is s0's layout in this type; s0 is compared below) */
  h = alma__dn_q_fnv(h, &x2dt, sizeof x2dt);
  if (!q->valid || q->pkey != h || !dnnl_memory_desc_equal(&q->xmd, &s0)) {
    alma__dn_qprim_free(q);
    q->valid = 1;
    q->xmd = s0;
    q->pkey = h;
    ALMA_TRY(q_build_add(p, q, a, &s0, &s1, &d));
  }
  if (q->declined) return ALMA_OK;
  void *p0 = NULL, *p1 = NULL;
  dn_buf *t0 = NULL, *t1 = NULL, *db = NULL;
  alma_status st = alma__dn_val_get(p, x, &s0, 1, &p0, &t0, n);
  if (st == ALMA_OK) st = alma__dn_val_get(p, x2, &s1, 1, &p1, &t1, n);
  if (st == ALMA_OK && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&d)))) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (st == ALMA_OK) {
    dnnl_exec_arg_t args[4];
    int na = 0;
    dnnl_memory_set_data_handle(q->m_src, p0);
    dnnl_memory_set_data_handle(q->m_wei, p1);
    dnnl_memory_set_data_handle(q->m_dst, db->ptr);
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC_0, q->m_src};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC_1, q->m_wei};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, q->m_dst};
    st = alma__dn_q_execute(p, q, n, args, na);
  }
  alma__dn_unref(p, t0);
  alma__dn_unref(p, t1);
  return alma__dn_q_done(p, st, db, out, &os, &d, done, 1);
}

/* QK_MOVE: the anchor (MaxPool / Flatten / Reshape) run on x's 8-bit values, its output the
 * QuantizeLinear's (same scale, zero point and type). Declines (fallback) when the node's own
 * kernel does (a layout or geometry it does not take). */
static alma_status q_exec_move(dn_plan *p, qclu *c, int *done) {
  const alma_node *n = &p->g->nodes[c->anchor];
  dn_val *x = &p->vals[c->xv];
  *done = 0;
  if (!x->live || x->t.dtype != c->ydt || n->n_inputs > 2 || n->n_outputs > 8) return ALMA_OK;
  /* declined before in this layout: straight to the float path (the node's primitive slot would
   * otherwise be built again for each form, every run) */
  dnnl_memory_desc_t xmd;
  alma__dn_val_md(x, &xmd);
  if (c->pr.valid && c->pr.declined && dnnl_memory_desc_equal(&c->pr.xmd, &xmd)) return ALMA_OK;
  dn_val *in[2] = {x, n->n_inputs > 1 && n->inputs[1] >= 0 ? &p->vals[n->inputs[1]] : NULL};
  if (in[1] && (!in[1]->live || alma__dn_val_plain(p, in[1], n) != ALMA_OK)) return ALMA_OK; /* Reshape's shape */
  /* shapes as the float node infers them (MaxPool before opset 12 takes no 8-bit input) */
  alma_tensor tx = x->t, os[8];
  tx.dtype = F32;
  tx.data = NULL;
  const alma_tensor *tin[2] = {&tx, in[1] ? &in[1]->t : NULL};
  memset(os, 0, sizeof os);
  if (n->op->infer(n, tin, n->n_inputs, os, n->n_outputs) != ALMA_OK) {
    alma__error_clear();
    return ALMA_OK;
  }
  os[0].dtype = x->t.dtype;
  if (alma__numel(x->t.rank, x->t.dims) == 0 || alma__numel(os[0].rank, os[0].dims) == 0) return ALMA_OK;
  dn_val *out[1] = {&p->vals[c->outv]};
  ALMA_TRY(alma__dn_run(p, c->anchor, 0, in, n->n_inputs, os, out, 1, done));
  if (!*done) {
    c->pr.valid = c->pr.declined = 1;
    c->pr.xmd = xmd;
    const dn_prim *np = p->nodes[c->anchor].prim[DN_PRIM_SINGLE];
    snprintf(c->pr.why, sizeof c->pr.why, "%s", np && np->declined ? np->why : "the node's kernel takes no such int8 input");
  }
  return ALMA_OK;
}

/* ---- run: clusters ------------------------------------------------------------------------------------ */
void alma__dn_clu_args(dn_plan *p, qclu *c, qargs *a) {
  memset(a, 0, sizeof *a);
  a->kind = c->kind;
  a->n = &p->g->nodes[c->anchor];
  a->x = &p->vals[c->xv];
  a->xs = c->xs;
  a->xzp = c->xzp;
  a->x2 = c->x2v >= 0 ? &p->vals[c->x2v] : NULL;
  a->x2s = c->x2s;
  a->x2zp = c->x2zp;
  a->w = c->w;
  a->wrank = c->wrank;
  memcpy(a->wdims, c->wdims, sizeof a->wdims);
  a->wconst = 1;
  a->ws = c->ws;
  a->nws = c->nws;
  a->bq = c->bq;
  a->bf = c->bf;
  a->n_elt = c->n_elt;
  memcpy(a->elt, c->elt, sizeof a->elt);
  a->res = c->sum_other >= 0 ? &p->vals[c->sum_other] : NULL;
  a->sum_pos = c->sum_pos;
  a->yq = c->yq;
  a->ys = c->ys;
  a->yzp = c->yzp;
  a->ydt = c->ydt;
  a->transb = c->transb;
  a->dyn = c->dyn;
  a->emu = c->emu;
  a->w7 = c->w7;
  a->split = c->split;
  if (c->emu) a->w = c->wf;
  if (c->split) a->w = c->wsplit;
  if (c->dyn) a->alt = &c->pr2;
}

/* Input v of the anchor is retired: through its lazy DequantizeLinear when it has one. */
static void anchor_input_done(dn_plan *p, dn_qstate *S, int v) {
  const alma_node *d = alma__dn_q_producer(p->g, v);
  int di = d ? (int)(d - p->g->nodes) : -1;
  if (di < 0 || p->nodes[di].q_role != DN_Q_LAZY) {
    alma__dn_use_done(p, v);
    return;
  }
  qlazy *L = &S->lazy[p->nodes[di].q_idx];
  L->pending--;
  if (L->ran) {
    alma__dn_use_done(p, v);
  } else if (L->pending <= 0) { /* never materialized: its own inputs are done */
    for (int k = 0; k < d->n_inputs; k++) alma__dn_use_done(p, d->inputs[k]);
  }
}

/* The uses of the sources a cluster held for itself (their DequantizeLinear also ran). */
static void release_extra_uses(dn_plan *p, const qclu *c) {
  if (c->x_extra_use) alma__dn_use_done(p, c->dyn ? c->xs_v : c->xv);
  if (c->x2_extra_use) alma__dn_use_done(p, c->x2v);
}

static alma_status clu_fallback(dn_plan *p, dn_qstate *S, qclu *c) {
  const alma_graph *g = p->g;
  const alma_node *an = &g->nodes[c->anchor];
  c->n_fallback_runs++;
  for (int k = 0; k < an->n_inputs; k++) { /* lazy DequantizeLinear inputs computed now */
    const alma_node *d = alma__dn_q_producer(g, an->inputs[k]);
    if (!d || an->inputs[k] < 0) continue;
    int di = (int)(d - g->nodes);
    if (p->nodes[di].q_role != DN_Q_LAZY) continue;
    qlazy *L = &S->lazy[p->nodes[di].q_idx];
    if (L->ran) continue;
    ALMA_TRY(alma__dn_run_node(p, di));
    L->ran = 1;
    p->vals[L->out].uses = L->pending;
  }
  for (int m = 0; m < c->nmem; m++) ALMA_TRY(alma__dn_run_node(p, c->mem[m]));
  for (int k = 0; k < an->n_inputs; k++) {
    const alma_node *d = alma__dn_q_producer(g, an->inputs[k]);
    if (d && an->inputs[k] >= 0 && p->nodes[d - g->nodes].q_role == DN_Q_LAZY) S->lazy[p->nodes[d - g->nodes].q_idx].pending--;
  }
  release_extra_uses(p, c);
  return ALMA_OK;
}

/* A dyn cluster's source scale and zero point, as DynamicQuantizeLinear computed them this run. */
static int dyn_params(dn_plan *p, const qclu *c, qargs *a) {
  dn_val *s = &p->vals[c->xs_v], *z = &p->vals[c->xzp_v];
  const alma_node *n = &p->g->nodes[c->anchor];
  if (!s->live || !z->live || s->t.dtype != F32 || z->t.dtype != U8 || alma__numel(s->t.rank, s->t.dims) != 1 ||
      alma__numel(z->t.rank, z->t.dims) != 1 || alma__dn_val_plain(p, s, n) != ALMA_OK || alma__dn_val_plain(p, z, n) != ALMA_OK)
    return 0;
  a->xs = *(const float *)s->t.data;
  a->xzp = *(const uint8_t *)z->t.data;
  return 1;
}

alma_status alma__dn_q_step(dn_plan *p, int idx, int *at) {
  dn_qstate *S = p->q;
  dn_node *d = &p->nodes[idx];
  *at = idx;
  if (!S) return alma__errorf(ALMA_ERR_INTERNAL, "int8 state missing");
  new_run(p, S);
  if (d->q_role != DN_Q_MEMBER) return ALMA_OK; /* lazy: runs only on demand */
  qclu *c = &S->clu[d->q_idx];
  if (idx != c->last) return ALMA_OK;
  *at = c->anchor;
  const alma_graph *g = p->g;
  int done = 0;
  if (c->dw_prev >= 0 && c->dw_done_run == S->run_id) {
    done = 1; /* computed by its 1x1 cluster's fused primitive: only its inputs are retired */
  } else if (!S->fallback) {
    qargs a;
    alma__dn_clu_args(p, c, &a);
    if (c->dw_next >= 0) {
      qclu *b = &S->clu[c->dw_next];
      ALMA_TRY(alma__dn_q_exec_dw(p, c, b, &done));
      if (done) {
        b->dw_done_run = S->run_id;
        c->n_dw_runs++;
      }
    }
    if (done) {
    } else if (c->kind == QK_MOVE) {
      ALMA_TRY(q_exec_move(p, c, &done));
      p->n_int8 += done && alma__dn_is_op(&g->nodes[c->anchor], "MaxPool"); /* (a view is no primitive) */
    } else if (c->kind == QK_ADD) {
      if ((!c->xdt || c->xdt == a.x->t.dtype) && (!c->x2dt || c->x2dt == a.x2->t.dtype))
        ALMA_TRY(q_exec_add(p, &c->pr, &a, &p->vals[c->outv], &done));
    } else if ((!c->xdt || c->xdt == a.x->t.dtype) && (!c->dyn || dyn_params(p, c, &a))) {
      ALMA_TRY(alma__dn_q_exec(p, &c->pr, &a, &p->vals[c->outv], &done));
    }
  }
  if (!done) return clu_fallback(p, S, c);
  c->n_int8_runs++;
  p->n_native += c->nmem;
  p->nodes[c->anchor].n_native++;
  /* retire the members' inputs from outside the cluster */
  const alma_node *an = &g->nodes[c->anchor];
  for (int k = 0; k < an->n_inputs; k++)
    if (an->inputs[k] >= 0) anchor_input_done(p, S, an->inputs[k]);
  for (int m = 0; m < c->nmem; m++) {
    if (c->mem[m] == c->anchor) continue;
    const alma_node *mn = &g->nodes[c->mem[m]];
    for (int k = 0; k < mn->n_inputs; k++) {
      int v = mn->inputs[k], pr = v >= 0 ? g->values[v].producer : -1;
      if (v < 0) continue;
      int inside = 0;
      for (int j = 0; j < c->nmem && !inside; j++) inside = pr == c->mem[j];
      if (!inside) alma__dn_use_done(p, v);
    }
  }
  release_extra_uses(p, c);
  dn_val *o = &p->vals[c->outv];
  if (o->uses <= 0 && o->live) { /* nobody reads it */
    o->uses = 1;
    alma__dn_use_done(p, c->outv);
  }
  return ALMA_OK;
}

/* ---- run: QuantizeLinear / DequantizeLinear as reorders ------------------------------------------------ */
static qprim *node_prim(dn_plan *p, int idx) {
  dn_qstate *S = alma__dn_qstate(p);
  if (!S) return NULL;
  if (!S->nprim[idx]) S->nprim[idx] = calloc(1, sizeof(qprim));
  return S->nprim[idx];
}

/* A scale / zero point input's values as float / int32 (plain data). Returns the count, 0 on a
 * type it does not take. */
static int64_t read_f32(dn_plan *p, dn_val *v, const alma_node *n, const float **out) {
  if (!v || !v->live || v->t.dtype != F32) return 0;
  if (alma__dn_val_plain(p, v, n) != ALMA_OK) return 0;
  *out = v->t.data;
  return alma__numel(v->t.rank, v->t.dims);
}

static int64_t read_zp(dn_plan *p, dn_val *v, const alma_node *n, int32_t *z, int64_t max, alma_dtype *dt) {
  if (!v || !v->live || (v->t.dtype != U8 && v->t.dtype != S8 && v->t.dtype != S32)) return 0;
  if (alma__dn_val_plain(p, v, n) != ALMA_OK) return 0;
  int64_t cnt = alma__numel(v->t.rank, v->t.dims);
  if (cnt > max) return 0;
  for (int64_t k = 0; k < cnt; k++) z[k] = (int32_t)alma__get_i64(v->t.data, v->t.dtype, k);
  *dt = v->t.dtype;
  return cnt;
}

/* QuantizeLinear / DynamicQuantizeLinear passes over a float32 tensor, in chunks on oneDNN's
 * threads (alma__dn_parallel). Each element's byte does not depend on the split, and the range's
 * min and max are exact whatever the order (NaN and -0 never enter them, quant_kernels.h), so any
 * thread count gives the single-threaded result. */
enum { QP_MAX_THREADS = 256, QP_MIN_CHUNK = 1 << 15 }; /* smaller chunks: a team's start costs more than it saves */
typedef struct q_par {
  const float *x;
  int64_t n;
  float scale;
  int32_t zp;
  int is_u8;
  void *y;
  float mn[QP_MAX_THREADS], mx[QP_MAX_THREADS]; /* per thread; 0 (neutral) where a thread did not run */
} q_par;

static int q_par_threads(const dn_plan *p, int64_t n) {
  int64_t t = n / QP_MIN_CHUNK;
  if (t > p->threads) t = p->threads;
  if (t > QP_MAX_THREADS) t = QP_MAX_THREADS;
  return t < 1 ? 1 : (int)t;
}

/* Thread tid's elements [*b, *e): equal chunks, multiples of 64 (whole vector steps). */
static void q_par_chunk(int64_t n, int tid, int nt, int64_t *b, int64_t *e) {
  int64_t per = ((n + nt - 1) / nt + 63) & ~(int64_t)63;
  *b = per * tid < n ? per * tid : n;
  *e = *b + per < n ? *b + per : n;
}

static void q_par_range(void *arg, int tid, int nt) {
  q_par *j = arg;
  int64_t b, e;
  q_par_chunk(j->n, tid, nt, &b, &e);
  if (tid < QP_MAX_THREADS) alma__dynq_range(j->x + b, e - b, &j->mn[tid], &j->mx[tid]);
}

static void q_par_apply(void *arg, int tid, int nt) {
  q_par *j = arg;
  int64_t b, e;
  q_par_chunk(j->n, tid, nt, &b, &e);
  alma__quantize_f32(j->x + b, e - b, j->scale, j->zp, j->is_u8, (char *)j->y + b); /* ONNX's arithmetic, EAGER's code */
}

static void q_par_quantize(const dn_plan *p, const float *x, int64_t n, float scale, int32_t zp, int is_u8, void *y) {
  q_par j = {.x = x, .n = n, .scale = scale, .zp = zp, .is_u8 = is_u8, .y = y};
  alma__dn_parallel(q_par_threads(p, n), q_par_apply, &j);
}

static alma_status q_plain(dn_plan *p, dn_val *x, float s, int32_t zp, const alma_tensor *os, dn_val *out, int *done) {
  int64_t cnt = alma__numel(x->t.rank, x->t.dims);
  dnnl_memory_desc_t md;
  alma__dn_plain_md_dt(&md, os->rank, os->dims, alma__dn_dtype(os->dtype));
  dn_buf *db = alma__dn_alloc(p, (size_t)cnt);
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  q_par_quantize(p, x->t.data, cnt, s, zp, os->dtype == U8, db->ptr);
  alma__dn_val_set(out, os, &md, db);
  p->n_int8_reorder++;
  *done = 1;
  return ALMA_OK;
}

static alma_status run_qdq(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_qstate *S = alma__dn_qstate(p);
  qprim *q = node_prim(p, idx);
  if (!S || !q) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  new_run(p, S);
  int quant = alma__dn_is_op(n, "QuantizeLinear");
  dn_val *x = in[0];
  if (!x || !x->live || nin < 2 || !in[1]) return ALMA_OK;
  alma_dtype idt = x->t.dtype, odt = os[0].dtype;
  if (quant ? (idt != F32 || !alma__dn_q_is_q8(odt)) : ((!alma__dn_q_is_q8(idt) && idt != S32) || odt != F32)) return ALMA_OK;
  if (x->t.rank != os[0].rank || memcmp(x->t.dims, os[0].dims, sizeof(int64_t) * (size_t)x->t.rank)) return ALMA_OK;
  if (alma__numel(x->t.rank, x->t.dims) == 0) return ALMA_OK;
  const float *sc = NULL;
  int64_t ns = read_f32(p, in[1], n, &sc);
  int r = x->t.rank, axis = 0;
  if (ns < 1) return ALMA_OK;
  if (ns > 1) { /* per axis */
    int64_t a = alma__attr_i(n, "axis", 1);
    if (a < 0) a += r;
    if (a < 0 || a >= r || x->t.dims[a] != ns || in[1]->t.rank != 1) return ALMA_OK;
    axis = (int)a;
  }
  int32_t zp = 0;
  if (nin > 2 && in[2]) {
    int32_t zbuf[1];
    alma_dtype zdt;
    int64_t nz = in[2]->t.rank <= 1 && alma__numel(in[2]->t.rank, in[2]->t.dims) == 1 ? read_zp(p, in[2], n, zbuf, 1, &zdt) : 0;
    if (nz == 1) {
      zp = zbuf[0];
    } else { /* per-axis zero points: oneDNN takes one; all zero is one */
      const void *zd;
      int64_t cnt = alma__numel(in[2]->t.rank, in[2]->t.dims);
      if (!in[2]->live || !alma__dtype_is_int(in[2]->t.dtype) || alma__dn_val_plain(p, in[2], n) != ALMA_OK) return ALMA_OK;
      zd = in[2]->t.data;
      for (int64_t k = 0; k < cnt; k++)
        if (alma__get_i64(zd, in[2]->t.dtype, k)) return ALMA_OK;
    }
  }
  for (int64_t k = 0; k < ns; k++)
    if (!(sc[k] > 0) || !isfinite(sc[k])) return ALMA_OK; /* EAGER says what a zero or NaN scale gives */
  /* oneDNN multiplies by 1/scale where ONNX divides: the two round apart only when x / scale lies
   * within a float's precision of a half-integer, but they can. A plain input (graph input, EAGER
   * output: no layout to keep) is quantized here with ONNX's division; per axis, it stays on EAGER
   * unless 1/scale is exact. */
  if (quant && !x->has_blk) {
    if (ns == 1) return q_plain(p, x, sc[0], zp, &os[0], out[0], done);
    for (int64_t k = 0; k < ns; k++) {
      int e;
      if (frexpf(sc[k], &e) != 0.5f) return ALMA_OK;
    }
  }
  /* a constant dequantized (weights the int8 path did not take): once, then shared */
  int cst = !quant && alma__dn_const(p->g, n->inputs[0]) && alma__dn_const(p->g, n->inputs[1]) &&
            (n->n_inputs < 3 || n->inputs[2] < 0 || alma__dn_const(p->g, n->inputs[2]));
  if (cst && q->valid && q->cache) {
    q->cache->refs++;
    alma__dn_val_set(out[0], &os[0], &q->dst_md, q->cache);
    *done = 1;
    return ALMA_OK;
  }
  /* the output's layout: the cluster reading it when there is one, else the input's */
  dnnl_memory_desc_t xmd, ymd;
  alma__dn_val_md(x, &xmd);
  ymd = xmd;
  ymd.data_type = alma__dn_dtype(odt);
  if (quant && S->hint[idx] >= 0) { /* (a shifting cluster then shifts within that layout) */
    qprim *cp = &S->clu[S->hint[idx]].pr;
    if (cp->valid && !cp->declined && cp->src_md.ndims == r &&
        !memcmp(cp->src_md.dims, xmd.dims, sizeof(dnnl_dim_t) * (size_t)r)) {
      ymd = cp->src_md;
      ymd.data_type = alma__dn_dtype(odt);
    }
  }
  if (ymd.format_kind != dnnl_blocked) alma__dn_plain_md_dt(&ymd, r, os[0].dims, alma__dn_dtype(odt));
  uint64_t key = 1469598103934665603ull;
  key = alma__dn_q_fnv(key, sc, sizeof(float) * (size_t)ns);
  key = alma__dn_q_fnv(key, &zp, sizeof zp);
  key = alma__dn_q_fnv(key, &axis, sizeof axis);
  key = alma__dn_q_fnv(key, &ymd, sizeof ymd);
  if (!q->valid || q->pkey != key || !dnnl_memory_desc_equal(&q->xmd, &xmd)) {
    alma__dn_qprim_free(q);
    q->valid = 1;
    q->xmd = xmd;
    q->pkey = key;
    float *s2 = malloc(sizeof(float) * (size_t)ns);
    dnnl_primitive_attr_t attr = alma__dn_new_attr();
    if (!s2 || !attr) {
      free(s2);
      if (attr) dnnl_primitive_attr_destroy(attr);
      return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    }
    for (int64_t k = 0; k < ns; k++) s2[k] = quant ? 1.0f / sc[k] : sc[k];
    dnnl_status_t s = dnnl_primitive_attr_set_output_scales(attr, ns, ns > 1 ? 1 << axis : 0, s2);
    if (s == dnnl_success && zp) s = dnnl_primitive_attr_set_zero_points(attr, quant ? DNNL_ARG_DST : DNNL_ARG_SRC, 1, 0, &zp);
    if (s == dnnl_success) s = dnnl_reorder_primitive_desc_create(&q->pd, &xmd, p->eng, &ymd, p->eng, attr);
    dnnl_primitive_attr_destroy(attr);
    free(s2);
    if (s != dnnl_success) return alma__dn_qdecline(q, n, "no reorder for these types (status %d)", (int)s);
    const char *impl = NULL;
    dnnl_primitive_desc_query(q->pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(q->impl, sizeof q->impl, "%s", impl ? impl : "?");
    q->src_md = xmd;
    q->dst_md = ymd;
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(q->pd, dnnl_query_scratchpad_md, 0);
    if (dnnl_primitive_create(&q->p, q->pd) != dnnl_success || !alma__dn_q_add_memory(p, &q->m_src, &xmd) ||
        !alma__dn_q_add_memory(p, &q->m_dst, &ymd) ||
        (smd && smd->ndims > 0 && (q->scr_size = dnnl_memory_desc_get_size(smd)) > 0 && !alma__dn_q_add_memory(p, &q->m_scr, smd)))
      return alma__dn_qdecline(q, n, "reorder creation failed");
  }
  if (q->declined) return ALMA_OK;
  dn_buf *db = NULL;
  if (cst) { /* kept by the primitive (one reference) across runs, never pooled */
    size_t sz = dnnl_memory_desc_get_size(&q->dst_md);
    if ((db = malloc(sizeof *db)) && !(db->ptr = aligned_alloc(64, (sz + 63) & ~(size_t)63))) {
      free(db);
      db = NULL;
    }
    if (db) {
      db->size = sz;
      db->refs = 1;
      db->pooled = 0;
    }
  } else {
    db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&q->dst_md));
  }
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dnnl_memory_set_data_handle(q->m_src, x->has_blk ? x->bbuf->ptr : x->t.data);
  dnnl_memory_set_data_handle(q->m_dst, db->ptr);
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, q->m_src}, {DNNL_ARG_TO, q->m_dst}};
  dnnl_status_t s = dnnl_primitive_execute(q->p, p->strm, 2, args);
  if (s != dnnl_success) {
    alma__dn_unref(p, db);
    return alma__op_error(n, ALMA_ERR_INTERNAL, "oneDNN %s reorder failed (status %d)", q->impl, (int)s);
  }
  if (cst) {
    q->cache = db;
    db->refs++;
  }
  alma__dn_val_set(out[0], &os[0], &q->dst_md, db);
  p->n_int8_reorder++;
  *done = 1;
  return ALMA_OK;
}

/* ---- run: QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger --------------------------------------- */
/* A scalar parameter input (scale or zero point). */
static int scalar_f32(dn_plan *p, dn_val *v, const alma_node *n, float *out) {
  const float *f;
  if (read_f32(p, v, n, &f) != 1) return 0;
  *out = f[0];
  return *out > 0 && isfinite(*out);
}

static int scalar_zp(dn_plan *p, dn_val *v, const alma_node *n, int32_t *z, alma_dtype want) {
  alma_dtype dt;
  if (!v) {
    *z = 0;
    return 1;
  }
  return read_zp(p, v, n, z, 1, &dt) == 1 && dt == want;
}

static alma_status run_qlinear(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_qstate *S = alma__dn_qstate(p);
  qprim *q = node_prim(p, idx);
  if (!S || !q) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  new_run(p, S);
  if (S->fallback || S->off) return ALMA_OK; /* no int8 primitives: EAGER's integer kernels */
  int integer = alma__dn_is_op(n, "ConvInteger") || alma__dn_is_op(n, "MatMulInteger");
  int conv = alma__dn_is_op(n, "QLinearConv") || alma__dn_is_op(n, "ConvInteger");
  qargs a;
  memset(&a, 0, sizeof a);
  a.kind = conv ? QK_CONV : QK_MATMUL;
  a.n = n;
  /* inputs: QLinear: x, xs, xzp, w, ws, wzp, ys, yzp [, B]; Integer: x, w [, xzp, wzp] */
  int iw = integer ? 1 : 3;
  dn_val *x = in[0], *w = nin > iw ? in[iw] : NULL;
  if (!x || !x->live || !alma__dn_q_is_q8(x->t.dtype) || !w || !w->live || w->t.dtype != S8 || w->t.rank > ALMA_MAX_RANK) return ALMA_OK;
  a.x = x;
  float one = 1.0f;
  if (integer) {
    if (!scalar_zp(p, nin > 2 ? in[2] : NULL, n, &a.xzp, x->t.dtype)) return ALMA_OK;
    int32_t wzp = 0;
    if (!scalar_zp(p, nin > 3 ? in[3] : NULL, n, &wzp, S8) || wzp) return ALMA_OK;
    a.xs = 1.0f;
    a.ws = &one;
    a.nws = 1;
    a.s32 = 1;
  } else {
    if (nin < 8 || !scalar_f32(p, in[1], n, &a.xs) || !scalar_zp(p, in[2], n, &a.xzp, x->t.dtype)) return ALMA_OK;
    a.nws = read_f32(p, in[4], n, &a.ws);
    if (a.nws < 1) return ALMA_OK;
    for (int64_t k = 0; k < a.nws; k++)
      if (!(a.ws[k] > 0) || !isfinite(a.ws[k])) return ALMA_OK;
    dn_val *wz = in[5];
    if (wz) { /* all zero */
      if (!wz->live || wz->t.dtype != S8 || alma__dn_val_plain(p, wz, n) != ALMA_OK) return ALMA_OK;
      for (int64_t k = 0; k < alma__numel(wz->t.rank, wz->t.dims); k++)
        if (((const int8_t *)wz->t.data)[k]) return ALMA_OK;
    }
    if (!scalar_f32(p, in[6], n, &a.ys) || !in[7] || !alma__dn_q_is_q8(in[7]->t.dtype) ||
        !scalar_zp(p, in[7], n, &a.yzp, in[7]->t.dtype))
      return ALMA_OK;
    a.yq = 1;
    a.ydt = in[7]->t.dtype;
    if (conv && nin > 8 && in[8]) {
      dn_val *b = in[8];
      if (!b->live || b->t.dtype != S32 || alma__dn_val_plain(p, b, n) != ALMA_OK) return ALMA_OK;
      if (alma__numel(b->t.rank, b->t.dims) != w->t.dims[0]) return ALMA_OK;
      a.bq = b->t.data;
    }
  }
  if (alma__dn_val_plain(p, w, n) != ALMA_OK) return ALMA_OK;
  a.w = w->t.data;
  a.wrank = w->t.rank;
  memcpy(a.wdims, w->t.dims, sizeof(int64_t) * (size_t)w->t.rank);
  a.wconst = alma__dn_const(p->g, n->inputs[iw]) != NULL;
  int64_t OC = conv ? a.wdims[0] : a.wdims[a.wrank - 1];
  if (a.nws != 1 && a.nws != OC) return ALMA_OK;
  if (!conv && a.wrank == 1) return ALMA_OK;
  alma_status st = alma__dn_q_exec(p, q, &a, out[0], done);
  if (st == ALMA_OK && *done && (out[0]->t.dtype != os[0].dtype || out[0]->t.rank != os[0].rank ||
                                  memcmp(out[0]->t.dims, os[0].dims, sizeof(int64_t) * (size_t)os[0].rank)))
    return alma__op_error(n, ALMA_ERR_INTERNAL, "int8 primitive's output shape differs from the inferred one");
  return st;
}

/* DynamicQuantizeLinear: one pass for the range, one to quantize (quant_kernels.h, EAGER's
 * arithmetic), each in chunks on the runtime's threads (q_par), in the layout x comes in: a
 * float32 value blocked by the primitive that wrote it (NHWC after an int8 convolution) gives its
 * uint8 data in that layout, which the next int8 convolution reads as it is. Padded or strided
 * layouts are read plain. */
static alma_status run_dynq(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int nout,
                            int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_qstate *S = alma__dn_qstate(p);
  if (!S) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  new_run(p, S);
  dn_val *x = nin > 0 ? in[0] : NULL;
  if (!x || !x->live || x->t.dtype != F32 || os[0].dtype != U8) return ALMA_OK;
  int64_t cnt = alma__numel(x->t.rank, x->t.dims);
  if (cnt == 0) return ALMA_OK;
  dnnl_memory_desc_t md;
  const float *xd;
  int dense = 0;
  if (x->has_blk && x->bmd.format_kind == dnnl_blocked && x->bmd.offset0 == 0 &&
      dnnl_memory_desc_get_size(&x->bmd) == (size_t)cnt * sizeof(float)) {
    dense = 1;
    for (int i = 0; i < x->bmd.ndims; i++) dense &= x->bmd.padded_dims[i] == x->bmd.dims[i];
  }
  if (dense) {
    md = x->bmd;
    xd = x->bbuf->ptr;
  } else {
    ALMA_TRY(alma__dn_val_plain(p, x, n));
    alma__dn_plain_md_dt(&md, x->t.rank, x->t.dims, dnnl_f32);
    xd = x->t.data;
  }
  md.data_type = dnnl_u8;
  float mn = 0.0f, mx = 0.0f, scale;
  uint8_t zp;
  q_par rj = {.x = xd, .n = cnt};
  alma__dn_parallel(q_par_threads(p, cnt), q_par_range, &rj);
  for (int t = 0; t < QP_MAX_THREADS; t++) {
    if (rj.mn[t] < mn) mn = rj.mn[t];
    if (rj.mx[t] > mx) mx = rj.mx[t];
  }
  alma__dynq_params(mn, mx, &scale, &zp);
  dn_buf *b[3] = {NULL, NULL, NULL};
  size_t sz[3] = {(size_t)cnt, sizeof(float), 1};
  for (int k = 0; k < 3 && k < nout; k++)
    if (out[k] && !(b[k] = alma__dn_alloc(p, sz[k]))) {
      for (int j = 0; j < k; j++) alma__dn_unref(p, b[j]);
      return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    }
  if (b[0]) q_par_quantize(p, xd, cnt, scale, zp, 1, b[0]->ptr); /* alma__dynq_apply, in chunks */
  if (b[1]) *(float *)b[1]->ptr = scale;
  if (b[2]) *(uint8_t *)b[2]->ptr = zp;
  for (int k = 0; k < 3 && k < nout; k++) {
    if (!b[k]) continue;
    dnnl_memory_desc_t smd;
    if (k) alma__dn_plain_md_dt(&smd, os[k].rank, os[k].dims, alma__dn_dtype(os[k].dtype));
    alma__dn_val_set(out[k], &os[k], k ? &smd : &md, b[k]);
  }
  p->n_int8_reorder++;
  *done = 1;
  return ALMA_OK;
}

alma_status alma__dn_q_run(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int nout,
                           int *done) {
  *done = 0;
  if (nout < 1 || !out[0]) return ALMA_OK;
  if (alma__dn_is_op(&p->g->nodes[idx], "DynamicQuantizeLinear")) return run_dynq(p, idx, in, nin, os, out, nout, done);
  if (p->nodes[idx].kind == DK_QDQ) return run_qdq(p, idx, in, nin, os, out, done);
  return run_qlinear(p, idx, in, nin, os, out, done);
}

#endif
