#!/bin/sh
# `weft launch --max-restarts 1` continues a training run from its last
# checkpoint: the first attempt's rank kills itself (SIGKILL, as a crashed
# node) right after step 25, the launcher restarts the group, and the
# trainer's `resume: auto` picks up the step-20 checkpoint and finishes all
# 60 steps.
set -eu
WEFT="$WEFT_BUILD_DIR/bin/weft"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/cfg.yaml" <<YAML
seed_everything: 7
trainer:
  devices: 1
  max_epochs: 3
  limit_train_batches: 20
  limit_val_batches: 2
  enable_progress_bar: false
  log_every_n_steps: 5
  default_root_dir: $dir/runs
  resume: auto
  callbacks:
    model_checkpoint: {every_n_train_steps: 10}
model: {class: mlp, hidden: [16]}
data: {class: fashion_mnist, batch_size: 32}
optimizer: {name: sgd, lr: 0.05, momentum: 0.9}
YAML
set +e
WEFT_FAULT_KILL_AT_STEP=25 "$WEFT" launch --nproc-per-node 1 --max-restarts 1 -- \
	"$WEFT" fit --config "$dir/cfg.yaml" >"$dir/out.txt" 2>&1
rc=$?
set -e
fail() { echo "FAIL: $*"; cat "$dir/out.txt"; exit 1; }
[ "$rc" -eq 0 ] || fail "launcher exited $rc, expected 0 after one restart"
grep -q "killed by signal 9" "$dir/out.txt" || fail "no root cause for the killed rank"
grep -q "resumed from .*epoch=0-step=20 at step 20" "$dir/out.txt" ||
	fail "the restarted run did not resume from the step-20 checkpoint"
summary=$(ls "$dir"/runs/cfg/version_*/summary.json)
[ "$(echo "$summary" | wc -l)" -eq 1 ] || fail "expected one finished run, got: $summary"
grep -q '"steps": 60' "$summary" || fail "the resumed run did not finish at step 60: $(cat "$summary")"
echo "restart continued from step 20 and finished at step 60"
