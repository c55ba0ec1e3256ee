/* The build cache: keys and staleness (model, shapes, options changed -> rebuilt), hits that skip
 * the passes, corrupted and half-written entries rebuilt and never loaded, lean cache and clean,
 * concurrent processes on one cache, and the CSV report parsed back. ALMA_TEST_NEEDS_MODELS:
 * argv[1] holds linear.onnx and linear_b.onnx (tests/bench/make_model.py). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "bench/bench.h"
#include "cache/cache.h"

static const char *data_dir;
static char linear[512], linear_b[512];

/* A fresh directory per test, removed at the end. */
static int setup(void **state) {
  char *d = malloc(512);
  snprintf(d, 512, "%s/alma-cache-test-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(d)) return -1;
  *state = d;
  return 0;
}
static int teardown(void **state) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", (char *)*state);
  if (system(cmd) != 0) return -1;
  free(*state);
  return 0;
}

static void copy_file(const char *from, const char *to) {
  uint8_t *b;
  size_t n;
  assert_int_equal(alma__read_file(from, &b, &n), ALMA_OK);
  FILE *f = fopen(to, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, n, f), n);
  fclose(f);
  free(b);
}

static void cfg_fast(alma_config *c, const char *cache_dir) {
  alma_config_init(c);
  c->n_samples = 2;
  c->min_time_s = 0;
  c->warmup = 1;
  c->warmup_s = 0;
  c->timeout_s = 60;
  c->verbose = 0;
  snprintf(c->cache_dir, sizeof c->cache_dir, "%s", cache_dir);
}

/* Runs one conversion; returns the results (one result, ok). */
static alma_results *run1(const char *model, const alma_config *c, const char *conv) {
  alma_results *r = NULL;
  alma_status st = alma_benchmark_model(model, c, &conv, 1, NULL, &r);
  if (st != ALMA_OK) fail_msg("%s on %s: %s", conv, model, alma_last_error());
  assert_int_equal(alma_results_count(r), 1);
  return r;
}

static const alma_cache_info *cinfo(const alma_results *r) { return alma_result_cache(alma_results_get(r, 0)); }

/* Runs and checks the cache status (and that the reason contains `why`, when given). */
static void expect(const char *model, const alma_config *c, const char *conv, const char *status, const char *why) {
  alma_results *r = run1(model, c, conv);
  const alma_cache_info *ci = cinfo(r);
  if (strcmp(ci->status, status) || (why && !strstr(ci->reason, why)))
    fail_msg("%s: cache %s (%s), expected %s (%s)", conv, ci->status, ci->reason, status, why ? why : "");
  const alma_result *x = alma_results_get(r, 0);
  assert_int_equal(alma_result_status_code(x), ALMA_RESULT_OK);
  /* int8 differs from float beyond the default tolerance: only the others are checked */
  if (strcmp(alma_result_mode(x), "build") && !strstr(conv, "INT8")) assert_true(alma_result_check(x)->passed);
  alma_results_free(r);
}

static void test_hit_skips_passes(void **state) {
  const char *dir = *state;
  alma_config c;
  cfg_fast(&c, dir);
  alma_results *r = run1(linear, &c, "FOLD+EAGER");
  const alma_cache_info *ci = cinfo(r);
  assert_string_equal(ci->status, "built");
  assert_string_equal(ci->reason, "no build in the cache");
  assert_int_equal(strlen(ci->key), 64);
  assert_true(strstr(ci->build, "linear-FOLD+EAGER-") == ci->build);
  assert_true(ci->graph_bytes > 0);
  char graph[1024], build[256];
  snprintf(graph, sizeof graph, "%s/graph.onnx", ci->dir);
  snprintf(build, sizeof build, "%s", ci->build);
  alma_results_free(r);
  /* The stored graph is the converted one: FOLD removed the Identity and the constant Mul. */
  alma_model *orig, *conv;
  const alma_model_summary *so, *sc;
  assert_int_equal(alma_model_load(linear, &orig), ALMA_OK);
  assert_int_equal(alma_model_load(graph, &conv), ALMA_OK);
  assert_int_equal(alma_model_summarize(orig, &so), ALMA_OK);
  assert_int_equal(alma_model_summarize(conv, &sc), ALMA_OK);
  assert_int_equal(so->n_nodes, 7);
  assert_int_equal(sc->n_nodes, 5);
  alma_model_free(orig);
  alma_model_free(conv);
  /* Second run: a hit on the same build, outputs still right (checked against EAGER). */
  r = run1(linear, &c, "FOLD+EAGER");
  ci = cinfo(r);
  assert_string_equal(ci->status, "hit");
  assert_string_equal(ci->build, build);
  assert_int_equal(ci->stale, 0);
  assert_true(isfinite(ci->build_s));
  assert_true(alma_result_check(alma_results_get(r, 0))->passed);
  /* The JSON carries it. */
  char *json;
  assert_int_equal(alma_results_to_json(r, 0, &json), ALMA_OK);
  cJSON *j = cJSON_Parse(json);
  const cJSON *cj = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "results"), 0), "cache");
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(cj, "status")->valuestring, "hit");
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(cj, "build")->valuestring, build);
  cJSON_Delete(j);
  free(json);
  alma_results_free(r);
  /* Cache off: no cache info at all. */
  c.cache = 0;
  r = run1(linear, &c, "FOLD+EAGER");
  assert_string_equal(cinfo(r)->status, "off");
  alma_results_free(r);
}

static void test_staleness(void **state) {
  const char *dir = *state;
  char model[600];
  snprintf(model, sizeof model, "%s/m.onnx", dir);
  alma_config c;
  cfg_fast(&c, dir);
  copy_file(linear, model);
  expect(model, &c, "FOLD+EAGER", "built", "no build in the cache");
  expect(model, &c, "FOLD+EAGER", "hit", NULL);
  /* the model changes (other weights, same inputs): stale, rebuilt in place */
  copy_file(linear_b, model);
  expect(model, &c, "FOLD+EAGER", "built", "stale: model hash changed");
  expect(model, &c, "FOLD+EAGER", "hit", NULL);
  /* other input shapes: another build */
  c.batch_size = 3;
  expect(model, &c, "FOLD+EAGER", "built", "no build in the cache");
  expect(model, &c, "FOLD+EAGER", "hit", NULL);
  c.batch_size = 1;
  expect(model, &c, "FOLD+EAGER", "hit", NULL);
  /* an option the build depends on */
  expect(model, &c, "INT8_STATIC+EAGER", "built", NULL);
  expect(model, &c, "INT8_STATIC+EAGER", "hit", NULL);
  assert_int_equal(alma_config_set(&c, "calibrator", "percentile"), ALMA_OK);
  expect(model, &c, "INT8_STATIC+EAGER", "built", "stale: options changed");
  /* ... one it does not (threads: plans are compiled anew from the cached graph) */
  c.threads = 1;
  expect(model, &c, "INT8_STATIC+EAGER", "hit", NULL);
  /* rebuild never: a stale build is used, and the result says so */
  assert_int_equal(alma_config_set(&c, "calibrator", "entropy"), ALMA_OK);
  assert_int_equal(alma_config_set(&c, "rebuild", "never"), ALMA_OK);
  alma_results *r = run1(model, &c, "INT8_STATIC+EAGER");
  assert_string_equal(cinfo(r)->status, "hit");
  assert_int_equal(cinfo(r)->stale, 1);
  assert_non_null(strstr(cinfo(r)->reason, "rebuild never"));
  alma_results_free(r);
  /* rebuild always: built even when fresh */
  assert_int_equal(alma_config_set(&c, "rebuild", "always"), ALMA_OK);
  expect(model, &c, "FOLD+EAGER", "built", "rebuild always");
  assert_int_equal(alma_config_set(&c, "rebuild", "if_needed"), ALMA_OK);
  expect(model, &c, "FOLD+EAGER", "hit", NULL);
  assert_int_equal(alma_config_set(&c, "rebuild", "sometimes"), ALMA_ERR_INVALID_ARG);
}

/* Key parts -> name and key, directly. */
static void test_keys(void **state) {
  (void)state;
  alma__cache_key a, b;
  alma__cache_key_init(&a);
  snprintf(a.model_path, sizeof a.model_path, "/m/model.onnx");
  snprintf(a.model_hash, sizeof a.model_hash, "%064d", 1);
  snprintf(a.conversion, sizeof a.conversion, "FOLD+EAGER");
  snprintf(a.inputs, sizeof a.inputs, "x:float32:[1,16]");
  b = a;
  alma__cache_key_finish(&a);
  alma__cache_key_finish(&b);
  assert_string_equal(a.name, b.name);
  assert_string_equal(a.key, b.key);
  assert_true(strstr(a.name, "model-FOLD+EAGER-") == a.name);
  /* the model's content: same name (rebuilt in place), another key */
  snprintf(b.model_hash, sizeof b.model_hash, "%064d", 2);
  alma__cache_key_finish(&b);
  assert_string_equal(a.name, b.name);
  assert_string_not_equal(a.key, b.key);
  /* options, alma itself: same */
  b = a;
  snprintf(b.options, sizeof b.options, "calibrator=entropy");
  alma__cache_key_finish(&b);
  assert_string_equal(a.name, b.name);
  assert_string_not_equal(a.key, b.key);
  b = a;
  snprintf(b.alma_version, sizeof b.alma_version, "9.9.9");
  alma__cache_key_finish(&b);
  assert_string_not_equal(a.key, b.key);
  /* shapes, the model's path: another build */
  b = a;
  snprintf(b.inputs, sizeof b.inputs, "x:float32:[8,16]");
  alma__cache_key_finish(&b);
  assert_string_not_equal(a.name, b.name);
  b = a;
  snprintf(b.model_path, sizeof b.model_path, "/other/model.onnx");
  alma__cache_key_finish(&b);
  assert_string_not_equal(a.name, b.name);
  /* names are safe as directory names */
  b = a;
  snprintf(b.model_path, sizeof b.model_path, "/x/we ird:name.onnx");
  alma__cache_key_finish(&b);
  assert_null(strpbrk(b.name, " :/"));
}

static char *entry_file(const char *dir, const char *build, const char *file, char *buf, size_t n) {
  snprintf(buf, n, "%s/builds/%s/%s", dir, build, file);
  return buf;
}

/* Each damage is detected: the run rebuilds (reason "corrupt..."), the next one hits again. */
static void test_corrupt(void **state) {
  const char *dir = *state;
  alma_config c;
  cfg_fast(&c, dir);
  alma_results *r = run1(linear, &c, "FOLD+EAGER");
  char build[256], p[1024];
  snprintf(build, sizeof build, "%s", cinfo(r)->build);
  alma_results_free(r);
  struct stat sb;
  /* 1. graph truncated */
  entry_file(dir, build, "graph.onnx", p, sizeof p);
  assert_int_equal(stat(p, &sb), 0);
  assert_int_equal(truncate(p, sb.st_size / 2), 0);
  expect(linear, &c, "FOLD+EAGER", "built", "corrupt: graph file is");
  expect(linear, &c, "FOLD+EAGER", "hit", NULL);
  /* 2. graph bytes flipped, same size: only the checksum tells; never loaded */
  FILE *f = fopen(p, "r+b");
  assert_non_null(f);
  fseek(f, 40, SEEK_SET);
  int ch = fgetc(f);
  fseek(f, 40, SEEK_SET);
  fputc(ch ^ 0x5a, f);
  fclose(f);
  expect(linear, &c, "FOLD+EAGER", "built", "corrupt: graph checksum mismatch");
  expect(linear, &c, "FOLD+EAGER", "hit", NULL);
  /* 3. state file half-written (killed mid-write without the atomic rename) */
  entry_file(dir, build, "state.json", p, sizeof p);
  assert_int_equal(stat(p, &sb), 0);
  assert_int_equal(truncate(p, sb.st_size / 3), 0);
  expect(linear, &c, "FOLD+EAGER", "built", "corrupt: state file is not JSON");
  expect(linear, &c, "FOLD+EAGER", "hit", NULL);
  /* 4. state from another cache format */
  f = fopen(p, "wb");
  fputs("{\"alma_cache_format\": 99, \"status\": \"ok\", \"key\": \"x\", \"key_parts\": {}}", f);
  fclose(f);
  expect(linear, &c, "FOLD+EAGER", "built", "cache format 99");
  /* 5. graph file gone */
  entry_file(dir, build, "graph.onnx", p, sizeof p);
  assert_int_equal(unlink(p), 0);
  expect(linear, &c, "FOLD+EAGER", "built", "corrupt: graph file missing");
  /* 6. a stray temporary file (a writer killed before its rename) is ignored, then cleaned */
  entry_file(dir, build, "graph.onnx.tmp.999999999.1", p, sizeof p);
  f = fopen(p, "wb");
  fputs("half", f);
  fclose(f);
  expect(linear, &c, "FOLD+EAGER", "hit", NULL);
  alma__cache *cache;
  assert_int_equal(alma__cache_open(dir, &cache), ALMA_OK);
  int g, t, k;
  assert_int_equal(alma__cache_clean(cache, &g, &t, &k), ALMA_OK);
  assert_int_equal(t, 1);
  assert_int_equal(g, 1);
  assert_int_not_equal(stat(p, &sb), 0);
  alma__cache_close(cache);
  expect(linear, &c, "FOLD+EAGER", "built", "no graph stored (cleaned");
  expect(linear, &c, "FOLD+EAGER", "hit", NULL);
}

static void test_lean_build_only_delete(void **state) {
  const char *dir = *state;
  alma_config c;
  cfg_fast(&c, dir);
  c.lean_cache = 1;
  alma_results *r = run1(linear, &c, "FOLD+EAGER");
  char build[256], p[1024];
  snprintf(build, sizeof build, "%s", cinfo(r)->build);
  assert_string_equal(cinfo(r)->status, "built");
  assert_int_equal(cinfo(r)->graph_bytes, -1);
  alma_results_free(r);
  struct stat sb;
  assert_int_not_equal(stat(entry_file(dir, build, "graph.onnx", p, sizeof p), &sb), 0);
  assert_int_equal(stat(entry_file(dir, build, "state.json", p, sizeof p), &sb), 0);
  assert_int_equal(stat(entry_file(dir, build, "build.log", p, sizeof p), &sb), 0);
  /* nothing to load: built again (lean), then a normal run stores the graph, a lean hit drops it */
  expect(linear, &c, "FOLD+EAGER", "built", "no graph stored (lean cache)");
  c.lean_cache = 0;
  c.build_only = 1;
  expect(linear, &c, "FOLD+EAGER", "built", NULL);
  assert_int_equal(stat(entry_file(dir, build, "graph.onnx", p, sizeof p), &sb), 0);
  c.build_only = 0;
  c.lean_cache = 1;
  expect(linear, &c, "FOLD+EAGER", "hit", NULL);
  assert_int_not_equal(stat(entry_file(dir, build, "graph.onnx", p, sizeof p), &sb), 0);
  c.lean_cache = 0;
  /* build_only: no timing */
  c.build_only = 1;
  r = run1(linear, &c, "EAGER");
  const alma_result *x = alma_results_get(r, 0);
  assert_string_equal(alma_result_mode(x), "build");
  assert_int_equal(alma_result_latency(x)->n, 0);
  assert_string_equal(cinfo(r)->status, "built");
  alma_results_free(r);
  /* list, find by prefix, delete */
  alma__cache *cache;
  assert_int_equal(alma__cache_open(dir, &cache), ALMA_OK);
  alma__cache_entry *e;
  int n;
  assert_int_equal(alma__cache_list(cache, &e, &n), ALMA_OK);
  assert_int_equal(n, 2);
  assert_string_equal(e[1].name, build);
  assert_non_null(e[1].state);
  assert_true(e[1].n_bench >= 3);
  alma__cache_entries_free(e, n);
  char full[256];
  assert_int_equal(alma__cache_find(cache, "linear-", full, sizeof full), ALMA_ERR_INVALID_ARG);  /* ambiguous */
  assert_int_equal(alma__cache_find(cache, "nope", full, sizeof full), ALMA_ERR_NOT_FOUND);
  assert_int_equal(alma__cache_find(cache, "../x", full, sizeof full), ALMA_ERR_INVALID_ARG);
  assert_int_equal(alma__cache_find(cache, "linear-FOLD", full, sizeof full), ALMA_OK);
  assert_string_equal(full, build);
  assert_int_equal(alma__cache_delete(cache, "linear-FOLD"), ALMA_OK);
  assert_int_equal(alma__cache_list(cache, &e, &n), ALMA_OK);
  assert_int_equal(n, 1);
  alma__cache_entries_free(e, n);
  assert_int_equal(alma__cache_delete_all(cache, &n), ALMA_OK);
  assert_int_equal(n, 1);
  alma__cache_close(cache);
}

/* Writers racing on the same entries through the cache's own API, with big graphs so that a torn
 * write would show: every committed state must describe a whole graph whose checksum matches. */
static void stress_child(const char *dir, int id, int rounds) {
  alma__cache *cache;
  if (alma__cache_open(dir, &cache) != ALMA_OK) _exit(10);
  size_t n = 1 << 20;
  uint8_t *buf = malloc(n);
  for (int round = 0; round < rounds; round++) {
    alma__cache_key k;
    alma__cache_key_init(&k);
    snprintf(k.model_path, sizeof k.model_path, "/stress/model.onnx");
    snprintf(k.model_hash, sizeof k.model_hash, "%064d", round % 2);  /* the model changes: stale */
    snprintf(k.conversion, sizeof k.conversion, "%s", round % 3 ? "EAGER" : "FOLD+EAGER");
    snprintf(k.inputs, sizeof k.inputs, "x:float32:[1,4]");
    alma__cache_key_finish(&k);
    alma__cache_plan p;
    if (alma__cache_plan_build(cache, &k, round % 2 ? ALMA__REBUILD_ALWAYS : ALMA__REBUILD_IF_NEEDED, 0, &p) != ALMA_OK)
      _exit(11);
    if (p.use) {
      uint8_t *g;
      size_t gn;
      /* a reader may lose a race to a newer writer (checksum then differs); it must never get a
       * torn file under a matching checksum */
      if (alma__cache_read_graph(&p, &g, &gn) == ALMA_OK) {
        for (size_t i = 1; i < gn; i++)
          if (g[i] != g[0]) _exit(12);
        free(g);
      }
      continue;
    }
    memset(buf, id * 16 + round, n);
    FILE *f = fopen(p.tmp_graph, "wb");
    if (!f || fwrite(buf, 1, n, f) != n || fclose(f) != 0) _exit(13);
    int64_t gb;
    if (alma__cache_commit(cache, &k, &p, 1, 1, 0.001, NULL, "stress", &gb) != ALMA_OK || gb != (int64_t)n) _exit(14);
    char rec[64];
    snprintf(rec, sizeof rec, "{\"result\": {\"status\": \"ok\", \"child\": %d}}", id);
    if (alma__cache_record_benchmark(cache, &k, rec) != ALMA_OK) _exit(15);
  }
  free(buf);
  alma__cache_close(cache);
  _exit(0);
}

static void test_concurrent_processes(void **state) {
  const char *dir = *state;
  enum { N = 4, ROUNDS = 12 };
  pid_t pids[N];
  for (int i = 0; i < N; i++) {
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0) stress_child(dir, i, ROUNDS);
  }
  for (int i = 0; i < N; i++) {
    int ws;
    assert_int_equal(waitpid(pids[i], &ws, 0), pids[i]);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) fail_msg("child %d: status %d", i, ws);
  }
  /* Every entry: a readable state whose graph matches its checksum; no temporary files left. */
  alma__cache *cache;
  assert_int_equal(alma__cache_open(dir, &cache), ALMA_OK);
  alma__cache_entry *e;
  int n, benches = 0;
  assert_int_equal(alma__cache_list(cache, &e, &n), ALMA_OK);
  assert_int_equal(n, 2);
  for (int i = 0; i < n; i++) {
    if (!e[i].state) fail_msg("%s: %s", e[i].name, e[i].problem);
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(e[i].state, "graph");
    alma__cache_plan p;
    memset(&p, 0, sizeof p);
    snprintf(p.graph_path, sizeof p.graph_path, "%s/graph.onnx", e[i].dir);
    snprintf(p.graph_sha256, sizeof p.graph_sha256, "%s", cJSON_GetObjectItemCaseSensitive(g, "sha256")->valuestring);
    p.graph_bytes = (int64_t)cJSON_GetObjectItemCaseSensitive(g, "bytes")->valuedouble;
    uint8_t *bytes;
    size_t nb;
    if (alma__cache_read_graph(&p, &bytes, &nb) != ALMA_OK) fail_msg("%s: %s", e[i].name, alma_last_error());
    free(bytes);
    DIR *d = opendir(e[i].dir);
    struct dirent *de;
    while ((de = readdir(d))) assert_null(strstr(de->d_name, ".tmp."));
    closedir(d);
    benches += e[i].n_bench;
  }
  alma__cache_entries_free(e, n);
  /* Each writing round left one record: at least the first writer per entry and key wrote. */
  assert_true(benches >= 2 && benches <= N * ROUNDS);
  alma__cache_close(cache);
}

/* Two processes benchmarking through one cache at once: both finish with right outputs, and the
 * cache is whole afterwards. */
static void test_concurrent_benchmarks(void **state) {
  const char *dir = *state;
  pid_t pids[2];
  for (int i = 0; i < 2; i++) {
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0) {
      alma_config c;
      cfg_fast(&c, dir);
      const char *convs[] = {"FOLD+EAGER", "EAGER"};
      for (int k = 0; k < 3; k++) {
        if (k == 1) snprintf(c.rebuild, sizeof c.rebuild, "always");
        else snprintf(c.rebuild, sizeof c.rebuild, "if_needed");
        alma_results *r = NULL;
        if (alma_benchmark_model(linear, &c, convs, 2, NULL, &r) != ALMA_OK) _exit(20);
        for (int j = 0; j < 2; j++)
          if (!alma_result_check(alma_results_get(r, j))->passed) _exit(21);
        alma_results_free(r);
      }
      _exit(0);
    }
  }
  for (int i = 0; i < 2; i++) {
    int ws;
    assert_int_equal(waitpid(pids[i], &ws, 0), pids[i]);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) fail_msg("benchmark process %d: status %d", i, ws);
  }
  alma__cache *cache;
  assert_int_equal(alma__cache_open(dir, &cache), ALMA_OK);
  alma__cache_entry *e;
  int n;
  assert_int_equal(alma__cache_list(cache, &e, &n), ALMA_OK);
  assert_int_equal(n, 2);
  for (int i = 0; i < n; i++) {
    assert_non_null(e[i].state);
    assert_true(e[i].has_graph);
    assert_int_equal(e[i].n_bench, 6);
  }
  alma__cache_entries_free(e, n);
  alma__cache_close(cache);
  /* and the next run hits */
  alma_config c;
  cfg_fast(&c, dir);
  expect(linear, &c, "FOLD+EAGER", "hit", NULL);
}

/* ---- the CSV report, parsed back ---------------------------------------------------------------- */
static int csv_record(const char **p, char fields[64][512]) {
  int n = 0;
  size_t len = 0;
  int quoted = 0;
  if (!**p) return 0;
  fields[0][0] = 0;
  for (;; (*p)++) {
    char c = **p;
    if (quoted) {
      if (c == '"' && (*p)[1] == '"') {
        fields[n][len++] = '"';
        (*p)++;
      } else if (c == '"') {
        quoted = 0;
      } else if (len < 511) {
        fields[n][len++] = c;
      }
    } else if (c == '"') {
      quoted = 1;
    } else if (c == ',' || c == '\r' || c == '\n' || c == 0) {
      fields[n][len] = 0;
      n++;
      len = 0;
      if (c == ',') continue;
      if (c == '\r') (*p)++;
      if (**p == '\n') (*p)++;
      return n;
    } else if (len < 511) {
      fields[n][len++] = c;
    }
  }
}

static int col(char head[64][512], int nh, const char *name) {
  for (int i = 0; i < nh; i++)
    if (!strcmp(head[i], name)) return i;
  fail_msg("no column %s", name);
  return -1;
}

static void test_report_csv(void **state) {
  const char *dir = *state;
  alma_config c;
  cfg_fast(&c, dir);
  double tp[3];
  alma_results *r = run1(linear, &c, "FOLD+EAGER");
  tp[0] = alma_result_throughput(alma_results_get(r, 0));
  alma_results_free(r);
  r = run1(linear, &c, "FOLD+EAGER");
  tp[1] = alma_result_throughput(alma_results_get(r, 0));
  alma_results_free(r);
  /* a throughput run: one more row per configuration */
  c.throughput = 1;
  c.duration_s = 0.05;
  snprintf(c.instances, sizeof c.instances, "1,2");
  snprintf(c.workers, sizeof c.workers, "1");
  r = run1(linear, &c, "EAGER");
  tp[2] = alma_result_throughput(alma_results_get(r, 0));
  assert_int_equal(alma_result_n_scaling(alma_results_get(r, 0)), 2);
  double peak2 = alma_result_scaling(alma_results_get(r, 0), 1)->throughput_peak;
  alma_results_free(r);

  alma__cache *cache;
  assert_int_equal(alma__cache_open(dir, &cache), ALMA_OK);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(alma__cache_report_csv(cache, f), ALMA_OK);
  fclose(f);
  alma__cache_close(cache);
  static char head[64][512], row[64][512];
  const char *p = buf;
  int nh = csv_record(&p, head);
  assert_int_equal(nh, 27);
  assert_string_equal(head[0], "build");
  int cb = col(head, nh, "build"), cc = col(head, nh, "conversion"), cs = col(head, nh, "cache");
  int cm = col(head, nh, "mode"), ci = col(head, nh, "instances"), ct = col(head, nh, "throughput_samples_per_s");
  int cpk = col(head, nh, "throughput_peak_samples_per_s"), cst = col(head, nh, "build_status");
  int cin = col(head, nh, "inputs"), cp50 = col(head, nh, "latency_p50_ms");
  int rows = 0, fold = 0, eager = 0, thr = 0;
  double fold_tp[2];
  const char *fold_cache[2];
  while (*p) {
    int n = csv_record(&p, row);
    assert_int_equal(n, nh);
    rows++;
    assert_string_equal(row[cst], "ok");
    assert_string_equal(row[cin], "x:float32:[1,16]");  /* quoted in the file: it has a comma */
    assert_true(strtod(row[cp50], NULL) > 0);
    if (!strcmp(row[cc], "FOLD+EAGER")) {
      assert_true(strstr(row[cb], "linear-FOLD+EAGER-") == row[cb]);
      assert_string_equal(row[cm], "latency");
      fold_tp[fold] = strtod(row[ct], NULL);
      fold_cache[fold] = !strcmp(row[cs], "built") ? "built" : !strcmp(row[cs], "hit") ? "hit" : "?";
      fold++;
    } else {
      assert_string_equal(row[cc], "EAGER");
      if (!strcmp(row[cm], "throughput")) {
        thr++;
        assert_int_equal(atoi(row[ci]), thr);
        assert_true(strtod(row[cpk], NULL) > 0);
        if (thr == 2) assert_true(fabs(strtod(row[cpk], NULL) - peak2) <= 1e-9 * peak2);
      } else {
        eager++;
        assert_true(fabs(strtod(row[ct], NULL) - tp[2]) <= 1e-9 * tp[2]);
      }
    }
  }
  assert_int_equal(rows, 5);
  assert_int_equal(fold, 2);
  assert_int_equal(eager, 1);
  assert_int_equal(thr, 2);
  /* records in time order: the build, then the hit, with their own throughputs */
  assert_string_equal(fold_cache[0], "built");
  assert_string_equal(fold_cache[1], "hit");
  assert_true(fabs(fold_tp[0] - tp[0]) <= 1e-9 * tp[0] && fabs(fold_tp[1] - tp[1]) <= 1e-9 * tp[1]);
  free(buf);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  data_dir = argv[1];
  snprintf(linear, sizeof linear, "%s/linear.onnx", data_dir);
  snprintf(linear_b, sizeof linear_b, "%s/linear_b.onnx", data_dir);
  unsetenv("ALMA_CACHE_DIR");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_keys),
      cmocka_unit_test_setup_teardown(test_hit_skips_passes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_staleness, setup, teardown),
      cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lean_build_only_delete, setup, teardown),
      cmocka_unit_test_setup_teardown(test_concurrent_processes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_concurrent_benchmarks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_report_csv, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
