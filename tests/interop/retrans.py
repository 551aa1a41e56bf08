#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tests/interop/retrans.py PCAP START END MIN_TIMER_MS RXE_ADDR

Explains the kernel rxe's retransmissions in one interop run from the
session's capture (tcpdump on the tap, headers are enough): the RoCE v2
request packets RXE_ADDR sent between the times START and END (seconds,
as in the pcap), per request stream (the softverbs QPN they go to).

A packet whose PSN the stream had sent before is a retransmission; one
that follows a packet that was not, or goes back again, starts a
retransmission event (rxe's completer_retry_err counts one per event).
A retransmitted packet is *early* when it came less than MIN_TIMER_MS
after its own first transmission, MIN_TIMER_MS being the shortest time
the QP's retransmit timer can run (its timeout rounded to jiffies, less
one jiffy): no timer armed by this packet can have run out, so rxe
retransmitted because its one timer per QP, armed by an earlier packet,
ran out while this one was still unacknowledged. That is rxe 6.1's
timer, armed only when not already pending (it runs out a timeout after
the first packet of a busy period, however much was acknowledged since),
and no fault of the peer: every packet before this one had been
acknowledged (rxe resends from the oldest unacknowledged one). Any other
retransmitted packet is unexplained: the peer lost it, or acknowledged
it late or in a way rxe did not take.

Prints "events N early N unexplained N", then one line per unexplained
packet (whether softverbs had acknowledged its PSN before: an ACK, READ
response or atomic ACK at or past it). Exit 0; 2 on a usage or file error.
"""
import struct
import sys

ACK, ATOMIC_ACK = 17, 18
READ_RESP = (13, 14, 15, 16)


def packets(path):
    """(time, src, dst_qpn, opcode, psn, syndrome) of each RoCE v2 packet."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return
    magic = struct.unpack("<I", data[:4])[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        end = "<"
    elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
        end = ">"
    else:
        raise ValueError("not a pcap file")
    nano = magic in (0xA1B23C4D, 0x4D3CB2A1)
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack(end + "IIII", data[off:off + 16])
        frame = data[off + 16:off + 16 + incl]
        off += 16 + incl
        t = sec + frac / (1e9 if nano else 1e6)
        if len(frame) < 14:
            continue
        eth = struct.unpack("!H", frame[12:14])[0]
        if eth == 0x0800:
            ihl = (frame[14] & 0x0F) * 4
            if frame[23] != 17:
                continue
            src = ".".join(str(b) for b in frame[26:30])
            udp = 14 + ihl
        elif eth == 0x86DD:
            if frame[20] != 17:
                continue
            src = ":".join("%x" % v for v in struct.unpack("!8H", frame[22:38]))
            udp = 54
        else:
            continue
        if len(frame) < udp + 8 + 12:
            continue
        if struct.unpack("!H", frame[udp + 2:udp + 4])[0] != 4791:
            continue
        bth = udp + 8
        op = frame[bth]
        qpn = struct.unpack("!I", frame[bth + 4:bth + 8])[0] & 0xFFFFFF
        psn = struct.unpack("!I", frame[bth + 8:bth + 12])[0] & 0xFFFFFF
        syn = frame[bth + 12] if len(frame) > bth + 12 else None
        yield t, src, qpn, op, psn, syn


def ge(a, b):
    """a at or after b in 24-bit PSN order."""
    return ((a - b) & 0xFFFFFF) < 0x800000


def main(argv):
    if len(argv) != 6:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    path, start, stop, tmo, rxe = argv[1], float(argv[2]), float(argv[3]), float(argv[4]), argv[5]
    tmo /= 1000.0
    if ":" in rxe:  # the form packets() prints
        import ipaddress
        rxe = ":".join("%x" % v for v in struct.unpack("!8H", ipaddress.ip_address(rxe).packed))
    try:
        pkts = [p for p in packets(path) if start <= p[0] <= stop]
    except (OSError, ValueError) as e:
        print("retrans.py: %s: %s" % (path, e), file=sys.stderr)
        return 2
    first = {}  # (stream, psn) -> first time
    last_retx = {}  # stream -> PSN of its last packet if it was a retransmission
    acks = {}  # softverbs' QPN-less view: rxe QPN -> list of (time, psn)
    streams = {}  # stream -> set of PSNs, to pair ACKs with streams
    events = early = 0
    unexplained = []
    for t, src, qpn, op, psn, syn in pkts:
        if src != rxe:
            # softverbs' acknowledgements, to the rxe QPN: keep them
            if op in READ_RESP or op == ATOMIC_ACK or (op == ACK and syn is not None and syn >> 5 == 0):
                acks.setdefault(qpn, []).append((t, psn))
            continue
        if op >> 5 not in (0,) or op in READ_RESP or op in (ACK, ATOMIC_ACK):
            continue  # not an RC request
        key = (qpn, psn)
        s = streams.setdefault(qpn, set())
        if key not in first:
            first[key] = t
            s.add(psn)
            last_retx.pop(qpn, None)
            continue
        prev = last_retx.get(qpn)
        if prev is None or not ge(psn, (prev + 1) & 0xFFFFFF):
            events += 1
        last_retx[qpn] = psn
        covered = False
        for rq, lst in acks.items():
            if not any(p in s for _, p in lst):
                continue  # acknowledgements of another stream
            if any(at < t and ge(ap, psn) for at, ap in lst):
                covered = True
                break
        if t - first[key] < tmo:
            early += 1
        else:
            unexplained.append("%.6f psn %d to QP 0x%06x: first sent %.1f ms before, %s" % (
                t, psn, qpn, (t - first[key]) * 1000,
                "acknowledged before" if covered else "not acknowledged before"))
    print("events %d early %d unexplained %d" % (events, early, len(unexplained)))
    for u in unexplained:
        print(u)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
