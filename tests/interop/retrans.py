#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tests/interop/retrans.py PCAP START END MIN_TIMER_MS RXE_ADDR SV_ADDR

Explains the retransmissions of one interop run without fault injection
from the session's capture (tcpdump on the tap; headers are enough): the
RoCE v2 packets between the times START and END (seconds, as in the
pcap). For each side, per request stream (the QPN its requests go to):
a request packet whose PSN the stream had sent before is a
retransmission; one that follows a packet that was not, or goes back
again, starts a retransmission event. An answer of the other side
(ACK, READ response, atomic ACK with a PSN at or past the packet's, or a
NAK with a PSN past it) "covers" the packet.

rxe (RXE_ADDR): a retransmitted packet is *early* when it came less than
MIN_TIMER_MS after its own first transmission, MIN_TIMER_MS being the
shortest time the QP's retransmit timer can run (its timeout in whole
jiffies, truncated as rxe does, less one jiffy): no timer armed for this
packet can have run out. rxe 6.1 arms its one timer per QP only when it
is not pending, so it runs out a timeout after the first packet of a
busy period however much was acknowledged since, and resends from the
oldest unacknowledged packet: every packet before this one had been
acknowledged. Three more cases are rxe's own: softverbs had answered
for the packet less than MIN_TIMER_MS after its first transmission (rxe,
an emulated guest, took the answer too late); none of the unacknowledged
packets it had sent from this one on asked for an ACK (AckReq clear: rxe
stalled in the middle of a message, and the responder owed nothing), or
it first sent the packet at most 2 ms before softverbs' last packet of
the run or after it, and softverbs never answered for it (softverbs'
side of the tool had finished: srq_pingpong's client has a message in
flight on each QP when the server has counted its iterations). Any other
retransmitted rxe packet is unexplained.

softverbs (SV_ADDR): a retransmitted packet is *late peer* when no answer
of rxe's covering it was on the wire more than 1 ms before the
retransmission, or the first one came MIN_TIMER_MS or more after the
packet's first transmission (rxe, a guest under emulation on a busy
host, had not answered within the timeout). A packet resent although rxe
had answered in time is unexplained (softverbs lost or refused the answer).

Prints "rxe events N early N unexplained N" and "softverbs events N
late_peer N unexplained N", then one line per unexplained packet. Exit 0;
2 on a usage or file error.
"""
import ipaddress
import struct
import sys

ACK, ATOMIC_ACK = 17, 18
READ_RESP = (13, 14, 15, 16)
SLACK = 0.001
PEER_DONE = 0.002  # in flight when the other side sent its last packet


def addr_text(raw):
    return str(ipaddress.ip_address(raw))


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
        if eth == 0x0800 and len(frame) >= 34 and frame[23] == 17:
            src = addr_text(frame[26:30])
            udp = 14 + (frame[14] & 0x0F) * 4
        elif eth == 0x86DD and len(frame) >= 54 and frame[20] == 17:
            src = addr_text(frame[22:38])
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
        yield t, src, qpn, op, psn, syn, bool(frame[bth + 8] & 0x80)


def after(a, b):
    """a after b in 24-bit PSN order."""
    return 0 < ((a - b) & 0xFFFFFF) < 0x800000


def is_request(op):
    return op >> 5 == 0 and op not in READ_RESP and op not in (ACK, ATOMIC_ACK)


def covers(op, syn, apsn, psn):
    """Does this answer (opcode, AETH syndrome, its PSN) cover request PSN psn?"""
    if op in READ_RESP or op == ATOMIC_ACK:
        return apsn == psn or after(apsn, psn)
    if op == ACK and syn is not None:
        if syn >> 5 == 0:  # ACK
            return apsn == psn or after(apsn, psn)
        return after(apsn, psn)  # NAK: everything before its PSN arrived
    return False


def analyze(pkts, sender, classify):
    """Retransmissions of `sender`: (events, explained, [unexplained text])."""
    first, last_retx, streams, areq = {}, {}, {}, {}
    answers = {}  # the other side's answers, by the QPN they go to
    events = explained = 0
    unexplained = []
    others = [p[0] for p in pkts if p[1] != sender]
    last_other = max(others) if others else 0.0
    for t, src, qpn, op, psn, syn, ackreq in pkts:
        if src != sender:
            if not is_request(op):
                answers.setdefault(qpn, []).append((t, op, syn, psn))
            continue
        if not is_request(op):
            continue
        key = (qpn, psn)
        s = streams.setdefault(qpn, set())
        if key not in first:
            first[key] = t
            areq[key] = ackreq
            s.add(psn)
            last_retx.pop(qpn, None)
            continue
        prev = last_retx.get(qpn)
        if prev is None or not after(psn, prev):
            events += 1
        last_retx[qpn] = psn
        covered = None
        for lst in answers.values():
            if not any(p in s for _, _, _, p in lst):
                continue  # another stream's answers
            for at, aop, asyn, ap in lst:
                if at < t - SLACK and covers(aop, asyn, ap, psn):
                    covered = at
                    break
        # the packets of this stream at or after this one, sent before now
        # and not covered: did any ask for an ACK?
        owed = any(areq[(q, p)] for (q, p), ft in first.items()
                   if q == qpn and ft < t and (p == psn or after(p, psn)))
        answered = any(covers(aop, asyn, ap, psn) for lst in answers.values()
                       if any(p in s for _, _, _, p in lst) for _, aop, asyn, ap in lst)
        peer_done = first[key] > last_other - PEER_DONE and not answered
        ok, why = classify(t, first[key], covered, owed, peer_done)
        if ok:
            explained += 1
        else:
            unexplained.append("%s %.6f psn %d to QP 0x%06x: first sent %.1f ms before; %s" % (
                sender, t, psn, qpn, (t - first[key]) * 1000, why))
    return events, explained, unexplained


def main(argv):
    if len(argv) != 7:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    path, start, stop, tmo = argv[1], float(argv[2]), float(argv[3]), float(argv[4]) / 1000.0
    rxe, sv = addr_text(ipaddress.ip_address(argv[5]).packed), addr_text(ipaddress.ip_address(argv[6]).packed)
    try:
        pkts = [p for p in packets(path) if start <= p[0] <= stop]
    except (OSError, ValueError) as e:
        print("retrans.py: %s: %s" % (path, e), file=sys.stderr)
        return 2

    def rxe_early(t, t0, covered, owed, peer_done):
        if t - t0 < tmo or not owed or peer_done:
            return True, ""
        if covered is not None and covered - t0 < tmo:
            return True, ""  # softverbs answered in time: rxe was late to take it
        return False, "not early (%s)" % ("answered before" if covered else "not answered before")

    def sv_late_peer(t, t0, covered, owed, peer_done):
        if covered is None or covered - t0 >= tmo:
            return True, ""  # rxe had not answered within the timeout
        return False, "rxe had answered %.1f ms before" % ((t - covered) * 1000)

    ev, ok, bad = analyze(pkts, rxe, rxe_early)
    sev, sok, sbad = analyze(pkts, sv, sv_late_peer)
    print("rxe events %d early %d unexplained %d" % (ev, ok, len(bad)))
    print("softverbs events %d late_peer %d unexplained %d" % (sev, sok, len(sbad)))
    for u in bad + sbad:
        print(u)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
