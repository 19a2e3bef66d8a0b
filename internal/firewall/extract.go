package firewall

import (
	"encoding/binary"
	"net/netip"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/srv6"
)

// SRInfo is what the SR actions need about a packet.
type SRInfo struct {
	SR       bool // a valid SRH (routing type 4)
	Encap    bool // the SRH is followed by an IPv4/IPv6 packet
	SRHOff   int  // offset of the SRH from the IPv6 header
	SL, Last uint8
	ICMPErr  bool // an ICMPv6 error message: never answered with one
}

const (
	protoIPIP    = 4
	protoTCP     = 6
	protoUDP     = 17
	protoIPv6    = 41
	protoRouting = 43
	protoDstOpts = 60
	protoFrag    = 44
	protoICMPv6  = 58
	protoAH      = 51
	maxExt       = 6    // FW_MAX_EXT
	maxOff       = 2048 // FW_MAX_OFF
	maxSegs      = 16
)

// Extract computes the view of an L3 packet (IPv6 or IPv4, no Ethernet
// header) exactly as bpf/lib/fw_extract.h does; it is the Go model the datapath
// is tested against. A non-None reason means the datapath drops it.
func Extract(pkt []byte, mode Mode, iif uint32) (View, SRInfo, drop.Reason) {
	v, si, r := extract(pkt, mode, iif)
	if r == drop.None && si.SR && si.SL > si.Last {
		// SL = last entry + 1: valid (RFC 8986 4.1 S09) but ip6t_srh
		// does not match it: -m srh false, every SRH field absent
		// (fw_srh_absent).
		for _, f := range []Field{FPSID, FNSID, FLSID, FActiveSID, FInnerSrc, FInnerDst} {
			v.Addr[f] = netip.Addr{}
		}
		v.Set(FSRH, 0)
		for _, f := range []Field{FNextHdr, FHdrLen, FSegsLeft, FLastEntry, FTag, FInnerFamily} {
			v.Set(f, f.Domain())
		}
	}
	return v, si, r
}

func extract(pkt []byte, mode Mode, iif uint32) (View, SRInfo, drop.Reason) {
	v := NewView()
	v.Set(FSRH, 0)
	v.SetIface(FIIF, iif)
	var si SRInfo
	if len(pkt) < 1 {
		return v, si, drop.PktTruncated
	}
	if pkt[0]>>4 == 4 {
		r := extract4(pkt, 0, &v, FSrc, FDst, true)
		return v, si, r
	}
	if len(pkt) < 40 {
		return v, si, drop.PktTruncated
	}
	w := srv6.ExtWalk{Off: 40, NextHeader: pkt[6]}
	if walk(pkt, &w) != nil {
		return v, si, drop.PktTruncated
	}
	nh, off, nonfirst, rtoff := w.NextHeader, w.Off, w.NonFirst, w.RoutingOff
	icmpErr := nh == protoICMPv6 && !nonfirst && off <= maxOff && (off >= len(pkt) || pkt[off] < 128)
	v.SetAddr(FSrc, addr16(pkt[8:24]))
	v.SetAddr(FDst, addr16(pkt[24:40]))
	v.Set(FFamily, 6)
	if rtoff >= 0 {
		if rtoff+8 > len(pkt) {
			return v, si, drop.SRHTruncated
		}
		h := pkt[rtoff:]
		if h[2] == 4 {
			if r := validateSRH(pkt, rtoff); r != drop.None {
				return v, si, r
			}
			si = SRInfo{SR: true, SRHOff: rtoff, SL: h[3], Last: h[4]}
			v.SetAddr(FActiveSID, addr16(pkt[24:40]))
			v.Set(FSRH, 1)
			v.Set(FNextHdr, uint32(h[0]))
			v.Set(FHdrLen, uint32(h[1]))
			v.Set(FSegsLeft, uint32(h[3]))
			v.Set(FLastEntry, uint32(h[4]))
			v.Set(FTag, uint32(binary.BigEndian.Uint16(h[6:8])))
			seg := func(i int) netip.Addr { return addr16(h[8+16*i : 24+16*i]) }
			v.SetAddr(FLSID, seg(0))
			if h[3] < h[4] {
				v.SetAddr(FPSID, seg(int(h[3])+1))
			}
			if h[3] > 0 {
				v.SetAddr(FNSID, seg(int(h[3])-1))
			}
		}
	}
	si.ICMPErr = icmpErr
	si.Encap = si.SR && !nonfirst && (nh == protoIPv6 || nh == protoIPIP)
	if si.Encap {
		basic := mode == Basic
		if nh == protoIPIP {
			if r := extract4(pkt, off, &v, FInnerSrc, FInnerDst, basic); r != drop.None {
				return v, si, r
			}
		} else {
			if off+40 > len(pkt) {
				return v, si, drop.PktTruncated
			}
			in := pkt[off:]
			v.SetAddr(FInnerSrc, addr16(in[8:24]))
			v.SetAddr(FInnerDst, addr16(in[24:40]))
			v.Set(FInnerFamily, 6)
			if basic {
				iw := srv6.ExtWalk{Off: off + 40, NextHeader: in[6]}
				if walk(pkt, &iw) != nil {
					return v, si, drop.PktTruncated
				}
				if iw.NonFirst {
					iw.Off = len(pkt)
				}
				ports(pkt, &v, iw.NextHeader, iw.Off)
			}
		}
		if basic {
			v.Addr[FSrc], v.Addr[FDst] = v.Addr[FInnerSrc], v.Addr[FInnerDst]
			v.Set(FFamily, v.Get(FInnerFamily))
			return v, si, drop.None
		}
	} else if si.SR {
		// Insert mode: the original packet is outer source -> segment[0]
		// (seed 000 IV.B, V.A), its inner addresses in both modes.
		v.Addr[FInnerSrc], v.Addr[FInnerDst] = v.Addr[FSrc], v.Addr[FLSID]
		v.Set(FInnerFamily, 6)
		if mode == Basic {
			v.Addr[FDst] = v.Addr[FLSID]
		}
	}
	if nonfirst {
		off = len(pkt)
	}
	ports(pkt, &v, nh, off)
	return v, si, drop.None
}

// walk skips what ip6tables' ipv6_find_hdr skips (Hop-by-Hop,
// Destination Options, Routing, Fragment and AH headers), with the bounds
// of fw_extract.h's ipv6_walk calls (FW_MAX_EXT headers starting within
// FW_MAX_OFF bytes). An error means the datapath drops the packet as
// DROP_PKT_TRUNCATED.
func walk(pkt []byte, w *srv6.ExtWalk) error {
	return srv6.WalkExt(pkt, w, srv6.WalkAll, maxExt, maxOff)
}

func addr16(b []byte) netip.Addr { return netip.AddrFrom16([16]byte(b[:16])) }

func ports(pkt []byte, v *View, proto uint8, off int) {
	v.Set(FProto, uint32(proto))
	v.Set(FSPort, 1<<16)
	v.Set(FDPort, 1<<16)
	if proto != protoTCP && proto != protoUDP {
		return
	}
	if off+4 > len(pkt) {
		return
	}
	v.Set(FSPort, uint32(binary.BigEndian.Uint16(pkt[off:])))
	v.Set(FDPort, uint32(binary.BigEndian.Uint16(pkt[off+2:])))
}

func extract4(pkt []byte, off int, v *View, fsrc, fdst Field, transport bool) drop.Reason {
	if off+20 > len(pkt) {
		return drop.PktTruncated
	}
	h := pkt[off:]
	v.SetAddr(fsrc, netip.AddrFrom4([4]byte(h[12:16])))
	if fsrc == FSrc {
		v.Set(FFamily, 4)
	} else {
		v.Set(FInnerFamily, 4)
	}
	v.SetAddr(fdst, netip.AddrFrom4([4]byte(h[16:20])))
	if transport {
		l4 := off + int(h[0]&0xf)*4
		if binary.BigEndian.Uint16(h[6:8])&0x1fff != 0 {
			l4 = len(pkt) // non-first fragment: no ports
		}
		ports(pkt, v, h[9], l4)
	}
	return drop.None
}

// validateSRH mirrors srh_validate + srh_validate_tlvs (bpf/lib/srh.h).
func validateSRH(pkt []byte, off int) drop.Reason {
	h := pkt[off:]
	n := (int(h[1]) + 1) * 8
	if off+n > len(pkt) {
		return drop.SRHTruncated
	}
	if int(h[4]) >= maxSegs {
		return drop.SRHTooManySegs
	}
	seglen := (int(h[4]) + 1) * 16
	if int(h[1])*8 < seglen {
		return drop.SRHBadLen
	}
	if int(h[3]) > int(h[4])+1 { // SL = last entry + 1 is valid (srh_validate)
		return drop.SRHSLOverLast
	}
	end, t := off+n, off+8+seglen
	for i := 0; i < 16; i++ {
		if t >= end {
			return drop.None
		}
		if pkt[t] == 0 {
			t++
			continue
		}
		if t+2 > len(pkt) {
			return drop.TLVBad
		}
		t += 2 + int(pkt[t+1])
		if t > end {
			return drop.TLVBad
		}
	}
	if t >= end {
		return drop.None
	}
	return drop.TLVBad
}

// Outcome is what the datapath does with a packet.
type Outcome struct {
	Rule    int         // matched rule, -1 for the policy
	Verdict Verdict     // after eval-args resolution
	Drop    drop.Reason // None when the packet passes
	Out     []byte      // the packet after SR actions, or the ICMPv6 error (nil: unchanged or dropped)
	// ICMP: Out is an ICMPv6 Parameter Problem sent back out of the
	// ingress interface (eval-args with an unknown ARGS value).
	ICMP bool
}

// icmpQuote is how much of the invoking packet an ICMPv6 error carries:
// the error must fit the IPv6 minimum MTU (RFC 4443 2.4 (c)).
const icmpQuote = 1280 - 48

// ParamProblem builds the ICMPv6 Parameter Problem (code 0, pointer ptr)
// the datapath answers pkt with: from pkt's destination to its source.
func ParamProblem(pkt []byte, ptr uint32) []byte {
	quote := pkt[:min(len(pkt), icmpQuote)]
	out := make([]byte, 48, 48+len(quote))
	out[0] = 0x60
	binary.BigEndian.PutUint16(out[4:], uint16(8+len(quote)))
	out[6], out[7] = 58, 64
	copy(out[8:24], pkt[24:40])
	copy(out[24:40], pkt[8:24])
	out[40] = 4 // Parameter Problem, code 0: erroneous header field
	binary.BigEndian.PutUint32(out[44:], ptr)
	out = append(out, quote...)
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(out[8:40])
	sum += uint32(8+len(quote)) + 58
	add(out[40:])
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(out[42:], ^uint16(sum))
	return out
}

// Decide is the Go model of the whole program on one L3 packet: extract,
// Eval (the linear reference), then the action. ARGS are the low
// argsBits of the destination address.
func Decide(pkt []byte, cfg Config, iif uint32) Outcome {
	v, si, r := Extract(pkt, cfg.Mode, iif)
	if r != drop.None {
		return Outcome{Rule: -2, Drop: r}
	}
	o := Outcome{Rule: Eval(cfg.Rules, &v)}
	if o.Rule >= 0 {
		o.Verdict = cfg.Rules[o.Rule].Verdict
	} else {
		o.Verdict = cfg.Policy
		if o.Verdict == 0 {
			o.Verdict = Accept
		}
	}
	if o.Verdict >= GoNext && o.Verdict <= EvalArgs && cfg.SID.IsValid() {
		// SR actions only for SR packets whose active SID is the NF's;
		// other SR packets are accepted, non-SR ones fail the
		// precondition below.
		if si.SR && !cfg.SID.Contains(addr16(pkt[24:40])) {
			return o
		}
	}
	if o.Verdict == EvalArgs {
		if !si.SR {
			o.Drop = drop.FWPrecond
			return o
		}
		args := binary.BigEndian.Uint64(pkt[32:40])
		if cfg.ArgsBits < 64 {
			args &= 1<<cfg.ArgsBits - 1
		}
		table := cfg.Args
		if table == nil {
			table = DefaultArgs
		}
		vd, ok := table[args]
		if !ok {
			// Seed 000 V.B: Parameter Problem pointing at the active SID;
			// never in reply to an ICMPv6 error (RFC 4443 2.4 (e)). The
			// datapath's rate limit (2.4 (f)) is not modelled.
			o.Drop = drop.FWArgsUnknown
			if si.ICMPErr {
				return o
			}
			o.ICMP = true
			ptr := uint32(si.SRHOff + 8 + 16*int(si.SL))
			if si.SL > si.Last {
				ptr = 24 // the active SID is only in the destination
			}
			o.Out = ParamProblem(pkt, ptr)
			return o
		}
		o.Verdict = vd
	}
	switch o.Verdict {
	case Accept:
	case GoNext, SkipNext, GoLast:
		if !si.SR {
			o.Drop = drop.FWPrecond
			return o
		}
		sl := int(si.SL)
		switch {
		case o.Verdict == GoNext && sl >= 1:
			sl--
		case o.Verdict == SkipNext && sl >= 2:
			sl -= 2
		case o.Verdict == GoLast && sl >= 1:
			sl = 0
		default:
			o.Drop = drop.FWPrecond
			return o
		}
		out := append([]byte(nil), pkt...)
		out[si.SRHOff+3] = byte(sl)
		copy(out[24:40], out[si.SRHOff+8+16*sl:si.SRHOff+24+16*sl])
		o.Out = out
	default:
		o.Drop = drop.FWRule
	}
	return o
}
