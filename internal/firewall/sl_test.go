package firewall

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/srchain/srchain/internal/drop"
)

// TestBPFSLPastLast: SL = last entry + 1 (the active SID only in the
// destination). ip6t_srh does not match such a packet at all, so -m srh
// and every SRH option fail, negated or not; legacy rules still see the
// original packet; SR actions work; eval-args' Parameter Problem points
// at the destination address.
func TestBPFSLPastLast(t *testing.T) {
	needRoot(t)
	p := testPkts(t)
	pkt := bytes.Clone(p.encap6) // last entry 1
	pkt[43] = 2
	copy(pkt[24:40], mustAddr("fc00:2::f1:9").AsSlice()) // ARGS 9: unknown
	cases := []struct {
		rule   string
		mode   Mode
		ret    uint32
		reason drop.Reason
	}{
		{"-m srh -j DROP", Advanced, tcActOK, drop.None},
		{"-m srh -j DROP", Basic, tcActOK, drop.None},
		{"-m srh ! --srh-tag 5 -j DROP", Advanced, tcActOK, drop.None},
		{"-m srh --srh-segs-eq 2 -j DROP", Advanced, tcActOK, drop.None},
		{"-m srh ! --srh-segs-eq 2 -j DROP", Advanced, tcActOK, drop.None},
		{"-m srh ! --srh-nsid ::1 -j DROP", Advanced, tcActOK, drop.None},
		{"-m srh ! --srh-lsid ::1 -j DROP", Advanced, tcActOK, drop.None},
		{"-m srh ! --inner-src ::1 -j DROP", Advanced, tcActOK, drop.None},
		{"-m srh ! --sid ::1 -j DROP", Advanced, tcActOK, drop.None},
		{"-p udp --dport 80 -j DROP", Basic, tcActShot, drop.FWRule},
		{"-j SEG6 --seg6-action go-next", Basic, tcActOK, drop.None},
		{"-j SEG6 --seg6-action eval-args", Basic, tcActRedirect, drop.FWArgsUnknown},
	}
	for _, c := range cases {
		fw := loadRules(t, c.rule, Config{ArgsBits: 16})
		if err := fw.SetMode(c.mode); err != nil {
			t.Fatal(err)
		}
		ret, out, reason := run(t, fw, pkt)
		if ret != c.ret || reason != c.reason {
			t.Errorf("%q %v: ret %d reason %v, want %d %v", c.rule, c.mode, ret, reason, c.ret, c.reason)
		}
		o := Decide(pkt, Config{Mode: c.mode, Rules: fw.cfg.Rules, ArgsBits: 16}, 1)
		if o.Drop != c.reason {
			t.Errorf("%q %v: model %v", c.rule, c.mode, o.Drop)
		}
		switch {
		case ret == tcActRedirect:
			if ptr := binary.BigEndian.Uint32(out[44:48]); ptr != 24 {
				t.Errorf("eval-args: pointer %d, want 24 (destination)", ptr)
			}
			if !bytes.Equal(out[:len(o.Out)], o.Out) {
				t.Errorf("eval-args: ICMP differs from the model")
			}
		case c.rule == "-j SEG6 --seg6-action go-next":
			// SL 2 -> 1, DA = segment[1] (the last entry).
			if out[43] != 1 || netip.AddrFrom16([16]byte(out[24:40])) != netip.AddrFrom16([16]byte(pkt[64:80])) {
				t.Errorf("go-next: SL %d DA %x", out[43], out[24:40])
			}
			if !bytes.Equal(out[:len(o.Out)], o.Out) {
				t.Errorf("go-next: bytes differ from the model")
			}
		}
	}
}
