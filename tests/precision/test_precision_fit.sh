#!/bin/sh
# trainer.precision through `weft fit`, one process, on the CPU (the same
# code path CUDA runs; only the kernel table differs).
#
# bf16-mixed and 16-mixed against 32-true, 20 steps of the same run
# (precision_lib.sh): every step's train loss and gradient norm within a
# tolerance. Measured over seeds 1-5, the largest relative differences were
# bf16: loss 4.5e-4, norm 8.2e-3; f16: loss 6.8e-5, norm 9e-4 (bf16 keeps
# 8 mantissa bits, f16 11: each rounded input is off by up to 2^-9 or
# 2^-12, and the differences compound over the steps). Tolerances: bf16
# loss 3e-3 and norm 5e-2, f16 loss 5e-4 and norm 5e-3 (5-7x the worst
# seed). A loss scale left in the gradients (2^16 with SGD), a missing
# unscale before clipping or a wrong product would be off by far more.
# They must also differ from 32-true somewhere by more than 1e-6 (bf16) and
# 1e-7 (f16) relative (measured at least 4e-5 and 5e-6): the rounding ran.
# Parameters stay float32: the checkpoint's tensors are all F32, and the
# peak parameter, gradient and optimizer bytes equal 32-true's.
#
# 16-mixed overflow: initial_scale_power 40 overflows f16 in the backward
# (the scaled loss gradient of each logit, 2^40/128, is far above f16's
# 65504). The log names each skipped step and the new scale: hysteresis 2
# keeps the scale at step 1 and halves it from step 2 on until the
# gradients fit; summary.json counts the skipped steps (as many as the
# warnings); metrics.csv logs the scale; the run then trains (the loss
# falls by more than 0.5 from its first value, 5.54, within 40 steps:
# measured 5.54 -> 3.5). A normal 16-mixed run (2^16) skips nothing.
#
# A strategy that does not check gradients for overflow (the example
# plugin local_sgd) is refused under 16-mixed with advice.
set -eu
. "$(dirname "$0")/precision_lib.sh"

fit f32 --trainer.precision=32-true
fit bf16 --trainer.precision=bf16-mixed
fit f16 --trainer.precision=16-mixed
close f32 bf16 train_loss 3e-3
close f32 bf16 grad_norm 5e-2
close f32 f16 train_loss 5e-4
close f32 f16 grad_norm 5e-3
differs f32 bf16 train_loss 1e-6
differs f32 f16 train_loss 1e-7

grep -q "precision: bf16-mixed" "$dir/bf16.out" || fail "no precision in the banner"
grep -q "precision bf16-mixed: linear layers multiply BF16 inputs with float32 accumulation" \
	"$dir/bf16.out" || fail "no precision line"
grep -q "loss scale 65536 (halves after 2 consecutive overflows, not below 1; doubles after 1000" \
	"$dir/f16.out" || fail "no loss scale line"
[ "$(total f16 skipped_steps)" = 0 ] || fail "16-mixed at 2^16 skipped $(total f16 skipped_steps) steps"
[ "$(total f16 loss_scale)" = 65536 ] || fail "16-mixed ended at loss scale $(total f16 loss_scale)"

# parameters stay float32
for run in bf16 f16; do
	dts=$(grep -a -o '"dtype":"[A-Z0-9]*"' "$dir/$run.ckpt/model.safetensors" | sort -u)
	[ "$dts" = '"dtype":"F32"' ] || fail "$run checkpoint tensors: $dts"
	for cat in params grads optim; do
		a=$(sed -n "s/.*\"$cat\": \([0-9]*\).*/\1/p" "$dir/f32.json")
		b=$(sed -n "s/.*\"$cat\": \([0-9]*\).*/\1/p" "$dir/$run.json")
		[ -n "$a" ] && [ "$a" = "$b" ] || fail "$run peak $cat bytes $b, 32-true $a"
	done
done

# forced overflow: skipped, logged, counted, then trains
fit over --trainer.precision=16-mixed --trainer.loss_scale.initial_scale_power=40 \
	--trainer.max_steps=40
grep -q "warn: step 1: gradient overflow (inf or NaN) at loss scale 1.09951e+12: optimizer step skipped (1 so far); loss scale now 1.09951e+12" \
	"$dir/over.out" || fail "no step 1 overflow line"
grep -q "warn: step 2: gradient overflow (inf or NaN) at loss scale 1.09951e+12: optimizer step skipped (2 so far); loss scale now 5.49756e+11" \
	"$dir/over.out" || fail "no step 2 overflow line (halved)"
grep -q "warn: step 3: gradient overflow (inf or NaN) at loss scale 5.49756e+11: optimizer step skipped (3 so far); loss scale now 2.74878e+11" \
	"$dir/over.out" || fail "no step 3 overflow line (halved)"
skipped=$(total over skipped_steps)
warned=$(grep -c "optimizer step skipped" "$dir/over.out")
[ "$skipped" = "$warned" ] || fail "summary.json counts $skipped skipped steps, the log $warned"
[ "$skipped" -ge 10 ] && [ "$skipped" -lt 40 ] || fail "$skipped skipped steps of 40"
[ "$(col over loss_scale | head -1)" = 1.09951163e+12 ] || fail "metrics.csv loss_scale"
col over loss_scale | awk 'NR > 1 && $1 > prev * 2 { exit 1 } { prev = $1 }' ||
	fail "the loss scale grew by more than a doubling"
first=$(col over train_loss | head -1)
last=$(col over train_loss | tail -1)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }' ||
	fail "16-mixed after the overflows did not train: loss $first -> $last"
echo "forced overflow: $skipped steps skipped, loss $first -> $last, final scale $(total over loss_scale)"

# a strategy without grads_check cannot run 16-mixed
export WEFT_PLUGIN_PATH="$WEFT_BUILD_DIR/tests/sdk/fixtures/current"
rm -rf "$dir/runs"
if "$WEFT" fit --config "$dir/cfg.yaml" --trainer.precision=16-mixed \
	--trainer.strategy.name=local_sgd >"$dir/out.txt" 2>&1; then
	fail "16-mixed ran with strategy local_sgd"
fi
grep -q "16-mixed needs the strategy to check the gradients for overflow before its optimizer step, and strategy 'local_sgd' does not (weft_strategy_env.grads_check); use precision bf16-mixed (no loss scaling) or 32-true with it" \
	"$dir/out.txt" || fail "no advice for a strategy without grads_check"
echo "ok"
