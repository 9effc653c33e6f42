/* weft/trainer.h - callback plugins: code that takes part in training.
 *
 * A callback is a plugin (kind WEFT_PLUGIN_CALLBACK) that the trainer calls
 * at fixed points of a run, as Lightning's Callback: logging to another
 * system, custom schedules of evaluation, stopping on a condition. It is
 * selected by name under trainer.callbacks, its mapping being its options:
 *
 *     trainer:
 *       callbacks:
 *         model_checkpoint: {...}     # built in
 *         early_stopping: {...}       # built in
 *         my_callback: {every: 10}    # a callback plugin named my_callback
 *
 * Every rank runs every callback with the same state, so a decision taken
 * from it (should_stop) is the same on all ranks. Callbacks run on the
 * trainer's thread between steps; they may block (write files) but should
 * be quick.
 */
#ifndef WEFT_TRAINER_H
#define WEFT_TRAINER_H

#include <stddef.h>
#include <stdint.h>
#include "weft/status.h"
#include "weft/config.h"
#include "weft/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a callback sees. Borrowed for the duration of the call; the
 * trainer sets struct_size, and members are only ever appended. */
typedef struct weft_fit_state {
	uint32_t struct_size;
	int32_t rank;             /* this process's rank */
	int32_t world_size;
	int32_t reserved;
	int64_t global_step;      /* optimizer steps done */
	int64_t epoch;            /* 0-based epoch in progress (or just ended) */
	int64_t steps_per_epoch;
	int64_t max_steps;        /* -1: unbounded */
	int64_t max_epochs;       /* -1: unbounded */
	double lr;                /* learning rate of the last step */
	double train_loss;        /* of the last step (NAN before the first) */
	double val_loss;          /* of the last validation (NAN before one) */
	double val_acc;           /* of the last validation, classifiers (else NAN) */
	const char *run_dir;      /* the run directory (every rank knows it) */
	const char *checkpoint;   /* on_save_checkpoint: the directory just saved */
	int *should_stop;         /* set *should_stop = 1 to end training after this step */
} weft_fit_state;

/* The callback vtable (kind WEFT_PLUGIN_CALLBACK). Every hook is optional
 * (NULL: nothing happens). A hook returns WEFT_OK, or a status after
 * host->error_set(...): the run then stops with that error. */
typedef struct weft_callback_ops {
	weft_plugin_head head;

	/* Reads the callback's options from `section` (its mapping under
	 * trainer.callbacks; NULL when written as `name: ~` or `name: {}`)
	 * through the host's cfg_* calls, so unknown keys are reported.
	 * *out receives the callback's state, freed with destroy.
	 * Errors: WEFT_ERR_CONFIG (at file:line:col via host->cfg_error). */
	weft_status (*create)(const weft_cfg *section, void **out);

	/* Frees the state. NULL is ignored. */
	void (*destroy)(void *cb);

	/* After setup, before the first step (also after a resume). */
	weft_status (*on_fit_start)(void *cb, const weft_fit_state *s);

	/* After every optimizer step. */
	weft_status (*on_train_batch_end)(void *cb, const weft_fit_state *s);

	/* After every validation run (val_loss / val_acc are fresh). */
	weft_status (*on_validation_end)(void *cb, const weft_fit_state *s);

	/* After every epoch. */
	weft_status (*on_train_epoch_end)(void *cb, const weft_fit_state *s);

	/* After a checkpoint directory was committed (s->checkpoint). */
	weft_status (*on_save_checkpoint)(void *cb, const weft_fit_state *s);

	/* After the last step, before summary.json is written. */
	weft_status (*on_fit_end)(void *cb, const weft_fit_state *s);
} weft_callback_ops;

/* struct_size of weft_callback_ops at ABI 1.0: the loader refuses a
 * smaller callback vtable. */
#define WEFT_CALLBACK_OPS_MIN_SIZE \
	((uint32_t)(offsetof(weft_callback_ops, on_fit_end) + \
		    sizeof(((weft_callback_ops *)0)->on_fit_end)))

/* ---- models written as plugins (Lightning's LightningModule) ------------
 *
 * A model plugin (kind WEFT_PLUGIN_MODEL) is selected by `model.class`:
 *
 *     model: {class: my_net, width: 128}    # its own options
 *
 * It declares its parameters (host->params_add, named as PyTorch would
 * name them: "layers.0.weight"), fills them in init, and runs forward
 * with the host's op_* calls, which record the autograd tape. The core
 * owns the parameters (one flat buffer, gradients beside it), so every
 * strategy, checkpoint and optimizer works with the plugin unchanged. The
 * built-in `gpt` and `mlp` classes are models of the same shape. */

struct weft_params;
struct weft_ctx;
struct weft_tensor;

/* What create is given. Borrowed for the duration of the call. */
typedef struct weft_model_build {
	uint32_t struct_size;
	uint32_t reserved;
	struct weft_params *params; /* declare every parameter here, in forward order */
	uint64_t seed;              /* seed_everything */
} weft_model_build;

typedef struct weft_module_ops {
	weft_plugin_head head; /* name: what model.class selects */

	/* Reads the model's options from `section` (the whole `model:`
	 * mapping; `class` and `init_from` are the host's) through the host's
	 * cfg_* calls, and declares the parameters with
	 * host->params_add(b->params, ...) keeping the returned tensors (their
	 * data is set once the host has allocated the flat buffer, before
	 * init). *out receives the model's state, freed with destroy.
	 * Errors: WEFT_ERR_CONFIG via host->cfg_error; params_add's. */
	weft_status (*create)(const weft_cfg *section, const weft_model_build *b, void **out);

	/* Frees the state (not the parameters: the host owns them). */
	void (*destroy)(void *m);

	/* Fills the parameters' initial values (host->param_init_normal /
	 * _uniform, or by hand in host memory). (optional: NULL leaves zeros) */
	weft_status (*init)(void *m, uint64_t seed);

	/* Runs forward on inputs x (as the data gives them: features (B, ...)
	 * F32, or token ids (B, T) I32) and returns the logits (B, classes) or
	 * (B, T, vocab) through the host's op_* calls on ctx. */
	weft_status (*forward)(void *m, struct weft_ctx *ctx, struct weft_tensor *x,
			       struct weft_tensor **logits);

	/* The target value the loss and accuracy skip. (optional: NULL means
	 * -100, PyTorch's default) */
	int64_t (*ignore_index)(const void *m);

	/* Lightning's training_step: the scalar loss of one batch, recorded
	 * for backward. (optional: NULL means the mean cross-entropy of
	 * forward's logits against the targets) */
	weft_status (*training_step)(void *m, struct weft_ctx *ctx, struct weft_tensor *x,
				     struct weft_tensor *targets, struct weft_tensor **loss);
} weft_module_ops;

/* struct_size of weft_module_ops at ABI 1.0. */
#define WEFT_MODULE_OPS_MIN_SIZE \
	((uint32_t)(offsetof(weft_module_ops, forward) + sizeof(((weft_module_ops *)0)->forward)))

#ifdef __cplusplus
}
#endif
#endif /* WEFT_TRAINER_H */
