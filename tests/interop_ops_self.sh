#!/bin/sh
# SPDX-License-Identifier: MIT
# interop_ops_self.sh LIBDIR PROGRAM
#
# tests/interop/iop_rdma_ops (PROGRAM), the interop matrix's memory-window,
# ATOMIC WRITE and FLUSH program, between a server and a client process on
# softverbs itself (LIBDIR's libibverbs.so.1), for each of its tests: both
# exit 0 with "all N checks passed"; the client of mw2 and mw1 expected one
# error completion (its WRITE with the dead key) and the device counted
# exactly that many. So the matrix's program is known to pass against
# softverbs before it meets rxe (tests/interop/runs.sh).
set -u
. "$(dirname "$0")/tap.sh"

[ $# -eq 2 ] || { echo "usage: interop_ops_self.sh LIBDIR PROGRAM" >&2; exit 2; }
libdir=$(cd "$1" && pwd -P) || exit 2
prog=$2
command -v timeout >/dev/null || skip "no timeout(1)"
. "$(dirname "$0")/clean_env.sh" # no inherited SOFTVERBS_* but SV_TEST_SHM
export LD_LIBRARY_PATH="$libdir" SOFTVERBS_STATS=1

tmp=$(mktemp -d)
spid=''
cleanup() {
	[ -z "$spid" ] || kill "$spid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# listening PORT: a TCP socket listens on PORT
listening() {
	hex=$(printf ':%04X ' "$1")
	cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v p="$hex" '
		index($2 " ", p) && $4 == "0A" { found = 1 } END { exit !found }'
}

k=0
for t in mw2 mw1 awrite flush; do
	k=$((k + 1))
	port=$((20000 + ($$ * 7 + k * 131) % 40000))
	while listening "$port"; do port=$((port + 1)); done
	timeout -k 5 120 "$prog" -d softverbs0 -g 0 -p "$port" -t "$t" \
		>"$tmp/server.out" 2>"$tmp/server.err" &
	spid=$!
	i=0
	while ! listening "$port" && kill -0 "$spid" 2>/dev/null && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	timeout -k 5 120 "$prog" -d softverbs0 -g 0 -p "$port" -t "$t" 127.0.0.1 \
		>"$tmp/client.out" 2>"$tmp/client.err"
	crc=$?
	wait "$spid"
	src=$?
	spid=''
	errs=$(sed -n "s/^softverbs:   completions errors \([0-9]*\).*/\1/p" "$tmp/client.err" |
		awk '{ s += $1 } END { print s + 0 }')
	want=0
	case $t in mw*) want=1 ;; esac
	why=''
	[ "$src" = 0 ] && grep -q '^iop_rdma_ops: all [0-9]* checks passed' "$tmp/server.out" ||
		why="$why; server exit $src"
	[ "$crc" = 0 ] && grep -q '^iop_rdma_ops: all [0-9]* checks passed' "$tmp/client.out" ||
		why="$why; client exit $crc"
	grep -q "^iop_rdma_ops: expected error completions: $want\$" "$tmp/client.out" ||
		why="$why; the client did not expect $want error completions"
	[ "$errs" = "$want" ] || why="$why; softverbs counted $errs error completions on the client, not $want"
	what="iop_rdma_ops -t $t: $(grep -c ': ok - ' "$tmp/server.out") server and $(grep -c ': ok - ' "$tmp/client.out") client checks"
	if [ -z "$why" ]; then
		ok "$what"
	else
		not_ok "$what: ${why#; }"
		for f in server.out server.err client.out client.err; do
			echo "#   == $f"
			head -n 40 "$tmp/$f" | sed 's/^/#   /'
		done
	fi
done
tap_done
