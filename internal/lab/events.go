package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// ProgramEvent is one event a program of a node reported
// (kind.EventSource), e.g. an OPoT verifier's drop.
type ProgramEvent struct {
	Node    string `json:"node"`
	Program string `json:"program"`
	kind.Event
}

// eachProgram calls f for every program of the lab's nodes (node's only,
// when not empty) whose driver is a D, with the node's namespace open.
func eachProgram[D any](ctx context.Context, lab, node string, opts Options, f func(d D, ns *netns.NS, n state.Node, p state.Program) error) error {
	rec, err := Load(lab, opts)
	if err != nil {
		return err
	}
	desired, err := rec.desired()
	if err != nil {
		return err
	}
	found := node == ""
	var errs []error
	for _, n := range desired.Nodes {
		if node != "" && n.Name != node {
			continue
		}
		found = true
		var ds []D
		var ps []state.Program
		for _, p := range n.Programs {
			d, ok := opts.Drivers[p.Kind]
			if !ok {
				d, ok = kind.DriverFor(p.Kind)
			}
			if x, is := d.(D); ok && is {
				ds, ps = append(ds, x), append(ps, p)
			}
		}
		if len(ds) == 0 {
			continue
		}
		ns, err := openNode(rec, n.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range ds {
			if err := ctx.Err(); err != nil {
				ns.Close()
				return err
			}
			if err := f(ds[i], ns, n, ps[i]); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", n.Name, ps[i].Kind, err))
			}
		}
		ns.Close()
	}
	if !found {
		return fmt.Errorf("lab %s has no node %s", clip(lab), clip(node))
	}
	return errors.Join(errs...)
}

// Events drains the events the lab's programs reported (only node's,
// when not empty): each event is returned once, by the first reader.
// Events of the programs that could be read are returned with the error
// of those that could not.
func Events(ctx context.Context, lab, node string, opts Options) ([]ProgramEvent, error) {
	var out []ProgramEvent
	err := eachProgram(ctx, lab, node, opts, func(d kind.EventSource, ns *netns.NS, n state.Node, p state.Program) error {
		evs, err := d.Events(ctx, ns, n, p)
		for _, e := range evs {
			out = append(out, ProgramEvent{Node: n.Name, Program: p.Kind, Event: e})
		}
		return err
	})
	if err != nil {
		return out, fmt.Errorf("lab events: %w", err)
	}
	return out, nil
}

// PrintEvents writes one line per event.
func PrintEvents(w io.Writer, evs []ProgramEvent) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPROGRAM\tSUBJECT\tREASON\tDETAIL")
	for _, e := range evs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Node, e.Program, e.Subject, e.Reason, orDash(e.Detail))
	}
	tw.Flush()
}

// Summaries are the one-line results of the lab's programs that have
// one (kind.Summarizer), e.g. each OPoT chain's verified and dropped
// packets; `srchain demo` prints them after the probes.
func Summaries(ctx context.Context, lab string, opts Options) ([]string, error) {
	var out []string
	err := eachProgram(ctx, lab, "", opts, func(d kind.Summarizer, ns *netns.NS, n state.Node, p state.Program) error {
		lines, err := d.Summary(ctx, ns, n, p)
		out = append(out, lines...)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("lab summary: %w", err)
	}
	return out, nil
}
