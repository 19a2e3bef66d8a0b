package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/testutil"
)

// nodeHostSpec is examples/quickstart.yaml for hosts an operator built:
// each router has a tunnel source on lo that the operator configured, and
// its interfaces are the operator's (srchain checks them, writes nothing).
const nodeHostSpec = `name: %s
sid_format: {locator_bits: 64, function_bits: 48, args_bits: 16}
nodes:
  - {name: h1, role: host}
  - {name: r1, role: router, locator: "fc00:1::/64", tunnel_source: "fc00:ff::1", interfaces_managed: false}
  - {name: r2, role: router, locator: "fc00:2::/64", datapath: ebpf, tunnel_source: "fc00:ff::2", interfaces_managed: false}
  - {name: r3, role: router, locator: "fc00:3::/64", tunnel_source: "fc00:ff::3", interfaces_managed: false}
  - {name: h2, role: host}
links:
  - endpoints:
      - {node: h1, interface: eth0, addresses: ["fc00:a1::1/64", "10.0.1.1/24"]}
      - {node: r1, interface: eth0, addresses: ["fc00:a1::2/64", "10.0.1.2/24"]}
  - endpoints:
      - {node: r1, interface: eth1, addresses: ["fc00:a2::1/64", "10.0.2.1/24"]}
      - {node: r2, interface: eth0, addresses: ["fc00:a2::2/64", "10.0.2.2/24"]}
  - endpoints:
      - {node: r2, interface: eth1, addresses: ["fc00:a3::1/64", "10.0.3.1/24"]}
      - {node: r3, interface: eth0, addresses: ["fc00:a3::2/64", "10.0.3.2/24"]}
  - endpoints:
      - {node: r3, interface: eth1, addresses: ["fc00:a4::1/64", "10.0.4.1/24"]}
      - {node: h2, interface: eth0, addresses: ["fc00:a4::2/64", "10.0.4.2/24"]}
nfs:
  - {name: fw, kind: forward, node: r2}
chains:
  - {name: web4, ingress: r1, egress: r3, match: {dst: ["10.0.4.0/24"]}, nfs: [fw]}
  - {name: web6, ingress: r1, egress: r3, match: {dst: ["fc00:a4::/64"]}, nfs: [fw]}
`

// nodeHost is the operator's machine set: one namespace per spec node,
// built with plain ip commands, as hosts srchain did not create.
type nodeHost struct {
	t      *testing.T
	prefix string
	s      *spec.Spec
	// ifs are each node's interfaces, in spec order.
	ifs map[string][]string
}

func (h *nodeHost) ns(node string) string { return h.prefix + node }

// sh runs a command in node's namespace and fails the test on error.
func (h *nodeHost) sh(node string, args ...string) string {
	h.t.Helper()
	out, err := h.try(node, args...)
	if err != nil {
		h.t.Fatalf("%s: %s: %v\n%s", node, strings.Join(args, " "), err, out)
	}
	return out
}

func (h *nodeHost) try(node string, args ...string) (string, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.ns(node)}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String() + stderr.String(), err
}

// newNodeHost writes doc (a spec) under the test's temporary directory and
// builds what an operator would have configured for it: namespaces,
// veths, the spec's addresses, each router's tunnel source on lo, the
// hosts' default routes, and on each router operator state srchain must
// leave alone.
func newNodeHost(t *testing.T, tag, doc string) (*nodeHost, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	h := &nodeHost{t: t, prefix: "src-" + labName(tag) + "-", s: s, ifs: map[string][]string{}}
	for _, n := range s.Nodes {
		name := h.ns(n.Name)
		t.Cleanup(func() {
			if err := netns.Delete(name); err != nil {
				t.Errorf("remove %s: %v", name, err)
			}
		})
		if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v: %s", name, err, out)
		}
		h.sh(n.Name, "ip", "link", "set", "lo", "up")
	}
	for _, l := range s.Links {
		a, b := l.Endpoints[0], l.Endpoints[1]
		if out, err := exec.Command("ip", "link", "add", "name", a.Interface, "netns", h.ns(a.Node), "type", "veth",
			"peer", "name", b.Interface, "netns", h.ns(b.Node)).CombinedOutput(); err != nil {
			t.Fatalf("veth %s/%s-%s/%s: %v: %s", a.Node, a.Interface, b.Node, b.Interface, err, out)
		}
		for _, e := range l.Endpoints {
			h.ifs[e.Node] = append(h.ifs[e.Node], e.Interface)
			for _, p := range e.Addresses {
				if p.Addr().Is6() {
					h.sh(e.Node, "ip", "addr", "add", p.String(), "dev", e.Interface, "nodad")
				} else {
					h.sh(e.Node, "ip", "addr", "add", p.String(), "dev", e.Interface)
				}
			}
		}
	}
	for _, l := range s.Links {
		for _, e := range l.Endpoints {
			h.sh(e.Node, "ip", "link", "set", e.Interface, "up")
		}
	}
	// Hosts configured long ago have finished duplicate address
	// detection on their link-local addresses (RFC 4862 section 5.4);
	// until then the kernel changes their flags and local routes by itself.
	for _, n := range s.Nodes {
		deadline := time.Now().Add(20 * time.Second)
		for strings.Contains(h.sh(n.Name, "ip", "-j", "addr"), "tentative") {
			if time.Now().After(deadline) {
				t.Fatalf("%s: addresses still tentative", n.Name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, l := range s.Links {
		for i, e := range l.Endpoints {
			peer := l.Endpoints[1-i]
			if n := s.Node(e.Node); n == nil || n.Role != spec.RoleHost {
				continue
			}
			// The hosts are plain hosts: default routes to their router.
			for _, p := range peer.Addresses {
				fam := "-4"
				if p.Addr().Is6() {
					fam = "-6"
				}
				h.sh(e.Node, "ip", fam, "route", "add", "default", "via", p.Addr().String())
			}
		}
	}
	for _, n := range s.Nodes {
		if n.Role != spec.RoleRouter {
			continue
		}
		r, dev := n.Name, h.ifs[n.Name][0]
		if n.TunnelSource.IsValid() {
			// The tunnel source the spec names, on lo.
			h.sh(r, "ip", "addr", "add", n.TunnelSource.String()+"/128", "dev", "lo")
		}
		// Operator state srchain must leave alone: routes in main and
		// in another table (one to a chain's destination), a rule, an
		// nft table with a counter rule, a clsact qdisc with a filter,
		// sysctls.
		h.sh(r, "ip", "route", "add", "blackhole", "192.0.2.0/24")
		h.sh(r, "ip", "-6", "route", "add", "blackhole", "2001:db8:99::/48")
		h.sh(r, "ip", "route", "add", "198.51.100.0/24", "dev", dev, "table", "100")
		for _, c := range s.Chains {
			for _, d := range c.Match.Dst {
				h.sh(r, "ip", "route", "add", d.String(), "dev", dev, "table", "100")
			}
		}
		h.sh(r, "ip", "rule", "add", "pref", "1000", "from", "198.51.100.0/24", "table", "100")
		h.sh(r, "ip", "-6", "rule", "add", "pref", "1000", "from", "2001:db8:1::/64", "table", "100")
		h.sh(r, "nft", "add table inet operator; add chain inet operator opchain { type filter hook forward priority 0; }; add rule inet operator opchain ip saddr 203.0.113.7 counter")
		h.sh(r, "tc", "qdisc", "add", "dev", dev, "clsact")
		h.sh(r, "tc", "filter", "add", "dev", dev, "ingress", "prio", "10", "protocol", "all", "u32", "match", "u32", "0", "0", "classid", "1:1")
		// Non-default sysctls srchain does not set; the kernel rewrites
		// the last when srchain sets net.ipv4.ip_forward.
		h.sh(r, "sysctl", "-qw", "net.ipv6.conf."+dev+".accept_dad=2")
		h.sh(r, "sysctl", "-qw", "net.ipv6.conf."+dev+".hop_limit=33")
		h.sh(r, "sysctl", "-qw", "net.ipv4.conf."+dev+".forwarding=1")
	}
	return h, path
}

// sysctls are the sysctls the dumps of node compare: those srchain sets
// on a router, the forwarding switches' side effects, the operator's.
func (h *nodeHost) sysctls(node string) []string {
	var keys []string
	for _, dev := range append([]string{"all", "default", "lo"}, h.ifs[node]...) {
		for _, k := range []string{"forwarding", "accept_dad", "seg6_enabled", "hop_limit"} {
			keys = append(keys, "net.ipv6.conf."+dev+"."+k)
		}
		keys = append(keys, "net.ipv4.conf."+dev+".forwarding")
	}
	return append(keys, "net.ipv4.ip_forward")
}

// hostDump is a router's state, one text per source.
type hostDump map[string]string

func (h *nodeHost) dump(node string) hostDump {
	h.t.Helper()
	d := hostDump{
		"route4": h.sh(node, "ip", "-d", "-j", "route", "show", "table", "all"),
		"route6": h.sh(node, "ip", "-6", "-d", "-j", "route", "show", "table", "all"),
		"rule4":  h.sh(node, "ip", "-j", "rule"),
		"rule6":  h.sh(node, "ip", "-6", "-j", "rule"),
		"addr":   h.sh(node, "ip", "-d", "-j", "addr"),
		"nft":    h.sh(node, "nft", "-j", "list", "ruleset"),
		"qdisc":  h.sh(node, "tc", "-j", "qdisc", "show"),
		"tunsrc": h.sh(node, "ip", "sr", "tunsrc", "show"),
	}
	for _, dev := range h.ifs[node] {
		d["filter "+dev] = h.sh(node, "tc", "-j", "filter", "show", "dev", dev, "ingress")
	}
	var b strings.Builder
	for _, k := range h.sysctls(node) {
		fmt.Fprintf(&b, "%s=%s", k, h.sh(node, "sysctl", "-n", k))
	}
	d["sysctl"] = b.String()
	return d
}

// operator is the part of a dump that is not srchain's: routes and rules
// without srchain's protocol, the anycast routes the kernel adds while
// forwarding is on (RFC 4291 section 2.6.1, a consequence of the
// forwarding sysctl srchain owns), nft tables not named srchain_*,
// qdiscs, filters and addresses; of the sysctls, those srchain never sets.
func operator(t *testing.T, d hostDump) hostDump {
	t.Helper()
	out := hostDump{}
	for _, k := range []string{"route4", "route6", "rule4", "rule6"} {
		var items []map[string]any
		if err := json.Unmarshal([]byte(d[k]), &items); err != nil {
			t.Fatalf("decode %s: %v", k, err)
		}
		items = slices.DeleteFunc(items, func(m map[string]any) bool {
			return fmt.Sprint(m["protocol"]) == fmt.Sprint(apply.RTProto) || m["type"] == "anycast"
		})
		b, _ := json.Marshal(items)
		out[k] = string(b)
	}
	var nft struct {
		Nftables []map[string]map[string]any `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(d["nft"]), &nft); err != nil {
		t.Fatalf("decode nft: %v", err)
	}
	nft.Nftables = slices.DeleteFunc(nft.Nftables, func(e map[string]map[string]any) bool {
		for kind, o := range e {
			name := fmt.Sprint(o["table"])
			if kind == "table" {
				name = fmt.Sprint(o["name"])
			}
			if strings.HasPrefix(name, "srchain_") {
				return true
			}
		}
		return false
	})
	b, _ := json.Marshal(nft)
	out["nft"] = string(b)
	for k, v := range d {
		if k == "qdisc" || k == "addr" || strings.HasPrefix(k, "filter ") {
			out[k] = v
		}
	}
	for _, line := range strings.Split(d["sysctl"], "\n") {
		if strings.Contains(line, ".hop_limit=") || strings.Contains(line, ".accept_dad=") ||
			strings.HasPrefix(line, "net.ipv6.conf.default.seg6_enabled=") {
			out["sysctl"] += line + "\n"
		}
	}
	return out
}

func diffDumps(t *testing.T, what string, a, b hostDump) {
	t.Helper()
	for k := range a {
		if a[k] != b[k] {
			t.Errorf("%s: %s differs:\nbefore: %s\nafter:  %s", what, k, a[k], b[k])
		}
	}
}

// srchain runs the CLI inside node's namespace, as an operator would.
func (h *nodeHost) srchain(node string, args ...string) string {
	h.t.Helper()
	return h.sh(node, append([]string{srchainBin}, args...)...)
}

// TestNodeHostApply: `srchain node apply` on routers built with plain ip
// commands (no lab) steers the quickstart chains through the NF (r2 on the
// eBPF datapath: its End program is pinned in the host's bpffs although
// `ip netns exec` hides it) with the operator's loopback tunnel source, leaves every piece of operator state
// as it was, changes nothing when re-run, and `node reset` leaves each
// router byte-identical to before srchain ran (sysctls and tunsrc it
// changed restored), with no srchain pin left.
func TestNodeHostApply(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tool := range []string{"ip", "nft", "tc", "ping", "sysctl"} {
		testutil.RequireTool(t, tool)
	}
	if srchainBin == "" {
		t.Fatal("the srchain binary was not built (see TestMain)")
	}
	h, specPath := newNodeHost(t, "nh", fmt.Sprintf(nodeHostSpec, "hosts"))
	dir := filepath.Dir(specPath)
	stateDir := filepath.Join(dir, "state")
	routers := []string{"r1", "r2", "r3"}

	// Before srchain: the chain's destinations are unreachable.
	if out, err := h.try("h1", "ping", "-c", "1", "-W", "1", "10.0.4.2"); err == nil {
		t.Fatalf("h1 reaches h2 before srchain ran:\n%s", out)
	}
	before := map[string]hostDump{}
	for _, r := range routers {
		before[r] = h.dump(r)
	}
	for _, r := range routers {
		out := h.srchain(r, "node", "apply", specPath, "--node", r, "--state-dir", stateDir, "--dry-run")
		if !strings.Contains(out, "record sysctl net.ipv6.conf.all.forwarding=0") || strings.Contains(out, "accept_dad") {
			t.Errorf("%s dry run does not say it records the old forwarding, or touches accept_dad:\n%s", r, out)
		}
		if after := h.dump(r); after["route6"] != before[r]["route6"] || after["sysctl"] != before[r]["sysctl"] {
			t.Errorf("%s: the dry run changed the node", r)
		}
		out = h.srchain(r, "node", "apply", specPath, "--node", r, "--state-dir", stateDir)
		if strings.Contains(out, " 0 changes") {
			t.Errorf("%s: first apply made no change: %s", r, out)
		}
	}

	// Probes: delivered, and through the NF on r2 from r1's tunnel source.
	r2, err := netns.Open(h.ns("r2"))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	seen := nodeCapture(t, r2, "eth0", func() {
		h.sh("h1", "ping", "-c", "2", "-W", "2", "10.0.4.2")
		h.sh("h1", "ping", "-6", "-c", "2", "-W", "2", "fc00:a4::2")
	})
	sid := netip.MustParseAddr("fc00:2::1:0")
	src := netip.MustParseAddr("fc00:ff::1")
	for _, inner := range []uint8{unix.IPPROTO_IPIP, unix.IPPROTO_IPV6} {
		if seen[srhKey{src, sid, inner}] < 2 {
			t.Errorf("r2/eth0 saw %d packets from %s with the NF SID %s in their SRH and inner protocol %d, want >= 2 (all: %v)",
				seen[srhKey{src, sid, inner}], src, sid, inner, seen)
		}
	}

	// r2's End program is pinned under the host's bpffs, though `ip
	// netns exec` hid it from the command (cmd/srchain hostMounts).
	if _, err := os.Stat(filepath.Join(apply.PinRoot, h.ns("r2"))); err != nil {
		t.Errorf("r2's End program is not pinned: %v", err)
	}
	tcx := func() []string {
		var names []string
		for _, ifn := range []string{"eth0", "eth1"} {
			p, err := apply.IngressPrograms(r2, ifn)
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, p...)
		}
		return names
	}
	if len(tcx()) == 0 {
		t.Error("r2 has no program at tcx ingress")
	}
	// node status reads r2's End counters from the pins: the probes
	// served by the eBPF fast path are counted on the NF's SID.
	var st struct {
		Drift    []string `json:"drift"`
		Counters []struct {
			Program  string `json:"program"`
			Error    string `json:"error"`
			Counters []struct {
				Name  string `json:"name"`
				Value uint64 `json:"value"`
			} `json:"counters"`
		} `json:"counters"`
	}
	if err := json.Unmarshal([]byte(h.srchain("r2", "node", "status", specPath, "--node", "r2", "--state-dir", stateDir, "--json")), &st); err != nil {
		t.Fatalf("decode node status: %v", err)
	}
	var sidPackets uint64
	for _, pc := range st.Counters {
		if pc.Error != "" {
			t.Errorf("r2 %s counters: %s", pc.Program, pc.Error)
		}
		for _, c := range pc.Counters {
			if c.Name == "sid/fc00:2::1:0/packets" {
				sidPackets += c.Value
			}
		}
	}
	if len(st.Drift) != 0 || sidPackets == 0 {
		t.Errorf("r2 status: drift %v, %d packets on sid fc00:2::1:0; want none and > 0 (%+v)", st.Drift, sidPackets, st.Counters)
	}
	for _, r := range routers {
		diffDumps(t, r+" operator state after apply", operator(t, before[r]), operator(t, h.dump(r)))
		if out := h.srchain(r, "node", "apply", specPath, "--node", r, "--state-dir", stateDir); !strings.Contains(out, " 0 changes") {
			t.Errorf("%s: re-apply: %s, want 0 changes", r, out)
		}
		h.srchain(r, "node", "status", specPath, "--node", r, "--state-dir", stateDir)
	}
	// Drift is reported and exits non-zero.
	h.sh("r2", "ip", "-6", "route", "del", "fc00:2::1:0/112")
	if out, err := h.try("r2", srchainBin, "node", "status", specPath, "--node", "r2", "--state-dir", stateDir); err == nil || !strings.Contains(out, "fc00:2::1:0") {
		t.Errorf("status after deleting r2's SID: err %v, want non-zero exit naming the SID:\n%s", err, out)
	}

	for _, r := range routers {
		h.srchain(r, "node", "reset", "--node", r, "--state-dir", stateDir)
		diffDumps(t, r+" after reset", before[r], h.dump(r))
		if _, err := os.Stat(filepath.Join(apply.PinRoot, h.ns(r))); !os.IsNotExist(err) {
			t.Errorf("%s: srchain pins left: %v", r, err)
		}
		if ents, _ := os.ReadDir(filepath.Join(stateDir, "node")); len(ents) != 3-slices.Index(routers, r)-1 {
			t.Errorf("after reset of %s, records %v remain", r, ents)
		}
	}
	if out, err := h.try("h1", "ping", "-c", "1", "-W", "1", "10.0.4.2"); err == nil {
		t.Errorf("h1 still reaches h2 after reset:\n%s", out)
	}
	if p := tcx(); len(p) != 0 {
		t.Errorf("r2 keeps programs at tcx ingress after reset: %v", p)
	}

	// An operator's route to a chain's destination in the table srchain
	// would write: apply refuses and changes nothing (reset could not
	// give the route back once srchain's had replaced it).
	h.sh("r1", "ip", "-6", "route", "add", "fc00:a4::/64", "via", "fc00:a2::2")
	held := h.dump("r1")
	out, err := h.try("r1", srchainBin, "node", "apply", specPath, "--node", "r1", "--state-dir", stateDir)
	if err == nil || !strings.Contains(out, "fc00:a4::/64") || !strings.Contains(out, "not srchain's") {
		t.Errorf("apply over the operator's route to fc00:a4::/64: err %v, want a refusal naming it:\n%s", err, out)
	}
	diffDumps(t, "r1 after a refused apply", held, h.dump("r1"))
	if ents, _ := os.ReadDir(filepath.Join(stateDir, "node")); len(ents) != 0 {
		t.Errorf("a refused apply left records %v", ents)
	}
}

// srhKey is what identifies a steered packet: outer source, a segment of
// its SRH, the inner protocol.
type srhKey struct {
	src, seg netip.Addr
	inner    uint8
}

// nodeCapture counts the SRv6 packets arriving on ifname of ns while send
// runs, by outer source, each SRH segment and the SRH's next header. It
// reads a socket opened before send, until the socket has been quiet for
// a while after send returned.
func nodeCapture(t *testing.T, ns *netns.NS, ifname string, send func()) map[srhKey]int {
	t.Helper()
	l, err := ns.Netlink().LinkByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	if err := ns.Do(func() error {
		var err error
		// ETH_P_ALL: a tap, which sees a packet before tc ingress (an
		// eBPF End there redirects it; a socket bound to ETH_P_IPV6
		// would see only what reaches the IPv6 stack).
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, int(endHtons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: endHtons(unix.ETH_P_ALL), Ifindex: l.Attrs().Index})
	}); err != nil {
		t.Fatalf("capture on %s: %v", ifname, err)
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 1}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	send()
	seen := map[srhKey]int{}
	buf := make([]byte, 65536)
	for {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			break // quiet for a second: everything sent has arrived
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); !ok || ll.Pkttype == unix.PACKET_OUTGOING || ll.Protocol != endHtons(unix.ETH_P_IPV6) {
			continue
		}
		p := buf[:n]
		// IPv6 header (40) then a routing header type 4 (RFC 8754).
		if len(p) < 48 || p[6] != unix.IPPROTO_ROUTING || p[42] != 4 {
			continue
		}
		src, _ := netip.AddrFromSlice(p[8:24])
		srh := p[40:]
		hdrLen := (int(srh[1]) + 1) * 8
		if len(srh) < hdrLen {
			continue
		}
		for i := 0; 8+16*(i+1) <= hdrLen && i <= int(srh[4]); i++ {
			seg, _ := netip.AddrFromSlice(srh[8+16*i : 8+16*(i+1)])
			seen[srhKey{src, seg, srh[0]}]++
		}
	}
	return seen
}

// TestNodeHostSERA: examples/sera-firewall.yaml on four routers an
// operator built (tunnel sources on lo, interfaces the operator's):
// `node apply` on each puts the eBPF SERA firewall on nfv, whose policy
// counter sees the probes of chain d1 (sent from the ingress router
// itself, as the example's traffic is), with operator state untouched;
// `node reset` leaves every router byte-identical and removes the
// firewall's pins and programs.
func TestNodeHostSERA(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tool := range []string{"ip", "nft", "tc", "ping", "sysctl"} {
		testutil.RequireTool(t, tool)
	}
	if srchainBin == "" {
		t.Fatal("the srchain binary was not built (see TestMain)")
	}
	b, err := os.ReadFile("../../examples/sera-firewall.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	routers := []string{"ingress", "nfv", "egress", "ids"}
	for i, r := range routers {
		from := fmt.Sprintf(`{name: %s, role: router, locator: "fc00:%d::/64"}`, r, i+1)
		if !strings.Contains(doc, from) {
			t.Fatalf("examples/sera-firewall.yaml lost %s", from)
		}
		doc = strings.Replace(doc, from, fmt.Sprintf(`{name: %s, role: router, locator: "fc00:%d::/64", tunnel_source: "fc00:ff::%d", interfaces_managed: false}`, r, i+1, i+1), 1)
	}
	h, specPath := newNodeHost(t, "ns", doc)
	stateDir := filepath.Join(filepath.Dir(specPath), "state")
	before := map[string]hostDump{}
	for _, r := range routers {
		before[r] = h.dump(r)
	}
	for _, r := range routers {
		h.srchain(r, "node", "apply", specPath, "--node", r, "--state-dir", stateDir)
	}
	h.sh("ingress", "ping", "-6", "-c", "3", "-W", "2", "fc00:d1::2")
	var st struct {
		Drift    []string `json:"drift"`
		Counters []struct {
			Program  string `json:"program"`
			NF       string `json:"nf"`
			Error    string `json:"error"`
			Counters []struct {
				Name  string `json:"name"`
				Value uint64 `json:"value"`
			} `json:"counters"`
		} `json:"counters"`
	}
	if err := json.Unmarshal([]byte(h.srchain("nfv", "node", "status", specPath, "--node", "nfv", "--state-dir", stateDir, "--json")), &st); err != nil {
		t.Fatalf("decode node status: %v", err)
	}
	var policy uint64
	for _, pc := range st.Counters {
		if pc.Error != "" {
			t.Errorf("nfv %s %s counters: %s", pc.Program, pc.NF, pc.Error)
		}
		for _, c := range pc.Counters {
			if pc.NF == "sera" && c.Name == "policy/packets" {
				policy += c.Value
			}
		}
	}
	if len(st.Drift) != 0 || policy < 3 {
		t.Errorf("nfv status: drift %v, sera policy/packets %d; want none and >= 3 (%+v)", st.Drift, policy, st.Counters)
	}
	for _, r := range routers {
		diffDumps(t, r+" operator state after apply", operator(t, before[r]), operator(t, h.dump(r)))
		if out := h.srchain(r, "node", "apply", specPath, "--node", r, "--state-dir", stateDir); !strings.Contains(out, " 0 changes") {
			t.Errorf("%s: re-apply: %s, want 0 changes", r, out)
		}
	}
	nfv, err := netns.Open(h.ns("nfv"))
	if err != nil {
		t.Fatal(err)
	}
	defer nfv.Close()
	for _, r := range routers {
		h.srchain(r, "node", "reset", "--node", r, "--state-dir", stateDir)
		diffDumps(t, r+" after reset", before[r], h.dump(r))
		if _, err := os.Stat(filepath.Join(apply.PinRoot, h.ns(r))); !os.IsNotExist(err) {
			t.Errorf("%s: srchain pins left: %v", r, err)
		}
	}
	for _, ifn := range h.ifs["nfv"] {
		if p, err := apply.IngressPrograms(nfv, ifn); err != nil || len(p) != 0 {
			t.Errorf("nfv/%s keeps programs at tcx ingress after reset: %v %v", ifn, p, err)
		}
	}
}
