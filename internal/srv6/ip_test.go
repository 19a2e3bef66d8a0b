package srv6

import (
	"errors"
	"net"
	"net/netip"
	"testing"
)

func TestIPv6RoundTrip(t *testing.T) {
	h := IPv6{TrafficClass: 0xb8, FlowLabel: 0xabcde, PayloadLen: 1234, NextHeader: ProtoRouting, HopLimit: 7, Src: hostA, Dst: hostB}
	b := h.AppendTo(nil)
	mustEq(t, "ipv6", b, unhex(t, `6b8abcde 04d2 2b 07
		20010db8000a00000000000000000001 20010db8000b00000000000000000001`))
	got, err := ParseIPv6(b)
	if err != nil || got != h {
		t.Fatalf("ParseIPv6 = %+v, %v", got, err)
	}
	// Out-of-range flow label bits are dropped, zero addresses are ::.
	b = IPv6{FlowLabel: 0xFFFFFFFF}.AppendTo(nil)
	got, _ = ParseIPv6(b)
	if got.FlowLabel != 0xFFFFF || got.TrafficClass != 0 || got.Src != netip.IPv6Unspecified() {
		t.Fatalf("masked: %+v", got)
	}
}

func TestIPv6Malformed(t *testing.T) {
	b := IPv6{Src: hostA, Dst: hostB}.AppendTo(nil)
	for n := range IPv6HeaderLen {
		if _, err := ParseIPv6(b[:n]); !errors.Is(err, ErrTruncated) {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
	b[0] = 0x45
	if _, err := ParseIPv6(b); !errors.Is(err, ErrNotIPv6) {
		t.Fatalf("version 4: %v", err)
	}
}

func TestIPv4RoundTrip(t *testing.T) {
	// The textbook header with checksum 0xb861.
	h := IPv4{TotalLen: 0x73, Flags: 2, TTL: 64, Protocol: ProtoUDP,
		Src: netip.MustParseAddr("192.168.0.1"), Dst: netip.MustParseAddr("192.168.0.199")}
	b := h.AppendTo(nil)
	mustEq(t, "ipv4", b, unhex(t, "4500 0073 0000 4000 4011 b861 c0a80001 c0a800c7"))
	got, err := ParseIPv4(b)
	h.Checksum = 0xb861
	if err != nil || got.Src != h.Src || got.Dst != h.Dst || got.TOS != h.TOS || got.TotalLen != h.TotalLen ||
		got.ID != h.ID || got.Flags != h.Flags || got.TTL != h.TTL || got.Protocol != h.Protocol || got.Checksum != h.Checksum {
		t.Fatalf("ParseIPv4 = %+v, %v", got, err)
	}
	if Checksum(b) != 0 {
		t.Fatal("header checksum does not verify")
	}
	// Options are padded to 4 bytes and survive.
	h.Options = []byte{1, 1, 1}
	b = h.AppendTo(nil)
	if len(b) != 24 || b[0] != 0x46 || Checksum(b) != 0 {
		t.Fatalf("with options: %x", b)
	}
	got, err = ParseIPv4(b)
	if err != nil || len(got.Options) != 4 || got.HeaderLen() != 24 {
		t.Fatalf("options: %+v, %v", got, err)
	}
}

func TestIPv4Malformed(t *testing.T) {
	b := IPv4{TotalLen: 24, Options: []byte{1, 1, 1, 1}, Src: host4A, Dst: host4B}.AppendTo(nil)
	for n := range len(b) {
		if _, err := ParseIPv4(b[:n]); !errors.Is(err, ErrTruncated) {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
	c := append([]byte{}, b...)
	c[0] = 0x44
	if _, err := ParseIPv4(c); !errors.Is(err, ErrNotIPv4) {
		t.Fatalf("ihl 4: %v", err)
	}
	c[0] = 0x65
	if _, err := ParseIPv4(c); !errors.Is(err, ErrNotIPv4) {
		t.Fatalf("version 6: %v", err)
	}
}

func TestEthernet(t *testing.T) {
	dst, _ := net.ParseMAC("02:00:00:00:00:02")
	src, _ := net.ParseMAC("02:00:00:00:00:01")
	f := Ether(dst, src, EtherTypeIPv6, []byte{0x60})
	mustEq(t, "frame", f, unhex(t, "020000000002 020000000001 86dd 60"))
	e, err := ParseEthernet(f)
	if err != nil || e.Dst.String() != dst.String() || e.Src.String() != src.String() || e.EtherType != EtherTypeIPv6 || e.Len() != 14 {
		t.Fatalf("ParseEthernet = %+v, %v", e, err)
	}
	tagged := Ethernet{Dst: dst, Src: src, Tagged: true, VLAN: 100, EtherType: EtherTypeIPv6}.AppendTo(nil)
	mustEq(t, "tagged", tagged, unhex(t, "020000000002 020000000001 8100 0064 86dd"))
	e, err = ParseEthernet(tagged)
	if err != nil || !e.Tagged || e.VLAN != 100 || e.EtherType != EtherTypeIPv6 || e.Len() != 18 {
		t.Fatalf("tagged: %+v, %v", e, err)
	}
	for n := range len(tagged) {
		if _, err := ParseEthernet(tagged[:n]); !errors.Is(err, ErrTruncated) {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
}

func TestChecksum(t *testing.T) {
	// RFC 1071 section 3 example: the one's complement sum is 0xddf2.
	if c := Checksum(unhex(t, "0001 f203 f4f5 f6f7")); c != ^uint16(0xddf2) {
		t.Fatalf("Checksum = %#x", c)
	}
	if c := Checksum([]byte{0xff}); c != 0x00ff {
		t.Fatalf("odd length = %#x", c)
	}
	if c := Checksum(nil); c != 0xffff {
		t.Fatalf("empty = %#x", c)
	}
	// Long buffers do not overflow the accumulator.
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = 0xff
	}
	if c := Checksum(big); c != 0 {
		t.Fatalf("all ones = %#x", c)
	}
}
