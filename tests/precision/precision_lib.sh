# precision_lib.sh - what the mixed-precision `weft fit` tests share;
# sourced after `set -eu`. Brings in tests/strategy/fit_lib.sh (WEFT, TEXT,
# $dir, fail, fit NAME ARGS...) and writes $dir/cfg.yaml: a 2-layer GPT on
# fortune texts, SGD with momentum (not scale-invariant like Adam, so a
# loss scale left in the gradients would show), clipping at 1.0 (so
# metrics.csv has grad_norm: the unscaled norm is compared too), 20 steps.
# Adds:
#   col NAME COLUMN        the values of COLUMN in $dir/NAME.csv, one a line
#   close A B COLUMN TOL   every row of COLUMN in A.csv and B.csv within TOL
#                          relative to A's value (rows where both are empty
#                          are skipped; at least 10 rows compared); prints
#                          the largest relative difference
#   differs A B COLUMN MIN some row differs by more than MIN relative
#   total NAME KEY         a number of summary.json's totals
. "$(dirname "$0")/../strategy/fit_lib.sh"

cat > "$dir/cfg.yaml" <<YAML
seed_everything: 7
trainer:
  max_steps: 20
  log_every_n_steps: 1
  enable_progress_bar: false
  limit_val_batches: 0
  gradient_clip_val: 1.0
  default_root_dir: $dir/runs
model: {class: gpt, n_layer: 2, n_head: 4, n_embd: 32, vocab_size: 256, block_size: 16, dropout: 0.0}
data: {class: text, paths: [$TEXT], block_size: 16, batch_size: 8, val_fraction: 0.1}
optimizer: {name: sgd, lr: 0.1, momentum: 0.9}
YAML

col() {
	awk -F, -v c="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next }
		k { print $k }' "$dir/$1.csv"
}

close() {
	col "$1" "$3" > "$dir/close_a"
	col "$2" "$3" > "$dir/close_b"
	paste -d, "$dir/close_a" "$dir/close_b" | awk -F, -v tol="$4" -v what="$1 vs $2 $3" '
		$1 == "" && $2 == "" { next }
		{
			d = $1 - $2; if (d < 0) d = -d
			s = $1 < 0 ? -$1 : $1
			r = s > 0 ? d / s : d
			if (r > m) m = r
			if (r > tol) { printf "%s row %d: %s vs %s (relative %.3g > %g)\n", what, NR, $1, $2, r, tol; bad = 1 }
			rows++
		}
		END {
			if (rows < 10) { printf "%s: only %d rows\n", what, rows; bad = 1 }
			printf "%s: max relative difference %.3g (tolerance %g)\n", what, m, tol
			exit bad }' || fail "$1 and $2 differ in $3"
}

differs() {
	col "$1" "$3" > "$dir/close_a"
	col "$2" "$3" > "$dir/close_b"
	paste -d, "$dir/close_a" "$dir/close_b" | awk -F, -v min="$4" '
		$1 == "" || $2 == "" { next }
		{ d = $1 - $2; if (d < 0) d = -d; s = $1 < 0 ? -$1 : $1; if (d > min * s) found = 1 }
		END { exit !found }' || fail "$1 and $2 give the same $3 (within $4): was the precision applied?"
}

total() {
	sed -n "s/.*\"$2\": \([-0-9.e+]*\).*/\1/p" "$dir/$1.json"
}
