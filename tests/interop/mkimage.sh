#!/bin/bash
# SPDX-License-Identifier: MIT
# tests/interop/mkimage.sh OUTDIR [IOP_RDMA_OPS]
#
# Builds the interop guest's initramfs from installed Debian packages only
# and prints two lines: the kernel image to boot and the initramfs.
#   kernel     the newest /boot/vmlinuz-* of linux-image-amd64 whose
#              /lib/modules tree has rdma_rxe (INTEROP_KERNEL=VERSION picks one)
#   modules    rdma_rxe, virtio_net, virtio_pci, crc32_generic (rxe's ICRC
#              asks the crypto API for "crc32"), rdma_ucm (the kernel's
#              rdma_cm and its /dev/infiniband/rdma_cm, for librdmacm) and
#              everything modules.dep says they need, listed in load order in
#              /etc/interop/modules
#   userland   busybox-static (shell and applets); Debian's libibverbs1 with
#              the rxe provider (ibverbs-providers), ibverbs-utils, perftest,
#              rdmacm-utils' rping, ucmatose and udaddy (with librdmacm1),
#              iproute2's ip and rdma; each binary's shared libraries (ldd)
#              and libgcc_s (dlopened by pthread_exit)
#   scripts    guest_init.sh as /init, guest_agent.sh as /agent
#   ours       IOP_RDMA_OPS (build/tests/interop/iop_rdma_ops) as
#              /usr/bin/iop_rdma_ops, when given
# Nothing of softverbs goes into the guest. The one program of ours,
# iop_rdma_ops, is there because Debian's tools have no memory-window,
# ATOMIC WRITE or FLUSH program; it is a plain libibverbs program linked
# by soname only (no rpath), so in the guest it runs on Debian's
# libibverbs and rxe provider, never on softverbs. The image is cached in
# OUTDIR as initramfs-KEY.cpio, KEY a hash of the files copied, of this
# script, of the versions of every package a copied file comes from, the
# kernel version, the two guest scripts and our program's contents (all in
# initramfs-KEY.key); a cached image is reused as it is.
set -euo pipefail
out=${1:?usage: mkimage.sh OUTDIR [IOP_RDMA_OPS]}
ours=${2:-}
[ -z "$ours" ] || [ -x "$ours" ] || { echo "mkimage: $ours is not an executable" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"

die() { echo "mkimage: $*" >&2; exit 1; }

kver=${INTEROP_KERNEL:-}
if [ -z "$kver" ]; then
	for k in $(ls /boot/vmlinuz-*-amd64 2>/dev/null | sort -V -r); do
		v=${k#/boot/vmlinuz-}
		if [ -n "$(find "/lib/modules/$v" -name 'rdma_rxe.ko*' 2>/dev/null)" ]; then
			kver=$v
			break
		fi
	done
fi
[ -n "$kver" ] || die "no /boot/vmlinuz-*-amd64 with rdma_rxe (apt-get install linux-image-amd64)"
kimg=/boot/vmlinuz-$kver
mdir=/lib/modules/$kver
[ -r "$kimg" ] && [ -r "$mdir/modules.dep" ] || die "$kimg or $mdir/modules.dep is missing"

# ---- modules, in load order (each one's modules.dep entries first)
declare -A mpath=() mdeps=() done_mod=()
while IFS= read -r line; do
	f=${line%%:*}
	n=${f##*/}
	n=${n%%.ko*}
	n=${n//-/_}
	mpath[$n]=$f
	mdeps[$n]=${line#*:}
done <"$mdir/modules.dep"
order=()
add_mod() {
	local n=$1 d dn
	[ -n "${done_mod[$n]:-}" ] && return
	[ -n "${mpath[$n]:-}" ] || die "module $n is not in $mdir/modules.dep"
	done_mod[$n]=1
	# modules.dep lists all of a module's dependencies; each is added after its own
	for d in ${mdeps[$n]}; do
		dn=${d##*/}
		dn=${dn%%.ko*}
		add_mod "${dn//-/_}"
	done
	order+=("${mpath[$n]}")
}
for m in crc32_generic virtio_pci virtio_net rdma_rxe rdma_ucm; do
	add_mod "$m"
done

# ---- userland: binaries, their libraries, the rxe provider
bins=(ibv_devinfo ibv_devices ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong ibv_srq_pingpong
	ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_write_lat ib_read_lat ib_send_lat
	rping ucmatose udaddy rdma ip)
provider=/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
[ -r "$provider" ] || die "no $provider (apt-get install ibverbs-providers)"
[ -x /bin/busybox ] || die "no /bin/busybox (apt-get install busybox-static)"
declare -A libs=()
srcs=("$kimg" "$provider" /bin/busybox)
for b in "${bins[@]}"; do
	p=$(command -v "$b") || die "$b not found (ibverbs-utils, perftest, rdmacm-utils, iproute2)"
	srcs+=("$(readlink -f "$p")")
done
for f in "${srcs[@]:1}" ${ours:+"$ours"}; do
	while read -r name arrow path _; do
		case $arrow in
		'=>') [ -n "$path" ] && [ "$path" != "not" ] && libs[$name]=$path ;;
		*) case $name in /*) libs[${name##*/}]=$name ;; esac ;;
		esac
	done < <(ldd "$f" 2>/dev/null || true)
done
# pthread_exit and pthread_cancel (rping) dlopen libgcc_s, which ldd does not list
# (awk reads to the end: an early exit would end ldconfig with SIGPIPE, and
# pipefail with set -e this script, silently, now and then)
gcc_s=$(ldconfig -p 2>/dev/null | awk '!p && $1 == "libgcc_s.so.1" && /x86-64/ { p = $NF } END { print p }')
[ -n "$gcc_s" ] && libs[libgcc_s.so.1]=$gcc_s
for l in "${libs[@]}"; do
	srcs+=("$(readlink -f "$l")")
done

# ---- cache key: package versions of every source file, kernel, guest scripts
keyfile=$(mktemp)
trap 'rm -f "$keyfile"' EXIT
{
	echo "kernel $kver"
	for f in "${srcs[@]}" "${order[@]/#/$mdir/}"; do
		pkg=$(dpkg -S "$f" 2>/dev/null | head -n 1 | cut -d: -f1) ||
			pkg=$(dpkg -S "${f#/usr}" 2>/dev/null | head -n 1 | cut -d: -f1) || pkg=
		if [ -n "$pkg" ]; then
			echo "$pkg $(dpkg-query -W -f='${Version}' "$pkg")"
		else
			echo "file $f $(sha256sum <"$f" | cut -c1-16)"
		fi
	done | sort -u
	# the files copied, not only their packages: a binary added from a
	# package already there must make a new image
	printf 'copied %s\n' "${srcs[@]}" | sort -u
	sha256sum "$here/guest_init.sh" "$here/guest_agent.sh" "$here/mkimage.sh" | sed "s|$here/||"
	[ -z "$ours" ] || echo "ours iop_rdma_ops $(sha256sum <"$ours" | cut -c1-16)"
} >"$keyfile"
key=$(sha256sum <"$keyfile" | cut -c1-16)
img=$out/initramfs-$key.cpio
if [ -s "$img" ]; then
	echo "$kimg"
	echo "$img"
	exit 0
fi

# ---- assemble the tree and pack it
root=$(mktemp -d "$out/root.XXXXXX")
trap 'rm -f "$keyfile"; rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,lib/x86_64-linux-gnu,lib64,etc/interop,etc/libibverbs.d} \
	"$root"/{dev,proc,sys,tmp,run} "$root/usr/lib/x86_64-linux-gnu/libibverbs"
cp /bin/busybox "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
for b in "${bins[@]}"; do
	cp "$(readlink -f "$(command -v "$b")")" "$root/usr/bin/$b"
done
for name in "${!libs[@]}"; do
	case $name in
	ld-linux-x86-64.so.2) cp "$(readlink -f "${libs[$name]}")" "$root/lib64/$name" ;;
	*) cp "$(readlink -f "${libs[$name]}")" "$root/lib/x86_64-linux-gnu/$name" ;;
	esac
done
[ -z "$ours" ] || cp "$ours" "$root/usr/bin/iop_rdma_ops"
cp "$provider" "$root/usr/lib/x86_64-linux-gnu/libibverbs/"
echo "driver rxe" >"$root/etc/libibverbs.d/rxe.driver"
for m in "${order[@]}"; do
	mkdir -p "$root/lib/modules/$kver/${m%/*}"
	case $m in
	*.ko) cp "$mdir/$m" "$root/lib/modules/$kver/$m" ;;
	*.ko.xz) xz -dc "$mdir/$m" >"$root/lib/modules/$kver/${m%.xz}" ;;
	*.ko.zst) zstd -qdc "$mdir/$m" >"$root/lib/modules/$kver/${m%.zst}" ;;
	*) die "module format of $m" ;;
	esac
	echo "/lib/modules/$kver/${m%.ko*}.ko" >>"$root/etc/interop/modules"
done
cp "$here/guest_init.sh" "$root/init"
cp "$here/guest_agent.sh" "$root/agent"
chmod 755 "$root/init" "$root/agent"
mknod -m 600 "$root/dev/console" c 5 1 2>/dev/null || true
cp "$keyfile" "$out/initramfs-$key.key"
(cd "$root" && find . -print0 | LC_ALL=C sort -z |
	cpio --null -o -H newc -R 0:0 --quiet) >"$img.tmp"
mv "$img.tmp" "$img"
echo "$kimg"
echo "$img"
