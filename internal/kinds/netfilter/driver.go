package netfilter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/nft"
	"github.com/srchain/srchain/internal/state"
)

// Names of what the driver makes on a node (docs/netfilter.md "Node state").
const (
	// RestoreDev is the device the fwmark rule routes inner packets to;
	// its tcx egress runs srchain_anf_out. RestorePeer is its veth peer
	// (nothing is sent there: every packet is redirected or dropped).
	RestoreDev  = "srcanf0"
	RestorePeer = "srcanf1"
	// RouteTable holds the default routes to RestoreDev (clear of the
	// chains' 5-tuple tables 1000..20999 and the kernel's 252..255).
	RouteTable = 30000
	// RulePref is the fwmark rule's priority: before the 5-tuple chains'
	// rules (1000 + chain index) and the main table (32766).
	RulePref = 900
	// InProgName, OutProgName and FwdProgName are the kernel names of the
	// programs.
	InProgName  = "srchain_anf_in"
	OutProgName = "srchain_anf_out"
	FwdProgName = "srchain_anf_fwd"
)

// PinDir is where the driver pins the programs' links and maps.
func PinDir(ns *netns.NS) string { return kind.PinDir(ns) + "/anf" }

func inPin(pin string, ifindex int) string  { return fmt.Sprintf("%s/in_%d", pin, ifindex) }
func outPin(pin string, ifindex int) string { return fmt.Sprintf("%s/out_%d", pin, ifindex) }
func fwdPin(pin string, ifindex int) string { return fmt.Sprintf("%s/fwd_%d", pin, ifindex) }

type driver struct{}

// Apply makes the NF run: the ruleset in table inet srchain_anf (one nft
// transaction; a rejected ruleset leaves the old one running), the
// restore device, the fwmark rule and its routes, and the two programs
// (srchain_anf_in at the head of every interface's tcx ingress,
// srchain_anf_out on the restore device's tcx egress) with the SID in
// their map. What already runs is left alone; the undo reverts what this
// call changed.
func (driver) Apply(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	prog, err := Decode(p)
	if err != nil {
		return nil, err
	}
	var undo kind.Undo
	fail := func(err error) (func() error, error) { return undo.Fail(fmt.Errorf("netfilter %s: %w", p.NF, err)) }

	// 1. The ruleset, first: a ruleset nft rejects changes nothing.
	cur, err := currentTable(ctx, ns)
	if err != nil {
		return fail(err)
	}
	if !strings.Contains(cur, nft.Digest(prog.Ruleset)) {
		if err := LoadRuleset(ctx, ns, prog.Ruleset); err != nil {
			return fail(err)
		}
		undo.Add(func() error { return restoreTable(context.Background(), ns, cur) })
	}

	// 2. The restore device.
	dev, peer, created, err := ensureDevice(ns, prog.RestoreMTU)
	if err != nil {
		return fail(err)
	}
	if created {
		undo.Add(func() error { return deleteDevice(ns) })
	}

	// 3. fwmark rule and routes to the restore device.
	added, err := ensureRouting(ctx, ns)
	if err != nil {
		return fail(err)
	}
	if added {
		undo.Add(func() error { return removeRouting(context.Background(), ns) })
	}

	// 4. Programs: this build's, loaded over the pinned maps when there
	// are any (the SID table, stash and counters carry over), to compare
	// with what runs. Links that run an older srchain's code (an
	// upgrade) take this build's programs in place, no gap; a link
	// detached by hand, or maps another build laid out differently, have
	// every program loaded again.
	ifs, err := kind.Ifindexes(ns, p.Interfaces)
	if err != nil {
		return fail(err)
	}
	pin := PinDir(ns)
	o, err := LoadPinned(peer, pin)
	pinned := err == nil
	if !pinned {
		if o, err = Load(peer); err != nil {
			return fail(err)
		}
	}
	defer o.Close()
	hs := hooks(pin, o, ifs, dev, peer)
	live, old, err := linkStates(ns, hs)
	if err != nil {
		return fail(err)
	}
	switch {
	case pinned && live && len(old) == 0:
	case pinned && live:
		// In place: the pinned link's program is replaced, its place
		// kept.
		for _, h := range old {
			if err := ns.Do(func() error { return bpfrt.AttachPinned(h.h, h.prog, bpfrt.AttachOptions{Pin: h.pin}) }); err != nil {
				return fail(err)
			}
		}
		// Kept on undo: the old build's code is what an upgrade replaces.
		undo.Add(func() error { return nil })
	default:
		if err := removePrograms(pin); err != nil {
			return fail(err)
		}
		if err := loadPrograms(ns, pin, o, ifs, dev, peer); err != nil {
			return fail(errors.Join(err, removePrograms(pin)))
		}
		if pinned {
			undo.Add(func() error { return nil }) // a repair, kept on undo
		} else {
			undo.Add(func() error { return removePrograms(pin) })
		}
	}
	if err := setSID(pin, prog); err != nil {
		return fail(err)
	}
	return undo.Result(), nil
}

// ensureDevice creates the restore veth pair (no ARP: the inner packet's
// neighbour is never resolved there) or brings an existing one to mtu.
func ensureDevice(ns *netns.NS, mtu int) (ifindex, peer int, created bool, err error) {
	h := ns.Netlink()
	l, err := h.LinkByName(RestoreDev)
	if err != nil {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: RestoreDev, MTU: mtu}, PeerName: RestorePeer}
		if err := h.LinkAdd(veth); err != nil {
			return 0, 0, false, fmt.Errorf("create %s: %w", RestoreDev, err)
		}
		created = true
		if l, err = h.LinkByName(RestoreDev); err != nil {
			return 0, 0, true, errors.Join(fmt.Errorf("find %s: %w", RestoreDev, err), deleteDevice(ns))
		}
	}
	if l.Attrs().MTU != mtu {
		if err := h.LinkSetMTU(l, mtu); err != nil {
			return 0, 0, created, fmt.Errorf("set %s mtu %d: %w", RestoreDev, mtu, err)
		}
	}
	for _, name := range []string{RestoreDev, RestorePeer} {
		// No IPv6 link-local address: the device sends nothing of its
		// own (MLD, router solicitations) through srchain_anf_out.
		if err := ns.Sysctl("net.ipv6.conf."+name+".addr_gen_mode", "1"); err != nil {
			return 0, 0, created, err
		}
		pl, err := h.LinkByName(name)
		if err != nil {
			return 0, 0, created, fmt.Errorf("find %s: %w", name, err)
		}
		if err := h.LinkSetARPOff(pl); err != nil {
			return 0, 0, created, fmt.Errorf("arp off %s: %w", name, err)
		}
		if err := h.LinkSetUp(pl); err != nil {
			return 0, 0, created, fmt.Errorf("up %s: %w", name, err)
		}
		if name == RestorePeer {
			peer = pl.Attrs().Index
		}
	}
	return l.Attrs().Index, peer, created, nil
}

func deleteDevice(ns *netns.NS) error {
	l, err := ns.Netlink().LinkByName(RestoreDev)
	if err != nil {
		return nil
	}
	if err := ns.Netlink().LinkDel(l); err != nil {
		return fmt.Errorf("delete %s: %w", RestoreDev, err)
	}
	return nil
}

var markSel = fmt.Sprintf("0x%x/0x%x", MarkFlag, MarkFlag)

// routingCmds are the rule and routes, per family.
func routingCmds() [][]string {
	t := strconv.Itoa(RouteTable)
	return [][]string{
		{"-4", "rule", "add", "pref", strconv.Itoa(RulePref), "fwmark", markSel, "lookup", t},
		{"-6", "rule", "add", "pref", strconv.Itoa(RulePref), "fwmark", markSel, "lookup", t},
		{"-4", "route", "replace", "default", "dev", RestoreDev, "table", t},
		{"-6", "route", "replace", "default", "dev", RestoreDev, "table", t},
	}
}

// routingMissing lists what of the rule and routes is missing in ns.
func routingMissing(ctx context.Context, ns *netns.NS) ([]string, error) {
	var missing []string
	t := strconv.Itoa(RouteTable)
	for _, fam := range []string{"-4", "-6"} {
		out, err := ns.Run(ctx, "ip", fam, "rule", "show", "pref", strconv.Itoa(RulePref))
		if err != nil {
			return nil, err
		}
		if !strings.Contains(out, "lookup "+t) {
			missing = append(missing, fmt.Sprintf("netfilter: ip %s rule pref %d fwmark %s lookup %s missing", fam, RulePref, markSel, t))
		}
		out, err = ns.Run(ctx, "ip", fam, "route", "show", "table", t)
		if err != nil && !strings.Contains(err.Error(), "does not exist") {
			return nil, err
		}
		if !strings.Contains(out, "default dev "+RestoreDev) {
			missing = append(missing, fmt.Sprintf("netfilter: ip %s route default dev %s table %s missing", fam, RestoreDev, t))
		}
	}
	return missing, nil
}

func ensureRouting(ctx context.Context, ns *netns.NS) (bool, error) {
	missing, err := routingMissing(ctx, ns)
	if err != nil || len(missing) == 0 {
		return false, err
	}
	_ = removeRouting(ctx, ns)
	for _, c := range routingCmds() {
		if _, err := ns.Run(ctx, "ip", c...); err != nil {
			return true, err
		}
	}
	return true, nil
}

func removeRouting(ctx context.Context, ns *netns.NS) error {
	t := strconv.Itoa(RouteTable)
	for _, fam := range []string{"-4", "-6"} {
		for {
			if _, err := ns.Run(ctx, "ip", fam, "rule", "del", "pref", strconv.Itoa(RulePref), "fwmark", markSel, "lookup", t); err != nil {
				break
			}
		}
		_, _ = ns.Run(ctx, "ip", fam, "route", "flush", "table", t)
	}
	return nil
}

// pinnedHook is one program's link: its pin, hook and this build's
// program for it.
type pinnedHook struct {
	pin  string
	h    bpfrt.Hook
	prog *ebpf.Program
	what string // the program's name, for Check
}

// hooks lists the links of the node's End.AN.NF: srchain_anf_in on
// every SR interface, srchain_anf_fwd on the restore peer's ingress,
// srchain_anf_out on the restore device's egress.
func hooks(pin string, o *Objects, ifs []int, dev, peer int) []pinnedHook {
	var hs []pinnedHook
	for _, idx := range ifs {
		hs = append(hs, pinnedHook{inPin(pin, idx), bpfrt.Hook{Ifindex: idx}, o.SrchainAnfIn, InProgName})
	}
	return append(hs,
		pinnedHook{fwdPin(pin, peer), bpfrt.Hook{Ifindex: peer}, o.SrchainAnfFwd, FwdProgName},
		pinnedHook{outPin(pin, dev), bpfrt.Hook{Ifindex: dev, Egress: true}, o.SrchainAnfOut, OutProgName})
}

// linkStates asks the kernel about every link of hs (kind.LinkRuns):
// live, all are attached where they should be; old, the live ones that
// run another build's code.
func linkStates(ns *netns.NS, hs []pinnedHook) (live bool, old []pinnedHook, err error) {
	live = true
	for _, h := range hs {
		l, r, err := kind.LinkRuns(ns, h.pin, h.h, h.prog)
		if err != nil {
			return false, nil, err
		}
		live = live && l
		if l && !r {
			old = append(old, h)
		}
	}
	return live, old, nil
}

// loadPrograms attaches o's programs and pins their links and maps.
func loadPrograms(ns *netns.NS, pin string, o *Objects, ifs []int, dev, peer int) error {
	if err := os.MkdirAll(pin, 0o700); err != nil {
		return fmt.Errorf("create pin dir: %w", err)
	}
	attach := func(idx int, prog *ebpf.Program, at ebpf.AttachType, path string) error {
		return ns.Do(func() error {
			opts := link.TCXOptions{Interface: idx, Program: prog, Attach: at}
			if at == ebpf.AttachTCXIngress {
				opts.Anchor = link.Head()
			}
			l, err := link.AttachTCX(opts)
			if err != nil {
				return fmt.Errorf("attach %s to ifindex %d: %w", prog, idx, err)
			}
			defer l.Close()
			if err := l.Pin(path); err != nil {
				return errors.Join(fmt.Errorf("pin link: %w", err), l.Detach())
			}
			return nil
		})
	}
	for _, idx := range ifs {
		if err := attach(idx, o.SrchainAnfIn, ebpf.AttachTCXIngress, inPin(pin, idx)); err != nil {
			return err
		}
	}
	if err := attach(dev, o.SrchainAnfOut, ebpf.AttachTCXEgress, outPin(pin, dev)); err != nil {
		return err
	}
	if err := attach(peer, o.SrchainAnfFwd, ebpf.AttachTCXIngress, fwdPin(pin, peer)); err != nil {
		return err
	}
	return o.pinMaps(pin)
}

// removePrograms detaches every pinned link and removes the pins.
func removePrograms(pin string) error {
	ents, err := os.ReadDir(pin)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read pin dir: %w", err)
	}
	var errs []error
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "in_") || strings.HasPrefix(e.Name(), "out_") || strings.HasPrefix(e.Name(), "fwd_") {
			errs = append(errs, bpfrt.DetachPinned(pin+"/"+e.Name()))
		}
	}
	errs = append(errs, os.RemoveAll(pin))
	return errors.Join(errs...)
}

func setSID(pin string, prog Program) error {
	m, err := ebpf.LoadPinnedMap(pin+"/anf_sids", nil)
	if err != nil {
		return fmt.Errorf("open sid map: %w", err)
	}
	defer m.Close()
	var have anfProgAnfSid
	key := SIDKey(prog.SID)
	if err := m.Lookup(key, &have); err == nil && have.ArgsBits == uint32(prog.ArgsBits) {
		return nil
	}
	if err := m.Put(key, anfProgAnfSid{ArgsBits: uint32(prog.ArgsBits)}); err != nil {
		return fmt.Errorf("put sid %s: %w", prog.SID, err)
	}
	return nil
}

// Check reports, changing nothing, what differs from p: the ruleset, the
// restore device, the rule and routes, the programs and the SID.
func (driver) Check(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	prog, err := Decode(p)
	if err != nil {
		return nil, err
	}
	var drift []string
	cur, err := currentTable(ctx, ns)
	if err != nil {
		return nil, err
	}
	switch {
	case cur == "":
		drift = append(drift, fmt.Sprintf("netfilter %s: table inet %s missing", p.NF, Table))
	case !strings.Contains(cur, nft.Digest(prog.Ruleset)):
		drift = append(drift, fmt.Sprintf("netfilter %s: table inet %s does not hold the desired ruleset", p.NF, Table))
	}
	l, err := ns.Netlink().LinkByName(RestoreDev)
	if err != nil {
		return append(drift, fmt.Sprintf("netfilter %s: restore device %s missing", p.NF, RestoreDev)), nil
	}
	if l.Attrs().MTU != prog.RestoreMTU {
		drift = append(drift, fmt.Sprintf("netfilter %s: %s mtu %d, want %d", p.NF, RestoreDev, l.Attrs().MTU, prog.RestoreMTU))
	}
	missing, err := routingMissing(ctx, ns)
	if err != nil {
		return nil, err
	}
	drift = append(drift, missing...)
	pin := PinDir(ns)
	pl, err := ns.Netlink().LinkByName(RestorePeer)
	if err != nil {
		return append(drift, fmt.Sprintf("netfilter %s: restore peer %s missing", p.NF, RestorePeer)), nil
	}
	var ifs []int
	var where []string
	for _, ifn := range p.Interfaces {
		il, err := ns.Netlink().LinkByName(ifn)
		if err != nil {
			drift = append(drift, fmt.Sprintf("netfilter %s: no interface %s", p.NF, ifn))
			continue
		}
		ifs = append(ifs, il.Attrs().Index)
		where = append(where, ifn)
	}
	where = append(where, RestorePeer, RestoreDev+" egress")
	o, err := Load(pl.Attrs().Index)
	if err != nil {
		return nil, err
	}
	defer o.Close()
	for i, h := range hooks(pin, o, ifs, l.Attrs().Index, pl.Attrs().Index) {
		live, runs, err := kind.LinkRuns(ns, h.pin, h.h, h.prog)
		switch {
		case err != nil:
			return nil, err
		case !live:
			drift = append(drift, fmt.Sprintf("netfilter %s: program %s not attached on %s", p.NF, h.what, where[i]))
		case !runs:
			drift = append(drift, fmt.Sprintf("netfilter %s: program %s on %s runs another build's code", p.NF, h.what, where[i]))
		}
	}
	m, err := ebpf.LoadPinnedMap(pin+"/anf_sids", nil)
	if err != nil {
		return append(drift, fmt.Sprintf("netfilter %s: sid map not pinned at %s", p.NF, pin)), nil
	}
	defer m.Close()
	var have anfProgAnfSid
	if err := m.Lookup(SIDKey(prog.SID), &have); err != nil || have.ArgsBits != uint32(prog.ArgsBits) {
		drift = append(drift, fmt.Sprintf("netfilter %s: sid %s missing from the program's map", p.NF, prog.SID))
	}
	return drift, nil
}

// Remove detaches the programs, removes their pins, the rule, routes,
// restore device and srchain's table.
func (driver) Remove(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.Join(removePrograms(PinDir(ns)), removeRouting(ctx, ns), deleteDevice(ns), removeTable(ctx, ns))
}

// Counters: drop reasons ("drop/REASON"), the stash ("stash/stashed",
// "stash/restored", "stash/unclaimed": slots reused before their packet
// came back, i.e. netfilter dropped or still holds it;
// "stash/fragments-kept": restores of a non-last fragment, the slot kept
// for the next piece), "to-kernel"
// (hop limit exhausted), and the SID's packets/bytes.
func (driver) Counters(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]kind.Counter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pin := PinDir(ns)
	var out []kind.Counter
	stats, err := ebpf.LoadPinnedMap(pin+"/anf_stats", nil)
	if err != nil {
		return nil, fmt.Errorf("read netfilter %s counters: %w", p.NF, err)
	}
	defer stats.Close()
	for _, s := range []struct {
		name string
		slot uint32
	}{{"stash/stashed", StatStashed}, {"stash/restored", StatRestored}, {"stash/unclaimed", StatUnclaimed}, {"to-kernel", StatToKernel}, {"stash/fragments-kept", StatFragKept}} {
		v, err := bpfrt.SumPerCPU(stats, s.slot)
		if err != nil {
			return nil, fmt.Errorf("read netfilter %s counters: %w", p.NF, err)
		}
		out = append(out, kind.Counter{Name: s.name, Value: v})
	}
	dm, err := ebpf.LoadPinnedMap(pin+"/drop_counters", nil)
	if err != nil {
		return nil, fmt.Errorf("read netfilter %s counters: %w", p.NF, err)
	}
	defer dm.Close()
	drops, err := bpfrt.ReadDropCounts(dm)
	if err != nil {
		return nil, fmt.Errorf("read netfilter %s counters: %w", p.NF, err)
	}
	for i, v := range drops {
		if v != 0 {
			out = append(out, kind.Counter{Name: "drop/" + drop.Reason(i).String(), Value: v})
		}
	}
	return out, nil
}
