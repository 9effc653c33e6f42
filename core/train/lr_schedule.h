/* train/lr_schedule.h - learning-rate schedules.
 *
 * A schedule is a pure function of the step: weft_lr_schedule_at(s, t)
 * gives the learning rate of the optimizer step whose 0-based index is t
 * (t = number of optimizer steps already taken; the step that
 * weft_optim_step_info numbers t + 1). This is PyTorch's convention, where
 * the k-th optimizer.step() runs with the lr the scheduler computed for
 * last_epoch = k - 1, and DeepSpeed's, where it is last_batch_iteration.
 * No state, so resuming from a checkpoint needs only the step count.
 *
 * Schedules and their keys (section `lr_scheduler`; absent or null means
 * constant). lr is the optimizer's base learning rate, w = warmup_steps,
 * T = max_steps:
 *
 * weft names (warmup, where given, is PyTorch's LinearLR from
 * warmup_start_factor to 1 over w steps; the default start factor
 * 1/(w+1) gives nanoGPT's lr * (t+1)/(w+1)):
 *   constant  lr
 *   warmup    warmup_steps (>= 1), warmup_start_factor: warmup, then lr
 *   cosine    warmup_steps, warmup_start_factor, max_steps, min_lr_ratio (0):
 *             warmup, then CosineAnnealingLR(T_max = T - w, eta_min = r lr),
 *             then r lr after T
 *   linear    same keys: warmup, then LinearLR(1, r, T - w), r lr after T
 *   step      warmup_steps, warmup_start_factor, step_size, gamma (0.1):
 *             warmup, then StepLR(step_size, gamma) counted from w
 * DeepSpeed names (their formulas and keys, warmup_type log|linear):
 *   WarmupLR        warmup_min_lr (0), warmup_max_lr (lr), warmup_num_steps
 *                   (1000), warmup_type (log)
 *   WarmupDecayLR   the same plus total_num_steps
 *   WarmupCosineLR  total_num_steps, warmup_min_ratio (0), warmup_num_steps
 *                   (1000), cos_min_ratio (0.0001), warmup_type (log)
 * Each formula is written out above its code in lr_schedule.c.
 */
#ifndef WEFT_TRAIN_LR_SCHEDULE_H
#define WEFT_TRAIN_LR_SCHEDULE_H

#include <stdint.h>
#include "weft/config.h"
#include "weft/status.h"

typedef enum weft_lr_kind {
	WEFT_LR_CONSTANT = 0,
	WEFT_LR_WARMUP,
	WEFT_LR_COSINE,
	WEFT_LR_LINEAR,
	WEFT_LR_STEP,
	WEFT_LR_DS_WARMUP,        /* DeepSpeed WarmupLR */
	WEFT_LR_DS_WARMUP_DECAY,  /* DeepSpeed WarmupDecayLR */
	WEFT_LR_DS_WARMUP_COSINE  /* DeepSpeed WarmupCosineLR */
} weft_lr_kind;

/* A parsed schedule: plain data, copyable. */
typedef struct weft_lr_schedule {
	weft_lr_kind kind;
	double base_lr;             /* the optimizer's lr */
	int64_t warmup_steps;       /* weft: w; DeepSpeed: max(2, warmup_num_steps) */
	double warmup_start_factor; /* weft warmup: factor at t = 0 */
	int64_t max_steps;          /* weft T; DeepSpeed total_num_steps */
	double min_lr_ratio;        /* weft cosine/linear r */
	int64_t step_size;          /* step */
	double gamma;               /* step */
	int warmup_log;             /* DeepSpeed warmup_type: 1 log, 0 linear */
	double warmup_min_lr;       /* WarmupLR, WarmupDecayLR */
	double warmup_max_lr;       /* WarmupLR, WarmupDecayLR */
	double warmup_min_ratio;    /* WarmupCosineLR */
	double cos_min_ratio;       /* WarmupCosineLR */
	int max_steps_from_trainer; /* max_steps / total_num_steps was the trainer's default */
	/* A resumed run's new horizon (weft_lr_schedule_continue): from step
	 * warp_from the old schedule, whose horizon was warp_old_max, is
	 * stretched to end at max_steps. 0: none. */
	int64_t warp_from, warp_old_max;
} weft_lr_schedule;

/* The schedule's name as the config spells it ("cosine", "WarmupLR"). */
const char *weft_lr_kind_name(weft_lr_kind kind);

/* Parses the `lr_scheduler` section (NULL or null: constant) for an
 * optimizer whose base learning rate is `base_lr`. `default_max_steps` is
 * used for max_steps / total_num_steps when the section does not give it
 * (the trainer passes its total number of optimizer steps, or 0 when it
 * does not know). Every key is read through weft_cfg_*, so a misspelt key
 * is reported by weft_config_check_unused. Errors: WEFT_ERR_CONFIG at the
 * offending key's file:line:col (unknown name, negative step counts,
 * max_steps <= warmup_steps, ratios outside [0, 1], ...). */
weft_status weft_lr_schedule_parse(const weft_cfg *section, double base_lr,
				   int64_t default_max_steps, weft_lr_schedule *out);

/* A run resumed at optimizer step `step` from a checkpoint whose schedule
 * spanned `old_max` steps, where this run's spans s->max_steps (the
 * trainer's new max_steps): when the schedule has a horizon that came from
 * the trainer (cosine, linear, WarmupDecayLR, WarmupCosineLR without their
 * own max_steps / total_num_steps) and it changed, the rest of the old
 * schedule after `step` (or after the warmup, if that is later) is
 * stretched or squeezed linearly to end at the new horizon, so the lr goes
 * on from its value at `step` without a jump and reaches its end value at
 * the new max_steps. Returns 1 when it changed the schedule, else 0 (and
 * the schedule is unchanged). An old schedule already at its end by
 * `step` stays at its end value (returns 1 as well). */
int weft_lr_schedule_continue(weft_lr_schedule *s, int64_t step, int64_t old_max);

/* The learning rate of optimizer step index t (t >= 0; negative t is
 * treated as 0). Pure, cheap, thread-safe. */
double weft_lr_schedule_at(const weft_lr_schedule *s, int64_t t);

#endif /* WEFT_TRAIN_LR_SCHEDULE_H */
