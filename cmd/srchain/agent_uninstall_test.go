package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/hostnode"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

// TestAgentUninstall: `agent --uninstall` needs no etcd, removes srchain's
// routes from the node and restores what a `node apply` recorded under
// the same data directory (here a sysctl), and leaves the operator's
// route alone.
func TestAgentUninstall(t *testing.T) {
	testutil.RequireRoot(t)
	name := fmt.Sprintf("src-srct-a%d", os.Getpid())
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
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "eth9"}); err != nil {
		t.Fatal(err)
	}
	for _, ifn := range []string{"eth0", "eth9"} {
		l, _ := h.LinkByName(ifn)
		if err := h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := ns.Run(context.Background(), "ip", "-6", "route", "add", "2001:db8:99::/48", "dev", "eth0"); err != nil {
		t.Fatalf("operator route: %v %s", err, out)
	}
	node := state.Node{
		Name:       "r1",
		Sysctls:    []state.Sysctl{{Key: "net.ipv6.conf.all.forwarding", Value: "1"}},
		Interfaces: []state.Interface{{Name: "eth0", Addrs: []netip.Prefix{netip.MustParsePrefix("fc00:a1::2/64")}}},
		Routes:     []state.Route{{Dst: netip.MustParsePrefix("fc00:2::/64"), Via: netip.MustParseAddr("fc00:a1::1"), Dev: "eth0"}},
	}
	dir := t.TempDir()
	if _, err := hostnode.Apply(context.Background(), ns, node, hostnode.Options{StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	srchainRoutes := func() int {
		rs, err := h.RouteListFiltered(unix.AF_INET6, &netlink.Route{Table: unix.RT_TABLE_UNSPEC, Protocol: apply.RTProto},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			t.Fatal(err)
		}
		return len(rs)
	}
	if srchainRoutes() != 1 {
		t.Fatal("apply added no route")
	}
	_, stderr, err := runCLI(t, "agent", "--uninstall", "--node", "r1", "--netns", name, "--state-dir", filepath.Join(dir, "agent"),
		"--etcd-endpoints", "http://127.0.0.1:1")
	if err != nil {
		t.Fatalf("agent --uninstall: %v\n%s", err, stderr)
	}
	if n := srchainRoutes(); n != 0 {
		t.Errorf("%d srchain routes left", n)
	}
	if out, _ := ns.Run(context.Background(), "ip", "-6", "route", "show", "2001:db8:99::/48"); !strings.Contains(out, "2001:db8:99::/48") {
		t.Error("the operator's route is gone")
	}
	if out, _ := ns.Run(context.Background(), "sysctl", "-n", "net.ipv6.conf.all.forwarding"); strings.TrimSpace(out) != "0" {
		t.Errorf("forwarding %q after uninstall, want the recorded 0", out)
	}
}
