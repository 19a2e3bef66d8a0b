package firewall

import (
	"testing"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/srv6"
)

// TestBPFFamilies: IPv4 rules see only IPv4 packets and IPv6 rules only
// IPv6 ones, negated or not, even for IPv4-mapped IPv6 addresses.
func TestBPFFamilies(t *testing.T) {
	needRoot(t)
	p := testPkts(t)
	mapped := srv6.UDP6(mustAddr("::ffff:10.0.0.1"), mustAddr("::ffff:10.0.1.1"), 1000, 80, nil)
	cases := []struct {
		rule  string
		pkt   []byte
		name  string
		drops bool
	}{
		{"-s 10.0.0.0/8 -j DROP", mapped, "mapped6", false},
		{"-s 10.0.0.0/8 -j DROP", p.plain4, "plain4", true},
		{"! -s 192.168.0.0/16 -j DROP", mapped, "mapped6", false},
		{"! -s fc00::/16 -j DROP", p.plain4, "plain4", false},
		{"! -s fc00::/16 -j DROP", mapped, "mapped6", true},
		{"-d ::/0 -j DROP", p.plain4, "plain4", false},
		{"-d ::/0 -j DROP", mapped, "mapped6", true},
		{"-s ::ffff:10.0.0.1 -j DROP", mapped, "mapped6", true},
		{"-s ::ffff:10.0.0.1 -j DROP", p.plain4, "plain4", false},
		{"-m srh ! --inner-src fc00::/16 -j DROP", p.encap4, "encap4", false},
		{"-m srh ! --inner-src 10.9.0.0/16 -j DROP", p.encap6, "encap6", false},
		{"-m srh ! --inner-src 10.9.0.0/16 -j DROP", p.encap4, "encap4", true},
	}
	for _, c := range cases {
		for _, mode := range []Mode{Basic, Advanced} {
			fw := loadRules(t, c.rule, Config{Mode: mode})
			ret, _, _ := run(t, fw, c.pkt)
			if (ret == tcActShot) != c.drops {
				t.Errorf("%q %v on %s: dropped=%v want %v", c.rule, mode, c.name, ret == tcActShot, c.drops)
			}
			if o := Decide(c.pkt, Config{Mode: mode, Rules: fw.cfg.Rules}, 1); (o.Drop != drop.None) != c.drops {
				t.Errorf("%q %v on %s: model %v", c.rule, mode, c.name, o.Drop)
			}
		}
	}
}
