/* Sequences and optionals: SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceAt,
 * SequenceErase, SequenceLength, SplitToSequence, ConcatFromSequence, SequenceMap, Optional,
 * OptionalHasElement, OptionalGetElement. Their values are core.h's containers (an alma_tensor of
 * dtype ALMA__DTYPE_SEQUENCE/OPTIONAL whose data owns the items). Every op here allocates its own
 * outputs (ALMA_OP_ALLOCS_OUTPUTS): a container is not a buffer the executor can size, and the
 * flag also keeps these nodes on EAGER under every runtime. infer gives the output types (and a
 * tensor output's shape when the container's contents are known, else ALMA_ERR_DYNAMIC). */
#include "ops/op_args.h"

static int is_seq(const alma_tensor *t) { return t && t->dtype == ALMA__DTYPE_SEQUENCE; }
static int is_opt(const alma_tensor *t) { return t && t->dtype == ALMA__DTYPE_OPTIONAL; }
static int is_tensor(const alma_tensor *t) { return t && !alma__dtype_is_container(t->dtype); }

static void set_seq_type(alma_tensor *out, alma_dtype elem) {
  memset(out, 0, sizeof *out);
  alma__set_container_type(out, ALMA__DTYPE_SEQUENCE, elem, 0);
}

static alma_status need_seq(const alma_node *n, const alma_tensor *t, const char *what) {
  char b[64];
  if (!is_seq(t))
    return alma__op_error(n, ALMA_ERR_TYPE, "%s must be a sequence of tensors, got %s", what,
                          !t ? "nothing" : alma__dtype_is_container(t->dtype) ? alma__container_type_str(t, b, sizeof b)
                                                                              : "a tensor");
  return ALMA_OK;
}

/* A tensor joining a sequence of element type `elem` (UNDEFINED: any). */
static alma_status check_elem(const alma_node *n, alma_dtype elem, const alma_tensor *t, const char *what) {
  if (!is_tensor(t)) return alma__op_error(n, ALMA_ERR_TYPE, "%s must be a tensor", what);
  if (elem != ALMA_DTYPE_UNDEFINED && t->dtype != elem)
    return alma__op_error(n, ALMA_ERR_TYPE, "%s is %s but the sequence holds %s", what, alma_dtype_name(t->dtype),
                          alma_dtype_name(elem));
  if (alma_dtype_size(t->dtype) == 0)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "%s has dtype %s", what, alma_dtype_name(t->dtype));
  return ALMA_OK;
}

/* A position input: an int32/int64 scalar (one element). *known = 0 when its value is not given. */
static alma_status read_pos(const alma_node *n, const alma_tensor *t, int64_t *pos, int *known) {
  if (t->dtype != ALMA_DTYPE_INT32 && t->dtype != ALMA_DTYPE_INT64)
    return alma__op_error(n, ALMA_ERR_TYPE, "position must be int32 or int64, got %s", alma_dtype_name(t->dtype));
  if (t->rank > 1 || alma__numel(t->rank, t->dims) != 1)
    return alma__op_error(n, ALMA_ERR_SHAPE, "position must be a scalar");
  *known = t->data != NULL;
  *pos = t->data ? alma__get_i64(t->data, t->dtype, 0) : 0;
  return ALMA_OK;
}

/* Normalizes pos into [0, len) (or [0, len] when `end_ok`, for insertion). */
static alma_status norm_pos(const alma_node *n, int64_t pos, int64_t len, int end_ok, int64_t *out) {
  int64_t hi = end_ok ? len : len - 1;
  if (pos < -len || pos > hi)
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "position %lld is out of range for a sequence of %lld tensors (valid: %lld to %lld)",
                          (long long)pos, (long long)len, (long long)-len, (long long)hi);
  *out = pos < 0 ? pos + len : pos;
  return ALMA_OK;
}

/* A fresh sequence holding deep copies of src's items (the inputs stay the caller's). */
static alma_status copy_seq(alma_tensor *dst, const alma_tensor *src) { return alma__tensor_copy(dst, src); }

/* ---- SequenceEmpty ---------------------------------------------------------------------------- */
static alma_status seq_empty_infer(INFER_ARGS) {
  alma_dtype dt = (alma_dtype)alma__attr_i(n, "dtype", ALMA_DTYPE_FLOAT32);
  if (alma_dtype_size(dt) == 0)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "dtype %s", alma__onnx_type_name(dt));
  set_seq_type(&out[0], dt);
  return ALMA_OK;
}
static alma_status seq_empty_exec(EXEC_ARGS) {
  return alma__container_alloc(&out[0], ALMA__DTYPE_SEQUENCE, (alma_dtype)alma__attr_i(n, "dtype", ALMA_DTYPE_FLOAT32), 0);
}
const alma_op_def alma__op_SequenceEmpty = {.name = "SequenceEmpty", .domain = "", .versions = {11}, .min_inputs = 0,
                                            .max_inputs = 0, .min_outputs = 1, .max_outputs = 1,
                                            .flags = ALMA_OP_ALLOCS_OUTPUTS | ALMA_OP_CONTAINERS | ALMA_OP_STRINGS, .infer = seq_empty_infer,
                                            .exec = seq_empty_exec};

/* ---- SequenceConstruct ------------------------------------------------------------------------ */
static alma_status seq_construct_infer(INFER_ARGS) {
  for (int i = 0; i < nin; i++) {
    char what[32];
    snprintf(what, sizeof what, "input %d", i);
    ALMA_TRY(check_elem(n, in[0] ? in[0]->dtype : ALMA_DTYPE_UNDEFINED, in[i], what));
  }
  set_seq_type(&out[0], in[0]->dtype);
  return ALMA_OK;
}
static alma_status seq_construct_exec(EXEC_ARGS) {
  ALMA_TRY(alma__container_alloc(&out[0], ALMA__DTYPE_SEQUENCE, in[0]->dtype, 0));
  for (int i = 0; i < nin; i++) {
    alma_tensor item = alma__tensor_view(in[i]); /* a view: insert copies it */
    alma_status st = alma__container_insert(&out[0], -1, &item);
    if (st != ALMA_OK) return st; /* the caller frees out[0] */
  }
  return ALMA_OK;
}
const alma_op_def alma__op_SequenceConstruct = {.name = "SequenceConstruct", .domain = "", .versions = {11},
                                                .min_inputs = 1, .max_inputs = -1, .min_outputs = 1, .max_outputs = 1,
                                                .flags = ALMA_OP_ALLOCS_OUTPUTS | ALMA_OP_CONTAINERS | ALMA_OP_STRINGS, .infer = seq_construct_infer,
                                                .exec = seq_construct_exec};

/* ---- SequenceInsert: position in [-n, n], default the end ------------------------------------- */
static alma_status seq_insert_infer(INFER_ARGS) {
  ALMA_TRY(need_seq(n, in[0], "input_sequence"));
  alma_dtype elem = alma__container_elem(in[0]);
  ALMA_TRY(check_elem(n, elem, in[1], "tensor"));
  if (nin > 2 && in[2]) {
    int64_t pos;
    int known;
    ALMA_TRY(read_pos(n, in[2], &pos, &known));
    if (known && in[0]->data) ALMA_TRY(norm_pos(n, pos, alma__container(in[0])->n, 1, &pos));
  }
  set_seq_type(&out[0], in[1]->dtype);
  return ALMA_OK;
}
static alma_status seq_insert_exec(EXEC_ARGS) {
  int64_t pos = -1;
  int known;
  if (nin > 2 && in[2]) {
    ALMA_TRY(read_pos(n, in[2], &pos, &known));
    ALMA_TRY(norm_pos(n, pos, alma__container(in[0])->n, 1, &pos));
  }
  ALMA_TRY(copy_seq(&out[0], in[0]));
  alma__set_container_type(&out[0], ALMA__DTYPE_SEQUENCE, in[1]->dtype, 0);
  alma_tensor item = alma__tensor_view(in[1]);
  return alma__container_insert(&out[0], pos, &item);
}
const alma_op_def alma__op_SequenceInsert = {.name = "SequenceInsert", .domain = "", .versions = {11}, .min_inputs = 2,
                                             .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
                                             .flags = ALMA_OP_ALLOCS_OUTPUTS | ALMA_OP_CONTAINERS | ALMA_OP_STRINGS, .infer = seq_insert_infer,
                                             .exec = seq_insert_exec};

/* ---- SequenceAt: position in [-n, n-1] -------------------------------------------------------- */
static alma_status seq_at_infer(INFER_ARGS) {
  ALMA_TRY(need_seq(n, in[0], "input_sequence"));
  int64_t pos;
  int known;
  ALMA_TRY(read_pos(n, in[1], &pos, &known));
  if (!known || !in[0]->data) return alma__need_value();
  const alma__seq *s = alma__container(in[0]);
  ALMA_TRY(norm_pos(n, pos, s->n, 0, &pos));
  alma__set_shape(&out[0], s->items[pos].dtype, s->items[pos].rank, s->items[pos].dims);
  return ALMA_OK;
}
static alma_status seq_at_exec(EXEC_ARGS) {
  int64_t pos;
  int known;
  ALMA_TRY(read_pos(n, in[1], &pos, &known));
  const alma__seq *s = alma__container(in[0]);
  ALMA_TRY(norm_pos(n, pos, s->n, 0, &pos));
  return alma__tensor_copy(&out[0], &s->items[pos]);
}
const alma_op_def alma__op_SequenceAt = {.name = "SequenceAt", .domain = "", .versions = {11}, .min_inputs = 2,
                                         .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                         .flags = ALMA_OP_ALLOCS_OUTPUTS | ALMA_OP_CONTAINERS | ALMA_OP_STRINGS, .infer = seq_at_infer, .exec = seq_at_exec};

/* ---- SequenceErase: position in [-n, n-1], default the last ----------------------------------- */
static alma_status seq_erase_infer(INFER_ARGS) {
  ALMA_TRY(need_seq(n, in[0], "input_sequence"));
  if (nin > 1 && in[1]) {
    int64_t pos;
    int known;
    ALMA_TRY(read_pos(n, in[1], &pos, &known));
    if (known && in[0]->data) ALMA_TRY(norm_pos(n, pos, alma__container(in[0])->n, 0, &pos));
  }
  set_seq_type(&out[0], alma__container_elem(in[0]));
  return ALMA_OK;
}
static alma_status seq_erase_exec(EXEC_ARGS) {
  const alma__seq *s = alma__container(in[0]);
  int64_t pos = s->n - 1;
  int known;
  if (nin > 1 && in[1]) ALMA_TRY(read_pos(n, in[1], &pos, &known));
  if (s->n == 0) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "cannot erase from an empty sequence");
  ALMA_TRY(norm_pos(n, pos, s->n, 0, &pos));
  ALMA_TRY(copy_seq(&out[0], in[0]));
  alma__seq *o = alma__container(&out[0]);
  alma_tensor_free_data(&o->items[pos]);
  memmove(&o->items[pos], &o->items[pos + 1], sizeof *o->items * (size_t)(o->n - pos - 1));
  o->n--;
  return ALMA_OK;
}
const alma_op_def alma__op_SequenceErase = {.name = "SequenceErase", .domain = "", .versions = {11}, .min_inputs = 1,
                                            .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                            .flags = ALMA_OP_ALLOCS_OUTPUTS | ALMA_OP_CONTAINERS | ALMA_OP_STRINGS, .infer = seq_erase_infer,
                                            .exec = seq_erase_exec};

/* ---- SequenceLength --------------------------------------------------------------------------- */
static alma_status seq_length_infer(INFER_ARGS) {
  ALMA_TRY(need_seq(n, in[0], "input_sequence"));
  alma__set_shape(&out[0], ALMA_DTYPE_INT64, 0, NULL);
  return ALMA_OK;
}
static alma_status seq_length_exec(EXEC_ARGS) {
  ALMA_TRY(alma__tensor_alloc(&out[0], ALMA_DTYPE_INT64, 0, NULL));
  *(int64_t *)out[0].data = alma__container(in[0])->n;
  return ALMA_OK;
}
const alma_op_def alma__op_SequenceLength = {.name = "SequenceLength", .domain = "", .versions = {11}, .min_inputs = 1,
                                             .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                             .flags = ALMA_OP_ALLOCS_OUTPUTS | ALMA_OP_CONTAINERS | ALMA_OP_STRINGS, .infer = seq_length_infer,
                                             .exec = seq_length_exec};

/* ---- SplitToSequence ---------------------------------------------------------------------------
 * split omitted: chunks of 1 along axis, squeezed unless keepdims; a scalar: chunks of that size
 * (the last may be smaller); a 1-D tensor: those sizes, summing to the axis length (keepdims is
 * ignored when split is given). */
typedef struct split_plan {
  int axis;
  int64_t n_parts;
  int squeeze;
} split_plan;

static alma_status split_plan_of(const alma_node *n, const alma_tensor *x, const alma_tensor *sp, split_plan *p) {
  if (x->rank < 1) return alma__op_error(n, ALMA_ERR_SHAPE, "input must have rank >= 1, got a scalar");
  if (alma__norm_axis(alma__attr_i(n, "axis", 0), x->rank, &p->axis) != ALMA_OK)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis %lld is out of range for rank %d",
                          (long long)alma__attr_i(n, "axis", 0), x->rank);
  int64_t len = x->dims[p->axis];
  p->squeeze = 0;
  if (!sp) {
    p->n_parts = len;
    p->squeeze = alma__attr_i(n, "keepdims", 1) == 0;
    return ALMA_OK;
  }
  if (sp->dtype != ALMA_DTYPE_INT32 && sp->dtype != ALMA_DTYPE_INT64)
    return alma__op_error(n, ALMA_ERR_TYPE, "split must be int32 or int64, got %s", alma_dtype_name(sp->dtype));
  if (sp->rank > 1) return alma__op_error(n, ALMA_ERR_SHAPE, "split must be a scalar or 1-D, got rank %d", sp->rank);
  if (!sp->data) return alma__need_value();
  if (sp->rank == 0) {
    int64_t c = alma__get_i64(sp->data, sp->dtype, 0);
    if (c <= 0) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "split must be positive, got %lld", (long long)c);
    p->n_parts = (len + c - 1) / c;
    return ALMA_OK;
  }
  int64_t sum = 0;
  for (int64_t i = 0; i < sp->dims[0]; i++) {
    int64_t c = alma__get_i64(sp->data, sp->dtype, i);
    if (c < 0) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "split[%lld] is negative (%lld)", (long long)i, (long long)c);
    sum += c;
  }
  if (sum != len)
    return alma__op_error(n, ALMA_ERR_SHAPE, "split sums to %lld but axis %d has length %lld", (long long)sum, p->axis,
                          (long long)len);
  p->n_parts = sp->dims[0];
  return ALMA_OK;
}

static alma_status split_seq_infer(INFER_ARGS) {
  if (!is_tensor(in[0])) return alma__op_error(n, ALMA_ERR_TYPE, "input must be a tensor");
  if (alma_dtype_size(in[0]->dtype) == 0)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(in[0]->dtype));
  split_plan p;
  alma_status st = split_plan_of(n, in[0], nin > 1 ? in[1] : NULL, &p);
  if (st != ALMA_OK && st != ALMA_ERR_DYNAMIC) return st;
  set_seq_type(&out[0], in[0]->dtype);
  return ALMA_OK;
}

static alma_status split_seq_exec(EXEC_ARGS) {
  const alma_tensor *x = in[0], *sp = nin > 1 ? in[1] : NULL;
  split_plan p;
  ALMA_TRY(split_plan_of(n, x, sp, &p));
  ALMA_TRY(alma__container_alloc(&out[0], ALMA__DTYPE_SEQUENCE, x->dtype, 0));
  size_t esz = alma_dtype_size(x->dtype);
  int64_t outer = alma__numel(p.axis, x->dims), inner = alma__numel(x->rank - p.axis - 1, x->dims + p.axis + 1);
  int64_t len = x->dims[p.axis], start = 0;
  for (int64_t k = 0; k < p.n_parts; k++) {
    int64_t c = !sp ? 1 : sp->rank == 0 ? alma__get_i64(sp->data, sp->dtype, 0) : alma__get_i64(sp->data, sp->dtype, k);
    if (start + c > len) c = len - start;
    int64_t dims[ALMA_MAX_RANK];
    int rank = 0;
    for (int d = 0; d < x->rank; d++) {
      if (d == p.axis && p.squeeze) continue;
      dims[rank++] = d == p.axis ? c : x->dims[d];
    }
    alma_tensor item;
    ALMA_TRY(alma__tensor_alloc(&item, x->dtype, rank, dims));
    size_t row = (size_t)(c * inner) * esz;
    for (int64_t o = 0; o < outer && row; o++)
      memcpy((char *)item.data + (size_t)o * row, (const char *)x->data + ((size_t)(o * len + start) * (size_t)inner) * esz, row);
    alma_status st = alma__container_insert(&out[0], -1, &item);
    if (st != ALMA_OK) {
      alma_tensor_free_data(&item);
      return st;
    }
    start += c;
  }
  return ALMA_OK;
}
const alma_op_def alma__op_SplitToSequence = {.name = "SplitToSequence", .domain = "", .versions = {11, 24},
                                              .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                              .flags = ALMA_OP_ALLOCS_OUTPUTS | ALMA_OP_CONTAINERS | ALMA_OP_STRINGS, .infer = split_seq_infer,
                                              .exec = split_seq_exec};

/* ---- ConcatFromSequence: Concat of the items along axis, or (new_axis = 1) Stack -------------- */
static alma_status concat_seq_shape(const alma_node *n, const alma__seq *s, int *axis_out, alma_tensor *shape) {
  int new_axis = alma__attr_i(n, "new_axis", 0) != 0;
  const alma_attr *ax = alma__node_attr(n, "axis");
  if (!ax) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute axis is required");
  if (s->n == 0) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "the input sequence is empty (nothing to concatenate)");
  const alma_tensor *f = &s->items[0];
  int out_rank = f->rank + new_axis;
  if (out_rank < 1) return alma__op_error(n, ALMA_ERR_SHAPE, "cannot concatenate scalars without new_axis");
  if (out_rank > ALMA_MAX_RANK) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "output rank %d too large", out_rank);
  int axis;
  if (alma__norm_axis(ax->i, out_rank, &axis) != ALMA_OK)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis %lld is out of range (%s rank %d)", (long long)ax->i,
                          new_axis ? "new_axis: output" : "input", out_rank);
  int64_t total = 0;
  for (int i = 0; i < s->n; i++) {
    const alma_tensor *t = &s->items[i];
    char b1[128], b2[128];
    if (t->dtype != f->dtype)
      return alma__op_error(n, ALMA_ERR_TYPE, "item %d is %s, item 0 %s", i, alma_dtype_name(t->dtype), alma_dtype_name(f->dtype));
    int bad = t->rank != f->rank;
    for (int d = 0; !bad && d < f->rank; d++) bad = (new_axis || d != axis) && t->dims[d] != f->dims[d];
    if (bad)
      return alma__op_error(n, ALMA_ERR_SHAPE, "item %d has shape %s, item 0 %s (they may differ only along axis %d)", i,
                            alma__shape_str(t->rank, t->dims, b1, sizeof b1), alma__shape_str(f->rank, f->dims, b2, sizeof b2),
                            axis);
    total += new_axis ? 1 : t->dims[axis];
  }
  int64_t dims[ALMA_MAX_RANK];
  /* the item dims with axis replaced (concat) or inserted (stack) */
  for (int d = 0, k = 0; d < out_rank; d++) {
    if (d == axis) {
      dims[d] = total;
      if (!new_axis) k++;
    } else {
      dims[d] = f->dims[k++];
    }
  }
  alma__set_shape(shape, f->dtype, out_rank, dims);
  *axis_out = axis;
  return ALMA_OK;
}

static alma_status concat_seq_infer(INFER_ARGS) {
  ALMA_TRY(need_seq(n, in[0], "input_sequence"));
  if (!alma__node_attr(n, "axis")) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute axis is required");
  if (!in[0]->data) return alma__need_value();
  int axis;
  return concat_seq_shape(n, alma__container(in[0]), &axis, &out[0]);
}

static alma_status concat_seq_exec(EXEC_ARGS) {
  const alma__seq *s = alma__container(in[0]);
  alma_tensor shape;
  int axis, new_axis = alma__attr_i(n, "new_axis", 0) != 0;
  memset(&shape, 0, sizeof shape);
  ALMA_TRY(concat_seq_shape(n, s, &axis, &shape));
  ALMA_TRY(alma__tensor_alloc(&out[0], shape.dtype, shape.rank, shape.dims));
  size_t esz = alma_dtype_size(shape.dtype);
  int64_t outer = alma__numel(axis, shape.dims), inner = alma__numel(shape.rank - axis - 1, shape.dims + axis + 1);
  int64_t off = 0, total = shape.dims[axis];
  for (int i = 0; i < s->n; i++) {
    int64_t c = new_axis ? 1 : s->items[i].dims[axis];
    size_t row = (size_t)(c * inner) * esz;
    for (int64_t o = 0; o < outer && row; o++)
      memcpy((char *)out[0].data + ((size_t)(o * total + off) * (size_t)inner) * esz,
             (const char *)s->items[i].data + (size_t)o * row, row);
    off += c;
  }
  return ALMA_OK;
}
const alma_op_def alma__op_ConcatFromSequence = {.name = "ConcatFromSequence", .domain = "", .versions = {11},
                                                 .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                                 .flags = ALMA_OP_ALLOCS_OUTPUTS | ALMA_OP_CONTAINERS | ALMA_OP_STRINGS, .infer = concat_seq_infer,
                                                 .exec = concat_seq_exec};

/* ---- SequenceMap: runs body once per position of the input sequences ------------------------- */
static const alma_graph *body_of(const alma_node *n) {
  const alma_attr *a = alma__node_attr(n, "body");
  return a && a->type == ALMA_ATTR_GRAPH ? a->g : NULL;
}

static alma_status seq_map_infer(INFER_ARGS) {
  const alma_graph *body = body_of(n);
  if (!body) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "needs graph attribute body");
  if (body->n_inputs != nin || body->n_outputs != nout)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "body takes %d inputs and gives %d outputs; the node has %d and %d",
                          body->n_inputs, body->n_outputs, nin, nout);
  ALMA_TRY(need_seq(n, in[0], "input_sequence"));
  for (int i = 1; i < nin; i++)
    if (!in[i] || is_opt(in[i]))
      return alma__op_error(n, ALMA_ERR_TYPE, "additional input %d must be a tensor or a sequence", i);
  for (int j = 0; j < nout; j++) set_seq_type(&out[j], body->values[body->outputs[j]].dtype);
  return ALMA_OK;
}

static alma_status seq_map_exec(EXEC_ARGS) {
  const alma_graph *body = body_of(n);
  int64_t len = alma__container(in[0])->n;
  for (int i = 1; i < nin; i++)
    if (is_seq(in[i]) && alma__container(in[i])->n != len)
      return alma__op_error(n, ALMA_ERR_SHAPE, "input %d holds %d tensors, input_sequence %lld (sequences must be as long)",
                            i, alma__container(in[i])->n, (long long)len);
  alma_tensor *bin = calloc((size_t)nin + 1, sizeof *bin), *bout = calloc((size_t)nout + 1, sizeof *bout);
  alma_status st = bin && bout ? ALMA_OK : alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (int j = 0; j < nout && st == ALMA_OK; j++)
    st = alma__container_alloc(&out[j], ALMA__DTYPE_SEQUENCE, body->values[body->outputs[j]].dtype, 0);
  for (int64_t it = 0; it < len && st == ALMA_OK; it++) {
    for (int i = 0; i < nin; i++)
      bin[i] = alma__tensor_view(is_seq(in[i]) ? &alma__container(in[i])->items[it] : in[i]);
    st = alma__exec_subgraph(ctx, body, bin, nin, bout, nout);
    if (st != ALMA_OK) {
      alma__error_prefix(st, "node '%s' (SequenceMap), position %lld: ", n->name, (long long)it);
      break;
    }
    for (int j = 0; j < nout; j++) {
      if (st == ALMA_OK && !is_tensor(&bout[j]))
        st = alma__op_error(n, ALMA_ERR_TYPE, "body output %d is not a tensor", j);
      if (st == ALMA_OK) {
        if (alma__container(&out[j])->n == 0) out[j].dims[0] = bout[j].dtype; /* the type the body gives */
        else if (bout[j].dtype != (alma_dtype)out[j].dims[0])
          st = alma__op_error(n, ALMA_ERR_TYPE, "body output %d changes dtype between positions", j);
      }
      if (st == ALMA_OK) st = alma__container_insert(&out[j], -1, &bout[j]);
      alma_tensor_free_data(&bout[j]);
    }
  }
  free(bin);
  free(bout);
  return st; /* on error the caller frees out[] */
}
const alma_op_def alma__op_SequenceMap = {.name = "SequenceMap", .domain = "", .versions = {17}, .min_inputs = 1,
                                          .max_inputs = -1, .min_outputs = 1, .max_outputs = -1,
                                          .flags = ALMA_OP_ALLOCS_OUTPUTS | ALMA_OP_HAS_SUBGRAPH | ALMA_OP_CONTAINERS | ALMA_OP_STRINGS,
                                          .infer = seq_map_infer, .exec = seq_map_exec};

/* ---- Optional: wraps its input, or (no input) is empty of the `type` attribute's type ---------- */
static alma_status optional_type(const alma_node *n, const alma_tensor *x, alma_dtype *elem, int *elem_is_seq) {
  if (x) {
    if (is_opt(x)) return alma__op_error(n, ALMA_ERR_TYPE, "input must be a tensor or a sequence, not an optional");
    *elem_is_seq = is_seq(x);
    *elem = is_seq(x) ? alma__container_elem(x) : x->dtype;
    return ALMA_OK;
  }
  const alma_attr *a = alma__node_attr(n, "type");
  if (!a || a->type != ALMA_ATTR_TYPE_PROTO || a->n != 3)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "without an input the type attribute is required");
  alma_dtype t = (alma_dtype)a->ints[0];
  if (t == ALMA__DTYPE_OPTIONAL) return alma__op_error(n, ALMA_ERR_TYPE, "type must be a tensor or sequence type");
  *elem_is_seq = t == ALMA__DTYPE_SEQUENCE;
  *elem = *elem_is_seq ? (alma_dtype)a->ints[1] : t;
  return ALMA_OK;
}
static alma_status optional_infer(INFER_ARGS) {
  alma_dtype elem;
  int es;
  ALMA_TRY(optional_type(n, nin > 0 ? in[0] : NULL, &elem, &es));
  memset(&out[0], 0, sizeof out[0]);
  alma__set_container_type(&out[0], ALMA__DTYPE_OPTIONAL, elem, es);
  return ALMA_OK;
}
static alma_status optional_exec(EXEC_ARGS) {
  alma_dtype elem;
  int es;
  const alma_tensor *x = nin > 0 ? in[0] : NULL;
  ALMA_TRY(optional_type(n, x, &elem, &es));
  ALMA_TRY(alma__container_alloc(&out[0], ALMA__DTYPE_OPTIONAL, elem, es));
  if (!x) return ALMA_OK;
  alma_tensor item = alma__tensor_view(x);
  return alma__container_insert(&out[0], -1, &item);
}
const alma_op_def alma__op_Optional = {.name = "Optional", .domain = "", .versions = {15}, .min_inputs = 0,
                                       .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                       .flags = ALMA_OP_ALLOCS_OUTPUTS | ALMA_OP_CONTAINERS | ALMA_OP_STRINGS, .infer = optional_infer, .exec = optional_exec};

/* ---- OptionalHasElement: 15 takes an optional; 18 also a tensor or sequence (true) or nothing
 * (false). A tensor or sequence reaching version 15 is taken as 18 takes it, as ONNX's reference
 * does: a Loop-carried optional(seq) becomes a plain sequence after the first iteration
 * (test_loop16_seq_none), and no type system in between says otherwise. Only an omitted input is
 * refused there. */
static alma_status has_elem_check(const alma_node *n, const alma_tensor *x) {
  if (n->since_version < 18 && !x)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "OptionalHasElement-15 needs its input (it may be omitted from 18)");
  return ALMA_OK;
}
static alma_status has_elem_infer(INFER_ARGS) {
  const alma_tensor *x = nin > 0 ? in[0] : NULL;
  ALMA_TRY(has_elem_check(n, x));
  alma__set_shape(&out[0], ALMA_DTYPE_BOOL, 0, NULL);
  return ALMA_OK;
}
static alma_status has_elem_exec(EXEC_ARGS) {
  const alma_tensor *x = nin > 0 ? in[0] : NULL;
  ALMA_TRY(has_elem_check(n, x));
  ALMA_TRY(alma__tensor_alloc(&out[0], ALMA_DTYPE_BOOL, 0, NULL));
  *(uint8_t *)out[0].data = x && (!is_opt(x) || alma__container(x)->n > 0);
  return ALMA_OK;
}
const alma_op_def alma__op_OptionalHasElement = {.name = "OptionalHasElement", .domain = "", .versions = {15, 18},
                                                 .min_inputs = 0, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                                 .flags = ALMA_OP_ALLOCS_OUTPUTS | ALMA_OP_CONTAINERS | ALMA_OP_STRINGS, .infer = has_elem_infer,
                                                 .exec = has_elem_exec};

/* ---- OptionalGetElement: 15 takes an optional; 18 also a tensor or sequence (passed through;
 * version 15 does the same, as OptionalHasElement above) -------------------------------------- */
static alma_status get_elem_infer(INFER_ARGS) {
  const alma_tensor *x = in[0];
  if (!is_opt(x)) {
    out[0] = *x;
    out[0].data = NULL;
    out[0].nbytes = 0;
    out[0].owns_data = 0;
    return ALMA_OK;
  }
  if (alma__container_elem_is_seq(x)) {
    set_seq_type(&out[0], alma__container_elem(x));
    return ALMA_OK;
  }
  if (!x->data) return alma__need_value(); /* a tensor whose shape is the element's */
  const alma__seq *s = alma__container(x);
  if (s->n == 0) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "the optional input is empty");
  alma__set_shape(&out[0], s->items[0].dtype, s->items[0].rank, s->items[0].dims);
  return ALMA_OK;
}
static alma_status get_elem_exec(EXEC_ARGS) {
  const alma_tensor *x = in[0];
  if (!is_opt(x)) return alma__tensor_copy(&out[0], x);
  const alma__seq *s = alma__container(x);
  if (s->n == 0) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "the optional input is empty");
  return alma__tensor_copy(&out[0], &s->items[0]);
}
const alma_op_def alma__op_OptionalGetElement = {.name = "OptionalGetElement", .domain = "", .versions = {15, 18},
                                                 .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                                 .flags = ALMA_OP_ALLOCS_OUTPUTS | ALMA_OP_CONTAINERS | ALMA_OP_STRINGS, .infer = get_elem_infer,
                                                 .exec = get_elem_exec};
