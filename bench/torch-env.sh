# Sourced by the bench/<name>/ scripts after they set HERE to their own
# folder: the PyTorch interpreter and the machine. PYTHON overrides the interpreter; by default it is the virtual
# environment `make bench-deps` makes at the repository's .venv-bench/
# (PyTorch 2.x from PyPI). Sets PY and have_torch (1 when PY imports a
# torch >= 2.0).
BENCH_ROOT=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-$BENCH_ROOT/.venv-bench/bin/python3}
have_torch=0

# Says which PyTorch the peer is, or why there is none.
bench_torch_check() {
	if [ ! -x "$PY" ]; then
		echo "== PyTorch skipped: $PY does not exist (run \`make bench-deps\`, or set PYTHON)"
		return 0
	fi
	v=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null) || v=""
	case $v in
	"") echo "== PyTorch skipped: $PY cannot import torch (run \`make bench-deps\`)" ;;
	0.*|1.*) echo "== PyTorch skipped: $PY has torch $v; the peer is PyTorch 2.x" \
		      "(run \`make bench-deps\`)" ;;
	*) have_torch=1
	   echo "== PyTorch $v ($PY)" ;;
	esac
}

# One line: CPU model, vector extensions, cores, memory.
bench_machine() {
	model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
	flags=$(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo | head -1)
	isa=""
	for f in avx2 fma avx512f amx_bf16; do
		case " $flags " in *" $f "*) isa="$isa${isa:+ }$f" ;; esac
	done
	echo "$model, ${isa:-no AVX2}, $(nproc) cores," \
	     "$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
}

# torch.compile's runs: at most COMPILE_TIMEOUT seconds (default 1800;
# compilation alone took minutes on a busy 2-core machine).
COMPILE_TIMEOUT=${COMPILE_TIMEOUT:-1800}

# The output of a torch.compile run that exited with status $1: why, and a
# RESULT line that marks it failed.
compile_failed() {
	if [ "$1" = 124 ]; then
		why="did not finish in COMPILE_TIMEOUT=$COMPILE_TIMEOUT s"
	else
		why="the run exited with status $1"
	fi
	echo "torch.compile: $why"
	echo "RESULT impl=torch_compile failed=1 reason='$why'"
}
