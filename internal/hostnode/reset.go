package hostnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// TablePrefix starts the name of every nftables table srchain makes
// (srchain_mss, srchain_nf, ...): reset deletes those and no other.
const TablePrefix = "srchain_"

// Reset removes from ns everything `node apply` of node added and puts
// back what it changed: programs through their drivers, the routes, SIDs
// and rules of the record and every route and rule tagged apply.RTProto,
// the srchain_* nft tables, the BPF pins of the namespace, then the
// addresses, link states, MTUs, tunnel source and sysctls as recorded.
// Without a record it still removes what carries srchain's marks and
// returns ErrNoRecord with the rest done.
func Reset(ctx context.Context, ns *netns.NS, node string, opts Options) ([]string, error) {
	if err := checkName(node); err != nil {
		return nil, err
	}
	path := RecordPath(opts.StateDir, node, ns.Name)
	unlock, err := lock(path)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec, recErr := LoadRecord(path)
	if recErr != nil && !errors.Is(recErr, ErrNoRecord) {
		return nil, recErr
	}
	var done []string
	var errs []error
	// An empty desired state with Remove = what was applied and Owned:
	// apply's prune removes the programs, routes, SIDs and rules the
	// record names, pruneOwned every other route and rule tagged
	// RTProto, the mss stage the srchain_mss table.
	// Prev, empty too, skips the stages that would otherwise bring lo
	// up (interfaces) or touch tunsrc: reset only removes.
	empty := state.Node{Name: node}
	aopts := apply.Options{Drivers: opts.Drivers, Logger: opts.log(), Owned: true, DryRun: opts.DryRun, Prev: &state.Node{Name: node}}
	if rec != nil {
		prev := rec.State
		aopts.Remove = &prev
	} else if opts.Remove != nil {
		aopts.Remove = opts.Remove
	}
	res, err := apply.ApplyWith(ctx, ns, empty, aopts)
	if err != nil {
		errs = append(errs, err)
	}
	done = append(done, res.Pending...)
	if res.Changes > 0 {
		done = append(done, fmt.Sprintf("%d routes, rules and programs removed", res.Changes))
	}
	tables, err := srchainTables(ctx, ns)
	if err != nil {
		errs = append(errs, err)
	}
	for _, t := range tables {
		done = append(done, "delete nft table "+t[0]+" "+t[1])
		if opts.DryRun {
			continue
		}
		if _, err := ns.Run(context.WithoutCancel(ctx), "nft", "delete", "table", t[0], t[1]); err != nil {
			errs = append(errs, fmt.Errorf("delete nft table %s: %w", t[1], err))
		}
	}
	pins := apply.PinDir(ns)
	if _, err := os.Stat(pins); err == nil {
		done = append(done, "remove pins "+pins)
		if !opts.DryRun {
			if err := os.RemoveAll(pins); err != nil {
				errs = append(errs, fmt.Errorf("remove pins: %w", err))
			}
		}
	}
	if rec != nil {
		d, err := restore(ctx, ns, rec.Before, opts.DryRun)
		done = append(done, d...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && rec != nil && !opts.DryRun {
		if err := os.Remove(path); err != nil {
			errs = append(errs, fmt.Errorf("remove record: %w", err))
		}
	}
	if len(errs) == 0 && recErr != nil {
		return done, recErr
	}
	if len(errs) > 0 {
		// The record stays: a second reset retries what failed.
		return done, fmt.Errorf("reset %s: %w", node, errors.Join(errs...))
	}
	return done, nil
}

// restore puts back what b recorded, in the reverse of apply's order.
func restore(ctx context.Context, ns *netns.NS, b Before, dry bool) ([]string, error) {
	var done []string
	var errs []error
	do := func(what string, f func() error) {
		done = append(done, what)
		if dry {
			return
		}
		if err := f(); err != nil {
			errs = append(errs, err)
		}
	}
	h := ns.Netlink()
	for _, a := range slices.Backward(b.Addrs) {
		do("delete addr "+a.Prefix.String()+" "+a.Dev, func() error {
			l, err := h.LinkByName(a.Dev)
			if err != nil {
				return nil // gone with its interface
			}
			err = h.AddrDel(l, &netlink.Addr{IPNet: ipNet(a.Prefix)})
			if errors.Is(err, unix.EADDRNOTAVAIL) {
				return nil
			}
			return wrap(err, "delete address %s from %s", a.Prefix, a.Dev)
		})
	}
	if b.TunSrcSet {
		do("tunsrc "+b.TunSrc.String(), func() error {
			_, err := ns.Run(context.WithoutCancel(ctx), "ip", "sr", "tunsrc", "set", b.TunSrc.String())
			return wrap(err, "restore tunsrc")
		})
	}
	for _, name := range sortedKeys(b.MTUs) {
		mtu := b.MTUs[name]
		do(fmt.Sprintf("mtu %s %d", name, mtu), func() error {
			l, err := h.LinkByName(name)
			if err != nil {
				return nil
			}
			return wrap(h.LinkSetMTU(l, mtu), "restore mtu of %s", name)
		})
	}
	for _, name := range slices.Backward(b.Up) {
		do("down "+name, func() error {
			l, err := h.LinkByName(name)
			if err != nil {
				return nil
			}
			return wrap(h.LinkSetDown(l), "set %s down", name)
		})
	}
	for _, s := range slices.Backward(b.Sysctls) {
		do("sysctl "+s.Key+"="+s.Value, func() error { return ns.Sysctl(s.Key, s.Value) })
	}
	// After the switches: writing them rewrote these.
	for _, s := range b.SideEffects {
		cur, err := readSysctl(ns, s.Key)
		if err != nil || cur == "" || cur == s.Value {
			continue
		}
		do("sysctl "+s.Key+"="+s.Value, func() error { return ns.Sysctl(s.Key, s.Value) })
	}
	return done, errors.Join(errs...)
}

// srchainTables lists the nft tables named srchain_* as (family, name).
func srchainTables(ctx context.Context, ns *netns.NS) ([][2]string, error) {
	out, err := ns.Run(ctx, "nft", "-j", "list", "tables")
	if err != nil {
		return nil, fmt.Errorf("list nft tables: %w", err)
	}
	var doc struct {
		Nftables []struct {
			Table *struct {
				Family string `json:"family"`
				Name   string `json:"name"`
			} `json:"table"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, fmt.Errorf("decode nft tables: %w", err)
	}
	var ts [][2]string
	for _, e := range doc.Nftables {
		if e.Table != nil && strings.HasPrefix(e.Table.Name, TablePrefix) {
			ts = append(ts, [2]string{e.Table.Family, e.Table.Name})
		}
	}
	return ts, nil
}

// Status is the drift and counters of a node.
type Status struct {
	// Drift lists what differs from the desired state (empty: none).
	Drift    []string          `json:"drift"`
	Counters []ProgramCounters `json:"counters,omitempty"`
}

// ProgramCounters are one program's counters, as `lab counters` prints.
type ProgramCounters struct {
	Program    string         `json:"program"`
	NF         string         `json:"nf,omitempty"`
	Interfaces []string       `json:"interfaces"`
	Counters   []kind.Counter `json:"counters"`
	Error      string         `json:"error,omitempty"`
}

// Check reports how ns differs from node (apply.CheckOwned, so srchain's
// routes and rules node lacks count too, and the drivers' Check) and the
// counters of its programs.
func Check(ctx context.Context, ns *netns.NS, node state.Node, opts Options) (Status, error) {
	var st Status
	drift, err := apply.CheckOwned(ctx, ns, node)
	if err != nil {
		return st, err
	}
	st.Drift = drift
	pd, err := apply.CheckProgramsWith(ctx, ns, node, opts.Drivers)
	if err != nil {
		return st, err
	}
	st.Drift = append(st.Drift, pd...)
	for _, p := range node.Programs {
		pc := ProgramCounters{Program: p.Kind, NF: p.NF, Interfaces: p.Interfaces}
		d, ok := opts.Drivers[p.Kind]
		if !ok {
			d, ok = kind.DriverFor(p.Kind)
		}
		if !ok {
			pc.Error = "no driver for program " + p.Kind
		} else if pc.Counters, err = d.Counters(ctx, ns, node, p); err != nil {
			pc.Error = err.Error()
		}
		st.Counters = append(st.Counters, pc)
	}
	return st, nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	bits := 128
	if p.Addr().Is4() {
		bits = 32
	}
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), bits)}
}

func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
