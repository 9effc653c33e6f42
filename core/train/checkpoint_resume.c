/* Which checkpoint `resume: auto` takes (the newest complete one, across
 * the run name's versions, skipping an incomplete folder with a warning)
 * and the cleanup at start of what interrupted saves and removals left
 * (runlog/atomic_dir.h). The checkpoints themselves: checkpoint.c. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/json.h"
#include "runlog/atomic_dir.h"
#include "runlog/rundir.h"
#include "train/checkpoint_files.h"
#include "train/trainer_impl.h"
#include "weft/log.h"

/* Why checkpoint directory `dir` is incomplete, into why[len]; 0 when it
 * looks whole. A cheap check (no hashing; loading verifies every sha256):
 * manifest.json readable, every file it lists present with its size, and
 * the files the loader reads present. A save is renamed into place whole,
 * so this finds what an interrupted removal by an older weft left: a
 * checkpoint's folder with files deleted. */
static int ckpt_incomplete(const char *dir, char *why, size_t len)
{
	static const char *const needed[] = { WEFT_CKPT_MODEL, WEFT_CKPT_OPTIMIZER,
					      WEFT_CKPT_STATE };
	char p[WEFT_TRAINER_PATH + 600];
	weft_json_value *m = NULL;
	const weft_json_value *files;
	struct stat sb;
	int bad = 1;

	snprintf(p, sizeof(p), "%s/%s", dir, WEFT_MANIFEST_NAME);
	if (stat(p, &sb) != 0) {
		snprintf(why, len, "it has no %s", WEFT_MANIFEST_NAME);
		return 1;
	}
	if (weft_json_parse_file(p, &m) != WEFT_OK) {
		snprintf(why, len, "its %s is unreadable (%s)", WEFT_MANIFEST_NAME,
			 weft_error_last());
		return 1;
	}
	files = weft_json_get(m, "files");
	if (!files || files->kind != WEFT_JSON_ARRAY) {
		snprintf(why, len, "its %s lists no files", WEFT_MANIFEST_NAME);
		goto out;
	}
	for (size_t i = 0; i < files->count; i++) {
		const weft_json_value *name = weft_json_get(&files->items[i], "name");
		const weft_json_value *bytes = weft_json_get(&files->items[i], "bytes");

		if (!name || name->kind != WEFT_JSON_STRING || strchr(name->string, '/'))
			continue; /* the loader's verification names it */
		snprintf(p, sizeof(p), "%s/%s", dir, name->string);
		if (stat(p, &sb) != 0) {
			snprintf(why, len, "%s is listed in %s but missing", name->string,
				 WEFT_MANIFEST_NAME);
			goto out;
		}
		if (bytes && bytes->is_integer && bytes->integer != (int64_t)sb.st_size) {
			snprintf(why, len, "%s has %lld bytes, %s says %lld", name->string,
				 (long long)sb.st_size, WEFT_MANIFEST_NAME,
				 (long long)bytes->integer);
			goto out;
		}
	}
	for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, needed[i]);
		if (stat(p, &sb) != 0) {
			snprintf(why, len, "%s is missing", needed[i]);
			goto out;
		}
	}
	bad = 0;
out:
	weft_json_free(m);
	return bad;
}

typedef struct resume_cand {
	long long key;  /* version, or step (`last`: LLONG_MAX) */
	char name[256];
} resume_cand;

/* Newest first. */
static int cand_cmp(const void *a, const void *b)
{
	long long x = ((const resume_cand *)a)->key, y = ((const resume_cand *)b)->key;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* The entries of `dir` that `keep` accepts (setting the key), newest
 * first; *n gets the count. NULL with *n 0 when there are none or the
 * listing fails; free with free(). */
static resume_cand *list_cands(const char *dir, int (*keep)(const char *, long long *),
			       size_t *n)
{
	resume_cand *c = NULL;
	size_t cap = 0;
	struct dirent *e;
	DIR *d = opendir(dir);

	*n = 0;
	if (!d)
		return NULL;
	while ((e = readdir(d))) {
		long long key;

		if (strlen(e->d_name) >= sizeof(c->name) || !keep(e->d_name, &key))
			continue;
		if (*n == cap) {
			resume_cand *nc = realloc(c, (cap ? cap * 2 : 16) * sizeof(*nc));

			if (!nc)
				break; /* what was listed is still a fair choice */
			c = nc;
			cap = cap ? cap * 2 : 16;
		}
		c[*n].key = key;
		snprintf(c[*n].name, sizeof(c[*n].name), "%s", e->d_name);
		(*n)++;
	}
	closedir(d);
	if (*n)
		qsort(c, *n, sizeof(*c), cand_cmp);
	return c;
}

/* version_<N> */
static int keep_version(const char *name, long long *v)
{
	char tail;

	return sscanf(name, "version_%lld%c", v, &tail) == 1 && *v >= 0;
}

/* `last`, or a save epoch=E-step=S (not a leftover with a '.' suffix) */
static int keep_ckpt(const char *name, long long *step)
{
	long long e;

	if (!strcmp(name, "last")) {
		*step = LLONG_MAX;
		return 1;
	}
	return sscanf(name, "epoch=%lld-step=%lld", &e, step) == 2 && !strchr(name, '.');
}

/* resume: auto: the newest complete checkpoint of the newest earlier
 * version of this run name that has one: `last` when present, else the
 * highest step of the epoch=E-step=S saves. An incomplete one is skipped
 * with a warning naming it and why. */
weft_status weft_trainer_find_resume(weft_trainer *t, char *out, size_t len, int *found)
{
	char base[WEFT_TRAINER_PATH + 300];
	resume_cand *versions;
	size_t nv, skipped = 0;

	*found = 0;
	snprintf(base, sizeof(base), "%s/%s", t->tc.default_root_dir, t->tc.name);
	versions = list_cands(base, keep_version, &nv);
	for (size_t i = 0; i < nv && !*found; i++) {
		char dir[WEFT_TRAINER_PATH + 600], cand[WEFT_TRAINER_PATH + 900], why[600];
		resume_cand *saves;
		size_t ns;
		struct stat sb;

		snprintf(dir, sizeof(dir), "%s/%s/checkpoints", base, versions[i].name);
		saves = list_cands(dir, keep_ckpt, &ns);
		for (size_t j = 0; j < ns && !*found; j++) {
			snprintf(cand, sizeof(cand), "%s/%s", dir, saves[j].name);
			if (stat(cand, &sb) != 0 || !S_ISDIR(sb.st_mode))
				continue;
			if (ckpt_incomplete(cand, why, sizeof(why))) {
				if (t->rank == 0)
					weft_log(WEFT_LOG_WARN, "resume: auto skips '%s': %s (a save "
						 "or removal was interrupted); taking the newest "
						 "complete checkpoint instead", cand, why);
				skipped++;
				continue;
			}
			snprintf(out, len, "%s", cand);
			*found = 1;
		}
		free(saves);
	}
	free(versions);
	if (!*found && t->rank == 0)
		fprintf(stderr, "resume: auto found no %scheckpoint under %s; starting fresh\n",
			skipped ? "complete " : "", base);
	return WEFT_OK;
}

/* Rank 0 at start: removes what interrupted saves and removals left in
 * the checkpoints folder of every version of this run name (a kill during
 * a save leaves a full-size .tmp-<pid> copy). Leftovers of a process that
 * may still run are kept. Failures are warnings: they cost disk, not the
 * run. */
void weft_trainer_clean_stale_checkpoints(weft_trainer *t)
{
	char base[WEFT_TRAINER_PATH + 300];
	resume_cand *versions;
	size_t nv;

	if (t->rank != 0)
		return;
	snprintf(base, sizeof(base), "%s/%s", t->tc.default_root_dir, t->tc.name);
	versions = list_cands(base, keep_version, &nv);
	for (size_t i = 0; i < nv; i++) {
		char dir[WEFT_TRAINER_PATH + 600];
		int removed = 0;

		snprintf(dir, sizeof(dir), "%s/%s/checkpoints", base, versions[i].name);
		if (weft_atomic_dir_clean_stale_in(dir, &removed) != WEFT_OK)
			weft_log(WEFT_LOG_WARN, "%s; remove it by hand to free the space",
				 weft_error_last());
		if (removed)
			weft_log(WEFT_LOG_INFO, "removed %d folder%s left in %s by interrupted "
				 "checkpoint saves", removed, removed == 1 ? "" : "s", dir);
	}
	free(versions);
}
