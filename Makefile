# srchain build entry points. The generated eBPF objects (bpf2go output)
# are committed; `make generate` rebuilds them with the system clang.
GO ?= go
PKGS ?= ./...
# Root-only tests skip themselves without root; the suite is bounded.
TESTFLAGS ?= -timeout 20m

.PHONY: all generate build test vet bpf-stats dist deb

all: generate build vet test

generate:
	$(GO) generate $(PKGS)

build:
	$(GO) build $(PKGS)

vet:
	$(GO) vet $(PKGS)

test:
	$(GO) test $(TESTFLAGS) $(PKGS)

# Verifier cost of the datapath programs against their budgets (needs root).
bpf-stats:
	$(GO) test -count=1 -v -run VerifierStats ./internal/datapath/ ./internal/firewall/ ./internal/opot/bpfprog/ ./internal/opotdp/ ./internal/ingress/ ./internal/proxydp/

# A static srchain (CGO_ENABLED=0, -trimpath) in dist/, its version from
# `git describe --tags --always --dirty` (srchain version, srchain --version).
dist:
	bash scripts/deb.sh --bin-only dist

# dist/srchain_VERSION_ARCH.deb built with dpkg-deb (docs/packaging.md).
deb:
	bash scripts/deb.sh dist
