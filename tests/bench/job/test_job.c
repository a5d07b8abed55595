/* test_job.c: the job start's pure parts (bench/job/job.c).
 *
 *  - which rank this is, from torchrun's, Open MPI's, MPICH's and Slurm's
 *    variables (and our launcher's), and clear errors naming the variable
 *    for values out of range, half a pair (RANK without WORLD_SIZE), a local
 *    rank outside its host's, or a missing MASTER_PORT; the rendezvous port
 *    next to torchrun's agent store, Slurm's master from the node list and
 *    its port from the job id;
 *  - the binding rule on loopback: our launcher and a loopback MASTER_ADDR
 *    ("127.0.0.1", "localhost", "127.0.0.2") bind loopback only, the
 *    rendezvous included (never "*" or 0.0.0.0); --bind 0.0.0.0 is the only
 *    way to the wildcard, and then peers are told the loopback address;
 *    --bind with an address this host lacks, or a MASTER_ADDR that does
 *    not resolve, is an error naming it.
 * The multi-node rule (the route's source) runs in tests/bench/job/bind.py,
 * inside a private network namespace with addresses of its own. */
#include <stdlib.h>
#include <string.h>

#include "bench/job/job.h"
#include "tests/check.h"

static const char *VARS[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                             "MASTER_ADDR", "MASTER_PORT", "GS_LAUNCHED", "GS_PORT_FD",
                             "GS_RUN_DIR", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                             "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                             "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                             "SLURM_NTASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE",
                             "SLURM_NODEID", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
                             "SLURM_JOB_ID", "SLURM_STEP_ID", "PMI_RANK", "PMI_SIZE",
                             "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "GROUP_RANK",
                             "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE",
                             "GS_RENDEZVOUS_PORT", "GS_NODE_LAUNCH"};

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
  CHECK(env.present && !env.launched && !strcmp(env.source, "env") && env.rank == 2 &&
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

  /* torchrun: its agent's store holds MASTER_PORT, the rendezvous the next */
  clear();
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "4", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  setenv("GROUP_RANK", "1", 1);
  setenv("MASTER_PORT", "29500", 1);
  setenv("TORCHELASTIC_RUN_ID", "none", 1);
  setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  CHECK_OK(gs_rank_env_read(&env, &e), &e);
  CHECK(!strcmp(env.source, "torchrun") && env.node_rank == 1 && env.master_port == 29501 &&
        env.port_derived, "%s node %d port %d", env.source, env.node_rank, env.master_port);
  setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1); /* c10d: MASTER_PORT is free */
  CHECK_OK(gs_rank_env_read(&env, &e), &e);
  CHECK(env.master_port == 29500 && !env.port_derived);
  setenv("GS_RENDEZVOUS_PORT", "31000", 1);
  CHECK_OK(gs_rank_env_read(&env, &e), &e);
  CHECK(env.master_port == 31000);
  unsetenv("GS_RENDEZVOUS_PORT");
  setenv("LOCAL_RANK", "2", 1);
  gs_err_clear(&e);
  CHECK(gs_rank_env_read(&env, &e) == GS_EINVAL && strstr(e.msg, "LOCAL_RANK=2") &&
        strstr(e.msg, "LOCAL_WORLD_SIZE=2"), "%s", e.msg);
  gs_err_clear(&e);

  /* half a pair names the other half */
  clear();
  setenv("RANK", "1", 1);
  gs_err_clear(&e);
  CHECK(gs_rank_env_read(&env, &e) == GS_EINVAL && strstr(e.msg, "RANK=1 is set but "
        "WORLD_SIZE is not") && strstr(e.msg, "set WORLD_SIZE"), "%s", e.msg);
  gs_err_clear(&e);
  clear();
  setenv("WORLD_SIZE", "4", 1);
  gs_err_clear(&e);
  CHECK(gs_rank_env_read(&env, &e) == GS_EINVAL && strstr(e.msg, "WORLD_SIZE=4 is set but "
        "RANK is not"), "%s", e.msg);
  gs_err_clear(&e);
  clear();
  setenv("PMI_SIZE", "4", 1);
  gs_err_clear(&e);
  CHECK(gs_rank_env_read(&env, &e) == GS_EINVAL && strstr(e.msg, "PMI_RANK is not"), "%s",
        e.msg);
  gs_err_clear(&e);

  /* MPICH / Hydra; MPI without MASTER_PORT says how to pass it */
  clear();
  setenv("PMI_RANK", "2", 1);
  setenv("PMI_SIZE", "4", 1);
  setenv("MPI_LOCALRANKID", "0", 1);
  setenv("MPI_LOCALNRANKS", "2", 1);
  gs_err_clear(&e);
  CHECK(gs_rank_env_read(&env, &e) == GS_EINVAL && strstr(e.msg, "-genv MASTER_PORT"), "%s",
        e.msg);
  gs_err_clear(&e);
  setenv("MASTER_PORT", "1234", 1);
  CHECK_OK(gs_rank_env_read(&env, &e), &e);
  CHECK(!strcmp(env.source, "mpich") && env.rank == 2 && env.world == 4 &&
        env.local_rank == 0 && env.local_world == 2);
  setenv("PMI_RANK", "4", 1);
  gs_err_clear(&e);
  CHECK(gs_rank_env_read(&env, &e) == GS_EINVAL && strstr(e.msg, "PMI_RANK=4") &&
        strstr(e.msg, "PMI_SIZE=4"), "%s", e.msg);
  gs_err_clear(&e);
  clear();
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  gs_err_clear(&e);
  CHECK(gs_rank_env_read(&env, &e) == GS_EINVAL && strstr(e.msg, "-x MASTER_PORT"), "%s",
        e.msg);
  gs_err_clear(&e);

  /* srun: the step's first node hosts task 0; a port from the job id */
  clear();
  setenv("SLURM_PROCID", "5", 1);
  setenv("SLURM_NTASKS", "6", 1);
  setenv("SLURM_LOCALID", "0", 1);
  setenv("SLURM_NODEID", "2", 1);
  setenv("SLURM_STEP_TASKS_PER_NODE", "2(x2),1", 1);
  setenv("SLURM_STEP_NODELIST", "gpu[07-09,12],login1", 1);
  setenv("SLURM_JOB_ID", "4242", 1);
  setenv("SLURM_STEP_ID", "1", 1);
  CHECK_OK(gs_rank_env_read(&env, &e), &e);
  CHECK(!strcmp(env.source, "slurm") && env.rank == 5 && env.local_world == 1 &&
        env.node_rank == 2 && !strcmp(env.master_addr, "gpu07") && env.port_derived &&
        env.master_port == 20000 + (4242 * 16 + 1) % 40000, "%s %d %s %d", env.source,
        env.local_world, env.master_addr, env.master_port);
  setenv("SLURM_STEP_NODELIST", "a1,b2", 1);
  setenv("MASTER_PORT", "29500", 1);
  CHECK_OK(gs_rank_env_read(&env, &e), &e);
  CHECK(!strcmp(env.master_addr, "a1") && env.master_port == 29500 && !env.port_derived);

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
  CHECK(a.loopback && !a.wildcard && !strcmp(a.bind, "127.0.0.1") &&
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
      CHECK(a.loopback && !strcmp(a.bind, want) && !strcmp(a.rendezvous, rdv),
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
