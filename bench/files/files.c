/* files.c: how every file of the bench is written: atomically (a fresh
 * temporary file in the same directory, fsync, rename, fsync of the
 * directory, so a file is complete or absent), and the directories it
 * goes into. A results directory may be shared: the temporary name is made
 * with O_EXCL | O_NOFOLLOW, and the rename replaces a link of the target's
 * name, never follows it. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/files/files.h"

int gs_mkdirs(const char *path, gs_err *e) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
      return GS_FAIL(e, GS_EIO, "cannot create directory %s: %s", tmp, strerror(errno));
    *p = '/';
  }
  if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
    return GS_FAIL(e, GS_EIO, "cannot create directory %s: %s", tmp, strerror(errno));
  return GS_OK;
}

int gs_mkdir_below(const char *dir, const char *sub, gs_err *e) {
  char path[4200];
  int n = snprintf(path, sizeof path, "%s/%s", dir, sub);
  if (n < 0 || (size_t)n >= sizeof path) return GS_FAIL(e, GS_EINVAL, "%s/%s: too long", dir, sub);
  for (char *p = path + strlen(dir) + 1;; p++) {
    bool end = !*p;
    if (!end && *p != '/') continue;
    *p = 0;
    struct stat st;
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
      return GS_FAIL(e, GS_EIO, "cannot create directory %s: %s", path, strerror(errno));
    if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
      return GS_FAIL(e, GS_EINVAL, "%s is not a directory (a link?): the results of a run go "
                     "only into directories of their own; move it away", path);
    if (end) break;
    *p = '/';
  }
  return GS_OK;
}

/* The directory's entry of a rename is durable only once the directory is
 * synced too. */
static void sync_dir_of(const char *path) {
  char dir[4200];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  int fd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  fsync(fd);
  close(fd);
}

int gs_write_atomic(const char *path, const void *data, size_t len, gs_err *e) {
  /* a fresh name no one else can have made (O_EXCL) or planted as a link
   * (O_NOFOLLOW), in the target's directory so the rename stays there */
  char tmp[4200];
  int fd = -1;
  for (int tries = 0; fd < 0 && tries < 16; tries++) {
    unsigned char r[6];
    char hex[13];
    randombytes_buf(r, sizeof r);
    sodium_bin2hex(hex, sizeof hex, r, sizeof r);
    snprintf(tmp, sizeof tmp, "%s.tmp-%s", path, hex);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return GS_FAIL(e, GS_EIO, "cannot write %s: %s", tmp, strerror(errno));
  const char *p = data;
  size_t left = len;
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      close(fd);
      unlink(tmp);
      return GS_FAIL(e, GS_EIO, "writing %s: %s", tmp, strerror(err));
    }
    p += n;
    left -= (size_t)n;
  }
  if (fsync(fd) < 0 || close(fd) < 0) {
    int err = errno;
    unlink(tmp);
    return GS_FAIL(e, GS_EIO, "writing %s: %s", tmp, strerror(err));
  }
  if (rename(tmp, path) < 0) {
    int err = errno;
    unlink(tmp);
    return GS_FAIL(e, GS_EIO, "renaming %s to %s: %s", tmp, path, strerror(err));
  }
  sync_dir_of(path);
  return GS_OK;
}

int gs_json_write_atomic(const char *path, json_t *j, gs_err *e) {
  char *s = json_dumps(j, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
  if (!s) return GS_FAIL(e, GS_ENOMEM, "cannot serialise %s", path);
  size_t n = strlen(s);
  s[n] = '\n';
  int rc = gs_write_atomic(path, s, n + 1, e);
  free(s);
  return rc;
}
