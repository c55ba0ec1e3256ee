/* Opset compatibility of a graph's nodes (see opset.h). */
#include "graph/opset.h"

#include <stdlib.h>
#include <string.h>

#include "ops/op.h"

int alma__opset_is_onnx(const char *d) { return !d || !d[0] || !strcmp(d, "ai.onnx"); }

/* The attribute of n that is an input at opset `to` (Reduce*'s axes from 18, ReduceSum's from 13,
 * Squeeze/Unsqueeze's axes and Split's split from 13), for a node of the older form (data input
 * only); NULL if none. Writers move it into an int64 initializer. */
const char *alma__opset_moved_attr(const alma_node *n, int64_t to) {
  if (!alma__opset_is_onnx(n->domain) || n->n_inputs != 1) return NULL;
  const char *op = n->op_type;
  if (!strncmp(op, "Reduce", 6)) {
    int at = strcmp(op, "ReduceSum") ? 18 : 13;
    return n->since_version < at && to >= at ? "axes" : NULL;
  }
  if (n->since_version < 13 && to >= 13 && (!strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze"))) return "axes";
  if (n->since_version < 13 && to >= 13 && !strcmp(op, "Split")) return "split";
  return NULL;
}

/* compat_from[op]: the version from which every later version of op reads the same (only types,
 * or attributes and optional inputs whose defaults keep the behaviour, were added; from the ONNX
 * operator changelog); an op not listed must keep its version. Reduce*, Squeeze, Unsqueeze and
 * Split changed form once (an attribute became an input; Split-18 wants num_outputs without
 * split): writers rewrite those nodes in the new form (alma__opset_moved_attr), so the rest of
 * their history is compatible. */
static const struct {
  const char *op;
  int from;
} compat_from[] = {
    {"Abs", 6}, {"Add", 7}, {"And", 7}, {"ArgMax", 11}, {"ArgMin", 11}, {"AveragePool", 1},
    {"BatchNormalization", 9}, {"Cast", 6}, {"CastLike", 15}, {"Ceil", 6}, {"Clip", 11}, {"Concat", 4},
    {"Constant", 9}, {"ConstantOfShape", 9}, {"Conv", 1}, {"ConvTranspose", 1}, {"Cos", 7}, {"CumSum", 11},
    {"DepthToSpace", 11}, {"DequantizeLinear", 10}, {"Div", 7}, {"Dropout", 12}, {"Einsum", 12}, {"Elu", 6},
    {"Equal", 11}, {"Erf", 9}, {"Exp", 6}, {"Expand", 8}, {"Flatten", 1}, {"Floor", 6}, {"GRU", 7},
    {"Gather", 1}, {"GatherElements", 11}, {"GatherND", 11}, {"Gemm", 7}, {"GlobalAveragePool", 1},
    {"GlobalMaxPool", 1}, {"Greater", 9}, {"GreaterOrEqual", 12}, {"HardSigmoid", 6}, {"HardSwish", 14},
    {"Identity", 1}, {"If", 11}, {"InstanceNormalization", 6}, {"IsInf", 10}, {"IsNaN", 9}, {"LRN", 1},
    {"LSTM", 7}, {"LeakyRelu", 6}, {"Less", 9}, {"LessOrEqual", 12}, {"Log", 6}, {"Loop", 11}, {"MatMul", 9},
    {"Max", 8}, {"MaxPool", 8}, {"Mean", 8}, {"Min", 8}, {"Mod", 10}, {"Mul", 7}, {"Neg", 6}, {"NonZero", 9},
    {"Not", 1}, {"OneHot", 11}, {"Or", 7}, {"PRelu", 9}, {"Pad", 11}, {"Pow", 7}, {"QuantizeLinear", 10},
    {"RNN", 7}, {"Range", 11}, {"Reciprocal", 6}, {"ReduceL1", 1}, {"ReduceL2", 1}, {"ReduceLogSum", 1},
    {"ReduceLogSumExp", 1}, {"ReduceMax", 1}, {"ReduceMean", 1}, {"ReduceMin", 1}, {"ReduceProd", 1},
    {"ReduceSum", 1}, {"ReduceSumSquare", 1}, {"Relu", 6}, {"Reshape", 5}, {"Resize", 11}, {"Round", 11},
    {"Scan", 9}, {"ScatterElements", 11}, {"ScatterND", 11}, {"Selu", 6}, {"Shape", 1}, {"Sigmoid", 6},
    {"Sign", 9}, {"Sin", 7}, {"Size", 1}, {"Slice", 10}, {"Softmax", 13}, {"LogSoftmax", 13}, {"Hardmax", 13},
    {"Softplus", 1}, {"Softsign", 1}, {"SpaceToDepth", 1}, {"Split", 1}, {"Sqrt", 6}, {"Squeeze", 1},
    {"Sub", 7}, {"Sum", 8}, {"Tanh", 6}, {"Tile", 6}, {"TopK", 11}, {"Transpose", 1}, {"Trilu", 14},
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

/* Whether every default-domain node of g reads the same at opset `to` (see compat_from). */
/* Softmax, LogSoftmax and Hardmax before 13 coerce their input to 2-D around `axis` (default 1)
 * and normalize over everything after it; 13 normalizes over `axis` alone (default -1). The same
 * when axis is the last axis: known from the input's rank. */
static int softmax_same(const alma_graph *g, const alma_node *n, const int *ranks) {
  if (strcmp(n->op_type, "Softmax") && strcmp(n->op_type, "LogSoftmax") && strcmp(n->op_type, "Hardmax")) return 0;
  if (n->n_inputs < 1 || n->inputs[0] < 0) return 0;
  int r = ranks ? ranks[n->inputs[0]] : g->values[n->inputs[0]].rank;
  int64_t axis = alma__attr_i(n, "axis", 1);
  return axis == -1 || (r > 0 && axis == r - 1); /* the last axis either way */
}

const alma_node *alma__opset_blocker(const alma_graph *g, int64_t to, const int *ranks) {
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
    int ok = n->since_version < 13 && softmax_same(g, n, ranks);
    for (size_t k = 0; k < sizeof compat_from / sizeof compat_from[0] && !ok; k++)
      ok = !strcmp(compat_from[k].op, n->op_type) && n->since_version >= compat_from[k].from;
    if (!ok) return n;
  }
  return NULL;
}

int *alma__opset_ranks(const alma_graph *g, const alma_infer_result *r) {
  int *ranks = malloc(sizeof(int) * ((size_t)g->n_values + 1));
  for (int v = 0; ranks && v < g->n_values; v++)
    ranks[v] = r && r->info && r->info[v].dtype != ALMA_DTYPE_UNDEFINED ? r->info[v].rank : -1;
  return ranks;
}
