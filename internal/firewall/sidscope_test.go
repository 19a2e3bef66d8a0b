package firewall

import (
	"bytes"
	"net/netip"
	"runtime"
	"testing"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/srv6"
)

// TestBPFSIDScope: SR actions and eval-args apply only to packets
// addressed to the NF's SID prefix; other SR packets are accepted
// untouched, non-SR packets (IPv6 or IPv4) matching an SR action are
// dropped (DROP_FW_PRECOND) wherever they go. No Parameter Problem answers an ICMPv6 error, and the
// errors are rate limited per CPU.
func TestBPFSIDScope(t *testing.T) {
	needRoot(t)
	p := testPkts(t)
	sid := netip.MustParsePrefix("fc00:2::f1:0/112")
	other := bytes.Clone(p.encap6)
	copy(other[24:40], mustAddr("fc00:5::1").AsSlice()) // SR, another node's SID
	unknown := bytes.Clone(p.encap6)
	copy(unknown[24:40], mustAddr("fc00:2::f1:9").AsSlice()) // our SID, ARGS 9
	plainOurs := bytes.Clone(p.plain6)
	copy(plainOurs[24:40], mustAddr("fc00:2::f1:0").AsSlice()) // not SR, our SID
	// An ICMPv6 error (destination unreachable) inserted into an SRH to
	// our SID with unknown ARGS.
	icmpErr := srv6.ICMP6Echo(mustAddr("fc00:1::1"), mustAddr("fc00:d2::1"), 1, 1)
	icmpErr[40] = 1 // type 1: an error (checksum does not matter here)
	icmpErr = must(srv6.Insert(icmpErr, []netip.Addr{mustAddr("fc00:2::f1:9"), mustAddr("fc00:3::d6")}))
	copy(icmpErr[24:40], mustAddr("fc00:2::f1:9").AsSlice())
	cases := []struct {
		name, rule string
		pkt        []byte
		ret        uint32
		reason     drop.Reason
		changed    bool
	}{
		{"go-next to our SID", "-j SEG6 --seg6-action go-next", p.encap6, tcActOK, drop.None, true},
		{"go-next to another SID", "-j SEG6 --seg6-action go-next", other, tcActOK, drop.None, false},
		{"skip-next to another SID, precondition not checked", "-j SEG6 --seg6-action skip-next", other, tcActOK, drop.None, false},
		{"go-next non-SR IPv6 elsewhere", "-j SEG6 --seg6-action go-next", p.plain6, tcActShot, drop.FWPrecond, false},
		{"go-next non-SR IPv6 to our SID", "-j SEG6 --seg6-action go-next", plainOurs, tcActShot, drop.FWPrecond, false},
		{"go-next IPv4", "-j SEG6 --seg6-action go-next", p.plain4, tcActShot, drop.FWPrecond, false},
		{"skip-next IPv4", "-j SEG6 --seg6-action skip-next", p.plain4, tcActShot, drop.FWPrecond, false},
		{"eval-args non-SR IPv6 elsewhere", "-j SEG6 --seg6-action eval-args", p.plain6, tcActShot, drop.FWPrecond, false},
		{"eval-args IPv4", "-j SEG6 --seg6-action eval-args", p.plain4, tcActShot, drop.FWPrecond, false},
		{"eval-args unknown, our SID", "-j SEG6 --seg6-action eval-args", unknown, tcActRedirect, drop.FWArgsUnknown, true},
		{"eval-args another SID", "-j SEG6 --seg6-action eval-args", other, tcActOK, drop.None, false},
		{"eval-args on an ICMPv6 error", "-j SEG6 --seg6-action eval-args", icmpErr, tcActShot, drop.FWArgsUnknown, false},
	}
	for _, c := range cases {
		cfg := Config{SID: sid, ArgsBits: 16}
		fw := loadRules(t, c.rule, cfg)
		ret, out, reason := run(t, fw, c.pkt)
		if ret != c.ret || reason != c.reason {
			t.Errorf("%s: ret %d reason %v, want %d %v", c.name, ret, reason, c.ret, c.reason)
		}
		if ret != tcActShot {
			if changed := !bytes.Equal(out[:len(c.pkt)], c.pkt); changed != c.changed {
				t.Errorf("%s: changed=%v want %v", c.name, changed, c.changed)
			}
		}
		cfg.Rules = fw.cfg.Rules
		o := Decide(c.pkt, cfg, 1)
		if o.Drop != c.reason || o.ICMP != (c.ret == tcActRedirect) || (o.Out != nil) != c.changed {
			t.Errorf("%s: model %+v", c.name, o)
		}
	}

	// Rate limit: 3 errors per second and CPU.
	fw := loadRules(t, "-j SEG6 --seg6-action eval-args", Config{SID: sid, ArgsBits: 16, ICMPRate: 3})
	sent := 0
	for i := 0; i < 20; i++ {
		ret, _, reason := run(t, fw, unknown)
		if reason != drop.FWArgsUnknown {
			t.Fatalf("packet %d: reason %v", i, reason)
		}
		if ret == tcActRedirect {
			sent++
		}
	}
	if sent < 3 || sent > 3*runtime.NumCPU() {
		t.Errorf("%d Parameter Problems sent for 20 packets at 3/s per CPU", sent)
	}
}
