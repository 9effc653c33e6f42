#!/bin/sh
# flash_counts_test.sh BUILD_DIR - the counts the flash attention's roofline
# estimate is built from (ctest emu_counts_flash_tile_products): under the
# CUDA emulator with EMU_COUNTS, bench_flash_step at B 1, T 80, 4 heads over
# 2 kv heads of 64, one layer:
#   - bf16 runs the tensor-core kernels, and each counts exactly the tile
#     products it issues, once per warp, each over B x 4 heads, class tc16:
#     64-row tiles at head size 64: n = ceil(80 / 64) = 2 tiles, n (n + 1)
#     / 2 = 3 tile pairs per head (causal skipping), products of 2 x 64 x
#     64 x 64 FLOPs: the forward (k_flash_mma_fwd; key tiles of 64) 2 a
#     pair (S and P V), the backward's dK/dV (k_flash_mma_bwd_dkdv) 4 and
#     dQ (k_flash_mma_bwd_dq) 3, where on the 2 diagonal pairs warp w of 4
#     issues only the 16-column chunks the causal mask leaves (dQ w + 1 of
#     4, dK/dV 4 - w: 10 of 16), so 1 + 2 x 10 / 16 pairs' worth a head;
#     the backward's dQ kernel computes D = rowsum(dO * O), so
#     k_flash_bwd_dot does not run;
#   - the forward at head size 128 (key tiles of 32): the 2 query tiles
#     see 2 and 3 key tiles, and in the first one's second tile (keys
#     32-63) warps 0 and 1 (rows 0-31) skip their products: 18 warp
#     tiles per head, each 2 products of 2 x 16 x 32 x 128 FLOPs; the
#     backward at 128 takes two passes over its 3 pairs of 64-row tiles,
#     each recomputing S and dP, and skips no chunk: dK/dV 6 products of
#     2 x 64 x 64 x 128 FLOPs a pair, dQ 5;
#   - f32 runs the scalar kernels, whose lines count no FLOPs ("-").
set -e
BUILD=$1
F=$(mktemp)
trap 'rm -f "$F"' EXIT
run() { # dtype [head size]
	# the emulated kernel library brings the emulated runtime (no preload:
	# bench_flash_step links no CUDA runtime of its own)
	EMU_COUNTS=$F WEFT_PLUGIN_PATH="$BUILD/cuda_emu/plugins" "$BUILD/bin/bench_flash_step" 1 80 \
		--layers 1 --heads 4 --kv-heads 2 --head-dim "${2:-64}" --dtype "$1" >/dev/null
}
run bf16
awk -F '\t' -v unit=$((2 * 64 * 64 * 64)) -v heads_pairs=$((1 * 4 * 3)) \
	-v bwd=$((1 * 4 * 2 * 64 * 64 * 64 * (16 + 2 * 10) / 16)) '
	$1 == "K" { got[$2] = $5; cls[$2] = $6 }
	END {
		want["k_flash_mma_fwd"] = 2 * heads_pairs * unit
		want["k_flash_mma_bwd_dkdv"] = 4 * bwd
		want["k_flash_mma_bwd_dq"] = 3 * bwd
		bad = 0
		for (k in want) {
			w = want[k]
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
run bf16 128
awk -F '\t' -v bwd=$((1 * 4 * 3 * 2 * 64 * 64 * 128)) '
	$1 == "K" { got[$2] = $5; cls[$2] = $6 }
	END {
		want["k_flash_mma_fwd"] = 4 * 18 * 2 * 2 * 16 * 32 * 128
		want["k_flash_mma_bwd_dkdv"] = 6 * bwd
		want["k_flash_mma_bwd_dq"] = 5 * bwd
		bad = 0
		for (k in want)
			if (got[k] != want[k] || cls[k] != "tc16") {
				printf "FAIL: %s at head size 128 counted %s FLOPs of class %s, want %d of tc16\n", k, got[k], cls[k], want[k]
				bad = 1
			} else
				printf "ok: %s at head size 128 counted %d FLOPs of class tc16\n", k, want[k]
		exit bad
	}' "$F"
run f32
awk -F '\t' '
	$1 == "K" && $2 ~ /^k_flash/ { n++; if ($2 ~ /_tc_|_mma_/ || $5 != 0 || $6 != "-") bad = 1 }
	END {
		if (bad || n != 4) {
			print "FAIL: f32 should run the 4 scalar kernels with no FLOPs counted"
			exit 1
		}
		print "ok: f32 runs the scalar kernels, no FLOPs counted"
	}' "$F"
