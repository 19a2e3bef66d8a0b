package compile

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/srchain/srchain/internal/spec"
)

// fatTree builds a k-port fat tree (seed 004's topology family): (k/2)^2
// core, k pods of k/2 aggregation and k/2 edge routers, k/2 hosts per edge.
func fatTree(k int) *spec.Spec {
	s := &spec.Spec{Name: "fattree", SIDFormat: spec.SIDFormat{LocatorBits: 64, FunctionBits: 48, ArgsBits: 16}}
	nr := 0
	router := func(name string) {
		nr++
		s.Nodes = append(s.Nodes, spec.Node{Name: name, Role: spec.RoleRouter, Datapath: spec.DatapathKernel,
			Locator: netip.MustParsePrefix(fmt.Sprintf("fd00:%x::/64", nr))})
	}
	nl := 0
	ifc := map[string]int{}
	link := func(a, b string) {
		nl++
		ia, ib := ifc[a], ifc[b]
		ifc[a]++
		ifc[b]++
		s.Links = append(s.Links, spec.Link{MTU: 1500, Endpoints: []spec.Endpoint{
			{Node: a, Interface: fmt.Sprintf("eth%d", ia), Addresses: []netip.Prefix{netip.MustParsePrefix(fmt.Sprintf("fc00:%x::1/64", nl))}},
			{Node: b, Interface: fmt.Sprintf("eth%d", ib), Addresses: []netip.Prefix{netip.MustParsePrefix(fmt.Sprintf("fc00:%x::2/64", nl))}},
		}})
	}
	h := k / 2
	for c := 0; c < h*h; c++ {
		router(fmt.Sprintf("c%d", c))
	}
	for p := 0; p < k; p++ {
		for i := 0; i < h; i++ {
			agg, edge := fmt.Sprintf("a%d-%d", p, i), fmt.Sprintf("e%d-%d", p, i)
			router(agg)
			router(edge)
			for j := 0; j < h; j++ {
				link(agg, fmt.Sprintf("c%d", i*h+j))
			}
		}
		for i := 0; i < h; i++ {
			for j := 0; j < h; j++ {
				link(fmt.Sprintf("a%d-%d", p, i), fmt.Sprintf("e%d-%d", p, j))
			}
			for j := 0; j < h; j++ {
				host := fmt.Sprintf("h%d-%d-%d", p, i, j)
				s.Nodes = append(s.Nodes, spec.Node{Name: host, Role: spec.RoleHost})
				link(fmt.Sprintf("e%d-%d", p, i), host)
			}
		}
	}
	return s
}

// TestFatTree checks that every router gets a route to every subnet and
// locator it is not attached to, on a topology with many equal paths.
func TestFatTree(t *testing.T) {
	s := fatTree(8)
	if err := s.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	net, err := Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	routers, prefixes := 0, len(s.Links)
	for _, n := range s.Nodes {
		if n.Role == spec.RoleRouter {
			routers++
			prefixes++
		}
	}
	for _, n := range net.Nodes {
		if n.Role != spec.RoleRouter {
			if len(n.Routes) != 1 {
				t.Errorf("host %s: %d routes, want 1 (IPv6 default)", n.Name, len(n.Routes))
			}
			continue
		}
		// Attached: one subnet per interface plus its own locator.
		if want := prefixes - len(n.Interfaces) - 1; len(n.Routes) != want {
			t.Errorf("router %s: %d routes, want %d", n.Name, len(n.Routes), want)
		}
	}
	if routers != 80 {
		t.Errorf("k=8 fat tree has %d routers, want 80", routers)
	}
}
