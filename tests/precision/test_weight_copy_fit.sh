#!/bin/sh
# trainer.weight_copy through `weft fit` on the CPU with 16-bit activations
# (bf16-mixed, lowp_activations: true: the CPU's reference kernels run the
# path a GPU runs), strategy single, accumulate_grad_batches 2, gradient
# clipping at 1.0, 20 steps, checkpoints every 10.
#
# (a) The numbers do not change: for sgd with momentum (the precision
# tests' config) and for adamw, the run whose linear layers read the bf16
# copy of the weights (weight_copy: true, the default) logs every step's
# train loss and gradient norm as the run that rounds each weight in every
# forward (weight_copy: false) to the last digit, and ends with
# byte-identical step-10 and step-20 weights. Both round the same F32
# weights to bf16 the same way; the copy is rounded once per optimizer
# step instead of once per micro-batch. This also proves the refresh: a
# copy left stale after a step (or after the checkpoint load of (b))
# would give the next forwards the previous weights and the losses would
# part within a step (the optimizer moves every weight by ~lr).
# (b) Resume: the copy run resumed from its step-10 checkpoint logs the
# unbroken run's losses of steps 11-20 to the digit and ends with
# byte-identical weights (the copy is rebuilt from the loaded weights).
# (c) The copy is there and counted: the copy run says so, the other does
# not, and summary.json's peak parameter bytes differ by 2 bytes per F32
# parameter (the F32 gradients' peak over 4); `weft plan` gives the copy
# run's peak parameter bytes to the byte and names the copy's 2 bytes per
# parameter, and 4 bytes per parameter with weight_copy: false.
# (d) The same bits under ddp (2 processes over gloo) and dp (2 replicas).
# (e) A value of weight_copy that is not a boolean is refused, naming it.
set -eu
. "$(dirname "$0")/precision_lib.sh"

LOWP="--trainer.precision=bf16-mixed --trainer.lowp_activations=true
	--trainer.accumulate_grad_batches=2 --trainer.enable_checkpointing=true
	--trainer.callbacks.model_checkpoint.every_n_train_steps=10
	--trainer.callbacks.model_checkpoint.save_top_k=-1"
CKPTS="$dir/runs/cfg/version_0/checkpoints"

# same_cols A B: train_loss and grad_norm of A.csv and B.csv equal as logged
same_cols() {
	for c in train_loss grad_norm; do
		col "$1" "$c" > "$dir/cols_a"
		col "$2" "$c" > "$dir/cols_b"
		[ "$(grep -c . "$dir/cols_a")" -ge 10 ] || fail "$1 logged too few $c values"
		cmp -s "$dir/cols_a" "$dir/cols_b" || {
			paste -d' ' "$dir/cols_a" "$dir/cols_b" | head -5
			fail "$1 and $2 differ in $c"
		}
	done
}

peak() { # NAME CATEGORY: summary.json's peak bytes
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["peak_bytes"][sys.argv[2]])' \
		"$dir/$1.json" "$2"
}

for opt in sgd adamw; do
	if [ "$opt" = adamw ]; then
		sed -i 's/optimizer: {name: sgd, lr: 0.1, momentum: 0.9}/optimizer: {name: adamw, lr: 0.003}/' \
			"$dir/cfg.yaml"
	fi
	# shellcheck disable=SC2086
	fit "${opt}_round" $LOWP --trainer.weight_copy=false
	cp "$CKPTS/epoch=0-step=10/model.safetensors" "$dir/${opt}_round10.safetensors"
	cp "$CKPTS/epoch=0-step=20/model.safetensors" "$dir/${opt}_round20.safetensors"
	grep -q "copy of the weights" "$dir/${opt}_round.out" &&
		fail "weight_copy false still claims a copy"
	# shellcheck disable=SC2086
	fit "${opt}_copy" $LOWP
	grep -q "the linear layers read a BF16 copy of the weights, refreshed by each optimizer step (trainer.weight_copy)" \
		"$dir/${opt}_copy.out" || fail "no line saying the products read a BF16 copy"
	cmp -s "$CKPTS/epoch=0-step=10/model.safetensors" "$dir/${opt}_round10.safetensors" ||
		fail "$opt: the step-10 weights differ with the copy"
	cmp -s "$CKPTS/epoch=0-step=20/model.safetensors" "$dir/${opt}_round20.safetensors" ||
		fail "$opt: the step-20 weights differ with the copy"
	cp -r "$CKPTS/epoch=0-step=10" "$dir/${opt}_ck10"
	same_cols "${opt}_round" "${opt}_copy"
	# (c) 2 bytes per parameter
	numel=$(( $(peak "${opt}_copy" grads) / 4 ))
	extra=$(( $(peak "${opt}_copy" params) - $(peak "${opt}_round" params) ))
	echo "$opt: the copy adds $extra bytes of parameters for $numel parameters"
	[ "$extra" -eq $((2 * numel)) ] || fail "$opt: the copy takes $extra bytes, not 2 x $numel"
	# weft plan counts it: its params row is the run's peak, with the copy's line
	# shellcheck disable=SC2086
	"$WEFT" plan --config "$dir/cfg.yaml" $LOWP >"$dir/plan.txt" 2>&1 || fail "weft plan failed"
	grep -q "^  params  *$(peak "${opt}_copy" params) B" "$dir/plan.txt" ||
		fail "$opt: weft plan's params row is not the run's $(peak "${opt}_copy" params) B"
	grep -q "(of params: the BF16 copy of the weights the linear layers read, $((2 * numel)) B; trainer.weight_copy)" \
		"$dir/plan.txt" || fail "$opt: weft plan does not show the copy's $((2 * numel)) B"
	# shellcheck disable=SC2086
	"$WEFT" plan --config "$dir/cfg.yaml" $LOWP --trainer.weight_copy=false >"$dir/plan.txt" 2>&1 ||
		fail "weft plan failed"
	grep -q "^  params  *$((4 * numel)) B" "$dir/plan.txt" ||
		fail "$opt: weft plan without the copy does not give 4 bytes a parameter"
	grep -q "copy of the weights" "$dir/plan.txt" && fail "$opt: weft plan shows a copy not kept"
	# (b) resume
	# shellcheck disable=SC2086
	fit "${opt}_resumed" $LOWP --trainer.resume="$dir/${opt}_ck10"
	awk -F, 'NR > 1 && $1 > 10 { print $1, $2 }' "$dir/${opt}_copy.csv" > "$dir/full_tail"
	awk -F, 'NR > 1 { print $1, $2 }' "$dir/${opt}_resumed.csv" > "$dir/resumed_tail"
	[ "$(wc -l < "$dir/resumed_tail")" -eq 10 ] ||
		fail "$opt: the resumed run logged $(wc -l < "$dir/resumed_tail") steps"
	cmp -s "$dir/full_tail" "$dir/resumed_tail" || {
		diff "$dir/full_tail" "$dir/resumed_tail" | head
		fail "$opt: the resumed run's losses differ from the unbroken run's"
	}
	cmp -s "$CKPTS/epoch=0-step=20/model.safetensors" "$dir/${opt}_round20.safetensors" ||
		fail "$opt: the resumed run's step-20 weights differ"
	echo "$opt: losses, gradient norms and weights identical with and without the copy, and across the resume"
done

# (d) the other strategies that keep the copy, adamw: ddp on 2 processes
# over gloo (the gradients all-reduced, then the same step on each rank)
# and dp on 2 replicas in one process (replica 0, on the trainer's context,
# reads the copy; replica 1 rounds per forward on its own context)
for strat in ddp dp; do
	# shellcheck disable=SC2086
	fit "${strat}_round" $LOWP --trainer.devices=2 --trainer.strategy=$strat \
		--trainer.weight_copy=false
	cp "$CKPTS/epoch=0-step=20/model.safetensors" "$dir/${strat}_round20.safetensors"
	# shellcheck disable=SC2086
	fit "${strat}_copy" $LOWP --trainer.devices=2 --trainer.strategy=$strat
	grep -q "read a BF16 copy of the weights" "$dir/${strat}_copy.out" ||
		fail "$strat: no line saying the products read a BF16 copy"
	cmp -s "$CKPTS/epoch=0-step=20/model.safetensors" "$dir/${strat}_round20.safetensors" ||
		fail "$strat: the step-20 weights differ with the copy"
	same_cols "${strat}_round" "${strat}_copy"
	echo "$strat: losses, gradient norms and weights identical with and without the copy"
done

# (e) the option's error
"$WEFT" fit --config "$dir/cfg.yaml" --trainer.weight_copy=maybe >"$dir/out.txt" 2>&1 &&
	fail "weight_copy maybe was accepted"
grep -q "'trainer.weight_copy' must be true or false, got 'maybe'" "$dir/out.txt" ||
	fail "no message for weight_copy maybe"
echo "ok"
