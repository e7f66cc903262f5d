#!/usr/bin/env bash
# test-summary.sh — the end of `make test`: one line per suite (ok or FAIL,
# its seconds), then, for each failed suite, the lines of its output that
# name what failed, and an exit status of 1 when any suite failed or left
# no result (it did not run).
#
#   scripts/test-summary.sh RESULTS_DIR START_EPOCH SUITE...
#
# RESULTS_DIR is what scripts/test-suite.sh wrote into ($TEST_RESULTS);
# START_EPOCH the start of the run (date +%s), for the total.
#
# The lines kept from a failed suite's output: go test's "--- FAIL:" lines
# and failed packages, the tests a -timeout panic lists as running, the test
# functions in a goroutine dump (the wall-clock limit's SIGQUIT), and
# node:test's failed tests and files with what was running (test/running-reporter.mjs).
set -u

if [ $# -lt 3 ]; then
	echo "usage: $0 RESULTS_DIR START_EPOCH SUITE..." >&2
	exit 2
fi
dir=$1 start=$2
shift 2

# failures prints the lines of log $1 that name failed or running tests.
failures() {
	awk '
		/^panic: test timed out after/ { print; timedout = 1; next }
		timedout && /^running tests:/ { print; next }
		timedout && /^\t[^ ]/ { print; next }
		{ timedout = 0 }
		/^[ \t]*--- FAIL: / || /^FAIL[ \t]/ || /^FAIL$/ { print; next }
		/^[ \t]*✖ / && !/✖ failing tests:/ { print; next }
		/^SIGQUIT: quit/ { quit = 1 }
		quit && match($0, /\.Test[A-Za-z0-9_]+\(/) {
			fn = substr($0, RSTART + 1, RLENGTH - 2)
			if (!(fn in dumped)) { dumped[fn] = 1; print "running when stopped (goroutine dump): " fn }
		}
	' "$1" | awk '!seen[$0]++' | head -n 40
}

echo
echo "== summary"
failed=0
for s in "$@"; do
	if [ -f "$dir/$s" ]; then
		read -r name outcome secs why <"$dir/$s"
		printf '  %-10s %-4s %5ss%s\n' "$name" "$outcome" "$secs" "${why:+  ($why)}"
		[ "$outcome" = ok ] || failed=$((failed + 1))
	else
		printf '  %-10s %-4s %6s  (no result: it did not run to the end)\n' "$s" FAIL "-"
		failed=$((failed + 1))
	fi
done
echo "  $# suites, $failed failed, $(($(date +%s) - start))s in all"

for s in "$@"; do
	[ -f "$dir/$s" ] && read -r _ outcome _ <"$dir/$s" && [ "$outcome" = ok ] && continue
	echo
	echo "== $s failed:"
	lines=""
	[ -s "$dir/$s.log" ] && lines=$(failures "$dir/$s.log")
	if [ -n "$lines" ]; then
		echo "$lines" | sed 's/^/  /'
	else
		echo "  (its output, above, names no failed test)"
	fi
done
[ "$failed" -eq 0 ]
