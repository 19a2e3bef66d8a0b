// Package end is the NF kind "forward": an SR-aware NF that is served by
// the SRv6 End (or End.X) behaviour on its node, RFC 8986 sections 4.1
// and 4.2. It has no config. On a node whose datapath is "kernel" the SID
// is a seg6local route (internal/apply); on an "ebpf" node it is an
// entry in the map of srchain's tc End program, which this package's
// driver (program kind "end") attaches and fills. That program serves
// every eBPF SID of its node, whatever kind fronts it (a firewall's SID
// too), so the compiler adds it per node (compile.ProgramEnd).
//
// It is the worked example of docs/CONTRIBUTING.md ("Adding a kind").
package end

import (
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// Name is the spec's kind name.
const Name = "forward"

// Program is the state.Program kind of the End program.
const Program = state.ProgramEnd

func init() { kind.Register(Kind{}) }

// Kind is the forward kind.
type Kind struct{}

// Name implements kind.Kind.
func (Kind) Name() string { return Name }

// IgnoresChains: the kind's check and compile read no chain
// (kind.ChainBlind).
func (Kind) IgnoresChains() bool { return true }

// Check accepts no config: forward only forwards.
func (Kind) Check(s *spec.Spec, nf *spec.NF, path string) []error {
	if nf.Config.Kind == 0 {
		return nil
	}
	return []error{s.ErrorAt(path, &nf.Config, "kind forward takes no config")}
}

// Compile keeps the SID as compiled: End or End.X on the node's datapath.
func (Kind) Compile(*spec.Spec, *spec.NF, *state.LocalSID, *state.Node) error { return nil }

// Drivers: the End program.
func (Kind) Drivers() map[string]kind.Driver { return map[string]kind.Driver{Program: endDriver{}} }
