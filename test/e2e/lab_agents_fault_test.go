package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/controller"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/state"
)

// agentLab is a `lab up --agents` lab whose processes (srchain serve with
// its embedded etcd, one srchain agent per node) a test kills with
// SIGKILL and restarts with the same command line, as a crash and a
// supervisor would.
type agentLab struct {
	t    *testing.T
	name string
	opts lab.Options
	rec  *lab.Record
	cl   *controller.Client
	doc  []byte // the spec as first submitted (JSON)
	// serve and the agents by node: their PID and command line.
	serve  *labProc
	agents map[string]*labProc
	log    *os.File // where restarted processes write
}

type labProc struct {
	pid  int
	args []string
	// done closes when a process this test started has been reaped
	// (nil for those `lab up` started: init reaps them).
	done chan struct{}
}

// upAgentLab brings the quickstart up with --agents, named by tag.
func upAgentLab(t *testing.T, tag string) *agentLab {
	t.Helper()
	requireRoot(t)
	if srchainBin == "" {
		t.Fatal("srchain binary not built (see the TestMain output)")
	}
	file := renamedSpec(t, "quickstart.yaml", tag)
	l := &agentLab{t: t, name: labName(tag), opts: lab.Options{StateDir: t.TempDir()}, agents: map[string]*labProc{}}
	cleanupCLILab(t, l.name, l.opts.StateDir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, srchainBin, "lab", "up", "--agents", "--state-dir", l.opts.StateDir, file).CombinedOutput(); err != nil {
		t.Fatalf("lab up --agents: %v\n%s", err, out)
	}
	rec, err := lab.Load(l.name, l.opts)
	if err != nil {
		t.Fatal(err)
	}
	l.rec = rec
	for _, p := range rec.Procs {
		args := cmdline(p.PID)
		switch {
		case len(args) > 1 && args[1] == "serve":
			l.serve = &labProc{pid: p.PID, args: args}
		case len(args) > 1 && args[1] == "agent":
			i := slices.Index(args, "--node")
			l.agents[args[i+1]] = &labProc{pid: p.PID, args: args}
		}
	}
	if l.serve == nil || len(l.agents) != len(rec.Namespaces) {
		t.Fatalf("processes of the lab: serve %v, agents %v", l.serve, l.agents)
	}
	dir := lab.AgentsDir(l.opts, l.name)
	token, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	listen := l.serve.args[slices.Index(l.serve.args, "--listen")+1]
	l.cl = &controller.Client{Server: "http://" + listen, Token: strings.TrimSpace(string(token))}
	if l.doc, err = os.ReadFile(file); err != nil {
		t.Fatal(err)
	}
	if l.doc, err = controller.DocFromYAML(l.doc); err != nil {
		t.Fatal(err)
	}
	if l.log, err = os.OpenFile(filepath.Join(dir, "restarted.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.log.Close() })
	return l
}

// cmdline is the command line of pid.
func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// kill ends p with SIGKILL (by its PID: a process of this lab) and waits
// until it is gone.
func (l *agentLab) kill(p *labProc) {
	l.t.Helper()
	if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil {
		// Gone already: an unplanned exit (Errorf: it may be called
		// from a goroutine of the test).
		l.t.Errorf("kill %d (%s): %v: the process ended before", p.pid, strings.Join(p.args[1:2], ""), err)
		if p.done != nil {
			<-p.done
		}
		return
	}
	l.until(fmt.Sprintf("process %d to end", p.pid), 10*time.Second, func() bool { return !running(p.pid) })
	if p.done != nil {
		<-p.done
	}
}

// restart starts p's command line again (a process of its own session,
// recorded in the lab so that lab down stops it).
func (l *agentLab) restart(p *labProc) {
	l.t.Helper()
	cmd := exec.Command(p.args[0], p.args[1:]...)
	cmd.Stdout, cmd.Stderr = l.log, l.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	p.pid, p.done = cmd.Process.Pid, make(chan struct{})
	done := p.done
	go func() { cmd.Wait(); close(done) }()
	if err := lab.AddPID(l.name, p.pid, l.opts); err != nil {
		l.t.Fatal(err)
	}
}

func (l *agentLab) until(what string, limit time.Duration, cond func() bool) {
	l.t.Helper()
	end := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(end) {
			l.t.Fatalf("after %v: waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (l *agentLab) do(method, path string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return l.cl.Do(ctx, method, path, body, out)
}

func (l *agentLab) must(method, path string, body []byte, out any) {
	l.t.Helper()
	if err := l.do(method, path, body, out); err != nil {
		l.t.Fatalf("%s %s: %v", method, path, err)
	}
}

// agentReport is the part of the agents' status the tests read.
type agentReport struct {
	Started   time.Time `json:"started"`
	Applies   int       `json:"applies"`
	Changes   int       `json:"changes"`
	LastError string    `json:"last_error"`
}

// inSync waits until node's agent, started after since, applied its
// desired generation without error.
func (l *agentLab) inSync(node string, since time.Time, limit time.Duration) agentReport {
	l.t.Helper()
	var rep agentReport
	l.until(node+"'s agent to apply its desired generation", limit, func() bool {
		var st controller.Status
		if l.do("GET", "/v1/nodes/"+node+"/status", nil, &st) != nil || st.Report == nil {
			return false
		}
		if json.Unmarshal(st.Report, &rep) != nil || rep.Started.Before(since) {
			return false
		}
		if st.LastError != "" {
			l.t.Fatalf("agent %s: %s", node, st.LastError)
		}
		return st.InSync
	})
	return rep
}

// asDesired fails the test unless node holds its desired state (as the
// controller joins it) and nothing more of srchain's: routes, SIDs,
// rules and addresses (apply.CheckOwned), programs and pins
// (apply.CheckPrograms), read from the kernel.
func (l *agentLab) asDesired(node string) {
	l.t.Helper()
	l.holds(node, l.desired(node))
}

// desired is node's desired state as the controller joins it.
func (l *agentLab) desired(node string) state.Node {
	l.t.Helper()
	var ns controller.NodeState
	l.must("GET", "/v1/nodes/"+node+"/desired", nil, &ns)
	return ns.State.Nodes[0]
}

// holds fails the test unless node holds want and nothing more of
// srchain's (see asDesired).
func (l *agentLab) holds(node string, want state.Node) {
	l.t.Helper()
	h, err := lab.Open(l.name, node, l.opts)
	if err != nil {
		l.t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	drift, err := apply.CheckOwned(ctx, h, want)
	if err == nil {
		var pd []string
		pd, err = apply.CheckPrograms(ctx, h, want)
		drift = append(drift, pd...)
	}
	if err != nil || len(drift) > 0 {
		if len(drift) > 10 {
			drift = append(drift[:10], fmt.Sprintf("... %d more", len(drift)-10))
		}
		l.t.Errorf("%s is not as desired: %v\n%s", node, err, strings.Join(drift, "\n"))
	}
}

// benchChains is a PATCH body of n chains of the benchmark's shape
// (internal/controller/bench_test.go), each a 5-tuple chain: one policy
// route in a table of its own and one rule on r1.
func benchChains(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"chains":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"c%d","ingress":"r1","egress":"r3","match":{"dst":["fc00:a4::/64"],"proto":"udp","dport":"%d"},"nfs":["fw"]}`, i, 1000+i)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// portRules counts r1's policy rules on a destination port (the bench
// chains' only: the quickstart's chains match destinations alone).
func (l *agentLab) portRules(node string) int {
	l.t.Helper()
	h, err := lab.Open(l.name, node, l.opts)
	if err != nil {
		l.t.Fatal(err)
	}
	defer h.Close()
	out, err := h.Run(context.Background(), "ip", "-6", "rule")
	if err != nil {
		l.t.Fatal(err)
	}
	return strings.Count(out, "dport")
}

// TestAgentsKilledMidApply (issue 38 item 3): r1's agent is killed with
// SIGKILL at random points of a 3,000-chain apply; then the spec is put
// back as it was (or left as patched), and the agent restarted. The node
// then holds exactly its desired state: no route, rule or SID of the
// interrupted apply is left (before the fix: 3,000 routes and ~1,260
// rules were, with the agent reporting in sync and changes=0).
func TestAgentsKilledMidApply(t *testing.T) {
	l := upAgentLab(t, "k")
	r1 := l.agents["r1"]
	const n = 3000
	body := benchChains(n)

	// An uninterrupted apply first, to know how long one takes.
	t0 := time.Now()
	l.must("PATCH", "/v1/spec", body, nil)
	l.inSync("r1", time.Time{}, 2*time.Minute)
	took := time.Since(t0)
	if got := l.portRules("r1"); got != n {
		t.Fatalf("r1 after applying %d chains: %d port rules", n, got)
	}
	l.must("PUT", "/v1/spec", l.doc, nil)
	l.inSync("r1", time.Time{}, 2*time.Minute)
	t.Logf("PATCH of %d chains to applied on r1: %v", n, took.Round(time.Millisecond))

	for seed := uint64(1); seed <= 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 38))
		// From the PATCH's answer to a little past the end of the apply.
		delay := time.Duration(rng.Float64() * 1.1 * float64(took))
		restore := rng.IntN(2) == 0
		l.must("PATCH", "/v1/spec", body, nil)
		time.Sleep(delay)
		l.kill(r1)
		mid := l.portRules("r1")
		if restore {
			l.must("PUT", "/v1/spec", l.doc, nil)
		}
		since := time.Now()
		l.restart(r1)
		rep := l.inSync("r1", since, 2*time.Minute)
		want := 0
		if !restore {
			want = n
		}
		got := l.portRules("r1")
		t.Logf("seed %d: killed %v after the PATCH, %d of %d rules in place; spec restored %v; restarted agent: %d changes; %d rules now",
			seed, delay.Round(time.Millisecond), mid, n, restore, rep.Changes, got)
		if got != want {
			t.Errorf("seed %d: r1 holds %d port rules, want %d", seed, got, want)
		}
		l.asDesired("r1")
		// Removed once the state file names the result (just after the
		// status is reported).
		intent := filepath.Join(lab.AgentsDir(l.opts, l.name), "agent", "r1@"+l.rec.Namespaces["r1"]+".json.intent")
		l.until("the intent record to go once the apply ended", 10*time.Second, func() bool {
			_, err := os.Stat(intent)
			return os.IsNotExist(err)
		})
		if !restore {
			l.must("PUT", "/v1/spec", l.doc, nil)
			l.inSync("r1", since, 2*time.Minute)
		}
	}
	for node := range l.agents {
		l.asDesired(node)
	}
}

// TestAgentsStoreDown: the controller and its embedded etcd are killed
// (SIGKILL) and stay away longer than the agents' lease; the agents keep
// the nodes as they are and running (before the fix: SIGPIPE ended them
// all with status 0), retry with backoff, and once serve is back resync
// to a spec changed then.
func TestAgentsStoreDown(t *testing.T) {
	l := upAgentLab(t, "s")
	desired := map[string]state.Node{}
	for node := range l.agents {
		desired[node] = l.desired(node)
	}
	since := time.Now()
	l.kill(l.serve)
	// Longer than the lease TTL (10 s): the agents' leases expire.
	time.Sleep(12 * time.Second)
	for node, p := range l.agents {
		if !running(p.pid) {
			t.Fatalf("agent %s (pid %d) ended while etcd was away", node, p.pid)
		}
		l.holds(node, desired[node])
	}
	l.restart(l.serve)
	l.until("the controller to answer again", time.Minute, func() bool { return l.do("GET", "/v1/spec", nil, nil) == nil })
	l.must("PUT", "/v1/chains/web4", []byte(`{"ingress":"r1","egress":"r3","match":{"dst":["10.0.4.0/25"]},"nfs":["fw"]}`), nil)
	for node := range l.agents {
		l.inSync(node, time.Time{}, time.Minute)
		l.asDesired(node)
	}
	h, err := lab.Open(l.name, "r1", l.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if out, _ := h.Run(context.Background(), "ip", "-4", "route"); !strings.Contains(out, "10.0.4.0/25") {
		t.Errorf("r1 did not take the chain changed after etcd came back:\n%s", out)
	}
	for node, p := range l.agents {
		if !running(p.pid) {
			t.Errorf("agent %s (pid %d) ended", node, p.pid)
		}
	}
	t.Logf("etcd away 12 s, agents resynced %v after the kill", time.Since(since).Round(time.Millisecond))
}
