#!/bin/bash
# SPDX-License-Identifier: MIT
# tests/interop/interop.sh [--quick] [--only REGEX] [--capture PCAP] [--capture-cm PCAP]
#                                                                       (make interop)
#
# softverbs against the Linux kernel's own RoCE v2 driver. Builds a guest
# image from installed Debian packages (mkimage.sh: linux-image-amd64 with
# rdma_rxe, busybox-static, libibverbs1 + ibverbs-providers, ibverbs-utils,
# perftest, iproute2), boots it with QEMU on a tap device in a network
# namespace of its own (vm.sh), and runs Debian's unmodified tools with
# softverbs on the host side and rxe in the guest, in both directions
# (runs.sh checks each run and both sides' counters):
#   ibv_rc_pingpong 1 B to 64 KiB with -c, ibv_uc_pingpong (4 KiB, 64 KiB),
#   ibv_ud_pingpong, ibv_srq_pingpong,
#   ib_write_bw, ib_read_bw, ib_send_bw (RC and UD), ib_atomic_bw
#   (FETCH_AND_ADD, CMP_AND_SWAP), ib_write_lat; the same over the IPv6
#   GIDs when softverbs takes an IPv6 SOFTVERBS_ADDR; our iop_rdma_ops
#   (memory windows of both types, ATOMIC WRITE, FLUSH: what Debian's
#   tools lack; a test the guest's rxe does not support is a SKIP with
#   the reason); and runs with
#   softverbs' fault injection (SOFTVERBS_FAULT, drops on its send side and
#   on its receive side), each required to cross a recovery path of one
#   side or the other (NAKs, retransmissions); then rdma_cm programs
#   (rdmacm-utils' rping, ucmatose, udaddy, perftest's ib_write_bw -R)
#   with softverbs' librdmacm against the kernel's rdma_cm (cm_runs.sh).
# --quick       the CI subset: one boot, a few runs in each direction; a
#               run of the verbs matrix that fails is run once more and
#               passes only if that attempt passes, its line naming the
#               first failure (the emulated guest stalls now and then on a
#               loaded host)
# --only REGEX  only the runs whose name matches
# --capture F   instead of the matrix, a few short runs of each kind of
#               packet rxe sends (RC SEND, WRITE and READ responses of three
#               packets each, READ requests, atomics and their ACKs, ACKs,
#               UD SEND) and the packets rxe sent to softverbs, whole, into
#               the pcap F (how tests/data/rxe_roce.pcap was made)
# --capture-cm F  instead of the matrix, rping in each direction, its CM
#               MADs (both sides') whole into the pcap F (how
#               tests/data/rxe_cm.pcap was made)
# Needs root (namespaces, tap), qemu-system-x86_64, the packages above and
# a built softverbs (make; SV_LIB=DIR overrides build/lib). Files of the
# last run: build/interop/last/. Last line: "interop: N passed, N failed"
# (and ", N skipped" when runs were skipped);
# the exit status is 1 if anything failed, 77 (skipped) with the reason
# when something it needs is missing.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/vm.sh"
. "$here/runs.sh"
. "$here/cm_runs.sh"

quick=0 ONLY='' capture='' capture_cm=''
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 INTEROP_RETRY=1 ;;
	--only) ONLY=$2; shift ;;
	--capture) capture=$2; shift ;;
	--capture-cm) capture_cm=$(realpath -m "$2"); shift ;;
	*) echo "usage: interop.sh [--quick] [--only REGEX] [--capture PCAP] [--capture-cm PCAP]" >&2; exit 2 ;;
	esac
	shift
done

skip() {
	echo "interop: skipped: $*"
	exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root (network namespace, tap device)"
for b in qemu-system-x86_64 ip timeout ibv_rc_pingpong ib_write_bw cpio; do
	command -v "$b" >/dev/null || skip "$b is missing (apt-get install qemu-system-x86 iproute2 ibverbs-utils perftest cpio)"
done
command -v tcpdump >/dev/null || skip "tcpdump is missing (apt-get install tcpdump)"
command -v python3 >/dev/null || skip "python3 is missing"
[ -c /dev/net/tun ] || skip "no /dev/net/tun"
SV_LIB=$(cd "${SV_LIB:-$top/build/lib}" 2>/dev/null && pwd) || skip "no build/lib (make first)"
[ -e "$SV_LIB/libibverbs.so.1" ] || skip "no $SV_LIB/libibverbs.so.1 (make first)"
IOP_HOST=$(cd "$SV_LIB/../tests/interop" 2>/dev/null && pwd)/iop_rdma_ops
[ -x "$IOP_HOST" ] || skip "no build/tests/interop/iop_rdma_ops (make first)"

out=$top/build/interop
RUNS=$out/last
rm -rf "$RUNS"
mkdir -p "$RUNS"
mapfile -t image < <(bash "$here/mkimage.sh" "$out" "$IOP_HOST") && [ ${#image[@]} -eq 2 ] ||
	skip "cannot build the guest image (see above)"
t_start=$SECONDS
cap_pid=''
cleanup() {
	if [ -n "$cap_pid" ]; then
		kill -INT "$cap_pid" 2>/dev/null
		wait "$cap_pid" 2>/dev/null
	fi
	vm_down
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

echo "interop: kernel ${image[0]}, image ${image[1]}"
vm_up "$RUNS/vm" "${image[0]}" "${image[1]}" || { echo "interop: 0 passed, 1 failed"; exit 1; }
echo "interop: guest up after $((SECONDS - t_start)) s ($VM_ACCEL): $(grep -m1 'interop-guest: kernel' "$RUNS/vm/console.log" | sed 's/.*: //')"
H_TO_G=$G4 G_TO_H=$H4

# GID indexes, per GID mode (runs.sh), of the address each side uses
g_run 30 "$RUNS/rxe.devinfo" "ibv_devinfo -v -d rxe0"
# the guest's link-local address, once it is configured and past duplicate
# address detection (a tentative one is no GID yet; it took a few seconds
# of the emulated guest after its agent came up)
GLL=''
for ((i = 0; i < 30; i++)); do
	g_run 10 "$RUNS/rxe.ll" "ip -6 -o addr show dev eth0 scope link"
	GLL=$(awk '!/tentative/ { sub(/\/.*/, "", $4); print $4; exit }' "$RUNS/rxe.ll")
	[ -n "$GLL" ] && break
	sleep 1
done
HLL=$(h_exec ip -6 -o addr show dev "$TAP" scope link | awk '{ sub(/\/.*/, "", $4); print $4; exit }')
GADDR=([v4]=$G4 [v6]=$G6 [rxe-v4]=$G4 [rxe-ll]=$GLL)
HADDR=([v4]=$H4 [v6]=$H6 [rxe-v4]=$H4 [rxe-ll]=$HLL)
declare -A hgid_of=([v4]="::ffff:$H4" [v6]=$H6 [rxe-v4]="::ffff:$H4" [rxe-ll]=$HLL)
declare -A ggid_of=([v4]="::ffff:$G4" [v6]=$G6 [rxe-v4]="::ffff:$G4" [rxe-ll]=$GLL)
for m in v4 v6 rxe-v4 rxe-ll; do
	GID_MODE=$m
	mapfile -t env < <(host_env)
	h_exec env -i "${env[@]}" ibv_devinfo -v -d softverbs0 >"$RUNS/sv.$m.devinfo" 2>&1
	HGID[$m]=$(gid_index "$RUNS/sv.$m.devinfo" "${hgid_of[$m]}")
	GGID[$m]=$(gid_index "$RUNS/rxe.devinfo" "${ggid_of[$m]}")
	echo "interop: GIDs $m: softverbs ${HGID[$m]:-none} (${hgid_of[$m]}), rxe ${GGID[$m]:-none} (${ggid_of[$m]})"
done
GID_MODE=v4
if [ -z "${HGID[v4]}" ] || [ -z "${GGID[v4]}" ]; then
	echo "interop: no IPv4 GID on one side; devinfo in $RUNS"
	echo "interop: 0 passed, 1 failed"
	exit 1
fi
# gid_mode MODE: the runs that follow use MODE, if both sides have its GIDs
gid_mode() {
	GID_MODE=$1
	[ -n "${HGID[$1]}" ] && [ -n "${GGID[$1]}" ] && return 0
	echo "# GID mode $1 not run: no such GID on softverbs ($(grep -m1 -i 'softverbs:' "$RUNS/sv.$1.devinfo"))"
	GID_MODE=v4
	return 1
}

# The session's capture: headers for retrans.py (whole packets with --capture)
CAP=$RUNS/session.pcap
snap=128
[ -z "$capture" ] || snap=0
ip netns exec "$NS" tcpdump -i "$TAP" -U --immediate-mode -Z root -s $snap -w "$CAP" udp port 4791 2>"$RUNS/tcpdump.log" &
cap_pid=$!
for ((i = 0; i < 50; i++)); do
	grep -q listening "$RUNS/tcpdump.log" && break
	sleep 0.1
done
# rxe's retransmit timer runs at least its timeout (4.096 us x 2^14 for
# both tools) in whole jiffies, truncated, less one jiffy
kver=${image[0]#*/vmlinuz-}
hz=$(sed -n 's/^CONFIG_HZ=//p' "/boot/config-$kver" 2>/dev/null)
hz=${hz:-250}
MIN_TIMER_MS=$(awk -v hz="$hz" 'BEGIN { j = 1000 / hz; printf "%d", (int(67.108864 / j) - 1) * j }')

both() { # both KIND TOOL SIZE ITERS ARGS...: the run in each direction
	local k=$1 t=$2
	shift 2
	one_run "$k" sv-client "$t" "$@"
	one_run "$k" sv-server "$t" "$@"
}

if [ -n "$capture_cm" ]; then
	rm -f "$capture_cm"
	command -v mergecap >/dev/null || skip "mergecap is missing (apt-get install wireshark-common)"
	CM_PCAP=$capture_cm QUICK=1 cm_matrix
	echo "interop: CM MADs of both sides in $capture_cm: $(tcpdump -r "$capture_cm" 2>/dev/null | wc -l)"
elif [ -n "$capture" ]; then
	one_run pp sv-server ibv_rc_pingpong 2500 2 -c
	one_run bw sv-server ib_write_bw 2500 5
	one_run bw sv-client ib_read_bw 2500 5
	one_run bw sv-server ib_read_bw 100 5
	one_run bw sv-client ib_atomic_bw 8 5 -A CMP_AND_SWAP
	one_run bw sv-server ib_atomic_bw 8 5 -A FETCH_AND_ADD
	one_run bw sv-server ib_atomic_bw 8 5 -A CMP_AND_SWAP
	one_run pp sv-server ibv_ud_pingpong 500 2 -c
elif [ $quick = 1 ]; then
	both pp ibv_rc_pingpong 4096 50 -c
	both bw ib_write_bw 65536 100
	both bw ib_read_bw 4096 100
	both bw ib_atomic_bw 8 100 -A FETCH_AND_ADD
	one_run pp sv-server ibv_ud_pingpong 1024 50 -c
	FAULT=drop=0.02,side=rx,seed=7 EXPECT=sv_nak_tx one_run bw sv-server ib_write_bw 4096 200
	if gid_mode v6; then
		both pp ibv_rc_pingpong 4096 50 -c
		GID_MODE=v4
	fi
	QUICK=1 cm_matrix
else
	for s in 1 64 1024 1025 4096 16384 65536; do
		it=100
		[ "$s" -ge 16384 ] && it=30
		both pp ibv_rc_pingpong "$s" "$it" -c
	done
	both pp ibv_rc_pingpong 4096 100 -c -e
	both pp ibv_uc_pingpong 4096 100 -c
	both pp ibv_uc_pingpong 65536 20 -c
	both pp ibv_ud_pingpong 1 100 -c
	both pp ibv_ud_pingpong 1024 100 -c
	both pp ibv_srq_pingpong 4096 50 -c -q 4
	both pp ibv_srq_pingpong 65536 10 -c
	for t in mw2 mw1 awrite flush; do
		both ops iop_rdma_ops 4096 1 -t "$t"
	done
	both bw ib_write_bw 64 1000
	both bw ib_write_bw 65536 200
	both bw ib_write_bw 65536 100 -q 2
	both bw ib_read_bw 64 1000
	both bw ib_read_bw 65536 200
	both bw ib_send_bw 64 1000
	both bw ib_send_bw 65536 200
	both bw ib_send_bw 1024 500 -c UD
	both bw ib_atomic_bw 8 500 -A FETCH_AND_ADD
	both bw ib_atomic_bw 8 500 -A CMP_AND_SWAP
	both lat ib_write_lat 64 200
	both lat ib_write_lat 65536 50
	# fault injection: which side loses packets decides whose recovery runs
	FAULT=drop=0.02,side=tx,seed=3 # softverbs' packets lost on the way out
	EXPECT=sv_nak_rx one_run bw sv-client ib_write_bw 4096 300
	EXPECT=sv_nak_rx one_run bw sv-client ib_send_bw 4096 300
	EXPECT=sv_nak_rx one_run bw sv-client ib_read_bw 4096 300
	EXPECT=sv_nak_rx one_run bw sv-client ib_atomic_bw 8 300
	# As the WRITE target softverbs sends only ACKs, 40-60 of them as the
	# load coalesces them: seed 3 draws its first loss at the 53rd packet
	# (none lost once, under load), seed 5 at the 9th.
	FAULT=drop=0.02,side=tx,seed=5 EXPECT='' one_run bw sv-server ib_write_bw 4096 300
	EXPECT=rxe_retry one_run bw sv-server ib_read_bw 4096 300
	EXPECT=rxe_retry one_run bw sv-server ib_atomic_bw 8 300
	EXPECT='' both pp ibv_rc_pingpong 4096 100 -c
	FAULT=drop=0.02,side=rx,seed=5 # rxe's packets lost on the way in
	EXPECT=sv_nak_tx one_run bw sv-server ib_write_bw 4096 300
	EXPECT=sv_nak_tx one_run bw sv-server ib_send_bw 4096 300
	EXPECT=sv_nak_tx one_run bw sv-server ib_read_bw 4096 300
	EXPECT=sv_nak_tx one_run bw sv-server ib_atomic_bw 8 300
	EXPECT='' one_run bw sv-client ib_write_bw 4096 300
	EXPECT=sv_retry one_run bw sv-client ib_read_bw 4096 300
	EXPECT=sv_retry one_run bw sv-client ib_atomic_bw 8 300
	EXPECT='' both pp ibv_rc_pingpong 4096 100 -c
	FAULT=''
	if gid_mode v6; then
		both pp ibv_rc_pingpong 4096 100 -c
		both pp ibv_ud_pingpong 1024 100 -c
		both pp ibv_srq_pingpong 4096 50 -c -q 4
		both bw ib_write_bw 65536 100
		both bw ib_read_bw 4096 100
		both bw ib_send_bw 1024 500 -c UD
		both bw ib_atomic_bw 8 500 -A FETCH_AND_ADD
		both lat ib_write_lat 64 200
		FAULT=drop=0.02,side=rx,seed=9 EXPECT=sv_nak_tx one_run bw sv-server ib_write_bw 4096 300
		FAULT=drop=0.02,side=tx,seed=11 EXPECT=sv_nak_rx one_run bw sv-client ib_write_bw 4096 300
		GID_MODE=v4
	fi
	if gid_mode rxe-v4; then
		both pp ibv_rc_pingpong 4096 100 -c
		both bw ib_write_bw 65536 100
		GID_MODE=v4
	fi
	if gid_mode rxe-ll; then
		both pp ibv_rc_pingpong 4096 100 -c
		both pp ibv_ud_pingpong 1024 100 -c
		both bw ib_read_bw 4096 100
		GID_MODE=v4
	fi
	cm_matrix
fi
echo "interop: matrix took $((SECONDS - t_start)) s ($VM_ACCEL)"
if [ -n "$capture" ]; then # only what rxe sent to softverbs
	kill -INT "$cap_pid" 2>/dev/null
	wait "$cap_pid" 2>/dev/null
	cap_pid=''
	tcpdump -Z root -r "$CAP" -w "$capture" "src host $G4 and udp dst port 4791" 2>/dev/null &&
		echo "interop: rxe's packets in $capture: $(tcpdump -r "$capture" 2>/dev/null | wc -l)"
fi
skipped=''
[ "$RUN_SKIPPED" -eq 0 ] || skipped=", $RUN_SKIPPED skipped"
echo "interop: $RUN_PASSED passed, $RUN_FAILED failed$skipped"
[ "$RUN_FAILED" -eq 0 ] && [ "$RUN_N" -gt 0 ]
