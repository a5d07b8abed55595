/* secret.c: where a rank's job secret comes from (job.h,
 * gs_job_secret), in this order:
 *   1. --secret-file F: a regular file (not a link) that only its owner
 *      can read;
 *   2. GS_JOB_SECRET (bench's own launcher puts a fresh one there per job);
 *   3. a job whose every socket listens on loopback only: the user's own
 *      secret file, $XDG_CONFIG_HOME/gradsync/secret (else
 *      ~/.config/gradsync/secret), made on first use with 32 random bytes
 *      and mode 0600 in a directory of mode 0700. Another user of the
 *      machine can reach loopback ports too; this file is what keeps them
 *      out of a job started by hand (torchrun on one node, say);
 *   4. else the job refuses to start: something listens beyond loopback.
 * A secret shorter than 16 bytes is refused, with how to make one. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/job/job.h"
#include "proto/proto.h"

#define SECRET_MAX 4096
#define SECRET_MIN 16
#define MAKE_ONE "make one with: head -c 32 /dev/urandom | base64 > ~/.gradsync-secret && " \
                 "chmod 600 ~/.gradsync-secret; then give every rank --secret-file "       \
                 "~/.gradsync-secret (or export GS_JOB_SECRET=\"$(cat ~/.gradsync-secret)\")"

void gs_secret_new(char out[2 * GS_KEY_BYTES + 1]) {
  unsigned char b[GS_KEY_BYTES];
  randombytes_buf(b, sizeof b);
  sodium_bin2hex(out, 2 * GS_KEY_BYTES + 1, b, sizeof b);
  sodium_memzero(b, sizeof b);
}

/* Read a secret file: a regular file, not a link, that only its owner can
 * read (own: and that owner is this user). */
static int read_secret(const char *what, const char *file, bool own, char *buf, size_t *len,
                       gs_err *e) {
  int fd = open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return GS_FAIL(e, errno == ENOENT ? GS_EINVAL : GS_EIO, "%s %s: %s%s", what, file,
                   strerror(errno), errno == ELOOP ? " (a symbolic link: give the file itself)"
                                                   : "");
  struct stat st;
  int rc = GS_OK;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
    rc = GS_FAIL(e, GS_EINVAL, "%s %s is not a regular file", what, file);
  else if (st.st_mode & 077)
    rc = GS_FAIL(e, GS_EINVAL, "%s %s can be read by others (mode %03o): run chmod 600 %s",
                 what, file, (unsigned)(st.st_mode & 0777), file);
  else if (own && st.st_uid != geteuid())
    rc = GS_FAIL(e, GS_EINVAL, "%s %s belongs to user %u, not to this user (%u): remove it, "
                 "or set XDG_CONFIG_HOME to a directory of your own", what, file,
                 (unsigned)st.st_uid, (unsigned)geteuid());
  ssize_t n = rc == GS_OK ? read(fd, buf, SECRET_MAX) : 0;
  close(fd);
  if (rc < 0) return rc;
  if (n < 0) return GS_FAIL(e, GS_EIO, "%s %s: %s", what, file, strerror(errno));
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) n--;
  *len = (size_t)n;
  return GS_OK;
}

/* mkdir -p of the user's directory, each level made 0700; the last level
 * must be this user's, and writable by no one else. */
static int own_dir(const char *dir, gs_err *e) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", dir);
  for (char *p = tmp + 1;; p++) {
    bool end = !*p;
    if (!end && *p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
      return GS_FAIL(e, GS_EIO, "cannot make %s for your job secret: %s", tmp, strerror(errno));
    if (end) break;
    *p = '/';
  }
  struct stat st;
  if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 022))
    return GS_FAIL(e, GS_EINVAL, "%s, where your job secret goes, is not a directory of yours "
                   "that only you can write: fix it, or set XDG_CONFIG_HOME", dir);
  return GS_OK;
}

/* Write a fresh secret to path, unless another rank was first (link
 * fails then, and its secret is the one read back). */
static int make_secret(const char *dir, const char *path, gs_err *e) {
  char tmp[4200], hex[2 * GS_KEY_BYTES + 2];
  gs_secret_new(hex);
  size_t n = strlen(hex);
  hex[n++] = '\n';
  unsigned char r[6];
  char rh[13];
  randombytes_buf(r, sizeof r);
  sodium_bin2hex(rh, sizeof rh, r, sizeof r);
  snprintf(tmp, sizeof tmp, "%s/.secret.tmp-%s", dir, rh);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return GS_FAIL(e, GS_EIO, "cannot make %s: %s", tmp, strerror(errno));
  bool ok = write(fd, hex, n) == (ssize_t)n && fsync(fd) == 0;
  close(fd);
  sodium_memzero(hex, sizeof hex);
  int rc = GS_OK;
  if (!ok) rc = GS_FAIL(e, GS_EIO, "cannot write %s: %s", tmp, strerror(errno));
  else if (link(tmp, path) == 0)
    fprintf(stderr, "bench: made %s (mode 0600): the job secret of your jobs on loopback, "
            "so that other users of this machine cannot join them\n", path);
  else if (errno != EEXIST)
    rc = GS_FAIL(e, GS_EIO, "cannot make %s: %s", path, strerror(errno));
  unlink(tmp);
  return rc;
}

/* The user's own secret, made on first use. */
static int user_secret(char *buf, size_t *len, gs_err *e) {
  char dir[4096], path[4200];
  const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
  struct passwd *pw = NULL;
  if (xdg && xdg[0] == '/') snprintf(dir, sizeof dir, "%s/gradsync", xdg);
  else if ((home && home[0] == '/') || ((pw = getpwuid(geteuid())) && pw->pw_dir[0] == '/'))
    snprintf(dir, sizeof dir, "%s/.config/gradsync", home && home[0] == '/' ? home : pw->pw_dir);
  else
    return GS_FAIL(e, GS_EINVAL, "no job secret, and no home directory to keep one in: %s",
                   MAKE_ONE);
  snprintf(path, sizeof path, "%s/secret", dir);
  GS_TRY(own_dir(dir, e));
  struct stat st;
  if (lstat(path, &st) < 0 && errno == ENOENT) GS_TRY(make_secret(dir, path, e));
  return read_secret("your job secret", path, true, buf, len, e);
}

int gs_job_secret(const char *file, const char *listens, bool encrypt, gs_cred *c, gs_err *e) {
  char buf[SECRET_MAX];
  size_t len = 0;
  const char *env = getenv("GS_JOB_SECRET"), *what = "GS_JOB_SECRET";
  int rc = GS_OK;
  if (file) {
    what = "--secret-file";
    rc = read_secret("--secret-file", file, false, buf, &len, e);
  } else if (env && *env) {
    len = strlen(env) < SECRET_MAX ? strlen(env) : SECRET_MAX;
    memcpy(buf, env, len);
  } else if (!listens) {
    what = "your job secret";
    rc = user_secret(buf, &len, e);
  } else {
    return GS_FAIL(e, GS_EINVAL, "this rank listens on %s, beyond loopback, so the job needs a "
                   "secret, or anyone who reaches its ports could join or stop it: give every "
                   "rank the same one (%s)", listens, MAKE_ONE);
  }
  if (rc == GS_OK && len < SECRET_MIN)
    rc = GS_FAIL(e, GS_EINVAL, "%s holds %zu bytes; a job secret needs at least %d: %s", what,
                 len, SECRET_MIN, MAKE_ONE);
  if (rc == GS_OK) rc = gs_cred_derive(c, buf, len, encrypt, e);
  sodium_memzero(buf, sizeof buf);
  return rc;
}
