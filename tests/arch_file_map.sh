#!/bin/sh
# arch_file_map.sh SRCDIR
#
# docs/architecture.md, section "File map", lists every file under src/:
# a heading "### `src/FOLDER/`" per folder, then one line per file,
# "- `NAME`: what it is for". Compares that list with the tree (git
# ls-files src, or find without git) and fails on a file the map lacks,
# an entry with no file, an entry listed twice, or an entry without its
# one-line purpose; each failure says which line to add, remove or fix.
set -u
. "$(dirname "$0")/tap.sh"

if [ $# -ne 1 ]; then
	echo "usage: arch_file_map.sh SRCDIR" >&2
	exit 2
fi
cd "$1" || exit 2
doc=docs/architecture.md
[ -f "$doc" ] || {
	echo "not ok 1 - $doc is missing"
	echo "1..1"
	exit 1
}

tree=$(mktemp) || exit 2
map=$(mktemp) || exit 2
trap 'rm -f "$tree" "$map"' EXIT

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git ls-files src | sort >"$tree"
else
	find src -type f | sort >"$tree"
fi

# "PATH<TAB>PURPOSE" for every entry of the section "## File map"
awk '
	/^## / { in_map = ($0 == "## File map"); next }
	!in_map { next }
	/^### / {
		dir = $0; sub(/^### +`/, "", dir); sub(/`.*/, "", dir)
		if (dir !~ /\/$/) dir = dir "/"
		next
	}
	/^- `[^`]+`/ {
		name = $0; sub(/^- `/, "", name); sub(/`.*/, "", name)
		purpose = $0; sub(/^- `[^`]+`:?[ \t]*/, "", purpose)
		print dir name "\t" purpose
	}' "$doc" >"$map"

if [ ! -s "$map" ]; then
	not_ok "$doc has no section \"## File map\" with entries (\"- \`NAME\`: purpose\" under \"### \`src/FOLDER/\`\")"
	tap_done
	exit
fi

# files of the tree that the map lacks
missing=0
for f in $(cut -f1 "$map" | sort | comm -23 "$tree" -); do
	missing=$((missing + 1))
	echo "# $f is not in the file map of $doc: under the heading ### \`$(dirname "$f")/\`" \
		"(add the heading if the folder is new), add the line"
	echo "#     - \`$(basename "$f")\`: <what it is for, in one line>"
done
if [ "$missing" -eq 0 ]; then
	ok "every file under src/ is in the file map of $doc"
else
	not_ok "$missing files under src/ are missing from the file map of $doc (lines to add above)"
fi

# entries without a file
extra=0
for f in $(cut -f1 "$map" | sort -u | comm -13 "$tree" -); do
	extra=$((extra + 1))
	echo "# the file map of $doc lists $f, which does not exist: remove the line" \
		"\"- \`$(basename "$f")\`\" under ### \`$(dirname "$f")/\`, or fix its name or folder"
done
if [ "$extra" -eq 0 ]; then
	ok "every entry of the file map names a file"
else
	not_ok "$extra entries of the file map of $doc name no file (lines to remove above)"
fi

# entries twice, or without a purpose
bad=0
for f in $(cut -f1 "$map" | sort | uniq -d); do
	bad=$((bad + 1))
	echo "# $f is listed more than once in the file map of $doc: keep one line"
done
for f in $(awk -F '\t' '$2 == "" { print $1 }' "$map"); do
	bad=$((bad + 1))
	echo "# $f has no purpose in the file map of $doc: write \"- \`$(basename "$f")\`: <what it is for>\""
done
if [ "$bad" -eq 0 ]; then
	ok "$(wc -l <"$map") entries, each once and with its purpose"
else
	not_ok "$bad entries of the file map of $doc are listed twice or lack a purpose"
fi
tap_done
