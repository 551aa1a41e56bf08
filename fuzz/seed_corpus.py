#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Seed files from captured RoCE v2 packets (fuzz/seed_corpus.sh).

usage: seed_corpus.py PAYLOADS_TSV MANIFEST CORPUS_DIR

PAYLOADS_TSV: "src<TAB>dst<TAB>hex UDP payload" per packet (tshark).
MANIFEST: api_wire_sequence's (tests/wire_capture.py). Only packets
between its two hosts to its QPs are used (other processes on the host
may reuse the addresses at the same time). Writes
  CORPUS_DIR/pkt/NAME    the packet as captured (fuzz_pkt);
  CORPUS_DIR/resp/NAME   an input of fuzz_resp (format in fuzz_resp.c):
                         each request message (its packets in order) for an
                         RTS QP, RC or UD; each response for an RTS RC QP
                         with the harness's three sends outstanding; SENDs
                         also with the receives on an SRQ.
At most three seeds per opcode (pkt) or message kind (resp); old seed
files of the same names are replaced, others left alone.
"""
import os
import sys

NAMES = {
    0x00: "send_first", 0x01: "send_middle", 0x02: "send_last", 0x03: "send_last_imm",
    0x04: "send_only", 0x05: "send_only_imm", 0x06: "write_first", 0x07: "write_middle",
    0x08: "write_last", 0x09: "write_last_imm", 0x0A: "write_only", 0x0B: "write_only_imm",
    0x0C: "read_req", 0x0D: "read_resp_first", 0x0E: "read_resp_middle",
    0x0F: "read_resp_last", 0x10: "read_resp_only", 0x11: "ack", 0x12: "atomic_ack",
    0x13: "cmp_swap", 0x14: "fetch_add", 0x16: "send_last_inv", 0x17: "send_only_inv",
}
# fuzz_resp's MR indexes for the RETH / AtomicETH rkey (ALL: non-temporal placement)
MR_RD, MR_ATOM, MR_ALL = 3, 4, 5
RESP_PSN = {0x11: 0, 0x12: 2}  # ACK of the WRITE, ATOMIC ACK of the fetch-and-add; READ: 1


def name_of(op):
    cls = {0x00: "rc", 0x60: "ud"}.get(op & 0xE0, "x%02x" % (op & 0xE0))
    return cls + "_" + NAMES.get(op & 0x1F, "op%02x" % (op & 0x1F))


def frame(fix, pkt):
    return bytes([fix]) + len(pkt).to_bytes(2, "big") + pkt


def relative(pkt, psn_low, mr):
    """The packet with its PSN low byte and RETH/AtomicETH VA set for fuzz_resp's fixups."""
    b = bytearray(pkt)
    b[11] = psn_low & 0xFF
    op = b[0] & 0x1F
    fix = 0
    if (b[0] & 0xE0) == 0 and op in (0x06, 0x0A, 0x0B, 0x0C, 0x13, 0x14):
        b[12:20] = (0).to_bytes(8, "big")  # offset 0 into the MR
        fix = mr
    else:
        fix = 7  # no RETH: rkey untouched
    return fix, bytes(b)


def main():
    tsv, manifest, out = sys.argv[1:4]
    hosts, qpns = set(), set()
    for line in open(manifest):
        w = line.split()
        if w and w[0] == "hosts":
            hosts = set(w[1:3])
        elif w and w[0] == "qpns":
            qpns |= {int(w[1]), int(w[2])}
        elif w and w[0] == "ud":
            qpns.add(int(w[2], 0))
    pkts = []
    for line in open(tsv):
        w = line.rstrip("\n").split("\t")
        if len(w) == 3 and {w[0], w[1]} == hosts and w[2]:
            p = bytes.fromhex(w[2].replace(":", ""))
            if len(p) >= 12 and int.from_bytes(p[5:8], "big") in qpns:
                pkts.append(p)
    os.makedirs(out + "/pkt", exist_ok=True)
    os.makedirs(out + "/resp", exist_ok=True)
    count = {}

    def write(sub, name, data):
        n = count.get((sub, name), 0)
        if n >= 3:
            return
        count[(sub, name)] = n + 1
        with open("%s/%s/%s-%d" % (out, sub, name, n), "wb") as f:
            f.write(data)

    for p in pkts:
        write("pkt", name_of(p[0]), p)

    msg = []  # packets of the request message in progress (RC)
    for p in pkts:
        op = p[0]
        if op & 0xE0 == 0x60:  # UD: RTS UD QP, receive WQEs, Q_Key fixed up
            write("resp", name_of(op), bytes([0x0B, 0x0F, 0]) + frame(7, p))
            write("resp", name_of(op) + "_srq", bytes([0x0B, 0x0F, 1]) + frame(7, p))
            continue
        low = op & 0x1F
        if low in (0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12):  # responses: sends outstanding
            psn = RESP_PSN.get(low, 1)
            fix, b = relative(p, psn, 7)
            write("resp", name_of(op), bytes([0x43, 0x0F, 0]) + frame(fix, b))
            continue
        mr = {0x0C: MR_RD, 0x13: MR_ATOM, 0x14: MR_ATOM}.get(low, MR_ALL)
        if low in (0x00, 0x06):  # FIRST: a new message
            msg = []
        msg.append(p)
        if low in (0x00, 0x01, 0x06, 0x07):  # FIRST, MIDDLE: the message goes on
            continue
        body = b""
        for i, q in enumerate(msg):
            fix, b = relative(q, i, mr)
            body += frame(fix, b)
        name = name_of(msg[0][0]) + ("" if len(msg) == 1 else "_x%d" % len(msg))
        write("resp", name, bytes([0x03, 0x0F, 0]) + body)
        if low in (0x02, 0x04):  # SEND: also from an SRQ
            write("resp", name + "_srq", bytes([0x03, 0x0F, 1]) + body)
        msg = []
    print("seed_corpus: %d packets -> %d pkt, %d resp seeds" % (
        len(pkts), sum(v for (s, _), v in count.items() if s == "pkt"),
        sum(v for (s, _), v in count.items() if s == "resp")))


main()
