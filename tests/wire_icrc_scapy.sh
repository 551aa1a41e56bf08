#!/bin/sh
# SPDX-License-Identifier: MIT
# wire_icrc_scapy.sh UNIT_WIRE WORKDIR
#
# Cross-check of the RoCE v2 wire layer against independent decoders:
# UNIT_WIRE (tests/unit_wire.c) writes ~200 packets built by our code to a
# pcap plus a manifest of what it wrote; wire_icrc_scapy.py checks every
# ICRC with scapy.contrib.roce and every packet's dissection with tshark.
# Skips (exit 77) when Debian's python3-scapy or tshark is missing.
set -u
. "$(dirname "$0")/tap.sh"
unit=${1:?usage: wire_icrc_scapy.sh UNIT_WIRE WORKDIR}
dir=${2:?usage: wire_icrc_scapy.sh UNIT_WIRE WORKDIR}
here=$(dirname "$0")
# the system python, where apt puts python3-scapy (not a pyenv one first on PATH)
py=/usr/bin/python3

[ -x "$py" ] || skip "$py not found"
"$py" -c 'import scapy.contrib.roce' 2>/dev/null ||
	skip "scapy.contrib.roce not importable by $py (apt-get install python3-scapy)"
tshark=$(command -v tshark) || skip "tshark not found (apt-get install tshark)"

mkdir -p "$dir" || exit 1
if ! "$unit" --pcap "$dir/wire.pcap" >"$dir/wire.manifest"; then
	echo "not ok - $unit --pcap failed"
	exit 1
fi
"$py" "$here/wire_icrc_scapy.py" "$dir/wire.pcap" "$dir/wire.manifest" "$tshark"
rc=$?
[ $rc -eq 0 ] && echo "ok - scapy and tshark agree with our packets" ||
	echo "not ok - mismatches (pcap kept in $dir)"
exit $rc
