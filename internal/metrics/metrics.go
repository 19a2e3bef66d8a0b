// Package metrics exports a node's counters to Prometheus (docs/metrics.md).
//
// It follows the collector model of cloudflare/tubular: nothing is
// counted or cached between scrapes. On every scrape Collect asks each
// program's kind driver for its counters (kind.Driver.Counters, which
// opens the pinned maps read-only), turns the counter names into metric
// families with labels, and emits constant metrics. A scrape nobody makes
// costs nothing. What could not be read is counted in
// srchain_collection_errors_total, emitted last so that the failing scrape
// already reports it.
package metrics

import (
	"context"
	"github.com/srchain/srchain/internal/flowsetup"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// Snapshot is what the collector reads of the agent at scrape time.
type Snapshot struct {
	// Node is the last state applied in full; nil before the first
	// apply (then no program counters are read).
	Node *state.Node
	// Up: the agent holds its status lease (the controller sees it up).
	Up bool
	// AppliedGeneration is nil until a generation was applied.
	AppliedGeneration *int64
	DesiredGeneration int64
	// ApplyErrors counts failed applies and drift repairs since start.
	ApplyErrors uint64
	// Drift is how many differences the last drift check found.
	Drift int
	// Flows is what the node's per-flow setup loop did (nil: it runs
	// none).
	Flows *flowsetup.StatsSnapshot
}

// Config is one node's collector.
type Config struct {
	// Node names the node in every metric's node label.
	Node string
	// NS is the namespace whose pins the drivers read.
	NS *netns.NS
	// Snapshot returns the agent's current state; it must be safe to
	// call from the scraping goroutine.
	Snapshot func() Snapshot
	// Drivers overrides the registered program drivers (tests).
	Drivers map[string]kind.Driver
	// Timeout bounds one scrape's reads (DefaultTimeout when 0).
	Timeout time.Duration
	// Logger says why a read failed (slog.Default when nil).
	Logger *slog.Logger
	// KernelSIDs reads the kernel's counters of the node's seg6local
	// SIDs (apply.KernelSIDCounters when nil; tests replace it).
	KernelSIDs func(*netns.NS, state.Node) ([]apply.KernelSIDCounter, error)
}

// DefaultTimeout of one collection.
const DefaultTimeout = 5 * time.Second

// Metric names (docs/metrics.md).
const (
	NameSIDPackets        = "srchain_sid_packets_total"
	NameSIDBytes          = "srchain_sid_bytes_total"
	NameKernelSIDPackets  = "srchain_kernel_sid_packets_total"
	NameKernelSIDBytes    = "srchain_kernel_sid_bytes_total"
	NameKernelSIDErrors   = "srchain_kernel_sid_errors_total"
	NameRulePackets       = "srchain_firewall_rule_packets_total"
	NameRuleBytes         = "srchain_firewall_rule_bytes_total"
	NameDrops             = "srchain_drops_total"
	NameFIB               = "srchain_fib_total"
	NameCounter           = "srchain_program_events_total"
	NameAgentUp           = "srchain_agent_up"
	NameDesiredGeneration = "srchain_desired_generation"
	NameAppliedGeneration = "srchain_applied_generation"
	NameApplyErrors       = "srchain_apply_errors_total"
	NameDrift             = "srchain_drift"
	NameCollectionErrors  = "srchain_collection_errors_total"
	NameFlowSetups        = "srchain_flow_setups_total"
	NameFlowSetupSeconds  = "srchain_flow_setup_seconds"
)

// Collector implements prometheus.Collector for one node.
type Collector struct {
	cfg    Config
	errors atomic.Uint64
	names  []string

	sidPackets, sidBytes, rulePackets, ruleBytes, drops, fib, counter *prometheus.Desc
	up, desired, applied, applyErrors, drift, collectionErrors        *prometheus.Desc
	flowSetups, flowSetupSeconds                                      *prometheus.Desc
	kernelSIDPackets, kernelSIDBytes, kernelSIDErrors                 *prometheus.Desc
}

// New returns the collector of cfg.Node.
func New(cfg Config) *Collector {
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Snapshot == nil {
		cfg.Snapshot = func() Snapshot { return Snapshot{} }
	}
	if cfg.KernelSIDs == nil {
		cfg.KernelSIDs = func(ns *netns.NS, n state.Node) ([]apply.KernelSIDCounter, error) {
			if ns == nil {
				return nil, nil // no namespace to read (tests)
			}
			return apply.KernelSIDCounters(ns, n)
		}
	}
	// The node label is constant: one collector serves one node.
	node := prometheus.Labels{"node": cfg.Node}
	var names []string
	d := func(name, help string, labels ...string) *prometheus.Desc {
		names = append(names, name)
		return prometheus.NewDesc(name, help, labels, node)
	}
	c := &Collector{
		cfg:        cfg,
		sidPackets: d(NameSIDPackets, "Packets served by an eBPF SID.", "sid", "nf"),
		sidBytes:   d(NameSIDBytes, "Bytes served by an eBPF SID.", "sid", "nf"),
		// Separate families, not a label of the eBPF ones: an eBPF SID
		// has a seg6local route too, which counts only the packets its
		// program handed the kernel, and a sum over both would count
		// the program's packets once more (docs/metrics.md).
		kernelSIDPackets: d(NameKernelSIDPackets, "Packets the kernel's seg6local behaviour of a SID processed (ip route ... count).", "sid", "nf"),
		kernelSIDBytes:   d(NameKernelSIDBytes, "Bytes of those packets.", "sid", "nf"),
		kernelSIDErrors:  d(NameKernelSIDErrors, "Packets the kernel's seg6local behaviour of a SID dropped.", "sid", "nf"),
		rulePackets:      d(NameRulePackets, "Packets that matched a firewall rule (rule=\"policy\": the chain policy).", "nf", "rule"),
		ruleBytes:        d(NameRuleBytes, "Bytes that matched a firewall rule (rule=\"policy\": the chain policy).", "nf", "rule"),
		drops:            d(NameDrops, "Packets a program dropped, by reason (internal/drop).", "program", "nf", "reason"),
		fib:              d(NameFIB, "FIB lookup outcomes of a program (bpf/lib/fib.h).", "program", "nf", "outcome"),
		counter:          d(NameCounter, "Any other counter a program's driver reports, by its name.", "program", "nf", "counter"),
		up:               d(NameAgentUp, "1 when the agent holds its status lease (the controller sees it up)."),
		desired:          d(NameDesiredGeneration, "Newest desired-state generation the agent saw (0: none)."),
		applied:          d(NameAppliedGeneration, "Desired-state generation last applied in full (absent before the first)."),
		applyErrors:      d(NameApplyErrors, "Failed applies and drift repairs since the agent started."),
		drift:            d(NameDrift, "Differences from the applied state the last drift check found."),
		flowSetups:       d(NameFlowSetups, "New flows of a chain with an NF pool placed on an instance by the per-flow setup loop.", "chain", "nf"),
		flowSetupSeconds: d(NameFlowSetupSeconds,
			"Per-flow setup time: a new flow's first packet from the eBPF ingress to its departure toward the first NF."),
		collectionErrors: d(NameCollectionErrors,
			"Reads that failed while collecting these metrics since start (counted in the scrape that failed)."),
	}
	c.names = names
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs() {
		ch <- d
	}
}

func (c *Collector) descs() []*prometheus.Desc {
	return []*prometheus.Desc{c.sidPackets, c.sidBytes, c.rulePackets, c.ruleBytes, c.drops, c.fib, c.counter,
		c.up, c.desired, c.applied, c.applyErrors, c.drift, c.collectionErrors, c.flowSetups, c.flowSetupSeconds,
		c.kernelSIDPackets, c.kernelSIDBytes, c.kernelSIDErrors}
}

// Names lists every metric name the collector may emit (the dashboard
// test checks its queries against it).
func (c *Collector) Names() []string {
	return append([]string(nil), c.names...)
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	snap := c.cfg.Snapshot()
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	up := 0.0
	if snap.Up {
		up = 1
	}
	gauge(c.up, up)
	gauge(c.desired, float64(snap.DesiredGeneration))
	if snap.AppliedGeneration != nil {
		gauge(c.applied, float64(*snap.AppliedGeneration))
	}
	ch <- prometheus.MustNewConstMetric(c.applyErrors, prometheus.CounterValue, float64(snap.ApplyErrors))
	gauge(c.drift, float64(snap.Drift))
	if snap.Node != nil {
		c.collectPrograms(ch, *snap.Node)
		c.collectKernelSIDs(ch, *snap.Node)
	}
	if f := snap.Flows; f != nil {
		for k, v := range f.Setups {
			ch <- prometheus.MustNewConstMetric(c.flowSetups, prometheus.CounterValue, float64(v), k[0], k[1])
		}
		ch <- prometheus.MustNewConstHistogram(c.flowSetupSeconds, f.Count, f.Sum, f.Buckets)
	}
	// Last: the errors of this very scrape are in it.
	ch <- prometheus.MustNewConstMetric(c.collectionErrors, prometheus.CounterValue, float64(c.errors.Load()))
}

// collectPrograms emits the counters of every program of node.
func (c *Collector) collectPrograms(ch chan<- prometheus.Metric, node state.Node) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	sidNF := sidNFs(node)
	// Two programs must not emit the same series (the registry would
	// fail the whole scrape): the first wins, the rest are errors.
	type series struct {
		d      *prometheus.Desc
		labels string
	}
	seen := map[series]bool{}
	emit := func(d *prometheus.Desc, v uint64, labels ...string) {
		key := series{d, strings.Join(labels, "\x00")}
		if seen[key] {
			c.errors.Add(1)
			c.cfg.Logger.Warn("metrics: series reported twice", "metric", d.String(), "labels", labels)
			return
		}
		seen[key] = true
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, p := range node.Programs {
		d, ok := c.cfg.Drivers[p.Kind]
		if !ok {
			d, ok = kind.DriverFor(p.Kind)
		}
		if !ok {
			c.errors.Add(1)
			c.cfg.Logger.Warn("metrics: no driver", "program", p.Kind, "nf", p.NF)
			continue
		}
		counters, err := d.Counters(ctx, c.cfg.NS, node, p)
		if err != nil {
			c.errors.Add(1)
			c.cfg.Logger.Warn("metrics: read counters", "program", p.Kind, "nf", p.NF, "err", err)
			continue
		}
		for _, k := range counters {
			c.emitCounter(emit, p, sidNF, k)
		}
	}
}

// collectKernelSIDs emits the kernel's counters of node's seg6local
// SIDs, read from one route dump of the node's namespace.
func (c *Collector) collectKernelSIDs(ch chan<- prometheus.Metric, node state.Node) {
	if !apply.HasKernelSIDs(node) {
		return
	}
	cs, err := c.cfg.KernelSIDs(c.cfg.NS, node)
	if err != nil {
		c.errors.Add(1)
		c.cfg.Logger.Warn("metrics: read kernel sid counters", "err", err)
		return
	}
	sidNF := sidNFs(node)
	seen := map[string]bool{}
	for _, k := range cs {
		sid := k.SID.Addr().String()
		if seen[sid] {
			// Two SIDs with one address (different lengths): the
			// series would repeat and fail the scrape.
			c.errors.Add(1)
			continue
		}
		seen[sid] = true
		ch <- prometheus.MustNewConstMetric(c.kernelSIDPackets, prometheus.CounterValue, float64(k.Packets), sid, sidNF[sid])
		ch <- prometheus.MustNewConstMetric(c.kernelSIDBytes, prometheus.CounterValue, float64(k.Bytes), sid, sidNF[sid])
		ch <- prometheus.MustNewConstMetric(c.kernelSIDErrors, prometheus.CounterValue, float64(k.Errors), sid, sidNF[sid])
	}
}

// emitCounter maps one driver counter (kind.Counter.Name) to its family.
// Names a driver reports (internal/kinds/*/driver.go):
//
//	sid/ADDR/packets, sid/ADDR/bytes   End program's per-SID counters
//	rule/N/packets, rule/N/bytes       firewall rule N (0-based)
//	policy/packets, policy/bytes       firewall chain policy
//	drop/REASON                        drops (internal/drop names)
//	fib/OUTCOME                        FIB outcomes (bpfrt.ReadFIBCounts)
//
// Anything else goes to srchain_program_events_total, so a new kind's
// counters are exported before anyone names them here.
func (c *Collector) emitCounter(emit func(*prometheus.Desc, uint64, ...string), p state.Program, sidNF map[string]string, k kind.Counter) {
	parts := strings.Split(k.Name, "/")
	switch {
	case len(parts) == 3 && parts[0] == "sid" && (parts[2] == "packets" || parts[2] == "bytes"):
		d := c.sidPackets
		if parts[2] == "bytes" {
			d = c.sidBytes
		}
		emit(d, k.Value, parts[1], sidNF[parts[1]])
		return
	case len(parts) == 3 && parts[0] == "rule" && (parts[2] == "packets" || parts[2] == "bytes"),
		len(parts) == 2 && parts[0] == "policy" && (parts[1] == "packets" || parts[1] == "bytes"):
		d := c.rulePackets
		if parts[len(parts)-1] == "bytes" {
			d = c.ruleBytes
		}
		rule := "policy"
		if parts[0] == "rule" {
			rule = parts[1]
		}
		emit(d, k.Value, p.NF, rule)
		return
	case len(parts) == 2 && parts[0] == "drop":
		emit(c.drops, k.Value, p.Kind, p.NF, parts[1])
		return
	case len(parts) == 2 && parts[0] == "fib":
		emit(c.fib, k.Value, p.Kind, p.NF, parts[1])
		return
	}
	emit(c.counter, k.Value, p.Kind, p.NF, k.Name)
}

// sidNFs maps each SID address (as the End driver names it) to the NF it
// fronts.
func sidNFs(node state.Node) map[string]string {
	out := map[string]string{}
	for _, s := range node.SIDs {
		out[s.SID.Addr().String()] = s.NF
	}
	return out
}
