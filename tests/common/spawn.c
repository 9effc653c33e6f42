/* The rank spawner of multi-process tests (common/spawn.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/spawn.h"

#include "dist/dist.h"
#include "weft/status.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void err_path(char *buf, size_t cap, int r)
{
	snprintf(buf, cap, "spawn-%d-rank%d.err", (int)getpid(), r);
}

/* In the child: stderr to `path`, the job's variables, then the program. */
static void exec_rank(const char *path, int r, int n, const char *port, const char *secret,
		      char *const argv[])
{
	char buf[32];
	int fd;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
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
	execv(argv[0], argv);
	fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* Reaps the ranks as they exit; past the deadline kills those left. */
static void wait_ranks(pid_t *pids, int n, double t0, double deadline_s, wt_spawn_result *res)
{
	int alive = n;

	while (alive > 0) {
		int st;
		pid_t p = waitpid(-1, &st, WNOHANG);

		if (p > 0) {
			for (int r = 0; r < n; r++) {
				if (pids[r] == p) {
					res->status[r] = st;
					res->seconds[r] = now_s() - t0;
					pids[r] = 0;
					alive--;
				}
			}
			continue;
		}
		if (now_s() - t0 > deadline_s) {
			res->hung = 1;
			for (int r = 0; r < n; r++)
				if (pids[r] > 0)
					kill(pids[r], SIGKILL);
			deadline_s = 1e18;
			continue;
		}
		usleep(2000);
	}
}

int wt_spawn(int n, char *const argv[], double deadline_s, wt_spawn_result *res)
{
	weft_store_server *srv;
	char secret[65], port[16];
	pid_t pids[WT_SPAWN_MAX];
	double t0;

	memset(res, 0, sizeof(*res));
	res->n = n;
	if (n < 1 || n > WT_SPAWN_MAX) {
		weft_error_set(WEFT_ERR_INVALID_ARG, "wt_spawn: %d ranks, but 1 to %d are possible",
			       n, WT_SPAWN_MAX);
		return -1;
	}
	if (weft_dist_make_secret(secret, sizeof(secret)) ||
	    weft_store_server_start("127.0.0.1", 0, secret, &srv))
		return -1;
	snprintf(port, sizeof(port), "%d", weft_store_server_port(srv));
	t0 = now_s();
	for (int r = 0; r < n; r++) {
		char path[64];

		/* named by this process's pid, before the fork changes getpid() */
		err_path(path, sizeof(path), r);
		pids[r] = fork();
		if (pids[r] == 0)
			exec_rank(path, r, n, port, secret, argv);
	}
	wait_ranks(pids, n, t0, deadline_s, res);
	weft_store_server_stop(srv);
	for (int r = 0; r < n; r++) {
		char path[64];
		FILE *f;

		err_path(path, sizeof(path), r);
		f = fopen(path, "r");
		if (f) {
			size_t k = fread(res->err[r], 1, sizeof(res->err[r]) - 1, f);

			res->err[r][k] = '\0';
			fclose(f);
			unlink(path);
		}
	}
	return 0;
}

int wt_spawn_exited(const wt_spawn_result *res, int r, int code)
{
	int ok = WIFEXITED(res->status[r]) && WEXITSTATUS(res->status[r]) == code;

	if (!ok)
		fprintf(stderr, "--- rank %d (status 0x%x) stderr:\n%s\n", r, res->status[r],
			res->err[r]);
	return ok;
}
