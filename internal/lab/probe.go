package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/trace"
)

// ExpectNone is the Expect of a probe no chain may steer.
const ExpectNone = "none"

// ExpectDrop is the Expect of a probe that must not arrive.
const ExpectDrop = "drop"

// ErrProbe: a probe could not be sent (bad protocol, unknown node).
var ErrProbe = errors.New("bad probe")

// Probe is one piece of test traffic (the spec's `traffic:` entries).
type Probe struct {
	Name   string
	From   string
	To     netip.Addr
	Proto  string // icmp, icmpv6, udp, tcp
	DPort  int
	Expect string // chain name, ExpectNone or ExpectDrop
}

// ProbeResult is what the traces showed for one probe.
type ProbeResult struct {
	Probe Probe
	Hops  []trace.Hop
	// Events are every matching frame, all nodes, in time order.
	Events []trace.Event
	// Want is the chain's NF SIDs in order (empty for ExpectNone).
	Want []netip.Addr
	// Delivered: the node owning Probe.To received it.
	Delivered bool
	OK        bool
	// Why says what was wrong when !OK.
	Why string
}

// Prober sends probes in a lab and checks them against traces.
type Prober struct {
	lab  string
	net  *state.Network
	nss  map[string]*netns.NS
	cap  *trace.Capture
	wait time.Duration
}

// NewProber opens every node of lab and starts a trace on all of them.
func NewProber(lab string, opts Options) (*Prober, error) {
	rec, err := Load(lab, opts)
	if err != nil {
		return nil, err
	}
	net, err := rec.desired()
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	p := &Prober{lab: lab, net: net, nss: map[string]*netns.NS{}, wait: 100 * time.Millisecond}
	for node := range rec.Namespaces {
		ns, err := openNode(rec, node)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.nss[node] = ns
	}
	p.cap, err = trace.Start(p.nss)
	if err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Close stops the traces and closes the namespaces.
func (p *Prober) Close() {
	if p.cap != nil {
		p.cap.Stop()
	}
	for _, ns := range p.nss {
		ns.Close()
	}
}

// Run sends pr, waits for the traces to settle and judges the result.
func (p *Prober) Run(ctx context.Context, pr Probe) (ProbeResult, error) {
	res := ProbeResult{Probe: pr}
	ns, ok := p.nss[pr.From]
	if !ok {
		return res, fmt.Errorf("probe %s: node %q: %w", pr.Name, pr.From, ErrNoNode)
	}
	m := trace.Match{Dst: pr.To}
	p.cap.Reset()
	var sendErr error
	switch pr.Proto {
	case "icmp", "icmpv6", "":
		m.Proto = srv6.ProtoICMP
		fam := "-4"
		if pr.To.Is6() {
			m.Proto, fam = srv6.ProtoICMPv6, "-6"
		}
		// A lost echo is judged from the traces, not from ping's status.
		_, sendErr = ns.Run(ctx, "ping", fam, "-c", "1", "-W", "1", pr.To.String())
	case "udp":
		m.Proto, m.DstPort = srv6.ProtoUDP, uint16(pr.DPort)
		sendErr = ns.Do(func() error { return sendUDP(pr.To, pr.DPort) })
	case "tcp":
		m.Proto, m.DstPort = srv6.ProtoTCP, uint16(pr.DPort)
		_ = ns.Do(func() error { return dialTCP(pr.To, pr.DPort) })
	default:
		return res, fmt.Errorf("probe %s: protocol %q: %w", pr.Name, pr.Proto, ErrProbe)
	}
	// Let packets in flight finish their path, then make sure every
	// node's reader has collected what its ring holds.
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(p.wait):
	}
	p.cap.Flush(2 * time.Second)
	all := p.cap.Events()
	for _, e := range all {
		if m.Matches(e) {
			res.Events = append(res.Events, e)
		}
	}
	res.Hops = p.throughXDP(trace.Path(all, m))
	p.judge(&res)
	if !res.OK && sendErr != nil {
		res.Why += " (send: " + sendErr.Error() + ")"
	}
	return res, nil
}

func sendUDP(to netip.Addr, port int) error {
	if port == 0 {
		port = 9 // discard
	}
	c, err := net.Dial("udp", net.JoinHostPort(to.String(), strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("send udp: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("srchain probe")); err != nil {
		return fmt.Errorf("send udp: %w", err)
	}
	return nil
}

// dialTCP sends a SYN; the trace needs nothing more.
func dialTCP(to netip.Addr, port int) error {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(to.String(), strconv.Itoa(port)), 500*time.Millisecond)
	if err != nil {
		return err
	}
	return c.Close()
}

// owner returns the node holding addr on an interface or its loopback.
func owner(net *state.Network, addr netip.Addr) string {
	for _, n := range net.Nodes {
		for _, i := range n.Interfaces {
			for _, a := range i.Addrs {
				if a.Addr() == addr {
					return n.Name
				}
			}
		}
		for _, a := range n.Loopback {
			if a.Addr() == addr {
				return n.Name
			}
		}
	}
	return ""
}

// ChainSIDs returns the NF SIDs a chain's packets must cross, in order:
// the segments of the chain's SR policy that are NF SIDs of some node.
func ChainSIDs(net *state.Network, chain string) []netip.Addr {
	// A segment is an NF's when the NF's SID prefix holds it: a SID
	// written with ARGS bits set (fc00:2::f1:1111 on fc00:2::f1:0/112)
	// is a segment that differs from the prefix's address.
	var nfp []netip.Prefix
	for _, n := range net.Nodes {
		for _, s := range n.SIDs {
			if s.NF != "" {
				nfp = append(nfp, s.SID)
			}
		}
	}
	nf := func(a netip.Addr) bool {
		for _, p := range nfp {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	for _, n := range net.Nodes {
		for _, r := range n.Routes {
			if r.Chain == chain && r.Encap != nil {
				var out []netip.Addr
				for _, seg := range expandBindings(net, r.Encap.Segments, 0) {
					for _, s := range expandCSIDs(net, seg) {
						if nf(s) {
							out = append(out, s)
						}
					}
				}
				return out
			}
		}
	}
	return nil
}

// poolVariants returns the NF SIDs of each variant of a chain with an NF
// pool (its eBPF ingress's config): want with the pool's SID replaced by
// each instance's. None for other chains.
func poolVariants(net *state.Network, chain string, want []netip.Addr) [][]netip.Addr {
	for _, n := range net.Nodes {
		for _, prog := range n.Programs {
			if prog.Kind != state.ProgramIngress {
				continue
			}
			var cfg state.IngressConfig
			if json.Unmarshal(prog.Config, &cfg) != nil {
				continue
			}
			for _, c := range cfg.Chains {
				if c.Name != chain || c.Pool == nil || len(c.Pool.Variants) == 0 {
					continue
				}
				at := slices.IndexFunc(c.Segments, func(a netip.Addr) bool {
					return a != c.Pool.Variants[1%len(c.Pool.Variants)][slices.Index(c.Segments, a)]
				})
				if at < 0 {
					return nil
				}
				k := slices.Index(want, c.Segments[at])
				if k < 0 {
					return nil
				}
				var out [][]netip.Addr
				for _, v := range c.Pool.Variants {
					w := slices.Clone(want)
					w[k] = v[at]
					out = append(out, w)
				}
				return out
			}
		}
	}
	return nil
}

// expandBindings replaces each binding SID (End.B6.Encaps, a pathlet) in
// segs with the segments it pushes, recursively: the path a packet takes.
func expandBindings(net *state.Network, segs []netip.Addr, depth int) []netip.Addr {
	var out []netip.Addr
	for _, seg := range segs {
		out = append(out, seg)
		if depth >= maxPathletDepth {
			continue
		}
		for _, n := range net.Nodes {
			for _, s := range n.SIDs {
				if s.Behavior == state.EndB6Encaps && s.SID.Contains(seg) {
					out = append(out, expandBindings(net, s.Segments, depth+1)...)
				}
			}
		}
	}
	return out
}

// maxPathletDepth bounds the binding SIDs followed (a loop of bindings in
// a hand-made state must not hang the prober).
const maxPathletDepth = 8

func (p *Prober) judge(r *ProbeResult) {
	dst := owner(p.net, r.Probe.To)
	for _, h := range r.Hops {
		if h.Node == dst && h.Arrive != nil {
			r.Delivered = true
		}
	}
	switch {
	case r.Probe.Expect == ExpectDrop:
		if r.Delivered {
			r.Why = fmt.Sprintf("delivered to %s, want it dropped on the way", orDash(dst))
		} else {
			r.OK = true
		}
	case !r.Delivered:
		r.Why = fmt.Sprintf("not delivered to %s", orDash(dst))
	case r.Probe.Expect == ExpectNone:
		if trace.AnySRH(r.Hops) {
			r.Why = "steered, but no chain should match"
		} else {
			r.OK = true
		}
	default:
		r.Want = ChainSIDs(p.net, r.Probe.Expect)
		got := p.served(r.Hops)
		// A chain with an NF pool: any instance will do (per-flow
		// setup picks one per flow).
		for _, w := range poolVariants(p.net, r.Probe.Expect, r.Want) {
			if trace.ContainsInOrder(got, w) {
				r.Want = w
				break
			}
		}
		switch {
		case len(r.Want) == 0:
			r.Why = fmt.Sprintf("chain %q has no NF SIDs in the lab's state", r.Probe.Expect)
		case !trace.ContainsInOrder(got, r.Want):
			r.Why = fmt.Sprintf("served %v, want NF SIDs %v in order", got, r.Want)
			if u := p.unproven(r.Hops); u != "" {
				r.Why += "; " + u
			}
		default:
			r.OK = true
		}
	}
}

// served returns, in order, the SIDs the nodes that own them consumed: the
// segments each node moved the SRH's segments left past (trace.Consumed),
// whether the node's arrival was captured with the SID active or it ran the
// SID locally (an NF on the ingress, several NF SIDs of one node in a row).
// A router in between that forwards the packet while an NF's SID is active,
// or one that removes the SRH before an NF's SID was served, has not served
// that SID.
func (p *Prober) served(hops []trace.Hop) []netip.Addr {
	var out []netip.Addr
	for _, s := range p.services(hops) {
		if !s.Unproven {
			out = append(out, s.SID)
		}
	}
	return out
}

// services returns the consumed segments whose SID the consuming node owns,
// including the Unproven ones (left when a node removed the SRH with
// segments left > 0: it may have run them locally, or decapsulated with
// the first of them, e.g. an NF SID set up as End.DX6). Those never count
// as served: the verdict FAILs and names them.
func (p *Prober) services(hops []trace.Hop) []trace.Service {
	var out []trace.Service
	for _, s := range trace.Consumed(hops) {
		if _, ok := sidAt(p.net, s.Node, s.SID); ok {
			out = append(out, s)
		}
	}
	out = append(out, csidShifts(p.net, hops)...)
	slices.SortStableFunc(out, func(a, b trace.Service) int { return a.Hop - b.Hop })
	for i, s := range out {
		if s.Unproven && p.proxied(hops, s) {
			out[i].Unproven = false
		}
	}
	return out
}

// proxied reports whether s is an SR proxy's SID (served by a program in
// front of a legacy NF, docs/proxy.md) that the capture shows at work:
// after the proxy removed the SRH, the packet went into a legacy NF node
// and came back to the proxy's node. A static proxy (End.AS) pushes a
// fresh header, without an SRH when one segment is left, so the segments
// left cannot show it; the legacy NF's visit does.
func (p *Prober) proxied(hops []trace.Hop, s trace.Service) bool {
	sid, ok := sidAt(p.net, s.Node, s.SID)
	if !ok || sid.Datapath != state.ProgramDatapath {
		return false
	}
	role := map[string]string{}
	for _, n := range p.net.Nodes {
		role[n.Name] = n.Role
	}
	for j := s.Hop + 1; j < len(hops); j++ {
		if role[hops[j].Node] != "legacy-nf" {
			continue
		}
		for k := j + 1; k < len(hops); k++ {
			if hops[k].Node == s.Node {
				return true
			}
		}
	}
	return false
}

// unproven says which owned SIDs could not be proven to have run, or "".
func (p *Prober) unproven(hops []trace.Hop) string {
	var parts []string
	for _, s := range p.services(hops) {
		if s.Unproven {
			parts = append(parts, fmt.Sprintf("%s %s", s.Node, s.SID))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("not proven (SRH removed with segments left > 0, SIDs run locally or a direct decapsulation cannot be told apart): %s", strings.Join(parts, ", "))
}

// sidAt returns the local SID of node that addr hits, if any.
func sidAt(net *state.Network, node string, addr netip.Addr) (state.LocalSID, bool) {
	for _, n := range net.Nodes {
		if n.Name != node {
			continue
		}
		for _, s := range n.SIDs {
			if s.SID.Contains(addr) {
				return s, true
			}
		}
	}
	return state.LocalSID{}, false
}

// Summary renders the one-line path of a result, e.g.
// "v4: h1 -> r1 [H.Encaps] -> r2 SL=1 DA=fc00:2::1:0 [End fw] -> ... OK (chain web4)".
func (p *Prober) Summary(r ProbeResult) string {
	var parts []string
	svc := p.services(r.Hops)
	for i, h := range r.Hops {
		s := h.Node
		if d := h.Arrive.Describe(); d != "" {
			s += " " + d
		}
		if h.Arrive != nil && h.Arrive.Inferred {
			s += " (xdp: not captured, deduced from its links)"
		}
		if (h.Arrive == nil || !h.Arrive.HasSRH) && h.Leave != nil && h.Leave.HasSRH {
			if h.Leave.Encapsulated {
				s += " [H.Encaps]"
			} else {
				s += " [H.Insert]"
			}
		}
		// Every SID the node served on this visit, in order.
		for _, v := range svc {
			if v.Hop != i {
				continue
			}
			if sid, ok := sidAt(p.net, h.Node, v.SID); ok {
				q := ""
				if v.Unproven {
					q = "?"
				}
				s += " [" + strings.TrimSpace(string(sid.Behavior)+" "+sid.NF) + q + "]"
			}
		}
		parts = append(parts, s)
	}
	verdict := "OK"
	if !r.OK {
		verdict = "FAIL: " + r.Why
	}
	what := "chain " + r.Probe.Expect
	switch r.Probe.Expect {
	case ExpectNone:
		what = "not steered"
	case ExpectDrop:
		what = "dropped"
	}
	path := strings.Join(parts, " -> ")
	if path == "" {
		path = "(nothing seen)"
	}
	return fmt.Sprintf("%s: %s  %s (%s)", r.Probe.Name, path, verdict, what)
}

// Print writes the summary line and, indented, every frame of the probe
// each node saw.
func (p *Prober) Print(w io.Writer, r ProbeResult, detail bool) {
	fmt.Fprintln(w, p.Summary(r))
	if !detail {
		return
	}
	nw, iw := 0, 0
	for _, e := range r.Events {
		nw, iw = max(nw, len(e.Node)), max(iw, len(e.Interface))
	}
	for _, e := range r.Events {
		line := fmt.Sprintf("    %-*s %-*s %-3s %s > %s", nw, e.Node, iw, e.Interface, e.Dir, e.OuterSrc, e.OuterDst)
		if e.HasSRH {
			line += fmt.Sprintf("  SRH SL=%d segs=%s", e.SL, addrs(e.Segments))
		}
		if e.Encapsulated {
			line += fmt.Sprintf("  inner %s > %s", e.InnerSrc, e.InnerDst)
		}
		line += "  " + protoName(e)
		fmt.Fprintln(w, line)
	}
}

// protoName names the innermost transport of e: "icmp", "udp/5001".
func protoName(e trace.Event) string {
	switch e.Proto {
	case srv6.ProtoICMP:
		return "icmp"
	case srv6.ProtoICMPv6:
		return "icmpv6"
	case srv6.ProtoUDP:
		return fmt.Sprintf("udp/%d", e.DstPort)
	case srv6.ProtoTCP:
		return fmt.Sprintf("tcp/%d", e.DstPort)
	}
	return fmt.Sprintf("proto %d", e.Proto)
}

func addrs(as []netip.Addr) string {
	ss := make([]string, len(as))
	for i, a := range as {
		ss[i] = a.String()
	}
	return "[" + strings.Join(ss, ",") + "]"
}

// Nodes returns the lab's node names, sorted.
func (p *Prober) Nodes() []string {
	var out []string
	for n := range p.nss {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
