#!/bin/sh
# SDK install test: installs this build into a temporary prefix, builds
# examples/plugins against that prefix alone (with CMake's find_package and
# with pkg-config), and trains a tiny GPT on 2 ranks with each example
# plugin through the installed `weft fit`:
#   - local_sgd with k: 1 and plain SGD matches ddp within 1e-5 per weight
#     (averaging the parameters after each local SGD step is ddp's step up
#     to float rounding: 5e-7 measured), while k: 2 does not (3e-4
#     measured), so the comparison can fail;
#   - heavyball trains (loss falls) and differs from plain SGD;
#   - counting wraps gloo without changing a single weight, and its byte
#     count of all_reduce equals steps x (4 x parameters + 16) on both ranks
#     (ddp all-reduces every float32 gradient once per step, plus the
#     loss and row count as two doubles).
# Then the prefix is moved and the moved weft still finds its plugins.
# usage: install_test.sh BUILD_DIR SOURCE_DIR LIBDIR SDK_CLOSE
set -eu
BUILD=$1 SRC=$2 LIBDIR=$3 CLOSE=$4
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-sdk-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
STEPS=4

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# 1. install, and the files third parties rely on
cmake --install "$BUILD" --prefix "$prefix" > "$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log" >&2; fail "cmake --install $BUILD --prefix $prefix"; }
for f in bin/weft "$LIBDIR/libweft.so" include/weft/plugin.h include/weft/strategy.h \
	include/weft/optim.h include/weft/comm.h "$LIBDIR/cmake/weft/weftConfig.cmake" \
	"$LIBDIR/cmake/weft/weftConfigVersion.cmake" "$LIBDIR/pkgconfig/weft.pc" \
	"$LIBDIR/weft/plugins/comm_gloo.so" "$LIBDIR/weft/plugins/strategy_replicated.so" \
	"$LIBDIR/weft/plugins/optim_builtin.so"; do
	[ -e "$prefix/$f" ] || fail "the install lacks $f"
done
echo "ok: installed into $prefix"

# 2. the examples, built against the prefix only
cmake -S "$SRC/examples/plugins" -B "$tmp/build-cmake" -DCMAKE_PREFIX_PATH="$prefix" \
	-DCMAKE_C_FLAGS=-Werror > "$tmp/cmake.log" 2>&1 &&
	cmake --build "$tmp/build-cmake" >> "$tmp/cmake.log" 2>&1 ||
	{ cat "$tmp/cmake.log" >&2; fail "CMake build of examples/plugins against $prefix"; }
grep -q "plugin ABI" "$tmp/cmake.log" || fail "find_package(weft) did not report the ABI"
mkdir -p "$tmp/build-pc"
PKG_CONFIG_PATH="$prefix/$LIBDIR/pkgconfig" make -C "$SRC/examples/plugins" \
	OUT="$tmp/build-pc" CFLAGS="-O2 -Werror" > "$tmp/make.log" 2>&1 ||
	{ cat "$tmp/make.log" >&2; fail "pkg-config build of examples/plugins against $prefix"; }
for p in local_sgd heavyball counting; do
	[ -f "$tmp/build-cmake/$p.so" ] || fail "CMake did not build $p.so"
	[ -f "$tmp/build-pc/$p.so" ] || fail "make did not build $p.so"
done
echo "ok: examples/plugins built with CMake and with pkg-config"

# 3. 2-rank trainings with the installed CLI
awk 'BEGIN { for (i = 0; i < 60; i++)
	printf "the quick brown fox %d jumps over the lazy dog; weft trains tiny models.\n", i }' \
	> "$tmp/corpus.txt"
cat > "$tmp/tiny.yaml" <<YAML
seed_everything: 7
trainer:
  devices: 2
  strategy: ddp
  max_steps: $STEPS
  enable_progress_bar: false
  log_every_n_steps: 1
  num_sanity_val_steps: 0  # the count below is of training's collectives only
  default_root_dir: $tmp/runs
  threads: 1
model: {class: gpt, n_layer: 1, n_head: 2, n_embd: 16, block_size: 16, vocab_size: 256}
data: {class: text, paths: [corpus.txt], block_size: 16, batch_size: 4, sampling: sequential,
       num_workers: 0}
optimizer: {name: sgd, lr: 0.1}
YAML

# fit NAME ARGS...: trains as run NAME; its weights end up in $tmp/NAME.st
fit() {
	name=$1
	shift
	(cd "$tmp" && env -u WEFT_PLUGIN_PATH "$prefix/bin/weft" fit --config tiny.yaml \
		--trainer.name="$name" "$@") > "$tmp/$name.log" 2>&1 ||
		{ cat "$tmp/$name.log" >&2; fail "weft fit ($name) $*"; }
	cp "$tmp/runs/$name/version_0/checkpoints/last/model.safetensors" "$tmp/$name.st" ||
		fail "run $name left no checkpoints/last/model.safetensors"
}

loss_at() { # loss_at NAME STEP
	awk -F, -v s="$2" '$1 == s { print $2 }' "$tmp/runs/$1/version_0/metrics.csv"
}

fit ddp
fit local_k1 "--plugins={paths: [$tmp/build-pc]}" '--trainer.strategy={name: local_sgd, k: 1}'
"$CLOSE" compare "$tmp/ddp.st" "$tmp/local_k1.st" 1e-5 ||
	fail "local_sgd k=1 with plain SGD must match ddp within 1e-5"
fit local_k2 "--plugins={paths: [$tmp/build-pc]}" '--trainer.strategy={name: local_sgd, k: 2}'
if "$CLOSE" compare "$tmp/ddp.st" "$tmp/local_k2.st" 1e-5; then
	fail "local_sgd k=2 should drift from ddp by more than 1e-5 (the ranks step apart)"
fi
echo "ok: local_sgd k=1 matches ddp within 1e-5; k=2 does not"

# installed into weft's own plugin directory, selected by name alone
cmake --install "$tmp/build-cmake" > "$tmp/cmake-install.log" 2>&1 ||
	{ cat "$tmp/cmake-install.log" >&2; fail "cmake --install of the example plugins"; }
[ -f "$prefix/$LIBDIR/weft/plugins/heavyball.so" ] ||
	fail "the examples did not install into weft_PLUGIN_DIR ($prefix/$LIBDIR/weft/plugins)"
fit heavyball '--optimizer={name: heavyball, lr: 0.1, beta: 0.9}'
first=$(loss_at heavyball 1) last=$(loss_at heavyball $STEPS)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.05) }' ||
	fail "heavyball: loss went from $first to $last in $STEPS steps; expected a fall of > 0.05"
if "$CLOSE" compare "$tmp/ddp.st" "$tmp/heavyball.st" 1e-5 > /dev/null; then
	fail "heavyball gave the same weights as plain SGD"
fi
echo "ok: heavyball trains (loss $first -> $last)"

fit counting '--trainer.comm={name: counting, inner: gloo}'
"$CLOSE" compare "$tmp/ddp.st" "$tmp/counting.st" 0 ||
	fail "the counting wrapper changed the weights"
numel=$("$CLOSE" numel "$tmp/ddp.st")
# per step: the gradients (4 bytes a parameter) and the 16-byte loss
# reduction; once per run: the summary's 24-byte reduction of the pipeline
# bubble (3 f64; every multi-rank run takes part, pipelined or not)
want=$((STEPS * (4 * numel + 16) + 24))
for r in 0 1; do
	line=$(grep "\[rank $r\] info: counting: comm .* all_reduce " "$tmp/counting.log") ||
		{ cat "$tmp/counting.log" >&2; fail "rank $r logged no all_reduce count"; }
	got=$(echo "$line" | sed -n 's/.* \([0-9]*\) bytes$/\1/p')
	[ "$got" = "$want" ] ||
		fail "rank $r: counting saw $got all_reduce bytes, expected $want ($STEPS x (4 x $numel + 16) + 24): $line"
done
echo "ok: counting over gloo: $want all_reduce bytes on each rank, weights unchanged"

# 4. a moved prefix still finds its plugins and its SDK files
mv "$prefix" "$tmp/moved"
env -u WEFT_PLUGIN_PATH "$tmp/moved/bin/weft" plugins > "$tmp/plugins.log" 2>&1 ||
	{ cat "$tmp/plugins.log" >&2; fail "the moved weft cannot list its plugins"; }
grep -q "gloo .*$tmp/moved/$LIBDIR/weft/plugins/comm_gloo.so" "$tmp/plugins.log" ||
	{ cat "$tmp/plugins.log" >&2; fail "the moved weft does not find its own comm_gloo.so"; }
inc=$(PKG_CONFIG_PATH="$tmp/moved/$LIBDIR/pkgconfig" pkg-config --cflags weft)
case "$inc" in
*"$tmp/moved/"*) ;;
*) fail "weft.pc of the moved prefix points elsewhere: $inc" ;;
esac
echo "ok: a moved prefix finds its plugins; weft.pc follows it"
