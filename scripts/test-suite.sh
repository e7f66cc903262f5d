#!/usr/bin/env bash
# test-suite.sh — run one suite of `make test` (a Go module's tests, the
# TypeScript client's) under a wall-clock limit, and record how it ended for
# scripts/test-summary.sh.
#
#   scripts/test-suite.sh NAME LIMIT SIGNAL -- COMMAND [ARG...]
#
#   NAME     the suite's name in the summary (ts, core, server, ...)
#   LIMIT    wall-clock limit of the whole suite, in timeout(1)'s syntax (14m)
#   SIGNAL   what the suite gets at the limit: QUIT for Go (every test binary
#            still running prints its goroutines, the running tests' names in
#            their stacks), TERM for node:test (its reporter names the tests
#            still running); whatever is left 30 s later is killed
#
# The limit is a backstop: go test's -timeout and node's --test-timeout stop
# a hung test first and name it. timeout(1) runs COMMAND in a process group
# of its own and signals all of it, so the cluster processes a test started
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

echo "== $name: $* (wall-clock limit $limit)"
start=$(date +%s)
# In the background so that the traps below run while it goes on; its
# output into the log when there is one.
if [ -n "$results" ]; then
	timeout --signal="$sig" --kill-after=30s "$limit" "$@" >>"$log" 2>&1 &
else
	timeout --signal="$sig" --kill-after=30s "$limit" "$@" &
fi
pid=$!
trap 'kill -INT "$pid" 2>/dev/null' INT
trap 'kill -TERM "$pid" 2>/dev/null' TERM HUP
# wait returns early (above 128) when a trapped signal arrives: wait again
# until timeout(1) itself has ended.
while :; do
	wait "$pid"
	rc=$?
	kill -0 "$pid" 2>/dev/null || break
done
trap - INT TERM HUP
secs=$(($(date +%s) - start))

[ -n "$results" ] && cat "$log"
case $rc in
0) outcome="ok" why="" ;;
124 | 137) outcome="FAIL" why="stopped at the wall-clock limit of $limit" ;;
*) outcome="FAIL" why="exit status $rc" ;;
esac
echo "== $name: $outcome in ${secs}s${why:+ ($why)}"
[ -n "$results" ] && echo "$name $outcome $secs $why" >"$results/$name"
exit "$rc"
