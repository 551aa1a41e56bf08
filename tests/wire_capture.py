#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Check a live capture of the device's traffic (tests/wire_capture.sh).

usage: wire_capture.py PCAP MANIFEST TSHARK [gso|nogso]

MANIFEST is written by api_wire_sequence --client: the hosts, the RC QPNs,
every request packet the sequence must put on the wire ("req OPCODE DQPN
PSN VA RKEY DMALEN"), the responses it expects ("resp OPCODE DQPN PSN"),
the UD SEND ("ud OPCODE DQPN PSN QKEY SRCQP") and the ACK ranges. Only
the packets between the two hosts to those QPNs are the sequence's (other
tests may run at the same time). scapy.contrib.roce recomputes every
ICRC; every expected packet must be there with its fields; every other
packet must be an ACK of the right QP and PSN; tshark must dissect every
packet as InfiniBand with the same opcode, QPN, PSN and RETH / DETH
fields, and report no malformed packet. Exit 0 when all agree.

One retransmission is the protocol's own and is taken: a READ asked
again from its k-th response (the tail-loss probe, or the completer
after a gap: src/sw/transport/probe.c), whose RETH must then be the
original's moved on by k path MTUs (MTU 1024), and READ responses of
that READ at its own PSNs after it. A loaded machine can delay a
response past the probe's timeout (CI, stop 27); each is counted.

UDP GSO (SOFTVERBS_GSO, on by default): a capture on lo holds a GSO send
as one large datagram, before the kernel cuts it (lo passes it whole; a
NIC's driver or the receiving socket cuts it). It is cut here as the
kernel cuts it: segments of the size of the first, the last possibly
shorter, the n-th (from 0) with IPv4 ID n, DF, its own lengths. The size
is the one at which the next BTH has the first one's QPN and PSN + 1 and
the first segment's ICRC holds; then every segment's ICRC is checked with
its own ID, and tshark dissects the cut packets (written to PCAP.cut).
"gso": at least one such datagram must be there; "nogso": none may be.
"""
import sys

from scapy.all import IP, UDP, Ether, raw, rdpcap, wrpcap
from scapy.contrib.roce import BTH

from roce_pcap import tshark_problem, tshark_rows

RETH_OPS = {0x06, 0x0A, 0x0C}
ATOMIC_OPS = {0x13, 0x14}
READ_REQ, READ_RESPS = 0x0C, {0x0D, 0x0E, 0x0F, 0x10}
MTU = 1024  # api_wire_sequence's path MTU
ACK, ATOMIC_ACK = 0x11, 0x12
LO_ETHER = bytes(12) + b"\x08\x00"  # lo's Ethernet header: no addresses, IPv4


def read_manifest(path):
    m = {"req": [], "resp": [], "ud": []}
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "hosts":
                m["hosts"] = set(w[1:3])
            elif w[0] == "qpns":
                m["client_qpn"], m["server_qpn"] = int(w[1]), int(w[2])
            elif w[0] == "acks":
                m["acks"] = [int(x) for x in w[1:5]]
            else:
                m[w[0]].append(tuple(int(x, 0) for x in w[1:]))
    return m


def decode(p):
    """(opcode, dqpn, psn, extra fields) from scapy's BTH and the raw header."""
    bth = p[BTH]
    b = raw(bth)
    ext = (0, 0, 0)
    if bth.opcode in RETH_OPS:
        ext = (int.from_bytes(b[12:20], "big"), int.from_bytes(b[20:24], "big"),
               int.from_bytes(b[24:28], "big"))
    elif bth.opcode in ATOMIC_OPS:
        ext = (int.from_bytes(b[12:20], "big"), int.from_bytes(b[20:24], "big"), 0)
    elif bth.opcode == 0x64:
        ext = (int.from_bytes(b[12:16], "big"), int.from_bytes(b[17:20], "big"))
    return bth.opcode, bth.dqpn, bth.psn, ext


def segment(p, payload, k):
    """The k-th segment of GSO datagram `p`: `payload`, with the kernel's header."""
    ip = p[IP]
    seg = (IP(src=ip.src, dst=ip.dst, id=k, flags="DF", ttl=ip.ttl, tos=ip.tos) /
           UDP(sport=p[UDP].sport, dport=p[UDP].dport) / payload)
    return IP(raw(seg))


def cut(p):
    """The datagrams a captured UDP datagram stands for (see the module doc):
    [p] when it is one packet, the segments of a GSO send otherwise, or
    [p] when no size fits (its ICRC check then reports it)."""
    pay = raw(p[UDP].payload)
    if p[BTH].compute_icrc(None) == raw(p[IP])[-4:] or len(pay) < 32:
        return [p]
    qpn, psn = pay[5:8], int.from_bytes(pay[9:12], "big")
    nxt = ((psn + 1) & 0xffffff).to_bytes(3, "big")
    for s in range(16, len(pay) - 15, 4):
        if pay[s + 5:s + 8] != qpn or pay[s + 9:s + 12] != nxt:
            continue
        first = segment(p, pay[:s], 0)
        if first[BTH].compute_icrc(None) == raw(first)[-4:]:
            return [segment(p, pay[o:o + s], i) for i, o in enumerate(range(0, len(pay), s))]
    return [p]


def expand(pcap):
    """The capture's packets with GSO datagrams cut, written to PCAP.cut;
    returns (path, packets, GSO datagrams found)."""
    out, gso = [], 0
    for p in rdpcap(pcap):
        if p.haslayer(IP) and p.haslayer(UDP) and p[UDP].dport == 4791 and p.haslayer(BTH):
            segs = cut(p)
            gso += len(segs) > 1
            out += segs if len(segs) > 1 else [p[IP]]
        elif p.haslayer(IP):
            out.append(p[IP])
    out = [Ether(LO_ETHER + raw(ip)) for ip in out]  # as lo frames them
    path = pcap + ".cut"
    wrpcap(path, out)
    return path, out, gso


def read_again(want_req, dqpn, psn, ext):
    """The first PSN of the READ that (READ request, dqpn, psn, ext) asks again, or None."""
    for (op, q, first), (va, rkey, length) in want_req.items():
        k = psn - first
        if op == READ_REQ and q == dqpn and 0 < k and k * MTU < length and \
                ext == (va + k * MTU, rkey, length - k * MTU):
            return first
    return None


def main():
    if len(sys.argv) not in (4, 5):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    pcap, manifest, tshark = sys.argv[1:4]
    mode = sys.argv[4] if len(sys.argv) == 5 else ""
    pcap, packets, gso = expand(pcap)
    print(f"capture: {gso} UDP GSO datagrams cut into their packets")
    m = read_manifest(manifest)
    ours = {m["client_qpn"], m["server_qpn"]} | {u[1] for u in m["ud"]}
    want_req = {(r[0], r[1], r[2]): tuple(r[3:]) for r in m["req"]}
    want_resp = {(r[0], r[1], r[2]) for r in m["resp"]}
    want_ud = {(u[0], u[1], u[2]): (u[3], u[4]) for u in m["ud"]}
    srv_q, srv_psn, cli_q, cli_psn = m["acks"]
    errors, seen, frames, icrc_ok = [], set(), {}, 0
    acks, asked_again = 0, {}  # READ's first PSN -> the PSN it was asked again from
    reads = {r[2]: (r[5] + MTU - 1) // MTU for r in m["req"] if r[0] == READ_REQ}

    if mode == "gso" and not gso:
        errors.append("no GSO datagram in the capture (SOFTVERBS_GSO on)")
    elif mode == "nogso" and gso:
        errors.append(f"{gso} GSO datagrams in the capture with SOFTVERBS_GSO=0")
    for n, p in enumerate(packets, 1):
        if not (p.haslayer(IP) and p.haslayer(UDP) and p[UDP].dport == 4791):
            continue
        if {p[IP].src, p[IP].dst} != m["hosts"] or not p.haslayer(BTH):
            continue
        op, dqpn, psn, ext = decode(p)
        if dqpn not in ours:
            continue
        frames[n] = (op, dqpn, psn, ext)
        wire = raw(p[IP])
        if p[BTH].compute_icrc(None) == wire[-4:]:
            icrc_ok += 1
        else:
            errors.append(f"frame {n}: ICRC {wire[-4:].hex()}, scapy computes "
                          f"{p[BTH].compute_icrc(None).hex()}")
        key = (op, dqpn, psn)
        if key in want_req:
            if want_req[key] != ext and not (op in ATOMIC_OPS and want_req[key][:2] == ext[:2]):
                errors.append(f"frame {n}: opcode {op:#x} PSN {psn}: headers {ext}, "
                              f"want {want_req[key]}")
            seen.add(key)
        elif key in want_resp:
            seen.add(key)
        elif key in want_ud:
            if ext != want_ud[key]:
                errors.append(f"frame {n}: UD DETH {ext}, want {want_ud[key]}")
            seen.add(key)
        elif op == ACK and ((dqpn == srv_q and psn == srv_psn) or
                            (dqpn == cli_q and cli_psn <= psn <= cli_psn + 12)):
            acks += 1
        elif op == READ_REQ and read_again(want_req, dqpn, psn, ext) is not None:
            first = read_again(want_req, dqpn, psn, ext)
            asked_again[first] = min(psn, asked_again.get(first, psn))
        elif op in READ_RESPS and dqpn == cli_q and any(
                a <= psn < f + reads[f] for f, a in asked_again.items()):
            pass  # an answer to a READ asked again
        else:
            errors.append(f"frame {n}: unexpected opcode {op:#x} QPN {dqpn} PSN {psn}")
    missing = (set(want_req) | want_resp | set(want_ud)) - seen
    for k in sorted(missing):
        errors.append(f"missing: opcode {k[0]:#x} QPN {k[1]} PSN {k[2]}")
    print(f"scapy: {len(frames)} packets of the sequence, {icrc_ok} ICRCs agree, "
          f"{len(seen)} of {len(seen) + len(missing)} expected packets seen, {acks} ACKs, "
          f"{len(asked_again)} READs asked again")

    fields = ["frame.number", "frame.protocols", "infiniband.bth.opcode",
              "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.reth.va",
              "infiniband.reth.r_key", "infiniband.reth.dmalen", "infiniband.deth.q_key",
              "infiniband.deth.srcqp", "_ws.malformed", "_ws.expert.severity",
              "_ws.expert.message", "ip.checksum.status"]
    rows, err = tshark_rows(tshark, pcap, fields)
    if err:
        errors.append(err)
    dissected = 0
    for v in rows:
        n = int(v["frame.number"])
        if n not in frames:
            continue
        op, dqpn, psn, ext = frames[n]

        def num(name):
            s = v.get(name, "")
            return int(s.split(",")[0], 0) if s else None

        if "infiniband" not in v["frame.protocols"].split(":"):
            errors.append(f"frame {n}: tshark protocols {v['frame.protocols']}")
            continue
        dissected += 1
        problem = tshark_problem(v)
        if problem:
            errors.append(f"frame {n}: tshark {problem}")
        if v.get("ip.checksum.status") != "1":
            errors.append(f"frame {n}: IPv4 checksum status {v.get('ip.checksum.status')!r}")
        got = [num("infiniband.bth.opcode"), num("infiniband.bth.destqp"),
               num("infiniband.bth.psn")]
        if op in RETH_OPS:
            got += [num("infiniband.reth.va"), num("infiniband.reth.r_key"),
                    num("infiniband.reth.dmalen")]
        elif op == 0x64:
            got += [num("infiniband.deth.q_key"), num("infiniband.deth.srcqp")]
        exp = [op, dqpn, psn] + (list(ext) if op in RETH_OPS or op == 0x64 else [])
        if got != exp:
            errors.append(f"frame {n}: tshark decodes {got}, scapy {exp}")
    print(f"tshark: {dissected} of {len(frames)} packets dissected as InfiniBand")
    for e in errors[:30]:
        print("# " + e)
    print(f"{len(errors)} problems")
    return 1 if errors or not frames or dissected != len(frames) else 0


if __name__ == "__main__":
    sys.exit(main())
