# tandem: the two commands a new user needs are `make train` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
ARGS ?=

.PHONY: all deps configure build train train-lm test test-floor bench bench-serve format clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DTANDEM_WERROR=ON $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

train: build
	$(BUILD)/tandem train $(ARGS)

# The small GPT on Debian's fortunes (tokenized once into $(BUILD)/data/fortunes-tok).
train-lm: build
	scripts/train-lm.sh $(BUILD) $(ARGS)

# Tests run side by side: short OpenMP spins keep them from taking each other's cores.
test: build
	cd $(BUILD) && GOMP_SPINCOUNT=$${GOMP_SPINCOUNT:-10000} ctest --output-on-failure -j $(JOBS)

# The suite again with the CPU limited to tandem's floor (AVX2 + FMA + F16C): oneDNN, the loop
# and optimizer kernels and the bf16 decision all act as on an AVX2-only CPU (docs/cpu.md).
test-floor: build
	cd $(BUILD) && TANDEM_MAX_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 GOMP_SPINCOUNT=$${GOMP_SPINCOUNT:-10000} \
		ctest --output-on-failure -j $(JOBS)

bench: build
	scripts/bench.sh $(BUILD)

bench-serve: build
	scripts/serve-bench.sh $(BUILD)

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp' '*.cu')

clean:
	rm -rf $(BUILD)
