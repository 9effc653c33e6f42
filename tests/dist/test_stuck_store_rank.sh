#!/bin/sh
# Under torchrun (here its environment, set by hand for two processes),
# rank 0 serves weft's store. When rank 0 is stopped (SIGSTOP: hung, not
# dead) the heartbeat cannot pass a verdict through the store, yet the
# other rank must still end within seconds, naming rank 0 as the store's
# server that stopped responding, while trainer.comm_timeout stays at its
# 1800 s default.
set -eu
WEFT="$WEFT_BUILD_DIR/bin/weft"
dir=$(mktemp -d)
p0= p1=
cleanup() {
	for p in $p0 $p1; do
		kill -CONT "$p" 2>/dev/null || true
		kill -KILL "$p" 2>/dev/null || true
	done
	rm -rf "$dir"
}
trap cleanup EXIT
cat > "$dir/cfg.yaml" <<YAML
seed_everything: 7
trainer:
  devices: 2
  strategy: ddp
  comm: {name: gloo, shm: off}
  max_epochs: 1000
  limit_val_batches: 0
  enable_progress_bar: false
  log_every_n_steps: 5
  default_root_dir: $dir/runs
model: {class: mlp, hidden: [16]}
data: {class: fashion_mnist, batch_size: 32}
optimizer: {name: sgd, lr: 0.05}
YAML
fail() { echo "FAIL: $*"; cat "$dir"/out*.txt; exit 1; }
port=$((20000 + $$ % 20000))
export WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port
export TORCHELASTIC_RUN_ID=stuck-store-$$ WEFT_STORE_SECRET=stuck-store-$$
export WEFT_HEARTBEAT_TIMEOUT=4 WEFT_HEARTBEAT_INTERVAL=0.4
RANK=0 LOCAL_RANK=0 "$WEFT" fit --config "$dir/cfg.yaml" >"$dir/out0.txt" 2>&1 &
p0=$!
RANK=1 LOCAL_RANK=1 "$WEFT" fit --config "$dir/cfg.yaml" >"$dir/out1.txt" 2>&1 &
p1=$!
i=0
until grep -q "loss" "$dir/out0.txt"; do
	i=$((i + 1))
	[ "$i" -lt 300 ] || fail "training did not start within 30 s"
	kill -0 "$p1" 2>/dev/null || fail "rank 1 ended before training started"
	sleep 0.1
done
kill -STOP "$p0"
start=$(date +%s)
# 4 s of silence + the store client's 5 s grace + slack for a loaded machine
i=0
while kill -0 "$p1" 2>/dev/null; do
	i=$((i + 1))
	[ "$i" -lt 250 ] || fail "rank 1 still runs 25 s after rank 0 was stopped"
	sleep 0.1
done
set +e
wait "$p1"
rc=$?
set -e
p1=
took=$(($(date +%s) - start))
[ "$rc" -ne 0 ] || fail "rank 1 exited 0"
grep -q "rank 0 (which serves the store) has stopped responding" "$dir/out1.txt" ||
	fail "rank 1 does not name rank 0 as the stopped store server"
echo "rank 0 (the store's server) stopped; rank 1 ended after $took s naming it"
