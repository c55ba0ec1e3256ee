/* alma_session: a model's graph converted by a chain of passes and compiled for one runtime. */
#include "conversions/conversions.h"
#include "graph/model.h"
#include "runtimes/session.h"

struct alma_session {
  alma_conversion conv;
  alma_graph *graph;     /* private copy after passes */
  const alma_model *model;
  void *plan;
  int plan_pending; /* verbose: the plan is printed after the first run, when it names the kernels */
};

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
  return rt->profile_start(s->plan);
}

alma_status alma__session_profile_read(alma_session *s, alma__prof_node *nodes) {
  if (!s || !nodes) return alma__errorf(ALMA_ERR_INVALID_ARG, "session or nodes is NULL");
  const alma_runtime *rt = s->conv.runtime;
  if (!rt->profile_read) return alma__errorf(ALMA_ERR_UNSUPPORTED, "the %s runtime has no per-node profile", rt->name);
  return rt->profile_read(s->plan, nodes);
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
  if (st == ALMA_OK) {
    alma_runtime_opts ropts = {.threads = opts->threads > 0 ? opts->threads : 1, .verbose = opts->verbose};
    st = s->conv.runtime->compile(s->graph, &ropts, &s->plan);
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
