/* Matrix-multiply kernels (see sgemm.h).
 *
 * float32: the BLIS/GotoBLAS loop nest. op(B) is packed in KC x NC blocks of NR-wide column
 * panels, op(A) in MC x KC blocks of MR-tall row panels, and a 6x16 micro-kernel keeps its C tile
 * in 12 eight-float vector registers across the whole KC loop, so each loaded B vector feeds six
 * FMAs. The vector code is plain GCC/Clang vector extensions, compiled twice through target_clones
 * (AVX2+FMA and baseline x86-64) and picked at load time, so the library stays portable without
 * -march flags. Very flat shapes (few rows or columns) skip packing, which would cost as much as
 * the product itself. */
#include "ops/sgemm.h"

#define MR 6
#define NR 16
#define KC 256
#define MC 120 /* multiple of MR */
#define NC 2048 /* multiple of NR */

typedef alma__v8f v8f;
#define ld8 ALMA_LD8
#define st8 ALMA_ST8

static inline __attribute__((always_inline)) int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Epilogue of a C tile: what the first K block does with C and the biases. */
typedef struct tile_ep {
  int load_c;         /* add to C's contents (0: overwrite, beta == 0 on the first K block) */
  const float *rbias; /* per-row bias of this tile, or NULL */
  const float *cbias; /* per-column bias of this tile, or NULL */
} tile_ep;

/* C[mr x nr] = (load_c ? C : 0) + alpha * Ap(panel, kc x MR) * Bp(panel, kc x NR) + biases */
static inline __attribute__((always_inline)) void ukernel(int64_t kc, const float *restrict a,
                                                          const float *restrict b, float *restrict c,
                                                          int64_t ldc, int mr, int nr, float alpha,
                                                          tile_ep ep) {
  v8f c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0};
  v8f c30 = {0}, c31 = {0}, c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0};
  for (int64_t k = 0; k < kc; k++) {
    v8f b0 = ld8(b), b1 = ld8(b + 8);
    float a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], a4 = a[4], a5 = a[5];
    c00 += a0 * b0, c01 += a0 * b1;
    c10 += a1 * b0, c11 += a1 * b1;
    c20 += a2 * b0, c21 += a2 * b1;
    c30 += a3 * b0, c31 += a3 * b1;
    c40 += a4 * b0, c41 += a4 * b1;
    c50 += a5 * b0, c51 += a5 * b1;
    a += MR;
    b += NR;
  }
  v8f acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (mr == MR && nr == NR) {
    v8f cb0 = {0}, cb1 = {0};
    if (ep.cbias) cb0 = ld8(ep.cbias), cb1 = ld8(ep.cbias + 8);
    for (int r = 0; r < MR; r++) {
      float *cr = c + r * ldc;
      v8f b0 = cb0, b1 = cb1;
      if (ep.rbias) b0 += ep.rbias[r], b1 += ep.rbias[r];
      if (ep.load_c) b0 += ld8(cr), b1 += ld8(cr + 8);
      st8(cr, b0 + alpha * acc[r][0]);
      st8(cr + 8, b1 + alpha * acc[r][1]);
    }
  } else {
    float t[MR][NR];
    for (int r = 0; r < MR; r++) {
      st8(&t[r][0], acc[r][0]);
      st8(&t[r][8], acc[r][1]);
    }
    for (int r = 0; r < mr; r++)
      for (int j = 0; j < nr; j++) {
        float v = alpha * t[r][j];
        if (ep.rbias) v += ep.rbias[r];
        if (ep.cbias) v += ep.cbias[j];
        c[r * ldc + j] = ep.load_c ? c[r * ldc + j] + v : v;
      }
  }
}

static void pack_b(int trans_b, const float *B, int64_t ldb, int64_t p0, int64_t j0, int64_t kc, int64_t nc,
                   float *restrict Bp) {
  for (int64_t jp = 0; jp < nc; jp += NR) {
    float *dst = Bp + jp * kc;
    int nr = (int)min64(NR, nc - jp);
    if (!trans_b && nr == NR) {
      /* two vector moves per row (a byte loop here becomes a memcpy call per 64 bytes) */
      for (int64_t k = 0; k < kc; k++) {
        const float *src = B + (p0 + k) * ldb + j0 + jp;
        st8(dst + k * NR, ld8(src));
        st8(dst + k * NR + 8, ld8(src + 8));
      }
    } else if (!trans_b) {
      for (int64_t k = 0; k < kc; k++) {
        const float *src = B + (p0 + k) * ldb + j0 + jp;
        float *d = dst + k * NR;
        int j = 0;
        for (; j < nr; j++) d[j] = src[j];
        for (; j < NR; j++) d[j] = 0.0f;
      }
    } else {
      if (nr < NR)
        for (int64_t k = 0; k < kc; k++)
          for (int j = nr; j < NR; j++) dst[k * NR + j] = 0.0f;
      for (int j = 0; j < nr; j++) {
        const float *src = B + (j0 + jp + j) * ldb + p0;
        for (int64_t k = 0; k < kc; k++) dst[k * NR + j] = src[k];
      }
    }
  }
}

static void pack_a(int trans_a, const float *A, int64_t lda, int64_t i0, int64_t p0, int64_t mc, int64_t kc,
                   float *restrict Ap) {
  for (int64_t ip = 0; ip < mc; ip += MR) {
    float *dst = Ap + ip * kc;
    int mr = (int)min64(MR, mc - ip);
    if (!trans_a) {
      /* read MR row streams, write the panel contiguously */
      const float *src[MR];
      for (int r = 0; r < MR; r++) src[r] = A + (i0 + ip + (r < mr ? r : 0)) * lda + p0;
      if (mr == MR) {
        for (int64_t k = 0; k < kc; k++) {
          float *d = dst + k * MR;
          d[0] = src[0][k], d[1] = src[1][k], d[2] = src[2][k], d[3] = src[3][k], d[4] = src[4][k], d[5] = src[5][k];
        }
      } else {
        for (int64_t k = 0; k < kc; k++)
          for (int r = 0; r < MR; r++) dst[k * MR + r] = r < mr ? src[r][k] : 0.0f;
      }
    } else {
      for (int64_t k = 0; k < kc; k++) {
        const float *src = A + (p0 + k) * lda + i0 + ip;
        float *d = dst + k * MR;
        int r = 0;
        for (; r < mr; r++) d[r] = src[r];
        for (; r < MR; r++) d[r] = 0.0f;
      }
    }
  }
}

/* load_c: whether the first K block adds to C (beta != 0) or overwrites it (beta == 0). */
ALMA_MULTIVERSION
static void sgemm_blocked(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                          int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, int load_c,
                          const float *rbias, const float *cbias, float *Ap, float *Bp) {
  for (int64_t jc = 0; jc < N; jc += NC) {
    int64_t nc = min64(NC, N - jc);
    for (int64_t pc = 0; pc < K; pc += KC) {
      int64_t kc = min64(KC, K - pc);
      pack_b(trans_b, B, ldb, pc, jc, kc, nc, Bp);
      for (int64_t ic = 0; ic < M; ic += MC) {
        int64_t mc = min64(MC, M - ic);
        pack_a(trans_a, A, lda, ic, pc, mc, kc, Ap);
        for (int64_t jr = 0; jr < nc; jr += NR) {
          int nr = (int)min64(NR, nc - jr);
          for (int64_t ir = 0; ir < mc; ir += MR) {
            int mr = (int)min64(MR, mc - ir);
            tile_ep ep = {1, NULL, NULL};
            if (pc == 0) { /* the first K block applies beta (0 or 1 here) and the biases */
              ep.load_c = load_c;
              ep.rbias = rbias ? rbias + ic + ir : NULL;
              ep.cbias = cbias ? cbias + jc + jr : NULL;
            }
            ukernel(kc, Ap + ir * kc, Bp + jr * kc, C + (ic + ir) * ldc + jc + jr, ldc, mr, nr, alpha, ep);
          }
        }
      }
    }
  }
}

/* Dot product with eight independent vector partial sums: without -ffast-math the compiler may not
 * reassociate a scalar reduction, so the vector form is spelled out. */
static inline __attribute__((always_inline)) float dot(const float *restrict x, const float *restrict y,
                                                       int64_t n) {
  v8f s0 = {0}, s1 = {0};
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    s0 += ld8(x + k) * ld8(y + k);
    s1 += ld8(x + k + 8) * ld8(y + k + 8);
  }
  s0 += s1;
  float s = 0.0f;
  for (int i = 0; i < 8; i++) s += s0[i];
  for (; k < n; k++) s += x[k] * y[k];
  return s;
}

ALMA_MULTIVERSION
void alma__saxpy(int64_t n, float a, const float *restrict x, float *restrict y) {
  v8f av = (v8f){0} + a;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    st8(y + j, ld8(y + j) + av * ld8(x + j));
    st8(y + j + 8, ld8(y + j + 8) + av * ld8(x + j + 8));
  }
  for (; j < n; j++) y[j] += a * x[j];
}

ALMA_MULTIVERSION
float alma__sdot(int64_t n, const float *x, const float *y) { return dot(x, y, n); }

/* Few rows (decode steps, batch-2 Linears): up to 4 rows of C at once, so B is read once for all of
 * them. Each C element gets the same operations in the same order as one row's
 * c[j] += (alpha * a[k]) * b[k][j] over k (and, with a transposed B, c[j] += alpha * dot(a, b_j)),
 * so the result does not depend on how many rows share the pass. Non-transposed B: four B rows per
 * pass over a block of RN_COLS columns of C (kept in L1), each C vector loaded and stored once per
 * four k. */
#define RN_COLS 512
static void scale_c(int64_t M, int64_t N, float beta, float *C, int64_t ldc, const float *rbias,
                    const float *cbias);
static inline __attribute__((always_inline)) void rows_nn(int R, int64_t N, int64_t K, float alpha,
                                                          const float *restrict A, int64_t lda,
                                                          const float *restrict B, int64_t ldb, float *restrict C,
                                                          int64_t ldc) {
  for (int64_t jc = 0; jc < N; jc += RN_COLS) {
    int64_t nb = min64(RN_COLS, N - jc);
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
      float a[4][4];
      for (int r = 0; r < R; r++)
        for (int q = 0; q < 4; q++) a[r][q] = alpha * A[r * lda + k + q];
      const float *b0 = B + k * ldb + jc, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
      float *c = C + jc;
      int64_t j = 0;
      for (; j + 8 <= nb; j += 8) {
        v8f x0 = ld8(b0 + j), x1 = ld8(b1 + j), x2 = ld8(b2 + j), x3 = ld8(b3 + j);
        for (int r = 0; r < R; r++) {
          v8f v = ld8(c + r * ldc + j);
          v = v + a[r][0] * x0;
          v = v + a[r][1] * x1;
          v = v + a[r][2] * x2;
          v = v + a[r][3] * x3;
          st8(c + r * ldc + j, v);
        }
      }
      for (; j < nb; j++)
        for (int r = 0; r < R; r++) {
          float *cj = c + r * ldc + j;
          *cj += a[r][0] * b0[j];
          *cj += a[r][1] * b1[j];
          *cj += a[r][2] * b2[j];
          *cj += a[r][3] * b3[j];
        }
    }
    for (; k < K; k++) {
      const float *b0 = B + k * ldb + jc;
      for (int r = 0; r < R; r++) {
        float av = alpha * A[r * lda + k];
        float *c = C + r * ldc + jc;
        int64_t j = 0;
        for (; j + 8 <= nb; j += 8) st8(c + j, ld8(c + j) + av * ld8(b0 + j));
        for (; j < nb; j++) c[j] += av * b0[j];
      }
    }
  }
}

/* Transposed B: C[r, j] += alpha * dot(A[r, :], B[j, :]) for R rows per B row, each row's dot
 * summed exactly as dot() does. */
static inline __attribute__((always_inline)) void rows_nt(int R, int64_t N, int64_t K, float alpha,
                                                          const float *restrict A, int64_t lda,
                                                          const float *restrict B, int64_t ldb, float *restrict C,
                                                          int64_t ldc) {
  for (int64_t j = 0; j < N; j++) {
    const float *b = B + j * ldb;
    v8f s0[4], s1[4];
    for (int r = 0; r < R; r++) s0[r] = s1[r] = (v8f){0};
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
      v8f x0 = ld8(b + k), x1 = ld8(b + k + 8);
      for (int r = 0; r < R; r++) {
        s0[r] += ld8(A + r * lda + k) * x0;
        s1[r] += ld8(A + r * lda + k + 8) * x1;
      }
    }
    for (int r = 0; r < R; r++) {
      v8f t = s0[r] + s1[r];
      float s = 0.0f;
      for (int i = 0; i < 8; i++) s += t[i];
      for (int64_t q = k; q < K; q++) s += A[r * lda + q] * b[q];
      C[r * ldc + j] += alpha * s;
    }
  }
}

ALMA_MULTIVERSION
static void rows_group(int trans_b, int R, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float *C, int64_t ldc) {
  switch (R) { /* constant row counts: the row loops unroll and the accumulators stay in registers */
    case 1: trans_b ? rows_nt(1, N, K, alpha, A, lda, B, ldb, C, ldc) : rows_nn(1, N, K, alpha, A, lda, B, ldb, C, ldc); break;
    case 2: trans_b ? rows_nt(2, N, K, alpha, A, lda, B, ldb, C, ldc) : rows_nn(2, N, K, alpha, A, lda, B, ldb, C, ldc); break;
    case 3: trans_b ? rows_nt(3, N, K, alpha, A, lda, B, ldb, C, ldc) : rows_nn(3, N, K, alpha, A, lda, B, ldb, C, ldc); break;
    default: trans_b ? rows_nt(4, N, K, alpha, A, lda, B, ldb, C, ldc) : rows_nn(4, N, K, alpha, A, lda, B, ldb, C, ldc); break;
  }
}

/* tmp holds K * min(M, 4) floats (a transposed A's rows gathered), unused otherwise. */
static void sgemm_few_rows(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                           int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, float *tmp) {
  for (int64_t i = 0; i < M; i += 4) {
    int R = (int)min64(4, M - i);
    const float *a = A + i * lda;
    int64_t la = lda;
    if (trans_a) {
      for (int r = 0; r < R; r++)
        for (int64_t k = 0; k < K; k++) tmp[r * K + k] = A[k * lda + i + r];
      a = tmp;
      la = K;
    }
    rows_group(trans_b, R, N, K, alpha, a, la, B, ldb, C + i * ldc, ldc);
  }
}

void alma__sgemm_rows(int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  scale_c(M, N, beta, C, ldc, NULL, NULL);
  if (K > 0 && alpha != 0.0f) sgemm_few_rows(0, trans_b, M, N, K, alpha, A, lda, B, ldb, C, ldc, NULL);
}

/* ---- few rows on packed B (sgemm.h) -------------------------------------------------------- */

#define PW ALMA_SGEMM_PANEL

alma_status alma__sgemm_pack(int trans_b, int64_t K, int64_t N, const float *B, int64_t ldb,
                             alma__sgemm_packed *out) {
  memset(out, 0, sizeof *out);
  if (K < 1 || N < 1) return alma__errorf(ALMA_ERR_INVALID_ARG, "packing an empty matrix (%lld x %lld)", (long long)K, (long long)N);
  int64_t panels = (N + PW - 1) / PW;
  if (panels > (int64_t)(SIZE_MAX / 2 / sizeof(float)) / PW / K)
    return alma__errorf(ALMA_ERR_NOMEM, "packed weights of %lld x %lld floats too large", (long long)K, (long long)N);
  size_t bytes = (size_t)panels * PW * (size_t)K * sizeof(float); /* a multiple of 64 */
  float *p = aligned_alloc(64, bytes);
  if (!p) return alma__errorf(ALMA_ERR_NOMEM, "out of memory packing weights (%zu bytes)", bytes);
  for (int64_t pn = 0; pn < panels; pn++) {
    float *d = p + pn * K * PW;
    int64_t j0 = pn * PW;
    int nc = (int)min64(PW, N - j0);
    if (!trans_b) {
      for (int64_t k = 0; k < K; k++) {
        const float *src = B + k * ldb + j0;
        int j = 0;
        for (; j < nc; j++) d[k * PW + j] = src[j];
        for (; j < PW; j++) d[k * PW + j] = 0.0f;
      }
    } else {
      for (int j = 0; j < PW; j++) {
        const float *src = j < nc ? B + (j0 + j) * ldb : NULL; /* a row of the stored [N, K] */
        for (int64_t k = 0; k < K; k++) d[k * PW + j] = src ? src[k] : 0.0f;
      }
    }
  }
  out->K = K;
  out->N = N;
  out->panels = panels;
  out->p = p;
  return ALMA_OK;
}

void alma__sgemm_packed_free(alma__sgemm_packed *pk) {
  if (!pk) return;
  free(pk->p);
  memset(pk, 0, sizeof *pk);
}

#define PK_ROWS 6 /* rows per pass over a group of panels */
#define PK_QMAX 4 /* panels per pass: independent accumulators when there are few rows */
#define PK_A_CHUNK (64 * 1024) /* floats of A per row chunk */

typedef float v16f __attribute__((vector_size(64)));
#define PK_UNROLL _Pragma("GCC unroll 12")

/* acc[r][v] += (alpha * a[r, k]) * b[k][v] over k for R rows and the Q * PW columns from t, in
 * vectors of type VT (v16f: one AVX-512 register; v8f: one AVX2 register; GCC splits a v16f into
 * AVX2 halves badly). The row and vector loops unrolled: GCC 12 leaves the accumulators in memory
 * otherwise. */
#define PK_ACCUMULATE(VT)                                                                                      \
  do {                                                                                                         \
    enum { NV = PW / (int)(sizeof(VT) / sizeof(float)), VW = (int)(sizeof(VT) / sizeof(float)) };            \
    VT acc[PK_ROWS][PK_QMAX * NV], bv[PK_QMAX * NV];                                                           \
    PK_UNROLL for (int r = 0; r < R; r++) PK_UNROLL for (int v = 0; v < Q * NV; v++)                           \
        memcpy(&acc[r][v], &t[r][v * VW], sizeof(VT));                                                       \
    for (int64_t k = 0; k < K; k++) {                                                                          \
      PK_UNROLL for (int v = 0; v < Q * NV; v++) memcpy(&bv[v], p + (v / NV) * pstr + k * PW + (v % NV) * VW, \
                                                        sizeof(VT));                                         \
      PK_UNROLL for (int r = 0; r < R; r++) {                                                                  \
        float a = unit ? A[r * lda + k] : alpha * A[r * lda + k];                                              \
        PK_UNROLL for (int v = 0; v < Q * NV; v++) acc[r][v] = acc[r][v] + a * bv[v];                          \
      }                                                                                                        \
    }                                                                                                          \
    PK_UNROLL for (int r = 0; r < R; r++) PK_UNROLL for (int v = 0; v < Q * NV; v++)                           \
        memcpy(&t[r][v * VW], &acc[r][v], sizeof(VT));                                                       \
  } while (0)

/* R rows x Q consecutive panels (pstr floats apart; the last has nc valid columns, the others PW):
 * the C tile lives in vector registers over all of K (wide: AVX-512 ones). The initial value is
 * scale_c's expression, the sum rows_nn's: c = c + (alpha * a_k) * b_k, so the bits depend on
 * neither R, Q nor the vector width. unit: alpha == 1 (1 * a == a, so the broadcast comes straight
 * from A). */
static inline __attribute__((always_inline)) void packed_tile(int wide, int R, int Q, int unit, int64_t K,
                                                              float alpha, const float *restrict A, int64_t lda,
                                                              const float *restrict p, int64_t pstr,
                                                              float *restrict C, int64_t ldc, int nc, float beta,
                                                              const float *rb, const float *cb) {
  float t[PK_ROWS][PK_QMAX * PW];
  int plain = beta == 1.0f && !rb && !cb, ncol = (Q - 1) * PW + nc; /* plain: scale_c leaves C as it is */
  for (int r = 0; r < R; r++) {
    const float *c = C + r * ldc;
    for (int j = 0; j < ncol; j++) {
      if (plain) {
        t[r][j] = c[j];
      } else {
        float v = beta == 0.0f ? 0.0f : beta == 1.0f ? c[j] : beta * c[j];
        t[r][j] = v + (rb ? rb[r] : 0.0f) + (cb ? cb[j] : 0.0f);
      }
    }
    for (int j = ncol; j < Q * PW; j++) t[r][j] = 0.0f;
  }
  if (alpha != 0.0f) { /* alpha == 0: scale_c only, as alma__sgemm_rows (no NaN from A or B) */
    if (wide) PK_ACCUMULATE(v16f);
    else PK_ACCUMULATE(v8f);
  }
  for (int r = 0; r < R; r++) memcpy(C + r * ldc, t[r], (size_t)ncol * sizeof(float));
}

/* Panels per pass for R rows: enough independent accumulators to cover the FMA latency, within the
 * vector registers: wide (AVX-512, 32 registers, one per vector) or not (AVX2, 16 registers, two
 * per vector). More than four panels (streams from L2) is slower for one row on Zen 5. */
static inline __attribute__((always_inline)) int packed_q(int wide, int R) {
  if (wide) return R <= 3 ? 4 : 2;
  return R == 1 ? 4 : R <= 3 ? 2 : 1;
}

static inline __attribute__((always_inline)) void packed_tile_rq(int wide, int R, int Q, int64_t K, float alpha,
                                                                 const float *A, int64_t lda, const float *p,
                                                                 int64_t pstr, float *C, int64_t ldc, int nc,
                                                                 float beta, const float *rb, const float *cb) {
  if (alpha == 1.0f) packed_tile(wide, R, Q, 1, K, alpha, A, lda, p, pstr, C, ldc, nc, beta, rb, cb);
  else packed_tile(wide, R, Q, 0, K, alpha, A, lda, p, pstr, C, ldc, nc, beta, rb, cb);
}

/* Blocks of PK_QMAX panels (K x 256 bytes, in L2 while each row group takes them), row groups of
 * PK_ROWS inside, each group taking the block packed_q(R) panels at a time (one at a time for the
 * block's remainder). Constant R and Q at every call, so the accumulators stay in registers. */
static inline __attribute__((always_inline)) void packed_rows_body(int wide, int64_t M, int64_t p0, int64_t p1,
                                                                   float alpha, const float *A, int64_t lda,
                                                                   const alma__sgemm_packed *B, float beta,
                                                                   float *C, int64_t ldc, const float *row_bias,
                                                                   const float *col_bias) {
  int64_t K = B->K, pstr = K * PW, end = min64(p1, B->panels);
  /* many rows (a recurrent node's input projection over all steps): chunks of A of 256 KB, in L2
   * while every panel block takes them */
  int64_t mch = (PK_A_CHUNK / K) / PK_ROWS * PK_ROWS;
  if (mch < PK_ROWS) mch = PK_ROWS;
  for (int64_t i0 = 0; i0 < M; i0 += mch) {
    for (int64_t pb = p0; pb < end; pb += PK_QMAX) {
      int64_t pe = min64(pb + PK_QMAX, end), m1 = min64(M, i0 + mch);
      for (int64_t i = i0; i < m1; i += PK_ROWS) {
        int R = (int)min64(PK_ROWS, m1 - i), Q = packed_q(wide, R);
        const float *a = A + i * lda, *rb = row_bias ? row_bias + i : NULL;
        for (int64_t pn = pb; pn < pe;) {
          int q = pe - pn >= Q ? Q : 1;
          int64_t j0 = pn * PW;
          int nc = (int)min64(PW, B->N - (pn + q - 1) * PW);
          const float *p = B->p + pn * pstr, *cb = col_bias ? col_bias + j0 : NULL;
          float *c = C + i * ldc + j0;
#define PK_TILE(r, qq) packed_tile_rq(wide, r, qq, K, alpha, a, lda, p, pstr, c, ldc, nc, beta, rb, cb)
          if (q == 1) {
            switch (R) {
              case 1: PK_TILE(1, 1); break;
              case 2: PK_TILE(2, 1); break;
              case 3: PK_TILE(3, 1); break;
              case 4: PK_TILE(4, 1); break;
              case 5: PK_TILE(5, 1); break;
              default: PK_TILE(6, 1); break;
            }
          } else if (wide) {
            switch (R) {
              case 1: PK_TILE(1, 4); break;
              case 2: PK_TILE(2, 4); break;
              case 3: PK_TILE(3, 4); break;
              case 4: PK_TILE(4, 2); break;
              case 5: PK_TILE(5, 2); break;
              default: PK_TILE(6, 2); break;
            }
          } else {
            switch (R) {
              case 1: PK_TILE(1, 4); break;
              case 2: PK_TILE(2, 2); break;
              default: PK_TILE(3, 2); break; /* four rows and more take one panel at a time */
            }
          }
#undef PK_TILE
          pn += q;
        }
      }
    }
  }
}

ALMA_MULTIVERSION
static void packed_rows_avx2(int64_t M, int64_t p0, int64_t p1, float alpha, const float *A, int64_t lda,
                             const alma__sgemm_packed *B, float beta, float *C, int64_t ldc, const float *row_bias,
                             const float *col_bias) {
  packed_rows_body(0, M, p0, p1, alpha, A, lda, B, beta, C, ldc, row_bias, col_bias);
}

#if defined(__x86_64__) && !defined(ALMA_NO_MULTIVERSION)
/* The same sums on AVX-512, fused multiply-adds as in the AVX2+FMA clone that every AVX-512 CPU
 * also runs (so the same bits as alma__sgemm_rows there): twice the width per instruction, twice
 * the registers. Not without multiversioning, where the portable code rounds products apart. */
__attribute__((target("avx512f,fma"))) static void packed_rows_avx512(int64_t M, int64_t p0, int64_t p1, float alpha,
                                                                       const float *A, int64_t lda,
                                                                       const alma__sgemm_packed *B, float beta,
                                                                       float *C, int64_t ldc, const float *row_bias,
                                                                       const float *col_bias) {
  packed_rows_body(1, M, p0, p1, alpha, A, lda, B, beta, C, ldc, row_bias, col_bias);
}
#define HAVE_PACKED_AVX512 1
#endif

void alma__sgemm_packed_rows(int64_t M, int64_t p0, int64_t p1, float alpha, const float *A, int64_t lda,
                             const alma__sgemm_packed *B, float beta, float *C, int64_t ldc, const float *row_bias,
                             const float *col_bias) {
#ifdef HAVE_PACKED_AVX512
  if (__builtin_cpu_supports("avx512f")) {
    packed_rows_avx512(M, p0, p1, alpha, A, lda, B, beta, C, ldc, row_bias, col_bias);
    return;
  }
#endif
  packed_rows_avx2(M, p0, p1, alpha, A, lda, B, beta, C, ldc, row_bias, col_bias);
}

/* Few columns: each C column is op(A) times a gathered B column; rows of A (not transposed) are
 * contiguous, so dot products; a transposed A streams rows instead. tmp holds K + M floats. */
static void sgemm_few_cols(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                           int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, float *tmp) {
  float *bcol = tmp, *ccol = tmp + K;
  for (int64_t j = 0; j < N; j++) {
    for (int64_t k = 0; k < K; k++) bcol[k] = trans_b ? B[j * ldb + k] : B[k * ldb + j];
    if (!trans_a) {
      for (int64_t i = 0; i < M; i++) C[i * ldc + j] += alpha * alma__sdot(K, A + i * lda, bcol);
    } else {
      for (int64_t i = 0; i < M; i++) ccol[i] = 0.0f;
      for (int64_t k = 0; k < K; k++) alma__saxpy(M, alpha * bcol[k], A + k * lda, ccol);
      for (int64_t i = 0; i < M; i++) C[i * ldc + j] += ccol[i];
    }
  }
}

/* C = beta * C (beta == 0 ignores C's contents) plus the biases. */
static void scale_c(int64_t M, int64_t N, float beta, float *C, int64_t ldc, const float *rbias,
                    const float *cbias) {
  if (beta == 1.0f && !rbias && !cbias) return;
  for (int64_t i = 0; i < M; i++) {
    float *c = C + i * ldc;
    float rb = rbias ? rbias[i] : 0.0f;
    for (int64_t j = 0; j < N; j++) {
      float v = beta == 0.0f ? 0.0f : beta == 1.0f ? c[j] : beta * c[j];
      c[j] = v + rb + (cbias ? cbias[j] : 0.0f);
    }
  }
}

alma_status alma__sgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                        int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  return alma__sgemm_bias(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL, NULL);
}

alma_status alma__sgemm_bias(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                             const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                             int64_t ldc, const float *row_bias, const float *col_bias) {
  if (M <= 0 || N <= 0) return ALMA_OK;
  if (K <= 0 || alpha == 0.0f || M < 4 || N < 4) {
    scale_c(M, N, beta, C, ldc, row_bias, col_bias);
    if (K <= 0 || alpha == 0.0f) return ALMA_OK;
    size_t ntmp = (size_t)(M < 4 ? K * M : K + M);
    float *tmp = malloc(ntmp * sizeof *tmp);
    if (!tmp) return alma__errorf(ALMA_ERR_NOMEM, "out of memory in matrix multiply (%lld floats)", (long long)ntmp);
    if (M < 4)
      sgemm_few_rows(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, C, ldc, tmp);
    else
      sgemm_few_cols(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, C, ldc, tmp);
    free(tmp);
    return ALMA_OK;
  }
  int load_c = beta != 0.0f;
  if (beta != 0.0f && beta != 1.0f) scale_c(M, N, beta, C, ldc, NULL, NULL); /* then add as beta = 1 */
  int64_t kc = min64(KC, K);
  int64_t nc = (min64(NC, N) + NR - 1) / NR * NR;
  int64_t mc = (min64(MC, M) + MR - 1) / MR * MR;
  size_t na = (size_t)(mc * kc), nb = (size_t)(nc * kc);
  float *buf = aligned_alloc(64, ((na + nb) * sizeof(float) + 63) / 64 * 64);
  if (!buf) return alma__errorf(ALMA_ERR_NOMEM, "out of memory in matrix multiply (packing buffers)");
  sgemm_blocked(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, C, ldc, load_c, row_bias, col_bias, buf, buf + na);
  free(buf);
  return ALMA_OK;
}

void alma__dgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
                 int64_t lda, const double *B, int64_t ldb, double beta, double *C, int64_t ldc) {
  for (int64_t i = 0; i < M; i++) {
    double *c = C + i * ldc;
    if (beta == 0.0)
      for (int64_t j = 0; j < N; j++) c[j] = 0.0;
    else if (beta != 1.0)
      for (int64_t j = 0; j < N; j++) c[j] *= beta;
    for (int64_t k = 0; k < K; k++) {
      double av = alpha * (trans_a ? A[k * lda + i] : A[i * lda + k]);
      if (!trans_b) {
        const double *b = B + k * ldb;
        for (int64_t j = 0; j < N; j++) c[j] += av * b[j];
      } else {
        for (int64_t j = 0; j < N; j++) c[j] += av * B[j * ldb + k];
      }
    }
  }
}

void alma__igemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const uint64_t *A, int64_t lda,
                 const uint64_t *B, int64_t ldb, int accumulate, uint64_t *C, int64_t ldc) {
  for (int64_t i = 0; i < M; i++) {
    uint64_t *c = C + i * ldc;
    if (!accumulate)
      for (int64_t j = 0; j < N; j++) c[j] = 0;
    for (int64_t k = 0; k < K; k++) {
      uint64_t av = trans_a ? A[k * lda + i] : A[i * lda + k];
      for (int64_t j = 0; j < N; j++) c[j] += av * (trans_b ? B[j * ldb + k] : B[k * ldb + j]);
    }
  }
}
