/* A program linked to libalma.so (not the objects the CLI links): benchmarks MODEL with one
 * conversion on the build cache in CACHE_DIR and prints "<conversion> <cache status>: <reason>".
 * tests/cache/shared_test.sh checks that it and the CLI from the same build reuse each other's
 * builds. usage: shared_bench MODEL CACHE_DIR CONVERSION */
#include <stdio.h>

#include <alma/alma.h>

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: shared_bench MODEL CACHE_DIR CONVERSION\n");
    return 2;
  }
  alma_config cfg;
  alma_config_init(&cfg);
  const char *set[][2] = {{"cache_dir", argv[2]}, {"n_samples", "2"}, {"min_time_s", "0"}, {"warmup", "1"},
                          {"warmup_s", "0"}};
  for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
    if (alma_config_set(&cfg, set[i][0], set[i][1]) != ALMA_OK) {
      fprintf(stderr, "shared_bench: %s: %s\n", set[i][0], alma_last_error());
      return 2;
    }
  alma_results *res = NULL;
  const char *conv[] = {argv[3]};
  alma_status st = alma_benchmark_model(argv[1], &cfg, conv, 1, NULL, &res);
  if (!res) {
    fprintf(stderr, "shared_bench: %s\n", alma_last_error());
    return 1;
  }
  for (int i = 0; i < alma_results_count(res); i++) {
    const alma_result *r = alma_results_get(res, i);
    const alma_cache_info *c = alma_result_cache(r);
    printf("%s %s: %s\n", alma_result_conversion(r), c && c->status ? c->status : "none", c ? c->reason : "");
  }
  alma_results_free(res);
  return st == ALMA_OK ? 0 : 1;
}
