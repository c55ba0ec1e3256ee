/* `alma version`: alma and its libraries, the compiler and flags, the runtimes built in. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "runtimes/runtime.h"
#ifdef ALMA_HAVE_BLAS
#include "runtimes/blas/blas.h"
#endif
#ifdef ALMA_HAVE_ORT
#include "runtimes/ort/ort.h"
#endif
#ifdef ALMA_HAVE_OPENVINO
#include "runtimes/openvino/openvino.h"
#endif

int alma_cmd_version(int argc, char **argv) {
  static const struct option opts[] = {{"verbose", no_argument, 0, 'v'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  int verbose = 0, c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
    if (c == 'v') {
      verbose = 1;
    } else if (c == 'h') {
      printf("usage: alma version [-v]\n\nPrints the versions of alma and its libraries, the compiler and build\n"
             "flags, and the runtimes built in with their availability. -v adds this machine's description.\n");
      return ALMA_EXIT_OK;
    } else {
      fprintf(stderr, "alma version: unknown option '%s'\n", argv[optind - 1]);
      return ALMA_EXIT_USAGE;
    }
  }
  alma_system_info s;
  alma_system_info_get(&s);
  printf("alma %s (build %s)\n", alma_version(), alma_build_id());
  printf("  protobuf-c   %s\n", s.protobuf_c_version);
  printf("  cJSON        %s\n", s.cjson_version);
  printf("  OpenSSL      %s\n", s.openssl_version);
  printf("  glibc        %s\n", s.libc_version);
  printf("  compiler     %s\n", s.compiler);
  printf("  build flags  %s\n", s.build_flags[0] ? s.build_flags : "(none)");
  printf("  max opset    %d\n", ALMA_MAX_KNOWN_OPSET);
  printf("runtimes:\n");
  for (int i = 0; i < alma__runtime_count(); i++) {
    const alma_runtime *rt = alma__runtime_at(i);
    alma_status st = rt->init ? rt->init() : ALMA_OK;
    printf("  %-12s %s%s\n", rt->name, st == ALMA_OK ? "available" : "unavailable: ", st == ALMA_OK ? "" : alma_last_error());
  }
#ifdef ALMA_HAVE_BLAS
  {
    char blas[512];
    int rc = alma__blas_version(blas, sizeof blas);
    printf("  BLAS library %s%s\n", rc == 0 ? "" : "unavailable: ", blas);
  }
#endif
#ifdef ALMA_HAVE_OPENVINO
  {
    /* this process forks nothing after: starting OpenVINO's CPU plugin here to name the device is safe */
    const char *v = alma__openvino_version(), *dev = v ? alma__openvino_device_name() : NULL;
    if (v) printf("  OpenVINO     %s, CPU device: %s\n", v, dev ? dev : alma_last_error());
    else printf("  OpenVINO     unavailable: %s\n", alma_last_error());
  }
#endif
#ifdef ALMA_HAVE_ORT
  {
    char ort[1536];
    int rc = alma__ort_version(ort, sizeof ort);
    printf("  ORT library  %s%s\n", rc == 0 ? "" : "unavailable: ", ort);
  }
#endif
  if (verbose) {
    printf("machine:\n");
    printf("  cpu          %s (%d cores, %d logical, %d socket%s)\n", s.cpu_model, s.physical_cores, s.logical_cores,
           s.sockets, s.sockets == 1 ? "" : "s");
    printf("  isa          %s\n", s.isa);
    printf("  memory       %.1f GiB\n", (double)s.memory_bytes / (1 << 30));
    printf("  os           %s\n", s.os);
    printf("  kernel       %s (%s)\n", s.kernel, s.machine);
    printf("  governor     %s\n", s.governor);
  }
  return ALMA_EXIT_OK;
}
