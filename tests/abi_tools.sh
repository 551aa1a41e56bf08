#!/bin/sh
# abi_tools.sh LIBDIR ibverbs-utils|perftest|pyverbs [sanitized]
#
# Debian's unmodified binaries against the libibverbs.so.1 in LIBDIR (the
# build's lib/), through LD_LIBRARY_PATH:
#  - the dynamic loader resolves libibverbs.so.1 to LIBDIR, for every
#    binary and (perftest) for the libraries it loads with it: libmlx5,
#    libefa and librdmacm are BIND_NOW against IBVERBS_PRIVATE_34;
#  - nothing prints "no version information", "symbol lookup error",
#    "undefined symbol" or "version ... not found";
#  - the tools see the software device, under a name only it can have
#    (SOFTVERBS_DEV_NAME=svabi0):
#      ibverbs-utils: ibv_devices and ibv_devinfo [-v] exit 0 and list it;
#                     ibv_rc_pingpong and ibv_ud_pingpong load;
#      perftest:      the six ib_* tools load and print their usage, and an
#                     ib_write_bw server opens the device and waits for a
#                     client;
#      pyverbs:       the pyverbs modules link to LIBDIR, and the system
#                     python lists, opens and queries the device, allocates a
#                     PD and registers an MR, with only our library mapped.
# Exit 77 (skipped) with the reason when the package is not installed or the
# build is sanitized (an instrumented library cannot be loaded into
# uninstrumented binaries).
set -u
. "$(dirname "$0")/tap.sh"

if [ $# -lt 2 ]; then
	echo "usage: abi_tools.sh LIBDIR ibverbs-utils|perftest|pyverbs [sanitized]" >&2
	exit 2
fi
libdir=$(cd "$1" && pwd -P) || exit 2
what=$2
sanitized=${3:-}

[ "$sanitized" = sanitized ] &&
	skip "sanitized build: Debian's binaries cannot load an instrumented libibverbs.so.1"
[ -e "$libdir/libibverbs.so.1" ] || { echo "not ok - no $libdir/libibverbs.so.1"; exit 1; }

. "$(dirname "$0")/clean_env.sh" # no inherited SOFTVERBS_* but SV_TEST_SHM
export SOFTVERBS_DEV_NAME=svabi0
dev=svabi0
export LD_LIBRARY_PATH="$libdir"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# show FILE: the file's lines as TAP comments (at most 40)
show() {
	head -n 40 "$1" | sed 's/^/#   /'
}

# loader_clean FILE: no dynamic-loader complaint in FILE
loader_clean() {
	! grep -Eq 'no version information|symbol lookup error|undefined symbol|version `[^'\'']*'\'' not found|cannot open shared object' "$1"
}

# traced_ours NAME FILE: FILE (a loader trace) maps libibverbs.so.1 to
# $libdir and has no unresolved library
traced_ours() {
	got=$(sed -n 's/^[[:space:]]*libibverbs\.so\.1 => \([^ ]*\) .*/\1/p' "$2")
	if [ -z "$got" ]; then
		not_ok "$1: libibverbs.so.1 not in the loader trace"
		show "$2"
		return
	fi
	gotdir=$(cd "$(dirname "$got")" && pwd -P)
	if [ "$gotdir" != "$libdir" ]; then
		not_ok "$1: libibverbs.so.1 resolves to $got, not $libdir"
		return
	fi
	if grep -q 'not found' "$2"; then
		not_ok "$1: unresolved libraries"
		grep 'not found' "$2" | sed 's/^/#   /'
		return
	fi
	ok "$1: libibverbs.so.1 => $got"
}

# trace BIN: LD_TRACE_LOADED_OBJECTS=1 of an executable
trace() {
	LD_TRACE_LOADED_OBJECTS=1 "$(command -v "$1")" >"$tmp/trace" 2>&1
	traced_ours "$1 (LD_TRACE_LOADED_OBJECTS)" "$tmp/trace"
}

# run NAME WANT_RC PATTERN CMD...: run CMD (output in $tmp/out); the exit
# code must be WANT_RC ("any" to ignore it), stdout+stderr must match the
# extended regex PATTERN and have no loader complaint
run() {
	name=$1 want=$2 pat=$3
	shift 3
	"$@" >"$tmp/out" 2>&1
	rc=$?
	if [ "$want" != any ] && [ "$rc" -ne "$want" ]; then
		not_ok "$name: exit code $rc, want $want"
		show "$tmp/out"
	elif ! loader_clean "$tmp/out"; then
		not_ok "$name: loader complaint"
		show "$tmp/out"
	elif ! grep -Eq "$pat" "$tmp/out"; then
		not_ok "$name: output lacks /$pat/"
		show "$tmp/out"
	else
		ok "$name"
	fi
}

case $what in
ibverbs-utils)
	command -v ibv_devinfo >/dev/null && command -v ibv_devices >/dev/null ||
		skip "ibverbs-utils is not installed (apt-get install ibverbs-utils)"
	for b in ibv_devices ibv_devinfo ibv_rc_pingpong ibv_ud_pingpong ibv_srq_pingpong; do
		command -v "$b" >/dev/null && trace "$b"
	done
	run "ibv_devices lists $dev" 0 "^[[:space:]]*$dev[[:space:]]" ibv_devices
	run "ibv_devinfo shows $dev" 0 "hca_id:[[:space:]]*$dev" ibv_devinfo
	run "ibv_devinfo -d $dev shows an active port" 0 "PORT_ACTIVE" ibv_devinfo -d "$dev"
	run "ibv_devinfo -v shows the GID" 0 "GID\[ *0\]:" ibv_devinfo -v
	# what the pingpong tools and perftest rely on (tools_traffic.sh runs them)
	run "ibv_devinfo -v: a RoCE v2 GID on 127.0.0.N" 0 \
		"GID\[ *0\]:[[:space:]]*::ffff:127\.[0-9]+\.[0-9]+\.[0-9]+, RoCE v2" ibv_devinfo -v -d "$dev"
	run "ibv_devinfo -v: Ethernet link layer" 0 "link_layer:[[:space:]]*Ethernet" ibv_devinfo -v
	run "ibv_devinfo -v: active MTU 4096 on loopback" 0 "active_mtu:[[:space:]]*4096 \(5\)" \
		ibv_devinfo -v
	run "ibv_devinfo -v: READ/atomic depth (max_qp_rd_atom) at least 1" 0 \
		"max_qp_rd_atom:[[:space:]]*[1-9]" ibv_devinfo -v
	run "ibv_devinfo -v: vendor 0xffffff, outside perftest's device tables" 0 \
		"vendor_id:[[:space:]]*0xffffff" ibv_devinfo -v
	run "ibv_devinfo -v: atomics across the HCA" 0 "atomic_cap:[[:space:]]*ATOMIC_HCA" ibv_devinfo -v
	run "ibv_devices shows the node GUID" 0 "^[[:space:]]*$dev[[:space:]]+[0-9a-f]{16}\$" ibv_devices
	for b in ibv_rc_pingpong ibv_ud_pingpong ibv_srq_pingpong; do
		command -v "$b" >/dev/null && run "$b -h loads" any "Usage" "$b" -h
	done
	;;
perftest)
	command -v ib_write_bw >/dev/null || skip "perftest is not installed (apt-get install perftest)"
	for b in ib_write_bw ib_write_lat ib_read_bw ib_atomic_bw ib_send_bw ib_send_lat; do
		command -v "$b" >/dev/null || continue
		trace "$b"
		# the providers and librdmacm that perftest loads link to ours too
		for l in libmlx5.so.1 libefa.so.1 librdmacm.so.1; do
			grep -q "$l => /" "$tmp/trace" || not_ok "$b: $l not resolved"
		done
		run "$b -h loads" any "Usage:" "$b" -h
	done
	# A server opens the device and waits on TCP for its client; stdout is
	# unbuffered so that what it printed survives the timeout's SIGTERM.
	port=$((20000 + $$ % 20000))
	if command -v timeout >/dev/null && command -v stdbuf >/dev/null; then
		run "ib_write_bw -d $dev server waits for a client" any "Waiting for client" \
			timeout 3 stdbuf -o0 -e0 ib_write_bw -d "$dev" -p "$port"
	fi
	run "ib_write_bw -d nosuch finds no such device" any "nosuch not found" \
		ib_write_bw -d nosuch -p "$port"
	;;
pyverbs)
	py=/usr/bin/python3
	[ -x "$py" ] || skip "no system python at $py"
	mods=$("$py" -c 'import importlib.util as u, os; s = u.find_spec("pyverbs"); print(os.path.dirname(s.origin) if s else "")' 2>/dev/null)
	[ -n "$mods" ] || skip "python3-pyverbs is not installed (apt-get install python3-pyverbs)"
	for m in device pd mr cq qp; do
		so=$(ls "$mods/$m".cpython-*.so 2>/dev/null | head -n 1)
		[ -n "$so" ] || continue
		ldd "$so" >"$tmp/trace" 2>&1
		traced_ours "pyverbs.$m module (ldd)" "$tmp/trace"
	done
	cat >"$tmp/probe.py" <<'EOF'
import os, sys
import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.mr import MR

name = os.environ["SOFTVERBS_DEV_NAME"]
names = [x.name.decode() for x in d.get_device_list()]
print("devices:", names)
ctx = Context(name=name)
attr = ctx.query_device()
port = ctx.query_port(1)
print("vendor_id: %#x ports: %d port1 state: %d" % (attr.vendor_id, attr.phys_port_cnt, port.state))
pd = PD(ctx)
mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
print("mr lkey: %#x" % mr.lkey)
mr.close()
pd.close()
ctx.close()
libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libibverbs.so" in l})
print("mapped:", " ".join(libs))
sys.exit(0 if name in names and port.state == e.IBV_PORT_ACTIVE else 1)
EOF
	run "python3 -c 'import pyverbs.device; get_device_list()' lists $dev" 0 \
		"devices:.*'$dev'" "$py" -c 'import pyverbs.device as d; print("devices:", [x.name.decode() for x in d.get_device_list()])'
	run "pyverbs opens $dev, queries it, allocates a PD and an MR" 0 "mr lkey: 0x" \
		"$py" "$tmp/probe.py"
	mapped=$(sed -n 's/^mapped: //p' "$tmp/out")
	want="$libdir/libibverbs.so.1"
	want=$(readlink -f "$want")
	if [ "$mapped" = "$want" ]; then
		ok "pyverbs maps only $mapped"
	else
		not_ok "pyverbs maps '$mapped', want only $want"
	fi
	;;
*)
	echo "abi_tools.sh: unknown consumer '$what'" >&2
	exit 2
	;;
esac

tap_done
