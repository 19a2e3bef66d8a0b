#!/usr/bin/env bash
# Build srchain and run its demo: deploy a spec (default
# examples/quickstart.yaml) in network namespaces, send the spec's traffic
# probes and print the path every packet took. Usage:
#   sudo scripts/demo.sh [SPEC] [srchain demo flags, e.g. --keep]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
need_root
find_go
ensure_packages iproute2 iputils-ping
ensure_bpffs

spec=examples/quickstart.yaml
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
	spec=$1
	shift
fi
# routing: bgp runs FRR in the routers (docs/spec.md "Routing").
if grep -qE '^routing:[[:space:]]*bgp' "$spec"; then
	ensure_packages frr
fi

echo "== building bin/srchain"
go build -o bin/srchain ./cmd/srchain
# A running lab of the same name (an earlier `demo --keep`, or someone's
# `lab up`) is never removed here: it may not be ours. `srchain demo`
# refuses it and says how to remove it.
exec bin/srchain demo "$spec" "$@"
