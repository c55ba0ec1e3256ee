/* The operator registry: the ops.def list, lookup by (domain, type) and version binding. */
#include "ops/op.h"

#include <stdatomic.h>

static const alma_op_def *const alma__ops[] = {
#define ALMA_OP(name) &alma__op_##name,
#include "ops/ops.def"
#undef ALMA_OP
};
#define ALMA__N_OPS ((int)(sizeof alma__ops / sizeof alma__ops[0]))

static int alma__domain_is_onnx(const char *d) { return !d || !d[0] || !strcmp(d, "ai.onnx"); }

const alma_op_def *alma__op_find(const char *domain, const char *op_type) {
  for (int i = 0; i < ALMA__N_OPS; i++) {
    const alma_op_def *d = alma__ops[i];
    if (!d || strcmp(d->name, op_type)) continue;
    if (alma__domain_is_onnx(domain) ? alma__domain_is_onnx(d->domain) : !strcmp(domain, d->domain ? d->domain : ""))
      return d;
  }
  return NULL;
}

int alma__op_count(void) {
  int n = 0;
  for (int i = 0; i < ALMA__N_OPS; i++) n += alma__ops[i] != NULL;
  return n;
}

const alma_op_def *alma__op_at(int i) {
  for (int k = 0; k < ALMA__N_OPS; k++)
    if (alma__ops[k] && i-- == 0) return alma__ops[k];
  return NULL;
}

alma_status alma__op_resolve(alma_node *n, int64_t opset) {
  const alma_op_def *d = alma__op_find(n->domain, n->op_type);
  const char *dom = alma__domain_is_onnx(n->domain) ? "ai.onnx" : n->domain;
  if (!d)
    return alma__errorf(ALMA_ERR_UNSUPPORTED, "node '%s': operator %s (domain %s, opset %lld) is not supported by alma",
                        n->name, n->op_type, dom, (long long)opset);
  int best = 0;
  for (int i = 0; i < ALMA_OP_MAX_VERSIONS && d->versions[i]; i++)
    if (d->versions[i] <= opset) best = d->versions[i];
  if (!best)
    return alma__errorf(ALMA_ERR_UNSUPPORTED,
                        "node '%s': operator %s at opset %lld predates the versions alma implements (from %d)",
                        n->name, n->op_type, (long long)opset, d->versions[0]);
  if (n->n_inputs < d->min_inputs || (d->max_inputs >= 0 && n->n_inputs > d->max_inputs))
    return alma__errorf(ALMA_ERR_INVALID_MODEL, "node '%s' (%s): %d inputs given, expected %d to %d", n->name,
                        n->op_type, n->n_inputs, d->min_inputs, d->max_inputs);
  if (n->n_outputs < d->min_outputs || (d->max_outputs >= 0 && n->n_outputs > d->max_outputs))
    return alma__errorf(ALMA_ERR_INVALID_MODEL, "node '%s' (%s): %d outputs given, expected %d to %d", n->name,
                        n->op_type, n->n_outputs, d->min_outputs, d->max_outputs);
  /* Kernels may rely on inputs below min_inputs being present. */
  if (!(d->flags & ALMA_OP_EMPTY_INPUTS_OK))
    for (int i = 0; i < d->min_inputs; i++)
      if (n->inputs[i] < 0)
        return alma__errorf(ALMA_ERR_INVALID_MODEL, "node '%s' (%s): required input %d is empty", n->name, n->op_type,
                            i);
  /* Likewise kernels write their required outputs; "" is only for optional ones. */
  for (int i = 0; i < d->min_outputs && i < n->n_outputs; i++)
    if (n->outputs[i] < 0)
      return alma__errorf(ALMA_ERR_INVALID_MODEL, "node '%s' (%s): required output %d is empty", n->name, n->op_type,
                          i);
  n->op = d;
  n->since_version = best;
  return ALMA_OK;
}

alma_status alma__op_error_set(const alma_node *n, alma_status s, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return alma__errorf(s, "node '%s' (%s): %s", n->name ? n->name : "", n->op_type, msg);
}

void alma__set_shape(alma_tensor *out, alma_dtype dt, int rank, const int64_t *dims) {
  out->dtype = dt;
  out->rank = rank;
  for (int i = 0; i < rank; i++) out->dims[i] = dims[i];
}

alma_status alma__broadcast_shape(int ra, const int64_t *da, int rb, const int64_t *db, int *rank_out,
                                  int64_t *dims_out) {
  int r = ra > rb ? ra : rb;
  for (int i = 0; i < r; i++) {
    int64_t a = i < r - ra ? 1 : da[i - (r - ra)];
    int64_t b = i < r - rb ? 1 : db[i - (r - rb)];
    if (a != b && a != 1 && b != 1) {
      char sa[128], sb[128];
      return alma__errorf(ALMA_ERR_SHAPE, "shapes %s and %s cannot be broadcast",
                          alma__shape_str(ra, da, sa, sizeof sa), alma__shape_str(rb, db, sb, sizeof sb));
    }
    dims_out[i] = a == 1 ? b : a;
  }
  *rank_out = r;
  return ALMA_OK;
}

int64_t alma__broadcast_index(int64_t i, int rank_out, const int64_t *dims_out, int rank_in,
                              const int64_t *dims_in) {
  int64_t idx = 0, stride = 1;
  for (int k = rank_out - 1, j = rank_in - 1; k >= 0 && j >= 0; k--, j--) {
    int64_t c = i % dims_out[k];
    i /= dims_out[k];
    if (dims_in[j] != 1) idx += c * stride;
    stride *= dims_in[j];
  }
  return idx;
}

alma_status alma__op_alloc_output(const alma_node *n, alma_tensor *t) {
  alma_tensor shape = *t;
  if (n->op && (n->op->flags & ALMA_OP_FILLS_OUTPUTS))
    return alma__tensor_alloc_uninit(t, shape.dtype, shape.rank, shape.dims);
  return alma__tensor_alloc(t, shape.dtype, shape.rank, shape.dims);
}

alma_status alma__op_run_node(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                              alma_tensor *out, int nout) {
  if (!n->op) return alma__op_error(n, ALMA_ERR_INTERNAL, "operator not resolved");
  for (int i = 0; i < nout; i++) memset(&out[i], 0, sizeof out[i]);
  ALMA_TRY(alma__op_check_strings(n, in, nin, NULL, 0));
  alma_status st = n->op->infer(n, in, nin, out, nout);
  if (st != ALMA_OK) {
    if (st == ALMA_ERR_DYNAMIC) return alma__op_error(n, ALMA_ERR_INTERNAL, "shape unknown with all inputs given");
    return st;
  }
  if ((st = alma__op_check_strings(n, NULL, 0, out, nout)) != ALMA_OK) return st;
  if (!(n->op->flags & ALMA_OP_ALLOCS_OUTPUTS)) {
    for (int i = 0; i < nout; i++) {
      if (n->outputs && i < n->n_outputs && n->outputs[i] < 0) continue; /* omitted optional output */
      if (alma__dtype_is_container(out[i].dtype)) continue;                /* exec builds it (Identity) */
      if ((st = alma__op_alloc_output(n, &out[i])) != ALMA_OK) {
        for (int k = 0; k < i; k++) alma_tensor_free_data(&out[k]);
        return alma__error_prefix(st, "node '%s' (%s): output %d: ", n->name, n->op_type, i);
      }
    }
  }
  st = n->op->exec(ctx, n, in, nin, out, nout);
  if (st != ALMA_OK)
    for (int k = 0; k < nout; k++) alma_tensor_free_data(&out[k]);
  return st;
}

/* ---- prepared per-node state (alma_prepared in graph/graph.h) ---------------------------------- */

static int prepared_fresh(const alma_prepared *p, const alma_node *n) {
  return p->op == n->op && p->since_version == n->since_version && p->attrs == n->attrs && p->n_attrs == n->n_attrs;
}

alma_status alma__node_prepared(const alma_node *n, alma_prepare_fn build, const alma_prepared **out) {
  /* The slot is a cache: filling it does not change what the node means, so it is written through
   * the const kernels receive (nodes live in the graph's heap array, never in const storage). */
  _Atomic(alma_prepared *) *slot = &((alma_node *)n)->prepared;
  alma_prepared *cur = atomic_load_explicit(slot, memory_order_acquire);
  if (cur && prepared_fresh(cur, n)) {
    *out = cur;
    return ALMA_OK;
  }
  alma_prepared *p = NULL;
  ALMA_TRY(build(n, &p));
  p->op = n->op;
  p->since_version = n->since_version;
  p->attrs = n->attrs;
  p->n_attrs = n->n_attrs;
  if (atomic_compare_exchange_strong_explicit(slot, &cur, p, memory_order_acq_rel, memory_order_acquire)) {
    /* cur, if any, is stale (a pass edited the node): its key differs from the node's for every
     * thread, so no one else uses it */
    if (cur) cur->release(cur);
    *out = p;
    return ALMA_OK;
  }
  /* another thread stored its state first (cur now points to it): use that one, drop ours */
  p->release(p);
  if (!prepared_fresh(cur, n))
    return alma__op_error(n, ALMA_ERR_INTERNAL, "prepared state replaced by a stale one (node edited while running)");
  *out = cur;
  return ALMA_OK;
}

int alma__graph_has_containers(const alma_graph *g) {
  for (int i = 0; i < g->n_inputs; i++)
    if (alma__dtype_is_container(g->values[g->inputs[i]].dtype)) return 1;
  for (int i = 0; i < g->n_outputs; i++)
    if (alma__dtype_is_container(g->values[g->outputs[i]].dtype)) return 1;
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op && (g->nodes[i].op->flags & ALMA_OP_CONTAINERS)) return 1;
  return 0;
}

alma_status alma__op_check_strings(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out,
                                   int nout) {
  if (!n->op || (n->op->flags & ALMA_OP_STRINGS)) return ALMA_OK;
  for (int k = 0; k < nin; k++)
    if (in && in[k] && in[k]->dtype == ALMA_DTYPE_STRING)
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input %d is a string tensor, which alma's %s does not take", k,
                            n->op_type);
  for (int k = 0; k < nout; k++)
    if (out && out[k].dtype == ALMA_DTYPE_STRING)
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "output %d would be a string tensor, which alma's %s does not make", k,
                            n->op_type);
  return ALMA_OK;
}
