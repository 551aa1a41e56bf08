# tap.sh - TAP output for the shell tests; source it: . "$(dirname "$0")/tap.sh"
#
#   ok TEXT...       a passed point:  "ok N - TEXT"
#   not_ok TEXT...   a failed point:  "not ok N - TEXT" (counted in $failed)
#   skip REASON...   the whole test is skipped: "1..0 # SKIP REASON", exit 77
#   tap_done         prints the plan "1..N"; its status is 0 only if no point failed
#                    (make it the script's last command)
# $n and $failed count the points so far.

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

skip() {
	echo "1..0 # SKIP $*"
	exit 77
}

tap_done() {
	echo "1..$n"
	[ "$failed" -eq 0 ]
}
