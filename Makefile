# ticketd — see README.md. Every module of go.work is tested on its own:
# `go test ./...` at a go.work root with no root module does not work.
MODULES := core backends server sdk bench faults
GO      ?= go
# Empty BACKEND: the backend the data dir was made with, else hashicorp.
BACKEND ?=
# Empty LOG_STORE: the Raft log store the data dir was made with, else ticketd's default.
LOG_STORE ?=
# Test timeout per module; the whole `make test` is kept under 15 minutes on 2 cores.
TEST_TIMEOUT ?= 8m
DURATION ?= 30m
# NET=hosts: `make faults` over network namespaces (faults/hosts) instead of loopback.
NET ?=

.PHONY: all build run node test check $(addprefix test-,$(MODULES)) test-ts test-browser ts-deps console bench faults faults-seeds generate lint tidy clean

all: build

build:
	mkdir -p bin
	$(GO) build -o bin/ ./server/cmd/ticketd ./server/cmd/ticketctl

## run: start a local three-node cluster (data under ./data, API on 127.0.0.1:7001-7003).
run: build
	BACKEND=$(BACKEND) LOG_STORE=$(LOG_STORE) ./scripts/cluster.sh

## node: restart one node of the cluster `make run` started (make node N=n3):
## SIGTERM (leadership moves away), then the same command again.
N ?=
node: build
	@test -n "$(N)" || (echo "usage: make node N=n1|n2|n3" >&2; exit 2)
	BACKEND=$(BACKEND) LOG_STORE=$(LOG_STORE) ./scripts/cluster.sh restart $(N)

## test: every test that needs no extra machine: the TypeScript client's node
## tests, then every module's Go tests (the faults module's short fault runs and
## network-namespace host scenarios included, behind its build tag), TEST_JOBS
## modules at a time; each module's output is printed whole when it ends.
TEST_JOBS ?= 3
test: build test-ts
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target $(addprefix test-,$(MODULES))

# test-MODULE: one module's Go tests (test-server, test-faults, ...).
$(addprefix test-,$(MODULES)): test-%:
	@echo "== go test $(if $(filter faults,$*),-tags faults )./$*/..."
	@cd $* && $(GO) test $(if $(filter faults,$*),-tags faults) -count=1 -timeout $(TEST_TIMEOUT) ./...

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
## three-node cluster of bin/ticketd.
test-ts: build ts-deps
	cd $(TS) && $(NPM) test

## test-browser: headless Chromium (/usr/bin/chromium; CHROMIUM= overrides)
## loads the web console from one node and a page on another origin that
## uses @ticketd/client over Connect and gRPC-Web; screenshots go to
## sdk/ts/test-artifacts/. Also checks that server/console's built files are
## up to date.
test-browser: build ts-deps
	cd $(TS) && $(NPM) run test:browser

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

clean:
	rm -rf bin data
