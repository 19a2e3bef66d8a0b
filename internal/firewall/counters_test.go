package firewall

import "testing"

// TestBPFCountsIPBytes: rule counters count IP bytes (the IPv6 or IPv4
// header and its payload, no Ethernet header), as ip6tables counts
// skb->len at PREROUTING; tc and XDP alike. (They counted the Ethernet
// header too; test/e2e TestFirewallVsIP6tables compares them with
// ip6tables' own counters.)
func TestBPFCountsIPBytes(t *testing.T) {
	needRoot(t)
	p := testPkts(t)
	fw := loadRules(t, "-p udp -j DROP\n-p tcp -j ACCEPT", Config{})
	defer func(old bool) { runXDP = old }(runXDP)
	for _, xdp := range []bool{false, true} {
		runXDP = xdp
		before, err := fw.RuleCounts()
		if err != nil {
			t.Fatal(err)
		}
		run(t, fw, p.plain6) // rule 1
		run(t, fw, p.plain4) // rule 1
		run(t, fw, p.insert) // rule 2
		after, err := fw.RuleCounts()
		if err != nil {
			t.Fatal(err)
		}
		want := []uint64{uint64(len(p.plain6) + len(p.plain4)), uint64(len(p.insert)), 0}
		for i, w := range want {
			if got := after[i].Bytes - before[i].Bytes; got != w {
				t.Errorf("xdp=%v rule %d: %d bytes counted, want %d (IP bytes)", xdp, i, got, w)
			}
		}
	}
}
