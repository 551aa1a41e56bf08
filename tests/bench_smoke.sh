#!/bin/sh
# bench_smoke.sh SV_BENCH PLOT_PY WORKDIR
#
# Proves the benchmark suite works, in a few seconds; it measures
# nothing worth keeping (benchmarks stay out of make check). Runs
# SV_BENCH (build/bench/sv_bench) in --quick mode with tiny limits (0.05 s
# per point, one message size: 64 KiB; alloc/reg up to 1 MiB, no peers:
# neither ucx_perftest nor fi_pingpong runs, installed or not), then
# checks:
#   - the exit status, and that the plain table and the targets came out,
#     the peers' target lines among them, each with its bound and a
#     figure or "not measured";
#   - the JSON's shape with PLOT_PY --validate (every family present,
#     every record with its values), and that the figures that must exist
#     are numbers: the bandwidths, the latencies, the baselines; the loss
#     family's lossless points (over UDP and the same-host link, and 1024
#     QPs x 4 processes), the one-QP ones with their final pattern checked
#     and no pattern found wrong anywhere, its lossy points and its targets
#     present (a stall is a figure there, not a failure); WRITE 1 MiB
#     between ibv_alloc_buf buffers and over UDP; the process_vm_writev
#     baseline (or a note saying why the kernel refused it); the peers'
#     targets in the JSON and the note that the peers were left out; the
#     paired family's records of the targets without a peer, and those
#     targets judged by their paired ratio;
#   - with python3-matplotlib installed, that PLOT_PY draws a PNG (else
#     that point is skipped, saying how to get it).
# TAP output; exit 0 when every point passed.
set -u

if [ $# -ne 3 ]; then
	echo "usage: bench_smoke.sh SV_BENCH PLOT_PY WORKDIR" >&2
	exit 2
fi
bench=$1 plot=$2 dir=$3
py=/usr/bin/python3
[ -x "$py" ] || py=python3

. "$(dirname "$0")/clean_env.sh" # no inherited SOFTVERBS_* but SV_TEST_SHM
rm -rf "$dir"
mkdir -p "$dir"
n=0 fail=0
point() { # point OK NAME
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		fail=$((fail + 1))
	fi
}

t0=$(date +%s)
"$bench" --quick --secs 0.05 --sizes 64K --max-alloc 1M --no-peers --quiet \
	--json "$dir/results.json" >"$dir/table.txt" 2>"$dir/stderr.txt"
rc=$?
t1=$(date +%s)
echo "# sv_bench took $((t1 - t0)) s, exit $rc"
[ $rc -eq 0 ] || sed 's/^/# /' "$dir/stderr.txt"
point $rc "sv_bench --quick with tiny limits exits 0"
grep -q '^RDMA bandwidth' "$dir/table.txt" && grep -q '^targets:' "$dir/table.txt"
point $? "the plain table and the targets are printed"
[ "$(grep -cE '^  peers: .+ (>=|<=) [0-9.]+: sweep +[^ ]+, paired +[^ ]+  (met|MISSED|not measured)$' "$dir/table.txt")" -eq 11 ]
point $? "the 11 target lines against the peers are printed"
[ ! -s "$dir/stderr.txt" ]
point $? "--quiet: nothing on stderr"

"$py" "$plot" --validate "$dir/results.json" 2>"$dir/validate.txt"
rc=$?
sed 's/^/# /' "$dir/validate.txt"
point $rc "the JSON has sv_bench's shape (plot.py --validate)"

"$py" - "$dir/results.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
res = doc["results"]
bad = []
def need(fam, op, variant, size, key, least=None):
    for r in res.get(fam, []):
        if r["op"] == op and r["variant"] == variant and r["size"] == size:
            v = r.get(key)
            if not isinstance(v, (int, float)) or (v <= 0 if least is None else v < least):
                bad.append("%s %s %s %d: %s = %r" % (fam, op, variant, size, key, v))
            return
    bad.append("%s %s %s %d: missing" % (fam, op, variant, size))
for fam in ("memcpy", "udp", "bw", "lat", "alloc_reg", "dmah", "dmah_bw", "loss", "loss_qps"):
    if fam not in res:
        bad.append("family %s missing" % fam)
for op in ("WRITE", "READ", "SEND"):
    need("bw", op, "", 65536, "mmsgs")
for op in ("FETCH_ADD", "CMP_SWAP"):
    need("bw", op, "", 8, "mmsgs")
need("lat", "WRITE", "busy_poll", 65536, "median_us")
need("lat", "WRITE", "sleeping", 8, "p99_us")
need("memcpy", "memcpy", "", 65536, "gbps")
need("udp", "stream", "", 4096, "gbps")
need("udp", "pingpong", "busy_poll", 8, "median_us")
for path in ("alloc_buf", "posix_memalign"):
    need("alloc_reg", path, "plain_pd", 4096, "total_us")
need("alloc_reg", "alloc_buf", "cc_bounce", 1048576, "total_us")
need("dmah", "alloc_dealloc", "ph1", 0, "per_s")
need("dmah", "reg_mr_ex_dmah", "ph1", 65536, "us")
for v in ("plain", "dmah_ph0", "dmah_ph1", "dmah_cpu", "dmah_pm"):
    need("dmah_bw", "WRITE", v, 65536, "mmsgs")
# a bounce device refuses private memory: recorded as EOPNOTSUPP (95)
cc = [r for r in res.get("alloc_reg", []) if r["op"] == "posix_memalign" and r["variant"] == "cc_bounce"]
if not cc or any(r.get("errno") != 95 for r in cc):
    bad.append("posix_memalign on the CC bounce device not recorded as EOPNOTSUPP")
# the loss family's 0.05 s intervals may see no completion on a loaded machine: >= 0
for v in ("udp 0%", "shm 0%"):
    need("loss", "WRITE", v, 65536, "gbps", 0)
    need("loss", "WRITE", v, 65536, "verified", 1)
# 1024 QPs x 4 processes may even stall there (then unchecked, null), never mismatch
need("loss_qps", "WRITE", "udp 1024x4 0%", 16384, "gbps", 0)
for r in res.get("loss_qps", []):
    if r.get("verified") == 0:
        bad.append("loss_qps %s: the final pattern did not arrive intact" % r["variant"])
for v in ("udp 0.5%", "udp 2%", "shm 0.5%", "shm 2%"):
    if not any(r["variant"] == v and r["size"] == 65536 for r in res.get("loss", [])):
        bad.append("loss WRITE %s 65536: missing" % v)
for t in ("loss_write64k_0p5pct_udp", "loss_write64k_2pct_shm", "loss_1024qp_x4_udp_clean",
          "loss_resent_per_lost_1pct"):
    if t not in doc["targets"]:
        bad.append("target %s missing" % t)
need("bw", "WRITE", "alloc_buf", 1048576, "gbps")
if not isinstance(doc["targets"].get("peer_write1m_allocbuf_vs_memcpy", {}).get("ratio"), (int, float)):
    bad.append("WRITE 1 MiB alloc_buf / memcpy 1 MiB is not a number")
need("bw", "WRITE", "udp", 1048576, "gbps")
notes = doc.get("peers", {}).get("notes", [])
for size in (65536, 1048576):
    if not any("process_vm_writev" in n for n in notes):
        need("vm_copy", "process_vm_writev", "", size, "gbps")
if not any("--no-peers" in n for n in notes):
    bad.append("no note that the peers were left out")
for fam in ("ucx", "fabric"):
    if fam in res:
        bad.append("family %s measured despite --no-peers" % fam)
for t in ("peer_write64k_vs_ucx_cma", "peer_write1m_vs_ucx_cma", "peer_read64k_vs_ucx_cma",
          "peer_read1m_vs_ucx_cma", "peer_write1m_allocbuf_vs_memcpy", "peer_lat8_busy_vs_ucx_cma",
          "peer_lat8_default_vs_busy", "peer_write8_mmsgs", "peer_udp_write64k_vs_ucx_tcp",
          "peer_udp_write1m_vs_ucx_tcp", "peer_udp_lat8_busy_vs_udp"):
    g = doc["targets"].get(t, {})
    if not isinstance(g.get("goal_min", g.get("goal_max")), (int, float)):
        bad.append("target %s missing or without its bound" % t)
# the paired family: the targets without a peer measured in pairs, judged by that
for t in ("peer_write1m_allocbuf_vs_memcpy", "peer_lat8_default_vs_busy", "peer_write8_mmsgs",
          "peer_udp_lat8_busy_vs_udp"):
    need("paired", t, "", 0, "ratio")
    need("paired", t, "", 0, "rounds", 1)
    g = doc["targets"].get(t, {})
    if g.get("ratio") != g.get("paired"):
        bad.append("target %s is not judged by its paired ratio" % t)
for r in res.get("paired", []):
    if "ucx" in r["op"]:
        bad.append("paired %s measured despite --no-peers" % r["op"])
for b in bad:
    print("# " + b)
sys.exit(1 if bad else 0)
EOF
point $? "every figure that must be measured is a positive number"

if "$py" -c 'import matplotlib' 2>/dev/null; then
	"$py" "$plot" "$dir/results.json" "$dir/bench.png" 2>"$dir/plot.txt"
	rc=$?
	sed 's/^/# /' "$dir/plot.txt"
	[ $rc -eq 0 ] && [ "$(head -c 8 "$dir/bench.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] &&
		[ "$(wc -c <"$dir/bench.png")" -gt 20000 ]
	point $? "plot.py draws a PNG"
else
	n=$((n + 1))
	echo "ok $n - plot.py draws a PNG # SKIP python3-matplotlib is missing (apt-get install python3-matplotlib)"
fi

echo "1..$n"
[ $fail -eq 0 ]
