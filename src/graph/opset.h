/* Which opset a graph can be written at or raised to. Passes create nodes of versions newer than
 * the model's opset (FUSE: LayerNormalization-17, Gelu-20 in an opset-14 model), and the int8
 * passes need QuantizeLinear (10), DynamicQuantizeLinear (11) and per-axis DequantizeLinear (13)
 * in older models. A graph's default-domain opset can move to a newer one when every node reads the
 * same there: its version stays, or the versions after it only add types, or attributes and
 * optional inputs whose defaults keep its behaviour, or an attribute became an input (rewritten:
 * alma__opset_moved_attr). Used by the ONNX writer (src/onnx/save.c) and the int8 passes. */
#ifndef ALMA_GRAPH_OPSET_H
#define ALMA_GRAPH_OPSET_H

#include "graph/graph.h"
#include "graph/infer.h"

/* "" and "ai.onnx" are the default domain. */
int alma__opset_is_onnx(const char *domain);
/* The attribute of n that is an input at opset `to` (Reduce*'s axes from 18, ReduceSum's from 13,
 * Squeeze/Unsqueeze's axes and Split's split from 13), for a node of the older form (data input
 * only); NULL if none. */
const char *alma__opset_moved_attr(const alma_node *n, int64_t to);
/* The newest default-domain version any node of g (and its subgraphs) has. */
int64_t alma__opset_newest(const alma_graph *g);
/* The first default-domain node of g (or its subgraphs) that does not read the same at opset `to`,
 * its moved attributes (alma__opset_moved_attr) written as inputs; NULL when every node does.
 * Nodes must be bound (op set). ranks: each top-level value's rank (-1 unknown; from
 * alma__opset_ranks), or NULL for the declared ranks: Softmax/LogSoftmax/Hardmax before 13 read as
 * 13 when their axis is the last. */
const alma_node *alma__opset_blocker(const alma_graph *g, int64_t to, const int *ranks);
/* Each value's rank from inference r (-1 where unknown, every one without r): malloc'd, NULL when
 * out of memory. */
int *alma__opset_ranks(const alma_graph *g, const alma_infer_result *r);

#endif
