package hostnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

func TestRecordPath(t *testing.T) {
	if got := RecordPath("", "r1", "host"); got != "/var/lib/srchain/node/r1.json" {
		t.Errorf("host record %s", got)
	}
	if got := RecordPath("/s", "r1", "ns1"); got != "/s/node/r1@ns1.json" {
		t.Errorf("namespace record %s", got)
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a\x00"} {
		if err := checkName(bad); !errors.Is(err, ErrBadName) {
			t.Errorf("name %q: %v", bad, err)
		}
	}
}

// TestResetRestores: what apply changes on a namespace that is not
// srchain's (an MTU, a down interface, a missing address, a sysctl and
// the per-interface forwarding that writing all.forwarding rewrites) is
// recorded before the change and put back by Reset, which then removes
// the record; a second Apply changes nothing.
func TestResetRestores(t *testing.T) {
	testutil.RequireRoot(t)
	name := fmt.Sprintf("src-srct-h%d", os.Getpid())
	ns, err := netns.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Delete(); err != nil {
			t.Error(err)
		}
	})
	h := ns.Netlink()
	la := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0", MTU: 1400}, PeerName: "eth9"}
	if err := h.LinkAdd(la); err != nil {
		t.Fatal(err)
	}
	peer, err := h.LinkByName("eth9")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(peer); err != nil {
		t.Fatal(err)
	}
	// The operator's per-interface forwarding on eth9, which writing
	// net.ipv6.conf.all.forwarding rewrites.
	if err := ns.Sysctl("net.ipv6.conf.eth9.forwarding", "1"); err != nil {
		t.Fatal(err)
	}
	node := state.Node{
		Name:       "r1",
		Sysctls:    []state.Sysctl{{Key: "net.ipv6.conf.all.forwarding", Value: "1"}, {Key: "net.ipv6.conf.eth0.accept_dad", Value: "0"}},
		Interfaces: []state.Interface{{Name: "eth0", MTU: 1500, Addrs: []netip.Prefix{netip.MustParsePrefix("fc00:a1::2/64")}}},
	}
	read := func() string {
		l, err := h.LinkByName("eth0")
		if err != nil {
			t.Fatal(err)
		}
		addrs, _ := h.AddrList(l, netlink.FAMILY_V6)
		var global int
		for _, a := range addrs {
			if a.IP.IsGlobalUnicast() {
				global++
			}
		}
		s := fmt.Sprintf("mtu=%d flags=%v global=%d", l.Attrs().MTU, l.Attrs().Flags, global)
		for _, k := range []string{"net.ipv6.conf.all.forwarding", "net.ipv6.conf.eth0.forwarding", "net.ipv6.conf.eth9.forwarding", "net.ipv6.conf.eth0.accept_dad"} {
			v, err := readSysctl(ns, k)
			if err != nil {
				t.Fatal(err)
			}
			s += " " + k + "=" + v
		}
		return s
	}
	before := read()
	dir := t.TempDir()
	ctx := context.Background()
	res, err := Apply(ctx, ns, node, Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.Changes == 0 {
		t.Fatal("apply made no change")
	}
	if applied := read(); applied == before {
		t.Fatalf("apply changed nothing visible: %s", applied)
	}
	if res, err := Apply(ctx, ns, node, Options{StateDir: dir}); err != nil || res.Changes != 0 {
		t.Errorf("re-apply: %d changes, %v", res.Changes, err)
	}
	if _, err := Reset(ctx, ns, "r1", Options{StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	if after := read(); after != before {
		t.Errorf("after reset:\n%s\nwant\n%s", after, before)
	}
	if _, err := os.Stat(filepath.Join(dir, "node")); err == nil {
		if ents, _ := os.ReadDir(filepath.Join(dir, "node")); len(ents) != 0 {
			t.Errorf("records left: %v", ents)
		}
	}
	if _, err := Reset(ctx, ns, "r1", Options{StateDir: dir}); !errors.Is(err, ErrNoRecord) {
		t.Errorf("second reset: %v, want ErrNoRecord", err)
	}
}

// TestUnmanagedInterfaces: with interfaces the operator's
// (InterfacesUnmanaged), an MTU, link state or address that differs is
// reported by the dry run and refused by Apply, which leaves the
// namespace as it was (the sysctls it set first rolled back).
func TestUnmanagedInterfaces(t *testing.T) {
	testutil.RequireRoot(t)
	name := fmt.Sprintf("src-srct-u%d", os.Getpid())
	ns, err := netns.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Delete(); err != nil {
			t.Error(err)
		}
	})
	h := ns.Netlink()
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0", MTU: 1400}, PeerName: "eth9"}); err != nil {
		t.Fatal(err)
	}
	node := state.Node{
		Name:                "r1",
		InterfacesUnmanaged: true,
		Sysctls:             []state.Sysctl{{Key: "net.ipv6.conf.all.forwarding", Value: "1"}},
		Interfaces:          []state.Interface{{Name: "eth0", MTU: 1500, Addrs: []netip.Prefix{netip.MustParsePrefix("fc00:a1::2/64")}}},
	}
	dir := t.TempDir()
	ctx := context.Background()
	res, err := Apply(ctx, ns, node, Options{StateDir: dir, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	var mismatches int
	for _, p := range res.Pending {
		if strings.HasPrefix(p, "mismatch (not managed): ") {
			mismatches++
		}
	}
	if mismatches != 3 { // mtu, up, address
		t.Errorf("dry run: %d mismatches, want 3: %q", mismatches, res.Pending)
	}
	if _, err := Apply(ctx, ns, node, Options{StateDir: dir}); !errors.Is(err, apply.ErrUnmanaged) {
		t.Fatalf("apply over a differing unmanaged interface: %v, want ErrUnmanaged", err)
	}
	l, err := h.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if l.Attrs().MTU != 1400 || l.Attrs().Flags&net.FlagUp != 0 {
		t.Errorf("eth0 changed: mtu %d flags %v", l.Attrs().MTU, l.Attrs().Flags)
	}
	if v, _ := readSysctl(ns, "net.ipv6.conf.all.forwarding"); v != "0" {
		t.Errorf("forwarding %s after a refused apply, want 0", v)
	}
	// Once the operator configured them as the spec says, apply goes on.
	if err := h.LinkSetMTU(l, 1500); err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipNet(netip.MustParsePrefix("fc00:a1::2/64")), Flags: unix.IFA_F_NODAD}); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, ns, node, Options{StateDir: dir}); err != nil {
		t.Errorf("apply over matching unmanaged interfaces: %v", err)
	}
}
