package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/srchain/srchain/internal/netns"
)

// Interface names inside the line's namespaces.
const (
	ifGen    = "gen0" // generator -> DUT
	ifDUTIn  = "in0"  // DUT ingress
	ifDUTOut = "out0" // DUT egress
	ifSink   = "sink0"
	// linkMTU leaves room for the largest sweep size (1866 B) plus
	// encapsulation, and stays under the veth XDP limit (about 3.5 KB).
	linkMTU = 3000
)

// Line is one generator -> DUT -> sink line of namespaces.
type Line struct {
	Gen, DUT, Sink *netns.NS
	GenIndex       int // ifindex of gen0 in Gen
	SinkIndex      int // ifindex of sink0 in Sink
	GenMAC, InMAC  net.HardwareAddr
	OutMAC, SnkMAC net.HardwareAddr
}

// NewLine creates the namespaces name-g, name-d, name-s, wires them with
// veths and addresses, and makes the DUT a router towards the sink. On
// failure everything made so far is removed.
func NewLine(ctx context.Context, name string) (l *Line, err error) {
	l = &Line{}
	defer func() {
		if err != nil {
			l.Close()
			l = nil
		}
	}()
	if l.Gen, err = netns.Create(name + "-g"); err != nil {
		return
	}
	if l.DUT, err = netns.Create(name + "-d"); err != nil {
		return
	}
	if l.Sink, err = netns.Create(name + "-s"); err != nil {
		return
	}
	if err = veth(l.Gen, ifGen, l.DUT, ifDUTIn); err != nil {
		return
	}
	if err = veth(l.DUT, ifDUTOut, l.Sink, ifSink); err != nil {
		return
	}
	type addr struct {
		ns  *netns.NS
		dev string
		a   []string
	}
	for _, x := range []addr{
		{l.Gen, ifGen, []string{GenAddr6.String() + "/64", GenAddr4.String() + "/24"}},
		{l.DUT, ifDUTIn, []string{DUTIn6.String() + "/64", DUTIn4.String() + "/24"}},
		{l.DUT, ifDUTOut, []string{DUTOut6.String() + "/64", DUTOut4.String() + "/24"}},
		{l.Sink, ifSink, []string{SinkAddr6.String() + "/64", SinkAddr4.String() + "/24"}},
	} {
		for _, a := range x.a {
			args := []string{"addr", "add", a, "dev", x.dev}
			if strings.Contains(a, ":") {
				args = append(args, "nodad")
			}
			if _, err = x.ns.Run(ctx, "ip", args...); err != nil {
				return
			}
		}
		if _, err = x.ns.Run(ctx, "ip", "link", "set", x.dev, "up"); err != nil {
			return
		}
	}
	if l.GenMAC, l.GenIndex, err = linkInfo(l.Gen, ifGen); err != nil {
		return
	}
	if l.InMAC, _, err = linkInfo(l.DUT, ifDUTIn); err != nil {
		return
	}
	if l.OutMAC, _, err = linkInfo(l.DUT, ifDUTOut); err != nil {
		return
	}
	if l.SnkMAC, l.SinkIndex, err = linkInfo(l.Sink, ifSink); err != nil {
		return
	}
	for _, kv := range [][2]string{
		{"net.ipv6.conf.all.forwarding", "1"},
		{"net.ipv4.ip_forward", "1"},
		{"net.ipv6.conf.all.seg6_enabled", "1"},
		{"net.ipv6.conf." + ifDUTIn + ".seg6_enabled", "1"},
		{"net.ipv4.conf.all.rp_filter", "0"},
		{"net.ipv4.conf." + ifDUTIn + ".rp_filter", "0"},
	} {
		if err = l.DUT.Sysctl(kv[0], kv[1]); err != nil {
			return
		}
	}
	// The sink drops everything in XDP, neighbour discovery included, so
	// the DUT gets permanent neighbours; the generator needs none (its
	// frames carry the DUT's MAC).
	mac := l.SnkMAC.String()
	for _, cmd := range [][]string{
		{"-6", "neigh", "replace", SinkAddr6.String(), "lladdr", mac, "dev", ifDUTOut, "nud", "permanent"},
		{"-4", "neigh", "replace", SinkAddr4.String(), "lladdr", mac, "dev", ifDUTOut, "nud", "permanent"},
		{"-6", "route", "add", "fc00:5::/64", "via", SinkAddr6.String(), "dev", ifDUTOut},
		{"-6", "route", "add", "fc00:6::/64", "via", SinkAddr6.String(), "dev", ifDUTOut},
		{"-4", "route", "add", "10.5.0.0/16", "via", SinkAddr4.String(), "dev", ifDUTOut},
		{"sr", "tunsrc", "set", DUTOut6.String()},
	} {
		if _, err = l.DUT.Run(ctx, "ip", cmd...); err != nil {
			return
		}
	}
	// XDP_REDIRECT into a veth is dropped unless the peer runs NAPI
	// (MACHINE-NOTES): GRO on the DUT's ingress gives it NAPI.
	if _, err = l.DUT.Run(ctx, "ethtool", "-K", ifDUTIn, "gro", "on"); err != nil {
		return
	}
	return l, nil
}

// Close deletes the line's namespaces (and with them veths, routes, rules
// and attached XDP programs).
func (l *Line) Close() error {
	var errs []error
	for _, ns := range []*netns.NS{l.Gen, l.DUT, l.Sink} {
		if ns == nil {
			continue
		}
		if err := ns.Delete(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func veth(a *netns.NS, aName string, b *netns.NS, bName string) error {
	v := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: aName, MTU: linkMTU},
		PeerName:      bName,
		PeerNamespace: netlink.NsFd(int(b.Handle())),
	}
	if err := a.Netlink().LinkAdd(v); err != nil {
		return fmt.Errorf("add veth %s/%s: %w", aName, bName, err)
	}
	peer, err := b.Netlink().LinkByName(bName)
	if err != nil {
		return fmt.Errorf("find veth %s: %w", bName, err)
	}
	if err := b.Netlink().LinkSetMTU(peer, linkMTU); err != nil {
		return fmt.Errorf("set mtu of %s: %w", bName, err)
	}
	return nil
}

func linkInfo(ns *netns.NS, name string) (net.HardwareAddr, int, error) {
	lk, err := ns.Netlink().LinkByName(name)
	if err != nil {
		return nil, 0, fmt.Errorf("find link %s in %s: %w", name, ns.Name, err)
	}
	return lk.Attrs().HardwareAddr, lk.Attrs().Index, nil
}

// linkStats are the counters of one interface.
type linkStats struct {
	RxPackets, TxPackets, RxDropped, TxDropped uint64
}

func readLinkStats(ns *netns.NS, name string) (linkStats, error) {
	lk, err := ns.Netlink().LinkByName(name)
	if err != nil {
		return linkStats{}, fmt.Errorf("read counters of %s in %s: %w", name, ns.Name, err)
	}
	s := lk.Attrs().Statistics
	if s == nil {
		return linkStats{}, fmt.Errorf("read counters of %s in %s: no statistics", name, ns.Name)
	}
	return linkStats{s.RxPackets, s.TxPackets, s.RxDropped, s.TxDropped}, nil
}

// CleanupStale removes namespaces left by an earlier run that died
// without cleaning (its PID no longer exists). Only names with the prefix
// are touched.
func CleanupStale(prefix string, alive func(pid int) bool) {
	names, err := netns.List(prefix)
	if err != nil {
		return
	}
	for _, n := range names {
		var pid int
		if _, err := fmt.Sscanf(strings.TrimPrefix(n, prefix), "%d", &pid); err != nil || alive(pid) {
			continue
		}
		if err := netns.Delete(n); err != nil {
			slog.Warn("remove stale namespace", "ns", n, "err", err)
		}
	}
}
