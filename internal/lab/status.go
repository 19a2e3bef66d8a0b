package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/state"
)

// NodeStatus is how one node compares with its desired state.
type NodeStatus struct {
	Node      string `json:"node"`
	Namespace string `json:"namespace"`
	// Present is false when the namespace is gone.
	Present bool `json:"present"`
	// Interfaces maps each desired interface to "up", "down" or "missing".
	Interfaces map[string]string `json:"interfaces"`
	Routes     int               `json:"routes"`
	SIDs       int               `json:"sids"`
	// Pending is what `apply` would still change (empty: as desired).
	Pending []string `json:"pending,omitempty"`
	// Programs maps interface -> program names attached there: the XDP
	// program first, as "xdp:NAME", then those at tcx ingress, then
	// those at tcx egress as "egress:NAME" (the OPoT headend stage runs
	// there, behind the kernel's seg6 encap).
	// A node is OK only with the program its driver names (srchain_end
	// for "end") on each of the program's interfaces, and with every SID
	// the driver serves in its map.
	Programs map[string][]string `json:"programs,omitempty"`
	// Notes says what runs differently from what the spec asked, and
	// why (e.g. an End that falls back from XDP to tc).
	Notes []string `json:"notes,omitempty"`
	// Problems says what is broken, in words.
	Problems []string `json:"problems,omitempty"`
}

// OK reports whether the node is as desired.
func (s NodeStatus) OK() bool { return len(s.Problems) == 0 }

// Status compares every node of lab with its recorded desired state.
func Status(ctx context.Context, lab string, opts Options) ([]NodeStatus, error) {
	rec, err := Load(lab, opts)
	if err != nil {
		return nil, err
	}
	desired, err := rec.desired()
	if err != nil {
		return nil, fmt.Errorf("lab status: %w", err)
	}
	var out []NodeStatus
	for _, n := range desired.Nodes {
		st := NodeStatus{Node: n.Name, Namespace: rec.Namespaces[n.Name],
			Interfaces: map[string]string{}, Routes: len(n.Routes), SIDs: len(n.SIDs)}
		ns, err := openNode(rec, n.Name)
		if err != nil {
			st.Problems = append(st.Problems, "namespace missing")
			out = append(out, st)
			continue
		}
		st.Present = true
		for _, i := range n.Interfaces {
			l, err := ns.Netlink().LinkByName(i.Name)
			switch {
			case err != nil:
				st.Interfaces[i.Name] = "missing"
				st.Problems = append(st.Problems, "interface "+i.Name+" missing")
			case l.Attrs().Flags&net.FlagUp == 0:
				st.Interfaces[i.Name] = "down"
				st.Problems = append(st.Problems, "interface "+i.Name+" down")
			default:
				st.Interfaces[i.Name] = "up"
			}
		}
		pending, err := apply.Check(ctx, ns, n)
		if err != nil {
			st.Problems = append(st.Problems, "check: "+err.Error())
		}
		st.Pending = pending
		for _, p := range pending {
			st.Problems = append(st.Problems, "not applied: "+p)
		}
		for _, p := range n.Programs {
			st.Notes = append(st.Notes, pipelineNotes(p)...)
			for _, ifn := range p.Interfaces {
				names, err := apply.IngressPrograms(ns, ifn)
				if err != nil {
					continue // reported by CheckPrograms
				}
				if x, err := apply.XDPProgram(ns, ifn); err == nil && x != "" {
					names = append([]string{"xdp:" + x}, names...)
				}
				if eg, err := apply.EgressPrograms(ns, ifn); err == nil {
					for _, e := range eg {
						names = append(names, egressPrefix+e)
					}
				}
				if st.Programs == nil {
					st.Programs = map[string][]string{}
				}
				st.Programs[ifn] = names
			}
		}
		missing, err := apply.CheckProgramsWith(ctx, ns, n, opts.Drivers)
		if err != nil {
			st.Problems = append(st.Problems, "check programs: "+err.Error())
		}
		st.Problems = append(st.Problems, missing...)
		ns.Close()
		out = append(out, st)
	}
	return out, nil
}

// PrintStatus writes a table of sts.
func PrintStatus(w io.Writer, sts []NodeStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tNAMESPACE\tINTERFACES\tROUTES\tSIDS\tPROGRAMS\tSTATE")
	for _, s := range sts {
		var ifs []string
		for name, st := range s.Interfaces {
			ifs = append(ifs, name+":"+st)
		}
		slices.Sort(ifs)
		var progs []string
		for ifn, names := range s.Programs {
			progs = append(progs, programsLabel(ifn, names))
		}
		slices.Sort(progs)
		state := "ok"
		if len(s.Notes) > 0 {
			state += " (" + strings.Join(s.Notes, "; ") + ")"
		}
		if !s.OK() {
			state = "BROKEN: " + strings.Join(s.Problems, "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", s.Node, s.Namespace, strings.Join(ifs, ","),
			s.Routes, s.SIDs, orDash(strings.Join(progs, ",")), state)
	}
	tw.Flush()
}

// egressPrefix names a program at tcx egress in NodeStatus.Programs.
const egressPrefix = "egress:"

// programsLabel is one interface's entry of the PROGRAMS column:
// "IF:A+B" for the programs at XDP and tcx ingress, the tcx egress ones
// after them as "IF:A+egress:C" ("IF:egress:C" when only egress runs
// one, as the OPoT headend stage on an ingress router), and "IF:none"
// when a program's interface runs nothing.
func programsLabel(ifn string, names []string) string {
	if len(names) == 0 {
		return ifn + ":none"
	}
	return ifn + ":" + strings.Join(names, "+")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// pipelineNotes says, for a node's pipeline program, which stages run at
// XDP and which stay at tc although the node asked for XDP, and why
// (state.PipelineConfig, docs/pipeline.md).
func pipelineNotes(p state.Program) []string {
	if p.Kind != state.ProgramPipeline || len(p.Config) == 0 {
		return nil
	}
	var cfg state.PipelineConfig
	if json.Unmarshal(p.Config, &cfg) != nil {
		return nil
	}
	var out []string
	if len(cfg.Stages) > 0 {
		out = append(out, "xdp pipeline: "+strings.Join(cfg.Stages, " -> "))
	}
	if cfg.TC != "" {
		out = append(out, cfg.TC)
	}
	return out
}
