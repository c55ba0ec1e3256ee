/* `alma report RESULTS.json... [-o FILE.html]`: saved results (alma bench --json) as the HTML
 * report (docs/report.md), one section per file; without -o, the text report of each. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "cli.h"
#include "report/report.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: alma report RESULTS.json... [-o FILE.html] [--title TEXT]\n\n"
          "Reads results files written by alma bench --json (--raw adds the latency boxes) and writes\n"
          "the HTML report: one self-contained page (no network access, charts drawn inline) with a\n"
          "section per file. Without -o, prints each file's text report instead.\n\n"
          "  -o, --output FILE  the HTML page; - for standard output\n"
          "      --title TEXT   the page title (default: alma bench: <model file name>)\n\n"
          "Exit status: 0 written, 2 usage error, 3 a file that cannot be read or is no results file,\n"
          "1 the page could not be written.\n");
}

int alma_cmd_report(int argc, char **argv) {
  static const struct option opts[] = {{"output", required_argument, 0, 'o'},
                                       {"title", required_argument, 0, 't'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *out = NULL, *title = NULL;
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
    switch (c) {
      case 'o': out = optarg; break;
      case 't': title = optarg; break;
      case 'h': usage(stdout); return ALMA_EXIT_OK;
      case ':':
        fprintf(stderr, "alma report: error: option '%s' needs a value\n", argv[optind - 1]);
        return ALMA_EXIT_USAGE;
      default:
        fprintf(stderr, "alma report: error: unknown option '%s'\n\n", argv[optind - 1]);
        usage(stderr);
        return ALMA_EXIT_USAGE;
    }
  }
  int n = argc - optind;
  if (n < 1) {
    fprintf(stderr, "alma report: error: give at least one results file (alma bench --json)\n\n");
    usage(stderr);
    return ALMA_EXIT_USAGE;
  }
  alma_results **rs = calloc((size_t)n, sizeof *rs);
  if (!rs) return alma_cli_fail(ALMA_ERR_NOMEM, "report");
  int rc = ALMA_EXIT_OK;
  for (int i = 0; i < n && rc == ALMA_EXIT_OK; i++) {
    alma_status st = alma_results_load_json(argv[optind + i], &rs[i]);
    if (st != ALMA_OK) {
      fprintf(stderr, "alma report: error: %s: %s\n", argv[optind + i], alma_last_error());
      rc = ALMA_EXIT_INPUT;
    }
  }
  if (rc == ALMA_EXIT_OK && out) {
    if (alma__html_write(out, (const alma_results *const *)rs, (const char *const *)(argv + optind), n, NULL, title) !=
        ALMA_OK)
      rc = alma_cli_fail(ALMA_ERR_IO, "report");
  } else if (rc == ALMA_EXIT_OK) {
    for (int i = 0; i < n; i++) {
      if (n > 1) printf("%s== %s\n", i ? "\n" : "", argv[optind + i]);
      alma_results_print(rs[i], stdout, 0);
    }
  }
  for (int i = 0; i < n; i++) alma_results_free(rs[i]);
  free(rs);
  return rc;
}
