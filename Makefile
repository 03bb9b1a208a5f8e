# leasehold: `make run` starts the server, `make test` runs every test.
# Both install what they need on a fresh Debian machine. `make help` lists
# the targets, from the `## target: text` lines below.

GO        ?= go
BIN       := bin/leasehold
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
ARGS      ?=
FUZZTIME  ?= 30s
# Debian packages the tests and benchmarks run against.
REDIS_PKGS := redis-tools redis-server
# The cluster benchmark's etcd (scripts/bench-cluster.sh).
ETCD_PKGS  := etcd-server
# The client examples (clients/python, clients/node) and scripts/leasehold.sh's
# tests: python3 with redis-py, node with npm.
PYTHON_PKGS := python3 python3-redis
NODE_PKGS   := nodejs npm
NODE_MODULES := clients/node/node_modules/.package-lock.json
# The Redis lock libraries clients/redislibs's tests run against leasehold.
REDISLIBS_NODE_MODULES := clients/redislibs/node/node_modules/.package-lock.json
# Debian's python3-redis is for Debian's python3: a python3 earlier on PATH
# (pyenv, a venv) may not see it. The tests try both, in this order.
HAVE_PY_REDIS := { python3 -c 'import redis' || /usr/bin/python3 -c 'import redis'; } 2>/dev/null
# PYTHON, when set, is the python3 `make example-python` runs.
PYTHON    ?=
# KEY, when set, is the lock `make example-python` takes.
KEY       ?=
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# staticcheck, run through the module proxy at a pinned version.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build run test deps vet fmt-check tidy-check lint help help-check example-python fuzz bench bench-quick bench-cluster bench-deps docs clean chaos

## all: the same as build.
all: build

## build: build bin/leasehold, stamped with the version from git describe.
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) .

## run: build and start the server on 127.0.0.1:7379 (pass flags with ARGS="--addr ...").
run: build
	./$(BIN) serve $(ARGS)

## deps: Go modules; from Debian when missing: redis-cli / redis-benchmark /
## redis-server, python3 with redis-py, zsh (its completion script's test),
## iproute2 (ip netns, for the chaos harness), systemd (systemd-analyze, for
## scripts/leasehold.service's test), chromium (the status page's browser
## test), node and npm, shellcheck; then the node client example's packages
## (npm ci in clients/node) and the Redis lock libraries that
## clients/redislibs's tests run (npm ci in clients/redislibs/node).
deps: $(NODE_MODULES) $(REDISLIBS_NODE_MODULES)
	$(GO) mod download
	@pkgs=""; \
	if ! command -v redis-cli >/dev/null || ! command -v redis-benchmark >/dev/null || ! command -v redis-server >/dev/null; then pkgs="$$pkgs $(REDIS_PKGS)"; fi; \
	if ! $(HAVE_PY_REDIS); then pkgs="$$pkgs $(PYTHON_PKGS)"; fi; \
	if ! command -v zsh >/dev/null; then pkgs="$$pkgs zsh"; fi; \
	if ! command -v ip >/dev/null; then pkgs="$$pkgs iproute2"; fi; \
	if ! command -v systemd-analyze >/dev/null; then pkgs="$$pkgs systemd"; fi; \
	if ! command -v chromium >/dev/null; then pkgs="$$pkgs chromium"; fi; \
	if [ -n "$$pkgs" ] || ! command -v shellcheck >/dev/null; then $(SUDO) apt-get update -qq || exit 1; fi; \
	if [ -n "$$pkgs" ]; then \
		echo "installing$$pkgs with apt-get"; \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$pkgs || exit 1; \
	fi; \
	if ! command -v shellcheck >/dev/null; then \
		echo "installing shellcheck with apt-get"; \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq shellcheck || \
			echo "shellcheck is not to be had from apt here: the lint of scripts/leasehold.sh will be skipped"; \
	fi
	@command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null && command -v redis-server >/dev/null
	@$(HAVE_PY_REDIS) || { echo "no python3 here imports redis (Debian's python3-redis)"; exit 1; }
	@command -v zsh >/dev/null
	@command -v systemd-analyze >/dev/null
	@command -v chromium >/dev/null

# node and npm from Debian when missing (a machine may have them from elsewhere:
# then they are used as they are), then the example's pinned packages.
$(NODE_MODULES): clients/node/package.json clients/node/package-lock.json
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		echo "installing $(NODE_PKGS) with apt-get"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(NODE_PKGS); \
	fi
	cd clients/node && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# node and npm come with $(NODE_MODULES) (the order-only prerequisite).
$(REDISLIBS_NODE_MODULES): clients/redislibs/node/package.json clients/redislibs/node/package-lock.json | $(NODE_MODULES)
	cd clients/redislibs/node && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The packages whose tests take longest, named first: go test starts
# packages in the order given (GOMAXPROCS at a time, two on a two-core
# machine), and in ./...'s alphabetical order the longest could start last
# and run alone at the end.
TEST_FIRST := ./locker ./server ./chaos ./command ./clients/... ./cluster
# Tests that time the server while an attack loads its process, on a 1 s
# lease: they run after the others, alone on the machine (a package of CPU-
# bound tests beside them, as the order above makes likely, could delay a
# renewal past its lease), once per transport.
TEST_ALONE := ^TestBystanderKeepsItsLeaseUnderAttack$$
# The event loops (LEASEHOLD_TEST_IO_LOOPS) of the server package's passes
# over the other transports: 0 is a goroutine per connection.
TEST_TRANSPORTS := 0 2
# -parallel 4: a package's t.Parallel tests, four at a time rather than
# GOMAXPROCS (two). They are the tests that mostly wait, on elections,
# timeouts and child processes, each on servers of its own; CPU-bound tests
# and those that time a lease tightly do not call t.Parallel.
TEST_FLAGS := -race -count=1 -timeout 10m -parallel 4

## test: formatting, go.mod tidiness, vet, staticcheck, this help, and every
## test under the race detector (fuzz seeds included; the chaos harness's
## short run, TestChaos in ./chaos, among them: it needs root and ip netns,
## skips without them, and fails without them under CI=true); then the
## server's transport tests (server/transport_test.go lists them) again over
## the goroutine-per-connection transport and over two event loops, the two
## passes side by side; last, alone, the tests that time the server under
## attack, once per transport.
test: deps fmt-check tidy-check vet lint help-check
	$(GO) test $(TEST_FLAGS) -skip '$(TEST_ALONE)' $(TEST_FIRST) ./...
	@echo "the server's transport tests again, over a goroutine per connection and over two event loops, side by side:"
	@$(MAKE) --no-print-directory -j2 --output-sync=target $(TEST_TRANSPORTS:%=test-transport-%)
	@echo "alone on the machine, once per transport: $(TEST_ALONE)"
	$(GO) test $(TEST_FLAGS) -run '$(TEST_ALONE)' ./server
	@for n in $(TEST_TRANSPORTS); do \
		echo "LEASEHOLD_TEST_IO_LOOPS=$$n LEASEHOLD_TEST_TRANSPORT_ONLY=1 $(GO) test $(TEST_FLAGS) -run '$(TEST_ALONE)' ./server"; \
		LEASEHOLD_TEST_IO_LOOPS=$$n LEASEHOLD_TEST_TRANSPORT_ONLY=1 $(GO) test $(TEST_FLAGS) -run '$(TEST_ALONE)' ./server || exit 1; \
	done

# One pass of make test over another transport, LEASEHOLD_TEST_IO_LOOPS=n,
# without the tests that must run alone: make test runs these two at once,
# each about 60% of a core over the pass. A static pattern rule, since make
# looks for no implicit rule for a .PHONY target (it would do nothing).
.PHONY: $(TEST_TRANSPORTS:%=test-transport-%)
$(TEST_TRANSPORTS:%=test-transport-%): test-transport-%:
	LEASEHOLD_TEST_IO_LOOPS=$* LEASEHOLD_TEST_TRANSPORT_ONLY=1 $(GO) test $(TEST_FLAGS) -skip '$(TEST_ALONE)' ./server

## fmt-check: fail when a Go file is not gofmt'ed.
fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## tidy-check: fail when go.mod or go.sum is not what `go mod tidy` makes of them.
tidy-check:
	@$(GO) mod tidy -diff || { echo "go.mod is not tidy: run go mod tidy"; exit 1; }

## vet: go vet over every package.
vet:
	$(GO) vet ./...
	$(GO) vet -tags leasehold_testclock ./command # the start clock's test hook

## lint: staticcheck over every package (fetched and built by go run, pinned).
lint:
	$(GO) run $(STATICCHECK) ./...
	$(GO) run $(STATICCHECK) -tags leasehold_testclock ./command

## help: list the targets and what they do.
help:
	@awk '/^## [a-z][a-z-]*:/ { sub(/^## /, ""); i = index($$0, ":"); \
		printf "  %-16s%s\n", substr($$0, 1, i - 1), substr($$0, i + 2); next } \
		/^## / { sub(/^## /, ""); printf "  %-16s%s\n", "", $$0 }' $(firstword $(MAKEFILE_LIST))

# help-check: make help runs, and lists every target of this Makefile.
help-check:
	@out=$$($(MAKE) -s --no-print-directory help) || exit 1; \
	for t in $$(sed -n 's/^\([a-z][a-z-]*\):\([^=]\|$$\).*/\1/p' $(firstword $(MAKEFILE_LIST)) | grep -vx help-check); do \
		printf '%s\n' "$$out" | grep -q "^  $$t " || { echo "make help does not list $$t: give it a '## $$t: ...' line"; exit 1; }; \
	done

## example-python: run clients/python/example.py (KEY=name for its lock) with
## a python3 that imports redis: PYTHON if set, else python3 from PATH, else
## Debian's /usr/bin/python3 (python3-redis is for that one; pyenv's or a
## venv's python3 may come first on PATH without redis-py).
example-python:
	@py="$(PYTHON)"; \
	if [ -z "$$py" ]; then \
		for p in python3 /usr/bin/python3; do \
			if command -v "$$p" >/dev/null && "$$p" -c 'import redis' 2>/dev/null; then py=$$p; break; fi; \
		done; \
	fi; \
	[ -n "$$py" ] || { echo "no python3 here imports redis: make deps installs Debian's python3-redis"; exit 1; }; \
	exec "$$py" clients/python/example.py $(KEY)

## fuzz: run the fuzz targets for FUZZTIME each.
fuzz:
	$(GO) test ./protocol -run '^$$' -fuzz '^FuzzReader$$' -fuzztime $(FUZZTIME)
	$(GO) test ./protocol -run '^$$' -fuzz '^FuzzReaderRoundTrip$$' -fuzztime $(FUZZTIME)
	$(GO) test ./protocol -run '^$$' -fuzz '^FuzzParseMAcquire$$' -fuzztime $(FUZZTIME)
	$(GO) test ./protocol -run '^$$' -fuzz '^FuzzPeekArgs$$' -fuzztime $(FUZZTIME)
	$(GO) test ./protocol -run '^$$' -fuzz '^FuzzLookaheadStream$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/glob -run '^$$' -fuzz '^FuzzMatch$$' -fuzztime $(FUZZTIME)
	$(GO) test ./lockfsm -run '^$$' -fuzz '^FuzzDecodeEntry$$' -fuzztime $(FUZZTIME)
	$(GO) test ./lockfsm -run '^$$' -fuzz '^FuzzDecodeResults$$' -fuzztime $(FUZZTIME)
	$(GO) test ./server -run '^$$' -fuzz '^FuzzCommands$$' -fuzztime $(FUZZTIME)

## bench: Go benchmarks of the lock table, the RESP reader, the server's hot
## path and the hand-off of a lock to a waiter (p50/p99), then leasehold
## side by side with Redis (scripts/bench.sh; ROUNDS=3, about 10 minutes),
## then the cluster section (bench-cluster). Results in bench-results/; see
## docs/performance.md.
bench: deps bench-deps
	$(GO) test -run '^$$' -bench . -benchmem ./locker ./persist ./protocol ./internal/glob ./server
	bash scripts/bench.sh
	bash scripts/bench-cluster.sh

## bench-cluster: a 3-node leasehold cluster side by side with a 3-node etcd
## and a single leasehold: lock cycles at -P 1 and -P 16, leader-kill
## failover (scripts/bench-cluster.sh; about 3 minutes).
bench-cluster: deps bench-deps
	bash scripts/bench-cluster.sh

## bench-deps: etcd from Debian when missing, for bench-cluster.
bench-deps:
	@if ! command -v etcd >/dev/null; then \
		echo "installing $(ETCD_PKGS) with apt-get"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(ETCD_PKGS); \
	fi
	@command -v etcd >/dev/null

## bench-quick: the side-by-side run with small counts, a smoke test (< 1 minute).
.PHONY: bench-quick
bench-quick: deps
	QUICK=1 bash scripts/bench.sh

# The long chaos run: how long, how many nodes, and more -chaos.* flags
# (go test ./chaos -args -h lists them).
CHAOS_DURATION ?= 5m
CHAOS_NODES    ?= 0
CHAOS_ARGS     ?=

## chaos: the fault-injection harness's long run (root, ip netns):
## CHAOS_DURATION (5m), CHAOS_NODES (0: 3 if the binary has serve --cluster,
## else 1; or 1, 3, 5), CHAOS_ARGS
## (-chaos.faults, -chaos.seed, -chaos.dir...). See docs/reliability.md.
chaos:
	$(GO) test -count=1 -timeout 60m -run '^TestChaos$$' -v ./chaos \
		-chaos.duration $(CHAOS_DURATION) -chaos.nodes $(CHAOS_NODES) $(CHAOS_ARGS)

## docs: refresh the generated tables in docs/commands.md.
docs:
	$(GO) run ./scripts/gendocs docs/commands.md

## clean: remove bin/.
clean:
	rm -rf bin
