package flowsetup

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// PoolConfig returns the node's ingress program config when one of its
// chains has an NF pool (the node needs a flow-setup loop).
func PoolConfig(node state.Node) (state.IngressConfig, bool) {
	for _, p := range node.Programs {
		if p.Kind != state.ProgramIngress {
			continue
		}
		var cfg state.IngressConfig
		if json.Unmarshal(p.Config, &cfg) != nil {
			return cfg, false
		}
		for _, c := range cfg.Chains {
			if c.Pool != nil {
				return cfg, true
			}
		}
	}
	return state.IngressConfig{}, false
}

// Runner keeps one loop running for a node's applied state: the agent
// (and `srchain lab flows` in a lab without agents) calls Set after every
// apply; the loop restarts only when the pools change.
type Runner struct {
	NS      *netns.NS
	Log     *slog.Logger
	Observe func(Setup)

	mu     sync.Mutex
	key    string
	cancel context.CancelFunc
	done   chan struct{}
}

// Set starts, restarts or stops the loop for node (applied in r.NS).
func (r *Runner) Set(ctx context.Context, node state.Node) error {
	cfg, need := PoolConfig(node)
	key := ""
	if need {
		b, _ := json.Marshal(struct {
			Cfg    state.IngressConfig
			TunSrc string
		}{cfg, node.TunSrc.String()})
		key = string(b)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if key == r.key && (key == "" || r.cancel != nil) {
		return nil
	}
	r.stopLocked()
	r.key = key
	if !need {
		return nil
	}
	loop, err := Open(Options{NS: r.NS, Config: cfg, TunSrc: node.TunSrc, Log: r.Log, Observe: r.Observe})
	if err != nil {
		r.key = ""
		return fmt.Errorf("start flow setup: %w", err)
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	r.cancel, r.done = cancel, done
	go func() {
		defer close(done)
		if err := loop.Run(lctx); err != nil && r.Log != nil {
			r.Log.Error("flow setup stopped", "err", err)
		}
	}()
	return nil
}

// Stop ends the loop, if any.
func (r *Runner) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked()
	r.key = ""
}

func (r *Runner) stopLocked() {
	if r.cancel != nil {
		r.cancel()
		<-r.done
		r.cancel, r.done = nil, nil
	}
}
