package main

// Tests of `srchain serve` as a process (issue 38, items 1, 2, 4): what
// a signal, a client that hangs up, or a crowd of idle connections do to
// the real binary, whose signal handling is main's.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/controller"
	"github.com/srchain/srchain/internal/testutil"
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// srchainBinary builds the CLI once per test binary.
func srchainBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "srchain-cmd-test-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "srchain")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// serveProc is a running `srchain serve`.
type serveProc struct {
	cmd       *exec.Cmd
	url       string
	tokenFile string
	token     string
	done      chan struct{} // closed when the process has exited
	err       error         // its Wait error, once done
	mu        sync.Mutex
	stderr    strings.Builder
}

var listenRE = regexp.MustCompile(`msg="controller listening" addr=(\S+)`)

// startServeProc runs the binary's serve on a fresh data directory, with
// extra flags; it is killed at cleanup if still running.
func startServeProc(t *testing.T, extra ...string) *serveProc {
	t.Helper()
	return startServeProcIn(t, t.TempDir(), extra...)
}

// startServeProcIn is startServeProc on data directory dir.
func startServeProcIn(t *testing.T, dir string, extra ...string) *serveProc {
	t.Helper()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir,
		"--etcd-listen-client", freeURL(t), "--etcd-listen-peer", freeURL(t)}, extra...)
	p := &serveProc{cmd: exec.Command(srchainBinary(t), args...), tokenFile: filepath.Join(dir, "token"), done: make(chan struct{})}
	pr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("serve's stderr:\n%s", p.log())
		}
	})
	select {
	case a := <-addr:
		p.url = "http://" + a
	case <-p.done:
		t.Fatalf("serve exited: %v\n%s", p.err, p.log())
	case <-time.After(90 * time.Second):
		t.Fatalf("serve not listening after 90 s\n%s", p.log())
	}
	tok, err := os.ReadFile(p.tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	p.token = strings.TrimSpace(string(tok))
	return p
}

func (p *serveProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func (p *serveProc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *serveProc) client() *controller.Client {
	// A new connection per request: one kept alive from an earlier
	// request would skip the accept queue the tests are about.
	return &controller.Client{Server: p.url, Token: p.token,
		HTTP: &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
}

// answers checks the process is alive and answers an authenticated GET.
func (p *serveProc) answers(t *testing.T, when string) {
	t.Helper()
	if !p.alive() {
		t.Fatalf("%s: serve exited (%v)", when, p.err)
	}
	var chains struct{ Items []any }
	if err := p.client().Do(context.Background(), "GET", "/v1/chains", nil, &chains); err != nil {
		t.Fatalf("%s: GET /v1/chains: %v", when, err)
	}
}

// stop sends SIGTERM and returns the exit status.
func (p *serveProc) stop(t *testing.T) int {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("serve still running 60 s after SIGTERM")
	}
	return p.cmd.ProcessState.ExitCode()
}

// TestServeSurvivesSIGPIPE: SIGPIPE, and clients that hang up in the
// middle of a large answer, leave serve running (it exited 0 on the
// first SIGPIPE: main notified it, cancelling the root context); SIGTERM
// still stops it with status 0.
func TestServeSurvivesSIGPIPE(t *testing.T) {
	p := startServeProc(t)
	if _, stderr, err := runCLI(t, "apply", "-f", "../../examples/quickstart.yaml", "--server", p.url, "--token-file", p.tokenFile); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	// 2,000 more chains: GET /v1/spec is then about 300 KB.
	var chains []string
	for i := range 2000 {
		chains = append(chains, fmt.Sprintf(`{"name":"c%d","ingress":"r1","egress":"r3","match":{"dst":["fc00:a4::/64"],"proto":"udp","dport":"%d"},"nfs":["fw"]}`, i, 1000+i))
	}
	if err := p.client().Do(context.Background(), "PATCH", "/v1/spec", []byte(`{"chains":[`+strings.Join(chains, ",")+`]}`), nil); err != nil {
		t.Fatalf("PATCH 2,000 chains: %v", err)
	}

	for range 3 {
		if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGPIPE); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond) // a stop, if any, takes far less
	p.answers(t, "after kill -PIPE")

	// Clients that read a little of GET /v1/spec and reset the connection.
	addr := strings.TrimPrefix(p.url, "http://")
	for i := range 30 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		tc := c.(*net.TCPConn)
		tc.SetReadBuffer(4096)
		fmt.Fprintf(c, "GET /v1/spec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", p.token)
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		io.ReadFull(c, make([]byte, 100+i*100))
		tc.SetLinger(0) // RST: the server's next writes fail (EPIPE)
		c.Close()
	}
	time.Sleep(500 * time.Millisecond)
	p.answers(t, "after 30 clients hung up mid-answer")

	if code := p.stop(t); code != 0 {
		t.Errorf("serve stopped by SIGTERM: exit status %d, want 0\n%s", code, p.log())
	}
}

// TestServeIdleConnections: far more idle, half-sent and unauthenticated
// connections than --http-max-conns neither exhaust the process's file
// descriptors nor keep an authenticated client out for long: idle ones
// time out, the rest wait in the kernel's accept queue. Before, 2 x
// 10,000 idle connections reached the fd limit and etcd died. The only
// time asserted is a generous bound on the answer.
func TestServeIdleConnections(t *testing.T) {
	const maxConns = 32
	p := startServeProc(t, "--http-max-conns", fmt.Sprint(maxConns), "--http-read-header-timeout", "1s",
		"--http-idle-timeout", "1s", "--http-read-timeout", "5s")
	p.answers(t, "at start")
	fds := func() int {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	base := fds()

	addr := strings.TrimPrefix(p.url, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 240 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		switch i % 3 {
		case 1: // half a request line, never finished
			io.WriteString(c, "GET /v1/spec HTTP/1.1\r\nHost: x\r\n")
		case 2: // a keep-alive request without the token
			io.WriteString(c, "GET /v1/spec HTTP/1.1\r\nHost: x\r\n\r\n")
		}
	}
	most := 0
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		var chains struct{ Items []any }
		done <- p.client().Do(context.Background(), "GET", "/v1/chains", nil, &chains)
	}()
	deadline := time.After(90 * time.Second)
wait:
	for {
		most = max(most, fds())
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("authenticated GET behind 240 idle connections: %v", err)
			}
			t.Logf("authenticated GET answered after %v", time.Since(start))
			break wait
		case <-deadline:
			t.Fatalf("authenticated GET behind 240 idle connections: no answer in 90 s")
		case <-time.After(50 * time.Millisecond):
		}
	}
	// The limit, plus a few for the authenticated client and etcd's
	// own connections; the 240 would have been 240 more.
	if most > base+maxConns+16 {
		t.Errorf("open files went from %d to %d with %d idle connections, limit %d", base, most, len(conns), maxConns)
	}
	t.Logf("open files: %d at start, at most %d with %d connections", base, most, len(conns))
	p.answers(t, "after the idle connections")

	// A header block over the 64 KiB cap is refused (431), not buffered.
	req, _ := http.NewRequest("GET", p.url+"/v1/chains", nil)
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("X-Big", strings.Repeat("b", 128<<10))
	resp, err := p.client().HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("128 KiB of headers: %d, want 431", resp.StatusCode)
	}
	if !p.alive() {
		t.Fatal("serve exited")
	}
}

// TestServeRefusesOpenEtcd: the embedded etcd beyond loopback without
// --etcd-pki is refused unless --insecure-etcd.
func TestServeRefusesOpenEtcd(t *testing.T) {
	port := strings.TrimPrefix(freeURL(t), "http://127.0.0.1")
	for _, o := range []serveOptions{
		{etcdClient: "http://0.0.0.0" + port, etcdPeer: freeURL(t)},
		{etcdClient: freeURL(t), etcdPeer: "http://0.0.0.0" + port},
	} {
		o.listen, o.dataDir = "127.0.0.1:0", t.TempDir()
		err := runServe(context.Background(), o, nil)
		if err == nil || !strings.Contains(err.Error(), "--insecure-etcd") || !strings.Contains(err.Error(), "0.0.0.0") {
			t.Errorf("serve with etcd on %s / %s: %v, want a refusal naming --insecure-etcd", o.etcdClient, o.etcdPeer, err)
		}
	}
}

// TestServeUnplannedStop: a context that ends other than by
// SIGINT/SIGTERM or a plain cancel is an error (non-zero exit status).
func TestServeUnplannedStop(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		done <- runServe(ctx, serveOptions{listen: "127.0.0.1:0", dataDir: dir, etcdClient: freeURL(t), etcdPeer: freeURL(t)},
			func(string) { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	lost := errors.New("watchdog gave up")
	cancel(lost)
	if err := <-done; !errors.Is(err, lost) {
		t.Errorf("serve whose context ended with %v: %v, want that error", lost, err)
	}

	for cause, want := range map[error]bool{
		stopSignal{syscall.SIGTERM}: true, stopSignal{os.Interrupt}: true, nil: true,
		context.DeadlineExceeded: false, lost: false,
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		if got := plannedStop(ctx); got != want {
			t.Errorf("plannedStop(cause %v) = %v, want %v", cause, got, want)
		}
	}
}

// TestPipeCancelsOnlyLabs: SIGPIPE is diverted into the context of the
// commands that build labs, never of serve or agent.
func TestPipeCancelsOnlyLabs(t *testing.T) {
	for args, want := range map[string]bool{
		"demo": true, "lab up": true, "lab status": true, "serve": false, "agent": false, "apply": false,
	} {
		e, _, _ := testEnv(context.Background())
		root := newRootCmd(e)
		cmd, _, err := root.Find(strings.Fields(args))
		if err != nil {
			t.Fatal(err)
		}
		cmd.SetContext(context.Background())
		pipeCancels(e, cmd)
		got := strings.Contains(fmt.Sprint(cmd.Context()), "broken pipe")
		if e.stopPipe != nil {
			e.stopPipe()
		}
		if got != want {
			t.Errorf("%s: SIGPIPE cancels its context: %v, want %v", args, got, want)
		}
	}
}

// tmpfsDir mounts a tmpfs of size bytes in a fresh directory, unmounted
// at cleanup; fill writes zeros into it until it is full, after checking
// that it is that tmpfs and nothing else.
func tmpfsDir(t *testing.T, size int) (dir string, fill func()) {
	t.Helper()
	testutil.RequireRoot(t)
	dir = filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(fmt.Sprintf("srchain-test-%d", os.Getpid()), dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	fill = func() {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil || st.Type != 0x01021994 || st.Blocks*uint64(st.Bsize) > uint64(size)+1<<20 {
			t.Fatalf("%s is not the test's tmpfs (%v, type %#x): not filling it", dir, err, st.Type)
		}
		f, err := os.Create(filepath.Join(dir, "fill"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 64<<10)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill: %v", err)
				}
				return
			}
		}
	}
	return dir, fill
}

// TestServeFullDisk: serve on a full disk stops with a non-zero status
// and the reason on stderr, at start (etcd cannot create its WAL: it
// panicked with a stack trace) and while running (etcd exits the
// process itself: rc 1 with the reason in etcd.log only, before).
func TestServeFullDisk(t *testing.T) {
	dir, _ := tmpfsDir(t, 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, srchainBinary(t), "serve", "--listen", "127.0.0.1:0", "--data-dir", dir,
		"--etcd-listen-client", freeURL(t), "--etcd-listen-peer", freeURL(t)).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "no space left on device") ||
		strings.Contains(string(out), "goroutine ") {
		t.Errorf("serve on a full disk at start: %v, want exit status 1 and the reason, no stack trace:\n%s", err, out)
	}

	dir, fill := tmpfsDir(t, 96<<20)
	p := startServeProcIn(t, dir)
	if _, stderr, err := runCLI(t, "apply", "-f", "../../examples/quickstart.yaml", "--server", p.url, "--token-file", p.tokenFile); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	fill()
	var chains []string
	for i := 0; i < 40 && p.alive(); i++ {
		for j := range 500 {
			n := i*500 + j
			chains = append(chains, fmt.Sprintf(`{"name":"c%d","ingress":"r1","egress":"r3","match":{"dst":["fc00:a4::/64"],"proto":"udp","dport":"%d"},"nfs":["fw"]}`, n, 1000+n%60000))
		}
		err := p.client().Do(context.Background(), "PATCH", "/v1/spec", []byte(`{"chains":[`+strings.Join(chains, ",")+`]}`), nil)
		t.Logf("PATCH of %d chains on a full disk: %v", len(chains), err)
		if err != nil {
			break
		}
	}
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("serve still running on a full disk after %d chains", len(chains))
	}
	t.Logf("serve's stderr:\n%s", p.log())
	if code := p.cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(p.log(), "no space left on device") {
		t.Errorf("serve on a disk that filled up: exit status %d, want non-zero and the reason on stderr:\n%s", code, p.log())
	}
}
