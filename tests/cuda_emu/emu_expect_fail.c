/* emu_expect_fail - runs a program that does something wrong on purpose
 * and passes when the emulator caught it: the program failed (a non-zero
 * exit or a signal) and its output holds the expected message.
 *
 *   emu_expect_fail "<expected text>" PROGRAM [ARGS...]
 *
 * The program's output is echoed, then one line says what was checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char *out = NULL;
	size_t len = 0, cap = 0;
	int fds[2], status;
	pid_t pid;

	if (argc < 3) {
		fprintf(stderr, "usage: emu_expect_fail \"<expected text>\" PROGRAM [ARGS...]\n");
		return 2;
	}
	if (pipe(fds) != 0) {
		perror("emu_expect_fail: pipe");
		return 2;
	}
	pid = fork();
	if (pid < 0) {
		perror("emu_expect_fail: fork");
		return 2;
	}
	if (pid == 0) {
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		close(fds[0]);
		close(fds[1]);
		execv(argv[2], argv + 2);
		fprintf(stderr, "emu_expect_fail: cannot run %s\n", argv[2]);
		_exit(127);
	}
	close(fds[1]);
	for (;;) {
		ssize_t n;

		if (len + 4096 + 1 > cap) {
			char *p = realloc(out, cap = cap * 2 + 8192);

			if (!p) {
				fprintf(stderr, "emu_expect_fail: out of memory\n");
				return 2;
			}
			out = p;
		}
		n = read(fds[0], out + len, 4096);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	out[len] = '\0';
	close(fds[0]);
	if (waitpid(pid, &status, 0) != pid) {
		perror("emu_expect_fail: waitpid");
		return 2;
	}
	fwrite(out, 1, len, stdout);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		printf("emu_expect_fail: FAILED: %s exited 0; the emulator did not catch the defect "
		       "(expected \"%s\")\n", argv[2], argv[1]);
		free(out);
		return 1;
	}
	if (!strstr(out, argv[1])) {
		printf("emu_expect_fail: FAILED: %s failed (%s %d) but without \"%s\" in its output\n",
		       argv[2], WIFEXITED(status) ? "exit" : "signal",
		       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), argv[1]);
		free(out);
		return 1;
	}
	printf("emu_expect_fail: ok: %s failed (%s %d) with \"%s\"\n", argv[2],
	       WIFEXITED(status) ? "exit" : "signal",
	       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), argv[1]);
	free(out);
	return 0;
}
