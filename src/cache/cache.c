/* The build cache: keys, lookups, atomic commits, and the management behind `alma cache`. See
 * cache.h for the layout and docs/cache.md for the rules. */
#include "cache/cache.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alma_build_id.h"
#include "bench/bench.h"

struct alma__cache {
  char dir[PATH_MAX];
  int lock_fd;
};

static atomic_uint seq;   /* unique temporary names within a process */

/* ---- small file helpers ---------------------------------------------------------------------- */
static int mkdir_p(const char *path) {
  char buf[PATH_MAX];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return -1;
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(buf, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

/* Best effort (durability of a rename). A path too long for d could not have been opened anyway,
 * and its truncation would name another directory: nothing to do then. */
static void fsync_dir_of(const char *path) {
  char d[PATH_MAX];
  if (snprintf(d, sizeof d, "%s", path) >= (int)sizeof d) return;
  char *slash = strrchr(d, '/');
  if (!slash) return;
  *slash = 0;
  int fd = open(d[0] ? d : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

alma_status alma__write_atomic(const char *path, const void *data, size_t n) {
  char tmp[PATH_MAX + 64];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&seq, 1));
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return alma__errorf(ALMA_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
  const char *p = data;
  size_t left = n;
  while (left > 0) {
    ssize_t w = write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = errno;
      close(fd);
      unlink(tmp);
      return alma__errorf(ALMA_ERR_IO, "writing '%s': %s", tmp, w < 0 ? strerror(e) : "no space written");
    }
    p += w;
    left -= (size_t)w;
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    int e = errno;
    unlink(tmp);
    return alma__errorf(ALMA_ERR_IO, "writing '%s': %s", tmp, strerror(e));
  }
  if (rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    return alma__errorf(ALMA_ERR_IO, "renaming '%s' to '%s': %s", tmp, path, strerror(e));
  }
  fsync_dir_of(path);
  return ALMA_OK;
}

static alma_status hash_file(const char *path, char hex[65], int64_t *bytes) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return alma__errorf(ALMA_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  alma_sha256 *h = alma__sha256_new();
  char *buf = malloc(1 << 16);
  if (!h || !buf) {
    close(fd);
    free(buf);
    if (h) alma__sha256_final(h, hex);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  ssize_t r;
  *bytes = 0;
  while ((r = read(fd, buf, 1 << 16)) > 0 || (r < 0 && errno == EINTR))
    if (r > 0) {
      alma__sha256_update(h, buf, (size_t)r);
      *bytes += r;
    }
  int e = r < 0 ? errno : 0;
  close(fd);
  free(buf);
  alma__sha256_final(h, hex);
  return e ? alma__errorf(ALMA_ERR_IO, "reading '%s': %s", path, strerror(e)) : ALMA_OK;
}

static void sha_text(const char *text, char hex[65]) {
  alma_sha256 *h = alma__sha256_new();
  if (!h) {
    snprintf(hex, 65, "%064d", 0);
    return;
  }
  alma__sha256_update(h, text, strlen(text));
  alma__sha256_final(h, hex);
}

static void utc_now(char *buf, size_t n, int compact) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tmv;
  gmtime_r(&ts.tv_sec, &tmv);
  if (compact) {
    char b[32];
    strftime(b, sizeof b, "%Y%m%dT%H%M%S", &tmv);
    snprintf(buf, n, "%.15s.%06ldZ", b, ts.tv_nsec / 1000 % 1000000);
  } else {
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tmv);
  }
}

/* Removes a directory tree of depth <= 3 (entries hold files and bench/). */
static int remove_tree(const char *path, int depth) {
  DIR *d = opendir(path);
  if (!d) return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
  struct dirent *e;
  int rc = 0;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/%s", path, e->d_name) >= (int)sizeof p) {
      rc = -1;
      continue;
    }
    struct stat sb;
    if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) {
      if (depth > 0) rc |= remove_tree(p, depth - 1);
      else rc = -1;
    } else if (unlink(p) != 0 && errno != ENOENT) {
      rc = -1;
    }
  }
  closedir(d);
  if (rmdir(path) != 0 && errno != ENOENT) rc = -1;
  return rc;
}

/* ---- keys ------------------------------------------------------------------------------------- */
void alma__cache_key_init(alma__cache_key *k) {
  memset(k, 0, sizeof *k);
  snprintf(k->alma_version, sizeof k->alma_version, "%s", alma_version());
  /* The build id, not the file this code sits in: the CLI and a program linked to libalma.so from
   * one build are the same code and share builds; any change to the code makes a new id. */
  snprintf(k->alma_build, sizeof k->alma_build, "build %s", ALMA_BUILD_ID);
}

const char *alma_build_id(void) { return ALMA_BUILD_ID; }

static void sanitize(const char *in, char *out, size_t n, size_t maxlen) {
  size_t j = 0;
  for (size_t i = 0; in[i] && j + 1 < n && j < maxlen; i++) {
    char ch = in[i];
    int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
             ch == '+' || ch == '-' || ch == '.';
    out[j++] = ok ? ch : '_';
  }
  out[j] = 0;
  if (!j || out[0] == '.') out[0] = '_', out[j ? j : 1] = 0;
}

void alma__cache_key_finish(alma__cache_key *k) {
  /* Buffers sized to the lengths kept (64 and 100 characters), so that the name provably fits. */
  char stem[65] = "model";
  if (k->model_path[0]) {
    const char *b = strrchr(k->model_path, '/');
    b = b ? b + 1 : k->model_path;
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%.255s", b);
    size_t len = strlen(tmp);
    if (len > 5 && !strcmp(tmp + len - 5, ".onnx")) tmp[len - 5] = 0;
    sanitize(tmp, stem, sizeof stem, sizeof stem - 1);
  }
  char conv[101];
  sanitize(k->conversion, conv, sizeof conv, sizeof conv - 1);
  size_t idn = strlen(k->model_path) + strlen(k->model_hash) + strlen(k->inputs) + 16;
  char *ident = malloc(idn);
  char h[65] = "";
  if (ident) {
    if (k->model_path[0]) snprintf(ident, idn, "path:%s\n%s", k->model_path, k->inputs);
    else snprintf(ident, idn, "hash:%s\n%s", k->model_hash, k->inputs);
    sha_text(ident, h);
    free(ident);
  }
  snprintf(k->name, sizeof k->name, "%s-%s-%.8s", stem, conv, h);
  size_t n = strlen(k->alma_version) + strlen(k->alma_build) + strlen(k->model_hash) + strlen(k->conversion) +
             strlen(k->inputs) + strlen(k->options) + 256;
  char *text = malloc(n);
  if (!text) {
    snprintf(k->key, sizeof k->key, "%064d", 0);
    return;
  }
  snprintf(text, n, "alma_cache_format=%d\nalma_version=%s\nalma_build=%s\nmodel_hash=%s\nconversion=%s\ninputs=%s\noptions=%s\n",
           ALMA__CACHE_FORMAT, k->alma_version, k->alma_build, k->model_hash, k->conversion, k->inputs, k->options);
  sha_text(text, k->key);
  free(text);
}

alma_status alma__rebuild_parse(const char *s, alma__rebuild *out) {
  if (!s || !*s || !strcmp(s, "if_needed")) *out = ALMA__REBUILD_IF_NEEDED;
  else if (!strcmp(s, "always")) *out = ALMA__REBUILD_ALWAYS;
  else if (!strcmp(s, "never")) *out = ALMA__REBUILD_NEVER;
  else return alma__errorf(ALMA_ERR_INVALID_ARG, "rebuild policy '%s': expected if_needed, always or never", s);
  return ALMA_OK;
}

/* ---- open, lock ------------------------------------------------------------------------------ */
alma_status alma__cache_open(const char *dir, alma__cache **out) {
  *out = NULL;
  char path[PATH_MAX];
  const char *env = getenv("ALMA_CACHE_DIR"), *home = getenv("HOME");
  if (dir && *dir) snprintf(path, sizeof path, "%s", dir);
  else if (env && *env) snprintf(path, sizeof path, "%s", env);
  else if (home && *home) snprintf(path, sizeof path, "%s/.cache/alma", home);
  else return alma__errorf(ALMA_ERR_IO, "no cache directory: neither ALMA_CACHE_DIR nor HOME is set");
  /* Absolute, so that names in state files and results mean the same from anywhere. */
  if (path[0] != '/') {
    char cwd[PATH_MAX], abs[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd) || snprintf(abs, sizeof abs, "%s/%s", cwd, path) >= (int)sizeof abs)
      return alma__errorf(ALMA_ERR_IO, "cache directory '%s': cannot make it absolute", path);
    snprintf(path, sizeof path, "%s", abs);
  }
  size_t len = strlen(path);
  while (len > 1 && path[len - 1] == '/') path[--len] = 0;
  char builds[PATH_MAX + 16];
  snprintf(builds, sizeof builds, "%s/builds", path);
  if (mkdir_p(builds) != 0)
    return alma__errorf(ALMA_ERR_IO, "cannot create the cache directory '%s': %s", builds, strerror(errno));
  alma__cache *c = calloc(1, sizeof *c);
  if (!c) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  snprintf(c->dir, sizeof c->dir, "%s", path);
  c->lock_fd = -1;
  *out = c;
  return ALMA_OK;
}

void alma__cache_close(alma__cache *c) {
  if (!c) return;
  alma__cache_unlock(c);
  free(c);
}

const char *alma__cache_dir(const alma__cache *c) { return c->dir; }

alma_status alma__cache_lock(alma__cache *c, int exclusive) {
  if (c->lock_fd >= 0) return alma__errorf(ALMA_ERR_INTERNAL, "cache lock taken twice");
  char p[PATH_MAX + 8];
  snprintf(p, sizeof p, "%s/lock", c->dir);
  int fd;
  if (alma__open_regular(p, O_RDWR | O_CREAT, &fd, NULL) != ALMA_OK)
    return alma__error_prefix(ALMA_ERR_IO, "the cache lock: ");
  while (flock(fd, exclusive ? LOCK_EX : LOCK_SH) != 0) {
    if (errno == EINTR) continue;
    int e = errno;
    close(fd);
    return alma__errorf(ALMA_ERR_IO, "cannot lock '%s': %s", p, strerror(e));
  }
  c->lock_fd = fd;
  return ALMA_OK;
}

void alma__cache_unlock(alma__cache *c) {
  if (c->lock_fd < 0) return;
  flock(c->lock_fd, LOCK_UN);
  close(c->lock_fd);
  c->lock_fd = -1;
}

/* ---- state files ------------------------------------------------------------------------------ */
/* Parses DIR/state.json: NULL with why in problem when missing (problem "") or unusable. */
static cJSON *read_state(const char *dir, char *problem, size_t pn) {
  char p[PATH_MAX + 16];
  snprintf(p, sizeof p, "%s/state.json", dir);
  problem[0] = 0;
  uint8_t *buf;
  size_t n;
  struct stat sb;
  if (stat(p, &sb) != 0) return NULL;
  if (alma__read_file(p, &buf, &n) != ALMA_OK) {
    snprintf(problem, pn, "state file unreadable: %s", alma_last_error());
    alma__error_clear();
    return NULL;
  }
  cJSON *j = cJSON_ParseWithLength((const char *)buf, n);
  free(buf);
  if (!j) {
    snprintf(problem, pn, "state file is not JSON (truncated or damaged, %zu bytes)", n);
    return NULL;
  }
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "alma_cache_format");
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status");
  const cJSON *key = cJSON_GetObjectItemCaseSensitive(j, "key");
  const cJSON *parts = cJSON_GetObjectItemCaseSensitive(j, "key_parts");
  if (!cJSON_IsObject(j) || !cJSON_IsNumber(fmt) || !cJSON_IsString(st) || !cJSON_IsString(key) || !cJSON_IsObject(parts)) {
    snprintf(problem, pn, "state file lacks alma_cache_format, status, key or key_parts");
    cJSON_Delete(j);
    return NULL;
  }
  if (fmt->valueint != ALMA__CACHE_FORMAT) {
    snprintf(problem, pn, "state file of cache format %d (this alma writes %d)", fmt->valueint, ALMA__CACHE_FORMAT);
    cJSON_Delete(j);
    return NULL;
  }
  return j;
}

static const char *jstr(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}
static double jnum(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* Which key parts differ, "model hash, options". */
static void stale_parts(const cJSON *parts, const alma__cache_key *k, char *out, size_t n) {
  static const char *const names[][2] = {{"model_hash", "model hash"}, {"conversion", "conversion"},
                                         {"inputs", "input shapes"},   {"options", "options"},
                                         {"alma_version", "alma version"}, {"alma_build", "alma build"}};
  const char *mine[] = {k->model_hash, k->conversion, k->inputs, k->options, k->alma_version, k->alma_build};
  size_t len = 0;
  out[0] = 0;
  for (int i = 0; i < 6; i++) {
    const char *v = jstr(parts, names[i][0]);
    if (v && !strcmp(v, mine[i])) continue;
    int w = snprintf(out + len, n - len, "%s%s", len ? ", " : "", names[i][1]);
    if (w < 0 || (size_t)w >= n - len) break;
    len += (size_t)w;
  }
  if (!len) snprintf(out, n, "key");
}

alma_status alma__cache_plan_build(alma__cache *c, const alma__cache_key *k, alma__rebuild policy, int lean,
                                   alma__cache_plan *p) {
  memset(p, 0, sizeof *p);
  p->build_s = NAN;
  p->graph_bytes = -1;
  if (snprintf(p->dir, sizeof p->dir, "%s/builds/%s", c->dir, k->name) >= (int)sizeof p->dir)
    return alma__errorf(ALMA_ERR_IO, "cache directory path too long: %s", c->dir);
  snprintf(p->graph_path, sizeof p->graph_path, "%s/graph.onnx", p->dir);
  if (!lean)
    snprintf(p->tmp_graph, sizeof p->tmp_graph, "%s/graph.onnx.tmp.%ld.%u", p->dir, (long)getpid(), atomic_fetch_add(&seq, 1));
  ALMA_TRY(alma__cache_lock(c, 0));
  char problem[256];
  cJSON *st = read_state(p->dir, problem, sizeof problem);
  const char *status = st ? jstr(st, "status") : NULL;
  const cJSON *graph = st ? cJSON_GetObjectItemCaseSensitive(st, "graph") : NULL;
  char what[300] = "";
  int fresh = st && !strcmp(jstr(st, "key"), k->key);
  if (st && !fresh) stale_parts(cJSON_GetObjectItemCaseSensitive(st, "key_parts"), k, what, sizeof what);
  p->stale = st && !fresh;
  if (!st && !problem[0]) {
    snprintf(p->reason, sizeof p->reason, "no build in the cache");
  } else if (!st) {
    snprintf(p->reason, sizeof p->reason, "corrupt: %s", problem);
  } else if (strcmp(status, "ok")) {
    snprintf(p->reason, sizeof p->reason, "the stored build failed: %s", jstr(st, "error") ? jstr(st, "error") : status);
  } else if (!cJSON_IsObject(graph)) {
    snprintf(p->reason, sizeof p->reason, "no graph stored (%s)", jstr(st, "dropped") ? jstr(st, "dropped") : "lean cache");
  } else if (policy == ALMA__REBUILD_ALWAYS) {
    snprintf(p->reason, sizeof p->reason, "rebuild always%s%s", p->stale ? "; it was stale: " : "", p->stale ? what : "");
  } else if (p->stale && policy == ALMA__REBUILD_IF_NEEDED) {
    snprintf(p->reason, sizeof p->reason, "stale: %s changed", what);
  } else {
    /* Usable if the graph file is whole (its checksum is checked where it is loaded). */
    const char *sha = jstr(graph, "sha256");
    double bytes = jnum(graph, "bytes");
    struct stat sb;
    if (!sha || strlen(sha) != 64 || !isfinite(bytes)) {
      snprintf(p->reason, sizeof p->reason, "corrupt: the state's graph entry lacks its size or checksum");
    } else if (stat(p->graph_path, &sb) != 0) {
      snprintf(p->reason, sizeof p->reason, "corrupt: graph file missing (%s)", strerror(errno));
    } else if ((double)sb.st_size != bytes) {
      snprintf(p->reason, sizeof p->reason, "corrupt: graph file is %lld bytes, the state says %.0f (truncated?)",
               (long long)sb.st_size, bytes);
    } else {
      p->use = 1;
      snprintf(p->graph_sha256, sizeof p->graph_sha256, "%s", sha);
      p->graph_bytes = (int64_t)bytes;
      p->build_s = jnum(st, "build_s");
      if (p->stale) snprintf(p->reason, sizeof p->reason, "stale (%s changed) but rebuild never: used as it is", what);
    }
  }
  cJSON_Delete(st);
  alma__cache_unlock(c);
  if (!p->use && mkdir_p(p->dir) != 0)
    return alma__errorf(ALMA_ERR_IO, "cannot create the build directory '%s': %s", p->dir, strerror(errno));
  return ALMA_OK;
}

alma_status alma__cache_read_graph(const alma__cache_plan *p, uint8_t **bytes_out, size_t *n_out) {
  ALMA_TRY(alma__read_file(p->graph_path, bytes_out, n_out));
  char hex[65];
  alma_sha256 *h = alma__sha256_new();
  if (!h) {
    free(*bytes_out);
    *bytes_out = NULL;
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  alma__sha256_update(h, *bytes_out, *n_out);
  alma__sha256_final(h, hex);
  if ((int64_t)*n_out != p->graph_bytes || strcmp(hex, p->graph_sha256)) {
    free(*bytes_out);
    *bytes_out = NULL;
    if ((int64_t)*n_out != p->graph_bytes)
      return alma__errorf(ALMA_ERR_PARSE, "graph file is %zu bytes, the state says %lld", *n_out, (long long)p->graph_bytes);
    return alma__errorf(ALMA_ERR_PARSE, "graph checksum mismatch (%.12s..., the state says %.12s...)", hex, p->graph_sha256);
  }
  return ALMA_OK;
}

static void append_log(const char *dir, const char *text) {
  char p[PATH_MAX + 16];
  snprintf(p, sizeof p, "%s/build.log", dir);
  int fd; /* a FIFO here would block every alma process behind the exclusive lock */
  if (alma__open_regular(p, O_WRONLY | O_CREAT | O_APPEND, &fd, NULL) != ALMA_OK) {
    ALMA_LOGW("cache: not appending to '%s': %s", p, alma_last_error());
    alma__error_clear();
    return;
  }
  size_t n = strlen(text);
  while (n > 0) {
    ssize_t w = write(fd, text, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    text += w;
    n -= (size_t)w;
  }
  close(fd);
}

/* Drops an entry's stored graph, state first (graph: null), then the file: a crash in between
 * leaves a state that simply has no graph. Under the exclusive lock. Returns 1 if a file went. */
static int drop_graph(const char *dir, cJSON *state, const char *why) {
  char p[PATH_MAX + 32];
  cJSON_ReplaceItemInObjectCaseSensitive(state, "graph", cJSON_CreateNull());
  cJSON_DeleteItemFromObjectCaseSensitive(state, "dropped");
  char when[40], note[400];
  utc_now(when, sizeof when, 0);
  snprintf(note, sizeof note, "%s at %s", why, when);
  cJSON_AddStringToObject(state, "dropped", note);
  char *text = cJSON_Print(state);
  snprintf(p, sizeof p, "%s/state.json", dir);
  alma_status st = text ? alma__write_atomic(p, text, strlen(text)) : alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  free(text);
  snprintf(p, sizeof p, "%s/graph.onnx", dir);
  return st == ALMA_OK && unlink(p) == 0;
}

alma_status alma__cache_drop_graph(alma__cache *c, const alma__cache_plan *p, const char *why) {
  ALMA_TRY(alma__cache_lock(c, 1));
  char problem[256];
  cJSON *s = read_state(p->dir, problem, sizeof problem);
  const cJSON *g = s ? cJSON_GetObjectItemCaseSensitive(s, "graph") : NULL;
  const char *sha = g ? jstr(g, "sha256") : NULL;
  /* Only the graph this run used: another process may have stored a new one meanwhile. */
  int dropped = sha && !strcmp(sha, p->graph_sha256) && drop_graph(p->dir, s, why);
  if (dropped) {
    char when[40], *entry = malloc(strlen(why) + 128);
    utc_now(when, sizeof when, 0);
    if (entry) {
      sprintf(entry, "== %s pid %ld: graph dropped: %s\n", when, (long)getpid(), why);
      append_log(p->dir, entry);
      free(entry);
    }
  }
  cJSON_Delete(s);
  alma__cache_unlock(c);
  return dropped ? ALMA_OK : alma__errorf(ALMA_ERR_NOT_FOUND, "the cached graph was already gone or replaced");
}

alma_status alma__cache_commit(alma__cache *c, const alma__cache_key *k, const alma__cache_plan *p, int built, int ok,
                               double build_s, const char *error, const char *log_text, int64_t *graph_bytes_out) {
  *graph_bytes_out = built ? -1 : p->graph_bytes;
  ALMA_TRY(alma__cache_lock(c, 1));
  alma_status st = ALMA_OK;
  char when[40];
  utc_now(when, sizeof when, 0);
  if (mkdir_p(p->dir) != 0) {
    st = alma__errorf(ALMA_ERR_IO, "cannot create the build directory '%s': %s", p->dir, strerror(errno));
    goto out;
  }
  if (built) {
    char sha[65] = "";
    int64_t bytes = -1;
    struct stat sb;
    int have_tmp = ok && p->tmp_graph[0] && stat(p->tmp_graph, &sb) == 0;
    if (have_tmp) {
      /* The worker wrote it with stdio: make it durable before it becomes the graph. */
      int fd = open(p->tmp_graph, O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        fsync(fd);
        close(fd);
      }
      if ((st = hash_file(p->tmp_graph, sha, &bytes)) == ALMA_OK && rename(p->tmp_graph, p->graph_path) != 0)
        st = alma__errorf(ALMA_ERR_IO, "renaming '%s': %s", p->tmp_graph, strerror(errno));
      if (st != ALMA_OK) {
        unlink(p->tmp_graph);
        have_tmp = 0;
        bytes = -1;
      } else {
        fsync_dir_of(p->graph_path);
      }
    }
    if (!have_tmp) {
      /* No new graph: an older one must not outlive the state that described it. */
      if (p->tmp_graph[0]) unlink(p->tmp_graph);
      unlink(p->graph_path);
    }
    cJSON *s = cJSON_CreateObject();
    cJSON_AddNumberToObject(s, "alma_cache_format", ALMA__CACHE_FORMAT);
    cJSON_AddStringToObject(s, "name", k->name);
    cJSON_AddStringToObject(s, "status", ok ? "ok" : "failed");
    cJSON_AddItemToObject(s, "error", ok || !error ? cJSON_CreateNull() : cJSON_CreateString(error));
    cJSON_AddStringToObject(s, "built_at", when);
    cJSON_AddItemToObject(s, "build_s", isfinite(build_s) ? cJSON_CreateNumber(build_s) : cJSON_CreateNull());
    if (have_tmp) {
      cJSON *g = cJSON_AddObjectToObject(s, "graph");
      cJSON_AddStringToObject(g, "file", "graph.onnx");
      cJSON_AddNumberToObject(g, "bytes", (double)bytes);
      cJSON_AddStringToObject(g, "sha256", sha);
    } else {
      cJSON_AddNullToObject(s, "graph");
      /* Why there is none, for the next run's reason (a lean cache keeps none by design). */
      if (ok && p->tmp_graph[0]) {
        char note[120];
        snprintf(note, sizeof note, "the build's graph was not saved: its process failed or was killed first, at %s", when);
        cJSON_AddStringToObject(s, "dropped", note);
      }
    }
    cJSON_AddBoolToObject(s, "lean", !p->tmp_graph[0]);
    cJSON_AddStringToObject(s, "model_path", k->model_path);
    cJSON_AddStringToObject(s, "conversion", k->conversion);
    cJSON_AddStringToObject(s, "key", k->key);
    cJSON *kp = cJSON_AddObjectToObject(s, "key_parts");
    cJSON_AddStringToObject(kp, "alma_version", k->alma_version);
    cJSON_AddStringToObject(kp, "alma_build", k->alma_build);
    cJSON_AddStringToObject(kp, "model_hash", k->model_hash);
    cJSON_AddStringToObject(kp, "conversion", k->conversion);
    cJSON_AddStringToObject(kp, "inputs", k->inputs);
    cJSON_AddStringToObject(kp, "options", k->options);
    cJSON_AddNumberToObject(s, "pid", (double)getpid());
    char *text = cJSON_Print(s);
    cJSON_Delete(s);
    char sp[PATH_MAX + 16];
    snprintf(sp, sizeof sp, "%s/state.json", p->dir);
    st = text ? alma__write_atomic(sp, text, strlen(text)) : alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    free(text);
    *graph_bytes_out = have_tmp ? bytes : -1;
  } else if (!p->tmp_graph[0]) {
    /* lean_cache on a hit: the graph served this run; afterwards only state and logs stay. */
    char problem[256];
    cJSON *s = read_state(p->dir, problem, sizeof problem);
    if (s && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(s, "graph"))) drop_graph(p->dir, s, "lean_cache");
    cJSON_Delete(s);
    *graph_bytes_out = -1;
  }
  {
    size_t n = (log_text ? strlen(log_text) : 0) + 512;
    char *entry = malloc(n);
    if (entry) {
      snprintf(entry, n, "== %s pid %ld: %s %s%s%s\n%s%s", when, (long)getpid(),
               built ? (ok ? "built" : "build failed") : "used", k->conversion, p->reason[0] ? " — " : "", p->reason,
               log_text ? log_text : "", log_text && *log_text && log_text[strlen(log_text) - 1] != '\n' ? "\n" : "");
      append_log(p->dir, entry);
      free(entry);
    }
  }
out:
  alma__cache_unlock(c);
  return st;
}

alma_status alma__cache_record_benchmark(alma__cache *c, const alma__cache_key *k, const char *json) {
  char dir[PATH_MAX + 16], path[PATH_MAX + 128], when[48];
  if (snprintf(dir, sizeof dir, "%s/builds/%s/bench", c->dir, k->name) >= (int)sizeof dir)
    return alma__errorf(ALMA_ERR_IO, "cache directory path too long: %s", c->dir);
  utc_now(when, sizeof when, 1);
  snprintf(path, sizeof path, "%s/%s-%ld-%u.json", dir, when, (long)getpid(), atomic_fetch_add(&seq, 1));
  ALMA_TRY(alma__cache_lock(c, 1));
  alma_status st = mkdir_p(dir) == 0 ? alma__write_atomic(path, json, strlen(json))
                                     : alma__errorf(ALMA_ERR_IO, "cannot create '%s': %s", dir, strerror(errno));
  alma__cache_unlock(c);
  return st;
}

/* ---- management ------------------------------------------------------------------------------ */
static int is_tmp_name(const char *n) { return strstr(n, ".tmp.") != NULL; }

static int count_bench(const char *dir) {
  char p[PATH_MAX + 16];
  snprintf(p, sizeof p, "%s/bench", dir);
  DIR *d = opendir(p);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    n += l > 5 && !strcmp(e->d_name + l - 5, ".json") && !is_tmp_name(e->d_name);
  }
  closedir(d);
  return n;
}

static int cmp_entry(const void *a, const void *b) {
  return strcmp(((const alma__cache_entry *)a)->name, ((const alma__cache_entry *)b)->name);
}

static alma_status list_locked(alma__cache *c, alma__cache_entry **out, int *n_out) {
  *out = NULL;
  *n_out = 0;
  char bd[PATH_MAX + 16];
  snprintf(bd, sizeof bd, "%s/builds", c->dir);
  DIR *d = opendir(bd);
  if (!d) return errno == ENOENT ? ALMA_OK : alma__errorf(ALMA_ERR_IO, "cannot read '%s': %s", bd, strerror(errno));
  int n = 0, cap = 0;
  alma__cache_entry *v = NULL;
  struct dirent *e;
  alma_status st = ALMA_OK;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/%s", bd, e->d_name) >= (int)sizeof p) continue;
    struct stat sb;
    if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
    if (n == cap) {
      int nc = cap ? cap * 2 : 16;
      alma__cache_entry *nv = realloc(v, (size_t)nc * sizeof *nv);
      if (!nv) {
        st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
        break;
      }
      v = nv;
      cap = nc;
    }
    alma__cache_entry *x = &v[n++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", e->d_name);
    snprintf(x->dir, sizeof x->dir, "%s", p);
    x->state = read_state(p, x->problem, sizeof x->problem);
    if (!x->state && !x->problem[0]) snprintf(x->problem, sizeof x->problem, "no state file (a build in progress, or interrupted)");
    x->n_bench = count_bench(p);
    char g[PATH_MAX + 16];
    snprintf(g, sizeof g, "%s/graph.onnx", p);
    x->has_graph = stat(g, &sb) == 0;
  }
  closedir(d);
  if (st != ALMA_OK) {
    alma__cache_entries_free(v, n);
    return st;
  }
  if (n) qsort(v, (size_t)n, sizeof *v, cmp_entry);
  *out = v;
  *n_out = n;
  return ALMA_OK;
}

alma_status alma__cache_list(alma__cache *c, alma__cache_entry **out, int *n_out) {
  ALMA_TRY(alma__cache_lock(c, 0));
  alma_status st = list_locked(c, out, n_out);
  alma__cache_unlock(c);
  return st;
}

void alma__cache_entries_free(alma__cache_entry *e, int n) {
  for (int i = 0; e && i < n; i++) cJSON_Delete(e[i].state);
  free(e);
}

alma_status alma__cache_find(alma__cache *c, const char *name, char *full, size_t fn) {
  if (!name || !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
    return alma__errorf(ALMA_ERR_INVALID_ARG, "'%s' is not a build name", name ? name : "");
  alma__cache_entry *e;
  int n;
  ALMA_TRY(alma__cache_list(c, &e, &n));
  int found = -1, matches = 0;
  size_t len = strlen(name);
  for (int i = 0; i < n; i++) {
    if (!strcmp(e[i].name, name)) {
      found = i;
      matches = 1;
      break;
    }
    if (!strncmp(e[i].name, name, len)) {
      matches++;
      found = i;
    }
  }
  alma_status st = ALMA_OK;
  if (matches == 0) st = alma__errorf(ALMA_ERR_NOT_FOUND, "no build '%s' in %s (alma cache list shows them)", name, c->dir);
  else if (matches > 1) st = alma__errorf(ALMA_ERR_INVALID_ARG, "'%s' matches %d builds: give more of the name", name, matches);
  else snprintf(full, fn, "%s", e[found].name);
  alma__cache_entries_free(e, n);
  return st;
}

alma_status alma__cache_delete(alma__cache *c, const char *name) {
  char full[256], p[PATH_MAX + 300];
  ALMA_TRY(alma__cache_find(c, name, full, sizeof full));
  snprintf(p, sizeof p, "%s/builds/%s", c->dir, full);
  ALMA_TRY(alma__cache_lock(c, 1));
  int rc = remove_tree(p, 2);
  alma__cache_unlock(c);
  return rc == 0 ? ALMA_OK : alma__errorf(ALMA_ERR_IO, "could not remove all of '%s': %s", p, strerror(errno));
}

alma_status alma__cache_delete_all(alma__cache *c, int *n_deleted) {
  *n_deleted = 0;
  ALMA_TRY(alma__cache_lock(c, 1));
  alma__cache_entry *e;
  int n;
  alma_status st = list_locked(c, &e, &n);
  for (int i = 0; st == ALMA_OK && i < n; i++) {
    if (remove_tree(e[i].dir, 2) != 0) st = alma__errorf(ALMA_ERR_IO, "could not remove all of '%s'", e[i].dir);
    else (*n_deleted)++;
  }
  alma__cache_entries_free(e, n);
  alma__cache_unlock(c);
  return st;
}

/* A temporary file "X.tmp.PID.N" whose writer is gone. */
static int tmp_of_dead(const char *name) {
  const char *t = strstr(name, ".tmp.");
  if (!t) return 0;
  long pid = strtol(t + 5, NULL, 10);
  return pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

static int clean_tmp_in(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!tmp_of_dead(e->d_name)) continue;
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < (int)sizeof p && unlink(p) == 0) n++;
  }
  closedir(d);
  return n;
}

alma_status alma__cache_clean(alma__cache *c, int *n_graphs, int *n_tmp, int *n_corrupt) {
  *n_graphs = *n_tmp = *n_corrupt = 0;
  ALMA_TRY(alma__cache_lock(c, 1));
  alma__cache_entry *e;
  int n;
  alma_status st = list_locked(c, &e, &n);
  for (int i = 0; st == ALMA_OK && i < n; i++) {
    char p[PATH_MAX + 32];
    *n_tmp += clean_tmp_in(e[i].dir);
    snprintf(p, sizeof p, "%s/bench", e[i].dir);
    *n_tmp += clean_tmp_in(p);
    if (!e[i].state) {
      /* Unreadable, or no state yet: gone unless a live process is still building it. */
      DIR *d = opendir(e[i].dir);
      int live = 0;
      struct dirent *de;
      while (d && (de = readdir(d))) live |= is_tmp_name(de->d_name) && !tmp_of_dead(de->d_name);
      if (d) closedir(d);
      if (!live && remove_tree(e[i].dir, 2) == 0) (*n_corrupt)++;
      continue;
    }
    if (e[i].has_graph) *n_graphs += drop_graph(e[i].dir, e[i].state, "cleaned");
  }
  alma__cache_entries_free(e, n);
  alma__cache_unlock(c);
  return st;
}

/* Benchmark records of an entry, in name (= time) order: parsed, caller frees each. */
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static cJSON **read_bench(const char *dir, int *n_out) {
  *n_out = 0;
  char bd[PATH_MAX + 16];
  snprintf(bd, sizeof bd, "%s/bench", dir);
  DIR *d = opendir(bd);
  if (!d) return NULL;
  char **names = NULL;
  int n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    if (l <= 5 || strcmp(e->d_name + l - 5, ".json") || is_tmp_name(e->d_name)) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      char **nn = realloc(names, (size_t)cap * sizeof *nn);
      if (!nn) break;
      names = nn;
    }
    names[n++] = alma__strdup(e->d_name);
  }
  closedir(d);
  if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
  cJSON **v = calloc((size_t)n + 1, sizeof *v);
  int k = 0;
  for (int i = 0; i < n; i++) {
    char p[PATH_MAX + 300];
    uint8_t *buf;
    size_t len;
    snprintf(p, sizeof p, "%s/%s", bd, names[i] ? names[i] : "");
    if (v && names[i] && alma__read_file(p, &buf, &len) == ALMA_OK) {
      cJSON *j = cJSON_ParseWithLength((const char *)buf, len);
      free(buf);
      if (j) v[k++] = j;
    }
    alma__error_clear();
    free(names[i]);
  }
  free(names);
  *n_out = k;
  return v;
}

alma_status alma__cache_print(alma__cache *c, const char *name, FILE *f) {
  char full[256], dir[PATH_MAX + 300], problem[256];
  ALMA_TRY(alma__cache_find(c, name, full, sizeof full));
  snprintf(dir, sizeof dir, "%s/builds/%s", c->dir, full);
  ALMA_TRY(alma__cache_lock(c, 0));
  cJSON *s = read_state(dir, problem, sizeof problem);
  int nb;
  cJSON **b = read_bench(dir, &nb);
  alma__cache_unlock(c);
  fprintf(f, "build       %s\ndirectory   %s\n", full, dir);
  if (!s) {
    fprintf(f, "state       unusable: %s (it is rebuilt when next needed)\n", problem[0] ? problem : "no state file");
  } else {
    const cJSON *kp = cJSON_GetObjectItemCaseSensitive(s, "key_parts"), *g = cJSON_GetObjectItemCaseSensitive(s, "graph");
    fprintf(f, "status      %s%s%s\n", jstr(s, "status"), jstr(s, "error") ? ": " : "", jstr(s, "error") ? jstr(s, "error") : "");
    fprintf(f, "built       %s in %.3g s (passes and compile)\n", jstr(s, "built_at") ? jstr(s, "built_at") : "?", jnum(s, "build_s"));
    if (cJSON_IsObject(g))
      fprintf(f, "graph       graph.onnx, %.0f bytes, sha256 %s\n", jnum(g, "bytes"), jstr(g, "sha256") ? jstr(g, "sha256") : "?");
    else
      fprintf(f, "graph       none stored (%s)\n", jstr(s, "dropped") ? jstr(s, "dropped") : "lean cache");
    fprintf(f, "model       %s\n", jstr(s, "model_path") && *jstr(s, "model_path") ? jstr(s, "model_path") : "(loaded model)");
    fprintf(f, "key         %s\n", jstr(s, "key"));
    const char *labels[][2] = {{"model_hash", "  model hash"}, {"conversion", "  conversion"}, {"inputs", "  inputs"},
                               {"options", "  options"}, {"alma_version", "  alma"}, {"alma_build", "  alma build"}};
    for (int i = 0; i < 6; i++) {
      const char *v = jstr(kp, labels[i][0]);
      fprintf(f, "%-15s%s\n", labels[i][1], v && *v ? v : "-");
    }
  }
  fprintf(f, "benchmarks  %d\n", nb);
  for (int i = 0; i < nb; i++) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(b[i], "result");
    const cJSON *lat = cJSON_GetObjectItemCaseSensitive(r, "latency_ms");
    const cJSON *cache = cJSON_GetObjectItemCaseSensitive(r, "cache");
    fprintf(f, "  %s  batch %.0f  %s  %s  %.4g samples/s  p50 %.4g ms  (cache %s)\n",
            jstr(b[i], "recorded_at") ? jstr(b[i], "recorded_at") : "?", jnum(r, "batch_size"),
            jstr(r, "mode") ? jstr(r, "mode") : "latency", jstr(r, "status") ? jstr(r, "status") : "?",
            jnum(r, "throughput_samples_per_s"), jnum(lat, "p50"), jstr(cache, "status") ? jstr(cache, "status") : "-");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(r, "scaling"), *pt;
    cJSON_ArrayForEach(pt, sc) {
      const cJSON *pl = cJSON_GetObjectItemCaseSensitive(pt, "latency_ms");
      fprintf(f, "      throughput mode: %.0f instances x %.0f workers: %.4g samples/s (peak %.4g), p50 %.4g ms, p99 %.4g ms\n",
              jnum(pt, "instances"), jnum(pt, "workers"), jnum(pt, "throughput_avg"), jnum(pt, "throughput_peak"),
              jnum(pl, "p50"), jnum(pl, "p99"));
    }
  }
  for (int i = 0; i < nb; i++) cJSON_Delete(b[i]);
  free(b);
  cJSON_Delete(s);
  return ferror(f) ? alma__errorf(ALMA_ERR_IO, "error writing") : ALMA_OK;
}

/* ---- report ------------------------------------------------------------------------------------ */
static const char *const report_columns[] = {
    "build", "model_path", "model_hash", "conversion", "inputs", "options", "build_status", "build_error",
    "built_at", "build_s", "graph_bytes", "alma_version", "benchmark_at", "cache", "result_status", "batch_size",
    "mode", "instances", "workers", "threads", "samples", "throughput_samples_per_s", "throughput_peak_samples_per_s",
    "latency_mean_ms", "latency_p50_ms", "latency_p90_ms", "latency_p99_ms", NULL};

static void put_jstr(FILE *f, const cJSON *o, const char *k) {
  fputc(',', f);
  alma__csv_str(f, jstr(o, k));
}
static void put_jnum(FILE *f, const cJSON *o, const char *k) {
  fputc(',', f);
  alma__csv_num(f, jnum(o, k));
}

/* The build's columns (everything up to benchmark_at). */
static void build_cols(FILE *f, const alma__cache_entry *e) {
  const cJSON *s = e->state, *kp = s ? cJSON_GetObjectItemCaseSensitive(s, "key_parts") : NULL;
  const cJSON *g = s ? cJSON_GetObjectItemCaseSensitive(s, "graph") : NULL;
  alma__csv_str(f, e->name);
  put_jstr(f, s, "model_path");
  put_jstr(f, kp, "model_hash");
  put_jstr(f, kp, "conversion");
  put_jstr(f, kp, "inputs");
  put_jstr(f, kp, "options");
  fputc(',', f);
  alma__csv_str(f, s ? jstr(s, "status") : "corrupt");
  fputc(',', f);
  alma__csv_str(f, s ? jstr(s, "error") : e->problem);
  put_jstr(f, s, "built_at");
  put_jnum(f, s, "build_s");
  put_jnum(f, g, "bytes");
  put_jstr(f, kp, "alma_version");
}

alma_status alma__cache_report_csv(alma__cache *c, FILE *f) {
  alma__cache_entry *e;
  int n;
  ALMA_TRY(alma__cache_lock(c, 0));
  alma_status st = list_locked(c, &e, &n);
  if (st != ALMA_OK) {
    alma__cache_unlock(c);
    return st;
  }
  for (int i = 0; report_columns[i]; i++) fprintf(f, "%s%s", i ? "," : "", report_columns[i]);
  fputs("\r\n", f);
  for (int i = 0; i < n; i++) {
    int nb;
    cJSON **b = read_bench(e[i].dir, &nb);
    if (nb == 0) {
      build_cols(f, &e[i]);
      for (int k = 12; report_columns[k]; k++) fputc(',', f);
      fputs("\r\n", f);
    }
    for (int k = 0; k < nb; k++) {
      const cJSON *r = cJSON_GetObjectItemCaseSensitive(b[k], "result");
      const cJSON *lat = cJSON_GetObjectItemCaseSensitive(r, "latency_ms");
      const cJSON *cache = cJSON_GetObjectItemCaseSensitive(r, "cache");
      /* The latency mode's row, then one per throughput configuration. */
      build_cols(f, &e[i]);
      put_jstr(f, b[k], "recorded_at");
      put_jstr(f, cache, "status");
      put_jstr(f, r, "status");
      put_jnum(f, r, "batch_size");
      fputc(',', f);
      alma__csv_str(f, jstr(r, "mode") ? jstr(r, "mode") : "latency");
      fputs(",1,1", f);
      put_jnum(f, r, "threads");
      put_jnum(f, r, "samples");
      put_jnum(f, r, "throughput_samples_per_s");
      fputc(',', f);
      put_jnum(f, lat, "mean");
      put_jnum(f, lat, "p50");
      put_jnum(f, lat, "p90");
      put_jnum(f, lat, "p99");
      fputs("\r\n", f);
      const cJSON *pt;
      cJSON_ArrayForEach(pt, cJSON_GetObjectItemCaseSensitive(r, "scaling")) {
        const cJSON *pl = cJSON_GetObjectItemCaseSensitive(pt, "latency_ms");
        build_cols(f, &e[i]);
        put_jstr(f, b[k], "recorded_at");
        put_jstr(f, cache, "status");
        fputc(',', f);
        alma__csv_str(f, jstr(pt, "error") ? "error" : "ok");
        put_jnum(f, r, "batch_size");
        fputs(",throughput", f);
        put_jnum(f, pt, "instances");
        put_jnum(f, pt, "workers");
        put_jnum(f, pt, "threads_per_instance");
        put_jnum(f, pt, "samples");
        put_jnum(f, pt, "throughput_avg");
        put_jnum(f, pt, "throughput_peak");
        put_jnum(f, pl, "mean");
        put_jnum(f, pl, "p50");
        put_jnum(f, pl, "p90");
        put_jnum(f, pl, "p99");
        fputs("\r\n", f);
      }
      cJSON_Delete(b[k]);
    }
    free(b);
  }
  alma__cache_entries_free(e, n);
  alma__cache_unlock(c);
  return ferror(f) ? alma__errorf(ALMA_ERR_IO, "error writing the report") : ALMA_OK;
}
