/* train/sample.h - text sampled from the model after validation
 * (trainer.sample), as nanoGPT's and llm.c's training loops print one.
 *
 * After every every_n_val-th validation rank 0 generates num_samples
 * continuations of `prompt` (core/generate: temperature, top_k, top_p,
 * a seed; the KV cache where the model has one) and writes them to
 * stderr and to samples.txt in the run directory, each under a line
 * naming the step. Text goes through data.tokenizer, or is raw bytes for a
 * vocabulary of 256. Sharded weights are made whole for it, as for saving
 * a checkpoint (the strategy's gather_params; a tensor-parallel model is
 * assembled whole on each rank): every rank takes part, rank 0 samples.
 * A model split into pipeline stages has no rank holding it whole: the
 * sample is skipped with a note, once.
 */
#ifndef WEFT_TRAIN_SAMPLE_H
#define WEFT_TRAIN_SAMPLE_H

#include <stdint.h>

#include "weft/config.h"
#include "weft/status.h"

typedef struct weft_sample_config {
	int enabled;               /* trainer.sample present */
	int64_t every_n_val;       /* >= 1 */
	int64_t num_samples;       /* >= 1 */
	int64_t max_new_tokens;    /* >= 1 */
	double temperature;        /* >= 0; 0 greedy */
	int64_t top_k;             /* >= 0; 0 every id */
	double top_p;              /* (0, 1] */
	int64_t seed;              /* >= 0 */
	const char *prompt;        /* borrowed from the config */
	const weft_cfg *section;
} weft_sample_config;

/* Reads trainer.sample of the trainer mapping `tr` (NULL or absent: off).
 * Errors: WEFT_ERR_CONFIG at the key for a wrong type or a value out of
 * range, saying the range. */
weft_status weft_trainer_sample_parse(const weft_cfg *tr, weft_sample_config *out);

struct weft_trainer;

/* After the model and data are built: the tokenizer and the prompt's ids.
 * Off: nothing. Errors: WEFT_ERR_CONFIG at trainer.sample when the model
 * is no language model (model.class gpt), when text has no tokenizer
 * (neither data.tokenizer nor a vocabulary of 256) or the prompt encodes
 * to nothing; the tokenizer's load errors. */
weft_status weft_trainer_sample_setup(struct weft_trainer *t);

/* Called after each validation; samples when due. Collective (every rank
 * calls it). Errors: those of making the weights whole; a failed sample
 * (rank 0) or samples.txt is a warning only, and training goes on. */
weft_status weft_trainer_sample_after_val(struct weft_trainer *t);

/* Frees what setup made; NULL state is ignored. */
void weft_trainer_sample_free(struct weft_trainer *t);

#endif /* WEFT_TRAIN_SAMPLE_H */
