package controller

// Tests of issue 38 (controller part): strict bodies, capped and linear
// error reports, 503 with the store down, 413, Location, 401 closing
// the connection, an unreadable agent status, the token file's checks.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/store"
)

// rawDo sends one request with the test token and returns the answer
// with its body read.
func (e *env) rawDo(method, path, body string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	// Bounded: a request that hangs (the store down, before) fails
	// the test instead of hanging it.
	resp, err := (&http.Client{Timeout: 90 * time.Second}).Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, b
}

// TestStrictBodies: every write endpoint takes exactly one JSON object:
// `null` (which wiped the spec with a 200), trailing data (ignored), and
// duplicate keys (accepted, where spec files refuse them) get a 400 and
// change nothing.
func TestStrictBodies(t *testing.T) {
	e := newEnv(t)
	e.must("PUT", "/v1/spec", quickstart(t), nil)
	var before json.RawMessage
	e.must("GET", "/v1/spec", "", &before)
	gens := e.generations()

	chain := `{"name":"web4","ingress":"r1","egress":"r3","match":{"dst":["10.0.4.0/24"]},"nfs":["fw"]}`
	bodies := []struct{ name, body string }{
		{"null", `null`},
		{"null with space", " null \n"},
		{"empty", ``},
		{"array", `[]`},
		{"string", `"x"`},
		{"number", `1`},
		{"trailing word", `{} x`},
		{"two objects", `{}{}`},
		{"comma and object", `{},{}`},
		{"name then open brace", "{\"name\":\"x1\"}\n\n{"},
		{"object then null", `{} null`},
		{"valid then garbage", chain + ` ]`},
		{"unterminated", `{"name":"x1"`},
		{"duplicate key", `{"name":"a","name":"b"}`},
		{"duplicate escaped key", `{"name":"a","n\u0061me":"b"}`},
		{"nested duplicate", `{"name":"web4","ingress":"r1","egress":"r3","match":{"dst":["10.0.4.0/24"],"dst":["10.9.0.0/24"]},"nfs":["fw"]}`},
		{"duplicate in list item", `{"nodes":[{"name":"r1","role":"router","role":"host"}]}`},
	}
	endpoints := []struct{ method, path string }{
		{"PUT", "/v1/spec"},
		{"PATCH", "/v1/spec"},
		{"POST", "/v1/chains"},
		{"PUT", "/v1/chains/web4"},
		{"POST", "/v1/nodes"},
		{"PUT", "/v1/links/x"},
		{"POST", "/v1/opot/rotate"},
	}
	for _, ep := range endpoints {
		for _, b := range bodies {
			if ep.path == "/v1/opot/rotate" && b.name == "empty" {
				continue // an empty body is "rotate every OPoT chain"
			}
			resp, ans := e.rawDo(ep.method, ep.path, b.body)
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s %s with %s %q: %d %s, want 400", ep.method, ep.path, b.name, b.body, resp.StatusCode, ans)
			}
		}
	}
	var after json.RawMessage
	e.must("GET", "/v1/spec", "", &after)
	if string(before) != string(after) {
		t.Errorf("refused bodies changed the spec:\n%s\n%s", before, after)
	}
	if g := e.generations(); !mapsEqual(g, gens) {
		t.Errorf("refused bodies changed generations: %v -> %v", gens, g)
	}
	// Whitespace around one object is fine.
	if resp, ans := e.rawDo("PUT", "/v1/chains/web4", " \n\t"+chain+"\r\n "); resp.StatusCode != http.StatusOK {
		t.Errorf("PUT with whitespace around the object: %d %s", resp.StatusCode, ans)
	}
	if resp, ans := e.rawDo("PATCH", "/v1/spec", "\n"+quickstart(t)+"\n\n"); resp.StatusCode != http.StatusOK {
		t.Errorf("PATCH with whitespace around the spec: %d %s", resp.StatusCode, ans)
	}
}

// TestCheckJSON: the checker alone, on the cases json.Decoder takes
// apart (nesting, keys equal once decoded, keys in different objects).
func TestCheckJSON(t *testing.T) {
	ok := []string{`{}`, ` {"a":1} `, `{"a":{"a":{"a":[{"a":1},{"a":2}]}}}`, `{"a":[1,{"b":2,"c":[3]}],"b":"a"}`, `{"a":"x","b":"a"}`}
	for _, s := range ok {
		if err := checkJSON([]byte(s)); err != nil {
			t.Errorf("checkJSON(%s): %v", s, err)
		}
	}
	bad := []string{`{"a":1,"a":1}`, `{"a":{"b":1,"b":2}}`, `{"a":[{"b":1,"b":2}]}`, `{"\u00e9":1,"é":2}`, `{"a":1}{}`, `{"a":1} 1`, `{"a":}`, `{`}
	for _, s := range bad {
		if err := checkJSON([]byte(s)); !errors.Is(err, errBadObject) {
			t.Errorf("checkJSON(%s): %v, want errBadObject", s, err)
		}
	}
}

// TestErrorReportCapped: a chain with 40,000 bad dst entries (65 s and a
// quadratic count of decodes before) gets at most maxProblems problems
// and a count of the rest, with each object decoded once; a 1 MB name
// with 300 bad entries (a 302 MB answer before) gets an answer under
// 64 KiB.
func TestErrorReportCapped(t *testing.T) {
	e := newEnv(t)
	e.must("PUT", "/v1/spec", quickstart(t), nil)

	bad := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"bad%d"`, i)
		}
		return b.String()
	}
	decodes := idDecodes.Load()
	body := `{"name":"many","ingress":"r1","egress":"r3","match":{"dst":[` + bad(40000) + `]},"nfs":["fw"]}`
	resp, ans := e.rawDo("POST", "/v1/chains", body)
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("40,000 bad dst: %d %.300s", resp.StatusCode, ans)
	}
	var eb errorBody
	if err := json.Unmarshal(ans, &eb); err != nil {
		t.Fatal(err)
	}
	if len(eb.Problems) != maxProblems+1 {
		t.Errorf("40,000 bad dst: %d problems, want %d and a count", len(eb.Problems), maxProblems)
	}
	last := eb.Problems[len(eb.Problems)-1].Message
	if !strings.HasPrefix(last, "and ") || !strings.HasSuffix(last, " more problems") {
		t.Errorf("last problem %q, want the count of the rest", last)
	}
	if eb.Problems[0].Object != "chains/many" {
		t.Errorf("first problem %+v, want object chains/many", eb.Problems[0])
	}
	if d := idDecodes.Load() - decodes; d > 4 {
		t.Errorf("%d object decodes to locate the problems of one chain, want 1", d)
	}
	if len(ans) > 64<<10 {
		t.Errorf("40,000 bad dst: answer of %d bytes", len(ans))
	}
	t.Logf("40,000 bad dst (%d byte body): answer %d bytes, %d problems, %d decodes", len(body), len(ans), len(eb.Problems), idDecodes.Load()-decodes)

	name := strings.Repeat("n", 1<<20)
	body = `{"name":"` + name + `","ingress":"r1","egress":"r3","match":{"dst":[` + bad(300) + `]},"nfs":["fw"]}`
	resp, ans = e.rawDo("POST", "/v1/chains", body)
	if resp.StatusCode != http.StatusUnprocessableEntity && resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("1 MB name: %d %.300s", resp.StatusCode, ans)
	}
	if len(ans) >= 64<<10 {
		t.Errorf("1 MB name and 300 bad entries: answer of %d bytes, want < 64 KiB", len(ans))
	}
	t.Logf("1 MB name, 300 bad entries: %d, answer %d bytes", resp.StatusCode, len(ans))
	if resp.Header.Get("Location") != "" {
		t.Errorf("refused POST has Location %.100q", resp.Header.Get("Location"))
	}
	if err := json.Unmarshal(ans, &eb); err != nil {
		t.Fatal(err)
	}
	for _, p := range eb.Problems {
		if len(p.Object) > 200 || len(p.Message) > maxMessage+32 {
			t.Errorf("problem not clipped: object %d bytes, message %d bytes", len(p.Object), len(p.Message))
			break
		}
	}
}

// TestClipText: clipping keeps UTF-8 whole and says the length.
func TestClipText(t *testing.T) {
	s := strings.Repeat("é", maxMessage) // 2 bytes each
	c := clipText(s)
	if len(c) > maxMessage+32 || !strings.Contains(c, fmt.Sprintf("(%d bytes)", len(s))) || !json.Valid([]byte(fmt.Sprintf("%q", c))) {
		t.Errorf("clipText: %d bytes %.80q", len(c), c)
	}
	if clipText("short") != "short" {
		t.Errorf("clipText changed a short string")
	}
}

// TestBodyTooLarge: over 32 MiB is 413 (it was 400).
func TestBodyTooLarge(t *testing.T) {
	e := newEnv(t)
	body := `{"name":"` + strings.Repeat("a", maxBody) + `"}`
	for _, ep := range []struct{ method, path string }{{"PUT", "/v1/spec"}, {"POST", "/v1/chains"}, {"POST", "/v1/opot/rotate"}} {
		resp, ans := e.rawDo(ep.method, ep.path, body)
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s %s with %d bytes: %d %.200s, want 413", ep.method, ep.path, len(body), resp.StatusCode, ans)
		}
	}
}

// TestLocationOnSuccessOnly: a refused POST names nothing in Location; a
// created object is named there, escaped.
func TestLocationOnSuccessOnly(t *testing.T) {
	e := newEnv(t)
	e.must("PUT", "/v1/spec", quickstart(t), nil)
	long := strings.Repeat("x", 100<<10)
	for _, body := range []string{
		`{"name":"` + long + `","ingress":"r1","egress":"r3","match":{"dst":["10.0.9.0/24"]},"nfs":["fw"]}`,
		`{"name":"web4","ingress":"r1","egress":"r3","match":{"dst":["10.0.9.0/24"]},"nfs":["fw"]}`, // exists: 409
		`{"name":"a/../b","ingress":"r9"}`,
	} {
		resp, ans := e.rawDo("POST", "/v1/chains", body)
		if resp.StatusCode < 400 {
			t.Errorf("POST %.60s: %d %s, want an error", body, resp.StatusCode, ans)
		}
		if l := resp.Header.Get("Location"); l != "" {
			t.Errorf("POST %.60s: %d with Location %.80q", body, resp.StatusCode, l)
		}
	}
	resp, ans := e.rawDo("POST", "/v1/chains", benchChain(9))
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Location") != "/v1/chains/c9" {
		t.Errorf("POST c9: %d %s, Location %q", resp.StatusCode, ans, resp.Header.Get("Location"))
	}
}

// TestUnauthorizedClosesConnection: a 401 ends the connection, so that
// requests without the token cannot hold keep-alive connections.
func TestUnauthorizedClosesConnection(t *testing.T) {
	e := newEnv(t)
	c, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "GET /v1/spec HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
		t.Errorf("without a token: %d, Connection %q, want 401 and close", resp.StatusCode, resp.Header.Get("Connection"))
	}
	// The server closed its side: a second request gets no answer.
	io.WriteString(c, "GET /v1/spec HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, err := br.ReadByte(); err == nil {
		t.Errorf("the connection stayed open after the 401")
	}
}

// TestStatusNotJSON: an agent status that is not JSON is reported as
// unreadable (200), not a 500.
func TestStatusNotJSON(t *testing.T) {
	e := newEnv(t)
	e.must("PUT", "/v1/spec", quickstart(t), nil)
	if _, err := e.st.Client().Put(context.Background(), store.StatusKey("r1"), "not json {"); err != nil {
		t.Fatal(err)
	}
	var st Status
	e.must("GET", "/v1/nodes/r1/status", "", &st)
	if st.Agent != AgentUp || st.InSync || st.Report != nil || !strings.Contains(st.ReportError, "unreadable agent status") {
		t.Errorf("status not JSON: %+v", st)
	}
}

// TestStoreDown: with the external etcd stopped, every endpoint answers
// 503 naming the store within the store's timeout (it did not answer in
// 60 s). The bound asserted is generous (the timeout is 1 s).
func TestStoreDown(t *testing.T) {
	dir := t.TempDir()
	client := freeURL(t)
	etcd, err := store.Open(context.Background(), store.Config{DataDir: dir, ClientURL: client, PeerURL: freeURL(t),
		LogFile: filepath.Join(dir, "etcd.log")})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	st, err := store.Open(context.Background(), store.Config{Endpoints: []string{client}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := envOn(t, st)
	e.must("PUT", "/v1/spec", quickstart(t), nil)
	e.must("GET", "/v1/nodes/r1/status", "", nil)
	etcd.Close()

	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/chains", ""},
		{"GET", "/v1/spec", ""},
		{"GET", "/v1/chains/web4", ""},
		{"GET", "/v1/nodes/r1/desired", ""},
		{"GET", "/v1/nodes/r1/status", ""},
		{"PUT", "/v1/chains/web4", `{"ingress":"r1","egress":"r3","match":{"dst":["10.0.4.0/25"]},"nfs":["fw"]}`},
		{"DELETE", "/v1/chains/web6", ""},
		{"POST", "/v1/opot/rotate", ""},
	} {
		start := time.Now()
		resp, ans := e.rawDo(r.method, r.path, r.body)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(ans), "etcd") {
			t.Errorf("%s %s with etcd stopped: %d %s, want 503 naming etcd", r.method, r.path, resp.StatusCode, ans)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("%s %s with etcd stopped: answered after %v", r.method, r.path, d)
		}
	}
}

// TestTokenFileChecks: a token file readable by others, a symlink, or a
// short token is refused; a missing one is created 0600.
func TestTokenFileChecks(t *testing.T) {
	dir := t.TempDir()
	good := strings.Repeat("k", MinTokenLen)
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode) // past the umask
		return p
	}
	cases := []struct {
		name string
		path string
		want error
	}{
		{"mode 0644", write("wide", good, 0o644), ErrTokenFile},
		{"mode 0640", write("group", good, 0o640), ErrTokenFile},
		{"mode 0602", write("other", good, 0o602), ErrTokenFile},
		{"one byte", write("short", "a\n", 0o600), ErrTokenTooWeak},
		{"15 bytes", write("fifteen", good[:15], 0o600), ErrTokenTooWeak},
		{"empty", write("empty", "\n", 0o600), ErrNoToken},
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(write("target", good, 0o600), link); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, struct {
		name string
		path string
		want error
	}{"symlink", link, ErrTokenFile})
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o700); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, struct {
		name string
		path string
		want error
	}{"directory", filepath.Join(dir, "adir"), ErrTokenFile})
	for _, c := range cases {
		if _, err := LoadOrCreateToken(c.path); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if tok, err := LoadOrCreateToken(write("ok", good+"\n", 0o400)); err != nil || tok != good {
		t.Errorf("0400 file of %d bytes: %q, %v", len(good), tok, err)
	}
	p := filepath.Join(dir, "new", "token")
	tok, err := LoadOrCreateToken(p)
	if err != nil || len(tok) < MinTokenLen {
		t.Fatalf("create: %q, %v", tok, err)
	}
	if again, err := LoadOrCreateToken(p); err != nil || again != tok {
		t.Errorf("reload of a created token: %q, %v", again, err)
	}
}

// BenchmarkCheckJSON: the strict check on a PATCH of 10,000 chains
// (docs/controller.md, Measured).
func BenchmarkCheckJSON(b *testing.B) {
	chains := make([]string, 10000)
	for i := range chains {
		chains[i] = benchChain(i)
	}
	body := []byte(`{"chains":[` + strings.Join(chains, ",") + `]}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := checkJSON(body); err != nil {
			b.Fatal(err)
		}
	}
}

// checkJSONRef is checkJSON written on json.Decoder.Token: slower, and
// the reference FuzzCheckJSON compares the byte scanner with.
func checkJSONRef(b []byte) bool {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	type frame struct {
		keys    map[string]bool
		wantKey bool
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if len(stack) == 0 && tok != json.Delim('{') {
			return false
		}
		if n := len(stack); n > 0 && stack[n-1].wantKey {
			if key, ok := tok.(string); ok {
				if stack[n-1].keys[key] {
					return false
				}
				stack[n-1].keys[key], stack[n-1].wantKey = true, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{keys: map[string]bool{}, wantKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			stack[n-1].wantKey = true
		}
		if len(stack) == 0 {
			break
		}
	}
	_, err := dec.Token()
	return err == io.EOF
}

// FuzzCheckJSON: the byte scanner agrees with the token walk.
//
//	go test ./internal/controller/ -run '^$' -fuzz FuzzCheckJSON -fuzztime 30s
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"a":2}`, `{"a":{"b":[{"c":"\"","c":1}]}}`, `{"\u0061":1,"a":2}`, `{"a\\":1,"a\\":1}`,
		`{"x":"}{","y":"\\"}`, `{"a":[],"b":{},"c":[{}]}`, `{} `, `{}{}`, `null`, ` {"k":"v"} x`, `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18,"a":19}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := checkJSON([]byte(s)) == nil
		if want := checkJSONRef([]byte(s)); got != want {
			t.Errorf("checkJSON(%q) accepts: %v, the token walk: %v", s, got, want)
		}
	})
}
