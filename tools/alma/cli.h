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

/* "alma: error: <status name>: <detail>" on stderr; returns the exit code for the status. */
int alma_cli_fail(alma_status st, const char *context);

#endif
