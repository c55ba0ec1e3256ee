/* The BLAS runtime against EAGER on hand-built graphs: Conv in every shape class the kernels split
 * differently (1x1 without im2col, chunks inside an image, runs of whole images, row blocks,
 * grouped, depthwise, 1-D/3-D, pads/strides/dilations/auto_pad), Gemm with every form of C, MatMul
 * flattened/batched/broadcast/1-D, and the fused chains (bias Add, residual Add taken over or not,
 * each activation), each on 1, 2 and 3 threads. Also the cases that must not fuse or must fall
 * back (graph outputs inside a chain, a broadcasting residual, float64). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "runtimes/blas/internal.h"
#include "runtimes/runtime.h"

/* ---- graph building ----------------------------------------------------------------------------- */

static uint64_t rng = 88172645463325252ull;
static float urand(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

typedef struct gb {
  alma_graph *g;
  int opset;
  int in[8], nin, out[8], nout;
  alma_tensor feeds[8]; /* data for the graph inputs */
} gb;

static void gb_init(gb *b, int opset) {
  memset(b, 0, sizeof *b);
  b->g = alma__graph_new(NULL);
  assert_non_null(b->g);
  b->opset = opset;
  alma_opset_import *imp = alma__arena_alloc(b->g->arena, sizeof *imp);
  imp->domain = "";
  imp->version = opset;
  b->g->opsets = imp;
  b->g->n_opsets = 1;
}

static alma_tensor rand_tensor(alma_dtype dt, int rank, const int64_t *dims) {
  alma_tensor t;
  assert_int_equal(alma__tensor_alloc(&t, dt, rank, dims), ALMA_OK);
  for (int64_t i = 0; i < alma_tensor_numel(&t); i++) alma__set_f64(t.data, dt, i, urand());
  return t;
}

static int value(gb *b, const char *name) {
  int v = alma__graph_add_value(b->g, name);
  assert_true(v >= 0);
  return v;
}

/* A graph input fed with random data of this shape. */
static int input(gb *b, const char *name, alma_dtype dt, int rank, const int64_t *dims) {
  int v = value(b, name);
  alma_value *val = &b->g->values[v];
  val->dtype = dt;
  val->rank = rank;
  if (rank) memcpy(val->dims, dims, sizeof(int64_t) * (size_t)rank);
  val->is_input = 1;
  b->feeds[b->nin] = rand_tensor(dt, rank, dims);
  b->in[b->nin++] = v;
  return v;
}

static int constant(gb *b, const char *name, alma_dtype dt, int rank, const int64_t *dims) {
  int v = value(b, name);
  alma_value *val = &b->g->values[v];
  val->init = alma__arena_alloc(b->g->arena, sizeof(alma_tensor));
  *val->init = rand_tensor(dt, rank, dims);
  val->dtype = dt;
  val->rank = rank;
  if (rank) memcpy(val->dims, dims, sizeof(int64_t) * (size_t)rank);
  return v;
}

static int scalar_const(gb *b, const char *name, float x) {
  int v = constant(b, name, ALMA_DTYPE_FLOAT32, 0, NULL);
  ((float *)b->g->values[v].init->data)[0] = x;
  return v;
}

typedef struct kv {
  const char *name;
  alma_attr_type type;
  int64_t i;
  float f;
  const char *s;
  const int64_t *ints;
  int n;
  const float *floats;
} kv;
#define AI(k, v) ((kv){.name = (k), .type = ALMA_ATTR_INT, .i = (v)})
#define AF(k, v) ((kv){.name = (k), .type = ALMA_ATTR_FLOAT, .f = (v)})
#define AS(k, v) ((kv){.name = (k), .type = ALMA_ATTR_STRING, .s = (v)})
#define AFLOATS(k, ...)                                                                                \
  ((kv){.name = (k), .type = ALMA_ATTR_FLOATS, .floats = (const float[]){__VA_ARGS__},                   \
        .n = sizeof((float[]){__VA_ARGS__}) / 4})
#define AINTS(k, ...) \
  ((kv){.name = (k), .type = ALMA_ATTR_INTS, .ints = (const int64_t[]){__VA_ARGS__}, .n = sizeof((int64_t[]){__VA_ARGS__}) / 8})

/* Adds a node with one fresh output value named out; returns the output value. */
static int node(gb *b, const char *op, const char *out, const int *ins, int nin, const kv *attrs, int nattrs) {
  int o = value(b, out);
  int idx = alma__graph_add_node(b->g, op, "", out, ins, nin, &o, 1);
  assert_true(idx >= 0);
  alma_node *n = &b->g->nodes[idx];
  if (nattrs) {
    n->attrs = alma__arena_alloc(b->g->arena, sizeof(alma_attr) * (size_t)nattrs);
    for (int i = 0; i < nattrs; i++) {
      alma_attr *a = &n->attrs[i];
      a->name = attrs[i].name;
      a->type = attrs[i].type;
      a->i = attrs[i].i;
      a->f = attrs[i].f;
      a->s = attrs[i].s;
      a->s_len = a->s ? strlen(a->s) : 0;
      a->ints = (int64_t *)attrs[i].ints;
      a->floats = (float *)attrs[i].floats;
      a->n = attrs[i].n;
    }
    n->n_attrs = nattrs;
  }
  if (!strncmp(op, "Fused", 5) || !strcmp(op, "Attention")) { /* alma domain, bound by the FUSE pass */
    n->domain = "alma";
    n->op = !strcmp(op, "FusedConv")   ? &alma__op_FusedConv
            : !strcmp(op, "FusedGemm") ? &alma__op_FusedGemm
            : !strcmp(op, "Attention") ? &alma__op_AlmaAttention
                                       : &alma__op_FusedMatMul;
    n->since_version = 1;
    return o;
  }
  assert_int_equal(alma__op_resolve(n, b->opset), ALMA_OK);
  return o;
}
#define NODE(b, op, out, attrs_, ...) \
  node(b, op, out, (const int[]){__VA_ARGS__}, sizeof((int[]){__VA_ARGS__}) / sizeof(int), attrs_, attrs_##_n)
static const kv *noattrs = NULL;
static const int noattrs_n = 0;

/* A Constant node (not an initializer) holding a float32 tensor of this shape, random or x. */
static int constant_node(gb *b, const char *name, int rank, const int64_t *dims, const float *x) {
  alma_tensor *t = alma__arena_alloc(b->g->arena, sizeof *t);
  t->dtype = ALMA_DTYPE_FLOAT32;
  t->rank = rank;
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= (t->dims[i] = dims[i]);
  t->data = alma__arena_alloc(b->g->arena, (size_t)n * sizeof(float));
  t->nbytes = (size_t)n * sizeof(float);
  for (int64_t i = 0; i < n; i++) ((float *)t->data)[i] = x ? x[0] : urand();
  int o = value(b, name);
  int idx = alma__graph_add_node(b->g, "Constant", "", name, NULL, 0, &o, 1);
  assert_true(idx >= 0);
  alma_node *nd = &b->g->nodes[idx];
  nd->attrs = alma__arena_alloc(b->g->arena, sizeof(alma_attr));
  nd->attrs[0].name = "value";
  nd->attrs[0].type = ALMA_ATTR_TENSOR;
  nd->attrs[0].t = t;
  nd->n_attrs = 1;
  assert_int_equal(alma__op_resolve(nd, b->opset), ALMA_OK);
  return o;
}

static void output(gb *b, int v) {
  b->out[b->nout++] = v;
  b->g->values[v].is_output = 1;
}

static void gb_finish(gb *b) {
  b->g->inputs = malloc(sizeof(int) * 8);
  b->g->outputs = malloc(sizeof(int) * 8);
  memcpy(b->g->inputs, b->in, sizeof(int) * (size_t)b->nin);
  memcpy(b->g->outputs, b->out, sizeof(int) * (size_t)b->nout);
  b->g->n_inputs = b->nin;
  b->g->n_outputs = b->nout;
}

static void gb_free(gb *b) {
  for (int i = 0; i < b->nin; i++) alma_tensor_free_data(&b->feeds[i]);
  alma__graph_free(b->g);
}

/* ---- running and comparing ------------------------------------------------------------------------ */

static char plan_text[1 << 16];
/* The BLAS plan's placement as data (alma_runtime.placement) after check()'s runs, with its graph. */
static alma__placement placed[1 << 12];
static const alma_graph *placed_g;
/* Relative tolerance (of the output's largest magnitude): float sums of K products differ by
 * about sqrt(K) roundings between summation orders. */
static double tol = 1e-5;
static void tol_for_k(int64_t K) { tol = 1e-5 * fmax(1.0, sqrt((double)K) / 4); }

/* got (BLAS) against want (EAGER), within tol; frees got. */
static void compare_outputs(alma_tensor *got, const alma_tensor *want, int nout, int threads) {
  for (int o = 0; o < nout; o++) {
    assert_int_equal(got[o].dtype, want[o].dtype);
    assert_int_equal(got[o].rank, want[o].rank);
    for (int k = 0; k < want[o].rank; k++) assert_int_equal(got[o].dims[k], want[o].dims[k]);
    int64_t n = alma_tensor_numel(&want[o]);
    double maxabs = 0;
    for (int64_t i = 0; i < n; i++) maxabs = fmax(maxabs, fabs(alma__get_f64(want[o].data, want[o].dtype, i)));
    for (int64_t i = 0; i < n; i++) {
      double a = alma__get_f64(got[o].data, got[o].dtype, i), e = alma__get_f64(want[o].data, want[o].dtype, i);
      if (!(fabs(a - e) <= tol * (1 + maxabs) + 1e-5 * fabs(e)) && !(isnan(a) && isnan(e)))
        fail_msg("threads %d, output %d, element %lld of %lld: BLAS %.9g, EAGER %.9g", threads, o, (long long)i,
                 (long long)n, a, e);
    }
    alma_tensor_free_data(&got[o]);
  }
}

/* Runs g on EAGER and on BLAS with `threads`; outputs must agree. The BLAS plan's description is
 * left in plan_text. Runs BLAS twice to exercise the per-shape caches. */
static void check(gb *b, int threads) {
  const alma_runtime *blas = alma__runtime_find("BLAS");
  assert_non_null(blas);
  assert_int_equal(blas->init(), ALMA_OK);
  alma_runtime_opts opts = {.threads = threads};
  void *pe = NULL, *pb = NULL;
  assert_int_equal(alma__runtime_eager.compile(b->g, &opts, &pe), ALMA_OK);
  if (blas->compile(b->g, &opts, &pb) != ALMA_OK) fail_msg("compile: %s", alma_last_error());
  alma_tensor want[8], got[8];
  if (alma__runtime_eager.run(pe, b->feeds, b->nin, want, b->nout) != ALMA_OK) fail_msg("eager: %s", alma_last_error());
  for (int rep = 0; rep < 2; rep++) {
    if (blas->run(pb, b->feeds, b->nin, got, b->nout) != ALMA_OK) fail_msg("blas: %s", alma_last_error());
    compare_outputs(got, want, b->nout, threads);
  }
  FILE *f = fmemopen(plan_text, sizeof plan_text - 1, "w");
  blas->describe(pb, f);
  fclose(f);
  assert_true(b->g->n_nodes <= (int)(sizeof placed / sizeof placed[0]));
  assert_int_equal(blas->placement(pb, placed), ALMA_OK);
  placed_g = b->g;
  for (int o = 0; o < b->nout; o++) alma_tensor_free_data(&want[o]);
  blas->free(pb);
  alma__runtime_eager.free(pe);
}

static void check_threads(gb *b) {
  for (int t = 1; t <= 3; t++) check(b, t);
}

static void expect_plan(const char *needle) {
  if (!strstr(plan_text, needle)) fail_msg("plan lacks '%s':\n%s", needle, plan_text);
}

/* The node named `name` of the last check()'s graph ran where `want` says (on EAGER: for `why`,
 * unless ALMA_DECLINE_NONE). */
static void expect_place(const char *name, alma__place want, alma__decline why) {
  for (int i = 0; placed_g && i < placed_g->n_nodes; i++) {
    if (strcmp(placed_g->nodes[i].name, name)) continue;
    const alma__placement *p = &placed[i];
    if (p->place != want || (why != ALMA_DECLINE_NONE && p->reason != why))
      fail_msg("node '%s': placed %s (%s), expected %s (%s)\n%s", name, alma__place_name(p->place),
               alma__decline_name(p->reason), alma__place_name(want), alma__decline_name(why), plan_text);
    return;
  }
  fail_msg("no node '%s' in the plan", name);
}

/* expect_plan on a plan's description now. */
static void expect_plan_of(const alma_runtime *rt, void *plan, const char *needle) {
  FILE *f = fmemopen(plan_text, sizeof plan_text - 1, "w");
  rt->describe(plan, f);
  fclose(f);
  expect_plan(needle);
}

/* ---- Conv ----------------------------------------------------------------------------------------- */

typedef struct conv_case {
  int nsp;
  int64_t N, C, M, group, in[3], k[3], s[3], d[3], p[6];
  const char *auto_pad;
  int bias;
} conv_case;

static void run_conv_case(const conv_case *c) {
  gb b;
  gb_init(&b, 17);
  int64_t xd[5] = {c->N, c->C}, wd[5] = {c->M, c->C / c->group}, bd[1] = {c->M};
  for (int i = 0; i < c->nsp; i++) xd[2 + i] = c->in[i], wd[2 + i] = c->k[i];
  int x = input(&b, "x", ALMA_DTYPE_FLOAT32, 2 + c->nsp, xd);
  int w = constant(&b, "w", ALMA_DTYPE_FLOAT32, 2 + c->nsp, wd);
  int bi = c->bias ? constant(&b, "b", ALMA_DTYPE_FLOAT32, 1, bd) : -1;
  kv at[6];
  int na = 0;
  at[na++] = AI("group", c->group);
  kv ks = {.name = "strides", .type = ALMA_ATTR_INTS, .ints = c->s, .n = c->nsp};
  kv kd = {.name = "dilations", .type = ALMA_ATTR_INTS, .ints = c->d, .n = c->nsp};
  kv kp = {.name = "pads", .type = ALMA_ATTR_INTS, .ints = c->p, .n = 2 * c->nsp};
  at[na++] = ks;
  at[na++] = kd;
  if (c->auto_pad) at[na++] = AS("auto_pad", c->auto_pad);
  else at[na++] = kp;
  int ins[3] = {x, w, bi};
  int y = node(&b, "Conv", "y", ins, c->bias ? 3 : 2, at, na);
  tol_for_k(wd[1] * c->k[0] * (c->nsp > 1 ? c->k[1] : 1) * (c->nsp > 2 ? c->k[2] : 1));
  output(&b, y);
  gb_finish(&b);
  check_threads(&b);
  gb_free(&b);
}

static void test_conv_shapes(void **state) {
  (void)state;
  static const conv_case cases[] = {
      /* 1x1 stride 1: B is the input itself, chunks inside each image */
      {2, 1, 64, 96, 1, {56, 56}, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, NULL, 1},
      {2, 3, 32, 40, 1, {7, 7}, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, NULL, 0}, /* whole images, copied */
      /* 3x3 pad 1: im2col pieces of one image */
      {2, 1, 16, 32, 1, {40, 37}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 1},
      {2, 2, 64, 64, 1, {56, 56}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 1},
      /* small planes, several images per chunk */
      {2, 5, 64, 128, 1, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 1},
      {2, 9, 8, 24, 1, {5, 6}, {3, 2}, {2, 1}, {1, 1}, {1, 0, 1, 1}, NULL, 1},
      /* batch 1, small plane, many channels: row blocks */
      {2, 1, 256, 512, 1, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 1},
      {2, 1, 32, 64, 1, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, NULL, 0},
      /* strides, asymmetric pads, dilations, 7x7 stem */
      {2, 2, 3, 16, 1, {32, 30}, {7, 7}, {2, 2}, {1, 1}, {3, 3, 3, 3}, NULL, 1},
      {2, 1, 5, 7, 1, {17, 19}, {3, 4}, {2, 3}, {2, 1}, {0, 2, 1, 0}, NULL, 1},
      {2, 2, 4, 6, 1, {9, 9}, {3, 3}, {1, 1}, {1, 1}, {0}, "SAME_UPPER", 0},
      {2, 2, 4, 6, 1, {10, 9}, {2, 3}, {2, 2}, {1, 1}, {0}, "SAME_LOWER", 1},
      {2, 1, 3, 5, 1, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {0}, "VALID", 1},
      /* 1x1 stride 2 (not pointwise) and 1x1 with pads */
      {2, 2, 16, 32, 1, {14, 14}, {1, 1}, {2, 2}, {1, 1}, {0, 0, 0, 0}, NULL, 1},
      {2, 1, 4, 4, 1, {5, 5}, {1, 1}, {1, 1}, {1, 1}, {1, 0, 0, 1}, NULL, 1},
      /* grouped */
      {2, 2, 16, 32, 4, {12, 12}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 1},
      {2, 3, 6, 9, 3, {5, 5}, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, NULL, 0},
      /* depthwise (and with a channel multiplier), strided, padded, dilated */
      {2, 2, 32, 32, 32, {28, 28}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 1},
      {2, 1, 16, 16, 16, {15, 16}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, NULL, 1},
      {2, 2, 8, 16, 8, {11, 9}, {5, 3}, {2, 1}, {2, 2}, {2, 0, 1, 3}, NULL, 0},
      /* 3x3 depthwise: no pads, a plane narrower than the kernel, asymmetric pads, a multiplier */
      {2, 1, 4, 4, 4, {6, 7}, {3, 3}, {1, 1}, {1, 1}, {0, 0, 0, 0}, NULL, 1},
      {2, 1, 3, 3, 3, {5, 2}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 1},
      {2, 1, 3, 3, 3, {4, 1}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, NULL, 1},
      {2, 2, 6, 12, 6, {9, 10}, {3, 3}, {2, 1}, {1, 1}, {0, 2, 1, 0}, NULL, 1},
      {2, 1, 8, 8, 8, {17, 33}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, NULL, 0},
      {2, 1, 8, 8, 8, {17, 33}, {3, 3}, {3, 3}, {1, 1}, {2, 2, 2, 2}, NULL, 1},
      /* 1-D and 3-D */
      {1, 2, 8, 12, 1, {50}, {5}, {2}, {1}, {2, 1}, NULL, 1},
      {1, 3, 4, 4, 4, {9}, {3}, {1}, {2}, {2, 2}, NULL, 1},
      {3, 2, 3, 4, 1, {6, 7, 5}, {3, 2, 3}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 1, 1, 0}, NULL, 1},
      /* kernel larger than the padded plane in one dim: whole rows of zeros */
      {2, 1, 2, 3, 1, {3, 8}, {3, 3}, {1, 1}, {1, 1}, {2, 0, 2, 0}, NULL, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_conv_case(&cases[i]);
}

/* ---- fused chains --------------------------------------------------------------------------------- */

/* x -> Conv -> Add(bias) -> Add(residual) -> act, with the residual from another Conv (its buffer
 * taken over) or the graph input (read). */
static void conv_chain(const char *act, int res_from_conv, int64_t N) {
  gb b;
  tol_for_k(16 * 9);
  gb_init(&b, 17);
  int64_t xd[4] = {N, 16, 20, 20}, wd[4] = {16, 16, 3, 3}, w1d[4] = {16, 16, 1, 1}, bd[3] = {16, 1, 1},
          bcd[1] = {16};
  int x = input(&b, "x", ALMA_DTYPE_FLOAT32, 4, xd);
  int w = constant(&b, "w", ALMA_DTYPE_FLOAT32, 4, wd);
  int cb = constant(&b, "cb", ALMA_DTYPE_FLOAT32, 1, bcd);
  int w1 = constant(&b, "w1", ALMA_DTYPE_FLOAT32, 4, w1d);
  int bias = constant(&b, "bias", ALMA_DTYPE_FLOAT32, 3, bd);
  const kv pads1[] = {AINTS("pads", 1, 1, 1, 1)};
  static const int pads1_n = 1;
  int r = x;
  if (res_from_conv) r = NODE(&b, "Conv", "res", noattrs, x, w1);
  int c = NODE(&b, "Conv", "c", pads1, x, w, cb);
  int a1 = NODE(&b, "Add", "a1", noattrs, bias, c);
  int a2 = NODE(&b, "Add", "a2", noattrs, a1, r);
  int y = a2;
  if (act) {
    if (!strcmp(act, "Clip")) {
      int lo = scalar_const(&b, "lo", -0.5f), hi = scalar_const(&b, "hi", 0.75f);
      y = NODE(&b, "Clip", "y", noattrs, a2, lo, hi);
    } else if (!strcmp(act, "LeakyRelu")) {
      const kv al[] = {AF("alpha", 0.1f)};
      static const int al_n = 1;
      y = NODE(&b, "LeakyRelu", "y", al, a2);
    } else {
      y = node(&b, act, "y", &a2, 1, NULL, 0);
    }
  }
  output(&b, y);
  gb_finish(&b);
  check_threads(&b);
  /* a residual produced by a conv earlier in the order takes the residual Add into its kernel */
  expect_plan(res_from_conv ? "+bias" : "+bias +residual");
  expect_plan("+residual");
  expect_place("c", ALMA_PLACE_RUNTIME, ALMA_DECLINE_NONE);
  expect_place("a1", ALMA_PLACE_FUSED, ALMA_DECLINE_NONE);
  gb_free(&b);
}

static void test_conv_fused(void **state) {
  (void)state;
  const char *acts[] = {NULL, "Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh"};
  for (int a = 0; a < 6; a++)
    for (int rc = 0; rc < 2; rc++) {
      conv_chain(acts[a], rc, 1);
      conv_chain(acts[a], rc, 3);
    }
}

/* alma.Fused* nodes from the FUSE pass: their own residual, bias and activations (also those the
 * epilogue leaves to alma__fused_act_f32), a residual Add after a FusedMatMul, and a Z that
 * broadcasts (the node's reference kernel). */
static void test_fused_nodes(void **state) {
  (void)state;
  tol_for_k(8 * 9);
  const char *acts[] = {"Relu", "HardSwish", "Gelu", "Clip", "LeakyRelu", "SiLU"};
  for (int a = 0; a < 6; a++)
    for (int zshape = 0; zshape < 3; zshape++) {
      gb b;
      gb_init(&b, 13);
      int64_t xd[4] = {2, 8, 10, 10}, wd[4] = {8, 8, 3, 3}, bd[1] = {8}, zb[4] = {1, 8, 1, 1};
      int x = input(&b, "x", ALMA_DTYPE_FLOAT32, 4, xd);
      int w = constant(&b, "w", ALMA_DTYPE_FLOAT32, 4, wd);
      int bias = constant(&b, "b", ALMA_DTYPE_FLOAT32, 1, bd);
      int z = zshape == 2 ? input(&b, "z", ALMA_DTYPE_FLOAT32, 4, zb) : NODE(&b, "Relu", "z", noattrs, x);
      static const float clip[2] = {-0.5f, 0.5f}, slope[1] = {0.2f};
      int leaky = !strcmp(acts[a], "LeakyRelu");
      kv params = {.name = "activation_params", .type = ALMA_ATTR_FLOATS, .floats = leaky ? slope : clip, .n = 2 - leaky};
      kv at[3] = {AINTS("pads", 1, 1, 1, 1), AS("activation", acts[a]), params};
      int nat = !strcmp(acts[a], "Clip") || leaky ? 3 : 2;
      int ins[4] = {x, w, bias, z};
      int y = node(&b, "FusedConv", "y", ins, zshape ? 4 : 3, at, nat);
      output(&b, y);
      gb_finish(&b);
      check_threads(&b);
      /* a residual that broadcasts (zshape 2): the kernel declines, the node runs on EAGER */
      expect_place("y", zshape == 2 ? ALMA_PLACE_EAGER : ALMA_PLACE_RUNTIME, zshape == 2 ? ALMA_DECLINE_DYNAMIC : ALMA_DECLINE_NONE);
      gb_free(&b);
    }
  /* FusedGemm, FusedMatMul with a bias and a residual Add after it */
  for (int a = 0; a < 3; a++) {
    gb b;
    gb_init(&b, 13);
    int64_t ad[3] = {3, 40, 64}, wd[2] = {64, 64}, bd[1] = {64}, a2[2] = {40, 64}, w2[2] = {32, 64}, c2[1] = {32};
    tol_for_k(64);
    int x = input(&b, "x", ALMA_DTYPE_FLOAT32, 3, ad);
    int w = constant(&b, "w", ALMA_DTYPE_FLOAT32, 2, wd);
    int bias = constant(&b, "b", ALMA_DTYPE_FLOAT32, 1, bd);
    kv at[2] = {AS("activation", a == 0 ? "Tanh" : "Gelu"), AFLOATS("activation_params", 1)};
    int m = node(&b, "FusedMatMul", "m", (const int[]){x, w, bias}, 3, a == 2 ? NULL : at, a == 2 ? 0 : a + 1);
    int r = NODE(&b, "Sigmoid", "r", noattrs, x);
    int s = NODE(&b, "Add", "s", noattrs, r, m);
    output(&b, s);
    int x2 = input(&b, "x2", ALMA_DTYPE_FLOAT32, 2, a2);
    int wg = constant(&b, "wg", ALMA_DTYPE_FLOAT32, 2, w2);
    int cg = constant(&b, "cg", ALMA_DTYPE_FLOAT32, 1, c2);
    kv ag[3] = {AI("transB", 1), AS("activation", "HardSigmoid"), AFLOATS("activation_params", 0.3f, 0.4f)};
    int gm = node(&b, "FusedGemm", "gm", (const int[]){x2, wg, cg}, 3, ag, 3);
    output(&b, gm);
    gb_finish(&b);
    check_threads(&b);
    if (a == 2) expect_plan("+bias +residual");
    expect_place("gm", ALMA_PLACE_RUNTIME, ALMA_DECLINE_NONE);
    expect_plan("BLAS sgemm +HardSigmoid");
    gb_free(&b);
  }
}

/* A one-node branch graph reading the outer value `outer` (name of a value of b's graph). */
static alma_graph *branch(gb *b, const char *op, const char *outer, const char *out) {
  alma_graph *sub = alma__graph_new(b->g->arena);
  assert_non_null(sub);
  sub->parent = b->g;
  sub->opsets = b->g->opsets;
  sub->n_opsets = b->g->n_opsets;
  sub->name = out;
  int y = alma__graph_add_value(sub, outer), t = alma__graph_add_value(sub, out);
  sub->values[y].is_outer = 1;
  int idx = alma__graph_add_node(sub, op, "", out, &y, 1, &t, 1);
  assert_int_equal(alma__op_resolve(&sub->nodes[idx], b->opset), ALMA_OK);
  sub->outputs = malloc(sizeof(int));
  sub->outputs[0] = t;
  sub->n_outputs = 1;
  return sub;
}

/* A graph with an If: the shared executor runs it, native nodes unfused. */
static void test_subgraph_graph(void **state) {
  (void)state;
  tol_for_k(27);
  gb b;
  gb_init(&b, 13);
  int64_t xd[2] = {5, 16}, wd[2] = {16, 8}, id[4] = {2, 3, 9, 9}, kd[4] = {4, 3, 3, 3};
  int x = input(&b, "x", ALMA_DTYPE_FLOAT32, 2, xd);
  int c = input(&b, "c", ALMA_DTYPE_BOOL, 0, NULL);
  int img = input(&b, "img", ALMA_DTYPE_FLOAT32, 4, id);
  int w = constant(&b, "w", ALMA_DTYPE_FLOAT32, 2, wd);
  int wc = constant(&b, "wc", ALMA_DTYPE_FLOAT32, 4, kd);
  int m = NODE(&b, "MatMul", "m", noattrs, x, w);
  int z = value(&b, "z");
  int idx = alma__graph_add_node(b.g, "If", "", "if", &c, 1, &z, 1);
  alma_node *n = &b.g->nodes[idx];
  n->attrs = alma__arena_alloc(b.g->arena, 2 * sizeof(alma_attr));
  n->attrs[0] = (alma_attr){.name = "then_branch", .type = ALMA_ATTR_GRAPH, .g = branch(&b, "Relu", "m", "t")};
  n->attrs[1] = (alma_attr){.name = "else_branch", .type = ALMA_ATTR_GRAPH, .g = branch(&b, "Neg", "m", "e")};
  n->n_attrs = 2;
  n->implicit_inputs = malloc(sizeof(int));
  n->implicit_inputs[0] = m;
  n->n_implicit = 1;
  assert_int_equal(alma__op_resolve(n, b.opset), ALMA_OK);
  const kv pads[] = {AINTS("pads", 1, 1, 1, 1)};
  const int pads_n = 1;
  int k = NODE(&b, "Conv", "k", pads, img, wc);
  int kr = NODE(&b, "Relu", "kr", noattrs, k);
  output(&b, z);
  output(&b, kr);
  gb_finish(&b);
  for (int cond = 0; cond < 2; cond++) {
    *(uint8_t *)b.feeds[1].data = (uint8_t)cond;
    check_threads(&b);
  }
  expect_plan("graph has subgraphs");
  expect_place("m", ALMA_PLACE_RUNTIME, ALMA_DECLINE_NONE);
  gb_free(&b);
}

/* As exported before FOLD: the bias and the Clip bounds come from Constant nodes. */
static void test_constant_nodes(void **state) {
  (void)state;
  tol_for_k(8 * 9);
  gb b;
  gb_init(&b, 13);
  int64_t xd[4] = {2, 8, 10, 10}, wd[4] = {8, 8, 3, 3}, bd[4] = {1, 8, 1, 1};
  int x = input(&b, "x", ALMA_DTYPE_FLOAT32, 4, xd);
  int w = constant(&b, "w", ALMA_DTYPE_FLOAT32, 4, wd);
  int c = NODE(&b, "Conv", "c", noattrs, x, w);
  int bias = constant_node(&b, "bias", 4, bd, NULL);
  int s = NODE(&b, "Add", "s", noattrs, c, bias);
  float lo = 0.0f, hi = 0.5f;
  int clo = constant_node(&b, "lo", 0, NULL, &lo), chi = constant_node(&b, "hi", 0, NULL, &hi);
  int y = NODE(&b, "Clip", "y", noattrs, s, clo, chi);
  output(&b, y);
  gb_finish(&b);
  check_threads(&b);
  expect_plan("+bias +Clip");
  gb_free(&b);
}

/* Add(Conv(x), x) with x produced inside the graph (owned): x is still the conv's input when the
 * Add runs, so its buffer must not be taken over. Also a depthwise conv's residual taken over. */
static void test_residual_aliasing(void **state) {
  (void)state;
  tol_for_k(72);
  for (int dw = 0; dw < 2; dw++) {
    gb b;
    gb_init(&b, 17);
    int64_t xd[4] = {2, 8, 9, 9}, wd[4] = {8, dw ? 1 : 8, 3, 3};
    int x0 = input(&b, "x0", ALMA_DTYPE_FLOAT32, 4, xd);
    int w = constant(&b, "w", ALMA_DTYPE_FLOAT32, 4, wd);
    int x = NODE(&b, "Relu", "x", noattrs, x0);
    kv at[2] = {AINTS("pads", 1, 1, 1, 1), AI("group", dw ? 8 : 1)};
    int ins[2] = {x, w};
    int c = node(&b, "Conv", "c", ins, 2, at, 2);
    int s = NODE(&b, "Add", "s", noattrs, c, x);
    int y = NODE(&b, "Relu", "y", noattrs, s);
    output(&b, y);
    gb_finish(&b);
    check_threads(&b);
    expect_plan("+residual +Relu");
    gb_free(&b);
    /* the same with a separate producer whose last use is the Add: taken over */
    gb_init(&b, 17);
    x0 = input(&b, "x0", ALMA_DTYPE_FLOAT32, 4, xd);
    w = constant(&b, "w", ALMA_DTYPE_FLOAT32, 4, wd);
    x = NODE(&b, "Relu", "x", noattrs, x0);
    int x2 = NODE(&b, "Sigmoid", "x2", noattrs, x0);
    ins[0] = x;
    c = node(&b, "Conv", "c", ins, 2, at, 2);
    s = NODE(&b, "Add", "s", noattrs, x2, c);
    output(&b, s);
    gb_finish(&b);
    check_threads(&b);
    gb_free(&b);
  }
}

/* ---- activation buffers -------------------------------------------------------------------------- */

/* Runs pb once on feeds and checks its outputs against pe's. */
static void run_and_compare(const alma_runtime *blas, void *pb, void *pe, gb *b, int threads) {
  alma_tensor want[8], got[8];
  if (alma__runtime_eager.run(pe, b->feeds, b->nin, want, b->nout) != ALMA_OK) fail_msg("eager: %s", alma_last_error());
  if (blas->run(pb, b->feeds, b->nin, got, b->nout) != ALMA_OK) fail_msg("blas: %s", alma_last_error());
  compare_outputs(got, want, b->nout, threads);
  for (int o = 0; o < b->nout; o++) alma_tensor_free_data(&want[o]);
}

/* Steady-state runs allocate nothing: after the first run of a shape, every activation buffer comes
 * from the plan's arena (alma__blas_plan_mem counts what is allocated outside it, and the arena
 * itself), the arena holds about the peak of live activations rather than one buffer per value,
 * and graph outputs reach the caller in buffers of their own, never the arena. The graph has EAGER
 * nodes between native ones, a residual whose buffer is taken over, a fused residual Add whose
 * result is a graph output (its residual then not taken over), and an EAGER node's output that is
 * also a graph output. A larger batch makes a new layout once and then allocates nothing; back at
 * the smaller batch, the larger layout serves it as it is. */
static void test_buffers_reused(void **state) {
  (void)state;
  tol_for_k(8 * 9);
  gb b;
  gb_init(&b, 17);
  int64_t xd[4] = {2, 8, 32, 32}, wd[4] = {8, 8, 3, 3}, gwd[2] = {10, 2048}, gbd[1] = {10};
  int x0 = input(&b, "x0", ALMA_DTYPE_FLOAT32, 4, xd);
  int w = constant(&b, "w", ALMA_DTYPE_FLOAT32, 4, wd);
  int w2 = constant(&b, "w2", ALMA_DTYPE_FLOAT32, 4, wd);
  int gw = constant(&b, "gw", ALMA_DTYPE_FLOAT32, 2, gwd);
  int gc = constant(&b, "gc", ALMA_DTYPE_FLOAT32, 1, gbd);
  const kv pads1[] = {AINTS("pads", 1, 1, 1, 1)};
  static const int pads1_n = 1;
  const kv mp[] = {AINTS("kernel_shape", 2, 2), AINTS("strides", 2, 2)};
  static const int mp_n = 2;
  const kv tb[] = {AI("transB", 1)};
  static const int tb_n = 1;
  int a = NODE(&b, "Relu", "a", noattrs, x0); /* EAGER nodes: 64 KiB each */
  int s = NODE(&b, "Sigmoid", "s", noattrs, a);
  int c = NODE(&b, "Conv", "c", pads1, s, w);
  int d = NODE(&b, "Add", "d", noattrs, c, a); /* a's last use: the conv takes its buffer */
  int e = NODE(&b, "Relu", "e", noattrs, d);
  int f = NODE(&b, "MaxPool", "f", mp, e); /* a graph output, read by two nodes */
  int t = NODE(&b, "Tanh", "t", noattrs, f);
  int u = NODE(&b, "Neg", "u", noattrs, f);
  int c2 = NODE(&b, "Conv", "c2", pads1, t, w2);
  int r = NODE(&b, "Add", "r", noattrs, c2, u); /* u's last use, but r is a graph output */
  int h = NODE(&b, "Flatten", "h", noattrs, r);
  int y = NODE(&b, "Gemm", "y", tb, h, gw, gc);
  output(&b, f);
  output(&b, r);
  output(&b, y);
  gb_finish(&b);
  const alma_runtime *blas = alma__runtime_find("BLAS");
  assert_non_null(blas);
  assert_int_equal(blas->init(), ALMA_OK);
  alma_tensor small = b.feeds[0], big = rand_tensor(ALMA_DTYPE_FLOAT32, 4, (const int64_t[]){4, 8, 32, 32});
  for (int threads = 1; threads <= 2; threads++) {
    alma_runtime_opts opts = {.threads = threads};
    void *pe = NULL, *pb = NULL;
    assert_int_equal(alma__runtime_eager.compile(b.g, &opts, &pe), ALMA_OK);
    if (blas->compile(b.g, &opts, &pb) != ALMA_OK) fail_msg("compile: %s", alma_last_error());
    const alma__blas_mem *m = alma__blas_plan_mem(pb);
    assert_non_null(m);
    b.feeds[0] = small;
    run_and_compare(blas, pb, pe, &b, threads);
    long allocs = m->allocs;
    size_t arena = m->arena_size;
    assert_true(allocs > 0);
    assert_int_equal(m->layouts, 1);
    for (int rep = 0; rep < 3; rep++) {
      run_and_compare(blas, pb, pe, &b, threads);
      assert_int_equal(m->run_allocs, 0);
      assert_int_equal(m->allocs, allocs);
      assert_int_equal(m->arena_size, arena);
      assert_int_equal(m->layouts, 1);
    }
    /* every graph output in a buffer of its own, every run */
    assert_int_equal(m->outputs, 3 * m->runs);
    assert_int_equal(m->output_copies, 0);
    /* a, s, t, u and h (64+64+16+16+16 KiB) share the arena: a's bytes go on as c, then t or h;
     * it is the peak of live values (a and s: 128 KiB), give or take a quarter */
    size_t each = (64 + 64 + 16 + 16 + 16) * 1024;
    assert_int_equal(m->plan_peak, 128 * 1024);
    if (m->arena_size >= each || m->arena_size > m->plan_peak / 4 * 5)
      fail_msg("arena of %zu bytes for a peak of %zu, one buffer per value would be %zu", m->arena_size, m->plan_peak,
               each);
    /* batch 4: a new layout once, then nothing allocated */
    b.feeds[0] = big;
    run_and_compare(blas, pb, pe, &b, threads);
    assert_true(m->run_allocs > 0);
    assert_int_equal(m->layouts, 2);
    long allocs_big = m->allocs;
    size_t arena_big = m->arena_size;
    assert_true(arena_big > arena);
    run_and_compare(blas, pb, pe, &b, threads);
    assert_int_equal(m->run_allocs, 0);
    assert_int_equal(m->allocs, allocs_big);
    /* back to batch 2: its smaller buffers follow batch 4's layout */
    b.feeds[0] = small;
    for (int rep = 0; rep < 2; rep++) {
      run_and_compare(blas, pb, pe, &b, threads);
      assert_int_equal(m->run_allocs, 0);
      assert_int_equal(m->allocs, allocs_big);
      assert_int_equal(m->layouts, 2);
      assert_int_equal(m->arena_size, arena_big);
    }
    expect_plan_of(blas, pb, "+residual +Relu");
    expect_plan_of(blas, pb, "buffers: ");
    blas->free(pb);
    alma__runtime_eager.free(pe);
  }
  b.feeds[0] = small;
  alma_tensor_free_data(&big);
  gb_free(&b);
}

/* mem.c alone on random request sequences: buffers alive at the same time never overlap (each is
 * filled with its own byte and checked when given back, also across the switch from arena to
 * allocations when a run departs from the layout), a repeated sequence allocates nothing after its
 * first run, a sequence of smaller requests follows the layout as it is, and the arena stays near
 * the peak of live bytes. */
typedef struct mem_op {
  int put;     /* 0: take request `id` of `size` bytes; 1: give back request `id` */
  int id;
  size_t size;
} mem_op;

/* Requests in waves: taken until up to 60 are alive (a few given back meanwhile), then given back
 * down to a few (long runs of releases, as at the end of a network's stage). */
static int mem_program(mem_op *ops, int max_ops, int nreq, uint64_t seed) {
  uint64_t save = rng;
  rng = seed;
  int live[64], nlive = 0, n = 0, taken = 0, fill = 1, target = 40;
  while ((taken < nreq || nlive) && n < max_ops) {
    if (fill && (nlive >= target || taken == nreq)) fill = 0, target = (int)((urand() + 1) * 3);
    else if (!fill && nlive <= target && taken < nreq) fill = 1, target = 8 + (int)((urand() + 1) * 26);
    int take = nlive == 0 || (fill && urand() > -0.5f);
    if (take && taken < nreq) {
      double u = (urand() + 1) / 2; /* sizes spread from bytes to ~1 MiB */
      ops[n++] = (mem_op){0, taken, (size_t)(exp(u * 14.0) - 1)};
      live[nlive++] = taken++;
    } else if (nlive) {
      int j = (int)((urand() + 1) / 2 * nlive) % nlive;
      ops[n++] = (mem_op){1, live[j], 0};
      live[j] = live[--nlive];
    }
  }
  rng = save;
  return n;
}

static void mem_run(alma__blas_mem *m, const mem_op *ops, int n, int scale_down) {
  static unsigned char *ptr[4096];
  static size_t len[4096];
  alma__blas_mem_begin(m);
  for (int i = 0; i < n; i++) {
    const mem_op *o = &ops[i];
    if (!o->put) {
      len[o->id] = scale_down ? o->size / 2 : o->size;
      ptr[o->id] = alma__blas_mem_get(m, len[o->id]);
      assert_non_null(ptr[o->id]);
      assert_int_equal((uintptr_t)ptr[o->id] % 64, 0);
      memset(ptr[o->id], o->id & 0xff, len[o->id]);
      continue;
    }
    for (size_t k = 0; k < len[o->id]; k++)
      if (ptr[o->id][k] != (unsigned char)(o->id & 0xff))
        fail_msg("request %d: byte %zu of %zu overwritten by a buffer alive at the same time", o->id, k, len[o->id]);
    assert_int_equal(alma__blas_mem_size(m, ptr[o->id]) >= len[o->id], 1);
    assert_int_equal(alma__blas_mem_put(m, ptr[o->id]), 1);
    assert_int_equal(alma__blas_mem_put(m, ptr[o->id]), 0); /* given back once */
  }
  alma__blas_mem_end(m, 1);
}

static void test_mem_layout(void **state) {
  (void)state;
  static mem_op a[8192], b[8192];
  int na = mem_program(a, 8192, 600, 12345), nb = mem_program(b, 8192, 600, 777);
  /* b departs from a halfway: its first half is a's */
  int half = na / 2;
  memcpy(b, a, sizeof(mem_op) * (size_t)half);
  int live_ids[64], nl = 0, next = 0;
  for (int i = 0; i < half; i++) {
    if (!b[i].put) live_ids[nl++] = b[i].id, next = b[i].id + 1;
    else
      for (int j = 0; j < nl; j++)
        if (live_ids[j] == b[i].id) live_ids[j] = live_ids[--nl];
  }
  nb = half;
  for (int i = 0; i < 400; i++) b[nb++] = (mem_op){0, next + i, (size_t)(1000 + 37 * i)};
  for (int j = 0; j < nl; j++) b[nb++] = (mem_op){1, live_ids[j], 0};
  for (int i = 0; i < 400; i++) b[nb++] = (mem_op){1, next + i, 0};
  alma__blas_mem m = {0};
  mem_run(&m, a, na, 0);
  assert_int_equal(m.layouts, 1);
  assert_true(m.run_allocs > 0);
  long allocs = m.allocs;
  if (m.arena_size < m.plan_peak || m.arena_size > m.plan_peak / 10 * 12 + 4096)
    fail_msg("arena of %zu bytes for a peak of %zu live", m.arena_size, m.plan_peak);
  for (int rep = 0; rep < 2; rep++) {
    mem_run(&m, a, na, 0);
    assert_int_equal(m.run_allocs, 0);
    assert_int_equal(m.allocs, allocs);
  }
  mem_run(&m, a, na, 1); /* smaller requests: the same layout */
  assert_int_equal(m.run_allocs, 0);
  assert_int_equal(m.layouts, 1);
  mem_run(&m, b, nb, 0); /* departs halfway: allocates the rest, lays out again */
  assert_true(m.run_allocs > 0);
  assert_int_equal(m.layouts, 2);
  allocs = m.allocs;
  mem_run(&m, b, nb, 0);
  assert_int_equal(m.run_allocs, 0);
  assert_int_equal(m.allocs, allocs);
  mem_run(&m, a, na, 0); /* and back */
  assert_int_equal(m.layouts, 3);
  mem_run(&m, a, na, 0);
  assert_int_equal(m.run_allocs, 0);
  alma__blas_mem_free(&m);
}

/* Chains that must stop or run unfused. */
static void test_not_fused(void **state) {
  (void)state;
  tol_for_k(36);
  gb b;
  /* the conv output is also a graph output: no fusion */
  gb_init(&b, 17);
  int64_t xd[4] = {1, 4, 6, 6}, wd[4] = {4, 4, 3, 3}, rd[4] = {1, 4, 1, 1};
  int x = input(&b, "x", ALMA_DTYPE_FLOAT32, 4, xd);
  int w = constant(&b, "w", ALMA_DTYPE_FLOAT32, 4, wd);
  int c = NODE(&b, "Conv", "c", noattrs, x, w);
  int y = NODE(&b, "Relu", "y", noattrs, c);
  output(&b, c);
  output(&b, y);
  gb_finish(&b);
  check_threads(&b);
  expect_plan("output is a graph output");
  gb_free(&b);
  /* a residual that broadcasts ([1,4,1,1] onto [1,4,4,4]): planned, but run unfused */
  gb_init(&b, 17);
  x = input(&b, "x", ALMA_DTYPE_FLOAT32, 4, xd);
  int r = input(&b, "r", ALMA_DTYPE_FLOAT32, 4, rd);
  w = constant(&b, "w", ALMA_DTYPE_FLOAT32, 4, wd);
  c = NODE(&b, "Conv", "c", noattrs, x, w);
  int s = NODE(&b, "Add", "s", noattrs, c, r);
  y = NODE(&b, "Tanh", "y", noattrs, s);
  output(&b, y);
  gb_finish(&b);
  check_threads(&b);
  expect_plan("ran unfused");
  /* the chain node by node: the Conv alone on BLAS, the Add and Tanh on EAGER */
  expect_place("c", ALMA_PLACE_RUNTIME, ALMA_DECLINE_NONE);
  expect_place("s", ALMA_PLACE_EAGER, ALMA_DECLINE_DYNAMIC);
  expect_place("y", ALMA_PLACE_EAGER, ALMA_DECLINE_DYNAMIC);
  gb_free(&b);
  /* a constant that is not per-channel ([4,4] would broadcast over H, W): not a bias */
  gb_init(&b, 17);
  int64_t k2[2] = {4, 4};
  x = input(&b, "x", ALMA_DTYPE_FLOAT32, 4, xd);
  w = constant(&b, "w", ALMA_DTYPE_FLOAT32, 4, wd);
  int k = constant(&b, "k", ALMA_DTYPE_FLOAT32, 2, k2);
  c = NODE(&b, "Conv", "c", noattrs, x, w);
  s = NODE(&b, "Add", "s", noattrs, c, k);
  output(&b, s);
  gb_finish(&b);
  check_threads(&b);
  expect_plan("not a per-channel bias");
  gb_free(&b);
  /* float64: EAGER */
  gb_init(&b, 17);
  x = input(&b, "x", ALMA_DTYPE_FLOAT64, 4, xd);
  w = constant(&b, "w", ALMA_DTYPE_FLOAT64, 4, wd);
  c = NODE(&b, "Conv", "c", noattrs, x, w);
  output(&b, c);
  gb_finish(&b);
  check_threads(&b);
  gb_free(&b);
}

/* ---- Gemm ------------------------------------------------------------------------------------------ */

static void gemm_case(int64_t M, int64_t N, int64_t K, int ta, int tb, float alpha, float beta, int crank,
                      const int64_t *cdims, const char *act, int fused_bias) {
  gb b;
  gb_init(&b, 13);
  int64_t ad[2] = {ta ? K : M, ta ? M : K}, bd[2] = {tb ? N : K, tb ? K : N}, fbd[1] = {N};
  int a = input(&b, "a", ALMA_DTYPE_FLOAT32, 2, ad);
  int w = constant(&b, "w", ALMA_DTYPE_FLOAT32, 2, bd);
  int c = crank >= 0 ? constant(&b, "c", ALMA_DTYPE_FLOAT32, crank, cdims) : -1;
  kv at[4] = {AI("transA", ta), AI("transB", tb), AF("alpha", alpha), AF("beta", beta)};
  int ins[3] = {a, w, c};
  int y = node(&b, "Gemm", "g", ins, crank >= 0 ? 3 : 2, at, 4);
  tol_for_k(K);
  if (fused_bias) {
    int fb = constant(&b, "fb", ALMA_DTYPE_FLOAT32, 1, fbd);
    y = NODE(&b, "Add", "gb", noattrs, y, fb);
  }
  if (act) y = node(&b, act, "y", &y, 1, NULL, 0);
  output(&b, y);
  gb_finish(&b);
  check_threads(&b);
  gb_free(&b);
}

static void test_gemm(void **state) {
  (void)state;
  static const int64_t sizes[][3] = {{1, 10, 9216}, {1, 128, 64}, {32, 1000, 512}, {37, 5, 19},
                                     {300, 200, 3}, {7, 7, 0},    {2, 3, 4},        {64, 64, 64},
                                     {5, 1, 70},    {1, 1, 9},    {1, 3, 0},        {130, 1, 3}};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    int64_t M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
    int64_t cn[1] = {N}, c1n[2] = {1, N}, cm1[2] = {M, 1}, cmn[2] = {M, N}, c11[2] = {1, 1};
    for (int t = 0; t < 4; t++) {
      int ta = t & 1, tb = t >> 1;
      gemm_case(M, N, K, ta, tb, 1.0f, 1.0f, -1, NULL, NULL, 0);
      gemm_case(M, N, K, ta, tb, 0.5f, 2.0f, 1, cn, "Relu", 0);
      gemm_case(M, N, K, ta, tb, 1.0f, -1.0f, 2, c1n, NULL, 1);
      gemm_case(M, N, K, ta, tb, 1.5f, 0.25f, 2, cm1, "Sigmoid", 1);
      gemm_case(M, N, K, ta, tb, 1.0f, 3.0f, 2, cmn, "Relu", 1);
      gemm_case(M, N, K, ta, tb, -1.0f, 1.0f, 0, NULL, NULL, 0);
      gemm_case(M, N, K, ta, tb, 1.0f, 0.5f, 2, c11, "Tanh", 0);
    }
  }
}

/* ---- MatMul ----------------------------------------------------------------------------------------- */

static void matmul_case(int ra, const int64_t *da, int rb, const int64_t *db, int a_const_b, int fuse) {
  gb b;
  gb_init(&b, 13);
  int a = input(&b, "a", ALMA_DTYPE_FLOAT32, ra, da);
  int w = a_const_b ? constant(&b, "w", ALMA_DTYPE_FLOAT32, rb, db) : input(&b, "w", ALMA_DTYPE_FLOAT32, rb, db);
  int y = NODE(&b, "MatMul", "m", noattrs, a, w);
  tol_for_k(da[ra - 1]);
  if (fuse) {
    int64_t N = rb == 1 ? 1 : db[rb - 1];
    int64_t bd[2] = {1, N};
    int bias = constant(&b, "bias", ALMA_DTYPE_FLOAT32, fuse > 1 ? 2 : 1, fuse > 1 ? bd : bd + 1);
    y = NODE(&b, "Add", "mb", noattrs, bias, y);
    int r = NODE(&b, "Neg", "r", noattrs, a); /* residual: only meaningful when shapes agree */
    if (ra >= 2 && rb >= 2 && da[ra - 1] == db[rb - 1] && ra >= rb) y = NODE(&b, "Add", "mr", noattrs, y, r);
    else output(&b, r);
    y = NODE(&b, "Relu", "y", noattrs, y);
  }
  output(&b, y);
  gb_finish(&b);
  check_threads(&b);
  gb_free(&b);
}

static void test_matmul(void **state) {
  (void)state;
  const int64_t a2[] = {64, 256}, b2[] = {256, 256}, a3[] = {4, 128, 256}, b3[] = {4, 256, 64};
  const int64_t a4[] = {2, 4, 33, 16}, b4[] = {2, 4, 16, 33}, b4s[] = {1, 4, 16, 16}, a4b[] = {3, 1, 5, 7};
  const int64_t b3b[] = {2, 7, 6}, v7[] = {7}, m75[] = {7, 5}, a1x[] = {3, 2, 7}, s1[] = {1, 1, 300, 256};
  for (int fuse = 0; fuse < 3; fuse++) {
    matmul_case(2, a2, 2, b2, 1, fuse);
    matmul_case(3, a3, 2, b2, 1, fuse);   /* weights shared: one tall GEMM */
    matmul_case(3, a3, 3, b3, 0, fuse);   /* batched */
    matmul_case(4, a4, 4, b4, 0, fuse);   /* attention-like */
    matmul_case(4, a4, 4, b4s, 0, fuse);  /* B broadcast over the first batch dim */
    matmul_case(4, a4b, 3, b3b, 0, fuse); /* both broadcast */
    matmul_case(1, v7, 2, m75, 1, fuse);  /* 1-D A */
    matmul_case(3, a1x, 1, v7, 1, fuse);  /* 1-D B */
    matmul_case(4, s1, 2, b2, 1, fuse);
  }
}

/* ---- Attention ------------------------------------------------------------------------------------ */

typedef struct attn_case {
  int rq, rk, rv, rm; /* ranks; rm < 0: no mask */
  int64_t q[5], k[5], v[5], m[5];
  int kt;
  float scale;        /* 0: the default 1/sqrt(D) */
  float neg_inf_every; /* > 0: every n-th mask element is -inf (n = this) */
} attn_case;

static void attn_run_case(const attn_case *c, alma_dtype dt) {
  gb b;
  gb_init(&b, 14);
  int q = input(&b, "q", dt, c->rq, c->q);
  int k = input(&b, "k", dt, c->rk, c->k);
  int v = input(&b, "v", dt, c->rv, c->v);
  int ins[4] = {q, k, v, -1};
  if (c->rm >= 0) {
    ins[3] = input(&b, "mask", dt, c->rm, c->m);
    alma_tensor *mt = &b.feeds[3];
    for (int64_t i = 0; i < alma_tensor_numel(mt); i++) {
      double x = 4 * alma__get_f64(mt->data, dt, i);
      if (c->neg_inf_every > 0 && i % (int64_t)c->neg_inf_every == 1) x = -INFINITY;
      alma__set_f64(mt->data, dt, i, x);
    }
  }
  /* scores of a few units, so the softmax is not flat */
  for (int64_t i = 0; i < alma_tensor_numel(&b.feeds[0]); i++)
    alma__set_f64(b.feeds[0].data, dt, i, 3 * alma__get_f64(b.feeds[0].data, dt, i));
  kv at[2];
  int na = 0;
  if (c->kt) at[na++] = AI("k_transposed", 1);
  if (c->scale != 0) at[na++] = AF("scale", c->scale);
  int y = node(&b, "Attention", "y", ins, c->rm >= 0 ? 4 : 3, at, na);
  output(&b, y);
  gb_finish(&b);
  int64_t D = c->q[c->rq - 1], Sk = c->k[c->rk - (c->kt ? 1 : 2)];
  tol_for_k(D > Sk ? D : Sk);
  check_threads(&b);
  if (dt == ALMA_DTYPE_FLOAT32) expect_plan("Attention            BLAS sgemm scale*Q*K^T");
  expect_place("y", dt == ALMA_DTYPE_FLOAT32 ? ALMA_PLACE_RUNTIME : ALMA_PLACE_EAGER, ALMA_DECLINE_NONE);
  if (c->rm >= 0) expect_plan("+mask");
  gb_free(&b);
}

/* alma.Attention against its reference kernel: multi-head shapes, K transposed, broadcast batch
 * dims, every mask broadcast (with -inf entries, and rows masked entirely: NaN in both), a single
 * query row (GEMV), several row blocks per head, Sk = 1, D = 0, Sk = 0, an explicit scale, and
 * float64 (EAGER). */
static void test_attention(void **state) {
  (void)state;
  static const attn_case cases[] = {
      /* multi-head self-attention, no mask, default scale */
      {4, 4, 4, -1, {2, 4, 33, 16}, {2, 4, 40, 16}, {2, 4, 40, 24}, {0}, 0, 0, 0},
      /* K already transposed, an explicit scale */
      {4, 4, 4, -1, {2, 4, 33, 16}, {2, 4, 16, 40}, {2, 4, 40, 24}, {0}, 1, 0.3f, 0},
      /* 3-D (batch * heads) as exported, additive mask [Sq, Sk] with -inf entries */
      {3, 3, 3, 2, {8, 16, 8}, {8, 16, 8}, {8, 16, 8}, {16, 16}, 0, 0, 3},
      /* key padding mask [B, 1, 1, Sk] */
      {4, 4, 4, 4, {2, 3, 20, 8}, {2, 3, 20, 8}, {2, 3, 20, 8}, {2, 1, 1, 20}, 0, 0, 0},
      /* mask [Sk] and a scalar mask; mask [Sq, 1] */
      {3, 3, 3, 1, {3, 9, 5}, {3, 11, 5}, {3, 11, 7}, {11}, 0, 0, 0},
      {3, 3, 3, 0, {3, 9, 5}, {3, 11, 5}, {3, 11, 7}, {0}, 0, 0, 0},
      {3, 3, 3, 2, {3, 9, 5}, {3, 11, 5}, {3, 11, 7}, {9, 1}, 0, 0, 0},
      /* whole rows masked: -inf everywhere in some rows ([Sq, 1] mask), NaN like the reference */
      {3, 3, 3, 2, {2, 6, 4}, {2, 10, 4}, {2, 10, 4}, {6, 1}, 0, 0, 2},
      /* broadcast batch dims: Q [3,1], K [2], V [1] -> [3,2]; mask over the batch too */
      {4, 3, 3, 4, {3, 1, 5, 8}, {2, 7, 8}, {1, 7, 6}, {3, 2, 5, 7}, 0, 0, 0},
      {4, 3, 2, 3, {3, 1, 5, 8}, {2, 8, 7}, {7, 6}, {2, 1, 7}, 1, 0, 0},
      /* one query row (GEMV), also with K transposed */
      {4, 4, 4, 2, {2, 4, 1, 32}, {2, 4, 50, 32}, {2, 4, 50, 32}, {1, 50}, 0, 0, 0},
      {3, 3, 3, -1, {4, 1, 32}, {4, 32, 50}, {4, 50, 16}, {0}, 1, 0, 0},
      /* long sequences: several row blocks per head, and blocks split for the threads */
      {3, 3, 3, 2, {1, 300, 16}, {1, 200, 16}, {1, 200, 16}, {300, 200}, 0, 0, 0},
      {3, 3, 3, -1, {3, 130, 64}, {3, 700, 64}, {3, 700, 32}, {0}, 0, 0, 0},
      {3, 3, 3, -1, {1, 128, 64}, {1, 128, 64}, {1, 128, 64}, {0}, 0, 0, 0},
      /* Sk = 1, D = 0 (scores all 0: the mean of V), Sk = 0 (zeros) */
      {3, 3, 3, -1, {2, 5, 4}, {2, 1, 4}, {2, 1, 3}, {0}, 0, 0, 0},
      {3, 3, 3, -1, {2, 5, 0}, {2, 6, 0}, {2, 6, 3}, {0}, 0, 0, 0},
      {3, 3, 3, -1, {2, 5, 4}, {2, 0, 4}, {2, 0, 3}, {0}, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) attn_run_case(&cases[i], ALMA_DTYPE_FLOAT32);
  attn_run_case(&cases[2], ALMA_DTYPE_FLOAT64);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_shapes), cmocka_unit_test(test_conv_fused), cmocka_unit_test(test_residual_aliasing),
      cmocka_unit_test(test_not_fused),   cmocka_unit_test(test_gemm),       cmocka_unit_test(test_matmul),
      cmocka_unit_test(test_constant_nodes), cmocka_unit_test(test_fused_nodes),
      cmocka_unit_test(test_subgraph_graph), cmocka_unit_test(test_attention),
      cmocka_unit_test(test_buffers_reused), cmocka_unit_test(test_mem_layout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
