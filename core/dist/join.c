/* A rank's way into the store under launchers that are not weft's: the
 * private secret file, rank 0 serving, connecting within the deadline. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist.h"
#include "dist/heartbeat.h"
#include "weft/log.h"

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Rank 0: a new random secret, written with mode 0600 under its final
 * name by rename, so a reader never sees half of it. */
static weft_status publish_secret(weft_dist_env *env)
{
	char tmp[WEFT_DIST_PATH_MAX + 32];
	weft_status st;
	size_t n;
	int fd;

	if ((st = weft_dist_make_secret(env->secret, sizeof(env->secret))))
		return st;
	snprintf(tmp, sizeof(tmp), "%s.tmp%d", env->secret_file, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return weft_error_set(WEFT_ERR_IO, "store secret: cannot write %s: %s", tmp,
				      strerror(errno));
	n = strlen(env->secret);
	if (write(fd, env->secret, n) != (ssize_t)n || fsync(fd) != 0 || close(fd) != 0 ||
	    rename(tmp, env->secret_file) != 0) {
		int e = errno;

		unlink(tmp);
		return weft_error_set(WEFT_ERR_IO, "store secret: cannot write %s: %s",
				      env->secret_file, strerror(e));
	}
	return WEFT_OK;
}

/* Other ranks: the secret rank 0 wrote; 1 when there is one to read. */
static int read_secret_file(weft_dist_env *env)
{
	int fd = open(env->secret_file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat sb;
	ssize_t n;

	if (fd < 0)
		return 0;
	if (fstat(fd, &sb) != 0 || sb.st_uid != getuid() || (sb.st_mode & 077) ||
	    !S_ISREG(sb.st_mode)) {
		close(fd);
		return 0;
	}
	n = read(fd, env->secret, sizeof(env->secret) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	env->secret[n] = '\0';
	return 1;
}

weft_status weft_dist_store_join(weft_dist_env *env, int64_t timeout_ms, weft_store_server **srv,
				 weft_store_client **out)
{
	int64_t t0 = now_ms(), deadline = t0 + timeout_ms;
	/* with a secret file every rank is on this node: the store is on the
	 * loopback only */
	const char *host = env->secret_file[0] ? "127.0.0.1" :
			   env->store_host[0] ? env->store_host : "127.0.0.1";
	int serve = env->store_served_by_rank0 && env->rank == 0;
	weft_status st;

	*srv = NULL;
	*out = NULL;
	if (env->secret_file[0]) {
		if (serve) {
			if ((st = publish_secret(env)))
				return st;
		} else {
			int64_t next_report = t0 + weft_dist_report_interval_ms();

			while (!read_secret_file(env)) {
				if (now_ms() >= deadline)
					return weft_error_set(WEFT_ERR_TIMEOUT,
							      "rank %d: rank 0 did not write the "
							      "store's secret %s within %lld ms (is "
							      "rank 0 running on this node?)",
							      env->rank, env->secret_file,
							      (long long)timeout_ms);
				if (now_ms() >= next_report) {
					weft_log(WEFT_LOG_WARN, "rank %d: waiting for rank 0's "
						 "store secret in %s, %lld s of %lld s", env->rank,
						 env->secret_file, (long long)(now_ms() - t0) / 1000,
						 (long long)timeout_ms / 1000);
					next_report += weft_dist_report_interval_ms();
				}
				nap_ms(20);
			}
		}
	}
	if (serve) {
		st = weft_store_server_start(env->secret_file[0] ? "127.0.0.1" : NULL,
					     env->store_port, env->secret, srv);
		if (st)
			return st;
	}
	for (;;) {
		int64_t left = deadline - now_ms();

		st = weft_store_connect(host, env->store_port, env->secret, left > 0 ? left : 0,
					out);
		/* a secret file left by an earlier run of the same job: rank 0
		 * replaces it as it starts, so read it again */
		if (st != WEFT_ERR_COMM || !env->secret_file[0] || serve || now_ms() >= deadline)
			break;
		nap_ms(50);
		read_secret_file(env);
	}
	if (st) {
		weft_store_server_stop(*srv);
		*srv = NULL;
		return st;
	}
	/* the store's own timeouts are the job's, not what was left of it */
	weft_store_client_set_timeout(*out, timeout_ms);
	/* a rank that stops making progress is named within seconds */
	if ((st = weft_heartbeat_start(env, host, timeout_ms))) {
		weft_store_client_close(*out);
		*out = NULL;
		weft_store_server_stop(*srv);
		*srv = NULL;
		return st;
	}
	return WEFT_OK;
}
