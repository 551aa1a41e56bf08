#!/bin/sh
# abi_rdmacm_debian.sh LIBRARY
#
# Every function Debian's librdmacm.so.1 exports (NAME@@NODE, from
# objdump -T) is exported by LIBRARY at the same node, and neither exports
# rdma_get_local_addr / rdma_get_peer_addr (header inlines). Skipped when
# Debian's librdmacm1 is not installed.
set -eu

[ $# -eq 1 ] || { echo "usage: abi_rdmacm_debian.sh LIBRARY" >&2; exit 2; }
lib=$1
deb=/usr/lib/x86_64-linux-gnu/librdmacm.so.1
[ -e "$deb" ] || { echo "1..0 # SKIP Debian's librdmacm1 is not installed"; exit 77; }
command -v objdump >/dev/null || { echo "1..0 # SKIP no objdump"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# "NODE NAME" of each defined function
names() {
	objdump -T "$1" | awk '$4 == ".text" && $6 ~ /^RDMACM_/ { print $6, $7 }' | sort -u
}
names "$deb" >"$tmp/deb"
names "$lib" >"$tmp/ours"
missing=$(comm -23 "$tmp/deb" "$tmp/ours")
bad=0
if [ -n "$missing" ]; then
	echo "not ok 1 - exported by Debian's librdmacm, not by ours:"
	echo "$missing" | sed 's/^/#   /'
	bad=1
else
	echo "ok 1 - all $(wc -l <"$tmp/deb") functions of Debian's librdmacm at their nodes"
fi
if grep -Eq ' rdma_get_(local|peer)_addr$' "$tmp/ours"; then
	echo "not ok 2 - rdma_get_local_addr / rdma_get_peer_addr are exported"
	bad=1
else
	echo "ok 2 - the header inlines are not exported"
fi
echo "ok 3 - ours: $(wc -l <"$tmp/ours") functions"
echo "1..3"
exit $bad
