package ingress

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/srchain/srchain/internal/firewall"
	"github.com/srchain/srchain/internal/state"
)

// TestRulesOrder: 5-tuple chains first in chain order (the kernel's ip
// rules come before the main table), then destination chains by
// longest prefix, ties in chain order; one rule per destination x
// source; IPv4 prefixes IPv4-mapped with the family condition.
func TestRulesOrder(t *testing.T) {
	seg := []netip.Addr{ma("fc00:2::1")}
	cfg := Config{Chains: []Chain{
		{Name: "short", Mode: state.ModeEncap, Segments: seg, Dst: []netip.Prefix{mp("2001:db8::/32")}},
		{Name: "five", Mode: state.ModeEncap, Segments: seg, Dst: []netip.Prefix{mp("2001:db8::/32"), mp("2001:db9::/32")},
			Src: []netip.Prefix{mp("fc00:a::/64"), mp("fc00:b::/64")}, Proto: 6},
		{Name: "long", Mode: state.ModeEncap, Segments: seg, Dst: []netip.Prefix{mp("2001:db8:1::/48")}},
		{Name: "v4", Mode: state.ModeEncap, Segments: seg, Dst: []netip.Prefix{mp("10.0.0.0/8")}},
	}}
	es, err := Rules(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, e := range es {
		got = append(got, e.Chain)
	}
	if want := []int{1, 1, 1, 1, 2, 0, 3}; !slices.Equal(got, want) {
		t.Fatalf("rule chains %v, want %v", got, want)
	}
	v4 := es[6].Rule
	if v4.Conds[0].Prefix != mp("::ffff:10.0.0.0/104") || v4.Conds[1].Field != firewall.FFamily || v4.Conds[1].Lo != 4 {
		t.Errorf("IPv4 rule %+v", v4.Conds)
	}
	// The classifier's own model agrees: a TCP packet from fc00:b::1 to
	// 2001:db8:1::1 takes "five", UDP takes "long".
	rules := make([]firewall.Rule, len(es))
	for i, e := range es {
		rules[i] = e.Rule
	}
	cls, err := firewall.Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		proto uint32
		want  int
	}{{6, 1}, {17, 2}} {
		v := firewall.NewView()
		v.SetAddr(firewall.FSrc, ma("fc00:b::1"))
		v.SetAddr(firewall.FDst, ma("2001:db8:1::1"))
		v.Set(firewall.FFamily, 6)
		v.Set(firewall.FProto, c.proto)
		if i := cls.Classify(&v); i < 0 || i >= len(es) || es[i].Chain != c.want {
			t.Errorf("proto %d: rule %d, want chain %d", c.proto, i, c.want)
		}
	}
}

func TestRulesInvalid(t *testing.T) {
	seg := []netip.Addr{ma("fc00:2::1")}
	for name, c := range map[string]Chain{
		"no dst":       {Name: "x", Mode: state.ModeEncap, Segments: seg},
		"no segments":  {Name: "x", Mode: state.ModeEncap, Dst: []netip.Prefix{mp("2001:db8::/32")}},
		"mixed family": {Name: "x", Mode: state.ModeEncap, Segments: seg, Dst: []netip.Prefix{mp("2001:db8::/32")}, Src: []netip.Prefix{mp("10.0.0.0/8")}},
		"insert v4":    {Name: "x", Mode: state.ModeInsert, Segments: seg, Dst: []netip.Prefix{mp("10.0.0.0/8")}},
		"16 + insert":  {Name: "x", Mode: state.ModeInsert, Segments: make([]netip.Addr, 16), Dst: []netip.Prefix{mp("2001:db8::/32")}},
		"bad mode":     {Name: "x", Mode: "l2encap", Segments: seg, Dst: []netip.Prefix{mp("2001:db8::/32")}},
	} {
		if _, err := Rules(Config{Chains: []Chain{c}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
