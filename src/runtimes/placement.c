/* Placement as data: the names of placements and reasons, and the per-conversion summary the
 * results carry (docs/json.md, `placement`). */
#include <cjson/cJSON.h>

#include "runtimes/placement.h"

const char *alma__place_name(alma__place p) {
  static const char *names[ALMA_PLACE_COUNT] = {"runtime", "fused", "eager", "partial", "graph"};
  return p >= 0 && p < ALMA_PLACE_COUNT ? names[p] : "?";
}

const char *alma__decline_name(alma__decline r) {
  static const char *names[ALMA_DECLINE_COUNT] = {"", "op", "dtype", "attribute", "shape", "dynamic", "library", "choice"};
  return r >= 0 && r < ALMA_DECLINE_COUNT ? names[r] : "?";
}

void alma__placement_count(const alma__place_graph *graphs, int n, alma__place_counts *c) {
  memset(c, 0, sizeof *c);
  for (int gi = 0; gi < n; gi++)
    for (int i = 0; i < graphs[gi].g->n_nodes; i++) {
      const alma__placement *pl = &graphs[gi].nodes[i];
      c->nodes++;
      if (pl->place >= 0 && pl->place < ALMA_PLACE_COUNT) c->by_place[pl->place]++;
      if (pl->reason > ALMA_DECLINE_NONE && pl->reason < ALMA_DECLINE_COUNT) c->by_reason[pl->reason]++;
    }
}

static void add_counts(cJSON *o, const int *by_place, const int *by_reason) {
  cJSON *pc = cJSON_AddObjectToObject(o, "placements");
  for (int k = 0; k < ALMA_PLACE_COUNT; k++) cJSON_AddNumberToObject(pc, alma__place_name((alma__place)k), by_place[k]);
  cJSON *rc = cJSON_AddObjectToObject(o, "declined");
  for (int k = 1; k < ALMA_DECLINE_COUNT; k++)
    if (by_reason[k]) cJSON_AddNumberToObject(rc, alma__decline_name((alma__decline)k), by_reason[k]);
}

typedef struct {
  const char *op;
  int nodes, by_place[ALMA_PLACE_COUNT], by_reason[ALMA_DECLINE_COUNT];
  const char *detail; /* the first declined node's words */
} op_row;

alma_status alma__placement_json(const char *runtime, const alma__place_graph *graphs, int n, char **json_out) {
  *json_out = NULL;
  alma__place_counts c;
  alma__placement_count(graphs, n, &c);
  op_row *rows = calloc((size_t)c.nodes + 1, sizeof *rows);
  cJSON *o = cJSON_CreateObject();
  if (!rows || !o) {
    free(rows);
    cJSON_Delete(o);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  int nr = 0;
  for (int gi = 0; gi < n; gi++)
    for (int i = 0; i < graphs[gi].g->n_nodes; i++) {
      const char *op = graphs[gi].g->nodes[i].op_type;
      const alma__placement *pl = &graphs[gi].nodes[i];
      int r = 0;
      while (r < nr && strcmp(rows[r].op, op)) r++;
      if (r == nr) rows[nr++].op = op;
      rows[r].nodes++;
      if (pl->place >= 0 && pl->place < ALMA_PLACE_COUNT) rows[r].by_place[pl->place]++;
      if (pl->reason > ALMA_DECLINE_NONE && pl->reason < ALMA_DECLINE_COUNT) rows[r].by_reason[pl->reason]++;
      if (alma__place_fell_back(pl->place) && !rows[r].detail && pl->detail && pl->detail[0]) rows[r].detail = pl->detail;
    }
  cJSON_AddStringToObject(o, "runtime", runtime ? runtime : "");
  cJSON_AddNumberToObject(o, "graphs", n);
  cJSON_AddNumberToObject(o, "nodes", c.nodes);
  add_counts(o, c.by_place, c.by_reason);
  cJSON *ops = cJSON_AddArrayToObject(o, "op_types");
  for (int r = 0; r < nr; r++) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "op_type", rows[r].op);
    cJSON_AddNumberToObject(e, "nodes", rows[r].nodes);
    add_counts(e, rows[r].by_place, rows[r].by_reason);
    if (rows[r].detail) cJSON_AddStringToObject(e, "detail", rows[r].detail);
    cJSON_AddItemToArray(ops, e);
  }
  free(rows);
  *json_out = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return *json_out ? ALMA_OK : alma__errorf(ALMA_ERR_NOMEM, "out of memory");
}

void alma__place_graphs_free(alma__place_graph *graphs, int n) {
  for (int i = 0; graphs && i < n; i++) free(graphs[i].nodes);
  free(graphs);
}

void alma__placement_fill(alma__placement *nodes, int n, alma__place place) {
  for (int i = 0; i < n; i++) nodes[i] = (alma__placement){.place = place};
}
