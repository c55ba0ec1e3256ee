/* Opset compatibility of a graph's nodes (see opset.h). */
#include "graph/opset.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"

int alma__opset_is_onnx(const char *d) { return !d || !d[0] || !strcmp(d, "ai.onnx"); }

/* ---- forms: attributes that became inputs (see alma_opset_form) ---- */

/* The data input's dtype: inferred (vals) or declared. */
static alma_dtype data_dtype(const alma_graph *g, const alma_node *n, const alma_opset_value *vals) {
  int v = n->n_inputs > 0 ? n->inputs[0] : -1;
  if (v < 0) return ALMA_DTYPE_UNDEFINED;
  if (vals && vals[v].dtype != ALMA_DTYPE_UNDEFINED) return vals[v].dtype;
  return g->values[v].dtype;
}

/* Input `slot` (1-based) of the new form: an int64 list from attribute `attr`. 1 if written, 0 if
 * the attribute is absent, -1 if it is not a list of ints. */
static int put_ints(alma_opset_form *f, int slot, const alma_node *n, const char *attr, const char *name) {
  const alma_attr *at = alma__node_attr(n, attr);
  if (!at) return 0;
  if (at->type != ALMA_ATTR_INTS) return -1;
  alma_tensor *t = &f->in[slot - 1].t;
  f->in[slot - 1].name = name;
  t->dtype = ALMA_DTYPE_INT64;
  t->rank = 1;
  t->dims[0] = at->n;
  t->data = at->ints;
  t->nbytes = (size_t)at->n * sizeof(int64_t);
  if (f->n_inputs < slot) f->n_inputs = slot;
  return 1;
}

/* Input `slot`: the scalar x as dtype dt (a float type; k of TopK: int64 [1]). -1 if dt is not one. */
static int put_scalar(alma_opset_form *f, int slot, const char *name, alma_dtype dt, double x) {
  alma_tensor *t = &f->in[slot - 1].t;
  if (dt == ALMA_DTYPE_INT64) {
    f->scalar[slot - 1] = (int64_t)x;
    t->rank = 1;
    t->dims[0] = 1;
  } else if (alma__dtype_is_float(dt)) {
    alma__set_f64(&f->scalar[slot - 1], dt, 0, x);
    t->rank = 0;
  } else {
    return -1;
  }
  f->in[slot - 1].name = name;
  t->dtype = dt;
  t->data = &f->scalar[slot - 1];
  t->nbytes = alma_dtype_size(dt);
  if (f->n_inputs < slot) f->n_inputs = slot;
  return 1;
}

static void drop(alma_opset_form *f, const char *attr) { f->drop[f->n_drop++] = attr; }

/* The version at which op's attributes became inputs (0: never, or alma has no form for it). */
static int form_at(const char *op) {
  if (!strcmp(op, "ReduceSum")) return 13;
  if (!strncmp(op, "Reduce", 6)) return 18;
  if (!strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze") || !strcmp(op, "Split")) return 13;
  if (!strcmp(op, "Slice") || !strcmp(op, "TopK")) return 10;
  if (!strcmp(op, "Pad") || !strcmp(op, "Clip")) return 11;
  if (!strcmp(op, "Dropout")) return 12;
  return 0;
}

int alma__opset_form(const alma_graph *g, const alma_node *n, int64_t to, const alma_opset_value *vals,
                     alma_opset_form *f) {
  memset(f, 0, sizeof *f);
  /* not bound: versions unknown (the blocker keeps such a graph at its opset) */
  if (!alma__opset_is_onnx(n->domain) || !n->op) return 0;
  const char *op = n->op_type;
  int v = n->since_version;
  /* Split-18 wants num_outputs when split is not given (equal parts) */
  if (!strcmp(op, "Split") && v < 18 && to >= 18 && n->n_inputs == 1 && !alma__node_attr(n, "split")) {
    f->set_attr = "num_outputs";
    f->set_i = n->n_outputs;
    return 1;
  }
  /* Dropout-7's mask is of the data's type, bool from 10; before 7 is_test chose training */
  if (!strcmp(op, "Dropout") && v < 10 && to >= 10 && (v < 7 || (n->n_outputs > 1 && n->outputs[1] >= 0))) return -1;
  int at = form_at(op);
  if (!at || v >= at || to < at) return 0;
  if (n->n_inputs != 1) return -1; /* the older forms have their data input only */
  int r = 0;
  if (!strcmp(op, "Slice")) { /* Slice-1: axes default to 0.. as at 10; 10 adds steps (default 1) */
    int s = put_ints(f, 1, n, "starts", "starts"), e = put_ints(f, 2, n, "ends", "ends");
    r = s < 1 || e < 1 ? -1 : put_ints(f, 3, n, "axes", "axes");
    drop(f, "starts"), drop(f, "ends"), drop(f, "axes");
  } else if (!strcmp(op, "Pad")) { /* Pad-1's paddings are Pad-2's pads, [x1_begin, x2_begin, ..., x1_end, ...] */
    const char *pads = v < 2 ? "paddings" : "pads";
    r = put_ints(f, 1, n, pads, "pads") < 1 ? -1 : 0;
    const alma_attr *val = alma__node_attr(n, "value");
    if (val && val->type != ALMA_ATTR_FLOAT) r = -1;
    /* constant_value defaults to 0 and only constant mode reads it */
    double x = val ? val->f : 0.0;
    if (r == 0 && !strcmp(alma__attr_s(n, "mode", "constant"), "constant") && (x != 0 || signbit(x)))
      r = put_scalar(f, 2, "constant_value", data_dtype(g, n, vals), x);
    drop(f, pads), drop(f, "value");
  } else if (!strcmp(op, "Clip")) {
    /* Clip-6's bounds default to float32's range, Clip-11's to the data type's: the same for
     * float32, whose absent bounds stay absent (min "" before a max); other dtypes get both. */
    alma_dtype dt = data_dtype(g, n, vals);
    const alma_attr *lo = alma__node_attr(n, "min"), *hi = alma__node_attr(n, "max");
    if (!alma__dtype_is_float(dt) || (lo && lo->type != ALMA_ATTR_FLOAT) || (hi && hi->type != ALMA_ATTR_FLOAT)) {
      r = -1;
    } else {
      int all = dt != ALMA_DTYPE_FLOAT32;
      if (lo || all) r = put_scalar(f, 1, "min", dt, lo ? lo->f : -FLT_MAX);
      if (r >= 0 && (hi || all)) r = put_scalar(f, 2, "max", dt, hi ? hi->f : FLT_MAX);
    }
    drop(f, "min"), drop(f, "max");
  } else if (!strcmp(op, "TopK")) {
    const alma_attr *k = alma__node_attr(n, "k");
    r = !k || k->type != ALMA_ATTR_INT ? -1 : put_scalar(f, 1, "k", ALMA_DTYPE_INT64, 0);
    if (r > 0) f->scalar[0] = k->i; /* exact, not through a double */
    drop(f, "k");
  } else if (!strcmp(op, "Dropout")) {
    /* inference: the identity whatever the ratio (12 ignores it without training_mode) */
    const alma_attr *ratio = alma__node_attr(n, "ratio");
    if (ratio && ratio->type != ALMA_ATTR_FLOAT) r = -1;
    else if (ratio) r = put_scalar(f, 1, "ratio", ALMA_DTYPE_FLOAT32, ratio->f);
    drop(f, "ratio");
  } else { /* Reduce*, Squeeze, Unsqueeze: axes; Split: split (all optional) */
    const char *a = strcmp(op, "Split") ? "axes" : "split";
    r = put_ints(f, 1, n, a, a);
    drop(f, a);
  }
  return r < 0 ? -1 : 1;
}

/* compat_from[op]: the version from which every later version of op reads the same (only types,
 * or attributes and optional inputs whose defaults keep the behaviour, were added; from the ONNX
 * operator changelog); an op not listed must keep its version. Where attributes became inputs
 * (form_at), the older versions count once rewritten in the new form (alma__opset_form). */
static const struct {
  const char *op;
  int from;
} compat_from[] = {
    {"Abs", 6}, {"Add", 7}, {"And", 7}, {"ArgMax", 11}, {"ArgMin", 11}, {"AveragePool", 1},
    {"BatchNormalization", 9}, {"Cast", 6}, {"CastLike", 15}, {"Ceil", 6}, {"Clip", 6}, {"Concat", 4},
    {"Constant", 9}, {"ConstantOfShape", 9}, {"Conv", 1}, {"ConvTranspose", 1}, {"Cos", 7}, {"CumSum", 11},
    {"DepthToSpace", 11}, {"DequantizeLinear", 10}, {"Div", 7}, {"Dropout", 7}, {"Einsum", 12}, {"Elu", 6},
    {"Equal", 11}, {"Erf", 9}, {"Exp", 6}, {"Expand", 8}, {"Flatten", 1}, {"Floor", 6}, {"GRU", 7},
    {"Gather", 1}, {"GatherElements", 11}, {"GatherND", 11}, {"Gemm", 7}, {"GlobalAveragePool", 1},
    {"GlobalMaxPool", 1}, {"Greater", 9}, {"GreaterOrEqual", 12}, {"HardSigmoid", 6}, {"HardSwish", 14},
    {"Identity", 1}, {"If", 1}, {"InstanceNormalization", 6}, {"IsInf", 10}, {"IsNaN", 9}, {"LRN", 1},
    {"LSTM", 7}, {"LeakyRelu", 6}, {"Less", 9}, {"LessOrEqual", 12}, {"Log", 6}, {"Loop", 11}, {"MatMul", 9},
    {"Max", 8}, {"MaxPool", 8}, {"Mean", 8}, {"Min", 8}, {"Mod", 10}, {"Mul", 7}, {"Neg", 6}, {"NonZero", 9},
    {"Not", 1}, {"OneHot", 11}, {"Or", 7}, {"PRelu", 9}, {"Pad", 1}, {"Pow", 7}, {"QuantizeLinear", 10},
    {"RNN", 7}, {"Range", 11}, {"Reciprocal", 6}, {"ReduceL1", 1}, {"ReduceL2", 1}, {"ReduceLogSum", 1},
    {"ReduceLogSumExp", 1}, {"ReduceMax", 1}, {"ReduceMean", 1}, {"ReduceMin", 1}, {"ReduceProd", 1},
    {"ReduceSum", 1}, {"ReduceSumSquare", 1}, {"Relu", 6}, {"Reshape", 5}, {"Resize", 11}, {"Round", 11},
    {"Scan", 9}, {"ScatterElements", 11}, {"ScatterND", 11}, {"Selu", 6}, {"Shape", 1}, {"Sigmoid", 6},
    {"Sign", 9}, {"Sin", 7}, {"Size", 1}, {"Slice", 1}, {"Softmax", 13}, {"LogSoftmax", 13}, {"Hardmax", 13},
    {"Softplus", 1}, {"Softsign", 1}, {"SpaceToDepth", 1}, {"Split", 1}, {"Sqrt", 6}, {"Squeeze", 1},
    {"Sub", 7}, {"Sum", 8}, {"Tanh", 6}, {"Tile", 6}, {"TopK", 1}, {"Transpose", 1}, {"Trilu", 14},
    {"Unsqueeze", 1}, {"Where", 9}, {"Xor", 7}, {"LayerNormalization", 17}, {"Gelu", 20},
};

/* The newest default-domain version any node of g (and its subgraphs) has. */
int64_t alma__opset_newest(const alma_graph *g) {
  int64_t v = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    if (n->dead) continue;
    if (alma__opset_is_onnx(n->domain) && n->since_version > v) v = n->since_version;
    for (int a = 0; a < n->n_attrs; a++) {
      const alma_attr *at = &n->attrs[a];
      if (at->type == ALMA_ATTR_GRAPH && at->g) {
        int64_t s = alma__opset_newest(at->g);
        if (s > v) v = s;
      }
      for (int k = 0; at->type == ALMA_ATTR_GRAPHS && k < at->n; k++) {
        int64_t s = at->graphs[k] ? alma__opset_newest(at->graphs[k]) : 0;
        if (s > v) v = s;
      }
    }
  }
  return v;
}

/* Softmax, LogSoftmax and Hardmax before 13 coerce their input to 2-D around `axis` (default 1)
 * and normalize over everything after it; 13 normalizes over `axis` alone (default -1). The same
 * when axis is the last axis: known from the input's rank. */
static int softmax_same(const alma_graph *g, const alma_node *n, const alma_opset_value *vals) {
  if (strcmp(n->op_type, "Softmax") && strcmp(n->op_type, "LogSoftmax") && strcmp(n->op_type, "Hardmax")) return 0;
  if (n->n_inputs < 1 || n->inputs[0] < 0) return 0;
  int r = vals ? vals[n->inputs[0]].rank : g->values[n->inputs[0]].rank;
  int64_t axis = alma__attr_i(n, "axis", 1);
  return axis == -1 || (r > 0 && axis == r - 1); /* the last axis either way */
}

const alma_node *alma__opset_blocker(const alma_graph *g, int64_t to, const alma_opset_value *vals) {
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    if (n->dead) continue;
    for (int a = 0; a < n->n_attrs; a++) {
      const alma_attr *at = &n->attrs[a];
      const alma_node *b = at->type == ALMA_ATTR_GRAPH && at->g ? alma__opset_blocker(at->g, to, NULL) : NULL;
      if (b) return b;
      for (int k = 0; at->type == ALMA_ATTR_GRAPHS && k < at->n; k++)
        if (at->graphs[k] && (b = alma__opset_blocker(at->graphs[k], to, NULL))) return b;
    }
    if (!alma__opset_is_onnx(n->domain)) continue;
    if (!n->op) return n; /* not bound: its versions are unknown */
    int at_to = 0;
    for (int k = 0; k < ALMA_OP_MAX_VERSIONS && n->op->versions[k]; k++)
      if (n->op->versions[k] <= to) at_to = n->op->versions[k];
    if (at_to == n->since_version) continue;
    int ok = n->since_version < 13 && softmax_same(g, n, vals);
    for (size_t k = 0; k < sizeof compat_from / sizeof compat_from[0] && !ok; k++)
      ok = !strcmp(compat_from[k].op, n->op_type) && n->since_version >= compat_from[k].from;
    alma_opset_form f;
    if (!ok || alma__opset_form(g, n, to, vals, &f) < 0) return n;
  }
  return NULL;
}

alma_opset_value *alma__opset_values(const alma_graph *g, const alma_infer_result *r) {
  alma_opset_value *vals = malloc(sizeof *vals * ((size_t)g->n_values + 1));
  for (int v = 0; vals && v < g->n_values; v++) {
    const alma_tensor *t = r && r->info && r->info[v].dtype != ALMA_DTYPE_UNDEFINED ? &r->info[v] : NULL;
    vals[v].rank = t ? t->rank : g->values[v].rank;
    vals[v].dtype = t ? t->dtype : g->values[v].dtype;
  }
  return vals;
}
