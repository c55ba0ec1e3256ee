/* DNNL runtime internals shared by dnnl_runtime.c (plan, executor, values, memory), the kernel files
 * (dnnl_classify.c, dnnl_prim.c, then one builder/executor per family of nodes: dnnl_conv.c,
 * dnnl_pool.c, dnnl_eltwise.c, dnnl_norm.c, dnnl_matmul.c, dnnl_layout.c, dnnl_resample.c;
 * dnnl_dispatch.c runs a node through its kind's) and the int8 ones (dnnl_int8_plan.c,
 * dnnl_int8_prim.c, dnnl_int8_exec.c, with their header dnnl_int8.h).
 *
 * Every kernel first checks what it needs (float32, ranks, attribute values oneDNN can express);
 * anything else declines (*done = 0) and the node runs on its EAGER kernel, so a declined case is
 * never wrong, only slower. Primitives are built for the input layouts/shapes they see (the key)
 * and rebuilt when those change.
 *
 * Values live in one of two forms, or both: plain (the alma_tensor row-major data EAGER kernels
 * and callers see) and blocked (a oneDNN memory descriptor chosen by a primitive, e.g. nChw8c).
 * A value produced by a oneDNN primitive stays in the primitive's layout; it is reordered to plain
 * only when an EAGER node or the caller needs it, and plain inputs are reordered to the layout a
 * primitive asks for. Reorders are counted. */
#ifndef ALMA_DNNL_RT_H
#define ALMA_DNNL_RT_H

#ifdef ALMA_HAVE_DNNL

#include <oneapi/dnnl/dnnl.h>

#include "ops/op.h"
#include "runtimes/runtime.h"

/* A reference-counted buffer. pooled: returned to the plan's pool when the last reference goes,
 * otherwise free()d (EAGER kernels' outputs). Data of caller inputs and initializers has none. */
typedef struct dn_buf {
  void *ptr;
  size_t size;
  int refs;
  int pooled;
} dn_buf;

typedef struct dn_val {
  int live;
  alma_tensor t;            /* dtype, rank, dims always; t.data = plain data when has_plain */
  int has_plain;
  dn_buf *pbuf;             /* NULL with has_plain: external data (input, initializer) */
  int has_blk;
  dnnl_memory_desc_t bmd;   /* layout of bbuf (never plain) */
  dn_buf *bbuf;
  int uses;                 /* consumers left in this run; graph outputs are pinned */
} dn_val;

/* One elementwise step: oneDNN eltwise algorithm and its parameters. */
typedef struct dn_elt {
  dnnl_alg_kind_t alg;
  float alpha, beta;
} dn_elt;

enum { DN_MAX_ELT = 2, DN_MAX_POST = 6, DN_MAX_MEMBERS = 8, DN_MAX_KEY = 8, DN_MAX_MEM = 10 };
/* A node's primitive slots: alone, as the head of a fused group, and DK_ATTN's softmax, second
 * matmul and mask add. */
enum { DN_PRIM_SINGLE, DN_PRIM_FUSED, DN_PRIM_AUX0, DN_PRIM_AUX1, DN_PRIM_AUX2, DN_NPRIM };
/* A convolution group with a depthwise post-op (DP_DW) keeps that primitive apart from the one of
 * the part before it (DN_PRIM_FUSED), which runs when the depthwise fusion is declined. */
enum { DN_PRIM_DW = DN_PRIM_AUX0 };

enum dn_kind {
  DK_NONE = 0,
  DK_CONV,
  DK_POOL,
  DK_ELTWISE,
  DK_BINARY,
  DK_BNORM,
  DK_LNORM,
  DK_SOFTMAX,
  DK_MATMUL,
  DK_GEMM,
  DK_VIEW,      /* Reshape/Flatten/Squeeze/Unsqueeze/Identity/Dropout: aliases plain data */
  DK_DECONV,    /* ConvTranspose */
  DK_ATTN,      /* alma.Attention: matmul (+mask) -> softmax -> matmul */
  DK_TRANSPOSE, /* a reorder from the input's layout, axes permuted, to plain */
  DK_REDUCE,    /* Reduce* through the reduction primitive */
  DK_CONCAT,    /* concat primitive (blocked inputs stay blocked) */
  DK_SLICE,     /* Slice (unit steps) and Split: reorders from sub-memory views */
  DK_PRELU,     /* prelu primitive */
  DK_CAST,      /* Cast between float32 and bfloat16: an elementwise conversion keeping the layout */
  DK_QDQ,       /* QuantizeLinear / DequantizeLinear on its own: a reorder with scale and zero point (dnnl_int8_exec.c) */
  DK_QLINEAR,   /* QLinearConv / QLinearMatMul / ConvInteger / MatMulInteger: one int8 primitive (dnnl_int8_exec.c) */
  DK_PAD,       /* Pad, constant mode: the output filled, the input reordered into a sub-memory view of it */
  DK_LRN,       /* LRN (odd size) through the lrn primitive, across channels */
  DK_INORM,     /* InstanceNormalization as batch normalization over an [1, N*C, spatial] view */
  DK_RESAMPLE,  /* Resize / Upsample (nearest, linear) where ONNX's coordinates are oneDNN's */
  DK_NBITS,     /* com.microsoft MatMulNBits: alma's kernel (contrib_nbits.c) on oneDNN's OpenMP threads */
  DK_COUNT
};

/* Post-ops of a fused group, applied by the head primitive in order. DP_DW: a depthwise 3x3
 * convolution after a 1x1 one (oneDNN's dw post-op; its eltwise steps follow it in post[]).
 * DP_PERM: a Transpose after an Attention, applied through the strides of its output. */
enum { DP_ELT = 1, DP_SUM, DP_BIAS, DP_NORM_RELU, DP_DW, DP_PERM };
typedef struct dn_post {
  int type;
  int node;           /* the absorbed node */
  int n_elt;
  dn_elt elt[DN_MAX_ELT];
  int other;          /* DP_SUM / DP_BIAS: the Add's other operand (value index) */
  int stride;         /* DP_DW: 1 or 2 */
  int dw_bias;        /* DP_DW: the depthwise Conv has a bias input */
} dn_post;

/* A created primitive for one set of input layouts/shapes (the key). */
typedef struct dn_prim {
  int valid, declined;
  int nkey;
  dnnl_memory_desc_t key[DN_MAX_KEY];
  int64_t ikey[8];                 /* extra integer key (e.g. Gemm C shape) */
  dnnl_primitive_desc_t pd;
  dnnl_primitive_t p, p2;          /* p2: second eltwise step (HardSigmoid) */
  dnnl_memory_desc_t src_md, wei_md, dst_md, aux_md;
  int nmem;
  int arg[DN_MAX_MEM];
  dnnl_memory_t mem[DN_MAX_MEM];
  void *wei;                       /* reordered constant weights (owned) */
  void *wei2;                      /* DP_DW groups: the depthwise weights, reordered (owned) */
  int wei_const;
  int swap;                        /* binary: operands swapped */
  int flags;                       /* kernel-specific */
  int64_t m, n, k;                 /* matmul/gemm collapsed sizes */
  char impl[48];
  char why[160];                   /* why declined */
} dn_prim;

typedef struct dn_node {
  int kind;
  int head;                        /* -1; group members: index of the head (the head itself too) */
  int last;                        /* heads: node index the group executes at */
  int nmem;
  int mem[DN_MAX_MEMBERS];         /* heads: members in order, head first */
  int npost;
  dn_post post[DN_MAX_POST];
  int dw_at;                       /* heads: 1 + index in post[] of a DP_DW post, 0 if none */
  int n_elt;                       /* DK_ELTWISE */
  dn_elt elt[DN_MAX_ELT];
  dnnl_alg_kind_t alg;             /* DK_BINARY / DK_POOL */
  int self_fused;                  /* alma.Fused* node: post[0..nself) come from its own attributes */
  int nself;                       /* self_fused: its own post-ops; a group it heads appends after them */
  int attn_plain;                  /* DK_ATTN: oneDNN declined strided layouts once: plain only */
  int lazy_view;                   /* DK_TRANSPOSE / DK_SLICE / DK_VIEW whose readers all take strided
                                    * inputs: may leave its output as a strided view of its input */
  int rt_clip;                     /* Clip whose bounds are only known at run time */
  dn_prim *prim[DN_NPRIM];         /* allocated on first use: single, fused, DK_ATTN's extra three */
  const char *why;                 /* compile-time reason for EAGER */
  alma__decline why_reason;        /* the same as data (alma_runtime.placement) */
  int n_native, n_eager;           /* runs through each path (stats) */
  int n_choice;                    /* of the n_eager: sent there by the plan's choice (few rows, tiny tensors) */
  int n_group;                     /* heads: runs of the whole group as one primitive (stats) */
  int n_view;                      /* runs whose output was a view of the input made here (lazy views,
                                    * unit-axis Transposes; a plain Reshape's alias does not count) */
  double prof_s;                   /* dnnl.print_profile: seconds spent in this node (group) */
  int q_role, q_idx;               /* int8 clusters (dnnl_int8_plan.c): DN_Q_MEMBER of cluster q_idx, or DN_Q_LAZY */
} dn_node;

/* How many of d's post-ops a primitive applies: alma__dn_run's fused is 0 (none), 1 (the node's
 * own or its group's, up to a depthwise post-op), 2 (all: the group with its depthwise conv) or
 * DN_FUSED_OWN (an alma.Fused* node alone: its own attributes' post-ops, not its group's). */
enum { DN_FUSED_OWN = 3 };
static inline int alma__dn_npost(const dn_node *d, int fused) {
  return !fused ? 0 : fused == DN_FUSED_OWN ? d->nself : fused == 1 && d->dw_at ? d->dw_at - 1 : d->npost;
}
/* The primitive slot for fused: a group's own (DN_PRIM_FUSED), apart from the node alone
 * (DN_PRIM_SINGLE; an alma.Fused* node alone, with only its own post-ops, too). */
static inline int alma__dn_slot(int fused) { return fused && fused != DN_FUSED_OWN ? DN_PRIM_FUSED : DN_PRIM_SINGLE; }

typedef struct dn_pool_ent {
  void *ptr;
  size_t size;
} dn_pool_ent;

typedef struct dn_reorder {
  dnnl_memory_desc_t src, dst;
  dnnl_primitive_t p;
  dnnl_memory_t ms, md;
} dn_reorder;

/* The runtime's settings (--runtime-option dnnl.NAME=VALUE; the table in dnnl_runtime.c), read at
 * compile. */
typedef struct dn_opts {
  int winograd;        /* DN_WINO_AUTO, DN_WINO_ON, DN_WINO_OFF */
  int native_pool;     /* alma's pooling kernel on blocked layouts (else oneDNN's) */
  int tiny_eager;      /* small elementwise-like nodes on EAGER */
  int dw_fuse;         /* 1x1 convolution + depthwise convolution as oneDNN's fused primitive */
  int strided;         /* transposes, slices and reshapes as strided views */
  int int8;            /* DN_INT8_ON, DN_INT8_OFF, DN_INT8_FALLBACK */
  int int8_conv_src;   /* DN_SRC_AUTO, DN_SRC_U8, DN_SRC_S8 */
  int int8_matmul;     /* int8 matmuls also without VNNI */
  int int8_move;       /* Transpose, Reshape, pools inside int8 clusters as int8 steps */
  int int8_halve;      /* without VNNI: u8 sources with halved weights (else shifted to s8) */
  int int8_zp_bias;    /* source zero points of unpadded convolutions folded into the bias */
  int int8_dyn_split;  /* INT8_DYNAMIC 8-bit-weight matmuls without VNNI as two 7-bit halves */
  int print_profile;   /* time every node, print the table on stderr when the plan is freed */
} dn_opts;
/* in the order of the options' choices (dnnl_runtime.c's table): read with alma__rt_opt_index */
enum { DN_WINO_AUTO, DN_WINO_ON, DN_WINO_OFF };
enum { DN_INT8_ON, DN_INT8_OFF, DN_INT8_FALLBACK };
enum { DN_SRC_AUTO, DN_SRC_U8, DN_SRC_S8 };

typedef struct dn_plan {
  const alma_graph *g;
  int threads;
  dn_opts opt;
  int hook_mode;                   /* graph has subgraph ops: shared executor with per-node hook */
  dnnl_engine_t eng;
  dnnl_stream_t strm;
  dn_node *nodes;
  int *static_uses;                /* consumers of each value (graph outputs pinned) */
  dn_val *vals;                    /* per run */
  dn_pool_ent *pool;
  int npool, cappool;
  size_t pool_bytes;
  void *scratch;
  size_t scratch_size;
  dn_reorder *reorders;
  int nreorders, capreorders;
  int profile;                     /* dnnl.print_profile: time every node, print at free */
  int prof_runs;
  /* stats of the last run */
  int runs;
  int64_t n_reorder_in, n_reorder_out, n_reorder_wei, n_native, n_eager, n_fused;
  int64_t n_native_bf16;           /* nodes of n_native that computed on bfloat16 data (Cast, views aside) */
  struct dn_qstate *q;             /* int8 clusters and primitives (dnnl_int8.h), NULL until needed */
  int64_t n_int8, n_int8_reorder;  /* last run: int8 convolutions/matmuls, Quantize/Dequantize reorders */
} dn_plan;

/* ---- dnnl_layout.c: strided views ------------------------------------------------------------- */
/* Strides nst of the dims nd (rank nr) viewing, without a copy, data laid out as dims od with
 * strides ost (rank r, every dim > 0) in the same row-major element order: the new dims must split
 * or merge runs of old dims that are contiguous with each other. 0 when they do not (copy). */
int alma__dn_reshape_strides(int r, const int64_t *od, const int64_t *ost, int nr, const int64_t *nd, int64_t *nst);

/* ---- dnnl_runtime.c: memory and values ---------------------------------------------------- */
dn_buf *alma__dn_alloc(dn_plan *p, size_t size);
void alma__dn_unref(dn_plan *p, dn_buf *b);
/* oneDNN's data type for an alma dtype (f32, bf16, f16, s8, u8, s32), dnnl_data_type_undef for others. */
dnnl_data_type_t alma__dn_dtype(alma_dtype t);
/* Plain row-major md for (rank, dims); rank 0 becomes [1]. float32; _dt: of data type dt. */
void alma__dn_plain_md(dnnl_memory_desc_t *md, int rank, const int64_t *dims);
void alma__dn_plain_md_dt(dnnl_memory_desc_t *md, int rank, const int64_t *dims, dnnl_data_type_t dt);
int alma__dn_is_plain(const dnnl_memory_desc_t *md);
/* The layout a value currently has (blocked if it has one, else plain), in the value's dtype. */
void alma__dn_val_md(const dn_val *v, dnnl_memory_desc_t *md);
/* Makes the value available plain (reorder from blocked). */
alma_status alma__dn_val_plain(dn_plan *p, dn_val *v, const alma_node *n);
/* Data of v in layout want (same dims): v's own buffer when it has that layout, else a reorder
 * into a new buffer that is kept on v (cache) when keep, else returned in *tmp (caller unrefs). */
alma_status alma__dn_val_get(dn_plan *p, dn_val *v, const dnnl_memory_desc_t *want, int keep, void **ptr,
                             dn_buf **tmp, const alma_node *n);
/* v's buffer in layout md if v is its only holder and this is v's last use: taken over. */
dn_buf *alma__dn_val_steal(dn_val *v, const dnnl_memory_desc_t *md);
/* A buffer in layout md holding r's data (a sum post-op's destination): r's own when it can be
 * taken over, else a copy or reorder of it (counted as an input reorder). */
alma_status alma__dn_sum_dst(dn_plan *p, dn_val *r, const dnnl_memory_desc_t *md, dn_buf **out, const alma_node *n);
/* Sets an output value's data: plain when md is plain, else blocked. Takes the reference. */
void alma__dn_val_set(dn_val *v, const alma_tensor *shape, const dnnl_memory_desc_t *md, dn_buf *b);
/* A kernel's last step: on success b (layout md) becomes v's data and *done = 1; on failure b is
 * dropped. Returns st. */
static inline alma_status alma__dn_finish(dn_plan *p, alma_status st, dn_buf *b, dn_val *v, const alma_tensor *shape,
                                          const dnnl_memory_desc_t *md, int *done) {
  if (st != ALMA_OK) {
    alma__dn_unref(p, b);
    return st;
  }
  alma__dn_val_set(v, shape, md, b);
  *done = 1;
  return ALMA_OK;
}
/* Reorders src (md, ptr) to dst (md, ptr) with a cached reorder primitive. */
alma_status alma__dn_reorder(dn_plan *p, const dnnl_memory_desc_t *smd, void *sptr, const dnnl_memory_desc_t *dmd,
                             void *dptr, const alma_node *n);
/* The plan's scratchpad, grown to at least size. */
void *alma__dn_scratch(dn_plan *p, size_t size);
/* Constant tensor behind value v (initializer or Constant node), or NULL. */
const alma_tensor *alma__dn_const(const alma_graph *g, int v);

/* ---- the kernels' small helpers ---------------------------------------------------------------- */
static inline int alma__dn_is_f32(const dn_val *v) { return v && v->live && v->t.dtype == ALMA_DTYPE_FLOAT32; }
/* The types the kernels compute in: float32, and bfloat16 (the BF16 pass's graphs). A bfloat16
 * primitive exists only where oneDNN has bf16 kernels for the CPU (AVX512_BF16/AMX; emulated on
 * AVX512_CORE for some); elsewhere its creation fails and the node runs on EAGER. */
static inline int alma__dn_dt_ok(alma_dtype t) { return t == ALMA_DTYPE_FLOAT32 || t == ALMA_DTYPE_BFLOAT16; }
static inline int alma__dn_is_fp(const dn_val *v) { return v && v->live && alma__dn_dt_ok(v->t.dtype); }
static inline int alma__dn_is_dt(const dn_val *v, alma_dtype t) { return v && v->live && v->t.dtype == t; }
/* Plain row-major md for (rank, dims) of alma dtype t. */
static inline void alma__dn_plain_md_of(dnnl_memory_desc_t *md, int rank, const int64_t *dims, alma_dtype t) {
  alma__dn_plain_md_dt(md, rank, dims, alma__dn_dtype(t));
}
static inline int alma__dn_is_op(const alma_node *n, const char *t) { return !n->domain[0] && !strcmp(n->op_type, t); }
/* Whether a primitive's implementation name is one of oneDNN's reference kernels. */
static inline int alma__dn_impl_is_ref(const char *impl) { return !strncmp(impl, "ref", 3) || strstr(impl, ":ref") != NULL; }

/* ---- dnnl_classify.c ---------------------------------------------------------------------------- */
/* Static classification at compile: the kind, filling eltwise/binary parameters; DK_NONE with
 * *why set when the node runs on EAGER. */
int alma__dn_classify(const alma_graph *g, const alma_node *n, dn_node *d, const char **why);
/* Eltwise steps a fusable consumer node applies (Relu, Clip...), 0 if none. */
int alma__dn_eltwise_steps(const alma_graph *g, const alma_node *n, dn_elt *elt);

/* ---- dnnl_prim.c: the primitive plumbing the kernels share --------------------------------------- */
void alma__dn_prim_free(dn_prim *pr);
/* A node's primitive slot which (DN_PRIM_*), allocated on first use. */
dn_prim *alma__dn_get_prim(dn_node *d, int which);
/* Whether pr was built for this key; alma__dn_prim_begin frees pr and starts it for the key. */
int alma__dn_key_match(const dn_prim *pr, int nkey, const dnnl_memory_desc_t *key, const int64_t *ikey);
void alma__dn_prim_begin(dn_prim *pr, int nkey, const dnnl_memory_desc_t *key, const int64_t *ikey);
/* Frees what was built and records why: the node runs on EAGER for this key. */
alma_status alma__dn_prim_decline(dn_prim *pr, const alma_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Creates a primitive from an op descriptor with the plan's attributes and fills impl. */
dnnl_status_t alma__dn_pd_create(dn_plan *p, dnnl_primitive_desc_t *pd, const void *op_desc,
                                 const_dnnl_primitive_attr_t attr, char *impl, size_t nimpl);
alma_status alma__dn_exec(dn_plan *p, dn_prim *pr, dnnl_primitive_t prim, void *const *ptrs, const alma_node *n);
/* A primitive attribute with a user scratchpad; with the group's post-ops (alma__dn_post_attr). */
dnnl_primitive_attr_t alma__dn_new_attr(void);
dnnl_primitive_attr_t alma__dn_post_attr(const dn_node *d, int fused, float out_scale, int extra_sum, float sum_scale);
/* pr->pd for op_desc and attr (NULL: a new one; consumed); 0 when oneDNN has none (declined). */
int alma__dn_prim_pd(dn_plan *p, dn_prim *pr, const alma_node *n, const void *op_desc, dnnl_primitive_attr_t attr,
                     const char *what);
/* One execution argument of a primitive: md NULL takes the layout its descriptor chose. */
typedef struct dn_arg {
  int arg;
  const dnnl_memory_desc_t *md;
} dn_arg;
/* The primitive from pr->pd with a memory per argument, then the scratchpad; 0 when oneDNN fails
 * (alma__dn_prim_args: and the node is declined for this key). */
int alma__dn_prim_mems(dn_plan *p, dn_prim *pr, int nargs, const dn_arg *args);
int alma__dn_prim_args(dn_plan *p, dn_prim *pr, const alma_node *n, int nargs, const dn_arg *args);
/* The first post-op of type among those the primitive applies (fused: see alma__dn_npost). */
const dn_post *alma__dn_find_post(const dn_node *d, int fused, int type);
int alma__dn_same_dims(const alma_tensor *a, const alma_tensor *b);
/* The residual of a fused sum: live, of the output's dtype and exactly its shape; else NULL. */
dn_val *alma__dn_sum_residual(dn_plan *p, const dn_node *d, int fused, const alma_tensor *os);
/* v's plain data as float32: its own, or converted into *tmp (caller unrefs) from bfloat16. */
alma_status alma__dn_f32_of(dn_plan *p, dn_val *v, const alma_node *n, void **ptr, dn_buf **tmp);
/* Reorders constant weights (plain layout pmd) once into the primitive's layout. */
alma_status alma__dn_cache_weights(dn_plan *p, dn_prim *pr, const dnnl_memory_desc_t *pmd, const void *data,
                                   const alma_node *n);
/* t's dims right-aligned to rank r, 1 where t has none. */
void alma__dn_ext_dims(const alma_tensor *t, int r, int64_t *dims);

/* ---- dnnl_layout.c: views and Transpose, for Attention ------------------------------------------- */
/* v holds only a strided, non-blocked layout of some buffer (a lazy view's output). */
int alma__dn_is_strided_view(const dn_val *v);
/* A Transpose's perm attribute as pm[input axis] = output axis (perm_out: perm[output axis]). */
int alma__dn_transpose_perm(const alma_node *n, int r, int *pm, int *perm_out);

/* ---- the kernels, one per kind of node (alma__dn_run's contract, which calls them) ---------------- */
/* dnnl_conv.c */
alma_status alma__dn_run_conv(dn_plan *p, int idx, int fused, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                              int *done);
alma_status alma__dn_run_deconv(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done);
/* dnnl_pool.c */
alma_status alma__dn_run_pool(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done);
/* dnnl_eltwise.c */
alma_status alma__dn_run_eltwise(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                                 int *done);
alma_status alma__dn_run_binary(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done);
alma_status alma__dn_run_prelu(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done);
alma_status alma__dn_run_cast(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done);
/* src1 of a per-channel broadcast (d1: N or 1 x C x 1...) in src0's channel blocking; 0 when there is
 * none (one channel, src0 not channel-blocked): plain then. */
int alma__dn_blocked_src1(const dnnl_memory_desc_t *m0, int r, const int64_t *dout, const int64_t *d1, alma_dtype dt,
                          dnnl_memory_desc_t *m1);
/* dnnl_norm.c */
alma_status alma__dn_run_bnorm(dn_plan *p, int idx, int fused, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                               int *done);
alma_status alma__dn_run_lnorm(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done);
alma_status alma__dn_run_softmax(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done);
alma_status alma__dn_run_lrn(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done);
alma_status alma__dn_run_inorm(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done);
/* dnnl_matmul.c */
alma_status alma__dn_run_matmul(dn_plan *p, int idx, int fused, dn_val **in, const alma_tensor *os, dn_val **out,
                                int *done);
alma_status alma__dn_run_gemm(dn_plan *p, int idx, int fused, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                              int *done);
alma_status alma__dn_run_attn(dn_plan *p, int idx, int fused, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                              int *done);
/* dnnl_layout.c */
alma_status alma__dn_run_view(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done);
alma_status alma__dn_run_transpose(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done);
alma_status alma__dn_run_reduce(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done);
alma_status alma__dn_run_concat(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done);
alma_status alma__dn_run_slice(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int nout,
                               int *done);
alma_status alma__dn_run_pad(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done);
/* dnnl_resample.c */
alma_status alma__dn_run_resample(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                                  int *done);

/* ---- dnnl_dispatch.c ----------------------------------------------------------------------------- */
/* Runs node (or group, when fused; see alma__dn_npost) natively. in/out: values. *done = 0 declines (EAGER runs it
 * then); errors are real failures. outshape: the inferred output shapes. */
alma_status alma__dn_run(dn_plan *p, int idx, int fused, dn_val **in, int nin, const alma_tensor *outshape,
                         dn_val **out, int nout, int *done);
/* A contrib node of alma__contrib_par (GroupQueryAttention, Attention, the Gelus, SkipLayerNormalization...)
 * on EAGER's kernel with its items over the plan's threads (alma__op_run_node's contract: outputs
 * allocated, owned). */
alma_status alma__dn_run_contrib(dn_plan *p, const alma_node *n, const alma_tensor *const *in, alma_tensor *out);
/* The plan's parallel loop (ops/op.h's alma_exec_parfor; pctx: &p->threads): items over oneDNN's
 * OpenMP threads, taken as threads come free. */
void alma__dn_parfor(void *pctx, int64_t items, void (*fn)(void *arg, int64_t item), void *arg);

/* ---- dnnl_runtime.c: the executor, for dnnl_int8_exec.c ------------------------------------ */
/* Runs node idx alone (oneDNN or EAGER) and retires its inputs, as the executor does. */
alma_status alma__dn_run_node(dn_plan *p, int idx);
/* One use of value v is done (released at its last). */
void alma__dn_use_done(dn_plan *p, int v);

/* ---- dnnl_int8_plan.c, dnnl_int8_exec.c: int8 execution -------------------------------------- */
/* q_role: a member of an int8 cluster (runs as one primitive when its last member is reached), or
 * a DequantizeLinear read only by int8 clusters (runs only when one of them falls back). */
enum { DN_Q_NONE = 0, DN_Q_MEMBER, DN_Q_LAZY };

/* Classification's "not on oneDNN": the reason as data and in words; returns DK_NONE. */
static inline int alma__dn_decline(dn_node *d, const char **why, alma__decline reason, const char *text) {
  d->why_reason = reason;
  *why = text;
  return DK_NONE;
}
/* DK_QDQ / DK_QLINEAR for the quantization operators it takes, DK_NONE with *why for those it
 * leaves to EAGER, -1 for other operators. */
int alma__dn_q_classify(const alma_graph *g, const alma_node *n, dn_node *d, const char **why);
/* Compile: finds the QDQ clusters (after plan_fuse; overlapping float groups are dissolved). */
void alma__dn_q_plan(dn_plan *p);
/* Executor: node idx has a q_role; runs its cluster when idx is its last member (*at: the anchor). */
alma_status alma__dn_q_step(dn_plan *p, int idx, int *at);
/* DK_QDQ and DK_QLINEAR nodes (alma__dn_run's contract). */
alma_status alma__dn_q_run(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int nout,
                           int *done);
/* describe(): prints node idx's line when it is part of a cluster (returns 1); the int8 summary. */
int alma__dn_q_describe(dn_plan *p, int idx, FILE *f);
void alma__dn_q_summary(dn_plan *p, FILE *f);
void alma__dn_q_free(dn_plan *p);

#endif
#endif
