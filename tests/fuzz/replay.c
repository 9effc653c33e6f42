/* Replays inputs through a fuzz target's LLVMFuzzerTestOneInput without
 * libFuzzer, so the normal build (any compiler, with or without the
 * sanitizers) runs the seed corpus and every input that once crashed as
 * part of ctest (tests/fuzz/CMakeLists.txt). Arguments are files or
 * folders (each regular file in them, in name order). Exits 0 when every
 * input ran; a crash, a sanitizer report or an abort() of the target ends
 * the run as it would end the fuzzer. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long len;

	if (!f || fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		fprintf(stderr, "replay: cannot read %s\n", path);
		if (f)
			fclose(f);
		return 1;
	}
	buf = malloc(len ? (size_t)len : 1);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
		fprintf(stderr, "replay: cannot read %s\n", path);
		free(buf);
		fclose(f);
		return 1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	free(buf);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
	int bad = 0, ran = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;
		struct dirent **names;
		int n;

		if (stat(argv[i], &st)) {
			fprintf(stderr, "replay: no such input: %s\n", argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			bad |= run_file(argv[i]);
			ran++;
			continue;
		}
		n = scandir(argv[i], &names, NULL, by_name);
		if (n < 0) {
			fprintf(stderr, "replay: cannot list %s\n", argv[i]);
			return 1;
		}
		for (int k = 0; k < n; k++) {
			char path[4096];

			snprintf(path, sizeof(path), "%s/%s", argv[i], names[k]->d_name);
			if (!stat(path, &st) && S_ISREG(st.st_mode)) {
				bad |= run_file(path);
				ran++;
			}
			free(names[k]);
		}
		free(names);
	}
	printf("replay: %d inputs\n", ran);
	return bad || !ran;
}
