#!/bin/sh
# softverbs_run.sh SOFTVERBS_RUN SYSFS_CHECK SV_DEVINFO [VALGRIND]
#
# softverbs-run itself (run/, man/softverbs-run.1):
#  - the tree it mounts says what the library's verbs say: sysfs_check
#    (tests/run/sysfs_check.c) passes under it with a fixed address (IPv4,
#    IPv6 ::1, the rxe and mlx5 GID table layouts), with
#    each process's own address (--any-addr), in a user namespace
#    (--userns), as an unprivileged user (setpriv, when run as root), and
#    from a --tree directory through SYSFS_PATH, and (what does not
#    depend on the address) in a process of another address;
#  - /dev/infiniband holds only the device's node, read-only; the rest of
#    /dev and /sys/class is still there (the same entries; /dev/pts and
#    /dev/shm still mounted);
#  - nothing outside is touched: the mount table, /dev and /sys/class are
#    the same after the runs as before;
#  - the program's exit status, 127 and 126 for a missing or
#    non-executable program, 2 for a usage error; the library first on
#    LD_LIBRARY_PATH, before the caller's;
#  - where no namespace can be made (an unmapped user namespace), it says
#    so and what still works, and the program still runs on the library;
#  - with VALGRIND: no memory error or leak in --tree.
# Runs in every build (the programs are all from this build).
set -u

if [ $# -lt 3 ]; then
	echo "usage: softverbs_run.sh SOFTVERBS_RUN SYSFS_CHECK SV_DEVINFO [VALGRIND]" >&2
	exit 2
fi
run=$1 check=$2 devinfo=$3 valgrind=${4:-}
. "$(dirname "$0")/clean_env.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/tap.sh"
show() {
	head -n 40 "$1" | sed 's/^/#   /'
}
# an address of this run only: 127.7.x.y (other tests take 127.0.0.N)
addr=127.7.$(($$ % 250 + 1)).$((($$ / 250) % 250 + 1))

# the host's view, compared at the end
# (the names in /dev and /sys/class, not their times: other programs on
# the host touch /dev/shm; and only the mounts under /dev and /sys: a
# network namespace made meanwhile mounts under /run)
snapshot() {
	{
		sed 's/^[0-9]* [0-9]* //' /proc/self/mountinfo | awk '$3 ~ "^/(dev|sys)(/|$)"' | sort
		ls /dev /sys/class
		ls -la /dev/infiniband /sys/class/infiniband /sys/class/infiniband_verbs 2>&1
	} >"$1"
}
snapshot "$tmp/before"

# check NAME WANT_RC CMD...: CMD's output in $tmp/out, exit code WANT_RC
check() {
	name=$1 want=$2
	shift 2
	"$@" >"$tmp/out" 2>&1
	rc=$?
	if [ "$rc" -ne "$want" ]; then
		not_ok "$name: exit code $rc, want $want"
		show "$tmp/out"
		return 1
	fi
	ok "$name"
}

check "sysfs_check under softverbs-run -a $addr (mount namespace as root, user namespace otherwise)" 0 \
	"$run" -a "$addr" -- "$check"
check "sysfs_check under softverbs-run, each process its own address" 0 \
	"$run" -- "$check" --any-addr
check "sysfs_check in a process of another address than the tree's (what must still agree)" 0 \
	"$run" -a "$addr" -- env SOFTVERBS_ADDR=127.7.0.251 "$check" --any-addr &&
	{ grep -q "the tree has another address" "$tmp/out" && ok "(it had another address)" ||
		{ not_ok "it had the same address"; show "$tmp/out"; }; }
for layout in rxe mlx5; do
	check "sysfs_check with SOFTVERBS_GID_TABLE=$layout (the address's GID at its index, the others empty)" 0 \
		env SOFTVERBS_GID_TABLE=$layout "$run" -a "$addr" -- "$check"
	check "sysfs_check, SOFTVERBS_GID_TABLE=$layout, in a process of another address" 0 \
		env SOFTVERBS_GID_TABLE=$layout "$run" -a "$addr" -- env SOFTVERBS_ADDR=127.7.0.251 "$check" --any-addr
done
# IPv6: ::1, on a UDP port of this run's own so that no other test's ::1 is in the way
if grep -q '^0\{31\}1 ' /proc/net/if_inet6 2>/dev/null; then
	check "sysfs_check with an IPv6 address (::1)" 0 \
		env SOFTVERBS_UDP_PORT=$((30000 + $$ % 20000)) "$run" -a ::1 -- "$check"
fi
check "sysfs_check under softverbs-run --userns" 0 "$run" --userns -a "$addr" -- "$check"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	nobody="setpriv --reuid=65534 --regid=65534 --clear-groups"
	if $nobody test -x "$run" -a -x "$check"; then
		check "sysfs_check under softverbs-run as an unprivileged user (user namespace)" 0 \
			$nobody "$run" -a "$addr" -- "$check"
	else
		# a checkout under a private directory (mktemp -d is 0700): uid 65534 cannot
		# reach the build, so there is nothing to run as that user
		n=$((n + 1))
		echo "ok $n - sysfs_check as an unprivileged user # SKIP uid 65534 cannot reach $run (a parent directory is private)"
	fi
fi
mkdir "$tmp/tree"
if check "softverbs-run --tree DIR" 0 "$run" -a "$addr" --tree "$tmp/tree"; then
	check "sysfs_check with SYSFS_PATH at the --tree directory" 0 \
		env SYSFS_PATH="$tmp/tree" SOFTVERBS_ADDR="$addr" "$check" --no-dev
fi

# what the program sees of /dev and /sys/class
cat >"$tmp/inside.sh" <<'EOF'
echo "== infiniband"; ls -la /dev/infiniband | sed 1d
echo "== dev"; ls -A /dev | grep -vx infiniband
echo "== class"; ls -A /sys/class | grep -vx 'infiniband\|infiniband_verbs'
echo "== mounts"; grep -c ' /dev/pts \| /dev/shm ' /proc/self/mountinfo
echo "== write"; if touch /dev/infiniband/x 2>/dev/null; then echo writable; else echo read-only; fi
echo "== env"; echo "$LD_LIBRARY_PATH"
EOF
{
	echo "== dev"
	ls -A /dev | grep -vx infiniband
	echo "== class"
	ls -A /sys/class | grep -vx 'infiniband\|infiniband_verbs'
} >"$tmp/host"
# section NAME: the lines of section NAME of $tmp/out
section() {
	awk -v s="== $1" '/^== / { on = ($0 == s); next } on' "$tmp/out"
}
if check "a shell under softverbs-run" 0 env LD_LIBRARY_PATH=/nonexistent "$run" -- sh "$tmp/inside.sh"; then
	libdir=$(cd "$(dirname "$run")/../lib" && pwd -P)
	section infiniband >"$tmp/ib"
	if [ "$(grep -c . "$tmp/ib")" -eq 3 ] && [ "$(grep -c '^c' "$tmp/ib")" -eq 1 ] &&
		grep -Eq '^c.* uverbs[0-9]+$' "$tmp/ib"; then
		ok "/dev/infiniband holds one character device, uverbsN"
	else
		not_ok "/dev/infiniband"
		show "$tmp/ib"
	fi
	{ echo "== dev"; section dev; echo "== class"; section class; } >"$tmp/seen"
	if cmp -s "$tmp/host" "$tmp/seen"; then
		ok "every other entry of /dev and /sys/class is still there"
	else
		not_ok "/dev or /sys/class differ"
		diff "$tmp/host" "$tmp/seen" | head -n 20 | sed 's/^/#   /'
	fi
	[ "$(section mounts)" -ge 2 ] && ok "/dev/pts and /dev/shm still mounted" ||
		{ not_ok "/dev/pts or /dev/shm not mounted"; show "$tmp/out"; }
	[ "$(section write)" = read-only ] && ok "/dev/infiniband is read-only" ||
		not_ok "/dev/infiniband is writable"
	[ "$(section env)" = "$libdir:/nonexistent" ] &&
		ok "LD_LIBRARY_PATH: $libdir first, then the caller's" ||
		not_ok "LD_LIBRARY_PATH '$(section env)', want '$libdir:/nonexistent'"
fi

check "the program's exit status" 7 "$run" -- sh -c 'exit 7'
check "a program that does not exist: 127" 127 "$run" -- "$tmp/nosuch"
touch "$tmp/noexec"
check "a program that cannot be executed: 126" 126 "$run" -- "$tmp/noexec"
check "no program: usage error 2" 2 "$run"
check "a bad SOFTVERBS_ADDR: 125 and the library's message" 125 "$run" -a 300.1.1.1 -- true &&
	{ grep -q 'SOFTVERBS_ADDR' "$tmp/out" && ok "the message names SOFTVERBS_ADDR" ||
		{ not_ok "no SOFTVERBS_ADDR in the message"; show "$tmp/out"; }; }
check "--verbose names the device, its node and GID 0" 0 "$run" -v -a "$addr" -- true &&
	{ grep -q "/dev/infiniband/uverbs[0-9].*GID 0 ::ffff:$addr" "$tmp/out" && ok "verbose line" ||
		{ not_ok "verbose line"; show "$tmp/out"; }; }

# no namespace possible: an unmapped user namespace cannot make another one
if command -v unshare >/dev/null && unshare --user true 2>/dev/null; then
	if check "softverbs-run where no namespace can be made" 0 \
		unshare --user "$run" -- "$devinfo"; then
		grep -q "no private namespace" "$tmp/out" && grep -q "will not see the device" "$tmp/out" &&
			grep -q "node_guid" "$tmp/out" &&
			ok "it says so and what still works, and the verbs work" ||
			{ not_ok "message or verbs"; show "$tmp/out"; }
	fi
fi
check "--no-namespace: the verbs work, no /dev/infiniband made" 0 \
	"$run" --no-namespace -- sh -c "'$devinfo' >/dev/null && ! test -e /sys/class/infiniband_verbs/abi_version"

if [ -n "$valgrind" ]; then
	mkdir "$tmp/vtree"
	check "softverbs-run --tree under valgrind: no error, no leak" 0 \
		"$valgrind" --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
		"$run" -a "$addr" --tree "$tmp/vtree"
fi

snapshot "$tmp/after"
if cmp -s "$tmp/before" "$tmp/after"; then
	ok "the host's mounts, /dev and /sys/class are as before"
else
	not_ok "something changed outside the namespace"
	diff "$tmp/before" "$tmp/after" | head -n 20 | sed 's/^/#   /'
fi

echo "1..$n"
[ "$failed" -eq 0 ]
