#!/usr/bin/env bash
# scripts/check.sh [STAGE ...]    (make check; default stages: format gcc clang asan tsan fuzz)
#
#   format (no build) clang-format --dry-run over our sources (make format-check);
#                        one check, failed by any violation (make format fixes it)
#   lint   (no build) scripts/lint.sh: codespell, cppcheck and clang --analyze;
#                        one check, failed by any finding
#   gcc    build/        gcc, RelWithDebInfo, -Werror; all tests (memcheck too)
#   clang  build-clang/  clang, RelWithDebInfo, -Werror; tests without memcheck,
#                        with the same-host link off (SOFTVERBS_SHM=0): every
#                        test then runs over UDP, as between two hosts
#   asan   build-asan/   gcc, Debug, ASan+UBSan; tests without memcheck
#   tsan   build-tsan/   gcc, RelWithDebInfo, TSan; every test but memcheck variants and
#                        those labelled no_tsan (TSan cannot follow them: fork after
#                        threads); suppressions only for placements into app memory
#                        (tests/tsan.supp)
#   fuzz   build-fuzz/   clang, SV_FUZZ=ON: the fuzz targets only, a bounded
#                        libFuzzer run of each (ctest label fuzz, fuzz/)
#
# Stops at the first stage that fails. Build logs are shown only on error.
# Last line: "check: N passed, N failed, N skipped", summed over the stages;
# before it, the "pyverbs: ..." closing line of tests/pyverbs_suite.sh if it ran.
# Environment: JOBS (build jobs, default nproc), CTEST_JOBS (default 2),
# CTEST_ARGS (extra ctest arguments, e.g. "-R api_").
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

JOBS=${JOBS:-$(nproc)}
CTEST_JOBS=${CTEST_JOBS:-2}
read -r -a extra_ctest <<<"${CTEST_ARGS:-}"
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(format lint gcc clang asan tsan fuzz)

passed=0 failed=0 skipped=0
pyverbs_lines= # closing lines of tests/pyverbs_suite.sh, shown again by finish

now_ms() { local t=${EPOCHREALTIME//[!0-9]/}; echo $((10#$t / 1000)); }
secs() { printf '%d.%ds' $(($1 / 1000)) $(($1 % 1000 / 100)); }

finish() {
	[ -z "$pyverbs_lines" ] || printf '%s' "$pyverbs_lines" | awk '!seen[$0]++'
	echo "check: $passed passed, $failed failed, $skipped skipped"
	exit "$1"
}

# junit_attr FILE ATTR: attribute of the <testsuite> element
junit_attr() {
	tr '\n' ' ' <"$1" | sed -n "s/.*<testsuite [^>]*[[:space:]]$2=\"\\([0-9]*\\)\".*/\\1/p"
}

# format: the sources as `make format` leaves them (counted as one check)
stage_format() {
	local out
	if ! command -v "${CLANG_FORMAT:-clang-format}" >/dev/null; then
		echo "check: stage format: clang-format is missing (apt-get install clang-format)"
		failed=$((failed + 1))
		finish 1
	fi
	if out=$(make -s --no-print-directory format-check 2>&1); then
		echo "== format: clean"
		passed=$((passed + 1))
		return
	fi
	printf '%s\n' "$out" | grep 'error:' | head -n 40
	echo "check: stage format: $(printf '%s\n' "$out" | grep -c 'error:') violations" \
		"in $(printf '%s\n' "$out" | grep 'error:' | cut -d: -f1 | sort -u | wc -l) files (make format fixes them)"
	failed=$((failed + 1))
	finish 1
}

# lint: scripts/lint.sh finds nothing (counted as one check)
stage_lint() {
	local t0 t1
	t0=$(now_ms)
	mkdir -p build
	if JOBS=$JOBS bash scripts/lint.sh >build/lint.log 2>&1; then
		t1=$(now_ms)
		echo "== lint: clean ($(secs $((t1 - t0))))"
		passed=$((passed + 1))
		return
	fi
	cat build/lint.log
	echo "check: stage lint failed"
	failed=$((failed + 1))
	finish 1
}

for stage in "${stages[@]}"; do
	if [ "$stage" = format ]; then
		stage_format
		continue
	fi
	if [ "$stage" = lint ]; then
		stage_lint
		continue
	fi
	off=(-DSV_SANITIZE=OFF -DSV_TSAN=OFF)
	ctest_sel=(-LE memcheck)
	targets=()
	shm=1
	case $stage in
	gcc) dir=build cc=gcc args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSV_WERROR=ON "${off[@]}")
		ctest_sel=() ;;
	clang) dir=build-clang cc=clang
		args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSV_WERROR=ON "${off[@]}") shm=0
		# C++ compiler of the header_hygiene test (only checked, never required)
		if command -v clang++ >/dev/null; then args+=(-DCMAKE_CXX_COMPILER=clang++); fi ;;
	asan) dir=build-asan cc=gcc
		args=(-DCMAKE_BUILD_TYPE=Debug -DSV_WERROR=OFF -DSV_SANITIZE=ON -DSV_TSAN=OFF) ;;
	tsan) dir=build-tsan cc=gcc
		args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSV_WERROR=OFF -DSV_SANITIZE=OFF -DSV_TSAN=ON)
		ctest_sel=(-LE 'memcheck|no_tsan') ;;
	fuzz) dir=build-fuzz cc=clang
		args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSV_WERROR=ON -DSV_FUZZ=ON "${off[@]}")
		targets=(--target fuzz_all) ctest_sel=(-L fuzz) ;;
	*) echo "check: unknown stage '$stage' (format, lint, gcc, clang, asan, tsan, fuzz)" >&2
		finish 2 ;;
	esac

	mkdir -p "$dir"
	gen=()
	if [ ! -f "$dir/CMakeCache.txt" ] && command -v ninja >/dev/null; then
		gen=(-G Ninja)
	fi

	t0=$(now_ms)
	if ! cmake -S . -B "$dir" "${gen[@]}" --log-level=WARNING \
		-DCMAKE_C_COMPILER="$cc" "${args[@]}" >"$dir/configure.log" 2>&1; then
		cat "$dir/configure.log"
		echo "check: stage $stage: configure failed (log: $dir/configure.log)"
		failed=$((failed + 1))
		finish 1
	fi
	t1=$(now_ms)
	if ! cmake --build "$dir" -j "$JOBS" "${targets[@]}" >"$dir/build.log" 2>&1; then
		grep -v '^\[[0-9/]*\] ' "$dir/build.log" | tail -n 200
		echo "check: stage $stage: build failed (log: $dir/build.log)"
		failed=$((failed + 1))
		finish 1
	fi
	nwarn=$(grep -c 'warning:' "$dir/build.log")
	if [ "$nwarn" -gt 0 ]; then
		echo "== $stage: $nwarn compiler warnings:"
		grep 'warning:' "$dir/build.log" | head -n 50
	fi
	t2=$(now_ms)

	echo "== $stage: ctest in $dir/"
	junit=$PWD/$dir/ctest-junit.xml
	rm -f "$junit" "$dir/tests/pyverbs_suite.summary"
	[ $shm = 1 ] || echo "== $stage: SOFTVERBS_SHM=0 (UDP only)"
	SV_TEST_SHM=$shm SOFTVERBS_SHM=$shm ctest --test-dir "$dir" --output-on-failure -j "$CTEST_JOBS" --no-tests=error \
		--output-junit "$junit" "${ctest_sel[@]}" "${extra_ctest[@]}"
	rc=$?
	t3=$(now_ms)
	if [ -f "$dir/tests/pyverbs_suite.summary" ]; then
		pyverbs_lines+=$(cat "$dir/tests/pyverbs_suite.summary")$'\n'
	fi

	if [ -f "$junit" ]; then
		n=$(junit_attr "$junit" tests) f=$(junit_attr "$junit" failures)
		s=$(junit_attr "$junit" skipped) d=$(junit_attr "$junit" disabled)
		n=${n:-0} f=${f:-0} s=$((${s:-0} + ${d:-0}))
		passed=$((passed + n - f - s)) failed=$((failed + f)) skipped=$((skipped + s))
	else
		f=?
	fi
	echo "== $stage: configure $(secs $((t1 - t0))), build $(secs $((t2 - t1)))," \
		"test $(secs $((t3 - t2)))"
	if [ "$rc" -ne 0 ]; then
		case $f in 0 | '?') failed=$((failed + 1)) ;; esac # no failed test counted
		echo "check: stage $stage failed"
		finish 1
	fi
done
finish 0
