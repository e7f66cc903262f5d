#!/usr/bin/env bash
# test-suite.sh — run one suite of `make test` (a Go module's tests, the
# TypeScript client's) under a wall-clock limit, and record how it ended for
# scripts/test-summary.sh.
#
#   scripts/test-suite.sh NAME LIMIT SIGNAL -- COMMAND [ARG...]
#
#   NAME     the suite's name in the summary (ts, core, server, ...)
#   LIMIT    wall-clock limit of the whole suite, in timeout(1)'s syntax (14m)
#   SIGNAL   what the suite gets at the limit: QUIT for Go (sent to the test
#            binaries still running, not to the go command: each prints its
#            goroutines, the running tests' names in their stacks, and go
#            prints that output; the rest of the suite gets TERM 15 s later),
#            TERM for node:test (its reporter names the tests still running);
#            whatever is left 30 s after TERM is killed
#
# The limit is a backstop: go test's -timeout and node's --test-timeout stop
# a hung test first and name it. COMMAND runs as a process group of its own,
# and the limit signals all of it, so the cluster processes a test started
# go too; Ctrl-C (SIGINT) and SIGTERM are passed on to that group.
#
# $TEST_RESULTS, when set, is a directory: the suite's output goes to
# $TEST_RESULTS/NAME.log and is printed once the suite ends (so `make -j
# --output-sync` keeps it whole), and $TEST_RESULTS/NAME gets one line,
# "NAME ok|FAIL SECONDS [why]".
#
# Exit status: COMMAND's; 124 when the wall-clock limit stopped it.
set -u

if [ $# -lt 5 ] || [ "$4" != "--" ]; then
	echo "usage: $0 NAME LIMIT SIGNAL -- COMMAND [ARG...]" >&2
	exit 2
fi
name=$1 limit=$2 sig=$3
shift 4

results=${TEST_RESULTS:-}
log=/dev/stdout
if [ -n "$results" ]; then
	log=$results/$name.log
	: >"$log"
fi

# seconds converts a duration in timeout(1)'s syntax (90, 90s, 14m, 1h) to seconds.
seconds() {
	case $1 in
	*s) echo "${1%s}" ;;
	*m) echo $((${1%m} * 60)) ;;
	*h) echo $((${1%h} * 3600)) ;;
	*) echo "$1" ;;
	esac
}
limit_s=$(seconds "$limit")
marker=$(mktemp "${TMPDIR:-/tmp}/ticketd-suite.XXXXXX")
trap 'rm -f "$marker"' EXIT

echo "== $name: $* (wall-clock limit $limit)"
start=$(date +%s)
# With job control on, the command starts as a process group of its own
# (its id is its pid), which the limit and the traps signal as a whole.
set -m
if [ -n "$results" ]; then
	"$@" >>"$log" 2>&1 &
else
	"$@" &
fi
pgid=$!
set +m

# gotests prints the pids of the Go test binaries (*.test) in the group.
gotests() {
	ps -e -o pid= -o pgid= -o args= | awk -v g="$pgid" '$2 == g && $3 ~ /\.test$/ { print $1 }'
}

# The watchdog: at the limit, QUIT to the Go test binaries (if SIGNAL is
# QUIT) or TERM to the group; TERM 15 s after a QUIT; KILL 30 s after TERM.
(
	trap 'kill "$napping" 2>/dev/null; exit 0' TERM
	napping=""
	# nap sleeps $1 seconds in a way the TERM trap can cut short.
	nap() {
		sleep "$1" &
		napping=$!
		wait "$napping"
	}
	nap "$limit_s"
	# Name the test binaries still running: a binary stuck where its own
	# -timeout cannot fire (a thread waiting in the kernel, e.g. on a FUSE
	# request its own process would serve) prints nothing when signalled.
	running=$(ps -o args= -p "$(gotests | paste -sd, -)" 2>/dev/null | awk '{ n = split($1, p, "/"); printf "%s%s", sep, p[n]; sep = " " }')
	echo "wall-clock limit of $limit${running:+; still running: $running}" >"$marker"
	echo "== $name: wall-clock limit of $limit reached${running:+ with $running still running}: signalling the suite" >>"${log}"
	if [ "$sig" = QUIT ]; then
		# shellcheck disable=SC2046 # one pid a word
		kill -QUIT $(gotests) 2>/dev/null
		nap 15
	fi
	kill -TERM -- "-$pgid" 2>/dev/null
	nap 30
	kill -KILL -- "-$pgid" 2>/dev/null
) &
watchdog=$!

trap 'kill -INT -- "-$pgid" 2>/dev/null' INT
trap 'kill -TERM -- "-$pgid" 2>/dev/null' TERM HUP
# wait returns early (above 128) when a trapped signal arrives: wait again
# until the command itself has ended.
while :; do
	wait "$pgid"
	rc=$?
	kill -0 "$pgid" 2>/dev/null || break
done
trap - INT TERM HUP
kill -TERM "$watchdog" 2>/dev/null
wait "$watchdog" 2>/dev/null
# A test's process left in the group (its parent gone) goes too.
kill -KILL -- "-$pgid" 2>/dev/null
secs=$(($(date +%s) - start))
[ -s "$marker" ] && rc=124

[ -n "$results" ] && cat "$log"
case $rc in
0) outcome="ok" why="" ;;
124) outcome="FAIL" why="stopped at the $(cat "$marker")" ;;
*) outcome="FAIL" why="exit status $rc" ;;
esac
echo "== $name: $outcome in ${secs}s${why:+ ($why)}"
[ -n "$results" ] && echo "$name $outcome $secs $why" >"$results/$name"
exit "$rc"
