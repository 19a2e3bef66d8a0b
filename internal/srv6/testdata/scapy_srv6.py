#!/usr/bin/python3
"""Scapy side of the srv6 codec cross-check (see scapy_test.go).

  scapy_srv6.py check   stdin: one hex IPv6 packet per line; stdout: one
                        JSON object per line with the fields scapy dissects.
  scapy_srv6.py build   stdout: one JSON object per line, {"name", "hex",
                        "want"}, packets built by scapy for Go to decode.
Exits 3 when scapy (with its SRH layer) cannot be imported.

Scapy 2.5 quirks, worked around here: its Pad1 TLV carries a length byte
(RFC 8754 2.1.1.1: Pad1 is one byte), its HMAC TLV counts the length as
HMAC + 48 (RFC 8754 2.1.2: HMAC + 6), and its generic TLV does not compute
the length. So packets for scapy avoid 1-byte padding and HMAC TLVs, and
TLVs built here set their length explicitly.
"""
import json
import sys

import logging
logging.getLogger("scapy.runtime").setLevel(logging.ERROR)

try:
    from scapy.compat import raw
    from scapy.layers.inet import ICMP, IP, TCP, UDP
    from scapy.layers.inet6 import (
        ICMPv6EchoRequest, IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrHopByHop,
        IPv6ExtHdrSegmentRouting, IPv6ExtHdrSegmentRoutingTLV,
        IPv6ExtHdrSegmentRoutingTLVPadN)
except ImportError as e:
    print("scapy not importable: %s" % e, file=sys.stderr)
    sys.exit(3)


def l4_fields(layer):
    if isinstance(layer, (UDP, TCP)):
        d = {"proto": 17 if isinstance(layer, UDP) else 6,
             "sport": layer.sport, "dport": layer.dport}
        if isinstance(layer, TCP):
            d["flags"] = int(layer.flags)
        return d
    if isinstance(layer, ICMP):
        return {"proto": 1, "type": layer.type, "code": layer.code,
                "id": layer.id, "seq": layer.seq}
    if isinstance(layer, ICMPv6EchoRequest):
        return {"proto": 58, "type": layer.type, "code": layer.code,
                "id": layer.id, "seq": layer.seq}
    return None


def checksums_ok(pkt):
    """Rebuild with every checksum deleted and compare: scapy recomputes
    them (with the final destination of a routing header, RFC 8200 8.1)."""
    again = pkt.copy()
    for cls in (UDP, TCP, ICMP, ICMPv6EchoRequest, IP):
        layer = again.getlayer(cls)
        while layer is not None:
            if hasattr(layer, "chksum"):
                layer.chksum = None
            layer = layer.payload.getlayer(cls) if layer.payload else None
    return raw(again) == raw(pkt)


def dissect(hexline):
    b = bytes.fromhex(hexline)
    pkt = IPv6(b)
    out = {"src": pkt.src, "dst": pkt.dst, "hlim": pkt.hlim, "nh": pkt.nh,
           "plen": pkt.plen, "tc": pkt.tc, "fl": pkt.fl}
    srh = pkt.getlayer(IPv6ExtHdrSegmentRouting)
    if srh is not None:
        out["srh"] = {
            "nh": srh.nh, "len": srh.len, "type": srh.type,
            "segleft": srh.segleft, "lastentry": srh.lastentry,
            "flags": raw(srh)[5], "tag": srh.tag,
            "addresses": list(srh.addresses),
            "tlv_types": [t.type for t in srh.tlv_objects],
            "tlv_values": [raw(t)[2:].hex() for t in srh.tlv_objects],
        }
        inner = srh.payload
        if isinstance(inner, (IPv6, IP)):
            out["inner"] = {"version": inner.version, "src": inner.src,
                            "dst": inner.dst}
    last = pkt
    for layer in (UDP, TCP, ICMP, ICMPv6EchoRequest):
        if pkt.haslayer(layer):
            last = pkt.getlayer(layer)
            out["l4"] = l4_fields(last)
            out["payload"] = raw(last.payload).hex()
            break
    out["chksum_ok"] = checksums_ok(pkt)
    out["len"] = len(raw(pkt))
    return out


def build():
    segs = ["fc00:1::e", "fc00:2::e", "fc00:3::d6"]
    wire = list(reversed(segs))
    inner6 = IPv6(src="2001:db8:a::1", dst="2001:db8:b::1") / UDP(sport=1000, dport=53) / b"query"
    inner4 = IP(src="192.0.2.1", dst="198.51.100.7") / TCP(sport=40000, dport=80, flags="S")
    cases = [
        ("encaps ipv6 udp",
         IPv6(src="fc00:0:1::1", dst=segs[0], hlim=64) /
         IPv6ExtHdrSegmentRouting(addresses=wire, tag=0x1234) / inner6,
         {"segleft": 2, "lastentry": 2, "nh": 41, "tag": 0x1234, "inner": 6, "proto": 17, "dport": 53}),
        ("encaps ipv4 tcp with padn tlv",
         IPv6(src="fc00:0:1::1", dst=segs[0]) /
         IPv6ExtHdrSegmentRouting(addresses=wire, tlv_objects=[
             IPv6ExtHdrSegmentRoutingTLV(type=0x7e, len=4, value=b"\x01\x02\x03\x04")]) / inner4,
         {"segleft": 2, "lastentry": 2, "nh": 4, "inner": 4, "proto": 6, "dport": 80, "tlv_types": [0x7e, 4]}),
        ("insert icmpv6 segleft 1 flags",
         IPv6(src="2001:db8:a::1", dst=segs[1]) /
         IPv6ExtHdrSegmentRouting(addresses=["2001:db8:b::1"] + wire[1:], segleft=1, oam=1) /
         ICMPv6EchoRequest(id=7, seq=9),
         {"segleft": 1, "lastentry": 2, "nh": 58, "flags": 0x20, "proto": 58, "type": 128}),
        ("hmac tlv",
         IPv6(src="fc00:0:1::1", dst=segs[0]) /
         IPv6ExtHdrSegmentRouting(addresses=wire, hmac=1, tlv_objects=[
             IPv6ExtHdrSegmentRoutingTLV(type=5, len=38, value=b"\x80\x00" + (42).to_bytes(4, "big") + b"\xab" * 32)]) / inner6,
         {"segleft": 2, "lastentry": 2, "nh": 41, "flags": 0x08, "tlv_types": [5], "hmac_keyid": 42, "inner": 6}),
        ("hop-by-hop and dest opts before srh",
         IPv6(src="fc00:0:1::1", dst=segs[0]) / IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt() /
         IPv6ExtHdrSegmentRouting(addresses=wire) / inner6,
         {"segleft": 2, "lastentry": 2, "nh": 41, "ext": 2, "inner": 6, "proto": 17}),
        ("single segment explicit padn",
         IPv6(src="fc00:0:1::1", dst="fc00:9::1") /
         IPv6ExtHdrSegmentRouting(addresses=["fc00:9::1"], segleft=0, tlv_objects=[
             IPv6ExtHdrSegmentRoutingTLVPadN(padding=b"\x00" * 4)]) / inner6,
         {"segleft": 0, "lastentry": 0, "nh": 41, "tlv_types": [4, 4], "inner": 6}),
    ]
    for name, pkt, want in cases:
        want["addresses"] = list(pkt[IPv6ExtHdrSegmentRouting].addresses)
        print(json.dumps({"name": name, "hex": raw(pkt).hex(), "want": want}))


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "check":
        for line in sys.stdin:
            line = line.strip()
            if line:
                print(json.dumps(dissect(line)))
        return 0
    if mode == "build":
        build()
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
