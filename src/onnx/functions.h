/* Model-local functions: calls replaced by their bodies before parsing (functions.c). */
#ifndef ALMA_ONNX_FUNCTIONS_H
#define ALMA_ONNX_FUNCTIONS_H

#include "graph/graph.h"
#include "onnx/onnx.pb-c.h"

/* *out: mp's graph with every call of a model-local function inlined (mp->graph itself when the
 * model has none). What it builds lives in `tmp`; g's opsets gain the domains only functions import. */
alma_status alma__onnx_inline_functions(const Onnx__ModelProto *mp, alma_graph *g, alma_arena *tmp,
                                        const Onnx__GraphProto **out);

#endif
