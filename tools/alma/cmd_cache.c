/* `alma cache ...`: inspect and clean the build cache (docs/cache.md). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "cli.h"

static void cache_usage(FILE *f) {
  fprintf(f,
          "usage: alma cache [--cache-dir DIR] COMMAND\n\n"
          "The build cache keeps each conversion's converted graph (passes applied, int8 calibration\n"
          "included) with a state file, its log and the benchmarks that used it.\n\n"
          "commands\n"
          "  list                     one line per build: status, conversion, when, size, benchmarks\n"
          "  print BUILD              a build's state, key parts and benchmarks\n"
          "  delete BUILD...          remove builds (names or unique prefixes)\n"
          "  delete --all             remove every build\n"
          "  clean                    remove stored graphs (states, logs and benchmark records stay),\n"
          "                           temporary files of dead processes and unreadable entries\n"
          "  report [-o FILE.csv]     CSV, one row per build and benchmark (standard output by default)\n"
          "options\n"
          "      --cache-dir DIR      the cache (default $ALMA_CACHE_DIR, else ~/.cache/alma)\n"
          "  -h, --help               this help\n\n"
          "Exit status: 0 done, 2 usage error, 3 unknown build or unreadable cache.\n");
}

static int usage_error(const char *msg, const char *arg) {
  fputs("alma cache: ", stderr);
  fprintf(stderr, msg, arg);
  fputs(" (see alma cache --help)\n", stderr);
  return ALMA_EXIT_USAGE;
}

static const char *jstr(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int cmd_list(alma__cache *c) {
  alma__cache_entry *e;
  int n;
  alma_status st = alma__cache_list(c, &e, &n);
  if (st != ALMA_OK) return alma_cli_fail(st, "cache list");
  printf("cache %s: %d build%s\n", alma__cache_dir(c), n, n == 1 ? "" : "s");
  if (n) printf("%-48s  %-8s  %-20s  %9s  %11s  %s\n", "build", "status", "built", "build s", "graph", "benchmarks");
  for (int i = 0; i < n; i++) {
    const cJSON *s = e[i].state;
    const char *status = s ? jstr(s, "status") : "corrupt";
    const cJSON *bs = s ? cJSON_GetObjectItemCaseSensitive(s, "build_s") : NULL;
    const cJSON *g = s ? cJSON_GetObjectItemCaseSensitive(s, "graph") : NULL;
    char graph[32], bss[32];
    if (cJSON_IsObject(g) && e[i].has_graph)
      snprintf(graph, sizeof graph, "%.1f KiB", cJSON_GetObjectItemCaseSensitive(g, "bytes")->valuedouble / 1024);
    else snprintf(graph, sizeof graph, "%s", cJSON_IsObject(g) ? "missing" : "none");
    if (cJSON_IsNumber(bs)) snprintf(bss, sizeof bss, "%.3f", bs->valuedouble);
    else snprintf(bss, sizeof bss, "-");
    printf("%-48s  %-8s  %-20s  %9s  %11s  %d\n", e[i].name, status ? status : "?",
           s && jstr(s, "built_at") ? jstr(s, "built_at") : "-", bss, graph, e[i].n_bench);
    if (!s) printf("    %s\n", e[i].problem);
    else if (jstr(s, "error")) printf("    %s\n", jstr(s, "error"));
  }
  alma__cache_entries_free(e, n);
  return ALMA_EXIT_OK;
}

int alma_cmd_cache(int argc, char **argv) {
  static const struct option opts[] = {
      {"cache-dir", required_argument, 0, 'd'}, {"all", no_argument, 0, 'a'}, {"output", required_argument, 0, 'o'},
      {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
  const char *dir = NULL, *output = NULL;
  int all = 0, c;
  optind = 1;
  opterr = 0;
  /* Options may come before or after the command word (GNU getopt permutes). */
  while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
    switch (c) {
      case 'd': dir = optarg; break;
      case 'a': all = 1; break;
      case 'o': output = optarg; break;
      case 'h': cache_usage(stdout); return ALMA_EXIT_OK;
      case ':': return usage_error("option '%s' needs a value", argv[optind - 1]);
      default: return usage_error("unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind >= argc) {
    fputs("alma cache: a command is required\n\n", stderr);
    cache_usage(stderr);
    return ALMA_EXIT_USAGE;
  }
  const char *cmd = argv[optind++];
  int nargs = argc - optind;
  char **args = argv + optind;
  int known = !strcmp(cmd, "list") || !strcmp(cmd, "print") || !strcmp(cmd, "delete") || !strcmp(cmd, "clean") ||
              !strcmp(cmd, "report");
  if (!known) return usage_error("unknown command '%s'", cmd);
  if (all && strcmp(cmd, "delete")) return usage_error("--all goes with delete, not %s", cmd);
  if (output && strcmp(cmd, "report")) return usage_error("-o goes with report, not %s", cmd);
  if ((!strcmp(cmd, "list") || !strcmp(cmd, "clean") || !strcmp(cmd, "report")) && nargs)
    return usage_error("unexpected argument '%s'", args[0]);
  if (!strcmp(cmd, "print") && nargs != 1) return usage_error("%s", "print takes one build name");
  if (!strcmp(cmd, "delete") && !all && !nargs) return usage_error("%s", "delete takes build names, or --all");
  if (!strcmp(cmd, "delete") && all && nargs) return usage_error("%s", "delete --all takes no build names");

  alma__cache *cache;
  alma_status st = alma__cache_open(dir, &cache);
  if (st != ALMA_OK) return alma_cli_fail(st, "cache");
  int code = ALMA_EXIT_OK;
  if (!strcmp(cmd, "list")) {
    code = cmd_list(cache);
  } else if (!strcmp(cmd, "print")) {
    if ((st = alma__cache_print(cache, args[0], stdout)) != ALMA_OK) code = alma_cli_fail(st, "cache print");
  } else if (!strcmp(cmd, "delete") && all) {
    int n;
    if ((st = alma__cache_delete_all(cache, &n)) != ALMA_OK) code = alma_cli_fail(st, "cache delete");
    else printf("deleted %d build%s\n", n, n == 1 ? "" : "s");
  } else if (!strcmp(cmd, "delete")) {
    /* Every name is resolved first: a typo deletes nothing. */
    char (*full)[256] = calloc((size_t)nargs, sizeof *full);
    if (!full) {
      alma__cache_close(cache);
      return alma_cli_fail(ALMA_ERR_NOMEM, "cache delete");
    }
    for (int i = 0; i < nargs && code == ALMA_EXIT_OK; i++)
      if ((st = alma__cache_find(cache, args[i], full[i], sizeof full[i])) != ALMA_OK) code = alma_cli_fail(st, "cache delete");
    for (int i = 0; i < nargs && code == ALMA_EXIT_OK; i++) {
      if ((st = alma__cache_delete(cache, full[i])) != ALMA_OK) code = alma_cli_fail(st, "cache delete");
      else printf("deleted %s\n", full[i]);
    }
    free(full);
  } else if (!strcmp(cmd, "clean")) {
    int g, t, k;
    if ((st = alma__cache_clean(cache, &g, &t, &k)) != ALMA_OK) code = alma_cli_fail(st, "cache clean");
    else printf("removed %d graph file%s, %d temporary file%s, %d unreadable entr%s\n", g, g == 1 ? "" : "s", t,
                t == 1 ? "" : "s", k, k == 1 ? "y" : "ies");
  } else {
    FILE *f = output && strcmp(output, "-") ? fopen(output, "w") : stdout;
    if (!f) {
      fprintf(stderr, "alma: error: cache report: cannot write '%s': %s\n", output, strerror(errno));
      code = ALMA_EXIT_INPUT;
    } else {
      if ((st = alma__cache_report_csv(cache, f)) != ALMA_OK) code = alma_cli_fail(st, "cache report");
      if (f != stdout && fclose(f) != 0 && code == ALMA_EXIT_OK) code = alma_cli_fail(ALMA_ERR_IO, "cache report");
      else if (f == stdout) fflush(stdout);
    }
  }
  alma__cache_close(cache);
  return code;
}
