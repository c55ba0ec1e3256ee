/* Opset 27's recurrent sequence operators: LinearAttention (linear, gated, delta and gated-delta
 * recurrences of linear-attention models: GLA, RetNet, DeltaNet, Gated DeltaNet) and
 * CausalConvWithState (the stateful depthwise causal 1-D convolution of Mamba and Gated DeltaNet).
 * Both run their recurrence token by token in float32 whatever the input type (float32, float16,
 * bfloat16), as ONNX's reference does, and round once into the output type. */
#include <math.h>

#include "ops/nn_util.h"
#include "ops/op_args.h"

static int la_float(alma_dtype t) {
  return t == ALMA_DTYPE_FLOAT32 || t == ALMA_DTYPE_FLOAT16 || t == ALMA_DTYPE_BFLOAT16;
}

/* ==== LinearAttention (27) =====================================================================
 * query [B, T, Hq*dk], key [B, T, Hkv*dk], value [B, T, Hkv*dv] (heads packed last); state
 * [B, Hkv, dk, dv]. Per token: S = exp(g) S (gated), v = beta (v - S^T k) (delta), S += k v^T,
 * o = scale q^T S, query head h reading kv head h / (Hq / Hkv). decay is [B, T, Hkv] (one gate
 * per head) or [B, T, Hkv*dk] (one per key dimension), beta [B, T, Hkv] or [B, T, 1]. */
typedef struct {
  int64_t B, T, Hq, Hkv, dk, dv, gdim, bdim; /* gdim: decay values per head (0 none, 1 or dk) */
  int gated, delta;
  double scale;
} la_geom;

static alma_status la_geometry(const alma_node *n, const alma_tensor *const *in, int nin, la_geom *g) {
  const alma_tensor *q = in[0], *k = in[1], *v = in[2], *past = alma__nn_in(in, nin, 3),
                    *decay = alma__nn_in(in, nin, 4), *beta = alma__nn_in(in, nin, 5);
  const char *rule = alma__attr_s(n, "update_rule", "gated_delta");
  if (!strcmp(rule, "linear")) g->gated = 0, g->delta = 0;
  else if (!strcmp(rule, "gated")) g->gated = 1, g->delta = 0;
  else if (!strcmp(rule, "delta")) g->gated = 0, g->delta = 1;
  else if (!strcmp(rule, "gated_delta")) g->gated = 1, g->delta = 1;
  else return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "update_rule='%s' (expects linear, gated, delta or gated_delta)", rule);
  g->Hq = alma__attr_i(n, "q_num_heads", 0);
  g->Hkv = alma__attr_i(n, "kv_num_heads", 0);
  if (g->Hq <= 0 || g->Hkv <= 0 || g->Hq % g->Hkv)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "q_num_heads (%lld) must be a positive multiple of kv_num_heads (%lld)",
                          (long long)g->Hq, (long long)g->Hkv);
  const alma_tensor *qkv[3] = {q, k, v};
  const char *names[3] = {"query", "key", "value"};
  for (int i = 0; i < 3; i++) {
    if (!qkv[i]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input %s is required", names[i]);
    if (!la_float(qkv[i]->dtype) || qkv[i]->dtype != q->dtype)
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "%s dtype %s (expects query's float type)", names[i],
                            alma_dtype_name(qkv[i]->dtype));
    if (qkv[i]->rank != 3) return alma__op_error(n, ALMA_ERR_SHAPE, "%s must be 3-D (B, T, H*D), got rank %d", names[i], qkv[i]->rank);
    if (qkv[i]->dims[0] != q->dims[0] || qkv[i]->dims[1] != q->dims[1])
      return alma__op_error(n, ALMA_ERR_SHAPE, "%s's batch and sequence dims differ from query's", names[i]);
  }
  g->B = q->dims[0], g->T = q->dims[1];
  if (q->dims[2] % g->Hq || k->dims[2] % g->Hkv || v->dims[2] % g->Hkv)
    return alma__op_error(n, ALMA_ERR_SHAPE, "last dims %lld, %lld, %lld not divisible by the head counts %lld, %lld, %lld",
                          (long long)q->dims[2], (long long)k->dims[2], (long long)v->dims[2], (long long)g->Hq,
                          (long long)g->Hkv, (long long)g->Hkv);
  g->dk = q->dims[2] / g->Hq, g->dv = v->dims[2] / g->Hkv;
  if (k->dims[2] / g->Hkv != g->dk)
    return alma__op_error(n, ALMA_ERR_SHAPE, "key head size %lld differs from query's %lld", (long long)(k->dims[2] / g->Hkv),
                          (long long)g->dk);
  if (g->gated != (decay != NULL))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "update_rule '%s' %s the decay input", rule, g->gated ? "requires" : "forbids");
  if (g->delta != (beta != NULL))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "update_rule '%s' %s the beta input", rule, g->delta ? "requires" : "forbids");
  g->gdim = 0, g->bdim = 0;
  if (decay) {
    if (decay->dtype != q->dtype || decay->rank != 3 || decay->dims[0] != g->B || decay->dims[1] != g->T ||
        (decay->dims[2] != g->Hkv && decay->dims[2] != g->Hkv * g->dk))
      return alma__op_error(n, ALMA_ERR_SHAPE, "decay must be %s [%lld, %lld, %lld or %lld]", alma_dtype_name(q->dtype),
                            (long long)g->B, (long long)g->T, (long long)g->Hkv, (long long)(g->Hkv * g->dk));
    g->gdim = decay->dims[2] / g->Hkv;
  }
  if (beta) {
    if (beta->dtype != q->dtype || beta->rank != 3 || beta->dims[0] != g->B || beta->dims[1] != g->T ||
        (beta->dims[2] != g->Hkv && beta->dims[2] != 1))
      return alma__op_error(n, ALMA_ERR_SHAPE, "beta must be %s [%lld, %lld, %lld or 1]", alma_dtype_name(q->dtype),
                            (long long)g->B, (long long)g->T, (long long)g->Hkv);
    g->bdim = beta->dims[2];
  }
  if (past) {
    int ok = la_float(past->dtype) && past->rank == 4 && past->dims[0] == g->B && past->dims[1] == g->Hkv &&
             past->dims[2] == g->dk && past->dims[3] == g->dv;
    if (!ok)
      return alma__op_error(n, ALMA_ERR_SHAPE, "past_state must be a float [%lld, %lld, %lld, %lld]", (long long)g->B,
                            (long long)g->Hkv, (long long)g->dk, (long long)g->dv);
  }
  float s = alma__attr_f(n, "scale", 0.0f);
  g->scale = s == 0.0f ? 1.0 / sqrt((double)g->dk) : (double)s;
  if (alma__attr_i(n, "chunk_size", 64) <= 0)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "chunk_size must be positive");
  return ALMA_OK;
}

static alma_status la_infer(INFER_ARGS) {
  la_geom g;
  ALMA_TRY(la_geometry(n, in, nin, &g));
  int64_t od[3] = {g.B, g.T, g.Hq * g.dv}, sd[4] = {g.B, g.Hkv, g.dk, g.dv};
  const alma_tensor *past = alma__nn_in(in, nin, 3);
  alma__set_shape(&out[0], in[0]->dtype, 3, od);
  if (nout > 1) alma__set_shape(&out[1], past ? past->dtype : in[0]->dtype, 4, sd);
  return ALMA_OK;
}

static alma_status la_exec(EXEC_ARGS) {
  la_geom g;
  ALMA_TRY(la_geometry(n, in, nin, &g));
  const alma_tensor *past = alma__nn_in(in, nin, 3), *decay = alma__nn_in(in, nin, 4), *beta = alma__nn_in(in, nin, 5);
  int own[5] = {0};
  const float *q = alma__nn_as_f32(in[0], &own[0]), *k = alma__nn_as_f32(in[1], &own[1]),
              *v = alma__nn_as_f32(in[2], &own[2]);
  const float *gd = decay ? alma__nn_as_f32(decay, &own[3]) : NULL, *bt = beta ? alma__nn_as_f32(beta, &own[4]) : NULL;
  int64_t ssz = g.B * g.Hkv * g.dk * g.dv, osz = g.B * g.T * g.Hq * g.dv;
  float *S = alma__calloc((size_t)(ssz > 0 ? ssz : 1), sizeof *S), *o = alma__calloc((size_t)(osz > 0 ? osz : 1), sizeof *o);
  float *vt = alma__malloc((size_t)(g.dv > 0 ? g.dv : 1) * sizeof *vt);
  alma_status st = ALMA_OK;
  if (!q || !k || !v || (decay && !gd) || (beta && !bt) || !S || !o || !vt) {
    st = alma__op_error(n, ALMA_ERR_NOMEM, "scratch");
    goto done;
  }
  if (past)
    for (int64_t i = 0; i < ssz; i++) S[i] = (float)alma__get_f64(past->data, past->dtype, i);
  int64_t group = g.Hq / g.Hkv, dk = g.dk, dv = g.dv;
  for (int64_t b = 0; b < g.B; b++)
    for (int64_t t = 0; t < g.T; t++) {
      int64_t bt_row = b * g.T + t;
      for (int64_t h = 0; h < g.Hkv; h++) {
        float *Sh = S + (b * g.Hkv + h) * dk * dv;
        const float *kt = k + bt_row * g.Hkv * dk + h * dk, *vin = v + bt_row * g.Hkv * dv + h * dv;
        if (g.gated) {
          const float *gt = gd + bt_row * g.Hkv * g.gdim + h * g.gdim;
          for (int64_t d = 0; d < dk; d++) {
            float e = expf(gt[g.gdim == 1 ? 0 : d]);
            for (int64_t m = 0; m < dv; m++) Sh[d * dv + m] *= e;
          }
        }
        if (g.delta) {
          float be = bt[bt_row * g.bdim + (g.bdim == 1 ? 0 : h)];
          for (int64_t m = 0; m < dv; m++) vt[m] = vin[m];
          for (int64_t d = 0; d < dk; d++)
            for (int64_t m = 0; m < dv; m++) vt[m] -= Sh[d * dv + m] * kt[d];
          for (int64_t m = 0; m < dv; m++) vt[m] *= be;
        } else {
          memcpy(vt, vin, (size_t)dv * sizeof *vt);
        }
        for (int64_t d = 0; d < dk; d++)
          for (int64_t m = 0; m < dv; m++) Sh[d * dv + m] += kt[d] * vt[m];
        for (int64_t j = 0; j < group; j++) {
          int64_t hq = h * group + j;
          const float *qt = q + bt_row * g.Hq * dk + hq * dk;
          float *ot = o + bt_row * g.Hq * dv + hq * dv;
          for (int64_t d = 0; d < dk; d++)
            for (int64_t m = 0; m < dv; m++) ot[m] += qt[d] * Sh[d * dv + m];
          for (int64_t m = 0; m < dv; m++) ot[m] = (float)(g.scale * ot[m]);
        }
      }
    }
  alma__nn_store_f32(&out[0], o);
  if (nout > 1 && out[1].data) alma__nn_store_f32(&out[1], S);
done:
  if (own[0]) free((void *)q);
  if (own[1]) free((void *)k);
  if (own[2]) free((void *)v);
  if (own[3]) free((void *)gd);
  if (own[4]) free((void *)bt);
  free(S);
  free(o);
  free(vt);
  return st;
}

static void la_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                    int64_t *macs, int64_t *flops) {
  la_geom g;
  if (la_geometry(n, in, nin, &g) != ALMA_OK) {
    alma__error_clear();
    *macs = 0, *flops = -1;
    return;
  }
  /* per token and kv head: the update (and retrieval) k v^T; per query head: q^T S */
  *macs = g.B * g.T * (g.Hkv * g.dk * g.dv * (1 + g.delta) + g.Hq * g.dk * g.dv);
  *flops = 2 * *macs;
}

const alma_op_def alma__op_LinearAttention = {.name = "LinearAttention", .domain = "", .versions = {27}, .min_inputs = 3,
                                              .max_inputs = 6, .min_outputs = 1, .max_outputs = 2,
                                              .infer = la_infer, .exec = la_exec, .cost = la_cost};

/* ==== CausalConvWithState (27) =================================================================
 * input [B, C, L], weight [C, 1, K], bias [C], past_state [B, C, K-1] (zeros when omitted):
 * y[b,c,t] = act(bias[c] + sum_j w[c,j] x'[b,c,t+j]) over x' = concat(past_state, input) along
 * the length; present_state = the last K-1 positions of x'. act: none, or silu/swish (x sigmoid(x)),
 * applied to the convolution already rounded to the input type. */
static alma_status ccs_check(const alma_node *n, const alma_tensor *const *in, int nin, int *silu) {
  const alma_tensor *x = in[0], *w = in[1], *bias = alma__nn_in(in, nin, 2), *past = alma__nn_in(in, nin, 3);
  const char *act = alma__attr_s(n, "activation", "none");
  if (!strcmp(act, "none")) *silu = 0;
  else if (!strcmp(act, "silu") || !strcmp(act, "swish")) *silu = 1;
  else return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "activation='%s' (expects none, silu or swish)", act);
  if (!w) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input weight is required");
  if (!la_float(x->dtype)) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  if (x->rank != 3) return alma__op_error(n, ALMA_ERR_SHAPE, "input must be 3-D (batch, channels, length), got rank %d", x->rank);
  int64_t C = x->dims[1];
  if (w->dtype != x->dtype || w->rank != 3 || w->dims[0] != C || w->dims[1] != 1 || w->dims[2] < 1)
    return alma__op_error(n, ALMA_ERR_SHAPE, "weight must be %s [%lld, 1, k] with k >= 1", alma_dtype_name(x->dtype),
                          (long long)C);
  int64_t K = w->dims[2];
  if (bias && (bias->dtype != x->dtype || bias->rank != 1 || bias->dims[0] != C))
    return alma__op_error(n, ALMA_ERR_SHAPE, "bias must be %s [%lld]", alma_dtype_name(x->dtype), (long long)C);
  if (past && (past->dtype != x->dtype || past->rank != 3 || past->dims[0] != x->dims[0] || past->dims[1] != C ||
               past->dims[2] != K - 1))
    return alma__op_error(n, ALMA_ERR_SHAPE, "past_state must be %s [%lld, %lld, %lld]", alma_dtype_name(x->dtype),
                          (long long)x->dims[0], (long long)C, (long long)(K - 1));
  return ALMA_OK;
}

static alma_status ccs_infer(INFER_ARGS) {
  int silu;
  ALMA_TRY(ccs_check(n, in, nin, &silu));
  const alma_tensor *x = in[0];
  int64_t sd[3] = {x->dims[0], x->dims[1], in[1]->dims[2] - 1};
  alma__set_shape(&out[0], x->dtype, 3, x->dims);
  if (nout > 1) alma__set_shape(&out[1], x->dtype, 3, sd);
  return ALMA_OK;
}

static alma_status ccs_exec(EXEC_ARGS) {
  int silu;
  ALMA_TRY(ccs_check(n, in, nin, &silu));
  const alma_tensor *x = in[0], *w = in[1], *bias = alma__nn_in(in, nin, 2), *past = alma__nn_in(in, nin, 3);
  int64_t B = x->dims[0], C = x->dims[1], L = x->dims[2], K = w->dims[2], P = L + K - 1;
  alma_dtype dt = x->dtype;
  double *row = alma__malloc((size_t)(P > 0 ? P : 1) * sizeof *row);
  if (!row) return alma__op_error(n, ALMA_ERR_NOMEM, "scratch");
  for (int64_t b = 0; b < B; b++)
    for (int64_t c = 0; c < C; c++) {
      /* the padded sequence x' of this channel */
      for (int64_t j = 0; j < K - 1; j++) row[j] = past ? alma__get_f64(past->data, dt, (b * C + c) * (K - 1) + j) : 0.0;
      for (int64_t t = 0; t < L; t++) row[K - 1 + t] = alma__get_f64(x->data, dt, (b * C + c) * L + t);
      double bc = bias ? alma__get_f64(bias->data, dt, c) : 0.0;
      for (int64_t t = 0; t < L; t++) {
        double acc = bc;
        for (int64_t j = 0; j < K; j++) acc += alma__get_f64(w->data, dt, c * K + j) * row[t + j];
        int64_t yi = (b * C + c) * L + t;
        alma__set_f64(out[0].data, dt, yi, acc);
        if (silu) {
          float y = (float)alma__get_f64(out[0].data, dt, yi); /* rounded to the type first */
          alma__set_f64(out[0].data, dt, yi, y / (1.0f + expf(-y)));
        }
      }
      if (nout > 1 && out[1].data)
        for (int64_t j = 0; j < K - 1; j++) alma__set_f64(out[1].data, dt, (b * C + c) * (K - 1) + j, row[P - (K - 1) + j]);
    }
  free(row);
  return ALMA_OK;
}

static void ccs_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                     int64_t *macs, int64_t *flops) {
  *macs = alma_tensor_numel(in[0]) * (in[1] && in[1]->rank == 3 ? in[1]->dims[2] : 1);
  *flops = 2 * *macs;
}

const alma_op_def alma__op_CausalConvWithState = {.name = "CausalConvWithState", .domain = "", .versions = {27},
                                                  .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 2,
                                                  .infer = ccs_infer, .exec = ccs_exec, .cost = ccs_cost};
