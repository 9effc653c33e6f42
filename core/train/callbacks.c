/* Callback plugins (weft/trainer.h): created from trainer.callbacks and
 * called at the trainer's fixed points. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "train/trainer_impl.h"

static int builtin(const char *key)
{
	return !strcmp(key, "model_checkpoint") || !strcmp(key, "early_stopping") ||
	       !strcmp(key, "learning_rate_monitor") || !strcmp(key, "throughput_monitor");
}

weft_status weft_trainer_callbacks_create(weft_trainer *t)
{
	const weft_cfg *cbs = weft_cfg_get(t->tc.section, "callbacks");
	size_t n = weft_cfg_kind_of(cbs) == WEFT_CFG_MAP ? weft_cfg_size(cbs) : 0;
	weft_status st;

	for (size_t i = 0; i < n; i++) {
		const char *key = weft_cfg_key_at(cbs, i);
		const weft_cfg *opts;
		weft_callback *cb;

		if (builtin(key))
			continue;
		if (t->n_callbacks == WEFT_MAX_CALLBACKS)
			return weft_cfg_error(cbs, "names more than %d callbacks", WEFT_MAX_CALLBACKS);
		opts = weft_cfg_at(cbs, i);
		cb = &t->callbacks[t->n_callbacks];
		st = weft_registry_find(t->reg, WEFT_PLUGIN_CALLBACK, key, (const void **)&cb->ops,
					NULL);
		if (st) {
			char where[256];

			return weft_error_wrap(st, "%s: trainer.callbacks.%s (built in: model_checkpoint, "
					       "early_stopping, learning_rate_monitor, throughput_monitor)",
					       weft_cfg_where(opts, where, sizeof(where)), key);
		}
		if (weft_cfg_kind_of(opts) != WEFT_CFG_MAP && weft_cfg_kind_of(opts) != WEFT_CFG_NULL)
			return weft_cfg_error(opts, "must be a mapping of the callback's options");
		st = cb->ops->create(weft_cfg_kind_of(opts) == WEFT_CFG_MAP ? opts : NULL, &cb->state);
		if (st)
			return st;
		cb->name = key;
		t->n_callbacks++;
	}
	return WEFT_OK;
}

weft_status weft_trainer_callbacks_call(weft_trainer *t, size_t hook, const char *checkpoint)
{
	weft_fit_state s = {
		.struct_size = sizeof(s),
		.rank = t->rank,
		.world_size = t->world,
		.global_step = t->global_step,
		.epoch = t->epoch,
		.steps_per_epoch = t->steps_per_epoch,
		.max_steps = t->tc.max_steps,
		.max_epochs = t->tc.max_epochs,
		.lr = t->last_lr,
		.train_loss = t->last_train_loss,
		.val_loss = t->have_val ? t->last_val_loss : NAN,
		.val_acc = t->have_val ? t->last_val_acc : NAN,
		.run_dir = t->run_dir,
		.checkpoint = checkpoint,
		.should_stop = &t->stop,
	};

	for (size_t i = 0; i < t->n_callbacks; i++) {
		const weft_callback *cb = &t->callbacks[i];
		weft_status (*fn)(void *, const weft_fit_state *);
		weft_status st;

		if (cb->ops->head.struct_size < hook + sizeof(fn))
			continue; /* an older callback without this hook */
		memcpy(&fn, (const char *)cb->ops + hook, sizeof(fn));
		if (!fn)
			continue;
		st = fn(cb->state, &s);
		if (st)
			return weft_error_wrap(st, "callback '%s'", cb->name);
	}
	return WEFT_OK;
}

void weft_trainer_callbacks_free(weft_trainer *t)
{
	for (size_t i = 0; i < t->n_callbacks; i++)
		t->callbacks[i].ops->destroy(t->callbacks[i].state);
	t->n_callbacks = 0;
}
