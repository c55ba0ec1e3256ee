/* Internal core utilities: errors, logging, tensors, dtype helpers, arena. Internal names alma__. */
#ifndef ALMA_CORE_H
#define ALMA_CORE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alma/alma.h"

/* ---- errors ---------------------------------------------------------------------------------
 * alma__errorf records a detailed message for alma_last_error() and returns s, so failures read
 *   return alma__errorf(ALMA_ERR_SHAPE, "node '%s' (%s): ...", ...);
 * alma__error_prefix prepends context ("loading model.onnx: ") to the current message. */
alma_status alma__errorf(alma_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
alma_status alma__error_prefix(alma_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void alma__error_clear(void);

/* Internal invariants only; never for bad input. */
#define ALMA_ASSERT(c)                                                                     \
  do {                                                                                     \
    if (!(c)) {                                                                            \
      fprintf(stderr, "alma: internal assertion failed: %s (%s:%d)\n", #c, __FILE__, __LINE__); \
      abort();                                                                             \
    }                                                                                      \
  } while (0)

/* Internal only, never returned by a public function: an op's output shape depends on a value known
 * only at run time (shape inference's answer, alma__need_value), or a runtime declined a node for
 * this run. One past the public statuses. */
#define ALMA_ERR_DYNAMIC ((alma_status)ALMA_STATUS_COUNT)

#define ALMA_TRY(expr)                    \
  do {                                    \
    alma_status alma__st_ = (expr);       \
    if (alma__st_ != ALMA_OK) return alma__st_; \
  } while (0)

/* ---- logging: ALMA_LOG=error|warn|info|debug (default warn) ------------------------------- */
typedef enum { ALMA_LOG_ERROR = 0, ALMA_LOG_WARN = 1, ALMA_LOG_INFO = 2, ALMA_LOG_DEBUG = 3 } alma_log_level;
alma_log_level alma__log_level(void);
void alma__log(alma_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define ALMA_LOGE(...) alma__log(ALMA_LOG_ERROR, __VA_ARGS__)
#define ALMA_LOGW(...) alma__log(ALMA_LOG_WARN, __VA_ARGS__)
#define ALMA_LOGI(...) alma__log(ALMA_LOG_INFO, __VA_ARGS__)
#define ALMA_LOGD(...) alma__log(ALMA_LOG_DEBUG, __VA_ARGS__)

/* ---- memory -------------------------------------------------------------------------------- */
void *alma__malloc(size_t n);            /* NULL on failure (and n == 0 gives a valid pointer) */
void *alma__calloc(size_t n, size_t sz); /* overflow-checked */
void *alma__realloc(void *p, size_t n);
char *alma__strdup(const char *s);
/* a*b with overflow check: 0 and ALMA_ERR_INVALID_ARG message on overflow */
int alma__mul_overflow_i64(int64_t a, int64_t b, int64_t *out);

/* Arena: bump allocator in chunks; everything freed at once. Used for the graph: names, attributes,
 * initializer data. */
typedef struct alma_arena alma_arena;
alma_arena *alma__arena_new(void);
void alma__arena_free(alma_arena *a);
void *alma__arena_alloc(alma_arena *a, size_t n);          /* 16-byte aligned, zeroed; NULL on OOM */
char *alma__arena_strdup(alma_arena *a, const char *s);
char *alma__arena_strndup(alma_arena *a, const char *s, size_t n);
size_t alma__arena_bytes(const alma_arena *a);

/* ---- tensors ------------------------------------------------------------------------------- */
/* Fills dtype/rank/dims and allocates zeroed data (owns_data = 1). Fails cleanly on huge sizes. */
alma_status alma__tensor_alloc(alma_tensor *t, alma_dtype dt, int rank, const int64_t *dims);
/* Same, data left uninitialised (string tensors are zeroed all the same): for outputs a kernel
 * writes in full. Sanitizer builds, and any build with ALMA_POISON_UNINIT=1, fill it with 0xFF bytes
 * (NaN / -1) so a kernel that does not write every element shows in the tests. */
alma_status alma__tensor_alloc_uninit(alma_tensor *t, alma_dtype dt, int rank, const int64_t *dims);
int alma__poison_uninit(void); /* 1 when uninitialised tensors are poisoned */
/* Same dims/dtype as src, new zeroed buffer. */
alma_status alma__tensor_alloc_like(alma_tensor *t, const alma_tensor *src);
/* Deep copy (owned). */
alma_status alma__tensor_copy(alma_tensor *dst, const alma_tensor *src);
/* A shallow view sharing data (owns_data = 0). */
alma_tensor alma__tensor_view(const alma_tensor *t);
/* Product of dims: -1 when a dimension is unknown (negative), INT64_MAX when it overflows (so a
 * size check refuses it; never signed-overflow UB), 0 when a dimension is 0. */
int64_t alma__numel(int rank, const int64_t *dims);
/* Row-major strides in elements. */
void alma__strides(int rank, const int64_t *dims, int64_t *strides);
int alma__same_shape(const alma_tensor *a, const alma_tensor *b);
/* "[1,3,224,224]" into buf */
const char *alma__shape_str(int rank, const int64_t *dims, char *buf, size_t n);
/* Normalizes a possibly negative axis into [0, rank). ALMA_ERR_INVALID_ARG if out of range. */
alma_status alma__norm_axis(int64_t axis, int rank, int *out);


/* ---- sequences and optionals (ONNX seq(tensor(T)), optional(tensor(T)), optional(seq(...));
 * src/core/seq.c) ---------------------------------------------------------------------------------
 * They travel wherever tensors do (executor environments, If/Loop results, graph outputs) as an
 * alma_tensor of an internal dtype outside the public enum, so the tensor paths need no new
 * branch: rank 0, dims[0] the element dtype T (UNDEFINED while unknown), dims[1] 1 when the
 * elements are themselves sequences (optional(seq(T))), else 0. The same encoding types graph
 * values (alma_value dtype/rank/dims). At run time `data` points to an alma__seq that owns its
 * items; alma_tensor_free_data frees it deeply and alma__tensor_copy copies it deeply. Kernels that
 * test dtype (float, int, ...) refuse these dtypes; the sequence ops (src/ops/sequence.c) and
 * Identity/If/Loop handle them. */
#define ALMA__DTYPE_SEQUENCE ((alma_dtype)64)
#define ALMA__DTYPE_OPTIONAL ((alma_dtype)65)
/* ONNX map(K, V) (ZipMap's rows; keys int64 or string, values float): a container of exactly two
 * items, the keys [n] and the values [n] tensors, pair i = (keys[i], values[i]) in ZipMap's order.
 * Its type: dims[2] the key dtype, dims[3] the value dtype (dims[0], dims[1] 0). A sequence of maps
 * is a SEQUENCE with dims[0] = ALMA__DTYPE_MAP and the maps' dims[2], dims[3]. Only ZipMap makes
 * them; graph inputs of map types are refused at load. */
#define ALMA__DTYPE_MAP ((alma_dtype)66)
static inline int alma__dtype_is_container(alma_dtype t) {
  return t == ALMA__DTYPE_SEQUENCE || t == ALMA__DTYPE_OPTIONAL || t == ALMA__DTYPE_MAP;
}
typedef struct alma__seq {
  int n, cap;            /* an optional holds 0 (empty) or 1 item */
  alma_tensor *items;    /* owned: each a tensor, or (optional(seq)) a sequence */
} alma__seq;
/* Sets t's type to a container kind (SEQUENCE/OPTIONAL) of element dtype elem, elem_is_seq for
 * optional(seq(elem)); data untouched. */
void alma__set_container_type(alma_tensor *t, alma_dtype kind, alma_dtype elem, int elem_is_seq);
static inline alma_dtype alma__container_elem(const alma_tensor *t) { return (alma_dtype)t->dims[0]; }
static inline int alma__container_elem_is_seq(const alma_tensor *t) { return t->dims[1] != 0; }
/* Allocates an empty container of that type (owned). */
alma_status alma__container_alloc(alma_tensor *t, alma_dtype kind, alma_dtype elem, int elem_is_seq);
/* Appends (pos < 0 or == n) or inserts at pos an item, taking ownership of *item's data (a view
 * is copied deeply first). */
alma_status alma__container_insert(alma_tensor *t, int64_t pos, alma_tensor *item);
static inline alma__seq *alma__container(const alma_tensor *t) { return (alma__seq *)t->data; }
/* An empty map(key, value) container: keys [0] and values [0] tensors to fill (core.h above). */
alma_status alma__map_alloc(alma_tensor *t, alma_dtype key, alma_dtype value, int64_t n);
/* "seq(tensor(float32))", "optional(seq(tensor(int64)))", "seq(map(string,tensor(float32)))" into buf */
const char *alma__container_type_str(const alma_tensor *t, char *buf, size_t n);
void alma__container_free(alma__seq *s);

/* ---- strings (ONNX tensor(string); src/core/str.c) -------------------------------------------
 * A string tensor's elements are `const alma__str *` handles (alma_dtype_size(STRING) is a
 * pointer's size): immutable byte strings (may hold NUL) interned in a process-wide table, NULL
 * meaning "". Copying element bytes copies the value (no ownership), so data movement needs no
 * string-specific code and freeing a tensor frees only its handle array. Handles are only valid in
 * the process that made them: anything that crosses a process or a file writes the bytes
 * (harness reference files, .npy, save.c). Kernels must refuse ALMA_DTYPE_STRING unless the op
 * declares ALMA_OP_STRINGS (graph/infer.c and registry.c check this for every node). */
typedef struct alma__str {
  size_t len;
  uint64_t hash;
  struct alma__str *next; /* table chain */
  char bytes[];           /* len bytes and a NUL */
} alma__str;
/* The handle for bytes p[0..len) (NULL for len 0). */
alma_status alma__str_make(const char *p, size_t len, const alma__str **out);
static inline const char *alma__str_ptr(const alma__str *s) { return s ? s->bytes : ""; }
static inline size_t alma__str_len(const alma__str *s) { return s ? s->len : 0; }
/* Byte-wise order (shorter first on a common prefix), as numpy/ONNX sort strings. */
int alma__str_cmp(const alma__str *a, const alma__str *b);
static inline const alma__str **alma__strs(const alma_tensor *t) { return (const alma__str **)t->data; }

int alma__dtype_is_float(alma_dtype t);   /* f16, bf16, f32, f64 */
/* Name of an ONNX TensorProto element type number, also the ones alma does not hold (complex64,
 * float8e4m3fn, int4, ...: for messages); "unknown" for a number ONNX does not define. */
const char *alma__onnx_type_name(int64_t t);
int alma__dtype_is_int(alma_dtype t);     /* signed or unsigned integers (not bool) */
int alma__dtype_is_signed(alma_dtype t);

/* ---- low-precision types (17-26; src/core/lowbit.c) ------------------------------------------
 * One byte per element in memory (see alma.h). alma__dtype_is_float/_int stay false for them, so
 * kernels that check those refuse them; Cast, QuantizeLinear and DequantizeLinear use these. */
int alma__dtype_is_lowbit(alma_dtype t);    /* any of 17-26 */
int alma__dtype_is_lowfloat(alma_dtype t);  /* float8 (4 kinds), float4e2m1, float8e8m0 */
int alma__dtype_is_lowint(alma_dtype t);    /* int4, uint4, int2, uint2 */
/* Bits per element in ONNX's packed form: 4 (int4, uint4, float4e2m1), 2 (int2, uint2), else 8. */
int alma__dtype_packed_bits(alma_dtype t);
/* The value of one lowfloat byte (exact in float32; NaN and inf where the type has them). */
double alma__lowfloat_decode(alma_dtype t, uint8_t b);
/* v rounded to nearest even into float8 / float4e2m1. saturate: out-of-range (after rounding) and
 * infinite values become +-max finite; else NaN (or inf for e5m2) as ONNX's Cast table says.
 * float4e2m1 always saturates (it has no inf or NaN; NaN becomes 0x8, as ml_dtypes and ONNX's data
 * have it). float8e8m0 goes through alma__e8m0_encode. */
uint8_t alma__lowfloat_encode(alma_dtype t, double v, int saturate);
/* ONNX's float8e8m0 conversion of float32 v (onnx.numpy_helper.to_float8e8m0): the exponent of v
 * rounded per mode (0 up, 1 down, 2 nearest), the sign ignored, 0xff for inf/NaN and, without
 * saturation, for what rounds past the largest exponent. */
enum { ALMA_E8M0_UP = 0, ALMA_E8M0_DOWN = 1, ALMA_E8M0_NEAREST = 2 };
uint8_t alma__e8m0_encode(float v, int saturate, int round_mode);
/* An integer wrapped into int4/uint4/int2/uint2 (two's complement, as ONNX's reference casts):
 * the in-memory byte. */
uint8_t alma__lowint_wrap(alma_dtype t, int64_t v);
/* Range of a lowint type. */
void alma__lowint_range(alma_dtype t, int64_t *lo, int64_t *hi);
/* ONNX packing: n elements (alma's bytes) <-> ceil(n * bits / 8) packed bytes, low bits first. */
size_t alma__packed_size(alma_dtype t, int64_t n);
void alma__pack_lowbit(alma_dtype t, const uint8_t *elems, int64_t n, uint8_t *packed);
void alma__unpack_lowbit(alma_dtype t, const uint8_t *packed, int64_t n, uint8_t *elems);

/* Element access through double/int64 for generic reference kernels. Index is in elements. */
double alma__get_f64(const void *data, alma_dtype t, int64_t i);
void alma__set_f64(void *data, alma_dtype t, int64_t i, double v);   /* ints: saturate? no: C cast semantics of ONNX Cast (truncate toward zero) */
int64_t alma__get_i64(const void *data, alma_dtype t, int64_t i);
void alma__set_i64(void *data, alma_dtype t, int64_t i, int64_t v);

/* ---- half precision ------------------------------------------------------------------------ */
float alma__f16_to_f32(uint16_t h);
uint16_t alma__f32_to_f16(float f);     /* round to nearest even */
float alma__bf16_to_f32(uint16_t b);
uint16_t alma__f32_to_bf16(float f);    /* round to nearest even */
/* v rounded to the precision of float dtype t (float32, float16, bfloat16: to nearest even);
 * float64 and other types leave v as is. Kernels that compute as numpy does on 16-bit floats (in
 * float, each result rounded to the type) call it after every step. */
static inline double alma__round_to(alma_dtype t, double v) {
  switch (t) {
    case ALMA_DTYPE_FLOAT32: return (float)v;
    case ALMA_DTYPE_FLOAT16: return alma__f16_to_f32(alma__f32_to_f16((float)v));
    case ALMA_DTYPE_BFLOAT16: return alma__bf16_to_f32(alma__f32_to_bf16((float)v));
    default: return v;
  }
}

/* ---- hashing ------------------------------------------------------------------------------- */
/* SHA-256 through OpenSSL's libcrypto. final() writes 64 hex chars + NUL and frees the context. */
typedef struct alma_sha256 alma_sha256;
alma_sha256 *alma__sha256_new(void);
void alma__sha256_update(alma_sha256 *s, const void *data, size_t n);
void alma__sha256_final(alma_sha256 *s, char hex_out[65]);

/* ---- string -> int map (strmap.c) ----------------------------------------------------------
 * Keys are not copied: they must outlive the map (arena strings). put overwrites (the newest
 * definition wins, as alma__graph_find_value's newest-first scan); get is -1 when absent.
 * put: 0, or -1 out of memory. Keyed with a per-process random SipHash key (crafted names do not
 * collide). Zero-initialized (or alma__strmap_init) is an empty map. */
typedef struct alma_strmap {
  const char **keys;
  int *vals;
  size_t n, cap;
} alma_strmap;
void alma__strmap_init(alma_strmap *m);
void alma__strmap_free(alma_strmap *m);
int alma__strmap_put(alma_strmap *m, const char *key, int val);
int alma__strmap_get(const alma_strmap *m, const char *key);

/* ---- text from files, made safe to show (safetext.c) ------------------------------------------
 * alma__escape_text: s[0..len) with control characters (C0, DEL, C1) written \n \r \t or \xHH
 * and bytes that are not UTF-8 as \xHH, into out (NUL-terminated, whole escapes only); returns
 * the length written. alma__utf8_fix: invalid UTF-8 replaced by U+FFFD, the rest kept (for JSON
 * and CSV, whose writers escape control characters themselves). alma__text_is_safe: 1 when
 * escape_text would change nothing. alma__safe: s itself when safe, else its escaped form in one of
 * 16 per-thread buffers (at most ~1 KB, cut names end in "..."), for printf arguments. */
size_t alma__escape_text(const char *s, size_t len, char *out, size_t cap);
size_t alma__utf8_fix(const char *s, size_t len, char *out, size_t cap);
int alma__text_is_safe(const char *s, size_t len);
const char *alma__safe(const char *s);
/* text (malloc'd, NUL-terminated) with invalid UTF-8 replaced by U+FFFD: text itself when valid,
 * else a new buffer (text freed); NULL out of memory. For a printed JSON document. */
char *alma__utf8_fix_owned(char *text);

/* ---- time ---------------------------------------------------------------------------------- */
double alma__now_s(void);    /* CLOCK_MONOTONIC seconds */

/* ---- files --------------------------------------------------------------------------------- */
/* Every file alma reads from a user or from disk state goes through these (file.c): regular
 * files only, known before the first read, so a FIFO, a device (/dev/zero), a socket or a
 * directory is refused with ALMA_ERR_IO naming the path and what it is, never blocked on.
 *
 * alma__open_regular: open(path, flags | O_NONBLOCK | O_CLOEXEC), fstat, refuse non-regular,
 * then clear O_NONBLOCK. flags may hold O_RDWR/O_WRONLY/O_CREAT/O_APPEND/O_NOFOLLOW...; a new
 * file gets mode 0644. *st_out (if given) is the fstat of the opened file.
 * alma__fopen_regular: the same, read-only, as a FILE* ("rb"). */
struct stat;
alma_status alma__open_regular(const char *path, int flags, int *fd_out, struct stat *st_out);
alma_status alma__fopen_regular(const char *path, FILE **f_out, struct stat *st_out);
/* Largest file alma__read_file reads whole: protobuf's own 2 GiB message limit (bigger models keep
 * their weights in external data files, which are read tensor by tensor). */
#define ALMA_MAX_FILE_BYTES ((size_t)2 << 30)
/* Reads a whole regular file (malloc'd) of at most max_bytes (ALMA_MAX_FILE_BYTES for
 * alma__read_file); ALMA_ERR_IO naming the path on failure, non-regular files refused. */
alma_status alma__read_file(const char *path, uint8_t **data_out, size_t *n_out);
alma_status alma__read_file_max(const char *path, size_t max_bytes, uint8_t **data_out, size_t *n_out);
/* The same from an open descriptor (its current offset; path only names it in messages). */
alma_status alma__read_fd(int fd, const char *path, size_t max_bytes, uint8_t **data_out, size_t *n_out);

#endif
