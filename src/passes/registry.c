/* Graph passes compiled into this build, in the order `alma list` shows them. */
#include <strings.h>

#include "passes/pass.h"

extern const alma_pass alma__pass_fold;
extern const alma_pass alma__pass_fuse;
extern const alma_pass alma__pass_int8_dynamic;
extern const alma_pass alma__pass_int8_static;
extern const alma_pass alma__pass_qlinear;
extern const alma_pass alma__pass_bf16;
extern const alma_pass alma__pass_fp16;

static const alma_pass *const passes[] = {
    &alma__pass_fold,
    &alma__pass_fuse,
    &alma__pass_int8_dynamic,
    &alma__pass_int8_static,
    &alma__pass_qlinear,
    &alma__pass_bf16,
    &alma__pass_fp16,
};

int alma__pass_count(void) { return (int)(sizeof passes / sizeof passes[0]); }
const alma_pass *alma__pass_at(int i) { return i >= 0 && i < alma__pass_count() ? passes[i] : NULL; }
const alma_pass *alma__pass_find(const char *name) {
  for (int i = 0; i < alma__pass_count(); i++)
    if (!strcasecmp(passes[i]->name, name)) return passes[i];
  return NULL;
}
