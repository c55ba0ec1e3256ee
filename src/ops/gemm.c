/* Gemm and MatMul on alma__sgemm (float32), alma__dgemm (float64) and alma__igemm (integers);
 * float16/bfloat16 compute in float32. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "ops/gemm_packed.h"
#include "ops/nn_util.h"
#include "ops/sgemm.h"

static int gemm_dtype_ok(alma_dtype t) {
  switch (t) {
    case ALMA_DTYPE_FLOAT32: case ALMA_DTYPE_FLOAT16: case ALMA_DTYPE_BFLOAT16: case ALMA_DTYPE_FLOAT64:
    case ALMA_DTYPE_INT32: case ALMA_DTYPE_INT64: case ALMA_DTYPE_UINT32: case ALMA_DTYPE_UINT64:
      return 1;
    default:
      return 0;
  }
}

/* Integer tensor as uint64 (two's complement bits); malloc'd. */
static uint64_t *as_u64(const alma_node *n, const alma_tensor *t) {
  int64_t cnt = alma_tensor_numel(t);
  uint64_t *p = alma__nn_alloc(n, (size_t)cnt, sizeof *p);
  if (p)
    for (int64_t i = 0; i < cnt; i++) p[i] = (uint64_t)alma__get_i64(t->data, t->dtype, i);
  return p;
}

/* ---- packed constant weights (gemm_packed.h) -------------------------------------------------- */

int alma__packed_gemm_enabled(void) {
  static _Atomic int on = -1;
  int v = atomic_load_explicit(&on, memory_order_relaxed);
  if (v < 0) {
    const char *e = getenv("ALMA_PACKED_GEMM");
    v = !(e && e[0] == '0');
    atomic_store_explicit(&on, v, memory_order_relaxed);
  }
  return v;
}

/* Packed copies double the memory of the weights they copy: past a budget (a quarter of physical
 * memory, or ALMA_PACKED_GEMM_MAX_MB) further nodes run the unpacked kernel, so a model that fits
 * in memory still fits when its decode steps run. Shared by every graph in the process. */
static _Atomic int64_t packed_bytes;

static _Atomic int64_t packed_budget_v = -1;

static int64_t packed_budget(void) {
  int64_t v = atomic_load_explicit(&packed_budget_v, memory_order_relaxed);
  if (v < 0) {
    const char *e = getenv("ALMA_PACKED_GEMM_MAX_MB");
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    v = e && *e ? (int64_t)strtoll(e, NULL, 10) << 20 : pages > 0 && psz > 0 ? (int64_t)pages * psz / 4 : (int64_t)1 << 30;
    if (v < 0) v = 0;
    atomic_store_explicit(&packed_budget_v, v, memory_order_relaxed);
  }
  return v;
}

void alma__packed_gemm_set_budget(int64_t bytes) { atomic_store_explicit(&packed_budget_v, bytes, memory_order_relaxed); }

int64_t alma__packed_gemm_bytes(void) { return atomic_load(&packed_bytes); }

int alma__packed_gemm_reserve(int64_t bytes) {
  if (atomic_fetch_add(&packed_bytes, bytes) + bytes <= packed_budget()) return 1;
  atomic_fetch_sub(&packed_bytes, bytes);
  return 0;
}

void alma__packed_gemm_unreserve(int64_t bytes) { atomic_fetch_sub(&packed_bytes, bytes); }

static int64_t packed_size(int64_t K, int64_t N) { return K * ((N + 15) / 16 * 16) * (int64_t)sizeof(float); }

/* A packed copy of one constant B, shared by every node that multiplies by the same data (an
 * unrolled recurrence's steps all read one weight: one copy stays in cache where one per node would
 * stream from memory), counted once in the budget and freed with its last node. */
typedef struct packed_entry {
  struct packed_entry *next; /* the process's list (packed_mu) */
  const void *data;          /* the B it was packed from */
  int64_t d0, d1;
  int tb, refs;
  uint64_t fp;               /* sampled contents: an address reused by other data never matches */
  alma__sgemm_packed pk;
} packed_entry;

static pthread_mutex_t packed_mu = PTHREAD_MUTEX_INITIALIZER;
static packed_entry *packed_list;

static uint64_t packed_fp(const alma_tensor *b) {
  int64_t n = b->dims[0] * b->dims[1];
  const uint32_t *u = b->data;
  uint64_t h = 1469598103934665603ull;
  for (int64_t i = 0; i < 33; i++) h = (h ^ u[i * (n - 1) / 32]) * 1099511628211ull;
  return h;
}

static void packed_unref(packed_entry *e) {
  pthread_mutex_lock(&packed_mu);
  int last = --e->refs == 0;
  if (last)
    for (packed_entry **pp = &packed_list; *pp; pp = &(*pp)->next)
      if (*pp == e) {
        *pp = e->next;
        break;
      }
  pthread_mutex_unlock(&packed_mu);
  if (!last) return;
  alma__packed_gemm_unreserve(packed_size(e->pk.K, e->pk.N));
  alma__sgemm_packed_free(&e->pk);
  free(e);
}

/* The shared copy of b (a new reference), or NULL: out of memory or over the budget. */
static packed_entry *packed_ref(int trans_b, const alma_tensor *b) {
  uint64_t fp = packed_fp(b);
  pthread_mutex_lock(&packed_mu);
  packed_entry *e = packed_list;
  while (e && !(e->data == b->data && e->d0 == b->dims[0] && e->d1 == b->dims[1] && e->tb == trans_b && e->fp == fp))
    e = e->next;
  if (e) {
    e->refs++;
  } else {
    int64_t K = b->dims[trans_b ? 1 : 0], N = b->dims[trans_b ? 0 : 1];
    int64_t bytes = K <= INT64_MAX / 4 / ((N + 15) / 16 * 16) ? packed_size(K, N) : INT64_MAX / 2;
    if (alma__packed_gemm_reserve(bytes)) { /* else over the budget: the unpacked kernel */
      e = calloc(1, sizeof *e);
      if (!e || alma__sgemm_pack(trans_b, K, N, b->data, b->dims[1], &e->pk) != ALMA_OK) {
        alma__packed_gemm_unreserve(bytes);
        free(e);
        e = NULL;
        alma__error_clear();
      } else {
        e->data = b->data, e->d0 = b->dims[0], e->d1 = b->dims[1], e->tb = trans_b, e->fp = fp, e->refs = 1;
        e->next = packed_list;
        packed_list = e;
      }
    }
  }
  pthread_mutex_unlock(&packed_mu);
  return e;
}

/* The node's prepared state (built from nothing but the node) is an empty slot; the first few-row
 * run fills it once with compare-and-swap: a reference to the shared copy of a graph constant, so it
 * never goes stale while the graph lives, dropped with the node. */
typedef struct packed_state {
  alma_prepared hdr;
  _Atomic(packed_entry *) e;
} packed_state;

static void packed_release(alma_prepared *self) {
  packed_state *s = (packed_state *)self;
  packed_entry *e = atomic_load_explicit(&s->e, memory_order_acquire);
  if (e) packed_unref(e);
  free(s);
}

static alma_status packed_build(const alma_node *n, alma_prepared **out) {
  packed_state *s = calloc(1, sizeof *s);
  if (!s) return alma__op_error(n, ALMA_ERR_NOMEM, "out of memory");
  s->hdr.release = packed_release;
  atomic_init(&s->e, NULL);
  *out = &s->hdr;
  return ALMA_OK;
}

const alma__sgemm_packed *alma__gemm_packed_b(const alma_node *owner, int trans_b, const alma_tensor *b) {
  if (!b || b->dtype != ALMA_DTYPE_FLOAT32 || b->rank != 2 || !b->data || b->dims[0] < 1 || b->dims[1] < 1) return NULL;
  const alma_prepared *pp;
  if (alma__node_prepared(owner, packed_build, &pp) != ALMA_OK) {
    alma__error_clear();
    return NULL;
  }
  packed_state *s = (packed_state *)pp; /* the slot is written once, atomically (above) */
  packed_entry *e = atomic_load_explicit(&s->e, memory_order_acquire);
  if (!e) {
    packed_entry *mine = packed_ref(trans_b, b);
    if (!mine) return NULL;
    if (atomic_compare_exchange_strong_explicit(&s->e, &e, mine, memory_order_acq_rel, memory_order_acquire)) e = mine;
    else packed_unref(mine); /* another thread filled the slot first: e is its reference */
  }
  if (e->data != b->data || e->d0 != b->dims[0] || e->d1 != b->dims[1] || e->tb != trans_b) return NULL;
  return &e->pk;
}

/* alma__sgemm_packed_rows over the panels, split into items for the context's parallel loop when it
 * has one (a runtime's threads: the DNNL runtime's fallback); each C element is computed by the same
 * code whatever the split. */
typedef struct packed_job {
  int64_t M, lda, ldc, per;
  float alpha, beta;
  const float *A, *rb, *cb;
  const alma__sgemm_packed *pk;
  float *C;
} packed_job;

static void packed_item(void *arg, int64_t item) {
  const packed_job *j = arg;
  alma__sgemm_packed_rows(j->M, item * j->per, (item + 1) * j->per, j->alpha, j->A, j->lda, j->pk, j->beta, j->C,
                          j->ldc, j->rb, j->cb);
}

void alma__gemm_packed_run(alma_exec_ctx *ctx, int64_t M, float alpha, const float *A, int64_t lda,
                           const alma__sgemm_packed *pk, float beta, float *C, int64_t ldc, const float *rb,
                           const float *cb) {
  alma_exec_parfor pf;
  void *pctx;
  int threads = alma__exec_parfor(ctx, &pf, &pctx);
  /* about four items a thread: a thread descheduled on a busy machine leaves its share to others */
  int64_t items = pf ? (pk->panels < 4 * (int64_t)threads ? pk->panels : 4 * (int64_t)threads) : 1;
  packed_job j = {.M = M, .lda = lda, .ldc = ldc, .per = (pk->panels + items - 1) / items, .alpha = alpha,
                  .beta = beta, .A = A, .rb = rb, .cb = cb, .pk = pk, .C = C};
  if (items > 1) pf(pctx, (pk->panels + j.per - 1) / j.per, packed_item, &j);
  else alma__sgemm_packed_rows(M, 0, pk->panels, alpha, A, lda, pk, beta, C, ldc, rb, cb);
}

/* The packed path applies: float32 (not converted), few rows, K and N >= 1, B a graph constant. */
static int packed_ok(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *b, int64_t M, int64_t N, int64_t K) {
  return b->dtype == ALMA_DTYPE_FLOAT32 && M >= 1 && M <= ALMA_PACKED_MAX_ROWS && N >= 1 && K >= 1 &&
         alma__packed_gemm_enabled() && alma__exec_input_is_const(ctx, n, 1, b);
}

/* ---- Gemm ------------------------------------------------------------------------------------ */

typedef struct gemm_shape {
  int64_t M, N, K;
  int ta, tb;
} gemm_shape;

static alma_status gemm_setup(const alma_node *n, const alma_tensor *const *in, int nin, gemm_shape *gs) {
  const alma_tensor *a = in[0], *b = alma__nn_in(in, nin, 1), *c = alma__nn_in(in, nin, 2);
  if (!a || !b) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "A and B are required");
  if (!c && n->since_version < 11) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "C is required before opset 11");
  if (!gemm_dtype_ok(a->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "dtype %s (float32/16/64, bfloat16, int32/64, uint32/64 supported)",
                          alma_dtype_name(a->dtype));
  if (b->dtype != a->dtype || (c && c->dtype != a->dtype))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "A, B and C must share a dtype (%s, %s%s%s)",
                          alma_dtype_name(a->dtype), alma_dtype_name(b->dtype), c ? ", " : "",
                          c ? alma_dtype_name(c->dtype) : "");
  if (a->rank != 2 || b->rank != 2)
    return alma__op_error(n, ALMA_ERR_SHAPE, "A and B must be 2-D (got ranks %d and %d)", a->rank, b->rank);
  gs->ta = alma__attr_i(n, "transA", 0) != 0;
  gs->tb = alma__attr_i(n, "transB", 0) != 0;
  gs->M = a->dims[gs->ta ? 1 : 0];
  gs->K = a->dims[gs->ta ? 0 : 1];
  int64_t kb = b->dims[gs->tb ? 1 : 0];
  gs->N = b->dims[gs->tb ? 0 : 1];
  if (kb != gs->K)
    return alma__op_error(n, ALMA_ERR_SHAPE, "inner dimensions differ: op(A) is [%lld,%lld], op(B) is [%lld,%lld]",
                          (long long)gs->M, (long long)gs->K, (long long)kb, (long long)gs->N);
  if (c) {
    /* C broadcasts unidirectionally to [M, N] */
    int64_t want[2] = {gs->M, gs->N};
    if (c->rank > 2) return alma__op_error(n, ALMA_ERR_SHAPE, "C has rank %d (at most 2)", c->rank);
    for (int i = 0; i < c->rank; i++) {
      int64_t d = c->dims[i], w = want[2 - c->rank + i];
      if (d != 1 && d != w) {
        char s[64];
        return alma__op_error(n, ALMA_ERR_SHAPE, "C of shape %s does not broadcast to [%lld,%lld]",
                              alma__shape_str(c->rank, c->dims, s, sizeof s), (long long)gs->M, (long long)gs->N);
      }
    }
  }
  return ALMA_OK;
}

static alma_status gemm_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  gemm_shape gs;
  ALMA_TRY(gemm_setup(n, in, nin, &gs));
  int64_t dims[2] = {gs.M, gs.N};
  alma__set_shape(&out[0], in[0]->dtype, 2, dims);
  return ALMA_OK;
}

/* C's element for Y[i, j] under unidirectional broadcasting. */
static int64_t c_index(const alma_tensor *c, int64_t i, int64_t j) {
  if (c->rank == 0) return 0;
  if (c->rank == 1) return c->dims[0] == 1 ? 0 : j;
  return (c->dims[0] == 1 ? 0 : i) * c->dims[1] + (c->dims[1] == 1 ? 0 : j);
}

static alma_status gemm_exec_f(alma_exec_ctx *ctx, const alma_node *n, const alma_node *owner,
                               const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  gemm_shape gs;
  ALMA_TRY(gemm_setup(n, in, nin, &gs));
  const alma_tensor *a = in[0], *b = in[1], *c = alma__nn_in(in, nin, 2);
  float alpha = alma__attr_f(n, "alpha", 1.0f), beta = alma__attr_f(n, "beta", 1.0f);
  int64_t M = gs.M, N = gs.N, K = gs.K;
  int64_t lda = a->dims[1], ldb = b->dims[1];
  alma_dtype dt = a->dtype;
  if (dt == ALMA_DTYPE_FLOAT64) {
    double *y = out->data;
    if (c)
      for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) y[i * N + j] = beta * ((const double *)c->data)[c_index(c, i, j)];
    alma__dgemm(gs.ta, gs.tb, M, N, K, alpha, a->data, lda, b->data, ldb, c ? 1.0 : 0.0, y, N);
    return ALMA_OK;
  }
  if (alma__dtype_is_float(dt)) {
    int oa = 0, ob = 0, oc = 0;
    const float *af = alma__nn_as_f32(a, &oa), *bf = af ? alma__nn_as_f32(b, &ob) : NULL;
    const float *cf = (bf && c) ? alma__nn_as_f32(c, &oc) : NULL;
    float *y = dt == ALMA_DTYPE_FLOAT32 ? out->data : NULL;
    if (!y && bf) y = alma__nn_alloc(n, (size_t)(M * N), sizeof *y);
    alma_status st = ALMA_ERR_NOMEM;
    if (af && bf && (cf || !c) && y) {
      /* a bias row [N] / [1,N] or column [M,1] folds into the GEMM's stores */
      const float *rb = NULL, *cb = NULL;
      if (cf && beta == 1.0f) {
        int64_t cn = alma_tensor_numel(c);
        if (c->rank >= 1 && cn == N && c->dims[c->rank - 1] == N)
          cb = cf;
        else if (c->rank == 2 && cn == M && c->dims[0] == M)
          rb = cf;
      }
      if (cf && !rb && !cb)
        for (int64_t i = 0; i < M; i++)
          for (int64_t j = 0; j < N; j++) y[i * N + j] = beta * cf[c_index(c, i, j)];
      float beta0 = (c && !rb && !cb) ? 1.0f : 0.0f;
      /* few rows on constant weights: the packed copy (the same sums as alma__sgemm_bias's few-rows
       * kernel, which M < 4 takes; M of 4..ALMA_PACKED_MAX_ROWS changes from the blocked kernel's
       * order to that one) */
      const alma__sgemm_packed *pk =
          !gs.ta && y == out->data && packed_ok(ctx, n, b, M, N, K) ? alma__gemm_packed_b(owner, gs.tb, b) : NULL;
      if (pk) {
        alma__gemm_packed_run(ctx, M, alpha, af, lda, pk, beta0, y, N, rb, cb);
        st = ALMA_OK;
      } else {
        st = alma__sgemm_bias(gs.ta, gs.tb, M, N, K, alpha, af, lda, bf, ldb, beta0, y, N, rb, cb);
      }
      if (st == ALMA_OK && y != out->data) alma__nn_store_f32(out, y);
    }
    if (oa) free((void *)af);
    if (ob) free((void *)bf);
    if (oc) free((void *)cf);
    if (y && y != out->data) free(y);
    return st;
  }
  /* integers: exact wrap-around products; alpha/beta other than 1 go through double */
  uint64_t *ai = as_u64(n, a), *bi = ai ? as_u64(n, b) : NULL;
  uint64_t *yi = bi ? alma__nn_alloc(n, (size_t)(M * N), sizeof *yi) : NULL;
  if (!yi) {
    free(ai);
    free(bi);
    return ALMA_ERR_NOMEM;
  }
  alma__igemm(gs.ta, gs.tb, M, N, K, ai, lda, bi, ldb, 0, yi, N);
  int sgn = alma__dtype_is_signed(dt);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      uint64_t acc = yi[i * N + j];
      if (alpha == 1.0f && (beta == 1.0f || beta == 0.0f || !c)) {
        if (c && beta == 1.0f) acc += (uint64_t)alma__get_i64(c->data, dt, c_index(c, i, j));
        alma__set_i64(out->data, dt, i * N + j, (int64_t)acc);
      } else {
        double v = alpha * (sgn ? (double)(int64_t)acc : (double)acc);
        if (c) v += beta * alma__get_f64(c->data, dt, c_index(c, i, j));
        alma__set_f64(out->data, dt, i * N + j, v);
      }
    }
  free(ai);
  free(bi);
  free(yi);
  return ALMA_OK;
}

static alma_status gemm_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  return gemm_exec_f(ctx, n, n, in, nin, out, nout);
}

static void gemm_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                      int64_t *macs, int64_t *flops) {
  gemm_shape gs;
  if (gemm_setup(n, in, nin, &gs) != ALMA_OK) {
    alma__error_clear();
    *macs = *flops = -1;
    return;
  }
  *macs = gs.M * gs.N * gs.K;
  *flops = 2 * *macs + (alma__nn_in(in, nin, 2) ? 2 * gs.M * gs.N : 0);
}

/* ---- MatMul ---------------------------------------------------------------------------------- */

typedef struct matmul_shape {
  int64_t M, N, K, batch;
  int brank;                               /* rank of the broadcast batch dims */
  int64_t bdims[ALMA_MAX_RANK];
  int arank, brank_b;                      /* batch ranks of A and B */
  int64_t adims[ALMA_MAX_RANK], bbdims[ALMA_MAX_RANK];
  int out_rank;
  int64_t out_dims[ALMA_MAX_RANK];
} matmul_shape;

static alma_status matmul_setup(const alma_node *n, const alma_tensor *const *in, int nin, matmul_shape *ms) {
  const alma_tensor *a = in[0], *b = alma__nn_in(in, nin, 1);
  if (!a || !b) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "A and B are required");
  if (!gemm_dtype_ok(a->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "dtype %s (float32/16/64, bfloat16, int32/64, uint32/64 supported)",
                          alma_dtype_name(a->dtype));
  if (b->dtype != a->dtype)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "A is %s but B is %s", alma_dtype_name(a->dtype),
                          alma_dtype_name(b->dtype));
  if (a->rank < 1 || b->rank < 1)
    return alma__op_error(n, ALMA_ERR_SHAPE, "operands must have rank >= 1 (got %d and %d)", a->rank, b->rank);
  /* numpy.matmul: a 1-D A is [1, K] (row dropped after), a 1-D B is [K, 1] (column dropped) */
  ms->M = a->rank == 1 ? 1 : a->dims[a->rank - 2];
  ms->K = a->dims[a->rank - 1];
  int64_t kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2];
  ms->N = b->rank == 1 ? 1 : b->dims[b->rank - 1];
  if (kb != ms->K) {
    char s1[128], s2[128];
    return alma__op_error(n, ALMA_ERR_SHAPE, "shapes %s and %s: inner dimensions %lld and %lld differ",
                          alma__shape_str(a->rank, a->dims, s1, sizeof s1), alma__shape_str(b->rank, b->dims, s2, sizeof s2),
                          (long long)ms->K, (long long)kb);
  }
  ms->arank = a->rank > 2 ? a->rank - 2 : 0;
  ms->brank_b = b->rank > 2 ? b->rank - 2 : 0;
  for (int i = 0; i < ms->arank; i++) ms->adims[i] = a->dims[i];
  for (int i = 0; i < ms->brank_b; i++) ms->bbdims[i] = b->dims[i];
  alma_status st = alma__broadcast_shape(ms->arank, ms->adims, ms->brank_b, ms->bbdims, &ms->brank, ms->bdims);
  if (st != ALMA_OK) return alma__error_prefix(st, "node '%s' (MatMul): batch dims: ", n->name);
  ms->batch = alma__numel(ms->brank, ms->bdims);
  int r = 0;
  for (int i = 0; i < ms->brank; i++) ms->out_dims[r++] = ms->bdims[i];
  if (a->rank >= 2) ms->out_dims[r++] = ms->M;
  if (b->rank >= 2) ms->out_dims[r++] = ms->N;
  if (r > ALMA_MAX_RANK) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "output rank %d", r);
  ms->out_rank = r;
  return ALMA_OK;
}

static alma_status matmul_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                int nout) {
  matmul_shape ms;
  ALMA_TRY(matmul_setup(n, in, nin, &ms));
  alma__set_shape(&out[0], in[0]->dtype, ms.out_rank, ms.out_dims);
  return ALMA_OK;
}

/* Runs the batched product with a per-type GEMM on whole arrays of element size esz. */
typedef alma_status (*mm_fn)(int64_t M, int64_t N, int64_t K, const void *A, const void *B, void *C);
static alma_status mm_f32(int64_t M, int64_t N, int64_t K, const void *A, const void *B, void *C) {
  return alma__sgemm(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
}
static alma_status mm_f64(int64_t M, int64_t N, int64_t K, const void *A, const void *B, void *C) {
  alma__dgemm(0, 0, M, N, K, 1.0, A, K, B, N, 0.0, C, N);
  return ALMA_OK;
}
static alma_status mm_u64(int64_t M, int64_t N, int64_t K, const void *A, const void *B, void *C) {
  alma__igemm(0, 0, M, N, K, A, K, B, N, 0, C, N);
  return ALMA_OK;
}

static alma_status matmul_batched(const matmul_shape *ms, mm_fn fn, size_t esz, const char *A, const char *B,
                                  char *C) {
  int64_t asz = ms->M * ms->K, bsz = ms->K * ms->N, csz = ms->M * ms->N;
  int64_t bbatch = alma__numel(ms->brank_b, ms->bbdims), abatch = alma__numel(ms->arank, ms->adims);
  /* B shared by every batch (weights): one tall GEMM over all of A's rows */
  if (bbatch == 1 && abatch == ms->batch) return fn(ms->batch * ms->M, ms->N, ms->K, A, B, C);
  for (int64_t i = 0; i < ms->batch; i++) {
    int64_t ai = alma__broadcast_index(i, ms->brank, ms->bdims, ms->arank, ms->adims);
    int64_t bi = alma__broadcast_index(i, ms->brank, ms->bdims, ms->brank_b, ms->bbdims);
    ALMA_TRY(fn(ms->M, ms->N, ms->K, A + ai * asz * esz, B + bi * bsz * esz, C + i * csz * esz));
  }
  return ALMA_OK;
}

static alma_status matmul_exec_f(alma_exec_ctx *ctx, const alma_node *n, const alma_node *owner,
                                 const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  matmul_shape ms;
  ALMA_TRY(matmul_setup(n, in, nin, &ms));
  const alma_tensor *a = in[0], *b = in[1];
  alma_dtype dt = a->dtype;
  /* few rows (all batches' rows together) on a constant 2-D weight: the packed copy */
  if (dt == ALMA_DTYPE_FLOAT32 && b->rank == 2 && alma__numel(ms.arank, ms.adims) == ms.batch &&
      packed_ok(ctx, n, b, ms.batch * ms.M, ms.N, ms.K)) {
    const alma__sgemm_packed *pk = alma__gemm_packed_b(owner, 0, b);
    if (pk) {
      alma__gemm_packed_run(ctx, ms.batch * ms.M, 1.0f, a->data, ms.K, pk, 0.0f, out->data, ms.N, NULL, NULL);
      return ALMA_OK;
    }
  }
  if (dt == ALMA_DTYPE_FLOAT32) return matmul_batched(&ms, mm_f32, 4, a->data, b->data, out->data);
  if (dt == ALMA_DTYPE_FLOAT64) return matmul_batched(&ms, mm_f64, 8, a->data, b->data, out->data);
  alma_status st = ALMA_ERR_NOMEM;
  if (alma__dtype_is_float(dt)) {
    int oa = 0, ob = 0;
    const float *af = alma__nn_as_f32(a, &oa), *bf = af ? alma__nn_as_f32(b, &ob) : NULL;
    float *y = bf ? alma__nn_alloc(n, (size_t)alma_tensor_numel(out), sizeof *y) : NULL;
    if (y) {
      st = matmul_batched(&ms, mm_f32, 4, (const char *)af, (const char *)bf, (char *)y);
      if (st == ALMA_OK) alma__nn_store_f32(out, y);
    }
    if (oa) free((void *)af);
    if (ob) free((void *)bf);
    free(y);
    return st;
  }
  uint64_t *ai = as_u64(n, a), *bi = ai ? as_u64(n, b) : NULL;
  uint64_t *y = bi ? alma__nn_alloc(n, (size_t)alma_tensor_numel(out), sizeof *y) : NULL;
  if (y) {
    st = matmul_batched(&ms, mm_u64, 8, (const char *)ai, (const char *)bi, (char *)y);
    int64_t cnt = alma_tensor_numel(out);
    for (int64_t i = 0; i < cnt; i++) alma__set_i64(out->data, dt, i, (int64_t)y[i]);
  }
  free(ai);
  free(bi);
  free(y);
  return st;
}

static alma_status matmul_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                               alma_tensor *out, int nout) {
  return matmul_exec_f(ctx, n, n, in, nin, out, nout);
}

alma_status alma__gemm_exec_owned(alma_exec_ctx *ctx, const alma_node *base, const alma_node *owner,
                                  const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  return base->op == &alma__op_Gemm ? gemm_exec_f(ctx, base, owner, in, nin, out, nout)
                                    : matmul_exec_f(ctx, base, owner, in, nin, out, nout);
}

static void matmul_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                        int64_t *macs, int64_t *flops) {
  matmul_shape ms;
  if (matmul_setup(n, in, nin, &ms) != ALMA_OK) {
    alma__error_clear();
    *macs = *flops = -1;
    return;
  }
  *macs = ms.batch * ms.M * ms.N * ms.K;
  *flops = 2 * *macs;
}

const alma_op_def alma__op_Gemm = {.name = "Gemm", .flags = ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 6, 7, 9, 11, 13},
                                   .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
                                   .infer = gemm_infer, .exec = gemm_exec, .cost = gemm_cost};

const alma_op_def alma__op_MatMul = {.name = "MatMul", .flags = ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 9, 13},
                                     .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                     .infer = matmul_infer, .exec = matmul_exec, .cost = matmul_cost};
