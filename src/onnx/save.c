/* graph IR -> ONNX ModelProto (protobuf-c), the inverse of load.c: what a conversion made of a
 * model can be saved, inspected and run by other ONNX tools.
 *
 * The message tree is built in a scratch arena whose lifetime is the call; tensor payloads are not
 * copied (raw_data points at the graph's buffers while packing; 4-bit and 2-bit types are packed
 * into the scratch arena). Initializers are written as
 * raw_data (little-endian, as ONNX specifies and as alma stores them). Only live, used initializers
 * are written. Declared input/output types are kept; an output whose type is unknown (a value a
 * pass created) gets the dtype static inference gives it. */
#include <errno.h>

#include "graph/infer.h"
#include "graph/opset.h"
#include "onnx/onnx.h"
#include "onnx/onnx.pb-c.h"
#include "runtimes/session.h"

typedef struct save_ctx {
  alma_arena *a;
  alma_status st;
  int uses_alma_domain;
  int64_t opset_to; /* the default-domain opset written (opset_to_write) */
  const alma_graph *root;
  const alma_opset_value *vals; /* root's values (inference), for the forms of its nodes */
  struct name_set *taken;       /* every value name of the graph tree and the initializers added */
} save_ctx;

static void *salloc(save_ctx *c, size_t n) {
  void *p = alma__arena_alloc(c->a, n ? n : 1);
  if (!p && c->st == ALMA_OK) c->st = alma__errorf(ALMA_ERR_NOMEM, "out of memory writing the model");
  return p;
}

/* protobuf-c packs a char* field; the graph's names are const arena strings that outlive packing. */
static char *sstr(const char *s) { return (char *)(s ? s : ""); }

static Onnx__TensorProto *tensor_proto(save_ctx *c, const alma_tensor *t, const char *name) {
  Onnx__TensorProto *tp = salloc(c, sizeof *tp);
  if (!tp) return NULL;
  *tp = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
  tp->name = sstr(name);
  tp->has_data_type = 1;
  tp->data_type = (int32_t)t->dtype;
  tp->n_dims = (size_t)t->rank;
  tp->dims = salloc(c, sizeof(int64_t) * (size_t)(t->rank + 1));
  if (!tp->dims) return NULL;
  for (int d = 0; d < t->rank; d++) tp->dims[d] = t->dims[d];
  size_t nbytes = (size_t)alma_tensor_numel(t) * alma_dtype_size(t->dtype);
  if (nbytes > t->nbytes && t->nbytes) {
    c->st = alma__errorf(ALMA_ERR_INTERNAL, "tensor '%s': %zu bytes for a shape needing %zu", name ? name : "", t->nbytes,
                         nbytes);
    return NULL;
  }
  if (t->dtype == ALMA_DTYPE_STRING) { /* string_data (core.h's handles are process-local) */
    size_t ne = (size_t)alma_tensor_numel(t);
    tp->n_string_data = ne;
    tp->string_data = salloc(c, sizeof(ProtobufCBinaryData) * (ne + 1));
    if (!tp->string_data) return NULL;
    for (size_t i = 0; i < ne; i++) {
      const alma__str *e = t->data ? ((const alma__str *const *)t->data)[i] : NULL;
      tp->string_data[i].len = alma__str_len(e);
      tp->string_data[i].data = (uint8_t *)alma__str_ptr(e);
    }
    return tp;
  }
  tp->has_raw_data = 1;
  if (alma__dtype_packed_bits(t->dtype) < 8) {
    /* int4/uint4/float4e2m1/int2/uint2: one a byte in memory, packed in the file (load.c undoes it) */
    size_t pb = alma__packed_size(t->dtype, alma_tensor_numel(t));
    uint8_t *p = salloc(c, pb);
    if (!p) return NULL;
    alma__pack_lowbit(t->dtype, t->data, alma_tensor_numel(t), p);
    tp->raw_data.len = pb;
    tp->raw_data.data = pb ? p : NULL;
    return tp;
  }
  tp->raw_data.len = nbytes;
  tp->raw_data.data = nbytes ? t->data : NULL;
  return tp;
}

/* TypeProto of a tensor of dtype dt (no shape), or of a sequence/optional (core.h's container
 * encoding: kind dt, element dtype elem, elem_is_seq for optional(seq)). */
static Onnx__TypeProto *type_proto(save_ctx *c, alma_dtype dt, alma_dtype elem, int elem_is_seq) {
  Onnx__TypeProto *tp = salloc(c, sizeof *tp);
  if (!tp) return NULL;
  *tp = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
  if (dt == ALMA__DTYPE_SEQUENCE || dt == ALMA__DTYPE_OPTIONAL) {
    Onnx__TypeProto *inner = elem_is_seq ? type_proto(c, ALMA__DTYPE_SEQUENCE, elem, 0) : type_proto(c, elem, 0, 0);
    if (!inner) return NULL;
    if (dt == ALMA__DTYPE_SEQUENCE) {
      Onnx__TypeProto__Sequence *sq = salloc(c, sizeof *sq);
      if (!sq) return NULL;
      *sq = (Onnx__TypeProto__Sequence)ONNX__TYPE_PROTO__SEQUENCE__INIT;
      sq->elem_type = inner;
      tp->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
      tp->sequence_type = sq;
    } else {
      Onnx__TypeProto__Optional *op = salloc(c, sizeof *op);
      if (!op) return NULL;
      *op = (Onnx__TypeProto__Optional)ONNX__TYPE_PROTO__OPTIONAL__INIT;
      op->elem_type = inner;
      tp->value_case = ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE;
      tp->optional_type = op;
    }
    return tp;
  }
  Onnx__TypeProto__Tensor *tt = salloc(c, sizeof *tt);
  if (!tt) return NULL;
  *tt = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp->tensor_type = tt;
  if (dt != ALMA_DTYPE_UNDEFINED) {
    tt->has_elem_type = 1;
    tt->elem_type = (int32_t)dt;
  }
  return tp;
}

/* map(key, tensor(val)) (core.h's map encoding), bare or as a sequence's element (seq = 1). */
static Onnx__TypeProto *map_type_proto(save_ctx *c, alma_dtype key, alma_dtype val, int seq) {
  Onnx__TypeProto *tp = salloc(c, sizeof *tp), *vt = type_proto(c, val, 0, 0);
  Onnx__TypeProto__Map *mt = salloc(c, sizeof *mt);
  if (!tp || !vt || !mt) return NULL;
  *tp = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
  *mt = (Onnx__TypeProto__Map)ONNX__TYPE_PROTO__MAP__INIT;
  mt->has_key_type = 1;
  mt->key_type = (int32_t)key;
  mt->value_type = vt;
  tp->value_case = ONNX__TYPE_PROTO__VALUE_MAP_TYPE;
  tp->map_type = mt;
  if (!seq) return tp;
  Onnx__TypeProto *st = salloc(c, sizeof *st);
  Onnx__TypeProto__Sequence *sq = salloc(c, sizeof *sq);
  if (!st || !sq) return NULL;
  *st = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
  *sq = (Onnx__TypeProto__Sequence)ONNX__TYPE_PROTO__SEQUENCE__INIT;
  sq->elem_type = tp;
  st->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
  st->sequence_type = sq;
  return st;
}

/* Tensor type with the declared (or given) dtype and, when the rank is known, the shape with its
 * symbolic names; a sequence/optional/map type for those. */
static Onnx__ValueInfoProto *value_info(save_ctx *c, const alma_value *v, alma_dtype dt_fallback) {
  Onnx__ValueInfoProto *vi = salloc(c, sizeof *vi);
  Onnx__TypeProto *tp = salloc(c, sizeof *tp);
  Onnx__TypeProto__Tensor *tt = salloc(c, sizeof *tt);
  if (!vi || !tp || !tt) return NULL;
  *vi = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
  *tp = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
  *tt = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
  vi->name = sstr(v->name);
  if (v->dtype == ALMA__DTYPE_MAP || (v->dtype == ALMA__DTYPE_SEQUENCE && v->dims[0] == ALMA__DTYPE_MAP)) {
    vi->type = map_type_proto(c, (alma_dtype)v->dims[2], (alma_dtype)v->dims[3], v->dtype == ALMA__DTYPE_SEQUENCE);
    return vi->type ? vi : NULL;
  }
  if (v->dtype == ALMA__DTYPE_SEQUENCE || v->dtype == ALMA__DTYPE_OPTIONAL) {
    vi->type = type_proto(c, v->dtype, (alma_dtype)v->dims[0], v->dims[1] != 0);
    return vi->type ? vi : NULL;
  }
  alma_dtype dt = v->dtype != ALMA_DTYPE_UNDEFINED ? v->dtype : dt_fallback;
  if (alma__dtype_is_container(dt)) { /* inferred only: the element type is not at hand */
    vi->type = type_proto(c, dt, ALMA_DTYPE_UNDEFINED, 0);
    return vi->type ? vi : NULL;
  }
  if (dt == ALMA_DTYPE_UNDEFINED && v->rank < 0) return vi; /* nothing known: no type */
  vi->type = tp;
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp->tensor_type = tt;
  if (dt != ALMA_DTYPE_UNDEFINED) {
    tt->has_elem_type = 1;
    tt->elem_type = (int32_t)dt;
  }
  if (v->rank >= 0) {
    Onnx__TensorShapeProto *sp = salloc(c, sizeof *sp);
    Onnx__TensorShapeProto__Dimension **dims = salloc(c, sizeof *dims * (size_t)(v->rank + 1));
    if (!sp || !dims) return NULL;
    *sp = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    sp->n_dim = (size_t)v->rank;
    sp->dim = dims;
    for (int d = 0; d < v->rank; d++) {
      Onnx__TensorShapeProto__Dimension *dim = salloc(c, sizeof *dim);
      if (!dim) return NULL;
      *dim = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
      if (v->dims[d] >= 0) {
        dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dim->dim_value = v->dims[d];
      } else if (v->dim_params[d]) {
        dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
        dim->dim_param = sstr(v->dim_params[d]);
      }
      dims[d] = dim;
    }
    tt->shape = sp;
  }
  return vi;
}

static Onnx__GraphProto *graph_proto(save_ctx *c, const alma_graph *g, const alma_infer_result *r);

static Onnx__AttributeProto *attr_proto(save_ctx *c, const alma_attr *at) {
  Onnx__AttributeProto *ap = salloc(c, sizeof *ap);
  if (!ap) return NULL;
  *ap = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
  ap->name = sstr(at->name);
  ap->has_type = 1;
  ap->type = (Onnx__AttributeProto__AttributeType)at->type;
  switch (at->type) {
    case ALMA_ATTR_FLOAT: ap->has_f = 1; ap->f = at->f; break;
    case ALMA_ATTR_INT: ap->has_i = 1; ap->i = at->i; break;
    case ALMA_ATTR_STRING:
      ap->has_s = 1;
      ap->s.len = at->s_len;
      ap->s.data = (uint8_t *)at->s;
      break;
    case ALMA_ATTR_TENSOR:
      if (!at->t || !(ap->t = tensor_proto(c, at->t, ""))) return NULL;
      break;
    case ALMA_ATTR_GRAPH:
      if (!at->g || !(ap->g = graph_proto(c, at->g, NULL))) return NULL;
      break;
    case ALMA_ATTR_FLOATS:
      ap->n_floats = (size_t)at->n;
      ap->floats = at->floats;
      break;
    case ALMA_ATTR_INTS:
      ap->n_ints = (size_t)at->n;
      ap->ints = at->ints;
      break;
    case ALMA_ATTR_STRINGS:
      ap->n_strings = (size_t)at->n;
      ap->strings = salloc(c, sizeof *ap->strings * (size_t)(at->n + 1));
      if (!ap->strings) return NULL;
      for (int k = 0; k < at->n; k++) {
        ap->strings[k].data = (uint8_t *)at->strings[k];
        ap->strings[k].len = strlen(at->strings[k]);
      }
      break;
    case ALMA_ATTR_TENSORS:
      ap->n_tensors = (size_t)at->n;
      ap->tensors = salloc(c, sizeof *ap->tensors * (size_t)(at->n + 1));
      if (!ap->tensors) return NULL;
      for (int k = 0; k < at->n; k++)
        if (!(ap->tensors[k] = tensor_proto(c, &at->tensors[k], ""))) return NULL;
      break;
    case ALMA_ATTR_GRAPHS:
      ap->n_graphs = (size_t)at->n;
      ap->graphs = salloc(c, sizeof *ap->graphs * (size_t)(at->n + 1));
      if (!ap->graphs) return NULL;
      for (int k = 0; k < at->n; k++)
        if (!(ap->graphs[k] = graph_proto(c, at->graphs[k], NULL))) return NULL;
      break;
    case ALMA_ATTR_TYPE_PROTO:
      if (at->n != 3 || !(ap->tp = type_proto(c, (alma_dtype)at->ints[0], (alma_dtype)at->ints[1], at->ints[2] != 0)))
        return NULL;
      break;
    default:
      c->st = alma__errorf(ALMA_ERR_UNSUPPORTED, "attribute '%s' of type %d cannot be written", at->name, (int)at->type);
      return NULL;
  }
  return ap;
}

/* Node names must be unique in a graph for ONNX's checker and ONNX Runtime, but a model or a pass
 * may repeat one: a repeated name gets "_<k>" appended (k from 1, the first free one). Open
 * addressing over the names written so far in this graph. */
typedef struct name_set {
  const char **slot;
  size_t cap;
} name_set;

static uint64_t fnv1a(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* Adds name; returns 0 if it was there already. */
static int name_add(name_set *ns, const char *name) {
  size_t i = (size_t)fnv1a(name) & (ns->cap - 1);
  while (ns->slot[i]) {
    if (!strcmp(ns->slot[i], name)) return 0;
    i = (i + 1) & (ns->cap - 1);
  }
  ns->slot[i] = name;
  return 1;
}

static const char *unique_name(save_ctx *c, name_set *ns, const char *name) {
  if (name_add(ns, name)) return name;
  size_t len = strlen(name) + 24;
  for (int k = 1;; k++) {
    char *alt = salloc(c, len);
    if (!alt) return NULL;
    snprintf(alt, len, "%s_%d", name, k);
    if (name_add(ns, alt)) return alt;
  }
}

static int name_has(const name_set *ns, const char *name) {
  for (size_t i = (size_t)fnv1a(name) & (ns->cap - 1); ns->slot[i]; i = (i + 1) & (ns->cap - 1))
    if (!strcmp(ns->slot[i], name)) return 1;
  return 0;
}

/* A name for a new initializer: base, or base_<k> when a value of the model (in any graph: a
 * subgraph's must not shadow an outer one) or another new initializer has that name. */
static const char *new_value_name(save_ctx *c, const char *base) {
  size_t len = strlen(base) + 24;
  char *nm = salloc(c, len);
  if (!nm) return NULL;
  snprintf(nm, len, "%s", base);
  for (int k = 1; name_has(c->taken, nm); k++) snprintf(nm, len, "%s_%d", base, k);
  name_add(c->taken, nm);
  return nm;
}

/* Adds the number of values and nodes of g and its subgraphs to *n. */
static void count_tree(const alma_graph *g, size_t *n) {
  *n += (size_t)g->n_values + (size_t)g->n_nodes;
  for (int i = 0; i < g->n_nodes; i++)
    for (int a = 0; a < g->nodes[i].n_attrs; a++) {
      const alma_attr *at = &g->nodes[i].attrs[a];
      if (at->type == ALMA_ATTR_GRAPH && at->g) count_tree(at->g, n);
      for (int k = 0; at->type == ALMA_ATTR_GRAPHS && k < at->n; k++)
        if (at->graphs[k]) count_tree(at->graphs[k], n);
    }
}

static void add_value_names(name_set *ns, const alma_graph *g) {
  for (int v = 0; v < g->n_values; v++)
    if (g->values[v].name) name_add(ns, g->values[v].name);
  for (int i = 0; i < g->n_nodes; i++)
    for (int a = 0; a < g->nodes[i].n_attrs; a++) {
      const alma_attr *at = &g->nodes[i].attrs[a];
      if (at->type == ALMA_ATTR_GRAPH && at->g) add_value_names(ns, at->g);
      for (int k = 0; at->type == ALMA_ATTR_GRAPHS && k < at->n; k++)
        if (at->graphs[k]) add_value_names(ns, at->graphs[k]);
    }
}

static Onnx__AttributeProto *int_attr_proto(save_ctx *c, const char *name, int64_t v) {
  Onnx__AttributeProto *ap = salloc(c, sizeof *ap);
  if (!ap) return NULL;
  *ap = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
  ap->name = sstr(name);
  ap->has_type = 1;
  ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  ap->has_i = 1;
  ap->i = v;
  return ap;
}

/* gp: where attributes that became inputs (alma__opset_form) add their initializers. */
static Onnx__NodeProto *node_proto(save_ctx *c, const alma_graph *g, const alma_node *n, name_set *ns,
                                   Onnx__GraphProto *gp) {
  Onnx__NodeProto *np = salloc(c, sizeof *np);
  if (!np) return NULL;
  *np = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
  const char *nm = unique_name(c, ns, n->name ? n->name : "");
  if (!nm) return NULL;
  alma_opset_form f; /* the same vals as opset_to_write's blocker saw */
  if (alma__opset_form(g, n, c->opset_to, g == c->root ? c->vals : NULL, &f) < 0) {
    c->st = alma__errorf(ALMA_ERR_INTERNAL, "node '%s' (%s-%d) cannot be written at opset %lld", nm, n->op_type,
                         n->since_version, (long long)c->opset_to);
    return NULL;
  }
  np->name = sstr(nm);
  np->op_type = sstr(n->op_type);
  np->domain = n->domain && n->domain[0] ? (char *)n->domain : NULL;
  if (n->domain && !strcmp(n->domain, "alma")) c->uses_alma_domain = 1;
  np->n_input = (size_t)n->n_inputs;
  np->input = salloc(c, sizeof(char *) * (size_t)(n->n_inputs + f.n_inputs + 1));
  np->n_output = (size_t)n->n_outputs;
  np->output = salloc(c, sizeof(char *) * (size_t)(n->n_outputs + 1));
  np->attribute = salloc(c, sizeof *np->attribute * (size_t)(n->n_attrs + 2));
  if (!np->input || !np->output || !np->attribute) return NULL;
  for (int k = 0; k < n->n_inputs; k++) np->input[k] = n->inputs[k] >= 0 ? sstr(g->values[n->inputs[k]].name) : "";
  for (int k = 0; k < n->n_outputs; k++) np->output[k] = n->outputs[k] >= 0 ? sstr(g->values[n->outputs[k]].name) : "";
  np->n_attribute = 0;
  for (int k = 0; k < n->n_attrs; k++) {
    int dropped = 0;
    for (int d = 0; d < f.n_drop && !dropped; d++) dropped = !strcmp(n->attrs[k].name, f.drop[d]);
    if (!dropped && !(np->attribute[np->n_attribute++] = attr_proto(c, &n->attrs[k]))) return NULL;
  }
  if (f.set_attr && !(np->attribute[np->n_attribute++] = int_attr_proto(c, f.set_attr, f.set_i))) return NULL;
  for (int k = 0; k < f.n_inputs; k++) { /* the attributes as the inputs they became */
    const alma_tensor *src = &f.in[k].t;
    if (src->dtype == ALMA_DTYPE_UNDEFINED) {
      np->input[np->n_input++] = "";
      continue;
    }
    char base[256];
    snprintf(base, sizeof base, "%s_%s", nm, f.in[k].name);
    const char *vn = new_value_name(c, base);
    alma_tensor *t = salloc(c, sizeof *t);
    void *data = salloc(c, src->nbytes);
    if (!vn || !t || !data) return NULL;
    *t = *src;
    if (src->nbytes) memcpy(data, src->data, src->nbytes); /* f's scalars live on this stack */
    t->data = data;
    if (!(gp->initializer[gp->n_initializer++] = tensor_proto(c, t, vn))) return NULL;
    np->input[np->n_input++] = sstr(vn);
  }
  return np;
}

/* r: inference results of g (top level only), for the dtypes of outputs nobody declared. */
static Onnx__GraphProto *graph_proto(save_ctx *c, const alma_graph *g, const alma_infer_result *r) {
  if (c->st != ALMA_OK) return NULL;
  Onnx__GraphProto *gp = salloc(c, sizeof *gp);
  if (!gp) return NULL;
  *gp = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
  gp->name = sstr(g->name && g->name[0] ? g->name : "graph");
  int live = 0;
  for (int i = 0; i < g->n_nodes; i++) live += !g->nodes[i].dead;
  gp->node = salloc(c, sizeof *gp->node * (size_t)(live + 1));
  gp->initializer = salloc(c, sizeof *gp->initializer * (size_t)(g->n_values + ALMA_OPSET_FORM_MAX * live + 1));
  gp->input = salloc(c, sizeof *gp->input * (size_t)(g->n_inputs + 1));
  gp->output = salloc(c, sizeof *gp->output * (size_t)(g->n_outputs + 1));
  if (!gp->node || !gp->initializer || !gp->input || !gp->output) return NULL;
  name_set ns = {.cap = 16};
  while (ns.cap < 2 * (size_t)live + 2 * 64) ns.cap *= 2; /* room for renamed duplicates too */
  ns.slot = salloc(c, ns.cap * sizeof *ns.slot);
  if (!ns.slot) return NULL;
  for (int i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].dead) continue;
    if (!(gp->node[gp->n_node++] = node_proto(c, g, &g->nodes[i], &ns, gp))) return NULL;
  }
  for (int v = 0; v < g->n_values; v++) {
    const alma_value *val = &g->values[v];
    if (!val->init || val->is_outer || alma__graph_count_uses(g, v) == 0) continue;
    if (!(gp->initializer[gp->n_initializer++] = tensor_proto(c, val->init, val->name))) return NULL;
  }
  for (int i = 0; i < g->n_inputs; i++)
    if (!(gp->input[gp->n_input++] = value_info(c, &g->values[g->inputs[i]], ALMA_DTYPE_UNDEFINED))) return NULL;
  for (int i = 0; i < g->n_outputs; i++) {
    int v = g->outputs[i];
    alma_dtype fb = r && r->info ? r->info[v].dtype : ALMA_DTYPE_UNDEFINED;
    if (!(gp->output[gp->n_output++] = value_info(c, &g->values[v], fb))) return NULL;
  }
  return gp;
}

/* The lowest IR version that can carry an opset (onnx/helper.py VERSION_TABLE). */
static int64_t ir_for_opset(int64_t opset) {
  if (opset <= 8) return 3;
  if (opset == 9) return 4;
  if (opset == 10) return 5;
  if (opset == 11) return 6;
  if (opset <= 14) return 7;
  if (opset <= 18) return 8;
  if (opset <= 20) return 9;
  if (opset <= 22) return 10;
  return 11;
}

/* The default-domain opset written for g: the graph's, raised to the newest version among its
 * nodes (a pass may add newer ops, e.g. FUSE's LayerNormalization-17) when every other node reads
 * the same at that opset (graph/opset.h); else the graph's (the file then holds nodes newer than
 * its opset). vals: from shape inference, or NULL (declared ranks and dtypes). */
static int64_t opset_to_write(const alma_graph *g, const alma_opset_value *vals) {
  int64_t opset = alma__graph_opset(g, ""), need = alma__opset_newest(g);
  return need > opset && !alma__opset_blocker(g, need, vals) ? need : opset;
}

alma_status alma__onnx_serialize(const alma_graph *g, const alma_onnx_meta *meta, uint8_t **bytes_out, size_t *n_out) {
  *bytes_out = NULL;
  *n_out = 0;
  if (!g) return alma__errorf(ALMA_ERR_INVALID_ARG, "graph is NULL");
  save_ctx c = {.a = alma__arena_new(), .st = ALMA_OK};
  if (!c.a) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  alma_infer_result r;
  int resolved = 1; /* a graph built by hand may not have its ops bound yet: then no inference */
  for (int i = 0; i < g->n_nodes; i++) resolved &= g->nodes[i].dead || g->nodes[i].op != NULL;
  int have_r = resolved && alma__graph_infer(g, NULL, 1, 0, &r) == ALMA_OK;
  if (!have_r) alma__error_clear(); /* only output dtypes and ranks come from it: write without them */
  /* ranks and dtypes: Softmax-family nodes over their last axis, scalars of Pad's and Clip's type */
  alma_opset_value *vals = have_r ? alma__opset_values(g, &r) : NULL;
  c.opset_to = opset_to_write(g, vals);
  c.root = g;
  c.vals = vals;
  size_t names = 0;
  count_tree(g, &names);
  name_set taken = {.cap = 16};
  while (taken.cap < 2 * (size_t)ALMA_OPSET_FORM_MAX * names + 64) taken.cap *= 2;
  taken.slot = salloc(&c, taken.cap * sizeof *taken.slot);
  if (taken.slot) add_value_names(&taken, g);
  c.taken = &taken;
  Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
  if (taken.slot && (!have_r || vals)) mp.graph = graph_proto(&c, g, have_r ? &r : NULL);
  else if (c.st == ALMA_OK) c.st = alma__errorf(ALMA_ERR_NOMEM, "out of memory writing the model");
  free(vals);
  if (have_r) alma__infer_result_free(&r);
  alma_status st = c.st;
  int64_t written = c.opset_to;
  if (st == ALMA_OK && !mp.graph) st = alma__errorf(ALMA_ERR_INTERNAL, "writing the graph failed");
  if (st == ALMA_OK) {
    int has_alma = alma__graph_opset(g, "alma") > 0;
    int n = g->n_opsets + (c.uses_alma_domain && !has_alma);
    mp.opset_import = salloc(&c, sizeof *mp.opset_import * (size_t)(n + 1));
    for (int i = 0; mp.opset_import && i < n; i++) {
      Onnx__OperatorSetIdProto *os = salloc(&c, sizeof *os);
      if (!os) break;
      *os = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
      os->has_version = 1;
      if (i < g->n_opsets) {
        os->domain = sstr(g->opsets[i].domain);
        os->version = alma__opset_is_onnx(g->opsets[i].domain) ? written : g->opsets[i].version;
      } else {
        os->domain = "alma";
        os->version = 1;
      }
      mp.opset_import[mp.n_opset_import++] = os;
    }
    st = c.st;
  }
  if (st == ALMA_OK) {
    int64_t ir = meta && meta->ir_version > 0 ? meta->ir_version : 0;
    int64_t need = ir_for_opset(written);
    mp.has_ir_version = 1;
    mp.ir_version = ir > need ? ir : need;
    mp.producer_name = "alma";
    mp.producer_version = ALMA_VERSION_STRING;
    mp.domain = meta && meta->domain && meta->domain[0] ? (char *)meta->domain : NULL;
    size_t n = onnx__model_proto__get_packed_size(&mp);
    if (n > (size_t)INT32_MAX) {
      st = alma__errorf(ALMA_ERR_UNSUPPORTED, "the model needs %zu bytes; protobuf files are limited to 2 GiB "
                                              "(external data is not written)", n);
    } else {
      uint8_t *buf = malloc(n ? n : 1);
      if (!buf) {
        st = alma__errorf(ALMA_ERR_NOMEM, "out of memory for %zu bytes", n);
      } else {
        onnx__model_proto__pack(&mp, buf);
        *bytes_out = buf;
        *n_out = n;
      }
    }
  }
  alma__arena_free(c.a);
  return st;
}

alma_status alma__onnx_save(const alma_graph *g, const alma_onnx_meta *meta, const char *path) {
  if (!path || !path[0]) return alma__errorf(ALMA_ERR_INVALID_ARG, "no path to save the model to");
  uint8_t *buf;
  size_t n;
  ALMA_TRY(alma__onnx_serialize(g, meta, &buf, &n));
  FILE *f = fopen(path, "wb");
  if (!f) {
    free(buf);
    return alma__errorf(ALMA_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
  }
  size_t w = fwrite(buf, 1, n, f);
  int err = ferror(f);
  free(buf);
  if (fclose(f) != 0 || w != n || err) {
    remove(path);
    return alma__errorf(ALMA_ERR_IO, "writing '%s' failed: %s", path, strerror(errno));
  }
  return ALMA_OK;
}

alma_status alma_session_save(const alma_session *s, const char *path) {
  if (!s) return alma__errorf(ALMA_ERR_INVALID_ARG, "session is NULL");
  const alma_model *m = alma__session_model(s);
  return alma__onnx_save(alma__session_graph(s), m ? &m->meta : NULL, path);
}
