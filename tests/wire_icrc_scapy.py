#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Cross-check our RoCE v2 packets against independent decoders.

usage: wire_icrc_scapy.py PCAP MANIFEST [TSHARK]

PCAP holds packets built by softverbs (unit_wire --pcap), MANIFEST one
line per packet with what we wrote (see write_pcap() in unit_wire.c):

  frame opcode flags dqpn psn paylen icrc_wire_hex pkey va rkey dma_len
  qkey sqpn msn

scapy.contrib.roce recomputes every ICRC (its own CRC-32 over its own
pseudo header) and decodes the BTH; tshark, when given, must dissect
every packet as InfiniBand with the fields we wrote, find the ICRC where
we put it, and raise no malformed packet or expert warning/error (with
the IPv4 header checksum verified). tshark 4.0 does not verify the ICRC
itself; it shows it as the four wire bytes read big-endian. Exit 0 when everything agrees, 1 otherwise.
"""
import sys

from scapy.all import IP, UDP, rdpcap, raw
from scapy.contrib.roce import BTH

from roce_pcap import tshark_problem, tshark_rows

# enum sw_op_flag in src/sw/wire.h
F_DETH, F_RETH, F_ATMETH, F_AETH = 1 << 0, 1 << 1, 1 << 2, 1 << 5

FIELDS = ["opcode", "flags", "dqpn", "psn", "paylen", "icrc", "pkey", "va",
          "rkey", "dma_len", "qkey", "sqpn", "msn"]


def read_manifest(path):
    rows = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            row = dict(zip(FIELDS, parts[1:]))
            for k in FIELDS:
                row[k] = bytes.fromhex(row[k]) if k == "icrc" else int(row[k])
            rows[int(parts[0])] = row
    return rows


def check_scapy(pkts, man):
    """Return (mismatched ICRCs, other problems)."""
    icrc_bad, errors = 0, []
    for n, p in enumerate(pkts, 1):
        want = man.get(n)
        if want is None:
            errors.append(f"frame {n}: not in the manifest")
            continue
        if not (p.haslayer(IP) and p.haslayer(UDP) and p.haslayer(BTH)):
            errors.append(f"frame {n}: scapy sees no IP/UDP/BTH: {p.summary()}")
            continue
        ip, udp, bth = p[IP], p[UDP], p[BTH]
        wire = raw(ip)
        if udp.dport != 4791 or ip.flags != "DF" or ip.id != 0:
            errors.append(f"frame {n}: dport {udp.dport}, flags {ip.flags}, id {ip.id}")
        # our IPv4 header checksum, recomputed by scapy
        chk = IP(wire)
        del chk.chksum
        if IP(raw(chk)).chksum != ip.chksum:
            errors.append(f"frame {n}: IPv4 header checksum")
        theirs = bth.compute_icrc(None)
        ours = wire[-4:]
        if theirs != ours or ours != want["icrc"]:
            icrc_bad += 1
            errors.append(f"frame {n}: ICRC on the wire {ours.hex()}, manifest "
                          f"{want['icrc'].hex()}, scapy {theirs.hex()}")
        got = (bth.opcode, bth.dqpn, bth.psn, bth.pkey, bth.version)
        exp = (want["opcode"], want["dqpn"], want["psn"], want["pkey"], 0)
        if got != exp:
            errors.append(f"frame {n}: scapy decodes opcode/dqpn/psn/pkey/tver "
                          f"{got}, we wrote {exp}")
    return icrc_bad, errors


# RC FLUSH (0x1c) and ATOMIC WRITE (0x1d), IBTA 1.5: the InfiniBand
# dissector of Debian's tshark names neither, so it decodes their BTH only
# (not their headers, nor where the ICRC is)
IBTA15_OPS = (0x1c, 0x1d)

TSHARK_FIELDS = ["frame.number", "frame.protocols", "infiniband.bth.opcode",
                 "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.bth.p_key",
                 "infiniband.invariant.crc", "infiniband.reth.va", "infiniband.reth.r_key",
                 "infiniband.reth.dmalen", "infiniband.deth.q_key", "infiniband.deth.srcqp",
                 "infiniband.aeth.msn", "_ws.malformed", "_ws.expert.severity",
                 "_ws.expert.message", "ip.checksum.status"]


def check_tshark(tshark, pcap, man):
    """Return (packets dissected, problems)."""
    rows, err = tshark_rows(tshark, pcap, TSHARK_FIELDS)
    if err:
        return 0, [err]
    errors, seen = [], 0
    for v in rows:
        n = int(v["frame.number"])
        want = man[n]
        seen += 1

        def num(name):
            s = v.get(name, "")
            return int(s, 0) if s else None

        if "infiniband" not in v["frame.protocols"].split(":"):
            errors.append(f"frame {n}: tshark protocols {v['frame.protocols']}")
            continue
        problem = tshark_problem(v)
        if problem:
            errors.append(f"frame {n}: tshark {problem}")
        if v.get("ip.checksum.status") != "1":
            errors.append(f"frame {n}: IPv4 checksum status {v.get('ip.checksum.status')!r}")
        got = [num("infiniband.bth.opcode"), num("infiniband.bth.destqp"),
               num("infiniband.bth.psn"), num("infiniband.bth.p_key")]
        exp = [want["opcode"], want["dqpn"], want["psn"], want["pkey"]]
        if want["opcode"] & 0xe0 == 0xa0:
            # XRC: Debian 12's tshark (Wireshark 4.0) names the opcode but shows
            # what follows the BTH (XRCETH, RETH, ..., ICRC) as unknown data;
            # scapy checked the ICRC above, unit_wire the headers
            if got != exp:
                errors.append(f"frame {n}: tshark decodes {got}, we wrote {exp}")
            continue
        fl = want["flags"]
        if want["opcode"] in IBTA15_OPS:
            fl = 0  # the BTH only (scapy checked the ICRC above)
        else:
            # tshark shows the ICRC as the four wire bytes read big-endian
            got.append(num("infiniband.invariant.crc"))
            exp.append(int.from_bytes(want["icrc"], "big"))
        if fl & (F_RETH | F_ATMETH):
            got += [num("infiniband.reth.va"), num("infiniband.reth.r_key")]
            exp += [want["va"], want["rkey"]]
        if fl & F_RETH:
            got.append(num("infiniband.reth.dmalen"))
            exp.append(want["dma_len"])
        if fl & F_DETH:
            got += [num("infiniband.deth.q_key"), num("infiniband.deth.srcqp")]
            exp += [want["qkey"], want["sqpn"]]
        if fl & F_AETH:
            got.append(num("infiniband.aeth.msn"))
            exp.append(want["msn"])
        if got != exp:
            errors.append(f"frame {n}: tshark decodes {got}, we wrote {exp}")
    if seen != len(man):
        errors.append(f"tshark dissected {seen} packets, the manifest has {len(man)}")
    return seen, errors


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    pcap, manifest = sys.argv[1], sys.argv[2]
    man = read_manifest(manifest)
    pkts = rdpcap(pcap)
    failed = False

    icrc_bad, errors = check_scapy(pkts, man)
    if len(pkts) != len(man):
        errors.append(f"{len(pkts)} packets in the pcap, {len(man)} in the manifest")
    for e in errors[:20]:
        print("# scapy: " + e)
    print(f"scapy: {len(pkts)} packets, {icrc_bad} ICRC mismatches, "
          f"{len(errors) - icrc_bad} other problems")
    failed |= bool(errors) or not pkts

    if len(sys.argv) == 4:
        seen, errors = check_tshark(sys.argv[3], pcap, man)
        for e in errors[:20]:
            print("# tshark: " + e)
        print(f"tshark: {seen} packets dissected as InfiniBand, {len(errors)} problems")
        failed |= bool(errors) or not seen
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
