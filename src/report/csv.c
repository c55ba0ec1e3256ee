/* CSV results: one row per result (conversion x batch size, its latency mode) followed by one row
 * per throughput configuration of it; RFC 4180 quoting, empty fields for unknown values. */
#include <errno.h>
#include <math.h>

#include "bench/bench.h"

static const char *const columns[] = {
    "id", "conversion", "status", "device", "batch_size", "samples", "throughput_samples_per_s",
    "total_elapsed_s", "inference_s", "load_s", "convert_s", "first_inference_ms", "peak_rss_bytes",
    "warmup_batches", "threads", "latency_mean_ms", "latency_stdev_ms", "latency_cv", "latency_min_ms",
    "latency_p50_ms", "latency_p90_ms", "latency_p95_ms", "latency_p99_ms", "latency_max_ms",
    "latency_mean_ci95_lo_ms", "latency_mean_ci95_hi_ms", "latency_median_ci95_lo_ms",
    "latency_median_ci95_hi_ms", "latency_n", "check_performed", "check_max_abs_err", "check_max_rel_err",
    "check_argmax_agreement", "check_cosine", "check_passed", "warnings", "error",
    /* appended later, so that readers by position keep working */
    "mode", "instances", "workers", "threads_per_instance", "concurrent", "duration_s", "inferences",
    "throughput_avg", "throughput_peak", "cache", "cache_build", "cache_reason", "preprocess_mean_ms",
    "postprocess_mean_ms",
    /* appended after those */
    "accuracy_top1", "accuracy_correct", "accuracy_samples", "accuracy_top1_drop", "accuracy_baseline",
    "saved_converted", "saved_alma_ops",
    /* --profile: the per-node profile's totals and its slowest entry and op type */
    "profile_batch_ms", "profile_nodes_ms", "profile_top_node", "profile_top_node_ms", "profile_top_op_type",
    "profile_top_op_type_ms",
    /* contention over the timed phase, the outside check of the clock, repeats across processes */
    "disturbed", "disturbed_reason", "cpu_share", "spinning", "clock_agreement", "repeats",
    "repeat_median_ms", "repeat_median_ci95_lo_ms", "repeat_median_ci95_hi_ms", "repeat_spread",
    "repeats_disturbed",
    /* the roofline (docs/methodology.md): the model side, achieved rate, share of the machine's peak */
    "roofline_flops_per_batch", "roofline_bytes_per_batch", "roofline_gflops", "roofline_share_of_peak",
    "roofline_intensity", "roofline_bound",
    /* scenarios: SingleStream (the latency mode), Offline (throughput rows), Server (a row per
     * server run; server_best marks the reported one) */
    "scenario", "target_qps", "achieved_qps", "latency_bound_ms", "latency_percentile", "latency_at_percentile_ms",
    "server_result", "server_best",
    /* the row's origin in a model suite or a merged sweep (empty otherwise) */
    "model", "origin_task", "origin_node", "origin_partition", "origin_machine", "origin_cpus", NULL};

void alma__csv_str(FILE *f, const char *s) {
  if (!s) s = "";
  size_t len = strlen(s);
  char *fixed = NULL;
  if (!alma__text_is_safe(s, len) && (fixed = malloc(3 * len + 1))) { /* names are not always UTF-8 */
    alma__utf8_fix(s, len, fixed, 3 * len + 1);
    s = fixed;
  }
  if (!strpbrk(s, ",\"\r\n")) {
    fputs(s, f);
  } else {
    fputc('"', f);
    for (const char *p = s; *p; p++) {
      if (*p == '"') fputc('"', f);
      fputc(*p, f);
    }
    fputc('"', f);
  }
  free(fixed);
}

void alma__csv_num(FILE *f, double v) {
  if (!isfinite(v)) return;
  char buf[40];
  snprintf(buf, sizeof buf, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
  fputs(buf, f);
}

#define put_str alma__csv_str
#define put_num alma__csv_num
static void put_int(FILE *f, int64_t v) { fprintf(f, "%lld", (long long)v); }

/* latency_mean_ms .. latency_n */
static void latency_cols(FILE *f, const alma_latency_stats *s) {
  double v[] = {s->mean, s->stdev, s->cv, s->min, s->p50, s->p90, s->p95, s->p99, s->max,
                s->mean_ci95[0], s->mean_ci95[1], s->median_ci95[0], s->median_ci95[1]};
  for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
    fputc(',', f);
    put_num(f, v[k]);
  }
  fputc(',', f); put_int(f, s->n);
}

static void cache_cols(FILE *f, const alma_result *x) {
  const alma_cache_info *c = alma_result_cache(x);
  fputc(',', f); put_str(f, c->status);
  fputc(',', f); put_str(f, c->build);
  fputc(',', f); put_str(f, c->reason);
}

static void origin_cols(FILE *f, const alma_result *x) {
  const alma_result_origin *o = alma_result_origin_of(x);
  fputc(',', f); if (o) put_str(f, o->model);
  fputc(',', f); if (o && o->task >= 0) put_int(f, o->task);
  fputc(',', f); if (o) put_str(f, o->node);
  fputc(',', f); if (o) put_str(f, o->partition);
  fputc(',', f); if (o) put_str(f, o->machine);
  fputc(',', f); if (o) put_str(f, o->cpus);
  fputs("\r\n", f);
}

/* A throughput configuration's row: the result's identity, the point's numbers. */
static void scaling_row(FILE *f, const alma_result *x, const alma_scaling_point *p) {
  if (x->id >= 0) put_int(f, x->id);
  fputc(',', f); put_str(f, x->conversion);
  fputc(',', f); put_str(f, p->error ? "error" : "ok");
  fputc(',', f); put_str(f, x->device);
  fputc(',', f); put_int(f, x->batch_size);
  fputc(',', f); put_int(f, p->samples);
  fputc(',', f); put_num(f, p->throughput_avg);
  fputs(",,,,,,,", f);  /* total_elapsed_s .. peak_rss_bytes: the result's row has them */
  fputc(',', f); put_int(f, p->threads_per_instance);
  latency_cols(f, &p->latency);
  fputs(",false,,,,,", f);  /* check_*: done once, in the latency mode */
  fputc(',', f); if (p->concurrent) put_str(f, "latency read from a concurrent run: it includes contention");
  fputc(',', f); put_str(f, p->error);
  fputs(",throughput", f);
  fputc(',', f); put_int(f, p->instances);
  fputc(',', f); put_int(f, p->workers);
  fputc(',', f); put_int(f, p->threads_per_instance);
  fputc(',', f); fputs(p->concurrent ? "true" : "false", f);
  fputc(',', f); put_num(f, p->duration_s);
  fputc(',', f); put_int(f, p->inferences);
  fputc(',', f); put_num(f, p->throughput_avg);
  fputc(',', f); put_num(f, p->throughput_peak);
  cache_cols(f, x);
  /* hook times, accuracy, the saved graph, the profile, contention and repeats, the roofline: the
   * result's row has them */
  fputs(",,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,", f);
  fputs(",Offline,,,,,,,", f);
  origin_cols(f, x);
}

/* A server run's row: the result's identity, the run's numbers (latency from arrival). */
static void server_row(FILE *f, const alma_result *x, const alma_server_result *sv, int k) {
  const alma_server_run *p = &sv->runs[k];
  if (x->id >= 0) put_int(f, x->id);
  fputc(',', f); put_str(f, x->conversion);
  fputc(',', f); put_str(f, "ok");
  fputc(',', f); put_str(f, x->device);
  fputc(',', f); put_int(f, x->batch_size);
  fputc(',', f); put_int(f, p->completed * x->batch_size);
  fputc(',', f); put_num(f, p->achieved_qps * (double)x->batch_size);
  fputs(",,,,,,,", f);  /* total_elapsed_s .. peak_rss_bytes: the result's row has them */
  fputc(',', f); put_int(f, sv->threads_per_instance);
  latency_cols(f, &p->latency);
  fputs(",false,,,,,", f);  /* check_*: done once, in the latency mode */
  fputc(',', f); put_str(f, p->reason);
  fputc(',', f);  /* error: a failed scenario has no runs */
  fputs(",server", f);
  fputc(',', f); put_int(f, sv->instances);
  fputc(',', f); put_int(f, sv->workers);
  fputc(',', f); put_int(f, sv->threads_per_instance);
  fputc(',', f); fputs(sv->instances * sv->workers > 1 ? "true" : "false", f);
  fputc(',', f); put_num(f, p->duration_s);
  fputc(',', f); put_int(f, p->completed);
  fputc(',', f); put_num(f, p->achieved_qps * (double)x->batch_size);
  fputc(',', f);  /* throughput_peak */
  cache_cols(f, x);
  fputs(",,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,", f);  /* as on throughput rows */
  fputs(",Server", f);
  fputc(',', f); put_num(f, p->target_qps);
  fputc(',', f); put_num(f, p->achieved_qps);
  fputc(',', f); put_num(f, sv->latency_bound_ms);
  fputc(',', f); put_num(f, sv->percentile);
  fputc(',', f); put_num(f, p->percentile_ms);
  fputc(',', f); put_str(f, p->valid ? "VALID" : "INVALID");
  fputc(',', f); fputs(k == sv->best ? "true" : "false", f);
  origin_cols(f, x);
}

static void issue5_cols(FILE *f, const alma_result *x) {
  const alma_accuracy *a = alma_result_accuracy(x);
  fputc(',', f); if (a) put_num(f, a->top1);
  fputc(',', f); if (a) put_int(f, a->correct);
  fputc(',', f); if (a) put_int(f, a->samples);
  fputc(',', f); if (a) put_num(f, a->top1_drop);
  fputc(',', f); if (a) put_str(f, a->baseline);
  fputc(',', f); put_str(f, x->saved_path);
  fputc(',', f); if (x->saved_path) put_int(f, x->saved_alma_ops);
}

/* Empty without a profile, and the numbers and names empty when it was unavailable. */
static void profile_cols(FILE *f, const alma_result *x) {
  const alma_profile *p = alma_result_profile(x);
  int ok = p && !p->unavailable;
  fputc(',', f); if (ok) put_num(f, p->batch_ms);
  fputc(',', f); if (ok) put_num(f, p->nodes_ms);
  fputc(',', f); if (ok && p->n_nodes) put_str(f, p->nodes[0].name);
  fputc(',', f); if (ok && p->n_nodes) put_num(f, p->nodes[0].ms);
  fputc(',', f); if (ok && p->n_ops) put_str(f, p->ops[0].op_type);
  fputc(',', f); if (ok && p->n_ops) put_num(f, p->ops[0].ms);
}

/* Empty where not measured (a failed row, a build-only run); the repeat columns only for repeats. */
static void repro_cols(FILE *f, const alma_result *x) {
  const alma_contention *c = alma_result_contention(x);
  fputc(',', f); if (c) fputs(c->disturbed ? "true" : "false", f);
  fputc(',', f); if (c) put_str(f, c->reason);
  fputc(',', f); if (c) put_num(f, c->cpu_share);
  fputc(',', f); if (c) fputs(c->spinning ? "true" : "false", f);
  fputc(',', f); put_num(f, alma_result_clock_agreement(x));
  const alma_repeat_stats *s = alma_result_repeats(x);
  fputc(',', f); if (s) put_int(f, s->k);
  fputc(',', f); if (s) put_num(f, s->median_ms);
  fputc(',', f); if (s) put_num(f, s->ci95[0]);
  fputc(',', f); if (s) put_num(f, s->ci95[1]);
  fputc(',', f); if (s) put_num(f, s->spread);
  fputc(',', f); if (s) put_int(f, s->n_disturbed);
}

alma_status alma_results_write_csv(const alma_results *r, FILE *f) {
  if (!r || !f) return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_results_write_csv: NULL argument");
  for (int i = 0; columns[i]; i++) fprintf(f, "%s%s", i ? "," : "", columns[i]);
  fputs("\r\n", f);
  for (int i = 0; i < r->n; i++) {
    const alma_result *x = &r->items[i];
    const alma_output_check *c = &x->check;
    if (x->id >= 0) put_int(f, x->id);
    fputc(',', f); put_str(f, x->conversion);
    fputc(',', f); put_str(f, alma__result_status_str(x->status));
    fputc(',', f); put_str(f, x->device);
    fputc(',', f); put_int(f, x->batch_size);
    fputc(',', f); put_int(f, x->samples);
    fputc(',', f); put_num(f, x->throughput);
    fputc(',', f); put_num(f, x->total_elapsed_s);
    fputc(',', f); put_num(f, x->inference_s);
    fputc(',', f); put_num(f, x->load_s);
    fputc(',', f); put_num(f, x->convert_s);
    fputc(',', f); put_num(f, x->first_inference_ms);
    fputc(',', f); if (x->peak_rss_bytes >= 0) put_int(f, x->peak_rss_bytes);
    fputc(',', f); put_int(f, x->warmup_batches);
    fputc(',', f); put_int(f, x->threads);
    latency_cols(f, &x->latency);
    fputc(',', f); fputs(c->performed ? "true" : "false", f);
    fputc(',', f); put_num(f, c->max_abs_err);
    fputc(',', f); put_num(f, c->max_rel_err);
    fputc(',', f); put_num(f, c->argmax_agreement);
    fputc(',', f); put_num(f, c->cosine_similarity);
    fputc(',', f); if (c->performed) fputs(c->passed ? "true" : "false", f);
    /* Warnings joined by " | " into one field. */
    size_t len = 1;
    for (int k = 0; k < x->n_warnings; k++) len += strlen(x->warnings[k]) + 3;
    char *w = malloc(len);
    if (w) {
      w[0] = 0;
      for (int k = 0; k < x->n_warnings; k++) {
        if (k) strcat(w, " | ");
        strcat(w, x->warnings[k]);
      }
    }
    fputc(',', f); put_str(f, w);
    free(w);
    fputc(',', f); put_str(f, x->error);
    fputc(',', f); put_str(f, x->mode);
    fputs(",1,1,", f);
    put_int(f, x->threads);
    fputs(",false,", f);
    fputc(',', f); if (x->status == ALMA_RESULT_OK && x->latency.n > 0) put_int(f, x->latency.n);
    fputc(',', f); put_num(f, x->throughput);
    fputc(',', f);
    cache_cols(f, x);
    fputc(',', f); if (x->pre.n) put_num(f, x->pre.mean);
    fputc(',', f); if (x->post.n) put_num(f, x->post.mean);
    issue5_cols(f, x);
    profile_cols(f, x);
    repro_cols(f, x);
    alma__roofline rf = alma__result_roofline(r, x);
    fputc(',', f); put_num(f, x->flops_per_batch);
    fputc(',', f); put_num(f, x->bytes_per_batch);
    fputc(',', f); put_num(f, rf.achieved_gflops);
    fputc(',', f); put_num(f, rf.share_of_peak);
    fputc(',', f); put_num(f, x->flops_per_batch / x->bytes_per_batch);
    fputc(',', f); put_str(f, rf.bound);
    fputc(',', f); if (strcmp(x->mode, "build")) put_str(f, "SingleStream");
    fputs(",,,,,,,", f);
    origin_cols(f, x);
    for (int k = 0; k < x->n_scaling; k++) scaling_row(f, x, &x->scaling[k]);
    for (int k = 0; x->has_server && k < x->server.n_runs; k++) server_row(f, x, &x->server, k);
  }
  return ferror(f) ? alma__errorf(ALMA_ERR_IO, "error writing CSV") : ALMA_OK;
}

alma_status alma_results_save_csv(const alma_results *r, const char *path) {
  if (!path) return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_results_save_csv: NULL path");
  FILE *f = !strcmp(path, "-") ? stdout : fopen(path, "w");
  if (!f) return alma__errorf(ALMA_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
  alma_status st = alma_results_write_csv(r, f);
  if (f == stdout) fflush(f);
  else if (fclose(f) != 0 && st == ALMA_OK) st = alma__errorf(ALMA_ERR_IO, "error writing '%s'", path);
  if (st != ALMA_OK) alma__error_prefix(st, "%s: ", path);
  return st;
}
