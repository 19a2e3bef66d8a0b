// Package firewall is srchain's SR-aware firewall, SERA (seed 000,
// "SERA: SEgment Routing Aware firewall"), as an eBPF tc program.
//
// Rules are written in iptables syntax (Parse) with the srh match of the
// paper's Listing 2 and the SEG6 target of its Listing 3. Eval is the
// reference semantics: iptables' linear first-match. Compile turns a rule
// set into per-field lookup tables whose entries are bit vectors of rules
// (bpf-iptables' "linear bit-vector search"): a packet's rule is the first
// set bit of the AND of its fields' vectors, so the per-packet cost is
// bounded by the number of bitmap words, not the number of rules.
// Classifier.Classify runs the compiled tables in Go; the datapath
// (bpf/firewall.c, loaded by Load) runs the same tables from BPF maps.
package firewall

import (
	"errors"
	"fmt"
	"net/netip"
)

// MaxRules bounds a rule set: 10240 rules = 160 64-bit bitmap words
// (FW_MAX_WORDS in bpf/lib/fw_maps.h).
const MaxRules = 10240

// Words is the number of 64-bit words of a full rule bitmap.
const Words = MaxRules / 64

// Errors callers branch on.
var (
	ErrSyntax      = errors.New("syntax error")
	ErrTooMany     = errors.New("too many rules")
	ErrUnsupported = errors.New("unsupported")
	ErrNoInterface = errors.New("unknown interface")
)

// Field is one packet attribute a rule can test.
type Field uint8

// Fields, in the order of the datapath's field ids (FW_F_* in bpf/lib/fw_maps.h).
// The first NumAddrFields are prefix fields (looked up in an LPM trie), the
// rest are small integer domains (looked up in arrays).
const (
	FSrc         Field = iota // -s: basic mode the original source, advanced the outer one
	FDst                      // -d: basic mode the original destination, advanced the outer one
	FInnerSrc                 // --inner-src: source of the encapsulated packet
	FInnerDst                 // --inner-dst
	FPSID                     // --srh-psid: segment[SL+1], the SID visited before
	FNSID                     // --srh-nsid: segment[SL-1], the next SID
	FLSID                     // --srh-lsid: segment[0], the last SID
	FIIF                      // -i: ingress ifindex
	FOIF                      // -o: egress ifindex (FIB lookup of the destination)
	FActiveSID                // --sid: the active SID (destination of an SR packet): per-SID rule sets
	FProto                    // -p
	FSPort                    // --sport
	FDPort                    // --dport
	FSRH                      // -m srh: 1 when a valid SRH is present
	FNextHdr                  // --srh-next-hdr
	FHdrLen                   // --srh-len-*
	FSegsLeft                 // --srh-segs-*
	FLastEntry                // --srh-last-*
	FTag                      // --srh-tag
	FFamily                   // 4 or 6: the family -s/-d are read from (implicit in rules with -s/-d)
	FInnerFamily              // 4 or 6: the inner packet's family (implicit with --inner-src/--inner-dst)
	NumFields
)

// NumAddrFields is how many fields are prefix fields.
const NumAddrFields = int(FActiveSID) + 1

var fieldNames = [NumFields]string{
	"src", "dst", "inner-src", "inner-dst", "psid", "nsid", "lsid", "iif", "oif", "sid",
	"proto", "sport", "dport", "srh", "srh-next-hdr", "srh-len", "srh-segs", "srh-last", "srh-tag",
	"family", "inner-family",
}

func (f Field) String() string {
	if f < NumFields {
		return fieldNames[f]
	}
	return fmt.Sprintf("field-%d", uint8(f))
}

// IsAddr reports whether f is a prefix field.
func (f Field) IsAddr() bool { return int(f) < NumAddrFields }

// Domain is the number of values of an integer field (its absent value is
// Domain itself).
func (f Field) Domain() uint32 {
	switch f {
	case FSPort, FDPort, FTag:
		return 1 << 16
	case FSRH:
		return 2
	}
	return 256
}

// Cond is one test of a rule: the field's value lies in Prefix (prefix
// fields) or in [Lo, Hi] (integer fields; Lo > Hi is the empty set), or,
// with Neg, does not. A rule whose field is absent from the packet (no
// SRH, no previous SID, no inner packet, ...) does not match, negated or
// not, as in the kernel's ip6t_srh.
type Cond struct {
	Field  Field
	Neg    bool
	Prefix netip.Prefix // prefix fields; IPv4 prefixes are IPv4-mapped
	Lo, Hi uint32       // integer fields
	Iface  string       // FIIF/FOIF before resolution to an ifindex
}

// Verdict is what a matching rule does.
type Verdict uint8

// Verdicts; values are ABI with bpf/lib/fw_maps.h (FW_ACT_*).
const (
	Accept Verdict = iota + 1
	Drop
	Reject   // dropped and counted as DROP_FW_RULE (no ICMP is sent)
	GoNext   // SEG6 go-next: End (SL-1, DA = next SID)
	SkipNext // SEG6 skip-next: SL-2, DA = segment[SL-2]
	GoLast   // SEG6 go-last: SL = 0, DA = segment[0]
	EvalArgs // SEG6 eval-args: the active SID's ARGS choose one of the above
)

var verdictNames = map[Verdict]string{
	Accept: "ACCEPT", Drop: "DROP", Reject: "REJECT", GoNext: "go-next",
	SkipNext: "skip-next", GoLast: "go-last", EvalArgs: "eval-args",
}

func (v Verdict) String() string {
	if s, ok := verdictNames[v]; ok {
		return s
	}
	return fmt.Sprintf("verdict-%d", uint8(v))
}

// ParseVerdict reads a verdict name as written in configs ("accept",
// "DROP", "go-next", "seg6-skip-next", ...).
func ParseVerdict(s string) (Verdict, error) {
	for v, n := range verdictNames {
		if equalFold(s, n) || equalFold(s, "seg6-"+n) {
			return v, nil
		}
	}
	return 0, fmt.Errorf("parse verdict %q: %w", s, ErrSyntax)
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// Rule is one firewall rule.
type Rule struct {
	Conds   []Cond
	Verdict Verdict
	Line    int    // 1-based line in the source, 0 if built in code
	Text    string // the rule as written
}

// UsesSRH reports whether the rule needs an SR packet.
func (r Rule) UsesSRH() bool {
	for _, c := range r.Conds {
		if (c.Field >= FSRH && c.Field <= FTag) || c.Field == FInnerFamily || (c.Field >= FInnerSrc && c.Field <= FLSID) || c.Field == FActiveSID {
			return true
		}
	}
	return false
}

// NeverMatches reports an integer field on which r's conditions admit no
// value, so r matches no packet ("-p ipv6-route", which ip6tables warns
// about, or "--srh-segs-left-gt 3 --srh-segs-left-lt 3", what ip6tables
// makes of "gt 0 lt 3"). A rule that only tests absent fields is not
// reported.
func (r Rule) NeverMatches() (Field, bool) {
	for f := Field(NumAddrFields); f < NumFields; f++ {
		var cs []Cond
		for _, c := range r.Conds {
			if c.Field == f {
				cs = append(cs, c)
			}
		}
		if len(cs) == 0 {
			continue
		}
		some := false
		for x := uint32(0); x < f.Domain() && !some; x++ {
			ok := true
			for _, c := range cs {
				ok = ok && (c.Lo <= x && x <= c.Hi) != c.Neg
			}
			some = ok
		}
		if !some {
			return f, true
		}
	}
	return 0, false
}
