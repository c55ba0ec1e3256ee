/* DNNL runtime: which nodes run on oneDNN, and one builder/executor per kind of node.
 *
 * Every kernel first checks what it needs (float32, ranks, attribute values oneDNN can express);
 * anything else declines (*done = 0) and the node runs on its EAGER kernel, so a declined case is
 * never wrong, only slower. Primitives are built for the input layouts/shapes they see (the key)
 * and rebuilt when those change. */
#ifdef ALMA_HAVE_DNNL

#include <float.h>
#include <math.h>
#include <stdatomic.h>

#include "ops/contrib_bert.h"
#include "ops/contrib_llm.h"
#include "ops/contrib_nbits.h"
#include "ops/fused.h"
#include "ops/nn_util.h"
#include "runtimes/dnnl/dnnl_native.h"
#include "runtimes/dnnl/dnnl_rt.h"

#define F32 ALMA_DTYPE_FLOAT32
#define BF16 ALMA_DTYPE_BFLOAT16

static int is_f32(const dn_val *v) { return v && v->live && v->t.dtype == F32; }
/* The types the kernels compute in: float32, and bfloat16 (the BF16 pass's graphs). A bfloat16
 * primitive exists only where oneDNN has bf16 kernels for the CPU (AVX512_BF16/AMX; emulated on
 * AVX512_CORE for some); elsewhere its creation fails and the node runs on EAGER. */
static int dt_ok(alma_dtype t) { return t == F32 || t == BF16; }
static int is_fp(const dn_val *v) { return v && v->live && dt_ok(v->t.dtype); }
static int is_dt(const dn_val *v, alma_dtype t) { return v && v->live && v->t.dtype == t; }
static dnnl_data_type_t ddt(alma_dtype t) { return alma__dn_dtype(t); }
static void plain_md(dnnl_memory_desc_t *md, int rank, const int64_t *dims, alma_dtype t) {
  alma__dn_plain_md_dt(md, rank, dims, alma__dn_dtype(t));
}
static int is_op(const alma_node *n, const char *t) { return !n->domain[0] && !strcmp(n->op_type, t); }

/* ---- classification --------------------------------------------------------------------------- */
/* A constant scalar of a float type (the BF16 pass converts Clip's bounds to bfloat16), as float. */
static int const_scalar_f32(const alma_graph *g, int v, float *out) {
  const alma_tensor *t = alma__dn_const(g, v);
  if (!t || !alma__dtype_is_float(t->dtype) || alma_tensor_numel(t) != 1) return 0;
  *out = (float)alma__get_f64(t->data, t->dtype, 0);
  return 1;
}

/* Log and Softplus are left to EAGER: oneDNN's log loses absolute accuracy near 1 (log(1) gives
 * -1.4e-6, and Softplus of very negative inputs is off by 1%), beyond ONNX's test tolerance. */
int alma__dn_eltwise_steps(const alma_graph *g, const alma_node *n, dn_elt *e) {
#define ONE(a, al, be) (e[0].alg = (a), e[0].alpha = (float)(al), e[0].beta = (float)(be), 1)
  if (n->domain[0]) return 0;
  const char *op = n->op_type;
  if (!strcmp(op, "Relu")) return ONE(dnnl_eltwise_relu, 0, 0);
  if (!strcmp(op, "LeakyRelu")) return ONE(dnnl_eltwise_relu, alma__attr_f(n, "alpha", 0.01f), 0);
  if (!strcmp(op, "Elu")) return ONE(dnnl_eltwise_elu, alma__attr_f(n, "alpha", 1.0f), 0);
  if (!strcmp(op, "Sigmoid")) return ONE(dnnl_eltwise_logistic, 0, 0);
  if (!strcmp(op, "Tanh")) return ONE(dnnl_eltwise_tanh, 0, 0);
  if (!strcmp(op, "HardSwish")) return ONE(dnnl_eltwise_hardswish, 0, 0);
  if (!strcmp(op, "Abs")) return ONE(dnnl_eltwise_abs, 0, 0);
  if (!strcmp(op, "Sqrt")) return ONE(dnnl_eltwise_sqrt, 0, 0);
  if (!strcmp(op, "Exp")) return ONE(dnnl_eltwise_exp, 0, 0);
  if (!strcmp(op, "Neg")) return ONE(dnnl_eltwise_linear, -1, 0);
  if (!strcmp(op, "Reciprocal")) return ONE(dnnl_eltwise_pow, 1, -1);
  if (!strcmp(op, "Gelu")) {
    const char *a = alma__attr_s(n, "approximate", "none");
    if (!strcmp(a, "none")) return ONE(dnnl_eltwise_gelu_erf, 0, 0);
    if (!strcmp(a, "tanh")) return ONE(dnnl_eltwise_gelu_tanh, 0, 0);
    return 0;
  }
  if (!strcmp(op, "HardSigmoid")) { /* max(0, min(1, alpha x + beta)) */
    e[0].alg = dnnl_eltwise_linear;
    e[0].alpha = alma__attr_f(n, "alpha", 0.2f);
    e[0].beta = alma__attr_f(n, "beta", 0.5f);
    e[1].alg = dnnl_eltwise_clip_v2;
    e[1].alpha = 0;
    e[1].beta = 1;
    return 2;
  }
  if (!strcmp(op, "Selu")) { /* gamma * elu_alpha(x) */
    e[0].alg = dnnl_eltwise_elu;
    e[0].alpha = alma__attr_f(n, "alpha", 1.67326319217681884765625f);
    e[0].beta = 0;
    e[1].alg = dnnl_eltwise_linear;
    e[1].alpha = alma__attr_f(n, "gamma", 1.05070102214813232421875f);
    e[1].beta = 0;
    return 2;
  }
  if (!strcmp(op, "Clip")) {
    float lo, hi;
    if (n->since_version < 11) {
      lo = alma__attr_f(n, "min", -FLT_MAX);
      hi = alma__attr_f(n, "max", FLT_MAX);
    } else {
      lo = -INFINITY;
      hi = INFINITY;
      if (n->n_inputs > 1 && n->inputs[1] >= 0 && !const_scalar_f32(g, n->inputs[1], &lo)) return 0;
      if (n->n_inputs > 2 && n->inputs[2] >= 0 && !const_scalar_f32(g, n->inputs[2], &hi)) return 0;
    }
    if (isnan(lo) || isnan(hi) || lo > hi) return 0; /* min > max: ONNX gives max everywhere */
    return ONE(dnnl_eltwise_clip_v2, lo, hi);
  }
  if (!strcmp(op, "Pow")) {
    float ex;
    if (n->n_inputs != 2 || !const_scalar_f32(g, n->inputs[1], &ex)) return 0;
    if (ex == 1.0f) return ONE(dnnl_eltwise_linear, 1, 0);
    if (ex == 2.0f) return ONE(dnnl_eltwise_square, 0, 0);
    if (ex == 0.5f) return ONE(dnnl_eltwise_sqrt, 0, 0);
    return ONE(dnnl_eltwise_pow, 1, ex);
  }
  return 0;
#undef ONE
}

static int output_wanted(const alma_node *n, int k) { return k < n->n_outputs && n->outputs[k] >= 0; }

/* The activation epilogue of an alma.Fused* node (attributes activation, activation_params; see
 * src/ops/fused.h) as eltwise steps; -1 if oneDNN has no match. */
static int fused_act_steps(const alma_node *n, dn_elt *e) {
  const alma_attr *a = alma__node_attr(n, "activation");
  if (!a) return 0;
  if (a->type != ALMA_ATTR_STRING || !a->s) return -1;
  const float *pp = NULL;
  int np = alma__attr_floats(n, "activation_params", &pp);
  float p0 = np > 0 ? pp[0] : NAN, p1 = np > 1 ? pp[1] : NAN;
  const char *s = a->s;
#define SET(i, a_, al, be) (e[i].alg = (a_), e[i].alpha = (float)(al), e[i].beta = (float)(be))
  if (!strcmp(s, "Relu")) return SET(0, dnnl_eltwise_relu, 0, 0), 1;
  if (!strcmp(s, "LeakyRelu")) return SET(0, dnnl_eltwise_relu, np > 0 ? p0 : 0.01f, 0), 1;
  if (!strcmp(s, "Sigmoid")) return SET(0, dnnl_eltwise_logistic, 0, 0), 1;
  if (!strcmp(s, "Tanh")) return SET(0, dnnl_eltwise_tanh, 0, 0), 1;
  if (!strcmp(s, "HardSwish")) return SET(0, dnnl_eltwise_hardswish, 0, 0), 1;
  if (!strcmp(s, "SiLU")) return SET(0, dnnl_eltwise_swish, 1, 0), 1;
  if (!strcmp(s, "Gelu")) {
    if (np > 0 && p0 != 0 && p0 != 1) return -1;
    return SET(0, np > 0 && p0 == 1 ? dnnl_eltwise_gelu_tanh : dnnl_eltwise_gelu_erf, 0, 0), 1;
  }
  if (!strcmp(s, "Clip")) {
    float lo = np > 0 ? p0 : -INFINITY, hi = np > 1 ? p1 : INFINITY;
    if (isnan(lo) || isnan(hi) || lo > hi) return -1;
    return SET(0, dnnl_eltwise_clip_v2, lo, hi), 1;
  }
  if (!strcmp(s, "HardSigmoid")) {
    SET(0, dnnl_eltwise_linear, np > 0 ? p0 : 0.2f, np > 1 ? p1 : 0.5f);
    SET(1, dnnl_eltwise_clip_v2, 0, 1);
    return 2;
  }
#undef SET
  return -1;
}

/* alma.FusedConv / FusedGemm / FusedMatMul: the base kind with the node's own post-ops. */
static int classify_fused(const alma_node *n, dn_node *d, const char **why) {
  if (!strcmp(n->op_type, "Attention")) return DK_ATTN;
  int kind = !strcmp(n->op_type, "FusedConv")   ? DK_CONV
             : !strcmp(n->op_type, "FusedGemm") ? DK_GEMM
             : !strcmp(n->op_type, "FusedMatMul") ? DK_MATMUL
                                                  : DK_NONE;
  if (kind == DK_NONE) {
    return alma__dn_decline(d, why, ALMA_DECLINE_OP, "no oneDNN kernel");
  }
  dn_elt e[DN_MAX_ELT];
  int ne = fused_act_steps(n, e);
  if (ne < 0) {
    return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "activation without a oneDNN eltwise");
  }
  d->npost = 0;
  int addend = kind == DK_CONV ? 3 : kind == DK_MATMUL ? 2 : -1;
  if (addend > 0 && n->n_inputs > addend && n->inputs[addend] >= 0) {
    dn_post *q = &d->post[d->npost++];
    memset(q, 0, sizeof *q);
    q->type = kind == DK_CONV ? DP_SUM : DP_BIAS;
    q->node = -1;
    q->other = n->inputs[addend];
  }
  if (ne > 0) {
    dn_post *q = &d->post[d->npost++];
    memset(q, 0, sizeof *q);
    q->type = DP_ELT;
    q->node = -1;
    q->n_elt = ne;
    memcpy(q->elt, e, sizeof(dn_elt) * (size_t)ne);
  }
  d->self_fused = 1;
  d->nself = d->npost;
  return kind;
}

/* Resize/Upsample: what can never be oneDNN's resampling (the coordinates are compared when the
 * node runs, see run_resample). */
static int classify_resize(const alma_node *n, dn_node *d, const char **why) {
  const char *m = alma__attr_s(n, "mode", "nearest");
  if (strcmp(m, "nearest") && strcmp(m, "linear") && !(is_op(n, "Upsample") && !strcmp(m, "bilinear"))) {
    return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "cubic or unknown mode (oneDNN resamples nearest and linear)");
  }
  if (is_op(n, "Resize") && n->since_version >= 11) {
    if (!strcmp(alma__attr_s(n, "coordinate_transformation_mode", "half_pixel"), "tf_crop_and_resize")) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "tf_crop_and_resize");
    }
    if (alma__attr_i(n, "exclude_outside", 0)) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "exclude_outside");
    }
    if (n->since_version >= 18 && alma__attr_i(n, "antialias", 0) && strcmp(m, "nearest")) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "antialias");
    }
    if (n->since_version >= 18 && strcmp(alma__attr_s(n, "keep_aspect_ratio_policy", "stretch"), "stretch")) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "keep_aspect_ratio_policy");
    }
  }
  return DK_RESAMPLE;
}

int alma__dn_classify(const alma_graph *g, const alma_node *n, dn_node *d, const char **why) {
  *why = NULL;
  d->why_reason = ALMA_DECLINE_NONE;
  if (n->n_outputs < 1 || n->outputs[0] < 0 || !n->op) return DK_NONE;
  int qk = alma__dn_q_classify(g, n, d, why); /* quantization operators: dnnl_int8.c */
  if (qk >= 0) return qk;
  if (!strcmp(n->domain, "alma")) {
    alma_dtype dt = g->values[n->outputs[0]].dtype;
    if (!dt_ok(dt) && dt != ALMA_DTYPE_UNDEFINED) {
      return alma__dn_decline(d, why, ALMA_DECLINE_DTYPE, "not float32 or bfloat16");
    }
    return classify_fused(n, d, why);
  }
  if (alma__is_mnb(n)) { /* int4 LLM weights: oneDNN has no such matmul, alma's kernel on its threads */
    alma_dtype dt = g->values[n->outputs[0]].dtype;
    if (dt != ALMA_DTYPE_FLOAT32 && dt != ALMA_DTYPE_UNDEFINED) {
      return alma__dn_decline(d, why, ALMA_DECLINE_DTYPE, "not float32");
    }
    return DK_NBITS;
  }
  if (n->domain[0]) {
    return alma__dn_decline(d, why, ALMA_DECLINE_OP, "not an ai.onnx operator");
  }
  const char *op = n->op_type;
  if (is_op(n, "Reshape") || is_op(n, "Flatten") || is_op(n, "Squeeze") || is_op(n, "Unsqueeze") ||
      is_op(n, "Identity"))
    return DK_VIEW;
  if (is_op(n, "Dropout")) {
    if (output_wanted(n, 1)) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "mask output");
    }
    if (n->since_version < 7 && alma__attr_i(n, "is_test", 0) == 0) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "training mode");
    }
    if (n->since_version >= 12 && n->n_inputs > 2 && n->inputs[2] >= 0) {
      const alma_tensor *t = alma__dn_const(g, n->inputs[2]);
      if (!t || t->dtype != ALMA_DTYPE_BOOL || alma_tensor_numel(t) != 1 || ((const uint8_t *)t->data)[0]) {
        return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "training_mode not constant false");
      }
    }
    return DK_VIEW;
  }
  alma_dtype dt = g->values[n->outputs[0]].dtype;
  if (is_op(n, "Cast")) { /* float32 <-> bfloat16 (the BF16 pass's boundaries); other pairs on EAGER */
    alma_dtype from = n->n_inputs == 1 && n->inputs[0] >= 0 ? g->values[n->inputs[0]].dtype : ALMA_DTYPE_UNDEFINED;
    if (dt_ok((alma_dtype)alma__attr_i(n, "to", 0)) && (dt_ok(from) || from == ALMA_DTYPE_UNDEFINED)) return DK_CAST;
    return alma__dn_decline(d, why, ALMA_DECLINE_DTYPE, "cast other than between float32 and bfloat16");
  }
  if ((dt == ALMA_DTYPE_UINT8 || dt == ALMA_DTYPE_INT8) && !strcmp(op, "MaxPool") && !output_wanted(n, 1)) {
    d->alg = dnnl_pooling_max; /* MaxPool on quantized data (opset >= 12; ONNX Runtime's QOperator models) */
    return DK_POOL;
  }
  if (!dt_ok(dt) && dt != ALMA_DTYPE_UNDEFINED) {
    return alma__dn_decline(d, why, ALMA_DECLINE_DTYPE, "not float32 or bfloat16");
  }
  if (!strcmp(op, "Conv")) return n->n_inputs >= 2 ? DK_CONV : DK_NONE;
  if (!strcmp(op, "MaxPool")) {
    if (output_wanted(n, 1)) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "Indices output");
    }
    d->alg = dnnl_pooling_max;
    return DK_POOL;
  }
  if (!strcmp(op, "GlobalMaxPool")) {
    d->alg = dnnl_pooling_max;
    return DK_POOL;
  }
  if (!strcmp(op, "AveragePool")) {
    d->alg = alma__attr_i(n, "count_include_pad", 0) ? dnnl_pooling_avg_include_padding : dnnl_pooling_avg_exclude_padding;
    return DK_POOL;
  }
  if (!strcmp(op, "GlobalAveragePool")) {
    d->alg = dnnl_pooling_avg_exclude_padding;
    return DK_POOL;
  }
  if ((d->n_elt = alma__dn_eltwise_steps(g, n, d->elt)) > 0) return DK_ELTWISE;
  if (!strcmp(op, "Clip") && n->since_version >= 11) { /* bounds read when the node runs */
    d->n_elt = 1;
    d->elt[0].alg = dnnl_eltwise_clip_v2;
    d->rt_clip = 1;
    return DK_ELTWISE;
  }
  if (!strcmp(op, "ConvTranspose")) return n->n_inputs >= 2 ? DK_DECONV : DK_NONE;
  if (!strcmp(op, "Transpose")) return DK_TRANSPOSE;
  if (!strcmp(op, "Concat")) return DK_CONCAT;
  if (!strcmp(op, "Slice") || !strcmp(op, "Split")) return DK_SLICE;
  if (!strcmp(op, "PRelu")) return n->n_inputs == 2 ? DK_PRELU : DK_NONE;
  static const struct {
    const char *op;
    dnnl_alg_kind_t alg;
  } reds[] = {{"ReduceMean", dnnl_reduction_mean}, {"ReduceSum", dnnl_reduction_sum}, {"ReduceMax", dnnl_reduction_max},
              {"ReduceMin", dnnl_reduction_min},   {"ReduceProd", dnnl_reduction_mul}, {"ReduceL1", dnnl_reduction_norm_lp_sum},
              {"ReduceL2", dnnl_reduction_norm_lp_sum}, {"ReduceSumSquare", dnnl_reduction_norm_lp_power_p_sum}};
  for (size_t i = 0; i < sizeof reds / sizeof reds[0]; i++)
    if (!strcmp(op, reds[i].op)) {
      d->alg = reds[i].alg;
      return DK_REDUCE;
    }
  if (!strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul") || !strcmp(op, "Div") || !strcmp(op, "Max") ||
      !strcmp(op, "Min")) {
    if (n->n_inputs != 2 || n->inputs[0] < 0 || n->inputs[1] < 0) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "not two inputs");
    }
    if (n->since_version < 7 && (!strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul") || !strcmp(op, "Div"))) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "legacy broadcast");
    }
    d->alg = op[0] == 'A' ? dnnl_binary_add : op[0] == 'S' ? dnnl_binary_sub : op[0] == 'D' ? dnnl_binary_div
             : !strcmp(op, "Mul") ? dnnl_binary_mul : !strcmp(op, "Max") ? dnnl_binary_max : dnnl_binary_min;
    return DK_BINARY;
  }
  if (!strcmp(op, "BatchNormalization")) {
    for (int k = 1; k < n->n_outputs; k++)
      if (output_wanted(n, k)) {
        return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "training outputs");
      }
    if (n->since_version < 7 || (n->since_version < 9 && alma__attr_i(n, "spatial", 1) != 1) ||
        alma__attr_i(n, "training_mode", 0) != 0) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "training mode or non-spatial");
    }
    return DK_BNORM;
  }
  if (!strcmp(op, "LayerNormalization")) {
    if (output_wanted(n, 1) || output_wanted(n, 2)) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "Mean/InvStdDev outputs");
    }
    if (alma__attr_i(n, "stash_type", 1) != 1) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "stash_type");
    }
    return DK_LNORM;
  }
  if (!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax")) return DK_SOFTMAX;
  if (!strcmp(op, "MatMul")) return DK_MATMUL;
  if (!strcmp(op, "Gemm")) {
    if (n->since_version < 7) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "legacy broadcast");
    }
    return DK_GEMM;
  }
  if (!strcmp(op, "Pad")) {
    if (strcmp(alma__attr_s(n, "mode", "constant"), "constant")) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "reflect/edge/wrap mode (constant only)");
    }
    return DK_PAD;
  }
  if (!strcmp(op, "LRN")) {
    /* ONNX's window is [c - floor((size-1)/2), c + ceil((size-1)/2)], oneDNN's symmetric */
    if (alma__attr_i(n, "size", 0) % 2 == 0) {
      return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "even size (oneDNN's window is symmetric)");
    }
    return DK_LRN;
  }
  if (!strcmp(op, "InstanceNormalization")) return DK_INORM;
  if (!strcmp(op, "Resize") || !strcmp(op, "Upsample")) return classify_resize(n, d, why);
  return alma__dn_decline(d, why, ALMA_DECLINE_OP, "no oneDNN kernel");
}

/* ---- primitive helpers ------------------------------------------------------------------------ */
void alma__dn_prim_free(dn_prim *pr) {
  if (pr->p) dnnl_primitive_destroy(pr->p);
  if (pr->p2) dnnl_primitive_destroy(pr->p2);
  if (pr->pd) dnnl_primitive_desc_destroy(pr->pd);
  for (int i = 0; i < pr->nmem; i++)
    if (pr->mem[i]) dnnl_memory_destroy(pr->mem[i]);
  free(pr->wei);
  free(pr->wei2);
  memset(pr, 0, sizeof *pr);
}

static dn_prim *get_prim(dn_node *d, int which) {
  if (!d->prim[which]) d->prim[which] = calloc(1, sizeof(dn_prim));
  return d->prim[which];
}

static int key_match(const dn_prim *pr, int nkey, const dnnl_memory_desc_t *key, const int64_t *ikey) {
  if (!pr->valid || pr->nkey != nkey) return 0;
  for (int k = 0; k < nkey; k++)
    if (!dnnl_memory_desc_equal(&pr->key[k], &key[k])) return 0;
  for (int k = 0; k < 8; k++)
    if (pr->ikey[k] != ikey[k]) return 0;
  return 1;
}

static void prim_begin(dn_prim *pr, int nkey, const dnnl_memory_desc_t *key, const int64_t *ikey) {
  alma__dn_prim_free(pr);
  pr->valid = 1;
  pr->nkey = nkey;
  for (int k = 0; k < nkey; k++) pr->key[k] = key[k];
  for (int k = 0; k < 8; k++) pr->ikey[k] = ikey[k];
}

/* Frees what was built and records why: the node runs on EAGER for this key. */
static alma_status prim_decline(dn_prim *pr, const alma_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static alma_status prim_decline(dn_prim *pr, const alma_node *n, const char *fmt, ...) {
  char why[sizeof pr->why]; /* formatted first: the arguments may point into pr (its impl) */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  int nkey = pr->nkey;
  dnnl_memory_desc_t key[DN_MAX_KEY];
  int64_t ikey[8];
  memcpy(key, pr->key, sizeof key);
  memcpy(ikey, pr->ikey, sizeof ikey);
  prim_begin(pr, nkey, key, ikey);
  pr->declined = 1;
  memcpy(pr->why, why, sizeof why);
  ALMA_LOGD("DNNL: node '%s' (%s) runs on EAGER: %s", n->name, n->op_type, pr->why);
  return ALMA_OK;
}

static int add_mem(dn_plan *p, dn_prim *pr, int arg, const dnnl_memory_desc_t *md) {
  if (pr->nmem >= DN_MAX_MEM) return 0;
  if (dnnl_memory_create(&pr->mem[pr->nmem], md, p->eng, DNNL_MEMORY_NONE) != dnnl_success) return 0;
  pr->arg[pr->nmem++] = arg;
  return 1;
}

/* Creates the primitive from pr->pd and the scratchpad slot (last). */
static int prim_finish(dn_plan *p, dn_prim *pr) {
  if (dnnl_primitive_create(&pr->p, pr->pd) != dnnl_success) return 0;
  const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pr->pd, dnnl_query_scratchpad_md, 0);
  if (smd && smd->ndims > 0 && dnnl_memory_desc_get_size(smd) > 0) return add_mem(p, pr, DNNL_ARG_SCRATCHPAD, smd);
  return 1;
}

dnnl_status_t alma__dn_pd_create(dn_plan *p, dnnl_primitive_desc_t *pd, const void *op_desc,
                                 const_dnnl_primitive_attr_t attr, char *impl, size_t nimpl) {
  *pd = NULL;
  dnnl_status_t s = dnnl_primitive_desc_create(pd, op_desc, attr, p->eng, NULL);
  if (s == dnnl_success && impl) {
    const char *name = NULL;
    if (dnnl_primitive_desc_query(*pd, dnnl_query_impl_info_str, 0, &name) != dnnl_success || !name) name = "?";
    snprintf(impl, nimpl, "%s", name);
  }
  return s;
}

alma_status alma__dn_exec(dn_plan *p, dn_prim *pr, dnnl_primitive_t prim, void *const *ptrs, const alma_node *n) {
  dnnl_exec_arg_t args[DN_MAX_MEM];
  for (int i = 0; i < pr->nmem; i++) {
    void *ptr = ptrs[i];
    if (pr->arg[i] == DNNL_ARG_SCRATCHPAD) {
      const dnnl_memory_desc_t *md = NULL;
      dnnl_memory_get_memory_desc(pr->mem[i], &md);
      ptr = alma__dn_scratch(p, md ? dnnl_memory_desc_get_size(md) : 0);
      if (!ptr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory (oneDNN scratchpad)");
    }
    dnnl_memory_set_data_handle(pr->mem[i], ptr);
    args[i].arg = pr->arg[i];
    args[i].memory = pr->mem[i];
  }
  dnnl_status_t s = dnnl_primitive_execute(prim, p->strm, pr->nmem, args);
  if (s != dnnl_success) return alma__op_error(n, ALMA_ERR_INTERNAL, "oneDNN %s failed (status %d)", pr->impl, (int)s);
  return ALMA_OK;
}

static dnnl_primitive_attr_t new_attr(void) {
  dnnl_primitive_attr_t a = NULL;
  if (dnnl_primitive_attr_create(&a) != dnnl_success) return NULL;
  dnnl_primitive_attr_set_scratchpad_mode(a, dnnl_scratchpad_mode_user);
  return a;
}

/* Attribute with the group's eltwise, sum and depthwise post-ops (bias and norm-relu are not
 * post-ops); fused as alma__dn_npost takes it. */
static dnnl_primitive_attr_t post_attr(const dn_node *d, int fused, float out_scale, int extra_sum, float sum_scale) {
  dnnl_primitive_attr_t a = new_attr();
  if (!a) return NULL;
  if (out_scale != 1.0f) dnnl_primitive_attr_set_output_scales(a, 1, 0, &out_scale);
  dnnl_post_ops_t po = NULL;
  if (dnnl_post_ops_create(&po) != dnnl_success) {
    dnnl_primitive_attr_destroy(a);
    return NULL;
  }
  if (extra_sum) dnnl_post_ops_append_sum(po, sum_scale);
  for (int k = 0; k < alma__dn_npost(d, fused); k++) {
    const dn_post *q = &d->post[k];
    if (q->type == DP_ELT)
      for (int e = 0; e < q->n_elt; e++) dnnl_post_ops_append_eltwise(po, 1.0f, q->elt[e].alg, q->elt[e].alpha, q->elt[e].beta);
    else if (q->type == DP_SUM)
      dnnl_post_ops_append_sum(po, 1.0f);
    else if (q->type == DP_DW) /* 3x3, left/top padding 1 (the right/bottom follows from the output size) */
      dnnl_post_ops_append_dw(po, dnnl_f32, q->dw_bias ? dnnl_f32 : dnnl_data_type_undef, dnnl_f32, 3, q->stride, 1, 0, 0,
                              NULL);
  }
  if (dnnl_post_ops_len(po) > 0) dnnl_primitive_attr_set_post_ops(a, po);
  dnnl_post_ops_destroy(po);
  return a;
}

/* The primitive descriptor of a node for op_desc and attr (NULL: new_attr(); taken over and
 * destroyed either way), its implementation name in pr->impl. 0 when oneDNN has none: the node
 * is declined for this key. */
static int prim_pd(dn_plan *p, dn_prim *pr, const alma_node *n, const void *op_desc, dnnl_primitive_attr_t attr,
                   const char *what) {
  if (!attr) attr = new_attr();
  dnnl_status_t s = alma__dn_pd_create(p, &pr->pd, op_desc, attr, pr->impl, sizeof pr->impl);
  dnnl_primitive_attr_destroy(attr);
  if (s == dnnl_success) return 1;
  prim_decline(pr, n, "no %s implementation (status %d)", what, (int)s);
  return 0;
}

/* One execution argument of a primitive: md NULL takes the layout its descriptor chose. */
typedef struct dn_arg {
  int arg;
  const dnnl_memory_desc_t *md;
} dn_arg;

/* The primitive from pr->pd with a memory per argument, in order (alma__dn_exec's ptrs follow it),
 * then the scratchpad; the layouts of SRC, WEIGHTS and DST are kept in pr->src_md/wei_md/dst_md.
 * 0 when oneDNN fails. */
static int prim_mems(dn_plan *p, dn_prim *pr, int nargs, const dn_arg *args) {
  for (int k = 0; k < nargs; k++) {
    const dnnl_memory_desc_t *md = args[k].md;
    if (!md) md = dnnl_primitive_desc_query_md(pr->pd, dnnl_query_exec_arg_md, args[k].arg);
    if (!md || !add_mem(p, pr, args[k].arg, md)) return 0;
    if (args[k].arg == DNNL_ARG_SRC) pr->src_md = *md;
    else if (args[k].arg == DNNL_ARG_WEIGHTS) pr->wei_md = *md;
    else if (args[k].arg == DNNL_ARG_DST) pr->dst_md = *md;
  }
  return prim_finish(p, pr);
}

/* prim_mems for a node's own primitive: on failure the node is declined for this key. */
static int prim_args(dn_plan *p, dn_prim *pr, const alma_node *n, int nargs, const dn_arg *args) {
  if (prim_mems(p, pr, nargs, args)) return 1;
  prim_decline(pr, n, "primitive creation failed");
  return 0;
}

static int impl_is_ref(const char *impl) { return !strncmp(impl, "ref", 3) || strstr(impl, ":ref") != NULL; }

/* The first post-op of type among those the primitive applies (fused: see alma__dn_npost). */
static const dn_post *find_post(const dn_node *d, int fused, int type) {
  for (int k = 0; k < alma__dn_npost(d, fused); k++)
    if (d->post[k].type == type) return &d->post[k];
  return NULL;
}

static int same_dims(const alma_tensor *a, const alma_tensor *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

/* The residual of a fused sum: live, of the output's dtype and exactly its shape. */
static dn_val *sum_residual(dn_plan *p, const dn_node *d, int fused, const alma_tensor *os) {
  const dn_post *q = find_post(d, fused, DP_SUM);
  if (!q) return NULL;
  dn_val *r = &p->vals[q->other];
  return is_dt(r, os->dtype) && same_dims(&r->t, os) ? r : NULL;
}

/* v's plain data as float32: its own, or converted into *tmp (caller unrefs) from bfloat16. For
 * the parameters oneDNN takes in float32 only (normalization scale/shift/statistics) or best so
 * (biases: every bf16 convolution and matmul accepts an f32 bias). */
static alma_status f32_of(dn_plan *p, dn_val *v, const alma_node *n, void **ptr, dn_buf **tmp) {
  *tmp = NULL;
  ALMA_TRY(alma__dn_val_plain(p, v, n));
  if (v->t.dtype == F32) {
    *ptr = v->t.data;
    return ALMA_OK;
  }
  int64_t cnt = alma__numel(v->t.rank, v->t.dims);
  if (!(*tmp = alma__dn_alloc(p, (size_t)cnt * sizeof(float)))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  float *d = (*tmp)->ptr;
  for (int64_t i = 0; i < cnt; i++) d[i] = (float)alma__get_f64(v->t.data, v->t.dtype, i);
  *ptr = d;
  return ALMA_OK;
}

/* A buffer in layout md holding r's data: r's own when it can be taken over, else a copy. */
alma_status alma__dn_sum_dst(dn_plan *p, dn_val *r, const dnnl_memory_desc_t *md, dn_buf **out, const alma_node *n) {
  *out = alma__dn_val_steal(r, md);
  if (*out) return ALMA_OK;
  dn_buf *b = alma__dn_alloc(p, dnnl_memory_desc_get_size(md));
  if (!b) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dnnl_memory_desc_t rmd;
  alma__dn_val_md(r, &rmd);
  alma_status st;
  if (dnnl_memory_desc_equal(&rmd, md)) {
    memcpy(b->ptr, r->has_blk ? r->bbuf->ptr : r->t.data, dnnl_memory_desc_get_size(md));
    st = ALMA_OK;
  } else {
    st = alma__dn_reorder(p, &rmd, r->has_blk ? r->bbuf->ptr : r->t.data, md, b->ptr, n);
    p->n_reorder_in++;
  }
  if (st != ALMA_OK) alma__dn_unref(p, b);
  else *out = b;
  return st;
}

/* Reorders constant weights (plain layout pmd) once into the primitive's layout. */
static alma_status cache_weights(dn_plan *p, dn_prim *pr, const dnnl_memory_desc_t *pmd, const void *data,
                                 const alma_node *n) {
  size_t sz = dnnl_memory_desc_get_size(&pr->wei_md);
  pr->wei = aligned_alloc(64, (sz + 63) & ~(size_t)63);
  if (!pr->wei) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  pr->wei_const = 1;
  p->n_reorder_wei++;
  return alma__dn_reorder(p, pmd, (void *)data, &pr->wei_md, pr->wei, n);
}

/* ---- Conv --------------------------------------------------------------------------------------- */
enum { DN_NATIVE_WINO = 2 };

/* dnnl.winograd: off never, on wherever the shape qualifies (any AVX2+FMA CPU), auto: on CPUs with
 * AVX2+FMA and without AVX-512F where the measured heuristic says it is faster. 0 never, 1 by the
 * heuristic, 2 always. */
static int wino_mode(const dn_plan *p) {
  if (!alma__dn_wino_cpu() || p->opt.winograd == DN_WINO_OFF) return 0;
  if (p->opt.winograd == DN_WINO_ON) return 2;
  return alma__dn_wino_avx512() ? 0 : 1;
}

/* Whether a convolution asks oneDNN for its own Winograd algorithm first: by default (auto) on
 * AVX-512 CPUs, where alma's AVX2 kernel is off and oneDNN 2.x has F(2x2, 3x3) kernels; float32,
 * 2-D 3x3, stride 1, no dilation, one group, at least 16 input and output channels. oneDNN
 * declines what its kernels do not cover (then the direct algorithm runs). */
static int onednn_wino(const dn_plan *p, alma_dtype dt, int64_t G, int nspc, const dnnl_dims_t wd, int wnd,
                       const dnnl_dims_t st, const dnnl_dims_t dl) {
  if (p->opt.winograd != DN_WINO_AUTO || !alma__dn_wino_avx512() || dt != ALMA_DTYPE_FLOAT32 || G != 1 || nspc != 2)
    return 0;
  /* measured: on MNIST's 1-channel first layer the transforms cost more than they save */
  if (wd[0] < 16 || wd[1] < 16) return 0;
  return wd[wnd - 2] == 3 && wd[wnd - 1] == 3 && st[0] == 1 && st[1] == 1 && dl[0] == 0 && dl[1] == 0;
}

/* The group's post-ops as the Winograd kernel's steps; 0 when one has no equivalent there. */
static int wino_posts(const dn_node *d, int fused, dn_wino_geo *g) {
  g->npost = 0;
  for (int k = 0; k < alma__dn_npost(d, fused); k++) {
    const dn_post *q = &d->post[k];
    if (q->type == DP_SUM) {
      if (g->npost >= DN_WINO_MAX_POST) return 0;
      g->post[g->npost++] = (dn_wino_post){DN_WP_SUM, 0, 0};
      continue;
    }
    if (q->type != DP_ELT) return 0;
    for (int e = 0; e < q->n_elt; e++) {
      const dn_elt *t = &q->elt[e];
      dn_wino_post o;
      if (t->alg == dnnl_eltwise_relu) o = (dn_wino_post){DN_WP_RELU, t->alpha, 0};
      else if (t->alg == dnnl_eltwise_clip || t->alg == dnnl_eltwise_clip_v2) o = (dn_wino_post){DN_WP_CLIP, t->alpha, t->beta};
      else if (t->alg == dnnl_eltwise_bounded_relu) o = (dn_wino_post){DN_WP_CLIP, 0, t->alpha};
      else if (t->alg == dnnl_eltwise_linear) o = (dn_wino_post){DN_WP_LINEAR, t->alpha, t->beta};
      else return 0;
      if (g->npost >= DN_WINO_MAX_POST) return 0;
      g->post[g->npost++] = o;
    }
  }
  return 1;
}

/* Whether a 2-D convolution goes to the Winograd kernel (dnnl_wino.c), filling g: float32, 3x3,
 * stride 1, no dilation, one group, pads <= 2, constant weights, input in aBcd8b/aBcd16b (the
 * output then in the same layout, *omd), post-ops it has; and, unless forced, where it measured
 * faster than oneDNN's jit:avx2 direct convolution (see docs/runtimes/dnnl.md). */
static int wino_use(const dn_plan *p, const dn_node *d, int fused, const dn_val *x, const dnnl_memory_desc_t *xmd,
                    const alma_tensor *w, const alma__nn_geom *gm, const alma_tensor *os, int64_t G,
                    dn_wino_geo *g, dnnl_memory_desc_t *omd) {
  int mode = wino_mode(p);
  if (!mode || !w || x->t.dtype != ALMA_DTYPE_FLOAT32 || w->dtype != ALMA_DTYPE_FLOAT32 || x->t.rank != 4 || G != 1)
    return 0;
  if (w->dims[2] != 3 || w->dims[3] != 3) return 0;
  for (int i = 0; i < 2; i++)
    if (gm->s[i] != 1 || gm->d[i] != 1 || gm->pb[i] < 0 || gm->pb[i] > 2 || gm->pe[i] < 0 || gm->pe[i] > 2) return 0;
  memset(g, 0, sizeof *g);
  if (!wino_posts(d, fused, g)) return 0;
  static const dnnl_format_tag_t tags[] = {dnnl_aBcd8b, dnnl_aBcd16b};
  dnnl_dims_t xd = {x->t.dims[0], x->t.dims[1], x->t.dims[2], x->t.dims[3]};
  dnnl_dims_t od = {os->dims[0], os->dims[1], os->dims[2], os->dims[3]};
  int found = -1;
  for (int i = 0; i < 2 && found < 0; i++) {
    dnnl_memory_desc_t m;
    if (dnnl_memory_desc_init_by_tag(&m, 4, xd, dnnl_f32, tags[i]) == dnnl_success && dnnl_memory_desc_equal(&m, xmd))
      found = i;
  }
  if (found < 0 || dnnl_memory_desc_init_by_tag(omd, 4, od, dnnl_f32, tags[found]) != dnnl_success) return 0;
  g->N = x->t.dims[0];
  g->C = x->t.dims[1];
  g->OC = w->dims[0];
  g->H = x->t.dims[2];
  g->W = x->t.dims[3];
  g->OH = os->dims[2];
  g->OW = os->dims[3];
  g->ph = gm->pb[0];
  g->pw = gm->pb[1];
  g->B = found ? 16 : 8;
  alma__dn_wino_geo_fill(g);
  if (mode == 2) return 1;
  /* Measured (docs/runtimes/dnnl.md): faster on every ResNet-18 and MNIST CNN 3x3 layer at batch 32
   * and at batch 1 from 8 tiles on; with fewer (ResNet-18's 7x7 layer at batch 1: 4 tiles) the 4x
   * larger transformed weights, streamed from memory for a handful of tiles, make it a tie at best. */
  return g->C >= 16 && g->OC >= 16 && g->N * g->TH * g->TW >= 8;
}

/* The Winograd kernel's run: output (or the sum's destination) in pr->dst_md, then dnnl_wino.c. */
static alma_status run_wino(dn_plan *p, dn_prim *pr, const alma_node *n, dn_val *x, dn_val *b, dn_val *res,
                            const alma_tensor *os, dn_val **out, int *done) {
  const dn_wino_geo *g = pr->wei;
  const float *U = (const float *)((const char *)pr->wei + ((sizeof *g + 63) & ~(size_t)63));
  dn_buf *db = NULL, *btmp = NULL;
  void *bp = NULL;
  alma_status st = b ? f32_of(p, b, n, &bp, &btmp) : ALMA_OK;
  if (st == ALMA_OK) {
    if (res) st = alma__dn_sum_dst(p, res, &pr->dst_md, &db, n);
    else if (!(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md)))) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  float *scr = st == ALMA_OK ? alma__dn_scratch(p, alma__dn_wino_scratch(g, p->threads)) : NULL;
  if (st == ALMA_OK && !scr) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (st == ALMA_OK) alma__dn_wino(g, p->threads, U, bp, x->has_blk ? x->bbuf->ptr : x->t.data, db->ptr, scr);
  alma__dn_unref(p, btmp);
  return alma__dn_finish(p, st, db, out[0], &os[0], &pr->dst_md, done);
}

/* A 1x1 convolution group with its DP_DW post-op (fused == 2): one primitive whose output is the
 * depthwise convolution's. plan_fuse_dw (dnnl_runtime.c) checked what the graph fixes: a 1x1 Conv
 * of stride 1, no pads, group 1, constant weights, eltwise post-ops only, then a depthwise 3x3 Conv
 * (group = channels) of stride 1 or 2, pads 1, dilation 1, constant weights; here the run's dtype
 * and shapes. Declined (the runtime then runs the two parts apart) when oneDNN has no such
 * primitive or only a reference kernel for it. */
static alma_status run_conv_dw(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                               int *done) {
  const alma_graph *g = p->g;
  const alma_node *n = &g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  const dn_post *q = &d->post[d->dw_at - 1];
  const alma_node *nc = &g->nodes[q->node];
  dn_prim *pr = get_prim(d, DN_PRIM_DW);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0], *b = nin > 2 ? in[2] : NULL, *bd = q->dw_bias ? &p->vals[nc->inputs[2]] : NULL;
  const alma_tensor *w = alma__dn_const(g, n->inputs[1]), *wd = alma__dn_const(g, nc->inputs[1]);
  if (!is_f32(x) || x->t.rank != 4 || !w || !wd || w->dtype != F32 || wd->dtype != F32 || (b && !is_fp(b)) ||
      (bd && !is_fp(bd)) || os[0].dtype != F32 || os[0].rank != 4)
    return ALMA_OK;
  int64_t C = x->t.dims[1], OC = w->dims[0], s = q->stride;
  if (w->rank != 4 || w->dims[1] != C || w->dims[2] != 1 || w->dims[3] != 1 || wd->rank != 4 || wd->dims[0] != OC ||
      wd->dims[1] != 1 || wd->dims[2] != 3 || wd->dims[3] != 3 || os[0].dims[1] != OC ||
      os[0].dims[2] != x->t.dims[2] || os[0].dims[3] != x->t.dims[3])
    return ALMA_OK;
  if ((b && alma__numel(b->t.rank, b->t.dims) != OC) || (bd && alma__numel(bd->t.rank, bd->t.dims) != OC)) return ALMA_OK;
  /* the depthwise output: ONNX's floor((H + 1 + 1 - 3) / s) + 1 is oneDNN's ceil(H / s) for s = 1, 2 */
  alma_tensor ds = os[0];
  ds.dims[2] = (os[0].dims[2] - 1) / s + 1;
  ds.dims[3] = (os[0].dims[3] - 1) / s + 1;

  dnnl_memory_desc_t key[3];
  int64_t ikey[8] = {0};
  memset(key, 0, sizeof key);
  alma__dn_val_md(x, &key[0]);
  if (b) alma__dn_val_md(b, &key[1]);
  if (bd) alma__dn_val_md(bd, &key[2]);
  if (!key_match(pr, 3, key, ikey)) {
    prim_begin(pr, 3, key, ikey);
    dnnl_dims_t sd = {x->t.dims[0], C, x->t.dims[2], x->t.dims[3]}, wdd = {OC, C, 1, 1}, bdd = {OC};
    dnnl_dims_t dd = {os[0].dims[0], OC, os[0].dims[2], os[0].dims[3]}, one = {1, 1}, zero = {0, 0};
    dnnl_memory_desc_t s_any, w_any, b_md, d_any, wplain, dwplain;
    dnnl_memory_desc_init_by_tag(&s_any, 4, sd, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&w_any, 4, wdd, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&b_md, 1, bdd, dnnl_f32, dnnl_a);
    dnnl_memory_desc_init_by_tag(&d_any, 4, dd, dnnl_f32, dnnl_format_tag_any);
    dnnl_convolution_desc_t cd;
    if (dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &s_any, &w_any,
                                           b ? &b_md : NULL, &d_any, one, zero, zero) != dnnl_success)
      return prim_decline(pr, n, "convolution descriptor rejected");
    if (!prim_pd(p, pr, n, &cd, post_attr(d, 2, 1.0f, 0, 0), "1x1 convolution with a depthwise post-op")) return ALMA_OK;
    if (impl_is_ref(pr->impl)) return prim_decline(pr, n, "depthwise post-op only on a reference kernel (%s)", pr->impl);
    size_t il = strlen(pr->impl); /* oneDNN names the 1x1 kernel only: the plan shows the fusion */
    snprintf(pr->impl + il, sizeof pr->impl - il, "+dw%d", (int)s);
    const dnnl_memory_desc_t *omd = dnnl_primitive_desc_query_md(pr->pd, dnnl_query_dst_md, 0);
    if (!omd || omd->ndims != 4 || omd->dims[0] != ds.dims[0] || omd->dims[1] != OC || omd->dims[2] != ds.dims[2] ||
        omd->dims[3] != ds.dims[3])
      return prim_decline(pr, n, "depthwise post-op output of another shape");
    dn_arg args[6] = {{DNNL_ARG_SRC, NULL}, {DNNL_ARG_WEIGHTS, NULL}};
    int na = 2;
    if (b) args[na++] = (dn_arg){DNNL_ARG_BIAS, &b_md};
    args[na++] = (dn_arg){DNNL_ARG_DST, NULL};
    args[na++] = (dn_arg){DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS, NULL};
    if (bd) args[na++] = (dn_arg){DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS, NULL};
    if (!prim_args(p, pr, n, na, args)) return ALMA_OK;
    int64_t wd64[4] = {OC, C, 1, 1}, dw64[5] = {OC, 1, 1, 3, 3};
    plain_md(&wplain, 4, wd64, F32);
    plain_md(&dwplain, 5, dw64, F32); /* [C, 1, 3, 3] as groups x 1 x 1 x 3 x 3 */
    ALMA_TRY(cache_weights(p, pr, &wplain, w->data, n));
    const dnnl_memory_desc_t *dwmd =
        dnnl_primitive_desc_query_md(pr->pd, dnnl_query_exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS);
    if (!dwmd || dwmd->ndims == 0) return prim_decline(pr, n, "no depthwise weights layout");
    size_t sz = dnnl_memory_desc_get_size(dwmd);
    if (!(pr->wei2 = aligned_alloc(64, (sz + 63) & ~(size_t)63))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    p->n_reorder_wei++;
    ALMA_TRY(alma__dn_reorder(p, &dwplain, wd->data, dwmd, pr->wei2, n));
  }
  if (pr->declined) return ALMA_OK;

  dn_buf *stmp = NULL, *btmp = NULL, *bdtmp = NULL, *db = NULL;
  void *sp = NULL, *bp = NULL, *bdp = NULL;
  alma_status st = alma__dn_val_get(p, x, &pr->src_md, 1, &sp, &stmp, n);
  if (st == ALMA_OK && b) st = f32_of(p, b, n, &bp, &btmp);
  if (st == ALMA_OK && bd) st = f32_of(p, bd, nc, &bdp, &bdtmp);
  if (st == ALMA_OK && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md))))
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (st == ALMA_OK) {
    void *ptrs[DN_MAX_MEM] = {sp, pr->wei};
    int k = 2;
    if (b) ptrs[k++] = bp;
    ptrs[k++] = db->ptr;
    ptrs[k++] = pr->wei2;
    if (bd) ptrs[k++] = bdp;
    st = alma__dn_exec(p, pr, pr->p, ptrs, n);
  }
  alma__dn_unref(p, stmp);
  alma__dn_unref(p, btmp);
  alma__dn_unref(p, bdtmp);
  return alma__dn_finish(p, st, db, out[0], &ds, &pr->dst_md, done);
}

static alma_status run_conv(dn_plan *p, int idx, int fused, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                            int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  if (fused == 2) return run_conv_dw(p, idx, in, nin, os, out, done);
  dn_prim *pr = get_prim(d, alma__dn_slot(fused));
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0], *w = nin > 1 ? in[1] : NULL, *b = nin > 2 ? in[2] : NULL;
  alma_dtype dt = x ? x->t.dtype : F32; /* src, weights and dst; the bias goes in as float32 */
  if (!is_fp(x) || !is_dt(w, dt) || (b && !is_fp(b)) || os[0].dtype != dt) return ALMA_OK;
  int r = x->t.rank, nsp = r - 2;
  if (r < 3 || r > 5 || w->t.rank != r) return ALMA_OK;
  int64_t G = alma__attr_i(n, "group", 1), C = x->t.dims[1], OC = w->t.dims[0];
  if (G < 1 || C % G || OC % G || w->t.dims[1] * G != C) return ALMA_OK;
  if (b && alma__numel(b->t.rank, b->t.dims) != OC) return ALMA_OK;
  alma__nn_geom gm;
  if (alma__nn_geom_read(n, nsp, x->t.dims + 2, w->t.dims + 2, 1, &gm) != ALMA_OK ||
      alma__nn_geom_forward(n, &gm, 0) != ALMA_OK) {
    alma__error_clear();
    return ALMA_OK;
  }
  for (int i = 0; i < nsp; i++)
    if (gm.out[i] != os[0].dims[2 + i]) return ALMA_OK;
  dn_val *res = NULL;
  if (fused && find_post(d, fused, DP_SUM) && !(res = sum_residual(p, d, fused, &os[0]))) return ALMA_OK;

  const alma_tensor *wc = alma__dn_const(p->g, n->inputs[1]);
  dnnl_memory_desc_t key[3];
  int64_t ikey[8] = {wc != NULL, b != NULL};
  alma__dn_val_md(x, &key[0]);
  alma__dn_val_md(w, &key[1]);
  memset(&key[2], 0, sizeof key[2]);
  if (b) alma__dn_val_md(b, &key[2]);
  /* Spatial dims of extent 1 under a unit kernel without padding (a [k,1] kernel over width 1, as
   * tf2onnx writes 1-D convolutions) leave the descriptors: the bytes are the same, and oneDNN's
   * brgconv blocks over the last spatial dim, so over a width of 1 it runs at a fraction of its
   * speed. The primitive sees rank rc; the values around it keep rank r. */
  int sp_keep[3], rc = 2;
  for (int i = 0; i < nsp; i++)
    if (x->t.dims[2 + i] != 1 || w->t.dims[2 + i] != 1 || gm.out[i] != 1 || gm.pb[i] || gm.pe[i]) sp_keep[rc++ - 2] = i;
  if (rc == 2 || find_post(d, fused, DP_DW)) {
    rc = r;
    for (int i = 0; i < nsp; i++) sp_keep[i] = i;
  }
  int nspc = rc - 2;
  int wnd = G > 1 ? rc + 1 : rc;
  dnnl_dims_t wd;
  int64_t wd64[DNNL_MAX_NDIMS];
  if (G > 1) {
    wd[0] = G;
    wd[1] = OC / G;
    wd[2] = C / G;
  } else {
    wd[0] = OC;
    wd[1] = C;
  }
  for (int i = 0; i < nspc; i++) wd[wnd - nspc + i] = w->t.dims[2 + sp_keep[i]];
  for (int i = 0; i < wnd; i++) wd64[i] = wd[i];
  dnnl_memory_desc_t wplain;
  plain_md(&wplain, wnd, wd64, dt);

  int fresh = !key_match(pr, 3, key, ikey);
  if (fresh) {
    prim_begin(pr, 3, key, ikey);
    dn_wino_geo wg;
    if (nsp == 2 && rc == r && wc && wino_use(p, d, fused, x, &key[0], wc, &gm, &os[0], G, &wg, &pr->dst_md)) {
      /* dnnl_wino.c: the geometry, then the transformed weights, in one block held by pr->wei */
      size_t off = (sizeof wg + 63) & ~(size_t)63, sz = off + alma__dn_wino_wsize(&wg);
      if (!(pr->wei = aligned_alloc(64, (sz + 63) & ~(size_t)63))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      memcpy(pr->wei, &wg, sizeof wg);
      alma__dn_wino_weights(&wg, wc->data, (float *)((char *)pr->wei + off));
      pr->wei_const = 1;
      pr->flags = DN_NATIVE_WINO;
      snprintf(pr->impl, sizeof pr->impl, "alma:wino4x3:%s", wg.B == 8 ? "aBcd8b" : "aBcd16b");
    }
  }
  if (pr->flags == DN_NATIVE_WINO) return run_wino(p, pr, n, x, b, res, os, out, done);
  if (fresh) {
    dnnl_dims_t sd, dd, bd = {OC}, st, dl, pl, pe;
    for (int i = 0; i < 2; i++) sd[i] = x->t.dims[i], dd[i] = os[0].dims[i];
    for (int i = 0; i < nspc; i++) {
      int k = sp_keep[i];
      sd[2 + i] = x->t.dims[2 + k];
      dd[2 + i] = os[0].dims[2 + k];
      st[i] = gm.s[k];
      dl[i] = gm.d[k] - 1;
      pl[i] = gm.pb[k];
      pe[i] = gm.pe[k];
    }
    dnnl_memory_desc_t s_any, w_any, b_md, d_any;
    dnnl_memory_desc_init_by_tag(&s_any, rc, sd, ddt(dt), dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&w_any, wnd, wd, ddt(dt), dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a);
    dnnl_memory_desc_init_by_tag(&d_any, rc, dd, ddt(dt), dnnl_format_tag_any);
    dnnl_convolution_desc_t cd;
    int wino = onednn_wino(p, dt, G, nspc, wd, wnd, st, dl);
    if (wino) {
      dnnl_primitive_attr_t a = post_attr(d, fused, 1.0f, 0, 0);
      if (!a) a = new_attr();
      wino = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_winograd, &s_any,
                                                        &w_any, b ? &b_md : NULL, &d_any, st, dl, pl, pe) == dnnl_success &&
             alma__dn_pd_create(p, &pr->pd, &cd, a, pr->impl, sizeof pr->impl) == dnnl_success;
      dnnl_primitive_attr_destroy(a);
    }
    if (!wino) {
      if (dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &s_any,
                                                     &w_any, b ? &b_md : NULL, &d_any, st, dl, pl, pe) != dnnl_success)
        return prim_decline(pr, n, "convolution descriptor rejected");
      if (!prim_pd(p, pr, n, &cd, post_attr(d, fused, 1.0f, 0, 0), "convolution")) return ALMA_OK;
    }
    if (fused && impl_is_ref(pr->impl)) {
      /* the post-ops would push the convolution onto a reference kernel: run the nodes apart */
      dnnl_primitive_desc_t plain_pd = NULL;
      dnnl_primitive_attr_t a0 = new_attr();
      char impl0[48] = "";
      if (alma__dn_pd_create(p, &plain_pd, &cd, a0, impl0, sizeof impl0) == dnnl_success && !impl_is_ref(impl0)) {
        dnnl_primitive_desc_destroy(plain_pd);
        dnnl_primitive_attr_destroy(a0);
        return prim_decline(pr, n, "post-ops only on a reference kernel (%s)", pr->impl);
      }
      if (plain_pd) dnnl_primitive_desc_destroy(plain_pd);
      dnnl_primitive_attr_destroy(a0);
    }
    dn_arg args[4] = {{DNNL_ARG_SRC, NULL}, {DNNL_ARG_WEIGHTS, NULL}};
    int na = 2;
    if (b) args[na++] = (dn_arg){DNNL_ARG_BIAS, &b_md};
    args[na++] = (dn_arg){DNNL_ARG_DST, NULL};
    if (!prim_args(p, pr, n, na, args)) return ALMA_OK;
    if (rc < r) {
      /* the values around the primitive see its layouts at their own rank */
      dnnl_dims_t xd, od;
      dnnl_memory_desc_t s_r, d_r;
      for (int i = 0; i < r; i++) xd[i] = x->t.dims[i], od[i] = os[0].dims[i];
      if (dnnl_memory_desc_reshape(&s_r, &pr->src_md, r, xd) != dnnl_success ||
          dnnl_memory_desc_reshape(&d_r, &pr->dst_md, r, od) != dnnl_success)
        return prim_decline(pr, n, "layout of the %d-D convolution not viewable at rank %d", nspc, r);
      pr->src_md = s_r;
      pr->dst_md = d_r;
    }
    if (wc) ALMA_TRY(cache_weights(p, pr, &wplain, wc->data, n));
  }
  if (pr->declined) return ALMA_OK;

  alma_status st = ALMA_OK;
  dn_buf *stmp = NULL, *wtmp = NULL, *db = NULL, *btmp = NULL;
  void *sp = NULL, *wp = pr->wei, *bp = NULL;
  st = alma__dn_val_get(p, x, &pr->src_md, 1, &sp, &stmp, n);
  if (st == ALMA_OK && !wp) {
    if ((st = alma__dn_val_plain(p, w, n)) == ALMA_OK) {
      if (dnnl_memory_desc_equal(&wplain, &pr->wei_md)) {
        wp = w->t.data;
      } else if (!(wtmp = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->wei_md)))) {
        st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      } else {
        st = alma__dn_reorder(p, &wplain, w->t.data, &pr->wei_md, wtmp->ptr, n);
        wp = wtmp->ptr;
        p->n_reorder_wei++;
      }
    }
  }
  if (st == ALMA_OK && b) st = f32_of(p, b, n, &bp, &btmp);
  if (st == ALMA_OK) {
    if (res) st = alma__dn_sum_dst(p, res, &pr->dst_md, &db, n);
    else if (!(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md)))) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  if (st == ALMA_OK) {
    void *ptrs[DN_MAX_MEM] = {sp, wp};
    int k = 2;
    if (b) ptrs[k++] = bp;
    ptrs[k++] = db->ptr;
    st = alma__dn_exec(p, pr, pr->p, ptrs, n);
  }
  alma__dn_unref(p, stmp);
  alma__dn_unref(p, wtmp);
  alma__dn_unref(p, btmp);
  return alma__dn_finish(p, st, db, out[0], &os[0], &pr->dst_md, done);
}

/* ---- ConvTranspose (oneDNN deconvolution) ------------------------------------------------------- */
static alma_status run_deconv(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0], *w = nin > 1 ? in[1] : NULL, *b = nin > 2 ? in[2] : NULL;
  alma_dtype dt = x ? x->t.dtype : F32;
  if (!is_fp(x) || !is_dt(w, dt) || (b && !is_fp(b)) || os[0].dtype != dt) return ALMA_OK;
  int r = x->t.rank, nsp = r - 2;
  if (r < 3 || r > 5 || w->t.rank != r || os[0].rank != r) return ALMA_OK;
  int64_t G = alma__attr_i(n, "group", 1), C = x->t.dims[1];
  if (G < 1 || C % G || w->t.dims[0] != C) return ALMA_OK;
  int64_t OCg = w->t.dims[1], OC = OCg * G, ICg = C / G;
  if (os[0].dims[1] != OC || (b && alma__numel(b->t.rank, b->t.dims) != OC)) return ALMA_OK;
  alma__nn_geom gm;
  if (alma__nn_geom_read(n, nsp, x->t.dims + 2, w->t.dims + 2, 1, &gm) != ALMA_OK) {
    alma__error_clear();
    return ALMA_OK;
  }
  /* begin pads as the EAGER kernel places the window; the end pad follows from the output size */
  const int64_t *ops = NULL, *pads = NULL;
  int nos = alma__attr_ints(n, "output_shape", &ops), have_pads = alma__attr_ints(n, "pads", &pads) > 0;
  int same = gm.auto_pad == ALMA__PAD_SAME_UPPER || gm.auto_pad == ALMA__PAD_SAME_LOWER;
  const int64_t *opad = NULL;
  int nop = alma__attr_ints(n, "output_padding", &opad);
  dnnl_dims_t st, dl, pl, pe;
  for (int i = 0; i < nsp; i++) {
    int64_t eff = (gm.k[i] - 1) * gm.d[i] + 1, outi = os[0].dims[2 + i];
    int64_t natural = gm.s[i] * (gm.in[i] - 1) + (nop == nsp ? opad[i] : 0) + eff;
    int64_t pb = gm.pb[i];
    if ((nos || same) && !(nos && have_pads && gm.auto_pad == ALMA__PAD_NOTSET)) {
      int64_t total = natural - outi, half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      pb = gm.auto_pad == ALMA__PAD_SAME_UPPER ? half : total - half;
    } else if (gm.auto_pad == ALMA__PAD_VALID) {
      pb = 0;
    }
    st[i] = gm.s[i];
    dl[i] = gm.d[i] - 1;
    pl[i] = pb;
    pe[i] = (gm.in[i] - 1) * gm.s[i] + eff - pb - outi;
    if (pb < 0 || pe[i] < 0) return ALMA_OK; /* oneDNN takes no negative padding */
  }
  const alma_tensor *wc = alma__dn_const(p->g, n->inputs[1]);
  dnnl_memory_desc_t key[3];
  int64_t ikey[8] = {wc != NULL, b != NULL};
  for (int i = 0; i < nsp; i++) ikey[2 + i] = pl[i] * 4096 + pe[i];
  alma__dn_val_md(x, &key[0]);
  alma__dn_val_md(w, &key[1]);
  memset(&key[2], 0, sizeof key[2]);
  if (b) alma__dn_val_md(b, &key[2]);
  /* ONNX weights are [C, M/group, k...]: oneDNN's (g)oihw dims with i before o in memory */
  int wnd = G > 1 ? r + 1 : r;
  dnnl_dims_t wd, ws;
  int64_t K = alma__numel(nsp, w->t.dims + 2);
  int o = G > 1 ? 1 : 0;
  if (G > 1) wd[0] = G, ws[0] = ICg * OCg * K;
  wd[o] = OCg;
  ws[o] = K;
  wd[o + 1] = ICg;
  ws[o + 1] = OCg * K;
  for (int i = 0; i < nsp; i++) wd[o + 2 + i] = w->t.dims[2 + i];
  if (nsp > 0) ws[wnd - 1] = 1;
  for (int i = wnd - 2; i >= o + 2; i--) ws[i] = ws[i + 1] * wd[i + 1];
  dnnl_memory_desc_t wsrc;
  dnnl_memory_desc_init_by_strides(&wsrc, wnd, wd, ddt(dt), ws);
  if (!key_match(pr, 3, key, ikey)) {
    prim_begin(pr, 3, key, ikey);
    dnnl_dims_t sd, dd, bd = {OC};
    for (int i = 0; i < r; i++) sd[i] = x->t.dims[i], dd[i] = os[0].dims[i];
    dnnl_memory_desc_t s_any, w_any, b_md, d_any;
    dnnl_memory_desc_init_by_tag(&s_any, r, sd, ddt(dt), dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&w_any, wnd, wd, ddt(dt), dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a);
    dnnl_memory_desc_init_by_tag(&d_any, r, dd, ddt(dt), dnnl_format_tag_any);
    dnnl_deconvolution_desc_t dc;
    if (dnnl_dilated_deconvolution_forward_desc_init(&dc, dnnl_forward_inference, dnnl_deconvolution_direct, &s_any,
                                                     &w_any, b ? &b_md : NULL, &d_any, st, dl, pl, pe) != dnnl_success)
      return prim_decline(pr, n, "deconvolution descriptor rejected");
    dn_arg args[4] = {{DNNL_ARG_SRC, NULL}, {DNNL_ARG_WEIGHTS, NULL}};
    int na = 2;
    if (b) args[na++] = (dn_arg){DNNL_ARG_BIAS, &b_md};
    args[na++] = (dn_arg){DNNL_ARG_DST, NULL};
    if (!prim_pd(p, pr, n, &dc, NULL, "deconvolution") || !prim_args(p, pr, n, na, args)) return ALMA_OK;
    if (wc) ALMA_TRY(cache_weights(p, pr, &wsrc, wc->data, n));
  }
  if (pr->declined) return ALMA_OK;
  alma_status stt = ALMA_OK;
  dn_buf *stmp = NULL, *wtmp = NULL, *db = NULL, *btmp = NULL;
  void *sp = NULL, *wp = pr->wei, *bp = NULL;
  stt = alma__dn_val_get(p, x, &pr->src_md, 1, &sp, &stmp, n);
  if (stt == ALMA_OK && !wp && (stt = alma__dn_val_plain(p, w, n)) == ALMA_OK) {
    if (!(wtmp = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->wei_md)))) {
      stt = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    } else {
      stt = alma__dn_reorder(p, &wsrc, w->t.data, &pr->wei_md, wtmp->ptr, n);
      wp = wtmp->ptr;
      p->n_reorder_wei++;
    }
  }
  if (stt == ALMA_OK && b) stt = f32_of(p, b, n, &bp, &btmp);
  if (stt == ALMA_OK && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md))))
    stt = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (stt == ALMA_OK) {
    void *ptrs[DN_MAX_MEM] = {sp, wp};
    int k = 2;
    if (b) ptrs[k++] = bp;
    ptrs[k++] = db->ptr;
    stt = alma__dn_exec(p, pr, pr->p, ptrs, n);
  }
  alma__dn_unref(p, stmp);
  alma__dn_unref(p, wtmp);
  alma__dn_unref(p, btmp);
  if (stt != ALMA_OK) {
    alma__dn_unref(p, db);
    return stt;
  }
  alma__dn_val_set(out[0], &os[0], &pr->dst_md, db);
  *done = 1;
  return ALMA_OK;
}

/* ---- pooling ------------------------------------------------------------------------------------ */
enum { DN_NATIVE_POOL = 1 };

/* The 2-D layouts alma__dn_pool reads (channels blocked innermost by *B; float32, and uint8/int8
 * for MaxPool), with the output descriptor in the same layout; 0 for others (oneDNN's pooling
 * then). dnnl.native_pool=off turns the native kernel off (comparisons). */
static int native_pool_layout(const dn_plan *p, const dn_val *x, const dnnl_memory_desc_t *xmd, const dnnl_dims_t od,
                              dnnl_memory_desc_t *omd, int64_t *B) {
  alma_dtype t = x->t.dtype;
  if (!p->opt.native_pool || (t != ALMA_DTYPE_FLOAT32 && t != ALMA_DTYPE_UINT8 && t != ALMA_DTYPE_INT8) || x->t.rank != 4) return 0;
  static const dnnl_format_tag_t tags[] = {dnnl_aBcd8b, dnnl_aBcd16b, dnnl_abcd, dnnl_acdb};
  dnnl_dims_t xd = {x->t.dims[0], x->t.dims[1], x->t.dims[2], x->t.dims[3]};
  for (size_t i = 0; i < sizeof tags / sizeof *tags; i++) {
    dnnl_memory_desc_t m;
    if (dnnl_memory_desc_init_by_tag(&m, 4, xd, ddt(t), tags[i]) != dnnl_success || !dnnl_memory_desc_equal(&m, xmd))
      continue;
    if (dnnl_memory_desc_init_by_tag(omd, 4, od, ddt(t), tags[i]) != dnnl_success) return 0;
    *B = i == 0 ? 8 : i == 1 ? 16 : i == 2 ? 1 : x->t.dims[1];
    return 1;
  }
  return 0;
}

static alma_status run_pool(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0];
  int q8 = is_dt(x, ALMA_DTYPE_UINT8) || is_dt(x, ALMA_DTYPE_INT8);
  if (!(is_fp(x) || (q8 && d->alg == dnnl_pooling_max)) || os[0].dtype != x->t.dtype) return ALMA_OK;
  int r = x->t.rank, nsp = r - 2;
  if (r < 3 || r > 5 || os[0].rank != r) return ALMA_OK;
  int global = !strncmp(n->op_type, "Global", 6);
  alma__nn_geom gm;
  memset(&gm, 0, sizeof gm);
  if (global) {
    gm.nsp = nsp;
    for (int i = 0; i < nsp; i++) {
      gm.in[i] = gm.k[i] = x->t.dims[2 + i];
      gm.s[i] = gm.d[i] = 1;
      gm.out[i] = 1;
    }
  } else {
    const int64_t *ks = NULL;
    if (alma__attr_ints(n, "kernel_shape", &ks) != nsp) return ALMA_OK;
    int is_max = d->alg == dnnl_pooling_max;
    int with_dil = is_max ? n->since_version >= 10 : n->since_version >= 19;
    int ceil_mode = n->since_version >= 10 ? alma__attr_i(n, "ceil_mode", 0) != 0 : 0;
    if (alma__nn_geom_read(n, nsp, x->t.dims + 2, ks, with_dil, &gm) != ALMA_OK ||
        alma__nn_geom_forward(n, &gm, ceil_mode) != ALMA_OK) {
      alma__error_clear();
      return ALMA_OK;
    }
  }
  dnnl_dims_t st, kr, dl, pl, pe;
  for (int i = 0; i < nsp; i++) {
    if (gm.out[i] != os[0].dims[2 + i]) return ALMA_OK;
    int64_t eff = (gm.k[i] - 1) * gm.d[i] + 1;
    if (gm.pb[i] >= eff) return ALMA_OK; /* windows entirely in the padding */
    st[i] = gm.s[i];
    kr[i] = gm.k[i];
    dl[i] = gm.d[i] - 1;
    pl[i] = gm.pb[i];
    /* oneDNN wants the end padding that gives exactly out windows (ceil_mode adds some) */
    pe[i] = (gm.out[i] - 1) * gm.s[i] + eff - gm.in[i] - gm.pb[i];
    if ((gm.in[i] + gm.pb[i] + gm.pe[i] - eff) / gm.s[i] + 1 == gm.out[i]) pe[i] = gm.pe[i];
    if (pe[i] < 0 || pe[i] >= eff) return ALMA_OK;
    /* oneDNN (and the native kernel) would count ceil_mode's taps beyond the end padding in the
     * divisor; ONNX does not: EAGER runs those */
    if (d->alg == dnnl_pooling_avg_include_padding && pe[i] > gm.pe[i]) return ALMA_OK;
  }
  dnnl_memory_desc_t key[1];
  int64_t ikey[8] = {0};
  alma__dn_val_md(x, &key[0]);
  if (!key_match(pr, 1, key, ikey)) {
    prim_begin(pr, 1, key, ikey);
    dnnl_dims_t dd;
    for (int i = 0; i < r; i++) dd[i] = os[0].dims[i];
    if (!global && nsp == 2 && native_pool_layout(p, x, &key[0], dd, &pr->dst_md, &pr->m)) {
      pr->flags = DN_NATIVE_POOL;
      snprintf(pr->impl, sizeof pr->impl, "alma:pool:%s",
               pr->m == 1 ? "nchw" : pr->m == 8 ? "aBcd8b" : pr->m == 16 ? "aBcd16b" : "nhwc");
    } else {
      dnnl_memory_desc_t d_any;
      dnnl_memory_desc_init_by_tag(&d_any, r, dd, ddt(x->t.dtype), dnnl_format_tag_any);
      dnnl_pooling_v2_desc_t pdsc;
      if (dnnl_pooling_v2_forward_desc_init(&pdsc, dnnl_forward_inference, d->alg, &key[0], &d_any, st, kr, dl, pl,
                                            pe) != dnnl_success)
        return prim_decline(pr, n, "pooling descriptor rejected");
      if (!prim_pd(p, pr, n, &pdsc, NULL, "pooling") ||
          !prim_args(p, pr, n, 2, (dn_arg[]){{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_DST, NULL}}))
        return ALMA_OK;
    }
  }
  if (pr->flags == DN_NATIVE_POOL) { /* dnnl_native.c: faster than oneDNN 2.6's pooling */
    dn_pool_geo g = {.dt = x->t.dtype == ALMA_DTYPE_UINT8  ? DN_POOL_U8
                           : x->t.dtype == ALMA_DTYPE_INT8 ? DN_POOL_S8
                                                           : DN_POOL_F32,
                     .N = x->t.dims[0], .B = pr->m, .H = gm.in[0], .W = gm.in[1], .OH = gm.out[0], .OW = gm.out[1],
                     .kh = gm.k[0], .kw = gm.k[1], .sh = gm.s[0], .sw = gm.s[1], .dh = gm.d[0], .dw = gm.d[1],
                     .ph = gm.pb[0], .pw = gm.pb[1], .is_max = d->alg == dnnl_pooling_max,
                     .cip = d->alg == dnnl_pooling_avg_include_padding};
    g.CB = (x->t.dims[1] + g.B - 1) / g.B;
    float *scr = alma__dn_scratch(p, alma__dn_pool_scratch(&g, p->threads));
    dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md));
    if (!scr || !db) {
      alma__dn_unref(p, db);
      return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    }
    alma__dn_pool(&g, p->threads, x->has_blk ? x->bbuf->ptr : x->t.data, db->ptr, scr);
    return alma__dn_finish(p, ALMA_OK, db, out[0], &os[0], &pr->dst_md, done);
  }
  if (pr->declined) return ALMA_OK;
  void *sp = x->has_blk ? x->bbuf->ptr : x->t.data;
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  void *ptrs[DN_MAX_MEM] = {sp, db->ptr};
  alma_status s = alma__dn_exec(p, pr, pr->p, ptrs, n);
  if (s != ALMA_OK) {
    alma__dn_unref(p, db);
    return s;
  }
  alma__dn_val_set(out[0], &os[0], &pr->dst_md, db);
  *done = 1;
  return ALMA_OK;
}

/* ---- eltwise ------------------------------------------------------------------------------------- */
static alma_status run_eltwise(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                               int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0];
  if (!is_fp(x) || os[0].dtype != x->t.dtype || !same_dims(&x->t, &os[0])) return ALMA_OK;
  dn_elt elt[DN_MAX_ELT];
  memcpy(elt, d->elt, sizeof elt);
  int64_t ikey[8] = {0};
  if (d->rt_clip) { /* scalar bounds (x's type) from the inputs, as EAGER reads them */
    float b[2] = {-INFINITY, INFINITY};
    for (int k = 1; k < 3 && k < nin; k++) {
      if (!in[k]) continue;
      if (!is_fp(in[k]) || alma__numel(in[k]->t.rank, in[k]->t.dims) != 1) return ALMA_OK;
      ALMA_TRY(alma__dn_val_plain(p, in[k], n));
      b[k - 1] = (float)alma__get_f64(in[k]->t.data, in[k]->t.dtype, 0);
    }
    if (isnan(b[0]) || isnan(b[1]) || b[0] > b[1]) return ALMA_OK;
    elt[0].alpha = b[0];
    elt[0].beta = b[1];
    memcpy(&ikey[0], &b[0], sizeof(float));
    memcpy(&ikey[1], &b[1], sizeof(float));
  }
  dnnl_memory_desc_t key[1];
  alma__dn_val_md(x, &key[0]);
  if (!key_match(pr, 1, key, ikey)) {
    prim_begin(pr, 1, key, ikey);
    for (int e = 0; e < d->n_elt; e++) {
      dnnl_eltwise_desc_t ed;
      dnnl_primitive_desc_t pd = NULL;
      if (dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, elt[e].alg, &key[0], elt[e].alpha,
                                         elt[e].beta) != dnnl_success)
        return prim_decline(pr, n, "eltwise descriptor rejected");
      if (e == 0) {
        if (!prim_pd(p, pr, n, &ed, NULL, "eltwise")) return ALMA_OK;
        continue;
      }
      /* the second step (HardSigmoid's clip, Selu's scale): its own primitive on the same data */
      dnnl_primitive_attr_t attr = new_attr();
      dnnl_status_t s = alma__dn_pd_create(p, &pd, &ed, attr, NULL, 0);
      dnnl_primitive_attr_destroy(attr);
      if (s != dnnl_success) return prim_decline(pr, n, "no eltwise implementation (status %d)", (int)s);
      s = dnnl_primitive_create(&pr->p2, pd);
      dnnl_primitive_desc_destroy(pd);
      if (s != dnnl_success) return prim_decline(pr, n, "primitive creation failed");
    }
    if (!prim_args(p, pr, n, 2, (dn_arg[]){{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_DST, &key[0]}})) return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  void *sp = x->has_blk ? x->bbuf->ptr : x->t.data;
  dn_buf *db = alma__dn_val_steal(x, &pr->dst_md); /* in place when x dies here */
  if (!db && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md))))
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  void *ptrs[DN_MAX_MEM] = {sp, db->ptr};
  alma_status s = alma__dn_exec(p, pr, pr->p, ptrs, n);
  if (s == ALMA_OK && pr->p2) {
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, pr->mem[1]}, {DNNL_ARG_DST, pr->mem[1]}};
    if (dnnl_primitive_execute(pr->p2, p->strm, 2, args) != dnnl_success)
      s = alma__op_error(n, ALMA_ERR_INTERNAL, "oneDNN eltwise failed");
  }
  if (s != ALMA_OK) {
    alma__dn_unref(p, db);
    return s;
  }
  alma__dn_val_set(out[0], &os[0], &pr->dst_md, db);
  *done = 1;
  return ALMA_OK;
}

/* ---- binary -------------------------------------------------------------------------------------- */
static void ext_dims(const alma_tensor *t, int r, int64_t *dims) {
  int off = r - t->rank;
  for (int i = 0; i < r; i++) dims[i] = i < off ? 1 : t->dims[i - off];
}

/* src1 of a binary that broadcasts per channel (N or 1 x C x 1 x 1: a squeeze-and-excitation scale,
 * a bias) next to a channel-blocked src0 (nChw8c, nChw16c): the same blocking, which oneDNN's jit
 * binary requires of both; given plain, it took the reference kernel (EfficientNet-B0's SE Muls 25-97
 * ms each at batch 1, where the jit kernel streams them in well under one). 0 when src0 is not
 * channel-blocked in a standard order or the broadcast is another shape. */
static int blocked_src1(const dnnl_memory_desc_t *m0, int r, const int64_t *dout, const int64_t *d1, alma_dtype dt,
                        dnnl_memory_desc_t *m1) {
  /* One channel: the operand is a scalar per sample, and oneDNN 2.6's binary took a blocked scalar
   * src1 as no operand at all (a one-channel ConvTranspose + bias came out without the bias); its
   * plain layout broadcasts right. */
  if (m0->format_kind != dnnl_blocked || r < 3 || r > 5 || d1[1] != dout[1] || dout[1] == 1) return 0;
  const dnnl_blocking_desc_t *bk = &m0->format_desc.blocking;
  if (bk->inner_nblks != 1 || bk->inner_idxs[0] != 1 || (bk->inner_blks[0] != 8 && bk->inner_blks[0] != 16)) return 0;
  for (int k = 2; k < r; k++)
    if (d1[k] != 1) return 0;
  int b16 = bk->inner_blks[0] == 16;
  dnnl_format_tag_t tag = r == 3 ? (b16 ? dnnl_aBc16b : dnnl_aBc8b)
                          : r == 4 ? (b16 ? dnnl_aBcd16b : dnnl_aBcd8b)
                                   : (b16 ? dnnl_aBcde16b : dnnl_aBcde8b);
  dnnl_dims_t a, b;
  for (int k = 0; k < r; k++) a[k] = dout[k], b[k] = d1[k];
  dnnl_memory_desc_t same;
  dnnl_data_type_t t = alma__dn_dtype(dt);
  if (dnnl_memory_desc_init_by_tag(&same, r, a, t, tag) != dnnl_success || !dnnl_memory_desc_equal(&same, m0)) return 0;
  return dnnl_memory_desc_init_by_tag(m1, r, b, t, tag) == dnnl_success;
}

static alma_status run_binary(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *a = in[0], *b = in[1];
  alma_dtype dt = os[0].dtype;
  if (!dt_ok(dt) || !is_dt(a, dt) || !is_dt(b, dt)) return ALMA_OK;
  int r = os[0].rank > 0 ? os[0].rank : 1;
  if (a->t.rank > r || b->t.rank > r) return ALMA_OK;
  int64_t da[ALMA_MAX_RANK], db_[ALMA_MAX_RANK], dout[ALMA_MAX_RANK];
  alma_tensor o1 = os[0];
  if (o1.rank == 0) o1.rank = 1, o1.dims[0] = 1;
  ext_dims(&a->t, r, da);
  ext_dims(&b->t, r, db_);
  ext_dims(&o1, r, dout);
  int a_full = !memcmp(da, dout, sizeof(int64_t) * (size_t)r), b_full = !memcmp(db_, dout, sizeof(int64_t) * (size_t)r);
  int commut = d->alg == dnnl_binary_add || d->alg == dnnl_binary_mul || d->alg == dnnl_binary_max || d->alg == dnnl_binary_min;
  int swap;
  if (a_full) swap = 0;
  else if (b_full && commut) swap = 1;
  else return ALMA_OK;
  dn_val *s0 = swap ? b : a, *s1 = swap ? a : b;
  int64_t *d1 = swap ? da : db_;
  int s1_full = swap ? a_full : b_full;
  /* src0 keeps its layout when it has the output's rank; src1 follows it or broadcasts plain */
  dnnl_memory_desc_t m0, m1;
  if (s0->t.rank == r && !(os[0].rank == 0)) alma__dn_val_md(s0, &m0);
  else {
    ALMA_TRY(alma__dn_val_plain(p, s0, n));
    plain_md(&m0, r, dout, dt);
  }
  int s1_blocked = 0;
  if (s1_full && s1->t.rank == r) {
    m1 = m0;
  } else if ((s1_blocked = blocked_src1(&m0, r, dout, d1, dt, &m1))) {
    if (s1->t.rank != r) ALMA_TRY(alma__dn_val_plain(p, s1, n));
  } else {
    ALMA_TRY(alma__dn_val_plain(p, s1, n));
    plain_md(&m1, r, d1, dt);
  }
  dnnl_memory_desc_t key[2] = {m0, m1};
  int64_t ikey[8] = {swap};
  if (!key_match(pr, 2, key, ikey)) {
    prim_begin(pr, 2, key, ikey);
    dnnl_binary_desc_t bd;
    if (dnnl_binary_desc_init(&bd, d->alg, &m0, &m1, &m0) != dnnl_success)
      return prim_decline(pr, n, "binary descriptor rejected");
    pr->src_md = m0;
    pr->aux_md = m1;
    if (!prim_pd(p, pr, n, &bd, NULL, "binary")) return ALMA_OK;
    /* a broadcast the jit kernel does not take (Swin's window mask, [1,64,3,49,49] + [1,64,1,49,49])
     * lands on oneDNN's reference kernel, 50-100 ns an element: EAGER's loop is far faster */
    if (impl_is_ref(pr->impl)) return prim_decline(pr, n, "this broadcast only on a reference kernel (%s)", pr->impl);
    if (!prim_args(p, pr, n, 3, (dn_arg[]){{DNNL_ARG_SRC_0, &m0}, {DNNL_ARG_SRC_1, &m1}, {DNNL_ARG_DST, &m0}}))
      return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  void *p0 = s0->has_blk && dnnl_memory_desc_equal(&s0->bmd, &m0) ? s0->bbuf->ptr : s0->t.data;
  void *p1 = NULL;
  dn_buf *tmp1 = NULL;
  if ((s1_full || s1_blocked) && s1->t.rank == r) {
    ALMA_TRY(alma__dn_val_get(p, s1, &m1, 1, &p1, &tmp1, n));
  } else if (s1_blocked) { /* a lower rank broadcast ([C,1,1]): its plain data as the output's rank, reordered */
    dnnl_memory_desc_t pl;
    plain_md(&pl, r, d1, dt);
    if (!(tmp1 = alma__dn_alloc(p, dnnl_memory_desc_get_size(&m1)))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    alma_status rs = alma__dn_reorder(p, &pl, s1->t.data, &m1, tmp1->ptr, n);
    if (rs != ALMA_OK) {
      alma__dn_unref(p, tmp1);
      return rs;
    }
    p1 = tmp1->ptr;
  } else {
    p1 = s1->t.data;
  }
  dn_buf *db = s0 != s1 ? alma__dn_val_steal(s0, &m0) : NULL;
  if (!db && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&m0)))) {
    alma__dn_unref(p, tmp1);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  void *ptrs[DN_MAX_MEM] = {p0, p1, db->ptr};
  alma_status s = alma__dn_exec(p, pr, pr->p, ptrs, n);
  alma__dn_unref(p, tmp1);
  if (s != ALMA_OK) {
    alma__dn_unref(p, db);
    return s;
  }
  if (os[0].rank == 0 || s0->t.rank != r) { /* plain data of the output's own shape */
    dnnl_memory_desc_t pl;
    plain_md(&pl, os[0].rank, os[0].dims, dt);
    alma__dn_val_set(out[0], &os[0], &pl, db);
  } else {
    alma__dn_val_set(out[0], &os[0], &m0, db);
  }
  *done = 1;
  return ALMA_OK;
}

/* ---- batch normalization (inference) ------------------------------------------------------------- */
static alma_status run_bnorm(dn_plan *p, int idx, int fused, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                             int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = get_prim(d, alma__dn_slot(fused));
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (nin < 5) return ALMA_OK;
  dn_val *x = in[0];
  if (!is_fp(x) || x->t.rank < 2 || x->t.rank > 5 || os[0].dtype != x->t.dtype || !same_dims(&x->t, &os[0]))
    return ALMA_OK;
  int64_t C = x->t.dims[1];
  for (int k = 1; k < 5; k++) /* scale, shift, mean, var: any float type, given to oneDNN as float32 */
    if (!is_fp(in[k]) || alma__numel(in[k]->t.rank, in[k]->t.dims) != C) return ALMA_OK;
  float eps = alma__attr_f(n, "epsilon", 1e-5f);
  dnnl_memory_desc_t key[1];
  int64_t ikey[8] = {0};
  alma__dn_val_md(x, &key[0]);
  if (!key_match(pr, 1, key, ikey)) {
    prim_begin(pr, 1, key, ikey);
    unsigned flags = dnnl_use_global_stats | dnnl_use_scale | dnnl_use_shift;
    if (fused && find_post(d, fused, DP_NORM_RELU)) flags |= dnnl_fuse_norm_relu;
    dnnl_batch_normalization_desc_t bd;
    if (dnnl_batch_normalization_forward_desc_init(&bd, dnnl_forward_inference, &key[0], eps, flags) != dnnl_success)
      return prim_decline(pr, n, "batch normalization descriptor rejected");
    dnnl_memory_desc_t cmd;
    int64_t cd = C;
    alma__dn_plain_md(&cmd, 1, &cd);
    const dn_arg args[] = {{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_DST, &key[0]}, {DNNL_ARG_SCALE, &cmd},
                           {DNNL_ARG_SHIFT, &cmd},  {DNNL_ARG_MEAN, &cmd},   {DNNL_ARG_VARIANCE, &cmd}};
    if (!prim_pd(p, pr, n, &bd, NULL, "batch normalization") || !prim_args(p, pr, n, 6, args)) return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  void *prm[4];
  dn_buf *ptmp[4] = {NULL, NULL, NULL, NULL};
  alma_status s = ALMA_OK;
  for (int k = 1; k < 5 && s == ALMA_OK; k++) s = f32_of(p, in[k], n, &prm[k - 1], &ptmp[k - 1]);
  void *sp = x->has_blk ? x->bbuf->ptr : x->t.data;
  dn_buf *db = s == ALMA_OK ? alma__dn_val_steal(x, &pr->dst_md) : NULL;
  if (s == ALMA_OK && !db && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md))))
    s = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (s == ALMA_OK) {
    void *ptrs[DN_MAX_MEM] = {sp, db->ptr, prm[0], prm[1], prm[2], prm[3]};
    s = alma__dn_exec(p, pr, pr->p, ptrs, n);
  }
  for (int k = 0; k < 4; k++) alma__dn_unref(p, ptmp[k]);
  if (s != ALMA_OK) {
    alma__dn_unref(p, db);
    return s;
  }
  alma__dn_val_set(out[0], &os[0], &pr->dst_md, db);
  *done = 1;
  return ALMA_OK;
}

/* ---- layer normalization ------------------------------------------------------------------------- */
static alma_status run_lnorm(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0], *sc = nin > 1 ? in[1] : NULL, *sh = nin > 2 ? in[2] : NULL;
  if (!is_fp(x) || !is_fp(sc) || (sh && !is_fp(sh)) || x->t.rank < 1 || os[0].dtype != x->t.dtype ||
      !same_dims(&x->t, &os[0]))
    return ALMA_OK;
  int axis;
  if (alma__norm_axis(alma__attr_i(n, "axis", -1), x->t.rank, &axis) != ALMA_OK) {
    alma__error_clear();
    return ALMA_OK;
  }
  int64_t M = alma__numel(axis, x->t.dims), D = alma__numel(x->t.rank - axis, x->t.dims + axis);
  if (alma__numel(sc->t.rank, sc->t.dims) != D || (sh && alma__numel(sh->t.rank, sh->t.dims) != D)) return ALMA_OK;
  int64_t d2[2] = {M, D};
  dnnl_memory_desc_t key[1];
  int64_t ikey[8] = {sh != NULL};
  plain_md(&key[0], 2, d2, x->t.dtype);
  float eps = alma__attr_f(n, "epsilon", 1e-5f);
  if (!key_match(pr, 1, key, ikey)) {
    prim_begin(pr, 1, key, ikey);
    unsigned flags = dnnl_use_scale | (sh ? dnnl_use_shift : 0);
    dnnl_layer_normalization_desc_t ld;
    if (dnnl_layer_normalization_forward_desc_init(&ld, dnnl_forward_inference, &key[0], NULL, eps, flags) != dnnl_success)
      return prim_decline(pr, n, "layer normalization descriptor rejected");
    dnnl_memory_desc_t dmd;
    alma__dn_plain_md(&dmd, 1, &D);
    const dn_arg args[] = {{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_DST, &key[0]}, {DNNL_ARG_SCALE, &dmd}, {DNNL_ARG_SHIFT, &dmd}};
    if (!prim_pd(p, pr, n, &ld, NULL, "layer normalization") || !prim_args(p, pr, n, sh ? 4 : 3, args)) return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  ALMA_TRY(alma__dn_val_plain(p, x, n));
  void *scp = NULL, *shp = NULL;
  dn_buf *sct = NULL, *sht = NULL, *db = NULL; /* scale and shift: float32 for oneDNN */
  alma_status s = f32_of(p, sc, n, &scp, &sct);
  if (s == ALMA_OK && sh) s = f32_of(p, sh, n, &shp, &sht);
  dnnl_memory_desc_t pl;
  plain_md(&pl, x->t.rank, x->t.dims, x->t.dtype);
  void *sp = x->t.data;
  if (s == ALMA_OK && !(db = alma__dn_val_steal(x, &pl)) && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pl))))
    s = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (s == ALMA_OK) {
    void *ptrs[DN_MAX_MEM] = {sp, db->ptr, scp, shp};
    s = alma__dn_exec(p, pr, pr->p, ptrs, n);
  }
  alma__dn_unref(p, sct);
  alma__dn_unref(p, sht);
  if (s != ALMA_OK) {
    alma__dn_unref(p, db);
    return s;
  }
  alma__dn_val_set(out[0], &os[0], &pl, db);
  *done = 1;
  return ALMA_OK;
}

/* ---- softmax / log-softmax ----------------------------------------------------------------------- */
static alma_status run_softmax(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0];
  if (!is_fp(x) || x->t.rank < 1 || os[0].dtype != x->t.dtype || !same_dims(&x->t, &os[0])) return ALMA_OK;
  int r = x->t.rank, axis;
  int64_t dflt = n->since_version >= 13 ? -1 : 1;
  if (alma__norm_axis(alma__attr_i(n, "axis", dflt), r, &axis) != ALMA_OK) {
    alma__error_clear();
    return ALMA_OK;
  }
  dnnl_memory_desc_t key[1];
  int64_t ikey[8] = {axis};
  int sm_axis = axis;
  if (n->since_version < 13) { /* coerced to 2-D at axis */
    int64_t d2[2] = {alma__numel(axis, x->t.dims), alma__numel(r - axis, x->t.dims + axis)};
    plain_md(&key[0], 2, d2, x->t.dtype);
    sm_axis = 1;
  } else {
    plain_md(&key[0], r, x->t.dims, x->t.dtype);
  }
  if (!key_match(pr, 1, key, ikey)) {
    prim_begin(pr, 1, key, ikey);
    /* A strided axis (elements after it): oneDNN 2.x runs its reference kernel there, 50x EAGER's
     * vectorised one on [1,16,4,2100] over axis 1 (YOLOv8's DFL head, CPU time, one thread). */
    if (n->since_version >= 13 && alma__numel(r - axis - 1, x->t.dims + axis + 1) > 1)
      return prim_decline(pr, n, "softmax over a strided axis: EAGER's kernel is faster");
    dnnl_softmax_v2_desc_t sd;
    dnnl_alg_kind_t alg = is_op(n, "LogSoftmax") ? dnnl_softmax_log : dnnl_softmax_accurate;
    if (dnnl_softmax_v2_forward_desc_init(&sd, dnnl_forward_inference, alg, &key[0], &key[0], sm_axis) != dnnl_success)
      return prim_decline(pr, n, "softmax descriptor rejected");
    if (!prim_pd(p, pr, n, &sd, NULL, "softmax") ||
        !prim_args(p, pr, n, 2, (dn_arg[]){{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_DST, &key[0]}}))
      return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  ALMA_TRY(alma__dn_val_plain(p, x, n));
  dnnl_memory_desc_t pl;
  plain_md(&pl, r, x->t.dims, x->t.dtype);
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pl));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  void *ptrs[DN_MAX_MEM] = {x->t.data, db->ptr};
  alma_status s = alma__dn_exec(p, pr, pr->p, ptrs, n);
  if (s != ALMA_OK) {
    alma__dn_unref(p, db);
    return s;
  }
  alma__dn_val_set(out[0], &os[0], &pl, db);
  *done = 1;
  return ALMA_OK;
}

/* ---- MatMul and Gemm through the matmul primitive ------------------------------------------------ */
/* Constant weights that the matmul reads plain ([K, N] or its transpose) get a row stride of an odd
 * number of 64-byte lines: with an even number (N = 256, 512, 768, 1024, ... floats) gemm:jit's
 * packing of B maps the rows it reads together onto a few L1 sets. Measured on AVX2 with 2
 * threads: 256x512x512 1.03 -> 0.70 ms, 512x2048x512 8.4 -> 5.8 ms, 1024x256x256 0.81 -> 0.69 ms,
 * 128x256x768 0.30 -> 0.26 ms; 1024x256x1024 unchanged. Redoes pr->pd with the padded layout
 * (attr: a fresh one, consumed); keeps the first choice when oneDNN declines or picks another kernel. */
static void matmul_pad_weights(dn_plan *p, dn_prim *pr, const dnnl_memory_desc_t *amd, const dnnl_memory_desc_t *bias,
                               const dnnl_memory_desc_t *dmd, dnnl_primitive_attr_t attr) {
  const dnnl_memory_desc_t *w = dnnl_primitive_desc_query_md(pr->pd, dnnl_query_weights_md, 0);
  dnnl_memory_desc_t wmd;
  dnnl_primitive_desc_t pd = NULL;
  char impl[sizeof pr->impl];
  int ok = w && w->ndims == 2 && w->format_kind == dnnl_blocked && w->format_desc.blocking.inner_nblks == 0;
  if (ok) {
    wmd = *w;
    dnnl_dims_t st = {wmd.format_desc.blocking.strides[0], wmd.format_desc.blocking.strides[1]};
    int row = st[1] == 1 ? 0 : 1; /* the axis whose stride steps between rows */
    int64_t es = (int64_t)dnnl_data_type_size(wmd.data_type), bytes = st[row] * es, lines = (bytes + 63) / 64;
    ok = st[1 - row] == 1 && wmd.dims[1 - row] > 1 && bytes >= 256 && (bytes % 64 || lines % 2 == 0);
    if (ok) {
      st[row] = (lines | 1) * 64 / es;
      ok = dnnl_memory_desc_init_by_strides(&wmd, 2, wmd.dims, wmd.data_type, st) == dnnl_success;
    }
  }
  dnnl_matmul_desc_t md;
  if (ok && attr && dnnl_matmul_desc_init(&md, amd, &wmd, bias, dmd) == dnnl_success &&
      alma__dn_pd_create(p, &pd, &md, attr, impl, sizeof impl) == dnnl_success) {
    if (!strcmp(impl, pr->impl)) {
      dnnl_primitive_desc_destroy(pr->pd);
      pr->pd = pd;
      pd = NULL;
    }
  }
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (attr) dnnl_primitive_attr_destroy(attr);
}

/* Output buffer of a matmul: the fused residual (taken over or copied), else a new one. */
static alma_status mm_dst(dn_plan *p, dn_val *res, const alma_tensor *os, dn_buf **db, const alma_node *n) {
  dnnl_memory_desc_t pl;
  plain_md(&pl, os->rank, os->dims, os->dtype);
  if (res) return alma__dn_sum_dst(p, res, &pl, db, n);
  *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pl));
  return *db ? ALMA_OK : alma__errorf(ALMA_ERR_NOMEM, "out of memory");
}

static alma_status run_matmul(dn_plan *p, int idx, int fused, dn_val **in, const alma_tensor *os, dn_val **out,
                              int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = get_prim(d, alma__dn_slot(fused));
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *a = in[0], *b = in[1];
  alma_dtype dt = os[0].dtype; /* A, B and the output; a fused bias goes in as float32 */
  if (!dt_ok(dt) || !is_dt(a, dt) || !is_dt(b, dt) || a->t.rank < 1 || b->t.rank < 1) return ALMA_OK;
  int64_t ad[ALMA_MAX_RANK + 1], bd[ALMA_MAX_RANK + 1];
  int ra = a->t.rank, rb = b->t.rank;
  if (ra == 1) ad[0] = 1, ad[1] = a->t.dims[0], ra = 2;
  else memcpy(ad, a->t.dims, sizeof(int64_t) * (size_t)ra);
  if (rb == 1) bd[0] = b->t.dims[0], bd[1] = 1, rb = 2;
  else memcpy(bd, b->t.dims, sizeof(int64_t) * (size_t)rb);
  int64_t K = ad[ra - 1], N = bd[rb - 1];
  if (bd[rb - 2] != K) return ALMA_OK;
  const alma_tensor *bc = alma__dn_const(p->g, n->inputs[1]);
  int collapse = rb == 2; /* [.., M, K] x [K, N]: one 2-D product over all rows of A */
  int r = collapse ? 2 : (ra > rb ? ra : rb);
  int64_t sa[DNNL_MAX_NDIMS], sb[DNNL_MAX_NDIMS], sd[DNNL_MAX_NDIMS];
  if (collapse) {
    sa[0] = alma__numel(ra, ad) / (K ? K : 1);
    sa[1] = K;
    sb[0] = K;
    sb[1] = N;
    sd[0] = sa[0];
    sd[1] = N;
  } else {
    for (int i = 0; i < r; i++) {
      sa[i] = i < r - ra ? 1 : ad[i - (r - ra)];
      sb[i] = i < r - rb ? 1 : bd[i - (r - rb)];
      sd[i] = i < r - 2 ? (sa[i] > sb[i] ? sa[i] : sb[i]) : 0;
    }
    sd[r - 2] = sa[r - 2];
    sd[r - 1] = N;
  }
  if (alma__numel(r, sd) != alma__numel(os[0].rank, os[0].dims)) return ALMA_OK;
  /* fused bias (a constant Add operand) and residual */
  dn_val *res = NULL, *bias = NULL;
  int64_t biasd[DNNL_MAX_NDIMS];
  if (fused) {
    const dn_post *q = find_post(d, fused, DP_BIAS);
    if (q) {
      bias = &p->vals[q->other];
      if (!is_fp(bias) || bias->t.rank > os[0].rank) return ALMA_OK;
      int64_t ob[ALMA_MAX_RANK];
      ext_dims(&bias->t, os[0].rank, ob);
      for (int i = 0; i < os[0].rank; i++)
        if (ob[i] != 1 && ob[i] != os[0].dims[i]) return ALMA_OK;
      if (collapse) {
        int64_t nb = alma__numel(bias->t.rank, bias->t.dims);
        if (nb != N && nb != 1) return ALMA_OK;
        if (nb == N && N != 1 && bias->t.rank > 0 && bias->t.dims[bias->t.rank - 1] != N) return ALMA_OK;
        biasd[0] = 1;
        biasd[1] = nb;
      } else {
        int off = r - os[0].rank; /* bias over the output's rank, extended like it */
        for (int i = 0; i < r; i++) biasd[i] = i < off ? 1 : ob[i - off];
        if (ra == 1 && rb > 1) return ALMA_OK; /* the dropped M axis would shift the bias */
        for (int i = 0; i < r; i++)
          if (biasd[i] != 1 && biasd[i] != sd[i]) return ALMA_OK;
      }
    }
    if (find_post(d, fused, DP_SUM) && !(res = sum_residual(p, d, fused, &os[0]))) return ALMA_OK;
  }
  dnnl_memory_desc_t amd, bmd_plain, dmd, biasmd;
  plain_md(&amd, r, sa, dt);
  plain_md(&bmd_plain, r, sb, dt);
  plain_md(&dmd, r, sd, dt);
  memset(&biasmd, 0, sizeof biasmd);
  if (bias) alma__dn_plain_md(&biasmd, r, biasd);
  dnnl_memory_desc_t key[4] = {amd, bmd_plain, dmd, biasmd};
  int64_t ikey[8] = {bc != NULL, collapse};
  if (!key_match(pr, 4, key, ikey)) {
    prim_begin(pr, 4, key, ikey);
    dnnl_memory_desc_t wmd = bmd_plain;
    if (bc && collapse) {
      dnnl_dims_t wd = {K, N};
      dnnl_memory_desc_init_by_tag(&wmd, 2, wd, ddt(dt), dnnl_format_tag_any);
    }
    dnnl_matmul_desc_t md;
    if (dnnl_matmul_desc_init(&md, &amd, &wmd, bias ? &biasmd : NULL, &dmd) != dnnl_success)
      return prim_decline(pr, n, "matmul descriptor rejected");
    if (!prim_pd(p, pr, n, &md, post_attr(d, fused, 1.0f, 0, 0), "matmul")) return ALMA_OK;
    if (bc && collapse) matmul_pad_weights(p, pr, &amd, bias ? &biasmd : NULL, &dmd, post_attr(d, fused, 1.0f, 0, 0));
    if (fused && impl_is_ref(pr->impl)) return prim_decline(pr, n, "post-ops only on a reference kernel (%s)", pr->impl);
    dn_arg args[4] = {{DNNL_ARG_SRC, &amd}, {DNNL_ARG_WEIGHTS, NULL}};
    int na = 2;
    if (bias) args[na++] = (dn_arg){DNNL_ARG_BIAS, &biasmd};
    args[na++] = (dn_arg){DNNL_ARG_DST, &dmd};
    if (!prim_args(p, pr, n, na, args)) return ALMA_OK;
    if (bc && !dnnl_memory_desc_equal(&pr->wei_md, &bmd_plain)) ALMA_TRY(cache_weights(p, pr, &bmd_plain, bc->data, n));
  }
  if (pr->declined) return ALMA_OK;
  ALMA_TRY(alma__dn_val_plain(p, a, n));
  void *wp = pr->wei;
  if (!wp) {
    ALMA_TRY(alma__dn_val_plain(p, b, n));
    wp = b->t.data;
  }
  void *biasp = NULL;
  dn_buf *biast = NULL, *db = NULL;
  if (bias) ALMA_TRY(f32_of(p, bias, n, &biasp, &biast));
  alma_status s = mm_dst(p, res, &os[0], &db, n);
  if (s == ALMA_OK) {
    void *ptrs[DN_MAX_MEM] = {a->t.data, wp};
    int k = 2;
    if (bias) ptrs[k++] = biasp;
    ptrs[k++] = db->ptr;
    s = alma__dn_exec(p, pr, pr->p, ptrs, n);
  }
  alma__dn_unref(p, biast);
  if (s != ALMA_OK) {
    alma__dn_unref(p, db);
    return s;
  }
  dnnl_memory_desc_t pl;
  plain_md(&pl, os[0].rank, os[0].dims, dt);
  alma__dn_val_set(out[0], &os[0], &pl, db);
  *done = 1;
  return ALMA_OK;
}

static alma_status run_gemm(dn_plan *p, int idx, int fused, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                            int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = get_prim(d, alma__dn_slot(fused));
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *a = in[0], *b = in[1], *c = nin > 2 ? in[2] : NULL;
  alma_dtype dt = os[0].dtype; /* A, B, the output and C; C as a bias goes in as float32 */
  if (!dt_ok(dt) || !is_dt(a, dt) || !is_dt(b, dt) || (c && !is_dt(c, dt)) || a->t.rank != 2 || b->t.rank != 2 ||
      os[0].rank != 2)
    return ALMA_OK;
  int ta = alma__attr_i(n, "transA", 0) != 0, tb = alma__attr_i(n, "transB", 0) != 0;
  float alpha = alma__attr_f(n, "alpha", 1.0f), beta = alma__attr_f(n, "beta", 1.0f);
  int64_t M = ta ? a->t.dims[1] : a->t.dims[0], K = ta ? a->t.dims[0] : a->t.dims[1];
  int64_t N = tb ? b->t.dims[0] : b->t.dims[1], Kb = tb ? b->t.dims[1] : b->t.dims[0];
  if (K != Kb || os[0].dims[0] != M || os[0].dims[1] != N) return ALMA_OK;
  if (c && beta == 0.0f) c = NULL;
  int64_t cd[2] = {1, 1};
  if (c) {
    if (c->t.rank > 2) return ALMA_OK;
    if (c->t.rank == 2) cd[0] = c->t.dims[0], cd[1] = c->t.dims[1];
    else if (c->t.rank == 1) cd[1] = c->t.dims[0];
    if ((cd[0] != 1 && cd[0] != M) || (cd[1] != 1 && cd[1] != N)) return ALMA_OK;
  }
  int as_bias = c && alpha == 1.0f && beta == 1.0f;
  int prefill = c && !as_bias; /* dst = alpha A B + beta C through a sum post-op over C */
  dn_val *res = NULL;
  if (fused && find_post(d, fused, DP_SUM) && !(res = sum_residual(p, d, fused, &os[0]))) return ALMA_OK;
  if (res && prefill) return ALMA_OK;
  const alma_tensor *bc = alma__dn_const(p->g, n->inputs[1]);
  dnnl_dims_t dA = {M, K}, sA = {ta ? 1 : K, ta ? M : 1}, dB = {K, N}, sB = {tb ? 1 : N, tb ? K : 1};
  dnnl_memory_desc_t amd, bmd, dmd, cmd;
  dnnl_memory_desc_init_by_strides(&amd, 2, dA, ddt(dt), sA);
  dnnl_memory_desc_init_by_strides(&bmd, 2, dB, ddt(dt), sB);
  plain_md(&dmd, 2, (int64_t[]){M, N}, dt);
  memset(&cmd, 0, sizeof cmd);
  if (as_bias) alma__dn_plain_md(&cmd, 2, cd);
  dnnl_memory_desc_t key[4] = {amd, bmd, dmd, cmd};
  int64_t ikey[8] = {bc != NULL, prefill, cd[0], cd[1]};
  if (!key_match(pr, 4, key, ikey)) {
    prim_begin(pr, 4, key, ikey);
    dnnl_memory_desc_t wmd = bmd;
    if (bc) dnnl_memory_desc_init_by_tag(&wmd, 2, dB, ddt(dt), dnnl_format_tag_any);
    dnnl_matmul_desc_t md;
    if (dnnl_matmul_desc_init(&md, &amd, &wmd, as_bias ? &cmd : NULL, &dmd) != dnnl_success)
      return prim_decline(pr, n, "matmul descriptor rejected");
    if (!prim_pd(p, pr, n, &md, post_attr(d, fused, as_bias ? 1.0f : alpha, prefill, beta), "matmul")) return ALMA_OK;
    if (bc) matmul_pad_weights(p, pr, &amd, as_bias ? &cmd : NULL, &dmd, post_attr(d, fused, as_bias ? 1.0f : alpha, prefill, beta));
    if (fused && impl_is_ref(pr->impl)) return prim_decline(pr, n, "post-ops only on a reference kernel (%s)", pr->impl);
    dn_arg args[4] = {{DNNL_ARG_SRC, &amd}, {DNNL_ARG_WEIGHTS, NULL}};
    int na = 2;
    if (as_bias) args[na++] = (dn_arg){DNNL_ARG_BIAS, &cmd};
    args[na++] = (dn_arg){DNNL_ARG_DST, &dmd};
    if (!prim_args(p, pr, n, na, args)) return ALMA_OK;
    if (bc) ALMA_TRY(cache_weights(p, pr, &bmd, bc->data, n));
  }
  if (pr->declined) return ALMA_OK;
  ALMA_TRY(alma__dn_val_plain(p, a, n));
  void *wp = pr->wei;
  dn_buf *wtmp = NULL;
  if (!wp) {
    ALMA_TRY(alma__dn_val_plain(p, b, n));
    wp = b->t.data;
    if (!dnnl_memory_desc_equal(&pr->wei_md, &bmd)) { /* never expected: weights of a runtime B stay strided */
      if (!(wtmp = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->wei_md)))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      alma_status s = alma__dn_reorder(p, &bmd, wp, &pr->wei_md, wtmp->ptr, n);
      if (s != ALMA_OK) {
        alma__dn_unref(p, wtmp);
        return s;
      }
      wp = wtmp->ptr;
    }
  }
  void *cp = NULL;
  dn_buf *ctmp = NULL, *db = NULL;
  alma_status s = ALMA_OK;
  if (c) s = as_bias ? f32_of(p, c, n, &cp, &ctmp) : alma__dn_val_plain(p, c, n);
  if (s == ALMA_OK) s = mm_dst(p, res, &os[0], &db, n);
  if (s == ALMA_OK && prefill) { /* C broadcast into the output (same dtype), the sum post-op scales it */
    size_t es = alma_dtype_size(dt);
    char *y = db->ptr;
    const char *cv = c->t.data;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++)
        memcpy(y + (size_t)(i * N + j) * es, cv + (size_t)((cd[0] == 1 ? 0 : i) * cd[1] + (cd[1] == 1 ? 0 : j)) * es, es);
  }
  if (s == ALMA_OK) {
    void *ptrs[DN_MAX_MEM] = {a->t.data, wp};
    int k = 2;
    if (as_bias) ptrs[k++] = cp;
    ptrs[k++] = db->ptr;
    s = alma__dn_exec(p, pr, pr->p, ptrs, n);
  }
  alma__dn_unref(p, wtmp);
  alma__dn_unref(p, ctmp);
  if (s != ALMA_OK) {
    alma__dn_unref(p, db);
    return s;
  }
  alma__dn_val_set(out[0], &os[0], &dmd, db);
  *done = 1;
  return ALMA_OK;
}

/* ---- views: the output shares the input's plain data --------------------------------------------- */
/* ---- strided views (lazy Slice / Reshape / Transpose outputs read by Attention) ------------------ */
/* v holds only a strided, non-blocked layout of some buffer (a lazy view's output). */
static int is_strided_view(const dn_val *v) {
  return v->has_blk && !v->has_plain && v->bmd.format_kind == dnnl_blocked &&
         v->bmd.format_desc.blocking.inner_nblks == 0;
}

/* v's plain data, when it may become the buffer of a strided view: its own pooled buffer, from
 * its start. */
static int viewable_plain(const dn_val *v) {
  return v->has_plain && !v->has_blk && v->pbuf && v->pbuf->ptr == v->t.data && v->t.dtype == F32;
}

/* y becomes a view of b (one more reference) in layout md. */
static void set_view(dn_plan *p, int idx, dn_val *y, const alma_tensor *shape, const dnnl_memory_desc_t *md,
                     dn_buf *b) {
  b->refs++;
  alma__dn_val_set(y, shape, md, b);
  p->nodes[idx].n_view++;
}

int alma__dn_reshape_strides(int r, const int64_t *od, const int64_t *ost, int nr, const int64_t *nd, int64_t *nst) {
  int j = nr - 1;
  int64_t base = r > 0 ? ost[r - 1] : 1, old_n = 1, new_n = 1;
  for (int i = r - 1; i >= 0; i--) {
    old_n *= od[i];
    /* a run of old dims ends where the next one out is not contiguous with it */
    if (i == 0 || (od[i - 1] != 1 && ost[i - 1] != old_n * base)) {
      while (j >= 0 && (new_n < old_n || nd[j] == 1)) {
        nst[j] = new_n * base;
        new_n *= nd[j];
        j--;
      }
      if (new_n != old_n) return 0;
      if (i > 0) {
        base = ost[i - 1];
        old_n = new_n = 1;
      }
    }
  }
  for (; j >= 0; j--) { /* leading unit dims */
    if (nd[j] != 1) return 0;
    nst[j] = 1;
  }
  return 1;
}

static alma_status run_view(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_val *x = in[0], *y = out[0];
  if (!x || !x->live || !y || os[0].dtype != x->t.dtype ||
      alma__numel(os[0].rank, os[0].dims) != alma__numel(x->t.rank, x->t.dims))
    return ALMA_OK;
  if (p->nodes[idx].lazy_view && is_strided_view(x) && os[0].rank <= DNNL_MAX_NDIMS &&
      alma__numel(os[0].rank, os[0].dims) > 0) {
    int64_t od[DNNL_MAX_NDIMS], ost[DNNL_MAX_NDIMS], nst[DNNL_MAX_NDIMS];
    dnnl_dims_t nd;
    for (int i = 0; i < x->bmd.ndims; i++) od[i] = x->bmd.dims[i], ost[i] = x->bmd.format_desc.blocking.strides[i];
    for (int i = 0; i < os[0].rank; i++) nd[i] = os[0].dims[i];
    if (os[0].rank > 0 && alma__dn_reshape_strides(x->bmd.ndims, od, ost, os[0].rank, os[0].dims, nst)) {
      dnnl_memory_desc_t md;
      dnnl_memory_desc_init_by_strides(&md, os[0].rank, nd, x->bmd.data_type, nst);
      md.offset0 = x->bmd.offset0;
      set_view(p, idx, y, &os[0], &md, x->bbuf);
      *done = 1;
      return ALMA_OK;
    }
  }
  ALMA_TRY(alma__dn_val_plain(p, x, n));
  memset(&y->t, 0, sizeof y->t);
  y->t.dtype = os[0].dtype;
  y->t.rank = os[0].rank;
  memcpy(y->t.dims, os[0].dims, sizeof(int64_t) * (size_t)os[0].rank);
  y->t.data = x->t.data;
  y->t.nbytes = x->t.nbytes;
  y->pbuf = x->pbuf;
  if (y->pbuf) y->pbuf->refs++;
  y->has_plain = 1;
  y->live = 1;
  *done = 1;
  return ALMA_OK;
}

/* ---- alma.Attention: softmax(scale Q K^T + mask) V ------------------------------------------------ */
/* v's own strided view (a lazy Transpose's, Slice's or Reshape's output) when it has one of rank r
 * that a gemm can read (unit stride on one of the last two axes), as its layout (offset dropped:
 * view_or_plain adds it to the pointer); 0 otherwise. */
static int strided_view(const dn_val *v, int r, dnnl_memory_desc_t *md) {
  if (!is_strided_view(v) || v->t.rank != r || v->bmd.ndims != r || v->bmd.data_type != dnnl_f32) return 0;
  const dnnl_dims_t *st = &v->bmd.format_desc.blocking.strides;
  if ((*st)[r - 1] != 1 && (*st)[r - 2] != 1) return 0;
  *md = v->bmd;
  md->offset0 = 0; /* view_or_plain passes the data from the offset on */
  return 1;
}

/* Whether a strided V ([.., Sk, D], rows along Sk) has a row stride that is a multiple of 2 KiB:
 * gemm:jit then reads it about 1.4x (2 KiB) to 2x (4 KiB and up) slower than from a plain copy, the
 * rows falling into the same few L1 sets (measured on AVX2 with [32, 128, 64] at stride 2048,
 * batch-8 multi-head attention's V: 0.74 ms against 0.37 ms plain; 768 or 2064 stay at plain's
 * speed). Such a V is copied instead (a 0.05 ms reorder). */
static int aliasing_rows(const dnnl_memory_desc_t *md) {
  const dnnl_dims_t *st = &md->format_desc.blocking.strides;
  int r = md->ndims;
  return (*st)[r - 1] == 1 && (*st)[r - 2] * (dnnl_dim_t)sizeof(float) % 2048 == 0;
}

/* The data of v: its strided view's (strided, from strided_view) or its plain data. */
static alma_status view_or_plain(dn_plan *p, dn_val *v, int strided, const alma_node *n, void **ptr) {
  if (strided) {
    *ptr = (char *)v->bbuf->ptr + v->bmd.offset0 * (dnnl_dim_t)sizeof(float);
    return ALMA_OK;
  }
  ALMA_TRY(alma__dn_val_plain(p, v, n));
  *ptr = v->t.data;
  return ALMA_OK;
}

/* md with its last two axes swapped (K [.., Sk, D] read as [.., D, Sk]). */
static void md_swap_last2(dnnl_memory_desc_t *out, const dnnl_memory_desc_t *in) {
  dnnl_memory_desc_t src = *in; /* out may be in */
  int pm[DNNL_MAX_NDIMS], r = src.ndims;
  for (int i = 0; i < r; i++) pm[i] = i;
  pm[r - 2] = r - 1;
  pm[r - 1] = r - 2;
  dnnl_memory_desc_permute_axes(out, &src, pm);
}

/* A Transpose's perm attribute (default: reversed axes) as pm[input axis] = output axis for a rank
 * r input; 0 when invalid. perm_out (optional) gets perm[output axis] = input axis. */
static int transpose_perm(const alma_node *n, int r, int *pm, int *perm_out) {
  const int64_t *perm = NULL;
  int np = alma__attr_ints(n, "perm", &perm), seen[DNNL_MAX_NDIMS] = {0};
  if ((np && np != r) || r > DNNL_MAX_NDIMS) return 0;
  for (int k = 0; k < r; k++) { /* out axis k reads input axis perm[k] */
    int64_t a = np ? perm[k] : r - 1 - k;
    if (a < 0 || a >= r || seen[a]++) return 0;
    pm[a] = k;
    if (perm_out) perm_out[k] = (int)a;
  }
  return 1;
}

/* Creates Attention's primitives for these layouts: Q K^T (scaled, the mask as a binary post-op
 * when a real kernel takes it, else a binary primitive after), softmax, then (.) V. Declines pr
 * when oneDNN has none. */
static alma_status attn_build(dn_plan *p, dn_prim *pr, dn_prim *sm, dn_prim *mm2, dn_prim *bin, const alma_node *n,
                              int r, float scale, int has_mask, const dnnl_memory_desc_t *qmd,
                              const dnnl_memory_desc_t *kmd, const dnnl_memory_desc_t *vmd,
                              const dnnl_memory_desc_t *smd, const dnnl_memory_desc_t *mmd,
                              const dnnl_memory_desc_t *omd) {
  dnnl_matmul_desc_t m1;
  if (dnnl_matmul_desc_init(&m1, qmd, kmd, NULL, smd) != dnnl_success) return prim_decline(pr, n, "matmul descriptor rejected");
  for (int try_post = has_mask ? 1 : 0; try_post >= 0; try_post--) {
    dnnl_primitive_attr_t attr = new_attr();
    dnnl_primitive_attr_set_output_scales(attr, 1, 0, &scale);
    if (try_post) {
      dnnl_post_ops_t po = NULL;
      dnnl_post_ops_create(&po);
      dnnl_post_ops_append_binary(po, dnnl_binary_add, mmd);
      dnnl_primitive_attr_set_post_ops(attr, po);
      dnnl_post_ops_destroy(po);
    }
    dnnl_status_t s = alma__dn_pd_create(p, &pr->pd, &m1, attr, pr->impl, sizeof pr->impl);
    dnnl_primitive_attr_destroy(attr);
    if (s == dnnl_success && try_post && impl_is_ref(pr->impl)) {
      dnnl_primitive_desc_destroy(pr->pd);
      pr->pd = NULL;
      continue;
    }
    if (s != dnnl_success) {
      if (try_post) continue;
      return prim_decline(pr, n, "no matmul implementation (status %d)", (int)s);
    }
    pr->flags = try_post; /* 1: mask applied by the post-op */
    break;
  }
  const dn_arg args[] = {{DNNL_ARG_SRC, qmd},
                         {DNNL_ARG_WEIGHTS, kmd},
                         {DNNL_ARG_DST, smd},
                         {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, mmd}};
  if (!prim_args(p, pr, n, pr->flags ? 4 : 3, args)) return ALMA_OK;
  if (has_mask && !pr->flags) {
    dnnl_binary_desc_t bd;
    dnnl_primitive_attr_t a = new_attr();
    dnnl_status_t s = dnnl_binary_desc_init(&bd, dnnl_binary_add, smd, mmd, smd);
    if (s == dnnl_success) s = alma__dn_pd_create(p, &bin->pd, &bd, a, bin->impl, sizeof bin->impl);
    dnnl_primitive_attr_destroy(a);
    if (s != dnnl_success ||
        !prim_mems(p, bin, 3, (dn_arg[]){{DNNL_ARG_SRC_0, smd}, {DNNL_ARG_SRC_1, mmd}, {DNNL_ARG_DST, smd}}))
      return prim_decline(pr, n, "mask add not available");
  }
  dnnl_softmax_v2_desc_t sdsc;
  dnnl_primitive_attr_t a = new_attr();
  dnnl_status_t s = dnnl_softmax_v2_forward_desc_init(&sdsc, dnnl_forward_inference, dnnl_softmax_accurate, smd, smd, r - 1);
  if (s == dnnl_success) s = alma__dn_pd_create(p, &sm->pd, &sdsc, a, sm->impl, sizeof sm->impl);
  dnnl_primitive_attr_destroy(a);
  if (s != dnnl_success || !prim_mems(p, sm, 2, (dn_arg[]){{DNNL_ARG_SRC, smd}, {DNNL_ARG_DST, smd}}))
    return prim_decline(pr, n, "softmax not available");
  dnnl_matmul_desc_t m2;
  a = new_attr();
  s = dnnl_matmul_desc_init(&m2, smd, vmd, NULL, omd);
  if (s == dnnl_success) s = alma__dn_pd_create(p, &mm2->pd, &m2, a, mm2->impl, sizeof mm2->impl);
  dnnl_primitive_attr_destroy(a);
  if (s != dnnl_success || !prim_mems(p, mm2, 3, (dn_arg[]){{DNNL_ARG_SRC, smd}, {DNNL_ARG_WEIGHTS, vmd}, {DNNL_ARG_DST, omd}}))
    return prim_decline(pr, n, "second matmul not available");
  return ALMA_OK;
}

/* Whether x[0..n) is -inf throughout: a query row every key of which is masked. */
static int row_closed(const float *x, int64_t n) {
  for (int64_t j = 0; j < n; j++)
    if (x[j] != -INFINITY) return 0;
  return 1;
}

/* Strides (elements) of a rank-r layout: a strided view's own, or plain dims'. */
static void md_strides(const dnnl_memory_desc_t *md, int strided, int r, const int64_t *dims, int64_t *st) {
  if (strided) {
    for (int i = 0; i < r; i++) st[i] = md->format_desc.blocking.strides[i];
    return;
  }
  int64_t acc = 1;
  for (int i = r - 1; i >= 0; i--) st[i] = acc, acc *= dims[i];
}

/* Element offset of batch entry b (over the scores' batch dims bd[0..nb)) in a tensor of dims d and
 * strides st: its dims of 1 broadcast. */
static int64_t batch_offset(int64_t b, int nb, const int64_t *bd, const int64_t *d, const int64_t *st) {
  int64_t off = 0;
  for (int i = nb - 1; i >= 0; i--) {
    int64_t ix = b % bd[i];
    b /= bd[i];
    if (d[i] != 1) off += ix * st[i];
  }
  return off;
}

/* Attention by blocks of query rows on oneDNN's sgemm (dnnl_attn.c): causal attention, whose masked
 * key blocks are skipped, and decoding's few query rows. Q, K, V are read in place when they are
 * strided views with a contiguous last dim; the output goes through omd (a fused Transpose's axes).
 * Returns with *done 0 when the layouts do not fit (the caller then has the primitives' path or
 * EAGER). */
static alma_status attn_native(dn_plan *p, const alma_node *n, dn_val *q, dn_val *k, dn_val *v, dn_val *m, int r,
                               const int64_t *qd, const int64_t *kd, const int64_t *vd, const int64_t *sd,
                               const int64_t *mdims, int kt, float scale, int causal, int64_t coff, int onnx,
                               const dnnl_memory_desc_t *omd, const dnnl_memory_desc_t *tmd, const alma_tensor *ts,
                               dn_val *y, int *done) {
  dnnl_memory_desc_t qmd, kmd, vmd;
  int sq = strided_view(q, r, &qmd), sk = strided_view(k, r, &kmd), sv = strided_view(v, r, &vmd) && !aliasing_rows(&vmd);
  int64_t qs[ALMA_MAX_RANK], ks[ALMA_MAX_RANK], vs[ALMA_MAX_RANK], ms[ALMA_MAX_RANK], ys[ALMA_MAX_RANK];
  md_strides(&qmd, sq, r, qd, qs);
  md_strides(&kmd, sk, r, kd, ks);
  md_strides(&vmd, sv, r, vd, vs);
  /* a strided view whose last dim is not contiguous is read from a plain copy */
  if (sq && qs[r - 1] != 1) sq = 0, md_strides(&qmd, 0, r, qd, qs);
  if (sk && ks[r - 1] != 1) sk = 0, md_strides(&kmd, 0, r, kd, ks);
  if (sv && vs[r - 1] != 1) sv = 0, md_strides(&vmd, 0, r, vd, vs);
  for (int i = 0; i < r; i++) ys[i] = omd->format_desc.blocking.strides[i];
  if (omd->format_kind != dnnl_blocked || omd->format_desc.blocking.inner_nblks || ys[r - 1] != 1) return ALMA_OK;
  if (m) md_strides(NULL, 0, r, mdims, ms);
  dn_attn_geo a = {.Sq = sd[r - 2], .Sk = sd[r - 1], .D = qd[r - 1], .Dv = vd[r - 1], .kt = kt, .causal = causal,
                   .zero_masked = onnx, .coff = coff, .scale = scale, .q_ld = qs[r - 2], .k_ld = ks[r - 2],
                   .v_ld = vs[r - 2], .y_ld = ys[r - 2]};
  a.batch = alma__numel(r - 2, sd);
  if (m) {
    a.m_row = mdims[r - 2] == a.Sq && a.Sq > 1 ? ms[r - 2] : 0;
    a.m_col = mdims[r - 1] == a.Sk && a.Sk > 1 ? 1 : 0;
  }
  alma__dn_attn_plan(&a, p->threads);
  size_t offs = sizeof(int64_t) * (size_t)a.batch * 5, scr = alma__dn_attn_scratch(&a, p->threads);
  void *qp, *kp, *vp;
  ALMA_TRY(view_or_plain(p, q, sq, n, &qp));
  ALMA_TRY(view_or_plain(p, k, sk, n, &kp));
  ALMA_TRY(view_or_plain(p, v, sv, n, &vp));
  if (m) ALMA_TRY(alma__dn_val_plain(p, m, n));
  dn_buf *wb = alma__dn_alloc(p, offs + scr);
  dn_buf *ob = wb ? alma__dn_alloc(p, dnnl_memory_desc_get_size(tmd)) : NULL;
  if (!ob) {
    alma__dn_unref(p, wb);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  int64_t *o = wb->ptr;
  for (int64_t b = 0; b < a.batch; b++) {
    o[b] = batch_offset(b, r - 2, sd, qd, qs);
    o[a.batch + b] = batch_offset(b, r - 2, sd, kd, ks);
    o[2 * a.batch + b] = batch_offset(b, r - 2, sd, vd, vs);
    o[3 * a.batch + b] = m ? batch_offset(b, r - 2, sd, mdims, ms) : 0;
    o[4 * a.batch + b] = batch_offset(b, r - 2, sd, sd, ys);
  }
  a.q_off = o, a.k_off = o + a.batch, a.v_off = o + 2 * a.batch, a.m_off = o + 3 * a.batch, a.y_off = o + 4 * a.batch;
  a.q = qp, a.k = kp, a.v = vp, a.mask = m ? m->t.data : NULL, a.y = ob->ptr;
  alma_status st = alma__dn_attn(&a, p->threads, (float *)((char *)wb->ptr + offs))
                       ? ALMA_OK
                       : alma__op_error(n, ALMA_ERR_INTERNAL, "oneDNN's sgemm failed");
  alma__dn_unref(p, wb);
  return alma__dn_finish(p, st, ob, y, ts, tmd, done);
}

/* Q, K and V are read in their own strided layout when they are lazy Transposes' views (the
 * head-splitting transposes of multi-head attention cost no copy then); fused (a group with a
 * DP_PERM post-op, see plan_fuse_perm) writes the output through the Transpose after it, so that
 * the Transpose's output is produced directly. oneDNN's gemm takes such strides; if it ever
 * declines them, the node falls back to plain layouts for good (attn_plain). */
static alma_status run_attn(dn_plan *p, int idx, int fused, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                            int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_val *q = in[0], *k = nin > 1 ? in[1] : NULL, *v = nin > 2 ? in[2] : NULL, *m = nin > 3 ? in[3] : NULL;
  if (!is_f32(q) || !is_f32(k) || !is_f32(v) || (m && !is_f32(m)) || os[0].dtype != F32) return ALMA_OK;
  int r = q->t.rank;
  if (k->t.rank > r) r = k->t.rank;
  if (v->t.rank > r) r = v->t.rank;
  if (q->t.rank < 2 || k->t.rank < 2 || v->t.rank < 2 || os[0].rank != r || (m && m->t.rank > r)) return ALMA_OK;
  int kt = alma__attr_i(n, "k_transposed", 0) != 0;
  int64_t qd[ALMA_MAX_RANK], kd[ALMA_MAX_RANK], vd[ALMA_MAX_RANK], sd[ALMA_MAX_RANK], md_[ALMA_MAX_RANK];
  ext_dims(&q->t, r, qd);
  ext_dims(&k->t, r, kd);
  ext_dims(&v->t, r, vd);
  int64_t Sq = qd[r - 2], D = qd[r - 1], Sk = kt ? kd[r - 1] : kd[r - 2];
  if ((kt ? kd[r - 2] : kd[r - 1]) != D || vd[r - 2] != Sk) return ALMA_OK;
  for (int i = 0; i < r - 2; i++) sd[i] = qd[i] > kd[i] ? qd[i] : kd[i];
  sd[r - 2] = Sq;
  sd[r - 1] = Sk;
  int onnx = alma__attr_i(n, "onnx_mask", 0) != 0;
  if (m) {
    ext_dims(&m->t, r, md_);
    for (int i = 0; i < r; i++)
      if (md_[i] != 1 && md_[i] != sd[i]) return ALMA_OK;
    /* ONNX's rules pad a shorter mask with -inf rather than broadcast it: the EAGER kernel does that */
    if (onnx && md_[r - 1] != Sk) return ALMA_OK;
  }
  /* the output through the Transpose after it (fused): its plain layout seen in the output's axes */
  alma_tensor ts = os[0];
  dnnl_memory_desc_t omd, tmd;
  const dn_post *pp = fused ? find_post(d, fused, DP_PERM) : NULL;
  if (fused && (!pp || d->attn_plain)) return ALMA_OK;
  if (pp) {
    int pm[DNNL_MAX_NDIMS], perm[DNNL_MAX_NDIMS];
    if (!transpose_perm(&p->g->nodes[pp->node], r, pm, perm)) return ALMA_OK;
    for (int i = 0; i < r; i++) ts.dims[i] = os[0].dims[perm[i]];
    alma__dn_plain_md(&tmd, r, ts.dims);
    dnnl_memory_desc_permute_axes(&omd, &tmd, perm);
  } else {
    alma__dn_plain_md(&omd, os[0].rank, os[0].dims);
    tmd = omd;
  }
  const alma_attr *sa = alma__node_attr(n, "scale");
  float scale = sa ? alma__attr_f(n, "scale", 1.0f) : (float)(1.0 / sqrt((double)(D > 0 ? D : 1)));
  int causal;
  int64_t coff;
  const alma_tensor *tin[5] = {&q->t, &k->t, &v->t, m ? &m->t : NULL, nin > 4 && in[4] ? &in[4]->t : NULL};
  ALMA_TRY(alma__attn_causal_offset(n, tin, nin < 5 ? nin : 5, Sq, Sk, &causal, &coff));
  if (causal) /* only the blocked kernel applies a causal frontier; EAGER when the layouts do not fit */
    return attn_native(p, n, q, k, v, m, r, qd, kd, vd, sd, m ? md_ : NULL, kt, scale, causal, coff, onnx, &omd, &tmd,
                       &ts, out[0], done);
  dnnl_memory_desc_t qmd, kmd, vmd, smd, mmd;
  int sq = 0, sk = 0, sv = 0;
  dn_prim *pr = get_prim(d, DN_PRIM_SINGLE), *sm = get_prim(d, DN_PRIM_AUX0), *mm2 = get_prim(d, DN_PRIM_AUX1),
          *bin = get_prim(d, DN_PRIM_AUX2);
  if (!pr || !sm || !mm2 || !bin) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (;;) {
    if (!d->attn_plain) {
      sq = strided_view(q, r, &qmd);
      sk = strided_view(k, r, &kmd);
      sv = strided_view(v, r, &vmd) && !aliasing_rows(&vmd);
    }
    if (!sq) alma__dn_plain_md(&qmd, r, qd);
    if (!sk) alma__dn_plain_md(&kmd, r, kd);
    if (!kt) md_swap_last2(&kmd, &kmd);
    if (!sv) alma__dn_plain_md(&vmd, r, vd);
    alma__dn_plain_md(&smd, r, sd);
    memset(&mmd, 0, sizeof mmd);
    if (m) alma__dn_plain_md(&mmd, r, md_);
    dnnl_memory_desc_t key[5] = {qmd, kmd, vmd, mmd, omd};
    int64_t ikey[8] = {kt};
    memcpy(&ikey[1], &scale, sizeof scale);
    if (key_match(pr, 5, key, ikey)) break;
    prim_begin(pr, 5, key, ikey);
    alma__dn_prim_free(sm);
    alma__dn_prim_free(mm2);
    alma__dn_prim_free(bin);
    ALMA_TRY(attn_build(p, pr, sm, mm2, bin, n, r, scale, m != NULL, &qmd, &kmd, &vmd, &smd, &mmd, &omd));
    if (!pr->declined || d->attn_plain || !(sq || sk || sv || pp)) break;
    d->attn_plain = 1; /* strided forms declined: plain from now on, no fused output transpose */
    sq = sk = sv = 0;
    if (pp) return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  void *qp, *kp, *vp;
  ALMA_TRY(view_or_plain(p, q, sq, n, &qp));
  ALMA_TRY(view_or_plain(p, k, sk, n, &kp));
  ALMA_TRY(view_or_plain(p, v, sv, n, &vp));
  if (m) ALMA_TRY(alma__dn_val_plain(p, m, n));
  dn_buf *sb = alma__dn_alloc(p, dnnl_memory_desc_get_size(&smd));
  dn_buf *ob = sb ? alma__dn_alloc(p, dnnl_memory_desc_get_size(&tmd)) : NULL;
  if (!ob) {
    alma__dn_unref(p, sb);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  void *p1[DN_MAX_MEM] = {qp, kp, sb->ptr, m ? m->t.data : NULL};
  alma_status st = alma__dn_exec(p, pr, pr->p, p1, n);
  if (st == ALMA_OK && m && !pr->flags) {
    void *pb[DN_MAX_MEM] = {sb->ptr, m->t.data, sb->ptr};
    st = alma__dn_exec(p, bin, bin->p, pb, n);
  }
  /* onnx_mask: a query whose keys are all masked gets zeros (softmax would give NaN). Such a row
   * needs a fully -inf mask row, so the scores are scanned only when the (smaller) mask has one. */
  uint8_t *zero_rows = NULL;
  int64_t rows = Sk > 0 ? (int64_t)(dnnl_memory_desc_get_size(&smd) / sizeof(float)) / Sk : 0;
  int closed_mask_row = 0;
  if (st == ALMA_OK && onnx && m && Sk > 0)
    for (int64_t i = 0, mn = alma_tensor_numel(&m->t); !closed_mask_row && i + Sk <= mn; i += Sk)
      closed_mask_row = row_closed((const float *)m->t.data + i, Sk);
  if (closed_mask_row) {
    if (!(zero_rows = calloc((size_t)rows, 1))) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; zero_rows && i < rows; i++) zero_rows[i] = (uint8_t)row_closed((const float *)sb->ptr + i * Sk, Sk);
  }
  if (st == ALMA_OK) {
    void *ps[DN_MAX_MEM] = {sb->ptr, sb->ptr};
    st = alma__dn_exec(p, sm, sm->p, ps, n);
  }
  if (zero_rows) {
    float *pr_ = sb->ptr;
    for (int64_t i = 0; i < rows; i++)
      if (zero_rows[i]) memset(pr_ + i * Sk, 0, sizeof(float) * (size_t)Sk);
    free(zero_rows);
  }
  if (st == ALMA_OK) {
    void *p2[DN_MAX_MEM] = {sb->ptr, vp, ob->ptr};
    st = alma__dn_exec(p, mm2, mm2->p, p2, n);
  }
  alma__dn_unref(p, sb);
  return alma__dn_finish(p, st, ob, out[0], &ts, &tmd, done);
}

/* ---- Transpose: one reorder, reading the input (blocked or plain) through permuted axes ------------ */
/* Whether the permutation keeps the order of the axes longer than 1 (it only moves unit axes: the
 * data's order is unchanged, e.g. [128, 1, 256] -> [1, 128, 256]). */
static int moves_unit_axes_only(const alma_tensor *x, const int *perm) {
  int last = -1;
  for (int k = 0; k < x->rank; k++) {
    if (x->dims[perm[k]] == 1) continue;
    if (perm[k] < last) return 0;
    last = perm[k];
  }
  return 1;
}

static alma_status run_transpose(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_val *x = in[0];
  int r = x ? x->t.rank : 0;
  if (!is_fp(x) || r < 2 || os[0].rank != r || os[0].dtype != x->t.dtype) return ALMA_OK;
  int pm[DNNL_MAX_NDIMS], perm[DNNL_MAX_NDIMS];
  if (!transpose_perm(n, r, pm, perm)) return ALMA_OK;
  if (x->has_plain && moves_unit_axes_only(&x->t, perm)) {
    ALMA_TRY(run_view(p, idx, in, os, out, done));
    p->nodes[idx].n_view += *done;
    return ALMA_OK;
  }
  dnnl_memory_desc_t xmd, view, dmd;
  alma__dn_val_md(x, &xmd);
  if (dnnl_memory_desc_permute_axes(&view, &xmd, pm) != dnnl_success) return ALMA_OK;
  if (p->nodes[idx].lazy_view && (viewable_plain(x) || (is_strided_view(x) && x->t.dtype == F32))) {
    /* the output is x's data seen through permuted strides: no copy */
    set_view(p, idx, out[0], &os[0], &view, x->has_blk ? x->bbuf : x->pbuf);
    *done = 1;
    return ALMA_OK;
  }
  plain_md(&dmd, r, os[0].dims, x->t.dtype);
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&dmd));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  alma_status st = alma__dn_reorder(p, &view, x->has_blk ? x->bbuf->ptr : x->t.data, &dmd, db->ptr, n);
  return alma__dn_finish(p, st, db, out[0], &os[0], &dmd, done);
}

/* ---- Reduce*: the reduction primitive over plain data ----------------------------------------------- */
static alma_status run_reduce(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0];
  int r = x ? x->t.rank : 0;
  if (!is_fp(x) || r < 1 || os[0].dtype != x->t.dtype) return ALMA_OK;
  /* axes: an input from opset 18 (ReduceSum: 13), else the attribute */
  int axes_input = n->since_version >= 18 || (is_op(n, "ReduceSum") && n->since_version >= 13);
  int64_t axes[ALMA_MAX_RANK];
  int na = 0;
  if (axes_input) {
    dn_val *a = nin > 1 ? in[1] : NULL;
    if (a) {
      if (!a->live || a->t.dtype != ALMA_DTYPE_INT64 || a->t.rank != 1 || a->t.dims[0] > r) return ALMA_OK;
      ALMA_TRY(alma__dn_val_plain(p, a, n));
      na = (int)a->t.dims[0];
      if (na) memcpy(axes, a->t.data, sizeof(int64_t) * (size_t)na);
    }
    if (na == 0 && alma__attr_i(n, "noop_with_empty_axes", 0)) return ALMA_OK;
  } else {
    const int64_t *aa = NULL;
    na = alma__attr_ints(n, "axes", &aa);
    if (na > r) return ALMA_OK;
    if (na) memcpy(axes, aa, sizeof(int64_t) * (size_t)na);
  }
  int64_t rd[ALMA_MAX_RANK];
  memcpy(rd, x->t.dims, sizeof(int64_t) * (size_t)r);
  for (int k = 0; k < r && na == 0; k++) rd[k] = 1;
  for (int k = 0; k < na; k++) {
    int64_t a = axes[k] < 0 ? axes[k] + r : axes[k];
    if (a < 0 || a >= r) return ALMA_OK;
    rd[a] = 1;
  }
  if (alma__numel(r, rd) != alma__numel(os[0].rank, os[0].dims)) return ALMA_OK;
  dnnl_memory_desc_t key[2];
  int64_t ikey[8] = {0};
  plain_md(&key[0], r, x->t.dims, x->t.dtype);
  plain_md(&key[1], r, rd, x->t.dtype);
  if (!key_match(pr, 2, key, ikey)) {
    prim_begin(pr, 2, key, ikey);
    float pw = is_op(n, "ReduceL1") ? 1.0f : 2.0f;
    dnnl_reduction_desc_t rdsc;
    if (dnnl_reduction_desc_init(&rdsc, d->alg, &key[0], &key[1], pw, 0.0f) != dnnl_success)
      return prim_decline(pr, n, "reduction descriptor rejected");
    if (!prim_pd(p, pr, n, &rdsc, NULL, "reduction") ||
        !prim_args(p, pr, n, 2, (dn_arg[]){{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_DST, &key[1]}}))
      return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  ALMA_TRY(alma__dn_val_plain(p, x, n));
  dnnl_memory_desc_t omd;
  plain_md(&omd, os[0].rank, os[0].dims, x->t.dtype);
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&omd));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  void *ptrs[DN_MAX_MEM] = {x->t.data, db->ptr};
  alma_status st = alma__dn_exec(p, pr, pr->p, ptrs, n);
  return alma__dn_finish(p, st, db, out[0], &os[0], &omd, done);
}

/* ---- Concat ----------------------------------------------------------------------------------------- */
static alma_status run_concat(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  int r = os[0].rank, axis;
  if (nin < 1 || nin > DN_MAX_KEY || nin > DN_MAX_MEM - 2 || r < 1 || !dt_ok(os[0].dtype)) return ALMA_OK;
  for (int k = 0; k < nin; k++)
    if (!is_dt(in[k], os[0].dtype) || in[k]->t.rank != r) return ALMA_OK;
  if (alma__norm_axis(alma__attr_i(n, "axis", 0), r, &axis) != ALMA_OK) {
    alma__error_clear();
    return ALMA_OK;
  }
  dnnl_memory_desc_t key[DN_MAX_KEY];
  int64_t ikey[8] = {axis};
  for (int k = 0; k < nin; k++) alma__dn_val_md(in[k], &key[k]);
  if (!key_match(pr, nin, key, ikey)) {
    prim_begin(pr, nin, key, ikey);
    dnnl_status_t s = dnnl_concat_primitive_desc_create(&pr->pd, NULL, nin, axis, key, NULL, p->eng);
    if (s != dnnl_success) return prim_decline(pr, n, "no concat implementation (status %d)", (int)s);
    const char *impl = NULL;
    dnnl_primitive_desc_query(pr->pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(pr->impl, sizeof pr->impl, "%s", impl ? impl : "?");
    dn_arg args[DN_MAX_KEY + 1];
    for (int k = 0; k < nin; k++) args[k] = (dn_arg){DNNL_ARG_MULTIPLE_SRC + k, &key[k]};
    args[nin] = (dn_arg){DNNL_ARG_DST, NULL};
    if (!prim_args(p, pr, n, nin + 1, args)) return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  void *ptrs[DN_MAX_MEM];
  for (int k = 0; k < nin; k++) ptrs[k] = in[k]->has_blk ? in[k]->bbuf->ptr : in[k]->t.data;
  ptrs[nin] = db->ptr;
  alma_status st = alma__dn_exec(p, pr, pr->p, ptrs, n);
  return alma__dn_finish(p, st, db, out[0], &os[0], &pr->dst_md, done);
}

/* ---- Slice (unit steps) and Split: reorders from sub-memory views of the input ----------------------- */
/* Integer list from input i (int32/int64, any producer) or, before opset 10, attribute name. */
static int int_list(dn_plan *p, const alma_node *n, dn_val **in, int nin, int i, const char *attr, int64_t *v, int max,
                    int *count) {
  *count = 0;
  if (n->since_version < 10 && is_op(n, "Slice")) {
    const int64_t *a = NULL;
    int c = alma__attr_ints(n, attr, &a);
    if (c > max) return 0;
    for (int k = 0; k < c; k++) v[k] = a[k];
    *count = c;
    return 1;
  }
  dn_val *x = i < nin ? in[i] : NULL;
  if (!x) return 1;
  if (!x->live || (x->t.dtype != ALMA_DTYPE_INT64 && x->t.dtype != ALMA_DTYPE_INT32) || x->t.rank != 1 ||
      x->t.dims[0] > max || !x->has_plain)
    return 0;
  for (int k = 0; k < x->t.dims[0]; k++) v[k] = alma__get_i64(x->t.data, x->t.dtype, k);
  *count = (int)x->t.dims[0];
  return 1;
}

/* One output: the sub-tensor of x at offsets with dims of os, reordered to plain. */
static alma_status slice_one(dn_plan *p, int idx, const alma_node *n, dn_val *x, const alma_tensor *os,
                             const int64_t *offs, dn_val *y) {
  int r = x->t.rank;
  dnnl_dims_t sd, so;
  for (int i = 0; i < r; i++) sd[i] = os->dims[i], so[i] = offs[i];
  dnnl_memory_desc_t xmd, sub, dmd;
  if (p->nodes[idx].lazy_view && viewable_plain(x)) { /* a sub-memory view of x: no copy */
    plain_md(&xmd, r, x->t.dims, x->t.dtype);
    if (dnnl_memory_desc_init_submemory(&sub, &xmd, sd, so) == dnnl_success) {
      set_view(p, idx, y, os, &sub, x->pbuf);
      return ALMA_OK;
    }
  }
  alma__dn_val_md(x, &xmd);
  if (dnnl_memory_desc_init_submemory(&sub, &xmd, sd, so) != dnnl_success) {
    /* a blocked layout the view cannot cut: take the plain copy */
    ALMA_TRY(alma__dn_val_plain(p, x, n));
    plain_md(&xmd, r, x->t.dims, x->t.dtype);
    if (dnnl_memory_desc_init_submemory(&sub, &xmd, sd, so) != dnnl_success)
      return alma__op_error(n, ALMA_ERR_INTERNAL, "oneDNN sub-memory view failed");
  }
  plain_md(&dmd, r, os->dims, x->t.dtype);
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&dmd));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  int blk = x->has_blk && dnnl_memory_desc_equal(&xmd, &x->bmd);
  alma_status st = alma__dn_reorder(p, &sub, blk ? x->bbuf->ptr : x->t.data, &dmd, db->ptr, n);
  if (st != ALMA_OK) {
    alma__dn_unref(p, db);
    return st;
  }
  alma__dn_val_set(y, os, &dmd, db);
  return ALMA_OK;
}

static alma_status run_slice(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int nout,
                             int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_val *x = in[0];
  int r = x ? x->t.rank : 0;
  if (!is_fp(x) || r < 1) return ALMA_OK;
  for (int k = 0; k < nout; k++)
    if (out[k] && (os[k].rank != r || os[k].dtype != x->t.dtype)) return ALMA_OK;
  int64_t offs[ALMA_MAX_RANK] = {0};
  if (is_op(n, "Split")) {
    int axis;
    if (alma__norm_axis(alma__attr_i(n, "axis", 0), r, &axis) != ALMA_OK) {
      alma__error_clear();
      return ALMA_OK;
    }
    int64_t at = 0;
    for (int k = 0; k < nout; k++) at += os[k].dims[axis];
    if (at != x->t.dims[axis]) return ALMA_OK;
    for (int k = 0; k < nout; k++) {
      if (out[k]) ALMA_TRY(slice_one(p, idx, n, x, &os[k], offs, out[k]));
      offs[axis] += os[k].dims[axis];
    }
    *done = 1;
    return ALMA_OK;
  }
  int64_t st[ALMA_MAX_RANK], en[ALMA_MAX_RANK], ax[ALMA_MAX_RANK], sp[ALMA_MAX_RANK];
  int ns, ne, na, nsp;
  if (!int_list(p, n, in, nin, 1, "starts", st, r, &ns) || !int_list(p, n, in, nin, 2, "ends", en, r, &ne) ||
      !int_list(p, n, in, nin, 3, "axes", ax, r, &na) || !int_list(p, n, in, nin, 4, "steps", sp, r, &nsp))
    return ALMA_OK;
  if (ns != ne || (na && na != ns) || (nsp && nsp != ns)) return ALMA_OK;
  int64_t want[ALMA_MAX_RANK];
  memcpy(want, x->t.dims, sizeof(int64_t) * (size_t)r);
  for (int k = 0; k < ns; k++) {
    int64_t a = na ? ax[k] : k, dim;
    if (a < 0) a += r;
    if (a < 0 || a >= r || (nsp && sp[k] != 1)) return ALMA_OK;
    dim = x->t.dims[a];
    int64_t b = st[k] < 0 ? st[k] + dim : st[k], e = en[k] < 0 ? en[k] + dim : en[k];
    b = b < 0 ? 0 : b > dim ? dim : b;
    e = e < 0 ? 0 : e > dim ? dim : e;
    offs[a] = b;
    want[a] = e > b ? e - b : 0;
  }
  for (int i = 0; i < r; i++)
    if (want[i] != os[0].dims[i]) return ALMA_OK; /* not what the shape rules say: let EAGER decide */
  ALMA_TRY(slice_one(p, idx, n, x, &os[0], offs, out[0]));
  *done = 1;
  return ALMA_OK;
}

/* ---- PRelu -------------------------------------------------------------------------------------------- */
static alma_status run_prelu(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0], *sl = in[1];
  if (!is_fp(x) || !is_dt(sl, x->t.dtype) || os[0].dtype != x->t.dtype || x->t.rank < 1 || sl->t.rank > x->t.rank ||
      !same_dims(&x->t, &os[0]))
    return ALMA_OK;
  int64_t sd[ALMA_MAX_RANK];
  ext_dims(&sl->t, x->t.rank, sd);
  for (int i = 0; i < x->t.rank; i++)
    if (sd[i] != 1 && sd[i] != x->t.dims[i]) return ALMA_OK;
  dnnl_memory_desc_t key[2];
  int64_t ikey[8] = {0};
  alma__dn_val_md(x, &key[0]);
  plain_md(&key[1], x->t.rank, sd, sl->t.dtype);
  if (!key_match(pr, 2, key, ikey)) {
    prim_begin(pr, 2, key, ikey);
    dnnl_prelu_desc_t pd;
    if (dnnl_prelu_forward_desc_init(&pd, dnnl_forward_inference, &key[0], &key[1]) != dnnl_success)
      return prim_decline(pr, n, "prelu descriptor rejected");
    const dn_arg args[] = {{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_WEIGHTS, &key[1]}, {DNNL_ARG_DST, &key[0]}};
    if (!prim_pd(p, pr, n, &pd, NULL, "prelu") || !prim_args(p, pr, n, 3, args)) return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  ALMA_TRY(alma__dn_val_plain(p, sl, n));
  void *sp = x->has_blk ? x->bbuf->ptr : x->t.data;
  dn_buf *db = alma__dn_val_steal(x, &pr->dst_md);
  if (!db && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md))))
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  void *ptrs[DN_MAX_MEM] = {sp, sl->t.data, db->ptr};
  alma_status st = alma__dn_exec(p, pr, pr->p, ptrs, n);
  return alma__dn_finish(p, st, db, out[0], &os[0], &pr->dst_md, done);
}

/* ---- Cast float32 <-> bfloat16 ----------------------------------------------------------------------- */
/* An elementwise conversion of the value's buffer in whatever layout it has: oneDNN memory
 * descriptors count strides in elements, so the same descriptor with the other data type describes
 * the converted buffer, and blocked values stay blocked for the next primitive (the padding of a
 * blocked layout holds zeros, which convert to zeros), rounding to nearest even as ONNX's Cast
 * (EAGER) does. */
static void f32_to_bf16(const float *s, uint16_t *d, size_t cnt) {
  for (size_t i = 0; i < cnt; i++) d[i] = alma__f32_to_bf16(s[i]);
}

static void bf16_to_f32(const uint16_t *s, uint32_t *d, size_t cnt) {
  for (size_t i = 0; i < cnt; i++) d[i] = (uint32_t)s[i] << 16;
}

static alma_status run_cast(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done) {
  (void)idx;
  dn_val *x = in[0];
  if (!is_fp(x) || !dt_ok(os[0].dtype) || !same_dims(&x->t, &os[0])) return ALMA_OK;
  dnnl_memory_desc_t xmd, ymd;
  alma__dn_val_md(x, &xmd); /* blocked when it has that form: what the next primitive likely takes */
  ymd = xmd;
  ymd.data_type = ddt(os[0].dtype);
  const void *sp = x->has_blk ? x->bbuf->ptr : x->t.data;
  size_t cnt = dnnl_memory_desc_get_size(&xmd) / alma_dtype_size(x->t.dtype);
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&ymd));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (x->t.dtype == os[0].dtype) memcpy(db->ptr, sp, dnnl_memory_desc_get_size(&xmd));
  else if (x->t.dtype == F32) f32_to_bf16(sp, db->ptr, cnt);
  else bf16_to_f32(sp, db->ptr, cnt);
  alma__dn_val_set(out[0], &os[0], &ymd, db);
  *done = 1;
  return ALMA_OK;
}

/* ---- Pad, constant mode: the output filled with the value, the input reordered into a view ---------- */
/* A dense layout like ref's (plain, or blocked like nChw8c: the dims nested in ref's stride order,
 * the same inner blocks) for dims of the same rank; 0 when ref is not a blocked-kind layout. */
static int md_like(dnnl_memory_desc_t *md, const dnnl_memory_desc_t *ref, const int64_t *dims) {
  if (ref->format_kind != dnnl_blocked || ref->extra.flags) return 0;
  const dnnl_blocking_desc_t *bk = &ref->format_desc.blocking;
  int r = ref->ndims, order[DNNL_MAX_NDIMS];
  dnnl_dim_t blk[DNNL_MAX_NDIMS], inner = 1;
  for (int i = 0; i < r; i++) blk[i] = 1, order[i] = i;
  for (int k = 0; k < bk->inner_nblks; k++) {
    blk[bk->inner_idxs[k]] *= bk->inner_blks[k];
    inner *= bk->inner_blks[k];
  }
  for (int i = 1; i < r; i++) /* outermost first: larger stride, then lower axis (size-1 dims tie) */
    for (int j = i; j > 0 && bk->strides[order[j]] > bk->strides[order[j - 1]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  *md = *ref;
  md->offset0 = 0;
  for (int i = 0; i < r; i++) {
    md->dims[i] = dims[i];
    md->padded_dims[i] = (dims[i] + blk[i] - 1) / blk[i] * blk[i];
    md->padded_offsets[i] = 0;
  }
  dnnl_dim_t st = inner;
  for (int k = r - 1; k >= 0; k--) {
    md->format_desc.blocking.strides[order[k]] = st;
    st *= md->padded_dims[order[k]] / blk[order[k]];
  }
  return 1;
}

static alma_status run_pad(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_val *x = in[0];
  int r = x ? x->t.rank : 0;
  if (!is_fp(x) || r < 1 || r > DNNL_MAX_NDIMS || os[0].rank != r || os[0].dtype != x->t.dtype) return ALMA_OK;
  alma_dtype dt = x->t.dtype;
  size_t es = alma_dtype_size(dt);
  int64_t b[ALMA_MAX_RANK] = {0}, e[ALMA_MAX_RANK] = {0};
  unsigned char val[8] = {0}; /* the value in x's dtype; ONNX's default is 0 */
  if (n->since_version < 11) {
    const int64_t *pa = NULL;
    if (alma__attr_ints(n, n->since_version < 2 ? "paddings" : "pads", &pa) != 2 * r) return ALMA_OK;
    for (int k = 0; k < r; k++) b[k] = pa[k], e[k] = pa[r + k];
    alma__set_f64(val, dt, 0, alma__attr_f(n, "value", 0.0f)); /* as EAGER converts it */
  } else {
    int64_t pads[2 * ALMA_MAX_RANK], ax[ALMA_MAX_RANK];
    int np, na = r, seen[ALMA_MAX_RANK] = {0};
    if (nin < 2 || !in[1] || !int_list(p, n, in, nin, 1, NULL, pads, 2 * ALMA_MAX_RANK, &np)) return ALMA_OK;
    if (nin > 3 && in[3]) {
      if (n->since_version < 18 || !int_list(p, n, in, nin, 3, NULL, ax, r, &na)) return ALMA_OK;
    } else {
      for (int k = 0; k < r; k++) ax[k] = k;
    }
    if (np != 2 * na) return ALMA_OK;
    for (int k = 0; k < na; k++) {
      int64_t a = ax[k] < 0 ? ax[k] + r : ax[k];
      if (a < 0 || a >= r || seen[a]++) return ALMA_OK;
      b[a] = pads[k];
      e[a] = pads[na + k];
    }
    if (nin > 2 && in[2]) {
      dn_val *cv = in[2];
      int64_t cnt = alma__numel(cv->t.rank, cv->t.dims);
      if (!is_dt(cv, dt) || cnt > 1) return ALMA_OK;
      if (cnt == 1) {
        ALMA_TRY(alma__dn_val_plain(p, cv, n));
        memcpy(val, cv->t.data, es);
      }
    }
  }
  for (int k = 0; k < r; k++)
    if (x->t.dims[k] + b[k] + e[k] != os[0].dims[k]) return ALMA_OK; /* not what the shape rules say */
  int zero = 1;
  for (size_t i = 0; i < es; i++) zero &= val[i] == 0;
  /* a blocked input padded on other axes than the blocked channels keeps its layout for the next
   * primitive; the channel blocks' padding must stay zero, so a non-zero value needs full blocks */
  dnnl_memory_desc_t xmd, omd;
  alma__dn_val_md(x, &xmd);
  int blk = x->has_blk && r > 1 && b[1] == 0 && e[1] == 0 && md_like(&omd, &x->bmd, os[0].dims);
  for (int i = 0; blk && !zero && i < r; i++) blk = omd.padded_dims[i] == omd.dims[i];
  if (!blk) plain_md(&omd, r, os[0].dims, dt);
  size_t osz = dnnl_memory_desc_get_size(&omd);
  dn_buf *db = alma__dn_alloc(p, osz);
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (zero) {
    memset(db->ptr, 0, osz);
  } else {
    for (size_t i = 0; i < osz / es; i++) memcpy((char *)db->ptr + i * es, val, es);
  }
  /* the part of x that survives (negative pads crop) goes to offset max(begin, 0) */
  dnnl_dims_t cd, so, dof;
  int any = 1;
  for (int k = 0; k < r; k++) {
    int64_t cb = b[k] < 0 ? -b[k] : 0, ce = e[k] < 0 ? -e[k] : 0;
    cd[k] = x->t.dims[k] - cb - ce;
    so[k] = cb;
    dof[k] = b[k] > 0 ? b[k] : 0;
    any &= cd[k] > 0;
  }
  alma_status st = ALMA_OK;
  if (any) {
    dnnl_memory_desc_t ssub, dsub;
    void *sp = x->has_blk ? x->bbuf->ptr : x->t.data;
    if (dnnl_memory_desc_init_submemory(&ssub, &xmd, cd, so) != dnnl_success) {
      /* a crop the blocked layout cannot view: take the plain copy */
      if ((st = alma__dn_val_plain(p, x, n)) == ALMA_OK) {
        plain_md(&xmd, r, x->t.dims, dt);
        sp = x->t.data;
        if (dnnl_memory_desc_init_submemory(&ssub, &xmd, cd, so) != dnnl_success)
          st = alma__op_error(n, ALMA_ERR_INTERNAL, "oneDNN sub-memory view failed");
      }
    }
    if (st == ALMA_OK && dnnl_memory_desc_init_submemory(&dsub, &omd, cd, dof) != dnnl_success)
      st = alma__op_error(n, ALMA_ERR_INTERNAL, "oneDNN sub-memory view failed");
    if (st == ALMA_OK) st = alma__dn_reorder(p, &ssub, sp, &dsub, db->ptr, n);
  }
  return alma__dn_finish(p, st, db, out[0], &os[0], &omd, done);
}

/* ---- LRN across channels ------------------------------------------------------------------------------ */
/* oneDNN: dst = src * (k + alpha / n * sum over c-(n-1)/2 .. c+(n-1)/2 of src^2)^-beta, which is
 * ONNX's formula (alpha divided by size, bias as k) for an odd size n; even sizes stay on EAGER. */
static alma_status run_lrn(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0];
  if (!is_fp(x) || x->t.rank < 2 || x->t.rank > 5 || os[0].dtype != x->t.dtype || !same_dims(&x->t, &os[0]))
    return ALMA_OK;
  int64_t size = alma__attr_i(n, "size", 0);
  if (size < 1 || size % 2 == 0) return ALMA_OK;
  dnnl_memory_desc_t key[1];
  int64_t ikey[8] = {0};
  alma__dn_val_md(x, &key[0]);
  if (!key_match(pr, 1, key, ikey)) {
    prim_begin(pr, 1, key, ikey);
    dnnl_lrn_desc_t ld;
    if (dnnl_lrn_forward_desc_init(&ld, dnnl_forward_inference, dnnl_lrn_across_channels, &key[0], size,
                                   alma__attr_f(n, "alpha", 1e-4f), alma__attr_f(n, "beta", 0.75f),
                                   alma__attr_f(n, "bias", 1.0f)) != dnnl_success)
      return prim_decline(pr, n, "lrn descriptor rejected");
    if (!prim_pd(p, pr, n, &ld, NULL, "lrn") ||
        !prim_args(p, pr, n, 2, (dn_arg[]){{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_DST, NULL}}))
      return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  void *ptrs[DN_MAX_MEM] = {x->has_blk ? x->bbuf->ptr : x->t.data, db->ptr};
  alma_status st = alma__dn_exec(p, pr, pr->p, ptrs, n);
  return alma__dn_finish(p, st, db, out[0], &os[0], &pr->dst_md, done);
}

/* ---- InstanceNormalization ------------------------------------------------------------------------------ */
/* Plain [N, C, spatial...] data read as [1, N*C, S, 1]: batch normalization computing its own
 * statistics normalizes each (n, c) row over S, which is instance normalization; the per-channel
 * scale and B are repeated N times as that view's per-channel scale and shift. (4-D: oneDNN has
 * only its reference kernel for a 3-D plain view, 20x slower.) */
static alma_status run_inorm(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0], *sc = nin > 1 ? in[1] : NULL, *bi = nin > 2 ? in[2] : NULL;
  if (!is_fp(x) || !is_fp(sc) || !is_fp(bi) || x->t.rank < 3 || os[0].dtype != x->t.dtype || !same_dims(&x->t, &os[0]))
    return ALMA_OK;
  int64_t N = x->t.dims[0], C = x->t.dims[1], NC = N * C, S = alma__numel(x->t.rank - 2, x->t.dims + 2);
  if (alma__numel(sc->t.rank, sc->t.dims) != C || alma__numel(bi->t.rank, bi->t.dims) != C) return ALMA_OK;
  float eps = alma__attr_f(n, "epsilon", 1e-5f);
  int64_t vd[4] = {1, NC, S, 1};
  dnnl_memory_desc_t key[1];
  int64_t ikey[8] = {0};
  memcpy(&ikey[0], &eps, sizeof eps);
  plain_md(&key[0], 4, vd, x->t.dtype);
  if (!key_match(pr, 1, key, ikey)) {
    prim_begin(pr, 1, key, ikey);
    dnnl_batch_normalization_desc_t bd;
    if (dnnl_batch_normalization_forward_desc_init(&bd, dnnl_forward_inference, &key[0], eps,
                                                   dnnl_use_scale | dnnl_use_shift) != dnnl_success)
      return prim_decline(pr, n, "batch normalization descriptor rejected");
    if (!prim_pd(p, pr, n, &bd, NULL, "batch normalization")) return ALMA_OK;
    /* statistics memories, when this implementation wants them (it computes them) */
    const dnnl_memory_desc_t *mmd = dnnl_primitive_desc_query_md(pr->pd, dnnl_query_exec_arg_md, DNNL_ARG_MEAN);
    pr->flags = mmd && mmd->ndims > 0;
    dnnl_memory_desc_t cmd;
    alma__dn_plain_md(&cmd, 1, &NC);
    const dn_arg args[] = {{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_DST, &key[0]}, {DNNL_ARG_SCALE, &cmd},
                           {DNNL_ARG_SHIFT, &cmd},  {DNNL_ARG_MEAN, &cmd},   {DNNL_ARG_VARIANCE, &cmd}};
    if (!prim_args(p, pr, n, pr->flags ? 6 : 4, args)) return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  ALMA_TRY(alma__dn_val_plain(p, x, n));
  ALMA_TRY(alma__dn_val_plain(p, sc, n));
  ALMA_TRY(alma__dn_val_plain(p, bi, n));
  dn_buf *prm = alma__dn_alloc(p, sizeof(float) * (size_t)NC * (pr->flags ? 4 : 2));
  if (!prm) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  float *scale = prm->ptr, *shift = scale + NC;
  for (int64_t c = 0; c < C; c++) {
    float s = (float)alma__get_f64(sc->t.data, sc->t.dtype, c), t = (float)alma__get_f64(bi->t.data, bi->t.dtype, c);
    for (int64_t k = 0; k < N; k++) scale[k * C + c] = s, shift[k * C + c] = t;
  }
  void *sp = x->t.data;
  dnnl_memory_desc_t pl;
  plain_md(&pl, x->t.rank, x->t.dims, x->t.dtype);
  dn_buf *db = alma__dn_val_steal(x, &pl); /* in place when x dies here */
  if (!db && !(db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pl)))) {
    alma__dn_unref(p, prm);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  void *ptrs[DN_MAX_MEM] = {sp, db->ptr, scale, shift, shift + NC, shift + 2 * NC};
  alma_status st = alma__dn_exec(p, pr, pr->p, ptrs, n);
  alma__dn_unref(p, prm);
  return alma__dn_finish(p, st, db, out[0], &os[0], &pl, done);
}

/* ---- Resize / Upsample through the resampling primitive ----------------------------------------------- */
/* oneDNN maps output coordinate o of an axis resized from `in` to `out` to s = (o + 0.5) in / out
 * - 0.5 (in float): nearest takes round(s), linear the two samples around s (clamped). ONNX's map
 * depends on the mode, the scale given (not out / in) and the rounding rule. Rather than listing
 * the combinations that agree, the node runs on oneDNN only when, for its shapes and scales, every
 * output coordinate of every axis reads the same samples with the same weights (within float
 * rounding) both ways; N and C must map to themselves. */
enum { RS_HALF_PIXEL, RS_HALF_PIXEL_SYM, RS_PYTORCH, RS_ALIGN, RS_ASYM, RS_TF_NN, RS_UPSAMPLE };
enum { RS_ROUND_FLOOR, RS_ROUND_CEIL, RS_FLOOR, RS_CEIL };

typedef struct {
  int linear, ctm;
  int nmode[ALMA_MAX_RANK];
  double scale[ALMA_MAX_RANK];
} rs_onnx;

/* The node's mode, coordinate rule and per-axis scales (the forms of Upsample 7/9, Resize 10 and
 * 11+, scales or sizes, axes); 0 when they are not readable here (EAGER decides then). */
static int rs_read(const alma_node *n, dn_val **in, int nin, const alma_tensor *x, const alma_tensor *os, rs_onnx *q) {
  int r = x->rank, v = n->since_version, ups = is_op(n, "Upsample");
  const char *m = alma__attr_s(n, "mode", "nearest");
  q->linear = strcmp(m, "nearest") != 0;
  for (int i = 0; i < r; i++) q->scale[i] = 1.0, q->nmode[i] = RS_FLOOR;
  if (ups && v < 9) {
    const float *fs = NULL;
    if (alma__attr_floats(n, "scales", &fs) != r) return 0;
    for (int i = 0; i < r; i++) q->scale[i] = fs[i];
    q->ctm = RS_UPSAMPLE;
    return 1;
  }
  /* the scales (or, from 11, sizes) input; an empty one counts as absent */
  int si = ups || v < 11 ? 1 : 2;
  dn_val *sc = si < nin && in[si] && alma__numel(in[si]->t.rank, in[si]->t.dims) > 0 ? in[si] : NULL;
  dn_val *sz = !ups && v >= 11 && nin > 3 && in[3] && alma__numel(in[3]->t.rank, in[3]->t.dims) > 0 ? in[3] : NULL;
  if (!sc == !sz || (sc && (!sc->has_plain || !alma__dtype_is_float(sc->t.dtype))) ||
      (sz && (!sz->has_plain || sz->t.dtype != ALMA_DTYPE_INT64)))
    return 0;
  int axes[ALMA_MAX_RANK], na = r;
  for (int i = 0; i < r; i++) axes[i] = i;
  const int64_t *ax = NULL;
  int nax = !ups && v >= 18 ? alma__attr_ints(n, "axes", &ax) : 0;
  if (nax > r) return 0;
  if (nax > 0) {
    na = nax;
    for (int i = 0; i < na; i++) axes[i] = (int)(ax[i] < 0 ? ax[i] + r : ax[i]);
  }
  dn_val *t = sc ? sc : sz;
  if (alma__numel(t->t.rank, t->t.dims) != na) return 0;
  for (int i = 0; i < na; i++) {
    if (axes[i] < 0 || axes[i] >= r) return 0;
    if (sc) q->scale[axes[i]] = alma__get_f64(t->t.data, t->t.dtype, i);
    else q->scale[axes[i]] = x->dims[axes[i]] ? (double)((const int64_t *)t->t.data)[i] / (double)x->dims[axes[i]] : 1.0;
    if (!(q->scale[axes[i]] > 0)) return 0;
  }
  if (ups) {
    q->ctm = RS_UPSAMPLE;
    return 1;
  }
  if (v < 11) { /* Resize-10: asymmetric; nearest rounds up when shrinking an axis, down otherwise */
    q->ctm = RS_ASYM;
    for (int i = 0; i < r; i++) q->nmode[i] = q->scale[i] < 1.0 ? RS_CEIL : RS_FLOOR;
    return 1;
  }
  static const char *const ctms[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                     "asymmetric", "tf_half_pixel_for_nn"};
  static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  const char *cs = alma__attr_s(n, "coordinate_transformation_mode", "half_pixel");
  const char *ns = alma__attr_s(n, "nearest_mode", "round_prefer_floor");
  q->ctm = -1;
  for (int i = 0; i < 6; i++)
    if (!strcmp(cs, ctms[i])) q->ctm = i;
  int nm = -1;
  for (int i = 0; i < 4; i++)
    if (!strcmp(ns, nms[i])) nm = i;
  if (q->ctm < 0 || nm < 0) return 0;
  for (int i = 0; i < r; i++) q->nmode[i] = nm;
  (void)os;
  return 1;
}

/* ONNX's samples and weights for output coordinate o of axis d (as src/ops/resize.c and
 * extra_data.c compute them): two taps, one of weight 0 for nearest. */
static void rs_onnx_taps(const rs_onnx *q, int d, int64_t in, int64_t out, int64_t o, int64_t *i, double *w) {
  double s = q->scale[d], xd = (double)o, fin = (double)in, ow = s * fin, xo;
  if (q->ctm == RS_UPSAMPLE) { /* asymmetric, clamped to the last sample */
    double c = xd / s > fin - 1 ? fin - 1 : xd / s, f = floor(c);
    i[0] = (int64_t)f;
    i[1] = i[0] + 1 < in ? i[0] + 1 : in - 1;
    w[1] = q->linear ? c - f : 0;
    w[0] = 1 - w[1];
    return;
  }
  if (!q->linear) { /* nearest picks its pixel in float32, as resize.c does (ONNX Runtime's rounding) */
    float sf = (float)s, xf = (float)o, inf = (float)in, owf = sf * inf;
    switch (q->ctm) {
      case RS_ALIGN: xo = owf == 1 ? 0.0 : (double)(xf * (inf - 1) / (owf - 1)); break;
      case RS_ASYM: xo = (double)(xf / sf); break;
      case RS_PYTORCH: xo = owf == 1 ? -0.5 : (double)((xf + 0.5f) / sf - 0.5f); break;
      case RS_TF_NN: xo = (double)((xf + 0.5f) / sf); break;
      case RS_HALF_PIXEL_SYM: {
        float adj = (float)out / owf, center = inf / 2;
        xo = (double)(center * (1 - adj) + (xf + 0.5f) / sf - 0.5f);
        break;
      }
      default: xo = (double)((xf + 0.5f) / sf - 0.5f); break;
    }
  } else {
    switch (q->ctm) {
      case RS_ALIGN: xo = ow == 1 ? 0.0 : xd * (fin - 1) / (ow - 1); break;
      case RS_ASYM: xo = xd / s; break;
      case RS_PYTORCH: xo = ow == 1 ? -0.5 : (xd + 0.5) / s - 0.5; break;
      case RS_TF_NN: xo = (xd + 0.5) / s; break;
      case RS_HALF_PIXEL_SYM: {
        double adj = (double)out / ow, center = fin / 2;
        xo = center * (1 - adj) + (xd + 0.5) / s - 0.5;
        break;
      }
      default: xo = (xd + 0.5) / s - 0.5; break;
    }
  }
  double fl = floor(xo), ratio = xo == fl ? 1.0 : xo - fl;
  int64_t base = (int64_t)fl - (xo == fl); /* the left neighbour */
  i[0] = base;
  i[1] = base + 1;
  if (q->linear) {
    w[0] = 1 - ratio;
    w[1] = ratio;
  } else {
    int right = 1;
    if (ratio != 1.0) {
      int mode = q->nmode[d];
      right = mode == RS_ROUND_FLOOR ? ratio > 0.5 : mode == RS_ROUND_CEIL ? ratio >= 0.5 : mode == RS_CEIL;
    }
    w[0] = !right;
    w[1] = right;
  }
  for (int k = 0; k < 2; k++) i[k] = i[k] < 0 ? 0 : i[k] >= in ? in - 1 : i[k];
}

/* oneDNN's samples and weights (its reference and jit kernels share these formulas). */
static void rs_dnnl_taps(int linear, int64_t in, int64_t out, int64_t o, int64_t *i, double *w) {
  float s = ((float)o + 0.5f) * (float)in / (float)out - 0.5f;
  if (!linear) {
    i[0] = i[1] = (int64_t)roundf(s);
    w[0] = 1, w[1] = 0;
    return;
  }
  int64_t t = (int64_t)s;
  i[0] = t < 0 ? 0 : t;
  i[1] = s < 0 ? 0 : (float)t == s ? t : t + 1;
  if (i[1] > in - 1) i[1] = in - 1;
  w[1] = fabsf(s - (float)i[0]);
  w[0] = 1 - w[1];
}

/* Both taps put the same weight on every sample. */
static int rs_taps_agree(const int64_t *ia, const double *wa, const int64_t *ib, const double *wb, int64_t in) {
  const int64_t all[4] = {ia[0], ia[1], ib[0], ib[1]};
  for (int k = 0; k < 4; k++) {
    if (all[k] < 0 || all[k] >= in) return 0;
    double a = (ia[0] == all[k] ? wa[0] : 0) + (ia[1] == all[k] ? wa[1] : 0);
    double b = (ib[0] == all[k] ? wb[0] : 0) + (ib[1] == all[k] ? wb[1] : 0);
    if (fabs(a - b) > 1e-6) return 0;
  }
  return 1;
}

static int rs_agree(const rs_onnx *q, const alma_tensor *x, const alma_tensor *os) {
  for (int d = 0; d < x->rank; d++) {
    int64_t in = x->dims[d], out = os->dims[d];
    if (d < 2 && in != out) return 0; /* oneDNN resamples only the spatial axes */
    for (int64_t o = 0; o < out; o++) {
      int64_t ia[2], ib[2] = {o, o};
      double wa[2], wb[2] = {1, 0};
      rs_onnx_taps(q, d, in, out, o, ia, wa);
      if (d >= 2) rs_dnnl_taps(q->linear, in, out, o, ib, wb);
      if (!rs_taps_agree(ia, wa, ib, wb, in)) return 0;
    }
  }
  return 1;
}

static alma_status run_resample(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                                int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0];
  int r = x ? x->t.rank : 0;
  if (!is_fp(x) || r < 3 || r > 5 || os[0].rank != r || os[0].dtype != x->t.dtype) return ALMA_OK;
  for (int k = 1; k < nin && k < 4; k++) /* roi, scales, sizes: small, plain */
    if (in[k] && in[k]->live) ALMA_TRY(alma__dn_val_plain(p, in[k], n));
  rs_onnx q;
  if (!rs_read(n, in, nin, &x->t, &os[0], &q)) return ALMA_OK;
  int agree = rs_agree(&q, &x->t, &os[0]);
  dnnl_memory_desc_t key[2];
  int64_t ikey[8] = {q.linear, !agree};
  alma__dn_val_md(x, &key[0]);
  plain_md(&key[1], r, os[0].dims, x->t.dtype);
  if (!key_match(pr, 2, key, ikey)) {
    prim_begin(pr, 2, key, ikey);
    if (!agree) return prim_decline(pr, n, "ONNX's sample coordinates are not oneDNN's for these sizes and scales");
    dnnl_dims_t dd;
    for (int i = 0; i < r; i++) dd[i] = os[0].dims[i];
    dnnl_memory_desc_t d_any;
    dnnl_memory_desc_init_by_tag(&d_any, r, dd, ddt(x->t.dtype), dnnl_format_tag_any);
    dnnl_resampling_desc_t rd;
    if (dnnl_resampling_forward_desc_init(&rd, dnnl_forward_inference,
                                          q.linear ? dnnl_resampling_linear : dnnl_resampling_nearest, NULL, &key[0],
                                          &d_any) != dnnl_success)
      return prim_decline(pr, n, "resampling descriptor rejected");
    if (!prim_pd(p, pr, n, &rd, NULL, "resampling") ||
        !prim_args(p, pr, n, 2, (dn_arg[]){{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_DST, NULL}}))
      return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  void *ptrs[DN_MAX_MEM] = {x->has_blk ? x->bbuf->ptr : x->t.data, db->ptr};
  alma_status st = alma__dn_exec(p, pr, pr->p, ptrs, n);
  return alma__dn_finish(p, st, db, out[0], &os[0], &pr->dst_md, done);
}

/* ---- MatMulNBits: alma's kernel with its output columns split over oneDNN's OpenMP threads ------- */
typedef struct nbits_par {
  alma__nbits_item_fn fn;
  void *arg;
  int64_t items;
  atomic_llong next; /* items are taken as threads come free: a descheduled thread leaves its share */
} nbits_par;

static void nbits_task(void *arg, int tid, int nt) {
  (void)tid, (void)nt;
  nbits_par *t = arg;
  for (int64_t i; (i = atomic_fetch_add(&t->next, 1)) < t->items;) t->fn(t->arg, i);
}

void alma__dn_parfor(void *pctx, int64_t items, alma__nbits_item_fn fn, void *arg) {
  nbits_par t = {.fn = fn, .arg = arg, .items = items};
  atomic_init(&t.next, 0);
  alma__dn_parallel(*(const int *)pctx, nbits_task, &t);
}

static alma_status run_nbits(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                             int *done) {
  const alma_node *n = &p->g->nodes[idx];
  const alma_tensor *t[6] = {NULL};
  if (nin > 6 || os[0].dtype != F32 || in[0]->t.dtype != F32 || alma_tensor_numel(&os[0]) == 0) return ALMA_OK;
  for (int k = 0; k < nin; k++)
    if (in[k]) {
      ALMA_TRY(alma__dn_val_plain(p, in[k], n));
      t[k] = &in[k]->t;
    }
  dnnl_memory_desc_t ymd;
  plain_md(&ymd, os[0].rank, os[0].dims, F32);
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&ymd));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  alma_tensor y = os[0];
  y.data = db->ptr;
  y.nbytes = dnnl_memory_desc_get_size(&ymd);
  y.owns_data = 0;
  alma_status st = alma__mnb_exec_par(n, t, nin, &y, p->threads, alma__dn_parfor, &p->threads);
  return alma__dn_finish(p, st, db, out[0], &os[0], &ymd, done);
}

alma_status alma__dn_run_contrib(dn_plan *p, const alma_node *n, const alma_tensor *const *in, alma_tensor *out) {
  int nout = n->n_outputs;
  for (int i = 0; i < nout; i++) memset(&out[i], 0, sizeof out[i]);
  ALMA_TRY(n->op->infer(n, in, n->n_inputs, out, nout));
  alma_status st = ALMA_OK;
  for (int i = 0; i < nout && st == ALMA_OK; i++) {
    alma_tensor shape = out[i];
    if (n->outputs[i] >= 0) st = alma__tensor_alloc(&out[i], shape.dtype, shape.rank, shape.dims);
  }
  if (st == ALMA_OK) st = alma__contrib_exec_par(n, in, n->n_inputs, out, nout, p->threads, alma__dn_parfor, &p->threads);
  if (st != ALMA_OK)
    for (int i = 0; i < nout; i++) alma_tensor_free_data(&out[i]);
  return st;
}

alma_status alma__dn_run(dn_plan *p, int idx, int fused, dn_val **in, int nin, const alma_tensor *outshape, dn_val **out,
                         int nout, int *done) {
  *done = 0;
  if (nin < 1 || nout < 1 || !in[0] || !out[0]) return ALMA_OK;
  switch (p->nodes[idx].kind) {
    case DK_CONV: return run_conv(p, idx, fused, in, nin, outshape, out, done);
    case DK_POOL: return run_pool(p, idx, in, outshape, out, done);
    case DK_ELTWISE: return run_eltwise(p, idx, in, nin, outshape, out, done);
    case DK_DECONV: return run_deconv(p, idx, in, nin, outshape, out, done);
    case DK_ATTN: return run_attn(p, idx, fused, in, nin, outshape, out, done);
    case DK_TRANSPOSE: return run_transpose(p, idx, in, outshape, out, done);
    case DK_REDUCE: return run_reduce(p, idx, in, nin, outshape, out, done);
    case DK_CONCAT: return run_concat(p, idx, in, nin, outshape, out, done);
    case DK_SLICE: return run_slice(p, idx, in, nin, outshape, out, nout, done);
    case DK_PRELU: return nin == 2 && in[1] ? run_prelu(p, idx, in, outshape, out, done) : ALMA_OK;
    case DK_BINARY: return nin == 2 && in[1] ? run_binary(p, idx, in, outshape, out, done) : ALMA_OK;
    case DK_BNORM: return run_bnorm(p, idx, fused, in, nin, outshape, out, done);
    case DK_LNORM: return run_lnorm(p, idx, in, nin, outshape, out, done);
    case DK_SOFTMAX: return run_softmax(p, idx, in, outshape, out, done);
    case DK_MATMUL: return nin >= 2 && in[1] ? run_matmul(p, idx, fused, in, outshape, out, done) : ALMA_OK;
    case DK_GEMM: return nin >= 2 && in[1] ? run_gemm(p, idx, fused, in, nin, outshape, out, done) : ALMA_OK;
    case DK_VIEW: return run_view(p, idx, in, outshape, out, done);
    case DK_QDQ:
    case DK_QLINEAR: return alma__dn_q_run(p, idx, in, nin, outshape, out, nout, done);
    case DK_CAST: return run_cast(p, idx, in, outshape, out, done);
    case DK_PAD: return run_pad(p, idx, in, nin, outshape, out, done);
    case DK_LRN: return run_lrn(p, idx, in, outshape, out, done);
    case DK_INORM: return run_inorm(p, idx, in, nin, outshape, out, done);
    case DK_RESAMPLE: return run_resample(p, idx, in, nin, outshape, out, done);
    case DK_NBITS: return run_nbits(p, idx, in, nin, outshape, out, done);
    default: return ALMA_OK;
  }
}

#endif
