/* JSON results (schema in docs/json.md) through cJSON. The same per-result object is the record a
 * benchmark child sends to its parent, so writing and reading it back are one code path. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <time.h>

#include "report/report.h"

/* NaN/inf have no JSON spelling: they become null (and null reads back as NaN). */
static cJSON *num(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }
static cJSON *str_or_null(const char *s) { return s && *s ? cJSON_CreateString(s) : cJSON_CreateNull(); }
static cJSON *pair(const double v[2]) {
  cJSON *a = cJSON_CreateArray();
  cJSON_AddItemToArray(a, num(v[0]));
  cJSON_AddItemToArray(a, num(v[1]));
  return a;
}

/* Reading: a key absent or of another type gives NaN, the default, or NULL. */
static double get_num(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}
static int64_t get_i64(const cJSON *o, const char *key, int64_t dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : dflt;
}
static char *get_str(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) && v->valuestring[0] ? alma__strdup(v->valuestring) : NULL;
}
static void get_pair(const cJSON *o, const char *key, double out[2]) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  out[0] = out[1] = NAN;
  if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 2) {
    const cJSON *a = cJSON_GetArrayItem(v, 0), *b = cJSON_GetArrayItem(v, 1);
    if (cJSON_IsNumber(a)) out[0] = a->valuedouble;
    if (cJSON_IsNumber(b)) out[1] = b->valuedouble;
  }
}

/* ---- plain members ----------------------------------------------------------------------------
 * The members that are written and read back the same way are listed once per struct, in the
 * order they are written, so that the writer and the reader cannot disagree on a key. */
typedef enum {
  F_NUM,     /* double; NaN/inf are null, and null reads back as NaN */
  F_PAIR,    /* double[2], each as F_NUM */
  F_I64,     /* int64_t; absent reads 0 */
  F_I64_OPT, /* int64_t; -1 (unknown) is null, and absent reads -1 */
  F_INT,     /* int; absent reads 0 */
  F_BOOL,    /* int 0/1 */
  F_STR,     /* malloc'd string (char * or const char *); NULL and "" are null */
  F_STATS,   /* alma_latency_stats, a nested object (stats_fields) */
} field_type;

typedef struct field {
  const char *key;
  field_type type;
  size_t off;
} field;

#define FIELD(type_, key, ft, member) {key, ft, offsetof(type_, member)}
#define N_FIELDS(a) (sizeof(a) / sizeof(a)[0])

#define SF(key, ft, member) FIELD(alma_latency_stats, key, ft, member)
static const field stats_fields[] = {
    SF("mean", F_NUM, mean), SF("stdev", F_NUM, stdev), SF("cv", F_NUM, cv), SF("min", F_NUM, min),
    SF("p50", F_NUM, p50), SF("p90", F_NUM, p90), SF("p95", F_NUM, p95), SF("p99", F_NUM, p99),
    SF("max", F_NUM, max), SF("mean_ci95", F_PAIR, mean_ci95), SF("median_ci95", F_PAIR, median_ci95),
    SF("n", F_I64, n),
};
#undef SF

/* A result's members from batch_size to latency_ms (id, conversion, status and device come
 * before them, the rest after: those have rules of their own). */
#define RF(key, ft, member) FIELD(alma_result, key, ft, member)
static const field result_fields[] = {
    RF("batch_size", F_I64, batch_size), RF("samples", F_I64, samples),
    RF("throughput_samples_per_s", F_NUM, throughput), RF("total_elapsed_s", F_NUM, total_elapsed_s),
    RF("inference_s", F_NUM, inference_s), RF("load_s", F_NUM, load_s), RF("convert_s", F_NUM, convert_s),
    RF("first_inference_ms", F_NUM, first_inference_ms), RF("peak_rss_bytes", F_I64_OPT, peak_rss_bytes),
    RF("warmup_batches", F_I64, warmup_batches), RF("warmup_s", F_NUM, warmup_s), RF("threads", F_INT, threads),
    RF("affinity", F_STR, affinity), RF("timer_overhead_ns", F_NUM, timer_overhead_ns),
    RF("stop_reason", F_STR, stop_reason), RF("latency_ms", F_STATS, latency),
};
#undef RF

#define PF(key, ft, member) FIELD(alma_scaling_point, key, ft, member)
static const field scaling_fields[] = {
    PF("instances", F_INT, instances), PF("workers", F_INT, workers),
    PF("threads_per_instance", F_INT, threads_per_instance), PF("concurrent", F_BOOL, concurrent),
    PF("inferences", F_I64, inferences), PF("samples", F_I64, samples), PF("duration_s", F_NUM, duration_s),
    PF("throughput_avg", F_NUM, throughput_avg), PF("throughput_peak", F_NUM, throughput_peak),
    PF("latency_ms", F_STATS, latency), PF("stop_reason", F_STR, stop_reason), PF("error", F_STR, error),
};
#undef PF

/* The server scenario (docs/json.md, server). */
#define VF(key, ft, member) FIELD(alma_server_run, key, ft, member)
static const field server_run_fields[] = {
    VF("target_qps", F_NUM, target_qps), VF("scheduled_qps", F_NUM, scheduled_qps),
    VF("achieved_qps", F_NUM, achieved_qps), VF("queries", F_I64, queries), VF("completed", F_I64, completed),
    VF("over_bound", F_I64, over_bound), VF("duration_s", F_NUM, duration_s), VF("percentile_ms", F_NUM, percentile_ms),
    VF("valid", F_BOOL, valid), VF("early_stopped", F_BOOL, early_stopped), VF("reason", F_STR, reason),
    VF("latency_ms", F_STATS, latency), VF("service_ms", F_STATS, service),
};
#undef VF
#define WF(key, ft, member) FIELD(alma_server_result, key, ft, member)
static const field server_fields[] = {
    WF("instances", F_INT, instances), WF("workers", F_INT, workers),
    WF("threads_per_instance", F_INT, threads_per_instance), WF("latency_bound_ms", F_NUM, latency_bound_ms),
    WF("percentile", F_NUM, percentile), WF("search", F_BOOL, search), WF("min_duration_s", F_NUM, min_duration_s),
    WF("min_queries", F_I64, min_queries), WF("error", F_STR, error),
};
#undef WF

/* A row's origin in a suite or a merged sweep (docs/json.md, origin). */
#define GF(key, ft, member) FIELD(alma_result_origin, key, ft, member)
static const field origin_fields[] = {
    GF("model", F_STR, model), GF("model_hash", F_STR, model_hash), GF("task", F_INT, task), GF("node", F_STR, node),
    GF("partition", F_STR, partition), GF("machine", F_STR, machine), GF("job", F_STR, job), GF("cpus", F_STR, cpus),
};
#undef GF

#define NF(key, ft, member) FIELD(alma_profile_node, key, ft, member)
static const field profile_node_fields[] = {
    NF("name", F_STR, name), NF("op_type", F_STR, op_type), NF("placement", F_STR, placement),
    NF("place", F_STR, place), NF("declined", F_STR, declined),
    NF("members", F_INT, members), NF("runs", F_I64, runs), NF("ms", F_NUM, ms), NF("share", F_NUM, share),
    NF("order", F_INT, order),
};
#undef NF

#define OF(key, ft, member) FIELD(alma_profile_op, key, ft, member)
static const field profile_op_fields[] = {
    OF("op_type", F_STR, op_type), OF("entries", F_INT, entries), OF("nodes", F_INT, nodes), OF("ms", F_NUM, ms),
    OF("share", F_NUM, share),
};
#undef OF

/* The profile's scalars (runtime and unavailable come first, the arrays last). */
#define QF(key, ft, member) FIELD(alma_profile, key, ft, member)
static const field profile_fields[] = {
    QF("batches", F_I64, batches), QF("seconds", F_NUM, seconds), QF("batch_ms", F_NUM, batch_ms),
    QF("nodes_ms", F_NUM, nodes_ms), QF("overhead", F_NUM, overhead),
};
#undef QF

/* Contention over the timed phase and repeats across processes (docs/json.md). */
#define CF(key, ft, member) FIELD(alma_contention, key, ft, member)
static const field contention_fields[] = {
    CF("disturbed", F_BOOL, disturbed), CF("reason", F_STR, reason), CF("spinning", F_BOOL, spinning),
    CF("advice", F_STR, advice), CF("wall_s", F_NUM, wall_s), CF("threads", F_INT, threads), CF("cpus", F_INT, cpus),
    CF("cpu_s", F_NUM, cpu_s), CF("utilization", F_NUM, utilization), CF("run_delay_s", F_NUM, run_delay_s),
    CF("cpu_share", F_NUM, cpu_share), CF("voluntary_switches", F_I64_OPT, voluntary_switches),
    CF("involuntary_switches", F_I64_OPT, involuntary_switches), CF("others_cpu_s", F_NUM, others_cpu_s),
    CF("steal_s", F_NUM, steal_s), CF("psi_some_s", F_NUM, psi_some_s), CF("notes", F_STR, notes),
};
#undef CF
#define XF(key, ft, member) FIELD(alma_repeat_stats, key, ft, member)
static const field repeat_fields[] = {
    XF("k", F_INT, k), XF("median_ms", F_NUM, median_ms), XF("ci95", F_PAIR, ci95), XF("min_ms", F_NUM, min_ms),
    XF("max_ms", F_NUM, max_ms), XF("spread", F_NUM, spread), XF("cv", F_NUM, cv), XF("n_disturbed", F_INT, n_disturbed),
    XF("next95", F_PAIR, next95),
};
#undef XF
#define YF(key, ft, member) FIELD(alma_repeat_run, key, ft, member)
static const field repeat_run_fields[] = {
    YF("run_index", F_INT, run_index), YF("n", F_I64, n), YF("median_ms", F_NUM, median_ms),
    YF("cpu_share", F_NUM, cpu_share), YF("disturbed", F_BOOL, disturbed), YF("reason", F_STR, reason),
};
#undef YF

static cJSON *stats_to_cjson(const alma_latency_stats *s);

static void put_fields(cJSON *o, const void *base, const field *f, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const char *p = (const char *)base + f[i].off;
    cJSON *v = NULL;
    switch (f[i].type) {
      case F_NUM: v = num(*(const double *)p); break;
      case F_PAIR: v = pair((const double *)p); break;
      case F_I64: v = cJSON_CreateNumber((double)*(const int64_t *)p); break;
      case F_I64_OPT: {
        int64_t x = *(const int64_t *)p;
        v = x >= 0 ? cJSON_CreateNumber((double)x) : cJSON_CreateNull();
        break;
      }
      case F_INT: v = cJSON_CreateNumber(*(const int *)p); break;
      case F_BOOL: v = cJSON_CreateBool(*(const int *)p); break;
      case F_STR: {
        const char *str;
        memcpy(&str, p, sizeof str);  /* char * or const char * member */
        v = str_or_null(str);
        break;
      }
      case F_STATS: v = stats_to_cjson((const alma_latency_stats *)p); break;
    }
    cJSON_AddItemToObject(o, f[i].key, v);
  }
}

static void stats_from_cjson(const cJSON *l, alma_latency_stats *s);

/* Strings are malloc'd into members that hold none yet. */
static void get_fields(const cJSON *o, void *base, const field *f, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char *p = (char *)base + f[i].off;
    const char *k = f[i].key;
    switch (f[i].type) {
      case F_NUM: *(double *)p = get_num(o, k); break;
      case F_PAIR: get_pair(o, k, (double *)p); break;
      case F_I64: *(int64_t *)p = get_i64(o, k, 0); break;
      case F_I64_OPT: *(int64_t *)p = get_i64(o, k, -1); break;
      case F_INT: *(int *)p = (int)get_i64(o, k, 0); break;
      case F_BOOL: *(int *)p = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, k)); break;
      case F_STR: {
        char *str = get_str(o, k);
        memcpy(p, &str, sizeof str);
        break;
      }
      case F_STATS: {
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(o, k);
        if (cJSON_IsObject(l)) stats_from_cjson(l, (alma_latency_stats *)p);
        break;
      }
    }
  }
}

static cJSON *stats_to_cjson(const alma_latency_stats *s) {
  cJSON *l = cJSON_CreateObject();
  put_fields(l, s, stats_fields, N_FIELDS(stats_fields));
  return l;
}

static void stats_from_cjson(const cJSON *l, alma_latency_stats *s) {
  alma__latency_stats(NULL, 0, s);
  if (cJSON_IsObject(l)) get_fields(l, s, stats_fields, N_FIELDS(stats_fields));
}

static cJSON *cache_to_cjson(const alma_result *r) {
  if (!r->cache.status) return cJSON_CreateNull();
  const alma_cache_info *c = &r->cache;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "status", c->status);
  cJSON_AddItemToObject(o, "reason", str_or_null(c->reason));
  cJSON_AddBoolToObject(o, "stale", c->stale);
  cJSON_AddItemToObject(o, "build", str_or_null(c->build));
  cJSON_AddItemToObject(o, "dir", str_or_null(c->dir));
  cJSON_AddItemToObject(o, "key", str_or_null(c->key));
  cJSON_AddItemToObject(o, "build_s", num(c->build_s));
  cJSON_AddItemToObject(o, "graph_bytes", c->graph_bytes >= 0 ? cJSON_CreateNumber((double)c->graph_bytes) : cJSON_CreateNull());
  return o;
}

static cJSON *profile_to_cjson(const alma_result *r) {
  if (!r->has_profile) return cJSON_CreateNull();
  const alma_profile *p = &r->prof;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddItemToObject(o, "runtime", str_or_null(p->runtime));
  cJSON_AddBoolToObject(o, "available", p->unavailable == NULL);
  cJSON_AddItemToObject(o, "reason", str_or_null(p->unavailable));
  put_fields(o, p, profile_fields, N_FIELDS(profile_fields));
  cJSON *nodes = cJSON_AddArrayToObject(o, "nodes");
  for (int i = 0; i < p->n_nodes; i++) {
    cJSON *e = cJSON_CreateObject();
    put_fields(e, &p->nodes[i], profile_node_fields, N_FIELDS(profile_node_fields));
    cJSON_AddItemToArray(nodes, e);
  }
  cJSON *ops = cJSON_AddArrayToObject(o, "op_types");
  for (int i = 0; i < p->n_ops; i++) {
    cJSON *e = cJSON_CreateObject();
    put_fields(e, &p->ops[i], profile_op_fields, N_FIELDS(profile_op_fields));
    cJSON_AddItemToArray(ops, e);
  }
  return o;
}

/* Entries are read into a temporary struct whose strings get_fields allocates, then copied in. */
static alma_status profile_from_cjson(const cJSON *o, alma_result *r) {
  if (!cJSON_IsObject(o)) return ALMA_OK;
  const cJSON *rt = cJSON_GetObjectItemCaseSensitive(o, "runtime"), *why = cJSON_GetObjectItemCaseSensitive(o, "reason");
  int avail = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o, "available"));
  ALMA_TRY(alma__profile_init(&r->prof, cJSON_IsString(rt) ? rt->valuestring : "",
                              avail ? NULL : cJSON_IsString(why) ? why->valuestring : "unavailable"));
  r->has_profile = 1;
  get_fields(o, &r->prof, profile_fields, N_FIELDS(profile_fields));
  const cJSON *it;
  alma_status st = ALMA_OK;
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(o, "nodes")) {
    alma_profile_node n;
    memset(&n, 0, sizeof n);
    get_fields(it, &n, profile_node_fields, N_FIELDS(profile_node_fields));
    if (st == ALMA_OK) st = alma__profile_add_node(&r->prof, &n);
    free((char *)n.name);
    free((char *)n.op_type);
    free((char *)n.placement);
    free((char *)n.place);
    free((char *)n.declined);
  }
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(o, "op_types")) {
    alma_profile_op op;
    memset(&op, 0, sizeof op);
    get_fields(it, &op, profile_op_fields, N_FIELDS(profile_op_fields));
    if (st == ALMA_OK) st = alma__profile_add_op(&r->prof, &op);
    free((char *)op.op_type);
  }
  return st;
}

static cJSON *contention_to_cjson(const alma_result *r) {
  if (!r->cont.measured) return cJSON_CreateNull();
  cJSON *o = cJSON_CreateObject();
  put_fields(o, &r->cont, contention_fields, N_FIELDS(contention_fields));
  return o;
}

static cJSON *repeats_to_cjson(const alma_result *r) {
  if (r->rep.k < 2) return cJSON_CreateNull();
  cJSON *o = cJSON_CreateObject();
  put_fields(o, &r->rep, repeat_fields, N_FIELDS(repeat_fields));
  cJSON *runs = cJSON_AddArrayToObject(o, "runs");
  for (int i = 0; i < r->rep.k; i++) {
    cJSON *e = cJSON_CreateObject();
    put_fields(e, &r->rep.runs[i], repeat_run_fields, N_FIELDS(repeat_run_fields));
    cJSON_AddItemToArray(runs, e);
  }
  return o;
}

/* Strings of the temporary run are allocated by get_fields; alma__repeat_push copies them. */
static alma_status contention_repeats_from_cjson(const cJSON *o, alma_result *r) {
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "contention");
  if (cJSON_IsObject(c)) {
    get_fields(c, &r->cont, contention_fields, N_FIELDS(contention_fields));
    r->cont.measured = 1;
  }
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, "repeats"), *it;
  if (!cJSON_IsObject(x)) return ALMA_OK;
  alma__repeat_clear(&r->rep);
  alma_status st = ALMA_OK;
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(x, "runs")) {
    alma_repeat_run e;
    memset(&e, 0, sizeof e);
    get_fields(it, &e, repeat_run_fields, N_FIELDS(repeat_run_fields));
    if (st == ALMA_OK) st = alma__repeat_push(&r->rep, &e);
    free((char *)e.reason);
  }
  int k = r->rep.k;
  const alma_repeat_run *runs = r->rep.runs;
  get_fields(x, &r->rep, repeat_fields, N_FIELDS(repeat_fields));
  r->rep.k = k;  /* the runs read are what there is */
  r->rep.runs = runs;
  return st;
}

static cJSON *server_to_cjson(const alma_server_result *sv) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "scenario", "Server");
  put_fields(o, sv, server_fields, N_FIELDS(server_fields));
  const alma_server_run *b = sv->best >= 0 && sv->best < sv->n_runs ? &sv->runs[sv->best] : NULL;
  cJSON_AddItemToObject(o, "target_qps", sv->search ? cJSON_CreateString("auto")
                                                    : num(sv->n_runs ? sv->runs[0].target_qps : NAN));
  cJSON_AddItemToObject(o, "best", b ? cJSON_CreateNumber(sv->best) : cJSON_CreateNull());
  cJSON_AddItemToObject(o, "best_qps", b ? num(b->target_qps) : cJSON_CreateNull());
  cJSON_AddItemToObject(o, "result", sv->error ? cJSON_CreateNull() : cJSON_CreateString(b && b->valid ? "VALID" : "INVALID"));
  cJSON *runs = cJSON_AddArrayToObject(o, "runs");
  for (int i = 0; i < sv->n_runs; i++) {
    cJSON *p = cJSON_CreateObject();
    put_fields(p, &sv->runs[i], server_run_fields, N_FIELDS(server_run_fields));
    cJSON_AddStringToObject(p, "result", sv->runs[i].valid ? "VALID" : "INVALID");
    cJSON_AddItemToArray(runs, p);
  }
  return o;
}

static alma_status server_from_cjson(const cJSON *o, alma_result *r) {
  alma__server_result_clear(&r->server);
  r->has_server = 1;
  get_fields(o, &r->server, server_fields, N_FIELDS(server_fields));
  const cJSON *runs = cJSON_GetObjectItemCaseSensitive(o, "runs"), *it;
  cJSON_ArrayForEach(it, runs) {
    alma_server_run *p = alma__server_add_run(&r->server);
    if (!p) return ALMA_ERR_NOMEM;
    get_fields(it, p, server_run_fields, N_FIELDS(server_run_fields));
  }
  int64_t best = get_i64(o, "best", -1);
  r->server.best = best >= 0 && best < r->server.n_runs ? (int)best : -1;
  return ALMA_OK;
}

cJSON *alma__result_to_cjson(const alma_result *r, int include_raw) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddItemToObject(o, "id", r->id >= 0 ? cJSON_CreateNumber(r->id) : cJSON_CreateNull());
  cJSON_AddItemToObject(o, "conversion", cJSON_CreateString(r->conversion ? r->conversion : ""));
  cJSON_AddStringToObject(o, "status", alma__result_status_str(r->status));
  cJSON_AddStringToObject(o, "device", r->device);
  put_fields(o, r, result_fields, N_FIELDS(result_fields));

  const alma_output_check *c = &r->check;
  cJSON *k = cJSON_AddObjectToObject(o, "check");
  cJSON_AddBoolToObject(k, "performed", c->performed);
  cJSON_AddItemToObject(k, "max_abs_err", num(c->max_abs_err));
  cJSON_AddItemToObject(k, "max_rel_err", num(c->max_rel_err));
  cJSON_AddItemToObject(k, "argmax_agreement", num(c->argmax_agreement));
  cJSON_AddItemToObject(k, "cosine", num(c->cosine_similarity));
  cJSON_AddItemToObject(k, "passed", c->performed ? cJSON_CreateBool(c->passed) : cJSON_CreateNull());

  cJSON *w = cJSON_AddArrayToObject(o, "warnings");
  for (int i = 0; i < r->n_warnings; i++) cJSON_AddItemToArray(w, cJSON_CreateString(r->warnings[i]));
  cJSON_AddItemToObject(o, "error", str_or_null(r->error));
  cJSON_AddItemToObject(o, "error_status", r->error_status != ALMA_OK ? cJSON_CreateString(alma_status_name(r->error_status)) : cJSON_CreateNull());
  cJSON_AddItemToObject(o, "failed_step", str_or_null(r->failed_step));
  cJSON_AddItemToObject(o, "traceback", str_or_null(r->traceback));
  cJSON_AddStringToObject(o, "mode", r->mode);
  /* MLPerf's name for what the latency mode measures; a build has no scenario */
  cJSON_AddItemToObject(o, "scenario", strcmp(r->mode, "build") ? cJSON_CreateString("SingleStream") : cJSON_CreateNull());
  cJSON_AddItemToObject(o, "cache", cache_to_cjson(r));
  cJSON_AddItemToObject(o, "preprocess_ms", r->pre.n ? stats_to_cjson(&r->pre) : cJSON_CreateNull());
  cJSON_AddItemToObject(o, "postprocess_ms", r->post.n ? stats_to_cjson(&r->post) : cJSON_CreateNull());
  if (r->acc.samples > 0) {
    cJSON *a = cJSON_AddObjectToObject(o, "accuracy");
    cJSON_AddItemToObject(a, "top1", num(r->acc.top1));
    cJSON_AddNumberToObject(a, "correct", (double)r->acc.correct);
    cJSON_AddNumberToObject(a, "samples", (double)r->acc.samples);
    cJSON_AddItemToObject(a, "top1_drop", num(r->acc.top1_drop));
    cJSON_AddItemToObject(a, "baseline", str_or_null(r->acc.baseline));
    cJSON_AddItemToObject(a, "seconds", num(r->acc.seconds));
  } else {
    cJSON_AddNullToObject(o, "accuracy");
  }
  if (r->saved_path) {
    cJSON *sv = cJSON_AddObjectToObject(o, "saved_converted");
    cJSON_AddStringToObject(sv, "path", r->saved_path);
    cJSON_AddNumberToObject(sv, "alma_ops", r->saved_alma_ops);
  } else {
    cJSON_AddNullToObject(o, "saved_converted");
  }
  cJSON_AddBoolToObject(o, "disturbed", r->cont.measured && r->cont.disturbed);
  cJSON_AddItemToObject(o, "contention", contention_to_cjson(r));
  cJSON_AddItemToObject(o, "clock_agreement", num(r->clock_agreement));
  cJSON_AddItemToObject(o, "repeats", repeats_to_cjson(r));
  cJSON_AddItemToObject(o, "profile", profile_to_cjson(r));
  cJSON *ri = r->runtime_info ? cJSON_Parse(r->runtime_info) : NULL;
  cJSON_AddItemToObject(o, "runtime_info", ri ? ri : cJSON_CreateNull());
  cJSON *pl = r->placement ? cJSON_Parse(r->placement) : NULL;
  cJSON_AddItemToObject(o, "placement", pl ? pl : cJSON_CreateNull());
  cJSON *ro = r->runtime_options ? cJSON_Parse(r->runtime_options) : NULL;
  cJSON_AddItemToObject(o, "runtime_options", ro ? ro : cJSON_CreateNull());
  cJSON_AddItemToObject(o, "runtime_options_given",
                        r->runtime_options_given ? cJSON_CreateString(r->runtime_options_given) : cJSON_CreateNull());
  if (r->n_scaling) {
    cJSON *sc = cJSON_AddArrayToObject(o, "scaling");
    for (int i = 0; i < r->n_scaling; i++) {
      cJSON *p = cJSON_CreateObject();
      cJSON_AddStringToObject(p, "scenario", "Offline");
      put_fields(p, &r->scaling[i], scaling_fields, N_FIELDS(scaling_fields));
      cJSON_AddItemToArray(sc, p);
    }
  }
  if (r->has_server) cJSON_AddItemToObject(o, "server", server_to_cjson(&r->server));
  if (r->has_origin) {
    cJSON *g = cJSON_AddObjectToObject(o, "origin");
    put_fields(g, &r->origin, origin_fields, N_FIELDS(origin_fields));
    if (r->origin.task < 0) cJSON_ReplaceItemInObject(g, "task", cJSON_CreateNull());
  }
  if (include_raw) {
    cJSON *raw = cJSON_AddArrayToObject(o, "raw_ms");
    for (int64_t i = 0; i < r->n_raw; i++) cJSON_AddItemToArray(raw, num(r->raw_ms[i]));
  }
  return o;
}

/* ---- reading back ---------------------------------------------------------------------------- */
static alma_status status_from_name(const char *name) {
  for (int s = 0; s < ALMA_STATUS_COUNT; s++)
    if (!strcmp(alma_status_name((alma_status)s), name)) return (alma_status)s;
  return ALMA_ERR_INTERNAL;
}

alma_status alma__result_from_cjson(const cJSON *o, alma_result *r) {
  if (!cJSON_IsObject(o)) return alma__errorf(ALMA_ERR_PARSE, "result: not a JSON object");
  alma__result_clear(r);
  r->id = (int)get_i64(o, "id", -1);
  r->conversion = get_str(o, "conversion");
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");
  if (!cJSON_IsString(st)) return alma__errorf(ALMA_ERR_PARSE, "result: missing \"status\"");
  r->status = !strcmp(st->valuestring, "ok") ? ALMA_RESULT_OK
              : !strcmp(st->valuestring, "unavailable") ? ALMA_RESULT_UNAVAILABLE : ALMA_RESULT_ERROR;
  char *dev = get_str(o, "device");
  if (dev) snprintf(r->device, sizeof r->device, "%s", dev);
  free(dev);
  get_fields(o, r, result_fields, N_FIELDS(result_fields));
  {
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(o, "roofline");
    r->flops_per_batch = cJSON_IsObject(rf) ? get_num(rf, "flops_per_batch") : NAN;
    r->bytes_per_batch = cJSON_IsObject(rf) ? get_num(rf, "bytes_per_batch") : NAN;
  }
  char *mode = get_str(o, "mode");
  if (mode) snprintf(r->mode, sizeof r->mode, "%s", mode);
  free(mode);
  stats_from_cjson(cJSON_GetObjectItemCaseSensitive(o, "preprocess_ms"), &r->pre);
  stats_from_cjson(cJSON_GetObjectItemCaseSensitive(o, "postprocess_ms"), &r->post);
  const cJSON *ca = cJSON_GetObjectItemCaseSensitive(o, "cache");
  if (cJSON_IsObject(ca)) {
    const cJSON *cs = cJSON_GetObjectItemCaseSensitive(ca, "status");
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(ca, "reason"), *bu = cJSON_GetObjectItemCaseSensitive(ca, "build");
    const cJSON *di = cJSON_GetObjectItemCaseSensitive(ca, "dir"), *ke = cJSON_GetObjectItemCaseSensitive(ca, "key");
    alma__result_set_cache(r, cJSON_IsString(cs) ? cs->valuestring : "off", cJSON_IsString(re) ? re->valuestring : "",
                           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ca, "stale")), cJSON_IsString(bu) ? bu->valuestring : "",
                           cJSON_IsString(di) ? di->valuestring : "", cJSON_IsString(ke) ? ke->valuestring : "",
                           get_num(ca, "build_s"), get_i64(ca, "graph_bytes", -1));
  }
  const cJSON *sc = cJSON_GetObjectItemCaseSensitive(o, "scaling"), *pt;
  cJSON_ArrayForEach(pt, sc) {
    alma_scaling_point *p = alma__result_add_scaling(r);
    if (!p) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    get_fields(pt, p, scaling_fields, N_FIELDS(scaling_fields));
  }
  const cJSON *og = cJSON_GetObjectItemCaseSensitive(o, "origin");
  if (cJSON_IsObject(og)) {
    alma_result_origin tmp;
    memset(&tmp, 0, sizeof tmp);
    get_fields(og, &tmp, origin_fields, N_FIELDS(origin_fields));
    tmp.task = (int)get_i64(og, "task", -1);
    alma__result_set_origin(r, &tmp);
    free((char *)tmp.model), free((char *)tmp.model_hash), free((char *)tmp.node), free((char *)tmp.partition);
    free((char *)tmp.machine), free((char *)tmp.job), free((char *)tmp.cpus);
  }
  const cJSON *sv_ = cJSON_GetObjectItemCaseSensitive(o, "server");
  if (cJSON_IsObject(sv_) && server_from_cjson(sv_, r) != ALMA_OK)
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory reading the server scenario");
  const cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "check");
  if (cJSON_IsObject(k)) {
    r->check.performed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(k, "performed"));
    r->check.max_abs_err = get_num(k, "max_abs_err");
    r->check.max_rel_err = get_num(k, "max_rel_err");
    r->check.argmax_agreement = get_num(k, "argmax_agreement");
    /* "cosine_similarity" in files of schema 1 */
    r->check.cosine_similarity = cJSON_GetObjectItemCaseSensitive(k, "cosine") ? get_num(k, "cosine")
                                                                                 : get_num(k, "cosine_similarity");
    r->check.passed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(k, "passed"));
  }
  const cJSON *ac = cJSON_GetObjectItemCaseSensitive(o, "accuracy");
  if (cJSON_IsObject(ac) && get_i64(ac, "samples", 0) > 0) {
    r->acc.samples = get_i64(ac, "samples", 0);
    r->acc.correct = get_i64(ac, "correct", 0);
    r->acc.top1 = get_num(ac, "top1");
    r->acc.seconds = get_num(ac, "seconds");
    const cJSON *bl = cJSON_GetObjectItemCaseSensitive(ac, "baseline");
    alma__result_set_baseline(r, cJSON_IsString(bl) ? bl->valuestring : "", get_num(ac, "top1_drop"));
  }
  const cJSON *sv = cJSON_GetObjectItemCaseSensitive(o, "saved_converted");
  if (cJSON_IsObject(sv)) {
    r->saved_path = get_str(sv, "path");
    r->saved_alma_ops = (int)get_i64(sv, "alma_ops", 0);
  }
  const cJSON *ri = cJSON_GetObjectItemCaseSensitive(o, "runtime_info");
  if (cJSON_IsObject(ri)) r->runtime_info = cJSON_PrintUnformatted(ri);
  const cJSON *pl = cJSON_GetObjectItemCaseSensitive(o, "placement");
  if (cJSON_IsObject(pl)) r->placement = cJSON_PrintUnformatted(pl);
  const cJSON *ro = cJSON_GetObjectItemCaseSensitive(o, "runtime_options");
  if (cJSON_IsObject(ro)) r->runtime_options = cJSON_PrintUnformatted(ro);
  r->runtime_options_given = get_str(o, "runtime_options_given");
  r->clock_agreement = get_num(o, "clock_agreement");
  if (contention_repeats_from_cjson(o, r) != ALMA_OK) return alma__errorf(ALMA_ERR_NOMEM, "out of memory reading repeats");
  if (profile_from_cjson(cJSON_GetObjectItemCaseSensitive(o, "profile"), r) != ALMA_OK)
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory reading the profile");
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(o, "warnings"), *it;
  cJSON_ArrayForEach(it, w) if (cJSON_IsString(it)) alma__result_warn(r, "%s", it->valuestring);
  r->error = get_str(o, "error");
  char *es = get_str(o, "error_status");
  r->error_status = es ? status_from_name(es) : (r->status == ALMA_RESULT_ERROR ? ALMA_ERR_RUNTIME : ALMA_OK);
  free(es);
  r->failed_step = get_str(o, "failed_step");
  r->traceback = get_str(o, "traceback");
  const cJSON *raw = cJSON_GetObjectItemCaseSensitive(o, "raw_ms");
  if (cJSON_IsArray(raw) && cJSON_GetArraySize(raw) > 0) {
    int n = cJSON_GetArraySize(raw);
    r->raw_ms = malloc((size_t)n * sizeof *r->raw_ms);
    if (!r->raw_ms) return alma__errorf(ALMA_ERR_NOMEM, "out of memory reading %d latencies", n);
    int64_t i = 0;
    cJSON_ArrayForEach(it, raw) r->raw_ms[i++] = cJSON_IsNumber(it) ? it->valuedouble : NAN;
    r->n_raw = n;
  }
  return ALMA_OK;
}

/* ---- whole results --------------------------------------------------------------------------- */
cJSON *alma__system_to_cjson(const alma_system_info *s) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "cpu_model", s->cpu_model);
  cJSON_AddNumberToObject(o, "logical_cores", s->logical_cores);
  cJSON_AddNumberToObject(o, "physical_cores", s->physical_cores);
  cJSON_AddNumberToObject(o, "sockets", s->sockets);
  cJSON *isa = cJSON_AddArrayToObject(o, "isa");
  char buf[sizeof s->isa];
  snprintf(buf, sizeof buf, "%s", s->isa);
  for (char *save = NULL, *p = strtok_r(buf, " ", &save); p; p = strtok_r(NULL, " ", &save))
    if (strcmp(p, "none")) cJSON_AddItemToArray(isa, cJSON_CreateString(p));
  cJSON_AddItemToObject(o, "memory_bytes", s->memory_bytes >= 0 ? cJSON_CreateNumber((double)s->memory_bytes) : cJSON_CreateNull());
  cJSON_AddStringToObject(o, "os", s->os);
  cJSON_AddStringToObject(o, "kernel", s->kernel);
  cJSON_AddStringToObject(o, "machine", s->machine);
  cJSON_AddStringToObject(o, "governor", s->governor);
  cJSON *la = cJSON_AddArrayToObject(o, "load_average");
  for (int i = 0; i < 3; i++) cJSON_AddItemToArray(la, s->load_average[i] >= 0 ? cJSON_CreateNumber(s->load_average[i]) : cJSON_CreateNull());
  cJSON *lib = cJSON_AddObjectToObject(o, "libraries");
  cJSON_AddStringToObject(lib, "alma", s->alma_version);
  cJSON_AddStringToObject(lib, "protobuf-c", s->protobuf_c_version);
  cJSON_AddStringToObject(lib, "cjson", s->cjson_version);
  cJSON_AddStringToObject(lib, "openssl", s->openssl_version);
  cJSON_AddStringToObject(lib, "libc", s->libc_version);
  cJSON_AddStringToObject(o, "compiler", s->compiler);
  cJSON_AddStringToObject(o, "build_flags", s->build_flags);
  cJSON *rt = cJSON_AddArrayToObject(o, "runtimes");
  snprintf(buf, sizeof buf, "%s", s->runtimes);
  for (char *save = NULL, *p = strtok_r(buf, " ", &save); p; p = strtok_r(NULL, " ", &save))
    cJSON_AddItemToArray(rt, cJSON_CreateString(p));
  return o;
}

cJSON *alma__config_to_cjson(const alma_config *c) {
  cJSON *o = cJSON_CreateObject();
  const char *key;
  char buf[ALMA__CONFIG_VALUE_MAX], type;
  for (int i = 0; alma__config_entry(c, i, &key, buf, sizeof buf, &type); i++) {
    if (type == 'b') cJSON_AddBoolToObject(o, key, !strcmp(buf, "true"));
    else if (type == 's') cJSON_AddStringToObject(o, key, buf);
    else cJSON_AddNumberToObject(o, key, strtod(buf, NULL));
  }
  return o;
}

static cJSON *io_to_cjson(const alma__model_io *io, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; i < n; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", io[i].name);
    cJSON_AddStringToObject(o, "dtype", io[i].dtype);
    if (io[i].rank >= 0) {
      cJSON *sh = cJSON_AddArrayToObject(o, "shape");
      for (int d = 0; d < io[i].rank; d++)
        cJSON_AddItemToArray(sh, io[i].dims[d] >= 0 ? cJSON_CreateNumber((double)io[i].dims[d]) : cJSON_CreateNull());
    } else {
      cJSON_AddNullToObject(o, "shape");
    }
    cJSON_AddStringToObject(o, "declared_shape", io[i].declared);
    cJSON_AddItemToArray(a, o);
  }
  return a;
}

/* The roofline figures need the sweep's machine peak: added here, not in the child's record. */
static cJSON *roofline_to_cjson(const alma_results *rs, const alma_result *x) {
  if (!isfinite(x->flops_per_batch) && !isfinite(x->bytes_per_batch)) return cJSON_CreateNull();
  alma__roofline f = alma__result_roofline(rs, x);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddItemToObject(o, "flops_per_batch", num(x->flops_per_batch));
  cJSON_AddItemToObject(o, "bytes_per_batch", num(x->bytes_per_batch));
  cJSON_AddItemToObject(o, "intensity", num(isfinite(f.intensity) ? f.intensity : x->flops_per_batch / x->bytes_per_batch));
  cJSON_AddItemToObject(o, "gflops", num(f.achieved_gflops));
  cJSON_AddItemToObject(o, "share_of_peak", num(f.share_of_peak));
  cJSON_AddItemToObject(o, "attainable_gflops", num(f.attainable_gflops));
  cJSON_AddItemToObject(o, "share_of_attainable", num(f.share_of_attainable));
  cJSON_AddItemToObject(o, "bound", str_or_null(f.bound));
  return o;
}

alma_status alma__results_to_json_ex(const alma_results *r, int include_raw, const alma__unavailable *u, int n_u,
                                     char **json_out) {
  if (!r || !json_out || (n_u > 0 && !u)) return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_results_to_json: NULL argument");
  *json_out = NULL;
  cJSON *root = cJSON_CreateObject();
  if (!root) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  cJSON_AddStringToObject(root, "alma_version", alma_version());
  cJSON_AddStringToObject(root, "alma_build", alma_build_id());
  /* 2: check.cosine_similarity renamed check.cosine; readers take both. */
  cJSON_AddNumberToObject(root, "schema_version", 2);
  char when[64] = "";
  time_t now = time(NULL);
  struct tm tmv;
  if (gmtime_r(&now, &tmv)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tmv);
  cJSON_AddStringToObject(root, "created", when);
  cJSON_AddItemToObject(root, "system", alma__system_to_cjson(&r->system));
  cJSON *m = cJSON_AddObjectToObject(root, "model");
  cJSON_AddItemToObject(m, "path", str_or_null(r->model_path));
  cJSON_AddItemToObject(m, "hash", str_or_null(r->model_hash));
  cJSON_AddItemToObject(m, "file_sha256", str_or_null(r->model_file_sha256));
  cJSON_AddItemToObject(m, "file_bytes", r->model_file_bytes > 0 ? cJSON_CreateNumber((double)r->model_file_bytes) : cJSON_CreateNull());
  cJSON_AddItemToObject(m, "inputs", io_to_cjson(r->inputs, r->n_inputs));
  cJSON_AddItemToObject(m, "outputs", io_to_cjson(r->outputs, r->n_outputs));
  cJSON_AddItemToObject(root, "data", str_or_null(r->data_desc));
  cJSON_AddItemToObject(root, "config", alma__config_to_cjson(&r->config));
  cJSON_AddItemToObject(root, "machine_peak", alma__machine_peak_to_cjson(&r->peak));
  cJSON *res = cJSON_AddArrayToObject(root, "results");
  for (int i = 0; i < r->n; i++) {
    cJSON *o = alma__result_to_cjson(&r->items[i], include_raw);
    cJSON_AddItemToObject(o, "roofline", roofline_to_cjson(r, &r->items[i]));
    cJSON_AddItemToArray(res, o);
  }
  if (n_u >= 0) {
    cJSON *ua = cJSON_AddArrayToObject(root, "unavailable");
    for (int i = 0; i < n_u; i++) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddItemToObject(o, "id", u[i].id >= 0 ? cJSON_CreateNumber(u[i].id) : cJSON_CreateNull());
      cJSON_AddStringToObject(o, "name", u[i].name ? u[i].name : "");
      cJSON_AddItemToObject(o, "reason", str_or_null(u[i].reason));
      cJSON_AddItemToArray(ua, o);
    }
  } else {
    cJSON_AddNullToObject(root, "unavailable");
  }
  cJSON_AddNumberToObject(root, "total_s", isfinite(r->total_s) ? r->total_s : 0);
  /* names from the model may be any bytes; JSON must be UTF-8 */
  char *text = alma__utf8_fix_owned(cJSON_Print(root));
  cJSON_Delete(root);
  if (!text) return alma__errorf(ALMA_ERR_NOMEM, "out of memory writing JSON");
  *json_out = text;
  return ALMA_OK;
}

alma_status alma_results_to_json(const alma_results *r, int include_raw, char **json_out) {
  return alma__results_to_json_ex(r, include_raw, NULL, -1, json_out);
}

alma_status alma__results_save_json_ex(const alma_results *r, const char *path, int include_raw,
                                       const alma__unavailable *u, int n_u) {
  if (!path) return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_results_save_json: NULL path");
  char *text;
  ALMA_TRY(alma__results_to_json_ex(r, include_raw, u, n_u, &text));
  FILE *f = !strcmp(path, "-") ? stdout : fopen(path, "w");
  if (!f) {
    alma_status st = alma__errorf(ALMA_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    free(text);
    return st;
  }
  int ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF;
  ok &= f == stdout ? fflush(f) == 0 : fclose(f) == 0;
  free(text);
  return ok ? ALMA_OK : alma__errorf(ALMA_ERR_IO, "error writing '%s'", path);
}

alma_status alma_results_save_json(const alma_results *r, const char *path, int include_raw) {
  return alma__results_save_json_ex(r, path, include_raw, NULL, -1);
}

/* ---- whole files back ------------------------------------------------------------------------ */
static void get_into(const cJSON *o, const char *key, char *dst, size_t n) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (cJSON_IsString(v)) snprintf(dst, n, "%.*s", (int)(n - 1), v->valuestring);
}

static void join_strings(const cJSON *arr, char *dst, size_t n) {
  const cJSON *it;
  size_t len = 0;
  dst[0] = 0;
  cJSON_ArrayForEach(it, arr) {
    if (!cJSON_IsString(it)) continue;
    int w = snprintf(dst + len, n - len, "%s%s", len ? " " : "", it->valuestring);
    if (w < 0 || (size_t)w >= n - len) break;
    len += (size_t)w;
  }
}

static void system_from_cjson(const cJSON *o, alma_system_info *s) {
  memset(s, 0, sizeof *s);
  s->load_average[0] = s->load_average[1] = s->load_average[2] = -1;
  if (!cJSON_IsObject(o)) return;
  get_into(o, "cpu_model", s->cpu_model, sizeof s->cpu_model);
  s->logical_cores = (int)get_i64(o, "logical_cores", 0);
  s->physical_cores = (int)get_i64(o, "physical_cores", 0);
  s->sockets = (int)get_i64(o, "sockets", 0);
  join_strings(cJSON_GetObjectItemCaseSensitive(o, "isa"), s->isa, sizeof s->isa);
  s->memory_bytes = get_i64(o, "memory_bytes", -1);
  get_into(o, "os", s->os, sizeof s->os);
  get_into(o, "kernel", s->kernel, sizeof s->kernel);
  get_into(o, "machine", s->machine, sizeof s->machine);
  get_into(o, "governor", s->governor, sizeof s->governor);
  const cJSON *la = cJSON_GetObjectItemCaseSensitive(o, "load_average");
  for (int i = 0; i < 3 && cJSON_IsArray(la); i++) {
    const cJSON *v = cJSON_GetArrayItem(la, i);
    if (cJSON_IsNumber(v)) s->load_average[i] = v->valuedouble;
  }
  const cJSON *lib = cJSON_GetObjectItemCaseSensitive(o, "libraries");
  get_into(lib, "alma", s->alma_version, sizeof s->alma_version);
  get_into(lib, "protobuf-c", s->protobuf_c_version, sizeof s->protobuf_c_version);
  get_into(lib, "cjson", s->cjson_version, sizeof s->cjson_version);
  get_into(lib, "openssl", s->openssl_version, sizeof s->openssl_version);
  get_into(lib, "libc", s->libc_version, sizeof s->libc_version);
  get_into(o, "compiler", s->compiler, sizeof s->compiler);
  get_into(o, "build_flags", s->build_flags, sizeof s->build_flags);
  join_strings(cJSON_GetObjectItemCaseSensitive(o, "runtimes"), s->runtimes, sizeof s->runtimes);
}

static alma_status io_from_cjson(const cJSON *arr, alma__model_io **out, int *n_out) {
  int n = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : 0;
  *n_out = 0;
  *out = calloc(n > 0 ? (size_t)n : 1, sizeof **out);
  if (!*out) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  const cJSON *it;
  cJSON_ArrayForEach(it, arr) {
    alma__model_io *io = &(*out)[(*n_out)++];
    get_into(it, "name", io->name, sizeof io->name);
    get_into(it, "dtype", io->dtype, sizeof io->dtype);
    get_into(it, "declared_shape", io->declared, sizeof io->declared);
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape"), *d;
    io->rank = cJSON_IsArray(sh) ? 0 : -1;
    cJSON_ArrayForEach(d, sh) if (io->rank < ALMA_MAX_RANK) io->dims[io->rank++] = cJSON_IsNumber(d) ? (int64_t)d->valuedouble : -1;
  }
  return ALMA_OK;
}

alma_status alma_results_from_json(const char *json, alma_results **out) {
  if (!json || !out) return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_results_from_json: NULL argument");
  *out = NULL;
  cJSON *root = cJSON_Parse(json);
  if (!root) return alma__errorf(ALMA_ERR_PARSE, "not JSON (error near offset %ld)", (long)(cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - json : 0));
  const cJSON *res = cJSON_GetObjectItemCaseSensitive(root, "results");
  if (!cJSON_IsObject(root) || !cJSON_IsArray(res) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "alma_version"))) {
    cJSON_Delete(root);
    return alma__errorf(ALMA_ERR_PARSE, "not an alma results file (no \"alma_version\" and \"results\")");
  }
  alma_results *rs = calloc(1, sizeof *rs);
  alma_status st = rs ? ALMA_OK : alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (st == ALMA_OK) {
    system_from_cjson(cJSON_GetObjectItemCaseSensitive(root, "system"), &rs->system);
    alma_config_init(&rs->config);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(root, "config"), *kv;
    /* Known keys only (files from newer versions may have more); values through alma_config_set. */
    cJSON_ArrayForEach(kv, cfg) {
      if (!alma_config_key_doc(kv->string)) continue;
      char val[ALMA__CONFIG_VALUE_MAX];
      if (cJSON_IsBool(kv)) snprintf(val, sizeof val, "%s", cJSON_IsTrue(kv) ? "true" : "false");
      else if (cJSON_IsString(kv)) snprintf(val, sizeof val, "%.*s", (int)sizeof val - 1, kv->valuestring);
      else if (cJSON_IsNumber(kv)) snprintf(val, sizeof val, "%.17g", kv->valuedouble);
      else continue;
      if (!strcmp(kv->string, "seed") && cJSON_IsNumber(kv)) snprintf(val, sizeof val, "%llu", (unsigned long long)kv->valuedouble);
      if (alma_config_set(&rs->config, kv->string, val) != ALMA_OK) {
        st = alma__error_prefix(ALMA_ERR_PARSE, "results file config: ");
        break;
      }
    }
    alma__error_clear();
  }
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
  if (st == ALMA_OK) {
    char *p = get_str(m, "path");
    rs->model_path = p ? p : alma__strdup("");
    get_into(m, "hash", rs->model_hash, sizeof rs->model_hash);
    get_into(m, "file_sha256", rs->model_file_sha256, sizeof rs->model_file_sha256);
    rs->model_file_bytes = get_i64(m, "file_bytes", 0);
    rs->data_desc = get_str(root, "data");
    rs->total_s = get_num(root, "total_s");
    alma__machine_peak_from_cjson(cJSON_GetObjectItemCaseSensitive(root, "machine_peak"), &rs->peak);
    st = io_from_cjson(cJSON_GetObjectItemCaseSensitive(m, "inputs"), &rs->inputs, &rs->n_inputs);
    if (st == ALMA_OK) st = io_from_cjson(cJSON_GetObjectItemCaseSensitive(m, "outputs"), &rs->outputs, &rs->n_outputs);
  }
  const cJSON *it;
  int i = 0;
  cJSON_ArrayForEach(it, res) {
    if (st != ALMA_OK) break;
    alma_result *r = alma__results_add(rs);
    if (!r) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    else if ((st = alma__result_from_cjson(it, r)) != ALMA_OK) alma__error_prefix(st, "results[%d]: ", i);
    i++;
  }
  cJSON_Delete(root);
  if (st != ALMA_OK) {
    alma_results_free(rs);
    return st;
  }
  *out = rs;
  return ALMA_OK;
}

alma_status alma_results_load_json(const char *path, alma_results **out) {
  if (!path || !out) return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_results_load_json: NULL argument");
  *out = NULL;
  uint8_t *buf;
  size_t n;
  ALMA_TRY(alma__read_file(path, &buf, &n));
  char *text = realloc(buf, n + 1);
  if (!text) {
    free(buf);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory reading '%s'", path);
  }
  text[n] = 0;
  alma_status st = alma_results_from_json(text, out);
  free(text);
  if (st != ALMA_OK) alma__error_prefix(st, "%s: ", path);
  return st;
}
