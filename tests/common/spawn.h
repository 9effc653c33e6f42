/* common/spawn.h - runs N copies of a program as the ranks of one job, the
 * way `weft launch` would, for multi-process tests: a store served by the
 * test itself (port 0, so parallel tests never collide), the WEFT_*
 * variables of each rank, each rank's stderr kept, and a deadline after
 * which every rank is killed (so a hang fails the test instead of hanging
 * ctest). Shared by tests/dist and tests/strategy (and bench/ddp through
 * the strategy harness). */
#ifndef WEFT_TEST_COMMON_SPAWN_H
#define WEFT_TEST_COMMON_SPAWN_H

#define WT_SPAWN_MAX 8

typedef struct wt_spawn_result {
	int n;                           /* ranks started */
	int status[WT_SPAWN_MAX];        /* waitpid status of each */
	double seconds[WT_SPAWN_MAX];    /* when each exited, from the start */
	int hung;                        /* 1 when the deadline killed someone */
	char err[WT_SPAWN_MAX][8192];    /* each rank's stderr (truncated) */
} wt_spawn_result;

/* Runs n (1..WT_SPAWN_MAX) copies of argv[0] (a path) with argv as their
 * arguments, rank r with WEFT_RANK=r, WEFT_WORLD_SIZE=n, WEFT_LOCAL_* and
 * the job's store; blocks until all have exited or deadline_s seconds
 * have passed (then kills the rest with SIGKILL and sets hung). Each
 * rank's stderr goes to a scratch file in the working directory, read
 * into res->err and removed. Returns 0 when every rank was started, -1
 * when n is out of range or the store could not be started (the last
 * error says which). */
int wt_spawn(int n, char *const argv[], double deadline_s, wt_spawn_result *res);

/* Whether rank r exited normally with `code`; prints its status and
 * stderr to this process's stderr when not. */
int wt_spawn_exited(const wt_spawn_result *res, int r, int code);

#endif /* WEFT_TEST_COMMON_SPAWN_H */
