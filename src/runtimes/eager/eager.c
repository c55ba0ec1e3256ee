/* EAGER: the reference runtime. Runs nodes in topological order with the reference kernels,
 * inferring each node's output shapes from its actual inputs, freeing every intermediate after its
 * last use. Single-threaded by design: it is the oracle the other runtimes are checked against. */
#include "runtimes/exec.h"
#include "runtimes/placement.h"
#include "runtimes/runtime.h"

struct alma_exec_ctx {
  const alma_graph *g;
  alma_tensor *env;            /* one per value of g */
  struct alma_exec_ctx *parent;
  alma_exec_parfor pf;         /* a runtime's parallel loop (alma__op_run_node_of) or NULL */
  void *pctx;
  int threads;
};

int alma__exec_input_is_const(const alma_exec_ctx *ctx, const alma_node *n, int k, const alma_tensor *t) {
  if (!ctx || !ctx->g || !t || k < 0 || k >= n->n_inputs) return 0;
  int v = n->inputs[k];
  if (v < 0 || v >= ctx->g->n_values) return 0;
  const alma_tensor *init = ctx->g->values[v].init;
  return init && init->data && init->data == t->data;
}

alma_status alma__op_run_node_of(const alma_graph *g, const alma_node *n, const alma_tensor *const *in, int nin,
                                 alma_tensor *out, int nout, int threads, alma_exec_parfor pf, void *pctx) {
  if (n->op && (n->op->flags & ALMA_OP_HAS_SUBGRAPH)) return alma__op_run_node(NULL, n, in, nin, out, nout);
  alma_exec_ctx ctx = {.g = g, .pf = threads > 1 ? pf : NULL, .pctx = pctx, .threads = threads};
  return alma__op_run_node(&ctx, n, in, nin, out, nout);
}

alma_status alma__op_exec_node_of(const alma_graph *g, const alma_node *n, const alma_tensor *const *in, int nin,
                                  alma_tensor *out, int nout, int threads, alma_exec_parfor pf, void *pctx) {
  alma_exec_ctx ctx = {.g = g, .pf = threads > 1 ? pf : NULL, .pctx = pctx, .threads = threads};
  return n->op->exec(&ctx, n, in, nin, out, nout);
}

int alma__exec_parfor(const alma_exec_ctx *ctx, alma_exec_parfor *pf, void **pctx) {
  *pf = ctx ? ctx->pf : NULL;
  *pctx = ctx ? ctx->pctx : NULL;
  return *pf ? ctx->threads : 1;
}

static alma_tensor *lookup_outer(alma_exec_ctx *ctx, const char *name) {
  for (alma_exec_ctx *c = ctx; c; c = c->parent) {
    int v = alma__graph_find_value(c->g, name);
    if (v >= 0 && !c->g->values[v].is_outer) return c->env[v].data || c->env[v].rank >= 0 ? &c->env[v] : NULL;
  }
  return NULL;
}

alma_status alma__exec_take_outputs(const alma_graph *g, alma_tensor *env, alma_tensor *outputs, int n_outputs) {
  for (int i = 0; i < n_outputs; i++) {
    alma_tensor *t = &env[g->outputs[i]];
    if (t->owns_data) {
      outputs[i] = *t;
      t->owns_data = 0; /* moved; a repeated output below copies from it */
    } else {
      alma_status st = alma__tensor_copy(&outputs[i], t);
      if (st != ALMA_OK) {
        for (int k = 0; k < i; k++) alma_tensor_free_data(&outputs[k]);
        return st;
      }
    }
  }
  return ALMA_OK;
}

/* Infers, allocates and runs one node (through the hook when it takes it). */
static alma_status run_node(alma_exec_ctx *ctx, alma_node_hook hook, void *user, int idx, const alma_node *n,
                            const alma_tensor *const *in, alma_tensor *out) {
  if (!hook || (n->op->flags & ALMA_OP_ALLOCS_OUTPUTS))
    return alma__op_run_node(ctx, n, in, n->n_inputs, out, n->n_outputs);
  /* Sequences and optionals never reach a runtime's kernels (Identity of one would be a "view"). */
  for (int k = 0; k < n->n_inputs; k++)
    if (in[k] && alma__dtype_is_container(in[k]->dtype)) return alma__op_run_node(ctx, n, in, n->n_inputs, out, n->n_outputs);
  for (int i = 0; i < n->n_outputs; i++) memset(&out[i], 0, sizeof out[i]);
  ALMA_TRY(alma__op_check_strings(n, in, n->n_inputs, NULL, 0));
  alma_status st = n->op->infer(n, in, n->n_inputs, out, n->n_outputs);
  if (st == ALMA_ERR_DYNAMIC) return alma__op_error(n, ALMA_ERR_INTERNAL, "shape unknown with all inputs given");
  if (st != ALMA_OK) return st;
  for (int i = 0; i < n->n_outputs && st == ALMA_OK; i++) {
    if (n->outputs[i] < 0) continue;
    st = alma__op_alloc_output(n, &out[i]);
  }
  int handled = 0;
  if (st == ALMA_OK) st = hook(user, idx, n, in, n->n_inputs, out, n->n_outputs, &handled);
  if (st == ALMA_OK && !handled) st = n->op->exec(ctx, n, in, n->n_inputs, out, n->n_outputs);
  if (st != ALMA_OK)
    for (int i = 0; i < n->n_outputs; i++) alma_tensor_free_data(&out[i]);
  return st;
}

/* A deferred node (alma__exec_graph_deferred): the hook computes or postpones it and allocates
 * only the outputs others read. */
static alma_status run_deferred(alma_node_hook hook, void *user, int idx, const alma_node *n, const alma_tensor *const *in,
                                alma_tensor *out) {
  for (int i = 0; i < n->n_outputs; i++) memset(&out[i], 0, sizeof out[i]);
  int handled = 0;
  alma_status st = hook(user, idx, n, in, n->n_inputs, out, n->n_outputs, &handled);
  if (st == ALMA_OK && !handled) st = alma__op_error(n, ALMA_ERR_INTERNAL, "deferred node not handled by its runtime");
  if (st != ALMA_OK)
    for (int i = 0; i < n->n_outputs; i++) alma_tensor_free_data(&out[i]);
  return st;
}

static alma_status exec_graph_hooked(alma_exec_ctx *parent, const alma_graph *g, alma_node_hook hook,
                                     alma_node_timer timer, void *user, const unsigned char *defer,
                                     const alma_tensor *inputs, int nin, alma_tensor *outputs, int nout) {
  if (nin != g->n_inputs)
    return alma__errorf(ALMA_ERR_INVALID_ARG, "graph '%s' takes %d inputs, %d given", g->name, g->n_inputs, nin);
  if (nout != g->n_outputs)
    return alma__errorf(ALMA_ERR_INVALID_ARG, "graph '%s' has %d outputs, %d requested", g->name, g->n_outputs, nout);
  alma_exec_ctx ctx = {.g = g, .parent = parent};
  int nv = g->n_values;
  ctx.env = calloc((size_t)nv + 1, sizeof(alma_tensor));
  int *uses = calloc((size_t)nv + 1, sizeof(int));
  alma_status st = ALMA_OK;
  if (!ctx.env || !uses) {
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    goto out;
  }
  for (int v = 0; v < nv; v++) {
    const alma_value *val = &g->values[v];
    ctx.env[v].rank = -1;
    if (val->init) ctx.env[v] = alma__tensor_view(val->init);
    else if (val->is_outer) {
      alma_tensor *o = parent ? lookup_outer(parent, val->name) : NULL;
      if (o) ctx.env[v] = alma__tensor_view(o);
    }
  }
  for (int i = 0; i < nin; i++) ctx.env[g->inputs[i]] = alma__tensor_view(&inputs[i]);
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] >= 0) uses[n->inputs[k]]++;
    for (int k = 0; k < n->n_implicit; k++) uses[n->implicit_inputs[k]]++;
  }
  for (int i = 0; i < g->n_outputs; i++) uses[g->outputs[i]] += 1 << 20; /* never freed before the end */

  for (int i = 0; i < g->n_nodes && st == ALMA_OK; i++) {
    const alma_node *n = &g->nodes[i];
    const alma_tensor *in[1024];
    alma_tensor outs[64];
    if (n->n_inputs > 1024 || n->n_outputs > 64) {
      st = alma__op_error(n, ALMA_ERR_UNSUPPORTED, "too many inputs or outputs");
      break;
    }
    int deferred = hook && defer && defer[i];
    double t0 = timer ? alma__now_s() : 0;
    for (int k = 0; k < n->n_inputs; k++) {
      int v = n->inputs[k];
      in[k] = v >= 0 ? &ctx.env[v] : NULL;
      if (v >= 0 && !deferred && !ctx.env[v].data && alma__numel(ctx.env[v].rank, ctx.env[v].dims) != 0 && ctx.env[v].rank != 0) {
        st = alma__op_error(n, ALMA_ERR_INTERNAL, "input '%s' has no value", g->values[v].name);
        break;
      }
    }
    if (st != ALMA_OK) break;
    st = deferred ? run_deferred(hook, user, i, n, in, outs) : run_node(&ctx, hook, user, i, n, in, outs);
    if (st != ALMA_OK) break;
    for (int k = 0; k < n->n_outputs; k++) {
      if (n->outputs[k] >= 0) ctx.env[n->outputs[k]] = outs[k];
      else alma_tensor_free_data(&outs[k]);
    }
    /* Release inputs after their last use. */
    for (int k = 0; k < n->n_inputs + n->n_implicit; k++) {
      int v = k < n->n_inputs ? n->inputs[k] : n->implicit_inputs[k - n->n_inputs];
      if (v >= 0 && --uses[v] == 0) alma_tensor_free_data(&ctx.env[v]);
    }
    for (int k = 0; k < n->n_outputs; k++)
      if (n->outputs[k] >= 0 && uses[n->outputs[k]] == 0) alma_tensor_free_data(&ctx.env[n->outputs[k]]);
    if (timer) timer(user, i, alma__now_s() - t0);
  }
  if (st == ALMA_OK) st = alma__exec_take_outputs(g, ctx.env, outputs, nout);
out:
  if (ctx.env)
    for (int v = 0; v < nv; v++) alma_tensor_free_data(&ctx.env[v]);
  free(ctx.env);
  free(uses);
  return st;
}

const alma_tensor *alma__exec_lookup_outer(alma_exec_ctx *ctx, const char *name) {
  return ctx ? lookup_outer(ctx, name) : NULL;
}

alma_status alma__exec_subgraph(alma_exec_ctx *ctx, const alma_graph *g, const alma_tensor *inputs, int n_inputs,
                                alma_tensor *outputs, int n_outputs) {
  /* an If branch the session compiled for its runtime (session.c): its outer names are its inputs */
  if (g->subplan && ctx && n_inputs == 0) return alma__subplan_run(g->subplan, ctx, outputs, n_outputs);
  return exec_graph_hooked(ctx, g, NULL, NULL, NULL, NULL, inputs, n_inputs, outputs, n_outputs);
}

alma_status alma__exec_graph(const alma_graph *g, alma_node_hook hook, void *user, const alma_tensor *inputs,
                             int n_inputs, alma_tensor *outputs, int n_outputs) {
  return exec_graph_hooked(NULL, g, hook, NULL, user, NULL, inputs, n_inputs, outputs, n_outputs);
}

alma_status alma__exec_graph_timed(const alma_graph *g, alma_node_hook hook, alma_node_timer timer, void *user,
                                   const alma_tensor *inputs, int n_inputs, alma_tensor *outputs, int n_outputs) {
  return exec_graph_hooked(NULL, g, hook, timer, user, NULL, inputs, n_inputs, outputs, n_outputs);
}

alma_status alma__exec_graph_deferred(const alma_graph *g, alma_node_hook hook, alma_node_timer timer, void *user,
                                      const unsigned char *defer, const alma_tensor *inputs, int n_inputs,
                                      alma_tensor *outputs, int n_outputs) {
  return exec_graph_hooked(NULL, g, hook, timer, user, defer, inputs, n_inputs, outputs, n_outputs);
}

/* ---- the runtime ------------------------------------------------------------------------------ */
typedef struct eager_plan {
  const alma_graph *g;
  double *prof_s;              /* profile_start: seconds per node since, NULL when not profiling */
  int64_t *prof_runs;
} eager_plan;

static alma_status eager_init(void) { return ALMA_OK; }

static alma_status eager_compile(const alma_graph *g, const alma_runtime_opts *opts, void **plan_out) {
  eager_plan *p = calloc(1, sizeof *p);
  if (!p) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  p->g = g;
  *plan_out = p;
  return ALMA_OK;
}

static void eager_timer(void *user, int idx, double seconds) {
  eager_plan *p = user;
  p->prof_s[idx] += seconds;
  p->prof_runs[idx]++;
}

static alma_status eager_run(void *plan, const alma_tensor *inputs, int n_inputs, alma_tensor *outputs, int n_outputs) {
  eager_plan *p = plan;
  return alma__exec_graph_timed(p->g, NULL, p->prof_s ? eager_timer : NULL, p, inputs, n_inputs, outputs, n_outputs);
}

static void eager_free(void *plan) {
  eager_plan *p = plan;
  if (!p) return;
  free(p->prof_s);
  free(p->prof_runs);
  free(p);
}

static void eager_describe(void *plan, FILE *f) {
  eager_plan *p = plan;
  for (int i = 0; i < p->g->n_nodes; i++)
    fprintf(f, "  %-40s %-20s EAGER\n", p->g->nodes[i].name, p->g->nodes[i].op_type);
}

alma_status alma__prof_counters(int n, double **seconds, int64_t **runs) {
  size_t m = (size_t)n + 1;
  if (!*seconds) *seconds = malloc(m * sizeof **seconds);
  if (!*runs) *runs = malloc(m * sizeof **runs);
  if (!*seconds || !*runs) {
    free(*seconds);
    free(*runs);
    *seconds = NULL;
    *runs = NULL;
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  memset(*seconds, 0, m * sizeof **seconds);
  memset(*runs, 0, m * sizeof **runs);
  return ALMA_OK;
}

static alma_status eager_profile_start(void *plan) {
  eager_plan *p = plan;
  return alma__prof_counters(p->g->n_nodes, &p->prof_s, &p->prof_runs);
}

static alma_status eager_profile_read(void *plan, alma__prof_node *nodes) {
  eager_plan *p = plan;
  if (!p->prof_s) return alma__errorf(ALMA_ERR_INVALID_ARG, "EAGER: profile_read before profile_start");
  for (int i = 0; i < p->g->n_nodes; i++)
    nodes[i] = (alma__prof_node){.seconds = p->prof_s[i], .runs = p->prof_runs[i], .head = i, .members = 1, .where = "EAGER"};
  return ALMA_OK;
}

/* EAGER's own kernels run every node: it is the runtime the others fall back to. */
static alma_status eager_placement(void *plan, alma__placement *nodes) {
  eager_plan *p = plan;
  alma__placement_fill(nodes, p->g->n_nodes, ALMA_PLACE_RUNTIME);
  return ALMA_OK;
}

const alma_runtime alma__runtime_eager = {
    .name = "EAGER",
    .description = "reference kernels, single-threaded, in topological order (the oracle)",
    .single_threaded = 1,
    .init = eager_init,
    .placement = eager_placement,
    .compile = eager_compile,
    .run = eager_run,
    .free = eager_free,
    .describe = eager_describe,
    .profile_start = eager_profile_start,
    .profile_read = eager_profile_read,
};
