/* weft_file_read: whole files, NUL-terminated, with the path in every
 * error. weft_file_open_read, which every reader of user-given files
 * (config, data, checkpoints) opens through: a FIFO, a device or a
 * directory is refused at once, naming what it is, instead of blocking
 * forever (a FIFO nobody writes) or reading without end (/dev/zero). An
 * alarm turns a reader that blocks into a failed test, not a hang. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/json.h"
#include "weft_test.h"

static void test_not_regular(void)
{
	char fifo[64], *buf = (char *)1;
	weft_json_value *js = NULL;
	size_t len = 7;
	int64_t size = 5;
	int fd = 3;
	FILE *f = (FILE *)1;

	snprintf(fifo, sizeof(fifo), "fifo-%d", (int)getpid());
	unlink(fifo);
	WT_REQUIRE(mkfifo(fifo, 0600) == 0);
	alarm(20);
	/* whole-file reads: safetensors and trainer_state.json of a checkpoint */
	WT_FAILS(weft_file_read(fifo, WEFT_MEM_OTHER, &buf, &len), WEFT_ERR_IO, fifo,
		 "not a regular file (it is a FIFO (named pipe)", "give the path of a file");
	WT_CHECK(buf == NULL && len == 0);
	WT_FAILS(weft_json_parse_file(fifo, &js), WEFT_ERR_IO, "it is a FIFO");
	WT_CHECK(js == NULL);
	WT_FAILS(weft_file_open_read(fifo, "token file", &fd, &size), WEFT_ERR_IO,
		 "token file '", fifo, "' is not a regular file: it is a FIFO");
	WT_CHECK(fd == -1 && size == 0);
	WT_FAILS(weft_file_fopen_read(fifo, "npy file", &f, NULL), WEFT_ERR_IO, "it is a FIFO");
	WT_CHECK(f == NULL);
	WT_FAILS(weft_file_read("/dev/zero", WEFT_MEM_OTHER, &buf, &len), WEFT_ERR_IO,
		 "/dev/zero: not a regular file (it is a character device");
	WT_FAILS(weft_file_open_read("/dev/null", "config", &fd, NULL), WEFT_ERR_IO,
		 "config '/dev/null' is not a regular file: it is a character device");
	WT_FAILS(weft_file_open_read("/nonexistent/t.bin", "token file", &fd, NULL),
		 WEFT_ERR_NOT_FOUND, "cannot open token file '/nonexistent/t.bin'");
	alarm(0);
	unlink(fifo);
}

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
	test_not_regular();
	return wt_done("test_file");
}
