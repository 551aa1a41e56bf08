# SPDX-License-Identifier: MIT
# Sourced by ctest's wrapper and the shell tests (". DIR/clean_env.sh"):
# unsets every SOFTVERBS_* variable inherited from the caller, so that a
# test sees only the settings it asks for, then sets SOFTVERBS_SHM from
# SV_TEST_SHM if that is set (check's clang stage runs every test over
# UDP that way: SV_TEST_SHM=0).
for v in $(env | sed -n 's/^\(SOFTVERBS_[A-Za-z0-9_]*\)=.*/\1/p'); do
	unset "$v"
done
if [ -n "${SV_TEST_SHM:-}" ]; then
	export SOFTVERBS_SHM="$SV_TEST_SHM"
fi
