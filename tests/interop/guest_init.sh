#!/bin/sh
# SPDX-License-Identifier: MIT
# /init of the interop guest (tests/interop/mkimage.sh puts it there).
#
# Mounts the pseudo file systems, loads the modules listed in
# /etc/interop/modules in order, configures eth0 from the kernel command
# line (interop.ip4=A/N interop.ip6=A/N), creates the kernel's soft RoCE
# device (rdma link add rxe0 type rxe netdev eth0) and runs the command
# agent (/agent) on the second serial port, /dev/ttyS1. When the agent
# returns, or anything above fails, the guest powers off. Everything it
# says on the console (ttyS0) starts with "interop-guest:".
/bin/busybox mkdir -p /proc /sys /dev /tmp /run
/bin/busybox mount -t devtmpfs dev /dev
exec </dev/console >/dev/console 2>&1
/bin/busybox --install -s /bin
export PATH=/usr/bin:/usr/sbin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t tmpfs tmp /tmp

fail() {
	echo "interop-guest: FAILED: $*"
	poweroff -f
}

echo "interop-guest: kernel $(uname -r)"
while read -r m; do
	insmod "$m" || fail "insmod $m"
done </etc/interop/modules

ip4= ip6=
for w in $(cat /proc/cmdline); do
	case $w in
	interop.ip4=*) ip4=${w#*=} ;;
	interop.ip6=*) ip6=${w#*=} ;;
	esac
done
[ -n "$ip4" ] || fail "no interop.ip4= on the kernel command line"
i=0
while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
/usr/bin/ip link set lo up || fail "lo up"
/usr/bin/ip link set eth0 up || fail "eth0 up"
/usr/bin/ip addr add "$ip4" dev eth0 || fail "ip addr add $ip4"
[ -z "$ip6" ] || /usr/bin/ip -6 addr add "$ip6" dev eth0 nodad || fail "ip -6 addr add $ip6"
/usr/bin/rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add rxe0"
echo "interop-guest: rxe0 on eth0 $ip4 $ip6"
sh /agent </dev/ttyS1 >/dev/ttyS1 2>&1
echo "interop-guest: agent exited, powering off"
poweroff -f
