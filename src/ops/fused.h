/* Fused operators of the "alma" domain, created by the FUSE pass (src/passes/fuse*.c). Their
 * reference kernels (fused.c) compose the base op's EAGER kernel with the epilogue, so every
 * runtime can fall back to them; a runtime with fused primitives maps them directly.
 *
 *   alma.FusedConv(X, W, [B], [Z]) = act(Conv(X, W, B) + Z)
 *       Conv's attributes; Z (the residual, as in ResNet's Conv -> Add -> Relu) has the output's
 *       dtype and broadcasts unidirectionally to the output.
 *   alma.FusedGemm(A, B, [C])      = act(Gemm(A, B, C))        Gemm's attributes (opset 13 rules)
 *   alma.FusedMatMul(A, B, [bias]) = act(MatMul(A, B) + bias)  bias broadcasts unidirectionally
 *                                                             (the pass gives [N])
 *   all three: activation (string, absent = none) and activation_params (floats):
 *       Relu | Clip [min, max] | HardSwish | HardSigmoid [alpha, beta] | Sigmoid | SiLU (x*sigmoid(x))
 *       | Gelu [approximate: 0 erf (default), 1 tanh] | Tanh | LeakyRelu [alpha]
 *       (missing parameters take the ONNX op's defaults).
 *   alma.Attention(Q, K, V, [mask], [new_keys]) = softmax(scale * Q Kᵀ + mask) V, softmax over the
 *       last axis. Q [..., Sq, D], K [..., Sk, D] (or [..., D, Sk] with k_transposed = 1), V
 *       [..., Sk, Dv], batch dims broadcast as in MatMul; mask (additive, Q's dtype) broadcasts
 *       unidirectionally to the scores [..., Sq, Sk]. Attributes: scale (float, default 1/sqrt(D)),
 *       k_transposed (int, default 0), onnx_mask (int, default 0: ONNX Attention's mask rules, a
 *       shorter mask padded with -inf and a fully masked query giving zeros), causal (int, default
 *       0): with 1, query i sees key j only if j <= i + off, off = Sk - Sq (bottom-right aligned),
 *       or, when new_keys is given, Sk minus new_keys' dim -2 (the keys before the newest: ONNX's
 *       past length; only new_keys' shape is read). Output [..., Sq, Dv].
 * All are since_version 1 of the "alma" domain (which models do not import: the pass binds them). */
#ifndef ALMA_OPS_FUSED_H
#define ALMA_OPS_FUSED_H

#include "ops/op.h"

typedef enum {
  ALMA_ACT_NONE = 0,
  ALMA_ACT_RELU,
  ALMA_ACT_CLIP,        /* p0 = min, p1 = max */
  ALMA_ACT_HARDSWISH,
  ALMA_ACT_HARDSIGMOID, /* p0 = alpha, p1 = beta */
  ALMA_ACT_SIGMOID,
  ALMA_ACT_SILU,
  ALMA_ACT_GELU,        /* erf form */
  ALMA_ACT_GELU_TANH,   /* tanh approximation */
  ALMA_ACT_TANH,
  ALMA_ACT_LEAKYRELU,   /* p0 = alpha */
} alma_act_kind;

typedef struct alma_fused_act {
  alma_act_kind kind;
  float p0, p1;
} alma_fused_act;

/* alma.Attention's causal attribute and new_keys input (in[4]) for Sq queries over Sk keys: *causal
 * 0/1 and the offset (query i sees key j iff j <= i + *offset). Errors name the node. */
alma_status alma__attn_causal_offset(const alma_node *n, const alma_tensor *const *in, int nin, int64_t Sq,
                                     int64_t Sk, int *causal, int64_t *offset);
/* Reads and validates a fused node's activation/activation_params (errors name the node). */
alma_status alma__fused_act_parse(const alma_node *n, alma_fused_act *act);
/* The attribute name of an activation ("Relu", ...; "" for none). */
const char *alma__fused_act_name(alma_act_kind k);
/* Applies the activation in place to a float tensor (float32/64, float16, bfloat16). */
alma_status alma__fused_act_apply(const alma_node *n, const alma_fused_act *act, alma_tensor *y);
/* The same on a float32 buffer (for runtimes' own epilogues). */
void alma__fused_act_f32(const alma_fused_act *act, float *y, int64_t count);

#endif
