/* Atomic directories: write into <dir>.tmp-<pid>, hash as we go, fsync,
 * rename into place; and the manifest check on the way back in. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runlog/atomic_dir.h"
#include "base/json.h"
#include "runlog/sha256.h"

#define PATH_LEN 4096

typedef struct entry {
	char *name;
	int64_t bytes;
	char hex[WEFT_SHA256_HEX];
} entry;

struct weft_atomic_dir {
	char final_path[PATH_LEN];
	char tmp_path[PATH_LEN];
	entry *files;
	size_t n, cap;
	int fd;                 /* the open file, or -1 */
	char open_path[PATH_LEN];
	weft_sha256 sha;
};

/* Removes a flat directory and the files in it. */
static int remove_flat_dir(const char *path)
{
	char p[PATH_LEN];
	struct dirent *e;
	DIR *d = opendir(path);
	int rc = 0;

	if (!d)
		return errno == ENOENT ? 0 : -1;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		if (unlink(p) != 0)
			rc = -1;
	}
	closedir(d);
	if (rmdir(path) != 0)
		rc = -1;
	return rc;
}

static int fsync_path(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC), rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

static void parent_of(const char *path, char *out, size_t len)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(out, len, ".");
	else if (slash == path)
		snprintf(out, len, "/");
	else
		snprintf(out, len, "%.*s", (int)(slash - path), path);
}

const char *weft_atomic_dir_host_tag(void)
{
	static char tag[9];

	if (!tag[0]) {
		char host[256] = "";
		uint32_t h = 2166136261u; /* FNV-1a */

		gethostname(host, sizeof(host) - 1);
		for (const char *c = host; *c; c++)
			h = (h ^ (uint8_t)*c) * 16777619u;
		snprintf(tag, sizeof(tag), "%08x", h);
	}
	return tag;
}

/* The length of directory path `path` without its trailing slashes, into
 * *len; refuses an empty path and one too long for the names derived from
 * it (`.tmp-<pid>`, `.del-<pid>`). Errors: WEFT_ERR_INVALID_ARG. */
static weft_status dir_path_len(const char *path, size_t *len)
{
	size_t n = strlen(path);

	while (n > 1 && path[n - 1] == '/')
		n--;
	if (n == 0 || n + 32 >= PATH_LEN)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "directory path '%s' is empty or too long",
				      path);
	*len = n;
	return WEFT_OK;
}

weft_status weft_atomic_dir_begin(const char *final_path, weft_atomic_dir **out)
{
	weft_atomic_dir *d;
	size_t n;
	weft_status st;

	*out = NULL;
	if ((st = dir_path_len(final_path, &n)))
		return st;
	d = calloc(1, sizeof(*d));
	if (!d)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory starting '%s'", final_path);
	d->fd = -1;
	snprintf(d->final_path, sizeof(d->final_path), "%.*s", (int)n, final_path);
	snprintf(d->tmp_path, sizeof(d->tmp_path), "%s.tmp-%ld-%s", d->final_path, (long)getpid(),
		 weft_atomic_dir_host_tag());
	remove_flat_dir(d->tmp_path);
	if (mkdir(d->tmp_path, 0777) != 0) {
		st = weft_error_set(WEFT_ERR_IO, "cannot create directory '%s': %s", d->tmp_path,
				    strerror(errno));
		free(d);
		return st;
	}
	*out = d;
	return WEFT_OK;
}

const char *weft_atomic_dir_tmp_path(const weft_atomic_dir *d)
{
	return d->tmp_path;
}

static int bad_name(const char *name)
{
	return !name || !name[0] || strchr(name, '/') || strcmp(name, ".") == 0 ||
	       strcmp(name, "..") == 0 || strlen(name) > 255;
}

/* Checks `name` and appends its (empty) manifest entry. */
static weft_status add_entry(weft_atomic_dir *d, const char *name)
{
	if (d->fd >= 0)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "'%s': file '%s' is still open; close "
				      "it before opening '%s'", d->tmp_path,
				      d->files[d->n - 1].name, name ? name : "");
	if (bad_name(name) || strcmp(name, WEFT_MANIFEST_NAME) == 0)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "'%s': '%s' is not a valid file name "
				      "here (plain names only; %s is written by commit)",
				      d->tmp_path, name ? name : "", WEFT_MANIFEST_NAME);
	for (size_t i = 0; i < d->n; i++)
		if (strcmp(d->files[i].name, name) == 0)
			return weft_error_set(WEFT_ERR_INVALID_ARG, "'%s': file '%s' was already "
					      "written", d->tmp_path, name);
	if (d->n == d->cap) {
		size_t nc = d->cap ? d->cap * 2 : 8;
		entry *nf = realloc(d->files, nc * sizeof(*nf));

		if (!nf)
			return weft_error_set(WEFT_ERR_NOMEM, "out of memory writing '%s'",
					      d->tmp_path);
		d->files = nf;
		d->cap = nc;
	}
	d->files[d->n] = (entry){ .name = strdup(name) };
	if (!d->files[d->n].name)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory writing '%s'", d->tmp_path);
	d->n++;
	return WEFT_OK;
}

weft_status weft_atomic_dir_file_open(weft_atomic_dir *d, const char *name)
{
	weft_status st = add_entry(d, name);

	if (st)
		return st;
	snprintf(d->open_path, sizeof(d->open_path), "%s/%s", d->tmp_path, name);
	d->fd = open(d->open_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (d->fd < 0) {
		d->n--;
		free(d->files[d->n].name);
		return weft_error_set(WEFT_ERR_IO, "cannot create '%s': %s", d->open_path,
				      strerror(errno));
	}
	weft_sha256_init(&d->sha);
	return WEFT_OK;
}

weft_status weft_atomic_dir_adopt_file(weft_atomic_dir *d, const char *name)
{
	static const size_t chunk = 1u << 20;
	uint8_t digest[WEFT_SHA256_BYTES];
	unsigned char *buf;
	weft_sha256 sha;
	entry *e;
	weft_status st = add_entry(d, name);
	int fd;

	if (st)
		return st;
	e = &d->files[d->n - 1];
	snprintf(d->open_path, sizeof(d->open_path), "%s/%s", d->tmp_path, name);
	fd = open(d->open_path, O_RDONLY | O_CLOEXEC);
	buf = malloc(chunk);
	if (fd < 0 || !buf) {
		st = weft_error_set(fd < 0 ? WEFT_ERR_IO : WEFT_ERR_NOMEM, "cannot read '%s': %s",
				    d->open_path, fd < 0 ? strerror(errno) : "out of memory");
		goto out;
	}
	weft_sha256_init(&sha);
	for (;;) {
		ssize_t r = read(fd, buf, chunk);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			st = weft_error_set(WEFT_ERR_IO, "cannot read '%s': %s", d->open_path,
					    strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		weft_sha256_update(&sha, buf, (size_t)r);
	}
	e->bytes = (int64_t)sha.total;
	weft_sha256_final(&sha, digest);
	weft_sha256_hex(digest, e->hex);
	if (fsync(fd) != 0)
		st = weft_error_set(WEFT_ERR_IO, "cannot flush '%s' to disk: %s", d->open_path,
				    strerror(errno));
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	if (st) {
		d->n--;
		free(d->files[d->n].name);
	}
	return st;
}

weft_status weft_atomic_dir_file_write(weft_atomic_dir *d, const void *buf, size_t len)
{
	const char *p = buf;

	if (d->fd < 0)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "'%s': no file is open for writing",
				      d->tmp_path);
	weft_sha256_update(&d->sha, buf, len);
	while (len) {
		ssize_t w = write(d->fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return weft_error_set(WEFT_ERR_IO, "cannot write '%s': %s", d->open_path,
					      w < 0 ? strerror(errno) : "no progress");
		p += w;
		len -= (size_t)w;
	}
	return WEFT_OK;
}

weft_status weft_atomic_dir_file_close(weft_atomic_dir *d)
{
	entry *e = &d->files[d->n - 1];
	uint8_t digest[WEFT_SHA256_BYTES];
	int rc;

	if (d->fd < 0)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "'%s': no file is open to close",
				      d->tmp_path);
	e->bytes = (int64_t)d->sha.total;
	weft_sha256_final(&d->sha, digest);
	weft_sha256_hex(digest, e->hex);
	rc = fsync(d->fd);
	rc |= close(d->fd);
	d->fd = -1;
	if (rc != 0)
		return weft_error_set(WEFT_ERR_IO, "cannot flush '%s' to disk: %s", d->open_path,
				      strerror(errno));
	return WEFT_OK;
}

weft_status weft_atomic_dir_write_file(weft_atomic_dir *d, const char *name, const void *buf,
				       size_t len)
{
	weft_status st = weft_atomic_dir_file_open(d, name);

	if (st)
		return st;
	st = weft_atomic_dir_file_write(d, buf, len);
	if (st) {
		close(d->fd);
		d->fd = -1;
		return st;
	}
	return weft_atomic_dir_file_close(d);
}

static void free_dir(weft_atomic_dir *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->files[i].name);
	free(d->files);
	free(d);
}

void weft_atomic_dir_abort(weft_atomic_dir *d)
{
	if (!d)
		return;
	if (d->fd >= 0)
		close(d->fd);
	remove_flat_dir(d->tmp_path);
	free_dir(d);
}

static weft_status write_manifest(weft_atomic_dir *d)
{
	weft_json_writer w;
	char *text = NULL;
	weft_status st;

	weft_json_writer_string(&w, 1);
	weft_json_begin_object(&w);
	weft_json_key(&w, "format");
	weft_json_string(&w, "weft-manifest");
	weft_json_key(&w, "version");
	weft_json_int(&w, 1);
	weft_json_key(&w, "files");
	weft_json_begin_array(&w);
	for (size_t i = 0; i < d->n; i++) {
		weft_json_begin_object(&w);
		weft_json_key(&w, "name");
		weft_json_string(&w, d->files[i].name);
		weft_json_key(&w, "bytes");
		weft_json_int(&w, d->files[i].bytes);
		weft_json_key(&w, "sha256");
		weft_json_string(&w, d->files[i].hex);
		weft_json_end_object(&w);
	}
	weft_json_end_array(&w);
	weft_json_end_object(&w);
	st = weft_json_finish(&w, &text);
	if (st)
		return st;
	snprintf(d->open_path, sizeof(d->open_path), "%s/%s", d->tmp_path, WEFT_MANIFEST_NAME);
	d->fd = open(d->open_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (d->fd < 0) {
		st = weft_error_set(WEFT_ERR_IO, "cannot create '%s': %s", d->open_path,
				    strerror(errno));
		goto out_free;
	}
	weft_sha256_init(&d->sha);
	st = weft_atomic_dir_file_write(d, text, strlen(text));
	if (!st && fsync(d->fd) != 0)
		st = weft_error_set(WEFT_ERR_IO, "cannot flush '%s' to disk: %s", d->open_path,
				    strerror(errno));
	if (close(d->fd) != 0 && !st)
		st = weft_error_set(WEFT_ERR_IO, "cannot close '%s': %s", d->open_path,
				    strerror(errno));
	d->fd = -1;
out_free:
	free(text);
	return st;
}

weft_status weft_atomic_dir_commit(weft_atomic_dir *d)
{
	char parent[PATH_LEN];
	weft_status st;
	struct stat sb;
	int exchanged = 0;

	if (d->fd >= 0) {
		st = weft_error_set(WEFT_ERR_INVALID_ARG, "'%s': file '%s' is still open at commit",
				    d->tmp_path, d->open_path);
		goto out_abort;
	}
	st = write_manifest(d);
	if (st)
		goto out_abort;
	if (fsync_path(d->tmp_path, O_RDONLY | O_DIRECTORY) != 0) {
		st = weft_error_set(WEFT_ERR_IO, "cannot flush directory '%s': %s", d->tmp_path,
				    strerror(errno));
		goto out_abort;
	}
	if (stat(d->final_path, &sb) == 0) {
		/* Swap in one step; the old contents end up at tmp_path. */
		if (renameat2(AT_FDCWD, d->tmp_path, AT_FDCWD, d->final_path, RENAME_EXCHANGE) == 0) {
			exchanged = 1;
		} else if (errno == EINVAL || errno == ENOSYS) {
			char old[PATH_LEN + 16];

			snprintf(old, sizeof(old), "%s.old-%ld-%s", d->final_path, (long)getpid(),
				 weft_atomic_dir_host_tag());
			if (rename(d->final_path, old) != 0 || rename(d->tmp_path, d->final_path) != 0) {
				st = weft_error_set(WEFT_ERR_IO, "cannot replace '%s': %s",
						    d->final_path, strerror(errno));
				goto out_abort;
			}
			remove_flat_dir(old);
		} else {
			st = weft_error_set(WEFT_ERR_IO, "cannot replace '%s' with '%s': %s",
					    d->final_path, d->tmp_path, strerror(errno));
			goto out_abort;
		}
	} else if (rename(d->tmp_path, d->final_path) != 0) {
		st = weft_error_set(WEFT_ERR_IO, "cannot rename '%s' to '%s': %s", d->tmp_path,
				    d->final_path, strerror(errno));
		goto out_abort;
	}
	parent_of(d->final_path, parent, sizeof(parent));
	if (fsync_path(parent, O_RDONLY | O_DIRECTORY) != 0) {
		st = weft_error_set(WEFT_ERR_IO, "renamed '%s' but cannot flush its parent '%s': %s",
				    d->final_path, parent, strerror(errno));
		if (exchanged)
			remove_flat_dir(d->tmp_path);
		free_dir(d);
		return st;
	}
	if (exchanged)
		remove_flat_dir(d->tmp_path);
	free_dir(d);
	return WEFT_OK;
out_abort:
	weft_atomic_dir_abort(d);
	return st;
}

weft_status weft_atomic_dir_remove(const char *path)
{
	char p[PATH_LEN], parent[PATH_LEN], hidden[PATH_LEN + 300];
	const char *base;
	size_t n;
	weft_status st;

	if ((st = dir_path_len(path, &n)))
		return st;
	snprintf(p, sizeof(p), "%.*s", (int)n, path);
	base = strrchr(p, '/');
	base = base ? base + 1 : p;
	parent_of(p, parent, sizeof(parent));
	snprintf(hidden, sizeof(hidden), "%s/.%s.del-%ld-%s", parent, base, (long)getpid(),
		 weft_atomic_dir_host_tag());
	remove_flat_dir(hidden); /* an earlier removal of this name by this pid */
	if (rename(p, hidden) != 0) {
		if (errno == ENOENT)
			return WEFT_OK;
		return weft_error_set(WEFT_ERR_IO, "cannot remove '%s': renaming it to '%s' failed: "
				      "%s (nothing was deleted)", p, hidden, strerror(errno));
	}
	/* The rename must be on disk before any file goes: otherwise a crash
	 * could bring the name back with files missing. */
	if (fsync_path(parent, O_RDONLY | O_DIRECTORY) != 0)
		return weft_error_set(WEFT_ERR_IO, "moved '%s' to '%s' but cannot flush '%s': %s; "
				      "it is deleted at the next start", p, hidden, parent,
				      strerror(errno));
	if (remove_flat_dir(hidden) != 0)
		return weft_error_set(WEFT_ERR_IO, "moved '%s' to '%s' but cannot delete it: %s; it "
				      "is deleted at the next start", p, hidden, strerror(errno));
	return WEFT_OK;
}

/* When process `pid` started, in seconds since the epoch (Linux /proc);
 * -1 when that cannot be read. */
static double process_start_s(long pid)
{
	char p[64], buf[1024];
	unsigned long long ticks = 0, btime = 0;
	const char *s;
	long hz = sysconf(_SC_CLK_TCK);
	size_t n;
	FILE *f;
	int field = 2; /* comm */

	snprintf(p, sizeof(p), "/proc/%ld/stat", pid);
	f = fopen(p, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* "pid (comm) state ...": comm may hold spaces and ')'; starttime is
	 * field 22 */
	s = strrchr(buf, ')');
	if (!s || hz <= 0)
		return -1;
	for (s++; *s && field < 22; s++)
		if (*s == ' ')
			field++;
	if (field != 22 || sscanf(s, "%llu", &ticks) != 1)
		return -1;
	f = fopen("/proc/stat", "r");
	if (!f)
		return -1;
	while (fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "btime %llu", &btime) == 1)
			break;
	fclose(f);
	if (!btime)
		return -1;
	return (double)btime + (double)ticks / (double)hz;
}

/* Slack between the kernel's boot time (whole seconds, adjusted by NTP)
 * and file times when telling a reused pid from the folder's writer. */
#define START_SLACK_S 2.0

/* 1 when the process that named folder `sb` after itself may still be
 * writing it: process `pid` runs and started before the folder last
 * changed. A process started later only reuses the pid (a restarted
 * container numbers its processes the same way again). */
static int writer_may_run(long pid, const struct stat *sb)
{
	double started;

	if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
		return 0;
	started = process_start_s(pid);
	if (started < 0)
		return 1; /* cannot tell: keep it */
	return started <= (double)sb->st_mtime + START_SLACK_S;
}

/* The pid in a leftover's name `name`: `<base>.tmp-<pid>`,
 * `<base>.old-<pid>` or `.<base>.del-<pid>`, each optionally followed by
 * `-<host tag>` (8 hex digits, weft_atomic_dir_host_tag), with any <base>
 * when `base` is NULL, and only the .tmp- kind of that base otherwise; 0
 * for other names. *foreign: the name carries another host's tag (its
 * writer cannot be seen from here). */
static long leftover_pid(const char *name, const char *base, int *foreign)
{
	const char *dot = strrchr(name, '.');
	size_t stem;
	char *end;
	long pid;

	if (!dot || dot == name)
		return 0;
	stem = (size_t)(dot - name);
	if (base) {
		if (strncmp(dot, ".tmp-", 5) != 0 || stem != strlen(base) ||
		    strncmp(name, base, stem) != 0)
			return 0;
	} else if (strncmp(dot, ".del-", 5) == 0) {
		if (name[0] != '.' || stem < 2)
			return 0;
	} else if (strncmp(dot, ".tmp-", 5) != 0 && strncmp(dot, ".old-", 5) != 0) {
		return 0;
	}
	if (dot[5] < '0' || dot[5] > '9')
		return 0;
	errno = 0;
	pid = strtol(dot + 5, &end, 10);
	*foreign = 0;
	if (*end == '-' && strlen(end + 1) == 8 && strspn(end + 1, "0123456789abcdef") == 8) {
		*foreign = strcmp(end + 1, weft_atomic_dir_host_tag()) != 0;
		end += 9;
	}
	if (*end || errno || pid <= 0)
		return 0;
	return pid;
}

static weft_status clean_leftovers(const char *parent, const char *base, int *removed)
{
	char p[PATH_LEN + 256];
	struct dirent *e;
	weft_status st = WEFT_OK;
	int count = 0;
	DIR *d;

	if (removed)
		*removed = 0;
	d = opendir(parent);
	if (!d)
		return errno == ENOENT ? WEFT_OK
				       : weft_error_set(WEFT_ERR_IO, "cannot list '%s': %s", parent,
							strerror(errno));
	while ((e = readdir(d))) {
		int foreign = 0;
		long pid = leftover_pid(e->d_name, base, &foreign);
		struct stat sb;

		/* another host's leftover: its writer may run there, unseen */
		if (!pid || foreign)
			continue;
		snprintf(p, sizeof(p), "%s/%s", parent, e->d_name);
		if (lstat(p, &sb) != 0 || !S_ISDIR(sb.st_mode) || writer_may_run(pid, &sb))
			continue;
		if (remove_flat_dir(p) != 0) {
			st = weft_error_set(WEFT_ERR_IO, "cannot remove stale '%s': %s", p,
					    strerror(errno));
			break;
		}
		count++;
	}
	closedir(d);
	if (removed)
		*removed = count;
	return st;
}

weft_status weft_atomic_dir_clean_stale(const char *final_path, int *removed)
{
	char parent[PATH_LEN];
	const char *base = strrchr(final_path, '/');

	base = base ? base + 1 : final_path;
	parent_of(final_path, parent, sizeof(parent));
	return clean_leftovers(parent, base, removed);
}

weft_status weft_atomic_dir_clean_stale_in(const char *parent, int *removed)
{
	return clean_leftovers(parent, NULL, removed);
}

/* ---- verification -------------------------------------------------- */

static weft_status bad_manifest(const char *dir, const char *what)
{
	return weft_error_set(WEFT_ERR_CORRUPT, "'%s/%s': %s", dir, WEFT_MANIFEST_NAME, what);
}

weft_status weft_manifest_verify(const char *dir)
{
	return weft_manifest_verify_listed(dir, NULL, 0);
}

weft_status weft_manifest_verify_listed(const char *dir, const char *const *needed, size_t n_needed)
{
	char path[PATH_LEN + 256];
	weft_json_value *m = NULL;
	const weft_json_value *files, *fmt;
	weft_status st;
	struct stat sb;

	if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
		return weft_error_set(WEFT_ERR_NOT_FOUND, "checkpoint directory '%s' does not exist",
				      dir);
	snprintf(path, sizeof(path), "%s/%s", dir, WEFT_MANIFEST_NAME);
	if (stat(path, &sb) != 0)
		return weft_error_set(WEFT_ERR_NOT_FOUND, "'%s' has no %s: it is not a complete "
				      "weft checkpoint (was it copied by hand, or written by a "
				      "process that crashed?)", dir, WEFT_MANIFEST_NAME);
	st = weft_json_parse_file(path, &m);
	if (st) {
		char why[1024];

		snprintf(why, sizeof(why), "%s", weft_error_last());
		return weft_error_set(WEFT_ERR_CORRUPT, "checkpoint manifest unreadable: %s", why);
	}
	fmt = weft_json_get(m, "format");
	files = weft_json_get(m, "files");
	if (!fmt || fmt->kind != WEFT_JSON_STRING || strcmp(fmt->string, "weft-manifest") != 0) {
		st = bad_manifest(dir, "\"format\" is not \"weft-manifest\"");
		goto out_free;
	}
	if (!files || files->kind != WEFT_JSON_ARRAY) {
		st = bad_manifest(dir, "\"files\" is missing or not an array");
		goto out_free;
	}
	for (size_t i = 0; i < files->count; i++) {
		const weft_json_value *f = &files->items[i];
		const weft_json_value *name = weft_json_get(f, "name");
		const weft_json_value *bytes = weft_json_get(f, "bytes");
		const weft_json_value *sha = weft_json_get(f, "sha256");
		uint8_t digest[WEFT_SHA256_BYTES];
		char hex[WEFT_SHA256_HEX];
		int64_t size;

		if (!name || name->kind != WEFT_JSON_STRING || bad_name(name->string) || !bytes ||
		    !bytes->is_integer || !sha || sha->kind != WEFT_JSON_STRING ||
		    strlen(sha->string) != 64) {
			char what[128];

			snprintf(what, sizeof(what), "entry %zu of \"files\" needs a plain \"name\", "
				 "integer \"bytes\" and 64-digit \"sha256\"", i);
			st = bad_manifest(dir, what);
			goto out_free;
		}
		snprintf(path, sizeof(path), "%s/%s", dir, name->string);
		if (stat(path, &sb) != 0) {
			st = weft_error_set(WEFT_ERR_NOT_FOUND, "'%s' is listed in the manifest but "
					    "missing: the checkpoint '%s' is incomplete", path, dir);
			goto out_free;
		}
		if ((int64_t)sb.st_size != bytes->integer) {
			st = weft_error_set(WEFT_ERR_CORRUPT, "'%s': size %lld bytes, manifest says "
					    "%" PRId64 " (truncated or overwritten)", path,
					    (long long)sb.st_size, bytes->integer);
			goto out_free;
		}
		st = weft_sha256_file(path, digest, &size);
		if (st)
			goto out_free;
		weft_sha256_hex(digest, hex);
		if (strcmp(hex, sha->string) != 0) {
			st = weft_error_set(WEFT_ERR_CORRUPT, "'%s': sha256 %s, manifest says %s (the "
					    "file's contents changed after it was saved)", path, hex,
					    sha->string);
			goto out_free;
		}
	}
	for (size_t k = 0; k < n_needed; k++) {
		size_t i = 0;

		while (i < files->count &&
		       strcmp(weft_json_get(&files->items[i], "name")->string, needed[k]) != 0)
			i++;
		if (i == files->count) {
			st = weft_error_set(WEFT_ERR_CORRUPT, "'%s/%s' does not list '%s', which is "
					    "read from the directory, so that file's contents cannot "
					    "be checked (the manifest was edited or written by another "
					    "tool): use a checkpoint saved by weft fit",
					    dir, WEFT_MANIFEST_NAME, needed[k]);
			goto out_free;
		}
	}
out_free:
	weft_json_free(m);
	return st;
}
