/* `alma info MODEL [--json]`: what a model is — inputs and outputs (with symbolic dims), op histogram,
 * parameters, compute for one sample, planned activation peak, opset, producer and hash. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "cli.h"
#include "core/core.h"

static void info_usage(FILE *f) {
  fprintf(f,
          "usage: alma info MODEL [--json]\n\n"
          "Describes an ONNX model: inputs and outputs (names, shapes with symbolic dims, dtypes), the\n"
          "op histogram, parameter count and bytes, MACs and FLOPs for one sample, the planned peak of\n"
          "activation memory at batch 1, the opsets (ai.onnx and any other domain), the producer and the\n"
          "model hash.\n\n"
          "  --json     print one JSON object instead of text\n"
          "  -h, --help this help\n");
}

/* "[batch,3,224,224]": symbolic dims by name, unknown ones as '?'. */
static void shape_text(const alma_model *m, int is_input, int i, char *buf, size_t n) {
  int rank = is_input ? alma_model_input_rank(m, i) : alma_model_output_rank(m, i);
  size_t o = 0;
  o += (size_t)snprintf(buf, n, "[");
  if (rank < 0) {
    snprintf(buf, n, "(unknown rank)");
    return;
  }
  for (int a = 0; a < rank && o < n; a++) {
    int64_t d = is_input ? alma_model_input_dim(m, i, a) : alma_model_output_dim(m, i, a);
    const char *p = is_input ? alma_model_input_dim_param(m, i, a) : alma_model_output_dim_param(m, i, a);
    if (d >= 0) o += (size_t)snprintf(buf + o, n - o, "%s%" PRId64, a ? "," : "", d);
    else o += (size_t)snprintf(buf + o, n - o, "%s%s", a ? "," : "", p && p[0] ? p : "?");
  }
  if (o < n) snprintf(buf + o, n - o, "]");
}

static cJSON *shape_json(const alma_model *m, int is_input, int i) {
  int rank = is_input ? alma_model_input_rank(m, i) : alma_model_output_rank(m, i);
  if (rank < 0) return cJSON_CreateNull();
  cJSON *a = cJSON_CreateArray();
  for (int k = 0; k < rank; k++) {
    int64_t d = is_input ? alma_model_input_dim(m, i, k) : alma_model_output_dim(m, i, k);
    const char *p = is_input ? alma_model_input_dim_param(m, i, k) : alma_model_output_dim_param(m, i, k);
    if (d >= 0) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)d));
    else if (p && p[0]) cJSON_AddItemToArray(a, cJSON_CreateString(p));
    else cJSON_AddItemToArray(a, cJSON_CreateNull());
  }
  return a;
}

/* 1234567 → "1.23 M" */
static const char *human(double v, char *buf, size_t n) {
  static const char *suffix[] = {"", " K", " M", " G", " T", " P"};
  int k = 0;
  while (v >= 1000 && k < 5) {
    v /= 1000;
    k++;
  }
  snprintf(buf, n, k ? "%.3g%s" : "%.0f%s", v, suffix[k]);
  return buf;
}

static const char *human_bytes(double v, char *buf, size_t n) {
  static const char *suffix[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int k = 0;
  while (v >= 1024 && k < 4) {
    v /= 1024;
    k++;
  }
  snprintf(buf, n, k ? "%.3g %s" : "%.0f %s", v, suffix[k]);
  return buf;
}

static void print_text(const char *path, alma_model *m, const alma_model_summary *s) {
  char a[64], b[64], shp[512];
  printf("model            %s\n", alma__safe(path));
  printf("producer         %s%s%s\n", s->producer_name && s->producer_name[0] ? alma__safe(s->producer_name) : "(unknown)",
         s->producer_version && s->producer_version[0] ? " " : "", s->producer_version ? alma__safe(s->producer_version) : "");
  printf("opset            %" PRId64, s->opset);
  int others = 0; /* other domains: com.microsoft, ai.onnx.ml, model-local functions */
  for (int i = 0; i < s->n_opset_imports; i++)
    if (strcmp(s->opset_domains[i], "ai.onnx"))
      printf("%s%s %" PRId64, others++ ? ", " : "  (also ", alma__safe(s->opset_domains[i]), s->opset_versions[i]);
  printf("%s\n", others ? ")" : "");
  printf("hash             %s\n", alma_model_hash(m));
  int w = 4;
  for (int i = 0; i < alma_model_num_inputs(m); i++)
    if ((int)strlen(alma_model_input_name(m, i)) > w) w = (int)strlen(alma_model_input_name(m, i));
  for (int i = 0; i < alma_model_num_outputs(m); i++)
    if ((int)strlen(alma_model_output_name(m, i)) > w) w = (int)strlen(alma_model_output_name(m, i));
  if (w > 40) w = 40;
  printf("inputs (%d)\n", alma_model_num_inputs(m));
  for (int i = 0; i < alma_model_num_inputs(m); i++) {
    shape_text(m, 1, i, shp, sizeof shp);
    printf("  %-*s  %-8s %s\n", w, alma__safe(alma_model_input_name(m, i)), alma_dtype_name(alma_model_input_dtype(m, i)),
           shp);
  }
  printf("outputs (%d)\n", alma_model_num_outputs(m));
  for (int i = 0; i < alma_model_num_outputs(m); i++) {
    shape_text(m, 0, i, shp, sizeof shp);
    printf("  %-*s  %-8s %s\n", w, alma__safe(alma_model_output_name(m, i)), alma_dtype_name(alma_model_output_dtype(m, i)),
           shp);
  }
  printf("parameters       %s (%s)\n", human((double)s->n_params, a, sizeof a),
         human_bytes((double)s->param_bytes, b, sizeof b));
  if (s->macs >= 0) printf("MACs / sample    %s\n", human((double)s->macs, a, sizeof a));
  else printf("MACs / sample    unknown\n");
  if (s->flops >= 0) printf("FLOPs / sample   %s\n", human((double)s->flops, a, sizeof a));
  else printf("FLOPs / sample   unknown\n");
  if (s->planned_peak_bytes >= 0)
    printf("activation peak  %s (planned, batch 1)\n", human_bytes((double)s->planned_peak_bytes, a, sizeof a));
  else printf("activation peak  unknown\n");
  printf("nodes            %" PRId64 " (%d op types)\n", s->n_nodes, s->n_op_types);
  for (int i = 0; i < s->n_op_types; i++) printf("  %-24s %6" PRId64 "\n", alma__safe(s->op_types[i]), s->op_counts[i]);
}

static int print_json(const char *path, alma_model *m, const alma_model_summary *s) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "model", path);
  cJSON_AddStringToObject(root, "producer_name", s->producer_name ? s->producer_name : "");
  cJSON_AddStringToObject(root, "producer_version", s->producer_version ? s->producer_version : "");
  cJSON_AddNumberToObject(root, "opset", (double)s->opset);
  cJSON *imports = cJSON_AddObjectToObject(root, "opset_imports");
  for (int i = 0; i < s->n_opset_imports; i++)
    cJSON_AddNumberToObject(imports, s->opset_domains[i], (double)s->opset_versions[i]);
  cJSON_AddStringToObject(root, "hash", alma_model_hash(m));
  for (int io = 0; io < 2; io++) {
    int is_input = io == 0, n = is_input ? alma_model_num_inputs(m) : alma_model_num_outputs(m);
    cJSON *arr = cJSON_AddArrayToObject(root, is_input ? "inputs" : "outputs");
    for (int i = 0; i < n; i++) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "name", is_input ? alma_model_input_name(m, i) : alma_model_output_name(m, i));
      cJSON_AddStringToObject(
          o, "dtype", alma_dtype_name(is_input ? alma_model_input_dtype(m, i) : alma_model_output_dtype(m, i)));
      cJSON_AddItemToObject(o, "shape", shape_json(m, is_input, i));
      cJSON_AddItemToArray(arr, o);
    }
  }
  cJSON_AddNumberToObject(root, "parameters", (double)s->n_params);
  cJSON_AddNumberToObject(root, "parameter_bytes", (double)s->param_bytes);
  if (s->macs >= 0) cJSON_AddNumberToObject(root, "macs_per_sample", (double)s->macs);
  else cJSON_AddNullToObject(root, "macs_per_sample");
  if (s->flops >= 0) cJSON_AddNumberToObject(root, "flops_per_sample", (double)s->flops);
  else cJSON_AddNullToObject(root, "flops_per_sample");
  if (s->planned_peak_bytes >= 0) cJSON_AddNumberToObject(root, "planned_peak_bytes", (double)s->planned_peak_bytes);
  else cJSON_AddNullToObject(root, "planned_peak_bytes");
  cJSON_AddNumberToObject(root, "nodes", (double)s->n_nodes);
  cJSON *ops = cJSON_AddObjectToObject(root, "ops");
  for (int i = 0; i < s->n_op_types; i++) cJSON_AddNumberToObject(ops, s->op_types[i], (double)s->op_counts[i]);
  char *txt = alma__utf8_fix_owned(cJSON_Print(root)); /* names need not be UTF-8; JSON must */
  cJSON_Delete(root);
  if (!txt) {
    fprintf(stderr, "alma: error: out of memory formatting JSON\n");
    return ALMA_EXIT_FAILED;
  }
  puts(txt);
  cJSON_free(txt);
  return ALMA_EXIT_OK;
}

int alma_cmd_info(int argc, char **argv) {
  static const struct option opts[] = {{"json", no_argument, 0, 'j'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  int json = 0, c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
      case 'j': json = 1; break;
      case 'h': info_usage(stdout); return ALMA_EXIT_OK;
      default: info_usage(stderr); return ALMA_EXIT_USAGE;
    }
  }
  if (optind != argc - 1) {
    fprintf(stderr, "alma: error: info takes exactly one MODEL\n");
    info_usage(stderr);
    return ALMA_EXIT_USAGE;
  }
  const char *path = argv[optind];
  alma_model *m = NULL;
  alma_status st = alma_model_load(path, &m);
  if (st != ALMA_OK) return alma_cli_fail(st, NULL);
  const alma_model_summary *s = NULL;
  st = alma_model_summarize(m, &s);
  if (st != ALMA_OK) {
    int rc = alma_cli_fail(st, path);
    alma_model_free(m);
    return rc;
  }
  int rc = ALMA_EXIT_OK;
  if (json) rc = print_json(path, m, s);
  else print_text(path, m, s);
  if (fflush(stdout) != 0) rc = ALMA_EXIT_FAILED;
  alma_model_free(m);
  return rc;
}
