package spec

import (
	"errors"
	"regexp"
)

// Limits checked by Validate (docs/spec.md explains each).
const (
	MaxLabName  = 12 // prefixes namespace and interface-pair names
	MaxNodeName = 15
	MaxName     = 32 // NFs, chains, links, probes
	MaxIfName   = 15 // IFNAMSIZ - 1 (include/uapi/linux/if.h)
	MinMTU      = 1280
	MaxMTU      = 65535

	// The encapsulated-packet budget: a chain must carry a 1280-byte
	// inner packet (the IPv6 minimum link MTU, RFC 8200 section 5; used
	// for IPv4 inner packets too) plus its SR overhead on every link of
	// its path. Encap: outer IPv6 40 + SRH 8 + 16 per segment (RFC 8754
	// section 2); insert: SRH only, with one more segment (the original
	// destination becomes the last segment).
	MinInnerPacket = 1280
	IPv6HeaderLen  = 40
	SRHFixedLen    = 8
	SIDLen         = 16
)

var (
	nameRE   = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	ifNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

type validator struct {
	s    *Spec
	errs []error
}

func (v *validator) add(path, format string, args ...any) {
	v.errs = append(v.errs, v.s.errorf(path, format, args...))
}

// Validate checks the meaning of a decoded spec and returns every problem
// found, joined; each is a *FieldError (see FieldErrors).
func (s *Spec) Validate() error {
	v := &validator{s: s}
	v.top()
	v.nodes()
	v.links()
	v.legacyNFs()
	v.nfs()
	v.checkKinds()
	v.chains()
	v.pools()
	v.csid()
	v.chainArgs()
	v.opot()
	v.ingress()
	v.traffic()
	return errors.Join(v.errs...)
}

func (v *validator) name(path, kind, name string, max int) bool {
	switch {
	case name == "":
		v.add(path, "%s name is required", kind)
	case len(name) > max:
		v.add(path, "%s name %s is longer than %d characters", kind, Clip(name), max)
	case !nameRE.MatchString(name):
		v.add(path, "%s name %s must be lower-case letters, digits and inner dashes", kind, Clip(name))
	default:
		return true
	}
	return false
}

// unique reports duplicate names of one kind, pointing at the later one.
func (v *validator) unique(kind string, names []string, path func(int) string) {
	first := map[string]int{}
	for i, n := range names {
		if n == "" {
			continue
		}
		if j, ok := first[n]; ok {
			v.add(path(i), "duplicate %s %q (first at %s)", kind, n, path(j))
			continue
		}
		first[n] = i
	}
}

func (v *validator) top() {
	s := v.s
	v.name("name", "lab", s.Name, MaxLabName)
	f := s.SIDFormat
	switch {
	case f.LocatorBits < 1 || f.LocatorBits > 127:
		v.add("sid_format.locator_bits", "locator_bits must be 1..127, got %d", f.LocatorBits)
	case f.FunctionBits < 1:
		v.add("sid_format.function_bits", "function_bits must be at least 1, got %d", f.FunctionBits)
	case f.ArgsBits < 0:
		v.add("sid_format.args_bits", "args_bits must not be negative, got %d", f.ArgsBits)
	case f.LocatorBits+f.FunctionBits+f.ArgsBits > 128:
		v.add("sid_format", "locator_bits + function_bits + args_bits = %d exceeds 128", f.LocatorBits+f.FunctionBits+f.ArgsBits)
	}
	if len(s.Nodes) == 0 {
		v.add("nodes", "at least one node is required")
	}
	if s.Routing != "" && s.Routing != RoutingStatic && s.Routing != RoutingBGP {
		v.add("routing", "routing must be %q or %q, got %s", RoutingStatic, RoutingBGP, Clip(s.Routing))
	}
}
