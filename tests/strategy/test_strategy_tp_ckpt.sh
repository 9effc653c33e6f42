#!/bin/sh
# Checkpoints of `weft fit` under strategy tp: a tp 2 run saves the whole
# model (model.safetensors) and its AdamW state in the whole model's flat
# coordinates (optimizer.bin), and the save resumes at tp 2, at tp 4 and
# without tensor parallelism (strategy single) on the loss curve of the
# uninterrupted run.
#
# Tolerances. The runs differ from the one-process run only in the order
# of float32 sums inside the split matmuls (measured: losses ~5e-8
# relative, optimizer slots 6e-8 absolute against a largest entry of 0.1),
# so:
#   - optimizer.bin of the tp 2 save against the one-process save at the
#     same step: every element within 1e-5 of its slot's largest |value|
#     (a slot in shard coordinates, or a shard written at the wrong place,
#     misses by the size of the values themselves);
#   - every train and val loss of a resumed run against the uninterrupted
#     run's at the same step within 1e-5 relative.
# Also: dp 2 x tp 2 saves (4 ranks write their ranges of one file), with
# dp_strategy zero_1 too (saved, resumed under it and without tp), and
# vocabulary parallelism (wte split by rows) saves and resumes the same way.
#
# With the argument `llama`: the llama3-tiny preset at odd shapes (6 heads,
# one key/value head shared by every tp rank, SwiGLU of 42, an untied head
# split by vocabulary rows): a tp 2 save holds the whole tensors and the
# whole model's optimizer state (against the one-process save), and
# resumes without tp and at tp 3 on the uninterrupted run's curve. SGD
# with momentum there (its state is linear in the gradients: measured
# 1.4e-7 of the largest entry): AdamW's first update is lr * sign(g), and
# an element whose gradient is zero up to rounding flips (measured 7e-5
# relative in its first moment after 4 steps, the same with and without
# the vocabulary split), which says nothing about where the state lies.
set -eu
. "$(dirname "$0")/fit_lib.sh"
MODEL="{class: gpt, n_layer: 2, n_head: 4, n_embd: 32, vocab_size: 256, block_size: 16, dropout: 0.0}"
BLOCK=16
if [ "${1:-}" = llama ]; then
	MODEL="{preset: llama3-tiny, n_layer: 2, n_head: 6, n_kv_head: 1, n_embd: 48, intermediate_size: 42, vocab_size: 258, block_size: 12, dropout: 0.0}"
	BLOCK=12
fi
cat > "$dir/cfg.yaml" <<YAML
seed_everything: 7
trainer:
  max_steps: 8
  log_every_n_steps: 1
  enable_progress_bar: false
  limit_val_batches: 2
  val_check_interval: 4
  check_val_every_n_epoch: null
  default_root_dir: $dir/runs
model: $MODEL
data: {class: text, paths: [$TEXT], block_size: $BLOCK, batch_size: 4, val_fraction: 0.1}
optimizer: {name: adamw, lr: 0.01, weight_decay: 0.1}
YAML

# fit NAME ARGS...: a fresh run (fit_lib.sh) that must leave a checkpoint
fit() {
	fit_run "$@"
	[ -d "$dir/$1.ckpt" ] || fail "no checkpoint for $1"
}

# resume NAME CKPT ARGS...: resumes CKPT to step 8; metrics at $dir/NAME.csv
resume() {
	name=$1
	ckpt=$2
	shift 2
	rm -rf "$dir/runs"
	"$WEFT" fit --config "$dir/cfg.yaml" --trainer.resume="$dir/$ckpt.ckpt" "$@" \
		>"$dir/out.txt" 2>&1 || fail "resume $name failed"
	grep -q "at step 4" "$dir/out.txt" || fail "$name did not resume at step 4"
	cp "$dir/runs/cfg/version_0/metrics.csv" "$dir/$name.csv" || fail "no metrics for $name"
}

# same_curve A REF: every loss of A (train_loss, val_loss by step) within
# 1e-5 relative of REF's at the same step; at least 4 train losses
same_curve() {
	awk -F, -v a="$1" '
		FNR == 1 { for (i = 1; i <= NF; i++) col[FILENAME, $i] = i; next }
		FILENAME == ref {
			t = $col[ref, "train_loss"]; v = $col[ref, "val_loss"]
			if (t != "") tr[$1] = t
			if (v != "") va[$1] = v
			next
		}
		{
			t = $col[FILENAME, "train_loss"]; v = $col[FILENAME, "val_loss"]
			if (t != "") { check($1, t, tr[$1], "train_loss"); n++ }
			if (v != "") check($1, v, va[$1], "val_loss")
		}
		function check(step, x, y, what,   d, s) {
			if (y == "") { printf "%s: step %s has no reference %s\n", a, step, what; bad = 1; return }
			d = x - y; if (d < 0) d = -d
			s = y < 0 ? -y : y
			if (d > 1e-5 * s) { printf "%s step %s %s: %s != %s\n", a, step, what, x, y; bad = 1 }
		}
		END { if (n < 4) { print a ": too few train losses"; bad = 1 } exit bad }
	' ref="$dir/$2.csv" "$dir/$2.csv" "$dir/$1.csv" || fail "$1 is off the curve of $2"
}

# same_state A B: optimizer.bin of two saves, each element within 1e-5 of
# its slot's largest |value| (2 slots: AdamW; SGD's one slot is taken as two
# halves, each against its own largest |value|)
same_state() {
	[ "$(wc -c <"$dir/$1.ckpt/optimizer.bin")" = "$(wc -c <"$dir/$2.ckpt/optimizer.bin")" ] ||
		fail "optimizer.bin of $1 and $2 differ in size"
	od -An -v -f -w4 "$dir/$1.ckpt/optimizer.bin" >"$dir/a.txt"
	od -An -v -f -w4 "$dir/$2.ckpt/optimizer.bin" >"$dir/b.txt"
	paste "$dir/a.txt" "$dir/b.txt" | awk -v a="$1" -v b="$2" '
		{ x[NR] = $1; y[NR] = $2 }
		END {
			half = NR / 2
			for (i = 1; i <= NR; i++) {
				k = i > half; v = y[i] < 0 ? -y[i] : y[i]
				if (v > m[k]) m[k] = v
			}
			for (i = 1; i <= NR; i++) {
				k = i > half; d = x[i] - y[i]; if (d < 0) d = -d
				if (d > 1e-5 * m[k]) { printf "%s vs %s: element %d: %s != %s\n", a, b, i, x[i], y[i]; bad++ }
				if (bad > 5) break
			}
			if (NR < 1000 || m[0] <= 0 || m[1] <= 0) { print "empty optimizer state"; bad = 1 }
			exit bad > 0
		}' || fail "optimizer state of $1 differs from $2"
}

TP2="--trainer.devices=2 --trainer.strategy.name=tp --trainer.strategy.size=2"
TP4="--trainer.devices=4 --trainer.strategy.name=tp --trainer.strategy.size=4"

if [ "${1:-}" = llama ]; then
	TP3="--trainer.devices=3 --trainer.strategy.name=tp --trainer.strategy.size=3"
	SGD="--optimizer.name=sgd --optimizer.lr=0.05 --optimizer.momentum=0.9 --optimizer.weight_decay=0.01"
	# shellcheck disable=SC2086
	fit ref --trainer.strategy=single $SGD
	# shellcheck disable=SC2086
	fit single4 --trainer.strategy=single --trainer.max_steps=4 $SGD
	# shellcheck disable=SC2086
	fit tp2 $TP2 --trainer.strategy.vocab_parallel=true --trainer.max_steps=4 $SGD
	same_state tp2 single4
	# shellcheck disable=SC2086
	resume tp2_at_single tp2 --trainer.strategy=single $SGD
	same_curve tp2_at_single ref
	# shellcheck disable=SC2086
	resume tp2_at_tp3 tp2 $TP3 --trainer.strategy.sequence_parallel=true $SGD
	same_curve tp2_at_tp3 ref
	echo "ok"
	exit 0
fi

fit ref --trainer.strategy=single
fit single4 --trainer.strategy=single --trainer.max_steps=4
# shellcheck disable=SC2086
fit tp2 $TP2 --trainer.max_steps=4
grep -q '"numel": 34176' "$dir/tp2.ckpt/trainer_state.json" || fail "tp 2 saved shard numel"
same_state tp2 single4

# shellcheck disable=SC2086
resume tp2_at_tp2 tp2 $TP2
same_curve tp2_at_tp2 ref
# shellcheck disable=SC2086
resume tp2_at_tp4 tp2 $TP4
same_curve tp2_at_tp4 ref
resume tp2_at_single tp2 --trainer.strategy=single
same_curve tp2_at_single ref
# the other way: a whole save resumes split
# shellcheck disable=SC2086
resume single_at_tp2 single4 $TP2 --trainer.strategy.sequence_parallel=true
same_curve single_at_tp2 ref

# vocabulary parallelism: wte saved whole, its state at whole coordinates
# shellcheck disable=SC2086
fit tp2v $TP2 --trainer.strategy.vocab_parallel=true --trainer.max_steps=4
same_state tp2v single4
resume tp2v_at_single tp2v --trainer.strategy=single
same_curve tp2v_at_single ref
# shellcheck disable=SC2086
resume tp2_at_tp4v tp2 $TP4 --trainer.strategy.vocab_parallel=true
same_curve tp2_at_tp4v ref

# dp 2 x tp 2: 4 ranks write one file; its state is the one-process
# state of the same global batch (8 rows)
fit single4b8 --trainer.strategy=single --trainer.max_steps=4 --data.batch_size=8
fit dp2tp2 --trainer.devices=4 --trainer.strategy.name=tp --trainer.strategy.size=2 \
	--trainer.max_steps=4
same_state dp2tp2 single4b8
# zero_1 over dp: each of the 4 ranks writes its slice of its shard
fit dp2tp2z --trainer.devices=4 --trainer.strategy.name=tp --trainer.strategy.size=2 \
	--trainer.strategy.dp_strategy=zero_1 --trainer.max_steps=4
same_state dp2tp2z single4b8
fit ref8 --trainer.strategy=single --data.batch_size=8
resume dp2tp2z_at_dp2tp2z dp2tp2z --trainer.devices=4 --trainer.strategy.name=tp \
	--trainer.strategy.size=2 --trainer.strategy.dp_strategy=zero_1
same_curve dp2tp2z_at_dp2tp2z ref8
resume dp2tp2z_at_single dp2tp2z --trainer.strategy=single --data.batch_size=8
same_curve dp2tp2z_at_single ref8
echo "ok"
