/* DNNL runtime: alma__dn_run, which runs a node through its kind's kernel, and the nodes run on
 * alma's kernels over oneDNN's threads (contrib nodes, MatMulNBits). */
#ifdef ALMA_HAVE_DNNL

#include <stdatomic.h>

#include "ops/contrib_bert.h"
#include "ops/contrib_nbits.h"
#include "runtimes/dnnl/dnnl_native.h"
#include "runtimes/dnnl/dnnl_rt.h"

#define F32 ALMA_DTYPE_FLOAT32

/* ---- MatMulNBits: alma's kernel with its output columns split over oneDNN's OpenMP threads ------- */
typedef struct nbits_par {
  alma__nbits_item_fn fn;
  void *arg;
  int64_t items;
  atomic_llong next; /* items are taken as threads come free: a descheduled thread leaves its share */
} nbits_par;

static void nbits_task(void *arg, int tid, int nt) {
  (void)tid, (void)nt;
  nbits_par *t = arg;
  for (int64_t i; (i = atomic_fetch_add(&t->next, 1)) < t->items;) t->fn(t->arg, i);
}

void alma__dn_parfor(void *pctx, int64_t items, alma__nbits_item_fn fn, void *arg) {
  nbits_par t = {.fn = fn, .arg = arg, .items = items};
  atomic_init(&t.next, 0);
  alma__dn_parallel(*(const int *)pctx, nbits_task, &t);
}

static alma_status run_nbits(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                             int *done) {
  const alma_node *n = &p->g->nodes[idx];
  const alma_tensor *t[6] = {NULL};
  if (nin > 6 || os[0].dtype != F32 || in[0]->t.dtype != F32 || alma_tensor_numel(&os[0]) == 0) return ALMA_OK;
  for (int k = 0; k < nin; k++)
    if (in[k]) {
      ALMA_TRY(alma__dn_val_plain(p, in[k], n));
      t[k] = &in[k]->t;
    }
  dnnl_memory_desc_t ymd;
  alma__dn_plain_md_of(&ymd, os[0].rank, os[0].dims, F32);
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&ymd));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  alma_tensor y = os[0];
  y.data = db->ptr;
  y.nbytes = dnnl_memory_desc_get_size(&ymd);
  y.owns_data = 0;
  alma_status st = alma__mnb_exec_par(n, t, nin, &y, p->threads, alma__dn_parfor, &p->threads);
  return alma__dn_finish(p, st, db, out[0], &os[0], &ymd, done);
}

alma_status alma__dn_run_contrib(dn_plan *p, const alma_node *n, const alma_tensor *const *in, alma_tensor *out) {
  int nout = n->n_outputs;
  for (int i = 0; i < nout; i++) memset(&out[i], 0, sizeof out[i]);
  ALMA_TRY(n->op->infer(n, in, n->n_inputs, out, nout));
  alma_status st = ALMA_OK;
  for (int i = 0; i < nout && st == ALMA_OK; i++) {
    alma_tensor shape = out[i];
    if (n->outputs[i] >= 0) st = alma__tensor_alloc(&out[i], shape.dtype, shape.rank, shape.dims);
  }
  if (st == ALMA_OK) st = alma__contrib_exec_par(n, in, n->n_inputs, out, nout, p->threads, alma__dn_parfor, &p->threads);
  if (st != ALMA_OK)
    for (int i = 0; i < nout; i++) alma_tensor_free_data(&out[i]);
  return st;
}

alma_status alma__dn_run(dn_plan *p, int idx, int fused, dn_val **in, int nin, const alma_tensor *outshape, dn_val **out,
                         int nout, int *done) {
  *done = 0;
  if (nin < 1 || nout < 1 || !in[0] || !out[0]) return ALMA_OK;
  switch (p->nodes[idx].kind) {
    case DK_CONV: return alma__dn_run_conv(p, idx, fused, in, nin, outshape, out, done);
    case DK_POOL: return alma__dn_run_pool(p, idx, in, outshape, out, done);
    case DK_ELTWISE: return alma__dn_run_eltwise(p, idx, in, nin, outshape, out, done);
    case DK_DECONV: return alma__dn_run_deconv(p, idx, in, nin, outshape, out, done);
    case DK_ATTN: return alma__dn_run_attn(p, idx, fused, in, nin, outshape, out, done);
    case DK_TRANSPOSE: return alma__dn_run_transpose(p, idx, in, outshape, out, done);
    case DK_REDUCE: return alma__dn_run_reduce(p, idx, in, nin, outshape, out, done);
    case DK_CONCAT: return alma__dn_run_concat(p, idx, in, nin, outshape, out, done);
    case DK_SLICE: return alma__dn_run_slice(p, idx, in, nin, outshape, out, nout, done);
    case DK_PRELU: return nin == 2 && in[1] ? alma__dn_run_prelu(p, idx, in, outshape, out, done) : ALMA_OK;
    case DK_BINARY: return nin == 2 && in[1] ? alma__dn_run_binary(p, idx, in, outshape, out, done) : ALMA_OK;
    case DK_BNORM: return alma__dn_run_bnorm(p, idx, fused, in, nin, outshape, out, done);
    case DK_LNORM: return alma__dn_run_lnorm(p, idx, in, nin, outshape, out, done);
    case DK_SOFTMAX: return alma__dn_run_softmax(p, idx, in, outshape, out, done);
    case DK_MATMUL: return nin >= 2 && in[1] ? alma__dn_run_matmul(p, idx, fused, in, outshape, out, done) : ALMA_OK;
    case DK_GEMM: return nin >= 2 && in[1] ? alma__dn_run_gemm(p, idx, fused, in, nin, outshape, out, done) : ALMA_OK;
    case DK_VIEW: return alma__dn_run_view(p, idx, in, outshape, out, done);
    case DK_QDQ:
    case DK_QLINEAR: return alma__dn_q_run(p, idx, in, nin, outshape, out, nout, done);
    case DK_CAST: return alma__dn_run_cast(p, idx, in, outshape, out, done);
    case DK_PAD: return alma__dn_run_pad(p, idx, in, nin, outshape, out, done);
    case DK_LRN: return alma__dn_run_lrn(p, idx, in, outshape, out, done);
    case DK_INORM: return alma__dn_run_inorm(p, idx, in, nin, outshape, out, done);
    case DK_RESAMPLE: return alma__dn_run_resample(p, idx, in, nin, outshape, out, done);
    case DK_NBITS: return run_nbits(p, idx, in, nin, outshape, out, done);
    default: return ALMA_OK;
  }
}

#endif
