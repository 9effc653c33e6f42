/* The launcher: variables, a killed rank stopping the group with the root
 * cause, no orphans, SIGTERM forwarding, restarts that resume from a
 * checkpoint, and option errors. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "launch/launch.h"
#include "weft/log.h"
#include "weft_test.h"

static char dir[256], child[4096];

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long read_file(const char *name)
{
	char path[512];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static void clean_dir(void)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -f %s/*", dir);
	WT_REQUIRE(system(cmd) == 0);
}

static int run(const char *mode, int n, int restarts, weft_launch_result *res)
{
	char *argv[] = { child, (char *)mode, dir, NULL };
	weft_launch_opts o = {
		.nproc_per_node = n, .nnodes = 1, .max_restarts = restarts,
		.term_timeout_ms = 2000, .argv = argv,
	};

	clean_dir();
	return weft_launch_run(&o, res);
}

/* No process that the launcher started is still alive. */
static void check_no_orphans(int n, int restarts)
{
	for (int a = 0; a <= restarts; a++) {
		for (int r = 0; r < n; r++) {
			char name[64];
			long pid;

			snprintf(name, sizeof(name), "pid.%d.%d", r, a);
			pid = read_file(name);
			if (pid > 0)
				WT_CHECK(kill((pid_t)pid, 0) != 0 && errno == ESRCH);
		}
	}
}

static void *send_term(void *arg)
{
	(void)arg;
	/* wait until both ranks have their SIGTERM handler (the pid files
	 * would not do: earlier runs in this directory left them), then
	 * signal this process; after 30 s signal anyway, and the check on
	 * term.<rank> fails */
	for (int i = 0; i < 3000 && (read_file("ready.0") < 0 || read_file("ready.1") < 0); i++)
		usleep(10000);
	kill(getpid(), SIGTERM);
	return NULL;
}

int main(void)
{
	weft_launch_result res;
	const char *b = getenv("WEFT_BUILD_DIR");
	double t0;

	snprintf(child, sizeof(child), "%s/tests/launch_child", b ? b : "..");
	snprintf(dir, sizeof(dir), "launch-test-%d", (int)getpid());
	WT_REQUIRE(mkdir(dir, 0755) == 0);

	/* all succeed */
	WT_OK(run("ok", 3, 0, &res));
	WT_CHECK(res.exit_code == 0 && res.failed_rank == -1 && res.restarts == 0);
	WT_CHECK(read_file("pid.2.0") > 0);

	/* MASTER_PORT is free for the child's own store (PyTorch's init binds
	 * it), not the port weft's store holds */
	WT_OK(run("bindport", 2, 0, &res));
	WT_CHECK(res.exit_code == 0);
	if (res.exit_code)
		fprintf(stderr, "bindport: %s\n", res.cause);

	/* rank 1 is killed: the others are stopped, the cause names it */
	t0 = now();
	WT_OK(run("crash", 3, 0, &res));
	WT_CHECK(now() - t0 < 5.0); /* SIGTERM stops the others at once */
	WT_CHECK(res.exit_code == 128 + SIGKILL);
	WT_CHECK(res.failed_rank == 1);
	{
		char want[64];

		snprintf(want, sizeof(want), "rank 1 (pid %ld) killed by signal 9", read_file("pid.1.0"));
		WT_STR_CONTAINS(res.cause, want);
	}
	check_no_orphans(3, 0);

	/* SIGTERM to the launcher reaches every rank */
	{
		pthread_t th;

		WT_REQUIRE(pthread_create(&th, NULL, send_term, NULL) == 0);
		WT_OK(run("term", 2, 3, &res));
		pthread_join(th, NULL);
		WT_CHECK(res.exit_code == 128 + SIGTERM);
		WT_CHECK(res.restarts == 0); /* a signal is not a failure to restart from */
		WT_CHECK(read_file("term.0") == 1 && read_file("term.1") == 1);
		check_no_orphans(2, 0);
	}

	/* a restart continues the run from its last checkpoint */
	WT_OK(run("counter", 2, 1, &res));
	WT_CHECK(res.exit_code == 0 && res.restarts == 1);
	WT_CHECK(read_file("ckpt") == 10);
	WT_CHECK(read_file("resumed") == 5); /* the first attempt holds at 5 */
	check_no_orphans(2, 1);
	/* without restarts the same run fails and says why */
	WT_OK(run("counter", 2, 0, &res));
	WT_CHECK(res.exit_code == 137 && res.failed_rank == 1);
	WT_CHECK(read_file("ckpt") == 5);

	/* a command that does not exist fails like a crashed rank */
	{
		char *argv[] = { "/nonexistent/prog", NULL };
		weft_launch_opts o = { .nproc_per_node = 1, .nnodes = 1, .argv = argv };

		WT_OK(weft_launch_run(&o, &res));
		WT_CHECK(res.exit_code == 127);
		WT_STR_CONTAINS(res.cause, "rank 0");
	}

	/* option errors read as advice */
	{
		char *argv[] = { child, "ok", dir, NULL };
		weft_launch_opts o = { .nproc_per_node = 0, .nnodes = 1, .argv = argv };

		WT_FAILS(weft_launch_run(&o, &res), WEFT_ERR_CONFIG, "--nproc-per-node 0");
		o.nproc_per_node = 1;
		o.nnodes = 2;
		WT_FAILS(weft_launch_run(&o, &res), WEFT_ERR_CONFIG, "--master-addr");
		o.master_addr = "10.0.0.1";
		o.master_port = 29500;
		unsetenv("WEFT_STORE_SECRET");
		WT_FAILS(weft_launch_run(&o, &res), WEFT_ERR_CONFIG, "WEFT_STORE_SECRET");
		o.nnodes = 1;
		o.node_rank = 1;
		WT_FAILS(weft_launch_run(&o, &res), WEFT_ERR_CONFIG, "--node-rank 1");
		o.node_rank = 0;
		o.argv = NULL;
		WT_FAILS(weft_launch_run(&o, &res), WEFT_ERR_CONFIG, "put it after '--'");
	}
	clean_dir();
	rmdir(dir);
	return wt_done("test_launch");
}
