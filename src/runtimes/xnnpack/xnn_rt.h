/* XNNPACK runtime internals, shared by xnnpack.c (partitioning, execution), xnn_build.c (subgraph
 * construction per input-shape signature) and xnn_layout.c (NCHW <-> NHWC reorders).
 *
 * The graph is cut into partitions: connected sets of float32 nodes XNNPACK can run, each one
 * XNNPACK subgraph. A partition runs when the executor reaches its last node (the anchor); the
 * executor's hook skips its other nodes. A partition is in NHWC mode when it holds a spatial op
 * (Conv, pools, PRelu): its rank-4 values are NHWC inside XNNPACK and reordered only at the
 * partition's boundary; otherwise every value keeps ONNX's layout (plain mode, no reorders).
 *
 * int8 (xnn_quant.c): QuantizeLinear / DequantizeLinear become XNNPACK convert nodes, and a QDQ
 * cluster DequantizeLinear(x) -> Conv/Gemm/MatMul(DequantizeLinear(int8 W)) -> [Relu|Clip] ->
 * [MaxPool] -> [Flatten|Reshape] -> QuantizeLinear, or a QLinearConv / QLinearMatMul, becomes one quantized XNNPACK
 * convolution reading and writing int8, so int8 values stay int8 between such nodes; an Add of two
 * DequantizeLinear -> [Relu|Clip] -> QuantizeLinear (a quantized residual) one quantized add. XNNPACK
 * values of 8-bit tensors are qint8 (signed domain) or quint8 (unsigned domain); a uint8 tensor
 * in the signed domain holds q - 128 with zero point zp - 128 (the same real values), converted at
 * the partition boundary. */
#ifndef ALMA_XNN_RT_H
#define ALMA_XNN_RT_H

#ifdef ALMA_HAVE_XNNPACK

#include <pthreadpool.h>
#include <xnnpack.h>

#include "graph/infer.h"
#include "ops/fused.h"
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
  XK_QUANT,     /* QuantizeLinear, per tensor: xnn convert fp32 -> qint8/quint8 */
  XK_DEQUANT,   /* DequantizeLinear, per tensor, of a computed value: xnn convert qint8/quint8 -> fp32 */
};
/* quantized convolution / fully-connected node (xrt_node.q) */
enum { XQ_NONE = 0, XQ_S8 = 1, XQ_U8 = 2 }; /* qint8 with per-channel int8 weights; quint8 with uint8 weights */
enum { XB_ADD, XB_SUB, XB_MUL, XB_DIV, XB_MAX, XB_MIN };
enum { XU_ABS, XU_NEG, XU_FLOOR, XU_CEIL, XU_SQRT, XU_ROUND, XU_SIGMOID, XU_HARDSWISH };

/* A constant laid out for XNNPACK (owned; XNN_EXTRA_BYTES of padding after the data). */
typedef struct xrt_static {
  float *data;
  int rank;
  size_t dims[XNN_MAX_TENSOR_DIMS];
} xrt_static;

/* Quantized weights of a conv/fc node in XNNPACK's layout (owned; padded like xrt_static). */
typedef struct xrt_qstatic {
  void *w;                  /* int8 (XQ_S8) or uint8 (XQ_U8) */
  int32_t *b;               /* int32 bias in units of x_scale * w_scale[c]; NULL: none */
  float *ws, *bs;           /* per output channel: weight scales, bias scales (XQ_S8) */
  float ws1;                /* XQ_U8: the weights' one scale and zero point */
  int32_t wzp;
  int rank;
  size_t dims[4];
  size_t chans;             /* output channels */
} xrt_qstatic;

/* How an 8-bit tensor lives in XNNPACK (xrt_plan.vq, per graph value). */
typedef struct xrt_vq {
  unsigned char q;          /* an 8-bit quantized value inside XNNPACK */
  unsigned char dom;        /* XQ_S8: qint8, XQ_U8: quint8 */
  unsigned char flip;       /* its ONNX type has the other signedness: q ^ 0x80 at the boundary */
  float scale;
  int32_t zp;               /* in the XNNPACK domain */
} xrt_vq;

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
  /* FUSE's alma.FusedConv / FusedGemm / FusedMatMul: conv/fc, then + Z (FusedConv's residual,
   * input zslot), then the activation (a clamp folds into the last op; others are XNNPACK nodes) */
  int fused_op;             /* an alma.Fused* node */
  int fcg;                  /* fc: Gemm semantics (Gemm, FusedGemm) */
  int zslot;                /* FusedConv: input index of Z (-1: none) */
  int act_clamp;            /* the fused activation is a clamp (out_min/out_max) */
  alma_fused_act fact;      /* the fused activation */
  /* int8 (xnn_quant.c) */
  int q;                    /* conv/dwconv/fc computed in 8 bits: XQ_S8 or XQ_U8 (XQ_NONE: float) */
  int qlin;                 /* a QLinearConv / QLinearMatMul (always quantized) */
  int qpass;                /* DequantizeLinear -> MaxPool / Flatten / Reshape -> QuantizeLinear with the same
                               parameters: the node runs on the 8-bit values (qdq, qquant set) */
  int qadd;                 /* Add(DequantizeLinear(a), DequantizeLinear(b)) -> [Relu|Clip] -> QuantizeLinear: one
                               quantized add of a and b (qdq, qdq2, qact, qquant set) */
  int qdq;                  /* QDQ cluster: the DequantizeLinear producing input 0 (-1) */
  int qdq2;                 /* quantized add: the DequantizeLinear producing input 1 (-1) */
  int qact, qpool, qreshape, qquant; /* QDQ cluster: its Relu/Clip, MaxPool, Flatten/Reshape and
                                        QuantizeLinear nodes (-1: none) */
  int qin;                  /* the 8-bit value the quantized node reads */
  float qs, qz;             /* QuantizeLinear / DequantizeLinear: scale, zero point (ONNX type) */
  xrt_qstatic qw;
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
  int fc_only;              /* plain layout, only float fully-connected nodes on constant 2-D weights, the
                               nodes folded into them and reshapes: with at most ALMA_PACKED_MAX_ROWS rows
                               in every one, the nodes run on EAGER's kernels on the pool (packed) */
  int64_t packed_runs;      /* runs that took that path (describe) */
  xrt_build *builds;        /* one per input-shape signature, newest first */
  int n_builds;
} xrt_part;

typedef struct xrt_plan {
  const alma_graph *g;
  int threads;
  pthreadpool_t pool;       /* NULL when threads == 1: XNNPACK's operators and the NHWC reorders */
  struct alma__pool *apool; /* NULL when threads == 1: alma's kernels between subgraphs (runtimes/pool.c) */
  xrt_node *xn;             /* one per node */
  unsigned char *defer;     /* per node: in a partition (the executor leaves it to the hook) */
  unsigned char *pooled;    /* per node outside partitions: a float Gemm/MatMul (or FUSE's fused form) run
                               by EAGER's kernel with the pool as its parallel loop (few rows on constant
                               weights: the packed kernel, ops/gemm_packed.h); deferred, the hook runs it */
  unsigned char *exported;  /* per value: a partition value read outside it (allocated by the hook) */
  int n_parts;
  xrt_part *parts;
  alma_tensor *cval;        /* per value: DequantizeLinear of constants, evaluated at compile (no data: none) */
  xrt_vq *vq;               /* per value: its int8 form in XNNPACK */
  alma_dtype *vdt;          /* per value: its static dtype (what the executor hands over) */
  int n_qnodes, n_qother;   /* convolution/matmul nodes and pooling/reshape nodes computed in 8 bits */
  int n_qadds;              /* Add nodes computed in 8 bits */
  char why_none[256];       /* why no node runs on XNNPACK, when static inference failed */
  double *prof_s;           /* profile_start: wall seconds per node since (a partition's on its nodes) */
  int64_t *prof_runs;
} xrt_plan;

struct xrt_build {
  xrt_build *next;
  int64_t *sig;             /* per external input: rank, dims */
  int n_sig;
  int n_in, n_out;
  int failed;               /* XNNPACK rejected this shape: the partition's nodes run on EAGER */
  char why[320];
  xnn_runtime_t rt;
  void **in_buf;            /* per external input: its XNNPACK layout, padded */
  void **out_buf;           /* per exported value: NHWC staging (rank 4 in NHWC mode), else NULL */
  struct xnn_external_value *ext; /* n_in + n_out */
  int set_up;               /* xnn_setup_runtime succeeded once */
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
 * being C and H*W or the reverse), elements of `es` bytes (4 or 1). Parallel over the pool, with
 * pthreadpool's flags (PTHREADPOOL_FLAG_YIELD_WORKERS after a partition's last reorder). */
void alma__xrt_transpose(pthreadpool_t pool, const void *src, void *dst, size_t es, size_t batch, size_t rows, size_t cols,
                         uint32_t flags);

/* ---- int8 (xnn_quant.c) ---- */
typedef struct uses_t {
  int *off, *list;        /* consumers of value v: list[off[v] .. off[v+1]) (node indices) */
  unsigned char *is_out;  /* graph outputs */
} uses_t;

/* The parts of a DequantizeLinear of constants producing v (per tensor or along one axis). */
typedef struct xrt_dqc {
  const alma_tensor *x, *scale, *zp; /* zp may be NULL */
  int axis;                          /* -1: per tensor */
} xrt_dqc;
int alma__xrt_dq_const(const alma_graph *g, int v, xrt_dqc *out);
/* Evaluates every DequantizeLinear of constants into p->cval (EAGER's kernel: the same floats). */
alma_status alma__xrt_eval_dq_consts(const alma_graph *g, alma_tensor *cval);
/* QuantizeLinear / DequantizeLinear / QLinearConv / QLinearMatMul: fills xn when XNNPACK takes n.
 * vdt: static dtypes; cval: evaluated constants. */
int alma__xrt_analyze_quant(const alma_graph *g, const alma_tensor *cval, const alma_dtype *vdt, const alma_node *n,
                            int rank_x, int rank_y, xrt_node *xn);
/* Before partitioning: drops Q/DQ nodes whose parameters disagree with their value's, finds the
 * QDQ clusters and quantized adds, picks each 8-bit value's domain. */
alma_status alma__xrt_quant_plan(xrt_plan *p, const uses_t *u);
/* After partitioning: keeps the clusters whose nodes share a partition and folds them. */
void alma__xrt_quant_fold(xrt_plan *p, const uses_t *u);
alma_status alma__xrt_prepare_qstatics(xrt_plan *p, int node);
void alma__xrt_qstatic_free(xrt_qstatic *s);
/* output clamp of a quantized node writing value y, from a float range */
void alma__xrt_qclamp(const xrt_vq *vy, float lo, float hi, float *qlo, float *qhi);

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

/* The constant behind value v for the runtime: a DequantizeLinear of constants (evaluated at
 * compile), else alma__xrt_const. */
static inline const alma_tensor *alma__xrt_cst(const alma_graph *g, const alma_tensor *cval, int v) {
  if (v >= 0 && cval && cval[v].data) return &cval[v];
  return alma__xrt_const(g, v);
}

#endif
#endif
