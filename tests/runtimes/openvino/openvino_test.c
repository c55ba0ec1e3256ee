/* The OPENVINO runtime through alma's session API, against EAGER (the reference) on the digits CNN
 * (examples/models/mnist_cnn.onnx, symbolic batch axis):
 *  - OPENVINO and FOLD+OPENVINO agree with EAGER within rtol 1e-4 / atol 1e-5 at batch 1, 3 and 1
 *    again (each new shape recompiles the reshaped model; the third run reuses nothing stale), at 1
 *    and 2 threads;
 *  - OPENVINO_BF16 and INT8_STATIC+OPENVINO are lossy: cosine >= 0.999, and the same class in every
 *    row whose top two logits EAGER puts more than 0.5 apart;
 *  - FUSE+OPENVINO is refused (unavailable) naming the FUSE step;
 *  - a model OpenVINO cannot read (an ai.onnx.ml tree ensemble) fails to compile with OpenVINO's own
 *    message, naming the operator;
 *  - the per-node profile gives time to both Conv nodes and never more than the batch took.
 * Exit 77 (SKIP) when the runtime is built but OpenVINO cannot be loaded here.
 * usage: openvino_test MNIST_CNN.onnx TREE_MODEL.onnx */
#ifdef ALMA_HAVE_OPENVINO
#include <math.h>

#include "alma/alma.h"
#include "conversions/conversions.h"
#include "core/core.h"
#include "runtimes/session.h"

static int failures;
#define CHECK(cond, ...)               \
  do {                                 \
    if (!(cond)) {                     \
      printf("FAIL: " __VA_ARGS__);    \
      printf("\n");                    \
      failures++;                      \
    }                                  \
  } while (0)

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float frand(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((rng >> 40) & 0xffff) / 65535.0f;
}

static alma_status run_one(const alma_model *m, const char *conv, int threads, const alma_tensor *in, alma_tensor *out) {
  alma_session_options o;
  alma_session_options_init(&o);
  o.threads = threads;
  alma_session *s = NULL;
  alma_status st = alma_session_create(m, conv, &o, &s);
  if (st == ALMA_OK) st = alma_session_run(s, in, 1, out, 1);
  alma_session_free(s);
  return st;
}

static void compare_exact(const char *what, const alma_tensor *got, const alma_tensor *want) {
  CHECK(got->dtype == want->dtype && alma__same_shape(got, want), "%s: dtype or shape differs from EAGER's", what);
  if (got->dtype != want->dtype || !alma__same_shape(got, want)) return;
  const float *a = got->data, *b = want->data;
  for (int64_t i = 0; i < alma_tensor_numel(want); i++)
    if (!(fabs(a[i] - b[i]) <= 1e-5 + 1e-4 * fabs(b[i]))) {
      CHECK(0, "%s: element %lld is %.8g, EAGER's %.8g", what, (long long)i, a[i], b[i]);
      return;
    }
}

static void compare_lossy(const char *what, const alma_tensor *got, const alma_tensor *want) {
  CHECK(got->dtype == want->dtype && alma__same_shape(got, want), "%s: dtype or shape differs from EAGER's", what);
  if (got->dtype != want->dtype || !alma__same_shape(got, want)) return;
  const float *a = got->data, *b = want->data;
  double ab = 0, aa = 0, bb = 0;
  int64_t n = alma_tensor_numel(want), rows = want->dims[0], cols = n / rows;
  for (int64_t i = 0; i < n; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
  double cos = ab / sqrt(aa * bb);
  CHECK(cos >= 0.999, "%s: cosine with EAGER %.6f < 0.999", what, cos);
  /* the class must agree where EAGER's top two logits are apart by more than reduced precision
   * moves them (random digits images give near ties) */
  for (int64_t r = 0; r < rows; r++) {
    int64_t ia = 0, ib = 0;
    for (int64_t c = 1; c < cols; c++) {
      if (a[r * cols + c] > a[r * cols + ia]) ia = c;
      if (b[r * cols + c] > b[r * cols + ib]) ib = c;
    }
    double second = -INFINITY;
    for (int64_t c = 0; c < cols; c++)
      if (c != ib && b[r * cols + c] > second) second = b[r * cols + c];
    if (b[r * cols + ib] - second > 0.5)
      CHECK(ia == ib, "%s: row %lld argmax %lld, EAGER's %lld", what, (long long)r, (long long)ia, (long long)ib);
  }
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: openvino_test MNIST_CNN.onnx TREE_MODEL.onnx\n");
    return 2;
  }
  const alma_runtime *rt = alma__runtime_find("OPENVINO");
  if (!rt || rt->init() != ALMA_OK) {
    printf("SKIP: OPENVINO unavailable: %s\n", rt ? alma_last_error() : "not registered");
    return 77;
  }
  alma_model *m = NULL;
  if (alma_model_load(argv[1], &m) != ALMA_OK) {
    printf("FAIL: loading %s: %s\n", argv[1], alma_last_error());
    return 1;
  }
  /* batch 1, 3, then 1 again: the reshape path recompiles on each change */
  const int64_t batches[] = {1, 3, 1};
  for (int bi = 0; bi < 3; bi++) {
    int64_t dims[4] = {batches[bi], 1, 28, 28};
    alma_tensor in;
    if (alma__tensor_alloc(&in, ALMA_DTYPE_FLOAT32, 4, dims) != ALMA_OK) return 1;
    for (int64_t i = 0; i < alma_tensor_numel(&in); i++) ((float *)in.data)[i] = frand();
    alma_tensor ref = {0};
    alma_status st = run_one(m, "EAGER", 1, &in, &ref);
    CHECK(st == ALMA_OK, "EAGER: %s", alma_last_error());
    static const char *const exact[] = {"OPENVINO", "FOLD+OPENVINO"};
    for (int c = 0; c < 2 && st == ALMA_OK; c++)
      for (int threads = 1; threads <= 2; threads++) {
        alma_tensor out = {0};
        char what[96];
        snprintf(what, sizeof what, "%s batch %lld, %d thread%s", exact[c], (long long)batches[bi], threads,
                 threads == 1 ? "" : "s");
        alma_status s2 = run_one(m, exact[c], threads, &in, &out);
        CHECK(s2 == ALMA_OK, "%s: %s", what, alma_last_error());
        if (s2 == ALMA_OK) compare_exact(what, &out, &ref);
        alma_tensor_free_data(&out);
      }
    /* one session across the shape changes too */
    static const char *const lossy[] = {"OPENVINO_BF16", "INT8_STATIC+OPENVINO"};
    for (int c = 0; c < 2 && st == ALMA_OK && batches[bi] == 3; c++) {
      alma_conversion conv;
      if (alma__conversion_parse(lossy[c], &conv) != ALMA_OK || alma__conversion_available(&conv) != ALMA_OK) {
        printf("note: %s skipped: %s\n", lossy[c], alma_last_error());
        alma__error_clear();
        continue;
      }
      alma_tensor out = {0};
      alma_status s2 = run_one(m, lossy[c], 2, &in, &out);
      CHECK(s2 == ALMA_OK, "%s: %s", lossy[c], alma_last_error());
      if (s2 == ALMA_OK) compare_lossy(lossy[c], &out, &ref);
      alma_tensor_free_data(&out);
    }
    alma_tensor_free_data(&ref);
    alma_tensor_free_data(&in);
  }

  /* one session, shapes changing under it, and the per-node profile */
  {
    alma_session *s = NULL;
    alma_status st = alma_session_create(m, "OPENVINO", NULL, &s);
    CHECK(st == ALMA_OK, "OPENVINO session: %s", alma_last_error());
    for (int bi = 0; st == ALMA_OK && bi < 3; bi++) {
      int64_t dims[4] = {batches[bi] + 1, 1, 28, 28};
      alma_tensor in, out = {0}, ref = {0};
      if (alma__tensor_alloc(&in, ALMA_DTYPE_FLOAT32, 4, dims) != ALMA_OK) return 1;
      for (int64_t i = 0; i < alma_tensor_numel(&in); i++) ((float *)in.data)[i] = frand();
      if (bi == 2) CHECK(alma__session_profile_start(s) == ALMA_OK, "profile_start: %s", alma_last_error());
      double t0 = alma__now_s();
      st = alma_session_run(s, &in, 1, &out, 1);
      double took = alma__now_s() - t0;
      CHECK(st == ALMA_OK, "OPENVINO run at batch %lld: %s", (long long)dims[0], alma_last_error());
      if (st == ALMA_OK && run_one(m, "EAGER", 1, &in, &ref) == ALMA_OK) compare_exact("OPENVINO, one session", &out, &ref);
      if (bi == 2 && st == ALMA_OK) {
        alma__prof_graph *pg = NULL;
        int npg = 0;
        CHECK(alma__session_profile_read(s, &pg, &npg) == ALMA_OK && npg == 1, "profile_read: %s", alma_last_error());
        if (pg) {
          int convs = 0;
          double total = 0;
          for (int i = 0; i < pg[0].g->n_nodes; i++) {
            total += pg[0].nodes[i].seconds;
            if (!strcmp(pg[0].g->nodes[i].op_type, "Conv") && pg[0].nodes[i].seconds > 0 && pg[0].nodes[i].runs == 1) convs++;
          }
          CHECK(convs == 2, "profile: %d of the 2 Conv nodes timed once", convs);
          CHECK(total > 0 && total <= took, "profile: nodes took %.6f s of a %.6f s run", total, took);
        }
        alma__prof_graphs_free(pg, npg);
      }
      alma_tensor_free_data(&ref);
      alma_tensor_free_data(&out);
      alma_tensor_free_data(&in);
    }
    alma_session_free(s);
  }

  /* FUSE leaves alma-domain ops: refused before anything runs, naming the step */
  {
    alma_session *s = NULL;
    alma_status st = alma_session_create(m, "FOLD+FUSE+OPENVINO", NULL, &s);
    CHECK(st == ALMA_ERR_UNAVAILABLE && strstr(alma_last_error(), "FUSE") && strstr(alma_last_error(), "OPENVINO"),
          "FOLD+FUSE+OPENVINO: status %s, message '%s'", alma_status_name(st), alma_last_error());
    alma_session_free(s);
  }
  alma_model_free(m);

  /* a model OpenVINO rejects: its message, with the operator's name */
  {
    alma_model *t = NULL;
    alma_status st = alma_model_load(argv[2], &t);
    CHECK(st == ALMA_OK, "loading %s: %s", argv[2], alma_last_error());
    alma_session *s = NULL;
    if (st == ALMA_OK) {
      st = alma_session_create(t, "OPENVINO", NULL, &s);
      CHECK(st == ALMA_ERR_UNSUPPORTED && strstr(alma_last_error(), "OPENVINO") &&
                strstr(alma_last_error(), "TreeEnsemble"),
            "OPENVINO on %s: status %s, message '%s'", argv[2], alma_status_name(st), alma_last_error());
    }
    alma_session_free(s);
    alma_model_free(t);
  }
  printf("%s\n", failures ? "openvino_test: FAILED" : "openvino_test: all checks passed");
  return failures ? 1 : 0;
}
#else
#include <stdio.h>
int main(void) {
  printf("SKIP: the OPENVINO runtime is not built\n");
  return 77;
}
#endif
