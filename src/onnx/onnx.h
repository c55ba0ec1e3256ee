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

/* How deep protobuf messages may nest in a file alma parses: ModelProto is level 1 and every
 * subgraph costs three (GraphProto, NodeProto, AttributeProto), so the loader's 64 levels of
 * subgraphs fit, with room for nested sequence/map/optional types. Deeper files are refused before
 * protobuf-c unpacks them, since protobuf-c recurses once per level on the stack. */
#define ALMA_ONNX_MAX_NESTING 256
struct ProtobufCMessageDescriptor;
/* ALMA_ERR_INVALID_MODEL ("<what>: messages nested more than N deep ...") when bytes, read as a
 * `desc` message, hold messages nested deeper than max_depth (at most ALMA_ONNX_MAX_NESTING);
 * ALMA_OK otherwise, malformed framing included (protobuf-c reports that itself). pbscan.c. */
alma_status alma__pb_check_nesting(const struct ProtobufCMessageDescriptor *desc, const uint8_t *bytes, size_t n,
                                   int max_depth, const char *what);

/* Reads a serialized TensorProto file (the ONNX backend tests' input_0.pb...) into an owned tensor.
 * name_out (optional) receives a malloc'd copy of the tensor's name. */
alma_status alma__onnx_load_tensor_file(const char *path, alma_tensor *out, char **name_out);
/* Reads a serialized SequenceProto (kind ALMA__DTYPE_SEQUENCE) or OptionalProto (ALMA__DTYPE_OPTIONAL)
 * of tensors (an OptionalProto may hold a sequence) into a container (core.h; owned). */
alma_status alma__onnx_load_container_file(const char *path, alma_dtype kind, alma_tensor *out);

/* Writes g as a serialized ModelProto (save.c): malloc'd bytes. meta (may be NULL) gives the IR
 * version to keep (raised to what the graph's opset needs) and the model domain. */
alma_status alma__onnx_serialize(const alma_graph *g, const alma_onnx_meta *meta, uint8_t **bytes_out, size_t *n_out);
/* The same, into a file. */
alma_status alma__onnx_save(const alma_graph *g, const alma_onnx_meta *meta, const char *path);

#endif
