/* Which opset a graph can be written at or raised to. Passes create nodes of versions newer than
 * the model's opset (FUSE: LayerNormalization-17, Gelu-20 in an opset-14 model), and the int8
 * passes need QuantizeLinear (10), DynamicQuantizeLinear (11) and per-axis DequantizeLinear (13)
 * in older models. A graph's default-domain opset can move to a newer one when every node reads the
 * same there: its version stays, or the versions after it only add types, or attributes and
 * optional inputs whose defaults keep its behaviour, or attributes became inputs (the node is then
 * rewritten in the new form: alma__opset_form). Used by the ONNX writer (src/onnx/save.c) and the
 * int8 passes (src/passes/quantize.c), which apply the same forms to a file and to the graph. */
#ifndef ALMA_GRAPH_OPSET_H
#define ALMA_GRAPH_OPSET_H

#include "graph/graph.h"
#include "graph/infer.h"

/* "" and "ai.onnx" are the default domain. */
int alma__opset_is_onnx(const char *domain);

/* What the rules know of a value: its rank (-1 unknown) and dtype (UNDEFINED unknown). */
typedef struct alma_opset_value {
  int rank;
  alma_dtype dtype;
} alma_opset_value;

#define ALMA_OPSET_FORM_MAX 4

/* A node of an older form as it reads at a newer opset, where attributes became inputs:
 * Reduce*'s axes at 18 (ReduceSum's at 13), Squeeze/Unsqueeze's axes and Split's split at 13
 * (int64 lists); Slice-1's starts, ends[, axes] at 10 (int64 lists); Pad-1/2's paddings/pads
 * (int64) and value (constant_value, a scalar of the data's dtype, only for mode constant and a
 * value other than 0) at 11; Clip-6's min and max at 11 (scalars of the data's dtype: the float32
 * defaults are the same, other dtypes get both bounds, as Clip-6's defaults are float32's range);
 * TopK-1's k at 10 (int64 [1]); Dropout-7/10's ratio at 12 (float32 scalar). A Split into equal
 * parts gets num_outputs at 18. */
typedef struct alma_opset_form {
  /* The node's inputs after its first (older forms have that one only): a constant for input
   * 1 + k named after in[k].name, or the empty input "" where in[k].t.dtype is UNDEFINED. */
  int n_inputs;
  struct {
    const char *name;
    alma_tensor t; /* data: the node's attribute or `scalar` below (the form must not be copied) */
  } in[ALMA_OPSET_FORM_MAX];
  int n_drop; /* attributes the new form does not have */
  const char *drop[ALMA_OPSET_FORM_MAX];
  const char *set_attr; /* an int attribute the new form needs, or NULL */
  int64_t set_i;
  int64_t scalar[ALMA_OPSET_FORM_MAX];
} alma_opset_form;

/* How n (a node of g) reads at opset `to`: 0 as it is; 1 rewritten as *f says; -1 when it would
 * need a rewrite alma cannot make (a scalar of a dtype that is unknown, a Dropout-7's float mask, an
 * attribute missing or of the wrong type). vals: as for alma__opset_blocker. */
int alma__opset_form(const alma_graph *g, const alma_node *n, int64_t to, const alma_opset_value *vals,
                     alma_opset_form *f);
/* The newest default-domain version any node of g (and its subgraphs) has. */
int64_t alma__opset_newest(const alma_graph *g);
/* The first default-domain node of g (or its subgraphs) that does not read the same at opset `to`
 * in its form there (alma__opset_form); NULL when every node does. Nodes must be bound (op set).
 * vals: each top-level value's rank and dtype (from alma__opset_values), or NULL for the declared
 * ones (subgraphs always use theirs). Softmax/LogSoftmax/Hardmax before 13 read as 13 when their
 * axis is the last (the rank says). */
const alma_node *alma__opset_blocker(const alma_graph *g, int64_t to, const alma_opset_value *vals);
/* Each value's rank and dtype from inference r, the declared ones where r does not know (all of
 * them without r): malloc'd, NULL when out of memory. */
alma_opset_value *alma__opset_values(const alma_graph *g, const alma_infer_result *r);

#endif
