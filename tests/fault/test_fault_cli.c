/* Allocation fault injection through the weft command (weft_fault, see
 * fault_shim.c): for each command, the Nth allocation of the process
 * fails, for N = 1, 2, ... until a run never reaches N. Every run that hit
 * the fault must end as a user error does: exit status 1 (no signal, no
 * abort), its stderr ending in exactly one line "weft: ..." saying "out of
 * memory" (fit prints its banner first); or succeed (a failure it could do
 * without). After a failed `fit`, every checkpoint folder under a final
 * name must verify against its manifest (a .tmp-<pid> one may be left).
 *
 * Commands: `fit --print-config` (config loading and checking, plugins),
 * `plugins` (discovery), `ckpt inspect` (the checkpoint reader), `ckpt
 * export` (no output file unless it succeeds): every N (export, ~1000
 * allocations: every N to 400, where the files are opened and the buffers
 * made, then every 3rd through the copy).
 * `fit` of two steps saving a checkpoint (the trainer's setup, steps and
 * save, ~620 allocations at the time of writing, 0.6 s a run): every 11th
 * N, then every N of the last 80, where the save is. About 1900 runs in
 * all, each one process (the command; the run folder is cleared in this
 * process, not by a shell): 15 s of CPU, 76 s of wall time on 2 loaded
 * cores, where a shell and rm per run made it 22 s and 142 s. Under the
 * sanitizers every stride is 4x longer to stay near that. */
#include <dirent.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runlog/atomic_dir.h"
#include "weft_test.h"

/* Under the sanitizers a run is ~4x slower: every stride is 4x longer. */
#if defined(__SANITIZE_ADDRESS__)
#define SLOW 4
#else
#define SLOW 1
#endif

#define ALL (1L << 40)

static char bin[512], work[512], cfg[512], hit_path[600], err_path[600], count_path[600];

/* Runs weft_fault with WEFT_FAULT_AT=n and argv; the wait status. */
static int run(long n, char *const *argv)
{
	pid_t pid = fork();
	int status = 0;

	if (pid == 0) {
		char at[32];

		snprintf(at, sizeof(at), "%ld", n);
		setenv("WEFT_FAULT_AT", at, 1);
		setenv("WEFT_FAULT_HIT", hit_path, 1);
		setenv("WEFT_FAULT_COUNT", count_path, 1);
		if (!freopen(err_path, "w", stderr) || !freopen("/dev/null", "w", stdout))
			_exit(127);
		execv(bin, argv);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	return status;
}

static char *slurp(const char *path)
{
	static char buf[65536];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	return buf;
}

/* Every checkpoint folder under `dir` (recursively) that has a final name
 * must verify; returns the count that do not. */
static int bad_checkpoints(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int bad = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char p[1024];
		struct stat sb;

		if (e->d_name[0] == '.' || strstr(e->d_name, ".tmp-"))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (stat(p, &sb) || !S_ISDIR(sb.st_mode))
			continue;
		if (strrchr(dir, '/') && strcmp(strrchr(dir, '/'), "/checkpoints") == 0) {
			if (weft_manifest_verify(p) != WEFT_OK) {
				fprintf(stderr, "  incomplete checkpoint %s: %s\n", p,
					weft_error_last());
				bad++;
			}
			continue;
		}
		bad += bad_checkpoints(p);
	}
	closedir(d);
	return bad;
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(path);
}

/* Removes `path` and everything under it, in this process (a sweep point
 * then starts one process, the command, not a shell and rm as well);
 * 0, also when it does not exist. */
static int remove_tree(const char *path)
{
	if (access(path, F_OK) != 0)
		return 0;
	return nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Allocations of a run without faults. */
static long count_allocations(char *const *argv)
{
	long n = -1;

	unlink(count_path);
	WT_REQUIRE(run(0, argv) == 0);
	WT_REQUIRE(sscanf(slurp(count_path), "%ld", &n) == 1);
	return n;
}

/* Fails allocation N of `argv` for every N below dense_to and from
 * dense_from on, every stride-th N between, until a run ends without
 * reaching N. A run
 * that succeeds must have saved the checkpoint `saves` (under the work
 * folder; NULL: none); `out_file` (NULL: none) must exist after a run that
 * succeeds and not after one that fails. */
static void drive(const char *name, char *const *argv, long stride, long dense_to,
		  long dense_from, const char *saves, const char *out_file)
{
	long n, runs = 0, failed = 0, tolerated = 0;
	char runs_dir[600];

	snprintf(runs_dir, sizeof(runs_dir), "%s/runs", work);
	stride *= SLOW;
	for (n = 1;; n += n < dense_to || n >= dense_from ? SLOW : stride) {
		int st;
		const char *err;

		unlink(hit_path);
		WT_REQUIRE(remove_tree(runs_dir) == 0);
		if (out_file)
			unlink(out_file);
		st = run(n, argv);
		runs++;
		err = slurp(err_path);
		if (access(hit_path, F_OK) != 0) {
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
				fprintf(stderr, "%s: fails without a fault:\n%s", name, err);
			WT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
			break;
		}
		wt_checks++;
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
			char p[1200];

			tolerated++;
			if (out_file && access(out_file, F_OK) != 0) {
				wt_failures++;
				fprintf(stderr, "%s: allocation %ld failed, the run succeeded "
					"without writing %s\n", name, n, out_file);
			}
			/* a run that succeeds has saved what it should */
			snprintf(p, sizeof(p), "%s/%s", work, saves ? saves : "");
			if (saves && weft_manifest_verify(p) != WEFT_OK) {
				wt_failures++;
				fprintf(stderr, "%s: allocation %ld failed, the run succeeded but "
					"its checkpoint does not verify: %s\n", name, n,
					weft_error_last());
			}
		} else {
			const char *last = err, *p, *nl;
			int lines = 0;

			failed++;
			if (out_file && access(out_file, F_OK) == 0) {
				wt_failures++;
				fprintf(stderr, "%s: allocation %ld failed, yet %s was written\n",
					name, n, out_file);
			}
			for (p = err; (p = strstr(p, "weft: ")); p++)
				lines += p == err || p[-1] == '\n';
			for (p = err; *p; p++)
				if (p[0] == '\n' && p[1])
					last = p + 1;
			nl = strchr(last, '\n');
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 1 || lines != 1 ||
			    strncmp(last, "weft: ", 6) || !nl || nl[1] ||
			    !strstr(last, "out of memory")) {
				wt_failures++;
				fprintf(stderr, "%s: allocation %ld failed: %s %d, stderr:\n%.1500s\n",
					name, n, WIFEXITED(st) ? "exit status" : "signal",
					WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), err);
			}
		}
		{
			int bad = bad_checkpoints(runs_dir);

			if (bad) {
				wt_failures++;
				fprintf(stderr, "%s: allocation %ld failed and left %d incomplete "
					"checkpoint(s)\n", name, n, bad);
			}
		}
	}
	fprintf(stderr, "%s: up to allocation %ld, %ld runs, %ld ended in an error, %ld "
		"succeeded anyway\n", name, n, runs, failed, tolerated);
}

int main(void)
{
	const char *bd = getenv("WEFT_BUILD_DIR"), *src = getenv("WEFT_SOURCE_DIR");
	char ckpt[700], root[700], cmd[1200];

	WT_REQUIRE(bd && src);
	snprintf(bin, sizeof(bin), "%s/tests/weft_fault", bd);
	snprintf(cfg, sizeof(cfg), "%s/tests/fault/tiny.yaml", src);
	snprintf(work, sizeof(work), "%s/fault_cli_%d", getenv("TMPDIR") ? getenv("TMPDIR") :
		 "/tmp", (int)getpid());
	WT_REQUIRE(mkdir(work, 0755) == 0);
	snprintf(hit_path, sizeof(hit_path), "%s/hit", work);
	snprintf(err_path, sizeof(err_path), "%s/stderr", work);
	snprintf(count_path, sizeof(count_path), "%s/count", work);
	snprintf(root, sizeof(root), "--trainer.default_root_dir=%s/runs", work);
	WT_REQUIRE(chdir(work) == 0);

	{
		char *const argv[] = { bin, "fit", "--config", cfg, "--print-config", NULL };

		drive("fit --print-config", argv, 1, ALL, ALL, NULL, NULL);
	}
	{
		char *const argv[] = { bin, "plugins", NULL };

		drive("plugins", argv, 1, ALL, ALL, NULL, NULL);
	}
	{
		/* a checkpoint to inspect, saved without faults */
		char *const fit[] = { bin, "fit", "--config", cfg, root, NULL };
		char keep[1300];

		unlink(hit_path);
		WT_REQUIRE(run(0, fit) == 0);
		snprintf(ckpt, sizeof(ckpt), "%s/saved", work);
		snprintf(keep, sizeof(keep), "cp -r %s/runs/tiny/version_0/checkpoints/last '%s'",
			 work, ckpt);
		WT_REQUIRE(system(keep) == 0);
	}
	{
		char *const argv[] = { bin, "ckpt", "inspect", ckpt, NULL };

		drive("ckpt inspect", argv, 1, ALL, ALL, NULL, NULL);
	}
	{
		char out[800];
		char *const argv[] = { bin, "ckpt", "export", ckpt, out, "--optimizer", NULL };

		snprintf(out, sizeof(out), "%s/export.safetensors", work);
		drive("ckpt export", argv, 3, 400, ALL, NULL, out);
	}
	{
		char *const argv[] = { bin, "fit", "--config", cfg, root, NULL };

		drive("fit", argv, 11, 0, count_allocations(argv) - 80,
		      "runs/tiny/version_0/checkpoints/last", NULL);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", work);
	WT_CHECK(system(cmd) == 0);
	return wt_done("test_fault_cli");
}
