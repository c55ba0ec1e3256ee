/* Scan: runs its body once per element of the scan inputs, carrying N state variables and stacking K
 * per-iteration outputs. Opset 8 has a batch axis 0 and the sequence on axis 1 with an optional
 * sequence_lens input (shorter sequences leave zero padding in the scan outputs) and `directions`;
 * opset 9 drops the batch and adds scan_input_axes/directions and scan_output_axes/directions.
 * The body runs through the executor (alma__exec_subgraph) like Loop's; output shapes are known
 * only after the first iteration, so Scan allocates its own outputs. */
#include "ops/datamove.h"

#define SCAN_MAX 256 /* states + scan inputs, and states + scan outputs */

typedef struct scan_cfg {
  const alma_graph *body;
  int v8, first; /* first: index of the first state input (1 at opset 8, after sequence_lens) */
  int N, M, K;
  int in_axis[SCAN_MAX], in_dir[SCAN_MAX], out_axis[SCAN_MAX], out_dir[SCAN_MAX];
} scan_cfg;

static alma_status read_flags(const alma_node *n, const char *name, int count, int is_dir, int *vals) {
  const int64_t *v = NULL;
  int c = alma__attr_ints(n, name, &v);
  for (int i = 0; i < count; i++) vals[i] = 0;
  if (!c) return ALMA_OK;
  if (c != count)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%s has %d entries, expected %d", name, c, count);
  for (int i = 0; i < c; i++) {
    if (is_dir && v[i] != 0 && v[i] != 1)
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "%s[%d] = %lld (expects 0 or 1)", name, i, (long long)v[i]);
    if (!is_dir && (v[i] < -ALMA_MAX_RANK || v[i] >= ALMA_MAX_RANK))
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "%s[%d] = %lld is out of range", name, i, (long long)v[i]);
    vals[i] = (int)v[i];
  }
  return ALMA_OK;
}

static alma_status scan_check(const alma_node *n, const alma_tensor *const *in, int nin, int nout, scan_cfg *c) {
  const alma_attr *ba = alma__node_attr(n, "body");
  c->body = ba && ba->type == ALMA_ATTR_GRAPH ? ba->g : NULL;
  if (!c->body) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "needs graph attribute body");
  const alma_attr *ma = alma__node_attr(n, "num_scan_inputs");
  if (!ma || ma->type != ALMA_ATTR_INT) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "needs int attribute num_scan_inputs");
  c->v8 = n->since_version < 9;
  c->first = c->v8;
  if (ma->i < 1 || ma->i > nin - c->first)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "num_scan_inputs %lld with %d state and scan inputs", (long long)ma->i,
                          nin - c->first);
  c->M = (int)ma->i;
  c->N = nin - c->first - c->M;
  c->K = nout - c->N;
  if (c->K < 0)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%d outputs for %d state variables", nout, c->N);
  if (c->N + c->M > SCAN_MAX || nout > SCAN_MAX)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "more than %d inputs or outputs", SCAN_MAX);
  if (c->body->n_inputs != c->N + c->M || c->body->n_outputs != nout)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "body takes %d inputs and has %d outputs; the node has %d state, %d scan "
                          "inputs and %d outputs", c->body->n_inputs, c->body->n_outputs, c->N, c->M, nout);
  for (int i = c->first; i < nin; i++)
    if (!in[i]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input %d is missing", i);
  if (c->v8) {
    ALMA_TRY(read_flags(n, "directions", c->M, 1, c->in_dir));
    for (int j = 0; j < c->M; j++) c->in_axis[j] = 1;
    for (int k = 0; k < c->K; k++) c->out_axis[k] = 1, c->out_dir[k] = 0;
  } else {
    ALMA_TRY(read_flags(n, "scan_input_directions", c->M, 1, c->in_dir));
    ALMA_TRY(read_flags(n, "scan_input_axes", c->M, 0, c->in_axis));
    ALMA_TRY(read_flags(n, "scan_output_directions", c->K, 1, c->out_dir));
    ALMA_TRY(read_flags(n, "scan_output_axes", c->K, 0, c->out_axis));
  }
  int64_t seq = -1, batch = -1;
  char b[96];
  for (int j = 0; j < c->M; j++) {
    const alma_tensor *x = in[c->first + c->N + j];
    ALMA_TRY(alma__dm_check_dtype(n, x->dtype, "scan input"));
    int ax = c->in_axis[j];
    if (ax < -x->rank || ax >= x->rank || (c->v8 && x->rank < 2))
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "scan input %d of shape %s has no axis %d", j,
                            alma__shape_str(x->rank, x->dims, b, sizeof b), ax);
    if (ax < 0) c->in_axis[j] = ax += x->rank;
    if (seq >= 0 && x->dims[ax] != seq)
      return alma__op_error(n, ALMA_ERR_SHAPE, "scan inputs have different sequence lengths (%lld and %lld)", (long long)seq,
                            (long long)x->dims[ax]);
    seq = x->dims[ax];
    if (c->v8) {
      if (batch >= 0 && x->dims[0] != batch)
        return alma__op_error(n, ALMA_ERR_SHAPE, "scan inputs have different batch sizes");
      batch = x->dims[0];
    }
  }
  for (int k = 0; k < c->N; k++) {
    const alma_tensor *s = in[c->first + k];
    ALMA_TRY(alma__dm_check_dtype(n, s->dtype, "state"));
    if (c->v8 && (s->rank < 1 || s->dims[0] != batch))
      return alma__op_error(n, ALMA_ERR_SHAPE, "state %d of shape %s lacks the batch axis of size %lld", k,
                            alma__shape_str(s->rank, s->dims, b, sizeof b), (long long)batch);
  }
  if (c->v8 && in[0]) {
    const alma_tensor *sl = in[0];
    if (!alma__dtype_is_int(sl->dtype))
      return alma__op_error(n, ALMA_ERR_TYPE, "sequence_lens dtype %s (expects int64)", alma_dtype_name(sl->dtype));
    if (sl->rank != 1 || sl->dims[0] != batch)
      return alma__op_error(n, ALMA_ERR_SHAPE, "sequence_lens shape %s (expects [%lld])",
                            alma__shape_str(sl->rank, sl->dims, b, sizeof b), (long long)batch);
  }
  return ALMA_OK;
}

static alma_status scan_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  scan_cfg c;
  ALMA_TRY(scan_check(n, in, nin, nout, &c));
  for (int k = 0; k < nout; k++) out[k].rank = -1;
  return ALMA_OK;
}

/* Shape of a scan output element when the body never ran: its declared shape, if fully known. */
static alma_status declared_elt(const alma_node *n, const scan_cfg *c, int k, alma_tensor *elt) {
  const alma_value *v = &c->body->values[c->body->outputs[c->N + k]];
  int known = v->rank >= 0 && alma_dtype_size(v->dtype) > 0;
  for (int d = 0; known && d < v->rank; d++) known = v->dims[d] >= 0;
  if (!known)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "scan output %d: no iteration ran and the body does not declare its shape", k);
  memset(elt, 0, sizeof *elt);
  alma__set_shape(elt, v->dtype, v->rank, v->dims);
  return ALMA_OK;
}

/* Runs the body once: states (N, views or owned) are replaced by the body's new owned states; the
 * K scan output elements are left in bout[N..] for the caller to take. */
static alma_status run_body(alma_exec_ctx *ctx, const alma_node *n, const scan_cfg *c, alma_tensor *states,
                            const alma_tensor *elts, alma_tensor *bin, alma_tensor *bout, int64_t it) {
  for (int k = 0; k < c->N; k++) bin[k] = alma__tensor_view(&states[k]);
  for (int j = 0; j < c->M; j++) bin[c->N + j] = alma__tensor_view(&elts[j]);
  alma_status st = alma__exec_subgraph(ctx, c->body, bin, c->N + c->M, bout, c->N + c->K);
  if (st != ALMA_OK) return alma__error_prefix(st, "node '%s' (Scan), iteration %lld: ", n->name, (long long)it);
  for (int k = 0; k < c->N; k++) {
    alma_tensor_free_data(&states[k]);
    states[k] = bout[k];
  }
  return ALMA_OK;
}

static alma_status same_elt(const alma_node *n, const char *what, int k, const alma_tensor *a, const alma_tensor *b) {
  if (a->dtype != b->dtype || !alma__same_shape(a, b)) {
    char s1[96], s2[96];
    return alma__op_error(n, ALMA_ERR_SHAPE, "%s %d changes from %s %s to %s %s between iterations", what, k,
                          alma_dtype_name(a->dtype), alma__shape_str(a->rank, a->dims, s1, sizeof s1),
                          alma_dtype_name(b->dtype), alma__shape_str(b->rank, b->dims, s2, sizeof s2));
  }
  return ALMA_OK;
}

/* ---- opset 9+ ----------------------------------------------------------------------------------- */
static alma_status scan9_exec(alma_exec_ctx *ctx, const alma_node *n, const scan_cfg *c, const alma_tensor *const *in,
                              alma_tensor *out, alma_tensor *states, alma_tensor *elts, alma_tensor *bin,
                              alma_tensor *bout, alma_tensor *stack) {
  const alma_tensor *x0 = in[c->N];
  int64_t T = x0->dims[c->in_axis[0]];
  alma_status st = ALMA_OK;
  for (int k = 0; k < c->N; k++) states[k] = alma__tensor_view(in[k]);
  /* Scan input elements: owned buffers refilled each iteration. */
  for (int j = 0; j < c->M && st == ALMA_OK && T > 0; j++) {
    const alma_tensor *x = in[c->N + j];
    int ax = c->in_axis[j], r = 0;
    int64_t dims[ALMA_MAX_RANK];
    for (int d = 0; d < x->rank; d++)
      if (d != ax) dims[r++] = x->dims[d];
    st = alma__tensor_alloc(&elts[j], x->dtype, r, dims);
  }
  for (int64_t t = 0; t < T && st == ALMA_OK; t++) {
    for (int j = 0; j < c->M; j++) {
      const alma_tensor *x = in[c->N + j];
      int ax = c->in_axis[j], r = 0;
      int64_t xs[ALMA_MAX_RANK], dims[ALMA_MAX_RANK], strides[ALMA_MAX_RANK];
      alma__strides(x->rank, x->dims, xs);
      for (int d = 0; d < x->rank; d++)
        if (d != ax) dims[r] = x->dims[d], strides[r++] = xs[d];
      int64_t pos = c->in_dir[j] ? T - 1 - t : t;
      size_t esz = alma_dtype_size(x->dtype);
      if (elts[j].nbytes)
        alma__dm_strided_copy(elts[j].data, (const char *)x->data + (size_t)(pos * xs[ax]) * esz, esz, r, dims, strides);
    }
    st = run_body(ctx, n, c, states, elts, bin, bout, t);
    if (st != ALMA_OK) break;
    /* Scan output elements go to stack[k], a [T, elt...] buffer in iteration order. */
    for (int k = 0; k < c->K; k++) {
      alma_tensor *e = &bout[c->N + k];
      if (st == ALMA_OK && t == 0) {
        if (e->rank + 1 > ALMA_MAX_RANK) st = alma__op_error(n, ALMA_ERR_UNSUPPORTED, "scan output %d rank too large", k);
        int64_t dims[ALMA_MAX_RANK];
        dims[0] = T;
        for (int d = 0; st == ALMA_OK && d < e->rank; d++) dims[d + 1] = e->dims[d];
        if (st == ALMA_OK) st = alma__tensor_alloc(&stack[k], e->dtype, e->rank + 1, dims);
      }
      if (st == ALMA_OK && t > 0) {
        alma_tensor first = stack[k];
        first.rank = stack[k].rank - 1;
        memmove(first.dims, stack[k].dims + 1, sizeof(int64_t) * (size_t)first.rank);
        st = same_elt(n, "scan output", k, &first, e);
      }
      if (st == ALMA_OK && e->nbytes) memcpy((char *)stack[k].data + (size_t)t * e->nbytes, e->data, e->nbytes);
      alma_tensor_free_data(e);
    }
  }
  if (st != ALMA_OK) return st;
  /* Final states: owned after an iteration; copies of the inputs when the sequence is empty. */
  for (int k = 0; k < c->N && st == ALMA_OK; k++) {
    if (states[k].owns_data) {
      out[k] = states[k];
      states[k].owns_data = 0;
    } else {
      st = alma__tensor_copy(&out[k], &states[k]);
    }
  }
  for (int k = 0; k < c->K && st == ALMA_OK; k++) {
    alma_tensor elt;
    if (T == 0) {
      st = declared_elt(n, c, k, &elt);
    } else {
      elt = stack[k];
      elt.rank = stack[k].rank - 1;
      memmove(elt.dims, stack[k].dims + 1, sizeof(int64_t) * (size_t)elt.rank);
    }
    if (st != ALMA_OK) break;
    int r = elt.rank + 1, ax = c->out_axis[k];
    if (ax < -r || ax >= r) {
      st = alma__op_error(n, ALMA_ERR_INVALID_ARG, "scan_output_axes[%d] = %d is out of range for rank %d", k, ax, r);
      break;
    }
    if (ax < 0) ax += r;
    /* out dims: the element's with T inserted at ax; read from the stack through strides. */
    int64_t dims[ALMA_MAX_RANK], es[ALMA_MAX_RANK], strides[ALMA_MAX_RANK];
    alma__strides(elt.rank, elt.dims, es);
    int64_t eltn = alma__numel(elt.rank, elt.dims);
    for (int d = 0, q = 0; d < r; d++) {
      if (d == ax) {
        dims[d] = T;
        strides[d] = c->out_dir[k] ? -eltn : eltn;
      } else {
        dims[d] = elt.dims[q];
        strides[d] = es[q++];
      }
    }
    st = alma__tensor_alloc(&out[c->N + k], elt.dtype, r, dims);
    if (st == ALMA_OK && out[c->N + k].nbytes) {
      size_t esz = alma_dtype_size(elt.dtype);
      const char *base = (const char *)stack[k].data + (c->out_dir[k] ? (size_t)((T - 1) * eltn) * esz : 0);
      alma__dm_strided_copy(out[c->N + k].data, base, esz, r, dims, strides);
    }
  }
  return st;
}

/* ---- opset 8: batch axis 0, sequence axis 1 ----------------------------------------------------- */
static alma_status scan8_exec(alma_exec_ctx *ctx, const alma_node *n, const scan_cfg *c, const alma_tensor *const *in,
                              alma_tensor *out, alma_tensor *states, alma_tensor *elts, alma_tensor *bin,
                              alma_tensor *bout) {
  const alma_tensor *x0 = in[1 + c->N];
  int64_t B = x0->dims[0], S = x0->dims[1];
  alma_status st = ALMA_OK;
  int outs_ready = 0;
  for (int64_t b = 0; b < B && st == ALMA_OK; b++) {
    int64_t len = in[0] ? alma__get_i64(in[0]->data, in[0]->dtype, b) : S;
    if (len < 0 || len > S)
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b,
                            (long long)len, (long long)S);
    /* States and scan elements are contiguous slices of the batched inputs: views. */
    for (int k = 0; k < c->N; k++) {
      const alma_tensor *s = in[1 + k];
      states[k] = alma__tensor_view(s);
      states[k].rank = s->rank - 1;
      memmove(states[k].dims, s->dims + 1, sizeof(int64_t) * (size_t)states[k].rank);
      states[k].nbytes = s->dims[0] ? s->nbytes / (size_t)s->dims[0] : 0;
      states[k].data = (char *)s->data + (size_t)b * states[k].nbytes;
    }
    for (int64_t t = 0; t < len && st == ALMA_OK; t++) {
      for (int j = 0; j < c->M; j++) {
        const alma_tensor *x = in[1 + c->N + j];
        int64_t pos = c->in_dir[j] ? len - 1 - t : t;
        elts[j] = alma__tensor_view(x);
        elts[j].rank = x->rank - 2;
        memmove(elts[j].dims, x->dims + 2, sizeof(int64_t) * (size_t)elts[j].rank);
        elts[j].nbytes = B * S > 0 ? x->nbytes / (size_t)(B * S) : 0;
        elts[j].data = (char *)x->data + (size_t)(b * S + pos) * elts[j].nbytes;
      }
      st = run_body(ctx, n, c, states, elts, bin, bout, t);
      if (st != ALMA_OK) break;
      for (int k = 0; k < c->K; k++) {
        alma_tensor *e = &bout[c->N + k], *o = &out[c->N + k];
        if (st == ALMA_OK && !o->data && !o->rank) {
          if (e->rank + 2 > ALMA_MAX_RANK) st = alma__op_error(n, ALMA_ERR_UNSUPPORTED, "scan output %d rank too large", k);
          int64_t dims[ALMA_MAX_RANK] = {B, S};
          for (int d = 0; st == ALMA_OK && d < e->rank; d++) dims[d + 2] = e->dims[d];
          if (st == ALMA_OK) st = alma__tensor_alloc(o, e->dtype, e->rank + 2, dims);
        } else if (st == ALMA_OK) {
          alma_tensor first = *o;
          first.rank = o->rank - 2;
          memmove(first.dims, o->dims + 2, sizeof(int64_t) * (size_t)first.rank);
          st = same_elt(n, "scan output", k, &first, e);
        }
        if (st == ALMA_OK && e->nbytes) memcpy((char *)o->data + (size_t)(b * S + t) * e->nbytes, e->data, e->nbytes);
        alma_tensor_free_data(e);
      }
    }
    /* This batch entry's final states into the [B, ...] outputs. */
    for (int k = 0; k < c->N && st == ALMA_OK; k++) {
      alma_tensor *o = &out[k];
      if (!outs_ready) {
        int64_t dims[ALMA_MAX_RANK] = {B};
        if (states[k].rank + 1 > ALMA_MAX_RANK) {
          st = alma__op_error(n, ALMA_ERR_UNSUPPORTED, "state %d rank too large", k);
          break;
        }
        for (int d = 0; d < states[k].rank; d++) dims[d + 1] = states[k].dims[d];
        st = alma__tensor_alloc(o, states[k].dtype, states[k].rank + 1, dims);
      } else {
        alma_tensor first = *o;
        first.rank = o->rank - 1;
        memmove(first.dims, o->dims + 1, sizeof(int64_t) * (size_t)first.rank);
        st = same_elt(n, "final state", k, &first, &states[k]);
      }
      if (st == ALMA_OK && states[k].nbytes)
        memcpy((char *)o->data + (size_t)b * states[k].nbytes, states[k].data, states[k].nbytes);
    }
    outs_ready = 1;
    for (int k = 0; k < c->N; k++) alma_tensor_free_data(&states[k]);
  }
  if (st != ALMA_OK) return st;
  if (B == 0)
    for (int k = 0; k < c->N && st == ALMA_OK; k++) st = alma__tensor_copy(&out[k], in[1 + k]);
  /* Scan outputs no iteration produced (every sequence empty): zeros of the declared shape. */
  for (int k = 0; k < c->K && st == ALMA_OK; k++) {
    if (out[c->N + k].data || out[c->N + k].rank) continue;
    alma_tensor elt;
    st = declared_elt(n, c, k, &elt);
    int64_t dims[ALMA_MAX_RANK] = {B, S};
    if (st == ALMA_OK && elt.rank + 2 > ALMA_MAX_RANK) st = alma__op_error(n, ALMA_ERR_UNSUPPORTED, "scan output %d rank too large", k);
    for (int d = 0; st == ALMA_OK && d < elt.rank; d++) dims[d + 2] = elt.dims[d];
    if (st == ALMA_OK) st = alma__tensor_alloc(&out[c->N + k], elt.dtype, elt.rank + 2, dims);
  }
  return st;
}

static alma_status scan_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  scan_cfg c;
  ALMA_TRY(scan_check(n, in, nin, nout, &c));
  for (int k = 0; k < nout; k++) memset(&out[k], 0, sizeof out[k]);
  alma_tensor *states = calloc((size_t)c.N + 1, sizeof(alma_tensor));
  alma_tensor *elts = calloc((size_t)c.M + 1, sizeof(alma_tensor));
  alma_tensor *bin = calloc((size_t)(c.N + c.M) + 1, sizeof(alma_tensor));
  alma_tensor *bout = calloc((size_t)nout + 1, sizeof(alma_tensor));
  alma_tensor *stack = calloc((size_t)c.K + 1, sizeof(alma_tensor));
  alma_status st;
  if (!states || !elts || !bin || !bout || !stack) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  else if (c.v8) st = scan8_exec(ctx, n, &c, in, out, states, elts, bin, bout);
  else st = scan9_exec(ctx, n, &c, in, out, states, elts, bin, bout, stack);
  if (states)
    for (int k = 0; k < c.N; k++) alma_tensor_free_data(&states[k]);
  if (!c.v8 && elts)
    for (int j = 0; j < c.M; j++) alma_tensor_free_data(&elts[j]);
  if (stack)
    for (int k = 0; k < c.K; k++) alma_tensor_free_data(&stack[k]);
  free(states), free(elts), free(bin), free(bout), free(stack);
  for (int k = 0; k < nout; k++)
    if (st != ALMA_OK || n->outputs[k] < 0) alma_tensor_free_data(&out[k]);
  return st;
}

const alma_op_def alma__op_Scan = {.name = "Scan", .domain = "", .versions = {8, 9, 11, 16, 19, 21},
                                   .min_inputs = 1, .max_inputs = -1, .min_outputs = 1, .max_outputs = -1,
                                   .flags = ALMA_OP_ALLOCS_OUTPUTS | ALMA_OP_HAS_SUBGRAPH | ALMA_OP_EMPTY_INPUTS_OK,
                                   .infer = scan_infer, .exec = scan_exec};
