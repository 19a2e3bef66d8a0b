package e2e

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// TestPipelineSwitchUnderTraffic moves nfv's firewall and End between tc
// and the XDP pipeline (`lab apply` of the same spec with `datapath:
// ebpf` / `xdp` on nfv and ids), six times, while the ingress sends
// udp/9 (the firewall's DROP rule) and udp/5000 (allowed) to d1 without
// pause. Not one udp/9 datagram may reach d1 (issue 13: no window in
// which a packet skips the filter), and the allowed flow must go on
// arriving. What the switches cost the allowed flow is logged, not
// asserted (timing belongs to bench).
func TestPipelineSwitchUnderTraffic(t *testing.T) {
	fwNeedRoot(t)
	lb := deployExample(t, "sera-firewall.yaml", spec.DatapathEBPF, "nfv", "ids")
	netFor := func(dp string) *state.Network {
		n, err := compile.Compile(exampleSpec(t, "sera-firewall.yaml", dp, "nfv", "ids"))
		if err != nil {
			t.Fatal(err)
		}
		n.Name = lb.net.Name
		return n
	}
	variants := []*state.Network{netFor(spec.DatapathXDP), netFor(spec.DatapathEBPF)}

	d1, err := lab.Open(lb.net.Name, "d1", lb.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d1.Close()
	ing, err := lab.Open(lb.net.Name, "ingress", lb.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ing.Close()
	dst := net.ParseIP("fc00:d1::2")
	var recv [2]*net.UDPConn // udp/9, udp/5000 on d1
	var send *net.UDPConn
	if err := d1.Do(func() error {
		for i, port := range []int{9, 5000} {
			c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: dst, Port: port})
			if err != nil {
				return err
			}
			recv[i] = c
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := ing.Do(func() (err error) {
		send, err = net.ListenUDP("udp6", &net.UDPAddr{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer send.Close()

	var got [2]atomic.Uint64
	var wg sync.WaitGroup
	for i, c := range recv {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 2048)
			for {
				if _, _, err := c.ReadFromUDP(buf); err != nil {
					return // closed
				}
				got[i].Add(1)
			}
		}()
	}
	ctx, stop := context.WithCancel(t.Context())
	var sent atomic.Uint64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			for _, port := range []int{9, 5000} {
				if _, err := send.WriteToUDP([]byte("pipeline"), &net.UDPAddr{IP: dst, Port: port}); err == nil && port == 5000 {
					sent.Add(1)
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()

	const switches = 6
	uctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	for i := range switches {
		time.Sleep(100 * time.Millisecond) // traffic before and after each switch
		if _, err := lab.Update(uctx, variants[i%2], lab.UpOptions{Options: lb.opts}); err != nil {
			t.Fatalf("switch %d: %v", i, err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	stop()
	time.Sleep(200 * time.Millisecond) // the last datagrams in flight
	for _, c := range recv {
		c.Close()
	}
	wg.Wait()

	t.Logf("allowed udp/5000: %d sent, %d arrived; udp/9: %d arrived", sent.Load(), got[1].Load(), got[0].Load())
	if n := got[0].Load(); n != 0 {
		t.Errorf("%d udp/9 datagrams reached d1 while nfv's pipeline was switched: the firewall was skipped", n)
	}
	if got[1].Load() == 0 {
		t.Error("no allowed udp/5000 datagram reached d1: the test proves nothing")
	}
	// The node really switched: its last state is tc, its counters show
	// the XDP firewall stage worked in between.
	if st := lb.pipelineCounters(t, "nfv"); st["stage/firewall/drop"] == 0 || st["stage/firewall/next"] == 0 {
		t.Errorf("nfv pipeline counters %v: the firewall never ran at XDP", st)
	}
}
