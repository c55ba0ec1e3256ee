/* Prepared per-node state (alma_prepared, graph/graph.h; alma__node_prepared, ops/op.h): built once
 * per node and cached, freed with the graph and when compaction drops the node, never shared with
 * a clone, rebuilt after a pass replaces the node's attributes or op, not cached when the build
 * fails, and built by exactly one winner when threads race on first use. Last, a real op that
 * uses it (TreeEnsembleRegressor) keeps one state across infer/exec calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph/graph.h"
#include "ops/op.h"

/* A state that counts its builds and releases. */
static atomic_int builds, releases;
static int fail_next;      /* the next build fails */
static int slow_build;     /* builds sleep, so that racing threads overlap */

typedef struct count_state {
  alma_prepared hdr;
  int serial; /* which build made it */
} count_state;

static void count_release(alma_prepared *p) {
  atomic_fetch_add(&releases, 1);
  free(p);
}

static alma_status count_build(const alma_node *n, alma_prepared **out) {
  if (fail_next) {
    fail_next = 0;
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "build refused by the test");
  }
  if (slow_build) nanosleep(&(struct timespec){0, 2 * 1000 * 1000}, NULL);
  count_state *s = calloc(1, sizeof *s);
  if (!s) return ALMA_ERR_NOMEM;
  s->hdr.release = count_release;
  s->serial = atomic_fetch_add(&builds, 1) + 1;
  *out = &s->hdr;
  return ALMA_OK;
}

static void reset_counts(void) {
  atomic_store(&builds, 0);
  atomic_store(&releases, 0);
  fail_next = slow_build = 0;
}

/* x -> Relu -> y -> Relu -> z: two nodes, resolved (the key includes the op). */
static alma_graph *two_nodes(void) {
  alma_graph *g = alma__graph_new(NULL);
  assert_non_null(g);
  int x = alma__graph_add_value(g, "x"), y = alma__graph_add_value(g, "y"), z = alma__graph_add_value(g, "z");
  g->values[x].is_input = 1;
  g->values[z].is_output = 1;
  g->inputs = calloc(1, sizeof(int));
  g->outputs = calloc(1, sizeof(int));
  g->inputs[0] = x, g->outputs[0] = z;
  g->n_inputs = g->n_outputs = 1;
  assert_int_equal(alma__graph_add_node(g, "Relu", "", "r0", &x, 1, &y, 1), 0);
  assert_int_equal(alma__graph_add_node(g, "Relu", "", "r1", &y, 1, &z, 1), 1);
  for (int i = 0; i < 2; i++) assert_int_equal(alma__op_resolve(&g->nodes[i], 17), ALMA_OK);
  return g;
}

static const alma_prepared *get(const alma_node *n) {
  const alma_prepared *p = NULL;
  assert_int_equal(alma__node_prepared(n, count_build, &p), ALMA_OK);
  assert_non_null(p);
  return p;
}

static void test_built_once_freed_with_graph(void **state) {
  (void)state;
  reset_counts();
  alma_graph *g = two_nodes();
  assert_null(atomic_load(&g->nodes[0].prepared));
  const alma_prepared *p = get(&g->nodes[0]);
  assert_ptr_equal(get(&g->nodes[0]), p);
  assert_ptr_equal(get(&g->nodes[0]), p);
  assert_int_equal(atomic_load(&builds), 1);
  assert_ptr_equal(atomic_load(&g->nodes[0].prepared), p);
  assert_null(atomic_load(&g->nodes[1].prepared)); /* per node */
  get(&g->nodes[1]);
  assert_int_equal(atomic_load(&builds), 2);
  assert_int_equal(atomic_load(&releases), 0);
  alma__graph_free(g);
  assert_int_equal(atomic_load(&releases), 2);
}

static void test_clone_does_not_share(void **state) {
  (void)state;
  reset_counts();
  alma_graph *g = two_nodes(), *c = NULL;
  const alma_prepared *p = get(&g->nodes[0]);
  assert_int_equal(alma__graph_clone(g, &c), ALMA_OK);
  assert_null(atomic_load(&c->nodes[0].prepared));
  const alma_prepared *q = get(&c->nodes[0]);
  assert_ptr_not_equal(p, q);
  assert_int_equal(atomic_load(&builds), 2);
  alma__graph_free(c); /* frees the clone's state only */
  assert_int_equal(atomic_load(&releases), 1);
  assert_ptr_equal(get(&g->nodes[0]), p);
  alma__graph_free(g);
  assert_int_equal(atomic_load(&releases), 2);
}

static void test_compact_frees_dropped_node(void **state) {
  (void)state;
  reset_counts();
  alma_graph *g = two_nodes();
  const alma_prepared *p1 = get(&g->nodes[1]);
  get(&g->nodes[0]);
  /* drop r0: r1 now reads the graph input */
  g->nodes[0].dead = 1;
  g->nodes[1].inputs[0] = g->inputs[0];
  assert_int_equal(alma__graph_compact(g), ALMA_OK);
  assert_int_equal(g->n_nodes, 1);
  assert_int_equal(atomic_load(&releases), 1);
  assert_ptr_equal(atomic_load(&g->nodes[0].prepared), p1); /* moved with its node */
  assert_ptr_equal(get(&g->nodes[0]), p1);
  alma__graph_free(g);
  assert_int_equal(atomic_load(&releases), 2);
}

static void test_edited_node_rebuilds(void **state) {
  (void)state;
  reset_counts();
  alma_graph *g = two_nodes();
  alma_node *n = &g->nodes[0];
  const count_state *p = (const count_state *)get(n);
  /* a pass replaces the attribute array (passes never edit one in place) */
  alma_attr *a = alma__arena_alloc(g->arena, sizeof *a);
  a->name = "alpha", a->type = ALMA_ATTR_FLOAT, a->f = 0.5f;
  n->attrs = a, n->n_attrs = 1;
  const count_state *q = (const count_state *)get(n);
  assert_int_equal(q->serial, 2);
  assert_int_equal(atomic_load(&releases), 1); /* the stale state went */
  /* and a retyped node (FUSE) rebuilds too */
  assert_int_equal(alma__op_resolve(n, 5), ALMA_OK); /* Relu-1: another since_version */
  assert_int_not_equal(n->since_version, 14);
  assert_int_equal(((const count_state *)get(n))->serial, 3);
  assert_int_equal(atomic_load(&releases), 2);
  (void)p;
  alma__graph_free(g);
  assert_int_equal(atomic_load(&releases), 3);
}

static void test_failed_build_not_cached(void **state) {
  (void)state;
  reset_counts();
  alma_graph *g = two_nodes();
  const alma_prepared *p = NULL;
  fail_next = 1;
  assert_int_equal(alma__node_prepared(&g->nodes[0], count_build, &p), ALMA_ERR_INVALID_MODEL);
  assert_null(atomic_load(&g->nodes[0].prepared));
  get(&g->nodes[0]);
  assert_int_equal(atomic_load(&builds), 1);
  alma__graph_free(g);
  assert_int_equal(atomic_load(&releases), 1);
}

#define N_THREADS 8
typedef struct race_arg {
  const alma_node *n;
  pthread_barrier_t *go;
  const alma_prepared *got;
  alma_status st;
} race_arg;

static void *race_main(void *v) {
  race_arg *r = v;
  pthread_barrier_wait(r->go);
  r->st = alma__node_prepared(r->n, count_build, &r->got);
  return NULL;
}

static void test_first_use_race(void **state) {
  (void)state;
  for (int round = 0; round < 20; round++) {
    reset_counts();
    slow_build = 1;
    alma_graph *g = two_nodes();
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, N_THREADS);
    pthread_t th[N_THREADS];
    race_arg ra[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
      ra[i] = (race_arg){.n = &g->nodes[0], .go = &go};
      assert_int_equal(pthread_create(&th[i], NULL, race_main, &ra[i]), 0);
    }
    for (int i = 0; i < N_THREADS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&go);
    for (int i = 0; i < N_THREADS; i++) {
      assert_int_equal(ra[i].st, ALMA_OK);
      assert_ptr_equal(ra[i].got, ra[0].got); /* one winner, seen by all */
    }
    assert_ptr_equal(atomic_load(&g->nodes[0].prepared), ra[0].got);
    int b = atomic_load(&builds);
    assert_true(b >= 1);
    assert_int_equal(atomic_load(&releases), b - 1); /* every loser freed its own */
    alma__graph_free(g);
    assert_int_equal(atomic_load(&releases), b);
  }
}

/* ---- a real op: TreeEnsembleRegressor, one tree: x[1] <= 0.5 ? 10 : 20 ------------------------- */

static void ints_attr(alma_graph *g, alma_attr *a, const char *name, const int64_t *v, int n) {
  a->name = name, a->type = ALMA_ATTR_INTS, a->n = n;
  a->ints = alma__arena_alloc(g->arena, sizeof(int64_t) * (size_t)n);
  memcpy(a->ints, v, sizeof(int64_t) * (size_t)n);
}

static void test_tree_op_keeps_state(void **state) {
  (void)state;
  alma_graph *g = alma__graph_new(NULL);
  int x = alma__graph_add_value(g, "x"), y = alma__graph_add_value(g, "y");
  assert_int_equal(alma__graph_add_node(g, "TreeEnsembleRegressor", "ai.onnx.ml", "t", &x, 1, &y, 1), 0);
  alma_node *n = &g->nodes[0];
  alma_attr *a = alma__arena_alloc(g->arena, sizeof(alma_attr) * 12);
  int k = 0;
  ints_attr(g, &a[k++], "nodes_treeids", (int64_t[]){0, 0, 0}, 3);
  ints_attr(g, &a[k++], "nodes_nodeids", (int64_t[]){0, 1, 2}, 3);
  ints_attr(g, &a[k++], "nodes_featureids", (int64_t[]){1, 0, 0}, 3);
  ints_attr(g, &a[k++], "nodes_truenodeids", (int64_t[]){1, 0, 0}, 3);
  ints_attr(g, &a[k++], "nodes_falsenodeids", (int64_t[]){2, 0, 0}, 3);
  ints_attr(g, &a[k++], "target_treeids", (int64_t[]){0, 0}, 2);
  ints_attr(g, &a[k++], "target_nodeids", (int64_t[]){1, 2}, 2);
  ints_attr(g, &a[k++], "target_ids", (int64_t[]){0, 0}, 2);
  static const char *modes[] = {"BRANCH_LEQ", "LEAF", "LEAF"};
  a[k++] = (alma_attr){.name = "nodes_modes", .type = ALMA_ATTR_STRINGS, .n = 3, .strings = modes};
  static float vals[] = {0.5f, 0, 0}, w[] = {10, 20};
  a[k++] = (alma_attr){.name = "nodes_values", .type = ALMA_ATTR_FLOATS, .n = 3, .floats = vals};
  a[k++] = (alma_attr){.name = "target_weights", .type = ALMA_ATTR_FLOATS, .n = 2, .floats = w};
  n->attrs = a, n->n_attrs = k;
  assert_int_equal(alma__op_resolve(n, 3), ALMA_OK);

  float xs[4] = {0, 0.25f, 0, 0.75f};
  alma_tensor xt = {0};
  assert_int_equal(alma__tensor_alloc(&xt, ALMA_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}), ALMA_OK);
  memcpy(xt.data, xs, sizeof xs);
  const alma_tensor *in[1] = {&xt};
  alma_tensor out = {0};
  assert_int_equal(alma__op_run_node(NULL, n, in, 1, &out, 1), ALMA_OK);
  alma_prepared *p = atomic_load(&n->prepared);
  assert_non_null(p); /* built by infer, reused by exec */
  assert_int_equal(out.rank, 2);
  assert_true(((float *)out.data)[0] == 10.0f && ((float *)out.data)[1] == 20.0f);
  alma_tensor_free_data(&out);
  assert_int_equal(alma__op_run_node(NULL, n, in, 1, &out, 1), ALMA_OK);
  assert_ptr_equal(atomic_load(&n->prepared), p); /* the second run reuses it */
  alma_tensor_free_data(&out);

  /* an input narrower than the features the tree reads is still an error per call */
  alma_tensor narrow = {0};
  assert_int_equal(alma__tensor_alloc(&narrow, ALMA_DTYPE_FLOAT32, 2, (int64_t[]){1, 1}), ALMA_OK);
  const alma_tensor *in2[1] = {&narrow};
  assert_int_equal(alma__op_run_node(NULL, n, in2, 1, &out, 1), ALMA_ERR_INVALID_MODEL);

  alma_graph *c = NULL;
  assert_int_equal(alma__graph_clone(g, &c), ALMA_OK);
  assert_null(atomic_load(&c->nodes[0].prepared));
  assert_int_equal(alma__op_run_node(NULL, &c->nodes[0], in, 1, &out, 1), ALMA_OK);
  assert_ptr_not_equal(atomic_load(&c->nodes[0].prepared), p);
  assert_true(((float *)out.data)[1] == 20.0f);
  alma_tensor_free_data(&out);
  alma__graph_free(c);
  alma_tensor_free_data(&narrow);
  alma_tensor_free_data(&xt);
  alma__graph_free(g); /* ASan's leak check: the tree tables go with the graph */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_built_once_freed_with_graph), cmocka_unit_test(test_clone_does_not_share),
      cmocka_unit_test(test_compact_frees_dropped_node),  cmocka_unit_test(test_edited_node_rebuilds),
      cmocka_unit_test(test_failed_build_not_cached),     cmocka_unit_test(test_first_use_race),
      cmocka_unit_test(test_tree_op_keeps_state),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
