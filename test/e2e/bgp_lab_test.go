package e2e

import (
	"bufio"
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/bgp"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/netns"
)

// TestLabBGP deploys examples/bgp.yaml (routing: bgp, issue 12): the
// chains work with locators learned by BGP only; stopping the NF router's
// speaker withdraws its locator at the ingress, and the chain's packets
// are then dropped and counted (Ip6*NoRoutes, not a silent blackhole);
// `lab apply` restarts the speaker and the chain comes back.
func TestLabBGP(t *testing.T) {
	requireRoot(t)
	for _, d := range []string{"zebra", "bgpd"} {
		if _, err := os.Stat(filepath.Join(bgp.FRRDir, d)); err != nil {
			unavailableFRR(t, err)
		}
	}
	s, net := example(t, "bgp.yaml", "g")
	opts := up(t, net)
	r1, err := lab.Open(net.Name, "r1", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	pr, err := lab.NewProber(net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	loc2 := netip.MustParsePrefix("fc00:2::/64")

	// Learned, not configured: the only route to r2's locator is BGP's.
	rs := routesTo(t, r1, loc2)
	if len(rs) != 1 || rs[0].Protocol != unix.RTPROT_BGP {
		t.Fatalf("r1 routes to %s: %v, want one route with proto bgp", loc2, rs)
	}
	for _, p := range probes(s) {
		if res, out := run(t, pr, p); !res.OK {
			t.Fatalf("probe %s with bgp routes:\n%s", p.Name, out)
		}
	}

	// Stop r2's speaker: its NOTIFICATION makes r1 withdraw the locator.
	dir := kind.DaemonDir(lab.NSName(net.Name, "r2"))
	if err := kind.StopDaemon(filepath.Join(dir, "bgpd.pid"), dir); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "r1 to withdraw "+loc2.String(), func() bool { return len(routesTo(t, r1, loc2)) == 0 })
	v6 := probes(s)[1]
	r2, err := lab.Open(net.Name, "r2", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	// Every packet of the chain is now dropped and counted: at r1, which
	// has no route to fc00:2::/64 any more, or at r2 when r1 still
	// forwards by the seg6 tunnel's cached route to its first segment
	// (the kernel's per-CPU lwtunnel dst cache outlived the withdrawn
	// route in these runs), where r2, whose speaker is gone, has no route
	// to r3's locator. Never delivered, never dropped without a count.
	for i := range 5 {
		before := noRoutes(t, r1) + noRoutes(t, r2)
		res, out := run(t, pr, v6)
		if res.OK {
			t.Fatalf("probe %d delivered with r2's locator withdrawn:\n%s", i, out)
		}
		if after := noRoutes(t, r1) + noRoutes(t, r2); after <= before {
			t.Fatalf("probe %d dropped without a count at r1 or r2 (Ip6*NoRoutes %d -> %d):\n%s", i, before, after, out)
		}
	}

	// Repair: lab apply finds bgpd not running and starts it again.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := lab.Reapply(ctx, net.Name, opts); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "r1 to learn "+loc2.String()+" again", func() bool { return len(routesTo(t, r1, loc2)) == 1 })
	if res, out := run(t, pr, v6); !res.OK {
		t.Fatalf("probe %s after the speaker came back:\n%s", v6.Name, out)
	}
}

func unavailableFRR(t *testing.T, err error) {
	t.Helper()
	if os.Getenv("SRCHAIN_TEST_STRICT") == "1" {
		t.Fatalf("frr is not installed: %v", err)
	}
	t.Skipf("frr is not installed: %v", err)
}

func routesTo(t *testing.T, ns *netns.NS, p netip.Prefix) []netlink.Route {
	t.Helper()
	dst := &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}
	rs, err := ns.Netlink().RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Dst: dst, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// noRoutes is the namespace's Ip6InNoRoutes + Ip6OutNoRoutes: an
// encapsulated packet whose first segment has no route is counted there.
func noRoutes(t *testing.T, ns *netns.NS) uint64 {
	t.Helper()
	var sum uint64
	err := ns.Do(func() error {
		f, err := os.Open("/proc/thread-self/net/snmp6") // this thread is in ns; /proc/net follows the process
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, _ := strings.Cut(strings.Join(strings.Fields(sc.Text()), " "), " ")
			if k == "Ip6InNoRoutes" || k == "Ip6OutNoRoutes" {
				n, _ := strconv.ParseUint(v, 10, 64)
				sum += n
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
