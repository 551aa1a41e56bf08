#!/bin/sh
# SPDX-License-Identifier: MIT
# netns_two_hosts.sh SEQUENCE_BIN WORKDIR
#
# Two hosts on one machine: two network namespaces joined by a veth pair,
# with private addresses that exist only inside them (10.199.0.1 and
# 10.199.0.2; nothing is ever sent elsewhere). The traffic program of
# tests/api_wire_sequence.c runs in each namespace with SOFTVERBS_ADDR
# set to its address (GIDs ::ffff:10.199.0.x): RC SEND, multi-packet
# WRITE, READ, atomics and a UD SEND, every byte checked by both sides.
# The namespaces go away in a trap. Skips (exit 77) when namespaces
# cannot be created (no root / CAP_SYS_ADMIN).
set -u
bin=${1:?usage: netns_two_hosts.sh SEQUENCE_BIN WORKDIR}
dir=${2:?usage: netns_two_hosts.sh SEQUENCE_BIN WORKDIR}
ns1=svtest_a_$$
ns2=svtest_b_$$
a1=10.199.0.1
a2=10.199.0.2

skip() {
	echo "1..0 # SKIP $*"
	exit 77
}

command -v ip >/dev/null || skip "ip (iproute2) not found"
mkdir -p "$dir" || exit 1
cleanup() {
	ip netns del "$ns1" 2>/dev/null
	ip netns del "$ns2" 2>/dev/null
}
trap cleanup EXIT INT TERM
if ! ip netns add "$ns1" 2>"$dir/netns.log"; then
	skip "ip netns add is not permitted: $(cat "$dir/netns.log")"
fi
ip netns add "$ns2" || exit 1
set -e
ip link add sv0 netns "$ns1" type veth peer name sv1 netns "$ns2"
ip -n "$ns1" addr add "$a1/24" dev sv0
ip -n "$ns2" addr add "$a2/24" dev sv1
for n in "$ns1" "$ns2"; do
	ip -n "$n" link set lo up
done
ip -n "$ns1" link set sv0 up
ip -n "$ns2" link set sv1 up
set +e
echo "ok - namespaces $ns1 ($a1) and $ns2 ($a2) joined by a veth pair"

sock=$dir/netns.sock
rm -f "$sock"
# the Unix socket lives in the file system, which both namespaces share
ip netns exec "$ns2" env SOFTVERBS_ADDR=$a2 "$bin" --server "$sock" >"$dir/server.log" 2>&1 &
server=$!
ip netns exec "$ns1" env SOFTVERBS_ADDR=$a1 "$bin" --client "$sock" --manifest "$dir/netns.manifest" \
	>"$dir/client.log" 2>&1
crc=$?
wait $server
src=$?
cat "$dir/client.log" "$dir/server.log" | sed 's/^/# /'
if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
	echo "not ok - traffic between the namespaces (client $crc, server $src)"
	exit 1
fi
if ! grep -q "^hosts $a1 $a2\$" "$dir/netns.manifest"; then
	echo "not ok - the GIDs are not ::ffff:$a1 and ::ffff:$a2: $(head -n 1 "$dir/netns.manifest")"
	exit 1
fi
echo "ok - RC and UD traffic between $a1 and $a2, every byte checked"
