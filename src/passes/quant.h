/* Internals shared by the quantization and precision passes: calibration (calibrate.c) and small
 * graph-editing helpers (quantize.c). */
#ifndef ALMA_PASSES_QUANT_H
#define ALMA_PASSES_QUANT_H

#include "graph/infer.h"
#include "passes/pass.h"

/* ---- calibration (calibrate.c) ----------------------------------------------------------------- */
typedef enum { ALMA__CALIB_MINMAX, ALMA__CALIB_PERCENTILE, ALMA__CALIB_ENTROPY } alma__calibrator;

/* "minmax" (also NULL/""), "percentile", "entropy" (case-insensitive); ALMA_ERR_INVALID_ARG
 * listing the names otherwise. */
alma_status alma__calibrator_parse(const char *name, alma__calibrator *out);

#define ALMA__CALIB_PERCENTILE_P 0.9999 /* fraction of |x| kept by the percentile calibrator */
#define ALMA__CALIB_BINS 2048           /* histogram bins over [0, max |x|] */
#define ALMA__CALIB_ENTROPY_BINS 512    /* the entropy calibrator merges them to this many */
#define ALMA__CALIB_ENTROPY_LEVELS 128  /* ... and quantizes |x| to 128 levels (TensorRT's) */

/* Runs the float graph g with EAGER kernels over the calibration batches of opts (or over random
 * batches, with a warning, when there are none) and observes the values[0..n) (float32 tensors):
 * lo[i], hi[i] receive the range the calibrator chose for each, always containing 0. A value
 * never seen (not computed, or not float32) gets lo = hi = 0 and seen[i] = 0. */
alma_status alma__calibrate(const alma_graph *g, const int *values, int n, const alma_pass_opts *opts,
                            double *lo, double *hi, int *seen);

/* The calibrators on a histogram of |x|: counts[0..nbins) over [0, range]. Exposed for tests. */
double alma__calib_percentile(const uint64_t *counts, int nbins, double range, double p);
/* TensorRT's entropy calibration: the threshold t minimizing KL(P || Q), P the distribution of |x|
 * clipped at t, Q the same quantized to `levels` levels. */
double alma__calib_entropy(const uint64_t *counts, int nbins, double range, int levels);

/* ---- graph editing (quantize.c) --------------------------------------------------------------- */
/* A new value named "<base>/<suffix>" (made unique). -1 and an error on OOM. */
int alma__q_new_value(alma_graph *g, const char *base, const char *suffix);
/* A new constant value (zeroed, owned data) named "<base>/<suffix>"; *t_out to fill. -1 on OOM. */
int alma__q_new_const(alma_graph *g, const char *base, const char *suffix, alma_dtype dt, int rank,
                      const int64_t *dims, alma_tensor **t_out);
/* A scalar (rank 0) constant. */
int alma__q_scalar_f32(alma_graph *g, const char *base, const char *suffix, float v);
int alma__q_scalar_q8(alma_graph *g, const char *base, const char *suffix, alma_dtype dt, int v);
/* Appends a node of the default ONNX domain, resolved for the graph's opset; *idx_out (may be
 * NULL) receives its index. Fails on OOM or when the op has no version for this opset. Node
 * pointers taken before are invalidated (the node array may move). */
alma_status alma__q_add_node(alma_graph *g, const char *op_type, const char *name, const int *inputs, int n_inputs,
                             const int *outputs, int n_outputs, int *idx_out);
/* Sets (adds or replaces) an attribute of node i; strings and lists are copied into the arena. */
alma_status alma__q_attr_i(alma_graph *g, int i, const char *name, int64_t v);
alma_status alma__q_attr_f(alma_graph *g, int i, const char *name, float v);
/* Copies node `from`'s attributes onto node `to` (they share payloads: attributes are read-only). */
alma_status alma__q_copy_attrs(alma_graph *g, int to, int from);
/* Replaces every use of value `from` by `to` in the inputs of live nodes, except node `skip`
 * (-1: none). Graph outputs are not touched. Returns the number of replaced uses. */
int alma__q_replace_uses(alma_graph *g, int from, int to, int skip);
/* Marks nodes whose outputs are all unused as dead, repeatedly. */
void alma__q_remove_dead(alma_graph *g);
/* A bias value b in accumulator units, rint(b / (x_scale * w_scale)) with the scale multiplied in
 * float32 as the graph stores it, into *q; 0 (*q untouched) when that is NaN or outside int32 (an
 * input scale too small for the bias: the bias must stay float32 then). INT8_STATIC and QLINEAR. */
int alma__q_bias_i32(double b, float x_scale, float w_scale, int32_t *q);
/* Whether value v is read by a subgraph of some node (then its producer must not change). */
int alma__q_used_by_subgraph(const alma_graph *g, int v);

#endif
