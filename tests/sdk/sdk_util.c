/* Helpers of the SDK tests (sdk_util.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "sdk_util.h"

static char tmpdir[512];

const char *sdk_tmpdir(void)
{
	const char *base = getenv("TMPDIR");

	if (tmpdir[0])
		return tmpdir;
	snprintf(tmpdir, sizeof(tmpdir), "%s/weft-sdk-XXXXXX", base && base[0] ? base : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("sdk: mkdtemp");
		exit(1);
	}
	return tmpdir;
}

void sdk_cleanup(void)
{
	char cmd[600];

	if (!tmpdir[0] || getenv("WEFT_SDK_KEEP"))
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "sdk: could not remove %s\n", tmpdir);
	tmpdir[0] = '\0';
}

void sdk_write(const char *dir, const char *name, const void *data, size_t len)
{
	char path[1024];
	FILE *f;

	if (len == (size_t)-1)
		len = strlen(data);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

void sdk_write_corpus(const char *dir)
{
	char text[8192];
	size_t len = 0;

	for (int i = 0; i < 60; i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len,
					"the quick brown fox %d jumps over the lazy dog; weft "
					"trains tiny models.\n", i);
	sdk_write(dir, "corpus.txt", text, len);
}

int sdk_run(const char *dir, char *out, size_t cap, const char *cmd)
{
	char *full;
	size_t len = 0, k;
	FILE *p;
	int status;

	if (asprintf(&full, "cd '%s' && ( %s ) 2>&1", dir, cmd) < 0)
		return -1;
	p = popen(full, "r");
	free(full);
	if (!p)
		return -1;
	out[0] = '\0';
	for (;;) {
		if (len + 1 >= cap) { /* keep the tail: errors come last */
			memmove(out, out + cap / 2, len - cap / 2);
			len -= cap / 2;
		}
		k = fread(out + len, 1, cap - 1 - len, p);
		if (!k)
			break;
		len += k;
	}
	out[len] = '\0';
	status = pclose(p);
	if (status == -1)
		return -1;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

const char *sdk_weft(void)
{
	static char path[1024];
	const char *build = getenv("WEFT_BUILD_DIR");

	if (!build) {
		fprintf(stderr, "sdk: WEFT_BUILD_DIR is not set; run this test under ctest\n");
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/bin/weft", build);
	return path;
}
