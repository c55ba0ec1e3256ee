/* `alma list [CHAIN...]`: the conversion presets with their availability here, the passes and
 * runtimes chains are built from; with arguments, checks each given ID, name or chain. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "conversions/conversions.h"

static void list_usage(FILE *f) {
  fprintf(f,
          "usage: alma list [CONVERSION...]\n"
          "       alma list --options\n\n"
          "Without arguments: every preset conversion (ID, name, whether it can run on this machine\n"
          "and why not, description), then the passes and runtimes any chain STEP+...+RUNTIME may use.\n"
          "With arguments (IDs, names or chains): parses each and says whether it can run here.\n\n"
          "  --options    every runtime's settings (alma bench --runtime-option RUNTIME.NAME=VALUE):\n"
          "               kind, default and what each changes\n"
          "  -h, --help   this help\n\n"
          "Exit status: 0 ok, 1 some given conversion is unavailable, 2 unknown conversion.\n");
}

/* "yes" or "no: <reason>" into buf. Runtimes are initialized here: fine, `list` forks nothing. */
static int availability(const alma_conversion *c, char *buf, size_t n) {
  alma_status st = alma__conversion_available(c);
  if (st == ALMA_OK) {
    snprintf(buf, n, "yes");
    return 1;
  }
  snprintf(buf, n, "no: %s", alma_last_error()[0] ? alma_last_error() : alma_status_str(st));
  return 0;
}

/* Each option table once, under the runtimes sharing it. */
static int print_options(void) {
  for (int i = 0; i < alma__runtime_count(); i++) {
    const alma_runtime *rt = alma__runtime_at(i);
    int first = 1;
    for (int k = 0; k < i && first; k++) first = alma__runtime_at(k)->options != rt->options;
    if (!rt->n_options || !first) continue;
    printf("%s (runtime", rt->option_prefix);
    for (int k = i, n = 0; k < alma__runtime_count(); k++)
      if (alma__runtime_at(k)->options == rt->options) printf("%s %s", n++ ? "," : "", alma__runtime_at(k)->name);
    printf("): --runtime-option %s.NAME=VALUE\n", rt->option_prefix);
    for (int k = 0; k < rt->n_options; k++) {
      const alma__rt_option *o = &rt->options[k];
      char kind[64];
      if (o->kind == ALMA__OPT_BOOL) snprintf(kind, sizeof kind, "on|off");
      else if (o->kind == ALMA__OPT_INT) snprintf(kind, sizeof kind, "%lld..%lld", o->lo, o->hi);
      else snprintf(kind, sizeof kind, "%s", o->choices);
      printf("  %-16s %s, default %s\n  %-16s %s\n", o->name, kind, o->def, "", o->doc);
    }
  }
  return ALMA_EXIT_OK;
}

int alma_cmd_list(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {"options", no_argument, 0, 'o'}, {0, 0, 0, 0}};
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (c == 'h') {
      list_usage(stdout);
      return ALMA_EXIT_OK;
    }
    if (c == 'o') return print_options();
    fprintf(stderr, "alma list: unknown option '%s' (see alma list --help)\n", argv[optind - 1]);
    return ALMA_EXIT_USAGE;
  }
  char avail[512];
  if (optind < argc) {
    int code = ALMA_EXIT_OK;
    for (int i = optind; i < argc; i++) {
      alma_conversion conv;
      alma_status st = alma__conversion_parse(argv[i], &conv);
      if (st != ALMA_OK) {
        fprintf(stderr, "alma list: %s\n", alma_last_error());
        code = ALMA_EXIT_USAGE;
        continue;
      }
      int ok = availability(&conv, avail, sizeof avail);
      char id[16] = "-";
      if (conv.id >= 0) snprintf(id, sizeof id, "%d", conv.id);
      printf("%-24s id %-4s passes %d, runtime %-10s available: %s\n", conv.name, id, conv.n_passes,
             conv.runtime->name, avail);
      if (!ok && code == ALMA_EXIT_OK) code = ALMA_EXIT_FAILED;
    }
    return code;
  }

  int width = 10;
  for (int i = 0; i < alma__preset_count(); i++) {
    int w = (int)strlen(alma__preset_at(i)->name);
    if (w > width) width = w;
  }
  printf("%3s  %-*s  %-9s  %s\n", "ID", width, "CONVERSION", "AVAILABLE", "DESCRIPTION");
  for (int i = 0; i < alma__preset_count(); i++) {
    const alma_preset *p = alma__preset_at(i);
    alma_conversion conv;
    int ok = 0;
    if (alma__conversion_parse(p->name, &conv) == ALMA_OK) ok = availability(&conv, avail, sizeof avail);
    else snprintf(avail, sizeof avail, "no: %s", alma_last_error());
    printf("%3d  %-*s  %-9s  %s\n", p->id, width, p->name, ok ? "yes" : "no", p->description);
    if (p->requires) printf("%3s  %-*s  %-9s  requires %s\n", "", width, "", "", p->requires);
    if (!ok) printf("%3s  %-*s  %-9s  why not: %s\n", "", width, "", "", avail + 4);
  }
  printf("\npasses (steps of a chain, applied left to right):\n");
  for (int i = 0; i < alma__pass_count(); i++)
    printf("  %-12s %s\n", alma__pass_at(i)->name, alma__pass_at(i)->description ? alma__pass_at(i)->description : "");
  printf("\nruntimes (the last step of a chain):\n");
  for (int i = 0; i < alma__runtime_count(); i++) {
    const alma_runtime *rt = alma__runtime_at(i);
    alma_status st = rt->init ? rt->init() : ALMA_OK;
    printf("  %-12s %s%s%s\n", rt->name, rt->description ? rt->description : "", st == ALMA_OK ? "" : " -- unavailable: ",
           st == ALMA_OK ? "" : alma_last_error());
  }
  printf("\nAny chain STEP+...+RUNTIME of these is accepted by name (e.g. FOLD+EAGER); presets also by ID.\n");
  return ALMA_EXIT_OK;
}
