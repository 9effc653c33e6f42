/* The trainer's setup and teardown: the job, the plugins, the model, the
 * optimizer, the data, the strategy (trainer_env.c), the run directory. */
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch/launch.h"
#include "nn/shapes.h"
#include "pipeline/timeline.h"
#include "runlog/report.h"
#include "runlog/rundir.h"
#include "tp/tp.h"
#include "train/device_map.h"
#include "train/early_stop.h"
#include "train/trainer_impl.h"
#include "weft/log.h"

/* The CPU kernels' threads: trainer.threads is per process; the CPU
 * devices of strategy dp are threads of this process, each driving its
 * replica's kernels, so each gets an equal share (at least one). With one
 * kernel thread per replica the replicas' products never wait on each
 * other: at gpt-small-cpu on 2 cores, dp over 2 devices stepped in
 * 517 ms with 2 kernel threads per replica and ~300 ms with one. */
static int64_t kernel_threads(const weft_trainer *t)
{
	int64_t n = weft_cpu_threads_resolve(t->tc.threads, t->denv.local_world_size > 0 ?
								    t->denv.local_world_size : 1);

	if (weft_trainer_one_process_strategy(t) && t->tc.device.type == WEFT_DEVICE_CPU &&
	    t->tc.devices > 1)
		n = n / t->tc.devices;
	return n < 1 ? 1 : n;
}

weft_status weft_trainer_relaunch(weft_trainer *t, int *exit_code)
{
	weft_launch_opts lo = {
		.nproc_per_node = (int)t->tc.devices,
		.nnodes = 1,
		.argv = t->opts.argv,
	};
	weft_launch_result res;
	char self[WEFT_TRAINER_PATH];
	char *argv[512];
	ssize_t n;
	size_t i;
	weft_status st;

	if (t->tc.num_nodes > 1)
		return weft_error_set(WEFT_ERR_CONFIG,
				      "trainer.num_nodes is %lld: start the ranks on every node with "
				      "`weft launch --nnodes %lld --node-rank R --master-addr HOST "
				      "--nproc-per-node %lld -- weft fit ...` (or srun / torchrun)",
				      (long long)t->tc.num_nodes, (long long)t->tc.num_nodes,
				      (long long)t->tc.devices);
	if (!t->opts.argv)
		return weft_error_set(WEFT_ERR_CONFIG,
				      "trainer.devices is %lld but this process was not launched as "
				      "one of %lld ranks; start it with `weft launch "
				      "--nproc-per-node %lld -- ...`",
				      (long long)t->tc.devices, (long long)t->tc.devices,
				      (long long)t->tc.devices);
	if (!exit_code)
		return WEFT_OK; /* only the checks above */
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return weft_error_set(WEFT_ERR_IO, "cannot find this program to relaunch it: %s",
				      strerror(errno));
	self[n] = '\0';
	argv[0] = self;
	for (i = 1; t->opts.argv[i] && i < sizeof(argv) / sizeof(argv[0]) - 1; i++)
		argv[i] = t->opts.argv[i];
	argv[i] = NULL;
	lo.argv = argv;
	weft_log(WEFT_LOG_INFO, "starting %lld processes (trainer.devices) through the launcher",
		 (long long)t->tc.devices);
	st = weft_launch_run(&lo, &res);
	if (st)
		return st;
	if (res.exit_code != 0 && res.cause[0])
		fprintf(stderr, "weft: %s\n", res.cause);
	*exit_code = res.exit_code;
	return WEFT_OK;
}

/* Where the communicator listens: the interface this rank reaches the
 * store through (dist/bind.c), said once per node when the job spans
 * nodes. NULL: the backend's default (GLOO_SOCKET_IFNAME set, or nothing
 * found). */
static const char *comm_bind_host(weft_trainer *t)
{
	char iface[64];

	if (!weft_dist_bind_host(&t->denv, t->store, t->comm_bind, sizeof(t->comm_bind), iface,
				 sizeof(iface)))
		return NULL;
	if (t->denv.local_rank == 0 && t->denv.local_world_size < t->world)
		weft_log(WEFT_LOG_INFO, "node %d: communicators listen on %s%s%s%s (the interface "
			 "that reaches the store at %s:%d; set GLOO_SOCKET_IFNAME to choose another)",
			 t->denv.node_rank, t->comm_bind, *iface ? " (" : "", iface,
			 *iface ? ")" : "", t->denv.store_host, t->denv.store_port);
	return t->comm_bind;
}

static weft_status setup_dist(weft_trainer *t)
{
	const char *bind;
	int64_t want = weft_trainer_one_process_strategy(t) ? 1 :
		       t->tc.devices_auto ? t->denv.world_size : t->tc.devices * t->tc.num_nodes;
	weft_status st;

	t->rank = t->denv.rank;
	t->world = t->denv.world_size;
	t->data_rank = t->rank;
	t->data_world = t->world;
	if (t->world != want) {
		char how[256];

		return weft_error_set(WEFT_ERR_CONFIG,
				      "trainer.devices x trainer.num_nodes = %lld x %lld = %lld, but "
				      "%s started %d ranks; make them agree (start them with `%s`, "
				      "or set trainer.devices: auto)",
				      (long long)t->tc.devices, (long long)t->tc.num_nodes,
				      (long long)want, weft_dist_source_name(t->denv.source), t->world,
				      weft_dist_start_hint(t->denv.source, t->tc.devices,
							   t->tc.num_nodes, how, sizeof(how)));
	}
	if (t->world == 1)
		return WEFT_OK;
	weft_log_set_rank(t->rank);
	st = weft_dist_store_join(&t->denv, t->tc.comm_timeout_ms, &t->store_srv, &t->store);
	if (st) {
		char hint[512], why[1024];

		snprintf(why, sizeof(why), "%s", weft_error_last());
		return weft_error_set(st, "rank %d: %s; %s", t->rank, why,
				      weft_dist_port_hint(&t->denv, hint, sizeof(hint)));
	}
	st = weft_registry_find(t->reg, WEFT_PLUGIN_COMM, t->tc.comm_name,
				(const void **)&t->comm_ops, &t->comm_file);
	if (st)
		return st;
	/* A restarted group must not read the previous attempt's store keys. */
	snprintf(t->pg_name, sizeof(t->pg_name), "world-r%d", t->denv.restart_count);
	/* The group lives where the training buffers do: on a CUDA run, this
	 * rank's GPU (weft_device_map_apply chose it before), which comm nccl
	 * binds its communicator to; splits inherit it. Host buffers (the
	 * loss, eval sums, the config hash) still pass: nccl stages them. */
	bind = comm_bind_host(t);
	if (t->tc.device.type == WEFT_DEVICE_CUDA)
		return weft_pg_create_dev(t->comm_ops, t->store, t->rank, t->world, t->pg_name,
					  t->tc.comm_timeout_ms, bind, t->tc.comm_options,
					  WEFT_COMM_DEVICE_CUDA, t->tc.device.index, &t->pg);
	return weft_pg_create_opts(t->comm_ops, t->store, t->rank, t->world, t->pg_name,
				   t->tc.comm_timeout_ms, bind, t->tc.comm_options, &t->pg);
}

static weft_status setup_optimizer(weft_trainer *t)
{
	weft_params *ps = weft_model_params(t->model);
	size_t n = weft_params_count(ps);
	weft_status st;

	st = weft_optim_config_parse(weft_cfg_get(t->root, "optimizer"), &t->oc);
	if (st)
		return st;
	st = weft_registry_find(t->reg, WEFT_PLUGIN_OPTIM, t->oc.name, (const void **)&t->optim_ops,
				&t->optim_file);
	if (st)
		return weft_error_wrap(st, "optimizer.name");
	st = t->optim_ops->create(t->oc.section, &t->optim);
	if (st)
		return st;
	t->segs = weft_mem_calloc(WEFT_MEM_OTHER, n * sizeof(*t->segs));
	if (!t->segs)
		return WEFT_ERR_NOMEM;
	for (size_t i = 0; i < n; i++) {
		weft_tensor *p = weft_params_at(ps, i);

		t->segs[i].name = p->name;
		/* the offset in the flat float32 buffer (a shapes-only model
		 * has none allocated, the offsets are its layout) */
		t->segs[i].offset = (int64_t)(p->offset / sizeof(float));
		t->segs[i].numel = weft_tensor_numel(p);
		t->segs[i].ndim = p->ndim;
	}
	t->nseg = n;
	weft_optim_set_decay(&t->oc, t->segs, n);
	return WEFT_OK;
}

static int64_t limit_batches(const weft_count_or_frac *lim, int64_t n)
{
	int64_t k = lim->is_count ? lim->count : (int64_t)floor(lim->frac * (double)n);

	return k < n ? k : n;
}

/* Token ids and labels out of the model's range are refused at load, not
 * when the batch holding one is drawn; the same limits are kept for the
 * check of every batch on the host (t->limits, loop.c), which the CUDA
 * kernels rely on instead of waiting to check on the device. */
static weft_status check_data_ids(weft_trainer *t)
{
	const weft_gpt_config *g = weft_model_gpt_config(t->model);
	const weft_mlp_config *c = weft_model_mlp_config(t->model);
	int64_t ignore = weft_model_ignore_index(t->model);

	t->limits = (weft_batch_limits){ .ignore_index = ignore };
	if (g) {
		t->limits.id_limit = t->limits.target_limit = g->vocab_size;
		t->limits.target_what = "model.vocab_size";
	} else if (c) {
		t->limits.target_limit = c->out_features;
		t->limits.target_what = "model.num_classes";
	}

	if (g && t->data->kind == WEFT_DATA_LM)
		return weft_data_module_check_ids(t->data, g->vocab_size, ignore,
						  "model.vocab_size");
	if (c && t->data->kind == WEFT_DATA_CLASSIFICATION)
		return weft_data_module_check_ids(t->data, c->out_features, ignore,
						  "model.num_classes");
	return WEFT_OK;
}

static weft_status setup_data(weft_trainer *t)
{
	weft_data_env de = { .world = t->data_world, .rank = t->data_rank, .seed = t->tc.seed };
	weft_status st;

	st = weft_data_module_from_config(weft_cfg_get(t->root, "data"), &de, &t->data);
	if (st)
		return st;
	st = check_data_ids(t);
	if (st)
		return st;
	st = weft_data_module_loader(t->data, 0, &t->train_loader);
	if (st)
		return st;
	if (t->data->val.ctx) {
		st = weft_data_module_loader(t->data, 1, &t->val_loader);
		if (st)
			return st;
		t->val_batches = limit_batches(&t->tc.limit_val_batches,
					       weft_loader_num_batches(t->val_loader));
	}
	t->batches_per_epoch = limit_batches(&t->tc.limit_train_batches,
					     weft_loader_num_batches(t->train_loader));
	if (t->batches_per_epoch < 1)
		return weft_error_set(WEFT_ERR_CONFIG,
				      "no training batches: the data gives %lld batches per rank per "
				      "epoch and trainer.limit_train_batches leaves %lld; use a smaller "
				      "data.batch_size or fewer devices",
				      (long long)weft_loader_num_batches(t->train_loader),
				      (long long)t->batches_per_epoch);
	t->steps_per_epoch = (t->batches_per_epoch + t->tc.accumulate - 1) / t->tc.accumulate;
	if (t->tc.max_steps > 0)
		t->total_steps = t->tc.max_steps;
	else if (t->tc.max_epochs > 0)
		t->total_steps = t->tc.max_epochs * t->steps_per_epoch;
	/* Lightning refuses an in-epoch interval longer than the epoch: it
	 * would never fire. */
	if (t->tc.check_val_every_n_epoch > 0 && t->tc.val_check_interval.is_count &&
	    t->tc.val_check_interval.count > t->batches_per_epoch && t->val_batches > 0 &&
	    t->opts.mode == WEFT_RUN_FIT)
		return weft_cfg_error(weft_cfg_get(t->tc.section, "val_check_interval"),
				      "is %lld batches but an epoch has %lld training batches; set "
				      "trainer.check_val_every_n_epoch: null to validate every %lld "
				      "batches across epochs, or give at most %lld",
				      (long long)t->tc.val_check_interval.count,
				      (long long)t->batches_per_epoch,
				      (long long)t->tc.val_check_interval.count,
				      (long long)t->batches_per_epoch);
	return WEFT_OK;
}

/* Every rank must have resolved the same config: compare hashes. */
static weft_status check_same_config(weft_trainer *t)
{
	uint64_t mine = weft_config_hash(t->cfg);
	int64_t *all;
	weft_comm_buf send = { .data = &mine, .count = 1, .dtype = WEFT_COMM_I64 };
	weft_comm_buf recv = { .count = 0, .dtype = WEFT_COMM_I64 };
	weft_status st;

	if (!t->pg)
		return WEFT_OK;
	all = calloc((size_t)t->world, sizeof(*all));
	if (!all)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory comparing configs");
	recv.data = all;
	recv.count = t->world;
	st = weft_pg_all_gather(t->pg, &send, &recv, NULL);
	for (int r = 0; !st && r < t->world; r++) {
		if ((uint64_t)all[r] != (uint64_t)all[0])
			st = weft_error_set(WEFT_ERR_CONFIG,
					    "rank %d resolved a different config than rank 0 (hash "
					    "%016llx vs %016llx): every rank must get the same file "
					    "and the same --overrides",
					    r, (unsigned long long)all[r], (unsigned long long)all[0]);
	}
	free(all);
	return st;
}

static void config_dir_of(const char *path, char *out, size_t len)
{
	char tmp[WEFT_TRAINER_PATH];

	if (!path) {
		snprintf(out, len, ".");
		return;
	}
	snprintf(tmp, sizeof(tmp), "%s", path);
	snprintf(out, len, "%s", dirname(tmp));
}

static void stem_of(const char *path, char *out, size_t len)
{
	char tmp[WEFT_TRAINER_PATH];
	char *dot;

	snprintf(tmp, sizeof(tmp), "%s", path ? path : "weft");
	snprintf(out, len, "%s", basename(tmp));
	dot = strrchr(out, '.');
	if (dot && dot != out)
		*dot = '\0';
}

/* hparams.yaml, as Lightning's loggers write it: the resolved
 * hyperparameters (the model, data, optimizer and lr_scheduler sections of
 * the canonical config; config.yaml beside it holds everything). The
 * canonical YAML puts each top-level key at column 0 with its block below,
 * so a section is its key's line and the indented lines after it. */
static weft_status write_hparams(weft_trainer *t)
{
	static const char *const keys[] = { "model:", "data:", "optimizer:", "lr_scheduler:",
					    NULL };
	char path[WEFT_TRAINER_PATH + 16];
	char *text = NULL;
	FILE *f;
	int keep = 0;
	weft_status st = weft_config_to_string(t->cfg, &text);

	if (st)
		return st;
	snprintf(path, sizeof(path), "%s/hparams.yaml", t->run_dir);
	f = fopen(path, "w");
	if (!f) {
		free(text);
		return weft_error_set(WEFT_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
	}
	for (char *line = text; *line;) {
		char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) + 1 : strlen(line);

		if (line[0] != ' ' && line[0] != '-') {
			keep = 0;
			for (int i = 0; keys[i]; i++)
				if (!strncmp(line, keys[i], strlen(keys[i])))
					keep = 1;
		}
		if (keep)
			fwrite(line, 1, len, f);
		line += len;
	}
	free(text);
	if (fclose(f) != 0)
		return weft_error_set(WEFT_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
	return WEFT_OK;
}

weft_status weft_trainer_setup_output(weft_trainer *t)
{
	char buf[WEFT_TRAINER_PATH * 2];
	FILE *f;
	weft_status st = WEFT_OK;

	if (t->rank == 0) {
		st = weft_rundir_create(t->tc.default_root_dir, t->tc.name, t->run_dir,
					sizeof(t->run_dir), NULL);
		if (st)
			return st;
	}
	st = weft_trainer_broadcast_bytes(t, t->run_dir, sizeof(t->run_dir));
	if (st)
		return st;
	snprintf(t->ckpt_dir, sizeof(t->ckpt_dir), "%s/checkpoints", t->run_dir);
	if (t->rank != 0)
		return WEFT_OK;
	snprintf(buf, sizeof(buf), "%s/config.yaml", t->run_dir);
	f = fopen(buf, "w");
	if (!f)
		return weft_error_set(WEFT_ERR_IO, "cannot write '%s': %s", buf, strerror(errno));
	st = weft_config_write(t->cfg, f);
	if (fclose(f) != 0 && !st)
		st = weft_error_set(WEFT_ERR_IO, "cannot write '%s': %s", buf, strerror(errno));
	if (st)
		return st;
	if (t->tc.log_csv || t->tc.log_tb) {
		st = write_hparams(t);
		if (st)
			return st;
	}
	if (t->tc.log_csv) {
		snprintf(buf, sizeof(buf), "%s/metrics.csv", t->run_dir);
		st = weft_csv_logger_open(buf, &t->csv);
		if (st)
			return st;
	}
	return t->tc.log_tb ? weft_tb_writer_open(t->run_dir, &t->tb) : WEFT_OK;
}

void weft_trainer_print_start(weft_trainer *t)
{
	const weft_run_banner banner = {
		.accelerator = t->tc.accelerator,
		.devices = t->tc.devices,
		.num_nodes = t->tc.num_nodes,
		.world_size = t->world,
		.global_rank = t->rank,
		.strategy = t->tc.strategy_name,
		.comm = t->world > 1 ? t->tc.comm_name : "none",
		.precision = t->tc.precision,
		.cpu_threads = t->tc.device.type == WEFT_DEVICE_CPU ? weft_cpu_get_threads() : 0,
	};
	size_t n = weft_model_module_count(t->model);
	weft_summary_row *rows;
	int64_t params = weft_model_num_params(t->model);

	if (t->rank != 0)
		return;
	weft_print_banner(stderr, &banner);
	weft_trainer_print_precision(t, stderr);
	if (!t->tc.enable_model_summary) {
		fprintf(stderr, "run directory: %s\n", t->run_dir);
		return;
	}
	rows = calloc(n, sizeof(*rows));
	if (!rows)
		return;
	for (size_t i = 0; i < n; i++) {
		const weft_module *m = weft_model_module_at(t->model, i);

		rows[i] = (weft_summary_row){ .name = m->name[0] ? m->name : "(model)",
					      .type = m->type, .params = m->n_params };
	}
	/* Lightning prints the top-level children; deeper modules are in
	 * `weft ckpt inspect`. */
	{
		size_t k = 0;

		for (size_t i = 0; i < n; i++) {
			const weft_module *m = weft_model_module_at(t->model, i);

			if (m->depth == 1)
				rows[k++] = rows[i];
		}
		/* a model with no children (a model plugin): its root */
		weft_print_model_summary(stderr, rows, k ? k : 1, params, 0, params * 4);
	}
	free(rows);
	fprintf(stderr, "run directory: %s\n", t->run_dir);
}

void weft_trainer_teardown(weft_trainer *t)
{
	weft_trainer_callbacks_free(t);
	weft_trainer_sample_free(t);
	weft_timeline_free(t->timeline);
	if (t->strat_ops && t->strat)
		t->strat_ops->destroy(t->strat);
	weft_loader_destroy(t->train_loader);
	weft_loader_destroy(t->val_loader);
	weft_data_module_free(t->data);
	if (t->optim_ops && t->optim)
		t->optim_ops->destroy(t->optim);
	weft_mem_free(t->segs);
	weft_trainer_loss_free(t);
	weft_ctx_free(t->ctx);
	weft_model_free(t->model);
	if (t->csv)
		weft_csv_logger_close(t->csv);
	if (t->tb)
		weft_tb_writer_close(t->tb);
	if (t->pg)
		weft_tp_comm_unregister(t->pg);
	weft_pg_destroy(t->pg);
	weft_store_client_close(t->store);
	if (t->store_srv)
		weft_store_server_stop(t->store_srv);
	weft_registry_free(t->reg);
}

/* The strategy's plan (optional member): a split model, the data split. */
static weft_status strategy_plan(weft_trainer *t, weft_model_options *mo)
{
	const weft_strategy_ops *ops;
	const weft_cfg *sec = NULL;
	weft_status st;

	st = weft_registry_find(t->reg, WEFT_PLUGIN_STRATEGY, t->tc.strategy_name,
				(const void **)&ops, NULL);
	if (st)
		return weft_error_wrap(st, "trainer.strategy");
	if (!WEFT_HAS_MEMBER(ops, weft_strategy_ops, plan) || !ops->plan)
		return WEFT_OK;
	if (t->tc.strategy && weft_cfg_kind_of(t->tc.strategy) == WEFT_CFG_MAP)
		sec = t->tc.strategy;
	return ops->plan(sec, t->rank, t->world, mo, &t->data_rank, &t->data_world);
}

/* Reads every section the way a run of `world` ranks would, as rank 0,
 * on the CPU (the model's shapes only, nn/shapes.h) and without a communicator,
 * then the strict check: a config error is found once, before any rank
 * starts. The strategy's and the comm backend's own options are read by
 * them when the ranks start; those are checked then. */
static weft_status check_config(weft_trainer *t, int64_t world)
{
	weft_model_options mo = { .device = WEFT_CPU, .no_grads = 1, .seed = t->tc.seed };
	const weft_strategy_ops *ops;
	weft_status st;

	t->rank = 0;
	t->world = (int)world;
	t->data_rank = 0;
	t->data_world = (int)world;
	if (!t->reg) {
		st = weft_registry_create(&t->reg);
		if (!st)
			st = weft_registry_configure_from_config(t->reg,
								 weft_cfg_get(t->root, "plugins"),
								 t->config_dir);
		if (!st)
			st = weft_registry_add_default_paths(t->reg);
		if (st)
			return st;
	}
	st = weft_registry_find(t->reg, WEFT_PLUGIN_STRATEGY, t->tc.strategy_name,
				(const void **)&ops, NULL);
	if (st)
		return weft_error_wrap(st, "trainer.strategy");
	if ((st = strategy_plan(t, &mo)))
		return st;
	/* the model's parameters declared, not allocated: a check of a
	 * 7B-parameter config takes milliseconds */
	if ((st = nn_model_shapes_from_config(weft_cfg_get(t->root, "model"), &mo, &t->model)) ||
	    (st = weft_trainer_model_act_ckpt(t, t->model)) || (st = setup_optimizer(t)) || (st = setup_data(t)) ||
	    (st = weft_lr_schedule_parse(weft_cfg_get(t->root, "lr_scheduler"), t->oc.lr,
					 t->total_steps, &t->sched)) ||
	    (st = weft_trainer_callbacks_create(t)) || (st = weft_trainer_sample_setup(t)))
		return st;
	weft_cfg_mark_used(t->tc.strategy);
	weft_cfg_mark_used(t->tc.comm_options);
	return weft_config_check_unused(t->cfg);
}

static int64_t config_world(const weft_trainer *t)
{
	return weft_trainer_one_process_strategy(t) ? 1 : t->tc.devices * t->tc.num_nodes;
}

weft_status weft_trainer_check_config(weft_config *cfg, const weft_run_opts *opts, int64_t world)
{
	weft_trainer *t = calloc(1, sizeof(*t));
	weft_status st;

	if (!t)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory checking the config");
	t->cfg = cfg;
	t->root = weft_config_root(cfg);
	t->opts = *opts;
	stem_of(opts->config_path, t->default_name, sizeof(t->default_name));
	config_dir_of(opts->config_path, t->config_dir, sizeof(t->config_dir));
	st = weft_trainer_config_parse(t->root, t->default_name, &t->tc);
	if (!st)
		st = check_config(t, world > 0 ? world : config_world(t));
	weft_trainer_teardown(t);
	free(t);
	return st;
}

weft_status weft_trainer_setup(weft_trainer *t)
{
	weft_model_options mo = { 0 };
	weft_ctx_options co = { 0 };
	weft_status st;

	stem_of(t->opts.config_path, t->default_name, sizeof(t->default_name));
	config_dir_of(t->opts.config_path, t->config_dir, sizeof(t->config_dir));
	st = weft_trainer_config_parse(t->root, t->default_name, &t->tc);
	if (st)
		return st;
	/* early stopping's start; a resumed run reads the saved best instead */
	t->best_score = weft_early_stop_initial_best(&t->tc.early);
	st = weft_dist_env_detect(&t->denv);
	if (st)
		return st;
	if (t->denv.source != WEFT_DIST_SINGLE &&
	    (st = weft_trainer_config_resolve_devices(&t->tc, t->denv.world_size,
						      t->denv.local_world_size)))
		return st;
	if (t->tc.devices * t->tc.num_nodes > 1 && t->denv.source == WEFT_DIST_SINGLE &&
	    !weft_trainer_one_process_strategy(t)) {
		/* relaunch's own refusals first: they need no data loaded */
		st = weft_trainer_relaunch(t, NULL);
		if (!st)
			st = check_config(t, config_world(t));
		if (!st)
			t->relaunch = 1; /* weft_trainer_run relaunches after teardown */
		return st;
	}
	weft_loss_scaler_init(&t->scaler, &t->tc.loss_scale);
	/* local rank r on GPU r mod (visible GPUs); nccl refuses to share one */
	if (t->tc.device.type == WEFT_DEVICE_CUDA &&
	    (st = weft_device_map_apply(&t->tc.device, t->denv.local_rank,
					t->denv.local_world_size, t->tc.comm_name)))
		return st;
	st = weft_registry_create(&t->reg);
	if (st)
		return st;
	st = weft_registry_configure_from_config(t->reg, weft_cfg_get(t->root, "plugins"),
						 t->config_dir);
	if (!st)
		st = weft_registry_add_default_paths(t->reg);
	if (st)
		return st;
	st = setup_dist(t);
	if (!st && t->pg)
		st = weft_tp_comm_register(t->pg); /* strategies may split it (host->comm_split) */
	if (st)
		return st;
	weft_cpu_set_threads(kernel_threads(t));
	mo.device = t->tc.device;
	mo.seed = t->tc.seed;
	st = strategy_plan(t, &mo);
	if (st)
		return st;
	t->model_opts = mo;
	st = weft_model_from_config(weft_cfg_get(t->root, "model"), &mo, &t->model);
	if (!st)
		st = weft_trainer_model_act_ckpt(t, t->model);
	if (st)
		return st;
	co.device = t->tc.device;
	co.seed = t->tc.seed;
	st = weft_ctx_create(&co, &t->ctx);
	if (st)
		return st;
	st = weft_ctx_set_autocast(t->ctx, t->tc.autocast);
	if (st) {
		char why[512];

		snprintf(why, sizeof(why), "%s", weft_error_last());
		return weft_cfg_error(weft_cfg_get(t->tc.section, "precision"), "%s is not "
				      "available: %s", t->tc.precision, why);
	}
	st = weft_ctx_set_lowp_activations(t->ctx, (weft_lowp_act)t->tc.lowp_act);
	if (st) {
		char why[768];

		snprintf(why, sizeof(why), "%s", weft_error_last());
		return weft_cfg_error(weft_cfg_get(t->tc.section, "lowp_activations"), "%s", why);
	}
	st = setup_optimizer(t);
	if (st)
		return st;
	st = setup_data(t);
	if (st)
		return st;
	st = weft_lr_schedule_parse(weft_cfg_get(t->root, "lr_scheduler"), t->oc.lr,
				    t->total_steps, &t->sched);
	if (st)
		return st;
	st = weft_trainer_setup_strategy(t);
	if (st)
		return st;
	st = weft_trainer_callbacks_create(t);
	if (!st)
		st = weft_trainer_sample_setup(t);
	if (st)
		return st;
	st = weft_config_check_unused(t->cfg);
	if (st)
		return st;
	st = check_same_config(t);
	if (st)
		return st;
	st = t->strat_ops->setup(t->strat);
	if (!st) /* the weights every rank starts from (setup made them rank 0's) */
		st = weft_trainer_copy_refresh(t);
	if (st)
		return st;
	/* summary.json's peaks are those of training: the whole model built
	 * before a sharding strategy's setup does not count */
	weft_mem_reset_peaks();
	return WEFT_OK;
}
