package lab

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"text/tabwriter"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// ProgramCounters are the counters of one program of one node, as its
// kind's driver reads them (kind.Driver.Counters).
type ProgramCounters struct {
	Node       string         `json:"node"`
	Program    string         `json:"program"`
	NF         string         `json:"nf,omitempty"`
	Interfaces []string       `json:"interfaces"`
	Counters   []kind.Counter `json:"counters"`
	// Error says why the counters could not be read (e.g. not pinned).
	Error string `json:"error,omitempty"`
}

// Counters reads the counters of every program of the lab's nodes (only
// node's, when node is not empty). The pins are read from this process's
// mount namespace: `lab exec` cannot see them (it mounts a fresh /sys).
// A program whose counters cannot be read is reported with its Error, so
// one broken node does not hide the others.
func Counters(ctx context.Context, lab, node string, opts Options) ([]ProgramCounters, error) {
	rec, err := Load(lab, opts)
	if err != nil {
		return nil, err
	}
	desired, err := rec.desired()
	if err != nil {
		return nil, fmt.Errorf("lab counters: %w", err)
	}
	found := node == ""
	var out []ProgramCounters
	for _, n := range desired.Nodes {
		if node != "" && n.Name != node {
			continue
		}
		found = true
		if len(n.Programs) == 0 && !apply.HasKernelSIDs(n) {
			continue
		}
		ns, err := openNode(rec, n.Name)
		if err != nil {
			for _, p := range n.Programs {
				out = append(out, ProgramCounters{Node: n.Name, Program: p.Kind, NF: p.NF, Interfaces: p.Interfaces, Error: "namespace missing"})
			}
			if apply.HasKernelSIDs(n) {
				out = append(out, ProgramCounters{Node: n.Name, Program: KernelSIDs, Error: "namespace missing"})
			}
			continue
		}
		for _, p := range n.Programs {
			pc := ProgramCounters{Node: n.Name, Program: p.Kind, NF: p.NF, Interfaces: p.Interfaces}
			d, ok := opts.Drivers[p.Kind]
			if !ok {
				d, ok = kind.DriverFor(p.Kind)
			}
			if !ok {
				pc.Error = "no driver for program " + p.Kind
			} else if pc.Counters, err = d.Counters(ctx, ns, n, p); err != nil {
				pc.Error = err.Error()
			}
			out = append(out, pc)
		}
		out = append(out, kernelSIDCounters(ns, n)...)
		ns.Close()
	}
	if !found {
		return nil, fmt.Errorf("lab counters: lab %s has no node %s", clip(lab), clip(node))
	}
	return out, nil
}

// KernelSIDs is the Program of the counters the kernel keeps for a node's
// seg6local SIDs (`count`, Linux >= 5.14): not a program, the kernel's
// own datapath.
const KernelSIDs = "seg6local"

// kernelSIDCounters reads the kernel's counters of n's seg6local SIDs,
// one entry per SID (so each carries the NF it fronts), named as the
// eBPF End program names its SIDs' counters
// (apply.KernelSIDCounter.Counters; errors: packets the behaviour
// dropped).
// An eBPF SID's route counts only the packets its program handed the
// kernel (the slow path, docs/datapath.md).
func kernelSIDCounters(ns *netns.NS, n state.Node) []ProgramCounters {
	cs, err := apply.KernelSIDCounters(ns, n)
	if err != nil {
		return []ProgramCounters{{Node: n.Name, Program: KernelSIDs, Error: err.Error()}}
	}
	nf := map[netip.Prefix]string{}
	for _, s := range n.SIDs {
		nf[s.SID] = s.NF
	}
	var out []ProgramCounters
	for _, c := range cs {
		out = append(out, ProgramCounters{Node: n.Name, Program: KernelSIDs, NF: nf[c.SID], Counters: c.Counters()})
	}
	return out
}

// PrintCounters writes one line per counter, zero counters included (a
// SID that saw nothing is worth seeing).
func PrintCounters(w io.Writer, pcs []ProgramCounters) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPROGRAM\tNF\tCOUNTER\tVALUE")
	for _, pc := range pcs {
		prog := pc.Program
		if len(pc.Interfaces) > 0 {
			prog += " (" + strings.Join(pc.Interfaces, ",") + ")"
		}
		if pc.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\tERROR: %s\t-\n", pc.Node, prog, orDash(pc.NF), pc.Error)
			continue
		}
		if len(pc.Counters) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\n", pc.Node, prog, orDash(pc.NF))
		}
		for _, c := range pc.Counters {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", pc.Node, prog, orDash(pc.NF), c.Name, c.Value)
		}
	}
	tw.Flush()
}
