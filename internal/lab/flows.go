package lab

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/srchain/srchain/internal/flowsetup"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// NeedsFlows reports whether a node of net has an NF pool.
func NeedsFlows(net *state.Network) bool {
	for _, n := range net.Nodes {
		if _, ok := flowsetup.PoolConfig(n); ok {
			return true
		}
	}
	return false
}

// RunFlows keeps a per-flow setup loop (internal/flowsetup) per node of
// the lab's recorded state whose eBPF ingress has an NF pool (the state
// is read again every second, so `lab apply` is followed) until ctx
// ends: what the agents do in a lab without them (`srchain lab flows`,
// `srchain demo`).
func RunFlows(ctx context.Context, name string, opts Options, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	type node struct {
		ns *netns.NS
		r  *flowsetup.Runner
	}
	nodes := map[string]*node{}
	defer func() {
		for _, n := range nodes {
			n.r.Stop()
			n.ns.Close()
		}
	}()
	var seen time.Time // the state file's time when last read
	failed := true     // a loop could not start: try again
	for {
		// Read the state again only when `lab apply` rewrote it (a
		// large lab's state is megabytes) or a loop failed to start.
		fi, serr := os.Stat(statePath(opts, name))
		if serr == nil && !fi.ModTime().After(seen) && !failed {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			continue
		}
		if serr == nil {
			seen = fi.ModTime()
		}
		rec, err := Load(name, opts)
		if err != nil {
			return fmt.Errorf("lab flows: %w", err)
		}
		failed = false
		if rec.Network != nil {
			for _, sn := range rec.Network.Nodes {
				if _, ok := flowsetup.PoolConfig(sn); !ok && nodes[sn.Name] == nil {
					continue
				}
				n := nodes[sn.Name]
				if n == nil {
					ns, err := Open(name, sn.Name, opts)
					if err != nil {
						return fmt.Errorf("lab flows: %w", err)
					}
					n = &node{ns: ns, r: &flowsetup.Runner{NS: ns, Log: log.With("node", sn.Name)}}
					nodes[sn.Name] = n
				}
				if err := n.r.Set(ctx, sn); err != nil {
					log.Error("lab flows", "node", sn.Name, "err", err)
					failed = true
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}
