# tandem: the two commands a new user needs are `make train` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
ARGS ?=
# ccache (scripts/install-deps.sh) for every build when it is installed; paths under the checkout
# hash as relative ones, so that another clone (CI's) finds the objects this one compiled.
LAUNCHER := $(if $(shell command -v ccache 2>/dev/null),-DCMAKE_C_COMPILER_LAUNCHER=ccache \
	-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= true

.PHONY: all deps configure build train train-lm test test-floor bench bench-serve format clean fuzz-build fuzz test-sanitize test-tsan wheel

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DTANDEM_WERROR=ON $(LAUNCHER) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Only the tandem program: the tests, benchmarks and fuzzers wait for make test and make bench.
train: configure
	cmake --build $(BUILD) -j $(JOBS) --target tandem
	$(BUILD)/tandem train $(ARGS)

# The small GPT on Debian's fortunes (tokenized once into $(BUILD)/data/fortunes-tok).
train-lm: build
	scripts/train-lm.sh $(BUILD) $(ARGS)

# Tests run side by side: short OpenMP spins keep them from taking each other's cores.
test: build
	cd $(BUILD) && GOMP_SPINCOUNT=$${GOMP_SPINCOUNT:-10000} ctest --output-on-failure --timeout 600 -j $(JOBS)

# The suite again with the CPU limited to tandem's floor (AVX2 + FMA + F16C): oneDNN, the loop
# and optimizer kernels and the bf16 decision all act as on an AVX2-only CPU (docs/cpu.md).
test-floor: build
	cd $(BUILD) && TANDEM_MAX_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 GOMP_SPINCOUNT=$${GOMP_SPINCOUNT:-10000} \
		ctest --output-on-failure --timeout 600 -j $(JOBS)

# libFuzzer builds of fuzz/ (clang-14, ASan + UBSan) in $(FUZZ_BUILD); `make fuzz` runs each
# target FUZZ_SECONDS on its corpus with the bounds in fuzz/README.md.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = idx cifar image packed safetensors token_shard checkpoint device http cli
fuzz-build:
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
		-DCMAKE_CXX_COMPILER=clang++-14 -DTANDEM_FUZZ=ON -DTANDEM_SANITIZE=address,undefined \
		-DTANDEM_CUDA=OFF -DTANDEM_MPI=OFF -DTANDEM_BENCH=OFF $(LAUNCHER) $(CMAKE_FLAGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))

fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_BUILD)/corpus/$$t && \
		$(FUZZ_BUILD)/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=10 \
			-malloc_limit_mb=1024 -print_final_stats=1 $$(test -f fuzz/dict/$$t.dict && echo -dict=fuzz/dict/$$t.dict) \
			$(FUZZ_BUILD)/corpus/$$t fuzz/corpus/$$t || exit 1; \
	done

# ASan + UBSan over the parsers and every thread owner, in the fuzz build (clang-14, CUDA and
# MPI off; the libraries carry the fuzzers' coverage instrumentation, which changes no result):
# the corpora replayed (label fuzz), the data, checkpoint and serve suites (readers, loader
# workers, prefetcher, checkpoint writer, HTTP workers), and from core, optim and metrics the
# virt streams, allocators, safetensors, atomic files, thread pool, the CPU (offloaded)
# optimizer and the utilisation sampler. docs/sanitizers.md has the times.
SANITIZE_TESTS = tandem test_data test_checkpoint test_serve test_core test_optim test_metrics
SANITIZE_LABELS = ^(data|checkpoint|serve|fuzz)$$
SANITIZE_NAMES = ^(Virt[A-Za-z]*|Pinned|CachingAllocator|Safetensors|AtomicFile|ThreadPool|CpuIsa|Offload[A-Za-z]*|Optimizer|UtilizationSampler|ProcStat)\.
test-sanitize: fuzz-build
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(SANITIZE_TESTS)
	cd $(FUZZ_BUILD) && GOMP_SPINCOUNT=$${GOMP_SPINCOUNT:-10000} ctest --output-on-failure --timeout 1800 -j $(JOBS) -L '$(SANITIZE_LABELS)'
	cd $(FUZZ_BUILD) && GOMP_SPINCOUNT=$${GOMP_SPINCOUNT:-10000} ctest --output-on-failure --timeout 1800 -j $(JOBS) -R '$(SANITIZE_NAMES)'

# ThreadSanitizer over the suites of the concurrent parts (gcc, CUDA and MPI off, OpenMP's false
# positives suppressed by tests/sanitizers/tsan.supp, each with its reason; OpenMP's teams
# capped at one thread, since libgomp's barriers are invisible to TSan and its workers' reads
# of the caller's stack read as races whose stacks TSan cannot restore; OMP_NUM_THREADS as
# well, so that every thread's default team, which oneDNN sizes its work by, is that one). Run before every
# resolve (docs/sanitizers.md); TSAN_LABELS narrows it.
TSAN_BUILD ?= build-tsan
TSAN_LABELS ?= ^(data|core|optim|train|checkpoint|serve|dist)$$
# Kernel numerics left out: single-threaded comparisons of op outputs (references, layouts,
# instruction sets) that start no thread of tandem's own; under TSan they take hours (one
# BatchNorm layout test alone 1,407 s); a parameterized suite's instance prefix ("Blocks/") is
# allowed. TSAN_EXCLUDE= runs them too.
TSAN_EXCLUDE ?= ^([A-Za-z0-9]+/)?(F64Reference|BatchNormNhwc|MemoryFormat|OpsDtypeQuery|OpsDtypeFrontEnd|OpsEdges|VecMath|[A-Za-z]*Reference|Attention|LayerNorm|Gelu|Embedding|Classifier|ResidualAdd|TransformerOps[A-Za-z0-9]*|OptimOps)\.|/KernelTest\.|InstructionSetBuildsAgree|_baseline_kernels$$
TSAN_TESTS = tandem test_data test_core test_optim test_train test_checkpoint test_serve test_dist
test-tsan:
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_SANITIZE=thread -DTANDEM_CUDA=OFF -DTANDEM_MPI=OFF \
		-DTANDEM_BENCH=OFF $(LAUNCHER) $(CMAKE_FLAGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target $(TSAN_TESTS)
	cd $(TSAN_BUILD) && OMP_NUM_THREADS=1 OMP_THREAD_LIMIT=1 GOMP_SPINCOUNT=$${GOMP_SPINCOUNT:-10000} ctest --output-on-failure --timeout 3600 -j $(JOBS) -L '$(TSAN_LABELS)' \
		$(if $(TSAN_EXCLUDE),-E '$(TSAN_EXCLUDE)')

# A wheel of the Python package with the program and the libraries they load (docs/python.md):
# dist/tandem-0.1.0-cp311-cp311-linux_x86_64.whl, built in build-pip/ (TANDEM_BUILD_DIR).
wheel:
	python3 python/build_backend/tandem_build.py dist

bench: build
	scripts/bench.sh $(BUILD)

bench-serve: build
	scripts/serve-bench.sh $(BUILD)

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp' '*.cu')

clean:
	rm -rf $(BUILD)
