#!/bin/sh
# SPDX-License-Identifier: MIT
# wire_capture.sh SEQUENCE_BIN WORKDIR [gso|nogso]
#
# Captures the device's live traffic on the loopback interface while
# SEQUENCE_BIN (tests/api_wire_sequence.c) runs its known sequence
# between two processes (SEND, multi-packet WRITE with RETH, READ,
# atomics, UD SEND), then checks the capture with tshark and scapy
# (wire_capture.py). Skips (exit 77) without tshark, python3-scapy or
# the right to capture (root or CAP_NET_RAW). "gso": UDP GSO on (the
# default) and the capture must hold GSO sends, which wire_capture.py cuts
# into their packets as the kernel does and checks each; "nogso":
# SOFTVERBS_GSO=0, and it must hold none.
set -u
. "$(dirname "$0")/tap.sh"
bin=${1:?usage: wire_capture.sh SEQUENCE_BIN WORKDIR}
dir=${2:?usage: wire_capture.sh SEQUENCE_BIN WORKDIR}
mode=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3 # the system python, where apt puts python3-scapy

[ -x "$py" ] || skip "$py not found"
"$py" -c 'import scapy.contrib.roce' 2>/dev/null ||
	skip "scapy.contrib.roce not importable by $py (apt-get install python3-scapy)"
tshark=$(command -v tshark) || skip "tshark not found (apt-get install tshark)"
mkdir -p "$dir" || exit 1
pcap=$dir/capture.pcap
man=$dir/sequence.manifest
sock=$dir/sequence.sock
rm -f "$pcap" "$man" "$sock"

# The capture sees only UDP: keep the two processes off the same-host link.
export SOFTVERBS_SHM=0
case $mode in
gso) export SOFTVERBS_GSO=1 ;;
nogso) export SOFTVERBS_GSO=0 ;;
esac

# Addresses of this run's own (127/8 is all loopback), so that the
# capture holds only its packets even when other tests run alongside.
net=127.$(($$ % 250 + 2)).$(($$ / 250 % 250 + 1))
a_srv=$net.1 a_cli=$net.2
"$tshark" -i lo -f "udp port 4791 and (host $a_srv or host $a_cli)" -F pcap -w "$pcap" -q \
	>"$dir/tshark.log" 2>&1 &
tp=$!
server=
cleanup() {
	[ -n "$server" ] && kill "$server" 2>/dev/null
	kill "$tp" 2>/dev/null
	wait 2>/dev/null
}
trap cleanup EXIT
# capturing has started once the file holds its header
i=0
while [ ! -s "$pcap" ]; do
	if ! kill -0 "$tp" 2>/dev/null; then
		skip "cannot capture on lo: $(tail -n 1 "$dir/tshark.log")"
	fi
	i=$((i + 1))
	[ $i -gt 100 ] && skip "tshark did not start capturing within 10 s"
	sleep 0.1
done
sleep 0.5

SOFTVERBS_ADDR=$a_srv "$bin" --server "$sock" >"$dir/server.log" 2>&1 &
server=$!
if ! SOFTVERBS_ADDR=$a_cli "$bin" --client "$sock" --manifest "$man" >"$dir/client.log" 2>&1; then
	cat "$dir/client.log" "$dir/server.log"
	echo "not ok - the traffic program failed"
	exit 1
fi
wait "$server"
src=$?
server=
sleep 1 # the last ACKs
kill -INT "$tp"
wait "$tp"
trap - EXIT
if [ $src -ne 0 ]; then
	cat "$dir/server.log"
	echo "not ok - the server failed"
	exit 1
fi
echo "ok - the sequence ran ($(grep -c . "$man") manifest lines)"
PYTHONPATH=$here "$py" "$here/wire_capture.py" "$pcap" "$man" "$tshark" $mode
rc=$?
[ $rc -eq 0 ] && echo "ok - tshark and scapy agree with the captured traffic" ||
	echo "not ok - capture check failed (kept in $dir)"
exit $rc
