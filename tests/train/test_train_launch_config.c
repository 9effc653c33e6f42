/* The config of a multi-rank run is checked once, before any rank starts,
 * and `devices: auto` takes the world from the launcher:
 *   - `weft fit` with trainer.devices 2 and a typo (`stratgy`) fails with
 *     exactly one stderr line "weft: ...unknown key 'stratgy'..." and
 *     nothing about a launch or a rank (no rank was started);
 *   - `weft fit --print-config` and `weft plan` reject the same typo;
 *   - a data set too small for the world (8 ranks, batch 16, drop_last)
 *     is refused before the launch;
 *   - `devices: auto` under torchrun's variables (two processes started
 *     here, store on a loopback port) trains with the launcher's world of 2,
 *     and alone trains as one process.
 * Every run is bounded by trainer.comm_timeout (5 s) and the ctest timeout.
 */
#include <netinet/in.h>
#include <sys/socket.h>

#include "train_test.h"

static const char *base_yaml =
	"seed_everything: 1\n"
	"model: {class: mlp, in_features: 16, hidden: [8], out_features: 4}\n"
	"data: {class: npy, x: x.npy, y: y.npy, batch_size: 16, val_fraction: 0.25}\n"
	"optimizer: {name: sgd, lr: 0.1}\n";

/* Exit 1 and exactly one stderr line "weft: ..." holding `want`. */
static void expect_one_error(const char *tag, int rc, const char *want)
{
	const char *err = tt_output(tag, "err");
	const char *nl = strchr(err, '\n');

	wt_checks += 3;
	if (rc != 1 || strncmp(err, "weft: ", 6) != 0 || !nl || nl[1] != '\0') {
		wt_failures++;
		fprintf(stderr, "%s: want exit 1 and one line 'weft: ...', got exit %d and:\n%s\n",
			tag, rc, err);
	}
	if (!strstr(err, want)) {
		wt_failures++;
		fprintf(stderr, "%s: message lacks '%s':\n%s\n", tag, want, err);
	}
	if (strstr(err, "launch") || strstr(err, "exited with") || strstr(err, "rank 0")) {
		wt_failures++;
		fprintf(stderr, "%s: a config error framed as a launch failure:\n%s\n", tag, err);
	}
}

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* Starts `weft fit --config auto.yaml` as torchrun's rank `rank` of 2. */
static pid_t start_torchrun_rank(int rank, int port)
{
	char out[TT_PATH], exe[TT_PATH], v[64];
	pid_t pid;

	snprintf(exe, sizeof(exe), "%s/bin/weft", getenv("WEFT_BUILD_DIR"));
	snprintf(out, sizeof(out), "%s/auto%d.err", tt_dir, rank);
	fflush(NULL);
	pid = fork();
	if (pid != 0)
		return pid;
	{
		int fe = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0666);

		if (fe < 0 || chdir(tt_dir) != 0)
			_exit(126);
		dup2(fe, 1);
		dup2(fe, 2);
	}
	snprintf(v, sizeof(v), "%d", rank);
	setenv("RANK", v, 1);
	setenv("LOCAL_RANK", v, 1);
	setenv("WORLD_SIZE", "2", 1);
	setenv("LOCAL_WORLD_SIZE", "2", 1);
	setenv("MASTER_ADDR", "127.0.0.1", 1);
	setenv("MASTER_PORT", "1", 1); /* torchrun's own; weft's store is below */
	snprintf(v, sizeof(v), "%d", port);
	setenv("WEFT_STORE_PORT", v, 1);
	setenv("WEFT_STORE_SECRET", "test-launch-config", 1);
	execl(exe, exe, "fit", "--config", "auto.yaml", (char *)NULL);
	_exit(127);
}

static int wait_status(pid_t pid)
{
	int status = 0;

	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

int main(void)
{
	char text[2048];
	int rc, port;
	pid_t a, b;

	tt_scratch("weft_launch_config");
	tt_make_npy_dataset(128, 16, 4);

	/* a typo in a two-rank run: one error, before any rank starts */
	snprintf(text, sizeof(text), "%strainer:\n  devices: 2\n  max_steps: 2\n"
		 "  stratgy: ddp\n  enable_progress_bar: false\n", base_yaml);
	tt_write_text(tt_path("typo.yaml"), text);
	rc = tt_weft("typo2", "fit", "--config", "typo.yaml");
	expect_one_error("typo2", rc, "typo.yaml:8:3: unknown key 'stratgy' in 'trainer' "
				      "(did you mean 'strategy'?)");
	rc = tt_weft("typo_print", "fit", "--config", "typo.yaml", "--print-config");
	expect_one_error("typo_print", rc, "unknown key 'stratgy'");
	WT_CHECK(tt_output("typo_print", "out")[0] == '\0');
	rc = tt_weft("typo_plan", "plan", "--config", "typo.yaml");
	expect_one_error("typo_plan", rc, "unknown key 'stratgy'");
	/* the same through an override, in a one-process print */
	rc = tt_weft("typo_override", "fit", "--config", "typo.yaml", "--trainer.devices=1",
		     "--print-config");
	expect_one_error("typo_override", rc, "unknown key 'stratgy'");

	/* too little data for 8 ranks: refused before 8 processes start */
	snprintf(text, sizeof(text), "%strainer:\n  devices: 8\n  max_steps: 2\n"
		 "  enable_progress_bar: false\n", base_yaml);
	tt_write_text(tt_path("wide.yaml"), text);
	rc = tt_weft("wide", "fit", "--config", "wide.yaml", "--data.drop_last=true");
	expect_one_error("wide", rc, "batch_size 16 is larger than this rank's");

	/* a correct config still prints and plans */
	snprintf(text, sizeof(text), "%strainer:\n  devices: 2\n  max_steps: 2\n"
		 "  enable_progress_bar: false\n  comm_timeout: 5\n", base_yaml);
	tt_write_text(tt_path("good.yaml"), text);
	rc = tt_weft("good_print", "fit", "--config", "good.yaml", "--print-config");
	WT_CHECK(tt_expect_ok("good_print", rc));
	WT_STR_CONTAINS(tt_output("good_print", "out"), "devices: 2");
	rc = tt_weft("good_plan", "plan", "--config", "good.yaml");
	WT_CHECK(tt_expect_ok("good_plan", rc));

	/* devices: auto under torchrun's variables: the launcher's world */
	snprintf(text, sizeof(text), "%strainer:\n  devices: auto\n  max_steps: 2\n"
		 "  enable_progress_bar: false\n  comm_timeout: 5\n  comm: gloo\n", base_yaml);
	tt_write_text(tt_path("auto.yaml"), text);
	port = free_port();
	WT_REQUIRE(port > 0);
	a = start_torchrun_rank(0, port);
	b = start_torchrun_rank(1, port);
	WT_REQUIRE(a > 0 && b > 0);
	rc = wait_status(a);
	WT_CHECK(rc == 0);
	if (rc)
		fprintf(stderr, "rank 0:\n%s\n", tt_output("auto0", "err"));
	rc = wait_status(b);
	WT_CHECK(rc == 0);
	if (rc)
		fprintf(stderr, "rank 1:\n%s\n", tt_output("auto1", "err"));
	WT_STR_CONTAINS(tt_output("auto0", "err"), "rank 0 of 2");
	/* alone, auto is one process */
	rc = tt_weft("auto_alone", "fit", "--config", "auto.yaml");
	WT_CHECK(tt_expect_ok("auto_alone", rc));
	tt_cleanup();
	return wt_done("test_train_launch_config");
}
