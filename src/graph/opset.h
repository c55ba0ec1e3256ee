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

/* "" and "ai.onnx" are the default domain. */
int alma__opset_is_onnx(const char *domain);
/* The attribute of n that is an input at opset `to` (Reduce*'s axes from 18, ReduceSum's from 13,
 * Squeeze/Unsqueeze's axes and Split's split from 13), for a node of the older form (data input
 * only); NULL if none. */
const char *alma__opset_moved_attr(const alma_node *n, int64_t to);
/* The newest default-domain version any node of g (and its subgraphs) has. */
int64_t alma__opset_newest(const alma_graph *g);
/* Whether every default-domain node of g (and its subgraphs) reads the same at opset `to`, its
 * moved attributes (alma__opset_moved_attr) written as inputs. Nodes must be bound (op set). */
int alma__opset_reads_same(const alma_graph *g, int64_t to);
/* The first node that does not (NULL: none), for messages. */
const alma_node *alma__opset_blocker(const alma_graph *g, int64_t to);
/* The same with each top-level value's rank known (ranks[value], -1 unknown; from inference):
 * Softmax/LogSoftmax/Hardmax before 13 then read the same at 13 when their axis is the last. */
const alma_node *alma__opset_blocker_ranked(const alma_graph *g, int64_t to, const int *ranks);

#endif
