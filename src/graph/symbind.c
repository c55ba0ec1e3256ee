/* Bindings of symbolic input dims for static inference; see symbind.h. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "graph/symbind.h"

void alma__symbind_free(alma_symbind *b) {
  free(b->sym);
  free(b->coef);
  free(b->off);
  free(b->free_);
  memset(b, 0, sizeof *b);
}

/* The value of each symbol in a variant: free symbols (in order of appearance, reversed in
 * variant 1) 3 apart, so that ties of +-1 never make two of them coincide, and variant 0's values
 * (0 mod 3) never equal variant 1's (1 mod 3). Variant ALMA_SYMBIND_LARGE puts them at odd values
 * above 500, 6 apart: a spatial dim after strided layers (stride product up to 256) is still above 1
 * there, where the small variants all shrink it to 1. Returns 0 when a tie would make a dim below 1. */
static int values(const alma_symbind *b, int variant, int64_t *val) {
  int m = 0, n = b->n_sym;
  for (int s = 0; s < n; s++) m += b->free_[s];
  int64_t *base = val + n;
  for (int s = 0, k = 0; s < n; s++)
    if (b->free_[s])
      base[s] = variant == ALMA_SYMBIND_LARGE ? 509 + 6 * k++ : variant ? 4 + 3 * (m - 1 - k++) : 3 + 3 * k++;
  for (int s = 0; s < n; s++) {
    val[s] = b->off[s];
    for (int r = 0; r < n; r++)
      if (b->free_[r]) val[s] += b->coef[s * n + r] * base[r];
    if (val[s] < 1) return 0;
  }
  return 1;
}

/* Inference under the variant; *unknown gets its count of unknown values. Returns inference's
 * error, ALMA_ERR_DYNAMIC when a tie makes a dim below 1. */
static alma_status run(const alma_graph *g, const alma_symbind *b, int variant, int64_t max_fold, alma_infer_result *r,
                       int *unknown) {
  int64_t *val = malloc(sizeof(int64_t) * (2 * (size_t)b->n_sym + 1));
  alma_tensor *shapes = calloc((size_t)g->n_inputs + 1, sizeof *shapes);
  const alma_tensor **given = calloc((size_t)g->n_inputs + 1, sizeof *given);
  alma_status st = val && shapes && given ? ALMA_OK : alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (st == ALMA_OK && !values(b, variant, val)) st = ALMA_ERR_DYNAMIC;
  for (int i = 0; st == ALMA_OK && i < g->n_inputs; i++) {
    const alma_value *v = &g->values[g->inputs[i]];
    if (v->rank < 0 || v->dtype == ALMA_DTYPE_UNDEFINED) continue;
    for (int d = 0; d < v->rank; d++) {
      int s = b->sym[i * ALMA_MAX_RANK + d];
      shapes[i].dims[d] = s >= 0 ? val[s] : v->dims[d];
    }
    shapes[i].dtype = v->dtype;
    shapes[i].rank = v->rank;
    given[i] = &shapes[i];
  }
  if (st == ALMA_OK) {
    st = alma__graph_infer(g, given, 2, max_fold, r);
    if (st == ALMA_OK) *unknown = r->n_unknown;
    else alma__infer_result_free(r); /* what it computed before the error */
  }
  free(val);
  free(shapes);
  free(given);
  return st;
}

/* The count of unknown values under both variants (a tie that helps only where the free symbols'
 * values happen to satisfy a relation, such as 3 + 6 = 9, does not help in the other), INT_MAX
 * when inference fails under one (a binding that is impossible, or one that drives some op's
 * constant evaluation into an error: the search just does not take it). Only running out of
 * memory is an error. */
static alma_status score(const alma_graph *g, const alma_symbind *b, int64_t max_fold, int *unknown) {
  *unknown = 0;
  for (int variant = 0; variant < 2; variant++) {
    alma_infer_result r;
    int u = INT_MAX;
    alma_status st = run(g, b, variant, max_fold, &r, &u);
    if (st == ALMA_OK) alma__infer_result_free(&r);
    if (st == ALMA_ERR_NOMEM) return st;
    if (st != ALMA_OK) {
      *unknown = INT_MAX;
      return ALMA_OK;
    }
    *unknown += u;
  }
  return ALMA_OK;
}

/* Ties free symbol j to mul times the value of symbol i (plus symbol k's when k >= 0) plus d: j
 * stops being free and every symbol's expression has j's replaced. The old state goes to save. */
typedef struct sb_save {
  int *coef, *off, *free_;
} sb_save;

static void save_state(const alma_symbind *b, sb_save *sv) {
  size_t n = (size_t)b->n_sym;
  memcpy(sv->coef, b->coef, sizeof(int) * n * n);
  memcpy(sv->off, b->off, sizeof(int) * n);
  memcpy(sv->free_, b->free_, sizeof(int) * n);
}

static void restore_state(alma_symbind *b, const sb_save *sv) {
  size_t n = (size_t)b->n_sym;
  memcpy(b->coef, sv->coef, sizeof(int) * n * n);
  memcpy(b->off, sv->off, sizeof(int) * n);
  memcpy(b->free_, sv->free_, sizeof(int) * n);
}

/* Returns 0 (nothing changed) when i's or k's value depends on j. */
static int tie(alma_symbind *b, int j, int i, int k, int d, int mul) {
  int n = b->n_sym;
  if (b->coef[i * n + j] || (k >= 0 && b->coef[k * n + j])) return 0;
  int e[64], eo = d; /* j's new expression */
  for (int r = 0; r < n; r++) e[r] = mul * b->coef[i * n + r] + (k >= 0 ? b->coef[k * n + r] : 0);
  eo += mul * b->off[i] + (k >= 0 ? b->off[k] : 0);
  for (int x = 0; x < n; x++) {
    int cj = b->coef[x * n + j];
    if (!cj) continue;
    b->coef[x * n + j] = 0;
    for (int r = 0; r < n; r++) b->coef[x * n + r] += cj * e[r];
    b->off[x] += cj * eo;
  }
  b->free_[j] = 0;
  return 1;
}

/* Candidate factors of a product tie: the distinct small positive integer scalars the graph holds
 * (initializers and Constant nodes: a head count shows up in its reshapes' shape arithmetic). */
static int factors(const alma_graph *g, int *f, int max) {
  int n = 0;
  for (int i = 0; i < g->n_values + g->n_nodes && n < max; i++) {
    const alma_tensor *t = NULL;
    if (i < g->n_values) {
      t = g->values[i].init;
    } else {
      const alma_node *nd = &g->nodes[i - g->n_values];
      const alma_attr *a = !nd->domain[0] && !strcmp(nd->op_type, "Constant") ? alma__node_attr(nd, "value") : NULL;
      t = a && a->type == ALMA_ATTR_TENSOR ? a->t : NULL;
    }
    if (!t || !t->data || alma_tensor_numel(t) != 1 || (t->dtype != ALMA_DTYPE_INT64 && t->dtype != ALMA_DTYPE_INT32)) continue;
    int64_t v = t->dtype == ALMA_DTYPE_INT64 ? *(const int64_t *)t->data : *(const int32_t *)t->data;
    int seen = v < 2 || v > 4096;
    for (int k = 0; k < n && !seen; k++) seen = f[k] == v;
    if (!seen) f[n++] = (int)v;
  }
  return n;
}

alma_status alma__symbind_discover(const alma_graph *g, int64_t max_fold, alma_symbind *b) {
  enum { MAXSYM = 64 }; /* more symbols are not related (each stays free) */
  memset(b, 0, sizeof *b);
  size_t nd = ((size_t)g->n_inputs + 1) * ALMA_MAX_RANK;
  const char **names = calloc(nd, sizeof *names);
  int *axes = calloc(nd, sizeof *axes); /* per symbol: a bit per axis it is declared at */
  b->sym = malloc(sizeof(int) * nd);
  alma_status st = names && axes && b->sym ? ALMA_OK : alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (size_t k = 0; st == ALMA_OK && k < nd; k++) b->sym[k] = -1;
  int many = 0;
  for (int i = 0; st == ALMA_OK && i < g->n_inputs; i++) {
    const alma_value *v = &g->values[g->inputs[i]];
    if (v->rank < 0 || v->dtype == ALMA_DTYPE_UNDEFINED) continue;
    for (int d = 0; d < v->rank; d++) {
      if (v->dims[d] >= 0) continue;
      int s = -1;
      for (int k = 0; k < b->n_sym && v->dim_params[d]; k++)
        if (names[k] && !strcmp(names[k], v->dim_params[d])) s = k;
      if (s < 0 && b->n_sym == MAXSYM) many = 1, s = MAXSYM - 1; /* shares the last one's value */
      if (s < 0) s = b->n_sym, names[s] = v->dim_params[d], b->n_sym++;
      b->sym[i * ALMA_MAX_RANK + d] = s;
      axes[s] |= 1 << d;
    }
  }
  size_t n = (size_t)b->n_sym;
  b->coef = calloc(n * n + 1, sizeof(int));
  b->off = calloc(n + 1, sizeof(int));
  b->free_ = calloc(n + 1, sizeof(int));
  sb_save sv = {calloc(n * n + 1, sizeof(int)), calloc(n + 1, sizeof(int)), calloc(n + 1, sizeof(int))};
  int *tl = calloc(5 * n + 5, sizeof(int)); /* the ties taken: j, i, k, d, mul */
  int fac[32], nfac = factors(g, fac, 32);
  if (st == ALMA_OK && (!b->coef || !b->off || !b->free_ || !sv.coef || !sv.off || !sv.free_ || !tl))
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (size_t s = 0; st == ALMA_OK && s < n; s++) b->coef[s * n + s] = 1, b->free_[s] = 1;
  /* Greedy: the tie that leaves fewest values unknown, until none helps. Each round frees one
   * symbol less, so there are at most n_sym rounds of 3 n_sym^2 inferences (n_sym^3 / 2 more when
   * only a sum helps); LLM graphs declare four or five symbols. When neither helps, a product
   * j = f i: BLOOM's cache has batch * heads rows, its attention_mask batch rows. Only symbols
   * declared at a common axis (the batch axis there) and factors the graph holds are tried, so
   * that is at most 32 inferences per such pair. */
  int cur = INT_MAX, ns = b->n_sym;
  if (st == ALMA_OK && ns > 0) st = score(g, b, max_fold, &cur);
  while (st == ALMA_OK && cur > 0 && !many) {
    int best = cur, bj = -1, bi = -1, bk = -1, bd = 0, bm = 1, single = 0;
    static const int ds[3] = {0, 1, -1};
    /* ties to one symbol (k < 0: j = i + d) first, to sums (j = i + k) only when none helps */
    for (int sum = 0; sum < 2 && bj < 0; sum++)
    for (int j = 0; st == ALMA_OK && j < ns && best > 0; j++) {
      if (!b->free_[j]) continue;
      for (int i = 0; st == ALMA_OK && i < ns && best > 0; i++)
        for (int k = sum ? 0 : -1; st == ALMA_OK && k < (sum ? i : 0) && best > 0; k++) {
          if (i == j || k == j) continue;
          for (int t = 0; st == ALMA_OK && t < (k < 0 ? 3 : 1) && best > 0; t++) {
            int u;
            save_state(b, &sv);
            if (!tie(b, j, i, k, ds[t], 1)) continue;
            st = score(g, b, max_fold, &u);
            restore_state(b, &sv);
            if (u < best) best = u, bj = j, bi = i, bk = k, bd = ds[t], single = !sum;
          }
        }
    }
    /* products compete with sums (a sum may help a little where the product is the relation) */
    for (int j = 0; !single && st == ALMA_OK && j < ns && best > 0; j++)
      for (int i = 0; b->free_[j] && st == ALMA_OK && i < ns && best > 0; i++)
        for (int f = 0; i != j && (axes[i] & axes[j]) && st == ALMA_OK && f < nfac && best > 0; f++) {
          int u;
          save_state(b, &sv);
          if (!tie(b, j, i, -1, 0, fac[f])) continue;
          st = score(g, b, max_fold, &u);
          restore_state(b, &sv);
          if (u < best) best = u, bj = j, bi = i, bk = -1, bd = 0, bm = fac[f];
        }
    if (st != ALMA_OK || bj < 0) break;
    tie(b, bj, bi, bk, bd, bm);
    int *tt = tl + 5 * b->n_tied++;
    tt[0] = bj, tt[1] = bi, tt[2] = bk, tt[3] = bd, tt[4] = bm;
    cur = best;
    ALMA_LOGD("symbolic dims: '%s' tied to %d * '%s'%s%s%s %+d (%d values unknown)", names[bj] ? names[bj] : "?", bm,
              names[bi] ? names[bi] : "?", bk >= 0 ? " + '" : "", bk >= 0 ? (names[bk] ? names[bk] : "?") : "", bk >= 0 ? "'" : "", bd, cur);
  }
  /* A tie taken early can be one that merely helped (seq = past - 1 before total = past + seq was
   * found): drop each tie the others do without, rebuilding from the rest in order. */
  for (int drop = b->n_tied - 1; st == ALMA_OK && drop >= 0 && b->n_tied > 1; drop--) {
    int u, ok = 1;
    save_state(b, &sv);
    memset(b->coef, 0, sizeof(int) * n * n);
    memset(b->off, 0, sizeof(int) * n);
    for (size_t s = 0; s < n; s++) b->coef[s * n + s] = 1, b->free_[s] = 1;
    for (int t = 0; t < b->n_tied && ok; t++)
      if (t != drop) ok = tie(b, tl[5 * t], tl[5 * t + 1], tl[5 * t + 2], tl[5 * t + 3], tl[5 * t + 4]);
    st = ok ? score(g, b, max_fold, &u) : ALMA_OK;
    if (st == ALMA_OK && ok && u <= cur) {
      const char *nm = names[tl[5 * drop]];
      memmove(tl + 5 * drop, tl + 5 * (drop + 1), sizeof(int) * 5 * (size_t)(b->n_tied - drop - 1));
      b->n_tied--;
      ALMA_LOGD("symbolic dims: the tie of '%s' dropped (%d values unknown)", nm ? nm : "?", u);
      cur = u;
    } else {
      restore_state(b, &sv);
    }
  }
  if (st == ALMA_OK && ns > 0) ALMA_LOGD("symbolic dims: %d, %d tied, %d values unknown", ns, b->n_tied, cur);
  free(names);
  free(axes);
  free(sv.coef);
  free(sv.off);
  free(sv.free_);
  free(tl);
  if (st != ALMA_OK) alma__symbind_free(b);
  return st;
}

int alma__symbind_infer(const alma_graph *g, const alma_symbind *b, int variant, int64_t max_fold,
                        alma_infer_result *r) {
  int unknown;
  if (b->n_sym < 1) return 0;
  return run(g, b, variant, max_fold, r, &unknown) == ALMA_OK;
}
