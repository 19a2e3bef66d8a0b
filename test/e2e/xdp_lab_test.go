package e2e

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/pipeline"
	"github.com/srchain/srchain/internal/spec"
)

// TestLabQuickstartXDP deploys examples/quickstart.yaml with `datapath:
// xdp` on r2 (the NF node): every probe arrives, r2's interfaces run the
// End's XDP twin in front of its tc program, the twin forwarded the
// chain's packets (SID counter moved, tc's FIB counter did not), and
// srchain turned GRO on at r2's peers, without which XDP_REDIRECT into
// a veth drops silently (issue 8 section 2).
func TestLabQuickstartXDP(t *testing.T) {
	fwNeedRoot(t)
	lb := deployExample(t, "quickstart.yaml", spec.DatapathXDP, "r2")
	lb.probeAll(t)
	sts, err := lab.Status(t.Context(), lb.net.Name, lb.opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if !st.OK() {
			t.Errorf("node %s: %v", st.Node, st.Problems)
		}
		if st.Node != "r2" {
			continue
		}
		for _, ifn := range []string{"eth0", "eth1"} {
			if p := st.Programs[ifn]; len(p) < 2 || p[0] != "xdp:"+pipeline.ProgName || !slices.Contains(p, "srchain_end") {
				t.Errorf("r2 %s programs %v, want xdp:%s then srchain_end", ifn, p, pipeline.ProgName)
			}
		}
		if !slices.Equal(st.Notes, []string{"xdp pipeline: end"}) {
			t.Errorf("r2 notes %v, want the pipeline [end]", st.Notes)
		}
	}
	lb.xdpForwards(t, "r2", "sid/fc00:2::", "h1", "fc00:a4::2")
	for _, peer := range [][2]string{{"r1", "eth1"}, {"r3", "eth0"}} {
		ns, err := netns.Open(lab.NSName(lb.net.Name, peer[0]))
		if err != nil {
			t.Fatal(err)
		}
		on, err := ns.GRO(peer[1])
		if err != nil || !on {
			t.Errorf("%s %s: gro %v (%v), want on: r2 redirects into it at XDP", peer[0], peer[1], on, err)
		}
		csum, err := ns.TxChecksum(peer[1])
		ns.Close()
		if err != nil || csum {
			t.Errorf("%s %s: tx checksum offload %v (%v), want off: r2's XDP would lose a partial checksum's state", peer[0], peer[1], csum, err)
		}
	}
	// TCP with the hosts' checksum offload on (partial checksums) through
	// r2's XDP End. With r1 handing r2 partial checksums, the redirected
	// segments left with wrong ones and h2 dropped them (any payload).
	// One segment of 1,000 bytes: quickstart's links have the 1,500-byte
	// MTU of their hosts, and a full-size segment plus the SRv6
	// encapsulation exceeds it (XDP drops a frame beyond the MTU, where
	// the GSO packets the kernel passes between veths slip through).
	open := func(node string) *netns.NS {
		t.Helper()
		ns, err := netns.Open(lab.NSName(lb.net.Name, node))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ns.Close)
		return ns
	}
	h1, h2 := open("h1"), open("h2")
	ln := anfListen(t, h2, "[fc00:a4::2]:7001")
	go anfEcho(ln)
	msg := strings.Repeat("x", 1000)
	if got, err := anfTCP(h1, "[fc00:a4::2]:7001", msg); err != nil || got != msg {
		t.Errorf("tcp through r2 at XDP: %d bytes back of %d, %v", len(got), len(msg), err)
	}
}

// xdpForwards sends 20 echo requests from node from to dst, through a
// chain with an NF on node, and checks that node's End counted them for
// its SID and that its interfaces redirected them at XDP (the veth
// driver's own xdp_redirect statistics, read with ethtool -S).
func (l *exampleLab) xdpForwards(t *testing.T, node, sidPrefix, from, dst string) {
	t.Helper()
	sid0, _ := l.endCounters(t, node, sidPrefix)
	red0 := l.xdpRedirects(t, node)
	ns, err := netns.Open(lab.NSName(l.net.Name, from))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	out, err := ns.Run(t.Context(), "ping", "-c", "20", "-i", "0.01", "-W", "1", dst)
	if err != nil {
		t.Fatalf("ping: %v\n%s", err, out)
	}
	sid, _ := l.endCounters(t, node, sidPrefix)
	red := l.xdpRedirects(t, node)
	if sid-sid0 < 20 || red-red0 < 20 {
		t.Errorf("%s during 20 echo requests: End counted %d SID packets, its interfaces %d XDP redirects; want >= 20 each", node, sid-sid0, red-red0)
	}
}

// xdpRedirects sums the rx_queue_N_xdp_redirect statistics of node's
// interfaces.
func (l *exampleLab) xdpRedirects(t *testing.T, node string) uint64 {
	t.Helper()
	ns, err := netns.Open(lab.NSName(l.net.Name, node))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	var sum uint64
	for _, n := range l.net.Nodes {
		if n.Name != node {
			continue
		}
		for _, ifc := range n.Interfaces {
			out, err := ns.Run(t.Context(), "ethtool", "-S", ifc.Name)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(out, "\n") {
				k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
				if ok && strings.HasPrefix(k, "rx_queue_") && strings.HasSuffix(k, "_xdp_redirect") {
					n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
					if err != nil {
						t.Fatalf("ethtool -S %s: %q: %v", ifc.Name, line, err)
					}
					sum += n
				}
			}
		}
	}
	return sum
}

// TestLabApplyToXDPAndBack changes a running quickstart lab from
// `datapath: ebpf` on r2 to `xdp` and back with lab.Update (what `lab
// apply FILE` does): the GRO the peers get is not a topology change,
// the XDP twin comes and forwards, and goes again, with every probe
// delivered at each step.
func TestLabApplyToXDPAndBack(t *testing.T) {
	fwNeedRoot(t)
	lb := deployExample(t, "quickstart.yaml", spec.DatapathEBPF, "r2")
	lb.probeAll(t)
	for _, dp := range []string{spec.DatapathXDP, spec.DatapathEBPF} {
		net, err := compile.Compile(exampleSpec(t, "quickstart.yaml", dp, "r2"))
		if err != nil {
			t.Fatal(err)
		}
		net.Name = lb.net.Name
		if _, err := lab.Update(t.Context(), net, lab.UpOptions{Options: lb.opts}); err != nil {
			t.Fatalf("update to datapath %s: %v", dp, err)
		}
		lb.net = net
		// A prober reads the lab's state when it starts (which nodes
		// forward at XDP): a new one for the new state.
		pr, err := lab.NewProber(net.Name, lb.opts)
		if err != nil {
			t.Fatal(err)
		}
		lb.pr.Close()
		lb.pr = pr
		lb.probeAll(t)
		sts, err := lab.Status(t.Context(), net.Name, lb.opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range sts {
			if !st.OK() {
				t.Errorf("datapath %s: node %s: %v", dp, st.Node, st.Problems)
			}
			if st.Node != "r2" {
				continue
			}
			for ifn, p := range st.Programs {
				if got := len(p) > 0 && p[0] == "xdp:"+pipeline.ProgName; got != (dp == spec.DatapathXDP) {
					t.Errorf("datapath %s: r2 %s programs %v", dp, ifn, p)
				}
			}
		}
		if dp == spec.DatapathXDP {
			lb.xdpForwards(t, "r2", "sid/fc00:2::", "h1", "fc00:a4::2")
		}
	}
}

// TestLabCSIDEBPF deploys examples/csid-quickstart.yaml with r2's End in
// eBPF, tc and then XDP: the compressed chain's container is shifted by
// srchain's End (NEXT-C-SID, RFC 9800) and every probe arrives; at XDP
// the twin forwards the echo requests itself.
func TestLabCSIDEBPF(t *testing.T) {
	fwNeedRoot(t)
	for _, dp := range []string{spec.DatapathEBPF, spec.DatapathXDP} {
		t.Run(dp, func(t *testing.T) {
			lb := deployExample(t, "csid-quickstart.yaml", dp, "r2")
			lb.probeAll(t)
			if dp == spec.DatapathXDP {
				lb.xdpForwards(t, "r2", "sid/fc00:0:2:1::", "h1", "fc00:a4::2")
				return
			}
			if sid, fib := lb.endCounters(t, "r2", "sid/fc00:0:2:1::"); sid == 0 || fib == 0 {
				t.Errorf("r2's tc End: %d SID packets, %d FIB successes; want both > 0", sid, fib)
			}
		})
	}
}
