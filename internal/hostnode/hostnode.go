// Package hostnode applies one node's desired state to the network
// namespace this process runs in (a router or NF server srchain did not
// create: `srchain node apply`), with the same applier and NF drivers as
// the agent and the lab, and removes it again (`srchain node reset`).
//
// On a host srchain owns only what it added (docs/deploy.md "What srchain
// owns"): routes and rules tagged apply.RTProto, nft tables srchain_*, BPF
// pins under apply.PinRoot, and the addresses, link states, MTUs, sysctls
// and tunnel source it had to change. Before it changes any of the latter
// it writes their values to a record under the state directory, so reset
// puts back exactly what was there, as FRR's or VPP's packages leave a
// host as they found it when removed.
package hostnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/flock"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// Errors callers branch on.
var (
	// ErrNoRecord: reset found no record of an apply on this namespace.
	ErrNoRecord = errors.New("no record of an applied node")
	// ErrBadName: a node name that cannot name a record file.
	ErrBadName = errors.New("bad node name")
	// ErrConflict: the desired state would replace a route srchain did
	// not write (the operator's, a routing daemon's).
	ErrConflict = errors.New("route is not srchain's")
)

// DefaultStateDir is where records are kept unless told otherwise.
const DefaultStateDir = "/var/lib/srchain"

// RecordVersion is the version of the record's JSON form.
const RecordVersion = 1

// Record is what one namespace got from `node apply`: the desired state
// last applied, and the values srchain found before it first changed them.
type Record struct {
	Version int    `json:"version"`
	Node    string `json:"node"`
	// Netns labels the namespace (its /run/netns name, or "host"); it is
	// also the BPF pin directory's name (apply.PinDir).
	Netns string `json:"netns"`
	// Spec is the file the state was compiled from (for the operator).
	Spec string `json:"spec,omitempty"`
	// State is the desired state last applied (with its secrets: the
	// record is written 0600).
	State  state.Node `json:"state"`
	Before Before     `json:"before"`
}

// Before holds what srchain changed, as it was before the first change.
// Entries are added on the first apply that changes them and kept across
// re-applies, so the value restored is the operator's, not srchain's.
type Before struct {
	// Sysctls srchain set, with their old values, in the order set.
	Sysctls []state.Sysctl `json:"sysctls,omitempty"`
	// SideEffects are sysctls the kernel rewrites when one of Sysctls
	// is written: writing net.ipv6.conf.all.forwarding or
	// net.ipv4.ip_forward sets the forwarding of every interface
	// (Documentation/networking/ip-sysctl.rst), so those are kept too.
	SideEffects []state.Sysctl `json:"side_effects,omitempty"`
	// MTUs of interfaces srchain changed.
	MTUs map[string]int `json:"mtus,omitempty"`
	// Up are the interfaces srchain brought up.
	Up []string `json:"up,omitempty"`
	// Addrs are the addresses srchain added.
	Addrs []Addr `json:"addrs,omitempty"`
	// TunSrc is `ip sr tunsrc` before srchain set it (:: = unset);
	// TunSrcSet says it was recorded.
	TunSrc    netip.Addr `json:"tunsrc,omitzero"`
	TunSrcSet bool       `json:"tunsrc_set,omitempty"`
}

// Addr is one address on one interface.
type Addr struct {
	Dev    string       `json:"dev"`
	Prefix netip.Prefix `json:"prefix"`
}

// Options tune Apply, Status and Reset.
type Options struct {
	// StateDir holds the records ("" : DefaultStateDir).
	StateDir string
	// Spec names the spec file in the record.
	Spec   string
	DryRun bool
	Logger *slog.Logger
	// Drivers for programs (nil: the registered ones).
	Drivers map[string]apply.ProgramDriver
	// Remove, for Reset without a record of `node apply`, is a state
	// the node may hold (the agent's last applied one): its programs are
	// removed through their drivers, its routes, SIDs and rules too.
	Remove *state.Node
}

func (o Options) log() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}

// Label names the namespace this process runs in: its name under
// /run/netns when `ip netns exec` (or the like) put us there, else "host".
// It keys the record and the BPF pin directory, so several namespaces of
// one machine do not share them.
func Label() string {
	var self unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &self); err != nil {
		return "host"
	}
	var init unix.Stat_t
	if err := unix.Stat("/proc/1/ns/net", &init); err == nil && init.Ino == self.Ino && init.Dev == self.Dev {
		return "host"
	}
	ents, err := os.ReadDir("/run/netns")
	if err != nil {
		return "host"
	}
	for _, e := range ents {
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/run/netns", e.Name()), &st) == nil && st.Ino == self.Ino && st.Dev == self.Dev {
			return e.Name()
		}
	}
	return "host"
}

// Open opens the namespace this process runs in, labeled by Label.
func Open() (*netns.NS, error) {
	ns, err := netns.Current(Label())
	if err != nil {
		return nil, fmt.Errorf("open host namespace: %w", err)
	}
	return ns, nil
}

// RecordPath is the record of node in the namespace labeled label.
func RecordPath(dir, node, label string) string {
	if dir == "" {
		dir = DefaultStateDir
	}
	name := node + ".json"
	if label != "host" {
		name = node + "@" + label + ".json"
	}
	return filepath.Join(dir, "node", name)
}

func checkName(node string) error {
	if node == "" || node == "." || node == ".." || strings.ContainsAny(node, "/\x00") {
		return fmt.Errorf("node %q: %w", node, ErrBadName)
	}
	return nil
}

// LoadRecord reads a record; a missing one is ErrNoRecord.
func LoadRecord(path string) (*Record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", path, ErrNoRecord)
	}
	if err != nil {
		return nil, fmt.Errorf("read record: %w", err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode record %s: %w", path, err)
	}
	return &r, nil
}

// save writes the record atomically (temporary file, fsync, rename).
func (r *Record) save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write record: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write record: %w", err)
	}
	return nil
}

// Result is what Apply did or, in a dry run, would do.
type Result struct {
	Changes int
	Pending []string
	// Record is where the record is.
	Record string
}

// Apply makes the namespace ns hold node, recording first what it will
// change. A second Apply of the same node changes nothing.
func Apply(ctx context.Context, ns *netns.NS, node state.Node, opts Options) (Result, error) {
	if err := checkName(node.Name); err != nil {
		return Result{}, err
	}
	path := RecordPath(opts.StateDir, node.Name, ns.Name)
	unlock, err := lock(path)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	rec, err := LoadRecord(path)
	if errors.Is(err, ErrNoRecord) {
		rec = &Record{Version: RecordVersion, Node: node.Name, Netns: ns.Name}
	} else if err != nil {
		return Result{}, err
	}
	before, notes, err := observe(ctx, ns, node, rec.Before)
	if err != nil {
		return Result{}, err
	}
	conflicts, err := Conflicts(ns, node)
	if err != nil {
		return Result{}, err
	}
	if len(conflicts) > 0 {
		return Result{Pending: conflicts}, fmt.Errorf("%s: %w", strings.Join(conflicts, "; "), ErrConflict)
	}
	aopts := apply.Options{Drivers: opts.Drivers, Logger: opts.log(), DryRun: opts.DryRun, Owned: true}
	if rec.State.Name != "" {
		prev := rec.State
		aopts.Remove = &prev
	}
	if opts.DryRun {
		res, err := apply.ApplyWith(ctx, ns, node, aopts)
		if err != nil {
			return Result{}, err
		}
		pend := append(notes, res.Pending...)
		drift, err := apply.CheckProgramsWith(ctx, ns, node, opts.Drivers)
		if err != nil {
			return Result{}, err
		}
		for _, d := range drift {
			pend = append(pend, "program: "+d)
		}
		return Result{Pending: pend, Record: path}, nil
	}
	// The old values go to disk before anything changes: an apply that
	// dies half-way still leaves reset what it needs.
	rec.Before = before
	if rec.State.Name == "" {
		// First apply: nothing srchain wrote yet to remove; the record
		// names the node so reset finds it.
		rec.State = state.Node{Name: node.Name}
	}
	if opts.Spec != "" {
		rec.Spec = opts.Spec
	}
	if err := rec.save(path); err != nil {
		return Result{}, err
	}
	res, err := apply.ApplyWith(ctx, ns, node, aopts)
	if err != nil {
		return Result{}, err
	}
	rec.State = node
	if err := rec.save(path); err != nil {
		return Result{}, err
	}
	return Result{Changes: res.Changes, Record: path}, nil
}

// readSysctl reads one sysctl in ns ("" when the key does not exist).
func readSysctl(ns *netns.NS, key string) (string, error) {
	var v string
	err := ns.Do(func() error {
		b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(key, ".", "/"))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read sysctl %s: %w", key, err)
		}
		v = strings.TrimSpace(string(b))
		return nil
	})
	return v, err
}

// forwardingSwitch reports whether writing key rewrites the forwarding
// sysctl of every interface of its family (net/ipv6/addrconf.c
// addrconf_fixup_forwarding, net/ipv4/devinet.c devinet_sysctl_forward).
func forwardingSwitch(key string) (family string, ok bool) {
	switch key {
	case "net.ipv6.conf.all.forwarding":
		return "ipv6", true
	case "net.ipv4.ip_forward", "net.ipv4.conf.all.forwarding":
		return "ipv4", true
	}
	return "", false
}

// observe returns prev extended with the values node's apply would change
// that prev does not hold yet, and notes saying which old values a dry
// run would record.
func observe(ctx context.Context, ns *netns.NS, node state.Node, prev Before) (Before, []string, error) {
	b := prev
	b.Sysctls = slices.Clone(prev.Sysctls)
	b.SideEffects = slices.Clone(prev.SideEffects)
	b.Up = slices.Clone(prev.Up)
	b.Addrs = slices.Clone(prev.Addrs)
	b.MTUs = map[string]int{}
	for k, v := range prev.MTUs {
		b.MTUs[k] = v
	}
	var notes []string
	has := func(list []state.Sysctl, key string) bool {
		return slices.ContainsFunc(list, func(s state.Sysctl) bool { return s.Key == key })
	}
	for _, s := range node.Sysctls {
		cur, err := readSysctl(ns, s.Key)
		if err != nil {
			return b, nil, err
		}
		if cur == s.Value || cur == "" || has(b.Sysctls, s.Key) {
			continue
		}
		b.Sysctls = append(b.Sysctls, state.Sysctl{Key: s.Key, Value: cur})
		notes = append(notes, fmt.Sprintf("record sysctl %s=%s (restored by reset)", s.Key, cur))
		if fam, ok := forwardingSwitch(s.Key); ok {
			side, err := forwardingOfAll(ns, fam)
			if err != nil {
				return b, nil, err
			}
			for _, x := range side {
				if !has(b.SideEffects, x.Key) && !has(b.Sysctls, x.Key) {
					b.SideEffects = append(b.SideEffects, x)
				}
			}
		}
	}
	h := ns.Netlink()
	names := []string{"lo"}
	want := map[string]state.Interface{}
	for _, i := range node.Interfaces {
		names = append(names, i.Name)
		want[i.Name] = i
	}
	addrs := map[string][]netip.Prefix{"lo": node.Loopback}
	for _, i := range node.Interfaces {
		addrs[i.Name] = append(addrs[i.Name], i.Addrs...)
	}
	for _, name := range names {
		l, err := h.LinkByName(name)
		if err != nil {
			// Apply reports the missing interface.
			continue
		}
		if mtu := want[name].MTU; mtu > 0 && l.Attrs().MTU != mtu {
			if _, ok := b.MTUs[name]; !ok {
				b.MTUs[name] = l.Attrs().MTU
				notes = append(notes, fmt.Sprintf("record mtu %s %d (restored by reset)", name, l.Attrs().MTU))
			}
		}
		if l.Attrs().Flags&net.FlagUp == 0 && !slices.Contains(b.Up, name) {
			b.Up = append(b.Up, name)
		}
		if len(addrs[name]) == 0 {
			continue
		}
		have, err := h.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return b, nil, fmt.Errorf("list addresses of %s: %w", name, err)
		}
		for _, p := range addrs[name] {
			a := Addr{Dev: name, Prefix: p}
			if hasAddr(have, p) || slices.Contains(b.Addrs, a) {
				continue
			}
			b.Addrs = append(b.Addrs, a)
		}
	}
	if node.TunSrc.IsValid() && !b.TunSrcSet {
		cur, err := readTunSrc(ctx, ns)
		if err != nil {
			return b, nil, err
		}
		if cur != node.TunSrc {
			b.TunSrc, b.TunSrcSet = cur, true
			notes = append(notes, fmt.Sprintf("record tunsrc %s (restored by reset)", cur))
		}
	}
	return b, notes, nil
}

// forwardingOfAll reads the forwarding sysctl of every interface (and
// default) of one family.
func forwardingOfAll(ns *netns.NS, family string) ([]state.Sysctl, error) {
	links, err := ns.Netlink().LinkList()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	keys := []string{"net." + family + ".conf.default.forwarding"}
	if family == "ipv4" {
		keys = append(keys, "net.ipv4.conf.all.forwarding")
	}
	for _, l := range links {
		keys = append(keys, "net."+family+".conf."+l.Attrs().Name+".forwarding")
	}
	var out []state.Sysctl
	for _, k := range keys {
		v, err := readSysctl(ns, k)
		if err != nil {
			return nil, err
		}
		if v != "" {
			out = append(out, state.Sysctl{Key: k, Value: v})
		}
	}
	return out, nil
}

func hasAddr(have []netlink.Addr, p netip.Prefix) bool {
	for _, h := range have {
		ip, ok := netip.AddrFromSlice(h.IP)
		if !ok {
			continue
		}
		ones, _ := h.Mask.Size()
		if ip.Unmap() == p.Addr() && ones == p.Bits() {
			return true
		}
	}
	return false
}

// readTunSrc reads `ip sr tunsrc` (:: when unset); iproute2 prints
// "tunsrc addr ADDR".
func readTunSrc(ctx context.Context, ns *netns.NS) (netip.Addr, error) {
	out, err := ns.Run(ctx, "ip", "sr", "tunsrc", "show")
	if err != nil {
		return netip.Addr{}, fmt.Errorf("read tunsrc: %w", err)
	}
	f := strings.Fields(out)
	if len(f) != 3 || f[0] != "tunsrc" || f[1] != "addr" {
		return netip.Addr{}, fmt.Errorf("parse tunsrc %q: %w", strings.TrimSpace(out), apply.ErrBadState)
	}
	a, err := netip.ParseAddr(f[2])
	if err != nil {
		return netip.Addr{}, fmt.Errorf("parse tunsrc: %w", err)
	}
	return a, nil
}

// Conflicts lists the routes of the namespace that applying node would
// replace and that srchain did not write (their protocol is not
// apply.RTProto): the kernel holds one route per table, destination and
// metric, so srchain's would take the operator's place, and reset, which
// removes srchain's, could not give it back. Apply refuses them instead,
// as a routing daemon does not overwrite static routes it did not make.
func Conflicts(ns *netns.NS, node state.Node) ([]string, error) {
	h := ns.Netlink()
	ifindex := func(name string) (int, error) {
		if name == "" {
			return 0, nil
		}
		l, err := h.LinkByName(name)
		if err != nil {
			return 0, nil // Apply reports the missing interface
		}
		return l.Attrs().Index, nil
	}
	var want []*netlink.Route
	for _, r := range node.Routes {
		nr, err := apply.RouteFor(r, ifindex)
		if err != nil {
			return nil, err
		}
		want = append(want, nr)
	}
	for _, sid := range node.SIDs {
		nr, err := apply.SIDRoute(sid, 0, ifindex)
		if err != nil {
			return nil, err
		}
		want = append(want, nr)
	}
	type key struct {
		fam, table int
	}
	byTable := map[key]map[string][]netlink.Route{}
	var out []string
	for _, w := range want {
		k := key{w.Family, w.Table}
		have, ok := byTable[k]
		if !ok {
			rs, err := h.RouteListFiltered(w.Family, &netlink.Route{Table: w.Table}, netlink.RT_FILTER_TABLE)
			if err != nil {
				return nil, fmt.Errorf("list routes of table %d: %w", w.Table, err)
			}
			have = map[string][]netlink.Route{}
			for _, r := range rs {
				if r.Dst != nil {
					have[r.Dst.String()] = append(have[r.Dst.String()], r)
				}
			}
			byTable[k] = have
		}
		for _, r := range have[w.Dst.String()] {
			if r.Protocol != apply.RTProto {
				out = append(out, fmt.Sprintf("conflict: route %s table %d proto %d is not srchain's (remove it, or keep its prefix out of the spec)",
					w.Dst, w.Table, int(r.Protocol)))
			}
		}
	}
	return out, nil
}

// lock serializes the applies and resets of one state directory (a
// timer's apply and an operator's reset must not interleave their reads
// and writes of the node and its record).
func lock(record string) (func(), error) {
	dir := filepath.Dir(record)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	unlock, err := flock.Exclusive(dir)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return unlock, nil
}
