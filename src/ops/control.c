/* Control flow: If and Loop. Their bodies run through the executor (alma__exec_subgraph), which
 * resolves outer-scope names; output shapes are known only after running, so they allocate their
 * own outputs. */
#include "ops/op.h"

static const alma_graph *graph_attr(const alma_node *n, const char *name) {
  const alma_attr *a = alma__node_attr(n, name);
  return a && a->type == ALMA_ATTR_GRAPH ? a->g : NULL;
}

static int truthy(const alma_tensor *t) {
  return t && t->data && alma_tensor_numel(t) >= 1 && alma__get_f64(t->data, t->dtype, 0) != 0.0;
}

static void set_unknown(alma_tensor *out, int nout) {
  for (int i = 0; i < nout; i++) out[i].rank = -1;
}

/* ---- If ---------------------------------------------------------------------------------------- */
static alma_status if_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  const alma_graph *t = graph_attr(n, "then_branch"), *e = graph_attr(n, "else_branch");
  if (!t || !e) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "needs graph attributes then_branch and else_branch");
  if (t->n_outputs != nout || e->n_outputs != nout)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "branches have %d and %d outputs, the node %d", t->n_outputs,
                          e->n_outputs, nout);
  if (t->n_inputs || e->n_inputs) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "branches must take no inputs");
  if (in[0]->dtype != ALMA_DTYPE_BOOL)
    return alma__op_error(n, ALMA_ERR_TYPE, "cond must be bool, got %s", alma_dtype_name(in[0]->dtype));
  if (alma__numel(in[0]->rank, in[0]->dims) != 1)
    return alma__op_error(n, ALMA_ERR_SHAPE, "cond must hold exactly one element");
  set_unknown(out, nout);
  return ALMA_OK;
}

static alma_status if_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                           alma_tensor *out, int nout) {
  const alma_graph *g = graph_attr(n, truthy(in[0]) ? "then_branch" : "else_branch");
  alma_tensor res[64];
  if (nout > 64) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "more than 64 outputs");
  alma_status st = alma__exec_subgraph(ctx, g, NULL, 0, res, nout);
  if (st != ALMA_OK) return alma__error_prefix(st, "node '%s' (If), branch '%s': ", n->name, g->name);
  for (int i = 0; i < nout; i++) {
    if (n->outputs[i] >= 0) out[i] = res[i];
    else alma_tensor_free_data(&res[i]);
  }
  return ALMA_OK;
}

const alma_op_def alma__op_If = {.name = "If", .domain = "", .versions = {1, 11, 13, 16, 19, 21},
                                  .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = -1,
                                  .flags = ALMA_OP_ALLOCS_OUTPUTS | ALMA_OP_HAS_SUBGRAPH | ALMA_OP_STRINGS,
                                  .infer = if_infer, .exec = if_exec};

/* ---- Loop -------------------------------------------------------------------------------------- */
static alma_status loop_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  const alma_graph *body = graph_attr(n, "body");
  if (!body) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "needs graph attribute body");
  int n_carried = nin - 2;
  if (n_carried < 0) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "needs inputs M and cond (may be empty names)");
  if (body->n_inputs != n_carried + 2)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "body takes %d inputs, expected %d (iteration, cond, %d carried)",
                          body->n_inputs, n_carried + 2, n_carried);
  if (body->n_outputs < n_carried + 1 || nout != body->n_outputs - 1)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "body has %d outputs; the node has %d carried values and %d outputs",
                          body->n_outputs, n_carried, nout);
  if (in[0] && alma__numel(in[0]->rank, in[0]->dims) != 1)
    return alma__op_error(n, ALMA_ERR_SHAPE, "M must hold exactly one element");
  if (in[1] && alma__numel(in[1]->rank, in[1]->dims) != 1)
    return alma__op_error(n, ALMA_ERR_SHAPE, "cond must hold exactly one element");
  for (int k = 0; k < n_carried; k++)
    if (!in[2 + k]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "loop-carried input %d is missing", k);
  set_unknown(out, nout);
  return ALMA_OK;
}

typedef struct scan_acc {
  alma_tensor *items;
  int n, cap;
} scan_acc;

static alma_status loop_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  const alma_graph *body = graph_attr(n, "body");
  int n_carried = nin - 2, n_scan = nout - n_carried;
  int64_t trip = in[0] ? alma__get_i64(in[0]->data, in[0]->dtype, 0) : INT64_MAX;
  int cond = in[1] ? truthy(in[1]) : 1;
  alma_status st = ALMA_OK;
  alma_tensor *bin = calloc((size_t)body->n_inputs + 1, sizeof(alma_tensor));
  alma_tensor *bout = calloc((size_t)body->n_outputs + 1, sizeof(alma_tensor));
  alma_tensor *carried = calloc((size_t)n_carried + 1, sizeof(alma_tensor));
  scan_acc *scans = calloc((size_t)n_scan + 1, sizeof(scan_acc));
  int64_t iter_val = 0;
  uint8_t cond_val = 1;
  if (!bin || !bout || !carried || !scans) {
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    goto out;
  }
  for (int k = 0; k < n_carried && st == ALMA_OK; k++) st = alma__tensor_copy(&carried[k], in[2 + k]);
  int64_t it = 0;
  for (; st == ALMA_OK && it < trip && cond; it++) {
    iter_val = it;
    cond_val = 1;
    bin[0] = (alma_tensor){.dtype = ALMA_DTYPE_INT64, .rank = 0, .data = &iter_val, .nbytes = 8};
    bin[1] = (alma_tensor){.dtype = ALMA_DTYPE_BOOL, .rank = 0, .data = &cond_val, .nbytes = 1};
    for (int k = 0; k < n_carried; k++) bin[2 + k] = alma__tensor_view(&carried[k]);
    st = alma__exec_subgraph(ctx, body, bin, body->n_inputs, bout, body->n_outputs);
    if (st != ALMA_OK) {
      alma__error_prefix(st, "node '%s' (Loop), iteration %lld: ", n->name, (long long)it);
      break;
    }
    cond = truthy(&bout[0]);
    alma_tensor_free_data(&bout[0]);
    for (int k = 0; k < n_carried; k++) {
      alma_tensor_free_data(&carried[k]);
      carried[k] = bout[1 + k];
    }
    for (int k = 0; k < n_scan; k++) {
      scan_acc *s = &scans[k];
      alma_tensor *item = &bout[1 + n_carried + k];
      if (s->n && !alma__same_shape(item, &s->items[0])) {
        st = alma__op_error(n, ALMA_ERR_SHAPE, "scan output %d changes shape between iterations", k);
        for (int q = k; q < n_scan; q++) alma_tensor_free_data(&bout[1 + n_carried + q]);
        break;
      }
      if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 16;
        alma_tensor *ni = realloc(s->items, sizeof(alma_tensor) * (size_t)cap);
        if (!ni) {
          st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
          for (int q = k; q < n_scan; q++) alma_tensor_free_data(&bout[1 + n_carried + q]);
          break;
        }
        s->items = ni;
        s->cap = cap;
      }
      s->items[s->n++] = *item;
    }
  }
  for (int k = 0; k < n_carried && st == ALMA_OK; k++) {
    out[k] = carried[k];
    carried[k].owns_data = 0;
  }
  for (int k = 0; k < n_scan && st == ALMA_OK; k++) {
    scan_acc *s = &scans[k];
    if (s->n == 0) {
      int64_t zero = 0;
      st = alma__tensor_alloc(&out[n_carried + k], ALMA_DTYPE_FLOAT32, 1, &zero);
      const alma_value *bv = &body->values[body->outputs[1 + n_carried + k]];
      if (st == ALMA_OK && bv->dtype) out[n_carried + k].dtype = bv->dtype;
      continue;
    }
    const alma_tensor *f = &s->items[0];
    if (f->rank + 1 > ALMA_MAX_RANK) {
      st = alma__op_error(n, ALMA_ERR_UNSUPPORTED, "scan output rank too large");
      break;
    }
    int64_t dims[ALMA_MAX_RANK];
    dims[0] = s->n;
    for (int d = 0; d < f->rank; d++) dims[d + 1] = f->dims[d];
    st = alma__tensor_alloc(&out[n_carried + k], f->dtype, f->rank + 1, dims);
    for (int i = 0; st == ALMA_OK && i < s->n; i++)
      if (f->nbytes) memcpy((char *)out[n_carried + k].data + (size_t)i * f->nbytes, s->items[i].data, f->nbytes);
  }
  if (st != ALMA_OK)
    for (int k = 0; k < nout; k++) alma_tensor_free_data(&out[k]);
  /* Omitted optional outputs are not returned. */
  for (int k = 0; st == ALMA_OK && k < nout; k++)
    if (n->outputs[k] < 0) alma_tensor_free_data(&out[k]);
out:
  if (carried)
    for (int k = 0; k < n_carried; k++) alma_tensor_free_data(&carried[k]);
  if (scans)
    for (int k = 0; k < n_scan; k++) {
      for (int i = 0; i < scans[k].n; i++) alma_tensor_free_data(&scans[k].items[i]);
      free(scans[k].items);
    }
  free(bin);
  free(bout);
  free(carried);
  free(scans);
  return st;
}

const alma_op_def alma__op_Loop = {.name = "Loop", .domain = "", .versions = {1, 11, 13, 16, 19, 21},
                                    .min_inputs = 2, .max_inputs = -1, .min_outputs = 0, .max_outputs = -1,
                                    .flags = ALMA_OP_ALLOCS_OUTPUTS | ALMA_OP_HAS_SUBGRAPH | ALMA_OP_EMPTY_INPUTS_OK | ALMA_OP_STRINGS,
                                    .infer = loop_infer, .exec = loop_exec};
