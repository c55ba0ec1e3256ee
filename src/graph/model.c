/* alma_model: loading, accessors, hash, summary. */
#include <libgen.h>

#include "graph/model.h"

alma_status alma_model_load_from_memory(const void *bytes, size_t n, const char *base_dir, alma_model **model_out) {
  if (!model_out) return alma__errorf(ALMA_ERR_INVALID_ARG, "model_out is NULL");
  *model_out = NULL;
  if (!bytes && n) return alma__errorf(ALMA_ERR_INVALID_ARG, "bytes is NULL");
  alma__error_clear();
  alma_model *m = calloc(1, sizeof *m);
  if (!m) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  alma_status st = alma__onnx_parse_model(bytes, n, base_dir, &m->graph, &m->meta);
  if (st == ALMA_OK) st = alma__graph_resolve_ops(m->graph);
  if (st == ALMA_OK) {
    int64_t opset = alma__graph_opset(m->graph, "");
    if (opset > ALMA_MAX_KNOWN_OPSET)
      ALMA_LOGW("the model uses opset %lld; alma knows operator changes up to opset %d", (long long)opset,
                ALMA_MAX_KNOWN_OPSET);
    /* Validates every node's attributes, dtypes and shapes now, so unsupported features fail at
     * load rather than at run time. */
    alma_infer_result r;
    st = alma__graph_infer(m->graph, NULL, 1, 1 << 16, &r);
    alma__infer_result_free(&r);
  }
  if (st != ALMA_OK) {
    alma_model_free(m);
    return st;
  }
  alma__graph_hash(m->graph, m->hash);
  *model_out = m;
  return ALMA_OK;
}

alma_status alma_model_load(const char *path, alma_model **model_out) {
  if (!model_out) return alma__errorf(ALMA_ERR_INVALID_ARG, "model_out is NULL");
  *model_out = NULL;
  if (!path) return alma__errorf(ALMA_ERR_INVALID_ARG, "model path is NULL");
  uint8_t *bytes;
  size_t n;
  ALMA_TRY(alma__read_file(path, &bytes, &n));
  char *dir_copy = alma__strdup(path);
  if (!dir_copy) {
    free(bytes);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  alma_status st = alma_model_load_from_memory(bytes, n, dirname(dir_copy), model_out);
  free(dir_copy);
  free(bytes);
  if (st != ALMA_OK) return alma__error_prefix(st, "loading '%s': ", path);
  (*model_out)->path = alma__strdup(path);
  return ALMA_OK;
}

void alma_model_free(alma_model *m) {
  if (!m) return;
  alma__graph_free(m->graph);
  free(m->path);
  free(m->sum_ops);
  free(m->sum_counts);
  free(m->sum_domains);
  free(m->sum_domain_versions);
  free(m);
}

static const alma_value *in_val(const alma_model *m, int i) {
  return m && i >= 0 && i < m->graph->n_inputs ? &m->graph->values[m->graph->inputs[i]] : NULL;
}
static const alma_value *out_val(const alma_model *m, int i) {
  return m && i >= 0 && i < m->graph->n_outputs ? &m->graph->values[m->graph->outputs[i]] : NULL;
}

int alma_model_num_inputs(const alma_model *m) { return m ? m->graph->n_inputs : 0; }
int alma_model_num_outputs(const alma_model *m) { return m ? m->graph->n_outputs : 0; }
const char *alma_model_input_name(const alma_model *m, int i) { return in_val(m, i) ? in_val(m, i)->name : NULL; }
const char *alma_model_output_name(const alma_model *m, int i) { return out_val(m, i) ? out_val(m, i)->name : NULL; }
alma_dtype alma_model_input_dtype(const alma_model *m, int i) { return in_val(m, i) ? in_val(m, i)->dtype : ALMA_DTYPE_UNDEFINED; }
alma_dtype alma_model_output_dtype(const alma_model *m, int i) { return out_val(m, i) ? out_val(m, i)->dtype : ALMA_DTYPE_UNDEFINED; }
/* A sequence/optional (dtype "sequence"/"optional") has no one shape: -1. */
static int api_rank(const alma_value *v) { return !v || alma__dtype_is_container(v->dtype) ? -1 : v->rank; }
int alma_model_input_rank(const alma_model *m, int i) { return api_rank(in_val(m, i)); }
int alma_model_output_rank(const alma_model *m, int i) { return api_rank(out_val(m, i)); }
int64_t alma_model_input_dim(const alma_model *m, int i, int axis) {
  const alma_value *v = in_val(m, i);
  return v && axis >= 0 && axis < v->rank ? v->dims[axis] : -1;
}
int64_t alma_model_output_dim(const alma_model *m, int i, int axis) {
  const alma_value *v = out_val(m, i);
  return v && axis >= 0 && axis < v->rank ? v->dims[axis] : -1;
}
const char *alma_model_input_dim_param(const alma_model *m, int i, int axis) {
  const alma_value *v = in_val(m, i);
  return v && axis >= 0 && axis < v->rank ? v->dim_params[axis] : NULL;
}
const char *alma_model_output_dim_param(const alma_model *m, int i, int axis) {
  const alma_value *v = out_val(m, i);
  return v && axis >= 0 && axis < v->rank ? v->dim_params[axis] : NULL;
}

const char *alma_model_hash(const alma_model *m) { return m ? m->hash : ""; }

/* ---- hash -------------------------------------------------------------------------------------
 * Values are named canonically: graph input #i, initializer by content, node output (node #,
 * slot). Nodes are visited in topological order, which is deterministic for a given graph. */
static void hash_str(alma_sha256 *s, const char *str) {
  uint64_t n = str ? strlen(str) : 0;
  alma__sha256_update(s, &n, sizeof n);
  if (n) alma__sha256_update(s, str, n);
}

static void hash_tensor(alma_sha256 *s, const alma_tensor *t) {
  int32_t hdr[2] = {(int32_t)t->dtype, t->rank};
  alma__sha256_update(s, hdr, sizeof hdr);
  alma__sha256_update(s, t->dims, sizeof(int64_t) * (size_t)t->rank);
  alma__sha256_update(s, t->data, t->nbytes);
}

static void hash_graph(alma_sha256 *s, const alma_graph *g);

static void hash_value_ref(alma_sha256 *s, const alma_graph *g, int v) {
  int64_t tag[3] = {0, 0, 0};
  if (v < 0) {
    tag[0] = 1;
    alma__sha256_update(s, tag, sizeof tag);
    return;
  }
  const alma_value *val = &g->values[v];
  if (val->init) {
    tag[0] = 2;
    alma__sha256_update(s, tag, sizeof tag);
    hash_tensor(s, val->init);
    return;
  }
  if (val->is_outer) {
    tag[0] = 3;
    alma__sha256_update(s, tag, sizeof tag);
    hash_str(s, val->name); /* outer names bind across scopes, so they are part of the structure */
    return;
  }
  if (val->is_input) {
    for (int i = 0; i < g->n_inputs; i++)
      if (g->inputs[i] == v) tag[1] = i;
    tag[0] = 4;
  } else if (val->producer >= 0) {
    const alma_node *p = &g->nodes[val->producer];
    tag[0] = 5;
    tag[1] = val->producer;
    for (int k = 0; k < p->n_outputs; k++)
      if (p->outputs[k] == v) tag[2] = k;
  }
  alma__sha256_update(s, tag, sizeof tag);
}

static void hash_graph(alma_sha256 *s, const alma_graph *g) {
  int32_t counts[3] = {g->n_inputs, g->n_nodes, g->n_outputs};
  alma__sha256_update(s, counts, sizeof counts);
  for (int i = 0; i < g->n_inputs; i++) {
    const alma_value *v = &g->values[g->inputs[i]];
    int32_t hdr[2] = {(int32_t)v->dtype, v->rank};
    alma__sha256_update(s, hdr, sizeof hdr);
    if (v->rank > 0) alma__sha256_update(s, v->dims, sizeof(int64_t) * (size_t)v->rank);
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    hash_str(s, n->op_type);
    hash_str(s, n->domain);
    int32_t hdr[3] = {n->since_version, n->n_inputs, n->n_outputs};
    alma__sha256_update(s, hdr, sizeof hdr);
    for (int k = 0; k < n->n_inputs; k++) hash_value_ref(s, g, n->inputs[k]);
    for (int k = 0; k < n->n_outputs; k++) {
      int32_t present = n->outputs[k] >= 0;
      alma__sha256_update(s, &present, sizeof present);
    }
    /* attributes in name order */
    const alma_attr *sorted[256];
    int na = n->n_attrs < 256 ? n->n_attrs : 256;
    for (int a = 0; a < na; a++) sorted[a] = &n->attrs[a];
    for (int a = 1; a < na; a++)
      for (int b = a; b > 0 && strcmp(sorted[b - 1]->name, sorted[b]->name) > 0; b--) {
        const alma_attr *t = sorted[b];
        sorted[b] = sorted[b - 1];
        sorted[b - 1] = t;
      }
    for (int a = 0; a < na; a++) {
      const alma_attr *at = sorted[a];
      hash_str(s, at->name);
      int32_t ty[2] = {(int32_t)at->type, at->n};
      alma__sha256_update(s, ty, sizeof ty);
      switch (at->type) {
        case ALMA_ATTR_FLOAT: alma__sha256_update(s, &at->f, sizeof at->f); break;
        case ALMA_ATTR_INT: alma__sha256_update(s, &at->i, sizeof at->i); break;
        case ALMA_ATTR_STRING: alma__sha256_update(s, at->s, at->s_len); break;
        case ALMA_ATTR_TENSOR: hash_tensor(s, at->t); break;
        case ALMA_ATTR_GRAPH: hash_graph(s, at->g); break;
        case ALMA_ATTR_FLOATS: alma__sha256_update(s, at->floats, sizeof(float) * (size_t)at->n); break;
        case ALMA_ATTR_INTS: alma__sha256_update(s, at->ints, sizeof(int64_t) * (size_t)at->n); break;
        case ALMA_ATTR_STRINGS: for (int k = 0; k < at->n; k++) hash_str(s, at->strings[k]); break;
        case ALMA_ATTR_TENSORS: for (int k = 0; k < at->n; k++) hash_tensor(s, &at->tensors[k]); break;
        case ALMA_ATTR_GRAPHS: for (int k = 0; k < at->n; k++) hash_graph(s, at->graphs[k]); break;
        default: break;
      }
    }
  }
  for (int i = 0; i < g->n_outputs; i++) hash_value_ref(s, g, g->outputs[i]);
}

void alma__graph_hash(const alma_graph *g, char hex_out[65]) {
  alma_sha256 *s = alma__sha256_new();
  if (!s) {
    strcpy(hex_out, "");
    return;
  }
  hash_graph(s, g);
  alma__sha256_final(s, hex_out);
}

/* ---- summary ------------------------------------------------------------------------------------ */
alma_status alma_model_summarize(alma_model *m, const alma_model_summary **summary_out) {
  if (!m || !summary_out) return alma__errorf(ALMA_ERR_INVALID_ARG, "model or summary_out is NULL");
  if (m->has_summary) {
    *summary_out = &m->summary;
    return ALMA_OK;
  }
  const alma_graph *g = m->graph;
  alma_model_summary *s = &m->summary;
  memset(s, 0, sizeof *s);
  s->opset = alma__graph_opset(g, "");
  s->producer_name = m->meta.producer_name;
  s->producer_version = m->meta.producer_version;
  s->n_nodes = g->n_nodes;
  for (int v = 0; v < g->n_values; v++) {
    const alma_tensor *t = g->values[v].init;
    if (!t) continue;
    s->n_params += alma_tensor_numel(t);
    s->param_bytes += (int64_t)t->nbytes;
  }
  /* Weights written as Constant nodes (tf2onnx, paddle2onnx and some torch exports) are parameters
   * as much as initializers are. */
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *nd = &g->nodes[i];
    const alma_attr *a = !nd->domain[0] && !strcmp(nd->op_type, "Constant") ? alma__node_attr(nd, "value") : NULL;
    if (!a || a->type != ALMA_ATTR_TENSOR || !a->t) continue;
    s->n_params += alma_tensor_numel(a->t);
    s->param_bytes += (int64_t)a->t->nbytes;
  }
  m->sum_ops = calloc((size_t)g->n_nodes + 1, sizeof(char *));
  m->sum_counts = calloc((size_t)g->n_nodes + 1, sizeof(int64_t));
  if (!m->sum_ops || !m->sum_counts) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  int nt = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    int k = 0;
    while (k < nt && strcmp(m->sum_ops[k], g->nodes[i].op_type)) k++;
    if (k == nt) m->sum_ops[nt++] = g->nodes[i].op_type;
    m->sum_counts[k]++;
  }
  for (int a = 1; a < nt; a++) /* by count descending, then name */
    for (int b = a; b > 0 && (m->sum_counts[b - 1] < m->sum_counts[b] ||
                              (m->sum_counts[b - 1] == m->sum_counts[b] && strcmp(m->sum_ops[b - 1], m->sum_ops[b]) > 0));
         b--) {
      int64_t c = m->sum_counts[b];
      m->sum_counts[b] = m->sum_counts[b - 1];
      m->sum_counts[b - 1] = c;
      const char *o = m->sum_ops[b];
      m->sum_ops[b] = m->sum_ops[b - 1];
      m->sum_ops[b - 1] = o;
    }
  s->n_op_types = nt;
  s->op_types = m->sum_ops;
  m->sum_domains = calloc((size_t)g->n_opsets + 1, sizeof(char *));
  m->sum_domain_versions = calloc((size_t)g->n_opsets + 1, sizeof(int64_t));
  if (!m->sum_domains || !m->sum_domain_versions) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  int nd = 0;
  for (int pass = 0; pass < 2; pass++) /* the default domain first: it is the model's "opset" */
    for (int i = 0; i < g->n_opsets; i++) {
      const char *d = g->opsets[i].domain ? g->opsets[i].domain : "";
      int dflt = !d[0] || !strcmp(d, "ai.onnx");
      if (dflt != (pass == 0)) continue;
      m->sum_domains[nd] = dflt ? "ai.onnx" : d;
      m->sum_domain_versions[nd++] = g->opsets[i].version;
    }
  s->n_opset_imports = nd;
  s->opset_domains = m->sum_domains;
  s->opset_versions = m->sum_domain_versions;
  s->op_counts = m->sum_counts;
  alma_infer_result r;
  alma_status st = alma__graph_infer(g, NULL, 1, 1 << 16, &r);
  if (st != ALMA_OK) return st;
  s->macs = r.macs;
  s->flops = r.flops;
  s->planned_peak_bytes = alma__memory_plan_peak(g, &r);
  alma__infer_result_free(&r);
  m->has_summary = 1;
  *summary_out = s;
  return ALMA_OK;
}
