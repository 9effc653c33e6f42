/* weft_file_read: whole files, NUL-terminated, with the path in every
 * error. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "weft_test.h"

int main(void)
{
	char path[64], *buf = (char *)1;
	size_t len = 7;
	FILE *f;

	snprintf(path, sizeof(path), "file-%d.txt", (int)getpid());
	f = fopen(path, "wb");
	WT_REQUIRE(f && fwrite("ab\0cd", 1, 5, f) == 5 && fclose(f) == 0);
	WT_OK(weft_file_read(path, WEFT_MEM_OTHER, &buf, &len));
	/* every byte, the embedded NUL too, and a NUL after the end */
	WT_CHECK(len == 5 && !memcmp(buf, "ab\0cd", 5) && buf[5] == '\0');
	weft_mem_free(buf);

	f = fopen(path, "wb");
	WT_REQUIRE(f && fclose(f) == 0);
	WT_OK(weft_file_read(path, WEFT_MEM_OTHER, &buf, &len));
	WT_CHECK(len == 0 && buf && buf[0] == '\0');
	weft_mem_free(buf);
	unlink(path);

	WT_FAILS(weft_file_read("/nonexistent/x.json", WEFT_MEM_OTHER, &buf, &len),
		 WEFT_ERR_NOT_FOUND, "/nonexistent/x.json: cannot open");
	WT_CHECK(buf == NULL && len == 0);
	/* a directory opens (and "has" a huge size) but is not a file */
	WT_FAILS(weft_file_read(".", WEFT_MEM_OTHER, &buf, &len), WEFT_ERR_IO,
		 ".: not a regular file", "give the path of a file");
	WT_CHECK(buf == NULL && len == 0);
	return wt_done("test_file");
}
