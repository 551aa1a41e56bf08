#!/bin/sh
# SPDX-License-Identifier: MIT
# /agent of the interop guest: the command channel's guest end, started by
# /init with stdin and stdout on /dev/ttyS1 (the host's end is
# tests/interop/vm.sh). One request a line, one answer per request:
#   ID run SECS CMD     run CMD (sh -c) with a limit of SECS, wait for it
#   ID start SECS CMD   run CMD in the background, answer at once
#   ID wait JOB SECS    wait up to SECS for the background job JOB (the ID
#                       of its start request)
#   ID kill JOB         kill the background job JOB (SIGKILL)
#   ID exit             stop the agent (the guest then powers off)
# Every answer is the command's output (stdout and stderr), each line as
# "ID| LINE", then "@@ ID STATUS": the exit status, 124 or 137 when the
# limit killed it, "started" for start, 255 when wait ran out of time.
# Commands run with stdin from /dev/null, so they never read this channel.
stty raw -echo 2>/dev/null
echo "@@ 0 ready"
mkdir -p /tmp/agent
while read -r id verb a b; do
	o=/tmp/agent/$id
	case $verb in
	run)
		timeout -s KILL "$a" sh -c "$b" </dev/null >"$o.out" 2>&1
		rc=$?
		sed "s/^/$id| /" "$o.out"
		echo "@@ $id $rc"
		;;
	start)
		(
			# busybox timeout execs CMD in its own process: $! is CMD's
			timeout -s KILL "$a" sh -c "$b" </dev/null >"$o.out" 2>&1 &
			echo $! >"$o.pid"
			wait $!
			echo $? >"$o.tmp"
			mv "$o.tmp" "$o.rc"
		) &
		while [ ! -f "$o.pid" ]; do sleep 0.05; done
		echo "@@ $id started"
		;;
	wait)
		j=/tmp/agent/$a
		n=$((${b%% *} * 10))
		while [ ! -f "$j.rc" ] && [ $n -gt 0 ]; do
			sleep 0.1
			n=$((n - 1))
		done
		if [ -f "$j.rc" ]; then
			sed "s/^/$id| /" "$j.out"
			echo "@@ $id $(cat "$j.rc")"
		else
			echo "@@ $id 255"
		fi
		;;
	kill)
		kill -KILL "$(cat "/tmp/agent/$a.pid")" 2>/dev/null
		echo "@@ $id $?"
		;;
	exit)
		echo "@@ $id 0"
		exit 0
		;;
	*)
		echo "@@ $id 254"
		;;
	esac
done
