#!/bin/sh
# Side by side: `weft bench comm --backend gloo`, the same libgloo called
# directly (gloo_direct.cc), and torch.distributed's gloo (PyTorch 2.x from
# the virtual environment `make bench-deps` makes; PYTHON=... picks another
# interpreter). Usage: bench/comm/run.sh [BUILD_DIR] [NRANKS]
set -e
BUILD=${1:-build}
N=${2:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../torch-env.sh"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "== weft bench comm --backend gloo -n $N (shared memory between the ranks)"
"$BUILD/bin/weft" bench comm --backend gloo -n "$N" -b 8 -e 64M -f 2 2>/dev/null

echo "== weft bench comm --backend gloo -n $N -o shm=off (tcp, as libgloo)"
"$BUILD/bin/weft" bench comm --backend gloo -n "$N" -b 8 -e 64M -f 2 -o shm=off 2>/dev/null

echo "== libgloo called directly (bench/comm/gloo_direct.cc)"
c++ -O2 -std=c++17 "$HERE/gloo_direct.cc" -o "$TMP/gloo_direct" -lgloo -pthread
mkdir "$TMP/store"
i=1
while [ "$i" -lt "$N" ]; do
	"$TMP/gloo_direct" "$i" "$N" "$TMP/store" >/dev/null &
	i=$((i + 1))
done
"$TMP/gloo_direct" 0 "$N" "$TMP/store"
wait

bench_torch_check
if [ "$have_torch" = 1 ]; then
	echo "== torch.distributed gloo (bench/comm/torch_allreduce.py)"
	"$PY" "$HERE/torch_allreduce.py" "$N"
fi
