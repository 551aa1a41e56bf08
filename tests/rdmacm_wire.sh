#!/bin/sh
# SPDX-License-Identifier: MIT
# rdmacm_wire.sh LIBDIR WORKDIR [sanitized]
#
# The CM MADs on the wire, decoded by an independent dissector: rping (a
# server and a client, over UDP) runs while tshark captures lo; then
# tshark's InfiniBand dissector must see a RoCE v2 UD exchange to QP 1
# (Q_Key 0x80010000) of CM MADs (class 0x07, version 2, method SEND):
# REQ, REP, RTU, DREQ, DREP, with the field values the kernel's CM sends
# (service ID of TCP port 7174, the rdma_cm IP header with both
# addresses, P_Key 0xffff, response timeouts 20, 15 CM retries, hop
# limit 64, ACK timeout 17, target ACK delay 15). Skips without tshark,
# rping or the right to capture.
set -u
libdir=$(cd "${1:?usage: rdmacm_wire.sh LIBDIR WORKDIR}" && pwd -P) || exit 2
dir=${2:?usage: rdmacm_wire.sh LIBDIR WORKDIR}
sanitized=${3:-}

skip() {
	echo "1..0 # SKIP $*"
	exit 77
}
[ "$sanitized" = sanitized ] && skip "sanitized build: rping cannot load an instrumented library"
tshark=$(command -v tshark) || skip "tshark not found (apt-get install tshark)"
command -v rping >/dev/null || skip "rping not found (apt-get install rdmacm-utils)"
. "$(dirname "$0")/clean_env.sh"
export LD_LIBRARY_PATH="$libdir" SOFTVERBS_SHM=0
mkdir -p "$dir" || exit 1
pcap=$dir/cm.pcap
rm -f "$pcap"
net=127.$(($$ % 200 + 30)).$(($$ / 200 % 250 + 1))
S=$net.2 C=$net.3
"$tshark" -i lo -f "udp port 4791 and (host $S or host $C)" -F pcap -w "$pcap" -q \
	>"$dir/tshark.log" 2>&1 &
tp=$!
sp=
cleanup() {
	[ -n "$sp" ] && kill "$sp" 2>/dev/null
	kill "$tp" 2>/dev/null
	wait 2>/dev/null
}
trap cleanup EXIT
i=0
while [ ! -s "$pcap" ]; do
	kill -0 "$tp" 2>/dev/null || skip "cannot capture on lo: $(tail -n 1 "$dir/tshark.log")"
	i=$((i + 1))
	[ $i -gt 100 ] && skip "tshark did not start capturing within 10 s"
	sleep 0.1
done
sleep 0.5
SOFTVERBS_ADDR=$S timeout 30 rping -s -a "$S" -C 3 >"$dir/server.out" 2>&1 &
sp=$!
sleep 1
SOFTVERBS_ADDR=$C timeout 30 rping -c -a "$S" -C 3 -v >"$dir/client.out" 2>&1
crc=$?
wait "$sp"
src=$?
sp=
sleep 1
kill "$tp" 2>/dev/null
wait "$tp" 2>/dev/null

n=0 failed=0
check() { # NAME CONDITION-RESULT
	n=$((n + 1))
	if [ "$2" = 0 ]; then
		echo "ok $n - $1"
	else
		failed=$((failed + 1))
		echo "not ok $n - $1"
	fi
}
check "rping server and client exit 0 (server $src, client $crc)" $((src + crc))
f() { # FILTER FIELDS...: one line per matching packet, fields tab-separated
	flt=$1
	shift
	args=''
	for x in "$@"; do
		args="$args -e $x"
	done
	# shellcheck disable=SC2086
	"$tshark" -r "$pcap" -Y "$flt" -T fields $args 2>/dev/null
}
attrs=$(f 'infiniband.mad.mgmtclass == 0x07' infiniband.mad.attributeid | tr '\n' ' ')
echo "# CM attributes in order: $attrs"
for a in 0x0010 0x0013 0x0014 0x0015 0x0016; do
	case " $attrs " in
	*" $a "*) r=0 ;;
	*) r=1 ;;
	esac
	check "a CM MAD with attribute $a" $r
done
bad=$(f 'infiniband.mad.mgmtclass == 0x07 && !(infiniband.bth.destqp == 1 && infiniband.deth.q_key == 0x80010000 && infiniband.deth.srcqp == 1 && infiniband.bth.opcode == 100 && infiniband.mad.classversion == 2 && infiniband.mad.method == 0x03 && infiniband.bth.p_key == 0xffff)' frame.number)
check "every CM MAD: UD SEND Only from QP 1 to QP 1, Q_Key 0x80010000, P_Key 0xffff, class version 2, method SEND" "$([ -z "$bad" ] && echo 0 || echo 1)"
req=$(f 'infiniband.cm.req' infiniband.cm.req.serviceid.dport infiniband.cm.req.ip_cm.ipv \
	infiniband.cm.req.ip_cm.sip4 infiniband.cm.req.ip_cm.dip4 infiniband.cm.req.pkey \
	infiniband.cm.req.remoteresptout infiniband.cm.req.localresptout infiniband.cm.req.maxcmretr \
	infiniband.cm.req.prim_hoplim infiniband.cm.req.prim_localacktout \
	infiniband.cm.req.prim_localgid_ipv4 infiniband.cm.req.prim_remotegid_ipv4 \
	infiniband.cm.req.transpsvctype | head -n 1)
echo "# REQ: $req"
# tshark prints the integers in hex: 0x1c06 is 7174, 0x14 is 20, 0x11 is 17
want=$(printf '0x1c06\t0x04\t%s\t%s\t0xffff\t0x14\t0x14\t0x0f\t0x40\t0x11\t%s\t%s\t0x00' "$C" "$S" "$C" "$S")
check "REQ fields (port 7174, IPv4 CMA header $C -> $S, P_Key, timeouts 20, 15 retries, hop 64, ACK timeout 17, GIDs, RC)" \
	"$([ "$req" = "$want" ] && echo 0 || echo 1)"
rep=$(f 'infiniband.cm.rep' infiniband.cm.rep.tgtackdelay infiniband.cm.rep.respres \
	infiniband.cm.rep.initdepth | head -n 1)
echo "# REP: $rep"
check "REP: target ACK delay 15, rping's 1 responder resource and initiator depth" \
	"$([ "$rep" = "$(printf '0x0f\t0x01\t0x01')" ] && echo 0 || echo 1)"
echo "1..$n"
echo "# rdmacm_wire: $((n - failed)) passed, $failed failed"
[ $failed -eq 0 ]
