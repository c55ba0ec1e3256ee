/* Internal access to a session's parts, for code outside session.c (alma_session_save in
 * src/onnx/save.c). */
#ifndef ALMA_SESSION_H
#define ALMA_SESSION_H

#include "graph/model.h"
#include "runtimes/placement.h"
#include "runtimes/runtime.h"

/* The converted graph (after the conversion's passes); lives as long as the session. */
const alma_graph *alma__session_graph(const alma_session *s);
/* The model the session was created from. */
const alma_model *alma__session_model(const alma_session *s);

/* The name of the session's runtime ("DNNL"). */
const char *alma__session_runtime_name(const alma_session *s);

/* The runtime's facts about its plan (alma_runtime.info) as a JSON object's text in buf, or "" when
 * it has none. */
alma_status alma__session_runtime_info(alma_session *s, char *buf, size_t n);

/* Per-node profile (alma bench --profile): from profile_start on, every run times each node (a
 * fused group once), in the model's graph and in the If branches compiled for the runtime;
 * profile_read gives the time since: *graphs (n of them; free with alma__prof_graphs_free) holds the
 * model's graph first, then the branches that ran. ALMA_ERR_UNSUPPORTED, naming the runtime, when
 * it has no per-node profile. */
alma_status alma__session_profile_start(alma_session *s);
alma_status alma__session_profile_read(alma_session *s, alma__prof_graph **graphs, int *n);
void alma__prof_graphs_free(alma__prof_graph *graphs, int n);

/* Per-node placement as data (alma_runtime.placement) as of now (after a run it includes what the
 * runtime declined at run time): *graphs (n of them; free with alma__place_graphs_free) holds the
 * model's graph first, then each If branch compiled for the runtime. */
alma_status alma__session_placement(alma_session *s, alma__place_graph **graphs, int *n);
/* The same summarized for the results (alma__placement_json), malloc'd. */
alma_status alma__session_placement_json(alma_session *s, char **json_out);

#endif
