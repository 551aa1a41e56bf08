#!/bin/sh
# tests/clients/qperf.sh SOFTVERBS_RUN [sanitized]
#
# Debian's unmodified qperf 0.4 on the software device through
# softverbs-run, on the InfiniBand link layer (SOFTVERBS_LINK_LAYER=ib):
# qperf addresses its peer by LID, without a GRH, which only an IB port
# allows. A server and a client (-t 1: one second per test) run rc_bw,
# rc_lat, rc_rdma_write_bw and ud_lat. qperf checks no data: each test
# must report a nonzero figure, both sides' QPs must have carried the
# traffic (SOFTVERBS_STATS=1) with no error completion, and the port must
# be an IB port with a LID. Exit 77 (skipped) when qperf is not installed
# or the build is sanitized.
set -u
if [ $# -lt 1 ]; then
	echo "usage: qperf.sh SOFTVERBS_RUN [sanitized]" >&2
	exit 2
fi
run=$1 sanitized=${2:-}
. "$(dirname "$0")/common.sh"
need qperf qperf
export SOFTVERBS_LINK_LAYER=ib

if ! start_listening "$tmp/server.out" qperf -lp @PORT@; then
	not_ok "qperf server did not listen on $port"
	show "$tmp/server.out"
	finish
fi
sv qperf 127.0.0.1 -lp "$port" -t 1 -v rc_bw rc_lat rc_rdma_write_bw ud_lat >"$tmp/client.out" 2>&1
crc=$?
# qperf's server opens the device once per test and its report comes when
# the test's context closes, which can be a moment after the client exits:
# wait for the fourth (a server killed first had no ud_lat counters)
wait_lines "$tmp/server.out" '^softverbs: softverbs0 [^ ]*: tx ' 4
kill_server
if [ $crc -ne 0 ] || ! loader_clean "$tmp/client.out"; then
	not_ok "qperf client exit $crc (124: timed out)"
	show "$tmp/client.out" "$tmp/server.out"
	finish
fi
# value TEST FIELD: the number of FIELD in TEST's block
value() {
	awk -v t="$1:" -v f="$2" '$1 == t { on = 1; next } /^[a-z_]+:$/ { on = 0 }
		on && $1 == f { print $3 " " $4; exit }' "$tmp/client.out"
}
for t in rc_bw:bw rc_lat:latency rc_rdma_write_bw:bw ud_lat:latency; do
	v=$(value "${t%%:*}" "${t#*:}")
	if echo "$v" | awk '{ exit !($1 > 0) }'; then
		ok "qperf ${t%%:*}: ${t#*:} $v"
	else
		not_ok "qperf ${t%%:*}: no ${t#*:} ('$v')"
		show "$tmp/client.out" "$tmp/server.out"
	fi
done
for side in client server; do
	f=$tmp/$side.out
	grep -Eq 'softverbs: softverbs0 QP 0x[0-9a-f]+ RC: tx [1-9]' "$f" &&
		grep -Eq 'softverbs: softverbs0 QP 0x[0-9a-f]+ UD: tx [1-9]' "$f" && errors_clean "$f" &&
		ok "$side: RC and UD QPs carried the traffic, no error completion" ||
		{ not_ok "$side: counters"; show "$f"; }
done
sv sh -c 'cat /sys/class/infiniband/softverbs0/ports/1/link_layer /sys/class/infiniband/softverbs0/ports/1/lid' \
	>"$tmp/port.out" 2>&1
if [ "$(head -n 1 "$tmp/port.out")" = InfiniBand ] && grep -Eq '^0x[0-9a-f]*[1-9a-f][0-9a-f]*$' "$tmp/port.out"; then
	ok "the port is InfiniBand with LID $(tail -n 1 "$tmp/port.out")"
else
	not_ok "link layer and LID: $(tr '\n' ' ' <"$tmp/port.out")"
fi
finish
