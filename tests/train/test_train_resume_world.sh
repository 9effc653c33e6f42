#!/bin/sh
# A checkpoint saved mid-epoch by one process resumes on 2 ddp ranks when
# the global batch (data.batch_size x data-parallel ranks) is the same: the
# first k global batches are the same samples at any world size, so the
# resumed run continues the uninterrupted one's loss curve (within 1e-5
# relative: ddp averages gradients in another order than one process).
# With another global batch the position would name other samples: a clear
# error, not a silent shift.
set -eu
WEFT="$WEFT_BUILD_DIR/bin/weft"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; [ -f "$dir/out.txt" ] && cat "$dir/out.txt"; exit 1; }
cat > "$dir/c.yaml" <<YAML
seed_everything: 11
trainer: {log_every_n_steps: 1, enable_progress_bar: false, limit_train_batches: 10,
          limit_val_batches: 1, default_root_dir: $dir/runs}
model: {class: mlp, hidden: [16]}
data: {class: fashion_mnist, batch_size: 64}
optimizer: {name: sgd, lr: 0.05}
YAML
"$WEFT" fit --config "$dir/c.yaml" --trainer.name=whole --trainer.max_steps=6 >"$dir/out.txt" 2>&1 ||
	fail "the uninterrupted run failed"
"$WEFT" fit --config "$dir/c.yaml" --trainer.name=part --trainer.max_steps=3 >"$dir/out.txt" 2>&1 ||
	fail "the first part failed"
ck="$dir/runs/part/version_0/checkpoints/last"
"$WEFT" fit --config "$dir/c.yaml" --trainer.name=resumed --trainer.max_steps=6 \
	--trainer.devices=2 --trainer.strategy=ddp --data.batch_size=32 --trainer.resume="$ck" \
	>"$dir/out.txt" 2>&1 || fail "resuming on 2 ranks with the same global batch failed"
a=$(grep '^6,' "$dir/runs/whole/version_0/metrics.csv" | cut -d, -f2)
b=$(grep '^6,' "$dir/runs/resumed/version_0/metrics.csv" | cut -d, -f2)
[ -n "$a" ] && [ -n "$b" ] || fail "no step-6 loss (whole '$a', resumed '$b')"
awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-5 * a) }' ||
	fail "step 6: uninterrupted $a, resumed on 2 ranks $b"
if "$WEFT" fit --config "$dir/c.yaml" --trainer.name=bad --trainer.max_steps=6 \
	--trainer.devices=2 --trainer.strategy=ddp --trainer.resume="$ck" >"$dir/out.txt" 2>&1; then
	fail "a mid-epoch resume with another global batch was accepted"
fi
grep -q "stopped 3 batches into epoch 0 with a global batch of 64 rows; this run's is 128" \
	"$dir/out.txt" || fail "the message does not name both global batches"
echo "step 6: uninterrupted $a, resumed on 2 ranks $b"
echo "mid-epoch resume across world sizes: same curve at the same global batch, refused otherwise"
