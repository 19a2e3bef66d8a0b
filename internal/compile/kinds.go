package compile

import (
	"fmt"

	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// compileKind has the NF's kind (internal/kind) add what the NF needs to
// its node. sid is the NF's SID as compiled (End or End.X on the node's
// datapath); the kind may change it before it is stored. A kind that is
// not linked in is an error (Validate reports it first).
func compileKind(s *spec.Spec, nf *spec.NF, sid *state.LocalSID, node *state.Node) error {
	k, ok := kind.Lookup(nf.Kind)
	if !ok {
		return fmt.Errorf("NF kind %q: %w (kinds: %v)", nf.Kind, ErrUnsupported, kind.Names())
	}
	return k.Compile(s, nf, sid, node)
}

// servesLegacy reports whether nf's kind fronts an SR-unaware NF
// (sr_aware: false) through an SR proxy (kind.LegacyProxy).
func servesLegacy(nf *spec.NF) bool {
	k, ok := kind.Lookup(nf.Kind)
	if !ok {
		return false
	}
	lp, ok := k.(kind.LegacyProxy)
	return ok && lp.ServesLegacy()
}
