/* linear_bench: benchmark a small Linear+ReLU model on random data through alma's C API.
 *
 *   linear_bench [-c CONVERSIONS] [-b BATCH] [-n SAMPLES] [-t MIN_TIME_S] [-j RESULTS.json] MODEL.onnx
 *
 * CONVERSIONS is a comma list of names, IDs or chains (default "EAGER,FOLD+EAGER"); "all" means
 * every conversion available on this machine. Exit status: 0 when every conversion ran and
 * passed its output check, 1 when one failed, 2 on a usage error. See README.md.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <alma/alma.h>

#define MAX_CONV 64

static void usage(FILE *f) {
  fputs("usage: linear_bench [-c CONVERSIONS|all] [-b BATCH] [-n SAMPLES] [-t MIN_TIME_S] [-j RESULTS.json] MODEL.onnx\n",
        f);
}

/* alma_config_set validates every value and names the key when one is wrong. */
static int set(alma_config *cfg, const char *key, const char *value) {
  alma_status st = alma_config_set(cfg, key, value);
  if (st != ALMA_OK) {
    fprintf(stderr, "linear_bench: %s: %s\n", alma_status_str(st), alma_last_error());
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *conv_arg = "EAGER,FOLD+EAGER", *batch = "32", *samples = "2000", *min_time = "0.5";
  const char *json_path = NULL;
  int opt;
  while ((opt = getopt(argc, argv, "c:b:n:t:j:h")) != -1) {
    switch (opt) {
      case 'c': conv_arg = optarg; break;
      case 'b': batch = optarg; break;
      case 'n': samples = optarg; break;
      case 't': min_time = optarg; break;
      case 'j': json_path = optarg; break;
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
  }
  if (optind != argc - 1) {
    usage(stderr);
    return 2;
  }
  const char *model_path = argv[optind];

  /* 1. Configuration: defaults, then dictionary-style settings. */
  alma_config cfg;
  alma_config_init(&cfg);
  if (set(&cfg, "batch_size", batch) || set(&cfg, "n_samples", samples) || set(&cfg, "min_time_s", min_time) ||
      set(&cfg, "seed", "42") ||
      /* keep going after a failed conversion, so every row shows up in the report */
      set(&cfg, "fail_on_error", "false"))
    return 2;

  /* 2. Input data: random N(0, 1) batches from the seed. The override is optional here (the
   * model's symbolic "batch" dim would take batch_size anyway); it shows how to pin a shape. */
  alma_data *data = NULL;
  int64_t dims[2] = {cfg.batch_size, 256};
  alma_status st = alma_data_random(&data);
  if (st == ALMA_OK) st = alma_data_set_input(data, "x", 2, dims, ALMA_DTYPE_FLOAT32);
  if (st != ALMA_OK) {
    fprintf(stderr, "linear_bench: %s\n", alma_last_error());
    alma_data_free(data);
    return 2;
  }

  /* 3. Conversions: split the comma list; "all" passes NULL (every available conversion). */
  char *copy = strdup(conv_arg);
  const char *conv[MAX_CONV];
  int n_conv = 0;
  if (!copy) return 2;
  if (strcmp(conv_arg, "all") != 0)
    for (char *save = NULL, *p = strtok_r(copy, ",", &save); p && n_conv < MAX_CONV; p = strtok_r(NULL, ",", &save))
      conv[n_conv++] = p;

  /* 4. The single call: each conversion in its own process, outputs checked against EAGER. */
  alma_results *results = NULL;
  st = alma_benchmark_model(model_path, &cfg, n_conv ? conv : NULL, n_conv, data, &results);
  if (!results) {
    /* Rejected before the sweep started: bad model, unknown conversion name, bad input shape. */
    fprintf(stderr, "linear_bench: %s: %s\n", alma_status_str(st), alma_last_error());
    alma_data_free(data);
    free(copy);
    return 1;
  }

  /* 5. Report: alma's own text, then a few fields read through the accessors. */
  alma_results_print(results, stdout, 1);
  printf("\n%-16s %-12s %14s %12s %10s\n", "conversion", "status", "samples/s", "p50 ms", "max err");
  for (int i = 0; i < alma_results_count(results); i++) {
    const alma_result *r = alma_results_get(results, i);
    const alma_latency_stats *lat = alma_result_latency(r);
    const alma_output_check *chk = alma_result_check(r);
    if (alma_result_status_code(r) == ALMA_RESULT_OK)
      printf("%-16s %-12s %14.1f %12.4f %10.3g\n", alma_result_conversion(r), alma_result_status_name(r),
             alma_result_throughput(r), lat->p50, chk->performed ? chk->max_abs_err : 0.0);
    else
      printf("%-16s %-12s %s\n", alma_result_conversion(r), alma_result_status_name(r), alma_result_error(r));
  }
  int rc = alma_results_n_failed(results) ? 1 : 0;
  if (json_path) {
    if (alma_results_save_json(results, json_path, 0) != ALMA_OK) {
      fprintf(stderr, "linear_bench: %s\n", alma_last_error());
      rc = 1;
    } else {
      printf("results written to %s\n", json_path);
    }
  }
  alma_results_free(results);
  alma_data_free(data);
  free(copy);
  return rc;
}
