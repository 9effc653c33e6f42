/* Multi-process tests of the gloo backend through core/dist's process
 * groups: `test_dist_gloo SCENARIO NRANKS` runs NRANKS real processes of
 * dist_worker and checks how each one ended. The ranks share this host, so
 * collectives go through shared memory (shm: auto); a SCENARIO ending in
 * _tcp runs the same with shm: off, over Gloo's tcp transport. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/spawn.h"
#include "weft_test.h"

/* Runs n ranks of dist_worker SCENARIO, waiting at most deadline_s. */
static int spawn_run(int n, const char *scenario, double deadline_s, wt_spawn_result *res)
{
	static char path[4096];
	const char *b = getenv("WEFT_BUILD_DIR");
	char *argv[] = { path, (char *)scenario, NULL };

	snprintf(path, sizeof(path), "%s/tests/dist_worker", b ? b : "..");
	return wt_spawn(n, argv, deadline_s, res);
}

int main(int argc, char **argv)
{
	wt_spawn_result res;
	const char *scenario;
	int n;

	WT_REQUIRE(argc == 3);
	scenario = argv[1];
	n = atoi(argv[2]);
	WT_REQUIRE(n >= 1 && n <= WT_SPAWN_MAX);
	{
		static char base[64];
		size_t len = strlen(scenario);

		if (len > 4 && !strcmp(scenario + len - 4, "_tcp")) {
			snprintf(base, sizeof(base), "%.*s", (int)(len - 4), scenario);
			scenario = base;
			setenv("WEFT_TEST_GLOO_SHM", "off", 1);
		}
	}

	if (!strcmp(scenario, "killed")) {
		/* 2 s comm timeout: every survivor must be out within timeout +
		 * the ledger's wait (<= 2 s) + start-up; 12 s leaves room for a
		 * loaded 2-core machine under ASan */
		setenv("WEFT_TEST_COMM_TIMEOUT_MS", "2000", 1);
		WT_REQUIRE(spawn_run(n, scenario, 30, &res) == 0);
		WT_CHECK(!res.hung);
		WT_CHECK(WIFSIGNALED(res.status[1]) && WTERMSIG(res.status[1]) == SIGKILL);
		for (int r = 0; r < n; r++) {
			if (r == 1)
				continue;
			WT_CHECK(wt_spawn_exited(&res, r, 3));
			WT_CHECK(res.seconds[r] < 12.0);
			WT_STR_CONTAINS(res.err[r], "all_reduce #3");
			WT_STR_CONTAINS(res.err[r], "rank 1 did not answer");
		}
	} else if (!strcmp(scenario, "mismatch")) {
		char want[128];

		setenv("WEFT_TEST_COMM_TIMEOUT_MS", "1500", 1);
		WT_REQUIRE(spawn_run(n, scenario, 30, &res) == 0);
		WT_CHECK(!res.hung);
		snprintf(want, sizeof(want), "rank %d called all_gather #2 (f32 x 8) where rank 0 "
			 "called all_reduce #2 (f32 x 8)", n - 1);
		for (int r = 0; r < n; r++)
			WT_CHECK(wt_spawn_exited(&res, r, 3));
		WT_STR_CONTAINS(res.err[0], want);
		snprintf(want, sizeof(want), "rank 0 called all_reduce #2 (f32 x 8) where rank %d "
			 "called all_gather #2 (f32 x 8)", n - 1);
		WT_STR_CONTAINS(res.err[n - 1], want);
	} else if (!strcmp(scenario, "shm_refused")) {
		/* rank 0 turns shared memory off, rank 1 insists on it: rank 1's
		 * init fails naming rank 0's reason; rank 0 goes on over tcp */
		setenv("WEFT_TEST_GLOO_SHM_0", "off", 1);
		setenv("WEFT_TEST_GLOO_SHM_1", "on", 1);
		WT_REQUIRE(spawn_run(n, "init", 30, &res) == 0);
		WT_CHECK(!res.hung);
		WT_CHECK(wt_spawn_exited(&res, 0, 0));
		WT_CHECK(wt_spawn_exited(&res, 1, 3));
		WT_STR_CONTAINS(res.err[1], "shared memory was asked for (shm: on), but rank 0: "
				"turned off (shm: off); use shm: auto");
	} else {
		/* "large" insists on shared memory: init fails if it is not used;
		 * a machine without a usable /dev/shm skips it */
		if (!strcmp(scenario, "large")) {
			char name[64];
			int fd;

			snprintf(name, sizeof(name), "/weft-test-probe-%d", (int)getpid());
			fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
			if (fd < 0) {
				printf("test_dist_gloo large: skipped: no shared memory here "
				       "(shm_open: %s)\n", strerror(errno));
				return 77;
			}
			close(fd);
			shm_unlink(name);
			setenv("WEFT_TEST_GLOO_SHM", "on", 1);
		}
		WT_REQUIRE(spawn_run(n, scenario, 90, &res) == 0);
		WT_CHECK(!res.hung);
		for (int r = 0; r < n; r++)
			WT_CHECK(wt_spawn_exited(&res, r, 0));
	}
	return wt_done("test_dist_gloo");
}
