/* Graph passes: pure graph -> graph transforms (FOLD, FUSE, ...), each tested for numeric
 * equivalence before/after. A pass edits g in place (g is a private copy) and leaves it valid and
 * topologically sorted (call alma__graph_compact at the end). */
#ifndef ALMA_PASS_H
#define ALMA_PASS_H

#include "graph/graph.h"

typedef struct alma_pass_opts {
  int verbose;
  /* Calibration data for INT8_STATIC: n_calib_batches batches of n_inputs tensors each (one per
   * graph input, in input order), batch-major: calib[b * n_inputs + i]. Views owned by the caller.
   * NULL: the pass calibrates on random inputs and warns that this calibrates poorly. */
  const alma_tensor *calib;
  int n_calib_batches;
  int n_inputs;
  const char *calibrator;    /* "minmax" (NULL = default), "percentile", "entropy" */
} alma_pass_opts;

typedef struct alma_pass {
  const char *name;          /* "FOLD" */
  const char *description;
  alma_status (*run)(alma_graph *g, const alma_pass_opts *opts);
  int needs_calibration;     /* reads opts->calib (INT8_STATIC): give it sample batches */
  int lossy;                 /* changes results beyond float rounding (int8, bf16, fp16): judge its
                                outputs by accuracy (cosine, argmax), not by elementwise tolerance */
  /* optional: ALMA_OK, or ALMA_ERR_UNAVAILABLE with the reason (a CPU feature missing) */
  alma_status (*available)(void);
  int emits_alma_ops;        /* its output may hold "alma"-domain nodes (FUSE): a runtime that takes
                                only standard ONNX (runtime.onnx_only) cannot follow it */
} alma_pass;

int alma__pass_count(void);
const alma_pass *alma__pass_at(int i);
const alma_pass *alma__pass_find(const char *name);

#endif
