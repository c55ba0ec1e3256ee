/* The ai.onnx.ml tree ensembles: TreeEnsembleClassifier and TreeEnsembleRegressor (1, and 3 with
 * the double *_as_tensor attributes; ONNX-ML 5 deprecates both, and alma runs them there as 3) and
 * TreeEnsemble (5).
 *
 * The attributes are turned into one flat form once per node, kept as the node's prepared state
 * (alma__node_prepared, graph/graph.h) and freed with the graph: interior nodes with a feature, a
 * mode, a threshold (or a member set), and true/false successors that are either another node
 * (>= 0) or a leaf (-(leaf + 1)); leaves carry (target, weight) lists. Every id is checked while
 * building (unknown node ids, targets and leaves out of range, cycles), and the largest feature
 * id is kept to check each input's width, so bad attributes are an error at load (infer), never an
 * out-of-bounds read. A call then costs O(rows x trees x depth): no attribute is read.
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

/* ---- building: the attributes into scratch tables (int64 ids, checked), packed below --------- */

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

static alma_status te_build(const alma_node *n, int64_t ntargets, tree_model *m) {
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
  m->nnodes = nn, m->nleaves = c_ltid, m->ntrees = c_roots, m->nout = ntargets;
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
    if (ltid[l] < 0 || ltid[l] >= ntargets)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "leaf_targetids[%lld] = %lld is out of range [0, %lld)",
                            (long long)l, (long long)ltid[l], (long long)ntargets);
    m->lstart[l] = l;
    m->otarget[l] = ltid[l];
    m->oweight[l] = alma__ml_at(&lw, l);
  }
  m->lstart[c_ltid] = c_ltid;
  return ALMA_OK;
}


/* ---- the packed tables: the node's prepared state ------------------------------------------------
 * One 24-byte record per node (a tree of a few hundred nodes stays in L1), int32 ids: every count
 * comes from an attribute list, whose length is an int. */
typedef struct tnode {
  double th;
  int32_t feat;
  int32_t next[2]; /* [0] false, [1] true: a node (>= 0) or a leaf (-(leaf + 1)) */
  uint8_t mode, miss;
} tnode;

/* Every interior node compares with one mode and none tracks missing values (scikit-learn and
 * LightGBM write BRANCH_LEQ, XGBoost BRANCH_LT): the walk needs no switch. */
enum { WALK_ANY, WALK_LEQ, WALK_LT };

enum { TREE_LEGACY_REG, TREE_LEGACY_CLS, TREE_V5 };
enum { AGG_AVERAGE, AGG_SUM, AGG_MIN, AGG_MAX };

typedef struct tree_prep {
  alma_prepared hdr;
  int64_t nnodes, ntrees, nout;
  tnode *nodes;
  int32_t *roots;
  int32_t *lstart;     /* leaf l's outputs: [lstart[l], lstart[l + 1]) */
  int32_t *otarget;
  double *oweight;
  int32_t *mstart, *mlen; /* BRANCH_MEMBER sets (TreeEnsemble-5), per node */
  double *members;
  int walk;
  int64_t max_feat;    /* largest feature id an interior node reads; -1 when none */
  int has_neg_feat;    /* an interior node reads a negative feature id */
  /* attribute-derived arguments */
  int agg;
  alma_ml_post pt;
  int64_t nbase;
  double *base;
  int64_t nlab, cols;  /* classifier: labels, score columns */
  int64_t *labels;
  const alma__str **slabels; /* classlabels_strings' handles (labels then holds 0..nlab-1) */
  int binary;
} tree_prep;

static void tree_prep_release(alma_prepared *hp) {
  tree_prep *p = (tree_prep *)hp;
  free(p->nodes);
  free(p->roots);
  free(p->lstart);
  free(p->otarget);
  free(p->oweight);
  free(p->mstart);
  free(p->mlen);
  free(p->members);
  free(p->base);
  free(p->labels);
  free(p->slabels);
  free(p);
}

/* Packs the scratch tables m into p (m is freed by the caller). */
static alma_status tree_pack(const alma_node *n, const tree_model *m, tree_prep *p) {
  int64_t nouts = m->lstart[m->nleaves];
  p->nnodes = m->nnodes, p->ntrees = m->ntrees, p->nout = m->nout;
  p->nodes = alma__nn_alloc(n, (size_t)(m->nnodes > 0 ? m->nnodes : 1), sizeof *p->nodes);
  p->roots = alma__nn_alloc(n, (size_t)(m->ntrees > 0 ? m->ntrees : 1), sizeof *p->roots);
  p->lstart = alma__nn_alloc(n, (size_t)m->nleaves + 1, sizeof *p->lstart);
  p->otarget = alma__nn_alloc(n, (size_t)(nouts > 0 ? nouts : 1), sizeof *p->otarget);
  p->oweight = alma__nn_alloc(n, (size_t)(nouts > 0 ? nouts : 1), sizeof *p->oweight);
  if (!p->nodes || !p->roots || !p->lstart || !p->otarget || !p->oweight) return ALMA_ERR_NOMEM;
  int any_miss = 0, any_mode = -1, one_mode = 1;
  p->max_feat = -1;
  for (int64_t i = 0; i < m->nnodes; i++) {
    tnode *d = &p->nodes[i];
    memset(d, 0, sizeof *d);
    d->mode = m->mode[i];
    d->miss = m->miss ? m->miss[i] : 0;
    d->th = m->th[i];
    if (d->mode == M_LEAF) continue;
    if (m->feat[i] < 0) p->has_neg_feat = 1;
    else if (m->feat[i] > p->max_feat) p->max_feat = m->feat[i];
    if (m->feat[i] > INT32_MAX)
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "unsupported: node index %lld reads feature %lld (beyond 2^31)",
                            (long long)i, (long long)m->feat[i]);
    d->feat = (int32_t)(m->feat[i] < 0 ? 0 : m->feat[i]);
    d->next[0] = (int32_t)m->fnext[i];
    d->next[1] = (int32_t)m->tnext[i];
    any_miss |= d->miss;
    if (any_mode < 0) any_mode = d->mode;
    one_mode &= d->mode == any_mode;
  }
  p->walk = any_miss || !one_mode ? WALK_ANY : any_mode == M_LEQ ? WALK_LEQ : any_mode == M_LT ? WALK_LT : WALK_ANY;
  for (int64_t t = 0; t < m->ntrees; t++) p->roots[t] = (int32_t)m->roots[t];
  for (int64_t l = 0; l <= m->nleaves; l++) p->lstart[l] = (int32_t)m->lstart[l];
  for (int64_t k = 0; k < nouts; k++) p->otarget[k] = (int32_t)m->otarget[k], p->oweight[k] = m->oweight[k];
  if (m->mstart) {
    int64_t nmem = 0;
    p->mstart = alma__nn_alloc(n, (size_t)(m->nnodes > 0 ? m->nnodes : 1), sizeof *p->mstart);
    p->mlen = alma__nn_alloc(n, (size_t)(m->nnodes > 0 ? m->nnodes : 1), sizeof *p->mlen);
    for (int64_t i = 0; i < m->nnodes; i++)
      if (m->mode[i] == M_MEMBER && m->mstart[i] + m->mlen[i] > nmem) nmem = m->mstart[i] + m->mlen[i];
    p->members = alma__nn_alloc(n, (size_t)(nmem > 0 ? nmem : 1), sizeof *p->members);
    if (!p->mstart || !p->mlen || !p->members) return ALMA_ERR_NOMEM;
    for (int64_t i = 0; i < m->nnodes; i++) p->mstart[i] = (int32_t)m->mstart[i], p->mlen[i] = (int32_t)m->mlen[i];
    if (nmem) memcpy(p->members, m->members, (size_t)nmem * sizeof *p->members);
  }
  return ALMA_OK;
}

/* Checks the feature ids of interior nodes against the input width: O(1) unless one is out of
 * range, when the message names the first such node. */
static alma_status check_features(const alma_node *n, const tree_prep *p, int64_t feats) {
  if (!p->has_neg_feat && p->max_feat < feats) return ALMA_OK;
  for (int64_t i = 0; i < p->nnodes; i++) {
    if (p->nodes[i].mode == M_LEAF) continue;
    int64_t f = p->nodes[i].feat;
    if (p->has_neg_feat) { /* the packed id was clamped; the message wants the attribute's value */
      const int64_t *feat;
      int64_t cnt;
      if (alma__ml_ints(n, "nodes_featureids", &feat, &cnt) == ALMA_OK && i < cnt) f = feat[i];
    }
    if (f < 0 || f >= feats)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "node index %lld reads feature %lld of an input with %lld features",
                            (long long)i, (long long)f, (long long)feats);
  }
  return ALMA_OK;
}

static int node_true(const tree_prep *p, const tnode *d, int64_t i, double x) {
  if (d->miss && isnan(x)) return 1;
  double t = d->th;
  switch (d->mode) {
    case M_LEQ: return x <= t;
    case M_LT: return x < t;
    case M_GTE: return x >= t;
    case M_GT: return x > t;
    case M_EQ: return x == t;
    case M_NEQ: return x != t;
    case M_MEMBER:
      for (int32_t k = 0; k < p->mlen[i]; k++)
        if (p->members[p->mstart[i] + k] == x) return 1;
      return 0;
  }
  return 0;
}

/* Rows processed together: tree by tree over a block of rows, so one tree's nodes stay in cache
 * while every row of the block walks it (row by row, a forest larger than the cache misses on
 * every tree). Each row still meets the trees in order, so sums round as before. */
#define TREE_ROW_BLOCK 64
/* Rows walking one tree side by side: a walk is a chain of dependent loads (node, feature, next
 * node), so one row at a time leaves the core waiting; G independent chains overlap. */
#define TREE_WALK_ROWS 8

/* The leaves that rows x[0..g) (g <= TREE_WALK_ROWS, F features apart) reach from root. */
static void walk_rows(const tree_prep *p, int32_t root, const double *x, int64_t F, int g, int32_t *leaf) {
  const tnode *nd = p->nodes;
  int32_t cur[TREE_WALK_ROWS];
  for (int j = 0; j < g; j++) cur[j] = root;
#define WALK(NEXT)                                   \
  for (int live = 1; live;) {                        \
    live = 0;                                        \
    for (int j = 0; j < g; j++) {                    \
      int32_t c = cur[j];                            \
      if (c < 0) continue;                           \
      const tnode *d = &nd[c];                       \
      double v = x[j * F + d->feat];                 \
      cur[j] = d->next[NEXT];                        \
      live = 1;                                      \
    }                                                \
  }
  switch (p->walk) {
    case WALK_LEQ: WALK(v <= d->th) break;
    case WALK_LT: WALK(v < d->th) break;
    default: WALK(node_true(p, d, c, v))
  }
#undef WALK
  for (int j = 0; j < g; j++) leaf[j] = -cur[j] - 1;
}

/* Adds every tree's leaf outputs for nb rows x[nb, F] into acc[nb, stride] (initialized by the
 * caller, seen zeroed): SUM/AVERAGE add (AVERAGE per leaf divides each share by the number of
 * trees: TreeEnsemble-5), MIN/MAX keep the extreme over the leaves reached. Every sum is rounded
 * to `rt` after each leaf, as onnx.reference's arrays of that type do. */
static void accumulate(const tree_prep *p, const double *x, int64_t nb, int64_t F, double *acc, uint8_t *seen,
                       int64_t stride, int agg, int per_leaf, alma_dtype rt) {
  double avg = (double)p->ntrees;
  int32_t leaf[TREE_WALK_ROWS];
  for (int64_t t = 0; t < p->ntrees; t++) {
    int32_t root = p->roots[t];
    for (int64_t r0 = 0; r0 < nb; r0 += TREE_WALK_ROWS) {
      int g = nb - r0 < TREE_WALK_ROWS ? (int)(nb - r0) : TREE_WALK_ROWS;
      walk_rows(p, root, x + r0 * F, F, g, leaf);
      for (int j = 0; j < g; j++) {
        int32_t l = leaf[j];
        double *a = acc + (r0 + j) * stride;
        uint8_t *s = seen + (r0 + j) * stride;
        for (int32_t q = p->lstart[l]; q < p->lstart[l + 1]; q++) {
          int32_t o = p->otarget[q];
          double v = p->oweight[q];
          if (agg == AGG_MIN || agg == AGG_MAX) {
            if (!s[o] || (agg == AGG_MIN ? v < a[o] : v > a[o])) a[o] = v;
            s[o] = 1;
          } else {
            if (agg == AGG_AVERAGE && per_leaf) v /= avg;
            a[o] = alma__round_to(rt, a[o] + v);
          }
        }
      }
    }
  }
}

/* Rows [r0, r0 + nb) of X as doubles, row-major. */
static void load_rows(const alma_tensor *x, int64_t r0, int64_t nb, int64_t F, double *xr) {
  int64_t base = r0 * F, cnt = nb * F;
  if (x->dtype == ALMA_DTYPE_FLOAT32) {
    const float *xs = (const float *)x->data + base;
    for (int64_t i = 0; i < cnt; i++) xr[i] = xs[i];
  } else {
    for (int64_t i = 0; i < cnt; i++) xr[i] = alma__get_f64(x->data, x->dtype, base + i);
  }
}

/* ONNX Runtime's regressor transform: rows of >= 2 targets get pt, one target only PROBIT. */
static void regressor_post(alma_ml_post pt, double *v, int64_t k) {
  if (k == 1 && pt != ALMA_ML_PT_PROBIT) return;
  alma__ml_apply_post(pt, v, k);
}

/* Per-call scratch for a block of rows. */
typedef struct tree_scratch {
  int64_t nb;
  double *xr, *acc;
  uint8_t *seen;
} tree_scratch;

static alma_status scratch_alloc(const alma_node *n, int64_t rows, int64_t F, int64_t stride, tree_scratch *s) {
  /* fewer rows per block when rows are wide, so the scratch stays around a few MB */
  int64_t per_row = F + stride + 1, nb = ((int64_t)1 << 18) / (per_row > 0 ? per_row : 1);
  if (nb > TREE_ROW_BLOCK) nb = TREE_ROW_BLOCK;
  if (nb > rows) nb = rows;
  if (nb < 1) nb = 1;
  s->nb = nb;
  s->xr = alma__nn_alloc(n, (size_t)(nb * F > 0 ? nb * F : 1), sizeof(double));
  s->acc = alma__nn_alloc(n, (size_t)(nb * stride), sizeof(double));
  s->seen = alma__nn_alloc(n, (size_t)(nb * stride), 1);
  if (!s->xr || !s->acc || !s->seen) {
    free(s->xr), free(s->acc), free(s->seen);
    return ALMA_ERR_NOMEM;
  }
  return ALMA_OK;
}

static void scratch_free(tree_scratch *s) {
  free(s->xr);
  free(s->acc);
  free(s->seen);
}

/* A new tree_prep with its release set. */
static tree_prep *prep_new(const alma_node *n) {
  tree_prep *p = alma__nn_alloc(n, 1, sizeof *p);
  if (p) memset(p, 0, sizeof *p), p->hdr.release = tree_prep_release;
  return p;
}

/* Builds the tables (legacy: prefix "target"/"class") and packs them into p. */
static alma_status prep_tables(const alma_node *n, tree_prep *p, int kind, int64_t nout) {
  tree_model m;
  alma_status st = kind == TREE_V5 ? te_build(n, nout, &m) : legacy_build(n, kind == TREE_LEGACY_CLS ? "class" : "target", nout, &m);
  if (st == ALMA_OK) st = tree_pack(n, &m, p);
  tree_free(&m);
  return st;
}

static alma_status base_copy(const alma_node *n, const alma_ml_list *l, tree_prep *p) {
  p->nbase = l->n;
  p->base = alma__nn_alloc(n, (size_t)(l->n > 0 ? l->n : 1), sizeof(double));
  if (!p->base) return ALMA_ERR_NOMEM;
  for (int64_t k = 0; k < l->n; k++) p->base[k] = alma__ml_at(l, k);
  return ALMA_OK;
}

/* A failed build frees what it made; returns st. */
static alma_status prep_done(tree_prep *p, alma_status st, alma_prepared **out) {
  if (st != ALMA_OK) {
    tree_prep_release(&p->hdr);
    return st;
  }
  *out = &p->hdr;
  return ALMA_OK;
}

/* ---- TreeEnsembleRegressor (1, 3) --------------------------------------------------------------- */
static alma_status ter_prepare(const alma_node *n, alma_prepared **out) {
  tree_prep *p = prep_new(n);
  if (!p) return ALMA_ERR_NOMEM;
  alma_status st = alma__ml_post_transform(n, &p->pt);
  int64_t nt = alma__attr_i(n, "n_targets", 1);
  if (st == ALMA_OK && (nt < 1 || nt > ALMA_ML_MAX_TARGETS))
    st = alma__op_error(n, ALMA_ERR_INVALID_MODEL, "n_targets %lld (1 to %d expected)", (long long)nt, ALMA_ML_MAX_TARGETS);
  const char *agg = alma__attr_s(n, "aggregate_function", "SUM");
  if (st != ALMA_OK) {
  } else if (!strcmp(agg, "AVERAGE")) p->agg = AGG_AVERAGE;
  else if (!strcmp(agg, "SUM")) p->agg = AGG_SUM;
  else if (!strcmp(agg, "MIN")) p->agg = AGG_MIN;
  else if (!strcmp(agg, "MAX")) p->agg = AGG_MAX;
  else st = alma__op_error(n, ALMA_ERR_INVALID_MODEL, "aggregate_function '%s' (AVERAGE, SUM, MIN or MAX expected)", agg);
  alma_ml_list base = {0};
  if (st == ALMA_OK) st = alma__ml_floats_or_tensor(n, "base_values", &base);
  if (st == ALMA_OK && base.n && base.n != nt)
    st = alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%lld base_values for %lld targets", (long long)base.n, (long long)nt);
  if (st == ALMA_OK) st = base_copy(n, &base, p);
  if (st == ALMA_OK) st = prep_tables(n, p, TREE_LEGACY_REG, nt);
  return prep_done(p, st, out);
}

/* The prepared tables, and X's rows and features checked against them. */
static alma_status tree_setup(const alma_node *n, const alma_tensor *x, alma_prepare_fn prepare, const tree_prep **p,
                              int64_t *rows, int64_t *feats) {
  ALMA_TRY(alma__ml_rows(n, x, rows, feats));
  const alma_prepared *hp;
  ALMA_TRY(alma__node_prepared(n, prepare, &hp));
  *p = (const tree_prep *)hp;
  return check_features(n, *p, *feats);
}

static alma_status ter_infer(INFER_ARGS) {
  const tree_prep *p;
  int64_t rows, feats;
  ALMA_TRY(tree_setup(n, in[0], ter_prepare, &p, &rows, &feats));
  int64_t d[2] = {rows, p->nout};
  alma__set_shape(&out[0], ALMA_DTYPE_FLOAT32, 2, d);
  return ALMA_OK;
}

static alma_status ter_exec(EXEC_ARGS) {
  const tree_prep *p;
  int64_t rows, F;
  ALMA_TRY(tree_setup(n, in[0], ter_prepare, &p, &rows, &F));
  const alma_tensor *x = in[0];
  int64_t T = p->nout;
  tree_scratch s;
  ALMA_TRY(scratch_alloc(n, rows, F, T, &s));
  /* onnx.reference sums in the input's type: float32, or double for a double input */
  alma_dtype rt = x->dtype == ALMA_DTYPE_FLOAT64 ? ALMA_DTYPE_FLOAT64 : ALMA_DTYPE_FLOAT32;
  float *y = out[0].data;
  for (int64_t r0 = 0; r0 < rows; r0 += s.nb) {
    int64_t nb = rows - r0 < s.nb ? rows - r0 : s.nb;
    load_rows(x, r0, nb, F, s.xr);
    memset(s.acc, 0, (size_t)(nb * T) * sizeof(double));
    memset(s.seen, 0, (size_t)(nb * T));
    accumulate(p, s.xr, nb, F, s.acc, s.seen, T, p->agg, 0, rt);
    for (int64_t r = 0; r < nb; r++) {
      double *acc = s.acc + r * T;
      if (p->agg == AGG_AVERAGE)
        for (int64_t k = 0; k < T; k++) acc[k] = alma__round_to(rt, acc[k] / (double)p->ntrees);
      for (int64_t k = 0; k < T && p->nbase; k++) acc[k] = alma__round_to(rt, acc[k] + p->base[k]);
      regressor_post(p->pt, acc, T);
      for (int64_t k = 0; k < T; k++) y[(r0 + r) * T + k] = (float)acc[k];
    }
  }
  scratch_free(&s);
  return ALMA_OK;
}

const alma_op_def alma__op_MlTreeEnsembleRegressor = {
    .name = "TreeEnsembleRegressor", .domain = ALMA_ML_DOMAIN, .versions = {1, 3}, .min_inputs = 1, .max_inputs = 1,
    .min_outputs = 1, .max_outputs = 1, .infer = ter_infer, .exec = ter_exec};

/* ---- TreeEnsembleClassifier (1, 3) ---------------------------------------------------------------
 * Scores start at base_values (one per class, or one for all) and add the class weights of every
 * leaf reached. Binary case (every class_id the same): column 1 takes the score and column 0 its
 * complement, 1 - s for NONE and PROBIT, -s otherwise; then post_transform, and the label is the
 * argmax through classlabels_int64s (one label, which must be 1: label 1 or 0) or
 * classlabels_strings (two or more: onnx.reference defines no single string label). */
static alma_status tec_prepare_args(const alma_node *n, tree_prep *p) {
  ALMA_TRY(alma__ml_post_transform(n, &p->pt));
  alma_ml_labels lab;
  ALMA_TRY(alma__ml_class_labels(n, "classlabels_int64s", &lab));
  p->nlab = lab.n;
  if (p->nlab < 1)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute classlabels_int64s or classlabels_strings is required");
  if (p->nlab == 1 && lab.strs)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "unsupported: a single string class label \"%s\" (onnx.reference "
                          "defines none)", lab.strs[0]);
  if (p->nlab == 1 && lab.ints[0] != 1)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "unsupported: a single class label %lld (only 1 has a defined meaning)",
                          (long long)lab.ints[0]);
  p->labels = alma__nn_alloc(n, (size_t)p->nlab, sizeof *p->labels);
  if (!p->labels) return ALMA_ERR_NOMEM;
  for (int64_t k = 0; k < p->nlab; k++) p->labels[k] = lab.ints ? lab.ints[k] : k;
  ALMA_TRY(alma__ml_intern_labels(n, &lab, &p->slabels));
  alma_ml_list base;
  ALMA_TRY(alma__ml_floats_or_tensor(n, "base_values", &base));
  if (base.n && base.n != 1 && base.n != p->nlab)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%lld base_values for %lld classes", (long long)base.n, (long long)p->nlab);
  ALMA_TRY(base_copy(n, &base, p));
  const int64_t *cid;
  int64_t ncid;
  ALMA_TRY(alma__ml_ints(n, "class_ids", &cid, &ncid));
  p->binary = ncid > 0;
  for (int64_t k = 1; k < ncid; k++)
    if (cid[k] != cid[0]) p->binary = 0;
  if (p->binary && p->nlab > 1 && cid[0] != 0)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "unsupported: binary scores written to class %lld (class 0 expected)",
                          (long long)cid[0]);
  p->cols = p->binary && p->nlab == 1 ? 2 : p->nlab;
  return prep_tables(n, p, TREE_LEGACY_CLS, p->nlab);
}

static alma_status tec_prepare(const alma_node *n, alma_prepared **out) {
  tree_prep *p = prep_new(n);
  if (!p) return ALMA_ERR_NOMEM;
  return prep_done(p, tec_prepare_args(n, p), out);
}

static alma_status tec_infer(INFER_ARGS) {
  const tree_prep *p;
  int64_t rows, feats;
  ALMA_TRY(tree_setup(n, in[0], tec_prepare, &p, &rows, &feats));
  int64_t d[2] = {rows, p->cols};
  alma__set_shape(&out[0], p->slabels ? ALMA_DTYPE_STRING : ALMA_DTYPE_INT64, 1, d);
  if (nout > 1) alma__set_shape(&out[1], ALMA_DTYPE_FLOAT32, 2, d);
  return ALMA_OK;
}

static alma_status tec_exec(EXEC_ARGS) {
  const tree_prep *p;
  int64_t rows, F;
  ALMA_TRY(tree_setup(n, in[0], tec_prepare, &p, &rows, &F));
  const alma_tensor *x = in[0];
  int64_t C = p->cols, L = p->nlab;
  tree_scratch s;
  ALMA_TRY(scratch_alloc(n, rows, F, C, &s));
  int64_t *y = out[0].data;
  int want_scores = alma__nn_out_wanted(n, nout, 1);
  for (int64_t r0 = 0; r0 < rows; r0 += s.nb) {
    int64_t nb = rows - r0 < s.nb ? rows - r0 : s.nb;
    load_rows(x, r0, nb, F, s.xr);
    for (int64_t r = 0; r < nb; r++)
      for (int64_t k = 0; k < C; k++)
        s.acc[r * C + k] = k < L && p->nbase ? (double)(float)p->base[p->nbase == 1 ? 0 : k] : 0;
    accumulate(p, s.xr, nb, F, s.acc, s.seen, C, AGG_SUM, 0, ALMA_DTYPE_FLOAT32);
    for (int64_t r = 0; r < nb; r++) {
      double *sc = s.acc + r * C;
      if (p->binary) {
        sc[1] = sc[0]; /* the score moves to column 1 (a second column when there is one label) */
        sc[0] = p->pt == ALMA_ML_PT_NONE || p->pt == ALMA_ML_PT_PROBIT ? 1 - sc[1] : -sc[1];
      }
      for (int64_t k = 0; k < C; k++) sc[k] = (float)sc[k];
      alma__ml_apply_post(p->pt, sc, C);
      int64_t best = alma__ml_argmax(sc, C);
      if (p->slabels) ((const alma__str **)out[0].data)[r0 + r] = p->slabels[best];
      else y[r0 + r] = L == 1 ? (best == 1) : p->labels[best];
      if (want_scores)
        for (int64_t k = 0; k < C; k++) ((float *)out[1].data)[(r0 + r) * C + k] = (float)sc[k];
    }
  }
  scratch_free(&s);
  return ALMA_OK;
}

const alma_op_def alma__op_MlTreeEnsembleClassifier = {
    .name = "TreeEnsembleClassifier", .domain = ALMA_ML_DOMAIN, .versions = {1, 3}, .flags = ALMA_OP_STRINGS,
    .min_inputs = 1, .max_inputs = 1,
    .min_outputs = 1, .max_outputs = 2, .infer = tec_infer, .exec = tec_exec};

/* ---- TreeEnsemble (5) ------------------------------------------------------------------------------
 * Interior nodes and leaves are separate lists; nodes_true/falsenodeids index nodes or leaves as
 * nodes_true/falseleafs say; tree_roots index nodes. A root whose two branches are the same leaf is
 * that leaf (a one-leaf tree). BRANCH_MEMBER nodes take their sets from membership_values, NaN
 * separated, in the order the nodes appear in nodes_modes (spec). */

static alma_status te_prepare_args(const alma_node *n, tree_prep *p) {
  int64_t pt = alma__attr_i(n, "post_transform", 0), agg = alma__attr_i(n, "aggregate_function", 1);
  if (pt < 0 || pt > 4)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "post_transform %lld (0 to 4 expected)", (long long)pt);
  if (agg < 0 || agg > 3)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "aggregate_function %lld (0 to 3 expected)", (long long)agg);
  p->pt = (alma_ml_post)pt, p->agg = (int)agg;
  const alma_attr *nt = alma__node_attr(n, "n_targets");
  if (!nt || nt->type != ALMA_ATTR_INT || nt->i < 1 || nt->i > ALMA_ML_MAX_TARGETS)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute n_targets (1 to %d) is required", ALMA_ML_MAX_TARGETS);
  return prep_tables(n, p, TREE_V5, nt->i);
}

static alma_status te_prepare(const alma_node *n, alma_prepared **out) {
  tree_prep *p = prep_new(n);
  if (!p) return ALMA_ERR_NOMEM;
  return prep_done(p, te_prepare_args(n, p), out);
}

static alma_status te_setup(const alma_node *n, const alma_tensor *x, const tree_prep **p, int64_t *rows, int64_t *feats) {
  if (x->dtype != ALMA_DTYPE_FLOAT32 && x->dtype != ALMA_DTYPE_FLOAT64 && x->dtype != ALMA_DTYPE_FLOAT16)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "X dtype %s (float, double or float16 expected)", alma_dtype_name(x->dtype));
  if (x->rank != 2) {
    char s[128];
    return alma__op_error(n, ALMA_ERR_SHAPE, "X of shape %s ([N, F] expected)", alma__shape_str(x->rank, x->dims, s, sizeof s));
  }
  return tree_setup(n, x, te_prepare, p, rows, feats);
}

static alma_status te_infer(INFER_ARGS) {
  const tree_prep *p;
  int64_t rows, feats;
  ALMA_TRY(te_setup(n, in[0], &p, &rows, &feats));
  int64_t d[2] = {rows, p->nout};
  alma__set_shape(&out[0], in[0]->dtype, 2, d);
  return ALMA_OK;
}

static alma_status te_exec(EXEC_ARGS) {
  const tree_prep *p;
  int64_t rows, F;
  ALMA_TRY(te_setup(n, in[0], &p, &rows, &F));
  const alma_tensor *x = in[0];
  int64_t T = p->nout;
  tree_scratch s;
  ALMA_TRY(scratch_alloc(n, rows, F, T, &s));
  for (int64_t r0 = 0; r0 < rows; r0 += s.nb) {
    int64_t nb = rows - r0 < s.nb ? rows - r0 : s.nb;
    load_rows(x, r0, nb, F, s.xr);
    memset(s.acc, 0, (size_t)(nb * T) * sizeof(double));
    memset(s.seen, 0, (size_t)(nb * T));
    accumulate(p, s.xr, nb, F, s.acc, s.seen, T, p->agg, 1, x->dtype);
    for (int64_t r = 0; r < nb; r++) {
      double *acc = s.acc + r * T;
      regressor_post(p->pt, acc, T);
      for (int64_t k = 0; k < T; k++) alma__set_f64(out[0].data, x->dtype, (r0 + r) * T + k, acc[k]);
    }
  }
  scratch_free(&s);
  return ALMA_OK;
}

const alma_op_def alma__op_MlTreeEnsemble = {.name = "TreeEnsemble", .domain = ALMA_ML_DOMAIN, .versions = {5},
                                             .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                             .infer = te_infer, .exec = te_exec};
