# weft: thin driver over CMake. `make run` and `make test` set up
# everything on a fresh Debian 12 machine (see README.md).

BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)
CONFIG     ?= examples/fashion_mnist_mlp.yaml
PREFIX     ?= /usr/local

# Debian packages the build, the tests and the examples need.
DEPS = build-essential cmake pkg-config ninja-build libyaml-dev libopenblas-dev \
       libgloo-dev zlib1g-dev clang libclang-rt-14-dev \
       dataset-fashion-mnist fortunes-min python3 iproute2
# Peers for bench/ only (large): PyTorch 2.x and numpy from PyPI, in a
# virtual environment (git-ignored) that only bench/ uses. PyPI's torch
# wheel for Linux brings CUDA libraries too (a few GiB); it runs on the CPU.
BENCH_VENV  ?= .venv-bench
BENCH_TORCH ?= torch>=2.4,<3
BENCH_NUMPY ?= numpy>=1.24,<3

.PHONY: all deps bench-deps configure build run test test-release test-asan bench fuzz install clean

all: build

deps:
	@scripts/install-deps $(DEPS)

bench-deps:
	@scripts/install-deps python3 python3-venv python3-dev build-essential
	@bench/setup-venv $(BENCH_VENV) "$(BENCH_TORCH)" "$(BENCH_NUMPY)"

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

configure: deps $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/bin/weft fit --config $(CONFIG)

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

$(ASAN_BUILD)/build.ninja:
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DWEFT_SANITIZE=ON \
	      -DWEFT_CUDA=OFF

test-asan: deps $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    ctest --output-on-failure -j $(JOBS) --timeout 300 -LE slow

test: test-release test-asan

bench: build bench-deps
	bench/run-all $(BUILD)

fuzz: deps
	cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	      -DWEFT_FUZZ=ON -DWEFT_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build-fuzz -j $(JOBS) --target fuzz_config fuzz_ckpt fuzz_store
	for t in config ckpt store; do \
	    dict=$$t; [ $$t = config ] && dict=yaml; \
	    mkdir -p build-fuzz/corpus/$$t && \
	    ASAN_OPTIONS=detect_leaks=1 build-fuzz/tests/fuzz/fuzz_$$t \
	        -max_total_time=$${FUZZ_SECONDS:-60} -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
	        -detect_leaks=1 -print_final_stats=1 -artifact_prefix=build-fuzz/ \
	        -dict=tests/fuzz/$$dict.dict build-fuzz/corpus/$$t tests/fuzz/corpus/$$t || exit 1; \
	done

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
