# SPDX-License-Identifier: MIT
"""Shared by the pcap checkers (wire_icrc_scapy.py, wire_capture.py):
run tshark over a pcap of RoCE v2 packets and return its fields."""
import subprocess

PI_WARN = 0x00600000  # expert severities: chat, note, warn, error


def tshark_heuristics(tshark):
    """The dissectors tshark tries on an InfiniBand payload (SMB Direct,
    RPC-over-RDMA, iSER...): random payloads sometimes look like one of
    them, which then reports the packet malformed. Not our business."""
    out = subprocess.run([tshark, "-G", "heuristic-decodes"], capture_output=True,
                         text=True, check=True).stdout
    return sorted({ln.split("\t")[1] for ln in out.splitlines()
                   if ln.startswith("infiniband.payload\t")})


def tshark_rows(tshark, pcap, fields):
    """Run tshark (IPv4 checksums verified, payload heuristics off) and
    return (rows, error): one dict of `fields` per packet."""
    cmd = [tshark, "-n", "-r", pcap, "-o", "ip.check_checksum:TRUE", "-T", "fields",
           "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"]
    for proto in tshark_heuristics(tshark):
        cmd += ["--disable-protocol", proto]
    for f in fields:
        cmd += ["-e", f]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        return [], f"tshark failed ({res.returncode}): {res.stderr.strip()}"
    return [dict(zip(fields, line.split("\t"))) for line in res.stdout.splitlines()], None


def tshark_problem(v):
    """A malformed packet or an expert warning/error in a tshark row, or None.
    (Chats like "possible traceroute" for a low TTL are fine.)"""
    sev = [int(x, 0) for x in v.get("_ws.expert.severity", "").split(",") if x]
    if v.get("_ws.malformed") or any(x >= PI_WARN for x in sev):
        return f"malformed/expert: {v.get('_ws.malformed')!r} {v.get('_ws.expert.message')!r}"
    return None
