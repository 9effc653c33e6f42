#!/bin/sh
# The bf16 weight copy in the emulator's counts (EMU_COUNTS, as
# bench/roofline/run takes them): one bf16-mixed step of bench_gpt
# --shape gpt-tiny (2 blocks, a tied head; 16-bit activations, CUDA's
# default) on the CUDA emulator, once reading the copy (--weight-copy
# true, as the trainer) and once rounding each weight in the forward
# (false). The forward (marks "step begin" to "forward end") of the copy
# run launches exactly 9 fewer k_convert kernels: the 4 linear weights of
# each block and the head's, every weight a product reads, none rounded
# any more; the whole step (to "step end") 8 fewer, the optimizer's one
# conversion of the flat buffer into the copy being the one added back.
# (What the copy run's forward still converts is no weight: the embeddings'
# F32 sum cast to bf16, and the F32 bias of each biased product, which the
# cuBLASLt path rounds for its epilogue: measured 9 launches of the 18.)
#   weight_copy_counts.sh BENCH_GPT   (with the emulator's environment)
set -eu
BENCH=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

run() { # name true|false
	EMU_COUNTS="$dir/$1.counts" "$BENCH" --shape gpt-tiny --device cuda --precision bf16-mixed \
		--optimizer sgd --batch 2 --context 16 --warmup 0 --steps 1 --no-yardstick \
		--weight-copy "$2" >"$dir/$1.out" 2>&1 || {
		cat "$dir/$1.out"
		echo "FAIL: bench_gpt --weight-copy $2 failed"
		exit 1
	}
}

# k_convert launches between two marks of a counts file
converts() {
	awk -F'\t' -v from="$2" -v to="$3" '
		$1 == "M" { if ($2 == from) on = 1; else if ($2 == to) on = 0; next }
		on && $1 == "K" && $2 ~ /k_convert/ { n++ }
		END { print n + 0 }' "$1"
}

run copy true
run round false
grep -q "weight copy BF16" "$dir/copy.out" || { cat "$dir/copy.out"; echo "FAIL: no copy"; exit 1; }
grep -q "weight copy none" "$dir/round.out" || { cat "$dir/round.out"; echo "FAIL: a copy"; exit 1; }
fc=$(converts "$dir/copy.counts" "step begin" "forward end")
fr=$(converts "$dir/round.counts" "step begin" "forward end")
sc=$(converts "$dir/copy.counts" "step begin" "step end")
sr=$(converts "$dir/round.counts" "step begin" "step end")
echo "k_convert launches: forward $fr rounding, $fc with the copy; step $sr rounding, $sc with the copy"
[ $((fr - fc)) -eq 9 ] || { echo "FAIL: the forward's weight conversions: $fr - $fc, not 9"; exit 1; }
[ $((sr - sc)) -eq 8 ] || { echo "FAIL: the step's conversions: $sr - $sc, not 8"; exit 1; }
echo ok
