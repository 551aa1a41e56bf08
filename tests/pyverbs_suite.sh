#!/bin/sh
# pyverbs_suite.sh LIBDIR SUMMARY [sanitized]
#
# rdma-core's own Python test suite, as Debian's python3-pyverbs ships it
# (/usr/share/doc/rdma-core/tests, some files gzipped), run by the system
# python against the libibverbs.so.1 in LIBDIR (LD_LIBRARY_PATH) on the
# software device, under a name only it can have (SOFTVERBS_DEV_NAME=svpy0).
# The suite is copied (and decompressed) into a temporary directory; no
# system file is touched. tests/pyverbs_suite.py runs it, with the tests a
# software device can never pass excluded there, each with its reason.
#
# The last line is "pyverbs: N passed, N failed, N errors, N skipped",
# also written alone to the file SUMMARY (removed first), which
# scripts/check.sh shows again at the end of make check. Exit 0 with
# no failure and no error, 1 otherwise (also on a timeout), 77 (skipped)
# with the reason when python3-pyverbs is missing or the build is
# sanitized: an uninstrumented python cannot load an ASan/TSan library.
set -u
. "$(dirname "$0")/tap.sh"

if [ $# -lt 2 ]; then
	echo "usage: pyverbs_suite.sh LIBDIR SUMMARY [sanitized]" >&2
	exit 2
fi
libdir=$(cd "$1" && pwd -P) || exit 2
summary=$2
sanitized=${3:-}
rm -f "$summary"

here=$(cd "$(dirname "$0")" && pwd -P)
src=${SV_PYVERBS_TESTS:-/usr/share/doc/rdma-core/tests}
py=/usr/bin/python3
limit=${SV_PYVERBS_TIMEOUT:-240}

[ "$sanitized" = sanitized ] &&
	skip "sanitized build: the uninstrumented system python cannot load an instrumented libibverbs.so.1"
[ -x "$py" ] || skip "no system python at $py"
"$py" -c 'import pyverbs.device' 2>/dev/null ||
	skip "python3-pyverbs is not installed (apt-get install python3-pyverbs)"
[ -f "$src/run_tests.py" ] || skip "no rdma-core test suite at $src (python3-pyverbs)"
[ -e "$libdir/libibverbs.so.1" ] || { echo "not ok - no $libdir/libibverbs.so.1"; exit 1; }

. "$(dirname "$0")/clean_env.sh" # no inherited SOFTVERBS_* but SV_TEST_SHM
dev=svpy0
export SOFTVERBS_DEV_NAME=$dev
export LD_LIBRARY_PATH="$libdir"
export PYTHONDONTWRITEBYTECODE=1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/tests"
for f in "$src"/*; do
	[ -f "$f" ] || continue
	case $f in
	*.gz) gzip -dc "$f" >"$tmp/tests/$(basename "$f" .gz)" || exit 1 ;;
	*) cp "$f" "$tmp/tests/" || exit 1 ;;
	esac
done

cd "$tmp" || exit 1
# SV_PYVERBS_RUN=PATH: the suite under that softverbs-run (its tree and
# /dev/infiniband; the skips that needs no more are not skipped)
timeout -k 10 "$limit" ${SV_PYVERBS_RUN:+"$SV_PYVERBS_RUN" --} "$py" "$here/pyverbs_suite.py" \
	"$tmp/tests" "$dev" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
if ! tail -n 1 "$tmp/out" | grep -q '^pyverbs: [0-9]* passed'; then
	[ "$rc" -eq 124 ] && echo "# the suite did not finish in ${limit}s"
	echo "pyverbs: the suite did not finish (exit code $rc)" | tee "$summary"
	exit 1
fi
tail -n 1 "$tmp/out" >"$summary"
exit "$rc"
