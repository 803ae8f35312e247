# sealfleet: every entry point. `make help` lists them.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
ROOT := $(abspath .)
BIN := $(ROOT)/bin
export PATH := $(BIN):$(PATH)
export KUBEBUILDER_ASSETS := $(BIN)/envtest
CONTROLLER_GEN := $(BIN)/controller-gen
GO_TEST_FLAGS ?= -count=1

.PHONY: help
help: ## List targets.
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

##@ Build

.PHONY: tools
tools: ## Build the pinned Kubernetes binaries and controller-gen from the Go module proxy into bin/.
	hack/tools.sh k8s controller-gen

.PHONY: envtest
envtest: ## Prepare KUBEBUILDER_ASSETS (bin/envtest: kube-apiserver + etcd).
	hack/tools.sh envtest-assets

.PHONY: generate
generate: ## Generate deepcopy code.
	hack/tools.sh controller-gen
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: generate ## Generate CRDs and RBAC into config/ and the chart.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=sealfleet-manager paths=./controllers/... output:rbac:artifacts:config=config/rbac
	hack/sync-chart-crds.sh

.PHONY: docs
docs: ## Render the API reference docs/api.md from the types' comments (crd-ref-docs from the Go module proxy).
	hack/api-docs.sh

.PHONY: troubleshooting
troubleshooting: ## Generate docs/troubleshooting.md from the reason constants (api/v1alpha1/conditions.go), the event reasons in the code and docs/troubleshooting/reasons.yaml.
	hack/troubleshooting.sh generate

.PHONY: chart-readme
chart-readme: ## Render charts/sealfleet/README.md from README.md.gotmpl and values.yaml's `# --` comments (helm-docs from the Go module proxy).
	hack/chart-readme.sh generate

.PHONY: build
build: ## Build the manager, node-agent and kubectl-sealfleet (the kubectl plugin) binaries into bin/.
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/ ./cmd/manager ./cmd/node-agent ./cmd/kubectl-sealfleet

.PHONY: sealer
sealer: ## Build the native sealer (Rust) into sealer-image/target/release/sealer, from a copy of exactly the sealer image's build context (sealer-image/Dockerfile's; hack/check-build-contexts.sh).
	hack/check-build-contexts.sh sealer

##@ Test

.PHONY: test
test: ## Run every test suite: repository checks, Go unit + envtest, Rust sealer (oracle), Helm chart + alert rules, e2e on the local cluster (the demo's steps included); ends with the seconds each took.
	hack/test-suites.sh test-hygiene lint-rust,lint-go,test-go,test-chart,test-e2e-prep+test-sealer,test-gpu-bench test-e2e

.PHONY: test-repo
test-repo: test-hygiene lint ## Repository checks: hygiene, then the Go and Rust linters.

.PHONY: test-hygiene
test-hygiene: ## No tracked file over 1 MiB (exceptions in hack/large-files.allow), the operator image's build context builds (the sealer image's builds in `make sealer`), Go sources gofmt-clean, the Kubernetes tools module on the same module versions as go.mod, docs/api.md as the API types render it, docs/troubleshooting.md as the reasons in the code render it, the release workflow actionlint-clean.
	hack/check-tracked-sizes.sh
	hack/check-build-contexts.sh
	hack/tools/k8s/regen.sh check
	hack/api-docs.sh check
	hack/troubleshooting.sh check
	hack/tools.sh actionlint && $(BIN)/actionlint .github/workflows/*.yaml
	@unformatted=$$(git ls-files -z '*.go' | xargs -0 gofmt -l); [ -z "$$unformatted" ] || { echo "not gofmt-clean (run gofmt -w): $$unformatted" >&2; exit 1; }

.PHONY: lint
lint: lint-go lint-rust ## The field's linters: golangci-lint, rustfmt and clippy.

.PHONY: lint-go
lint-go: ## golangci-lint (pinned in hack/versions.env, built from the Go module proxy) with .golangci.yml, on the main module, hack/tools/gpustandin and hack/tools/img.
	hack/tools.sh golangci-lint
	$(BIN)/golangci-lint run ./...
	cd hack/tools/gpustandin && $(BIN)/golangci-lint run ./...
	cd hack/tools/img && $(BIN)/golangci-lint run ./...

.PHONY: lint-rust
lint-rust: ## The sealer workspace rustfmt-clean and clippy-clean (warnings are errors).
	cd sealer-image && cargo fmt --check
	cd sealer-image && cargo clippy --release --locked --workspace --all-targets -- -D warnings

.PHONY: test-go
test-go: envtest manifests-check ## Go unit tests and envtest suites.
	go vet ./...
	go test $(GO_TEST_FLAGS) ./...
	cd hack/tools/gpustandin && go vet ./... && go test $(GO_TEST_FLAGS) ./...
	cd hack/tools/img && go vet ./... && go test $(GO_TEST_FLAGS) ./...

.PHONY: manifests-check
manifests-check: manifests ## Fail when generated files are out of date.
	@git diff --exit-code -- api config charts >/dev/null || { git --no-pager diff --stat -- api config charts; echo "generated files are stale: run 'make manifests' and commit" >&2; exit 1; }

.PHONY: test-sealer
test-sealer: ## Rust sealer tests, including the rust-fil-proofs oracle.
	@if [ -f sealer-image/Cargo.toml ]; then cd sealer-image && cargo test --release --locked; else echo "sealer-image has no workspace yet"; fi

.PHONY: test-crash
test-crash: ## The full crash-point matrix (every point, with and without lost writes, both PC2 engines: every pass at 2 KiB, first/middle/last at 8 MiB); make test runs its 2 KiB share.
	cd sealer-image && cargo test --release --locked --test crash -- --ignored --nocapture --test-threads 1 full_crash_matrix

.PHONY: test-gpu-bench
test-gpu-bench: ## The prepared GPU measurement (hack/gpu-bench.sh) end to end at test sizes on pocl's CPU OpenCL device: pack, run --quick, gpu-run.json.
	hack/gpu-bench.sh pack
	hack/gpu-bench.sh run --quick

.PHONY: test-chart
test-chart: envtest ## Helm chart: helm lint, the generated README current, template assertions (the admission policy, upgrade, rollback and uninstall on envtest), promtool check/test of the alert rules.
	hack/tools.sh helm
	hack/test-chart.sh

.PHONY: test-e2e-prep
test-e2e-prep: build ## What the e2e needs besides the sealer: the operator binaries and the cluster's tools (kube-proxy, CoreDNS, prometheus-operator and Prometheus included).
	hack/tools.sh k8s kwok helm kubectl kube-proxy coredns monitoring

.PHONY: test-e2e
test-e2e: test-e2e-prep sealer ## End-to-end on the local cluster (root): simulated fleet scenario, real-node batch.
	SEALFLEET_E2E=1 SEALFLEET_E2E_NODE=1 SEALFLEET_E2E_UPGRADE=1 go test -count=1 -v -timeout 45m ./test/e2e

##@ Release

.PHONY: release
release: ## Write dist/ for VERSION=x.y.z (semver, no leading v; a CHANGELOG.md section): the Helm chart packaged with the release's images as its defaults (REGISTRY, default ghcr.io/sealfleet), the operator, sealer and GPU sealer images as OCI archives, kubectl-sealfleet for linux/amd64, linux/arm64 and darwin/arm64, the release notes and SHA256SUMS; then check it (hack/release.sh check dist).
	hack/release.sh build "$(VERSION)"

.PHONY: test-upgrade
test-upgrade: test-e2e-prep sealer ## The e2e's upgrade alone on the local cluster's real node (root): the release of an older commit (test/e2e/upgrade_test.go), a batch held in PC1, this checkout's release installed over it; CommRs against rust-fil-proofs, no slot held twice, the sector-data CA unchanged.
	SEALFLEET_E2E=1 SEALFLEET_E2E_NODE=1 SEALFLEET_E2E_UPGRADE=1 go test -count=1 -v -timeout 20m -run '^TestUpgrade$$' ./test/e2e

##@ Local cluster

.PHONY: cluster-up
cluster-up: ## Start the local cluster: control plane, pod network (bridge CNI, kube-proxy, CoreDNS), kwok fleet, one real node (root). State and logs in _out/cluster/.
	hack/cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop exactly what cluster-up started (by pid) and give the host back (hugepages, sysctls, mounts).
	hack/cluster.sh down

##@ Demo

.PHONY: demo
demo: ## The whole product on a local cluster (root): build, cluster, chart, seal 4 sectors of 8 MiB on the real node (1 with deal data) and verify every CommR with rust-fil-proofs, a SnapDeals update, C1 from the slot, a backlog on 300 simulated nodes, a summary table. Stop with make cluster-down.
	hack/demo.sh
