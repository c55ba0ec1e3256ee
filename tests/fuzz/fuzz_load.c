/* libFuzzer target for the model loader: any bytes → alma_model_load_from_memory; on success the
 * summary (static shape inference, constant folding, memory plan), the hash and every accessor are
 * exercised, then the model is freed. Built with clang -fsanitize=fuzzer,address,undefined when
 * ALMA_FUZZ is on; fuzz_replay.c provides a main() that feeds files through the same function in
 * ordinary builds (the regression inputs in tests/fuzz/regressions/). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "alma/alma.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("ALMA_LOG", "error", 0); /* warnings about odd models would flood the fuzzer's output */
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  alma_model *m = NULL;
  /* external data resolves against a directory that does not exist, so an input can never make
   * the loader read files from wherever the fuzzer happens to run */
  if (alma_model_load_from_memory(data, size, "/nonexistent/alma-fuzz", &m) != ALMA_OK) return 0;
  const alma_model_summary *s = NULL;
  if (alma_model_summarize(m, &s) == ALMA_OK) {
    /* unsigned: the sum only keeps the reads alive, and may wrap */
    volatile uint64_t sink = (uint64_t)s->n_params + (uint64_t)s->macs + (uint64_t)s->flops + (uint64_t)s->planned_peak_bytes;
    for (int i = 0; i < s->n_op_types; i++) sink += (uint64_t)s->op_counts[i] + (uint64_t)s->op_types[i][0];
    (void)sink;
  }
  volatile size_t h = 0;
  const char *hash = alma_model_hash(m);
  if (hash) h += (size_t)hash[0];
  for (int io = 0; io < 2; io++) {
    int n = io ? alma_model_num_outputs(m) : alma_model_num_inputs(m);
    for (int i = 0; i < n; i++) {
      const char *name = io ? alma_model_output_name(m, i) : alma_model_input_name(m, i);
      int rank = io ? alma_model_output_rank(m, i) : alma_model_input_rank(m, i);
      h += (size_t)(io ? alma_model_output_dtype(m, i) : alma_model_input_dtype(m, i));
      if (name) h += (size_t)name[0];
      for (int a = 0; a < rank; a++) {
        h += (size_t)(io ? alma_model_output_dim(m, i, a) : alma_model_input_dim(m, i, a));
        const char *p = io ? alma_model_output_dim_param(m, i, a) : alma_model_input_dim_param(m, i, a);
        if (p) h += (size_t)p[0];
      }
    }
  }
  (void)h;
  alma_model_free(m);
  return 0;
}
