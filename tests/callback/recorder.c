/* Test fixture (never installed): a callback plugin "recorder" that
 * appends one line per hook call to the file named by its `path` option,
 * and asks the trainer to stop after step `stop_at` (0: never). */
#include <stdio.h>
#include <stdlib.h>

#include "weft/trainer.h"

static const weft_host *host;

typedef struct recorder {
	const char *path;
	int64_t stop_at;
} recorder;

static weft_status rec_create(const weft_cfg *section, void **out)
{
	recorder *r = calloc(1, sizeof(*r));
	weft_status st;

	if (!r)
		return host->error_set(WEFT_ERR_NOMEM, "recorder: out of memory");
	st = host->cfg_str(section, "path", NULL, &r->path);
	if (!st)
		st = host->cfg_int(section, "stop_at", 0, &r->stop_at);
	if (!st && !r->path)
		st = host->cfg_error(section, "needs 'path:' (the file to append events to)");
	if (st) {
		free(r);
		return st;
	}
	*out = r;
	return WEFT_OK;
}

static void rec_destroy(void *p)
{
	free(p);
}

static weft_status rec_line(void *p, const weft_fit_state *s, const char *what)
{
	recorder *r = p;
	FILE *f;

	if (s->rank != 0)
		return WEFT_OK;
	f = fopen(r->path, "a");
	if (!f)
		return host->error_set(WEFT_ERR_IO, "recorder: cannot open '%s'", r->path);
	fprintf(f, "%s step=%lld epoch=%lld checkpoint=%s\n", what, (long long)s->global_step,
		(long long)s->epoch, s->checkpoint ? "yes" : "no");
	fclose(f);
	return WEFT_OK;
}

static weft_status on_fit_start(void *p, const weft_fit_state *s)
{
	return rec_line(p, s, "fit_start");
}

static weft_status on_train_batch_end(void *p, const weft_fit_state *s)
{
	recorder *r = p;

	if (r->stop_at > 0 && s->global_step >= r->stop_at)
		*s->should_stop = 1;
	return rec_line(p, s, "train_batch_end");
}

static weft_status on_validation_end(void *p, const weft_fit_state *s)
{
	return rec_line(p, s, s->val_loss == s->val_loss ? "validation_end" : "validation_end_nan");
}

static weft_status on_train_epoch_end(void *p, const weft_fit_state *s)
{
	return rec_line(p, s, "train_epoch_end");
}

static weft_status on_save_checkpoint(void *p, const weft_fit_state *s)
{
	return rec_line(p, s, "save_checkpoint");
}

static weft_status on_fit_end(void *p, const weft_fit_state *s)
{
	return rec_line(p, s, "fit_end");
}

static const weft_callback_ops recorder_ops = {
	.head = WEFT_PLUGIN_HEAD(weft_callback_ops, "recorder"),
	.create = rec_create,
	.destroy = rec_destroy,
	.on_fit_start = on_fit_start,
	.on_train_batch_end = on_train_batch_end,
	.on_validation_end = on_validation_end,
	.on_train_epoch_end = on_train_epoch_end,
	.on_save_checkpoint = on_save_checkpoint,
	.on_fit_end = on_fit_end,
};

static const weft_plugin_entry_item items[] = {
	{ .kind = WEFT_PLUGIN_CALLBACK, .vtable = &recorder_ops },
};

WEFT_PLUGIN_NAMES("callback:recorder");

static const weft_plugin_desc desc = {
	.head = WEFT_PLUGIN_HEAD(weft_plugin_desc, "test callback"),
	.count = 1,
	.items = items,
};

WEFT_PLUGIN_ENTRY(h)
{
	host = h;
	return &desc;
}
