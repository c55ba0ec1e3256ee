/* Results of a sweep: ownership and the public accessors. */
#include <math.h>

#include "bench/bench.h"

void alma__result_init(alma_result *r) {
  memset(r, 0, sizeof *r);
  r->id = -1;
  r->status = ALMA_RESULT_ERROR;
  snprintf(r->device, sizeof r->device, "cpu");
  r->throughput = r->total_elapsed_s = r->inference_s = r->load_s = r->convert_s = NAN;
  r->first_inference_ms = r->warmup_s = r->timer_overhead_ns = NAN;
  r->peak_rss_bytes = -1;
  r->flops_per_batch = r->bytes_per_batch = NAN;
  alma__latency_stats(NULL, 0, &r->latency);
  r->check.max_abs_err = r->check.max_rel_err = r->check.argmax_agreement = r->check.cosine_similarity = NAN;
  r->error_status = ALMA_OK;
  snprintf(r->mode, sizeof r->mode, "latency");
  alma__latency_stats(NULL, 0, &r->pre);
  alma__latency_stats(NULL, 0, &r->post);
  r->cache.build_s = NAN;
  r->cache.graph_bytes = -1;
  r->acc.top1 = r->acc.top1_drop = r->acc.seconds = NAN;
  r->clock_agreement = NAN;
  alma__repeat_clear(&r->rep);
  r->server.best = -1;
  r->origin.task = -1;
}

void alma__result_set_origin(alma_result *r, const alma_result_origin *o) {
  alma_result_origin *d = &r->origin;
  free((char *)d->model), free((char *)d->model_hash), free((char *)d->node), free((char *)d->partition);
  free((char *)d->machine), free((char *)d->job), free((char *)d->cpus);
  memset(d, 0, sizeof *d);
  d->task = -1;
  r->has_origin = o != NULL;
  if (!o) return;
#define DUP(f) d->f = o->f && o->f[0] ? alma__strdup(o->f) : NULL
  DUP(model), DUP(model_hash), DUP(node), DUP(partition), DUP(machine), DUP(job), DUP(cpus);
#undef DUP
  d->task = o->task;
}

const alma_result_origin *alma_result_origin_of(const alma_result *r) { return r && r->has_origin ? &r->origin : NULL; }

alma_status alma__results_append(alma_results *dst, alma_results *src) {
  if (src->n == 0) return ALMA_OK;
  alma_result *ni = realloc(dst->items, (size_t)(dst->n + src->n) * sizeof *ni);
  if (!ni) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dst->items = ni;
  for (int i = 0; i < src->n; i++) {
    alma_result *r = &src->items[i];
    if (!r->has_origin) {
      alma_result_origin o = {.model = src->model_path, .model_hash = src->model_hash, .task = -1};
      alma__result_set_origin(r, &o);
    }
    dst->items[dst->n++] = *r;  /* moved: src gives up its strings */
  }
  free(src->items);
  src->items = NULL;
  src->n = 0;
  return ALMA_OK;
}

void alma__results_relabel(alma_results *rs, const char *label) {
  free(rs->model_path);
  rs->model_path = alma__strdup(label);
  rs->model_hash[0] = rs->model_file_sha256[0] = 0;
  rs->model_file_bytes = 0;
  free(rs->inputs);
  free(rs->outputs);
  rs->inputs = rs->outputs = NULL;
  rs->n_inputs = rs->n_outputs = 0;
}

static void cache_info_free(alma_cache_info *c) {
  free((char *)c->status);
  free((char *)c->reason);
  free((char *)c->build);
  free((char *)c->dir);
  free((char *)c->key);
  memset(c, 0, sizeof *c);
}

void alma__scaling_point_clear(alma_scaling_point *p) {
  free((char *)p->stop_reason);
  free((char *)p->error);
  memset(p, 0, sizeof *p);
}

void alma__result_clear(alma_result *r) {
  free(r->conversion);
  free(r->affinity);
  free(r->stop_reason);
  for (int i = 0; i < r->n_warnings; i++) free(r->warnings[i]);
  free(r->warnings);
  free(r->error);
  free(r->failed_step);
  free(r->traceback);
  free(r->raw_ms);
  cache_info_free(&r->cache);
  for (int i = 0; i < r->n_scaling; i++) alma__scaling_point_clear(&r->scaling[i]);
  free(r->scaling);
  free(r->saved_path);
  free(r->runtime_info);
  free(r->placement);
  free(r->runtime_options);
  free(r->runtime_options_given);
  free((char *)r->acc.baseline);
  if (r->has_profile) alma__profile_clear(&r->prof);
  alma__contention_clear(&r->cont);
  alma__repeat_clear(&r->rep);
  alma__server_result_clear(&r->server);
  alma__result_set_origin(r, NULL);
  alma__result_init(r);
}

void alma__result_warn(alma_result *r, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  for (int i = 0; i < r->n_warnings; i++)
    if (!strcmp(r->warnings[i], msg)) return;  /* once is enough */
  char **nw = realloc(r->warnings, (size_t)(r->n_warnings + 1) * sizeof *nw);
  if (!nw) return;
  r->warnings = nw;
  if ((r->warnings[r->n_warnings] = alma__strdup(msg))) r->n_warnings++;
}

alma_result *alma__results_add(alma_results *rs) {
  alma_result *ni = realloc(rs->items, (size_t)(rs->n + 1) * sizeof *ni);
  if (!ni) return NULL;
  rs->items = ni;
  alma__result_init(&rs->items[rs->n]);
  return &rs->items[rs->n++];
}

const char *alma__result_status_str(alma_result_status s) {
  switch (s) {
    case ALMA_RESULT_OK: return "ok";
    case ALMA_RESULT_UNAVAILABLE: return "unavailable";
    default: return "error";
  }
}

void alma_results_free(alma_results *r) {
  if (!r) return;
  for (int i = 0; i < r->n; i++) alma__result_clear(&r->items[i]);
  free(r->items);
  free(r->inputs);
  free(r->outputs);
  free(r->model_path);
  free(r->data_desc);
  for (int i = 0; i < r->n_unavailable; i++) free(r->unavailable[i].reason);
  free(r->unavailable);
  free(r);
}

int alma_results_count(const alma_results *r) { return r ? r->n : 0; }
const alma_result *alma_results_get(const alma_results *r, int i) {
  return r && i >= 0 && i < r->n ? &r->items[i] : NULL;
}
int alma_results_n_failed(const alma_results *r) {
  int n = 0;
  for (int i = 0; r && i < r->n; i++) n += r->items[i].status != ALMA_RESULT_OK;
  return n;
}
const alma_system_info *alma_results_system(const alma_results *r) { return r ? &r->system : NULL; }
const alma_config *alma_results_config(const alma_results *r) { return r ? &r->config : NULL; }
const char *alma_results_model_path(const alma_results *r) { return r && r->model_path ? r->model_path : ""; }
const char *alma_results_model_hash(const alma_results *r) { return r ? r->model_hash : ""; }

#define S(x) ((x) ? (x) : "")
int alma_result_id(const alma_result *r) { return r->id; }
const char *alma_result_conversion(const alma_result *r) { return S(r->conversion); }
alma_result_status alma_result_status_code(const alma_result *r) { return r->status; }
const char *alma_result_status_name(const alma_result *r) { return alma__result_status_str(r->status); }
const char *alma_result_device(const alma_result *r) { return r->device; }
int64_t alma_result_batch_size(const alma_result *r) { return r->batch_size; }
int64_t alma_result_samples(const alma_result *r) { return r->samples; }
double alma_result_throughput(const alma_result *r) { return r->throughput; }
double alma_result_total_elapsed_s(const alma_result *r) { return r->total_elapsed_s; }
double alma_result_inference_s(const alma_result *r) { return r->inference_s; }
double alma_result_load_s(const alma_result *r) { return r->load_s; }
double alma_result_convert_s(const alma_result *r) { return r->convert_s; }
double alma_result_first_inference_ms(const alma_result *r) { return r->first_inference_ms; }
int64_t alma_result_peak_rss_bytes(const alma_result *r) { return r->peak_rss_bytes; }
int64_t alma_result_warmup_batches(const alma_result *r) { return r->warmup_batches; }
double alma_result_warmup_s(const alma_result *r) { return r->warmup_s; }
const alma_latency_stats *alma_result_latency(const alma_result *r) { return &r->latency; }
const alma_output_check *alma_result_check(const alma_result *r) { return &r->check; }
int alma_result_threads(const alma_result *r) { return r->threads; }
const char *alma_result_affinity(const alma_result *r) { return S(r->affinity); }
double alma_result_timer_overhead_ns(const alma_result *r) { return r->timer_overhead_ns; }
const char *alma_result_stop_reason(const alma_result *r) { return S(r->stop_reason); }
int alma_result_n_warnings(const alma_result *r) { return r->n_warnings; }
const char *alma_result_warning(const alma_result *r, int i) {
  return i >= 0 && i < r->n_warnings ? r->warnings[i] : "";
}
alma_status alma_result_error_status(const alma_result *r) { return r->error_status; }
const char *alma_result_error(const alma_result *r) { return S(r->error); }
const char *alma_result_failed_step(const alma_result *r) { return S(r->failed_step); }
const char *alma_result_traceback(const alma_result *r) { return S(r->traceback); }
int64_t alma_result_n_raw(const alma_result *r) { return r->n_raw; }
const double *alma_result_raw_ms(const alma_result *r) { return r->raw_ms; }

const char *alma_result_mode(const alma_result *r) { return r->mode; }
const alma_latency_stats *alma_result_preprocess(const alma_result *r) { return &r->pre; }
const alma_latency_stats *alma_result_postprocess(const alma_result *r) { return &r->post; }
const alma_cache_info *alma_result_cache(const alma_result *r) {
  static const alma_cache_info off = {"off", "", 0, "", "", "", NAN, -1};
  return r->cache.status ? &r->cache : &off;
}
const alma_accuracy *alma_result_accuracy(const alma_result *r) { return r->acc.samples > 0 ? &r->acc : NULL; }
void alma__result_set_baseline(alma_result *r, const char *baseline, double drop) {
  free((char *)r->acc.baseline);
  r->acc.baseline = alma__strdup(baseline ? baseline : "");
  r->acc.top1_drop = drop;
}
const alma_profile *alma_result_profile(const alma_result *r) { return r->has_profile ? &r->prof : NULL; }
const char *alma_result_saved_path(const alma_result *r) { return S(r->saved_path); }
const char *alma_result_runtime_info(const alma_result *r) { return S(r->runtime_info); }
const char *alma_result_placement(const alma_result *r) { return S(r->placement); }
const char *alma_result_runtime_options(const alma_result *r) { return S(r->runtime_options); }
const char *alma_result_runtime_options_given(const alma_result *r) { return S(r->runtime_options_given); }
int alma_result_saved_alma_ops(const alma_result *r) { return r->saved_alma_ops; }
const alma_server_result *alma_result_server(const alma_result *r) { return r && r->has_server ? &r->server : NULL; }
int alma_result_n_scaling(const alma_result *r) { return r->n_scaling; }
const alma_scaling_point *alma_result_scaling(const alma_result *r, int i) {
  return i >= 0 && i < r->n_scaling ? &r->scaling[i] : NULL;
}

void alma__result_set_cache(alma_result *r, const char *status, const char *reason, int stale, const char *build,
                            const char *dir, const char *key, double build_s, int64_t graph_bytes) {
  cache_info_free(&r->cache);
  r->cache.status = alma__strdup(status ? status : "off");
  r->cache.reason = alma__strdup(reason ? reason : "");
  r->cache.stale = stale;
  r->cache.build = alma__strdup(build ? build : "");
  r->cache.dir = alma__strdup(dir ? dir : "");
  r->cache.key = alma__strdup(key ? key : "");
  r->cache.build_s = build_s;
  r->cache.graph_bytes = graph_bytes;
}

alma_scaling_point *alma__result_add_scaling(alma_result *r) {
  alma_scaling_point *np = realloc(r->scaling, (size_t)(r->n_scaling + 1) * sizeof *np);
  if (!np) return NULL;
  r->scaling = np;
  alma_scaling_point *p = &np[r->n_scaling++];
  memset(p, 0, sizeof *p);
  alma__latency_stats(NULL, 0, &p->latency);
  p->duration_s = p->throughput_avg = p->throughput_peak = NAN;
  return p;
}

const alma_contention *alma_result_contention(const alma_result *r) { return r->cont.measured ? &r->cont : NULL; }
int alma_result_disturbed(const alma_result *r) { return r->cont.measured && r->cont.disturbed; }
double alma_result_clock_agreement(const alma_result *r) { return r->clock_agreement; }
const alma_repeat_stats *alma_result_repeats(const alma_result *r) { return r->rep.k >= 2 ? &r->rep : NULL; }
double alma_result_median_ms(const alma_result *r, double ci[2]) {
  const alma_repeat_stats *s = alma_result_repeats(r);
  if (ci) {
    ci[0] = s ? s->ci95[0] : r->latency.median_ci95[0];
    ci[1] = s ? s->ci95[1] : r->latency.median_ci95[1];
  }
  return s ? s->median_ms : r->latency.p50;
}
