#!/bin/sh
# example_rc_pingpong.sh PROGRAM
# example_rc_pingpong.sh --memcheck VALGRIND PROGRAM
#
# Runs PROGRAM (build/examples/sv_rc_pingpong) as a server and a client on
# this host, in the combinations the example exists to show, and checks
# both exit statuses and the report lines of both sides:
#   plain        ordinary PD, ibv_alloc_buf + ibv_reg_buf_mr (addr path)
#   cc           -U, SOFTVERBS_CC_DMA_BOUNCE=1 on both sides: parent domain,
#                fd-backed buffer, fd-path registration, CQ with MASK_PD
#   dmah         --dmah (default hints) against -H CPU,1,pm, and -H PH alone
#   export       -E with -U on a bounce device: a helper maps the exported fd
#   mixed        what make demo runs: a bounce -U -E side against a --dmah side
#   sizes        one-packet and multi-packet messages, a subset of -o
# every run with -c (data checked) and -o (RDMA WRITE, READ, fetch-and-add),
# and the refusals: -E on ordinary memory, a bounce device without -U, and
# two sides with different -s.
# With --memcheck, only the mixed run, with both sides under VALGRIND's
# memcheck (any error or leak fails it).
# TAP output; exit 0 when every point passed.
set -u
. "$(dirname "$0")/tap.sh"

valgrind=
if [ "${1:-}" = --memcheck ] && [ $# -eq 3 ]; then
	valgrind=$2
	shift 2
fi
if [ $# -ne 1 ]; then
	echo "usage: example_rc_pingpong.sh [--memcheck VALGRIND] PROGRAM" >&2
	exit 2
fi
prog=$1
[ -x "$prog" ] || { echo "not ok - $prog is not an executable"; exit 1; }

. "$(dirname "$0")/clean_env.sh" # no inherited SOFTVERBS_* but SV_TEST_SHM

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# show FILE...: as TAP comments
show() {
	for f in "$@"; do
		echo "#   --- $(basename "$f")"
		head -n 40 "$f" | sed 's/^/#   /'
	done
}

wrap= # a command that runs the program (valgrind)

# The first CPU this process may run on (a valid DMA handle CPU).
cpu=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*\([0-9]*\).*/\1/p' /proc/self/status)
cpu=${cpu:-0}

# pair NAME "SERVER_ENV" "SERVER_ARGS" "CLIENT_ENV" "CLIENT_ARGS": one run;
# outputs in $tmp/NAME.{srv,cli}[.err], exit statuses in $srv_rc, $cli_rc.
pair() {
	name=$1
	s=$tmp/$name.srv c=$tmp/$name.cli
	: >"$s"
	# shellcheck disable=SC2086 # the argument strings are word lists
	env $2 $wrap "$prog" -p 0 -t 60 $3 >"$s" 2>"$s.err" &
	spid=$!
	port=
	i=0
	while [ $i -lt 600 ]; do
		port=$(sed -n 's/.*server waiting for a client on TCP port \([0-9]*\).*/\1/p' "$s")
		[ -n "$port" ] && break
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.05
		i=$((i + 1))
	done
	if [ -z "$port" ]; then
		kill "$spid" 2>/dev/null
		wait "$spid"
		srv_rc=$? cli_rc=-1
		: >"$c"
		: >"$c.err"
		return
	fi
	# shellcheck disable=SC2086
	env $4 $wrap "$prog" -p "$port" -t 60 $5 127.0.0.1 >"$c" 2>"$c.err"
	cli_rc=$?
	wait "$spid"
	srv_rc=$?
}

# lines FILE REGEX...: every REGEX (ERE) matches a line of FILE; sets $missing
lines() {
	f=$1
	shift
	missing=
	for re in "$@"; do
		grep -Eq -- "$re" "$f" || missing="$missing [$re]"
	done
}

# expect_pass NAME SIDE_REGEXES...: both sides exited 0 and reported
# every regex (the common ones are added here).
expect_pass() {
	name=$1
	shift
	if [ "$srv_rc" -eq 0 ] && [ "$cli_rc" -eq 0 ]; then
		ok "$name: server and client exit 0"
	else
		not_ok "$name: exit status server $srv_rc, client $cli_rc (want 0, 0)"
		show "$tmp/$name.srv" "$tmp/$name.srv.err" "$tmp/$name.cli" "$tmp/$name.cli.err"
		return
	fi
	for side in srv cli; do
		lines "$tmp/$name.$side" '^device +softverbs0 port 1, MTU [0-9]+, GID ::ffff:127\.' \
			'^qp +RC QPN 0x[0-9a-f]{6} .*<-> peer QPN 0x[0-9a-f]{6}' \
			'^throughput +[0-9]+\.[0-9] MB/s' \
			'^latency +avg [0-9.]+ us, p99 [0-9.]+ us' '^result +PASS$' "$@"
		if [ -z "$missing" ]; then
			ok "$name: the $side report has every expected line"
		else
			not_ok "$name: the $side report lacks:$missing"
			show "$tmp/$name.$side" "$tmp/$name.$side.err"
		fi
		if [ -s "$tmp/$name.$side.err" ]; then
			not_ok "$name: $side wrote to stderr"
			show "$tmp/$name.$side.err"
		fi
	done
}

ops_ok='^write +4096 B into the peer.s buffer: verified by the peer$'
read_ok='^read +4096 B from the peer.s buffer: verified$'
atomic_ok='^atomic +8 fetch-and-adds on the peer.s counter \(0x[0-9a-f]+ -> 0x[0-9a-f]+\): verified, and by the peer$'
incoming_ok='^incoming +the peer.s write and atomics into this buffer: verified$'
send_ok='^send +300 ping-pongs of 4096 B: every message verified$'
common="-n 300 -c -o all"
bounce="SOFTVERBS_CC_DMA_BOUNCE=1"

# -- --memcheck: the mixed run, both sides under valgrind -------------------
if [ -n "$valgrind" ]; then
	wrap="$valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect"
	pair memcheck "$bounce" "-U -E -n 100 -c -o all" "" "--dmah -n 100 -c -o all"
	if [ "$srv_rc" -eq 0 ] && [ "$cli_rc" -eq 0 ] &&
		grep -Eq '^result +PASS$' "$tmp/memcheck.srv" &&
		grep -Eq '^result +PASS$' "$tmp/memcheck.cli"; then
		ok "memcheck: -U -E on a bounce device against --dmah, no valgrind error or leak"
	else
		not_ok "memcheck: exit status server $srv_rc, client $cli_rc (99: valgrind found errors)"
		show "$tmp/memcheck.srv" "$tmp/memcheck.srv.err" "$tmp/memcheck.cli" "$tmp/memcheck.cli.err"
	fi
	echo "1..$n"
	echo "$((n - failed)) passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
fi

# -- plain ---------------------------------------------------------------
pair plain "" "$common" "" "$common"
expect_pass plain '^role +(server|client), peer (::ffff:)?127\.0\.0\.1 port [0-9]+$' \
	'CC DMA bounce off' '^pd +ordinary PD$' \
	'^buffer +ibv_alloc_buf 28672 B: ordinary memory$' \
	'^mr +ibv_reg_buf_mr, addr path: lkey 0x[0-9a-f]{8} rkey 0x[0-9a-f]{8}, mr->addr = VA$' \
	"$send_ok" "$ops_ok" "$read_ok" "$atomic_ok" "$incoming_ok"
if grep -q '^mr .*mr->addr 0x0 = offset' "$tmp/plain.srv"; then
	not_ok "plain: an ordinary buffer's mr->addr is its VA, not 0"
else
	ok "plain: an ordinary buffer's mr->addr is its VA"
fi

# -- cc: -U on a bounce device, both sides --------------------------------
pair cc "$bounce" "-U $common" "$bounce" "-U $common"
expect_pass cc 'CC DMA bounce on$' \
	'^pd +parent domain \(ALLOW_CC_UNPROTECTED_ALLOC\); CQ \(MASK_PD\) and QP on it$' \
	'^buffer +ibv_alloc_buf 28672 B: fd-backed shared memory, a 28672 B (memfd|DMA-buf)' \
	'^mr +ibv_reg_buf_mr, fd path: lkey 0x[0-9a-f]{8} rkey 0x[0-9a-f]{8}, mr->addr 0x0 = offset, iova = VA$' \
	"$send_ok" "$ops_ok" "$read_ok" "$atomic_ok" "$incoming_ok"

# -- dmah ------------------------------------------------------------------
pair dmah "" "--dmah $common" "" "-H $cpu,1,pm $common"
expect_pass dmah \
	'^mr +ibv_reg_mr_ex\(BUF\|ADDR\|DMAH\), addr path: lkey 0x[0-9a-f]{8} rkey 0x[0-9a-f]{8}' \
	"$send_ok" "$ops_ok" "$read_ok" "$atomic_ok" "$incoming_ok"
lines "$tmp/dmah.srv" "^dmah +ibv_alloc_dmah: ph 0 \\(bidirectional\\), cpu $cpu, mem vm\$"
[ -z "$missing" ] && ok "dmah: --dmah defaults to ph 0, the first allowed CPU ($cpu), vm" ||
	{ not_ok "dmah: the server's dmah line"; show "$tmp/dmah.srv"; }
lines "$tmp/dmah.cli" "^dmah +ibv_alloc_dmah: ph 1 \\(requester\\), cpu $cpu, mem pm\$"
[ -z "$missing" ] && ok "dmah: -H $cpu,1,pm is reported as given" ||
	{ not_ok "dmah: the client's dmah line"; show "$tmp/dmah.cli"; }

pair dmah_ph "" "-H 3 -n 50 -c -o write" "" "--dmah=2 -n 50 -c -o write"
expect_pass dmah_ph '^dmah +ibv_alloc_dmah: ph [23] \(target(, priority)?\), no steering tag$' \
	'^send +50 ping-pongs of 4096 B: every message verified$' "$ops_ok"

# -- export: -E with -U on a bounce device ---------------------------------
pair export "$bounce" "-U -E $common" "$bounce" "-U -E $common"
expect_pass export "$send_ok" "$ops_ok" \
	'^export +helper pid [0-9]+ mapped the fd \(SCM_RIGHTS, 28672 B\): read "sv_rc_pingpong (server|client) pid [0-9]+", checksums match, its write seen here$'
for side in srv cli; do
	want=server
	[ $side = cli ] && want=client
	if grep -q "^export .*read \"sv_rc_pingpong $want pid" "$tmp/export.$side"; then
		ok "export: the helper of $want read its own buffer"
	else
		not_ok "export: the helper of $want read another label"
		show "$tmp/export.$side"
	fi
done

# -- mixed: a bounce -U -E side against a --dmah side (make demo) ----------
pair mixed "$bounce" "-U -E $common" "" "--dmah $common"
expect_pass mixed "$send_ok" "$ops_ok" "$read_ok" "$atomic_ok" "$incoming_ok"
lines "$tmp/mixed.srv" 'CC DMA bounce on$' '^mr +ibv_reg_buf_mr, fd path' '^export +helper pid'
[ -z "$missing" ] && ok "mixed: the bounce side registered through the fd and exported it" ||
	{ not_ok "mixed: server lacks:$missing"; show "$tmp/mixed.srv"; }
lines "$tmp/mixed.cli" 'CC DMA bounce off$' '^mr +ibv_reg_mr_ex\(BUF\|ADDR\|DMAH\), addr path' '^dmah +'
[ -z "$missing" ] && ok "mixed: the other side registered by address with a DMA handle" ||
	{ not_ok "mixed: client lacks:$missing"; show "$tmp/mixed.cli"; }

# -- sizes -----------------------------------------------------------------
pair small "" "-s 1 -n 200 -c -o all" "" "-s 1 -n 200 -c -o all"
expect_pass small '^send +200 ping-pongs of 1 B: every message verified$' \
	'^write +1 B into the peer.s buffer: verified by the peer$' "$atomic_ok"
pair large "$bounce" "-U -s 65536 -n 40 -c -o read,atomic" "" "-s 65536 -n 40 -c -o read,atomic"
expect_pass large '^send +40 ping-pongs of 65536 B: every message verified$' \
	'^read +65536 B from the peer.s buffer: verified$' "$atomic_ok"
if grep -q '^write ' "$tmp/large.srv" "$tmp/large.cli"; then
	not_ok "large: -o read,atomic also wrote"
else
	ok "large: -o read,atomic runs no RDMA WRITE"
fi

# -- refusals --------------------------------------------------------------
# run_alone NAME ENV ARGS: a server that must fail before it listens
run_alone() {
	# shellcheck disable=SC2086
	env $2 "$prog" -p 0 -t 5 $3 >"$tmp/$1.out" 2>"$tmp/$1.err"
	alone_rc=$?
}

run_alone noexport "" "-E"
if [ "$alone_rc" -eq 1 ] && grep -q 'No data available.*ordinary memory' "$tmp/noexport.err" &&
	grep -Eq '^result +FAIL' "$tmp/noexport.out" &&
	! grep -q 'waiting for a client' "$tmp/noexport.out"; then
	ok "-E on ordinary memory: exit 1 with ENODATA, before waiting for a client"
else
	not_ok "-E on ordinary memory: exit $alone_rc"
	show "$tmp/noexport.out" "$tmp/noexport.err"
fi

run_alone nou "$bounce" ""
if [ "$alone_rc" -eq 1 ] && grep -q 'Operation not supported.*use -U' "$tmp/nou.err"; then
	ok "a bounce device without -U: exit 1, EOPNOTSUPP and a hint to use -U"
else
	not_ok "a bounce device without -U: exit $alone_rc"
	show "$tmp/nou.out" "$tmp/nou.err"
fi

pair mismatch "" "-n 10 -s 4096" "" "-n 10 -s 512"
if [ "$srv_rc" -eq 1 ] && [ "$cli_rc" -eq 1 ] &&
	grep -q 'same -s, -n and -o' "$tmp/mismatch.srv.err" &&
	grep -q 'same -s, -n and -o' "$tmp/mismatch.cli.err"; then
	ok "different -s on the two sides: both exit 1 and say why"
else
	not_ok "different -s: exit status server $srv_rc, client $cli_rc"
	show "$tmp/mismatch.srv.err" "$tmp/mismatch.cli.err"
fi

"$prog" -s 0 >"$tmp/usage.out" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "invalid value for -s" "$tmp/usage.out"; then
	ok "a bad option value: exit 2 with a message"
else
	not_ok "a bad option value: exit $rc"
	show "$tmp/usage.out"
fi

echo "1..$n"
echo "$((n - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
