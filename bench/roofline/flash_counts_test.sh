#!/bin/sh
# flash_counts_test.sh BUILD_DIR - the counts the flash attention's roofline
# estimate is built from (ctest emu_counts_flash_tile_products): under the
# CUDA emulator with EMU_COUNTS, bench_flash_step at B 1, T 80, 4 heads over
# 2 kv heads of 64, one layer:
#   - bf16 runs the tensor-core kernels, and each counts exactly the tile
#     products it issues, once per warp: with R-row tiles, n = ceil(80 / R)
#     tiles and n (n + 1) / 2 tile pairs per head (causal skipping), an
#     R x R x 64 product 2 x R x R x 64 FLOPs; the forward (R = 32) 2
#     products a pair, the backward's dK/dV (R = 64, n = 2: 3 pairs) 4 and
#     dQ 3, each over B x 4 heads, class tc16; the backward's dQ kernel
#     computes D = rowsum(dO * O), so k_flash_bwd_dot does not run;
#   - f32 runs the scalar kernels, whose lines count no FLOPs ("-").
set -e
BUILD=$1
F=$(mktemp)
trap 'rm -f "$F"' EXIT
run() {
	# the emulated kernel library brings the emulated runtime (no preload:
	# bench_flash_step links no CUDA runtime of its own)
	EMU_COUNTS=$F WEFT_PLUGIN_PATH="$BUILD/cuda_emu/plugins" "$BUILD/bin/bench_flash_step" 1 80 \
		--layers 1 --heads 4 --kv-heads 2 --head-dim 64 --dtype "$1" >/dev/null
}
run bf16
awk -F '\t' -v T=80 -v BH=$((1 * 4)) -v hs=64 '
	$1 == "K" { got[$2] = $5; cls[$2] = $6 }
	END {
		want["k_flash_tc_fwd"] = 2; rows["k_flash_tc_fwd"] = 32
		want["k_flash_mma_bwd_dkdv"] = 4; rows["k_flash_mma_bwd_dkdv"] = 64
		want["k_flash_mma_bwd_dq"] = 3; rows["k_flash_mma_bwd_dq"] = 64
		bad = 0
		for (k in want) {
			R = rows[k]; n = int((T + R - 1) / R)
			w = want[k] * BH * n * (n + 1) / 2 * 2 * R * R * hs
			if (got[k] != w || cls[k] != "tc16") {
				printf "FAIL: %s counted %s FLOPs of class %s, want %d of tc16\n", k, got[k], cls[k], w
				bad = 1
			} else
				printf "ok: %s counted %d FLOPs of class tc16\n", k, w
		}
		if ("k_flash_bwd_dot" in got) {
			print "FAIL: bf16 ran k_flash_bwd_dot; the dQ kernel computes D"
			bad = 1
		}
		exit bad
	}' "$F"
run f32
awk -F '\t' '
	$1 == "K" && $2 ~ /^k_flash/ { n++; if ($2 ~ /_tc_/ || $5 != 0 || $6 != "-") bad = 1 }
	END {
		if (bad || n != 4) {
			print "FAIL: f32 should run the 4 scalar kernels with no FLOPs counted"
			exit 1
		}
		print "ok: f32 runs the scalar kernels, no FLOPs counted"
	}' "$F"
