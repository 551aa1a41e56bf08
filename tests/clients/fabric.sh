#!/bin/sh
# tests/clients/fabric.sh SOFTVERBS_RUN CASE [sanitized]
#
# Debian's unmodified libfabric 1.17 (libfabric-bin) on the software
# device through softverbs-run:
#   fi_info      fi_info -p verbs lists the device's datagram domain
#                (softverbs0-dgram, FI_EP_DGRAM over IB UD) and the
#                "verbs;ofi_rxd" reliable datagram endpoint on top of it;
#   fi_pingpong  fi_pingpong -p 'verbs;ofi_rxd' -e rdm -c (every received
#                buffer checked by the tool): 1000 iterations of 64 B and
#                4 KiB, and 10 of each size of -S all (0 B to 8 MiB).
# The verbs provider's connected (FI_EP_MSG) endpoints need librdmacm's
# kernel CM, which softverbs does not have. Exit 77 (skipped) when
# libfabric-bin is not installed or the build is sanitized.
set -u
if [ $# -lt 2 ]; then
	echo "usage: fabric.sh SOFTVERBS_RUN CASE [sanitized]" >&2
	exit 2
fi
run=$1 what=$2 sanitized=${3:-}
. "$(dirname "$0")/common.sh"
need libfabric-bin fi_info fi_pingpong
prov='verbs;ofi_rxd'

# pingpong ITERS SIZE: one fi_pingpong pair
pingpong() {
	iters=$1 size=$2
	name="fi_pingpong -p '$prov' -e rdm -c -I $iters -S $size"
	if ! start_listening "$tmp/server.out" fi_pingpong -p "$prov" -e rdm -c -I "$iters" -S "$size" -B @PORT@; then
		not_ok "$name: the server did not listen on $port"
		show "$tmp/server.out"
		return
	fi
	sv fi_pingpong -p "$prov" -e rdm -c -I "$iters" -S "$size" -P "$port" 127.0.0.1 \
		>"$tmp/client.out" 2>&1
	crc=$?
	stop_server
	src=$?
	# rows: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
	rows=$(awk '$1 ~ /^[0-9]+[kmg]?$/ && $3 ~ /^=/ { print }' "$tmp/client.out")
	nrows=$(printf '%s\n' "$rows" | grep -c .)
	want=1
	[ "$size" = all ] && want=$(awk '$1 ~ /^[0-9]+[kmg]?$/ && $3 ~ /^=/' "$tmp/server.out" | grep -c .)
	if [ $crc -ne 0 ] || [ $src -ne 0 ] || [ "$nrows" -lt 1 ] || [ "$nrows" -ne "$want" ] ||
		grep -v '^softverbs:' "$tmp/client.out" "$tmp/server.out" | grep -qi 'error' ||
		! errors_clean "$tmp/client.out" "$tmp/server.out"; then
		not_ok "$name: client $crc, server $src (124: timed out), $nrows rows"
		show "$tmp/client.out" "$tmp/server.out"
		return
	fi
	ok "$name: $nrows sizes, $(printf '%s\n' "$rows" | tail -n 1 | awk '{ printf "%s B: %s MB/s, %s us/xfer", $1, $6, $7 }')"
}

case $what in
fi_info)
	if sv fi_info -p verbs >"$tmp/out" 2>&1 && loader_clean "$tmp/out"; then
		awk '/^provider: verbs$/ { p = 1 } p && /domain: softverbs0-dgram/ { d = 1 }
			p && d && /type: FI_EP_DGRAM/ { found = 1 } END { exit !found }' "$tmp/out" &&
			ok "fi_info -p verbs: softverbs0-dgram, FI_EP_DGRAM" ||
			{ not_ok "fi_info -p verbs: no softverbs0-dgram FI_EP_DGRAM"; show "$tmp/out"; }
		awk '/^provider: verbs;ofi_rxd$/ { p = 1 } p && /domain: softverbs0-dgram/ { d = 1 }
			p && d && /type: FI_EP_RDM/ { found = 1 } END { exit !found }' "$tmp/out" &&
			ok "fi_info -p verbs: verbs;ofi_rxd FI_EP_RDM on softverbs0-dgram" ||
			{ not_ok "fi_info -p verbs: no verbs;ofi_rxd FI_EP_RDM"; show "$tmp/out"; }
	else
		not_ok "fi_info -p verbs"
		show "$tmp/out"
	fi
	;;
fi_pingpong)
	pingpong 1000 64
	pingpong 1000 4096
	pingpong 10 all
	;;
*)
	echo "fabric.sh: unknown case '$what'" >&2
	exit 2
	;;
esac
finish
