/* ONNX protobuf -> graph IR (protobuf-c code generated at build time from Debian's onnx.proto). */
#ifndef ALMA_ONNX_H
#define ALMA_ONNX_H

#include "graph/graph.h"

typedef struct alma_onnx_meta {
  int64_t ir_version;
  const char *producer_name;     /* arena strings */
  const char *producer_version;
  const char *domain;
} alma_onnx_meta;

/* Parses a serialized ModelProto into a graph (topologically sorted, validated; ops not yet
 * resolved). base_dir: where external data files are looked up (NULL: the current directory). */
alma_status alma__onnx_parse_model(const uint8_t *bytes, size_t n, const char *base_dir, alma_graph **g_out,
                                   alma_onnx_meta *meta_out);

/* Reads a serialized TensorProto file (the ONNX backend tests' input_0.pb...) into an owned tensor.
 * name_out (optional) receives a malloc'd copy of the tensor's name. */
alma_status alma__onnx_load_tensor_file(const char *path, alma_tensor *out, char **name_out);

/* Writes g as a serialized ModelProto (save.c): malloc'd bytes. meta (may be NULL) gives the IR
 * version to keep (raised to what the graph's opset needs) and the model domain. */
alma_status alma__onnx_serialize(const alma_graph *g, const alma_onnx_meta *meta, uint8_t **bytes_out, size_t *n_out);
/* The same, into a file. */
alma_status alma__onnx_save(const alma_graph *g, const alma_onnx_meta *meta, const char *path);
/* The default-domain opset written for g: the graph's, raised to the newest version among its nodes
 * (a pass may add newer ops, e.g. FUSE's LayerNormalization-17) when every other node reads the same
 * at that opset; else the graph's (the file then holds nodes newer than its opset). Serializing
 * also knows inferred ranks (a Softmax-11 over its last axis reads as 13); this uses declared ones. */
int64_t alma__onnx_opset_to_write(const alma_graph *g);

#endif
