#!/bin/sh
# SPDX-License-Identifier: MIT
# fuzz/seed_corpus.sh [BUILD_DIR]   (default build/, a gcc build: make)
#
# Regenerates the committed seeds fuzz/corpus/{pkt,resp}/ from a live
# capture: tests/wire_capture.sh runs api_wire_sequence (SEND, multi-packet
# WRITE, READ, atomics, UD SEND, with their ACKs and responses) between
# two processes under tshark on lo; fuzz/seed_corpus.py turns the UDP
# payloads of the sequence's packets (BTH..ICRC) into seed files.
# Needs root (or CAP_NET_RAW), tshark and python3-scapy (wire_capture.sh).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
bin=$build/tests/api_wire_sequence
[ -x "$bin" ] || { echo "seed_corpus: $bin not found (run make first)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# its own checks may fail on a busy machine (a retransmission): the capture is still good
sh "$here/../tests/wire_capture.sh" "$bin" "$work" || true
[ -s "$work/capture.pcap" ] && [ -s "$work/sequence.manifest" ] ||
	{ echo "seed_corpus: no capture (see above)" >&2; exit 1; }
tshark -r "$work/capture.pcap" -Y 'udp.dstport == 4791' -T fields \
	-e ip.src -e ip.dst -e udp.payload 2>/dev/null >"$work/payloads.tsv"
python3 "$here/seed_corpus.py" "$work/payloads.tsv" "$work/sequence.manifest" "$here/corpus"
