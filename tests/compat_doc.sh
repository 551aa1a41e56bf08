#!/bin/sh
# compat_doc.sh MAP DOC
#
# docs/compatibility.md keeps a table row for every name of the version
# script, at its node: "| `NAME` | NODE | STATUS | ... |", where NODE is the
# node without its "IBVERBS_" prefix. Fails naming every name that has no
# such row (a new export must be documented with its status).
set -eu

if [ $# -ne 2 ]; then
	echo "usage: compat_doc.sh MAP DOC" >&2
	exit 2
fi
map=$1 doc=$2
[ -f "$doc" ] || { echo "not ok - $doc is missing"; exit 1; }

sed -e 's,/\*.*\*/,,g' "$map" | awk '
	/^[ \t]*[A-Za-z0-9_.]+[ \t]*\{/ { node = $1; sub(/\{.*/, "", node); next }
	/^[ \t]*(global|local):/ { next }
	/^[ \t]*[A-Za-z_][A-Za-z0-9_]*[ \t]*;/ {
		s = $1; sub(/;.*/, "", s); sub(/^IBVERBS_/, "", node); print node " " s }' |
	{
		total=0 missing=0
		while read -r node name; do
			total=$((total + 1))
			if ! grep -Fq "| \`$name\` | $node |" "$doc"; then
				echo "# no row '| \`$name\` | $node |'"
				missing=$((missing + 1))
			fi
		done
		if [ "$missing" -gt 0 ]; then
			echo "not ok - $missing of $total names of $map lack a row in $doc"
			exit 1
		fi
		echo "ok - all $total names of $map documented at their nodes"
	}
