/* Bindings of a graph's symbolic input dims for static inference, shared by FOLD and FUSE.
 *
 * Binding every symbol to one value (2, then 3) is what passes did first, and it breaks on graphs
 * whose symbols are related: an LLM decode graph declares attention_mask [batch, total] and
 * past_key [batch_kv, H, past, D], which agree only when total = past + 1 and batch_kv = batch. Under
 * one value for all, the Concat of past and new keys fails and inference stops at the first layer,
 * so nothing after it has a shape (FUSE matched its LayerNorms in the first layer only); under
 * distinct values the same happens. alma__symbind_discover learns such relations: starting from
 * distinct values, it greedily ties one symbol to another (equal, or one more or one less) or to
 * the sum of two others (total = past + seq) while that lets inference know more values. alma__symbind_infer then infers under the relations with
 * the free symbols at distinct values, in one of two variants: in order of appearance and reversed
 * (so a clamped difference of two free symbols is positive in one of them), and every free symbol
 * different between the variants (so a dim the same in both does not depend on them). */
#ifndef ALMA_GRAPH_SYMBIND_H
#define ALMA_GRAPH_SYMBIND_H

#include "graph/infer.h"

typedef struct alma_symbind {
  int n_sym;      /* distinct symbols (by name; an unnamed dim is its own) */
  int *sym;       /* per graph input and dim (input * ALMA_MAX_RANK + d): symbol, or -1 if fixed */
  int *coef;      /* per symbol s, per symbol r: coef[s * n_sym + r]; a symbol's value is the sum
                   * of coef times the free symbols' values, plus off (free: its own value) */
  int *off;
  int *free_;     /* per symbol: 1 when free */
  int n_tied;     /* symbols tied to others */
} alma_symbind;

/* Learns relations between g's symbolic input dims (see above). Zero symbols is not an error
 * (n_sym 0). Inference errors that cannot be blamed on the bindings are returned. */
alma_status alma__symbind_discover(const alma_graph *g, int64_t max_fold_elems, alma_symbind *b);
/* Variant of alma__symbind_infer binding the free symbols to large values (above 500): what a
 * pass folds must come out the same there too, or it depends on the symbols (two stride-2
 * convolutions make 2, 3 and 4 all 1). */
#define ALMA_SYMBIND_LARGE 2
/* Static inference under b's relations, variant 0, 1 or ALMA_SYMBIND_LARGE. Returns 0 (and *r unset) when b has no
 * symbols or inference fails; else 1. */
int alma__symbind_infer(const alma_graph *g, const alma_symbind *b, int variant, int64_t max_fold_elems,
                        alma_infer_result *r);
void alma__symbind_free(alma_symbind *b);

#endif
