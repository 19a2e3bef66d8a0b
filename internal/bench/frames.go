package bench

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/srchain/srchain/internal/srv6"
)

// Frame limits; they mirror bpf/bench/bench.h.
const (
	MaxFrame     = 2048 // BENCH_MAX_FRAME: largest template (bytes, no FCS)
	MaxTemplates = 64   // BENCH_MAX_TEMPLATES
	trailerLen   = 16   // BENCH_TRAILER_LEN: magic + timestamp
	fcsLen       = 4    // sizes are Ethernet frame sizes including the FCS (RFC 2544 section 9)
	minPayload   = trailerLen
)

// ErrFrame is returned for a frame specification that cannot be built.
var ErrFrame = errors.New("cannot build frame")

// Addresses of the benchmark line, fixed so cases can name them in DUT
// commands. The DUT owns fc00:d::/64 (SIDs); traffic goes from fc00:4::/64
// (10.4.0.0/16) to fc00:5::/64 (10.5.0.0/16), routed by the DUT to the sink;
// re-encapsulated traffic goes to fc00:6::/64, also routed to the sink.
var (
	GenAddr6  = netip.MustParseAddr("fc00:12::1")
	DUTIn6    = netip.MustParseAddr("fc00:12::2")
	DUTOut6   = netip.MustParseAddr("fc00:23::2")
	SinkAddr6 = netip.MustParseAddr("fc00:23::3")
	GenAddr4  = netip.MustParseAddr("10.12.0.1")
	DUTIn4    = netip.MustParseAddr("10.12.0.2")
	DUTOut4   = netip.MustParseAddr("10.23.0.2")
	SinkAddr4 = netip.MustParseAddr("10.23.0.3")

	InnerSrc6 = netip.MustParseAddr("fc00:4::1")
	InnerDst6 = netip.MustParseAddr("fc00:5::1")
	InnerSrc4 = netip.MustParseAddr("10.4.0.1")
	InnerDst4 = netip.MustParseAddr("10.5.0.1")
	ReEncap6  = netip.MustParseAddr("fc00:6::e")
)

// SID returns fc00:d::<n>, a SID on the DUT.
func SID(n uint16) netip.Addr {
	a := netip.MustParseAddr("fc00:d::").As16()
	a[14], a[15] = byte(n>>8), byte(n)
	return netip.AddrFrom16(a)
}

// FrameSpec says what a case sends. With no SIDs the frame is a plain
// IPv6 (or IPv4 when Inner4) UDP packet; with Encap it is H.Encaps'd by the
// generator (outer source GenAddr6, SRH with the SIDs in travel order);
// with Insert the SIDs are inserted as an SRH (H.Insert). TLVs go into
// the SRH's TLV area, after the segment list, in order (e.g. an OPoT TLV).
type FrameSpec struct {
	Encap  []netip.Addr
	Insert []netip.Addr
	Inner4 bool
	TLVs   []srv6.TLV
}

// Profile is the traffic shape of a run.
type Profile struct {
	// Size is the Ethernet frame size including FCS (RFC 2544 section 9);
	// 0 means the smallest frame the case can carry (16 payload bytes).
	// Sizes below a case's smallest frame are raised to it.
	Size int
	// IMIX replaces Size by the 7:4:1 mix of 192/576/1500 byte frames
	// (58.33/33.33/8.33 %, seed 001 Table 2).
	IMIX bool
	// Flows varies inner source/destination address and UDP source port
	// over this many flows (seed 002 section 4.3); 0 or 1 is one flow.
	Flows int
}

// imixSeq is the IMIX sequence: 7 x 192, 4 x 576, 1 x 1500, interleaved
// so that bursts are mixed.
var imixSeq = []int{192, 576, 192, 192, 576, 192, 1500, 192, 576, 192, 192, 576}

// Endpoints are the MAC addresses the generator's frames carry.
type Endpoints struct {
	Src, Dst net.HardwareAddr
}

// BuildTemplates returns the generator's templates for spec and prof,
// in the order the generator sends them.
func BuildTemplates(spec FrameSpec, prof Profile, ep Endpoints) ([][]byte, error) {
	flows := max(prof.Flows, 1)
	sizes := []int{prof.Size}
	if prof.IMIX {
		sizes = imixSeq
	}
	if len(sizes)*flows > MaxTemplates {
		return nil, fmt.Errorf("build templates: %d sizes x %d flows > %d: %w", len(sizes), flows, MaxTemplates, ErrFrame)
	}
	var out [][]byte
	for f := range flows {
		for _, sz := range sizes {
			fr, err := BuildFrame(spec, sz, f, ep)
			if err != nil {
				return nil, err
			}
			out = append(out, fr)
		}
	}
	return out, nil
}

// BuildFrame builds one frame of the given size (with FCS; 0 = smallest)
// for flow number flow.
func BuildFrame(spec FrameSpec, size, flow int, ep Endpoints) ([]byte, error) {
	if len(spec.Encap) > 0 && len(spec.Insert) > 0 {
		return nil, fmt.Errorf("build frame: both encap and insert: %w", ErrFrame)
	}
	if spec.Inner4 && len(spec.Encap) == 0 {
		return nil, fmt.Errorf("build frame: ipv4 needs encap: %w", ErrFrame)
	}
	if len(spec.TLVs) > 0 && len(spec.Encap) == 0 && len(spec.Insert) == 0 {
		return nil, fmt.Errorf("build frame: tlvs need an srh: %w", ErrFrame)
	}
	hdr, err := buildFrame(spec, flow, ep, 0)
	if err != nil {
		return nil, err
	}
	pay := max(size-fcsLen-len(hdr), minPayload)
	fr, err := buildFrame(spec, flow, ep, pay)
	if err != nil {
		return nil, err
	}
	if len(fr) > MaxFrame {
		return nil, fmt.Errorf("build frame: %d bytes > %d: %w", len(fr), MaxFrame, ErrFrame)
	}
	return fr, nil
}

func buildFrame(spec FrameSpec, flow int, ep Endpoints, payload int) ([]byte, error) {
	data := make([]byte, payload)
	for i := range data {
		data[i] = byte(i)
	}
	sport := uint16(1024 + flow)
	var pkt []byte
	if spec.Inner4 {
		pkt = srv6.UDP4(addrPlus(InnerSrc4, flow), addrPlus(InnerDst4, flow), sport, 9, data)
	} else {
		pkt = srv6.UDP6(addrPlus(InnerSrc6, flow), addrPlus(InnerDst6, flow), sport, 9, data)
	}
	var err error
	switch {
	case len(spec.Encap) > 0:
		pkt, err = srv6.Encap(GenAddr6, spec.Encap, pkt, spec.TLVs...)
	case len(spec.Insert) > 0:
		pkt, err = srv6.Insert(pkt, spec.Insert, spec.TLVs...)
	}
	if err != nil {
		return nil, fmt.Errorf("build frame: %w", err)
	}
	return srv6.Ether(ep.Dst, ep.Src, srv6.EtherTypeIPv6, pkt), nil
}

// addrPlus adds n to the last two bytes of a (flows stay inside a /64 or
// a /16).
func addrPlus(a netip.Addr, n int) netip.Addr {
	b := a.AsSlice()
	v := (int(b[len(b)-2])<<8 | int(b[len(b)-1])) + n
	b[len(b)-2], b[len(b)-1] = byte(v>>8), byte(v)
	r, _ := netip.AddrFromSlice(b)
	return r
}

// FlowOffset is the offset in spec's frames of the low 32 bits of the
// inner IPv6 source address (the only IPv6 header of a plain or H.Insert
// frame), the bytes the generator rewrites for per-packet flows
// (Case.Flows). It does not depend on the frame size.
func FlowOffset(spec FrameSpec) (int, error) {
	if spec.Inner4 {
		return 0, fmt.Errorf("find flow offset: per-packet flows need an ipv6 inner packet: %w", ErrFrame)
	}
	fr, err := buildFrame(spec, 0, Endpoints{}, minPayload)
	if err != nil {
		return 0, err
	}
	const eth, ip6, udp = 14, 40, 8
	hdr := eth // the IPv6 header of a plain or H.Insert frame
	if len(spec.Encap) > 0 {
		hdr = len(fr) - minPayload - udp - ip6
	}
	return hdr + 8 + 12, nil
}

// TLVOffset is the offset in spec's frames of the first byte of its first
// SRH TLV (right after the segment list of an H.Encaps frame). It does
// not depend on the frame size.
func TLVOffset(spec FrameSpec) (int, error) {
	if len(spec.Encap) == 0 || len(spec.TLVs) == 0 {
		return 0, fmt.Errorf("find tlv offset: needs encap and tlvs: %w", ErrFrame)
	}
	const eth, ip6, srh = 14, 40, 8
	return eth + ip6 + srh + 16*len(spec.Encap), nil
}
