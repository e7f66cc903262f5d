# ticketd — see README.md. Every module of go.work is tested on its own:
# `go test ./...` at a go.work root with no root module does not work.
MODULES := core backends server sdk bench faults deploy
GO      ?= go
# Empty BACKEND: the backend the data dir was made with, else hashicorp.
BACKEND ?=
# Empty LOG_STORE: the Raft log store the data dir was made with, else ticketd's default.
LOG_STORE ?=
# Limits that keep `make test` from hanging (scripts/check-test-limits.sh
# shows them at work): TEST_TIMEOUT is go test's -timeout, per test binary
# (its panic names the tests that were running); TS_TEST_TIMEOUT_MS is
# node:test's --test-timeout in milliseconds, per test and per test file
# (sdk/ts/test/running-reporter.mjs names the test that was running);
# TEST_WALL bounds each suite as a whole (scripts/test-suite.sh). The whole
# `make test` is kept under 15 minutes on 2 cores.
TEST_TIMEOUT ?= 8m
TS_TEST_TIMEOUT_MS ?= 240000
TEST_WALL ?= 14m
# GOTESTFLAGS: more go test flags for every module's suite (-run X, -v).
GOTESTFLAGS ?=
# TS_TESTS: the TypeScript test files to run instead of package.json's list.
TS_TESTS ?=
DURATION ?= 30m
# NET=hosts: `make faults` over network namespaces (faults/hosts) instead of loopback.
NET ?=

.PHONY: all build build-tools run node test test-stress test-limits check $(addprefix test-,$(MODULES)) test-ts test-browser $(addprefix suite-,ts $(MODULES)) ts-deps console bench faults faults-seeds faults-power generate lint tidy clean release

all: build

# VCS stamping: -buildvcs=true (over a GOFLAGS=-buildvcs=false) lets the
# toolchain record the revision; inside a linked git worktree or a tarball it
# cannot, so the revision is also passed with -X (server/buildinfo).
BUILDINFO := github.com/ticketd/ticketd/server/buildinfo
GIT_REVISION := $(shell git rev-parse HEAD 2>/dev/null)
GIT_VERSION  := $(shell git describe --tags --always 2>/dev/null)
GIT_MODIFIED := $(shell test -n "$$(git status --porcelain 2>/dev/null)" && echo true)
BUILD_LDFLAGS := -X $(BUILDINFO).revision=$(GIT_REVISION) -X $(BUILDINFO).modified=$(GIT_MODIFIED) $(if $(filter v%,$(GIT_VERSION)),-X main.version=$(GIT_VERSION))

build:
	mkdir -p bin
	$(GO) build -buildvcs=true -ldflags '$(BUILD_LDFLAGS)' -o bin/ ./server/cmd/ticketd ./server/cmd/ticketctl

## release: static binaries of ticketd and ticketctl (CGO_ENABLED=0,
## -trimpath, the VCS revision stamped by the go command, version from
## `git describe`) for RELEASE_PLATFORMS, as dist/<binary>-<os>-<arch>, and
## dist/SHA256SUMS (`cd dist && sha256sum -c SHA256SUMS`). DIST= elsewhere.
DIST ?= dist
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64
RELEASE_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
release:
	mkdir -p $(DIST) && rm -f $(DIST)/ticketd-* $(DIST)/ticketctl-* $(DIST)/SHA256SUMS
	@for p in $(RELEASE_PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; for b in ticketd ticketctl; do \
		echo "== $$b $$os/$$arch"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -buildvcs=auto \
			-ldflags "-s -w -X main.version=$(RELEASE_VERSION)" -o $(DIST)/$$b-$$os-$$arch ./server/cmd/$$b || exit 1; \
	done; done
	cd $(DIST) && sha256sum ticketd-* ticketctl-* > SHA256SUMS

## run: start a local three-node cluster (data under ./data, API on
## 127.0.0.1:7001-7003); a second run reuses ./data and says so. Ctrl-C:
## SIGTERM to every node, SIGKILL after STOP_TIMEOUT seconds (20).
run: build
	BACKEND=$(BACKEND) LOG_STORE=$(LOG_STORE) ./scripts/cluster.sh

## node: restart one node of the cluster `make run` started (make node N=n3):
## SIGTERM (leadership moves away), then the same command again, and wait
## until it answers /readyz 200: exit status 1 and the end of its log when it
## exits or is not ready within READY_TIMEOUT seconds (60).
N ?=
node: build
	@test -n "$(N)" || (echo "usage: make node N=n1|n2|n3" >&2; exit 2)
	BACKEND=$(BACKEND) LOG_STORE=$(LOG_STORE) ./scripts/cluster.sh restart $(N)

## test: every test that needs no extra machine, as suites: the TypeScript
## client's node tests (ts) and each module's Go tests (the faults module's
## short fault runs and network-namespace host scenarios included, behind its
## build tag), TEST_JOBS suites at a time, each under the limits above. Every
## suite runs even when another fails; a suite's output is printed whole when
## it ends, then a summary: each suite's ok or FAIL and seconds, and what
## failed. Exits 1 when any suite failed.
TEST_JOBS ?= 3
# The suites of `make test`: every module and ts, the longest first (so
# that they start first).
LONG_SUITES := server faults
TEST_SUITES ?= $(filter $(LONG_SUITES),$(MODULES)) ts $(filter-out $(LONG_SUITES),$(MODULES))
test: build build-tools ts-deps
	@results=$$(mktemp -d "$${TMPDIR:-/tmp}/ticketd-test.XXXXXX"); start=$$(date +%s); \
	TEST_RESULTS=$$results TICKETD_BIN=$(CURDIR)/bin/ticketd \
		$(MAKE) --no-print-directory -k -j$(TEST_JOBS) --output-sync=target $(addprefix suite-,$(TEST_SUITES)); \
	scripts/test-summary.sh "$$results" $$start $(TEST_SUITES); rc=$$?; rm -rf "$$results"; exit $$rc

## test-stress: `make test` with two busy CPU loops beside it (`yes >
## /dev/null` twice, killed when it ends), as on a loaded laptop or a shared
## CI runner.
test-stress:
	@yes >/dev/null & y1=$$!; yes >/dev/null & y2=$$!; \
	trap 'kill $$y1 $$y2 2>/dev/null' EXIT; trap 'exit 130' INT; trap 'exit 143' TERM HUP; \
	echo "== test-stress: busy loops pid $$y1 and $$y2 beside make test"; \
	$(MAKE) --no-print-directory test

## test-limits: show that the limits above stop a hung test and name it
## (scripts/check-test-limits.sh: a Go and a TypeScript test that hang on
## purpose, under short limits; a few minutes).
test-limits: build ts-deps
	scripts/check-test-limits.sh

# test-MODULE: one module's Go tests (test-server, test-faults, ...) as a suite.
$(addprefix test-,$(MODULES)): test-%: suite-%

# suite-MODULE, suite-ts: one suite under scripts/test-suite.sh, building
# nothing first (make test builds once before its suites run).
$(addprefix suite-,$(MODULES)): suite-%:
	@scripts/test-suite.sh $* $(TEST_WALL) QUIT -- $(GO) -C $* test $(if $(filter faults,$*),-tags faults) -count=1 -timeout $(TEST_TIMEOUT) $(GOTESTFLAGS) ./...
suite-ts:
	@TS_TEST_TIMEOUT_MS=$(TS_TEST_TIMEOUT_MS) $(if $(TS_TESTS),TS_TESTS='$(TS_TESTS)') \
		scripts/test-suite.sh ts $(TEST_WALL) TERM -- env -C $(TS) $(NPM) test

## build-tools: compile the Go tools the tests run (`go tool buf`, used by an
## e2e test), so that no test's time limit is spent compiling them.
build-tools:
	$(GO) tool buf --version >/dev/null

## check: the fast edit loop (a few minutes): unit tests only, with no real
## cluster processes, no e2e and no fault runs.
check:
	cd core && $(GO) test -count=1 ./...
	cd backends && $(GO) test -count=1 ./internal/... .
	cd server && $(GO) test -count=1 $$($(GO) list ./... | grep -v /e2e)
	cd sdk && $(GO) test -count=1 -short .
	cd faults && $(GO) test -count=1 ./check/... ./history/... ./nemesis/...

## ts-deps: sdk/ts's npm packages, exactly as package-lock.json pins them
## (`npm ci`, again whenever the lock file changes).
TS := sdk/ts
NPM ?= npm
ts-deps: $(TS)/node_modules/.package-lock.json
$(TS)/node_modules/.package-lock.json: $(TS)/package-lock.json
	cd $(TS) && $(NPM) ci --no-audit --no-fund --loglevel=error
	touch $@

## test-ts: the TypeScript client's tests (node:test) against a real
## three-node cluster of bin/ticketd, as the suite `ts` of make test.
test-ts: build ts-deps
	@$(MAKE) --no-print-directory suite-ts

## test-browser: headless Chromium (/usr/bin/chromium; CHROMIUM= overrides)
## loads the web console from one node and a page on another origin that
## uses @ticketd/client over Connect and gRPC-Web; screenshots go to
## sdk/ts/test-artifacts/. Also checks that server/console's built files are
## up to date.
test-browser: build ts-deps
	@TS_TEST_TIMEOUT_MS=$(TS_TEST_TIMEOUT_MS) scripts/test-suite.sh browser $(TEST_WALL) TERM -- env -C $(TS) $(NPM) run test:browser

## console: rebuild the web console's committed files (server/console/dist).
console: ts-deps
	cd $(TS) && $(NPM) run console

## bench: both backends side by side (see docs/benchmarks.md); BENCHFLAGS passes flags.
bench:
	$(GO) run ./bench/cmd/ticketbench $(BENCHFLAGS)

## faults: the long fault-injection run (DURATION=30m by default); NET=hosts
## runs it over one network namespace per node with real network faults
## (needs root and iproute2).
faults: build
ifneq ($(SEEDS),)
	$(MAKE) faults-seeds SEEDS=$(SEEDS) SEED_FROM=$(SEED_FROM) SEED_DURATION=$(SEED_DURATION) NET=$(NET)
else
	cd faults && $(if $(NET),TICKETD_BIN=$(CURDIR)/bin/ticketd )$(GO) test -count=1 -tags faults -timeout 0 -run TestFaults ./harness -args -duration=$(DURATION)$(if $(NET), -net=$(NET))
endif

## faults-seeds: SEEDS fault runs (seeds SEED_FROM.. on, default 1, SEED_DURATION each, both
## backends), disk faults included (a damaged log file, a full disk on tmpfs:
## needs root) or, with NET=hosts, over network namespaces with the network
## faults, unattended; one line per seed, then the count of failed
## seeds (reports of failing runs under $$TMPDIR/ticketd-faults-reports).
## `make faults SEEDS=100` runs it too.
SEEDS ?=
SEED_FROM ?= 1
SEED_DURATION ?= 20s
faults-seeds: build
	@cd faults && failed=0; start=$$(date +%s); for s in $$(seq $(SEED_FROM) $$(( $(SEED_FROM) + $(SEEDS) - 1 ))); do \
		t0=$$(date +%s); \
		if $(if $(NET),TICKETD_BIN=$(CURDIR)/bin/ticketd )$(GO) test -v -count=1 -tags faults -timeout 30m -run TestFaults ./harness -args -seed=$$s -duration=$(SEED_DURATION) $(if $(NET),-net=$(NET),-disk) > /tmp/ticketd-faults-seed-$$s.log 2>&1; \
		then r=ok; else r=FAIL; failed=$$((failed+1)); fi; \
		echo "seed $$s: $$r in $$(( $$(date +%s) - t0 ))s ($$(grep -ho 'summary: .*' /tmp/ticketd-faults-seed-$$s.log | tr '\n' ' ' | cut -c1-300))"; \
	done; echo "$(SEEDS) seeds, $$failed failed, $$(( $$(date +%s) - start ))s"; [ $$failed -eq 0 ]

## faults-power: power-loss runs (docs/faults.md#power-loss), unattended:
## SEEDS seeds (default 10) from SEED_FROM, POWER_DURATION of workload each
## (default 6s), every seed on both backends once per log store in
## POWER_STORES; the nodes' data dirs on a FUSE file system that drops
## every unsynced write at each power cut (faults/powerfs: needs root and
## /dev/fuse). Names are durable only through their directory's fsync
## (POSIX), except on badger, which does not sync its directory after a
## memtable flush: its runs count a name durable after any sync
## (-power-journal, as ext4 and XFS do); POWER_FLAGS_badger= and
## POWER_FLAGS_wal= override that, POWER_FLAGS adds flags to every run.
## ticketd and the test binary are built once. One line per seed and
## store, then the count of failed runs.
POWER_DURATION ?= 6s
POWER_STORES ?= badger wal
POWER_FLAGS ?=
POWER_FLAGS_badger ?= -power-journal
POWER_FLAGS_wal ?=
faults-power:
	@work=$$(mktemp -d "$${TMPDIR:-/tmp}/ticketd-faults-power.XXXXXX"); \
	$(GO) build -tags faults -o $$work/ticketd ./server/cmd/ticketd && \
	$(GO) -C faults test -c -tags faults -o $$work/harness.test ./harness || exit 1; \
	failed=0; runs=0; start=$$(date +%s); \
	for s in $$(seq $(SEED_FROM) $$(( $(SEED_FROM) + $(or $(SEEDS),10) - 1 ))); do for st in $(POWER_STORES); do \
		t0=$$(date +%s); runs=$$((runs+1)); log=$$work/seed-$$s-$$st.log; \
		case $$st in badger) f='$(POWER_FLAGS_badger)';; wal) f='$(POWER_FLAGS_wal)';; *) f=;; esac; \
		if (cd faults/harness && TICKETD_FAULTS_BIN=$$work/ticketd $$work/harness.test -test.v -test.count=1 -test.timeout=10m \
			-test.run='^TestFaults$$' -seed=$$s -duration=$(POWER_DURATION) -power -log-store=$$st $$f $(POWER_FLAGS) > $$log 2>&1); \
		then r=ok; else r=FAIL; failed=$$((failed+1)); fi; \
		echo "seed $$s $$st $$f: $$r in $$(( $$(date +%s) - t0 ))s ($$(grep -ho 'summary: .*' $$log | tr '\n' ' ' | cut -c1-600))"; \
	done; done; echo "$$runs runs, $$failed failed, $$(( $$(date +%s) - start ))s; logs in $$work"; [ $$failed -eq 0 ]

## generate: regenerate protobuf and Connect code offline through `go tool`
## (Go) and sdk/ts's pinned protoc-gen-es (TypeScript).
generate: ts-deps
	$(GO) tool buf generate

lint:
	$(GO) tool buf lint
	@for m in $(MODULES); do [ -f $$m/go.mod ] || continue; (cd $$m && $(GO) vet ./...) || exit 1; done
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v /gen/ | grep -v /internal/corepb/))" || (gofmt -l . ; exit 1)

tidy:
	@for m in $(MODULES) tools; do [ -f $$m/go.mod ] || continue; (cd $$m && GOWORK=off $(GO) mod tidy) || exit 1; done

## clean: remove bin/ and data/; refuses while a node that `make run` started
## on data/ is alive (scripts/clean.sh).
clean:
	./scripts/clean.sh
