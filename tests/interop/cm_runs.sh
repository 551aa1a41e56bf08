# SPDX-License-Identifier: MIT
# tests/interop/cm_runs.sh: sourced by tests/interop/interop.sh (bash), after runs.sh.
#
# One rdma_cm interop run: an unmodified Debian rdma_cm program (rdmacm-utils'
# rping, ucmatose, udaddy; perftest -R) with one side on softverbs'
# librdmacm.so.1 and libibverbs.so.1 (a host process in the namespace,
# LD_LIBRARY_PATH=$SV_LIB, SOFTVERBS_ADDR=the tap address, SOFTVERBS_STATS=1)
# and the other on the kernel's rdma_cm (rdma_ucm) over rxe0 in the guest,
# Debian's own librdmacm1. The connection is made by the IB CM MADs on QP 1
# of both devices, so these runs are what tests the CM on the wire.
#
# cm_run NAME DIR "SERVER ARGS" "CLIENT ARGS" CLIENT-PATTERN SERVER-PATTERN [LINES]
#   DIR sv-server or sv-client, as in runs.sh. In the arguments @S@ is the
#   server's address and @D@ the device of the side that runs them. The
#   server starts first; there is no port to watch for an rdma_cm listener,
#   so the client is started again (up to 5 times) while it is rejected
#   for want of a listener (REJ 8, "Connection refused"). A run passes
#   when both sides exit 0, the client's output matches CLIENT-PATTERN
#   and the server's SERVER-PATTERN (empty: not checked), LINES (if given)
#   is "PATTERN COUNT" and the client printed exactly COUNT lines matching
#   PATTERN, softverbs printed its counters with no ICRC drop and no error
#   completion, and rxe's hw_counters show no retry_exceeded_err or
#   send_err. With CM_PCAP=FILE, the run's CM MADs (UDP to port 4791 with
#   destination QP 1) are written whole to FILE (how tests/data/rxe_cm.pcap
#   was made).

# cm_listening_h: the host side's device is up (a UDP socket on H4:4791)
cm_listening_h() {
	local hex
	hex=$(echo "$H4" | awk -F. '{ printf "%02X%02X%02X%02X:12B7", $4, $3, $2, $1 }')
	h_exec cat /proc/net/udp | awk -v a="$hex" '$2 == a { f = 1 } END { exit !f }'
}

# cm_rejected FILE...: a client's output says no one listened (yet)
cm_rejected() {
	grep -qsE 'REJECTED(;|,) error:? 8|Connection refused' "$@"
}

# cm_pair_again TOOL: perftest -R connects twice, its control connection,
# then the test's, whose REQ follows the first RTU at once and is rejected
# (REJ 8) when the server has not yet listened again: a client started
# again alone would hand its control REQ to the server's second listener
# and both would wait for ever, so the whole pair goes again
cm_pair_again() {
	case $1 in *' -R'*) return 0 ;; esac
	return 1
}

cm_run() {
	local name="$1 $2" dir=$2 sargs=$3 cargs=$4 cpat=$5 spat=$6 lines=${7:-}
	[ -z "$ONLY" ] || [[ $name =~ $ONLY ]] || return 0
	RUN_N=$((RUN_N + 1))
	local d=$RUNS/$(printf '%02d' $RUN_N)-cm-${1%% *}-$dir
	local why='' hrc grc hpid job i c srv hcmd gcmd cap='' sfile cfile
	mkdir -p "$d"
	GID_MODE=v4
	mapfile -t env < <(host_env)
	if [ -n "${CM_PCAP:-}" ]; then
		ip netns exec "$NS" tcpdump -i "$TAP" -U --immediate-mode -Z root -s 0 -w "$d/cm.pcap" \
			'udp dst port 4791 and (udp[12:4] & 0x00ffffff) = 1' 2>"$d/cm-tcpdump.log" &
		cap=$!
		for ((i = 0; i < 50; i++)); do
			grep -qs listening "$d/cm-tcpdump.log" && break
			sleep 0.1
		done
	fi
	g_run 20 "$d/rxe.before" "$RXE_COUNTERS"
	if [ "$dir" = sv-server ]; then
		srv=$H4
		hcmd=$(echo "$sargs" | sed "s/@S@/$srv/g; s/@D@/softverbs0/g")
		gcmd=$(echo "$cargs" | sed "s/@S@/$srv/g; s/@D@/rxe0/g")
		for ((a = 1; a <= 4; a++)); do
			# shellcheck disable=SC2086 # word splitting of the tool's arguments is intended
			ip netns exec "$NS" env -i "${env[@]}" timeout -s KILL "$RUN_LIMIT" $hcmd \
				>"$d/host.out" 2>"$d/host.err" </dev/null &
			hpid=$!
			for ((i = 0; i < 100; i++)); do
				cm_listening_h && break
				kill -0 "$hpid" 2>/dev/null || break
				sleep 0.2
			done
			sleep 1 # from the device's open to rdma_listen
			for ((c = 1; c <= 5; c++)); do
				g_run "$RUN_LIMIT" "$d/guest.out" "$gcmd"
				grc=$G_RC
				[ "$grc" != 0 ] && kill -0 "$hpid" 2>/dev/null && cm_rejected "$d/guest.out" || break
				cm_pair_again "$1" && break
				sleep 1
			done
			if [ "$grc" != 0 ] && [ $a -lt 4 ] && cm_pair_again "$1" && cm_rejected "$d/guest.out"; then
				kill "$hpid" 2>/dev/null
				{ wait "$hpid"; } 2>/dev/null
				echo "# $name: the client was rejected after perftest's control connection; the pair again"
				sleep 2
				continue
			fi
			break
		done
		# the server's last words come after the client's exit (up to 10 s)
		hrc=0
		timeout 10 tail --pid="$hpid" -f /dev/null || { kill "$hpid" 2>/dev/null; hrc=143; }
		{ wait "$hpid"; } 2>/dev/null || hrc=$?
		sfile=$d/host.out cfile=$d/guest.out
	else
		srv=$G4
		gcmd=$(echo "$sargs" | sed "s/@S@/$srv/g; s/@D@/rxe0/g")
		hcmd=$(echo "$cargs" | sed "s/@S@/$srv/g; s/@D@/softverbs0/g")
		for ((a = 1; a <= 4; a++)); do
			g_start "$RUN_LIMIT" "$gcmd"
			job=$G_JOB
			sleep 3 # the emulated guest: from exec to rdma_listen
			for ((c = 1; c <= 5; c++)); do
				# shellcheck disable=SC2086
				ip netns exec "$NS" env -i "${env[@]}" timeout -s KILL "$RUN_LIMIT" $hcmd \
					>"$d/host.out" 2>"$d/host.err" </dev/null
				hrc=$?
				[ "$hrc" != 0 ] && cm_rejected "$d/host.out" "$d/host.err" || break
				cat "$d/host.out" "$d/host.err" >>"$d/host.rejected"
				cm_pair_again "$1" && break
				sleep 2
			done
			i=$RUN_LIMIT
			[ "$hrc" = 0 ] || i=10
			if [ "$hrc" != 0 ] && [ $a -lt 4 ] && cm_pair_again "$1" && cm_rejected "$d/host.out" "$d/host.err"; then
				g_kill "$job"
				g_wait "$job" 10 "$d/guest.out"
				echo "# $name: the client was rejected after perftest's control connection; the pair again"
				sleep 2
				continue
			fi
			break
		done
		g_finish "$job" "$i" "$d/guest.out"
		grc=$G_RC
		sfile=$d/guest.out cfile=$d/host.out
	fi
	g_run 20 "$d/rxe.after" "$RXE_COUNTERS"
	if [ -n "$cap" ]; then
		sleep 1
		kill -INT "$cap" 2>/dev/null
		wait "$cap" 2>/dev/null
		if [ -s "$CM_PCAP" ]; then # the runs of one session, one after the other
			mergecap -F pcap -a -w "$CM_PCAP.tmp" "$CM_PCAP" "$d/cm.pcap" && mv "$CM_PCAP.tmp" "$CM_PCAP"
		else
			cp "$d/cm.pcap" "$CM_PCAP"
		fi
	fi
	rxe_delta "$d/rxe.before" "$d/rxe.after" >"$d/rxe.delta"
	sv_stats "$d/host.err" >"$d/sv.stats"
	local ss=$d/sv.stats rd=$d/rxe.delta
	[ "$hrc" = 0 ] || why="$why; softverbs side exit $hrc"
	[ "$grc" = 0 ] || why="$why; rxe side exit $grc"
	[ -z "$cpat" ] || grep -Eq -- "$cpat" "$cfile" || why="$why; client: no '$cpat'"
	[ -z "$spat" ] || grep -Eq -- "$spat" "$sfile" || why="$why; server: no '$spat'"
	if [ -n "$lines" ]; then
		local n
		n=$(grep -Ec -- "${lines% *}" "$cfile")
		[ "$n" = "${lines##* }" ] || why="$why; client: $n lines '${lines% *}', not ${lines##* }"
	fi
	why="$why$(counters_ok "$ss" "$rd")"
	run_result "$name" "$why" "$(grep -E -- "${cpat:-.}" "$cfile" | tail -n 1 | tr -s ' \t' ' ')" "$d" tail
	echo "#   $(counters_line "$ss" "$rd")"
}

# cm_both NAME "SERVER ARGS" "CLIENT ARGS" CLIENT-PATTERN SERVER-PATTERN [LINES]
cm_both() {
	cm_run "$1" sv-server "${@:2}"
	cm_run "$1" sv-client "${@:2}"
}

# cm_matrix: the rdma_cm runs of the full matrix (QUICK=1: rping only)
cm_matrix() {
	cm_both "rping -v -C 20" "rping -s -a @S@ -v -C 20" "rping -c -a @S@ -v -V -C 20" \
		'rdma-ping-19: ' '' '^ping data: rdma-ping- 20'
	[ "${QUICK:-0}" = 1 ] && return 0
	cm_both "ucmatose -c 2" "ucmatose -b @S@ -c 2 -C 10 -S 1000" \
		"ucmatose -s @S@ -c 2 -C 10 -S 1000" '^return status 0' '^return status 0'
	cm_both "udaddy -c 2" "udaddy -b @S@ -c 2 -C 10" "udaddy -s @S@ -c 2 -C 10" \
		'^return status 0' '^return status 0'
	cm_both "ib_write_bw -R" "ib_write_bw -R -d @D@ -F -n 500" \
		"ib_write_bw -R -d @D@ -F -n 500 @S@" '^ 65536 +500 ' ''
}
