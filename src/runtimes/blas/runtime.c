/* BLAS: Conv (im2col + SGEMM, grouped as per-group GEMMs, depthwise as a direct loop), Gemm,
 * MatMul and FUSE's alma.Attention (two SGEMMs per block of query rows, the softmax between them)
 * in float32 through a CBLAS library (OpenBLAS, or BLIS when built so), everything else on EAGER
 * kernels.
 *
 * compile() groups each Conv/Gemm/MatMul with what follows it when every intermediate has a single
 * consumer: an Add of a constant bias, an Add of a residual of the same shape, and one activation
 * (Relu, Clip, LeakyRelu, Sigmoid, Tanh), in that order. A group runs as one kernel whose epilogue
 * applies them while each output block is in cache; it runs at its last node's place in the
 * topological order, when every input (a residual computed by another branch, too) is ready. A
 * residual whose only remaining use is that Add gives its buffer to the output: the GEMM
 * accumulates onto it (beta = 1) instead of reading it in a separate pass. The FUSE pass's
 * alma.FusedConv/FusedGemm/FusedMatMul run the same way with their own residual, bias and
 * activation.
 *
 * run() walks the graph itself (EAGER's kernels for the rest), each value in the plan's arena
 * (mem.c: laid out from the previous run, kept between runs, so that a steady state maps and
 * faults no memory) until its last use; graph outputs get buffers of their own size, which the
 * caller keeps. Graphs with If/Loop/Scan go through the shared executor (alma__exec_graph), whose
 * subgraph scoping only it can do, with native nodes unfused (and its own allocations).
 *
 * Shapes are checked again at run time: what the plan assumed and the tensors disagree on (dtype,
 * a bias or residual that would broadcast) runs unfused, or on EAGER kernels, never wrongly. */
#ifdef ALMA_HAVE_BLAS

#include <float.h>
#include <limits.h>
#include <math.h>
#include <strings.h>

#include "ops/contrib_bert.h"
#include "ops/contrib_llm.h"
#include "ops/contrib_nbits.h"
#include "ops/fused.h"
#include "ops/gemm_packed.h"
#include "ops/nn_util.h"
#include "runtimes/blas/internal.h"
#include "runtimes/exec.h"
#include "runtimes/placement.h"
#include "runtimes/runtime.h"

enum { KIND_NONE, KIND_CONV, KIND_GEMM, KIND_MATMUL, KIND_ATTENTION, KIND_NBITS };
enum { ROLE_EAGER, ROLE_MEMBER, ROLE_TAIL };

#define MAX_CHAIN 4

typedef struct group {
  int kind;
  int fused;               /* head is an alma.Fused* node with its own epilogue */
  int nodes[MAX_CHAIN], n; /* head, [bias Add], [residual Add], [activation] */
  int bias_value;          /* constant added per channel (Conv) or column (Gemm/MatMul), or -1 */
  const alma_tensor *bias; /* its data (initializer or Constant attribute) */
  int res_value;           /* residual addend, or -1 */
  int act_node;            /* node index of the activation, or -1 */
  alma__blas_act act;
  char stop[96];           /* why the chain stops where it does (describe) */
  /* per-shape state, recomputed when the input shapes change */
  int have_cv;
  int64_t xdims[ALMA_MAX_RANK], wdims[ALMA_MAX_RANK];
  int xrank, wrank;
  alma__blas_conv cv;
  alma__blas_attn at;      /* attention: geometry and row blocks of the last run (describe) */
  float *buf;              /* merged biases */
  size_t buf_cap;
  int64_t *off;            /* MatMul operand offsets */
  size_t off_cap;
  float *bt;               /* Gemm transB on a constant weight, past the packed path's rows: B^T, made once */
  const void *bt_of;       /* the weight data bt was made from */
  /* counters */
  long runs, unfused, eager, stolen;
  long prof_runs0, prof_unfused0, prof_eager0; /* at profile_start */
} group;

typedef struct blas_plan {
  const alma_graph *g;
  int threads;
  int library_threads;     /* blas.threading=library: the library's threads instead of the pool */
  int64_t chunk_kb, min_cols; /* blas.chunk_kb, blas.min_cols: the convolutions' column chunks */
  int hooked;              /* subgraph ops: shared executor, no fusion */
  int *role, *group_of;    /* per node */
  group *groups;
  int n_groups;
  int *uses0;              /* per value: input slots reading it (+ 1<<20 for graph outputs) */
  alma__pool *pool;
  alma__blas_scratch *scratch;
  alma__blas_ctx ctx;
  double *prof_s;          /* profile_start: seconds per node (a group's on its head), NULL: off */
  int64_t *prof_runs;
  alma__blas_mem mem;      /* activation buffers: an arena kept across runs (mem.c) */
  alma_tensor *env;        /* per value, during a run */
  int *uses;               /* per value: reads left in this run */
} blas_plan;

static int is_ai_onnx(const alma_node *n) { return !n->domain || !n->domain[0] || !strcmp(n->domain, "ai.onnx"); }

static int float_or_unknown(const alma_graph *g, int v) {
  return v >= 0 && (g->values[v].dtype == ALMA_DTYPE_FLOAT32 || g->values[v].dtype == ALMA_DTYPE_UNDEFINED);
}

static int is_fused_op(const alma_node *n) { return n->domain && !strcmp(n->domain, "alma"); }

/* Conv/Gemm/MatMul, or their alma.Fused* forms from the FUSE pass. */
static int native_kind(const alma_graph *g, const alma_node *n) {
  if (!n->op || n->n_outputs != 1 || n->outputs[0] < 0 || n->n_inputs < 2) return KIND_NONE;
  if (!float_or_unknown(g, n->outputs[0])) return KIND_NONE;
  const char *t = n->op_type;
  if (is_fused_op(n)) {
    if (!strcmp(t, "Attention")) return n->n_inputs >= 3 ? KIND_ATTENTION : KIND_NONE;
    alma_fused_act fa;
    if (alma__fused_act_parse(n, &fa) != ALMA_OK) {
      alma__error_clear();
      return KIND_NONE;
    }
    return !strcmp(t, "FusedConv") ? KIND_CONV : !strcmp(t, "FusedGemm") ? KIND_GEMM
           : !strcmp(t, "FusedMatMul") ? KIND_MATMUL : KIND_NONE;
  }
  if (alma__is_mnb(n)) return KIND_NBITS; /* int4 weights: alma's kernel, output columns over the pool */
  if (!is_ai_onnx(n)) return KIND_NONE;
  if (!strcmp(t, "Conv")) return KIND_CONV;
  if (!strcmp(t, "Gemm")) return KIND_GEMM;
  if (!strcmp(t, "MatMul")) return KIND_MATMUL;
  return KIND_NONE;
}

/* A fused node's activation as the epilogue's. */
static void fused_node_act(const alma_node *n, alma__blas_act *a) {
  alma_fused_act fa;
  memset(a, 0, sizeof *a);
  if (alma__fused_act_parse(n, &fa) != ALMA_OK) { /* checked by native_kind */
    alma__error_clear();
    return;
  }
  switch (fa.kind) {
    case ALMA_ACT_NONE: break;
    case ALMA_ACT_RELU: a->kind = ALMA__BLAS_ACT_RELU; break;
    case ALMA_ACT_CLIP: a->kind = ALMA__BLAS_ACT_CLIP, a->lo = fa.p0, a->hi = fa.p1; break;
    case ALMA_ACT_LEAKYRELU: a->kind = ALMA__BLAS_ACT_LEAKY, a->alpha = fa.p0; break;
    case ALMA_ACT_SIGMOID: a->kind = ALMA__BLAS_ACT_SIGMOID; break;
    case ALMA_ACT_TANH: a->kind = ALMA__BLAS_ACT_TANH; break;
    default: a->kind = ALMA__BLAS_ACT_OTHER, a->other = fa; break;
  }
}

/* The constant value of v: an initializer (FOLD makes them) or the tensor of the Constant node
 * producing it (as exported, before FOLD); NULL otherwise. */
static const alma_tensor *init_of(const alma_graph *g, int v) {
  if (v < 0) return NULL;
  if (g->values[v].init) return g->values[v].init;
  int p = g->values[v].producer;
  if (p < 0 || p >= g->n_nodes) return NULL;
  const alma_node *n = &g->nodes[p];
  if (strcmp(n->op_type, "Constant") || !is_ai_onnx(n) || n->n_outputs != 1 || n->outputs[0] != v) return NULL;
  const alma_attr *a = alma__node_attr(n, "value");
  return a && a->type == ALMA_ATTR_TENSOR && a->t && a->t->data ? a->t : NULL;
}

/* Activation node -> epilogue activation; 0 if n is none we fuse. */
static int parse_act(const alma_graph *g, const alma_node *n, alma__blas_act *a) {
  memset(a, 0, sizeof *a);
  const char *t = n->op_type;
  if (!strcmp(t, "Relu")) a->kind = ALMA__BLAS_ACT_RELU;
  else if (!strcmp(t, "Sigmoid")) a->kind = ALMA__BLAS_ACT_SIGMOID;
  else if (!strcmp(t, "Tanh")) a->kind = ALMA__BLAS_ACT_TANH;
  else if (!strcmp(t, "LeakyRelu")) a->kind = ALMA__BLAS_ACT_LEAKY, a->alpha = alma__attr_f(n, "alpha", 0.01f);
  else if (!strcmp(t, "Clip")) {
    a->kind = ALMA__BLAS_ACT_CLIP;
    if (n->since_version < 11) {
      a->lo = alma__attr_f(n, "min", -FLT_MAX);
      a->hi = alma__attr_f(n, "max", FLT_MAX);
    } else {
      a->lo = -INFINITY;
      a->hi = INFINITY;
      for (int i = 1; i < n->n_inputs && i < 3; i++) {
        if (n->inputs[i] < 0) continue;
        const alma_tensor *b = init_of(g, n->inputs[i]);
        if (!b || b->dtype != ALMA_DTYPE_FLOAT32 || alma_tensor_numel(b) != 1) return 0; /* bounds must be constant */
        *(i == 1 ? &a->lo : &a->hi) = ((const float *)b->data)[0];
      }
    }
  } else
    return 0;
  return n->n_inputs >= 1 && n->n_outputs == 1;
}

/* Rank of the head's output if known statically, else -1. */
static int head_out_rank(const alma_graph *g, const alma_node *h, int kind) {
  if (kind == KIND_GEMM) return 2;
  int r = g->values[h->outputs[0]].rank;
  if (r >= 0) return r;
  if (kind == KIND_CONV) {
    int rw = g->values[h->inputs[1]].rank;
    return rw >= 0 ? rw : g->values[h->inputs[0]].rank;
  }
  return -1;
}

/* A constant that adds one value per output channel (Conv: axis 1; Gemm/MatMul: last axis) or a
 * single value, without changing the output's shape. out_rank < 0: unknown. */
static int bias_shape_ok(const alma_tensor *t, int kind, int out_rank) {
  if (!t || t->dtype != ALMA_DTYPE_FLOAT32 || alma_tensor_numel(t) < 1) return 0;
  int r = t->rank;
  if (out_rank < 0 && kind == KIND_MATMUL && r <= 1) out_rank = 1; /* a vector never adds a dim */
  if (out_rank < 0 || r > out_rank) return 0;
  int axis = kind == KIND_CONV ? 1 : out_rank - 1;
  int jc = axis - (out_rank - r); /* t's axis aligned with the channel axis */
  for (int j = 0; j < r; j++)
    if (j != jc && t->dims[j] != 1) return 0;
  return 1;
}

/* The value's single consumer (node index), or -1. */
static int sole_consumer(const blas_plan *p, int v, int after) {
  if (p->uses0[v] != 1) return -1;
  const alma_graph *g = p->g;
  for (int i = after + 1; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_inputs; k++)
      if (g->nodes[i].inputs[k] == v) return i;
  return -1;
}

/* stage: 0 from a plain head; 1 from a fused node (its bias is its own) */
static void build_chain(blas_plan *p, group *gr, int stage) {
  const alma_graph *g = p->g;
  const alma_node *h = &g->nodes[gr->nodes[0]];
  int cur = h->outputs[0], at = gr->nodes[0];
  int out_rank = head_out_rank(g, h, gr->kind);
  while (gr->n < MAX_CHAIN && stage < 3) {
    int c = p->uses0[cur] >= (1 << 20) ? -1 : sole_consumer(p, cur, at);
    if (c < 0) {
      snprintf(gr->stop, sizeof gr->stop, p->uses0[cur] >= (1 << 20) ? "output is a graph output"
                                          : p->uses0[cur] == 0         ? "output unused"
                                                                       : "output has %d consumers",
               p->uses0[cur]);
      return;
    }
    const alma_node *n = &g->nodes[c];
    if (p->role[c] != ROLE_EAGER) {
      snprintf(gr->stop, sizeof gr->stop, "next node '%s' already fused into another kernel", n->name);
      return;
    }
    if (!n->op || !is_ai_onnx(n) || n->n_outputs != 1 || n->outputs[0] < 0 || !float_or_unknown(g, n->outputs[0])) {
      snprintf(gr->stop, sizeof gr->stop, "next node '%s' (%s) not fusable", n->name, n->op_type);
      return;
    }
    alma__blas_act act;
    if (!strcmp(n->op_type, "Add") && n->since_version >= 7 && n->n_inputs == 2) {
      int other = n->inputs[0] == cur ? n->inputs[1] : n->inputs[0];
      if (other == cur || other < 0) break;
      const alma_tensor *t = init_of(g, other);
      if (t) {
        if (stage >= 1 || !bias_shape_ok(t, gr->kind, out_rank)) {
          snprintf(gr->stop, sizeof gr->stop, "Add '%s': constant is not a per-channel bias", n->name);
          return;
        }
        gr->bias_value = other;
        gr->bias = t;
        stage = 1;
      } else {
        if (stage >= 2 || !float_or_unknown(g, other)) {
          snprintf(gr->stop, sizeof gr->stop, "Add '%s' not fusable", n->name);
          return;
        }
        gr->res_value = other;
        stage = 2;
      }
    } else if (parse_act(g, n, &act)) {
      gr->act = act;
      gr->act_node = c;
      stage = 3;
    } else {
      snprintf(gr->stop, sizeof gr->stop, "next node '%s' (%s) not fusable", n->name, n->op_type);
      return;
    }
    gr->nodes[gr->n++] = c;
    cur = n->outputs[0];
    at = c;
  }
}

/* ---- runtime vtable ----------------------------------------------------------------------------- */

static alma_status blas_init(void) { return alma__blas_load(); }

/* Why native_kind took no kernel for n: the op types BLAS computes are few; one of them declined
 * for its element type, or for its form (a fused node's activation, missing inputs). */
static alma__decline no_kernel_reason(const alma_graph *g, const alma_node *n, const char **detail) {
  const char *t = n->op_type;
  int ours = alma__is_mnb(n) ||
             (is_fused_op(n) && (!strcmp(t, "Attention") || !strcmp(t, "FusedConv") || !strcmp(t, "FusedGemm") ||
                                 !strcmp(t, "FusedMatMul"))) ||
             (is_ai_onnx(n) && (!strcmp(t, "Conv") || !strcmp(t, "Gemm") || !strcmp(t, "MatMul")));
  if (!ours) {
    *detail = "BLAS computes Conv, Gemm, MatMul, alma.FusedConv/FusedGemm/FusedMatMul/Attention and MatMulNBits";
    return ALMA_DECLINE_OP;
  }
  if (n->n_outputs == 1 && n->outputs[0] >= 0 && !float_or_unknown(g, n->outputs[0])) {
    *detail = "not float32";
    return ALMA_DECLINE_DTYPE;
  }
  *detail = "inputs or activation BLAS does not take";
  return ALMA_DECLINE_ATTR;
}

static void blas_free(void *plan) {
  blas_plan *p = plan;
  if (!p) return;
  alma__pool_free(p->pool);
  for (int i = 0; p->scratch && i < p->threads; i++) free(p->scratch[i].p);
  for (int i = 0; i < p->n_groups; i++) {
    free(p->groups[i].buf);
    free(p->groups[i].off);
    free(p->groups[i].bt);
  }
  free(p->scratch);
  free(p->groups);
  free(p->role);
  free(p->group_of);
  free(p->uses0);
  free(p->prof_s);
  free(p->prof_runs);
  alma__blas_mem_free(&p->mem);
  free(p->env);
  free(p->uses);
  free(p);
}

const alma__blas_mem *alma__blas_plan_mem(const void *plan) { return plan ? &((const blas_plan *)plan)->mem : NULL; }

extern const alma_runtime alma__runtime_blas;

/* --runtime-option blas.NAME=VALUE (docs/runtimes/blas.md, Options). */
static const alma__rt_option blas_options[] = {
    {"threading", ALMA__OPT_CHOICE, "alma", "alma|library", 0, 0,
     "who runs the threads: alma's pool splits each node (the library runs single-threaded), or the BLAS "
     "library's own threads inside each call"},
    {"chunk_kb", ALMA__OPT_INT, "256", NULL, 16, 1 << 20,
     "KiB a convolution's column chunk (im2col block and output block) aims to fit, for L2"},
    {"min_cols", ALMA__OPT_INT, "512", NULL, 1, 1 << 20,
     "least columns per chunk when the weights are large (each SGEMM call repacks them)"},
};

static alma_status blas_compile(const alma_graph *g, const alma_runtime_opts *opts, void **plan_out) {
  ALMA_TRY(alma__blas_load());
  blas_plan *p = calloc(1, sizeof *p);
  if (!p) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  p->g = g;
  p->threads = opts && opts->threads > 0 ? opts->threads : 1;
  if (p->threads > 256) p->threads = 256;
  p->library_threads = alma__rt_opt_is(&alma__runtime_blas, opts, "threading", "library");
  p->chunk_kb = alma__rt_opt_int(&alma__runtime_blas, opts, "chunk_kb");
  p->min_cols = alma__rt_opt_int(&alma__runtime_blas, opts, "min_cols");
  int nn = g->n_nodes, nv = g->n_values;
  p->role = calloc((size_t)nn + 1, sizeof *p->role);
  p->group_of = calloc((size_t)nn + 1, sizeof *p->group_of);
  p->groups = calloc((size_t)nn + 1, sizeof *p->groups);
  p->uses0 = calloc((size_t)nv + 1, sizeof *p->uses0);
  p->scratch = calloc((size_t)p->threads, sizeof *p->scratch);
  p->env = calloc((size_t)nv + 1, sizeof *p->env);
  p->uses = calloc((size_t)nv + 1, sizeof *p->uses);
  if (!p->role || !p->group_of || !p->groups || !p->uses0 || !p->scratch || !p->env || !p->uses) {
    blas_free(p);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < nn; i++) {
    const alma_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] >= 0) p->uses0[n->inputs[k]]++;
    for (int k = 0; k < n->n_implicit; k++) p->uses0[n->implicit_inputs[k]]++;
    if ((n->op && (n->op->flags & ALMA_OP_HAS_SUBGRAPH)) || n->n_implicit) p->hooked = 1;
  }
  if (alma__graph_has_containers(g)) p->hooked = 1; /* sequences and optionals stay on EAGER */
  for (int i = 0; i < g->n_outputs; i++) p->uses0[g->outputs[i]] += 1 << 20;
  for (int i = 0; i < nn; i++) p->group_of[i] = -1;
  for (int i = 0; i < nn; i++) {
    if (p->role[i] != ROLE_EAGER) continue;
    int kind = native_kind(g, &g->nodes[i]);
    if (kind == KIND_NONE) continue;
    group *gr = &p->groups[p->n_groups];
    gr->kind = kind;
    gr->nodes[0] = i;
    gr->n = 1;
    gr->bias_value = gr->res_value = gr->act_node = -1;
    const alma_node *h = &g->nodes[i];
    if (kind == KIND_ATTENTION || kind == KIND_NBITS) {
      /* a node of its own: what follows an attention (a head merge) is data movement, and the
       * MatMulNBits kernel has no epilogue */
    } else if (is_fused_op(h)) {
      gr->fused = 1;
      fused_node_act(h, &gr->act);
      if (kind == KIND_CONV && h->n_inputs > 3 && h->inputs[3] >= 0) gr->res_value = h->inputs[3];
      /* FUSE leaves a MatMul's residual Add (a transformer's skip connection) outside */
      if (!p->hooked && gr->res_value < 0 && gr->act.kind == ALMA__BLAS_ACT_NONE) build_chain(p, gr, 1);
    } else if (!p->hooked) {
      build_chain(p, gr, 0);
    } else {
      snprintf(gr->stop, sizeof gr->stop, "graph has subgraphs: no fusion");
    }
    for (int k = 0; k < gr->n; k++) {
      p->role[gr->nodes[k]] = ROLE_MEMBER;
      p->group_of[gr->nodes[k]] = p->n_groups;
    }
    p->role[gr->nodes[gr->n - 1]] = ROLE_TAIL;
    p->n_groups++;
  }
  if (!p->library_threads && p->threads > 1 && !(p->pool = alma__pool_new(p->threads))) {
    blas_free(p);
    return ALMA_ERR_UNAVAILABLE;
  }
  p->ctx.pool = p->pool;
  p->ctx.threads = p->library_threads ? 1 : p->threads;
  p->ctx.scratch = p->scratch;
  *plan_out = p;
  return ALMA_OK;
}

/* ---- running one group ------------------------------------------------------------------------- */

/* What the kernel adds after the GEMM, resolved against the actual tensors. */
typedef struct fusion {
  const alma_tensor *bias;  /* constant per-channel bias, or NULL */
  const alma_tensor *res;   /* residual of the output's shape, or NULL (may be the output itself) */
  alma__blas_act act;
} fusion;

static int fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* Few rows (M <= ALMA_PACKED_MAX_ROWS) on a weight that is an initializer of the graph: the node's
 * packed copy of op(B) (ops/gemm_packed.h), else NULL (the unpacked kernels). */
static const alma__sgemm_packed *packed_weight(const blas_plan *p, const alma_node *n, int ta, int tb,
                                               const alma_tensor *b, int64_t M, int64_t N, int64_t K) {
  if (ta || M < 1 || M > ALMA_PACKED_MAX_ROWS || N < 1 || K < 1 || n->n_inputs < 2 || !alma__packed_gemm_enabled())
    return NULL;
  int v = n->inputs[1];
  if (v < 0 || v >= p->g->n_values || !p->g->values[v].init || p->g->values[v].init->data != b->data) return NULL;
  return alma__gemm_packed_b(n, tb, b);
}

static float *group_buf(group *gr, size_t n) {
  if (gr->buf_cap >= n) return gr->buf;
  float *b = realloc(gr->buf, (n ? n : 1) * sizeof *b);
  if (!b) return NULL;
  gr->buf = b;
  gr->buf_cap = n;
  return b;
}

/* Value of a per-channel bias tensor at channel i (it is a scalar or has `len` channel values). */
static float bias_at(const alma_tensor *t, int64_t i) {
  return alma_tensor_numel(t) == 1 ? ((const float *)t->data)[0] : ((const float *)t->data)[i];
}

/* ALMA_ERR_UNSUPPORTED (quietly, no message needed) when the kernel cannot take these tensors; the
 * caller then runs the node on EAGER kernels. */
#define DECLINE ALMA_ERR_UNSUPPORTED

static alma_status run_conv(blas_plan *p, group *gr, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, const fusion *f) {
  const alma_tensor *x = in[0], *w = in[1], *b = nin > 2 ? in[2] : NULL;
  int same = gr->have_cv && gr->xrank == x->rank && gr->wrank == w->rank &&
             !memcmp(gr->xdims, x->dims, sizeof(int64_t) * (size_t)x->rank) &&
             !memcmp(gr->wdims, w->dims, sizeof(int64_t) * (size_t)w->rank);
  alma__blas_conv *cv = &gr->cv;
  if (!same) {
    alma__nn_geom geo;
    int nsp = x->rank - 2;
    ALMA_TRY(alma__nn_geom_read(n, nsp, x->dims + 2, w->dims + 2, 1, &geo));
    ALMA_TRY(alma__nn_geom_forward(n, &geo, 0));
    memset(cv, 0, sizeof *cv);
    cv->nsp = nsp;
    cv->N = x->dims[0];
    cv->C = x->dims[1];
    cv->M = w->dims[0];
    cv->G = alma__attr_i(n, "group", 1);
    cv->Cg = cv->C / cv->G;
    cv->Mg = cv->M / cv->G;
    cv->kprod = alma__numel(nsp, w->dims + 2);
    cv->K = cv->Cg * cv->kprod;
    cv->insp = alma__numel(nsp, x->dims + 2);
    cv->outsp = alma__numel(nsp, geo.out);
    cv->pointwise = 1;
    for (int i = 0; i < nsp; i++) {
      cv->in[i] = geo.in[i];
      cv->out[i] = geo.out[i];
      cv->k[i] = geo.k[i];
      cv->s[i] = geo.s[i];
      cv->d[i] = geo.d[i];
      cv->pb[i] = geo.pb[i];
      if (geo.k[i] != 1 || geo.s[i] != 1 || geo.pb[i] || geo.pe[i]) cv->pointwise = 0;
    }
    cv->depthwise = nsp == 2 && cv->Cg == 1 && cv->G > 1;
    if (!fits_int(cv->K) || !fits_int(cv->insp) || !fits_int(cv->outsp) || !fits_int(cv->Mg) ||
        !fits_int(cv->K * 8192))
      return DECLINE;
    alma__blas_conv_plan(cv, p->ctx.threads, p->chunk_kb, p->min_cols);
    gr->xrank = x->rank;
    gr->wrank = w->rank;
    memcpy(gr->xdims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    memcpy(gr->wdims, w->dims, sizeof(int64_t) * (size_t)w->rank);
    gr->have_cv = 1;
  }
  alma__blas_epi epi = {.act = f ? f->act : (alma__blas_act){0}, .res = f && f->res ? f->res->data : NULL};
  const alma_tensor *fb = f ? f->bias : NULL;
  if (b || fb) {
    float *rb = group_buf(gr, (size_t)cv->M);
    if (!rb) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    for (int64_t m = 0; m < cv->M; m++)
      rb[m] = (b ? ((const float *)b->data)[m] : 0.0f) + (fb ? bias_at(fb, m) : 0.0f);
    epi.row_bias = rb;
  }
  return alma__blas_conv_run(&p->ctx, cv, x->data, w->data, out->data, &epi);
}

static alma_status run_gemm(blas_plan *p, group *gr, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, const fusion *f) {
  const alma_tensor *a = in[0], *b = in[1], *c = nin > 2 ? in[2] : NULL;
  alma__blas_gemm gm = {.ta = alma__attr_i(n, "transA", 0) != 0, .tb = alma__attr_i(n, "transB", 0) != 0,
                        .M = out->dims[0], .N = out->dims[1], .lda = a->dims[1], .ldb = b->dims[1],
                        .alpha = alma__attr_f(n, "alpha", 1.0f)};
  gm.K = a->dims[gm.ta ? 0 : 1];
  if (!fits_int(gm.M) || !fits_int(gm.N) || !fits_int(gm.K) || !fits_int(gm.lda) || !fits_int(gm.ldb)) return DECLINE;
  float beta = alma__attr_f(n, "beta", 1.0f);
  int64_t M = gm.M, N = gm.N;
  alma__blas_epi epi = {.act = f ? f->act : (alma__blas_act){0}, .res = f && f->res ? f->res->data : NULL};
  const alma_tensor *fb = f ? f->bias : NULL;
  /* C broadcasts to [M, N]: a scalar or row vector joins the column bias, a column vector is a
   * row bias, a full matrix is prefilled (beta * C) and accumulated onto */
  int c_rows = 0, c_full = 0;
  if (c) {
    int64_t cr = c->rank == 2 ? c->dims[0] : 1, cc = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
    c_full = cr == M && M > 1 && cc == N && N > 1;
    c_rows = !c_full && cr == M && M > 1;
  }
  if (c_full && epi.res == out->data) return DECLINE; /* caller never steals then; keep it an invariant */
  if ((c && !c_full) || fb) {
    float *buf = group_buf(gr, (size_t)(N + M));
    if (!buf) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    float *cb = buf, *rb = buf + N;
    const float *cd = c ? c->data : NULL;
    for (int64_t j = 0; j < N; j++) {
      float v = fb ? bias_at(fb, j) : 0.0f;
      if (c && !c_full && !c_rows) v += beta * (alma_tensor_numel(c) == 1 ? cd[0] : cd[j]);
      cb[j] = v;
    }
    epi.col_bias = cb;
    if (c_rows) { /* C is [M, 1] */
      for (int64_t i = 0; i < M; i++) rb[i] = beta * cd[i];
      epi.row_bias = rb;
    }
  }
  if (c_full) {
    float *y = out->data;
    const float *cd = c->data;
    for (int64_t i = 0; i < M * N; i++) y[i] = beta * cd[i];
    gm.accumulate = 1;
  }
  gm.pk = packed_weight(p, n, gm.ta, gm.tb, b, M, N, gm.K);
  const float *bd = b->data;
  int v = n->inputs[1];
  if (!gm.pk && gm.tb && M > ALMA_PACKED_MAX_ROWS && N > 1 && gm.K > 0 && v >= 0 && v < p->g->n_values &&
      p->g->values[v].init && p->g->values[v].init->data == b->data) {
    /* OpenBLAS repacks a transposed B on every call: [24,1024] x [8210,1024]^T took 11.1 ms CPU at
     * one thread against 7.0 ms on the same weight stored [1024,8210]. The copy is made once. */
    if (gr->bt_of != b->data) {
      float *t = realloc(gr->bt, (size_t)(gm.K * N) * sizeof *t);
      if (!t) return alma__errorf(ALMA_ERR_NOMEM, "out of memory transposing a Gemm weight");
      for (int64_t j = 0; j < N; j++)
        for (int64_t k = 0; k < gm.K; k++) t[k * N + j] = bd[j * gm.ldb + k];
      gr->bt = t;
      gr->bt_of = b->data;
    }
    bd = gr->bt;
    gm.tb = 0;
    gm.ldb = N;
  }
  return alma__blas_gemm_run(&p->ctx, &gm, a->data, bd, out->data, &epi);
}

static alma_status run_matmul(blas_plan *p, group *gr, const alma_node *n, const alma_tensor *const *in,
                              alma_tensor *out, const fusion *f) {
  const alma_tensor *a = in[0], *b = in[1];
  int64_t M = a->rank == 1 ? 1 : a->dims[a->rank - 2], K = a->dims[a->rank - 1];
  int64_t N = b->rank == 1 ? 1 : b->dims[b->rank - 1];
  int ar = a->rank > 2 ? a->rank - 2 : 0, br = b->rank > 2 ? b->rank - 2 : 0, orank;
  int64_t odims[ALMA_MAX_RANK];
  ALMA_TRY(alma__broadcast_shape(ar, a->dims, br, b->dims, &orank, odims));
  int64_t batch = alma__numel(orank, odims), abatch = alma__numel(ar, a->dims), bbatch = alma__numel(br, b->dims);
  if (!fits_int(M) || !fits_int(N) || !fits_int(K)) return DECLINE;
  alma__blas_epi epi = {.act = f ? f->act : (alma__blas_act){0}, .res = f && f->res ? f->res->data : NULL};
  if (f && f->bias) {
    float *cb = group_buf(gr, (size_t)N);
    if (!cb) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; j < N; j++) cb[j] = bias_at(f->bias, j);
    epi.col_bias = cb;
  }
  if (bbatch == 1 && abatch == batch) {
    /* weights shared by every product: one tall GEMM over all of A's rows */
    if (!fits_int(batch * M)) return DECLINE;
    alma__blas_gemm gm = {.M = batch * M, .N = N, .K = K, .lda = K, .ldb = N, .alpha = 1.0f};
    if (b->rank == 2) gm.pk = packed_weight(p, n, 0, 0, b, gm.M, N, K);
    return alma__blas_gemm_run(&p->ctx, &gm, a->data, b->data, out->data, &epi);
  }
  if ((size_t)batch * 2 > gr->off_cap) {
    int64_t *o = realloc(gr->off, (size_t)batch * 2 * sizeof *o);
    if (!o) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    gr->off = o;
    gr->off_cap = (size_t)batch * 2;
  }
  for (int64_t i = 0; i < batch; i++) {
    gr->off[i] = alma__broadcast_index(i, orank, odims, ar, a->dims) * M * K;
    gr->off[batch + i] = alma__broadcast_index(i, orank, odims, br, b->dims) * K * N;
  }
  return alma__blas_matmul_run(&p->ctx, batch, M, N, K, a->data, gr->off, b->data, gr->off + batch, out->data, &epi);
}

/* alma.Attention(Q, K, V, [mask]) (schema in ops/fused.h; infer has checked the shapes). */
static alma_status run_attention(blas_plan *p, group *gr, const alma_node *n, const alma_tensor *const *in, int nin,
                                 alma_tensor *out) {
  const alma_tensor *q = in[0], *k = in[1], *v = nin > 2 ? in[2] : NULL, *m = nin > 3 ? in[3] : NULL;
  if (!v || q->rank < 2 || k->rank < 2 || v->rank < 2 || (m && m->rank > ALMA_MAX_RANK)) return DECLINE;
  int causal;
  int64_t coff;
  alma__blas_attn *a = &gr->at;
  memset(a, 0, sizeof *a);
  a->kt = alma__attr_i(n, "k_transposed", 0) != 0;
  a->Sq = q->dims[q->rank - 2];
  a->D = q->dims[q->rank - 1];
  a->Sk = k->dims[k->rank - (a->kt ? 1 : 2)];
  a->Dv = v->dims[v->rank - 1];
  ALMA_TRY(alma__attn_causal_offset(n, in, nin, a->Sq, a->Sk, &causal, &coff));
  a->causal = causal;
  a->coff = coff;
  /* the reference's scale, rounded the same way */
  a->scale = alma__node_attr(n, "scale") ? alma__attr_f(n, "scale", 1.0f)
                                         : (float)(1.0 / sqrt((double)(a->D > 0 ? a->D : 1)));
  int qbr = q->rank - 2, kbr = k->rank - 2, vbr = v->rank - 2, sbr, obr;
  int64_t sbd[ALMA_MAX_RANK], obd[ALMA_MAX_RANK], sdims[ALMA_MAX_RANK];
  ALMA_TRY(alma__broadcast_shape(qbr, q->dims, kbr, k->dims, &sbr, sbd));
  ALMA_TRY(alma__broadcast_shape(sbr, sbd, vbr, v->dims, &obr, obd));
  if (sbr + 2 > ALMA_MAX_RANK) return DECLINE;
  a->batch = alma__numel(obr, obd);
  if (!fits_int(a->Sq) || !fits_int(a->Sk) || !fits_int(a->D) || !fits_int(a->Dv)) return DECLINE;
  alma__blas_attn_plan(a, p->ctx.threads);
  if ((uint64_t)a->rows * (uint64_t)(a->Sk + 1) > ((uint64_t)1 << 40)) return DECLINE;
  if ((size_t)a->batch * 4 > gr->off_cap) {
    int64_t *o = realloc(gr->off, (size_t)a->batch * 4 * sizeof *o);
    if (!o) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    gr->off = o;
    gr->off_cap = (size_t)a->batch * 4;
  }
  int64_t *qo = gr->off, *ko = qo + a->batch, *vo = ko + a->batch, *mo = vo + a->batch;
  memcpy(sdims, sbd, sizeof(int64_t) * (size_t)sbr);
  sdims[sbr] = a->Sq;
  sdims[sbr + 1] = a->Sk;
  for (int64_t b = 0; b < a->batch; b++) {
    qo[b] = alma__broadcast_index(b, obr, obd, qbr, q->dims) * a->Sq * a->D;
    ko[b] = alma__broadcast_index(b, obr, obd, kbr, k->dims) * a->Sk * a->D;
    vo[b] = alma__broadcast_index(b, obr, obd, vbr, v->dims) * a->Sk * a->Dv;
    /* the mask's element (b's scores entry, 0, 0) */
    mo[b] = m ? alma__broadcast_index(alma__broadcast_index(b, obr, obd, sbr, sbd) * a->Sq * a->Sk, sbr + 2, sdims,
                                      m->rank, m->dims)
              : 0;
  }
  a->zero_masked = alma__attr_i(n, "onnx_mask", 0) != 0;
  if (m) {
    int64_t mk = m->rank >= 1 ? m->dims[m->rank - 1] : 1, mq = m->rank >= 2 ? m->dims[m->rank - 2] : 1;
    /* ONNX's rules pad a shorter mask with -inf rather than broadcast it: the EAGER kernel does that */
    if (a->zero_masked && mk != a->Sk) return DECLINE;
    a->m_col = mk == a->Sk && a->Sk > 1 ? 1 : 0;
    a->m_row = mq == a->Sq && a->Sq > 1 ? mk : 0;
    a->mask = m->data;
  }
  a->q = q->data;
  a->k = k->data;
  a->v = v->data;
  a->q_off = qo;
  a->k_off = ko;
  a->v_off = vo;
  a->m_off = mo;
  return alma__blas_attn_run(&p->ctx, a, out->data);
}

/* Inputs a native kernel needs in float32: Conv X, W, B; Gemm A, B, C; MatMul A, B; Attention
 * Q, K, V, mask. */
static int inputs_float(const alma_node *n, const alma_tensor *const *in, int nin) {
  for (int i = 0; i < nin; i++)
    if (in[i] && in[i]->dtype != ALMA_DTYPE_FLOAT32) return 0;
  return nin >= 2 && in[0] && in[1];
}

/* MatMulNBits: contrib_nbits.c's kernel, its items (output columns) taken by the pool's threads. */
typedef struct nbits_par {
  alma__nbits_item_fn fn;
  void *arg;
  int64_t items;
  atomic_llong next;
} nbits_par;

static void nbits_task(void *arg, int tid, int nt) {
  (void)tid, (void)nt;
  nbits_par *t = arg;
  int64_t end;
  for (int64_t i; (i = alma__pool_claim(&t->next, 1, t->items, &end)) >= 0;) t->fn(t->arg, i);
}

static void nbits_parfor(void *pctx, int64_t items, alma__nbits_item_fn fn, void *arg) {
  blas_plan *p = pctx;
  nbits_par t = {.fn = fn, .arg = arg, .items = items};
  atomic_init(&t.next, 0);
  alma__pool_run(p->pool, nbits_task, &t, p->ctx.threads);
}

static alma_status run_nbits(blas_plan *p, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out) {
  if (in[0]->dtype != ALMA_DTYPE_FLOAT32 || out->dtype != ALMA_DTYPE_FLOAT32) return DECLINE;
  return alma__mnb_exec_par(n, in, nin, out, p->ctx.threads, nbits_parfor, p);
}

/* Runs the head natively into `out` (allocated with the inferred shape); DECLINE if it cannot. */
static alma_status run_head(blas_plan *p, group *gr, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, const fusion *f) {
  if (gr->kind == KIND_NBITS) return run_nbits(p, n, in, nin, out);
  if (!inputs_float(n, in, nin) || out->dtype != ALMA_DTYPE_FLOAT32) return DECLINE;
  if (gr->fused && nin > (gr->kind == KIND_MATMUL ? 2 : 3)) nin = gr->kind == KIND_MATMUL ? 2 : 3; /* Z, bias: f */
  switch (gr->kind) {
    case KIND_CONV: return run_conv(p, gr, n, in, nin, out, f);
    case KIND_GEMM: return run_gemm(p, gr, n, in, nin, out, f);
    case KIND_MATMUL: return run_matmul(p, gr, n, in, out, f);
    case KIND_ATTENTION: return run_attention(p, gr, n, in, nin, out);
    default: return DECLINE;
  }
}

/* ---- values and their buffers ------------------------------------------------------------------ */

typedef struct run_state {
  alma_tensor *env;
  int *uses;
} run_state;

static int is_graph_output(const blas_plan *p, int v) { return v >= 0 && p->uses0[v] >= 1 << 20; }

/* Gives a value's buffer back: the arena's to mem.c, anything else alma allocated to free(). */
static void val_free(blas_plan *p, alma_tensor *t) {
  if (t->owns_data && t->data && alma__blas_mem_put(&p->mem, t->data)) t->owns_data = 0;
  alma_tensor_free_data(t);
}

/* A buffer for value v of this shape, zeroed when `zero` (EAGER kernels are promised zeroed
 * outputs unless their op sets ALMA_OP_FILLS_OUTPUTS; ours write every element; string tensors
 * are always zeroed; an unzeroed one is poisoned as alma__tensor_alloc_uninit's are). A graph output gets one of its own size, since the caller
 * keeps it; every other value one of mem.c's, so that a steady state maps and faults nothing. */
static alma_status alloc_value(blas_plan *p, int v, alma_tensor *t, const alma_tensor *shape, int zero) {
  size_t esz = alma_dtype_size(shape->dtype);
  int64_t cnt = 1, bytes = 0;
  int bad = esz == 0 || shape->rank < 0 || shape->rank > ALMA_MAX_RANK;
  for (int i = 0; !bad && i < shape->rank; i++)
    bad = shape->dims[i] < 0 || alma__mul_overflow_i64(cnt, shape->dims[i], &cnt);
  if (!bad) bad = alma__mul_overflow_i64(cnt, (int64_t)esz, &bytes) || (uint64_t)bytes > (uint64_t)1 << 46;
  if (bad) return alma__tensor_alloc(t, shape->dtype, shape->rank, shape->dims); /* its error message */
  void *d;
  if (shape->dtype == ALMA_DTYPE_STRING) zero = 1; /* handles: NULL is the empty string */
  if (is_graph_output(p, v)) {
    d = zero ? calloc((size_t)(bytes ? bytes : 1), 1) : malloc((size_t)(bytes ? bytes : 1));
    if (d) p->mem.outputs++;
  } else {
    d = alma__blas_mem_get(&p->mem, (size_t)bytes);
    if (d && zero) memset(d, 0, (size_t)bytes);
  }
  if (!d) return alma__errorf(ALMA_ERR_NOMEM, "out of memory allocating %lld bytes", (long long)bytes);
  if (!zero && alma__poison_uninit()) memset(d, 0xFF, (size_t)bytes);
  *t = *shape;
  t->data = d;
  t->nbytes = (size_t)bytes;
  t->owns_data = 1;
  return ALMA_OK;
}

static alma_status gather_inputs(const blas_plan *p, run_state *rs, const alma_node *n, const alma_tensor **in) {
  for (int k = 0; k < n->n_inputs; k++) {
    int v = n->inputs[k];
    in[k] = v >= 0 ? &rs->env[v] : NULL;
    if (v >= 0 && !rs->env[v].data && alma__numel(rs->env[v].rank, rs->env[v].dims) != 0 && rs->env[v].rank != 0)
      return alma__op_error(n, ALMA_ERR_INTERNAL, "input '%s' has no value", p->g->values[v].name);
  }
  return ALMA_OK;
}

static void release_inputs(blas_plan *p, run_state *rs, const alma_node *n) {
  for (int k = 0; k < n->n_inputs; k++) {
    int v = n->inputs[k];
    if (v >= 0 && --rs->uses[v] == 0) val_free(p, &rs->env[v]);
  }
}

static void store_outputs(blas_plan *p, run_state *rs, const alma_node *n, alma_tensor *outs) {
  for (int k = 0; k < n->n_outputs; k++) {
    int v = n->outputs[k];
    if (v >= 0) {
      rs->env[v] = outs[k];
      if (rs->uses[v] == 0) val_free(p, &rs->env[v]);
    } else {
      val_free(p, &outs[k]);
    }
  }
}

/* EAGER's kernel for one node (alma__op_run_node's steps) with its outputs in the plan's
 * buffers. */
static alma_status eager_exec(blas_plan *p, const alma_node *n, const alma_tensor *const *in, alma_tensor *out) {
  if (!n->op) return alma__op_error(n, ALMA_ERR_INTERNAL, "operator not resolved");
  if (n->op->flags & ALMA_OP_ALLOCS_OUTPUTS) /* control flow: only in hooked graphs, which do not come here */
    return alma__op_run_node(NULL, n, in, n->n_inputs, out, n->n_outputs);
  for (int i = 0; i < n->n_outputs; i++) memset(&out[i], 0, sizeof out[i]);
  alma_status st = n->op->infer(n, in, n->n_inputs, out, n->n_outputs);
  if (st == ALMA_ERR_DYNAMIC) return alma__op_error(n, ALMA_ERR_INTERNAL, "shape unknown with all inputs given");
  if (st != ALMA_OK) return st;
  for (int i = 0; i < n->n_outputs; i++) {
    if (n->outputs[i] < 0) continue; /* omitted optional output */
    alma_tensor shape = out[i];
    if ((st = alloc_value(p, n->outputs[i], &out[i], &shape, !(n->op->flags & ALMA_OP_FILLS_OUTPUTS))) != ALMA_OK) {
      for (int k = 0; k < i; k++) val_free(p, &out[k]);
      return alma__error_prefix(st, "node '%s' (%s): output %d: ", n->name, n->op_type, i);
    }
  }
  /* GroupQueryAttention, Attention, the Gelus, SkipLayerNormalization...: EAGER's kernels with their
   * items ((batch, head) pairs, projection column blocks, row blocks) over the pool (contrib_bert.h) */
  st = alma__contrib_par(n) ? alma__contrib_exec_par(n, in, n->n_inputs, out, n->n_outputs, p->ctx.threads, nbits_parfor, p)
                            : alma__op_exec_node_of(p->g, n, in, n->n_inputs, out, n->n_outputs, p->ctx.threads,
                                                    nbits_parfor, p);
  if (st != ALMA_OK)
    for (int k = 0; k < n->n_outputs; k++) val_free(p, &out[k]);
  return st;
}

/* One node on EAGER kernels. */
static alma_status run_eager_node(blas_plan *p, run_state *rs, const alma_node *n) {
  const alma_tensor *in[1024];
  alma_tensor outs[64];
  if (n->n_inputs > 1024 || n->n_outputs > 64) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "too many inputs or outputs");
  ALMA_TRY(gather_inputs(p, rs, n, in));
  ALMA_TRY(eager_exec(p, n, in, outs));
  store_outputs(p, rs, n, outs);
  release_inputs(p, rs, n);
  return ALMA_OK;
}

/* The head natively (or on EAGER when it declines), no fusion. */
static alma_status run_head_alone(blas_plan *p, run_state *rs, group *gr, const alma_node *n) {
  const alma_tensor *in[8];
  if (n->n_inputs > 8) return run_eager_node(p, rs, n);
  ALMA_TRY(gather_inputs(p, rs, n, in));
  alma_tensor shape, out;
  memset(&shape, 0, sizeof shape);
  ALMA_TRY(n->op->infer(n, in, n->n_inputs, &shape, 1));
  ALMA_TRY(alloc_value(p, n->outputs[0], &out, &shape, 0));
  alma_status st = run_head(p, gr, n, in, n->n_inputs, &out, NULL);
  if (st == DECLINE) {
    val_free(p, &out);
    alma__error_clear();
    gr->eager++;
    return run_eager_node(p, rs, n);
  }
  if (st != ALMA_OK) {
    val_free(p, &out);
    return st;
  }
  store_outputs(p, rs, n, &out);
  release_inputs(p, rs, n);
  return ALMA_OK;
}

static alma_status run_group(blas_plan *p, run_state *rs, group *gr) {
  const alma_graph *g = p->g;
  const alma_node *h = &g->nodes[gr->nodes[0]];
  const alma_node *tail = &g->nodes[gr->nodes[gr->n - 1]];
  gr->runs++;
  if (gr->n == 1 && !gr->fused) return run_head_alone(p, rs, gr, h);
  const alma_tensor *in[8];
  if (h->n_inputs > 8) return alma__op_error(h, ALMA_ERR_INTERNAL, "too many inputs");
  ALMA_TRY(gather_inputs(p, rs, h, in));
  alma_tensor shape, out;
  memset(&shape, 0, sizeof shape);
  ALMA_TRY(h->op->infer(h, in, h->n_inputs, &shape, 1));
  /* what the plan assumed, checked against the tensors */
  fusion f = {.act = gr->act};
  int ok = inputs_float(h, in, h->n_inputs) && shape.dtype == ALMA_DTYPE_FLOAT32;
  int axis = gr->kind == KIND_CONV ? 1 : shape.rank - 1;
  f.bias = gr->bias_value >= 0 ? gr->bias : NULL;
  if (gr->fused && gr->kind == KIND_MATMUL && h->n_inputs > 2) f.bias = in[2]; /* FusedMatMul's bias */
  if (ok && f.bias) {
    int64_t len = alma_tensor_numel(f.bias);
    ok = f.bias->rank <= shape.rank && axis >= 0 && (len == 1 || len == shape.dims[axis]);
    for (int k = 0; ok && k < f.bias->rank; k++) /* one value per channel, nothing else broadcast */
      ok = f.bias->dims[k] == 1 || f.bias->rank - 1 - k == shape.rank - 1 - axis;
  }
  alma_tensor *res = NULL;
  if (ok && gr->res_value >= 0) {
    res = &rs->env[gr->res_value];
    ok = res->dtype == ALMA_DTYPE_FLOAT32 && alma__same_shape(res, &shape) && (res->data || !alma_tensor_numel(res));
  }
  if (!ok) {
    /* run the chain node by node (a fused head on its reference kernel: a broadcasting Z or bias) */
    gr->unfused++;
    if (gr->fused) {
      gr->eager++;
      ALMA_TRY(run_eager_node(p, rs, h));
    } else {
      ALMA_TRY(run_head_alone(p, rs, gr, h));
    }
    for (int k = 1; k < gr->n; k++) ALMA_TRY(run_eager_node(p, rs, &g->nodes[gr->nodes[k]]));
    return ALMA_OK;
  }
  /* take over the residual's buffer when this Add is its last use (not for a graph output: that
   * gets a buffer of its own, which the caller keeps) */
  int steal = res && res->owns_data && rs->uses[gr->res_value] == 1 && !is_graph_output(p, tail->outputs[0]) &&
              !(gr->kind == KIND_GEMM && h->n_inputs > 2 && h->inputs[2] >= 0) &&
              !(gr->fused && h->n_inputs > 2 && h->inputs[2] == gr->res_value); /* Z also as B */
  if (steal) {
    out = *res;
    out.owns_data = 1;
    res->owns_data = 0; /* the output owns it now; release below frees nothing */
    f.res = &out;
    gr->stolen++;
  } else {
    ALMA_TRY(alloc_value(p, tail->outputs[0], &out, &shape, 0));
    f.res = res;
  }
  alma_status st = run_head(p, gr, h, in, h->n_inputs, &out, &f);
  if (st == DECLINE) {
    /* only size limits decline here, before anything is written */
    alma__error_clear();
    if (steal) {
      res->owns_data = 1;
    } else {
      val_free(p, &out);
    }
    gr->unfused++;
    gr->eager++;
    for (int k = 0; k < gr->n; k++) ALMA_TRY(run_eager_node(p, rs, &g->nodes[gr->nodes[k]]));
    return ALMA_OK;
  }
  if (st != ALMA_OK) {
    if (steal) res->data = NULL;
    val_free(p, &out);
    return st;
  }
  if (steal) res->data = NULL;
  store_outputs(p, rs, tail, &out);
  for (int k = 0; k < gr->n; k++) release_inputs(p, rs, &g->nodes[gr->nodes[k]]);
  return ALMA_OK;
}

/* Graphs with subgraphs: the shared executor calls this for every node. */
static alma_status hook(void *user, int idx, const alma_node *n, const alma_tensor *const *in, int nin,
                        alma_tensor *out, int nout, int *handled) {
  blas_plan *p = user;
  if (idx < 0 || idx >= p->g->n_nodes || p->role[idx] != ROLE_TAIL || nout != 1) return ALMA_OK;
  group *gr = &p->groups[p->group_of[idx]];
  gr->runs++;
  if (gr->fused) { /* the fused node's epilogue: only its plain form here */
    fusion f = {.act = gr->act};
    int extra = gr->kind == KIND_CONV ? 3 : gr->kind == KIND_MATMUL ? 2 : 99;
    if (nin > extra && in[extra]) {
      gr->eager++;
      return ALMA_OK;
    }
    alma_status st = run_head(p, gr, n, in, nin, &out[0], &f);
    if (st == DECLINE) {
      alma__error_clear();
      gr->eager++;
      return ALMA_OK;
    }
    if (st == ALMA_OK) *handled = 1;
    return st;
  }
  alma_status st = run_head(p, gr, n, in, nin, &out[0], NULL);
  if (st == DECLINE) {
    alma__error_clear();
    gr->eager++;
    return ALMA_OK;
  }
  if (st == ALMA_OK) *handled = 1;
  return st;
}

/* Profiling: the shared executor's per-node timer (hooked graphs have no fused groups). */
static void blas_timer(void *user, int idx, double seconds) {
  blas_plan *p = user;
  p->prof_s[idx] += seconds;
  p->prof_runs[idx]++;
}

/* Hands the graph outputs to the caller: a buffer of alma's moves, except one of mem.c's (the
 * caller gets a copy); views (an input or initializer) are copied. */
static alma_status take_outputs(blas_plan *p, run_state *rs, alma_tensor *outputs, int n_outputs) {
  for (int i = 0; i < n_outputs; i++) {
    alma_tensor *t = &rs->env[p->g->outputs[i]];
    if (t->owns_data && !alma__blas_mem_size(&p->mem, t->data)) {
      outputs[i] = *t;
      t->owns_data = 0; /* moved; a repeated output below copies from it */
      continue;
    }
    if (t->owns_data) p->mem.output_copies++;
    alma_status st = alma__tensor_copy(&outputs[i], t);
    if (st != ALMA_OK) {
      for (int k = 0; k < i; k++) alma_tensor_free_data(&outputs[k]);
      return st;
    }
  }
  return ALMA_OK;
}

/* A run during which the BLAS library had no room for its buffers (vendor.c) computed garbage. */
static alma_status check_room(alma_status st) {
  if (alma__blas_take_no_room() && st == ALMA_OK)
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory: the memory limit leaves no room for the BLAS library's "
                                        "buffers (OpenBLAS maps 128-256 MiB at a thread's first call and would retry "
                                        "for ever)");
  return st;
}

static alma_status blas_run(void *plan, const alma_tensor *inputs, int n_inputs, alma_tensor *outputs, int n_outputs) {
  blas_plan *p = plan;
  const alma_graph *g = p->g;
  alma__blas_take_no_room();
  /* process-wide: another plan may have changed it */
  alma__blas_set_threads(p->library_threads ? p->threads : 1);
  if (p->hooked) {
    alma_status hs = alma__exec_graph_timed(g, hook, p->prof_s ? blas_timer : NULL, p, inputs, n_inputs, outputs, n_outputs);
    if (hs == ALMA_OK && (hs = check_room(hs)) != ALMA_OK)
      for (int i = 0; i < n_outputs; i++) alma_tensor_free_data(&outputs[i]);
    return hs;
  }
  if (n_inputs != g->n_inputs)
    return alma__errorf(ALMA_ERR_INVALID_ARG, "graph '%s' takes %d inputs, %d given", g->name, g->n_inputs, n_inputs);
  if (n_outputs != g->n_outputs)
    return alma__errorf(ALMA_ERR_INVALID_ARG, "graph '%s' has %d outputs, %d requested", g->name, g->n_outputs,
                        n_outputs);
  int nv = g->n_values;
  run_state rs = {.env = p->env, .uses = p->uses};
  alma_status st = ALMA_OK;
  memcpy(rs.uses, p->uses0, (size_t)nv * sizeof(int));
  memset(rs.env, 0, (size_t)nv * sizeof *rs.env);
  for (int v = 0; v < nv; v++) {
    rs.env[v].rank = -1;
    if (g->values[v].init) rs.env[v] = alma__tensor_view(g->values[v].init);
  }
  for (int i = 0; i < n_inputs; i++) rs.env[g->inputs[i]] = alma__tensor_view(&inputs[i]);
  alma__blas_mem_begin(&p->mem);
  for (int i = 0; i < g->n_nodes && st == ALMA_OK; i++) {
    if (p->role[i] == ROLE_MEMBER) continue;
    double t0 = p->prof_s ? alma__now_s() : 0;
    int at = i;
    if (p->role[i] == ROLE_TAIL) {
      group *gr = &p->groups[p->group_of[i]];
      at = gr->nodes[0]; /* a group's time goes to its head */
      st = run_group(p, &rs, gr);
    } else {
      st = run_eager_node(p, &rs, &g->nodes[i]);
    }
    if (p->prof_s) {
      p->prof_s[at] += alma__now_s() - t0;
      p->prof_runs[at]++;
    }
  }
  st = check_room(st);
  if (st == ALMA_OK) st = take_outputs(p, &rs, outputs, n_outputs);
  for (int v = 0; v < nv; v++) val_free(p, &rs.env[v]);
  alma__blas_mem_end(&p->mem, st == ALMA_OK);
  return st;
}

/* ---- describe ----------------------------------------------------------------------------------- */

static const char *act_name(int k) {
  switch (k) {
    case ALMA__BLAS_ACT_RELU: return "Relu";
    case ALMA__BLAS_ACT_CLIP: return "Clip";
    case ALMA__BLAS_ACT_LEAKY: return "LeakyRelu";
    case ALMA__BLAS_ACT_SIGMOID: return "Sigmoid";
    case ALMA__BLAS_ACT_TANH: return "Tanh";
    default: return "";
  }
}

static void blas_describe(void *plan, FILE *f) {
  blas_plan *p = plan;
  const alma_graph *g = p->g;
  const alma__blas_info *in = alma__blas_info_get();
  if (in) {
    fprintf(f, "  BLAS library: %s (%s)\n", in->config, in->library);
    fprintf(f, "  kernels: %s — %s\n", in->core, in->choice);
  }
  if (p->library_threads)
    fprintf(f, "  threads: %d, the library's own (%s; ALMA_BLAS_THREADING=library)\n", p->threads,
            in ? in->threading : "?");
  else
    fprintf(f, "  threads: %d (alma's pool; the library runs single-threaded inside each task)\n", p->threads);
  fprintf(f, "  layout: NCHW / row-major throughout: 0 reorders%s\n",
          p->hooked ? "; graph has subgraphs: shared executor, no fusion" : "");
  int native = 0, fused = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    if (p->role[i] == ROLE_EAGER) {
      fprintf(f, "  %-40s %-20s EAGER\n", n->name, n->op_type);
      continue;
    }
    const group *gr = &p->groups[p->group_of[i]];
    native++;
    if (i != gr->nodes[0]) {
      fused++;
      fprintf(f, "  %-40s %-20s BLAS (fused into '%s')\n", n->name, n->op_type, g->nodes[gr->nodes[0]].name);
      continue;
    }
    char what[256];
    if (gr->kind == KIND_NBITS) {
      fprintf(f, "  %-40s %-20s BLAS alma's int4 kernel, output columns over %d threads%s\n", n->name, n->op_type,
              p->ctx.threads, alma__attr_i(n, "accuracy_level", 0) == 4 ? " (accuracy_level 4: int8 A)" : "");
      if (gr->eager) fprintf(f, "  %-40s %-20s   (on EAGER %ld of %ld runs)\n", "", "", gr->eager, gr->runs);
      continue;
    }
    if (gr->kind == KIND_ATTENTION) {
      const alma__blas_attn *a = &gr->at;
      int o = snprintf(what, sizeof what, "sgemm scale*Q*K^T%s%s, softmax, *V",
                       n->n_inputs > 3 && n->inputs[3] >= 0 ? " +mask" : "",
                       alma__attr_i(n, "causal", 0) ? " (causal: masked key blocks skipped)" : "");
      if (a->blocks)
        snprintf(what + o, sizeof what - (size_t)o, " [%lld items of %lld query rows]",
                 (long long)(a->batch * a->blocks), (long long)a->rows);
      fprintf(f, "  %-40s %-20s BLAS %s\n", n->name, n->op_type, what);
      if (gr->eager)
        fprintf(f, "  %-40s %-20s   (on EAGER %ld of %ld runs)\n", "", "", gr->eager, gr->runs);
      continue;
    }
    int o = snprintf(what, sizeof what, "%s", gr->kind == KIND_CONV ? "im2col+sgemm" : "sgemm");
    if (gr->bias_value >= 0 || (gr->fused && gr->kind == KIND_MATMUL && n->n_inputs > 2 && n->inputs[2] >= 0))
      o += snprintf(what + o, sizeof what - (size_t)o, " +bias");
    if (gr->res_value >= 0) o += snprintf(what + o, sizeof what - (size_t)o, " +residual");
    if (gr->act.kind != ALMA__BLAS_ACT_NONE)
      o += snprintf(what + o, sizeof what - (size_t)o, " +%s",
                    gr->act.kind == ALMA__BLAS_ACT_OTHER ? alma__fused_act_name(gr->act.other.kind)
                                                         : act_name(gr->act.kind));
    if (gr->have_cv) {
      const alma__blas_conv *cv = &gr->cv;
      if (cv->depthwise) snprintf(what + o, sizeof what - (size_t)o, " [depthwise direct loop]");
      else
        snprintf(what + o, sizeof what - (size_t)o, " [%s%lld items of %lld %s%s]", cv->pointwise ? "1x1 no im2col, " : "",
                 (long long)cv->items, (long long)cv->chunk, cv->whole_images ? "images" : "columns",
                 cv->mblocks > 1 ? ", rows split" : "");
    }
    fprintf(f, "  %-40s %-20s BLAS %s%s%s\n", n->name, n->op_type, what, gr->stop[0] ? "; stops: " : "", gr->stop);
    if (gr->unfused || gr->eager)
      fprintf(f, "  %-40s %-20s   (ran unfused %ld, on EAGER %ld of %ld runs)\n", "", "", gr->unfused, gr->eager,
              gr->runs);
  }
  fprintf(f, "  %d of %d nodes on BLAS (%d fused into %d kernels), %d on EAGER\n", native, g->n_nodes, fused,
          p->n_groups, g->n_nodes - native);
  const alma__blas_mem *m = &p->mem;
  if (m->runs)
    fprintf(f, "  buffers: arena %.1f MiB, peak live %.1f MiB; layouts %ld, allocations %ld in %ld runs (%ld in the "
            "last)\n",
            (double)m->arena_size / 1048576.0, (double)m->plan_peak / 1048576.0, m->layouts, m->allocs, m->runs,
            m->run_allocs);
}

/* ---- profile ------------------------------------------------------------------------------------ */
static alma_status blas_profile_start(void *plan) {
  blas_plan *p = plan;
  ALMA_TRY(alma__prof_counters(p->g->n_nodes, &p->prof_s, &p->prof_runs));
  for (int k = 0; k < p->n_groups; k++) {
    group *gr = &p->groups[k];
    gr->prof_runs0 = gr->runs;
    gr->prof_unfused0 = gr->unfused;
    gr->prof_eager0 = gr->eager;
  }
  return ALMA_OK;
}

/* A group's placement over the profiled runs: its kernel, node by node (a residual or bias the
 * plan assumed turned out to broadcast), or EAGER's kernels (the library declined). */
static const char *group_where(const group *gr) {
  long runs = gr->runs - gr->prof_runs0, eager = gr->eager - gr->prof_eager0, unfused = gr->unfused - gr->prof_unfused0;
  if (runs > 0 && eager >= runs) return "EAGER (declined)";
  if (eager > 0) return "BLAS (some runs on EAGER)";
  if (unfused > 0) return "BLAS (unfused)";
  return "BLAS";
}

static alma_status blas_profile_read(void *plan, alma__prof_node *out) {
  blas_plan *p = plan;
  const alma_graph *g = p->g;
  if (!p->prof_s) return alma__errorf(ALMA_ERR_INVALID_ARG, "BLAS: profile_read before profile_start");
  for (int i = 0; i < g->n_nodes; i++) {
    out[i] = (alma__prof_node){.seconds = p->prof_s[i], .runs = p->prof_runs[i], .head = i, .members = 1, .where = "EAGER"};
    if (p->group_of[i] < 0) continue;
    const group *gr = &p->groups[p->group_of[i]];
    out[i].where = group_where(gr);
    if (gr->nodes[0] != i) { /* a member: counted on the head */
      out[i].head = gr->nodes[0];
      out[i].members = 0;
      out[i].runs = 0;
    } else {
      out[i].members = gr->n;
    }
  }
  return ALMA_OK;
}

/* Placement as data: nodes in a group run in its kernel (the head; the rest FUSED into its
 * epilogue) unless the group declined at run time (size limits, a bias or residual that
 * broadcasts, types static inference did not know). Then the chain ran node by node (unfused):
 * the head alone on BLAS, or on EAGER when its kernel declined too (eager), the other members on
 * EAGER. */
static alma__placement run_time_place(long eager_runs, long runs, alma__place own) {
  if (!eager_runs) return (alma__placement){own, ALMA_DECLINE_NONE, NULL};
  return (alma__placement){eager_runs >= runs ? ALMA_PLACE_EAGER : ALMA_PLACE_PARTIAL, ALMA_DECLINE_DYNAMIC,
                           "declined at run time for the shapes or types it met (size limits, a bias or residual "
                           "that broadcasts, not float32)"};
}

static alma_status blas_placement(void *plan, alma__placement *out) {
  blas_plan *p = plan;
  const alma_graph *g = p->g;
  for (int i = 0; i < g->n_nodes; i++) {
    if (p->group_of[i] < 0) {
      const char *detail = NULL;
      alma__decline r = no_kernel_reason(g, &g->nodes[i], &detail);
      out[i] = (alma__placement){ALMA_PLACE_EAGER, r, detail};
      continue;
    }
    const group *gr = &p->groups[p->group_of[i]];
    out[i] = gr->nodes[0] == i ? run_time_place(gr->eager, gr->runs, ALMA_PLACE_RUNTIME)
                               : run_time_place(gr->unfused, gr->runs, ALMA_PLACE_FUSED);
  }
  return ALMA_OK;
}

const alma_runtime alma__runtime_blas = {
    .name = "BLAS",
    .description = "Conv (im2col+SGEMM), Gemm and MatMul in float32 through "
#if defined(ALMA_BLAS_BLIS)
                   "BLIS"
#else
                   "OpenBLAS"
#endif
                   ", with bias/residual/activation fused into the GEMM epilogue, and alma.Attention as batched "
                   "SGEMMs; other nodes on EAGER kernels",
    .init = blas_init,
    .placement = blas_placement,
    .compile = blas_compile,
    .run = blas_run,
    .free = blas_free,
    .describe = blas_describe,
    .profile_start = blas_profile_start,
    .profile_read = blas_profile_read,
    .option_prefix = "blas",
    .options = blas_options,
    .n_options = (int)(sizeof blas_options / sizeof blas_options[0]),
};

#endif /* ALMA_HAVE_BLAS */
