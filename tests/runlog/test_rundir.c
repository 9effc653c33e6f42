/* Run directories: version_<N> numbering as Lightning's loggers do it, and
 * runs that start together (real processes) never share a version. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runlog/rundir.h"
#include "weft_test.h"

#define RACERS 6

static int is_dir(const char *p)
{
	struct stat sb;

	return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int main(void)
{
	char root[128], path[4096], want[4096];
	int64_t v = -1;
	pid_t kids[RACERS];
	int seen[RACERS + 8] = { 0 };

	snprintf(root, sizeof(root), "rundir_test_%ld/runs/deep", (long)getpid());
	WT_OK(weft_rundir_create(root, "mnist", path, sizeof(path), &v));
	snprintf(want, sizeof(want), "%s/mnist/version_0", root);
	WT_CHECK(v == 0 && strcmp(path, want) == 0 && is_dir(path));
	WT_OK(weft_rundir_create(root, "mnist", path, sizeof(path), &v));
	WT_CHECK(v == 1);
	/* The next version follows the largest, not the count (gaps stay). */
	snprintf(want, sizeof(want), "%s/mnist/version_7", root);
	WT_CHECK(mkdir(want, 0777) == 0);
	WT_OK(weft_rundir_create(root, "mnist", path, sizeof(path), &v));
	WT_CHECK(v == 8);

	/* Racers: each child claims one version and reports it in its exit code. */
	for (int i = 0; i < RACERS; i++) {
		kids[i] = fork();
		WT_REQUIRE(kids[i] >= 0);
		if (kids[i] == 0) {
			int64_t mine = -1;

			if (weft_rundir_create(root, "race", path, sizeof(path), &mine) != WEFT_OK)
				_exit(100);
			_exit((int)mine);
		}
	}
	for (int i = 0; i < RACERS; i++) {
		int status = 0;

		waitpid(kids[i], &status, 0);
		WT_REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) < RACERS + 8);
		seen[WEXITSTATUS(status)]++;
	}
	for (int i = 0; i < RACERS + 8; i++)
		WT_CHECK(seen[i] <= 1); /* nobody shares a version */

	WT_FAILS(weft_rundir_create(root, "a/b", path, sizeof(path), &v), WEFT_ERR_INVALID_ARG,
		 "'a/b'", "plain directory name");
	/* A file where a directory should go is named. */
	snprintf(want, sizeof(want), "%s/blocked", root);
	fclose(fopen(want, "w"));
	WT_FAILS(weft_rundir_create(want, "x", path, sizeof(path), &v), WEFT_ERR_IO, want,
		 "in the way");
	snprintf(want, sizeof(want), "rm -rf rundir_test_%ld", (long)getpid());
	WT_CHECK(system(want) == 0);
	return wt_done("test_rundir");
}
