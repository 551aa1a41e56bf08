# SPDX-License-Identifier: MIT
# tests/interop/vm.sh: sourced by tests/interop/interop.sh (bash).
#
# The guest and its network: a network namespace of this script's own
# (svinterop_PID) holding a tap device (svtap0, 10.77.0.1/24 and fd77::1/64
# by default, INTEROP_NET4/INTEROP_NET6 change the prefixes), and a QEMU
# guest on it (.2 on the same prefixes) booted from mkimage.sh's image.
# Nothing outside the namespace is touched: no address, route or device of
# the host's, and no process but the ones started here (by PID).
#
# Acceleration: KVM when /dev/kvm opens and a guest really runs under it
# (the first boot waits up to 10 s for the kernel's first console line;
# without nested virtualisation it never comes), otherwise TCG. INTEROP_ACCEL
# =kvm|tcg forces one.
#
# The command channel is the guest's second serial port (a QEMU "pipe"
# chardev: FIFOs DIR/agent.in and DIR/agent.out); guest_agent.sh describes
# the protocol. Functions:
#   vm_up DIR KERNEL INITRD   namespace, tap, boot; 0 once the agent is ready
#   vm_down                   agent exit, guest power-off (else kill), netns gone
#   g_run SECS OUT CMD        run CMD in the guest; G_RC is its status
#   g_start SECS CMD          start CMD in the guest; G_JOB names the job
#   g_wait JOB SECS OUT       wait for a started job; G_RC as for g_run
#   g_kill JOB                kill a started job
#   g_finish JOB SECS OUT     g_wait, and when the guest did not answer in
#                             time, g_kill and g_wait 10 s more
#   h_exec CMD...             run CMD in the namespace (the host side)
# G_RC is 255 when the guest did not answer in time.

NS=svinterop_$$
TAP=svtap0
G_MAC=52:54:00:77:00:02 # the guest's virtio-net
NET4=${INTEROP_NET4:-10.77.0}
NET6=${INTEROP_NET6:-fd77:}
H4=$NET4.1 G4=$NET4.2 H6=$NET6:1 G6=$NET6:2
VM_PID='' VM_DIR='' AG_W='' AG_R='' AG_SEQ=0 G_RC='' G_JOB='' VM_ACCEL=''

h_exec() {
	ip netns exec "$NS" "$@"
}

# vm_net: the namespace and its tap
vm_net() {
	ip netns add "$NS" || return 1
	h_exec ip link set lo up &&
		h_exec ip tuntap add dev "$TAP" mode tap &&
		h_exec sysctl -qw "net.ipv6.conf.$TAP.accept_dad=0" &&
		h_exec ip addr add "$H4/24" dev "$TAP" &&
		h_exec ip -6 addr add "$H6/64" dev "$TAP" nodad &&
		h_exec ip link set "$TAP" txqueuelen 10000 &&
		h_exec ip link set "$TAP" up &&
		h_exec ip neigh replace "$G4" lladdr "$G_MAC" dev "$TAP" nud permanent &&
		h_exec ip -6 neigh replace "$G6" lladdr "$G_MAC" dev "$TAP" nud permanent
	# No duplicate address detection: the link-local address is usable at
	# once (a tentative one cannot be bound, and the rxe-ll GID runs were
	# skipped when the device opened during the detection). A deep queue,
	# and the guest's addresses resolved for good: a burst of
	# UD sends, which nothing paces, overflowed the default queue of 1000
	# (the emulated guest reads the tap slowly), or, sent while neighbour
	# discovery for fd77::2 was pending, the 92 packets the kernel keeps for
	# an unresolved neighbour, and the rest never reached the wire (36 and
	# 408 of 500 lost in ib_send_bw -c UD runs).
}

# vm_boot ACCEL KERNEL INITRD: start QEMU (VM_PID)
vm_boot() {
	local accel=$1 cpu=max
	[ "$accel" = kvm ] && cpu=host
	rm -f "$VM_DIR/console.log"
	# not through h_exec: $! must be QEMU's own PID. Niced: an emulated
	# guest that is slow only makes rxe slow, while a starved host side
	# would make softverbs late (its progress thread) for no reason of its own
	ip netns exec "$NS" nice -n "${INTEROP_QEMU_NICE:-10}" qemu-system-x86_64 -accel "$accel" -cpu "$cpu" -smp "${INTEROP_SMP:-2}" -m 1024 \
		-nodefaults -no-reboot -display none -monitor none \
		-kernel "$2" -initrd "$3" \
		-append "console=ttyS0 panic=-1 interop.ip4=$G4/24 interop.ip6=$G6/64" \
		-serial "file:$VM_DIR/console.log" \
		-chardev "pipe,id=agent,path=$VM_DIR/agent" -serial chardev:agent \
		-netdev "tap,id=n0,ifname=$TAP,script=no,downscript=no" \
		-device virtio-net-pci,netdev=n0,mac=$G_MAC \
		</dev/null >"$VM_DIR/qemu.log" 2>&1 &
	VM_PID=$!
	VM_ACCEL=$accel
}

# vm_wait_console SECS: the kernel printed its first line (0), QEMU died (2), time ran out (1)
vm_wait_console() {
	local end=$((SECONDS + $1))
	while [ $SECONDS -lt $end ]; do
		grep -q 'Linux version' "$VM_DIR/console.log" 2>/dev/null && return 0
		kill -0 "$VM_PID" 2>/dev/null || return 2
		sleep 0.5
	done
	return 1
}

vm_kill() {
	[ -n "$VM_PID" ] || return 0
	kill "$VM_PID" 2>/dev/null
	local i=0
	while kill -0 "$VM_PID" 2>/dev/null && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -9 "$VM_PID" 2>/dev/null
	wait "$VM_PID" 2>/dev/null
	VM_PID=''
}

# vm_up DIR KERNEL INITRD
vm_up() {
	VM_DIR=$1
	local accel=${INTEROP_ACCEL:-} line end
	mkdir -p "$VM_DIR"
	vm_net || { echo "interop: cannot create network namespace $NS and its tap"; return 1; }
	rm -f "$VM_DIR/agent.in" "$VM_DIR/agent.out"
	mkfifo "$VM_DIR/agent.in" "$VM_DIR/agent.out" || return 1
	exec {AG_W}<>"$VM_DIR/agent.in" {AG_R}<>"$VM_DIR/agent.out"
	if [ -z "$accel" ]; then
		accel=tcg
		if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
			vm_boot kvm "$2" "$3"
			if vm_wait_console 10; then
				accel=kvm
			else
				echo "interop: KVM does not run a guest here (no kernel output in 10 s): TCG"
				vm_kill
			fi
		fi
	fi
	[ -n "$VM_PID" ] || vm_boot "$accel" "$2" "$3"
	echo "interop: guest booting ($VM_ACCEL, QEMU pid $VM_PID)"
	end=$((SECONDS + ${INTEROP_BOOT_TIMEOUT:-180}))
	while [ $SECONDS -lt $end ]; do
		if IFS= read -r -t 2 -u "$AG_R" line; then
			case $line in "@@ 0 ready"*) return 0 ;; esac
		fi
		if ! kill -0 "$VM_PID" 2>/dev/null; then
			echo "interop: QEMU exited during boot:"
			tail -n 20 "$VM_DIR/qemu.log" "$VM_DIR/console.log" 2>/dev/null
			VM_PID=''
			return 1
		fi
	done
	echo "interop: the guest's agent did not come up within ${INTEROP_BOOT_TIMEOUT:-180} s:"
	grep 'interop-guest' "$VM_DIR/console.log" 2>/dev/null | tail -n 20
	return 1
}

vm_down() {
	local i=0
	if [ -n "$VM_PID" ] && kill -0 "$VM_PID" 2>/dev/null; then
		g_send exit
		while kill -0 "$VM_PID" 2>/dev/null && [ $i -lt 100 ]; do
			sleep 0.1
			i=$((i + 1))
		done
	fi
	vm_kill
	[ -z "$AG_W" ] || exec {AG_W}>&-
	[ -z "$AG_R" ] || exec {AG_R}<&-
	AG_W='' AG_R=''
	ip netns del "$NS" 2>/dev/null
	return 0
}

# g_send REQUEST...: send one request (G_ID is its ID)
g_send() {
	AG_SEQ=$((AG_SEQ + 1))
	G_ID=$AG_SEQ
	printf '%s %s\n' "$G_ID" "$*" >&"$AG_W"
}

# g_reply ID SECS OUT: read the answer to request ID into OUT, status in G_RC
g_reply() {
	local id=$1 end=$((SECONDS + $2)) out=$3 line left
	: >"$out"
	G_RC=255
	while :; do
		left=$((end - SECONDS))
		[ $left -gt 0 ] || return 1
		IFS= read -r -t "$left" -u "$AG_R" line || return 1
		case $line in
		"$id| "*) printf '%s\n' "${line#"$id| "}" >>"$out" ;;
		"$id|") echo >>"$out" ;;
		"@@ $id "*)
			G_RC=${line#"@@ $id "}
			return 0
			;;
		esac
	done
}

g_run() {
	g_send run "$1" "$3"
	g_reply "$G_ID" $(($1 + 20)) "$2"
}

g_start() {
	local junk=$VM_DIR/start.out
	g_send start "$1" "$2"
	G_JOB=$G_ID
	g_reply "$G_ID" 20 "$junk"
}

g_wait() {
	g_send wait "$1" "$2"
	g_reply "$G_ID" $(($2 + 20)) "$3"
}

g_kill() {
	g_send kill "$1"
	g_reply "$G_ID" 20 "$VM_DIR/kill.out"
}

g_finish() {
	g_wait "$1" "$2" "$3"
	[ "$G_RC" = 255 ] || return 0
	g_kill "$1"
	g_wait "$1" 10 "$3"
}
