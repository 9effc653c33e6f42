/* nn/act_ckpt.h - activation checkpointing of a model's transformer
 * blocks (trainer.activation_checkpointing).
 *
 * none: every block keeps what its backward reads. full: each block keeps
 * only its input; its backward runs the block's forward again first.
 * selective: each block keeps its linear layers' and layer norms' outputs
 * (cheap to store: a few (B, T, C) tensors, and a matrix product each to
 * make again) and recomputes the attention core, whose softmax
 * probabilities, (B, n_head, T, T), grow with the square of the sequence
 * (Megatron's selective recompute); the recompute is the attention alone.
 * Both give the same gradients, bit for bit, as none: the recompute
 * replays the forward's dropout masks (tensor/checkpoint.h). */
#ifndef WEFT_NN_ACT_CKPT_H
#define WEFT_NN_ACT_CKPT_H

#include "weft/module.h"

typedef enum weft_act_ckpt {
	WEFT_ACT_CKPT_NONE = 0,
	WEFT_ACT_CKPT_FULL = 1,
	WEFT_ACT_CKPT_SELECTIVE = 2
} weft_act_ckpt;

/* "none", "full", "selective". */
const char *weft_act_ckpt_name(weft_act_ckpt mode);

/* Sets how m's forward keeps activations from its next forward on.
 * Errors: WEFT_ERR_UNSUPPORTED for a mode other than none on a model with
 * no transformer blocks (mlp, a model plugin), naming its class. */
weft_status weft_model_set_activation_checkpointing(weft_model *m, weft_act_ckpt mode);

/* What weft_model_set_activation_checkpointing last set on m (none at
 * creation). */
weft_act_ckpt weft_model_activation_checkpointing(const weft_model *m);

#endif /* WEFT_NN_ACT_CKPT_H */
