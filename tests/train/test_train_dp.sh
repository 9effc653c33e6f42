#!/bin/sh
# `weft fit` with strategy dp: one process drives trainer.devices model
# replicas (threads on the CPU) without relaunching, and trains as the
# single-device run of the same global batch does: train_loss at each of 20
# steps within 1e-5 relative (plain SGD; the replicas sum their gradient
# slices in another order, so bit equality is not expected — measured
# differences are ~1e-7). trainer.threads (per process) is shared by the
# replicas: each drives its kernels with threads / devices of them.
set -eu
WEFT="$WEFT_BUILD_DIR/bin/weft"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; [ -f "$dir/out.txt" ] && cat "$dir/out.txt"; exit 1; }
cat > "$dir/c.yaml" <<YAML
seed_everything: 5
trainer: {max_steps: 20, log_every_n_steps: 1, enable_progress_bar: false,
          limit_val_batches: 2, enable_checkpointing: false, default_root_dir: $dir/runs}
model: {class: mlp, hidden: [32]}
data: {class: fashion_mnist, batch_size: 64}
optimizer: {name: sgd, lr: 0.05}
YAML
"$WEFT" fit --config "$dir/c.yaml" --trainer.name=single >"$dir/out.txt" 2>&1 || fail "single failed"
for n in 2 4; do
	"$WEFT" fit --config "$dir/c.yaml" --trainer.name=dp$n --trainer.devices=$n \
		--trainer.strategy=dp --trainer.threads=4 >"$dir/out.txt" 2>&1 ||
		fail "dp on $n devices failed"
	grep -q "strategy=dp" "$dir/out.txt" || fail "the banner does not show strategy dp"
	# trainer.threads is per process: the replicas share it
	grep -q "threads per device: $((4 / n))\$" "$dir/out.txt" ||
		fail "dp on $n devices with trainer.threads=4 does not give each $((4 / n)) kernel threads"
	grep -q "weft launch\|launcher" "$dir/out.txt" && fail "dp relaunched through the launcher"
	cut -d, -f2 "$dir/runs/single/version_0/metrics.csv" | sed -n '2,21p' >"$dir/a"
	cut -d, -f2 "$dir/runs/dp$n/version_0/metrics.csv" | sed -n '2,21p' >"$dir/b"
	[ "$(wc -l <"$dir/b")" -eq 20 ] || fail "dp$n logged $(wc -l <"$dir/b") steps, expected 20"
	paste -d' ' "$dir/a" "$dir/b" | awk -v n=$n '
		{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1);
		  if (r > 1e-5) { printf "step %d: single %s, dp%d %s (rel %g)\n", NR, $1, n, $2, r; bad = 1 } }
		END { exit bad }' || fail "dp on $n devices differs from one device"
done
echo "dp on 2 and 4 devices trains as one device does (20 steps within 1e-5)"
