/* Model-local functions (ModelProto.functions, IR 8+): every call is replaced by the function's
 * body before the graph is parsed, as onnx's inliner does. Exporters that keep module structure
 * (jax2onnx's @onnx_function, PyTorch's dynamo exporter) write whole models as nested calls.
 *
 * Inside a call, a formal input or output takes the caller's name (a formal input the caller leaves
 * out becomes "", a missing optional input; an output the caller leaves out gets a private name) and
 * every other name, in subgraphs too, is prefixed with the call's path, so two calls of one function
 * never share a value. Attributes that refer to the function's (ref_attr_name) take the caller's,
 * else the function's default (FunctionProto.attribute_proto), else are left out. A body node runs
 * at the opset the function imports for its domain: a domain the model does not import is added,
 * one it imports at another version is refused (alma resolves operators per model).
 *
 * Everything built here lives in a scratch arena: parse_graph copies what it keeps. */
#include <limits.h>

#include "onnx/functions.h"
#include "onnx/onnx.h"

/* Fields of onnx.proto newer than Debian's copy that protobuf-c keeps as unknown fields. */
enum { NODE_OVERLOAD = 8, FUNCTION_ATTRIBUTE_PROTO = 11, FUNCTION_OVERLOAD = 13 };

typedef struct fn_info {
  const Onnx__FunctionProto *f;
  const char *overload;
  Onnx__AttributeProto **defaults; /* attribute_proto: defaults of the function's attributes */
  size_t n_defaults;
} fn_info;

typedef struct inl_ctx {
  alma_arena *tmp;             /* scratch arena for the expanded protos */
  ProtobufCAllocator alloc;    /* unpacks unknown fields into tmp */
  alma_graph *g;               /* its opsets grow with domains only functions import */
  fn_info *fns;
  size_t n_fns;
  int depth;                   /* nested calls */
  int graph_depth;             /* nested subgraphs */
} inl_ctx;

/* One call being expanded. NULL scope: the main graph (names unchanged, no attribute refs). */
typedef struct scope {
  const fn_info *fn;
  const char *prefix;               /* "caller/" path for private names */
  const char **actual;              /* per formal input then output: the caller's name */
  Onnx__AttributeProto **call_attrs; /* the caller's attributes, already resolved */
  size_t n_call_attrs;
} scope;

static void *tmp_alloc(void *data, size_t n) { return alma__arena_alloc(data, n ? n : 1); }
static void tmp_free(void *data, void *p) { (void)data, (void)p; }

static alma_status oom(void) { return alma__errorf(ALMA_ERR_NOMEM, "out of memory inlining model-local functions"); }

static const char *str_or_empty(const char *s) { return s ? s : ""; }

static int is_onnx_domain(const char *d) { return !d || !d[0] || !strcmp(d, "ai.onnx"); }
static int same_domain(const char *a, const char *b) {
  return is_onnx_domain(a) ? is_onnx_domain(b) : (b && !strcmp(a, b));
}

/* The payload of a length-prefixed unknown field: protobuf-c keeps the varint length in `data`.
 * 0 when the prefix does not match the field's size. */
static int unknown_payload(const ProtobufCMessageUnknownField *u, const uint8_t **p, size_t *n) {
  if (u->wire_type != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED) return 0;
  uint64_t len = 0;
  size_t k = 0;
  for (int shift = 0; k < u->len && shift < 64; shift += 7) {
    uint8_t b = u->data[k++];
    len |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      if (len != u->len - k) return 0;
      *p = u->data + k;
      *n = (size_t)len;
      return 1;
    }
  }
  return 0;
}

/* A string field stored as an unknown field, or "" when absent (NULL: out of memory). */
static const char *unknown_string(inl_ctx *c, const ProtobufCMessage *m, uint32_t tag) {
  for (unsigned i = 0; i < m->n_unknown_fields; i++) {
    const uint8_t *p;
    size_t n;
    if (m->unknown_fields[i].tag == tag && unknown_payload(&m->unknown_fields[i], &p, &n))
      return alma__arena_strndup(c->tmp, (const char *)p, n);
  }
  return "";
}

static const fn_info *find_function(const inl_ctx *c, const Onnx__NodeProto *np, const char *overload) {
  for (size_t i = 0; i < c->n_fns; i++) {
    const fn_info *fi = &c->fns[i];
    if (fi->f->name && np->op_type && !strcmp(fi->f->name, np->op_type) && same_domain(str_or_empty(fi->f->domain), np->domain) &&
        !strcmp(fi->overload, overload))
      return fi;
  }
  return NULL;
}

static const char *rename_value(inl_ctx *c, const scope *s, const char *name) {
  if (!name || !name[0] || !s) return name;
  const Onnx__FunctionProto *f = s->fn->f;
  for (size_t k = 0; k < f->n_input + f->n_output; k++) {
    const char *formal = k < f->n_input ? f->input[k] : f->output[k - f->n_input];
    if (formal && !strcmp(formal, name)) return s->actual[k];
  }
  size_t lp = strlen(s->prefix), ln = strlen(name);
  char *r = alma__arena_alloc(c->tmp, lp + ln + 1);
  if (!r) return NULL;
  memcpy(r, s->prefix, lp);
  memcpy(r + lp, name, ln + 1);
  return r;
}

static alma_status rename_all(inl_ctx *c, const scope *s, char **names, size_t n, char ***out) {
  *out = alma__arena_alloc(c->tmp, (n + 1) * sizeof(char *));
  if (!*out) return oom();
  for (size_t k = 0; k < n; k++)
    if (!((*out)[k] = (char *)rename_value(c, s, names[k]))) return oom();
  return ALMA_OK;
}

/* The body's opset for domain d must be the model's: added when the model lacks it. */
static alma_status check_opset(inl_ctx *c, const scope *s, const Onnx__NodeProto *np) {
  if (!s) return ALMA_OK;
  const Onnx__FunctionProto *f = s->fn->f;
  int64_t fv = -1;
  for (size_t i = 0; i < f->n_opset_import; i++)
    if (same_domain(str_or_empty(f->opset_import[i]->domain), np->domain)) fv = f->opset_import[i]->version;
  if (fv < 0) return ALMA_OK; /* the function names no version: the model's applies */
  alma_graph *g = c->g;
  for (int i = 0; i < g->n_opsets; i++) {
    if (!same_domain(g->opsets[i].domain, np->domain)) continue;
    if (g->opsets[i].version == fv) return ALMA_OK;
    return alma__errorf(ALMA_ERR_UNSUPPORTED,
                        "function '%s' (domain '%s') imports opset %lld of domain '%s' but the model imports %lld: "
                        "alma runs one opset per domain",
                        str_or_empty(f->name), str_or_empty(f->domain), (long long)fv, str_or_empty(np->domain),
                        (long long)g->opsets[i].version);
  }
  alma_opset_import *ops = alma__arena_alloc(g->arena, (size_t)(g->n_opsets + 2) * sizeof *ops);
  if (!ops) return oom();
  if (g->n_opsets) memcpy(ops, g->opsets, (size_t)g->n_opsets * sizeof *ops);
  ops[g->n_opsets].domain = alma__arena_strdup(g->arena, str_or_empty(np->domain));
  ops[g->n_opsets].version = fv;
  if (!ops[g->n_opsets].domain) return oom();
  g->opsets = ops;
  g->n_opsets++;
  return ALMA_OK;
}

static alma_status expand_nodes(inl_ctx *c, const scope *s, Onnx__NodeProto *const *nodes, size_t n_nodes,
                                Onnx__NodeProto ***out, size_t *n_out, size_t *cap);

/* A copy of subgraph gp with every name renamed for scope s and its calls expanded. */
static alma_status expand_graph(inl_ctx *c, const scope *s, const Onnx__GraphProto *gp, Onnx__GraphProto **out) {
  if (++c->graph_depth > 64) /* parse_graph's own limit, met here first */
    return alma__errorf(ALMA_ERR_INVALID_MODEL, "subgraphs nested more than 64 deep");
  Onnx__GraphProto *ng = alma__arena_alloc(c->tmp, sizeof *ng);
  if (!ng) return oom();
  *ng = *gp;
  ng->n_value_info = 0; /* parse_graph does not read it */
  ng->value_info = NULL;
  if (s) {
    ng->initializer = alma__arena_alloc(c->tmp, (gp->n_initializer + 1) * sizeof(Onnx__TensorProto *));
    ng->input = alma__arena_alloc(c->tmp, (gp->n_input + 1) * sizeof(Onnx__ValueInfoProto *));
    ng->output = alma__arena_alloc(c->tmp, (gp->n_output + 1) * sizeof(Onnx__ValueInfoProto *));
    if (!ng->initializer || !ng->input || !ng->output) return oom();
    for (size_t i = 0; i < gp->n_initializer; i++) {
      Onnx__TensorProto *t = alma__arena_alloc(c->tmp, sizeof *t);
      if (!t) return oom();
      *t = *gp->initializer[i];
      if (!(t->name = (char *)rename_value(c, s, t->name)) && gp->initializer[i]->name) return oom();
      ng->initializer[i] = t;
    }
    for (size_t io = 0; io < 2; io++) {
      size_t n = io ? gp->n_output : gp->n_input;
      Onnx__ValueInfoProto **src = io ? gp->output : gp->input, **dst = io ? ng->output : ng->input;
      for (size_t i = 0; i < n; i++) {
        Onnx__ValueInfoProto *v = alma__arena_alloc(c->tmp, sizeof *v);
        if (!v) return oom();
        *v = *src[i];
        if (!(v->name = (char *)rename_value(c, s, v->name)) && src[i]->name) return oom();
        dst[i] = v;
      }
    }
  }
  size_t cap = 0;
  ng->n_node = 0;
  ng->node = NULL;
  *out = ng;
  ALMA_TRY(expand_nodes(c, s, gp->node, gp->n_node, &ng->node, &ng->n_node, &cap));
  c->graph_depth--;
  return ALMA_OK;
}

/* Resolves a node's attributes in scope s: references replaced, subgraphs expanded. */
static alma_status resolve_attrs(inl_ctx *c, const scope *s, const Onnx__NodeProto *np, Onnx__AttributeProto ***out,
                                 size_t *n_out) {
  *n_out = 0;
  *out = alma__arena_alloc(c->tmp, (np->n_attribute + 1) * sizeof(Onnx__AttributeProto *));
  if (!*out) return oom();
  for (size_t k = 0; k < np->n_attribute; k++) {
    const Onnx__AttributeProto *ap = np->attribute[k];
    const Onnx__AttributeProto *src = ap;
    if (ap->ref_attr_name && ap->ref_attr_name[0]) {
      if (!s)
        return alma__errorf(ALMA_ERR_INVALID_MODEL, "node '%s': attribute '%s' refers to '%s' outside any function",
                            str_or_empty(np->name), str_or_empty(ap->name), ap->ref_attr_name);
      src = NULL;
      for (size_t q = 0; q < s->n_call_attrs && !src; q++)
        if (s->call_attrs[q]->name && !strcmp(s->call_attrs[q]->name, ap->ref_attr_name)) src = s->call_attrs[q];
      for (size_t q = 0; q < s->fn->n_defaults && !src; q++)
        if (s->fn->defaults[q]->name && !strcmp(s->fn->defaults[q]->name, ap->ref_attr_name)) src = s->fn->defaults[q];
      if (!src) continue; /* neither given nor defaulted: the attribute is absent */
    }
    Onnx__AttributeProto *na = alma__arena_alloc(c->tmp, sizeof *na);
    if (!na) return oom();
    *na = *src;
    na->name = ap->name;
    na->ref_attr_name = NULL;
    if (src->g) ALMA_TRY(expand_graph(c, src == ap ? s : NULL, src->g, &na->g));
    if (src->n_graphs) {
      na->graphs = alma__arena_alloc(c->tmp, src->n_graphs * sizeof(Onnx__GraphProto *));
      if (!na->graphs) return oom();
      for (size_t q = 0; q < src->n_graphs; q++) ALMA_TRY(expand_graph(c, src == ap ? s : NULL, src->graphs[q], &na->graphs[q]));
    }
    (*out)[(*n_out)++] = na;
  }
  return ALMA_OK;
}

static alma_status push_node(inl_ctx *c, Onnx__NodeProto *np, Onnx__NodeProto ***out, size_t *n_out, size_t *cap) {
  if (*n_out == *cap) {
    size_t nc = *cap ? 2 * *cap : 64;
    Onnx__NodeProto **nn = alma__arena_alloc(c->tmp, nc * sizeof *nn);
    if (!nn) return oom();
    if (*n_out) memcpy(nn, *out, *n_out * sizeof *nn);
    *out = nn;
    *cap = nc;
  }
  (*out)[(*n_out)++] = np;
  return ALMA_OK;
}

static alma_status expand_call(inl_ctx *c, const scope *s, const Onnx__NodeProto *np, const fn_info *fi,
                               const char *nname, Onnx__NodeProto ***out, size_t *n_out, size_t *cap) {
  const Onnx__FunctionProto *f = fi->f;
  if (++c->depth > 64)
    return alma__errorf(ALMA_ERR_INVALID_MODEL, "node '%s': function '%s' calls nest more than 64 deep (recursive?)",
                        nname, str_or_empty(f->name));
  if (np->n_input > f->n_input || np->n_output > f->n_output)
    return alma__errorf(ALMA_ERR_INVALID_MODEL, "node '%s': %zu inputs and %zu outputs for function '%s' of %zu and %zu",
                        nname, np->n_input, np->n_output, str_or_empty(f->name), f->n_input, f->n_output);
  scope in = {.fn = fi};
  const char *outer = s ? s->prefix : "";
  size_t lp = strlen(outer) + strlen(nname) + 2;
  char *prefix = alma__arena_alloc(c->tmp, lp);
  if (!prefix) return oom();
  snprintf(prefix, lp, "%s%s/", outer, nname);
  in.prefix = prefix;
  in.actual = alma__arena_alloc(c->tmp, (f->n_input + f->n_output + 1) * sizeof(char *));
  if (!in.actual) return oom();
  for (size_t k = 0; k < f->n_input; k++) {
    in.actual[k] = k < np->n_input ? rename_value(c, s, np->input[k]) : "";
    if (!in.actual[k]) return oom();
  }
  for (size_t k = 0; k < f->n_output; k++) {
    const char *a = k < np->n_output ? rename_value(c, s, np->output[k]) : "";
    if (!a) return oom();
    if (!a[0]) { /* an output the caller does not take: a private name, as any intermediate */
      size_t l = strlen(prefix) + strlen(str_or_empty(f->output[k])) + 1;
      char *p = alma__arena_alloc(c->tmp, l);
      if (!p) return oom();
      snprintf(p, l, "%s%s", prefix, str_or_empty(f->output[k]));
      a = p;
    }
    in.actual[f->n_input + k] = a;
  }
  ALMA_TRY(resolve_attrs(c, s, np, &in.call_attrs, &in.n_call_attrs));
  ALMA_TRY(expand_nodes(c, &in, f->node, f->n_node, out, n_out, cap));
  c->depth--;
  return ALMA_OK;
}

static alma_status expand_nodes(inl_ctx *c, const scope *s, Onnx__NodeProto *const *nodes, size_t n_nodes,
                                Onnx__NodeProto ***out, size_t *n_out, size_t *cap) {
  for (size_t i = 0; i < n_nodes; i++) {
    const Onnx__NodeProto *np = nodes[i];
    char autoname[160];
    const char *nname = np->name && np->name[0]
                            ? np->name
                            : (snprintf(autoname, sizeof autoname, "%.100s_%zu", str_or_empty(np->op_type), i), autoname);
    const char *overload = unknown_string(c, &np->base, NODE_OVERLOAD);
    if (!overload) return oom();
    const fn_info *fi = find_function(c, np, overload);
    if (fi) {
      ALMA_TRY(expand_call(c, s, np, fi, nname, out, n_out, cap));
      continue;
    }
    Onnx__NodeProto *nn = alma__arena_alloc(c->tmp, sizeof *nn);
    if (!nn) return oom();
    *nn = *np;
    if (s) {
      ALMA_TRY(check_opset(c, s, np));
      nn->name = (char *)rename_value(c, s, nname);
      if (!nn->name) return oom();
      ALMA_TRY(rename_all(c, s, np->input, np->n_input, &nn->input));
      ALMA_TRY(rename_all(c, s, np->output, np->n_output, &nn->output));
    }
    ALMA_TRY(resolve_attrs(c, s, np, &nn->attribute, &nn->n_attribute));
    ALMA_TRY(push_node(c, nn, out, n_out, cap));
  }
  return ALMA_OK;
}

alma_status alma__onnx_inline_functions(const Onnx__ModelProto *mp, alma_graph *g, alma_arena *tmp,
                                        const Onnx__GraphProto **out) {
  *out = mp->graph;
  if (!mp->n_functions) return ALMA_OK;
  inl_ctx c = {.tmp = tmp, .g = g, .n_fns = mp->n_functions};
  c.alloc = (ProtobufCAllocator){.alloc = tmp_alloc, .free = tmp_free, .allocator_data = tmp};
  c.fns = alma__arena_alloc(tmp, mp->n_functions * sizeof *c.fns);
  if (!c.fns) return oom();
  for (size_t i = 0; i < mp->n_functions; i++) {
    fn_info *fi = &c.fns[i];
    const Onnx__FunctionProto *f = mp->functions[i];
    fi->f = f;
    if (!f->name || !f->name[0]) return alma__errorf(ALMA_ERR_INVALID_MODEL, "model-local function %zu has no name", i);
    fi->overload = unknown_string(&c, &f->base, FUNCTION_OVERLOAD);
    if (!fi->overload) return oom();
    for (unsigned u = 0; u < f->base.n_unknown_fields; u++)
      fi->n_defaults += f->base.unknown_fields[u].tag == FUNCTION_ATTRIBUTE_PROTO;
    fi->defaults = alma__arena_alloc(tmp, (fi->n_defaults + 1) * sizeof(Onnx__AttributeProto *));
    if (!fi->defaults) return oom();
    fi->n_defaults = 0;
    for (unsigned u = 0; u < f->base.n_unknown_fields; u++) {
      const ProtobufCMessageUnknownField *uf = &f->base.unknown_fields[u];
      if (uf->tag != FUNCTION_ATTRIBUTE_PROTO) continue;
      const uint8_t *p;
      size_t n;
      if (unknown_payload(uf, &p, &n))
        ALMA_TRY(alma__pb_check_nesting(&onnx__attribute_proto__descriptor, p, n, ALMA_ONNX_MAX_NESTING,
                                        "a function's default attribute"));
      Onnx__AttributeProto *ap = unknown_payload(uf, &p, &n) ? onnx__attribute_proto__unpack(&c.alloc, n, p) : NULL;
      if (!ap)
        return alma__errorf(ALMA_ERR_INVALID_MODEL, "function '%s': a default attribute does not parse", f->name);
      fi->defaults[fi->n_defaults++] = ap;
    }
    for (size_t j = 0; j < i; j++)
      if (!strcmp(c.fns[j].f->name, f->name) && same_domain(str_or_empty(c.fns[j].f->domain), str_or_empty(f->domain)) &&
          !strcmp(c.fns[j].overload, fi->overload))
        return alma__errorf(ALMA_ERR_INVALID_MODEL, "model-local function '%s' (domain '%s') is defined twice", f->name,
                            str_or_empty(f->domain));
  }
  Onnx__GraphProto *ng = NULL;
  ALMA_TRY(expand_graph(&c, NULL, mp->graph, &ng));
  *out = ng;
  return ALMA_OK;
}
