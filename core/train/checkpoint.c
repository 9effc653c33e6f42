/* Checkpoints (docs/design.md, "Checkpoints"): one directory per save,
 *   model.safetensors    full weights, PyTorch's names
 *   optimizer.bin        the optimizer's slots in flat global coordinates
 *                        (train/optim_state.h), whatever sharding wrote them
 *   trainer_state.json   step, epoch, data position, seed, best score, ...
 *   manifest.json        sha256 and size of every file
 * written into a temporary directory and renamed (runlog/atomic_dir.h), so
 * a crash never leaves a half checkpoint. Every rank writes its own slice
 * of optimizer.bin; rank 0 writes the rest and commits. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runlog/atomic_dir.h"
#include "base/json.h"
#include "runlog/rundir.h"
#include "tp/tp.h"
#include "train/checkpoint_files.h"
#include "train/model_stream.h"
#include "train/optim_state.h"
#include "train/trainer_impl.h"
#include "weft/log.h"

#define STATE_FORMAT "weft-trainer-state"

/* The whole model's flat F32 elements: optimizer.bin's coordinates (a
 * tensor-parallel model holds shards of a larger whole). */
static int64_t flat_numel(const weft_trainer *t)
{
	return weft_tp_whole_numel(weft_model_params(t->model));
}

/* The monitored metric now: val_loss, val_acc (NAN until the first
 * validation) or train_loss; NAN without a monitor. */
static double score_of(const weft_trainer *t)
{
	const char *m = t->tc.ckpt.monitor;

	if (!m)
		return NAN;
	if (!strcmp(m, "val_loss"))
		return t->last_val_loss;
	if (!strcmp(m, "val_acc"))
		return t->last_val_acc;
	if (!strcmp(m, "train_loss"))
		return t->last_train_loss;
	return NAN;
}

/* The step whose metric score_of gives: the newest validation's, or for
 * train_loss this step. */
static int64_t monitor_step(const weft_trainer *t)
{
	return !strcmp(t->tc.ckpt.monitor, "train_loss") ? t->global_step : t->val_step;
}

static weft_status write_state_json(weft_trainer *t, weft_atomic_dir *d,
				    const weft_strategy_state *ss, int is_last)
{
	weft_json_writer w;
	char *text = NULL;
	weft_status st;

	weft_json_writer_string(&w, 1);
	weft_json_begin_object(&w);
	weft_json_key(&w, "format");
	weft_json_string(&w, STATE_FORMAT);
	weft_json_key(&w, "version");
	weft_json_int(&w, 1);
	weft_json_key(&w, "global_step");
	weft_json_int(&w, t->global_step);
	weft_json_key(&w, "epoch");
	weft_json_int(&w, t->epoch);
	weft_json_key(&w, "next_batch");
	weft_json_int(&w, t->next_batch);
	weft_json_key(&w, "seed");
	weft_json_int(&w, (int64_t)t->tc.seed);
	/* the global batch in rows (per-rank batch x data-parallel ranks):
	 * a mid-epoch position means the same samples at any world size only
	 * when this stays the same */
	weft_json_key(&w, "global_batch");
	weft_json_int(&w, t->data->batch_size * (int64_t)t->data_world);
	weft_json_key(&w, "world_size");
	weft_json_int(&w, t->world);
	weft_json_key(&w, "strategy");
	weft_json_string(&w, t->tc.strategy_name);
	weft_json_key(&w, "optimizer");
	weft_json_string(&w, t->optim_ops->head.name);
	weft_json_key(&w, "optimizer_slots");
	weft_json_begin_array(&w);
	for (uint32_t k = 0; k < ss->n_slots; k++)
		weft_json_string(&w, t->optim_ops->slot_name(t->optim, k));
	weft_json_end_array(&w);
	weft_json_key(&w, "numel");
	weft_json_int(&w, flat_numel(t));
	/* null until early stopping has a score (its start is +-inf) */
	weft_json_key(&w, "best_score");
	if (isfinite(t->best_score))
		weft_json_number(&w, t->best_score);
	else
		weft_json_null(&w);
	weft_json_key(&w, "bad_checks");
	weft_json_int(&w, t->bad_checks);
	if (t->tc.ckpt.monitor && !is_last) {
		/* the save's own score: the monitored metric when it was made */
		weft_json_key(&w, "monitor");
		weft_json_string(&w, t->tc.ckpt.monitor);
		weft_json_key(&w, "monitor_score");
		weft_json_number(&w, score_of(t));
		weft_json_key(&w, "monitor_step");
		weft_json_int(&w, monitor_step(t));
	}
	weft_json_key(&w, "train_loss");
	weft_json_number(&w, t->last_train_loss); /* null before the first step */
	if (t->sched.max_steps > 0) {
		/* the schedule's horizon, so that a resume with another
		 * trainer.max_steps can continue it (weft_lr_schedule_continue) */
		weft_json_key(&w, "lr_max_steps");
		weft_json_int(&w, t->sched.max_steps);
		if (t->sched.warp_from > 0) {
			weft_json_key(&w, "lr_warp_from");
			weft_json_int(&w, t->sched.warp_from);
			weft_json_key(&w, "lr_warp_old_max");
			weft_json_int(&w, t->sched.warp_old_max);
		}
	}
	if (t->tc.loss_scale.enabled) { /* 16-mixed: the scaler goes on where it was */
		weft_json_key(&w, "loss_scaler");
		weft_json_begin_object(&w);
		weft_json_key(&w, "scale");
		weft_json_number(&w, t->scaler.scale);
		weft_json_key(&w, "good_steps");
		weft_json_int(&w, t->scaler.good_steps);
		weft_json_key(&w, "hysteresis_left");
		weft_json_int(&w, t->scaler.hysteresis_left);
		weft_json_key(&w, "skipped_steps");
		weft_json_int(&w, t->scaler.skipped);
		weft_json_end_object(&w);
	}
	weft_json_end_object(&w);
	st = weft_json_finish(&w, &text);
	if (st)
		return st;
	st = weft_atomic_dir_write_file(d, "trainer_state.json", text, strlen(text));
	free(text);
	return st;
}

/* Reads or writes every range of this rank's optimizer state (one range,
 * or a sharding strategy's several: weft_strategy_state.ranges), in global
 * flat coordinates. */
static weft_status optimizer_ranges_io(int fd, const char *path, int64_t total,
				       const weft_strategy_state *ss, int write)
{
	int multi = ss->struct_size >= offsetof(weft_strategy_state, ranges) + sizeof(ss->ranges) &&
		    ss->n_ranges > 0;
	uint32_t n = multi ? ss->n_ranges : 1;
	int64_t at = 0;
	weft_status st = WEFT_OK;

	if (ss->n_slots > 8)
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "optimizer state of %s: %u slots per "
				      "element, at most 8 are supported", path, ss->n_slots);
	for (uint32_t i = 0; !st && i < n; i++) {
		int64_t b = multi ? ss->ranges[2 * i] : ss->begin;
		int64_t e = multi ? ss->ranges[2 * i + 1] : ss->end;
		float *sl[8];

		for (uint32_t k = 0; k < ss->n_slots; k++)
			sl[k] = ss->slots[k] + at;
		st = write ? weft_optim_state_write(fd, path, 0, total, ss->n_slots,
						    (const float *const *)sl, b, e) :
			     weft_optim_state_read(fd, path, 0, total, ss->n_slots, sl, b, e);
		at += e - b;
	}
	return st;
}

/* The strategy's gather_params (weft/strategy.h), when it has one:
 * parameters whole (1) or sharded again (0). Collective. */
static weft_status strategy_gather(weft_trainer *t, int gather)
{
	const weft_strategy_ops *ops = t->strat_ops;

	if (!WEFT_HAS_MEMBER(ops, weft_strategy_ops, gather_params) || !ops->gather_params)
		return WEFT_OK;
	return ops->gather_params(t->strat, gather);
}

/* Every rank writes its slice of the optimizer state into `path`. */
static weft_status write_optimizer_slice(weft_trainer *t, const char *path,
					 const weft_strategy_state *ss)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	weft_status st;

	if (fd < 0)
		return weft_error_set(WEFT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
	st = optimizer_ranges_io(fd, path, flat_numel(t), ss, 1);
	if (!st && fsync(fd) != 0)
		st = weft_error_set(WEFT_ERR_IO, "cannot flush '%s': %s", path, strerror(errno));
	close(fd);
	return st;
}

/* save_top_k (rank 0): keep the k best saves by the monitored score, or,
 * with no monitor, the k newest (Lightning: the default save_top_k 1 keeps
 * only the latest), deleting the others; -1 keeps all. A deletion renames
 * the save away first (weft_atomic_dir_remove), so a kill during it never
 * leaves a half-deleted folder under a checkpoint's name. */
static void apply_top_k(weft_trainer *t, const char *path, double score)
{
	int64_t k = t->tc.ckpt.save_top_k;
	int by_step = !t->tc.ckpt.monitor;
	int mode_max = by_step || t->tc.ckpt.mode_max;
	int worst = -1;

	if (by_step)
		score = (double)t->global_step;
	if (k < 0 || isnan(score))
		return;
	if (t->n_topk < WEFT_TOPK_MAX) {
		snprintf(t->topk[t->n_topk].path, sizeof(t->topk[0].path), "%s", path);
		t->topk[t->n_topk++].score = score;
	}
	while (t->n_topk > k) {
		for (int64_t i = 0; i < t->n_topk; i++) {
			int worse = worst < 0 ||
				    (mode_max ? t->topk[i].score < t->topk[worst].score :
						t->topk[i].score > t->topk[worst].score);
			if (worse)
				worst = (int)i;
		}
		if (weft_atomic_dir_remove(t->topk[worst].path) != WEFT_OK)
			weft_log(WEFT_LOG_WARN, "save_top_k: %s", weft_error_last());
		t->topk[worst] = t->topk[--t->n_topk];
		worst = -1;
	}
}

weft_status weft_trainer_save_checkpoint(weft_trainer *t, const char *reason)
{
	weft_strategy_state ss = { .struct_size = sizeof(ss) };
	weft_atomic_dir *d = NULL;
	char final[WEFT_TRAINER_PATH], tmp[WEFT_TRAINER_PATH], path[WEFT_TRAINER_PATH + 32];
	int fd;
	weft_status st;

	/* every_n_train_steps and every_n_epochs can fall on the same step */
	if (strcmp(reason, "last") != 0 && t->last_ckpt_step == t->global_step)
		return WEFT_OK;
	/* A monitored save needs its metric: before the first validation there
	 * is none, so the save is skipped with one warning (Lightning's
	 * ModelCheckpoint does the same; `last` is still written). The value is
	 * the same on every rank, so all skip together. */
	if (strcmp(reason, "last") != 0 && t->tc.ckpt.monitor && isnan(score_of(t))) {
		if (t->rank == 0 && !t->ckpt_unscored_warned)
			weft_log(WEFT_LOG_WARN, "model_checkpoint: monitor '%s' has no value yet at "
				 "step %lld (no validation has run), so this save and any other "
				 "before the first validation are skipped; checkpoints/last is "
				 "still written at the end", t->tc.ckpt.monitor,
				 (long long)t->global_step);
		t->ckpt_unscored_warned = 1;
		return WEFT_OK;
	}
	st = t->strat_ops->state(t->strat, &ss);
	if (st)
		return st;
	if (!strcmp(reason, "last"))
		snprintf(final, sizeof(final), "%s/last", t->ckpt_dir);
	else
		snprintf(final, sizeof(final), "%s/epoch=%lld-step=%lld", t->ckpt_dir,
			 /* Lightning's name: the 0-based epoch the save happened in */
			 (long long)(strcmp(reason, "epoch") == 0 ? t->epoch - 1 : t->epoch),
			 (long long)t->global_step);
	memset(tmp, 0, sizeof(tmp));
	if (t->rank == 0) {
		st = weft_mkdirs(t->ckpt_dir);
		if (!st)
			st = weft_atomic_dir_begin(final, &d);
		if (!st) {
			snprintf(tmp, sizeof(tmp), "%s", weft_atomic_dir_tmp_path(d));
			snprintf(path, sizeof(path), "%s/optimizer.bin", tmp);
			fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
			if (fd < 0 || ftruncate(fd, weft_optim_state_bytes(ss.n_slots,
									   flat_numel(t))) != 0)
				st = weft_error_set(WEFT_ERR_IO, "cannot create '%s': %s", path,
						    strerror(errno));
			if (fd >= 0)
				close(fd);
		}
		if (st)
			tmp[0] = '\0'; /* tells the other ranks to give up too */
	}
	if (weft_trainer_broadcast_bytes(t, tmp, sizeof(tmp)) != WEFT_OK && !st)
		st = weft_error_last_status();
	if (!st && !tmp[0])
		st = weft_error_set(WEFT_ERR_IO, "rank 0 could not start checkpoint '%s'", final);
	if (!st) {
		snprintf(path, sizeof(path), "%s/optimizer.bin", tmp);
		st = write_optimizer_slice(t, path, &ss);
	}
	if (weft_trainer_barrier(t) != WEFT_OK && !st)
		st = weft_error_last_status();
	/* a tensor-parallel model is assembled whole (collective over each tp
	 * group; NULL for a whole model); a sharding strategy streams its
	 * parameters into the file a few at a time (params_visit: zero), or
	 * makes them all whole for the save (gather_params) */
	if (!st) {
		weft_model *whole = NULL;

		int streamed = 0;

		snprintf(path, sizeof(path), "%s/model.safetensors", tmp);
		if (weft_model_stream_available(t->strat_ops)) {
			st = weft_model_gather_whole(t->model, &whole);
			streamed = !st && !whole;
			weft_model_free(whole); /* a tp model: gathered below, in order */
			whole = NULL;
		}
		if (!st && streamed) {
			weft_model_meta meta;

			weft_model_st_meta(t->model, &meta);
			st = weft_model_stream_save(t->strat_ops, t->strat,
						    weft_model_params(t->model), &meta,
						    t->rank == 0, path);
		} else if (!st) {
			st = strategy_gather(t, 1);
			if (!st)
				st = weft_model_gather_whole(t->model, &whole);
			if (!st && t->rank == 0)
				st = weft_model_save_safetensors(whole ? whole : t->model, path);
			weft_model_free(whole);
			if (strategy_gather(t, 0) != WEFT_OK && !st)
				st = weft_error_last_status();
		}
	}
	if (t->rank == 0 && !st) {
		st = weft_atomic_dir_adopt_file(d, "model.safetensors");
		if (!st)
			st = weft_atomic_dir_adopt_file(d, "optimizer.bin");
		if (!st)
			st = write_state_json(t, d, &ss, !strcmp(reason, "last"));
		if (!st) {
			st = weft_atomic_dir_commit(d);
			d = NULL;
		}
		if (!st && strcmp(reason, "last") != 0)
			apply_top_k(t, final, score_of(t));
	}
	if (d)
		weft_atomic_dir_abort(d);
	if (weft_trainer_barrier(t) != WEFT_OK && !st)
		st = weft_error_last_status();
	if (st)
		return weft_error_wrap(st, "saving checkpoint '%s'", final);
	if (strcmp(reason, "last") != 0)
		t->last_ckpt_step = t->global_step;
	weft_log(WEFT_LOG_DEBUG, "saved checkpoint %s", final);
	return weft_trainer_callbacks_call(t, WEFT_CALLBACK_HOOK(on_save_checkpoint), final);
}

/* The largest count trainer_state.json may hold (steps, epochs, batches,
 * checks): 2^53, exact in the doubles the schedules and logs compute with
 * and out of any run's reach (285 years at a million steps a second). */
#define STATE_COUNT_MAX (INT64_C(1) << 53)

/* `v` as a user reads it in a message: 42, 1.5, null, "text", an array. */
static void describe_value(const weft_json_value *v, char *out, size_t len)
{
	if (!v)
		snprintf(out, len, "missing");
	else if (v->kind == WEFT_JSON_NUMBER && v->is_integer)
		snprintf(out, len, "%lld", (long long)v->integer);
	else if (v->kind == WEFT_JSON_NUMBER)
		snprintf(out, len, "%.17g", v->number);
	else if (v->kind == WEFT_JSON_STRING)
		snprintf(out, len, "the string \"%.40s%s\"", v->string,
			 strlen(v->string) > 40 ? "..." : "");
	else if (v->kind == WEFT_JSON_BOOL)
		snprintf(out, len, "%s", v->boolean ? "true" : "false");
	else
		snprintf(out, len, "%s", v->kind == WEFT_JSON_NULL ? "null" :
					 v->kind == WEFT_JSON_ARRAY ? "an array" : "an object");
}

/* The error for field `key` of trainer state `file` holding `v`, outside
 * `range` (the valid values, in words). */
static weft_status bad_field(const char *file, const char *key, const weft_json_value *v,
			     const char *range)
{
	char got[96];

	describe_value(v, got, sizeof(got));
	return weft_error_set(WEFT_ERR_CORRUPT, "'%s': \"%s\" is %s; valid: %s. The trainer "
			      "state is damaged or was edited: resume from another checkpoint",
			      file, key, got, range);
}

/* Integer field `key` of `root` in [lo, hi] into *out; a missing field is
 * an error when `required`, else leaves *out. */
static weft_status state_int(const weft_json_value *root, const char *key, const char *file,
			     int64_t lo, int64_t hi, int required, int64_t *out)
{
	const weft_json_value *v = weft_json_get(root, key);
	char range[96];

	if (!v && !required)
		return WEFT_OK;
	if (v && v->kind == WEFT_JSON_NUMBER && v->is_integer && v->integer >= lo &&
	    v->integer <= hi) {
		*out = v->integer;
		return WEFT_OK;
	}
	snprintf(range, sizeof(range), "an integer from %lld to %lld", (long long)lo,
		 (long long)hi);
	return bad_field(file, key, v, range);
}

/* Number field `key`: null (no value yet) or finite in [lo, hi]; absent is
 * as null. *out gets the number, or NAN for null. */
static weft_status state_score(const weft_json_value *root, const char *key, const char *file,
			       double lo, double hi, double *out)
{
	const weft_json_value *v = weft_json_get(root, key);
	char range[96];

	*out = NAN;
	if (!v || v->kind == WEFT_JSON_NULL)
		return WEFT_OK;
	if (v->kind == WEFT_JSON_NUMBER && isfinite(v->number) && v->number >= lo &&
	    v->number <= hi) {
		*out = v->number;
		return WEFT_OK;
	}
	snprintf(range, sizeof(range), "null or a finite number from %g to %g", lo, hi);
	return bad_field(file, key, v, range);
}

/* Optional string field `key`: a string when present. */
static weft_status state_string(const weft_json_value *root, const char *key, const char *file)
{
	const weft_json_value *v = weft_json_get(root, key);

	if (!v || v->kind == WEFT_JSON_STRING)
		return WEFT_OK;
	return bad_field(file, key, v, "a string");
}

/* 16-mixed: the loss scaler of trainer_state.json. A checkpoint of another
 * precision has none: the scaler then starts afresh, as configured. A saved
 * scaler is range-checked whatever this run's precision, and taken only
 * when 16-mixed is on. */
static weft_status read_scaler(weft_trainer *t, const weft_json_value *js, const char *path)
{
	const weft_json_value *ls = weft_json_get(js, "loss_scaler");
	const weft_json_value *sc;
	weft_loss_scaler s = t->scaler;
	weft_status st;

	if (!ls) {
		if (t->tc.loss_scale.enabled)
			weft_log(WEFT_LOG_WARN, "'%s' has no loss scaler (saved by a run of another "
				 "precision): 16-mixed starts at loss scale %g", path,
				 t->scaler.scale);
		return WEFT_OK;
	}
	if (ls->kind != WEFT_JSON_OBJECT)
		return bad_field(path, "loss_scaler", ls, "an object");
	sc = weft_json_get(ls, "scale");
	/* the scale multiplies F32 losses: above FLT_MAX it is inf */
	if (!sc || sc->kind != WEFT_JSON_NUMBER || !(sc->number > 0) || !isfinite(sc->number) ||
	    sc->number > FLT_MAX)
		return bad_field(path, "loss_scaler.scale", sc, "a number above 0 and at most "
				 "3.4e38");
	s.scale = sc->number;
	if ((st = state_int(ls, "good_steps", path, 0, STATE_COUNT_MAX, 1, &s.good_steps)) ||
	    (st = state_int(ls, "hysteresis_left", path, 0, STATE_COUNT_MAX, 1,
			    &s.hysteresis_left)) ||
	    (st = state_int(ls, "skipped_steps", path, 0, STATE_COUNT_MAX, 1, &s.skipped)))
		return st;
	if (!t->tc.loss_scale.enabled)
		return WEFT_OK;
	/* a resumed run may configure a smaller hysteresis than the saved run */
	if (s.hysteresis_left > s.cfg.hysteresis)
		s.hysteresis_left = s.cfg.hysteresis;
	t->scaler = s;
	return WEFT_OK;
}

/* Range-checks every field of trainer_state.json `js` (file `path`) that
 * is not checked where it is used, and gives the position and counters.
 * Fields older saves may lack (version, seed, global_batch, world_size,
 * the names) are checked when present. */
static weft_status read_state_fields(const weft_json_value *js, const char *path, int64_t *step,
				     int64_t *epoch, int64_t *next, int64_t *numel, int64_t *bad)
{
	const weft_json_value *slots = weft_json_get(js, "optimizer_slots");
	int64_t ignored = 0;
	weft_status st;

	if ((st = state_int(js, "version", path, 1, 1, 0, &ignored)) ||
	    (st = state_int(js, "global_step", path, 0, STATE_COUNT_MAX, 1, step)) ||
	    (st = state_int(js, "epoch", path, 0, STATE_COUNT_MAX, 1, epoch)) ||
	    (st = state_int(js, "next_batch", path, 0, STATE_COUNT_MAX, 1, next)) ||
	    (st = state_int(js, "seed", path, 0, INT64_MAX, 0, &ignored)) ||
	    (st = state_int(js, "global_batch", path, 1, STATE_COUNT_MAX, 0, &ignored)) ||
	    (st = state_int(js, "world_size", path, 1, INT32_MAX, 0, &ignored)) ||
	    (st = state_int(js, "numel", path, 0, STATE_COUNT_MAX, 1, numel)) ||
	    (st = state_int(js, "bad_checks", path, 0, STATE_COUNT_MAX, 1, bad)) ||
	    (st = state_string(js, "strategy", path)) ||
	    (st = state_string(js, "optimizer", path)))
		return st;
	if (slots) {
		int ok = slots->kind == WEFT_JSON_ARRAY && slots->count <= 8;

		for (size_t i = 0; ok && i < slots->count; i++)
			ok = slots->items[i].kind == WEFT_JSON_STRING;
		if (!ok)
			return bad_field(path, "optimizer_slots", slots,
					 "an array of at most 8 slot names");
	}
	return WEFT_OK;
}

/* A directory without manifest.json is no checkpoint: say where the
 * checkpoints are when it is a run (version_N) or its checkpoints folder. */
static weft_status not_a_checkpoint(const char *dir)
{
	char p[WEFT_TRAINER_PATH + 32];
	struct stat sb;

	snprintf(p, sizeof(p), "%s/manifest.json", dir);
	if (stat(p, &sb) == 0)
		return WEFT_OK;
	snprintf(p, sizeof(p), "%s/checkpoints", dir);
	if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
		return weft_error_set(WEFT_ERR_NOT_FOUND,
				      "'%s' is a run directory, not a checkpoint: give one of the "
				      "directories in '%s' (e.g. '%s/last'), or set trainer.resume: "
				      "auto", dir, p, p);
	snprintf(p, sizeof(p), "%s/last/manifest.json", dir);
	if (stat(p, &sb) == 0)
		return weft_error_set(WEFT_ERR_NOT_FOUND,
				      "'%s' holds checkpoints but is not one: give one of its "
				      "directories (e.g. '%s/last')", dir, dir);
	return weft_error_set(WEFT_ERR_NOT_FOUND,
			      "'%s' holds no checkpoint (no manifest.json): give a directory "
			      "written by weft fit (runs/NAME/version_N/checkpoints/last or "
			      ".../epoch=E-step=S), or set trainer.resume: auto to continue the "
			      "newest run of this name", dir);
}

/* The learning-rate schedule of a resumed run: the same horizon as the
 * checkpoint's takes back its continuation, if it had one; another one
 * (trainer.max_steps changed, lr_scheduler's own left unset) continues the
 * saved schedule from `step` to the new horizon, and says so. */
static weft_status continue_schedule(weft_trainer *t, const weft_json_value *js, const char *path,
				     int64_t step)
{
	int64_t old_max = 0, from = 0, from_max = 0;
	weft_status st;

	if ((st = state_int(js, "lr_max_steps", path, 1, STATE_COUNT_MAX, 0, &old_max)) ||
	    (st = state_int(js, "lr_warp_from", path, 1, STATE_COUNT_MAX, 0, &from)) ||
	    (st = state_int(js, "lr_warp_old_max", path, 1, STATE_COUNT_MAX, 0, &from_max)))
		return st;
	if (old_max == 0 || t->sched.max_steps <= 0)
		return WEFT_OK;
	if (old_max == t->sched.max_steps) {
		t->sched.warp_from = from_max > 0 ? from : 0;
		t->sched.warp_old_max = from_max;
		return WEFT_OK;
	}
	if (!weft_lr_schedule_continue(&t->sched, step, old_max) || t->rank != 0)
		return WEFT_OK;
	if (old_max <= t->sched.warp_from)
		weft_log(WEFT_LOG_INFO, "lr_scheduler: the checkpoint's %s schedule ended at step "
			 "%lld, before this resume at step %lld, so the lr stays at its end value "
			 "%.3g up to the new max_steps %lld; set lr_scheduler.max_steps to start "
			 "a new schedule", weft_lr_kind_name(t->sched.kind), (long long)old_max,
			 (long long)step, weft_lr_schedule_at(&t->sched, step),
			 (long long)t->sched.max_steps);
	else
		weft_log(WEFT_LOG_INFO, "lr_scheduler: max_steps is now %lld (the checkpoint's "
			 "schedule spanned %lld): the %s schedule continues from step %lld (lr "
			 "%.3g) and reaches its end at step %lld; set lr_scheduler.max_steps to "
			 "choose the horizon yourself", (long long)t->sched.max_steps,
			 (long long)old_max, weft_lr_kind_name(t->sched.kind), (long long)step,
			 weft_lr_schedule_at(&t->sched, step), (long long)t->sched.max_steps);
	return WEFT_OK;
}

weft_status weft_trainer_load_checkpoint(weft_trainer *t, const char *dir, int weights_only)
{
	weft_strategy_state ss = { .struct_size = sizeof(ss) };
	char path[WEFT_TRAINER_PATH + 32];
	weft_json_value *js = NULL;
	struct stat sb;
	int64_t step = 0, epoch = 0, next = 0, numel = 0, bad = 0;
	int fd;
	weft_status st;

	if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
		return weft_error_set(WEFT_ERR_NOT_FOUND,
				      "checkpoint '%s' is not a directory: give a directory made by "
				      "weft fit (runs/NAME/version_N/checkpoints/...)", dir);
	st = not_a_checkpoint(dir);
	if (st)
		return st;
	st = weft_checkpoint_verify(dir);
	if (st)
		return weft_error_wrap(st, "checkpoint '%s'", dir);
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	/* a sharding strategy takes its shards from the loaded weights */
	st = strategy_gather(t, 1);
	if (!st) {
		st = weft_model_load_safetensors(t->model, path);
		if (st)
			st = weft_error_wrap(st, "checkpoint '%s' does not fit this model", dir);
		if (strategy_gather(t, 0) && !st)
			st = weft_error_last_status();
	}
	if (!st) /* the products read the loaded weights */
		st = weft_trainer_copy_refresh(t);
	if (st)
		return st;
	if (weights_only)
		return WEFT_OK;
	snprintf(path, sizeof(path), "%s/trainer_state.json", dir);
	st = weft_json_parse_file(path, &js);
	if (st)
		return st;
	{
		const weft_json_value *fmt = weft_json_get(js, "format");

		if (!fmt || fmt->kind != WEFT_JSON_STRING || strcmp(fmt->string, STATE_FORMAT))
			st = weft_error_set(WEFT_ERR_CORRUPT, "'%s' is not a weft trainer state",
					    path);
	}
	if (!st)
		st = read_state_fields(js, path, &step, &epoch, &next, &numel, &bad);
	if (!st && next > 0) {
		/* Ranks take strided shares of one permutation, so the first k
		 * global batches are the first k x global_batch samples whatever
		 * the world size: a mid-epoch position carries over exactly when
		 * the global batch is the same. */
		const weft_json_value *gb = weft_json_get(js, "global_batch");
		int64_t now = t->data->batch_size * (int64_t)t->data_world;

		if (gb && gb->kind == WEFT_JSON_NUMBER && gb->is_integer && gb->integer != now)
			st = weft_error_set(WEFT_ERR_CONFIG,
					    "checkpoint '%s' stopped %lld batches into epoch %lld with "
					    "a global batch of %lld rows; this run's is %lld "
					    "(data.batch_size %lld x %d data-parallel ranks), so that "
					    "position names other samples: keep data.batch_size x ranks "
					    "= %lld, or resume from a checkpoint saved at an epoch's end",
					    dir, (long long)next, (long long)epoch,
					    (long long)gb->integer, (long long)now,
					    (long long)t->data->batch_size, t->data_world,
					    (long long)gb->integer);
	}
	if (!st && numel != flat_numel(t))
		st = weft_error_set(WEFT_ERR_CORRUPT,
				    "checkpoint '%s' holds optimizer state for %lld parameters, the "
				    "model has %lld", dir, (long long)numel, (long long)flat_numel(t));
	if (!st) {
		const weft_json_value *opt = weft_json_get(js, "optimizer");

		if (opt && opt->kind == WEFT_JSON_STRING &&
		    strcmp(opt->string, t->optim_ops->head.name) != 0)
			st = weft_error_set(WEFT_ERR_CONFIG,
					    "checkpoint '%s' was trained with optimizer '%s' but the "
					    "config asks for '%s'; its state cannot be reused",
					    dir, opt->string, t->optim_ops->head.name);
	}
	if (!st)
		st = read_scaler(t, js, path);
	if (!st)
		st = continue_schedule(t, js, path, step);
	if (!st) {
		double best, loss;

		/* Early stopping carries on from the saved best (the fit loop
		 * starts it at +-inf only for a fresh run). */
		st = state_score(js, "best_score", path, -DBL_MAX, DBL_MAX, &best);
		if (!st)
			st = state_score(js, "train_loss", path, -DBL_MAX, DBL_MAX, &loss);
		if (!st && !isnan(best))
			t->best_score = best;
		if (!st && !isnan(loss))
			t->last_train_loss = loss;
	}
	weft_json_free(js);
	if (st)
		return st;
	if (next < 0 || next > t->batches_per_epoch)
		return weft_error_set(WEFT_ERR_CONFIG,
				      "checkpoint '%s' stopped at batch %lld of an epoch, but this run "
				      "has %lld batches per epoch per rank (different data, batch "
				      "size or world size); resume with the same data settings",
				      dir, (long long)next, (long long)t->batches_per_epoch);
	st = t->strat_ops->state(t->strat, &ss);
	if (st)
		return st;
	snprintf(path, sizeof(path), "%s/optimizer.bin", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return weft_error_set(WEFT_ERR_CORRUPT, "checkpoint '%s' lacks optimizer.bin: %s", dir,
				      strerror(errno));
	st = optimizer_ranges_io(fd, path, numel, &ss, 0);
	close(fd);
	if (st)
		return st;
	t->global_step = step;
	t->epoch = epoch;
	t->next_batch = next;
	t->bad_checks = bad;
	return WEFT_OK;
}
