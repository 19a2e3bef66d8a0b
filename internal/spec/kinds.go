package spec

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// Kinds lists the NF kinds the spec accepts. forward is a plain SR-aware
// NF (End). The others are implemented by their own packages, which read
// NF.Config and may register a check for it with RegisterKind. A new kind
// also goes into schema.json's enum (a test compares the two).
var Kinds = map[string]bool{
	"forward":   true,
	"firewall":  true, // SERA, seed 000
	"netfilter": true, // End.AN.NF, seed 002
	"proxy":     true, // SR proxy for a legacy NF, seed 001
	"opot":      true, // proof of transit, seed 003
}

// KindCheck validates the config of one NF of its kind. path is the NF's
// config path (e.g. "nfs[2].config"); errors should be FieldErrors made
// with Spec.ErrorAt so that they carry file, line and path.
type KindCheck func(s *Spec, nf *NF, path string) []error

var kindChecks = map[string]KindCheck{}

// RegisterKind makes kind valid and has Validate call check (if not nil)
// for every NF of that kind. Call it from an init function.
func RegisterKind(kind string, check KindCheck) {
	Kinds[kind] = true
	if check != nil {
		kindChecks[kind] = check
	}
}

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

// checkKinds runs the registered config checks.
func (v *validator) checkKinds() {
	for i := range v.s.NFs {
		nf := &v.s.NFs[i]
		if check := kindChecks[nf.Kind]; check != nil {
			for _, err := range check(v.s, nf, fmt.Sprintf("nfs[%d].config", i)) {
				if fe, ok := err.(*FieldError); ok {
					v.errs = append(v.errs, fe)
				} else if err != nil {
					v.add(fmt.Sprintf("nfs[%d].config", i), "%v", err)
				}
			}
		}
	}
}
