/* Output allocation (ops/op.h): alma__tensor_alloc zeroes; alma__tensor_alloc_uninit leaves data
 * uninitialised, poisoned with 0xFF bytes when ALMA_POISON_UNINIT=1 (and in sanitizer builds), but
 * zeroes string tensors (their handles must start NULL). An op that sets ALMA_OP_FILLS_OUTPUTS gets
 * uninitialised outputs and must write every element: a few of them, run here with poisoning on
 * (including edge shapes: an empty Concat input, a K = 0 MatMul, a broadcast Add), leave no
 * poison behind; an op without the flag still gets zeroed outputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "graph/graph.h"
#include "ops/op.h"

static int all_bytes(const void *p, size_t n, unsigned char b) {
  for (size_t i = 0; i < n; i++)
    if (((const unsigned char *)p)[i] != b) return 0;
  return 1;
}

static void test_alloc_zeroed_and_poisoned(void **state) {
  (void)state;
  assert_int_equal(alma__poison_uninit(), 1);
  int64_t dims[2] = {3, 5};
  alma_tensor z, u, s;
  assert_int_equal(alma__tensor_alloc(&z, ALMA_DTYPE_FLOAT32, 2, dims), ALMA_OK);
  assert_true(all_bytes(z.data, z.nbytes, 0));
  assert_int_equal(alma__tensor_alloc_uninit(&u, ALMA_DTYPE_FLOAT32, 2, dims), ALMA_OK);
  assert_int_equal(u.nbytes, 60);
  assert_true(u.owns_data);
  assert_true(all_bytes(u.data, u.nbytes, 0xFF));
  assert_true(isnan(((float *)u.data)[7]));
  assert_int_equal(alma__tensor_alloc_uninit(&s, ALMA_DTYPE_STRING, 2, dims), ALMA_OK);
  assert_true(all_bytes(s.data, s.nbytes, 0)); /* handles: NULL = "" */
  alma_tensor_free_data(&z);
  alma_tensor_free_data(&u);
  alma_tensor_free_data(&s);
  int64_t bad = -1;
  assert_int_not_equal(alma__tensor_alloc_uninit(&u, ALMA_DTYPE_FLOAT32, 1, &bad), ALMA_OK);
}

/* One node op(in...) -> y in a fresh graph, resolved at opset 17. */
static alma_graph *one_node(const char *op, int nin, alma_node **n_out) {
  alma_graph *g = alma__graph_new(NULL);
  assert_non_null(g);
  int v[8];
  char name[8];
  for (int i = 0; i < nin; i++) {
    snprintf(name, sizeof name, "x%d", i);
    v[i] = alma__graph_add_value(g, name);
  }
  int y = alma__graph_add_value(g, "y");
  assert_int_equal(alma__graph_add_node(g, op, "", "n", v, nin, &y, 1), 0);
  *n_out = &g->nodes[0];
  return g;
}

static void int_attr(alma_graph *g, alma_node *n, const char *name, int64_t v) {
  alma_attr *a = alma__arena_alloc(g->arena, sizeof *a);
  a->name = alma__arena_strdup(g->arena, name);
  a->type = ALMA_ATTR_INT;
  a->i = v;
  n->attrs = a, n->n_attrs = 1;
}

static alma_tensor f32(int rank, const int64_t *dims, float *data) {
  alma_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = ALMA_DTYPE_FLOAT32;
  t.rank = rank;
  for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
  t.data = data;
  t.nbytes = (size_t)alma__numel(rank, dims) * sizeof(float);
  return t;
}

/* Runs n on in[0..nin) and checks y == want (exact), every element written. */
static void run_expect(alma_node *n, const alma_tensor *in, int nin, const float *want, int64_t nwant) {
  assert_int_equal(alma__op_resolve(n, 17), ALMA_OK);
  const alma_tensor *pin[8];
  for (int i = 0; i < nin; i++) pin[i] = &in[i];
  alma_tensor y;
  assert_int_equal(alma__op_run_node(NULL, n, pin, nin, &y, 1), ALMA_OK);
  assert_int_equal(alma_tensor_numel(&y), nwant);
  for (int64_t i = 0; i < nwant; i++) assert_true(((float *)y.data)[i] == want[i]);
  alma_tensor_free_data(&y);
}

static void test_filling_ops_write_everything(void **state) {
  (void)state;
  alma_node *n;
  /* Concat of [2,0] and [2,3] along axis 1 */
  {
    alma_graph *g = one_node("Concat", 2, &n);
    int_attr(g, n, "axis", 1);
    float b[6] = {1, 2, 3, 4, 5, 6};
    alma_tensor in[2] = {f32(2, (int64_t[]){2, 0}, b), f32(2, (int64_t[]){2, 3}, b)};
    run_expect(n, in, 2, b, 6);
    assert_true(n->op->flags & ALMA_OP_FILLS_OUTPUTS);
    alma__graph_free(g);
  }
  /* MatMul [2,0] x [0,3]: all zeros */
  {
    alma_graph *g = one_node("MatMul", 2, &n);
    float dummy[1] = {0}, zeros[6] = {0};
    alma_tensor in[2] = {f32(2, (int64_t[]){2, 0}, dummy), f32(2, (int64_t[]){0, 3}, dummy)};
    run_expect(n, in, 2, zeros, 6);
    alma__graph_free(g);
  }
  /* MatMul [1,2] x [2,3] (a decode-like row) */
  {
    alma_graph *g = one_node("MatMul", 2, &n);
    float a[2] = {1, 2}, b[6] = {1, 2, 3, 4, 5, 6}, want[3] = {9, 12, 15};
    alma_tensor in[2] = {f32(2, (int64_t[]){1, 2}, a), f32(2, (int64_t[]){2, 3}, b)};
    run_expect(n, in, 2, want, 3);
    alma__graph_free(g);
  }
  /* Add [2,3] + [3] (broadcast) */
  {
    alma_graph *g = one_node("Add", 2, &n);
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, want[6] = {11, 22, 33, 14, 25, 36};
    alma_tensor in[2] = {f32(2, (int64_t[]){2, 3}, a), f32(1, (int64_t[]){3}, b)};
    run_expect(n, in, 2, want, 6);
    alma__graph_free(g);
  }
  /* Transpose [2,3] */
  {
    alma_graph *g = one_node("Transpose", 1, &n);
    float a[6] = {1, 2, 3, 4, 5, 6}, want[6] = {1, 4, 2, 5, 3, 6};
    alma_tensor in[1] = {f32(2, (int64_t[]){2, 3}, a)};
    run_expect(n, in, 1, want, 6);
    alma__graph_free(g);
  }
}

/* An op without the flag (ReduceSum here) still gets zeroed outputs. */
static void test_unflagged_op_gets_zeroed_output(void **state) {
  (void)state;
  alma_node *n;
  alma_graph *g = one_node("ReduceSum", 1, &n);
  assert_int_equal(alma__op_resolve(n, 17), ALMA_OK);
  assert_false(n->op->flags & ALMA_OP_FILLS_OUTPUTS);
  alma_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = ALMA_DTYPE_FLOAT32;
  t.rank = 1;
  t.dims[0] = 4;
  assert_int_equal(alma__op_alloc_output(n, &t), ALMA_OK);
  assert_true(all_bytes(t.data, t.nbytes, 0));
  alma_tensor_free_data(&t);
  alma__graph_free(g);
}

int main(void) {
  setenv("ALMA_POISON_UNINIT", "1", 1); /* before the first allocation reads it */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_alloc_zeroed_and_poisoned),
      cmocka_unit_test(test_filling_ops_write_everything),
      cmocka_unit_test(test_unflagged_op_gets_zeroed_output),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
