#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""plot.py - sv_bench's JSON (schema 2) as a PNG, or a check of its shape.

  plot.py RESULTS.json OUT.png     four panels against message size:
                                   bandwidth, message rate, latency
                                   (median and p99), alloc+reg cost;
                                   the same-run baselines (memcpy,
                                   process_vm_writev, UDP loopback) and
                                   peers (UCX puts over posix, cma, tcp;
                                   libfabric fi_pingpong over shm, tcp;
                                   when measured) drawn in;
                                   with the loss family, two more: WRITE
                                   against packet loss (fraction of
                                   lossless), N QPs x M processes
  plot.py --validate RESULTS.json  exit 1 (with the reasons) unless the
                                   file has the shape sv_bench writes

Needs Debian's python3-matplotlib for plotting (not for --validate):
  apt-get install python3-matplotlib
"""
import json
import math
import sys

# family -> value names every record of it must carry (numbers or null)
REQUIRED = {
    "bw": ["gbps", "mmsgs", "cpu_s_per_gb"],
    "lat": ["median_us", "p99_us"],
    "memcpy": ["gbps"],
    "udp": [],
    "alloc_reg": ["total_us", "alloc_us", "reg_us", "dereg_us", "free_us", "errno"],
    "dmah": ["us", "errno"],
    "dmah_bw": ["gbps", "mmsgs"],
    "ucx": ["median_us", "mbps", "msgs"],
    "vm_copy": ["gbps"],
    "fabric": ["one_way_us", "mbps"],
    "paired": ["ratio", "min", "max", "rounds", "num", "den"],
    "loss": ["drop", "gbps", "vs_lossless", "stalled", "verified", "err_wc", "lost",
             "retx_per_lost", "excess_per_lost", "resent_per_lost"],
    "loss_qps": ["drop", "gbps", "vs_lossless", "stalled", "verified", "err_wc", "lost",
                 "excess_per_lost", "resent_per_lost", "qps", "procs", "overflows", "kern_rcvbuf"],
}


def validate(doc):
    """Return a list of problems (empty when the shape is right)."""
    bad = []
    if not isinstance(doc, dict):
        return ["top level is not an object"]
    for key, typ in (("tool", str), ("schema", int), ("mode", str), ("secs_per_point", (int, float)),
                     ("host", dict), ("results", dict), ("ucx", dict), ("targets", dict)):
        if not isinstance(doc.get(key), typ):
            bad.append("missing or mistyped top-level %r" % key)
    if bad:
        return bad
    if doc["tool"] != "sv_bench" or doc["schema"] != 2:
        bad.append("not sv_bench schema 2")
    if doc["mode"] not in ("quick", "full"):
        bad.append("mode %r" % doc["mode"])
    for fam, recs in doc["results"].items():
        if fam not in REQUIRED:
            bad.append("unknown family %r" % fam)
            continue
        if not isinstance(recs, list) or not recs:
            bad.append("family %r is not a non-empty list" % fam)
            continue
        for i, r in enumerate(recs):
            where = "%s[%d]" % (fam, i)
            if not isinstance(r, dict):
                bad.append(where + " is not an object")
                continue
            if not isinstance(r.get("op"), str) or not isinstance(r.get("variant"), str):
                bad.append(where + " lacks op/variant strings")
            if not isinstance(r.get("size"), int) or r["size"] < 0:
                bad.append(where + " lacks an integer size")
            for k in REQUIRED[fam]:
                if k not in r:
                    bad.append("%s lacks %r" % (where, k))
            for k, v in r.items():
                if k in ("op", "variant", "size"):
                    continue
                if v is not None and not isinstance(v, (int, float)):
                    bad.append("%s.%s is not a number or null" % (where, k))
    if not isinstance(doc.get("peers", {}), dict) or \
            not all(isinstance(n, str) for n in doc.get("peers", {}).get("notes", [])):
        bad.append("peers is not an object with a list of notes")
    for name, t in doc["targets"].items():
        if not isinstance(t, dict) or "ratio" not in t or not isinstance(t.get("met"), bool):
            bad.append("target %r malformed" % name)
    return bad


def recs(doc, fam, op=None, variant=None):
    out = [r for r in doc["results"].get(fam, [])
           if (op is None or r["op"] == op) and (variant is None or r["variant"] == variant)]
    return sorted(out, key=lambda r: r["size"])


def xy(rs, key):
    pts = [(r["size"], r.get(key)) for r in rs]
    pts = [(x, y) for x, y in pts if isinstance(y, (int, float)) and y > 0 and math.isfinite(y)]
    return [p[0] for p in pts], [p[1] for p in pts]


def size_label(v, _pos=None):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v >= div:
            return "%g %s" % (v / div, unit)
    return "%g B" % v


def num(v):
    return isinstance(v, (int, float)) and math.isfinite(v)


# the peers, one style each: (family, variant) -> marker, colour, label
UCX_STYLES = {"posix": ("*", "tab:red", "UCX %s, posix shm"),
              "cma": ("P", "darkred", "UCX %s, cma"),
              "tcp_lo": ("X", "salmon", "UCX %s, tcp on lo")}
FI_STYLES = {"shm": ("d", "tab:olive", "libfabric fi_pingpong, shm"),
             "tcp": ("h", "olive", "libfabric fi_pingpong, tcp")}


def plot_peers(doc, ax, ucx_test, ucx_key, ucx_scale, fi_key, fi_scale):
    """The peers' points of one panel: UCX's `ucx_test` and fi_pingpong, scaled."""
    for variant, (marker, color, label) in UCX_STYLES.items():
        x, y = xy(recs(doc, "ucx", ucx_test, variant), ucx_key)
        if x:
            ax.plot(x, [v * ucx_scale for v in y], marker, color=color, ms=10,
                    label=label % ucx_test)
    if fi_key is None:
        return
    for variant, (marker, color, label) in FI_STYLES.items():
        x, y = xy(recs(doc, "fabric", "pingpong", variant), fi_key)
        if x:
            ax.plot(x, [v * fi_scale for v in y], marker, color=color, ms=9, label=label)


def plot_loss(doc, ax_drop, ax_qps):
    """WRITE against loss (fraction of lossless, log), and N QPs x M processes (GB/s)."""
    from matplotlib.ticker import FuncFormatter
    lines = {}
    for r in doc["results"].get("loss", []):
        link = r["variant"].split(" ")[0]
        lines.setdefault((link, r["size"]), []).append(r)
    styles = {"udp": ("o-", "over UDP"), "shm": ("s--", "over the same-host link")}
    for (link, size), rs in sorted(lines.items()):
        pts = sorted((r["drop"] * 100, r["vs_lossless"], r.get("stalled"))
                     for r in rs if num(r.get("drop")) and r["drop"] > 0 and num(r.get("vs_lossless")))
        if not pts:
            continue
        fmt, what = styles.get(link, ("x-", link))
        ln = ax_drop.plot([p[0] for p in pts], [max(p[1], 1e-4) for p in pts], fmt,
                          label="WRITE %s %s" % (size_label(size), what))[0]
        stalled = [p for p in pts if p[2]]
        if stalled:
            ax_drop.plot([p[0] for p in stalled], [max(p[1], 1e-4) for p in stalled], "x",
                         color=ln.get_color(), ms=12, mew=2)
    for goal, at in ((0.5, 0.5), (0.25, 2.0)):
        ax_drop.plot([at], [goal], "k^", ms=9)
    ax_drop.plot([], [], "k^", label="targets, 64 KiB (0.5% >= 0.50, 2% >= 0.25)")
    ax_drop.plot([], [], "kx", ms=10, mew=2, label="stalled: not drained in the bound")
    ax_drop.set_xscale("log")
    ax_drop.set_yscale("log")
    ticks = sorted({r["drop"] * 100 for r in doc["results"].get("loss", [])
                    if num(r.get("drop")) and r["drop"] > 0})
    ax_drop.set_xticks(ticks)
    ax_drop.set_xticklabels(["%g%%" % t for t in ticks])
    ax_drop.xaxis.set_minor_formatter(FuncFormatter(lambda _v, _p: ""))
    lo, _hi = ax_drop.get_ylim()
    ax_drop.set_ylim(lo, 1.5)
    ax_drop.set_xlabel("packets dropped by each process's sender, % (log scale)")
    ax_drop.set_ylabel("throughput / lossless of the same run (log scale)")
    ax_drop.set_title("RDMA WRITE under random packet loss, one QP")
    ax_drop.grid(True, which="major", alpha=0.3)
    if ax_drop.get_legend_handles_labels()[0]:
        ax_drop.legend(fontsize=7.5, loc="best")

    rs = doc["results"].get("loss_qps", [])
    groups = sorted({(r["variant"].split(" ")[0], r.get("qps"), r.get("procs")) for r in rs},
                    key=lambda g: (g[0], g[2] or 0, g[1] or 0))
    width = 0.4
    for k, drop in enumerate(sorted({r.get("drop") for r in rs if num(r.get("drop"))})):
        ys = []
        for g in groups:
            m = [r for r in rs if (r["variant"].split(" ")[0], r.get("qps"), r.get("procs")) == g
                 and r.get("drop") == drop]
            ys.append(m[0]["gbps"] if m and num(m[0].get("gbps")) else 0)
        ax_qps.bar([i + (k - 0.5) * width for i in range(len(groups))], ys, width,
                   label="%g%% loss" % (drop * 100))
    ax_qps.set_xticks(range(len(groups)))
    ax_qps.set_xticklabels(["%s\n%sx%s" % (g[0], g[1], g[2]) for g in groups], fontsize=7.5)
    ax_qps.set_ylabel("aggregate GB/s")
    ax_qps.set_title("RDMA WRITE 16 KiB, N QPs x M processes in a ring (link, N x M)")
    ax_qps.grid(True, axis="y", alpha=0.3)
    if ax_qps.get_legend_handles_labels()[0]:
        ax_qps.legend(fontsize=7.5, loc="best")


def plot(doc, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator

    has_loss = bool(doc["results"].get("loss") or doc["results"].get("loss_qps"))
    fig, axes = plt.subplots(3 if has_loss else 2, 2, figsize=(13, 14 if has_loss else 9.5))
    (ax_bw, ax_rate), (ax_lat, ax_alloc) = axes[0], axes[1]
    colors = {"WRITE": "tab:blue", "READ": "tab:green", "SEND": "tab:orange",
              "FETCH_ADD": "tab:purple", "CMP_SWAP": "tab:brown"}
    udp = {r["op"]: r for r in doc["results"].get("udp", [])}

    # bandwidth
    for op in ("WRITE", "READ", "SEND"):
        x, y = xy(recs(doc, "bw", op, ""), "gbps")
        if x:
            ax_bw.plot(x, y, "o-", color=colors[op], label="softverbs RDMA " + op)
    dm = {}
    for r in recs(doc, "dmah_bw"):
        dm.setdefault(r["variant"], []).append(r)
    markers = {"dmah_ph0": "v", "dmah_ph1": "^", "dmah_cpu": "s", "dmah_pm": "D"}
    for v, rs in sorted(dm.items()):
        if v == "plain":
            continue
        x, y = xy(rs, "gbps")
        if x:
            ax_bw.plot(x, y, markers.get(v, "x"), color="tab:cyan", alpha=0.8,
                       label="WRITE into MR with DMA handle, " + v.replace("dmah_", ""))
    x, y = xy(recs(doc, "memcpy"), "gbps")
    if x:
        ax_bw.plot(x, y, "--", color="gray", label="baseline: memcpy (one process)")
    s = udp.get("stream")
    if s and isinstance(s.get("gbps"), (int, float)):
        ax_bw.axhline(s["gbps"], ls=":", color="black",
                      label="baseline: UDP lo, one 4 KiB stream (%.2f GB/s)" % s["gbps"])
    for variant, (fmt, label) in (("alloc_buf", ("o", "softverbs WRITE, ibv_alloc_buf on both sides")),
                                  ("udp", ("v", "softverbs WRITE over UDP (SOFTVERBS_SHM=0)"))):
        x, y = xy(recs(doc, "bw", "WRITE", variant), "gbps")
        if x:
            ax_bw.plot(x, y, fmt, color="tab:blue", mfc="none", ms=9, label=label)
    x, y = xy(recs(doc, "vm_copy"), "gbps")
    if x:
        ax_bw.plot(x, y, "s:", color="dimgray", label="baseline: process_vm_writev (two processes)")
    plot_peers(doc, ax_bw, "put_bw", "mbps", 1e-3, "mbps", 1e-3)
    ax_bw.set_title("Bandwidth")
    ax_bw.set_ylabel("GB/s (10^9 bytes/s), log scale")

    # message rate
    for op in ("WRITE", "READ", "SEND"):
        x, y = xy(recs(doc, "bw", op, ""), "mmsgs")
        if x:
            ax_rate.plot(x, y, "o-", color=colors[op], label="softverbs RDMA " + op)
    for op in ("FETCH_ADD", "CMP_SWAP"):
        x, y = xy(recs(doc, "bw", op, ""), "mmsgs")
        if x:
            ax_rate.plot(x, y, "P", color=colors[op], ms=10, label="softverbs atomic " + op)
    if s and isinstance(s.get("mpps"), (int, float)):
        ax_rate.plot([s["size"]], [s["mpps"]], "k*", ms=11,
                     label="baseline: UDP lo 4 KiB stream, Mpkt/s")
    plot_peers(doc, ax_rate, "put_bw", "msgs", 1e-6, None, 0)
    ax_rate.set_title("Message rate")
    ax_rate.set_ylabel("million messages/s, log scale")

    # latency
    busy = recs(doc, "lat", "WRITE", "busy_poll")
    x, y = xy(busy, "median_us")
    if x:
        ax_lat.plot(x, y, "o-", color="tab:blue", label="softverbs WRITE ping-pong, busy-poll, median")
    x, y = xy(busy, "p99_us")
    if x:
        ax_lat.plot(x, y, "o--", color="tab:blue", alpha=0.45, label="  the same, p99")
    for r in recs(doc, "lat", "WRITE", "sleeping"):
        if isinstance(r.get("median_us"), (int, float)):
            ax_lat.plot([r["size"]], [r["median_us"]], "s", color="tab:orange", ms=8,
                        label="softverbs WRITE, sleeping progress thread, median")
    p = udp.get("pingpong")
    if p and isinstance(p.get("median_us"), (int, float)):
        ax_lat.axhline(p["median_us"], ls=":", color="black",
                       label="baseline: UDP lo busy ping-pong, 8 B, median (%.1f us)" % p["median_us"])
    for r in recs(doc, "lat", "WRITE", "busy_poll_udp"):
        if num(r.get("median_us")):
            ax_lat.plot([r["size"]], [r["median_us"]], "v", color="tab:blue", mfc="none", ms=9,
                        label="softverbs WRITE, busy-poll, over UDP (SOFTVERBS_SHM=0), median")
    plot_peers(doc, ax_lat, "put_lat", "median_us", 1, "one_way_us", 1)
    ax_lat.set_title("Latency (one-way = half a round trip)")
    ax_lat.set_ylabel("microseconds, log scale")

    # alloc + reg
    styles = {("alloc_buf", "plain_pd"): ("o-", "tab:blue", "ibv_alloc_buf + ibv_reg_buf_mr, plain PD"),
              ("posix_memalign", "plain_pd"): ("s--", "gray", "posix_memalign + ibv_reg_mr, plain PD"),
              ("alloc_buf", "cc_bounce"): ("^-", "tab:red", "ibv_alloc_buf + ibv_reg_buf_mr, CC parent domain (bounce)")}
    for (op, variant), (fmt, color, label) in styles.items():
        x, y = xy(recs(doc, "alloc_reg", op, variant), "total_us")
        if x:
            ax_alloc.plot(x, y, fmt, color=color, label=label)
    ax_alloc.set_title("alloc + register + deregister + free (median per cycle)")
    ax_alloc.set_ylabel("microseconds, log scale")

    for ax in (ax_bw, ax_rate, ax_lat, ax_alloc):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=4))
        ax.xaxis.set_major_formatter(FuncFormatter(size_label))
        ax.set_xlabel("message size (bytes, log scale)" if ax is not ax_alloc
                      else "buffer size (bytes, log scale)")
        ax.grid(True, which="major", alpha=0.3)
        lo, hi = ax.get_ylim()
        if lo > 0 and hi / lo < 100:  # under two decades: label the minor ticks too
            ax.yaxis.set_minor_formatter(FuncFormatter(
                lambda v, _p: "%g" % v if ("%.0e" % v)[0] in "25" else ""))
            ax.tick_params(axis="y", which="minor", labelsize=7)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7.5, loc="best")
        for lab in ax.get_xticklabels():
            lab.set_rotation(30)
    if has_loss:
        plot_loss(doc, axes[2][0], axes[2][1])
    host = doc.get("host", {})
    fig.suptitle("softverbs sv_bench (%s run, %.2f s per point, %s CPUs, load average %s -> %s): "
                 "two processes over loopback; compare within this run"
                 % (doc.get("mode"), doc.get("secs_per_point", 0), host.get("cpus", "?"),
                    host.get("loadavg_start", "?"), host.get("loadavg_end", "?")), fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.98 if has_loss else 0.97))
    fig.savefig(out, dpi=110)


def main(argv):
    if len(argv) == 3 and argv[1] == "--validate":
        with open(argv[2]) as f:
            doc = json.load(f)
        bad = validate(doc)
        for b in bad:
            print("plot.py: %s: %s" % (argv[2], b), file=sys.stderr)
        return 1 if bad else 0
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        doc = json.load(f)
    bad = validate(doc)
    if bad:
        for b in bad:
            print("plot.py: %s: %s" % (argv[1], b), file=sys.stderr)
        return 1
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("plot.py: matplotlib is missing: apt-get install python3-matplotlib", file=sys.stderr)
        return 3
    plot(doc, argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
