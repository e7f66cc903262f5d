# ticketd — see README.md. Every module of go.work is tested on its own:
# `go test ./...` at a go.work root with no root module does not work.
MODULES := core backends server sdk bench faults
GO      ?= go
# Empty BACKEND: the backend the data dir was made with, else hashicorp.
BACKEND ?=
# Test timeout per module; the whole `make test` is kept under 10 minutes on 2 cores.
TEST_TIMEOUT ?= 8m
DURATION ?= 30m

.PHONY: all build run test bench faults generate lint tidy clean

all: build

build:
	mkdir -p bin
	$(GO) build -o bin/ ./server/cmd/ticketd ./server/cmd/ticketctl

## run: start a local three-node cluster (data under ./data, API on 127.0.0.1:7001-7003).
run: build
	BACKEND=$(BACKEND) ./scripts/cluster.sh

## test: every test that needs no extra machine (the faults module's short
## fault-injection run per backend included, behind its build tag).
test: build
	@set -e; for m in $(MODULES); do \
		[ -f $$m/go.mod ] || continue; \
		tags=; [ $$m = faults ] && tags="-tags faults"; \
		echo "== go test $$tags ./$$m/..."; \
		(cd $$m && $(GO) test $$tags -count=1 -timeout $(TEST_TIMEOUT) ./...); \
	done

## bench: both backends side by side (see docs/benchmarks.md); BENCHFLAGS passes flags.
bench:
	$(GO) run ./bench/cmd/ticketbench $(BENCHFLAGS)

## faults: the long fault-injection run (DURATION=30m by default).
faults: build
	cd faults && $(GO) test -count=1 -tags faults -timeout 0 -run TestFaults ./harness -args -duration=$(DURATION)

## generate: regenerate protobuf and Connect code offline through `go tool`.
generate:
	$(GO) tool buf generate

lint:
	$(GO) tool buf lint
	@for m in $(MODULES); do [ -f $$m/go.mod ] || continue; (cd $$m && $(GO) vet ./...) || exit 1; done
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v /gen/ | grep -v /internal/corepb/))" || (gofmt -l . ; exit 1)

tidy:
	@for m in $(MODULES) tools; do [ -f $$m/go.mod ] || continue; (cd $$m && GOWORK=off $(GO) mod tidy) || exit 1; done

clean:
	rm -rf bin data
