/* The pieces behind the loader's hardening, each against an independent reference:
 * - alma__graph_toposort (heap) and alma__memory_plan_peak (interval lookups) against the direct
 *   quadratic algorithms they replace, written out here, on random DAGs in shuffled order;
 * - alma__strmap against a linear scan; alma__numel's overflow, unknown and zero cases;
 * - alma__escape_text / alma__utf8_fix on every class of byte sequence RFC 3629 names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "graph/graph.h"
#include "graph/infer.h"

static int failures;
#define CHECK(c, ...)                          \
  do {                                         \
    if (!(c)) {                                \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);            \
      fputc('\n', stderr);                     \
      failures++;                              \
    }                                          \
  } while (0)

static uint64_t rng = 88172645463325252ull;
static unsigned rnd(unsigned n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (unsigned)(rng % n);
}

/* A random DAG: node i reads up to 3 values made by earlier nodes (or the input), written to the
 * graph in a shuffled order; some values are graph outputs. */
static alma_graph *random_graph(int n, int **order_out) {
  alma_graph *g = alma__graph_new(NULL);
  char name[32];
  int x = alma__graph_add_value(g, "x");
  g->values[x].is_input = 1;
  int *vals = malloc(sizeof(int) * (size_t)(n + 1)), *perm = malloc(sizeof(int) * (size_t)n);
  vals[0] = x;
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "v%d", i);
    vals[i + 1] = alma__graph_add_value(g, name);
    perm[i] = i;
  }
  for (int i = n - 1; i > 0; i--) {
    int j = (int)rnd((unsigned)i + 1), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  for (int k = 0; k < n; k++) {
    int i = perm[k], ins[3], ni = 1 + (int)rnd(3);
    for (int q = 0; q < ni; q++) ins[q] = vals[rnd((unsigned)i + 1)]; /* value 0..i: input or earlier nodes */
    int out = vals[i + 1];
    snprintf(name, sizeof name, "n%d", i);
    alma__graph_add_node(g, "Add", "", name, ins, ni, &out, 1);
  }
  int n_out = 1 + (int)rnd(4);
  g->outputs = calloc((size_t)n_out, sizeof(int));
  for (int q = 0; q < n_out; q++) g->outputs[g->n_outputs++] = vals[1 + rnd((unsigned)n)];
  free(vals);
  *order_out = perm;
  return g;
}

/* Kahn's algorithm taking the lowest-index ready node each step, by full scans. */
static void ref_toposort(const alma_graph *g, const char **names_out) {
  int n = g->n_nodes;
  char *done = calloc((size_t)n, 1);
  for (int placed = 0; placed < n; placed++) {
    int pick = -1;
    for (int i = 0; i < n && pick < 0; i++) {
      if (done[i]) continue;
      int ready = 1;
      for (int k = 0; k < g->nodes[i].n_inputs && ready; k++)
        for (int j = 0; j < n && ready; j++)
          if (!done[j] && g->nodes[j].outputs[0] == g->nodes[i].inputs[k]) ready = 0;
      if (ready) pick = i;
    }
    done[pick] = 1;
    names_out[placed] = g->nodes[pick].name;
  }
  free(done);
}

/* The greedy-by-size plan by direct comparison of every pair. */
static int64_t ref_plan(const alma_graph *g, const int64_t *bytes) {
  int nv = g->n_values, nn = g->n_nodes, n_live = 0;
  int *first = malloc(sizeof(int) * (size_t)nv), *last = malloc(sizeof(int) * (size_t)nv);
  int *order = malloc(sizeof(int) * (size_t)nv);
  int64_t *off = malloc(sizeof(int64_t) * (size_t)nv), *size = malloc(sizeof(int64_t) * (size_t)nv), peak = 0;
  for (int v = 0; v < nv; v++) first[v] = last[v] = -1;
  for (int i = 0; i < nn; i++) {
    first[g->nodes[i].outputs[0]] = last[g->nodes[i].outputs[0]] = i;
    for (int k = 0; k < g->nodes[i].n_inputs; k++)
      if (first[g->nodes[i].inputs[k]] >= 0) last[g->nodes[i].inputs[k]] = i;
  }
  for (int i = 0; i < g->n_outputs; i++)
    if (first[g->outputs[i]] >= 0) last[g->outputs[i]] = nn;
  for (int v = 0; v < nv; v++)
    if (first[v] >= 0) {
      size[v] = (bytes[v] + 63) & ~(int64_t)63;
      order[n_live++] = v;
    }
  for (int i = 1; i < n_live; i++)
    for (int j = i; j > 0 && size[order[j - 1]] < size[order[j]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  for (int i = 0; i < n_live; i++) {
    int v = order[i];
    int64_t o = 0;
    for (int moved = 1; moved;) {
      moved = 0;
      for (int j = 0; j < i; j++) {
        int u = order[j];
        if (last[u] < first[v] || last[v] < first[u]) continue;
        if (o < off[u] + size[u] && off[u] < o + size[v]) {
          o = off[u] + size[u];
          moved = 1;
        }
      }
    }
    off[v] = o;
    if (o + size[v] > peak) peak = o + size[v];
  }
  free(first);
  free(last);
  free(order);
  free(off);
  free(size);
  return peak;
}

static void test_graphs(void) {
  for (int trial = 0; trial < 60; trial++) {
    int n = 1 + (int)rnd(trial < 50 ? 40 : 400), *perm;
    alma_graph *g = random_graph(n, &perm);
    const char **want = malloc(sizeof(char *) * (size_t)n);
    ref_toposort(g, want);
    CHECK(alma__graph_toposort(g) == ALMA_OK, "toposort failed: %s", alma_last_error());
    for (int i = 0; i < n; i++) CHECK(!strcmp(g->nodes[i].name, want[i]), "trial %d: position %d is %s, the reference says %s", trial, i, g->nodes[i].name, want[i]);
    alma_infer_result r = {.n_values = g->n_values};
    r.info = calloc((size_t)g->n_values, sizeof *r.info);
    int64_t *bytes = malloc(sizeof(int64_t) * (size_t)g->n_values);
    for (int v = 0; v < g->n_values; v++) {
      r.info[v].dtype = ALMA_DTYPE_FLOAT32;
      r.info[v].rank = 1;
      r.info[v].dims[0] = 1 + rnd(trial % 3 ? 300 : 4); /* many equal sizes in every third trial */
      bytes[v] = r.info[v].dims[0] * 4;
    }
    int64_t got = alma__memory_plan_peak(g, &r), ref = ref_plan(g, bytes);
    CHECK(got == ref, "trial %d (%d nodes): plan peak %lld, reference %lld", trial, n, (long long)got, (long long)ref);
    free(r.info);
    free(bytes);
    free(want);
    free(perm);
    alma__graph_free(g);
  }
  /* a cycle is still named */
  alma_graph *g = alma__graph_new(NULL);
  int a = alma__graph_add_value(g, "a"), b = alma__graph_add_value(g, "b");
  alma__graph_add_node(g, "Relu", "", "first", &b, 1, &a, 1);
  alma__graph_add_node(g, "Relu", "", "second", &a, 1, &b, 1);
  CHECK(alma__graph_toposort(g) == ALMA_ERR_INVALID_MODEL && strstr(alma_last_error(), "cycle through node 'first'"),
        "cycle: %s", alma_last_error());
  alma__graph_free(g);
}

static void test_strmap(void) {
  enum { N = 20000 };
  static char keys[N][16];
  alma_strmap m;
  alma__strmap_init(&m);
  for (int i = 0; i < N; i++) {
    snprintf(keys[i], sizeof keys[i], "t%d", i * 7919 % N);
    CHECK(alma__strmap_put(&m, keys[i], i) == 0, "put");
  }
  for (int i = 0; i < N; i++) CHECK(alma__strmap_get(&m, keys[i]) == i, "get %s", keys[i]);
  CHECK(alma__strmap_get(&m, "absent") == -1 && alma__strmap_get(&m, "") == -1, "absent keys");
  alma__strmap_put(&m, keys[5], 99); /* the newest definition wins */
  CHECK(alma__strmap_get(&m, keys[5]) == 99 && m.n == N, "overwrite: %d, n %zu", alma__strmap_get(&m, keys[5]), m.n);
  alma__strmap_free(&m);
  CHECK(alma__strmap_get(&m, keys[0]) == -1, "freed map is empty");
}

static void test_numel(void) {
  int64_t big[3] = {(int64_t)1 << 32, (int64_t)1 << 32, 16}, zero_after[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 0};
  int64_t unknown[2] = {-1, 5}, two_unknown[2] = {-1, -1}, ok[3] = {2, 3, 4};
  CHECK(alma__numel(3, big) == INT64_MAX, "overflow saturates");
  CHECK(alma__numel(3, zero_after) == 0, "a zero dim wins over an overflow");
  CHECK(alma__numel(2, unknown) == -1 && alma__numel(2, two_unknown) == -1, "unknown dims give -1");
  CHECK(alma__numel(3, ok) == 24 && alma__numel(0, ok) == 1, "plain products");
}

static void expect_escape(const char *in, size_t len, const char *want) {
  char out[256];
  alma__escape_text(in, len, out, sizeof out);
  CHECK(!strcmp(out, want), "escape of %zu bytes: got '%s', want '%s'", len, out, want);
  CHECK(alma__text_is_safe(in, len) == !strcmp(in, want) || len != strlen(in), "is_safe disagrees for '%s'", want);
}

static void test_text(void) {
  expect_escape("plain name/0:1", 14, "plain name/0:1");
  expect_escape("a\x1b[31mb", 7, "a\\x1B[31mb");
  expect_escape("\r\n\t\x07\x7f", 5, "\\r\\n\\t\\x07\\x7F");
  expect_escape("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"); /* é € 😀 */
  expect_escape("\xc2\x85", 2, "\\x85");                        /* C1 control NEL */
  expect_escape("\xff\xfe", 2, "\\xFF\\xFE");                   /* never UTF-8 */
  expect_escape("\xc0\xaf", 2, "\\xC0\\xAF");                   /* overlong '/' */
  expect_escape("\xe0\x80\xaf", 3, "\\xE0\\x80\\xAF");          /* overlong, 3 bytes */
  expect_escape("\xed\xa0\x80", 3, "\\xED\\xA0\\x80");          /* surrogate */
  expect_escape("\xf4\x90\x80\x80", 4, "\\xF4\\x90\\x80\\x80"); /* past U+10FFFF */
  expect_escape("ab\xe2\x82", 4, "ab\\xE2\\x82");               /* cut sequence */
  char small[8];
  size_t n = alma__escape_text("abc\x1b", 4, small, 6); /* "abc" fits, "\x1B" does not: not cut inside it */
  CHECK(n == 3 && !strcmp(small, "abc"), "truncation at a whole escape: '%s'", small);
  char fixed[64];
  alma__utf8_fix("y\xff\xc3(\x80\n", 6, fixed, sizeof fixed);
  CHECK(!strcmp(fixed, "y\xef\xbf\xbd\xef\xbf\xbd(\xef\xbf\xbd\n"), "utf8_fix: '%s'", fixed);
  const char *s = "safe";
  CHECK(alma__safe(s) == s, "alma__safe copies a safe string");
  CHECK(!strcmp(alma__safe("x\ny"), "x\\ny"), "alma__safe escapes");
  char *doc = strdup("{\"n\": \"\xff\"}");
  doc = alma__utf8_fix_owned(doc);
  CHECK(doc && !strcmp(doc, "{\"n\": \"\xef\xbf\xbd\"}"), "utf8_fix_owned");
  free(doc);
  /* error messages are stored escaped */
  alma__errorf(ALMA_ERR_INVALID_MODEL, "node '%s'", "a\x1b]0;t\x07\xff");
  CHECK(!strcmp(alma_last_error(), "node 'a\\x1B]0;t\\x07\\xFF'"), "error message: '%s'", alma_last_error());
}

int main(void) {
  test_graphs();
  test_strmap();
  test_numel();
  test_text();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("loader units: all checks passed\n");
  return 0;
}
