/* The ONNX writer over a corpus: every model under DIR/<case>/model.onnx that alma loads is
 * written back (alma__onnx_serialize), read again, and must hash the same (alma_model_hash covers
 * the structure, attributes, subgraphs and weights, not names). With -r, both are also run on the
 * case's test_data_set_0 inputs and their outputs must be identical.
 *
 *   save_roundtrip [-r] DIR          exit 1 when any model differs */
#include <dirent.h>
#include <unistd.h>

#include "graph/model.h"

/* Bit-identical outputs; sequences and optionals (core.h's containers) element by element. */
static int same_value(const alma_tensor *x, const alma_tensor *y) {
  if (alma__dtype_is_container(x->dtype) || alma__dtype_is_container(y->dtype)) {
    const alma__seq *p = alma__container(x), *q = alma__container(y);
    if (x->dtype != y->dtype || p->n != q->n) return 0;
    for (int i = 0; i < p->n; i++)
      if (!same_value(&p->items[i], &q->items[i])) return 0;
    return 1;
  }
  return x->dtype == y->dtype && alma__same_shape(x, y) && x->nbytes == y->nbytes &&
         !(x->nbytes && memcmp(x->data, y->data, x->nbytes));
}

static int run_case(const alma_model *a, const alma_model *b, const char *dir) {
  int ni = alma_model_num_inputs(a), no = alma_model_num_outputs(a);
  if (ni > 64 || no > 64) return 0;
  alma_tensor in[64], oa[64], ob[64];
  int nl = 0, same = 1;
  for (; nl < ni; nl++) {
    char p[4200];
    snprintf(p, sizeof p, "%s/test_data_set_0/input_%d.pb", dir, nl);
    if (alma__onnx_load_tensor_file(p, &in[nl], NULL) != ALMA_OK) break;
  }
  alma_session *sa = NULL, *sb = NULL;
  if (nl == ni && alma_session_create(a, "EAGER", NULL, &sa) == ALMA_OK &&
      alma_session_create(b, "EAGER", NULL, &sb) == ALMA_OK && alma_session_run(sa, in, ni, oa, no) == ALMA_OK) {
    if (alma_session_run(sb, in, ni, ob, no) != ALMA_OK) {
      same = 0;
    } else {
      for (int k = 0; k < no; k++) {
        if (!same_value(&oa[k], &ob[k])) same = 0;
        alma_tensor_free_data(&ob[k]);
      }
    }
    for (int k = 0; k < no; k++) alma_tensor_free_data(&oa[k]);
  }
  alma_session_free(sa);
  alma_session_free(sb);
  for (int k = 0; k < nl; k++) alma_tensor_free_data(&in[k]);
  return same;
}

int main(int argc, char **argv) {
  int do_run = 0, opt;
  while ((opt = getopt(argc, argv, "r")) != -1) do_run = opt == 'r' ? 1 : do_run;
  if (optind >= argc) {
    fprintf(stderr, "usage: save_roundtrip [-r] DIR\n");
    return 2;
  }
  const char *root = argv[optind];
  DIR *d = opendir(root);
  if (!d) {
    fprintf(stderr, "save_roundtrip: cannot open %s\n", root);
    return 2;
  }
  int loaded = 0, ok = 0, bad = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/%s", root, e->d_name);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    alma_model *m = NULL, *m2 = NULL;
    if (access(path, R_OK) || alma_model_load(path, &m) != ALMA_OK) continue; /* not alma's to write */
    loaded++;
    uint8_t *bytes = NULL;
    size_t n = 0;
    alma_status st = alma__onnx_serialize(m->graph, &m->meta, &bytes, &n);
    if (st == ALMA_OK) st = alma_model_load_from_memory(bytes, n, dir, &m2);
    const char *why = st != ALMA_OK ? alma_last_error() : strcmp(alma_model_hash(m), alma_model_hash(m2)) ? "hash differs" : NULL;
    if (!why && do_run && !run_case(m, m2, dir)) why = "outputs differ";
    if (why) {
      printf("FAIL %s: %s\n", e->d_name, why);
      bad++;
    } else {
      ok++;
    }
    free(bytes);
    alma_model_free(m);
    alma_model_free(m2);
  }
  closedir(d);
  printf("save_roundtrip: %d models loaded, %d written and read back identical, %d differ\n", loaded, ok, bad);
  return bad ? 1 : 0;
}
