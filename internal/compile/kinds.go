package compile

import (
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// KindCompiler adds what an NF kind needs to its node's state. It receives
// the NF's SID as compiled (End or End.X on the node's datapath) and may
// change it (e.g. its datapath) before it is stored, and add programs,
// params or routes to the node. It must be pure, like Compile.
type KindCompiler func(s *spec.Spec, nf *spec.NF, sid *state.LocalSID, node *state.Node) error

var kindCompilers = map[string]KindCompiler{}

// RegisterKind installs the compiler of an NF kind (see spec.RegisterKind
// for its config checks). Call it from an init function.
func RegisterKind(kind string, kc KindCompiler) { kindCompilers[kind] = kc }
