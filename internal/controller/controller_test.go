package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/store"
)

const testToken = "test-token-0123456789"

// freeURL returns an http URL on a loopback port free right now.
func freeURL(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}

// openStore starts an embedded etcd in dir on fresh ports.
func openStore(t testing.TB, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{
		DataDir: dir, ClientURL: freeURL(t), PeerURL: freeURL(t),
		// etcd logs a closed listener as an error at every shutdown.
		LogFile: filepath.Join(dir, "etcd.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

type env struct {
	t   testing.TB
	st  *store.Store
	c   *Controller
	srv *httptest.Server
	cl  *Client
}

// newEnv runs the API on a fresh embedded etcd; everything is closed and
// removed at the end of the test.
func newEnv(t testing.TB) *env {
	st := openStore(t, t.TempDir())
	t.Cleanup(func() { st.Close() })
	return envOn(t, st)
}

func envOn(t testing.TB, st *store.Store) *env {
	c := New(st)
	srv := httptest.NewServer(c.Handler(testToken))
	t.Cleanup(srv.Close)
	return &env{t: t, st: st, c: c, srv: srv, cl: &Client{Server: srv.URL, Token: testToken}}
}

func (e *env) do(method, path, body string, out any) error {
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	return e.cl.Do(context.Background(), method, path, b, out)
}

// must fails the test on an error answer.
func (e *env) must(method, path, body string, out any) {
	e.t.Helper()
	if err := e.do(method, path, body, out); err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
}

// putExample stores examples/file as the whole spec.
func (e *env) putExample(file string) {
	e.t.Helper()
	data, err := os.ReadFile("../../examples/" + file)
	if err != nil {
		e.t.Fatal(err)
	}
	doc, err := DocFromYAML(data)
	if err != nil {
		e.t.Fatal(err)
	}
	e.must("PUT", "/v1/spec", string(doc), nil)
}

// status returns the HTTP status of an answer (200 class as 200).
func status(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	if err == nil {
		return 200
	}
	return -1
}

func quickstart(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := DocFromYAML(data)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (e *env) generations() map[string]int64 {
	e.t.Helper()
	snap, err := e.st.Read(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	g := map[string]int64{}
	for n, d := range snap.Desired {
		g[n] = d.Generation
	}
	return g
}

// checkConsistent: the stored node states are exactly what compiling the
// stored spec gives, so no write left half a change.
func (e *env) checkConsistent() {
	e.t.Helper()
	snap, err := e.st.Read(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	doc, err := decodeStored(snap.Spec, snap.Chains)
	if err != nil {
		e.t.Fatal(err)
	}
	whole, err := doc.encode()
	if err != nil {
		e.t.Fatal(err)
	}
	want, _, err := build(doc, whole, snap)
	if err != nil {
		e.t.Fatalf("stored spec does not build: %v", err)
	}
	if len(want) != len(snap.Desired) {
		e.t.Errorf("stored %d node states, spec has %d nodes", len(snap.Desired), len(want))
	}
	for n, st := range want {
		d := snap.Desired[n]
		if string(d.State) != string(st.base) || len(d.Parts) != len(st.parts) {
			e.t.Errorf("node %s: stored state differs from the compiled spec", n)
			continue
		}
		for chain, b := range st.parts {
			if string(d.Parts[chain]) != string(b) {
				e.t.Errorf("node %s: stored part of chain %s differs from the compiled spec", n, chain)
			}
		}
	}
}

func TestUnauthorized(t *testing.T) {
	e := newEnv(t)
	e.must("PUT", "/v1/spec", quickstart(t), nil)
	for _, r := range e.c.Routes() {
		path := strings.ReplaceAll(r.Path, "{name}", "r1")
		for _, auth := range []string{"", "Bearer ", "Bearer wrong", "Basic " + testToken, "Bearer " + testToken + "x", testToken} {
			req, _ := http.NewRequest(r.Method, e.srv.URL+path, strings.NewReader(`{"name":"x"}`))
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s with Authorization %q: %d, want 401", r.Method, path, auth, resp.StatusCode)
			}
			if resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s: 401 without WWW-Authenticate", r.Method, path)
			}
		}
	}
	// The scheme is case-insensitive (RFC 7235 section 2.1).
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/spec", nil)
	req.Header.Set("Authorization", "bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("lower-case bearer scheme: %d, want 200", resp.StatusCode)
	}
	// The refused writes stored nothing.
	var chains struct{ Items []json.RawMessage }
	e.must("GET", "/v1/chains", "", &chains)
	if len(chains.Items) != 2 {
		t.Errorf("after refused writes: %d chains, want the 2 of quickstart", len(chains.Items))
	}
}

func TestCRUD(t *testing.T) {
	e := newEnv(t)
	var list struct{ Items []map[string]any }
	e.must("GET", "/v1/chains", "", &list)
	if len(list.Items) != 0 {
		t.Fatalf("fresh controller has chains: %v", list.Items)
	}
	var res Result
	e.must("PUT", "/v1/spec", quickstart(t), &res)
	if want := []string{"h1", "h2", "r1", "r2", "r3"}; !slices.Equal(res.Changed, want) {
		t.Errorf("changed = %v, want %v", res.Changed, want)
	}
	for kind, n := range map[string]int{"nodes": 5, "links": 4, "nfs": 1, "chains": 2} {
		e.must("GET", "/v1/"+kind, "", &list)
		if len(list.Items) != n {
			t.Errorf("GET /v1/%s: %d items, want %d", kind, len(list.Items), n)
		}
	}
	// An unnamed link is known by its endpoints.
	e.must("GET", "/v1/links/h1:eth0,r1:eth0", "", nil)

	chain := `{"name":"web6b","ingress":"r1","egress":"r3","match":{"dst":["fc00:a4::/64"],"proto":"udp"},"nfs":["fw"]}`
	e.must("POST", "/v1/chains", chain, nil)
	if err := e.do("POST", "/v1/chains", chain, nil); status(err) != http.StatusConflict {
		t.Errorf("POST of an existing chain: %v, want 409", err)
	}
	var got map[string]any
	e.must("GET", "/v1/chains/web6b", "", &got)
	if got["ingress"] != "r1" || got["match"].(map[string]any)["proto"] != "udp" {
		t.Errorf("GET /v1/chains/web6b = %v", got)
	}
	// PUT replaces; a body without a name takes the path's.
	e.must("PUT", "/v1/chains/web6b", `{"ingress":"r1","egress":"r3","match":{"dst":["fc00:a4::/64"],"proto":"tcp"},"nfs":["fw"]}`, nil)
	e.must("GET", "/v1/chains/web6b", "", &got)
	if got["match"].(map[string]any)["proto"] != "tcp" || got["name"] != "web6b" {
		t.Errorf("after PUT: %v", got)
	}
	if err := e.do("PUT", "/v1/chains/other", chain, nil); status(err) != http.StatusBadRequest {
		t.Errorf("PUT with a body named differently from the path: %v, want 400", err)
	}
	e.must("DELETE", "/v1/chains/web6b", "", nil)
	if err := e.do("GET", "/v1/chains/web6b", "", nil); status(err) != http.StatusNotFound {
		t.Errorf("GET after DELETE: %v, want 404", err)
	}
	if err := e.do("DELETE", "/v1/chains/web6b", "", nil); status(err) != http.StatusNotFound {
		t.Errorf("second DELETE: %v, want 404", err)
	}
	for _, bad := range []string{`[1]`, `not json`, `{"ingress":"r1"}`, ``} {
		if err := e.do("POST", "/v1/chains", bad, nil); status(err) != http.StatusBadRequest {
			t.Errorf("POST %q: %v, want 400", bad, err)
		}
	}

	var ns NodeState
	e.must("GET", "/v1/nodes/r1/desired", "", &ns)
	if ns.Node != "r1" || ns.Generation == 0 || len(ns.State.Nodes) != 1 || ns.State.Nodes[0].Name != "r1" {
		t.Errorf("desired of r1: %+v", ns)
	}
	if err := ns.State.CheckVersion(); err != nil {
		t.Error(err)
	}
	var st Status
	e.must("GET", "/v1/nodes/r1/status", "", &st)
	if st.DesiredGeneration != ns.Generation || st.AppliedGeneration != nil || st.Agent != "unknown" {
		t.Errorf("status of r1 without agents: %+v", st)
	}
	if err := e.do("GET", "/v1/nodes/nope/desired", "", nil); status(err) != http.StatusNotFound {
		t.Errorf("desired of an unknown node: %v, want 404", err)
	}

	// PATCH merges; PUT of an empty spec removes everything.
	e.must("PATCH", "/v1/spec", `{"chains":[`+chain+`]}`, nil)
	e.must("GET", "/v1/chains", "", &list)
	if len(list.Items) != 3 {
		t.Errorf("after PATCH: %d chains, want 3", len(list.Items))
	}
	e.must("PUT", "/v1/spec", `{}`, &res)
	if len(res.Removed) != 5 || len(e.generations()) != 0 {
		t.Errorf("PUT {}: removed %v, left %v", res.Removed, e.generations())
	}
	e.checkConsistent()
}

func TestValidationErrors(t *testing.T) {
	e := newEnv(t)
	e.must("PUT", "/v1/spec", quickstart(t), nil)
	var before json.RawMessage
	e.must("GET", "/v1/spec", "", &before)
	gens := e.generations()

	err := e.do("POST", "/v1/chains", `{"name":"bad","ingress":"r9","egress":"r3","match":{"dst":["10.9.0.0/24"]},"nfs":["fw","nope"],"colour":"red"}`, nil)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity {
		t.Fatalf("invalid chain: %v, want 422", err)
	}
	want := map[string]bool{"chains[2].ingress": false, "chains[2].nfs[1]": false, "chains[2].colour": false}
	for _, p := range ae.Body.Problems {
		if _, ok := want[p.Path]; ok {
			want[p.Path] = true
			if p.Object != "chains/bad" {
				t.Errorf("problem at %s: object %q, want chains/bad", p.Path, p.Object)
			}
		}
	}
	for path, seen := range want {
		if !seen {
			t.Errorf("no problem reported at %s; got %+v", path, ae.Body.Problems)
		}
	}

	// Deleting an NF a chain uses makes the spec invalid too.
	err = e.do("DELETE", "/v1/nfs/fw", "", nil)
	if !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity || len(ae.Body.Problems) < 2 {
		t.Fatalf("deleting a used NF: %v, want 422 naming both chains", err)
	}
	for _, p := range ae.Body.Problems {
		if !strings.HasPrefix(p.Path, "chains[") || !strings.HasPrefix(p.Object, "chains/web") {
			t.Errorf("problem %+v, want one per chain using fw", p)
		}
	}

	var after json.RawMessage
	e.must("GET", "/v1/spec", "", &after)
	if string(before) != string(after) {
		t.Errorf("refused writes changed the spec")
	}
	if g := e.generations(); !mapsEqual(g, gens) {
		t.Errorf("refused writes changed generations: %v -> %v", gens, g)
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestGenerationOnlyForChangedNodes: changing one chain's classifier
// moves the generation of its ingress node only.
func TestGenerationOnlyForChangedNodes(t *testing.T) {
	e := newEnv(t)
	e.must("PUT", "/v1/spec", quickstart(t), nil)
	before := e.generations()

	var res Result
	e.must("PUT", "/v1/chains/web6", `{"ingress":"r1","egress":"r3","match":{"dst":["fc00:a4::/64"],"proto":"tcp","dport":"80"},"nfs":["fw"]}`, &res)
	after := e.generations()
	if !slices.Equal(res.Changed, []string{"r1"}) {
		t.Errorf("changed = %v, want [r1]", res.Changed)
	}
	for n, g := range after {
		if moved := g != before[n]; moved != (n == "r1") {
			t.Errorf("node %s: generation %d -> %d", n, before[n], g)
		}
	}
	if after["r1"] <= before["r1"] {
		t.Errorf("r1's generation went %d -> %d, want up", before["r1"], after["r1"])
	}

	// The same write again changes nothing.
	e.must("PUT", "/v1/chains/web6", `{"ingress":"r1","egress":"r3","match":{"dst":["fc00:a4::/64"],"proto":"tcp","dport":"80"},"nfs":["fw"]}`, &res)
	if len(res.Changed) != 0 || !mapsEqual(e.generations(), after) {
		t.Errorf("identical write changed %v", res.Changed)
	}
	e.checkConsistent()
}

// TestConcurrentWriters: two controllers on one etcd (so their writes
// race in etcd, not only on a mutex) accept every write once, and the
// stored states match the stored spec.
func TestConcurrentWriters(t *testing.T) {
	a := newEnv(t)
	b := envOn(t, a.st)
	a.must("PUT", "/v1/spec", quickstart(t), nil)

	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		e := a
		if i%2 == 1 {
			e = b
		}
		wg.Go(func() {
			body := fmt.Sprintf(`{"name":"c%d","ingress":"r1","egress":"r3","match":{"dst":["fc00:a4::/64"],"proto":"udp","dport":"%d"},"nfs":["fw"]}`, i, 1000+i)
			errs <- e.do("POST", "/v1/chains", body, nil)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	var list struct{ Items []json.RawMessage }
	a.must("GET", "/v1/chains", "", &list)
	if len(list.Items) != n+2 {
		t.Errorf("%d chains, want %d", len(list.Items), n+2)
	}
	a.checkConsistent()

	// Two replaces of one chain built on the same revision: with
	// If-Match, exactly one wins and the other gets 409.
	resp, err := http.NewRequest("GET", a.srv.URL+"/v1/spec", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Header.Set("Authorization", "Bearer "+testToken)
	r, err := http.DefaultClient.Do(resp)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	etag := r.Header.Get("ETag")
	codes := make(chan int, 2)
	for i, e := range []*env{a, b} {
		wg.Go(func() {
			body := fmt.Sprintf(`{"ingress":"r1","egress":"r3","match":{"dst":["fc00:a4::/64"],"proto":"udp","dport":"%d"},"nfs":["fw"]}`, 2000+i)
			req, _ := http.NewRequest("PUT", e.srv.URL+"/v1/chains/c0", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+testToken)
			req.Header.Set("If-Match", etag)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	wg.Wait()
	close(codes)
	var got []int
	for c := range codes {
		got = append(got, c)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int{200, 409}) {
		t.Errorf("racing If-Match writes answered %v, want [200 409]", got)
	}
	a.checkConsistent()
}

// TestRestartKeepsData: a controller on the same data directory after a
// restart serves the same spec and generations.
func TestRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	e := envOn(t, st)
	e.must("PUT", "/v1/spec", quickstart(t), nil)
	var spec1 json.RawMessage
	e.must("GET", "/v1/spec", "", &spec1)
	gens := e.generations()
	e.srv.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st2 := openStore(t, dir)
	t.Cleanup(func() { st2.Close() })
	e2 := envOn(t, st2)
	var spec2 json.RawMessage
	e2.must("GET", "/v1/spec", "", &spec2)
	if string(spec1) != string(spec2) {
		t.Errorf("spec after restart differs")
	}
	if g := e2.generations(); !mapsEqual(g, gens) {
		t.Errorf("generations after restart %v, want %v", g, gens)
	}
	var ns NodeState
	e2.must("GET", "/v1/nodes/r2/desired", "", &ns)
}

// TestSameStateAsCompiler: the controller stores what `srchain plan`
// shows for the same file (modulo lab probes, which do not compile).
func TestSameStateAsCompiler(t *testing.T) {
	e := newEnv(t)
	e.must("PUT", "/v1/spec", quickstart(t), nil)
	s, err := spec.Load("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	net, err := compile.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range net.Nodes {
		var ns NodeState
		e.must("GET", "/v1/nodes/"+n.Name+"/desired", "", &ns)
		n.Digest = "" // not stored (controller.encodeNode)
		got, _ := json.Marshal(ns.State.Nodes[0])
		if want, _ := json.Marshal(n); string(got) != string(want) {
			t.Errorf("node %s: stored %s, compiler gives %s", n.Name, got, want)
		}
	}
}

// TestTokenNeverLogged: the request log (debug level) and error logs
// carry no token, whether right or wrong.
func TestTokenNeverLogged(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })

	e := newEnv(t)
	e.must("PUT", "/v1/spec", quickstart(t), nil)
	e.do("POST", "/v1/chains", `{"name":"bad","ingress":"r9"}`, nil)
	wrong := &Client{Server: e.srv.URL, Token: "wrong-token-value"}
	wrong.Do(context.Background(), "GET", "/v1/spec", nil, nil)

	mu.Lock()
	defer mu.Unlock()
	log := buf.String()
	if !strings.Contains(log, "path=/v1/spec") {
		t.Fatalf("request log missing; got:\n%s", log)
	}
	for _, tok := range []string{testToken, "wrong-token-value"} {
		if strings.Contains(log, tok) {
			t.Errorf("log contains a token:\n%s", log)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestWatcherSeesWholeWrites: an etcd watcher (what agents will be) gets
// the spec and the changed node states of one write in one response at
// one revision, never half a change.
func TestWatcherSeesWholeWrites(t *testing.T) {
	e := newEnv(t)
	e.must("PUT", "/v1/spec", quickstart(t), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wch := e.st.Client().Watch(ctx, store.Prefix, clientv3.WithPrefix())

	var res Result
	e.must("PUT", "/v1/chains/web4", `{"ingress":"r1","egress":"r3","match":{"dst":["10.0.4.0/25"]},"nfs":["fw"]}`, &res)
	wr := <-wch
	if err := wr.Err(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, ev := range wr.Events {
		keys = append(keys, string(ev.Kv.Key))
		if ev.Kv.ModRevision != res.Revision {
			t.Errorf("%s at revision %d, write was %d", ev.Kv.Key, ev.Kv.ModRevision, res.Revision)
		}
	}
	slices.Sort(keys)
	want := []string{store.SpecKey}
	var doc Doc
	e.must("GET", "/v1/spec", "", &doc)
	if i := doc.find(KindChains, "web4"); i >= 0 {
		want = append(want, store.SpecChainKey(i))
	}
	for _, n := range res.Changed {
		want = append(want, store.DesiredKey(n), store.PartsPrefix(n)+"web4")
	}
	slices.Sort(want)
	if len(res.Changed) == 0 || !slices.Equal(keys, want) {
		t.Errorf("one write gave events %v, want %v", keys, want)
	}
}

// TestTooLargeForEtcd: a write over the etcd cluster's request limit is
// answered 413 with the reason (not a bare 500) and stores nothing.
func TestTooLargeForEtcd(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(context.Background(), store.Config{
		DataDir: dir, ClientURL: freeURL(t), PeerURL: freeURL(t),
		LogFile:         filepath.Join(dir, "etcd.log"),
		MaxRequestBytes: 64 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := envOn(t, st)
	e.must("PUT", "/v1/spec", quickstart(t), nil)
	gens := e.generations()

	chains := make([]string, 1000)
	for i := range chains {
		chains[i] = benchChain(i)
	}
	err = e.do("PATCH", "/v1/spec", `{"chains":[`+strings.Join(chains, ",")+`]}`, nil)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusRequestEntityTooLarge || !strings.Contains(ae.Body.Error, "max-request-bytes") {
		t.Fatalf("PATCH over etcd's limit: %v, want 413 naming the limit", err)
	}
	var list struct{ Items []json.RawMessage }
	e.must("GET", "/v1/chains", "", &list)
	if len(list.Items) != 2 || !mapsEqual(e.generations(), gens) {
		t.Errorf("refused write stored something: %d chains", len(list.Items))
	}
}

// TestOPoTKeysKept: a write that does not touch an OPoT chain's nodes
// keeps the chain's keys (every compile draws new ones; the controller
// carries the stored ones over, compile.KeepOPoTKeys): packets in flight
// keep verifying, and nodes whose state did not change keep their
// generation.
func TestOPoTKeysKept(t *testing.T) {
	e := newEnv(t)
	e.putExample("opot-testbed.yaml")
	secrets := func() map[string]string {
		snap, err := e.st.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for n, d := range snap.Desired {
			var one state.Network
			if err := json.Unmarshal(d.State, &one); err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(one.Nodes[0].Secrets)
			out[n] = string(b)
		}
		return out
	}
	before, gens := secrets(), e.generations()
	if before["r2"] == "null" || before["r6"] == "null" {
		t.Fatalf("no OPoT secrets stored: %v", before)
	}
	// A chain r4 -> r5 through vnf5: r4 and r5 change, none of the OPoT
	// chain's nodes (r1, r2, r3, r6) does.
	var res Result
	e.must("POST", "/v1/chains", `{"name":"side","ingress":"r4","egress":"r5","match":{"dst":["fc00:99::/64"]},"nfs":["vnf5"]}`, &res)
	after, gens2 := secrets(), e.generations()
	for _, n := range []string{"r1", "r2", "r3", "r6"} {
		if after[n] != before[n] {
			t.Errorf("%s: OPoT keys changed by an unrelated write", n)
		}
		if gens2[n] != gens[n] {
			t.Errorf("%s: generation %d -> %d for an unrelated write", n, gens[n], gens2[n])
		}
	}
	if len(res.Changed) == 0 {
		t.Error("the write changed no node")
	}
	e.checkConsistent()
}

// TestSpecRoutingPools: the spec's routing and pools go through the API
// (PUT and PATCH) like its objects, so `lab up --agents` and `srchain
// apply` deploy examples/bgp.yaml and examples/flow-pool.yaml as written.
func TestSpecRoutingPools(t *testing.T) {
	e := newEnv(t)
	for _, f := range []string{"bgp.yaml", "flow-pool.yaml"} {
		data, err := os.ReadFile("../../examples/" + f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := DocFromYAML(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, method := range []string{"PUT", "PATCH"} {
			e.must("PUT", "/v1/spec", `{}`, nil)
			e.must(method, "/v1/spec", string(doc), nil)
			var got map[string]any
			e.must("GET", "/v1/spec", "", &got)
			switch f {
			case "bgp.yaml":
				if got["routing"] != "bgp" {
					t.Errorf("%s %s: routing %v, want bgp", method, f, got["routing"])
				}
			default:
				if pools, _ := got["pools"].([]any); len(pools) != 1 {
					t.Errorf("%s %s: pools %v", method, f, got["pools"])
				}
			}
		}
	}
}

// TestOldSpecLayout: a spec stored by a build that kept the chains in the
// spec document (no chain keys) reads as before, and the next write
// stores it in the new layout.
func TestOldSpecLayout(t *testing.T) {
	e := newEnv(t)
	var doc Doc
	if err := json.Unmarshal([]byte(quickstart(t)), &doc); err != nil {
		t.Fatal(err)
	}
	whole, err := doc.encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Commit(context.Background(), 0, store.Write{Spec: whole}); err != nil {
		t.Fatal(err)
	}
	var got Doc
	e.must("GET", "/v1/spec", "", &got)
	if len(got.Chains) == 0 || len(got.Chains) != len(doc.Chains) {
		t.Fatalf("old layout read back with %d chains, want %d", len(got.Chains), len(doc.Chains))
	}
	e.must("PUT", "/v1/chains/web9", `{"ingress":"r1","egress":"r3","match":{"dst":["fc00:a4::/64"],"proto":"udp","dport":"9"},"nfs":["fw"]}`, nil)
	snap, err := e.st.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	head, err := decodeDoc(snap.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(head.Chains) != 0 || len(snap.Chains) != len(doc.Chains)+1 {
		t.Errorf("after a write: %d chains in the document, %d keys; want 0 and %d", len(head.Chains), len(snap.Chains), len(doc.Chains)+1)
	}
	e.checkConsistent()
}
