# SPDX-License-Identifier: MIT
# tests/interop/runs.sh: sourced by tests/interop/interop.sh (bash), after vm.sh.
#
# One interop run: an unmodified Debian tool (ibverbs-utils or perftest),
# or our iop_rdma_ops (kind ops: memory windows, ATOMIC WRITE, FLUSH, which
# Debian's tools lack; $IOP_HOST on the host, /usr/bin/iop_rdma_ops in the
# guest, mkimage.sh), with one side on softverbs (a host process in the
# namespace, through
# LD_LIBRARY_PATH=$SV_LIB, SOFTVERBS_ADDR=the tap address,
# SOFTVERBS_STATS=1, SOFTVERBS_FAULT=$FAULT when set) and the other on the
# kernel's rxe0 in the guest. DIR says who serves (listens on TCP for the
# tools' own connection exchange): sv-server (rxe is the client, i.e. the
# requester of the perftest _bw/_lat tools) or sv-client. Both sides run
# under a time limit ($RUN_LIMIT s; rxe 6.1 retries forever with
# retry_cnt 7).
#
# A run passes when both sides exit 0, the tool's own report is there
# (pingpong: "N iters in" on both sides; _bw: a row for the size; _lat: a
# latency row; ops: "all N checks passed" on both sides), softverbs printed
# its device counters with no ICRC drop and no error completion but those
# an ops client expected (the WRITE with a dead key), rxe's hw_counters
# (read before and after) show
# no retry_exceeded_err or send_err, and, without fault injection, neither
# side retransmitted for a reason of its own: rxe rcvd_seq_err,
# duplicate_request and out_of_seq_request 0, softverbs NAKs 0, and every
# packet either side sent again explained by retrans.py from the
# session's capture ($CAP): rxe's as its 6.1 timer running out early
# ("rxe early retransmits"), softverbs' as timeouts with no answer from
# rxe on the wire ("softverbs timeouts, rxe late": the emulated guest on
# a busy host). INTEROP_STRICT=1 fails those too. A fault run instead
# must show the recovery path named by $EXPECT (see expect_ok). Each run
# prints one TAP line with its figure and both sides'
# counters; its files stay in $RUNS/NN-NAME/. An ops run whose test one
# side's device does not support ends both sides with exit 77 and a SKIP
# line: the run is a TAP "# SKIP" with that reason (counted in RUN_SKIPPED).

RUN_N=0 RUN_FAILED=0 RUN_PASSED=0 RUN_SKIPPED=0
FAULT='' EXPECT='' GID_MODE=v4
# GID modes: each one's softverbs address and GID table layout, and the
# GID each side uses (filled in by interop.sh: HGID/GGID index, HADDR/GADDR)
#   v4      SOFTVERBS_ADDR=H4, default layout; rxe's ::ffff:G4
#   v6      SOFTVERBS_ADDR=H6 (IPv6); rxe's G6
#   rxe-v4  SOFTVERBS_GID_TABLE=rxe, both sides -g 1 (what rxe users type)
#   rxe-ll  SOFTVERBS_GID_TABLE=rxe, both sides -g 0: the link-local GIDs
declare -A HGID=() GGID=() HADDR=() GADDR=()
RUN_LIMIT=${INTEROP_RUN_TIMEOUT:-150}
# how long rxe's side may take to end after softverbs' side ended well
EXIT_LIMIT=${INTEROP_EXIT_TIMEOUT:-30}

# gid_index FILE ADDR: the index of ADDR in an `ibv_devinfo -v` listing
gid_index() {
	awk -v a="$2" '/GID\[/ { i = $0; sub(/.*GID\[ */, "", i); sub(/\].*/, "", i)
		g = $NF; if ($(NF - 2) ~ /,$/) g = $(NF - 2); sub(/,$/, "", g)
		if (g == a) { print i; exit } }' "$1"
}

# host_env: the environment of every softverbs process (nothing inherited)
host_env() {
	local addr=$H4
	[ "$GID_MODE" = v6 ] && addr=$H6
	printf '%s\n' "PATH=/usr/sbin:/usr/bin:/sbin:/bin" "LD_LIBRARY_PATH=$SV_LIB" \
		"SOFTVERBS_ADDR=$addr" SOFTVERBS_STATS=1
	case $GID_MODE in rxe-*) echo SOFTVERBS_GID_TABLE=rxe ;; esac
	[ -z "$FAULT" ] || echo "SOFTVERBS_FAULT=$FAULT"
}

# listening_in FILE PORT: a /proc/net/tcp{,6} dump shows PORT listening
listening_in() {
	awk -v p="$(printf ':%04X' "$2")" '$2 ~ p "$" && $4 == "0A" { f = 1 } END { exit !f }' "$1"
}

# sv_stats FILE: softverbs' device counters in FILE (stderr) as "key value"
# lines, summed over the device reports, plus "reports N"
sv_stats() {
	awk '
	/^softverbs: [^ ]+ QP 0x/ { next }
	/^softverbs: [^ ]+ [^ ]+: tx [0-9]+ pkts/ {
		r++; v["tx_pkts"] += $5; v["tx_bytes"] += $7; v["rx_pkts"] += $10; v["rx_bytes"] += $12; next }
	/^softverbs:   / {
		g = ""; d = ""; w = ""
		for (i = 2; i <= NF; i++) {
			t = $i; sub(/[,:]$/, "", t)
			if (t ~ /^[0-9]+$/) { k = g; if (d != "") k = k "_" d; k = k "_" w; sub(/^_/, "", k); v[k] += t }
			else if (i == 2 && (t == "naks" || t == "drops" || t == "faults" || t == "completions")) g = t
			else if (t == "rx" || t == "tx") d = t
			else w = t
		}
	}
	END { print "reports", r + 0; for (k in v) print k, v[k] }' "$1"
}

# rxe_delta BEFORE AFTER: rxe's hw_counters that changed, as "name delta"
rxe_delta() {
	awk 'NR == FNR { b[$1] = $2; next } { print $1, $2 - b[$1] }' "$1" "$2"
}

# cpu_stall_us: the host's "some" CPU pressure stall total (PSI), 0 without it
cpu_stall_us() {
	sed -n 's/^some .*total=\([0-9]*\)$/\1/p' /proc/pressure/cpu 2>/dev/null | grep . || echo 0
}

# kv FILE KEY: the value of KEY in a "key value" file (0 when absent)
kv() {
	awk -v k="$2" '$1 == k { v = $2 } END { print v + 0 }' "$1"
}

RXE_COUNTERS='cd /sys/class/infiniband/rxe0/ports/1/hw_counters && for f in *; do echo $f $(cat $f); done'

# tool_ok KIND SIDE FILE SIZE ITERS: the tool's own report is in FILE
tool_ok() {
	case $1 in
	pp) grep -Eq "^$5 iters in [0-9.]+ seconds" "$3" && ! grep -q 'invalid data' "$3" ;;
	# (the message rate: a slow atomic run's bandwidth rounds to 0.00 MB/s)
	# (a UD receiver may lose datagrams, which UD allows: its row only)
	bw) awk -v s="$4" -v ud="${UD_RECV:-}" '$1 == s && $2 ~ /^[0-9]+$/ && ($5 + 0 > 0 || ud) { f = 1 } END { exit !f }' "$3" ;;
	lat) [ "$2" = server ] || awk -v s="$4" '$1 == s && $2 ~ /^[0-9]+$/ && $3 + 0 > 0 { f = 1 } END { exit !f }' "$3" ;;
	ops) grep -Eq '^iop_rdma_ops: all [0-9]+ checks passed' "$3" && ! grep -q 'not ok' "$3" ;;
	esac
}

# figure KIND FILE SIZE: the run's figure from the client's report
figure() {
	case $1 in
	pp) grep -Eo '[0-9.]+ Mbit/sec' "$2" | head -n 1 | sed 's|$| (pingpong)|' ;;
	bw) awk -v s="$3" '$1 == s { printf "%s MB/s, %s Mpps", $4, $5; exit }' "$2" ;;
	lat) awk -v s="$3" '$1 == s { printf "typical %s us, average %s us", $5, $6; exit }' "$2" ;;
	ops) sed -n 's/^iop_rdma_ops: all \([0-9]*\) checks passed/client: \1 checks passed/p' "$2" ;;
	esac
}

# expect_ok SV RXE: the fault run's expected recovery happened ($EXPECT):
#   sv_nak_rx    rxe NAKed a sequence gap, softverbs went back (tx loss, sv requester)
#   rxe_retry    rxe timed out and retransmitted (tx loss of sv's ACKs/responses)
#   sv_nak_tx    softverbs NAKed a gap, rxe went back (rx loss, rxe requester)
#   sv_retry     softverbs asked again, rxe saw duplicates (rx loss of READ/atomic responses)
#   (empty)      only that the run completed: ACK losses that later,
#                cumulative ACKs cover need no recovery at all
expect_ok() {
	local sv=$1 rxe=$2
	[ "$(kv "$sv" faults_dropped)" -gt 0 ] || { echo "no packet was dropped"; return 1; }
	case $EXPECT in
	sv_nak_rx) # (softverbs counts timer resends as retransmits, not NAKed ones)
		[ "$(kv "$rxe" out_of_seq_request)" -gt 0 ] && [ "$(kv "$sv" naks_rx_seq)" -gt 0 ] && return 0 ;;
	rxe_retry)
		[ "$(kv "$rxe" completer_retry_err)" -gt 0 ] && [ "$(kv "$sv" duplicates)" -gt 0 ] && return 0 ;;
	sv_nak_tx)
		# (rxe counts rcvd_seq_err for NAKs of SENDs and WRITEs, not of READs or atomics)
		[ "$(kv "$sv" naks_tx_seq)" -gt 0 ] && [ "$(kv "$rxe" completer_retry_err)" -gt 0 ] && return 0 ;;
	sv_retry) # rxe saw requests again
		[ "$(kv "$rxe" duplicate_request)" -gt 0 ] && return 0 ;;
	*) return 0 ;;
	esac
	echo "the expected recovery ($EXPECT) did not show in the counters"
	return 1
}

# counters_ok SV RXE [ERRORS]: "; REASON" for each of: softverbs printed no
# device counters, dropped packets for their ICRC, had error completions
# (other than ERRORS, default 0); rxe counted retry_exceeded_err or
# send_err (nothing when all is well)
counters_ok() {
	local sv=$1 rxe=$2 errs=${3:-0}
	if [ "$(kv "$sv" reports)" -eq 0 ]; then
		printf '; softverbs printed no device counters'
	else
		[ "$(kv "$sv" drops_icrc)" -eq 0 ] || printf '; softverbs dropped %s packets for their ICRC' "$(kv "$sv" drops_icrc)"
		[ "$(kv "$sv" completions_errors)" -eq "$errs" ] ||
			printf '; softverbs error completions %s (expected %s)' "$(kv "$sv" completions_errors)" "$errs"
	fi
	[ "$(kv "$rxe" retry_exceeded_err)" -eq 0 ] && [ "$(kv "$rxe" send_err)" -eq 0 ] ||
		printf '; rxe retry_exceeded_err/send_err'
}

# run_result NAME WHY FIGURE DIR head|tail: the run's TAP line (ok with
# FIGURE when WHY is empty, else not ok with WHY and the head or tail of
# each side's output in DIR) and the count of passed or failed runs
run_result() {
	if [ -z "$2" ]; then
		RUN_PASSED=$((RUN_PASSED + 1))
		echo "ok $RUN_N - $1: $3"
		return
	fi
	RUN_FAILED=$((RUN_FAILED + 1))
	echo "not ok $RUN_N - $1: ${2#; }"
	for f in host.out host.err guest.out; do
		echo "#   == $f"
		grep -v '^softverbs: .* QP 0x' "$4/$f" | "$5" -n 25 | sed 's/^/#   /'
	done
}

# counters_line SV RXE: both sides' counters for the TAP line
counters_line() {
	local sv=$1 rxe=$2 k s='' r=''
	for k in tx_pkts rx_pkts retransmits timeouts duplicates naks_rx_seq naks_tx_seq naks_rx_rnr \
		naks_tx_rnr drops_icrc drops_malformed drops_no_qp drops_out_of_window faults_dropped \
		completions_errors; do
		s="$s $k=$(kv "$sv" $k)"
	done
	for k in sent_pkts rcvd_pkts completer_retry_err rcvd_seq_err out_of_seq_request \
		duplicate_request rcvd_rnr_err send_rnr_err retry_exceeded_err send_err; do
		r="$r $k=$(kv "$rxe" $k)"
	done
	echo "sv:$s; rxe:$r"
}

# one_run KIND DIR TOOL SIZE ITERS ARGS...: KIND pp (ibverbs-utils), bw or lat (perftest)
one_run() {
	local kind=$1 dir=$2 tool=$3 size=$4 iters=$5
	shift 5
	local name="$tool $dir -s $size -n $iters${*:+ $*}${FAULT:+ FAULT=$FAULT}"
	[ "$GID_MODE" = v4 ] || name="$name GID=$GID_MODE"
	[ -z "$ONLY" ] || [[ $name =~ $ONLY ]] || return 0
	RUN_N=$((RUN_N + 1))
	local d=$RUNS/$(printf '%02d' $RUN_N)-$tool-$dir
	local port=$((18515 + RUN_N)) hg gg gflag sopt hpid hrc grc why='' i job k ev early unexp sev late sunexp slow_exit=''
	[ -z "${RUN_FIRST:-}" ] || { port=$((port + 200)); d=$d-again; }
	mkdir -p "$d"
	hg=${HGID[$GID_MODE]} gg=${GGID[$GID_MODE]}
	gflag=-g sopt="-s $size"
	case $kind in pp | ops) ;; *) gflag=-x ;; esac
	[ "$kind" != pp ] && [ "$size" = all ] && sopt=-a
	local common="-p $port $gflag"
	local htool=$tool
	[ "$kind" = ops ] && htool=$IOP_HOST
	local hargs="$htool -d softverbs0 $common $hg $sopt -n $iters $*"
	local gargs="$tool -d rxe0 $common $gg $sopt -n $iters $*"
	case $kind in pp | ops) ;; *) hargs="$hargs -F" gargs="$gargs -F" ;; esac
	g_run 20 "$d/rxe.before" "$RXE_COUNTERS"
	mapfile -t env < <(host_env)
	local t0 t1 p0 p1
	p0=$(cpu_stall_us)
	t0=$(date +%s.%N)
	if [ "$dir" = sv-server ]; then
		# shellcheck disable=SC2086 # word splitting of the tool's arguments is intended
		ip netns exec "$NS" env -i "${env[@]}" timeout -s KILL "$RUN_LIMIT" $hargs \
			>"$d/host.out" 2>"$d/host.err" </dev/null &
		hpid=$!
		for ((i = 0; i < 100; i++)); do
			h_exec cat /proc/net/tcp /proc/net/tcp6 >"$d/tcp" 2>/dev/null
			listening_in "$d/tcp" "$port" && break
			kill -0 "$hpid" 2>/dev/null || break
			sleep 0.2
		done
		g_run "$RUN_LIMIT" "$d/guest.out" "$gargs $G_TO_H"
		grc=$G_RC
		if [ "$grc" != 0 ]; then # the server may wait for nothing now
			for ((i = 0; i < 100; i++)); do
				kill -0 "$hpid" 2>/dev/null || break
				sleep 0.1
			done
			kill "$hpid" 2>/dev/null
		fi
		{ wait "$hpid"; } 2>/dev/null
		hrc=$?
	else
		g_start "$RUN_LIMIT" "$gargs"
		job=$G_JOB
		for ((i = 0; i < 50; i++)); do
			g_run 10 "$d/tcp" "cat /proc/net/tcp /proc/net/tcp6"
			listening_in "$d/tcp" "$port" && break
			sleep 0.3
		done
		# shellcheck disable=SC2086
		ip netns exec "$NS" env -i "${env[@]}" timeout -s KILL "$RUN_LIMIT" $hargs "$H_TO_G" \
			>"$d/host.out" 2>"$d/host.err" </dev/null &
		hpid=$!
		{ wait "$hpid"; } 2>/dev/null
		hrc=$?
		i=$RUN_LIMIT
		[ "$hrc" = 0 ] || i=10 # the server may wait for nothing now
		[ "$hrc" != 0 ] || i=$EXIT_LIMIT
		g_wait "$job" "$i" "$d/guest.out"
		grc=$G_RC
		if [ "$grc" = 255 ] && [ "$hrc" = 0 ]; then
			# softverbs' side is done: rxe's should be too. Where is it?
			g_run 20 "$d/guest.stack" "for p in \$(pidof $tool); do echo \$p; cat /proc/\$p/wchan; echo; cat /proc/\$p/stack; done"
			slow_exit="the rxe side still ran ${EXIT_LIMIT} s after softverbs' side ended (killed; its kernel stack: $(tr '\n' ' ' <"$d/guest.stack" | cut -c1-300))"
		fi
		if [ "$grc" = 255 ]; then
			g_kill "$job"
			g_wait "$job" 10 "$d/guest.out"
			grc=$G_RC
		fi
	fi
	t1=$(date +%s.%N)
	p1=$(cpu_stall_us)
	echo "$t0 $t1" >"$d/window"
	g_run 20 "$d/rxe.after" "$RXE_COUNTERS"
	python3 "$(dirname "${BASH_SOURCE[0]}")/retrans.py" "$CAP" "$t0" "$t1" "$MIN_TIMER_MS" "${GADDR[$GID_MODE]}" "${HADDR[$GID_MODE]}" \
		>"$d/retrans" 2>&1
	rxe_delta "$d/rxe.before" "$d/rxe.after" >"$d/rxe.delta"
	sv_stats "$d/host.err" >"$d/sv.stats"
	local ss=$d/sv.stats rd=$d/rxe.delta hside=client gside=server cl=$d/host.out
	[ "$dir" = sv-server ] && { hside=server gside=client cl=$d/guest.out; }
	if [ "$kind" = ops ] && [ "$hrc" = 77 ] && [ "$grc" = 77 ]; then
		RUN_SKIPPED=$((RUN_SKIPPED + 1))
		echo "ok $RUN_N - $name # SKIP $(sed -n 's/^iop_rdma_ops: SKIP: //p' "$d/guest.out" | head -n 1)"
		return
	fi
	[ "$hrc" = 0 ] || why="$why; softverbs side exit $hrc"
	if [ -n "$slow_exit" ] && tool_ok "$kind" "$gside" "$d/guest.out" "$size" "$iters"; then
		grc=0 # its report is complete: only its exit hung (noted below)
	fi
	[ "$grc" = 0 ] || why="$why; rxe side exit $grc"
	local UD_RECV=''
	[[ " $* " == *" -c UD "* ]] && [ "$hside" = server ] && UD_RECV=1
	[ "$hrc" = 0 ] && ! tool_ok "$kind" "$hside" "$d/host.out" "$size" "$iters" && why="$why; no report from the softverbs side"
	UD_RECV=''
	[[ " $* " == *" -c UD "* ]] && [ "$gside" = server ] && UD_RECV=1
	[ "$grc" = 0 ] && ! tool_ok "$kind" "$gside" "$d/guest.out" "$size" "$iters" && why="$why; no report from the rxe side"
	local errs=0
	[ "$kind" = ops ] && errs=$(sed -n 's/^iop_rdma_ops: expected error completions: //p' "$d/host.out" | head -n 1)
	why="$why$(counters_ok "$ss" "$rd" "${errs:-0}")"
	if [ -z "$FAULT" ]; then
		for k in rcvd_seq_err out_of_seq_request; do
			[ "$(kv "$rd" $k)" -eq 0 ] || why="$why; rxe $k $(kv "$rd" $k) without fault injection"
		done
		for k in naks_rx_seq naks_tx_seq; do
			[ "$(kv "$ss" $k)" -eq 0 ] || why="$why; softverbs $k $(kv "$ss" $k) without fault injection"
		done
		read -r _ _ ev _ early _ unexp _ < <(grep '^rxe events' "$d/retrans")
		read -r _ _ sev _ late _ sunexp _ < <(grep '^softverbs events' "$d/retrans")
		if [ "${unexp:-?}" != 0 ] || [ "${sunexp:-?}" != 0 ]; then
			why="$why; retransmissions the capture does not explain ($d/retrans)"
		elif [ "$ev" -gt "$(kv "$rd" completer_retry_err)" ]; then
			why="$why; $ev rxe retransmission events on the wire, rxe counted $(kv "$rd" completer_retry_err)"
		elif [ "$(kv "$ss" retransmits)" != "$(kv "$ss" timeouts)" ] ||
			{ [ "$(kv "$ss" timeouts)" -gt 0 ] && [ "$sev" = 0 ]; } ||
			[ "$sev" -gt "$(($(kv "$ss" timeouts) + $(kv "$ss" probes)))" ]; then
			# each timeout resends from the oldest packet; each tail-loss
			# probe (docs/queue-pairs.md) resends that one packet. An event on
			# the wire is a run of resent packets, so a timeout or probe that
			# comes while the last one's packets still go out continues it:
			# every event must be a counted one, and counted ones must show
			why="$why; softverbs counted $(kv "$ss" retransmits) retransmits, $(kv "$ss" timeouts) timeouts and $(kv "$ss" probes) probes, $sev events on the wire"
		elif [ "${INTEROP_STRICT:-0}" = 1 ] && [ "$early$late" != 00 ]; then
			why="$why; retransmissions without fault injection (INTEROP_STRICT=1)"
		fi
	else
		local e
		e=$(expect_ok "$ss" "$rd") || why="$why; $e"
	fi
	local fig
	fig=$(figure "$kind" "$cl" "$size")
	[ "${early:-0}" = 0 ] || fig="$fig; rxe early retransmits $early in $ev events"
	[ "${late:-0}" = 0 ] || fig="$fig; softverbs timeouts $sev, $late packets resent, rxe late"
	[ -z "$slow_exit" ] || fig="$fig; $slow_exit"
	[ -z "${RUN_FIRST:-}" ] || fig="$fig; second attempt, the first failed: ${RUN_FIRST:-}"
	# perftest's cycle-counter calibration fails now and then in the emulated
	# guest ("Correlation coefficient r^2 ... < 0.9") and the tool then reports
	# zeros for a transfer that happened: such a run is tried once more, in
	# the full matrix too
	local retry=${INTEROP_RETRY:-0}
	grep -qs 'Correlation coefficient r^2' "$d/guest.out" "$d/host.out" && retry=1
	if [ -n "$why" ] && [ "$retry" = 1 ] && [ -z "${RUN_FIRST:-}" ]; then
		echo "# $name: failed (${why#; }; $fig); trying once more"
		for f in host.out host.err guest.out; do
			echo "#   == $f"
			grep -v '^softverbs: .* QP 0x' "$d/$f" | head -n 25 | sed 's/^/#   /'
		done
		echo "#   $(counters_line "$ss" "$rd")"
		RUN_N=$((RUN_N - 1))
		RUN_FIRST=${why#; } one_run "$kind" "$dir" "$tool" "$size" "$iters" "$@"
		return
	fi
	run_result "$name" "$why" "${fig:-?}" "$d" head
	echo "#   $(counters_line "$ss" "$rd"); host CPU pressure: runnable tasks waited $(((p1 - p0) / 1000)) ms of the run's $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", (b - a) * 1000 }') ms"
}
