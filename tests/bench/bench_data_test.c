/* Data sources: --input specs, random batches (deterministic), .npy data sets sliced into batches
 * with wrap-around, directories of batches, IDX, and loader callbacks with reset. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "bench/bench.h"

static alma__input_desc desc(const char *name, alma_dtype dt, int rank, const int64_t *dims) {
  alma__input_desc d;
  memset(&d, 0, sizeof d);
  snprintf(d.name, sizeof d.name, "%s", name);
  d.dtype = dt;
  d.rank = rank;
  for (int i = 0; i < rank; i++) d.dims[i] = dims[i];
  return d;
}

static void test_input_spec(void **state) {
  (void)state;
  alma_data *d;
  assert_int_equal(alma_data_random(&d), ALMA_OK);
  assert_int_equal(alma_data_set_input_spec(d, "x:8x3x224x224:float16"), ALMA_OK);
  assert_int_equal(alma_data_set_input_spec(d, "input:0:2x5"), ALMA_OK);  /* TF-style name with ':' */
  assert_int_equal(alma_data_set_input_spec(d, "s:scalar:int64"), ALMA_OK);
  int64_t dims[2] = {-1, 5};
  alma__input_desc in[3] = {desc("x", ALMA_DTYPE_FLOAT16, 4, (int64_t[]){-1, 3, 224, 224}),
                            desc("input:0", ALMA_DTYPE_FLOAT32, 2, dims),
                            desc("s", ALMA_DTYPE_INT64, 0, NULL)};
  alma__batcher *b;
  /* an override the model input cannot take is refused, naming it: another dtype, a fixed dim,
   * another rank */
  alma__input_desc other[3][3] = {
      {desc("x", ALMA_DTYPE_FLOAT32, 4, (int64_t[]){-1, 3, 224, 224}), in[1], in[2]},
      {in[0], desc("input:0", ALMA_DTYPE_FLOAT32, 2, (int64_t[]){-1, 16}), in[2]},
      {in[0], in[1], desc("s", ALMA_DTYPE_INT64, 1, (int64_t[]){1})}};
  const alma_status why[3] = {ALMA_ERR_TYPE, ALMA_ERR_SHAPE, ALMA_ERR_SHAPE};
  const char *who[3] = {"'x'", "'input:0'", "'s'"};
  for (int k = 0; k < 3; k++) {
    assert_int_equal(alma__batcher_new_ex(d, other[k], 3, 1, 0, NULL, NULL, &b), why[k]);
    assert_non_null(strstr(alma_last_error(), who[k]));
  }
  assert_int_equal(alma__batcher_new_ex(d, in, 3, 1, 0, NULL, NULL, &b), ALMA_OK);
  const alma_tensor *sh = alma__batcher_shapes(b);
  assert_int_equal(sh[0].dtype, ALMA_DTYPE_FLOAT16);
  assert_int_equal(sh[0].rank, 4);
  assert_int_equal(sh[0].dims[0], 8);
  assert_int_equal(sh[1].dims[1], 5);
  assert_int_equal(sh[2].rank, 0);
  assert_int_equal(alma__batcher_batch(b), 8);
  alma__batcher_free(b);
  const char *bad[] = {"x", "x:1y3", ":1x2", "x:1x2:float99", "x:-1x2", "x:1x2x3x4x5x6x7x8x9"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (alma_data_set_input_spec(d, bad[i]) != ALMA_ERR_INVALID_ARG) fail_msg("'%s' accepted", bad[i]);
  /* an --input naming no model input is an error, not silently ignored */
  assert_int_equal(alma_data_set_input_spec(d, "nosuch:1x2"), ALMA_OK);
  assert_int_equal(alma__batcher_new_ex(d, in, 3, 1, 0, NULL, NULL, &b), ALMA_ERR_INVALID_ARG);
  assert_non_null(strstr(alma_last_error(), "nosuch"));
  alma_data_free(d);
}

static void test_random_symbolic_and_deterministic(void **state) {
  (void)state;
  int64_t dims[3] = {-1, -1, 4};
  alma__input_desc in[2] = {desc("x", ALMA_DTYPE_FLOAT32, 3, dims), desc("ids", ALMA_DTYPE_INT64, 3, dims)};
  alma__batcher *a, *b;
  assert_int_equal(alma__batcher_new_ex(NULL, in, 2, 5, 42, NULL, NULL, &a), ALMA_OK);
  assert_int_equal(alma__batcher_new_ex(NULL, in, 2, 5, 42, NULL, NULL, &b), ALMA_OK);
  const alma_tensor *sh = alma__batcher_shapes(a);
  assert_int_equal(sh[0].dims[0], 5);  /* symbolic first dim = batch size */
  assert_int_equal(sh[0].dims[1], 1);  /* other symbolic dims = 1 */
  assert_int_equal(sh[0].dims[2], 4);
  alma_tensor ta[2], tb[2], t0[2];
  int64_t ns;
  for (int k = 0; k < 20; k++) {
    assert_int_equal(alma__batcher_next(a, ta, &ns), ALMA_OK);
    assert_int_equal(alma__batcher_next(b, tb, &ns), ALMA_OK);
    assert_int_equal(ns, 5);
    assert_memory_equal(ta[0].data, tb[0].data, ta[0].nbytes);
    assert_memory_equal(ta[1].data, tb[1].data, ta[1].nbytes);
    if (k == 0) memcpy(t0, ta, sizeof t0);
  }
  const int64_t *ids = ta[1].data;
  for (int i = 0; i < 20; i++) assert_true(ids[i] >= 0 && ids[i] < 10);
  /* batch 0 after a rewind is batch 0 again */
  assert_int_equal(alma__batcher_rewind(a), ALMA_OK);
  assert_int_equal(alma__batcher_next(a, ta, &ns), ALMA_OK);
  assert_memory_equal(ta[0].data, t0[0].data, ta[0].nbytes);
  alma__batcher_free(a);
  alma__batcher_free(b);
  /* another seed gives other numbers */
  assert_int_equal(alma__batcher_new_ex(NULL, in, 2, 5, 43, NULL, NULL, &a), ALMA_OK);
  assert_int_equal(alma__batcher_next(a, ta, &ns), ALMA_OK);
  assert_int_equal(alma__batcher_new_ex(NULL, in, 2, 5, 42, NULL, NULL, &b), ALMA_OK);
  assert_int_equal(alma__batcher_next(b, tb, &ns), ALMA_OK);
  assert_true(memcmp(ta[0].data, tb[0].data, ta[0].nbytes) != 0);
  alma__batcher_free(a);
  alma__batcher_free(b);
}

static int n_warn;
static void count_warn(void *u, const char *m) {
  (void)u;
  (void)m;
  n_warn++;
}

static void test_fixed_batch_dim_wins(void **state) {
  (void)state;
  int64_t dims[2] = {1, 3};
  alma__input_desc in = desc("x", ALMA_DTYPE_FLOAT32, 2, dims);
  alma__batcher *b;
  n_warn = 0;
  assert_int_equal(alma__batcher_new_ex(NULL, &in, 1, 8, 0, count_warn, NULL, &b), ALMA_OK);
  assert_int_equal(alma__batcher_batch(b), 1);
  assert_int_equal(n_warn, 1);
  alma__batcher_free(b);
}

static char tmp[256];

static void write_npy(const char *path, alma_dtype dt, int rank, const int64_t *dims, double start) {
  alma_tensor t;
  assert_int_equal(alma__tensor_alloc(&t, dt, rank, dims), ALMA_OK);
  for (int64_t i = 0; i < alma_tensor_numel(&t); i++) alma__set_f64(t.data, dt, i, start + (double)i);
  assert_int_equal(alma_npy_save(path, &t), ALMA_OK);
  alma_tensor_free_data(&t);
}

static void test_npy_dataset(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/set.npy", tmp);
  write_npy(path, ALMA_DTYPE_UINT8, 3, (int64_t[]){5, 2, 3}, 0);  /* 5 samples of 2x3 */
  alma_data *d;
  assert_int_equal(alma_data_from_path(path, &d), ALMA_OK);
  assert_string_equal(alma_data_kind(d), "npy");
  assert_int_equal(alma_data_set_scale(d, 0.5, 1), ALMA_OK);
  /* the model wants float32 [batch, 6]: reshaped per sample, converted, scaled */
  alma__input_desc in = desc("x", ALMA_DTYPE_FLOAT32, 2, (int64_t[]){-1, 6});
  alma__batcher *b;
  assert_int_equal(alma__batcher_new_ex(d, &in, 1, 2, 0, NULL, NULL, &b), ALMA_OK);
  alma_tensor t;
  int64_t ns;
  float expect_first[3] = {1.0f, 1.5f, 2.0f};  /* samples 0,1 start at elements 0, 6 */
  assert_int_equal(alma__batcher_next(b, &t, &ns), ALMA_OK);
  assert_int_equal(ns, 2);
  assert_int_equal(t.dtype, ALMA_DTYPE_FLOAT32);
  assert_int_equal(t.rank, 2);
  assert_int_equal(t.dims[0], 2);
  assert_int_equal(t.dims[1], 6);
  assert_memory_equal(t.data, expect_first, sizeof expect_first);
  assert_true(((float *)t.data)[6] == 6 * 0.5f + 1);
  assert_int_equal(alma__batcher_next(b, &t, &ns), ALMA_OK);  /* samples 2,3 */
  assert_true(((float *)t.data)[0] == 12 * 0.5f + 1);
  assert_int_equal(alma__batcher_next(b, &t, &ns), ALMA_OK);  /* samples 4,0: wraps around */
  assert_true(((float *)t.data)[0] == 24 * 0.5f + 1);
  assert_true(((float *)t.data)[6] == 1.0f);
  alma__batcher_free(b);
  /* samples that do not fit the input are refused, naming both shapes */
  alma__input_desc wrong = desc("x", ALMA_DTYPE_FLOAT32, 2, (int64_t[]){-1, 7});
  assert_int_equal(alma__batcher_new_ex(d, &wrong, 1, 2, 0, NULL, NULL, &b), ALMA_ERR_SHAPE);
  assert_non_null(strstr(alma_last_error(), "[5,2,3]"));
  alma_data_free(d);
  /* one file per input */
  const char *two[] = {path, path};
  assert_int_equal(alma_data_from_npy(two, 2, &d), ALMA_OK);
  assert_int_equal(alma__batcher_new_ex(d, &in, 1, 2, 0, NULL, NULL, &b), ALMA_ERR_SHAPE); /* data error: exit 3 */
  alma_data_free(d);
}

/* Beside inputs with a symbolic first dimension, one whose first dimension is fixed (a merged
 * decoder's use_cache_branch [1]) or a scalar has no batch axis: its file is its one value, fed
 * whole to every batch, the batch coming from the batched inputs whatever their order. */
static void test_npy_unbatched_inputs(void **state) {
  (void)state;
  char px[512], pf[512], ps[512];
  snprintf(pf, sizeof pf, "%s/flag.npy", tmp);
  snprintf(px, sizeof px, "%s/x5.npy", tmp);
  snprintf(ps, sizeof ps, "%s/step.npy", tmp);
  write_npy(pf, ALMA_DTYPE_FLOAT32, 1, (int64_t[]){1}, 7);
  write_npy(px, ALMA_DTYPE_FLOAT32, 2, (int64_t[]){5, 4}, 0); /* 5 samples of 4 */
  write_npy(ps, ALMA_DTYPE_INT64, 0, NULL, 3);
  const char *paths[] = {pf, px, ps};
  alma_data *d;
  assert_int_equal(alma_data_from_npy(paths, 3, &d), ALMA_OK);
  alma__input_desc in[3] = {desc("flag", ALMA_DTYPE_FLOAT32, 1, (int64_t[]){1}),
                            desc("x", ALMA_DTYPE_FLOAT32, 2, (int64_t[]){-1, 4}),
                            desc("step", ALMA_DTYPE_INT64, 0, NULL)};
  alma__batcher *b;
  assert_int_equal(alma__batcher_new_ex(d, in, 3, 2, 0, NULL, NULL, &b), ALMA_OK);
  assert_int_equal(alma__batcher_batch(b), 2);
  alma_tensor t[3];
  int64_t ns;
  for (int k = 0; k < 3; k++) { /* batches 0-1, 2-3, 4-0: flag and step the same every time */
    assert_int_equal(alma__batcher_next(b, t, &ns), ALMA_OK);
    assert_int_equal(ns, 2);
    assert_int_equal(t[0].rank, 1);
    assert_int_equal(t[0].dims[0], 1);
    assert_true(((float *)t[0].data)[0] == 7.0f);
    assert_int_equal(t[1].dims[0], 2);
    assert_true(((float *)t[1].data)[0] == (float)(8 * k % 20));
    assert_int_equal(t[2].rank, 0);
    assert_int_equal(((int64_t *)t[2].data)[0], 3);
  }
  alma__batcher_free(b);
  alma_data_free(d);
  /* samples stacked for the flag are refused, naming the input and the shape it takes */
  const char *stacked[] = {px, px, ps};
  assert_int_equal(alma_data_from_npy(stacked, 3, &d), ALMA_OK);
  assert_int_equal(alma__batcher_new_ex(d, in, 3, 2, 0, NULL, NULL, &b), ALMA_ERR_SHAPE);
  assert_non_null(strstr(alma_last_error(), "input 'flag' has no batch axis"));
  assert_non_null(strstr(alma_last_error(), "[1]"));
  alma_data_free(d);
}

static void test_dir_of_batches(void **state) {
  (void)state;
  char dir[512], path[600];
  snprintf(dir, sizeof dir, "%s/batches", tmp);
  mkdir(dir, 0755);
  for (int k = 0; k < 3; k++) {
    snprintf(path, sizeof path, "%s/b%d.npy", dir, k);
    write_npy(path, ALMA_DTYPE_FLOAT32, 2, (int64_t[]){k + 1, 4}, 100 * k);
  }
  alma_data *d;
  assert_int_equal(alma_data_from_path(dir, &d), ALMA_OK);
  assert_string_equal(alma_data_kind(d), "dir");
  alma__input_desc in = desc("x", ALMA_DTYPE_FLOAT32, 2, (int64_t[]){-1, 4});
  alma__batcher *b;
  assert_int_equal(alma__batcher_new_ex(d, &in, 1, 1, 0, NULL, NULL, &b), ALMA_OK);
  alma_tensor t;
  int64_t ns;
  for (int k = 0; k < 4; k++) {
    assert_int_equal(alma__batcher_next(b, &t, &ns), ALMA_OK);
    assert_int_equal(ns, k % 3 + 1);  /* name order, cycling */
    assert_true(((float *)t.data)[0] == 100 * (k % 3));
  }
  alma__batcher_free(b);
  alma_data_free(d);
  /* several inputs: one subdirectory per batch with <name>.npy */
  snprintf(dir, sizeof dir, "%s/multi/000", tmp);
  snprintf(path, sizeof path, "%s/multi", tmp);
  mkdir(path, 0755);
  mkdir(dir, 0755);
  snprintf(path, sizeof path, "%s/a.npy", dir);
  write_npy(path, ALMA_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, 0);
  snprintf(path, sizeof path, "%s/input_1.npy", dir);
  write_npy(path, ALMA_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, 50);
  snprintf(path, sizeof path, "%s/multi", tmp);
  assert_int_equal(alma_data_from_dir(path, &d), ALMA_OK);
  alma__input_desc in2[2] = {desc("a", ALMA_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}), desc("b", ALMA_DTYPE_FLOAT32, 2, (int64_t[]){2, 3})};
  assert_int_equal(alma__batcher_new_ex(d, in2, 2, 1, 0, NULL, NULL, &b), ALMA_OK);
  alma_tensor t2[2];
  assert_int_equal(alma__batcher_next(b, t2, &ns), ALMA_OK);
  assert_true(((float *)t2[1].data)[0] == 50);
  alma__batcher_free(b);
  alma_data_free(d);
}

static void test_idx(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/images-idx3-ubyte", tmp);
  FILE *f = fopen(path, "wb");
  unsigned char head[16] = {0, 0, 8, 3, 0, 0, 0, 4, 0, 0, 0, 2, 0, 0, 0, 2};  /* 4 images of 2x2 */
  fwrite(head, 1, 16, f);
  for (int i = 0; i < 16; i++) fputc(i * 10, f);
  fclose(f);
  alma_data *d;
  assert_int_equal(alma_data_from_path(path, &d), ALMA_OK);
  assert_string_equal(alma_data_kind(d), "idx");
  alma_data_set_scale(d, 1.0 / 255, 0);
  alma__input_desc in = desc("img", ALMA_DTYPE_FLOAT32, 4, (int64_t[]){-1, 1, 2, 2});
  alma__batcher *b;
  assert_int_equal(alma__batcher_new_ex(d, &in, 1, 3, 0, NULL, NULL, &b), ALMA_OK);
  alma_tensor t;
  int64_t ns;
  assert_int_equal(alma__batcher_next(b, &t, &ns), ALMA_OK);
  assert_int_equal(t.rank, 4);
  assert_int_equal(t.dims[0], 3);
  assert_true(fabsf(((float *)t.data)[5] - 50.0f / 255) < 1e-6);
  alma__batcher_free(b);
  alma_data_free(d);
}

typedef struct {
  int pos, resets, n;
  float buf[2];
} loader_state;

static alma_status lnext(void *user, alma_tensor *in, int n, int *end) {
  loader_state *s = user;
  assert_int_equal(n, 1);
  if (s->pos >= s->n) {
    *end = 1;
    return ALMA_OK;
  }
  s->buf[0] = (float)s->pos;
  s->buf[1] = 0;
  in[0].dtype = ALMA_DTYPE_FLOAT32;
  in[0].rank = 2;
  in[0].dims[0] = 1;
  in[0].dims[1] = 2;
  in[0].data = s->buf;
  in[0].nbytes = sizeof s->buf;
  s->pos++;
  return ALMA_OK;
}

static alma_status lreset(void *user) {
  loader_state *s = user;
  s->pos = 0;
  s->resets++;
  return ALMA_OK;
}

static void test_loader(void **state) {
  (void)state;
  loader_state s = {.n = 3};
  alma_data *d;
  assert_int_equal(alma_data_from_loader(lnext, lreset, &s, &d), ALMA_OK);
  alma__input_desc in = desc("x", ALMA_DTYPE_FLOAT32, 2, (int64_t[]){-1, 2});
  alma__batcher *b;
  assert_int_equal(alma__batcher_new_ex(d, &in, 1, 1, 0, NULL, NULL, &b), ALMA_OK);
  assert_int_equal(s.resets, 1);
  alma_tensor t;
  int64_t ns;
  for (int k = 0; k < 7; k++) {  /* passes end after 3: reset and go on */
    assert_int_equal(alma__batcher_next(b, &t, &ns), ALMA_OK);
    assert_true(((float *)t.data)[0] == (float)(k % 3));
  }
  assert_int_equal(s.resets, 3);
  alma__batcher_free(b);
  alma_data_free(d);
  /* an empty loader is an error, not a hang */
  loader_state e = {.n = 0};
  assert_int_equal(alma_data_from_loader(lnext, lreset, &e, &d), ALMA_OK);
  assert_int_equal(alma__batcher_new_ex(d, &in, 1, 1, 0, NULL, NULL, &b), ALMA_OK);
  assert_int_equal(alma__batcher_next(b, &t, &ns), ALMA_ERR_INVALID_ARG);
  alma__batcher_free(b);
  alma_data_free(d);
}

static int setup(void **state) {
  (void)state;
  const char *base = getenv("TMPDIR");
  snprintf(tmp, sizeof tmp, "%s/alma-data-test-XXXXXX", base && *base ? base : "/tmp");
  return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_input_spec), cmocka_unit_test(test_random_symbolic_and_deterministic),
      cmocka_unit_test(test_fixed_batch_dim_wins), cmocka_unit_test(test_npy_dataset),
      cmocka_unit_test(test_npy_unbatched_inputs),
      cmocka_unit_test(test_dir_of_batches), cmocka_unit_test(test_idx), cmocka_unit_test(test_loader),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
