/* The text report: a header (model, machine, settings), a block per conversion, and a summary
 * table ranked by median latency, with the speed-up over the first conversion from the medians. */
#include <cjson/cJSON.h>
#include <math.h>

#include "report/report.h"

static const char *ms(double v, char *buf, size_t n) {
  if (!isfinite(v)) snprintf(buf, n, "-");
  else if (v >= 100) snprintf(buf, n, "%.1f", v);
  else if (v >= 10) snprintf(buf, n, "%.2f", v);
  else if (v >= 0.01) snprintf(buf, n, "%.3f", v);
  else snprintf(buf, n, "%.3g", v);
  return buf;
}

static const char *mib(int64_t b, char *buf, size_t n) {
  if (b < 0) snprintf(buf, n, "unknown");
  else if (b >= ((int64_t)1 << 30)) snprintf(buf, n, "%.2f GiB", (double)b / (1 << 30));
  else snprintf(buf, n, "%.1f MiB", (double)b / (1 << 20));
  return buf;
}

static void print_header(const alma_results *r, FILE *f) {
  const alma_system_info *s = &r->system;
  const alma_config *c = &r->config;
  char b1[32];
  fprintf(f, "model    %s", r->model_path && *r->model_path ? alma__safe(r->model_path) : "(loaded model)");
  if (r->model_hash[0]) fprintf(f, "  (hash %.12s)", r->model_hash);
  fputc('\n', f);
  for (int i = 0; i < r->n_inputs; i++) {
    char shp[128];
    alma__shape_str(r->inputs[i].rank, r->inputs[i].dims, shp, sizeof shp);
    fprintf(f, "input    %s %s %s%s%s\n", alma__safe(r->inputs[i].name), r->inputs[i].dtype, shp,
            r->inputs[i].declared[0] ? "  declared " : "", r->inputs[i].declared);
  }
  fprintf(f, "machine  %s, %d cores (%d logical), %s, governor %s, load %.2f\n",
          s->cpu_model[0] ? s->cpu_model : "unknown CPU", s->physical_cores, s->logical_cores,
          mib(s->memory_bytes, b1, sizeof b1), s->governor, s->load_average[0]);
  fprintf(f, "settings batch %lld, n_samples %lld, min_time %gs, warm-up %lld batches/%gs, seed %llu, data %s, %s\n",
          (long long)c->batch_size, (long long)c->n_samples, c->min_time_s, (long long)c->warmup, c->warmup_s,
          (unsigned long long)c->seed, r->data_desc ? r->data_desc : "random",
          c->multiprocessing ? "one process per conversion" : "in-process");
  if (!strcmp(c->scenario, "server"))
    fprintf(f, "scenario Server: p%g latency within %g ms, target %s%s queries/s\n", c->latency_percentile,
            c->latency_bound_ms, c->target_qps > 0 ? "" : "auto (search)",
            c->target_qps > 0 ? (snprintf(b1, sizeof b1, "%g", c->target_qps), b1) : "");
  if (c->batch_sizes[0] || c->duration_s > 0 || c->throughput)
    fprintf(f, "sweep    batch sizes %s, timed phases %g s%s%s%s%s%s\n", c->batch_sizes[0] ? c->batch_sizes : "-",
            c->duration_s > 0 ? c->duration_s : c->min_time_s, c->duration_s > 0 ? " (duration_s)" : " (min_time_s)",
            c->throughput ? ", throughput mode: instances " : "", c->throughput ? c->instances : "",
            c->throughput ? " x workers " : "", c->throughput ? c->workers : "");
  fputc('\n', f);
}

static void print_cache(const alma_result *x, FILE *f) {
  const alma_cache_info *c = alma_result_cache(x);
  if (!x->cache.status) return;
  if (!strcmp(c->status, "hit"))
    fprintf(f, "      cache      hit: build %s loaded, passes skipped (built in %.3g s)%s%s\n", c->build, c->build_s,
            c->reason[0] ? "; " : "", c->reason);
  else if (!strcmp(c->status, "built"))
    fprintf(f, "      cache      built (%s)%s%s\n", c->reason[0] ? c->reason : "stored", c->build[0] ? ", stored as " : "",
            c->build);
  else
    fprintf(f, "      cache      off%s%s\n", c->reason[0] ? ": " : "", c->reason);
}

/* Where the nodes ran (the results' placement): counts per placement, and why nodes fell back to
 * EAGER. Left out for EAGER itself, where every node is its own. */
static void print_placement(const alma_result *x, FILE *f) {
  cJSON *o = x->placement ? cJSON_Parse(x->placement) : NULL, *it;
  const cJSON *rt = cJSON_GetObjectItemCaseSensitive(o, "runtime");
  if (!cJSON_IsObject(o) || !cJSON_IsString(rt) || !strcmp(rt->valuestring, "EAGER")) {
    cJSON_Delete(o);
    return;
  }
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, "nodes");
  fprintf(f, "      placement  %d nodes:", cJSON_IsNumber(n) ? n->valueint : 0);
  int k = 0;
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(o, "placements"))
    if (cJSON_IsNumber(it) && it->valueint) fprintf(f, "%s %d %s", k++ ? "," : "", it->valueint, it->string);
  k = 0;
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(o, "declined"))
    if (cJSON_IsNumber(it)) fprintf(f, "%s%s %d", k++ ? ", " : "; on EAGER for: ", it->string, it->valueint);
  fputc('\n', f);
  cJSON_Delete(o);
}

/* The runtime's facts (alma_result_runtime_info), "key value" pairs in its order. */
static void print_runtime_info(const alma_result *x, FILE *f) {
  cJSON *o = x->runtime_info ? cJSON_Parse(x->runtime_info) : NULL, *it;
  if (!cJSON_IsObject(o)) {
    cJSON_Delete(o);
    return;
  }
  fprintf(f, "      runtime   ");
  int k = 0;
  cJSON_ArrayForEach(it, o) {
    fprintf(f, "%s %s ", k++ ? "," : "", it->string);
    if (cJSON_IsString(it)) fputs(it->valuestring, f);
    else if (cJSON_IsNumber(it)) fprintf(f, "%.4g", it->valuedouble);
    else if (cJSON_IsBool(it)) fputs(cJSON_IsTrue(it) ? "true" : "false", f);
    else fputs("-", f);
  }
  fputc('\n', f);
  cJSON_Delete(o);
}

static void print_saved(const alma_result *x, FILE *f) {
  if (!x->saved_path) return;
  if (x->saved_alma_ops)
    fprintf(f, "      saved      %s (%d alma-domain op%s: alma runs it, ONNX Runtime cannot)\n", x->saved_path,
            x->saved_alma_ops, x->saved_alma_ops == 1 ? "" : "s");
  else
    fprintf(f, "      saved      %s (standard ONNX ops only)\n", x->saved_path);
}

/* "98.89%", with " (-0.28)" points against the baseline when there is one (and it is another). */
static const char *top1_str(const alma_result *x, char *buf, size_t n) {
  const alma_accuracy *a = alma_result_accuracy(x);
  if (!a) return "-";
  int len = snprintf(buf, n, "%.2f%%", 100 * a->top1);
  if (len > 0 && (size_t)len < n && a->baseline && *a->baseline && isfinite(a->top1_drop) &&
      strcmp(a->baseline, x->conversion ? x->conversion : ""))
    snprintf(buf + len, n - (size_t)len, " (%+.2f)", -100 * a->top1_drop + 0.0);
  return buf;
}

/* --profile: the 10 slowest entries and the op-type table (every type up to 15, the rest summed);
 * "not available" with the reason. */
#define PROFILE_TOP_NODES 10
#define PROFILE_TOP_OPS 15
void alma__profile_print(const alma_profile *p, FILE *f) {
  char a[32], b[32];
  if (!p) return;
  if (p->unavailable) {
    fprintf(f, "      profile    not available: %s\n", p->unavailable);
    return;
  }
  fprintf(f, "      profile    %s, %lld batches in %.3g s with every node timed: %s ms per batch", p->runtime,
          (long long)p->batches, p->seconds, ms(p->batch_ms, a, sizeof a));
  if (isfinite(p->overhead))  /* the timed phase's mean, untimed nodes: what the timing costs, within noise */
    fprintf(f, " (timed phase %s ms, %+.1f%%)", ms(p->batch_ms / (1 + p->overhead), b, sizeof b), 100 * p->overhead);
  fprintf(f, ", %s ms of it in nodes (%.1f%%)\n", ms(p->nodes_ms, b, sizeof b),
          p->batch_ms > 0 ? 100 * p->nodes_ms / p->batch_ms : 0.0);
  fprintf(f, "                 %9s  %6s  %-18s  %s\n", "ms/batch", "share", "placement", "node (op type)");
  double rest = 0;
  for (int i = 0; i < p->n_nodes; i++) {
    const alma_profile_node *e = &p->nodes[i];
    if (i >= PROFILE_TOP_NODES) {
      rest += e->ms;
      continue;
    }
    char grp[64] = "";
    int o = e->members > 1 ? snprintf(grp, sizeof grp, ", %d nodes", e->members) : 0;
    if (e->declined && e->declined[0]) /* placement as data: why (some of) it ran on EAGER's kernel */
      snprintf(grp + o, sizeof grp - (size_t)o, "; %s on EAGER: %s", e->place && !strcmp(e->place, "partial") ? "some runs" : "ran",
               e->declined);
    fprintf(f, "                 %9s  %5.1f%%  %-18s  %s (%s%s)\n", ms(e->ms, a, sizeof a),
            isfinite(e->share) ? 100 * e->share : 0.0, e->placement, alma__safe(e->name), alma__safe(e->op_type), grp);
  }
  if (p->n_nodes > PROFILE_TOP_NODES)
    fprintf(f, "                 %9s  %5.1f%%  %-18s  (%d more)\n", ms(rest, a, sizeof a),
            p->batch_ms > 0 ? 100 * rest / p->batch_ms : 0.0, "", p->n_nodes - PROFILE_TOP_NODES);
  fprintf(f, "      by op type %9s  %6s  %5s  %s\n", "ms/batch", "share", "nodes", "op type");
  rest = 0;
  int rest_nodes = 0;
  for (int i = 0; i < p->n_ops; i++) {
    const alma_profile_op *o = &p->ops[i];
    if (i >= PROFILE_TOP_OPS) {
      rest += o->ms;
      rest_nodes += o->nodes;
      continue;
    }
    fprintf(f, "                 %9s  %5.1f%%  %5d  %s\n", ms(o->ms, a, sizeof a), isfinite(o->share) ? 100 * o->share : 0.0,
            o->nodes, o->op_type);
  }
  if (p->n_ops > PROFILE_TOP_OPS)
    fprintf(f, "                 %9s  %5.1f%%  %5d  (%d more op types)\n", ms(rest, a, sizeof a),
            p->batch_ms > 0 ? 100 * rest / p->batch_ms : 0.0, rest_nodes, p->n_ops - PROFILE_TOP_OPS);
}

/* What CPU the timed phase got (alma_contention) and the clock check. */
static void print_cpu(const alma_result *x, FILE *f) {
  const alma_contention *c = alma_result_contention(x);
  if (!c) return;
  fprintf(f, "      cpu        %.3g s CPU over %.3g s on %d CPU%s (%.0f%% of %d thread%s)", c->cpu_s, c->wall_s, c->cpus,
          c->cpus == 1 ? "" : "s", isfinite(c->utilization) ? 100 * c->utilization : 0.0, c->threads,
          c->threads == 1 ? "" : "s");
  if (isfinite(c->cpu_share)) fprintf(f, ", got %.0f%% of what it was ready to use", 100 * c->cpu_share);
  if (isfinite(c->others_cpu_s)) fprintf(f, ", others %.3g s on its CPUs", c->others_cpu_s);
  fprintf(f, "%s\n", c->disturbed ? ": DISTURBED" : "");
  if (isfinite(x->clock_agreement))
    fprintf(f, "      clock      batch latencies account for %.2f%% of the timed phase's wall time\n",
            100 * x->clock_agreement);
}

/* A row of repeats: each process's median, and which were disturbed. */
static void print_repeats(const alma_result *x, FILE *f) {
  const alma_repeat_stats *s = alma_result_repeats(x);
  char a[32], b[32], c[32];
  if (!s) return;
  fprintf(f, "      repeats    %d processes: median of medians %s ms [%s, %s], between-process spread %.1f%%, CV %.1f%%\n",
          s->k, ms(s->median_ms, a, sizeof a), ms(s->ci95[0], b, sizeof b), ms(s->ci95[1], c, sizeof c),
          isfinite(s->spread) ? 100 * s->spread : 0.0, isfinite(s->cv) ? 100 * s->cv : 0.0);
  if (isfinite(s->next95[0]))
    fprintf(f, "                 a new process's median: 95%% within [%s, %s] ms\n", ms(s->next95[0], a, sizeof a),
            ms(s->next95[1], b, sizeof b));
  fprintf(f, "                 medians");
  for (int i = 0; i < s->k; i++)
    fprintf(f, " %s%s", ms(s->runs[i].median_ms, a, sizeof a), s->runs[i].disturbed ? "*" : "");
  fprintf(f, " ms%s\n", s->n_disturbed ? " (* disturbed)" : "");
}

static void print_block(const alma_result *x, FILE *f, int include_traceback) {
  char a[32], b[32], c[32], d[32], e[32], g[32], h[32];
  char id[16] = "  -";
  if (x->id >= 0) snprintf(id, sizeof id, "%3d", x->id);
  if (x->status == ALMA_RESULT_UNAVAILABLE) {
    fprintf(f, "[%s] %s: unavailable: %s\n", id, x->conversion, x->error ? x->error : "");
  } else if (x->status == ALMA_RESULT_ERROR) {
    fprintf(f, "[%s] %s: error%s%s%s: %s\n", id, x->conversion, x->failed_step ? " in step '" : "",
            x->failed_step ? x->failed_step : "", x->failed_step ? "'" : "", x->error ? x->error : "");
    if (include_traceback && x->traceback) {
      fputs("      traceback:\n", f);
      const char *p = x->traceback;
      while (*p) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        fprintf(f, "        %.*s\n", len, p);
        p += len + (nl ? 1 : 0);
      }
    } else if (x->traceback) {
      fputs("      (traceback: run with -v, or see the JSON)\n", f);
    }
    print_saved(x, f);  /* written before the failure */
  } else if (!strcmp(x->mode, "build")) {
    fprintf(f, "[%s] %s: built (not timed: build_only), batch %lld, convert %s ms, peak RSS %s\n", id, x->conversion,
            (long long)x->batch_size, ms(1e3 * x->convert_s, a, sizeof a), mib(x->peak_rss_bytes, b, sizeof b));
    print_cache(x, f);
    print_saved(x, f);
  } else {
    const alma_latency_stats *s = &x->latency;
    fprintf(f, "[%s] %s: ok on %s, %d thread%s, CPUs %s%s\n", id, x->conversion, x->device, x->threads,
            x->threads == 1 ? "" : "s", x->affinity ? x->affinity : "?",
            x->n_scaling ? "; latency mode (one request at a time)" : "");
    fprintf(f, "      latency    median %s ms [%s, %s]  mean %s ms [%s, %s]  stdev %s (CV %.1f%%)\n",
            ms(s->p50, a, sizeof a), ms(s->median_ci95[0], b, sizeof b), ms(s->median_ci95[1], c, sizeof c),
            ms(s->mean, d, sizeof d), ms(s->mean_ci95[0], e, sizeof e), ms(s->mean_ci95[1], g, sizeof g),
            ms(s->stdev, h, sizeof h), isfinite(s->cv) ? 100 * s->cv : 0.0);
    fprintf(f, "                 min %s  p90 %s  p95 %s  p99 %s  max %s  (%lld batches; 95%% CIs)\n",
            ms(s->min, a, sizeof a), ms(s->p90, b, sizeof b), ms(s->p95, c, sizeof c), ms(s->p99, d, sizeof d),
            ms(s->max, e, sizeof e), (long long)s->n);
    fprintf(f, "      throughput %.4g samples/s  (%lld samples in batches of %lld: %.3g s inference, %.3g s total)\n",
            x->throughput, (long long)x->samples, (long long)x->batch_size, x->inference_s, x->total_elapsed_s);
    fprintf(f, "      phases     load %s ms, convert %s ms, first inference %s ms, warm-up %lld batches in %.3g s\n",
            ms(1e3 * x->load_s, a, sizeof a), ms(1e3 * x->convert_s, b, sizeof b), ms(x->first_inference_ms, c, sizeof c),
            (long long)x->warmup_batches, isfinite(x->warmup_s) ? x->warmup_s : 0.0);
    if (x->pre.n || x->post.n)
      fprintf(f, "      hooks      preprocess %s ms, postprocess %s ms per batch (mean; not in the latency)\n",
              x->pre.n ? ms(x->pre.mean, a, sizeof a) : "-", x->post.n ? ms(x->post.mean, b, sizeof b) : "-");
    fprintf(f, "      memory     peak RSS %s\n", mib(x->peak_rss_bytes, a, sizeof a));
    print_runtime_info(x, f);
    if (x->runtime_options_given && x->runtime_options_given[0])
      fprintf(f, "      options    %s (given; the rest at their defaults)\n", x->runtime_options_given);
    print_placement(x, f);
    print_cache(x, f);
    if (x->check.performed)
      fprintf(f, "      check      %s vs EAGER: max abs err %.3g, max rel err %.3g, argmax %s, cosine %.6f\n",
              x->check.passed ? "passed" : "FAILED", x->check.max_abs_err, x->check.max_rel_err,
              isfinite(x->check.argmax_agreement) ? (snprintf(a, sizeof a, "%.1f%%", 100 * x->check.argmax_agreement), a) : "n/a",
              x->check.cosine_similarity);
    else
      fprintf(f, "      check      not performed\n");
    const alma_accuracy *acc = alma_result_accuracy(x);
    if (acc) {
      fprintf(f, "      accuracy   top-1 %.2f%% (%lld of %lld labelled samples; %.3g s, not timed)", 100 * acc->top1,
              (long long)acc->correct, (long long)acc->samples, isfinite(acc->seconds) ? acc->seconds : 0.0);
      if (acc->baseline && *acc->baseline && strcmp(acc->baseline, x->conversion) && isfinite(acc->top1_drop))
        fprintf(f, ", %+.2f points vs %s", -100 * acc->top1_drop + 0.0, acc->baseline);
      fputc('\n', f);
    }
    print_saved(x, f);
    if (x->stop_reason) fprintf(f, "      stopped    %s (timer overhead %.0f ns)\n", x->stop_reason, x->timer_overhead_ns);
    print_cpu(x, f);
    print_repeats(x, f);
    alma__profile_print(alma_result_profile(x), f);
  }
  for (int i = 0; i < x->n_warnings; i++) fprintf(f, "      warning: %s\n", x->warnings[i]);
}

/* The summary ranks and compares by one statistic, the median latency per batch: robust to the
 * outliers a shared machine adds, and shown with its 95% CI. */
static int timed_ok(const alma_result *x) {
  return x->status == ALMA_RESULT_OK && strcmp(x->mode, "build") && isfinite(x->latency.p50) && x->latency.p50 > 0;
}

static int by_median_asc(const void *pa, const void *pb) {
  const alma_result *a = *(const alma_result *const *)pa, *b = *(const alma_result *const *)pb;
  int ao = timed_ok(a), bo = timed_ok(b);
  if (ao != bo) return bo - ao;
  if (!ao) return (a > b) - (a < b);  /* failures keep their order */
  double ma = alma_result_median_ms(a, NULL), mb = alma_result_median_ms(b, NULL);
  if (ma != mb) return ma > mb ? 1 : -1;
  return (a > b) - (a < b);
}

/* Why a row's numbers should not be trusted, "" when nothing says so: high variability, drift
 * between the run's halves, a wide CI of the median, or a runtime's own warning of load. */
static const char *unreliable(const alma_result *x) {
  const alma_latency_stats *s = &x->latency;
  if (!timed_ok(x)) return "";
  if (isfinite(s->cv) && s->cv > ALMA__CV_WARN) return "cv";
  if (isfinite(s->median_ci95[0]) && isfinite(s->median_ci95[1]) &&
      s->median_ci95[1] - s->median_ci95[0] > 0.2 * s->p50)
    return "ci";
  for (int i = 0; i < x->n_warnings; i++)
    if (!strncmp(x->warnings[i], "drift:", 6) || strstr(x->warnings[i], "under load")) return "warning";
  return "";
}

static const char *cache_word(const alma_result *x, char *buf, size_t n) {
  if (!x->cache.status) return "-";
  snprintf(buf, n, "%s%s", x->cache.status, x->cache.stale && !strcmp(x->cache.status, "hit") ? " (stale)" : "");
  return buf;
}

/* The throughput mode's table: one row per conversion, batch size and configuration. */
static void print_scaling(const alma_results *r, FILE *f, int width) {
  int any = 0;
  for (int i = 0; i < r->n; i++) any |= r->items[i].n_scaling > 0;
  if (!any) return;
  fprintf(f, "\nthroughput mode (all copies busy; samples/s over the timed window, peak = busiest second)\n");
  fprintf(f, "%-*s  %5s  %9s  %7s  %8s  %12s  %12s  %10s  %10s  %10s  %10s\n", width, "conversion", "batch", "instances",
          "workers", "thr/inst", "samples/s", "peak/s", "p50 ms", "p90 ms", "p99 ms", "inferences");
  int conc = 0;
  for (int i = 0; i < r->n; i++) {
    const alma_result *x = &r->items[i];
    for (int k = 0; k < x->n_scaling; k++) {
      const alma_scaling_point *p = &x->scaling[k];
      char a[32], b[32], c[32];
      if (p->error) {
        fprintf(f, "%-*s  %5lld  %9d  %7d  %8d  error: %s\n", width, x->conversion, (long long)x->batch_size, p->instances,
                p->workers, p->threads_per_instance, p->error);
        continue;
      }
      conc |= p->concurrent;
      fprintf(f, "%-*s  %5lld  %9d  %7d  %8d  %12.4g  %12.4g  %9s%s  %9s%s  %9s%s  %10lld\n", width, x->conversion,
              (long long)x->batch_size, p->instances, p->workers, p->threads_per_instance, p->throughput_avg,
              p->throughput_peak, ms(p->latency.p50, a, sizeof a), p->concurrent ? "*" : " ", ms(p->latency.p90, b, sizeof b),
              p->concurrent ? "*" : " ", ms(p->latency.p99, c, sizeof c), p->concurrent ? "*" : " ", (long long)p->inferences);
    }
  }
  if (conc)
    fprintf(f, "* latency read from a concurrent run: it includes contention; single-stream latency is in the table above\n");
}

/* The server scenario's table: one row per conversion and batch size (its reported run), and in
 * the search's trail every rate tried. */
static void print_server(const alma_results *r, FILE *f, int width) {
  int any = 0;
  for (int i = 0; i < r->n; i++) any |= r->items[i].has_server;
  if (!any) return;
  const alma_server_result *first = NULL;
  for (int i = 0; i < r->n && !first; i++)
    if (r->items[i].has_server) first = &r->items[i].server;
  fprintf(f, "\nserver scenario (Poisson arrivals; latency from arrival, queueing included; p%g bound %g ms)\n",
          first->percentile, first->latency_bound_ms);
  fprintf(f, "%-*s  %5s  %9s  %12s  %12s  %10s  %10s  %10s  %8s  %s\n", width, "conversion", "batch", "sessions",
          "target q/s", "achieved q/s", "p50 ms", "p99 ms", "at pct ms", "result", "search (q/s tried)");
  for (int i = 0; i < r->n; i++) {
    const alma_result *x = &r->items[i];
    if (!x->has_server) continue;
    const alma_server_result *sv = &x->server;
    char sess[24];
    snprintf(sess, sizeof sess, "%dx%d", sv->instances, sv->workers);
    if (sv->error) {
      fprintf(f, "%-*s  %5lld  %9s  error: %s\n", width, x->conversion, (long long)x->batch_size, sess, sv->error);
      continue;
    }
    const alma_server_run *b = sv->best >= 0 && sv->best < sv->n_runs ? &sv->runs[sv->best] : NULL;
    char a[32], c[32], d[32], trail[512] = "";
    size_t len = 0;
    for (int k = 0; sv->search && k < sv->n_runs && len < sizeof trail - 32; k++)
      len += (size_t)snprintf(trail + len, sizeof trail - len, sv->runs[k].target_qps >= 100 ? "%s%.0f%s" : "%s%.3g%s",
                              k ? " " : "", sv->runs[k].target_qps, sv->runs[k].valid ? "" : "x");
    if (!b) {
      fprintf(f, "%-*s  %5lld  %9s  %12s  %12s  %10s  %10s  %10s  %8s  %s\n", width, x->conversion,
              (long long)x->batch_size, sess, "-", "-", "-", "-", "-", "INVALID", trail);
      continue;
    }
    fprintf(f, "%-*s  %5lld  %9s  %12.5g  %12.5g  %10s  %10s  %10s  %8s  %s\n", width, x->conversion,
            (long long)x->batch_size, sess, b->target_qps, b->achieved_qps, ms(b->latency.p50, a, sizeof a),
            ms(b->latency.p99, c, sizeof c), ms(b->percentile_ms, d, sizeof d), b->valid ? "VALID" : "INVALID", trail);
    if (!b->valid && b->reason) fprintf(f, "%-*s  %s\n", width, "", b->reason);
  }
  if (first->search) fprintf(f, "search: the highest VALID rate tried is reported; x marks the INVALID ones\n");
}

alma_status alma_results_print_summary(const alma_results *r, FILE *f) {
  if (!r || !f) return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_results_print_summary: NULL argument");
  if (r->n == 0) {
    fputs("no conversions ran\n", f);
    return ALMA_OK;
  }
  const alma_result **v = malloc((size_t)r->n * sizeof *v);
  if (!v) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  int width = 10, sweep = 0, cached = 0, accuracy = 0;
  for (int i = 0; i < r->n; i++) {
    v[i] = &r->items[i];
    int w = v[i]->conversion ? (int)strlen(v[i]->conversion) : 0;
    if (w > width) width = w;
    sweep |= v[i]->batch_size != r->items[0].batch_size;
    cached |= v[i]->cache.status != NULL;
    accuracy |= v[i]->acc.samples > 0;
  }
  qsort(v, (size_t)r->n, sizeof *v, by_median_asc);
  int noisy = 0, disturbed = 0, repeated = 0;
  /* With a batch-size sweep, one table per batch size: speed-ups compare like with like. */
  int64_t done_bs[64];
  int n_done = 0;
  for (int pass = 0; pass < r->n; pass++) {
    int64_t bs = r->items[pass].batch_size;
    int seen = 0;
    for (int k = 0; k < n_done; k++) seen |= done_bs[k] == bs;
    if (seen || (!sweep && pass > 0)) continue;
    if (n_done < 64) done_bs[n_done++] = bs;
    const alma_result *base = NULL;
    for (int i = 0; i < r->n && !base; i++) {
      const alma_result *x = &r->items[i];
      if ((!sweep || x->batch_size == bs) && timed_ok(x)) base = x;
    }
    if (sweep) fprintf(f, "%sbatch size %lld\n", n_done > 1 ? "\n" : "", (long long)bs);
    fprintf(f, "%4s  %-*s  %-11s  %12s  %-28s  %10s  %8s  ", "id", width, "conversion", "status", "samples/s",
            "median ms [95% CI]", "p99 ms", "speed-up");
    if (accuracy) fprintf(f, "%-16s  ", "top-1");
    fprintf(f, "%s\n", cached ? "check    cache" : "check");
    const alma_result *acc_base = NULL;
    for (int i = 0; i < r->n; i++) {
      const alma_result *x = v[i];
      if (sweep && x->batch_size != bs) continue;
      char id[16] = "-", tp[32] = "-", md[96] = "-", p99[32] = "-", su[32] = "-", cw[48], st[24];
      if (x->id >= 0) snprintf(id, sizeof id, "%d", x->id);
      const char *chk = "-";
      const char *status = alma__result_status_str(x->status);
      if (x->status == ALMA_RESULT_OK && !strcmp(x->mode, "build")) {
        status = "built";
      } else if (x->status == ALMA_RESULT_OK) {
        chk = !x->check.performed ? "not run" : x->check.passed ? "ok" : "FAILED";
      }
      if (timed_ok(x)) {
        const alma_latency_stats *s = &x->latency;
        char m0[32], m1[32], m2[32];
        /* a row of repeats: the median of medians and its between-process interval */
        double ci[2], med = alma_result_median_ms(x, ci);
        repeated |= x->rep.k >= 2;
        snprintf(tp, sizeof tp, "%.4g", 1e3 * (double)x->batch_size / med);
        if (isfinite(ci[0]) && isfinite(ci[1]))
          snprintf(md, sizeof md, "%s [%s, %s]", ms(med, m0, sizeof m0), ms(ci[0], m1, sizeof m1), ms(ci[1], m2, sizeof m2));
        else
          snprintf(md, sizeof md, "%s", ms(med, m0, sizeof m0));
        ms(s->p99, p99, sizeof p99);
        if (base) {
          double ratio = alma_result_median_ms(base, NULL) / med;
          snprintf(su, sizeof su, ratio >= 0.1 ? "%.2fx" : "%.2gx", ratio);
        }
        if (alma_result_disturbed(x)) {
          snprintf(st, sizeof st, "%s, disturbed", status);
          status = st;
          disturbed = 1;
        } else if (*unreliable(x)) {
          snprintf(st, sizeof st, "%s, noisy", status);
          status = st;
          noisy = 1;
        }
      }
      fprintf(f, "%4s  %-*s  %-11s  %12s  %-28s  %10s  %8s  ", id, width, x->conversion ? x->conversion : "", status, tp,
              md, p99, su);
      if (accuracy) {
        char t1[48];
        fprintf(f, "%-16s  ", top1_str(x, t1, sizeof t1));
        if (!acc_base && x->acc.samples > 0) acc_base = x;
      }
      if (cached) fprintf(f, "%-7s  %s", chk, cache_word(x, cw, sizeof cw));
      else fputs(chk, f);
      fputc('\n', f);
    }
    if (base)
      fprintf(f, "ranked by median latency per batch; samples/s = batch size / median; speed-up = median of %s / "
              "median\n", base->conversion);
    if (acc_base)
      fprintf(f, "top-1: share of the %lld labelled samples whose argmax (first output) is their label%s%s%s\n",
              (long long)acc_base->acc.samples, acc_base->acc.baseline && *acc_base->acc.baseline ? "; (+-x): points vs " : "",
              acc_base->acc.baseline ? acc_base->acc.baseline : "", acc_base->acc.baseline && *acc_base->acc.baseline ? ", the first conversion without a lossy step" : "");
  }
  if (repeated)
    fprintf(f, "repeats: median of the processes' medians, 95%% CI from a hierarchical bootstrap over processes and "
            "batches (between-process variance included)\n");
  if (disturbed)
    fprintf(f, "disturbed: the timed phase got clearly less CPU than it needed (other processes, steal): the row's "
            "warning has the figures; its numbers are not the machine's\n");
  if (noisy)
    fprintf(f, "noisy: CV above %.0f%%, the median's 95%% CI wider than +-10%%, drift or load warned in the row's block: "
            "compare on an idle machine\n", 100 * ALMA__CV_WARN);
  {
    const alma_system_info *si = &r->system;
    if (si->logical_cores > 0 && si->load_average[0] >= si->logical_cores)
      fprintf(f, "busy machine: load average %.2f on %d logical CPUs when the sweep began: other work shared the CPUs\n",
              si->load_average[0], si->logical_cores);
  }
  for (int i = 0; i < r->n; i++)
    if (r->items[i].status != ALMA_RESULT_OK)
      fprintf(f, "%s %s: %s\n", r->items[i].conversion ? r->items[i].conversion : "?",
              alma__result_status_str(r->items[i].status), r->items[i].error ? r->items[i].error : "");
  print_scaling(r, f, width);
  print_server(r, f, width);
  free(v);
  return ferror(f) ? alma__errorf(ALMA_ERR_IO, "error writing the report") : ALMA_OK;
}

/* The roofline lines: the machine's peak, then each timed row's achieved rate against it. */
static void print_roofline(const alma_results *r, FILE *f) {
  const alma__machine_peak *p = &r->peak;
  int any = 0, width = 10;
  for (int i = 0; i < r->n; i++) {
    any |= isfinite(alma__result_roofline(r, &r->items[i]).achieved_gflops);
    int w = r->items[i].conversion ? (int)strlen(r->items[i].conversion) : 0;
    if (w > width) width = w;
  }
  if (!any) return;
  if (p->measured)
    fprintf(f, "\nroofline: peak %.4g GFLOP/s (SGEMM, %s, %d threads), memory %.3g GB/s (triad), %s %s%s\n", p->gflops,
            p->sgemm_library, p->threads, p->bandwidth_gbs, p->cached ? "cached from" : "measured", p->measured_at,
            isfinite(p->load_average) && r->system.logical_cores > 0 && p->load_average >= r->system.logical_cores
                ? " (under load: the peak may be low)" : "");
  else
    fprintf(f, "\nroofline: the machine's peak is unknown (%s)\n", p->reason[0] ? p->reason : "not measured");
  fprintf(f, "  %-*s  %6s  %12s  %8s  %10s  %s\n", width, "conversion", "batch", "GFLOP/s", "of peak", "FLOP/byte", "bound");
  for (int i = 0; i < r->n; i++) {
    const alma_result *x = &r->items[i];
    alma__roofline rf = alma__result_roofline(r, x);
    if (!isfinite(rf.achieved_gflops)) continue;
    char share[32] = "-", bound[96] = "-";
    if (isfinite(rf.share_of_peak)) snprintf(share, sizeof share, "%.1f%%", 100 * rf.share_of_peak);
    if (rf.bound)
      snprintf(bound, sizeof bound, "%s%s", rf.bound,
               rf.share_of_attainable > 1 ? " (above the memory roof: its data stays in cache)" : "");
    fprintf(f, "  %-*s  %6lld  %12.4g  %8s  %10.3g  %s\n", width, x->conversion ? x->conversion : "",
            (long long)x->batch_size, rf.achieved_gflops, share, rf.intensity, bound);
  }
}

alma_status alma_results_print(const alma_results *r, FILE *f, int include_traceback) {
  if (!r || !f) return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_results_print: NULL argument");
  print_header(r, f);
  for (int i = 0; i < r->n; i++) {
    print_block(&r->items[i], f, include_traceback);
    fputc('\n', f);
  }
  alma_status st = alma_results_print_summary(r, f);
  print_roofline(r, f);
  return st;
}
