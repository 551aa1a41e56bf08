#!/bin/sh
# tests/clients/diags.sh SOFTVERBS_RUN [sanitized]
#
# Debian's unmodified infiniband-diags 44: ibstat (through libibumad,
# which reads /sys/class/infiniband) and ibstatus (a script reading the
# same files) under softverbs-run show the device as the verbs report it
# (sv_devinfo's values are not used: the expected values come from the
# tree's own files, which tests/softverbs_run.sh checks against the
# verbs): on the default RoCE port (Ethernet, LID 0, the address's GID)
# and on the InfiniBand link layer (SOFTVERBS_LINK_LAYER=ib: a LID).
# Without softverbs-run ibstat finds no device. Exit 77 (skipped) when
# infiniband-diags is not installed or the build is sanitized.
set -u
if [ $# -lt 1 ]; then
	echo "usage: diags.sh SOFTVERBS_RUN [sanitized]" >&2
	exit 2
fi
run=$1 sanitized=${2:-}
. "$(dirname "$0")/common.sh"
PATH=$PATH:/usr/sbin:/sbin
need infiniband-diags ibstat ibstatus
addr=127.8.$(($$ % 250 + 1)).$((($$ / 250) % 250 + 1))
sys=/sys/class/infiniband/softverbs0

# diag LINK_LAYER: ibstat and ibstatus with that link layer
diag() {
	ll=$1
	cat >"$tmp/probe.sh" <<'EOS'
echo "== ibstat"; ibstat; echo "rc=$?"
echo "== ibstatus"; ibstatus; echo "rc=$?"
echo "== tree"
for f in node_guid fw_ver ports/1/lid ports/1/link_layer ports/1/gids/0 ports/1/state ports/1/rate; do
	echo "$f=$(cat /sys/class/infiniband/softverbs0/$f)"
done
EOS
	if [ "$ll" = ib ]; then
		SOFTVERBS_LINK_LAYER=ib timeout -k 5 "$limit" "$run" -a "$addr" -- sh "$tmp/probe.sh" >"$tmp/out" 2>&1
	else
		timeout -k 5 "$limit" "$run" -a "$addr" -- sh "$tmp/probe.sh" >"$tmp/out" 2>&1
	fi
	rc=$?
	sec() { awk -v s="== $1" '/^== / { on = ($0 == s); next } on' "$tmp/out"; }
	tree() { sec tree | sed -n "s|^$1=||p"; }
	guid=$(tree node_guid | tr -d ':')
	lid=$(printf '%d' "$(tree ports/1/lid)")
	gid=$(tree ports/1/gids/0)
	portguid=$(echo "$gid" | tr -d ':' | cut -c17-32)
	rate=$(tree ports/1/rate | sed 's/ .*//')
	layer=$(tree ports/1/link_layer)
	sec ibstat >"$tmp/ibstat"
	sec ibstatus >"$tmp/ibstatus"
	bad=''
	[ $rc -eq 0 ] || bad="$bad; softverbs-run exit $rc"
	grep -q '^rc=0$' "$tmp/ibstat" || bad="$bad; ibstat failed"
	grep -q '^rc=0$' "$tmp/ibstatus" || bad="$bad; ibstatus failed"
	for want in "CA 'softverbs0'" "Node GUID: 0x$guid" "Firmware version: $(tree fw_ver)" \
		"State: Active" "Physical state: LinkUp" "Rate: $rate" "Base lid: $lid" \
		"Port GUID: 0x$portguid" "Link layer: $layer"; do
		grep -qF "$want" "$tmp/ibstat" || bad="$bad; ibstat lacks '$want'"
	done
	for want in "Infiniband device 'softverbs0' port 1 status:" "default gid:	 $gid" \
		"base lid:	 $(tree ports/1/lid)" "state:		 4: ACTIVE" "rate:		 $(tree ports/1/rate)" \
		"link_layer:	 $layer"; do
		grep -qF "$want" "$tmp/ibstatus" || bad="$bad; ibstatus lacks '$want'"
	done
	if [ -n "$bad" ]; then
		not_ok "ibstat and ibstatus, $layer: ${bad#; }"
		show "$tmp/out"
		return
	fi
	ok "ibstat and ibstatus show softverbs0: $layer, LID $lid, GID $gid, $(tree ports/1/rate)"
}

diag eth
diag ib
if [ ! -e "$sys" ]; then
	libdir=$(cd "$(dirname "$run")/../lib" && pwd -P)
	LD_LIBRARY_PATH=$libdir ibstat >"$tmp/out" 2>&1
	grep -q softverbs0 "$tmp/out" && not_ok "ibstat shows softverbs0 without softverbs-run" ||
		ok "without softverbs-run ibstat finds no softverbs0 (no /sys/class/infiniband)"
fi
finish
