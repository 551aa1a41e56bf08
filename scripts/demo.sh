#!/usr/bin/env bash
# scripts/demo.sh    (make demo)
#
# Builds (make all), then runs two processes on the software RoCE v2
# device, connected by one RC queue pair over UDP on loopback:
#   A  the server, on a device in CC DMA bounce mode (as in a
#      confidential-computing guest): -U puts its ibv_alloc_buf buffer, CQ
#      and QP on a parent domain with ALLOW_CC_UNPROTECTED_ALLOC, and -E
#      shows the exported buffer fd to a helper process;
#   B  the client, on an ordinary device, registering its ibv_alloc_buf
#      buffer with a DMA handle (TPH hints) through ibv_reg_mr_ex;
# they do SEND ping-pongs, RDMA WRITE, RDMA READ and fetch-and-add on each
# other's buffer, check everything, and this script prints one combined
# report. Exit status 0 only if both sides passed.
# Environment: BUILD (build directory, default build), MAKE.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

BUILD=${BUILD:-build}
MAKE=${MAKE:-make}
prog=$BUILD/examples/sv_rc_pingpong
devinfo=$BUILD/tools/sv_devinfo
args=(-c -o all -t 20)

tmp=$(mktemp -d)
spid=
cleanup() {
	[ -n "$spid" ] && kill "$spid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

now_ms() { local t=${EPOCHREALTIME//[!0-9]/}; echo $((10#$t / 1000)); }

die() {
	echo "demo: FAIL: $*"
	exit 1
}

# show_raw FILE...: a file in full, for a failure
show_raw() {
	for f in "$@"; do
		[ -s "$f" ] || continue
		echo "--- ${f##*/}"
		cat "$f"
	done
}

# --- build -------------------------------------------------------------
t0=$(now_ms)
if ! "$MAKE" --no-print-directory all BUILD="$BUILD" >"$tmp/build.log" 2>&1; then
	tail -n 40 "$tmp/build.log"
	die "the build failed"
fi
[ -x "$prog" ] && [ -x "$devinfo" ] || die "no $prog or $devinfo after the build"
t1=$(now_ms)

# A process's own SOFTVERBS_* settings would change the story: start clean.
for v in $(env | sed -n 's/^\(SOFTVERBS_[A-Za-z0-9_]*\)=.*/\1/p'); do
	unset "$v"
done

echo "softverbs demo: two processes, one RC connection over the software RoCE v2 device"
printf '%-11s%s\n' build "ok ($BUILD/, $(((t1 - t0) / 1000)).$(((t1 - t0) % 1000 / 100)) s)"

# --- the device, as sv_devinfo sees it -----------------------------------
if ! "$devinfo" >"$tmp/devinfo" 2>&1; then
	cat "$tmp/devinfo"
	die "sv_devinfo failed"
fi
field() { sed -n "s/^ *$1  *//p" "$tmp/devinfo" | head -n 1; }
dev=$(head -n 1 "$tmp/devinfo")
state=$(field state)
mtu=$(field active_mtu)
printf '%-11s%s\n' device "$dev: port 1 ${state%% *}, $(field link_layer), MTU ${mtu%% *}, fw $(field fw_ver) (sv_devinfo)"
bounce_flag=$(SOFTVERBS_CC_DMA_BOUNCE=1 "$devinfo" -v 2>/dev/null | grep -o 'CC_DMA_BOUNCE' | head -n 1)
[ -n "$bounce_flag" ] || die "sv_devinfo -v shows no CC_DMA_BOUNCE with SOFTVERBS_CC_DMA_BOUNCE=1"

# --- the two processes ----------------------------------------------------
a_env=(SOFTVERBS_CC_DMA_BOUNCE=1 SOFTVERBS_STATS=1)
a_args=(-U -E "${args[@]}")
b_env=(SOFTVERBS_STATS=1)
b_args=(--dmah "${args[@]}")

t2=$(now_ms)
env "${a_env[@]}" "$prog" -p 0 "${a_args[@]}" >"$tmp/a.out" 2>"$tmp/a.err" &
spid=$!
port=
for _ in $(seq 200); do
	port=$(sed -n 's/.*server waiting for a client on TCP port \([0-9]*\).*/\1/p' "$tmp/a.out" 2>/dev/null)
	[ -n "$port" ] && break
	kill -0 "$spid" 2>/dev/null || break
	sleep 0.05
done
if [ -z "$port" ]; then
	show_raw "$tmp/a.out" "$tmp/a.err"
	die "side A (the server) did not start"
fi
env "${b_env[@]}" "$prog" -p "$port" "${b_args[@]}" 127.0.0.1 >"$tmp/b.out" 2>"$tmp/b.err"
b_rc=$?
wait "$spid"
a_rc=$?
spid=
t3=$(now_ms)

# get SIDE LABEL: the value of a report line ("" if absent)
get() { sed -n "s/^$2  *//p" "$tmp/$1.out" | head -n 1; }

# side SIDE HEADER: the lines that describe one side's resources
side() {
	local s=$1 gid qpn
	echo "$2"
	gid=$(get "$s" device | sed -n 's/.*GID \([^,]*\),.*/\1/p')
	qpn=$(get "$s" qp | sed -n 's/^RC QPN \(0x[0-9a-f]*\).*/\1/p')
	printf '   %-11s%s\n' device "GID $gid, QPN $qpn, CC DMA bounce $(get "$s" device | sed -n 's/.*bounce //p')"
	for k in pd buffer mr dmah export; do
		v=$(get "$s" "$k")
		[ -n "$v" ] && printf '   %-11s%s\n' "$k" "$v"
	done
}

echo
side a "A, server on a CC DMA bounce device: SOFTVERBS_CC_DMA_BOUNCE=1 sv_rc_pingpong -U -E -c -o all"
side b "B, client with a DMA handle: sv_rc_pingpong --dmah -c -o all 127.0.0.1"

# --- combined results -------------------------------------------------------
status=0
# both K [TEXT]: TEXT (none: nothing) when the K line of both sides says
# "verified" and nothing failed; else both lines as they are
both() {
	local a b
	a=$(get a "$1")
	b=$(get b "$1")
	if [[ $a == *verified* && $b == *verified* && $a != *FAIL* && $b != *FAIL* ]]; then
		[ $# -lt 2 ] || printf '   %-11s%s\n' "$1" "$2"
	else
		printf '   %-11s%s\n' "$1" "A: ${a:-(none)}" "" "B: ${b:-(none)}"
		status=1
	fi
}

# wire SIDE: "OUT/IN/RETRANSMITTED" packets from SOFTVERBS_STATS=1
wire() {
	local out
	out=$(sed -n 's/^softverbs: [^ ]* [0-9.]*: tx \([0-9]*\) pkts [0-9]* bytes, rx \([0-9]*\) pkts.*/\1 out, \2 in/p' \
		"$tmp/$1.err" | head -n 1)
	[ -n "$out" ] || return
	echo "$out, $(sed -n 's/^softverbs:   retransmits \([0-9]*\).*/\1/p' "$tmp/$1.err" | head -n 1) resent"
}

size=$(get b send | sed -n 's/.* of \([0-9]*\) B:.*/\1/p')
echo
echo "results (each side checks what lands in its own buffer)"
both send "$(get b send | sed 's/:.*//') each way: every message verified by its receiver"
both write "A->B and B->A, ${size:-?} B each: verified by the side written to"
both read "A<-B and B<-A, ${size:-?} B each: verified by the reader"
both atomic "8 fetch-and-adds each way: every fetched value and both counters verified"
both incoming # the checks behind the write and atomic lines
for k in throughput latency; do
	v=$(get b "$k")
	if [ -n "$v" ]; then
		printf '   %-11s%s\n' "$k" "${v/, client\'s clock/}"
	else
		status=1
	fi
done
wa=$(wire a) wb=$(wire b)
# how they travelled: A's same-host link count from the same stats
shm=$(sed -n 's/^softverbs:   same-host link: sent \([0-9]*\).*/\1/p' "$tmp/a.err" | head -n 1)
if [ "${shm:-0}" -gt 0 ]; then
	via="RoCE v2 packets through the same-host link: shared memory"
else
	via="RoCE v2 over UDP"
fi
[ -n "$wa" ] && [ -n "$wb" ] && printf '   %-11s%s\n' packets "A $wa; B $wb ($via)"

ra=$(get a result) rb=$(get b result)
if [ "$a_rc" -ne 0 ] || [ "$b_rc" -ne 0 ] || [ "$ra" != PASS ] || [ "$rb" != PASS ] || [ $status -ne 0 ]; then
	echo
	echo "side A exited $a_rc ($ra), side B exited $b_rc ($rb); their full output:"
	show_raw "$tmp/a.out" "$tmp/a.err" "$tmp/b.out" "$tmp/b.err"
	die "see above"
fi
echo
echo "demo: PASS (both processes exited 0; the run took $(((t3 - t2) / 1000)).$(((t3 - t2) % 1000 / 100)) s)"
