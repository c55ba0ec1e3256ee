/* DNNL runtime: nodes that move data: views (Reshape and the like, strided views), Transpose, Reduce*,
 * Concat, Slice / Split and Pad. */
#ifdef ALMA_HAVE_DNNL

#include "ops/nn_util.h"
#include "runtimes/dnnl/dnnl_rt.h"

#define F32 ALMA_DTYPE_FLOAT32

/* ---- views: the output shares the input's plain data --------------------------------------------- */
/* ---- strided views (lazy Slice / Reshape / Transpose outputs read by Attention) ------------------ */
/* v holds only a strided, non-blocked layout of some buffer (a lazy view's output). */
int alma__dn_is_strided_view(const dn_val *v) {
  return v->has_blk && !v->has_plain && v->bmd.format_kind == dnnl_blocked &&
         v->bmd.format_desc.blocking.inner_nblks == 0;
}

/* v's plain data, when it may become the buffer of a strided view: its own pooled buffer, from
 * its start. */
static int viewable_plain(const dn_val *v) {
  return v->has_plain && !v->has_blk && v->pbuf && v->pbuf->ptr == v->t.data && v->t.dtype == F32;
}

/* y becomes a view of b (one more reference) in layout md. */
static void set_view(dn_plan *p, int idx, dn_val *y, const alma_tensor *shape, const dnnl_memory_desc_t *md,
                     dn_buf *b) {
  b->refs++;
  alma__dn_val_set(y, shape, md, b);
  p->nodes[idx].n_view++;
}

int alma__dn_reshape_strides(int r, const int64_t *od, const int64_t *ost, int nr, const int64_t *nd, int64_t *nst) {
  int j = nr - 1;
  int64_t base = r > 0 ? ost[r - 1] : 1, old_n = 1, new_n = 1;
  for (int i = r - 1; i >= 0; i--) {
    old_n *= od[i];
    /* a run of old dims ends where the next one out is not contiguous with it */
    if (i == 0 || (od[i - 1] != 1 && ost[i - 1] != old_n * base)) {
      while (j >= 0 && (new_n < old_n || nd[j] == 1)) {
        nst[j] = new_n * base;
        new_n *= nd[j];
        j--;
      }
      if (new_n != old_n) return 0;
      if (i > 0) {
        base = ost[i - 1];
        old_n = new_n = 1;
      }
    }
  }
  for (; j >= 0; j--) { /* leading unit dims */
    if (nd[j] != 1) return 0;
    nst[j] = 1;
  }
  return 1;
}

alma_status alma__dn_run_view(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_val *x = in[0], *y = out[0];
  if (!x || !x->live || !y || os[0].dtype != x->t.dtype ||
      alma__numel(os[0].rank, os[0].dims) != alma__numel(x->t.rank, x->t.dims))
    return ALMA_OK;
  /* a strided (unblocked) layout stays one when its last reader reshapes it: a convolution's nwc
   * output squeezed to 3-D (tf2onnx's 1-D convolutions) goes on to the next nodes without a
   * reorder to plain, which a reader that needs plain data makes anyway */
  if ((p->nodes[idx].lazy_view || x->uses == 1) && alma__dn_is_strided_view(x) && os[0].rank <= DNNL_MAX_NDIMS &&
      alma__numel(os[0].rank, os[0].dims) > 0) {
    int64_t od[DNNL_MAX_NDIMS], ost[DNNL_MAX_NDIMS], nst[DNNL_MAX_NDIMS];
    dnnl_dims_t nd;
    for (int i = 0; i < x->bmd.ndims; i++) od[i] = x->bmd.dims[i], ost[i] = x->bmd.format_desc.blocking.strides[i];
    for (int i = 0; i < os[0].rank; i++) nd[i] = os[0].dims[i];
    if (os[0].rank > 0 && alma__dn_reshape_strides(x->bmd.ndims, od, ost, os[0].rank, os[0].dims, nst)) {
      dnnl_memory_desc_t md;
      dnnl_memory_desc_init_by_strides(&md, os[0].rank, nd, x->bmd.data_type, nst);
      md.offset0 = x->bmd.offset0;
      set_view(p, idx, y, &os[0], &md, x->bbuf);
      *done = 1;
      return ALMA_OK;
    }
  }
  ALMA_TRY(alma__dn_val_plain(p, x, n));
  memset(&y->t, 0, sizeof y->t);
  y->t.dtype = os[0].dtype;
  y->t.rank = os[0].rank;
  memcpy(y->t.dims, os[0].dims, sizeof(int64_t) * (size_t)os[0].rank);
  y->t.data = x->t.data;
  y->t.nbytes = x->t.nbytes;
  y->pbuf = x->pbuf;
  if (y->pbuf) y->pbuf->refs++;
  y->has_plain = 1;
  y->live = 1;
  *done = 1;
  return ALMA_OK;
}

/* A Transpose's perm attribute (default: reversed axes) as pm[input axis] = output axis for a rank
 * r input; 0 when invalid. perm_out (optional) gets perm[output axis] = input axis. */
int alma__dn_transpose_perm(const alma_node *n, int r, int *pm, int *perm_out) {
  const int64_t *perm = NULL;
  int np = alma__attr_ints(n, "perm", &perm), seen[DNNL_MAX_NDIMS] = {0};
  if ((np && np != r) || r > DNNL_MAX_NDIMS) return 0;
  for (int k = 0; k < r; k++) { /* out axis k reads input axis perm[k] */
    int64_t a = np ? perm[k] : r - 1 - k;
    if (a < 0 || a >= r || seen[a]++) return 0;
    pm[a] = k;
    if (perm_out) perm_out[k] = (int)a;
  }
  return 1;
}

/* ---- Transpose: one reorder, reading the input (blocked or plain) through permuted axes ------------ */
/* Whether the permutation keeps the order of the axes longer than 1 (it only moves unit axes: the
 * data's order is unchanged, e.g. [128, 1, 256] -> [1, 128, 256]). */
static int moves_unit_axes_only(const alma_tensor *x, const int *perm) {
  int last = -1;
  for (int k = 0; k < x->rank; k++) {
    if (x->dims[perm[k]] == 1) continue;
    if (perm[k] < last) return 0;
    last = perm[k];
  }
  return 1;
}

alma_status alma__dn_run_transpose(dn_plan *p, int idx, dn_val **in, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_val *x = in[0];
  int r = x ? x->t.rank : 0;
  if (!alma__dn_is_fp(x) || r < 2 || os[0].rank != r || os[0].dtype != x->t.dtype) return ALMA_OK;
  int pm[DNNL_MAX_NDIMS], perm[DNNL_MAX_NDIMS];
  if (!alma__dn_transpose_perm(n, r, pm, perm)) return ALMA_OK;
  if (x->has_plain && moves_unit_axes_only(&x->t, perm)) {
    ALMA_TRY(alma__dn_run_view(p, idx, in, os, out, done));
    p->nodes[idx].n_view += *done;
    return ALMA_OK;
  }
  dnnl_memory_desc_t xmd, view, dmd;
  alma__dn_val_md(x, &xmd);
  if (dnnl_memory_desc_permute_axes(&view, &xmd, pm) != dnnl_success) return ALMA_OK;
  if (p->nodes[idx].lazy_view && (viewable_plain(x) || (alma__dn_is_strided_view(x) && x->t.dtype == F32))) {
    /* the output is x's data seen through permuted strides: no copy */
    set_view(p, idx, out[0], &os[0], &view, x->has_blk ? x->bbuf : x->pbuf);
    *done = 1;
    return ALMA_OK;
  }
  alma__dn_plain_md_of(&dmd, r, os[0].dims, x->t.dtype);
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&dmd));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  alma_status st = alma__dn_reorder(p, &view, x->has_blk ? x->bbuf->ptr : x->t.data, &dmd, db->ptr, n);
  return alma__dn_finish(p, st, db, out[0], &os[0], &dmd, done);
}

/* ---- Reduce*: the reduction primitive over plain data ----------------------------------------------- */
alma_status alma__dn_run_reduce(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = alma__dn_get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0];
  int r = x ? x->t.rank : 0;
  if (!alma__dn_is_fp(x) || r < 1 || os[0].dtype != x->t.dtype) return ALMA_OK;
  /* axes: an input from opset 18 (ReduceSum: 13), else the attribute */
  int axes_input = n->since_version >= 18 || (alma__dn_is_op(n, "ReduceSum") && n->since_version >= 13);
  int64_t axes[ALMA_MAX_RANK];
  int na = 0;
  if (axes_input) {
    dn_val *a = nin > 1 ? in[1] : NULL;
    if (a) {
      if (!a->live || a->t.dtype != ALMA_DTYPE_INT64 || a->t.rank != 1 || a->t.dims[0] > r) return ALMA_OK;
      ALMA_TRY(alma__dn_val_plain(p, a, n));
      na = (int)a->t.dims[0];
      if (na) memcpy(axes, a->t.data, sizeof(int64_t) * (size_t)na);
    }
    if (na == 0 && alma__attr_i(n, "noop_with_empty_axes", 0)) return ALMA_OK;
  } else {
    const int64_t *aa = NULL;
    na = alma__attr_ints(n, "axes", &aa);
    if (na > r) return ALMA_OK;
    if (na) memcpy(axes, aa, sizeof(int64_t) * (size_t)na);
  }
  int64_t rd[ALMA_MAX_RANK];
  memcpy(rd, x->t.dims, sizeof(int64_t) * (size_t)r);
  for (int k = 0; k < r && na == 0; k++) rd[k] = 1;
  for (int k = 0; k < na; k++) {
    int64_t a = axes[k] < 0 ? axes[k] + r : axes[k];
    if (a < 0 || a >= r) return ALMA_OK;
    rd[a] = 1;
  }
  if (alma__numel(r, rd) != alma__numel(os[0].rank, os[0].dims)) return ALMA_OK;
  dnnl_memory_desc_t key[2];
  int64_t ikey[8] = {0};
  alma__dn_plain_md_of(&key[0], r, x->t.dims, x->t.dtype);
  alma__dn_plain_md_of(&key[1], r, rd, x->t.dtype);
  if (!alma__dn_key_match(pr, 2, key, ikey)) {
    alma__dn_prim_begin(pr, 2, key, ikey);
    float pw = alma__dn_is_op(n, "ReduceL1") ? 1.0f : 2.0f;
    dnnl_reduction_desc_t rdsc;
    if (dnnl_reduction_desc_init(&rdsc, d->alg, &key[0], &key[1], pw, 0.0f) != dnnl_success)
      return alma__dn_prim_decline(pr, n, "reduction descriptor rejected");
    if (!alma__dn_prim_pd(p, pr, n, &rdsc, NULL, "reduction") ||
        !alma__dn_prim_args(p, pr, n, 2, (dn_arg[]){{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_DST, &key[1]}}))
      return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  ALMA_TRY(alma__dn_val_plain(p, x, n));
  dnnl_memory_desc_t omd;
  alma__dn_plain_md_of(&omd, os[0].rank, os[0].dims, x->t.dtype);
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&omd));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  void *ptrs[DN_MAX_MEM] = {x->t.data, db->ptr};
  alma_status st = alma__dn_exec(p, pr, pr->p, ptrs, n);
  return alma__dn_finish(p, st, db, out[0], &os[0], &omd, done);
}

/* ---- Concat ----------------------------------------------------------------------------------------- */
alma_status alma__dn_run_concat(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = alma__dn_get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  int r = os[0].rank, axis;
  if (nin < 1 || nin > DN_MAX_KEY || nin > DN_MAX_MEM - 2 || r < 1 || !alma__dn_dt_ok(os[0].dtype)) return ALMA_OK;
  for (int k = 0; k < nin; k++)
    if (!alma__dn_is_dt(in[k], os[0].dtype) || in[k]->t.rank != r) return ALMA_OK;
  if (alma__norm_axis(alma__attr_i(n, "axis", 0), r, &axis) != ALMA_OK) {
    alma__error_clear();
    return ALMA_OK;
  }
  dnnl_memory_desc_t key[DN_MAX_KEY];
  int64_t ikey[8] = {axis};
  for (int k = 0; k < nin; k++) alma__dn_val_md(in[k], &key[k]);
  if (!alma__dn_key_match(pr, nin, key, ikey)) {
    alma__dn_prim_begin(pr, nin, key, ikey);
    dnnl_status_t s = dnnl_concat_primitive_desc_create(&pr->pd, NULL, nin, axis, key, NULL, p->eng);
    if (s != dnnl_success) return alma__dn_prim_decline(pr, n, "no concat implementation (status %d)", (int)s);
    const char *impl = NULL;
    dnnl_primitive_desc_query(pr->pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(pr->impl, sizeof pr->impl, "%s", impl ? impl : "?");
    dn_arg args[DN_MAX_KEY + 1];
    for (int k = 0; k < nin; k++) args[k] = (dn_arg){DNNL_ARG_MULTIPLE_SRC + k, &key[k]};
    args[nin] = (dn_arg){DNNL_ARG_DST, NULL};
    if (!alma__dn_prim_args(p, pr, n, nin + 1, args)) return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  void *ptrs[DN_MAX_MEM];
  for (int k = 0; k < nin; k++) ptrs[k] = in[k]->has_blk ? in[k]->bbuf->ptr : in[k]->t.data;
  ptrs[nin] = db->ptr;
  alma_status st = alma__dn_exec(p, pr, pr->p, ptrs, n);
  return alma__dn_finish(p, st, db, out[0], &os[0], &pr->dst_md, done);
}

/* ---- Slice (unit steps) and Split: reorders from sub-memory views of the input ----------------------- */
/* Integer list from input i (int32/int64, any producer) or, before opset 10, attribute name. */
static int int_list(dn_plan *p, const alma_node *n, dn_val **in, int nin, int i, const char *attr, int64_t *v, int max,
                    int *count) {
  *count = 0;
  if (n->since_version < 10 && alma__dn_is_op(n, "Slice")) {
    const int64_t *a = NULL;
    int c = alma__attr_ints(n, attr, &a);
    if (c > max) return 0;
    for (int k = 0; k < c; k++) v[k] = a[k];
    *count = c;
    return 1;
  }
  dn_val *x = i < nin ? in[i] : NULL;
  if (!x) return 1;
  if (!x->live || (x->t.dtype != ALMA_DTYPE_INT64 && x->t.dtype != ALMA_DTYPE_INT32) || x->t.rank != 1 ||
      x->t.dims[0] > max || !x->has_plain)
    return 0;
  for (int k = 0; k < x->t.dims[0]; k++) v[k] = alma__get_i64(x->t.data, x->t.dtype, k);
  *count = (int)x->t.dims[0];
  return 1;
}

/* One output: the sub-tensor of x at offsets with dims of os, reordered to plain. */
static alma_status slice_one(dn_plan *p, int idx, const alma_node *n, dn_val *x, const alma_tensor *os,
                             const int64_t *offs, dn_val *y) {
  int r = x->t.rank;
  dnnl_dims_t sd, so;
  for (int i = 0; i < r; i++) sd[i] = os->dims[i], so[i] = offs[i];
  dnnl_memory_desc_t xmd, sub, dmd;
  if (p->nodes[idx].lazy_view && viewable_plain(x)) { /* a sub-memory view of x: no copy */
    alma__dn_plain_md_of(&xmd, r, x->t.dims, x->t.dtype);
    if (dnnl_memory_desc_init_submemory(&sub, &xmd, sd, so) == dnnl_success) {
      set_view(p, idx, y, os, &sub, x->pbuf);
      return ALMA_OK;
    }
  }
  alma__dn_val_md(x, &xmd);
  if (dnnl_memory_desc_init_submemory(&sub, &xmd, sd, so) != dnnl_success) {
    /* a blocked layout the view cannot cut: take the plain copy */
    ALMA_TRY(alma__dn_val_plain(p, x, n));
    alma__dn_plain_md_of(&xmd, r, x->t.dims, x->t.dtype);
    if (dnnl_memory_desc_init_submemory(&sub, &xmd, sd, so) != dnnl_success)
      return alma__op_error(n, ALMA_ERR_INTERNAL, "oneDNN sub-memory view failed");
  }
  alma__dn_plain_md_of(&dmd, r, os->dims, x->t.dtype);
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&dmd));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  int blk = x->has_blk && dnnl_memory_desc_equal(&xmd, &x->bmd);
  alma_status st = alma__dn_reorder(p, &sub, blk ? x->bbuf->ptr : x->t.data, &dmd, db->ptr, n);
  if (st != ALMA_OK) {
    alma__dn_unref(p, db);
    return st;
  }
  alma__dn_val_set(y, os, &dmd, db);
  return ALMA_OK;
}

alma_status alma__dn_run_slice(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int nout,
                               int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_val *x = in[0];
  int r = x ? x->t.rank : 0;
  if (!alma__dn_is_fp(x) || r < 1) return ALMA_OK;
  for (int k = 0; k < nout; k++)
    if (out[k] && (os[k].rank != r || os[k].dtype != x->t.dtype)) return ALMA_OK;
  int64_t offs[ALMA_MAX_RANK] = {0};
  if (alma__dn_is_op(n, "Split")) {
    int axis;
    if (alma__norm_axis(alma__attr_i(n, "axis", 0), r, &axis) != ALMA_OK) {
      alma__error_clear();
      return ALMA_OK;
    }
    int64_t at = 0;
    for (int k = 0; k < nout; k++) at += os[k].dims[axis];
    if (at != x->t.dims[axis]) return ALMA_OK;
    for (int k = 0; k < nout; k++) {
      if (out[k]) ALMA_TRY(slice_one(p, idx, n, x, &os[k], offs, out[k]));
      offs[axis] += os[k].dims[axis];
    }
    *done = 1;
    return ALMA_OK;
  }
  int64_t st[ALMA_MAX_RANK], en[ALMA_MAX_RANK], ax[ALMA_MAX_RANK], sp[ALMA_MAX_RANK];
  int ns, ne, na, nsp;
  if (!int_list(p, n, in, nin, 1, "starts", st, r, &ns) || !int_list(p, n, in, nin, 2, "ends", en, r, &ne) ||
      !int_list(p, n, in, nin, 3, "axes", ax, r, &na) || !int_list(p, n, in, nin, 4, "steps", sp, r, &nsp))
    return ALMA_OK;
  if (ns != ne || (na && na != ns) || (nsp && nsp != ns)) return ALMA_OK;
  int64_t want[ALMA_MAX_RANK];
  memcpy(want, x->t.dims, sizeof(int64_t) * (size_t)r);
  for (int k = 0; k < ns; k++) {
    int64_t a = na ? ax[k] : k, dim;
    if (a < 0) a += r;
    if (a < 0 || a >= r || (nsp && sp[k] != 1)) return ALMA_OK;
    dim = x->t.dims[a];
    int64_t b = st[k] < 0 ? st[k] + dim : st[k], e = en[k] < 0 ? en[k] + dim : en[k];
    b = b < 0 ? 0 : b > dim ? dim : b;
    e = e < 0 ? 0 : e > dim ? dim : e;
    offs[a] = b;
    want[a] = e > b ? e - b : 0;
  }
  for (int i = 0; i < r; i++)
    if (want[i] != os[0].dims[i]) return ALMA_OK; /* not what the shape rules say: let EAGER decide */
  ALMA_TRY(slice_one(p, idx, n, x, &os[0], offs, out[0]));
  *done = 1;
  return ALMA_OK;
}

/* ---- Pad, constant mode: the output filled with the value, the input reordered into a view ---------- */
/* A dense layout like ref's (plain, or blocked like nChw8c: the dims nested in ref's stride order,
 * the same inner blocks) for dims of the same rank; 0 when ref is not a blocked-kind layout. */
static int md_like(dnnl_memory_desc_t *md, const dnnl_memory_desc_t *ref, const int64_t *dims) {
  if (ref->format_kind != dnnl_blocked || ref->extra.flags) return 0;
  const dnnl_blocking_desc_t *bk = &ref->format_desc.blocking;
  int r = ref->ndims, order[DNNL_MAX_NDIMS];
  dnnl_dim_t blk[DNNL_MAX_NDIMS], inner = 1;
  for (int i = 0; i < r; i++) blk[i] = 1, order[i] = i;
  for (int k = 0; k < bk->inner_nblks; k++) {
    blk[bk->inner_idxs[k]] *= bk->inner_blks[k];
    inner *= bk->inner_blks[k];
  }
  for (int i = 1; i < r; i++) /* outermost first: larger stride, then lower axis (size-1 dims tie) */
    for (int j = i; j > 0 && bk->strides[order[j]] > bk->strides[order[j - 1]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  *md = *ref;
  md->offset0 = 0;
  for (int i = 0; i < r; i++) {
    md->dims[i] = dims[i];
    md->padded_dims[i] = (dims[i] + blk[i] - 1) / blk[i] * blk[i];
    md->padded_offsets[i] = 0;
  }
  dnnl_dim_t st = inner;
  for (int k = r - 1; k >= 0; k--) {
    md->format_desc.blocking.strides[order[k]] = st;
    st *= md->padded_dims[order[k]] / blk[order[k]];
  }
  return 1;
}

alma_status alma__dn_run_pad(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out, int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_val *x = in[0];
  int r = x ? x->t.rank : 0;
  if (!alma__dn_is_fp(x) || r < 1 || r > DNNL_MAX_NDIMS || os[0].rank != r || os[0].dtype != x->t.dtype) return ALMA_OK;
  alma_dtype dt = x->t.dtype;
  size_t es = alma_dtype_size(dt);
  int64_t b[ALMA_MAX_RANK] = {0}, e[ALMA_MAX_RANK] = {0};
  unsigned char val[8] = {0}; /* the value in x's dtype; ONNX's default is 0 */
  if (n->since_version < 11) {
    const int64_t *pa = NULL;
    if (alma__attr_ints(n, n->since_version < 2 ? "paddings" : "pads", &pa) != 2 * r) return ALMA_OK;
    for (int k = 0; k < r; k++) b[k] = pa[k], e[k] = pa[r + k];
    alma__set_f64(val, dt, 0, alma__attr_f(n, "value", 0.0f)); /* as EAGER converts it */
  } else {
    int64_t pads[2 * ALMA_MAX_RANK], ax[ALMA_MAX_RANK];
    int np, na = r, seen[ALMA_MAX_RANK] = {0};
    if (nin < 2 || !in[1] || !int_list(p, n, in, nin, 1, NULL, pads, 2 * ALMA_MAX_RANK, &np)) return ALMA_OK;
    if (nin > 3 && in[3]) {
      if (n->since_version < 18 || !int_list(p, n, in, nin, 3, NULL, ax, r, &na)) return ALMA_OK;
    } else {
      for (int k = 0; k < r; k++) ax[k] = k;
    }
    if (np != 2 * na) return ALMA_OK;
    for (int k = 0; k < na; k++) {
      int64_t a = ax[k] < 0 ? ax[k] + r : ax[k];
      if (a < 0 || a >= r || seen[a]++) return ALMA_OK;
      b[a] = pads[k];
      e[a] = pads[na + k];
    }
    if (nin > 2 && in[2]) {
      dn_val *cv = in[2];
      int64_t cnt = alma__numel(cv->t.rank, cv->t.dims);
      if (!alma__dn_is_dt(cv, dt) || cnt > 1) return ALMA_OK;
      if (cnt == 1) {
        ALMA_TRY(alma__dn_val_plain(p, cv, n));
        memcpy(val, cv->t.data, es);
      }
    }
  }
  for (int k = 0; k < r; k++)
    if (x->t.dims[k] + b[k] + e[k] != os[0].dims[k]) return ALMA_OK; /* not what the shape rules say */
  int zero = 1;
  for (size_t i = 0; i < es; i++) zero &= val[i] == 0;
  /* a blocked input padded on other axes than the blocked channels keeps its layout for the next
   * primitive; the channel blocks' padding must stay zero, so a non-zero value needs full blocks */
  dnnl_memory_desc_t xmd, omd;
  alma__dn_val_md(x, &xmd);
  int blk = x->has_blk && r > 1 && b[1] == 0 && e[1] == 0 && md_like(&omd, &x->bmd, os[0].dims);
  for (int i = 0; blk && !zero && i < r; i++) blk = omd.padded_dims[i] == omd.dims[i];
  if (!blk) alma__dn_plain_md_of(&omd, r, os[0].dims, dt);
  size_t osz = dnnl_memory_desc_get_size(&omd);
  dn_buf *db = alma__dn_alloc(p, osz);
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (zero) {
    memset(db->ptr, 0, osz);
  } else {
    for (size_t i = 0; i < osz / es; i++) memcpy((char *)db->ptr + i * es, val, es);
  }
  /* the part of x that survives (negative pads crop) goes to offset max(begin, 0) */
  dnnl_dims_t cd, so, dof;
  int any = 1;
  for (int k = 0; k < r; k++) {
    int64_t cb = b[k] < 0 ? -b[k] : 0, ce = e[k] < 0 ? -e[k] : 0;
    cd[k] = x->t.dims[k] - cb - ce;
    so[k] = cb;
    dof[k] = b[k] > 0 ? b[k] : 0;
    any &= cd[k] > 0;
  }
  alma_status st = ALMA_OK;
  if (any) {
    dnnl_memory_desc_t ssub, dsub;
    void *sp = x->has_blk ? x->bbuf->ptr : x->t.data;
    if (dnnl_memory_desc_init_submemory(&ssub, &xmd, cd, so) != dnnl_success) {
      /* a crop the blocked layout cannot view: take the plain copy */
      if ((st = alma__dn_val_plain(p, x, n)) == ALMA_OK) {
        alma__dn_plain_md_of(&xmd, r, x->t.dims, dt);
        sp = x->t.data;
        if (dnnl_memory_desc_init_submemory(&ssub, &xmd, cd, so) != dnnl_success)
          st = alma__op_error(n, ALMA_ERR_INTERNAL, "oneDNN sub-memory view failed");
      }
    }
    if (st == ALMA_OK && dnnl_memory_desc_init_submemory(&dsub, &omd, cd, dof) != dnnl_success)
      st = alma__op_error(n, ALMA_ERR_INTERNAL, "oneDNN sub-memory view failed");
    if (st == ALMA_OK) st = alma__dn_reorder(p, &ssub, sp, &dsub, db->ptr, n);
  }
  return alma__dn_finish(p, st, db, out[0], &os[0], &omd, done);
}

#endif
