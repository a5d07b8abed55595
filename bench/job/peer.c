/* peer.c: `bench --peer torch`: PyTorch DistributedDataParallel (gloo)
 * trained in the same invocation as ps and ring, on the same model, batch
 * per rank, synthetic data, steps, warm-up, optimizer settings and worlds,
 * with the BLAS / OpenMP threads per rank our ranks get, so that its row
 * sits beside theirs as a like-for-like measurement. The peer is
 * bench/peers/torch_ddp.py run by /usr/bin/python3 (GS_PEER_PYTHON and
 * GS_PEERS_DIR point elsewhere; an installed bench whose source tree is
 * gone runs the copy under share/gradsync/peers); it prints one JSON
 * object, which becomes
 * a row of report.json's "peers" and of the comparison tables. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/job/job.h"
#include "bench/report/report.h"

#ifndef GS_PEERS_DIR
#define GS_PEERS_DIR "bench/peers"
#endif
#ifndef GS_PEERS_INSTALLED
#define GS_PEERS_INSTALLED "/usr/local/share/gradsync/peers"
#endif

const char *const GS_PEER_LABEL = "torch-ddp (gloo)";

static const char *python(void) {
  const char *p = getenv("GS_PEER_PYTHON");
  return p && *p ? p : "/usr/bin/python3";
}

/* argv run with stdout captured (malloc'ed into *out); stderr passes
 * through. Returns the exit status, 128+signal, or -1 (errno). */
static int capture(char *const argv[], char **out) {
  *out = NULL;
  int fd[2];
  if (pipe(fd) < 0) return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(fd[0]);
    close(fd[1]);
    return -1;
  }
  if (pid == 0) {
    dup2(fd[1], STDOUT_FILENO);
    close(fd[0]);
    close(fd[1]);
    execv(argv[0], argv);
    fprintf(stderr, "bench: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(fd[1]);
  size_t len = 0, cap = 4096;
  char *buf = malloc(cap);
  for (ssize_t n = 1; buf && n != 0;) {
    if (len + 1 == cap) {
      char *more = realloc(buf, cap *= 2);
      if (!more) break;
      buf = more;
    }
    n = read(fd[0], buf + len, cap - len - 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    len += (size_t)n;
  }
  close(fd[0]);
  if (buf) buf[len] = 0;
  *out = buf;
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}

int gs_peer_check(const gs_opts *o, gs_err *e) {
  if (!o->peer) return GS_OK;
  if (o->collective)
    return GS_FAIL(e, GS_EINVAL, "--peer compares training runs; the collective benchmark has "
                   "none: drop --peer or --collective");
  if (o->link_bps)
    return GS_FAIL(e, GS_EINVAL, "--peer torch runs over this machine's loopback, not over "
                   "emulated links (--link): its row would not share the network; drop one");
  if (strcmp(o->train.data, "synthetic"))
    return GS_FAIL(e, GS_EINVAL, "--peer torch trains on synthetic data only (--data %s)",
                   o->train.data);
  if (o->train.precision != GS_F32 || (strcmp(o->device, "cpu") && strcmp(o->device, "auto")))
    return GS_FAIL(e, GS_EINVAL, "--peer torch runs fp32 on the CPU: give --precision fp32 "
                   "and --device cpu, or drop --peer");
  if (o->train.steps <= o->warmup)
    return GS_FAIL(e, GS_EINVAL, "--peer torch measures the steps after --warmup %d: give more "
                   "--steps than that (%lld)", o->warmup, (long long)o->train.steps);
  for (int i = 0; i < o->nmodels; i++)
    if (strncmp(o->models[i], "mlp:", 4) && strcmp(o->models[i], "lenet"))
      return GS_FAIL(e, GS_EINVAL, "--peer torch trains mlp:IN-H...-OUT and lenet, not %s",
                     o->models[i]);
  char *argv[] = {(char *)python(), "-c", "import torch, torch.distributed; "
                  "assert torch.distributed.is_available()", NULL};
  char *out = NULL;
  int rc = capture(argv, &out);
  free(out);
  if (rc != 0)
    return GS_FAIL(e, GS_EINVAL, "--peer torch: %s cannot import torch with torch.distributed "
                   "(exit %d): install PyTorch for it, or drop --peer", argv[0], rc);
  return GS_OK;
}

int gs_peer_run(const gs_opts *o, int world, json_t **row, gs_err *e) {
  *row = NULL;
  const char *dir = getenv("GS_PEERS_DIR");
  char script[4200], sw[16], sb[16], ss[32], swu[16], sth[16], slr[32], smo[32], swd[32],
      sbk[32], sto[32];
  /* the source tree's, else the installed copy (a bench installed and its
   * source removed) */
  snprintf(script, sizeof script, "%s/torch_ddp.py", dir && *dir ? dir : GS_PEERS_DIR);
  if (!(dir && *dir) && access(script, R_OK) != 0)
    snprintf(script, sizeof script, "%s/torch_ddp.py", GS_PEERS_INSTALLED);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = o->threads > 0 ? o->threads : (int)((cores < 1 ? 1 : cores) / world);
  const gs_train_opts *t = &o->train;
  snprintf(sw, sizeof sw, "%d", world);
  snprintf(sb, sizeof sb, "%d", t->batch);
  snprintf(ss, sizeof ss, "%lld", (long long)t->steps);
  snprintf(swu, sizeof swu, "%d", o->warmup);
  snprintf(sth, sizeof sth, "%d", threads < 1 ? 1 : threads);
  snprintf(slr, sizeof slr, "%.9g", (double)t->lr);
  snprintf(smo, sizeof smo, "%.9g", (double)t->momentum);
  snprintf(swd, sizeof swd, "%.9g", (double)t->weight_decay);
  snprintf(sbk, sizeof sbk, "%.17g", t->bucket_mb);
  snprintf(sto, sizeof sto, "%.17g", o->timeout_s);
  char *argv[] = {(char *)python(), script, "--model", (char *)t->model, "--world", sw,
                  "--batch", sb, "--steps", ss, "--warmup", swu, "--threads", sth, "--lr", slr,
                  "--momentum", smo, "--weight-decay", swd, "--bucket-mb", sbk, "--timeout",
                  sto, t->freeze ? "--freeze" : NULL, (char *)t->freeze, NULL};
  char *out = NULL;
  int rc = capture(argv, &out);
  json_error_t je;
  json_t *j = rc == 0 && out ? json_loads(out, 0, &je) : NULL;
  free(out);
  if (rc != 0)
    return GS_FAIL(e, rc < 0 ? GS_EIO : GS_EINVAL, "%s world %d: %s %s exited with status %d",
                   GS_PEER_LABEL, world, argv[0], script, rc);
  if (!json_is_object(j) || !json_is_number(json_object_get(j, "throughput_samples_per_s"))) {
    json_decref(j);
    return GS_FAIL(e, GS_EPROTO, "%s world %d: %s printed no result object", GS_PEER_LABEL,
                   world, script);
  }
  json_object_set_new(j, "mode", json_string(GS_PEER_LABEL));
  json_object_set_new(j, "bucket_mb", json_real(t->bucket_mb));
  json_object_set_new(j, "data", json_string(t->data));
  json_object_set_new(j, "measured", json_string("in the same bench invocation as ps and ring"));
  *row = j;
  return GS_OK;
}
