#!/usr/bin/env bash
# Install what the tests need (only what is missing), then vet and run the
# whole test suite as root: unit, fuzz seeds, BPF test-run tables and the
# network-namespace end-to-end tests. Usage: sudo scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
need_root
find_go
ensure_packages clang llvm libbpf-dev bpftool nftables iptables tcpdump \
	python3-scapy netsniff-ng iperf3 ethtool iproute2 iputils-ping prometheus frr
ensure_bpffs

echo "== go $(go env GOVERSION)"
go mod download
echo "== gofmt"
unformatted=$(gofmt -l cmd internal test packaging)
if [ -n "$unformatted" ]; then
	echo "gofmt would change:" >&2
	echo "$unformatted" >&2
	exit 1
fi
echo "== go vet ./... (and -tags bench: the live benchmark checks must build)"
go vet ./...
go vet -tags bench ./test/e2e/
echo "== go test ./..."
SRCHAIN_TEST_STRICT=1 go test -count=1 -timeout 25m ./...
echo "== all tests passed"
# Checks that depend on the machine's load (PDR search, counter cross-
# checks) run only on request: go test -tags bench ./test/e2e/ -run Bench
