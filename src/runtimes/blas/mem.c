/* Activation buffers of one BLAS plan: one arena, laid out from the previous run.
 *
 * Why: glibc serves blocks above its mmap threshold (at most 32 MiB) with mmap and returns them
 * with munmap, so allocating each activation and freeing it after its last use mapped and faulted
 * every large activation again in every run (MobileNet-V2 at batch 32: ~105K page faults, ~420 MB,
 * per batch; 1-3 µs each in a VM).
 *
 * How: a run asks for buffers in the same order every time its shapes are the same. Each run
 * records its requests: sizes, and when each buffer is taken and given back (as event numbers).
 * After a run that had no layout to follow, every request gets an offset in one arena such that
 * buffers alive at the same time do not overlap (greedy by size, as TensorFlow Lite's arena
 * planner: largest first, each into the tightest gap among the overlapping ones already placed),
 * and the arena is allocated and touched once, so its pages are mapped before the next run. The
 * next run hands out arena + offset for as long as its requests follow the recorded sequence (a
 * request may be smaller than recorded: a data-dependent shape, a smaller batch). From the first
 * event that differs, the rest of the run uses aligned_alloc/free (what the runtime did before),
 * buffers already in the arena stay valid (nothing else is placed there any more), and the run's
 * own record becomes the next layout.
 *
 * So a steady state maps and faults nothing, and the arena holds about the peak of live
 * activations (exactly that on the models measured; a best-fit free list of buffers kept across
 * runs held 1.6x: 300 MiB for MobileNet-V2's 184 MiB at batch 32). The arena is kept while a
 * layout fits in it; it is replaced when one needs more, or less than 4/5 of it.
 *
 * Single-threaded: only the thread calling run() takes and returns buffers. */
#ifdef ALMA_HAVE_BLAS

#include "runtimes/blas/internal.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

/* Under AddressSanitizer the arena's free parts are poisoned, so a kernel that overruns its output
 * or reads a value after its last use is still caught when buffers come from the arena. */
#if defined(__SANITIZE_ADDRESS__)
#define ALMA__BLAS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ALMA__BLAS_ASAN 1
#endif
#endif
#ifdef ALMA__BLAS_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define ALIGN 64

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static int grow(void **p, int *cap, int need, size_t elem) {
  if (need <= *cap) return 0;
  int c = *cap ? *cap : 64;
  while (c < need) c *= 2;
  void *n = realloc(*p, (size_t)c * elem);
  if (!n) return -1;
  *p = n;
  *cap = c;
  return 0;
}

void *alma__blas_mem_get(alma__blas_mem *m, size_t bytes) {
  if (bytes > SIZE_MAX / 2) return NULL;
  size_t size = bytes ? round_up(bytes, ALIGN) : ALIGN;
  /* room for this request and every release to come (a run has at most two events per request):
   * alma__blas_mem_put never allocates */
  if (grow((void **)&m->rec, &m->rec_cap, m->n_rec + 1, sizeof *m->rec) ||
      grow((void **)&m->ev, &m->ev_cap, 2 * (m->n_rec + 1), sizeof *m->ev) ||
      grow((void **)&m->live, &m->live_cap, m->n_live + 1, sizeof *m->live))
    return NULL;
  int k = m->n_rec;
  void *ptr;
  int in_arena = 0;
  if (m->following && m->at < m->n_plan_ev && m->plan_ev[m->at] >= (int64_t)size) {
    ptr = m->arena + m->plan_off[k]; /* every event so far followed the plan: k is its k-th request */
    in_arena = 1;
    m->at++;
    UNPOISON(ptr, bytes);
  } else {
    m->following = 0;
    ptr = aligned_alloc(ALIGN, size);
    if (!ptr) return NULL;
    m->allocs++;
    m->run_allocs++;
  }
  m->rec[k] = (alma__blas_mem_rec){.size = size, .t0 = m->n_ev, .t1 = -1, .ptr = ptr, .in_arena = in_arena};
  m->n_rec++;
  m->ev[m->n_ev++] = (int64_t)size;
  m->live[m->n_live++] = k;
  m->live_bytes += size;
  if (m->live_bytes > m->peak) m->peak = m->live_bytes;
  return ptr;
}

static int find_live(const alma__blas_mem *m, const void *ptr) {
  if (!ptr) return -1;
  for (int j = m->n_live - 1; j >= 0; j--) /* the latest buffers are given back first */
    if (m->rec[m->live[j]].ptr == ptr) return j;
  return -1;
}

size_t alma__blas_mem_size(const alma__blas_mem *m, const void *ptr) {
  int j = find_live(m, ptr);
  return j >= 0 ? m->rec[m->live[j]].size : 0;
}

int alma__blas_mem_put(alma__blas_mem *m, void *ptr) {
  int j = find_live(m, ptr);
  if (j < 0) return 0;
  int k = m->live[j];
  m->live[j] = m->live[--m->n_live];
  alma__blas_mem_rec *r = &m->rec[k];
  r->t1 = m->n_ev;
  m->ev[m->n_ev++] = -(int64_t)k - 1;
  m->live_bytes -= r->size;
  if (m->following) {
    if (m->at < m->n_plan_ev && m->plan_ev[m->at] == -(int64_t)k - 1)
      m->at++;
    else
      m->following = 0;
  }
  if (r->in_arena)
    POISON(ptr, r->size);
  else
    free(ptr);
  return 1;
}

void alma__blas_mem_begin(alma__blas_mem *m) {
  m->n_rec = m->n_ev = m->n_live = 0;
  m->live_bytes = 0;
  m->peak = 0;
  m->at = 0;
  m->following = m->has_plan;
  m->run_allocs = 0;
  m->runs++;
}

typedef struct placed {
  size_t off, size;
} placed;

typedef struct req {
  size_t size;
  int64_t t0;
  int k;
} req;

static int by_size_desc(const void *a, const void *b) {
  const req *x = a, *y = b;
  if (x->size != y->size) return x->size > y->size ? -1 : 1;
  return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

static int by_off(const void *a, const void *b) {
  const placed *x = a, *y = b;
  return x->off < y->off ? -1 : x->off > y->off;
}

/* Offsets for this run's requests (greedy by size); returns the arena size, or SIZE_MAX when out
 * of memory. */
static size_t lay_out(const alma__blas_mem *m, size_t *off) {
  int n = m->n_rec;
  req *order = malloc((size_t)(n ? n : 1) * sizeof *order);
  placed *ov = malloc((size_t)(n ? n : 1) * sizeof *ov);
  if (!order || !ov) {
    free(order);
    free(ov);
    return SIZE_MAX;
  }
  for (int i = 0; i < n; i++) order[i] = (req){m->rec[i].size, m->rec[i].t0, i};
  qsort(order, (size_t)n, sizeof *order, by_size_desc);
  size_t total = 0;
  for (int a = 0; a < n; a++) {
    const alma__blas_mem_rec *r = &m->rec[order[a].k];
    int64_t t1 = r->t1 < 0 ? INT64_MAX : r->t1;
    int nov = 0;
    for (int b = 0; b < a; b++) { /* placed buffers alive at the same time */
      const alma__blas_mem_rec *q = &m->rec[order[b].k];
      int64_t q1 = q->t1 < 0 ? INT64_MAX : q->t1;
      if (q->t0 < t1 && r->t0 < q1) ov[nov++] = (placed){off[order[b].k], q->size};
    }
    qsort(ov, (size_t)nov, sizeof *ov, by_off);
    size_t at = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
    for (int b = 0; b < nov; b++) { /* the tightest gap that holds it, else after them all */
      if (ov[b].off > at && ov[b].off - at >= r->size && ov[b].off - at < best_gap) {
        best = at;
        best_gap = ov[b].off - at;
      }
      if (ov[b].off + ov[b].size > at) at = ov[b].off + ov[b].size;
    }
    size_t o = best != SIZE_MAX ? best : at;
    off[order[a].k] = o;
    if (o + r->size > total) total = o + r->size;
  }
  free(order);
  free(ov);
  return total;
}

void alma__blas_mem_end(alma__blas_mem *m, int ok) {
  /* a run that followed the layout to its end keeps it (its requests fitted) */
  if (!ok || m->n_live || (m->following && m->at == m->n_plan_ev)) return;
  size_t *off = malloc((size_t)(m->n_rec ? m->n_rec : 1) * sizeof *off);
  size_t need = off ? lay_out(m, off) : SIZE_MAX;
  m->has_plan = 0;
  if (need == SIZE_MAX) { /* out of memory: no layout, the next run allocates as it goes */
    free(off);
    return;
  }
  need = round_up(need ? need : ALIGN, 4096);
  if (!m->arena || m->arena_size < need || m->arena_size / 5 * 4 > need) {
    if (m->arena) UNPOISON(m->arena, m->arena_size);
    free(m->arena);
#ifdef __GLIBC__
    malloc_trim(0); /* the run's buffers freed inside glibc's heap go back to the system first */
#endif
    m->arena = aligned_alloc(4096, need);
    m->arena_size = m->arena ? need : 0;
    if (!m->arena) {
      free(off);
      return;
    }
    memset(m->arena, 0, need); /* map and fault it now, in this run, not in the next */
    m->allocs++;
    m->run_allocs++;
  }
  POISON(m->arena, m->arena_size);
  /* the recorded events become the plan (swap the arrays: no copy, no allocation) */
  int64_t *ev = m->plan_ev;
  int cap = m->plan_ev_cap;
  m->plan_ev = m->ev;
  m->plan_ev_cap = m->ev_cap;
  m->n_plan_ev = m->n_ev;
  m->ev = ev;
  m->ev_cap = cap;
  m->n_ev = 0;
  free(m->plan_off);
  m->plan_off = off;
  m->planned = need;
  m->plan_peak = m->peak;
  m->has_plan = 1;
  m->layouts++;
}

void alma__blas_mem_free(alma__blas_mem *m) {
  for (int j = 0; j < m->n_live; j++)
    if (!m->rec[m->live[j]].in_arena) free(m->rec[m->live[j]].ptr);
  if (m->arena) UNPOISON(m->arena, m->arena_size);
  free(m->arena);
  free(m->rec);
  free(m->ev);
  free(m->live);
  free(m->plan_ev);
  free(m->plan_off);
  memset(m, 0, sizeof *m);
}

#endif /* ALMA_HAVE_BLAS */
