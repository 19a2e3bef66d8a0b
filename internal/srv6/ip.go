package srv6

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// IP protocol / next header numbers used by the codec (IANA).
const (
	ProtoHopByHop uint8 = 0
	ProtoICMP     uint8 = 1
	ProtoIPv4     uint8 = 4 // IPv4-in-IPv6 (RFC 8986 section 5.1)
	ProtoTCP      uint8 = 6
	ProtoUDP      uint8 = 17
	ProtoIPv6     uint8 = 41
	ProtoRouting  uint8 = 43
	ProtoFragment uint8 = 44
	ProtoAH       uint8 = 51 // Authentication Header (RFC 4302)
	ProtoICMPv6   uint8 = 58
	ProtoNoNext   uint8 = 59
	ProtoDestOpts uint8 = 60
	ProtoEthernet uint8 = 143 // Ethernet-in-IPv6 (RFC 8986 section 10.1)
	EtherTypeIPv4       = 0x0800
	EtherTypeIPv6       = 0x86DD
	EtherTypeVLAN       = 0x8100
)

// Header sizes in bytes.
const (
	IPv6HeaderLen     = 40
	IPv4MinHeaderLen  = 20
	EthernetHeaderLen = 14
	UDPHeaderLen      = 8
	TCPMinHeaderLen   = 20
	ICMPHeaderLen     = 8 // type, code, checksum, and the 4-byte rest (echo id/seq)
)

// DefaultHopLimit is the hop limit (and IPv4 TTL) the builders use.
const DefaultHopLimit = 64

// IPv6 is the fixed IPv6 header (RFC 8200 section 3).
type IPv6 struct {
	TrafficClass uint8
	FlowLabel    uint32 // low 20 bits
	PayloadLen   uint16
	NextHeader   uint8
	HopLimit     uint8
	Src, Dst     netip.Addr
}

// ParseIPv6 reads the 40-byte fixed header at the start of b.
func ParseIPv6(b []byte) (IPv6, error) {
	if len(b) > 0 && b[0]>>4 != 6 {
		return IPv6{}, decodeErr("ipv6", "version", 0, ErrNotIPv6)
	}
	if len(b) < IPv6HeaderLen {
		return IPv6{}, decodeErr("ipv6", "header", len(b), ErrTruncated)
	}
	vtf := binary.BigEndian.Uint32(b[0:4])
	return IPv6{
		TrafficClass: uint8(vtf >> 20),
		FlowLabel:    vtf & 0xFFFFF,
		PayloadLen:   binary.BigEndian.Uint16(b[4:6]),
		NextHeader:   b[6],
		HopLimit:     b[7],
		Src:          netip.AddrFrom16([16]byte(b[8:24])),
		Dst:          netip.AddrFrom16([16]byte(b[24:40])),
	}, nil
}

// AppendTo appends the 40-byte header to b. IPv4 addresses are written
// v4-mapped; a zero Addr is written as ::.
func (h IPv6) AppendTo(b []byte) []byte {
	vtf := 6<<28 | uint32(h.TrafficClass)<<20 | h.FlowLabel&0xFFFFF
	b = binary.BigEndian.AppendUint32(b, vtf)
	b = binary.BigEndian.AppendUint16(b, h.PayloadLen)
	b = append(b, h.NextHeader, h.HopLimit)
	s, d := as16(h.Src), as16(h.Dst)
	b = append(b, s[:]...)
	return append(b, d[:]...)
}

// IPv4 is an IPv4 header (RFC 791 section 3.1).
type IPv4 struct {
	TOS      uint8
	TotalLen uint16
	ID       uint16
	Flags    uint8  // 3 bits: reserved, DF (2), MF (1)
	FragOff  uint16 // 13 bits, in 8-byte units
	TTL      uint8
	Protocol uint8
	Checksum uint16 // as read; AppendTo computes it
	Src, Dst netip.Addr
	Options  []byte // IHL*4 - 20 bytes
}

// HeaderLen is the header length in bytes including options (rounded up
// to 4 bytes the way AppendTo writes them).
func (h IPv4) HeaderLen() int { return IPv4MinHeaderLen + (len(h.Options)+3)&^3 }

// ParseIPv4 reads an IPv4 header at the start of b.
func ParseIPv4(b []byte) (IPv4, error) {
	if len(b) > 0 && b[0]>>4 != 4 {
		return IPv4{}, decodeErr("ipv4", "version", 0, ErrNotIPv4)
	}
	if len(b) < IPv4MinHeaderLen {
		return IPv4{}, decodeErr("ipv4", "header", len(b), ErrTruncated)
	}
	ihl := int(b[0]&0xF) * 4
	if ihl < IPv4MinHeaderLen {
		return IPv4{}, decodeErr("ipv4", "ihl", 0, ErrNotIPv4)
	}
	if len(b) < ihl {
		return IPv4{}, decodeErr("ipv4", "options", len(b), ErrTruncated)
	}
	ff := binary.BigEndian.Uint16(b[6:8])
	h := IPv4{
		TOS:      b[1],
		TotalLen: binary.BigEndian.Uint16(b[2:4]),
		ID:       binary.BigEndian.Uint16(b[4:6]),
		Flags:    uint8(ff >> 13),
		FragOff:  ff & 0x1FFF,
		TTL:      b[8],
		Protocol: b[9],
		Checksum: binary.BigEndian.Uint16(b[10:12]),
		Src:      netip.AddrFrom4([4]byte(b[12:16])),
		Dst:      netip.AddrFrom4([4]byte(b[16:20])),
	}
	if ihl > IPv4MinHeaderLen {
		h.Options = append([]byte(nil), b[IPv4MinHeaderLen:ihl]...)
	}
	return h, nil
}

// AppendTo appends the header with a freshly computed checksum (options
// zero-padded to 4 bytes). TotalLen is written as given.
func (h IPv4) AppendTo(b []byte) []byte {
	start := len(b)
	hl := h.HeaderLen()
	b = append(b, 4<<4|uint8(hl/4), h.TOS)
	b = binary.BigEndian.AppendUint16(b, h.TotalLen)
	b = binary.BigEndian.AppendUint16(b, h.ID)
	b = binary.BigEndian.AppendUint16(b, uint16(h.Flags&7)<<13|h.FragOff&0x1FFF)
	b = append(b, h.TTL, h.Protocol, 0, 0)
	s, d := as4(h.Src), as4(h.Dst)
	b = append(b, s[:]...)
	b = append(b, d[:]...)
	b = append(b, h.Options...)
	for len(b)-start < hl {
		b = append(b, 0)
	}
	binary.BigEndian.PutUint16(b[start+10:], Checksum(b[start:start+hl]))
	return b
}

// Ethernet is an Ethernet II header, with at most one 802.1Q tag.
type Ethernet struct {
	Dst, Src  net.HardwareAddr
	VLAN      uint16 // TCI of the 802.1Q tag; meaningful only if Tagged
	Tagged    bool
	EtherType uint16
}

// Len is the header length: 14, or 18 with a VLAN tag.
func (e Ethernet) Len() int {
	if e.Tagged {
		return EthernetHeaderLen + 4
	}
	return EthernetHeaderLen
}

// ParseEthernet reads an Ethernet II header (one optional 802.1Q tag).
func ParseEthernet(b []byte) (Ethernet, error) {
	if len(b) < EthernetHeaderLen {
		return Ethernet{}, decodeErr("ethernet", "header", len(b), ErrTruncated)
	}
	e := Ethernet{
		Dst:       net.HardwareAddr(append([]byte(nil), b[0:6]...)),
		Src:       net.HardwareAddr(append([]byte(nil), b[6:12]...)),
		EtherType: binary.BigEndian.Uint16(b[12:14]),
	}
	if e.EtherType == EtherTypeVLAN {
		if len(b) < EthernetHeaderLen+4 {
			return Ethernet{}, decodeErr("ethernet", "vlan", len(b), ErrTruncated)
		}
		e.Tagged = true
		e.VLAN = binary.BigEndian.Uint16(b[14:16])
		e.EtherType = binary.BigEndian.Uint16(b[16:18])
	}
	return e, nil
}

// AppendTo appends the header. Addresses shorter than 6 bytes are
// zero-padded, longer ones cut.
func (e Ethernet) AppendTo(b []byte) []byte {
	b = appendMAC(b, e.Dst)
	b = appendMAC(b, e.Src)
	if e.Tagged {
		b = binary.BigEndian.AppendUint16(b, EtherTypeVLAN)
		b = binary.BigEndian.AppendUint16(b, e.VLAN)
	}
	return binary.BigEndian.AppendUint16(b, e.EtherType)
}

// Ether returns payload behind an untagged Ethernet II header.
func Ether(dst, src net.HardwareAddr, etherType uint16, payload []byte) []byte {
	b := make([]byte, 0, EthernetHeaderLen+len(payload))
	b = Ethernet{Dst: dst, Src: src, EtherType: etherType}.AppendTo(b)
	return append(b, payload...)
}

func appendMAC(b []byte, m net.HardwareAddr) []byte {
	var a [6]byte
	copy(a[:], m)
	return append(b, a[:]...)
}

// as16 is a.As16 without the panic on an invalid Addr.
func as16(a netip.Addr) [16]byte {
	if !a.IsValid() {
		return [16]byte{}
	}
	return a.As16()
}

// as4 is the IPv4 form of a (v4-mapped IPv6 unmapped); anything else is 0.0.0.0.
func as4(a netip.Addr) [4]byte {
	a = a.Unmap()
	if !a.Is4() {
		return [4]byte{}
	}
	return a.As4()
}
