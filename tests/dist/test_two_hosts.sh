#!/bin/sh
# Two hosts played by two network namespaces joined by a veth pair, each
# with Debian's default /etc/hosts (the machine's name resolves to
# 127.0.1.1): ddp over gloo's tcp (shm: off) trains across the link, and
# when one side is killed the other ends with an error naming the lost rank
# instead of hanging. Skipped (exit 77) where namespaces cannot be made
# (not root, no `ip`, no veth).
set -eu
WEFT="$WEFT_BUILD_DIR/bin/weft"
tag=$$
na=weft-a-$tag nb=weft-b-$tag
sub=$((tag % 200 + 20))
ipa=10.213.$sub.1 ipb=10.213.$sub.2
dir=$(mktemp -d)
pa= pb=
cleanup() {
	for p in $pa $pb; do kill -KILL "$p" 2>/dev/null || true; done
	for n in $na $nb; do
		ip netns pids "$n" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
		ip netns del "$n" 2>/dev/null || true
		rm -rf "/etc/netns/$n"
	done
	rm -rf "$dir"
}
trap cleanup EXIT
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
command -v ip >/dev/null || skip "no ip (iproute2)"
ip netns add "$na" 2>/dev/null || skip "cannot create a network namespace"
ip netns add "$nb" 2>/dev/null || skip "cannot create a second network namespace"
ip link add "va$tag" type veth peer name "vb$tag" 2>/dev/null || skip "cannot create a veth pair"
ip link set "va$tag" netns "$na"
ip link set "vb$tag" netns "$nb"
ip -n "$na" addr add "$ipa/24" dev "va$tag"
ip -n "$nb" addr add "$ipb/24" dev "vb$tag"
for n in $na $nb; do
	ip -n "$n" link set lo up
	mkdir -p "/etc/netns/$n"
	printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$(hostname)" >"/etc/netns/$n/hosts"
done
ip -n "$na" link set "va$tag" up
ip -n "$nb" link set "vb$tag" up
ip netns exec "$na" getent hosts "$(hostname)" | grep -q '^127\.0\.1\.1' ||
	skip "ip netns exec does not mount /etc/netns/NAME/hosts here"

fail() {
	echo "FAIL: $*"
	for f in "$dir"/*.txt; do echo "== $f"; cat "$f"; done
	exit 1
}
cfg() {
	cat >"$dir/$1.yaml" <<YAML
seed_everything: 7
trainer:
  devices: 1
  num_nodes: 2
  strategy: ddp
  comm: {name: gloo, shm: off}
  comm_timeout: 600
  max_epochs: $2
  limit_train_batches: 8
  limit_val_batches: 0
  enable_progress_bar: false
  enable_checkpointing: false
  log_every_n_steps: 4
  default_root_dir: $dir/runs-$1
model: {class: mlp, hidden: [16]}
data: {class: fashion_mnist, batch_size: 32}
optimizer: {name: sgd, lr: 0.05}
YAML
}
export WEFT_STORE_SECRET=two-hosts-$tag WEFT_HEARTBEAT_TIMEOUT=3 WEFT_HEARTBEAT_INTERVAL=0.3
port=$((20000 + tag % 20000))
node() { # node RANK NETNS CONFIG OUT
	ip netns exec "$2" "$WEFT" launch --nnodes 2 --node-rank "$1" --nproc-per-node 1 \
		--master-addr "$ipa" --master-port "$port" --join-timeout 30 -- \
		"$WEFT" fit --config "$dir/$3.yaml" >"$dir/$4" 2>&1
}

# 1. a short run trains across the link and both sides finish
cfg short 2
node 0 "$na" short a.txt &
pa=$!
node 1 "$nb" short b.txt &
pb=$!
set +e
wait "$pa"; ra=$?
wait "$pb"; rb=$?
set -e
pa= pb=
[ "$ra" -eq 0 ] && [ "$rb" -eq 0 ] || fail "the two-host run exited $ra and $rb"
grep -q "communicators listen on $ipa" "$dir/a.txt" || fail "node 0 does not say it listens on $ipa"
grep -q "communicators listen on $ipb" "$dir/b.txt" || fail "node 1 does not say it listens on $ipb"
grep -q "max_epochs=2. reached" "$dir/a.txt" || fail "node 0 did not finish its 2 epochs"

# 2. a long run: killing node 1 ends node 0 quickly, the lost rank named by
# the collective ledger (the heartbeat is set far out of the way here)
port=$((port + 1))
export WEFT_HEARTBEAT_TIMEOUT=120
cfg long 100000
node 0 "$na" long c.txt &
pa=$!
node 1 "$nb" long d.txt &
pb=$!
i=0
until grep -q "loss" "$dir/c.txt"; do
	i=$((i + 1))
	[ "$i" -lt 600 ] || fail "the long run did not start training within 60 s"
	kill -0 "$pa" 2>/dev/null || fail "node 0 ended before training started"
	sleep 0.1
done
ip netns pids "$nb" | xargs -r kill -KILL
start=$(date +%s)
set +e
wait "$pa"; rc=$?
set -e
pa=
took=$(($(date +%s) - start))
[ "$rc" -ne 0 ] || fail "node 0 exited 0 after node 1 was killed"
[ "$took" -lt 60 ] || fail "node 0 took $took s to notice the lost node (comm_timeout is 600 s)"
grep -q "ledger: rank 1 did not answer" "$dir/c.txt" ||
	fail "node 0's error does not name rank 1 through the ledger"
echo "ddp trained across two namespaces on $ipa/$ipb; the killed node was named after $took s"
