# Thin wrapper over CMake. Targets:
#   all (default)  configure + build build/ (gcc, RelWithDebInfo, -Werror)
#   check          format, lint, gcc + valgrind, clang, ASan/UBSan, TSan (label mt), fuzz stages
#                  (scripts/check.sh)
#   demo           build, then two processes on the software device: RC ping-pong,
#                  RDMA WRITE/READ, atomics, CC bounce (-U) vs DMA handles (scripts/demo.sh)
#   interop        build, then softverbs against the Linux kernel's rxe in a QEMU guest
#                  booted from Debian's packages: the full matrix of Debian's tools in
#                  both directions (tests/interop/interop.sh; INTEROP_ARGS=--quick for
#                  the CI subset; needs root, qemu-system-x86, linux-image-amd64,
#                  busybox-static, tcpdump)
#   bench          build, run build/bench/sv_bench (never part of check): tables,
#                  build/bench/results.json, and build/bench/bench.png (bench/plot.py,
#                  needs python3-matplotlib)
#   fuzz           build build-fuzz/ (clang, SV_FUZZ=ON), then run each libFuzzer
#                  target for FUZZ_SECONDS (fuzz/fuzz.sh; check runs 20 s each)
#   install        cmake --install build --prefix $(PREFIX)
#   format         clang-format -i our sources (never include/infiniband)
#   lint           codespell, cppcheck, clang --analyze (scripts/lint.sh)
#   clean          remove the build directories
# Variables: PREFIX, CHECK_STAGES (e.g. "gcc" or "gcc clang asan fuzz tsan"),
# CTEST_ARGS (passed to ctest in check), JOBS, BENCH_ARGS (sv_bench options),
# BENCH_PY (the python3 with matplotlib that draws the plot),
# FUZZ_SECONDS (per target, default 600), FUZZ_TARGETS (default: all),
# INTEROP_ARGS (tests/interop/interop.sh options).

PREFIX ?= /usr/local
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE ?= cmake
CHECK_STAGES ?= format lint gcc clang asan tsan fuzz
FUZZ_SECONDS ?= 600
BENCH_ARGS ?=
BENCH_PY ?= /usr/bin/python3
CLANG_FORMAT ?= clang-format

# Same settings as the gcc stage of check, so both share build/.
CONFIG_ARGS = -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DSV_WERROR=ON -DSV_SANITIZE=OFF -DSV_TSAN=OFF
# Ninja for a new build directory when available; an existing one keeps its generator.
GENERATOR = $(if $(wildcard $(BUILD)/CMakeCache.txt),,$(if $(shell command -v ninja),-G Ninja))

FORMAT_DIRS = src tools run tests bench examples include/softverbs include/rdma
# tests/layout holds a generated probe and rdma-core's own code: left alone.
FORMAT_FIND = find $(FORMAT_DIRS) -path tests/layout -prune -o -name '*.[ch]' -print 2>/dev/null

.PHONY: all check demo interop bench fuzz install format format-check clean

all:
	@$(CMAKE) -S . -B $(BUILD) $(GENERATOR) --log-level=WARNING $(CONFIG_ARGS) >/dev/null
	@$(CMAKE) --build $(BUILD) -j $(JOBS)

check:
	@JOBS=$(JOBS) bash scripts/check.sh $(CHECK_STAGES)

# scripts/demo.sh builds through `all` itself, quietly.
demo:
	@BUILD=$(BUILD) MAKE="$(MAKE)" bash scripts/demo.sh

# The kernel's rxe as the peer: on request only (and its --quick subset in .ci/run).
interop: all
	@bash tests/interop/interop.sh $(INTEROP_ARGS)

# Benchmarks are slow and noisy: run on request only, never by check.
# The plot is drawn even when a point failed (its figures are empty); the status is sv_bench's.
bench: all
	@st=0; $(BUILD)/bench/sv_bench --json $(BUILD)/bench/results.json $(BENCH_ARGS) || st=$$?; \
	if $(BENCH_PY) -c 'import matplotlib' 2>/dev/null; then \
		$(BENCH_PY) bench/plot.py $(BUILD)/bench/results.json $(BUILD)/bench/bench.png && \
		echo "bench: $(BUILD)/bench/results.json, plot $(BUILD)/bench/bench.png"; \
	else \
		echo "bench: $(BUILD)/bench/results.json; no plot: python3-matplotlib is missing" \
			"(apt-get install python3-matplotlib, then make bench again)"; \
	fi; exit $$st

# Long fuzzing runs: on request only, never by check (which runs 20 s per target).
fuzz:
	@FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_TARGETS="$(FUZZ_TARGETS)" JOBS=$(JOBS) bash fuzz/fuzz.sh

install: all
	$(CMAKE) --install $(BUILD) --prefix $(PREFIX)

format:
	@$(FORMAT_FIND) | xargs -r $(CLANG_FORMAT) -i

lint:
	@JOBS=$(JOBS) bash scripts/lint.sh

format-check:
	@$(FORMAT_FIND) | xargs -r $(CLANG_FORMAT) --dry-run -Werror

clean:
	rm -rf $(BUILD) build build-clang build-asan build-tsan build-fuzz
