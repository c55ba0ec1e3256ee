/* DNNL runtime: int8 execution of quantized graphs (dnnl_int8_plan.c, dnnl_int8_prim.c,
 * dnnl_int8_exec.c); this header holds what the three share.
 *
 * Quantized models arrive as QDQ graphs (alma's INT8_STATIC, ONNX Runtime's quantizer, PyTorch QAT
 * exports): DequantizeLinear -> Conv/MatMul/Gemm in float -> QuantizeLinear. EAGER and the float
 * path run them as written. At compile time dnnl_int8_plan.c finds the clusters
 *
 *   DequantizeLinear(x: u8/s8, per-tensor)                                      \
 *   DequantizeLinear(W: s8 constant or QuantizeLinear(float constant), zero point 0,
 *                    per-tensor or per output channel)                          -> Conv | MatMul | Gemm
 *   [DequantizeLinear(B: int32 constant) | float constant bias]                 /
 *     -> [eltwise nodes, one Add of a residual] -> [QuantizeLinear (per-tensor)]
 *
 * and runs each as ONE oneDNN int8 primitive: source u8/s8 with its zero point, weights s8
 * reordered once into the primitive's layout and cached, the bias in accumulator units, output
 * scales x_scale * w_scale[c] (per channel), the eltwise and sum post-ops, and an int8 destination
 * with its zero point when the QuantizeLinear belongs to the cluster (else float32). The
 * DequantizeLinear nodes read only by clusters ("lazy") never run. QLinearConv / QLinearMatMul /
 * ConvInteger / MatMulInteger nodes map onto the same primitives (DK_QLINEAR), and a
 * QuantizeLinear / DequantizeLinear left on its own (before a residual Add, say) runs as a oneDNN
 * reorder with scale and zero point that keeps the value's layout (DK_QDQ): int8 values stay int8
 * and blocked between int8 primitives. A QuantizeLinear feeding a cluster writes the layout that
 * cluster's primitive reads.
 *
 * INT8_DYNAMIC's graphs (and ONNX Runtime's quantize_dynamic output) quantize activations at run
 * time: DynamicQuantizeLinear -> ConvInteger/MatMulInteger -> Cast -> Mul(scales) -> [bias] -> ...
 * Each such chain is a "dyn" cluster (match_dyn): weights minus their zero point as s8, constant
 * scales as output scales, and the batch's scale and zero point handed to the same primitive when it
 * runs (a run-time source zero point; the scale through a binary-mul post-op, as oneDNN 2.6's int8
 * convolutions take no run-time output scales). DynamicQuantizeLinear runs on its own (run_dynq)
 * with EAGER's arithmetic, in its input's layout.
 *
 * Anything else falls back, with the float path's results: what does not match at compile time
 * keeps its nodes; a cluster declined at run time (a shape or type oneDNN rejects, a reference-only
 * kernel) runs its nodes one by one, its lazy DequantizeLinear nodes computed on demand.
 *
 * Numerics: the primitive computes the integer products exactly (int32 accumulation) and
 * requantizes once in float32, where EAGER sums dequantized float products; the two round
 * differently near a half step, so int8 outputs agree within one quantization step.
 * x86 without VNNI (AVX2, AVX-512 before Cascade Lake) multiplies u8 x s8 with vpmaddubsw, whose
 * int16 sums of two products saturate (255 * 127 * 2 > 32767): oneDNN leaves that to the user for
 * u8 sources (observed here: results off by up to 128 steps on random data), and for s8 sources
 * shifts by +128 and halves the convolution weights (7-bit weights: a bounded error of one weight
 * step) while its s8 matmul is exact. So on such CPUs convolution sources with a non-zero zero
 * point get 7-bit weights: the u8 source as it is, the weights halved here as oneDNN's s8 path
 * would halve them and the output scales doubled (the same integers as giving the source as s8,
 * x - 128, without that extra pass over it; dnnl.int8_halve=off shifts instead), and
 * dnnl.int8_conv_src=u8 selects the exact-but-saturating full-weight form instead.
 * A convolution without padding takes its source zero point in the bias (- zp * sum(w), exact)
 * rather than as oneDNN's zero-point attribute. A 1x1 cluster whose int8 output only a depthwise
 * 3x3 cluster reads runs with that cluster as oneDNN's depthwise post-op (plan_dw, alma__dn_q_exec_dw). Depthwise
 * convolutions are the exception: oneDNN's depthwise kernels multiply in 32 bits, exact with u8
 * sources on any CPU, so they always get u8 (s8 sources shifted up; see conv_is_dw). With VNNI or AMX
 * (vpdpbusd) u8 sources go in as they are and everything is exact. Weights within [-64, 64] cannot
 * saturate u8 sources (255 * 64 * 2 < 32767): dyn clusters give those as u8 always, and dyn matmuls
 * with wider weights run in float32 on the dequantized values instead (exact, fp32 speed). */
#ifndef ALMA_DNNL_INT8_H
#define ALMA_DNNL_INT8_H

#ifdef ALMA_HAVE_DNNL

#include "ops/nn_util.h"
#include "runtimes/dnnl/dnnl_rt.h"

#define F32 ALMA_DTYPE_FLOAT32
#define U8 ALMA_DTYPE_UINT8
#define S8 ALMA_DTYPE_INT8
#define S32 ALMA_DTYPE_INT32

enum { QK_CONV = 1, QK_MATMUL, QK_GEMM, QK_ADD, QK_MOVE };
enum { Q_MAX_ELT = 4 };

/* A created int8 primitive for one input layout and one set of parameters (the key). */
typedef struct qprim {
  int valid, declined;
  dnnl_memory_desc_t xmd;           /* key: the source as it arrives */
  uint64_t pkey;                    /* key: hash of shapes and quantization parameters */
  dnnl_primitive_desc_t pd;
  dnnl_primitive_t p;
  dnnl_memory_desc_t src_md, wei_md, dst_md, bias_md, wplain;
  dnnl_memory_t m_src, m_wei, m_bias, m_dst, m_scr;
  size_t scr_size;
  void *wei;                        /* constant weights in wei_md (owned) */
  float *bias;                      /* bias in accumulator units (owned) */
  int shift;                        /* 1: the u8 source is given as s8 (x - 128); -1: s8 as u8 (x + 128) */
  int has_sum;
  int rt_zp;                        /* dyn: the source zero point is a run-time argument (m_zp) */
  dnnl_memory_t m_zp, m_xs;         /* dyn: run-time source zero point, source scale (binary post-op) */
  int32_t zpv;
  float xsv;
  dn_buf *cache;                    /* DK_QDQ of a constant: its result, kept across runs */
  dnnl_memory_t m_dww, m_dwb;       /* 1x1 + depthwise: the depthwise post-op's weights and bias */
  void *dww;                        /* its weights in the primitive's layout (owned) */
  float *dwb;                       /* its bias in accumulator units (owned) */
  char impl[64];
  char why[160];
} qprim;

/* What one int8 primitive computes, resolved from constants (clusters) or inputs (QLinear*). */
typedef struct qargs {
  int kind;
  const alma_node *n;               /* the node with the attributes (Conv/Gemm/QLinearConv...) */
  dn_val *x;                        /* quantized source, u8 or s8 */
  float xs;
  int32_t xzp;
  dn_val *x2;                       /* QK_ADD: the second quantized source */
  float x2s;
  int32_t x2zp;
  const void *w;                    /* int8 weights, as ONNX stores them (emu: float32) */
  int wrank;
  int64_t wdims[ALMA_MAX_RANK];
  int wconst;                       /* constant: reordered once and cached */
  const float *ws;                  /* weight scales: 1 or one per output channel */
  int64_t nws;
  const int32_t *bq;                /* bias in accumulator units (int32), or */
  const float *bf;                  /* bias in real units (float32), or neither */
  int n_elt;
  dn_elt elt[Q_MAX_ELT];
  dn_val *res;                      /* residual added by a sum post-op, */
  int sum_pos;                      /* after this many eltwise steps */
  int yq;                           /* quantized destination: */
  float ys;
  int32_t yzp;
  alma_dtype ydt;
  int s32;                          /* ConvInteger/MatMulInteger: int32 accumulators out */
  int transb;                       /* Gemm */
  int dyn;                          /* INT8_DYNAMIC cluster: xs and xzp are this run's (run-time arguments) */
  int emu;                          /* dyn matmul in float32 on the dequantized source (no exact int8 matmul) */
  int w7;                           /* weights within [-64, 64]: u8 sources cannot saturate without VNNI */
  int split;                        /* dyn matmul: W as [W_hi; W_lo] (both within [-64, 64]) times [x, x] */
  qprim *alt;                       /* dyn: the primitive for a non-zero source zero point */
} qargs;

/* A QDQ cluster: its nodes, and everything its primitive needs, read from constants at compile. */
typedef struct qclu {
  int kind, anchor, last;
  int nmem, mem[DN_MAX_MEMBERS];
  int xv, dq_x;                     /* quantized source value and the DequantizeLinear reading it */
  int dq_w, dq_b;                   /* DequantizeLinear nodes of the weights and the bias (-1: none) */
  float xs;
  int32_t xzp;
  alma_dtype xdt;                   /* from the zero point; UNDEFINED: checked at run time */
  int x2v;                          /* QK_ADD: the second source (its DequantizeLinear is dq_w) */
  float x2s;
  int32_t x2zp;
  alma_dtype x2dt;
  int x2_extra_use;                 /* as x_extra_use, for x2v */
  const int8_t *w;
  int8_t *w_own;                    /* weights quantized here (QuantizeLinear of a float constant) */
  int wrank;
  int64_t wdims[ALMA_MAX_RANK];
  float *ws;
  int64_t nws;
  int32_t *bq;                      /* owned */
  float *bf;                        /* owned */
  int n_elt;
  dn_elt elt[Q_MAX_ELT];
  int sum_other;                    /* residual value, -1 */
  int sum_pos;                      /* eltwise steps before the sum */
  int yq;
  float ys;
  int32_t yzp;
  alma_dtype ydt;
  int outv;                         /* the last member's output */
  int transb;
  int x_extra_use;                  /* the DequantizeLinear of x also runs: the cluster holds a use of xv */
  int dyn;                          /* INT8_DYNAMIC form: DynamicQuantizeLinear -> ConvInteger/MatMulInteger -> Cast -> Mul.. */
  int xs_v, xzp_v;                  /* dyn: DynamicQuantizeLinear's scale and zero point (read when it runs) */
  int emu, w7, split;               /* dyn: see qargs */
  float *wf;                        /* emu: the dequantized weights w * w_scale (owned) */
  int8_t *wsplit;                   /* split: [W_hi; W_lo], 2K x N (owned) */
  int n_int8_runs, n_fallback_runs;
  qprim pr;
  qprim pr2;                        /* dyn: the primitive for a non-zero source zero point (pr: zero point 0) */
  int dw_next;                      /* 1x1 cluster: the depthwise cluster it may run fused (oneDNN's dw post-op), -1 */
  int dw_prev;                      /* depthwise cluster: the 1x1 cluster that may compute it, -1 */
  int64_t dw_done_run;              /* depthwise cluster: the run in which the 1x1 cluster computed it */
  int n_dw_runs;                    /* 1x1 cluster: runs fused with its depthwise cluster */
  qprim prdw;                       /* 1x1 cluster: the fused 1x1 + depthwise primitive */
} qclu;

typedef struct qlazy {
  int node, out, pending, ran;
} qlazy;

typedef struct dn_qstate {
  int dw_off;                       /* dnnl.dw_fuse=off: no int8 1x1 + depthwise fusion */
  qclu *clu;
  int nclu;
  qlazy *lazy;
  int nlazy;
  int *hint;                        /* per node: QuantizeLinear -> cluster whose source layout it writes, -1 */
  qprim **nprim;                    /* per node: DK_QDQ / DK_QLINEAR primitives */
  int64_t run_id;
  int conv_s8;                      /* u8 sources to convolutions as s8 (x - 128): 0 never, 1 always, 2 when
                                       their zero point is not 0 (see the top comment) */
  int mm_off;                       /* no int8 matmul (CPU without VNNI): see the top comment */
  int fallback;                     /* dnnl.int8=fallback: decline every int8 primitive at run time (tests) */
  int off;                          /* dnnl.int8=off: no clusters, no int8 primitives */
  int move_off;                     /* dnnl.int8_move=off: no QK_MOVE clusters (comparisons) */
} dn_qstate;

/* ---- small helpers -------------------------------------------------------------------------------- */
static inline const char *alma__dn_q_dt_name(alma_dtype t) { return t == U8 ? "u8" : t == S8 ? "s8" : t == S32 ? "s32" : "f32"; }
static inline int alma__dn_q_is_q8(alma_dtype t) { return t == U8 || t == S8; }
static inline uint64_t alma__dn_q_fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* ---- dnnl_int8_plan.c ---------------------------------------------------------------------------- */
/* The plan's int8 state, created (with the CPU's and the options' choices) on first use; NULL on OOM. */
dn_qstate *alma__dn_qstate(dn_plan *p);
/* The node producing value v, or NULL. */
const alma_node *alma__dn_q_producer(const alma_graph *g, int v);

/* ---- dnnl_int8_prim.c ---------------------------------------------------------------------------- */
void alma__dn_qprim_free(qprim *q);
/* Frees q's primitive and marks it declined for its key, with the reason (logged). */
alma_status alma__dn_qdecline(qprim *q, const alma_node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A memory for md (no data yet); 0 when oneDNN fails. */
int alma__dn_q_add_memory(dn_plan *p, dnnl_memory_t *m, const dnnl_memory_desc_t *md);
/* Executes q with args (room for one more: the scratchpad, appended when q has one). */
alma_status alma__dn_q_execute(dn_plan *p, qprim *q, const alma_node *n, dnnl_exec_arg_t *args, int na);
/* The result db (layout md) becomes out's data when st is ALMA_OK, else it is dropped. */
alma_status alma__dn_q_done(dn_plan *p, alma_status st, dn_buf *db, dn_val *out, const alma_tensor *os,
                            const dnnl_memory_desc_t *md, int *done, int int8);
/* Runs a as one int8 primitive into *out (*done = 1), or declines (*done = 0). */
alma_status alma__dn_q_exec(dn_plan *p, qprim *q, const qargs *a, dn_val *out, int *done);
/* Runs cluster a (a 1x1 convolution) fused with its depthwise cluster b into b's output (*done = 1),
 * or declines (*done = 0: both then run apart). */
alma_status alma__dn_q_exec_dw(dn_plan *p, qclu *ca, qclu *cb, int *done);

/* ---- dnnl_int8_exec.c ---------------------------------------------------------------------------- */
/* The arguments of cluster c's primitive (its constants; the sources' values as they are now). */
void alma__dn_clu_args(dn_plan *p, qclu *c, qargs *a);

#endif
#endif
