package apply

import (
	"context"
	"fmt"

	"github.com/srchain/srchain/internal/mss"
)

// mss makes the node's nftables table srchain_mss clamp the MSS of its
// chains' TCP flows (internal/mss), or removes the table when the node
// has no such chain; the undo puts the previous table back.
func (a *applier) mss() error {
	want := mss.Clamps(a.node)
	if a.clamps != nil {
		want = *a.clamps
	}
	cur, err := mss.Current(a.ctx, a.ns)
	if err != nil {
		return fmt.Errorf("read mss clamp: %w", err)
	}
	if mss.Holds(cur, want) {
		return nil
	}
	what := fmt.Sprintf("nft table %s (%d clamps)", mss.Table, len(want))
	if len(want) == 0 {
		what = "delete nft table " + mss.Table
	}
	return a.change(what,
		func() error { return mss.Set(a.ctx, a.ns, want) },
		// WithoutCancel: the same call undoes a change after the context ended.
		func() error { return mss.Restore(context.WithoutCancel(a.ctx), a.ns, cur) })
}
