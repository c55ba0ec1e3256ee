/* XNNPACK runtime internals, shared by xnnpack.c (partitioning, execution), xnn_build.c (subgraph
 * construction per input-shape signature) and xnn_layout.c (NCHW <-> NHWC reorders).
 *
 * The graph is cut into partitions: connected sets of float32 nodes XNNPACK can run, each one
 * XNNPACK subgraph. A partition runs when the executor reaches its last node (the anchor); the
 * executor's hook skips its other nodes. A partition is in NHWC mode when it holds a spatial op
 * (Conv, pools, PRelu): its rank-4 values are NHWC inside XNNPACK and reordered only at the
 * partition's boundary; otherwise every value keeps ONNX's layout (plain mode, no reorders). */
#ifndef ALMA_XNN_RT_H
#define ALMA_XNN_RT_H

#ifdef ALMA_HAVE_XNNPACK

#include <pthreadpool.h>
#include <xnnpack.h>

#include "graph/infer.h"
#include "runtimes/exec.h"
#include "runtimes/runtime.h"

enum xrt_kind {
  XK_NONE = 0,
  XK_CONV,      /* Conv, dense or grouped: xnn convolution_2d */
  XK_DWCONV,    /* Conv with one input channel per group: xnn depthwise_convolution_2d */
  XK_FC,        /* Gemm / MatMul with constant weights: xnn fully_connected */
  XK_MAXPOOL,
  XK_AVGPOOL,
  XK_GAP,       /* GlobalAveragePool */
  XK_BINARY,    /* Add Sub Mul Div Max Min (sub = XB_*) */
  XK_UNARY,     /* sub = XU_* */
  XK_CLAMP,     /* Relu, Clip */
  XK_LEAKY,     /* LeakyRelu */
  XK_ELU,
  XK_SOFTMAX,
  XK_RESHAPE,   /* Reshape, Flatten: a view when the layout allows */
  XK_PRELU,
  XK_BN,        /* BatchNormalization (inference): a multiply and an add by per-channel constants */
  XK_PAD,       /* Pad, constant mode, non-negative constant pads */
};
enum { XB_ADD, XB_SUB, XB_MUL, XB_DIV, XB_MAX, XB_MIN };
enum { XU_ABS, XU_NEG, XU_FLOOR, XU_CEIL, XU_SQRT, XU_ROUND, XU_SIGMOID, XU_HARDSWISH };

/* A constant laid out for XNNPACK (owned; XNN_EXTRA_BYTES of padding after the data). */
typedef struct xrt_static {
  float *data;
  int rank;
  size_t dims[XNN_MAX_TENSOR_DIMS];
} xrt_static;

typedef struct xrt_node {
  int kind, sub;
  int can_plain, can_nhwc;  /* the node runs in a partition of that mode */
  int part;                 /* partition index, -1 = EAGER */
  int fused_into;           /* folded into node fused_into (a bias Add, an activation) (-1: no) */
  int fused_act;            /* the last node folded into this one: its output is this node's (-1) */
  int has_clamp;            /* an activation is folded into out_min/out_max */
  int bias_node;            /* FC: the Add whose constant is its bias (-1: none) */
  int flatten_perm;         /* FC: its input is an NCHW Flatten of NHWC data, reorder the weights' K */
  int64_t flat_c, flat_hw;  /* Flatten (sub 1): the C and H*W it flattens */
  float out_min, out_max;   /* output clamp of ops that take one (from a folded activation) */
  float alpha;              /* LeakyRelu slope, Elu alpha */
  int out_rank;             /* static rank of output 0 */
  int *ext_slot;            /* per input: index into its partition's external inputs, or -1 */
  xrt_static w, b;          /* conv/fc weights and bias; binary constant operand (w); PRelu slope
                               (w); BatchNormalization scale (w) and shift (b) */
  int cst_slot;             /* binary: the constant operand's input index, -1 if none */
  int64_t chans;            /* PRelu, BatchNormalization: channel count */
  int64_t pad_pre[XNN_MAX_TENSOR_DIMS], pad_post[XNN_MAX_TENSOR_DIMS]; /* Pad, ONNX axis order */
} xrt_node;

typedef struct xrt_build xrt_build;

typedef struct xrt_part {
  int n_nodes, *nodes;      /* ascending node indices */
  int anchor;               /* the last node: the partition runs there */
  int nhwc;                 /* layout mode */
  int n_in, *in;            /* dynamic external inputs (values) */
  unsigned char *in_copy;   /* per external input: the executor frees it before the anchor, copy it */
  int n_out, *out;          /* values read outside the partition (or graph outputs) */
  int reorders;             /* rank-4 boundary values transposed per run (NHWC mode) */
  xrt_build *builds;        /* one per input-shape signature, newest first */
  int n_builds;
} xrt_part;

typedef struct xrt_plan {
  const alma_graph *g;
  int threads;
  pthreadpool_t pool;       /* NULL when threads == 1 */
  xrt_node *xn;             /* one per node */
  unsigned char *defer;     /* per node: in a partition (the executor leaves it to the hook) */
  unsigned char *exported;  /* per value: a partition value read outside it (allocated by the hook) */
  int n_parts;
  xrt_part *parts;
  char why_none[256];       /* why no node runs on XNNPACK, when static inference failed */
} xrt_plan;

struct xrt_build {
  xrt_build *next;
  int64_t *sig;             /* per external input: rank, dims */
  int n_sig;
  int n_in, n_out;
  int failed;               /* XNNPACK rejected this shape: the partition's nodes run on EAGER */
  char why[320];
  xnn_runtime_t rt;
  float **in_buf;           /* per external input: its XNNPACK layout, padded */
  float **out_buf;          /* per exported value: NHWC staging (rank 4 in NHWC mode), else NULL */
  struct xnn_external_value *ext; /* n_in + n_out */
};

/* Builds the XNNPACK runtime of partition P for the shapes in `shape` (one per graph value: the
 * partition's values, as the executor gave them). A shape XNNPACK cannot take sets b->failed and
 * b->why and returns ALMA_OK; only running out of memory is an error. */
alma_status alma__xrt_build(xrt_plan *p, xrt_part *P, const alma_tensor *shape, xrt_build *b);
void alma__xrt_build_free(xrt_build *b);

/* Constants for partition nodes, laid out for the partition's mode (after partitioning). */
alma_status alma__xrt_prepare_statics(xrt_plan *p, int node);
void alma__xrt_static_free(xrt_static *s);

/* dst[b][c][r] = src[b][r][c] for b < batch, r < rows, c < cols (NCHW <-> NHWC with rows/cols
 * being C and H*W or the reverse). Parallel over the pool. */
void alma__xrt_transpose(pthreadpool_t pool, const float *src, float *dst, size_t batch, size_t rows, size_t cols);

/* The constant behind value v: an initializer (not overridable as a graph input) or a Constant
 * node's tensor, possibly through a chain of Identity nodes (PyTorch exports shared weights that
 * way); NULL if v is computed. */
static inline const alma_tensor *alma__xrt_const(const alma_graph *g, int v) {
  while (v >= 0) {
    const alma_value *val = &g->values[v];
    if (val->init) return val->is_input ? NULL : val->init;
    const alma_node *n = val->producer >= 0 && val->producer < g->n_nodes ? &g->nodes[val->producer] : NULL;
    if (!n || n->domain[0]) return NULL;
    if (!strcmp(n->op_type, "Constant")) {
      const alma_attr *a = alma__node_attr(n, "value");
      return a && a->type == ALMA_ATTR_TENSOR && a->t && a->t->data ? a->t : NULL;
    }
    if (strcmp(n->op_type, "Identity") || n->n_inputs != 1) return NULL;
    v = n->inputs[0];
  }
  return NULL;
}

#endif
#endif
