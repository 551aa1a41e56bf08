#!/bin/sh
# SPDX-License-Identifier: MIT
# run_fuzz.sh FUZZER SECONDS WORKDIR SEEDDIR [SEEDDIR...]
#
# One bounded libFuzzer run: replays every input of WORKDIR/corpus and the
# SEEDDIRs (committed seeds and the reproducers of past bugs), then fuzzes
# for SECONDS, adding new inputs to WORKDIR/corpus only. A crash, ASan or
# UBSan report, leak or timeout fails (exit 1) and leaves the input in
# WORKDIR/artifacts/. The last line sums the run up:
#   fuzz NAME: N runs, E exec/s, cov C ft F, corpus K inputs, crashes X, S s
set -u
bin=${1:?usage: run_fuzz.sh FUZZER SECONDS WORKDIR SEEDDIR...}
secs=${2:?seconds}
dir=${3:?workdir}
shift 3
name=$(basename "$bin")
mkdir -p "$dir/corpus" "$dir/artifacts" || exit 2
seeds=
for d in "$@"; do
	[ -d "$d" ] && seeds="$seeds $d"
done
log=$dir/last.log
before=$(ls "$dir/artifacts" | wc -l)
t0=$(date +%s)
# detect_leaks: libFuzzer checks for leaks after inputs that allocate more than they free
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1:strict_string_checks=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
SOFTVERBS_STATS=0 \
	"$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -max_len=8192 \
	-print_final_stats=1 -artifact_prefix="$dir/artifacts/" \
	"$dir/corpus" $seeds >"$log" 2>&1
rc=$?
t1=$(date +%s)
after=$(ls "$dir/artifacts" | wc -l)
# libFuzzer's final lines: "#N DONE cov: C ft: F corp: K/..." and stat::number_of_executed_units
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
cov=$(grep -E '^#[0-9]+' "$log" | tail -n 1 | sed -n 's/.* cov: \([0-9]*\) ft: \([0-9]*\).*/cov \1 ft \2/p')
ncorp=$(ls "$dir/corpus" | wc -l)
if [ $rc -ne 0 ]; then
	grep -E 'ERROR|SUMMARY|runtime error|==[0-9]+==|#[0-9]+ +in |artifact_prefix|Test unit written' "$log" | head -n 60
	echo "not ok - $name: libFuzzer exit $rc (log: $log)"
	for f in "$dir"/artifacts/*; do
		[ -f "$f" ] && echo "# reproducer: $f  (rerun: $bin $f)"
	done
fi
echo "fuzz $name: ${runs:-?} runs, ${eps:-?} exec/s, ${cov:-cov ? ft ?}, corpus $ncorp inputs," \
	"crashes $((after - before)), $((t1 - t0)) s"
[ $rc -eq 0 ] || exit 1
exit 0
