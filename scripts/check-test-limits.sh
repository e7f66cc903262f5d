#!/usr/bin/env bash
# check-test-limits.sh — show that `make test` cannot hang: runs `make test`
# on two suites, sdk (Go) and ts (TypeScript), with TICKETD_TEST_HANG=1,
# which turns on a test in each that hangs on purpose on a real cluster
# (sdk/ticketdtest/hang_test.go, sdk/ts/test/hang.test.mjs), under short
# limits, twice:
#
#   1. the per-test limits (go test -timeout, node --test-timeout) hit first;
#   2. those are long and the wall-clock limit of each suite hits first.
#
# Each time it checks that `make test` fails, within the limit plus the time
# to build, that its summary names the hung test of each suite, and that no
# node of the hung tests' clusters is left running. `make test-limits` runs
# it; it takes a few minutes. Exit status 1 when a check failed.
set -u
cd "$(dirname "$0")/.."

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ticketd-limits.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failed=0

# ok and bad print one check's outcome.
ok() { echo "check-test-limits: ok: $*"; }
bad() {
	echo "check-test-limits: FAILED: $*"
	failed=1
}

# alive prints the process ids of file $1 whose process still runs (not a zombie).
alive() {
	[ -s "$1" ] || return 0
	while read -r pid; do
		st=$(ps -o stat= -p "$pid" 2>/dev/null) || continue
		case $st in Z*) ;; *) echo "$pid" ;; esac
	done <"$1"
}

# run CASE MAX_SECONDS MAKE_ARGS...: make test on the two suites with the
# hanging tests on; checks its outcome.
run() {
	local name=$1 max=$2
	shift 2
	local out=$tmp/$name.out
	rm -f "$tmp"/*.pids
	echo "check-test-limits: $name: make test $* (at most ${max}s)"
	local start=$SECONDS
	TICKETD_TEST_HANG=1 TICKETD_TEST_HANG_PIDS_DIR=$tmp \
		make --no-print-directory test TEST_SUITES="sdk ts" GOTESTFLAGS=-run=TestHangsWhenAsked \
		TS_TESTS=test/hang.test.mjs "$@" >"$out" 2>&1
	local rc=$? secs=$((SECONDS - start))
	sed -n '/^== summary/,$p' "$out" | sed 's/^/    /'
	[ "$rc" -ne 0 ] && ok "$name: make test failed (exit $rc)" || bad "$name: make test passed"
	[ "$secs" -le "$max" ] && ok "$name: it ended after ${secs}s" || bad "$name: it took ${secs}s, more than ${max}s"
	local summary
	summary=$(sed -n '/^== summary/,$p' "$out")
	grep -q 'TestHangsWhenAsked' <<<"$summary" && ok "$name: the summary names the hung Go test" ||
		bad "$name: the summary does not name TestHangsWhenAsked (output in $out)"
	grep -q 'hangs_when_asked' <<<"$summary" && ok "$name: the summary names the hung TypeScript test" ||
		bad "$name: the summary does not name hangs_when_asked (output in $out)"
	for f in "$tmp"/go.pids "$tmp"/ts.pids; do
		if [ ! -s "$f" ]; then
			bad "$name: no cluster pids in $f: the hung test did not get to start its cluster"
		elif left=$(alive "$f") && [ -n "$left" ]; then
			bad "$name: nodes still running after the run: $(echo $left) ($f)"
			kill -9 $left 2>/dev/null
		else
			ok "$name: every node of the hung test's cluster is gone ($(basename "$f"))"
		fi
	done
	if [ "$failed" -ne 0 ]; then
		cp "$out" "${TMPDIR:-/tmp}/ticketd-limits-$name.out"
		echo "check-test-limits: $name: full output in ${TMPDIR:-/tmp}/ticketd-limits-$name.out"
	fi
}

# Build everything the runs need first, so the limits below are not spent
# compiling: the binaries, the TypeScript client, the sdk module's tests.
make --no-print-directory build build-tools ts-deps >/dev/null || exit 1
(cd sdk/ts && npx tsc -p tsconfig.json) || exit 1
go -C sdk test -count=1 -run '^$' ./... >/dev/null || exit 1

# 1. go test -timeout 60s and node --test-timeout 30 s stop the hung tests.
run per-test 240 TEST_TIMEOUT=60s TS_TEST_TIMEOUT_MS=30000
# 2. The per-test limits are far off; each suite's 90 s wall-clock limit
#    (then SIGKILL 30 s later at most) stops it.
run wall-clock 240 TEST_TIMEOUT=10m TS_TEST_TIMEOUT_MS=600000 TEST_WALL=90s

[ "$failed" -eq 0 ] && echo "check-test-limits: every check passed" || echo "check-test-limits: some checks FAILED"
exit "$failed"
