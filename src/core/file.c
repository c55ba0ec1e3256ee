/* Opening files that come from users or from disk state: regular files only, checked before any
 * read, so a FIFO, a device (/dev/zero) or a directory is refused with a message instead of
 * blocking or reading forever. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

static const char *file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

alma_status alma__open_regular(const char *path, int flags, int *fd_out, struct stat *st_out) {
  *fd_out = -1;
  /* O_NONBLOCK: opening a FIFO for reading must not wait for a writer. It is cleared again once
   * the file is known to be regular (where it has no effect anyway). */
  int fd = open(path, flags | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644);
  if (fd < 0) {
    int err = errno;
    struct stat sb;
    /* ENXIO: a FIFO opened for writing with no reader; name what it is rather than the errno */
    if (err == ENXIO && stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
      return alma__errorf(ALMA_ERR_IO, "'%s' is %s, not a regular file", path, file_kind(sb.st_mode));
    return alma__errorf(ALMA_ERR_IO, "cannot open '%s': %s", path, strerror(err));
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int err = errno;
    close(fd);
    return alma__errorf(ALMA_ERR_IO, "cannot stat '%s': %s", path, strerror(err));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return alma__errorf(ALMA_ERR_IO, "'%s' is %s, not a regular file", path, file_kind(sb.st_mode));
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  *fd_out = fd;
  if (st_out) *st_out = sb;
  return ALMA_OK;
}

alma_status alma__fopen_regular(const char *path, FILE **f_out, struct stat *st_out) {
  *f_out = NULL;
  int fd;
  ALMA_TRY(alma__open_regular(path, O_RDONLY, &fd, st_out));
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    int err = errno;
    close(fd);
    return alma__errorf(ALMA_ERR_IO, "cannot open '%s': %s", path, strerror(err));
  }
  *f_out = f;
  return ALMA_OK;
}

alma_status alma__read_fd(int fd, const char *path, size_t max_bytes, uint8_t **data_out, size_t *n_out) {
  *data_out = NULL;
  *n_out = 0;
  struct stat sb;
  if (fstat(fd, &sb) != 0) return alma__errorf(ALMA_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
  if (!S_ISREG(sb.st_mode))
    return alma__errorf(ALMA_ERR_IO, "'%s' is %s, not a regular file", path, file_kind(sb.st_mode));
  if (sb.st_size < 0 || (uint64_t)sb.st_size > (uint64_t)max_bytes)
    return alma__errorf(ALMA_ERR_IO, "'%s' is %lld bytes, more than the limit of %zu", path, (long long)sb.st_size,
                        max_bytes);
  /* Read what the size says, no more: a file that grows meanwhile is read as it was. */
  size_t size = (size_t)sb.st_size, n = 0;
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) return alma__errorf(ALMA_ERR_NOMEM, "out of memory reading '%s' (%zu bytes)", path, size);
  while (n < size) {
    ssize_t r = read(fd, buf + n, size - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int err = errno;
      free(buf);
      return alma__errorf(ALMA_ERR_IO, "error reading '%s': %s", path, strerror(err));
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  *data_out = buf;
  *n_out = n;
  return ALMA_OK;
}

alma_status alma__read_file_max(const char *path, size_t max_bytes, uint8_t **data_out, size_t *n_out) {
  *data_out = NULL;
  *n_out = 0;
  int fd;
  ALMA_TRY(alma__open_regular(path, O_RDONLY, &fd, NULL));
  alma_status st = alma__read_fd(fd, path, max_bytes, data_out, n_out);
  close(fd);
  return st;
}

alma_status alma__read_file(const char *path, uint8_t **data_out, size_t *n_out) {
  return alma__read_file_max(path, ALMA_MAX_FILE_BYTES, data_out, n_out);
}
