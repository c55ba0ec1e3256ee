/* Replays inputs through the fuzz target without libFuzzer: `fuzz_replay PATH...` where each PATH is
 * a file or a directory of files. A crash or a sanitizer report (in sanitizer builds) is the failure
 * this exists to catch; it also exits non-zero if a file cannot be read or if an input pushes the
 * peak RSS past libFuzzer's -rss_limit_mb of the fuzz test (2048 MiB; ALMA_REPLAY_RSS_MB overrides),
 * so out-of-memory findings stay fixed too. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

static long rss_limit_mb = 2048;

static long peak_rss_mb(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return ru.ru_maxrss / 1024; /* KiB on Linux */
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return 1;
  }
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    if (n == cap) buf = realloc(buf, cap *= 2);
    size_t r = fread(buf + n, 1, cap - n, f);
    if (!r) break;
    n += r;
  }
  fclose(f);
  long before = peak_rss_mb();
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  long after = peak_rss_mb();
  printf("replayed %s (%zu bytes)\n", path, n);
  /* the peak only grows, so only the input that crossed the limit is blamed */
  if (before <= rss_limit_mb && after > rss_limit_mb) {
    fprintf(stderr, "FAIL: %s: peak RSS %ld MiB, over the %ld MiB limit\n", path, after, rss_limit_mb);
    return 1;
  }
  return 0;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
  int bad = 0, count = 0;
  LLVMFuzzerInitialize(&argc, &argv);
  const char *lim = getenv("ALMA_REPLAY_RSS_MB");
  if (lim && atol(lim) > 0) rss_limit_mb = atol(lim);
  for (int i = 1; i < argc; i++) {
    struct stat sb;
    if (stat(argv[i], &sb) != 0) {
      perror(argv[i]);
      bad++;
      continue;
    }
    if (!S_ISDIR(sb.st_mode)) {
      bad += replay_file(argv[i]);
      count++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    struct dirent *e;
    char **names = NULL;
    size_t nn = 0;
    while (d && (e = readdir(d))) {
      if (e->d_name[0] == '.' || !strncmp(e->d_name, "README", 6)) continue;
      names = realloc(names, (nn + 1) * sizeof *names);
      names[nn] = malloc(strlen(argv[i]) + strlen(e->d_name) + 2);
      sprintf(names[nn++], "%s/%s", argv[i], e->d_name);
    }
    if (d) closedir(d);
    if (nn) qsort(names, nn, sizeof *names, cmp);
    for (size_t k = 0; k < nn; k++) {
      bad += replay_file(names[k]);
      count++;
      free(names[k]);
    }
    free(names);
  }
  printf("%d inputs replayed without a crash, %d failed\n", count, bad);
  return bad ? 1 : 0;
}
