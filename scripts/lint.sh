#!/usr/bin/env bash
# scripts/lint.sh    (make lint; the "lint" stage of make check)
#
# Static checks that the compilers' -Werror does not cover:
#   codespell      every text file we write (known terms in .codespell-ignore)
#   cppcheck       src/ (warning, portability and performance checks)
#   clang analyzer src/ (clang --analyze, every default checker)
# The library's own -Wconversion -Wcast-qual are part of its build (CMakeLists.txt).
# Prints each finding; last line "lint: N findings"; exit 1 if there are any,
# 2 if a tool is missing (apt-get install codespell cppcheck clang).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
JOBS=${JOBS:-$(nproc)}

for t in codespell cppcheck clang; do
	if ! command -v "$t" >/dev/null; then
		echo "lint: $t is missing (apt-get install codespell cppcheck clang)"
		exit 2
	fi
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

codespell -I .codespell-ignore -S "./fuzz/corpus,./fuzz/regress,./tests/data,*.pcap,*.png" src include/softverbs tests docs man examples tools bench \
	scripts fuzz/*.c fuzz/*.sh README.md Makefile CMakeLists.txt .ci >"$out/codespell" 2>&1

# cppcheck sees no system headers: give it the three limits the headers test
cppcheck --quiet --std=c11 --enable=warning,portability,performance --inline-suppr \
	-Iinclude -Isrc -DUINTPTR_MAX=0xffffffffffffffffUL -DUINT64_MAX=0xffffffffffffffffUL \
	-DUINT32_MAX=0xffffffffU -j "$JOBS" --template='{file}:{line}: {severity}: {message} [{id}]' \
	src >"$out/cppcheck" 2>&1

find src -name '*.c' -print0 | sort -z |
	xargs -0 -r -n 1 -P "$JOBS" sh -c \
		'clang --analyze -std=gnu11 -Iinclude -Isrc -D_GNU_SOURCE "$1" -o /dev/null 2>&1 |
			grep "warning:" || true' sh >"$out/analyze"

n=0
for f in codespell cppcheck analyze; do
	c=$(grep -c . "$out/$f")
	if [ "$c" -gt 0 ]; then
		echo "== lint: $f"
		cat "$out/$f"
	fi
	n=$((n + c))
done
echo "lint: $n findings"
[ "$n" -eq 0 ]
