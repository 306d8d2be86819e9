# Kilolock — see README.md. Every target works on a fresh clone.
SHELL := /bin/bash
GO    ?= go
BIN   := $(CURDIR)/bin
# Terraform for tests and the demo: any terraform/tofu on PATH, else ./bin/terraform (make tools).
export PATH := $(BIN):$(PATH)
TERRAFORM_VERSION ?= 1.5.7
# What `kl version` says (internal/version, README "Versions"): at a release tag vX.Y.Z that version, else
# version.Next-dev; the commit, its time and whether the tree had changes, from git (none outside a checkout).
VERSION     ?= $(shell git describe --tags --exact-match --match 'v[0-9]*.[0-9]*.[0-9]*' 2>/dev/null | sed 's/^v//')
COMMIT      := $(shell git rev-parse HEAD 2>/dev/null)
COMMIT_DATE := $(shell git log -1 --format=%cI 2>/dev/null)
DIRTY       := $(shell if [ -n "$$(git status --porcelain 2>/dev/null)" ]; then echo true; else echo false; fi)
VPKG        := github.com/kilolock/kilolock/internal/version
LDFLAGS := -s -w -X $(VPKG).Version=$(VERSION) -X $(VPKG).Commit=$(COMMIT) -X $(VPKG).Date=$(COMMIT_DATE) -X $(VPKG).Dirty=$(DIRTY)
GOFLAGS_BUILD := -trimpath -ldflags '$(LDFLAGS)'
# GoReleaser (.goreleaser.yaml), installed into ./bin by `make goreleaser`.
GORELEASER_VERSION := 2.15.1
GORELEASER := $(BIN)/goreleaser

.PHONY: all build tools test test-short vet fmt lint-actions docker demo bench clean goreleaser release release-check

all: build

## build: static kl and klbot into ./bin (CGO off: the SQLite driver is pure Go); the Dockerfile uses the same flags
build:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_BUILD) -o $(BIN)/kl ./cmd/kl
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_BUILD) -o $(BIN)/klbot ./cmd/klbot

## tools: install Terraform $(TERRAFORM_VERSION) into ./bin when no terraform or tofu is on PATH (~7 min, once); build the
## test provider (internal/testprovider) into ./bin with a filesystem mirror of it in bin/kltest-mirror and a CLI
## configuration that installs it from there: TF_CLI_CONFIG_FILE=bin/kltest-mirror/kltest.tfrc (tests build their own)
tools:
	@if command -v terraform >/dev/null 2>&1 || command -v tofu >/dev/null 2>&1; then \
		echo "tools: using $$(command -v terraform || command -v tofu)"; \
	else \
		echo "tools: no terraform or tofu on PATH: building Terraform $(TERRAFORM_VERSION) into ./bin (about 7 minutes, once)"; \
		mkdir -p $(BIN) && GOBIN=$(BIN) CGO_ENABLED=0 $(GO) install github.com/hashicorp/terraform@v$(TERRAFORM_VERSION); \
	fi
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/terraform-provider-kltest ./internal/testprovider/cmd/terraform-provider-kltest
	$(BIN)/terraform-provider-kltest -mirror $(BIN)/kltest-mirror -plugin-cache-dir $(BIN)/plugin-cache

## vet: gofmt and go vet
vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## lint-actions: actionlint (run, not required: its go.mod would raise ours) on .github/workflows/*.yml (the release),
## examples/workflows/*.yml and action/testdata/action-steps.yml (the action's own steps as a workflow, kept by go test
## ./action), in a throwaway project where they sit in .github/workflows/: actionlint checks a `uses: ./action` against action/action.yml only
## inside a git repository with .github/workflows. Silent when clean; shellcheck is used where installed.
ACTIONLINT := github.com/rhysd/actionlint/cmd/actionlint@v1.7.12
lint-actions:
	@set -euo pipefail; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	mkdir -p "$$tmp/.git" "$$tmp/.github/workflows"; cp -R action "$$tmp/action"; \
	cp examples/workflows/*.yml action/testdata/action-steps.yml .github/workflows/*.yml "$$tmp/.github/workflows/"; \
	cd "$$tmp" && $(GO) run $(ACTIONLINT) -no-color || \
		{ echo "lint-actions: .github/workflows/ above holds .github/workflows/*.yml, examples/workflows/*.yml and action/testdata/action-steps.yml"; exit 1; }

## test: everything, with the race detector, real Terraform; actionlint on the action and the example workflow
test: tools vet lint-actions
	$(GO) test -race -count=1 -timeout 20m ./...

## docker: the klbot image (klbot and kl, Terraform $(TERRAFORM_VERSION), non-root) from source; needs a Docker engine
docker:
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) --build-arg COMMIT_DATE=$(COMMIT_DATE) \
		--build-arg TERRAFORM_VERSION=$(TERRAFORM_VERSION) -t kilolock:$(or $(VERSION),dev) .

## goreleaser: GoReleaser $(GORELEASER_VERSION) into ./bin with go install, unless it is there (about 2.5 minutes with empty
## Go caches, seconds when they hold it)
goreleaser:
	@if ! $(GORELEASER) --version 2>/dev/null | grep -Eq '^GitVersion: +v$(GORELEASER_VERSION)$$'; then \
		echo "goreleaser: installing GoReleaser v$(GORELEASER_VERSION) into ./bin"; \
		mkdir -p $(BIN) && GOBIN=$(BIN) $(GO) install github.com/goreleaser/goreleaser/v2@v$(GORELEASER_VERSION); \
	fi

## release-check: goreleaser check of .goreleaser.yaml (CI runs it)
release-check: goreleaser
	$(GORELEASER) check

## release: a local snapshot release into dist/ — kl and klbot for linux/darwin × amd64/arm64, archives, checksums — without
## publishing or the container image (no Docker engine needed); a tagged release is .github/workflows/release.yml's.
## GoReleaser takes the commit from git only where the checkout has a remote (`git ls-remote --get-url`; a snapshot without
## one says commit "none", which kl version refuses): a checkout without a remote is given this repository's URL through
## git's environment configuration (no file is changed).
release: goreleaser
	$(if $(shell git remote 2>/dev/null),,GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url GIT_CONFIG_VALUE_0=https://github.com/kilolock/kilolock.git) \
		KL_DIRTY=$(DIRTY) $(GORELEASER) release --snapshot --clean --skip=docker,publish

## demo: the conflict-visibility demo on examples/big-state with real Terraform
demo: tools build
	KL=$(BIN)/kl ./examples/big-state/conflict-visibility-demo.sh

## bench: concurrency, overhead (terraform_data, and the test provider at 20 ms per API call), commit, store growth and
## native-lane figures beside their baselines, medians, summary table (prints; asserts only figure 5's correctness: a full
## plan after the native apply shows no changes; ~8 min, plus figure 5 at 10,000 resources: 24 min for its 3 rounds at a
## load average of 16-31 on 2 CPUs, 11 min for one round;
## KLBENCH_FLAGS='-only native -native-resources 200 -runs 1' is a smoke run of it);
## the store benchmark; a plan with the test provider without a plugin cache, with Terraform's and with Kilolock's (ADR 0061, ~40 s); then the webhook load test (~40 s): WEBHOOK_LOAD signed deliveries over loopback to klbot's endpoint on
## PostgreSQL and to a baseline, p50/p99 beside the baseline's; it fails on a 5xx or a delivery recorded or enqueued twice
WEBHOOK_LOAD ?= -load.rate 200 -load.duration 30s -load.redeliver 0.1
KLBENCH_FLAGS ?=
bench: tools build
	$(GO) run ./internal/bench/cmd/klbench -kl $(BIN)/kl $(KLBENCH_FLAGS)
	$(GO) test -run '^$$' -bench 'Store' -benchtime 3s -timeout 30m ./internal/store/storebench/
	$(GO) test -run '^$$' -bench 'Commit10k' -benchtime 20x -timeout 30m ./internal/store/storebench/
	$(GO) test -run '^$$' -bench 'PluginCache' -benchtime 10x -timeout 10m ./internal/terraform/
	$(GO) test -run '^$$' -bench 'WebhookLoad' -benchtime 1x -timeout 5m ./cmd/klbot/ -args $(WEBHOOK_LOAD)

clean:
	rm -rf $(BIN) .kl dist
