/* The build cache (docs/cache.md): each conversion's converted graph (after its passes, int8
 * calibration included) stored as an ONNX file with a JSON state file, so that a later run skips
 * the passes. Layout:
 *
 *   DIR/lock                         flock(2) target: writers exclusive, lookups shared
 *   DIR/builds/NAME/state.json       status, build time, sizes, errors, key parts, graph checksum
 *   DIR/builds/NAME/graph.onnx       the converted graph (absent under lean_cache or after clean)
 *   DIR/builds/NAME/build.log        one block per build or use: warnings, errors
 *   DIR/builds/NAME/bench/TIME.json  one benchmark record per run that used the build
 *
 * NAME = <model file stem>-<conversion>-<8 hex of (model path, input shapes)>: the build's identity.
 * The key (SHA-256 of every key part) decides whether what is stored under NAME is fresh: a changed
 * model, option, alma version or alma build makes it stale. Every file is written to a temporary
 * name, fsync'ed and renamed into place, so a reader sees a whole file or none; a graph is only
 * ever loaded after its SHA-256 matches the state's. */
#ifndef ALMA_CACHE_H
#define ALMA_CACHE_H

#include <limits.h>
#include <stdio.h>

#include "core/core.h"

#define ALMA__CACHE_FORMAT 1

typedef struct alma__cache alma__cache;

/* What a build is made from. Fill the parts, then alma__cache_key_finish derives name and key. */
typedef struct alma__cache_key {
  char alma_version[32];
  char alma_build[128];       /* "build <id>": the build id of alma's code (changed code is stale) */
  char model_hash[65];        /* alma_model_hash of the source model */
  char model_path[PATH_MAX];  /* absolute; "" for a model passed loaded */
  char conversion[128];       /* canonical chain */
  char inputs[1024];          /* "x:float32:[2,16];y:int64:[2]" as fed */
  char options[768];          /* build options in canonical text ("" when none matter) */
  /* derived */
  char name[200];
  char key[65];
} alma__cache_key;

/* Fills alma_version and alma_build. */
void alma__cache_key_init(alma__cache_key *k);
void alma__cache_key_finish(alma__cache_key *k);

typedef enum { ALMA__REBUILD_IF_NEEDED, ALMA__REBUILD_ALWAYS, ALMA__REBUILD_NEVER } alma__rebuild;
alma_status alma__rebuild_parse(const char *s, alma__rebuild *out);

/* The decision for one build. */
typedef struct alma__cache_plan {
  int use;                    /* 1: load graph_path (after checking graph_sha256); 0: build */
  int stale;                  /* the stored build's key differs (used under never, or rebuilt) */
  char reason[400];           /* why it builds, or a note on a use */
  char dir[PATH_MAX];
  char graph_path[PATH_MAX + 16];
  char graph_sha256[65];
  int64_t graph_bytes;
  double build_s;             /* the stored build's conversion time (NaN if none) */
  char tmp_graph[PATH_MAX + 64]; /* where a new build writes its graph; "" under lean_cache */
} alma__cache_plan;

/* dir: NULL or "" = $ALMA_CACHE_DIR, else $HOME/.cache/alma. Creates it (and builds/). */
alma_status alma__cache_open(const char *dir, alma__cache **out);
void alma__cache_close(alma__cache *c);
const char *alma__cache_dir(const alma__cache *c);
/* flock on DIR/lock (opened for the occasion: never inherited across fork). */
alma_status alma__cache_lock(alma__cache *c, int exclusive);
void alma__cache_unlock(alma__cache *c);

/* Looks NAME up (under a shared lock) and decides: use the stored graph or build. */
alma_status alma__cache_plan_build(alma__cache *c, const alma__cache_key *k, alma__rebuild policy, int lean,
                                   alma__cache_plan *p);

/* Reads the planned graph and checks its size and SHA-256: ALMA_ERR_PARSE naming what differs. */
alma_status alma__cache_read_graph(const alma__cache_plan *p, uint8_t **bytes_out, size_t *n_out);

/* After the job (under an exclusive lock). built: a conversion ran (no hit); ok: it succeeded;
 * the graph, when stored, is at p->tmp_graph. Moves it into place and writes state.json, or a
 * failed state with error. Appends log_text to build.log either way. graph_bytes_out: the stored
 * graph's size or -1. */
alma_status alma__cache_commit(alma__cache *c, const alma__cache_key *k, const alma__cache_plan *p, int built, int ok,
                               double build_s, const char *error, const char *log_text, int64_t *graph_bytes_out);
/* Drops the stored graph the plan used (when it is still the one stored), the state saying why
 * ("dropped"): a graph that crashed its process or failed the output check is never used again
 * (the next run rebuilds it). Under an exclusive lock; ALMA_ERR_NOT_FOUND when it was gone. */
alma_status alma__cache_drop_graph(alma__cache *c, const alma__cache_plan *p, const char *why);
/* Stores one benchmark record (JSON text) with the build. */
alma_status alma__cache_record_benchmark(alma__cache *c, const alma__cache_key *k, const char *json);

/* Management (`alma cache`). */
typedef struct alma__cache_entry {
  char name[256];
  char dir[PATH_MAX];
  char problem[256];          /* "" or why the entry is unusable ("state file unreadable") */
  struct cJSON *state;        /* parsed state.json or NULL */
  int n_bench;
  int has_graph;              /* graph.onnx present */
} alma__cache_entry;
alma_status alma__cache_list(alma__cache *c, alma__cache_entry **out, int *n_out);
void alma__cache_entries_free(alma__cache_entry *e, int n);
/* A name or a unique prefix of one. ALMA_ERR_NOT_FOUND / ALMA_ERR_INVALID_ARG (ambiguous). */
alma_status alma__cache_find(alma__cache *c, const char *name, char *full, size_t n);
alma_status alma__cache_delete(alma__cache *c, const char *name);
alma_status alma__cache_delete_all(alma__cache *c, int *n_deleted);
/* Removes stored graphs (states, logs and benchmark records stay), temporary files left by dead
 * processes and unreadable entries. */
alma_status alma__cache_clean(alma__cache *c, int *n_graphs, int *n_tmp, int *n_corrupt);
alma_status alma__cache_print(alma__cache *c, const char *name, FILE *f);
/* One row per build and benchmark (latency mode and each throughput configuration). */
alma_status alma__cache_report_csv(alma__cache *c, FILE *f);

/* Writes data to path atomically: a temporary file in the same directory, fsync, rename, fsync
 * of the directory. */
alma_status alma__write_atomic(const char *path, const void *data, size_t n);

#endif
