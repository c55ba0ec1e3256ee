/* alma bench --trace: the per-node profile as Chrome trace-event JSON (the "JSON Object Format" of
 * the Trace Event Format, which chrome://tracing and ui.perfetto.dev load). One process per result
 * row (conversion and batch size, each ran in a process of its own), one track per placement (the
 * runtime, and EAGER where nodes fell back to it) under a track for the batch, one complete ("X")
 * slice per profile entry with its op type and placement as arguments.
 *
 * The profile keeps each entry's time summed over the profiled batches, not each run's start, so
 * the timeline is the mean profiled batch: entries laid end to end in execution order, each as
 * long as its mean time per batch, starting where the batch starts; the batch slice is the mean
 * profiled batch latency, and the gaps left at its end are the runtime's own work between nodes.
 * alma's runtimes run a batch's nodes one after another on the calling thread (threads work inside
 * a node), so the order on the time axis is the order they ran in. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

static int by_order(const void *a, const void *b) {
  const alma_profile_node *x = *(const alma_profile_node *const *)a, *y = *(const alma_profile_node *const *)b;
  return (x->order > y->order) - (x->order < y->order);
}

static cJSON *meta(const char *what, int pid, int tid, const char *key, cJSON *value) {
  cJSON *e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "name", what);
  cJSON_AddStringToObject(e, "ph", "M");
  cJSON_AddNumberToObject(e, "pid", pid);
  cJSON_AddNumberToObject(e, "tid", tid);
  cJSON_AddItemToObject(cJSON_AddObjectToObject(e, "args"), key, value);
  return e;
}

static cJSON *slice(const char *name, const char *cat, int pid, int tid, double ts_us, double dur_us) {
  cJSON *e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "name", name);
  cJSON_AddStringToObject(e, "cat", cat);
  cJSON_AddStringToObject(e, "ph", "X");
  cJSON_AddNumberToObject(e, "pid", pid);
  cJSON_AddNumberToObject(e, "tid", tid);
  cJSON_AddNumberToObject(e, "ts", ts_us);
  cJSON_AddNumberToObject(e, "dur", dur_us);
  return e;
}

/* Microseconds rounded to nanoseconds: viewers read ts and dur as floating-point microseconds. */
static double us(double ms) { return round(ms * 1e6) / 1e3; }

static alma_status add_result(cJSON *events, const alma_result *x, int pid, int sweep) {
  const alma_profile *p = &x->prof;
  char name[600];
  if (sweep) snprintf(name, sizeof name, "%s b%lld", x->conversion, (long long)x->batch_size);
  else snprintf(name, sizeof name, "%s", x->conversion);
  cJSON_AddItemToArray(events, meta("process_name", pid, 0, "name", cJSON_CreateString(name)));
  cJSON_AddItemToArray(events, meta("process_sort_index", pid, 0, "sort_index", cJSON_CreateNumber(pid)));
  cJSON_AddItemToArray(events, meta("thread_name", pid, 0, "name", cJSON_CreateString("batch")));
  const alma_profile_node **v = malloc(((size_t)p->n_nodes + 1) * sizeof *v);
  const char **tracks = calloc((size_t)p->n_nodes + 1, sizeof *tracks);
  if (!v || !tracks) {
    free(v);
    free(tracks);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < p->n_nodes; i++) v[i] = &p->nodes[i];
  qsort(v, (size_t)p->n_nodes, sizeof *v, by_order);
  /* the runtime's own track first, then one per other placement in order of appearance */
  int n_tracks = 0;
  tracks[n_tracks++] = p->runtime ? p->runtime : "?";
  double total = 0;
  for (int i = 0; i < p->n_nodes; i++) total += us(v[i]->ms);
  double batch = us(p->batch_ms);
  if (!(batch >= total)) batch = total;  /* rounding: the batch slice must hold its nodes */
  cJSON *b = slice("batch", "batch", pid, 0, 0, batch);
  cJSON *ba = cJSON_AddObjectToObject(b, "args");
  cJSON_AddNumberToObject(ba, "profiled_batches", (double)p->batches);
  cJSON_AddNumberToObject(ba, "batch_ms", p->batch_ms);
  cJSON_AddNumberToObject(ba, "nodes_ms", p->nodes_ms);
  cJSON_AddStringToObject(ba, "times", "mean per batch over the profiled batches, nodes end to end in execution order");
  cJSON_AddItemToArray(events, b);
  double t = 0;
  for (int i = 0; i < p->n_nodes; i++) {
    const alma_profile_node *nd = v[i];
    const char *where = nd->placement && *nd->placement ? nd->placement : tracks[0];
    int tid = 0;
    for (int k = 0; k < n_tracks && !tid; k++)
      if (!strcmp(tracks[k], where)) tid = k + 1;
    if (!tid) {
      tracks[n_tracks++] = where;
      tid = n_tracks;
    }
    double d = us(nd->ms);
    cJSON *e = slice(nd->name, nd->op_type, pid, tid, t, d);
    cJSON *a = cJSON_AddObjectToObject(e, "args");
    cJSON_AddStringToObject(a, "op_type", nd->op_type);
    cJSON_AddStringToObject(a, "placement", where);
    cJSON_AddNumberToObject(a, "members", nd->members);
    cJSON_AddNumberToObject(a, "runs", (double)nd->runs);
    cJSON_AddNumberToObject(a, "ms_per_batch", nd->ms);
    if (isfinite(nd->share)) cJSON_AddNumberToObject(a, "share", nd->share);
    cJSON_AddItemToArray(events, e);
    t += d;
  }
  for (int k = 0; k < n_tracks; k++)
    cJSON_AddItemToArray(events, meta("thread_name", pid, k + 1, "name", cJSON_CreateString(tracks[k])));
  free(v);
  free(tracks);
  return ALMA_OK;
}

alma_status alma__trace_to_json(const alma_results *r, char **json_out) {
  *json_out = NULL;
  cJSON *root = cJSON_CreateObject();
  if (!root) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  cJSON *events = cJSON_AddArrayToObject(root, "traceEvents");
  cJSON_AddStringToObject(root, "displayTimeUnit", "ms");
  cJSON *other = cJSON_AddObjectToObject(root, "otherData");
  cJSON_AddStringToObject(other, "producer", "alma bench --profile --trace");
  cJSON_AddStringToObject(other, "alma_version", alma_version());
  cJSON_AddStringToObject(other, "model", r->model_path ? r->model_path : "");
  cJSON_AddStringToObject(other, "model_hash", r->model_hash);
  cJSON_AddStringToObject(other, "cpu", r->system.cpu_model);
  cJSON_AddStringToObject(other, "timeline", "one mean profiled batch per conversion: per-node mean times, laid end to "
                                             "end in execution order");
  int sweep = 0, pid = 0;
  for (int i = 1; i < r->n; i++) sweep |= r->items[i].batch_size != r->items[0].batch_size;
  alma_status st = ALMA_OK;
  for (int i = 0; i < r->n && st == ALMA_OK; i++) {
    const alma_result *x = &r->items[i];
    if (x->status != ALMA_RESULT_OK || !x->has_profile || x->prof.unavailable) continue;
    st = add_result(events, x, ++pid, sweep);
  }
  char *text = st == ALMA_OK ? alma__utf8_fix_owned(cJSON_PrintUnformatted(root)) : NULL;
  cJSON_Delete(root);
  if (st != ALMA_OK) return st;
  if (!text) return alma__errorf(ALMA_ERR_NOMEM, "out of memory writing the trace");
  *json_out = text;
  return ALMA_OK;
}

alma_status alma__trace_save(const alma_results *r, const char *path) {
  char *text = NULL;
  ALMA_TRY(alma__trace_to_json(r, &text));
  FILE *f = !strcmp(path, "-") ? stdout : fopen(path, "w");
  if (!f) {
    free(text);
    return alma__errorf(ALMA_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
  }
  int bad = fputs(text, f) < 0 || fputc('\n', f) == EOF;
  free(text);
  if (f != stdout) bad |= fclose(f) != 0;
  else bad |= fflush(f) != 0;
  return bad ? alma__errorf(ALMA_ERR_IO, "error writing '%s'", path) : ALMA_OK;
}
