/* test_job.c: the job start's pure parts (bench/job.c).
 *
 *  - which rank this is, from torchrun's, Open MPI's and Slurm's variables
 *    (and our launcher's), and clear errors for values out of range or a
 *    missing MASTER_PORT;
 *  - the binding rule on loopback: our launcher and a loopback MASTER_ADDR
 *    ("127.0.0.1", "localhost", "127.0.0.2") bind loopback only, the
 *    rendezvous included (never "*" or 0.0.0.0); --bind 0.0.0.0 is the only
 *    way to the wildcard, and then peers are told the loopback address;
 *    --bind with an address this host lacks, or a MASTER_ADDR that does
 *    not resolve, is an error naming it.
 * The multi-node rule (the route's source) runs in tests/bench/bind.py,
 * inside a private network namespace with addresses of its own. */
#include <stdlib.h>
#include <string.h>

#include "bench/internal.h"
#include "tests/check.h"

static const char *VARS[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                             "MASTER_ADDR", "MASTER_PORT", "GS_LAUNCHED", "GS_PORT_FD",
                             "GS_RUN_DIR", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                             "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                             "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                             "SLURM_NTASKS_PER_NODE"};

static void clear(void) {
  for (size_t i = 0; i < sizeof VARS / sizeof VARS[0]; i++) unsetenv(VARS[i]);
}

static void environments(void) {
  gs_rank_env env;
  gs_err e = {0};
  clear();
  CHECK_OK(gs_rank_env_read(&env, &e), &e);
  CHECK(!env.present);

  setenv("RANK", "2", 1);
  setenv("WORLD_SIZE", "4", 1);
  setenv("LOCAL_RANK", "0", 1);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "node0", 1);
  setenv("MASTER_PORT", "29500", 1);
  CHECK_OK(gs_rank_env_read(&env, &e), &e);
  CHECK(env.present && !env.launched && !strcmp(env.source, "torchrun") && env.rank == 2 &&
        env.world == 4 && env.local_rank == 0 && env.local_world == 2 &&
        !strcmp(env.master_addr, "node0") && env.master_port == 29500 && env.port_fd == -1);

  setenv("RANK", "4", 1);
  gs_err_clear(&e);
  CHECK(gs_rank_env_read(&env, &e) == GS_EINVAL && strstr(e.msg, "RANK=4"));
  setenv("RANK", "1", 1);
  setenv("MASTER_PORT", "70000", 1);
  gs_err_clear(&e);
  CHECK(gs_rank_env_read(&env, &e) == GS_EINVAL && strstr(e.msg, "MASTER_PORT"));
  unsetenv("MASTER_PORT");
  gs_err_clear(&e);
  CHECK(gs_rank_env_read(&env, &e) == GS_EINVAL && strstr(e.msg, "MASTER_PORT is not set"));

  clear();
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  setenv("MASTER_PORT", "1234", 1);
  CHECK_OK(gs_rank_env_read(&env, &e), &e);
  CHECK(!strcmp(env.source, "openmpi") && env.rank == 1 && env.local_rank == -1 &&
        env.local_world == 0 && !strcmp(env.master_addr, "127.0.0.1"));

  clear();
  setenv("SLURM_PROCID", "3", 1);
  setenv("SLURM_NTASKS", "8", 1);
  setenv("SLURM_LOCALID", "1", 1);
  setenv("SLURM_NTASKS_PER_NODE", "4(x2)", 1);
  setenv("MASTER_PORT", "1234", 1);
  CHECK_OK(gs_rank_env_read(&env, &e), &e);
  CHECK(!strcmp(env.source, "slurm") && env.rank == 3 && env.local_rank == 1 &&
        env.local_world == 4);

  clear();
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "0", 1);
  setenv("GS_LAUNCHED", "1", 1);
  setenv("GS_PORT_FD", "9", 1);
  CHECK_OK(gs_rank_env_read(&env, &e), &e);
  CHECK(env.launched && !strcmp(env.source, "gradsync") && env.port_fd == 9);
  clear();
}

static gs_rank_env env_of(int rank, const char *master, bool launched, int port_fd) {
  gs_rank_env env = {.present = true, .launched = launched, .source = "torchrun",
                     .rank = rank, .world = 2, .local_rank = rank, .local_world = 2,
                     .master_port = 29500, .port_fd = port_fd};
  snprintf(env.master_addr, sizeof env.master_addr, "%s", master);
  return env;
}

static void addresses(void) {
  gs_job_addrs a;
  gs_err e = {0};
  /* our launcher: loopback, an ephemeral rendezvous port */
  gs_rank_env env = env_of(0, "127.0.0.1", true, 5);
  CHECK_OK(gs_job_addrs_resolve(&env, NULL, &a, &e), &e);
  CHECK(a.local && !a.wildcard && !strcmp(a.bind, "127.0.0.1") &&
        !strcmp(a.advertise, "127.0.0.1") && !strcmp(a.rendezvous, "tcp://127.0.0.1:*"));
  /* a loopback MASTER_ADDR, by name or by number: loopback everywhere */
  const char *loops[] = {"127.0.0.1", "localhost", "127.0.0.2"};
  for (int i = 0; i < 3; i++)
    for (int rank = 0; rank < 2; rank++) {
      env = env_of(rank, loops[i], false, -1);
      gs_err_clear(&e);
      CHECK_OK(gs_job_addrs_resolve(&env, NULL, &a, &e), &e);
      const char *want = i == 2 ? "127.0.0.2" : "127.0.0.1";
      char rdv[64];
      snprintf(rdv, sizeof rdv, "tcp://%s:29500", want);
      CHECK(a.local && !strcmp(a.bind, want) && !strcmp(a.rendezvous, rdv),
             "MASTER_ADDR %s rank %d: bind %s, rendezvous %s", loops[i], rank, a.bind,
             a.rendezvous);
    }
  /* the wildcard only when asked for; peers still get an address */
  env = env_of(0, "localhost", false, -1);
  CHECK_OK(gs_job_addrs_resolve(&env, "0.0.0.0", &a, &e), &e);
  CHECK(a.wildcard && !strcmp(a.bind, "0.0.0.0") && !strcmp(a.advertise, "127.0.0.1") &&
        !strcmp(a.rendezvous, "tcp://0.0.0.0:29500"));
  env = env_of(1, "localhost", false, -1);
  CHECK_OK(gs_job_addrs_resolve(&env, "0.0.0.0", &a, &e), &e);
  CHECK(!strcmp(a.rendezvous, "tcp://127.0.0.1:29500"));
  /* --bind an address of this host; one it lacks is an error */
  CHECK_OK(gs_job_addrs_resolve(&env, "127.0.0.3", &a, &e), &e);
  CHECK(!strcmp(a.bind, "127.0.0.3") && !strcmp(a.advertise, "127.0.0.3"));
  CHECK(gs_job_addrs_resolve(&env, "192.0.2.77", &a, &e) == GS_EINVAL &&
        strstr(e.msg, "--bind 192.0.2.77") && strstr(e.msg, "not an address of this host"));
  gs_err_clear(&e);
  env = env_of(1, "no-such-host.invalid", false, -1);
  CHECK(gs_job_addrs_resolve(&env, NULL, &a, &e) == GS_EINVAL &&
        strstr(e.msg, "no-such-host.invalid"));
}

int main(void) {
  environments();
  addresses();
  return check_done("test_job");
}
