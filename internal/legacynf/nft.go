// Package legacynf drives the software of a legacy (SR-unaware) network
// function node (spec role legacy-nf, docs/proxy.md): its nftables
// ruleset in table inet srchain_nf, its tc tbf rate limiters and the
// capture counters (table inet srchain_capture) that show what it saw:
// plain IPv4/IPv6 packets, never SRv6. Its SR proxy runs on the router
// in front of it (internal/kinds/proxy).
package legacynf

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/nft"
)

// Tables srchain owns on a legacy NF node.
const (
	// Table holds the spec's ruleset (its body).
	Table = "srchain_nf"
	// CaptureTable counts, per interface and direction, the IPv4 and
	// IPv6 packets and among them those still carrying SRv6 (a routing
	// header or an encapsulated packet right after the IPv6 header).
	CaptureTable = "srchain_capture"
)

// Families the capture counts.
var captureKinds = []string{"ipv4", "ipv6", "srv6"}

// Transaction is the nft script that replaces both of srchain's tables
// in one transaction: either the new ruleset and capture are in place or,
// when any line fails, the old ones keep running.
func Transaction(body string, capture []string) string {
	return nft.Replace(Table, body) + captureScript(capture)
}

// captureScript is the capture table: named counters in_<i>_<kind> and
// out_<i>_<kind> for the i-th interface of capture (sorted by the
// compiler), at the first prerouting and the last postrouting priority.
func captureScript(capture []string) string { return nft.Replace(CaptureTable, captureBody(capture)) }

// captureBody is the capture table's body (its digest names it).
func captureBody(capture []string) string {
	var b strings.Builder
	for i := range capture {
		for _, dir := range []string{"in", "out"} {
			for _, k := range captureKinds {
				fmt.Fprintf(&b, "counter %s {}\n", counterName(dir, i, k))
			}
		}
	}
	for _, dir := range []string{"in", "out"} {
		hook, prio, match := "prerouting", "-400", "iifname"
		if dir == "out" {
			hook, prio, match = "postrouting", "400", "oifname"
		}
		fmt.Fprintf(&b, "chain %s {\ntype filter hook %s priority %s; policy accept;\n", dir, hook, prio)
		for i, ifn := range capture {
			fmt.Fprintf(&b, "%s %q meta nfproto ipv4 counter name %q\n", match, ifn, counterName(dir, i, "ipv4"))
			fmt.Fprintf(&b, "%s %q meta nfproto ipv6 counter name %q\n", match, ifn, counterName(dir, i, "ipv6"))
			fmt.Fprintf(&b, "%s %q ip6 nexthdr { 4, 41, 43 } counter name %q\n", match, ifn, counterName(dir, i, "srv6"))
		}
		b.WriteString("}\n")
	}
	return b.String()
}

func counterName(dir string, i int, kind string) string {
	return fmt.Sprintf("%s_%d_%s", dir, i, kind)
}

// CheckRuleset checks the ruleset's transaction with nft (nft.Check): an
// *nft.Error names the line of the ruleset nft rejected.
func CheckRuleset(body string, ifaces ...string) error {
	if err := nft.Contained(body); err != nil {
		return err
	}
	return nft.Check(Transaction(body, nil), nft.Prologue, ifaces...)
}

// load replaces srchain's tables in ns in one nft transaction.
func load(ctx context.Context, ns *netns.NS, body string, capture []string) error {
	return nft.Load(ctx, ns, Transaction(body, capture), nft.Prologue)
}

// restoreTables puts back tables as listed by nft.ListTable ("" deletes).
func restoreTables(ctx context.Context, ns *netns.NS, listings map[string]string) error {
	return nft.Restore(ctx, ns, listings, Table, CaptureTable)
}

// ErrNoCounters: the capture table is not there to read.
var ErrNoCounters = errors.New("capture counters missing")
