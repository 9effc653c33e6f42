/* Environment detection: order of families, Slurm node lists, errors. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dist/dist.h"
#include "weft_test.h"

static const char *const all_vars[] = {
	"WEFT_RANK", "WEFT_WORLD_SIZE", "WEFT_LOCAL_RANK", "WEFT_LOCAL_WORLD_SIZE",
	"WEFT_NODE_RANK", "WEFT_STORE_ADDR", "WEFT_STORE_PORT", "WEFT_STORE_SECRET",
	"WEFT_RESTART_COUNT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
	"GROUP_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
	"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
	"OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK", "SLURM_PROCID",
	"SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_JOB_NODELIST",
	"SLURM_NODELIST", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_JOB_ID",
	"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "WEFT_STORE_PORT", "SLURM_STEP_ID",
	"SLURM_STEPID", "SLURM_JOB_NUM_NODES", "SLURM_NNODES",
};

static void clear_env(void)
{
	for (size_t i = 0; i < sizeof(all_vars) / sizeof(all_vars[0]); i++)
		unsetenv(all_vars[i]);
}

static void test_single(void)
{
	weft_dist_env env;

	clear_env();
	WT_OK(weft_dist_env_detect(&env));
	WT_CHECK(env.source == WEFT_DIST_SINGLE);
	WT_CHECK(env.rank == 0 && env.world_size == 1);
}

static void test_weft_wins_over_torchrun(void)
{
	weft_dist_env env;

	clear_env();
	setenv("WEFT_RANK", "2", 1);
	setenv("WEFT_WORLD_SIZE", "4", 1);
	setenv("WEFT_LOCAL_RANK", "0", 1);
	setenv("WEFT_LOCAL_WORLD_SIZE", "2", 1);
	setenv("WEFT_NODE_RANK", "1", 1);
	setenv("WEFT_STORE_ADDR", "10.0.0.1", 1);
	setenv("WEFT_STORE_PORT", "4242", 1);
	setenv("WEFT_STORE_SECRET", "s3cret", 1);
	setenv("RANK", "3", 1);
	setenv("WORLD_SIZE", "4", 1);
	WT_OK(weft_dist_env_detect(&env));
	WT_CHECK(env.source == WEFT_DIST_WEFT);
	WT_CHECK(env.rank == 2 && env.world_size == 4 && env.local_rank == 0);
	WT_CHECK(env.local_world_size == 2 && env.node_rank == 1);
	WT_CHECK(!strcmp(env.store_host, "10.0.0.1") && env.store_port == 4242);
	WT_CHECK(!env.store_served_by_rank0);
	WT_CHECK(!strcmp(env.secret, "s3cret") && env.secret_from_env);

	unsetenv("WEFT_STORE_SECRET");
	WT_FAILS(weft_dist_env_detect(&env), WEFT_ERR_CONFIG, "WEFT_STORE_SECRET", "weft launch");
}

static void test_torchrun(void)
{
	weft_dist_env env;

	clear_env();
	setenv("RANK", "1", 1);
	setenv("WORLD_SIZE", "2", 1);
	setenv("LOCAL_RANK", "1", 1);
	setenv("LOCAL_WORLD_SIZE", "2", 1);
	setenv("MASTER_ADDR", "127.0.0.1", 1);
	setenv("MASTER_PORT", "29400", 1);
	WT_OK(weft_dist_env_detect(&env));
	WT_CHECK(env.source == WEFT_DIST_TORCHRUN);
	WT_CHECK(env.rank == 1 && env.world_size == 2 && env.local_rank == 1);
	/* torchrun's own store holds MASTER_PORT; weft's goes one above */
	WT_CHECK(env.store_port == 29401 && env.store_served_by_rank0);
	WT_CHECK(!env.secret_from_env);

	setenv("RANK", "two", 1);
	WT_FAILS(weft_dist_env_detect(&env), WEFT_ERR_CONFIG, "RANK='two'", "torchrun");
	setenv("RANK", "2", 1);
	WT_FAILS(weft_dist_env_detect(&env), WEFT_ERR_CONFIG, "rank 2", "world size 2");
	setenv("RANK", "1", 1);
	unsetenv("MASTER_ADDR");
	WT_FAILS(weft_dist_env_detect(&env), WEFT_ERR_CONFIG, "MASTER_ADDR");
}

static void test_ompi(void)
{
	weft_dist_env env;

	clear_env();
	setenv("OMPI_COMM_WORLD_RANK", "3", 1);
	setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
	WT_OK(weft_dist_env_detect(&env));
	WT_CHECK(env.source == WEFT_DIST_OMPI);
	WT_CHECK(env.rank == 3 && env.world_size == 4 && env.local_rank == 3);
	WT_CHECK(!strcmp(env.store_host, "127.0.0.1") && env.store_port == 29500);
	WT_CHECK(env.node_rank == 0);
	setenv("WEFT_STORE_SECRET", "s", 1); /* several nodes need one */
	/* OMPI_COMM_WORLD_NODE_RANK is the index on the node, not the node's:
	 * rank 5 of 8 at 4 a node (placed by slot) is on node 1 ... */
	setenv("MASTER_ADDR", "127.0.0.1", 1);
	setenv("OMPI_COMM_WORLD_RANK", "5", 1);
	setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
	setenv("OMPI_COMM_WORLD_NODE_RANK", "1", 1);
	WT_OK(weft_dist_env_detect(&env));
	WT_CHECK(env.node_rank == 1 && env.local_rank == 1);
	setenv("OMPI_COMM_WORLD_RANK", "6", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);
	setenv("OMPI_COMM_WORLD_NODE_RANK", "2", 1);
	WT_OK(weft_dist_env_detect(&env));
	WT_CHECK(env.node_rank == 1);
	/* ... and placed by node (round robin over 2 nodes), rank 5 is local
	 * rank 2 on node 1 */
	setenv("OMPI_COMM_WORLD_RANK", "5", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);
	WT_OK(weft_dist_env_detect(&env));
	WT_CHECK(env.node_rank == 1);
	unsetenv("MASTER_ADDR");
	unsetenv("WEFT_STORE_SECRET");
	unsetenv("OMPI_COMM_WORLD_NODE_RANK");
	setenv("OMPI_COMM_WORLD_RANK", "3", 1);
	setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
	/* spanning nodes, an address is needed */
	setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
	WT_FAILS(weft_dist_env_detect(&env), WEFT_ERR_CONFIG, "Open MPI", "MASTER_ADDR");
}

static void test_slurm(void)
{
	weft_dist_env env;
	char host[64];

	clear_env();
	setenv("SLURM_PROCID", "5", 1);
	setenv("SLURM_NTASKS", "8", 1);
	setenv("SLURM_LOCALID", "1", 1);
	setenv("SLURM_NODEID", "2", 1);
	setenv("SLURM_TASKS_PER_NODE", "4(x2)", 1);
	setenv("SLURM_JOB_NODELIST", "gpu[07-09,12],cpu1", 1);
	setenv("SLURM_JOB_ID", "777", 1);
	/* the batch script itself, not a step of srun: the other ranks would
	 * never come; said at once, with the srun line */
	setenv("SLURM_JOB_NUM_NODES", "2", 1);
	WT_FAILS(weft_dist_env_detect(&env), WEFT_ERR_CONFIG, "not started by srun",
		 "srun --nodes 2");
	unsetenv("SLURM_JOB_NUM_NODES");
	WT_FAILS(weft_dist_env_detect(&env), WEFT_ERR_CONFIG, "8 task(s)", "srun weft fit");
	/* one node and no SLURM_PROCID (an salloc shell): a plain single
	 * process (devices > 1 then starts its own launcher) */
	unsetenv("SLURM_PROCID");
	WT_OK(weft_dist_env_detect(&env));
	WT_CHECK(env.source == WEFT_DIST_SINGLE);
	setenv("SLURM_PROCID", "5", 1);
	setenv("SLURM_STEP_ID", "0", 1); /* srun sets it */
	/* several nodes and no secret: refused, with what to export where */
	WT_FAILS(weft_dist_env_detect(&env), WEFT_ERR_CONFIG, "WEFT_STORE_SECRET is not set",
		 "before srun");
	setenv("WEFT_STORE_SECRET", "s", 1);
	WT_OK(weft_dist_env_detect(&env));
	WT_CHECK(env.source == WEFT_DIST_SLURM);
	WT_CHECK(env.rank == 5 && env.world_size == 8 && env.local_rank == 1);
	WT_CHECK(env.local_world_size == 4 && env.node_rank == 2);
	WT_CHECK(!strcmp(env.store_host, "gpu07"));
	WT_CHECK(env.store_served_by_rank0);

	WT_OK(weft_dist_slurm_first_host("node1,node2", host, sizeof(host)));
	WT_CHECK(!strcmp(host, "node1"));
	WT_OK(weft_dist_slurm_first_host("a-[001-004]", host, sizeof(host)));
	WT_CHECK(!strcmp(host, "a-001"));
	WT_FAILS(weft_dist_slurm_first_host("gpu[x-3]", host, sizeof(host)), WEFT_ERR_CONFIG,
		 "gpu[x-3]", "MASTER_ADDR");
	WT_FAILS(weft_dist_slurm_first_host("gpu[1-3", host, sizeof(host)), WEFT_ERR_CONFIG,
		 "not a node list");
	setenv("SLURM_JOB_NODELIST", "[", 1);
	WT_FAILS(weft_dist_env_detect(&env), WEFT_ERR_CONFIG, "SLURM_JOB_NODELIST='['");
}

/* Two jobs on one node get different store ports from their job ids, and
 * the advice names the launcher that started the job. */
static void test_job_port(void)
{
	weft_dist_env env;
	char hint[512];
	int p1;

	clear_env();
	setenv("SLURM_PROCID", "0", 1);
	setenv("SLURM_NTASKS", "2", 1);
	setenv("SLURM_JOB_NODELIST", "node1", 1);
	setenv("SLURM_JOB_ID", "123456", 1);
	setenv("SLURM_STEP_ID", "0", 1);
	WT_OK(weft_dist_env_detect(&env));
	WT_CHECK(env.store_port == 10000 + 123456 % 20000);
	setenv("SLURM_JOB_ID", "123457", 1);
	WT_OK(weft_dist_env_detect(&env));
	WT_CHECK(env.store_port == 10000 + 123457 % 20000);
	WT_STR_CONTAINS(weft_dist_port_hint(&env, hint, sizeof(hint)), "before srun");
	WT_STR_CONTAINS(weft_dist_start_hint(env.source, 4, 2, hint, sizeof(hint)),
			"srun --nodes 2 --ntasks-per-node 4");
	setenv("MASTER_PORT", "23456", 1); /* an exported port wins */
	WT_OK(weft_dist_env_detect(&env));
	WT_CHECK(env.store_port == 23456);

	clear_env();
	setenv("OMPI_COMM_WORLD_RANK", "0", 1);
	setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
	setenv("OMPI_MCA_ess_base_jobid", "3947036673", 1);
	WT_OK(weft_dist_env_detect(&env));
	WT_CHECK(env.store_port == (int)(10000 + 3947036673ull % 20000));
	WT_STR_CONTAINS(weft_dist_port_hint(&env, hint, sizeof(hint)), "before mpirun");
	WT_STR_CONTAINS(weft_dist_start_hint(env.source, 4, 2, hint, sizeof(hint)), "mpirun -np 8");
	/* Open MPI 5: the PMIx namespace, hashed into the same range */
	unsetenv("OMPI_MCA_ess_base_jobid");
	setenv("PMIX_NAMESPACE", "prterun-host-4242@1", 1);
	WT_OK(weft_dist_env_detect(&env));
	p1 = env.store_port;
	WT_CHECK(p1 >= 10000 && p1 < 30000);
	setenv("PMIX_NAMESPACE", "prterun-host-4243@1", 1);
	WT_OK(weft_dist_env_detect(&env));
	WT_CHECK(env.store_port >= 10000 && env.store_port < 30000 && env.store_port != p1);
	WT_CHECK(weft_dist_job_port(NULL) == WEFT_DIST_DEFAULT_PORT);
	WT_STR_CONTAINS(weft_dist_start_hint(WEFT_DIST_TORCHRUN, 2, 1, hint, sizeof(hint)),
			"torchrun --nnodes 1 --nproc-per-node 2");
}

/* Without WEFT_STORE_SECRET on one node the secret is random, handed over
 * in a 0600 file of a 0700 directory; the token older versions derived
 * from public values (job id, uid, address, port) is refused. */
static void test_private_secret(void)
{
	weft_dist_env r0, r1;
	weft_store_server *srv = NULL, *none = NULL;
	weft_store_client *c0 = NULL, *c1 = NULL, *forged = NULL;
	char dir[256], forged_token[256];
	struct stat sb;

	clear_env();
	snprintf(dir, sizeof(dir), "/tmp/weft-test-secret-%d", (int)getpid());
	setenv("WEFT_SECRET_DIR", dir, 1);
	setenv("RANK", "0", 1);
	setenv("WORLD_SIZE", "2", 1);
	setenv("LOCAL_WORLD_SIZE", "2", 1);
	setenv("MASTER_ADDR", "127.0.0.1", 1);
	setenv("MASTER_PORT", "1", 1);
	setenv("WEFT_STORE_PORT", "0", 1); /* not a port: refused below */
	WT_FAILS(weft_dist_env_detect(&r0), WEFT_ERR_CONFIG, "WEFT_STORE_PORT='0'");
	unsetenv("WEFT_STORE_PORT");
	WT_OK(weft_dist_env_detect(&r0));
	WT_CHECK(!r0.secret_from_env && strncmp(r0.secret_file, dir, strlen(dir)) == 0);
	WT_REQUIRE(stat(dir, &sb) == 0);
	WT_CHECK((sb.st_mode & 0777) == 0700);
	/* rank 0 serves on a free port (the test's; a job's comes from the env) */
	r0.store_port = 0;
	{
		weft_store_server *probe = NULL;

		WT_OK(weft_store_server_start("127.0.0.1", 0, "probe", &probe));
		r0.store_port = weft_store_server_port(probe);
		weft_store_server_stop(probe);
	}
	r1 = r0;
	r1.rank = 1;
	memset(r1.secret, 0, sizeof(r1.secret));
	WT_OK(weft_dist_store_join(&r0, 5000, &srv, &c0));
	WT_REQUIRE(srv != NULL);
	WT_REQUIRE(stat(r0.secret_file, &sb) == 0);
	WT_CHECK((sb.st_mode & 0777) == 0600 && strlen(r0.secret) == 64);
	WT_OK(weft_dist_store_join(&r1, 5000, &none, &c1));
	WT_CHECK(none == NULL && !strcmp(r0.secret, r1.secret));
	snprintf(forged_token, sizeof(forged_token), "job:-:uid%u:127.0.0.1:%d",
		 (unsigned)getuid(), r0.store_port);
	WT_FAILS(weft_store_connect("127.0.0.1", r0.store_port, forged_token, 2000, &forged),
		 WEFT_ERR_COMM, "refused");
	weft_store_client_close(c1);
	weft_store_client_close(c0);
	weft_store_server_stop(srv);
	unlink(r0.secret_file);
	/* a directory others can enter is refused, as ssh refuses such keys */
	WT_REQUIRE(chmod(dir, 0755) == 0);
	WT_FAILS(weft_dist_env_detect(&r0), WEFT_ERR_CONFIG, "not a private directory",
		 "WEFT_STORE_SECRET");
	rmdir(dir);
	unsetenv("WEFT_SECRET_DIR");
}

static void test_secret(void)
{
	char a[65], b[65];

	WT_OK(weft_dist_make_secret(a, sizeof(a)));
	WT_OK(weft_dist_make_secret(b, sizeof(b)));
	WT_CHECK(strlen(a) == 64 && strcmp(a, b) != 0);
	WT_FAILS(weft_dist_make_secret(a, 10), WEFT_ERR_INVALID_ARG, "too small");
}

int main(void)
{
	test_single();
	test_weft_wins_over_torchrun();
	test_torchrun();
	test_ompi();
	test_slurm();
	test_job_port();
	test_private_secret();
	test_secret();
	return wt_done("test_dist_env");
}
