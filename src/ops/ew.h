/* Shared machinery of the elementwise operator families (elementwise.c, activation.c, cast.c):
 * broadcast iteration over up to three inputs, typed load/store helpers and the float unary
 * driver. Internal to src/ops. */
#ifndef ALMA_OPS_EW_H
#define ALMA_OPS_EW_H

#include "ops/op.h"

/* ---- broadcast iteration -------------------------------------------------------------------
 * An operand is a shape and data; inputs are broadcast (numpy rules) to the output shape, which
 * the caller has already computed. The iteration coalesces dimensions and calls `run` once per
 * contiguous run of the output: ptrs[k] point at the run's first element of operand k (inputs
 * first, output last) and strides[k] is 0 (broadcast) or 1 (contiguous) in elements. */
#define ALMA__EW_MAX_IN 3

typedef struct alma__ew_operand {
  int rank;
  const int64_t *dims;
  const void *data;
  size_t esz; /* bytes per element */
} alma__ew_operand;

typedef void (*alma__ew_run_fn)(void *ctx, char *const *ptrs, const int64_t *strides, int64_t n);

void alma__ew_iterate(int nin, const alma__ew_operand *ins, int out_rank, const int64_t *out_dims,
                      void *out_data, size_t out_esz, alma__ew_run_fn run, void *ctx);

/* Operand view of a tensor (its own shape). */
static inline alma__ew_operand alma__ew_op(const alma_tensor *t) {
  alma__ew_operand o = {t->rank, t->dims, t->data, alma_dtype_size(t->dtype)};
  return o;
}

/* ---- typed element access for the kernel macros ---------------------------------------------
 * LD_x(v) turns a stored element into its compute type, ST_x(dst, v) stores a computed value.
 * float16/bfloat16 compute in float32, as numpy does. */
#define ALMA__LD_P(v) (v)
#define ALMA__ST_P(d, v) ((d) = (v))
#define ALMA__LD_H(v) alma__f16_to_f32(v)
#define ALMA__ST_H(d, v) ((d) = alma__f32_to_f16(v))
#define ALMA__LD_B(v) alma__bf16_to_f32(v)
#define ALMA__ST_B(d, v) ((d) = alma__f32_to_bf16(v))

/* X(dtype enum, storage type, compute type, load, store) */
#define ALMA__EW_FLOAT_TYPES(X)                                  \
  X(ALMA_DTYPE_FLOAT32, float, float, ALMA__LD_P, ALMA__ST_P)    \
  X(ALMA_DTYPE_FLOAT64, double, double, ALMA__LD_P, ALMA__ST_P)  \
  X(ALMA_DTYPE_FLOAT16, uint16_t, float, ALMA__LD_H, ALMA__ST_H) \
  X(ALMA_DTYPE_BFLOAT16, uint16_t, float, ALMA__LD_B, ALMA__ST_B)
#define ALMA__EW_SINT_TYPES(X)                                   \
  X(ALMA_DTYPE_INT8, int8_t, int8_t, ALMA__LD_P, ALMA__ST_P)     \
  X(ALMA_DTYPE_INT16, int16_t, int16_t, ALMA__LD_P, ALMA__ST_P)  \
  X(ALMA_DTYPE_INT32, int32_t, int32_t, ALMA__LD_P, ALMA__ST_P)  \
  X(ALMA_DTYPE_INT64, int64_t, int64_t, ALMA__LD_P, ALMA__ST_P)
#define ALMA__EW_UINT_TYPES(X)                                     \
  X(ALMA_DTYPE_UINT8, uint8_t, uint8_t, ALMA__LD_P, ALMA__ST_P)    \
  X(ALMA_DTYPE_UINT16, uint16_t, uint16_t, ALMA__LD_P, ALMA__ST_P) \
  X(ALMA_DTYPE_UINT32, uint32_t, uint32_t, ALMA__LD_P, ALMA__ST_P) \
  X(ALMA_DTYPE_UINT64, uint64_t, uint64_t, ALMA__LD_P, ALMA__ST_P)

int alma__ew_is_numeric(alma_dtype t); /* float or integer (not bool, not string) */

/* The body of a binary run function (see alma__ew_run_fn; p/s/n are its arguments): inputs of
 * storage type T read as compute type CT into x and y, E computed and stored with ST into an
 * output of storage type TO. The four stride cases are split so the common ones vectorize. */
#define ALMA__BIN_LOOP(T, CT, LD, TO, ST, E)                                   \
  do {                                                                         \
    const T *a_ = (const T *)p[0], *b_ = (const T *)p[1];                      \
    TO *o_ = (TO *)p[2];                                                       \
    if (s[0] && s[1]) {                                                        \
      for (int64_t i_ = 0; i_ < n; i_++) {                                     \
        CT x = LD(a_[i_]), y = LD(b_[i_]);                                     \
        ST(o_[i_], E);                                                         \
      }                                                                        \
    } else if (s[0]) {                                                         \
      CT y = LD(b_[0]);                                                        \
      for (int64_t i_ = 0; i_ < n; i_++) {                                     \
        CT x = LD(a_[i_]);                                                     \
        ST(o_[i_], E);                                                         \
      }                                                                        \
    } else if (s[1]) {                                                         \
      CT x = LD(a_[0]);                                                        \
      for (int64_t i_ = 0; i_ < n; i_++) {                                     \
        CT y = LD(b_[i_]);                                                     \
        ST(o_[i_], E);                                                         \
      }                                                                        \
    } else {                                                                   \
      CT x = LD(a_[0]), y = LD(b_[0]);                                         \
      for (int64_t i_ = 0; i_ < n; i_++) ST(o_[i_], E);                        \
    }                                                                          \
  } while (0)

/* Numpy broadcast of a and b into out's dims, calling run with ctx (binary ops). */
void alma__ew_binary(const alma_tensor *a, int b_rank, const int64_t *b_dims, const void *b_data,
                     alma_dtype b_dtype, alma_tensor *out, alma__ew_run_fn run, void *ctx);

/* ---- float unary driver -----------------------------------------------------------------------
 * Parameters of the parametric activations (alpha, beta, gamma) and Gelu's mode. */
typedef struct alma__ew_uparam {
  float alpha, beta, gamma;
  int mode;
} alma__ew_uparam;

typedef void (*alma__ew_uf32)(const float *x, float *y, int64_t n, const alma__ew_uparam *p);
typedef void (*alma__ew_uf64)(const double *x, double *y, int64_t n, const alma__ew_uparam *p);

/* infer for a float-only unary op: output = input dtype and shape. */
alma_status alma__ew_unary_float_infer(const alma_node *n, const alma_tensor *const *in, int nin,
                                       alma_tensor *out, int nout);
/* Runs f32 (float32, and float16/bfloat16 through float32 chunks) or f64 over x into y. */
alma_status alma__ew_unary_float_run(const alma_node *n, const alma_tensor *x, alma_tensor *y,
                                     alma__ew_uf32 f32, alma__ew_uf64 f64, const alma__ew_uparam *p);

/* One flop per output element (elementwise cost). */
void alma__ew_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out,
                   int nout, int64_t *macs, int64_t *flops);

#endif
