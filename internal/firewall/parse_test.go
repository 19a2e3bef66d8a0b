package firewall

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/srv6"
)

func TestParseRules(t *testing.T) {
	src := `# SERA example
ip6tables -A INPUT -s fc00:1::/64 -d fc00:d1::1 -p tcp --dport 1000:2000 -j DROP
-p udp ! --sport 53 -i eth0 -j ACCEPT
! -s 10.0.0.0/255.0.0.0 -j REJECT
-m srh --srh-next-hdr 41 ! --srh-len-eq 4 --srh-segs-gt 1 --srh-last-lt 3 \
   --srh-tag 7 --srh-psid fc00:1::/ffff:ffff:: ! --srh-nsid fc00:3::d6/128 \
   --srh-lsid fc00:3::/64 --inner-src 10.0.0.0/8 ! --inner-dst 1.2.3.4 -j SEG6 --seg6-action seg6-skip-next
-m srh --srh-hdr-len-gt 2 ! --srh-segs-left-lt 1 --srh-last-entry-eq 1 -j SEG6
-j SEG6 --seg6-action eval-args
`
	rules, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if c := rules[4].Conds; len(c) != 4 || c[1].Field != FHdrLen || c[1].Lo != 3 || c[2].Field != FSegsLeft || !c[2].Neg || c[3].Field != FLastEntry {
		t.Errorf("mainline srh spellings: %+v", c)
	}
	if len(rules) != 6 {
		t.Fatalf("got %d rules", len(rules))
	}
	want := []Verdict{Drop, Accept, Reject, SkipNext, GoNext, EvalArgs}
	for i, r := range rules {
		if r.Verdict != want[i] {
			t.Errorf("rule %d verdict %v want %v", i, r.Verdict, want[i])
		}
	}
	if rules[3].Line != 5 || !strings.Contains(rules[3].Text, "--srh-tag 7") {
		t.Errorf("rule 4 line %d text %q", rules[3].Line, rules[3].Text)
	}
	r0 := rules[0].Conds
	if r0[0].Prefix != netip.MustParsePrefix("fc00:1::/64") || r0[4].Field != FDPort || r0[4].Lo != 1000 || r0[4].Hi != 2000 || r0[1].Field != FFamily || r0[1].Lo != 6 {
		t.Errorf("rule 1 conds %+v", r0)
	}
	if c := rules[2].Conds[0]; !c.Neg || c.Prefix != netip.MustParsePrefix("::ffff:10.0.0.0/104") {
		t.Errorf("rule 3 cond %+v", c)
	}
	byField := map[Field]Cond{}
	for _, c := range rules[3].Conds {
		byField[c.Field] = c
	}
	checks := []struct {
		f      Field
		neg    bool
		lo, hi uint32
	}{{FNextHdr, false, 41, 41}, {FHdrLen, true, 4, 4}, {FSegsLeft, false, 2, 255}, {FLastEntry, false, 0, 2}, {FTag, false, 7, 7}}
	for _, c := range checks {
		got := byField[c.f]
		if got.Neg != c.neg || got.Lo != c.lo || got.Hi != c.hi {
			t.Errorf("%v: %+v", c.f, got)
		}
	}
	if p := byField[FPSID].Prefix; p != netip.MustParsePrefix("fc00:1::/32") {
		t.Errorf("psid %v", p)
	}
	if c := byField[FNSID]; !c.Neg {
		t.Errorf("nsid not negated")
	}
	if c := byField[FInnerDst]; c.Prefix != netip.MustParsePrefix("::ffff:1.2.3.4/128") || !c.Neg || byField[FInnerFamily].Lo != 4 {
		t.Errorf("inner-dst %+v", c)
	}
}

// TestParseModules: -m may appear once per module (iptables' own order
// -p tcp -m tcp --dport 22 -m srh ...).
func TestParseModules(t *testing.T) {
	for _, src := range []string{
		"-p tcp -m tcp --dport 22 -m srh --srh-tag 1 -j DROP",
		"-m srh --srh-tag 1 -p udp -m udp --sport 53 -j ACCEPT",
		"-p icmpv6 -m icmp6 -m srh -j ACCEPT",
	} {
		rules, err := Parse(src)
		if err != nil {
			t.Errorf("Parse(%q): %v", src, err)
			continue
		}
		if !rules[0].UsesSRH() {
			t.Errorf("Parse(%q): no srh condition", src)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{"-s fc00::/129 -j DROP", "1:4: expected addr[/mask]"},
		{"-s fc00:: -s fc00::1 -j DROP", "1:11: option -s given twice"},
		{"--dport 80 -j DROP", "1:1: expected -p tcp or -p udp"},
		{"-p tcp --dport 90:80 -j DROP", "1:16: expected port"},
		{"-p xyz -j DROP", "1:4: expected a protocol"},
		{"-s fc00::", "1:10: expected -j"},
		{"-j", "1:3: expected a target"},
		{"-j FOO", "1:4: expected target"},
		{"--srh-tag 3 -j DROP", "1:1: expected -m srh before --srh-tag"},
		{"-m srh --srh-tag 70000 -j DROP", "1:18: expected a number in 0..65535"},
		{"-j DROP --seg6-action go-next", "1:9: expected -j SEG6 before --seg6-action"},
		{"-j SEG6 --seg6-action jump", "1:23: expected go-next"},
		{"-m srh ! -j DROP", "1:10: option -j cannot be negated"},
		{"-s fc00::/ffff:0:ffff:: -j DROP", "not contiguous"},
		{"\n\n  -x -j DROP", "3:3: unknown option"},
		{"-j DROP !", "1:10: expected an option after '!'"},
		{"-i eth+ -j DROP", "1:4: expected an interface name"},
		{"-s 10.0.0.1 -d fc00::1 -j DROP", "1:16: -d mixes IPv4 and IPv6"},
		{"-m srh --srh-psid 10.0.0.1 -j DROP", "1:19: expected an IPv6 address"},
		{"! -p 0 -j DROP", "1:6: ! -p 0 matches nothing"},
		{"*filter\n-A X -j DROP\nCOMMIT", "1:1: \"*filter\" is an ip6tables-save table, chain or COMMIT line"},
		{"[0:0] :INPUT ACCEPT [0:0]", "1:7: \":INPUT\" is an ip6tables-save"},
		{"-A X -j DROP\nCOMMIT", "2:1: \"COMMIT\" is an ip6tables-save"},
		{"-A INPUT -j DROP\n[1:2] -A FORWARD -j DROP", "2:10: rule of chain FORWARD after rules of chain INPUT (line 1): a rule set is one chain"},
		{"ip6tables -I INPUT -p tcp -j DROP", "1:11: -I inserts a rule at the head"},
		{"! -p all -j DROP", "1:6: ! -p all matches nothing"},
		{"-p ipv4x -j DROP", "1:4: expected a protocol"},
		{"-m srh --srh-segs-left-gt 0 --srh-segs-left-lt 3 -j DROP", "1:48: --srh-segs-left-lt 3 after --srh-segs-left-gt 0 in one -m srh: ip6tables keeps one value"},
		{"-m srh --srh-hdr-len-eq 4 ! --srh-len-gt 2 -j DROP", "1:42: --srh-len-gt 2 after --srh-hdr-len-eq 4"},
		{"-m srh --srh-tag 1 --srh-tag 1 -j DROP", "1:20: option --srh-tag given twice"},
		{"-m srh --srh-tag 1 -m udp --srh-tag 2 -j DROP", "1:23: expected -p udp before -m udp"},
		{"-p udp --dport 1 --dport 2 -j DROP", "1:18: option --dport given twice"},
		{"-p udp -m udp --dport 1 -m srh --dport 2 -j DROP", "1:32: option --dport given twice"},
		{"-m tcp --dport 22 -j DROP", "1:4: expected -p tcp before -m tcp"},
		{"-p udp -m tcp -j DROP", "1:11: expected -p tcp before -m tcp"},
	}
	for _, c := range cases {
		_, err := Parse(c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want %q", c.src, err, c.want)
		}
		if err != nil && !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q): %v is not ErrSyntax", c.src, err)
		}
	}
	// All errors are reported at once.
	_, err := Parse("-j FOO\n-j DROP\n-p x -j DROP\n")
	if err == nil || !strings.Contains(err.Error(), "1:4") || !strings.Contains(err.Error(), "3:4") {
		t.Errorf("multi-error: %v", err)
	}
}

// TestParseIP6tablesSave: rules as ip6tables-legacy-save prints them
// mean here what they mean there (checked against the kernel by
// test/e2e TestFirewallVsIP6tables).
func TestParseIP6tablesSave(t *testing.T) {
	cases := []struct {
		src  string
		want []Cond // the rule's conditions, in order
	}{
		// -p 0 is every protocol (xtables_parse_protocol; "all",
		// "hopopt" and "ip" are 0 too): no condition.
		{"-p 0 -j DROP", nil},
		{"-p all -j DROP", nil},
		{"-p HOPOPT -j DROP", nil},
		// /etc/protocols names, as ip6tables-save prints them.
		{"-p ipencap -j DROP", []Cond{{Field: FProto, Lo: 4, Hi: 4}}},
		{"-p ipv4 -j DROP", []Cond{{Field: FProto, Lo: 4, Hi: 4}}},
		{"-p ipip -j DROP", []Cond{{Field: FProto, Lo: 94, Hi: 94}}},
		{"-p ipv6 -j DROP", []Cond{{Field: FProto, Lo: 41, Hi: 41}}},
		{"-p ipv6-nonxt -j DROP", []Cond{{Field: FProto, Lo: 59, Hi: 59}}},
		{"-p mobility-header -j DROP", []Cond{{Field: FProto, Lo: 135, Hi: 135}}},
		{"-p ipv6-icmp -j DROP", []Cond{{Field: FProto, Lo: 58, Hi: 58}}},
		// Extension headers are never -p's protocol (ipv6_find_hdr
		// walks over them): the empty set, negated or not.
		{"-p ipv6-route -j DROP", []Cond{{Field: FProto, Lo: 1, Hi: 0}}},
		{"! -p ipv6-frag -j DROP", []Cond{{Field: FProto, Neg: true, Lo: 1, Hi: 0}}},
		{"-p ipv6-opts -j DROP", []Cond{{Field: FProto, Lo: 1, Hi: 0}}},
		{"-p ah -j DROP", []Cond{{Field: FProto, Lo: 1, Hi: 0}}},
		{"-p 43 -j DROP", []Cond{{Field: FProto, Lo: 1, Hi: 0}}},
		// ... but an IPv4 rule compares the IPv4 protocol field.
		{"-s 10.0.0.0/8 -p ah -j DROP", []Cond{{Field: FSrc, Prefix: netip.MustParsePrefix("::ffff:10.0.0.0/104")}, {Field: FFamily, Lo: 4, Hi: 4}, {Field: FProto, Lo: 51, Hi: 51}}},
		// The tcp/udp match needs a transport header (no non-first
		// fragment): an implicit port-present condition.
		{"-p udp -m udp -j DROP", []Cond{{Field: FProto, Lo: 17, Hi: 17}, {Field: FSPort, Lo: 0, Hi: 0xffff}}},
		{"-p tcp -m tcp -j DROP", []Cond{{Field: FProto, Lo: 6, Hi: 6}, {Field: FSPort, Lo: 0, Hi: 0xffff}}},
		{"-p tcp -j DROP", []Cond{{Field: FProto, Lo: 6, Hi: 6}}},
		{"-p tcp -m tcp ! --dport 22 -j DROP", []Cond{{Field: FProto, Lo: 6, Hi: 6}, {Field: FDPort, Neg: true, Lo: 22, Hi: 22}}},
		// A match loaded twice: both instances hold.
		{"-p udp -m udp --dport 5 -m udp --dport 6 -j DROP", []Cond{{Field: FProto, Lo: 17, Hi: 17}, {Field: FDPort, Lo: 5, Hi: 5}, {Field: FDPort, Lo: 6, Hi: 6}}},
		{"-m srh --srh-segs-left-gt 0 -m srh --srh-segs-left-lt 3 -j DROP", []Cond{{Field: FSRH, Lo: 1, Hi: 1}, {Field: FSegsLeft, Lo: 1, Hi: 255}, {Field: FSegsLeft, Lo: 0, Hi: 2}}},
		// One value per SRH field and -m srh: what ip6tables -S shows
		// for "--srh-segs-left-gt 0 --srh-segs-left-lt 3" is accepted
		// and, as in the kernel, matches nothing.
		{"-m srh --srh-segs-left-gt 3 --srh-segs-left-lt 3 -j DROP", []Cond{{Field: FSRH, Lo: 1, Hi: 1}, {Field: FSegsLeft, Lo: 4, Hi: 255}, {Field: FSegsLeft, Lo: 0, Hi: 2}}},
	}
	// ip6tables-save -c lines: counters and the chain are dropped.
	if rules, err := Parse("[12:960] -A SRCHAINFW -p tcp -j DROP\n[0:0] -A SRCHAINFW -j ACCEPT"); err != nil || len(rules) != 2 || len(rules[0].Conds) != 1 {
		t.Errorf("ip6tables-save -c lines: %+v, %v", rules, err)
	}
	for _, c := range cases {
		rules, err := Parse(c.src)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.src, err)
			continue
		}
		got := rules[0].Conds
		if len(got) != len(c.want) {
			t.Errorf("Parse(%q) = %+v, want %+v", c.src, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("Parse(%q) cond %d = %+v, want %+v", c.src, i, got[i], c.want[i])
			}
		}
	}
}

// TestNeverMatches: rules whose conditions on one field admit no value
// are reported (srchain firewall check warns, as ip6tables warns about
// -p of an extension header).
func TestNeverMatches(t *testing.T) {
	for src, want := range map[string]bool{
		"-p ipv6-route -j DROP":                                           true,
		"! -p ipv6-route -j DROP":                                         false,
		"-m srh --srh-segs-left-gt 3 --srh-segs-left-lt 3 -j DROP":        true,
		"-m srh --srh-segs-left-gt 0 -m srh --srh-segs-left-lt 3 -j DROP": false,
		"-p udp -m udp --dport 5 -m udp --dport 6 -j DROP":                true,
		"-m srh --srh-last-entry-gt 255 -j DROP":                          true,
		"-p tcp --dport 22 -j DROP":                                       false,
	} {
		rules, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		if f, got := rules[0].NeverMatches(); got != want {
			t.Errorf("%q: never matches = %v (%v), want %v", src, got, f, want)
		}
	}
}

// TestModelFragmentPorts: the Go model of "-p udp -m udp" on fragments
// (xt_tcpudp: a non-first fragment never matches), outer and inner.
func TestModelFragmentPorts(t *testing.T) {
	udp := srv6.UDP6(mustAddr("fc00:1::1"), mustAddr("fc00:d2::1"), 4000, 53, []byte("0123456789abcdef"))
	encap := func(inner []byte) []byte {
		return must(srv6.Encap(mustAddr("fc00:12::1"), []netip.Addr{mustAddr("fc00:2::f1:0"), mustAddr("fc00:3::d6")}, inner))
	}
	cases := []struct {
		name string
		pkt  []byte
		mode Mode
		want bool // "-p udp -m udp -j DROP" drops it
	}{
		{"plain", udp, Advanced, true},
		{"first fragment", withExt(udp, protoFrag, frag(0, true)), Advanced, true},
		{"non-first fragment", withExt(udp, protoFrag, frag(2, false)), Advanced, false},
		{"non-first fragment basic", withExt(udp, protoFrag, frag(2, true)), Basic, false},
		{"encap inner non-first", encap(withExt(udp, protoFrag, frag(2, false))), Basic, false},
		{"encap inner first", encap(withExt(udp, protoFrag, frag(0, true))), Basic, true},
	}
	for _, rule := range []string{"-p udp -m udp -j DROP", "-p udp -m udp ! --sport 7 -j DROP"} {
		rules, err := Parse(rule)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			o := Decide(c.pkt, Config{Mode: c.mode, Rules: rules}, 1)
			if got := o.Drop == drop.FWRule; got != c.want {
				t.Errorf("%q %s: dropped=%v want %v", rule, c.name, got, c.want)
			}
		}
	}
	// -p udp alone is the protocol of the fragment header: it matches.
	rules, _ := Parse("-p udp -j DROP")
	if o := Decide(withExt(udp, protoFrag, frag(2, false)), Config{Mode: Advanced, Rules: rules}, 1); o.Drop != drop.FWRule {
		t.Errorf("-p udp on a non-first fragment: %v, want dropped", o.Drop)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"-s fc00::/64 -p tcp --dport 1:2 -j DROP",
		"-m srh ! --srh-psid fc00::1/ffff:: --srh-segs-lt 0 -j SEG6 --seg6-action eval-args",
		"! -i lo -o eth0 -j ACCEPT \\\n -j DROP",
		"[3:180] -A FWD -p udp -m udp -m udp --dport 5 ! -p ipv6-route -j ACCEPT",
		"-m srh --srh-segs-left-gt 3 ! --srh-segs-left-lt 3 -m srh --srh-psid fc00::/16 -p 0 -j DROP",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rules, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrTooMany) {
				t.Fatalf("error %v is neither ErrSyntax nor ErrTooMany", err)
			}
			return
		}
		for _, r := range rules {
			if r.Verdict == 0 {
				t.Fatalf("rule without verdict: %+v", r)
			}
		}
		resolved, err := Resolve(rules, func(string) (uint32, error) { return 3, nil })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Compile(resolved); err != nil {
			t.Fatal(err)
		}
	})
}
