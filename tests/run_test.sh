#!/bin/sh
# Test wrapper used by ctest: run_test.sh [NAME=VALUE ...] -- PROGRAM [ARGS ...]
# Unsets every SOFTVERBS_* variable inherited from the caller, then sets
# SOFTVERBS_SHM from SV_TEST_SHM if that is set (check's clang stage runs
# everything over UDP that way), then the given NAME=VALUE pairs (from
# /* test: env=... */ markers, which win), then execs PROGRAM.
. "$(dirname "$0")/clean_env.sh"
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
