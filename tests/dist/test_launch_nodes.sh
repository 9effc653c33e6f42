#!/bin/sh
# `weft launch` across nodes, played on the loopback: two launchers given
# the same --node-rank both fail at once naming it and both of them, and
# a launcher waiting for the other nodes says so every WEFT_WAIT_REPORT_MS
# and gives up at --join-timeout naming the missing node ranks.
set -eu
WEFT="$WEFT_BUILD_DIR/bin/weft"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export WEFT_STORE_SECRET=test-launch-nodes WEFT_WAIT_REPORT_MS=300
port=$((20000 + $$ % 20000))
fail() { echo "FAIL: $*"; cat "$dir"/*.txt; exit 1; }
start=$(date +%s)
timeout 20 "$WEFT" launch --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 \
	--master-port "$port" -- true >"$dir/a.txt" 2>&1 &
a=$!
sleep 1
set +e
timeout 20 "$WEFT" launch --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 \
	--master-port "$port" -- true >"$dir/b.txt" 2>&1
rb=$?
wait "$a"
ra=$?
set -e
[ $(($(date +%s) - start)) -lt 10 ] || fail "the duplicate was not found within 10 s"
for f in a b; do
	grep -q -- "--node-rank 0 is given to two nodes: .* (launcher pid [0-9]*) and .* (launcher pid [0-9]*)" \
		"$dir/$f.txt" || fail "launcher $f does not name node rank 0 and both launchers"
done
[ "$ra" -ne 0 ] && [ "$ra" -ne 124 ] && [ "$rb" -ne 0 ] && [ "$rb" -ne 124 ] ||
	fail "exit codes $ra and $rb: both must fail, neither by the timeout"
set +e
timeout 20 "$WEFT" launch --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 \
	--master-port "$port" --join-timeout 2 -- true >"$dir/c.txt" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "a lone node exited $rc"
grep -q "waiting for 1 of 2 nodes at 127.0.0.1:$port, [0-9]* s of 2 s" "$dir/c.txt" ||
	fail "no progress report while waiting"
grep -q "only 1 of 2 nodes came to 127.0.0.1:$port within 2 s (missing node ranks: 1)" \
	"$dir/c.txt" || fail "no clear error at the join timeout"
echo "duplicate node rank refused on both launchers; waiting reported; join timeout named"
