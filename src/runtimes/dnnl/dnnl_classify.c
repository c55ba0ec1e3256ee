/* DNNL runtime: which nodes run on oneDNN, classified at compile into the kinds of dnnl_rt.h, and the
 * eltwise steps a fusable node applies. */
#ifdef ALMA_HAVE_DNNL

#include <float.h>
#include <math.h>

#include "ops/contrib_nbits.h"
#include "runtimes/dnnl/dnnl_rt.h"

#define BF16 ALMA_DTYPE_BFLOAT16

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
 * node runs, see alma__dn_run_resample). */
static int classify_resize(const alma_node *n, dn_node *d, const char **why) {
  const char *m = alma__attr_s(n, "mode", "nearest");
  if (strcmp(m, "nearest") && strcmp(m, "linear") && !(alma__dn_is_op(n, "Upsample") && !strcmp(m, "bilinear"))) {
    return alma__dn_decline(d, why, ALMA_DECLINE_ATTR, "cubic or unknown mode (oneDNN resamples nearest and linear)");
  }
  if (alma__dn_is_op(n, "Resize") && n->since_version >= 11) {
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
  int qk = alma__dn_q_classify(g, n, d, why); /* quantization operators: dnnl_int8_plan.c */
  if (qk >= 0) return qk;
  if (!strcmp(n->domain, "alma")) {
    alma_dtype dt = g->values[n->outputs[0]].dtype;
    if (!alma__dn_dt_ok(dt) && dt != ALMA_DTYPE_UNDEFINED) {
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
  if (alma__dn_is_op(n, "Reshape") || alma__dn_is_op(n, "Flatten") || alma__dn_is_op(n, "Squeeze") || alma__dn_is_op(n, "Unsqueeze") ||
      alma__dn_is_op(n, "Identity"))
    return DK_VIEW;
  if (alma__dn_is_op(n, "Dropout")) {
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
  if (alma__dn_is_op(n, "Cast")) { /* float32 <-> bfloat16 (the BF16 pass's boundaries); other pairs on EAGER */
    alma_dtype from = n->n_inputs == 1 && n->inputs[0] >= 0 ? g->values[n->inputs[0]].dtype : ALMA_DTYPE_UNDEFINED;
    if (alma__dn_dt_ok((alma_dtype)alma__attr_i(n, "to", 0)) && (alma__dn_dt_ok(from) || from == ALMA_DTYPE_UNDEFINED)) return DK_CAST;
    return alma__dn_decline(d, why, ALMA_DECLINE_DTYPE, "cast other than between float32 and bfloat16");
  }
  if ((dt == ALMA_DTYPE_UINT8 || dt == ALMA_DTYPE_INT8) && !strcmp(op, "MaxPool") && !output_wanted(n, 1)) {
    d->alg = dnnl_pooling_max; /* MaxPool on quantized data (opset >= 12; ONNX Runtime's QOperator models) */
    return DK_POOL;
  }
  if (!alma__dn_dt_ok(dt) && dt != ALMA_DTYPE_UNDEFINED) {
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

#endif
