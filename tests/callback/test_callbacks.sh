#!/bin/sh
# Callback plugins (weft/trainer.h): every hook fires at its point, in
# order, with the right step; should_stop ends training; an unknown
# callback name and a missing option are clear errors.
set -eu
WEFT="$WEFT_BUILD_DIR/bin/weft"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; [ -f "$dir/out.txt" ] && cat "$dir/out.txt"; [ -f "$dir/events" ] && cat "$dir/events"; exit 1; }
cat > "$dir/cfg.yaml" <<YAML
trainer:
  max_epochs: 2
  limit_train_batches: 4
  limit_val_batches: 1
  enable_progress_bar: false
  default_root_dir: $dir/runs
  callbacks:
    recorder: {path: $dir/events}
model: {class: mlp, hidden: [8]}
data: {class: fashion_mnist, batch_size: 16}
optimizer: {name: sgd, lr: 0.1}
plugins: {paths: ["$FIXTURE_DIR"]}
YAML
"$WEFT" fit --config "$dir/cfg.yaml" >"$dir/out.txt" 2>&1 || fail "fit failed"
# 2 epochs x 4 steps; validation and a checkpoint at each epoch end, `last` at the end.
want="fit_start step=0 epoch=0 checkpoint=no
train_batch_end step=1 epoch=0 checkpoint=no
train_batch_end step=2 epoch=0 checkpoint=no
train_batch_end step=3 epoch=0 checkpoint=no
train_batch_end step=4 epoch=0 checkpoint=no
train_epoch_end step=4 epoch=0 checkpoint=no
validation_end step=4 epoch=1 checkpoint=no
save_checkpoint step=4 epoch=1 checkpoint=yes
train_batch_end step=5 epoch=1 checkpoint=no
train_batch_end step=6 epoch=1 checkpoint=no
train_batch_end step=7 epoch=1 checkpoint=no
train_batch_end step=8 epoch=1 checkpoint=no
train_epoch_end step=8 epoch=1 checkpoint=no
validation_end step=8 epoch=2 checkpoint=no
save_checkpoint step=8 epoch=2 checkpoint=yes
save_checkpoint step=8 epoch=2 checkpoint=yes
fit_end step=8 epoch=2 checkpoint=no"
[ "$(cat "$dir/events")" = "$want" ] || { echo "want:"; echo "$want"; fail "hook sequence differs"; }

# should_stop: the callback stops the run after step 3.
rm -f "$dir/events"
"$WEFT" fit --config "$dir/cfg.yaml" --trainer.callbacks.recorder.stop_at=3 >"$dir/out.txt" 2>&1 ||
	fail "fit with stop_at failed"
grep -q '"steps": 3' "$dir"/runs/cfg/version_1/summary.json || fail "should_stop did not stop at step 3"

# An unknown callback: the registry's did-you-mean, and where it was written.
if "$WEFT" fit --config "$dir/cfg.yaml" --trainer.callbacks.recordr='{path: x}' >"$dir/out.txt" 2>&1; then
	fail "an unknown callback was accepted"
fi
grep -q "no callback plugin named 'recordr' (did you mean 'recorder'?)" "$dir/out.txt" ||
	fail "no did-you-mean for an unknown callback"
grep -q "trainer.callbacks.recordr" "$dir/out.txt" || fail "the message does not name the key"
# A callback's own option error, at file:line:col.
sed -i "s|recorder: {path: $dir/events}|recorder: {pth: x}|" "$dir/cfg.yaml"
if "$WEFT" fit --config "$dir/cfg.yaml" >"$dir/out.txt" 2>&1; then
	fail "a callback without its required option was accepted"
fi
grep -q "cfg.yaml:8:15: 'trainer.callbacks.recorder' needs 'path:'" "$dir/out.txt" ||
	fail "the option error lacks file:line:col"
echo "callback hooks, should_stop and errors behave"
