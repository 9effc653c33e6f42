/* launch_child: a rank for the launcher tests. `launch_child MODE DIR`.
 *   ok       checks its variables and exits 0
 *   crash    rank 1 kills itself with SIGKILL; the others wait to be stopped
 *   term     writes DIR/ready.<rank> once its SIGTERM handler is in place,
 *            waits; on SIGTERM writes DIR/term.<rank> and exits 0
 *   counter  a "training run" that checkpoints a step counter in DIR/ckpt
 *            (rank 0 writes it, atomically) up to 10 steps; on the first
 *            attempt rank 1 dies by SIGKILL once the counter reached 5,
 *            and rank 0 holds at 5 until the launcher stops it (so the
 *            checkpoint at the failure is exactly 5 however slowly the
 *            launcher reacts); a restarted attempt records where it
 *            resumed in DIR/resumed
 *   bindport rank 0 listens on MASTER_ADDR:MASTER_PORT as PyTorch's init
 *            does for its own store (exit 11 when that port is taken)
 * MASTER_PORT must differ from WEFT_STORE_PORT (weft's store holds that).
 * Every mode writes its pid to DIR/pid.<rank>.<restart> first. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static char dir[2048];
static int rank;

static void nap(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void write_file(const char *name, long v)
{
	char path[4200], tmp[4300];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
	f = fopen(tmp, "w");
	if (!f)
		exit(20);
	fprintf(f, "%ld\n", v);
	fclose(f);
	rename(tmp, path);
}

static long read_file(const char *name, long def)
{
	char path[4200];
	long v = def;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = def;
		fclose(f);
	}
	return v;
}

static void on_term(int sig)
{
	char name[64];

	(void)sig;
	snprintf(name, sizeof(name), "term.%d", rank);
	write_file(name, 1);
	_exit(0);
}

static int env_int(const char *n)
{
	const char *v = getenv(n);

	return v ? atoi(v) : -1;
}

int main(int argc, char **argv)
{
	char name[64];
	int restart = env_int("WEFT_RESTART_COUNT");

	if (argc != 3)
		return 2;
	snprintf(dir, sizeof(dir), "%s", argv[2]);
	rank = env_int("WEFT_RANK");
	/* torchrun's variables mirror weft's */
	if (rank < 0 || rank != env_int("RANK") || env_int("WORLD_SIZE") != env_int("WEFT_WORLD_SIZE") ||
	    env_int("LOCAL_RANK") != env_int("WEFT_LOCAL_RANK") || !getenv("WEFT_STORE_SECRET") ||
	    env_int("MASTER_PORT") < 1 || env_int("MASTER_PORT") == env_int("WEFT_STORE_PORT") ||
	    restart < 0)
		return 10;
	snprintf(name, sizeof(name), "pid.%d.%d", rank, restart);
	write_file(name, (long)getpid());

	if (!strcmp(argv[1], "ok"))
		return 0;
	if (!strcmp(argv[1], "bindport")) {
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_port = htons((uint16_t)env_int("MASTER_PORT")) };
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (rank != 0)
			return 0;
		if (fd < 0 || !getenv("MASTER_ADDR") ||
		    inet_pton(AF_INET, getenv("MASTER_ADDR"), &a.sin_addr) != 1)
			return 12;
		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 1) != 0)
			return 11;
		close(fd);
		return 0;
	}
	if (!strcmp(argv[1], "crash")) {
		if (rank == 1) {
			nap(100);
			raise(SIGKILL);
		}
		for (;;)
			pause();
	}
	if (!strcmp(argv[1], "term")) {
		/* the test signals the launcher once every rank says it is ready,
		 * which is after the handler is in place */
		signal(SIGTERM, on_term);
		snprintf(name, sizeof(name), "ready.%d", rank);
		write_file(name, 1);
		for (;;)
			pause();
	}
	if (!strcmp(argv[1], "counter")) {
		long step = read_file("ckpt", 0);

		if (restart > 0 && rank == 0)
			write_file("resumed", step);
		while (step < 10) {
			nap(20);
			if (rank == 0) {
				/* without the hold, rank 0 raced the launcher: it
				 * went on to 10 and exited 0 when stopping it took
				 * over 100 ms on a loaded machine, and the restart
				 * "resumed" at 10 */
				if (restart == 0 && step == 5)
					continue;
				write_file("ckpt", ++step);
			} else {
				step = read_file("ckpt", 0);
				if (restart == 0 && rank == 1 && step >= 5)
					raise(SIGKILL);
			}
		}
		return 0;
	}
	return 2;
}
