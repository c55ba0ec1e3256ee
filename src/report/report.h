/* Writer entry points beyond the public API (include/alma/bench.h): sweep-level facts that an
 * alma_results does not hold, given by the caller (the alma CLI). */
#ifndef ALMA_REPORT_H
#define ALMA_REPORT_H

#include "bench/bench.h"

/* A preset that a sweep without an explicit conversion list left out because it cannot run here. */
typedef struct alma__unavailable {
  int id;
  const char *name;    /* "FOLD+BF16+DNNL" */
  const char *reason;  /* why it cannot run here */
} alma__unavailable;

/* alma_results_to_json / alma_results_save_json with the top-level "unavailable" list
 * (docs/json.md): u[0..n_u), or null when n_u < 0 (not known: the conversions were given
 * explicitly, or the caller cannot tell). */
alma_status alma__results_to_json_ex(const alma_results *r, int include_raw, const alma__unavailable *u, int n_u,
                                     char **json_out);
alma_status alma__results_save_json_ex(const alma_results *r, const char *path, int include_raw,
                                       const alma__unavailable *u, int n_u);

/* The text report's profile lines (alma bench --profile, alma run --profile): the 10 slowest
 * entries and the op-type table; NULL prints nothing. */
void alma__profile_print(const alma_profile *p, FILE *f);

/* The HTML report (html.c, docs/report.md): one self-contained page at path ("-": standard output)
 * with a comparison (alma compare's JSON document, may be NULL) and then a section per results
 * set, headed by labels[i] when there are several (labels may be NULL). title NULL: from the
 * model's file name. */
struct cJSON;
alma_status alma__html_write(const char *path, const alma_results *const *rs, const char *const *labels, int n,
                             const struct cJSON *compare, const char *title);
/* alma bench --trace (trace.c, docs/report.md): every profiled row as Chrome trace-event JSON,
 * malloc'd / written to path ("-": standard output). */
alma_status alma__trace_to_json(const alma_results *r, char **json_out);
alma_status alma__trace_save(const alma_results *r, const char *path);
/* The pieces, for a page of one's own. */
void alma__html_results_section(const alma_results *r, FILE *f, const char *heading);
void alma__html_compare_section(const struct cJSON *compare, FILE *f);

#endif
