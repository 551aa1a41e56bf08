#!/bin/sh
# rdmacm_tools.sh LIBDIR CASE [sanitized]
#
# Debian's unmodified rdma_cm programs (rdmacm-utils, perftest -R, fio's
# rdma engine) between two processes on the software device, against the
# libibverbs.so.1 and librdmacm.so.1 in LIBDIR (through LD_LIBRARY_PATH:
# the tools load ours by soname). The server gets a device address S
# (SOFTVERBS_ADDR), the client S+1; the client connects to S once the
# server's device is up. Every case runs twice: over the same-host link
# (the default) and over UDP (SOFTVERBS_SHM=0). Both processes run under
# a timeout; each must exit 0 and print what the tool prints on success
# (data checks where the tool has them: rping -v compares every ping).
# perftest servers (-R) are waited for until they say they wait for a
# client. A server that never exits by itself (cmtime) is stopped once the client
# is done. CASE netns runs a set of them between two network namespaces,
# CASE fault with 10% of the packets dropped each way (SOFTVERBS_FAULT).
# Exit 77 (skipped) with the reason when a tool is missing or the build
# is sanitized.
set -u

if [ $# -lt 2 ]; then
	echo "usage: rdmacm_tools.sh LIBDIR CASE [sanitized]" >&2
	exit 2
fi
libdir=$(cd "$1" && pwd -P) || exit 2
what=$2
sanitized=${3:-}

skip() {
	echo "1..0 # SKIP $*"
	exit 77
}

[ "$sanitized" = sanitized ] &&
	skip "sanitized build: Debian's binaries cannot load an instrumented library"
[ -e "$libdir/librdmacm.so.1" ] || { echo "not ok - no $libdir/librdmacm.so.1"; exit 1; }
command -v timeout >/dev/null || skip "no timeout(1)"

. "$(dirname "$0")/clean_env.sh" # no inherited SOFTVERBS_* but SV_TEST_SHM
export LD_LIBRARY_PATH="$libdir"
limit=${RDMACM_TOOLS_TIMEOUT:-90}

tmp=$(mktemp -d)
spid='' cpid=''
cleanup() {
	for p in $spid $cpid; do
		kill "$p" 2>/dev/null
	done
	for p in $spid $cpid; do
		wait "$p" 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

n=0 failed=0
ok() {
	n=$((n + 1))
	echo "ok $n - $*"
}
not_ok() {
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n - $*"
}
show() {
	for f in "$@"; do
		echo "#   == $(basename "$f")"
		tail -n 40 "$f" | sed 's/^/#   /'
	done
}
need() {
	for b in "$@"; do
		command -v "$b" >/dev/null || skip "$b is not installed (apt-get install $pkg)"
	done
}
alive() {
	kill -0 "$1" 2>/dev/null
}

# udp_bound ADDR: a UDP socket is bound to ADDR:4791 (the device is up)
udp_bound() {
	hex=$(echo "$1" | awk -F. '{ printf "%02X%02X%02X%02X:12B7", $4, $3, $2, $1 }')
	$SNS cat /proc/net/udp | awk -v a="$hex" '$2 == a { f = 1 } END { exit !f }'
}

# The netns case: the server in one network namespace, the client in
# another, joined by a veth pair (two hosts); otherwise both here.
SNS='' CNS=''

# pick_addrs: S and C, two free 127/8 addresses that depend on this process
pick_addrs() {
	if [ -n "$SNS" ]; then
		S=10.198.0.1 C=10.198.0.2
		return 0
	fi
	k=0
	while :; do
		b=$(((($$ + k * 37) % 200) + 20))
		c=$((((($$ / 200) + k * 11) % 250) + 1))
		S=127.$b.$c.2 C=127.$b.$c.3
		udp_bound "$S" || udp_bound "$C" || return 0
		k=$((k + 1))
	done
}

# pair NAME "SERVER ARGS" "CLIENT ARGS" [stop]: server on S, client on C;
# "stop": the server serves forever, stop it once the client exited 0.
# SHM (empty or 0) is passed on as SOFTVERBS_SHM.
pair() {
	name=$1 sargs=$2 cargs=$3 stop=${4:-}
	attempt=0
	while :; do
		attempt=$((attempt + 1))
		pick_addrs
		# shellcheck disable=SC2086 # the arguments are words on purpose
		$SNS env ${SHM:+SOFTVERBS_SHM=$SHM} ${FAULT:+SOFTVERBS_FAULT=$FAULT,seed=1} \
			${FAULT:+SOFTVERBS_CM_TIMEOUT=200} SOFTVERBS_ADDR="$S" \
			timeout -k 5 "$limit" ${SREADY:+stdbuf -oL} $(echo "$sargs" | sed "s/@S@/$S/g") \
			>"$tmp/server.out" 2>&1 &
		spid=$!
		i=0
		while ! udp_bound "$S" && alive "$spid" && [ $i -lt 300 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		# a server that says when it is about to listen ($SREADY, its stdout
		# line-buffered): perftest -R opens its device long before it listens
		while [ -n "${SREADY:-}" ] && ! grep -q "$SREADY" "$tmp/server.out" &&
			alive "$spid" && [ $i -lt 600 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		sleep 0.5 # from device open (or the server's word) to rdma_listen
		if ! alive "$spid"; then
			wait "$spid"
			src=$?
			spid=''
			[ $attempt -lt 3 ] && continue
			echo "# server exited ($src) before its device was up"
			return 1
		fi
		# the client, again while the server is not listening yet (REJ 8):
		# a loaded machine may take a while from device open to rdma_listen
		c=0
		while :; do
			c=$((c + 1))
			# shellcheck disable=SC2086
			$CNS env ${SHM:+SOFTVERBS_SHM=$SHM} ${FAULT:+SOFTVERBS_FAULT=$FAULT,seed=2} \
				${FAULT:+SOFTVERBS_CM_TIMEOUT=200} SOFTVERBS_ADDR="$C" \
				timeout -k 5 "$limit" $(echo "$cargs" | sed "s/@S@/$S/g") \
				>"$tmp/client.out" 2>&1 &
			cpid=$!
			wait "$cpid"
			crc=$?
			cpid=''
			[ $crc -ge 128 ] && [ $crc -ne 137 ] && break # a crash: see below
			case $name in *' -R'*) break ;; esac # perftest: the whole pair, see below
			if [ $crc -ne 0 ] && [ $c -lt 5 ] && alive "$spid" &&
				grep -qE 'REJECTED(;|,) error:? 8|Connection refused' "$tmp/client.out"; then
				sleep 1
				continue
			fi
			break
		done
		# perftest 4.5 -R connects twice: its control connection, then the
		# test's, whose REQ follows the first RTU at once, while the server
		# has destroyed its first listener and not yet made the second (REJ 8,
		# as the kernel's CM answers too; softverbs' CM now keeps such a REQ
		# for the next listener, src/rdmacm/held.c, so this is rare: the
		# second listener must come within a second). Its client then tries again on
		# the connection ids it has just destroyed (perftest's own bug):
		# those calls fail (EINVAL, docs/rdmacm.md) and it exits 1, where it
		# used to crash on freed memory. Only the whole pair can go again: the
		# server has taken the first client's control connection and would
		# take a new client's control REQ for the test's (both then wait for
		# ever)
		if { [ $crc -ge 128 ] && [ $crc -ne 137 ] ||
			{ [ $crc -ne 0 ] && case $name in *' -R'*) true ;; *) false ;; esac; }; } &&
			[ $attempt -lt 8 ] && grep -q 'RDMA_CM_EVENT_REJECTED' "$tmp/client.out"; then
			echo "# $name: the client failed (status $crc) after a rejection; the pair again"
			kill "$spid" 2>/dev/null
			wait "$spid" 2>/dev/null
			spid=''
			sleep 1
			continue
		fi
		if [ "$stop" = stop ] && [ $crc -eq 0 ]; then
			kill "$spid" 2>/dev/null
			wait "$spid"
			src=0
		else
			i=0
			while alive "$spid" && [ $i -lt 100 ]; do
				sleep 0.1
				i=$((i + 1))
			done
			kill "$spid" 2>/dev/null
			wait "$spid"
			src=$?
		fi
		spid=''
		break
	done
	[ $src -eq 0 ] && [ $crc -eq 0 ] && return 0
	echo "# $name: server exit $src, client exit $crc (124: timed out after ${limit}s)"
	return 1
}

loader_clean() {
	! grep -Eq 'no version information|symbol lookup error|undefined symbol|cannot open shared object' "$@"
}

# run NAME "SERVER" "CLIENT" CLIENT-PATTERN SERVER-PATTERN [stop]
run() {
	name=$1 sv=$2 cl=$3 cpat=$4 spat=$5 stop=${6:-}
	if [ -n "$FAULT" ]; then
		label="$name (SOFTVERBS_FAULT=$FAULT)"
	elif [ -n "$SNS" ]; then
		label="$name (two network namespaces)"
	elif [ -n "$SHM" ]; then
		label="$name (UDP, SOFTVERBS_SHM=0)"
	else
		label="$name (same-host link)"
	fi
	if ! pair "$name" "$sv" "$cl" "$stop"; then
		not_ok "$label"
		show "$tmp/server.out" "$tmp/client.out"
		return
	fi
	bad=''
	[ -z "$cpat" ] || grep -Eq -- "$cpat" "$tmp/client.out" || bad="$bad; client: no '$cpat'"
	[ -z "$spat" ] || grep -Eq -- "$spat" "$tmp/server.out" || bad="$bad; server: no '$spat'"
	loader_clean "$tmp/server.out" "$tmp/client.out" || bad="$bad; loader complaint"
	if [ -n "$bad" ]; then
		not_ok "$label: ${bad#; }"
		show "$tmp/server.out" "$tmp/client.out"
		return
	fi
	if [ -n "$cpat" ]; then
		line=$(grep -E -- "$cpat" "$tmp/client.out" | tail -n 1)
	else
		line="server: $(grep -E -- "$spat" "$tmp/server.out" | tail -n 1)"
	fi
	ok "$label: $(echo "$line" | tr -s ' \t' ' ')"
}

# count FILE PATTERN: lines matching
count() {
	grep -Ec -- "$2" "$1"
}

cases() {
	SREADY=''
	case $what in
	rping)
		pkg=rdmacm-utils need rping
		run rping "rping -s -a @S@ -v -C 100" "rping -c -a @S@ -v -C 100" \
			'rdma-ping-99: ' 'rdma-ping-99: '
		if [ "$(count "$tmp/client.out" '^ping data: rdma-ping-')" != 100 ]; then
			not_ok "rping: the client printed $(count "$tmp/client.out" '^ping data') of 100 pings"
		fi
		# -q prints nothing but the DISCONNECTED event, which a client that
		# disconnects first may not wait for: the server's is checked
		run "rping -q" "rping -s -q -a @S@ -C 10" "rping -c -q -a @S@ -C 10" \
			'' 'DISCONNECT EVENT'
		;;
	ucmatose)
		pkg=rdmacm-utils need ucmatose
		run "ucmatose -c 4" "ucmatose -b @S@ -c 4 -C 20 -S 1000" \
			"ucmatose -s @S@ -c 4 -C 20 -S 1000" '^return status 0' '^return status 0'
		run "ucmatose -t 32 -a 14" "ucmatose -b @S@ -c 2 -a 14" \
			"ucmatose -s @S@ -c 2 -t 32 -a 14" '^return status 0' '^return status 0'
		;;
	udaddy)
		pkg=rdmacm-utils need udaddy
		run udaddy "udaddy -b @S@ -c 2 -C 10" "udaddy -s @S@ -c 2 -C 10" \
			'^return status 0' '^return status 0'
		;;
	cmtime)
		pkg=rdmacm-utils need cmtime
		run cmtime "cmtime -b @S@ -c 100" "cmtime -s @S@ -c 100" '^connect +:' '' stop
		;;
	rdma_server)
		pkg=rdmacm-utils need rdma_server rdma_client
		run rdma_server/rdma_client "rdma_server" "rdma_client -s @S@" \
			'^rdma_client: end 0' '^rdma_server: end 0'
		;;
	ib_write_bw)
		pkg=perftest need ib_write_bw
		SREADY='Waiting for client to connect'
		run "ib_write_bw -R" "ib_write_bw -R -d softverbs0 -n 2000" \
			"ib_write_bw -R -d softverbs0 -n 2000 @S@" '^ 65536 +2000 ' '^ 65536 +2000 '
		;;
	ib_send_lat)
		pkg=perftest need ib_send_lat
		SREADY='Waiting for client to connect'
		run "ib_send_lat -R" "ib_send_lat -R -d softverbs0 -n 1000" \
			"ib_send_lat -R -d softverbs0 -n 1000 @S@" '^ 2 +1000 ' '^ 2 +1000 '
		;;
	fio)
		pkg=fio need fio
		run "fio rdma" \
			"fio --name=s --ioengine=rdma --port=7470 --bs=64k --size=64m --rw=read" \
			"fio --name=c --ioengine=rdma --hostname=@S@ --port=7470 --bs=64k --size=64m --rw=write --verb=write --time_based --runtime=3" \
			'WRITE: bw=' 'err= 0'
		;;
	rstream)
		pkg=rdmacm-utils need rstream
		for t in v a b n; do
			run "rstream -T $t" "rstream -b @S@ -T $t -S 4096 -C 100 -I 10" \
				"rstream -s @S@ -T $t -S 4096 -C 100 -I 10" '^custom +4k +100 +10 ' ''
		done
		# its table over UDP hangs now and then under load: an open bug
		if [ -z "$SHM" ] && [ -z "$SNS" ]; then
			run "rstream (its table, 64 B to 1 MiB)" "rstream -b @S@" \
				"rstream -s @S@" '^1m_bw ' ''
		fi
		;;
	riostream)
		pkg=rdmacm-utils need riostream
		run riostream "riostream -b @S@ -S 4096 -C 100 -I 10" \
			"riostream -s @S@ -S 4096 -C 100 -I 10" '^custom +4k +100 +10 ' ''
		;;
	mckey)
		# UD multicast: the server joins the group (its word: "joined dgid"),
		# the client joins and sends 20 messages to it, which the server
		# waits for, every one (a group of this run's own)
		pkg=rdmacm-utils need mckey
		SREADY='joined dgid'
		mg=239.$(($$ % 200 + 20)).$((($$ / 200) % 250 + 1)).7
		run mckey "mckey -m $mg -b @S@ -C 20" "mckey -m $mg -s -C 20" \
			'^return status 0' '^return status 0'
		;;
	udpong)
		# datagram rsockets; the server serves for ever. Echo: every message
		# comes back (2 x 200 transfers); async: rpoll before each call, the
		# transfers the server counted (UD may drop some)
		pkg=rdmacm-utils need udpong
		run "udpong -T e" "udpong -b @S@ -T e" "udpong -s @S@ -S 1000 -C 200 -T e" \
			'^custom +1000 +400 ' '' stop
		run "udpong -T a" "udpong -b @S@ -T a" "udpong -s @S@ -S 1000 -C 200 -T a" \
			'^custom +1000 +[0-9]+ ' '' stop
		;;
	rcopy)
		pkg=rdmacm-utils need rcopy
		head -c 3000000 /dev/urandom >"$tmp/src.bin"
		rm -f "$tmp/dst.bin"
		run rcopy "rcopy" "rcopy $tmp/src.bin @S@:$tmp/dst.bin" '^3000000 bytes in ' '' stop
		if ! cmp -s "$tmp/src.bin" "$tmp/dst.bin"; then
			not_ok "rcopy: the copy differs from the file"
		fi
		;;
	*)
		echo "unknown case $what" >&2
		exit 2
		;;
	esac
}

netns_up() {
	command -v ip >/dev/null || skip "ip (iproute2) not found"
	ns1=svcm_a_$$ ns2=svcm_b_$$
	ip netns add "$ns1" 2>"$tmp/netns.log" || skip "ip netns add is not permitted: $(cat "$tmp/netns.log")"
	ip netns add "$ns2" || exit 1
	trap 'cleanup; ip netns del "$ns1" 2>/dev/null; ip netns del "$ns2" 2>/dev/null' EXIT
	ip link add sv0 netns "$ns1" type veth peer name sv1 netns "$ns2" || exit 1
	ip -n "$ns1" addr add 10.198.0.1/24 dev sv0
	ip -n "$ns2" addr add 10.198.0.2/24 dev sv1
	for x in "$ns1" "$ns2"; do
		ip -n "$x" link set lo up
	done
	ip -n "$ns1" link set sv0 up
	ip -n "$ns2" link set sv1 up
	SNS="ip netns exec $ns1" CNS="ip netns exec $ns2"
}

FAULT=''
if [ "$what" = fault ]; then
	# a tenth of the packets lost each way, CM MADs included: the CM's
	# retransmissions (timers scaled down) recover them
	SHM=''
	pkg=rdmacm-utils need ucmatose rping
	FAULT=drop=0.1,side=both
	run "ucmatose -c 4, 10% loss" "ucmatose -b @S@ -c 4" "ucmatose -s @S@ -c 4" \
		'^return status 0' '^return status 0'
	# RC recovers each loss after its ACK timeout (537 ms): less loss for traffic
	FAULT=drop=0.03,side=both
	run "rping -C 10, 3% loss" "rping -s -a @S@ -v -C 10" "rping -c -a @S@ -v -C 10" \
		'rdma-ping-9: ' 'rdma-ping-9: '
elif [ "$what" = netns ]; then
	netns_up
	SHM=''
	for what in rping ucmatose udaddy rdma_server rstream ib_write_bw mckey; do
		cases
	done
	what=netns
else
	SHM=''
	cases
	SHM=0
	cases
fi
echo "1..$n"
echo "# rdmacm_tools $what: $((n - failed)) passed, $failed failed"
[ $failed -eq 0 ]
