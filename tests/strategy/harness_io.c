/* The strategy test harness (harness.h), its outside: result files,
 * comparisons, and the spawner that runs a program as the ranks of a job. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#include "dist/dist.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- results ------------------------------------------------------------ */

void h_result_free(h_result *r)
{
	free(r->weights);
	r->weights = NULL;
}

int h_result_write(const h_result *r, const char *path)
{
	FILE *f = fopen(path, "wb");
	int ok;

	if (!f)
		return -1;
	ok = fwrite(r, sizeof(*r), 1, f) == 1 &&
	     fwrite(r->weights, sizeof(float), (size_t)r->numel, f) == (size_t)r->numel;
	return (fclose(f) == 0 && ok) ? 0 : -1;
}

int h_result_read(h_result *r, const char *path)
{
	FILE *f = fopen(path, "rb");
	int ok;

	if (!f)
		return -1;
	ok = fread(r, sizeof(*r), 1, f) == 1;
	r->weights = ok ? malloc((size_t)r->numel * sizeof(float) + 1) : NULL;
	ok = ok && r->weights &&
	     fread(r->weights, sizeof(float), (size_t)r->numel, f) == (size_t)r->numel;
	fclose(f);
	if (!ok) {
		free(r->weights);
		r->weights = NULL;
	}
	return ok ? 0 : -1;
}

/* ---- spawning ranks --------------------------------------------------- */

int h_spawn(int n, char *const argv[], double deadline_s, h_spawn_result *res)
{
	weft_store_server *srv;
	char secret[65], port[16], buf[32];
	pid_t pids[H_MAX_RANKS];
	int alive = n;
	double t0;

	memset(res, 0, sizeof(*res));
	res->n = n;
	if (n < 1 || n > H_MAX_RANKS || weft_dist_make_secret(secret, sizeof(secret)) ||
	    weft_store_server_start("127.0.0.1", 0, secret, &srv))
		return -1;
	snprintf(port, sizeof(port), "%d", weft_store_server_port(srv));
	t0 = now_s();
	for (int r = 0; r < n; r++) {
		char errpath[64];

		snprintf(errpath, sizeof(errpath), "h-%d-rank%d.err", (int)getpid(), r);
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
			execv(argv[0], argv);
			fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
			_exit(127);
		}
	}
	while (alive > 0) {
		int st;
		pid_t p = waitpid(-1, &st, WNOHANG);

		if (p > 0) {
			for (int r = 0; r < n; r++)
				if (pids[r] == p) {
					res->status[r] = st;
					pids[r] = 0;
					alive--;
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
	weft_store_server_stop(srv);
	for (int r = 0; r < n; r++) {
		char errpath[64];
		FILE *f;

		snprintf(errpath, sizeof(errpath), "h-%d-rank%d.err", (int)getpid(), r);
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

int h_spawn_ok(const h_spawn_result *res, int r)
{
	int ok = WIFEXITED(res->status[r]) && WEXITSTATUS(res->status[r]) == 0;

	if (!ok)
		fprintf(stderr, "--- rank %d (status 0x%x) stderr:\n%s\n", r, res->status[r],
			res->err[r]);
	return ok;
}

double h_max_rel(const float *a, const float *b, int64_t n, double floor, int64_t *where)
{
	double worst = 0.0;

	*where = -1;
	for (int64_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - (double)b[i]) / (fabs((double)b[i]) + floor);

		if (!(d <= worst)) {
			worst = d;
			*where = i;
		}
	}
	return worst;
}

double h_rel_l2(const float *a, const float *b, int64_t n)
{
	double num = 0.0, den = 0.0;

	for (int64_t i = 0; i < n; i++) {
		double d = (double)a[i] - (double)b[i];

		num += d * d;
		den += (double)b[i] * (double)b[i];
	}
	return den > 0.0 ? sqrt(num / den) : sqrt(num);
}
