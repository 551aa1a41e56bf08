#!/bin/sh
# tools_traffic.sh LIBDIR CASE [sanitized]
#
# Debian's unmodified ibverbs-utils and perftest binaries move data over
# the software device, against the libibverbs.so.1 in LIBDIR (the build's
# lib/, through LD_LIBRARY_PATH). Each run is two processes, each with its
# own device address: a server, started first, and a client that connects
# to it over TCP on 127.0.0.1 once the server listens. Both run under a
# timeout and must exit 0; then their output must be sane:
#   pingpong tools   "N iters in" with the N asked for, the byte count
#                    2 x size x N, and, with -c (the tool validates every
#                    received buffer), no "invalid data" line;
#   perftest _bw     a BW table row per size, with the size and iteration
#                    count asked for and a nonzero average bandwidth;
#   perftest _lat    a latency row with the size and iteration count, and
#                    nonzero minimum, typical and average latencies.
# CASE picks the tool and its runs (see the case statement at the end).
# A free TCP port is chosen per run, so tests may run in parallel. Exit 77
# (skipped) with the reason when the tool is not installed or the build is
# sanitized (an instrumented library cannot be loaded into uninstrumented
# binaries). SOFTVERBS_STATS=1: the device counters of both sides are
# shown with a failure.
set -u
. "$(dirname "$0")/tap.sh"

if [ $# -lt 2 ]; then
	echo "usage: tools_traffic.sh LIBDIR CASE [sanitized]" >&2
	exit 2
fi
libdir=$(cd "$1" && pwd -P) || exit 2
what=$2
sanitized=${3:-}

[ "$sanitized" = sanitized ] &&
	skip "sanitized build: Debian's binaries cannot load an instrumented libibverbs.so.1"
[ -e "$libdir/libibverbs.so.1" ] || { echo "not ok - no $libdir/libibverbs.so.1"; exit 1; }
command -v timeout >/dev/null || skip "no timeout(1)"

. "$(dirname "$0")/clean_env.sh" # no inherited SOFTVERBS_* but SV_TEST_SHM
export LD_LIBRARY_PATH="$libdir"
export SOFTVERBS_STATS=1
dev=softverbs0
# seconds a run may take (each process), generous for loaded CI machines
limit=${TOOLS_TRAFFIC_TIMEOUT:-90}

tmp=$(mktemp -d)
spid='' cpid=''
cleanup() {
	# only the processes this script started, by pid
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


# show FILE...: the files as TAP comments (at most 60 lines each)
show() {
	for f in "$@"; do
		echo "#   == $(basename "$f")"
		head -n 60 "$f" | sed 's/^/#   /'
	done
}

# show_pair: what the server and the client of the last pair printed
show_pair() {
	show "$tmp"/server.out "$tmp"/server.err "$tmp"/client.out "$tmp"/client.err
}

need() {
	for b in "$@"; do
		command -v "$b" >/dev/null || skip "$b is not installed (apt-get install $pkg)"
	done
}

# listening PORT: a TCP socket listens on PORT (IPv4 or IPv6)
listening() {
	hex=$(printf ':%04X ' "$1")
	cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v p="$hex" '
		index($2 " ", p) && $4 == "0A" { found = 1 } END { exit !found }'
}

# free_port: a TCP port nothing listens on, from a range that depends on
# this process, so that parallel tests rarely even try the same one
free_port() {
	p=$((20000 + ($$ * 7 + n * 13 + ${1:-0} * 101) % 40000))
	while listening "$p"; do
		p=$((p + 1))
	done
	echo "$p"
}

# alive PID
alive() {
	kill -0 "$1" 2>/dev/null
}

# pair TOOL ARGS...: run a server and a client of TOOL with ARGS (plus
# the device and the port); 0 when both exit 0. Outputs in $tmp/server.out,
# $tmp/server.err, $tmp/client.out, $tmp/client.err.
pair() {
	tool=$1
	shift
	attempt=0
	while :; do
		attempt=$((attempt + 1))
		port=$(free_port "$attempt")
		rm -f "$tmp"/server.* "$tmp"/client.*
		timeout -k 5 "$limit" "$tool" -d "$dev" -p "$port" "$@" \
			>"$tmp/server.out" 2>"$tmp/server.err" &
		spid=$!
		# wait until the server listens (or dies)
		i=0
		while ! listening "$port" && alive "$spid" && [ $i -lt 300 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		if ! alive "$spid"; then
			wait "$spid"
			src=$?
			spid=''
			# lost a race for the port: another one
			if [ $attempt -lt 5 ] &&
				grep -qiE 'bind|listen|address already in use' "$tmp/server.out" "$tmp/server.err"; then
				continue
			fi
			echo "# server exited ($src) before listening on $port"
			return 1
		fi
		# the client, retried briefly should the connection be refused
		c=0
		while :; do
			c=$((c + 1))
			timeout -k 5 "$limit" "$tool" -d "$dev" -p "$port" "$@" 127.0.0.1 \
				>"$tmp/client.out" 2>"$tmp/client.err" &
			cpid=$!
			wait "$cpid"
			crc=$?
			cpid=''
			if [ $crc -ne 0 ] && [ $c -lt 5 ] && alive "$spid" &&
				grep -qiE "couldn't connect|connection refused" "$tmp/client.out" "$tmp/client.err"; then
				sleep 0.2
				continue
			fi
			break
		done
		# the server finishes once the client did (or was stopped)
		if [ $crc -ne 0 ]; then
			i=0
			while alive "$spid" && [ $i -lt 50 ]; do
				sleep 0.1
				i=$((i + 1))
			done
			kill "$spid" 2>/dev/null
		fi
		wait "$spid"
		src=$?
		spid=''
		break
	done
	[ $src -eq 0 ] && [ $crc -eq 0 ] && return 0
	echo "# server exit $src, client exit $crc (124: timed out after ${limit}s)"
	return 1
}

loader_clean() {
	! grep -Eq 'no version information|symbol lookup error|undefined symbol|cannot open shared object' "$@"
}

# pingpong TOOL SIZE ITERS ARGS...: a pingpong run and its checks
pingpong() {
	tool=$1 size=$2 iters=$3
	shift 3
	name="$tool -s $size -n $iters $*${SOFTVERBS_SHM:+ (SOFTVERBS_SHM=$SOFTVERBS_SHM)}"
	if ! pair "$tool" -g 0 -s "$size" -n "$iters" "$@"; then
		not_ok "$name"
		show_pair
		return
	fi
	bytes=$((2 * size * iters))
	bad=''
	for side in server client; do
		f=$tmp/$side.out
		grep -Eq "^$iters iters in [0-9.]+ seconds = [0-9.]+ usec/iter" "$f" ||
			bad="$bad; $side: no '$iters iters in' line"
		grep -Eq "^$bytes bytes in [0-9.]+ seconds" "$f" ||
			bad="$bad; $side: no '$bytes bytes in' line"
		grep -q 'invalid data' "$f" && bad="$bad; $side: the tool found invalid data"
		loader_clean "$tmp/$side.err" || bad="$bad; $side: loader complaint"
	done
	if [ -n "$bad" ]; then
		not_ok "$name: ${bad#; }"
		show_pair
		return
	fi
	ok "$name: $(grep -E 'iters in' "$tmp/client.out")"
}

# xsrq SIZE TESTS ARGS...: an ibv_xsrq_pingpong run (one client) and its
# checks. The tool prints no figures and checks no data; both sides must
# say "success", and each side's XRC TGT QP (SOFTVERBS_STATS=1) must have
# completed TESTS receives on its XRC SRQ's CQ without an error or flush,
# sent and received no error NAK (sequence and RNR NAKs are recovery:
# over UDP a packet may overtake another, or come before the TGT QP is
# in RTR), its XRC INI QP must have sent at least TESTS * SIZE bytes, and
# nothing may have been dropped as malformed.
xsrq() {
	size=$1 tests=$2
	shift 2
	name="ibv_xsrq_pingpong -s $size -n $tests${*:+ $*}${SOFTVERBS_SHM:+ (SOFTVERBS_SHM=$SOFTVERBS_SHM)}"
	if ! pair ibv_xsrq_pingpong -g 0 -s "$size" -n "$tests" "$@"; then
		not_ok "$name"
		show_pair
		return
	fi
	bad=''
	for side in server client; do
		grep -q '^success' "$tmp/$side.out" || bad="$bad; $side: no 'success'"
		loader_clean "$tmp/$side.err" || bad="$bad; $side: loader complaint"
		grep -Eq "XRC_TGT: naks .*completions ok $tests errors 0 flushed 0$" "$tmp/$side.err" ||
			bad="$bad; $side: the TGT QP did not complete $tests receives cleanly"
		grep -Eq 'XRC_TGT: naks rx seq [0-9]+ rnr [0-9]+ err 0, tx seq [0-9]+ rnr [0-9]+ err 0; drops malformed 0 ' \
			"$tmp/$side.err" || bad="$bad; $side: the TGT QP sent an error NAK or dropped a malformed packet"
		sent=$(sed -n 's/.*XRC_INI: tx [0-9]* pkts \([0-9]*\) bytes.*/\1/p' "$tmp/$side.err")
		[ -n "$sent" ] && [ "$sent" -ge $((size * tests)) ] ||
			bad="$bad; $side: the INI QP sent ${sent:-no} bytes"
	done
	if [ -n "$bad" ]; then
		not_ok "$name: ${bad#; }"
		show_pair
		return
	fi
	ok "$name"
}

# rows FILE: the result rows of a perftest table (lines of numbers only)
rows() {
	# Past the sixth column (a latency table's stdev and percentiles)
	# perftest prints -nan when its floating point goes astray on a loaded
	# machine; the columns the checks use must be numbers.
	awk '/^[ \t]*[0-9]+[ \t]+[0-9]+[ \t]+[0-9.]+/ {
		ok = 1
		for (i = 1; i <= NF; i++)
			if ($i !~ /^[0-9.]+$/ && (i <= 6 || $i !~ /^-?(nan|inf)$/)) ok = 0
		if (ok) print
	}' "$1"
}

# perf_bw TOOL SIZES ITERS ARGS...: one run per size in SIZES ("all":
# one run of -a), each with a BW row per size from the client and the server
perf_bw() {
	tool=$1 sizes=$2 iters=$3
	shift 3
	for s in $sizes; do
		if [ "$s" = all ]; then
			sz="-a"
			want=$(awk 'BEGIN { for (s = 2; s <= 8388608; s *= 2) print s }')
		else
			sz="-s $s"
			want=$s
		fi
		name="$tool $sz -n $iters $*"
		again=1
		while :; do
			# shellcheck disable=SC2086 # $sz is two words on purpose
			if ! pair "$tool" -x 0 -F --report_gbits $sz -n "$iters" "$@"; then
				bad=failed
				break
			fi
			bad=''
			for side in client server; do
				rows "$tmp/$side.out" >"$tmp/rows"
				loader_clean "$tmp/$side.err" || bad="$bad; $side: loader complaint"
				# a server of -a reports the last size only
				w_side=$want
				[ "$s" = all ] && [ $side = server ] && w_side=8388608
				for w in $w_side; do
					# #bytes #iterations BW-peak BW-average MsgRate; the server
					# of a SEND test reports no peak, and the iteration count
					# is per QP times the QPs
					r=$(awk -v s="$w" '$1 == s' "$tmp/rows")
					if [ -z "$r" ]; then
						bad="$bad; $side: no row for $w bytes"
					elif ! echo "$r" | awk -v it="$iters" '{ exit !($2 >= it && $2 % it == 0 && $4 > 0 && $5 > 0) }'; then
						bad="$bad; $side: bad row '$r'"
					fi
				done
			done
			# perftest times with the CPU's cycle counter, calibrated at start;
			# on a loaded machine the calibration can fail ("Correlation
			# coefficient r^2 ... < 0.9") and every figure is then 0: once more
			if [ -n "$bad" ] && [ $again = 1 ] &&
				grep -q 'Correlation coefficient r^2' "$tmp"/client.err "$tmp"/server.err; then
				echo "# $name: perftest's clock calibration failed (r^2 < 0.9), its figures are 0: run again"
				again=0
				continue
			fi
			break
		done
		if [ "$bad" = failed ]; then
			not_ok "$name"
			show_pair
			continue
		fi
		if [ -n "$bad" ]; then
			not_ok "$name: ${bad#; }"
			show_pair
			continue
		fi
		if [ "$s" = all ]; then
			ok "$name: $(rows "$tmp/client.out" | wc -l) sizes, 2 B: $(rows "$tmp/client.out" | awk '$1 == 2 { print $4 }') Gb/s, 8 MiB: $(rows "$tmp/client.out" | awk '$1 == 8388608 { print $4 }') Gb/s"
		else
			ok "$name: $(rows "$tmp/client.out" | awk '{ print $4 }') Gb/s"
		fi
	done
}

# perf_lat TOOL SIZES ITERS ARGS...: one run per size, each with a
# latency row from the client (and from the server where it prints one)
perf_lat() {
	tool=$1 sizes=$2 iters=$3
	shift 3
	for s in $sizes; do
		name="$tool -s $s -n $iters $*"
		if ! pair "$tool" -x 0 -F -s "$s" -n "$iters" "$@"; then
			not_ok "$name"
			show_pair
			continue
		fi
		bad=''
		for side in client server; do
			loader_clean "$tmp/$side.err" || bad="$bad; $side: loader complaint"
			rows "$tmp/$side.out" >"$tmp/rows"
			# READ and atomic servers are passive and print no table
			[ $side = server ] && [ ! -s "$tmp/rows" ] && continue
			# #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
			r=$(awk -v s="$s" '$1 == s' "$tmp/rows")
			if [ -z "$r" ]; then
				bad="$bad; $side: no row for $s bytes"
			elif ! echo "$r" | awk -v it="$iters" '{ exit !($2 == it && $3 > 0 && $5 > 0 && $6 > 0) }'; then
				bad="$bad; $side: bad row '$r'"
			fi
		done
		if [ -n "$bad" ]; then
			not_ok "$name: ${bad#; }"
			show_pair
			continue
		fi
		ok "$name: $(rows "$tmp/client.out" | awk '{ printf "typical %s usec, average %s usec", $5, $6 }')"
	done
}

case $what in
ibv_rc_pingpong | ibv_uc_pingpong | ibv_ud_pingpong | ibv_srq_pingpong | ibv_xsrq_pingpong)
	pkg=ibverbs-utils
	need "$what"
	;;
ib_*)
	pkg=perftest
	need "${what%_all}"
	;;
esac

case $what in
ibv_rc_pingpong)
	pingpong ibv_rc_pingpong 4096 200 -c
	pingpong ibv_rc_pingpong 4096 200 -c -e
	pingpong ibv_rc_pingpong 1 200 -c -N -t
	pingpong ibv_rc_pingpong 65536 50 -c -m 4096
	pingpong ibv_rc_pingpong 65536 50 -c -e -N
	;;
ibv_uc_pingpong)
	# over the same-host link and over UDP, whatever SV_TEST_SHM says
	for shm in 1 0; do
		export SOFTVERBS_SHM=$shm
		pingpong ibv_uc_pingpong 4096 200 -c
		pingpong ibv_uc_pingpong 1 200 -c -e
		pingpong ibv_uc_pingpong 65536 50 -c -m 4096
	done
	;;
ibv_xsrq_pingpong)
	# XRC: over the same-host link and over UDP, whatever SV_TEST_SHM says
	for shm in 1 0; do
		export SOFTVERBS_SHM=$shm
		xsrq 4096 200
		xsrq 1 200 -e
		xsrq 65536 50 -m 4096
		xsrq 65536 20 -m 1024 -e
	done
	;;
ibv_ud_pingpong)
	pingpong ibv_ud_pingpong 1024 200 -c
	pingpong ibv_ud_pingpong 4096 200 -c -e
	;;
ibv_srq_pingpong)
	pingpong ibv_srq_pingpong 4096 200 -c
	pingpong ibv_srq_pingpong 4096 200 -c -e -q 4
	pingpong ibv_srq_pingpong 65536 50 -c
	;;
ib_write_bw)
	perf_bw ib_write_bw "64 4096" 1000
	perf_bw ib_write_bw 65536 200
	perf_bw ib_write_bw 4096 500 -b
	perf_bw ib_write_bw 65536 100 -q 4
	;;
ib_write_bw_all)
	perf_bw ib_write_bw all 20
	;;
ib_read_bw)
	perf_bw ib_read_bw "64 4096" 1000
	perf_bw ib_read_bw 65536 200
	perf_bw ib_read_bw 65536 100 -q 2 -o 4
	;;
ib_send_bw)
	perf_bw ib_send_bw "64 4096" 1000
	perf_bw ib_send_bw 65536 200
	perf_bw ib_send_bw 4096 500 -b
	perf_bw ib_send_bw 2048 500 -c UD
	;;
ib_atomic_bw)
	perf_bw ib_atomic_bw 8 1000 -A FETCH_AND_ADD
	perf_bw ib_atomic_bw 8 1000 -A CMP_AND_SWAP
	;;
ib_write_lat)
	perf_lat ib_write_lat "64 4096 65536" 200
	perf_lat ib_write_lat 32 200 -I 64
	;;
ib_read_lat)
	perf_lat ib_read_lat "64 4096 65536" 200
	;;
ib_send_lat)
	perf_lat ib_send_lat "64 4096 65536" 200
	perf_lat ib_send_lat 1024 200 -c UD
	;;
ib_atomic_lat)
	perf_lat ib_atomic_lat 8 200 -A FETCH_AND_ADD
	perf_lat ib_atomic_lat 8 200 -A CMP_AND_SWAP
	;;
*)
	echo "tools_traffic.sh: unknown case '$what'" >&2
	exit 2
	;;
esac

tap_done
