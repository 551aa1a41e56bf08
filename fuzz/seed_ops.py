#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Hand-built seeds for what the live capture (seed_corpus.sh) lacks.

usage: seed_ops.py CORPUS_DIR   (fuzz/corpus; rerun after changing this file)

api_wire_sequence sends RC and UD traffic only, so the UC and XRC
transports, SEND with Invalidate through a memory window, RDMA ATOMIC
WRITE and RDMA FLUSH get seeds built here from the IBTA header layouts
(BTH, XRCETH, FETH, RETH, AtomicETH, ImmDt, IETH). Writes
  CORPUS_DIR/pkt/NAME    the packet (fuzz_pkt; the ICRC is left zero);
  CORPUS_DIR/resp/NAME   an input of fuzz_resp (format in fuzz_resp.c):
                         the QP in RTS with every access flag, and the
                         configuration byte c2 choosing UC, XRC TGT, the
                         bound type 2 window or the FLUSH access bits;
  CORPUS_DIR/verbs/NAME  an input of fuzz_verbs (its operation list): an
                         MR, a QP brought to RTS, then UC traffic, window
                         binds (both types), SEND with Invalidate, LOCAL
                         INV, ATOMIC WRITE and FLUSH posts.
fuzz_resp rewrites the PSN, destination QPN, XRC SRQ number, RETH or
AtomicETH VA and rkey, IETH rkey and ICRC (fix byte), so the fields
written here are offsets and placeholders.
"""
import os
import sys

RC, UC, XRC = 0x00, 0x20, 0xA0
# fuzz_resp's MR indexes (fix byte bits 0-2); 6 is the window when c2 bit 3 is set
MR_RD, MR_ATOM, MR_ALL, MR_WIN, RAW = 3, 4, 5, 6, 7
# c2 bits (fuzz_resp.c)
C2_SRQ, C2_UC, C2_XRC, C2_MW, C2_FLUSH = 0x01, 0x02, 0x04, 0x08, 0x10
MTU = 1024


def bth(op, psn_low, ack=False):
    """BTH: opcode, flags (pad 0, TVer 0), P_Key, QPN placeholder, AckReq, PSN low byte."""
    return bytes([op, 0, 0xFF, 0xFF, 0, 0, 0, 0, 0x80 if ack else 0, 0, 0, psn_low])


def reth(length, offset=0):
    """RETH: VA (the harness adds the MR's base to the low 32 bits), rkey placeholder, length."""
    return offset.to_bytes(8, "big") + bytes(4) + length.to_bytes(4, "big")


def atmeth(add):
    return bytes(8) + bytes(4) + add.to_bytes(8, "big") + bytes(8)


def xrceth():
    return bytes(4)  # reserved byte, XRC SRQ number (the harness's)


def feth(sel, plt):
    return ((sel << 4) | plt).to_bytes(4, "big")


def payload(n, seed):
    return bytes((seed + i) & 0xFF for i in range(n))


def packet(hdr, data=b""):
    return hdr + data + bytes(4)  # ICRC: fuzz_resp fixes it up


def frame(fix, pkt):
    return bytes([fix]) + len(pkt).to_bytes(2, "big") + pkt


def resp_input(c2, pkts, c0=0x03, c1=0x0F):
    """c0 RTS with receives, c1 every QP access flag and PSN base 0; pkts: (fix, packet)."""
    return bytes([c0, c1, c2]) + b"".join(frame(f, p) for f, p in pkts)


def seeds():
    """(name, c2, [(fix, packet)]) for each message kind."""
    s = []
    # UC: SEND and RDMA WRITE, one or several packets, with and without immediate
    s.append(("uc_send_only", C2_UC, [(RAW, packet(bth(UC | 0x04, 0, True), payload(64, 1)))]))
    s.append(("uc_send_only_srq", C2_UC | C2_SRQ,
              [(RAW, packet(bth(UC | 0x04, 0), payload(64, 2)))]))
    s.append(("uc_send_x3_imm", C2_UC, [
        (RAW, packet(bth(UC | 0x00, 0), payload(MTU, 3))),
        (RAW, packet(bth(UC | 0x01, 1), payload(MTU, 4))),
        (RAW, packet(bth(UC | 0x03, 2), b"\x12\x34\x56\x78" + payload(100, 5)))]))
    s.append(("uc_send_only_imm", C2_UC,
              [(RAW, packet(bth(UC | 0x05, 0), b"\x01\x02\x03\x04" + payload(12, 6)))]))
    s.append(("uc_write_only", C2_UC, [(MR_ALL, packet(bth(UC | 0x0A, 0) + reth(64), payload(64, 7)))]))
    s.append(("uc_write_only_imm", C2_UC,
              [(MR_ALL, packet(bth(UC | 0x0B, 0) + reth(16) + b"\xaa\xbb\xcc\xdd", payload(16, 8)))]))
    s.append(("uc_write_x3", C2_UC, [
        (MR_ALL, packet(bth(UC | 0x06, 0) + reth(2 * MTU + 40), payload(MTU, 9))),
        (RAW, packet(bth(UC | 0x07, 1), payload(MTU, 10))),
        (RAW, packet(bth(UC | 0x09, 2) + b"\x0a\x0b\x0c\x0d", payload(40, 11)))]))
    s.append(("uc_write_no_access", C2_UC,
              [(MR_RD, packet(bth(UC | 0x0A, 0) + reth(64, 128), payload(64, 12)))]))
    # XRC: every request kind at a TGT QP, the XRCETH naming the harness's XRC SRQ
    s.append(("xrc_send_only", C2_XRC,
              [(RAW, packet(bth(XRC | 0x04, 0, True) + xrceth(), payload(64, 13)))]))
    s.append(("xrc_send_x2", C2_XRC, [
        (RAW, packet(bth(XRC | 0x00, 0) + xrceth(), payload(MTU, 14))),
        (RAW, packet(bth(XRC | 0x02, 1, True) + xrceth(), payload(24, 15)))]))
    s.append(("xrc_write_only", C2_XRC,
              [(MR_ALL, packet(bth(XRC | 0x0A, 0, True) + xrceth() + reth(64), payload(64, 16)))]))
    s.append(("xrc_write_only_imm", C2_XRC, [(MR_ALL, packet(
        bth(XRC | 0x0B, 0, True) + xrceth() + reth(8) + b"\x11\x22\x33\x44", payload(8, 17)))]))
    s.append(("xrc_read_req", C2_XRC, [(MR_RD, packet(bth(XRC | 0x0C, 0) + xrceth() + reth(64)))]))
    s.append(("xrc_fetch_add", C2_XRC,
              [(MR_ATOM, packet(bth(XRC | 0x14, 0) + xrceth() + atmeth(5)))]))
    s.append(("xrc_send_only_inv", C2_XRC, [(MR_ALL, packet(
        bth(XRC | 0x17, 0, True) + xrceth() + bytes(4), payload(16, 18)))]))
    # SEND with Invalidate of the window bound to the QP, and traffic through the window
    s.append(("rc_send_only_inv_mw", C2_MW,
              [(MR_WIN, packet(bth(RC | 0x17, 0, True) + bytes(4), payload(64, 19)))]))
    s.append(("rc_send_x2_inv_mw", C2_MW, [
        (RAW, packet(bth(RC | 0x00, 0), payload(MTU, 20))),
        (MR_WIN, packet(bth(RC | 0x16, 1, True) + bytes(4), payload(32, 21)))]))
    s.append(("rc_send_only_inv_mr", 0,
              [(MR_ALL, packet(bth(RC | 0x17, 0, True) + bytes(4), payload(8, 22)))]))
    s.append(("rc_write_mw", C2_MW,
              [(MR_WIN, packet(bth(RC | 0x0A, 0, True) + reth(64, 64), payload(64, 23)))]))
    s.append(("rc_read_mw", C2_MW, [(MR_WIN, packet(bth(RC | 0x0C, 0) + reth(128)))]))
    s.append(("rc_inv_then_write_mw", C2_MW, [
        (MR_WIN, packet(bth(RC | 0x17, 0, True) + bytes(4), payload(4, 24))),
        (MR_WIN, packet(bth(RC | 0x0A, 1, True) + reth(4), payload(4, 25)))]))
    # RDMA ATOMIC WRITE (0x1d): RETH and 8 payload bytes
    s.append(("rc_atomic_write", 0,
              [(MR_ALL, packet(bth(RC | 0x1D, 0, True) + reth(8, 8), payload(8, 26)))]))
    s.append(("rc_atomic_write_mw", C2_MW,
              [(MR_WIN, packet(bth(RC | 0x1D, 0, True) + reth(8, 16), payload(8, 27)))]))
    s.append(("rc_atomic_write_short", 0,
              [(MR_ALL, packet(bth(RC | 0x1D, 0, True) + reth(4), payload(4, 28)))]))
    # RDMA FLUSH (0x1c): FETH and RETH, a range or the whole MR, global or persistent
    s.append(("rc_flush_range_global", C2_FLUSH,
              [(MR_ALL, packet(bth(RC | 0x1C, 0, True) + feth(0, 1) + reth(256)))]))
    s.append(("rc_flush_mr_persistent", C2_FLUSH,
              [(MR_ATOM, packet(bth(RC | 0x1C, 0, True) + feth(1, 3) + reth(0)))]))
    s.append(("rc_flush_no_access", 0,
              [(MR_ALL, packet(bth(RC | 0x1C, 0, True) + feth(0, 1) + reth(64)))]))
    s.append(("rc_flush_after_write", C2_FLUSH, [
        (MR_ALL, packet(bth(RC | 0x0A, 0, True) + reth(32), payload(32, 29))),
        (MR_ALL, packet(bth(RC | 0x1C, 1, True) + feth(0, 1) + reth(32)))]))
    return s


# fuzz_verbs: operation numbers (its ops[] table) and helpers; its reader is big-endian
OP_REG_MR, OP_TO_STATE, OP_POST_SEND, OP_BIND_MW = 0, 8, 9, 12
QP_RC, QP_UC = 0, 2
WR_WRITE, WR_SEND, WR_READ, WR_LOCAL_INV, WR_BIND_MW, WR_SEND_INV = 0, 2, 4, 7, 8, 9
WR_FLUSH, WR_ATOMIC_WRITE = 14, 15
SIGNALED = 2


def u16(v):
    return v.to_bytes(2, "big")


def u32(v):
    return v.to_bytes(4, "big")


def u64(v):
    return v.to_bytes(8, "big")


def v_reg_mr():
    """reg_mr_ex on the PD: 8 KiB at the buffer's start, every remote access, MW_BIND,
    FLUSH_GLOBAL, comp_mask ADDR."""
    return bytes([OP_REG_MR, 2, 0]) + u16(0) + u32(8192) + u32(0x11F) + bytes([2]) + u64(0) + u64(0)


def v_rts(qp):
    return bytes([OP_TO_STATE, qp, 3])


def v_sge(off, length):
    """One SGE in the buffer (mode 0), lkey of the input's MR 0."""
    return bytes([0]) + u16(off) + u32(length) + bytes([0])


def v_bind_info(off, length, access):
    """fill_bind: MR 0, a range in the buffer, the access bits (masked to the remote ones)."""
    return bytes([0]) + u16(off) + u32(length) + u32(access)


def v_send(qp, op, sges=(), imm=0, tail=None):
    """post_send of one signaled WR; tail: what its opcode reads after the immediate (RC and
    UC: a remote address and rkey selector, BIND_MW: the bind's fields)."""
    if tail is None:
        tail = v_rdma(0, 0)
    b = bytes([OP_POST_SEND, qp, 0, op, SIGNALED, len(sges)]) + b"".join(sges) + u32(imm)
    return b + tail


def v_rdma(addr, key_sel):
    return u64(addr) + bytes([key_sel])


def verbs_seeds():
    """(name, operations) for fuzz_verbs."""
    rw = 0x2 | 0x4  # REMOTE_WRITE | REMOTE_READ
    return [
        ("uc_send_write", v_reg_mr() + v_rts(QP_UC) +
         v_send(QP_UC, WR_SEND, [v_sge(0, 64)]) +
         v_send(QP_UC, WR_WRITE, [v_sge(64, 2000)], 0, v_rdma(0x10000, 0))),
        ("rc_bind_mw2_send_inv", v_reg_mr() + v_rts(QP_RC) +
         v_send(QP_RC, WR_BIND_MW, [], 0, v_bind_info(4096, 4096, rw) + bytes([1]) + u32(0x11)) +
         v_send(QP_RC, WR_WRITE, [v_sge(0, 32)], 0, v_rdma(0x1000, 0xE1)) +
         v_send(QP_RC, WR_SEND_INV, [v_sge(0, 8)], 0x1234)),
        ("rc_bind_mw1", v_reg_mr() + v_rts(QP_RC) +
         bytes([OP_BIND_MW, QP_RC, 0, SIGNALED]) + v_bind_info(0, 4096, rw) +
         v_send(QP_RC, WR_READ, [v_sge(0, 32)], 0, v_rdma(0x1000, 0xE0))),
        ("rc_local_inv", v_reg_mr() + v_rts(QP_RC) +
         v_send(QP_RC, WR_BIND_MW, [], 0, v_bind_info(0, 64, rw) + bytes([1]) + u32(0x22)) +
         v_send(QP_RC, WR_LOCAL_INV, [], 0x22)),
        ("rc_atomic_write_flush", v_reg_mr() + v_rts(QP_RC) +
         v_send(QP_RC, WR_ATOMIC_WRITE, [v_sge(0, 8)], 0, v_rdma(0x2000, 0)) +
         v_send(QP_RC, WR_FLUSH, [], 0, v_rdma(0x2000, 0))),
    ]


def main():
    out = sys.argv[1]
    os.makedirs(out + "/pkt", exist_ok=True)
    os.makedirs(out + "/resp", exist_ok=True)
    npkt = 0
    all_seeds = seeds()
    for name, c2, pkts in all_seeds:
        with open("%s/resp/%s" % (out, name), "wb") as f:
            f.write(resp_input(c2, pkts))
        for i, (_, p) in enumerate(pkts):
            with open("%s/pkt/%s-%d" % (out, name, i), "wb") as f:
                f.write(p)
            npkt += 1
    os.makedirs(out + "/verbs", exist_ok=True)
    vs = verbs_seeds()
    for name, ops in vs:
        with open("%s/verbs/%s" % (out, name), "wb") as f:
            f.write(ops)
    print("seed_ops: %d resp seeds, %d pkt seeds, %d verbs seeds" % (len(all_seeds), npkt, len(vs)))


main()
