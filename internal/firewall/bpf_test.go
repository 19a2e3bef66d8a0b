package firewall

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/srchain/srchain/internal/testutil"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/srv6"
)

const (
	tcActOK       = 0xffffffff // TC_ACT_UNSPEC: continue down the tcx chain
	tcActShot     = 2
	tcActRedirect = 7
)

// xdpCtx is struct xdp_md (test runs may set ingress_ifindex).
type xdpCtx struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

const (
	xdpDrop     = 1
	xdpPass     = 2
	xdpRedirect = 4
)

// runXDP makes run use the XDP twin (TestXDPTables).
var runXDP bool

// TestXDPTables runs every BPF table through the XDP program: same
// verdicts, bytes, drop reasons and counters as the tc program.
func TestXDPTables(t *testing.T) {
	needRoot(t)
	runXDP = true
	defer func() { runXDP = false }()
	t.Run("match", TestBPFMatchTable)
	t.Run("actions", TestBPFActions)
	t.Run("malformed", TestBPFMalformed)
	t.Run("random", TestBPFRandomVsModel)
	t.Run("ext", TestBPFExtHeaders)
	t.Run("sl-past-last", TestBPFSLPastLast)
	t.Run("sid-scope", TestBPFSIDScope)
}

func needRoot(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err) // test fixtures only
	}
	return b
}

// Test packets, after the SERA testbed (seed 000 VI.A): ingress fc00:1::1
// (outer fc00:12::1), firewall SID fc00:2::f1:0, egress fc00:3::d6.
type pkts struct {
	plain6, plain4, encap6, encap4, encap3, insert, encapSL0 []byte
}

func testPkts(t *testing.T) pkts {
	var p pkts
	fw, eg := mustAddr("fc00:2::f1:0"), mustAddr("fc00:3::d6")
	p.plain6 = srv6.UDP6(mustAddr("fc00:1::1"), mustAddr("fc00:d1::1"), 1000, 80, []byte("plain"))
	p.plain4 = srv6.UDP4(mustAddr("10.0.0.1"), mustAddr("10.0.1.1"), 1000, 80, []byte("plain4"))
	p.encap6 = must(srv6.Encap(mustAddr("fc00:12::1"), []netip.Addr{fw, eg}, p.plain6))
	p.encap4 = must(srv6.Encap(mustAddr("fc00:12::1"), []netip.Addr{fw, eg}, p.plain4))
	// Three SIDs, the firewall second: previous SID fc00:9::1.
	p.encap3 = must(srv6.Encap(mustAddr("fc00:12::1"), []netip.Addr{mustAddr("fc00:9::1"), fw, eg}, p.plain6))
	p.encap3[40+3] = 1
	copy(p.encap3[24:40], fw.AsSlice())
	tcp := srv6.TCP6(mustAddr("fc00:1::1"), mustAddr("fc00:d2::1"), 4000, 22, 0x02, nil)
	p.insert = must(srv6.Insert(tcp, []netip.Addr{fw, eg}))
	// SL = 0: the firewall is (wrongly) the last SID.
	p.encapSL0 = must(srv6.Encap(mustAddr("fc00:12::1"), []netip.Addr{fw}, p.plain6))
	return p
}

var testMAC = net.HardwareAddr{2, 0, 0, 0, 0, 1}

func etherFrame(l3 []byte) []byte {
	et := uint16(srv6.EtherTypeIPv6)
	if l3[0]>>4 == 4 {
		et = 0x0800
	}
	return srv6.Ether(testMAC, testMAC, et, l3)
}

// run feeds one L3 packet to fw and returns the verdict, the packet
// after the program and the drop reason counted (None if none).
func run(t *testing.T, fw *Firewall, l3 []byte) (uint32, []byte, drop.Reason) {
	t.Helper()
	before, err := fw.DropCounts()
	if err != nil {
		t.Fatal(err)
	}
	frame := etherFrame(l3)
	out := make([]byte, len(frame)+64)
	opts := &ebpf.RunOptions{Data: frame, DataOut: out, Context: testutil.SKB{IngressIfindex: 1, Ifindex: 1}}
	prog := fw.Program()
	if runXDP {
		prog = fw.XDPProgram()
		opts.Context = xdpCtx{DataEnd: uint32(len(frame)), IngressIfindex: 1}
	}
	ret, err := prog.Run(opts)
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	if runXDP {
		// Map XDP verdicts onto the tc ones the tables expect.
		ret = map[uint32]uint32{xdpPass: tcActOK, xdpDrop: tcActShot, xdpRedirect: tcActRedirect}[ret]
	}
	after, err := fw.DropCounts()
	if err != nil {
		t.Fatal(err)
	}
	reason := drop.None
	for r := range after {
		if after[r] != before[r] {
			reason = drop.Reason(r)
		}
	}
	return ret, opts.DataOut[14:], reason
}

func loadRules(t *testing.T, src string, cfg Config) *Firewall {
	t.Helper()
	rules, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if src == "" {
		rules = cfg.Rules
	}
	cfg.Rules, err = Resolve(rules, func(name string) (uint32, error) {
		if name == "lo" {
			return 1, nil
		}
		return 0, ErrNoInterface
	})
	if err != nil {
		t.Fatal(err)
	}
	if shared == nil {
		var err error
		shared, err = LoadCapacity(cfg, Capacity{Bitmaps: 4096, Prefixes: 4096, XDP: true})
		if err != nil {
			t.Fatal(err)
		}
		return shared
	}
	if err := shared.Update(cfg); err != nil {
		t.Fatal(err)
	}
	return shared
}

// shared is one loaded program reused by the table tests through Update:
// verifying the program takes most of a second.
var shared *Firewall

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	os.Exit(code)
}

// TestBPFMatchTable: every match option and its negation, in both modes,
// against packets where the field is present and matching, present and
// not matching, or absent. Each rule DROPs; the policy is ACCEPT.
func TestBPFMatchTable(t *testing.T) {
	needRoot(t)
	p := testPkts(t)
	type pk struct {
		name string
		b    []byte
	}
	all := []pk{{"plain6", p.plain6}, {"plain4", p.plain4}, {"encap6", p.encap6}, {"encap4", p.encap4},
		{"encap3", p.encap3}, {"insert", p.insert}, {"encapSL0", p.encapSL0}}
	// want[mode] lists the packets the (non-negated) rule drops.
	cases := []struct {
		rule          string
		basic, advanc []string
		negBasic      []string // packets the negated rule drops in basic mode
	}{
		// Addresses: IPv6 rules never match IPv4 packets (and the reverse),
		// negated or not.
		{"-s fc00:1::/64", []string{"plain6", "encap6", "encap3", "insert", "encapSL0"}, []string{"plain6", "insert"}, []string{}},
		{"-s fc00::/16", []string{"plain6", "encap6", "encap3", "insert", "encapSL0"}, []string{"plain6", "encap6", "encap4", "encap3", "insert", "encapSL0"}, []string{}},
		{"-d ::/0", []string{"plain6", "encap6", "encap3", "insert", "encapSL0"}, []string{"plain6", "encap6", "encap4", "encap3", "insert", "encapSL0"}, []string{}},
		{"-s ::ffff:10.0.0.0/104", nil, nil, []string{"plain6", "encap6", "encap3", "insert", "encapSL0"}},
		{"-s 10.0.0.0/24", []string{"plain4", "encap4"}, []string{"plain4"}, []string{}},
		{"-s 10.9.0.0/16", nil, nil, []string{"plain4", "encap4"}},
		{"-d fc00:d2::1", []string{"insert"}, nil, []string{"plain6", "encap6", "encap3", "encapSL0"}},
		{"-d 10.0.1.0/255.255.255.0", []string{"plain4", "encap4"}, []string{"plain4"}, []string{}},
		{"-p udp", []string{"plain6", "plain4", "encap6", "encap4", "encap3", "encapSL0"}, []string{"plain6", "plain4"}, []string{"insert"}},
		{"-p tcp --dport 22", []string{"insert"}, []string{"insert"}, nil},
		{"-p udp --dport 70:90", []string{"plain6", "plain4", "encap6", "encap4", "encap3", "encapSL0"}, []string{"plain6", "plain4"}, nil},
		{"-p udp --sport 1000", []string{"plain6", "plain4", "encap6", "encap4", "encap3", "encapSL0"}, []string{"plain6", "plain4"}, nil},
		{"-p tcp --sport 4001:", nil, nil, nil},
		{"-i lo", []string{"plain6", "plain4", "encap6", "encap4", "encap3", "insert", "encapSL0"}, []string{"plain6", "plain4", "encap6", "encap4", "encap3", "insert", "encapSL0"}, nil},
		{"-m srh", []string{"encap6", "encap4", "encap3", "insert", "encapSL0"}, []string{"encap6", "encap4", "encap3", "insert", "encapSL0"}, nil},
		{"-m srh --srh-next-hdr 41", []string{"encap6", "encap3", "encapSL0"}, []string{"encap6", "encap3", "encapSL0"}, []string{"encap4", "insert"}},
		{"-m srh --srh-len-eq 4", []string{"encap6", "encap4"}, []string{"encap6", "encap4"}, []string{"encap3", "insert", "encapSL0"}},
		{"-m srh --srh-len-gt 4", []string{"encap3", "insert"}, []string{"encap3", "insert"}, []string{"encap6", "encap4", "encapSL0"}},
		{"-m srh --srh-len-lt 4", []string{"encapSL0"}, []string{"encapSL0"}, []string{"encap6", "encap4", "encap3", "insert"}},
		{"-m srh --srh-segs-eq 1", []string{"encap6", "encap4", "encap3"}, []string{"encap6", "encap4", "encap3"}, []string{"insert", "encapSL0"}},
		{"-m srh --srh-segs-gt 1", []string{"insert"}, []string{"insert"}, []string{"encap6", "encap4", "encap3", "encapSL0"}},
		{"-m srh --srh-segs-lt 1", []string{"encapSL0"}, []string{"encapSL0"}, []string{"encap6", "encap4", "encap3", "insert"}},
		{"-m srh --srh-last-eq 2", []string{"encap3", "insert"}, []string{"encap3", "insert"}, []string{"encap6", "encap4", "encapSL0"}},
		{"-m srh --srh-last-gt 1", []string{"encap3", "insert"}, []string{"encap3", "insert"}, []string{"encap6", "encap4", "encapSL0"}},
		{"-m srh --srh-last-lt 1", []string{"encapSL0"}, []string{"encapSL0"}, []string{"encap6", "encap4", "encap3", "insert"}},
		{"-m srh --srh-tag 0", []string{"encap6", "encap4", "encap3", "insert", "encapSL0"}, []string{"encap6", "encap4", "encap3", "insert", "encapSL0"}, nil},
		// psid exists only when SL < last entry (encap3); negation does not
		// match packets without one (ip6t_srh).
		{"-m srh --srh-psid fc00:9::/64", []string{"encap3"}, []string{"encap3"}, nil},
		{"-m srh --srh-psid fc00:8::/64", nil, nil, []string{"encap3"}},
		// nsid needs SL > 0 (not encapSL0).
		{"-m srh --srh-nsid fc00:3::d6", []string{"encap6", "encap4", "encap3", "insert"}, []string{"encap6", "encap4", "encap3", "insert"}, nil},
		{"-m srh --srh-nsid fc00:3::/64", []string{"encap6", "encap4", "encap3", "insert"}, []string{"encap6", "encap4", "encap3", "insert"}, nil},
		{"-m srh --srh-lsid fc00:3::/64", []string{"encap6", "encap4", "encap3"}, []string{"encap6", "encap4", "encap3"}, []string{"insert", "encapSL0"}},
		// Insert mode: the inner packet is outer source -> segment[0].
		{"-m srh --inner-src fc00:1::1", []string{"encap6", "encap3", "insert", "encapSL0"}, []string{"encap6", "encap3", "insert", "encapSL0"}, []string{}},
		{"-m srh --inner-dst 10.0.1.1", []string{"encap4"}, []string{"encap4"}, []string{}},
		{"-m srh --inner-dst 10.0.9.1", nil, nil, []string{"encap4"}},
		{"-m srh --inner-dst fc00:d2::1", []string{"insert"}, []string{"insert"}, []string{"encap6", "encap3", "encapSL0"}},
		// --sid: the active SID (all SR test packets are at fc00:2::f1:0).
		{"-m srh --sid fc00:2::f1:0/112", []string{"encap6", "encap4", "encap3", "insert", "encapSL0"}, []string{"encap6", "encap4", "encap3", "insert", "encapSL0"}, nil},
		{"-p 41", nil, []string{"encap6", "encap3", "encapSL0"}, nil},
	}
	for _, c := range cases {
		for _, neg := range []bool{false, true} {
			rule := c.rule + " -j DROP"
			if neg {
				rule = negate(c.rule) + " -j DROP"
				if _, err := Parse(rule); err != nil {
					continue // -m srh itself cannot be negated
				}
			}
			fw := loadRules(t, rule, Config{})
			for _, mode := range []Mode{Basic, Advanced} {
				if err := fw.SetMode(mode); err != nil {
					t.Fatal(err)
				}
				want := c.basic
				if mode == Advanced {
					want = c.advanc
				}
				positive := want
				// Negations: the listed packets in basic mode; otherwise
				// what the model says, which must never drop a packet the
				// rule itself drops (a field matches or not, or is absent
				// and fails both).
				fromModel := neg && (mode == Advanced || c.negBasic == nil)
				if neg {
					want = c.negBasic
				}
				for _, pk := range all {
					drops := contains(want, pk.name)
					if fromModel {
						drops = Decide(pk.b, Config{Mode: mode, Rules: fw.cfg.Rules}, 1).Drop != drop.None
						if drops && contains(positive, pk.name) {
							t.Errorf("%q %v on %s: dropped by the rule and by its negation", rule, mode, pk.name)
						}
					}
					ret, _, reason := run(t, fw, pk.b)
					if got := ret == tcActShot; got != drops {
						t.Errorf("%q %v on %s: dropped=%v want %v (reason %v)", rule, mode, pk.name, got, drops, reason)
					}
					if drops && reason != drop.FWRule {
						t.Errorf("%q %v on %s: reason %v", rule, mode, pk.name, reason)
					}
					// The Go model agrees.
					o := Decide(pk.b, Config{Mode: mode, Rules: fw.cfg.Rules}, 1)
					if (o.Drop != drop.None) != drops {
						t.Errorf("%q %v on %s: model drop %v", rule, mode, pk.name, o.Drop)
					}
				}
			}
		}
	}
}

// negate puts '!' before the last option of a rule.
func negate(rule string) string {
	i := bytes.LastIndex([]byte(rule), []byte(" -"))
	if i < 0 {
		return "! " + rule
	}
	return rule[:i] + " !" + rule[i:]
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestBPFActions: every action, its preconditions and its rewrite.
func TestBPFActions(t *testing.T) {
	needRoot(t)
	p := testPkts(t)
	fwSID, eg, d2 := mustAddr("fc00:2::f1:0"), mustAddr("fc00:3::d6"), mustAddr("fc00:d2::1")
	withDA := func(b []byte, da string) []byte {
		c := bytes.Clone(b)
		copy(c[24:40], mustAddr(da).AsSlice())
		return c
	}
	// A packet longer than an ICMPv6 error can quote, and one of odd length.
	big := must(srv6.Encap(mustAddr("fc00:12::1"), []netip.Addr{fwSID, eg}, srv6.UDP6(mustAddr("fc00:1::1"), mustAddr("fc00:d1::1"), 1, 2, make([]byte, 1400))))
	odd := must(srv6.Encap(mustAddr("fc00:12::1"), []netip.Addr{fwSID, eg}, srv6.UDP6(mustAddr("fc00:1::1"), mustAddr("fc00:d1::1"), 1, 2, []byte("odd"))))
	cases := []struct {
		name, rules string
		cfg         Config
		pkt         []byte
		ret         uint32
		reason      drop.Reason
		sl          int // expected SL after (-1: unchanged / not checked)
		da          netip.Addr
	}{
		{"accept", "-j ACCEPT", Config{}, p.encap6, tcActOK, drop.None, -1, fwSID},
		{"drop", "-j DROP", Config{}, p.plain6, tcActShot, drop.FWRule, -1, netip.Addr{}},
		{"reject", "-j REJECT", Config{}, p.plain4, tcActShot, drop.FWRule, -1, netip.Addr{}},
		{"policy drop", "-s fc00:ff::/32 -j ACCEPT", Config{Policy: Drop}, p.plain6, tcActShot, drop.FWRule, -1, netip.Addr{}},
		{"policy accept", "-s fc00:ff::/32 -j DROP", Config{}, p.plain6, tcActOK, drop.None, -1, netip.Addr{}},
		{"go-next", "-j SEG6", Config{}, p.encap6, tcActOK, drop.None, 0, eg},
		{"go-next SL=0", "-j SEG6 --seg6-action go-next", Config{}, p.encapSL0, tcActShot, drop.FWPrecond, -1, netip.Addr{}},
		{"go-next non-SR", "-j SEG6 --seg6-action go-next", Config{}, p.plain6, tcActShot, drop.FWPrecond, -1, netip.Addr{}},
		{"skip-next", "-j SEG6 --seg6-action skip-next", Config{}, p.insert, tcActOK, drop.None, 0, d2},
		{"skip-next SL=1", "-j SEG6 --seg6-action skip-next", Config{}, p.encap6, tcActShot, drop.FWPrecond, -1, netip.Addr{}},
		{"go-last", "-j SEG6 --seg6-action go-last", Config{}, p.insert, tcActOK, drop.None, 0, d2},
		{"go-last SL=0", "-j SEG6 --seg6-action go-last", Config{}, p.encapSL0, tcActShot, drop.FWPrecond, -1, netip.Addr{}},
		{"eval-args 0 go-next", "-j SEG6 --seg6-action eval-args", Config{ArgsBits: 16}, p.encap6, tcActOK, drop.None, 0, eg},
		{"eval-args 1 skip-next", "-j SEG6 --seg6-action eval-args", Config{ArgsBits: 16}, withDA(p.insert, "fc00:2::f1:1"), tcActOK, drop.None, 0, d2},
		{"eval-args 2 go-last", "-j SEG6 --seg6-action eval-args", Config{ArgsBits: 16}, withDA(p.insert, "fc00:2::f1:2"), tcActOK, drop.None, 0, d2},
		{"eval-args 3 drop", "-j SEG6 --seg6-action eval-args", Config{ArgsBits: 16}, withDA(p.encap6, "fc00:2::f1:3"), tcActShot, drop.FWRule, -1, netip.Addr{}},
		{"eval-args 4 accept", "-j SEG6 --seg6-action eval-args", Config{ArgsBits: 16}, withDA(p.encap6, "fc00:2::f1:4"), tcActOK, drop.None, 1, mustAddr("fc00:2::f1:4")},
		{"eval-args unknown", "-j SEG6 --seg6-action eval-args", Config{ArgsBits: 16}, withDA(p.encap6, "fc00:2::f1:9"), tcActRedirect, drop.FWArgsUnknown, -1, netip.Addr{}},
		{"eval-args unknown, big", "-j SEG6 --seg6-action eval-args", Config{ArgsBits: 16}, withDA(big, "fc00:2::f1:9"), tcActRedirect, drop.FWArgsUnknown, -1, netip.Addr{}},
		{"eval-args unknown, odd", "-j SEG6 --seg6-action eval-args", Config{ArgsBits: 16}, withDA(odd, "fc00:2::f1:9"), tcActRedirect, drop.FWArgsUnknown, -1, netip.Addr{}},
		{"eval-args 8 bits", "-j SEG6 --seg6-action eval-args", Config{ArgsBits: 8}, withDA(p.encap6, "fc00:2::f1:103"), tcActShot, drop.FWRule, -1, netip.Addr{}},
		{"eval-args custom", "-j SEG6 --seg6-action eval-args", Config{ArgsBits: 4, Args: map[uint64]Verdict{9: Drop}}, withDA(p.encap6, "fc00:2::f1:9"), tcActShot, drop.FWRule, -1, netip.Addr{}},
		{"eval-args non-SR", "-j SEG6 --seg6-action eval-args", Config{ArgsBits: 16}, p.plain6, tcActShot, drop.FWPrecond, -1, netip.Addr{}},
		{"first match wins", "-p udp -j SEG6 --seg6-action skip-next\n-j DROP", Config{}, p.insert, tcActShot, drop.FWRule, -1, netip.Addr{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fw := loadRules(t, c.rules, c.cfg)
			ret, out, reason := run(t, fw, c.pkt)
			if ret != c.ret || reason != c.reason {
				t.Fatalf("ret %d reason %v, want %d %v", ret, reason, c.ret, c.reason)
			}
			cfg := c.cfg
			cfg.Rules = fw.cfg.Rules
			o := Decide(c.pkt, cfg, 1)
			if o.Drop != c.reason {
				t.Errorf("model: %v", o.Drop)
			}
			if ret == tcActRedirect {
				if !o.ICMP || !bytes.Equal(out[:len(o.Out)], o.Out) || len(out) != len(o.Out) {
					t.Errorf("icmp error differs from the model:\n got %x\nwant %x", out, o.Out)
				}
				src, dst := netip.AddrFrom16([16]byte(out[8:24])), netip.AddrFrom16([16]byte(out[24:40]))
				if srv6.L4Checksum(src, dst, 58, out[40:]) != 0 {
					t.Errorf("icmp checksum does not verify")
				}
				if len(out) > 1280 || out[40] != 4 || binary.BigEndian.Uint32(out[44:]) != 40+8+16 {
					t.Errorf("icmp error: len %d type %d pointer %d", len(out), out[40], binary.BigEndian.Uint32(out[44:]))
				}
				return
			}
			if ret != tcActOK {
				return
			}
			out = out[:len(c.pkt)]
			want := c.pkt
			if o.Out != nil {
				want = o.Out
			}
			if !bytes.Equal(out, want) {
				t.Errorf("packet differs from the model:\n got %x\nwant %x", out, want)
			}
			if c.sl >= 0 {
				if got := netip.AddrFrom16([16]byte(out[24:40])); got != c.da {
					t.Errorf("DA %v want %v", got, c.da)
				}
				if sl := int(out[40+3]); sl != c.sl {
					t.Errorf("SL %d want %d", sl, c.sl)
				}
			}
		})
	}
}

// TestBPFMalformed: malformed SRv6 packets are dropped by reason; other
// routing header types are not SR traffic.
func TestBPFMalformed(t *testing.T) {
	needRoot(t)
	p := testPkts(t)
	fw := loadRules(t, "-j ACCEPT", Config{})
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(p.encap6)) }
	cases := []struct {
		name   string
		pkt    []byte
		ret    uint32
		reason drop.Reason
	}{
		{"sl over last", mod(func(b []byte) []byte { b[43] = 5; return b }), tcActShot, drop.SRHSLOverLast},
		{"sl over last+1", mod(func(b []byte) []byte { b[43] = 3; return b }), tcActShot, drop.SRHSLOverLast},
		// SL = last entry + 1 is valid (RFC 8986 4.1 S09).
		{"sl = last+1", mod(func(b []byte) []byte { b[43] = 2; return b }), tcActOK, drop.None},
		{"bad len", mod(func(b []byte) []byte { b[41] = 2; return b }), tcActShot, drop.SRHBadLen},
		{"too many segs", mod(func(b []byte) []byte { b[44] = 20; return b }), tcActShot, drop.SRHTooManySegs},
		{"truncated srh", mod(func(b []byte) []byte { b[41] = 200; return b }), tcActShot, drop.SRHTruncated},
		{"cut in srh", mod(func(b []byte) []byte { return b[:44] }), tcActShot, drop.SRHTruncated},
		{"cut in ext", mod(func(b []byte) []byte { return b[:41] }), tcActShot, drop.PktTruncated},
		{"bad tlv", mod(func(b []byte) []byte {
			// hdrlen 4 -> 5: 8 TLV bytes, a TLV claiming 10.
			b[41] = 5
			ext := append(b[:80:80], 0x80, 10, 0, 0, 0, 0, 0, 0)
			ext = append(ext, p.plain6...)
			binary.BigEndian.PutUint16(ext[4:], uint16(len(ext)-40))
			return ext
		}), tcActShot, drop.TLVBad},
		{"routing type 2", mod(func(b []byte) []byte { b[42] = 2; return b }), tcActOK, drop.None},
		{"cut inner", mod(func(b []byte) []byte { return b[:90] }), tcActShot, drop.PktTruncated},
	}
	for _, c := range cases {
		ret, _, reason := run(t, fw, c.pkt)
		if ret != c.ret || reason != c.reason {
			t.Errorf("%s: ret %d reason %v, want %d %v", c.name, ret, reason, c.ret, c.reason)
		}
		if o := Decide(c.pkt, Config{Rules: fw.cfg.Rules}, 1); o.Drop != c.reason {
			t.Errorf("%s: model %v", c.name, o.Drop)
		}
	}
}

// TestBPFRandomVsModel: random rule sets and random SR packets through
// the program and through Decide (linear reference): same verdict, same
// drop reason, same bytes, same rule counter.
func TestBPFRandomVsModel(t *testing.T) {
	needRoot(t)
	r := rand.New(rand.NewPCG(7, 8))
	p := testPkts(t)
	bases := [][]byte{p.plain6, p.plain4, p.encap6, p.encap4, p.encap3, p.insert, p.encapSL0}
	for round := 0; round < 6; round++ {
		rules := randRules(r, 5+r.IntN(40))
		for i := range rules {
			rules[i].Conds = dropIface(rules[i].Conds)
		}
		// Both verdicts in every round: narrow rules in front (half the
		// packets keep the base source fc00:1::1), a DROP behind.
		first, err := Parse("-s fc00:1::1 -p udp -j DROP\n-s fc00:1::1 -p tcp -j ACCEPT")
		if err != nil {
			t.Fatal(err)
		}
		last, err := Parse("-p udp --dport 80 -j DROP")
		if err != nil {
			t.Fatal(err)
		}
		rules = append(append(first, rules...), last...)
		cfg := Config{Mode: Mode(round % 2), Rules: rules, ArgsBits: 16, ICMPRate: 1 << 30, Policy: Verdict(1 + round/2%2)}
		fw := loadRules(t, "", cfg)
		accepts, drops := 0, 0
		for k := 0; k < 300; k++ {
			pkt := mutate(r, bases[r.IntN(len(bases))])
			before, _ := fw.RuleCounts()
			ret, out, reason := run(t, fw, pkt)
			after, _ := fw.RuleCounts()
			o := Decide(pkt, cfg, 1)
			if reason != o.Drop || (ret == tcActShot || ret == tcActRedirect) != (o.Drop != drop.None) || (ret == tcActRedirect) != o.ICMP {
				t.Fatalf("round %d pkt %x: bpf ret %d reason %v, model %+v", round, pkt, ret, reason, o)
			}
			if o.Rule >= -1 {
				slot := o.Rule
				if slot < 0 {
					slot = len(rules)
				}
				if after[slot].Packets != before[slot].Packets+1 {
					fw.Close()
					t.Fatalf("round %d: rule %d not counted (model rule %d)", round, slot, o.Rule)
				}
			}
			if o.Out != nil && !bytes.Equal(out[:len(o.Out)], o.Out) {
				t.Fatalf("round %d: bytes differ", round)
			}
			if ret == tcActShot {
				drops++
			} else {
				accepts++
			}
		}
		if accepts == 0 || drops == 0 {
			t.Errorf("round %d: %d accepted, %d dropped: not both verdicts", round, accepts, drops)
		}
	}
}

func dropIface(cs []Cond) []Cond {
	var out []Cond
	for _, c := range cs {
		if c.Field != FIIF && c.Field != FOIF {
			out = append(out, c)
		}
	}
	return out
}

// mutate varies the fields rules test: addresses from the test pool,
// ports, SL, tag, the ARGS of the destination.
func mutate(r *rand.Rand, base []byte) []byte {
	b := bytes.Clone(base)
	if b[0]>>4 != 6 {
		return b
	}
	if r.IntN(2) == 0 {
		copy(b[8:24], randAddr(r).AsSlice())
	}
	if r.IntN(3) == 0 {
		b[39] = byte(r.IntN(6))
	}
	if b[6] == protoRouting && r.IntN(2) == 0 {
		b[43] = byte(r.IntN(int(b[44]) + 2)) // SL, up to last entry + 1
		binary.BigEndian.PutUint16(b[46:], uint16(r.IntN(3)))
	}
	// Extension headers in front: destination options, a first or a
	// non-first fragment.
	switch r.IntN(8) {
	case 0:
		b = withExt(b, protoDstOpts, make([]byte, 6))
	case 1:
		b = withExt(b, protoFrag, frag(uint16(r.IntN(2)), false))
	}
	return b
}

// TestUpdateCapacity: Update refuses a rule set its maps cannot hold and
// leaves the loaded one working.
func TestUpdateCapacity(t *testing.T) {
	needRoot(t)
	rules, err := Parse("-s fc00:1::1 -j DROP")
	if err != nil {
		t.Fatal(err)
	}
	fw, err := Load(Config{Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	var b bytes.Buffer
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&b, "-s fc00:1::%x -j DROP\n", i+2)
	}
	more, err := Parse(b.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Update(Config{Rules: more}); !errors.Is(err, ErrCapacity) {
		t.Fatalf("update: %v, want ErrCapacity", err)
	}
	p := testPkts(t)
	if ret, _, _ := run(t, fw, p.plain6); ret != tcActShot {
		t.Errorf("old rules no longer apply: ret %d", ret)
	}
}
