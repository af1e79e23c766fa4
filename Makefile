# Quick start (Debian 12, as root): `make demo` or `make test`.
# Both install missing Debian packages, configure with CMake + Ninja (Release) and build.

BUILD    ?= build
FUZZ_BUILD ?= build-fuzz
SAN_BUILD  ?= build-sanitize
ARM_BUILD  ?= build-arm64
JOBS     ?= $(shell nproc)
# What building vlkv needs (make demo installs only these) ...
BUILD_PACKAGES := cmake ninja-build g++ pkg-config libgtest-dev libgmock-dev libbenchmark-dev \
            nlohmann-json3-dev libcli11-dev libpcre2-dev libstb-dev libavformat-dev libavcodec-dev \
            libswscale-dev libavutil-dev ccache libcpp-httplib-dev libboost-dev zlib1g-dev libssl-dev \
            libhiredis-dev libedit-dev libcurl4-openssl-dev
# ... and what the tests add: clang and its sanitizer runtime (fuzzers), ffmpeg (test clips),
# nginx, Redis, Chromium + Selenium (the proxy, shared-store and browser tests), PyTorch + NumPy
# with OpenBLAS (the tinyvideo trainer's smoke test; without OpenBLAS torch uses the reference BLAS).
TEST_PACKAGES := clang libclang-rt-14-dev ffmpeg nginx-light chromium chromium-driver python3-selenium redis-server \
            python3-torch python3-numpy libopenblas0-pthread
PACKAGES := $(BUILD_PACKAGES) $(TEST_PACKAGES)

# What `make test-arm64` needs on top (installed by its own deps step, not by `make deps`).
ARM_PACKAGES := g++-aarch64-linux-gnu qemu-user-static cmake ninja-build libgtest-dev libgmock-dev

.PHONY: deps deps-build deps-arm64 configure configure-demo build demo test test-sanitize test-arm64 fuzz-smoke train-tinyvideo clean

# Installs the Debian packages of $(1) that are missing.
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
endef

deps:
	$(call install_missing,$(PACKAGES))

deps-build:
	$(call install_missing,$(BUILD_PACKAGES))

deps-arm64:
	$(call install_missing,$(ARM_PACKAGES))

configure: deps
	@test -f $(BUILD)/build.ninja || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The demo: tinyvideo (a 5.5M-parameter LLaVA-style video VLM trained here, train/) answers six
# questions about a bundled 64-second clip (128 frames, ~3,200 tokens) once per KV method: the
# answers, how many match f16's, the KV bytes held and the ratio to f16, decode speed.
# Only the vlkv binary (not the tests), only the packages the build needs: minutes, not a quarter hour.
configure-demo: deps-build
	@test -f $(BUILD)/build.ninja || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

demo: configure-demo
	cmake --build $(BUILD) -j $(JOBS) --target vlkv_cli
	VLKV=./$(BUILD)/vlkv tools/demo.sh

# The whole suite: unit, golden and bad-input tests, then a bounded libFuzzer run.
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -LE slow
	$(MAKE) fuzz-smoke

# The default suite again under AddressSanitizer + LeakSanitizer + UBSan (GCC, RelWithDebInfo,
# its own build folder): a leak, an out-of-bounds or freed access or undefined behaviour fails
# the test that caused it, and each fuzz target replays its seeds (fuzz/corpus, the regress_* finds
# among them: tests FuzzSeeds.*, fuzz/seed_replay.cmake). The tests that bound a server's RSS start
# that server with ASan's quarantine off themselves (tests/tools/serve_util.h, Rss::kHonest).
# Not part of `make test`: a cold build takes ~25 min on 2 cores.
SAN_OPTIONS := ASAN_OPTIONS=detect_leaks=1:check_initialization_order=1:strict_init_order=1 \
               UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
test-sanitize: deps
	@test -f $(SAN_BUILD)/build.ninja || cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DVLKV_SANITIZE=ON -DVLKV_BUILD_BENCH=OFF
	cmake --build $(SAN_BUILD) -j $(JOBS)
	$(SAN_OPTIONS) ctest --test-dir $(SAN_BUILD) --output-on-failure -j $(JOBS) -LE slow

# ARM64: cross-compiles the layers up to the KV cache (base, gguf, quant, kernels, kv: weight
# formats, matmul, the SIMD dispatch, every KV method and codec) and their GoogleTest suites with
# Debian's g++-aarch64-linux-gnu (cmake/aarch64-linux-gnu.cmake, static binaries, GoogleTest built
# from /usr/src/googletest), then runs them under qemu-aarch64-static at two CPU levels:
# QEMU_CPU=max (dotprod + i8mm: the sdot kernels) and QEMU_CPU=cortex-a72 (ARMv8.0: plain NEON,
# smull + sadalp). Left out (VLKV_CORE_ONLY): the text, vision and engine layers, the tools, the
# benchmarks. ~10 min cold on 2 cores (cross build ~6 min, tests ~20 s per CPU level below kv).
# kv at max: 225 tests (~4 min of CPU, ~2 min on 2 idle cores); the every-method conformance sweeps and the three heaviest
# statistics tests take ~45 min more under qemu and run only with ARM_KV_EXCLUDE=.
# kv at cortex-a72: 129 tests, ~1 min of CPU (~30 s on 2 idle cores) - the codec, kernel, attention
# and method tests without the Registered/ method sweeps and two pool-accounting tests. At max the
# codec tests already force every tier (neon, dotprod, i8mm); this level checks the CPU detection
# and that no sdot leaks out of the *_dotprod.cpp files (qemu raises SIGILL on a CPU without it).
# The sweeps run the same kernels as at max; ARM_KV_NEON_EXCLUDE= runs them there too.
ARM_KV_EXCLUDE ?= -E '(^|/)EveryMethod[.]|^(ZipvlCache|SparseAttention|KeyMass)[.]'
ARM_KV_NEON_EXCLUDE ?= -E '(^|/)EveryMethod|^Registered/|^(ZipvlCache|SparseAttention|KeyMass|PerSequenceMethods|QcacheAccounting)[.]'
test-arm64: deps-arm64
	@test -f $(ARM_BUILD)/build.ninja || cmake -S . -B $(ARM_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DVLKV_CORE_ONLY=ON -DVLKV_BUILD_BENCH=OFF
	cmake --build $(ARM_BUILD) -j $(JOBS)
	QEMU_CPU=max VLKV_EXPECT_TIER=i8mm ctest --test-dir $(ARM_BUILD) --output-on-failure -j $(JOBS) -LE 'slow|kv'
	QEMU_CPU=cortex-a72 VLKV_EXPECT_TIER=neon ctest --test-dir $(ARM_BUILD) --output-on-failure -j $(JOBS) -LE 'slow|kv'
	QEMU_CPU=max VLKV_EXPECT_TIER=i8mm ctest --test-dir $(ARM_BUILD) --output-on-failure -j $(JOBS) -L kv $(ARM_KV_EXCLUDE)
	QEMU_CPU=cortex-a72 VLKV_EXPECT_TIER=neon ctest --test-dir $(ARM_BUILD) --output-on-failure -j $(JOBS) -L kv $(ARM_KV_NEON_EXCLUDE)

# Bounded libFuzzer runs (clang, ASan + UBSan), each stopped by an execution cap or a time cap,
# whichever comes first. The seed is fixed and the corpus folders start empty, so a run is
# repeatable for one build (another build folder changes the binary and so the sequence).
# stb_image 2.27 has bugs that runs can still find: each find gets a guard in
# src/vision/stb_image_guards.* and a regress_* seed. Run longer by hand, FUZZ_SEED=0 for a random seed.
# New inputs go to $(FUZZ_BUILD)/corpus-*; a crashing input is written to $(FUZZ_BUILD)/crash-* and,
# since CI's machine, path and speed give another sequence than yours, printed last (gzip + base64:
# `base64 -d | gunzip > in.bin`, then `./build-fuzz/fuzz/<target> in.bin`).
FUZZ_REPORT = { for f in $(FUZZ_BUILD)/crash-* $(FUZZ_BUILD)/leak-* $(FUZZ_BUILD)/timeout-* $(FUZZ_BUILD)/oom-*; do \
  [ -f "$$f" ] && { echo "== $$f, gzip | base64:"; gzip -9c "$$f" | base64 -w 120; }; done; exit 1; }
FUZZ_SEED         ?= 1
GGUF_FUZZ_RUNS    ?= 2000000
IMAGE_FUZZ_RUNS   ?= 150000
REQUEST_FUZZ_RUNS ?= 150000
KV_FILE_FUZZ_RUNS ?= 100000
STORE_FUZZ_RUNS   ?= 200000
fuzz-smoke: deps
	@test -f $(FUZZ_BUILD)/build.ninja || CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVLKV_BUILD_FUZZ=ON -DVLKV_BUILD_TESTS=OFF -DVLKV_BUILD_BENCH=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target gguf_fuzzer image_fuzzer request_fuzzer kv_file_fuzzer store_fuzzer
	@rm -rf $(FUZZ_BUILD)/corpus-gguf $(FUZZ_BUILD)/corpus-image $(FUZZ_BUILD)/corpus-request $(FUZZ_BUILD)/corpus-kv-file $(FUZZ_BUILD)/corpus-store
	@rm -f $(FUZZ_BUILD)/crash-* $(FUZZ_BUILD)/leak-* $(FUZZ_BUILD)/timeout-* $(FUZZ_BUILD)/oom-*
	@mkdir -p $(FUZZ_BUILD)/corpus-gguf $(FUZZ_BUILD)/corpus-image $(FUZZ_BUILD)/corpus-request $(FUZZ_BUILD)/corpus-kv-file $(FUZZ_BUILD)/corpus-store
	./$(FUZZ_BUILD)/fuzz/gguf_fuzzer -seed=$(FUZZ_SEED) -runs=$(GGUF_FUZZ_RUNS) -max_total_time=180 -max_len=65536 \
	  -artifact_prefix=$(FUZZ_BUILD)/ \
	  $(FUZZ_BUILD)/corpus-gguf fuzz/corpus/gguf || $(FUZZ_REPORT)
	./$(FUZZ_BUILD)/fuzz/image_fuzzer -seed=$(FUZZ_SEED) -runs=$(IMAGE_FUZZ_RUNS) -max_total_time=60 -max_len=16384 -timeout=10 \
	  -artifact_prefix=$(FUZZ_BUILD)/ \
	  $(FUZZ_BUILD)/corpus-image fuzz/corpus/image || $(FUZZ_REPORT)
	./$(FUZZ_BUILD)/fuzz/request_fuzzer -seed=$(FUZZ_SEED) -runs=$(REQUEST_FUZZ_RUNS) -max_total_time=30 -max_len=16384 \
	  -artifact_prefix=$(FUZZ_BUILD)/ \
	  $(FUZZ_BUILD)/corpus-request fuzz/corpus/request || $(FUZZ_REPORT)
	./$(FUZZ_BUILD)/fuzz/kv_file_fuzzer -seed=$(FUZZ_SEED) -runs=$(KV_FILE_FUZZ_RUNS) -max_total_time=30 -max_len=65536 \
	  -artifact_prefix=$(FUZZ_BUILD)/ \
	  $(FUZZ_BUILD)/corpus-kv-file fuzz/corpus/kv_file || $(FUZZ_REPORT)
	./$(FUZZ_BUILD)/fuzz/store_fuzzer -seed=$(FUZZ_SEED) -runs=$(STORE_FUZZ_RUNS) -max_total_time=20 -max_len=4096 \
	  -artifact_prefix=$(FUZZ_BUILD)/ \
	  $(FUZZ_BUILD)/corpus-store fuzz/corpus/store || $(FUZZ_REPORT)

# Trains tinyvideo (train/README.md) from one seed: up to ~3 h on 2 idle cores, resumable (run it
# again to continue from runs/tinyvideo/ckpt.pt), then exports the GGUF pair and the eval set there.
TRAIN_PACKAGES := python3-torch python3-numpy libopenblas0-pthread
SEED ?= 1
train-tinyvideo: configure-demo
	$(call install_missing,$(TRAIN_PACKAGES))
	cmake --build $(BUILD) -j $(JOBS) --target vlkv_cli
	SEED=$(SEED) VLKV=./$(BUILD)/vlkv train/run.sh runs/tinyvideo

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD) $(SAN_BUILD) $(ARM_BUILD)
