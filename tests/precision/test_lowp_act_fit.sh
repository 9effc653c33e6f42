#!/bin/sh
# trainer.lowp_activations through `weft fit` on the CPU, whose references
# of the ABI 1.6 members run the 16-bit activation path a GPU runs.
#
# (a) bf16-mixed with 16-bit activations (lowp_activations: true) against
# bf16-mixed with F32 activations (auto: the CPU's default), AdamW, 20
# steps, every step's train loss within 2e-3 relative, for the 2-layer GPT
# and for llama3-tiny (RMSNorm, RoPE, SwiGLU, grouped-query attention,
# which take the 16-bit tensors widened). Both runs round the products'
# inputs to bf16 alike; the 16-bit run also rounds every stored activation
# and activation gradient to bf16 (8 bits: up to 2^-9 relative each), and
# AdamW normalizes the gradients, so those roundings move the loss little:
# measured at most 1.7e-4 (GPT) and 7.4e-4 (Llama, whose widened ops round
# twice) over 20 steps. A gradient lost or doubled, or GELU applied twice,
# changes the loss by more than 1e-2 within a few steps. They must differ
# somewhere by more than 1e-6 relative (measured 2e-5): the rounding ran.
#
# (c) the activations are 16-bit: summary.json's steady activation peak of
# the 16-bit GPT run is at most 0.62 of the F32-activation run's (measured
# 2277416 / 4332008 = 0.53). Every (rows x width) activation and its
# gradient takes 2 bytes instead of 4, which alone gives 0.5; what stays
# F32 (the per-row norm statistics and log-sum-exp, and on the CPU the
# attention's F32 probabilities of its widened inputs) adds the rest, and
# the F32-activation run also keeps its weights rounded to bf16 for the
# backward in the step's arena (the 16-bit run reads the weight copy,
# trainer.weight_copy, counted as parameters: 73728 bytes fewer here).
#
# (d) checkpoints and resume under the gate: a 20-step 16-bit run
# checkpointed at step 10, resumed from it, logs the unbroken run's losses
# of steps 11-20 to the digit and ends with byte-identical weights.
#
# (e) the option's errors: true under 32-true, true under strategy tp
# (whose ops take F32 activations: auto keeps them F32 there), and a value
# not among auto, true, false.
set -eu
. "$(dirname "$0")/precision_lib.sh"

sed -i 's/optimizer: {name: sgd, lr: 0.1, momentum: 0.9}/optimizer: {name: adamw, lr: 0.003}/' \
	"$dir/cfg.yaml"
LOWP="--trainer.precision=bf16-mixed --trainer.lowp_activations=true"

fit gpt32 --trainer.precision=bf16-mixed
# shellcheck disable=SC2086
fit gpt16 $LOWP
grep -q "activations between layers and their gradients are BF16 (trainer.lowp_activations)" \
	"$dir/gpt16.out" || fail "no line saying the activations are BF16"
grep -q "activations between layers" "$dir/gpt32.out" && fail "the CPU's default claims BF16 activations"
close gpt32 gpt16 train_loss 2e-3
differs gpt32 gpt16 train_loss 1e-6

steady() {
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["steady_peak_bytes"]["activations"])' \
		"$dir/$1.json"
}
a32=$(steady gpt32)
a16=$(steady gpt16)
awk -v a="$a16" -v b="$a32" 'BEGIN { printf "steady activations: %d of %d bytes (%.3f)\n", a, b, a / b;
	exit !(a <= 0.62 * b) }' || fail "16-bit activations take $a16 bytes, F32 ones $a32"

sed -i 's/^model: .*/model: {preset: llama3-tiny, block_size: 16}/' "$dir/cfg.yaml"
fit llama32 --trainer.precision=bf16-mixed
# shellcheck disable=SC2086
fit llama16 $LOWP
close llama32 llama16 train_loss 2e-3
differs llama32 llama16 train_loss 1e-6

# (d) resume
sed -i 's/^model: .*/model: {class: gpt, n_layer: 2, n_head: 4, n_embd: 32, vocab_size: 256, block_size: 16, dropout: 0.1}/' \
	"$dir/cfg.yaml"
CK="--trainer.enable_checkpointing=true --trainer.callbacks.model_checkpoint.every_n_train_steps=10
	--trainer.callbacks.model_checkpoint.save_top_k=-1"
# shellcheck disable=SC2086
fit full $LOWP $CK
cp -r "$dir/runs/cfg/version_0/checkpoints/epoch=0-step=10" "$dir/ck10"
cp "$dir/runs/cfg/version_0/checkpoints/epoch=0-step=20/model.safetensors" "$dir/full20.safetensors"
# shellcheck disable=SC2086
fit resumed $LOWP $CK --trainer.resume="$dir/ck10"
awk -F, 'NR > 1 && $1 > 10 { print $1, $2 }' "$dir/full.csv" > "$dir/full_tail"
awk -F, 'NR > 1 { print $1, $2 }' "$dir/resumed.csv" > "$dir/resumed_tail"
cmp -s "$dir/full_tail" "$dir/resumed_tail" || {
	diff "$dir/full_tail" "$dir/resumed_tail" | head
	fail "the resumed run's losses differ from the unbroken run's"
}
[ "$(wc -l < "$dir/resumed_tail")" -eq 10 ] || fail "the resumed run logged $(wc -l < "$dir/resumed_tail") steps"
cmp -s "$dir/full20.safetensors" "$dir/runs/cfg/version_0/checkpoints/epoch=0-step=20/model.safetensors" ||
	fail "the resumed run's step-20 weights differ from the unbroken run's"

# (e) errors
"$WEFT" fit --config "$dir/cfg.yaml" --trainer.lowp_activations=true >"$dir/out.txt" 2>&1 &&
	fail "lowp_activations true under 32-true was accepted"
grep -q "'trainer.lowp_activations' is true, but trainer.precision is 32-true: 16-bit activations come with bf16-mixed or 16-mixed; set trainer.precision: bf16-mixed, or lowp_activations: auto" \
	"$dir/out.txt" || fail "no message for true under 32-true"
# weft plan reads the key with the same rules (one parser, core/tensor/lowp.c)
"$WEFT" plan --config "$dir/cfg.yaml" --trainer.lowp_activations=true >"$dir/out.txt" 2>&1 &&
	fail "weft plan accepted lowp_activations true under 32-true"
grep -q "'trainer.lowp_activations' is true, but trainer.precision is 32-true" "$dir/out.txt" ||
	fail "weft plan: no message for true under 32-true"
"$WEFT" fit --config "$dir/cfg.yaml" --trainer.precision=bf16-mixed \
	--trainer.lowp_activations=maybe >"$dir/out.txt" 2>&1 && fail "lowp_activations maybe was accepted"
grep -q "'trainer.lowp_activations' must be one of: auto, true, false, got 'maybe'" "$dir/out.txt" ||
	fail "no message for an unknown value"
# shellcheck disable=SC2086
"$WEFT" fit --config "$dir/cfg.yaml" $LOWP --trainer.devices=2 --trainer.comm=gloo \
	"--trainer.strategy={name: tp, size: 2}" >"$dir/out.txt" 2>&1 &&
	fail "lowp_activations true under strategy tp was accepted"
grep -q "'trainer.lowp_activations' is true, but strategy tp keeps its activations in float32 (its split, gather and vocabulary-parallel ops take F32); set lowp_activations: auto (F32 activations under tp) or false" \
	"$dir/out.txt" || fail "no message for true under tp"
echo "ok"
