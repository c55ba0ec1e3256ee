/* The per-node profile (config `profile`, alma bench --profile) end to end on profile.onnx, written
 * by make_model.py: ALMA_TEST_NEEDS_MODELS. Every node of the graph is in the profile once (a fused
 * group once, on its first node, with its size), the times are nested in the batches' (the nodes'
 * sum is within the batch time), the dominant MatMul (30x the work of anything else) comes first,
 * the op-type table adds up, the result carries the profile through the child's record, the JSON
 * and back, and without `profile` there is none; also through passes that rewrite the graph (int8
 * clusters) and on a graph with an If (the shared executor). argv[1]: the directory holding
 * profile.onnx, profile_if.onnx and profile_conv.onnx. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "bench/bench.h"
#include "graph/model.h"
#include "runtimes/session.h"

static char model[512], if_model[512], conv_model[512];

static void fast(alma_config *c) {
  alma_config_init(c);
  /* more rows than the few-row path takes (gemm_packed.h: up to 16 rows a MatMul on constant
   * weights runs on EAGER's packed kernel, outside the runtimes' fused groups this test profiles) */
  c->n_samples = 32;
  c->batch_size = 32;
  c->min_time_s = 0.05;
  c->warmup = 2;
  c->warmup_s = 0;
  c->timeout_s = 120;
  c->cache = 0;
  c->profile = 20;
  c->profile_time_s = 0.1;
}

/* The graph's node names, as the session's runtime sees them (no passes in these conversions). */
static int graph_nodes(const char ***names) {
  alma_model *m;
  assert_int_equal(alma_model_load(model, &m), ALMA_OK);
  int n = m->graph->n_nodes;
  *names = calloc((size_t)n, sizeof **names);
  for (int i = 0; i < n; i++) (*names)[i] = strdup(m->graph->nodes[i].name);
  alma_model_free(m);
  return n;
}

static void free_names(const char **names, int n) {
  for (int i = 0; i < n; i++) free((char *)names[i]);
  free(names);
}

/* What every available profile must satisfy; `fused`: the runtime runs MatMul+Add+Relu as one. */
static void check_profile(const alma_result *x, const char *runtime, int fused) {
  const alma_profile *p = alma_result_profile(x);
  assert_non_null(p);
  assert_null(p->unavailable);
  assert_string_equal(p->runtime, runtime);
  assert_true(p->batches >= 20);        /* profile = 20 */
  assert_true(p->seconds >= 0.1);       /* profile_time_s = 0.1 */
  assert_true(p->batch_ms > 0 && isfinite(p->overhead));
  const char **names;
  int nn = graph_nodes(&names);
  assert_int_equal(nn, 5);
  /* every node once: in an entry of its own, or as a member of a group named by its first node */
  assert_int_equal(p->n_nodes, fused ? nn - 2 : nn);
  int covered = 0;
  double sum = 0;
  for (int i = 0; i < p->n_nodes; i++) {
    const alma_profile_node *e = &p->nodes[i];
    int found = 0;
    for (int k = 0; k < nn; k++) found += !strcmp(names[k], e->name);
    assert_int_equal(found, 1);
    for (int j = 0; j < i; j++) assert_string_not_equal(p->nodes[j].name, e->name);
    assert_true(e->members >= 1);
    covered += e->members;
    assert_int_equal(e->runs, p->batches);  /* each node (group) once per batch */
    assert_true(e->ms > 0 && isfinite(e->ms));
    assert_true(fabs(e->share - e->ms / p->batch_ms) < 1e-9);
    if (i) assert_true(p->nodes[i - 1].ms >= e->ms);  /* slowest first */
    sum += e->ms;
  }
  assert_int_equal(covered, nn);
  assert_true(fabs(sum - p->nodes_ms) < 1e-9 * (1 + sum));
  /* node times are measured inside the batches': their sum cannot exceed the batch time. (How
   * much of it they are, and which node is slowest, depend on the machine's load: a preempted
   * small node can outweigh the big MatMul, so neither is asserted.) */
  assert_true(p->nodes_ms <= p->batch_ms * (1 + 1e-9));
  const alma_profile_node *top = NULL;
  for (int i = 0; i < p->n_nodes; i++)
    if (!strcmp(p->nodes[i].name, "big_matmul")) top = &p->nodes[i];
  assert_non_null(top);
  if (fused) {
    assert_string_equal(top->op_type, "MatMul+Add+Relu");
    assert_int_equal(top->members, 3);
    assert_string_equal(top->placement, runtime);
  } else {
    assert_string_equal(top->op_type, "MatMul");
    assert_int_equal(top->members, 1);
  }
  /* the op-type table: every entry counted once, times summed, slowest first */
  int entries = 0, nodes = 0;
  double ops_ms = 0;
  for (int i = 0; i < p->n_ops; i++) {
    const alma_profile_op *o = &p->ops[i];
    double want = 0;
    int ne = 0, nm = 0;
    for (int k = 0; k < p->n_nodes; k++)
      if (!strcmp(p->nodes[k].op_type, o->op_type)) {
        want += p->nodes[k].ms;
        ne++;
        nm += p->nodes[k].members;
      }
    assert_int_equal(o->entries, ne);
    assert_int_equal(o->nodes, nm);
    assert_true(fabs(o->ms - want) < 1e-9 * (1 + want));
    if (i) assert_true(p->ops[i - 1].ms >= o->ms);
    entries += o->entries;
    nodes += o->nodes;
    ops_ms += o->ms;
  }
  assert_int_equal(entries, p->n_nodes);
  assert_int_equal(nodes, nn);
  assert_true(fabs(ops_ms - p->nodes_ms) < 1e-9 * (1 + ops_ms));
  if (!fused) { /* two MatMuls in one row */
    int mm = -1;
    for (int i = 0; i < p->n_ops; i++)
      if (!strcmp(p->ops[i].op_type, "MatMul")) mm = i;
    assert_true(mm >= 0);
    assert_int_equal(p->ops[mm].nodes, 2);
  }
  free_names(names, nn);
}

/* For conversions whose passes rewrite the graph (INT8_STATIC adds Q/DQ nodes), and for graphs
 * with subgraphs (run through the shared executor: DNNL's and BLAS's hook mode): every node of
 * the converted graph in exactly one entry, each entry run once per batch, node times within the
 * batch time. The converted graph comes from a session of the same conversion (calibration data
 * changes scales, not nodes). */
static void check_cover(const alma_result *x, const char *path, const char *conversion) {
  const alma_profile *p = alma_result_profile(x);
  assert_non_null(p);
  assert_null(p->unavailable);
  alma_model *m;
  alma_session *s;
  assert_int_equal(alma_model_load(path, &m), ALMA_OK);
  assert_int_equal(alma_session_create(m, conversion, NULL, &s), ALMA_OK);
  const alma_graph *g = alma__session_graph(s);
  int covered = 0;
  int64_t branch_runs = 0;
  double sum = 0;
  for (int i = 0; i < p->n_nodes; i++) {
    const alma_profile_node *e = &p->nodes[i];
    if (i) assert_true(p->nodes[i - 1].ms >= e->ms);
    sum += e->ms;
    if (!strncmp(e->name, "branch/", 7)) {
      /* a node of an If branch compiled for the runtime (profile_if.onnx's If "branch"), named by
       * its path; only the branch a batch took ran */
      assert_true(!strcmp(e->name, "branch/then_branch/then_relu") || !strcmp(e->name, "branch/else_branch/else_neg"));
      assert_true(e->runs >= 1 && e->runs <= p->batches);
      assert_true(e->ms >= 0 && isfinite(e->ms));
      branch_runs += e->runs;
      continue;
    }
    int found = 0;
    for (int k = 0; k < g->n_nodes; k++) found += !strcmp(g->nodes[k].name, e->name);
    assert_int_equal(found, 1);
    for (int j = 0; j < i; j++) assert_string_not_equal(p->nodes[j].name, e->name);
    assert_true(e->members >= 1);
    covered += e->members;
    assert_int_equal(e->runs, p->batches);
    assert_true(e->ms >= 0 && isfinite(e->ms));
  }
  assert_int_equal(covered, g->n_nodes);
  /* the runtimes but EAGER compile the If's branches (session.c): each batch ran one of them */
  if (strstr(path, "profile_if") && strcmp(conversion, "EAGER")) assert_int_equal(branch_runs, p->batches);
  else assert_int_equal(branch_runs, 0);
  assert_true(fabs(sum - p->nodes_ms) < 1e-9 * (1 + sum));
  assert_true(sum > 0 && p->nodes_ms <= p->batch_ms * (1 + 1e-9));
  alma_session_free(s);
  alma_model_free(m);
}

static void test_eager(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  const char *conv[] = {"EAGER"};
  alma_results *r = NULL;
  assert_int_equal(alma_benchmark_model(model, &c, conv, 1, NULL, &r), ALMA_OK);
  const alma_result *x = alma_results_get(r, 0);
  check_profile(x, "EAGER", 0);
  for (int i = 0; i < alma_result_profile(x)->n_nodes; i++)
    assert_string_equal(alma_result_profile(x)->nodes[i].placement, "EAGER");
  /* the timed phase is unchanged by it: its own batches, its own stop rule */
  assert_non_null(strstr(alma_result_stop_reason(x), "n_samples"));
  alma_results_free(r);

  /* in-process: the same, without the child's record in between */
  c.multiprocessing = 0;
  assert_int_equal(alma_benchmark_model(model, &c, conv, 1, NULL, &r), ALMA_OK);
  check_profile(alma_results_get(r, 0), "EAGER", 0);
  alma_results_free(r);
}

/* BLAS and DNNL fuse MatMul+Add(bias)+Relu: one entry on big_matmul. Skipped where not built. */
static void test_fused_runtimes(void **state) {
  (void)state;
  const char *convs[] = {"BLAS", "DNNL"};
  for (int k = 0; k < 2; k++) {
    alma_config c;
    fast(&c);
    c.threads = 1;
    alma_results *r = NULL;
    alma_status st = alma_benchmark_model(model, &c, &convs[k], 1, NULL, &r);
    const alma_result *x = alma_results_get(r, 0);
    assert_non_null(x);
    if (alma_result_status_code(x) == ALMA_RESULT_UNAVAILABLE) {
      printf("# %s not available here: %s\n", convs[k], alma_result_error(x));
      alma_results_free(r);
      continue;
    }
    assert_int_equal(st, ALMA_OK);
    check_profile(x, convs[k], 1);
    alma_results_free(r);
  }
}

/* The result's placement summary (docs/json.md): every node counted once, under the runtime; the
 * If (a node no runtime but EAGER takes) declined for its op type. */
static void check_placement(const alma_result *x, const char *conv) {
  cJSON *o = cJSON_Parse(alma_result_placement(x));
  assert_non_null(o);
  const cJSON *pl = cJSON_GetObjectItemCaseSensitive(o, "placements"), *it;
  int nodes = cJSON_GetObjectItemCaseSensitive(o, "nodes")->valueint, sum = 0;
  cJSON_ArrayForEach(it, pl) sum += it->valueint;
  assert_int_equal(sum, nodes);
  int eager = !strcmp(conv, "EAGER"), found_if = 0;
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(pl, "runtime")->valueint > 0, 1);
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(o, "op_types")) {
    if (strcmp(cJSON_GetObjectItemCaseSensitive(it, "op_type")->valuestring, "If")) continue;
    found_if = 1;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(it, "declined"), "op");
    assert_int_equal(d ? d->valueint : 0, eager ? 0 : 1);
  }
  if (strstr(conv, "INT8")) assert_int_equal(found_if, 0);
  else assert_int_equal(found_if, 1);
  cJSON_Delete(o);
}

/* int8 clusters (INT8_STATIC+DNNL on two Conv+Relu) and graphs with an If (DNNL, BLAS and EAGER through the shared executor). */
static void test_rewritten_and_hooked(void **state) {
  (void)state;
  struct {
    const char *model, *conv;
  } cases[] = {{conv_model, "INT8_STATIC+DNNL"}, {if_model, "DNNL"}, {if_model, "BLAS"}, {if_model, "EAGER"}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    alma_config c;
    fast(&c);
    c.threads = 1;
    alma_results *r = NULL;
    alma_status st = alma_benchmark_model(cases[k].model, &c, &cases[k].conv, 1, NULL, &r);
    const alma_result *x = alma_results_get(r, 0);
    assert_non_null(x);
    if (alma_result_status_code(x) == ALMA_RESULT_UNAVAILABLE) {
      printf("# %s not available here: %s\n", cases[k].conv, alma_result_error(x));
      alma_results_free(r);
      continue;
    }
    assert_int_equal(st, ALMA_OK);
    check_cover(x, cases[k].model, cases[k].conv);
    const alma_profile *p = alma_result_profile(x);
    if (!strcmp(cases[k].conv, "INT8_STATIC+DNNL")) {
      /* each convolution runs with its activation (and requantization) as one: an int8 cluster,
       * one entry named by the convolution */
      int clusters = 0;
      for (int i = 0; i < p->n_nodes; i++)
        if (!strncmp(p->nodes[i].op_type, "Conv+", 5)) {
          clusters++;
          assert_true(p->nodes[i].members >= 2);
          assert_string_equal(p->nodes[i].placement, "DNNL");
          assert_string_equal(p->nodes[i].place, "runtime");
          assert_string_equal(p->nodes[i].declined, "");
          assert_true(!strcmp(p->nodes[i].name, "conv1") || !strcmp(p->nodes[i].name, "conv2"));
        }
      assert_int_equal(clusters, 2);
    } else {
      int branch = 0;
      for (int i = 0; i < p->n_nodes; i++)
        if (!strcmp(p->nodes[i].name, "branch")) {
          branch = 1;
          assert_string_equal(p->nodes[i].op_type, "If");
          assert_string_equal(p->nodes[i].placement, "EAGER");  /* no runtime takes If */
          /* as data: EAGER's own node there; elsewhere declined, for its op type */
          int eager = !strcmp(cases[k].conv, "EAGER");
          assert_string_equal(p->nodes[i].place, eager ? "runtime" : "eager");
          assert_string_equal(p->nodes[i].declined, eager ? "" : "op");
          /* its branch's node has an entry of its own on DNNL and BLAS: the If keeps the rest */
          assert_true(p->nodes[i].ms >= 0);
        }
      assert_int_equal(branch, 1);
      int branch_entries = 0;
      for (int i = 0; i < p->n_nodes; i++) branch_entries += !strncmp(p->nodes[i].name, "branch/", 7);
      if (!strcmp(cases[k].conv, "EAGER")) assert_int_equal(branch_entries, 0);
      else assert_true(branch_entries >= 1 && branch_entries <= 2);
      assert_int_equal(p->n_nodes, 4 + branch_entries);
    }
    check_placement(x, cases[k].conv);
    alma_results_free(r);
  }
}

/* XNNPACK runs each partition as one call: the profile has one entry per partition, named by its
 * first node, every node of the graph covered once (profile.onnx at batch 32: its MatMuls have more
 * rows than the packed few-row route takes, so the nodes run in XNNPACK's subgraph). */
static void test_xnnpack(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  const char *conv[] = {"XNNPACK"};
  alma_results *r = NULL;
  alma_status st = alma_benchmark_model(model, &c, conv, 1, NULL, &r);
  const alma_result *x = alma_results_get(r, 0);
  assert_non_null(x);
  if (alma_result_status_code(x) == ALMA_RESULT_UNAVAILABLE) {
    printf("# XNNPACK not available here: %s\n", alma_result_error(x));
    alma_results_free(r);
    return;
  }
  assert_int_equal(st, ALMA_OK);
  check_cover(x, model, "XNNPACK");
  const alma_profile *p = alma_result_profile(x);
  assert_string_equal(p->runtime, "XNNPACK");
  int partitions = 0;
  for (int i = 0; i < p->n_nodes; i++)
    if (!strncmp(p->nodes[i].placement, "XNNPACK", 7) && p->nodes[i].members > 1) {
      partitions++;
      assert_string_equal(p->nodes[i].name, "big_matmul"); /* the partition's first node */
      assert_non_null(strstr(p->nodes[i].op_type, "MatMul+Add+Relu"));
      assert_string_equal(p->nodes[i].place, "runtime");
      assert_true(p->nodes[i].ms > 0);
    }
  assert_int_equal(partitions, 1);
  alma_results_free(r);
}

static void test_absent_without_profile(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  c.profile = 0;
  const char *conv[] = {"EAGER"};
  alma_results *r = NULL;
  assert_int_equal(alma_benchmark_model(model, &c, conv, 1, NULL, &r), ALMA_OK);
  assert_null(alma_result_profile(alma_results_get(r, 0)));
  char *json = NULL;
  assert_int_equal(alma_results_to_json(r, 0, &json), ALMA_OK);
  cJSON *root = cJSON_Parse(json);
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "results"), 0),
                                                   "profile");
  assert_non_null(p);
  assert_true(cJSON_IsNull(p));
  cJSON_Delete(root);
  free(json);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_int_equal(alma_results_print(r, f, 0), ALMA_OK);
  fclose(f);
  assert_null(strstr(text, "profile "));
  free(text);
  alma_results_free(r);
}

/* JSON, text and CSV carry it; reading the JSON back gives the same profile. */
static void test_reports(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  const char *conv[] = {"EAGER"};
  alma_results *r = NULL, *back = NULL;
  assert_int_equal(alma_benchmark_model(model, &c, conv, 1, NULL, &r), ALMA_OK);
  char *json = NULL;
  assert_int_equal(alma_results_to_json(r, 0, &json), ALMA_OK);
  cJSON *root = cJSON_Parse(json);
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "results"), 0),
                                                   "profile");
  assert_true(cJSON_IsObject(p));
  assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "available")));
  assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(p, "reason")));
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(p, "nodes")), 5);
  const cJSON *n0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(p, "nodes"), 0);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(n0, "name")->valuestring, "big_matmul");
  assert_true(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(p, "op_types")));
  assert_int_equal(alma_results_from_json(json, &back), ALMA_OK);
  const alma_profile *a = alma_result_profile(alma_results_get(r, 0)), *b = alma_result_profile(alma_results_get(back, 0));
  assert_non_null(b);
  assert_int_equal(a->n_nodes, b->n_nodes);
  assert_int_equal(a->n_ops, b->n_ops);
  assert_int_equal(a->batches, b->batches);
  assert_true(a->batch_ms == b->batch_ms && a->nodes_ms == b->nodes_ms && a->overhead == b->overhead);
  for (int i = 0; i < a->n_nodes; i++) {
    assert_string_equal(a->nodes[i].name, b->nodes[i].name);
    assert_string_equal(a->nodes[i].op_type, b->nodes[i].op_type);
    assert_string_equal(a->nodes[i].placement, b->nodes[i].placement);
    assert_true(a->nodes[i].ms == b->nodes[i].ms && a->nodes[i].runs == b->nodes[i].runs &&
                a->nodes[i].members == b->nodes[i].members);
  }
  for (int i = 0; i < a->n_ops; i++) {
    assert_string_equal(a->ops[i].op_type, b->ops[i].op_type);
    assert_true(a->ops[i].ms == b->ops[i].ms && a->ops[i].nodes == b->ops[i].nodes);
  }
  char *json2 = NULL;
  assert_int_equal(alma_results_to_json(back, 0, &json2), ALMA_OK);
  cJSON *root2 = cJSON_Parse(json2);
  const cJSON *p2 = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root2, "results"), 0),
                                                    "profile");
  assert_true(cJSON_Compare(p, p2, 1));
  cJSON_Delete(root);
  cJSON_Delete(root2);
  free(json);
  free(json2);

  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_int_equal(alma_results_print(r, f, 0), ALMA_OK);
  fclose(f);
  assert_non_null(strstr(text, "profile    EAGER, "));
  assert_non_null(strstr(text, "big_matmul (MatMul)"));
  assert_non_null(strstr(text, "by op type"));
  free(text);
  f = open_memstream(&text, &len);
  assert_int_equal(alma_results_write_csv(r, f), ALMA_OK);
  fclose(f);
  assert_non_null(strstr(text, ",profile_batch_ms,profile_nodes_ms,profile_top_node,profile_top_node_ms,"
                               "profile_top_op_type,profile_top_op_type_ms,"));
  assert_non_null(strstr(text, ",big_matmul,"));
  free(text);
  alma_results_free(back);
  alma_results_free(r);
}

static void test_config(void **state) {
  (void)state;
  alma_config c;
  alma_config_init(&c);
  assert_int_equal(c.profile, 0);
  assert_true(c.profile_time_s == 1.0);
  assert_int_equal(alma_config_set(&c, "profile", "-1"), ALMA_ERR_INVALID_ARG);
  assert_int_equal(alma_config_set(&c, "profile", "ten"), ALMA_ERR_INVALID_ARG);
  assert_int_equal(alma_config_set(&c, "profile_time_s", "-0.5"), ALMA_ERR_INVALID_ARG);
  assert_int_equal(alma_config_set(&c, "profile", "12"), ALMA_OK);
  assert_int_equal(alma_config_set(&c, "profile_time_s", "0.25"), ALMA_OK);
  assert_int_equal(c.profile, 12);
  assert_true(c.profile_time_s == 0.25);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  snprintf(model, sizeof model, "%s/profile.onnx", argv[1]);
  snprintf(if_model, sizeof if_model, "%s/profile_if.onnx", argv[1]);
  snprintf(conv_model, sizeof conv_model, "%s/profile_conv.onnx", argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_config),         cmocka_unit_test(test_eager),
      cmocka_unit_test(test_fused_runtimes), cmocka_unit_test(test_rewritten_and_hooked),
      cmocka_unit_test(test_xnnpack),
      cmocka_unit_test(test_absent_without_profile), cmocka_unit_test(test_reports),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
