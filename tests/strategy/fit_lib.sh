# fit_lib.sh - what the `weft fit` strategy tests share; sourced after
# `set -eu`. Sets WEFT, TEXT (a Debian text corpus; exits 77 — ctest's skip
# — when fortunes-min is absent), a scratch $dir removed on exit, and:
#   fail MSG...        prints MSG and the last run's output, exits 1
#   fit NAME ARGS...   (= fit_run, which a script may wrap) a fresh `weft fit --config $dir/cfg.yaml ARGS`; leaves
#                      $dir/NAME.csv (metrics), .json (summary), .out (output)
#                      and .ckpt (the last checkpoint, when one was saved)
#   same A B           every number of A.csv and B.csv within 1e-5 relative
#                      (only the order of float32 sums may differ)
WEFT="$WEFT_BUILD_DIR/bin/weft"
TEXT=/usr/share/games/fortunes/fortunes
if [ ! -r "$TEXT" ]; then
	echo "skip: $TEXT not installed (fortunes-min)"
	exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

fail() {
	echo "FAIL: $*"
	[ -f "$dir/out.txt" ] && cat "$dir/out.txt"
	exit 1
}

fit_run() {
	name=$1
	shift
	rm -rf "$dir/runs" "$dir/$name.ckpt"
	"$WEFT" fit --config "$dir/cfg.yaml" "$@" >"$dir/out.txt" 2>&1 || fail "fit $name failed"
	cp "$dir/runs/cfg/version_0/metrics.csv" "$dir/$name.csv" || fail "no metrics for $name"
	cp "$dir/runs/cfg/version_0/summary.json" "$dir/$name.json" || fail "no summary for $name"
	cp "$dir/out.txt" "$dir/$name.out"
	if [ -d "$dir/runs/cfg/version_0/checkpoints/last" ]; then
		cp -r "$dir/runs/cfg/version_0/checkpoints/last" "$dir/$name.ckpt"
	fi
}

fit() {
	fit_run "$@"
}

same() {
	paste -d, "$dir/$1.csv" "$dir/$2.csv" | awk -F, -v a="$1" -v b="$2" '
		NR == 1 { n = NF / 2; next }
		{
			for (i = 1; i <= n; i++) {
				x = $i; y = $(i + n)
				if (x == "" && y == "") continue
				d = x - y; if (d < 0) d = -d
				s = y < 0 ? -y : y
				if (d > 1e-5 * s) { printf "%s vs %s line %d col %d: %s != %s\n", a, b, NR, i, x, y; bad = 1 }
				rows++
			}
		}
		END { if (rows < 9) { print "too few values"; bad = 1 } exit bad }' || fail "$1 differs from $2"
}
