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
# Then the same over IPv6 (fd77:5f7::1 and ::2, GIDs the addresses
# themselves), and with SOFTVERBS_GID_TABLE=rxe and mlx5 on IPv4 (the
# address in GID slot 1 and 3, the link-local address of the veth in slot
# 0 and 1). The namespaces go away in a trap. Skips (exit 77) when
# namespaces cannot be created (no root / CAP_SYS_ADMIN).
set -u
. "$(dirname "$0")/tap.sh"
bin=${1:?usage: netns_two_hosts.sh SEQUENCE_BIN WORKDIR}
dir=${2:?usage: netns_two_hosts.sh SEQUENCE_BIN WORKDIR}
ns1=svtest_a_$$
ns2=svtest_b_$$
a1=10.199.0.1
a2=10.199.0.2
b1=fd77:5f7::1
b2=fd77:5f7::2

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
ip -n "$ns1" addr add "$b1/64" dev sv0 nodad
ip -n "$ns2" addr add "$b2/64" dev sv1 nodad
for n in "$ns1" "$ns2"; do
	ip -n "$n" link set lo up
done
ip -n "$ns1" link set sv0 up
ip -n "$ns2" link set sv1 up
set +e
echo "ok - namespaces $ns1 ($a1) and $ns2 ($a2) joined by a veth pair"

# run NAME CLIENT_ADDR SERVER_ADDR CLIENT_GID SERVER_GID [VAR=VALUE...]: the traffic
# program between the two, its GIDs (the addresses it used) as given
run() {
	name=$1 c=$2 sv=$3 gc=$4 gs=$5
	shift 5
	sock=$dir/netns-$name.sock
	rm -f "$sock"
	# the Unix socket lives in the file system, which both namespaces share
	ip netns exec "$ns2" env SOFTVERBS_ADDR=$sv "$@" "$bin" --server "$sock" \
		>"$dir/server-$name.log" 2>&1 &
	server=$!
	ip netns exec "$ns1" env SOFTVERBS_ADDR=$c "$@" "$bin" --client "$sock" \
		--manifest "$dir/netns-$name.manifest" >"$dir/client-$name.log" 2>&1
	crc=$?
	wait $server
	src=$?
	if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
		cat "$dir/client-$name.log" "$dir/server-$name.log" | sed 's/^/# /'
		echo "not ok - $name: traffic between the namespaces (client $crc, server $src)"
		return 1
	fi
	if ! grep -q "^hosts $gc $gs\$" "$dir/netns-$name.manifest"; then
		echo "not ok - $name: the GIDs do not name $gc and $gs: $(head -n 1 "$dir/netns-$name.manifest")"
		return 1
	fi
	echo "ok - $name: RC and UD traffic between $gc and $gs, every byte checked"
}

fail=0
# the link-local addresses appear on the veth ends, and can be bound once DAD is done
ll_ready() {
	ip -n "$1" -6 addr show dev "$2" scope link | grep inet6 | grep -vq tentative
}
for i in $(seq 50); do
	ll_ready "$ns1" sv0 && ll_ready "$ns2" sv1 && break
	sleep 0.1
done
run ipv4 "$a1" "$a2" "$a1" "$a2" || fail=1
run ipv6 "$b1" "$b2" "$b1" "$b2" || fail=1
run gid-rxe "$a1" "$a2" "$a1" "$a2" SOFTVERBS_GID_TABLE=rxe SV_TEST_GID_INDEX=1 || fail=1
run gid-mlx5 "$a1" "$a2" "$a1" "$a2" SOFTVERBS_GID_TABLE=mlx5 SV_TEST_GID_INDEX=3 || fail=1
ll1=$(ip -n "$ns1" -6 addr show dev sv0 scope link | sed -n 's/.*inet6 \([^/]*\).*/\1/p' | head -n 1)
ll2=$(ip -n "$ns2" -6 addr show dev sv1 scope link | sed -n 's/.*inet6 \([^/]*\).*/\1/p' | head -n 1)
if [ -n "$ll1" ] && [ -n "$ll2" ]; then
	run gid-rxe-link-local "$a1" "$a2" "$ll1" "$ll2" SOFTVERBS_GID_TABLE=rxe \
		SV_TEST_GID_INDEX=0 || fail=1
	run gid-mlx5-link-local "$a1" "$a2" "$ll1" "$ll2" SOFTVERBS_GID_TABLE=mlx5 \
		SV_TEST_GID_INDEX=1 || fail=1
else
	echo "not ok - no link-local addresses on the veth ends"
	fail=1
fi
exit $fail
