// Package agent is `srchain agent --node NAME`: it watches its node's
// desired state in etcd (written by the controller, internal/controller),
// applies it with the same applier and kind drivers as the lab
// (internal/apply, internal/kinds/all), reports its status under an etcd
// lease, and repairs drift periodically (docs/controller.md, "Agent").
//
// It is restart-safe: the applier is a diff, so an agent that starts on a
// node already as desired changes nothing (routes and pinned BPF objects
// stay, traffic keeps flowing). The first apply after start reads the node
// back in full (no Options.Prev: the agent cannot know what happened while
// it was away); later applies are the difference from the last applied
// state (Options.Prev and Options.Remove).
//
// It never reports a node in sync that is not: an apply's intent is
// recorded durably before it starts (record.go), the first apply after a
// start removes whatever the records say the node may hold and the
// desired state lacks, and both it and the periodic drift check compare
// srchain's routes and rules on the node itself with the desired state
// (apply.Options.Owned), so state a killed apply or a lost record left is
// found and removed (issue 38 item 3).
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/srchain/srchain/internal/flowsetup"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/metrics"
	"github.com/srchain/srchain/internal/mss"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/store"
)

// Defaults of Config.
const (
	DefaultTTL    = 10 * time.Second
	DefaultResync = 30 * time.Second
)

// etcdTimeout bounds one etcd request (the client waits for a connection
// otherwise): while etcd is away, drift is still checked and repaired.
const etcdTimeout = 5 * time.Second

// ErrNoNode: the desired state stored for the node does not hold it.
var ErrNoNode = errors.New("desired state does not hold the node")

// Config is one agent.
type Config struct {
	// Node is the spec's node name this agent applies.
	Node string
	// NS is where to apply (the host's namespace, or a lab's).
	NS *netns.NS
	// Client reaches etcd; the agent does not close it.
	Client *clientv3.Client
	// TTL of the status lease (DefaultTTL when 0): a stopped agent's
	// status disappears at most this long after its last keep-alive.
	TTL time.Duration
	// Resync is how often drift is checked and repaired (DefaultResync
	// when 0).
	Resync time.Duration
	// StateFile keeps the last applied node state across restarts, so
	// that what a change made while the agent was away dropped is still
	// removed; "" keeps nothing.
	StateFile string
	// Version is reported in the status.
	Version string
	// Drivers overrides the registered program drivers (tests).
	Drivers map[string]apply.ProgramDriver
	Logger  *slog.Logger
}

// Status is what the agent writes under store.StatusKey (JSON), under its
// lease. The controller's GET /v1/nodes/{name}/status shows it.
type Status struct {
	Node string `json:"node"`
	// AppliedGeneration is the generation (etcd mod revision of the
	// desired key) last applied in full; nil until one was.
	AppliedGeneration *int64 `json:"applied_generation"`
	// DesiredGeneration is the newest generation the agent saw.
	DesiredGeneration int64 `json:"desired_generation"`
	// Applies counts applies since the agent started (drift repairs
	// included), Changes is what the last one changed (0 on a node
	// already as desired, e.g. the first apply after a restart).
	Applies int `json:"applies"`
	Changes int `json:"changes"`
	// ApplyErrors counts the applies and drift repairs that failed
	// since the agent started.
	ApplyErrors int `json:"apply_errors"`
	// LastError is the last apply's or check's failure ("" when it
	// worked); a failed apply was rolled back by the applier.
	LastError string `json:"last_error,omitempty"`
	// Drift is what the last periodic check found different from the
	// applied state (re-applied since, unless LastError says otherwise).
	Drift []string `json:"drift,omitempty"`
	// DriftChecked is when the last check ran.
	DriftChecked *time.Time `json:"drift_checked,omitempty"`
	// Repaired is the last drift found and re-applied, at RepairedAt
	// (kept after later checks find the node as desired).
	Repaired   []string   `json:"repaired,omitempty"`
	RepairedAt *time.Time `json:"repaired_at,omitempty"`
	Time       time.Time  `json:"time"`
	Started    time.Time  `json:"started"`
	Version    string     `json:"version"`
}

// Agent runs one node.
type Agent struct {
	cfg Config
	log *slog.Logger

	status Status // only Run's goroutine touches the agent

	// snap is what the metrics collector reads, from the scraping
	// goroutine: a copy published at every status write.
	snapMu   sync.Mutex
	snap     metrics.Snapshot
	snapLast *desiredState

	lease clientv3.LeaseID
	// parts are the desired state's parts by chain (store.PartsPrefix),
	// decoded as they arrive; badParts those that did not decode.
	parts    map[string]*state.Part
	raw      map[string][]byte // the parts as stored, for the state file
	badParts map[string]error
	last     *desiredState // last applied; nil before the first
	lastGen  int64         // last's generation
	pending  *pendingState
	removed  *state.Node // what the records say the node may hold, removed from at the first apply
	// intent lists the states of applies that did not end, carried in
	// every intent record until one ends (record.go).
	intent []storedState
	// stateErr is what is wrong with the desired state itself (cannot
	// be decoded, lacks the node, deleted): reported until a new one.
	stateErr error
	// flows runs the node's per-flow setup loop while an applied chain
	// of its eBPF ingress has an NF pool.
	flows     flowsetup.Runner
	flowStats flowsetup.Stats
	// decodeTook is how long the last desired state took to decode and
	// join (logged with the apply).
	decodeTook time.Duration
}

type pendingState struct {
	gen  int64
	want *desiredState
}

// desiredState is a node's desired state as stored (internal/store): its
// base and its parts by chain. The whole node (state.Join) is built only
// when something needs it: a change to one chain is applied as the
// difference of that chain's parts (applyArgs), without joining and
// comparing the node's thousands of other items (issue 12: one chain
// change in under 50 ms at 10,000 chains).
type desiredState struct {
	baseBytes []byte
	base      state.Node
	parts     map[string]*state.Part // never changed in place
	raw       map[string][]byte      // the parts as stored, never changed in place
	once      sync.Once
	node      state.Node
}

// Node is the whole node.
func (d *desiredState) Node() state.Node {
	d.once.Do(func() { d.node = state.Join(d.base, d.parts) })
	return d.node
}

// clamps are the whole node's TCP MSS clamps, from every part, without
// joining them into a node (the clamp table is node-wide; apply is given
// only the changed chains' parts).
func (d *desiredState) clamps() []mss.Clamp {
	routes := slices.Clone(d.base.Routes)
	rules := slices.Clone(d.base.Rules)
	for _, p := range d.parts {
		routes = append(routes, p.Routes...)
		rules = append(rules, p.Rules...)
	}
	return mss.ClampsOf(routes, rules)
}

// with is the node of d's base and the parts of the chains listed.
func (d *desiredState) with(chains []string) state.Node {
	sub := map[string]*state.Part{}
	for _, c := range chains {
		if p := d.parts[c]; p != nil {
			sub[c] = p
		}
	}
	return state.Join(d.base, sub)
}

// changedChains lists the chains whose part differs from old to d (parts
// are decoded anew when they change, so a pointer tells).
func (d *desiredState) changedChains(old *desiredState) []string {
	var out []string
	for c, p := range d.parts {
		if old.parts[c] != p {
			out = append(out, c)
		}
	}
	for c := range old.parts {
		if _, ok := d.parts[c]; !ok {
			out = append(out, c)
		}
	}
	return out
}

// New checks cfg and returns an agent; Run starts it.
func New(cfg Config) (*Agent, error) {
	if cfg.Node == "" || cfg.NS == nil || cfg.Client == nil {
		return nil, errors.New("new agent: node, namespace and etcd client are required")
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Resync == 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.TTL < 2*time.Second {
		return nil, fmt.Errorf("new agent: lease TTL %v is under etcd's minimum of 2s", cfg.TTL)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	a := &Agent{cfg: cfg, log: log.With("node", cfg.Node, "netns", cfg.NS.Name)}
	a.flows = flowsetup.Runner{NS: cfg.NS, Log: a.log, Observe: a.flowStats.Observe}
	a.status = Status{Node: cfg.Node, Started: time.Now().UTC(), Version: cfg.Version}
	if cfg.StateFile != "" {
		rec := readRecord(cfg.StateFile)
		for _, err := range rec.problems {
			// Not fatal: the first apply reconciles against the node
			// (apply.Options.Owned) instead of trusting the record.
			a.log.Warn("agent state unreadable, reconciling against the node", "err", err)
		}
		if len(rec.intent) > 0 {
			a.log.Warn("an apply did not end (agent stopped in the middle?): removing what it may have left", "states", len(rec.intent))
		}
		a.removed, a.intent = rec.node, rec.intent
	}
	return a, nil
}

// Run registers the agent (waiting for etcd), then applies every desired
// state written for its node until ctx ends, which is what it returns. It
// leaves the lease to expire (a stopped agent and a crashed one look the
// same: down after the TTL) and what it applied in place.
//
// etcd going away is never fatal: what was applied stays as it is (the
// node keeps forwarding), every etcd call is retried with a capped,
// jittered exponential backoff (backoff.go), and once etcd answers again
// the agent reads its desired state anew and applies what changed
// meanwhile.
func (a *Agent) Run(ctx context.Context) error {
	cli := a.cfg.Client
	reg, _ := json.Marshal(map[string]any{"version": a.cfg.Version, "started": a.status.Started})
	var bo backoff
	for {
		pctx, cancel := context.WithTimeout(ctx, etcdTimeout)
		_, err := cli.Put(pctx, store.AgentKey(a.cfg.Node), string(reg))
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d := bo.wait()
		a.log.Warn("register agent: etcd unreachable, retrying", "err", err, "retry_in", d.Round(time.Millisecond))
		if !a.wait(ctx, d) {
			return ctx.Err()
		}
	}
	bo.reset()
	kaLost, err := a.grant(ctx)
	if err != nil {
		a.log.Warn("status lease", "err", err)
		kaLost = closed() // retried in watch
	}
	tick := time.NewTicker(a.cfg.Resync)
	defer tick.Stop()
	defer a.flows.Stop()
	for {
		// (Re)read the desired state, apply it, then watch from the
		// revision read: nothing written in between is missed.
		rev, err := a.sync(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			d := bo.wait()
			a.log.Warn("read desired state: etcd unreachable, retrying; the applied state stays", "err", err, "retry_in", d.Round(time.Millisecond))
			if !a.wait(ctx, d) {
				return ctx.Err()
			}
			continue
		}
		bo.reset()
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := cli.Watch(wctx, store.DesiredKey(a.cfg.Node), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		err = a.watch(ctx, wch, tick.C, &kaLost)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a.log.Warn("watch ended, resyncing", "err", err)
	}
}

// watch handles watch responses, drift checks and lease loss until the
// watch fails (compaction, lost leader, closed channel) or ctx ends.
func (a *Agent) watch(ctx context.Context, wch clientv3.WatchChan, tick <-chan time.Time, kaLost *<-chan struct{}) error {
	var bo backoff
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case resp, ok := <-wch:
			if !ok {
				return errors.New("watch channel closed")
			}
			if resp.CompactRevision != 0 {
				return fmt.Errorf("watch compacted at revision %d", resp.CompactRevision)
			}
			if err := resp.Err(); err != nil {
				return fmt.Errorf("watch: %w", err)
			}
			// One write's parts and base come in one response at one
			// revision: the parts first, then the base applies them.
			var base *mvccpb.KeyValue
			// Parts change in a copy: the applied state shares the maps.
			a.parts, a.raw = maps.Clone(a.parts), maps.Clone(a.raw)
			for _, ev := range resp.Events {
				_, chain, ok := store.ParseDesiredKey(string(ev.Kv.Key))
				switch {
				case !ok:
				case chain == "":
					base = ev.Kv
					if ev.Type == clientv3.EventTypeDelete {
						base = nil
						a.deleted(ctx, ev.Kv.ModRevision)
					}
				case ev.Type == clientv3.EventTypeDelete:
					a.setPart(chain, nil)
				default:
					a.setPart(chain, ev.Kv.Value)
				}
			}
			if base != nil {
				a.desired(ctx, base.Value, base.ModRevision)
			}
		case <-tick:
			a.resync(ctx)
		case <-*kaLost:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// The lease expired (etcd away longer than the TTL) or
			// was never granted: take a new one and report again.
			a.log.Warn("no status lease, granting one")
			a.lease = 0
			a.publish()
			lost, err := a.grant(ctx)
			if err != nil {
				d := bo.wait()
				a.log.Warn("grant lease: etcd unreachable, retrying", "err", err, "retry_in", d.Round(time.Millisecond))
				if !a.wait(ctx, d) {
					return ctx.Err()
				}
				lost = closed()
			} else {
				bo.reset()
			}
			*kaLost = lost
		}
	}
}

func closed() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

func (a *Agent) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// grant takes a lease, keeps it alive while ctx lasts, and writes the
// status under it; the returned channel closes when the lease is lost.
func (a *Agent) grant(ctx context.Context) (<-chan struct{}, error) {
	cli := a.cfg.Client
	gctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	l, err := cli.Grant(gctx, int64((a.cfg.TTL+time.Second-1)/time.Second))
	if err != nil {
		return nil, fmt.Errorf("grant status lease: %w", err)
	}
	ka, err := cli.KeepAlive(ctx, l.ID)
	if err != nil {
		return nil, fmt.Errorf("keep status lease alive: %w", err)
	}
	lost := make(chan struct{})
	go func() {
		for range ka {
		}
		close(lost)
	}()
	a.lease = l.ID
	a.write(ctx)
	return lost, nil
}

// sync reads the node's desired state (base and parts), applies it if
// new, and returns the revision read.
func (a *Agent) sync(ctx context.Context) (int64, error) {
	gctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	resp, err := a.cfg.Client.Get(gctx, store.DesiredKey(a.cfg.Node), clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", store.DesiredKey(a.cfg.Node), err)
	}
	a.parts, a.raw, a.badParts = nil, nil, nil
	var base *mvccpb.KeyValue
	for _, kv := range resp.Kvs {
		switch _, chain, ok := store.ParseDesiredKey(string(kv.Key)); {
		case !ok:
		case chain == "":
			base = kv
		default:
			a.setPart(chain, kv.Value)
		}
	}
	if base != nil {
		a.desired(ctx, base.Value, base.ModRevision)
	} else {
		a.deleted(ctx, resp.Header.Revision)
	}
	return resp.Header.Revision, nil
}

// setPart decodes and keeps one chain's part of the desired state (nil
// removes it). Only changed parts are decoded: a change to one chain
// costs the decoding of that chain, not of the node.
// a.parts must be a map no applied state shares (watch, sync).
func (a *Agent) setPart(chain string, b []byte) {
	delete(a.parts, chain)
	delete(a.raw, chain)
	delete(a.badParts, chain)
	if b == nil {
		return
	}
	p, err := state.DecodePart(b)
	if err != nil {
		if a.badParts == nil {
			a.badParts = map[string]error{}
		}
		a.badParts[chain] = err
		return
	}
	if a.parts == nil {
		a.parts, a.raw = map[string]*state.Part{}, map[string][]byte{}
	}
	a.parts[chain], a.raw[chain] = p, b
}

// desired handles the node's stored base of generation gen with the parts
// kept.
func (a *Agent) desired(ctx context.Context, b []byte, gen int64) {
	if gen == a.status.DesiredGeneration && a.last != nil && a.lastGen == gen {
		return // seen and applied (a resync re-read it)
	}
	t0 := time.Now()
	want, err := a.decode(b)
	a.decodeTook = time.Since(t0)
	a.status.DesiredGeneration = gen
	a.stateErr = err
	if err != nil {
		a.pending = nil
		a.log.Error("bad desired state", "generation", gen, "err", err)
		a.report(ctx, nil)
		return
	}
	a.pending = &pendingState{gen: gen, want: want}
	a.applyPending(ctx)
}

func (a *Agent) decode(b []byte) (*desiredState, error) {
	for chain, err := range a.badParts {
		return nil, fmt.Errorf("chain %s: %w", chain, err)
	}
	var net state.Network
	if err := json.Unmarshal(b, &net); err != nil {
		return nil, fmt.Errorf("decode desired state: %w", err)
	}
	if err := net.CheckVersion(); err != nil {
		return nil, err
	}
	for _, n := range net.Nodes {
		if n.Name == a.cfg.Node {
			return &desiredState{baseBytes: b, base: n, parts: a.parts, raw: a.raw}, nil
		}
	}
	return nil, fmt.Errorf("desired state of %s: %w", a.cfg.Node, ErrNoNode)
}

// applyPending applies the pending desired state: the difference from the
// last applied one, or in full (read back) the first time. On failure the
// applier rolled the node back; the state stays pending and the next
// resync tries again.
func (a *Agent) applyPending(ctx context.Context) {
	p := a.pending
	if p == nil {
		return
	}
	t0 := time.Now()
	node, opts := a.applyArgs(p.want)
	if a.cfg.StateFile != "" {
		// Intent first (record.go): killed in the middle of the apply,
		// the agent finds on restart what the node may hold.
		if err := a.recordIntent(p.want); err != nil {
			a.status.ApplyErrors++
			a.log.Error("apply not started", "generation", p.gen, "err", err)
			a.report(ctx, err)
			return
		}
	}
	res, err := apply.ApplyWith(ctx, a.cfg.NS, node, opts)
	took := time.Since(t0)
	a.status.Applies++
	a.status.Changes = res.Changes
	if err != nil {
		a.status.ApplyErrors++
		a.log.Error("apply failed (rolled back)", "generation", p.gen, "err", err)
		a.report(ctx, err)
		return
	}
	a.last, a.pending, a.removed = p.want, nil, nil
	// The per-flow setup reads the node's programs and tunnel source,
	// which are the base's.
	if err := a.flows.Set(ctx, p.want.base); err != nil {
		a.log.Error("per-flow setup", "err", err)
	}
	gen := p.gen
	a.lastGen = gen
	a.status.AppliedGeneration = &gen
	a.log.Info("applied", "generation", gen, "changes", res.Changes, "decode", a.decodeTook.Round(time.Microsecond), "apply", took.Round(time.Microsecond))
	// Reported before the state file is written (two fsyncs, ~13 ms at
	// 10,000 chains, off the path from a write to its report): until it
	// is, the intent record still names what was applied.
	a.report(ctx, nil)
	if a.cfg.StateFile != "" {
		ferr := writeStateFile(a.cfg.StateFile, p.want)
		if ferr == nil {
			a.intent = nil
			ferr = removeIntent(a.cfg.StateFile)
		} else {
			// The state file still names an older state: the applied
			// one goes with every intent until a state file is written.
			a.intent = []storedState{p.want.stored(nil)}
		}
		if ferr != nil {
			a.report(ctx, ferr)
		}
	}
}

// recordIntent writes the intent record of applying want (record.go):
// the states of applies that did not end, and what want adds to the
// state file's: its base and the parts of the chains it changes (all of
// them on the first apply).
func (a *Agent) recordIntent(want *desiredState) error {
	var chains []string
	if a.last != nil {
		chains = want.changedChains(a.last)
		if chains == nil {
			chains = []string{}
		}
	}
	s := want.stored(chains)
	states := slices.Clone(a.intent)
	if !slices.ContainsFunc(states, s.equal) {
		states = append(states, s)
	}
	if err := writeIntent(a.cfg.StateFile, states); err != nil {
		return err
	}
	a.intent = states
	return nil
}

// applyArgs is what applying want takes: the whole node as the
// difference from the last applied one, or in full (read back) the first
// time. When only parts changed, and none of them holds a SID (SIDs feed
// the node's programs, which are applied with the whole node), it is
// only the changed chains: the node of the base and their new parts as
// the difference from the base and their old parts. Other chains' items
// are in neither, so they are left alone; the base's are in both, so
// they are taken as in place. The applier works the same on that subset
// (a chain's routes and rules never share a table and prefix, or a
// priority, with another chain's).
func (a *Agent) applyArgs(want *desiredState) (state.Node, apply.Options) {
	opts := apply.Options{Drivers: a.cfg.Drivers, Logger: a.log}
	last := a.last
	if last == nil {
		// The first apply: whatever the node holds, from before a
		// restart, a killed apply or a lost record, its srchain part
		// becomes want (Owned), and what the records name goes too.
		opts.Remove, opts.Owned = a.removed, true
		return want.Node(), opts
	}
	if string(last.baseBytes) == string(want.baseBytes) {
		changed := want.changedChains(last)
		noSIDs := func(d *desiredState) bool {
			for _, c := range changed {
				if p := d.parts[c]; p != nil && len(p.SIDs) > 0 {
					return false
				}
			}
			return true
		}
		if noSIDs(last) && noSIDs(want) {
			old := last.with(changed)
			opts.Prev, opts.Remove = &old, &old
			clamps := want.clamps()
			opts.Clamps = &clamps
			return want.with(changed), opts
		}
	}
	old := last.Node()
	opts.Prev, opts.Remove = &old, &old
	return want.Node(), opts
}

// deleted: the node's desired state is gone (the node left the spec).
// What was applied stays: on a host it may carry traffic that the
// operator moves away first; the status says so.
func (a *Agent) deleted(ctx context.Context, rev int64) {
	if a.last == nil && a.pending == nil && a.status.DesiredGeneration == 0 {
		a.report(ctx, nil)
		return
	}
	a.pending = nil
	a.status.DesiredGeneration = 0
	a.stateErr = errors.New("no desired state for this node; the last applied state is left in place")
	a.log.Warn("desired state deleted; the applied state is left in place", "revision", rev)
	a.report(ctx, nil)
}

// resync retries a pending apply, else checks the applied state and
// re-applies it in full when something drifted.
func (a *Agent) resync(ctx context.Context) {
	if a.pending != nil {
		a.applyPending(ctx)
		return
	}
	if a.last == nil {
		return
	}
	last := a.last.Node()
	// From the node: routes and rules of srchain's the state lacks are
	// drift too (apply.CheckOwned), so in sync means the node is as
	// desired, not that a record says so.
	drift, err := apply.CheckOwned(ctx, a.cfg.NS, last)
	if err == nil {
		var pd []string
		pd, err = apply.CheckProgramsWith(ctx, a.cfg.NS, last, a.cfg.Drivers)
		drift = append(drift, pd...)
	}
	now := time.Now().UTC()
	a.status.Drift, a.status.DriftChecked = drift, &now
	if err != nil {
		a.report(ctx, fmt.Errorf("check drift: %w", err))
		return
	}
	if len(drift) == 0 {
		a.setApplied()
		a.report(ctx, nil)
		return
	}
	a.log.Warn("drift found, re-applying", "drift", drift)
	// In full (no Prev): what drifted must be read back to be repaired.
	res, err := apply.ApplyWith(ctx, a.cfg.NS, last, apply.Options{Drivers: a.cfg.Drivers, Logger: a.log, Owned: true})
	a.status.Applies++
	a.status.Changes = res.Changes
	if err != nil {
		a.status.ApplyErrors++
		err = fmt.Errorf("repair drift: %w", err)
		// The node is not at the last applied generation any more:
		// reported as applying none (in_sync false) until a check or
		// repair finds it so again.
		a.status.AppliedGeneration = nil
	} else {
		a.status.Repaired, a.status.RepairedAt = drift, &now
		a.setApplied()
	}
	a.report(ctx, err)
}

// setApplied reports the last applied generation as applied: the node
// was found as it says.
func (a *Agent) setApplied() {
	if a.last != nil && a.status.DesiredGeneration != 0 {
		gen := a.lastGen
		a.status.AppliedGeneration = &gen
	}
}

// report sets LastError to err (the last apply's or check's) and what is
// wrong with the desired state, and writes the status.
func (a *Agent) report(ctx context.Context, err error) {
	a.status.LastError = ""
	if err := errors.Join(a.stateErr, err); err != nil {
		a.status.LastError = err.Error()
	}
	a.write(ctx)
}

// write puts the status under the lease.
func (a *Agent) write(ctx context.Context) {
	a.publish()
	if a.lease == 0 {
		// Never without a lease: such a status would outlive the agent.
		// The next grant writes it.
		return
	}
	a.status.Time = time.Now().UTC()
	b, _ := json.Marshal(a.status)
	pctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	if _, perr := a.cfg.Client.Put(pctx, store.StatusKey(a.cfg.Node), string(b), clientv3.WithLease(a.lease)); perr != nil && ctx.Err() == nil {
		a.log.Warn("write status", "err", perr)
	}
}

// publish copies what the metrics show of the status for Snapshot.
func (a *Agent) publish() {
	s := metrics.Snapshot{
		Up:                a.lease != 0,
		DesiredGeneration: a.status.DesiredGeneration,
		ApplyErrors:       uint64(a.status.ApplyErrors),
		Drift:             len(a.status.Drift),
	}
	if g := a.status.AppliedGeneration; g != nil {
		v := *g
		s.AppliedGeneration = &v
	}
	a.snapMu.Lock()
	a.snap, a.snapLast = s, a.last
	a.snapMu.Unlock()
}

// Snapshot returns what the agent last published (safe from any
// goroutine). a.last is never changed in place, only replaced, so
// sharing the pointer is safe; its whole node is joined at the first
// scrape that needs it.
func (a *Agent) Snapshot() metrics.Snapshot {
	a.snapMu.Lock()
	s, last := a.snap, a.snapLast
	a.snapMu.Unlock()
	if last != nil {
		n := last.Node()
		s.Node = &n
	}
	if s.Node != nil {
		if _, ok := flowsetup.PoolConfig(*s.Node); ok {
			f := a.flowStats.Read()
			s.Flows = &f
		}
	}
	return s
}

// MetricsHandler serves the node's Prometheus metrics (docs/metrics.md):
// collected at scrape time from the pinned maps of what the agent last
// applied, plus the agent's own status.
func (a *Agent) MetricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	drivers := make(map[string]kind.Driver, len(a.cfg.Drivers))
	for k, d := range a.cfg.Drivers {
		drivers[k] = d
	}
	reg.MustRegister(metrics.New(metrics.Config{Node: a.cfg.Node, NS: a.cfg.NS, Snapshot: a.Snapshot, Drivers: drivers, Logger: a.log}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn)})
}
