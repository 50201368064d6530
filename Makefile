# orchestratord: `make help` lists the targets.
SHELL := /usr/bin/env bash
GO ?= go
MODULE := $(shell $(GO) list -m)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X $(MODULE)/pkg/version.Version=$(VERSION)
BIN := bin
# Packages whose tests run against a real kube-apiserver need its binaries.
TEST_FLAGS ?= -race -count=1
TEST_PKGS ?= ./...
# Releases (docs/releasing.md): REGISTRY is the images' registry host (empty:
# Docker Hub), IMAGE_REPO their repository prefix (empty: the chart's),
# RELEASE_VERSION must be the chart's version when set (CI sets the tag's).
REGISTRY ?=
IMAGE_REPO ?=
RELEASE_VERSION ?=
# Every time in the artefacts is the commit's, so a rebuild gives the same digests.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
RELEASE_FLAGS = -registry '$(REGISTRY)' -repository '$(IMAGE_REPO)'

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build bin/webhook and bin/controllers.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/webhook ./cmd/controllers

.PHONY: generate
generate: ## Regenerate deepcopy, clients, listers, informers and CRDs.
	hack/update-codegen.sh

.PHONY: manifests
manifests: ## Render deploy/ from the chart.
	hack/update-manifests.sh

.PHONY: verify
verify: ## Fail on stale generated files, unformatted code, vet findings or an untidy go.mod.
	hack/verify-codegen.sh
	@tmp=$$(mktemp); hack/update-manifests.sh $$tmp; if ! diff -q $$tmp deploy/orchestratord.yaml >/dev/null; then \
	  rm -f $$tmp; echo "deploy/orchestratord.yaml is stale: run 'make manifests'"; exit 1; fi; rm -f $$tmp
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff
	@# The modules make run and make test build share one version of each
	@# module they have in common, so that a cold build compiles each shared
	@# package once (hack/align-modules).
	$(GO) run ./hack/align-modules -check
	@# The alert rules, their unit tests and the dashboard's queries, with
	@# Prometheus' own packages (hack/tools/promtool, its own module).
	hack/verify-monitoring.sh
	$(GO) -C hack/tools/promtool vet ./...
	$(GO) -C hack/tools/promtool test ./...
	$(GO) -C hack/tools/promtool mod tidy -diff
	@# The webhook benchmark is its own module (it runs controller-runtime's webhook as a peer).
	$(GO) -C hack/bench/webhook vet ./...
	$(GO) -C hack/bench/webhook mod tidy -diff
	@# The GitHub Actions workflows, with actionlint (hack/tools/actionlint, built once like Helm).
	"$$(hack/kube-binaries.sh actionlint)/actionlint"

.PHONY: kube-binaries
kube-binaries: ## Build (once) the etcd and kube-apiserver the integration tests run.
	hack/kube-binaries.sh etcd kube-apiserver >/dev/null

.PHONY: test
test: kube-binaries ## Run unit and integration tests (real etcd + kube-apiserver).
	$(GO) test $(TEST_FLAGS) $(TEST_PKGS)

# The packages whose tests exercise the API server most (CRDs and their
# CEL rules, conversion through the webhook, server-side apply, Leases):
# run against the oldest Kubernetes the chart accepts too.
OLDEST_KUBE_PKGS ?= ./pkg/crds/ ./pkg/webhook/... ./pkg/controllers/materialize/... ./pkg/leaderelection/...

.PHONY: test-oldest-kube
test-oldest-kube: ## Run the API server integration tests against the oldest Kubernetes the chart accepts (hack/tools/kube-oldest).
	ORCHESTRATORD_KUBE_BIN_DIR="$$(hack/kube-binaries.sh oldest)" $(GO) test $(TEST_FLAGS) $(OLDEST_KUBE_PKGS)

.PHONY: run
run: ## As root: start a real local cluster, install the chart and a sample Materialize (stand-in environmentd).
	hack/cluster/run.sh

.PHONY: down
down: ## Stop the local cluster and leave the machine as found.
	hack/cluster/cluster.sh down

.PHONY: e2e
e2e: ## As root: the end-to-end suite on the local cluster (started by make run if needed), cert-manager included.
	RUN_CERT_MANAGER=1 hack/cluster/run.sh
	KUBECONFIG=$$(hack/cluster/cluster.sh kubeconfig) HELM=$$(hack/kube-binaries.sh helm)/helm CHART=$(CURDIR)/charts/orchestratord \
	  $(GO) test -tags e2e -count=1 -v -timeout 60m ./test/e2e

.PHONY: run-local
run-local: ## No root, no kubelet: both programs and a sample against a local etcd + kube-apiserver.
	$(GO) run ./hack/dev

.PHONY: bench
bench: kube-binaries ## Run the benchmarks of docs/benchmarks.md.
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/conversion
	$(GO) -C hack/bench/webhook run . -duration 5s -repeats 3
	$(GO) test -run '^$$' -bench ListThroughTheAPIServer -benchtime 20x ./pkg/webhook/app
	$(GO) test -run '^$$' -bench ReviewPeakHeap -benchtime 3x ./pkg/webhook
	$(GO) test -run '^$$' -bench HostileLoad -benchtime 3x ./pkg/webhook/app
	$(GO) run ./hack/bench/controllers -n 1000 -workers 8 -qps 500 -guard docs/benchmarks.md

# The webhook bench's in-process cost relative to an echo, guarded
# (docs/benchmarks.md, "The conversion guard"): ratios of handlers measured
# back to back, not times, so a busy machine does not fail it.
WEBHOOK_GUARD = $(GO) -C hack/bench/webhook run . -paths 'in process' -repeats 9 -benchtime 500ms -guard ../../../docs/benchmarks.md

.PHONY: bench-guard
bench-guard: ## Fail when the conversion webhook's cost relative to an echo rose by more than 25 % over docs/benchmarks.md (run by .ci/run).
	$(WEBHOOK_GUARD)

.PHONY: bench-guard-record
bench-guard-record: ## Record the conversion guard's figures in docs/benchmarks.md.
	$(WEBHOOK_GUARD) -record

.PHONY: bench-record
bench-record: kube-binaries ## Record the controllers bench's summary in docs/benchmarks.md (what make bench compares with).
	$(GO) run ./hack/bench/controllers -n 1000 -workers 8 -qps 500 -guard docs/benchmarks.md -record

.PHONY: bench-cluster
bench-cluster: ## As root: failover, webhook-rollout and 0dt rollout phase figures on the local cluster (docs/benchmarks.md).
	hack/cluster/run.sh
	KUBECONFIG=$$(hack/cluster/cluster.sh kubeconfig) $(GO) run ./hack/bench/failover
	KUBECONFIG=$$(hack/cluster/cluster.sh kubeconfig) $(GO) run ./hack/bench/rollout -runs 3

.PHONY: fuzz
fuzz: ## Fuzz each target (conversion, JSON, the webhook's handler) for FUZZTIME (default 5m).
	for t in conversion:FuzzV1alpha1RoundTrip conversion:FuzzV1RoundTrip conversion:FuzzConvertAnyInput \
	  jsonvalue:FuzzDecode jsonvalue:FuzzEstimate webhook:FuzzReview; do \
	  $(GO) test ./pkg/$${t%%:*} -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $${FUZZTIME:-5m} || exit 1; done

.PHONY: clean
clean: ## Remove build output (the cached Kubernetes binaries stay).
	rm -rf $(BIN)

.PHONY: images
images: ## Build the OCI image tarballs (bin/images/) of the binaries, the stand-ins and CoreDNS.
	hack/images/images.sh

.PHONY: release
release: ## Build and check the linux/amd64+arm64 images (OCI layouts), their SBOMs and the pinned chart in bin/release.
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./hack/release build -out $(BIN)/release $(RELEASE_FLAGS) \
	  -version '$(RELEASE_VERSION)' -build-version '$(VERSION)'
	$(GO) run ./hack/release verify -dir $(BIN)/release

.PHONY: release-check
release-check: ## Build the release twice from two copies of the tree and compare every byte (TestReleaseIsReproducible; not in make test: minutes cold).
	ORCHESTRATORD_RELEASE_TEST=1 $(GO) test -count=1 -run TestReleaseIsReproducible ./hack/release

.PHONY: release-login
release-login: ## Store REGISTRY_USERNAME and REGISTRY_PASSWORD (environment) for REGISTRY in the Docker config release-push reads.
	@printf '%s' "$$REGISTRY_PASSWORD" | $(GO) run ./hack/release login -registry '$(REGISTRY)' -username "$$REGISTRY_USERNAME"

.PHONY: release-push
release-push: ## Push bin/release's images and SBOMs (same REGISTRY and IMAGE_REPO; Docker config credentials), then check the registry.
	$(GO) run ./hack/release push -dir $(BIN)/release $(RELEASE_FLAGS)
	$(GO) run ./hack/release verify -dir $(BIN)/release -remote

