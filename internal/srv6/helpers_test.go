package srv6

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
)

// addrs parses a comma-separated list of addresses.
func addrs(t testing.TB, s string) []netip.Addr {
	t.Helper()
	var out []netip.Addr
	for _, f := range strings.Split(s, ",") {
		out = append(out, netip.MustParseAddr(strings.TrimSpace(f)))
	}
	return out
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad hex in test: %v", err)
	}
	return b
}

func mustEq(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s:\n got  %x\n want %x", what, got, want)
	}
}

var (
	hostA  = netip.MustParseAddr("2001:db8:a::1")
	hostB  = netip.MustParseAddr("2001:db8:b::1")
	host4A = netip.MustParseAddr("192.0.2.1")
	host4B = netip.MustParseAddr("198.51.100.7")
	tunSrc = netip.MustParseAddr("fc00:0:1::1")
)
