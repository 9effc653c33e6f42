#!/bin/sh
# Model plugins (weft/trainer.h, kind model): a plugin written with the
# host's ops trains exactly like the built-in model it mirrors (same names,
# shapes, initialisation and ops, so bit-identical losses and weights);
# unknown classes and bad plugin options are clear errors.
set -eu
WEFT="$WEFT_BUILD_DIR/bin/weft"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; [ -f "$dir/out.txt" ] && cat "$dir/out.txt"; exit 1; }
cat > "$dir/cfg.yaml" <<YAML
seed_everything: 3
trainer:
  max_steps: 20
  limit_val_batches: 2
  log_every_n_steps: 1
  enable_progress_bar: false
  default_root_dir: $dir/runs
model: {class: tiny_mlp, hidden: 16}
data: {class: fashion_mnist, batch_size: 32}
optimizer: {name: adamw, lr: 0.01}
plugins: {paths: ["$FIXTURE_DIR"]}
YAML
"$WEFT" fit --config "$dir/cfg.yaml" --trainer.name=plugin >"$dir/out.txt" 2>&1 || fail "plugin model fit failed"
grep -q "tiny_mlp" "$dir/out.txt" || fail "the model summary does not name the plugin's type"
"$WEFT" fit --config "$dir/cfg.yaml" --trainer.name=builtin --model='{class: mlp, hidden: [16]}' \
	>"$dir/out.txt" 2>&1 || fail "built-in mlp fit failed"
p="$dir/runs/plugin/version_0"
b="$dir/runs/builtin/version_0"
cmp "$p/metrics.csv" "$b/metrics.csv" || fail "losses differ between the plugin and the built-in mlp"
cmp "$p/checkpoints/last/model.safetensors" "$b/checkpoints/last/model.safetensors" ||
	fail "weights differ between the plugin and the built-in mlp"
[ "$(wc -l <"$p/metrics.csv")" -ge 21 ] || fail "metrics.csv has too few rows"

# weft validate loads the plugin model's checkpoint.
"$WEFT" validate --config "$dir/cfg.yaml" --ckpt "$p/checkpoints/last" >"$dir/out.txt" 2>&1 ||
	fail "validate of a plugin model failed"
grep -q "^val_acc " "$dir/out.txt" || fail "validate printed no accuracy"

# An unknown class names the built-ins (did you mean) and the plugin search.
if "$WEFT" fit --config "$dir/cfg.yaml" --model.class=mpl >"$dir/out.txt" 2>&1; then
	fail "an unknown model class was accepted"
fi
grep -q "did you mean 'mlp'" "$dir/out.txt" || fail "no did-you-mean for model.class"
grep -q "nor is it a model plugin: no model plugin named 'mpl'" "$dir/out.txt" ||
	fail "the message does not say no plugin has that name"
# A plugin's own option check, at file:line:col.
if "$WEFT" fit --config "$dir/cfg.yaml" --model.hidden=0 >"$dir/out.txt" 2>&1; then
	fail "hidden: 0 was accepted"
fi
grep -q "<command line>:1:.*'model.hidden' must be >= 1, got 0" "$dir/out.txt" ||
	fail "the plugin's option error lacks its place"
echo "model plugin trains bit-identically to the built-in mlp; errors are clear"
