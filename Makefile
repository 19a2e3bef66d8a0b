# srchain build entry points. The generated eBPF objects (bpf2go output)
# are committed; `make generate` rebuilds them with the system clang.
GO ?= go
PKGS ?= ./...
# Root-only tests skip themselves without root; the suite is bounded.
TESTFLAGS ?= -timeout 20m

.PHONY: all generate build test vet bpf-stats

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
