/* Shape / data-movement operators: the version-specific forms (attributes that became inputs),
 * clamping and negative-index rules, reductions, pad modes and error paths, checked against
 * small hand-computed or naively computed results. Nodes are built by hand and run with
 * alma__op_run_node, so no ONNX file is needed. */
#include "op_test_util.h"

static void expect_f32(const alma_tensor *t, const float *want, int64_t n) {
  assert_int_equal(t->dtype, ALMA_DTYPE_FLOAT32);
  assert_int_equal(alma_tensor_numel(t), n);
  for (int64_t i = 0; i < n; i++) {
    if (((float *)t->data)[i] != want[i]) /* show the whole output on a mismatch */
      for (int64_t k = 0; k < n; k++) print_error("%g%s", ((float *)t->data)[k], k + 1 < n ? " " : "\n");
    assert_float_equal(((float *)t->data)[i], want[i], 0);
  }
}

static float iota_f[720];
static int32_t iota_i32[720];

/* ---- Reshape / Flatten / Squeeze / Unsqueeze ------------------------------------------------ */

static void test_reshape(void **s) {
  (void)s;
  tnode t;
  int64_t xd[3] = {2, 3, 4}, sd[1] = {3};
  alma_tensor x = tv(ALMA_DTYPE_INT32, 3, xd, iota_i32), out;
  int64_t shp[3] = {0, -1, 2};
  alma_tensor sh = tv(ALMA_DTYPE_INT64, 1, sd, shp);
  alma_tensor *in[2] = {&x, &sh};
  tn_make(&t, "Reshape", 21, 2, 1);
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
  check_shape(&out, 3, (int64_t[]){2, 6, 2});
  for (int i = 0; i < 24; i++) assert_int_equal(((int32_t *)out.data)[i], i);
  alma_tensor_free_data(&out);

  /* shape as int32 */
  int32_t shp32[2] = {-1, 4};
  int64_t sd2[1] = {2};
  alma_tensor sh32 = tv(ALMA_DTYPE_INT32, 1, sd2, shp32);
  in[1] = &sh32;
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
  check_shape(&out, 2, (int64_t[]){6, 4});
  alma_tensor_free_data(&out);

  /* allowzero=1: a 0 is a real zero, so [0,3,4] -> [3,4,0] works and [2,3,4] -> [0,...] fails */
  tn_make(&t, "Reshape", 14, 2, 1);
  attr_i(&t, "allowzero", 1);
  int64_t zd[3] = {0, 3, 4}, shpz[3] = {3, 4, 0};
  alma_tensor xz = tv(ALMA_DTYPE_FLOAT32, 3, zd, iota_f), shz = tv(ALMA_DTYPE_INT64, 1, sd, shpz);
  alma_tensor *inz[2] = {&xz, &shz};
  assert_int_equal(tn_exec(&t, inz, 2, &out, 1), ALMA_OK);
  check_shape(&out, 3, (int64_t[]){3, 4, 0});
  alma_tensor_free_data(&out);
  int64_t shpbad[3] = {0, -1, 4};
  alma_tensor shb = tv(ALMA_DTYPE_INT64, 1, sd, shpbad);
  in[0] = &x;
  in[1] = &shb;
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_ERR_SHAPE);

  /* Reshape-1: shape attribute */
  tn_make(&t, "Reshape", 1, 1, 1);
  int64_t ashape[2] = {4, -1};
  attr_ints(&t, "shape", ashape, 2);
  assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  check_shape(&out, 2, (int64_t[]){4, 6});
  alma_tensor_free_data(&out);

  /* unknown shape value at load: ERR_DYNAMIC from infer */
  tn_make(&t, "Reshape", 13, 2, 1);
  alma_tensor dyn = sh;
  dyn.data = NULL;
  const alma_tensor *cin[2] = {&x, &dyn};
  alma_tensor o2;
  memset(&o2, 0, sizeof o2);
  assert_int_equal(t.n.op->infer(&t.n, cin, 2, &o2, 1), ALMA_ERR_DYNAMIC);
}

static void test_flatten_squeeze(void **s) {
  (void)s;
  tnode t;
  int64_t xd[4] = {2, 1, 3, 1};
  alma_tensor x = tv(ALMA_DTYPE_UINT8, 4, xd, iota_i32), out;
  alma_tensor *in[2] = {&x, NULL};
  tn_make(&t, "Flatten", 13, 1, 1);
  attr_i(&t, "axis", -1);
  assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  check_shape(&out, 2, (int64_t[]){6, 1});
  alma_tensor_free_data(&out);

  tn_make(&t, "Squeeze", 13, 1, 1); /* no axes: all ones go */
  assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  check_shape(&out, 2, (int64_t[]){2, 3});
  alma_tensor_free_data(&out);

  tn_make(&t, "Squeeze", 11, 1, 1); /* attribute form */
  int64_t ax[1] = {-1};
  attr_ints(&t, "axes", ax, 1);
  assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  check_shape(&out, 3, (int64_t[]){2, 1, 3});
  alma_tensor_free_data(&out);

  tn_make(&t, "Squeeze", 13, 2, 1); /* squeezing a non-1 dim fails */
  int64_t bad[1] = {2}, ad[1] = {1};
  alma_tensor axes = tv(ALMA_DTYPE_INT64, 1, ad, bad);
  in[1] = &axes;
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_ERR_SHAPE);

  tn_make(&t, "Unsqueeze", 1, 1, 1);
  int64_t uax[2] = {0, 5};
  attr_ints(&t, "axes", uax, 2);
  assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  check_shape(&out, 6, (int64_t[]){1, 2, 1, 3, 1, 1});
  alma_tensor_free_data(&out);

  tn_make(&t, "Unsqueeze", 13, 2, 1); /* duplicate axes fail */
  int64_t dup[2] = {1, -5}, dd[1] = {2};
  alma_tensor daxes = tv(ALMA_DTYPE_INT64, 1, dd, dup);
  in[1] = &daxes;
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_ERR_INVALID_ARG);
}

/* ---- Shape / Size --------------------------------------------------------------------------- */

static void test_shape_size(void **s) {
  (void)s;
  tnode t;
  int64_t xd[3] = {3, 4, 5};
  alma_tensor x = tv(ALMA_DTYPE_BOOL, 3, xd, iota_i32), out;
  alma_tensor *in[1] = {&x};
  tn_make(&t, "Shape", 15, 1, 1);
  attr_i(&t, "start", -2);
  attr_i(&t, "end", 100);
  assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  check_i64(&out, (int64_t[]){4, 5}, 2);
  alma_tensor_free_data(&out);
  tn_make(&t, "Shape", 13, 1, 1); /* start/end ignored before opset 15 */
  attr_i(&t, "start", 1);
  assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  check_i64(&out, (int64_t[]){3, 4, 5}, 3);
  alma_tensor_free_data(&out);
  tn_make(&t, "Size", 13, 1, 1);
  assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  assert_int_equal(out.rank, 0);
  assert_int_equal(*(int64_t *)out.data, 60);
  alma_tensor_free_data(&out);
}

/* ---- Transpose / DepthToSpace / SpaceToDepth / Tile / Expand --------------------------------- */

static void test_transpose(void **s) {
  (void)s;
  tnode t;
  int64_t xd[4] = {2, 3, 4, 5};
  uint16_t data[120];
  for (int i = 0; i < 120; i++) data[i] = (uint16_t)i;
  alma_tensor x = tv(ALMA_DTYPE_FLOAT16, 4, xd, data), out;
  alma_tensor *in[1] = {&x};
  int64_t perm[4] = {2, 0, 3, 1};
  tn_make(&t, "Transpose", 13, 1, 1);
  attr_ints(&t, "perm", perm, 4);
  assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  check_shape(&out, 4, (int64_t[]){4, 2, 5, 3});
  const uint16_t *o = out.data;
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 2; b++)
      for (int c = 0; c < 5; c++)
        for (int d = 0; d < 3; d++)
          assert_int_equal(o[((a * 2 + b) * 5 + c) * 3 + d], data[((b * 3 + d) * 4 + a) * 5 + c]);
  alma_tensor_free_data(&out);
  int64_t bad[4] = {0, 0, 1, 2};
  tn_make(&t, "Transpose", 13, 1, 1);
  attr_ints(&t, "perm", bad, 4);
  assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_ERR_INVALID_ARG);
}

static void test_depth_space(void **s) {
  (void)s;
  tnode t;
  int64_t xd[4] = {2, 8, 2, 3};
  alma_tensor x = tv(ALMA_DTYPE_FLOAT32, 4, xd, iota_f), out, back;
  alma_tensor *in[1] = {&x};
  for (int crd = 0; crd < 2; crd++) {
    tn_make(&t, "DepthToSpace", 13, 1, 1);
    attr_i(&t, "blocksize", 2);
    if (crd) attr_s(&t, "mode", "CRD");
    assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
    check_shape(&out, 4, (int64_t[]){2, 2, 4, 6});
    const float *o = out.data;
    for (int n = 0; n < 2; n++)
      for (int c = 0; c < 2; c++)
        for (int y = 0; y < 4; y++)
          for (int xx = 0; xx < 6; xx++) {
            int i = y % 2, j = xx % 2;
            int ic = crd ? c * 4 + i * 2 + j : (i * 2 + j) * 2 + c;
            float want = iota_f[((n * 8 + ic) * 2 + y / 2) * 3 + xx / 2];
            assert_float_equal(o[((n * 2 + c) * 4 + y) * 6 + xx], want, 0);
          }
    if (!crd) { /* SpaceToDepth inverts DCR DepthToSpace */
      tnode t2;
      tn_make(&t2, "SpaceToDepth", 13, 1, 1);
      attr_i(&t2, "blocksize", 2);
      alma_tensor *in2[1] = {&out};
      assert_int_equal(tn_exec(&t2, in2, 1, &back, 1), ALMA_OK);
      check_shape(&back, 4, xd);
      expect_f32(&back, iota_f, 96);
      alma_tensor_free_data(&back);
    }
    alma_tensor_free_data(&out);
  }
}

static void test_tile_expand(void **s) {
  (void)s;
  tnode t;
  int64_t xd[2] = {2, 3};
  alma_tensor x = tv(ALMA_DTYPE_INT32, 2, xd, iota_i32), out;
  int64_t rep[2] = {2, 2}, rd[1] = {2};
  alma_tensor r = tv(ALMA_DTYPE_INT64, 1, rd, rep);
  alma_tensor *in[3] = {&x, &r, NULL};
  tn_make(&t, "Tile", 13, 2, 1);
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
  check_shape(&out, 2, (int64_t[]){4, 6});
  check_i64(&out, (int64_t[]){0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5, 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}, 24);
  alma_tensor_free_data(&out);

  /* Tile-1: tiles=3 along axis 1 */
  tn_make(&t, "Tile", 1, 3, 1);
  int64_t tiles = 3, axis = 1;
  alma_tensor tt = tv(ALMA_DTYPE_INT64, 0, NULL, &tiles), ta = tv(ALMA_DTYPE_INT64, 0, NULL, &axis);
  in[1] = &tt;
  in[2] = &ta;
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_OK);
  check_shape(&out, 2, (int64_t[]){2, 9});
  alma_tensor_free_data(&out);

  /* Expand [2,3] -> [2,1,3] broadcast = [2,2,3] */
  tn_make(&t, "Expand", 13, 2, 1);
  int64_t shp[3] = {2, 1, 3}, sd[1] = {3};
  alma_tensor sh = tv(ALMA_DTYPE_INT64, 1, sd, shp);
  in[1] = &sh;
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
  check_shape(&out, 3, (int64_t[]){2, 2, 3});
  check_i64(&out, (int64_t[]){0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}, 12);
  alma_tensor_free_data(&out);
  int64_t shpbad[1] = {4}, sdb[1] = {1};
  alma_tensor shb = tv(ALMA_DTYPE_INT64, 1, sdb, shpbad);
  in[1] = &shb;
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_ERR_SHAPE);
}

/* ---- Concat / Split ------------------------------------------------------------------------- */

static void test_concat_split(void **s) {
  (void)s;
  tnode t;
  int64_t ad[2] = {2, 1}, bd[2] = {2, 2}, zd[2] = {2, 0};
  int64_t a[2] = {10, 20}, b[4] = {1, 2, 3, 4};
  alma_tensor ta = tv(ALMA_DTYPE_INT64, 2, ad, a), tb = tv(ALMA_DTYPE_INT64, 2, bd, b),
              tz = tv(ALMA_DTYPE_INT64, 2, zd, NULL), out;
  alma_tensor *in[3] = {&ta, &tz, &tb};
  tn_make(&t, "Concat", 13, 3, 1);
  attr_i(&t, "axis", -1);
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_OK);
  check_i64(&out, (int64_t[]){10, 1, 2, 20, 3, 4}, 6);

  /* Split it back: opset 2 attribute, opset 13 input, opset 18 num_outputs (uneven) */
  alma_tensor parts[3];
  alma_tensor *sin[2] = {&out, NULL};
  tn_make(&t, "Split", 2, 1, 2);
  attr_i(&t, "axis", 1);
  int64_t sp[2] = {1, 2};
  attr_ints(&t, "split", sp, 2);
  assert_int_equal(tn_exec(&t, sin, 1, parts, 2), ALMA_OK);
  check_i64(&parts[0], a, 2);
  check_i64(&parts[1], b, 4);
  for (int i = 0; i < 2; i++) alma_tensor_free_data(&parts[i]);

  tn_make(&t, "Split", 13, 2, 2);
  attr_i(&t, "axis", 1);
  int64_t spd[1] = {2};
  alma_tensor spt = tv(ALMA_DTYPE_INT64, 1, spd, sp);
  sin[1] = &spt;
  assert_int_equal(tn_exec(&t, sin, 2, parts, 2), ALMA_OK);
  check_i64(&parts[1], b, 4);
  for (int i = 0; i < 2; i++) alma_tensor_free_data(&parts[i]);

  tn_make(&t, "Split", 18, 1, 2);
  attr_i(&t, "axis", 1);
  attr_i(&t, "num_outputs", 2);
  assert_int_equal(tn_exec(&t, sin, 1, parts, 2), ALMA_OK);
  check_shape(&parts[0], 2, (int64_t[]){2, 2});
  check_shape(&parts[1], 2, (int64_t[]){2, 1});
  check_i64(&parts[0], (int64_t[]){10, 1, 20, 3}, 4);
  check_i64(&parts[1], (int64_t[]){2, 4}, 2);
  for (int i = 0; i < 2; i++) alma_tensor_free_data(&parts[i]);

  tn_make(&t, "Split", 13, 1, 2); /* 3 does not split evenly in two */
  attr_i(&t, "axis", 1);
  assert_int_equal(tn_exec(&t, sin, 1, parts, 2), ALMA_ERR_SHAPE);
  alma_tensor_free_data(&out);

  tn_make(&t, "Concat", 13, 2, 1); /* mismatched off-axis dims */
  alma_tensor *bad[2] = {&ta, &tb};
  attr_i(&t, "axis", 0);
  assert_int_equal(tn_exec(&t, bad, 2, &out, 1), ALMA_ERR_SHAPE);
}

/* ---- Slice ---------------------------------------------------------------------------------- */

static void test_slice(void **s) {
  (void)s;
  tnode t;
  int64_t xd[2] = {4, 5};
  alma_tensor x = tv(ALMA_DTYPE_FLOAT32, 2, xd, iota_f), out;
  /* x[::-2, INT64_MAX-clamped 1:] with int32 starts would differ; use int64 extremes */
  int64_t st[2] = {-1, 1}, en[2] = {INT64_MIN, INT64_MAX}, ax[2] = {0, -1}, sp[2] = {-2, 3}, d2[1] = {2};
  alma_tensor ts = tv(ALMA_DTYPE_INT64, 1, d2, st), te = tv(ALMA_DTYPE_INT64, 1, d2, en),
              ta = tv(ALMA_DTYPE_INT64, 1, d2, ax), tp = tv(ALMA_DTYPE_INT64, 1, d2, sp);
  alma_tensor *in[5] = {&x, &ts, &te, &ta, &tp};
  tn_make(&t, "Slice", 13, 5, 1);
  assert_int_equal(tn_exec(&t, in, 5, &out, 1), ALMA_OK);
  check_shape(&out, 2, (int64_t[]){2, 2});
  expect_f32(&out, (float[]){16, 19, 6, 9}, 4);
  alma_tensor_free_data(&out);

  /* omitted axes and steps; int32 indices; start beyond the end gives an empty dim */
  int32_t st32[2] = {10, 1}, en32[2] = {20, -1};
  alma_tensor ts32 = tv(ALMA_DTYPE_INT32, 1, d2, st32), te32 = tv(ALMA_DTYPE_INT32, 1, d2, en32);
  alma_tensor *in2[3] = {&x, &ts32, &te32};
  tn_make(&t, "Slice", 13, 3, 1);
  assert_int_equal(tn_exec(&t, in2, 3, &out, 1), ALMA_OK);
  check_shape(&out, 2, (int64_t[]){0, 3});
  alma_tensor_free_data(&out);

  /* Slice-1 attributes */
  tn_make(&t, "Slice", 1, 1, 1);
  int64_t a_st[1] = {1}, a_en[1] = {3}, a_ax[1] = {1};
  attr_ints(&t, "starts", a_st, 1);
  attr_ints(&t, "ends", a_en, 1);
  attr_ints(&t, "axes", a_ax, 1);
  assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  check_shape(&out, 2, (int64_t[]){4, 2});
  expect_f32(&out, (float[]){1, 2, 6, 7, 11, 12, 16, 17}, 8);
  alma_tensor_free_data(&out);

  /* a reversed full copy (negative step, ends below -dim) */
  int64_t rs[1] = {-1}, re[1] = {-100}, ra[1] = {1}, rp[1] = {-1}, d1[1] = {1};
  alma_tensor trs = tv(ALMA_DTYPE_INT64, 1, d1, rs), tre = tv(ALMA_DTYPE_INT64, 1, d1, re),
              tra = tv(ALMA_DTYPE_INT64, 1, d1, ra), trp = tv(ALMA_DTYPE_INT64, 1, d1, rp);
  alma_tensor *in3[5] = {&x, &trs, &tre, &tra, &trp};
  tn_make(&t, "Slice", 13, 5, 1);
  assert_int_equal(tn_exec(&t, in3, 5, &out, 1), ALMA_OK);
  check_shape(&out, 2, (int64_t[]){4, 5});
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 5; j++) assert_float_equal(((float *)out.data)[i * 5 + j], (float)(i * 5 + 4 - j), 0);
  alma_tensor_free_data(&out);

  int64_t zero[1] = {0};
  alma_tensor tz = tv(ALMA_DTYPE_INT64, 1, d1, zero);
  in3[4] = &tz;
  assert_int_equal(tn_exec(&t, in3, 5, &out, 1), ALMA_ERR_INVALID_ARG);
}

/* ---- Gather family -------------------------------------------------------------------------- */

static void test_gather(void **s) {
  (void)s;
  tnode t;
  int64_t xd[2] = {3, 4};
  alma_tensor x = tv(ALMA_DTYPE_FLOAT32, 2, xd, iota_f), out;
  int32_t idx[2] = {-1, 0};
  int64_t id[1] = {2};
  alma_tensor ti = tv(ALMA_DTYPE_INT32, 1, id, idx);
  alma_tensor *in[2] = {&x, &ti};
  tn_make(&t, "Gather", 13, 2, 1);
  attr_i(&t, "axis", 1);
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
  check_shape(&out, 2, (int64_t[]){3, 2});
  expect_f32(&out, (float[]){3, 0, 7, 4, 11, 8}, 6);
  alma_tensor_free_data(&out);

  int32_t bad[2] = {0, 4};
  alma_tensor tb = tv(ALMA_DTYPE_INT32, 1, id, bad);
  in[1] = &tb;
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_ERR_INVALID_ARG);
  assert_non_null(strstr(alma_last_error(), "node 't' (Gather)"));
  assert_non_null(strstr(alma_last_error(), "index 4"));

  /* GatherElements axis 0 with negative index; out-of-range fails */
  int64_t ge[4] = {2, -3, 1, 0}, gd[2] = {1, 4};
  alma_tensor tge = tv(ALMA_DTYPE_INT64, 2, gd, ge);
  in[1] = &tge;
  tn_make(&t, "GatherElements", 13, 2, 1);
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
  expect_f32(&out, (float[]){8, 1, 6, 3}, 4);
  alma_tensor_free_data(&out);
  ge[3] = 3;
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_ERR_INVALID_ARG);

  /* GatherND with batch_dims=1: data [2,2,2], indices [2,1] -> [2,2] */
  int64_t nd[3] = {2, 2, 2}, ndi[2] = {1, 0}, ndd[2] = {2, 1};
  alma_tensor xn = tv(ALMA_DTYPE_FLOAT32, 3, nd, iota_f), tn = tv(ALMA_DTYPE_INT64, 2, ndd, ndi);
  alma_tensor *in2[2] = {&xn, &tn};
  tn_make(&t, "GatherND", 13, 2, 1);
  attr_i(&t, "batch_dims", 1);
  assert_int_equal(tn_exec(&t, in2, 2, &out, 1), ALMA_OK);
  check_shape(&out, 2, (int64_t[]){2, 2});
  expect_f32(&out, (float[]){2, 3, 4, 5}, 4);
  alma_tensor_free_data(&out);
  ndi[1] = -3;
  assert_int_equal(tn_exec(&t, in2, 2, &out, 1), ALMA_ERR_INVALID_ARG);
}

static void test_scatter(void **s) {
  (void)s;
  tnode t;
  int64_t xd[2] = {2, 3};
  int32_t data[6] = {1, 2, 3, 4, 5, 6}, upd[2] = {10, 20};
  int64_t idx[2] = {-1, 2}, id[2] = {1, 2};
  alma_tensor x = tv(ALMA_DTYPE_INT32, 2, xd, data), ti = tv(ALMA_DTYPE_INT64, 2, id, idx),
              tu = tv(ALMA_DTYPE_INT32, 2, id, upd), out;
  alma_tensor *in[3] = {&x, &ti, &tu};
  /* axis 1, both updates hit element (0,2): add and mul accumulate */
  tn_make(&t, "ScatterElements", 16, 3, 1);
  attr_i(&t, "axis", 1);
  attr_s(&t, "reduction", "add");
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_OK);
  check_i64(&out, (int64_t[]){1, 2, 33, 4, 5, 6}, 6);
  alma_tensor_free_data(&out);
  tn_make(&t, "ScatterElements", 18, 3, 1);
  attr_i(&t, "axis", 1);
  attr_s(&t, "reduction", "mul");
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_OK);
  check_i64(&out, (int64_t[]){1, 2, 600, 4, 5, 6}, 6);
  alma_tensor_free_data(&out);
  tn_make(&t, "ScatterElements", 16, 3, 1); /* max needs opset 18 */
  attr_s(&t, "reduction", "max");
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_ERR_INVALID_ARG);

  /* ScatterND: rows, with min */
  int64_t ndi[2] = {1, 0}, ndd[2] = {2, 1};
  int32_t ndu[6] = {0, 9, 0, 9, 0, 9};
  alma_tensor tn = tv(ALMA_DTYPE_INT64, 2, ndd, ndi), tnu = tv(ALMA_DTYPE_INT32, 2, xd, ndu);
  alma_tensor *in2[3] = {&x, &tn, &tnu};
  tn_make(&t, "ScatterND", 18, 3, 1);
  attr_s(&t, "reduction", "min");
  assert_int_equal(tn_exec(&t, in2, 3, &out, 1), ALMA_OK);
  check_i64(&out, (int64_t[]){1, 0, 3, 0, 5, 0}, 6);
  alma_tensor_free_data(&out);
  ndi[0] = 2;
  assert_int_equal(tn_exec(&t, in2, 3, &out, 1), ALMA_ERR_INVALID_ARG);
}

/* ---- Pad ------------------------------------------------------------------------------------ */

static void test_pad(void **s) {
  (void)s;
  tnode t;
  int64_t xd[1] = {3}, pd[1] = {2};
  float xs[3] = {1, 2, 3};
  alma_tensor x = tv(ALMA_DTYPE_FLOAT32, 1, xd, xs), out;
  int64_t pads[2] = {5, 4};
  alma_tensor tp = tv(ALMA_DTYPE_INT64, 1, pd, pads);
  alma_tensor *in[4] = {&x, &tp, NULL, NULL};
  struct {
    const char *mode;
    float want[12];
  } cases[] = {
      {"reflect", {2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3}},
      {"edge", {1, 1, 1, 1, 1, 1, 2, 3, 3, 3, 3, 3}},
      {"wrap", {2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1}},
  };
  for (int c = 0; c < 3; c++) {
    tn_make(&t, "Pad", 19, 2, 1);
    attr_s(&t, "mode", cases[c].mode);
    assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
    expect_f32(&out, cases[c].want, 12);
    alma_tensor_free_data(&out);
  }
  tn_make(&t, "Pad", 18, 2, 1); /* wrap needs opset 19 */
  attr_s(&t, "mode", "wrap");
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_ERR_INVALID_ARG);

  /* constant with value input and axes (2-D, pad only axis -1, negative begin crops) */
  int64_t x2d[2] = {2, 3};
  alma_tensor x2 = tv(ALMA_DTYPE_FLOAT32, 2, x2d, iota_f);
  int64_t p2[2] = {-1, 2}, ax[1] = {-1}, d1[1] = {1};
  float cv = 7;
  alma_tensor tp2 = tv(ALMA_DTYPE_INT64, 1, pd, p2), tcv = tv(ALMA_DTYPE_FLOAT32, 0, NULL, &cv),
              tax = tv(ALMA_DTYPE_INT64, 1, d1, ax);
  alma_tensor *in2[4] = {&x2, &tp2, &tcv, &tax};
  tn_make(&t, "Pad", 18, 4, 1);
  assert_int_equal(tn_exec(&t, in2, 4, &out, 1), ALMA_OK);
  check_shape(&out, 2, (int64_t[]){2, 4});
  expect_f32(&out, (float[]){1, 2, 7, 7, 4, 5, 7, 7}, 8);
  alma_tensor_free_data(&out);

  /* Pad-2: attributes pads and value; 2-D constant padding of rows */
  tn_make(&t, "Pad", 2, 1, 1);
  int64_t ap[4] = {1, 0, 0, 1};
  attr_ints(&t, "pads", ap, 4);
  attr_f(&t, "value", -1.5f);
  alma_tensor *in3[1] = {&x2};
  assert_int_equal(tn_exec(&t, in3, 1, &out, 1), ALMA_OK);
  check_shape(&out, 2, (int64_t[]){3, 4});
  expect_f32(&out, (float[]){-1.5f, -1.5f, -1.5f, -1.5f, 0, 1, 2, -1.5f, 3, 4, 5, -1.5f}, 12);
  alma_tensor_free_data(&out);
}

/* ---- Constant / ConstantOfShape / Range ----------------------------------------------------- */

static void test_constants(void **s) {
  (void)s;
  tnode t;
  alma_tensor out;
  tn_make(&t, "Constant", 13, 0, 1);
  int64_t vals[3] = {4, 5, 6};
  attr_ints(&t, "value_ints", vals, 3);
  assert_int_equal(tn_exec(&t, NULL, 0, &out, 1), ALMA_OK);
  assert_int_equal(out.dtype, ALMA_DTYPE_INT64);
  check_i64(&out, vals, 3);
  alma_tensor_free_data(&out);
  tn_make(&t, "Constant", 13, 0, 1);
  attr_f(&t, "value_float", 2.5f);
  assert_int_equal(tn_exec(&t, NULL, 0, &out, 1), ALMA_OK);
  assert_int_equal(out.rank, 0);
  expect_f32(&out, (float[]){2.5f}, 1);
  alma_tensor_free_data(&out);
  tn_make(&t, "Constant", 13, 0, 1);
  attr_s(&t, "value_string", "hi");
  assert_int_equal(tn_exec(&t, NULL, 0, &out, 1), ALMA_OK); /* a string scalar */
  assert_int_equal(out.dtype, ALMA_DTYPE_STRING);
  assert_int_equal(out.rank, 0);
  assert_string_equal(alma_tensor_string(&out, 0, NULL), "hi");
  alma_tensor_free_data(&out);

  /* ConstantOfShape: default float 0; int32 value; empty shape gives a scalar */
  int64_t shp[2] = {2, 3}, sd[1] = {2}, ed[1] = {0};
  alma_tensor tsh = tv(ALMA_DTYPE_INT64, 1, sd, shp), tempty = tv(ALMA_DTYPE_INT64, 1, ed, shp);
  alma_tensor *in[1] = {&tsh};
  tn_make(&t, "ConstantOfShape", 9, 1, 1);
  assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  check_shape(&out, 2, shp);
  expect_f32(&out, (float[]){0, 0, 0, 0, 0, 0}, 6);
  alma_tensor_free_data(&out);
  int32_t seven = 7;
  int64_t one[1] = {1};
  t.attr_t = tv(ALMA_DTYPE_INT32, 1, one, &seven);
  tn_attr(&t, "value", ALMA_ATTR_TENSOR)->t = &t.attr_t;
  in[0] = &tempty;
  assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  assert_int_equal(out.dtype, ALMA_DTYPE_INT32);
  assert_int_equal(out.rank, 0);
  assert_int_equal(*(int32_t *)out.data, 7);
  alma_tensor_free_data(&out);

  /* Range */
  tn_make(&t, "Range", 11, 3, 1);
  int64_t a = 10, b = -3, c = -4;
  alma_tensor ta = tv(ALMA_DTYPE_INT64, 0, NULL, &a), tb = tv(ALMA_DTYPE_INT64, 0, NULL, &b),
              tc = tv(ALMA_DTYPE_INT64, 0, NULL, &c);
  alma_tensor *rin[3] = {&ta, &tb, &tc};
  assert_int_equal(tn_exec(&t, rin, 3, &out, 1), ALMA_OK);
  check_i64(&out, (int64_t[]){10, 6, 2, -2}, 4);
  alma_tensor_free_data(&out);
  double fa = 0.5, fb = 2, fc = 0.5;
  alma_tensor fta = tv(ALMA_DTYPE_FLOAT64, 0, NULL, &fa), ftb = tv(ALMA_DTYPE_FLOAT64, 0, NULL, &fb),
              ftc = tv(ALMA_DTYPE_FLOAT64, 0, NULL, &fc);
  alma_tensor *frin[3] = {&fta, &ftb, &ftc};
  assert_int_equal(tn_exec(&t, frin, 3, &out, 1), ALMA_OK);
  assert_int_equal(alma_tensor_numel(&out), 3);
  assert_float_equal(((double *)out.data)[2], 1.5, 0);
  alma_tensor_free_data(&out);
  c = 0;
  assert_int_equal(tn_exec(&t, rin, 3, &out, 1), ALMA_ERR_INVALID_ARG);
}

int main(void) {
  for (int i = 0; i < 720; i++) {
    iota_f[i] = (float)i;
    iota_i32[i] = i;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reshape),   cmocka_unit_test(test_flatten_squeeze), cmocka_unit_test(test_shape_size),
      cmocka_unit_test(test_transpose), cmocka_unit_test(test_depth_space),     cmocka_unit_test(test_tile_expand),
      cmocka_unit_test(test_concat_split), cmocka_unit_test(test_slice),        cmocka_unit_test(test_gather),
      cmocka_unit_test(test_scatter),   cmocka_unit_test(test_pad),             cmocka_unit_test(test_constants),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
