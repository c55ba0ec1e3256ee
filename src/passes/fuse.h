/* FUSE pass internals shared by fuse.c (driver and graph-editing helpers), fuse_linear.c
 * (Conv/Gemm/MatMul with BatchNormalization, bias, residual and activation), fuse_patterns.c
 * (GELU, LayerNorm, RMSNorm and attention subgraphs as PyTorch exports them) and fuse_gelu.c (the
 * tanh-approximated GELU as transformers, torch, BLOOM and Keras write it).
 *
 * Every rule is anchored at one node, matches only when each intermediate value it removes has a
 * single consumer (subgraph reads count) and is not a graph output, and edits nodes in place: the
 * anchor (or the producer it fuses into) is re-typed and takes over the final value, so every
 * value that survives keeps its index, name and shape, and the static inference results computed
 * before the rules stay valid for them. Shape conditions are checked under two bindings of the
 * graph's symbolic dims (graph/symbind.h: unrelated symbols at distinct values, different in the
 * two, related ones such as a decode graph's total = past + 1 kept so; or, where that knows less,
 * all of them bound to 2 and to 3), so a fusion never depends on one particular batch size. */
#ifndef ALMA_PASSES_FUSE_H
#define ALMA_PASSES_FUSE_H

#include "graph/infer.h"
#include "passes/pass.h"

enum {
  ALMA__FUSE_PAD,      /* zero Pad on spatial axes folded into the next Conv/FusedConv/AveragePool's pads */
  ALMA__FUSE_BN,       /* BatchNormalization folded into Conv/ConvTranspose/Gemm/MatMul */
  ALMA__FUSE_GELU,     /* Div, Erf, Add, Mul, Mul -> Gelu */
  ALMA__FUSE_GELU_TANH, /* 0.5 x (1 + Tanh(k (x + c x^3))) in its exporters' forms -> Gelu(tanh) (fuse_gelu.c) */
  ALMA__FUSE_LN,       /* ReduceMean ... Add -> LayerNormalization */
  ALMA__FUSE_RMS,      /* Pow 2, ReduceMean, Add eps, Sqrt, Div [Mul gamma] -> RMSNormalization */
  ALMA__FUSE_ATTN,     /* MatMul [scale] [mask] Softmax MatMul -> alma.Attention */
  ALMA__FUSE_BIAS,     /* + constant bias folded into Conv/Gemm/FusedMatMul; MatMul + Add -> Gemm */
  ALMA__FUSE_RESID,    /* Conv + Add(residual) -> alma.FusedConv with Z */
  ALMA__FUSE_ACT,      /* Conv/Gemm/MatMul + activation -> alma.Fused* */
  ALMA__FUSE_NRULES
};

typedef struct alma__fuse_ctx {
  alma_graph *g;
  alma_infer_result r[2]; /* static inference under the two bindings */
  int stats[ALMA__FUSE_NRULES];
  int changed;
  int serial; /* for unique names of new constants */
} alma__fuse_ctx;

typedef alma_status (*alma__fuse_rule)(alma__fuse_ctx *c, int node);

alma_status alma__fuse_rule_pad(alma__fuse_ctx *c, int node);
alma_status alma__fuse_rule_bn(alma__fuse_ctx *c, int node);
alma_status alma__fuse_rule_bias(alma__fuse_ctx *c, int node);
alma_status alma__fuse_rule_residual(alma__fuse_ctx *c, int node);
alma_status alma__fuse_rule_activation(alma__fuse_ctx *c, int node);
alma_status alma__fuse_rule_gelu(alma__fuse_ctx *c, int node);
alma_status alma__fuse_rule_gelu_tanh(alma__fuse_ctx *c, int node);
alma_status alma__fuse_rule_layernorm(alma__fuse_ctx *c, int node);
alma_status alma__fuse_rule_rmsnorm(alma__fuse_ctx *c, int node);
alma_status alma__fuse_rule_attention(alma__fuse_ctx *c, int node);

/* ---- queries ----------------------------------------------------------------------------------- */
/* Whether node i is live and is domain:op_type ("" = ai.onnx). */
int alma__fuse_is(const alma__fuse_ctx *c, int i, const char *domain, const char *op_type);
/* The live node producing v if it is domain:op_type (op_type NULL: any), else -1. */
int alma__fuse_producer(const alma__fuse_ctx *c, int v, const char *domain, const char *op_type);
/* The node consuming v when v has exactly one use (one input slot of one live node, no subgraph
 * read) and is not a graph output; else -1. */
int alma__fuse_only_consumer(const alma__fuse_ctx *c, int v);
/* Number of uses of v (input slots, subgraph reads and graph outputs). */
int alma__fuse_uses(const alma__fuse_ctx *c, int v);
/* The other input of a two-input node, given one of them; -1 if v is not an input. */
int alma__fuse_other_input(const alma__fuse_ctx *c, int node, int v);

/* Inferred shape of v in binding b (0 or 1), NULL if unknown. */
const alma_tensor *alma__fuse_info(const alma__fuse_ctx *c, int v, int b);
/* dtype (UNDEFINED if unknown), rank (-1 if unknown or binding-dependent), a dim (-1 unless the
 * same in both bindings; negative axes count from the end). */
alma_dtype alma__fuse_dtype(const alma__fuse_ctx *c, int v);
int alma__fuse_rank(const alma__fuse_ctx *c, int v);
int64_t alma__fuse_dim(const alma__fuse_ctx *c, int v, int axis);
/* v and w have the same known shape in both bindings. */
int alma__fuse_same_shape(const alma__fuse_ctx *c, int v, int w);
/* The value of v when it is statically known and independent of the symbolic dims, else NULL. */
const alma_tensor *alma__fuse_const(const alma__fuse_ctx *c, int v);
/* A constant with one element (any rank), as a double. */
int alma__fuse_scalar(const alma__fuse_ctx *c, int v, double *x);
/* |a - b| <= tol * |b| */
int alma__fuse_near(double a, double b, double tol);

/* ---- edits ------------------------------------------------------------------------------------- */
/* Re-types node i as domain:op_type bound at `version` (which the op must list). */
alma_status alma__fuse_retype(alma__fuse_ctx *c, int i, const char *domain, const char *op_type, int version);
alma_status alma__fuse_set_inputs(alma__fuse_ctx *c, int i, const int *inputs, int n);
/* Node i now produces v as its only output. */
alma_status alma__fuse_set_output(alma__fuse_ctx *c, int i, int v);
void alma__fuse_kill(alma__fuse_ctx *c, int i);
/* Attribute edits: new arrays in the arena (attribute payloads may be shared with the model). */
alma_status alma__fuse_attr_clear(alma__fuse_ctx *c, int i);
alma_status alma__fuse_attr_drop(alma__fuse_ctx *c, int i, const char *name);
alma_status alma__fuse_attr_f(alma__fuse_ctx *c, int i, const char *name, float f);
alma_status alma__fuse_attr_i(alma__fuse_ctx *c, int i, const char *name, int64_t v);
alma_status alma__fuse_attr_s(alma__fuse_ctx *c, int i, const char *name, const char *s);
alma_status alma__fuse_attr_floats(alma__fuse_ctx *c, int i, const char *name, const float *f, int n);
alma_status alma__fuse_attr_ints(alma__fuse_ctx *c, int i, const char *name, const int64_t *v, int n);
/* A new constant (initializer-like value) named after `base`, zero-filled; *t_out is its tensor for
 * the caller to fill. Returns the value index, or -1 (error set) on OOM. */
int alma__fuse_new_const(alma__fuse_ctx *c, const char *base, alma_dtype dt, int rank, const int64_t *dims,
                         alma_tensor **t_out);
/* A new intermediate value named after `base`. The rules see no shape for it until the next
 * iteration's inference (alma__fuse_info gives NULL), so they never match on it. Returns the value
 * index, or -1 (error set) on OOM. */
int alma__fuse_new_value(alma__fuse_ctx *c, const char *base);
/* A new 1-D int64 constant holding v[0..n). Returns the value index, or -1 (error set). */
int alma__fuse_new_ints(alma__fuse_ctx *c, const char *base, const int64_t *v, int n);
/* Appends a node of the model's default-domain opset (or alma:op_type version 1 when domain is
 * "alma") reading `in` and writing `out`, no attributes. Returns its index, or -1 (error set).
 * It may move g->nodes: re-read node pointers after it. The compaction at the end of the
 * iteration puts it in topological order. */
int alma__fuse_add_node(alma__fuse_ctx *c, const char *domain, const char *op_type, const char *base, const int *in,
                        int nin, const int *out, int nout);
/* Counts a successful rewrite. */
void alma__fuse_done(alma__fuse_ctx *c, int rule);

#endif
