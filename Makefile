# Quick start (Debian 12, as root): `make demo` or `make test`.
# Both install missing Debian packages, configure with CMake + Ninja (Release) and build.

BUILD    ?= build
FUZZ_BUILD ?= build-fuzz
JOBS     ?= $(shell nproc)
PACKAGES := cmake ninja-build g++ pkg-config libgtest-dev libgmock-dev libbenchmark-dev \
            nlohmann-json3-dev libcli11-dev libpcre2-dev clang libclang-rt-14-dev
DEMO_MODEL  ?= models/stories260K.gguf
DEMO_PROMPT ?= Once upon a time, there was a little robot who

.PHONY: deps configure build demo test fuzz-smoke clean

deps:
	@missing=""; for p in $(PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

configure: deps
	@test -f $(BUILD)/build.ninja || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/vlkv run -m $(DEMO_MODEL) -p "$(DEMO_PROMPT)" -n 200 --temp 0.8 --seed 42

# The whole suite: unit, golden and bad-input tests, then a bounded libFuzzer run.
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -LE slow
	$(MAKE) fuzz-smoke

fuzz-smoke: deps
	@test -f $(FUZZ_BUILD)/build.ninja || CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVLKV_BUILD_FUZZ=ON -DVLKV_BUILD_TESTS=OFF -DVLKV_BUILD_BENCH=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target gguf_fuzzer
	@mkdir -p $(FUZZ_BUILD)/corpus  # new inputs go here, the committed seeds stay as they are
	./$(FUZZ_BUILD)/fuzz/gguf_fuzzer -runs=50000 -max_total_time=60 -max_len=65536 $(FUZZ_BUILD)/corpus fuzz/corpus/gguf

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD)
