package spec

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// KindSet is what Validate needs to know about NF kinds. The kinds live
// in their own packages (internal/kinds/...) registered with
// internal/kind, which installs itself here with SetKinds; spec cannot
// import it (it imports spec).
type KindSet interface {
	// Names lists the kinds that exist, sorted.
	Names() []string
	// Check validates the config of nf at path (e.g. "nfs[2].config");
	// known is false when no kind of that name exists.
	Check(s *Spec, nf *NF, path string) (known bool, errs []error)
}

// LegacyKinds is implemented by a KindSet that knows which kinds front
// SR-unaware NFs (sr_aware: false) through an SR proxy.
type LegacyKinds interface {
	ServesLegacy(kind string) bool
}

// ChainBlindKinds is implemented by a KindSet that knows which kinds read
// no chain in their checks and compilation (ChainAlone needs it).
type ChainBlindKinds interface {
	IgnoresChains(kind string) bool
}

var kinds KindSet

// SetKinds installs the kinds Validate accepts (internal/kind does, when
// linked in). Without it every NF kind is unknown.
func SetKinds(k KindSet) { kinds = k }

// ErrorAt makes a FieldError for path. When n is not nil (a node inside an
// NF's config) its position is used, else the position of path or of its
// closest ancestor in the file.
func (s *Spec) ErrorAt(path string, n *yaml.Node, format string, args ...any) *FieldError {
	fe := s.errorf(path, format, args...)
	if n != nil && n.Line > 0 {
		fe.Line, fe.Col = n.Line, n.Column
	}
	return fe
}

// checkKinds rejects kinds that do not exist (naming those that do) and
// runs each kind's config check.
func (v *validator) checkKinds() {
	var names []string
	if kinds != nil {
		names = kinds.Names()
	}
	known := "none are linked in (import internal/kinds/all)"
	if len(names) > 0 {
		known = strings.Join(names, ", ")
	}
	for i := range v.s.NFs {
		nf := &v.s.NFs[i]
		path := fmt.Sprintf("nfs[%d]", i)
		ok, errs := false, []error(nil)
		if kinds != nil {
			ok, errs = kinds.Check(v.s, nf, path+".config")
		}
		if !ok {
			v.add(path+".kind", "unknown NF kind %q (kinds: %s)", nf.Kind, known)
			continue
		}
		if lp, isLP := kinds.(LegacyKinds); isLP && !nf.IsSRAware() && !lp.ServesLegacy(nf.Kind) {
			var proxies []string
			for _, n := range names {
				if lp.ServesLegacy(n) {
					proxies = append(proxies, n)
				}
			}
			v.add(path+".sr_aware", "kind %q serves SR-aware NFs only; an SR-unaware NF (sr_aware: false) sits behind an SR proxy (kinds: %s)", nf.Kind, strings.Join(proxies, ", "))
		}
		for _, err := range errs {
			if fe, ok := err.(*FieldError); ok {
				v.errs = append(v.errs, fe)
			} else if err != nil {
				v.add(path+".config", "%v", err)
			}
		}
	}
}
