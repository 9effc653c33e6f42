#!/bin/sh
# `weft fit` with strategy tp: the trainer builds the split model through the
# strategy's plan and splits the data over the dp coordinate. Against the
# one-process run of the same global batch (8 steps of SGD on a 2-layer
# GPT, fortune texts), every step's train loss and the final val loss
# within 1e-5 relative (only the order of float32 sums differs; measured
# ~5e-8) for tp 2 with sequence parallelism and for dp 2 x tp 2, and with
# vocabulary parallelism at tp 2 and dp 2 x tp 2 (with SP), and with the
# optimizer state sharded over dp (dp_strategy zero_1, its bytes measured).
# Also: the
# rank layout is printed, a size that does not divide the world and a head
# count, n_embd or (vocab_parallel) vocab_size not divisible by the size are
# config errors naming both numbers. Checkpoints: test_strategy_tp_ckpt.sh.
set -eu
. "$(dirname "$0")/fit_lib.sh"
cat > "$dir/cfg.yaml" <<YAML
seed_everything: 7
trainer:
  max_steps: 8
  log_every_n_steps: 1
  enable_checkpointing: false
  enable_progress_bar: false
  limit_val_batches: 2
  val_check_interval: 8
  check_val_every_n_epoch: null
  default_root_dir: $dir/runs
model: {class: gpt, n_layer: 2, n_head: 4, n_embd: 32, vocab_size: 256, block_size: 16, dropout: 0.0}
data: {class: text, paths: [$TEXT], block_size: 16, batch_size: 4, val_fraction: 0.1}
optimizer: {name: sgd, lr: 0.05, momentum: 0.9}
YAML


# optim NAME: peak optimizer-state bytes of rank 0 (summary.json)
optim() {
	# the first "optim": the bytes of peak_bytes (peak_rank follows)
	sed -n 's/.*"optim": \([0-9]*\).*/\1/p' "$dir/$1.json" | head -n 1
}


fit single --trainer.strategy=single
fit tp2sp --trainer.devices=2 --trainer.strategy.name=tp --trainer.strategy.size=2 \
	--trainer.strategy.sequence_parallel=true
same tp2sp single
grep -q "strategy tp: mesh dp 1 x tp 2 over 2 ranks" "$dir/tp2sp.out" || fail "no layout line"
grep -q "dp 0: tp group ranks \[0 1\]" "$dir/tp2sp.out" || fail "no tp group line"

fit single8 --trainer.strategy=single --data.batch_size=8
fit dp2tp2 --trainer.devices=4 --trainer.strategy.name=tp --trainer.strategy.size=2
same dp2tp2 single8
grep -q "dp 1: tp group ranks \[2 3\]" "$dir/dp2tp2.out" || fail "no dp 1 layout line"

# vocabulary parallelism: wte split by rows, vocab-parallel logits and loss
fit tp2v --trainer.devices=2 --trainer.strategy.name=tp --trainer.strategy.size=2 \
	--trainer.strategy.vocab_parallel=true
same tp2v single
grep -q "tp 2 over 2 ranks.*vocabulary parallel" "$dir/tp2v.out" || fail "no vocab layout line"
fit dp2tp2vsp --trainer.devices=4 --trainer.strategy.name=tp --trainer.strategy.size=2 \
	--trainer.strategy.vocab_parallel=true --trainer.strategy.sequence_parallel=true
same dp2tp2vsp single8

# dp_strategy zero_1: optimizer state sharded over the 2 dp replicas of
# each tp shard. Same curve (and, clipping, the same global grad norm) as
# one process; rank 0's optimizer bytes exactly half of dp2tp2's (the
# shard's 21664 elements split in two), and with vocab_parallel within 5%
# of 1/(tp*dp) of the whole model's (only layernorms, row-parallel biases
# and wpe stay whole in a tp shard: measured 35136 bytes against 34176)
fit dp2tp2z --trainer.devices=4 --trainer.strategy.name=tp --trainer.strategy.size=2 \
	--trainer.strategy.dp_strategy=zero_1
same dp2tp2z single8
grep -q "optimizer state sharded over dp (zero_1)" "$dir/dp2tp2z.out" || fail "no zero_1 layout"
[ "$(optim dp2tp2z)" -gt 0 ] && [ "$(($(optim dp2tp2z) * 2))" -eq "$(optim dp2tp2)" ] ||
	fail "zero_1 optimizer bytes $(optim dp2tp2z), ddp $(optim dp2tp2): not half"
fit single8c --trainer.strategy=single --data.batch_size=8 --trainer.gradient_clip_val=0.5
fit dp2tp2zv --trainer.devices=4 --trainer.strategy.name=tp --trainer.strategy.size=2 \
	--trainer.strategy.dp_strategy=zero_1 --trainer.strategy.vocab_parallel=true \
	--trainer.strategy.sequence_parallel=true --trainer.gradient_clip_val=0.5
same dp2tp2zv single8c
whole=$(optim single8)
[ "$(($(optim dp2tp2zv) * 4))" -le "$((whole * 105 / 100))" ] ||
	fail "zero_1 + vocab_parallel: $(optim dp2tp2zv) optimizer bytes per rank, whole $whole"
echo "optimizer bytes per rank: whole $whole, dp2tp2 $(optim dp2tp2), zero_1 $(optim dp2tp2z)," \
	"zero_1 + vocab_parallel $(optim dp2tp2zv)"

# errors
if "$WEFT" fit --config "$dir/cfg.yaml" --trainer.devices=2 --trainer.strategy.name=tp \
	--trainer.strategy.size=3 >"$dir/out.txt" 2>&1; then fail "size 3 of 2 ranks accepted"; fi
grep -q "size 3 does not divide the world size 2" "$dir/out.txt" || fail "size message"
if "$WEFT" fit --config "$dir/cfg.yaml" --trainer.devices=2 --trainer.strategy.name=tp \
	--trainer.strategy.size=2 --model.n_head=3 --model.n_embd=30 >"$dir/out.txt" 2>&1; then
	fail "n_head 3 at tp 2 accepted"
fi
grep -q "n_head 3 is not divisible by the tensor-parallel size 2" "$dir/out.txt" || fail "n_head message"
if "$WEFT" fit --config "$dir/cfg.yaml" --trainer.devices=2 --trainer.strategy.name=tp \
	--trainer.strategy.size=2 --model.n_head=3 --model.n_embd=33 >"$dir/out.txt" 2>&1; then
	fail "n_embd 33 at tp 2 accepted"
fi
grep -q "n_embd 33 is not divisible by the tensor-parallel size 2" "$dir/out.txt" || fail "n_embd message"
if "$WEFT" fit --config "$dir/cfg.yaml" --trainer.devices=2 --trainer.strategy.name=tp \
	--trainer.strategy.size=2 --trainer.strategy.dp_strategy=zero_2 >"$dir/out.txt" 2>&1; then
	fail "dp_strategy zero_2 accepted"
fi
grep -q "dp_strategy 'zero_2' is not one of ddp" "$dir/out.txt" || fail "dp_strategy message"
grep -q "zero_1 (optimizer state sharded" "$dir/out.txt" || fail "dp_strategy advice"
if "$WEFT" fit --config "$dir/cfg.yaml" --trainer.devices=2 --trainer.strategy.name=tp \
	--trainer.strategy.size=2 --trainer.strategy.vocab_parallel=true --model.vocab_size=255 \
	>"$dir/out.txt" 2>&1; then
	fail "vocab_size 255 at tp 2 with vocab_parallel accepted"
fi
grep -q "vocab_size 255 is not divisible by the tensor-parallel size 2" "$dir/out.txt" ||
	fail "vocab_size message"
grep -q "pad vocab_size to a multiple of 2 (256)" "$dir/out.txt" || fail "vocab_size advice"
echo "ok"
