#!/bin/sh
# Test wrapper used by ctest: run_test.sh [NAME=VALUE ...] -- PROGRAM [ARGS ...]
# Unsets every SOFTVERBS_* variable inherited from the caller, sets the given
# NAME=VALUE pairs (from /* test: env=... */ markers), then execs PROGRAM.
for v in $(env | sed -n 's/^\(SOFTVERBS_[A-Za-z0-9_]*\)=.*/\1/p'); do
	unset "$v"
done
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	export "$1"
	shift
done
if [ $# -lt 2 ]; then
	echo "usage: run_test.sh [NAME=VALUE ...] -- PROGRAM [ARGS ...]" >&2
	exit 2
fi
shift
exec "$@"
