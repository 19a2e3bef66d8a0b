package apply

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/state"
)

// readSysctl reads a sysctl inside the namespace (key in dotted form).
func (a *applier) readSysctl(key string) (string, error) {
	var v string
	err := a.ns.Do(func() error {
		b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(key, ".", "/"))
		if err != nil {
			return fmt.Errorf("read sysctl %s: %w", key, err)
		}
		v = strings.TrimSpace(string(b))
		return nil
	})
	return v, err
}

func (a *applier) sysctls() error {
	for _, s := range a.node.Sysctls {
		if a.prev.hasSysctl(s) {
			continue
		}
		old, err := a.readSysctl(s.Key)
		if err != nil {
			return err
		}
		if old == s.Value {
			continue
		}
		key, val := s.Key, s.Value
		if err := a.change("sysctl "+key+"="+val,
			func() error { return a.ns.Sysctl(key, val) },
			func() error { return a.ns.Sysctl(key, old) }); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) link(name string) (netlink.Link, error) {
	l, err := a.ns.Netlink().LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("find interface %s: %w: %w", name, ErrNoInterface, err)
	}
	return l, nil
}

// interfaces sets MTU, brings every interface (and lo) up, and sets the
// offloads the state asks for (state.Interface GRO on or NoGRO off,
// NoGSO, a veth's SoftwareChecksum).
func (a *applier) interfaces() error {
	h := a.ns.Netlink()
	names := []string{"lo"}
	ifs := map[string]state.Interface{}
	for _, i := range a.node.Interfaces {
		names = append(names, i.Name)
		ifs[i.Name] = i
	}
	for _, name := range names {
		l, err := a.link(name)
		if err != nil {
			return err
		}
		want := ifs[name]
		if mtu := want.MTU; mtu > 0 && l.Attrs().MTU != mtu {
			old := l.Attrs().MTU
			if err := a.hostChange(fmt.Sprintf("mtu %s %d", name, mtu),
				func() error { return wrap(h.LinkSetMTU(l, mtu), "set mtu %d on %s", mtu, name) },
				func() error { return h.LinkSetMTU(l, old) }); err != nil {
				return err
			}
		}
		if l.Attrs().Flags&net.FlagUp == 0 {
			if err := a.hostChange("up "+name,
				func() error { return wrap(h.LinkSetUp(l), "set %s up", name) },
				func() error { return h.LinkSetDown(l) }); err != nil {
				return err
			}
		}
		// After up: a veth turns NAPI on when GRO is switched on while it
		// is up (measured: switched on while down, XDP_REDIRECT into it
		// still dropped every frame).
		if want.GRO || want.NoGRO {
			on, err := a.ns.GRO(name)
			if err != nil {
				return err
			}
			if on != want.GRO {
				if err := a.change(fmt.Sprintf("gro %s %s", onOff(want.GRO), name),
					func() error { return a.ns.SetGRO(name, want.GRO) },
					func() error { return a.ns.SetGRO(name, on) }); err != nil {
					return err
				}
			}
		}
		if want.NoGSO {
			tso, gso, err := a.ns.Segmentation(name)
			if err != nil {
				return err
			}
			// Only what is on: a feature the device cannot change (TSO
			// on a veth whose peer runs XDP) refuses even "off".
			for _, f := range []struct {
				on  bool
				set func(string, bool) error
			}{{tso, a.ns.SetTSO}, {gso, a.ns.SetGSO}} {
				if !f.on {
					continue
				}
				if err := a.change("segmentation offload off "+name,
					func() error { return f.set(name, false) },
					func() error { return f.set(name, true) }); err != nil {
					return err
				}
			}
		}
		if want.SoftwareChecksum && l.Type() == "veth" {
			on, err := a.ns.TxChecksum(name)
			if err != nil {
				return err
			}
			if on {
				if err := a.change("tx checksum offload off "+name,
					func() error { return a.ns.SetTxChecksum(name, false) },
					func() error { return a.ns.SetTxChecksum(name, true) }); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	bits := 128
	if p.Addr().Is4() {
		bits = 32
	}
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), bits)}
}

// addresses adds missing addresses without duplicate address detection
// (RFC 4862 section 5.4 DAD would hold a fresh veth address "tentative" for
// about a second, during which it cannot be used as a source).
func (a *applier) addresses() error {
	h := a.ns.Netlink()
	want := map[string][]netip.Prefix{"lo": a.node.Loopback}
	order := []string{"lo"}
	for _, i := range a.node.Interfaces {
		want[i.Name] = append(want[i.Name], i.Addrs...)
		order = append(order, i.Name)
	}
	for _, name := range order {
		if len(want[name]) == 0 {
			continue
		}
		l, err := a.link(name)
		if err != nil {
			return err
		}
		have, err := h.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return fmt.Errorf("list addresses of %s: %w", name, err)
		}
		for _, p := range want[name] {
			if hasAddr(have, p) {
				continue
			}
			addr := &netlink.Addr{IPNet: ipNet(p)}
			if p.Addr().Is6() {
				addr.Flags = unix.IFA_F_NODAD
			}
			if err := a.hostChange("addr "+p.String()+" "+name,
				func() error { return wrap(h.AddrAdd(l, addr), "add address %s to %s", p, name) },
				func() error { return h.AddrDel(l, addr) }); err != nil {
				return err
			}
		}
	}
	return nil
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

// tunsrc sets the source address of seg6 encapsulations. vishvananda/netlink
// has no API for the SEG6 generic netlink family, so this runs iproute2.
func (a *applier) tunsrc() error {
	if !a.node.TunSrc.IsValid() {
		return nil
	}
	old, err := a.readTunSrc()
	if err != nil {
		return err
	}
	if old == a.node.TunSrc {
		return nil
	}
	return a.change("tunsrc "+a.node.TunSrc.String(),
		func() error { return a.setTunSrc(a.node.TunSrc) },
		func() error { return a.setTunSrc(old) })
}

// ReadTunSrc returns the namespace's `ip sr tunsrc` (:: when unset).
func (a *applier) readTunSrc() (netip.Addr, error) {
	out, err := a.ns.Run(a.ctx, "ip", "sr", "tunsrc", "show")
	if err != nil {
		return netip.Addr{}, fmt.Errorf("read tunsrc: %w", err)
	}
	return parseTunSrc(out)
}

func parseTunSrc(out string) (netip.Addr, error) {
	// iproute2 prints "tunsrc addr fc00:1::1".
	f := strings.Fields(out)
	if len(f) != 3 || f[0] != "tunsrc" || f[1] != "addr" {
		return netip.Addr{}, fmt.Errorf("parse tunsrc %q: %w", strings.TrimSpace(out), ErrBadState)
	}
	addr, err := netip.ParseAddr(f[2])
	if err != nil {
		return netip.Addr{}, fmt.Errorf("parse tunsrc %q: %w", f[2], err)
	}
	return addr, nil
}

func (a *applier) setTunSrc(addr netip.Addr) error {
	// WithoutCancel: the same call undoes a change after the context ended.
	if _, err := a.ns.Run(context.WithoutCancel(a.ctx), "ip", "sr", "tunsrc", "set", addr.String()); err != nil {
		return fmt.Errorf("set tunsrc: %w", err)
	}
	return nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}
