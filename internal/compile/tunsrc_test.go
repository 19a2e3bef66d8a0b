package compile

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// TestTunnelSource: a router's tunnel_source is its tunsrc instead of its
// first interface address, goes on its lo as a /128, and the other routers
// route it to that router (ICMP errors about its encapsulations reach it).
func TestTunnelSource(t *testing.T) {
	s, err := spec.Load("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ts := netip.MustParseAddr("fc00:ff::1")
	for i := range s.Nodes {
		if s.Nodes[i].Name == "r1" {
			s.Nodes[i].TunnelSource = ts
		}
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	net, err := Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	node := func(name string) state.Node {
		for _, n := range net.Nodes {
			if n.Name == name {
				return n
			}
		}
		t.Fatalf("no node %s", name)
		return state.Node{}
	}
	r1 := node("r1")
	if r1.TunSrc != ts {
		t.Errorf("r1 tunsrc %s, want %s", r1.TunSrc, ts)
	}
	if !slices.Contains(r1.Loopback, netip.PrefixFrom(ts, 128)) {
		t.Errorf("r1 loopback %v lacks %s/128", r1.Loopback, ts)
	}
	if r2 := node("r2"); r2.TunSrc != netip.MustParseAddr("fc00:a2::2") {
		t.Errorf("r2 tunsrc %s, want its first address", r2.TunSrc)
	}
	for _, name := range []string{"r2", "r3"} {
		if !slices.ContainsFunc(node(name).Routes, func(r state.Route) bool { return r.Dst == netip.PrefixFrom(ts, 128) }) {
			t.Errorf("%s has no route to r1's tunnel source", name)
		}
	}
}

// TestInterfacesManaged: interfaces_managed: false reaches the node's
// state; nodes that do not say so stay managed.
func TestInterfacesManaged(t *testing.T) {
	s, err := spec.Load("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := false
	s.Nodes[1].InterfacesManaged = &f
	net, err := Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range net.Nodes {
		if want := n.Name == s.Nodes[1].Name; n.InterfacesUnmanaged != want {
			t.Errorf("%s: unmanaged %v, want %v", n.Name, n.InterfacesUnmanaged, want)
		}
		if n.Name != s.Nodes[1].Name {
			continue
		}
		// Only what SRv6 needs on the operator's host: no accept_dad, no
		// "default" that would change interfaces outside the spec.
		var keys []string
		for _, sc := range n.Sysctls {
			keys = append(keys, sc.Key)
		}
		want := []string{"net.ipv6.conf.all.forwarding", "net.ipv4.ip_forward", "net.ipv6.conf.all.seg6_enabled",
			"net.ipv6.conf.eth0.seg6_enabled", "net.ipv6.conf.eth1.seg6_enabled"}
		if !slices.Equal(keys, want) {
			t.Errorf("%s sysctls %v, want %v", n.Name, keys, want)
		}
	}
}
