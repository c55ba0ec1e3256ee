/* The runtime interface (ggml's backend vtable, flattened). A runtime turns a graph into a plan
 * and runs it. Nodes it does not support run on EAGER kernels; the plan says which. */
#ifndef ALMA_RUNTIME_H
#define ALMA_RUNTIME_H

#include "graph/graph.h"

/* Placement: where each node of a compiled plan runs, as data (alma__runtime.placement; docs/json.md,
 * `placement`). A runtime reports it where it decides it; tests and the conformance report read it
 * instead of the plan's text. */
typedef enum alma__place {
  ALMA_PLACE_RUNTIME = 0, /* the runtime's own kernel (alone, or heading a group it runs as one) */
  ALMA_PLACE_FUSED,       /* computed inside another node's kernel on the runtime (a post-op, a folded
                           * reshape, a constant baked into the runtime's weights) */
  ALMA_PLACE_EAGER,       /* declined: EAGER's kernel runs it (reason says why) */
  ALMA_PLACE_PARTIAL,     /* the runtime's kernel for some runs, EAGER's for others (declined at run time
                           * for some shapes or values; reason says why) */
  ALMA_PLACE_GRAPH,       /* a whole-graph runtime (ONNX Runtime, OpenVINO) took the graph entire; what
                           * the library does with the node inside is its own */
  ALMA_PLACE_COUNT
} alma__place;

/* Why a node runs on EAGER (ALMA_PLACE_EAGER / ALMA_PLACE_PARTIAL); ALMA_DECLINE_NONE otherwise. */
typedef enum alma__decline {
  ALMA_DECLINE_NONE = 0,
  ALMA_DECLINE_OP,      /* no kernel for the op type (or its domain) */
  ALMA_DECLINE_DTYPE,   /* an element type the kernel does not take */
  ALMA_DECLINE_ATTR,    /* an attribute value, or an optional input or output, the kernel does not take */
  ALMA_DECLINE_SHAPE,   /* a rank or shape the kernel does not take */
  ALMA_DECLINE_DYNAMIC, /* what is known only at run time decides, and did not fit: shapes or types
                         * static inference left unknown, a weight that is not constant */
  ALMA_DECLINE_LIBRARY, /* the library refused it when building or running it */
  ALMA_DECLINE_CHOICE,  /* the runtime's choice: EAGER's kernel is faster there, or the node is cheaper
                         * than the layout change around it */
  ALMA_DECLINE_COUNT
} alma__decline;

typedef struct alma__placement {
  alma__place place;
  alma__decline reason;
  const char *detail;   /* the runtime's words for it, or NULL: static, or the plan's (valid while the
                         * plan lives and until its next run) */
} alma__placement;

/* "runtime", "fused", "eager", "partial", "graph"; "op", "dtype", "attribute", "shape", "dynamic",
 * "library", "choice" ("" for ALMA_DECLINE_NONE). */
const char *alma__place_name(alma__place p);
const char *alma__decline_name(alma__decline r);
/* The node ran on EAGER's kernel (ALMA_PLACE_EAGER or ALMA_PLACE_PARTIAL). */
static inline int alma__place_fell_back(alma__place p) { return p == ALMA_PLACE_EAGER || p == ALMA_PLACE_PARTIAL; }

/* A per-node profile (alma bench --profile): one entry per node of the plan's graph, filled by a
 * runtime's profile_read. A runtime that runs several nodes as one (a fused chain, an int8
 * cluster) times them once, on the group's head: the head's entry covers `members` nodes, and
 * each other member's entry names the head and has members 0. */
typedef struct alma__prof_node {
  double seconds;       /* summed over the runs timed */
  int64_t runs;         /* times the node (or the group it heads) ran */
  int head;             /* this node's own index, or the head of the group that counts it */
  int members;          /* nodes the entry covers: >= 1 for a head or a node alone, 0 for a member */
  const char *where;    /* placement in the runtime's words: "DNNL", "BLAS", "EAGER (declined)" ... (static) */
  alma__placement place; /* the same as data: filled from the runtime's placement (session.c) */
} alma__prof_node;

/* One graph's per-node profile within a session's: the model's graph, then each If branch the
 * session compiled for its runtime (alma bench --profile lists a branch's nodes, named by the path
 * "If/then_branch/node", instead of one If entry holding them all). */
typedef struct alma__prof_graph {
  const struct alma_graph *g;
  alma__prof_node *nodes;   /* g->n_nodes entries (owned) */
  char *prefix;             /* before its nodes' names: "" for the model's graph (owned) */
  int parent;               /* index of the graph holding the If that runs it; -1 for the model's */
  int parent_node;          /* that If's node index there */
} alma__prof_graph;

/* A runtime's settings (docs/cli.md, --runtime-option PREFIX.NAME=VALUE): declared by the runtime
 * with their defaults, given by the user as text, checked before any child starts, recorded in the
 * results. Values are kept normalized: bools "on"/"off", integers in decimal, one of the choices. */
typedef enum alma__opt_kind { ALMA__OPT_BOOL, ALMA__OPT_INT, ALMA__OPT_CHOICE } alma__opt_kind;

typedef struct alma__rt_option {
  const char *name;      /* "winograd" */
  alma__opt_kind kind;
  const char *def;       /* the default's normalized text */
  const char *choices;   /* ALMA__OPT_CHOICE: "auto|on|off" */
  long long lo, hi;      /* ALMA__OPT_INT: inclusive range */
  const char *doc;       /* one line: what it changes */
} alma__rt_option;

/* Where a runtime's kernels run and its buffers live. */
typedef enum alma__rt_device {
  ALMA__DEVICE_HOST = 0, /* the CPU, host memory */
  ALMA__DEVICE_CUDA,     /* an NVIDIA GPU: the harness never touches CUDA in the parent, lifts the
                          * address-space limit, reports the row on "cuda" */
} alma__rt_device;

/* "cpu", "cuda": the results' device field. */
const char *alma__rt_device_name(alma__rt_device d);

typedef struct alma_runtime_opts {
  int threads;    /* > 0 */
  int verbose;    /* describe placement on stderr at compile */
  /* "prefix.name=value,..." as the user gave it (already checked by alma__rt_options_check), or
   * NULL: read through alma__rt_opt*, which apply the runtime's defaults */
  const char *options;
} alma_runtime_opts;

typedef struct alma_runtime {
  const char *name;          /* "EAGER" */
  const char *description;
  int single_threaded;       /* ignores opts->threads: results report 1 thread */
  /* ALMA_OK if usable here; otherwise ALMA_ERR_UNAVAILABLE with the reason in alma_last_error()
   * ("library libdnnl not found at build time", "CPU lacks AVX512_BF16", "no CUDA device"). */
  alma_status (*init)(void);
  /* g stays alive and unchanged while the plan lives. */
  alma_status (*compile)(const alma_graph *g, const alma_runtime_opts *opts, void **plan_out);
  /* inputs: one per g->inputs, in order; outputs: one per g->outputs, filled with owned tensors. */
  alma_status (*run)(void *plan, const alma_tensor *inputs, int n_inputs, alma_tensor *outputs,
                     int n_outputs);
  alma_status (*synchronize)(void *plan);   /* optional (NULL) */
  void (*free)(void *plan);
  /* per-node placement as data: fills nodes[0..g->n_nodes) with where each node of the plan runs
   * and, for a declined one, why. Called after compile, and again after runs (a runtime that
   * declines a node at run time, for some shapes, says so once it has). Required. */
  alma_status (*placement)(void *plan, alma__placement *nodes);
  /* optional: per-node placement and plan details, one line per node */
  void (*describe)(void *plan, FILE *f);
  /* optional (both or neither): per-node timing. profile_start zeroes the plan's node timers and
   * times every node of the runs that follow (two clock reads per node: never during timed
   * batches); profile_read fills nodes[0..g->n_nodes) with what was timed since. */
  alma_status (*profile_start)(void *plan);
  alma_status (*profile_read)(void *plan, alma__prof_node *nodes);
  /* takes the whole graph as standard ONNX (a foreign engine: ONNX Runtime, OpenVINO): a chain
   * with a pass that emits "alma"-domain ops (pass.emits_alma_ops) before it is unavailable */
  int onnx_only;
  /* optional: facts about the plan for the results (the library's version, settings chosen, a
   * measured per-call overhead), as one JSON object's text in json[0..n); called once, after the
   * timed phase (it may run the plan's library) */
  alma_status (*info)(void *plan, char *json, size_t n);
  /* computes in reduced precision of its own accord (OPENVINO_BF16): its outputs are judged like a
   * lossy pass's (pass.lossy), by cosine and argmax agreement */
  int lossy;
  /* optional: its settings, set as "<option_prefix>.<name>=<value>" (several runtimes may share a
   * prefix and a table: ORT and its levels, OPENVINO and OPENVINO_BF16) */
  const char *option_prefix;
  const alma__rt_option *options;
  int n_options;
  alma__rt_device device;     /* default (0): the host */
  /* optional: its worker threads spin-wait, which is ruinous when a partner thread is preempted;
   * returns the words naming the setting that avoids it, or NULL when o (or the environment)
   * already does, or threads cannot spin (threads <= 1) */
  const char *(*spin_advice)(const alma_runtime_opts *o, int threads);
} alma_runtime;

/* Checks every entry of text ("dnnl.winograd=on,blas.chunk_kb=128"; NULL or "" is none): a known
 * prefix, an option that runtime declares, a value of its kind. ALMA_ERR_INVALID_ARG naming the entry
 * and what would be right otherwise. */
alma_status alma__rt_options_check(const char *text);
/* The value of rt's option `name` under o (the last entry setting it), else its default, normalized,
 * into buf; NULL (and a message on stderr, a programming error) for an option rt does not declare. */
const char *alma__rt_opt(const alma_runtime *rt, const alma_runtime_opts *o, const char *name, char *buf, size_t n);
/* Shorthands: a bool option is "on"; an integer option's value; a choice option equals `value`. */
int alma__rt_opt_on(const alma_runtime *rt, const alma_runtime_opts *o, const char *name);
long long alma__rt_opt_int(const alma_runtime *rt, const alma_runtime_opts *o, const char *name);
int alma__rt_opt_is(const alma_runtime *rt, const alma_runtime_opts *o, const char *name, const char *value);
/* A choice option's value as its position in `choices` ("auto|on|off": "on" is 1), so an enum in
 * the same order reads it; -1 (and a message on stderr, a programming error) for an option rt does
 * not declare or one that is not a choice. */
int alma__rt_opt_index(const alma_runtime *rt, const alma_runtime_opts *o, const char *name);
/* Every option of rt with its value under text, as a JSON object's text {"winograd":"auto",...}
 * ("{}" for a runtime without options); *n_set counts those text sets (may be NULL). Returns
 * snprintf's length. */
int alma__rt_options_json(const alma_runtime *rt, const char *text, char *buf, size_t n, int *n_set);
/* The entries of text that set rt's options, normalized and without the prefix, in rt's order
 * ("winograd=off,strided=off"; "" for none). Returns snprintf's length. */
int alma__rt_options_given(const alma_runtime *rt, const char *text, char *buf, size_t n);

/* All runtimes compiled into this build, EAGER first. */
int alma__runtime_count(void);
const alma_runtime *alma__runtime_at(int i);
const alma_runtime *alma__runtime_find(const char *name);

extern const alma_runtime alma__runtime_eager;

#endif
