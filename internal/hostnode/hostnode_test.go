package hostnode

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/vishvananda/netlink"

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
