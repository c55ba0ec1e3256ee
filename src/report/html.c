/* The HTML report (alma bench --html, alma report, alma compare --html): one self-contained page,
 * charts drawn here as inline SVG (svg.c), a few lines of inline script to sort the tables; no
 * fetch of any kind, so that it opens offline and from a CI artifact. Sections: the model and
 * machine, the summary table, latency distributions from the raw samples, throughput, accuracy
 * against speed with the Pareto front, batch-size curves, the instances x workers matrix, the
 * per-op-type profile, the roofline figures, warnings and failures folded (docs/report.md). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"
#include "report/svg.h"

#define esc alma__html_escape

/* ---- page -------------------------------------------------------------------------------------- */
static const char page_style[] =
    "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1100px;padding:0 16px 40px;"
    "color:#222}\n"
    "h1{font-size:22px;margin:20px 0 4px}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px solid #ddd}"
    "h3{font-size:15px;margin:16px 0 4px}\n"
    "table{border-collapse:collapse;margin:6px 0;max-width:100%;font-size:13px}td,th{padding:3px 5px;"
    "border-bottom:1px solid #eee;text-align:right;vertical-align:top}td{white-space:nowrap}td.l,td.w{white-space:normal}"
    "td.l{overflow-wrap:anywhere;min-width:4em}td:first-child{min-width:13em}td:first-child,th:first-child,td.l,th.l{text-align:left}\n"
    "th{background:#f4f4f4;font-weight:600}table.sortable th{cursor:pointer;user-select:none}"
    "th[aria-sort=ascending]::after{content:' \\25B2'}th[aria-sort=descending]::after{content:' \\25BC'}\n"
    "dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:1px 14px;margin:6px 0}dl.kv dt{color:#666}"
    "dl.kv dd{margin:0;overflow-wrap:anywhere}\n"
    "svg.chart{max-width:100%;height:auto;display:block;margin:6px 0}svg text{font-size:11px;fill:#333}"
    "svg text.label{font-size:12px;fill:#555}svg .axis line{stroke:#888}svg line.grid{stroke:#eee}"
    "svg text.note{fill:#777}svg text.inv{fill:#fff}.grid{display:flex;flex-wrap:wrap;gap:4px 28px}\n"
    "details{margin:4px 0}summary{cursor:pointer}pre{background:#f7f7f7;padding:8px;overflow-x:auto;"
    "white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px}\n"
    ".bad{color:#b00}.good{color:#070}.muted{color:#777}.swatch{display:inline-block;width:10px;height:10px;"
    "margin-right:4px;border-radius:2px}\n";

/* Sorting: a click on a header sorts by that column's data-v (numbers before text, missing last). */
static const char page_script[] =
    "document.querySelectorAll('table.sortable').forEach(function(t){\n"
    " var hs=t.tHead.rows[0].cells;\n"
    " Array.prototype.forEach.call(hs,function(th,i){th.addEventListener('click',function(){\n"
    "  var asc=th.getAttribute('aria-sort')!=='ascending';\n"
    "  Array.prototype.forEach.call(hs,function(h){h.removeAttribute('aria-sort');});\n"
    "  th.setAttribute('aria-sort',asc?'ascending':'descending');\n"
    "  var tb=t.tBodies[0],rows=Array.prototype.slice.call(tb.rows);\n"
    "  function key(r){var v=r.cells[i].getAttribute('data-v');return v===null?r.cells[i].textContent:v;}\n"
    "  rows.sort(function(a,b){var x=key(a),y=key(b);if(x===''&&y==='')return 0;if(x==='')return 1;if(y==='')return -1;\n"
    "   var nx=Number(x),ny=Number(y),c;if(!isNaN(nx)&&!isNaN(ny))c=nx-ny;else if(!isNaN(nx))c=-1;else if(!isNaN(ny))c=1;\n"
    "   else c=x<y?-1:x>y?1:0;return asc?c:-c;});\n"
    "  rows.forEach(function(r){tb.appendChild(r);});\n"
    " });});\n"
    "});\n";

static void page_begin(FILE *f, const char *title) {
  fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        /* nothing may load from anywhere: the page is its own world */
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">\n<title>", f);
  esc(f, title);
  fprintf(f, "</title>\n<style>\n%s</style></head><body>\n<h1>", page_style);
  esc(f, title);
  fputs("</h1>\n", f);
}

static void page_end(FILE *f) {
  fprintf(f, "<p class=\"muted\">Written by alma %s (build %s). Every chart is drawn from the numbers in the results"
          " file; docs/report.md explains them.</p>\n<script>\n%s</script>\n</body></html>\n", alma_version(),
          alma_build_id(), page_script);
}

/* ---- helpers ----------------------------------------------------------------------------------- */
static int timed_ok(const alma_result *x) {
  return x->status == ALMA_RESULT_OK && strcmp(x->mode, "build") && isfinite(x->latency.p50) && x->latency.p50 > 0;
}

static const char *row_label(const alma_result *x, int sweep, char *buf, size_t n) {
  if (sweep) snprintf(buf, n, "%s b%lld", x->conversion ? x->conversion : "?", (long long)x->batch_size);
  else snprintf(buf, n, "%s", x->conversion ? x->conversion : "?");
  return buf;
}

/* One colour per conversion name across every chart of a section: its first row's index. */
static int conv_color(const alma_results *r, const alma_result *x) {
  for (int i = 0; i < r->n; i++)
    if (r->items[i].conversion && x->conversion && !strcmp(r->items[i].conversion, x->conversion)) return i;
  return 0;
}

static int has_sweep(const alma_results *r) {
  for (int i = 1; i < r->n; i++)
    if (r->items[i].batch_size != r->items[0].batch_size) return 1;
  return 0;
}

/* Throughput in samples/s from the median a row is ranked by (as the text report's table). */
static double row_throughput(const alma_result *x) {
  double med = alma_result_median_ms(x, NULL);
  return med > 0 ? 1e3 * (double)x->batch_size / med : NAN;
}

static void td_num(FILE *f, double v, const char *text) {
  char b[32];
  if (isfinite(v)) fprintf(f, "<td data-v=\"%.9g\">", v);
  else fputs("<td data-v=\"\">", f);
  esc(f, text ? text : alma__num_str(v, b, sizeof b));
  fputs("</td>", f);
}

static void td_str(FILE *f, const char *s) {
  fputs("<td class=\"l\" data-v=\"", f);
  esc(f, s);
  fputs("\">", f);
  esc(f, s);
  fputs("</td>", f);
}

static void kv(FILE *f, const char *k, const char *v) {
  fprintf(f, "<dt>%s</dt><dd>", k);
  esc(f, v && *v ? v : "unknown");
  fputs("</dd>\n", f);
}

/* ---- header ------------------------------------------------------------------------------------ */
static void section_header(const alma_results *r, FILE *f) {
  const alma_system_info *s = &r->system;
  const alma_config *c = &r->config;
  char b[1024], shp[128];
  fputs("<h2>Model and machine</h2>\n<dl class=\"kv\">\n", f);
  kv(f, "model", r->model_path && *r->model_path ? r->model_path : "(loaded model)");
  if (r->model_hash[0]) kv(f, "model hash", r->model_hash);
  for (int i = 0; i < r->n_inputs; i++) {
    alma__shape_str(r->inputs[i].rank, r->inputs[i].dims, shp, sizeof shp);
    snprintf(b, sizeof b, "%s %s %s%s%s", r->inputs[i].name, r->inputs[i].dtype, shp,
             r->inputs[i].declared[0] ? ", declared " : "", r->inputs[i].declared);
    kv(f, "input", b);
  }
  for (int i = 0; i < r->n_outputs; i++) {
    alma__shape_str(r->outputs[i].rank, r->outputs[i].dims, shp, sizeof shp);
    snprintf(b, sizeof b, "%s %s %s", r->outputs[i].name, r->outputs[i].dtype, shp);
    kv(f, "output", b);
  }
  kv(f, "data", r->data_desc ? r->data_desc : "random");
  snprintf(b, sizeof b, "%s, %d cores (%d logical, %d socket%s), %.1f GiB", s->cpu_model[0] ? s->cpu_model : "unknown CPU",
           s->physical_cores, s->logical_cores, s->sockets, s->sockets == 1 ? "" : "s",
           (double)s->memory_bytes / (1 << 30));
  kv(f, "machine", b);
  kv(f, "ISA", s->isa);
  snprintf(b, sizeof b, "%s; %s; governor %s; load average %.2f %.2f %.2f", s->os, s->kernel,
           s->governor[0] ? s->governor : "unknown", s->load_average[0], s->load_average[1], s->load_average[2]);
  kv(f, "system", b);
  snprintf(b, sizeof b, "alma %s, %s, %s", s->alma_version[0] ? s->alma_version : "?", s->compiler, s->build_flags);
  kv(f, "build", b);
  kv(f, "runtimes", s->runtimes);
  snprintf(b, sizeof b, "batch %lld%s%s, n_samples %lld, min_time %g s, warm-up %lld batches / %g s, threads %d%s, seed %llu, %s",
           (long long)c->batch_size, c->batch_sizes[0] ? ", batch sizes " : "", c->batch_sizes, (long long)c->n_samples,
           c->min_time_s, (long long)c->warmup, c->warmup_s, c->threads, c->threads ? "" : " (physical cores)",
           (unsigned long long)c->seed, c->multiprocessing ? "one process per conversion" : "in-process");
  kv(f, "settings", b);
  fputs("</dl>\n", f);
  if (s->logical_cores > 0 && s->load_average[0] >= s->logical_cores)
    fprintf(f, "<p class=\"bad\">Busy machine: load average %.2f on %d logical CPUs when the sweep began.</p>\n",
            s->load_average[0], s->logical_cores);
}

/* ---- summary table ----------------------------------------------------------------------------- */
static void section_summary(const alma_results *r, FILE *f) {
  int accuracy = 0, roof = 0;
  for (int i = 0; i < r->n; i++) {
    accuracy |= r->items[i].acc.samples > 0;
    roof |= isfinite(alma__result_roofline(r, &r->items[i]).achieved_gflops);
  }
  fputs("<h2>Summary</h2>\n<p class=\"muted\">Click a column header to sort. samples/s = batch size / median; "
        "speed-up = the first timed conversion's median (at the same batch size) / this one's.</p>\n"
        "<table class=\"sortable\" id=\"summary\"><thead><tr><th class=\"l\">conversion</th><th>batch</th>"
        "<th class=\"l\">status</th><th>median ms</th><th>95% CI</th><th>p99 ms</th><th>samples/s</th><th>speed-up</th>"
        "<th>cosine</th><th>max abs err</th>", f);
  if (accuracy) fputs("<th>top-1</th>", f);
  if (roof) fputs("<th>GFLOP/s</th><th>of peak</th><th class=\"l\">bound</th>", f);
  fputs("<th>RSS MiB</th></tr></thead>\n<tbody>\n", f);
  char b[96], c0[32], c1[32];
  for (int i = 0; i < r->n; i++) {
    const alma_result *x = &r->items[i];
    const alma_result *base = NULL;
    for (int j = 0; j < r->n && !base; j++)
      if (r->items[j].batch_size == x->batch_size && timed_ok(&r->items[j])) base = &r->items[j];
    fputs("<tr>", f);
    fprintf(f, "<td class=\"l\" data-v=\"");
    esc(f, x->conversion);
    fprintf(f, "\"><span class=\"swatch\" style=\"background:%s\"></span>", alma__svg_color(conv_color(r, x)));
    esc(f, x->conversion);
    fputs("</td>", f);
    td_num(f, (double)x->batch_size, NULL);
    const char *st = x->status == ALMA_RESULT_OK && !strcmp(x->mode, "build") ? "built" : alma__result_status_str(x->status);
    if (timed_ok(x) && alma_result_disturbed(x)) st = "ok, disturbed";
    td_str(f, st);
    if (timed_ok(x)) {
      double ci[2], med = alma_result_median_ms(x, ci);
      td_num(f, med, NULL);
      if (isfinite(ci[0]) && isfinite(ci[1])) {
        snprintf(b, sizeof b, "[%s, %s]", alma__num_str(ci[0], c0, sizeof c0), alma__num_str(ci[1], c1, sizeof c1));
        fprintf(f, "<td class=\"w\" data-v=\"%.9g\">", (ci[1] - ci[0]) / med);
        esc(f, b);
        fputs("</td>", f);
      } else {
        td_num(f, NAN, NULL);
      }
      td_num(f, x->latency.p99, NULL);
      td_num(f, row_throughput(x), NULL);
      double su = base ? alma_result_median_ms(base, NULL) / med : NAN;
      snprintf(b, sizeof b, "%.3gx", su);
      td_num(f, su, isfinite(su) ? b : NULL);
    } else {
      for (int k = 0; k < 5; k++) td_num(f, NAN, NULL);
    }
    if (x->check.performed) {
      td_num(f, x->check.cosine_similarity, NULL);
      td_num(f, x->check.max_abs_err, NULL);
    } else {
      td_num(f, NAN, NULL);
      td_num(f, NAN, NULL);
    }
    if (accuracy) {
      if (x->acc.samples > 0) {
        snprintf(b, sizeof b, "%.2f%%", 100 * x->acc.top1);
        td_num(f, x->acc.top1, b);
      } else {
        td_num(f, NAN, NULL);
      }
    }
    if (roof) {
      alma__roofline rf = alma__result_roofline(r, x);
      td_num(f, rf.achieved_gflops, NULL);
      snprintf(b, sizeof b, "%.1f%%", 100 * rf.share_of_peak);
      td_num(f, rf.share_of_peak, isfinite(rf.share_of_peak) ? b : NULL);
      fprintf(f, "<td class=\"l\" style=\"white-space:nowrap\" data-v=\"%s\">%s</td>", rf.bound ? rf.bound : "",
              rf.bound ? rf.bound : "");
    }
    td_num(f, x->peak_rss_bytes >= 0 ? (double)x->peak_rss_bytes / (1 << 20) : NAN, NULL);
    fputs("</tr>\n", f);
  }
  fputs("</tbody></table>\n", f);
}

/* ---- latency distributions --------------------------------------------------------------------- */
typedef struct {
  double min, q1, p50, q3, p99, max, ci[2];
  int have_box;  /* quartiles from raw samples */
} dist;

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static dist row_dist(const alma_result *x) {
  dist d = {x->latency.min, NAN, x->latency.p50, NAN, x->latency.p99, x->latency.max, {NAN, NAN}, 0};
  alma_result_median_ms(x, d.ci);
  if (x->n_raw > 0 && x->raw_ms) {
    double *s = malloc(sizeof(double) * (size_t)x->n_raw);
    if (s) {
      memcpy(s, x->raw_ms, sizeof(double) * (size_t)x->n_raw);
      qsort(s, (size_t)x->n_raw, sizeof(double), cmp_d);
      d.min = s[0];
      d.max = s[x->n_raw - 1];
      d.q1 = alma__percentile_sorted(s, x->n_raw, 0.25);
      d.q3 = alma__percentile_sorted(s, x->n_raw, 0.75);
      d.p50 = alma__percentile_sorted(s, x->n_raw, 0.5);
      d.p99 = alma__percentile_sorted(s, x->n_raw, 0.99);
      d.have_box = 1;
      free(s);
    }
  }
  return d;
}

#define CH_W 960
#define LABEL_W 230

static void chart_latency(const alma_results *r, FILE *f) {
  int n = 0, sweep = has_sweep(r), no_raw = 0;
  double lo = INFINITY, hi = 0;
  for (int i = 0; i < r->n; i++) {
    const alma_result *x = &r->items[i];
    if (!timed_ok(x)) continue;
    n++;
    if (x->latency.min > 0 && x->latency.min < lo) lo = x->latency.min;
    if (x->latency.max > hi) hi = x->latency.max;
  }
  fputs("<h2>Latency per batch</h2>\n", f);
  if (!n) {
    fputs("<p class=\"muted\">No conversion was timed.</p>\n", f);
    return;
  }
  fputs("<p class=\"muted\">Box: quartiles of the timed batches; the thick mark is the median, the shaded band its "
        "95% confidence interval; the whisker runs from the fastest batch to p99 (tick), the dot is the slowest "
        "batch.</p>\n", f);
  int log = hi / lo > 20;
  int row_h = 26, top = 10, h = top + n * row_h + 44;
  alma__scale xs;
  alma__scale_init(&xs, log ? lo * 0.9 : 0, hi * 1.05, LABEL_W, CH_W - 20, log);
  alma__svg_begin(f, CH_W, h, "latency", "Latency per batch, ms");
  alma__svg_axis_x(f, &xs, top + n * row_h + 4, top, log ? "ms per batch (log scale)" : "ms per batch");
  int k = 0;
  char lab[300], b0[32], b1[32], b2[32], tip[400];
  for (int i = 0; i < r->n; i++) {
    const alma_result *x = &r->items[i];
    if (!timed_ok(x)) continue;
    dist d = row_dist(x);
    no_raw |= !d.have_box;
    double y = top + k * row_h + row_h / 2.0;
    const char *col = alma__svg_color(conv_color(r, x));
    char b3[32];
    snprintf(tip, sizeof tip, "%s: median %s ms [95%% CI %s, %s], p99 %s ms, %lld batches",
             row_label(x, sweep, lab, sizeof lab), alma__num_str(d.p50, b0, sizeof b0),
             alma__num_str(d.ci[0], b2, sizeof b2), alma__num_str(d.ci[1], b3, sizeof b3),
             alma__num_str(d.p99, b1, sizeof b1), (long long)x->latency.n);
    fputs("<g class=\"mark\" data-row=\"", f);
    esc(f, lab);
    fputs("\"><title>", f);
    esc(f, tip);
    fputs("</title>\n", f);
    alma__svg_text(f, LABEL_W - 8, y + 4, "end", NULL, lab);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n", alma__scale_map(&xs, d.min), y,
            alma__scale_map(&xs, d.p99), y, col);
    fprintf(f, "<line class=\"p99\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n",
            alma__scale_map(&xs, d.p99), y - 6, alma__scale_map(&xs, d.p99), y + 6, col);
    if (d.have_box) {
      double x0 = alma__scale_map(&xs, d.q1), x1 = alma__scale_map(&xs, d.q3);
      fprintf(f, "<rect class=\"box\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"14\" fill=\"%s\" fill-opacity=\"0.25\" "
              "stroke=\"%s\"/>\n", x0, y - 7, x1 - x0 > 0.5 ? x1 - x0 : 0.5, col, col);
    }
    if (isfinite(d.ci[0]) && isfinite(d.ci[1])) {
      double x0 = alma__scale_map(&xs, d.ci[0]), x1 = alma__scale_map(&xs, d.ci[1]);
      fprintf(f, "<rect class=\"ci\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"20\" fill=\"%s\" fill-opacity=\"0.45\"/>\n",
              x0, y - 10, x1 - x0 > 1 ? x1 - x0 : 1, col);
    }
    fprintf(f, "<line class=\"p50\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>\n",
            alma__scale_map(&xs, d.p50), y - 10, alma__scale_map(&xs, d.p50), y + 10, col);
    fprintf(f, "<circle class=\"max\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", alma__scale_map(&xs, d.max), y, col);
    fputs("</g>\n", f);
    k++;
  }
  alma__svg_end(f);
  if (no_raw)
    fputs("<p class=\"muted\">Rows without raw samples (a results file written without --raw) show no box: the "
          "whisker, median, interval and p99 come from the stored statistics.</p>\n", f);
}

/* ---- throughput bars --------------------------------------------------------------------------- */
static void chart_throughput(const alma_results *r, FILE *f) {
  int n = 0, sweep = has_sweep(r);
  double hi = 0;
  for (int i = 0; i < r->n; i++)
    if (timed_ok(&r->items[i])) {
      n++;
      double t = row_throughput(&r->items[i]);
      if (t > hi) hi = t;
    }
  if (!n) return;
  fputs("<h2>Throughput</h2>\n<p class=\"muted\">Samples per second from the median batch latency (one request at a "
        "time).</p>\n", f);
  int row_h = 22, top = 10, h = top + n * row_h + 44;
  alma__scale xs;
  alma__scale_init(&xs, 0, hi * 1.12, LABEL_W, CH_W - 20, 0);
  alma__svg_begin(f, CH_W, h, "throughput", "Throughput, samples/s");
  alma__svg_axis_x(f, &xs, top + n * row_h + 4, top, "samples/s");
  int k = 0;
  char lab[300], b[32];
  for (int i = 0; i < r->n; i++) {
    const alma_result *x = &r->items[i];
    if (!timed_ok(x)) continue;
    double t = row_throughput(x), y = top + k * row_h;
    alma__svg_text(f, LABEL_W - 8, y + row_h / 2.0 + 4, "end", NULL, row_label(x, sweep, lab, sizeof lab));
    fprintf(f, "<rect class=\"mark\" x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>", LABEL_W, y + 3,
            alma__scale_map(&xs, t) - LABEL_W, row_h - 6, alma__svg_color(conv_color(r, x)));
    esc(f, lab);
    fprintf(f, ": %s samples/s</title></rect>\n", alma__num_str(t, b, sizeof b));
    alma__svg_text(f, alma__scale_map(&xs, t) + 4, y + row_h / 2.0 + 4, "start", NULL, b);
    k++;
  }
  alma__svg_end(f);
}

/* ---- accuracy vs speed ------------------------------------------------------------------------- */
typedef struct {
  const alma_result *x;
  double tp, acc;
  int front;
} pt;

static void chart_pareto(const alma_results *r, FILE *f) {
  int use_top1 = 0, n = 0, sweep = has_sweep(r);
  for (int i = 0; i < r->n; i++) use_top1 |= timed_ok(&r->items[i]) && r->items[i].acc.samples > 0;
  pt *p = calloc((size_t)r->n + 1, sizeof *p);
  if (!p) return;
  for (int i = 0; i < r->n; i++) {
    const alma_result *x = &r->items[i];
    if (!timed_ok(x)) continue;
    double a = use_top1 ? (x->acc.samples > 0 ? x->acc.top1 : NAN)
                        : (x->check.performed ? x->check.cosine_similarity : NAN);
    double t = row_throughput(x);
    if (!isfinite(a) || !(t > 0)) continue;
    p[n++] = (pt){x, t, a, 0};
  }
  fputs("<h2>Accuracy against speed</h2>\n", f);
  if (n == 0) {
    fputs("<p class=\"muted\">No timed conversion has an output check or a top-1 figure to plot.</p>\n", f);
    free(p);
    return;
  }
  /* on the front: no other point at least as fast and as accurate, and better in one. Cosines
   * closer than 1e-6 are float rounding, not accuracy: compared at 6 decimals. */
  if (!use_top1)
    for (int i = 0; i < n; i++) p[i].acc = round(p[i].acc * 1e6) / 1e6;
  for (int i = 0; i < n; i++) {
    p[i].front = 1;
    for (int j = 0; j < n && p[i].front; j++)
      if (j != i && p[j].tp >= p[i].tp && p[j].acc >= p[i].acc && (p[j].tp > p[i].tp || p[j].acc > p[i].acc))
        p[i].front = 0;
  }
  const char *metric = use_top1 ? "top-1 accuracy on the labelled set" : "cosine similarity to EAGER's outputs";
  fprintf(f, "<p class=\"muted\">Each timed conversion at its throughput and %s. Ringed points, joined by the line, are "
          "the Pareto front: no other conversion is both faster and at least as accurate%s.</p>\n", metric,
          use_top1 ? "" : " (cosines compared at 6 decimals: closer is float rounding)");
  double tlo = INFINITY, thi = 0, alo = INFINITY, ahi = -INFINITY;
  for (int i = 0; i < n; i++) {
    tlo = fmin(tlo, p[i].tp), thi = fmax(thi, p[i].tp);
    alo = fmin(alo, p[i].acc), ahi = fmax(ahi, p[i].acc);
  }
  int log = thi / tlo > 20;
  double pad = (ahi - alo) * 0.08;
  if (pad <= 0) pad = fmax(fabs(ahi) * 1e-4, 1e-6);
  int w = CH_W, h = 380, left = 110, top = 14, bottom = h - 48;
  alma__scale xs, ys;
  alma__scale_init(&xs, log ? tlo / 1.3 : 0, thi * (log ? 1.3 : 1.12), left, w - 160, log);
  alma__scale_init(&ys, alo - pad, ahi + pad, bottom, top, 0);
  alma__svg_begin(f, w, h, "pareto", "Accuracy against throughput");
  alma__svg_axis_x(f, &xs, bottom, top, log ? "samples/s (log scale)" : "samples/s");
  alma__svg_axis_y(f, &ys, left, w - 160, use_top1 ? "top-1" : "cosine");
  /* the front as a staircase, fastest last */
  pt **fr = calloc((size_t)n, sizeof *fr);
  int nf = 0;
  for (int i = 0; i < n && fr; i++)
    if (p[i].front) fr[nf++] = &p[i];
  for (int i = 1; i < nf; i++)
    for (int j = i; j > 0 && fr[j]->tp < fr[j - 1]->tp; j--) {
      pt *t = fr[j];
      fr[j] = fr[j - 1];
      fr[j - 1] = t;
    }
  if (nf > 1) {
    fputs("<polyline class=\"front\" fill=\"none\" stroke=\"#b00\" stroke-dasharray=\"4 3\" points=\"", f);
    for (int i = 0; i < nf; i++) {
      fprintf(f, "%.1f,%.1f ", alma__scale_map(&xs, fr[i]->tp), alma__scale_map(&ys, fr[i]->acc));
      if (i + 1 < nf) fprintf(f, "%.1f,%.1f ", alma__scale_map(&xs, fr[i]->tp), alma__scale_map(&ys, fr[i + 1]->acc));
    }
    fputs("\"/>\n", f);
  }
  free(fr);
  char lab[300], b0[32];
  for (int i = 0; i < n; i++) {
    double cx = alma__scale_map(&xs, p[i].tp), cy = alma__scale_map(&ys, p[i].acc);
    const char *col = alma__svg_color(conv_color(r, p[i].x));
    row_label(p[i].x, sweep, lab, sizeof lab);
    fprintf(f, "<circle class=\"mark%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"%s><title>", p[i].front ? " pareto" : "",
            cx, cy, col, p[i].front ? " stroke=\"#b00\" stroke-width=\"2.5\"" : "");
    esc(f, lab);
    fprintf(f, ": %s samples/s, %s %.6g%s</title></circle>\n", alma__num_str(p[i].tp, b0, sizeof b0),
            use_top1 ? "top-1" : "cosine", p[i].acc, p[i].front ? " (Pareto front)" : "");
    alma__svg_text(f, cx + 8, cy - 6 - (i % 3) * 9, "start", p[i].front ? NULL : "note", lab);
  }
  alma__svg_end(f);
  free(p);
}

/* ---- batch-size curves ------------------------------------------------------------------------- */
static void chart_batches(const alma_results *r, FILE *f) {
  if (!has_sweep(r)) return;
  double blo = INFINITY, bhi = 0, thi = 0;
  for (int i = 0; i < r->n; i++) {
    const alma_result *x = &r->items[i];
    if (!timed_ok(x)) continue;
    blo = fmin(blo, (double)x->batch_size), bhi = fmax(bhi, (double)x->batch_size);
    thi = fmax(thi, row_throughput(x));
  }
  if (!(thi > 0)) return;
  fputs("<h2>Batch size</h2>\n<p class=\"muted\">Throughput at each batch size, one line per conversion.</p>\n", f);
  int w = CH_W, h = 340, left = 90, top = 14, bottom = h - 48;
  alma__scale xs, ys;
  alma__scale_init(&xs, blo / 1.2, bhi * 1.2, left, w - 200, 1);
  alma__scale_init(&ys, 0, thi * 1.1, bottom, top, 0);
  alma__svg_begin(f, w, h, "batch", "Throughput against batch size");
  alma__svg_axis_x(f, &xs, bottom, top, "batch size (log scale)");
  alma__svg_axis_y(f, &ys, left, w - 200, "samples/s");
  char b[32];
  for (int i = 0; i < r->n; i++) {
    const alma_result *x = &r->items[i];
    if (conv_color(r, x) != i) continue;  /* one line per conversion, from its first row */
    int timed = 0;
    for (int j = i; j < r->n; j++) timed += timed_ok(&r->items[j]) && conv_color(r, &r->items[j]) == i;
    if (!timed) continue;
    const char *col = alma__svg_color(i);
    fprintf(f, "<g class=\"mark\"><title>");
    esc(f, x->conversion);
    fprintf(f, "</title><polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
    double lx = NAN, ly = NAN;
    for (int j = i; j < r->n; j++) {
      const alma_result *y = &r->items[j];
      if (!timed_ok(y) || conv_color(r, y) != i) continue;
      lx = alma__scale_map(&xs, (double)y->batch_size), ly = alma__scale_map(&ys, row_throughput(y));
      fprintf(f, "%.1f,%.1f ", lx, ly);
    }
    fputs("\"/>\n", f);
    for (int j = i; j < r->n; j++) {
      const alma_result *y = &r->items[j];
      if (!timed_ok(y) || conv_color(r, y) != i) continue;
      fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"><title>batch %lld: %s samples/s</title></circle>\n",
              alma__scale_map(&xs, (double)y->batch_size), alma__scale_map(&ys, row_throughput(y)), col,
              (long long)y->batch_size, alma__num_str(row_throughput(y), b, sizeof b));
    }
    if (isfinite(lx)) alma__svg_text(f, lx + 8, ly + 4, "start", NULL, x->conversion);
    fputs("</g>\n", f);
  }
  alma__svg_end(f);
}

/* ---- instances x workers ----------------------------------------------------------------------- */
static int int_index(const int *v, int n, int x) {
  for (int i = 0; i < n; i++)
    if (v[i] == x) return i;
  return -1;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static void chart_scaling(const alma_results *r, FILE *f) {
  int any = 0, sweep = has_sweep(r);
  for (int i = 0; i < r->n; i++) any |= r->items[i].n_scaling > 0;
  if (!any) return;
  fputs("<h2>Throughput mode: instances &#215; workers</h2>\n<p class=\"muted\">Average samples/s of each "
        "configuration (model copies &#215; threads feeding each); darker is faster within the conversion.</p>\n"
        "<div class=\"grid\">\n", f);
  char lab[300], b[32], tip[400];
  for (int i = 0; i < r->n; i++) {
    const alma_result *x = &r->items[i];
    if (x->n_scaling <= 0) continue;
    int ins[64], wks[64], ni = 0, nw = 0;
    double hi = 0;
    for (int j = 0; j < x->n_scaling; j++) {
      const alma_scaling_point *s = &x->scaling[j];
      if (int_index(ins, ni, s->instances) < 0 && ni < 64) ins[ni++] = s->instances;
      if (int_index(wks, nw, s->workers) < 0 && nw < 64) wks[nw++] = s->workers;
      if (!s->error && s->throughput_avg > hi) hi = s->throughput_avg;
    }
    qsort(ins, (size_t)ni, sizeof *ins, cmp_int);
    qsort(wks, (size_t)nw, sizeof *wks, cmp_int);
    fputs("<div><h3>", f);
    esc(f, row_label(x, sweep, lab, sizeof lab));
    fputs("</h3>\n", f);
    int cw = 110, chh = 34, left = 110, top = 30;
    int w = left + nw * cw + 20, h = top + ni * chh + 10;
    alma__svg_begin(f, w, h, "scaling", "Throughput by instances and workers");
    alma__svg_text(f, left + nw * cw / 2.0, 12, "middle", "label", "workers per instance");
    for (int c = 0; c < nw; c++) {
      snprintf(b, sizeof b, "%d", wks[c]);
      alma__svg_text(f, left + c * cw + cw / 2.0, top - 4, "middle", NULL, b);
    }
    for (int rr = 0; rr < ni; rr++) {
      snprintf(b, sizeof b, "%d instance%s", ins[rr], ins[rr] == 1 ? "" : "s");
      alma__svg_text(f, left - 8, top + rr * chh + chh / 2.0 + 4, "end", NULL, b);
    }
    for (int j = 0; j < x->n_scaling; j++) {
      const alma_scaling_point *s = &x->scaling[j];
      int rr = int_index(ins, ni, s->instances), c = int_index(wks, nw, s->workers);
      if (rr < 0 || c < 0) continue;
      double t = s->error ? 0 : s->throughput_avg / (hi > 0 ? hi : 1);
      int shade = (int)(235 - 170 * (isfinite(t) ? t : 0));
      fprintf(f, "<rect class=\"mark\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" style=\"fill:rgb(%d,%d,255)\">"
              "<title>", left + c * cw + 1, top + rr * chh + 1, cw - 2, chh - 2, s->error ? "#ddd" : "#88f", shade,
              shade);
      if (s->error) snprintf(tip, sizeof tip, "%d x %d: error: %s", s->instances, s->workers, s->error);
      else
        snprintf(tip, sizeof tip, "%d x %d: %s samples/s average, p50 %.4g ms%s", s->instances, s->workers,
                 alma__num_str(s->throughput_avg, b, sizeof b), s->latency.p50, s->concurrent ? " (concurrent)" : "");
      esc(f, tip);
      fputs("</title></rect>\n", f);
      alma__svg_text(f, left + c * cw + cw / 2.0, top + rr * chh + chh / 2.0 + 4, "middle", t > 0.6 ? "inv" : NULL,
                     s->error ? "error" : alma__num_str(s->throughput_avg, b, sizeof b));
    }
    alma__svg_end(f);
    fputs("</div>\n", f);
  }
  fputs("</div>\n", f);
}

/* ---- profile ----------------------------------------------------------------------------------- */
#define PROFILE_OPS 15

static void chart_profile(const alma_results *r, FILE *f) {
  int any = 0, sweep = has_sweep(r);
  for (int i = 0; i < r->n; i++) any |= r->items[i].has_profile;
  if (!any) return;
  fputs("<h2>Per-op-type profile</h2>\n<p class=\"muted\">Time per batch by op type, from the profiled batches "
        "(per-node timing on, after the timed phase); one fold per conversion.</p>\n", f);
  char lab[300], b[64], b2[32];
  int shown = 0;
  for (int i = 0; i < r->n; i++) {
    const alma_result *x = &r->items[i];
    if (!x->has_profile) continue;
    const alma_profile *p = &x->prof;
    fprintf(f, "<details class=\"profile\"%s><summary><b>", shown++ ? "" : " open");
    esc(f, row_label(x, sweep, lab, sizeof lab));
    fputs("</b></summary>\n", f);
    if (p->unavailable) {
      fputs("<p class=\"muted\">No profile: ", f);
      esc(f, p->unavailable);
      fputs("</p></details>\n", f);
      continue;
    }
    int n = p->n_ops < PROFILE_OPS ? p->n_ops : PROFILE_OPS;
    double rest = 0, hi = 0;
    for (int k = n; k < p->n_ops; k++) rest += p->ops[k].ms;
    for (int k = 0; k < n; k++) hi = fmax(hi, p->ops[k].ms);
    hi = fmax(hi, rest);
    int bars = n + (rest > 0);
    int row_h = 20, top = 6, h = top + bars * row_h + 44;
    alma__scale xs;
    alma__scale_init(&xs, 0, hi * 1.2, LABEL_W, CH_W - 20, 0);
    alma__svg_begin(f, CH_W, h, "profile", "Time per batch by op type");
    alma__svg_axis_x(f, &xs, top + bars * row_h + 4, top, "ms per batch");
    for (int k = 0; k < bars; k++) {
      const char *name = k < n ? p->ops[k].op_type : "(other types)";
      double ms = k < n ? p->ops[k].ms : rest, share = p->batch_ms > 0 ? ms / p->batch_ms : NAN;
      double y = top + k * row_h;
      alma__svg_text(f, LABEL_W - 8, y + row_h / 2.0 + 4, "end", NULL, name);
      fprintf(f, "<rect class=\"mark\" x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>", LABEL_W, y + 2,
              fmax(alma__scale_map(&xs, ms) - LABEL_W, 0.5), row_h - 4, alma__svg_color(conv_color(r, x)));
      esc(f, name);
      snprintf(b, sizeof b, ": %s ms per batch, %.1f%%", alma__num_str(ms, b2, sizeof b2), 100 * share);
      fprintf(f, "%s</title></rect>\n", b);
      snprintf(b, sizeof b, "%s ms (%.1f%%)", alma__num_str(ms, b2, sizeof b2), 100 * share);
      alma__svg_text(f, alma__scale_map(&xs, ms) + 4, y + row_h / 2.0 + 4, "start", NULL, b);
    }
    alma__svg_end(f);
    fprintf(f, "<p class=\"muted\">%s: %lld profiled batches, %s ms per batch, %s ms of it in nodes; per-node timing "
            "cost %.1f%%.</p>\n", p->runtime ? p->runtime : "", (long long)p->batches,
            alma__num_str(p->batch_ms, b, sizeof b), alma__num_str(p->nodes_ms, b2, sizeof b2), 100 * p->overhead);
    fputs("<details><summary>slowest nodes</summary><table><thead><tr><th class=\"l\">node</th><th class=\"l\">op type</th>"
          "<th class=\"l\">placement</th><th>ms</th><th>share</th></tr></thead><tbody>\n", f);
    for (int k = 0; k < p->n_nodes && k < 25; k++) {
      const alma_profile_node *nd = &p->nodes[k];
      fputs("<tr>", f);
      td_str(f, nd->name);
      td_str(f, nd->op_type);
      td_str(f, nd->placement);
      td_num(f, nd->ms, NULL);
      snprintf(b, sizeof b, "%.1f%%", 100 * nd->share);
      td_num(f, nd->share, b);
      fputs("</tr>\n", f);
    }
    fputs("</tbody></table></details>\n</details>\n", f);
  }
}

/* ---- roofline ---------------------------------------------------------------------------------- */
static void section_roofline(const alma_results *r, FILE *f) {
  const alma__machine_peak *mp = &r->peak;
  char b0[32], b1[32], b2[32];
  const alma_result *any = NULL;
  for (int i = 0; i < r->n && !any; i++)
    if (isfinite(r->items[i].flops_per_batch)) any = &r->items[i];
  fputs("<h2>Roofline</h2>\n", f);
  if (!any) {
    fputs("<p class=\"muted\">No roofline figures: the model's FLOPs are not known (an op without a cost rule, or a "
          "results file without them).</p>\n", f);
    return;
  }
  fprintf(f, "<p>The model: %s FLOPs and about %s bytes moved per batch of %lld (every weight read once, every tensor a "
          "node reads or writes moved once). ", alma__num_str(any->flops_per_batch, b0, sizeof b0),
          alma__num_str(any->bytes_per_batch, b1, sizeof b1), (long long)any->batch_size);
  if (mp->measured)
    fprintf(f, "This machine: %s GFLOP/s SGEMM peak (%s, %d threads) and %s GB/s memory bandwidth (STREAM triad), "
            "measured once and cached with its fingerprint%s%s.</p>\n", alma__num_str(mp->gflops, b0, sizeof b0),
            mp->sgemm_library, mp->threads, alma__num_str(mp->bandwidth_gbs, b2, sizeof b2),
            mp->measured_at[0] ? " on " : "", mp->measured_at);
  else {
    fputs("The machine's peak is unknown: ", f);
    esc(f, mp->reason[0] ? mp->reason : "not measured");
    fputs(".</p>\n", f);
  }
  int n = 0, sweep = has_sweep(r);
  for (int i = 0; i < r->n; i++) n += isfinite(alma__result_roofline(r, &r->items[i]).achieved_gflops);
  if (!n || !mp->measured) return;
  /* the roof: min(peak, intensity x bandwidth), log-log */
  double ilo = INFINITY, ihi = 0, glo = INFINITY;
  for (int i = 0; i < r->n; i++) {
    alma__roofline rf = alma__result_roofline(r, &r->items[i]);
    if (!isfinite(rf.achieved_gflops)) continue;
    ilo = fmin(ilo, rf.intensity), ihi = fmax(ihi, rf.intensity), glo = fmin(glo, rf.achieved_gflops);
  }
  double ridge = mp->gflops / mp->bandwidth_gbs;
  ilo = fmin(ilo, ridge) / 4, ihi = fmax(ihi, ridge) * 4, glo = fmin(glo, ilo * mp->bandwidth_gbs) / 2;
  int w = CH_W, h = 360, left = 90, top = 14, bottom = h - 48;
  alma__scale xs, ys;
  alma__scale_init(&xs, ilo, ihi, left, w - 200, 1);
  alma__scale_init(&ys, glo, mp->gflops * 2, bottom, top, 1);
  alma__svg_begin(f, w, h, "roofline", "Roofline: achieved GFLOP/s against arithmetic intensity");
  alma__svg_axis_x(f, &xs, bottom, top, "FLOPs per byte moved (log scale)");
  alma__svg_axis_y(f, &ys, left, w - 200, "GFLOP/s (log scale)");
  fprintf(f, "<polyline class=\"roof\" fill=\"none\" stroke=\"#555\" stroke-width=\"2\" points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\"/>\n",
          alma__scale_map(&xs, ilo), alma__scale_map(&ys, ilo * mp->bandwidth_gbs), alma__scale_map(&xs, ridge),
          alma__scale_map(&ys, mp->gflops), alma__scale_map(&xs, ihi), alma__scale_map(&ys, mp->gflops));
  char lab[300];
  for (int i = 0, k = 0; i < r->n; i++) {
    const alma_result *x = &r->items[i];
    alma__roofline rf = alma__result_roofline(r, x);
    if (!isfinite(rf.achieved_gflops)) continue;
    double cx = alma__scale_map(&xs, rf.intensity), cy = alma__scale_map(&ys, rf.achieved_gflops);
    row_label(x, sweep, lab, sizeof lab);
    fprintf(f, "<circle class=\"mark\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"><title>", cx, cy,
            alma__svg_color(conv_color(r, x)));
    esc(f, lab);
    fprintf(f, ": %s GFLOP/s, %.1f%% of peak, %s-bound</title></circle>\n", alma__num_str(rf.achieved_gflops, b0, sizeof b0),
            100 * rf.share_of_peak, rf.bound);
    alma__svg_text(f, cx + 8, cy - 4 - (k++ % 3) * 9, "start", "note", lab);
  }
  alma__svg_end(f);
}

/* ---- warnings and failures --------------------------------------------------------------------- */
static void section_failures(const alma_results *r, FILE *f) {
  int n_fail = 0, n_warn = 0, sweep = has_sweep(r);
  for (int i = 0; i < r->n; i++) {
    n_fail += r->items[i].status != ALMA_RESULT_OK;
    n_warn += r->items[i].n_warnings > 0;
  }
  char lab[300];
  if (n_fail) {
    fputs("<h2>Failures and unavailable conversions</h2>\n", f);
    for (int i = 0; i < r->n; i++) {
      const alma_result *x = &r->items[i];
      if (x->status == ALMA_RESULT_OK) continue;
      fprintf(f, "<details class=\"failure\"><summary><b>");
      esc(f, row_label(x, sweep, lab, sizeof lab));
      fprintf(f, "</b> <span class=\"%s\">%s</span>: ", x->status == ALMA_RESULT_ERROR ? "bad" : "muted",
              alma__result_status_str(x->status));
      esc(f, x->error);
      if (x->failed_step && *x->failed_step) {
        fputs(" (in ", f);
        esc(f, x->failed_step);
        fputs(")", f);
      }
      fputs("</summary><pre>", f);
      esc(f, x->traceback && *x->traceback ? x->traceback : "(no traceback)");
      fputs("</pre></details>\n", f);
    }
  }
  if (n_warn) {
    fputs("<h2>Warnings</h2>\n", f);
    for (int i = 0; i < r->n; i++) {
      const alma_result *x = &r->items[i];
      if (!x->n_warnings) continue;
      fputs("<details class=\"warnings\"><summary>", f);
      esc(f, row_label(x, sweep, lab, sizeof lab));
      fprintf(f, ": %d warning%s</summary><ul>\n", x->n_warnings, x->n_warnings == 1 ? "" : "s");
      for (int k = 0; k < x->n_warnings; k++) {
        fputs("<li>", f);
        esc(f, x->warnings[k]);
        fputs("</li>\n", f);
      }
      fputs("</ul></details>\n", f);
    }
  }
}

void alma__html_results_section(const alma_results *r, FILE *f, const char *heading) {
  fputs("<section class=\"results\">\n", f);
  if (heading) {
    fputs("<h2 class=\"file\">", f);
    esc(f, heading);
    fputs("</h2>\n", f);
  }
  section_header(r, f);
  section_summary(r, f);
  chart_latency(r, f);
  chart_throughput(r, f);
  chart_pareto(r, f);
  chart_batches(r, f);
  chart_scaling(r, f);
  chart_profile(r, f);
  section_roofline(r, f);
  section_failures(r, f);
  fputs("</section>\n", f);
}

/* ---- alma compare ------------------------------------------------------------------------------ */
static double jnum(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *jstr(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(v) ? v->valuestring : "";
}

static const char *verdict_color(const char *v) {
  if (!strncmp(v, "slower", 6) || !strcmp(v, "now failing")) return "#c0392b";
  if (!strncmp(v, "faster", 6)) return "#1e8449";
  return "#777";
}

static void compare_label(const cJSON *row, char *buf, size_t n) {
  double in = jnum(row, "instances");
  if (isfinite(in))
    snprintf(buf, n, "%s b%.0f %.0fx%.0f", jstr(row, "conversion"), jnum(row, "batch_size"), in, jnum(row, "workers"));
  else
    snprintf(buf, n, "%s b%.0f", jstr(row, "conversion"), jnum(row, "batch_size"));
}

/* A compared row's ratio and its interval, when it has both (1) or not (0). */
static int row_ratio(const cJSON *row, double *r, double *lo, double *hi) {
  const cJSON *ci = cJSON_GetObjectItemCaseSensitive(row, "ratio_ci95");
  const cJSON *a = cJSON_GetArrayItem(ci, 0), *b = cJSON_GetArrayItem(ci, 1);
  *r = jnum(row, "ratio");
  if (!isfinite(*r) || !cJSON_IsArray(ci) || !cJSON_IsNumber(a) || !cJSON_IsNumber(b)) return 0;
  *lo = a->valuedouble, *hi = b->valuedouble;
  return *lo > 0 && isfinite(*hi);
}

static void compare_one(const cJSON *c, double noise, double fail_above, FILE *f) {
  fputs("<h3>BASE ", f);
  esc(f, jstr(c, "base"));
  fputs(" &#8594; NEW ", f);
  esc(f, jstr(c, "new"));
  fputs("</h3>\n", f);
  const cJSON *w, *row, *rows = cJSON_GetObjectItemCaseSensitive(c, "rows");
  const cJSON *warnings = cJSON_GetObjectItemCaseSensitive(c, "warnings");
  if (cJSON_GetArraySize(warnings) > 0) {
    fputs("<ul class=\"bad\">\n", f);
    cJSON_ArrayForEach(w, warnings) {
      fputs("<li>warning: ", f);
      esc(f, cJSON_IsString(w) ? w->valuestring : "");
      fputs("</li>\n", f);
    }
    fputs("</ul>\n", f);
  }
  /* the forest plot: every compared row's ratio and interval against 1 */
  int n = 0;
  double lo = 1 / (1 + noise), hi = 1 + noise;
  if (fail_above >= 0) hi = fmax(hi, 1 + fail_above);
  double r, a, b;
  cJSON_ArrayForEach(row, rows) {
    if (!row_ratio(row, &r, &a, &b)) continue;
    lo = fmin(lo, a), hi = fmax(hi, b);
    n++;
  }
  char lab[400], b0[32], b1[32], b2[32], tip[600];
  if (n) {
    int row_h = 24, top = 10, h = top + n * row_h + 44;
    alma__scale xs;
    alma__scale_init(&xs, lo / 1.05, hi * 1.05, LABEL_W, CH_W - 20, 1);
    alma__svg_begin(f, CH_W, h, "compare", "NEW/BASE ratio of medians with 95% intervals");
    double bottom = top + n * row_h + 4;
    fprintf(f, "<rect class=\"noise\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%.1f\" fill=\"#eee\"/>\n",
            alma__scale_map(&xs, 1 / (1 + noise)), top, alma__scale_map(&xs, 1 + noise) - alma__scale_map(&xs, 1 / (1 + noise)),
            bottom - top);
    alma__svg_axis_x(f, &xs, bottom, top, "NEW median / BASE median (log scale; > 1: NEW is slower)");
    fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n", alma__scale_map(&xs, 1), top,
            alma__scale_map(&xs, 1), bottom);
    if (fail_above >= 0)
      fprintf(f, "<line class=\"gate\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c0392b\" stroke-dasharray=\"5 3\"/>\n",
              alma__scale_map(&xs, 1 + fail_above), top, alma__scale_map(&xs, 1 + fail_above), bottom);
    int k = 0;
    cJSON_ArrayForEach(row, rows) {
      if (!row_ratio(row, &r, &a, &b)) continue;
      double y = top + k * row_h + row_h / 2.0;
      const char *col = verdict_color(jstr(row, "verdict"));
      compare_label(row, lab, sizeof lab);
      snprintf(tip, sizeof tip, "%s: %s [%s, %s], %s", lab, alma__num_str(r, b0, sizeof b0), alma__num_str(a, b1, sizeof b1),
               alma__num_str(b, b2, sizeof b2), jstr(row, "verdict"));
      fputs("<g class=\"mark\"><title>", f);
      esc(f, tip);
      fputs("</title>\n", f);
      alma__svg_text(f, LABEL_W - 8, y + 4, "end", NULL, lab);
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>\n",
              alma__scale_map(&xs, a), y, alma__scale_map(&xs, b), y, col);
      fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"/>\n</g>\n", alma__scale_map(&xs, r), y, col);
      k++;
    }
    alma__svg_end(f);
    fprintf(f, "<p class=\"muted\">Grey band: &#177;%g%% (--noise), changes inside it are no significant change%s.</p>\n",
            100 * noise, fail_above >= 0 ? "; dashed red line: the --fail-above gate" : "");
  }
  fputs("<table class=\"sortable\"><thead><tr><th class=\"l\">row</th><th>BASE median ms</th><th>NEW median ms</th>"
        "<th>NEW/BASE</th><th>95% CI</th><th class=\"l\">method</th><th class=\"l\">verdict</th><th class=\"l\">gate</th>"
        "</tr></thead><tbody>\n", f);
  cJSON_ArrayForEach(row, rows) {
    compare_label(row, lab, sizeof lab);
    fputs("<tr>", f);
    td_str(f, lab);
    td_num(f, jnum(row, "base_median_ms"), NULL);
    td_num(f, jnum(row, "new_median_ms"), NULL);
    td_num(f, jnum(row, "ratio"), NULL);
    if (row_ratio(row, &r, &a, &b)) {
      snprintf(tip, sizeof tip, "[%s, %s]", alma__num_str(a, b1, sizeof b1), alma__num_str(b, b2, sizeof b2));
      td_num(f, a, tip);
    } else {
      td_num(f, NAN, NULL);
    }
    td_str(f, jstr(row, "method"));
    fprintf(f, "<td class=\"l\" data-v=\"");
    esc(f, jstr(row, "verdict"));
    fprintf(f, "\" style=\"color:%s\">", verdict_color(jstr(row, "verdict")));
    esc(f, jstr(row, "verdict"));
    fputs("</td>", f);
    td_str(f, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "fails_gate")) ? "FAIL" : "");
    fputs("</tr>\n", f);
  }
  fputs("</tbody></table>\n", f);
  static const char *only[] = {"only_in_base", "only_in_new"};
  for (int s = 0; s < 2; s++) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(c, only[s]);
    if (cJSON_GetArraySize(o) == 0) continue;
    fprintf(f, "<p class=\"muted\">Only in %s (not compared): ", s ? "NEW" : "BASE");
    int k = 0;
    cJSON_ArrayForEach(row, o) {
      compare_label(row, lab, sizeof lab);
      if (k++) fputs(", ", f);
      esc(f, lab);
    }
    fputs("</p>\n", f);
  }
}

void alma__html_compare_section(const cJSON *doc, FILE *f) {
  double noise = jnum(doc, "noise"), fail = jnum(doc, "fail_above");
  if (!isfinite(noise)) noise = 0;
  if (!isfinite(fail)) fail = -1;
  const cJSON *c, *cmps = cJSON_GetObjectItemCaseSensitive(doc, "comparisons");
  fputs("<section class=\"compare\"><h2>Comparison</h2>\n", f);
  fprintf(f, "<p>Ratio of median batch latencies NEW/BASE per row with its 95%% interval (%s, %.0f resamples, seed "
          "%.0f). Slower or faster: the whole interval lies beyond &#177;%g%%.", jstr(doc, "method"), jnum(doc, "resamples"),
          jnum(doc, "seed"), 100 * noise);
  if (fail >= 0)
    fprintf(f, " Gate: <b class=\"%s\">%s</b> (--fail-above %g%%).", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "regression")) ? "bad" : "good",
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "regression")) ? "FAIL" : "PASS", 100 * fail);
  fputs("</p>\n", f);
  cJSON_ArrayForEach(c, cmps) compare_one(c, noise, fail, f);
  fputs("</section>\n", f);
}

/* ---- files ------------------------------------------------------------------------------------- */
alma_status alma__html_write(const char *path, const alma_results *const *rs, const char *const *labels, int n,
                             const cJSON *compare, const char *title) {
  FILE *f = !strcmp(path, "-") ? stdout : fopen(path, "w");
  if (!f) return alma__errorf(ALMA_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
  char t[600];
  if (!title) {
    const char *m = n > 0 && rs[0]->model_path && *rs[0]->model_path ? rs[0]->model_path : "model";
    const char *slash = strrchr(m, '/');
    snprintf(t, sizeof t, "%s: %s", compare ? "alma compare" : "alma bench", slash ? slash + 1 : m);
    title = t;
  }
  page_begin(f, title);
  if (compare) alma__html_compare_section(compare, f);
  for (int i = 0; i < n; i++) alma__html_results_section(rs[i], f, n > 1 || compare ? (labels ? labels[i] : NULL) : NULL);
  page_end(f);
  int bad = ferror(f);
  if (f != stdout) bad |= fclose(f) != 0;
  else fflush(f);
  return bad ? alma__errorf(ALMA_ERR_IO, "error writing '%s'", path) : ALMA_OK;
}
