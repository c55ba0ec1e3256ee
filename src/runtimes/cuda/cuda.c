/* The CUDA runtime: float32 graphs on an NVIDIA GPU (docs/runtimes/cuda.md).
 *
 * Convolutions run on cuDNN, Gemm and MatMul on cuBLAS, the elementwise, normalization, softmax,
 * pooling and layout nodes on alma's own kernels (cuda_kernels.cu); every other node runs on EAGER
 * on the host, and the copies it costs are counted. Each value lives on the host, the device or
 * both (`on_host`/`on_dev`); a node gets its inputs where it runs. Shapes come from each op's own
 * inference at run time, with the inputs' data where the host has it (a device-only input reads as
 * unknown, and is copied back only if the shape depends on it). Weights are uploaded once, at
 * compile; activations come from a pool of device buffers that a value returns after its last use,
 * so from the second batch on no run allocates. One stream; CUDA events split each run into
 * host-to-device copies of the inputs, compute, and device-to-host copies of the outputs. */
#ifdef ALMA_HAVE_CUDA
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ops/op.h"
#include "runtimes/cuda/cuda_kernels.h"
#include "runtimes/cuda/cuda_lib.h"
#include "runtimes/runtime.h"

#define WS_LIMIT ((size_t)1 << 30) /* largest cuDNN workspace a convolution may ask for */

static const alma__cu_lib *L;

/* ---- options ------------------------------------------------------------------------------------ */
static const alma__rt_option cuda_options[] = {
    {"tf32", ALMA__OPT_BOOL, "off", NULL, 0, 0,
     "TensorFloat-32 in cuDNN convolutions and cuBLAS products (faster on Ampere and later, 10-bit mantissa products)"},
    {"conv_algo", ALMA__OPT_CHOICE, "heuristic", "heuristic|search", 0, 0,
     "cuDNN convolution algorithm: its heuristic's first choice, or the fastest of all, timed once per shape"},
    {"host_memory", ALMA__OPT_CHOICE, "pageable", "pageable|pinned", 0, 0,
     "inputs and outputs go through the caller's pageable memory, or through page-locked staging buffers (asynchronous copies)"},
};
extern const alma_runtime alma__runtime_cuda;

/* ---- plan ----------------------------------------------------------------------------------------- */
typedef enum {
  K_HOST = 0, K_CONV, K_GEMM, K_MATMUL, K_UNARY, K_BINARY, K_AFFINE, K_POOL, K_GPOOL, K_SOFTMAX, K_LAYERNORM,
  K_COPY, K_TRANSPOSE, K_CONCAT
} kind;

typedef struct dbuf {
  void *p;
  size_t cap;
  int used;
} dbuf;

typedef struct cu_val {
  alma_tensor h;   /* shape always; data when on_host (a view of an input or initializer, or owned) */
  int on_host, on_dev;
  int buf;         /* index into the pool, -1 for none (weights: wdev) */
  void *wdev;      /* an initializer's device copy (owned, lives with the plan) */
  int last_use;    /* the last node reading it; n_nodes for graph outputs */
} cu_val;

typedef struct cu_node {
  kind k;
  int sub;                 /* unary or binary op */
  float a, b;              /* its parameters */
  alma__placement pl;      /* compile's decision; PARTIAL once a run declined it */
  int64_t dev_runs, host_runs;
  /* K_AFFINE: per-channel scale and shift on the device */
  float *scale, *shift;
  /* K_CONV */
  cudnnTensorDescriptor_t xd, yd, bd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  cudnnConvolutionFwdAlgo_t algo;
  size_t ws;
  int64_t conv_x[4];       /* the input dims the descriptors are for (0: none yet) */
  const char *why;         /* the last run-time decline's words */
} cu_node;

typedef struct cu_plan {
  const alma_graph *g;
  cu_val *v;
  cu_node *nd;
  dbuf *pool;
  int n_pool, cap_pool;
  cudaStream_t s;
  cublasHandle_t blas;
  cudnnHandle_t dnn;
  void *ws;
  size_t ws_cap;
  cudaEvent_t ev[4];
  int tf32, search, pinned;
  void *pin;               /* pinned staging (host_memory=pinned) */
  size_t pin_cap;
  /* per-run figures, summed over runs */
  int64_t runs;
  double h2d_ms, compute_ms, d2h_ms, wall_ms;
  int64_t bound_copies, bound_bytes; /* copies between host and device nodes inside the graph */
  size_t dev_weights, dev_pool, dev_peak;
  int device;
  char name[256];
  int cc_major, cc_minor;
} cu_plan;

static const char *cuda_err(cudaError_t e) { return cudaGetErrorString(e); }

#define CU(call)                                                                                      \
  do {                                                                                                \
    cudaError_t e_ = (call);                                                                          \
    if (e_ != cudaSuccess) return alma__errorf(ALMA_ERR_RUNTIME, "CUDA: %s: %s", #call, cuda_err(e_)); \
  } while (0)
#define DNN(call)                                                                                                \
  do {                                                                                                           \
    cudnnStatus_t e_ = (call);                                                                                   \
    if (e_ != CUDNN_STATUS_SUCCESS)                                                                              \
      return alma__errorf(ALMA_ERR_RUNTIME, "cuDNN: %s: %s", #call, L->cudnnGetErrorString(e_));                 \
  } while (0)
#define BLAS(call)                                                                                \
  do {                                                                                            \
    cublasStatus_t e_ = (call);                                                                   \
    if (e_ != CUBLAS_STATUS_SUCCESS) return alma__errorf(ALMA_ERR_RUNTIME, "cuBLAS: %s: status %d", #call, (int)e_); \
  } while (0)
#define LAUNCH(call)                                                                                        \
  do {                                                                                                      \
    int e_ = (call);                                                                                        \
    if (e_) return alma__errorf(ALMA_ERR_RUNTIME, "CUDA kernel %s: %s", #call, cuda_err((cudaError_t)e_)); \
  } while (0)

/* ---- init ----------------------------------------------------------------------------------------- */
static alma_status cuda_init(void) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0))
    return alma__errorf(ALMA_ERR_UNAVAILABLE, "no CUDA device");
  if (e == cudaErrorInsufficientDriver) { /* also what the runtime says when there is no driver at all */
    void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!drv) return alma__errorf(ALMA_ERR_UNAVAILABLE, "no CUDA device (no NVIDIA driver: libcuda.so.1 not found)");
    dlclose(drv);
  }
  if (e != cudaSuccess) return alma__errorf(ALMA_ERR_UNAVAILABLE, "no usable CUDA device: %s", cuda_err(e));
  return alma__cu_lib_load(&L);
}

/* ---- classification at compile --------------------------------------------------------------------- */
static int is_f32(const alma_graph *g, int v) { return v >= 0 && g->values[v].dtype == ALMA_DTYPE_FLOAT32; }

static alma__placement decline(alma__decline r, const char *detail) {
  return (alma__placement){.place = ALMA_PLACE_EAGER, .reason = r, .detail = detail};
}

static const struct {
  const char *op;
  alma_cu_unary_op u;
} unary_ops[] = {
    {"Relu", ALMA_CU_RELU}, {"Sigmoid", ALMA_CU_SIGMOID}, {"Tanh", ALMA_CU_TANH}, {"Clip", ALMA_CU_CLIP},
    {"LeakyRelu", ALMA_CU_LEAKY}, {"HardSigmoid", ALMA_CU_HARDSIGMOID}, {"HardSwish", ALMA_CU_HARDSWISH},
    {"Erf", ALMA_CU_ERF}, {"Exp", ALMA_CU_EXP}, {"Log", ALMA_CU_LOG}, {"Sqrt", ALMA_CU_SQRT}, {"Neg", ALMA_CU_NEG},
    {"Abs", ALMA_CU_ABS}, {"Reciprocal", ALMA_CU_RECIPROCAL}, {"Gelu", ALMA_CU_GELU}, {"Elu", ALMA_CU_ELU},
    {"Softplus", ALMA_CU_SOFTPLUS},
};
static const struct {
  const char *op;
  alma_cu_binary_op b;
} binary_ops[] = {
    {"Add", ALMA_CU_ADD}, {"Sub", ALMA_CU_SUB}, {"Mul", ALMA_CU_MUL}, {"Div", ALMA_CU_DIV},
    {"Pow", ALMA_CU_POW}, {"Max", ALMA_CU_MAX}, {"Min", ALMA_CU_MIN},
};

/* Every float input the kernel reads and every output float32 (the shape inputs of Reshape and the
 * like stay on the host and may be any type). */
static int data_f32(const alma_graph *g, const alma_node *n, int n_data) {
  for (int i = 0; i < n_data && i < n->n_inputs; i++)
    if (n->inputs[i] >= 0 && !is_f32(g, n->inputs[i])) return 0;
  for (int i = 0; i < n->n_outputs; i++)
    if (n->outputs[i] >= 0 && !is_f32(g, n->outputs[i])) return 0;
  return 1;
}

static int is_const(const alma_graph *g, int v) { return v >= 0 && g->values[v].init != NULL; }

/* Optional outputs past the first present: the kernels make one output. */
static int extra_outputs(const alma_node *n) {
  for (int i = 1; i < n->n_outputs; i++)
    if (n->outputs[i] >= 0) return 1;
  return 0;
}

static alma__placement classify(const alma_graph *g, const alma_node *n, cu_node *c) {
  const char *op = n->op_type;
  if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx"))
    return decline(ALMA_DECLINE_OP, "no CUDA kernel for this domain's ops");
  for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++)
    if (!strcmp(op, unary_ops[i].op)) {
      if (!data_f32(g, n, 1)) return decline(ALMA_DECLINE_DTYPE, "float32 only");
      c->k = K_UNARY;
      c->sub = (int)unary_ops[i].u;
      c->a = alma__attr_f(n, "alpha", !strcmp(op, "LeakyRelu") ? 0.01f : !strcmp(op, "HardSigmoid") ? 0.2f : 1.0f);
      c->b = alma__attr_f(n, "beta", 0.5f);
      if (!strcmp(op, "Gelu")) c->a = !strcmp(alma__attr_s(n, "approximate", "none"), "tanh");
      if (!strcmp(op, "Clip")) {
        if (n->since_version < 11) {
          c->a = alma__attr_f(n, "min", -INFINITY);
          c->b = alma__attr_f(n, "max", INFINITY);
        } else {
          for (int k = 1; k < 3 && k < n->n_inputs; k++)
            if (n->inputs[k] >= 0 && !is_const(g, n->inputs[k]))
              return decline(ALMA_DECLINE_DYNAMIC, "Clip bounds computed in the graph");
        }
      }
      return (alma__placement){.place = ALMA_PLACE_RUNTIME};
    }
  for (size_t i = 0; i < sizeof binary_ops / sizeof binary_ops[0]; i++)
    if (!strcmp(op, binary_ops[i].op)) {
      if (n->n_inputs != 2) return decline(ALMA_DECLINE_ATTR, "two inputs only");
      if (!data_f32(g, n, 2)) return decline(ALMA_DECLINE_DTYPE, "float32 only");
      c->k = K_BINARY;
      c->sub = (int)binary_ops[i].b;
      return (alma__placement){.place = ALMA_PLACE_RUNTIME};
    }
  if (!strcmp(op, "Conv")) {
    if (!data_f32(g, n, 3)) return decline(ALMA_DECLINE_DTYPE, "float32 only");
    if (g->values[n->inputs[0]].rank != 4 && g->values[n->inputs[0]].rank != 3)
      return decline(ALMA_DECLINE_SHAPE, "1-D and 2-D convolutions only");
    if (!is_const(g, n->inputs[1])) return decline(ALMA_DECLINE_DYNAMIC, "weights computed in the graph");
    c->k = K_CONV;
  } else if (!strcmp(op, "Gemm")) {
    if (!data_f32(g, n, 3)) return decline(ALMA_DECLINE_DTYPE, "float32 only");
    c->k = K_GEMM;
  } else if (!strcmp(op, "MatMul")) {
    if (!data_f32(g, n, 2)) return decline(ALMA_DECLINE_DTYPE, "float32 only");
    c->k = K_MATMUL;
  } else if (!strcmp(op, "BatchNormalization")) {
    if (!data_f32(g, n, 5)) return decline(ALMA_DECLINE_DTYPE, "float32 only");
    if (extra_outputs(n) || alma__attr_i(n, "training_mode", 0)) return decline(ALMA_DECLINE_ATTR, "inference only");
    for (int k = 1; k < 5; k++)
      if (!is_const(g, n->inputs[k])) return decline(ALMA_DECLINE_DYNAMIC, "statistics computed in the graph");
    c->k = K_AFFINE;
  } else if (!strcmp(op, "MaxPool") || !strcmp(op, "AveragePool")) {
    if (!data_f32(g, n, 1)) return decline(ALMA_DECLINE_DTYPE, "float32 only");
    if (extra_outputs(n)) return decline(ALMA_DECLINE_ATTR, "MaxPool's Indices output");
    if (g->values[n->inputs[0]].rank != 4 && g->values[n->inputs[0]].rank != 3)
      return decline(ALMA_DECLINE_SHAPE, "1-D and 2-D pooling only");
    if (alma__attr_i(n, "storage_order", 0)) return decline(ALMA_DECLINE_ATTR, "storage_order 1");
    c->k = K_POOL;
  } else if (!strcmp(op, "GlobalAveragePool") || !strcmp(op, "GlobalMaxPool")) {
    if (!data_f32(g, n, 1)) return decline(ALMA_DECLINE_DTYPE, "float32 only");
    c->k = K_GPOOL;
  } else if (!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax")) {
    if (!data_f32(g, n, 1)) return decline(ALMA_DECLINE_DTYPE, "float32 only");
    c->k = K_SOFTMAX;
  } else if (!strcmp(op, "LayerNormalization")) {
    if (!data_f32(g, n, 3)) return decline(ALMA_DECLINE_DTYPE, "float32 only");
    if (extra_outputs(n)) return decline(ALMA_DECLINE_ATTR, "Mean and InvStdDev outputs");
    c->k = K_LAYERNORM;
  } else if (!strcmp(op, "Reshape") || !strcmp(op, "Flatten") || !strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze") ||
             !strcmp(op, "Identity") || !strcmp(op, "Dropout")) {
    if (!data_f32(g, n, 1)) return decline(ALMA_DECLINE_DTYPE, "float32 only");
    if (extra_outputs(n)) return decline(ALMA_DECLINE_ATTR, "Dropout's mask output");
    if (!strcmp(op, "Dropout") && n->n_inputs > 2 && n->inputs[2] >= 0) { /* training_mode: a copy only when false */
      const alma_tensor *t = is_const(g, n->inputs[2]) ? g->values[n->inputs[2]].init : NULL;
      if (!t || alma_tensor_numel(t) != 1 || t->dtype != ALMA_DTYPE_BOOL || *(const unsigned char *)t->data)
        return decline(ALMA_DECLINE_ATTR, "Dropout in training mode");
    }
    c->k = K_COPY;
  } else if (!strcmp(op, "Transpose")) {
    if (!data_f32(g, n, 1)) return decline(ALMA_DECLINE_DTYPE, "float32 only");
    c->k = K_TRANSPOSE;
  } else if (!strcmp(op, "Concat")) {
    if (!data_f32(g, n, n->n_inputs)) return decline(ALMA_DECLINE_DTYPE, "float32 only");
    c->k = K_CONCAT;
  } else {
    return decline(ALMA_DECLINE_OP, "no CUDA kernel for this op");
  }
  return (alma__placement){.place = ALMA_PLACE_RUNTIME};
}

/* The float inputs a kernel reads on the device (the rest, shapes and bounds, are read on the host). */
static int device_inputs(const cu_node *c, const alma_node *n) {
  switch (c->k) {
    case K_BINARY: case K_MATMUL: return 2;
    case K_CONV: case K_GEMM: case K_LAYERNORM: return n->n_inputs < 3 ? n->n_inputs : 3;
    case K_CONCAT: return n->n_inputs;
    case K_HOST: return 0;
    default: return 1;
  }
}

/* ---- device memory ---------------------------------------------------------------------------------- */
static void note_peak(cu_plan *p) {
  size_t used = p->dev_weights + p->ws_cap;
  for (int i = 0; i < p->n_pool; i++)
    if (p->pool[i].used) used += p->pool[i].cap;
  if (used > p->dev_peak) p->dev_peak = used;
}

/* A free pooled buffer of at least `bytes` (the smallest that fits), or a new one. */
static alma_status pool_get(cu_plan *p, size_t bytes, int *out) {
  int best = -1;
  for (int i = 0; i < p->n_pool; i++)
    if (!p->pool[i].used && p->pool[i].cap >= bytes && (best < 0 || p->pool[i].cap < p->pool[best].cap)) best = i;
  if (best < 0) {
    if (p->n_pool == p->cap_pool) {
      int nc = p->cap_pool ? 2 * p->cap_pool : 64;
      dbuf *np = realloc(p->pool, (size_t)nc * sizeof *np);
      if (!np) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      p->pool = np;
      p->cap_pool = nc;
    }
    dbuf *b = &p->pool[p->n_pool];
    b->cap = bytes < 256 ? 256 : (bytes + 255) & ~(size_t)255;
    cudaError_t e = cudaMalloc(&b->p, b->cap);
    if (e != cudaSuccess)
      return alma__errorf(e == cudaErrorMemoryAllocation ? ALMA_ERR_NOMEM : ALMA_ERR_RUNTIME,
                          "CUDA: allocating %zu bytes of device memory: %s", b->cap, cuda_err(e));
    b->used = 0;
    p->dev_pool += b->cap;
    best = p->n_pool++;
  }
  p->pool[best].used = 1;
  *out = best;
  note_peak(p);
  return ALMA_OK;
}

static void *dptr(const cu_plan *p, const cu_val *v) { return v->wdev ? v->wdev : v->buf >= 0 ? p->pool[v->buf].p : NULL; }

static size_t val_bytes(const cu_val *v) { return (size_t)alma_tensor_numel(&v->h) * alma_dtype_size(v->h.dtype); }

static alma_status pinned_room(cu_plan *p, size_t bytes) {
  if (p->pin_cap >= bytes) return ALMA_OK;
  if (p->pin) cudaFreeHost(p->pin);
  p->pin = NULL;
  p->pin_cap = 0;
  CU(cudaMallocHost(&p->pin, bytes));
  p->pin_cap = bytes;
  return ALMA_OK;
}

/* Host to device, on the stream; through the pinned staging buffer when host_memory=pinned. */
static alma_status upload(cu_plan *p, cu_val *v) {
  if (v->on_dev) return ALMA_OK;
  size_t bytes = val_bytes(v);
  if (v->buf < 0 && !v->wdev) ALMA_TRY(pool_get(p, bytes, &v->buf));
  if (bytes) {
    if (p->pinned) {
      ALMA_TRY(pinned_room(p, bytes));
      CU(cudaStreamSynchronize(p->s)); /* the staging buffer may still feed an earlier copy */
      memcpy(p->pin, v->h.data, bytes);
      CU(cudaMemcpyAsync(dptr(p, v), p->pin, bytes, cudaMemcpyHostToDevice, p->s));
    } else {
      CU(cudaMemcpyAsync(dptr(p, v), v->h.data, bytes, cudaMemcpyHostToDevice, p->s));
    }
  }
  v->on_dev = 1;
  return ALMA_OK;
}

/* Device to host into an owned host tensor of v's shape (waits for the stream). */
static alma_status download(cu_plan *p, cu_val *v) {
  if (v->on_host) return ALMA_OK;
  alma_tensor t;
  ALMA_TRY(alma__tensor_alloc_uninit(&t, v->h.dtype, v->h.rank, v->h.dims));
  size_t bytes = val_bytes(v);
  cudaError_t e = cudaSuccess;
  if (bytes && p->pinned) {
    alma_status st = pinned_room(p, bytes);
    if (st != ALMA_OK) {
      alma_tensor_free_data(&t);
      return st;
    }
    e = cudaMemcpyAsync(p->pin, dptr(p, v), bytes, cudaMemcpyDeviceToHost, p->s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(p->s);
    if (e == cudaSuccess) memcpy(t.data, p->pin, bytes);
  } else if (bytes) {
    e = cudaMemcpyAsync(t.data, dptr(p, v), bytes, cudaMemcpyDeviceToHost, p->s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(p->s);
  }
  if (e != cudaSuccess) {
    alma_tensor_free_data(&t);
    return alma__errorf(ALMA_ERR_RUNTIME, "CUDA: copying a value to the host: %s", cuda_err(e));
  }
  v->h = t;
  v->on_host = 1;
  return ALMA_OK;
}

/* After a value's last use: its host data (if owned) freed, its pooled buffer returned. */
static void release(cu_plan *p, cu_val *v) {
  if (v->h.owns_data) alma_tensor_free_data(&v->h);
  v->h.data = NULL;
  v->on_host = 0;
  if (v->buf >= 0) p->pool[v->buf].used = 0;
  v->buf = -1;
  v->on_dev = 0;
}

/* ---- compile ------------------------------------------------------------------------------------------ */
static void cuda_free(void *plan);

static alma_status upload_weight(cu_plan *p, int vi) {
  cu_val *v = &p->v[vi];
  if (v->wdev || p->g->values[vi].is_input) return ALMA_OK; /* an initializer the caller may feed goes up per run */
  const alma_tensor *t = p->g->values[vi].init;
  size_t bytes = t->nbytes ? t->nbytes : 1;
  CU(cudaMalloc(&v->wdev, bytes));
  if (t->nbytes) CU(cudaMemcpy(v->wdev, t->data, t->nbytes, cudaMemcpyHostToDevice));
  p->dev_weights += bytes;
  return ALMA_OK;
}

/* BatchNormalization folded into a per-channel scale and shift (computed in double on the host). */
static alma_status prepare_affine(cu_plan *p, const alma_node *n, cu_node *c) {
  const alma_tensor *sc = p->g->values[n->inputs[1]].init, *b = p->g->values[n->inputs[2]].init;
  const alma_tensor *m = p->g->values[n->inputs[3]].init, *var = p->g->values[n->inputs[4]].init;
  int64_t C = alma_tensor_numel(sc);
  if (alma_tensor_numel(b) != C || alma_tensor_numel(m) != C || alma_tensor_numel(var) != C) {
    c->pl = decline(ALMA_DECLINE_SHAPE, "parameters of different lengths");
    c->k = K_HOST;
    return ALMA_OK;
  }
  float eps = alma__attr_f(n, "epsilon", 1e-5f);
  float *hs = malloc((size_t)(2 * C) * sizeof *hs);
  if (!hs) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (int64_t i = 0; i < C; i++) {
    double s = ((const float *)sc->data)[i] / sqrt((double)((const float *)var->data)[i] + eps);
    hs[i] = (float)s;
    hs[C + i] = (float)(((const float *)b->data)[i] - ((const float *)m->data)[i] * s);
  }
  cudaError_t e = cudaMalloc((void **)&c->scale, (size_t)(2 * C) * sizeof(float));
  if (e == cudaSuccess) e = cudaMemcpy(c->scale, hs, (size_t)(2 * C) * sizeof(float), cudaMemcpyHostToDevice);
  free(hs);
  if (e != cudaSuccess) return alma__errorf(ALMA_ERR_RUNTIME, "CUDA: uploading BatchNormalization parameters: %s", cuda_err(e));
  c->shift = c->scale + C;
  p->dev_weights += (size_t)(2 * C) * sizeof(float);
  return ALMA_OK;
}

static alma_status compile_body(cu_plan *p, const alma_runtime_opts *opts) {
  const alma_graph *g = p->g;
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op && (g->nodes[i].op->flags & (ALMA_OP_HAS_SUBGRAPH | ALMA_OP_CONTAINERS)))
      return alma__errorf(ALMA_ERR_UNSUPPORTED, "CUDA: node '%s' (%s): graphs with subgraphs or sequences are not supported",
                          g->nodes[i].name, g->nodes[i].op_type);
  p->tf32 = alma__rt_opt_on(&alma__runtime_cuda, opts, "tf32");
  p->search = alma__rt_opt_is(&alma__runtime_cuda, opts, "conv_algo", "search");
  p->pinned = alma__rt_opt_is(&alma__runtime_cuda, opts, "host_memory", "pinned");
  CU(cudaGetDevice(&p->device));
  struct cudaDeviceProp prop;
  CU(cudaGetDeviceProperties(&prop, p->device));
  snprintf(p->name, sizeof p->name, "%s", prop.name);
  p->cc_major = prop.major;
  p->cc_minor = prop.minor;
  CU(cudaStreamCreateWithFlags(&p->s, cudaStreamNonBlocking));
  for (int i = 0; i < 4; i++) CU(cudaEventCreate(&p->ev[i]));
  BLAS(L->cublasCreate_v2(&p->blas));
  BLAS(L->cublasSetStream_v2(p->blas, p->s));
  BLAS(L->cublasSetMathMode(p->blas, p->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  DNN(L->cudnnCreate(&p->dnn));
  DNN(L->cudnnSetStream(p->dnn, p->s));

  p->v = calloc((size_t)g->n_values, sizeof *p->v);
  p->nd = calloc((size_t)g->n_nodes + 1, sizeof *p->nd);
  if (!p->v || !p->nd) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (int i = 0; i < g->n_values; i++) {
    p->v[i].buf = -1;
    p->v[i].last_use = g->values[i].is_output ? g->n_nodes : -1;
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] >= 0 && p->v[n->inputs[k]].last_use < i) p->v[n->inputs[k]].last_use = i;
  }
  for (int o = 0; o < g->n_outputs; o++) p->v[g->outputs[o]].last_use = g->n_nodes;
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    cu_node *c = &p->nd[i];
    c->pl = classify(g, n, c);
    if (c->pl.place != ALMA_PLACE_RUNTIME) {
      c->k = K_HOST;
      continue;
    }
    if (c->k == K_AFFINE) {
      ALMA_TRY(prepare_affine(p, n, c));
      continue;
    }
    /* the float inputs a device kernel reads: uploaded now when constant */
    for (int k = 0; k < device_inputs(c, n) && k < n->n_inputs; k++)
      if (is_const(g, n->inputs[k]) && is_f32(g, n->inputs[k])) ALMA_TRY(upload_weight(p, n->inputs[k]));
  }
  note_peak(p);
  return ALMA_OK;
}

static alma_status cuda_compile(const alma_graph *g, const alma_runtime_opts *opts, void **plan_out) {
  *plan_out = NULL;
  cu_plan *p = calloc(1, sizeof *p);
  if (!p) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  p->g = g;
  alma_status st = compile_body(p, opts);
  if (st != ALMA_OK) {
    cuda_free(p);
    return st;
  }
  if (opts && opts->verbose) alma__runtime_cuda.describe(p, stderr);
  *plan_out = p;
  return ALMA_OK;
}

/* ---- kernels ------------------------------------------------------------------------------------------ */
/* The run-time decline of a node the plan gave the device (its shapes or values do not fit): it
 * runs on the host this time. */
#define RUN_DECLINE(c, words) ((c)->why = (words), ALMA_ERR_DYNAMIC)

static const float ONE = 1.f, ZERO = 0.f;

/* NCHW dims of a rank-4 tensor, or of a rank-3 one [N, C, L] as [N, C, 1, L] (1-D conv and pool). */
static void to4(const alma_tensor *t, int64_t *d) {
  if (t->rank == 3) {
    d[0] = t->dims[0], d[1] = t->dims[1], d[2] = 1, d[3] = t->dims[2];
  } else {
    for (int k = 0; k < 4; k++) d[k] = t->dims[k];
  }
}

static alma_status conv_descriptors(cu_plan *p, const alma_node *n, cu_node *c, const alma_tensor *x,
                                    const alma_tensor *w, const alma_tensor *y) {
  if (!c->xd) {
    DNN(L->cudnnCreateTensorDescriptor(&c->xd));
    DNN(L->cudnnCreateTensorDescriptor(&c->yd));
    DNN(L->cudnnCreateTensorDescriptor(&c->bd));
    DNN(L->cudnnCreateFilterDescriptor(&c->wd));
    DNN(L->cudnnCreateConvolutionDescriptor(&c->cd));
  }
  int64_t group = alma__attr_i(n, "group", 1);
  int64_t x4[4], w4[4], y4[4];
  to4(x, x4), to4(w, w4), to4(y, y4);
  int nsp = x->rank - 2, o = 2 - nsp; /* a 1-D conv's attributes go to the second spatial dim */
  const int64_t *pads = NULL, *strides = NULL, *dil = NULL;
  int np = alma__attr_ints(n, "pads", &pads), ns = alma__attr_ints(n, "strides", &strides), nd = alma__attr_ints(n, "dilations", &dil);
  int64_t s[2] = {1, 1}, d[2] = {1, 1}, pb[2] = {0, 0}, pe[2] = {0, 0};
  for (int k = 0; k < nsp; k++) {
    s[o + k] = ns == nsp ? strides[k] : 1;
    d[o + k] = nd == nsp ? dil[k] : 1;
    if (np == 2 * nsp) pb[o + k] = pads[k], pe[o + k] = pads[nsp + k];
  }
  const char *ap = alma__attr_s(n, "auto_pad", "NOTSET");
  if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER") || !strcmp(ap, "VALID")) {
    for (int k = 0; k < 2; k++) {
      int64_t in = x4[2 + k], out = (in + s[k] - 1) / s[k];
      int64_t total = (out - 1) * s[k] + (w4[2 + k] - 1) * d[k] + 1 - in;
      if (total < 0 || !strcmp(ap, "VALID")) total = 0;
      pb[k] = !strcmp(ap, "SAME_LOWER") ? total - total / 2 : total / 2;
      pe[k] = total - pb[k];
    }
  }
  if (pb[0] != pe[0] || pb[1] != pe[1]) return RUN_DECLINE(c, "asymmetric padding (cuDNN pads both sides alike)");
  DNN(L->cudnnSetTensor4dDescriptor(c->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)x4[0], (int)x4[1], (int)x4[2],
                                    (int)x4[3]));
  DNN(L->cudnnSetTensor4dDescriptor(c->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)y4[0], (int)y4[1], (int)y4[2],
                                    (int)y4[3]));
  DNN(L->cudnnSetTensor4dDescriptor(c->bd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, (int)y4[1], 1, 1));
  DNN(L->cudnnSetFilter4dDescriptor(c->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, (int)w4[0], (int)w4[1], (int)w4[2],
                                    (int)w4[3]));
  DNN(L->cudnnSetConvolution2dDescriptor(c->cd, (int)pb[0], (int)pb[1], (int)s[0], (int)s[1], (int)d[0], (int)d[1],
                                         CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  DNN(L->cudnnSetConvolutionGroupCount(c->cd, (int)group));
  /* FMA_MATH: IEEE float32 products only (as PyTorch with cudnn.allow_tf32 off); TENSOR_OP_MATH permits TF32 */
  DNN(L->cudnnSetConvolutionMathType(c->cd, p->tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int got = 0;
  if (p->search)
    DNN(L->cudnnFindConvolutionForwardAlgorithm(p->dnn, c->xd, c->wd, c->cd, c->yd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
  else
    DNN(L->cudnnGetConvolutionForwardAlgorithm_v7(p->dnn, c->xd, c->wd, c->cd, c->yd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
  int pick = -1;
  for (int i = 0; i < got && pick < 0; i++)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= WS_LIMIT &&
        (p->tf32 || (perf[i].mathType != CUDNN_TENSOR_OP_MATH && perf[i].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)))
      pick = i;
  if (pick < 0) return alma__errorf(ALMA_ERR_RUNTIME, "cuDNN: node '%s': no convolution algorithm for these shapes", n->name);
  c->algo = perf[pick].algo;
  DNN(L->cudnnSetConvolutionMathType(c->cd, perf[pick].mathType)); /* the one the algorithm was ranked with */
  DNN(L->cudnnGetConvolutionForwardWorkspaceSize(p->dnn, c->xd, c->wd, c->cd, c->yd, c->algo, &c->ws));
  if (c->ws > p->ws_cap) {
    if (p->ws) cudaFree(p->ws);
    p->ws = NULL;
    p->ws_cap = 0;
    CU(cudaMalloc(&p->ws, c->ws));
    p->ws_cap = c->ws;
    note_peak(p);
  }
  memcpy(c->conv_x, x4, sizeof c->conv_x);
  return ALMA_OK;
}

static alma_status run_conv(cu_plan *p, const alma_node *n, cu_node *c, cu_val *const *in, cu_val *y) {
  int64_t x4[4];
  to4(&in[0]->h, x4);
  if (memcmp(c->conv_x, x4, sizeof c->conv_x)) ALMA_TRY(conv_descriptors(p, n, c, &in[0]->h, &in[1]->h, &y->h));
  DNN(L->cudnnConvolutionForward(p->dnn, &ONE, c->xd, dptr(p, in[0]), c->wd, dptr(p, in[1]), c->cd, c->algo, p->ws,
                                 c->ws, &ZERO, c->yd, dptr(p, y)));
  if (n->n_inputs > 2 && in[2]) {
    if (alma_tensor_numel(&in[2]->h) != y->h.dims[1]) return alma__errorf(ALMA_ERR_SHAPE, "node '%s': bias length", n->name);
    DNN(L->cudnnAddTensor(p->dnn, &ONE, c->bd, dptr(p, in[2]), &ONE, c->yd, dptr(p, y)));
  }
  return ALMA_OK;
}

/* Row-major C[M,N] = op(A) op(B) through column-major cuBLAS: C^T = op(B)^T op(A)^T. */
static alma_status gemm_rm(cu_plan *p, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                           int64_t lda, long long sa, const float *B, int64_t ldb, long long sb, float beta, float *C,
                           long long sc, int64_t batch) {
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || batch > INT32_MAX) return ALMA_ERR_DYNAMIC;
  cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch == 1)
    BLAS(L->cublasSgemm_v2(p->blas, ob, oa, (int)N, (int)M, (int)K, &alpha, B, (int)ldb, A, (int)lda, &beta, C, (int)N));
  else
    BLAS(L->cublasSgemmStridedBatched(p->blas, ob, oa, (int)N, (int)M, (int)K, &alpha, B, (int)ldb, sb, A, (int)lda, sa,
                                      &beta, C, (int)N, sc, (int)batch));
  return ALMA_OK;
}

/* Strides of t's elements in the index space of a broadcast result of rank r (numpy rules). */
static void bcast_strides(const alma_tensor *t, int r, const int64_t *dims, int64_t *st) {
  int64_t s = 1;
  for (int d = r - 1; d >= 0; d--) {
    int td = d - (r - t->rank);
    int64_t len = td >= 0 ? t->dims[td] : 1;
    st[d] = len == 1 && dims[d] != 1 ? 0 : s;
    s *= len;
  }
}

static alma_status run_gemm(cu_plan *p, const alma_node *n, cu_node *c, cu_val *const *in, cu_val *y) {
  int ta = (int)alma__attr_i(n, "transA", 0), tb = (int)alma__attr_i(n, "transB", 0);
  float alpha = alma__attr_f(n, "alpha", 1.f), beta = alma__attr_f(n, "beta", 1.f);
  const alma_tensor *A = &in[0]->h, *B = &in[1]->h;
  if (A->rank != 2 || B->rank != 2) return RUN_DECLINE(c, "Gemm of inputs not 2-D");
  int64_t M = ta ? A->dims[1] : A->dims[0], K = ta ? A->dims[0] : A->dims[1], N = tb ? B->dims[0] : B->dims[1];
  float b2 = 0.f;
  if (n->n_inputs > 2 && in[2] && beta != 0.f) {
    /* y = beta * C broadcast, then the product added onto it */
    alma_cu_bcast bc = {.rank = 2, .dims = {M, N}};
    bcast_strides(&in[2]->h, 2, bc.dims, bc.sa);
    LAUNCH(alma_cu_expand(dptr(p, in[2]), dptr(p, y), &bc, M * N, beta, p->s));
    b2 = 1.f;
  }
  return gemm_rm(p, ta, tb, M, N, K, alpha, dptr(p, in[0]), A->dims[1], 0, dptr(p, in[1]), B->dims[1], 0, b2, dptr(p, y), 0, 1);
}

static alma_status run_matmul(cu_plan *p, const alma_node *n, cu_node *c, cu_val *const *in, cu_val *y) {
  const alma_tensor *A = &in[0]->h, *B = &in[1]->h;
  if (A->rank < 1 || B->rank < 1) return RUN_DECLINE(c, "MatMul of scalars");
  int64_t M = A->rank == 1 ? 1 : A->dims[A->rank - 2], K = A->dims[A->rank - 1];
  int64_t N = B->rank == 1 ? 1 : B->dims[B->rank - 1];
  if (!M || !N) return ALMA_OK;
  int64_t batch = alma_tensor_numel(&y->h) / (M * N);
  int64_t ab = K ? alma_tensor_numel(A) / (M * K) : 1, bb = K ? alma_tensor_numel(B) / (K * N) : 1;
  if ((ab != batch && ab != 1) || (bb != batch && bb != 1))
    return RUN_DECLINE(c, "batch dimensions broadcast within both inputs");
  if (!K) return RUN_DECLINE(c, "an empty inner dimension (the output is zeros)");
  if (bb == 1 && ab == batch) /* one product: the batch folded into M */
    return gemm_rm(p, 0, 0, batch * M, N, K, 1.f, dptr(p, in[0]), K, 0, dptr(p, in[1]), N, 0, 0.f, dptr(p, y), 0, 1);
  return gemm_rm(p, 0, 0, M, N, K, 1.f, dptr(p, in[0]), K, ab == 1 ? 0 : M * K, dptr(p, in[1]), N, bb == 1 ? 0 : K * N,
                 0.f, dptr(p, y), M * N, batch);
}

static alma_status host_float(cu_plan *p, cu_val *v, float dflt, float *out) {
  *out = dflt;
  if (!v) return ALMA_OK;
  ALMA_TRY(download(p, v));
  if (alma_tensor_numel(&v->h) >= 1) *out = ((const float *)v->h.data)[0];
  return ALMA_OK;
}

static alma_status run_unary(cu_plan *p, const alma_node *n, cu_node *c, cu_val *const *in, cu_val *y) {
  float a = c->a, b = c->b;
  if (c->sub == ALMA_CU_CLIP && n->since_version >= 11) {
    ALMA_TRY(host_float(p, n->n_inputs > 1 ? in[1] : NULL, -INFINITY, &a));
    ALMA_TRY(host_float(p, n->n_inputs > 2 ? in[2] : NULL, INFINITY, &b));
  }
  LAUNCH(alma_cu_unary((alma_cu_unary_op)c->sub, dptr(p, in[0]), dptr(p, y), alma_tensor_numel(&y->h), a, b, p->s));
  return ALMA_OK;
}

static alma_status run_binary(cu_plan *p, const alma_node *n, cu_node *c, cu_val *const *in, cu_val *y) {
  if (y->h.rank > ALMA_CU_MAX_RANK) return RUN_DECLINE(c, "rank above 8");
  alma_cu_bcast bc = {.rank = y->h.rank};
  memcpy(bc.dims, y->h.dims, (size_t)y->h.rank * sizeof bc.dims[0]);
  bcast_strides(&in[0]->h, bc.rank, bc.dims, bc.sa);
  bcast_strides(&in[1]->h, bc.rank, bc.dims, bc.sb);
  LAUNCH(alma_cu_binary((alma_cu_binary_op)c->sub, dptr(p, in[0]), dptr(p, in[1]), dptr(p, y), &bc,
                        alma_tensor_numel(&y->h), p->s));
  return ALMA_OK;
}

static alma_status run_affine(cu_plan *p, const alma_node *n, cu_node *c, cu_val *const *in, cu_val *y) {
  const alma_tensor *x = &in[0]->h;
  int64_t C = alma_tensor_numel(p->g->values[n->inputs[1]].init);
  if (x->rank < 2 || x->dims[1] != C) return RUN_DECLINE(c, "channels differ from the parameters");
  int64_t inner = 1;
  for (int d = 2; d < x->rank; d++) inner *= x->dims[d];
  LAUNCH(alma_cu_channel_affine(dptr(p, in[0]), dptr(p, y), c->scale, c->shift, x->dims[0], C, inner, p->s));
  return ALMA_OK;
}

static int ints2(const alma_node *n, const char *name, int64_t dflt, int64_t *o, int count) {
  const int64_t *v = NULL;
  int k = alma__attr_ints(n, name, &v);
  for (int i = 0; i < count; i++) o[i] = k == count ? v[i] : dflt;
  return k == 0 || k == count;
}

static alma_status run_pool(cu_plan *p, const alma_node *n, cu_node *c, cu_val *const *in, cu_val *y) {
  int64_t x4[4], y4[4];
  to4(&in[0]->h, x4), to4(&y->h, y4);
  int nsp = in[0]->h.rank - 2, o = 2 - nsp; /* 1-D: H = 1 with a 1-tap window */
  int64_t k[2] = {1, 1}, s[2] = {1, 1}, d[2] = {1, 1}, pads[4] = {0, 0, 0, 0}, a[4];
  if (!ints2(n, "kernel_shape", 1, a, nsp)) return RUN_DECLINE(c, "kernel_shape of another rank");
  for (int i = 0; i < nsp; i++) k[o + i] = a[i];
  if (!ints2(n, "strides", 1, a, nsp)) return RUN_DECLINE(c, "strides of another rank");
  for (int i = 0; i < nsp; i++) s[o + i] = a[i];
  if (!ints2(n, "dilations", 1, a, nsp)) return RUN_DECLINE(c, "dilations of another rank");
  for (int i = 0; i < nsp; i++) d[o + i] = a[i];
  if (!ints2(n, "pads", 0, a, 2 * nsp)) return RUN_DECLINE(c, "pads of another rank");
  for (int i = 0; i < nsp; i++) pads[o + i] = a[i], pads[2 + o + i] = a[nsp + i];
  const char *ap = alma__attr_s(n, "auto_pad", "NOTSET");
  if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER") || !strcmp(ap, "VALID")) {
    for (int i = 0; i < 2; i++) {
      int64_t total = (y4[2 + i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 - x4[2 + i];
      if (total < 0 || !strcmp(ap, "VALID")) total = 0;
      pads[i] = !strcmp(ap, "SAME_LOWER") ? total - total / 2 : total / 2;
      pads[2 + i] = total - pads[i];
    }
  }
  alma_cu_pool pp = {.n = x4[0], .c = x4[1], .h = x4[2], .w = x4[3], .oh = y4[2], .ow = y4[3], .kh = (int)k[0], .kw = (int)k[1], .sh = (int)s[0], .sw = (int)s[1],
                     .dh = (int)d[0], .dw = (int)d[1], .pt = (int)pads[0], .pl = (int)pads[1], .pb = (int)pads[2],
                     .pr = (int)pads[3], .is_max = !strcmp(n->op_type, "MaxPool"),
                     .count_include_pad = (int)alma__attr_i(n, "count_include_pad", 0)};
  LAUNCH(alma_cu_pool2d(dptr(p, in[0]), dptr(p, y), &pp, p->s));
  return ALMA_OK;
}

static alma_status run_gpool(cu_plan *p, const alma_node *n, cu_node *c, cu_val *const *in, cu_val *y) {
  const alma_tensor *x = &in[0]->h;
  if (x->rank < 2) return RUN_DECLINE(c, "rank below 2");
  int64_t rows = x->dims[0] * x->dims[1], cols = rows ? alma_tensor_numel(x) / rows : 0;
  LAUNCH(alma_cu_row_reduce(dptr(p, in[0]), dptr(p, y), rows, cols, !strcmp(n->op_type, "GlobalMaxPool"), p->s));
  return ALMA_OK;
}

static int norm_axis(int64_t axis, int rank) { return (int)(axis < 0 ? axis + rank : axis); }

static alma_status run_softmax(cu_plan *p, const alma_node *n, cu_node *c, cu_val *const *in, cu_val *y) {
  const alma_tensor *x = &in[0]->h;
  int legacy = n->since_version < 13;
  int axis = norm_axis(alma__attr_i(n, "axis", legacy ? 1 : -1), x->rank);
  if (!legacy && axis != x->rank - 1) return RUN_DECLINE(c, "an axis other than the last");
  int64_t cols = 1;
  for (int d = axis; d < x->rank; d++) cols *= x->dims[d];
  int64_t rows = cols ? alma_tensor_numel(x) / cols : 0;
  LAUNCH(alma_cu_softmax(dptr(p, in[0]), dptr(p, y), rows, cols, !strcmp(n->op_type, "LogSoftmax"), p->s));
  return ALMA_OK;
}

static alma_status run_layernorm(cu_plan *p, const alma_node *n, cu_node *c, cu_val *const *in, cu_val *y) {
  const alma_tensor *x = &in[0]->h;
  int axis = norm_axis(alma__attr_i(n, "axis", -1), x->rank);
  int64_t cols = 1;
  for (int d = axis; d < x->rank; d++) cols *= x->dims[d];
  if (alma_tensor_numel(&in[1]->h) != cols || (n->n_inputs > 2 && in[2] && alma_tensor_numel(&in[2]->h) != cols))
    return RUN_DECLINE(c, "scale or bias broadcast over the normalized dimensions");
  int64_t rows = cols ? alma_tensor_numel(x) / cols : 0;
  LAUNCH(alma_cu_layernorm(dptr(p, in[0]), dptr(p, y), dptr(p, in[1]), n->n_inputs > 2 && in[2] ? dptr(p, in[2]) : NULL,
                           rows, cols, alma__attr_f(n, "epsilon", 1e-5f), p->s));
  return ALMA_OK;
}

static alma_status run_transpose(cu_plan *p, const alma_node *n, cu_node *c, cu_val *const *in, cu_val *y) {
  const alma_tensor *x = &in[0]->h;
  int r = x->rank;
  if (r > ALMA_CU_MAX_RANK) return RUN_DECLINE(c, "rank above 8");
  const int64_t *perm = NULL;
  int np = alma__attr_ints(n, "perm", &perm);
  int64_t st[ALMA_MAX_RANK], in_st[ALMA_CU_MAX_RANK], s = 1;
  for (int d = r - 1; d >= 0; d--) st[d] = s, s *= x->dims[d];
  for (int d = 0; d < r; d++) in_st[d] = st[np == r ? norm_axis(perm[d], r) : r - 1 - d];
  LAUNCH(alma_cu_permute(dptr(p, in[0]), dptr(p, y), r, y->h.dims, in_st, alma_tensor_numel(&y->h), p->s));
  return ALMA_OK;
}

static alma_status run_concat(cu_plan *p, const alma_node *n, cu_node *c, cu_val *const *in, cu_val *y) {
  int axis = norm_axis(alma__attr_i(n, "axis", 0), y->h.rank);
  int64_t outer = 1, out_inner = 1;
  for (int d = 0; d < axis; d++) outer *= y->h.dims[d];
  for (int d = axis; d < y->h.rank; d++) out_inner *= y->h.dims[d];
  size_t off = 0;
  for (int k = 0; k < n->n_inputs; k++) {
    if (!in[k]) continue;
    int64_t inner = outer ? alma_tensor_numel(&in[k]->h) / outer : 0;
    if (inner && outer == 1) /* one block each: no pitch limit */
      CU(cudaMemcpyAsync((char *)dptr(p, y) + off, dptr(p, in[k]), (size_t)inner * 4, cudaMemcpyDeviceToDevice, p->s));
    else if (inner && outer)
      CU(cudaMemcpy2DAsync((char *)dptr(p, y) + off, (size_t)out_inner * 4, dptr(p, in[k]), (size_t)inner * 4,
                           (size_t)inner * 4, (size_t)outer, cudaMemcpyDeviceToDevice, p->s));
    off += (size_t)inner * 4;
  }
  return ALMA_OK;
}

static alma_status launch(cu_plan *p, const alma_node *n, cu_node *c, cu_val *const *in, cu_val *y) {
  switch (c->k) {
    case K_CONV: return run_conv(p, n, c, in, y);
    case K_GEMM: return run_gemm(p, n, c, in, y);
    case K_MATMUL: return run_matmul(p, n, c, in, y);
    case K_UNARY: return run_unary(p, n, c, in, y);
    case K_BINARY: return run_binary(p, n, c, in, y);
    case K_AFFINE: return run_affine(p, n, c, in, y);
    case K_POOL: return run_pool(p, n, c, in, y);
    case K_GPOOL: return run_gpool(p, n, c, in, y);
    case K_SOFTMAX: return run_softmax(p, n, c, in, y);
    case K_LAYERNORM: return run_layernorm(p, n, c, in, y);
    case K_TRANSPOSE: return run_transpose(p, n, c, in, y);
    case K_CONCAT: return run_concat(p, n, c, in, y);
    case K_COPY: {
      size_t bytes = val_bytes(y);
      if (bytes) CU(cudaMemcpyAsync(dptr(p, y), dptr(p, in[0]), bytes, cudaMemcpyDeviceToDevice, p->s));
      return ALMA_OK;
    }
    case K_HOST: break;
  }
  return alma__errorf(ALMA_ERR_INTERNAL, "CUDA: node '%s' has no kernel", n->name);
}

/* ---- run ------------------------------------------------------------------------------------------------ */
#define MAX_IO 64

static int inputs_of(cu_plan *p, const alma_node *n, cu_val **in, const alma_tensor **hin, alma_tensor *hdr) {
  int nin = n->n_inputs < MAX_IO ? n->n_inputs : MAX_IO;
  for (int k = 0; k < nin; k++) {
    in[k] = n->inputs[k] >= 0 ? &p->v[n->inputs[k]] : NULL;
    if (!in[k]) {
      hin[k] = NULL;
      continue;
    }
    hdr[k] = in[k]->h;
    if (!in[k]->on_host) hdr[k].data = NULL;
    hin[k] = &hdr[k];
  }
  return nin;
}

/* The inputs only the device holds, copied back (boundary copies, counted), their headers updated. */
static alma_status inputs_to_host(cu_plan *p, cu_val *const *in, alma_tensor *hdr, int nin) {
  for (int k = 0; k < nin; k++)
    if (in[k] && !in[k]->on_host) {
      ALMA_TRY(download(p, in[k]));
      p->bound_copies++;
      p->bound_bytes += (int64_t)val_bytes(in[k]);
      hdr[k] = in[k]->h;
    }
  return ALMA_OK;
}

static alma_status run_on_host(cu_plan *p, const alma_node *n) {
  cu_val *in[MAX_IO];
  const alma_tensor *hin[MAX_IO];
  alma_tensor hdr[MAX_IO], out[MAX_IO];
  if (n->n_inputs > MAX_IO || n->n_outputs > MAX_IO) return alma__errorf(ALMA_ERR_UNSUPPORTED, "CUDA: node '%s': over %d inputs or outputs", n->name, MAX_IO);
  int nin = inputs_of(p, n, in, hin, hdr);
  ALMA_TRY(inputs_to_host(p, in, hdr, nin));
  /* with the graph's constants known, so kernels keep what they derive from weights (packed copies) */
  ALMA_TRY(alma__op_run_node_of(p->g, n, hin, nin, out, n->n_outputs, 1, NULL, NULL));
  for (int k = 0; k < n->n_outputs; k++) {
    if (n->outputs[k] < 0) {
      alma_tensor_free_data(&out[k]);
      continue;
    }
    cu_val *v = &p->v[n->outputs[k]];
    release(p, v);
    v->h = out[k];
    v->on_host = 1;
  }
  return ALMA_OK;
}

/* ALMA_ERR_DYNAMIC (error cleared) when the node is declined for these shapes: run it on the host. */
static alma_status run_on_device(cu_plan *p, const alma_node *n, cu_node *c) {
  cu_val *in[MAX_IO];
  const alma_tensor *hin[MAX_IO];
  alma_tensor hdr[MAX_IO], out[MAX_IO];
  if (n->n_inputs > MAX_IO || n->n_outputs > MAX_IO) return RUN_DECLINE(c, "too many inputs");
  int nin = inputs_of(p, n, in, hin, hdr);
  memset(out, 0, sizeof(alma_tensor) * (size_t)n->n_outputs);
  alma_status st = n->op->infer(n, hin, nin, out, n->n_outputs);
  if (st == ALMA_ERR_DYNAMIC) { /* the shape depends on a value only the device holds */
    ALMA_TRY(inputs_to_host(p, in, hdr, nin));
    memset(out, 0, sizeof(alma_tensor) * (size_t)n->n_outputs);
    st = n->op->infer(n, hin, nin, out, n->n_outputs);
  }
  if (st != ALMA_OK) return st;
  if (out[0].dtype != ALMA_DTYPE_FLOAT32) return RUN_DECLINE(c, "an output not float32");
  for (int k = 0; k < device_inputs(c, n) && k < nin; k++) {
    if (!in[k]) continue;
    if (in[k]->h.dtype != ALMA_DTYPE_FLOAT32) return RUN_DECLINE(c, "an input not float32");
    if (!in[k]->on_dev) {
      ALMA_TRY(upload(p, in[k]));
      if (!p->g->values[n->inputs[k]].is_input) {
        p->bound_copies++;
        p->bound_bytes += (int64_t)val_bytes(in[k]);
      }
    }
  }
  cu_val *y = &p->v[n->outputs[0]];
  release(p, y);
  y->h = (alma_tensor){.dtype = out[0].dtype, .rank = out[0].rank};
  memcpy(y->h.dims, out[0].dims, sizeof y->h.dims);
  ALMA_TRY(pool_get(p, val_bytes(y) ? val_bytes(y) : 1, &y->buf));
  st = launch(p, n, c, in, y);
  if (st != ALMA_OK) {
    release(p, y);
    return st;
  }
  y->on_dev = 1;
  return ALMA_OK;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static void release_all(cu_plan *p) {
  for (int i = 0; i < p->g->n_values; i++)
    if (!p->g->values[i].init) release(p, &p->v[i]);
}

static alma_status run_body(cu_plan *p, const alma_tensor *inputs, int n_inputs, alma_tensor *outputs, int n_outputs) {
  const alma_graph *g = p->g;
  if (n_inputs != g->n_inputs || n_outputs != g->n_outputs)
    return alma__errorf(ALMA_ERR_INVALID_ARG, "CUDA: %d inputs and %d outputs given, the graph has %d and %d", n_inputs,
                        n_outputs, g->n_inputs, g->n_outputs);
  for (int i = 0; i < g->n_values; i++)
    if (g->values[i].init) {
      cu_val *v = &p->v[i];
      v->h = *g->values[i].init;
      v->h.owns_data = 0;
      v->on_host = 1;
      v->on_dev = v->wdev != NULL;
    }
  for (int i = 0; i < n_inputs; i++) {
    cu_val *v = &p->v[g->inputs[i]];
    v->h = inputs[i];
    v->h.owns_data = 0;
    v->on_host = 1;
    v->on_dev = 0;
  }
  CU(cudaEventRecord(p->ev[0], p->s));
  /* the inputs a device node reads first, uploaded before any kernel: the host-to-device phase */
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    for (int k = 0; k < device_inputs(&p->nd[i], n) && k < n->n_inputs; k++) {
      int vi = n->inputs[k];
      if (vi >= 0 && g->values[vi].is_input && g->values[vi].dtype == ALMA_DTYPE_FLOAT32) ALMA_TRY(upload(p, &p->v[vi]));
    }
  }
  CU(cudaEventRecord(p->ev[1], p->s));
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    cu_node *c = &p->nd[i];
    alma_status st = ALMA_ERR_DYNAMIC;
    if (c->k != K_HOST) {
      st = run_on_device(p, n, c);
      if (st == ALMA_OK) c->dev_runs++;
    }
    if (st == ALMA_ERR_DYNAMIC) {
      alma__error_clear();
      ALMA_TRY(run_on_host(p, n));
      c->host_runs++;
    } else if (st != ALMA_OK) {
      return st;
    }
    for (int k = 0; k < n->n_inputs; k++) {
      int vi = n->inputs[k];
      if (vi >= 0 && !g->values[vi].init && p->v[vi].last_use == i) release(p, &p->v[vi]);
    }
  }
  CU(cudaEventRecord(p->ev[2], p->s));
  for (int o = 0; o < n_outputs; o++) {
    cu_val *v = &p->v[g->outputs[o]];
    if (v->on_host && !v->h.owns_data) {
      ALMA_TRY(alma__tensor_alloc_like(&outputs[o], &v->h));
      if (v->h.nbytes) memcpy(outputs[o].data, v->h.data, v->h.nbytes);
      continue;
    }
    ALMA_TRY(download(p, v));
    outputs[o] = v->h;
    v->h.owns_data = 0;
    v->h.data = NULL;
    v->on_host = 0;
  }
  CU(cudaEventRecord(p->ev[3], p->s));
  CU(cudaEventSynchronize(p->ev[3]));
  float ms[3];
  for (int k = 0; k < 3; k++) CU(cudaEventElapsedTime(&ms[k], p->ev[k], p->ev[k + 1]));
  p->h2d_ms += ms[0];
  p->compute_ms += ms[1];
  p->d2h_ms += ms[2];
  return ALMA_OK;
}

static alma_status cuda_run(void *plan, const alma_tensor *inputs, int n_inputs, alma_tensor *outputs, int n_outputs) {
  cu_plan *p = plan;
  double t0 = now_ms();
  for (int o = 0; o < n_outputs; o++) memset(&outputs[o], 0, sizeof outputs[o]);
  alma_status st = run_body(p, inputs, n_inputs, outputs, n_outputs);
  if (st != ALMA_OK) {
    for (int o = 0; o < n_outputs; o++) alma_tensor_free_data(&outputs[o]);
    cudaStreamSynchronize(p->s);
  }
  release_all(p);
  if (st == ALMA_OK) {
    p->runs++;
    p->wall_ms += now_ms() - t0;
  }
  return st;
}

static alma_status cuda_synchronize(void *plan) {
  cu_plan *p = plan;
  CU(cudaStreamSynchronize(p->s));
  return ALMA_OK;
}

/* ---- placement, description, facts ----------------------------------------------------------------------- */
static alma__placement node_placement(const cu_node *c) {
  alma__placement pl = c->pl;
  if (pl.place == ALMA_PLACE_RUNTIME && c->host_runs)
    pl = (alma__placement){.place = c->dev_runs ? ALMA_PLACE_PARTIAL : ALMA_PLACE_EAGER, .reason = ALMA_DECLINE_DYNAMIC,
                           .detail = c->why};
  return pl;
}

static alma_status cuda_placement(void *plan, alma__placement *nodes) {
  cu_plan *p = plan;
  for (int i = 0; i < p->g->n_nodes; i++) nodes[i] = node_placement(&p->nd[i]);
  return ALMA_OK;
}

static void cuda_describe(void *plan, FILE *f) {
  cu_plan *p = plan;
  for (int i = 0; i < p->g->n_nodes; i++) {
    alma__placement pl = node_placement(&p->nd[i]);
    const alma_node *n = &p->g->nodes[i];
    if (pl.place == ALMA_PLACE_RUNTIME)
      fprintf(f, "  %-40s %-20s CUDA\n", n->name, n->op_type);
    else
      fprintf(f, "  %-40s %-20s %s (%s: %s)\n", n->name, n->op_type, pl.place == ALMA_PLACE_PARTIAL ? "CUDA/EAGER" : "EAGER",
              alma__decline_name(pl.reason), pl.detail ? pl.detail : "");
  }
}

static alma_status cuda_info(void *plan, char *json, size_t n) {
  cu_plan *p = plan;
  int drv = 0, rt = 0, blas_v = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  L->cublasGetVersion_v2(p->blas, &blas_v);
  size_t mfree = 0, mtotal = 0;
  cudaMemGetInfo(&mfree, &mtotal);
  int clock_khz = 0, mem_clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, p->device);
  cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, p->device);
  int on_dev = 0, on_host = 0;
  for (int i = 0; i < p->g->n_nodes; i++) {
    if (p->nd[i].dev_runs) on_dev++;
    if (p->nd[i].host_runs || p->nd[i].k == K_HOST) on_host++;
  }
  double r = p->runs ? (double)p->runs : 1.0;
  snprintf(json, n,
           "{\"device\":\"%s\",\"compute_capability\":\"%d.%d\",\"driver\":%d,\"cuda_runtime\":%d,\"cudnn\":%zu,"
           "\"cublas\":%d,\"sm_clock_mhz\":%d,\"memory_clock_mhz\":%d,\"memory_total_bytes\":%zu,\"tf32\":%s,"
           "\"conv_algo\":\"%s\",\"host_memory\":\"%s\",\"runs\":%lld,\"h2d_ms\":%.6g,\"compute_ms\":%.6g,"
           "\"d2h_ms\":%.6g,\"run_wall_ms\":%.6g,\"boundary_copies_per_run\":%.6g,\"boundary_bytes_per_run\":%.6g,"
           "\"device_bytes_weights\":%zu,\"device_bytes_peak\":%zu,\"nodes_on_device\":%d,\"nodes_on_host\":%d}",
           p->name, p->cc_major, p->cc_minor, drv, rt, L->cudnnGetVersion(), blas_v, clock_khz / 1000,
           mem_clock_khz / 1000, mtotal, p->tf32 ? "true" : "false", p->search ? "search" : "heuristic",
           p->pinned ? "pinned" : "pageable", (long long)p->runs, p->h2d_ms / r, p->compute_ms / r, p->d2h_ms / r,
           p->wall_ms / r, (double)p->bound_copies / r, (double)p->bound_bytes / r, p->dev_weights, p->dev_peak,
           on_dev, on_host);
  return ALMA_OK;
}

static void cuda_free(void *plan) {
  cu_plan *p = plan;
  if (!p) return;
  if (p->s) cudaStreamSynchronize(p->s);
  if (p->v) {
    release_all(p);
    for (int i = 0; i < p->g->n_values; i++)
      if (p->v[i].wdev) cudaFree(p->v[i].wdev);
  }
  if (p->nd)
    for (int i = 0; i < p->g->n_nodes; i++) {
      cu_node *c = &p->nd[i];
      if (c->scale) cudaFree(c->scale);
      if (c->xd) {
        L->cudnnDestroyTensorDescriptor(c->xd);
        L->cudnnDestroyTensorDescriptor(c->yd);
        L->cudnnDestroyTensorDescriptor(c->bd);
        L->cudnnDestroyFilterDescriptor(c->wd);
        L->cudnnDestroyConvolutionDescriptor(c->cd);
      }
    }
  for (int i = 0; i < p->n_pool; i++) cudaFree(p->pool[i].p);
  if (p->ws) cudaFree(p->ws);
  if (p->pin) cudaFreeHost(p->pin);
  if (p->blas) L->cublasDestroy_v2(p->blas);
  if (p->dnn) L->cudnnDestroy(p->dnn);
  for (int i = 0; i < 4; i++)
    if (p->ev[i]) cudaEventDestroy(p->ev[i]);
  if (p->s) cudaStreamDestroy(p->s);
  free(p->pool);
  free(p->v);
  free(p->nd);
  free(p);
}

const alma_runtime alma__runtime_cuda = {
    .name = "CUDA",
    .description = "NVIDIA GPU: cuDNN convolutions, cuBLAS products, alma's CUDA kernels for elementwise, "
                   "normalization, softmax, pooling and layout nodes; other nodes on EAGER on the host",
    .single_threaded = 1,
    .init = cuda_init,
    .compile = cuda_compile,
    .run = cuda_run,
    .synchronize = cuda_synchronize,
    .free = cuda_free,
    .placement = cuda_placement,
    .describe = cuda_describe,
    .info = cuda_info,
    .option_prefix = "cuda",
    .options = cuda_options,
    .n_options = (int)(sizeof cuda_options / sizeof cuda_options[0]),
    .device = ALMA__DEVICE_CUDA,
};
#endif
