/* The ai.onnx.ml tree ensembles: TreeEnsembleClassifier and TreeEnsembleRegressor (1, and 3 with
 * the double *_as_tensor attributes; ONNX-ML 5 deprecates both, and alma runs them there as 3) and
 * TreeEnsemble (5).
 *
 * The attributes are turned into one flat form per call: interior nodes with a feature, a mode, a
 * threshold (or a member set), and true/false successors that are either another node (>= 0) or
 * a leaf (-(leaf + 1)); leaves carry (target, weight) lists. Every id is checked while building
 * (unknown node ids, out-of-range features, targets and leaves, cycles), so bad attributes are an
 * error at load, never an out-of-bounds read.
 *
 * Semantics follow onnx.reference (onnx 1.23) except where it is undefined or disagrees with
 * ONNX Runtime on a form real models use; those places say so:
 *  - NaN features: a node goes true when its comparison holds or when the feature is NaN and
 *    nodes_missing_value_tracks_true is set (TreeEnsemble-5 as onnx.reference writes it; ONNX
 *    Runtime does the same for the older ops, where onnx.reference fails without the attribute).
 *  - MIN/MAX aggregation: a target no leaf reached stays 0 (ONNX Runtime).
 *  - post_transform on regressor scores: ONNX Runtime's rule, which transforms rows of two or more
 *    targets and applies only PROBIT to a single target (onnx.reference implements only NONE for
 *    the older regressor and ignores post_transform in TreeEnsemble-5).
 * Sums are rounded to the accumulator's type after every leaf, as onnx.reference's numpy arrays
 * (float32, or the input type for TreeEnsemble-5 and a double regressor input) do. */
#include <math.h>

#include "ops/ml_common.h"
#include "ops/nn_util.h"
#include "ops/op_args.h"

/* More targets than any model has: a bound that keeps [N, n_targets] far from overflowing. */
#define ALMA_ML_MAX_TARGETS (1 << 24)

enum { M_LEQ, M_LT, M_GTE, M_GT, M_EQ, M_NEQ, M_MEMBER, M_LEAF };

typedef struct tree_model {
  int64_t nnodes, nleaves, ntrees, nout;
  int64_t *feat, *tnext, *fnext, *roots;
  double *th;
  uint8_t *mode, *miss;
  int64_t *mstart, *mlen; /* member sets (TreeEnsemble-5): ranges of members */
  double *members;
  int64_t *lstart;        /* leaf l's outputs: [lstart[l], lstart[l + 1]) */
  int64_t *otarget;
  double *oweight;
  void *mem[32];          /* every allocation, freed by tree_free */
  int nmem;
} tree_model;

static void tree_free(tree_model *m) {
  for (int i = 0; i < m->nmem; i++) free(m->mem[i]);
  m->nmem = 0;
}

static void *tree_alloc(const alma_node *n, tree_model *m, int64_t count, size_t size) {
  if (m->nmem >= (int)(sizeof m->mem / sizeof m->mem[0])) {
    alma__op_error_set(n, ALMA_ERR_INTERNAL, "tree scratch: more buffers than mem[] holds");
    return NULL;
  }
  size_t cnt = (size_t)(count > 0 ? count : 1);
  void *p = alma__nn_alloc(n, cnt, size);
  if (p) memset(p, 0, cnt * size), m->mem[m->nmem++] = p; /* zeroed: counters and flags start at 0 */
  return p;
}

/* ---- (tree id, node id) -> index: open addressing, for the older ops' node references -------- */
typedef struct id_map {
  int64_t *tid, *nid, *val;
  int64_t cap;
} id_map;

static uint64_t id_hash(int64_t t, int64_t i) {
  uint64_t h = (uint64_t)t * 0x9E3779B97F4A7C15ull ^ ((uint64_t)i + 0x632BE59BD9B4E019ull);
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 32);
}

static alma_status id_map_init(const alma_node *n, tree_model *m, id_map *h, int64_t count) {
  h->cap = 16;
  while (h->cap < 2 * count) h->cap *= 2;
  h->tid = tree_alloc(n, m, h->cap, sizeof(int64_t));
  h->nid = tree_alloc(n, m, h->cap, sizeof(int64_t));
  h->val = tree_alloc(n, m, h->cap, sizeof(int64_t));
  if (!h->tid || !h->nid || !h->val) return ALMA_ERR_NOMEM;
  for (int64_t k = 0; k < h->cap; k++) h->val[k] = -1;
  return ALMA_OK;
}

/* Inserts (t, i) -> v unless present; returns the value now stored. */
static int64_t id_map_put(id_map *h, int64_t t, int64_t i, int64_t v) {
  uint64_t k = id_hash(t, i) & (uint64_t)(h->cap - 1);
  while (h->val[k] >= 0) {
    if (h->tid[k] == t && h->nid[k] == i) return h->val[k];
    k = (k + 1) & (uint64_t)(h->cap - 1);
  }
  h->tid[k] = t, h->nid[k] = i, h->val[k] = v;
  return v;
}

static int64_t id_map_get(const id_map *h, int64_t t, int64_t i) {
  uint64_t k = id_hash(t, i) & (uint64_t)(h->cap - 1);
  while (h->val[k] >= 0) {
    if (h->tid[k] == t && h->nid[k] == i) return h->val[k];
    k = (k + 1) & (uint64_t)(h->cap - 1);
  }
  return -1;
}

/* Kahn's algorithm over the node-to-node edges: a cycle would make a walk never reach a leaf. */
static alma_status check_acyclic(const alma_node *n, tree_model *m) {
  int64_t *deg = tree_alloc(n, m, m->nnodes, sizeof(int64_t)), *queue = tree_alloc(n, m, m->nnodes, sizeof(int64_t));
  if (!deg || !queue) return ALMA_ERR_NOMEM;
  for (int64_t i = 0; i < m->nnodes; i++) {
    if (m->mode[i] == M_LEAF) continue;
    if (m->tnext[i] >= 0) deg[m->tnext[i]]++;
    if (m->fnext[i] >= 0) deg[m->fnext[i]]++;
  }
  int64_t head = 0, tail = 0;
  for (int64_t i = 0; i < m->nnodes; i++)
    if (!deg[i]) queue[tail++] = i;
  while (head < tail) {
    int64_t i = queue[head++];
    if (m->mode[i] == M_LEAF) continue;
    int64_t nx[2] = {m->tnext[i], m->fnext[i]};
    for (int k = 0; k < 2; k++)
      if (nx[k] >= 0 && --deg[nx[k]] == 0) queue[tail++] = nx[k];
  }
  if (tail != m->nnodes)
    for (int64_t i = 0; i < m->nnodes; i++)
      if (deg[i]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "the trees have a cycle through node index %lld", (long long)i);
  return ALMA_OK;
}

static int node_true(const tree_model *m, int64_t i, double x) {
  if (isnan(x) && m->miss && m->miss[i]) return 1;
  double t = m->th[i];
  switch (m->mode[i]) {
    case M_LEQ: return x <= t;
    case M_LT: return x < t;
    case M_GTE: return x >= t;
    case M_GT: return x > t;
    case M_EQ: return x == t;
    case M_NEQ: return x != t;
    case M_MEMBER:
      for (int64_t k = 0; k < m->mlen[i]; k++)
        if (m->members[m->mstart[i] + k] == x) return 1;
      return 0;
  }
  return 0;
}

/* The leaf a row reaches in tree t. */
static int64_t tree_leaf(const tree_model *m, int64_t t, const double *x) {
  int64_t cur = m->roots[t];
  while (cur >= 0) cur = node_true(m, cur, x[m->feat[cur]]) ? m->tnext[cur] : m->fnext[cur];
  return -cur - 1;
}

/* Checks feature ids of interior nodes against the input width. */
static alma_status check_features(const alma_node *n, const tree_model *m, int64_t feats) {
  for (int64_t i = 0; i < m->nnodes; i++)
    if (m->mode[i] != M_LEAF && (m->feat[i] < 0 || m->feat[i] >= feats))
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "node index %lld reads feature %lld of an input with %lld features",
                            (long long)i, (long long)m->feat[i], (long long)feats);
  return ALMA_OK;
}

/* ---- the older ops' attributes (TreeEnsembleClassifier / TreeEnsembleRegressor 1 and 3) -------- */
static int mode_from_string(const char *s) {
  static const char *const names[] = {"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT",
                                      "BRANCH_EQ",  "BRANCH_NEQ", "",           "LEAF"};
  for (int k = 0; k < 8; k++)
    if (k != M_MEMBER && !strcmp(s, names[k])) return k;
  return -1;
}

/* prefix: "target" or "class"; nout: number of targets or classes. */
static alma_status legacy_build(const alma_node *n, const char *prefix, int64_t nout, tree_model *m) {
  memset(m, 0, sizeof *m);
  m->nout = nout;
  const int64_t *tids, *nids, *feat, *tn, *fn, *miss;
  int64_t c_t, c_n, c_f, c_tn, c_fn, c_miss;
  ALMA_TRY(alma__ml_ints(n, "nodes_treeids", &tids, &c_t));
  ALMA_TRY(alma__ml_ints(n, "nodes_nodeids", &nids, &c_n));
  ALMA_TRY(alma__ml_ints(n, "nodes_featureids", &feat, &c_f));
  ALMA_TRY(alma__ml_ints(n, "nodes_truenodeids", &tn, &c_tn));
  ALMA_TRY(alma__ml_ints(n, "nodes_falsenodeids", &fn, &c_fn));
  ALMA_TRY(alma__ml_ints(n, "nodes_missing_value_tracks_true", &miss, &c_miss));
  const alma_attr *modes = alma__node_attr(n, "nodes_modes");
  alma_ml_list vals;
  ALMA_TRY(alma__ml_floats_or_tensor(n, "nodes_values", &vals));
  int64_t nn = c_n;
  if (!modes || modes->type != ALMA_ATTR_STRINGS)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute nodes_modes (strings) is required");
  if (!nn) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "the ensemble has no nodes (nodes_nodeids is empty)");
  if (c_t != nn || c_f != nn || c_tn != nn || c_fn != nn || modes->n != nn || (vals.n && vals.n != nn) ||
      (c_miss && c_miss != nn))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL,
                          "the nodes_* attributes differ in length (nodeids %lld, treeids %lld, featureids %lld, "
                          "truenodeids %lld, falsenodeids %lld, modes %d, values %lld, missing_value_tracks_true %lld)",
                          (long long)nn, (long long)c_t, (long long)c_f, (long long)c_tn, (long long)c_fn, modes->n,
                          (long long)vals.n, (long long)c_miss);
  m->nnodes = nn;
  m->feat = tree_alloc(n, m, nn, sizeof(int64_t));
  m->tnext = tree_alloc(n, m, nn, sizeof(int64_t));
  m->fnext = tree_alloc(n, m, nn, sizeof(int64_t));
  m->th = tree_alloc(n, m, nn, sizeof(double));
  m->mode = tree_alloc(n, m, nn, 1);
  m->miss = tree_alloc(n, m, nn, 1);
  int64_t *leaf_of = tree_alloc(n, m, nn, sizeof(int64_t)), *roots = tree_alloc(n, m, nn, sizeof(int64_t));
  if (!m->feat || !m->tnext || !m->fnext || !m->th || !m->mode || !m->miss || !leaf_of || !roots) return ALMA_ERR_NOMEM;
  id_map ids, trees;
  ALMA_TRY(id_map_init(n, m, &ids, nn));
  ALMA_TRY(id_map_init(n, m, &trees, nn));
  for (int64_t i = 0; i < nn; i++) {
    int md = mode_from_string(modes->strings[i]);
    if (md < 0) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "nodes_modes[%lld] = '%s' is not a node mode", (long long)i, modes->strings[i]);
    m->mode[i] = (uint8_t)md;
    m->feat[i] = feat[i];
    m->th[i] = vals.n ? alma__ml_at(&vals, i) : 0;
    m->miss[i] = c_miss && miss[i] != 0;
    leaf_of[i] = md == M_LEAF ? m->nleaves++ : -1;
    if (id_map_put(&ids, tids[i], nids[i], i) != i)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "node id %lld of tree %lld is given twice", (long long)nids[i],
                            (long long)tids[i]);
    /* a tree's root is its first node in the lists (onnx.reference, ONNX Runtime) */
    if (id_map_put(&trees, tids[i], INT64_MIN, i) == i) roots[m->ntrees++] = i;
  }
  for (int64_t i = 0; i < nn; i++) {
    if (m->mode[i] == M_LEAF) continue;
    int64_t nx[2] = {tn[i], fn[i]}, *dst[2] = {&m->tnext[i], &m->fnext[i]};
    for (int k = 0; k < 2; k++) {
      int64_t j = id_map_get(&ids, tids[i], nx[k]);
      if (j < 0)
        return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "node %lld of tree %lld: %s branch node id %lld is not in the tree",
                              (long long)nids[i], (long long)tids[i], k ? "false" : "true", (long long)nx[k]);
      *dst[k] = m->mode[j] == M_LEAF ? -(leaf_of[j] + 1) : j;
    }
  }
  m->roots = roots;
  for (int64_t t = 0; t < m->ntrees; t++)
    if (m->mode[roots[t]] == M_LEAF) roots[t] = -(leaf_of[roots[t]] + 1);
  ALMA_TRY(check_acyclic(n, m));

  /* leaf outputs: (treeid, nodeid) -> leaf, kept in the order given; weights on interior nodes are
   * never reached and are ignored (onnx.reference) */
  char nm[64];
  const int64_t *otid, *onid, *oid;
  int64_t c_otid, c_onid, c_oid;
  alma_ml_list w;
  snprintf(nm, sizeof nm, "%s_treeids", prefix);
  ALMA_TRY(alma__ml_ints(n, nm, &otid, &c_otid));
  snprintf(nm, sizeof nm, "%s_nodeids", prefix);
  ALMA_TRY(alma__ml_ints(n, nm, &onid, &c_onid));
  snprintf(nm, sizeof nm, "%s_ids", prefix);
  ALMA_TRY(alma__ml_ints(n, nm, &oid, &c_oid));
  snprintf(nm, sizeof nm, "%s_weights", prefix);
  ALMA_TRY(alma__ml_floats_or_tensor(n, nm, &w));
  if (c_onid != c_otid || c_oid != c_otid || w.n != c_otid)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "the %s_* attributes differ in length (treeids %lld, nodeids %lld, ids %lld, weights %lld)",
                          prefix, (long long)c_otid, (long long)c_onid, (long long)c_oid, (long long)w.n);
  m->lstart = tree_alloc(n, m, m->nleaves + 1, sizeof(int64_t));
  m->otarget = tree_alloc(n, m, c_otid, sizeof(int64_t));
  m->oweight = tree_alloc(n, m, c_otid, sizeof(double));
  int64_t *eleaf = tree_alloc(n, m, c_otid, sizeof(int64_t));
  if (!m->lstart || !m->otarget || !m->oweight || !eleaf) return ALMA_ERR_NOMEM;
  for (int64_t k = 0; k < c_otid; k++) {
    int64_t j = id_map_get(&ids, otid[k], onid[k]);
    if (j < 0)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%s weight %lld refers to node %lld of tree %lld, which is not given",
                            prefix, (long long)k, (long long)onid[k], (long long)otid[k]);
    if (oid[k] < 0 || oid[k] >= nout)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%s_ids[%lld] = %lld is out of range [0, %lld)", prefix,
                            (long long)k, (long long)oid[k], (long long)nout);
    eleaf[k] = leaf_of[j];
    if (eleaf[k] >= 0) m->lstart[eleaf[k] + 1]++;
  }
  for (int64_t l = 0; l < m->nleaves; l++) m->lstart[l + 1] += m->lstart[l];
  int64_t *fill = leaf_of; /* reused as the per-leaf write cursor */
  for (int64_t l = 0; l < m->nleaves; l++) fill[l] = m->lstart[l];
  for (int64_t k = 0; k < c_otid; k++)
    if (eleaf[k] >= 0) {
      int64_t p = fill[eleaf[k]]++;
      m->otarget[p] = oid[k];
      m->oweight[p] = alma__ml_at(&w, k);
    }
  return ALMA_OK;
}

/* Accumulates every tree's leaf outputs for one row into acc[nout] (SUM; the caller initialized
 * acc), each sum rounded to `rt`. */
static void accumulate_sum(const tree_model *m, const double *x, double *acc, alma_dtype rt) {
  for (int64_t t = 0; t < m->ntrees; t++) {
    int64_t l = tree_leaf(m, t, x);
    for (int64_t p = m->lstart[l]; p < m->lstart[l + 1]; p++)
      acc[m->otarget[p]] = alma__round_to(rt, acc[m->otarget[p]] + m->oweight[p]);
  }
}

enum { AGG_AVERAGE, AGG_SUM, AGG_MIN, AGG_MAX };

/* Aggregates one row into acc (zeroed here). AVERAGE divides by the number of trees, each leaf's
 * share (per_leaf: TreeEnsemble-5) or the sum at the end. */
static void aggregate(const tree_model *m, const double *x, int agg, int per_leaf, double *acc, uint8_t *seen,
                      alma_dtype rt) {
  for (int64_t k = 0; k < m->nout; k++) acc[k] = 0, seen[k] = 0;
  for (int64_t t = 0; t < m->ntrees; t++) {
    int64_t l = tree_leaf(m, t, x);
    for (int64_t p = m->lstart[l]; p < m->lstart[l + 1]; p++) {
      int64_t o = m->otarget[p];
      double v = m->oweight[p];
      if (agg == AGG_MIN || agg == AGG_MAX) {
        if (!seen[o] || (agg == AGG_MIN ? v < acc[o] : v > acc[o])) acc[o] = v;
      } else {
        if (agg == AGG_AVERAGE && per_leaf) v /= (double)m->ntrees;
        acc[o] = alma__round_to(rt, acc[o] + v);
      }
      seen[o] = 1;
    }
  }
  if (agg == AGG_AVERAGE && !per_leaf)
    for (int64_t k = 0; k < m->nout; k++) acc[k] = alma__round_to(rt, acc[k] / (double)m->ntrees);
}

/* ONNX Runtime's regressor transform: rows of >= 2 targets get pt, one target only PROBIT. */
static void regressor_post(alma_ml_post pt, double *v, int64_t k) {
  if (k == 1 && pt != ALMA_ML_PT_PROBIT) return;
  alma__ml_apply_post(pt, v, k);
}

/* ---- TreeEnsembleRegressor (1, 3) --------------------------------------------------------------- */
typedef struct ter_args {
  int64_t rows, feats, ntargets;
  int agg;
  alma_ml_post pt;
  alma_ml_list base;
} ter_args;

static alma_status ter_args_read(const alma_node *n, const alma_tensor *x, ter_args *a) {
  ALMA_TRY(alma__ml_rows(n, x, &a->rows, &a->feats));
  ALMA_TRY(alma__ml_post_transform(n, &a->pt));
  a->ntargets = alma__attr_i(n, "n_targets", 1);
  if (a->ntargets < 1 || a->ntargets > ALMA_ML_MAX_TARGETS)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "n_targets %lld (1 to %d expected)", (long long)a->ntargets,
                          ALMA_ML_MAX_TARGETS);
  const char *agg = alma__attr_s(n, "aggregate_function", "SUM");
  if (!strcmp(agg, "AVERAGE")) a->agg = AGG_AVERAGE;
  else if (!strcmp(agg, "SUM")) a->agg = AGG_SUM;
  else if (!strcmp(agg, "MIN")) a->agg = AGG_MIN;
  else if (!strcmp(agg, "MAX")) a->agg = AGG_MAX;
  else return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "aggregate_function '%s' (AVERAGE, SUM, MIN or MAX expected)", agg);
  ALMA_TRY(alma__ml_floats_or_tensor(n, "base_values", &a->base));
  if (a->base.n && a->base.n != a->ntargets)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%lld base_values for %lld targets", (long long)a->base.n,
                          (long long)a->ntargets);
  return ALMA_OK;
}

static alma_status ter_setup(const alma_node *n, const alma_tensor *x, ter_args *a, tree_model *m) {
  ALMA_TRY(ter_args_read(n, x, a));
  alma_status st = legacy_build(n, "target", a->ntargets, m);
  if (st == ALMA_OK) st = check_features(n, m, a->feats);
  if (st != ALMA_OK) tree_free(m);
  return st;
}

static alma_status ter_infer(INFER_ARGS) {
  ter_args a;
  tree_model m;
  ALMA_TRY(ter_setup(n, in[0], &a, &m));
  tree_free(&m);
  int64_t d[2] = {a.rows, a.ntargets};
  alma__set_shape(&out[0], ALMA_DTYPE_FLOAT32, 2, d);
  return ALMA_OK;
}

static alma_status ter_exec(EXEC_ARGS) {
  ter_args a;
  tree_model m;
  ALMA_TRY(ter_setup(n, in[0], &a, &m));
  const alma_tensor *x = in[0];
  double *xr = tree_alloc(n, &m, a.feats, sizeof(double)), *acc = tree_alloc(n, &m, a.ntargets, sizeof(double));
  uint8_t *seen = tree_alloc(n, &m, a.ntargets, 1);
  if (!xr || !acc || !seen) {
    tree_free(&m);
    return ALMA_ERR_NOMEM;
  }
  /* onnx.reference sums in the input's type: float32, or double for a double input */
  alma_dtype rt = x->dtype == ALMA_DTYPE_FLOAT64 ? ALMA_DTYPE_FLOAT64 : ALMA_DTYPE_FLOAT32;
  float *y = out[0].data;
  for (int64_t r = 0; r < a.rows; r++) {
    for (int64_t f = 0; f < a.feats; f++) xr[f] = alma__get_f64(x->data, x->dtype, r * a.feats + f);
    aggregate(&m, xr, a.agg, 0, acc, seen, rt);
    for (int64_t k = 0; k < a.ntargets && a.base.n; k++) acc[k] = alma__round_to(rt, acc[k] + alma__ml_at(&a.base, k));
    regressor_post(a.pt, acc, a.ntargets);
    for (int64_t k = 0; k < a.ntargets; k++) y[r * a.ntargets + k] = (float)acc[k];
  }
  tree_free(&m);
  return ALMA_OK;
}

const alma_op_def alma__op_MlTreeEnsembleRegressor = {
    .name = "TreeEnsembleRegressor", .domain = ALMA_ML_DOMAIN, .versions = {1, 3}, .min_inputs = 1, .max_inputs = 1,
    .min_outputs = 1, .max_outputs = 1, .infer = ter_infer, .exec = ter_exec};

/* ---- TreeEnsembleClassifier (1, 3) ---------------------------------------------------------------
 * Scores start at base_values (one per class, or one for all) and add the class weights of every
 * leaf reached. Binary case (every class_id the same): column 1 takes the score and column 0 its
 * complement, 1 - s for NONE and PROBIT, -s otherwise; then post_transform, and the label is the
 * argmax through classlabels_int64s (one label, which must be 1: label 1 or 0). */
typedef struct tec_args {
  int64_t rows, feats, nlab, cols;
  const int64_t *labels;
  int binary;
  alma_ml_post pt;
  alma_ml_list base;
} tec_args;

static alma_status tec_setup(const alma_node *n, const alma_tensor *x, tec_args *a, tree_model *m) {
  ALMA_TRY(alma__ml_refuse_strings(n, "classlabels_strings", "class labels"));
  ALMA_TRY(alma__ml_rows(n, x, &a->rows, &a->feats));
  ALMA_TRY(alma__ml_post_transform(n, &a->pt));
  ALMA_TRY(alma__ml_ints(n, "classlabels_int64s", &a->labels, &a->nlab));
  if (a->nlab < 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute classlabels_int64s is required");
  if (a->nlab == 1 && a->labels[0] != 1)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "unsupported: a single class label %lld (only 1 has a defined meaning)",
                          (long long)a->labels[0]);
  ALMA_TRY(alma__ml_floats_or_tensor(n, "base_values", &a->base));
  if (a->base.n && a->base.n != 1 && a->base.n != a->nlab)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%lld base_values for %lld classes", (long long)a->base.n,
                          (long long)a->nlab);
  const int64_t *cid;
  int64_t ncid;
  ALMA_TRY(alma__ml_ints(n, "class_ids", &cid, &ncid));
  a->binary = ncid > 0;
  for (int64_t k = 1; k < ncid; k++)
    if (cid[k] != cid[0]) a->binary = 0;
  if (a->binary && a->nlab > 1 && cid[0] != 0)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "unsupported: binary scores written to class %lld (class 0 expected)",
                          (long long)cid[0]);
  a->cols = a->binary && a->nlab == 1 ? 2 : a->nlab;
  alma_status st = legacy_build(n, "class", a->nlab, m);
  if (st == ALMA_OK) st = check_features(n, m, a->feats);
  if (st != ALMA_OK) tree_free(m);
  return st;
}

static alma_status tec_infer(INFER_ARGS) {
  tec_args a;
  tree_model m;
  ALMA_TRY(tec_setup(n, in[0], &a, &m));
  tree_free(&m);
  int64_t d[2] = {a.rows, a.cols};
  alma__set_shape(&out[0], ALMA_DTYPE_INT64, 1, d);
  if (nout > 1) alma__set_shape(&out[1], ALMA_DTYPE_FLOAT32, 2, d);
  return ALMA_OK;
}

static alma_status tec_exec(EXEC_ARGS) {
  tec_args a;
  tree_model m;
  ALMA_TRY(tec_setup(n, in[0], &a, &m));
  const alma_tensor *x = in[0];
  double *xr = tree_alloc(n, &m, a.feats, sizeof(double)), *sc = tree_alloc(n, &m, a.cols, sizeof(double));
  if (!xr || !sc) {
    tree_free(&m);
    return ALMA_ERR_NOMEM;
  }
  int64_t *y = out[0].data;
  for (int64_t r = 0; r < a.rows; r++) {
    for (int64_t f = 0; f < a.feats; f++) xr[f] = alma__get_f64(x->data, x->dtype, r * a.feats + f);
    for (int64_t k = 0; k < a.nlab; k++)
      sc[k] = a.base.n ? (double)(float)alma__ml_at(&a.base, a.base.n == 1 ? 0 : k) : 0;
    accumulate_sum(&m, xr, sc, ALMA_DTYPE_FLOAT32);
    if (a.binary) {
      sc[1] = sc[0]; /* the score moves to column 1 (a second column when there is one label) */
      sc[0] = a.pt == ALMA_ML_PT_NONE || a.pt == ALMA_ML_PT_PROBIT ? 1 - sc[1] : -sc[1];
    }
    for (int64_t k = 0; k < a.cols; k++) sc[k] = (float)sc[k];
    alma__ml_apply_post(a.pt, sc, a.cols);
    int64_t best = alma__ml_argmax(sc, a.cols);
    y[r] = a.nlab == 1 ? (best == 1) : a.labels[best];
    if (alma__nn_out_wanted(n, nout, 1))
      for (int64_t k = 0; k < a.cols; k++) ((float *)out[1].data)[r * a.cols + k] = (float)sc[k];
  }
  tree_free(&m);
  return ALMA_OK;
}

const alma_op_def alma__op_MlTreeEnsembleClassifier = {
    .name = "TreeEnsembleClassifier", .domain = ALMA_ML_DOMAIN, .versions = {1, 3}, .min_inputs = 1, .max_inputs = 1,
    .min_outputs = 1, .max_outputs = 2, .infer = tec_infer, .exec = tec_exec};

/* ---- TreeEnsemble (5) ------------------------------------------------------------------------------
 * Interior nodes and leaves are separate lists; nodes_true/falsenodeids index nodes or leaves as
 * nodes_true/falseleafs say; tree_roots index nodes. A root whose two branches are the same leaf is
 * that leaf (a one-leaf tree). BRANCH_MEMBER nodes take their sets from membership_values, NaN
 * separated, in the order the nodes appear in nodes_modes (spec). */
typedef struct te_args {
  int64_t rows, feats, ntargets;
  int agg;
  alma_ml_post pt;
} te_args;

static alma_status te_build(const alma_node *n, te_args *a, tree_model *m) {
  memset(m, 0, sizeof *m);
  const int64_t *feat, *tn, *fn, *tl, *fl, *ltid, *roots, *miss;
  int64_t c_f, c_tn, c_fn, c_tl, c_fl, c_ltid, c_roots, c_miss;
  ALMA_TRY(alma__ml_ints(n, "nodes_featureids", &feat, &c_f));
  ALMA_TRY(alma__ml_ints(n, "nodes_truenodeids", &tn, &c_tn));
  ALMA_TRY(alma__ml_ints(n, "nodes_falsenodeids", &fn, &c_fn));
  ALMA_TRY(alma__ml_ints(n, "nodes_trueleafs", &tl, &c_tl));
  ALMA_TRY(alma__ml_ints(n, "nodes_falseleafs", &fl, &c_fl));
  ALMA_TRY(alma__ml_ints(n, "leaf_targetids", &ltid, &c_ltid));
  ALMA_TRY(alma__ml_ints(n, "tree_roots", &roots, &c_roots));
  ALMA_TRY(alma__ml_ints(n, "nodes_missing_value_tracks_true", &miss, &c_miss));
  alma_ml_list modes, splits, lw, mv;
  ALMA_TRY(alma__ml_tensor_attr(n, "nodes_modes", &modes));
  ALMA_TRY(alma__ml_tensor_attr(n, "nodes_splits", &splits));
  ALMA_TRY(alma__ml_tensor_attr(n, "leaf_weights", &lw));
  ALMA_TRY(alma__ml_tensor_attr(n, "membership_values", &mv));
  int64_t nn = c_f;
  if (!nn || !c_roots || !c_ltid)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "nodes_featureids, tree_roots and leaf_targetids are required and non-empty");
  if (modes.t && modes.t->dtype != ALMA_DTYPE_UINT8)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "nodes_modes must be a uint8 tensor, got %s", alma_dtype_name(modes.t->dtype));
  if (c_tn != nn || c_fn != nn || c_tl != nn || c_fl != nn || modes.n != nn || splits.n != nn || (c_miss && c_miss != nn))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL,
                          "the nodes_* attributes differ in length (featureids %lld, truenodeids %lld, falsenodeids %lld, "
                          "trueleafs %lld, falseleafs %lld, modes %lld, splits %lld, missing_value_tracks_true %lld)",
                          (long long)nn, (long long)c_tn, (long long)c_fn, (long long)c_tl, (long long)c_fl,
                          (long long)modes.n, (long long)splits.n, (long long)c_miss);
  if (lw.n != c_ltid)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%lld leaf_weights for %lld leaf_targetids", (long long)lw.n,
                          (long long)c_ltid);
  m->nnodes = nn, m->nleaves = c_ltid, m->ntrees = c_roots, m->nout = a->ntargets;
  m->feat = tree_alloc(n, m, nn, sizeof(int64_t));
  m->tnext = tree_alloc(n, m, nn, sizeof(int64_t));
  m->fnext = tree_alloc(n, m, nn, sizeof(int64_t));
  m->th = tree_alloc(n, m, nn, sizeof(double));
  m->mode = tree_alloc(n, m, nn, 1);
  m->miss = tree_alloc(n, m, nn, 1);
  m->mstart = tree_alloc(n, m, nn, sizeof(int64_t));
  m->mlen = tree_alloc(n, m, nn, sizeof(int64_t));
  m->members = tree_alloc(n, m, mv.n, sizeof(double));
  m->roots = tree_alloc(n, m, c_roots, sizeof(int64_t));
  m->lstart = tree_alloc(n, m, c_ltid + 1, sizeof(int64_t));
  m->otarget = tree_alloc(n, m, c_ltid, sizeof(int64_t));
  m->oweight = tree_alloc(n, m, c_ltid, sizeof(double));
  if (!m->feat || !m->tnext || !m->fnext || !m->th || !m->mode || !m->miss || !m->mstart || !m->mlen || !m->members ||
      !m->roots || !m->lstart || !m->otarget || !m->oweight)
    return ALMA_ERR_NOMEM;
  int64_t mpos = 0; /* next unread membership value */
  for (int64_t i = 0; i < nn; i++) {
    int64_t md = (int64_t)alma__ml_at(&modes, i);
    if (md < M_LEQ || md > M_MEMBER)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "nodes_modes[%lld] = %lld (0 to 6 expected)", (long long)i, (long long)md);
    m->mode[i] = (uint8_t)md;
    m->feat[i] = feat[i];
    m->th[i] = alma__ml_at(&splits, i);
    m->miss[i] = c_miss && miss[i] != 0;
    if (md == M_MEMBER) {
      m->mstart[i] = mpos;
      while (mpos < mv.n && !isnan(alma__ml_at(&mv, mpos))) m->members[mpos] = alma__ml_at(&mv, mpos), mpos++;
      if (mpos >= mv.n)
        return alma__op_error(n, ALMA_ERR_INVALID_MODEL,
                              "membership_values has fewer NaN-terminated sets than BRANCH_MEMBER nodes (node %lld)", (long long)i);
      m->mlen[i] = mpos - m->mstart[i];
      mpos++; /* the NaN that ends the set */
    }
    int64_t nx[2] = {tn[i], fn[i]}, isleaf[2] = {tl[i], fl[i]}, *dst[2] = {&m->tnext[i], &m->fnext[i]};
    for (int k = 0; k < 2; k++) {
      int64_t lim = isleaf[k] ? c_ltid : nn;
      if (nx[k] < 0 || nx[k] >= lim)
        return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "node %lld: %s branch %s %lld is out of range [0, %lld)",
                              (long long)i, k ? "false" : "true", isleaf[k] ? "leaf" : "node", (long long)nx[k], (long long)lim);
      *dst[k] = isleaf[k] ? -(nx[k] + 1) : nx[k];
    }
  }
  if (mpos != mv.n)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "membership_values has %lld values left after the BRANCH_MEMBER nodes' sets",
                          (long long)(mv.n - mpos));
  for (int64_t t = 0; t < c_roots; t++) {
    int64_t r = roots[t];
    if (r < 0 || r >= nn)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "tree_roots[%lld] = %lld is out of range [0, %lld)", (long long)t,
                            (long long)r, (long long)nn);
    int one_leaf = tl[r] && fl[r] && tn[r] == fn[r];
    m->roots[t] = one_leaf ? -(tn[r] + 1) : r;
  }
  ALMA_TRY(check_acyclic(n, m));
  for (int64_t l = 0; l < c_ltid; l++) {
    if (ltid[l] < 0 || ltid[l] >= a->ntargets)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "leaf_targetids[%lld] = %lld is out of range [0, %lld)",
                            (long long)l, (long long)ltid[l], (long long)a->ntargets);
    m->lstart[l] = l;
    m->otarget[l] = ltid[l];
    m->oweight[l] = alma__ml_at(&lw, l);
  }
  m->lstart[c_ltid] = c_ltid;
  return ALMA_OK;
}

static alma_status te_setup(const alma_node *n, const alma_tensor *x, te_args *a, tree_model *m) {
  if (x->dtype != ALMA_DTYPE_FLOAT32 && x->dtype != ALMA_DTYPE_FLOAT64 && x->dtype != ALMA_DTYPE_FLOAT16)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "X dtype %s (float, double or float16 expected)", alma_dtype_name(x->dtype));
  if (x->rank != 2) {
    char s[128];
    return alma__op_error(n, ALMA_ERR_SHAPE, "X of shape %s ([N, F] expected)", alma__shape_str(x->rank, x->dims, s, sizeof s));
  }
  a->rows = x->dims[0], a->feats = x->dims[1];
  int64_t pt = alma__attr_i(n, "post_transform", 0), agg = alma__attr_i(n, "aggregate_function", 1);
  if (pt < 0 || pt > 4)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "post_transform %lld (0 to 4 expected)", (long long)pt);
  if (agg < 0 || agg > 3)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "aggregate_function %lld (0 to 3 expected)", (long long)agg);
  a->pt = (alma_ml_post)pt, a->agg = (int)agg;
  const alma_attr *nt = alma__node_attr(n, "n_targets");
  if (!nt || nt->type != ALMA_ATTR_INT || nt->i < 1 || nt->i > ALMA_ML_MAX_TARGETS)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute n_targets (1 to %d) is required", ALMA_ML_MAX_TARGETS);
  a->ntargets = nt->i;
  alma_status st = te_build(n, a, m);
  if (st == ALMA_OK) st = check_features(n, m, a->feats);
  if (st != ALMA_OK) tree_free(m);
  return st;
}

static alma_status te_infer(INFER_ARGS) {
  te_args a;
  tree_model m;
  ALMA_TRY(te_setup(n, in[0], &a, &m));
  tree_free(&m);
  int64_t d[2] = {a.rows, a.ntargets};
  alma__set_shape(&out[0], in[0]->dtype, 2, d);
  return ALMA_OK;
}

static alma_status te_exec(EXEC_ARGS) {
  te_args a;
  tree_model m;
  ALMA_TRY(te_setup(n, in[0], &a, &m));
  const alma_tensor *x = in[0];
  double *xr = tree_alloc(n, &m, a.feats, sizeof(double)), *acc = tree_alloc(n, &m, a.ntargets, sizeof(double));
  uint8_t *seen = tree_alloc(n, &m, a.ntargets, 1);
  if (!xr || !acc || !seen) {
    tree_free(&m);
    return ALMA_ERR_NOMEM;
  }
  for (int64_t r = 0; r < a.rows; r++) {
    for (int64_t f = 0; f < a.feats; f++) xr[f] = alma__get_f64(x->data, x->dtype, r * a.feats + f);
    aggregate(&m, xr, a.agg, 1, acc, seen, x->dtype);
    regressor_post(a.pt, acc, a.ntargets);
    for (int64_t k = 0; k < a.ntargets; k++) alma__set_f64(out[0].data, x->dtype, r * a.ntargets + k, acc[k]);
  }
  tree_free(&m);
  return ALMA_OK;
}

const alma_op_def alma__op_MlTreeEnsemble = {.name = "TreeEnsemble", .domain = ALMA_ML_DOMAIN, .versions = {5},
                                             .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                             .infer = te_infer, .exec = te_exec};
