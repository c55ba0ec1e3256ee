/* INT8_STATIC, INT8_DYNAMIC, QLINEAR, BF16, FP16 and the ONNX writer, on small models built here
 * with the graph API and serialized by the writer itself (so every test also round-trips it):
 *   conv:   x [N,3,8,8] -> Conv 3x3 (bias) -> Relu -> Conv 1x1 (bias) -> GlobalAveragePool
 *           -> Flatten -> Gemm (transB, bias) -> y [N,5]
 *   linear: x [N,6] -> MatMul [6,4] -> Add bias -> Relu -> MatMul [4,3] -> y [N,3]
 *   qat:    a QDQ model as PyTorch exports quantization-aware training (for QLINEAR)
 *   pool:   x [N,3,8,8] -> Conv 3x3 -> Relu -> MaxPool 3x3/2 (pads 1) -> Conv 3x3 -> Relu
 *           -> MaxPool 2x2/2 -> Flatten -> Gemm -> y [N,5] (ResNet's stem, the digits CNN's head)
 *   old:    x [N,6] -> Slice-1 / Pad-2 / Clip-6 / TopK-1 / Dropout-10 -> MatMul -> y [N,3] (forms
 *           the int8 passes rewrite when they raise an old model's opset)
 * Converted outputs are compared with EAGER's on the float model (cosine similarity), graphs are
 * checked for the ops each pass must produce, and converted graphs are saved, reloaded and run
 * again (the same outputs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/model.h"
#include "graph/opset.h"
#include "ops/op.h"
#include "passes/quant.h"
#include "conversions/conversions.h"
#include "runtimes/runtime.h"
#include "runtimes/session.h"

/* ---- building models --------------------------------------------------------------------------- */

static uint64_t rng = 12345;
static double urand(void) {
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng >> 11) * 0x1p-53;
}
static float nrand(void) { return (float)(sqrt(-2 * log(urand() + 1e-300)) * cos(2 * M_PI * urand())); }

static int add_const(alma_graph *g, const char *name, alma_dtype dt, int rank, const int64_t *dims, float scale) {
  alma_tensor *t = alma__arena_alloc(g->arena, sizeof *t);
  assert_non_null(t);
  assert_int_equal(alma__tensor_alloc(t, dt, rank, dims), ALMA_OK);
  int64_t n = alma_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    if (dt == ALMA_DTYPE_FLOAT32) ((float *)t->data)[i] = nrand() * scale;
    else alma__set_i64(t->data, dt, i, (int64_t)(urand() * 4));
  }
  int v = alma__graph_add_value(g, name);
  g->values[v].init = t;
  g->values[v].dtype = dt;
  g->values[v].rank = rank;
  for (int d = 0; d < rank; d++) g->values[v].dims[d] = dims[d];
  return v;
}

static int add_input(alma_graph *g, const char *name, int rank, const int64_t *dims) {
  int v = alma__graph_add_value(g, name);
  g->values[v].is_input = 1;
  g->values[v].dtype = ALMA_DTYPE_FLOAT32;
  g->values[v].rank = rank;
  for (int d = 0; d < rank; d++) {
    g->values[v].dims[d] = dims[d];
    if (dims[d] < 0) g->values[v].dim_params[d] = "batch";
  }
  g->inputs = realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + 1));
  g->inputs[g->n_inputs++] = v;
  return v;
}

static int node(alma_graph *g, const char *op, const int *in, int nin, int out) {
  int i = alma__graph_add_node(g, op, "", op, in, nin, &out, 1);
  assert_true(i >= 0);
  return i;
}

static void set_output(alma_graph *g, int v, int rank, const int64_t *dims) {
  g->values[v].is_output = 1;
  g->values[v].dtype = ALMA_DTYPE_FLOAT32;
  g->values[v].rank = rank;
  for (int d = 0; d < rank; d++) {
    g->values[v].dims[d] = dims[d];
    if (dims[d] < 0) g->values[v].dim_params[d] = "batch";
  }
  g->outputs = realloc(g->outputs, sizeof(int) * (size_t)(g->n_outputs + 1));
  g->outputs[g->n_outputs++] = v;
}



/* Appends attribute x to node i (the array is copied into the graph's arena). */
static void push_attr(alma_graph *g, int i, alma_attr x) {
  alma_node *nd = &g->nodes[i];
  alma_attr *a = alma__arena_alloc(g->arena, sizeof(alma_attr) * (size_t)(nd->n_attrs + 1));
  if (nd->n_attrs) memcpy(a, nd->attrs, sizeof(alma_attr) * (size_t)nd->n_attrs);
  a[nd->n_attrs] = x;
  nd->attrs = a;
  nd->n_attrs++;
}

static void attr_ints(alma_graph *g, int i, const char *name, const int64_t *v, int n) {
  int64_t *c = alma__arena_alloc(g->arena, sizeof(int64_t) * (size_t)n);
  memcpy(c, v, sizeof(int64_t) * (size_t)n);
  push_attr(g, i, (alma_attr){.name = name, .type = ALMA_ATTR_INTS, .n = n, .ints = c});
}

static void attr_int(alma_graph *g, int i, const char *name, int64_t v) {
  push_attr(g, i, (alma_attr){.name = name, .type = ALMA_ATTR_INT, .i = v});
}

static void attr_float(alma_graph *g, int i, const char *name, float v) {
  push_attr(g, i, (alma_attr){.name = name, .type = ALMA_ATTR_FLOAT, .f = v});
}

static void attr_str(alma_graph *g, int i, const char *name, const char *s) {
  push_attr(g, i, (alma_attr){.name = name, .type = ALMA_ATTR_STRING, .s = s, .s_len = strlen(s)});
}

static alma_graph *new_graph(int64_t opset) {
  alma_graph *g = alma__graph_new(NULL);
  g->opsets = alma__arena_alloc(g->arena, sizeof(alma_opset_import));
  g->opsets[0].domain = "";
  g->opsets[0].version = opset;
  g->n_opsets = 1;
  g->name = "test";
  return g;
}

/* Serializes g with the writer and loads it as a model (parsing, resolution, inference). */
static alma_model *to_model(alma_graph *g) {
  uint8_t *bytes;
  size_t n;
  alma_onnx_meta meta = {.ir_version = 7};
  alma_status st = alma__onnx_serialize(g, &meta, &bytes, &n);
  if (st != ALMA_OK) fprintf(stderr, "save: %s\n", alma_last_error());
  assert_int_equal(st, ALMA_OK);
  alma__graph_free(g);
  alma_model *m = NULL;
  st = alma_model_load_from_memory(bytes, n, NULL, &m);
  if (st != ALMA_OK) fprintf(stderr, "load: %s\n", alma_last_error());
  assert_int_equal(st, ALMA_OK);
  free(bytes);
  return m;
}

/* v_in -> GlobalAveragePool -> Flatten -> Gemm(W3, B3, transB) -> the [N, 5] graph output. */
static void gap_gemm_head(alma_graph *g, int v_in, int gap, int flat, int y, int W3, int B3) {
  node(g, "GlobalAveragePool", &v_in, 1, gap);
  node(g, "Flatten", &gap, 1, flat);
  int in3[3] = {flat, W3, B3};
  int n3 = node(g, "Gemm", in3, 3, y);
  attr_int(g, n3, "transB", 1);
  int64_t yd[2] = {-1, 5};
  set_output(g, y, 2, yd);
}

/* conv_model; with tiny_input, x -> Mul(1e-12) first and the first Conv's bias ~ N(0, 1). */
static alma_model *conv_model_ex(int64_t opset, int tiny_input) {
  alma_graph *g = new_graph(opset);
  int64_t xd[4] = {-1, 3, 8, 8}, w1[4] = {4, 3, 3, 3}, b4[1] = {4}, w2[4] = {4, 4, 1, 1}, w3[2] = {5, 4}, b5[1] = {5};
  int x = add_input(g, "x", 4, xd);
  int K = tiny_input ? add_const(g, "k", ALMA_DTYPE_FLOAT32, 0, NULL, 0.0f) : -1;
  if (K >= 0) ((float *)g->values[K].init->data)[0] = 1e-12f;
  int W1 = add_const(g, "w1", ALMA_DTYPE_FLOAT32, 4, w1, 0.3f);
  int B1 = add_const(g, "b1", ALMA_DTYPE_FLOAT32, 1, b4, tiny_input ? 1.0f : 0.1f);
  int W2 = add_const(g, "w2", ALMA_DTYPE_FLOAT32, 4, w2, 0.5f), B2 = add_const(g, "b2", ALMA_DTYPE_FLOAT32, 1, b4, 0.1f);
  int W3 = add_const(g, "w3", ALMA_DTYPE_FLOAT32, 2, w3, 0.5f), B3 = add_const(g, "b3", ALMA_DTYPE_FLOAT32, 1, b5, 0.1f);
  const char *names[] = {"c1", "r1", "c2", "gap", "flat", "y", "xm"};
  int v[7];
  for (int i = 0; i < (K >= 0 ? 7 : 6); i++) v[i] = alma__graph_add_value(g, names[i]);
  if (K >= 0) {
    int im[2] = {x, K};
    node(g, "Mul", im, 2, v[6]);
    x = v[6];
  }
  int in1[3] = {x, W1, B1};
  int n1 = node(g, "Conv", in1, 3, v[0]);
  int64_t pads[4] = {1, 1, 1, 1};
  attr_ints(g, n1, "pads", pads, 4);
  node(g, "Relu", &v[0], 1, v[1]);
  int in2[3] = {v[1], W2, B2};
  node(g, "Conv", in2, 3, v[2]);
  gap_gemm_head(g, v[2], v[3], v[4], v[5], W3, B3);
  return to_model(g);
}

static alma_model *conv_model(int64_t opset) { return conv_model_ex(opset, 0); }

static alma_model *linear_model(int64_t opset) {
  alma_graph *g = new_graph(opset);
  int64_t xd[2] = {-1, 6}, w1[2] = {6, 4}, b1[1] = {4}, w2[2] = {4, 3};
  int x = add_input(g, "x", 2, xd);
  int W1 = add_const(g, "w1", ALMA_DTYPE_FLOAT32, 2, w1, 0.5f), B1 = add_const(g, "b1", ALMA_DTYPE_FLOAT32, 1, b1, 0.1f);
  int W2 = add_const(g, "w2", ALMA_DTYPE_FLOAT32, 2, w2, 0.5f);
  const char *names[] = {"m1", "a1", "r1", "y"};
  int v[4];
  for (int i = 0; i < 4; i++) v[i] = alma__graph_add_value(g, names[i]);
  int i1[2] = {x, W1}, i2[2] = {v[0], B1}, i3[2] = {v[2], W2};
  node(g, "MatMul", i1, 2, v[0]);
  node(g, "Add", i2, 2, v[1]);
  node(g, "Relu", &v[1], 1, v[2]);
  node(g, "MatMul", i3, 2, v[3]);
  int64_t yd[2] = {-1, 3};
  set_output(g, v[3], 2, yd);
  return to_model(g);
}

/* x -> Conv -> Relu (r1) -> Conv (c2); a = c2 + r1 (a residual, requantized); Relu (r2); Conv (c3);
 * a2 = c3 + r2 (a residual whose sum stays float); a2 + constant (a bias-like Add);
 * GlobalAveragePool -> Flatten -> Gemm. */
static alma_model *residual_model(void) {
  alma_graph *g = new_graph(13);
  int64_t xd[4] = {-1, 3, 8, 8}, w1[4] = {4, 3, 3, 3}, b4[1] = {4}, w2[4] = {4, 4, 1, 1}, w3[2] = {5, 4}, b5[1] = {5};
  int64_t cd[4] = {1, 4, 1, 1};
  int x = add_input(g, "x", 4, xd);
  int W1 = add_const(g, "w1", ALMA_DTYPE_FLOAT32, 4, w1, 0.3f), B1 = add_const(g, "b1", ALMA_DTYPE_FLOAT32, 1, b4, 0.1f);
  int W2 = add_const(g, "w2", ALMA_DTYPE_FLOAT32, 4, w2, 0.5f), W4 = add_const(g, "w4", ALMA_DTYPE_FLOAT32, 4, w2, 0.5f);
  int W3 = add_const(g, "w3", ALMA_DTYPE_FLOAT32, 2, w3, 0.5f), B3 = add_const(g, "b3", ALMA_DTYPE_FLOAT32, 1, b5, 0.1f);
  int C = add_const(g, "shift", ALMA_DTYPE_FLOAT32, 4, cd, 0.2f);
  const char *names[] = {"c1", "r1", "c2", "a", "r2", "c3", "a2", "gap", "flat", "y", "a3"};
  int v[11];
  for (int i = 0; i < 11; i++) v[i] = alma__graph_add_value(g, names[i]);
  int in1[3] = {x, W1, B1}, in2[2] = {v[1], W2}, ad[2] = {v[2], v[1]}, in4[2] = {v[4], W4}, ad2[2] = {v[5], v[4]};
  int ad3[2] = {v[6], C};
  int n1 = node(g, "Conv", in1, 3, v[0]);
  int64_t pads[4] = {1, 1, 1, 1};
  attr_ints(g, n1, "pads", pads, 4);
  node(g, "Relu", &v[0], 1, v[1]);
  node(g, "Conv", in2, 2, v[2]);
  node(g, "Add", ad, 2, v[3]);
  node(g, "Relu", &v[3], 1, v[4]);
  node(g, "Conv", in4, 2, v[5]);
  node(g, "Add", ad2, 2, v[6]);
  node(g, "Add", ad3, 2, v[10]);
  gap_gemm_head(g, v[10], v[7], v[8], v[9], W3, B3);
  return to_model(g);
}

/* The pool model (see the top). excl: the first MaxPool's Indices and the second MaxPool's output
 * are graph outputs too (outputs y, indices, p2), which leave both MaxPools as they were. The
 * weights are the same for every call (a seed of their own). */
static alma_model *pool_model(int64_t opset, int excl) {
  uint64_t saved = rng;
  rng = 777;
  alma_graph *g = new_graph(opset);
  int64_t xd[4] = {-1, 3, 8, 8}, w1[4] = {8, 3, 3, 3}, w2[4] = {8, 8, 3, 3}, b8[1] = {8}, w3[2] = {5, 32}, b5[1] = {5};
  int x = add_input(g, "x", 4, xd);
  int W1 = add_const(g, "w1", ALMA_DTYPE_FLOAT32, 4, w1, 0.3f), B1 = add_const(g, "b1", ALMA_DTYPE_FLOAT32, 1, b8, 0.1f);
  int W2 = add_const(g, "w2", ALMA_DTYPE_FLOAT32, 4, w2, 0.2f), B2 = add_const(g, "b2", ALMA_DTYPE_FLOAT32, 1, b8, 0.1f);
  int W3 = add_const(g, "w3", ALMA_DTYPE_FLOAT32, 2, w3, 0.3f), B3 = add_const(g, "b3", ALMA_DTYPE_FLOAT32, 1, b5, 0.1f);
  const char *names[] = {"c1", "r1", "p1", "c2", "r2", "p2", "flat", "y", "indices"};
  int v[9];
  for (int i = 0; i < 9; i++) v[i] = alma__graph_add_value(g, names[i]);
  int64_t pads[4] = {1, 1, 1, 1}, k3[2] = {3, 3}, k2[2] = {2, 2}, s2[2] = {2, 2};
  int in1[3] = {x, W1, B1}, in2[3] = {v[2], W2, B2}, in3[3] = {v[6], W3, B3};
  attr_ints(g, node(g, "Conv", in1, 3, v[0]), "pads", pads, 4);
  node(g, "Relu", &v[0], 1, v[1]);
  int p1out[2] = {v[2], v[8]};
  int p1 = alma__graph_add_node(g, "MaxPool", "", "MaxPool", &v[1], 1, p1out, excl ? 2 : 1);
  assert_true(p1 >= 0);
  attr_ints(g, p1, "kernel_shape", k3, 2);
  attr_ints(g, p1, "strides", s2, 2);
  attr_ints(g, p1, "pads", pads, 4);
  attr_ints(g, node(g, "Conv", in2, 3, v[3]), "pads", pads, 4);
  node(g, "Relu", &v[3], 1, v[4]);
  int p2 = node(g, "MaxPool", &v[4], 1, v[5]);
  attr_ints(g, p2, "kernel_shape", k2, 2);
  attr_ints(g, p2, "strides", s2, 2);
  node(g, "Flatten", &v[5], 1, v[6]);
  attr_int(g, node(g, "Gemm", in3, 3, v[7]), "transB", 1);
  int64_t yd[2] = {-1, 5}, pd[4] = {-1, 8, 2, 2};
  set_output(g, v[7], 2, yd);
  if (excl) {
    int64_t id[4] = {-1, 8, 4, 4};
    set_output(g, v[8], 4, id);
    g->values[v[8]].dtype = ALMA_DTYPE_INT64;
    set_output(g, v[5], 4, pd);
  }
  rng = saved;
  return to_model(g);
}

/* ---- running --------------------------------------------------------------------------------- */

static alma_tensor batch(int rank, const int64_t *dims) {
  alma_tensor t;
  assert_int_equal(alma__tensor_alloc(&t, ALMA_DTYPE_FLOAT32, rank, dims), ALMA_OK);
  for (int64_t i = 0; i < alma_tensor_numel(&t); i++) ((float *)t.data)[i] = nrand();
  return t;
}

typedef struct {
  alma_tensor calib[8];
  alma_tensor x;
} data;

static void make_data(data *d, int conv) {
  int64_t cd[4] = {4, 3, 8, 8}, ld[2] = {16, 6}, xd4[4] = {8, 3, 8, 8}, xd2[2] = {32, 6};
  for (int b = 0; b < 8; b++) d->calib[b] = conv ? batch(4, cd) : batch(2, ld);
  d->x = conv ? batch(4, xd4) : batch(2, xd2);
}

static void free_data(data *d) {
  for (int b = 0; b < 8; b++) alma_tensor_free_data(&d->calib[b]);
  alma_tensor_free_data(&d->x);
}

static alma_status run_conv(const alma_model *m, const char *conv, const data *d, const char *calibrator, int use_calib,
                            alma_tensor *y, alma_session **keep) {
  alma_session_options so;
  alma_session_options_init(&so);
  if (use_calib) {
    so.calibration_data = d->calib;
    so.n_calibration_batches = 8;
  }
  so.calibrator = calibrator;
  alma_session *s = NULL;
  alma_status st = alma_session_create(m, conv, &so, &s);
  if (st != ALMA_OK) return st;
  st = alma_session_run(s, &d->x, 1, y, 1);
  if (keep) *keep = s;
  else alma_session_free(s);
  return st;
}

static double cosine(const alma_tensor *a, const alma_tensor *b) {
  assert_int_equal(alma_tensor_numel(a), alma_tensor_numel(b));
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < alma_tensor_numel(a); i++) {
    double x = ((const float *)a->data)[i], y = ((const float *)b->data)[i];
    ab += x * y;
    aa += x * x;
    bb += y * y;
  }
  return ab / sqrt(aa * bb);
}


static int count_op(const alma_session *s, const char *op) {
  const alma_graph *g = alma__session_graph(s);
  int c = 0;
  for (int i = 0; i < g->n_nodes; i++) c += !strcmp(g->nodes[i].op_type, op);
  return c;
}

/* Saves the session's graph, reloads it, runs it on EAGER: the outputs must equal y exactly. */
static void check_saved(const alma_session *s, const data *d, const alma_tensor *y) {
  char path[] = "/tmp/alma_quant_test_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  alma_status st = alma_session_save(s, path);
  if (st != ALMA_OK) fprintf(stderr, "save: %s\n", alma_last_error());
  assert_int_equal(st, ALMA_OK);
  alma_model *m2 = NULL;
  st = alma_model_load(path, &m2);
  if (st != ALMA_OK) fprintf(stderr, "reload: %s\n", alma_last_error());
  assert_int_equal(st, ALMA_OK);
  remove(path);
  alma_tensor y2;
  assert_int_equal(run_conv(m2, "EAGER", d, NULL, 0, &y2, NULL), ALMA_OK);
  assert_int_equal(alma_tensor_numel(&y2), alma_tensor_numel(y));
  assert_memory_equal(y2.data, y->data, y->nbytes);
  assert_int_equal(y2.dtype, ALMA_DTYPE_FLOAT32);
  alma_tensor_free_data(&y2);
  alma_model_free(m2);
}



/* Older forms whose attributes became inputs, which the int8 passes rewrite when they raise the
 * opset: x [N, 6] -> OP -> o [N, C] (a graph output: float, no quantization on its path) ->
 * MatMul [C, 3] -> y (quantized); TopK's indices a third output. */
enum { OLD_SLICE, OLD_PAD_CONST, OLD_PAD_REFLECT, OLD_CLIP_MIN, OLD_CLIP_MAX, OLD_CLIP_BOTH, OLD_TOPK, OLD_DROPOUT,
       OLD_N };
static const struct {
  const char *what, *op;
  int opset, cols;
  int since_13, inputs_13; /* the node once raised to 13 */
} olds[OLD_N] = {
    {"Slice-1 (starts 0,1; ends 1000,-1; default axes)", "Slice", 9, 4, 13, 3},
    {"Pad-2 constant 0.5", "Pad", 9, 8, 13, 3},
    {"Pad-2 reflect", "Pad", 9, 8, 13, 2},
    {"Clip-6 min", "Clip", 9, 6, 13, 2},
    {"Clip-6 max", "Clip", 9, 6, 13, 3},
    {"Clip-6 min and max", "Clip", 9, 6, 13, 3},
    {"TopK-1 k 4", "TopK", 9, 4, 11, 2},
    {"Dropout-10 ratio 0.3", "Dropout", 10, 6, 13, 2},
};

static alma_model *old_op_model(int kind) {
  alma_graph *g = new_graph(olds[kind].opset);
  int64_t xd[2] = {-1, 6}, wd[2] = {olds[kind].cols, 3}, od[2] = {-1, olds[kind].cols}, yd[2] = {-1, 3};
  int x = add_input(g, "x", 2, xd);
  int W = add_const(g, "w", ALMA_DTYPE_FLOAT32, 2, wd, 0.5f);
  int o = alma__graph_add_value(g, "o"), y = alma__graph_add_value(g, "y"), idx = alma__graph_add_value(g, "idx");
  int outs[2] = {o, idx};
  int n = alma__graph_add_node(g, olds[kind].op, "", "/old", &x, 1, outs, kind == OLD_TOPK ? 2 : 1);
  assert_true(n >= 0);
  if (kind == OLD_SLICE) {
    int64_t st[2] = {0, 1}, en[2] = {1000, -1};
    attr_ints(g, n, "starts", st, 2);
    attr_ints(g, n, "ends", en, 2);
  } else if (kind == OLD_PAD_CONST || kind == OLD_PAD_REFLECT) {
    int64_t pc[4] = {0, 1, 0, 1}, pr[4] = {0, 2, 0, 0}; /* [x1_begin, x2_begin, x1_end, x2_end] */
    attr_ints(g, n, "pads", kind == OLD_PAD_CONST ? pc : pr, 4);
    attr_float(g, n, "value", kind == OLD_PAD_CONST ? 0.5f : 0.7f); /* reflect reads no value */
    if (kind == OLD_PAD_REFLECT) attr_str(g, n, "mode", "reflect");
  } else if (kind == OLD_CLIP_MIN || kind == OLD_CLIP_MAX || kind == OLD_CLIP_BOTH) {
    if (kind != OLD_CLIP_MAX) attr_float(g, n, "min", -0.3f);
    if (kind != OLD_CLIP_MIN) attr_float(g, n, "max", 0.4f);
  } else if (kind == OLD_TOPK) {
    attr_int(g, n, "k", 4);
  } else {
    attr_float(g, n, "ratio", 0.3f);
  }
  int in[2] = {o, W};
  node(g, "MatMul", in, 2, y);
  set_output(g, y, 2, yd);
  set_output(g, o, 2, od);
  if (kind == OLD_TOPK) {
    set_output(g, idx, 2, od);
    g->values[idx].dtype = ALMA_DTYPE_INT64;
  }
  return to_model(g);
}

/* Runs m under conv on d->x: every output into out (n of them). */
static alma_status run_all(const alma_model *m, const char *conv, const data *d, alma_tensor *out, int n,
                           alma_session **keep) {
  alma_session_options so;
  alma_session_options_init(&so);
  so.calibration_data = d->calib;
  so.n_calibration_batches = 8;
  alma_session *s = NULL;
  alma_status st = alma_session_create(m, conv, &so, &s);
  if (st != ALMA_OK) return st;
  st = alma_session_run(s, &d->x, 1, out, n);
  if (keep) *keep = s;
  else alma_session_free(s);
  return st;
}

static const alma_node *find_op(const alma_graph *g, const char *op) {
  for (int i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i].dead && !strcmp(g->nodes[i].op_type, op)) return &g->nodes[i];
  return NULL;
}

/* Input k of n: a constant's float value (k < 0 or an empty input: NAN). */
static double const_input(const alma_graph *g, const alma_node *n, int k) {
  if (k >= n->n_inputs || n->inputs[k] < 0 || !g->values[n->inputs[k]].init) return NAN;
  const alma_tensor *t = g->values[n->inputs[k]].init;
  return alma__get_f64(t->data, t->dtype, 0);
}

/* ---- tests ------------------------------------------------------------------------------------- */

static void test_writer_round_trip(void **state) {
  /* a model written and read back hashes the same (structure and weights) */
  alma_model *m = conv_model(13);
  uint8_t *bytes;
  size_t n;
  assert_int_equal(alma__onnx_serialize(m->graph, &m->meta, &bytes, &n), ALMA_OK);
  alma_model *m2 = NULL;
  assert_int_equal(alma_model_load_from_memory(bytes, n, NULL, &m2), ALMA_OK);
  assert_string_equal(alma_model_hash(m), alma_model_hash(m2));
  assert_string_equal(alma_model_input_dim_param(m2, 0, 0), "batch");
  assert_int_equal(alma_model_output_dtype(m2, 0), ALMA_DTYPE_FLOAT32);
  free(bytes);
  alma_model_free(m2);
  alma_model_free(m);
  assert_int_equal(alma__onnx_save(NULL, NULL, "/tmp/x.onnx"), ALMA_ERR_INVALID_ARG);
  assert_int_equal(alma_session_save(NULL, "/tmp/x.onnx"), ALMA_ERR_INVALID_ARG);
}

static void test_calibrators(void **state) {
  alma__calibrator c;
  assert_int_equal(alma__calibrator_parse(NULL, &c), ALMA_OK);
  assert_int_equal(c, ALMA__CALIB_MINMAX);
  assert_int_equal(alma__calibrator_parse("Entropy", &c), ALMA_OK);
  assert_int_equal(c, ALMA__CALIB_ENTROPY);
  assert_int_equal(alma__calibrator_parse("percentile", &c), ALMA_OK);
  assert_int_equal(alma__calibrator_parse("kmeans", &c), ALMA_ERR_INVALID_ARG);
  assert_non_null(strstr(alma_last_error(), "kmeans"));
  /* percentile: 9999 values in bin 0..99, one outlier in the last bin */
  uint64_t h[1000] = {0};
  for (int i = 0; i < 100; i++) h[i] = 100;
  h[99] -= 1;
  h[999] = 1;
  double t = alma__calib_percentile(h, 1000, 10.0, 0.9999);
  assert_true(t > 0.99 && t < 1.01);
  assert_true(alma__calib_percentile(h, 1000, 10.0, 1.0) > 9.99);
  /* entropy: a smooth bell over the first half plus a thin far tail: the threshold drops the tail
   * but keeps the bell */
  uint64_t e[2048] = {0};
  for (int i = 0; i < 1024; i++) e[i] = (uint64_t)(1e6 * exp(-0.5 * (i / 300.0) * (i / 300.0)));
  for (int i = 1900; i < 2048; i++) e[i] = 1;
  double te = alma__calib_entropy(e, 2048, 2048.0, 128);
  assert_true(te > 600 && te < 1900);
}

static void test_static(void **state) {
  alma_model *m = conv_model(13);
  data d;
  make_data(&d, 1);
  alma_tensor ref, y;
  assert_int_equal(run_conv(m, "EAGER", &d, NULL, 0, &ref, NULL), ALMA_OK);
  const char *cals[] = {"minmax", "percentile", "entropy"};
  for (int k = 0; k < 3; k++) {
    alma_session *s = NULL;
    alma_status st = run_conv(m, "INT8_STATIC+EAGER", &d, cals[k], 1, &y, &s);
    if (st != ALMA_OK) fprintf(stderr, "%s: %s\n", cals[k], alma_last_error());
    assert_int_equal(st, ALMA_OK);
    double c = cosine(&y, &ref);
    if (c < 0.995) fprintf(stderr, "%s cosine %f\n", cals[k], c);
    assert_true(c > 0.995);
    /* x, relu output, flatten output (after GlobalAveragePool, which writes float: the pair stays
     * after the Flatten); three weights, two Conv biases and the Gemm's */
    assert_int_equal(count_op(s, "QuantizeLinear"), 3);
    assert_int_equal(count_op(s, "DequantizeLinear"), 3 + 3 + 3);
    if (k == 0) check_saved(s, &d, &y);
    alma_session_free(s);
    alma_tensor_free_data(&y);
  }
  /* without data: random calibration (a warning), still a valid graph */
  assert_int_equal(run_conv(m, "INT8_STATIC+EAGER", &d, NULL, 0, &y, NULL), ALMA_OK);
  alma_tensor_free_data(&y);
  /* QLINEAR: the first Conv (+Relu, quantized by the second Conv's input) becomes QLinearConv;
   * the second feeds GlobalAveragePool in float and stays QDQ */
  alma_session *s = NULL;
  assert_int_equal(run_conv(m, "INT8_STATIC+QLINEAR+EAGER", &d, NULL, 1, &y, &s), ALMA_OK);
  assert_int_equal(count_op(s, "QLinearConv"), 1);
  assert_int_equal(count_op(s, "Relu"), 0);
  assert_int_equal(count_op(s, "Conv"), 1);
  alma_tensor yq;
  assert_int_equal(run_conv(m, "INT8_STATIC+EAGER", &d, NULL, 1, &yq, NULL), ALMA_OK);
  assert_true(cosine(&y, &yq) > 0.9999);
  check_saved(s, &d, &y);
  alma_session_free(s);
  alma_tensor_free_data(&y);
  alma_tensor_free_data(&yq);
  /* errors: calibrator name, calibration batches of the wrong arity */
  assert_int_equal(run_conv(m, "INT8_STATIC+EAGER", &d, "median", 1, &y, NULL), ALMA_ERR_INVALID_ARG);
  assert_non_null(strstr(alma_last_error(), "median"));
  alma_session_options so;
  alma_session_options_init(&so);
  so.n_calibration_batches = 1;
  alma_session *bad = NULL;
  /* a [4,6] batch for a [N,3,8,8] input */
  int64_t wrong[2] = {4, 6};
  alma_tensor w = batch(2, wrong);
  so.calibration_data = &w;
  assert_int_not_equal(alma_session_create(m, "INT8_STATIC+EAGER", &so, &bad), ALMA_OK);
  assert_non_null(strstr(alma_last_error(), "calibration batch 1"));
  assert_null(bad);
  alma_tensor_free_data(&w);
  alma_tensor_free_data(&ref);
  free_data(&d);
  alma_model_free(m);
}

/* x -> Mul(1e-12) -> Conv 3x3 (bias ~ N(0, 1)) -> Relu -> Conv 1x1 (bias) -> GlobalAveragePool ->
 * Flatten -> Gemm: the first Conv's input spans about 1e-11, so its bias over x_scale * w_scale
 * is far beyond int32 (a layer fed by a nearly silent branch); that bias must stay float32, or
 * it is clamped to nothing and the output is the other biases' alone; and QLINEAR must not turn
 * that Conv into a QLinearConv (whose bias is int32). */
static void test_static_bias_range(void **state) {
  (void)state;
  alma_model *m = conv_model_ex(13, 1);
  data d;
  make_data(&d, 1);
  alma_tensor ref, y;
  assert_int_equal(run_conv(m, "EAGER", &d, NULL, 0, &ref, NULL), ALMA_OK);
  alma_session *s = NULL;
  assert_int_equal(run_conv(m, "INT8_STATIC+EAGER", &d, NULL, 1, &y, &s), ALMA_OK);
  double c = cosine(&y, &ref);
  if (c < 0.995) fprintf(stderr, "tiny-input conv: cosine %f\n", c);
  assert_true(c > 0.995);
  /* three weights and two biases (the second Conv's, the Gemm's) dequantized; b1 read as float */
  assert_int_equal(count_op(s, "DequantizeLinear"), 3 + 3 + 2);
  const alma_graph *sg = alma__session_graph(s);
  int seen = 0;
  for (int i = 0; i < sg->n_nodes; i++)
    if (!strcmp(sg->nodes[i].op_type, "Conv") && sg->nodes[i].n_inputs == 3 && sg->values[sg->nodes[i].inputs[2]].init &&
        sg->values[sg->nodes[i].inputs[2]].init->dtype == ALMA_DTYPE_FLOAT32)
      seen++;
  assert_int_equal(seen, 1);
  check_saved(s, &d, &y);
  alma_session_free(s);
  alma_tensor_free_data(&y);
  /* QLINEAR leaves that Conv in QDQ form (a QLinearConv's bias is int32) */
  s = NULL;
  assert_int_equal(run_conv(m, "INT8_STATIC+QLINEAR+EAGER", &d, NULL, 1, &y, &s), ALMA_OK);
  c = cosine(&y, &ref);
  if (c < 0.995) fprintf(stderr, "tiny-input conv, QLINEAR: cosine %f\n", c);
  assert_true(c > 0.995);
  assert_int_equal(count_op(s, "QLinearConv"), 0);
  alma_session_free(s);
  alma_tensor_free_data(&y);
  alma_tensor_free_data(&ref);
  free_data(&d);
  alma_model_free(m);
}

/* The residual Add whose sum is requantized (through Relu, by the next Conv) reads both inputs
 * through QuantizeLinear/DequantizeLinear pairs; one whose sum stays float, and an Add of a
 * constant, are left alone. */
static void test_static_residual(void **state) {
  alma_model *m = residual_model();
  data d;
  make_data(&d, 1);
  alma_tensor ref, y;
  assert_int_equal(run_conv(m, "EAGER", &d, NULL, 0, &ref, NULL), ALMA_OK);
  alma_session *s = NULL;
  assert_int_equal(run_conv(m, "INT8_STATIC+EAGER", &d, NULL, 1, &y, &s), ALMA_OK);
  assert_true(cosine(&y, &ref) > 0.995);
  const alma_graph *g = alma__session_graph(s);
  int n_add = 0, n_qadd = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    if (strcmp(n->op_type, "Add")) continue;
    n_add++;
    int dq = 0;
    for (int k = 0; k < 2; k++) {
      int pi = g->values[n->inputs[k]].producer;
      dq += pi >= 0 && !strcmp(g->nodes[pi].op_type, "DequantizeLinear");
    }
    if (dq == 2) n_qadd++;
    else assert_int_equal(dq, 0); /* the float-sum and constant Adds: untouched */
  }
  assert_int_equal(n_add, 3);
  assert_int_equal(n_qadd, 1);
  /* x, r1 (Conv input and residual), c2 (residual), r2, flat */
  assert_int_equal(count_op(s, "QuantizeLinear"), 5);
  check_saved(s, &d, &y);
  alma_session_free(s);
  alma_tensor_free_data(&y);
  /* and on DNNL, where the pattern runs as an int8 add: the same result within a few steps */
  if (alma__runtime_find("DNNL")) {
    alma_tensor yd, ye;
    assert_int_equal(run_conv(m, "INT8_STATIC+EAGER", &d, NULL, 1, &ye, NULL), ALMA_OK);
    assert_int_equal(run_conv(m, "INT8_STATIC+DNNL", &d, NULL, 1, &yd, NULL), ALMA_OK);
    assert_true(cosine(&yd, &ye) > 0.999);
    alma_tensor_free_data(&yd);
    alma_tensor_free_data(&ye);
  }
  alma_tensor_free_data(&ref);
  free_data(&d);
  alma_model_free(m);
}

/* Producer of value v if it is op (else -1). */
static int producer_op(const alma_graph *g, int v, const char *op) {
  int p = v >= 0 ? g->values[v].producer : -1;
  return p >= 0 && !strcmp(g->nodes[p].op_type, op) ? p : -1;
}

/* The MaxPool / Flatten nodes of g reading a DequantizeLinear: each writes only to a
 * QuantizeLinear with the very scale and zero point of that DequantizeLinear (its input's
 * quantization, not one calibrated for its output). Returns how many. */
static int count_passthroughs(const alma_graph *g) {
  int n = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *nd = &g->nodes[i];
    if (strcmp(nd->op_type, "MaxPool") && strcmp(nd->op_type, "Flatten")) continue;
    int dq = producer_op(g, nd->inputs[0], "DequantizeLinear");
    if (dq < 0) continue;
    int readers = 0;
    for (int j = 0; j < g->n_nodes; j++)
      for (int k = 0; k < g->nodes[j].n_inputs; k++) {
        if (g->nodes[j].inputs[k] != nd->outputs[0]) continue;
        readers++;
        assert_string_equal(g->nodes[j].op_type, "QuantizeLinear");
        assert_int_equal(g->nodes[j].inputs[1], g->nodes[dq].inputs[1]);
        assert_int_equal(g->nodes[j].inputs[2], g->nodes[dq].inputs[2]);
      }
    assert_int_equal(readers, 1);
    n++;
  }
  return n;
}

/* MaxPool and Flatten between quantized nodes run between two pairs of one quantization:
 * DQ -> Conv -> Relu -> Q -> DQ -> MaxPool -> Q -> DQ -> Conv ..., as ONNX Runtime's QDQ
 * quantizer writes them; runtimes with int8 kernels then pool the 8-bit values. Checked: the
 * structure, accuracy against fp32, the saved graph, QLINEAR (both convolutions now end in a
 * QuantizeLinear), the int8 runtimes against EAGER's evaluation of the same graph, and the
 * cases left as they were (Indices used, the pooled value a graph output). */
static void test_static_maxpool(void **state) {
  for (int opset = 11; opset <= 13; opset += 2) {
    alma_model *m = pool_model(opset, 0);
    data d;
    make_data(&d, 1);
    alma_tensor ref, y, yq;
    assert_int_equal(run_conv(m, "EAGER", &d, NULL, 0, &ref, NULL), ALMA_OK);
    alma_session *s = NULL;
    assert_int_equal(run_conv(m, "INT8_STATIC+EAGER", &d, NULL, 1, &y, &s), ALMA_OK);
    double c = cosine(&y, &ref);
    if (c < 0.999) fprintf(stderr, "opset %d: cosine %f\n", opset, c);
    assert_true(c > 0.999);
    const alma_graph *g = alma__session_graph(s);
    assert_int_equal(count_passthroughs(g), 3); /* both MaxPools and the Flatten */
    /* calibrated: x, r1, r2; shared: p1 (r1's), p2 and flat (r2's) */
    assert_int_equal(count_op(s, "QuantizeLinear"), 6);
    assert_int_equal(count_op(s, "DequantizeLinear"), 6 + 3 + 3);
    check_saved(s, &d, &y);
    alma_session_free(s);
    /* QLINEAR: each Conv -> Relu -> Q is a QLinearConv now; the same results within a step */
    s = NULL;
    assert_int_equal(run_conv(m, "INT8_STATIC+QLINEAR+EAGER", &d, NULL, 1, &yq, &s), ALMA_OK);
    assert_int_equal(count_op(s, "QLinearConv"), 2);
    assert_true(cosine(&yq, &y) > 0.9999);
    check_saved(s, &d, &yq);
    alma_session_free(s);
    alma_tensor_free_data(&yq);
    /* int8 runtimes on the same graph: XNNPACK within a step of EAGER; DNNL looser, as in
     * test_static_residual (on CPUs without VNNI it quantizes some sources to 7 bits, see
     * docs/quantization.md) */
    const char *rts[] = {"XNNPACK", "DNNL"};
    const double min_cos[] = {0.9999, 0.999};
    for (int k = 0; k < 2; k++) {
      if (!alma__runtime_find(rts[k])) continue;
      char conv[64];
      snprintf(conv, sizeof conv, "INT8_STATIC+%s", rts[k]);
      alma_status st = run_conv(m, conv, &d, NULL, 1, &yq, NULL);
      if (st == ALMA_ERR_UNAVAILABLE) continue;
      assert_int_equal(st, ALMA_OK);
      c = cosine(&yq, &y);
      if (c < min_cos[k]) fprintf(stderr, "%s opset %d: cosine %f against INT8_STATIC+EAGER\n", rts[k], opset, c);
      assert_true(c > min_cos[k]);
      alma_tensor_free_data(&yq);
    }
    alma_tensor_free_data(&y);
    alma_tensor_free_data(&ref);
    free_data(&d);
    alma_model_free(m);
  }
  /* Indices used, the pooled value a graph output: both MaxPools stay float, their outputs
   * calibrated for their readers as before (the Flatten still shares its input's pair). That is
   * the graph INT8_STATIC wrote before MaxPool was put between pairs, and y must be bit for bit
   * the same as with the pairs, whatever the calibrator: the pairs take the pooled values' range,
   * and max commutes with that quantization, clipping included. */
  alma_model *m = pool_model(13, 0), *mx = pool_model(13, 1);
  data d;
  make_data(&d, 1);
  alma_session_options so;
  alma_session_options_init(&so);
  so.calibration_data = d.calib;
  so.n_calibration_batches = 8;
  const char *cals[] = {"minmax", "percentile", "entropy"};
  for (int k = 0; k < 3; k++) {
    so.calibrator = cals[k];
    alma_session *s = NULL;
    assert_int_equal(alma_session_create(mx, "INT8_STATIC+EAGER", &so, &s), ALMA_OK);
    const alma_graph *g = alma__session_graph(s);
    assert_int_equal(count_passthroughs(g), 1);
    for (int i = 0; i < g->n_nodes; i++)
      if (!strcmp(g->nodes[i].op_type, "MaxPool")) assert_int_equal(producer_op(g, g->nodes[i].inputs[0], "Relu") >= 0, 1);
    /* x, p1, p2 calibrated; flat shares p2's */
    assert_int_equal(count_op(s, "QuantizeLinear"), 4);
    alma_tensor out[3], y;
    assert_int_equal(alma_session_run(s, &d.x, 1, out, 3), ALMA_OK);
    assert_int_equal(out[1].dtype, ALMA_DTYPE_INT64);
    alma_session_free(s);
    assert_int_equal(run_conv(m, "INT8_STATIC+EAGER", &d, cals[k], 1, &y, NULL), ALMA_OK);
    assert_int_equal(y.nbytes, out[0].nbytes);
    assert_memory_equal(y.data, out[0].data, y.nbytes);
    alma_tensor_free_data(&y);
    for (int j = 0; j < 3; j++) alma_tensor_free_data(&out[j]);
  }
  free_data(&d);
  alma_model_free(m);
  alma_model_free(mx);
}

/* x [N, 6] or [N, 2, 6] -> MatMul -> Softmax (opset 9: axis 1, coercing to 2-D) -> y. */
static alma_model *softmax9_model(int rank3) {
  alma_graph *g = new_graph(9);
  int64_t xd[3] = {-1, 2, 6}, xd2[2] = {-1, 6}, w1[2] = {6, 3};
  int x = rank3 ? add_input(g, "x", 3, xd) : add_input(g, "x", 2, xd2);
  int W1 = add_const(g, "w1", ALMA_DTYPE_FLOAT32, 2, w1, 0.5f);
  int m1 = alma__graph_add_value(g, "m1"), y = alma__graph_add_value(g, "y");
  int i1[2] = {x, W1};
  node(g, "MatMul", i1, 2, m1);
  node(g, "Softmax", &m1, 1, y);
  int64_t yd[3] = {-1, 2, 3}, yd2[2] = {-1, 3};
  if (rank3) set_output(g, y, 3, yd);
  else set_output(g, y, 2, yd2);
  return to_model(g);
}

static void test_static_opset_softmax(void **state) {
  /* Softmax-1 over the last axis (rank 2, axis 1) reads as Softmax-13: raised to 13; over axis 1 of
   * a rank-3 tensor it normalizes two axes, which 13 cannot say: raised only to 10 */
  for (int rank3 = 0; rank3 < 2; rank3++) {
    alma_model *m = softmax9_model(rank3);
    alma_session *s = NULL;
    alma_status st = alma_session_create(m, "INT8_STATIC+EAGER", NULL, &s);
    if (st != ALMA_OK) fprintf(stderr, "%s\n", alma_last_error());
    assert_int_equal(st, ALMA_OK);
    assert_int_equal(alma__graph_opset(alma__session_graph(s), ""), rank3 ? 10 : 13);
    alma_session_free(s);
    alma_model_free(m);
  }
}

static void test_static_opset(void **state) {
  /* opsets 9 and 11: raised to 13 (every node reads the same there), per-axis weight scales */
  data d;
  make_data(&d, 1);
  for (int64_t opset = 9; opset <= 11; opset += 2) {
    alma_model *m = conv_model(opset);
    alma_tensor ref, y;
    assert_int_equal(run_conv(m, "EAGER", &d, NULL, 0, &ref, NULL), ALMA_OK);
    static const char *convs[] = {"INT8_STATIC+EAGER", "INT8_DYNAMIC+EAGER"};
    for (int c = 0; c < 2; c++) {
      alma_session *s = NULL;
      alma_status st = run_conv(m, convs[c], &d, NULL, c == 0, &y, &s);
      if (st != ALMA_OK) fprintf(stderr, "%s\n", alma_last_error());
      assert_int_equal(st, ALMA_OK);
      assert_true(cosine(&y, &ref) > 0.99);
      const alma_graph *g = alma__session_graph(s);
      assert_int_equal(alma__graph_opset(g, ""), 13);
      int per_axis = 0;
      for (int i = 0; i < g->n_nodes; i++)
        per_axis += !strcmp(g->nodes[i].op_type, "DequantizeLinear") && alma__node_attr(&g->nodes[i], "axis");
      if (c == 0) assert_true(per_axis > 0);
      alma_session_free(s);
      alma_tensor_free_data(&y);
    }
    alma_tensor_free_data(&ref);
    alma_model_free(m);
  }
  free_data(&d);
  /* opset 7 with a Dropout-7 whose mask is read (the data's type; bool from 10): not raisable;
   * the error names the node */
  alma_graph *g = new_graph(7);
  int64_t xd[2] = {-1, 6}, wd[2] = {6, 3}, yd[2] = {-1, 3};
  int x = add_input(g, "x", 2, xd), W = add_const(g, "w", ALMA_DTYPE_FLOAT32, 2, wd, 0.5f);
  int outs[2] = {alma__graph_add_value(g, "o"), alma__graph_add_value(g, "mask")}, y = alma__graph_add_value(g, "y");
  assert_true(alma__graph_add_node(g, "Dropout", "", "/Dropout", &x, 1, outs, 2) >= 0);
  int in[2] = {outs[0], W};
  node(g, "MatMul", in, 2, y);
  set_output(g, y, 2, yd);
  set_output(g, outs[1], 2, xd);
  alma_model *m = to_model(g);
  alma_session *s = NULL;
  assert_int_equal(alma_session_create(m, "INT8_STATIC+EAGER", NULL, &s), ALMA_ERR_UNSUPPORTED);
  assert_non_null(strstr(alma_last_error(), "opset"));
  assert_non_null(strstr(alma_last_error(), "'/Dropout' (Dropout-7)"));
  assert_int_equal(alma_session_create(m, "INT8_DYNAMIC+EAGER", NULL, &s), ALMA_ERR_UNSUPPORTED);
  assert_non_null(strstr(alma_last_error(), "Dropout-7"));
  assert_int_equal(alma_session_create(m, "EAGER", NULL, &s), ALMA_OK); /* the model itself is fine */
  alma_session_free(s);
  alma_model_free(m);
}

static void test_static_opset_old_forms(void **state) {
  /* each older form raised to 13 with its attributes as inputs: its output exactly the unraised
   * graph's on EAGER, the quantized MatMul's within the file's tolerance, the saved converted graph
   * the same again */
  data d;
  make_data(&d, 0);
  for (int kind = 0; kind < OLD_N; kind++) {
    alma_model *m = old_op_model(kind);
    int nout = kind == OLD_TOPK ? 3 : 2;
    alma_tensor ref[3], out[3], again[3];
    assert_int_equal(run_all(m, "EAGER", &d, ref, nout, NULL), ALMA_OK);
    static const char *convs[] = {"INT8_STATIC+EAGER", "INT8_DYNAMIC+EAGER"};
    for (int c = 0; c < 2; c++) {
      alma_session *s = NULL;
      alma_status st = run_all(m, convs[c], &d, out, nout, &s);
      if (st != ALMA_OK) fprintf(stderr, "%s, %s: %s\n", olds[kind].what, convs[c], alma_last_error());
      assert_int_equal(st, ALMA_OK);
      const alma_graph *g = alma__session_graph(s);
      assert_int_equal(alma__graph_opset(g, ""), 13);
      const alma_node *n = find_op(g, olds[kind].op);
      assert_non_null(n);
      assert_int_equal(n->since_version, olds[kind].since_13);
      assert_int_equal(n->n_inputs, olds[kind].inputs_13);
      static const char *moved[] = {"starts", "ends", "axes", "pads", "value", "min", "max", "k", "ratio"};
      for (size_t a = 0; a < sizeof moved / sizeof moved[0]; a++) assert_null(alma__node_attr(n, moved[a]));
      if (kind == OLD_PAD_CONST) assert_true(const_input(g, n, 2) == 0.5);
      if (kind == OLD_PAD_REFLECT) assert_string_equal(alma__attr_s(n, "mode", ""), "reflect");
      if (kind == OLD_CLIP_MIN || kind == OLD_CLIP_BOTH) assert_true(const_input(g, n, 1) == (double)-0.3f);
      if (kind == OLD_CLIP_MAX) assert_int_equal(n->inputs[1], -1); /* min "" before max */
      if (kind != OLD_CLIP_MIN && kind >= OLD_CLIP_MIN && kind <= OLD_CLIP_BOTH)
        assert_true(const_input(g, n, 2) == (double)0.4f);
      if (kind == OLD_TOPK) assert_true(const_input(g, n, 1) == 4);
      if (kind == OLD_DROPOUT) assert_true(const_input(g, n, 1) == (double)0.3f);
      for (int k = 1; k < nout; k++) { /* the old op's outputs: float, exact */
        assert_int_equal(out[k].nbytes, ref[k].nbytes);
        assert_memory_equal(out[k].data, ref[k].data, ref[k].nbytes);
      }
      double cs = cosine(&out[0], &ref[0]);
      if (cs <= 0.99) fprintf(stderr, "%s, %s: cosine %f\n", olds[kind].what, convs[c], cs);
      assert_true(cs > 0.99);
      /* written (the inputs as initializers), read back: the same outputs */
      char path[] = "/tmp/alma_quant_old_XXXXXX";
      int fd = mkstemp(path);
      assert_true(fd >= 0);
      close(fd);
      assert_int_equal(alma_session_save(s, path), ALMA_OK);
      alma_model *m2 = NULL;
      assert_int_equal(alma_model_load(path, &m2), ALMA_OK);
      remove(path);
      assert_int_equal(alma__graph_opset(m2->graph, ""), 13);
      assert_int_equal(run_all(m2, "EAGER", &d, again, nout, NULL), ALMA_OK);
      for (int k = 0; k < nout; k++) {
        assert_int_equal(again[k].nbytes, out[k].nbytes);
        assert_memory_equal(again[k].data, out[k].data, out[k].nbytes);
        alma_tensor_free_data(&again[k]);
        alma_tensor_free_data(&out[k]);
      }
      alma_model_free(m2);
      alma_session_free(s);
    }
    assert_int_equal(alma__graph_opset(m->graph, ""), olds[kind].opset); /* the model itself is untouched */
    for (int k = 0; k < nout; k++) alma_tensor_free_data(&ref[k]);
    alma_model_free(m);
  }
  free_data(&d);
}

/* One node of op on a value of dtype dt (UNDEFINED: unknown) in an opset-`opset` graph, bound. */
static alma_graph *one_node_graph(int64_t opset, const char *op, alma_dtype dt, int n_outputs, int *idx) {
  alma_graph *g = new_graph(opset);
  int64_t xd[2] = {2, 6};
  int x = add_input(g, "x", 2, xd);
  g->values[x].dtype = dt;
  int outs[2] = {alma__graph_add_value(g, "o"), alma__graph_add_value(g, "mask")};
  *idx = alma__graph_add_node(g, op, "", "/n", &x, 1, outs, n_outputs);
  assert_true(*idx >= 0);
  return g;
}

static void test_opset_forms(void **state) {
  alma_opset_form f;
  int i;
  /* Clip-6 on double: both bounds, Clip-6's float32 defaults where absent (at 11 they would be
   * double's range) */
  alma_graph *g = one_node_graph(9, "Clip", ALMA_DTYPE_FLOAT64, 1, &i);
  attr_float(g, i, "min", -0.25f);
  assert_int_equal(alma__op_resolve(&g->nodes[i], 9), ALMA_OK);
  assert_int_equal(alma__opset_form(g, &g->nodes[i], 13, NULL, &f), 1);
  assert_int_equal(f.n_inputs, 2);
  assert_int_equal(f.in[0].t.dtype, ALMA_DTYPE_FLOAT64);
  assert_int_equal(f.in[0].t.rank, 0);
  assert_true(*(const double *)f.in[0].t.data == -0.25);
  assert_true(*(const double *)f.in[1].t.data == (double)FLT_MAX);
  assert_int_equal(alma__opset_form(g, &g->nodes[i], 10, NULL, &f), 0); /* still Clip-6 at 10 */
  assert_null(alma__opset_blocker(g, 13, NULL));
  /* unknown dtype: no scalar can be made; the blocker names the node */
  g->values[g->nodes[i].inputs[0]].dtype = ALMA_DTYPE_UNDEFINED;
  assert_int_equal(alma__opset_form(g, &g->nodes[i], 13, NULL, &f), -1);
  assert_ptr_equal(alma__opset_blocker(g, 13, NULL), &g->nodes[i]);
  alma_opset_value vals[2] = {{2, ALMA_DTYPE_FLOAT16}, {2, ALMA_DTYPE_FLOAT16}}; /* inferred */
  assert_int_equal(alma__opset_form(g, &g->nodes[i], 13, vals, &f), 1);
  assert_int_equal(f.in[1].t.dtype, ALMA_DTYPE_FLOAT16);
  assert_int_equal(*(const uint16_t *)f.in[1].t.data, 0x7c00); /* float32's max rounds to +inf */
  alma__graph_free(g);
  /* Pad-2: value 0 needs no constant_value (nor a dtype); another value does */
  g = one_node_graph(9, "Pad", ALMA_DTYPE_UNDEFINED, 1, &i);
  int64_t pads[4] = {0, 1, 0, 1};
  attr_ints(g, i, "pads", pads, 4);
  assert_int_equal(alma__op_resolve(&g->nodes[i], 9), ALMA_OK);
  assert_int_equal(alma__opset_form(g, &g->nodes[i], 11, NULL, &f), 1);
  assert_int_equal(f.n_inputs, 1);
  assert_int_equal(f.in[0].t.dims[0], 4);
  attr_float(g, i, "value", 2.0f);
  assert_int_equal(alma__opset_form(g, &g->nodes[i], 11, NULL, &f), -1);
  alma__graph_free(g);
  /* Pad-1's paddings */
  g = one_node_graph(1, "Pad", ALMA_DTYPE_FLOAT32, 1, &i);
  attr_ints(g, i, "paddings", pads, 4);
  attr_float(g, i, "value", -1.0f);
  assert_int_equal(alma__op_resolve(&g->nodes[i], 1), ALMA_OK);
  assert_int_equal(alma__opset_form(g, &g->nodes[i], 11, NULL, &f), 1);
  assert_int_equal(f.n_inputs, 2);
  assert_true(*(const float *)f.in[1].t.data == -1.0f);
  alma__graph_free(g);
  /* Dropout-7 with its mask (of the data's type; bool from 10) cannot move; without, it can */
  g = one_node_graph(7, "Dropout", ALMA_DTYPE_FLOAT32, 2, &i);
  assert_int_equal(alma__op_resolve(&g->nodes[i], 7), ALMA_OK);
  assert_int_equal(alma__opset_form(g, &g->nodes[i], 12, NULL, &f), -1);
  assert_int_equal(alma__opset_form(g, &g->nodes[i], 10, NULL, &f), -1);
  g->nodes[i].n_outputs = 1;
  assert_int_equal(alma__opset_form(g, &g->nodes[i], 10, NULL, &f), 0);
  assert_int_equal(alma__opset_form(g, &g->nodes[i], 12, NULL, &f), 1);
  assert_int_equal(f.n_inputs, 0);
  alma__graph_free(g);
  /* Slice-1 without ends, TopK-1 without k: malformed, blocked */
  g = one_node_graph(9, "Slice", ALMA_DTYPE_FLOAT32, 1, &i);
  attr_ints(g, i, "starts", pads, 1);
  assert_int_equal(alma__op_resolve(&g->nodes[i], 9), ALMA_OK);
  assert_int_equal(alma__opset_form(g, &g->nodes[i], 10, NULL, &f), -1);
  assert_ptr_equal(alma__opset_blocker(g, 10, NULL), &g->nodes[i]);
  alma__graph_free(g);
  g = one_node_graph(9, "TopK", ALMA_DTYPE_FLOAT32, 2, &i);
  assert_int_equal(alma__op_resolve(&g->nodes[i], 9), ALMA_OK);
  assert_int_equal(alma__opset_form(g, &g->nodes[i], 10, NULL, &f), -1);
  attr_int(g, i, "k", (int64_t)1 << 40); /* exact, not through a double */
  assert_int_equal(alma__opset_form(g, &g->nodes[i], 10, NULL, &f), 1);
  assert_int_equal(f.in[0].t.rank, 1);
  assert_true(*(const int64_t *)f.in[0].t.data == (int64_t)1 << 40);
  alma__graph_free(g);
}

static void test_dynamic(void **state) {
  for (int which = 0; which < 2; which++) {
    alma_model *m = which ? linear_model(13) : conv_model(13);
    data d;
    make_data(&d, !which);
    alma_tensor ref, y;
    assert_int_equal(run_conv(m, "EAGER", &d, NULL, 0, &ref, NULL), ALMA_OK);
    alma_session *s = NULL;
    alma_status st = run_conv(m, "INT8_DYNAMIC+EAGER", &d, NULL, 0, &y, &s);
    if (st != ALMA_OK) fprintf(stderr, "%s\n", alma_last_error());
    assert_int_equal(st, ALMA_OK);
    assert_true(cosine(&y, &ref) > 0.995);
    assert_int_equal(count_op(s, "ConvInteger"), which ? 0 : 2);
    assert_int_equal(count_op(s, "MatMulInteger"), which ? 2 : 1);
    assert_int_equal(count_op(s, "DynamicQuantizeLinear"), which ? 2 : 3);
    check_saved(s, &d, &y);
    alma_session_free(s);
    alma_tensor_free_data(&y);
    if (which) { /* QDQ MatMul -> QLinearMatMul: the first MatMul's output goes to Add: stays */
      assert_int_equal(run_conv(m, "INT8_STATIC+QLINEAR+EAGER", &d, NULL, 1, &y, &s), ALMA_OK);
      assert_int_equal(count_op(s, "QLinearMatMul"), 0);
      assert_true(cosine(&y, &ref) > 0.995);
      alma_session_free(s);
      alma_tensor_free_data(&y);
    }
    alma_tensor_free_data(&ref);
    free_data(&d);
    alma_model_free(m);
  }
}

/* A QDQ model as PyTorch exports QAT: fake-quantized weights (QuantizeLinear of the float weight),
 * a zero point shared through Identity, and a MaxPool between the DequantizeLinear and the Conv:
 *   x -> Q -> DQ -> MaxPool -> Conv(DQ(Q(w)), b) -> Relu -> Q -> DQ -> y */
static alma_model *qat_model(void) {
  alma_graph *g = new_graph(13);
  int64_t xd[4] = {-1, 2, 8, 8}, wd[4] = {3, 2, 3, 3}, b3[1] = {3}, one[1] = {1};
  int x = add_input(g, "x", 4, xd);
  int W = add_const(g, "w", ALMA_DTYPE_FLOAT32, 4, wd, 0.4f), B = add_const(g, "b", ALMA_DTYPE_FLOAT32, 1, b3, 0.1f);
  int xs = add_const(g, "xs", ALMA_DTYPE_FLOAT32, 0, one, 0), xz = add_const(g, "xz", ALMA_DTYPE_UINT8, 0, one, 0);
  int ws = add_const(g, "ws", ALMA_DTYPE_FLOAT32, 1, b3, 0), wz = add_const(g, "wz", ALMA_DTYPE_INT8, 1, b3, 0);
  int ys = add_const(g, "ys", ALMA_DTYPE_FLOAT32, 0, one, 0), yz0 = add_const(g, "yz", ALMA_DTYPE_UINT8, 0, one, 0);
  *(float *)g->values[xs].init->data = 8.0f / 255;
  *(uint8_t *)g->values[xz].init->data = 128;
  for (int c = 0; c < 3; c++) {
    ((float *)g->values[ws].init->data)[c] = 1.2f / 127;
    ((int8_t *)g->values[wz].init->data)[c] = 0;
  }
  *(float *)g->values[ys].init->data = 6.0f / 255;
  *(uint8_t *)g->values[yz0].init->data = 0;
  const char *names[] = {"xq", "xd", "mp", "wq", "wdq", "c", "r", "rq", "y", "yz_id"};
  int v[10];
  for (int i = 0; i < 10; i++) v[i] = alma__graph_add_value(g, names[i]);
  int q1[3] = {x, xs, xz}, d1[3] = {v[0], xs, xz}, q2[3] = {W, ws, wz}, d2[3] = {v[3], ws, wz};
  int cv[3] = {v[2], v[4], B}, q3[3] = {v[6], ys, v[9]}, d3[3] = {v[7], ys, v[9]};
  node(g, "Identity", &yz0, 1, v[9]);
  node(g, "QuantizeLinear", q1, 3, v[0]);
  node(g, "DequantizeLinear", d1, 3, v[1]);
  int mp = node(g, "MaxPool", &v[1], 1, v[2]);
  int64_t k2[2] = {2, 2};
  attr_ints(g, mp, "kernel_shape", k2, 2);
  attr_ints(g, mp, "strides", k2, 2);
  int qw = node(g, "QuantizeLinear", q2, 3, v[3]);
  attr_int(g, qw, "axis", 0);
  int dw = node(g, "DequantizeLinear", d2, 3, v[4]);
  attr_int(g, dw, "axis", 0);
  int cn = node(g, "Conv", cv, 3, v[5]);
  int64_t pads[4] = {1, 1, 1, 1};
  attr_ints(g, cn, "pads", pads, 4);
  node(g, "Relu", &v[5], 1, v[6]);
  node(g, "QuantizeLinear", q3, 3, v[7]);
  node(g, "DequantizeLinear", d3, 3, v[8]);
  int64_t yd[4] = {-1, 3, 4, 4};
  set_output(g, v[8], 4, yd);
  return to_model(g);
}

static void test_qlinear_qat(void **state) {
  alma_model *m = qat_model();
  data d;
  int64_t xd[4] = {8, 2, 8, 8};
  memset(&d, 0, sizeof d);
  d.x = batch(4, xd);
  alma_tensor ref, y;
  assert_int_equal(run_conv(m, "EAGER", &d, NULL, 0, &ref, NULL), ALMA_OK);
  alma_session *s = NULL;
  alma_status st = run_conv(m, "QLINEAR+EAGER", &d, NULL, 0, &y, &s);
  if (st != ALMA_OK) fprintf(stderr, "%s\n", alma_last_error());
  assert_int_equal(st, ALMA_OK);
  assert_int_equal(count_op(s, "QLinearConv"), 1);
  assert_int_equal(count_op(s, "Conv"), 0);
  assert_int_equal(count_op(s, "Relu"), 0);
  /* MaxPool now runs on uint8; the results agree within one output step (6/255) */
  for (int64_t i = 0; i < alma_tensor_numel(&y); i++)
    assert_true(fabsf(((float *)y.data)[i] - ((float *)ref.data)[i]) <= 6.0f / 255 * 1.001f);
  check_saved(s, &d, &y);
  alma_session_free(s);
  alma_tensor_free_data(&y);
  alma_tensor_free_data(&ref);
  alma_tensor_free_data(&d.x);
  alma_model_free(m);
}

static int cpu_has(const char *flag) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[8192];
  int found = 0;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "flags", 5)) {
      char pat[64];
      snprintf(pat, sizeof pat, " %s", flag);
      found = strstr(line, pat) != NULL;
      break;
    }
  if (f) fclose(f);
  return found;
}

static void test_precision(void **state) {
  alma_model *m = conv_model(13);
  data d;
  make_data(&d, 1);
  alma_tensor ref, y;
  assert_int_equal(run_conv(m, "EAGER", &d, NULL, 0, &ref, NULL), ALMA_OK);
  const char *steps[2] = {"BF16+EAGER", "FP16+EAGER"}, *env[2] = {"ALMA_FORCE_BF16", "ALMA_FORCE_FP16"};
  const char *flag[2] = {"avx512_bf16", "avx512_fp16"};
  alma_dtype lowt[2] = {ALMA_DTYPE_BFLOAT16, ALMA_DTYPE_FLOAT16};
  for (int k = 0; k < 2; k++) {
    unsetenv(env[k]);
    if (!cpu_has(flag[k]) && !cpu_has(k ? "amx_fp16" : "amx_bf16")) {
      assert_int_equal(run_conv(m, steps[k], &d, NULL, 0, &y, NULL), ALMA_ERR_UNAVAILABLE);
      assert_non_null(strstr(alma_last_error(), flag[k]));
    }
    setenv(env[k], "1", 1);
    alma_session *s = NULL;
    alma_status st = run_conv(m, steps[k], &d, NULL, 0, &y, &s);
    if (st != ALMA_OK) fprintf(stderr, "%s: %s\n", steps[k], alma_last_error());
    assert_int_equal(st, ALMA_OK);
    unsetenv(env[k]);
    assert_int_equal(y.dtype, ALMA_DTYPE_FLOAT32);
    assert_true(cosine(&y, &ref) > 0.999);
    /* everything low: Conv, Relu, Conv, GlobalAveragePool, Flatten, Gemm; a Cast in, one out */
    assert_int_equal(count_op(s, "Cast"), 2);
    const alma_graph *g = alma__session_graph(s);
    int low_consts = 0;
    for (int v = 0; v < g->n_values; v++) low_consts += g->values[v].init && g->values[v].init->dtype == lowt[k];
    assert_int_equal(low_consts, 6);
    if (k == 1) check_saved(s, &d, &y); /* float16 graphs are valid ONNX */
    alma_session_free(s);
    alma_tensor_free_data(&y);
  }
  /* FP16 before a runtime without float16 kernels: unavailable, naming why (any runtime but EAGER) */
  setenv("ALMA_FORCE_FP16", "1", 1);
  for (int i = 0; i < alma__runtime_count(); i++) {
    const alma_runtime *rt = alma__runtime_at(i);
    char spec[64];
    snprintf(spec, sizeof spec, "FP16+%s", rt->name);
    alma_conversion c;
    assert_int_equal(alma__conversion_parse(spec, &c), ALMA_OK);
    alma_status st = alma__conversion_available(&c);
    if (!strcmp(rt->name, "EAGER")) {
      assert_int_equal(st, ALMA_OK);
    } else {
      assert_int_equal(st, ALMA_ERR_UNAVAILABLE);
      assert_non_null(strstr(alma_last_error(), "no float16 kernels"));
    }
  }
  unsetenv("ALMA_FORCE_FP16");
  alma_tensor_free_data(&ref);
  free_data(&d);
  alma_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_writer_round_trip), cmocka_unit_test(test_calibrators), cmocka_unit_test(test_static),
      cmocka_unit_test(test_static_residual),   cmocka_unit_test(test_static_bias_range),   cmocka_unit_test(test_static_maxpool), cmocka_unit_test(test_static_opset),
      cmocka_unit_test(test_static_opset_softmax), cmocka_unit_test(test_static_opset_old_forms),
      cmocka_unit_test(test_opset_forms),
      cmocka_unit_test(test_dynamic),
      cmocka_unit_test(test_precision),         cmocka_unit_test(test_qlinear_qat),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
