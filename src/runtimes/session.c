/* alma_session: a model's graph converted by a chain of passes and compiled for one runtime. */
#include "conversions/conversions.h"
#include "graph/infer.h"
#include "graph/model.h"
#include "runtimes/exec.h"
#include "runtimes/session.h"

/* An If branch compiled for the session's runtime. Without it a branch runs on EAGER's kernels
 * whatever the runtime (the runtimes compile one graph; subgraphs go through the shared executor),
 * so a model that is one big If - the merged decoders of Hugging Face Optimum, whose
 * use_cache_branch chooses between the prefill and the KV-cache decoder - ran on EAGER under every
 * conversion. The branch becomes a graph of its own (its outer-scope names its inputs, constant
 * ones initializers), which the conversion's passes convert and the runtime compiles. */
typedef struct alma__subplan {
  alma_graph *g;            /* the branch as a standalone graph */
  const alma_runtime *rt;
  void *plan;
  const char *label;        /* "branch 'then_branch' of If 'node'" (g's arena) */
  int plan_pending;         /* verbose: printed after its first run */
  /* for the profile: the graph holding the If (the session's or another branch's) and its index
   * there; the path before the branch's node names ("If/then_branch/", malloc'd) */
  const alma_graph *parent_g;
  int parent_node;
  char *prefix;
  struct alma__subplan *next;
} alma__subplan;

struct alma_session {
  alma_conversion conv;
  alma_graph *graph;     /* private copy after passes */
  const alma_model *model;
  void *plan;
  int plan_pending; /* verbose: the plan is printed after the first run, when it names the kernels */
  alma__subplan *subplans;
};

static void print_subplan(alma__subplan *sp, const char *when) {
  if (!sp->plan_pending) return;
  sp->plan_pending = 0;
  fprintf(stderr, "plan for %s (%d nodes%s):\n", sp->label, sp->g->n_nodes, when);
  sp->rt->describe(sp->plan, stderr);
}

alma_status alma__subplan_run(alma__subplan *sp, alma_exec_ctx *ctx, alma_tensor *outputs, int n_outputs) {
  const alma_graph *g = sp->g;
  if (n_outputs != g->n_outputs)
    return alma__errorf(ALMA_ERR_INTERNAL, "%s: %d outputs asked for, it has %d", sp->label, n_outputs, g->n_outputs);
  alma_tensor stack[16], *in = g->n_inputs <= 16 ? stack : malloc(sizeof(alma_tensor) * (size_t)g->n_inputs);
  if (!in) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  alma_status st = ALMA_OK;
  for (int i = 0; i < g->n_inputs && st == ALMA_OK; i++) {
    const alma_value *v = &g->values[g->inputs[i]];
    const alma_tensor *t = alma__exec_lookup_outer(ctx, v->name);
    if (!t) st = alma__errorf(ALMA_ERR_INTERNAL, "%s: outer value '%s' has no value", sp->label, v->name);
    else in[i] = alma__tensor_view(t);
  }
  if (st == ALMA_OK) {
    for (int i = 0; i < n_outputs; i++) memset(&outputs[i], 0, sizeof outputs[i]);
    st = sp->rt->run(sp->plan, in, g->n_inputs, outputs, n_outputs);
    if (st == ALMA_OK && sp->rt->synchronize) st = sp->rt->synchronize(sp->plan);
    if (st != ALMA_OK)
      for (int i = 0; i < n_outputs; i++) alma_tensor_free_data(&outputs[i]);
    print_subplan(sp, st == ALMA_OK ? ", after its first run" : ", first run failed");
  }
  if (in != stack) free(in);
  return st;
}

/* The branch's inputs that g computes get the types static inference gives them (runtimes plan with
 * them: XNNPACK takes nothing whose shape it cannot infer); a dim that differs between symbolic dims
 * bound to 2 and to 3 stays unknown. Inference failing leaves them untyped, as the model had them. */
static void type_branch_inputs(const alma_graph *g, const alma_infer_result *r2, const alma_infer_result *r3,
                               alma_graph *sg) {
  for (int i = 0; i < sg->n_inputs; i++) {
    alma_value *val = &sg->values[sg->inputs[i]];
    int u = alma__graph_find_value(g, val->name);
    if (val->rank >= 0 || u < 0 || u >= r2->n_values || u >= r3->n_values) continue;
    const alma_tensor *a = &r2->info[u], *b = &r3->info[u];
    if (a->rank < 0 || a->rank != b->rank || a->dtype != b->dtype) continue;
    val->dtype = a->dtype;
    val->rank = a->rank;
    for (int k = 0; k < ALMA_MAX_RANK; k++) val->dims[k] = k < a->rank ? (a->dims[k] == b->dims[k] ? a->dims[k] : ALMA_DIM_UNKNOWN) : 0;
    if (alma__dtype_is_container(a->dtype)) val->dims[0] = a->dims[0], val->dims[1] = a->dims[1];
  }
}

/* Compiles the then/else branches of g's If nodes (and, through the branches' own graphs, nested
 * ones) for the session's runtime. A branch its runtime cannot take stays on EAGER's walk, as
 * before, with the reason logged. */
static alma_status outline_ifs(alma_session *s, alma_graph *g, const char *prefix, const alma_pass_opts *popts,
                               const alma_runtime_opts *ropts) {
  alma_infer_result r2 = {0}, r3 = {0};
  int inferred = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    if (strcmp(n->op_type, "If") || n->domain[0]) continue;
    if (!inferred) {
      inferred = 1;
      if (alma__graph_infer(g, NULL, 2, 1 << 16, &r2) != ALMA_OK || alma__graph_infer(g, NULL, 3, 1 << 16, &r3) != ALMA_OK) {
        alma__infer_result_free(&r2);
        alma__infer_result_free(&r3);
        memset(&r2, 0, sizeof r2);
        memset(&r3, 0, sizeof r3);
        alma__error_clear();
      }
    }
    for (int a = 0; a < n->n_attrs; a++) {
      alma_graph *b = n->attrs[a].type == ALMA_ATTR_GRAPH ? n->attrs[a].g : NULL;
      if (!b || b->subplan) continue;
      alma__subplan *sp = calloc(1, sizeof *sp);
      if (!sp) {
        alma__infer_result_free(&r2);
        alma__infer_result_free(&r3);
        return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      }
      /* the session owns it from here: a converted branch written back below may hold views of
       * constants the passes made in sp->g, so sp->g lives as long as the session */
      sp->rt = s->conv.runtime;
      sp->next = s->subplans;
      s->subplans = sp;
      sp->parent_g = g;
      sp->parent_node = i;
      size_t plen = strlen(prefix) + strlen(n->name) + strlen(n->attrs[a].name) + 32;
      if (!(sp->prefix = malloc(plen))) {
        alma__infer_result_free(&r2);
        alma__infer_result_free(&r3);
        return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      }
      if (n->name[0]) snprintf(sp->prefix, plen, "%s%s/%s/", prefix, n->name, n->attrs[a].name);
      else snprintf(sp->prefix, plen, "%sIf#%d/%s/", prefix, i, n->attrs[a].name);
      alma_status st = alma__graph_clone_standalone(b, &sp->g);
      if (st == ALMA_OK && r2.info && r3.info) type_branch_inputs(g, &r2, &r3, sp->g);
      if (st == ALMA_OK) {
        char *label = alma__arena_alloc(sp->g->arena, 64 + strlen(n->attrs[a].name) + strlen(n->name));
        if (label) sprintf(label, "branch '%s' of If '%s'", n->attrs[a].name, n->name);
        sp->label = label ? label : "an If branch";
      }
      for (int k = 0; st == ALMA_OK && k < s->conv.n_passes; k++) {
        st = s->conv.passes[k]->run(sp->g, popts);
        if (st != ALMA_OK) alma__error_prefix(st, "pass %s: ", s->conv.passes[k]->name);
      }
      if (st == ALMA_OK) st = outline_ifs(s, sp->g, sp->prefix, popts, ropts);
      /* The converted branch goes back into the session's graph, which the build cache stores and
       * --save-converted writes: a cache hit (no passes) then finds it converted. */
      alma_graph *conv_b = NULL;
      if (st == ALMA_OK && s->conv.n_passes && (st = alma__graph_clone_into(sp->g, g, &conv_b)) == ALMA_OK) {
        alma__graph_free(b);
        n->attrs[a].g = b = conv_b;
      }
      if (st == ALMA_OK) st = sp->rt->compile(sp->g, ropts, &sp->plan);
      if (st != ALMA_OK) {
        if (sp->plan) sp->rt->free(sp->plan);
        sp->plan = NULL;
        if (st == ALMA_ERR_NOMEM) {
          alma__infer_result_free(&r2);
          alma__infer_result_free(&r3);
          return st;
        }
        ALMA_LOGI("%s: branch '%s' of If '%s' runs on EAGER's kernels: %s", s->conv.name, n->attrs[a].name, n->name,
                  alma_last_error());
        alma__error_clear();
        continue;
      }
      sp->plan_pending = ropts->verbose && sp->rt->describe;
      b->subplan = sp;
    }
  }
  alma__infer_result_free(&r2);
  alma__infer_result_free(&r3);
  return ALMA_OK;
}

/* The verbose plan. Printed after the first run rather than at compile: runtimes that create their
 * kernels on first use (DNNL) can then say which implementation each node got and what declined. */
static void print_plan(alma_session *s, const char *when) {
  if (!s->plan_pending) return;
  s->plan_pending = 0;
  fprintf(stderr, "plan for %s (%d nodes%s):\n", s->conv.name, s->graph->n_nodes, when);
  s->conv.runtime->describe(s->plan, stderr);
}

const alma_graph *alma__session_graph(const alma_session *s) { return s ? s->graph : NULL; }
const alma_model *alma__session_model(const alma_session *s) { return s ? s->model : NULL; }

const char *alma__session_runtime_name(const alma_session *s) { return s ? s->conv.runtime->name : ""; }

alma_status alma__session_profile_start(alma_session *s) {
  if (!s) return alma__errorf(ALMA_ERR_INVALID_ARG, "session is NULL");
  const alma_runtime *rt = s->conv.runtime;
  if (!rt->profile_start || !rt->profile_read)
    return alma__errorf(ALMA_ERR_UNSUPPORTED, "the %s runtime has no per-node profile", rt->name);
  ALMA_TRY(rt->profile_start(s->plan));
  for (alma__subplan *sp = s->subplans; sp; sp = sp->next)
    if (sp->plan) ALMA_TRY(sp->rt->profile_start(sp->plan));
  return ALMA_OK;
}

void alma__prof_graphs_free(alma__prof_graph *graphs, int n) {
  for (int i = 0; graphs && i < n; i++) {
    free(graphs[i].nodes);
    free(graphs[i].prefix);
  }
  free(graphs);
}

/* Reads one plan's profile into a new entry of *v (nodes default to themselves, untimed). */
static alma_status read_graph(const alma_runtime *rt, void *plan, const alma_graph *g, const char *prefix, int parent,
                              int parent_node, alma__prof_graph *e) {
  *e = (alma__prof_graph){.g = g, .parent = parent, .parent_node = parent_node};
  e->nodes = calloc((size_t)g->n_nodes + 1, sizeof *e->nodes);
  e->prefix = alma__strdup(prefix);
  if (!e->nodes || !e->prefix) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (int i = 0; i < g->n_nodes; i++) e->nodes[i] = (alma__prof_node){.head = i, .members = 1};
  ALMA_TRY(rt->profile_read(plan, e->nodes));
  alma__placement *pl = calloc((size_t)g->n_nodes + 1, sizeof *pl);
  if (!pl) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  alma_status st = rt->placement(plan, pl);
  for (int i = 0; st == ALMA_OK && i < g->n_nodes; i++) e->nodes[i].place = pl[i];
  free(pl);
  return st;
}

/* One plan's placement into a new entry of the list. */
static alma_status place_graph(const alma_runtime *rt, void *plan, const alma_graph *g, alma__place_graph *e) {
  *e = (alma__place_graph){.g = g, .nodes = calloc((size_t)g->n_nodes + 1, sizeof *e->nodes)};
  if (!e->nodes) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  return rt->placement(plan, e->nodes);
}

alma_status alma__session_placement(alma_session *s, alma__place_graph **graphs, int *n) {
  if (!s || !graphs || !n) return alma__errorf(ALMA_ERR_INVALID_ARG, "session, graphs or n is NULL");
  *graphs = NULL;
  *n = 0;
  int cap = 1;
  for (alma__subplan *sp = s->subplans; sp; sp = sp->next) cap++;
  alma__place_graph *v = calloc((size_t)cap, sizeof *v);
  if (!v) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  int nv = 0;
  alma_status st = place_graph(s->conv.runtime, s->plan, s->graph, &v[nv++]);
  for (alma__subplan *sp = s->subplans; sp && st == ALMA_OK; sp = sp->next)
    if (sp->plan) st = place_graph(sp->rt, sp->plan, sp->g, &v[nv++]);
  if (st != ALMA_OK) {
    alma__place_graphs_free(v, nv);
    return st;
  }
  *graphs = v;
  *n = nv;
  return ALMA_OK;
}

alma_status alma__session_placement_json(alma_session *s, char **json_out) {
  alma__place_graph *graphs = NULL;
  int n = 0;
  ALMA_TRY(alma__session_placement(s, &graphs, &n));
  alma_status st = alma__placement_json(s->conv.runtime->name, graphs, n, json_out);
  alma__place_graphs_free(graphs, n);
  return st;
}

alma_status alma__session_profile_read(alma_session *s, alma__prof_graph **graphs, int *n) {
  if (!s || !graphs || !n) return alma__errorf(ALMA_ERR_INVALID_ARG, "session, graphs or n is NULL");
  *graphs = NULL;
  *n = 0;
  const alma_runtime *rt = s->conv.runtime;
  if (!rt->profile_read) return alma__errorf(ALMA_ERR_UNSUPPORTED, "the %s runtime has no per-node profile", rt->name);
  int cap = 1;
  for (alma__subplan *sp = s->subplans; sp; sp = sp->next) cap++;
  alma__prof_graph *v = calloc((size_t)cap, sizeof *v);
  if (!v) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  int nv = 0;
  alma_status st = read_graph(rt, s->plan, s->graph, "", -1, -1, &v[nv++]);
  /* Branches in an order where each parent comes before its branches (nested ones were created
   * after their parent, and the list is newest first: repeated passes pick up each level). A branch
   * whose parent is not listed (a branch that fell back to EAGER's walk) is left out: its If's
   * walk times it. */
  for (int added = 1; st == ALMA_OK && added;) {
    added = 0;
    for (alma__subplan *sp = s->subplans; sp && st == ALMA_OK; sp = sp->next) {
      if (!sp->plan) continue;
      int parent = -1, seen = 0;
      for (int k = 0; k < nv; k++) {
        if (v[k].g == sp->parent_g) parent = k;
        if (v[k].g == sp->g) seen = 1;
      }
      if (seen || parent < 0) continue;
      st = read_graph(sp->rt, sp->plan, sp->g, sp->prefix, parent, sp->parent_node, &v[nv++]);
      added = 1;
    }
  }
  if (st != ALMA_OK) {
    alma__prof_graphs_free(v, nv);
    return st;
  }
  *graphs = v;
  *n = nv;
  return ALMA_OK;
}

void alma_session_options_init(alma_session_options *o) {
  memset(o, 0, sizeof *o);
}

alma_status alma_session_create(const alma_model *m, const char *conversion, const alma_session_options *opts,
                                alma_session **session_out) {
  if (!session_out) return alma__errorf(ALMA_ERR_INVALID_ARG, "session_out is NULL");
  *session_out = NULL;
  if (!m) return alma__errorf(ALMA_ERR_INVALID_ARG, "model is NULL");
  alma_session_options dflt;
  if (!opts) {
    alma_session_options_init(&dflt);
    opts = &dflt;
  }
  ALMA_TRY(alma__rt_options_check(opts->runtime_options));
  alma_session *s = calloc(1, sizeof *s);
  if (!s) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  s->model = m;
  alma_status st = alma__conversion_parse(conversion ? conversion : "EAGER", &s->conv);
  if (st == ALMA_OK && (st = alma__conversion_available(&s->conv)) != ALMA_OK)
    alma__error_prefix(ALMA_ERR_UNAVAILABLE, "%s: ", s->conv.name), st = ALMA_ERR_UNAVAILABLE;
  if (st == ALMA_OK) st = alma__graph_clone(m->graph, &s->graph);
  alma_pass_opts popts = {.verbose = opts->verbose, .calib = opts->calibration_data,
                          .n_calib_batches = opts->n_calibration_batches, .n_inputs = m->graph->n_inputs,
                          .calibrator = opts->calibrator};
  for (int i = 0; st == ALMA_OK && i < s->conv.n_passes; i++) {
    st = s->conv.passes[i]->run(s->graph, &popts);
    if (st != ALMA_OK) alma__error_prefix(st, "pass %s: ", s->conv.passes[i]->name);
  }
  int calibrated = 0; /* INT8_STATIC's calibration data feeds the model's inputs, not a branch's */
  for (int i = 0; i < s->conv.n_passes; i++) calibrated |= s->conv.passes[i]->needs_calibration;
  if (st == ALMA_OK) {
    alma_runtime_opts ropts = {.threads = opts->threads > 0 ? opts->threads : 1, .verbose = opts->verbose,
                               .options = opts->runtime_options};
    /* a runtime that takes the whole graph as ONNX (onnx_only) runs its If branches itself */
    if (s->conv.runtime != &alma__runtime_eager && !s->conv.runtime->onnx_only && !calibrated)
      st = outline_ifs(s, s->graph, "", &popts, &ropts);
    if (st == ALMA_OK) st = s->conv.runtime->compile(s->graph, &ropts, &s->plan);
    if (st != ALMA_OK) alma__error_prefix(st, "compiling for %s: ", s->conv.runtime->name);
    else if (opts->verbose && s->conv.runtime->describe)
      s->plan_pending = 1;
  }
  if (st != ALMA_OK) {
    alma_session_free(s);
    return st;
  }
  *session_out = s;
  return ALMA_OK;
}

void alma_session_free(alma_session *s) {
  if (!s) return;
  if (s->plan) print_plan(s, ", never run");
  if (s->plan) s->conv.runtime->free(s->plan);
  for (alma__subplan *sp = s->subplans, *next; sp; sp = next) {
    next = sp->next;
    print_subplan(sp, ", never run");
    if (sp->plan) sp->rt->free(sp->plan);
    alma__graph_free(sp->g);
    free(sp->prefix);
    free(sp);
  }
  alma__graph_free(s->graph);
  free(s);
}

/* Inputs must match the declared dtype and rank, fixed dims exactly, and each symbolic name must
 * bind to one value across all inputs. */
static alma_status check_inputs(const alma_graph *g, const alma_tensor *inputs, int n) {
  if (n != g->n_inputs)
    return alma__errorf(ALMA_ERR_INVALID_ARG, "the model takes %d inputs, %d given", g->n_inputs, n);
  const char *sym_name[64];
  int64_t sym_val[64];
  int nsym = 0;
  for (int i = 0; i < n; i++) {
    const alma_value *v = &g->values[g->inputs[i]];
    const alma_tensor *t = &inputs[i];
    char want[256], got[256];
    if (v->dtype != ALMA_DTYPE_UNDEFINED && t->dtype != v->dtype)
      return alma__errorf(ALMA_ERR_TYPE, "input '%s' must be %s, got %s", v->name, alma_dtype_name(v->dtype),
                          alma_dtype_name(t->dtype));
    if (alma__dtype_is_container(t->dtype) || alma__dtype_is_container(v->dtype)) {
      char want[64], got[64];
      if (!alma__dtype_is_container(t->dtype) || !t->data)
        return alma__errorf(ALMA_ERR_TYPE, "input '%s' must be a %s, got %s", v->name,
                            alma__container_type_str(&(alma_tensor){.dtype = v->dtype, .dims = {v->dims[0], v->dims[1]}}, want, sizeof want),
                            t->data ? "a tensor" : "no data");
      /* an empty container read from a file may not know its element type */
      if (v->dtype != ALMA_DTYPE_UNDEFINED && (v->dims[0] && t->dims[0] && (v->dims[0] != t->dims[0] || v->dims[1] != t->dims[1])))
        return alma__errorf(ALMA_ERR_TYPE, "input '%s' must be a %s, got a %s", v->name,
                            alma__container_type_str(&(alma_tensor){.dtype = v->dtype, .dims = {v->dims[0], v->dims[1]}}, want, sizeof want),
                            alma__container_type_str(t, got, sizeof got));
      continue;
    }
    if (t->rank < 0 || t->rank > ALMA_MAX_RANK)
      return alma__errorf(ALMA_ERR_SHAPE, "input '%s': invalid rank %d", v->name, t->rank);
    int64_t numel = 1;
    for (int k = 0; k < t->rank; k++) {
      if (t->dims[k] < 0) return alma__errorf(ALMA_ERR_SHAPE, "input '%s': negative dimension", v->name);
      if (alma__mul_overflow_i64(numel, t->dims[k], &numel))
        return alma__errorf(ALMA_ERR_SHAPE, "input '%s': shape too large", v->name);
    }
    if (!t->data && numel > 0) return alma__errorf(ALMA_ERR_INVALID_ARG, "input '%s' has no data", v->name);
    if (t->nbytes && (uint64_t)t->nbytes < (uint64_t)numel * alma_dtype_size(t->dtype))
      return alma__errorf(ALMA_ERR_INVALID_ARG, "input '%s': buffer of %zu bytes is smaller than its shape needs", v->name,
                          t->nbytes);
    if (v->rank < 0) continue;
    int bad = t->rank != v->rank;
    for (int k = 0; !bad && k < v->rank; k++) {
      if (v->dims[k] >= 0) {
        bad = t->dims[k] != v->dims[k];
      } else if (v->dim_params[k]) {
        int s = 0;
        while (s < nsym && strcmp(sym_name[s], v->dim_params[k])) s++;
        if (s == nsym && nsym < 64) {
          sym_name[nsym] = v->dim_params[k];
          sym_val[nsym++] = t->dims[k];
        } else if (s < nsym && sym_val[s] != t->dims[k]) {
          return alma__errorf(ALMA_ERR_SHAPE, "input '%s': dimension %d ('%s') is %lld but another input bound '%s' to %lld",
                              v->name, k, v->dim_params[k], (long long)t->dims[k], v->dim_params[k], (long long)sym_val[s]);
        }
      }
    }
    if (bad) {
      int o = 0;
      o += snprintf(want + o, sizeof want - (size_t)o, "[");
      for (int k = 0; k < v->rank && o < (int)sizeof want - 32; k++) {
        if (v->dims[k] >= 0) o += snprintf(want + o, sizeof want - (size_t)o, k ? ",%lld" : "%lld", (long long)v->dims[k]);
        else o += snprintf(want + o, sizeof want - (size_t)o, k ? ",%s" : "%s", v->dim_params[k] ? v->dim_params[k] : "?");
      }
      snprintf(want + o, sizeof want - (size_t)o, "]");
      return alma__errorf(ALMA_ERR_SHAPE, "input '%s' must have shape %s, got %s", v->name, want,
                          alma__shape_str(t->rank, t->dims, got, sizeof got));
    }
  }
  return ALMA_OK;
}

alma_status alma_session_run(alma_session *s, const alma_tensor *inputs, int n_inputs, alma_tensor *outputs,
                             int n_outputs) {
  if (!s) return alma__errorf(ALMA_ERR_INVALID_ARG, "session is NULL");
  if (n_inputs && !inputs) return alma__errorf(ALMA_ERR_INVALID_ARG, "inputs is NULL");
  if (!outputs && n_outputs) return alma__errorf(ALMA_ERR_INVALID_ARG, "outputs is NULL");
  ALMA_TRY(check_inputs(s->graph, inputs, n_inputs));
  if (n_outputs != s->graph->n_outputs)
    return alma__errorf(ALMA_ERR_INVALID_ARG, "the model has %d outputs, room for %d given", s->graph->n_outputs, n_outputs);
  for (int i = 0; i < n_outputs; i++) memset(&outputs[i], 0, sizeof outputs[i]);
  alma_status st = s->conv.runtime->run(s->plan, inputs, n_inputs, outputs, n_outputs);
  if (st == ALMA_OK && s->conv.runtime->synchronize) st = s->conv.runtime->synchronize(s->plan);
  print_plan(s, st == ALMA_OK ? ", after the first run" : ", first run failed");
  return st;
}

alma_status alma__session_runtime_info(alma_session *s, char *buf, size_t n) {
  if (n) buf[0] = 0;
  if (!s || !s->plan || !s->conv.runtime->info) return ALMA_OK;
  return s->conv.runtime->info(s->plan, buf, n);
}
