#!/bin/sh
# tests/clients/dapl.sh SOFTVERBS_RUN [sanitized]
#
# Debian's unmodified uDAPL 2.1 (dapl2-utils: dtest; libdapl2's socket CM
# provider libdaploscm) on the software device through softverbs-run. A
# dat.conf of this test's own (DAT_OVERRIDE) names the provider
# ofa-v2-softverbs0-1 (device softverbs0, port 1); DAPL_SCM_NETDEV=lo keeps
# the socket CM on loopback. Two runs, each a server and a client:
#   dtest -D: 1000 RDMA WRITE ping-pongs of 64 KiB, every buffer compared
#             by the client (data check mode);
#   dtest:    SEND/RECV of the memory keys, a burst of RDMA WRITEs with a
#             message, RDMA READs and SEND ping-pongs.
# Both sides must exit 0 and print "DAPL Test Complete. PASSED" (dtest
# exits 0 on failure too), with no error completion in the counters.
# A third run takes the UD CM provider (libdaploucm, ofa-v2-softverbs0-1u),
# which exchanges LIDs, on the InfiniBand link layer (SOFTVERBS_LINK_LAYER=ib):
# dtest -D with 4 KiB buffers. (On RoCE its LID is 0, which dtest refuses.)
# dtest uses fixed TCP ports (15828, 45248). Exit 77 (skipped) when
# dapl2-utils is not installed or the build is sanitized.
set -u
if [ $# -lt 1 ]; then
	echo "usage: dapl.sh SOFTVERBS_RUN [sanitized]" >&2
	exit 2
fi
run=$1 sanitized=${2:-}
. "$(dirname "$0")/common.sh"
need dapl2-utils dtest
lib=libdaploscm.so.2
ldconfig -p 2>/dev/null | grep -q "$lib" || [ -e "/usr/lib/x86_64-linux-gnu/$lib" ] ||
	skip "no $lib (apt-get install libdapl2)"
prov=ofa-v2-softverbs0-1
{
	echo "$prov u2.0 nonthreadsafe default $lib dapl.2.0 \"softverbs0 1\" \"\""
	echo "${prov}u u2.0 nonthreadsafe default libdaploucm.so.2 dapl.2.0 \"softverbs0 1\" \"\""
} >"$tmp/dat.conf"
export DAT_OVERRIDE="$tmp/dat.conf" DAPL_SCM_NETDEV=lo

# dtest_pair NAME ARGS...: a server and a client with ARGS
dtest_pair() {
	name=$1
	shift
	if listening 15828; then
		not_ok "$name: TCP port 15828 (dtest's) is taken"
		return
	fi
	start_server "$tmp/server.out" dtest -P "$prov" -s "$@"
	if ! wait_listen 15828 "$spid"; then
		stop_server
		not_ok "$name: the server did not listen on 15828"
		show "$tmp/server.out"
		return
	fi
	sv dtest -P "$prov" -h 127.0.0.1 "$@" >"$tmp/client.out" 2>&1
	crc=$?
	stop_server
	src=$?
	if [ $crc -ne 0 ] || [ $src -ne 0 ] ||
		! grep -q 'DAPL Test Complete. PASSED' "$tmp/client.out" ||
		! grep -q 'DAPL Test Complete. PASSED' "$tmp/server.out" ||
		! errors_clean "$tmp/client.out" "$tmp/server.out" ||
		! loader_clean "$tmp/client.out" "$tmp/server.out"; then
		not_ok "$name: client $crc, server $src (124: timed out)"
		show "$tmp/client.out" "$tmp/server.out"
		return
	fi
	if [ "$1" != -D ] && ! grep -q 'RDMA READ DATA with SEND MSG' "$tmp/client.out"; then
		not_ok "$name: no RDMA READ step"
		show "$tmp/client.out"
		return
	fi
	ok "$name: $(grep -E 'PingPong:|RDMA write \(' "$tmp/client.out" | head -n 1 | sed 's/^[0-9]*: *//')"
}

dtest_pair "dtest -D -b 65536 (RDMA WRITE ping-pong, data checked)" -D -b 65536
dtest_pair "dtest -b 65536 -B 200 (SEND, RDMA WRITE, RDMA READ, ping-pong)" -b 65536 -B 200
# the UD-based CM names peers by LID: the InfiniBand link layer
prov=${prov}u
SOFTVERBS_LINK_LAYER=ib dtest_pair "dtest -D -b 4096 with the UD CM provider (libdaploucm), IB link layer" \
	-D -b 4096
finish
