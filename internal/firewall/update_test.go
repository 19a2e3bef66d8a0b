package firewall

import (
	"fmt"
	"github.com/srchain/srchain/internal/testutil"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// TestUpdateAtomic: packets classified while Update switches between two
// rule sets that both drop them are never accepted (double-buffered
// tables, one generation word flipped), and each rule set's counters
// start from zero.
func TestUpdateAtomic(t *testing.T) {
	needRoot(t)
	var a, b strings.Builder
	// Both drop UDP from fc00:1::1, by different rules and fields.
	for i := 0; i < 150; i++ {
		fmt.Fprintf(&a, "-s fc00:77::%x -p tcp -j ACCEPT\n", i)
	}
	a.WriteString("-p udp -j DROP\n-j ACCEPT\n")
	b.WriteString("-s fc00:1::/64 -d fc00:d1::/64 -j DROP\n")
	for i := 0; i < 150; i++ {
		fmt.Fprintf(&b, "-m srh --srh-tag %d -j ACCEPT\n", i)
		fmt.Fprintf(&b, "-p udp --dport %d -j ACCEPT\n", 1000+i)
	}
	b.WriteString("-j ACCEPT\n")
	ra, err := Parse(a.String())
	if err != nil {
		t.Fatal(err)
	}
	rb, err := Parse(b.String())
	if err != nil {
		t.Fatal(err)
	}
	fw, err := LoadCapacity(Config{Rules: ra}, Capacity{Bitmaps: 1024, Prefixes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	p := testPkts(t)
	frame := etherFrame(p.plain6)

	var stop atomic.Bool
	var runs, accepted atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			ret, err := fw.Program().Run(&ebpf.RunOptions{Data: frame, Context: testutil.SKB{IngressIfindex: 1, Ifindex: 1}})
			if err != nil {
				t.Error(err)
				return
			}
			runs.Add(1)
			if ret != tcActShot {
				accepted.Add(1)
			}
		}
	}()
	for i := 0; i < 50; i++ {
		rules := rb
		if i%2 == 1 {
			rules = ra
		}
		if err := fw.Update(Config{Rules: rules}); err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d packets during 50 updates", runs.Load())
	if n := accepted.Load(); n != 0 {
		t.Fatalf("%d of %d packets accepted during Update", n, runs.Load())
	}
	if runs.Load() < 100 {
		t.Fatalf("only %d packets ran during the updates", runs.Load())
	}
	// A fresh generation counts from zero.
	if err := fw.Update(Config{Rules: rb}); err != nil {
		t.Fatal(err)
	}
	if ret, _, _ := run(t, fw, p.plain6); ret != tcActShot {
		t.Fatalf("ret %d", ret)
	}
	counts, err := fw.RuleCounts()
	if err != nil {
		t.Fatal(err)
	}
	if counts[0].Packets != 1 {
		t.Errorf("rule 1 counted %d packets, want 1 (counters not reset)", counts[0].Packets)
	}
}

// TestLoadTCOnly: Load verifies only the tc program unless the XDP twin
// is asked for.
func TestLoadTCOnly(t *testing.T) {
	needRoot(t)
	fw, err := Load(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	if fw.Program() == nil || fw.XDPProgram() != nil {
		t.Fatalf("tc %v xdp %v, want tc only", fw.Program(), fw.XDPProgram())
	}
	if err := fw.AttachXDP(1); err == nil {
		t.Fatal("AttachXDP without the XDP program succeeded")
	}
}

// TestPinLock: SetMode and Update of a pinned firewall wait for the pin
// directory's flock (another process's Update or SetMode), and an Update
// through OpenPinnedFirewall keeps a mode switched after it was opened
// and starts from the generation running now.
func TestPinLock(t *testing.T) {
	needRoot(t)
	pin := fmt.Sprintf("/sys/fs/bpf/srct-lock%d", os.Getpid())
	t.Cleanup(func() { os.RemoveAll(pin) })
	if err := os.MkdirAll(pin, 0o700); err != nil {
		t.Fatal(err)
	}
	ra, err := Parse("-p udp -j DROP")
	if err != nil {
		t.Fatal(err)
	}
	rb, err := Parse("-p tcp -j DROP")
	if err != nil {
		t.Fatal(err)
	}
	fw, err := LoadCapacity(Config{Rules: ra}, Capacity{Bitmaps: 64, Prefixes: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	if err := fw.Pin(pin); err != nil {
		t.Fatal(err)
	}
	opened, err := OpenPinnedFirewall(pin, rb) // before the mode switch
	if err != nil {
		t.Fatal(err)
	}
	defer opened.Close()
	p, err := OpenPinned(pin)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	unlock, err := lockPins(pin) // as another process would hold it
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.SetMode(Advanced) }()
	select {
	case err := <-done:
		t.Fatalf("SetMode did not wait for the pin lock (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Another process updates (fw flips to generation 1), then opened
	// updates: it must fill generation 0, not the running one.
	if err := fw.Update(Config{Rules: ra, Mode: Advanced}); err != nil {
		t.Fatal(err)
	}
	if err := opened.Update(Config{Rules: rb}); err != nil {
		t.Fatal(err)
	}
	if g := opened.Gen(); g != 0 {
		t.Fatalf("generation %d active, want 0", g)
	}
	m, n, err := p.Mode()
	if err != nil {
		t.Fatal(err)
	}
	if m != Advanced || n != 1 {
		t.Fatalf("mode %v rules %d, want advanced, 1", m, n)
	}
}
