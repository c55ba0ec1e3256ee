/* mnist_bench: benchmark digit classifiers on their held-out set through a data-loader callback,
 * and report each one's top-1 accuracy beside its speed.
 *
 *   mnist_bench [-c CONVERSIONS|all] [-b BATCH] [-n SAMPLES] [-t MIN_TIME_S] [-a MIN_ACCURACY]
 *               [-j JSON_DIR] DATA_DIR MODEL.onnx [MODEL.onnx ...]
 *
 * DATA_DIR holds what train.py writes: test-images-idx3-ubyte (uint8 [N,28,28]) and
 * test-labels-idx1-ubyte (uint8 [N]), MNIST's IDX format. Each model takes "image" float32
 * [batch,1,28,28] in [0, 1] and returns logits [batch,10]. For several models (the fp32 one and the
 * QAT-trained one, say) the final table puts them side by side.
 *
 * The benchmark returns timings, not outputs, so accuracy comes from a second, plain pass: one
 * session per conversion that ran fine, over the whole held-out set with alma_session_run.
 * Exit status: 0 when everything ran and every accuracy reached -a (default 0), 1 otherwise,
 * 2 on a usage or data error. See README.md.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <alma/alma.h>

#define MAX_CONV 64
#define MAX_ROWS 256
#define SIDE 28
#define CLASSES 10

/* ---- the data loader ----------------------------------------------------------------------- */

/* Held-out set in memory (as read from the IDX files) and a cursor. Each next() converts one
 * batch of uint8 pixels to float in [0, 1] into `buf`, handed to alma as a view (owns_data = 0):
 * it stays valid until the following call, as the loader contract asks. */
typedef struct {
  alma_tensor images;  /* uint8 [N,28,28] */
  alma_tensor labels;  /* uint8 [N] */
  int64_t n, batch, pos;
  int drop_last;       /* 1: only full batches (benchmark: every timed batch has the same size) */
  float *buf;
} digits_loader;

static alma_status loader_next(void *user, alma_tensor *inputs, int n_inputs, int *end_out) {
  digits_loader *L = user;
  if (n_inputs != 1) return ALMA_ERR_INVALID_ARG;  /* the digits models have one input */
  int64_t b = L->n - L->pos < L->batch ? L->n - L->pos : L->batch;
  if (b <= 0 || (L->drop_last && b < L->batch)) {
    *end_out = 1;
    return ALMA_OK;
  }
  const uint8_t *px = (const uint8_t *)L->images.data + L->pos * SIDE * SIDE;
  for (int64_t i = 0; i < b * SIDE * SIDE; i++) L->buf[i] = px[i] / 255.0f;
  alma_tensor *t = &inputs[0];
  t->dtype = ALMA_DTYPE_FLOAT32;
  t->rank = 4;
  t->dims[0] = b;
  t->dims[1] = 1;
  t->dims[2] = SIDE;
  t->dims[3] = SIDE;
  t->data = L->buf;
  t->nbytes = (size_t)(b * SIDE * SIDE) * sizeof(float);
  t->owns_data = 0;
  L->pos += b;
  return ALMA_OK;
}

static alma_status loader_reset(void *user) {
  ((digits_loader *)user)->pos = 0;
  return ALMA_OK;
}

static int loader_open(digits_loader *L, const char *dir, int64_t batch) {
  char path[4096];
  memset(L, 0, sizeof *L);
  snprintf(path, sizeof path, "%s/test-images-idx3-ubyte", dir);
  if (alma_idx_load(path, &L->images) != ALMA_OK) goto fail;
  snprintf(path, sizeof path, "%s/test-labels-idx1-ubyte", dir);
  if (alma_idx_load(path, &L->labels) != ALMA_OK) goto fail;
  if (L->images.dtype != ALMA_DTYPE_UINT8 || L->images.rank != 3 || L->images.dims[1] != SIDE ||
      L->images.dims[2] != SIDE || L->labels.dtype != ALMA_DTYPE_UINT8 || L->labels.rank != 1 ||
      L->labels.dims[0] != L->images.dims[0]) {
    fprintf(stderr, "mnist_bench: %s: expected uint8 images [N,28,28] and uint8 labels [N]\n", dir);
    return -1;
  }
  L->n = L->images.dims[0];
  L->batch = batch;
  L->buf = malloc((size_t)(batch * SIDE * SIDE) * sizeof(float));
  return L->buf ? 0 : -1;
fail:
  fprintf(stderr, "mnist_bench: %s\n", alma_last_error());
  return -1;
}

static void loader_close(digits_loader *L) {
  alma_tensor_free_data(&L->images);
  alma_tensor_free_data(&L->labels);
  free(L->buf);
}

/* ---- accuracy: one plain pass over the held-out set ---------------------------------------- */

/* Top-1 accuracy of `conversion` on the whole set (the last, partial batch included), or a
 * negative value when the session cannot be made or run. */
static double top1(const alma_model *m, const char *conversion, digits_loader *L) {
  alma_session *s = NULL;
  alma_session_options o;
  alma_session_options_init(&o);
  if (alma_session_create(m, conversion, &o, &s) != ALMA_OK) {
    fprintf(stderr, "mnist_bench: %s: %s\n", conversion, alma_last_error());
    return -1;
  }
  int64_t correct = 0, seen = 0;
  int drop = L->drop_last;
  L->drop_last = 0;
  loader_reset(L);
  for (;;) {
    alma_tensor in = {0}, out = {0};
    int end = 0;
    loader_next(L, &in, 1, &end);
    if (end) break;
    if (alma_session_run(s, &in, 1, &out, 1) != ALMA_OK) {
      fprintf(stderr, "mnist_bench: %s: %s\n", conversion, alma_last_error());
      seen = -1;
      break;
    }
    if (out.dtype != ALMA_DTYPE_FLOAT32 || out.rank != 2 || out.dims[0] != in.dims[0] || out.dims[1] != CLASSES) {
      fprintf(stderr, "mnist_bench: %s: expected float32 logits [%lld,10]\n", conversion, (long long)in.dims[0]);
      alma_tensor_free_data(&out);
      seen = -1;
      break;
    }
    const float *logits = out.data;
    const uint8_t *labels = (const uint8_t *)L->labels.data + (L->pos - in.dims[0]);
    for (int64_t i = 0; i < in.dims[0]; i++, seen++) {
      int best = 0;
      for (int k = 1; k < CLASSES; k++)
        if (logits[i * CLASSES + k] > logits[i * CLASSES + best]) best = k;
      correct += best == labels[i];
    }
    alma_tensor_free_data(&out);
  }
  L->drop_last = drop;
  alma_session_free(s);
  return seen > 0 ? (double)correct / (double)seen : -1;
}

/* ---- main ----------------------------------------------------------------------------------- */

typedef struct {
  char model[64], conversion[64], status[16];
  double accuracy, throughput, p50;
} row;

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

static void usage(FILE *f) {
  fputs("usage: mnist_bench [-c CONVERSIONS|all] [-b BATCH] [-n SAMPLES] [-t MIN_TIME_S] [-a MIN_ACCURACY]\n"
        "                   [-j JSON_DIR] DATA_DIR MODEL.onnx [MODEL.onnx ...]\n",
        f);
}

int main(int argc, char **argv) {
  const char *conv_arg = "EAGER,FOLD+EAGER", *samples = "320", *min_time = "0.5", *json_dir = NULL;
  int64_t batch = 32;
  double min_acc = 0;
  int opt;
  while ((opt = getopt(argc, argv, "c:b:n:t:a:j:h")) != -1) {
    switch (opt) {
      case 'c': conv_arg = optarg; break;
      case 'b': batch = atoll(optarg); break;
      case 'n': samples = optarg; break;
      case 't': min_time = optarg; break;
      case 'a': min_acc = atof(optarg); break;
      case 'j': json_dir = optarg; break;
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
  }
  if (argc - optind < 2 || batch < 1) {
    usage(stderr);
    return 2;
  }
  const char *data_dir = argv[optind];

  digits_loader L;
  if (loader_open(&L, data_dir, batch) != 0) return 2;
  L.drop_last = 1;
  printf("held-out set: %lld digits from %s, batches of %lld\n\n", (long long)L.n, data_dir, (long long)batch);

  alma_config cfg;
  alma_config_init(&cfg);
  char bs[32];
  snprintf(bs, sizeof bs, "%lld", (long long)batch);
  const char *keys[][2] = {{"batch_size", bs}, {"n_samples", samples}, {"min_time_s", min_time},
                           {"fail_on_error", "false"}};
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
    if (alma_config_set(&cfg, keys[k][0], keys[k][1]) != ALMA_OK) {
      fprintf(stderr, "mnist_bench: %s\n", alma_last_error());
      loader_close(&L);
      return 2;
    }

  /* The loader: alma calls reset() before each conversion (in that conversion's process) and
   * again whenever the set runs out before enough batches were timed. */
  alma_data *data = NULL;
  if (alma_data_from_loader(loader_next, loader_reset, &L, &data) != ALMA_OK) {
    fprintf(stderr, "mnist_bench: %s\n", alma_last_error());
    loader_close(&L);
    return 2;
  }

  char *copy = strdup(conv_arg);
  const char *conv[MAX_CONV];
  int n_conv = 0;
  if (copy && strcmp(conv_arg, "all") != 0)
    for (char *save = NULL, *p = strtok_r(copy, ",", &save); p && n_conv < MAX_CONV; p = strtok_r(NULL, ",", &save))
      conv[n_conv++] = p;

  static row rows[MAX_ROWS];
  int n_rows = 0, rc = 0;
  for (int mi = optind + 1; mi < argc; mi++) {
    const char *path = argv[mi];
    printf("==== %s ====\n", path);
    alma_results *res = NULL;
    alma_status st = alma_benchmark_model(path, &cfg, n_conv ? conv : NULL, n_conv, data, &res);
    if (!res) {
      fprintf(stderr, "mnist_bench: %s: %s: %s\n", path, alma_status_str(st), alma_last_error());
      rc = 1;
      continue;
    }
    alma_results_print(res, stdout, 1);
    if (json_dir) {
      char jp[4096], stem[256];
      snprintf(stem, sizeof stem, "%s", base_name(path));
      char *dot = strrchr(stem, '.');
      if (dot) *dot = 0;
      snprintf(jp, sizeof jp, "%s/%s.json", json_dir, stem);
      if (alma_results_save_json(res, jp, 0) != ALMA_OK) {
        fprintf(stderr, "mnist_bench: %s\n", alma_last_error());
        rc = 1;
      } else {
        printf("results written to %s\n", jp);
      }
    }
    if (alma_results_n_failed(res)) rc = 1;

    /* Accuracy of every conversion that ran, each through its own session. */
    alma_model *m = NULL;
    if (alma_model_load(path, &m) != ALMA_OK) {
      fprintf(stderr, "mnist_bench: %s\n", alma_last_error());
      rc = 1;
    }
    for (int i = 0; i < alma_results_count(res) && n_rows < MAX_ROWS; i++) {
      const alma_result *r = alma_results_get(res, i);
      row *w = &rows[n_rows++];
      snprintf(w->model, sizeof w->model, "%s", base_name(path));
      snprintf(w->conversion, sizeof w->conversion, "%s", alma_result_conversion(r));
      snprintf(w->status, sizeof w->status, "%s", alma_result_status_name(r));
      w->accuracy = -1;
      w->throughput = w->p50 = NAN;
      if (alma_result_status_code(r) != ALMA_RESULT_OK) continue;
      w->throughput = alma_result_throughput(r);
      w->p50 = alma_result_latency(r)->p50;
      if (m) w->accuracy = top1(m, w->conversion, &L);
      if (w->accuracy < 0 || w->accuracy < min_acc) rc = 1;
    }
    alma_model_free(m);
    alma_results_free(res);
    printf("\n");
  }

  printf("%-24s %-20s %-12s %9s %12s %10s\n", "model", "conversion", "status", "top-1", "samples/s", "p50 ms");
  for (int i = 0; i < n_rows; i++) {
    const row *w = &rows[i];
    char acc[16] = "-", tp[24] = "-", p50[24] = "-";
    if (w->accuracy >= 0) snprintf(acc, sizeof acc, "%.2f%%", 100 * w->accuracy);
    if (isfinite(w->throughput)) snprintf(tp, sizeof tp, "%.1f", w->throughput);
    if (isfinite(w->p50)) snprintf(p50, sizeof p50, "%.4f", w->p50);
    printf("%-24s %-20s %-12s %9s %12s %10s\n", w->model, w->conversion, w->status, acc, tp, p50);
  }
  if (min_acc > 0) printf("required top-1: %.2f%%\n", 100 * min_acc);

  alma_data_free(data);
  loader_close(&L);
  free(copy);
  return rc;
}
