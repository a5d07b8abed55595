/* projection.c: the cost model over many worlds and modes (costmodel.h):
 * bucket plans from the project's own planner, the projection rows, and
 * their two renderings (a terminal table, a JSON object a chart can read). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/costmodel/costmodel.h"
#include "worker/worker.h"

#define MiB 1048576.0

/* ---- plans ---- */

static int check_caps(double first_mb, double cap_mb, gs_err *e) {
  if (!(first_mb >= 0 && first_mb <= 1e6) || !(cap_mb >= 0 && cap_mb <= 1e6))
    return GS_FAIL(e, GS_EINVAL, "bucket caps %g / %g MiB: must be between 0 and 1e6", first_mb,
                   cap_mb);
  return GS_OK;
}

/* Own a plan from buckets in elements; offsets (ntensors, may be 0): where
 * each tensor starts, for each bucket's first tensor. */
static int plan_from_buckets(const gs_bucket *b, int nb, size_t nparams, size_t elem_bytes,
                             const size_t *offsets, int ntensors, gs_cm_plan *out, gs_err *e) {
  out->bytes = malloc((size_t)nb * sizeof *out->bytes);
  if (!out->bytes) return GS_FAIL(e, GS_ENOMEM, "bucket plan: out of memory");
  out->nbuckets = nb;
  out->nparams = nparams;
  out->elem_bytes = elem_bytes;
  out->total = 0;
  for (int i = 0; i < nb; i++) {
    out->bytes[i] = b[i].count * elem_bytes;
    out->total += (double)out->bytes[i];
  }
  if (ntensors < 1) return GS_OK;
  out->first_tensor = malloc((size_t)nb * sizeof *out->first_tensor);
  if (!out->first_tensor) return GS_FAIL(e, GS_ENOMEM, "bucket plan: out of memory");
  out->ntensors = ntensors;
  for (int i = 0; i < nb; i++) {
    int t = 0;
    while (t + 1 < ntensors && offsets[t + 1] <= b[i].offset) t++;
    out->first_tensor[i] = t;
  }
  return GS_OK;
}

int gs_cm_plan_from_sizes(const size_t *param_sizes, int nparams, size_t elem_bytes,
                          double first_mb, double cap_mb, gs_cm_plan *out, gs_err *e) {
  memset(out, 0, sizeof *out);
  GS_TRY(check_caps(first_mb, cap_mb, e));
  gs_bucket *b = NULL;
  int nb = 0;
  GS_TRY(gs_plan_buckets(param_sizes, nparams, elem_bytes, (size_t)(first_mb * MiB),
                         (size_t)(cap_mb * MiB), &b, &nb, e));
  size_t *offsets = malloc((size_t)nparams * sizeof *offsets);
  size_t total = 0;
  for (int i = 0; offsets && i < nparams; i++) {
    offsets[i] = total;
    total += param_sizes[i];
  }
  int rc = offsets ? plan_from_buckets(b, nb, total, elem_bytes, offsets, nparams, out, e)
                   : GS_FAIL(e, GS_ENOMEM, "bucket plan: out of memory");
  free(offsets);
  free(b);
  if (rc) gs_cm_plan_free(out);
  return rc;
}

/* per tensor of the trainer: its value from get, or NULL when all are 0 */
static int per_tensor(const gs_trainer *t, double (*get)(const gs_trainer *, int), double **out,
                      gs_err *e) {
  int n = gs_trainer_ntensors(t);
  *out = malloc((size_t)n * sizeof **out);
  if (!*out) return GS_FAIL(e, GS_ENOMEM, "bucket plan: out of memory");
  double total = 0;
  for (int i = 0; i < n; i++) total += (*out)[i] = get(t, i);
  if (!(total > 0)) {
    free(*out);
    *out = NULL;
  }
  return GS_OK;
}

/* the trainer's tensors: where each starts, a profile's layer work and its
 * measured backward */
static int tensors_of(const gs_trainer *t, size_t **offsets, gs_cm_plan *p, gs_err *e) {
  int n = gs_trainer_ntensors(t);
  *offsets = malloc((size_t)n * sizeof **offsets);
  if (!*offsets) return GS_FAIL(e, GS_ENOMEM, "bucket plan: out of memory");
  for (int i = 0; i < n; i++) (*offsets)[i] = gs_trainer_tensor_offset(t, i);
  GS_TRY(per_tensor(t, gs_trainer_tensor_macs, &p->tensor_macs, e));
  GS_TRY(per_tensor(t, gs_trainer_tensor_backward_s, &p->tensor_bwd_s, e));
  gs_trainer_profile_compute(t, &p->prof_fwd_s, &p->prof_bwd_s);
  return GS_OK;
}

int gs_cm_plan_model(const char *model, gs_dtype wire, double first_mb, double cap_mb,
                     gs_cm_plan *out, gs_err *e) {
  memset(out, 0, sizeof *out);
  GS_TRY(check_caps(first_mb, cap_mb, e));
  gs_kernels *k = gs_kernels_cpu(1, e);
  if (!k) return e && e->code ? e->code : GS_EDEVICE;
  gs_train_opts o;
  gs_train_opts_default(&o);
  o.model = model;
  o.batch = 1;
  o.compute_ms = 0;          /* no emulated compute: only the tensors matter */
  o.synthetic_samples = 16;
  o.precision = wire;
  o.first_bucket_mb = first_mb;
  o.bucket_mb = cap_mb;
  gs_trainer *t = NULL;
  int rc = gs_trainer_create(&o, k, &t, e);
  if (rc == GS_OK) {
    gs_sync_config c;
    memset(&c, 0, sizeof c);
    gs_trainer_sync_config(t, &c);
    size_t *offsets = NULL;
    rc = tensors_of(t, &offsets, out, e);
    if (rc == GS_OK)
      rc = plan_from_buckets(c.buckets, c.nbuckets, gs_trainer_nparams(t), gs_dtype_size(wire),
                             offsets, gs_trainer_ntensors(t), out, e);
    free(offsets);
    gs_trainer_destroy(t);
  } else {
    gs_err_prefix(e, "bucket plan of %s: ", model);
  }
  k->destroy(k);
  if (rc) gs_cm_plan_free(out);
  return rc;
}

void gs_cm_plan_free(gs_cm_plan *p) {
  free(p->bytes);
  free(p->first_tensor);
  free(p->tensor_macs);
  free(p->tensor_bwd_s);
  memset(p, 0, sizeof *p);
}

/* ---- projection ---- */

static const gs_cm_mode default_modes[] = {GS_CM_PS, GS_CM_RING, GS_CM_SPS_COLO, GS_CM_SPS_HOSTS};

static bool overlap_default(gs_cm_mode m) {
  return m == GS_CM_RING || m == GS_CM_RD || m == GS_CM_BYTEPS;
}

/* BytePS over its spare hosts, at every world of more than one host: the
 * ring's row (as DDP: overlap), then byteps at k = 0 .. min(spare_max,
 * hosts), each host summing its ranks first as BytePS does; the best k and
 * its speed-up over the ring. */
static int spare_sweep(const gs_cm_machine *m, const gs_cm_proj_in *in, gs_cm_projection *out,
                       gs_err *e) {
  int n = in->ranks_per_host, rows = 0;
  for (int w = 0; w < in->nworlds; w++) {
    int hosts = in->worlds[w] <= n ? 1 : in->worlds[w] / n;
    if (hosts > 1) rows += 2 + (in->spare_max < hosts ? in->spare_max : hosts);
  }
  out->spare_rows = calloc((size_t)(rows ? rows : 1), sizeof *out->spare_rows);
  out->spare_best = calloc((size_t)in->nworlds, sizeof *out->spare_best);
  out->spare_speedup = calloc((size_t)in->nworlds, sizeof *out->spare_speedup);
  out->spare_worlds = calloc((size_t)in->nworlds, sizeof *out->spare_worlds);
  if (!out->spare_rows || !out->spare_best || !out->spare_speedup || !out->spare_worlds)
    return GS_FAIL(e, GS_ENOMEM, "projection: out of memory");
  for (int w = 0; w < in->nworlds; w++) {
    int world = in->worlds[w], hosts = world <= n ? 1 : world / n;
    if (hosts < 2) continue;
    int kmax = in->spare_max < hosts ? in->spare_max : hosts, first = out->nspare_rows;
    for (int k = -1; k <= kmax; k++) {
      gs_cm_job j = {
          .mode = k < 0 ? GS_CM_RING : GS_CM_BYTEPS, .world = world, .hosts = hosts,
          .servers = k < 0 ? 0 : k, .plan = in->plan, .ready = in->ready, .batch = in->batch,
          .fwd_s = in->fwd_s, .bwd_s = in->bwd_s, .overlap = true,
          .host_reduce = k < 0 ? in->host_reduce : n > 1,
          .spare_share = in->spare_share, .partition_bytes = in->partition_bytes,
      };
      int rc = gs_cm_predict(m, &j, &out->spare_rows[out->nspare_rows], e);
      if (rc) {
        gs_err_prefix(e, "projection, world %d, %s: ", world, k < 0 ? "ring" : "byteps");
        return rc;
      }
      out->nspare_rows++;
    }
    /* the fewest spare hosts within GS_CM_SPARE_EVEN of the shortest step */
    const gs_cm_result *ring = &out->spare_rows[first], *b = ring + 1;
    double best = INFINITY;
    for (int k = 0; k <= kmax; k++) best = fmin(best, b[k].step_s);
    int at = 0;
    while (at < kmax && b[at].step_s > best * (1 + GS_CM_SPARE_EVEN)) at++;
    int i = out->nspare_worlds++;
    out->spare_worlds[i] = world;
    out->spare_best[i] = at;
    out->spare_speedup[i] = ring->step_s / b[at].step_s;
  }
  return GS_OK;
}

int gs_cm_project(const gs_cm_machine *m, const gs_cm_proj_in *in, gs_cm_projection *out,
                  gs_err *e) {
  memset(out, 0, sizeof *out);
  GS_TRY(gs_cm_machine_check(m, e));
  if (!in->plan) return GS_FAIL(e, GS_EINVAL, "projection: no bucket plan");
  if (!in->worlds || in->nworlds < 1)
    return GS_FAIL(e, GS_EINVAL, "projection: no world sizes (e.g. --world 8,64,512,4096)");
  if (in->ranks_per_host < 1)
    return GS_FAIL(e, GS_EINVAL, "projection: %d ranks per host: must be at least 1",
                   in->ranks_per_host);
  if (in->server_hosts < 0)
    return GS_FAIL(e, GS_EINVAL, "projection: %d server hosts: must be >= 0 (0: one per worker "
                   "host)", in->server_hosts);
  if (in->overlap < -1 || in->overlap > 1)
    return GS_FAIL(e, GS_EINVAL, "projection: overlap %d: use -1 (mode default), 0 or 1",
                   in->overlap);
  const gs_cm_mode *modes = in->modes ? in->modes : default_modes;
  int nmodes = in->modes ? in->nmodes : (int)(sizeof default_modes / sizeof default_modes[0]);
  if (nmodes < 1) return GS_FAIL(e, GS_EINVAL, "projection: no modes");
  for (int i = 0; i < nmodes; i++)
    if ((unsigned)modes[i] >= GS_CM_NMODES)
      return GS_FAIL(e, GS_EINVAL, "projection: unknown mode %d (known: ps, ring, rd, sps-colo, "
                     "sps-hosts)", (int)modes[i]);
  int n = in->ranks_per_host;
  for (int w = 0; w < in->nworlds; w++) {
    int world = in->worlds[w];
    if (world < 1) return GS_FAIL(e, GS_EINVAL, "projection: world %d: must be at least 1", world);
    if (world > n && world % n)
      return GS_FAIL(e, GS_EINVAL, "projection: world %d is not a multiple of %d ranks per host "
                     "(hosts must hold the same number of ranks)", world, n);
  }
  out->rows = calloc((size_t)in->nworlds * (size_t)nmodes, sizeof *out->rows);
  if (!out->rows) return GS_FAIL(e, GS_ENOMEM, "projection: out of memory");
  out->machine = *m;
  snprintf(out->model, sizeof out->model, "%s", in->model ? in->model : "model");
  out->batch = in->batch;
  out->ranks_per_host = n;
  out->host_reduce = in->host_reduce && n > 1;
  out->fwd_s = in->fwd_s;
  out->bwd_s = in->bwd_s;
  out->nparams = in->plan->nparams;
  out->elem_bytes = in->plan->elem_bytes;
  out->grad_bytes = in->plan->total;
  out->nbuckets = in->plan->nbuckets;
  out->ready = malloc((size_t)out->nbuckets * sizeof *out->ready);
  if (!out->ready) {
    gs_cm_projection_free(out);
    return GS_FAIL(e, GS_ENOMEM, "projection: out of memory");
  }
  if (in->ready) memcpy(out->ready, in->ready, (size_t)out->nbuckets * sizeof *out->ready);
  else gs_cm_ready_by_bytes(in->plan, out->ready);
  snprintf(out->ready_by, sizeof out->ready_by, "%s",
           in->ready_by ? in->ready_by : in->ready ? "as given" : "in proportion to bytes");
  for (int w = 0; w < in->nworlds; w++) {
    int world = in->worlds[w], hosts = world <= n ? 1 : world / n;
    for (int k = 0; k < nmodes; k++) {
      gs_cm_job j = {
          .mode = modes[k],
          .world = world,
          .hosts = hosts,
          .servers = in->server_hosts ? in->server_hosts : hosts,
          .plan = in->plan,
          .ready = in->ready,
          .batch = in->batch,
          .fwd_s = in->fwd_s,
          .bwd_s = in->bwd_s,
          .overlap = in->overlap < 0 ? overlap_default(modes[k]) : in->overlap == 1,
          .barrier = in->barrier,
          .host_reduce = in->host_reduce,
      };
      int rc = gs_cm_predict(m, &j, &out->rows[out->nrows], e);
      if (rc) {
        gs_err_prefix(e, "projection, world %d, %s: ", world, gs_cm_mode_name(modes[k]));
        gs_cm_projection_free(out);
        return rc;
      }
      out->nrows++;
    }
  }
  int rc = in->spare_max >= 0 ? spare_sweep(m, in, out, e) : GS_OK;
  if (rc < 0) gs_cm_projection_free(out);
  return rc;
}

void gs_cm_projection_free(gs_cm_projection *p) {
  free(p->ready);
  p->ready = NULL;
  free(p->rows);
  p->rows = NULL;
  p->nrows = 0;
  free(p->spare_rows);
  free(p->spare_best);
  free(p->spare_speedup);
  free(p->spare_worlds);
  p->spare_rows = NULL;
  p->spare_best = p->spare_worlds = NULL;
  p->spare_speedup = NULL;
  p->nspare_rows = p->nspare_worlds = 0;
}

/* ---- renderings ---- */

void gs_cm_print_table(FILE *f, const gs_cm_projection *p) {
  const gs_cm_machine *m = &p->machine;
  fprintf(f, "cost model: %s, %zu parameters, %.1f MB of gradients per step in %d buckets "
          "(%zu-byte wire dtype)\n", p->model, p->nparams, p->grad_bytes / 1e6, p->nbuckets,
          p->elem_bytes);
  fprintf(f, "  link %.3g Gbit/s per direction, latency %.3g us, alpha %.3g us per message; "
          "same host %.3g GB/s\n", m->link_Bps * 8 / 1e9, m->link_latency_s * 1e6,
          m->alpha_s * 1e6, m->local_Bps / 1e9);
  fprintf(f, "  reduce %.3g GB/s, copy %.3g GB/s, optimizer %.3g Mparams/s\n", m->reduce_Bps / 1e9,
          m->copy_Bps / 1e9, m->optim_pps / 1e6);
  fprintf(f, "  compute %.3g ms per sample (forward %.3g + backward %.3g) x batch %d per rank = "
          "%.1f ms; %d ranks per host%s\n", (p->fwd_s + p->bwd_s) * 1e3, p->fwd_s * 1e3,
          p->bwd_s * 1e3, p->batch, p->batch * (p->fwd_s + p->bwd_s) * 1e3, p->ranks_per_host,
          p->host_reduce ? ", each host reducing first (ps: one push per host, ring: "
                           "hierarchical)" : "");
  fprintf(f, "  gradients ready: %s; buckets ready at", p->ready_by);
  for (int b = 0; p->ready && b < p->nbuckets; b++) {
    if (b == 7 && p->nbuckets > 9) {
      fprintf(f, " ...");
      b = p->nbuckets - 1;
    }
    fprintf(f, " %.3g", p->ready[b]);
  }
  fprintf(f, " of backward\n");
  fprintf(f, "%7s %6s %-9s %3s %10s %11s %5s %10s %10s %11s %5s  %s\n", "world", "hosts", "mode",
          "ovl", "step ms", "samples/s", "eff", "comm ms", "exposed ms", "link MB/dir", "1-way",
          "bottleneck");
  for (int i = 0; i < p->nrows; i++) {
    const gs_cm_result *r = &p->rows[i];
    double link = fmax(fmax(r->hot_in, r->hot_out), fmax(r->worker_in, r->worker_out));
    fprintf(f, "%7d %6d %-9s %3s %10.1f %11.0f %5.2f %10.1f %10.1f %11.1f %5.2f  %s\n", r->world,
            r->hosts, gs_cm_mode_name(r->mode), r->overlap ? "on" : "off", r->step_s * 1e3,
            r->samples_per_s, r->efficiency, r->comm_s * 1e3, r->exposed_s * 1e3, link / 1e6,
            r->link_busy, gs_cm_bottleneck_name(r->bottleneck));
  }
  fprintf(f, "  eff = step(world 1) / step(N); link MB/dir = busiest host link, per direction, "
          "per step (1 MB = 1e6 bytes); 1-way = the share of the step its busiest direction "
          "carries data\n");
}

void gs_cm_print_spare(FILE *f, const gs_cm_projection *p) {
  if (p->nspare_worlds < 1) return;
  const gs_cm_machine *m = &p->machine;
  fprintf(f, "\nBytePS' summation servers: k spare CPU hosts beside the hosts (each host sums "
          "its ranks first; servers sum at %.3g GB/s; partitions pipelined, overlap on)\n",
          (m->server_reduce_Bps > 0 ? m->server_reduce_Bps : m->reduce_Bps) / 1e9);
  fprintf(f, "%7s %6s %-10s %8s %10s %10s %10s %11s %8s %8s  %s\n", "world", "hosts", "mode",
          "servers", "step ms", "comm ms", "t_opt ms", "link MB/dir", "vs ring", "theory",
          "bottleneck");
  int row = 0;
  for (int w = 0; w < p->nspare_worlds; w++) {
    const gs_cm_result *ring = &p->spare_rows[row];
    double h = ring->hosts;
    int end = row;
    while (end < p->nspare_rows && p->spare_rows[end].world == ring->world) end++;
    for (int i = row; i < end; i++) {
      const gs_cm_result *r = &p->spare_rows[i];
      double link = fmax(fmax(r->hot_in, r->hot_out), fmax(r->worker_in, r->worker_out));
      int k = i - row - 1;
      char mode[24], theory[16] = "";
      if (k < 0) snprintf(mode, sizeof mode, "ring");
      else snprintf(mode, sizeof mode, "byteps k=%d", k);
      if (k >= 0) snprintf(theory, sizeof theory, "%.3fx", (h * h + k * h - 2.0 * k) / (h * h));
      fprintf(f, "%7d %6d %-10s %8d %10.1f %10.1f %10.1f %11.1f %7.3fx %8s  %s\n", r->world,
              r->hosts, mode, r->servers, r->step_s * 1e3, r->comm_s * 1e3, r->link_s * 1e3,
              link / 1e6, ring->step_s / r->step_s, theory, gs_cm_bottleneck_name(r->bottleneck));
    }
    fprintf(f, "  world %d: %d spare CPU host%s: step %.1f ms, %.2fx the ring's (%.1f ms)\n",
            p->spare_worlds[w], p->spare_best[w], p->spare_best[w] == 1 ? "" : "s",
            ring[1 + p->spare_best[w]].step_s * 1e3, p->spare_speedup[w], ring->step_s * 1e3);
    row = end;
  }
  fprintf(f, "  t_opt = the busiest link direction's bytes over the rate (BytePS: 2n(n-1)S / "
          "((n^2+kn-2k) b)); theory = the ring's link time over t_opt, (n^2+kn-2k)/n^2; the "
          "answer is the fewest spare hosts within %.0f%% of the shortest step\n",
          GS_CM_SPARE_EVEN * 100);
}

json_t *gs_cm_machine_json(const gs_cm_machine *m) {
  return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "link_Bps", m->link_Bps,
                   "link_latency_s", m->link_latency_s, "alpha_s", m->alpha_s, "local_Bps",
                   m->local_Bps, "reduce_Bps", m->reduce_Bps, "copy_Bps", m->copy_Bps,
                   "optimizer_params_per_s", m->optim_pps, "server_reduce_Bps",
                   m->server_reduce_Bps > 0 ? m->server_reduce_Bps : m->reduce_Bps);
}

json_t *gs_cm_projection_json(const gs_cm_projection *p) {
  json_t *rows = json_array();
  for (int i = 0; i < p->nrows; i++) json_array_append_new(rows, gs_cm_result_json(&p->rows[i]));
  json_t *j = json_pack("{s:s, s:I, s:f, s:i, s:I, s:i, s:i, s:f, s:f}", "model", p->model,
                        "nparams", (json_int_t)p->nparams, "gradient_bytes", p->grad_bytes,
                        "nbuckets", p->nbuckets, "wire_bytes", (json_int_t)p->elem_bytes,
                        "batch", p->batch, "ranks_per_host", p->ranks_per_host,
                        "forward_s_per_sample", p->fwd_s, "backward_s_per_sample", p->bwd_s);
  if (!j) {
    json_decref(rows);
    return NULL;
  }
  json_object_set_new(j, "machine", gs_cm_machine_json(&p->machine));
  json_object_set_new(j, "host_reduce", json_boolean(p->host_reduce));
  json_t *ready = json_array();
  for (int b = 0; b < p->nbuckets && p->ready; b++)
    json_array_append_new(ready, json_real(p->ready[b]));
  json_object_set_new(j, "ready_by", json_string(p->ready_by));
  json_object_set_new(j, "bucket_ready", ready);
  json_object_set_new(j, "rows", rows);
  if (p->nspare_worlds > 0) { /* BytePS over k: per world, the ring, the rows, the answer */
    json_t *sp = json_array();
    int row = 0;
    for (int w = 0; w < p->nspare_worlds; w++) {
      json_t *ks = json_array(), *ring = gs_cm_result_json(&p->spare_rows[row]);
      int world = p->spare_rows[row].world;
      for (row++; row < p->nspare_rows && p->spare_rows[row].mode == GS_CM_BYTEPS &&
                  p->spare_rows[row].world == world; row++)
        json_array_append_new(ks, gs_cm_result_json(&p->spare_rows[row]));
      json_array_append_new(sp, json_pack("{s:i, s:o, s:o, s:i, s:f}", "world", world, "ring",
                                          ring, "byteps", ks, "best_spare_hosts",
                                          p->spare_best[w], "speedup_over_ring",
                                          p->spare_speedup[w]));
    }
    json_object_set_new(j, "spare_hosts", sp);
  }
  return j;
}
