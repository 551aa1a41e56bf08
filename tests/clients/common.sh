# tests/clients/common.sh: sourced by the tests/clients/*.sh scripts, after
# they set `run` (softverbs-run) and `sanitized`:
#   skip REASON          exit 77 with "1..0 # SKIP REASON"
#   need PKG CMD...      skip unless every CMD is installed (apt-get install PKG)
#   ok / not_ok TEXT     TAP lines; finish prints the plan and exits 0 or 1
#   show FILE...         the files as TAP comments (60 lines each)
#   free_port [SALT]     a TCP port no socket uses
#   start_listening OUT CMD...  a server with @PORT@ in CMD a free port ($port),
#                        listening there (retried when the port was taken)
#   listening PORT       a TCP socket listens on PORT
#   wait_listen PORT PID until PORT listens or PID died (30 s)
#   sv CMD...            CMD under softverbs-run with a timeout ($limit s)
#   start_server OUT CMD...  sv CMD in the background, stdout+stderr in OUT;
#                        its pid in $spid (stopped by the cleanup on exit)
#   loader_clean FILE    no dynamic-loader complaint in FILE
#   wait_lines FILE ERE N  until N lines of FILE match ERE (10 s): 0, else 1
# A scratch directory is in $tmp. Every SOFTVERBS_* variable of the caller
# is unset (clean_env.sh); SOFTVERBS_STATS=1 so that failures show counters.
set -u

skip() {
	echo "1..0 # SKIP $*"
	exit 77
}

[ "$sanitized" = sanitized ] &&
	skip "sanitized build: Debian's binaries cannot load an instrumented libibverbs.so.1"
[ -x "$run" ] || { echo "not ok - no $run"; exit 1; }
command -v timeout >/dev/null || skip "no timeout(1)"

. "$(dirname "$0")/../clean_env.sh"
export SOFTVERBS_STATS=1
limit=${CLIENTS_TIMEOUT:-120}

tmp=$(mktemp -d)
spid=''
cleanup() {
	# only the processes this script started, by pid
	[ -z "$spid" ] || kill_server
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

n=0 failed=0
ok() {
	n=$((n + 1))
	echo "ok $n - $*"
}
not_ok() {
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n - $*"
}
finish() {
	echo "1..$n"
	[ "$failed" -eq 0 ]
	exit $?
}
# (the QPs' own counter lines left out; the device totals stay)
show() {
	for f in "$@"; do
		echo "#   == $(basename "$f")"
		grep -v '^softverbs: [^ ]* QP ' "$f" | head -n 60 | sed 's/^/#   /'
	done
}
need() {
	pkg=$1
	shift
	for b in "$@"; do
		command -v "$b" >/dev/null || skip "$b is not installed (apt-get install $pkg)"
	done
}
loader_clean() {
	! grep -Eq 'no version information|symbol lookup error|undefined symbol|cannot open shared object' "$@"
}
listening() {
	hex=$(printf ':%04X ' "$1")
	cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v p="$hex" '
		index($2 " ", p) && $4 == "0A" { found = 1 } END { exit !found }'
}
# port_used PORT: a TCP socket of any state has PORT as its local port
port_used() {
	hex=$(printf ':%04X ' "$1")
	cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v p="$hex" '
		index($2 " ", p) { found = 1 } END { exit !found }'
}
# (below the usual ephemeral range, 32768 up, where clients' ports are)
free_port() {
	p=$((20000 + ($$ * 7 + n * 13 + ${1:-0} * 101) % 12000))
	while port_used "$p"; do
		p=$((p + 1))
	done
	echo "$p"
}
wait_listen() {
	i=0
	while ! listening "$1" && kill -0 "$2" 2>/dev/null && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	listening "$1"
}
sv() {
	timeout -k 5 "$limit" "$run" -- "$@"
}
start_server() {
	out=$1
	shift
	# exec: $spid is timeout(1) itself, which passes a kill on to the
	# server (a subshell's pid would leave both running until the limit:
	# io_demo then spun two cores for 120 s under the tests after it)
	(exec timeout -k 5 "$limit" "$run" -- "$@") >"$out" 2>&1 &
	spid=$!
}
# start_listening OUT CMD...: start_server with each @PORT@ of CMD a free
# port (in $port), until it listens there: 0; another try (5 in all) when
# the port was taken meanwhile ("in use"); 1 with the server stopped
start_listening() {
	out=$1
	shift
	attempt=0
	while [ $attempt -lt 5 ]; do
		attempt=$((attempt + 1))
		port=$(free_port "$attempt")
		launch_on "$out" "$port" "$@"
		wait_listen "$port" "$spid" && return 0
		kill_server
		grep -qi 'in use' "$out" || return 1
	done
	return 1
}
launch_on() {
	out=$1 p=$2
	shift 2
	i=$#
	while [ $i -gt 0 ]; do
		a=$1
		shift
		[ "$a" = @PORT@ ] && a=$p
		set -- "$@" "$a"
		i=$((i - 1))
	done
	start_server "$out" "$@"
}
# stop_server: wait for the server (at most 20 s once the client is done); its status
stop_server() {
	i=0
	while kill -0 "$spid" 2>/dev/null && [ $i -lt 200 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill "$spid" 2>/dev/null
	wait "$spid"
	src=$?
	spid=''
	return $src
}
wait_lines() {
	i=0
	while [ "$(grep -Ec "$2" "$1" 2>/dev/null)" -lt "$3" ] && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ "$(grep -Ec "$2" "$1" 2>/dev/null)" -ge "$3" ]
}
# kill_server: end a server that never exits by itself (io_demo, qperf)
kill_server() {
	kill "$spid" 2>/dev/null
	i=0
	while kill -0 "$spid" 2>/dev/null && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$spid" 2>/dev/null; then # deaf to TERM: the server, then timeout(1)
		pkill -KILL -P "$spid" 2>/dev/null
		kill -KILL "$spid" 2>/dev/null
	fi
	wait "$spid" 2>/dev/null
	spid=''
}
# errors_clean FILE...: the softverbs counters in FILE show no error
# completion and no dropped packet of a QP ("completions ... errors 0")
errors_clean() {
	! grep -Eh 'completions (ok [0-9]+ )?errors [1-9]|drops malformed [1-9]|icrc [1-9]' "$@" >/dev/null
}
