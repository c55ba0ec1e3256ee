/* Recurrent operators: LSTM and GRU (ONNX layouts, all attributes and optional inputs/outputs).
 *
 * The numeric kernels are written once and compiled for float (float32, float16 and bfloat16
 * models, computed in float) and for double (float64 models): this file includes itself with
 * ALMA_RNN_REAL set (see the end of the first part). The input projection of all steps is one
 * matrix product; each step multiplies the whole batch's state by R at once. Float runs those on
 * the packed kernel of sgemm.h, on W and R packed once per node when they are graph constants
 * (else R packed once per call for batches up to ALMA_PACKED_MAX_ROWS, the projection on the
 * blocked SGEMM), and Sigmoid and Tanh on the vectorised rows of softmax_row.h; double keeps plain
 * loops and libm. With a runtime's threads (its fallback to this kernel) the two directions of a
 * bidirectional node run in parallel, a single direction's input projection is split over them,
 * and a float LSTM whose R is larger than L2 splits each step over them when there are more
 * threads than directions or each thread's share of R fits its L2 (rnn_split_ok).
 * Every attribute and optional input takes the same path: no case falls back to a slower kernel.
 *
 * Conventions (ONNX): gates are stacked in W/R/B in the order i,o,f,c (LSTM) and z,r,h (GRU); B
 * holds the W biases then the R biases; P holds the peepholes i,o,f. clip bounds the input of the
 * gate activations (f, g) to [-clip, clip], as onnxruntime does; the cell state itself is not
 * clipped. Steps past a batch entry's sequence length leave Y at zero and freeze its state. */
#ifndef ALMA_RNN_REAL

#include <math.h>
#include <stdatomic.h>
#include <strings.h>
#include <unistd.h>

#include "ops/gemm_packed.h"
#include "ops/op.h"
#include "ops/qgemm.h"
#include "ops/sgemm.h"
#include "ops/softmax_row.h"

typedef enum {
  ACT_RELU, ACT_TANH, ACT_SIGMOID, ACT_AFFINE, ACT_LEAKYRELU, ACT_THRESHOLDEDRELU, ACT_SCALEDTANH,
  ACT_HARDSIGMOID, ACT_ELU, ACT_SOFTSIGN, ACT_SOFTPLUS
} rnn_act_kind;

typedef struct {
  rnn_act_kind kind;
  float alpha, beta;
} rnn_act;

/* Which activations take alpha/beta, and the defaults of the matching ONNX operators. */
static const struct {
  const char *name;
  rnn_act_kind kind;
  int has_alpha, has_beta;
  float alpha, beta;
} rnn_act_table[] = {
    {"Relu", ACT_RELU, 0, 0, 0.f, 0.f},
    {"Tanh", ACT_TANH, 0, 0, 0.f, 0.f},
    {"Sigmoid", ACT_SIGMOID, 0, 0, 0.f, 0.f},
    {"Affine", ACT_AFFINE, 1, 1, 1.f, 0.f},
    {"LeakyRelu", ACT_LEAKYRELU, 1, 0, 0.01f, 0.f},
    {"ThresholdedRelu", ACT_THRESHOLDEDRELU, 1, 0, 1.f, 0.f},
    {"ScaledTanh", ACT_SCALEDTANH, 1, 1, 1.f, 1.f},
    {"HardSigmoid", ACT_HARDSIGMOID, 1, 1, 0.2f, 0.5f},
    {"Elu", ACT_ELU, 1, 0, 1.f, 0.f},
    {"Softsign", ACT_SOFTSIGN, 0, 0, 0.f, 0.f},
    {"Softplus", ACT_SOFTPLUS, 0, 0, 0.f, 0.f},
};

typedef struct {
  int lstm;                        /* 1 LSTM, 0 GRU */
  int G;                           /* gates: 4 (LSTM) or 3 (GRU) */
  int64_t S, B, I, H;              /* sequence length, batch, input size, hidden size */
  int ndir;                        /* 1 or 2 */
  int reverse;                     /* single direction running backwards */
  int layout;                      /* 0: [seq, batch, ...], 1: [batch, seq, ...] */
  int has_clip;
  float clip;
  int input_forget, linear_before_reset;
  rnn_act act[2][3];               /* per direction: f, g(, h) */
  const alma_tensor *X, *W, *R, *Bias, *seq_lens, *h0, *c0, *P;
  const struct rnn_packs *packs;   /* the node's packed W and R (float only), or NULL */
  const float *xw;                 /* float: the input projection X W^T + Wb given, [S * B, G * H], or NULL */
  alma_exec_ctx *ctx;              /* the run's context: its parallel loop, if any */
  int split;                       /* float LSTM: each step split over ctx's threads (rnn_split_ok) */
  /* float LSTM: step s's HR = Hs R^T + Rb [B, 4H] made by this hook instead, or NULL
   * (DynamicQuantizeLSTM's integer product; R is then not read) */
  alma_status (*hr)(void *arg, int64_t s, const float *Hs, float *HR);
  void *hr_arg;
} rnn_cfg;

static const alma_tensor *rnn_in(const alma_tensor *const *in, int nin, int i) { return i < nin ? in[i] : NULL; }

static int rnn_dtype_ok(const alma_node *n, alma_dtype t) {
  return t == ALMA_DTYPE_FLOAT32 || t == ALMA_DTYPE_FLOAT16 || t == ALMA_DTYPE_FLOAT64 ||
         (t == ALMA_DTYPE_BFLOAT16 && n->since_version >= 22);
}

static alma_status rnn_check_shape(const alma_node *n, const alma_tensor *t, const char *what, int rank,
                                   const int64_t *dims) {
  int ok = t->rank == rank;
  for (int i = 0; ok && i < rank; i++) ok = t->dims[i] == dims[i];
  if (ok) return ALMA_OK;
  char s1[128], s2[128];
  return alma__op_error(n, ALMA_ERR_SHAPE, "%s has shape %s, expected %s", what, alma__shape_str(t->rank, t->dims, s1, sizeof s1),
                        alma__shape_str(rank, dims, s2, sizeof s2));
}

/* Reads the activation list (names case-insensitive; alpha and beta lists consumed in order by
 * the functions that take them, defaults otherwise). */
static alma_status rnn_activations(const alma_node *n, rnn_cfg *c) {
  int per = c->lstm ? 3 : 2;
  static const char *const dflt[3] = {"Sigmoid", "Tanh", "Tanh"};
  const alma_attr *aa = alma__node_attr(n, "activations");
  int cnt = aa && aa->type == ALMA_ATTR_STRINGS ? aa->n : 0;
  if (aa && aa->type != ALMA_ATTR_STRINGS) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "activations must be a list of strings");
  /* a bidirectional node given one direction's list uses it for both */
  if (cnt && cnt != per * c->ndir && !(c->ndir == 2 && cnt == per))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%d activations given, expected %d", cnt, per * c->ndir);
  const float *al, *be;
  int nal = alma__attr_floats(n, "activation_alpha", &al), nbe = alma__attr_floats(n, "activation_beta", &be);
  int ia = 0, ib = 0;
  for (int d = 0; d < c->ndir; d++)
    for (int k = 0; k < per; k++) {
      const char *name = cnt ? aa->strings[cnt == per ? k : d * per + k] : dflt[k];
      size_t j = 0, nt = sizeof rnn_act_table / sizeof rnn_act_table[0];
      while (j < nt && strcasecmp(name, rnn_act_table[j].name)) j++;
      if (j == nt) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "activation function '%s'", name);
      rnn_act *a = &c->act[d][k];
      a->kind = rnn_act_table[j].kind;
      a->alpha = rnn_act_table[j].alpha;
      a->beta = rnn_act_table[j].beta;
      if (rnn_act_table[j].has_alpha && ia < nal) a->alpha = al[ia++];
      if (rnn_act_table[j].has_beta && ib < nbe) a->beta = be[ib++];
    }
  return ALMA_OK;
}

static alma_status rnn_cfg_make(const alma_node *n, int lstm, const alma_tensor *const *in, int nin, rnn_cfg *c) {
  char s1[128];
  memset(c, 0, sizeof *c);
  c->lstm = lstm;
  c->G = lstm ? 4 : 3;
  c->X = in[0];
  c->W = in[1];
  c->R = in[2];
  c->Bias = rnn_in(in, nin, 3);
  c->seq_lens = rnn_in(in, nin, 4);
  c->h0 = rnn_in(in, nin, 5);
  c->c0 = lstm ? rnn_in(in, nin, 6) : NULL;
  c->P = lstm ? rnn_in(in, nin, 7) : NULL;
  if (!c->X || !c->W || !c->R) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "X, W and R are required");
  alma_dtype dt = c->X->dtype;
  if (!rnn_dtype_ok(n, dt)) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(dt));
  const alma_tensor *same[] = {c->W, c->R, c->Bias, c->h0, c->c0, c->P};
  for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
    if (same[i] && same[i]->dtype != dt)
      return alma__op_error(n, ALMA_ERR_TYPE, "inputs mix dtypes %s and %s", alma_dtype_name(dt), alma_dtype_name(same[i]->dtype));
  if (c->seq_lens && c->seq_lens->dtype != ALMA_DTYPE_INT32)
    return alma__op_error(n, ALMA_ERR_TYPE, "sequence_lens must be int32, got %s", alma_dtype_name(c->seq_lens->dtype));

  c->layout = n->since_version >= 14 ? (int)alma__attr_i(n, "layout", 0) : 0;
  if (c->layout != 0 && c->layout != 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "layout %d", c->layout);
  const char *dir = alma__attr_s(n, "direction", "forward");
  if (!strcmp(dir, "forward")) c->ndir = 1;
  else if (!strcmp(dir, "reverse")) c->ndir = 1, c->reverse = 1;
  else if (!strcmp(dir, "bidirectional")) c->ndir = 2;
  else return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "direction '%s'", dir);

  if (c->X->rank != 3)
    return alma__op_error(n, ALMA_ERR_SHAPE, "X must be rank 3, got %s", alma__shape_str(c->X->rank, c->X->dims, s1, sizeof s1));
  c->S = c->X->dims[c->layout ? 1 : 0];
  c->B = c->X->dims[c->layout ? 0 : 1];
  c->I = c->X->dims[2];
  if (c->R->rank != 3) return alma__op_error(n, ALMA_ERR_SHAPE, "R must be rank 3");
  c->H = c->R->dims[2];
  const alma_attr *hs = alma__node_attr(n, "hidden_size");
  if (hs && hs->i != c->H)
    return alma__op_error(n, ALMA_ERR_SHAPE, "hidden_size %lld but R has %lld columns", (long long)hs->i, (long long)c->H);
  int64_t GH = c->G * c->H, nd = c->ndir;
  ALMA_TRY(rnn_check_shape(n, c->W, "W", 3, (int64_t[]){nd, GH, c->I}));
  ALMA_TRY(rnn_check_shape(n, c->R, "R", 3, (int64_t[]){nd, GH, c->H}));
  if (c->Bias) ALMA_TRY(rnn_check_shape(n, c->Bias, "B", 2, (int64_t[]){nd, 2 * GH}));
  if (c->seq_lens) ALMA_TRY(rnn_check_shape(n, c->seq_lens, "sequence_lens", 1, (int64_t[]){c->B}));
  int64_t sdims[3] = {nd, c->B, c->H};
  if (c->layout) sdims[0] = c->B, sdims[1] = nd;
  if (c->h0) ALMA_TRY(rnn_check_shape(n, c->h0, "initial_h", 3, sdims));
  if (c->c0) ALMA_TRY(rnn_check_shape(n, c->c0, "initial_c", 3, sdims));
  if (c->P) ALMA_TRY(rnn_check_shape(n, c->P, "P", 2, (int64_t[]){nd, 3 * c->H}));

  const alma_attr *cl = alma__node_attr(n, "clip");
  if (cl) {
    if (!(cl->f > 0.f)) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "clip %g must be positive", (double)cl->f);
    c->has_clip = 1;
    c->clip = cl->f;
  }
  if (lstm) {
    int64_t inf = alma__attr_i(n, "input_forget", 0);
    if (inf != 0 && inf != 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input_forget %lld", (long long)inf);
    c->input_forget = (int)inf;
  } else if (n->since_version >= 3) {
    c->linear_before_reset = alma__attr_i(n, "linear_before_reset", 0) != 0;
  }
  return rnn_activations(n, c);
}

static alma_status rnn_infer(const alma_node *n, int lstm, const alma_tensor *const *in, int nin, alma_tensor *out,
                             int nout) {
  rnn_cfg c;
  ALMA_TRY(rnn_cfg_make(n, lstm, in, nin, &c));
  alma_dtype dt = c.X->dtype;
  int64_t ydims[4] = {c.S, c.ndir, c.B, c.H}, sdims[3] = {c.ndir, c.B, c.H};
  if (c.layout) {
    ydims[0] = c.B, ydims[1] = c.S, ydims[2] = c.ndir;
    sdims[0] = c.B, sdims[1] = c.ndir;
  }
  if (nout > 0) alma__set_shape(&out[0], dt, 4, ydims);
  for (int k = 1; k < nout; k++) alma__set_shape(&out[k], dt, 3, sdims);
  return ALMA_OK;
}

/* sequence_lens values must lie in [0, seq_length] (known only at run time) */
static alma_status rnn_check_lens(const alma_node *n, const rnn_cfg *c) {
  if (!c->seq_lens) return ALMA_OK;
  const int32_t *l = c->seq_lens->data;
  for (int64_t b = 0; b < c->B; b++)
    if (l[b] < 0 || l[b] > c->S)
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "sequence_lens[%lld] = %d outside [0, %lld]", (long long)b, l[b],
                            (long long)c->S);
  return ALMA_OK;
}

static void rnn_cost(const alma_node *n, int lstm, const alma_tensor *const *in, int nin, const alma_tensor *out,
                     int nout, int64_t *macs, int64_t *flops) {
  const alma_tensor *X = in[0], *R = in[2];
  *macs = *flops = 0;
  if (!X || !R || X->rank != 3 || R->rank != 3) return;
  int64_t G = lstm ? 4 : 3, H = R->dims[2], nd = R->dims[0];
  int64_t steps = X->dims[0] * X->dims[1]; /* seq * batch in either layout */
  *macs = nd * steps * G * H * (X->dims[2] + H);
  *flops = 2 * *macs + nd * steps * H * (lstm ? 12 : 10); /* gate arithmetic and activations, roughly */
}

/* ---- packed constant weights ----
 * A node whose W and R are float32 graph constants keeps them packed for the packed kernel
 * (sgemm.h) in its prepared state, made on the first run within gemm_packed.h's budget (past it,
 * or for weights computed in the graph, each run packs R itself and the input projection runs on
 * the blocked SGEMM). Per direction: W as the input projection's op(B) (G * H columns), R's rows
 * for the per-step product (LSTM: all 4H; GRU: z and r) and, for GRU, its h rows apart. */
typedef struct rnn_packs {
  const void *w, *r; /* the data they were packed from */
  int64_t bytes;     /* taken from the budget */
  alma__sgemm_packed pw[2], pr[2], ph[2];
  float *wf, *rf;    /* DynamicQuantizeLSTM: its W and R dequantized (LSTM layout), or NULL */
  int integer;       /* DynamicQuantizeLSTM on the integer kernel: W and R in qw, qr instead */
  alma__qgemm_packed qw[2], qr[2];
} rnn_packs;

typedef struct rnn_state {
  alma_prepared hdr;
  _Atomic(rnn_packs *) e; /* written once (compare-and-swap), freed with the node */
} rnn_state;

static void rnn_packs_free(rnn_packs *e) {
  for (int d = 0; d < 2; d++) {
    alma__sgemm_packed_free(&e->pw[d]);
    alma__sgemm_packed_free(&e->pr[d]);
    alma__sgemm_packed_free(&e->ph[d]);
    alma__qgemm_free(&e->qw[d]);
    alma__qgemm_free(&e->qr[d]);
  }
  free(e->wf);
  free(e->rf);
  alma__packed_gemm_unreserve(e->bytes);
  free(e);
}

static void rnn_state_release(alma_prepared *self) {
  rnn_state *s = (rnn_state *)self;
  rnn_packs *e = atomic_load_explicit(&s->e, memory_order_acquire);
  if (e) rnn_packs_free(e);
  free(s);
}

static alma_status rnn_state_build(const alma_node *n, alma_prepared **out) {
  rnn_state *s = calloc(1, sizeof *s);
  if (!s) return alma__op_error(n, ALMA_ERR_NOMEM, "out of memory");
  s->hdr.release = rnn_state_release;
  atomic_init(&s->e, NULL);
  *out = &s->hdr;
  return ALMA_OK;
}

static int64_t rnn_pack_bytes(int64_t K, int64_t N) { return K * ((N + ALMA_SGEMM_PANEL - 1) / ALMA_SGEMM_PANEL * ALMA_SGEMM_PANEL) * 4; }

/* Packs every block (NULL when out of memory, or over the budget: nothing taken then). */
static rnn_packs *rnn_packs_make(const rnn_cfg *c) {
  int64_t H = c->H, I = c->I, GH = c->G * H, nr = c->lstm ? GH : 2 * H, nd = c->ndir;
  int64_t bytes = nd * (rnn_pack_bytes(I, GH) + rnn_pack_bytes(H, nr) + (c->lstm ? 0 : rnn_pack_bytes(H, H)));
  if (!alma__packed_gemm_reserve(bytes)) return NULL;
  rnn_packs *e = calloc(1, sizeof *e);
  if (!e) {
    alma__packed_gemm_unreserve(bytes);
    return NULL;
  }
  e->w = c->W->data;
  e->r = c->R->data;
  e->bytes = bytes;
  const float *W = c->W->data, *R = c->R->data;
  alma_status st = ALMA_OK;
  for (int64_t d = 0; d < nd && st == ALMA_OK; d++) {
    const float *Rd = R + d * GH * H;
    st = alma__sgemm_pack(1, I, GH, W + d * GH * I, I, &e->pw[d]);
    if (st == ALMA_OK) st = alma__sgemm_pack(1, H, nr, Rd, H, &e->pr[d]);
    if (st == ALMA_OK && !c->lstm) st = alma__sgemm_pack(1, H, H, Rd + 2 * H * H, H, &e->ph[d]);
  }
  if (st != ALMA_OK) {
    alma__error_clear();
    rnn_packs_free(e);
    return NULL;
  }
  return e;
}

/* The node's packed weights, or NULL (the per-call path). */
static const rnn_packs *rnn_packs_get(alma_exec_ctx *ctx, const alma_node *n, const rnn_cfg *c) {
  if (c->X->dtype != ALMA_DTYPE_FLOAT32 || c->I < 1 || c->H < 1 || !alma__packed_gemm_enabled() ||
      !alma__exec_input_is_const(ctx, n, 1, c->W) || !alma__exec_input_is_const(ctx, n, 2, c->R))
    return NULL;
  const alma_prepared *pp;
  if (alma__node_prepared(n, rnn_state_build, &pp) != ALMA_OK) {
    alma__error_clear();
    return NULL;
  }
  rnn_state *s = (rnn_state *)pp;
  rnn_packs *e = atomic_load_explicit(&s->e, memory_order_acquire);
  if (!e) {
    rnn_packs *mine = rnn_packs_make(c);
    if (!mine) return NULL;
    if (atomic_compare_exchange_strong_explicit(&s->e, &e, mine, memory_order_acq_rel, memory_order_acquire)) e = mine;
    else rnn_packs_free(mine); /* another thread packed first: e is its copy */
  }
  return e->w == c->W->data && e->r == c->R->data ? e : NULL;
}

/* Each step of a float LSTM is split over the context's threads by hidden unit (lstm_split_steps),
 * the directions then one after the other, when R's block of a direction is larger than a core's
 * L2 and there are more threads than directions, or each thread's share of the block fits its L2.
 * A step's product at batch 1 is bound by reading R: from L3 when it is larger than L2, at the
 * bandwidth of one core, so a direction on one thread leaves the other cores' bandwidth unused;
 * split, each thread reads its share from its own L2 at every step. Within L2 the fork-join at
 * every step costs more than it saves. Measured on a 2-core Sapphire Rapids (2 MB of L2 a core),
 * one LSTM node, 22 steps, batch 1, 2 threads, median ms unsplit -> split: 512 units forward (R
 * 4 MB) 6.2 -> 2.6 (ONNX Runtime 2.6 in the same run); bidirectional (directions in parallel ->
 * one after the other, each split) 3.7 -> 2.0 (ONNX Runtime 2.0); 256 units (1 MB) 0.80 ->
 * 0.79-0.93; 128 units 0.26 -> 0.34. */
static int64_t rnn_l2_bytes(void) {
  static _Atomic int64_t l2;
  int64_t v = atomic_load_explicit(&l2, memory_order_relaxed);
  if (!v) {
    long s = sysconf(_SC_LEVEL2_CACHE_SIZE);
    v = s > 0 ? s : 1 << 20; /* unknown: 1 MB, the common size of this decade's x86 cores */
    atomic_store_explicit(&l2, v, memory_order_relaxed);
  }
  return v;
}

static int rnn_split_ok(const rnn_cfg *c) {
  alma_exec_parfor pf;
  void *pctx;
  int64_t rb = 16 * c->H * c->H, l2 = rnn_l2_bytes();
  int t = alma__exec_parfor(c->ctx, &pf, &pctx);
  return c->lstm && !c->hr && c->X->dtype == ALMA_DTYPE_FLOAT32 && c->H % ALMA_SGEMM_PANEL == 0 &&
         c->B <= ALMA_PACKED_MAX_ROWS && alma__packed_gemm_enabled() && rb > l2 && t > 1 && (t > c->ndir || rb / t <= l2);
}

/* ---- typed kernels: float and double ---- */
/* RNN_M(f): the libm function of the real type (tanhf or tanh ...) */
/* RNN_F32: the float instantiation, which runs on the project's SGEMM and vectorised activations */
#define ALMA_RNN_REAL float
#define RNN_FN(name) name##_f32
#define RNN_M(fn) fn##f
#define RNN_F32 1
#include "ops/rnn.c"
#undef ALMA_RNN_REAL
#undef RNN_FN
#undef RNN_M
#undef RNN_F32
#define ALMA_RNN_REAL double
#define RNN_FN(name) name##_f64
#define RNN_M(fn) fn
#define RNN_F32 0
#include "ops/rnn.c"
#undef ALMA_RNN_REAL
#undef RNN_FN
#undef RNN_M
#undef RNN_F32

static alma_status rnn_exec(alma_exec_ctx *ctx, const alma_node *n, int lstm, const alma_tensor *const *in, int nin,
                            alma_tensor *out, int nout) {
  rnn_cfg c;
  ALMA_TRY(rnn_cfg_make(n, lstm, in, nin, &c));
  ALMA_TRY(rnn_check_lens(n, &c));
  c.ctx = ctx;
  c.packs = rnn_packs_get(ctx, n, &c);
  c.split = rnn_split_ok(&c);
  alma_tensor *Y = nout > 0 && out[0].data ? &out[0] : NULL;
  alma_tensor *Yh = nout > 1 && out[1].data ? &out[1] : NULL;
  alma_tensor *Yc = lstm && nout > 2 && out[2].data ? &out[2] : NULL;
  alma_status st = c.X->dtype == ALMA_DTYPE_FLOAT64 ? rnn_run_f64(&c, Y, Yh, Yc) : rnn_run_f32(&c, Y, Yh, Yc);
  if (st == ALMA_ERR_NOMEM) return alma__op_error(n, st, "work buffers");
  return st;
}

/* ---- LSTM ---- */
static alma_status lstm_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  return rnn_infer(n, 1, in, nin, out, nout);
}
static alma_status lstm_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  return rnn_exec(ctx, n, 1, in, nin, out, nout);
}
static void lstm_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                      int64_t *macs, int64_t *flops) {
  rnn_cost(n, 1, in, nin, out, nout, macs, flops);
}
const alma_op_def alma__op_LSTM = {.name = "LSTM", .domain = "", .versions = {1, 7, 14, 22},
  .min_inputs = 3, .max_inputs = 8, .min_outputs = 0, .max_outputs = 3,
  .infer = lstm_infer, .exec = lstm_exec, .cost = lstm_cost};

/* ---- com.microsoft DynamicQuantizeLSTM (ONNX Runtime's dynamic quantizer writes it for LSTM) ----
 * W [D, I, 4H] and R [D, H, 4H] are int8 or uint8 (note: transposed against LSTM's [D, 4H, I]) with
 * scale and zero point of shape [D] (per direction) or [D, 4H] (per gate row); inputs 8-11. The
 * activations are quantized as ONNX Runtime's kernel (the reference for this contrib op) does: X
 * to uint8 once per direction (one scale and zero point over the steps the batch runs, the range
 * widened to hold 0), the hidden state before each step's product with R (over the batch's rows),
 * each product (q - zero point) x (q_w - zero point_w) x both scales. Here the weights are
 * dequantized into LSTM's layout (and packed: both kept by the node when they are graph
 * constants, as LSTM's), X and each step's H quantized and dequantized, the input projection of
 * all steps taken at once, and the float LSTM runs one step at a time: the same products up to
 * float rounding. Not followed: ONNX Runtime
 * splitting a large batch across threads, which then quantizes H per part. */
typedef struct {
  alma_tensor W, R;          /* float, LSTM layout; data owned when dequantized (exec) */
  const alma_tensor *in[8];
} dq_lstm;

static alma_status dq_param(const alma_node *n, const alma_tensor *t, const char *what, int64_t D, int64_t GH,
                            alma_dtype want, int *per_row) {
  if (!t) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%s is required", what);
  if (t->dtype != want)
    return alma__op_error(n, ALMA_ERR_TYPE, "%s must be %s, got %s", what, alma_dtype_name(want), alma_dtype_name(t->dtype));
  int64_t cnt = alma__numel(t->rank, t->dims);
  if (cnt == D && t->rank <= 1) *per_row = 0;
  else if (cnt == D * GH && t->rank == 2 && t->dims[0] == D) *per_row = 1;
  else {
    char s1[96];
    return alma__op_error(n, ALMA_ERR_SHAPE, "%s has shape %s, expected [%lld] or [%lld, %lld]", what,
                          alma__shape_str(t->rank, t->dims, s1, sizeof s1), (long long)D, (long long)D, (long long)GH);
  }
  return ALMA_OK;
}

/* q [D, K, GH] (int8/uint8) -> out [D, GH, K] float = (q - zp) * scale; data only when fill. */
static alma_status dq_matrix(const alma_node *n, const alma_tensor *q, const alma_tensor *sc, const alma_tensor *zp,
                             const char *what, int64_t D, int64_t K, int64_t GH, int fill, alma_tensor *out) {
  char s1[96];
  if (!q) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%s is required", what);
  if (q->dtype != ALMA_DTYPE_INT8 && q->dtype != ALMA_DTYPE_UINT8)
    return alma__op_error(n, ALMA_ERR_TYPE, "%s must be int8 or uint8, got %s", what, alma_dtype_name(q->dtype));
  if (q->rank != 3 || q->dims[0] != D || q->dims[1] != K || q->dims[2] != GH)
    return alma__op_error(n, ALMA_ERR_SHAPE, "%s has shape %s, expected [%lld, %lld, %lld]", what,
                          alma__shape_str(q->rank, q->dims, s1, sizeof s1), (long long)D, (long long)K, (long long)GH);
  int srow, zrow;
  char nm[32];
  snprintf(nm, sizeof nm, "%s_scale", what);
  ALMA_TRY(dq_param(n, sc, nm, D, GH, ALMA_DTYPE_FLOAT32, &srow));
  snprintf(nm, sizeof nm, "%s_zero_point", what);
  ALMA_TRY(dq_param(n, zp, nm, D, GH, q->dtype, &zrow));
  memset(out, 0, sizeof *out);
  alma__set_shape(out, ALMA_DTYPE_FLOAT32, 3, (int64_t[]){D, GH, K});
  if (!fill) return ALMA_OK;
  float *w = malloc((size_t)(D * GH * K) * sizeof *w + 1);
  if (!w) return alma__op_error(n, ALMA_ERR_NOMEM, "dequantized %s", what);
  const float *s = sc->data;
  for (int64_t d = 0; d < D; d++)
    for (int64_t g = 0; g < GH; g++) {
      float f = s[srow ? d * GH + g : d];
      int64_t zi = zrow ? d * GH + g : d;
      int32_t z = q->dtype == ALMA_DTYPE_INT8 ? ((const int8_t *)zp->data)[zi] : ((const uint8_t *)zp->data)[zi];
      for (int64_t k = 0; k < K; k++) {
        int64_t qi = (d * K + k) * GH + g;
        int32_t v = q->dtype == ALMA_DTYPE_INT8 ? ((const int8_t *)q->data)[qi] : ((const uint8_t *)q->data)[qi];
        w[(d * GH + g) * K + k] = (float)(v - z) * f;
      }
    }
  out->data = w;
  out->nbytes = (size_t)(D * GH * K) * sizeof *w;
  out->owns_data = 1;
  return ALMA_OK;
}

static void dq_lstm_free(dq_lstm *q) {
  alma_tensor_free_data(&q->W);
  alma_tensor_free_data(&q->R);
}

/* The LSTM's 8 inputs with W and R dequantized (fill: with data, else shapes only). */
static alma_status dq_lstm_make(const alma_node *n, const alma_tensor *const *in, int nin, int fill, dq_lstm *q) {
  memset(q, 0, sizeof *q);
  const alma_tensor *X = in[0], *W = rnn_in(in, nin, 1), *R = rnn_in(in, nin, 2);
  if (!X || !W || !R) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "X, W and R are required");
  if (X->dtype != ALMA_DTYPE_FLOAT32)
    return alma__op_error(n, ALMA_ERR_TYPE, "X must be float32, got %s", alma_dtype_name(X->dtype));
  if (X->rank != 3 || W->rank != 3 || R->rank != 3)
    return alma__op_error(n, ALMA_ERR_SHAPE, "X, W and R must be rank 3");
  int64_t D = W->dims[0], GH = W->dims[2], I = X->dims[2], H = GH / 4;
  if (GH % 4) return alma__op_error(n, ALMA_ERR_SHAPE, "W's last dimension %lld is not 4 * hidden_size", (long long)GH);
  alma_status st = dq_matrix(n, W, rnn_in(in, nin, 8), rnn_in(in, nin, 9), "W", D, I, GH, fill, &q->W);
  if (st == ALMA_OK) st = dq_matrix(n, R, rnn_in(in, nin, 10), rnn_in(in, nin, 11), "R", D, H, GH, fill, &q->R);
  if (st != ALMA_OK) {
    dq_lstm_free(q);
    return st;
  }
  for (int k = 0; k < 8; k++) q->in[k] = rnn_in(in, nin, k);
  q->in[1] = &q->W;
  q->in[2] = &q->R;
  return ALMA_OK;
}

static alma_status dqlstm_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  dq_lstm q;
  ALMA_TRY(dq_lstm_make(n, in, nin, 0, &q));
  return rnn_infer(n, 1, q.in, 8, out, nout);
}
/* ONNX Runtime's dynamic uint8 parameters of n values: the range widened to hold 0, 255 steps. */
static void dq_act_params(const float *v, int64_t n, float *scale, float *zp) {
  float lo = 0.f, hi = 0.f;
  for (int64_t i = 0; i < n; i++) lo = v[i] < lo ? v[i] : lo, hi = v[i] > hi ? v[i] : hi;
  *scale = hi == lo ? 1.f : (hi - lo) / 255.f;
  float z = -lo / *scale;
  *zp = nearbyintf(z < 0.f ? 0.f : z > 255.f ? 255.f : z);
}

/* v quantized to uint8 (x / scale rounded to even, plus zp, saturated) and back. */
static void dq_act_round(float *v, int64_t n, float scale, float zp) {
  for (int64_t i = 0; i < n; i++) {
    float q = nearbyintf(v[i] / scale) + zp;
    q = q < 0.f ? 0.f : q > 255.f ? 255.f : q;
    v[i] = (q - zp) * scale;
  }
}

/* A [1, ...] view of direction d of a [D, ...] tensor (NULL stays NULL). */
static const alma_tensor *dq_dir(const alma_tensor *t, int64_t d, alma_tensor *view) {
  if (!t) return NULL;
  *view = alma__tensor_view(t);
  int64_t per = alma__numel(t->rank - 1, t->dims + 1);
  view->dims[0] = 1;
  view->data = (char *)t->data + (size_t)(d * per) * alma_dtype_size(t->dtype);
  view->nbytes = (size_t)per * alma_dtype_size(t->dtype);
  return view;
}

/* One DynamicQuantizeLSTM call: what both directions read, and each direction's status. */
typedef struct dq_job {
  const alma_node *n;
  const rnn_cfg *c;
  const rnn_packs *pk;
  const float *xq; /* X quantized and dequantized, [S, B, I] */
  const int32_t *lens;
  int64_t maxlen;
  alma_tensor *Y, *Yh, *Yc;
  alma_status st[2];
} dq_job;

/* Direction d, on its own work buffers (the two directions may run at once). */
static alma_status dq_dir_run(const dq_job *j, int d) {
  const alma_node *n = j->n;
  const rnn_cfg *cp = j->c;
  const int64_t S = cp->S, B = cp->B, I = cp->I, H = cp->H, maxlen = j->maxlen;
  const int32_t *lens = j->lens;
  const float *xq = j->xq;
  alma_tensor *Y = j->Y, *Yh = j->Yh, *Yc = j->Yc;
  float *xs = malloc(sizeof(float) * (size_t)(B * I + 1));
  /* the input projection of all steps, one product (a step takes its rows) */
  float *xwall = malloc(sizeof(float) * (size_t)(S * B * 4 * H + 1)), *xws = malloc(sizeof(float) * (size_t)(B * 4 * H + 1));
  float *h = malloc(sizeof(float) * (size_t)(4 * B * H + 1)), *cc = h + B * H, *hq = cc + B * H, *tmp = hq + B * H;
  alma_tensor t_x, t_hq, t_c, t_yh, t_yc, vw, vr, vb, vp;
  memset(&t_yh, 0, sizeof t_yh);
  memset(&t_yc, 0, sizeof t_yc);
  alma_status st = xs && h && xwall && xws ? ALMA_OK : alma__op_error(n, ALMA_ERR_NOMEM, "work buffers");
  if (st == ALMA_OK) st = alma__tensor_alloc(&t_yh, ALMA_DTYPE_FLOAT32, 3, (int64_t[]){1, B, H});
  if (st == ALMA_OK) st = alma__tensor_alloc(&t_yc, ALMA_DTYPE_FLOAT32, 3, (int64_t[]){1, B, H});
  int back = cp->ndir == 2 ? d == 1 : cp->reverse;
  rnn_cfg s1 = *cp;
  s1.S = 1, s1.ndir = 1, s1.reverse = 0, s1.ctx = NULL;
  memcpy(s1.act[0], cp->act[d], sizeof s1.act[0]);
  s1.W = dq_dir(cp->W, d, &vw), s1.R = dq_dir(cp->R, d, &vr), s1.Bias = dq_dir(cp->Bias, d, &vb), s1.P = dq_dir(cp->P, d, &vp);
  s1.seq_lens = NULL;
  const rnn_packs *pk = j->pk;
  rnn_packs view; /* direction d's packed blocks as a one-direction node's (never freed: pk's) */
  if (pk) {
    memset(&view, 0, sizeof view);
    view.pw[0] = pk->pw[d], view.pr[0] = pk->pr[d];
    view.w = s1.W->data, view.r = s1.R->data;
    s1.packs = &view;
  }
  const float *wb = cp->Bias ? (const float *)cp->Bias->data + d * 8 * H : NULL;
  if (st == ALMA_OK && S * B > 0 && I > 0) {
    if (pk)
      alma__sgemm_packed_rows(S * B, 0, pk->pw[d].panels, 1.0f, xq, I, &pk->pw[d], 0.0f, xwall, 4 * H, NULL, wb);
    else
      st = alma__sgemm_bias(0, 1, S * B, 4 * H, I, 1.0f, xq, I, (const float *)cp->W->data + d * 4 * H * I, I, 0.0f,
                            xwall, 4 * H, NULL, wb);
  }
  if (st == ALMA_OK && I < 1)
    for (int64_t r = 0; r < S * B; r++)
      for (int64_t k = 0; k < 4 * H; k++) xwall[r * 4 * H + k] = wb ? wb[k] : 0.f;
  s1.xw = xws;
  for (int64_t k = 0; st == ALMA_OK && k < B * H; k++) {
    h[k] = cp->h0 ? ((const float *)cp->h0->data)[d * B * H + k] : 0.f;
    cc[k] = cp->c0 ? ((const float *)cp->c0->data)[d * B * H + k] : 0.f;
  }
  for (int64_t s = 0; st == ALMA_OK && s < maxlen; s++) {
    for (int64_t b = 0; b < B; b++) {
      int64_t len = lens ? lens[b] : S, t = s < len ? (back ? len - 1 - s : s) : 0;
      memcpy(xs + b * I, xq + (t * B + b) * I, sizeof(float) * (size_t)I);
      memcpy(xws + b * 4 * H, xwall + (t * B + b) * 4 * H, sizeof(float) * (size_t)(4 * H));
      /* the rows ORT's product reads: a finished row holds 0 when Y is written, else its state */
      for (int64_t k = 0; k < H; k++) hq[b * H + k] = s > 0 && s >= len && Y ? 0.f : h[b * H + k];
    }
    float hs, hz;
    dq_act_params(hq, B * H, &hs, &hz);
    dq_act_round(hq, B * H, hs, hz);
    t_x = (alma_tensor){.dtype = ALMA_DTYPE_FLOAT32, .rank = 3, .dims = {1, B, I}, .data = xs,
                        .nbytes = sizeof(float) * (size_t)(B * I)};
    t_hq = (alma_tensor){.dtype = ALMA_DTYPE_FLOAT32, .rank = 3, .dims = {1, B, H}, .data = hq,
                         .nbytes = sizeof(float) * (size_t)(B * H)};
    memcpy(tmp, cc, sizeof(float) * (size_t)(B * H));
    t_c = (alma_tensor){.dtype = ALMA_DTYPE_FLOAT32, .rank = 3, .dims = {1, B, H}, .data = tmp,
                        .nbytes = sizeof(float) * (size_t)(B * H)};
    s1.X = &t_x, s1.h0 = &t_hq, s1.c0 = &t_c;
    st = rnn_run_f32(&s1, NULL, &t_yh, &t_yc);
    if (st == ALMA_ERR_NOMEM) st = alma__op_error(n, st, "work buffers");
    for (int64_t b = 0; st == ALMA_OK && b < B; b++) {
      int64_t len = lens ? lens[b] : S;
      if (s >= len) continue; /* finished: its state stays */
      int64_t t = back ? len - 1 - s : s;
      memcpy(h + b * H, (const float *)t_yh.data + b * H, sizeof(float) * (size_t)H);
      memcpy(cc + b * H, (const float *)t_yc.data + b * H, sizeof(float) * (size_t)H);
      if (Y) memcpy((float *)Y->data + ((t * cp->ndir + d) * B + b) * H, h + b * H, sizeof(float) * (size_t)H);
    }
  }
  for (int64_t b = 0; st == ALMA_OK && b < B; b++) {
    int zero = lens && lens[b] == 0; /* no step: ORT's final states are zeros */
    for (int64_t k = 0; k < H; k++) {
      if (Yh) ((float *)Yh->data)[(d * B + b) * H + k] = zero ? 0.f : h[b * H + k];
      if (Yc) ((float *)Yc->data)[(d * B + b) * H + k] = zero ? 0.f : cc[b * H + k];
    }
  }
  alma_tensor_free_data(&t_yh);
  alma_tensor_free_data(&t_yc);
  free(xs);
  free(xwall);
  free(xws);
  free(h);
  return st;
}

static void dq_dir_item(void *arg, int64_t d) {
  dq_job *j = arg;
  j->st[d] = dq_dir_run(j, (int)d);
}

static alma_status dqlstm_run(alma_exec_ctx *ctx, const alma_node *n, const dq_lstm *q, const rnn_packs *pk,
                              alma_tensor *out, int nout) {
  rnn_cfg c;
  ALMA_TRY(rnn_cfg_make(n, 1, q->in, 8, &c));
  ALMA_TRY(rnn_check_lens(n, &c));
  const int64_t S = c.S, B = c.B, I = c.I;
  dq_job j = {.n = n, .c = &c, .pk = pk, .lens = c.seq_lens ? c.seq_lens->data : NULL};
  j.Y = nout > 0 && out[0].data ? &out[0] : NULL;
  j.Yh = nout > 1 && out[1].data ? &out[1] : NULL;
  j.Yc = nout > 2 && out[2].data ? &out[2] : NULL;
  for (int64_t b = 0; b < B; b++) {
    int64_t len = j.lens ? j.lens[b] : S;
    j.maxlen = len > j.maxlen ? len : j.maxlen;
  }
  float *xq = malloc(sizeof(float) * (size_t)(S * B * I + 1));
  if (!xq) return alma__op_error(n, ALMA_ERR_NOMEM, "work buffers");
  float xscale = 1.f, xzp = 0.f;
  memcpy(xq, c.X->data, sizeof(float) * (size_t)(S * B * I));
  dq_act_params(xq, j.maxlen * B * I, &xscale, &xzp); /* the rows the batch runs, as ORT's one product */
  dq_act_round(xq, S * B * I, xscale, xzp);
  if (j.Y) memset(j.Y->data, 0, j.Y->nbytes);
  j.xq = xq;
  alma_exec_parfor pf;
  void *pctx;
  alma_status st = ALMA_OK;
  /* two directions, two threads: one each, as LSTM's (a step's products are too small to split) */
  if (c.ndir == 2 && alma__exec_parfor(ctx, &pf, &pctx) >= 2) {
    pf(pctx, 2, dq_dir_item, &j);
    st = j.st[0] != ALMA_OK ? j.st[0] : j.st[1];
  } else {
    for (int d = 0; d < c.ndir && st == ALMA_OK; d++) st = dq_dir_run(&j, d);
  }
  free(xq);
  return st;
}

/* The node's dequantized and packed W and R: kept in its prepared state when its quantized W and R
 * are graph constants (made on the first run, within the packed-weights budget with the
 * dequantized copies counted), else packed for this call (*mine: the caller frees it); NULL past
 * the budget. q holds the dequantized W and R (views on the kept copies once they are kept). */
static const rnn_packs *dqlstm_packs(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                                     dq_lstm *q, rnn_packs **mine, alma_status *st) {
  *mine = NULL;
  int keep = alma__packed_gemm_enabled() && alma__exec_input_is_const(ctx, n, 1, in[1]) &&
             alma__exec_input_is_const(ctx, n, 2, in[2]);
  rnn_state *s = NULL;
  const alma_prepared *pp;
  if (keep && alma__node_prepared(n, rnn_state_build, &pp) == ALMA_OK) s = (rnn_state *)pp;
  else alma__error_clear();
  rnn_packs *e = s ? atomic_load_explicit(&s->e, memory_order_acquire) : NULL;
  if (e && !e->integer && e->w == in[1]->data && e->r == in[2]->data) {
    if ((*st = dq_lstm_make(n, in, nin, 0, q)) != ALMA_OK) return NULL;
    q->W.data = e->wf, q->W.owns_data = 0;
    q->R.data = e->rf, q->R.owns_data = 0;
    return e;
  }
  if ((*st = dq_lstm_make(n, in, nin, 1, q)) != ALMA_OK) return NULL;
  rnn_cfg c;
  if (!alma__packed_gemm_enabled() || rnn_cfg_make(n, 1, q->in, 8, &c) != ALMA_OK || c.I < 1 || c.H < 1) {
    alma__error_clear();
    return NULL;
  }
  rnn_packs *p = rnn_packs_make(&c);
  if (!p) return NULL;
  int64_t deq = (int64_t)(q->W.nbytes + q->R.nbytes);
  if (s && !e && alma__packed_gemm_reserve(deq)) {
    p->w = in[1]->data, p->r = in[2]->data; /* keyed by the quantized weights */
    p->wf = q->W.data, p->rf = q->R.data;
    p->bytes += deq;
    if (atomic_compare_exchange_strong_explicit(&s->e, &e, p, memory_order_acq_rel, memory_order_acquire)) {
      q->W.owns_data = q->R.owns_data = 0; /* the node's now */
      return p;
    }
    p->wf = p->rf = NULL; /* another thread kept its copy first: this one serves this call */
    p->bytes -= deq;
    alma__packed_gemm_unreserve(deq);
  }
  *mine = p;
  return p;
}

/* ---- DynamicQuantizeLSTM on the integer kernel (qgemm.h: CPUs with AVX-512 VNNI) ----
 * The products are ONNX Runtime's: uint8 X (and each step's H) against the int8/uint8 weights in
 * int32, scaled by both scales; the LSTM's gates then run as LSTM's (rnn_direction, with the input
 * projection given and the recurrent product made by dq_hr). */

/* q[i] = saturate(round_even(v[i] / scale) + zp): dq_act_round's rounding, kept in uint8. */
static void dq_act_q8(const float *v, int64_t n, float scale, float zp, uint8_t *q) {
  for (int64_t i = 0; i < n; i++) {
    float f = nearbyintf(v[i] / scale) + zp;
    q[i] = (uint8_t)(f < 0.f ? 0.f : f > 255.f ? 255.f : f);
  }
}

/* Direction d's weight scales and zero points per gate row (GH of each). */
static void dq_wparams(const alma_tensor *sc, const alma_tensor *zp, int64_t d, int64_t GH, float *s, int32_t *z) {
  /* [D] or [D, GH] (dq_param checked which) */
  int srow = sc->rank == 2, zrow = zp->rank == 2;
  for (int64_t g = 0; g < GH; g++) {
    s[g] = ((const float *)sc->data)[srow ? d * GH + g : d];
    int64_t zi = zrow ? d * GH + g : d;
    z[g] = zp->dtype == ALMA_DTYPE_INT8 ? ((const int8_t *)zp->data)[zi] : ((const uint8_t *)zp->data)[zi];
  }
}

typedef struct dq_hr_arg {
  const alma__qgemm_packed *qr;
  const float *rs, *rb; /* R's scales, R's bias (or NULL), per gate row */
  const int32_t *rz;
  const int32_t *lens;
  int64_t S, B, H;
  int y;           /* Y is written: finished rows enter the product as 0, as ONNX Runtime's */
  float *hf;       /* [B, H] */
  uint8_t *hq;     /* [B, H] */
  int32_t *zh, *acc; /* [B], [B, 4H] */
} dq_hr_arg;

static alma_status dq_hr(void *arg, int64_t s, const float *Hs, float *HR) {
  dq_hr_arg *a = arg;
  int64_t B = a->B, H = a->H, GH = 4 * H;
  for (int64_t b = 0; b < B; b++) {
    int64_t len = a->lens ? a->lens[b] : a->S;
    for (int64_t k = 0; k < H; k++) a->hf[b * H + k] = s > 0 && s >= len && a->y ? 0.f : Hs[b * H + k];
  }
  float hs, hz;
  dq_act_params(a->hf, B * H, &hs, &hz);
  dq_act_q8(a->hf, B * H, hs, hz, a->hq);
  for (int64_t b = 0; b < B; b++) a->zh[b] = (int32_t)hz;
  alma__qgemm_run(B, a->hq, H, a->zh, a->qr, a->rz, 0, a->qr->panels, a->acc, GH);
  for (int64_t b = 0; b < B; b++)
    for (int64_t g = 0; g < GH; g++)
      HR[b * GH + g] = (float)a->acc[b * GH + g] * (hs * a->rs[g]) + (a->rb ? a->rb[g] : 0.f);
  return ALMA_OK;
}

typedef struct dqi_job {
  const alma_node *n;
  const rnn_cfg *c;
  const rnn_packs *pk;
  const alma_tensor *ws, *wz, *rs, *rz; /* inputs 8-11 */
  const uint8_t *xq;
  float xs, xz;
  alma_tensor *Y, *Yh, *Yc;
  alma_status st[2];
} dqi_job;

/* A [1, ...] view of a [D, ...] tensor's shape (no data: the integer path reads none). */
static const alma_tensor *dq_shape1(const alma_tensor *t, alma_tensor *view) {
  *view = alma__tensor_view(t);
  view->dims[0] = 1;
  view->nbytes = 0;
  return view;
}

static alma_status dqi_dir_run(const dqi_job *j, int d) {
  const rnn_cfg *cp = j->c;
  const int64_t S = cp->S, B = cp->B, I = cp->I, H = cp->H, GH = 4 * H, SB = S * B;
  const int32_t *lens = cp->seq_lens ? cp->seq_lens->data : NULL;
  float *wsc = malloc(sizeof(float) * (size_t)(2 * GH)), *rsc = wsc ? wsc + GH : NULL;
  int32_t *wz = malloc(sizeof(int32_t) * (size_t)(2 * GH + SB + B + 1)), *rz = wz ? wz + GH : NULL;
  int32_t *zx = wz ? rz + GH : NULL, *zh = zx ? zx + SB : NULL;
  float *xw = malloc(sizeof(float) * (size_t)(SB * GH + 1)), *hf = malloc(sizeof(float) * (size_t)(B * H + 1));
  int32_t *acc = malloc(sizeof(int32_t) * (size_t)((SB > B ? SB : B) * GH + 1));
  uint8_t *hq = malloc((size_t)(B * H + 1));
  alma_tensor t_y, t_yh, t_yc, vw, vr, vb, vp, vh, vc;
  memset(&t_y, 0, sizeof t_y);
  memset(&t_yh, 0, sizeof t_yh);
  memset(&t_yc, 0, sizeof t_yc);
  alma_status st = wsc && wz && xw && hf && acc && hq ? ALMA_OK : ALMA_ERR_NOMEM;
  if (st == ALMA_OK && j->Y) st = alma__tensor_alloc(&t_y, ALMA_DTYPE_FLOAT32, 4, (int64_t[]){S, 1, B, H});
  if (st == ALMA_OK) st = alma__tensor_alloc(&t_yh, ALMA_DTYPE_FLOAT32, 3, (int64_t[]){1, B, H});
  if (st == ALMA_OK) st = alma__tensor_alloc(&t_yc, ALMA_DTYPE_FLOAT32, 3, (int64_t[]){1, B, H});
  if (st == ALMA_OK) {
    dq_wparams(j->ws, j->wz, d, GH, wsc, wz);
    dq_wparams(j->rs, j->rz, d, GH, rsc, rz);
    const float *wb = cp->Bias ? (const float *)cp->Bias->data + d * 8 * H : NULL;
    /* the input projection of every step: one integer product */
    for (int64_t r = 0; r < SB; r++) zx[r] = (int32_t)j->xz;
    if (I > 0) alma__qgemm_run(SB, j->xq, I, zx, &j->pk->qw[d], wz, 0, j->pk->qw[d].panels, acc, GH);
    for (int64_t r = 0; r < SB; r++)
      for (int64_t g = 0; g < GH; g++)
        xw[r * GH + g] = (I > 0 ? (float)acc[r * GH + g] * (j->xs * wsc[g]) : 0.f) + (wb ? wb[g] : 0.f);
    dq_hr_arg ha = {.qr = &j->pk->qr[d], .rs = rsc, .rb = wb ? wb + GH : NULL, .rz = rz, .lens = lens, .S = S, .B = B,
                    .H = H, .y = j->Y != NULL, .hf = hf, .hq = hq, .zh = zh, .acc = acc};
    rnn_cfg s1 = *cp;
    s1.ndir = 1, s1.reverse = cp->ndir == 2 ? d == 1 : cp->reverse, s1.ctx = NULL, s1.packs = NULL;
    memcpy(s1.act[0], cp->act[d], sizeof s1.act[0]);
    s1.W = dq_shape1(cp->W, &vw), s1.R = dq_shape1(cp->R, &vr);
    s1.Bias = dq_dir(cp->Bias, d, &vb), s1.P = dq_dir(cp->P, d, &vp);
    s1.h0 = dq_dir(cp->h0, d, &vh), s1.c0 = dq_dir(cp->c0, d, &vc);
    s1.xw = xw, s1.hr = dq_hr, s1.hr_arg = &ha;
    st = rnn_run_f32(&s1, j->Y ? &t_y : NULL, &t_yh, &t_yc);
  }
  if (st == ALMA_OK && j->Y)
    for (int64_t t = 0; t < S; t++)
      for (int64_t b = 0; b < B; b++)
        memcpy((float *)j->Y->data + ((t * cp->ndir + d) * B + b) * H, (const float *)t_y.data + (t * B + b) * H,
               sizeof(float) * (size_t)H);
  for (int64_t b = 0; st == ALMA_OK && b < B; b++) {
    int zero = lens && lens[b] == 0; /* no step: ONNX Runtime's final states are zeros */
    for (int64_t k = 0; k < H; k++) {
      if (j->Yh) ((float *)j->Yh->data)[(d * B + b) * H + k] = zero ? 0.f : ((const float *)t_yh.data)[b * H + k];
      if (j->Yc) ((float *)j->Yc->data)[(d * B + b) * H + k] = zero ? 0.f : ((const float *)t_yc.data)[b * H + k];
    }
  }
  alma_tensor_free_data(&t_y);
  alma_tensor_free_data(&t_yh);
  alma_tensor_free_data(&t_yc);
  free(wsc);
  free(wz);
  free(xw);
  free(hf);
  free(acc);
  free(hq);
  return st;
}

static void dqi_dir_item(void *arg, int64_t d) {
  dqi_job *j = arg;
  j->st[d] = dqi_dir_run(j, (int)d);
}

/* W and R packed for the integer kernel (NULL when out of memory: nothing taken then). */
static rnn_packs *dqi_packs_make(const alma_tensor *W, const alma_tensor *R, int reserve) {
  int64_t D = W->dims[0], I = W->dims[1], GH = W->dims[2], H = R->dims[1];
  int64_t bytes = D * (alma__qgemm_bytes(I, GH) + alma__qgemm_bytes(H, GH));
  if (reserve && !alma__packed_gemm_reserve(bytes)) return NULL;
  rnn_packs *e = calloc(1, sizeof *e);
  alma_status st = e ? ALMA_OK : ALMA_ERR_NOMEM;
  if (e) {
    e->integer = 1, e->w = W->data, e->r = R->data, e->bytes = reserve ? bytes : 0;
    for (int64_t d = 0; d < D && st == ALMA_OK; d++) {
      st = alma__qgemm_pack((const int8_t *)W->data + d * I * GH, W->dtype == ALMA_DTYPE_UINT8, I, GH, GH, 1, &e->qw[d]);
      if (st == ALMA_OK)
        st = alma__qgemm_pack((const int8_t *)R->data + d * H * GH, R->dtype == ALMA_DTYPE_UINT8, H, GH, GH, 1, &e->qr[d]);
    }
  }
  if (st != ALMA_OK) {
    alma__error_clear();
    if (e) rnn_packs_free(e);
    else if (reserve) alma__packed_gemm_unreserve(bytes);
    return NULL;
  }
  return e;
}

/* The integer path: ALMA_ERR_UNAVAILABLE (nothing set) when it cannot serve this call (the CPU,
 * memory), so the float path runs. */
static alma_status dqlstm_exec_int(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                                   alma_tensor *out, int nout) {
  if (!alma__qgemm_available()) return ALMA_ERR_UNAVAILABLE;
  dq_lstm q;
  ALMA_TRY(dq_lstm_make(n, in, nin, 0, &q)); /* shapes and parameters checked */
  rnn_cfg c;
  ALMA_TRY(rnn_cfg_make(n, 1, q.in, 8, &c));
  ALMA_TRY(rnn_check_lens(n, &c));
  if (c.H < 1 || c.B < 1 || c.S < 1) return ALMA_ERR_UNAVAILABLE;
  const alma_tensor *W = in[1], *R = in[2];
  int keep = alma__packed_gemm_enabled() && alma__exec_input_is_const(ctx, n, 1, W) && alma__exec_input_is_const(ctx, n, 2, R);
  rnn_state *s = NULL;
  const alma_prepared *pp;
  if (keep && alma__node_prepared(n, rnn_state_build, &pp) == ALMA_OK) s = (rnn_state *)pp;
  else alma__error_clear();
  rnn_packs *e = s ? atomic_load_explicit(&s->e, memory_order_acquire) : NULL, *mine = NULL;
  if (!(e && e->integer && e->w == W->data && e->r == R->data)) {
    if (s && !e && (mine = dqi_packs_make(W, R, 1))) {
      if (atomic_compare_exchange_strong_explicit(&s->e, &e, mine, memory_order_acq_rel, memory_order_acquire)) e = mine;
      else rnn_packs_free(mine); /* another thread's first: e is its copy (checked below) */
      mine = NULL;
    }
    if (!(e && e->integer && e->w == W->data && e->r == R->data)) {
      if (!(mine = dqi_packs_make(W, R, 0))) return ALMA_ERR_UNAVAILABLE;
      e = mine;
    }
  }
  const int64_t S = c.S, B = c.B, I = c.I;
  int64_t maxlen = 0;
  for (int64_t b = 0; b < B; b++) {
    int64_t len = c.seq_lens ? ((const int32_t *)c.seq_lens->data)[b] : S;
    maxlen = len > maxlen ? len : maxlen;
  }
  dqi_job j = {.n = n, .c = &c, .pk = e, .ws = rnn_in(in, nin, 8), .wz = rnn_in(in, nin, 9), .rs = rnn_in(in, nin, 10),
               .rz = rnn_in(in, nin, 11)};
  j.Y = nout > 0 && out[0].data ? &out[0] : NULL;
  j.Yh = nout > 1 && out[1].data ? &out[1] : NULL;
  j.Yc = nout > 2 && out[2].data ? &out[2] : NULL;
  uint8_t *xq = malloc((size_t)(S * B * I + 1));
  alma_status st = ALMA_OK;
  if (!xq) st = alma__op_error(n, ALMA_ERR_NOMEM, "work buffers");
  if (st == ALMA_OK) {
    /* one scale and zero point over the rows the batch runs, as ONNX Runtime's one product */
    dq_act_params(c.X->data, maxlen * B * I, &j.xs, &j.xz);
    dq_act_q8(c.X->data, S * B * I, j.xs, j.xz, xq);
    j.xq = xq;
    if (j.Y) memset(j.Y->data, 0, j.Y->nbytes);
    alma_exec_parfor pf;
    void *pctx;
    if (c.ndir == 2 && alma__exec_parfor(ctx, &pf, &pctx) >= 2) {
      pf(pctx, 2, dqi_dir_item, &j);
      st = j.st[0] != ALMA_OK ? j.st[0] : j.st[1];
    } else {
      for (int d = 0; d < c.ndir && st == ALMA_OK; d++) st = dqi_dir_run(&j, d);
    }
    if (st == ALMA_ERR_NOMEM) st = alma__op_error(n, st, "work buffers");
  }
  free(xq);
  if (mine) rnn_packs_free(mine);
  return st;
}

static alma_status dqlstm_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                               alma_tensor *out, int nout) {
  alma_status st = dqlstm_exec_int(ctx, n, in, nin, out, nout);
  if (st != ALMA_ERR_UNAVAILABLE) return st;
  dq_lstm q;
  rnn_packs *mine;
  st = ALMA_OK;
  const rnn_packs *pk = dqlstm_packs(ctx, n, in, nin, &q, &mine, &st);
  if (st != ALMA_OK) return st;
  st = dqlstm_run(ctx, n, &q, pk, out, nout);
  if (mine) rnn_packs_free(mine);
  dq_lstm_free(&q);
  return st;
}
static void dqlstm_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                        int64_t *macs, int64_t *flops) {
  dq_lstm q;
  if (dq_lstm_make(n, in, nin, 0, &q) != ALMA_OK) {
    alma__error_clear();
    return;
  }
  rnn_cost(n, 1, q.in, 8, out, nout, macs, flops);
}
const alma_op_def alma__op_MsDynamicQuantizeLSTM = {.name = "DynamicQuantizeLSTM", .domain = "com.microsoft",
  .versions = {1}, .min_inputs = 3, .max_inputs = 12, .min_outputs = 0, .max_outputs = 3, /* scales checked in infer */
  .infer = dqlstm_infer, .exec = dqlstm_exec, .cost = dqlstm_cost};

/* ---- GRU ---- */
static alma_status gru_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  return rnn_infer(n, 0, in, nin, out, nout);
}
static alma_status gru_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, int nout) {
  return rnn_exec(ctx, n, 0, in, nin, out, nout);
}
static void gru_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                     int64_t *macs, int64_t *flops) {
  rnn_cost(n, 0, in, nin, out, nout, macs, flops);
}
const alma_op_def alma__op_GRU = {.name = "GRU", .domain = "", .versions = {1, 3, 7, 14, 22},
  .min_inputs = 3, .max_inputs = 6, .min_outputs = 0, .max_outputs = 2,
  .infer = gru_infer, .exec = gru_exec, .cost = gru_cost};

#else /* ALMA_RNN_REAL: the typed kernels, compiled once per real type */

typedef ALMA_RNN_REAL RNN_FN(real);

/* The tensor's data as an array of real: the data itself when the types agree, else a converted
 * copy (*owned set). Absent tensor: NULL. */
static RNN_FN(real) *RNN_FN(rnn_load)(const alma_tensor *t, int *owned, int *fail) {
  *owned = 0;
  if (!t) return NULL;
  if ((sizeof(RNN_FN(real)) == 4 && t->dtype == ALMA_DTYPE_FLOAT32) ||
      (sizeof(RNN_FN(real)) == 8 && t->dtype == ALMA_DTYPE_FLOAT64))
    return t->data;
  int64_t cnt = alma_tensor_numel(t);
  RNN_FN(real) *r = alma__malloc((size_t)(cnt > 0 ? cnt : 1) * sizeof *r);
  if (!r) {
    *fail = 1;
    return NULL;
  }
  for (int64_t i = 0; i < cnt; i++) r[i] = (RNN_FN(real))alma__get_f64(t->data, t->dtype, i);
  *owned = 1;
  return r;
}

static void RNN_FN(rnn_store)(alma_tensor *t, int64_t i, RNN_FN(real) v) {
  if (t->dtype == ALMA_DTYPE_FLOAT32) ((float *)t->data)[i] = (float)v;
  else if (t->dtype == ALMA_DTYPE_FLOAT64) ((double *)t->data)[i] = (double)v;
  else alma__set_f64(t->data, t->dtype, i, (double)v);
}

/* Applies an activation over n values in place, after clipping its input when asked. */
static void RNN_FN(rnn_act)(const rnn_act *a, int has_clip, RNN_FN(real) clip, RNN_FN(real) *v, int64_t n) {
  typedef RNN_FN(real) R;
  if (has_clip)
    for (int64_t i = 0; i < n; i++) v[i] = v[i] < -clip ? -clip : v[i] > clip ? clip : v[i];
  R al = (R)a->alpha, be = (R)a->beta;
  switch (a->kind) {
    case ACT_RELU: for (int64_t i = 0; i < n; i++) v[i] = v[i] > 0 ? v[i] : 0; break;
#if RNN_F32
    case ACT_TANH: alma__tanh_row(v, v, n); break; /* vectorised, within a few ulps of libm */
    case ACT_SIGMOID: alma__sigmoid_row(v, v, n, 0); break;
#else
    case ACT_TANH: for (int64_t i = 0; i < n; i++) v[i] = RNN_M(tanh)(v[i]); break;
    case ACT_SIGMOID: for (int64_t i = 0; i < n; i++) v[i] = (R)1 / ((R)1 + RNN_M(exp)(-v[i])); break;
#endif
    case ACT_AFFINE: for (int64_t i = 0; i < n; i++) v[i] = al * v[i] + be; break;
    case ACT_LEAKYRELU: for (int64_t i = 0; i < n; i++) v[i] = v[i] >= 0 ? v[i] : al * v[i]; break;
    case ACT_THRESHOLDEDRELU: for (int64_t i = 0; i < n; i++) v[i] = v[i] > al ? v[i] : 0; break;
    case ACT_SCALEDTANH: for (int64_t i = 0; i < n; i++) v[i] = al * RNN_M(tanh)(be * v[i]); break;
    case ACT_HARDSIGMOID:
      for (int64_t i = 0; i < n; i++) {
        R y = al * v[i] + be;
        v[i] = y < 0 ? 0 : y > 1 ? 1 : y;
      }
      break;
    case ACT_ELU: for (int64_t i = 0; i < n; i++) v[i] = v[i] >= 0 ? v[i] : al * (RNN_M(exp)(v[i]) - 1); break;
    case ACT_SOFTSIGN: for (int64_t i = 0; i < n; i++) v[i] = v[i] / (1 + (v[i] < 0 ? -v[i] : v[i])); break;
    case ACT_SOFTPLUS: for (int64_t i = 0; i < n; i++) v[i] = RNN_M(log1p)(RNN_M(exp)(v[i])); break;
  }
}

/* C[M, N] (row stride ldc) = A[M, K] (row stride lda) Bt^T + bias, with Bt [N, K] row-major (a block
 * of W or R rows; bias [N] or NULL). float: the packed kernel on pk (Bt packed, sgemm.h), its
 * panels split over ctx's threads when it has them, or else the project's SGEMM; double: plain
 * dot products. */
static alma_status RNN_FN(rnn_mm)(alma_exec_ctx *ctx, int64_t M, int64_t N, int64_t K, const RNN_FN(real) *A,
                                  int64_t lda, const RNN_FN(real) *Bt, const RNN_FN(real) *bias, const void *pk,
                                  RNN_FN(real) *C, int64_t ldc) {
#if RNN_F32
  if (pk) {
    alma__gemm_packed_run(ctx, M, 1.0f, A, lda, pk, 0.0f, C, ldc, NULL, bias);
    return ALMA_OK;
  }
  return alma__sgemm_bias(0, 1, M, N, K, 1.0f, A, lda, Bt, K, 0.0f, C, ldc, NULL, bias);
#else
  (void)ctx, (void)pk;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      RNN_FN(real) s = 0;
      for (int64_t k = 0; k < K; k++) s += A[i * lda + k] * Bt[j * K + k];
      C[i * ldc + j] = s + (bias ? bias[j] : 0);
    }
  return ALMA_OK;
#endif
}

/* The packed weight blocks of one direction (float only; NULL: unpacked): w, the input projection's
 * (the node's copy only); all, the per-step product's (LSTM: all 4H rows; GRU: z and r); h, GRU's
 * h rows apart (h's product takes r * h unless linear_before_reset). owned: all and h were packed
 * for this call (R not a graph constant, or past the budget) and are freed after it. */
typedef struct {
  const void *w, *all, *h;
  int owned;
} RNN_FN(rnn_pk);

static void RNN_FN(rnn_pk_free)(RNN_FN(rnn_pk) *p) {
#if RNN_F32
  if (p->owned) {
    alma__sgemm_packed *a = (alma__sgemm_packed *)p->all, *h = (alma__sgemm_packed *)p->h;
    if (a) alma__sgemm_packed_free(a);
    if (h) alma__sgemm_packed_free(h);
    free(a);
    free(h);
  }
#endif
  p->w = p->all = p->h = NULL;
  p->owned = 0;
}

static alma_status RNN_FN(rnn_pk_make)(const rnn_cfg *c, int d, const RNN_FN(real) *Rd, RNN_FN(rnn_pk) *p) {
  p->w = p->all = p->h = NULL;
  p->owned = 0;
#if RNN_F32
  if (c->hr) return ALMA_OK; /* R's product is the hook's, X's given (c->xw) */
  if (c->packs) {
    p->w = &c->packs->pw[d];
    p->all = &c->packs->pr[d];
    p->h = c->lstm ? NULL : &c->packs->ph[d];
    return ALMA_OK;
  }
  /* per call: worth it for the few-row products (the blocked SGEMM packs R on every step else) */
  int64_t H = c->H, nall = c->lstm ? 4 * H : 2 * H;
  if (c->B > ALMA_PACKED_MAX_ROWS || H < 1 || !alma__packed_gemm_enabled()) return ALMA_OK;
  alma__sgemm_packed *a = calloc(1, sizeof *a), *h = c->lstm ? NULL : calloc(1, sizeof *h);
  p->all = a, p->h = h, p->owned = 1;
  if (!a || (!c->lstm && !h)) {
    RNN_FN(rnn_pk_free)(p);
    return alma__errorf(ALMA_ERR_NOMEM, "packed recurrent weights");
  }
  alma_status st = alma__sgemm_pack(1, H, nall, Rd, H, a);
  if (st == ALMA_OK && !c->lstm) st = alma__sgemm_pack(1, H, H, Rd + 2 * H * H, H, h);
  if (st != ALMA_OK) RNN_FN(rnn_pk_free)(p);
  return st;
#else
  (void)c, (void)d, (void)Rd;
  return ALMA_OK;
#endif
}

#if RNN_F32
/* ---- float LSTM steps split over threads (c->split) ----
 * Item i takes hidden units [i * per, (i + 1) * per) (whole panels) of all four gates: their
 * columns of the step's product and then their gate arithmetic, so a step is one fork-join. h is
 * double-buffered, as every item reads all of the previous step's h. Bit for bit the unsplit loop:
 * the packed kernel's sums do not depend on the panel split, the gate arithmetic is elementwise
 * (the vectorised activations give every element the same function wherever a row starts). */
typedef struct {
  const rnn_cfg *c;
  const alma__sgemm_packed *pk;
  const float *hin, *XW, *Rb, *Pd;
  float *hout, *Cs, *HR, *tmp, *Yw;
  const int32_t *lens;
  int64_t s, per;
  int d, backwards;
} lstm_split_job;

static void lstm_split_item(void *arg, int64_t item) {
  const lstm_split_job *j = arg;
  const rnn_cfg *c = j->c;
  int64_t H = c->H, GH = 4 * H, Bn = c->B, k0 = item * j->per, k1 = k0 + j->per < H ? k0 + j->per : H, n = k1 - k0;
  if (n <= 0) return;
  for (int64_t g = 0; g < 4; g++)
    alma__sgemm_packed_rows(Bn, (g * H + k0) / ALMA_SGEMM_PANEL, (g * H + k1) / ALMA_SGEMM_PANEL, 1.0f, j->hin, H,
                            j->pk, 0.0f, j->HR, GH, NULL, j->Rb);
  const rnn_act *af = &c->act[j->d][0], *ag = &c->act[j->d][1], *ah = &c->act[j->d][2];
  const float *Pd = j->Pd;
  float clip = c->clip;
  for (int64_t b = 0; b < Bn; b++) {
    int64_t len = j->lens ? j->lens[b] : c->S;
    float *h = j->hout + b * H + k0;
    if (j->s >= len) { /* past its length: the state stays */
      memcpy(h, j->hin + b * H + k0, (size_t)n * sizeof *h);
      continue;
    }
    int64_t t = j->backwards ? len - 1 - j->s : j->s;
    float *gates = j->HR + b * GH, *cst = j->Cs + b * H + k0, *tmp = j->tmp + k0;
    const float *xw = j->XW + (t * Bn + b) * GH;
    for (int64_t g = 0; g < 4; g++)
      for (int64_t k = k0; k < k1; k++) gates[g * H + k] += xw[g * H + k];
    float *gi = gates + k0, *go = gates + H + k0, *gf = gates + 2 * H + k0, *gc = gates + 3 * H + k0;
    if (Pd)
      for (int64_t k = 0; k < n; k++) {
        gi[k] += Pd[k0 + k] * cst[k];
        gf[k] += Pd[2 * H + k0 + k] * cst[k];
      }
    rnn_act_f32(af, c->has_clip, clip, gi, n);
    if (c->input_forget)
      for (int64_t k = 0; k < n; k++) gf[k] = 1 - gi[k];
    else
      rnn_act_f32(af, c->has_clip, clip, gf, n);
    rnn_act_f32(ag, c->has_clip, clip, gc, n);
    for (int64_t k = 0; k < n; k++) cst[k] = gf[k] * cst[k] + gi[k] * gc[k];
    if (Pd)
      for (int64_t k = 0; k < n; k++) go[k] += Pd[H + k0 + k] * cst[k];
    rnn_act_f32(af, c->has_clip, clip, go, n);
    for (int64_t k = 0; k < n; k++) tmp[k] = cst[k];
    rnn_act_f32(ah, 0, clip, tmp, n);
    for (int64_t k = 0; k < n; k++) h[k] = go[k] * tmp[k];
    if (j->Yw) memcpy(j->Yw + ((t * c->ndir + j->d) * Bn + b) * H + k0, h, (size_t)n * sizeof *h);
  }
}

/* The steps of direction d (XW holds the input projection) on mctx's threads; Hs, Cs in/out. */
static alma_status lstm_split_steps(const rnn_cfg *c, alma_exec_ctx *mctx, int d, int backwards, float *Hs,
                                    float *Cs, float *Yw, const float *XW, float *HR, float *tmp, const float *Rb,
                                    const float *Pd, const alma__sgemm_packed *pk) {
  alma_exec_parfor pf;
  void *pctx;
  int T = alma__exec_parfor(mctx, &pf, &pctx);
  int64_t H = c->H, Bn = c->B, units = H / ALMA_SGEMM_PANEL, per = (units + T - 1) / T * ALMA_SGEMM_PANEL;
  int64_t items = (H + per - 1) / per;
  float *alt = alma__malloc((size_t)(Bn * H + 1) * sizeof *alt);
  if (!alt) return ALMA_ERR_NOMEM;
  lstm_split_job j = {.c = c, .pk = pk, .XW = XW, .Rb = Rb, .Pd = Pd, .Cs = Cs, .HR = HR, .tmp = tmp, .Yw = Yw,
                      .lens = c->seq_lens ? c->seq_lens->data : NULL, .per = per, .d = d, .backwards = backwards};
  float *cur = Hs, *nxt = alt;
  for (int64_t s = 0; s < c->S; s++) {
    j.s = s, j.hin = cur, j.hout = nxt;
    if (pf && items > 1) pf(pctx, items, lstm_split_item, &j);
    else
      for (int64_t i = 0; i < items; i++) lstm_split_item(&j, i);
    float *w = cur;
    cur = nxt, nxt = w;
  }
  if (cur != Hs) memcpy(Hs, cur, (size_t)(Bn * H) * sizeof *Hs);
  free(alt);
  return ALMA_OK;
}
#endif

/* One direction d. Xc: [S, B, I]; Yw: [S, ndir, B, H] (may be NULL); Hs, Cs: [B, H] state, in/out.
 * Scratch: XW [S * B, G * H]; HR [B, G * H]; T1, T2 [B, H]; tmp [H]. mctx: the context whose
 * threads the input projection may take (NULL when the directions run on threads of their own).
 * The input projection of every step is one product; each step then takes one product of the
 * whole batch's state with R (GRU without linear_before_reset: two, the second on r * h), and the
 * gate arithmetic row by row. Batch entries past their sequence length are computed with the rest
 * and left unchanged. */
static alma_status RNN_FN(rnn_direction)(const rnn_cfg *c, alma_exec_ctx *mctx, int d, int backwards,
                                         const RNN_FN(real) *Xc,
                                         const RNN_FN(real) *W, const RNN_FN(real) *R, const RNN_FN(real) *Bv,
                                         const RNN_FN(real) *P, RNN_FN(real) *Hs, RNN_FN(real) *Cs,
                                         RNN_FN(real) *Yw, RNN_FN(real) *XW, RNN_FN(real) *HR, RNN_FN(real) *T1,
                                         RNN_FN(real) *T2, RNN_FN(real) *tmp) {
  typedef RNN_FN(real) Rl;
  int64_t S = c->S, Bn = c->B, I = c->I, H = c->H, GH = c->G * c->H;
  /* W and R are NULL where the products are given (c->xw) or made by the hook (c->hr) */
  const Rl *Wd = W ? W + d * GH * I : NULL, *Rd = R ? R + d * GH * H : NULL;
  const Rl *Wb = Bv ? Bv + d * 2 * GH : NULL, *Rb = Bv ? Bv + d * 2 * GH + GH : NULL;
  const Rl *Pd = P ? P + d * 3 * H : NULL;
  const int32_t *lens = c->seq_lens ? c->seq_lens->data : NULL;
  const rnn_act *af = &c->act[d][0], *ag = &c->act[d][1], *ah = &c->act[d][2];
  Rl clip = (Rl)c->clip;
  RNN_FN(rnn_pk) pk;
  ALMA_TRY(RNN_FN(rnn_pk_make)(c, d, Rd, &pk));
  alma_status st = ALMA_OK;
  /* input projection of every step at once: XW = X W^T + Wb */
#if RNN_F32
  if (c->xw) memcpy(XW, c->xw, (size_t)(S * Bn * GH) * sizeof *XW);
  else
#endif
  if (S * Bn > 0 && I > 0) st = RNN_FN(rnn_mm)(mctx, S * Bn, GH, I, Xc, I, Wd, Wb, pk.w, XW, GH);
  else
    for (int64_t r = 0; r < S * Bn; r++)
      for (int64_t j = 0; j < GH; j++) XW[r * GH + j] = Wb ? Wb[j] : 0;
  if (st != ALMA_OK || H < 1 || Bn < 1) {
    RNN_FN(rnn_pk_free)(&pk);
    return st;
  }
#if RNN_F32
  if (c->split && pk.all && Cs) {
    st = lstm_split_steps(c, mctx, d, backwards, Hs, Cs, Yw, XW, HR, tmp, Rb, Pd, pk.all);
    RNN_FN(rnn_pk_free)(&pk);
    return st;
  }
#endif
  const Rl *Rh = Rd ? Rd + 2 * H * H : NULL, *Rbh = Rb ? Rb + 2 * H : NULL;
  for (int64_t s = 0; s < S && st == ALMA_OK; s++) {
    /* LSTM: HR = Hs R^T + Rb (all four gates); GRU: the z, r columns (and h's with linear_before_reset, in T2) */
#if RNN_F32
    if (c->hr) st = c->hr(c->hr_arg, s, Hs, HR);
    else
#endif
    st = RNN_FN(rnn_mm)(NULL, Bn, c->lstm ? GH : 2 * H, H, Hs, H, Rd, Rb, pk.all, HR, GH);
    if (st == ALMA_OK && !c->lstm && c->linear_before_reset)
      st = RNN_FN(rnn_mm)(NULL, Bn, H, H, Hs, H, Rh, Rbh, pk.h, T2, H);
    if (st != ALMA_OK) break;
    for (int64_t b = 0; b < Bn; b++) {
      int64_t len = lens ? lens[b] : S;
      if (s >= len) continue;
      int64_t t = backwards ? len - 1 - s : s;
      Rl *h = Hs + b * H, *cst = Cs ? Cs + b * H : NULL, *gates = HR + b * GH;
      const Rl *xw = XW + (t * Bn + b) * GH;
      if (c->lstm) {
        /* gates i, o, f, c */
        for (int64_t j = 0; j < GH; j++) gates[j] += xw[j];
        Rl *gi = gates, *go = gates + H, *gf = gates + 2 * H, *gc = gates + 3 * H;
        if (Pd)
          for (int64_t k = 0; k < H; k++) {
            gi[k] += Pd[k] * cst[k];
            gf[k] += Pd[2 * H + k] * cst[k];
          }
        RNN_FN(rnn_act)(af, c->has_clip, clip, gi, H);
        if (c->input_forget)
          for (int64_t k = 0; k < H; k++) gf[k] = 1 - gi[k];
        else
          RNN_FN(rnn_act)(af, c->has_clip, clip, gf, H);
        RNN_FN(rnn_act)(ag, c->has_clip, clip, gc, H);
        for (int64_t k = 0; k < H; k++) cst[k] = gf[k] * cst[k] + gi[k] * gc[k];
        if (Pd)
          for (int64_t k = 0; k < H; k++) go[k] += Pd[H + k] * cst[k];
        RNN_FN(rnn_act)(af, c->has_clip, clip, go, H);
        for (int64_t k = 0; k < H; k++) tmp[k] = cst[k];
        RNN_FN(rnn_act)(ah, 0, clip, tmp, H);
        for (int64_t k = 0; k < H; k++) h[k] = go[k] * tmp[k];
        if (Yw) memcpy(Yw + ((t * c->ndir + d) * Bn + b) * H, h, (size_t)H * sizeof *h);
      } else {
        /* gates z, r; then r * h for the candidate's product (T1) */
        for (int64_t j = 0; j < 2 * H; j++) gates[j] += xw[j];
        RNN_FN(rnn_act)(af, c->has_clip, clip, gates, H);
        RNN_FN(rnn_act)(af, c->has_clip, clip, gates + H, H);
        if (!c->linear_before_reset)
          for (int64_t k = 0; k < H; k++) T1[b * H + k] = gates[H + k] * h[k];
      }
    }
    if (c->lstm) continue;
    /* the candidate h~: (r * h) Rh^T + Rbh, or r * (h Rh^T + Rbh) with linear_before_reset */
    if (!c->linear_before_reset && (st = RNN_FN(rnn_mm)(NULL, Bn, H, H, T1, H, Rh, Rbh, pk.h, T2, H)) != ALMA_OK) break;
    for (int64_t b = 0; b < Bn; b++) {
      int64_t len = lens ? lens[b] : S;
      if (s >= len) continue;
      int64_t t = backwards ? len - 1 - s : s;
      Rl *h = Hs + b * H, *gz = HR + b * GH, *gr = gz + H, *gh = gz + 2 * H, *hh = T2 + b * H;
      const Rl *xw = XW + (t * Bn + b) * GH + 2 * H;
      if (c->linear_before_reset)
        for (int64_t k = 0; k < H; k++) gh[k] = xw[k] + gr[k] * hh[k];
      else
        for (int64_t k = 0; k < H; k++) gh[k] = xw[k] + hh[k];
      RNN_FN(rnn_act)(ag, c->has_clip, clip, gh, H);
      for (int64_t k = 0; k < H; k++) h[k] = (1 - gz[k]) * gh[k] + gz[k] * h[k];
      if (Yw) memcpy(Yw + ((t * c->ndir + d) * Bn + b) * H, h, (size_t)H * sizeof *h);
    }
  }
  RNN_FN(rnn_pk_free)(&pk);
  return st;
}

/* Copies n reals to t's data from element i on (t's dtype). */
static void RNN_FN(rnn_store_n)(alma_tensor *t, int64_t i, const RNN_FN(real) *v, int64_t n) {
  if ((sizeof(RNN_FN(real)) == 4 && t->dtype == ALMA_DTYPE_FLOAT32) ||
      (sizeof(RNN_FN(real)) == 8 && t->dtype == ALMA_DTYPE_FLOAT64))
    memcpy((char *)t->data + (size_t)i * sizeof *v, v, (size_t)n * sizeof *v);
  else
    for (int64_t k = 0; k < n; k++) RNN_FN(rnn_store)(t, i + k, v[k]);
}

/* The directions of a bidirectional node as two items of the context's parallel loop: each has its
 * own state rows, scratch and slice of Y. */
typedef struct {
  const rnn_cfg *c;
  const RNN_FN(real) *Xc, *W, *R, *Bv, *P;
  RNN_FN(real) *Hs, *Cs, *Yw, *XW, *scr;
  alma_status st[2];
} RNN_FN(rnn_dirs);

static alma_status RNN_FN(rnn_dir_run)(const RNN_FN(rnn_dirs) *j, alma_exec_ctx *mctx, int d, RNN_FN(real) *XW,
                                       RNN_FN(real) *scr) {
  const rnn_cfg *c = j->c;
  int64_t Bn = c->B, H = c->H, GH = c->G * c->H;
  return RNN_FN(rnn_direction)(c, mctx, d, c->ndir == 2 ? d == 1 : c->reverse, j->Xc, j->W, j->R, j->Bv, j->P,
                               j->Hs + d * Bn * H, j->Cs ? j->Cs + d * Bn * H : NULL, j->Yw, XW, scr, scr + Bn * GH,
                               scr + Bn * GH + Bn * H, scr + Bn * GH + 2 * Bn * H);
}

static void RNN_FN(rnn_dir_item)(void *arg, int64_t d) {
  RNN_FN(rnn_dirs) *j = arg;
  const rnn_cfg *c = j->c;
  int64_t nscr = c->B * c->G * c->H + 2 * c->B * c->H + c->H + 1;
  j->st[d] = RNN_FN(rnn_dir_run)(j, NULL, (int)d, j->XW + d * (c->S * c->B * c->G * c->H + 1), j->scr + d * nscr);
}

static alma_status RNN_FN(rnn_run)(const rnn_cfg *c, alma_tensor *Y, alma_tensor *Yh, alma_tensor *Yc) {
  typedef RNN_FN(real) Rl;
  int64_t S = c->S, Bn = c->B, I = c->I, H = c->H, GH = c->G * c->H, nd = c->ndir;
  int oX, oW, oR, oB, oP, oh, oc, fail = 0;
  alma_status st = ALMA_OK;
  alma_exec_parfor pf;
  void *pctx;
  /* two directions, two threads or more: one each, unless each step is split over them (c->split) */
  int par = nd == 2 && !c->split && alma__exec_parfor(c->ctx, &pf, &pctx) >= 2, ncopy = par ? 2 : 1;
  int64_t nxw = S * Bn * GH + 1, nscr = Bn * GH + 2 * Bn * H + H + 1;
  const Rl *X = RNN_FN(rnn_load)(c->X, &oX, &fail), *W = RNN_FN(rnn_load)(c->W, &oW, &fail);
  const Rl *Rm = RNN_FN(rnn_load)(c->R, &oR, &fail), *Bv = RNN_FN(rnn_load)(c->Bias, &oB, &fail);
  const Rl *P = RNN_FN(rnn_load)(c->P, &oP, &fail), *h0 = RNN_FN(rnn_load)(c->h0, &oh, &fail);
  const Rl *c0 = RNN_FN(rnn_load)(c->c0, &oc, &fail);
  Rl *Xc = c->layout ? alma__malloc((size_t)(S * Bn * I + 1) * sizeof *Xc) : NULL;
  Rl *Yw = Y ? alma__calloc((size_t)(S * nd * Bn * H + 1), sizeof *Yw) : NULL;
  Rl *Hs = alma__calloc((size_t)(nd * Bn * H + 1), sizeof *Hs);
  Rl *Cs = c->lstm ? alma__calloc((size_t)(nd * Bn * H + 1), sizeof *Cs) : NULL;
  Rl *XW = alma__malloc((size_t)(ncopy * nxw) * sizeof *XW);
  /* HR [B, GH], T1, T2 [B, H], tmp [H]; zeroed, so rows of finished batch entries stay finite */
  Rl *scr = alma__calloc((size_t)(ncopy * nscr), sizeof *scr);
  if (fail || (c->layout && !Xc) || (Y && !Yw) || !Hs || (c->lstm && !Cs) || !XW || !scr) {
    st = ALMA_ERR_NOMEM;
    goto done;
  }
  /* canonical layout 0 inside: X [S, B, I], states [ndir, B, H] */
  if (c->layout) {
    for (int64_t b = 0; b < Bn; b++)
      for (int64_t s = 0; s < S; s++) memcpy(Xc + (s * Bn + b) * I, X + (b * S + s) * I, (size_t)I * sizeof *Xc);
  }
  for (int64_t d = 0; d < nd; d++)
    for (int64_t b = 0; b < Bn; b++) {
      int64_t src = c->layout ? (b * nd + d) * H : (d * Bn + b) * H, dst = (d * Bn + b) * H;
      if (h0) memcpy(Hs + dst, h0 + src, (size_t)H * sizeof *Hs);
      if (c0) memcpy(Cs + dst, c0 + src, (size_t)H * sizeof *Cs);
    }
  RNN_FN(rnn_dirs) job = {.c = c, .Xc = c->layout ? Xc : X, .W = W, .R = Rm, .Bv = Bv, .P = P, .Hs = Hs, .Cs = Cs,
                          .Yw = Yw, .XW = XW, .scr = scr};
  if (par) {
    pf(pctx, 2, RNN_FN(rnn_dir_item), &job);
    st = job.st[0] != ALMA_OK ? job.st[0] : job.st[1];
  } else {
    for (int d = 0; d < nd && st == ALMA_OK; d++) st = RNN_FN(rnn_dir_run)(&job, c->ctx, d, XW, scr);
  }
  if (st != ALMA_OK) goto done;
  if (Y) {
    if (!c->layout) RNN_FN(rnn_store_n)(Y, 0, Yw, S * nd * Bn * H);
    else
      for (int64_t s = 0; s < S; s++)
        for (int64_t d = 0; d < nd; d++)
          for (int64_t b = 0; b < Bn; b++)
            RNN_FN(rnn_store_n)(Y, ((b * S + s) * nd + d) * H, Yw + ((s * nd + d) * Bn + b) * H, H);
  }
  for (int64_t d = 0; d < nd; d++)
    for (int64_t b = 0; b < Bn; b++) {
      int64_t src = (d * Bn + b) * H, dst = c->layout ? (b * nd + d) * H : src;
      if (Yh) RNN_FN(rnn_store_n)(Yh, dst, Hs + src, H);
      if (Yc) RNN_FN(rnn_store_n)(Yc, dst, Cs + src, H);
    }
done:
  if (oX) free((void *)X);
  if (oW) free((void *)W);
  if (oR) free((void *)Rm);
  if (oB) free((void *)Bv);
  if (oP) free((void *)P);
  if (oh) free((void *)h0);
  if (oc) free((void *)c0);
  free(Xc);
  free(Yw);
  free(Hs);
  free(Cs);
  free(XW);
  free(scr);
  return st;
}

#endif /* ALMA_RNN_REAL */
