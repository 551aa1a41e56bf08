#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fuzz/fuzz.sh   (make fuzz)
#
# Builds build-fuzz/ (clang, SV_FUZZ=ON) and runs each libFuzzer target
# for FUZZ_SECONDS (default 600) under nice, one after the other, from the
# committed seeds, the reproducers in fuzz/regress/ and the corpus grown
# by earlier runs (build-fuzz/fuzz/NAME/corpus). Prints one summary line
# per target (run_fuzz.sh); exit 1 if any target found a crash, whose
# input is then in build-fuzz/fuzz/NAME/artifacts/.
# Environment: FUZZ_SECONDS, FUZZ_TARGETS (default "pkt resp verbs"), JOBS.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
secs=${FUZZ_SECONDS:-600}
read -r -a targets <<<"${FUZZ_TARGETS:-pkt resp verbs}"
[ ${#targets[@]} -gt 0 ] || targets=(pkt resp verbs)
dir=build-fuzz
gen=()
if [ ! -f "$dir/CMakeCache.txt" ] && command -v ninja >/dev/null; then
	gen=(-G Ninja)
fi
mkdir -p "$dir"
cmake -S . -B "$dir" "${gen[@]}" --log-level=WARNING -DCMAKE_C_COMPILER=clang \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSV_WERROR=ON -DSV_FUZZ=ON -DSV_SANITIZE=OFF \
	-DSV_TSAN=OFF >"$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 2; }
cmake --build "$dir" -j "${JOBS:-2}" --target fuzz_all >"$dir/build.log" 2>&1 ||
	{ tail -n 50 "$dir/build.log"; exit 2; }
rc=0
for t in "${targets[@]}"; do
	if [ ! -x "$dir/fuzz/fuzz_$t" ]; then
		echo "fuzz: no target fuzz_$t (libFuzzer unavailable? see $dir/configure.log)"
		rc=1
		continue
	fi
	nice -n 10 sh fuzz/run_fuzz.sh "$dir/fuzz/fuzz_$t" "$secs" "$dir/fuzz/$t" \
		"fuzz/corpus/$t" "fuzz/regress/$t" || rc=1
done
exit $rc
