# Waymark. `make help` lists the targets.
SHELL := bash
CARGO ?= cargo
BUF_VERSION := 1.75.0
TOOLS := .tools
BUF := $(TOOLS)/node_modules/.bin/buf
# SDKs in other languages, under sdk-clients/, each with a Makefile of its own (deps, proto,
# check-proto, lint, test); their dependencies come from their registries.
SDKS := python go typescript
# The polyglot example's programs (sdk-clients/examples/polyglot), which its end-to-end test
# (integration-tests/tests/polyglot.rs) runs with a worker in every language.
POLYGLOT := sdk-clients/examples/polyglot
# Where cargo puts its builds (CARGO_TARGET_DIR when set), for the targets that run them.
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
# grpcurl, which the docs' examples use and integration-tests/tests/readme.rs runs as written.
GRPCURL_VERSION := v1.9.3
GRPCURL := $(TOOLS)/bin/grpcurl
# Debian's Chromium, which the console's browser test drives (installed by `make deps` when
# missing; its own download of a browser would not work offline).
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Minutes of sustained load in `make soak`.
SOAK_MINUTES ?= 10

.PHONY: help run build deps test test-sdks test-console test-fast test-dist test-deploy dist lint proto bench profile bench-console soak golden fmt clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

run: ## Start the server on the embedded SQLite database (./.waymark/) at 127.0.0.1:7450, its console at http://127.0.0.1:7451/
	$(CARGO) run -p waymark-cli --bin waymark -- server

build: ## Build the server, the SDK examples and the test binaries
	$(CARGO) build --workspace --bins --examples

deps: $(GRPCURL) $(CHROMIUM) ## Each SDK's dependencies from its registry (Python, Go, TypeScript), the TypeScript SDK built, the polyglot example's programs, grpcurl, the console's tools and Chromium
	set -e; for s in $(SDKS); do $(MAKE) -C sdk-clients/$$s deps; done
	$(MAKE) -C sdk-clients/typescript build
	$(MAKE) -C $(POLYGLOT) programs
	$(MAKE) -C console deps

$(CHROMIUM):
	$(SUDO) apt-get update -qq
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium

test: build deps ## Every test: unit, store conformance and end-to-end (SQLite and a throwaway PostgreSQL; the polyglot one in every SDK's language), then each SDK's suite, then the console in a browser
	bash integration-tests/with-postgres.sh $(CARGO) test --workspace
	$(MAKE) test-sdks
	$(MAKE) test-console

test-sdks: build ## Each SDK's own test suite against the server binary (installs their dependencies), and the polyglot example's
	set -e; for s in $(SDKS); do $(MAKE) -C sdk-clients/$$s test; done
	$(MAKE) -C $(POLYGLOT) test

test-console: build deps ## The web console in headless Chromium against a real server and workers, on a database seeded with a million workflows (screenshots in console/test-results/)
	WAYMARK_SEED_BIN=$(abspath $(TARGET_DIR))/debug/waymark-test-seed $(MAKE) -C console test

test-fast: build deps ## Every test except the PostgreSQL ones (no database server needed)
	WAYMARK_SKIP_POSTGRES=1 $(CARGO) test --workspace

dist: ## Release artifacts into dist/: the server (archive, wheel, npm package), the SDKs (wheel, sdist, npm package), SHA256SUMS (a release build; WAYMARK_BIN=path packages that binary)
	$(MAKE) -C packaging dist

test-dist: build deps ## Install the artifacts as a user would (temp folders: venv, npm, a Go module) and run each SDK README's quickstart and replay test against the server from the archive and from the wheel (packages the debug build)
	$(MAKE) -C packaging dist WAYMARK_BIN=$(abspath $(TARGET_DIR))/debug/waymark
	$(MAKE) -C packaging test-dist

test-deploy: build deps ## The container image (assembled from the debug build without an engine, run chrooted as its user), the Helm chart (helm lint/template) and compose.yaml, checked against the binary
	$(MAKE) -C deploy test-deploy WAYMARK_BIN=$(abspath $(TARGET_DIR))/debug/waymark

$(GRPCURL):
	mkdir -p $(TOOLS)/bin && GOBIN=$(abspath $(TOOLS))/bin go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

$(BUF):
	mkdir -p $(TOOLS) && npm install --silent --no-audit --no-fund --prefix $(TOOLS) @bufbuild/buf@$(BUF_VERSION)

lint: $(BUF) ## rustfmt, clippy (tests included, warnings are errors), the server's parts used in one direction only (server/check-layers.py), buf lint and buf breaking against the last release tag, each SDK's lint (stale generated code fails), the polyglot example's, the console's, the crates as cargo would package them, and docs/reference fresh (docs/gen.py)
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	python3 server/check-layers.py
	cd proto && ../$(BUF) lint
	bash proto/check-breaking.sh $(BUF)
	bash proto/test-check-breaking.sh $(BUF)
	set -e; for s in $(SDKS); do $(MAKE) -C sdk-clients/$$s lint BUF=$(abspath $(BUF)); done
	$(MAKE) -C $(POLYGLOT) lint
	$(MAKE) -C console lint
	$(CARGO) package --workspace --exclude waymark-integration-tests --no-verify --allow-dirty --quiet
	# The same build as `make build`, so the one after this is no work: the CLI alone unifies
	# its dependencies' features differently, and `make build` then compiled a dozen again.
	$(CARGO) build --workspace --bins --examples
	python3 docs/gen.py --check $(TARGET_DIR)/debug/waymark

proto: $(BUF) ## Lint the contract and regenerate code from proto/ (Rust at build time; each SDK's committed code)
	cd proto && ../$(BUF) lint
	$(CARGO) build -p waymark-proto
	set -e; for s in $(SDKS); do $(MAKE) -C sdk-clients/$$s proto BUF=$(abspath $(BUF)); done

bench: ## Load generator on SQLite and PostgreSQL (release build); prints rates and ratios, or fails naming the workload whose workflows did not all succeed
	$(CARGO) build --release -p waymark-cli -p waymark-integration-tests --bins
	set -e; for s in $(SDKS); do $(MAKE) -C sdk-clients/$$s bench-worker; done
	bash integration-tests/with-postgres.sh $(TARGET_DIR)/release/waymark-bench
	$(MAKE) bench-console

profile: ## Where a one-step workflow's and a throughput step's time goes on PostgreSQL: gRPC calls, worker commands, store calls and SQL statements per workflow (release build)
	$(CARGO) build --release -p waymark-cli -p waymark-integration-tests --bins
	WAYMARK_TEST_PG_SETTINGS="-c shared_preload_libraries=pg_stat_statements" \
	  bash integration-tests/with-postgres.sh $(TARGET_DIR)/release/waymark-bench profile

# The browser test, run on the release build for its timings: the list and a workflow page,
# from navigation to painted, on a database of a million workflows (reported, not a pass mark).
bench-console: deps ## The console's pages timed in headless Chromium on a million workflows (release build)
	$(CARGO) build --release -p waymark-cli -p waymark-integration-tests --bins
	set -o pipefail; WAYMARK_BIN=$(abspath $(TARGET_DIR))/release/waymark \
	  WAYMARK_SEED_BIN=$(abspath $(TARGET_DIR))/release/waymark-test-seed \
	  node --test --test-reporter=tap console/test/console.test.mjs > $(TARGET_DIR)/console-bench.tap || \
	  { tail -50 $(TARGET_DIR)/console-bench.tap; exit 1; }
	node console/test/report-timings.mjs $(TARGET_DIR)/console-bench.tap

# The server logs at info: its debug lines (one per dispatch, step and completion) would come to
# hundreds of MB over the run.
soak: ## PostgreSQL at half the measured maximum for SOAK_MINUTES (10), a worker SIGKILLed every 30-60 s; fails if a workflow is lost or failed
	$(CARGO) build --release -p waymark-cli -p waymark-integration-tests --bins
	WAYMARK_LOG=$${WAYMARK_LOG:-info} bash integration-tests/with-postgres.sh \
		$(TARGET_DIR)/release/waymark-bench soak --minutes $(SOAK_MINUTES)

golden: build ## Write contract/histories/ again from live runs of the golden workflows (integration-tests/src/golden.rs); commit the result
	WAYMARK_WRITE_GOLDEN=1 $(CARGO) test -p waymark-integration-tests --test golden golden_histories_come_from_real_runs

fmt: ## Format the Rust code
	$(CARGO) fmt --all

clean: ## Remove build output and local state
	$(CARGO) clean
	rm -rf .waymark $(TOOLS)
	$(MAKE) -C $(POLYGLOT) clean
	$(MAKE) -C packaging clean
	$(MAKE) -C deploy clean
