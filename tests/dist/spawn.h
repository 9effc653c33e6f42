/* spawn.h - runs N copies of a worker program as ranks of one job, the way
 * `weft launch` would, for multi-process tests: a store served by the test
 * itself (port 0, so parallel tests never collide), WEFT_* variables, each
 * rank's stderr in a file, and a deadline after which every rank is killed
 * (so a hang fails the test instead of hanging ctest). */
#ifndef WEFT_TEST_SPAWN_H
#define WEFT_TEST_SPAWN_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist.h"

#define SPAWN_MAX 8

typedef struct spawn_result {
	int nranks;
	int status[SPAWN_MAX];   /* waitpid status */
	double seconds[SPAWN_MAX];/* when each exited, from the start */
	int hung;                /* 1 when the deadline killed someone */
	char err[SPAWN_MAX][8192];/* each rank's stderr (truncated) */
} spawn_result;

static double spawn_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *spawn_worker_path(void)
{
	static char path[4096];
	const char *b = getenv("WEFT_BUILD_DIR");

	snprintf(path, sizeof(path), "%s/tests/dist_worker", b ? b : "..");
	return path;
}

/* Runs n ranks of `argv` (argv[0] = the program), each with `scenario` as
 * its first argument; waits at most deadline_s. */
static int spawn_run(int n, const char *scenario, double deadline_s, spawn_result *res)
{
	weft_store_server *srv;
	char secret[65], port[16], buf[32];
	pid_t pids[SPAWN_MAX];
	int alive = n;
	double t0;

	memset(res, 0, sizeof(*res));
	res->nranks = n;
	if (weft_dist_make_secret(secret, sizeof(secret)) ||
	    weft_store_server_start("127.0.0.1", 0, secret, &srv))
		return -1;
	snprintf(port, sizeof(port), "%d", weft_store_server_port(srv));
	t0 = spawn_now();
	for (int r = 0; r < n; r++) {
		char errpath[64];

		snprintf(errpath, sizeof(errpath), "spawn-%d-rank%d.err", (int)getpid(), r);
		pids[r] = fork();
		if (pids[r] == 0) {
			int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);

			if (fd >= 0) {
				dup2(fd, 2);
				close(fd);
			}
			snprintf(buf, sizeof(buf), "%d", r);
			setenv("WEFT_RANK", buf, 1);
			setenv("WEFT_LOCAL_RANK", buf, 1);
			snprintf(buf, sizeof(buf), "%d", n);
			setenv("WEFT_WORLD_SIZE", buf, 1);
			setenv("WEFT_LOCAL_WORLD_SIZE", buf, 1);
			setenv("WEFT_STORE_ADDR", "127.0.0.1", 1);
			setenv("WEFT_STORE_PORT", port, 1);
			setenv("WEFT_STORE_SECRET", secret, 1);
			execl(spawn_worker_path(), "dist_worker", scenario, (char *)NULL);
			fprintf(stderr, "exec %s: %s\n", spawn_worker_path(), strerror(errno));
			_exit(127);
		}
	}
	while (alive > 0) {
		int st;
		pid_t p = waitpid(-1, &st, WNOHANG);

		if (p > 0) {
			for (int r = 0; r < n; r++) {
				if (pids[r] == p) {
					res->status[r] = st;
					res->seconds[r] = spawn_now() - t0;
					pids[r] = 0;
					alive--;
				}
			}
			continue;
		}
		if (spawn_now() - t0 > deadline_s) {
			res->hung = 1;
			for (int r = 0; r < n; r++)
				if (pids[r] > 0)
					kill(pids[r], SIGKILL);
			deadline_s = 1e9;
			continue;
		}
		usleep(10000);
	}
	weft_store_server_stop(srv);
	for (int r = 0; r < n; r++) {
		char errpath[64];
		FILE *f;

		snprintf(errpath, sizeof(errpath), "spawn-%d-rank%d.err", (int)getpid(), r);
		f = fopen(errpath, "r");
		if (f) {
			size_t k = fread(res->err[r], 1, sizeof(res->err[r]) - 1, f);

			res->err[r][k] = '\0';
			fclose(f);
			unlink(errpath);
		}
	}
	return 0;
}

/* Whether rank r exited normally with `code`. Prints its stderr if not. */
static int spawn_exited(const spawn_result *res, int r, int code)
{
	int ok = WIFEXITED(res->status[r]) && WEXITSTATUS(res->status[r]) == code;

	if (!ok)
		fprintf(stderr, "--- rank %d (status 0x%x) stderr:\n%s\n", r, res->status[r],
			res->err[r]);
	return ok;
}

#endif /* WEFT_TEST_SPAWN_H */
