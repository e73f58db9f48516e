# OpenSandbox in Go — build, test and benchmark entry points.
# `make run` and `make test` are the two set-up commands of the README.

SHELL := /bin/bash

GO        ?= go
BIN       ?= bin
GOFLAGS   ?= -buildvcs=false
STATIC    := CGO_ENABLED=0
LDFLAGS   := -s -w
EXECD_PORT ?= 44772

.PHONY: all build execd egress server osb mcp controller task-executor image-committer images server-image kube-images run run-execd test deps unit e2e e2e-clean kube-assets cluster cluster-down kube-e2e bench lint helmcheck fmt generate clean

all: build

build: execd egress server osb mcp controller task-executor image-committer

# execd runs inside arbitrary images (glibc or musl), so it is static.
execd:
	@mkdir -p $(BIN)
	$(STATIC) $(GO) build $(GOFLAGS) -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/execd ./cmd/execd

# egress is the sidecar image's only file, so it is static too.
egress:
	@mkdir -p $(BIN)
	$(STATIC) $(GO) build $(GOFLAGS) -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/egress ./cmd/egress

osb:
	@mkdir -p $(BIN)
	$(STATIC) $(GO) build $(GOFLAGS) -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/osb ./cmd/osb

mcp:
	@mkdir -p $(BIN)
	$(STATIC) $(GO) build $(GOFLAGS) -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/opensandbox-mcp ./cmd/opensandbox-mcp

# The Kubernetes operator; static so that its image needs nothing else.
controller:
	@mkdir -p $(BIN)
	$(STATIC) $(GO) build $(GOFLAGS) -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/opensandbox-controller ./cmd/opensandbox-controller

# The BatchSandbox task executor, injected as a sidecar; static like the
# controller so that its image is the binary alone.
task-executor:
	@mkdir -p $(BIN)
	$(STATIC) $(GO) build $(GOFLAGS) -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/task-executor ./cmd/task-executor

# Commits a sandbox container's root filesystem to an image through the
# node's containerd (a SandboxSnapshot's commit Job); static like the others.
image-committer:
	@mkdir -p $(BIN)
	$(STATIC) $(GO) build $(GOFLAGS) -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/image-committer ./cmd/image-committer

server:
	@mkdir -p $(BIN)
	$(STATIC) $(GO) build $(GOFLAGS) -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/opensandbox-server ./cmd/opensandbox-server

# Sandbox images built locally from Debian packages (no registry needed);
# a no-op when the recipe has not changed.
images: deps server-image
	bash images/build.sh base code-interpreter playwright coding-agent chrome desktop vscode

# The server's image (deploy/compose.yaml, Helm), built from bin/ without a
# registry; a no-op when neither images/server.sh nor a binary changed.
server-image: server execd egress
	@bash images/server.sh

# Starts the lifecycle server with the Docker runtime on :8080 (SERVER_HOST=… and
# SERVER_PORT=… listen elsewhere without editing deploy/dev.toml). The API key
# is taken from OPENSANDBOX_SERVER_API_KEY, or generated once into
# .opensandbox-dev-key and printed.
run: deps build images
	@key=$${OPENSANDBOX_SERVER_API_KEY:-$$(cat .opensandbox-dev-key 2>/dev/null)}; \
	if [ -z "$$key" ]; then key=$$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'); echo "$$key" > .opensandbox-dev-key; fi; \
	echo "API key: $$key   (header OPEN-SANDBOX-API-KEY)"; \
	OPENSANDBOX_SERVER_API_KEY=$$key $(BIN)/opensandbox-server --config $(CURDIR)/deploy/dev.toml $(if $(SERVER_HOST),--host $(SERVER_HOST)) $(if $(SERVER_PORT),--port $(SERVER_PORT))

# Runs execd alone in the foreground on :$(EXECD_PORT).
run-execd: execd
	$(BIN)/execd --port $(EXECD_PORT)

# Everything: install/start what the tests need, lint, unit tests with
# the race detector, then end-to-end tests against the real binaries and
# the Docker engine, and the tests of the single-node Kubernetes cluster.
test: deps lint unit e2e kube-e2e

# Idempotent: installs docker.io and busybox-static when missing and starts
# dockerd when it is not running.
deps:
	bash scripts/ensure-deps.sh

# The controller and CRD tests run on a real kube-apiserver and etcd
# (envtest), the test cluster's binaries (built once, cached by version).
unit:
	@assets=$$(bash scripts/kube/assets.sh) || exit 1; \
	KUBEBUILDER_ASSETS=$$assets $(GO) test $(GOFLAGS) -race -count=1 -timeout 30m ./...

e2e: build images e2e-clean
	@set -o pipefail; OSB_E2E=1 OSB_BIN_DIR=$(abspath $(BIN)) $(GO) test $(GOFLAGS) -count=1 -timeout 30m -v ./test/e2e/... > $(BIN)/e2e.log 2>&1; rc=$$?; \
	grep -E '^(--- |ok|FAIL|panic)' $(BIN)/e2e.log; \
	if [ $$rc -ne 0 ]; then echo "---- e2e failed; the output of the failing tests in $(BIN)/e2e.log:"; \
		bash scripts/test-failures.sh $(BIN)/e2e.log 400; echo "---- the end of $(BIN)/e2e.log:"; tail -n 60 $(BIN)/e2e.log; fi; exit $$rc

# Removes containers an interrupted e2e run left behind (the tests remove
# their own as they go).
e2e-clean:
	@ids=$$(docker ps -aq --filter label=io.opensandbox.test=e2e 2>/dev/null); \
	if [ -n "$$ids" ]; then docker rm -f $$ids >/dev/null; fi
	@# Network holders (docs/server.md) of servers that did not stop
	@# cleanly: idle ones, and taken ones whose sandbox (same name hash) is gone.
	@for n in $$(docker ps -a --filter label=opensandbox.io/netns-holder=true --format '{{.Names}}' 2>/dev/null); do \
		case $$n in sandbox-netns-idle-*) docker rm -f $$n >/dev/null;; \
		sandbox-netns-*) docker inspect sandbox-$${n#sandbox-netns-} >/dev/null 2>&1 || docker rm -f $$n >/dev/null;; esac; \
	done

# The single-node Kubernetes test cluster (docs/kubernetes.md, "The test
# cluster"). kube-assets builds its binaries into the cache once (about ten
# minutes cold) and prints their directory, for KUBEBUILDER_ASSETS.
kube-assets:
	@bash scripts/kube/assets.sh

# Brings the cluster up (a quick check when it already is); the last line
# printed is the admin kubeconfig's path.
cluster: deps images kube-images
	@OSB_KUBE_IMAGES="opensandbox/base:latest opensandbox/code-interpreter:latest $$(bash scripts/kube/static-images.sh --list | tr '\n' ' ')" bash scripts/kube/up.sh

# Images of our static binaries that run in the cluster's pods (controller,
# execd for init containers, the egress sidecar), built from bin/ without a registry.
kube-images: execd egress controller task-executor image-committer
	@bash scripts/kube/static-images.sh

# Stops and removes the cluster, leaving Docker alone.
cluster-down:
	@bash scripts/kube/down.sh

kube-e2e: cluster
	@mkdir -p $(BIN); set -o pipefail; OSB_KUBE_E2E=1 $(GO) test $(GOFLAGS) -count=1 -timeout 20m -v ./test/kube/... > $(BIN)/kube-e2e.log 2>&1; rc=$$?; \
	grep -E '^(--- |ok|FAIL|panic)' $(BIN)/kube-e2e.log; \
	if [ $$rc -ne 0 ]; then echo "---- kube-e2e failed; the end of $(BIN)/kube-e2e.log:"; tail -n 80 $(BIN)/kube-e2e.log; fi; exit $$rc

bench: build images
	$(GO) run $(GOFLAGS) ./bench/execd -execd $(abspath $(BIN))/execd
	$(GO) run $(GOFLAGS) ./bench/server -server $(abspath $(BIN))/opensandbox-server -execd $(abspath $(BIN))/execd
	$(GO) run $(GOFLAGS) ./bench/pool -server $(abspath $(BIN))/opensandbox-server -execd $(abspath $(BIN))/execd
	$(GO) run $(GOFLAGS) ./bench/code -execd $(abspath $(BIN))/execd
	$(GO) run $(GOFLAGS) ./bench/egress
	$(GO) run $(GOFLAGS) ./bench/environments -server $(abspath $(BIN))/opensandbox-server -execd $(abspath $(BIN))/execd
	$(GO) run $(GOFLAGS) ./bench/kube -controller $(abspath $(BIN))/opensandbox-controller -server $(abspath $(BIN))/opensandbox-server -execd $(abspath $(BIN))/execd

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet $(GOFLAGS) ./...
	cd tools/helmcheck && $(GO) vet $(GOFLAGS) ./...

# Helm as a library (tools/helmcheck, a module of its own: Helm needs newer
# k8s.io modules than ours): lint, template, install and uninstall of
# deploy/helm/opensandbox. test/lint and test/kube build it themselves.
helmcheck:
	@mkdir -p $(BIN)
	cd tools/helmcheck && $(GO) build $(GOFLAGS) -o $(abspath $(BIN))/helmcheck .

fmt:
	gofmt -w $$(git ls-files '*.go')

# Regenerates the custom resources' deep-copy code and CRD manifests
# (deploy/crds/) from the kubebuilder markers in pkg/apis/ with a pinned
# controller-gen, and their copies in the Helm chart; test/lint fails while
# they are stale.
generate:
	bash scripts/generate-crds.sh

clean:
	rm -rf $(BIN)
