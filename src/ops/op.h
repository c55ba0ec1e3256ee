/* Operator schemas and reference (EAGER) kernels.
 *
 * Every operator is one `alma_op_def` named alma__op_<OpType> (listed once in ops.def) with:
 *  - versions: the since_versions at which the ONNX spec changed the op (semantics, attributes,
 *    inputs or types), ascending, 0-terminated. A node is bound to the highest version <= the
 *    model's opset (cONNXr's rule) and the kernels read n->since_version to branch.
 *  - infer: validates attributes, arity, dtypes and shapes, and computes output dtypes and shapes.
 *    Called at load (symbolic dims bound to 1) and again before every execution with the actual
 *    inputs, so it is the single place shape rules live. An input tensor given to infer may have
 *    data == NULL when its value is not known statically; an op whose output shape depends on such
 *    a value returns ALMA_ERR_DYNAMIC (quietly: use alma__need_value). Everything the op does not
 *    support (attribute value, dtype) returns ALMA_ERR_UNSUPPORTED naming it: that is how alma fails
 *    at load rather than at run time.
 *  - exec: computes outputs. Outputs arrive allocated (zeroed) with the shapes infer gave, unless
 *    the op sets ALMA_OP_ALLOCS_OUTPUTS (control flow), in which case exec allocates them with
 *    alma__tensor_alloc. An op whose exec writes every element of every output it is given sets
 *    ALMA_OP_FILLS_OUTPUTS: its outputs then arrive uninitialised (no zeroing per run; string
 *    tensors stay zeroed), poisoned with NaN/-1 bytes in sanitizer builds so the tests catch an
 *    element left unwritten.
 *  - cost (optional): multiply-accumulates and flops for `alma info`.
 * Ops are stateless functions of (node, inputs). What an op derives from the attributes alone and
 * would otherwise rebuild on every call (a tree ensemble's node tables) goes in the node's prepared
 * state: infer and exec both call alma__node_prepared, which builds it once per node of each graph
 * and frees it with the graph (graph/graph.h, alma_prepared).
 *
 * Inputs: in[i] is NULL for an omitted optional input (and for i >= number given). Errors name the
 * node: use alma__op_error(n, status, fmt, ...).
 */
#ifndef ALMA_OP_H
#define ALMA_OP_H

#include "graph/graph.h"

typedef struct alma_exec_ctx alma_exec_ctx;

typedef alma_status (*alma_infer_fn)(const alma_node *n, const alma_tensor *const *in, int nin,
                                     alma_tensor *out, int nout);
typedef alma_status (*alma_exec_fn)(alma_exec_ctx *ctx, const alma_node *n,
                                    const alma_tensor *const *in, int nin, alma_tensor *out, int nout);
typedef void (*alma_cost_fn)(const alma_node *n, const alma_tensor *const *in, int nin,
                             const alma_tensor *out, int nout, int64_t *macs, int64_t *flops);

enum {
  ALMA_OP_ALLOCS_OUTPUTS = 1 << 0, /* exec allocates its outputs (If, Loop) */
  ALMA_OP_HAS_SUBGRAPH = 1 << 1,   /* has graph attributes */
  ALMA_OP_EMPTY_INPUTS_OK = 1 << 2, /* inputs below min_inputs may be empty names (Loop's M, cond) */
  ALMA_OP_CONTAINERS = 1 << 3,      /* takes or gives sequences/optionals (sequence.c) */
  ALMA_OP_STRINGS = 1 << 4,         /* handles string tensors (core.h's handles); others refuse them */
  ALMA_OP_FILLS_OUTPUTS = 1 << 5,   /* exec writes every output element: outputs arrive uninitialised */
};

#define ALMA_OP_MAX_VERSIONS 16

typedef struct alma_op_def {
  const char *name;        /* "Conv" */
  const char *domain;      /* "" for ai.onnx */
  int versions[ALMA_OP_MAX_VERSIONS];
  int min_inputs, max_inputs;     /* max -1 = variadic */
  int min_outputs, max_outputs;
  unsigned flags;
  alma_infer_fn infer;
  alma_exec_fn exec;
  alma_cost_fn cost;       /* may be NULL */
} alma_op_def;

/* Declarations of every op in ops.def. The registry refers to each strongly, so linking the static
 * library pulls in every operator. */
#define ALMA_OP(name) extern const alma_op_def alma__op_##name;
#include "ops/ops.def"
#undef ALMA_OP

/* Looks up an op by domain and type. NULL if alma has no such op. */
const alma_op_def *alma__op_find(const char *domain, const char *op_type);
/* Binds node->op and node->since_version for the given opset. ALMA_ERR_UNSUPPORTED naming the
 * node, op and opset if the op is unknown or the opset predates every version alma implements. */
alma_status alma__op_resolve(alma_node *n, int64_t opset);
/* Number of ops in the registry and the i-th (for `alma list-ops` and docs). */
int alma__op_count(void);
const alma_op_def *alma__op_at(int i);

/* Builds an op's prepared state for n from n's attributes only (never input values, so it cannot
 * go stale while the node is unchanged): allocates a struct whose first member is alma_prepared,
 * sets its `release`, and returns it in *out. Errors name the node (alma__op_error). */
typedef alma_status (*alma_prepare_fn)(const alma_node *n, alma_prepared **out);
/* n's prepared state, built with `build` on first use (or after a pass edited the node) and cached
 * in n->prepared. Thread-safe: threads racing on first use each build, one compare-and-swap wins
 * and the losers free theirs, so every caller gets the same state. A failed build is not cached:
 * the next call builds (and fails) again. The state lives until the graph frees the node; callers
 * read it, never write it. Cast the result to the op's struct. */
alma_status alma__node_prepared(const alma_node *n, alma_prepare_fn build, const alma_prepared **out);

/* Error helper: sets the message, prefixed "node 'NAME' (OpType): ", and evaluates to s.
 * A macro so that the compiler sees the value is s itself: an error path then visibly never
 * returns ALMA_OK, and out-parameters that helpers write only on success are not "maybe
 * uninitialized" in their callers (gcc -O3 inlines the helpers and cannot see through a call).
 * s is evaluated twice: pass a status constant or a plain variable. Where the status is not
 * returned (a statement of its own), call alma__op_error_set. */
#define alma__op_error(n, s, ...) (alma__op_error_set((n), (s), __VA_ARGS__), (s))
alma_status alma__op_error_set(const alma_node *n, alma_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* For infer: the value of input i is needed but unknown statically. */
static inline alma_status alma__need_value(void) { return ALMA_ERR_DYNAMIC; }

/* Sets out's dtype/rank/dims (data untouched). */
void alma__set_shape(alma_tensor *out, alma_dtype dt, int rank, const int64_t *dims);

/* Numpy-style multidirectional broadcasting of two shapes. ALMA_ERR_SHAPE if incompatible. */
alma_status alma__broadcast_shape(int ra, const int64_t *da, int rb, const int64_t *db, int *rank_out,
                                  int64_t *dims_out);
/* For an output index `i` (row-major over out dims), the element index into an input of shape
 * (rank_in, dims_in) broadcast to (rank_out, dims_out). Helper for reference kernels. */
int64_t alma__broadcast_index(int64_t i, int rank_out, const int64_t *dims_out, int rank_in,
                              const int64_t *dims_in);

/* Executes a subgraph (If branch, Loop body) inside the current execution: inputs are the
 * subgraph's formal inputs in order; outer-scope names resolve through the enclosing executions.
 * outputs are allocated (owned) by the callee, one per subgraph output. */
alma_status alma__exec_subgraph(alma_exec_ctx *ctx, const alma_graph *g, const alma_tensor *inputs,
                                int n_inputs, alma_tensor *outputs, int n_outputs);

/* ALMA_ERR_UNSUPPORTED naming the node when a string tensor reaches an op without ALMA_OP_STRINGS
 * (in or out may hold NULLs; nout 0 checks only inputs). Called by static inference and before
 * every EAGER kernel, so no numeric kernel ever reads string handles as numbers. */
alma_status alma__op_check_strings(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out,
                                   int nout);

/* 1 when g holds sequences or optionals: a declared input/output of that type or a node of an
 * ALMA_OP_CONTAINERS op. Runtimes with their own value stores then run g through the shared
 * executor (alma__exec_graph with a hook), which keeps those values on EAGER. */
int alma__graph_has_containers(const alma_graph *g);

/* Runs one node standalone with EAGER kernels (infer, allocate, exec): for tests, constant folding
 * and runtimes' fallbacks. outputs are allocated (owned). Subgraph ops need `ctx` (may be NULL
 * otherwise). */
alma_status alma__op_run_node(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in,
                              int nin, alma_tensor *out, int nout);

/* 1 when node n's input k, whose tensor is t, is a constant of the graph ctx runs (an initializer,
 * the very data t points to): kernels may then keep something derived from it (a packed copy of a
 * Gemm's weights) for the node's lifetime. 0 with ctx NULL. */
int alma__exec_input_is_const(const alma_exec_ctx *ctx, const alma_node *n, int k, const alma_tensor *t);
/* A runtime's parallel loop (contrib_nbits.h's alma__nbits_parfor too): calls
 * fn(arg, item) once for every item in [0, items), on any of its threads, and returns when all are
 * done. */
typedef void (*alma_exec_item_fn)(void *arg, int64_t item);
typedef void (*alma_exec_parfor)(void *pctx, int64_t items, alma_exec_item_fn fn, void *arg);
/* alma__op_run_node for a node of g run outside an execution of g (a runtime's fallback), with a
 * context that knows g's constants (alma__exec_input_is_const) but no values: not for subgraph ops.
 * pf (NULL: none) is a parallel loop over `threads` threads that kernels may split their work with
 * (alma__exec_parfor). */
alma_status alma__op_run_node_of(const alma_graph *g, const alma_node *n, const alma_tensor *const *in, int nin,
                                 alma_tensor *out, int nout, int threads, alma_exec_parfor pf, void *pctx);
/* n's exec alone, with the context alma__op_run_node_of gives it, for a runtime that has inferred
 * and allocated the outputs itself (in its own buffers): not for subgraph or output-allocating ops. */
alma_status alma__op_exec_node_of(const alma_graph *g, const alma_node *n, const alma_tensor *const *in, int nin,
                                  alma_tensor *out, int nout, int threads, alma_exec_parfor pf, void *pctx);
/* The parallel loop ctx offers (alma__op_run_node_of) and its thread count, or 1 with *pf = NULL. */
int alma__exec_parfor(const alma_exec_ctx *ctx, alma_exec_parfor *pf, void **pctx);

/* Allocates an output of node n for its exec, dtype and shape taken from *t (as infer filled it):
 * uninitialised when n's op sets ALMA_OP_FILLS_OUTPUTS, zeroed otherwise. */
alma_status alma__op_alloc_output(const alma_node *n, alma_tensor *t);

#endif
