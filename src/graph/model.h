/* The loaded model: the pristine graph plus metadata. Sessions clone the graph before passes. */
#ifndef ALMA_MODEL_H
#define ALMA_MODEL_H

#include "graph/infer.h"
#include "onnx/onnx.h"

struct alma_model {
  alma_graph *graph;
  alma_onnx_meta meta;
  char *path;                  /* NULL when loaded from memory */
  char hash[65];
  int has_summary;
  alma_model_summary summary;
  const char **sum_ops;
  int64_t *sum_counts;
  const char **sum_domains;
  int64_t *sum_domain_versions;
};

/* Graph hash (hex SHA-256) of a graph's structure and weights, independent of names. */
void alma__graph_hash(const alma_graph *g, char hex_out[65]);

#endif
