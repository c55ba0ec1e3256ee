/* Einsum: any equation (explicit or implicit output, repeated labels/diagonals, ellipsis with
 * broadcasting, any number of operands).
 *
 * Plan: every operand is gathered into a contiguous work buffer with one dim per distinct label
 * (a repeated label becomes its diagonal through summed strides; a size-1 dim broadcasts through
 * stride 0). Labels no later step needs are summed out early; operands are then contracted left to
 * right, each pair as a batched GEMM: A permuted to [batch, a-only, contracted] and B to
 * [batch, contracted, b-only]. The last result is reduced and permuted into the output order.
 * Work types: float (float32/16, bfloat16; alma__sgemm), double (float64) and uint64 bits for
 * integers (wrap-around arithmetic, exact for every integer width). */
#include "ops/nn_util.h"
#include "ops/sgemm.h"

#define EIN_LETTERS 52                  /* 'A'..'Z' -> 0..25, 'a'..'z' -> 26..51 (ASCII order) */
#define EIN_MAXL (EIN_LETTERS + ALMA_MAX_RANK) /* + ellipsis dims */

enum { W_F32, W_F64, W_U64 };

typedef struct ein_plan {
  int nops;
  int nl[16];                  /* labels per operand (one per dim, repeats allowed) */
  int lab[16][ALMA_MAX_RANK];
  int n_out;
  int out[ALMA_MAX_RANK];      /* output labels */
  int64_t size[EIN_MAXL];      /* size of every label, -1 if unused */
} ein_plan;

static int letter_id(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  return -1;
}

/* Parses one term (spaces already removed) into label ids; ellipsis dims get ids
 * EIN_LETTERS + (max_ell - ell) + t. rank < 0 for the output term (ellipsis = max_ell dims). */
static alma_status parse_term(const alma_node *n, const char *t, size_t len, int rank, int max_ell, int *labels,
                              int *nl_out, int *ell_out) {
  int letters = 0, has_ell = 0;
  for (size_t i = 0; i < len; i++) {
    if (t[i] == '.') {
      if (has_ell || i + 2 >= len || t[i + 1] != '.' || t[i + 2] != '.')
        return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "malformed ellipsis in einsum term '%.*s'", (int)len, t);
      has_ell = 1;
      i += 2;
    } else if (letter_id(t[i]) >= 0) {
      letters++;
    } else {
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "character '%c' in einsum equation", t[i]);
    }
  }
  int ell = 0;
  if (rank >= 0) {
    ell = rank - letters;
    if ((!has_ell && ell != 0) || ell < 0)
      return alma__op_error(n, ALMA_ERR_SHAPE, "einsum term '%.*s' has %d labels but its operand has rank %d", (int)len,
                            t, letters, rank);
  } else {
    ell = has_ell ? max_ell : 0;
  }
  if (letters + ell > ALMA_MAX_RANK)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "einsum term with %d dims", letters + ell);
  int k = 0;
  for (size_t i = 0; i < len; i++) {
    if (t[i] == '.') {
      for (int e = 0; e < ell; e++) labels[k++] = EIN_LETTERS + (max_ell - ell) + e;
      i += 2;
    } else {
      labels[k++] = letter_id(t[i]);
    }
  }
  *nl_out = k;
  if (ell_out) *ell_out = ell;
  return ALMA_OK;
}

static alma_status ein_parse(const alma_node *n, const alma_tensor *const *in, int nin, ein_plan *p) {
  memset(p, 0, sizeof *p);
  const alma_attr *a = alma__node_attr(n, "equation");
  if (!a || a->type != ALMA_ATTR_STRING) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute equation is required");
  if (nin < 1 || nin > 16) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "%d operands (1 to 16 supported)", nin);
  char eq[512];
  size_t len = 0;
  for (size_t i = 0; i < a->s_len; i++) {
    if (a->s[i] == ' ' || a->s[i] == '\t') continue;
    if (len + 1 >= sizeof eq) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "einsum equation too long");
    eq[len++] = a->s[i];
  }
  eq[len] = '\0';
  alma_dtype dt = in[0] ? in[0]->dtype : ALMA_DTYPE_UNDEFINED;
  for (int i = 0; i < nin; i++) {
    if (!in[i]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "operand %d is missing", i);
    if (in[i]->dtype != dt)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "operand %d is %s, operand 0 is %s", i,
                            alma_dtype_name(in[i]->dtype), alma_dtype_name(dt));
  }
  if (!(alma__dtype_is_float(dt) || alma__dtype_is_int(dt)))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "dtype %s", alma_dtype_name(dt));
  const char *arrow = strstr(eq, "->");
  size_t lhs_len = arrow ? (size_t)(arrow - eq) : len;
  /* first pass: ellipsis ranks */
  int max_ell = 0, op = 0;
  size_t start = 0;
  for (size_t i = 0; i <= lhs_len; i++) {
    if (i < lhs_len && eq[i] != ',') continue;
    if (op >= nin)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "equation '%s' has more terms than the %d operands", a->s, nin);
    int ell;
    ALMA_TRY(parse_term(n, eq + start, i - start, in[op]->rank, 0, p->lab[op], &p->nl[op], &ell));
    if (ell > max_ell) max_ell = ell;
    op++;
    start = i + 1;
  }
  if (op != nin)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "equation '%s' has %d terms for %d operands", a->s, op, nin);
  p->nops = nin;
  /* second pass with the common ellipsis rank (right-aligned broadcasting) */
  op = 0;
  start = 0;
  for (size_t i = 0; i <= lhs_len; i++) {
    if (i < lhs_len && eq[i] != ',') continue;
    ALMA_TRY(parse_term(n, eq + start, i - start, in[op]->rank, max_ell, p->lab[op], &p->nl[op], NULL));
    op++;
    start = i + 1;
  }
  /* label sizes: equal, or 1 (broadcast) */
  int count[EIN_MAXL] = {0};
  for (int l = 0; l < EIN_MAXL; l++) p->size[l] = -1;
  for (int o = 0; o < nin; o++)
    for (int d = 0; d < p->nl[o]; d++) {
      int l = p->lab[o][d];
      int64_t s = in[o]->dims[d];
      count[l]++;
      if (p->size[l] < 0 || p->size[l] == 1)
        p->size[l] = s;
      else if (s != 1 && s != p->size[l])
        return alma__op_error(n, ALMA_ERR_SHAPE, "einsum label '%c' has sizes %lld and %lld",
                              l < 26 ? 'A' + l : l < EIN_LETTERS ? 'a' + (l - 26) : '.', (long long)p->size[l],
                              (long long)s);
      for (int d2 = 0; d2 < d; d2++) /* a diagonal needs equal dims */
        if (p->lab[o][d2] == l && in[o]->dims[d2] != s)
          return alma__op_error(n, ALMA_ERR_SHAPE, "repeated einsum label in operand %d with sizes %lld and %lld", o,
                                (long long)in[o]->dims[d2], (long long)s);
    }
  if (arrow) {
    ALMA_TRY(parse_term(n, arrow + 2, len - lhs_len - 2, -1, max_ell, p->out, &p->n_out, NULL));
    for (int i = 0; i < p->n_out; i++) {
      int l = p->out[i];
      if (p->size[l] < 0)
        return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "output label '%c' appears in no operand",
                              l < 26 ? 'A' + l : l < EIN_LETTERS ? 'a' + (l - 26) : '.');
      for (int j = 0; j < i; j++)
        if (p->out[j] == l) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "output label repeated in '%s'", a->s);
    }
  } else {
    /* implicit: ellipsis dims, then the labels seen once, in alphabetical (ASCII) order */
    for (int e = 0; e < max_ell; e++) p->out[p->n_out++] = EIN_LETTERS + e;
    for (int l = 0; l < EIN_LETTERS; l++)
      if (count[l] == 1) {
        if (p->n_out >= ALMA_MAX_RANK) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "einsum output rank too large");
        p->out[p->n_out++] = l;
      }
  }
  return ALMA_OK;
}

static alma_status einsum_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                int nout) {
  ein_plan p;
  ALMA_TRY(ein_parse(n, in, nin, &p));
  int64_t dims[ALMA_MAX_RANK];
  for (int i = 0; i < p.n_out; i++) dims[i] = p.size[p.out[i]];
  alma__set_shape(&out[0], in[0]->dtype, p.n_out, dims);
  return ALMA_OK;
}

/* ---- work tensors ---------------------------------------------------------------------------- */

typedef struct ework {
  int nl;
  int lab[EIN_MAXL];
  int64_t dim[EIN_MAXL];
  void *data; /* contiguous, owned */
} ework;

static size_t wsize(int wt) { return wt == W_F32 ? 4 : 8; }

static int64_t ew_numel(const ework *w) {
  int64_t c = 1;
  for (int i = 0; i < w->nl; i++) c *= w->dim[i];
  return c;
}

/* Gathers operand t (labels lab[0..nl)) into a work tensor with one dim per distinct label. */
static alma_status ew_gather(const alma_node *n, const ein_plan *p, const alma_tensor *t, const int *lab, int nl,
                             int wt, ework *w) {
  int64_t tstr[ALMA_MAX_RANK], str[EIN_MAXL];
  alma__strides(t->rank, t->dims, tstr);
  w->nl = 0;
  for (int d = 0; d < nl; d++) {
    int k = 0;
    while (k < w->nl && w->lab[k] != lab[d]) k++;
    if (k == w->nl) {
      w->lab[k] = lab[d];
      w->dim[k] = p->size[lab[d]];
      str[k] = 0;
      w->nl++;
    }
    if (t->dims[d] != 1 || w->dim[k] == 1) str[k] += tstr[d]; /* size 1 vs larger: broadcast (stride 0) */
  }
  int64_t cnt = ew_numel(w);
  w->data = alma__nn_alloc(n, (size_t)cnt, wsize(wt));
  if (!w->data) return ALMA_ERR_NOMEM;
  int64_t idx[EIN_MAXL] = {0}, off = 0;
  for (int64_t i = 0; i < cnt; i++) {
    switch (wt) {
      case W_F32:
        ((float *)w->data)[i] = t->dtype == ALMA_DTYPE_FLOAT32 ? ((const float *)t->data)[off]
                                                               : (float)alma__get_f64(t->data, t->dtype, off);
        break;
      case W_F64: ((double *)w->data)[i] = alma__get_f64(t->data, t->dtype, off); break;
      default: ((uint64_t *)w->data)[i] = (uint64_t)alma__get_i64(t->data, t->dtype, off); break;
    }
    for (int k = w->nl - 1; k >= 0; k--) {
      off += str[k];
      if (++idx[k] < w->dim[k]) break;
      off -= str[k] * w->dim[k];
      idx[k] = 0;
    }
  }
  return ALMA_OK;
}

/* New work tensor with the dims of w ordered by perm (a permutation of w's dims). */
static alma_status ew_permute(const alma_node *n, ework *w, const int *perm, int wt) {
  int identity = 1;
  for (int i = 0; i < w->nl; i++) identity &= perm[i] == i;
  if (identity) return ALMA_OK;
  int64_t sstr[EIN_MAXL], str[EIN_MAXL], dim[EIN_MAXL];
  int lab[EIN_MAXL];
  int64_t s = 1;
  for (int i = w->nl - 1; i >= 0; i--) sstr[i] = s, s *= w->dim[i];
  for (int i = 0; i < w->nl; i++) {
    dim[i] = w->dim[perm[i]];
    lab[i] = w->lab[perm[i]];
    str[i] = sstr[perm[i]];
  }
  int64_t cnt = ew_numel(w);
  void *out = alma__nn_alloc(n, (size_t)cnt, wsize(wt));
  if (!out) return ALMA_ERR_NOMEM;
  int64_t idx[EIN_MAXL] = {0}, off = 0;
  for (int64_t i = 0; i < cnt; i++) {
    if (wt == W_F32)
      ((uint32_t *)out)[i] = ((const uint32_t *)w->data)[off];
    else
      ((uint64_t *)out)[i] = ((const uint64_t *)w->data)[off];
    for (int k = w->nl - 1; k >= 0; k--) {
      off += str[k];
      if (++idx[k] < dim[k]) break;
      off -= str[k] * dim[k];
      idx[k] = 0;
    }
  }
  free(w->data);
  w->data = out;
  memcpy(w->dim, dim, sizeof(int64_t) * (size_t)w->nl);
  memcpy(w->lab, lab, sizeof(int) * (size_t)w->nl);
  return ALMA_OK;
}

/* Sums out the dims whose label is not in keep[]. */
static alma_status ew_reduce(const alma_node *n, ework *w, const int *keep, int wt) {
  int perm[EIN_MAXL], np = 0, nkeep = 0;
  for (int i = 0; i < w->nl; i++)
    if (keep[w->lab[i]]) perm[np++] = i;
  nkeep = np;
  if (nkeep == w->nl) return ALMA_OK;
  for (int i = 0; i < w->nl; i++)
    if (!keep[w->lab[i]]) perm[np++] = i;
  ALMA_TRY(ew_permute(n, w, perm, wt)); /* kept dims first: each output element sums a contiguous run */
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < w->nl; i++) {
    if (i < nkeep)
      outer *= w->dim[i];
    else
      inner *= w->dim[i];
  }
  void *out = alma__nn_alloc(n, (size_t)outer, wsize(wt));
  if (!out) return ALMA_ERR_NOMEM;
  for (int64_t o = 0; o < outer; o++) {
    if (wt == W_F32) {
      double s = 0; /* double accumulation: long reductions stay accurate */
      for (int64_t i = 0; i < inner; i++) s += ((const float *)w->data)[o * inner + i];
      ((float *)out)[o] = (float)s;
    } else if (wt == W_F64) {
      double s = 0;
      for (int64_t i = 0; i < inner; i++) s += ((const double *)w->data)[o * inner + i];
      ((double *)out)[o] = s;
    } else {
      uint64_t s = 0;
      for (int64_t i = 0; i < inner; i++) s += ((const uint64_t *)w->data)[o * inner + i];
      ((uint64_t *)out)[o] = s;
    }
  }
  free(w->data);
  w->data = out;
  w->nl = nkeep;
  return ALMA_OK;
}

static int has_label(const ework *w, int l) {
  for (int i = 0; i < w->nl; i++)
    if (w->lab[i] == l) return 1;
  return 0;
}

/* C = contraction of A and B keeping the labels in keep[]; A and B are consumed. */
static alma_status ew_contract(const alma_node *n, ework *a, ework *b, const int *keep, int wt, ework *c) {
  int pa[EIN_MAXL], pb[EIN_MAXL], na = 0, nb = 0;
  int64_t nbatch = 1, M = 1, N = 1, K = 1;
  memset(c, 0, sizeof *c);
  /* batch labels (shared, kept) lead both; then A-only, contracted, B-only */
  for (int i = 0; i < a->nl; i++)
    if (has_label(b, a->lab[i]) && keep[a->lab[i]]) {
      pa[na++] = i;
      nbatch *= a->dim[i];
      c->lab[c->nl] = a->lab[i];
      c->dim[c->nl++] = a->dim[i];
      for (int j = 0; j < b->nl; j++)
        if (b->lab[j] == a->lab[i]) pb[nb++] = j;
    }
  for (int i = 0; i < a->nl; i++)
    if (!has_label(b, a->lab[i])) {
      pa[na++] = i;
      M *= a->dim[i];
      c->lab[c->nl] = a->lab[i];
      c->dim[c->nl++] = a->dim[i];
    }
  for (int i = 0; i < a->nl; i++)
    if (has_label(b, a->lab[i]) && !keep[a->lab[i]]) {
      pa[na++] = i;
      K *= a->dim[i];
      for (int j = 0; j < b->nl; j++)
        if (b->lab[j] == a->lab[i]) pb[nb++] = j;
    }
  for (int j = 0; j < b->nl; j++)
    if (!has_label(a, b->lab[j])) {
      pb[nb++] = j;
      N *= b->dim[j];
      c->lab[c->nl] = b->lab[j];
      c->dim[c->nl++] = b->dim[j];
    }
  ALMA_TRY(ew_permute(n, a, pa, wt));
  ALMA_TRY(ew_permute(n, b, pb, wt));
  c->data = alma__nn_alloc(n, (size_t)(nbatch * M * N), wsize(wt));
  if (!c->data) return ALMA_ERR_NOMEM;
  size_t es = wsize(wt);
  for (int64_t bi = 0; bi < nbatch; bi++) {
    const char *A = (const char *)a->data + (size_t)(bi * M * K) * es;
    const char *B = (const char *)b->data + (size_t)(bi * K * N) * es;
    char *C = (char *)c->data + (size_t)(bi * M * N) * es;
    if (wt == W_F32)
      ALMA_TRY(alma__sgemm(0, 0, M, N, K, 1.0f, (const float *)A, K, (const float *)B, N, 0.0f, (float *)C, N));
    else if (wt == W_F64)
      alma__dgemm(0, 0, M, N, K, 1.0, (const double *)A, K, (const double *)B, N, 0.0, (double *)C, N);
    else
      alma__igemm(0, 0, M, N, K, (const uint64_t *)A, K, (const uint64_t *)B, N, 0, (uint64_t *)C, N);
  }
  return ALMA_OK;
}

static alma_status einsum_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                               alma_tensor *out, int nout) {
  ein_plan p;
  ALMA_TRY(ein_parse(n, in, nin, &p));
  alma_dtype dt = in[0]->dtype;
  int wt = dt == ALMA_DTYPE_FLOAT64 ? W_F64 : alma__dtype_is_float(dt) ? W_F32 : W_U64;
  ework ops[16];
  memset(ops, 0, sizeof ops);
  alma_status st = ALMA_OK;
  for (int o = 0; o < nin && st == ALMA_OK; o++) st = ew_gather(n, &p, in[o], p.lab[o], p.nl[o], wt, &ops[o]);
  /* contract left to right; before each step, sum out labels neither the output nor a later
   * operand needs (contracted labels shared by the pair are summed by the GEMM itself) */
  ework cur = ops[0];
  ops[0].data = NULL;
  for (int o = 1; o < nin && st == ALMA_OK; o++) {
    int keep[EIN_MAXL] = {0};
    for (int i = 0; i < p.n_out; i++) keep[p.out[i]] = 1;
    for (int r = o + 1; r < nin; r++)
      for (int i = 0; i < ops[r].nl; i++) keep[ops[r].lab[i]] = 1;
    int keep_a[EIN_MAXL], keep_b[EIN_MAXL];
    for (int l = 0; l < EIN_MAXL; l++) keep_a[l] = keep_b[l] = keep[l];
    for (int i = 0; i < ops[o].nl; i++) keep_a[ops[o].lab[i]] = 1;
    for (int i = 0; i < cur.nl; i++) keep_b[cur.lab[i]] = 1;
    st = ew_reduce(n, &cur, keep_a, wt);
    if (st == ALMA_OK) st = ew_reduce(n, &ops[o], keep_b, wt);
    ework next = {0};
    if (st == ALMA_OK) st = ew_contract(n, &cur, &ops[o], keep, wt, &next);
    free(cur.data);
    free(ops[o].data);
    ops[o].data = NULL;
    cur = next; /* on failure next.data is NULL or partial; freed at the end either way */
  }
  if (st == ALMA_OK) {
    int keep[EIN_MAXL] = {0}, perm[EIN_MAXL];
    for (int i = 0; i < p.n_out; i++) keep[p.out[i]] = 1;
    st = ew_reduce(n, &cur, keep, wt);
    for (int i = 0; i < p.n_out && st == ALMA_OK; i++)
      for (int j = 0; j < cur.nl; j++)
        if (cur.lab[j] == p.out[i]) perm[i] = j;
    if (st == ALMA_OK) st = ew_permute(n, &cur, perm, wt);
  }
  if (st == ALMA_OK) {
    int64_t cnt = alma_tensor_numel(&out[0]);
    if (wt == W_F32)
      alma__nn_store_f32(&out[0], cur.data);
    else if (wt == W_F64)
      alma__nn_store_f64(&out[0], cur.data);
    else
      for (int64_t i = 0; i < cnt; i++) alma__set_i64(out[0].data, dt, i, (int64_t)((uint64_t *)cur.data)[i]);
  }
  free(cur.data);
  for (int o = 0; o < nin; o++) free(ops[o].data);
  return st;
}

static void einsum_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                        int64_t *macs, int64_t *flops) {
  ein_plan p;
  if (ein_parse(n, in, nin, &p) != ALMA_OK) {
    alma__error_clear();
    *macs = *flops = -1;
    return;
  }
  /* one multiply-accumulate per point of the full label space (exact for two operands) */
  int64_t m = 1;
  for (int l = 0; l < EIN_MAXL; l++)
    if (p.size[l] > 0) m *= p.size[l];
  *macs = nin > 1 ? m : 0;
  *flops = nin > 1 ? 2 * m : m;
}

const alma_op_def alma__op_Einsum = {.name = "Einsum", .domain = "", .versions = {12},
                                     .min_inputs = 1, .max_inputs = 16, .min_outputs = 1, .max_outputs = 1,
                                     .infer = einsum_infer, .exec = einsum_exec, .cost = einsum_cost};
