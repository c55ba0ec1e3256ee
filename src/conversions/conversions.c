/* The preset table (single source of truth for IDs) and the STEP+...+RUNTIME parser. */
#include <ctype.h>
#include <strings.h>

#include "conversions/conversions.h"

/* IDs are stable: never renumber; append new presets. */
static const alma_preset presets[] = {
    {0, "EAGER", "reference kernels, no graph passes (the baseline every output is checked against)", NULL},
    {1, "FOLD+EAGER", "constant folding, Identity/Dropout removal and dead-node elimination, then EAGER", NULL},
    {2, "FUSE+EAGER", "Conv/Gemm/MatMul epilogue fusion (BatchNorm, bias, residual, activation), LayerNorm/GELU/attention subgraphs, then EAGER", NULL},
    {3, "FOLD+FUSE+EAGER", "constant folding, then FUSE, then EAGER", NULL},
    {10, "DNNL", "oneDNN primitives with post-op fusion and blocked layouts; other nodes on EAGER", "oneDNN library (libdnnl)"},
    {11, "FOLD+DNNL", "constant folding, then oneDNN (DNNL)", "oneDNN library (libdnnl)"},
    {12, "FOLD+FUSE+DNNL", "constant folding and graph fusion (BatchNorm, LayerNorm, GELU, attention), then oneDNN", "oneDNN library (libdnnl)"},
    {20, "BLAS", "im2col+SGEMM Conv, Gemm, MatMul through OpenBLAS with fused bias/residual/activation; other nodes on EAGER", "CBLAS library (OpenBLAS or BLIS)"},
    {21, "FOLD+BLAS", "constant folding, then OpenBLAS (BLAS)", "CBLAS library (OpenBLAS or BLIS)"},
    {22, "FOLD+FUSE+BLAS", "constant folding and graph fusion, then OpenBLAS (BLAS)", "CBLAS library (OpenBLAS or BLIS)"},
    {30, "XNNPACK", "XNNPACK subgraphs (NHWC, own thread pool) for connected float32 conv/pool/fc/elementwise nodes; other nodes on EAGER", "XNNPACK library (libxnnpack-dev, libpthreadpool-dev)"},
    {31, "FOLD+XNNPACK", "constant folding, then XNNPACK", "XNNPACK library (libxnnpack-dev, libpthreadpool-dev)"},
    {32, "FOLD+FUSE+XNNPACK", "constant folding and graph fusion, then XNNPACK", "XNNPACK library (libxnnpack-dev, libpthreadpool-dev)"},
    {40, "INT8_DYNAMIC+EAGER", "int8 weights per channel, activations quantized per batch at run time (MatMulInteger/ConvInteger), on EAGER", NULL},
    {41, "INT8_STATIC+EAGER", "post-training static int8 (QDQ graph, calibrated activations) on EAGER, which runs it in float: the accuracy reference for int8 runtimes", NULL},
    {42, "FOLD+INT8_STATIC+EAGER", "constant folding, then static int8 quantization, on EAGER", NULL},
    {43, "BF16+EAGER", "bfloat16 weights and activations (Conv/Gemm/MatMul and the ops between), float32 elsewhere, on EAGER, which emulates bfloat16 arithmetic: the accuracy reference for bf16 runtimes, not a speed option", "CPU with AVX512_BF16 or AMX-BF16"},
    {44, "FOLD+INT8_STATIC+DNNL", "constant folding, static int8 quantization, then oneDNN: QDQ conv/matmul clusters as int8 primitives (u8/s8 sources, per-channel s8 weights, requantized int8 outputs), Q/DQ as reorders", "oneDNN library (libdnnl)"},
    {45, "INT8_STATIC+DNNL", "static int8 quantization (QDQ graph) run by oneDNN: int8 convolutions/matmuls between QuantizeLinear/DequantizeLinear pairs, float elsewhere", "oneDNN library (libdnnl)"},
    {46, "FOLD+INT8_STATIC+XNNPACK", "constant folding, static int8 quantization, then XNNPACK: QDQ conv/matmul clusters and QLinear ops in int8 (qint8, per-channel weights), the rest in float", "XNNPACK library (libxnnpack-dev, libpthreadpool-dev)"},
    {47, "INT8_STATIC+XNNPACK", "static int8 quantization (QDQ graph) run by XNNPACK: int8 convolutions between QuantizeLinear/DequantizeLinear pairs, float elsewhere", "XNNPACK library (libxnnpack-dev, libpthreadpool-dev)"},
    {48, "FOLD+BF16+DNNL", "constant folding, bfloat16 weights and activations, then oneDNN's bf16 primitives (blocked bf16 layouts between them)", "oneDNN library (libdnnl); CPU with AVX512_BF16 or AMX-BF16"},
    {49, "FOLD+FUSE+BF16+DNNL", "constant folding and fusion in float32 (BatchNorm folded before rounding), bfloat16, then oneDNN with post-ops", "oneDNN library (libdnnl); CPU with AVX512_BF16 or AMX-BF16"},
    {50, "FOLD+INT8_DYNAMIC+DNNL", "constant folding, dynamic int8 quantization, then oneDNN: each DynamicQuantizeLinear -> ConvInteger/MatMulInteger -> scale, bias, activation chain as one int8 convolution/matmul taking the batch's scale and zero point at run time", "oneDNN library (libdnnl)"},
    {51, "INT8_DYNAMIC+DNNL", "dynamic int8 quantization (int8 weights, activations quantized per batch) run by oneDNN's int8 primitives", "oneDNN library (libdnnl)"},
    {60, "ORT", "ONNX Runtime, CPU provider, every graph optimization (its own fusions and layouts), threads from --threads", "ONNX Runtime (onnxruntime in the Python environment ALMA_ORT_PYTHON names)"},
    {61, "ORT_BASIC", "ONNX Runtime at graph optimization level basic (constant folding, redundant nodes removed, no fusions)", "ONNX Runtime (onnxruntime in the Python environment ALMA_ORT_PYTHON names)"},
    {62, "FOLD+ORT", "alma's constant folding, then ONNX Runtime with every optimization", "ONNX Runtime (onnxruntime in the Python environment ALMA_ORT_PYTHON names)"},
    {63, "INT8_STATIC+ORT", "alma's static int8 quantization (QDQ graph, calibrated on the data), run by ONNX Runtime's int8 kernels", "ONNX Runtime (onnxruntime in the Python environment ALMA_ORT_PYTHON names)"},
    {64, "FOLD+INT8_STATIC+ORT", "constant folding, static int8 quantization, then ONNX Runtime", "ONNX Runtime (onnxruntime in the Python environment ALMA_ORT_PYTHON names)"},
    {70, "OPENVINO", "Intel OpenVINO on the CPU device: the whole graph as ONNX, compiled with inference precision f32 (its own fusions and layouts), threads from --threads", "OpenVINO (the openvino wheel in .venv-openvino, found at build time)"},
    {71, "FOLD+OPENVINO", "alma's constant folding, then OpenVINO (f32)", "OpenVINO (the openvino wheel in .venv-openvino, found at build time)"},
    {72, "OPENVINO_BF16", "OpenVINO with inference precision bf16: it runs what it can in bfloat16 (AMX/AVX512_BF16), the rest in f32; judged by accuracy", "OpenVINO; CPU with AVX512_BF16 or AMX-BF16"},
    {73, "FOLD+OPENVINO_BF16", "constant folding, then OpenVINO with inference precision bf16", "OpenVINO; CPU with AVX512_BF16 or AMX-BF16"},
    {74, "INT8_STATIC+OPENVINO", "alma's static int8 quantization (QDQ graph, calibrated on the data), run by OpenVINO's int8 kernels", "OpenVINO (the openvino wheel in .venv-openvino, found at build time)"},
    {75, "FOLD+INT8_STATIC+OPENVINO", "constant folding, static int8 quantization, then OpenVINO", "OpenVINO (the openvino wheel in .venv-openvino, found at build time)"},
    {80, "CUDA", "NVIDIA GPU: cuDNN convolutions, cuBLAS Gemm/MatMul, alma's CUDA kernels for elementwise, normalization, softmax, pooling and layout nodes (float32); other nodes on EAGER on the host, their copies counted", "NVIDIA GPU and driver; alma built with nvcc, cuBLAS and cuDNN found at run time"},
    {81, "FOLD+CUDA", "constant folding, then CUDA", "NVIDIA GPU and driver; alma built with nvcc, cuBLAS and cuDNN found at run time"},
};

/* ---- closest names, for error messages ------------------------------------------------------ */
static int lev(const char *a, const char *b) {
  /* Levenshtein distance, case-insensitive; names are short (< 64). */
  int la = (int)strlen(a), lb = (int)strlen(b);
  if (la > 63 || lb > 63) return 99;
  int d[64][64];
  for (int i = 0; i <= la; i++) d[i][0] = i;
  for (int j = 0; j <= lb; j++) d[0][j] = j;
  for (int i = 1; i <= la; i++)
    for (int j = 1; j <= lb; j++) {
      int cost = toupper((unsigned char)a[i - 1]) != toupper((unsigned char)b[j - 1]);
      int v = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
      if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
      d[i][j] = v;
    }
  return d[la][lb];
}

static int close_enough(int dist, const char *word) {
  int len = (int)strlen(word);
  return dist <= (len <= 4 ? 1 : len <= 8 ? 2 : len / 3);
}

/* The step name nearest to `bad` (passes and runtimes), or NULL if none is close. */
static const char *closest_step(const char *bad, int want_runtime) {
  const char *best = NULL;
  int bd = 1 << 20;
  int nr = alma__runtime_count(), np = alma__pass_count();
  for (int i = 0; i < nr + np; i++) {
    int is_rt = i < nr;
    if (is_rt != want_runtime) continue;
    const char *name = is_rt ? alma__runtime_at(i)->name : alma__pass_at(i - nr)->name;
    int d = lev(bad, name);
    if (d < bd) bd = d, best = name;
  }
  return best && close_enough(bd, bad) ? best : NULL;
}

/* Appends "; did you mean X?" with a corrected chain and the nearest presets to the message. */
static alma_status with_suggestions(alma_status st, char *const *steps, int n, int bad_index, const char *spec) {
  char fixed[256] = "", msg[512] = "";
  const char *rep = bad_index >= 0 ? closest_step(steps[bad_index], bad_index == n - 1) : NULL;
  if (rep) {
    for (int i = 0; i < n; i++) {
      strncat(fixed, i ? "+" : "", sizeof fixed - strlen(fixed) - 1);
      strncat(fixed, i == bad_index ? rep : steps[i], sizeof fixed - strlen(fixed) - 1);
    }
    snprintf(msg, sizeof msg, "%s", fixed);
  }
  for (int i = 0; i < alma__preset_count(); i++) {
    if (!close_enough(lev(spec, presets[i].name), spec) || !strcasecmp(presets[i].name, fixed)) continue;
    size_t len = strlen(msg);
    snprintf(msg + len, sizeof msg - len, "%s%s", len ? " or " : "", presets[i].name);
  }
  if (msg[0]) {
    char full[4096];
    snprintf(full, sizeof full, "%s; did you mean %s?", alma_last_error(), msg);
    alma__errorf(st, "%s", full);
  }
  return st;
}

int alma__preset_count(void) { return (int)(sizeof presets / sizeof presets[0]); }
const alma_preset *alma__preset_at(int i) { return i >= 0 && i < alma__preset_count() ? &presets[i] : NULL; }

alma_status alma__conversion_parse(const char *spec, alma_conversion *out) {
  memset(out, 0, sizeof *out);
  out->id = -1;
  if (!spec || !spec[0]) return alma__errorf(ALMA_ERR_INVALID_ARG, "empty conversion name");
  char buf[256];
  /* trim */
  while (isspace((unsigned char)*spec)) spec++;
  size_t len = strlen(spec);
  while (len && isspace((unsigned char)spec[len - 1])) len--;
  if (len == 0 || len >= sizeof buf) return alma__errorf(ALMA_ERR_INVALID_ARG, "invalid conversion name '%s'", spec);
  memcpy(buf, spec, len);
  buf[len] = '\0';
  int all_digits = 1;
  for (size_t i = 0; i < len; i++) all_digits &= isdigit((unsigned char)buf[i]) != 0;
  if (all_digits) {
    long id = strtol(buf, NULL, 10);
    for (int i = 0; i < alma__preset_count(); i++)
      if (presets[i].id == id) {
        ALMA_TRY(alma__conversion_parse(presets[i].name, out));
        out->id = presets[i].id;
        return ALMA_OK;
      }
    return alma__errorf(ALMA_ERR_INVALID_ARG, "unknown conversion ID %ld (IDs 0..%d; `alma list` shows them)", id,
                        presets[alma__preset_count() - 1].id);
  }
  for (size_t i = 0; i < len; i++) buf[i] = (char)toupper((unsigned char)buf[i]);
  char *save = NULL, *steps[ALMA_MAX_CHAIN + 1];
  int n = 0;
  if (buf[0] == '+' || buf[len - 1] == '+' || strstr(buf, "++"))
    return alma__errorf(ALMA_ERR_INVALID_ARG, "conversion '%s' has an empty step", spec);
  for (char *tok = strtok_r(buf, "+", &save); tok; tok = strtok_r(NULL, "+", &save)) {
    if (n == ALMA_MAX_CHAIN + 1)
      return alma__errorf(ALMA_ERR_INVALID_ARG, "conversion '%s' has more than %d steps", spec, ALMA_MAX_CHAIN);
    steps[n++] = tok;
  }
  const alma_runtime *rt = alma__runtime_find(steps[n - 1]);
  if (!rt) {
    char names[512] = "";
    for (int i = 0; i < alma__runtime_count(); i++) {
      strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
      strncat(names, alma__runtime_at(i)->name, sizeof names - strlen(names) - 1);
    }
    if (alma__pass_find(steps[n - 1]))
      return alma__errorf(ALMA_ERR_INVALID_ARG, "conversion '%s' must end with a runtime (one of: %s), not the pass %s",
                          spec, names, steps[n - 1]);
    alma__errorf(ALMA_ERR_INVALID_ARG, "conversion '%s': unknown runtime '%s' (runtimes: %s)", spec, steps[n - 1], names);
    return with_suggestions(ALMA_ERR_INVALID_ARG, steps, n, n - 1, spec);
  }
  for (int i = 0; i < n - 1; i++) {
    const alma_pass *p = alma__pass_find(steps[i]);
    if (!p) {
      char names[512] = "";
      for (int k = 0; k < alma__pass_count(); k++) {
        strncat(names, k ? ", " : "", sizeof names - strlen(names) - 1);
        strncat(names, alma__pass_at(k)->name, sizeof names - strlen(names) - 1);
      }
      if (alma__runtime_find(steps[i]))
        return alma__errorf(ALMA_ERR_INVALID_ARG, "conversion '%s': runtime %s must be the last step", spec, steps[i]);
      alma__errorf(ALMA_ERR_INVALID_ARG, "conversion '%s': unknown step '%s' (passes: %s)", spec, steps[i], names);
      return with_suggestions(ALMA_ERR_INVALID_ARG, steps, n, i, spec);
    }
    out->passes[out->n_passes++] = p;
  }
  out->runtime = rt;
  out->name[0] = '\0';
  for (int i = 0; i < out->n_passes; i++) {
    strncat(out->name, out->passes[i]->name, sizeof out->name - strlen(out->name) - 1);
    strncat(out->name, "+", sizeof out->name - strlen(out->name) - 1);
  }
  strncat(out->name, rt->name, sizeof out->name - strlen(out->name) - 1);
  for (int i = 0; i < alma__preset_count(); i++)
    if (!strcmp(presets[i].name, out->name)) out->id = presets[i].id;
  return ALMA_OK;
}

alma_status alma__conversion_available(const alma_conversion *c) {
  for (int i = 0; i < c->n_passes; i++) {
    if (c->runtime->onnx_only && c->passes[i]->emits_alma_ops)
      return alma__errorf(ALMA_ERR_UNAVAILABLE,
                          "step %s: its output holds alma-domain operators (FusedConv, Attention...), which runtime "
                          "%s cannot run: it takes standard ONNX only (leave %s out of the chain)",
                          c->passes[i]->name, c->runtime->name, c->passes[i]->name);
    if (c->passes[i]->available) {
      alma_status st = c->passes[i]->available();
      if (st != ALMA_OK) return alma__error_prefix(st, "step %s: ", c->passes[i]->name);
    }
    /* float16 is a speed option only where the runtime computes in it: none of the optimized
     * runtimes here does (oneDNN 2.6 has no AVX512-FP16 kernels), so their float16 nodes would run
     * on EAGER's emulation, slower than float32. FP16+EAGER stays: the accuracy reference. */
    if (!strcmp(c->passes[i]->name, "FP16") && strcmp(c->runtime->name, "EAGER"))
      return alma__errorf(ALMA_ERR_UNAVAILABLE,
                          "step FP16: runtime %s has no float16 kernels (its float16 nodes would run on EAGER's "
                          "float32 emulation, slower than float32); FP16+EAGER gives the accuracy of float16",
                          c->runtime->name);
  }
  return c->runtime->init();
}
