/* DNNL runtime: causal alma.Attention as two oneDNN SGEMMs (dnnl_sgemm) per block of query rows,
 * the softmax between them while the block's scores are in cache. A block multiplies only the keys
 * up to its last row's causal frontier; the rest of the [Sq, Sk] scores are masked and never
 * computed, so causal prefill does about half the work of oneDNN's batched matmul + softmax
 * primitives, which would compute every score and then mask it.
 * Blocks run on the OpenMP team oneDNN uses (alma__dn_parallel), each calling dnnl_sgemm on its own
 * thread (oneDNN's gemm runs single-threaded inside a parallel region). Items are taken longest
 * first, so the short blocks fill in at the end. */
#ifdef ALMA_HAVE_DNNL

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "ops/sgemm.h" /* ALMA_MULTIVERSION */
#include "ops/softmax_row.h"
#include "runtimes/dnnl/dnnl_native.h"

#include <oneapi/dnnl/dnnl.h>

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

ALMA_MULTIVERSION static void scale_rows(float *y, int64_t rows, int64_t cols, int64_t ld, const float *f) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) y[r * ld + c] *= f[r];
}

static int64_t limit(const dn_attn_geo *a, int64_t i) {
  return a->causal ? min64(a->Sk, max64(0, i + a->coff + 1)) : a->Sk;
}

void alma__dn_attn_plan(dn_attn_geo *a, int T) {
  if (T < 1) T = 1;
  a->rows = a->blocks = 0;
  if (a->Sq <= 0) return;
  /* a block's scores (rows x Sk) stay in L2 beside its K and V; causal blocks are smaller, since
   * each skips the keys after its last row (32 rows of 512 keys: 17/32 of the scores computed) */
  int64_t rows = min64(a->Sq, max64(a->causal ? 8 : 16, (a->causal ? 16384 : 32768) / max64(1, a->Sk)));
  int64_t blocks = (a->Sq + rows - 1) / rows;
  while (T > 1 && a->batch * blocks < 2 * T && (a->Sq + blocks) / (blocks + 1) >= 8) blocks++;
  a->rows = (a->Sq + blocks - 1) / blocks;
  a->blocks = (a->Sq + a->rows - 1) / a->rows;
}

size_t alma__dn_attn_scratch(const dn_attn_geo *a, int threads) {
  size_t per = (size_t)(a->rows * (a->Sk + 1) + 16); /* scores [rows, Sk] and 1/sum per row */
  return per * sizeof(float) * (size_t)(threads > 1 ? threads : 1);
}

typedef struct attn_job {
  const dn_attn_geo *a;
  float *scratch;
  size_t per;
  atomic_llong next;
  atomic_int failed;
} attn_job;

static void attn_worker(void *arg, int tid, int nt) {
  (void)nt;
  attn_job *j = arg;
  const dn_attn_geo *a = j->a;
  int64_t Sq = a->Sq, Sk = a->Sk, D = a->D, Dv = a->Dv, items = a->batch * a->blocks;
  float *s = j->scratch + (size_t)tid * j->per, *inv = s + a->rows * Sk;
  for (int64_t it; (it = atomic_fetch_add(&j->next, 1)) < items;) {
    int64_t b = it / a->blocks, blk = a->causal ? a->blocks - 1 - it % a->blocks : it % a->blocks;
    int64_t r0 = blk * a->rows, nr = min64(Sq, r0 + a->rows) - r0;
    if (nr <= 0) continue;
    const float *Q = a->q + a->q_off[b] + r0 * a->q_ld, *K = a->k + a->k_off[b], *V = a->v + a->v_off[b];
    float *Y = a->y + a->y_off[b] + r0 * a->y_ld;
    int64_t L = limit(a, r0 + nr - 1); /* the block's keys; later ones are masked for all its rows */
    if (L == 0) { /* no keys (Sk = 0: the sum of no rows of V) or every key masked */
      float z = a->causal && Sk > 0 && !a->zero_masked ? NAN : 0.0f;
      for (int64_t r = 0; r < nr; r++)
        for (int64_t e = 0; e < Dv; e++) Y[r * a->y_ld + e] = z;
      continue;
    }
    dnnl_status_t st = dnnl_success;
    if (D == 0) memset(s, 0, sizeof(float) * (size_t)(nr * L));
    else
      st = dnnl_sgemm('N', a->kt ? 'N' : 'T', nr, L, D, a->scale, Q, a->q_ld, K, a->k_ld, 0.0f, s, L);
    for (int64_t r = 0; r < nr && st == dnnl_success; r++) {
      const float *mrow = a->mask ? a->mask + a->m_off[b] + (r0 + r) * a->m_row : NULL;
      float *sr = s + r * L;
      int64_t Lr = limit(a, r0 + r); /* <= L: the keys after it weigh 0 in the product with V */
      if (Lr < L) memset(sr + Lr, 0, sizeof(float) * (size_t)(L - Lr));
      if (Lr == 0) {
        inv[r] = a->zero_masked ? 0.0f : NAN;
        continue;
      }
      inv[r] = 1.0f / alma__softmax_exp_row(sr, Lr, mrow, a->m_col);
      if (a->zero_masked && mrow && inv[r] != inv[r]) { /* NaN: maybe every visible key masked */
        int closed = 1;
        for (int64_t c = 0; closed && c < (a->m_col ? Lr : 1); c++) closed = mrow[c] == -INFINITY;
        if (closed) {
          memset(sr, 0, sizeof(float) * (size_t)Lr);
          inv[r] = 0.0f;
        }
      }
    }
    if (st == dnnl_success) st = dnnl_sgemm('N', 'N', nr, Dv, L, 1.0f, s, L, V, a->v_ld, 0.0f, Y, a->y_ld);
    if (st != dnnl_success) {
      atomic_store(&j->failed, 1);
      return;
    }
    scale_rows(Y, nr, Dv, a->y_ld, inv);
  }
}

int alma__dn_attn(const dn_attn_geo *a, int threads, float *scratch) {
  if (a->batch == 0 || a->Sq == 0 || a->Dv == 0 || a->blocks == 0) return 1;
  attn_job j = {.a = a, .scratch = scratch, .per = (size_t)(a->rows * (a->Sk + 1) + 16)};
  atomic_init(&j.next, 0);
  atomic_init(&j.failed, 0);
  int64_t items = a->batch * a->blocks;
  int64_t macs = a->batch * a->Sq * max64(1, a->causal ? a->Sk / 2 : a->Sk) * (a->D + a->Dv + 1);
  int nt = macs < (1 << 16) ? 1 : (int)min64(threads, items);
  alma__dn_parallel(nt, attn_worker, &j);
  return !atomic_load(&j.failed);
}

#endif
