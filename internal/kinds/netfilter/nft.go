package netfilter

import (
	"context"

	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/nft"
)

// Table is the nftables table srchain owns on a node with a netfilter
// NF (family inet: IPv4 and IPv6 inner packets alike). The ruleset is
// its body.
const Table = "srchain_anf"

// Transaction is the nft script that replaces srchain's table with one
// holding body, atomically (nft.Replace): either the new table is in
// place or, when any line fails, the old one keeps running (seed 002's
// rules stay unmodified nftables).
func Transaction(body string) string { return nft.Replace(Table, body) }

// CheckRuleset checks the ruleset's transaction with nft (nft.Check): an
// *nft.Error names the line of the ruleset nft rejected.
func CheckRuleset(body string) error {
	if err := nft.Contained(body); err != nil {
		return err
	}
	return nft.Check(Transaction(body), nft.Prologue)
}

// LoadRuleset replaces srchain's table in ns with body in one nft
// transaction. When nft rejects it the error wraps an *nft.Error and the
// table that ran before keeps running.
func LoadRuleset(ctx context.Context, ns *netns.NS, body string) error {
	return nft.Load(ctx, ns, Transaction(body), nft.Prologue)
}

// currentTable returns `nft list table inet srchain_anf` in ns, "" when
// the table does not exist.
func currentTable(ctx context.Context, ns *netns.NS) (string, error) {
	return nft.ListTable(ctx, ns, Table)
}

// restoreTable puts back a table listed by currentTable ("" deletes it).
func restoreTable(ctx context.Context, ns *netns.NS, listing string) error {
	return nft.Restore(ctx, ns, map[string]string{Table: listing}, Table)
}

// removeTable deletes srchain's table (absent: nothing to do).
func removeTable(ctx context.Context, ns *netns.NS) error {
	return restoreTable(ctx, ns, "")
}
