/* alma — benchmark a neural network under every way of converting and executing it.
 *
 * Ownership: every object returned through an `_out` parameter belongs to the caller and is released
 * with its `_free` function. Strings returned by accessors belong to the object they come from and
 * live as long as it does. Every function returns alma_status; on failure alma_last_error() says
 * what failed, where (file, node, op, key) and why.
 */
#ifndef ALMA_ALMA_H
#define ALMA_ALMA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "alma/status.h"
#include "alma/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types; the numbers are ONNX's TensorProto.DataType.
 *
 * The low-precision types (17-26) take one byte per element in alma's memory, the way ml_dtypes'
 * numpy arrays hold them: int4/int2 sign-extended in an int8 byte, uint4/uint2 in a uint8 byte,
 * float4e2m1 its 4-bit code in the low nibble, the float8 types their byte. So alma_dtype_size()
 * is 1 for them and tensors passed in or out of alma use that layout; the ONNX loader unpacks
 * ONNX's packed form (two 4-bit or four 2-bit elements per byte, low bits first) and the saver
 * packs it again. Only data-movement operators, Cast/CastLike and QuantizeLinear/DequantizeLinear
 * accept them; arithmetic refuses them by name. */
typedef enum {
  ALMA_DTYPE_UNDEFINED = 0,
  ALMA_DTYPE_FLOAT32 = 1,
  ALMA_DTYPE_UINT8 = 2,
  ALMA_DTYPE_INT8 = 3,
  ALMA_DTYPE_UINT16 = 4,
  ALMA_DTYPE_INT16 = 5,
  ALMA_DTYPE_INT32 = 6,
  ALMA_DTYPE_INT64 = 7,
  ALMA_DTYPE_STRING = 8,
  ALMA_DTYPE_BOOL = 9,
  ALMA_DTYPE_FLOAT16 = 10,
  ALMA_DTYPE_FLOAT64 = 11,
  ALMA_DTYPE_UINT32 = 12,
  ALMA_DTYPE_UINT64 = 13,
  ALMA_DTYPE_BFLOAT16 = 16,
  ALMA_DTYPE_FLOAT8E4M3FN = 17,   /* 1-4-3, bias 7, no inf, NaN S.1111.111, max 448 */
  ALMA_DTYPE_FLOAT8E4M3FNUZ = 18, /* bias 8, no inf, no -0, NaN 0x80, max 240 */
  ALMA_DTYPE_FLOAT8E5M2 = 19,     /* IEEE-like 1-5-2, bias 15, inf and NaN, max 57344 */
  ALMA_DTYPE_FLOAT8E5M2FNUZ = 20, /* bias 16, no inf, no -0, NaN 0x80, max 57344 */
  ALMA_DTYPE_UINT4 = 21,          /* 0..15, one per byte in memory */
  ALMA_DTYPE_INT4 = 22,           /* -8..7, sign-extended in a byte in memory */
  ALMA_DTYPE_FLOAT4E2M1 = 23,     /* 1-2-1, bias 1, no inf/NaN, max 6; code in the low nibble */
  ALMA_DTYPE_FLOAT8E8M0 = 24,     /* 2^(b-127), unsigned, NaN 0xff (OCP MX scales) */
  ALMA_DTYPE_UINT2 = 25,          /* 0..3 */
  ALMA_DTYPE_INT2 = 26            /* -2..1, sign-extended */
} alma_dtype;

/* "float32", "int64", ... ; "undefined" for unknown values. */
const char *alma_dtype_name(alma_dtype t);
/* Bytes per element; 0 for types alma cannot hold. ALMA_DTYPE_STRING: one opaque handle (a
 * pointer's size; see alma_tensor_string). */
size_t alma_dtype_size(alma_dtype t);
/* Parses "float32"/"f32"/"float", "int64", "float8e4m3fn", "int4", ...; ALMA_ERR_INVALID_ARG naming the
 * string otherwise. */
alma_status alma_dtype_parse(const char *s, alma_dtype *out);

#define ALMA_MAX_RANK 8

/* A dense row-major tensor. As an argument it is a view: alma never frees `data` it did not
 * allocate. Tensors returned by alma (outputs) own their data; release with alma_tensor_free_data. */
typedef struct alma_tensor {
  alma_dtype dtype;
  int rank;                     /* 0 = scalar */
  int64_t dims[ALMA_MAX_RANK];
  void *data;
  size_t nbytes;                /* bytes at data */
  int owns_data;                /* 1 if alma allocated data and alma_tensor_free_data releases it */
} alma_tensor;

int64_t alma_tensor_numel(const alma_tensor *t);
void alma_tensor_free_data(alma_tensor *t);
/* String tensors (ALMA_DTYPE_STRING): data holds one opaque handle per element, valid only in this
 * process. Element i's bytes (may contain NUL; NUL-terminated too) and length; NULL when t is not
 * a string tensor or i is out of range. */
const char *alma_tensor_string(const alma_tensor *t, int64_t i, size_t *len_out);
/* Sets element i of a string tensor to a copy of bytes. data must hold numel *
 * alma_dtype_size(ALMA_DTYPE_STRING) bytes, zeroed or set by this function (zero bytes read as ""). */
alma_status alma_tensor_set_string(alma_tensor *t, int64_t i, const char *bytes, size_t len);

/* ---------------------------------------------------------------------------------------------
 * Models
 * ------------------------------------------------------------------------------------------- */
typedef struct alma_model alma_model;

/* Loads and validates an ONNX model: parses it, checks the graph, resolves every operator for the
 * model's opset and infers shapes. An unsupported op, attribute or dtype fails here, naming the
 * node, op and opset. External data files are resolved relative to the model file. */
alma_status alma_model_load(const char *path, alma_model **model_out);
alma_status alma_model_load_from_memory(const void *bytes, size_t n, const char *base_dir,
                                        alma_model **model_out);
void alma_model_free(alma_model *model);

/* Graph inputs (initializers excluded) and outputs. dims: -1 where symbolic/unknown, with the
 * symbol's name (e.g. "batch") from alma_model_input_dim_param, or NULL. */
int alma_model_num_inputs(const alma_model *m);
int alma_model_num_outputs(const alma_model *m);
const char *alma_model_input_name(const alma_model *m, int i);
const char *alma_model_output_name(const alma_model *m, int i);
alma_dtype alma_model_input_dtype(const alma_model *m, int i);
alma_dtype alma_model_output_dtype(const alma_model *m, int i);
int alma_model_input_rank(const alma_model *m, int i);
int alma_model_output_rank(const alma_model *m, int i);
int64_t alma_model_input_dim(const alma_model *m, int i, int axis);
int64_t alma_model_output_dim(const alma_model *m, int i, int axis);
const char *alma_model_input_dim_param(const alma_model *m, int i, int axis);
const char *alma_model_output_dim_param(const alma_model *m, int i, int axis);

/* Hex SHA-256 of the canonical graph (ops, attributes, connections, weights): same graph and
 * weights give the same hash whatever the names of nodes or the file's layout. 64 chars + NUL. */
const char *alma_model_hash(const alma_model *m);

/* Summary for `alma info`. Counts are for one sample (symbolic dims bound to 1). */
typedef struct alma_model_summary {
  int64_t opset;                 /* ai.onnx opset */
  const char *producer_name;
  const char *producer_version;
  int64_t n_nodes;
  int64_t n_params;              /* elements in floating/integer initializers */
  int64_t param_bytes;
  int64_t macs;                  /* multiply-accumulates, -1 if unknown */
  int64_t flops;                 /* floating point operations, -1 if unknown */
  int64_t planned_peak_bytes;    /* peak of the activation memory plan at batch 1, -1 if unknown */
  int n_op_types;
  const char **op_types;         /* sorted by count, descending */
  const int64_t *op_counts;
  /* Every opset the model imports, ai.onnx first (as "ai.onnx"), then in the file's order: e.g.
   * "ai.onnx" 17, "com.microsoft" 1, "ai.onnx.ml" 3. */
  int n_opset_imports;
  const char **opset_domains;
  const int64_t *opset_versions;
} alma_model_summary;

/* The summary lives as long as the model. */
alma_status alma_model_summarize(alma_model *m, const alma_model_summary **summary_out);

/* ---------------------------------------------------------------------------------------------
 * Sessions: a model converted by one conversion chain (e.g. "FOLD+EAGER"), ready to run.
 * ------------------------------------------------------------------------------------------- */
typedef struct alma_session alma_session;

typedef struct alma_session_options {
  int threads;                   /* 0 = number of physical cores */
  int verbose;                   /* print the plan (per-node placement) to stderr */
  /* Calibration data for INT8_STATIC: n_calibration_batches batches, each one tensor per model
   * input in model order, batch-major: calibration_data[b * num_inputs + i]. Views, read during
   * alma_session_create only. NULL: calibration on random inputs, with a warning. */
  const alma_tensor *calibration_data;
  int n_calibration_batches;
  const char *calibrator;        /* "minmax" (NULL = default), "percentile" (99.99%), "entropy" (KL) */
  /* Runtime settings, "runtime.name=value" entries separated by commas ("dnnl.winograd=off,
   * blas.threading=library"; NULL = the defaults): each runtime reads its own, the others' are
   * checked and ignored. An unknown runtime, option or value fails with ALMA_ERR_INVALID_ARG.
   * `alma list --options` and docs/runtimes/ list them. */
  const char *runtime_options;
} alma_session_options;

void alma_session_options_init(alma_session_options *o);

/* Applies the conversion's passes to a copy of the model's graph and compiles it for its runtime.
 * ALMA_ERR_UNAVAILABLE with the reason if the runtime cannot run on this machine. */
alma_status alma_session_create(const alma_model *m, const char *conversion,
                                const alma_session_options *opts, alma_session **session_out);
void alma_session_free(alma_session *s);

/* Runs one inference. inputs: one per model input, in model order (views, not taken over).
 * outputs: an array of alma_model_num_outputs() tensors that alma fills with owned data; free each
 * with alma_tensor_free_data. A wrong input count, dtype or shape fails naming the input. */
alma_status alma_session_run(alma_session *s, const alma_tensor *inputs, int n_inputs,
                             alma_tensor *outputs, int n_outputs);

/* Writes the session's converted graph (after its passes) as an ONNX model file: opset imports
 * (plus domain "alma" when the FUSE pass left alma ops), initializers as raw data, subgraphs. A
 * converted model without alma ops loads in other ONNX tools, e.g. ONNX Runtime. */
alma_status alma_session_save(const alma_session *s, const char *path);

/* npy I/O (NumPy format v1/v2/v3, little-endian, C order). */
alma_status alma_npy_load(const char *path, alma_tensor *out);
alma_status alma_npy_save(const char *path, const alma_tensor *t);
/* IDX files as used by MNIST (uint8/int8/int16/int32/float32/float64, big-endian on disk). */
alma_status alma_idx_load(const char *path, alma_tensor *out);

#ifdef __cplusplus
}
#endif

#include "alma/bench.h"

#endif
