// Package trace records what every node of a lab sees on the wire: one
// AF_PACKET socket per namespace (opened inside it with netns.NS.Do, read
// from an ordinary goroutine), every frame decoded with internal/srv6 into
// an Event that says where the packet was (node, interface, direction,
// kernel timestamp) and what it carried (outer addresses, SRH segments
// left and segment list, inner addresses and protocol).
//
// The demo and the end-to-end tests use it to prove the path a packet took:
// ordering every node's first sighting of a packet by kernel timestamp
// gives the hop sequence.
package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/srv6"
)

// Direction of a frame relative to the node.
type Direction string

const (
	In  Direction = "in"
	Out Direction = "out"
)

// Event is one frame seen by one node.
type Event struct {
	Node      string
	Interface string
	Dir       Direction
	Time      time.Time // kernel receive (or transmit) timestamp
	Len       int
	// Family of the outer header: 4 or 6.
	Family   int
	OuterSrc netip.Addr
	OuterDst netip.Addr
	// SRH fields; Segments is in travel order (first visited first).
	HasSRH   bool
	SL       uint8
	Segments []netip.Addr
	// Encapsulated says the SRH came with an outer IPv6 header around an
	// inner packet (H.Encaps), not inserted (H.Insert).
	Encapsulated bool
	// Inner is the packet the user sent: the inner header when
	// encapsulated; otherwise the outer header, except that under an
	// inserted SRH the final destination is Segment List[0] (RFC 8754
	// section 2; the outer destination is the active SID).
	InnerSrc netip.Addr
	InnerDst netip.Addr
	Proto    uint8 // innermost transport protocol
	// ICMPType is set for ICMP/ICMPv6; DstPort for UDP/TCP.
	ICMPType uint8
	DstPort  uint16
	// Nested are the SRHs of SR packets inside this one, outermost
	// first: a pathlet's binding SID (End.B6.Encaps) wraps the whole SR
	// packet in a new outer header and SRH.
	Nested []Layer
	// Err is a decode error (the frame is kept, with what could be read).
	Err error
	// Frame is the captured bytes (at most SnapLen, from the Ethernet
	// header on; Len is the length on the wire), for pcap files.
	Frame []byte
	// Inferred marks an event no capture saw, deduced from the frames
	// of the neighbours (a node whose XDP program forwards frames past
	// every packet socket; internal/lab throughXDP).
	Inferred bool
}

// Layer is the SRH of one SR packet nested in another.
type Layer struct {
	SL       uint8
	Segments []netip.Addr // travel order
}

// IsRequest reports whether the event is an ICMP echo request or UDP/TCP
// datagram (not an echo reply or an ICMP error), i.e. the forward direction
// of a probe.
func (e Event) IsRequest() bool {
	switch e.Proto {
	case srv6.ProtoICMP:
		return e.ICMPType == 8
	case srv6.ProtoICMPv6:
		return e.ICMPType == 128
	}
	return true
}

// Capture is a running trace of several namespaces.
type Capture struct {
	mu     sync.Mutex
	events []Event
	stop   chan struct{}
	wg     sync.WaitGroup
	rings  []*ring
}

// htons converts the AF_PACKET protocol to network byte order.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Ring geometry: frames hold the first ringFrame-64 bytes of a packet,
// plenty for the headers a trace decodes.
const (
	ringBlock  = 1 << 16
	ringBlocks = 32
	ringFrame  = 2048
)

// ring is a TPACKET_V2 receive ring. The kernel copies each frame into the
// ring when the packet passes the tap; a plain recvmsg would copy it only
// when read, by which time a later hop on the same host (veth) may already
// have rewritten the shared buffer (End changes SL and the destination in
// place).
type ring struct {
	fd  int
	mem []byte
	pos int
	// empty counts the times the reader found the ring empty: once it
	// moves after a Flush began, every frame tapped before is collected.
	empty atomic.Uint64
}

func openRing() (*ring, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return nil, fmt.Errorf("open packet socket: %w", err)
	}
	r := &ring{fd: fd}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		r.close()
		return nil, fmt.Errorf("set tpacket v2: %w", err)
	}
	req := unix.TpacketReq{Block_size: ringBlock, Block_nr: ringBlocks, Frame_size: ringFrame,
		Frame_nr: ringBlock / ringFrame * ringBlocks}
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		r.close()
		return nil, fmt.Errorf("set rx ring: %w", err)
	}
	r.mem, err = unix.Mmap(fd, 0, ringBlock*ringBlocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		r.close()
		return nil, fmt.Errorf("map rx ring: %w", err)
	}
	return r, nil
}

func (r *ring) close() {
	if r.mem != nil {
		_ = unix.Munmap(r.mem)
		r.mem = nil
	}
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}

// frame is one captured packet, copied out of the ring.
type frame struct {
	data    []byte
	wireLen int
	ifindex int
	pkttype uint8
	ts      time.Time
}

// next returns the next frame, waiting up to 100 ms.
func (r *ring) next() (frame, bool) {
	const frames = ringBlock / ringFrame * ringBlocks
	for range 2 {
		hdr := r.mem[r.pos*ringFrame : (r.pos+1)*ringFrame]
		status := (*uint32)(unsafe.Pointer(&hdr[0]))
		if atomic.LoadUint32(status)&unix.TP_STATUS_USER != 0 {
			// struct tpacket2_hdr, then struct sockaddr_ll at
			// TPACKET_ALIGN(sizeof(tpacket2_hdr)) = 32.
			ne := binary.NativeEndian
			f := frame{
				wireLen: int(ne.Uint32(hdr[4:8])),
				ts:      time.Unix(int64(ne.Uint32(hdr[16:20])), int64(ne.Uint32(hdr[20:24]))),
				ifindex: int(int32(ne.Uint32(hdr[36:40]))),
				pkttype: hdr[42],
			}
			snap, mac := int(ne.Uint32(hdr[8:12])), int(ne.Uint16(hdr[12:14]))
			if mac+snap <= len(hdr) {
				f.data = append([]byte(nil), hdr[mac:mac+snap]...)
			}
			atomic.StoreUint32(status, unix.TP_STATUS_KERNEL)
			r.pos = (r.pos + 1) % frames
			return f, true
		}
		r.empty.Add(1)
		fds := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, 20); err != nil && !errors.Is(err, unix.EINTR) {
			return frame{}, false
		}
	}
	return frame{}, false
}

// Start opens a capture ring in every namespace (node name -> NS) and
// starts reading. The caller keeps the NS handles open until Stop.
func Start(nodes map[string]*netns.NS) (*Capture, error) {
	c := &Capture{stop: make(chan struct{})}
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, node := range names {
		ns := nodes[node]
		var r *ring
		err := ns.Do(func() error {
			var err error
			r, err = openRing()
			return err
		})
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("start trace on %s: %w", node, err)
		}
		c.rings = append(c.rings, r)
		names, err := ifNames(ns)
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("start trace on %s: %w", node, err)
		}
		c.wg.Add(1)
		go c.read(node, r, names)
	}
	return c, nil
}

func ifNames(ns *netns.NS) (map[int]string, error) {
	links, err := ns.Netlink().LinkList()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	out := map[int]string{}
	for _, l := range links {
		if l.Attrs().Name == "lo" {
			continue
		}
		out[l.Attrs().Index] = l.Attrs().Name
	}
	return out, nil
}

func (c *Capture) read(node string, r *ring, names map[int]string) {
	defer c.wg.Done()
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		f, ok := r.next()
		if !ok {
			continue
		}
		ifname, ok := names[f.ifindex]
		if !ok {
			continue // loopback or an interface made after Start
		}
		ev := Decode(f.data)
		ev.Node, ev.Interface, ev.Len, ev.Time, ev.Frame = node, ifname, f.wireLen, f.ts, f.data
		ev.Dir = In
		if f.pkttype == unix.PACKET_OUTGOING {
			ev.Dir = Out
		}
		c.mu.Lock()
		c.events = append(c.events, ev)
		c.mu.Unlock()
	}
}

// Events returns a copy of what was seen so far, in timestamp order.
func (c *Capture) Events() []Event {
	c.mu.Lock()
	out := slices.Clone(c.events)
	c.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

// Flush waits until every reader has collected all frames its ring held
// when Flush was called (each one found its ring empty since), or until
// timeout. It reports whether all readers caught up.
func (c *Capture) Flush(timeout time.Duration) bool {
	marks := make([]uint64, len(c.rings))
	for i, r := range c.rings {
		marks[i] = r.empty.Load()
	}
	deadline := time.Now().Add(timeout)
	for {
		done := true
		for i, r := range c.rings {
			// +1 is not enough: that empty pass may have begun before
			// Flush; +2 is a whole pass that started after it.
			if r.empty.Load() < marks[i]+2 {
				done = false
				break
			}
		}
		if done {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Drain returns the events seen since the last Drain (or Reset) in
// timestamp order and forgets them; for streaming output.
func (c *Capture) Drain() []Event {
	c.mu.Lock()
	out := c.events
	c.events = nil
	c.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

// Reset forgets the events seen so far.
func (c *Capture) Reset() {
	c.mu.Lock()
	c.events = nil
	c.mu.Unlock()
}

// Stop ends the capture and closes its sockets.
func (c *Capture) Stop() {
	select {
	case <-c.stop:
		return
	default:
	}
	close(c.stop)
	c.wg.Wait()
	for _, r := range c.rings {
		r.close()
	}
}

// Decode turns one Ethernet frame into an Event (without node, interface,
// direction and time).
func Decode(frame []byte) Event {
	var ev Event
	eth, err := srv6.ParseEthernet(frame)
	if err != nil {
		ev.Err = err
		return ev
	}
	switch eth.EtherType {
	case srv6.EtherTypeIPv4:
		ev.Family = 4
		ip, err := srv6.ParseIPv4(frame[eth.Len():])
		if err != nil {
			ev.Err = err
			return ev
		}
		ev.OuterSrc, ev.OuterDst = ip.Src, ip.Dst
		ev.InnerSrc, ev.InnerDst, ev.Proto = ip.Src, ip.Dst, ip.Protocol
		l4 := frame[min(len(frame), eth.Len()+ip.HeaderLen()):]
		switch {
		case ip.Protocol == srv6.ProtoICMP && len(l4) >= 1:
			ev.ICMPType = l4[0]
		case (ip.Protocol == srv6.ProtoUDP || ip.Protocol == srv6.ProtoTCP) && len(l4) >= 4:
			ev.DstPort = binary.BigEndian.Uint16(l4[2:4])
		}
		return ev
	case srv6.EtherTypeIPv6:
	default:
		ev.Err = fmt.Errorf("decode frame: ethertype %#04x: %w", eth.EtherType, srv6.ErrNotIPv6)
		return ev
	}
	ev.Family = 6
	p, err := srv6.Decode(frame, true)
	ev.Err = err
	ev.OuterSrc, ev.OuterDst = p.Outer.Src, p.Outer.Dst
	if p.SRH != nil {
		ev.HasSRH = true
		ev.SL, ev.Segments = p.SRH.SegmentsLeft, travel(p.SRH)
	}
	ev.inner(p)
	// Pathlets (End.B6.Encaps) wrap the whole SR packet: the probe is the
	// innermost packet, and each SRH inside is a list the packet goes
	// back to when the pathlet around it ends.
	for off := 0; err == nil && p.Inner6 != nil && len(ev.Nested) < maxNested; {
		off += p.InnerOff
		q, qerr := srv6.Decode(frame[off:], false)
		if q.SRH == nil {
			break
		}
		p, err = q, qerr
		ev.Err = err
		ev.Nested = append(ev.Nested, Layer{SL: p.SRH.SegmentsLeft, Segments: travel(p.SRH)})
		ev.inner(p)
	}
	return ev
}

// maxNested bounds the SR packets decoded inside one frame.
const maxNested = 8

// travel returns an SRH's segment list in travel order.
func travel(h *srv6.SRH) []netip.Addr {
	out := make([]netip.Addr, 0, len(h.Segments))
	for _, s := range slices.Backward(h.Segments) {
		out = append(out, s)
	}
	return out
}

// inner sets the event's view of the user's packet from p: the packet
// inside the SR encapsulation, or under an inserted SRH p itself with the
// final destination in Segment List[0].
func (ev *Event) inner(p srv6.Packet) {
	ev.InnerSrc, ev.InnerDst, ev.Proto = p.Outer.Src, p.Outer.Dst, p.Outer.NextHeader
	if p.SRH != nil {
		if len(p.SRH.Segments) > 0 {
			ev.InnerDst = p.SRH.Segments[0]
		}
		ev.Proto = p.SRH.NextHeader
	}
	switch {
	case p.Inner4 != nil:
		ev.Encapsulated = true
		ev.InnerSrc, ev.InnerDst, ev.Proto = p.Inner4.Src, p.Inner4.Dst, p.Inner4.Protocol
	case p.Inner6 != nil:
		ev.Encapsulated = true
		ev.InnerSrc, ev.InnerDst, ev.Proto = p.Inner6.Src, p.Inner6.Dst, p.Inner6.NextHeader
	}
	ev.ICMPType, ev.DstPort = 0, 0
	if p.L4 != nil {
		ev.Proto = p.L4.Proto
		ev.ICMPType = p.L4.ICMPType
		ev.DstPort = p.L4.DstPort
	}
}
