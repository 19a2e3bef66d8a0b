package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEmbeddedExposureRefused: the embedded etcd on a non-loopback
// client URL without PKI, or on a non-loopback peer URL, is refused
// unless Insecure says so (then a warning is logged). It listened on
// every interface without a word (issue 38, item 4).
func TestEmbeddedExposureRefused(t *testing.T) {
	port := func() string { return strings.TrimPrefix(freeURL(t), "http://127.0.0.1") }
	cases := []struct{ name, client, peer, pki string }{
		{"client on every interface", "http://0.0.0.0" + port(), freeURL(t), ""},
		{"client on every IPv6 interface", "http://[::]" + port(), freeURL(t), ""},
		{"client by host name", "http://example.invalid" + port(), freeURL(t), ""},
		{"peer on every interface", freeURL(t), "http://0.0.0.0" + port(), ""},
		{"peer beyond loopback with PKI", "https://127.0.0.1" + port(), "http://0.0.0.0" + port(), t.TempDir()},
	}
	for _, c := range cases {
		st, err := Open(context.Background(), Config{DataDir: t.TempDir(), ClientURL: c.client, PeerURL: c.peer, PKI: c.pki})
		if err == nil {
			st.Close()
		}
		if !errors.Is(err, ErrInsecure) || !strings.Contains(err.Error(), "--insecure-etcd") {
			t.Errorf("%s: %v, want ErrInsecure naming --insecure-etcd", c.name, err)
		}
	}

	var logged bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	defer slog.SetDefault(old)
	dir := t.TempDir()
	st, err := Open(context.Background(), Config{DataDir: dir, ClientURL: "http://0.0.0.0" + port(), PeerURL: freeURL(t),
		LogFile: filepath.Join(dir, "etcd.log"), Insecure: true})
	if err != nil {
		t.Fatalf("with Insecure: %v", err)
	}
	st.Close()
	if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "0.0.0.0") {
		t.Errorf("with Insecure: no warning naming the address; log:\n%s", logged.String())
	}
}

// TestLoopback: what counts as loopback.
func TestLoopback(t *testing.T) {
	for u, want := range map[string]bool{
		"http://127.0.0.1:2379": true, "http://127.9.9.9:1": true, "http://[::1]:2379": true, "http://localhost:2379": true,
		"http://0.0.0.0:2379": false, "http://[::]:2379": false, "http://10.0.0.1:2379": false, "http://etcd:2379": false,
		"http://localhost.example.com:1": false,
	} {
		if got := loopback(mustURL(t, u)); got != want {
			t.Errorf("loopback(%s) = %v, want %v", u, got, want)
		}
	}
}

// TestEtcdLogPrivate: the embedded etcd's log is created 0600, and an
// older 0644 one is narrowed.
func TestEtcdLogPrivate(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.log")
	if err := os.WriteFile(old, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(old, 0o644)
	for _, p := range []string{filepath.Join(dir, "etcd.log"), old} {
		st, err := Open(context.Background(), Config{DataDir: t.TempDir(), ClientURL: freeURL(t), PeerURL: freeURL(t), LogFile: p})
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", filepath.Base(p), fi.Mode().Perm())
		}
	}
}

// TestUnavailable: with the cluster gone, a call fails with
// ErrUnavailable within the store's timeout; a caller's own cancel is
// not reported as the store's fault.
func TestUnavailable(t *testing.T) {
	etcd, client := open(t)
	st, err := Open(context.Background(), Config{Endpoints: []string{client}, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Read(context.Background()); err != nil {
		t.Fatal(err)
	}
	etcd.Close()
	etcd.Close() // twice: no panic
	start := time.Now()
	_, err = st.Read(context.Background())
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("read with etcd stopped: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("read with etcd stopped took %v", d)
	}
	if _, err := st.Commit(context.Background(), 0, Write{Spec: []byte("{}")}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("commit with etcd stopped: %v, want ErrUnavailable", err)
	}
	if _, _, _, err := st.Node(context.Background(), "r1"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("node with etcd stopped: %v, want ErrUnavailable", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := st.Read(ctx); err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("read with a cancelled context: %v, want the cancellation, not ErrUnavailable", err)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestEtcdFatalToStderr: etcd's errors go to its log only; its fatal
// ones (it exits the process after them: a full disk) to stderr as well.
func TestEtcdFatalToStderr(t *testing.T) {
	p := filepath.Join(t.TempDir(), "etcd.log")
	var stderr bytes.Buffer
	lg, err := etcdLogger(p, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	lg.Error("listener closed")
	lg.DPanic("failed to write WAL: no space left on device") // DPanic: logs at fatal severity without exiting
	lg.Sync()
	file, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(file), "listener closed") || !strings.Contains(string(file), "no space left") {
		t.Errorf("etcd log lacks a message:\n%s", file)
	}
	if strings.Contains(stderr.String(), "listener closed") || !strings.Contains(stderr.String(), "no space left") {
		t.Errorf("stderr has %q, want the fatal message only", stderr.String())
	}
}
