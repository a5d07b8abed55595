/* checkpoint.c: a model's parameters as a directory of NumPy .npy files,
 * one per tensor named as PyTorch's state_dict keys ("fc1.weight.npy"),
 * written into a temporary directory, synced, and renamed over the old
 * one (exchanged atomically where the filesystem can), so a reader sees
 * the old checkpoint or the new one, never half of either; and never a
 * directory removed that holds anything we did not write. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "worker/model.h"
#include "worker/npy.h"

static int fsync_dir(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

static bool has_suffix(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

/* Remove a directory holding only .npy files (ours); anything else stays
 * and is reported. */
static int remove_npy_dir(const char *dir, gs_err *e) {
  DIR *d = opendir(dir);
  if (!d) return GS_FAIL(e, GS_EIO, "cannot open %s: %s", dir, strerror(errno));
  struct dirent *de;
  int rc = GS_OK;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    char path[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    if (!has_suffix(de->d_name, ".npy") || unlink(path) != 0)
      rc = GS_FAIL(e, GS_EIO, "cannot remove %s", path);
  }
  closedir(d);
  if (rc == 0 && rmdir(dir) != 0) rc = GS_FAIL(e, GS_EIO, "cannot remove %s: %s", dir, strerror(errno));
  return rc;
}

/* An existing checkpoint directory may be replaced only if it holds
 * nothing but .npy files: never delete what we did not write. */
static int check_replaceable(const char *dir, gs_err *e) {
  DIR *d = opendir(dir);
  if (!d) return GS_FAIL(e, GS_EIO, "--save-params %s exists and cannot be read: %s", dir, strerror(errno));
  struct dirent *de;
  int rc = GS_OK;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    if (!has_suffix(de->d_name, ".npy")) {
      rc = GS_FAIL(e, GS_EIO,
                   "--save-params %s: the directory exists and holds %s, which is not a "
                   "checkpoint tensor; choose another directory or remove it",
                   dir, de->d_name);
      break;
    }
  }
  closedir(d);
  return rc;
}

int gs_ckpt_save(const char *dir_in, const gs_tensor *tensors, int ntensors, const float *host,
                 gs_err *e) {
  char dir[PATH_MAX - 64];
  if (!dir_in || !*dir_in) return GS_FAIL(e, GS_EINVAL, "--save-params: empty directory name");
  if (snprintf(dir, sizeof dir, "%s", dir_in) >= (int)sizeof dir)
    return GS_FAIL(e, GS_EINVAL, "--save-params: path too long");
  size_t len = strlen(dir);
  while (len > 1 && dir[len - 1] == '/') dir[--len] = '\0';
  struct stat st;
  bool exists = lstat(dir, &st) == 0;
  if (exists && !S_ISDIR(st.st_mode))
    return GS_FAIL(e, GS_EIO, "--save-params %s exists and is not a directory", dir);
  if (exists) GS_TRY(check_replaceable(dir, e));

  int rc = GS_OK;
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", dir);
  if (rc == 0 && !mkdtemp(tmp))
    rc = GS_FAIL(e, GS_EIO, "--save-params: cannot create %s: %s", tmp, strerror(errno));
  bool made = rc == 0;
  for (int i = 0; rc == 0 && i < ntensors; i++) {
    const gs_tensor *ts = &tensors[i];
    char path[PATH_MAX + 80];
    snprintf(path, sizeof path, "%s/%s.npy", tmp, ts->name);
    rc = gs_npy_write(path, host + ts->offset, ts->ndim, ts->shape, e);
  }
  if (rc == 0 && fsync_dir(tmp) != 0)
    rc = GS_FAIL(e, GS_EIO, "--save-params: cannot sync %s: %s", tmp, strerror(errno));
  if (rc == 0) {
    if (!exists) {
      if (rename(tmp, dir) != 0)
        rc = GS_FAIL(e, GS_EIO, "--save-params: cannot rename %s to %s: %s", tmp, dir,
                     strerror(errno));
      else made = false;
    } else if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_EXCHANGE) == 0) {
      /* tmp now holds the previous checkpoint */
      rc = remove_npy_dir(tmp, e);
      made = false;
    } else {
      /* no atomic exchange on this filesystem: move the old one aside */
      char old[PATH_MAX];
      snprintf(old, sizeof old, "%s.old-XXXXXX", dir);
      if (!mkdtemp(old) || rmdir(old) != 0 || rename(dir, old) != 0) {
        rc = GS_FAIL(e, GS_EIO, "--save-params: cannot move the old %s aside: %s", dir,
                     strerror(errno));
      } else if (rename(tmp, dir) != 0) {
        rc = GS_FAIL(e, GS_EIO, "--save-params: cannot rename %s to %s: %s (the previous "
                     "checkpoint is in %s)", tmp, dir, strerror(errno), old);
      } else {
        made = false;
        rc = remove_npy_dir(old, e);
      }
    }
  }
  if (made) {
    gs_err ignore = {0};
    remove_npy_dir(tmp, &ignore);
  }
  if (rc == 0) {
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash == parent) parent[1] = '\0';
    else if (slash) *slash = '\0';
    else snprintf(parent, sizeof parent, ".");
    fsync_dir(parent);
  }
  return rc;
}


int gs_ckpt_load(const char *dir, const gs_tensor *tensors, int ntensors, float *host,
                 gs_err *e) {
  for (int i = 0; i < ntensors; i++) {
    const gs_tensor *ts = &tensors[i];
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s.npy", dir, ts->name) >= (int)sizeof path)
      return GS_FAIL(e, GS_EINVAL, "--load-params %s: path too long", dir);
    int rc = gs_npy_read(path, host + ts->offset, ts->ndim, ts->shape, e);
    if (rc) {
      gs_err_prefix(e, "--load-params: ");
      return rc;
    }
  }
  return GS_OK;
}

