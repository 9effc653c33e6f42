/* Removing and cleaning up checkpoint directories:
 *   - weft_atomic_dir_remove takes a directory away whole: when deleting
 *     its files fails halfway (a subfolder it cannot unlink stands in for
 *     a kill), the directory's own name is already gone and only the
 *     hidden `.<name>.del-<pid>` holds the rest;
 *   - weft_atomic_dir_clean_stale_in removes every leftover kind
 *     (`.tmp-<pid>`, `.old-<pid>`, `.<name>.del-<pid>`) of a dead process,
 *     and of a live pid that started after the folder last changed (a
 *     reused pid); it keeps the leftover of a live process that may be its
 *     writer, symlinks, plain files and the checkpoints themselves; a name
 *     tagged with this host (`.tmp-<pid>-<tag>`) is judged as untagged ones,
 *     one tagged with another host's is kept (its writer is not visible
 *     here, on a file system shared by hosts).
 * Counts are exact: no tolerance applies. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runlog/atomic_dir.h"
#include "weft_test.h"

static char root[256];

static int exists(const char *p)
{
	struct stat sb;

	return lstat(p, &sb) == 0;
}

static const char *at(const char *fmt, long pid)
{
	static char buf[4][512];
	static int k;
	char name[256];

	k = (k + 1) % 4;
	snprintf(name, sizeof(name), fmt, pid);
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", root, name);
	return buf[k];
}

/* A folder holding one file, as an interrupted save leaves it. */
static void leftover(const char *dir)
{
	char p[600];
	FILE *f;

	WT_REQUIRE(mkdir(dir, 0777) == 0);
	snprintf(p, sizeof(p), "%s/model.safetensors", dir);
	f = fopen(p, "w");
	WT_REQUIRE(f && fputs("partial", f) >= 0 && fclose(f) == 0);
}

/* The pid of a process that ran and is gone (reaped). */
static pid_t dead_pid(void)
{
	pid_t kid = fork();
	int status;

	WT_REQUIRE(kid >= 0);
	if (kid == 0)
		_exit(0);
	waitpid(kid, &status, 0);
	return kid;
}

static void remove_case(void)
{
	weft_atomic_dir *d = NULL;
	char dir[512], hidden[600], sub[700];

	snprintf(dir, sizeof(dir), "%s/epoch=0-step=4", root);
	WT_OK(weft_atomic_dir_begin(dir, &d));
	WT_OK(weft_atomic_dir_write_file(d, "model.safetensors", "weights", 7));
	WT_OK(weft_atomic_dir_commit(d));
	WT_OK(weft_atomic_dir_remove(dir));
	snprintf(hidden, sizeof(hidden), "%s/.epoch=0-step=4.del-%ld-%s", root, (long)getpid(),
		 weft_atomic_dir_host_tag());
	WT_CHECK(!exists(dir));
	WT_CHECK(!exists(hidden));
	/* a missing directory is fine */
	WT_OK(weft_atomic_dir_remove(dir));

	/* Deletion fails halfway: the name is gone all the same. */
	snprintf(dir, sizeof(dir), "%s/epoch=1-step=8", root);
	WT_OK(weft_atomic_dir_begin(dir, &d));
	WT_OK(weft_atomic_dir_write_file(d, "model.safetensors", "weights", 7));
	WT_OK(weft_atomic_dir_commit(d));
	snprintf(sub, sizeof(sub), "%s/not-flat", dir);
	WT_REQUIRE(mkdir(sub, 0777) == 0);
	snprintf(hidden, sizeof(hidden), "%s/.epoch=1-step=8.del-%ld-%s", root, (long)getpid(),
		 weft_atomic_dir_host_tag());
	WT_FAILS(weft_atomic_dir_remove(dir), WEFT_ERR_IO, hidden, "deleted at the next start");
	WT_CHECK(!exists(dir));
	WT_CHECK(exists(hidden));
	snprintf(sub, sizeof(sub), "%s/not-flat", hidden);
	WT_REQUIRE(rmdir(sub) == 0);
	WT_OK(weft_atomic_dir_remove(hidden));
	WT_CHECK(!exists(hidden));
}

static char tagged_mine[700], tagged_other[700];

static void clean_case(void)
{
	pid_t dead = dead_pid(), live, late;
	struct timespec old[2] = { { .tv_sec = time(NULL) - 3600 }, { .tv_sec = time(NULL) - 3600 } };
	int removed = -1, status;
	char p[600];

	/* a live process started before its folder: it may be the writer */
	live = fork();
	WT_REQUIRE(live >= 0);
	if (live == 0) {
		pause();
		_exit(0);
	}
	leftover(at("epoch=0-step=4.tmp-%ld", dead));
	leftover(at(".epoch=0-step=8.del-%ld", dead));
	leftover(at("last.old-%ld", dead));
	leftover(at("last.tmp-%ld", live));
	/* a live pid that started an hour after its folder last changed: reused */
	late = fork();
	WT_REQUIRE(late >= 0);
	if (late == 0) {
		pause();
		_exit(0);
	}
	leftover(at("epoch=1-step=12.tmp-%ld", late));
	WT_REQUIRE(utimensat(AT_FDCWD, at("epoch=1-step=12.tmp-%ld", late), old, 0) == 0);
	/* not leftovers: checkpoints, a symlink, a plain file, odd names */
	leftover(at("epoch=0-step=16", 0));
	leftover(at("last", 0));
	snprintf(p, sizeof(p), "%s", at("last", 0));
	WT_REQUIRE(symlink(p, at("link.tmp-%ld", dead)) == 0);
	WT_REQUIRE(close(open(at("file.tmp-%ld", dead), O_WRONLY | O_CREAT, 0666)) == 0);
	leftover(at("epoch=0-step=20.tmp-%ldx", dead));
	leftover(at("epoch=0-step=24.del-%ld", dead)); /* .del- only as a hidden name */
	/* tagged names: this host's dead writer goes, another host's stays */
	{
		char mine[64], other[64];

		snprintf(mine, sizeof(mine), "ours.tmp-%%ld-%s", weft_atomic_dir_host_tag());
		snprintf(other, sizeof(other), "theirs.tmp-%%ld-%08x",
			 (unsigned)strtoul(weft_atomic_dir_host_tag(), NULL, 16) ^ 1u);
		leftover(at(mine, dead));
		leftover(at(other, dead));
		snprintf(tagged_mine, sizeof(tagged_mine), "%s", at(mine, dead));
		snprintf(tagged_other, sizeof(tagged_other), "%s", at(other, dead));
	}

	WT_OK(weft_atomic_dir_clean_stale_in(root, &removed));
	WT_CHECK(removed == 5);
	WT_CHECK(!exists(tagged_mine));
	WT_CHECK(exists(tagged_other));
	WT_CHECK(!exists(at("epoch=0-step=4.tmp-%ld", dead)));
	WT_CHECK(!exists(at(".epoch=0-step=8.del-%ld", dead)));
	WT_CHECK(!exists(at("last.old-%ld", dead)));
	WT_CHECK(!exists(at("epoch=1-step=12.tmp-%ld", late)));
	WT_CHECK(exists(at("last.tmp-%ld", live)));
	WT_CHECK(exists(at("epoch=0-step=16", 0)));
	WT_CHECK(exists(at("last", 0)));
	WT_CHECK(exists(at("last/model.safetensors", 0)));
	WT_CHECK(exists(at("link.tmp-%ld", dead)));
	WT_CHECK(exists(at("file.tmp-%ld", dead)));
	WT_CHECK(exists(at("epoch=0-step=20.tmp-%ldx", dead)));
	WT_CHECK(exists(at("epoch=0-step=24.del-%ld", dead)));

	/* once the writer is gone its folder goes too */
	kill(live, SIGKILL);
	waitpid(live, &status, 0);
	WT_OK(weft_atomic_dir_clean_stale_in(root, &removed));
	WT_CHECK(removed == 1);
	WT_CHECK(!exists(at("last.tmp-%ld", live)));
	kill(late, SIGKILL);
	waitpid(late, &status, 0);

	/* a missing parent is no error */
	WT_OK(weft_atomic_dir_clean_stale_in(at("nowhere", 0), &removed));
	WT_CHECK(removed == 0);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	char cmd[600];

	snprintf(root, sizeof(root), "%s/weft_atomic_cleanup.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	WT_REQUIRE(mkdtemp(root));
	remove_case();
	clean_case();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	WT_CHECK(system(cmd) == 0);
	return wt_done("test_atomic_dir_cleanup");
}
