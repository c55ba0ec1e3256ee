/* The alma command line: one file per subcommand (cmd_<name>.c), dispatched from main.c. Each
 * returns the process exit code (see docs/cli.md): 0 ok, 1 some conversion/inference failed,
 * 2 usage error, 3 model or data error (bad file, unsupported op, wrong shape). */
#ifndef ALMA_CLI_H
#define ALMA_CLI_H

#include "alma/alma.h"

enum { ALMA_EXIT_OK = 0, ALMA_EXIT_FAILED = 1, ALMA_EXIT_USAGE = 2, ALMA_EXIT_INPUT = 3 };

int alma_cmd_bench(int argc, char **argv);
int alma_cmd_run(int argc, char **argv);
int alma_cmd_info(int argc, char **argv);
int alma_cmd_list(int argc, char **argv);
int alma_cmd_cache(int argc, char **argv);
int alma_cmd_version(int argc, char **argv);
int alma_cmd_compare(int argc, char **argv);
int alma_cmd_report(int argc, char **argv);
int alma_cmd_sweep(int argc, char **argv);
int alma_cmd_merge(int argc, char **argv);

/* Failed rows of a result set, a failed throughput configuration or server scenario counted as
 * its row's failure (cmd_bench.c). */
int alma_cli_failures(const alma_results *res);

/* Model suites (suite.c): 1 when path is a directory (its *.onnx files, by name) or a list file
 * (*.txt, *.list: a path a line, relative to the list's directory), with the models in
 * *models_out; 0 when it is neither (a model file); -1 with the error set when it is unusable. */
int alma_cli_suite_models(const char *path, char ***models_out, int *n_out);
void alma_cli_suite_free(char **models, int n);
typedef struct alma_cli_suite_out {
  const char *json, *csv;
  int raw, quiet, verbose, to_stdout;
} alma_cli_suite_out;
/* Benchmarks each model in turn (random data), prints each model's report and then the suite's
 * table, and writes the one result set. Returns the exit code. */
int alma_cli_bench_suite(const char *label, char **models, int n_models, const alma_config *cfg,
                         const char *const *convs, int n_conv, const alma_cli_suite_out *out);

/* The table of a set of several models (suite.c): a row per model x conversion x batch size, and
 * machine when rows ran on several. */
void alma_cli_print_suite(const alma_results *all, FILE *f);
/* `alma sweep --task DIR N` (cmd_sweep.c): runs task N of the sweep in DIR. Returns the exit code. */
int alma_cli_sweep_task(const char *dir, const char *index);

/* "alma: error: <status name>: <detail>" on stderr; returns the exit code for the status. */
int alma_cli_fail(alma_status st, const char *context);

#endif
