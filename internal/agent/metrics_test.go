package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/srchain/srchain/internal/flowsetup"
	"github.com/srchain/srchain/internal/state"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/metrics"
	"github.com/srchain/srchain/internal/testutil"
)

// TestMetricsPrometheus: a real Prometheus (Debian's prometheus) scrapes
// r2's agent, whose NF fw is an eBPF End SID, and a query for the SID's
// packet counter returns exactly the echo requests sent through the chain
// (issue 12: "a query for a per-SID counter returns the traffic sent").
// The replies are not steered, so only requests cross the SID. r3's
// kernel End.DX4 SID counts them too (srchain_kernel_sid_packets_total).
func TestMetricsPrometheus(t *testing.T) {
	prom := testutil.RequireTool(t, "prometheus")
	w := newWorld(t)
	w.put()
	nodes := w.build()
	for _, n := range nodes {
		w.start(n)
	}
	w.inSync(nodes...)
	w.until("h1 pings 10.0.4.2 through the chain", func() bool { return w.ping("10.0.4.2") == nil })

	a := w.agents["r2"].agent
	var sid string
	for _, s := range a.Snapshot().Node.SIDs {
		if s.NF == "fw" {
			sid = s.SID.Addr().String()
		}
	}
	if sid == "" {
		t.Fatal("r2's applied state has no SID for fw")
	}
	metricsURL := serveMetrics(t, a)
	promURL := startPrometheus(t, prom, metricsURL)

	// The counter already holds the warm-up pings: read it from the
	// agent's endpoint, with no traffic in flight.
	series := fmt.Sprintf(`%s{nf="fw",node="r2",sid="%s"}`, metrics.NameSIDPackets, sid)
	t0 := time.Now()
	before := scrape(t, metricsURL, series)
	// r3 is on the kernel datapath: its End.DX4 SID (web4's
	// decapsulation) counts in the kernel (seg6local `count`), exported
	// as srchain_kernel_sid_packets_total.
	var dx4 string
	for _, s := range w.agents["r3"].agent.Snapshot().Node.SIDs {
		if s.Behavior == state.EndDX4 {
			dx4 = s.SID.Addr().String()
		}
	}
	if dx4 == "" {
		t.Fatal("r3's applied state has no End.DX4 SID")
	}
	r3URL := serveMetrics(t, w.agents["r3"].agent)
	kseries := fmt.Sprintf(`%s{nf="",node="r3",sid="%s"}`, metrics.NameKernelSIDPackets, dx4)
	kbefore := scrape(t, r3URL, kseries)
	// A number for docs/metrics.md, not an assertion.
	t.Logf("one scrape of r2's /metrics: %v", time.Since(t0))
	out, err := w.nss["h1"].Run(context.Background(), "ping", "-c", "50", "-i", "0.01", "-W", "1", "10.0.4.2")
	if err != nil {
		t.Fatalf("ping: %v\n%s", err, out)
	}
	sent, recv, err := pingSummary(out)
	if err != nil || sent != 50 || recv != sent {
		t.Fatalf("ping: %d sent, %d received (%v)", sent, recv, err)
	}
	if got := scrape(t, r3URL, kseries); got < kbefore+uint64(sent) {
		t.Errorf("%s = %d after %d echo requests, was %d", kseries, got, sent, kbefore)
	}
	want := before + uint64(sent)
	var got uint64
	w.until(fmt.Sprintf("Prometheus returns %s = %d", series, want), func() bool {
		v, ok := promQuery(t, promURL, series)
		got = v
		return ok && v == want
	})
	t.Logf("Prometheus: %s = %d (%d before, %d sent)", series, got, before, sent)
	if v, ok := promQuery(t, promURL, metrics.NameCollectionErrors+`{node="r2"}`); !ok || v != 0 {
		t.Errorf("collection errors = %d (present %v), want 0", v, ok)
	}
	if v, ok := promQuery(t, promURL, metrics.NameAgentUp+`{node="r2"}`); !ok || v != 1 {
		t.Errorf("agent up = %d (present %v), want 1", v, ok)
	}
}

// serveMetrics serves a's /metrics on a free loopback port.
func serveMetrics(t *testing.T, a *Agent) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", a.MetricsHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String() + "/metrics"
}

// startPrometheus runs prom with a temporary configuration and data
// directory, scraping target every second, on a free loopback port; it
// is ended by PID at cleanup.
func startPrometheus(t *testing.T, prom, target string) string {
	t.Helper()
	dir := t.TempDir()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: srchain
    metrics_path: %s
    static_configs: [{targets: [%q]}]
`, u.Path, u.Host)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeURL(t)[len("http://"):]
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})
	return "http://" + addr
}

var sample = regexp.MustCompile(`(?m)^(\S+) (\S+)$`)

// scrape reads series (as the text format prints it) from url.
func scrape(t *testing.T, url, series string) uint64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range sample.FindAllStringSubmatch(string(b), -1) {
		if m[1] == series {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatal(err)
			}
			return uint64(v)
		}
	}
	t.Fatalf("%s has no %s:\n%s", url, series, b)
	return 0
}

// promQuery runs an instant query through Prometheus's HTTP API; ok is
// false while it has no sample (not scraped yet, or not started).
func promQuery(t *testing.T, prom, query string) (v uint64, ok bool) {
	t.Helper()
	resp, err := http.Get(prom + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return 0, false // still starting
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, false // not ready yet: not JSON
	}
	if r.Status != "success" {
		t.Fatalf("query %s: %s", query, r.Error)
	}
	if len(r.Data.Result) != 1 {
		return 0, false
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("query %s: value %q: %v", query, s, err)
	}
	return uint64(f), true
}

// TestSnapshotFlows: the agent's snapshot carries its flow-setup counts
// while its applied node has an NF pool, and none otherwise.
func TestSnapshotFlows(t *testing.T) {
	a := &Agent{}
	cfg, _ := json.Marshal(state.IngressConfig{Chains: []state.IngressChain{{Name: "web6",
		Pool: &state.IngressPool{Name: "fw", NFs: []string{"fw1", "fw2"}}}}})
	pooled := &state.Node{Programs: []state.Program{{Kind: state.ProgramIngress, Config: cfg}}}
	a.flowStats.Observe(flowsetup.Setup{Chain: "web6", NF: "fw2", New: true, Sent: true})
	a.snap = metrics.Snapshot{Node: &state.Node{}}
	if s := a.Snapshot(); s.Flows != nil {
		t.Errorf("flows without a pool: %+v", s.Flows)
	}
	a.snap = metrics.Snapshot{Node: pooled}
	s := a.Snapshot()
	if s.Flows == nil || s.Flows.Setups[[2]string{"web6", "fw2"}] != 1 || s.Flows.Count != 1 {
		t.Errorf("flows with a pool: %+v", s.Flows)
	}
}
