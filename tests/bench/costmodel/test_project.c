/* test_project.c: plans and projections (bench/costmodel/projection.c).
 *  - a plan from parameter sizes is the project's planner's plan, in bytes;
 *  - the plan of the resnet50 profile, taken from the trainer, has its
 *    parameters, DDP's 1 MiB first bucket and 25 MiB buckets; fp16 halves
 *    the bytes; an unknown model is refused;
 *  - a projection has one row per world and mode, world-major, with hosts
 *    from the ranks per host, each mode's default overlap, and the same
 *    rows in its JSON and its table;
 *  - nonsense (world 0, uneven hosts, negative rates, unknown modes, no
 *    worlds...) is refused with a message naming it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt.h"
#include "worker/sync.h"

static void plan_sizes(void) {
  size_t sizes[6] = {300000, 20, 9000000, 500, 4000000, 10};
  gs_cm_plan p;
  gs_err e = {0};
  CHECK_OK(gs_cm_plan_from_sizes(sizes, 6, 4, 1, 25, &p, &e), &e);
  gs_bucket *b = NULL;
  int nb = 0;
  CHECK_OK(gs_plan_buckets(sizes, 6, 4, 1 << 20, 25 << 20, &b, &nb, &e), &e);
  CHECK(p.nbuckets == nb && p.nparams == 13300530 && p.elem_bytes == 4);
  double total = 0;
  for (int i = 0; i < nb && i < p.nbuckets; i++) {
    CHECK(p.bytes[i] == b[i].count * 4);
    total += (double)p.bytes[i];
  }
  CHECK(p.total == total && total == 4.0 * 13300530);
  free(b);
  gs_cm_plan_free(&p);
  CHECK(p.bytes == NULL && p.nbuckets == 0);
  CHECK(gs_cm_plan_from_sizes(sizes, 6, 4, -1, 25, &p, &e) == GS_EINVAL && strstr(e.msg, "-1"));
}

static void plan_profile(void) {
  gs_cm_plan p;
  gs_err e = {0};
  CHECK_OK(gs_cm_plan_model("resnet50", GS_F32, 1, 25, &p, &e), &e);
  CHECK(p.nparams == 25557032 && p.total == 4.0 * 25557032 && p.elem_bytes == 4);
  CHECK(p.nbuckets >= 4, "%d buckets", p.nbuckets);
  for (int i = 0; i < p.nbuckets; i++) {
    double mib = (double)p.bytes[i] / 1048576;
    if (i == 0) CHECK(mib >= 1 && mib < 25, "first bucket %.2f MiB", mib);
    else if (i < p.nbuckets - 1) CHECK(mib >= 25, "bucket %d %.2f MiB", i, mib);
  }
  gs_cm_plan_free(&p);
  CHECK_OK(gs_cm_plan_model("lenet", GS_F16, 1, 25, &p, &e), &e);
  CHECK(p.elem_bytes == 2 && p.total == 2.0 * (double)p.nparams && p.nbuckets == 1);
  gs_cm_plan_free(&p);
  gs_err_clear(&e);
  CHECK(gs_cm_plan_model("resnet5O", GS_F32, 1, 25, &p, &e) != GS_OK);
  CHECK(strstr(e.msg, "resnet5O"), "message: %s", e.msg);
}

static gs_cm_proj_in input(const gs_cm_plan *p, const int *worlds, int nw) {
  return (gs_cm_proj_in){.model = "test", .plan = p, .worlds = worlds, .nworlds = nw,
                         .ranks_per_host = 8, .overlap = -1, .batch = 32, .fwd_s = 1e-3,
                         .bwd_s = 2e-3};
}

static void projection(void) {
  size_t b[3] = {1 << 20, 25 << 20, 12 << 20};
  gs_cm_plan p = mt_plan(b, 3);
  gs_cm_machine m = mt_machine();
  static const int worlds[] = {1, 4, 8, 64, 512, 4096};
  gs_cm_proj_in in = input(&p, worlds, 6);
  gs_cm_projection pr;
  gs_err e = {0};
  CHECK_OK(gs_cm_project(&m, &in, &pr, &e), &e);
  if (!pr.rows) return;
  CHECK(pr.nrows == 6 * 4);
  static const gs_cm_mode order[] = {GS_CM_PS, GS_CM_RING, GS_CM_SPS_COLO, GS_CM_SPS_HOSTS};
  for (int i = 0; i < pr.nrows; i++) {
    const gs_cm_result *r = &pr.rows[i];
    int w = worlds[i / 4];
    CHECK(r->world == w && r->mode == order[i % 4]);
    CHECK(r->hosts == (w <= 8 ? 1 : w / 8) && r->ranks_per_host == w / r->hosts);
    CHECK(r->overlap == (r->mode == GS_CM_RING));
    if (w == 1) CHECK(r->efficiency == 1 && r->comm_s == 0);
  }
  /* at 4096 ranks the master has long lost to the ring */
  CHECK(pr.rows[5 * 4].efficiency < pr.rows[5 * 4 + 1].efficiency);
  CHECK(pr.rows[5 * 4].bottleneck == GS_CM_B_MASTER_LINK);

  json_t *j = gs_cm_projection_json(&pr);
  json_t *rows = json_object_get(j, "rows");
  CHECK(json_array_size(rows) == (size_t)pr.nrows);
  for (size_t i = 0; i < json_array_size(rows); i++) {
    json_t *r = json_array_get(rows, i);
    CHECK(!strcmp(json_string_value(json_object_get(r, "mode")), gs_cm_mode_name(pr.rows[i].mode)));
    CHECK(json_integer_value(json_object_get(r, "world")) == pr.rows[i].world);
    CHECK(json_real_value(json_object_get(r, "step_s_predicted")) == pr.rows[i].step_s);
    CHECK(!strcmp(json_string_value(json_object_get(r, "bottleneck")),
                  gs_cm_bottleneck_name(pr.rows[i].bottleneck)));
  }
  CHECK(json_real_value(json_object_get(json_object_get(j, "machine"), "link_Bps")) == m.link_Bps);
  CHECK(json_integer_value(json_object_get(j, "nbuckets")) == 3);
  /* no readiness given: in proportion to bytes, and the JSON says so */
  json_t *br = json_object_get(j, "bucket_ready");
  CHECK(json_array_size(br) == 3 && json_real_value(json_array_get(br, 2)) == 1.0 &&
        json_real_value(json_array_get(br, 0)) == (double)p.bytes[0] / p.total);
  CHECK(strstr(json_string_value(json_object_get(j, "ready_by")), "bytes"));
  json_decref(j);

  FILE *f = tmpfile();
  CHECK(f != NULL);
  if (f) {
    gs_cm_print_table(f, &pr);
    rewind(f);
    char line[512];
    int lines = 0, rows_seen = 0, ready_lines = 0;
    while (fgets(line, sizeof line, f)) {
      lines++;
      ready_lines += !strncmp(line, "  gradients ready: in proportion to bytes", 41);
      int world;
      char mode[16];
      if (sscanf(line, "%d %*d %15s", &world, mode) == 2 && rows_seen < pr.nrows) {
        CHECK(world == pr.rows[rows_seen].world);
        CHECK(!strcmp(mode, gs_cm_mode_name(pr.rows[rows_seen].mode)));
        rows_seen++;
      }
    }
    CHECK(rows_seen == pr.nrows && lines == pr.nrows + 7 && ready_lines == 1,
          "%d rows, %d lines", rows_seen, lines);
    fclose(f);
  }
  gs_cm_projection_free(&pr);

  in.overlap = 1;  /* everyone overlaps */
  static const gs_cm_mode two[] = {GS_CM_PS, GS_CM_RD};
  in.modes = two;
  in.nmodes = 2;
  in.worlds = worlds + 2;
  in.nworlds = 1;
  CHECK_OK(gs_cm_project(&m, &in, &pr, &e), &e);
  if (!pr.rows) return;
  CHECK(pr.nrows == 2 && pr.rows[0].overlap && pr.rows[1].overlap && pr.rows[1].mode == GS_CM_RD);
  gs_cm_projection_free(&pr);
}

static void refused(const gs_cm_machine *m, gs_cm_proj_in in, const char *needle) {
  gs_cm_projection pr;
  gs_err e = {0};
  int rc = gs_cm_project(m, &in, &pr, &e);
  CHECK(rc == GS_EINVAL && strstr(e.msg, needle), "expected '%s', got %d: %s", needle, rc, e.msg);
  CHECK(pr.rows == NULL && pr.nrows == 0);
}

static void rejects(void) {
  size_t b[1] = {1 << 20};
  gs_cm_plan p = mt_plan(b, 1);
  gs_cm_machine m = mt_machine();
  static const int w0[] = {8, 0}, w12[] = {12}, w6[] = {6};
  refused(&m, input(&p, w0, 2), "world 0");
  refused(&m, input(&p, w12, 1), "world 12 is not a multiple of 8");
  refused(&m, input(&p, w0, 0), "no world sizes");
  gs_cm_proj_in in = input(&p, w12, 1);
  in.ranks_per_host = 0;
  refused(&m, in, "0 ranks per host");
  in = input(&p, w0, 1);
  in.overlap = 2;
  refused(&m, in, "overlap 2");
  in = input(&p, w0, 1);
  in.server_hosts = -1;
  refused(&m, in, "server hosts");
  gs_cm_mode bogus[1] = {(gs_cm_mode)9};
  in = input(&p, w0, 1);
  in.modes = bogus;
  in.nmodes = 1;
  refused(&m, in, "unknown mode 9");
  in = input(&p, w0, 1);
  in.plan = NULL;
  refused(&m, in, "plan");
  gs_cm_machine neg = m;
  neg.reduce_Bps = -3;
  refused(&neg, input(&p, w0, 1), "reduction rate");
  /* a mode that cannot take the world says which */
  static const gs_cm_mode rd[] = {GS_CM_RD};
  in = input(&p, w6, 1);
  in.modes = rd;
  in.nmodes = 1;
  refused(&m, in, "world 6, rd");
  in = input(&p, w0, 1);
  in.batch = -4;
  refused(&m, in, "batch -4");
}

/* --hosts-per 8 with hosts reducing first: every mode's links carry what
 * hosts of one rank would (ps: (K-1) S at the master, the ring 2(K-1)/K S,
 * sps-colo 2(K-1)/K S, sps-hosts S per worker host), and no mode is slower
 * than its flat self; the table and the JSON say so. */
static void host_reduce(void) {
  size_t b[3] = {1 << 20, 25 << 20, 12 << 20};
  gs_cm_plan p = mt_plan(b, 3);
  gs_cm_machine m = mt_machine();
  static const int worlds[] = {64, 4096};
  gs_cm_proj_in in = input(&p, worlds, 2);
  gs_cm_projection flat, hr;
  gs_err e = {0};
  CHECK_OK(gs_cm_project(&m, &in, &flat, &e), &e);
  in.host_reduce = true;
  CHECK_OK(gs_cm_project(&m, &in, &hr, &e), &e);
  if (!flat.rows || !hr.rows) return;
  CHECK(hr.host_reduce && !flat.host_reduce && hr.nrows == flat.nrows);
  double S = p.total;
  for (int i = 0; i < hr.nrows; i++) {
    const gs_cm_result *r = &hr.rows[i];
    double K = r->hosts, want = r->mode == GS_CM_PS ? (K - 1) * S
                                : r->mode == GS_CM_SPS_HOSTS ? S : 2 * (K - 1) / K * S;
    double got = r->mode == GS_CM_SPS_HOSTS ? r->worker_in : r->hot_in;
    CHECK(mt_near(got, want, 1e-12), "%s world %d: %g bytes on the link, want %g",
          gs_cm_mode_name(r->mode), r->world, got, want);
    CHECK(r->step_s <= flat.rows[i].step_s * (1 + 1e-9), "%s world %d: %g s, flat %g s",
          gs_cm_mode_name(r->mode), r->world, r->step_s, flat.rows[i].step_s);
  }
  json_t *j = gs_cm_projection_json(&hr);
  CHECK(json_is_true(json_object_get(j, "host_reduce")));
  json_decref(j);
  FILE *f = tmpfile();
  if (f) {
    gs_cm_print_table(f, &hr);
    rewind(f);
    char line[512];
    bool said = false;
    while (fgets(line, sizeof line, f)) said |= strstr(line, "each host reducing first") != NULL;
    CHECK(said, "the table does not say hosts reduce first");
    fclose(f);
  }
  gs_cm_projection_free(&flat);
  gs_cm_projection_free(&hr);
}

int main(void) {
  host_reduce();
  plan_sizes();
  plan_profile();
  projection();
  rejects();
  return check_done("model_project");
}
