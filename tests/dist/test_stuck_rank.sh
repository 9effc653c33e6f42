#!/bin/sh
# A rank that stops making progress (SIGSTOP: hung, not dead) is named
# within seconds by the heartbeat while trainer.comm_timeout stays at its
# 1800 s default, on shared memory and on gloo's tcp, and the launcher's
# summary names it, not a healthy rank that gave up waiting for it.
#   test_stuck_rank.sh shm|tcp
# shm: 3 ranks, rank 2 is stopped; tcp (shm: off): 2 ranks, rank 0 (the
# one whose exit used to be blamed) is stopped.
set -eu
WEFT="$WEFT_BUILD_DIR/bin/weft"
mode=$1
dir=$(mktemp -d)
launcher=
cleanup() {
	[ -n "$launcher" ] && kill -KILL "$launcher" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
if [ "$mode" = shm ]; then n=3 stuck=2 comm=gloo; else n=2 stuck=0 comm="{name: gloo, shm: off}"; fi
cat > "$dir/cfg.yaml" <<YAML
seed_everything: 7
trainer:
  devices: $n
  strategy: ddp
  comm: $comm
  max_epochs: 1000
  limit_val_batches: 0
  enable_progress_bar: false
  log_every_n_steps: 5
  default_root_dir: $dir/runs
model: {class: mlp, hidden: [16]}
data: {class: fashion_mnist, batch_size: 32}
optimizer: {name: sgd, lr: 0.05}
YAML
fail() { echo "FAIL: $*"; cat "$dir/out.txt"; exit 1; }
# a stall of 4 s declares a rank stuck (2 s was declared falsely on a loaded
# machine during startup); beats every 0.4 s
WEFT_HEARTBEAT_TIMEOUT=4 WEFT_HEARTBEAT_INTERVAL=0.4 "$WEFT" launch --nproc-per-node "$n" -- \
	"$WEFT" fit --config "$dir/cfg.yaml" >"$dir/out.txt" 2>&1 &
launcher=$!
# training is under way once a step was logged (at most 30 s)
i=0
until grep -q "loss" "$dir/out.txt"; do
	i=$((i + 1))
	[ "$i" -lt 300 ] || fail "training did not start within 30 s"
	kill -0 "$launcher" 2>/dev/null || fail "the job ended before training started"
	sleep 0.1
done
pid=
for p in $(pgrep -P "$launcher"); do
	if tr '\0' '\n' <"/proc/$p/environ" | grep -qx "WEFT_RANK=$stuck"; then pid=$p; fi
done
[ -n "$pid" ] || fail "no rank $stuck among the launcher's children"
kill -STOP "$pid"
start=$(date +%s)
# the job must end within 15 s of the stop (4 s stall + beats + 1 s settle
# + slack for a loaded 2-core machine); comm_timeout would take 1800 s
i=0
while kill -0 "$launcher" 2>/dev/null; do
	i=$((i + 1))
	if [ "$i" -ge 150 ]; then
		kill -CONT "$pid" 2>/dev/null || true
		fail "the job still runs 15 s after rank $stuck was stopped"
	fi
	sleep 0.1
done
set +e
wait "$launcher"
rc=$?
set -e
launcher=
took=$(($(date +%s) - start))
[ "$rc" -ne 0 ] || fail "the launcher exited 0"
want="rank $stuck (pid $pid) has stopped responding (no heartbeat for"
grep -q "launch failed: $want" "$dir/out.txt" ||
	fail "the launcher's summary does not name rank $stuck as stuck"
# every waiting rank says it too
for r in $(seq 0 $((n - 1))); do
	[ "$r" -eq "$stuck" ] && continue
	grep -q "rank $r\] error: $want" "$dir/out.txt" ||
		fail "rank $r's error does not name rank $stuck"
done
if grep -q "launch failed: rank [0-9]* (pid [0-9]*) exited with status" "$dir/out.txt"; then
	fail "the summary blames a rank that exited"
fi
kill -0 "$pid" 2>/dev/null && fail "the stopped rank $stuck (pid $pid) outlived the launcher"
echo "$mode: rank $stuck stopped; the job ended in about $took s naming it"
