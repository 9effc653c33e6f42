#!/bin/sh
# flash_counts_test.sh BUILD_DIR - the counts the flash attention's roofline
# estimate is built from (ctest emu_counts_flash_tile_products): under the
# CUDA emulator with EMU_COUNTS, bench_flash_step at B 1, T 80, 4 heads over
# 2 kv heads of 64, one layer:
#   - bf16 runs the tensor-core kernels, and each counts exactly the tile
#     products it issues, once per warp, each over B x 4 heads, class tc16:
#     the forward (k_flash_mma_fwd) 64 query rows by key tiles of 64 at
#     head size 64: n = ceil(80 / 64) = 2 query tiles, n (n + 1) / 2 = 3
#     tile pairs per head (causal skipping), 2 products a pair (S and P V)
#     of 2 x 64 x 64 x 64 FLOPs; the backward's tiles of 32: n =
#     ceil(80 / 32) = 3, 6 tile pairs, products of 2 x 32 x 32 x 64 FLOPs,
#     dK/dV 4 a pair, dQ 3;
#   - the forward at head size 128 (key tiles of 32): the 2 query tiles
#     see 2 and 3 key tiles, and in the first one's second tile (keys
#     32-63) warps 0 and 1 (rows 0-31) skip their products: 18 warp
#     tiles per head, each 2 products of 2 x 16 x 32 x 128 FLOPs;
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
awk -F '\t' -v unit=$((2 * 32 * 32 * 64)) -v heads_pairs=$((1 * 4 * 6)) \
	-v fwd_unit=$((2 * 64 * 64 * 64)) -v fwd_heads_pairs=$((1 * 4 * 3)) '
	$1 == "K" { got[$2] = $5; cls[$2] = $6 }
	END {
		want["k_flash_mma_fwd"] = 2 * fwd_heads_pairs * fwd_unit
		want["k_flash_tc_bwd_dkdv"] = 4 * heads_pairs * unit
		want["k_flash_tc_bwd_dq"] = 3 * heads_pairs * unit
		bad = 0
		for (k in want) {
			w = want[k]
			if (got[k] != w || cls[k] != "tc16") {
				printf "FAIL: %s counted %s FLOPs of class %s, want %d of tc16\n", k, got[k], cls[k], w
				bad = 1
			} else
				printf "ok: %s counted %d FLOPs of class tc16\n", k, w
		}
		exit bad
	}' "$F"
run bf16 128
awk -F '\t' -v want=$((4 * 18 * 2 * 2 * 16 * 32 * 128)) '
	$1 == "K" && $2 == "k_flash_mma_fwd" { got = $5; cls = $6 }
	END {
		if (got != want || cls != "tc16") {
			printf "FAIL: k_flash_mma_fwd at head size 128 counted %s FLOPs of class %s, want %d of tc16\n", got, cls, want
			exit 1
		}
		printf "ok: k_flash_mma_fwd at head size 128 counted %d FLOPs of class tc16\n", want
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
