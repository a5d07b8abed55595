/* example.c: prints a cost-model projection from key=value arguments, to
 * reproduce the tables of docs/model.md with every input as a number (bench
 * --project takes them from a calibration file instead):
 *
 *   costmodel_example model=resnet50 worlds=8,64,512,4096 per_host=8 \
 *     link_gbit=100 latency_us=5 alpha_us=5 local_GBps=100 reduce_GBps=300 \
 *     copy_GBps=500 optim_gpps=10 fwd_ms=1.52 bwd_ms=3.05 batch=64
 *
 * Also: wire=fp32|fp16|bf16, first_mb=1, cap_mb=25, overlap=-1|0|1,
 * server_hosts=0, modes=ps,ring,sps-colo,sps-hosts,rd, barrier=0|1, json=1,
 * ready=F0,F1,... (per bucket, the fraction of backward done when it is ready). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/costmodel/costmodel.h"

static int usage(const char *why) {
  fprintf(stderr, "costmodel_example: %s\n(see the comment at the top of "
          "tests/bench/costmodel/example.c)\n", why);
  return 2;
}

int main(int argc, char **argv) {
  double link_gbit = 100, latency_us = 5, alpha_us = 5, local = 100, reduce = 300, copy = 500;
  double optim = 10, fwd_ms = 1, bwd_ms = 2, first_mb = 1, cap_mb = 25;
  double batch = 64, per_host = 8, overlap = -1, server_hosts = 0, json = 0, barrier = 0;
  const char *model = "resnet50", *wire = "fp32", *worlds_s = "8,64,512,4096", *modes_s = NULL;
  const char *ready_s = NULL;
  struct {
    const char *key;
    double *v;
  } nums[] = {{"link_gbit", &link_gbit}, {"latency_us", &latency_us}, {"alpha_us", &alpha_us},
              {"local_GBps", &local}, {"reduce_GBps", &reduce}, {"copy_GBps", &copy},
              {"optim_gpps", &optim}, {"fwd_ms", &fwd_ms}, {"bwd_ms", &bwd_ms},
              {"first_mb", &first_mb}, {"cap_mb", &cap_mb}, {"batch", &batch},
              {"per_host", &per_host}, {"overlap", &overlap}, {"server_hosts", &server_hosts},
              {"json", &json}, {"barrier", &barrier}};
  for (int i = 1; i < argc; i++) {
    char *eq = strchr(argv[i], '=');
    if (!eq) return usage("arguments are key=value");
    *eq = 0;
    const char *k = argv[i], *v = eq + 1;
    bool found = false;
    if (!strcmp(k, "model")) model = v, found = true;
    if (!strcmp(k, "wire")) wire = v, found = true;
    if (!strcmp(k, "worlds")) worlds_s = v, found = true;
    if (!strcmp(k, "modes")) modes_s = v, found = true;
    if (!strcmp(k, "ready")) ready_s = v, found = true;
    for (size_t n = 0; n < sizeof nums / sizeof nums[0] && !found; n++)
      if (!strcmp(k, nums[n].key)) {
        char *end;
        errno = 0;
        *nums[n].v = strtod(v, &end);
        if (errno || end == v || *end) return usage("a number is malformed");
        found = true;
      }
    if (!found) return usage("unknown key");
  }
  int dt = gs_dtype_parse(wire);
  if (dt < 0) return usage("wire: fp32, fp16 or bf16");
  int worlds[32], nworlds = 0;
  gs_cm_mode modes[GS_CM_NMODES];
  int nmodes = 0;
  gs_err e = {0};
  char buf[512];
  snprintf(buf, sizeof buf, "%s", worlds_s);
  for (char *t = strtok(buf, ","); t && nworlds < 32; t = strtok(NULL, ",")) worlds[nworlds++] = atoi(t);
  if (modes_s) {
    snprintf(buf, sizeof buf, "%s", modes_s);
    for (char *t = strtok(buf, ","); t && nmodes < GS_CM_NMODES; t = strtok(NULL, ","))
      if (gs_cm_mode_parse(t, &modes[nmodes++], &e)) return usage(e.msg);
  }
  gs_cm_machine m = {.link_Bps = link_gbit * 1e9 / 8, .link_latency_s = latency_us * 1e-6,
                     .alpha_s = alpha_us * 1e-6, .local_Bps = local * 1e9,
                     .reduce_Bps = reduce * 1e9, .copy_Bps = copy * 1e9, .optim_pps = optim * 1e9};
  gs_cm_plan plan;
  if (gs_cm_plan_model(model, (gs_dtype)dt, first_mb, cap_mb, &plan, &e)) return usage(e.msg);
  double ready[64];
  int nready = 0;
  if (ready_s) {
    snprintf(buf, sizeof buf, "%s", ready_s);
    for (char *t = strtok(buf, ","); t && nready < 64; t = strtok(NULL, ",")) ready[nready++] = atof(t);
    if (nready != plan.nbuckets) {
      gs_cm_plan_free(&plan);
      return usage("ready: give one fraction per bucket");
    }
  }
  gs_cm_proj_in in = {.model = model, .plan = &plan, .worlds = worlds, .nworlds = nworlds,
                      .ranks_per_host = (int)per_host, .modes = modes_s ? modes : NULL,
                      .nmodes = nmodes, .server_hosts = (int)server_hosts, .batch = (int)batch,
                      .fwd_s = fwd_ms * 1e-3, .bwd_s = bwd_ms * 1e-3, .overlap = (int)overlap,
                      .barrier = barrier != 0, .ready = ready_s ? ready : NULL};
  gs_cm_projection pr;
  int rc = gs_cm_project(&m, &in, &pr, &e);
  gs_cm_plan_free(&plan);
  if (rc) return usage(e.msg);
  if (json) {
    json_t *j = gs_cm_projection_json(&pr);
    json_dumpf(j, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(6));
    putchar('\n');
    json_decref(j);
  } else {
    gs_cm_print_table(stdout, &pr);
  }
  gs_cm_projection_free(&pr);
  return 0;
}
