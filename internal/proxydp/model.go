package proxydp

import (
	"bytes"
	"encoding/binary"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/srv6"
)

// Verdict is what a proxy program does with a packet.
type Verdict int

// Verdicts.
const (
	Pass    Verdict = iota // not the proxy's: untouched, TC_ACT_UNSPEC (the next tcx program, then the stack)
	Drop                   // dropped, Result.Reason counted
	ToNF                   // sent out of IFACE-OUT to the NF (bpf_redirect_neigh)
	Forward                // from the NF, rewritten, forwarded into SR (FIB redirect or stack)
	ICMP                   // turned into an ICMPv6 error sent back out of IFACE-IN
)

func (v Verdict) String() string {
	return [...]string{"pass", "drop", "to-nf", "forward", "icmp"}[v]
}

// Result is the model's outcome for one packet.
type Result struct {
	Verdict Verdict
	Reason  drop.Reason // Drop; ICMP: drop.HopLimit for End's check on the way in (else drop.ProxyTTL is counted)
	// Packet is the L3 packet out (ToNF, Forward, ICMP). For Forward it
	// is what the stack gets when the FIB lookup fails; on a FIB success
	// the program also decrements the outer hop limit and sets the MACs.
	Packet  []byte
	Ifindex int        // ToNF: IFACE-OUT
	NextHop netip.Addr // ToNF: the NF's address (invalid: the packet's DA, on-link)
	IPv4    bool       // Packet is IPv4 (ToNF of an IPv4 inner packet)
	// L2: ToNF of an Ethernet inner type: Packet is the whole frame, sent
	// as it is (bpf_redirect, no next hop).
	L2 bool
	// OPoTAt is 1 + the offset in Packet of the OPoT TLV a Forward from
	// the NF carries (0: none); which of the TLVs kept for that packet
	// it is, is the program's choice (OPoTSwap).
	OPoTAt   int
	opotKey  opotKey
	opotKept [][opot.TLVLen]byte
}

// FlowKey is the End.AD.flow cache key (struct proxy_flow_key).
type FlowKey struct {
	SID           netip.Addr
	Family, Proto uint8
	Sport, Dport  uint16
	Src, Dst      netip.Addr
}

// flowEntry is struct proxy_flow: the flow's header slot (within its
// SID) and the slot's generation when the flow took it, the first word of
// its outer header, its last use.
type flowEntry struct {
	slot  uint32
	gen   uint32
	word0 [4]byte
	last  time.Duration
}

// slotKey names a header slot: the SID and the slot within its table.
type slotKey struct {
	sid  netip.Addr
	slot uint32
}

// hdrSlot is a proxy_hslots value: the header stack, first word zeroed,
// and where its OPoT TLV is (proxy_hdr.tlv).
type hdrSlot struct {
	hdr []byte
	gen uint32
	tlv int
}

// Model is the reference of bpf/proxy.c on one node: the same SID table,
// its own caches and clock.
type Model struct {
	sids  map[netip.Addr]SID
	byIn  map[int]SID
	ad    map[int][]byte
	adTLV map[int]int                     // proxy_hdr.tlv of ad's header
	opot  map[opotKey][][opot.TLVLen]byte // kept TLVs per inner packet, oldest first
	flows map[FlowKey]flowEntry
	slots map[slotKey]hdrSlot
	gens  map[slotKey]uint64 // proxy_hgen
	// Replaced counts header slots given another header (hdr-replace).
	Replaced int
	// Now is the model's clock (bpf_ktime_get_ns), set by the caller.
	Now time.Duration
	// Hop is the node's OPoT transit that the proxy does itself
	// (Options.OPoT, the chain's entry marked for it: proxy_opot_hop):
	// from the packet's DA (the proxy SID), its segment[0] and its TLV
	// as it arrived, the TLV kept for the way back. Nil: the TLV is kept
	// as it came.
	Hop func(da, last netip.Addr, tlv [opot.TLVLen]byte) [opot.TLVLen]byte
}

// NewModel is a model serving sids (validated as SetSIDs does).
func NewModel(sids []SID) (*Model, error) {
	m := &Model{sids: map[netip.Addr]SID{}, byIn: map[int]SID{}, ad: map[int][]byte{}, adTLV: map[int]int{},
		opot: map[opotKey][][opot.TLVLen]byte{}, flows: map[FlowKey]flowEntry{},
		slots: map[slotKey]hdrSlot{}, gens: map[slotKey]uint64{}}
	for _, s := range sids {
		if err := s.Validate(); err != nil {
			return nil, err
		}
		m.sids[s.Addr] = s
		m.byIn[s.InIfindex] = s
	}
	return m, nil
}

// ADCache returns End.AD's cached header for IFACE-IN in (payload length 0).
func (m *Model) ADCache(in int) ([]byte, bool) {
	h, ok := m.ad[in]
	return h, ok
}

func dropped(r drop.Reason) Result { return Result{Verdict: Drop, Reason: r} }

// Limits the C walks with (bpf/lib/srv6_encap.h, bpf/lib/ctx.h).
const (
	decapMaxExt = 6
	ctxMaxRoom  = 1024
)

// srhParse is srh_parse: locate (Hop-by-Hop / Destination Options only)
// and validate.
func srhParse(pkt []byte) (srv6.SRH, int, drop.Reason) {
	w := srv6.ExtWalk{Off: srv6.IPv6HeaderLen, NextHeader: pkt[6]}
	if err := srv6.WalkExt(pkt, &w, srv6.WalkOpts, srv6.MaxExtHeaders, 0); err != nil {
		return srv6.SRH{}, 0, drop.PktTruncated
	}
	if w.NextHeader != srv6.ProtoRouting {
		return srv6.SRH{}, 0, drop.NoSRH
	}
	if w.Off > len(pkt) {
		return srv6.SRH{}, 0, drop.SRHTruncated
	}
	s, err := srv6.ParseSRHReduced(pkt[w.Off:])
	if err != nil {
		return srv6.SRH{}, 0, srv6.Reason(err)
	}
	return s, w.Off, drop.None
}

func isSID(m *Model, pkt []byte) (SID, bool) {
	// Like the program: the Ethernet type says IPv6, the version nibble
	// is not looked at.
	if len(pkt) < srv6.IPv6HeaderLen {
		return SID{}, false
	}
	s, ok := m.sids[netip.AddrFrom16([16]byte(pkt[24:40]))]
	return s, ok
}

// FromSR is srchain_proxy_sr on the IPv6 packet pkt (L3).
func (m *Model) FromSR(pkt []byte) Result {
	s, ok := isSID(m, pkt)
	if !ok {
		return Result{Verdict: Pass}
	}
	return m.sr(s, pkt)
}

// lenBad is proxy_len_bad: the IPv6 payload length runs past the bytes.
func lenBad(pkt []byte) bool { return 40+int(binary.BigEndian.Uint16(pkt[4:6])) > len(pkt) }

func (m *Model) sr(s SID, pkt []byte) Result {
	if lenBad(pkt) {
		return dropped(drop.PktTruncated)
	}
	srh, srhOff, r := srhParse(pkt)
	haveSRH := r == drop.None
	if !haveSRH && !(r == drop.NoSRH && s.Behavior == BehaviorAS) {
		return dropped(r)
	}
	if s.Behavior != BehaviorAS && srh.SegmentsLeft == 0 {
		return dropped(drop.SRHSLZero)
	}
	// End's hop limit check (RFC 8986 4.1 S05-S07), which the dynamic
	// and masquerading proxies apply before they cache or forward the
	// outer header: ICMPv6 Time Exceeded to the source, counted as
	// hop-limit. End.AS terminates the outer header (as End.DX* do).
	if s.Behavior != BehaviorAS && pkt[7] <= 1 {
		r := m.timeExceeded(s, pkt)
		r.Reason = drop.HopLimit
		return r
	}
	if s.Behavior == BehaviorAM || s.Behavior == BehaviorAMNAT {
		out := append([]byte(nil), pkt...)
		d := srh.Segments[0].As16()
		copy(out[24:40], d[:])
		return Result{Verdict: ToNF, Packet: out, Ifindex: s.OutIfindex, NextHop: s.NFNext6}
	}
	w := srv6.ExtWalk{Off: srv6.IPv6HeaderLen, NextHeader: pkt[6]}
	if err := srv6.WalkExt(pkt, &w, srv6.WalkAll, decapMaxExt, ctxMaxRoom); err != nil {
		return dropped(drop.PktTruncated)
	}
	if w.NonFirst || w.NextHeader != s.Inner {
		return dropped(drop.ProxyWrongInner)
	}
	hlen := w.Off
	if hlen >= ctxMaxRoom {
		return dropped(drop.Unsupported)
	}
	need := 40
	switch s.Inner {
	case ProtoIPv4:
		need = 20
	case ProtoEthernet:
		need = 14
	}
	if hlen+need > len(pkt) {
		return dropped(drop.PktTruncated)
	}
	if s.Behavior == BehaviorAD || s.Behavior == BehaviorADFlow {
		if !haveSRH {
			return dropped(drop.NoSRH)
		}
		if hlen > HdrMax {
			return dropped(drop.ProxyHdrTooBig)
		}
		hdr := append([]byte(nil), pkt[:hlen]...)
		hdr[4], hdr[5] = 0, 0
		hdr[srhOff+3] = srh.SegmentsLeft - 1
		d := srh.Segments[srh.SegmentsLeft-1].As16()
		copy(hdr[24:40], d[:])
		tlv := 0
		if s.OPoT {
			if off, ok := opotTLVOff(srh, srhOff); ok {
				k, r := opotKeyOf(s.Addr, pkt[hlen:], s.Inner)
				if r != drop.None {
					return dropped(r)
				}
				kept := [opot.TLVLen]byte(pkt[off : off+opot.TLVLen])
				if m.Hop != nil {
					kept = m.Hop(netip.AddrFrom16([16]byte(pkt[24:40])), srh.Segments[0], kept)
				}
				m.opotSave(k, kept)
				hdr[off+opot.OffSlot] = 0
				clear(hdr[off+opot.OffRND : off+opot.TLVLen])
				tlv = off + 1
			}
		}
		if s.Behavior == BehaviorAD {
			m.ad[s.InIfindex] = hdr
			m.adTLV[s.InIfindex] = tlv
		} else {
			k, r := flowKey(s.Addr, pkt[hlen:], s.Inner)
			if r != drop.None {
				return dropped(r)
			}
			m.flowWrite(s.Addr, k, hdr, tlv)
		}
	}
	res := Result{Verdict: ToNF, Packet: append([]byte(nil), pkt[hlen:]...), Ifindex: s.OutIfindex, NextHop: s.NFNext6}
	switch s.Inner {
	case ProtoIPv4:
		res.NextHop, res.IPv4 = s.NFNext4, true
	case ProtoEthernet:
		res.NextHop, res.L2 = netip.Addr{}, true
	}
	return res
}

// flowKey is proxy_flow_key_of on the inner packet.
func flowKey(sid netip.Addr, p []byte, inner uint8) (FlowKey, drop.Reason) {
	k := FlowKey{SID: sid}
	var l4 int
	ports := false
	if inner == ProtoIPv6 {
		if len(p) < 40 {
			return k, drop.PktTruncated
		}
		k.Family, k.Proto = 6, p[6]
		k.Src, k.Dst = netip.AddrFrom16([16]byte(p[8:24])), netip.AddrFrom16([16]byte(p[24:40]))
		l4, ports = 40, true
	} else {
		if len(p) < 20 {
			return k, drop.PktTruncated
		}
		k.Family, k.Proto = 4, p[9]
		k.Src, k.Dst = netip.AddrFrom4([4]byte(p[12:16])), netip.AddrFrom4([4]byte(p[16:20]))
		l4 = int(p[0]&0xf) * 4
		ports = binary.BigEndian.Uint16(p[6:8])&0x3fff == 0
	}
	if ports && (k.Proto == 6 || k.Proto == 17) {
		if l4+4 > len(p) {
			return k, drop.PktTruncated
		}
		k.Sport, k.Dport = binary.BigEndian.Uint16(p[l4:]), binary.BigEndian.Uint16(p[l4+2:])
	}
	return k, drop.None
}

// flowWrite is the End.AD.flow cache write of bpf/lib/proxy.h for flow k
// of sid with header stack hdr: the flow keeps the first word, the rest
// goes to a header slot; the flow's value is rewritten only when its
// slot, generation or first word change.
func (m *Model) flowWrite(sid netip.Addr, k FlowKey, hdr []byte, tlv int) {
	word0 := [4]byte(hdr[:4])
	rest := append([]byte(nil), hdr...)
	copy(rest[:4], []byte{0, 0, 0, 0})
	if e, ok := m.flows[k]; ok && e.word0 == word0 {
		if hs, ok := m.slots[slotKey{sid, e.slot}]; ok && hs.gen == e.gen && bytes.Equal(hs.hdr, rest) {
			m.flows[k] = m.touch(m.sids[sid], e)
			return
		}
	}
	slot, gen := m.slotTake(sid, rest, tlv)
	m.flows[k] = flowEntry{slot: slot, gen: gen, word0: word0, last: m.Now}
}

// touch is proxy_flow_touch: the last use is refreshed when older than
// 1/1024 of the idle timeout (none: never).
func (m *Model) touch(s SID, e flowEntry) flowEntry {
	if s.FlowTimeout > 0 && m.Now-e.last > s.FlowTimeout>>10 {
		e.last = m.Now
	}
	return e
}

// hdrHash is proxy_hdr_hash.
func hdrHash(h []byte) uint64 {
	const c = 0x9e3779b97f4a7c15
	x := uint64(len(h)) * c
	for i := 0; i+8 <= len(h); i += 8 {
		x ^= binary.LittleEndian.Uint64(h[i:])
		x *= c
		x ^= x >> 29
	}
	return x ^ x>>32
}

// slotTake is proxy_hslot_take: the slot of sid's header table holding
// hdr (first word zeroed), taken or replaced if none does.
func (m *Model) slotTake(sid netip.Addr, hdr []byte, tlv int) (slot, gen uint32) {
	h := hdrHash(hdr)
	base := uint32(h%hdrBuckets) * hdrWays
	empty := uint32(hdrWays)
	for w := uint32(0); w < hdrWays; w++ {
		hs, ok := m.slots[slotKey{sid, base + w}]
		if !ok {
			if empty == hdrWays {
				empty = w
			}
			continue
		}
		if bytes.Equal(hs.hdr, hdr) {
			return base + w, hs.gen
		}
	}
	if empty == hdrWays {
		empty = uint32(h>>32) % hdrWays
		m.Replaced++
	}
	sk := slotKey{sid, base + empty}
	m.gens[sk]++
	gen = uint32(m.gens[sk])
	m.slots[sk] = hdrSlot{hdr: hdr, gen: gen, tlv: tlv}
	return base + empty, gen
}

// flowHdr is the header flow entry e of sid pushes and its OPoT TLV
// place, or false when its slot holds another generation (a miss).
func (m *Model) flowHdr(sid netip.Addr, e flowEntry) ([]byte, int, bool) {
	hs, ok := m.slots[slotKey{sid, e.slot}]
	if !ok || hs.gen != e.gen {
		return nil, 0, false
	}
	hdr := append([]byte(nil), hs.hdr...)
	copy(hdr[:4], e.word0[:])
	return hdr, hs.tlv, true
}

// Flow returns End.AD.flow's entry for the inner packet p of sid: the
// header it would push, its slot in sid's header table and its last use.
// ok is false when there is no entry or its slot holds another header.
func (m *Model) Flow(sid SID, p []byte) (hdr []byte, slot uint32, last time.Duration, ok bool) {
	k, r := flowKey(sid.Addr, p, sid.Inner)
	if r != drop.None {
		return nil, 0, 0, false
	}
	e, ok := m.flows[k]
	if !ok {
		return nil, 0, 0, false
	}
	hdr, _, ok = m.flowHdr(sid.Addr, e)
	return hdr, e.slot, e.last, ok
}

// EtherType values FromNF distinguishes.
const (
	EtherIPv6 = 0x86dd
	EtherIPv4 = 0x0800
)

// FromNFL2 is srchain_proxy_nf on a whole frame received on ifindex in
// that is the IFACE-IN of an End.AS / End.AD SID with an Ethernet inner
// type: everything but the IEEE 802.1D link-local group goes behind the
// header, untouched. Forward's Packet is what the FIB step gets (outer
// IPv6 + stack + the frame); the program then decrements the outer hop
// limit and redirects, or drops (proxy-l2-no-route) when it cannot.
func (m *Model) FromNFL2(in int, frame []byte) Result {
	s, ok := m.byIn[in]
	if !ok || s.Inner != ProtoEthernet {
		return Result{Verdict: Pass}
	}
	if len(frame) >= 6 && frame[0] == 0x01 && frame[1] == 0x80 && frame[2] == 0xc2 && frame[3] == 0 && frame[4] == 0 && frame[5]&0xf0 == 0 {
		return Result{Verdict: Pass}
	}
	var hdr []byte
	switch s.Behavior {
	case BehaviorAS:
		hdr, _ = s.ASHeader()
	case BehaviorAD:
		h, ok := m.ad[in]
		if !ok {
			return dropped(drop.ProxyNoCache)
		}
		hdr = h
	default:
		return dropped(drop.Unsupported)
	}
	if len(frame)+len(hdr)-40 > 0xffff {
		return dropped(drop.Unsupported)
	}
	out := append(append([]byte(nil), hdr...), frame...)
	binary.BigEndian.PutUint16(out[4:6], uint16(len(out)-40))
	return Result{Verdict: Forward, Packet: out}
}

// FromNF is srchain_proxy_nf on a frame of type etherType whose L3
// bytes are pkt, received on ifindex in.
func (m *Model) FromNF(in int, etherType uint16, pkt []byte) Result {
	s, ok := m.byIn[in]
	if !ok {
		return Result{Verdict: Pass}
	}
	if etherType == EtherIPv6 {
		if t, ok := isSID(m, pkt); ok {
			return m.sr(t, pkt)
		}
	}
	if s.Inner == ProtoEthernet {
		return dropped(drop.Unsupported) // whole frames: FromNFL2
	}
	if control(etherType, pkt) {
		return Result{Verdict: Pass}
	}
	if s.Behavior == BehaviorAM || s.Behavior == BehaviorAMNAT {
		if etherType != EtherIPv6 {
			return dropped(drop.ProxyWrongInner)
		}
		return m.amBack(s, pkt)
	}
	if (s.Inner == ProtoIPv6) != (etherType == EtherIPv6) {
		return dropped(drop.ProxyWrongInner)
	}
	inner := append([]byte(nil), pkt...)
	var l3len int
	if s.Inner == ProtoIPv6 {
		if len(inner) < 40 {
			return dropped(drop.PktTruncated)
		}
		l3len = 40 + int(binary.BigEndian.Uint16(inner[4:6]))
		if l3len > len(inner) {
			return dropped(drop.PktTruncated)
		}
		if inner[7] <= 1 {
			return m.timeExceeded(s, pkt)
		}
		inner[7]--
	} else {
		if len(inner) < 20 {
			return dropped(drop.PktTruncated)
		}
		l3len = int(binary.BigEndian.Uint16(inner[2:4]))
		if ihl := int(inner[0] & 0xf); ihl < 5 || ihl*4 > l3len || l3len > len(inner) {
			return dropped(drop.PktTruncated)
		}
		if inner[8] <= 1 {
			return dropped(drop.ProxyTTL)
		}
		inner[8]--
		// RFC 1624 incremental update of the header checksum.
		old := binary.BigEndian.Uint16(inner[10:12])
		sum := uint32(^old) + uint32(^uint16(uint16(inner[8]+1)<<8|uint16(inner[9]))) + uint32(uint16(inner[8])<<8|uint16(inner[9]))
		for sum>>16 != 0 {
			sum = sum&0xffff + sum>>16
		}
		binary.BigEndian.PutUint16(inner[10:12], ^uint16(sum))
	}
	var hdr []byte
	tlv := 0
	switch s.Behavior {
	case BehaviorAS:
		hdr, _ = s.ASHeader()
	case BehaviorAD:
		h, ok := m.ad[in]
		if !ok {
			return dropped(drop.ProxyNoCache)
		}
		hdr, tlv = h, m.adTLV[in]
	case BehaviorADFlow:
		k, r := flowKey(s.Addr, inner, s.Inner)
		if r != drop.None {
			return dropped(r)
		}
		e, ok := m.flows[k]
		if !ok || (s.FlowTimeout > 0 && m.Now-e.last > s.FlowTimeout) {
			return dropped(drop.ProxyFlowMiss)
		}
		h, t, ok := m.flowHdr(s.Addr, e)
		if !ok {
			return dropped(drop.ProxyFlowMiss)
		}
		m.flows[k] = m.touch(s, e)
		hdr, tlv = h, t
	}
	var (
		saved [opot.TLVLen]byte
		kept  [][opot.TLVLen]byte
		key   opotKey
	)
	if tlv != 0 {
		k, r := opotKeyOf(s.Addr, inner, s.Inner)
		if r != drop.None {
			return dropped(r)
		}
		v, all, ok := m.opotTake(k)
		if !ok {
			return dropped(drop.ProxyOPoTMiss)
		}
		saved, kept, key = v, all, k
	}
	inner = inner[:l3len]
	if len(inner)+len(hdr)-40 > 0xffff {
		return dropped(drop.Unsupported)
	}
	out := append(append([]byte(nil), hdr...), inner...)
	binary.BigEndian.PutUint16(out[4:6], uint16(len(out)-40))
	if tlv != 0 {
		copy(out[tlv-1:], saved[:])
		return Result{Verdict: Forward, Packet: out, OPoTAt: tlv, opotKey: key, opotKept: kept}
	}
	return Result{Verdict: Forward, Packet: out}
}

func (m *Model) amBack(s SID, pkt []byte) Result {
	if len(pkt) < 40 || lenBad(pkt) {
		return dropped(drop.PktTruncated)
	}
	srh, off, r := srhParse(pkt)
	if r != drop.None {
		return dropped(r)
	}
	if srh.SegmentsLeft == 0 {
		return dropped(drop.SRHSLZero)
	}
	if pkt[7] <= 1 {
		return m.timeExceeded(s, pkt)
	}
	out := append([]byte(nil), pkt...)
	if s.Behavior == BehaviorAMNAT {
		copy(out[off+8:off+24], pkt[24:40]) // SRH[0] = the DA the packet came back with
	}
	sl := srh.SegmentsLeft - 1
	out[off+3] = sl
	d := srh.Segments[sl].As16()
	if s.Behavior == BehaviorAMNAT && sl == 0 {
		copy(d[:], pkt[24:40])
	}
	copy(out[24:40], d[:])
	return Result{Verdict: Forward, Packet: out}
}

// timeExceeded is the ICMPv6 Time Exceeded (hop limit) the proxy sends
// back where the packet came from (the NF, or the SR source for End's
// check on the way in): from the SID to the invoking source, hop limit
// 64, quoting as much of the invoking packet as fits 1280 bytes.
func (m *Model) timeExceeded(s SID, pkt []byte) Result {
	quote := pkt[:min(len(pkt), 1280-48)]
	body := make([]byte, 8, 8+len(quote))
	body[0] = 3
	body = append(body, quote...)
	dst := netip.AddrFrom16([16]byte(pkt[8:24]))
	binary.BigEndian.PutUint16(body[2:4], srv6.L4Checksum(s.Addr, dst, 58, body))
	h := srv6.IPv6{PayloadLen: uint16(len(body)), NextHeader: 58, HopLimit: 64, Src: s.Addr, Dst: dst}
	return Result{Verdict: ICMP, Packet: append(h.AppendTo(nil), body...)}
}

// control is proxy_control: traffic of the link itself, not the chain's.
func control(etherType uint16, p []byte) bool {
	switch etherType {
	case EtherIPv6:
		if len(p) < 40 {
			return true
		}
		src, dst := netip.AddrFrom16([16]byte(p[8:24])), netip.AddrFrom16([16]byte(p[24:40]))
		if dst.IsMulticast() || src.IsLinkLocalUnicast() || dst.IsLinkLocalUnicast() {
			return true
		}
		if p[6] == 58 && len(p) > 40 && (p[40] >= 130 && p[40] <= 137 || p[40] == 143) {
			return true
		}
		return false
	case EtherIPv4:
		if len(p) < 20 {
			return true
		}
		d := binary.BigEndian.Uint32(p[16:20])
		s := binary.BigEndian.Uint32(p[12:16])
		return d == 0xffffffff || d>>28 == 0xe || d>>16 == 0xa9fe || s>>16 == 0xa9fe
	}
	return true
}

// clone is a copy of m with its own caches.
func (m *Model) clone() *Model {
	c := *m
	c.ad = maps.Clone(m.ad)
	c.adTLV = maps.Clone(m.adTLV)
	c.opot = make(map[opotKey][][opot.TLVLen]byte, len(m.opot))
	for k, v := range m.opot {
		c.opot[k] = slices.Clone(v)
	}
	c.flows = make(map[FlowKey]flowEntry, len(m.flows))
	for k, v := range m.flows {
		c.flows[k] = v
	}
	c.slots = make(map[slotKey]hdrSlot, len(m.slots))
	for k, v := range m.slots {
		c.slots[k] = v
	}
	c.gens = make(map[slotKey]uint64, len(m.gens))
	for k, v := range m.gens {
		c.gens[k] = v
	}
	return &c
}

// opotKey is struct proxy_opot_key: one inner packet, as a forwarding
// NF leaves it (not its hop limit / TTL or IPv4 header checksum).
type opotKey struct {
	sid           netip.Addr
	family, proto uint8
	len           uint16
	id            uint32
	l4len         int
	src, dst      [16]byte
	l4            [16]byte
}

// opotSave keeps tlv for the packet k names. The program keeps it in a
// slot, a map entry or a queue behind identical packets' (bpf/lib/proxy.h
// proxy_opot_save); the model keeps what that guarantees: the TLVs kept
// per packet, each given back once.
func (m *Model) opotSave(k opotKey, tlv [opot.TLVLen]byte) {
	m.opot[k] = append(m.opot[k], tlv)
}

// opotTake gives back one of the TLVs kept for k (the oldest), and all
// of them: identical packets are interchangeable, so the program may
// give any one (docs/proxy.md "OPoT through a proxy"; OPoTSwap).
func (m *Model) opotTake(k opotKey) (tlv [opot.TLVLen]byte, kept [][opot.TLVLen]byte, ok bool) {
	kept = m.opot[k]
	if len(kept) == 0 {
		return tlv, nil, false
	}
	if len(kept) == 1 {
		delete(m.opot, k)
	} else {
		m.opot[k] = kept[1:]
	}
	return kept[0], kept, true
}

// OPoTSwap tells the model that the program gave the packet of res (a
// Forward from the NF with a carried TLV) the kept TLV got instead of
// the one the model chose: the model keeps its choice and drops got.
// False if got was not kept for that packet.
func (m *Model) OPoTSwap(res Result, got [opot.TLVLen]byte) bool {
	if res.OPoTAt == 0 {
		return false
	}
	chose := [opot.TLVLen]byte(res.Packet[res.OPoTAt-1:])
	if got == chose {
		return true
	}
	i := slices.Index(res.opotKept, got)
	if i < 0 {
		return false
	}
	rest := m.opot[res.opotKey]
	j := slices.Index(rest, got)
	if j < 0 {
		return false
	}
	m.opot[res.opotKey] = append([][opot.TLVLen]byte{chose}, slices.Delete(slices.Clone(rest), j, j+1)...)
	return true
}

// opotKeyOf is proxy_opot_key_of on the inner packet p.
func opotKeyOf(sid netip.Addr, p []byte, inner uint8) (opotKey, drop.Reason) {
	k := opotKey{sid: sid}
	var l4, end int
	if inner == ProtoIPv6 {
		if len(p) < 40 {
			return k, drop.PktTruncated
		}
		k.family, k.proto = 6, p[6]
		k.len = binary.BigEndian.Uint16(p[4:6])
		k.id = binary.BigEndian.Uint32(p[0:4]) & 0xfffff
		k.src, k.dst = [16]byte(p[8:24]), [16]byte(p[24:40])
		l4, end = 40, 40+int(k.len)
	} else {
		if len(p) < 20 {
			return k, drop.PktTruncated
		}
		k.family, k.proto = 4, p[9]
		k.len = binary.BigEndian.Uint16(p[2:4])
		k.id = binary.BigEndian.Uint32(p[4:8])
		copy(k.src[:], p[12:16])
		copy(k.dst[:], p[16:20])
		l4, end = int(p[0]&0xf)*4, int(k.len)
	}
	switch {
	case end >= l4+16:
		k.l4len = 16
	case end >= l4+8:
		k.l4len = 8
	}
	if l4+k.l4len > len(p) {
		return k, drop.PktTruncated
	}
	copy(k.l4[:], p[l4:l4+k.l4len])
	return k, drop.None
}

// opotTLVOff is opot_find on a parsed SRH at srhOff: the offset of its
// one valid OPoT TLV.
func opotTLVOff(s srv6.SRH, srhOff int) (int, bool) {
	_, idx, err := opot.FindTLV(s)
	if err != nil {
		return 0, false
	}
	off := srhOff + srv6.SRHFixedLen + 16*len(s.Segments)
	for _, t := range s.TLVs[:idx] {
		if t.Type == srv6.TLVPad1 {
			off++
		} else {
			off += 2 + len(t.Value)
		}
	}
	return off, true
}
