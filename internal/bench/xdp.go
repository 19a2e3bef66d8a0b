package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/netns"
)

// Generator is the XDP live-frames generator of one line.
type Generator struct {
	tid  atomic.Int64 // thread running Blast (for its CPU time)
	objs xdpgenObjects
	ns   *netns.NS
	tmpl []byte // data_in of BPF_PROG_RUN: the largest template
}

// NewGenerator loads xdpgen for the line's generator veth.
func NewGenerator(l *Line) (*Generator, error) {
	spec, err := loadXdpgen()
	if err != nil {
		return nil, fmt.Errorf("load generator spec: %w", err)
	}
	if err := spec.Variables["cfg_ifindex"].Set(uint32(l.GenIndex)); err != nil {
		return nil, fmt.Errorf("set generator ifindex: %w", err)
	}
	g := &Generator{ns: l.Gen}
	if err := spec.LoadAndAssign(&g.objs, nil); err != nil {
		return nil, fmt.Errorf("load generator: %w", err)
	}
	return g, nil
}

// Close unloads the generator.
func (g *Generator) Close() error { return g.objs.Close() }

// SetTemplates installs the frames to send, in order.
func (g *Generator) SetTemplates(frames [][]byte) error {
	if len(frames) == 0 || len(frames) > MaxTemplates {
		return fmt.Errorf("set templates: %d frames: %w", len(frames), ErrFrame)
	}
	longest := 0
	for i, f := range frames {
		if len(f) > MaxFrame || len(f) < 14 {
			return fmt.Errorf("set template %d: %d bytes: %w", i, len(f), ErrFrame)
		}
		var t xdpgenTmpl
		t.Len = uint32(len(f))
		copy(t.Data[:], f)
		if err := g.objs.Templates.Put(uint32(i), &t); err != nil {
			return fmt.Errorf("set template %d: %w", i, err)
		}
		if len(f) > len(frames[longest]) {
			longest = i
		}
	}
	g.tmpl = frames[longest]
	if err := g.objs.Ntemplates.Set(uint32(len(frames))); err != nil {
		return fmt.Errorf("set template count: %w", err)
	}
	return nil
}

// SetFlows makes the generator rewrite the 4 bytes at off of every frame
// with 1 + (run counter mod flows) in network order; flows <= 1 turns it
// off.
func (g *Generator) SetFlows(flows, off int) error {
	if flows <= 1 {
		flows, off = 0, 0
	} else if off < 14 || off+4 > len(g.tmpl) {
		return fmt.Errorf("set flows: offset %d outside the %d-byte frame: %w", off, len(g.tmpl), ErrFrame)
	}
	if err := g.objs.FlowOff.Set(uint32(off)); err != nil {
		return fmt.Errorf("set flow offset: %w", err)
	}
	if err := g.objs.Flows.Set(uint32(flows)); err != nil {
		return fmt.Errorf("set flows: %w", err)
	}
	return nil
}

// SetStamp switches the latency trailer on or off.
func (g *Generator) SetStamp(on bool) error {
	v := uint32(0)
	if on {
		v = 1
	}
	if err := g.objs.Stamp.Set(v); err != nil {
		return fmt.Errorf("set stamp: %w", err)
	}
	return nil
}

// CPUTime returns the CPU time the thread running Blast has used so far.
// In the one-CPU layout the DUT's and the sink's receive processing runs
// in that thread's softirq context (the kernel flushes the redirected
// frames and runs NET_RX when the test run re-enables bottom halves), and
// this kernel has no IRQ time accounting (CONFIG_IRQ_TIME_ACCOUNTING is
// off), so softirq work done in the thread's context is charged to it:
// the thread's time is the cost of generator + DUT + sink per packet,
// independent of how much of the CPU other processes took.
func (g *Generator) CPUTime() (time.Duration, error) {
	tid := g.tid.Load()
	if tid == 0 {
		return 0, fmt.Errorf("read generator cpu time: not running")
	}
	return schedRuntime(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
}

// schedRuntime reads the on-CPU time (first field, ns) of a schedstat file.
func schedRuntime(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read cpu time: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("read cpu time of %s: empty", path)
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read cpu time of %s: %w", path, err)
	}
	return time.Duration(ns), nil
}

// ksoftirqdTime is the CPU time of ksoftirqd/cpu: NET_RX work the kernel
// deferred there is not charged to the generator thread, so a run
// records it to show how much of the work escaped the per-core rate.
func ksoftirqdTime(cpu int) time.Duration {
	want := fmt.Sprintf("ksoftirqd/%d", cpu)
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != want {
			continue
		}
		d, err := schedRuntime("/proc/" + e.Name() + "/schedstat")
		if err != nil {
			return 0
		}
		return d
	}
	return 0
}

// Sent returns the number of frames offered so far.
func (g *Generator) Sent() (uint64, error) {
	var n uint64
	if err := g.objs.Runs.Get(&n); err != nil {
		return 0, fmt.Errorf("read generator count: %w", err)
	}
	return n, nil
}

// LowRate is the highest paced rate (pps) sent with a batch of one run per
// BPF_PROG_RUN batch: the kernel flushes redirected frames once per batch,
// so with the full batch of 64 a stamped frame would wait for the 63 runs
// after it (spins when paced) before it leaves. Latency mode (10 kpps by
// default) and low PDR steps fall below it; faster rates keep 64 so the
// generator is not the limit.
const LowRate = 100e3

// pacing returns the generator's interval between frames (0 = full speed)
// and the BPF_PROG_RUN batch size for rate pps (0 = as fast as possible).
func pacing(rate float64) (interval uint64, batch uint32) {
	if rate <= 0 {
		return 0, 64
	}
	interval = uint64(1e9 / rate)
	if rate <= LowRate {
		return interval, 1
	}
	return interval, 64
}

// Blast sends until ctx is done or stop is closed, at rate pps (0 = as
// fast as possible), from a thread inside the generator's namespace (the
// redirect ifindex is resolved there) pinned to cpu (-1 = not pinned).
// It closes started (if not nil) once that thread is known, so CPUTime
// reads it, and before it enters the long BPF_PROG_RUN call; CPUTime
// fails again once Blast has returned.
//
// It makes one long BPF_PROG_RUN call (each call costs a fixed ~10 ms of
// page-pool set-up, see bpf/bench/xdpgen.c) and ends it by signalling the
// thread: the kernel's test-run loop returns EINTR on a pending signal.
// cilium/ebpf's Program.Run would retry on EINTR, hence the raw syscall.
func (g *Generator) Blast(ctx context.Context, stop <-chan struct{}, rate float64, cpu int, started chan<- struct{}) error {
	if g.tmpl == nil {
		return fmt.Errorf("blast: no templates: %w", ErrFrame)
	}
	interval, batch := pacing(rate)
	if err := g.objs.IntervalNs.Set(interval); err != nil {
		return fmt.Errorf("set pacing: %w", err)
	}
	if err := g.objs.NextNs.Set(uint64(0)); err != nil {
		return fmt.Errorf("set pacing: %w", err)
	}
	tidc := make(chan int, 1)
	done := make(chan struct{})
	go func() {
		// Interrupter: once asked to stop, signal the generator thread
		// until its call returns (a signal that lands between calls is
		// lost, so repeat).
		var tid int
		select {
		case tid = <-tidc:
		case <-done:
			return // never entered the namespace
		}
		select {
		case <-stop:
		case <-ctx.Done():
		case <-done:
			return
		}
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			_ = unix.Tgkill(unix.Getpid(), tid, unix.SIGURG)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	defer close(done)
	return g.ns.Do(func() error {
		tid := unix.Gettid()
		g.tid.Store(int64(tid))
		// A later Blast runs on another thread: never let a reader mix
		// this thread's CPU time with the next one's.
		defer g.tid.Store(0)
		tidc <- tid
		if cpu >= 0 {
			var old, set unix.CPUSet
			if err := unix.SchedGetaffinity(0, &old); err == nil {
				set.Set(cpu)
				if err := unix.SchedSetaffinity(0, &set); err == nil {
					// Do hands the thread back to the runtime: undo the pin.
					defer unix.SchedSetaffinity(0, &old)
				}
			}
		}
		if started != nil {
			close(started)
		}
		for {
			select {
			case <-stop:
				return nil
			case <-ctx.Done():
				return nil
			default:
			}
			err := progRunLive(g.objs.Xdpgen.FD(), g.tmpl, math.MaxUint32, batch)
			if err != nil && !errors.Is(err, unix.EINTR) {
				return fmt.Errorf("run generator: %w", err)
			}
		}
	})
}

// progTestRunAttr is the BPF_PROG_TEST_RUN member of union bpf_attr
// (include/uapi/linux/bpf.h).
type progTestRunAttr struct {
	progFD, retval          uint32
	dataSizeIn, dataSizeOut uint32
	dataIn, dataOut         uint64
	repeat, duration        uint32
	ctxSizeIn, ctxSizeOut   uint32
	ctxIn, ctxOut           uint64
	flags, cpu, batchSize   uint32
	_                       uint32
}

func progRunLive(fd int, data []byte, repeat, batch uint32) error {
	attr := progTestRunAttr{
		progFD:     uint32(fd),
		dataSizeIn: uint32(len(data)),
		dataIn:     uint64(uintptr(unsafe.Pointer(&data[0]))),
		repeat:     repeat,
		flags:      unix.BPF_F_TEST_XDP_LIVE_FRAMES,
		batchSize:  batch,
	}
	_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_TEST_RUN, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(data)
	if errno != 0 {
		return errno
	}
	return nil
}

// Sink is the drop-and-count XDP program at the line's sink.
type Sink struct {
	objs sinkObjects
	lk   link.Link
}

// NewSink loads the sink program and attaches it to the sink veth.
func NewSink(l *Line) (*Sink, error) {
	s := &Sink{}
	if err := loadSinkObjects(&s.objs, nil); err != nil {
		return nil, fmt.Errorf("load sink: %w", err)
	}
	err := l.Sink.Do(func() error {
		lk, err := link.AttachXDP(link.XDPOptions{Program: s.objs.Sink, Interface: l.SinkIndex})
		if err != nil {
			return fmt.Errorf("attach sink to %s: %w", ifSink, err)
		}
		s.lk = lk
		return nil
	})
	if err != nil {
		s.objs.Close()
		return nil, err
	}
	return s, nil
}

// Close detaches and unloads the sink.
func (s *Sink) Close() error {
	var errs []error
	if s.lk != nil {
		errs = append(errs, s.lk.Close())
	}
	errs = append(errs, s.objs.Close())
	return errors.Join(errs...)
}

// SinkCount is what the sink saw.
type SinkCount struct {
	Packets, Bytes, Stamped uint64
}

// Count sums the sink's per-CPU counters.
func (s *Sink) Count() (SinkCount, error) {
	var per []sinkSinkStats
	if err := s.objs.Stats.Lookup(uint32(0), &per); err != nil {
		return SinkCount{}, fmt.Errorf("read sink counters: %w", err)
	}
	var c SinkCount
	for _, p := range per {
		c.Packets += p.Packets
		c.Bytes += p.Bytes
		c.Stamped += p.Stamped
	}
	return c, nil
}

// ResetLatency restarts the latency sample ring.
func (s *Sink) ResetLatency() error {
	if err := s.objs.LatNext.Set(uint64(0)); err != nil {
		return fmt.Errorf("reset latency samples: %w", err)
	}
	return nil
}

// Latencies returns the samples recorded since ResetLatency (at most the
// ring size, the most recent ones), in nanoseconds.
func (s *Sink) Latencies() ([]float64, error) {
	var n uint64
	if err := s.objs.LatNext.Get(&n); err != nil {
		return nil, fmt.Errorf("read latency count: %w", err)
	}
	n = min(n, latSamples)
	out := make([]float64, 0, n)
	for i := range uint32(n) {
		var v uint64
		if err := s.objs.LatSamples.Lookup(i, &v); err != nil {
			return nil, fmt.Errorf("read latency sample %d: %w", i, err)
		}
		if v > 0 {
			out = append(out, float64(v))
		}
	}
	return out, nil
}

const latSamples = 65536 // BENCH_LAT_SAMPLES
