#!/bin/sh
# Layout test: our public headers against Debian's rdma-core 44 headers.
#
#   run_layout_test.sh <cc> <our_include_dir> <out_dir>
#
# Builds probe.c twice, once with -I<our_include_dir> (our headers win) and
# once against /usr/include only (Debian's libibverbs-dev), runs both and
# compares every fact the two report: they must be identical, except for
# the ones listed in expected_65_diffs.txt, which must have exactly the
# values listed there.  Then runs inline_helpers.c (behaviour of the inline
# helpers, against both headers) and rc65_facts.c (rdma-core 65 only facts,
# against ours).
# Exit status: 0 pass, 1 mismatch or build failure, 77 Debian headers absent.
set -u

if [ $# -ne 3 ]; then
	echo "usage: $0 <cc> <our_include_dir> <out_dir>" >&2
	exit 2
fi
CC=$1
OURS=$2
OUT=$3
HERE=$(cd "$(dirname "$0")" && pwd)
DEBIAN_HDR=/usr/include/infiniband/verbs.h

if [ ! -f "$OURS/infiniband/verbs.h" ]; then
	echo "layout: $OURS/infiniband/verbs.h not found" >&2
	exit 1
fi
if [ ! -f "$DEBIAN_HDR" ] || ! grep -q ib_user_ioctl_verbs.h \
	/usr/include/infiniband/verbs_api.h 2>/dev/null; then
	echo "layout: SKIP: Debian's libibverbs-dev headers are not installed"
	exit 77
fi
mkdir -p "$OUT" || exit 1

# -w: the probe compares types on purpose; warnings are not of interest.
CFLAGS="-std=gnu11 -O0 -w"

if ! $CC $CFLAGS -I"$OURS" -o "$OUT/probe_ours" "$HERE/probe.c"; then
	echo "layout: FAIL: probe.c does not build against $OURS" >&2
	exit 1
fi
if ! $CC $CFLAGS -o "$OUT/probe_debian" "$HERE/probe.c"; then
	echo "layout: FAIL: probe.c does not build against /usr/include" >&2
	exit 1
fi
"$OUT/probe_ours" > "$OUT/facts_ours.txt" || exit 1
"$OUT/probe_debian" > "$OUT/facts_debian.txt" || exit 1

awk -v expfile="$HERE/expected_65_diffs.txt" \
    -v mmfile="$OUT/mismatches.txt" '
BEGIN {
	while ((getline line < expfile) > 0) {
		if (line ~ /^[ \t]*(#|$)/)
			continue
		split(line, f, /[ \t]+/)
		exp44[f[1] " " f[2]] = f[3]
		exp65[f[1] " " f[2]] = f[4]
	}
	printf "" > mmfile
}
FNR == NR { deb[$1 " " $2] = $3; next }
{
	key = $1 " " $2
	ours[key] = $3
	if (!(key in deb)) {
		# only in ours (none expected: the probe lists 44 names)
	} else if (key in exp44) {
		nexp++
		if (deb[key] != exp44[key] || $3 != exp65[key]) {
			printf "%s: debian %s ours %s (expected %s / %s)\n",
			       key, deb[key], $3, exp44[key], exp65[key] >> mmfile
			mism++
		}
	} else {
		n++
		if (deb[key] != $3) {
			printf "%s: debian %s ours %s\n", key, deb[key], $3 >> mmfile
			mism++
		}
	}
}
END {
	for (k in deb)
		if (!(k in ours)) {
			printf "%s: missing from our probe output\n", k >> mmfile
			mism++
		}
	for (k in exp44)
		if (!(k in deb) || !(k in ours)) {
			printf "%s: expected-difference fact not reported\n", k >> mmfile
			mism++
		}
	printf "layout: %d facts compared, %d expected 44/65 differences checked, %d mismatches\n",
	       n, nexp, mism + 0
	exit (mism > 0)
}' "$OUT/facts_debian.txt" "$OUT/facts_ours.txt"
rc=$?
if [ -s "$OUT/mismatches.txt" ]; then
	sort "$OUT/mismatches.txt"
fi

# librdmacm-dev's headers (rdma/rdma_cma.h, rdma_verbs.h, rsocket.h and the
# infiniband/sa.h they use) against ours: probe_rdmacm.c, every fact equal.
if [ -f /usr/include/rdma/rdma_cma.h ] && [ -f /usr/include/infiniband/sa.h ]; then
	if ! $CC $CFLAGS -I"$OURS" -o "$OUT/probe_rdmacm_ours" "$HERE/probe_rdmacm.c" ||
		! $CC $CFLAGS -o "$OUT/probe_rdmacm_debian" "$HERE/probe_rdmacm.c"; then
		echo "layout: FAIL: probe_rdmacm.c does not build" >&2
		exit 1
	fi
	"$OUT/probe_rdmacm_ours" >"$OUT/facts_rdmacm_ours.txt" || exit 1
	"$OUT/probe_rdmacm_debian" >"$OUT/facts_rdmacm_debian.txt" || exit 1
	if diff "$OUT/facts_rdmacm_debian.txt" "$OUT/facts_rdmacm_ours.txt" \
		>"$OUT/mismatches_rdmacm.txt"; then
		echo "layout: rdmacm headers: $(wc -l <"$OUT/facts_rdmacm_debian.txt") facts compared, 0 mismatches"
	else
		echo "layout: rdmacm headers: mismatches (< debian, > ours):"
		cat "$OUT/mismatches_rdmacm.txt"
		rc=1
	fi
else
	echo "layout: rdmacm headers: not compared, Debian's librdmacm-dev is not installed"
fi

# Behaviour of the inline helpers: ours (with the strict warning set the
# library uses) and, as a cross-check of the test's expectations, Debian's.
STRICT="-Wall -Wextra -Wmissing-prototypes -Wshadow -Wformat=2 \
-Wstrict-prototypes -Wpointer-arith -Wcast-align -Wundef -Werror"
if ! $CC -std=gnu11 -O2 $STRICT -I"$OURS" -o "$OUT/inline_ours" \
	"$HERE/inline_helpers.c"; then
	echo "inline_helpers: FAIL: does not build against $OURS" >&2
	exit 1
fi
if ! $CC -std=gnu11 -O2 -w -o "$OUT/inline_debian" "$HERE/inline_helpers.c"; then
	echo "inline_helpers: FAIL: does not build against /usr/include" >&2
	exit 1
fi
printf "ours:   "; "$OUT/inline_ours" || rc=1
printf "debian: "; "$OUT/inline_debian" || rc=1

# rdma-core 65 facts, against our headers only
if ! $CC -std=gnu11 -Wall -Wextra -Werror -I"$OURS" \
	-o "$OUT/rc65_facts" "$HERE/rc65_facts.c"; then
	echo "rc65_facts: FAIL: does not build" >&2
	exit 1
fi
if ! "$OUT/rc65_facts"; then
	rc=1
fi
exit $rc
