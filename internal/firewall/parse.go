package firewall

import (
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"strconv"
	"strings"
)

// ParseError is a rule syntax error at a position of the source.
type ParseError struct {
	Line, Col int // 1-based
	Msg       string
}

func (e *ParseError) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg) }

// Unwrap makes every ParseError an ErrSyntax.
func (e *ParseError) Unwrap() error { return ErrSyntax }

// token is one whitespace-separated word and where it starts.
type token struct {
	s         string
	line, col int
}

// Parse reads a rule set: one iptables-style rule per line, e.g.
//
//	-s fc00:1::/64 -p tcp --dport 22 -j DROP
//	-m srh --srh-nsid fc00:5::d1/128 -j SEG6 --seg6-action skip-next
//
// '#' starts a comment, a trailing '\' continues the rule on the next
// line, and a leading "ip6tables"/"iptables" word, "-A CHAIN" and
// ip6tables-save -c's "[packets:bytes]" are ignored so rules can be
// pasted from scripts and from ip6tables-save. A rule set is one chain:
// rules naming two chains, "-I" (which inserts at the head, so a script
// of them runs in reverse) and ip6tables-save's table, chain and COMMIT
// lines are refused. Every error is reported
// (errors.Join of *ParseError, each with line, column and what was
// expected); on error no rules are returned.
func Parse(src string) ([]Rule, error) {
	var (
		rules []Rule
		errs  []error
		toks  []token
		text  []string
		first int
		chain token // the first rule's -A chain
	)
	flush := func() {
		if len(toks) == 0 {
			return
		}
		r, ch, err := parseRule(toks)
		if err == nil && ch.s != "" {
			if chain.s == "" {
				chain = ch
			} else if ch.s != chain.s {
				err = errAt(ch, "rule of chain %s after rules of chain %s (line %d): a rule set is one chain", ch.s, chain.s, chain.line)
			}
		}
		if err != nil {
			errs = append(errs, err)
		} else {
			r.Line = first
			r.Text = strings.Join(text, " ")
			rules = append(rules, r)
		}
		toks, text = nil, nil
	}
	for i, line := range strings.Split(src, "\n") {
		ln := i + 1
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		line = strings.TrimRight(line, " \t\r")
		cont := strings.HasSuffix(line, "\\")
		if cont {
			line = line[:len(line)-1]
		}
		words := splitWords(line, ln)
		if len(toks) == 0 && len(words) > 0 {
			first = ln
		}
		toks = append(toks, words...)
		if t := strings.TrimSpace(line); t != "" {
			text = append(text, t)
		}
		if !cont {
			flush()
		}
	}
	flush()
	if len(rules) > MaxRules {
		errs = append(errs, fmt.Errorf("parse rules: %d rules, at most %d: %w", len(rules), MaxRules, ErrTooMany))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return rules, nil
}

func splitWords(line string, ln int) []token {
	var out []token
	i := 0
	for i < len(line) {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' {
			j++
		}
		if j > i {
			out = append(out, token{line[i:j], ln, i + 1})
		}
		i = j
	}
	return out
}

// ruleParser holds the state of one rule being parsed.
type ruleParser struct {
	toks    []token
	i       int
	r       Rule
	seen    map[string]bool
	modules map[string]bool
	proto   int // -1 unset; the protocol -p named (for --sport/--dport)
	target  string
	// tcpudp: the rule loads the tcp or udp match (-m tcp|udp, or a port
	// option, which loads it implicitly as in iptables).
	tcpudp bool
	// srhCmp holds, per SRH integer field, the first comparison of the
	// current -m srh (see srhInt).
	srhCmp map[Field]srhCmp
	// extProto: the index in r.Conds of a -p naming an IPv6 extension
	// header (see protocol), -1 if none.
	extProto int
	chain    token // -A's chain
}

// srhCmp is one --srh-*-eq|gt|lt option: its spelling and value.
type srhCmp struct {
	opt string
	v   uint32
}

func errAt(t token, format string, args ...any) error {
	return &ParseError{Line: t.line, Col: t.col, Msg: fmt.Sprintf(format, args...)}
}

// parseRule reads one rule; chain is its -A argument (empty without -A).
func parseRule(toks []token) (r Rule, chain token, err error) {
	p := &ruleParser{toks: toks, seen: map[string]bool{}, modules: map[string]bool{}, proto: -1, extProto: -1}
	if w := toks[0].s; w == "ip6tables" || w == "iptables" || isSaveCounter(w) {
		p.i++
	}
	if p.i < len(toks) {
		if w := toks[p.i].s; w[0] == '*' || w[0] == ':' || w == "COMMIT" {
			return Rule{}, token{}, errAt(toks[p.i], "%q is an ip6tables-save table, chain or COMMIT line, not a rule: paste the -A lines of one chain", w)
		}
	}
	for p.i < len(p.toks) {
		if err := p.option(); err != nil {
			return Rule{}, token{}, err
		}
	}
	if p.r.Verdict == 0 {
		last := toks[len(toks)-1]
		return Rule{}, token{}, &ParseError{Line: last.line, Col: last.col + len(last.s), Msg: "expected -j ACCEPT|DROP|REJECT|SEG6 at end of rule"}
	}
	p.finish()
	return p.r, p.chain, nil
}

// isSaveCounter reports whether w is ip6tables-save -c's "[packets:bytes]".
func isSaveCounter(w string) bool {
	a, b, ok := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(w, "["), "]"), ":")
	if !ok || len(w) < 5 || w[0] != '[' || w[len(w)-1] != ']' {
		return false
	}
	_, errA := strconv.ParseUint(a, 10, 64)
	_, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil
}

// finish adds the conditions a rule implies once all its options are read.
func (p *ruleParser) finish() {
	hasPort := false
	for _, c := range p.r.Conds {
		hasPort = hasPort || c.Field == FSPort || c.Field == FDPort
	}
	if p.tcpudp && !hasPort {
		// The kernel's tcp and udp matches (xt_tcpudp) are false on a
		// non-first fragment (par->fragoff != 0) and need the transport
		// header: "-p udp -m udp" alone still requires the ports, which
		// are absent exactly then. A port condition says the same.
		p.r.Conds = append(p.r.Conds, Cond{Field: FSPort, Lo: 0, Hi: 0xffff})
	}
	if p.extProto >= 0 {
		for _, c := range p.r.Conds {
			if c.Field == FFamily && c.Lo == 4 {
				// An IPv4 rule is iptables': -p is the IPv4 header's
				// protocol field, extension headers mean nothing there.
				return
			}
		}
		c := &p.r.Conds[p.extProto]
		c.Lo, c.Hi = 1, 0 // the empty set: -p never, ! -p always (if present)
	}
}

func (p *ruleParser) next(opt token, what string) (token, error) {
	p.i++
	if p.i >= len(p.toks) {
		return token{}, &ParseError{Line: opt.line, Col: opt.col + len(opt.s), Msg: fmt.Sprintf("expected %s after %s", what, opt.s)}
	}
	return p.toks[p.i], nil
}

// option consumes one option (with its '!' and argument).
func (p *ruleParser) option() error {
	t := p.toks[p.i]
	neg := false
	if t.s == "!" {
		neg = true
		p.i++
		if p.i >= len(p.toks) {
			return &ParseError{Line: t.line, Col: t.col + 1, Msg: "expected an option after '!'"}
		}
		t = p.toks[p.i]
	}
	name := canonical(t.s)
	// -m may repeat (each -m loads one more match, as in iptables);
	// options belonging to a match may be given once per match.
	if p.seen[name] && name != "-m" {
		return errAt(t, "option %s given twice", t.s)
	}
	p.seen[name] = true
	negatable := true
	var err error
	switch name {
	case "-A":
		negatable = false
		p.chain, err = p.next(t, "a chain name")
	case "-I":
		// ip6tables inserts at the head (or at a position): pasted in
		// order, a script of -I lines would match in reverse.
		return errAt(t, "-I inserts a rule at the head of its chain in ip6tables: write the rules in the order they should match, with -A or without a chain")
	case "-s", "-d":
		err = p.addr(t, neg, map[string]Field{"-s": FSrc, "-d": FDst}[name])
	case "-p":
		err = p.protocol(t, neg)
	case "-i", "-o":
		err = p.iface(t, neg, map[string]Field{"-i": FIIF, "-o": FOIF}[name])
	case "--sport", "--dport":
		p.tcpudp = true // iptables loads the tcp/udp match implicitly
		err = p.port(t, neg, map[string]Field{"--sport": FSPort, "--dport": FDPort}[name])
	case "-m":
		negatable = false
		err = p.module(t)
	case "-j":
		negatable = false
		err = p.jump(t)
	case "--seg6-action":
		negatable = false
		err = p.seg6Action(t)
	default:
		if f, ok := srhAddrOpts[name]; ok {
			if err = p.needSRH(t); err == nil {
				err = p.addr(t, neg, f)
			}
			break
		}
		if f, ok := srhIntOpts[name]; ok {
			if err = p.needSRH(t); err == nil {
				err = p.srhInt(t, neg, f, name)
			}
			break
		}
		return errAt(t, "unknown option %q: expected -s, -d, -p, -i, -o, --sport, --dport, -m srh options, -j", t.s)
	}
	if err != nil {
		return err
	}
	if neg && !negatable {
		return errAt(t, "option %s cannot be negated", t.s)
	}
	p.i++
	return nil
}

// canonical maps long and short spellings to one name.
func canonical(s string) string {
	switch s {
	case "--source", "--src":
		return "-s"
	case "--destination", "--dst":
		return "-d"
	case "--protocol":
		return "-p"
	case "--in-interface":
		return "-i"
	case "--out-interface":
		return "-o"
	case "--source-port":
		return "--sport"
	case "--destination-port":
		return "--dport"
	case "--match":
		return "-m"
	case "--jump":
		return "-j"
	case "--append":
		return "-A"
	case "--insert":
		return "-I"
	}
	// Mainline ip6tables spells the srh options longer than the paper's
	// Listing 2 (--srh-hdr-len-eq for --srh-len-eq, ...); accept both.
	for long, short := range map[string]string{"--srh-hdr-len-": "--srh-len-", "--srh-segs-left-": "--srh-segs-", "--srh-last-entry-": "--srh-last-"} {
		if strings.HasPrefix(s, long) {
			return short + s[len(long):]
		}
	}
	return s
}

var srhAddrOpts = map[string]Field{
	"--inner-src": FInnerSrc, "--inner-dst": FInnerDst,
	"--srh-psid": FPSID, "--srh-nsid": FNSID, "--srh-lsid": FLSID,
	"--sid": FActiveSID,
}

var srhIntOpts = map[string]Field{
	"--srh-next-hdr": FNextHdr,
	"--srh-len-eq":   FHdrLen, "--srh-len-gt": FHdrLen, "--srh-len-lt": FHdrLen,
	"--srh-segs-eq": FSegsLeft, "--srh-segs-gt": FSegsLeft, "--srh-segs-lt": FSegsLeft,
	"--srh-last-eq": FLastEntry, "--srh-last-gt": FLastEntry, "--srh-last-lt": FLastEntry,
	"--srh-tag": FTag,
}

func (p *ruleParser) needSRH(t token) error {
	if !p.modules["srh"] {
		return errAt(t, "expected -m srh before %s", t.s)
	}
	return nil
}

func (p *ruleParser) addr(opt token, neg bool, f Field) error {
	a, err := p.next(opt, "addr[/mask]")
	if err != nil {
		return err
	}
	pfx, perr := ParsePrefix(a.s)
	if perr != nil {
		return errAt(a, "expected addr[/mask] after %s: %v", opt.s, perr)
	}
	addrS, _, _ := strings.Cut(a.s, "/")
	fam := uint32(6)
	if ip, err := netip.ParseAddr(addrS); err == nil && ip.Is4() {
		fam = 4
	}
	// IPv4 and IPv6 addresses live in one space (IPv4-mapped), so every
	// rule with addresses carries an implicit family condition: an IPv4
	// rule matches only IPv4 packets, an IPv6 rule only IPv6 ones, negated
	// or not (iptables and ip6tables are separate tables).
	p.r.Conds = append(p.r.Conds, Cond{Field: f, Neg: neg, Prefix: pfx})
	var ff Field
	switch f {
	case FSrc, FDst:
		ff = FFamily
	case FInnerSrc, FInnerDst:
		ff = FInnerFamily
	default:
		if fam == 4 {
			return errAt(a, "expected an IPv6 address after %s (SIDs are IPv6), got %q", opt.s, a.s)
		}
	}
	if ff != 0 {
		dup := false
		for _, c := range p.r.Conds {
			if c.Field == ff {
				if c.Lo != fam {
					return errAt(a, "%s mixes IPv4 and IPv6 addresses in one rule", opt.s)
				}
				dup = true
			}
		}
		if !dup {
			p.r.Conds = append(p.r.Conds, Cond{Field: ff, Lo: fam, Hi: fam})
		}
	}
	return nil
}

// ParsePrefix reads addr, addr/len or addr/mask (a contiguous mask, as
// iptables accepts). IPv4 results are returned as IPv4-mapped IPv6
// prefixes, the form every address field is compared in.
func ParsePrefix(s string) (netip.Prefix, error) {
	addrS, maskS, hasMask := strings.Cut(s, "/")
	a, err := netip.ParseAddr(addrS)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("bad address %q", addrS)
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("zones not allowed in %q", addrS)
	}
	bitsN := a.BitLen()
	if hasMask {
		if n, err := strconv.Atoi(maskS); err == nil {
			if n < 0 || n > a.BitLen() {
				return netip.Prefix{}, fmt.Errorf("prefix length %d out of range 0..%d", n, a.BitLen())
			}
			bitsN = n
		} else {
			m, err := netip.ParseAddr(maskS)
			if err != nil || m.BitLen() != a.BitLen() {
				return netip.Prefix{}, fmt.Errorf("bad mask %q", maskS)
			}
			n, ok := maskLen(m.AsSlice())
			if !ok {
				return netip.Prefix{}, fmt.Errorf("mask %q is not contiguous", maskS)
			}
			bitsN = n
		}
	}
	return normPrefix(netip.PrefixFrom(a, bitsN).Masked()), nil
}

func maskLen(b []byte) (int, bool) {
	n, done := 0, false
	for _, x := range b {
		if done && x != 0 {
			return 0, false
		}
		ones := bits.LeadingZeros8(^x)
		if ones < 8 {
			if x<<ones != 0 {
				return 0, false
			}
			done = true
		}
		n += ones
	}
	return n, true
}

// normAddr maps IPv4 addresses into IPv4-mapped IPv6 (::ffff:a.b.c.d), the
// form the datapath keys them in; the family fields (FFamily,
// FInnerFamily) keep IPv4 and IPv6 rules apart.
func normAddr(a netip.Addr) netip.Addr {
	if a.Is4() {
		return netip.AddrFrom16(a.As16())
	}
	return a
}

func normPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4() {
		return netip.PrefixFrom(normAddr(p.Addr()), p.Bits()+96)
	}
	return p
}

// isExtHdr reports whether proto is an IPv6 extension header that
// ip6tables' ipv6_find_hdr walks over when it looks for -p's protocol
// (Hop-by-Hop is 0, which -p reads as "all").
func isExtHdr(proto uint32) bool {
	return proto == protoRouting || proto == protoFrag || proto == protoAH || proto == protoDstOpts
}

// protocol reads -p as ip6tables-legacy does. A name is looked up in
// /etc/protocols' names (protocolNumbers), so "ipencap" is 4 and "ipip"
// is 94. 0 ("all", "hopopt", "ip") is every protocol and cannot be
// negated (ip6tables: "rule would never match protocol"). -p compares
// the header ipv6_find_hdr stops at, which is never a Routing,
// Fragment, Destination Options or AH header: "-p ipv6-route" never
// matches and "! -p ipv6-route" matches every packet (ip6tables warns
// "never matched protocol"); finish makes it so unless the rule is an
// IPv4 one. 59 (ipv6-nonxt) is where the walk stops on a packet with no
// next header, so it matches those.
func (p *ruleParser) protocol(opt token, neg bool) error {
	a, err := p.next(opt, "a protocol (a name, all or 0..255)")
	if err != nil {
		return err
	}
	name := strings.ToLower(a.s)
	v, ok := protocolNumbers[name]
	if !ok {
		n, err := strconv.ParseUint(name, 10, 8)
		if err != nil {
			return errAt(a, "expected a protocol (tcp, udp, icmpv6, a name of /etc/protocols, all or 0..255), got %q", a.s)
		}
		v = uint32(n)
	}
	if v == 0 {
		if neg {
			return errAt(a, "! -p %s matches nothing (0 is every protocol; ip6tables refuses it too)", a.s)
		}
		return nil
	}
	if !neg {
		p.proto = int(v)
	}
	if isExtHdr(v) {
		p.extProto = len(p.r.Conds)
	}
	p.r.Conds = append(p.r.Conds, Cond{Field: FProto, Neg: neg, Lo: v, Hi: v})
	return nil
}

func (p *ruleParser) iface(opt token, neg bool, f Field) error {
	a, err := p.next(opt, "an interface name")
	if err != nil {
		return err
	}
	if len(a.s) > 15 || strings.ContainsAny(a.s, "+/") {
		return errAt(a, "expected an interface name (at most 15 characters, no wildcard), got %q", a.s)
	}
	p.r.Conds = append(p.r.Conds, Cond{Field: f, Neg: neg, Iface: a.s})
	return nil
}

func (p *ruleParser) port(opt token, neg bool, f Field) error {
	if p.proto != 6 && p.proto != 17 {
		return errAt(opt, "expected -p tcp or -p udp before %s", opt.s)
	}
	a, err := p.next(opt, "port[:port]")
	if err != nil {
		return err
	}
	lo, hi, perr := parseRange(a.s, 0xffff)
	if perr != nil {
		return errAt(a, "expected port or first:last after %s: %v", opt.s, perr)
	}
	p.r.Conds = append(p.r.Conds, Cond{Field: f, Neg: neg, Lo: lo, Hi: hi})
	return nil
}

// parseRange reads n, lo:hi, lo: or :hi (iptables port syntax).
func parseRange(s string, max uint32) (uint32, uint32, error) {
	num := func(x string, dflt uint32) (uint32, error) {
		if x == "" {
			return dflt, nil
		}
		n, err := strconv.ParseUint(x, 10, 32)
		if err != nil || uint32(n) > max {
			return 0, fmt.Errorf("%q is not a number in 0..%d", x, max)
		}
		return uint32(n), nil
	}
	a, b, isRange := strings.Cut(s, ":")
	if !isRange {
		if s == "" {
			return 0, 0, errors.New("empty")
		}
		n, err := num(s, 0)
		return n, n, err
	}
	lo, err := num(a, 0)
	if err != nil {
		return 0, 0, err
	}
	hi, err := num(b, max)
	if err != nil {
		return 0, 0, err
	}
	if lo > hi {
		return 0, 0, fmt.Errorf("range %d:%d is reversed", lo, hi)
	}
	return lo, hi, nil
}

func (p *ruleParser) srhInt(opt token, neg bool, f Field, name string) error {
	max := uint32(255)
	if f == FTag {
		max = 0xffff
	}
	a, err := p.next(opt, "a number")
	if err != nil {
		return err
	}
	n, perr := strconv.ParseUint(a.s, 0, 32)
	if perr != nil || uint32(n) > max {
		return errAt(a, "expected a number in 0..%d after %s, got %q", max, opt.s, a.s)
	}
	v := uint32(n)
	if f == FHdrLen || f == FSegsLeft || f == FLastEntry {
		// ip6t_srh has one value per field for its eq, gt and lt
		// comparisons: libip6t_srh overwrites it with each option, so
		// "--srh-segs-left-gt 0 --srh-segs-left-lt 3" is "gt 3 and lt 3"
		// in the kernel (ip6tables -S shows it so) and matches nothing.
		// The same value twice (ip6tables-save's output) means what it
		// means there; different values are refused rather than
		// silently read either way.
		if prev, ok := p.srhCmp[f]; ok && prev.v != v {
			return errAt(a, "%s %d after %s %d in one -m srh: ip6tables keeps one value per SRH field and compares with the last one given (%s %d %s %d, which it shows with -S); give each comparison its own -m srh to require both",
				opt.s, v, prev.opt, prev.v, prev.opt, v, opt.s, v)
		}
		p.srhCmp[f] = srhCmp{opt.s, v}
	}
	c := Cond{Field: f, Neg: neg, Lo: v, Hi: v}
	switch {
	case strings.HasSuffix(name, "-gt"):
		c.Lo, c.Hi = v+1, max // v == max: Lo > Hi, the empty set
	case strings.HasSuffix(name, "-lt"):
		if v == 0 {
			c.Lo, c.Hi = 1, 0
		} else {
			c.Lo, c.Hi = 0, v-1
		}
	}
	p.r.Conds = append(p.r.Conds, c)
	return nil
}

func (p *ruleParser) module(opt token) error {
	a, err := p.next(opt, "a match module name")
	if err != nil {
		return err
	}
	name := a.s
	if name == "icmpv6" {
		name = "icmp6"
	}
	// A match may be loaded more than once (ip6tables-save prints
	// "-p tcp -m tcp --dport 5 -m tcp --sport 3"): every instance must
	// hold, and each takes its own options, so the options of this
	// module may be given again after it.
	switch name {
	case "srh":
		if !p.modules["srh"] {
			p.r.Conds = append(p.r.Conds, Cond{Field: FSRH, Lo: 1, Hi: 1})
		}
		p.modules["srh"] = true
		p.srhCmp = map[Field]srhCmp{}
		for o := range srhAddrOpts {
			delete(p.seen, o)
		}
		for o := range srhIntOpts {
			delete(p.seen, o)
		}
	case "tcp", "udp", "icmp", "icmp6":
		// iptables loads -m tcp only for -p tcp (and so on).
		want := map[string]int{"tcp": 6, "udp": 17, "icmp": 1, "icmp6": 58}[name]
		if p.proto != want {
			return errAt(a, "expected -p %s before -m %s", name, a.s)
		}
		p.modules[name] = true
		if name == "tcp" || name == "udp" {
			p.tcpudp = true
			delete(p.seen, "--sport")
			delete(p.seen, "--dport")
		}
	default:
		return errAt(a, "expected module srh, tcp, udp, icmp or icmp6, got %q", a.s)
	}
	return nil
}

func (p *ruleParser) jump(opt token) error {
	a, err := p.next(opt, "a target (ACCEPT, DROP, REJECT, SEG6)")
	if err != nil {
		return err
	}
	p.target = a.s
	switch a.s {
	case "ACCEPT":
		p.r.Verdict = Accept
	case "DROP":
		p.r.Verdict = Drop
	case "REJECT":
		p.r.Verdict = Reject
	case "SEG6":
		p.r.Verdict = GoNext // the SEG6 target's default action (seed 000 V.B)
	default:
		return errAt(a, "expected target ACCEPT, DROP, REJECT or SEG6, got %q", a.s)
	}
	return nil
}

func (p *ruleParser) seg6Action(opt token) error {
	if p.target != "SEG6" {
		return errAt(opt, "expected -j SEG6 before --seg6-action")
	}
	a, err := p.next(opt, "go-next, skip-next, go-last or eval-args")
	if err != nil {
		return err
	}
	switch strings.TrimPrefix(a.s, "seg6-") {
	case "go-next":
		p.r.Verdict = GoNext
	case "skip-next":
		p.r.Verdict = SkipNext
	case "go-last":
		p.r.Verdict = GoLast
	case "eval-args":
		p.r.Verdict = EvalArgs
	default:
		return errAt(a, "expected go-next, skip-next, go-last or eval-args, got %q", a.s)
	}
	return nil
}
