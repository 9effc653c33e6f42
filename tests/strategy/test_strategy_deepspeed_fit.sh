#!/bin/sh
# `weft fit --deepspeed ds_config.json`: the DeepSpeed guides' config (train
# batch 64 over 4 ranks, ZeRO-2, AdamW, fp16) trains as it is on 4 CPU ranks
# of a tiny GPT, and every logged loss equals the same run written in weft's
# own YAML (zero_2, 16-mixed, adamw with those params and DeepSpeed's weight
# decay 0) within 1e-6 relative (both are the same run, so measured equal).
# The `deepspeed:` key does the same relative to the config's folder. A batch
# triple that does not fit the world is an error before any rank starts, and
# Lightning's spellings resolve in --print-config and in weft plan.
set -eu
. "$(dirname "$0")/fit_lib.sh"
common="seed_everything: 7
model: {class: gpt, n_layer: 2, n_head: 2, n_embd: 32, vocab_size: 256, block_size: 16, dropout: 0.0}
data: {class: text, paths: [$TEXT], block_size: 16, val_fraction: 0.1}"
head="trainer:
  max_steps: 6
  log_every_n_steps: 1
  enable_checkpointing: false
  enable_progress_bar: false
  limit_val_batches: 2
  val_check_interval: 6
  check_val_every_n_epoch: null
  default_root_dir: $dir/runs
  devices: 4"
cat > "$dir/ds_config.json" <<'JSON'
{"train_batch_size": 64, "gradient_accumulation_steps": 1,
 "zero_optimization": {"stage": 2, "allgather_partitions": true, "reduce_scatter": true,
                       "overlap_comm": true, "contiguous_gradients": true},
 "optimizer": {"type": "AdamW", "params": {"lr": 0.0001, "betas": [0.9, 0.999], "eps": 1e-8}},
 "fp16": {"enabled": true}}
JSON

# equal within 1e-6 relative, every value of A.csv against B.csv
close() {
	paste -d, "$dir/$1.csv" "$dir/$2.csv" | awk -F, -v a="$1" -v b="$2" '
		NR == 1 { n = NF / 2; next }
		{
			for (i = 1; i <= n; i++) {
				x = $i; y = $(i + n)
				if (x == "" && y == "") continue
				d = x - y; if (d < 0) d = -d
				s = y < 0 ? -y : y
				if (d > 1e-6 * s) { printf "%s vs %s line %d col %d: %s != %s\n", a, b, NR, i, x, y; bad = 1 }
				rows++
			}
		}
		END { if (rows < 6) { print "too few values"; bad = 1 } exit bad }' || fail "$1 differs from $2"
}

printf '%s\n%s\n' "$head" "$common" > "$dir/cfg.yaml"
fit ds --deepspeed "$dir/ds_config.json"
grep -q "16-mixed" "$dir/ds.out" || fail "the banner does not say 16-mixed"
grep -q "zero_2" "$dir/ds.out" || fail "the banner does not say zero_2"

printf '%s\n  strategy: {name: zero_2, zero_optimization: {stage: 2, overlap_comm: true, contiguous_gradients: true}}\n  precision: 16-mixed\n%s\n' \
	"$head" "$common" > "$dir/cfg.yaml"
cat >> "$dir/cfg.yaml" <<'YAML'
optimizer: {name: adamw, lr: 0.0001, betas: [0.9, 0.999], eps: 1.0e-8, weight_decay: 0.0}
YAML
sed -i 's/^data: {/data: {batch_size: 16, /' "$dir/cfg.yaml"
fit yaml
close ds yaml

# the deepspeed: key, relative to the config's folder
mkdir "$dir/sub"
cp "$dir/ds_config.json" "$dir/sub/ds.json"
printf '%s\n%s\ndeepspeed: ds.json\n' "$head" "$common" > "$dir/sub/cfg.yaml"
rm -rf "$dir/runs"
(cd / && "$WEFT" fit --config "$dir/sub/cfg.yaml" >"$dir/out.txt" 2>&1) || fail "fit with deepspeed: failed"
cp "$dir/runs/cfg/version_0/metrics.csv" "$dir/key.csv"
close key yaml

# a wrong triple: a clear error, and no rank started (no run directory)
printf '%s\n%s\n' "$head" "$common" > "$dir/cfg.yaml"
printf '{"train_batch_size": 60, "train_micro_batch_size_per_gpu": 16, "gradient_accumulation_steps": 1}\n' \
	> "$dir/bad.json"
rm -rf "$dir/runs"
if "$WEFT" fit --config "$dir/cfg.yaml" --deepspeed "$dir/bad.json" >"$dir/out.txt" 2>&1; then
	fail "a wrong batch triple trained"
fi
grep -q "train_batch_size 60, train_micro_batch_size_per_gpu 16 and gradient_accumulation_steps 1 do not fit a world of 4 ranks" \
	"$dir/out.txt" || fail "no triple message"
grep -q "starting 4 processes" "$dir/out.txt" && fail "ranks started for a wrong triple"
[ ! -d "$dir/runs" ] || fail "a run directory was made for a wrong triple"

# --print-config and weft plan resolve Lightning's spellings
for pair in deepspeed:zero_2 deepspeed_stage_1:zero_1 deepspeed_stage_3:zero_3 fsdp:zero_3 ddp_spawn:ddp; do
	"$WEFT" fit --config "$dir/cfg.yaml" --print-config --trainer.strategy="${pair%%:*}" \
		--trainer.precision=16 --trainer.accelerator=auto --data.batch_size=16 --optimizer.name=AdamW >"$dir/out.txt" 2>&1 ||
		fail "--print-config with ${pair%%:*}"
	grep -q "strategy: ${pair#*:}\$" "$dir/out.txt" || fail "${pair%%:*} did not print as ${pair#*:}"
	grep -q "precision: 16-mixed" "$dir/out.txt" || fail "precision 16 did not print as 16-mixed"
	grep -q "accelerator: cpu" "$dir/out.txt" || fail "accelerator auto did not print as cpu"
done
grep -q "runs as weft's 'ddp'" "$dir/out.txt" || fail "no info line for ddp_spawn"
"$WEFT" plan --config "$dir/cfg.yaml" --trainer.strategy=fsdp --data.batch_size=16 --optimizer.name=adamw >"$dir/out.txt" 2>&1 ||
	fail "weft plan with fsdp"
grep -q "^strategy zero_3" "$dir/out.txt" || fail "weft plan did not plan fsdp as zero_3"
"$WEFT" plan --config "$dir/cfg.yaml" --trainer.strategy=deepspeed_stage_2 --data.batch_size=16 --optimizer.name=adamw \
	>"$dir/out.txt" 2>&1 || fail "weft plan with deepspeed_stage_2"
grep -q "^strategy zero_2" "$dir/out.txt" || fail "weft plan did not plan deepspeed_stage_2 as zero_2"
"$WEFT" plan --config "$dir/cfg.yaml" --deepspeed "$dir/ds_config.json" >"$dir/out.txt" 2>&1 ||
	fail "weft plan --deepspeed"
grep -q "^strategy zero_2.*world size 4" "$dir/out.txt" || fail "weft plan --deepspeed did not plan zero_2 on 4"
echo "ok: --deepspeed equals the YAML run; triple, print-config and plan checked"
