/* alma's own CUDA C kernels: elementwise, per-channel affine, row reductions, softmax, layer
 * normalization, permutation and 2-D pooling, float32. Grid-stride loops; one block per row for
 * the row-wise ops (a block-wide reduction in shared memory). */
#include <cuda_runtime.h>
#include <math.h>

#include "cuda_kernels.h"

#define THREADS 256

static inline int blocks_for(int64_t n) {
  int64_t b = (n + THREADS - 1) / THREADS;
  return (int)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

static inline int launched(void) { return (int)cudaGetLastError(); }

/* The element offset of output index i in a tensor read through strides st over dims (row-major). */
__device__ static inline int64_t offset_of(int64_t i, int rank, const int64_t *dims, const int64_t *st) {
  int64_t off = 0;
  for (int d = rank - 1; d >= 0; d--) {
    int64_t q = i / dims[d];
    off += (i - q * dims[d]) * st[d];
    i = q;
  }
  return off;
}

__device__ static inline float unary(int op, float x, float a, float b) {
  switch (op) {
    case ALMA_CU_RELU: return x > 0.f ? x : 0.f;
    case ALMA_CU_SIGMOID: return 1.f / (1.f + expf(-x));
    case ALMA_CU_TANH: return tanhf(x);
    case ALMA_CU_CLIP: return fminf(fmaxf(x, a), b);
    case ALMA_CU_LEAKY: return x >= 0.f ? x : a * x;
    case ALMA_CU_HARDSIGMOID: return fminf(fmaxf(a * x + b, 0.f), 1.f);
    case ALMA_CU_HARDSWISH: return x * fminf(fmaxf(x / 6.f + 0.5f, 0.f), 1.f);
    case ALMA_CU_ERF: return erff(x);
    case ALMA_CU_EXP: return expf(x);
    case ALMA_CU_LOG: return logf(x);
    case ALMA_CU_SQRT: return sqrtf(x);
    case ALMA_CU_NEG: return -x;
    case ALMA_CU_ABS: return fabsf(x);
    case ALMA_CU_RECIPROCAL: return 1.f / x;
    case ALMA_CU_GELU:
      if (a != 0.f) return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
      return 0.5f * x * (1.f + erff(x * 0.7071067811865476f));
    case ALMA_CU_ELU: return x >= 0.f ? x : a * (expf(x) - 1.f);
    case ALMA_CU_SOFTPLUS: return x > 20.f ? x : log1pf(expf(x));
    case ALMA_CU_SILU: return x / (1.f + expf(-x));
  }
  return x;
}

__global__ static void k_unary(int op, const float *x, float *y, int64_t n, float a, float b) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = unary(op, x[i], a, b);
}

extern "C" int alma_cu_unary(alma_cu_unary_op op, const float *x, float *y, int64_t n, float a, float b, void *stream) {
  if (n > 0) k_unary<<<blocks_for(n), THREADS, 0, (cudaStream_t)stream>>>((int)op, x, y, n, a, b);
  return launched();
}

__device__ static inline float binary(int op, float a, float b) {
  switch (op) {
    case ALMA_CU_ADD: return a + b;
    case ALMA_CU_SUB: return a - b;
    case ALMA_CU_MUL: return a * b;
    case ALMA_CU_DIV: return a / b;
    case ALMA_CU_POW: return powf(a, b);
    case ALMA_CU_MAX: return fmaxf(a, b);
    case ALMA_CU_MIN: return fminf(a, b);
  }
  return a;
}

/* Same shapes: no index arithmetic. */
__global__ static void k_binary_flat(int op, const float *a, const float *b, float *y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = binary(op, a[i], b[i]);
}

__global__ static void k_binary_bcast(int op, const float *a, const float *b, float *y, alma_cu_bcast bc, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = binary(op, a[offset_of(i, bc.rank, bc.dims, bc.sa)], b[offset_of(i, bc.rank, bc.dims, bc.sb)]);
}

extern "C" int alma_cu_binary(alma_cu_binary_op op, const float *a, const float *b, float *y, const alma_cu_bcast *bc,
                              int64_t n, void *stream) {
  if (n <= 0) return launched();
  int flat = 1;
  int64_t s = 1;
  for (int d = bc->rank - 1; d >= 0; d--) {
    if (bc->dims[d] != 1 && (bc->sa[d] != s || bc->sb[d] != s)) flat = 0;
    s *= bc->dims[d];
  }
  if (flat)
    k_binary_flat<<<blocks_for(n), THREADS, 0, (cudaStream_t)stream>>>((int)op, a, b, y, n);
  else
    k_binary_bcast<<<blocks_for(n), THREADS, 0, (cudaStream_t)stream>>>((int)op, a, b, y, *bc, n);
  return launched();
}

__global__ static void k_expand(const float *x, float *y, alma_cu_bcast bc, int64_t n, float scale) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = scale * x[offset_of(i, bc.rank, bc.dims, bc.sa)];
}

extern "C" int alma_cu_expand(const float *x, float *y, const alma_cu_bcast *bc, int64_t n, float scale, void *stream) {
  if (n > 0) k_expand<<<blocks_for(n), THREADS, 0, (cudaStream_t)stream>>>(x, y, *bc, n, scale);
  return launched();
}

__global__ static void k_affine(const float *x, float *y, const float *scale, const float *shift, int64_t total,
                                int64_t c, int64_t inner) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t ch = (i / inner) % c;
    y[i] = x[i] * scale[ch] + shift[ch];
  }
}

extern "C" int alma_cu_channel_affine(const float *x, float *y, const float *scale, const float *shift, int64_t n_outer,
                                      int64_t c, int64_t inner, void *stream) {
  int64_t total = n_outer * c * inner;
  if (total > 0) k_affine<<<blocks_for(total), THREADS, 0, (cudaStream_t)stream>>>(x, y, scale, shift, total, c, inner);
  return launched();
}

/* Block-wide sum or max of v (every thread of the block calls it; result in every thread). */
__device__ static float block_reduce(float v, int is_max) {
  __shared__ float sh[THREADS];
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] = is_max ? fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]) : sh[threadIdx.x] + sh[threadIdx.x + s];
    __syncthreads();
  }
  float r = sh[0];
  __syncthreads();
  return r;
}

__global__ static void k_row_reduce(const float *x, float *y, int64_t rows, int64_t cols, int is_max) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *p = x + r * cols;
    float acc = is_max ? -INFINITY : 0.f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) acc = is_max ? fmaxf(acc, p[j]) : acc + p[j];
    acc = block_reduce(acc, is_max);
    if (threadIdx.x == 0) y[r] = is_max ? acc : acc / (float)cols;
  }
}

static inline int row_blocks(int64_t rows) { return (int)(rows < 1 ? 1 : rows > 65535 * 8 ? 65535 * 8 : rows); }

extern "C" int alma_cu_row_reduce(const float *x, float *y, int64_t rows, int64_t cols, int is_max, void *stream) {
  if (rows > 0) k_row_reduce<<<row_blocks(rows), THREADS, 0, (cudaStream_t)stream>>>(x, y, rows, cols, is_max);
  return launched();
}

__global__ static void k_softmax(const float *x, float *y, int64_t rows, int64_t cols, int is_log) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *p = x + r * cols;
    float *q = y + r * cols;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, p[j]);
    m = block_reduce(m, 1);
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += expf(p[j] - m);
    s = block_reduce(s, 0);
    if (is_log) {
      float ls = logf(s);
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) q[j] = p[j] - m - ls;
    } else {
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) q[j] = expf(p[j] - m) / s;
    }
  }
}

extern "C" int alma_cu_softmax(const float *x, float *y, int64_t rows, int64_t cols, int is_log, void *stream) {
  if (rows > 0 && cols > 0) k_softmax<<<row_blocks(rows), THREADS, 0, (cudaStream_t)stream>>>(x, y, rows, cols, is_log);
  return launched();
}

__global__ static void k_layernorm(const float *x, float *y, const float *gamma, const float *beta, int64_t rows,
                                   int64_t cols, float eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *p = x + r * cols;
    float *q = y + r * cols;
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += p[j];
    float mean = block_reduce(s, 0) / (float)cols;
    float v = 0.f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) v += (p[j] - mean) * (p[j] - mean);
    float inv = rsqrtf(block_reduce(v, 0) / (float)cols + eps);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      q[j] = (p[j] - mean) * inv * gamma[j] + (beta ? beta[j] : 0.f);
  }
}

extern "C" int alma_cu_layernorm(const float *x, float *y, const float *gamma, const float *beta, int64_t rows,
                                 int64_t cols, float eps, void *stream) {
  if (rows > 0 && cols > 0)
    k_layernorm<<<row_blocks(rows), THREADS, 0, (cudaStream_t)stream>>>(x, y, gamma, beta, rows, cols, eps);
  return launched();
}

typedef struct {
  int rank;
  int64_t dims[ALMA_CU_MAX_RANK], strides[ALMA_CU_MAX_RANK];
} perm_args;

__global__ static void k_permute(const float *x, float *y, perm_args pa, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = x[offset_of(i, pa.rank, pa.dims, pa.strides)];
}

extern "C" int alma_cu_permute(const float *x, float *y, int rank, const int64_t *out_dims, const int64_t *in_strides,
                               int64_t n, void *stream) {
  perm_args pa;
  pa.rank = rank;
  for (int d = 0; d < rank; d++) {
    pa.dims[d] = out_dims[d];
    pa.strides[d] = in_strides[d];
  }
  if (n > 0) k_permute<<<blocks_for(n), THREADS, 0, (cudaStream_t)stream>>>(x, y, pa, n);
  return launched();
}

/* One thread per output element; the window clipped to the input (max, average without padding)
 * or to the padded input (average with count_include_pad). */
__global__ static void k_pool2d(const float *x, float *y, alma_cu_pool p) {
  int64_t total = p.n * p.c * p.oh * p.ow;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t ow = i % p.ow, oh = (i / p.ow) % p.oh, nc = i / (p.ow * p.oh);
    const float *src = x + nc * p.h * p.w;
    int64_t h0 = oh * p.sh - p.pt, w0 = ow * p.sw - p.pl;
    float acc = p.is_max ? -INFINITY : 0.f;
    int cnt = 0, padded = 0;
    for (int kh = 0; kh < p.kh; kh++) {
      int64_t ih = h0 + (int64_t)kh * p.dh;
      if (ih >= p.h + p.pb) break;
      for (int kw = 0; kw < p.kw; kw++) {
        int64_t iw = w0 + (int64_t)kw * p.dw;
        if (iw >= p.w + p.pr) break;
        padded++;
        if (ih < 0 || iw < 0 || ih >= p.h || iw >= p.w) continue;
        float v = src[ih * p.w + iw];
        acc = p.is_max ? fmaxf(acc, v) : acc + v;
        cnt++;
      }
    }
    y[i] = p.is_max ? acc : acc / (float)(p.count_include_pad ? padded : (cnt ? cnt : 1));
  }
}

extern "C" int alma_cu_pool2d(const float *x, float *y, const alma_cu_pool *p, void *stream) {
  int64_t total = p->n * p->c * p->oh * p->ow;
  if (total > 0) k_pool2d<<<blocks_for(total), THREADS, 0, (cudaStream_t)stream>>>(x, y, *p);
  return launched();
}
