package proxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// PinDir is where the driver pins one proxy NF's maps and links.
func PinDir(ns *netns.NS, nf string) string { return kind.PinDir(ns) + "/proxy-" + nf }

// linkPin names the pinned tcx link of one attachment.
func linkPin(pin string, ifindex int, nfSide bool) string {
	side := "sr"
	if nfSide {
		side = "nf"
	}
	return fmt.Sprintf("%s/link_%d_%s", pin, ifindex, side)
}

type driver struct{}

// attachment is one tcx attachment the program needs.
type attachment struct {
	ifname  string
	ifindex int
	nfSide  bool
}

// plan resolves the program's SID and attachments in ns.
func plan(ns *netns.NS, p state.Program) (Program, dpSID, []attachment, error) {
	prog, err := Decode(p)
	if err != nil {
		return prog, dpSID{}, nil, err
	}
	idx, err := kind.Ifindexes(ns, []string{prog.IfaceOut, prog.IfaceIn})
	if err != nil {
		return prog, dpSID{}, nil, fmt.Errorf("proxy %s: %w", p.NF, err)
	}
	sid := dpSID{
		Addr: prog.SID.Addr(), Behavior: prog.Behavior, OutIfindex: idx[0], InIfindex: idx[1],
		NFNext6: prog.NFNext6, NFNext4: prog.NFNext4, Source: prog.Source, Segments: prog.Segments,
		FlowTimeout: time.Duration(prog.IdleTimeoutMS) * time.Millisecond,
	}
	switch prog.Inner {
	case 4:
		sid.Inner = 4
	case 6:
		sid.Inner = 41
	}
	sr, err := kind.Ifindexes(ns, prog.SRSide)
	if err != nil {
		return prog, dpSID{}, nil, fmt.Errorf("proxy %s: %w", p.NF, err)
	}
	var atts []attachment
	for i, n := range prog.SRSide {
		atts = append(atts, attachment{n, sr[i], false})
	}
	atts = append(atts, attachment{prog.IfaceIn, idx[1], true})
	return prog, sid, atts, nil
}

// Apply loads the proxy program (maps pinned under PinDir), writes its
// SID and attaches it at tcx ingress: SR side on every interface but
// IFACE-IN, NF side on IFACE-IN. A link that runs already (its pin is
// among the interface's tcx attachments) is left alone; a stale pin is
// replaced. The undo detaches what this call attached, and unloads the
// program when this call loaded it.
func (driver) Apply(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	prog, sid, atts, err := plan(ns, p)
	if err != nil {
		return nil, err
	}
	if loadDP == nil || openDP == nil {
		return nil, fmt.Errorf("proxy %s: %w", p.NF, ErrNoDatapath)
	}
	pin := PinDir(ns, p.NF)
	var undos []func() error
	undo := func() error {
		var errs []error
		for _, u := range slices.Backward(undos) {
			errs = append(errs, u())
		}
		return errors.Join(errs...)
	}
	fail := func(err error) (func() error, error) {
		return nil, errors.Join(fmt.Errorf("proxy %s: %w", p.NF, err), undo())
	}
	var dp dataplane
	if _, err := os.Stat(pin); err == nil {
		dp, err = openDP(pin)
		if err != nil {
			return fail(fmt.Errorf("open pinned proxy: %w", err))
		}
	} else {
		if err := os.MkdirAll(pin, 0o700); err != nil {
			return fail(fmt.Errorf("make pin directory: %w", err))
		}
		undos = append(undos, func() error { return os.RemoveAll(pin) })
		size := prog.CacheSize
		if size == 0 {
			size = 1
		}
		dp, err = loadDP(pin, size)
		if err != nil {
			return fail(fmt.Errorf("load proxy: %w", err))
		}
	}
	defer dp.Close()
	if err := dp.SetSIDs([]dpSID{sid}); err != nil {
		return fail(fmt.Errorf("set sid %s: %w", sid.Addr, err))
	}
	changed := len(undos) > 0
	for _, a := range atts {
		lp := linkPin(pin, a.ifindex, a.nfSide)
		ok, err := attached(ns, lp, a.ifindex)
		if err != nil {
			return fail(err)
		}
		if ok {
			continue
		}
		_ = os.Remove(lp) // stale: its link was detached by hand
		if err := ns.Do(func() error { return dp.Attach(a.ifindex, a.nfSide, lp) }); err != nil {
			return fail(fmt.Errorf("attach on %s: %w", a.ifname, err))
		}
		changed = true
		undos = append(undos, func() error { return detach(lp) })
	}
	if !changed {
		return nil, nil
	}
	return undo, nil
}

// attached reports whether the link pinned at lp runs on ifindex's tcx
// ingress in ns (asked of the kernel, not inferred from the pin).
func attached(ns *netns.NS, lp string, ifindex int) (bool, error) {
	l, err := link.LoadPinnedLink(lp, nil)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, nil // unreadable pin: attach again
	}
	defer l.Close()
	info, err := l.Info()
	if err != nil {
		return false, fmt.Errorf("read link %s: %w", lp, err)
	}
	found := false
	err = ns.Do(func() error {
		res, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			return fmt.Errorf("query tcx ingress of %d: %w", ifindex, err)
		}
		for _, q := range res.Programs {
			if q.ID == info.Program {
				found = true
			}
		}
		return nil
	})
	return found, err
}

// detach unpins and closes the link pinned at lp (absent: nothing).
func detach(lp string) error {
	l, err := link.LoadPinnedLink(lp, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open link %s: %w", lp, err)
	}
	defer l.Close()
	if err := l.Unpin(); err != nil {
		return fmt.Errorf("unpin link %s: %w", lp, err)
	}
	return nil
}

// Check reports, changing nothing, whether the program is loaded and
// attached where it must be.
func (driver) Check(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	_, _, atts, err := plan(ns, p)
	if err != nil {
		return nil, err
	}
	pin := PinDir(ns, p.NF)
	if _, err := os.Stat(pin); err != nil {
		return []string{fmt.Sprintf("proxy %s: program (%s) not loaded (no pins at %s)", p.NF, ProgName, pin)}, nil
	}
	var drift []string
	for _, a := range atts {
		ok, err := attached(ns, linkPin(pin, a.ifindex, a.nfSide), a.ifindex)
		if err != nil {
			return drift, err
		}
		if !ok {
			side := "sr side"
			if a.nfSide {
				side = "nf side (IFACE-IN)"
			}
			drift = append(drift, fmt.Sprintf("proxy %s: program (%s, %s) not attached on %s", p.NF, ProgName, side, a.ifname))
		}
	}
	return drift, nil
}

// Remove detaches the proxy's links and deletes its pins.
func (driver) Remove(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	pin := PinDir(ns, p.NF)
	links, _ := filepath.Glob(pin + "/link_*")
	var errs []error
	for _, lp := range links {
		errs = append(errs, detach(lp))
	}
	errs = append(errs, os.RemoveAll(pin))
	return errors.Join(errs...)
}

// Counters reads the program's counters (to NF, from NF, cache
// hit/miss/full, drops by reason), named as the datapath names them.
func (driver) Counters(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]kind.Counter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if openDP == nil {
		return nil, fmt.Errorf("proxy %s: %w", p.NF, ErrNoDatapath)
	}
	dp, err := openDP(PinDir(ns, p.NF))
	if err != nil {
		return nil, fmt.Errorf("proxy %s: open pinned proxy: %w", p.NF, err)
	}
	defer dp.Close()
	m, err := dp.Counters()
	if err != nil {
		return nil, fmt.Errorf("proxy %s: read counters: %w", p.NF, err)
	}
	out := make([]kind.Counter, 0, len(m))
	for k, v := range m {
		out = append(out, kind.Counter{Name: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
