/* Bindings of symbolic input dims for static inference; see symbind.h. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "graph/symbind.h"

void alma__symbind_free(alma_symbind *b) {
  free(b->sym);
  free(b->root);
  free(b->off);
  memset(b, 0, sizeof *b);
}

/* The value of each symbol in a variant: free symbols (in order of appearance, reversed in
 * variant 1) 3 apart, so that ties of +-1 never make two groups coincide, and variant 0's values
 * (0 mod 3) never equal variant 1's (1 mod 3). Returns 0 when a tie would make a dim below 1. */
static int values(const alma_symbind *b, int variant, int64_t *val) {
  int m = 0;
  for (int s = 0; s < b->n_sym; s++) m += b->root[s] == s;
  for (int s = 0, k = 0; s < b->n_sym; s++)
    if (b->root[s] == s) val[s] = variant ? 4 + 3 * (m - 1 - k++) : 3 + 3 * k++;
  for (int s = 0; s < b->n_sym; s++) {
    val[s] = val[b->root[s]] + b->off[s];
    if (val[s] < 1) return 0;
  }
  return 1;
}

/* Inference under the variant; *unknown gets its count of unknown values. Returns inference's
 * error, ALMA_ERR_DYNAMIC when a tie makes a dim below 1. */
static alma_status run(const alma_graph *g, const alma_symbind *b, int variant, int64_t max_fold, alma_infer_result *r,
                       int *unknown) {
  int64_t *val = malloc(sizeof(int64_t) * ((size_t)b->n_sym + 1));
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

/* The count of unknown values under variant 0, INT_MAX when inference fails under it (a binding
 * that is impossible, or one that drives some op's constant evaluation into an error: the search
 * just does not take it). Only running out of memory is an error. */
static alma_status score(const alma_graph *g, const alma_symbind *b, int64_t max_fold, int *unknown) {
  alma_infer_result r;
  *unknown = INT_MAX;
  alma_status st = run(g, b, 0, max_fold, &r, unknown);
  if (st == ALMA_OK) alma__infer_result_free(&r);
  return st == ALMA_ERR_NOMEM ? st : ALMA_OK;
}

/* Ties the group of free symbol j to symbol i's value plus d (records the old state in save). */
static void tie(alma_symbind *b, int j, int i, int d, int *save_root, int *save_off) {
  memcpy(save_root, b->root, sizeof(int) * (size_t)b->n_sym);
  memcpy(save_off, b->off, sizeof(int) * (size_t)b->n_sym);
  int ri = b->root[i], oi = b->off[i];
  for (int x = 0; x < b->n_sym; x++)
    if (save_root[x] == j) b->root[x] = ri, b->off[x] = save_off[x] + oi + d;
}

static void untie(alma_symbind *b, const int *save_root, const int *save_off) {
  memcpy(b->root, save_root, sizeof(int) * (size_t)b->n_sym);
  memcpy(b->off, save_off, sizeof(int) * (size_t)b->n_sym);
}

alma_status alma__symbind_discover(const alma_graph *g, int64_t max_fold, alma_symbind *b) {
  memset(b, 0, sizeof *b);
  size_t nd = ((size_t)g->n_inputs + 1) * ALMA_MAX_RANK;
  const char **names = calloc(nd, sizeof *names);
  b->sym = malloc(sizeof(int) * nd);
  b->root = calloc(nd, sizeof(int));
  b->off = calloc(nd, sizeof(int));
  int *sr = calloc(nd, sizeof(int)), *so = calloc(nd, sizeof(int));
  alma_status st = names && b->sym && b->root && b->off && sr && so ? ALMA_OK : alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (size_t k = 0; st == ALMA_OK && k < nd; k++) b->sym[k] = -1;
  for (int i = 0; st == ALMA_OK && i < g->n_inputs; i++) {
    const alma_value *v = &g->values[g->inputs[i]];
    if (v->rank < 0 || v->dtype == ALMA_DTYPE_UNDEFINED) continue;
    for (int d = 0; d < v->rank; d++) {
      if (v->dims[d] >= 0) continue;
      int s = -1;
      for (int k = 0; k < b->n_sym && v->dim_params[d]; k++)
        if (names[k] && !strcmp(names[k], v->dim_params[d])) s = k;
      if (s < 0) s = b->n_sym, names[s] = v->dim_params[d], b->root[s] = s, b->n_sym++;
      b->sym[i * ALMA_MAX_RANK + d] = s;
    }
  }
  /* Greedy: the tie that leaves fewest values unknown, until none helps. Each round frees one
   * symbol less, so there are at most n_sym rounds of n_sym^2 * 3 inferences; LLM graphs declare
   * four or five symbols. */
  int cur = INT_MAX;
  if (st == ALMA_OK && b->n_sym > 0) st = score(g, b, max_fold, &cur);
  while (st == ALMA_OK && cur > 0) {
    int best = cur, bj = -1, bi = -1, bd = 0;
    static const int ds[3] = {0, 1, -1};
    for (int j = 0; st == ALMA_OK && j < b->n_sym && best > 0; j++) {
      if (b->root[j] != j) continue;
      for (int i = 0; st == ALMA_OK && i < b->n_sym && best > 0; i++) {
        if (b->root[i] == j) continue;
        for (int k = 0; st == ALMA_OK && k < 3 && best > 0; k++) {
          int u;
          tie(b, j, i, ds[k], sr, so);
          st = score(g, b, max_fold, &u);
          untie(b, sr, so);
          if (u < best) best = u, bj = j, bi = i, bd = ds[k];
        }
      }
    }
    if (st != ALMA_OK || bj < 0) break;
    tie(b, bj, bi, bd, sr, so);
    b->n_tied++;
    cur = best;
    ALMA_LOGD("symbolic dims: '%s' tied to '%s' %+d (%d values unknown)", names[bj] ? names[bj] : "?",
              names[bi] ? names[bi] : "?", bd, cur);
  }
  if (st == ALMA_OK && b->n_sym > 0) ALMA_LOGD("symbolic dims: %d, %d tied, %d values unknown", b->n_sym, b->n_tied, cur);
  free(names);
  free(sr);
  free(so);
  if (st != ALMA_OK) alma__symbind_free(b);
  return st;
}

int alma__symbind_infer(const alma_graph *g, const alma_symbind *b, int variant, int64_t max_fold,
                        alma_infer_result *r) {
  int unknown;
  if (b->n_sym < 1) return 0;
  return run(g, b, variant, max_fold, r, &unknown) == ALMA_OK;
}
