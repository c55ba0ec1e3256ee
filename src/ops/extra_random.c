/* Random generators: RandomNormal, RandomUniform, RandomNormalLike, RandomUniformLike, Bernoulli.
 *
 * ONNX leaves the generator to the implementation (its own test data comes from numpy and no two
 * runtimes agree on values), so alma makes them reproducible: element i of a node's output is a
 * pure function of (key, i), a counter-based generator (splitmix64 finalizer over key + i). The key
 * comes from the `seed` attribute (its float bits) when given; without a seed it is a fixed default
 * mixed with the node's name, so two unseeded nodes draw different streams but every run of a model
 * gives the same values (constant folding therefore changes nothing). Normals use Box-Muller on
 * two uniforms per element. */
#include <math.h>

#include "ops/op.h"
#include "ops/op_args.h"

/* The default key when no seed is given (documented above). */
#define RND_DEFAULT_KEY 0x616c6d6172616e64ull /* "almarand" */

static uint64_t rnd_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t rnd_key(const alma_node *n) {
  const alma_attr *s = alma__node_attr(n, "seed");
  if (s) {
    uint32_t bits;
    float f = s->f;
    if (f == 0) f = 0; /* -0 and 0 are the same seed */
    memcpy(&bits, &f, sizeof bits);
    return rnd_mix(0x5eed000000000000ull ^ bits);
  }
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the node name */
  for (const char *p = n->name ? n->name : ""; *p; p++) h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
  return rnd_mix(RND_DEFAULT_KEY ^ h);
}

/* Uniform in [0, 1) with 53 random bits. */
static double rnd_u(uint64_t key, uint64_t i) {
  return (double)(rnd_mix(key + 0x9e3779b97f4a7c15ull * (i + 1)) >> 11) * 0x1.0p-53;
}

static double rnd_normal(uint64_t key, uint64_t i) {
  double u1 = rnd_u(key, 2 * i), u2 = rnd_u(key, 2 * i + 1);
  return sqrt(-2.0 * log1p(-u1)) * cos(6.283185307179586 * u2); /* 1 - u1 in (0, 1]: log finite */
}

static int rnd_float_dtype(alma_dtype t) {
  return t == ALMA_DTYPE_FLOAT32 || t == ALMA_DTYPE_FLOAT16 || t == ALMA_DTYPE_FLOAT64 || t == ALMA_DTYPE_BFLOAT16;
}

/* dtype attribute (or dflt when absent), checked against the allowed set. */
static alma_status rnd_dtype(const alma_node *n, alma_dtype dflt, int any_numeric, alma_dtype *dt) {
  const alma_attr *a = alma__node_attr(n, "dtype");
  if (!a) {
    *dt = dflt;
  } else {
    if (a->i <= 0 || a->i > 16 || alma_dtype_size((alma_dtype)a->i) == 0)
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "dtype %lld", (long long)a->i);
    *dt = (alma_dtype)a->i;
  }
  int ok = rnd_float_dtype(*dt) || (any_numeric && (alma__dtype_is_int(*dt) || *dt == ALMA_DTYPE_BOOL));
  if (!ok) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "output dtype %s", alma_dtype_name(*dt));
  return ALMA_OK;
}

static alma_status rnd_params(const alma_node *n, int normal) {
  const char *a = normal ? "mean" : "low", *b = normal ? "scale" : "high";
  float x = alma__attr_f(n, a, 0.0f), y = alma__attr_f(n, b, 1.0f);
  if (!isfinite(x) || !isfinite(y)) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%s=%g %s=%g (expects finite values)", a, x, b, y);
  return ALMA_OK;
}

static void rnd_fill(const alma_node *n, alma_tensor *y, int normal) {
  uint64_t key = rnd_key(n);
  double p0 = alma__attr_f(n, normal ? "mean" : "low", 0.0f), p1 = alma__attr_f(n, normal ? "scale" : "high", 1.0f);
  int64_t cnt = alma_tensor_numel(y);
  if (y->dtype == ALMA_DTYPE_FLOAT32) {
    float *d = y->data;
    for (int64_t i = 0; i < cnt; i++)
      d[i] = (float)(normal ? p0 + p1 * rnd_normal(key, (uint64_t)i) : p0 + (p1 - p0) * rnd_u(key, (uint64_t)i));
    return;
  }
  for (int64_t i = 0; i < cnt; i++)
    alma__set_f64(y->data, y->dtype, i, normal ? p0 + p1 * rnd_normal(key, (uint64_t)i) : p0 + (p1 - p0) * rnd_u(key, (uint64_t)i));
}

/* ---- RandomNormal / RandomUniform: shape attribute ------------------------------------------- */
static alma_status rnd_shape_infer(const alma_node *n, alma_tensor *out, int normal) {
  const int64_t *s = NULL;
  const alma_attr *sa = alma__node_attr(n, "shape");
  if (!sa || sa->type != ALMA_ATTR_INTS) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "shape (a list of ints) is required");
  int ns = alma__attr_ints(n, "shape", &s);
  if (ns > ALMA_MAX_RANK) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "rank %d above %d", ns, ALMA_MAX_RANK);
  for (int i = 0; i < ns; i++)
    if (s[i] < 0) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "shape[%d]=%lld", i, (long long)s[i]);
  alma_dtype dt;
  ALMA_TRY(rnd_dtype(n, ALMA_DTYPE_FLOAT32, 0, &dt));
  ALMA_TRY(rnd_params(n, normal));
  alma__set_shape(&out[0], dt, ns, s);
  return ALMA_OK;
}

/* ---- *Like: the input's shape, its dtype unless dtype is given -------------------------------- */
static alma_status rnd_like_infer(const alma_node *n, const alma_tensor *x, alma_tensor *out, int normal) {
  if (alma_dtype_size(x->dtype) == 0) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  alma_dtype dt;
  ALMA_TRY(rnd_dtype(n, x->dtype, 0, &dt));
  ALMA_TRY(rnd_params(n, normal));
  alma__set_shape(&out[0], dt, x->rank, x->dims);
  return ALMA_OK;
}

static alma_status normal_infer(INFER_ARGS) { return rnd_shape_infer(n, out, 1); }
static alma_status uniform_infer(INFER_ARGS) { return rnd_shape_infer(n, out, 0); }
static alma_status normal_like_infer(INFER_ARGS) { return rnd_like_infer(n, in[0], out, 1); }
static alma_status uniform_like_infer(INFER_ARGS) { return rnd_like_infer(n, in[0], out, 0); }
static alma_status normal_exec(EXEC_ARGS) {
  rnd_fill(n, &out[0], 1);
  return ALMA_OK;
}
static alma_status uniform_exec(EXEC_ARGS) {
  rnd_fill(n, &out[0], 0);
  return ALMA_OK;
}

const alma_op_def alma__op_RandomNormal = {.name = "RandomNormal", .domain = "", .versions = {1, 22}, .min_inputs = 0,
                                           .max_inputs = 0, .min_outputs = 1, .max_outputs = 1, .infer = normal_infer,
                                           .exec = normal_exec};
const alma_op_def alma__op_RandomUniform = {.name = "RandomUniform", .domain = "", .versions = {1, 22}, .min_inputs = 0,
                                            .max_inputs = 0, .min_outputs = 1, .max_outputs = 1, .infer = uniform_infer,
                                            .exec = uniform_exec};
const alma_op_def alma__op_RandomNormalLike = {.name = "RandomNormalLike", .domain = "", .versions = {1, 22},
                                               .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                               .infer = normal_like_infer, .exec = normal_exec};
const alma_op_def alma__op_RandomUniformLike = {.name = "RandomUniformLike", .domain = "", .versions = {1, 22},
                                                .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                                .infer = uniform_like_infer, .exec = uniform_exec};

/* ---- Bernoulli: 1 with probability input[i], else 0 ------------------------------------------- */
static alma_status bern_infer(INFER_ARGS) {
  const alma_tensor *x = in[0];
  if (!rnd_float_dtype(x->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s (expects a floating-point type)", alma_dtype_name(x->dtype));
  alma_dtype dt;
  ALMA_TRY(rnd_dtype(n, x->dtype, 1, &dt));
  alma__set_shape(&out[0], dt, x->rank, x->dims);
  return ALMA_OK;
}

static alma_status bern_exec(EXEC_ARGS) {
  const alma_tensor *x = in[0];
  uint64_t key = rnd_key(n);
  int64_t cnt = alma_tensor_numel(x);
  for (int64_t i = 0; i < cnt; i++) {
    double p = alma__get_f64(x->data, x->dtype, i);
    alma__set_f64(out[0].data, out[0].dtype, i, rnd_u(key, (uint64_t)i) < p ? 1.0 : 0.0);
  }
  return ALMA_OK;
}

const alma_op_def alma__op_Bernoulli = {.name = "Bernoulli", .domain = "", .versions = {15, 22}, .min_inputs = 1,
                                        .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .infer = bern_infer,
                                        .exec = bern_exec};
