#!/bin/sh
# repo_self_contained.sh SRCDIR
#
# Every rule the code and the docs cite must be in the repository: a
# newcomer who clones it has nothing else. Fails on any tracked text file
# (git ls-files; without git, every file under SRCDIR outside .git and the
# build directories) that points outside the repository:
#   - a path into the workspace the project was written in: "/work/",
#     "../shared", "shared/spec", "shared/seeds", "shared/design";
#   - a design document by its bare name (behaviour.md, behavior.md,
#     abi.md, abi-private.md, rdmacm.md), the way such outside specs were
#     cited;
#   - docs/NAME.md where the repository has no such file.
# Cite docs/seed-apis.md, docs/compatibility.md or another file of docs/
# instead, or write the rule in the comment itself.
set -u

if [ $# -ne 1 ]; then
	echo "usage: repo_self_contained.sh SRCDIR" >&2
	exit 2
fi
. "$(dirname "$0")/tap.sh"
cd "$1" || exit 2

self=tests/repo_self_contained.sh
list=$(mktemp) || exit 2
hits=$(mktemp) || exit 2
trap 'rm -f "$list" "$hits"' EXIT

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git ls-files >"$list"
	how="git ls-files"
else
	find . -path ./.git -prune -o -path './build*' -prune -o -type f -print |
		sed 's,^\./,,' | sort >"$list"
	how="find (no git)"
fi
nfiles=$(wc -l <"$list")

# grep_tracked ERE: "file:line:text" of every match in the tracked text files (-I: not binaries)
grep_tracked() {
	grep -v -x -F "$self" "$list" | tr '\n' '\0' | xargs -0 grep -n -I -E -- "$1" 2>/dev/null
}

# 1. paths into the workspace outside the repository
grep_tracked '/work/|\.\./shared|shared/(spec|seeds|design|hooks)' >"$hits"
if [ -s "$hits" ]; then
	sed 's/^/# /' "$hits"
	not_ok "$(wc -l <"$hits") lines point into the workspace outside the repository" \
		"(/work/, ../shared, shared/spec, ...): cite a file of docs/ (docs/seed-apis.md," \
		"docs/compatibility.md) or write the rule where it is used"
else
	ok "no path into the workspace outside the repository"
fi

# 2. outside design documents cited by their bare name
grep_tracked '(^|[^A-Za-z0-9_./-])(behaviou?r|abi|abi-private|rdmacm)\.md' >"$hits"
if [ -s "$hits" ]; then
	sed 's/^/# /' "$hits"
	not_ok "$(wc -l <"$hits") lines cite a design document that is not in the repository" \
		"(behaviour.md, abi.md, abi-private.md, rdmacm.md): cite docs/seed-apis.md," \
		"docs/compatibility.md or another file of docs/ by its path"
else
	ok "no outside design document cited by name"
fi

# 3. docs/NAME.md that does not exist
grep_tracked 'docs/[A-Za-z0-9_.-]+\.md' |
	while IFS= read -r line; do
		where=${line%%:*}
		rest=${line#*:}
		lineno=${rest%%:*}
		printf '%s\n' "$rest" | grep -o -E 'docs/[A-Za-z0-9_.-]+\.md' |
			while read -r doc; do
				[ -f "$doc" ] || echo "$where:$lineno: $doc"
			done
	done >"$hits"
if [ -s "$hits" ]; then
	sed 's/^/# /' "$hits"
	not_ok "$(wc -l <"$hits") references to a docs/ file the repository does not have:" \
		"add the document or cite one that exists"
else
	ok "every docs/NAME.md cited exists"
fi

echo "# $nfiles files ($how)"
tap_done
