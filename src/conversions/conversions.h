/* Conversion options: a chain STEP+STEP+...+RUNTIME (zero or more passes, then one runtime).
 * The preset table (conversions.c) is the single source of truth for numeric IDs. */
#ifndef ALMA_CONVERSIONS_H
#define ALMA_CONVERSIONS_H

#include "passes/pass.h"
#include "runtimes/runtime.h"

#define ALMA_MAX_CHAIN 8

typedef struct alma_conversion {
  char name[128];                       /* canonical "FOLD+EAGER" */
  int id;                               /* preset ID, or -1 for a chain given by name only */
  int n_passes;
  const alma_pass *passes[ALMA_MAX_CHAIN];
  const alma_runtime *runtime;
} alma_conversion;

typedef struct alma_preset {
  int id;
  const char *name;          /* "FOLD+EAGER" */
  const char *description;
  /* What it needs to be available, for `alma list` ("oneDNN library", "CPU with AVX512_BF16",
   * "CUDA GPU"); NULL = nothing beyond alma itself. Availability itself is decided by the runtime's
   * init(), which gives the precise reason. */
  const char *requires;
} alma_preset;

int alma__preset_count(void);
const alma_preset *alma__preset_at(int i);

/* Parses one conversion: a preset ID ("3"), or a chain name, case-insensitive ("fold+eager").
 * Unknown step or runtime, empty step, or a chain not ending in exactly one runtime → ALMA_ERR_INVALID_ARG
 * whose message names the bad part and suggests the closest valid names. */
alma_status alma__conversion_parse(const char *spec, alma_conversion *out);

/* Whether the conversion can run here: ALMA_OK, or ALMA_ERR_UNAVAILABLE with the reason. */
alma_status alma__conversion_available(const alma_conversion *c);

#endif
