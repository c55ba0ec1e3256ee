/* DNNL runtime: int8 execution of quantized graphs.
 *
 * Quantized models arrive as QDQ graphs (alma's INT8_STATIC, ONNX Runtime's quantizer, PyTorch QAT
 * exports): DequantizeLinear -> Conv/MatMul/Gemm in float -> QuantizeLinear. EAGER and the float
 * path run them as written. At compile time this file finds the clusters
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
 * 3x3 cluster reads runs with that cluster as oneDNN's depthwise post-op (plan_dw, q_exec_dw). Depthwise
 * convolutions are the exception: oneDNN's depthwise kernels multiply in 32 bits, exact with u8
 * sources on any CPU, so they always get u8 (s8 sources shifted up; see conv_is_dw). With VNNI or AMX
 * (vpdpbusd) u8 sources go in as they are and everything is exact. Weights within [-64, 64] cannot
 * saturate u8 sources (255 * 64 * 2 < 32767): dyn clusters give those as u8 always, and dyn matmuls
 * with wider weights run in float32 on the dequantized values instead (exact, fp32 speed). */
#ifdef ALMA_HAVE_DNNL

#include <float.h>
#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ops/nn_util.h"
#include "ops/quant_kernels.h"
#include "runtimes/dnnl/dnnl_native.h"
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
static const char *dt_name(alma_dtype t);
static int is_op(const alma_node *n, const char *t) { return !n->domain[0] && !strcmp(n->op_type, t); }
static int is_q8(alma_dtype t) { return t == U8 || t == S8; }

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static int has_vnni(void) {
  int isa = (int)dnnl_get_effective_cpu_isa();
  return (isa & 0x40) != 0 || (isa & 0x400) != 0; /* avx512_core_vnni (and above), avx2_vnni */
}

static dn_qstate *qstate(dn_plan *p) {
  if (p->q) return p->q;
  dn_qstate *S = calloc(1, sizeof *S);
  if (!S) return NULL;
  S->hint = malloc(sizeof(int) * ((size_t)p->g->n_nodes + 1));
  S->nprim = calloc((size_t)p->g->n_nodes + 1, sizeof *S->nprim);
  if (!S->hint || !S->nprim) {
    free(S->hint);
    free(S->nprim);
    free(S);
    return NULL;
  }
  for (int i = 0; i < p->g->n_nodes; i++) S->hint[i] = -1;
  S->run_id = -1;
  int vnni = has_vnni();
  const dn_opts *o = &p->opt;
  S->conv_s8 = vnni || o->int8_conv_src == DN_SRC_U8 ? 0 : o->int8_conv_src == DN_SRC_S8 ? 1 : 2;
  S->mm_off = !vnni && !o->int8_matmul;
  S->off = o->int8 == DN_INT8_OFF;
  S->fallback = o->int8 == DN_INT8_FALLBACK;
  S->move_off = !o->int8_move;
  S->dw_off = !o->dw_fuse;
  p->q = S;
  return S;
}

/* A new run resets the per-run state (counters, lazy nodes). */
static void new_run(dn_plan *p, dn_qstate *S) {
  if (S->run_id == p->runs) return;
  S->run_id = p->runs;
  p->n_int8 = p->n_int8_reorder = 0;
  for (int k = 0; k < S->nlazy; k++) {
    S->lazy[k].pending = p->static_uses[S->lazy[k].out];
    S->lazy[k].ran = 0;
  }
}

static void qprim_free(qprim *q) {
  if (q->p) dnnl_primitive_destroy(q->p);
  if (q->pd) dnnl_primitive_desc_destroy(q->pd);
  dnnl_memory_t *ms[] = {&q->m_src, &q->m_wei, &q->m_bias, &q->m_dst, &q->m_scr, &q->m_zp, &q->m_xs, &q->m_dww, &q->m_dwb};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
    if (*ms[i]) dnnl_memory_destroy(*ms[i]);
  free(q->wei);
  free(q->bias);
  free(q->dww);
  free(q->dwb);
  if (q->cache && --q->cache->refs <= 0) { /* values hold it only during a run */
    free(q->cache->ptr);
    free(q->cache);
  }
  memset(q, 0, sizeof *q);
}

/* Frees q's primitive and marks it declined for its key, with the reason (formatted before the free:
 * the message may quote q->impl). */
static void decline_v(qprim *q, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void decline_v(qprim *q, const char *fmt, va_list ap) {
  char why[sizeof q->why];
  vsnprintf(why, sizeof why, fmt, ap);
  dnnl_memory_desc_t xmd = q->xmd;
  uint64_t k = q->pkey;
  qprim_free(q);
  q->valid = q->declined = 1;
  q->xmd = xmd;
  q->pkey = k;
  memcpy(q->why, why, sizeof why);
}

static alma_status qdecline(qprim *q, const alma_node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static alma_status qdecline(qprim *q, const alma_node *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  decline_v(q, fmt, ap);
  va_end(ap);
  ALMA_LOGD("DNNL int8: node '%s' (%s) not in int8: %s", n->name, n->op_type, q->why);
  return ALMA_OK;
}

/* qdecline for the fused 1x1 + depthwise primitive: the two clusters then run apart, in int8. */
static alma_status dw_decline(qprim *q, const alma_node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static alma_status dw_decline(qprim *q, const alma_node *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  decline_v(q, fmt, ap);
  va_end(ap);
  ALMA_LOGD("DNNL int8: node '%s' (%s): no 1x1 + depthwise fusion, the two run apart: %s", n->name, n->op_type, q->why);
  return ALMA_OK;
}

static dnnl_primitive_attr_t new_attr(void) {
  dnnl_primitive_attr_t a = NULL;
  if (dnnl_primitive_attr_create(&a) != dnnl_success) return NULL;
  dnnl_primitive_attr_set_scratchpad_mode(a, dnnl_scratchpad_mode_user);
  return a;
}

/* The weights halved (round to nearest even, as oneDNN's own s8-source path rounds them): 7-bit
 * weights, whose u8 x s8 pair sums cannot saturate vpmaddubsw (255 * 64 * 2 < 32767). NULL on OOM. */
static int8_t *half_weights(const int8_t *w, int64_t n) {
  int8_t *h = malloc((size_t)(n > 0 ? n : 1));
  if (h)
    for (int64_t i = 0; i < n; i++) h[i] = (int8_t)nearbyintf((float)w[i] * 0.5f);
  return h;
}

/* dnnl.int8_halve=off: without VNNI, u8 sources with a zero point are shifted to s8 for oneDNN's s8
 * path (comparisons); on (default): given as u8 with the weights halved here (shift 2). */
static int q_halve_off(const dn_plan *p) { return !p->opt.int8_halve; }

/* dnnl.int8_zp_bias=off: source zero points of unpadded convolutions stay oneDNN attributes (comparisons). */
static int q_zp_fold_off(const dn_plan *p) { return !p->opt.int8_zp_bias; }

static int impl_is_ref(const char *impl) { return !strncmp(impl, "ref", 3) || strstr(impl, ":ref") != NULL; }

/* Constant scalar scale (float32, one element, positive and finite). */
static int const_scale(const alma_graph *g, int v, float *s) {
  const alma_tensor *t = v >= 0 ? alma__dn_const(g, v) : NULL;
  if (!t || t->dtype != F32 || alma_tensor_numel(t) != 1) return 0;
  *s = *(const float *)t->data;
  return *s > 0 && isfinite(*s);
}

/* Constant scalar zero point of an 8-bit type; absent: uint8 0 (or dflt when known). */
static int const_zp(const alma_graph *g, const alma_node *n, int k, int32_t *zp, alma_dtype *dt, alma_dtype dflt) {
  *zp = 0;
  *dt = dflt;
  if (n->n_inputs <= k || n->inputs[k] < 0) return 1;
  const alma_tensor *t = alma__dn_const(g, n->inputs[k]);
  if (!t || alma_tensor_numel(t) != 1 || !is_q8(t->dtype)) return 0;
  *dt = t->dtype;
  *zp = t->dtype == U8 ? *(const uint8_t *)t->data : *(const int8_t *)t->data;
  return 1;
}

/* Per-tensor Quantize/DequantizeLinear with constant parameters (opset 21's blocks excluded). */
static int qdq_params(const alma_graph *g, const alma_node *n, float *s, int32_t *zp, alma_dtype *dt) {
  if (n->n_inputs < 2 || alma__attr_i(n, "block_size", 0) != 0 || !const_scale(g, n->inputs[1], s)) return 0;
  alma_dtype dflt = ALMA_DTYPE_UNDEFINED;
  if (is_op(n, "QuantizeLinear")) {
    int64_t od = alma__attr_i(n, "output_dtype", 0);
    dflt = od ? (alma_dtype)od : U8;
  }
  if (!const_zp(g, n, 2, zp, dt, dflt)) return 0;
  return *dt == ALMA_DTYPE_UNDEFINED || is_q8(*dt);
}

static const alma_node *producer(const alma_graph *g, int v) {
  if (v < 0 || v >= g->n_values) return NULL;
  int pi = g->values[v].producer;
  return pi >= 0 && pi < g->n_nodes ? &g->nodes[pi] : NULL;
}

/* ---- classification of the quantization operators ------------------------------------------------- */
int alma__dn_q_classify(const alma_graph *g, const alma_node *n, dn_node *d, const char **why) {
  if (n->domain[0]) return -1;
  int q = is_op(n, "QuantizeLinear"), dq = is_op(n, "DequantizeLinear");
  if (q || dq) {
    if (n->n_inputs < 2 || alma__attr_i(n, "block_size", 0) != 0) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "blocked quantization");
    }
    if (q && alma__attr_i(n, "saturate", 1) == 0) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "saturate = 0");
    }
    return DK_QDQ; /* types and per-axis zero points are checked when it runs */
  }
  if (is_op(n, "QLinearConv") || is_op(n, "QLinearMatMul") || is_op(n, "ConvInteger") || is_op(n, "MatMulInteger"))
    return DK_QLINEAR;
  if (is_op(n, "DynamicQuantizeLinear")) return DK_QDQ; /* run_dynq */
  (void)g;
  return -1;
}

/* ---- the int8 primitive ------------------------------------------------------------------------------ */
/* Output shape of the convolution / matmul, or 0 when oneDNN's form does not apply. */
static int q_shape(const qargs *a, alma_tensor *os) {
  const alma_tensor *x = &a->x->t;
  memset(os, 0, sizeof *os);
  os->dtype = a->yq ? a->ydt : a->s32 ? S32 : F32;
  if (a->kind == QK_CONV) {
    int r = x->rank, nsp = r - 2;
    if (r < 3 || r > 5 || a->wrank != r) return 0;
    int64_t G = alma__attr_i(a->n, "group", 1), C = x->dims[1], OC = a->wdims[0];
    if (G < 1 || C % G || OC % G || a->wdims[1] * G != C) return 0;
    alma__nn_geom gm;
    if (alma__nn_geom_read(a->n, nsp, x->dims + 2, a->wdims + 2, 1, &gm) != ALMA_OK ||
        alma__nn_geom_forward(a->n, &gm, 0) != ALMA_OK) {
      alma__error_clear();
      return 0;
    }
    os->rank = r;
    os->dims[0] = x->dims[0];
    os->dims[1] = OC;
    for (int i = 0; i < nsp; i++) {
      if (gm.out[i] <= 0) return 0;
      os->dims[2 + i] = gm.out[i];
    }
    return 1;
  }
  if (a->kind == QK_GEMM) {
    if (x->rank != 2 || a->wrank != 2 || alma__attr_i(a->n, "transA", 0)) return 0;
    int64_t K = a->transb ? a->wdims[1] : a->wdims[0], N = a->transb ? a->wdims[0] : a->wdims[1];
    if (x->dims[1] != K) return 0;
    os->rank = 2;
    os->dims[0] = x->dims[0];
    os->dims[1] = N;
    return 1;
  }
  /* MatMul: [.., M, K] x [K, N], or the same batch dims on both sides */
  if (x->rank < 2 || a->wrank < 2) return 0;
  int64_t K = a->wdims[a->wrank - 2], N = a->wdims[a->wrank - 1];
  if (x->dims[x->rank - 1] != K) return 0;
  if (a->wrank > 2) {
    if (a->wrank != x->rank) return 0;
    for (int i = 0; i < x->rank - 2; i++)
      if (x->dims[i] != a->wdims[i]) return 0;
  }
  os->rank = x->rank;
  memcpy(os->dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  os->dims[x->rank - 1] = N;
  return 1;
}

/* A depthwise convolution (one input and one output channel per group). oneDNN's int8 depthwise
 * kernels multiply in 32 bits, so u8 sources are exact without VNNI too (checked against a direct
 * sum: kernels 1 to 7, 8 to 240 channels, strides 1 and 2, zero points 0 to 255), while oneDNN
 * 2.6's AVX2 kernel computes garbage for s8 sources with a zero point and a kernel wider than 3
 * (5x5 and 7x7 with 24 or more channels; MobileNet-V3's and EfficientNet's depthwise 5x5 layers
 * after HardSwish/SiLU). So these always take u8 sources: never shifted down, s8 shifted up. */
static int conv_is_dw(const qargs *a) {
  int64_t G = alma__attr_i(a->n, "group", 1);
  return a->kind == QK_CONV && G > 1 && a->wrank >= 3 && a->wdims[0] == G && a->wdims[1] == 1;
}

static uint64_t q_key(const qargs *a, const alma_tensor *os, int shift) {
  uint64_t h = 1469598103934665603ull;
  /* dyn: this run's scale and zero point are arguments; built in is only whether the zero point is 0
   * (a primitive without one: post-Relu values), which also decides the source form without VNNI */
  int32_t zkey = a->dyn ? a->xzp != 0 : a->xzp;
  int32_t ints[11] = {a->kind, zkey, a->yq, a->yzp, (int32_t)a->ydt, a->s32, a->n_elt, shift, a->dyn, a->emu, a->split};
  h = fnv(h, ints, sizeof ints);
  if (!a->dyn) h = fnv(h, &a->xs, sizeof a->xs);
  h = fnv(h, &a->ys, sizeof a->ys);
  h = fnv(h, a->wdims, sizeof(int64_t) * (size_t)a->wrank);
  h = fnv(h, os->dims, sizeof(int64_t) * (size_t)os->rank);
  if (a->ws) h = fnv(h, a->ws, sizeof(float) * (size_t)a->nws);
  int64_t OC = a->kind == QK_CONV ? a->wdims[0] : os->dims[os->rank - 1];
  int bias = a->bq ? 1 : a->bf ? 2 : 0; /* the values are baked into the primitive: hashed */
  h = fnv(h, &bias, sizeof bias);
  if (a->bq) h = fnv(h, a->bq, sizeof(int32_t) * (size_t)OC);
  if (a->bf) h = fnv(h, a->bf, sizeof(float) * (size_t)OC);
  h = fnv(h, a->elt, sizeof(dn_elt) * (size_t)a->n_elt);
  int has_res = a->res ? 1 + a->sum_pos : 0;
  h = fnv(h, &has_res, sizeof has_res);
  return h;
}

static int add_memory(dn_plan *p, dnnl_memory_t *m, const dnnl_memory_desc_t *md) {
  return dnnl_memory_create(m, md, p->eng, DNNL_MEMORY_NONE) == dnnl_success;
}

/* Builds the primitive for a (its key is already in q). */
static alma_status q_build(dn_plan *p, qprim *q, const qargs *a, const alma_tensor *os, int shift) {
  const alma_node *n = a->n;
  const alma_tensor *x = &a->x->t;
  int half = shift == 2; /* u8 source as it is, weights halved here (7-bit), output scales doubled */
  if (half) shift = 0;
  dnnl_data_type_t sdt = a->emu ? dnnl_f32 : shift > 0 ? dnnl_s8 : shift < 0 ? dnnl_u8 : alma__dn_dtype(x->dtype);
  dnnl_data_type_t wdt = a->emu ? dnnl_f32 : dnnl_s8;
  int8_t *wh = half ? half_weights(a->w, alma__numel(a->wrank, a->wdims)) : NULL;
  if (half && !wh) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  const void *wsrc = half ? (const void *)wh : a->w;
  dnnl_data_type_t ddt = alma__dn_dtype(os->dtype);
  int64_t OC = a->kind == QK_CONV ? a->wdims[0] : os->dims[os->rank - 1];
  if (a->nws != 1 && a->nws != OC) return qdecline(q, n, "weight scales neither per tensor nor per output channel");
  dnnl_memory_desc_t s_md, w_md, b_md, d_md;
  int with_bias = a->bq || a->bf;
  int mask = 0;                     /* output scale mask: the output-channel axis of dst */
  int wnd = 0;
  dnnl_dims_t wd;
  if (a->kind == QK_CONV) {
    int r = x->rank, nsp = r - 2;
    int64_t G = alma__attr_i(n, "group", 1), C = x->dims[1];
    dnnl_dims_t sd, dd, bd = {OC};
    for (int i = 0; i < r; i++) sd[i] = x->dims[i], dd[i] = os->dims[i];
    wnd = G > 1 ? r + 1 : r;
    if (G > 1) {
      wd[0] = G;
      wd[1] = OC / G;
      wd[2] = C / G;
      for (int i = 0; i < nsp; i++) wd[3 + i] = a->wdims[2 + i];
    } else {
      for (int i = 0; i < r; i++) wd[i] = a->wdims[i];
    }
    dnnl_memory_desc_init_by_tag(&s_md, r, sd, sdt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&w_md, wnd, wd, wdt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a);
    dnnl_memory_desc_init_by_tag(&d_md, r, dd, ddt, dnnl_format_tag_any);
    mask = 1 << 1;
    int64_t wd64[DNNL_MAX_NDIMS];
    for (int i = 0; i < wnd; i++) wd64[i] = wd[i];
    alma__dn_plain_md_dt(&q->wplain, wnd, wd64, wdt);
  } else {
    /* matmul: A [M', K] (batch dims collapsed into rows for 2-D weights) or [B.., M, K] */
    int collapse = a->wrank == 2;
    int r = collapse ? 2 : x->rank;
    int64_t K = x->dims[x->rank - 1], N = os->dims[os->rank - 1];
    int64_t sa[DNNL_MAX_NDIMS], sdd[DNNL_MAX_NDIMS], bd[DNNL_MAX_NDIMS];
    if (collapse) {
      sa[0] = alma__numel(x->rank, x->dims) / (K ? K : 1);
      sa[1] = a->split ? 2 * K : K;
      sdd[0] = sa[0];
      sdd[1] = N;
    } else {
      memcpy(sa, x->dims, sizeof(int64_t) * (size_t)r);
      memcpy(sdd, os->dims, sizeof(int64_t) * (size_t)r);
    }
    for (int i = 0; i < r; i++) bd[i] = 1;
    bd[r - 1] = N;
    alma__dn_plain_md_dt(&s_md, r, sa, sdt);
    alma__dn_plain_md_dt(&d_md, r, sdd, ddt);
    alma__dn_plain_md_dt(&b_md, r, bd, dnnl_f32);
    /* weights: [K, N] (Gemm with transB: stored [N, K]) or [B.., K, N] */
    wnd = collapse ? 2 : a->wrank;
    if (a->transb) {
      dnnl_dims_t dB = {K, N}, sB = {1, K};
      dnnl_memory_desc_init_by_strides(&q->wplain, 2, dB, dnnl_s8, sB);
    } else if (a->split) {
      int64_t d2[2] = {2 * K, N};
      alma__dn_plain_md_dt(&q->wplain, 2, d2, wdt);
    } else {
      alma__dn_plain_md_dt(&q->wplain, wnd, a->wdims, wdt);
    }
    for (int i = 0; i < wnd; i++) wd[i] = q->wplain.dims[i];
    if (a->wconst) dnnl_memory_desc_init_by_tag(&w_md, wnd, wd, wdt, dnnl_format_tag_any);
    else w_md = q->wplain;
    mask = 1 << (r - 1);
  }
  /* attributes: scales, zero points, post-ops */
  dnnl_primitive_attr_t attr = new_attr();
  dnnl_post_ops_t po = NULL;
  float *sc = malloc(sizeof(float) * (size_t)(a->nws > 0 ? a->nws : 1));
  if (!attr || !sc || dnnl_post_ops_create(&po) != dnnl_success) {
    if (attr) dnnl_primitive_attr_destroy(attr);
    free(sc);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  /* 1/y_scale folds into the output scales when the post-ops commute with a positive scale (Relu,
   * LeakyRelu; Clip with its bounds scaled too), else it is a final linear post-op */
  dn_elt elt[Q_MAX_ELT];
  memcpy(elt, a->elt, sizeof elt);
  int fold_y = a->yq && !a->res;
  for (int e = 0; e < a->n_elt && fold_y; e++) {
    if (elt[e].alg == dnnl_eltwise_clip_v2 || elt[e].alg == dnnl_eltwise_clip) {
      elt[e].alpha /= a->ys;
      elt[e].beta /= a->ys;
    } else if (elt[e].alg != dnnl_eltwise_relu) {
      fold_y = 0;
    }
  }
  if (!fold_y) memcpy(elt, a->elt, sizeof elt);
  for (int64_t c = 0; c < a->nws; c++) {
    /* dyn: x_scale is this run's, a binary post-op (oneDNN 2.6's int8 convolutions take no run-time output scales) */
    double s = a->s32 ? 1.0 : (a->dyn ? 1.0 : (double)a->xs) * (a->ws ? a->ws[c] : 1.0f);
    if (fold_y) s /= a->ys;
    if (half) s *= 2.0;
    sc[c] = (float)s;
  }
  dnnl_status_t s = dnnl_success;
  if (!a->s32 && !a->emu) s = dnnl_primitive_attr_set_output_scales(attr, a->nws, a->nws > 1 ? mask : 0, sc);
  int32_t szp = a->emu ? 0 : a->xzp - 128 * shift, rtz = DNNL_RUNTIME_S32_VAL;
  int with_zp = a->dyn ? !a->emu && (a->xzp != 0 || shift) : szp != 0;
  /* A convolution without padding reads only real source values, so its source zero point is a
   * constant per output channel: sum(w * (x - zp)) = sum(w * x) - zp * sum(w). It goes into the
   * bias (in accumulator units) instead of oneDNN's zero-point attribute, whose compensation costs
   * every output (and which rules out oneDNN's fused 1x1 + depthwise kernel). */
  int zp_in_bias = 0;
  if (with_zp && !a->dyn && a->kind == QK_CONV && a->wconst && !q_zp_fold_off(p)) {
    alma__nn_geom gm;
    int nsp = x->rank - 2;
    zp_in_bias = alma__nn_geom_read(n, nsp, x->dims + 2, a->wdims + 2, 1, &gm) == ALMA_OK &&
                 alma__nn_geom_forward(n, &gm, 0) == ALMA_OK;
    alma__error_clear();
    for (int i = 0; i < nsp && zp_in_bias; i++) zp_in_bias = gm.pb[i] == 0 && gm.pe[i] == 0;
    if (zp_in_bias) with_zp = 0, with_bias = 1;
  }
  if (s == dnnl_success && with_zp) s = dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, a->dyn ? &rtz : &szp);
  int bin = a->dyn && !a->emu; /* post-op 0 multiplies by this run's x_scale */
  dnnl_memory_desc_t one_md;
  memset(&one_md, 0, sizeof one_md);
  if (bin) {
    int64_t od[DNNL_MAX_NDIMS];
    for (int i = 0; i < d_md.ndims; i++) od[i] = 1;
    alma__dn_plain_md_dt(&one_md, d_md.ndims, od, dnnl_f32);
    if (s == dnnl_success) s = dnnl_post_ops_append_binary(po, dnnl_binary_mul, &one_md);
  }
  if (s == dnnl_success && a->yq && a->yzp) s = dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_DST, 1, 0, &a->yzp);
  for (int e = 0; s == dnnl_success && e <= a->n_elt; e++) { /* in the graph's order */
    if (a->res && e == a->sum_pos) s = dnnl_post_ops_append_sum(po, 1.0f);
    if (s == dnnl_success && e < a->n_elt)
      s = dnnl_post_ops_append_eltwise(po, 1.0f, elt[e].alg, elt[e].alpha, elt[e].beta);
  }
  if (s == dnnl_success && a->yq && !fold_y) s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, 1.0f / a->ys, 0);
  if (s == dnnl_success && dnnl_post_ops_len(po) > 0) s = dnnl_primitive_attr_set_post_ops(attr, po);
  dnnl_post_ops_destroy(po);
  if (s != dnnl_success) {
    dnnl_primitive_attr_destroy(attr);
    free(sc);
    free(wh);
    return qdecline(q, n, "attributes rejected (status %d)", (int)s);
  }
  if (a->kind == QK_CONV) {
    dnnl_convolution_desc_t cd;
    int r = x->rank, nsp = r - 2;
    alma__nn_geom gm;
    alma__nn_geom_read(n, nsp, x->dims + 2, a->wdims + 2, 1, &gm);
    alma__nn_geom_forward(n, &gm, 0);
    dnnl_dims_t st, dl, pl, pe;
    for (int i = 0; i < nsp; i++) {
      st[i] = gm.s[i];
      dl[i] = gm.d[i] - 1;
      pl[i] = gm.pb[i];
      pe[i] = gm.pe[i];
    }
    s = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &s_md, &w_md,
                                                   with_bias ? &b_md : NULL, &d_md, st, dl, pl, pe);
    if (s == dnnl_success) s = alma__dn_pd_create(p, &q->pd, &cd, attr, q->impl, sizeof q->impl);
  } else {
    dnnl_matmul_desc_t md;
    s = dnnl_matmul_desc_init(&md, &s_md, &w_md, with_bias ? &b_md : NULL, &d_md);
    if (s == dnnl_success) s = alma__dn_pd_create(p, &q->pd, &md, attr, q->impl, sizeof q->impl);
  }
  dnnl_primitive_attr_destroy(attr);
  free(sc);
  if (s != dnnl_success) {
    free(wh);
    return qdecline(q, n, "no int8 implementation (status %d)", (int)s);
  }
  /* a reference int8 kernel is slower than the float path it replaces */
  if (impl_is_ref(q->impl)) {
    free(wh);
    return qdecline(q, n, "only a reference int8 kernel (%s)", q->impl);
  }
  q->src_md = *dnnl_primitive_desc_query_md(q->pd, dnnl_query_src_md, 0);
  q->wei_md = *dnnl_primitive_desc_query_md(q->pd, dnnl_query_weights_md, 0);
  q->dst_md = *dnnl_primitive_desc_query_md(q->pd, dnnl_query_dst_md, 0);
  q->bias_md = b_md;
  q->shift = half ? 2 : shift;
  q->has_sum = a->res != NULL;
  q->rt_zp = a->dyn && with_zp;
  dnnl_memory_desc_t zmd;
  int64_t one = 1;
  alma__dn_plain_md_dt(&zmd, 1, &one, dnnl_s32);
  if (dnnl_primitive_create(&q->p, q->pd) != dnnl_success || !add_memory(p, &q->m_src, &q->src_md) ||
      !add_memory(p, &q->m_wei, &q->wei_md) || (with_bias && !add_memory(p, &q->m_bias, &b_md)) ||
      !add_memory(p, &q->m_dst, &q->dst_md) || (bin && !add_memory(p, &q->m_xs, &one_md)) ||
      (q->rt_zp && !add_memory(p, &q->m_zp, &zmd))) {
    free(wh);
    return qdecline(q, n, "primitive creation failed");
  }
  const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(q->pd, dnnl_query_scratchpad_md, 0);
  if (smd && smd->ndims > 0 && (q->scr_size = dnnl_memory_desc_get_size(smd)) > 0 && !add_memory(p, &q->m_scr, smd)) {
    free(wh);
    return qdecline(q, n, "primitive creation failed");
  }
  /* bias in accumulator units: dst = scale * (acc + bias) in oneDNN 2.x (dyn: filled each run, as
   * x_scale changes; emu: no scale, real units) */
  if (with_bias) {
    if (!(q->bias = malloc(sizeof(float) * (size_t)OC))) {
      free(wh);
      return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    }
    int64_t per = OC > 0 ? alma__numel(a->wrank, a->wdims) / OC : 0; /* weights per output channel */
    for (int64_t c = 0; c < OC; c++) {
      double wsc = a->ws ? a->ws[a->nws > 1 ? c : 0] : 1.0;
      double b = a->bq ? (double)a->bq[c] : a->emu ? a->bf[c] : a->bf ? (double)a->bf[c] / ((double)a->xs * wsc) : 0.0;
      if (half) b *= 0.5; /* accumulator units of the halved weights */
      if (zp_in_bias) { /* - zp * sum(w[c]), exact in integers */
        const int8_t *wc = (const int8_t *)wsrc + c * per;
        int64_t sum = 0;
        for (int64_t k = 0; k < per; k++) sum += wc[k];
        b -= (double)szp * (double)sum;
      }
      q->bias[c] = (float)b;
    }
  }
  alma_status st = ALMA_OK;
  if (a->wconst) {
    size_t sz = dnnl_memory_desc_get_size(&q->wei_md);
    if (!(q->wei = aligned_alloc(64, (sz + 63) & ~(size_t)63))) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    p->n_reorder_wei++;
    if (st == ALMA_OK) st = alma__dn_reorder(p, &q->wplain, (void *)wsrc, &q->wei_md, q->wei, n);
  }
  free(wh);
  return st;
}

/* The u8 -> s8 (x - 128) or s8 -> u8 (x + 128) shift of the source (q->shift 1 or -1), from layout
 * from into the primitive's: both flip each byte's top bit, done here in from's layout, then a plain
 * reorder (cached by the plan) changes the layout. Not one oneDNN reorder with a source zero point:
 * oneDNN 2.6's gives wrong values when it also changes the layout of more than 16 channels that are
 * not a multiple of 4 (u8 NCHW -> s8 NHWC, 22 channels: tf2onnx's NASNet; cosine 0.2). */
static alma_status q_shift(dn_plan *p, const qprim *q, const dnnl_memory_desc_t *from, const void *sp, void *dp,
                           const alma_node *n) {
  dnnl_memory_desc_t flipped = *from;
  flipped.data_type = q->shift > 0 ? dnnl_s8 : dnnl_u8;
  size_t size = dnnl_memory_desc_get_size(from);
  int same = dnnl_memory_desc_equal(&flipped, &q->src_md);
  dn_buf *t = same ? NULL : alma__dn_alloc(p, size);
  if (!same && !t) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  const uint8_t *s8 = sp;
  uint8_t *d8 = same ? dp : t->ptr;
  for (size_t i = 0; i < size; i++) d8[i] = (uint8_t)(s8[i] ^ 0x80u);
  alma_status st = same ? ALMA_OK : alma__dn_reorder(p, &flipped, t->ptr, &q->src_md, dp, n);
  if (t) alma__dn_unref(p, t);
  p->n_int8_reorder++;
  return st;
}

/* Executes q with args (room for one more: the scratchpad, appended when q has one). */
static alma_status q_execute(dn_plan *p, qprim *q, const alma_node *n, dnnl_exec_arg_t *args, int na) {
  if (q->m_scr) {
    void *scr = alma__dn_scratch(p, q->scr_size);
    if (!scr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory (oneDNN scratchpad)");
    dnnl_memory_set_data_handle(q->m_scr, scr);
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, q->m_scr};
  }
  dnnl_status_t s = dnnl_primitive_execute(q->p, p->strm, na, args);
  if (s != dnnl_success) return alma__op_error(n, ALMA_ERR_INTERNAL, "oneDNN %s failed (status %d)", q->impl, (int)s);
  return ALMA_OK;
}

/* y = (x - zp) * s for a uint8 x (the emu matmuls' float32 source). */
static void dequant_u8(const uint8_t *x, int64_t n, int32_t zp, float s, float *y) {
  int64_t i = 0;
#if defined(__SSE2__)
  const __m128i z = _mm_setzero_si128();
  const __m128 vz = _mm_set1_ps((float)zp), vs = _mm_set1_ps(s);
  for (; i + 16 <= n; i += 16) {
    __m128i b = _mm_loadu_si128((const __m128i *)(x + i)), lo = _mm_unpacklo_epi8(b, z), hi = _mm_unpackhi_epi8(b, z);
    __m128i w[4] = {_mm_unpacklo_epi16(lo, z), _mm_unpackhi_epi16(lo, z), _mm_unpacklo_epi16(hi, z), _mm_unpackhi_epi16(hi, z)};
    for (int k = 0; k < 4; k++) _mm_storeu_ps(y + i + 4 * k, _mm_mul_ps(_mm_sub_ps(_mm_cvtepi32_ps(w[k]), vz), vs));
  }
#endif
  for (; i < n; i++) y[i] = ((float)x[i] - (float)zp) * s;
}

/* The result db (layout md) becomes out's data when st is ALMA_OK, else it is dropped. */
static alma_status q_done(dn_plan *p, alma_status st, dn_buf *db, dn_val *out, const alma_tensor *os,
                          const dnnl_memory_desc_t *md, int *done, int int8) {
  p->n_int8 += st == ALMA_OK && int8;
  return alma__dn_finish(p, st, db, out, os, md, done);
}

/* Runs a as one int8 primitive into *out (*done = 1), or declines (*done = 0). */
static alma_status q_exec(dn_plan *p, qprim *q, const qargs *a, dn_val *out, int *done) {
  const alma_node *n = a->n;
  dn_qstate *S = p->q;
  dn_val *x = a->x;
  *done = 0;
  if (!x || !x->live || !is_q8(x->t.dtype)) return ALMA_OK;
  alma_tensor os;
  if (!q_shape(a, &os)) return ALMA_OK;
  if (alma__numel(os.rank, os.dims) == 0 || alma__numel(x->t.rank, x->t.dims) == 0) return ALMA_OK;
  if (a->res && (!a->res->live || a->res->t.dtype != F32 || a->res->t.rank != os.rank ||
                 memcmp(a->res->t.dims, os.dims, sizeof(int64_t) * (size_t)os.rank)))
    return ALMA_OK;
  int is_mm = a->kind != QK_CONV;
  if (is_mm && S->mm_off && !a->dyn) return ALMA_OK; /* (dyn matmuls there are exact: w7, or emu) */
  if (a->dyn && !(a->xs > 0 && isfinite(a->xs))) return ALMA_OK; /* EAGER says what that gives */
  int dw = !is_mm && conv_is_dw(a);
  int shift = a->emu || is_mm ? 0
              : dw ? (x->t.dtype == S8 ? -1 : 0)
              : x->t.dtype == U8 && !a->w7 && (S->conv_s8 == 1 || (S->conv_s8 == 2 && a->xzp != 0));
  /* without VNNI: rather than shifting the source to s8 (a pass over it, then oneDNN's s8 path,
   * which adds 128 back and halves the weights), the u8 source as it is with the weights halved here */
  if (shift == 1 && S->conv_s8 == 2 && !a->dyn && !a->s32 && a->wconst && !q_halve_off(p)) shift = 2;
  if (a->dyn && a->alt && !a->emu && a->xzp != 0) q = a->alt;
  /* the key: the source's dims and type (its layout is converted into the primitive's) */
  dnnl_memory_desc_t xmd, xpl;
  alma__dn_plain_md_dt(&xpl, x->t.rank, x->t.dims, alma__dn_dtype(x->t.dtype));
  alma__dn_val_md(x, &xmd);
  uint64_t key = q_key(a, &os, shift);
  if (!q->valid || q->pkey != key || !dnnl_memory_desc_equal(&q->xmd, &xpl)) {
    qprim_free(q);
    q->valid = 1;
    q->xmd = xpl;
    q->pkey = key;
    ALMA_LOGD("DNNL int8: node '%s': building its primitive (source %s%s, zero point %d)", n->name, dt_name(x->t.dtype),
              shift == 2 ? " with 7-bit weights" : shift > 0 ? " as s8" : shift < 0 ? " as u8" : "", a->xzp);
    ALMA_TRY(q_build(p, q, a, &os, shift));
  }
  if (q->declined) return ALMA_OK;
  alma_status st = ALMA_OK;
  dn_buf *stmp = NULL, *db = NULL;
  void *sp = NULL;
  if (is_mm) {
    /* plain source, read through the primitive's (collapsed) md */
    if ((st = alma__dn_val_plain(p, x, n)) != ALMA_OK) return st;
    sp = x->t.data;
    if (a->emu) { /* the dequantized source, (x - zp) * x_scale, for the float32 matmul */
      int64_t cnt = alma__numel(x->t.rank, x->t.dims);
      if (!(stmp = alma__dn_alloc(p, (size_t)cnt * sizeof(float)))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      dequant_u8(x->t.data, cnt, a->xzp, a->xs, stmp->ptr);
      sp = stmp->ptr;
    } else if (a->split) { /* each row twice: [x, x] */
      int64_t K = x->t.dims[x->t.rank - 1], rows = alma__numel(x->t.rank, x->t.dims) / (K ? K : 1);
      if (!(stmp = alma__dn_alloc(p, (size_t)(2 * rows * K)))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      const uint8_t *xs = x->t.data;
      uint8_t *d = stmp->ptr;
      for (int64_t r = 0; r < rows; r++) {
        memcpy(d + 2 * r * K, xs + r * K, (size_t)K);
        memcpy(d + 2 * r * K + K, xs + r * K, (size_t)K);
      }
      sp = stmp->ptr;
    } else if (shift) {
      if (!(stmp = alma__dn_alloc(p, dnnl_memory_desc_get_size(&q->src_md)))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      dnnl_memory_desc_t from = q->src_md;
      from.data_type = shift > 0 ? dnnl_u8 : dnnl_s8;
      st = q_shift(p, q, &from, sp, stmp->ptr, n);
      sp = stmp->ptr;
    }
  } else if (a->emu) { /* dequantized plain, then in the primitive's layout */
    if ((st = alma__dn_val_plain(p, x, n)) != ALMA_OK) return st;
    int64_t cnt = alma__numel(x->t.rank, x->t.dims);
    dn_buf *ftmp = alma__dn_alloc(p, (size_t)cnt * sizeof(float));
    if (!ftmp) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    dequant_u8(x->t.data, cnt, a->xzp, a->xs, ftmp->ptr);
    dnnl_memory_desc_t fpl;
    alma__dn_plain_md_dt(&fpl, x->t.rank, x->t.dims, dnnl_f32);
    if (dnnl_memory_desc_equal(&fpl, &q->src_md)) {
      stmp = ftmp;
    } else {
      if (!(stmp = alma__dn_alloc(p, dnnl_memory_desc_get_size(&q->src_md)))) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      else st = alma__dn_reorder(p, &fpl, ftmp->ptr, &q->src_md, stmp->ptr, n);
      alma__dn_unref(p, ftmp);
    }
    sp = stmp ? stmp->ptr : NULL;
  } else if (shift == 1 || shift == -1) {
    if (!(stmp = alma__dn_alloc(p, dnnl_memory_desc_get_size(&q->src_md)))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    st = q_shift(p, q, &xmd, x->has_blk ? x->bbuf->ptr : x->t.data, stmp->ptr, n);
    sp = stmp->ptr;
  } else {
    st = alma__dn_val_get(p, x, &q->src_md, 1, &sp, &stmp, n);
  }
  void *wp = q->wei;
  dn_buf *wtmp = NULL;
  if (st == ALMA_OK && !wp) { /* run-time weights: reordered for this run only */
    if (dnnl_memory_desc_equal(&q->wplain, &q->wei_md)) {
      wp = (void *)a->w;
    } else if (!(wtmp = alma__dn_alloc(p, dnnl_memory_desc_get_size(&q->wei_md)))) {
      st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    } else {
      st = alma__dn_reorder(p, &q->wplain, (void *)a->w, &q->wei_md, wtmp->ptr, n);
      wp = wtmp->ptr;
      p->n_reorder_wei++;
    }
  }
  dnnl_memory_desc_t omd = q->dst_md;
  if (is_mm) alma__dn_plain_md_dt(&omd, os.rank, os.dims, q->dst_md.data_type);
  if (st == ALMA_OK) {
    if (a->res) st = alma__dn_sum_dst(p, a->res, &omd, &db, n);
    else if (!(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&q->dst_md)))) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  if (st == ALMA_OK) {
    dnnl_exec_arg_t args[8];
    int na = 0;
    dnnl_memory_set_data_handle(q->m_src, sp);
    dnnl_memory_set_data_handle(q->m_wei, wp);
    dnnl_memory_set_data_handle(q->m_dst, db->ptr);
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, q->m_src};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, q->m_wei};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, q->m_dst};
    if (q->m_bias) {
      if (a->dyn && !a->emu) { /* accumulator units of this run: b / (x_scale * w_scale) */
        int64_t OC = a->kind == QK_CONV ? a->wdims[0] : os.dims[os.rank - 1];
        for (int64_t c = 0; c < OC; c++)
          q->bias[c] = (float)((double)a->bf[c] / ((double)a->xs * a->ws[a->nws > 1 ? c : 0]));
      }
      dnnl_memory_set_data_handle(q->m_bias, q->bias);
      args[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, q->m_bias};
    }
    if (q->m_xs) {
      q->xsv = a->xs;
      dnnl_memory_set_data_handle(q->m_xs, &q->xsv);
      args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, q->m_xs};
    }
    if (q->m_zp) {
      q->zpv = a->xzp - 128 * shift;
      dnnl_memory_set_data_handle(q->m_zp, &q->zpv);
      args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, q->m_zp};
    }
    st = q_execute(p, q, n, args, na);
  }
  alma__dn_unref(p, stmp);
  alma__dn_unref(p, wtmp);
  return q_done(p, st, db, out, &os, &omd, done, !a->emu);
}

static void clu_args(dn_plan *p, qclu *c, qargs *a);

/* Builds the fused 1x1 (a) + depthwise 3x3 (b) convolution: a's source (shift as q_exec chose it),
 * its zero point folded into the bias (no padding), output scales x_scale * w_scale / y_scale with
 * its Relu/Clip, the u8 intermediate, then oneDNN's depthwise post-op with b's weights, bias (in
 * b's accumulator units) and scales, and b's Relu/Clip, into b's int8 destination. */
static alma_status q_build_dw(dn_plan *p, qprim *q, const qargs *a, const qargs *b, const alma_tensor *os,
                              const alma_tensor *ds, int shift, int stride) {
  const alma_node *n = a->n;
  const alma_tensor *x = &a->x->t;
  int64_t N = x->dims[0], C = x->dims[1], OC = a->wdims[0], H = x->dims[2], W = x->dims[3];
  dnnl_dims_t sd = {N, C, H, W}, wd = {OC, C, 1, 1}, bd = {OC}, dd = {N, OC, os->dims[2], os->dims[3]};
  dnnl_dims_t one = {1, 1}, zero = {0, 0};
  int half = shift == 2; /* as in q_build */
  if (half) shift = 0;
  dnnl_data_type_t sdt = shift > 0 ? dnnl_s8 : alma__dn_dtype(x->dtype);
  dnnl_memory_desc_t s_md, w_md, b_md, d_md;
  dnnl_memory_desc_init_by_tag(&s_md, 4, sd, sdt, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&w_md, 4, wd, dnnl_s8, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a);
  dnnl_memory_desc_init_by_tag(&d_md, 4, dd, alma__dn_dtype(a->ydt), dnnl_format_tag_any);
  int32_t szp = a->xzp - 128 * shift;
  if (a->nws != 1 && a->nws != OC) return dw_decline(q, n, "weight scales neither per tensor nor per output channel");
  if (b->nws != 1 && b->nws != OC) return dw_decline(q, n, "depthwise weight scales neither per tensor nor per channel");
  float *sc = malloc(sizeof(float) * (size_t)OC), *scb = malloc(sizeof(float) * (size_t)OC);
  q->bias = malloc(sizeof(float) * (size_t)OC);
  float *bdw = malloc(sizeof(float) * (size_t)OC);
  int8_t *wdw = malloc((size_t)(OC * 9));
  int8_t *w1 = half ? half_weights(a->w, OC * C) : NULL;
  const int8_t *wa = half ? w1 : a->w;
  dnnl_primitive_attr_t attr = new_attr();
  dnnl_post_ops_t po = NULL;
  if (!sc || !scb || !q->bias || !bdw || !wdw || (half && !w1) || !attr || dnnl_post_ops_create(&po) != dnnl_success) {
    free(sc), free(scb), free(bdw), free(wdw), free(w1);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  for (int64_t c = 0; c < OC; c++) {
    double wsa = a->ws[a->nws > 1 ? c : 0], wsb = b->ws[b->nws > 1 ? c : 0];
    sc[c] = (float)((double)a->xs * wsa / a->ys * (half ? 2.0 : 1.0));
    scb[c] = (float)((double)b->xs * wsb / b->ys);
    const int8_t *wc = wa + c * C;
    int64_t sum = 0;
    for (int64_t k = 0; k < C; k++) sum += wc[k];
    double ba = a->bq ? (double)a->bq[c] : a->bf ? (double)a->bf[c] / ((double)a->xs * wsa) : 0.0;
    if (half) ba *= 0.5;
    q->bias[c] = (float)(ba - (double)szp * (double)sum);
    bdw[c] = b->bq ? (float)b->bq[c] : b->bf ? (float)((double)b->bf[c] / ((double)b->xs * wsb)) : 0.0f;
  }
  memcpy(wdw, b->w, (size_t)(OC * 9));
  dnnl_status_t s = dnnl_primitive_attr_set_output_scales(attr, OC, 1 << 1, sc);
  for (int e = 0; s == dnnl_success && e < a->n_elt; e++) {
    int clip = a->elt[e].alg != dnnl_eltwise_relu;
    s = dnnl_post_ops_append_eltwise(po, 1.0f, a->elt[e].alg, clip ? a->elt[e].alpha / a->ys : a->elt[e].alpha,
                                     clip ? a->elt[e].beta / a->ys : a->elt[e].beta);
  }
  if (s == dnnl_success)
    s = dnnl_post_ops_append_dw(po, dnnl_s8, dnnl_f32, alma__dn_dtype(b->ydt), 3, stride, 1, OC, 1 << 1, scb);
  for (int e = 0; s == dnnl_success && e < b->n_elt; e++) {
    int clip = b->elt[e].alg != dnnl_eltwise_relu;
    s = dnnl_post_ops_append_eltwise(po, 1.0f, b->elt[e].alg, clip ? b->elt[e].alpha / b->ys : b->elt[e].alpha,
                                     clip ? b->elt[e].beta / b->ys : b->elt[e].beta);
  }
  if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, po);
  dnnl_post_ops_destroy(po);
  free(sc);
  free(scb);
  dnnl_convolution_desc_t cd;
  if (s == dnnl_success)
    s = dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &s_md, &w_md, &b_md,
                                           &d_md, one, zero, zero);
  if (s == dnnl_success) s = alma__dn_pd_create(p, &q->pd, &cd, attr, q->impl, sizeof q->impl);
  dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) {
    free(bdw), free(wdw), free(w1);
    return dw_decline(q, n, "no int8 1x1 convolution with a depthwise post-op (status %d)", (int)s);
  }
  if (impl_is_ref(q->impl)) {
    free(bdw), free(wdw), free(w1);
    return dw_decline(q, n, "1x1 + depthwise only on a reference kernel (%s)", q->impl);
  }
  size_t il = strlen(q->impl); /* oneDNN names the 1x1 kernel only: the plan shows the fusion */
  snprintf(q->impl + il, sizeof q->impl - il, "+dw%d", stride);
  q->src_md = *dnnl_primitive_desc_query_md(q->pd, dnnl_query_src_md, 0);
  q->wei_md = *dnnl_primitive_desc_query_md(q->pd, dnnl_query_weights_md, 0);
  q->dst_md = *dnnl_primitive_desc_query_md(q->pd, dnnl_query_dst_md, 0);
  const dnnl_memory_desc_t *dwmd =
      dnnl_primitive_desc_query_md(q->pd, dnnl_query_exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS);
  const dnnl_memory_desc_t *dbmd =
      dnnl_primitive_desc_query_md(q->pd, dnnl_query_exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS);
  if (q->dst_md.ndims != 4 || q->dst_md.dims[0] != ds->dims[0] || q->dst_md.dims[1] != OC ||
      q->dst_md.dims[2] != ds->dims[2] || q->dst_md.dims[3] != ds->dims[3] || !dwmd || dwmd->ndims == 0 || !dbmd ||
      dbmd->ndims == 0) {
    free(bdw), free(wdw), free(w1);
    return dw_decline(q, n, "depthwise post-op output of another shape");
  }
  q->bias_md = b_md;
  q->shift = half ? 2 : shift;
  q->wplain = *dwmd; /* (the depthwise weights' layout) */
  q->dwb = bdw;
  dnnl_memory_desc_t dwplain;
  int64_t dw64[5] = {OC, 1, 1, 3, 3}, wd64[4] = {OC, C, 1, 1};
  alma__dn_plain_md_dt(&dwplain, 5, dw64, dnnl_s8);
  dnnl_memory_desc_t wplain;
  alma__dn_plain_md_dt(&wplain, 4, wd64, dnnl_s8);
  if (dnnl_primitive_create(&q->p, q->pd) != dnnl_success || !add_memory(p, &q->m_src, &q->src_md) ||
      !add_memory(p, &q->m_wei, &q->wei_md) || !add_memory(p, &q->m_bias, &b_md) || !add_memory(p, &q->m_dst, &q->dst_md) ||
      !add_memory(p, &q->m_dww, dwmd) || !add_memory(p, &q->m_dwb, dbmd)) {
    free(wdw), free(w1);
    return dw_decline(q, n, "primitive creation failed");
  }
  const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(q->pd, dnnl_query_scratchpad_md, 0);
  if (smd && smd->ndims > 0 && (q->scr_size = dnnl_memory_desc_get_size(smd)) > 0 && !add_memory(p, &q->m_scr, smd)) {
    free(wdw), free(w1);
    return dw_decline(q, n, "primitive creation failed");
  }
  size_t sz = dnnl_memory_desc_get_size(&q->wei_md), sz2 = dnnl_memory_desc_get_size(dwmd);
  q->wei = aligned_alloc(64, (sz + 63) & ~(size_t)63);
  q->dww = aligned_alloc(64, (sz2 + 63) & ~(size_t)63);
  if (!q->wei || !q->dww) {
    free(wdw), free(w1);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  p->n_reorder_wei += 2;
  alma_status st = alma__dn_reorder(p, &wplain, (void *)wa, &q->wei_md, q->wei, n);
  if (st == ALMA_OK) st = alma__dn_reorder(p, &dwplain, wdw, dwmd, q->dww, n);
  free(wdw), free(w1);
  return st;
}

/* Runs cluster a (a 1x1 convolution) fused with its depthwise cluster b into b's output (*done = 1),
 * or declines (*done = 0: both then run apart). */
static alma_status q_exec_dw(dn_plan *p, qclu *ca, qclu *cb, int *done) {
  dn_qstate *S = p->q;
  qargs a, b;
  *done = 0;
  clu_args(p, ca, &a);
  clu_args(p, cb, &b);
  dn_val *x = a.x;
  const alma_node *n = a.n, *bn = b.n;
  if (!x || !x->live || !is_q8(x->t.dtype) || x->t.rank != 4 || (ca->xdt && ca->xdt != x->t.dtype)) return ALMA_OK;
  alma_tensor os, ds;
  if (!q_shape(&a, &os) || alma__numel(os.rank, os.dims) == 0) return ALMA_OK;
  /* a: 1x1, stride 1, no pads, one group; b: the depthwise 3x3 of stride 1 or 2, pads 1, no dilation */
  alma__nn_geom ga, gb;
  int ok = alma__attr_i(n, "group", 1) == 1 && alma__nn_geom_read(n, 2, x->t.dims + 2, a.wdims + 2, 1, &ga) == ALMA_OK &&
           alma__nn_geom_forward(n, &ga, 0) == ALMA_OK && alma__nn_geom_read(bn, 2, os.dims + 2, b.wdims + 2, 1, &gb) == ALMA_OK &&
           alma__nn_geom_forward(bn, &gb, 0) == ALMA_OK;
  alma__error_clear();
  for (int i = 0; i < 2 && ok; i++)
    ok = ga.s[i] == 1 && ga.d[i] == 1 && ga.pb[i] == 0 && ga.pe[i] == 0 && gb.s[i] == gb.s[0] && (gb.s[i] == 1 || gb.s[i] == 2) &&
         gb.d[i] == 1 && gb.pb[i] == 1 && gb.pe[i] == 1 && gb.out[i] == (os.dims[2 + i] - 1) / gb.s[i] + 1;
  if (!ok) return ALMA_OK;
  ds = os;
  ds.dtype = b.ydt;
  ds.dims[2] = gb.out[0];
  ds.dims[3] = gb.out[1];
  int shift = x->t.dtype == U8 && (S->conv_s8 == 1 || (S->conv_s8 == 2 && a.xzp != 0));
  if (shift == 1 && S->conv_s8 == 2 && !q_halve_off(p)) shift = 2; /* as in q_exec */
  qprim *q = &ca->prdw;
  dnnl_memory_desc_t xmd, xpl;
  alma__dn_plain_md_dt(&xpl, x->t.rank, x->t.dims, alma__dn_dtype(x->t.dtype));
  alma__dn_val_md(x, &xmd);
  uint64_t key = q_key(&a, &os, shift) * 31 + q_key(&b, &ds, 0) + 1;
  if (!q->valid || q->pkey != key || !dnnl_memory_desc_equal(&q->xmd, &xpl)) {
    qprim_free(q);
    q->valid = 1;
    q->xmd = xpl;
    q->pkey = key;
    ALMA_LOGD("DNNL int8: node '%s': building its primitive with '%s' as depthwise post-op", n->name, bn->name);
    ALMA_TRY(q_build_dw(p, q, &a, &b, &os, &ds, shift, (int)gb.s[0]));
  }
  if (q->declined) return ALMA_OK;
  alma_status st = ALMA_OK;
  dn_buf *stmp = NULL, *db = NULL;
  void *sp = NULL;
  if (shift == 1) {
    if (!(stmp = alma__dn_alloc(p, dnnl_memory_desc_get_size(&q->src_md)))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    st = q_shift(p, q, &xmd, x->has_blk ? x->bbuf->ptr : x->t.data, stmp->ptr, n);
    sp = stmp->ptr;
  } else {
    st = alma__dn_val_get(p, x, &q->src_md, 1, &sp, &stmp, n);
  }
  if (st == ALMA_OK && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&q->dst_md))))
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (st == ALMA_OK) {
    dnnl_exec_arg_t args[8];
    int na = 0;
    dnnl_memory_set_data_handle(q->m_src, sp);
    dnnl_memory_set_data_handle(q->m_wei, q->wei);
    dnnl_memory_set_data_handle(q->m_bias, q->bias);
    dnnl_memory_set_data_handle(q->m_dst, db->ptr);
    dnnl_memory_set_data_handle(q->m_dww, q->dww);
    dnnl_memory_set_data_handle(q->m_dwb, q->dwb);
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, q->m_src};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, q->m_wei};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, q->m_bias};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, q->m_dst};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS, q->m_dww};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS, q->m_dwb};
    st = q_execute(p, q, n, args, na);
  }
  alma__dn_unref(p, stmp);
  return q_done(p, st, db, &p->vals[cb->outv], &ds, &q->dst_md, done, 1);
}

/* QK_ADD: y = Q(DQ(a) + DQ(b)) [through eltwise steps] as one oneDNN binary primitive on the int8
 * sources in the layout a arrives in (b reordered into it when it differs). Binary takes scales
 * but no zero points, so the primitive computes xs * a + x2s * b and a linear post-op subtracts
 * xs * xzp + x2s * x2zp; the eltwise steps follow on real values, then a linear post-op divides
 * by y_scale and adds y's zero point before the saturating, round-to-nearest-even conversion to the
 * int8 destination (float32 destination without a QuantizeLinear). */
static alma_status q_build_add(dn_plan *p, qprim *q, const qargs *a, const dnnl_memory_desc_t *s0, const dnnl_memory_desc_t *s1,
                               const dnnl_memory_desc_t *d) {
  const alma_node *n = a->n;
  dnnl_primitive_attr_t attr = new_attr();
  dnnl_post_ops_t po = NULL;
  if (!attr || dnnl_post_ops_create(&po) != dnnl_success) {
    if (attr) dnnl_primitive_attr_destroy(attr);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  /* v = xs * a + x2s * b; the real sum is v - off. A Relu or Clip of it is a clip of v with
   * bounds moved by off (oneDNN 2.6's int8 binary kernel was measured to give wrong results for a
   * linear post-op followed by an eltwise one, so the chain is at most clip -> linear) */
  double off = (double)a->xs * a->xzp + (double)a->x2s * a->x2zp;
  double alpha = a->yq ? 1.0 / a->ys : 1.0, beta = a->yq ? a->yzp - off / a->ys : -off;
  dnnl_status_t s = dnnl_primitive_attr_set_scales(attr, DNNL_ARG_SRC_0, 1, 0, &a->xs);
  if (s == dnnl_success) s = dnnl_primitive_attr_set_scales(attr, DNNL_ARG_SRC_1, 1, 0, &a->x2s);
  if (a->n_elt > 1) s = dnnl_unimplemented;
  for (int e = 0; s == dnnl_success && e < a->n_elt; e++) {
    dnnl_alg_kind_t alg = a->elt[e].alg;
    float lo, hi;
    if (alg == dnnl_eltwise_relu && a->elt[e].alpha == 0) lo = 0, hi = FLT_MAX;
    else if (alg == dnnl_eltwise_clip || alg == dnnl_eltwise_clip_v2) lo = a->elt[e].alpha, hi = a->elt[e].beta;
    else s = dnnl_unimplemented;
    if (s == dnnl_success)
      s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip_v2, (float)(lo + off), hi == FLT_MAX ? FLT_MAX : (float)(hi + off));
  }
  if (s == dnnl_success && (alpha != 1.0 || beta != 0))
    s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, (float)alpha, (float)beta);
  if (s == dnnl_success && dnnl_post_ops_len(po) > 0) s = dnnl_primitive_attr_set_post_ops(attr, po);
  dnnl_post_ops_destroy(po);
  dnnl_binary_desc_t bd;
  if (s == dnnl_success) s = dnnl_binary_desc_init(&bd, dnnl_binary_add, s0, s1, d);
  if (s == dnnl_success) s = alma__dn_pd_create(p, &q->pd, &bd, attr, q->impl, sizeof q->impl);
  dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) return qdecline(q, n, "no int8 binary implementation for this add (status %d)", (int)s);
  if (impl_is_ref(q->impl)) return qdecline(q, n, "only a reference int8 kernel (%s)", q->impl);
  q->src_md = *s0;
  q->wei_md = *s1; /* (the second source's layout) */
  q->dst_md = *d;
  if (dnnl_primitive_create(&q->p, q->pd) != dnnl_success || !add_memory(p, &q->m_src, s0) || !add_memory(p, &q->m_wei, s1) ||
      !add_memory(p, &q->m_dst, d))
    return qdecline(q, n, "primitive creation failed");
  const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(q->pd, dnnl_query_scratchpad_md, 0);
  if (smd && smd->ndims > 0 && (q->scr_size = dnnl_memory_desc_get_size(smd)) > 0 && !add_memory(p, &q->m_scr, smd))
    return qdecline(q, n, "primitive creation failed");
  return ALMA_OK;
}

static alma_status q_exec_add(dn_plan *p, qprim *q, const qargs *a, dn_val *out, int *done) {
  const alma_node *n = a->n;
  dn_val *x = a->x, *x2 = a->x2;
  *done = 0;
  if (!x || !x2 || !x->live || !x2->live || !is_q8(x->t.dtype) || !is_q8(x2->t.dtype) || x->t.rank != x2->t.rank ||
      memcmp(x->t.dims, x2->t.dims, sizeof(int64_t) * (size_t)x->t.rank) || alma__numel(x->t.rank, x->t.dims) == 0)
    return ALMA_OK; /* broadcasting adds stay on the float path */
  alma_tensor os;
  memset(&os, 0, sizeof os);
  os.dtype = a->yq ? a->ydt : F32;
  os.rank = x->t.rank;
  memcpy(os.dims, x->t.dims, sizeof(int64_t) * (size_t)os.rank);
  dnnl_memory_desc_t s0, s1, d;
  alma__dn_val_md(x, &s0);
  s1 = s0;
  s1.data_type = alma__dn_dtype(x2->t.dtype);
  d = s0;
  d.data_type = alma__dn_dtype(os.dtype);
  uint64_t h = 1469598103934665603ull;
  int32_t ints[6] = {a->xzp, a->x2zp, a->yq, a->yzp, (int32_t)os.dtype, a->n_elt};
  float fl[3] = {a->xs, a->x2s, a->ys};
  h = fnv(h, ints, sizeof ints);
  h = fnv(h, fl, sizeof fl);
  h = fnv(h, a->elt, sizeof(dn_elt) * (size_t)a->n_elt);
  int32_t x2dt = (int32_t)x2->t.dtype; /* (s1 is s0's layout in this type; s0 is compared below) */
  h = fnv(h, &x2dt, sizeof x2dt);
  if (!q->valid || q->pkey != h || !dnnl_memory_desc_equal(&q->xmd, &s0)) {
    qprim_free(q);
    q->valid = 1;
    q->xmd = s0;
    q->pkey = h;
    ALMA_TRY(q_build_add(p, q, a, &s0, &s1, &d));
  }
  if (q->declined) return ALMA_OK;
  void *p0 = NULL, *p1 = NULL;
  dn_buf *t0 = NULL, *t1 = NULL, *db = NULL;
  alma_status st = alma__dn_val_get(p, x, &s0, 1, &p0, &t0, n);
  if (st == ALMA_OK) st = alma__dn_val_get(p, x2, &s1, 1, &p1, &t1, n);
  if (st == ALMA_OK && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&d)))) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (st == ALMA_OK) {
    dnnl_exec_arg_t args[4];
    int na = 0;
    dnnl_memory_set_data_handle(q->m_src, p0);
    dnnl_memory_set_data_handle(q->m_wei, p1);
    dnnl_memory_set_data_handle(q->m_dst, db->ptr);
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC_0, q->m_src};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC_1, q->m_wei};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, q->m_dst};
    st = q_execute(p, q, n, args, na);
  }
  alma__dn_unref(p, t0);
  alma__dn_unref(p, t1);
  return q_done(p, st, db, out, &os, &d, done, 1);
}

/* QK_MOVE: the anchor (MaxPool / Flatten / Reshape) run on x's 8-bit values, its output the
 * QuantizeLinear's (same scale, zero point and type). Declines (fallback) when the node's own
 * kernel does (a layout or geometry it does not take). */
static alma_status q_exec_move(dn_plan *p, qclu *c, int *done) {
  const alma_node *n = &p->g->nodes[c->anchor];
  dn_val *x = &p->vals[c->xv];
  *done = 0;
  if (!x->live || x->t.dtype != c->ydt || n->n_inputs > 2 || n->n_outputs > 8) return ALMA_OK;
  /* declined before in this layout: straight to the float path (the node's primitive slot would
   * otherwise be built again for each form, every run) */
  dnnl_memory_desc_t xmd;
  alma__dn_val_md(x, &xmd);
  if (c->pr.valid && c->pr.declined && dnnl_memory_desc_equal(&c->pr.xmd, &xmd)) return ALMA_OK;
  dn_val *in[2] = {x, n->n_inputs > 1 && n->inputs[1] >= 0 ? &p->vals[n->inputs[1]] : NULL};
  if (in[1] && (!in[1]->live || alma__dn_val_plain(p, in[1], n) != ALMA_OK)) return ALMA_OK; /* Reshape's shape */
  /* shapes as the float node infers them (MaxPool before opset 12 takes no 8-bit input) */
  alma_tensor tx = x->t, os[8];
  tx.dtype = F32;
  tx.data = NULL;
  const alma_tensor *tin[2] = {&tx, in[1] ? &in[1]->t : NULL};
  memset(os, 0, sizeof os);
  if (n->op->infer(n, tin, n->n_inputs, os, n->n_outputs) != ALMA_OK) {
    alma__error_clear();
    return ALMA_OK;
  }
  os[0].dtype = x->t.dtype;
  if (alma__numel(x->t.rank, x->t.dims) == 0 || alma__numel(os[0].rank, os[0].dims) == 0) return ALMA_OK;
  dn_val *out[1] = {&p->vals[c->outv]};
  ALMA_TRY(alma__dn_run(p, c->anchor, 0, in, n->n_inputs, os, out, 1, done));
  if (!*done) {
    c->pr.valid = c->pr.declined = 1;
    c->pr.xmd = xmd;
    const dn_prim *np = p->nodes[c->anchor].prim[DN_PRIM_SINGLE];
    snprintf(c->pr.why, sizeof c->pr.why, "%s", np && np->declined ? np->why : "the node's kernel takes no such int8 input");
  }
  return ALMA_OK;
}

/* ---- compile: the clusters ----------------------------------------------------------------------------- */
static const alma_node *dq_of(const alma_graph *g, int v) {
  const alma_node *d = producer(g, v);
  return d && is_op(d, "DequantizeLinear") ? d : NULL;
}

/* Weights W (int8 constant, or QuantizeLinear of a float constant to int8 computed here) behind
 * DequantizeLinear dq, scales per tensor or along oc_axis of W, zero points all 0. */
static int match_weights(const alma_graph *g, const alma_node *dq, int oc_axis, qclu *c) {
  if (dq->n_inputs < 2 || alma__attr_i(dq, "block_size", 0) != 0) return 0;
  const alma_tensor *W = alma__dn_const(g, dq->inputs[0]);
  const alma_node *qn = NULL;
  if (!W) { /* PyTorch QAT: QuantizeLinear(float W, s, zp) -> DequantizeLinear */
    qn = producer(g, dq->inputs[0]);
    if (!qn || !is_op(qn, "QuantizeLinear") || qn->n_inputs < 3 || alma__attr_i(qn, "block_size", 0) != 0) return 0;
    W = alma__dn_const(g, qn->inputs[0]);
    if (!W || W->dtype != F32) return 0;
  } else if (W->dtype != S8) {
    return 0;
  }
  if (W->rank < 2 || W->rank > ALMA_MAX_RANK || oc_axis >= W->rank) return 0;
  int64_t OC = W->dims[oc_axis];
  const alma_tensor *sc = alma__dn_const(g, dq->inputs[1]);
  if (!sc || sc->dtype != F32) return 0;
  int64_t ns = alma_tensor_numel(sc);
  int axis = (int)alma__attr_i(dq, "axis", 1);
  if (axis < 0) axis += W->rank;
  if (ns != 1 && (ns != OC || axis != oc_axis)) return 0;
  const float *sv = sc->data;
  for (int64_t k = 0; k < ns; k++)
    if (!(sv[k] > 0) || !isfinite(sv[k])) return 0;
  if (dq->n_inputs > 2 && dq->inputs[2] >= 0) { /* zero points: int8 zeros */
    const alma_tensor *z = alma__dn_const(g, dq->inputs[2]);
    if (!z || z->dtype != S8) return 0;
    for (int64_t k = 0; k < alma_tensor_numel(z); k++)
      if (((const int8_t *)z->data)[k]) return 0;
  }
  int64_t nw = alma_tensor_numel(W);
  if (qn) { /* quantize the float weights as QuantizeLinear does: saturate(round(w / s) + zp) */
    const alma_tensor *qs = alma__dn_const(g, qn->inputs[1]), *qz = alma__dn_const(g, qn->inputs[2]);
    if (!qs || qs->dtype != F32 || !qz || qz->dtype != S8) return 0;
    int64_t nqs = alma_tensor_numel(qs), nqz = alma_tensor_numel(qz);
    int qaxis = (int)alma__attr_i(qn, "axis", 1);
    if (qaxis < 0) qaxis += W->rank;
    if ((nqs != 1 && (nqs != W->dims[qaxis])) || (nqz != 1 && nqz != nqs) || qaxis < 0 || qaxis >= W->rank) return 0;
    int64_t inner = alma__numel(W->rank - qaxis - 1, W->dims + qaxis + 1), dim = W->dims[qaxis];
    if (!(c->w_own = malloc((size_t)nw))) return 0;
    for (int64_t i = 0; i < nw; i++) {
      int64_t ch = nqs == 1 ? 0 : (i / inner) % dim;
      float s = ((const float *)qs->data)[ch];
      int zp = ((const int8_t *)qz->data)[nqz == 1 ? 0 : ch];
      float v = rintf(((const float *)W->data)[i] / s) + (float)zp;
      v = v < -128.0f ? -128.0f : v > 127.0f ? 127.0f : v;
      if (v != v) v = (float)zp;
      c->w_own[i] = (int8_t)v;
    }
    c->w = c->w_own;
  } else {
    c->w = W->data;
  }
  c->wrank = W->rank;
  memcpy(c->wdims, W->dims, sizeof(int64_t) * (size_t)W->rank);
  if (!(c->ws = malloc(sizeof(float) * (size_t)ns))) return 0;
  memcpy(c->ws, sv, sizeof(float) * (size_t)ns);
  c->nws = ns;
  return 1;
}

/* Bias input v of Conv/Gemm: DequantizeLinear(int32 constant, scale, 0) or a float constant, OC values. */
static int match_bias(const alma_graph *g, int v, int64_t OC, qclu *c) {
  const alma_node *dq = dq_of(g, v);
  if (dq) {
    const alma_tensor *B = alma__dn_const(g, dq->inputs[0]);
    const alma_tensor *sc = dq->n_inputs > 1 ? alma__dn_const(g, dq->inputs[1]) : NULL;
    if (!B || B->dtype != S32 || alma_tensor_numel(B) != OC || !sc || sc->dtype != F32 ||
        alma__attr_i(dq, "block_size", 0) != 0)
      return 0;
    int64_t ns = alma_tensor_numel(sc);
    if (ns != 1 && ns != OC) return 0;
    if (dq->n_inputs > 2 && dq->inputs[2] >= 0) {
      const alma_tensor *z = alma__dn_const(g, dq->inputs[2]);
      if (!z || z->dtype != S32) return 0;
      for (int64_t k = 0; k < alma_tensor_numel(z); k++)
        if (((const int32_t *)z->data)[k]) return 0;
    }
    const int32_t *bv = B->data;
    const float *sv = sc->data;
    /* when the bias scale is x_scale * w_scale (as the spec asks and quantizers write), the int32
     * values are the accumulator units themselves: exact */
    int exact = 1;
    for (int64_t k = 0; k < OC && exact; k++)
      exact = sv[ns == 1 ? 0 : k] == c->xs * c->ws[c->nws == 1 ? 0 : k];
    if (exact) {
      if (!(c->bq = malloc(sizeof(int32_t) * (size_t)OC))) return 0;
      memcpy(c->bq, bv, sizeof(int32_t) * (size_t)OC);
    } else {
      if (!(c->bf = malloc(sizeof(float) * (size_t)OC))) return 0;
      for (int64_t k = 0; k < OC; k++) c->bf[k] = (float)bv[k] * sv[ns == 1 ? 0 : k];
    }
    c->dq_b = (int)(dq - g->nodes);
    return 1;
  }
  const alma_tensor *B = alma__dn_const(g, v);
  if (!B || B->dtype != F32 || alma_tensor_numel(B) != OC || (B->rank == 2 && B->dims[0] != 1) || B->rank > 2) return 0;
  if (!(c->bf = malloc(sizeof(float) * (size_t)OC))) return 0;
  memcpy(c->bf, B->data, sizeof(float) * (size_t)OC);
  return 1;
}

static void clu_free(qclu *c) {
  free(c->w_own);
  free(c->ws);
  free(c->bq);
  free(c->bf);
  free(c->wf);
  free(c->wsplit);
  qprim_free(&c->pr);
  qprim_free(&c->prdw);
  qprim_free(&c->pr2);
}

/* A float32 constant that multiplies or adds along the output channels only: out[OC] gets its
 * values (one value: broadcast). R: the output's rank with the channels on axis 1 (convolutions),
 * or 0 for a matmul (channels last, rank >= 2 unknown here, so the constant has rank <= 2). Either
 * the constant itself or, as ONNX Runtime writes Conv biases, Reshape(constant, constant shape). */
static int chan_const(const alma_graph *g, int v, int R, int64_t OC, float *out) {
  const alma_tensor *t = alma__dn_const(g, v);
  int64_t dims[ALMA_MAX_RANK];
  int rank;
  if (t) {
    rank = t->rank;
    memcpy(dims, t->dims, sizeof(int64_t) * (size_t)rank);
  } else {
    const alma_node *r = producer(g, v);
    if (!r || !is_op(r, "Reshape") || r->n_inputs < 2 || alma__attr_i(r, "allowzero", 0)) return 0;
    const alma_tensor *sh = alma__dn_const(g, r->inputs[1]);
    t = alma__dn_const(g, r->inputs[0]);
    if (!t || !sh || sh->dtype != ALMA_DTYPE_INT64 || sh->rank != 1 || sh->dims[0] > ALMA_MAX_RANK) return 0;
    rank = (int)sh->dims[0];
    int64_t known = 1, cnt = alma_tensor_numel(t);
    int neg = -1;
    for (int k = 0; k < rank; k++) {
      int64_t d = ((const int64_t *)sh->data)[k];
      if (d == -1 && neg < 0) neg = k, d = 1;
      else if (d <= 0) return 0; /* (0 copies an input dimension: not this form) */
      dims[k] = d;
      known *= d;
    }
    if (neg >= 0 && known > 0 && cnt % known == 0) dims[neg] = cnt / known;
    else if (neg >= 0 || known != cnt) return 0;
  }
  if (t->dtype != F32 || rank > (R ? R : 2)) return 0;
  int64_t cnt = alma_tensor_numel(t);
  const float *d = t->data;
  if (cnt == 1) {
    for (int64_t c = 0; c < OC; c++) out[c] = d[0];
    return 1;
  }
  if (cnt != OC) return 0;
  for (int k = 0; k < rank; k++) { /* aligned to the output's last axes */
    int chan = R ? R - rank + k == 1 : k == rank - 1;
    if (dims[k] != 1 && !chan) return 0;
  }
  memcpy(out, d, sizeof(float) * (size_t)OC);
  return 1;
}

/* The INT8_DYNAMIC form, as alma's pass and ONNX Runtime's dynamic quantizer write it, anchored at
 * ConvInteger / MatMulInteger node i:
 *   x -> DynamicQuantizeLinear -> (xq, xs, xzp)
 *   ConvInteger | MatMulInteger(xq, W constant, xzp [, W zero point constant]) -> Cast(float)
 *     -> Mul(xs * C) | Mul(xs) -> Mul(C) | Mul(C) -> Mul(xs)   (C: constants along the channels)
 *     [-> Add(constant bias along the channels)]
 * W becomes s8 (W - its zero point, which must fit: INT8_DYNAMIC's uint8 q + 128 with 128, ONNX
 * Runtime's int8 with 0) and the scales C the per-channel output scales; xs and xzp are read when
 * the cluster runs. A Mul(xs, C) read only here (after the anchor) becomes a member. *vout: the
 * chain's last value, where the generic post-op chain goes on. */
static int match_dyn(dn_plan *p, int i, const int *consumer, qclu *c, int *vout) {
  const alma_graph *g = p->g;
  const alma_node *n = &g->nodes[i];
  int conv = is_op(n, "ConvInteger");
  if (n->n_inputs < 3 || n->n_outputs != 1 || n->outputs[0] < 0 || n->inputs[0] < 0 || n->inputs[2] < 0) return 0;
  const alma_node *dq = producer(g, n->inputs[0]);
  if (!dq || !is_op(dq, "DynamicQuantizeLinear") || dq->n_outputs < 3 || dq->outputs[0] != n->inputs[0] ||
      dq->outputs[1] < 0 || dq->outputs[2] != n->inputs[2] || dq->n_inputs < 1 || dq->inputs[0] < 0)
    return 0;
  const alma_tensor *W = alma__dn_const(g, n->inputs[1]);
  if (!W || !is_q8(W->dtype) || W->rank < (conv ? 3 : 2) || W->rank > (conv ? 5 : ALMA_MAX_RANK)) return 0;
  int64_t OC = W->dims[conv ? 0 : W->rank - 1], nw = alma_tensor_numel(W);
  const alma_tensor *Z = n->n_inputs > 3 && n->inputs[3] >= 0 ? alma__dn_const(g, n->inputs[3]) : NULL;
  if (n->n_inputs > 3 && n->inputs[3] >= 0 && (!Z || Z->dtype != W->dtype)) return 0;
  int64_t nz = Z ? alma_tensor_numel(Z) : 1;
  if (OC < 1 || (nz != 1 && (nz != OC || (!conv && W->rank > 2) || Z->dims[Z->rank - 1] != OC))) return 0;
  c->kind = conv ? QK_CONV : QK_MATMUL;
  c->dyn = 1;
  c->xv = n->inputs[0];
  c->xdt = U8;
  c->xs_v = dq->outputs[1];
  c->xzp_v = dq->outputs[2];
  c->dq_x = c->dq_w = -1;
  float *tmp = malloc(sizeof(float) * (size_t)OC);
  c->w_own = malloc((size_t)nw);
  c->ws = malloc(sizeof(float) * (size_t)OC);
  if (!tmp || !c->w_own || !c->ws) goto no;
  int64_t inner = conv ? nw / OC : 1, wmax = 0;
  for (int64_t k = 0; k < nw; k++) { /* W - zero point as s8 */
    int64_t ch = nz == 1 ? 0 : conv ? k / inner : k % OC;
    int32_t wv = W->dtype == U8 ? ((const uint8_t *)W->data)[k] : ((const int8_t *)W->data)[k];
    int32_t zv = !Z ? 0 : Z->dtype == U8 ? ((const uint8_t *)Z->data)[ch] : ((const int8_t *)Z->data)[ch];
    int32_t d = wv - zv;
    if (d < -128 || d > 127) goto no;
    c->w_own[k] = (int8_t)d;
    if (d < 0) d = -d;
    if (d > wmax) wmax = d;
  }
  c->w = c->w_own;
  c->wrank = W->rank;
  memcpy(c->wdims, W->dims, sizeof(int64_t) * (size_t)W->rank);
  c->w7 = wmax <= 64; /* 255 * 64 * 2 < 32767: oneDNN's u8 x s8 pairs cannot saturate */
  c->nws = OC;
  for (int64_t k = 0; k < OC; k++) c->ws[k] = 1.0f;
  c->mem[c->nmem++] = i;
  int v = n->outputs[0], R = conv ? W->rank : 0;
  /* Cast to float */
  if (p->static_uses[v] != 1 || consumer[v] < 0) goto no;
  const alma_node *cn = &g->nodes[consumer[v]];
  if (!is_op(cn, "Cast") || alma__attr_i(cn, "to", 0) != ALMA_DTYPE_FLOAT32 || cn->n_outputs != 1 || cn->outputs[0] < 0 ||
      p->nodes[consumer[v]].q_role)
    goto no;
  c->mem[c->nmem++] = consumer[v];
  v = cn->outputs[0];
  /* the scales: xs once, constants along the channels, in one or two Muls */
  int nxs = 0;
  for (int nmul = 0; nmul < 2 && c->nmem < DN_MAX_MEMBERS - 1; nmul++) {
    if (p->static_uses[v] != 1 || consumer[v] < 0) break;
    int mi = consumer[v], sm = -1;
    const alma_node *mn = &g->nodes[mi];
    if (!is_op(mn, "Mul") || mn->n_inputs != 2 || mn->n_outputs != 1 || mn->outputs[0] < 0 || p->nodes[mi].q_role ||
        mn->inputs[0] == mn->inputs[1])
      break;
    int other = mn->inputs[0] == v ? mn->inputs[1] : mn->inputs[0];
    if (other == c->xs_v) {
      if (nxs++) break;
    } else if (chan_const(g, other, R, OC, tmp)) {
      for (int64_t k = 0; k < OC; k++) c->ws[k] *= tmp[k];
    } else {
      const alma_node *pm = producer(g, other);
      int cv = !pm || !is_op(pm, "Mul") || pm->n_inputs != 2 ? -1
               : pm->inputs[0] == c->xs_v                   ? pm->inputs[1]
               : pm->inputs[1] == c->xs_v                   ? pm->inputs[0]
                                                            : -1;
      if (cv < 0 || nxs || !chan_const(g, cv, R, OC, tmp)) break;
      nxs++;
      for (int64_t k = 0; k < OC; k++) c->ws[k] *= tmp[k];
      int pmi = (int)(pm - g->nodes);
      if (p->static_uses[other] == 1 && pmi > i && !p->nodes[pmi].q_role) sm = pmi;
    }
    if (sm >= 0) c->mem[c->nmem++] = sm;
    c->mem[c->nmem++] = mi;
    v = mn->outputs[0];
  }
  if (nxs != 1) goto no;
  for (int64_t k = 0; k < OC; k++) /* (the bias is divided by them) */
    if (!(c->ws[k] != 0) || !isfinite(c->ws[k])) goto no;
  /* a constant bias */
  if (p->static_uses[v] == 1 && consumer[v] >= 0 && c->nmem < DN_MAX_MEMBERS) {
    const alma_node *an = &g->nodes[consumer[v]];
    int other = an->n_inputs == 2 ? (an->inputs[0] == v ? an->inputs[1] : an->inputs[0]) : -1;
    if (is_op(an, "Add") && an->since_version >= 7 && an->n_outputs == 1 && an->outputs[0] >= 0 && other != v && other >= 0 &&
        !p->nodes[consumer[v]].q_role && chan_const(g, other, R, OC, tmp)) {
      if (!(c->bf = malloc(sizeof(float) * (size_t)OC))) goto no;
      memcpy(c->bf, tmp, sizeof(float) * (size_t)OC);
      c->mem[c->nmem++] = consumer[v];
      v = an->outputs[0];
    }
  }
  /* no exact int8 matmul on this CPU for 8-bit weights (see the top comment): float32 on the
   * dequantized values, or (dnnl.int8_dyn_matmul=split) two 7-bit halves W_hi = floor(W / 2)
   * and W_lo = W - W_hi (both within [-64, 64]) stacked along K times the source repeated,
   * [x, x] * [W_hi; W_lo] = x * W, one exact u8 matmul of twice the depth: measured slower than
   * float32 on the AVX2 machine (docs/quantization.md) */
  if (!conv && p->q->mm_off && !c->w7) {
    c->split = W->rank == 2 && p->opt.int8_dyn_split;
    c->emu = !c->split;
  }
  /* oneDNN 2.6's int8 depthwise convolutions apply binary post-ops (this run's x_scale) wrongly to
   * a last, partial block of channels (measured on AVX2: 10 and 12 channels; 16 are right): such
   * convolutions run in float32 on the dequantized values */
  int64_t G = conv ? alma__attr_i(n, "group", 1) : 1;
  if (conv && G > 1 && W->dims[1] == 1 && (G % 16 || OC % 16)) c->emu = 1;
  if (c->emu) {
    if (!(c->wf = malloc(sizeof(float) * (size_t)nw))) goto no;
    for (int64_t k = 0; k < nw; k++) c->wf[k] = (float)c->w_own[k] * c->ws[conv ? k / inner : k % OC];
  }
  if (c->split) {
    if (!(c->wsplit = malloc(2 * (size_t)nw))) goto no;
    for (int64_t k = 0; k < nw; k++) {
      int v = c->w_own[k], hi = v >= 0 ? v / 2 : -((1 - v) / 2); /* floor(v / 2) */
      c->wsplit[k] = (int8_t)hi;
      c->wsplit[nw + k] = (int8_t)(c->w_own[k] - hi);
    }
  }
  free(tmp);
  *vout = v;
  return 1;
no:
  free(tmp);
  return 0;
}

/* QK_MOVE: DequantizeLinear(x) -> MaxPool | Flatten | Reshape -> QuantizeLinear with the same
 * scale, zero point and type (INT8_STATIC's and ONNX Runtime's QDQ form). Max commutes with a
 * monotone quantization and the views only move elements, so the QuantizeLinear's output is the
 * op applied to x's 8-bit values: the node runs once on them (run_pool's uint8/int8 max pooling in
 * x's layout, run_view's alias of x made plain) and both conversions through float32 go. */
static int match_move(dn_plan *p, int i, const int *consumer, qclu *c) {
  const alma_graph *g = p->g;
  const alma_node *n = &g->nodes[i];
  const alma_node *dx = n->n_inputs >= 1 ? dq_of(g, n->inputs[0]) : NULL;
  int pool = is_op(n, "MaxPool");
  if (!dx || dx->inputs[0] < 0 || n->n_outputs < 1 || n->outputs[0] < 0 || !qdq_params(g, dx, &c->xs, &c->xzp, &c->xdt))
    return 0;
  if (p->nodes[i].kind != (pool ? DK_POOL : DK_VIEW)) return 0;
  if (pool && n->n_outputs > 1 && n->outputs[1] >= 0) return 0; /* Indices */
  if (is_op(n, "Reshape") && (n->n_inputs != 2 || !alma__dn_const(g, n->inputs[1]))) return 0;
  int v = n->outputs[0];
  if (p->static_uses[v] != 1 || consumer[v] < 0) return 0;
  int ci = consumer[v];
  const alma_node *qn = &g->nodes[ci];
  if (!is_op(qn, "QuantizeLinear") || qn->inputs[0] != v || qn->n_outputs != 1 || qn->outputs[0] < 0 ||
      p->nodes[ci].q_role || !qdq_params(g, qn, &c->ys, &c->yzp, &c->ydt))
    return 0;
  /* the same parameters on both sides (a DequantizeLinear without a zero point is checked against
   * the type when it runs) */
  if (c->ys != c->xs || c->yzp != c->xzp || !is_q8(c->ydt) || (c->xdt && c->xdt != c->ydt)) return 0;
  c->kind = QK_MOVE;
  c->xv = dx->inputs[0];
  c->dq_x = (int)(dx - g->nodes);
  c->dq_w = -1;
  c->yq = 1;
  c->mem[c->nmem++] = i;
  c->mem[c->nmem++] = ci;
  c->outv = qn->outputs[0];
  c->last = ci;
  return 1;
}

/* Node i as the anchor of a cluster: fills c (members: the anchor and its post chain). */
static int match_cluster(dn_plan *p, int i, const int *consumer, qclu *c) {
  const alma_graph *g = p->g;
  const alma_node *n = &g->nodes[i];
  memset(c, 0, sizeof *c);
  c->dq_b = -1;
  c->sum_other = -1;
  c->anchor = i;
  c->x2v = -1;
  int kind = 0, v;
  int64_t OC = 0;
  if (is_op(n, "ConvInteger") || is_op(n, "MatMulInteger")) {
    if (!match_dyn(p, i, consumer, c, &v)) goto no;
    kind = c->kind;
    OC = c->nws;
    goto chain;
  }
  if (is_op(n, "MaxPool") || is_op(n, "Flatten") || is_op(n, "Reshape")) return !p->q->move_off && match_move(p, i, consumer, c);
  if (is_op(n, "Add")) { /* DequantizeLinear(a) + DequantizeLinear(b): an int8 binary primitive */
    const alma_node *da = n->n_inputs == 2 ? dq_of(g, n->inputs[0]) : NULL;
    const alma_node *db = n->n_inputs == 2 ? dq_of(g, n->inputs[1]) : NULL;
    if (!da || !db || n->since_version < 7 || n->n_outputs != 1 || n->outputs[0] < 0 || da->inputs[0] < 0 ||
        db->inputs[0] < 0 || !qdq_params(g, da, &c->xs, &c->xzp, &c->xdt) || !qdq_params(g, db, &c->x2s, &c->x2zp, &c->x2dt))
      return 0;
    c->kind = QK_ADD;
    c->xv = da->inputs[0];
    c->dq_x = (int)(da - g->nodes);
    c->x2v = db->inputs[0];
    c->dq_w = (int)(db - g->nodes);
    goto post;
  }
  kind = is_op(n, "Conv") ? QK_CONV : is_op(n, "MatMul") ? QK_MATMUL : is_op(n, "Gemm") ? QK_GEMM : 0;
  if (!kind || n->n_inputs < 2 || n->n_outputs != 1 || n->outputs[0] < 0) return 0;
  if (kind != QK_CONV && p->q->mm_off) return 0; /* the float path keeps its own fusion */
  if (kind == QK_GEMM && (alma__attr_i(n, "transA", 0) || alma__attr_f(n, "alpha", 1.0f) != 1.0f ||
                          alma__attr_f(n, "beta", 1.0f) != 1.0f || n->since_version < 7))
    return 0;
  c->kind = kind;
  c->transb = kind == QK_GEMM && alma__attr_i(n, "transB", 0) != 0;
  const alma_node *dx = dq_of(g, n->inputs[0]), *dw = dq_of(g, n->inputs[1]);
  if (!dx || !dw || dx->n_inputs < 2 || dx->inputs[0] < 0) return 0;
  if (!qdq_params(g, dx, &c->xs, &c->xzp, &c->xdt)) return 0;
  c->xv = dx->inputs[0];
  c->dq_x = (int)(dx - g->nodes);
  c->dq_w = (int)(dw - g->nodes);
  int oc_axis = kind == QK_CONV ? 0 : c->transb ? 0 : 1;
  if (!match_weights(g, dw, oc_axis, c)) goto no;
  if (kind == QK_MATMUL && c->wrank != 2) goto no;
  OC = c->wdims[oc_axis];
  if (n->n_inputs > 2 && n->inputs[2] >= 0 && !match_bias(g, n->inputs[2], OC, c)) goto no;
  /* the post chain: single-consumer values through eltwise nodes, one Add, a QuantizeLinear */
post:
  c->mem[c->nmem++] = i;
  v = n->outputs[0];
chain:
  while (c->nmem < DN_MAX_MEMBERS) {
    if (p->static_uses[v] != 1 || consumer[v] < 0) break;
    int ci = consumer[v];
    const alma_node *cn = &g->nodes[ci];
    if (cn->n_outputs != 1 || cn->outputs[0] < 0 || p->nodes[ci].q_role) break;
    dn_elt e[DN_MAX_ELT];
    int ne = 0;
    if (is_op(cn, "QuantizeLinear")) {
      if (c->sum_other >= 0 || cn->inputs[0] != v || c->dyn) break; /* a sum needs a float destination */
      alma_dtype ydt;
      if (!qdq_params(g, cn, &c->ys, &c->yzp, &ydt) || !is_q8(ydt)) break;
      c->yq = 1;
      c->ydt = ydt;
      c->mem[c->nmem++] = ci;
      v = cn->outputs[0];
      break;
    }
    if ((ne = alma__dn_eltwise_steps(g, cn, e)) > 0 && cn->inputs[0] == v) {
      if (c->n_elt + ne > Q_MAX_ELT) break;
      memcpy(&c->elt[c->n_elt], e, sizeof(dn_elt) * (size_t)ne);
      c->n_elt += ne;
    } else if (c->kind != QK_ADD && is_op(cn, "Add") && cn->n_inputs == 2 && c->sum_other < 0 && cn->since_version >= 7) {
      int other = cn->inputs[0] == v ? cn->inputs[1] : cn->inputs[0];
      if (other == v || other < 0) break;
      const alma_tensor *ct = alma__dn_const(g, other);
      if (ct) { /* a MatMul's bias as a constant Add (PyTorch's Linear on 3-D inputs, ORT's QDQ MatMul) */
        if (kind != QK_MATMUL || c->nmem != 1 || c->bq || c->bf || ct->dtype != F32 || alma_tensor_numel(ct) != OC ||
            ct->rank < 1 || ct->dims[ct->rank - 1] != OC)
          break;
        if (!(c->bf = malloc(sizeof(float) * (size_t)OC))) break;
        memcpy(c->bf, ct->data, sizeof(float) * (size_t)OC);
      } else {
        c->sum_other = other;
        c->sum_pos = c->n_elt;
      }
    } else {
      break;
    }
    c->mem[c->nmem++] = ci;
    v = cn->outputs[0];
  }
  /* oneDNN 2.6 has only a reference kernel for int8 sources and a float32 destination: such an
   * add stays on the float path (its DequantizeLinear inputs as reorders) */
  if (c->kind == QK_ADD && !c->yq) goto no;
  c->outv = v;
  for (int a = 1; a < c->nmem; a++) /* in the graph's (topological) order: a dyn scale Mul may come early */
    for (int b = a; b > 0 && c->mem[b - 1] > c->mem[b]; b--) {
      int t = c->mem[b];
      c->mem[b] = c->mem[b - 1];
      c->mem[b - 1] = t;
    }
  c->last = c->mem[c->nmem - 1];
  return 1;
no:
  clu_free(c);
  return 0;
}

/* Eltwise steps that commute with a positive scale (1/y_scale folds into the output scales). */
static int elt_folds(const qclu *c) {
  for (int e = 0; e < c->n_elt; e++)
    if (c->elt[e].alg != dnnl_eltwise_relu && c->elt[e].alg != dnnl_eltwise_clip && c->elt[e].alg != dnnl_eltwise_clip_v2)
      return 0;
  return 1;
}

/* The int8 form of the float path's 1x1 + depthwise fusion (MobileNet's expand and depthwise
 * convolutions): a 1x1 convolution cluster A whose int8 output (zero point 0, u8: after Relu/Clip)
 * is read only through a lazy DequantizeLinear by a depthwise 3x3 cluster B of the same scale and
 * zero point, B with eltwise steps only and a u8/s8 destination of zero point 0. A then runs as one
 * oneDNN convolution with a depthwise post-op whose output is B's (the expand output never stored);
 * the geometry and oneDNN's answer are checked when it runs (q_exec_dw), else both run apart. */
static void plan_dw(dn_plan *p, dn_qstate *S, const int *consumer) {
  const alma_graph *g = p->g;
  for (int ci = 0; ci < S->nclu; ci++) {
    S->clu[ci].dw_next = S->clu[ci].dw_prev = -1;
    S->clu[ci].dw_done_run = INT64_MIN;
  }
  if (S->dw_off) return;
  for (int ci = 0; ci < S->nclu; ci++) {
    qclu *a = &S->clu[ci];
    if (a->kind != QK_CONV || a->dyn || a->emu || !a->yq || a->ydt != U8 || a->yzp != 0 || a->sum_other >= 0 ||
        a->wrank != 4 || a->wdims[2] != 1 || a->wdims[3] != 1 || !elt_folds(a) || a->dw_prev >= 0)
      continue;
    int v = a->outv;
    if (p->static_uses[v] != 1 || consumer[v] < 0) continue;
    int di = consumer[v];
    const alma_node *dq = &g->nodes[di];
    if (!is_op(dq, "DequantizeLinear") || p->nodes[di].q_role != DN_Q_LAZY || dq->inputs[0] != v || dq->outputs[0] < 0)
      continue;
    int dv = dq->outputs[0];
    if (p->static_uses[dv] != 1 || consumer[dv] < 0) continue;
    int bi = consumer[dv];
    if (p->nodes[bi].q_role != DN_Q_MEMBER) continue;
    qclu *b = &S->clu[p->nodes[bi].q_idx];
    const alma_node *bn = &g->nodes[b->anchor];
    if (b == a || b->anchor != bi || bn->inputs[0] != dv || b->kind != QK_CONV || b->dyn || b->emu || !b->yq ||
        !is_q8(b->ydt) || b->yzp != 0 || b->sum_other >= 0 || b->xv != v || b->xs != a->ys || b->xzp != a->yzp ||
        b->wrank != 4 || b->wdims[1] != 1 || b->wdims[2] != 3 || b->wdims[3] != 3 || !elt_folds(b) || b->dw_next >= 0 ||
        b->dw_prev >= 0 || alma__attr_i(bn, "group", 1) != b->wdims[0] || b->wdims[0] != a->wdims[0])
      continue;
    a->dw_next = p->nodes[bi].q_idx;
    b->dw_prev = ci;
  }
}

void alma__dn_q_plan(dn_plan *p) {
  const alma_graph *g = p->g;
  dn_qstate *S = qstate(p);
  if (!S || S->off) return;
  int nv = g->n_values, nn = g->n_nodes;
  int *consumer = malloc(sizeof(int) * (size_t)(nv + 1));
  qclu *clu = calloc((size_t)nn + 1, sizeof *clu);
  if (!consumer || !clu) {
    free(consumer);
    free(clu);
    return;
  }
  for (int v = 0; v < nv; v++) consumer[v] = -1;
  for (int i = 0; i < nn; i++)
    for (int k = 0; k < g->nodes[i].n_inputs; k++)
      if (g->nodes[i].inputs[k] >= 0) consumer[g->nodes[i].inputs[k]] = i;
  int nc = 0;
  for (int i = 0; i < nn; i++) {
    if (p->nodes[i].q_role || !match_cluster(p, i, consumer, &clu[nc])) continue;
    qclu *c = &clu[nc];
    for (int m = 0; m < c->nmem; m++) {
      p->nodes[c->mem[m]].q_role = DN_Q_MEMBER;
      p->nodes[c->mem[m]].q_idx = nc;
    }
    nc++;
  }
  S->clu = clu;
  S->nclu = nc;
  /* float groups overlapping a cluster are dissolved (their other nodes run alone) */
  for (int i = 0; i < nn; i++) {
    if (p->nodes[i].q_role != DN_Q_MEMBER || p->nodes[i].head < 0) continue;
    dn_node *h = &p->nodes[p->nodes[i].head];
    for (int m = 0; m < h->nmem; m++) p->nodes[h->mem[m]].head = -1;
    h->nmem = 0;
    h->npost = h->nself; /* an alma.Fused* head keeps its own post-ops */
  }
  /* lazy DequantizeLinear nodes: every reader is a cluster anchor */
  S->lazy = calloc((size_t)nn + 1, sizeof *S->lazy);
  for (int ci = 0; ci < nc && S->lazy; ci++) {
    qclu *c = &clu[ci];
    int dqs[3] = {c->dq_x, c->dq_w, c->dq_b};
    for (int k = 0; k < 3; k++) {
      int d = dqs[k];
      if (d < 0 || p->nodes[d].q_role) continue;
      int out = g->nodes[d].outputs[0], all = out >= 0 && !g->values[out].is_output;
      for (int j = 0; j < nn && all; j++)
        for (int q = 0; q < g->nodes[j].n_inputs && all; q++)
          if (g->nodes[j].inputs[q] == out)
            all = p->nodes[j].q_role == DN_Q_MEMBER && clu[p->nodes[j].q_idx].anchor == j && q < 3;
      for (int j = 0; j < nn && all; j++)
        for (int q = 0; q < g->nodes[j].n_implicit; q++) all &= g->nodes[j].implicit_inputs[q] != out;
      if (!all) continue;
      p->nodes[d].q_role = DN_Q_LAZY;
      p->nodes[d].q_idx = S->nlazy;
      S->lazy[S->nlazy].node = d;
      S->lazy[S->nlazy].out = out;
      S->nlazy++;
    }
  }
  for (int ci = 0; ci < nc; ci++) {
    qclu *c = &clu[ci];
    if (c->dyn) { /* the scale's reader may run on its own before the cluster: keep the scale alive */
      c->x_extra_use = 1;
      p->static_uses[c->xs_v]++;
      continue;
    }
    /* the DequantizeLinear of x runs anyway: keep xv alive for the cluster */
    if (p->nodes[c->dq_x].q_role != DN_Q_LAZY) {
      c->x_extra_use = 1;
      p->static_uses[c->xv]++;
    }
    if (c->kind == QK_ADD && p->nodes[c->dq_w].q_role != DN_Q_LAZY) {
      c->x2_extra_use = 1;
      p->static_uses[c->x2v]++;
    }
    if (c->kind == QK_ADD || c->kind == QK_MOVE) continue; /* these read their sources in the layout they come in */
    /* a QuantizeLinear writing xv writes it in this cluster's source layout */
    const alma_node *qn = producer(g, c->xv);
    if (qn && is_op(qn, "QuantizeLinear") && S->hint[qn - g->nodes] < 0) S->hint[qn - g->nodes] = ci;
  }
  plan_dw(p, S, consumer);
  free(consumer);
}

/* ---- run: clusters ------------------------------------------------------------------------------------ */
static void clu_args(dn_plan *p, qclu *c, qargs *a) {
  memset(a, 0, sizeof *a);
  a->kind = c->kind;
  a->n = &p->g->nodes[c->anchor];
  a->x = &p->vals[c->xv];
  a->xs = c->xs;
  a->xzp = c->xzp;
  a->x2 = c->x2v >= 0 ? &p->vals[c->x2v] : NULL;
  a->x2s = c->x2s;
  a->x2zp = c->x2zp;
  a->w = c->w;
  a->wrank = c->wrank;
  memcpy(a->wdims, c->wdims, sizeof a->wdims);
  a->wconst = 1;
  a->ws = c->ws;
  a->nws = c->nws;
  a->bq = c->bq;
  a->bf = c->bf;
  a->n_elt = c->n_elt;
  memcpy(a->elt, c->elt, sizeof a->elt);
  a->res = c->sum_other >= 0 ? &p->vals[c->sum_other] : NULL;
  a->sum_pos = c->sum_pos;
  a->yq = c->yq;
  a->ys = c->ys;
  a->yzp = c->yzp;
  a->ydt = c->ydt;
  a->transb = c->transb;
  a->dyn = c->dyn;
  a->emu = c->emu;
  a->w7 = c->w7;
  a->split = c->split;
  if (c->emu) a->w = c->wf;
  if (c->split) a->w = c->wsplit;
  if (c->dyn) a->alt = &c->pr2;
}

/* Input v of the anchor is retired: through its lazy DequantizeLinear when it has one. */
static void anchor_input_done(dn_plan *p, dn_qstate *S, int v) {
  const alma_node *d = producer(p->g, v);
  int di = d ? (int)(d - p->g->nodes) : -1;
  if (di < 0 || p->nodes[di].q_role != DN_Q_LAZY) {
    alma__dn_use_done(p, v);
    return;
  }
  qlazy *L = &S->lazy[p->nodes[di].q_idx];
  L->pending--;
  if (L->ran) {
    alma__dn_use_done(p, v);
  } else if (L->pending <= 0) { /* never materialized: its own inputs are done */
    for (int k = 0; k < d->n_inputs; k++) alma__dn_use_done(p, d->inputs[k]);
  }
}

/* The uses of the sources a cluster held for itself (their DequantizeLinear also ran). */
static void release_extra_uses(dn_plan *p, const qclu *c) {
  if (c->x_extra_use) alma__dn_use_done(p, c->dyn ? c->xs_v : c->xv);
  if (c->x2_extra_use) alma__dn_use_done(p, c->x2v);
}

static alma_status clu_fallback(dn_plan *p, dn_qstate *S, qclu *c) {
  const alma_graph *g = p->g;
  const alma_node *an = &g->nodes[c->anchor];
  c->n_fallback_runs++;
  for (int k = 0; k < an->n_inputs; k++) { /* lazy DequantizeLinear inputs computed now */
    const alma_node *d = producer(g, an->inputs[k]);
    if (!d || an->inputs[k] < 0) continue;
    int di = (int)(d - g->nodes);
    if (p->nodes[di].q_role != DN_Q_LAZY) continue;
    qlazy *L = &S->lazy[p->nodes[di].q_idx];
    if (L->ran) continue;
    ALMA_TRY(alma__dn_run_node(p, di));
    L->ran = 1;
    p->vals[L->out].uses = L->pending;
  }
  for (int m = 0; m < c->nmem; m++) ALMA_TRY(alma__dn_run_node(p, c->mem[m]));
  for (int k = 0; k < an->n_inputs; k++) {
    const alma_node *d = producer(g, an->inputs[k]);
    if (d && an->inputs[k] >= 0 && p->nodes[d - g->nodes].q_role == DN_Q_LAZY) S->lazy[p->nodes[d - g->nodes].q_idx].pending--;
  }
  release_extra_uses(p, c);
  return ALMA_OK;
}

/* A dyn cluster's source scale and zero point, as DynamicQuantizeLinear computed them this run. */
static int dyn_params(dn_plan *p, const qclu *c, qargs *a) {
  dn_val *s = &p->vals[c->xs_v], *z = &p->vals[c->xzp_v];
  const alma_node *n = &p->g->nodes[c->anchor];
  if (!s->live || !z->live || s->t.dtype != F32 || z->t.dtype != U8 || alma__numel(s->t.rank, s->t.dims) != 1 ||
      alma__numel(z->t.rank, z->t.dims) != 1 || alma__dn_val_plain(p, s, n) != ALMA_OK || alma__dn_val_plain(p, z, n) != ALMA_OK)
    return 0;
  a->xs = *(const float *)s->t.data;
  a->xzp = *(const uint8_t *)z->t.data;
  return 1;
}

alma_status alma__dn_q_step(dn_plan *p, int idx, int *at) {
  dn_qstate *S = p->q;
  dn_node *d = &p->nodes[idx];
  *at = idx;
  if (!S) return alma__errorf(ALMA_ERR_INTERNAL, "int8 state missing");
  new_run(p, S);
  if (d->q_role != DN_Q_MEMBER) return ALMA_OK; /* lazy: runs only on demand */
  qclu *c = &S->clu[d->q_idx];
  if (idx != c->last) return ALMA_OK;
  *at = c->anchor;
  const alma_graph *g = p->g;
  int done = 0;
  if (c->dw_prev >= 0 && c->dw_done_run == S->run_id) {
    done = 1; /* computed by its 1x1 cluster's fused primitive: only its inputs are retired */
  } else if (!S->fallback) {
    qargs a;
    clu_args(p, c, &a);
    if (c->dw_next >= 0) {
      qclu *b = &S->clu[c->dw_next];
      ALMA_TRY(q_exec_dw(p, c, b, &done));
      if (done) {
        b->dw_done_run = S->run_id;
        c->n_dw_runs++;
      }
    }
    if (done) {
    } else if (c->kind == QK_MOVE) {
      ALMA_TRY(q_exec_move(p, c, &done));
      p->n_int8 += done && is_op(&g->nodes[c->anchor], "MaxPool"); /* (a view is no primitive) */
    } else if (c->kind == QK_ADD) {
      if ((!c->xdt || c->xdt == a.x->t.dtype) && (!c->x2dt || c->x2dt == a.x2->t.dtype))
        ALMA_TRY(q_exec_add(p, &c->pr, &a, &p->vals[c->outv], &done));
    } else if ((!c->xdt || c->xdt == a.x->t.dtype) && (!c->dyn || dyn_params(p, c, &a))) {
      ALMA_TRY(q_exec(p, &c->pr, &a, &p->vals[c->outv], &done));
    }
  }
  if (!done) return clu_fallback(p, S, c);
  c->n_int8_runs++;
  p->n_native += c->nmem;
  p->nodes[c->anchor].n_native++;
  /* retire the members' inputs from outside the cluster */
  const alma_node *an = &g->nodes[c->anchor];
  for (int k = 0; k < an->n_inputs; k++)
    if (an->inputs[k] >= 0) anchor_input_done(p, S, an->inputs[k]);
  for (int m = 0; m < c->nmem; m++) {
    if (c->mem[m] == c->anchor) continue;
    const alma_node *mn = &g->nodes[c->mem[m]];
    for (int k = 0; k < mn->n_inputs; k++) {
      int v = mn->inputs[k], pr = v >= 0 ? g->values[v].producer : -1;
      if (v < 0) continue;
      int inside = 0;
      for (int j = 0; j < c->nmem && !inside; j++) inside = pr == c->mem[j];
      if (!inside) alma__dn_use_done(p, v);
    }
  }
  release_extra_uses(p, c);
  dn_val *o = &p->vals[c->outv];
  if (o->uses <= 0 && o->live) { /* nobody reads it */
    o->uses = 1;
    alma__dn_use_done(p, c->outv);
  }
  return ALMA_OK;
}

/* ---- run: QuantizeLinear / DequantizeLinear as reorders ------------------------------------------------ */
static qprim *node_prim(dn_plan *p, int idx) {
  dn_qstate *S = qstate(p);
  if (!S) return NULL;
  if (!S->nprim[idx]) S->nprim[idx] = calloc(1, sizeof(qprim));
  return S->nprim[idx];
}

/* A scale / zero point input's values as float / int32 (plain data). Returns the count, 0 on a
 * type it does not take. */
static int64_t read_f32(dn_plan *p, dn_val *v, const alma_node *n, const float **out) {
  if (!v || !v->live || v->t.dtype != F32) return 0;
  if (alma__dn_val_plain(p, v, n) != ALMA_OK) return 0;
  *out = v->t.data;
  return alma__numel(v->t.rank, v->t.dims);
}

static int64_t read_zp(dn_plan *p, dn_val *v, const alma_node *n, int32_t *z, int64_t max, alma_dtype *dt) {
  if (!v || !v->live || (v->t.dtype != U8 && v->t.dtype != S8 && v->t.dtype != S32)) return 0;
  if (alma__dn_val_plain(p, v, n) != ALMA_OK) return 0;
  int64_t cnt = alma__numel(v->t.rank, v->t.dims);
  if (cnt > max) return 0;
  for (int64_t k = 0; k < cnt; k++) z[k] = (int32_t)alma__get_i64(v->t.data, v->t.dtype, k);
  *dt = v->t.dtype;
  return cnt;
}

/* QuantizeLinear / DynamicQuantizeLinear passes over a float32 tensor, in chunks on oneDNN's
 * threads (alma__dn_parallel). Each element's byte does not depend on the split, and the range's
 * min and max are exact whatever the order (NaN and -0 never enter them, quant_kernels.h), so any
 * thread count gives the single-threaded result. */
enum { QP_MAX_THREADS = 256, QP_MIN_CHUNK = 1 << 15 }; /* smaller chunks: a team's start costs more than it saves */
typedef struct q_par {
  const float *x;
  int64_t n;
  float scale;
  int32_t zp;
  int is_u8;
  void *y;
  float mn[QP_MAX_THREADS], mx[QP_MAX_THREADS]; /* per thread; 0 (neutral) where a thread did not run */
} q_par;

static int q_par_threads(const dn_plan *p, int64_t n) {
  int64_t t = n / QP_MIN_CHUNK;
  if (t > p->threads) t = p->threads;
  if (t > QP_MAX_THREADS) t = QP_MAX_THREADS;
  return t < 1 ? 1 : (int)t;
}

/* Thread tid's elements [*b, *e): equal chunks, multiples of 64 (whole vector steps). */
static void q_par_chunk(int64_t n, int tid, int nt, int64_t *b, int64_t *e) {
  int64_t per = ((n + nt - 1) / nt + 63) & ~(int64_t)63;
  *b = per * tid < n ? per * tid : n;
  *e = *b + per < n ? *b + per : n;
}

static void q_par_range(void *arg, int tid, int nt) {
  q_par *j = arg;
  int64_t b, e;
  q_par_chunk(j->n, tid, nt, &b, &e);
  if (tid < QP_MAX_THREADS) alma__dynq_range(j->x + b, e - b, &j->mn[tid], &j->mx[tid]);
}

static void q_par_apply(void *arg, int tid, int nt) {
  q_par *j = arg;
  int64_t b, e;
  q_par_chunk(j->n, tid, nt, &b, &e);
  alma__quantize_f32(j->x + b, e - b, j->scale, j->zp, j->is_u8, (char *)j->y + b); /* ONNX's arithmetic, EAGER's code */
}

static void q_par_quantize(const dn_plan *p, const float *x, int64_t n, float scale, int32_t zp, int is_u8, void *y) {
  q_par j = {.x = x, .n = n, .scale = scale, .zp = zp, .is_u8 = is_u8, .y = y};
  alma__dn_parallel(q_par_threads(p, n), q_par_apply, &j);
}

static alma_status q_plain(dn_plan *p, dn_val *x, float s, int32_t zp, const alma_tensor *os, dn_val *out, int *done) {
  int64_t cnt = alma__numel(x->t.rank, x->t.dims);
  dnnl_memory_desc_t md;
  alma__dn_plain_md_dt(&md, os->rank, os->dims, alma__dn_dtype(os->dtype));
  dn_buf *db = alma__dn_alloc(p, (size_t)cnt);
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  q_par_quantize(p, x->t.data, cnt, s, zp, os->dtype == U8, db->ptr);
  alma__dn_val_set(out, os, &md, db);
  p->n_int8_reorder++;
  *done = 1;
  return ALMA_OK;
}

static alma_status run_qdq(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_qstate *S = qstate(p);
  qprim *q = node_prim(p, idx);
  if (!S || !q) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  new_run(p, S);
  int quant = is_op(n, "QuantizeLinear");
  dn_val *x = in[0];
  if (!x || !x->live || nin < 2 || !in[1]) return ALMA_OK;
  alma_dtype idt = x->t.dtype, odt = os[0].dtype;
  if (quant ? (idt != F32 || !is_q8(odt)) : ((!is_q8(idt) && idt != S32) || odt != F32)) return ALMA_OK;
  if (x->t.rank != os[0].rank || memcmp(x->t.dims, os[0].dims, sizeof(int64_t) * (size_t)x->t.rank)) return ALMA_OK;
  if (alma__numel(x->t.rank, x->t.dims) == 0) return ALMA_OK;
  const float *sc = NULL;
  int64_t ns = read_f32(p, in[1], n, &sc);
  int r = x->t.rank, axis = 0;
  if (ns < 1) return ALMA_OK;
  if (ns > 1) { /* per axis */
    int64_t a = alma__attr_i(n, "axis", 1);
    if (a < 0) a += r;
    if (a < 0 || a >= r || x->t.dims[a] != ns || in[1]->t.rank != 1) return ALMA_OK;
    axis = (int)a;
  }
  int32_t zp = 0;
  if (nin > 2 && in[2]) {
    int32_t zbuf[1];
    alma_dtype zdt;
    int64_t nz = in[2]->t.rank <= 1 && alma__numel(in[2]->t.rank, in[2]->t.dims) == 1 ? read_zp(p, in[2], n, zbuf, 1, &zdt) : 0;
    if (nz == 1) {
      zp = zbuf[0];
    } else { /* per-axis zero points: oneDNN takes one; all zero is one */
      const void *zd;
      int64_t cnt = alma__numel(in[2]->t.rank, in[2]->t.dims);
      if (!in[2]->live || !alma__dtype_is_int(in[2]->t.dtype) || alma__dn_val_plain(p, in[2], n) != ALMA_OK) return ALMA_OK;
      zd = in[2]->t.data;
      for (int64_t k = 0; k < cnt; k++)
        if (alma__get_i64(zd, in[2]->t.dtype, k)) return ALMA_OK;
    }
  }
  for (int64_t k = 0; k < ns; k++)
    if (!(sc[k] > 0) || !isfinite(sc[k])) return ALMA_OK; /* EAGER says what a zero or NaN scale gives */
  /* oneDNN multiplies by 1/scale where ONNX divides: the two round apart only when x / scale lies
   * within a float's precision of a half-integer, but they can. A plain input (graph input, EAGER
   * output: no layout to keep) is quantized here with ONNX's division; per axis, it stays on EAGER
   * unless 1/scale is exact. */
  if (quant && !x->has_blk) {
    if (ns == 1) return q_plain(p, x, sc[0], zp, &os[0], out[0], done);
    for (int64_t k = 0; k < ns; k++) {
      int e;
      if (frexpf(sc[k], &e) != 0.5f) return ALMA_OK;
    }
  }
  /* a constant dequantized (weights the int8 path did not take): once, then shared */
  int cst = !quant && alma__dn_const(p->g, n->inputs[0]) && alma__dn_const(p->g, n->inputs[1]) &&
            (n->n_inputs < 3 || n->inputs[2] < 0 || alma__dn_const(p->g, n->inputs[2]));
  if (cst && q->valid && q->cache) {
    q->cache->refs++;
    alma__dn_val_set(out[0], &os[0], &q->dst_md, q->cache);
    *done = 1;
    return ALMA_OK;
  }
  /* the output's layout: the cluster reading it when there is one, else the input's */
  dnnl_memory_desc_t xmd, ymd;
  alma__dn_val_md(x, &xmd);
  ymd = xmd;
  ymd.data_type = alma__dn_dtype(odt);
  if (quant && S->hint[idx] >= 0) { /* (a shifting cluster then shifts within that layout) */
    qprim *cp = &S->clu[S->hint[idx]].pr;
    if (cp->valid && !cp->declined && cp->src_md.ndims == r &&
        !memcmp(cp->src_md.dims, xmd.dims, sizeof(dnnl_dim_t) * (size_t)r)) {
      ymd = cp->src_md;
      ymd.data_type = alma__dn_dtype(odt);
    }
  }
  if (ymd.format_kind != dnnl_blocked) alma__dn_plain_md_dt(&ymd, r, os[0].dims, alma__dn_dtype(odt));
  uint64_t key = 1469598103934665603ull;
  key = fnv(key, sc, sizeof(float) * (size_t)ns);
  key = fnv(key, &zp, sizeof zp);
  key = fnv(key, &axis, sizeof axis);
  key = fnv(key, &ymd, sizeof ymd);
  if (!q->valid || q->pkey != key || !dnnl_memory_desc_equal(&q->xmd, &xmd)) {
    qprim_free(q);
    q->valid = 1;
    q->xmd = xmd;
    q->pkey = key;
    float *s2 = malloc(sizeof(float) * (size_t)ns);
    dnnl_primitive_attr_t attr = new_attr();
    if (!s2 || !attr) {
      free(s2);
      if (attr) dnnl_primitive_attr_destroy(attr);
      return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    }
    for (int64_t k = 0; k < ns; k++) s2[k] = quant ? 1.0f / sc[k] : sc[k];
    dnnl_status_t s = dnnl_primitive_attr_set_output_scales(attr, ns, ns > 1 ? 1 << axis : 0, s2);
    if (s == dnnl_success && zp) s = dnnl_primitive_attr_set_zero_points(attr, quant ? DNNL_ARG_DST : DNNL_ARG_SRC, 1, 0, &zp);
    if (s == dnnl_success) s = dnnl_reorder_primitive_desc_create(&q->pd, &xmd, p->eng, &ymd, p->eng, attr);
    dnnl_primitive_attr_destroy(attr);
    free(s2);
    if (s != dnnl_success) return qdecline(q, n, "no reorder for these types (status %d)", (int)s);
    const char *impl = NULL;
    dnnl_primitive_desc_query(q->pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(q->impl, sizeof q->impl, "%s", impl ? impl : "?");
    q->src_md = xmd;
    q->dst_md = ymd;
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(q->pd, dnnl_query_scratchpad_md, 0);
    if (dnnl_primitive_create(&q->p, q->pd) != dnnl_success || !add_memory(p, &q->m_src, &xmd) ||
        !add_memory(p, &q->m_dst, &ymd) ||
        (smd && smd->ndims > 0 && (q->scr_size = dnnl_memory_desc_get_size(smd)) > 0 && !add_memory(p, &q->m_scr, smd)))
      return qdecline(q, n, "reorder creation failed");
  }
  if (q->declined) return ALMA_OK;
  dn_buf *db = NULL;
  if (cst) { /* kept by the primitive (one reference) across runs, never pooled */
    size_t sz = dnnl_memory_desc_get_size(&q->dst_md);
    if ((db = malloc(sizeof *db)) && !(db->ptr = aligned_alloc(64, (sz + 63) & ~(size_t)63))) {
      free(db);
      db = NULL;
    }
    if (db) {
      db->size = sz;
      db->refs = 1;
      db->pooled = 0;
    }
  } else {
    db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&q->dst_md));
  }
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dnnl_memory_set_data_handle(q->m_src, x->has_blk ? x->bbuf->ptr : x->t.data);
  dnnl_memory_set_data_handle(q->m_dst, db->ptr);
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, q->m_src}, {DNNL_ARG_TO, q->m_dst}};
  dnnl_status_t s = dnnl_primitive_execute(q->p, p->strm, 2, args);
  if (s != dnnl_success) {
    alma__dn_unref(p, db);
    return alma__op_error(n, ALMA_ERR_INTERNAL, "oneDNN %s reorder failed (status %d)", q->impl, (int)s);
  }
  if (cst) {
    q->cache = db;
    db->refs++;
  }
  alma__dn_val_set(out[0], &os[0], &q->dst_md, db);
  p->n_int8_reorder++;
  *done = 1;
  return ALMA_OK;
}

/* ---- run: QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger --------------------------------------- */
/* A scalar parameter input (scale or zero point). */
static int scalar_f32(dn_plan *p, dn_val *v, const alma_node *n, float *out) {
  const float *f;
  if (read_f32(p, v, n, &f) != 1) return 0;
  *out = f[0];
  return *out > 0 && isfinite(*out);
}

static int scalar_zp(dn_plan *p, dn_val *v, const alma_node *n, int32_t *z, alma_dtype want) {
  alma_dtype dt;
  if (!v) {
    *z = 0;
    return 1;
  }
  return read_zp(p, v, n, z, 1, &dt) == 1 && dt == want;
}

static alma_status run_qlinear(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_qstate *S = qstate(p);
  qprim *q = node_prim(p, idx);
  if (!S || !q) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  new_run(p, S);
  if (S->fallback || S->off) return ALMA_OK; /* no int8 primitives: EAGER's integer kernels */
  int integer = is_op(n, "ConvInteger") || is_op(n, "MatMulInteger");
  int conv = is_op(n, "QLinearConv") || is_op(n, "ConvInteger");
  qargs a;
  memset(&a, 0, sizeof a);
  a.kind = conv ? QK_CONV : QK_MATMUL;
  a.n = n;
  /* inputs: QLinear: x, xs, xzp, w, ws, wzp, ys, yzp [, B]; Integer: x, w [, xzp, wzp] */
  int iw = integer ? 1 : 3;
  dn_val *x = in[0], *w = nin > iw ? in[iw] : NULL;
  if (!x || !x->live || !is_q8(x->t.dtype) || !w || !w->live || w->t.dtype != S8 || w->t.rank > ALMA_MAX_RANK) return ALMA_OK;
  a.x = x;
  float one = 1.0f;
  if (integer) {
    if (!scalar_zp(p, nin > 2 ? in[2] : NULL, n, &a.xzp, x->t.dtype)) return ALMA_OK;
    int32_t wzp = 0;
    if (!scalar_zp(p, nin > 3 ? in[3] : NULL, n, &wzp, S8) || wzp) return ALMA_OK;
    a.xs = 1.0f;
    a.ws = &one;
    a.nws = 1;
    a.s32 = 1;
  } else {
    if (nin < 8 || !scalar_f32(p, in[1], n, &a.xs) || !scalar_zp(p, in[2], n, &a.xzp, x->t.dtype)) return ALMA_OK;
    a.nws = read_f32(p, in[4], n, &a.ws);
    if (a.nws < 1) return ALMA_OK;
    for (int64_t k = 0; k < a.nws; k++)
      if (!(a.ws[k] > 0) || !isfinite(a.ws[k])) return ALMA_OK;
    dn_val *wz = in[5];
    if (wz) { /* all zero */
      if (!wz->live || wz->t.dtype != S8 || alma__dn_val_plain(p, wz, n) != ALMA_OK) return ALMA_OK;
      for (int64_t k = 0; k < alma__numel(wz->t.rank, wz->t.dims); k++)
        if (((const int8_t *)wz->t.data)[k]) return ALMA_OK;
    }
    if (!scalar_f32(p, in[6], n, &a.ys) || !in[7] || !is_q8(in[7]->t.dtype) ||
        !scalar_zp(p, in[7], n, &a.yzp, in[7]->t.dtype))
      return ALMA_OK;
    a.yq = 1;
    a.ydt = in[7]->t.dtype;
    if (conv && nin > 8 && in[8]) {
      dn_val *b = in[8];
      if (!b->live || b->t.dtype != S32 || alma__dn_val_plain(p, b, n) != ALMA_OK) return ALMA_OK;
      if (alma__numel(b->t.rank, b->t.dims) != w->t.dims[0]) return ALMA_OK;
      a.bq = b->t.data;
    }
  }
  if (alma__dn_val_plain(p, w, n) != ALMA_OK) return ALMA_OK;
  a.w = w->t.data;
  a.wrank = w->t.rank;
  memcpy(a.wdims, w->t.dims, sizeof(int64_t) * (size_t)w->t.rank);
  a.wconst = alma__dn_const(p->g, n->inputs[iw]) != NULL;
  int64_t OC = conv ? a.wdims[0] : a.wdims[a.wrank - 1];
  if (a.nws != 1 && a.nws != OC) return ALMA_OK;
  if (!conv && a.wrank == 1) return ALMA_OK;
  alma_status st = q_exec(p, q, &a, out[0], done);
  if (st == ALMA_OK && *done && (out[0]->t.dtype != os[0].dtype || out[0]->t.rank != os[0].rank ||
                                  memcmp(out[0]->t.dims, os[0].dims, sizeof(int64_t) * (size_t)os[0].rank)))
    return alma__op_error(n, ALMA_ERR_INTERNAL, "int8 primitive's output shape differs from the inferred one");
  return st;
}

/* DynamicQuantizeLinear: one pass for the range, one to quantize (quant_kernels.h, EAGER's
 * arithmetic), each in chunks on the runtime's threads (q_par), in the layout x comes in: a
 * float32 value blocked by the primitive that wrote it (NHWC after an int8 convolution) gives its
 * uint8 data in that layout, which the next int8 convolution reads as it is. Padded or strided
 * layouts are read plain. */
static alma_status run_dynq(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int nout,
                            int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_qstate *S = qstate(p);
  if (!S) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  new_run(p, S);
  dn_val *x = nin > 0 ? in[0] : NULL;
  if (!x || !x->live || x->t.dtype != F32 || os[0].dtype != U8) return ALMA_OK;
  int64_t cnt = alma__numel(x->t.rank, x->t.dims);
  if (cnt == 0) return ALMA_OK;
  dnnl_memory_desc_t md;
  const float *xd;
  int dense = 0;
  if (x->has_blk && x->bmd.format_kind == dnnl_blocked && x->bmd.offset0 == 0 &&
      dnnl_memory_desc_get_size(&x->bmd) == (size_t)cnt * sizeof(float)) {
    dense = 1;
    for (int i = 0; i < x->bmd.ndims; i++) dense &= x->bmd.padded_dims[i] == x->bmd.dims[i];
  }
  if (dense) {
    md = x->bmd;
    xd = x->bbuf->ptr;
  } else {
    ALMA_TRY(alma__dn_val_plain(p, x, n));
    alma__dn_plain_md_dt(&md, x->t.rank, x->t.dims, dnnl_f32);
    xd = x->t.data;
  }
  md.data_type = dnnl_u8;
  float mn = 0.0f, mx = 0.0f, scale;
  uint8_t zp;
  q_par rj = {.x = xd, .n = cnt};
  alma__dn_parallel(q_par_threads(p, cnt), q_par_range, &rj);
  for (int t = 0; t < QP_MAX_THREADS; t++) {
    if (rj.mn[t] < mn) mn = rj.mn[t];
    if (rj.mx[t] > mx) mx = rj.mx[t];
  }
  alma__dynq_params(mn, mx, &scale, &zp);
  dn_buf *b[3] = {NULL, NULL, NULL};
  size_t sz[3] = {(size_t)cnt, sizeof(float), 1};
  for (int k = 0; k < 3 && k < nout; k++)
    if (out[k] && !(b[k] = alma__dn_alloc(p, sz[k]))) {
      for (int j = 0; j < k; j++) alma__dn_unref(p, b[j]);
      return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    }
  if (b[0]) q_par_quantize(p, xd, cnt, scale, zp, 1, b[0]->ptr); /* alma__dynq_apply, in chunks */
  if (b[1]) *(float *)b[1]->ptr = scale;
  if (b[2]) *(uint8_t *)b[2]->ptr = zp;
  for (int k = 0; k < 3 && k < nout; k++) {
    if (!b[k]) continue;
    dnnl_memory_desc_t smd;
    if (k) alma__dn_plain_md_dt(&smd, os[k].rank, os[k].dims, alma__dn_dtype(os[k].dtype));
    alma__dn_val_set(out[k], &os[k], k ? &smd : &md, b[k]);
  }
  p->n_int8_reorder++;
  *done = 1;
  return ALMA_OK;
}

alma_status alma__dn_q_run(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int nout,
                           int *done) {
  *done = 0;
  if (nout < 1 || !out[0]) return ALMA_OK;
  if (is_op(&p->g->nodes[idx], "DynamicQuantizeLinear")) return run_dynq(p, idx, in, nin, os, out, nout, done);
  if (p->nodes[idx].kind == DK_QDQ) return run_qdq(p, idx, in, nin, os, out, done);
  return run_qlinear(p, idx, in, nin, os, out, done);
}

/* ---- describe and free --------------------------------------------------------------------------------- */
static const char *dt_name(alma_dtype t) { return t == U8 ? "u8" : t == S8 ? "s8" : t == S32 ? "s32" : "f32"; }

int alma__dn_q_describe(dn_plan *p, int idx, FILE *f) {
  dn_qstate *S = p->q;
  const alma_graph *g = p->g;
  const alma_node *n = &g->nodes[idx];
  const dn_node *d = &p->nodes[idx];
  if (!S || !d->q_role) return 0;
  if (d->q_role == DN_Q_LAZY) {
    fprintf(f, "  %-40s %-20s DNNL  absorbed: int8 primitives read its input directly\n", n->name, n->op_type);
    return 1;
  }
  const qclu *c = &S->clu[d->q_idx];
  if (idx != c->anchor) {
    const char *as = c->kind == QK_MOVE                ? "its int8 output (the same scale and zero point)"
                     : is_op(n, "QuantizeLinear") ? "its int8 destination (requantization)"
                     : is_op(n, "Cast")         ? "its float32 destination"
                     : is_op(n, "Mul")          ? "output scales (x_scale * w_scale)"
                     : !is_op(n, "Add")         ? "eltwise post-op"
                     : c->sum_other >= 0 && (n->inputs[0] == c->sum_other || n->inputs[1] == c->sum_other) ? "sum post-op"
                                                                                                          : "bias";
    fprintf(f, "  %-40s %-20s DNNL  fused into int8 '%s' as %s\n", n->name, n->op_type, g->nodes[c->anchor].name, as);
    return 1;
  }
  if (c->kind == QK_ADD) {
    fprintf(f, "  %-40s %-20s DNNL  int8 add (src %s + %s, %s dst)", n->name, n->op_type, c->xdt ? dt_name(c->xdt) : "u8/s8",
            c->x2dt ? dt_name(c->x2dt) : "u8/s8", c->yq ? dt_name(c->ydt) : "f32");
    goto tail;
  }
  if (c->kind == QK_MOVE) {
    fprintf(f, "  %-40s %-20s DNNL  %s on the %s values (one scale and zero point on both sides)", n->name, n->op_type,
            is_op(n, "MaxPool") ? "int8 max pooling" : "int8 view (plain layout)", dt_name(c->ydt));
    const dn_prim *np = p->nodes[idx].prim[DN_PRIM_SINGLE];
    if (np && np->valid && !np->declined && np->impl[0]) fprintf(f, " [%s]", np->impl);
    goto tail;
  }
  if (c->dyn && c->emu) {
    fprintf(f, "  %-40s %-20s DNNL  float32 %s on the dequantized u8 source (%s)", n->name, n->op_type,
            c->kind == QK_CONV ? "convolution" : "matmul",
            c->kind == QK_CONV ? "oneDNN 2.6's int8 depthwise kernels misapply binary post-ops to a partial channel block"
                               : "no exact int8 matmul for 8-bit weights without VNNI");
    goto tail;
  }
  if (c->dyn) {
    fprintf(f, "  %-40s %-20s DNNL  int8 %s (src u8 with this run's scale and zero point%s, weights s8 per channel%s, f32 dst)",
            n->name, n->op_type, c->kind == QK_CONV ? "convolution" : "matmul",
            c->pr2.valid && c->pr2.shift > 0 ? ", given as s8 when the zero point is not 0" : "",
            c->split ? " in two 7-bit halves along K (no VNNI)" : "");
    goto tail;
  }
  fprintf(f, "  %-40s %-20s DNNL  int8 %s (src %s%s, weights s8 %s, %s dst)", n->name, n->op_type,
          c->kind == QK_CONV ? "convolution" : "matmul", c->xdt ? dt_name(c->xdt) : "u8/s8",
          /* what ran (the fused 1x1 + depthwise primitive when it replaced the cluster's own) */
          c->pr.valid ? (c->pr.shift == 2 ? ", 7-bit weights" : c->pr.shift > 0 ? " given as s8" : c->pr.shift < 0 ? " given as u8" : "")
          : c->prdw.valid && !c->prdw.declined ? (c->prdw.shift == 2 ? ", 7-bit weights" : c->prdw.shift > 0 ? " given as s8" : "")
                                               : "",
          c->nws > 1 ? "per channel" : "per tensor", c->yq ? dt_name(c->ydt) : "f32");
tail:
  if (c->nmem > 1) fprintf(f, " + %d post-op node%s", c->nmem - 1, c->nmem > 2 ? "s" : "");
  if (c->pr.valid && !c->pr.declined) fprintf(f, " [%s]", c->pr.impl);
  if (c->pr2.valid && !c->pr2.declined) fprintf(f, " [%s with a zero point]", c->pr2.impl);
  if (c->pr.declined) fprintf(f, " [declined at run time: %s]", c->pr.why);
  if (c->pr2.declined) fprintf(f, " [declined at run time: %s]", c->pr2.why);
  if (c->n_fallback_runs) fprintf(f, " (%d runs on the float path)", c->n_fallback_runs);
  if (c->dw_next >= 0) {
    const qclu *b = &S->clu[c->dw_next];
    if (c->prdw.valid && !c->prdw.declined)
      fprintf(f, "; with '%s' as depthwise post-op [%s]", g->nodes[b->anchor].name, c->prdw.impl);
    else if (c->prdw.declined)
      fprintf(f, "; not fused with '%s': %s", g->nodes[b->anchor].name, c->prdw.why);
  }
  if (c->dw_prev >= 0 && c->dw_done_run >= 0)
    fprintf(f, " (computed by '%s' as its depthwise post-op)", g->nodes[S->clu[c->dw_prev].anchor].name);
  fputc('\n', f);
  return 1;
}

void alma__dn_q_summary(dn_plan *p, FILE *f) {
  dn_qstate *S = p->q;
  int nq = 0, nql = 0, ndq = 0, ndyn = 0, nemu = 0;
  for (int i = 0; i < p->g->n_nodes; i++) {
    int dq = is_op(&p->g->nodes[i], "DynamicQuantizeLinear");
    nq += p->nodes[i].kind == DK_QDQ && !p->nodes[i].q_role && !dq;
    ndq += p->nodes[i].kind == DK_QDQ && dq;
    nql += p->nodes[i].kind == DK_QLINEAR && !p->nodes[i].q_role;
  }
  int nmove = 0, ndw = 0, ndwr = 0;
  for (int k = 0; S && k < S->nclu; k++) {
    nmove += S->clu[k].kind == QK_MOVE;
    ndw += S->clu[k].dw_next >= 0;
    ndwr += S->clu[k].dw_next >= 0 && S->clu[k].prdw.valid && !S->clu[k].prdw.declined;
    ndyn += S->clu[k].dyn;
    nemu += S->clu[k].emu;
  }
  if (!S && !nq && !nql && !ndq) return;
  int nc = S ? S->nclu - ndyn : 0, nl = S ? S->nlazy : 0;
  if (!nc && !nq && !nql && !ndq && !ndyn) return;
  fprintf(f, "  DNNL int8: %d QDQ clusters as int8 primitives (%d DequantizeLinear absorbed), ", nc, nl);
  if (nmove) fprintf(f, "%d of them MaxPool/Flatten/Reshape on int8 values, ", nmove);
  if (ndw) fprintf(f, "%d 1x1 + depthwise pairs (%d fused in the last run), ", ndw, ndwr);
  if (ndyn || ndq)
    fprintf(f, "%d DynamicQuantizeLinear, %d dynamic clusters (%d as float32 matmuls), ", ndq, ndyn, nemu);
  fprintf(f,
          "%d QLinear/Integer nodes, %d Quantize/DequantizeLinear as reorders; %s%s",
          nql, nq,
          !S || !S->conv_s8     ? "u8/s8 sources as they are"
          : S->conv_s8 == 1 ? "no VNNI: convolution sources given as s8 (oneDNN's 7-bit weights)"
                            : "no VNNI: u8 convolution sources with a zero point given as s8 (oneDNN's 7-bit weights)",
          S && S->mm_off ? ", matmuls on the float path (oneDNN's int8 gemm saturates without VNNI)" : "");
  if (p->runs) fprintf(f, "; last run: %lld int8 primitives, %lld int8 reorders", (long long)p->n_int8, (long long)p->n_int8_reorder);
  fputc('\n', f);
}

void alma__dn_q_free(dn_plan *p) {
  dn_qstate *S = p->q;
  if (!S) return;
  for (int k = 0; k < S->nclu; k++) clu_free(&S->clu[k]);
  for (int i = 0; i < p->g->n_nodes; i++)
    if (S->nprim[i]) {
      qprim_free(S->nprim[i]);
      free(S->nprim[i]);
    }
  free(S->clu);
  free(S->lazy);
  free(S->hint);
  free(S->nprim);
  free(S);
  p->q = NULL;
}

#endif
