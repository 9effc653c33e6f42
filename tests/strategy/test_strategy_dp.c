/* dp (one process, one thread per replica) against the one-process run of
 * the same global batch, and the option errors of dp and ddp.
 *
 *   test_strategy_dp equiv MODEL DEVICES ACCUM
 *   test_strategy_dp errors
 *   test_strategy_dp logonce      the "ddp is recommended" line, once per process
 *
 * Tolerances and steps (6) as in test_strategy_ddp.c (same reasons: dp sums each
 * gradient as per-replica partial sums, then device 0 adds them): loss of
 * every step within 1e-5 relative; with SGD every weight within 1e-5
 * relative to max(|w|, 1e-2); with AdamW the weight vector within 1e-4
 * relative L2 (Adam's sign-like first step on rounding-level gradients). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "plugin/registry.h"
#include "weft_test.h"

static h_config base(const char *model, int accum)
{
	h_model_kind k = !strcmp(model, "gpt") ? H_MODEL_GPT :
			 !strcmp(model, "mlp") ? H_MODEL_MLP : H_MODEL_TOY;

	return (h_config){
		.strategy = "single",
		.model = k,
		.batch = k == H_MODEL_GPT ? 8 : 16,
		.n_micro = accum,
		.steps = 6,
		.seed = 77,
		.lr = 1e-3,
		.toy_unused_rank = -1,
	};
}

static void equiv_one(const char *model, int devices, int accum, int sgd)
{
	h_config c = base(model, accum);
	h_result ref, got;
	double worst_loss = 0.0, worst_w, l2;
	int64_t at;
	char yaml[64];

	c.sgd = sgd;
	WT_OK(h_run(&c, &ref));
	snprintf(yaml, sizeof(yaml), "{name: dp, devices: %d}", devices);
	c.strategy = "dp";
	c.strategy_yaml = yaml;
	WT_OK(h_run(&c, &got));
	WT_REQUIRE(got.numel == ref.numel && got.steps == c.steps);
	for (int s = 0; s < c.steps; s++) {
		double d = fabs(got.loss[s] - ref.loss[s]) / fabs(ref.loss[s]);

		worst_loss = d > worst_loss ? d : worst_loss;
		WT_CLOSE(got.loss[s], ref.loss[s], 1e-5, 0.0);
		/* device 0 received every other replica's gradients and sent
		 * the parameters back: 2 x (devices - 1) x 4 bytes per element */
		WT_CHECK(got.rep[s].comm_bytes == 2 * (devices - 1) * 4 * ref.numel);
	}
	worst_w = h_max_rel(got.weights, ref.weights, ref.numel, 1e-2, &at);
	l2 = h_rel_l2(got.weights, ref.weights, ref.numel);
	fprintf(stderr, "%s dp %s x%d accum %d: worst loss rel %.3g, worst weight rel %.3g, l2 "
		"rel %.3g\n", sgd ? "sgd" : "adamw", model, devices, accum, worst_loss, worst_w, l2);
	if (sgd)
		WT_CHECK(worst_w <= 1e-5);
	else
		WT_CHECK(l2 <= 1e-4);
	h_result_free(&got);
	h_result_free(&ref);
}

static void fails_env(const char *strategy, const char *yaml, int world, int no_replicas,
		      weft_status want, const char *want1, const char *want2)
{
	h_config c = base("toy", 1);
	h_result r;

	if (world < 0) {
		c.env_cuda = 1;
		world = 0;
	}
	c.strategy = strategy;
	c.strategy_yaml = yaml;
	c.steps = 1;
	c.env_world_size = world;
	c.env_no_replicas = no_replicas;
	WT_FAILS(h_run(&c, &r), want, want1, want2);
	h_result_free(&r);
}

static void fails_with(const char *strategy, const char *yaml, const char *want1,
		       const char *want2)
{
	fails_env(strategy, yaml, 0, 0, WEFT_ERR_CONFIG, want1, want2);
}

static weft_status no_replica(void *tr, int32_t index, weft_device dev, void **replica,
			      weft_params **params, weft_ctx **ctx)
{
	(void)tr; (void)index; (void)dev; (void)replica; (void)params; (void)ctx;
	return WEFT_ERR_UNSUPPORTED;
}

static weft_status no_forward(void *tr, void *replica, const weft_micro_batch *b, double scale,
			      double *loss)
{
	(void)tr; (void)replica; (void)b; (void)scale; (void)loss;
	return WEFT_ERR_UNSUPPORTED;
}

static void no_free(void *tr, void *replica)
{
	(void)tr; (void)replica;
}

/* Two dp strategies made from one loaded plugin (as a trainer does for
 * every fit of one process): the advice to use ddp is logged once. */
static int log_once(void)
{
	char path[64], text[8192];
	weft_registry *reg;
	const weft_strategy_ops *ops;
	const void *vt;
	weft_strategy_env env = {
		.struct_size = sizeof(env),
		.world_size = 1,
		.local_world_size = 1,
		.device = WEFT_CPU,
		.replica_create = no_replica,
		.replica_forward_backward = no_forward,
		.replica_free = no_free,
		.n_devices = 2,
	};
	void *a = NULL, *b = NULL;
	int saved, fd, count = 0;
	ssize_t n;

	WT_OK(weft_registry_create(&reg));
	WT_OK(weft_registry_add_default_paths(reg));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "dp", &vt, NULL));
	ops = vt;
	snprintf(path, sizeof(path), "dp-log-%d.txt", (int)getpid());
	fflush(stderr);
	saved = dup(2);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	WT_REQUIRE(saved >= 0 && fd >= 0);
	dup2(fd, 2);
	close(fd);
	WT_OK(ops->create(NULL, &env, &a));
	WT_OK(ops->create(NULL, &env, &b));
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	ops->destroy(a);
	ops->destroy(b);
	weft_registry_free(reg);
	fd = open(path, O_RDONLY);
	WT_REQUIRE(fd >= 0);
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	unlink(path);
	text[n > 0 ? n : 0] = '\0';
	for (const char *p = text; (p = strstr(p, "ddp (one process per device) is the "
					    "recommended choice")); p++)
		count++;
	if (count != 1)
		fprintf(stderr, "log was: %s\n", text);
	WT_CHECK(count == 1);
	WT_CHECK(strstr(text, "as PyTorch's documentation says") != NULL);
	return wt_done("test_strategy_dp logonce");
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "logonce"))
		return log_once();
	if (argc >= 5 && !strcmp(argv[1], "equiv")) {
		equiv_one(argv[2], atoi(argv[3]), atoi(argv[4]), 1);
		equiv_one(argv[2], atoi(argv[3]), atoi(argv[4]), 0);
		return wt_done("test_strategy_dp equiv");
	}
	if (argc >= 2 && !strcmp(argv[1], "errors")) {
		fails_with("ddp", "{name: ddp, bucket_cap_mb: 0}", "strategy:1:",
			   "'bucket_cap_mb' must be a size in MB in (0, 65536], got 0");
		fails_with("ddp", "{name: ddp, first_bucket_mb: -1}", "first_bucket_mb",
			   "got -1");
		fails_with("ddp", "{name: ddp, comm_hook: bf61}", "comm_hook", "bf16");
		fails_with("ddp", "{name: ddp, find_unused_parameters: maybe}",
			   "find_unused_parameters", "maybe");
		fails_with("dp", "{name: dp, devices: 0}", "'devices' must be between 1 and 256",
			   "got 0");
		fails_env("ddp", NULL, 2, 0, WEFT_ERR_UNSUPPORTED,
			  "world size is 2 but the trainer gave no communicator", "trainer.comm");
		fails_env("dp", NULL, 2, 0, WEFT_ERR_UNSUPPORTED, "world size is 2",
			  "use strategy: ddp");
		fails_env("dp", "{name: dp, devices: 2}", 0, 1, WEFT_ERR_UNSUPPORTED,
			  "needs model replicas", "use strategy: ddp");
		/* world -1: the env claims a CUDA device (ddp's comm hooks run
		 * there: tests/cuda/test_cuda_ddp_hooks) */
		fails_env("dp", NULL, -1, 0, WEFT_ERR_UNSUPPORTED,
			  "CPU threads only: on GPUs one process would drive every device",
			  "set trainer.devices to the GPU count and use strategy: ddp");
		return wt_done("test_strategy_dp errors");
	}
	fprintf(stderr, "usage: test_strategy_dp equiv MODEL DEVICES ACCUM | errors | logonce\n");
	return 2;
}
