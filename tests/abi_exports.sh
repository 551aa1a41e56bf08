#!/bin/sh
# abi_exports.sh LIBRARY MAP strict|report [PRIVATE_NODES]
#
# Compares the dynamic symbol table of LIBRARY with the version script MAP:
#  - every name of MAP must be exported as NAME@@NODE of its node;
#  - nothing else may be exported, except non-default compat aliases
#    (NAME@NODE) of names that MAP lists;
#  - the version nodes and their parents must be defined as in MAP;
#  - with PRIVATE_NODES (tests/abi_private_nodes.txt: "NODE NAME" lines),
#    the IBVERBS_PRIVATE_* nodes must hold exactly those names, counting
#    default versions and aliases alike.
# Missing names fail in "strict" mode; in "report" mode they are listed and
# the test is skipped (exit 77) while the library is incomplete.
set -eu

if [ $# -lt 3 ] || [ $# -gt 4 ]; then
	echo "usage: abi_exports.sh LIBRARY MAP strict|report [PRIVATE_NODES]" >&2
	exit 2
fi
lib=$1 map=$2 mode=$3 private=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "NODE NAME" for every global name; "NODE -> PARENT" for inheritance.
sed -e 's,/\*.*\*/,,g' "$map" | awk -v pairs="$tmp/want" -v tree="$tmp/want_tree" '
	/^[ \t]*[A-Za-z0-9_.]+[ \t]*\{/ { node = $1; sub(/\{.*/, "", node); next }
	/^[ \t]*\}/ {
		p = $0; gsub(/[} \t;]/, "", p)
		print node " -> " (p == "" ? "-" : p) > tree; next }
	/^[ \t]*(global|local):/ { next }
	/^[ \t]*[A-Za-z_][A-Za-z0-9_]*[ \t]*;/ {
		s = $1; sub(/;.*/, "", s); print node " " s > pairs }'
sort -o "$tmp/want" "$tmp/want"

readelf -W --dyn-syms "$lib" | awk -v have="$tmp/have" -v compat="$tmp/compat" \
	-v unver="$tmp/unversioned" '
	$7 == "UND" || NF < 8 || $5 == "LOCAL" { next }
	$7 == "ABS" && $8 !~ /@/ { next } # the symbols naming the version nodes
	$1 ~ /^[0-9]+:$/ {
		name = $8
		if (index(name, "@@")) {
			split(name, a, "@@")
			if (a[1] != a[2]) print a[2] " " a[1] > have
		} else if (index(name, "@")) {
			split(name, a, "@"); print a[2] " " a[1] > compat
		} else if ($4 != "SECTION" && $4 != "FILE") {
			print name > unver
		}
	}'
touch "$tmp/have" "$tmp/compat" "$tmp/unversioned"
sort -o "$tmp/have" "$tmp/have"

readelf -W -V "$lib" | awk '
	function flush() { if (node != "") print node " -> " parent; node = "" }
	/Version definition section/ { d = 1; next }
	/Version needs section/ { flush(); d = 0 }
	d && /Name:/ {
		flush()
		if ($0 ~ /Flags: BASE/) next
		node = $NF; parent = "-" }
	d && /Parent 1:/ { parent = $NF }
	END { flush() }' | sort >"$tmp/have_tree"
sort -o "$tmp/want_tree" "$tmp/want_tree"

fail=0
missing=$(comm -23 "$tmp/want" "$tmp/have" | wc -l)
extra=$(comm -13 "$tmp/want" "$tmp/have")
total=$(wc -l <"$tmp/want")

if [ -s "$tmp/unversioned" ]; then
	echo "not ok - unversioned exports:"; sed 's/^/#   /' "$tmp/unversioned"
	fail=1
fi
if [ -n "$extra" ]; then
	echo "not ok - exported but not in $map (or in another node):"
	echo "$extra" | sed 's/^/#   /'
	fail=1
fi
# Debian's library also has the compat-only ibv_register_driver@IBVERBS_1.1.
{ awk '{ print $2 }' "$tmp/want"; echo ibv_register_driver; } | sort -u >"$tmp/names"
bad_compat=$(awk '{ print $2 }' "$tmp/compat" | sort -u | comm -23 - "$tmp/names")
if [ -n "$bad_compat" ]; then
	echo "not ok - compat aliases of names the map does not list:"
	echo "$bad_compat" | sed 's/^/#   /'
	fail=1
fi
if [ "$(wc -l <"$tmp/have")" -gt 0 ] &&
	! cmp -s "$tmp/want_tree" "$tmp/have_tree"; then
	echo "not ok - version nodes differ (want vs have):"
	diff "$tmp/want_tree" "$tmp/have_tree" | sed 's/^/#   /' || true
	fail=1
fi
if [ -n "$private" ]; then
	grep -v '^#' "$private" | awk 'NF == 2' | LC_ALL=C sort >"$tmp/private_want"
	cat "$tmp/have" "$tmp/compat" | awk '$1 ~ /^IBVERBS_PRIVATE_/' | LC_ALL=C sort \
		>"$tmp/private_have"
	if ! cmp -s "$tmp/private_want" "$tmp/private_have"; then
		echo "not ok - private nodes differ from $private (- wanted, + exported):"
		diff "$tmp/private_want" "$tmp/private_have" | grep '^[<>]' |
			sed -e 's/^</#   -/' -e 's/^>/#   +/' || true
		fail=1
	else
		awk '{ n[$1]++ } END { for (k in n) printf "# %s: %d names\n", k, n[k] }' \
			"$tmp/private_have" | LC_ALL=C sort
	fi
fi
echo "# $((total - missing)) of $total names of the map exported," \
	"$(wc -l <"$tmp/compat") compat aliases"
[ "$fail" -eq 0 ] || exit 1

if [ "$missing" -gt 0 ]; then
	echo "# not exported yet:"
	comm -23 "$tmp/want" "$tmp/have" | sed 's/^/#   /'
	if [ "$mode" = strict ]; then
		echo "not ok - $missing names of the map are not exported"
		exit 1
	fi
	echo "1..0 # SKIP $missing of $total names not exported yet"
	exit 77
fi
echo "ok - all $total names exported at their nodes"
