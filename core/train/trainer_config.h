/* train/trainer_config.h - the `trainer:` section and `seed_everything`.
 *
 * Key names and meanings follow PyTorch Lightning's Trainer; docs/config.md
 * lists each with its type and default. Every key is read through
 * weft_cfg_*, so a misspelt one is reported by weft_config_check_unused.
 */
#ifndef WEFT_TRAIN_TRAINER_CONFIG_H
#define WEFT_TRAIN_TRAINER_CONFIG_H

#include <stdint.h>
#include "train/precision.h"
#include "train/sample.h"
#include "weft/config.h"
#include "weft/device.h"
#include "weft/status.h"

/* A count-or-fraction value, as Lightning's limit_*_batches and
 * val_check_interval: an integer is a number of batches, a float in
 * [0, 1] a fraction of the epoch. */
typedef struct weft_count_or_frac {
	int is_count;
	int64_t count;
	double frac;
} weft_count_or_frac;

typedef struct weft_checkpoint_config {
	int enabled;                 /* trainer.enable_checkpointing */
	int64_t every_n_train_steps; /* 0: off */
	int64_t every_n_epochs;      /* 0: off; default 1 */
	int64_t save_top_k;          /* -1: all, 0: none, k: best k by monitor */
	const char *monitor;         /* "val_loss", "val_acc", "train_loss"; NULL: none */
	int mode_max;                /* mode: max (1) or min (0) */
	int save_last;               /* keep checkpoints/last as a copy of the newest */
} weft_checkpoint_config;

typedef struct weft_early_stop_config {
	int enabled;
	const char *monitor;
	int mode_max;
	int64_t patience;            /* validation checks without improvement */
	double min_delta;
} weft_early_stop_config;

typedef struct weft_lr_monitor_config {
	int enabled;                 /* callbacks: learning_rate_monitor / LearningRateMonitor */
	int per_epoch;               /* logging_interval: epoch (1) or step (0) */
} weft_lr_monitor_config;

typedef struct weft_trainer_config {
	uint64_t seed;               /* seed_everything (default 0) */
	weft_device device;          /* accelerator (+ local rank for cuda) */
	const char *accelerator;     /* "cpu" | "cuda" */
	int64_t devices;             /* processes per node */
	int64_t num_nodes;
	int devices_auto;            /* devices: auto (the launcher's world) */
	int strategy_auto;           /* strategy unset or auto: chosen by the world */
	const weft_cfg *strategy;    /* the node: a string or a mapping; NULL: auto */
	const char *strategy_name;   /* resolved: "single" | "ddp" | ... */
	const weft_cfg *comm;        /* string or mapping; NULL: auto */
	const char *comm_name;       /* resolved: "gloo" | "nccl" | ... */
	const weft_cfg *comm_options;/* the comm mapping, or NULL */
	int64_t comm_timeout_ms;     /* trainer.comm_timeout (seconds) */
	const char *precision;       /* "32-true", "bf16-mixed", "16-mixed" */
	int64_t max_epochs;          /* -1: unlimited (then max_steps or max_time bound) */
	int64_t max_steps;           /* -1: unlimited */
	double max_time_s;           /* 0: unlimited */
	int64_t accumulate;          /* accumulate_grad_batches >= 1 */
	double gradient_clip_val;    /* 0: off */
	weft_count_or_frac val_check_interval;
	int64_t check_val_every_n_epoch; /* 0: null, by val_check_interval batches only */
	weft_count_or_frac limit_train_batches;
	weft_count_or_frac limit_val_batches;
	int64_t log_every_n_steps;
	int enable_progress_bar;
	const char *default_root_dir;
	const char *name;            /* run name under default_root_dir */
	const char *resume;          /* NULL, "auto" or a checkpoint path */
	int64_t threads;             /* CPU threads per process; 0: cores / local ranks */
	double peak_flops;           /* FLOP/s of one device for MFU; 0: the default
				      * (train/throughput.h) */
	int throughput_monitor;      /* callbacks: throughput_monitor / ThroughputMonitor:
				      * tokens/s and MFU columns in metrics.csv */
	weft_checkpoint_config ckpt;
	weft_early_stop_config early;
	weft_lr_monitor_config lr_monitor;
	const weft_cfg *section;     /* the trainer mapping (for messages) */
	weft_dtype autocast;         /* the matrix products' input dtype (F32: no autocast) */
	int lowp_act;                /* lowp_activations: weft_lowp_act (auto, on, off) */
	int weight_copy;             /* weight_copy: keep a 16-bit copy of the weights
				      * under 16-bit activations (trainer_precision.c) */
	weft_loss_scale_config loss_scale; /* 16-mixed's loss scaling (train/precision.h) */
	/* Lightning's output switches */
	int enable_model_summary;    /* the model summary table at start */
	int log_csv, log_tb;         /* trainer.logger: metrics.csv, TensorBoard */
	int64_t num_sanity_val_steps; /* validation batches before training; -1 all, 0 off */
	int64_t fast_dev_run;        /* 0: off; N: N train and N val batches, no output */
	int act_ckpt;                /* activation_checkpointing: a weft_act_ckpt
				      * (nn/act_ckpt.h): none 0, full 1, selective 2 */
	weft_sample_config sample;   /* trainer.sample: text after validation */
} weft_trainer_config;

/* Reads seed_everything and the trainer section of `root`. `default_name`
 * is the run name when trainer.name is absent (the config file's stem).
 * Strings stay borrowed from the config. Errors: WEFT_ERR_CONFIG at
 * file:line:col for a wrong type, a value out of range or an unknown
 * choice (accelerator, precision, mode). */
weft_status weft_trainer_config_parse(const weft_cfg *root, const char *default_name,
				      weft_trainer_config *out);

/* devices: auto under a launcher: devices becomes the launcher's ranks
 * per node (local_world) and num_nodes world / local_world; an automatic
 * strategy is chosen again for that world. Alone (world 1) it stays 1.
 * Nothing happens without devices: auto. Errors: WEFT_ERR_CONFIG when an
 * explicit trainer.num_nodes disagrees with the launcher's world. */
weft_status weft_trainer_config_resolve_devices(weft_trainer_config *c, int world,
						int local_world);

#endif /* WEFT_TRAIN_TRAINER_CONFIG_H */
