/* Model suites for `alma bench`: a directory of .onnx files or a list file of model paths, each
 * model benchmarked in turn under the same options, gathered into one result set (a row per
 * model x conversion x batch size, each row naming its model) with a summary per model. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/bench.h"
#include "cli.h"
#include "report/report.h"

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && !strcmp(s + n - m, tail);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int push(char ***v, int *n, int *cap, const char *dir, const char *name) {
  if (*n == *cap) {
    int nc = *cap ? 2 * *cap : 16;
    char **nv = realloc(*v, (size_t)nc * sizeof *nv);
    if (!nv) return -1;
    *v = nv;
    *cap = nc;
  }
  size_t len = (dir ? strlen(dir) + 1 : 0) + strlen(name) + 1;
  char *p = malloc(len);
  if (!p) return -1;
  if (dir) snprintf(p, len, "%s/%s", dir, name);
  else snprintf(p, len, "%s", name);
  (*v)[(*n)++] = p;
  return 0;
}

int alma_cli_suite_models(const char *path, char ***models_out, int *n_out) {
  *models_out = NULL;
  *n_out = 0;
  struct stat st;
  if (stat(path, &st) != 0) return 0;  /* not a suite: the model loader names the problem */
  char **v = NULL;
  int n = 0, cap = 0;
  if (S_ISDIR(st.st_mode)) {
    DIR *d = opendir(path);
    if (!d) {
      alma__errorf(ALMA_ERR_IO, "model directory '%s': %s", path, strerror(errno));
      return -1;
    }
    struct dirent *e;
    while ((e = readdir(d)))
      if (e->d_name[0] != '.' && ends_with(e->d_name, ".onnx") && push(&v, &n, &cap, path, e->d_name) != 0) break;
    closedir(d);
    qsort(v, (size_t)n, sizeof *v, cmp_str);
    if (n == 0) {
      free(v);
      alma__errorf(ALMA_ERR_NOT_FOUND, "model directory '%s' holds no .onnx file", path);
      return -1;
    }
  } else if (ends_with(path, ".txt") || ends_with(path, ".list")) {
    FILE *f = fopen(path, "r");
    if (!f) {
      alma__errorf(ALMA_ERR_IO, "model list '%s': %s", path, strerror(errno));
      return -1;
    }
    /* One path a line, relative to the list's directory; blank lines and # comments skipped. */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    char line[4096];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
      lineno++;
      char *p = line;
      while (*p == ' ' || *p == '\t') p++;
      size_t len = strcspn(p, "\r\n");
      while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
      p[len] = 0;
      if (!*p || *p == '#') continue;
      if (push(&v, &n, &cap, *p == '/' || !slash ? NULL : dir, p) != 0) break;
    }
    fclose(f);
    if (n == 0) {
      free(v);
      alma__errorf(ALMA_ERR_PARSE, "model list '%s' names no model (one path a line, # for comments)", path);
      return -1;
    }
  } else {
    return 0;
  }
  *models_out = v;
  *n_out = n;
  return 1;
}

void alma_cli_suite_free(char **models, int n) {
  for (int i = 0; i < n; i++) free(models[i]);
  free(models);
}

/* An error row for a model that did not start (no result set of its own). */
static void error_row(alma_results *all, const char *model, alma_status st) {
  alma_result *r = alma__results_add(all);
  if (!r) return;
  r->conversion = alma__strdup("-");
  r->status = ALMA_RESULT_ERROR;
  r->error_status = st;
  char line[1200];
  snprintf(line, sizeof line, "%s: %s", alma_status_name(st), alma_last_error()[0] ? alma_last_error() : alma_status_str(st));
  r->error = alma__strdup(line);
  r->failed_step = alma__strdup("load");
  alma_result_origin o = {.model = model, .task = -1};
  alma__result_set_origin(r, &o);
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* A row's machine: its partition and CPU model ("" outside a sweep). */
static void machine_of(const alma_result *r, char *buf, size_t n) {
  const alma_result_origin *o = alma_result_origin_of(r);
  snprintf(buf, n, "%s%s%s", o && o->partition ? o->partition : "", o && o->partition && o->machine ? ": " : "",
           o && o->machine ? o->machine : "");
}

static const char *model_of(const alma_result *r) {
  const alma_result_origin *o = alma_result_origin_of(r);
  return o && o->model ? o->model : "";
}

/* The table: a row per model x conversion x batch size (x machine), the speed-up against the
 * model's first timed row at that batch size on that machine. */
void alma_cli_print_suite(const alma_results *all, FILE *f) {
  int width = 10, cw = 10, mw = 7, machines = 0;
  char m0[256] = "", mk[256];
  for (int i = 0; i < alma_results_count(all); i++) {
    const alma_result *r = alma_results_get(all, i);
    int w = (int)strlen(base_name(model_of(r)));
    if (w > width) width = w;
    int c = (int)strlen(alma_result_conversion(r));
    if (c > cw) cw = c;
    machine_of(r, mk, sizeof mk);
    if ((int)strlen(mk) > mw) mw = (int)strlen(mk);
    if (i == 0) snprintf(m0, sizeof m0, "%s", mk);
    machines |= strcmp(mk, m0) != 0;
  }
  fprintf(f, "\n%d rows (model x conversion x batch size%s)\n", alma_results_count(all), machines ? " x machine" : "");
  fprintf(f, "%-*s  %-*s  %5s  ", width, "model", cw, "conversion", "batch");
  if (machines) fprintf(f, "%-*s  ", mw, "machine");
  fprintf(f, "%-11s  %12s  %10s  %10s  %8s\n", "status", "samples/s", "median ms", "p99 ms", "speed-up");
  for (int i = 0; i < alma_results_count(all); i++) {
    const alma_result *r = alma_results_get(all, i);
    char mr[256], mb[256];
    machine_of(r, mr, sizeof mr);
    const alma_result *base = NULL;
    for (int k = 0; k < alma_results_count(all) && !base; k++) {
      const alma_result *b = alma_results_get(all, k);
      machine_of(b, mb, sizeof mb);
      if (!strcmp(model_of(b), model_of(r)) && !strcmp(mb, mr) &&
          alma_result_batch_size(b) == alma_result_batch_size(r) && alma_result_status_code(b) == ALMA_RESULT_OK &&
          alma_result_latency(b)->n > 0)
        base = b;
    }
    double med = alma_result_median_ms(r, NULL);
    int ok = alma_result_status_code(r) == ALMA_RESULT_OK && alma_result_latency(r)->n > 0;
    char sp[32] = "-";
    if (ok && base) snprintf(sp, sizeof sp, "%.2fx", alma_result_median_ms(base, NULL) / med);
    fprintf(f, "%-*s  %-*s  %5lld  ", width, base_name(model_of(r)), cw, alma_result_conversion(r),
            (long long)alma_result_batch_size(r));
    if (machines) fprintf(f, "%-*s  ", mw, mr);
    if (ok)
      fprintf(f, "%-11s  %12.4g  %10.4g  %10.4g  %8s\n", alma_result_status_name(r),
              1e3 * (double)alma_result_batch_size(r) / med, med, alma_result_latency(r)->p99, sp);
    else
      fprintf(f, "%-11s  %s\n", alma_result_status_name(r), alma_result_error(r));
  }
  fprintf(f, "speed-up: the model's first conversion at that batch size%s / this one (medians)\n",
          machines ? " on that machine" : "");
}

int alma_cli_bench_suite(const char *label, char **models, int n_models, const alma_config *cfg, const char *const *convs,
                         int n_conv, const alma_cli_suite_out *out) {
  alma_results *all = NULL;
  FILE *report = out->to_stdout ? stderr : stdout;
  int failed = 0;
  alma_status first_st = ALMA_OK;
  for (int i = 0; i < n_models; i++) {
    if (!out->quiet) fprintf(report, "%s== model %d/%d: %s\n", i ? "\n" : "", i + 1, n_models, models[i]);
    alma_data *data = NULL;
    alma_status st = alma_data_random(&data);
    alma_results *res = NULL;
    if (st == ALMA_OK) st = alma_benchmark_model(models[i], cfg, convs, n_conv, data, &res);
    alma_data_free(data);
    if (st != ALMA_OK && first_st == ALMA_OK) first_st = st;
    if (!res) {
      fprintf(stderr, "alma bench: %s: %s\n", models[i], alma_last_error()[0] ? alma_last_error() : alma_status_str(st));
      failed++;
      if (!all) {
        /* the set starts from a model that ran; until then, rows wait in a stand-in set */
        all = calloc(1, sizeof *all);
        if (all) alma_system_info_get(&all->system), all->config = *cfg;
      }
      if (all) error_row(all, models[i], st);
    } else {
      if (out->quiet) {
        fprintf(report, "%s== model %d/%d: %s\n", i ? "\n" : "", i + 1, n_models, models[i]);
        alma_results_print_summary(res, report);
      } else {
        alma_results_print(res, report, out->verbose);
      }
      failed += alma_cli_failures(res);
      if (!all) {
        /* the first set that ran holds the rest; its own rows name their model as the others do */
        all = res;
        for (int k = 0; k < all->n; k++)
          if (!all->items[k].has_origin) {
            alma_result_origin o = {.model = all->model_path, .model_hash = all->model_hash, .task = -1};
            alma__result_set_origin(&all->items[k], &o);
          }
      } else {
        alma__results_append(all, res);
        alma_results_free(res);
      }
    }
    if (alma__interrupted() || (st != ALMA_OK && cfg->fail_on_error)) break;
  }
  int code = failed ? ALMA_EXIT_FAILED : ALMA_EXIT_OK;
  if (!all) return alma_cli_fail(first_st != ALMA_OK ? first_st : ALMA_ERR_NOMEM, NULL);
  alma__results_relabel(all, label);
  alma_cli_print_suite(all, report);
  if (out->json && alma__results_save_json_ex(all, out->json, out->raw, NULL, -1) != ALMA_OK)
    code = alma_cli_fail(ALMA_ERR_IO, "--json");
  if (out->csv && alma_results_save_csv(all, out->csv) != ALMA_OK) code = alma_cli_fail(ALMA_ERR_IO, "--csv");
  if (first_st != ALMA_OK && cfg->fail_on_error && !alma__interrupted()) {
    fflush(report);
    fprintf(stderr, "alma bench: stopped after the first failure (--keep-going runs the rest)\n");
  }
  alma_results_free(all);
  return code;
}
