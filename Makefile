# leasehold: `make run` starts the server, `make test` runs every test.
# Both install what they need on a fresh Debian machine.

GO        ?= go
BIN       := bin/leasehold
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
ARGS      ?=
FUZZTIME  ?= 30s
# Debian packages the tests and benchmarks run against.
REDIS_PKGS := redis-tools redis-server
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all build run test deps vet fmt-check fuzz bench bench-quick docs clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) .

## run: build and start the server on 127.0.0.1:7379 (pass flags with ARGS="--addr ...").
run: build
	./$(BIN) serve $(ARGS)

## deps: Go modules, and redis-cli / redis-benchmark / redis-server from Debian when missing.
deps:
	$(GO) mod download
	@if ! command -v redis-cli >/dev/null || ! command -v redis-benchmark >/dev/null || ! command -v redis-server >/dev/null; then \
		echo "installing $(REDIS_PKGS) with apt-get"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(REDIS_PKGS); \
	fi
	@command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null && command -v redis-server >/dev/null

## test: formatting, vet, and every test under the race detector (fuzz seeds included).
test: deps fmt-check vet
	$(GO) test -race -count=1 -timeout 10m ./...
	@echo "server tests again over the goroutine-per-connection transport:"
	LEASEHOLD_TEST_IO_LOOPS=0 $(GO) test -race -count=1 -timeout 10m ./server
	LEASEHOLD_TEST_IO_LOOPS=2 $(GO) test -race -count=1 -timeout 10m ./server

fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

## fuzz: run the fuzz targets for FUZZTIME each.
fuzz:
	$(GO) test ./protocol -run '^$$' -fuzz '^FuzzReader$$' -fuzztime $(FUZZTIME)
	$(GO) test ./protocol -run '^$$' -fuzz '^FuzzReaderRoundTrip$$' -fuzztime $(FUZZTIME)
	$(GO) test ./protocol -run '^$$' -fuzz '^FuzzParseMAcquire$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/glob -run '^$$' -fuzz '^FuzzMatch$$' -fuzztime $(FUZZTIME)

## bench: Go benchmarks of the lock table, the RESP reader, the server's hot
## path and the hand-off of a lock to a waiter (p50/p99), then leasehold
## side by side with Redis (scripts/bench.sh; ROUNDS=3, about 10 minutes).
## Results in bench-results/; see docs/performance.md.
bench: deps
	$(GO) test -run '^$$' -bench . -benchmem ./locker ./protocol ./internal/glob ./server
	bash scripts/bench.sh

## bench-quick: the side-by-side run with small counts, a smoke test (< 1 minute).
.PHONY: bench-quick
bench-quick: deps
	QUICK=1 bash scripts/bench.sh

## docs: refresh the generated tables in docs/commands.md.
docs:
	$(GO) run ./scripts/gendocs docs/commands.md

clean:
	rm -rf bin
