#!/bin/sh
# tests/clients/ucx.sh SOFTVERBS_RUN CASE [sanitized]
#
# Debian's unmodified UCX 1.13 (ucx-utils) on the software device through
# softverbs-run, with UCX's defaults (nothing but UCX_TLS where a case
# names it):
#   info  ucx_info -d lists softverbs0:1 with rc_verbs and ud_verbs, and
#         (where the host has no /dev/infiniband/uverbs0) does not without
#         softverbs-run: UCX keeps a verbs device only if that node exists;
#   rc    ucx_perftest, a server and a client process, -x rc_verbs: put,
#         get, active messages (short, bcopy, zcopy) and atomics (add,
#         fetch-add, compare-swap), latency and bandwidth;
#   ud    the same over ud_verbs (active messages: all UD offers);
#   ucp   UCP with UCX_TLS=rc,ud: tag matching eager and rendezvous, put,
#         get, atomics, streams and active messages with ucx_perftest, and
#         io_demo with its data integrity check (-q) on every transfer
#         (UCX_TLS=rc,ud,tcp: its listener needs UCX's TCP connection
#         manager; the data must go over RC QPs).
# Each ucx_perftest run must exit 0 on both sides and its final row must
# have the iteration count asked for and nonzero figures (its latency
# tests move a sequence number through the data, so a lost or misplaced
# write stalls them); the QPs' counters (SOFTVERBS_STATS=1) must show
# traffic over softverbs, of the QP type the case names. Exit 77 (skipped)
# when ucx-utils is not installed or the build is sanitized.
set -u
if [ $# -lt 2 ]; then
	echo "usage: ucx.sh SOFTVERBS_RUN CASE [sanitized]" >&2
	exit 2
fi
run=$1 what=$2 sanitized=${3:-}
. "$(dirname "$0")/common.sh"
need ucx-utils ucx_info ucx_perftest
dev=softverbs0:1

# qp_traffic FILE TYPE: FILE has a per-QP counter line of TYPE with traffic
qp_traffic() {
	grep -Eq "softverbs: softverbs0 QP 0x[0-9a-f]+ $2: tx [1-9][0-9]* pkts" "$1"
}

# perf NAME ITERS ARGS...: one ucx_perftest server and client
perf() {
	name=$1 iters=$2
	shift 2
	if ! start_listening "$tmp/server.out" ucx_perftest -p @PORT@ "$@"; then
		not_ok "$name: the server did not listen on $port"
		show "$tmp/server.out"
		return
	fi
	sv ucx_perftest 127.0.0.1 -p "$port" -n "$iters" -w 50 -f "$@" >"$tmp/client.out" 2>&1
	crc=$?
	stop_server
	src=$?
	row=$(awk -v it="$iters" '$1 == it && NF == 8 && $2 > 0 && $3 > 0' "$tmp/client.out")
	if [ $crc -ne 0 ] || [ $src -ne 0 ] || [ -z "$row" ] ||
		! loader_clean "$tmp/client.out" "$tmp/server.out"; then
		not_ok "$name: client $crc, server $src (124: timed out), row '$row'"
		show "$tmp/client.out" "$tmp/server.out"
		return
	fi
	if ! qp_traffic "$tmp/client.out" "$qptype" || ! qp_traffic "$tmp/server.out" "$qptype"; then
		not_ok "$name: no $qptype QP traffic in the counters"
		show "$tmp/client.out"
		return
	fi
	ok "$name: $(echo "$row" | awk '{ printf "%d iterations, median %s us, %s MB/s, %s msg/s", $1, $2, $5, $7 }')"
}

case $what in
info)
	if sv ucx_info -d >"$tmp/out" 2>&1 && loader_clean "$tmp/out"; then
		for tl in rc_verbs ud_verbs; do
			if awk -v tl="$tl" -v d="$dev" '
				$2 == "Transport:" && $3 == tl { t = 1; next }
				t && $2 == "Device:" { if ($3 == d) found = 1; t = 0 }
				END { exit !found }' "$tmp/out"; then
				ok "ucx_info -d lists $tl on $dev"
			else
				not_ok "ucx_info -d: no $tl on $dev"
				show "$tmp/out"
			fi
		done
		grep -q 'atomic_fadd: 64 bit' "$tmp/out" && ok "rc_verbs offers 64-bit atomics" ||
			not_ok "no 64-bit atomics in ucx_info -d"
	else
		not_ok "ucx_info -d under softverbs-run"
		show "$tmp/out"
	fi
	if [ ! -e /dev/infiniband/uverbs0 ]; then
		libdir=$(cd "$(dirname "$run")/../lib" && pwd -P)
		LD_LIBRARY_PATH=$libdir ucx_info -d >"$tmp/out" 2>&1
		grep -q "Device: $dev" "$tmp/out" &&
			not_ok "ucx_info -d lists $dev without softverbs-run too" ||
			ok "without softverbs-run (no /dev/infiniband/uverbs0) UCX does not list $dev"
	fi
	;;
rc)
	qptype=RC
	x="-x rc_verbs -d $dev"
	# shellcheck disable=SC2086 # $x is several words on purpose
	{
		perf "put_lat 8 B" 2000 $x -t put_lat
		perf "put_bw bcopy 4 KiB" 2000 $x -t put_bw -D bcopy -s 4096
		perf "put_bw zcopy 64 KiB" 500 $x -t put_bw -D zcopy -s 65536
		perf "get bcopy 4 KiB" 2000 $x -t get -D bcopy -s 4096
		perf "get zcopy 64 KiB" 500 $x -t get -D zcopy -s 65536
		perf "am_lat 8 B" 2000 $x -t am_lat
		perf "am_bw bcopy 4 KiB" 2000 $x -t am_bw -D bcopy -s 4096
		perf "am_bw zcopy 4 KiB" 2000 $x -t am_bw -D zcopy -s 4096
		perf "add_lat" 2000 $x -t add_lat
		perf "add_mr" 2000 $x -t add_mr
		perf "fadd" 2000 $x -t fadd
		perf "cswap" 2000 $x -t cswap
	}
	;;
ud)
	qptype=UD
	x="-x ud_verbs -d $dev"
	# shellcheck disable=SC2086
	{
		perf "am_lat 8 B" 2000 $x -t am_lat
		perf "am_lat bcopy 1 KiB" 2000 $x -t am_lat -D bcopy -s 1024
		perf "am_bw bcopy 4000 B" 2000 $x -t am_bw -D bcopy -s 4000
		perf "am_bw zcopy 2 KiB" 2000 $x -t am_bw -D zcopy -s 2048
	}
	;;
ucp)
	qptype=RC
	export UCX_TLS=rc,ud
	perf "tag_lat 8 B" 2000 -t tag_lat
	perf "tag_bw 64 KiB (rendezvous)" 500 -t tag_bw -s 65536
	perf "tag_bw 1 MiB (rendezvous)" 100 -t tag_bw -s 1048576
	perf "ucp_put_bw 64 KiB" 500 -t ucp_put_bw -s 65536
	perf "ucp_get 64 KiB" 500 -t ucp_get -s 65536
	perf "ucp_add" 2000 -t ucp_add
	perf "ucp_fadd" 2000 -t ucp_fadd
	perf "stream_bw 64 KiB" 500 -t stream_bw -s 65536
	perf "ucp_am_lat 8 B" 2000 -t ucp_am_lat
	# io_demo connects through a listener (a socket address), which needs a
	# connection manager: UCX's TCP one here (tcp in UCX_TLS; librdmacm has
	# no kernel to talk to); the data go over rc, as the counters show
	command -v io_demo >/dev/null || { finish; }
	export UCX_TLS=rc,ud,tcp
	if start_listening "$tmp/server.out" io_demo -p @PORT@ -q -d 1:65536; then
		sv io_demo -p "$port" -q -i 2000 -o read,write -d 1:65536 127.0.0.1 >"$tmp/client.out" 2>&1
		crc=$?
	else
		crc=-1
	fi
	kill_server
	# the operations done, summed over io_demo's periodic report lines
	done_ops=$(sed -n 's/.*\[DEMO\] total min:[0-9]* max:[0-9]* total:\([0-9]*\) .*/\1/p' \
		"$tmp/client.out" | awk '{ s += $1 } END { print s + 0 }')
	# RC bytes sent by the client's QPs
	rcb=$(sed -n 's/^softverbs: softverbs0 QP 0x[0-9a-f]* RC: tx [0-9]* pkts \([0-9]*\) bytes.*/\1/p' \
		"$tmp/client.out" | awk '{ s += $1 } END { print s + 0 }')
	if [ "$crc" -eq 0 ] && grep -q "Client exit with status 'OK'" "$tmp/client.out" &&
		[ "$done_ops" -eq 2000 ] && [ "$rcb" -gt 1000000 ] &&
		errors_clean "$tmp/client.out"; then
		ok "io_demo -q (data integrity checked), 2000 reads and writes of 1 B to 64 KiB: $rcb bytes over RC QPs"
	else
		not_ok "io_demo -q: client exit $crc, $done_ops operations, $rcb bytes over RC"
		show "$tmp/client.out" "$tmp/server.out"
	fi
	;;
*)
	echo "ucx.sh: unknown case '$what'" >&2
	exit 2
	;;
esac
finish
