package lab

import (
	"context"
	"errors"
	"fmt"
	"github.com/srchain/srchain/internal/testutil"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

func requireRoot(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
}

// quickstart compiles the quickstart example under a lab name unique to
// this test process.
func quickstart(t *testing.T, suffix string) *state.Network {
	t.Helper()
	s, err := spec.Load("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatalf("load quickstart: %v", err)
	}
	net, err := compile.Compile(s)
	if err != nil {
		t.Fatalf("compile quickstart: %v", err)
	}
	net.Name = fmt.Sprintf("srct-l%d%s", os.Getpid(), suffix)
	return net
}

// cleanup removes the lab's namespaces whatever happened.
func cleanup(t *testing.T, net *state.Network, opts Options) {
	t.Cleanup(func() {
		_ = Down(context.Background(), net.Name, opts)
		for _, n := range net.Nodes {
			_ = netns.Delete(NSName(net.Name, n.Name))
		}
	})
}

func TestNames(t *testing.T) {
	if _, err := Load("../etc", Options{StateDir: t.TempDir()}); !errors.Is(err, ErrBadName) {
		t.Errorf("Load(../etc) = %v, want ErrBadName", err)
	}
	if _, err := Load("nosuch", Options{StateDir: t.TempDir()}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load(nosuch) = %v, want ErrNotFound", err)
	}
	if err := Down(context.Background(), "nosuch", Options{StateDir: t.TempDir()}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Down(nosuch) = %v, want ErrNotFound", err)
	}
}

func TestUpStatusExecDown(t *testing.T) {
	requireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := Options{StateDir: t.TempDir()}
	net := quickstart(t, "")
	cleanup(t, net, opts)

	rec, err := Up(ctx, net, UpOptions{Options: opts})
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	if len(rec.Namespaces) != len(net.Nodes) {
		t.Errorf("record has %d namespaces, want %d", len(rec.Namespaces), len(net.Nodes))
	}
	if _, err := Up(ctx, net, UpOptions{Options: opts}); !errors.Is(err, ErrExists) {
		t.Errorf("second up = %v, want ErrExists", err)
	}
	sts, err := Status(ctx, net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	PrintStatus(&b, sts)
	for _, s := range sts {
		if !s.OK() {
			t.Errorf("node %s not ok:\n%s", s.Node, b.String())
		}
	}
	// The chain delivers: h1 reaches h2 over IPv4 and IPv6.
	for _, dst := range []string{"10.0.4.2", "fc00:a4::2"} {
		ns, err := Open(net.Name, "h1", opts)
		if err != nil {
			t.Fatal(err)
		}
		out, err := ns.Run(ctx, "ping", "-c", "1", "-W", "2", dst)
		ns.Close()
		if err != nil {
			t.Errorf("ping %s from h1: %v\n%s", dst, err, out)
		}
	}
	if err := Exec(ctx, net.Name, "h2", []string{"true"}, Stdio{}, opts); err != nil {
		t.Errorf("exec true in h2: %v", err)
	}
	if err := Exec(ctx, net.Name, "nosuch", []string{"true"}, Stdio{}, opts); !errors.Is(err, ErrNoNode) {
		t.Errorf("exec in unknown node = %v, want ErrNoNode", err)
	}

	// A broken node shows in status, and Reapply repairs it.
	ns, _ := Open(net.Name, "r2", opts)
	_, _ = ns.Run(ctx, "ip", "link", "set", "eth1", "down")
	ns.Close()
	sts, _ = Status(ctx, net.Name, opts)
	for _, s := range sts {
		if s.Node == "r2" && s.OK() {
			t.Error("status of r2 ok after eth1 went down")
		}
	}
	changes, err := Reapply(ctx, net.Name, opts)
	if err != nil || changes["r2"] == 0 || changes["h1"] != 0 {
		t.Errorf("reapply = %v, %v; want changes on r2 only", changes, err)
	}
	sts, _ = Status(ctx, net.Name, opts)
	for _, s := range sts {
		if !s.OK() {
			t.Errorf("status of %s after reapply: %v", s.Node, s.Problems)
		}
	}

	if err := Down(ctx, net.Name, opts); err != nil {
		t.Fatalf("down: %v", err)
	}
	if left, _ := netns.List(NSName(net.Name, "")); len(left) != 0 {
		t.Errorf("namespaces left after down: %v", left)
	}
	if _, err := Load(net.Name, opts); !errors.Is(err, ErrNotFound) {
		t.Errorf("record left after down: %v", err)
	}
}

// TestDownAfterCrash: a crash half-way through Up leaves the record and
// some namespaces; Down removes them, and a later Up works.
func TestDownAfterCrash(t *testing.T) {
	requireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := Options{StateDir: t.TempDir()}
	net := quickstart(t, "c")
	cleanup(t, net, opts)

	rec := &Record{Name: net.Name, Namespaces: map[string]string{}, Links: net.Links, Network: net}
	for _, n := range net.Nodes {
		rec.Namespaces[n.Name] = NSName(net.Name, n.Name)
	}
	if err := writeRecord(opts, rec); err != nil {
		t.Fatal(err)
	}
	// "Crash" after two namespaces and one link, with a process running.
	nss := map[string]*netns.NS{}
	for _, n := range net.Nodes[:2] {
		ns, err := netns.Create(rec.Namespaces[n.Name])
		if err != nil {
			t.Fatal(err)
		}
		defer ns.Close()
		nss[n.Name] = ns
	}
	sleeper := nss[net.Nodes[0].Name].Command(ctx, "sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = sleeper.Wait(); close(exited) }()
	if err := AddPID(net.Name, sleeper.Process.Pid, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := Up(ctx, net, UpOptions{Options: opts}); !errors.Is(err, ErrExists) {
		t.Fatalf("up over a crashed lab = %v, want ErrExists", err)
	}
	if err := Down(ctx, net.Name, opts); err != nil {
		t.Fatalf("down after crash: %v", err)
	}
	if left, _ := netns.List(NSName(net.Name, "")); len(left) != 0 {
		t.Errorf("namespaces left: %v", left)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Error("process started in the lab still running after down")
	}
	if _, err := Up(ctx, net, UpOptions{Options: opts}); err != nil {
		t.Fatalf("up after down: %v", err)
	}
}

// TestUpFailureCleansUp: a node that cannot be applied makes Up fail and
// remove everything it made.
func TestUpFailureCleansUp(t *testing.T) {
	requireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := Options{StateDir: t.TempDir()}
	net := quickstart(t, "f")
	cleanup(t, net, opts)
	last := &net.Nodes[len(net.Nodes)-1]
	last.Programs = append(last.Programs, state.Program{Kind: "boom"})
	opts.Drivers = map[string]apply.ProgramDriver{
		"end": apply.DriverFunc(func(*netns.NS, state.Node, state.Program) (func() error, error) { return nil, nil }),
		"boom": apply.DriverFunc(func(*netns.NS, state.Node, state.Program) (func() error, error) {
			return nil, errors.New("injected failure")
		}),
	}
	if _, err := Up(ctx, net, UpOptions{Options: opts}); err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("up = %v, want the injected failure", err)
	}
	if left, _ := netns.List(NSName(net.Name, "")); len(left) != 0 {
		t.Errorf("namespaces left after failed up: %v", left)
	}
	if _, err := Load(net.Name, opts); !errors.Is(err, ErrNotFound) {
		t.Errorf("record left after failed up: %v", err)
	}
}

func TestProbesQuickstart(t *testing.T) {
	requireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := Options{StateDir: t.TempDir()}
	net := quickstart(t, "p")
	cleanup(t, net, opts)
	if _, err := Up(ctx, net, UpOptions{Options: opts}); err != nil {
		t.Fatal(err)
	}
	pr, err := NewProber(net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	for _, p := range []Probe{
		{Name: "v4", From: "h1", To: netip.MustParseAddr("10.0.4.2"), Proto: "icmp", Expect: "web4"},
		{Name: "v6", From: "h1", To: netip.MustParseAddr("fc00:a4::2"), Proto: "icmp", Expect: "web6"},
		{Name: "udp6", From: "h1", To: netip.MustParseAddr("fc00:a4::2"), Proto: "udp", DPort: 5001, Expect: "web6"},
		{Name: "plain", From: "h1", To: netip.MustParseAddr("fc00:a3::2"), Proto: "icmp", Expect: ExpectNone},
		{Name: "wrong", From: "h1", To: netip.MustParseAddr("fc00:a3::2"), Proto: "icmp", Expect: "web6"},
	} {
		res, err := pr.Run(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		pr.Print(&b, res, true)
		t.Log(b.String())
		if res.OK != (p.Name != "wrong") {
			t.Errorf("probe %s OK=%v:\n%s", p.Name, res.OK, b.String())
		}
	}
}

// TestDownWithoutRecord: namespaces of a lab whose record was deleted are
// still removed by Down, but not those another lab's record claims.
func TestDownWithoutRecord(t *testing.T) {
	requireRoot(t)
	opts := Options{StateDir: t.TempDir()}
	lab := fmt.Sprintf("srct-l%do", os.Getpid())
	other := lab + "-x" // a name that extends lab's (with "-" as separator their namespaces shared a prefix)
	mine, theirs := NSName(lab, "h1"), NSName(other, "h1")
	for _, n := range []string{mine, theirs} {
		ns, err := netns.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		ns.Close()
		t.Cleanup(func() { _ = netns.Delete(n) })
	}
	if err := writeRecord(opts, &Record{Name: other, Namespaces: map[string]string{"h1": theirs}, Network: &state.Network{Name: other}}); err != nil {
		t.Fatal(err)
	}
	if err := Down(context.Background(), lab, opts); err != nil {
		t.Fatalf("down without record: %v", err)
	}
	if left, _ := netns.List(mine); len(left) != 0 {
		t.Errorf("orphan namespace left: %v", left)
	}
	if left, _ := netns.List(theirs); len(left) != 1 {
		t.Errorf("other lab's namespace removed")
	}
	if err := Down(context.Background(), lab, opts); !errors.Is(err, ErrNotFound) {
		t.Errorf("second down = %v, want ErrNotFound", err)
	}
}

func TestParseStart(t *testing.T) {
	// Field 2 may hold spaces and parentheses; starttime is field 22.
	stat := "4242 (a b) (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615"
	if got, err := parseStart(stat); err != nil || got != 987654 {
		t.Errorf("parseStart = %d, %v; want 987654", got, err)
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1 2 3", "1 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 z 1"} {
		if _, err := parseStart(bad); err == nil {
			t.Errorf("parseStart(%q) had no error", bad)
		}
	}
	if _, err := procStart(os.Getpid()); err != nil {
		t.Errorf("procStart(self): %v", err)
	}
}

// sleeper starts a process this test owns and stops it, by PID, at the end.
func sleeper(t *testing.T) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	return cmd, exited
}

// TestAddPIDConcurrent: concurrent AddPID calls lose no process.
func TestAddPIDConcurrent(t *testing.T) {
	opts := Options{StateDir: t.TempDir()}
	name := fmt.Sprintf("srct-l%dpids", os.Getpid())
	if err := writeRecord(opts, &Record{Name: name, Network: &state.Network{Name: name}}); err != nil {
		t.Fatal(err)
	}
	const n = 24
	var pids []int
	for range n {
		cmd, _ := sleeper(t)
		pids = append(pids, cmd.Process.Pid)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, pid := range pids {
		wg.Go(func() { errs <- AddPID(name, pid, opts) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rec, err := Load(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Procs) != n {
		t.Errorf("record holds %d processes, want %d", len(rec.Procs), n)
	}
	// A process that is gone cannot be recorded.
	if err := AddPID(name, 1<<22+1, opts); err == nil {
		t.Error("AddPID of a process that does not exist succeeded")
	}
}

// TestDownSparesReusedPID: Down signals a recorded PID only while it still
// names the recorded process; one started later under the same PID (here:
// a start time that does not match) is left alone.
func TestDownSparesReusedPID(t *testing.T) {
	opts := Options{StateDir: t.TempDir()}
	name := fmt.Sprintf("srct-l%dreuse", os.Getpid())
	other, otherExited := sleeper(t)
	mine, mineExited := sleeper(t)
	start, err := procStart(other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	rec := &Record{Name: name, Network: &state.Network{Name: name}, LegacyPIDs: []int{other.Process.Pid},
		Procs: []Proc{{PID: other.Process.Pid, Start: start + 1}}}
	if err := writeRecord(opts, rec); err != nil {
		t.Fatal(err)
	}
	if err := AddPID(name, mine.Process.Pid, opts); err != nil {
		t.Fatal(err)
	}
	if err := Down(context.Background(), name, opts); err != nil {
		t.Fatal(err)
	}
	select {
	case <-mineExited:
	case <-time.After(5 * time.Second):
		t.Error("recorded process still running after down")
	}
	select {
	case <-otherExited:
		t.Error("down stopped a process whose PID only matched")
	case <-time.After(200 * time.Millisecond):
	}
}

// TestClaimConcurrent: of concurrent claims of one lab exactly one wins.
func TestClaimConcurrent(t *testing.T) {
	opts := Options{StateDir: t.TempDir()}
	name := fmt.Sprintf("srct-l%dclaim", os.Getpid())
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- claim(opts, &Record{Name: name, Source: strconv.Itoa(i), Namespaces: map[string]string{}, Network: &state.Network{Name: name}})
		})
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrExists):
			t.Errorf("claim: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d claims won, want 1", won)
	}
	if names, _ := List(opts); len(names) != 1 {
		t.Errorf("records after claims: %v", names)
	}
}

// TestUpConcurrent: two `lab up` of one name: one builds the lab, the
// other fails with ErrExists and leaves the winner's lab alone.
func TestUpConcurrent(t *testing.T) {
	requireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := Options{StateDir: t.TempDir()}
	net := quickstart(t, "u")
	cleanup(t, net, opts)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := Up(ctx, net, UpOptions{Options: opts})
			errs <- err
		}()
	}
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) || !errors.Is(errors.Join(e1, e2), ErrExists) {
		t.Fatalf("concurrent ups = %v, %v; want one success and one ErrExists", e1, e2)
	}
	sts, err := Status(ctx, net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sts {
		if !s.OK() {
			t.Errorf("winner's lab broken at %s: %v", s.Node, s.Problems)
		}
	}
}

// TestDownRefusesDuringUp: while an Up of a lab holds its Up lock, Down of
// that lab refuses and names the creating PID; a second Up refuses too;
// once Up returns, Down goes ahead.
func TestDownRefusesDuringUp(t *testing.T) {
	opts := Options{StateDir: t.TempDir()}
	name := fmt.Sprintf("srct-l%dbusy", os.Getpid())
	release, err := lockUp(opts, name)
	if err != nil {
		t.Fatal(err)
	}
	err = Down(context.Background(), name, opts)
	want := fmt.Sprintf("lab %s is being created by pid %d", name, os.Getpid())
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), want) {
		t.Errorf("Down during Up = %v, want ErrBusy %q", err, want)
	}
	if _, err := lockUp(opts, name); !errors.Is(err, ErrBusy) {
		t.Errorf("second Up lock = %v, want ErrBusy", err)
	}
	release()
	if err := Down(context.Background(), name, opts); !errors.Is(err, ErrNotFound) {
		t.Errorf("Down after Up = %v, want ErrNotFound", err)
	}
}

// TestDownReportsLegacyPIDs: PIDs of an old-format record are never
// signalled, and Down names those still running, with their command line.
func TestDownReportsLegacyPIDs(t *testing.T) {
	var logs strings.Builder
	opts := Options{StateDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	name := fmt.Sprintf("srct-l%dlegacy", os.Getpid())
	old, oldExited := sleeper(t)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	rec := &Record{Name: name, Network: &state.Network{Name: name}, LegacyPIDs: []int{old.Process.Pid, gone.Process.Pid}}
	if err := writeRecord(opts, rec); err != nil {
		t.Fatal(err)
	}
	if err := Down(context.Background(), name, opts); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%d (sleep 300)", old.Process.Pid)
	if !strings.Contains(logs.String(), "left running") || !strings.Contains(logs.String(), want) {
		t.Errorf("down output lacks %q:\n%s", want, logs.String())
	}
	if strings.Contains(logs.String(), fmt.Sprintf("processes=\"%d ", gone.Process.Pid)) {
		t.Errorf("down reported an exited PID:\n%s", logs.String())
	}
	select {
	case <-oldExited:
		t.Error("down stopped a process recorded without its start time")
	case <-time.After(200 * time.Millisecond):
	}
}
