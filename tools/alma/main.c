/* alma CLI entry point: dispatches `alma <command> ...`. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "core/core.h"

/* Weak: a command whose file is not in this build reports that instead of failing to link. */
#pragma weak alma_cmd_bench
#pragma weak alma_cmd_run
#pragma weak alma_cmd_info
#pragma weak alma_cmd_list
#pragma weak alma_cmd_cache
#pragma weak alma_cmd_version
#pragma weak alma_cmd_compare
#pragma weak alma_cmd_report
#pragma weak alma_cmd_sweep
#pragma weak alma_cmd_merge

static const struct {
  const char *name;
  int (*fn)(int, char **);
  const char *help;
} commands[] = {
    {"bench", alma_cmd_bench, "benchmark a model across conversion options"},
    {"run", alma_cmd_run, "run one inference and write outputs as .npy"},
    {"info", alma_cmd_info, "describe a model: inputs, outputs, ops, parameters, FLOPs, hash"},
    {"list", alma_cmd_list, "list conversion options and their availability here"},
    {"compare", alma_cmd_compare, "compare results files: ratio of medians with its CI, a regression gate"},
    {"report", alma_cmd_report, "results files as the HTML report (charts, sortable table) or text"},
    {"sweep", alma_cmd_sweep, "models x conversions as a Slurm job array (or here, one task after another)"},
    {"merge", alma_cmd_merge, "gather a sweep's task results into one result file"},
    {"cache", alma_cmd_cache, "inspect and clean the build cache"},
    {"version", alma_cmd_version, "print versions of alma and its libraries"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
  fprintf(f, "usage: alma <command> [options]\n\ncommands:\n");
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (commands[i].fn) fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
  fprintf(f, "\n`alma <command> --help` describes a command. Environment: ALMA_LOG=error|warn|info|debug.\n");
}

int alma_cli_fail(alma_status st, const char *context) {
  const char *detail = alma_last_error();
  fprintf(stderr, "alma: error: %s%s%s\n", context ? context : "", context ? ": " : "",
          detail && detail[0] ? detail : alma_status_str(st));
  switch (st) {
    case ALMA_ERR_INVALID_ARG: return ALMA_EXIT_USAGE;
    case ALMA_ERR_IO: case ALMA_ERR_PARSE: case ALMA_ERR_INVALID_MODEL: case ALMA_ERR_UNSUPPORTED:
    case ALMA_ERR_SHAPE: case ALMA_ERR_TYPE: case ALMA_ERR_NOT_FOUND:
      return ALMA_EXIT_INPUT;
    default: return ALMA_EXIT_FAILED;
  }
}

int main(int argc, char **argv) {
  (void)alma__log_level();  /* reads ALMA_LOG now, so that a bad value is reported whatever runs */
  if (argc < 2) {
    usage(stderr);
    return ALMA_EXIT_USAGE;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return ALMA_EXIT_OK;
  }
  if (!strcmp(argv[1], "--version")) argv[1] = "version";
  for (size_t i = 0; i < N_COMMANDS; i++) {
    if (strcmp(argv[1], commands[i].name)) continue;
    if (!commands[i].fn) {
      fprintf(stderr, "alma: error: command '%s' is not part of this build\n", argv[1]);
      return ALMA_EXIT_USAGE;
    }
    return commands[i].fn(argc - 1, argv + 1);
  }
  fprintf(stderr, "alma: error: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return ALMA_EXIT_USAGE;
}
