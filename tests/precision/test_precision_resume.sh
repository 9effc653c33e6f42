#!/bin/sh
# 16-mixed's loss scaler survives a checkpoint.
#
# A 30-step 16-mixed run from 2^40 (overflowing, halving, then training),
# checkpointed at step 15, is resumed from that checkpoint: trainer_state.json
# holds the scaler (scale, clean steps, hysteresis left, skipped steps; the
# scale equal to what metrics.csv logged at step 15), and steps 16-30 of the
# resumed run give the unbroken run's losses and loss scales within 1e-6
# relative (the same arithmetic from the same state; resuming is exact
# elsewhere too, test_train_resume), and the same skipped-step total. A
# scaler restarted at 2^40 instead would overflow again for ~15 steps and
# fail that at once; a wrong skipped count would change SGD's first-step
# rule (the optimizer counts only the steps it took).
#
# A 32-true checkpoint resumed with 16-mixed has no scaler: a warning says
# the scaler starts afresh, and the run trains.
set -eu
. "$(dirname "$0")/precision_lib.sh"

F16="--trainer.precision=16-mixed --trainer.loss_scale.initial_scale_power=40"
CK="--trainer.enable_checkpointing=true --trainer.callbacks.model_checkpoint.every_n_train_steps=15
	--trainer.callbacks.model_checkpoint.save_top_k=-1"
# shellcheck disable=SC2086
fit full $F16 $CK --trainer.max_steps=30
cp -r "$dir/runs/cfg/version_0/checkpoints/epoch=0-step=15" "$dir/ck15"
state="$dir/ck15/trainer_state.json"
grep -q '"loss_scaler"' "$state" || fail "trainer_state.json has no loss_scaler"
saved=$(sed -n 's/.*"scale": \([0-9.e+]*\).*/\1/p' "$state")
logged=$(col full loss_scale | sed -n 15p)
awk -v a="$saved" -v b="$logged" 'BEGIN { exit !(a == b) }' ||
	fail "saved scale $saved, metrics.csv at step 15 $logged"
grep -q '"skipped_steps": 15' "$state" || fail "the 15 skipped steps are not saved"

# shellcheck disable=SC2086
fit resumed $F16 --trainer.max_steps=30 --trainer.resume="$dir/ck15"
grep -q "resumed from $dir/ck15 at step 15" "$dir/resumed.out" || fail "no resume line"
awk -F, 'NR == 1 || $1 > 15' "$dir/full.csv" > "$dir/tail.csv"
close tail resumed train_loss 1e-6
close tail resumed loss_scale 1e-6
[ "$(total resumed skipped_steps)" = "$(total full skipped_steps)" ] ||
	fail "resumed run skipped $(total resumed skipped_steps) steps in all, unbroken $(total full skipped_steps)"

# a checkpoint of another precision: the scaler starts afresh
# shellcheck disable=SC2086
fit f32 $CK --trainer.max_steps=15
cp -r "$dir/runs/cfg/version_0/checkpoints/epoch=0-step=15" "$dir/ck32"
fit f16on32 --trainer.precision=16-mixed --trainer.max_steps=20 --trainer.resume="$dir/ck32"
grep -q "has no loss scaler (saved by a run of another precision): 16-mixed starts at loss scale 65536" \
	"$dir/f16on32.out" || fail "no warning for a checkpoint without a scaler"
echo "ok: scale $saved at step 15, $(total full skipped_steps) steps skipped in all"
