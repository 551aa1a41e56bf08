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
#   fi_pingpong_msg  fi_pingpong -p verbs -e msg -c (the verbs provider's
#                connected endpoints, over softverbs' librdmacm) and
#   fi_pingpong_rxm  fi_pingpong -p 'verbs;ofi_rxm' -e rdm -c (rxm's
#                reliable datagrams over those connections): 1000
#                iterations of 64 B and 4 KiB, and 10 of each size of -S all.
#                The verbs provider finds the devices of its connected
#                endpoints by binding the address of every interface but lo,
#                so these two run in a network namespace of their own
#                (unshare -n) with a veth interface holding both devices'
#                addresses, 10.199.0.1 (server) and 10.199.0.2 (client).
# Exit 77 (skipped) when libfabric-bin is not installed, the build is
# sanitized, or (the last two cases) no network namespace can be made.
set -u
if [ $# -lt 2 ]; then
	echo "usage: fabric.sh SOFTVERBS_RUN CASE [sanitized]" >&2
	exit 2
fi
run=$1 what=$2 sanitized=${3:-}
. "$(dirname "$0")/common.sh"
need libfabric-bin fi_info fi_pingpong
prov='verbs;ofi_rxd'

# pingpong ITERS SIZE [PROV EP]: one fi_pingpong pair, PROV and EP by
# default 'verbs;ofi_rxd' and rdm. The client goes to 127.0.0.1, or with
# SADDR and CADDR set, the server's device is on SADDR (where the client
# goes) and the client's on CADDR.
pingpong() {
	iters=$1 size=$2 fprov=${3:-$prov} fep=${4:-rdm}
	name="fi_pingpong -p '$fprov' -e $fep -c -I $iters -S $size"
	[ -z "${SADDR:-}" ] || export SOFTVERBS_ADDR="$SADDR"
	if ! start_listening "$tmp/server.out" fi_pingpong -p "$fprov" -e "$fep" -c -I "$iters" -S "$size" -B @PORT@; then
		not_ok "$name: the server did not listen on $port"
		show "$tmp/server.out"
		return
	fi
	[ -z "${CADDR:-}" ] || SOFTVERBS_ADDR=$CADDR
	sv fi_pingpong -p "$fprov" -e "$fep" -c -I "$iters" -S "$size" -P "$port" "${SADDR:-127.0.0.1}" \
		>"$tmp/client.out" 2>&1
	crc=$?
	unset SOFTVERBS_ADDR
	stop_server
	src=$?
	# rows: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
	rows=$(awk '$1 ~ /^[0-9]+[kmg]?$/ && $3 ~ /^=/ { print }' "$tmp/client.out")
	nrows=$(printf '%s\n' "$rows" | grep -c .)
	want=1
	[ "$size" = all ] && want=$(awk '$1 ~ /^[0-9]+[kmg]?$/ && $3 ~ /^=/' "$tmp/server.out" | grep -c .)
	# 'verbs;ofi_rxm' has crashed in teardown (SIGSEGV inside Debian's
	# stripped libfabric, the client about once in five loaded make
	# checks, the server once in CI) after a complete, data-checked
	# result. The faulting frame reposts a receive buffer through its msg
	# endpoint's ops, and a destroyed QP's completions were still in the
	# CQ (up to 79 seen at a destroy), so a completion polled after the
	# endpoint closed led to freed memory. The QP's destroy now takes its
	# completions out of the CQ, as mlx5's does (api_regress_reset_cq);
	# should a crash after a complete result still happen, it is shown and the pair runs once more, and a second
	# failure of any kind fails.
	#
	# Under load (parallel tests, 2 cores) the server also ended, about
	# once in 15 loaded pairs, with "cq_readerr: work request flushed
	# error" (exit 125, ECANCELED) after the client's complete result: one
	# of the server's operations in pp_finalize was flushed by the client's
	# disconnect. Not understood yet (the client's QP goes to error, and
	# sends the ACK it owes, before its DREQ); the pair runs once more for
	# it too, and says so.
	if [ -z "${again:-}" ] && { [ $crc -eq 0 ] || [ $src -eq 0 ]; } &&
		[ "$nrows" -ge 1 ] && [ "$nrows" -eq "$want" ] &&
		grep -q 'terminated with signal 11\|work request flushed error' "$tmp/client.out" "$tmp/server.out"; then
		echo "# $name: crashed or flushed after its complete result (client $crc, server $src); once more:"
		cat "$tmp/client.out" "$tmp/server.out" | sed 's/^/#   /' | grep -v '^#   softverbs:  '
		again=1 pingpong "$@"
		return
	fi
	if [ $crc -ne 0 ] || [ $src -ne 0 ] || [ "$nrows" -lt 1 ] || [ "$nrows" -ne "$want" ] ||
		grep -v '^softverbs:' "$tmp/client.out" "$tmp/server.out" | grep -qi 'error' ||
		! errors_clean "$tmp/client.out" "$tmp/server.out"; then
		not_ok "$name: client $crc, server $src (124: timed out), $nrows rows"
		show "$tmp/client.out" "$tmp/server.out"
		return
	fi
	ok "$name: $nrows sizes, $(printf '%s\n' "$rows" | tail -n 1 | awk '{ printf "%s B: %s MB/s, %s us/xfer", $1, $6, $7 }')"
}

# in_fabric_netns: this script again (same case) in a network namespace of
# its own with the veth interface, unless already there
in_fabric_netns() {
	[ -n "${SV_FABRIC_NETNS:-}" ] && return 0
	command -v unshare >/dev/null && command -v ip >/dev/null ||
		skip "unshare (util-linux) or ip (iproute2) is missing"
	unshare -n true 2>/dev/null ||
		skip "no network namespace (unshare -n is not permitted): the verbs provider ignores lo"
	rm -rf "$tmp"
	trap - EXIT
	exec env SV_FABRIC_NETNS=1 unshare -n sh -c '
		ip link set lo up && ip link add fab0 type veth peer name fab1 &&
		ip addr add 10.199.0.1/24 dev fab0 && ip addr add 10.199.0.2/24 dev fab0 &&
		ip link set fab1 up && ip link set fab0 up || { echo "1..0 # SKIP no veth interface"; exit 77; }
		exec sh "$0" "$@"' "$0" "$run" "$what" "$sanitized"
}

case $what in
fi_pingpong_msg | fi_pingpong_rxm)
	in_fabric_netns
	SADDR=10.199.0.1 CADDR=10.199.0.2
	cprov=verbs cep=msg
	[ "$what" = fi_pingpong_rxm ] && cprov='verbs;ofi_rxm' cep=rdm
	pingpong 1000 64 "$cprov" $cep
	pingpong 1000 4096 "$cprov" $cep
	pingpong 10 all "$cprov" $cep
	;;
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
