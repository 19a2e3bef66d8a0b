package metrics

import (
	"context"
	"errors"
	"github.com/srchain/srchain/internal/flowsetup"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// fakeDriver returns fixed counters, or err.
type fakeDriver struct {
	counters []kind.Counter
	err      error
	calls    int
}

func (f *fakeDriver) Apply(context.Context, *netns.NS, state.Node, state.Program) (func() error, error) {
	return nil, errors.New("not in this test")
}
func (f *fakeDriver) Check(context.Context, *netns.NS, state.Node, state.Program) ([]string, error) {
	return nil, nil
}
func (f *fakeDriver) Remove(context.Context, *netns.NS, state.Node, state.Program) error { return nil }
func (f *fakeDriver) Counters(_ context.Context, _ *netns.NS, _ state.Node, p state.Program) ([]kind.Counter, error) {
	f.calls++
	return f.counters, f.err
}

// testNode has an End program serving fw's SID and a firewall NF fw2.
func testNode() *state.Node {
	return &state.Node{
		Name: "r2",
		SIDs: []state.LocalSID{
			{SID: netip.MustParsePrefix("fc00:2::1:0/112"), NF: "fw", Datapath: "ebpf"},
			{SID: netip.MustParsePrefix("fc00:2::2/128"), Datapath: "ebpf"},
		},
		Programs: []state.Program{
			{Kind: "end", Interfaces: []string{"eth0"}},
			{Kind: "firewall", NF: "fw2", Interfaces: []string{"eth1"}},
		},
	}
}

func endCounters() []kind.Counter {
	return []kind.Counter{
		{Name: "drop/srh_bad_sl", Value: 3},
		{Name: "fib/success", Value: 40},
		{Name: "sid/fc00:2::1:0/bytes", Value: 4200},
		{Name: "sid/fc00:2::1:0/packets", Value: 42},
		{Name: "sid/fc00:2::2/bytes", Value: 0},
		{Name: "sid/fc00:2::2/packets", Value: 0},
	}
}

func fwCounters() []kind.Counter {
	return []kind.Counter{
		{Name: "rule/0/packets", Value: 5}, {Name: "rule/0/bytes", Value: 500},
		{Name: "policy/packets", Value: 1}, {Name: "policy/bytes", Value: 100},
		{Name: "drop/fw_denied", Value: 1},
		{Name: "opot/replay", Value: 2}, // a name the collector does not know
	}
}

func gen(v int64) *int64 { return &v }

const expected = `
# HELP srchain_agent_up 1 when the agent holds its status lease (the controller sees it up).
# TYPE srchain_agent_up gauge
srchain_agent_up{node="r2"} 1
# HELP srchain_applied_generation Desired-state generation last applied in full (absent before the first).
# TYPE srchain_applied_generation gauge
srchain_applied_generation{node="r2"} 7
# HELP srchain_apply_errors_total Failed applies and drift repairs since the agent started.
# TYPE srchain_apply_errors_total counter
srchain_apply_errors_total{node="r2"} 2
# HELP srchain_collection_errors_total Reads that failed while collecting these metrics since start (counted in the scrape that failed).
# TYPE srchain_collection_errors_total counter
srchain_collection_errors_total{node="r2"} 0
# HELP srchain_desired_generation Newest desired-state generation the agent saw (0: none).
# TYPE srchain_desired_generation gauge
srchain_desired_generation{node="r2"} 9
# HELP srchain_drift Differences from the applied state the last drift check found.
# TYPE srchain_drift gauge
srchain_drift{node="r2"} 1
# HELP srchain_drops_total Packets a program dropped, by reason (internal/drop).
# TYPE srchain_drops_total counter
srchain_drops_total{nf="",node="r2",program="end",reason="srh_bad_sl"} 3
srchain_drops_total{nf="fw2",node="r2",program="firewall",reason="fw_denied"} 1
# HELP srchain_fib_total FIB lookup outcomes of a program (bpf/lib/fib.h).
# TYPE srchain_fib_total counter
srchain_fib_total{nf="",node="r2",outcome="success",program="end"} 40
# HELP srchain_firewall_rule_bytes_total Bytes that matched a firewall rule (rule="policy": the chain policy).
# TYPE srchain_firewall_rule_bytes_total counter
srchain_firewall_rule_bytes_total{nf="fw2",node="r2",rule="0"} 500
srchain_firewall_rule_bytes_total{nf="fw2",node="r2",rule="policy"} 100
# HELP srchain_firewall_rule_packets_total Packets that matched a firewall rule (rule="policy": the chain policy).
# TYPE srchain_firewall_rule_packets_total counter
srchain_firewall_rule_packets_total{nf="fw2",node="r2",rule="0"} 5
srchain_firewall_rule_packets_total{nf="fw2",node="r2",rule="policy"} 1
# HELP srchain_program_events_total Any other counter a program's driver reports, by its name.
# TYPE srchain_program_events_total counter
srchain_program_events_total{counter="opot/replay",nf="fw2",node="r2",program="firewall"} 2
# HELP srchain_sid_bytes_total Bytes served by an eBPF SID.
# TYPE srchain_sid_bytes_total counter
srchain_sid_bytes_total{nf="",node="r2",sid="fc00:2::2"} 0
srchain_sid_bytes_total{nf="fw",node="r2",sid="fc00:2::1:0"} 4200
# HELP srchain_sid_packets_total Packets served by an eBPF SID.
# TYPE srchain_sid_packets_total counter
srchain_sid_packets_total{nf="",node="r2",sid="fc00:2::2"} 0
srchain_sid_packets_total{nf="fw",node="r2",sid="fc00:2::1:0"} 42
`

func TestCollect(t *testing.T) {
	end, fw := &fakeDriver{counters: endCounters()}, &fakeDriver{counters: fwCounters()}
	c := New(Config{Node: "r2", Drivers: map[string]kind.Driver{"end": end, "firewall": fw},
		Snapshot: func() Snapshot {
			return Snapshot{Node: testNode(), Up: true, AppliedGeneration: gen(7), DesiredGeneration: 9, ApplyErrors: 2, Drift: 1}
		}})
	if err := testutil.CollectAndCompare(c, strings.NewReader(expected)); err != nil {
		t.Fatal(err)
	}
	// Nothing is cached: every scrape reads the drivers again.
	if err := testutil.CollectAndCompare(c, strings.NewReader(expected)); err != nil {
		t.Fatal(err)
	}
	if end.calls != 2 || fw.calls != 2 {
		t.Errorf("driver reads after two scrapes: end %d, firewall %d; want 2 each", end.calls, fw.calls)
	}
	if probs, err := testutil.CollectAndLint(c); err != nil || len(probs) != 0 {
		t.Errorf("lint: %v %v", probs, err)
	}
}

// TestCollectionErrors: a failing driver, a program with no driver and
// two programs reporting the same series each count one error in the
// scrape where they happen, and the other counters are still exported.
func TestCollectionErrors(t *testing.T) {
	node := testNode()
	node.Programs = append(node.Programs,
		state.Program{Kind: "broken", NF: "b"},
		state.Program{Kind: "nodriver"},
		state.Program{Kind: "firewall", NF: "fw2"}, // same series as the first fw2
	)
	drivers := map[string]kind.Driver{
		"end":      &fakeDriver{counters: endCounters()},
		"firewall": &fakeDriver{counters: fwCounters()[:1]},
		"broken":   &fakeDriver{err: errors.New("map gone")},
	}
	c := New(Config{Node: "r2", Drivers: drivers, Snapshot: func() Snapshot { return Snapshot{Node: node} }})
	want := func(n int) string {
		return `
# HELP srchain_collection_errors_total Reads that failed while collecting these metrics since start (counted in the scrape that failed).
# TYPE srchain_collection_errors_total counter
srchain_collection_errors_total{node="r2"} ` + string(rune('0'+n)) + `
# HELP srchain_sid_packets_total Packets served by an eBPF SID.
# TYPE srchain_sid_packets_total counter
srchain_sid_packets_total{nf="",node="r2",sid="fc00:2::2"} 0
srchain_sid_packets_total{nf="fw",node="r2",sid="fc00:2::1:0"} 42
`
	}
	// broken + nodriver + the duplicate fw2 rule: 3 in the first scrape,
	// 6 after the second.
	for _, n := range []int{3, 6} {
		if err := testutil.CollectAndCompare(c, strings.NewReader(want(n)), NameCollectionErrors, NameSIDPackets); err != nil {
			t.Fatal(err)
		}
	}
	// The registry serves the scrape (no duplicate series reach it).
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	}
}

// TestBeforeFirstApply: no node applied yet: status only, no applied
// generation, no program read.
func TestBeforeFirstApply(t *testing.T) {
	d := &fakeDriver{counters: endCounters()}
	c := New(Config{Node: "r1", Drivers: map[string]kind.Driver{"end": d}})
	const want = `
# HELP srchain_agent_up 1 when the agent holds its status lease (the controller sees it up).
# TYPE srchain_agent_up gauge
srchain_agent_up{node="r1"} 0
# HELP srchain_collection_errors_total Reads that failed while collecting these metrics since start (counted in the scrape that failed).
# TYPE srchain_collection_errors_total counter
srchain_collection_errors_total{node="r1"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), NameAgentUp, NameAppliedGeneration, NameCollectionErrors); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c); n != 5 {
		t.Errorf("%d metrics before the first apply, want 5 (the status ones, no applied generation)", n)
	}
	if d.calls != 0 {
		t.Errorf("driver read %d times before the first apply", d.calls)
	}
}

// TestStableLabels: every family keeps one label set whatever the
// counters (Desc fixes them; a sid the node does not list gets nf="").
func TestStableLabels(t *testing.T) {
	d := &fakeDriver{counters: []kind.Counter{{Name: "sid/fc00:9::1/packets", Value: 1}}}
	c := New(Config{Node: "r2", Drivers: map[string]kind.Driver{"end": d},
		Snapshot: func() Snapshot { return Snapshot{Node: &state.Node{Programs: []state.Program{{Kind: "end"}}}} }})
	const want = `
# HELP srchain_sid_packets_total Packets served by an eBPF SID.
# TYPE srchain_sid_packets_total counter
srchain_sid_packets_total{nf="",node="r2",sid="fc00:9::1"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), NameSIDPackets); err != nil {
		t.Fatal(err)
	}
}

func TestNames(t *testing.T) {
	c := New(Config{Node: "x"})
	names := c.Names()
	if len(names) != 18 || names[0] != NameSIDPackets || names[len(names)-1] != NameCollectionErrors {
		t.Errorf("Names() = %v", names)
	}
}

// TestFlowSetupMetrics: the per-flow setup loop's counts are exported
// per chain and instance, with the setup-time histogram.
func TestFlowSetupMetrics(t *testing.T) {
	var st flowsetup.Stats
	st.Observe(flowsetup.Setup{Chain: "web6", NF: "fw2", New: true, Sent: true, Latency: 300 * time.Microsecond})
	st.Observe(flowsetup.Setup{Chain: "web6", NF: "fw2", Sent: true, Latency: 2 * time.Millisecond})
	st.Observe(flowsetup.Setup{Chain: "web6", NF: "fw1", New: true})
	f := st.Read()
	c := New(Config{Node: "r1", Snapshot: func() Snapshot { return Snapshot{Flows: &f} }})
	const want = `
# HELP srchain_flow_setups_total New flows of a chain with an NF pool placed on an instance by the per-flow setup loop.
# TYPE srchain_flow_setups_total counter
srchain_flow_setups_total{chain="web6",nf="fw1",node="r1"} 1
srchain_flow_setups_total{chain="web6",nf="fw2",node="r1"} 1
# HELP srchain_flow_setup_seconds Per-flow setup time: a new flow's first packet from the eBPF ingress to its departure toward the first NF.
# TYPE srchain_flow_setup_seconds histogram
srchain_flow_setup_seconds_bucket{node="r1",le="0.0001"} 0
srchain_flow_setup_seconds_bucket{node="r1",le="0.00025"} 0
srchain_flow_setup_seconds_bucket{node="r1",le="0.0005"} 1
srchain_flow_setup_seconds_bucket{node="r1",le="0.001"} 1
srchain_flow_setup_seconds_bucket{node="r1",le="0.0025"} 2
srchain_flow_setup_seconds_bucket{node="r1",le="0.005"} 2
srchain_flow_setup_seconds_bucket{node="r1",le="0.01"} 2
srchain_flow_setup_seconds_bucket{node="r1",le="0.025"} 2
srchain_flow_setup_seconds_bucket{node="r1",le="0.1"} 2
srchain_flow_setup_seconds_bucket{node="r1",le="+Inf"} 2
srchain_flow_setup_seconds_sum{node="r1"} 0.0023
srchain_flow_setup_seconds_count{node="r1"} 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), NameFlowSetups, NameFlowSetupSeconds); err != nil {
		t.Fatal(err)
	}
}

// TestKernelSIDMetrics: the kernel's counters of the node's seg6local
// SIDs are exported per SID with the NF it fronts, in families of their
// own; a failed read counts one collection error and the program
// counters are still exported.
func TestKernelSIDMetrics(t *testing.T) {
	var fail error
	read := func(_ *netns.NS, n state.Node) ([]apply.KernelSIDCounter, error) {
		if fail != nil {
			return nil, fail
		}
		return []apply.KernelSIDCounter{
			{SID: n.SIDs[0].SID, KernelSIDCount: apply.KernelSIDCount{Packets: 10, Bytes: 1040, Errors: 1}},
			{SID: n.SIDs[1].SID, KernelSIDCount: apply.KernelSIDCount{}},
		}, nil
	}
	node := testNode()
	node.SIDs[0].Datapath = state.Kernel
	c := New(Config{Node: "r2", Drivers: map[string]kind.Driver{"end": &fakeDriver{}, "firewall": &fakeDriver{}},
		KernelSIDs: read, Snapshot: func() Snapshot { return Snapshot{Node: node} }})
	const want = `
# HELP srchain_collection_errors_total Reads that failed while collecting these metrics since start (counted in the scrape that failed).
# TYPE srchain_collection_errors_total counter
srchain_collection_errors_total{node="r2"} 0
# HELP srchain_kernel_sid_bytes_total Bytes of those packets.
# TYPE srchain_kernel_sid_bytes_total counter
srchain_kernel_sid_bytes_total{nf="",node="r2",sid="fc00:2::2"} 0
srchain_kernel_sid_bytes_total{nf="fw",node="r2",sid="fc00:2::1:0"} 1040
# HELP srchain_kernel_sid_errors_total Packets the kernel's seg6local behaviour of a SID dropped.
# TYPE srchain_kernel_sid_errors_total counter
srchain_kernel_sid_errors_total{nf="",node="r2",sid="fc00:2::2"} 0
srchain_kernel_sid_errors_total{nf="fw",node="r2",sid="fc00:2::1:0"} 1
# HELP srchain_kernel_sid_packets_total Packets the kernel's seg6local behaviour of a SID processed (ip route ... count).
# TYPE srchain_kernel_sid_packets_total counter
srchain_kernel_sid_packets_total{nf="",node="r2",sid="fc00:2::2"} 0
srchain_kernel_sid_packets_total{nf="fw",node="r2",sid="fc00:2::1:0"} 10
`
	names := []string{NameCollectionErrors, NameKernelSIDPackets, NameKernelSIDBytes, NameKernelSIDErrors}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	fail = errors.New("dump failed")
	const failed = `
# HELP srchain_collection_errors_total Reads that failed while collecting these metrics since start (counted in the scrape that failed).
# TYPE srchain_collection_errors_total counter
srchain_collection_errors_total{node="r2"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(failed), names...); err != nil {
		t.Fatal(err)
	}
	// A node whose SIDs are all served by programs (SR proxies) has no
	// seg6local route to read.
	node.SIDs = []state.LocalSID{{SID: node.SIDs[0].SID, Datapath: state.ProgramDatapath}}
	fail = nil
	if err := testutil.CollectAndCompare(c, strings.NewReader(failed), names...); err != nil {
		t.Fatal(err)
	}
}
