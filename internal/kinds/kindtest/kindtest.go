// Package kindtest helps the tests of NF kinds' drivers: two network
// namespaces joined by a veth pair, removed when the test ends.
package kindtest

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

// Addresses of Pair's ends.
var (
	AddrA = netip.MustParsePrefix("fd00:ab::1/64")
	AddrB = netip.MustParsePrefix("fd00:ab::2/64")
)

// Pair creates namespaces srct-k<pid><tag>a and ...b (tag keeps tests of
// one process apart) joined by a veth whose ends are both named eth0, up,
// with AddrA and AddrB (no DAD). It needs root.
func Pair(t *testing.T, tag string) (a, b *netns.NS) {
	t.Helper()
	testutil.RequireRoot(t)
	var nss []*netns.NS
	for _, side := range []string{"a", "b"} {
		name := fmt.Sprintf("srct-k%d%s%s", os.Getpid(), tag, side)
		_ = netns.Delete(name)
		ns, err := netns.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := ns.Delete(); err != nil {
				t.Error(err)
			}
		})
		nss = append(nss, ns)
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: "eth0", Namespace: netlink.NsFd(nss[0].Handle())},
		PeerName:      "eth0",
		PeerNamespace: netlink.NsFd(nss[1].Handle()),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("add veth: %v", err)
	}
	for i, ns := range nss {
		h := ns.Netlink()
		l, err := h.LinkByName("eth0")
		if err != nil {
			t.Fatal(err)
		}
		addr := []netip.Prefix{AddrA, AddrB}[i]
		nl, err := netlink.ParseAddr(addr.String())
		if err != nil {
			t.Fatal(err)
		}
		nl.Flags = 0x02 // IFA_F_NODAD: usable at once
		if err := h.AddrAdd(l, nl); err != nil {
			t.Fatalf("add address: %v", err)
		}
		if err := h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	return nss[0], nss[1]
}

// TCXNames lists the names of the programs on ifname's tcx ingress (or
// egress) in ns, in run order.
func TCXNames(t *testing.T, ns *netns.NS, ifname string, egress bool) []string {
	t.Helper()
	l, err := ns.Netlink().LinkByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	if err := ns.Do(func() (err error) {
		names, err = bpfrt.TCXNames(bpfrt.Hook{Ifindex: l.Attrs().Index, Egress: egress})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return names
}

// OPoTTransitSecret is the secret of the transit (node 1 of 3) of chain
// c, profile 1, slot 0, from a fixed profile: what a node whose OPoT
// program has that chain's transit entry holds.
func OPoTTransitSecret(t *testing.T, c string) state.Secret {
	t.Helper()
	var seed [32]byte
	prof, err := opot.GenerateFrom(rand.NewChaCha8(seed), 3)
	if err != nil {
		t.Fatal(err)
	}
	np, err := prof.Node(1)
	if err != nil {
		t.Fatal(err)
	}
	val, err := np.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return state.Secret{Name: state.OPoTSecretName(c, 1, 0), Value: val}
}
