package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/controller"
	"github.com/srchain/srchain/internal/kind"
	_ "github.com/srchain/srchain/internal/kinds/all" // every NF kind's driver
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/store"
	"github.com/srchain/srchain/internal/testutil"
)

const token = "agent-test-token"

// Short lease and resync: the test waits for expiry and repair (polling
// with a deadline, never sleeping as an assertion).
const (
	testTTL    = 2 * time.Second
	testResync = 300 * time.Millisecond
	deadline   = 30 * time.Second
)

func freeURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}

// world is a controller on an embedded etcd, one namespace per node and
// one agent per namespace.
type world struct {
	t      *testing.T
	st     *store.Store
	cl     *controller.Client
	prefix string
	dir    string
	nss    map[string]*netns.NS
	agents map[string]*running
	// agentCli is the agents' etcd client (nil: the store's).
	agentCli *clientv3.Client
}

type running struct {
	agent  *Agent
	cancel context.CancelFunc
	done   chan error
}

func newWorld(t *testing.T) *world {
	testutil.RequireRoot(t)
	testutil.RequireTool(t, "ip")
	testutil.RequireTool(t, "ping")
	dir := t.TempDir()
	st, err := store.Open(context.Background(), store.Config{DataDir: dir, ClientURL: freeURL(t), PeerURL: freeURL(t),
		LogFile: filepath.Join(dir, "etcd.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// The serve code path: the controller's HTTP handler with its token.
	srv := httptest.NewServer(controller.New(st).Handler(token))
	t.Cleanup(srv.Close)
	w := &world{t: t, st: st, cl: &controller.Client{Server: srv.URL, Token: token},
		prefix: fmt.Sprintf("sag%d-", os.Getpid()%100000), dir: dir,
		nss: map[string]*netns.NS{}, agents: map[string]*running{}}
	// Registered after st.Close and srv.Close, so run before them.
	t.Cleanup(w.cleanup)
	return w
}

func (w *world) cleanup() {
	for node := range w.agents {
		w.stop(node)
	}
	for _, ns := range w.nss {
		os.RemoveAll(kind.PinDir(ns))
		if err := ns.Delete(); err != nil {
			w.t.Errorf("cleanup: %v", err)
		}
	}
}

// put stores the quickstart spec, named uniquely, with r2's NF on the
// eBPF datapath (pinned programs to adopt), through the API.
func (w *world) put() {
	w.t.Helper()
	y, err := os.ReadFile("../../examples/quickstart.yaml")
	if err != nil {
		w.t.Fatal(err)
	}
	s := strings.Replace(string(y), "name: quickstart", "name: "+strings.TrimSuffix(w.prefix, "-"), 1)
	s = strings.Replace(s, `{name: r2, role: router, locator: "fc00:2::/64"}`, `{name: r2, role: router, locator: "fc00:2::/64", datapath: ebpf}`, 1)
	if !strings.Contains(s, "datapath: ebpf") {
		w.t.Fatal("quickstart.yaml changed: r2 not found")
	}
	doc, err := controller.DocFromYAML([]byte(s))
	if err != nil {
		w.t.Fatal(err)
	}
	w.do("PUT", "/v1/spec", string(doc), nil)
}

func (w *world) do(method, path, body string, out any) {
	w.t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	if err := w.cl.Do(context.Background(), method, path, b, out); err != nil {
		w.t.Fatalf("%s %s: %v", method, path, err)
	}
}

// build creates one empty namespace per node and the veths of the links,
// as the lab does (internal/lab.addLink): nothing else, the agents apply
// the rest.
func (w *world) build() []string {
	w.t.Helper()
	var spec struct {
		Nodes []struct{ Name string } `json:"nodes"`
	}
	w.do("GET", "/v1/spec", "", &spec)
	var nodes []string
	links := map[string]state.Link{}
	for _, n := range spec.Nodes {
		nodes = append(nodes, n.Name)
		ns, err := netns.Create(w.prefix + n.Name)
		if err != nil {
			w.t.Fatal(err)
		}
		w.nss[n.Name] = ns
		var d controller.NodeState
		w.do("GET", "/v1/nodes/"+n.Name+"/desired", "", &d)
		for _, l := range d.State.Links {
			links[fmt.Sprint(l)] = l
		}
	}
	for _, l := range links {
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: l.A.Interface, MTU: l.MTU, Namespace: netlink.NsFd(w.nss[l.A.Node].Handle())},
			PeerName:      l.B.Interface,
			PeerMTU:       uint32(max(l.MTU, 0)),
			PeerNamespace: netlink.NsFd(w.nss[l.B.Node].Handle()),
		}
		if err := netlink.LinkAdd(veth); err != nil {
			w.t.Fatalf("add link %v: %v", l, err)
		}
	}
	slices.Sort(nodes)
	return nodes
}

// start runs node's agent in a goroutine until stop.
func (w *world) start(node string) {
	w.t.Helper()
	cli := w.agentCli
	if cli == nil {
		cli = w.st.Client()
	}
	a, err := New(Config{Node: node, NS: w.nss[node], Client: cli, TTL: testTTL, Resync: testResync,
		StateFile: filepath.Join(w.dir, "agent", node+".json"), Version: "test"})
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{agent: a, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx) }()
	w.agents[node] = r
}

// stop ends node's agent as a crash would: its goroutine returns, its
// lease is not revoked.
func (w *world) stop(node string) {
	r := w.agents[node]
	r.cancel()
	<-r.done
	delete(w.agents, node)
}

// status reads node's status through the API.
func (w *world) status(node string) (controller.Status, Status) {
	w.t.Helper()
	var st controller.Status
	w.do("GET", "/v1/nodes/"+node+"/status", "", &st)
	var rep Status
	if st.Report != nil {
		if err := json.Unmarshal(st.Report, &rep); err != nil {
			w.t.Fatalf("decode report of %s: %v", node, err)
		}
	}
	return st, rep
}

// until polls cond until it holds or the deadline passes.
func (w *world) until(what string, cond func() bool) {
	w.t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			w.t.Fatalf("after %v: %s", deadline, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (w *world) inSync(nodes ...string) {
	w.t.Helper()
	for _, n := range nodes {
		w.until(n+" applies its desired generation", func() bool {
			st, rep := w.status(n)
			if rep.LastError != "" {
				w.t.Fatalf("agent %s: %s", n, rep.LastError)
			}
			return st.InSync
		})
	}
}

func (w *world) ping(to string) error {
	_, err := w.nss["h1"].Run(context.Background(), "ping", "-c", "1", "-W", "1", to)
	return err
}

func (w *world) routes(node, family string) string {
	w.t.Helper()
	out, err := w.nss[node].Run(context.Background(), "ip", family, "route", "show", "table", "all")
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

// policy reports whether routes (ip route show) has an SRv6
// encapsulation route for dst.
func policy(routes, dst string) bool {
	for _, l := range strings.Split(routes, "\n") {
		if strings.HasPrefix(l, dst+" ") && strings.Contains(l, "encap seg6") {
			return true
		}
	}
	return false
}

// TestAgents: one agent per namespace of the quickstart lab, fed by the
// controller through etcd. Traffic h1 -> h2 flows only once the agents
// applied; a chain changed through the API reaches the ingress as a new
// generation; drift is repaired; a stopped agent shows as down after its
// lease; a restarted agent adopts the node and changes nothing.
func TestAgents(t *testing.T) {
	w := newWorld(t)
	w.put()
	nodes := w.build()

	// Empty namespaces: no addresses, no routes, no chain.
	if err := w.ping("10.0.4.2"); err == nil {
		t.Fatal("h1 reaches h2 before any agent applied")
	}
	for _, n := range nodes {
		if st, _ := w.status(n); st.Agent != controller.AgentUnknown {
			t.Errorf("%s before its agent: agent %q, want unknown", n, st.Agent)
		}
	}
	for _, n := range nodes {
		w.start(n)
	}
	w.inSync(nodes...)
	// ND/ARP and the first packets may take a moment: poll.
	for _, to := range []string{"10.0.4.2", "fc00:a4::2"} {
		w.until("h1 pings "+to+" through the chain", func() bool { return w.ping(to) == nil })
	}
	if r := w.routes("r1", "-4"); !policy(r, "10.0.4.0/24") {
		t.Fatalf("r1 has no ingress policy for 10.0.4.0/24:\n%s", r)
	}

	// Change chain web4 through the API: only r1's generation moves.
	before := map[string]int64{}
	for _, n := range nodes {
		st, _ := w.status(n)
		before[n] = st.DesiredGeneration
	}
	var res controller.Result
	t0 := time.Now()
	w.do("PUT", "/v1/chains/web4", `{"ingress":"r1","egress":"r3","match":{"dst":["10.0.4.0/25"]},"nfs":["fw"]}`, &res)
	if !slices.Equal(res.Changed, []string{"r1"}) {
		t.Fatalf("changing web4 changed %v, want [r1]", res.Changed)
	}
	w.inSync(nodes...)
	st, rep := w.status("r1")
	// A number for docs/controller.md, not an assertion: from the API
	// call to r1's status written after the apply.
	t.Logf("chain change: API call to applied on the ingress in %v", rep.Time.Sub(t0))
	if st.DesiredGeneration == before["r1"] || *st.AppliedGeneration != st.DesiredGeneration || rep.Changes == 0 {
		t.Errorf("r1 after the change: %+v, report %+v", st, rep)
	}
	if r := w.routes("r1", "-4"); policy(r, "10.0.4.0/24") || !policy(r, "10.0.4.0/25") {
		t.Errorf("r1's ingress policy did not move from 10.0.4.0/24 to 10.0.4.0/25:\n%s", r)
	}
	if err := w.ping("10.0.4.2"); err != nil {
		t.Errorf("h1 -> 10.0.4.2 after the change: %v", err)
	}
	// The agent applied only web4's parts (the base did not change):
	// the node is as its whole desired state says.
	w.noDrift("r1")

	// Drift: a policy deleted by hand comes back at the next resync.
	if _, err := w.nss["r1"].Run(context.Background(), "ip", "-4", "route", "del", "10.0.4.0/25"); err != nil {
		t.Fatalf("delete r1's policy: %v", err)
	}
	w.until("r1's agent repairs the deleted policy and reports it", func() bool {
		_, rep := w.status("r1")
		return len(rep.Repaired) > 0 && strings.Contains(strings.Join(rep.Repaired, " "), "10.0.4.0/25") &&
			policy(w.routes("r1", "-4"), "10.0.4.0/25")
	})

	// Back to 10.0.4.0/24: the /25 policy has no successor in its slot,
	// so it goes only because the agent removes what the last applied
	// generation had and this one lacks (apply.Options.Remove).
	w.do("PUT", "/v1/chains/web4", `{"ingress":"r1","egress":"r3","match":{"dst":["10.0.4.0/24"]},"nfs":["fw"]}`, nil)
	w.inSync(nodes...)
	if r := w.routes("r1", "-4"); !policy(r, "10.0.4.0/24") || strings.Contains(r, "10.0.4.0/25") {
		t.Errorf("r1's ingress policy did not move back from 10.0.4.0/25 to 10.0.4.0/24:\n%s", r)
	}
	w.noDrift("r1")

	// Stop r1's and r2's agents (as a crash: the lease is not revoked):
	// they show as down once the lease expires. What they applied stays,
	// and a ping every 10 ms through the chain loses nothing while they
	// are away and restart.
	pinger := w.nss["h1"].Command(context.Background(), "ping", "-i", "0.01", "10.0.4.2")
	var pingOut strings.Builder
	pinger.Stdout = &pingOut
	if err := pinger.Start(); err != nil {
		t.Fatal(err)
	}
	pingerDone := false
	defer func() {
		if !pingerDone {
			pinger.Process.Kill()
			pinger.Wait()
		}
	}()
	for _, n := range []string{"r1", "r2"} {
		w.stop(n)
		w.until(n+" shows as down after its lease TTL", func() bool {
			st, _ := w.status(n)
			return st.Agent == controller.AgentDown && st.AppliedGeneration == nil && !st.InSync
		})
	}
	if err := w.ping("10.0.4.2"); err != nil {
		t.Errorf("h1 -> 10.0.4.2 with r1's and r2's agents stopped: %v", err)
	}

	// Restart them: each adopts what is in place (routes, pinned End
	// program on r2) and its first apply changes nothing.
	for _, n := range []string{"r1", "r2"} {
		w.start(n)
	}
	w.inSync("r1", "r2")
	for _, n := range []string{"r1", "r2"} {
		_, rep := w.status(n)
		if rep.Applies != 1 || rep.Changes != 0 {
			t.Errorf("%s's first apply after a restart: %d applies, %d changes, want 1 and 0", n, rep.Applies, rep.Changes)
		}
	}
	// ping prints its summary on SIGINT (sent to the process we started).
	if err := pinger.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	pinger.Wait()
	pingerDone = true
	sent, recv, err := pingSummary(pingOut.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ping -i 0.01 during two agent stops and restarts: %d sent, %d received", sent, recv)
	if sent < 100 || recv != sent {
		t.Errorf("ping during agent restarts: %d sent, %d received; want >= 100 and no loss", sent, recv)
	}

	// A change made while r1's agent is away: its policy moved to /25
	// (applied), then back to /24 (not applied). The restarted agent
	// has no last applied state but its state file: only through it does
	// it know to remove the /25 policy, which has no successor in its
	// slot.
	w.do("PUT", "/v1/chains/web4", `{"ingress":"r1","egress":"r3","match":{"dst":["10.0.4.0/25"]},"nfs":["fw"]}`, nil)
	w.inSync("r1")
	w.stop("r1")
	w.do("PUT", "/v1/chains/web4", `{"ingress":"r1","egress":"r3","match":{"dst":["10.0.4.0/24"]},"nfs":["fw"]}`, nil)
	w.start("r1")
	w.inSync("r1")
	if r := w.routes("r1", "-4"); !policy(r, "10.0.4.0/24") || strings.Contains(r, "10.0.4.0/25") {
		t.Errorf("r1 after a change made while its agent was away:\n%s", r)
	}
	w.noDrift("r1")
}

// pingSummary reads "N packets transmitted, M received" from ping's output.
func pingSummary(out string) (sent, recv int, err error) {
	for _, l := range strings.Split(out, "\n") {
		if _, err := fmt.Sscanf(l, "%d packets transmitted, %d received", &sent, &recv); err == nil {
			return sent, recv, nil
		}
	}
	return 0, 0, fmt.Errorf("no ping summary in:\n%s", out)
}

// TestApplyFailureRolledBack: a desired state that cannot be applied (a
// program kind without a driver, found after the addresses and routes
// went in) is rolled back, reported, and leaves the node at the last
// applied generation; the next good one applies.
func TestApplyFailureRolledBack(t *testing.T) {
	w := newWorld(t)
	ns, err := netns.Create(w.prefix + "x")
	if err != nil {
		t.Fatal(err)
	}
	w.nss["x"] = ns
	cli := w.st.Client()
	a := netip.MustParsePrefix("fd00:99::1/128")
	b := netip.MustParsePrefix("fd00:99::2/128")
	route := state.Route{Dst: netip.MustParsePrefix("fd00:98::/64"), Dev: "lo"}
	put := func(n state.Node) int64 {
		t.Helper()
		n.Name, n.Role, n.Interfaces = "x", "router", []state.Interface{}
		raw, err := json.Marshal(state.Network{Version: state.FormatVersion, Name: "t", Nodes: []state.Node{n}, Links: []state.Link{}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := cli.Put(context.Background(), store.DesiredKey("x"), string(raw))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	has := func(what string, args ...string) bool {
		out, err := ns.Run(context.Background(), "ip", args...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(out, what)
	}
	g1 := put(state.Node{Loopback: []netip.Prefix{a}})
	w.start("x")
	w.inSync("x")

	g2 := put(state.Node{Loopback: []netip.Prefix{a, b}, Routes: []state.Route{route},
		Programs: []state.Program{{Kind: "no-such-program"}}})
	w.until("x reports the failed apply of generation "+fmt.Sprint(g2), func() bool {
		st, rep := w.status("x")
		return rep.DesiredGeneration == g2 && rep.LastError != "" && st.AppliedGeneration != nil
	})
	st, rep := w.status("x")
	if *st.AppliedGeneration != g1 || st.InSync || !strings.Contains(rep.LastError, "no driver") {
		t.Errorf("after a failed apply: %+v, report %+v; want applied %d, not in sync, error naming the driver", st, rep, g1)
	}
	// What the metrics show (srchain_apply_errors_total, ...): the
	// failure counted, the node still at g1. The snapshot is read after
	// the report, and the apply is retried at each resync: >=.
	snap := w.agents["x"].agent.Snapshot()
	if rep.ApplyErrors < 1 || snap.ApplyErrors < uint64(rep.ApplyErrors) || !snap.Up ||
		snap.AppliedGeneration == nil || *snap.AppliedGeneration != g1 || snap.DesiredGeneration != g2 {
		t.Errorf("after a failed apply: report counts %d apply errors, metrics snapshot %+v; want >= 1, up, applied %d, desired %d",
			rep.ApplyErrors, snap, g1, g2)
	}
	if has("fd00:99::2", "-6", "addr", "show", "dev", "lo") || has("fd00:98::/64", "-6", "route") {
		t.Error("the failed generation left its address or route behind (half applied)")
	}
	if !has("fd00:99::1", "-6", "addr", "show", "dev", "lo") {
		t.Error("the failed apply removed what the last good generation applied")
	}

	g3 := put(state.Node{Loopback: []netip.Prefix{a, b}, Routes: []state.Route{route}})
	w.until("x applies the good generation after the failed one", func() bool {
		st, rep := w.status("x")
		return st.InSync && *st.AppliedGeneration == g3 && rep.LastError == ""
	})
	if !has("fd00:98::/64", "-6", "route") || !has("fd00:99::2", "-6", "addr", "show", "dev", "lo") {
		t.Error("the good generation is not in place")
	}

	// A desired state in another format is refused and reported; one
	// deleted (the node left the spec) leaves the node as it is. Both
	// stay reported across resyncs.
	old := state.FormatVersion - 1
	resp, err := cli.Put(context.Background(), store.DesiredKey("x"), fmt.Sprintf(`{"version":%d,"nodes":[{"name":"x"}]}`, old))
	if err != nil {
		t.Fatal(err)
	}
	g4 := resp.Header.Revision
	w.until("x reports the desired state's format version", func() bool {
		st, rep := w.status("x")
		return rep.DesiredGeneration == g4 && strings.Contains(rep.LastError, "version") && *st.AppliedGeneration == g3
	})
	if _, err := cli.Delete(context.Background(), store.DesiredKey("x")); err != nil {
		t.Fatal(err)
	}
	report := func() Status {
		resp, err := cli.Get(context.Background(), store.StatusKey("x"))
		if err != nil || len(resp.Kvs) != 1 {
			return Status{}
		}
		var rep Status
		json.Unmarshal(resp.Kvs[0].Value, &rep)
		return rep
	}
	var gone time.Time
	w.until("x reports that its desired state is gone", func() bool {
		rep := report()
		gone = rep.Time
		return rep.DesiredGeneration == 0 && strings.Contains(rep.LastError, "no desired state")
	})
	w.until("a drift check after that", func() bool {
		rep := report()
		return rep.DriftChecked != nil && rep.DriftChecked.After(gone)
	})
	if rep := report(); !strings.Contains(rep.LastError, "no desired state") {
		t.Errorf("a drift check cleared the report of a deleted desired state: %+v", rep)
	}
	if !has("fd00:98::/64", "-6", "route") {
		t.Error("deleting the desired state removed what was applied")
	}
}

// TestEtcdRestart: the agent outlives a restart of etcd (the controller's
// embedded one, on the same data and ports): its watch and lease come
// back, and a generation written afterwards is applied and reported.
func TestEtcdRestart(t *testing.T) {
	w := newWorld(t)
	ns, err := netns.Create(w.prefix + "x")
	if err != nil {
		t.Fatal(err)
	}
	w.nss["x"] = ns
	cfg := store.Config{DataDir: t.TempDir(), ClientURL: freeURL(t), PeerURL: freeURL(t)}
	cfg.LogFile = filepath.Join(cfg.DataDir, "etcd.log")
	st, err := store.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { st.Close() }()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cfg.ClientURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	w.agentCli = cli
	put := func(addrs ...string) int64 {
		t.Helper()
		n := state.Node{Name: "x", Role: "router", Interfaces: []state.Interface{}}
		for _, a := range addrs {
			n.Loopback = append(n.Loopback, netip.MustParsePrefix(a))
		}
		raw, err := json.Marshal(state.Network{Version: state.FormatVersion, Name: "t", Nodes: []state.Node{n}, Links: []state.Link{}})
		if err != nil {
			t.Fatal(err)
		}
		var rev int64
		w.until("etcd takes a write", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			resp, err := cli.Put(ctx, store.DesiredKey("x"), string(raw))
			if err == nil {
				rev = resp.Header.Revision
			}
			return err == nil
		})
		return rev
	}
	applied := func(gen int64) func() bool {
		return func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			resp, err := cli.Get(ctx, store.StatusKey("x"))
			if err != nil || len(resp.Kvs) != 1 {
				return false
			}
			var rep Status
			return json.Unmarshal(resp.Kvs[0].Value, &rep) == nil && rep.AppliedGeneration != nil && *rep.AppliedGeneration == gen
		}
	}
	g1 := put("fd00:99::1/128")
	w.start("x")
	defer w.stop("x") // before cli closes
	w.until("x applies the first generation", applied(g1))

	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = store.Open(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	g2 := put("fd00:99::1/128", "fd00:99::2/128")
	w.until("x applies the generation written after etcd restarted, and reports it", applied(g2))
	out, err := ns.Run(context.Background(), "ip", "-6", "addr", "show", "dev", "lo")
	if err != nil || !strings.Contains(out, "fd00:99::2") {
		t.Errorf("x after etcd restarted: %v\n%s", err, out)
	}
}

// noDrift fails the test unless node is as its whole desired state (the
// controller's join of its base and parts) says.
func (w *world) noDrift(node string) {
	w.t.Helper()
	var ns controller.NodeState
	w.do("GET", "/v1/nodes/"+node+"/desired", "", &ns)
	drift, err := apply.Check(context.Background(), w.nss[node], ns.State.Nodes[0])
	if err != nil || len(drift) > 0 {
		w.t.Errorf("%s differs from its desired state: %v %v", node, drift, err)
	}
}
