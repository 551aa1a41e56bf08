#!/bin/sh
# Our public headers must compile without warnings:
#   * C, with the library's strict warning set, under gcc and clang
#     (inline_helpers.c uses every inline helper);
#   * C++11 with -Wall -Wextra under g++ and clang++ (header_cxx.cpp).
# Compilers that are not installed are skipped.
#
#   run_header_check.sh <our_include_dir> <out_dir>
set -u
if [ $# -ne 2 ]; then
	echo "usage: $0 <our_include_dir> <out_dir>" >&2
	exit 2
fi
OURS=$1
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
STRICT="-Wall -Wextra -Wmissing-prototypes -Wshadow -Wformat=2 \
-Wstrict-prototypes -Wpointer-arith -Wcast-align -Wundef -Werror"
mkdir -p "$OUT" || exit 1
fail=0
ran=0

for cc in gcc clang; do
	command -v $cc >/dev/null 2>&1 || { echo "header: skip $cc"; continue; }
	for std in gnu11 c11 gnu99; do
		ran=$((ran + 1))
		if $cc -std=$std $STRICT -I"$OURS" -c "$HERE/inline_helpers.c" \
			-o "$OUT/hdr_$cc.o"; then
			echo "header: ok   $cc -std=$std strict"
		else
			echo "header: FAIL $cc -std=$std strict"
			fail=1
		fi
	done
done
for cxx in g++ clang++; do
	command -v $cxx >/dev/null 2>&1 || { echo "header: skip $cxx"; continue; }
	for std in c++11 c++17; do
		ran=$((ran + 1))
		if $cxx -std=$std -Wall -Wextra -Wshadow -Wcast-align -Wundef \
			-Werror -I"$OURS" -c "$HERE/header_cxx.cpp" \
			-o "$OUT/hdr_$cxx.o"; then
			echo "header: ok   $cxx -std=$std -Wall -Wextra"
		else
			echo "header: FAIL $cxx -std=$std -Wall -Wextra"
			fail=1
		fi
	done
done
echo "header: $ran builds, $([ $fail = 0 ] && echo 0 || echo some) failed"
exit $fail
