/* train/early_stop.h - early stopping's state machine, apart from the loop
 * so that a recorded metric sequence can be replayed against it.
 *
 * The rule is Lightning's EarlyStopping: a value improves when it beats
 * the best so far by more than min_delta (below best - min_delta in mode
 * min, above best + min_delta in mode max); an improvement takes the best
 * and sets the wait count to 0, anything else adds one to it, and training
 * stops as soon as the wait count reaches patience.
 */
#ifndef WEFT_TRAIN_EARLY_STOP_H
#define WEFT_TRAIN_EARLY_STOP_H

#include <stdint.h>

#include "train/trainer_config.h"

/* The start of a fresh run: best is -inf in mode max, +inf in mode min. */
double weft_early_stop_initial_best(const weft_early_stop_config *c);

/* One validation's value `v` (finite): updates *best and *wait as the rule
 * above. Returns 1 when training must stop after this check, else 0. */
int weft_early_stop_update(const weft_early_stop_config *c, double v, double *best,
			   int64_t *wait);

#endif /* WEFT_TRAIN_EARLY_STOP_H */
