/* hosts_tool: build a cluster of emulated hosts (bench/hosts/hosts.h), check it,
 * measure a ZeroMQ stream across it, print the link counters, tear down.
 *
 *   hosts_tool --hosts 4 --link 1gbit --from 1 --to 2 --bytes 64M --msg 16M
 *   hosts_tool --hosts 4 --link 1gbit --from 1,2,3 --to 0    (incast, as ps)
 *   hosts_tool --hosts 4 --link 100mbit --reach --json
 *   hosts_tool --hosts 3 --link 100mbit --link-host 1=20mbit --from 1 --to 0
 *
 * --reach: every host sends a request to every other host's address and
 * checks the reply names its own address as the sender (so the traffic
 * really left from that host). The stream: a PULL on host --to, a PUSH on
 * each host of --from, each sending --bytes; the rate is timed at the
 * receiver from the first message's arrival to the last, so connection
 * setup is not in it. The span, from the first sender's first send to the
 * last arrival, is what the links' busy time is compared with.
 *
 * The same executable plays the roles inside the hosts (--role pull, push,
 * echo, probe): the tool spawns itself there through gs_hosts_spawn. With
 * --json every event is one JSON line (the cluster, each spawned process,
 * the result), which is what the tests read. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "bench/hosts/hosts.h"
#include "tests/bench/hosts/hosts_tool_roles.h"

typedef struct opts {
  int hosts, to, reach, json;
  int from[GS_HOSTS_MAX], nfrom;
  uint64_t rate, burst, limit;
  gs_host_rates host_rates;
  double bytes, msg, sample_ms, delay;
} opts;

static int json_out;

static void emit(json_t *o) {
  if (json_out) {
    char *s = json_dumps(o, JSON_COMPACT);
    if (s) printf("%s\n", s);
    free(s);
    fflush(stdout);
  }
  json_decref(o);
}

static int usage(const char *why) {
  fprintf(stderr,
          "hosts_tool: %s\n"
          "usage: hosts_tool [--hosts K] [--link RATE] [--from A[,A2...]] [--to B] [--bytes N]\n"
          "                  [--msg S] [--reach] [--json] [--burst B] [--limit L]\n"
          "                  [--sample-ms P] [--delay D] [--link-host H=RATE[,...]]\n"
          "  K hosts (default 2) on links of RATE (default 100mbit); a PUSH/PULL stream\n"
          "  of N bytes (default 16M) in messages of S bytes (default 4M) from each host A\n"
          "  to host B (default 0 -> 1; --bytes 0: none); --reach: all-pairs reachability\n"
          "  and round trips; --delay: one-way host-to-host delay (needs netem).\n",
          why);
  return 2;
}

static int parse(int argc, char **argv, opts *o) {
  static const struct option longs[] = {
      {"hosts", 1, 0, 'k'}, {"link", 1, 0, 'l'},  {"from", 1, 0, 'f'},      {"to", 1, 0, 't'},
      {"bytes", 1, 0, 'b'}, {"msg", 1, 0, 'm'},   {"reach", 0, 0, 'r'},     {"json", 0, 0, 'j'},
      {"burst", 1, 0, 'B'}, {"limit", 1, 0, 'L'}, {"sample-ms", 1, 0, 's'},
      {"delay", 1, 0, 'd'},  {"link-host", 1, 0, 'H'}, {0, 0, 0, 0}};
  *o = (opts){.hosts = 2, .nfrom = 1, .to = 1, .bytes = 16 << 20, .msg = 4 << 20, .sample_ms = 5};
  gs_err e = {0};
  gs_hosts_parse_rate("100mbit", &o->rate, &e);
  int ch;
  while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    char *end = NULL;
    switch (ch) {
      case 'k': o->hosts = atoi(optarg); break;
      case 'f':
        o->nfrom = 0;
        for (char *p = optarg; o->nfrom < GS_HOSTS_MAX; p = end + 1) {
          o->from[o->nfrom++] = (int)strtol(p, &end, 10);
          if (end == p || (*end && *end != ',')) return usage("--from takes host numbers: 1,2,3");
          if (!*end) break;
        }
        break;
      case 't': o->to = atoi(optarg); break;
      case 'r': o->reach = 1; break;
      case 'd':
        o->delay = strtod(optarg, &end);
        o->delay *= !strcmp(end, "us") ? 1e-6 : !strcmp(end, "ms") ? 1e-3 : !strcmp(end, "s") ? 1 : -1;
        if (end == optarg || o->delay < 0) return usage("--delay is a time: 100us, 2ms, 0.1s");
        break;
      case 'j': o->json = 1; break;
      case 'l':
        if (gs_hosts_parse_rate(optarg, &o->rate, &e) < 0) return usage(e.msg);
        break;
      case 'H':
        if (gs_host_rates_parse(optarg, &o->host_rates, &e) < 0) return usage(e.msg);
        break;
      case 'b': case 'm': case 'B': case 'L': case 's': {
        double v = strtod(optarg, &end);
        if (end == optarg || v < 0) return usage("sizes are numbers with an optional K, M or G");
        v *= *end == 'K' ? 1024.0 : *end == 'M' ? 1048576.0 : *end == 'G' ? 1073741824.0 : 1.0;
        if (ch == 'b') o->bytes = v;
        if (ch == 'm') o->msg = v;
        if (ch == 'B') o->burst = (uint64_t)v;
        if (ch == 'L') o->limit = (uint64_t)v;
        if (ch == 's') o->sample_ms = v;
        break;
      }
      default: return usage("unknown flag");
    }
  }
  if (optind < argc) return usage("unexpected argument");
  if (o->hosts < 1 || o->hosts > GS_HOSTS_MAX) return usage("--hosts must be 1..250");
  for (int i = 0; o->bytes > 0 && i < o->nfrom; i++)
    if (o->from[i] < 0 || o->to < 0 || o->from[i] >= o->hosts || o->to >= o->hosts ||
        o->from[i] == o->to)
      return usage("--from and --to must be different hosts below --hosts");
  if (o->bytes > 0 && (o->msg < 1 || o->msg > (1 << 30) || o->bytes < 2 * o->msg))
    return usage("--msg must be 1 byte to 1G, and --bytes at least two messages");
  if (o->sample_ms <= 0) return usage("--sample-ms must be positive");
  return 0;
}

static void print_cluster(gs_hosts *c, const opts *o, const gs_hosts_cfg *cfg, int netem) {
  uint64_t burst, limit;
  gs_hosts_tbf(o->rate, &burst, &limit);
  if (cfg->burst_bytes) burst = cfg->burst_bytes;
  if (cfg->limit_bytes) limit = cfg->limit_bytes;
  json_t *hs = json_array();
  if (!json_out)
    printf("cluster: %d hosts, links %.6g Mbit/s each way (tbf burst %llu B, limit %llu B), "
           "netem: %s\n", o->hosts, (double)o->rate / 1e6, (unsigned long long)burst,
           (unsigned long long)limit, netem ? "yes" : "no");
  for (int h = GS_HOSTS_SWITCH; h < o->hosts; h++) {
    gs_host_info in;
    gs_hosts_info(c, h, &in);
    json_array_append_new(hs, json_pack("{si ss ss ss si sI sI}", "host", h, "addr", in.addr,
                                        "ifname", in.ifname, "port", in.port, "holder",
                                        (int)in.holder, "netns_ino", (json_int_t)in.netns_ino,
                                        "rate_bps", (json_int_t)in.rate_bps));
    if (!json_out)
      printf("  %-7s %-10s %s%s%s  netns %s (inode %llu)\n",
             h == GS_HOSTS_SWITCH ? "switch" : "host", in.addr, in.ifname, *in.port ? " <-> " : "",
             in.port, in.netns, (unsigned long long)in.netns_ino);
  }
  emit(json_pack("{ss si sI sI sI sb so}", "event", "cluster", "hosts", o->hosts, "rate_bps",
                 (json_int_t)o->rate, "burst", (json_int_t)burst, "limit", (json_int_t)limit,
                 "netem", netem, "nodes", hs));
}

/* Spawn this tool in a role on host h; a role that reports back gets the
 * write end of a pipe as --fd (inheritable only for this one spawn). */
static int spawn_role(gs_hosts *c, int h, const char *role, const char *arg, int *rfd,
                      pid_t *pid) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return -1;
  self[n] = '\0';
  int p[2] = {-1, -1};
  char fdarg[16] = "-1";
  if (rfd) {
    if (pipe2(p, O_CLOEXEC) < 0) return -1;
    fcntl(p[1], F_SETFD, 0);
    snprintf(fdarg, sizeof fdarg, "%d", p[1]);
  }
  char *argv[] = {self, "--role", (char *)role, "--fd", fdarg, "--arg", (char *)arg, NULL};
  gs_err e = {0};
  int rc = gs_hosts_spawn(c, h, argv, NULL, pid, &e);
  if (rfd) {
    close(p[1]);
    *rfd = rc < 0 ? -1 : p[0];
    if (rc < 0) close(p[0]);
  }
  if (rc < 0) {
    fprintf(stderr, "hosts_tool: %s\n", e.msg);
    return -1;
  }
  emit(json_pack("{ss si ss si}", "event", "spawned", "host", h, "role", role, "pid", (int)*pid));
  return 0;
}

/* Wait for a spawned role within the deadline (killed past it); its exit
 * status, or -1. */
static int finish(pid_t pid, double deadline) {
  for (;;) {
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (r < 0) return -1;
    if (gs_now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    usleep(2000);
  }
}

static int reach(gs_hosts *c, const opts *o) {
  pid_t *echo = calloc((size_t)o->hosts, sizeof *echo);
  char *peers = calloc((size_t)o->hosts, 32);
  int ok = echo && peers, failures = 0;
  for (int h = 0; ok && h < o->hosts; h++) {
    gs_host_info in;
    gs_hosts_info(c, h, &in);
    int fd = -1;
    char line[32];
    ok = spawn_role(c, h, "echo", in.addr, &fd, &echo[h]) == 0 &&
         gs_read_line(fd, gs_now() + 10, line, sizeof line) > 0;
    if (ok) snprintf(peers + 32 * h, 32, "%s", line);
    if (echo[h] > 0 && fd >= 0) close(fd);
  }
  for (int h = 0; ok && h < o->hosts; h++) {
    /* the probe's argument: its own address, then every other endpoint */
    gs_host_info in;
    gs_hosts_info(c, h, &in);
    char arg[GS_HOSTS_MAX * 32 + 32];
    size_t n = (size_t)snprintf(arg, sizeof arg, "%s", in.addr);
    for (int p = 0; p < o->hosts; p++)
      if (p != h) n += (size_t)snprintf(arg + n, sizeof arg - n, ",%s", peers + 32 * p);
    pid_t pid;
    int fd = -1, st = -1;
    double rtt = -1;
    char line[64];
    if (spawn_role(c, h, "probe", arg, &fd, &pid) == 0) {
      if (gs_read_line(fd, gs_now() + 30, line, sizeof line) > 0) rtt = atof(line);
      close(fd);
      st = finish(pid, gs_now() + 30);
    }
    if (st != 0) failures++;
    emit(json_pack("{ss si sb sf}", "event", "reach", "host", h, "ok", st == 0, "rtt_s", rtt));
    if (!json_out)
      printf("reach: host %d %s every other host (round trip %.0f us at most)\n", h,
             st == 0 ? "reaches" : "does NOT reach", rtt * 1e6);
  }
  for (int h = 0; echo && h < o->hosts; h++)
    if (echo[h] > 0) {
      kill(echo[h], SIGTERM);
      finish(echo[h], gs_now() + 5);
    }
  free(echo);
  free(peers);
  return ok && failures == 0 ? 0 : 1;
}

static void print_links(gs_hosts *c, const opts *o, const gs_hostlink_stat *a,
                        const gs_hostlink_stat *b, json_t *links) {
  if (!json_out) printf("link  up_bytes     down_bytes   up_busy  down_busy  (fraction of %.3f s)\n",
                        b[0].t - a[0].t);
  for (int h = 0; h < o->hosts; h++) {
    double ub, db;
    gs_hostlink_busy(&a[h], &b[h], &ub, &db);
    uint64_t up = b[h].up_bytes - a[h].up_bytes, down = b[h].down_bytes - a[h].down_bytes;
    json_array_append_new(
        links, json_pack("{si sI sI sf sf sf sf}", "host", h, "up_bytes", (json_int_t)up,
                         "down_bytes", (json_int_t)down, "up_busy", ub, "down_busy", db,
                         "up_busy_s", b[h].up_busy_s - a[h].up_busy_s, "down_busy_s",
                         b[h].down_busy_s - a[h].down_busy_s));
    if (!json_out)
      printf("%4d  %-12llu %-12llu %7.3f  %9.3f\n", h, (unsigned long long)up,
             (unsigned long long)down, ub, db);
  }
}

static int stream(gs_hosts *c, const opts *o) {
  long count = (long)(o->bytes / o->msg);
  double total = (double)count * o->msg * o->nfrom;
  double slowest = (double)o->rate;
  for (int i = 0; i < o->host_rates.n; i++)
    if ((double)o->host_rates.bps[i] < slowest) slowest = (double)o->host_rates.bps[i];
  double limit_s = 3 * total * 8 / slowest + 15, deadline = gs_now() + limit_s + 5;
  gs_host_info to;
  gs_hosts_info(c, o->to, &to);
  char arg[160], ep[64], line[64];
  int fd = -1, rc = 0, *pfd = calloc((size_t)o->nfrom, sizeof *pfd);
  pid_t pull = -1, *push = calloc((size_t)o->nfrom, sizeof *push);
  gs_hostlink_stat *a = calloc((size_t)o->hosts * 2, sizeof *a), *b = a ? a + o->hosts : NULL;
  if (!pfd || !push || !a) rc = -1;
  for (int i = 0; pfd && i < o->nfrom; i++) pfd[i] = -1;
  snprintf(arg, sizeof arg, "%s,%ld,%.0f,%.0f", to.addr, count * o->nfrom, o->msg, limit_s);
  if (rc == 0) rc = spawn_role(c, o->to, "pull", arg, &fd, &pull);
  if (rc == 0 && gs_read_line(fd, gs_now() + 10, ep, sizeof ep) <= 0) {
    fprintf(stderr, "hosts_tool: the receiver on host %d did not bind\n", o->to);
    rc = -1;
  }
  gs_err e = {0};
  for (int h = 0; rc == 0 && h < o->hosts; h++) rc = gs_hosts_link(c, h, &a[h], &e);
  snprintf(arg, sizeof arg, "tcp://%s,%ld,%.0f,%.0f", ep, count, o->msg, limit_s);
  for (int i = 0; rc == 0 && i < o->nfrom; i++)
    rc = spawn_role(c, o->from[i], "push", arg, &pfd[i], &push[i]);
  /* each sender says when it starts; the receiver, when it is done */
  double start = 0, bytes = 0, t0 = 0, t1 = 0;
  for (int i = 0; rc == 0 && i < o->nfrom; i++) {
    double t;
    if (gs_read_line(pfd[i], deadline, line, sizeof line) <= 0 || sscanf(line, "%lf", &t) != 1)
      rc = -1;
    else if (start == 0 || t < start)
      start = t;
  }
  if (rc == 0 && (gs_read_line(fd, deadline, line, sizeof line) <= 0 ||
                  sscanf(line, "%lf %lf %lf", &bytes, &t0, &t1) != 3))
    rc = -1;
  int failed = rc != 0;
  for (int i = 0; push && pfd && i < o->nfrom; i++) {
    if (push[i] > 0 && finish(push[i], deadline) != 0) failed = 1;
    if (pfd[i] >= 0) close(pfd[i]);
  }
  if (pull > 0 && finish(pull, deadline) != 0) failed = 1;
  if (fd >= 0) close(fd);
  for (int h = 0; !failed && h < o->hosts; h++)
    if (gs_hosts_link(c, h, &b[h], &e) < 0) failed = 1;
  if (failed) {
    fprintf(stderr, "hosts_tool: the stream to host %d failed%s%s\n", o->to, e.code ? ": " : "",
            e.msg);
  } else {
    /* one sender: between arrivals; several share the link from the start,
     * so the first arrival comes late: from the first send */
    /* the stream's narrowest link: the receiver's, or a slower sender's */
    double link = (double)gs_host_rates_of(&o->host_rates, o->to, o->rate);
    for (int i = 0; o->nfrom == 1 && i < o->nfrom; i++)
      if ((double)gs_host_rates_of(&o->host_rates, o->from[i], o->rate) < link)
        link = (double)gs_host_rates_of(&o->host_rates, o->from[i], o->rate);
    double rate = o->nfrom == 1 ? (t1 > t0 ? (bytes - o->msg) * 8 / (t1 - t0) : 0)
                                : (t1 > start ? bytes * 8 / (t1 - start) : 0);
    if (!json_out)
      printf("stream to host %d from %d host(s): %.0f B in messages of %.0f B: %.2f Mbit/s "
             "(%.3f of the link), %.3f s from first send to last arrival\n", o->to, o->nfrom,
             bytes, o->msg, rate / 1e6, rate / link, t1 - start);
    json_t *links = json_array();
    print_links(c, o, a, b, links);
    emit(json_pack("{ss si si sf sf sf sf sf so}", "event", "stream", "to", o->to, "senders",
                   o->nfrom, "bytes", bytes, "rate_bps", rate, "fraction", rate / link,
                   "link_bps", link, "span_s", t1 - start, "links", links));
  }
  free(a);
  free(pfd);
  free(push);
  return failed;
}

int main(int argc, char **argv) {
  if (argc > 2 && strcmp(argv[1], "--role") == 0) return role_main(argc, argv);
  opts o;
  int rc = parse(argc, argv, &o);
  if (rc) return rc;
  json_out = o.json;
  gs_err e = {0};
  int netem = gs_hosts_netem(&e);
  gs_hosts_cfg cfg = {.hosts = o.hosts, .rate_bps = o.rate, .burst_bytes = o.burst,
                      .limit_bytes = o.limit, .delay_s = o.delay, .host_rates = &o.host_rates};
  gs_hosts *c = NULL;
  if (netem < 0 || gs_hosts_create(&cfg, &c, &e) < 0) {
    fprintf(stderr, "hosts_tool: %s\n", e.msg);
    return 1;
  }
  print_cluster(c, &o, &cfg, netem);
  rc = gs_hosts_sample_start(c, o.sample_ms / 1000, &e);
  if (rc < 0) fprintf(stderr, "hosts_tool: %s\n", e.msg);
  if (rc == 0 && o.reach) rc = reach(c, &o);
  if (rc == 0 && o.bytes > 0) rc = stream(c, &o);
  gs_hosts_destroy(c);
  return rc ? 1 : 0;
}
