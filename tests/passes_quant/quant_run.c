/* quant_run: one conversion of a model, for the quantization tests' Python driver.
 *
 *   quant_run MODEL CONVERSION OUTDIR [-c CALIB.npy] [-n BATCHES] [-b BATCH] [-k CALIBRATOR]
 *             [-i INPUT.npy] [-s] [-t SECONDS] [-j THREADS] [-O RUNTIME_OPTIONS]
 *
 * Calibration data (-c, one-input models): a .npy of samples stacked on axis 0, cut into -n
 * batches of -b samples (default 8 x 8). -i runs the model on INPUT.npy and writes
 * OUTDIR/output_<k>.npy; -s saves the converted model as OUTDIR/model.onnx; -t times repeated runs
 * on the input for that many seconds and prints "convert_s=... ms_per_batch=... best_ms=...
 * cpu_ms_per_batch=..." (process CPU time per run, steadier than wall time on a shared machine).
 * -j sets the session's threads (default 0: the physical cores); -O the runtime options
 * ("dnnl.int8=fallback", as alma bench --runtime-option). */
#include <getopt.h>

#include "core/core.h"

#include <time.h>

static double now(void) { return alma__now_s(); }
/* CPU time of this process: under contention from other jobs it moves much less than wall time
 * (EAGER is single-threaded). */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  const char *calib = NULL, *calibrator = NULL, *input = NULL, *rt_options = NULL;
  int nb = 8, bs = 8, save = 0, threads = 0, opt;
  double tsec = 0;
  while ((opt = getopt(argc, argv, "c:n:b:k:i:st:j:O:")) != -1) {
    switch (opt) {
      case 'c': calib = optarg; break;
      case 'n': nb = atoi(optarg); break;
      case 'b': bs = atoi(optarg); break;
      case 'k': calibrator = optarg; break;
      case 'i': input = optarg; break;
      case 's': save = 1; break;
      case 't': tsec = atof(optarg); break;
      case 'j': threads = atoi(optarg); break;
      case 'O': rt_options = optarg; break;
      default: fprintf(stderr, "bad option\n"); return 2;
    }
  }
  if (argc - optind != 3) {
    fprintf(stderr, "usage: quant_run MODEL CONVERSION OUTDIR [-c CALIB.npy -n N -b B -k CAL] [-i IN.npy] [-s] [-t S] [-j T]\n");
    return 2;
  }
  const char *model_path = argv[optind], *conv = argv[optind + 1], *outdir = argv[optind + 2];
  alma_model *m = NULL;
  alma_session *s = NULL;
  alma_tensor cal = {0}, x = {0};
  alma_tensor *batches = NULL;
  alma_status st = alma_model_load(model_path, &m);
  if (st != ALMA_OK) goto fail;
  alma_session_options so;
  alma_session_options_init(&so);
  so.verbose = getenv("QUANT_VERBOSE") != NULL;
  so.calibrator = calibrator;
  so.threads = threads;
  so.runtime_options = rt_options;
  if (calib) {
    if ((st = alma_npy_load(calib, &cal)) != ALMA_OK) goto fail;
    int64_t per = alma_tensor_numel(&cal) / (cal.dims[0] ? cal.dims[0] : 1);
    if ((int64_t)nb * bs > cal.dims[0]) nb = (int)(cal.dims[0] / bs);
    batches = calloc((size_t)nb + 1, sizeof *batches);
    for (int b = 0; b < nb; b++) {
      batches[b] = cal;
      batches[b].owns_data = 0;
      batches[b].dims[0] = bs;
      batches[b].data = (char *)cal.data + (size_t)b * (size_t)bs * (size_t)per * alma_dtype_size(cal.dtype);
      batches[b].nbytes = (size_t)bs * (size_t)per * alma_dtype_size(cal.dtype);
    }
    so.calibration_data = batches;
    so.n_calibration_batches = nb;
  }
  double t0 = now();
  if ((st = alma_session_create(m, conv, &so, &s)) != ALMA_OK) goto fail;
  double convert_s = now() - t0;
  char path[4096];
  if (save) {
    snprintf(path, sizeof path, "%s/model.onnx", outdir);
    if ((st = alma_session_save(s, path)) != ALMA_OK) goto fail;
  }
  if (input) {
    if ((st = alma_npy_load(input, &x)) != ALMA_OK) goto fail;
    int no = alma_model_num_outputs(m);
    alma_tensor outs[256];
    if (no > 256) {
      st = ALMA_ERR_UNSUPPORTED;
      goto fail;
    }
    if ((st = alma_session_run(s, &x, 1, outs, no)) != ALMA_OK) goto fail;
    for (int k = 0; k < no; k++) {
      snprintf(path, sizeof path, "%s/output_%d.npy", outdir, k);
      st = alma_npy_save(path, &outs[k]);
      alma_tensor_free_data(&outs[k]);
      if (st != ALMA_OK) goto fail;
    }
    if (tsec > 0) {
      int runs = 0;
      double t1 = now(), c1 = cpu_now(), best = 1e30;
      while (now() - t1 < tsec || runs < 3) {
        double a = now();
        if ((st = alma_session_run(s, &x, 1, outs, no)) != ALMA_OK) goto fail;
        double el = now() - a;
        if (el < best) best = el;
        for (int k = 0; k < no; k++) alma_tensor_free_data(&outs[k]);
        runs++;
      }
      printf("convert_s=%.4f ms_per_batch=%.3f best_ms=%.3f cpu_ms_per_batch=%.3f runs=%d\n", convert_s,
             1e3 * (now() - t1) / runs, 1e3 * best, 1e3 * (cpu_now() - c1) / runs, runs);
    }
  }
  if (!tsec) printf("convert_s=%.4f\n", convert_s);
  alma_session_free(s);
  alma_model_free(m);
  alma_tensor_free_data(&cal);
  alma_tensor_free_data(&x);
  free(batches);
  return 0;
fail:
  fprintf(stderr, "quant_run %s %s: %s: %s\n", model_path, conv, alma_status_name(st), alma_last_error());
  alma_session_free(s);
  alma_model_free(m);
  alma_tensor_free_data(&cal);
  alma_tensor_free_data(&x);
  free(batches);
  return st == ALMA_ERR_UNAVAILABLE ? 3 : 1;
}
