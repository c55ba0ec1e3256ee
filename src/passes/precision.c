/* BF16 and FP16: reduced-precision graphs (weights and activations in bfloat16 / float16).
 *
 * Availability: the point of these steps is speed, which needs the CPU to compute in that type:
 * AVX512_BF16 or AMX_BF16 for bfloat16, AVX512_FP16 or AMX_FP16 for float16 (read from
 * /proc/cpuinfo). Elsewhere the pass fails with ALMA_ERR_UNAVAILABLE naming the missing feature,
 * since the arithmetic would only be emulated through float32 and be slower than float32. The
 * environment variable ALMA_FORCE_BF16=1 / ALMA_FORCE_FP16=1 runs the transform anyway (tests, and
 * accuracy studies on any machine: EAGER's kernels accept both types and compute in float32).
 *
 * The transform, in the spirit of automatic mixed precision:
 *  - compute ops (Conv, ConvTranspose, Gemm, MatMul, and FUSE's alma.FusedConv/FusedGemm/
 *    FusedMatMul) run in the low type;
 *  - type-agnostic and elementwise ops (activations, Add/Mul..., pooling, BatchNormalization,
 *    Concat, Reshape, Transpose, Slice, Pad, Resize ...) follow: low when one of their float inputs
 *    already is, so chains stay low without Casts in between;
 *  - everything else (Softmax, normalizations, reductions, Exp/Log/Pow, ...) stays float32;
 *  - a node goes low only when its op's inference accepts the low type (probed with its real
 *    shapes), so ops EAGER cannot run in that type stay float32;
 *  - Cast nodes convert at the boundaries (one per value and direction); constant inputs are
 *    converted once (round to nearest even); graph inputs and outputs keep float32, so the
 *    converted model takes and returns the same types.
 * ONNX's schemas admit float16 for all these ops; bfloat16 only for some before opset 22 (not
 * Conv or pooling), so a saved BF16 graph may not load in other tools at the model's opset. */
#include <strings.h>

#include "passes/quant.h"

/* ---- CPU features ------------------------------------------------------------------------------ */

/* Whether /proc/cpuinfo's first "flags" line lists `flag`. */
static int cpu_flag(const char *flag) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return 0;
  char line[8192];
  int found = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5)) continue;
    char *p = strchr(line, ':');
    for (char *save = NULL, *tok = p ? strtok_r(p + 1, " \t\n", &save) : NULL; tok; tok = strtok_r(NULL, " \t\n", &save))
      if (!strcmp(tok, flag)) found = 1;
    break;
  }
  fclose(f);
  return found;
}

static int env_on(const char *name) {
  const char *v = getenv(name);
  return v && v[0] && strcmp(v, "0") && strcasecmp(v, "false") && strcasecmp(v, "off");
}

/* ---- which ops, which inputs ------------------------------------------------------------------- */

typedef struct {
  const char *op;
  int compute;        /* 1: always low; 0: follows its inputs */
  int slots;          /* bit k: input k has the data type T; -1: every input */
} op_rule;

static const op_rule rules[] = {
    {"Conv", 1, 0x7}, {"ConvTranspose", 1, 0x7}, {"Gemm", 1, 0x7}, {"MatMul", 1, 0x3},
    {"Relu", 0, 0x1}, {"LeakyRelu", 0, 0x1}, {"Clip", 0, 0x7}, {"Sigmoid", 0, 0x1}, {"Tanh", 0, 0x1},
    {"HardSigmoid", 0, 0x1}, {"HardSwish", 0, 0x1}, {"PRelu", 0, 0x3}, {"Elu", 0, 0x1}, {"Gelu", 0, 0x1},
    {"Add", 0, 0x3}, {"Sub", 0, 0x3}, {"Mul", 0, 0x3}, {"Div", 0, 0x3}, {"Max", 0, -1}, {"Min", 0, -1},
    {"Sum", 0, -1}, {"Neg", 0, 0x1}, {"Abs", 0, 0x1},
    {"MaxPool", 0, 0x1}, {"AveragePool", 0, 0x1}, {"GlobalAveragePool", 0, 0x1}, {"GlobalMaxPool", 0, 0x1},
    {"BatchNormalization", 0, 0x1f},
    {"Concat", 0, -1}, {"Reshape", 0, 0x1}, {"Flatten", 0, 0x1}, {"Transpose", 0, 0x1}, {"Squeeze", 0, 0x1},
    {"Unsqueeze", 0, 0x1}, {"Slice", 0, 0x1}, {"Gather", 0, 0x1}, {"Split", 0, 0x1}, {"Pad", 0, 0x5},
    {"Resize", 0, 0x1}, {"Identity", 0, 0x1}, {"Dropout", 0, 0x1}, {"Expand", 0, 0x1}, {"Tile", 0, 0x1},
    {"DepthToSpace", 0, 0x1}, {"SpaceToDepth", 0, 0x1},
};

/* FUSE's fused compute nodes (src/ops/fused.h): every input has the type T (FusedConv's residual Z
 * and FusedMatMul's bias too), so FUSE may run before this pass (BatchNorm folded in float32, the
 * weights rounded once). alma.Attention is left alone: Softmax stays float32 here. */
static const op_rule alma_rules[] = {{"FusedConv", 1, 0xf}, {"FusedGemm", 1, 0x7}, {"FusedMatMul", 1, 0x7}};

static const op_rule *rule_for(const alma_node *n) {
  if (n->n_implicit) return NULL;
  const op_rule *tab = rules;
  size_t nr = sizeof rules / sizeof rules[0];
  if (!strcmp(n->domain, "alma")) {
    tab = alma_rules;
    nr = sizeof alma_rules / sizeof alma_rules[0];
  } else if (n->domain[0]) {
    return NULL;
  }
  for (size_t i = 0; i < nr; i++)
    if (!strcmp(tab[i].op, n->op_type)) return &tab[i];
  return NULL;
}

static int in_slot(const op_rule *r, int k) { return r->slots < 0 || (k < 31 && (r->slots >> k) & 1); }

/* A float32 tensor converted to dt (owned). */
static alma_status convert_tensor(const alma_tensor *src, alma_dtype dt, alma_tensor *dst) {
  ALMA_TRY(alma__tensor_alloc(dst, dt, src->rank, src->dims));
  int64_t n = alma_tensor_numel(src);
  const float *s = src->data;
  uint16_t *d = dst->data;
  for (int64_t i = 0; i < n; i++) d[i] = dt == ALMA_DTYPE_BFLOAT16 ? alma__f32_to_bf16(s[i]) : alma__f32_to_f16(s[i]);
  return ALMA_OK;
}

/* Whether node i's op accepts the low type on its T inputs: its infer with the statically inferred
 * shapes (constants converted) must succeed and give low outputs where it gave float32 ones. */
static int probe_low(const alma_graph *g, const alma_infer_result *r, int i, const op_rule *rule, alma_dtype lowt) {
  const alma_node *n = &g->nodes[i];
  if (!n->op || !n->op->infer || n->n_inputs > 64 || n->n_outputs > 16) return 0;
  alma_tensor tin[64], tout[16], conv[64];
  const alma_tensor *in[64];
  int nconv = 0, ok = 1;
  memset(tout, 0, sizeof tout);
  for (int k = 0; k < n->n_inputs; k++) {
    int v = n->inputs[k];
    if (v < 0) {
      in[k] = NULL;
      continue;
    }
    tin[k] = r->info[v];
    tin[k].owns_data = 0;
    if (tin[k].rank < 0) ok = 0; /* shape unknown statically */
    if (in_slot(rule, k) && tin[k].dtype == ALMA_DTYPE_FLOAT32) {
      if (tin[k].data && convert_tensor(&r->info[v], lowt, &conv[nconv]) == ALMA_OK) {
        tin[k] = conv[nconv++];
        tin[k].owns_data = 0;
      } else {
        tin[k].dtype = lowt;
        tin[k].data = NULL;
        tin[k].nbytes = 0;
      }
    }
    in[k] = &tin[k];
  }
  if (ok) {
    alma_status st = n->op->infer(n, in, n->n_inputs, tout, n->n_outputs);
    ok = st == ALMA_OK || st == ALMA_ERR_DYNAMIC;
    for (int k = 0; ok && st == ALMA_OK && k < n->n_outputs; k++) {
      int v = n->outputs[k];
      if (v >= 0 && r->info[v].dtype == ALMA_DTYPE_FLOAT32 && tout[k].dtype != lowt) ok = 0;
    }
    if (st != ALMA_OK) alma__error_clear();
  }
  for (int k = 0; k < n->n_outputs; k++) alma_tensor_free_data(&tout[k]);
  for (int k = 0; k < nconv; k++) alma_tensor_free_data(&conv[k]);
  return ok;
}

/* ---- the pass ---------------------------------------------------------------------------------- */

static alma_status add_cast(alma_graph *g, int v, alma_dtype to, const char *suffix, int *out) {
  int o = alma__q_new_value(g, g->values[v].name, suffix);
  if (o < 0) return ALMA_ERR_NOMEM;
  char nm[700];
  snprintf(nm, sizeof nm, "%.600s/Cast_%s", g->values[v].name, suffix);
  int ci;
  ALMA_TRY(alma__q_add_node(g, "Cast", nm, &v, 1, &o, 1, &ci));
  ALMA_TRY(alma__q_attr_i(g, ci, "to", to));
  *out = o;
  return ALMA_OK;
}

static alma_status precision_available(int bf) {
  if (env_on(bf ? "ALMA_FORCE_BF16" : "ALMA_FORCE_FP16")) return ALMA_OK;
  int have = bf ? cpu_flag("avx512_bf16") || cpu_flag("amx_bf16") : cpu_flag("avx512_fp16") || cpu_flag("amx_fp16");
  if (have) return ALMA_OK;
  return alma__errorf(ALMA_ERR_UNAVAILABLE,
                      "CPU lacks %s: no %s arithmetic here, only emulation slower than float32 (%s=1 converts anyway)",
                      bf ? "avx512_bf16 (and amx_bf16)" : "avx512_fp16 (and amx_fp16)", bf ? "bfloat16" : "float16",
                      bf ? "ALMA_FORCE_BF16" : "ALMA_FORCE_FP16");
}
static alma_status bf16_available(void) { return precision_available(1); }
static alma_status fp16_available(void) { return precision_available(0); }

static alma_status precision_run(alma_graph *g, const alma_pass_opts *opts, alma_dtype lowt) {
  const int bf = lowt == ALMA_DTYPE_BFLOAT16;
  const char *pname = bf ? "BF16" : "FP16", *tname = bf ? "bf16" : "fp16";
  ALMA_TRY(precision_available(bf));
  alma_infer_result r;
  ALMA_TRY(alma__graph_infer(g, NULL, 1, 1 << 16, &r));
  int nn = g->n_nodes, nv0 = g->n_values;
  char *low = calloc((size_t)nn + 1, 1);
  char *is_low_val = calloc((size_t)nv0 + 1, 1); /* value now holds the low type */
  int *cast_lo = malloc(((size_t)nv0 + 1) * sizeof(int)), *cast_hi = malloc(((size_t)nv0 + 1) * sizeof(int));
  int *low_name = malloc(((size_t)nv0 + 1) * sizeof(int)); /* the value holding v's low data */
  alma_status st = ALMA_OK;
  int n_low = 0, n_casts = 0, n_consts = 0;
  if (!low || !is_low_val || !cast_lo || !cast_hi || !low_name) {
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    goto done;
  }
  for (int v = 0; v < nv0; v++) cast_lo[v] = cast_hi[v] = -1;
  /* 1. decide, in topological order */
  for (int i = 0; i < nn; i++) {
    const alma_node *n = &g->nodes[i];
    const op_rule *rule = n->dead ? NULL : rule_for(n);
    if (!rule) continue;
    int any_f32 = 0, follows = 0, bad = 0;
    for (int k = 0; k < n->n_inputs; k++) {
      int v = n->inputs[k];
      if (v < 0 || !in_slot(rule, k)) continue;
      alma_dtype dt = r.info[v].dtype;
      if (dt == ALMA_DTYPE_FLOAT32) any_f32 = 1;
      else bad = 1; /* a T input of another type: leave the node alone */
      if (is_low_val[v]) follows = 1;
    }
    if (bad || !any_f32 || (!rule->compute && !follows)) continue;
    int read_by_subgraph = 0;
    for (int k = 0; k < n->n_outputs; k++)
      if (n->outputs[k] >= 0 && alma__q_used_by_subgraph(g, n->outputs[k])) read_by_subgraph = 1;
    if (read_by_subgraph || !probe_low(g, &r, i, rule, lowt)) continue;
    low[i] = 1;
    n_low++;
    for (int k = 0; k < n->n_outputs; k++) {
      int v = n->outputs[k];
      if (v >= 0 && r.info[v].dtype == ALMA_DTYPE_FLOAT32) is_low_val[v] = 1;
    }
  }
  /* 2. graph outputs keep float32: the low node writes a renamed value, a Cast writes the output */
  for (int v = 0; v < nv0; v++) low_name[v] = v;
  for (int o = 0; o < g->n_outputs && st == ALMA_OK; o++) {
    int v = g->outputs[o];
    if (!is_low_val[v] || low_name[v] != v) continue;
    int p = g->values[v].producer, lv = alma__q_new_value(g, g->values[v].name, tname);
    if (lv < 0 || p < 0) {
      st = lv < 0 ? ALMA_ERR_NOMEM : alma__errorf(ALMA_ERR_INTERNAL, "output '%s' has no producer", g->values[v].name);
      break;
    }
    for (int k = 0; k < g->nodes[p].n_outputs; k++)
      if (g->nodes[p].outputs[k] == v) g->nodes[p].outputs[k] = lv;
    g->values[lv].producer = p;
    low_name[v] = lv;
    char nm[700];
    snprintf(nm, sizeof nm, "%.600s/Cast_float32", g->values[v].name);
    int ci;
    if ((st = alma__q_add_node(g, "Cast", nm, &lv, 1, &v, 1, &ci)) != ALMA_OK) break;
    if ((st = alma__q_attr_i(g, ci, "to", ALMA_DTYPE_FLOAT32)) != ALMA_OK) break;
    n_casts++;
  }
  /* 3. inputs of the original nodes: low T inputs read the low value (a Cast or a converted
   * constant if it is float32), every other reader of a low value reads it as float32 (the graph
   * output's Cast when there is one, else a Cast made for it) */
  for (int i = 0; i < nn && st == ALMA_OK; i++) {
    if (g->nodes[i].dead) continue;
    const op_rule *rule = low[i] ? rule_for(&g->nodes[i]) : NULL;
    for (int k = 0; k < g->nodes[i].n_inputs && st == ALMA_OK; k++) {
      int v = g->nodes[i].inputs[k];
      if (v < 0 || v >= nv0) continue;
      if (rule && in_slot(rule, k)) {
        if (is_low_val[v]) {
          g->nodes[i].inputs[k] = low_name[v];
          continue;
        }
        if (r.info[v].dtype != ALMA_DTYPE_FLOAT32) continue;
        if (cast_lo[v] < 0) {
          if (g->values[v].init) {
            alma_tensor *t;
            const alma_tensor *src = g->values[v].init;
            int c = alma__q_new_const(g, g->values[v].name, tname, lowt, src->rank, src->dims, &t);
            if (c < 0) {
              st = ALMA_ERR_NOMEM;
              break;
            }
            alma_tensor tmp;
            if ((st = convert_tensor(g->values[v].init, lowt, &tmp)) != ALMA_OK) break;
            memcpy(t->data, tmp.data, tmp.nbytes);
            alma_tensor_free_data(&tmp);
            cast_lo[v] = c;
            n_consts++;
          } else {
            if ((st = add_cast(g, v, lowt, tname, &cast_lo[v])) != ALMA_OK) break;
            n_casts++;
          }
        }
        g->nodes[i].inputs[k] = cast_lo[v];
      } else if (is_low_val[v] && low_name[v] == v) {
        /* Shape reads any type: left as is */
        if (!strcmp(g->nodes[i].op_type, "Shape") && !g->nodes[i].domain[0]) continue;
        if (cast_hi[v] < 0) {
          if ((st = add_cast(g, v, ALMA_DTYPE_FLOAT32, "float32", &cast_hi[v])) != ALMA_OK) break;
          n_casts++;
        }
        g->nodes[i].inputs[k] = cast_hi[v];
      }
    }
  }
  if (st == ALMA_OK) {
    alma__q_remove_dead(g);
    st = alma__graph_compact(g);
  }
  if (st == ALMA_OK && opts && opts->verbose)
    fprintf(stderr, "%s: %d of %d nodes in %s, %d constants converted, %d Casts\n", pname, n_low, nn,
            bf ? "bfloat16" : "float16", n_consts, n_casts);
done:
  alma__infer_result_free(&r);
  free(low);
  free(is_low_val);
  free(cast_lo);
  free(cast_hi);
  free(low_name);
  return st;
}

static alma_status bf16_run(alma_graph *g, const alma_pass_opts *opts) {
  return precision_run(g, opts, ALMA_DTYPE_BFLOAT16);
}

static alma_status fp16_run(alma_graph *g, const alma_pass_opts *opts) {
  return precision_run(g, opts, ALMA_DTYPE_FLOAT16);
}

const alma_pass alma__pass_bf16 = {
    .name = "BF16",
    .description = "bfloat16 weights and activations for Conv/Gemm/MatMul and the ops between them, float32 elsewhere "
                   "(needs AVX512_BF16 or AMX)",
    .run = bf16_run,
    .lossy = 1,
    .available = bf16_available,
};

const alma_pass alma__pass_fp16 = {
    .name = "FP16",
    .description = "float16 weights and activations for Conv/Gemm/MatMul and the ops between them, float32 elsewhere "
                   "(needs AVX512_FP16 or AMX-FP16)",
    .run = fp16_run,
    .lossy = 1,
    .available = fp16_available,
};
