// Package srv6 is srchain's pure-Go SRv6 packet codec: it parses, builds
// and checks the packets every other part of srchain sends or expects (BPF
// test-run tables, end-to-end captures, benchmark frames, the firewall's
// differential test).
//
// Layers:
//   - IPv6 fixed header (RFC 8200 section 3) and the extension headers that
//     may precede a routing header (Hop-by-Hop, Destination Options; RFC
//     8200 section 4.1 order);
//   - the Segment Routing Header (RFC 8754 section 2) with its TLVs (Pad1,
//     PadN, HMAC; RFC 8754 sections 2.1.1 and 2.1.2), validated the way RFC
//     8754 section 4.3.1 and the Linux kernel do (routing type 4, Hdr Ext
//     Len consistent with Last Entry, Segments Left <= Last Entry, TLV area
//     well formed);
//   - IPv4 (RFC 791), TCP, UDP, ICMP and ICMPv6 for the inner packet;
//   - Ethernet II framing.
//
// Conventions:
//   - addresses are net/netip.Addr;
//   - segment lists given to builders (NewSRH, Encap, Insert) are in travel
//     order, first SID visited first, as in internal/state; SRH.Segments is
//     in wire order, Segments[0] being the last segment (RFC 8754 section
//     2: "Segment List[0] contains the last segment of the path");
//   - decode errors are *DecodeError values wrapping one of the Err...
//     sentinels, so callers use errors.Is(err, srv6.ErrSLOverLast);
//   - nothing panics on input: every read is bounds-checked and malformed
//     bytes yield an error.
//
// Behaviors: Encap is H.Encaps (RFC 8986 section 5.1; EncapWith also does
// H.Encaps.Red, section 5.2), Insert is H.Insert (the SRH inserted after
// the IPv6 header, original destination kept as Segment List[0]),
// MutateEnd is the End behavior (RFC 8986 section 4.1) used as the
// reference model for the eBPF End, and CSIDNext is the NEXT-C-SID flavor
// of draft-ietf-spring-srv6-srh-compression (section 4.1). SIDFormat splits
// SIDs into LOC:FUNCT:ARGS (RFC 8986 section 3.1).
//
// Kernel parity is tested, not assumed: kernel_test.go sends the same
// packets through Linux seg6local End and the seg6 encap / encap.red /
// inline modes in network namespaces and compares the bytes with
// MutateEnd, EncapWith and Insert (the known divergences are listed on
// MutateEnd). testdata/scapy_srv6.py cross-checks the wire format with
// scapy in both directions.
//
// Validation strictness: ParseSRH requires Segments Left <= Last Entry;
// ParseSRHReduced, and with it Decode, FindSRH and MutateEnd, also accepts
// Segments Left = Last Entry + 1 (RFC 8986 section 4.1 S06), which is what
// a reduced SRH carries at its first SID.
package srv6
