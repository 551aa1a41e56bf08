#!/bin/sh
# header_hygiene.sh CC CXX INCLUDE_DIR OUT_DIR
#
# Every public header (include/infiniband/*.h, include/softverbs/*.h, include/rdma/*.h) must:
#  - compile on its own, included twice, as C (gnu11, c99) and, when a C++
#    compiler is given, as C++ (c++11, c++17), with strict warnings + -Werror;
#  - take every infiniband/ and softverbs/ header it includes from
#    INCLUDE_DIR, never from the system (libibverbs-dev may be installed).
set -eu

if [ $# -ne 4 ]; then
	echo "usage: header_hygiene.sh CC CXX INCLUDE_DIR OUT_DIR" >&2
	exit 2
fi
cc=$1 cxx=$2 inc=$3 out=$4

W="-Wall -Wextra -Wshadow -Wformat=2 -Wpointer-arith -Wundef -Wvla -Wwrite-strings -Werror"
CW="$W -Wmissing-prototypes -Wstrict-prototypes"
# As in CMakeLists.txt: clang's -Wcast-align flags rdma-core's verbs_get_ctx().
is_clang() { "$1" -dM -E -x c /dev/null 2>/dev/null | grep -q __clang__; }
is_clang "$cc" || CW="$CW -Wcast-align"
if [ -n "$cxx" ] && ! is_clang "$cxx"; then
	W="$W -Wcast-align"
fi

if [ ! -f "$inc/infiniband/verbs.h" ]; then
	echo "not ok - $inc/infiniband/verbs.h does not exist"
	exit 1
fi
mkdir -p "$out"

fail=0 n=0

# compile LANG STD HEADER
compile() {
	lang=$1 std=$2 hdr=$3
	base=$out/$(echo "$hdr" | tr '/.' '__')_$std
	if [ "$lang" = c ]; then
		src=$base.c comp=$cc flags="$CW"
	else
		src=$base.cc comp=$cxx flags="$W"
	fi
	{
		case $after_verbs in
		*" $hdr "*) printf '#include <infiniband/verbs.h>\n' ;;
		esac
		printf '#include <%s>\n#include <%s>\n' "$hdr" "$hdr"
		printf 'int sv_hygiene(void);\nint sv_hygiene(void)\n{\n\treturn 0;\n}\n'
	} >"$src"
	n=$((n + 1))
	# shellcheck disable=SC2086
	if ! $comp -std="$std" $flags -O2 -I"$inc" -MD -MF "$base.d" \
		-c "$src" -o "$base.o" >"$base.log" 2>&1; then
		echo "not ok $n - $hdr ($lang $std)"
		sed 's/^/#   /' "$base.log"
		fail=$((fail + 1))
		return
	fi
	foreign=$(tr ' \\' '\n\n' <"$base.d" |
		grep -E '/(infiniband|softverbs|rdma)/[^/]*$' |
		grep -v "^$inc/" || true)
	if [ -n "$foreign" ]; then
		echo "not ok $n - $hdr ($lang $std) includes headers from outside $inc:"
		echo "$foreign" | sed 's/^/#   /'
		fail=$((fail + 1))
		return
	fi
	echo "ok $n - $hdr ($lang $std)"
}

# rdma-core includes these only through verbs.h: checked after verbs.h.
after_verbs=" infiniband/verbs_api.h "

headers=
for h in "$inc"/infiniband/*.h "$inc"/softverbs/*.h "$inc"/rdma/*.h; do
	[ -f "$h" ] && headers="$headers ${h#"$inc"/}"
done

for h in $headers; do
	compile c gnu11 "$h"
	compile c c99 "$h"
done

if [ -n "$cxx" ] && command -v "$cxx" >/dev/null 2>&1; then
	for h in $headers; do
		compile cxx c++11 "$h"
		compile cxx c++17 "$h"
	done
else
	echo "# SKIP C++ checks: no C++ compiler found (install g++ to enable)"
fi

echo "1..$n"
echo "# header_hygiene: $((n - fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
