package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
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

// startServe runs `serve` on a fresh data directory and returns its URL
// and the token file it generated.
func startServe(t *testing.T) (string, string) {
	t.Helper()
	url, tokenFile, _ := startServeIn(t, t.TempDir())
	return url, tokenFile
}

// startServeIn runs `serve` on dir; stop ends it (also done at cleanup).
func startServeIn(t *testing.T, dir string) (url, tokenFile string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, serveOptions{
			listen: "127.0.0.1:0", dataDir: dir,
			etcdClient: freeURL(t), etcdPeer: freeURL(t),
		}, func(a string) { addr <- a })
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case a := <-addr:
		return "http://" + a, filepath.Join(dir, "token"), stop
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	return "", "", nil
}

// TestServeRestartKeepsData: serve stopped and started again on its data
// directory keeps the token and the spec.
func TestServeRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	url, tokenFile, stop := startServeIn(t, dir)
	if _, stderr, err := runCLI(t, "apply", "-f", "../../examples/quickstart.yaml", "--server", url, "--token-file", tokenFile); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	token, _ := os.ReadFile(tokenFile)
	stop()

	url, tokenFile, _ = startServeIn(t, dir)
	if again, _ := os.ReadFile(tokenFile); string(again) != string(token) {
		t.Errorf("token changed across a restart")
	}
	out, _, err := runCLI(t, "get", "chains", "--server", url, "--token-file", tokenFile, "-o", "table")
	if err != nil || !strings.Contains(out, "web4") || !strings.Contains(out, "web6") {
		t.Errorf("get chains after restart: %q, %v", out, err)
	}
}

func TestServeApplyGet(t *testing.T) {
	url, tokenFile := startServe(t)
	fi, err := os.Stat(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	remote := []string{"--server", url, "--token-file", tokenFile}

	out, stderr, err := runCLI(t, append([]string{"apply", "-f", "../../examples/quickstart.yaml"}, remote...)...)
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "5 nodes changed [h1 h2 r1 r2 r3]") {
		t.Errorf("apply printed %q", out)
	}
	// The same file again changes no node.
	out, _, err = runCLI(t, append([]string{"apply", "-f", "../../examples/quickstart.yaml"}, remote...)...)
	if err != nil || !strings.Contains(out, "0 nodes changed") {
		t.Errorf("second apply: %q, %v", out, err)
	}

	out, _, err = runCLI(t, append([]string{"get", "chains"}, remote...)...)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") ||
		!strings.Contains(lines[1], "web4") || !strings.Contains(lines[1], "10.0.4.0/24") || !strings.Contains(lines[2], "web6") ||
		!strings.Contains(lines[1], "encap") || !strings.Contains(lines[1], "fc00:3::1:0/112") {
		t.Errorf("get chains:\n%s", out)
	}

	// Defaults and allocated SIDs are shown as the controller compiled them.
	out, _, err = runCLI(t, append([]string{"get", "nfs", "fw"}, remote...)...)
	if err != nil || !strings.Contains(out, "fc00:2::1:0/112") || !strings.Contains(out, "End") {
		t.Errorf("get nfs fw: %v\n%s", err, out)
	}

	out, _, err = runCLI(t, append([]string{"get", "nodes", "-o", "json"}, remote...)...)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []map[string]any
	if err := json.Unmarshal([]byte(out), &nodes); err != nil || len(nodes) != 5 || nodes[1]["locator"] != "fc00:1::/64" {
		t.Errorf("get nodes -o json: %v\n%s", err, out)
	}

	// delete: refused with its reasons while a chain uses the NF; a
	// chain's removal changes its ingress (policy) and egress (decap SID).
	_, _, err = runCLI(t, append([]string{"delete", "nfs", "fw"}, remote...)...)
	if err == nil || !strings.Contains(err.Error(), "422") || !strings.Contains(err.Error(), "chains/web4") {
		t.Errorf("delete of a used NF: %v", err)
	}
	out, _, err = runCLI(t, append([]string{"delete", "chains", "web6"}, remote...)...)
	if err != nil || !strings.Contains(out, "2 nodes changed [r1 r3]") {
		t.Errorf("delete chains web6: %q, %v", out, err)
	}
	out, _, _ = runCLI(t, append([]string{"get", "chains"}, remote...)...)
	if strings.Contains(out, "web6") || !strings.Contains(out, "web4") {
		t.Errorf("get chains after delete:\n%s", out)
	}

	// A wrong token is refused.
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("nope\n"), 0o600)
	_, _, err = runCLI(t, "get", "chains", "--server", url, "--token-file", bad, "-o", "table")
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("get with a wrong token: %v, want a 401", err)
	}
}

func TestApplyInvalidSpecSendsNothing(t *testing.T) {
	url, tokenFile := startServe(t)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("name: x\nnodes:\n  - {name: r1, role: router, locator: \"fc00:1::/64\"}\nchains:\n  - {name: c, ingress: r9}\n"), 0o644)
	_, stderr, err := runCLI(t, "apply", "-f", bad, "--server", url, "--token-file", tokenFile)
	if err == nil || !strings.Contains(stderr, "chains[0].ingress") {
		t.Errorf("apply of an invalid spec: %v\n%s", err, stderr)
	}
	out, _, err := runCLI(t, "get", "nodes", "--server", url, "--token-file", tokenFile, "-o", "table")
	if err != nil || strings.Count(out, "\n") != 1 {
		t.Errorf("after a refused apply: %q, %v", out, err)
	}
}
