package apply

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/state"
)

// TestParseCounters: the decoder reads packets, bytes and errors out of a
// SEG6_LOCAL_COUNTERS nest wherever it sits among the seg6local
// attributes, skips the 64-bit alignment pad the kernel may put first, and
// reports a route without the nest (or a truncated one) as not counting.
func TestParseCounters(t *testing.T) {
	u64 := func(v uint64) []byte { return binary.NativeEndian.AppendUint64(nil, v) }
	action := nl.NewRtAttr(nl.SEG6_LOCAL_ACTION, nl.Uint32Attr(nl.SEG6_LOCAL_ACTION_END)).Serialize()
	cnt := nl.NewRtAttr(unix.NLA_F_NESTED|seg6LocalCounters, nil)
	cnt.AddRtAttr(1, []byte{}) // SEG6_LOCAL_CNT_PAD
	cnt.AddRtAttr(seg6LocalCntPackets, u64(7))
	cnt.AddRtAttr(seg6LocalCntBytes, u64(700))
	cnt.AddRtAttr(seg6LocalCntErrors, u64(3))
	b := append(append([]byte(nil), action...), cnt.Serialize()...)
	c, ok := parseCounters(b)
	if want := (KernelSIDCount{Packets: 7, Bytes: 700, Errors: 3}); !ok || c != want {
		t.Errorf("parseCounters = %+v, %v; want %+v, true", c, ok, want)
	}
	if c, ok := parseCounters(action); ok {
		t.Errorf("parseCounters without the nest = %+v, true; want false", c)
	}
	if _, ok := parseCounters(b[:len(b)-5]); ok {
		t.Error("parseCounters of a truncated nest = true; want false")
	}
	if c, ok := parseCounters(encodeCounters()); !ok || c != (KernelSIDCount{}) {
		t.Errorf("parseCounters(encodeCounters()) = %+v, %v; want zero, true", c, ok)
	}
}

// counterAttr is the raw SEG6_LOCAL_COUNTERS attribute (header included)
// among a seg6local encap's attributes, nil when absent.
func counterAttr(t *testing.T, encap []byte) []byte {
	t.Helper()
	for b := encap; len(b) >= unix.SizeofRtAttr; {
		l := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:])
		if l < unix.SizeofRtAttr || l > len(b) {
			t.Fatalf("bad attribute length %d in %x", l, encap)
		}
		if typ&^unix.NLA_F_NESTED == seg6LocalCounters {
			return b[:l]
		}
		b = b[min(len(b), (l+unix.NLA_ALIGNTO-1)&^(unix.NLA_ALIGNTO-1)):]
	}
	return nil
}

// TestCountersMatchIproute2: the counter attribute srchain writes is,
// byte for byte, the one the kernel reports for a route iproute2 added
// with `count`; a SID srchain installs is counted (iproute2 shows its
// stats); and after probes that the SID drops (End without an SRH) the
// decoder reads the very numbers `ip -j -s -6 route show` prints.
func TestCountersMatchIproute2(t *testing.T) {
	a, b := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := a.Run(ctx, "ip", "-6", "route", "add", "fc00:9::1/128", "encap", "seg6local", "action", "End", "count", "dev", "lo"); err != nil {
		t.Fatal(err)
	}
	routes, err := dumpSeg6Local(a)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for _, r := range routes {
		if r.Dst == p("fc00:9::1/128") {
			got = counterAttr(t, r.Encap)
		}
	}
	if want := encodeCounters(); !bytes.Equal(got, want) {
		t.Errorf("kernel's counter attribute of an iproute2 `count` route = %x, srchain encodes %x", got, want)
	}

	node := richNode()
	if _, err := ApplyWith(ctx, a, node, Options{}); err != nil {
		t.Fatal(err)
	}
	if out, err := a.Run(ctx, "ip", "-s", "-6", "route", "show", "fc00:1::e/128"); err != nil || !strings.Contains(out, "packets 0 bytes 0 errors 0") {
		t.Errorf("ip -s route of srchain's End SID = %q, %v; want its counters", out, err)
	}
	for _, args := range [][]string{
		{"ip", "link", "set", "eth0", "up"},
		{"ip", "-6", "addr", "add", "fc00:12::2/64", "dev", "eth0", "nodad"},
		{"ip", "-6", "route", "add", "fc00:1::/64", "via", "fc00:12::1"},
	} {
		if _, err := b.Run(ctx, args[0], args[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	// Three echo requests without an SRH: End drops each (RFC 8986
	// section 4.1, "upper-layer header" processing is not End's), and
	// the kernel counts them as errors. ping's own exit status does not
	// matter: nothing answers.
	_, _ = b.Run(ctx, "ping", "-6", "-n", "-c", "3", "-i", "0.2", "-W", "1", "fc00:1::e")
	cs, err := KernelSIDCounters(a, node)
	if err != nil {
		t.Fatal(err)
	}
	mine := map[string]KernelSIDCount{}
	for _, c := range cs {
		mine[c.SID.String()] = c.KernelSIDCount
	}
	if len(cs) != len(node.SIDs) {
		t.Errorf("KernelSIDCounters = %d SIDs, want %d: %+v", len(cs), len(node.SIDs), cs)
	}
	if c := mine["fc00:1::e/128"]; c.Errors != 3 || c.Packets != 0 {
		t.Errorf("End SID counters after 3 probes without an SRH = %+v, want 3 errors", c)
	}
	out, err := a.Run(ctx, "ip", "-j", "-s", "-6", "route", "show", "proto", "83")
	if err != nil {
		t.Fatal(err)
	}
	var ipr []struct {
		Dst   string          `json:"dst"`
		Stats *KernelSIDCount `json:"stats64"`
	}
	if err := json.Unmarshal([]byte(out), &ipr); err != nil {
		t.Fatalf("parse ip -j: %v: %s", err, out)
	}
	seen := 0
	for _, r := range ipr {
		if r.Stats == nil {
			continue
		}
		seen++
		dst := r.Dst
		if !strings.Contains(dst, "/") {
			dst += "/128"
		}
		if c, ok := mine[dst]; !ok || c != *r.Stats {
			t.Errorf("iproute2 says %s counted %+v, srchain read %+v (%v)", dst, *r.Stats, c, ok)
		}
	}
	if seen != len(node.SIDs) {
		t.Errorf("iproute2 shows counters on %d routes, want %d (every SID): %s", seen, len(node.SIDs), out)
	}
}

// TestApplySIDCount: a SID route without `count` (installed by an
// srchain before counters, or by hand) is reported by Check and replaced
// once; a re-apply then changes nothing, although the library reads the
// route back without its counters.
func TestApplySIDCount(t *testing.T) {
	a, _ := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := richNode()
	if _, err := ApplyWith(ctx, a, node, Options{}); err != nil {
		t.Fatal(err)
	}
	if res, err := ApplyWith(ctx, a, node, Options{}); err != nil || res.Changes != 0 {
		t.Errorf("re-apply = %d changes, %v; want 0", res.Changes, err)
	}
	if _, err := a.Run(ctx, "ip", "-6", "route", "replace", "fc00:1::e/128", "encap", "seg6local", "action", "End", "dev", "eth0", "proto", "83"); err != nil {
		t.Fatal(err)
	}
	pending, err := Check(ctx, a, node)
	if err != nil || len(pending) != 1 || !strings.Contains(pending[0], "fc00:1::e/128 End count") {
		t.Errorf("check of a SID route without count = %q, %v; want one replace", pending, err)
	}
	if res, err := ApplyWith(ctx, a, node, Options{}); err != nil || res.Changes != 1 {
		t.Errorf("repair = %d changes, %v; want 1", res.Changes, err)
	}
	if out, err := a.Run(ctx, "ip", "-s", "-6", "route", "show", "fc00:1::e/128"); err != nil || !strings.Contains(out, "packets 0 bytes 0 errors 0") {
		t.Errorf("route after repair = %q, %v; want its counters", out, err)
	}
	if res, err := ApplyWith(ctx, a, node, Options{}); err != nil || res.Changes != 0 {
		t.Errorf("re-apply after repair = %d changes, %v; want 0", res.Changes, err)
	}
	// A SID the previous state held unchanged is not read back.
	if res, err := ApplyWith(ctx, a, node, Options{Prev: &node}); err != nil || res.Changes != 0 {
		t.Errorf("incremental re-apply = %d changes, %v; want 0", res.Changes, err)
	}
}

func TestKernelAtLeast(t *testing.T) {
	for _, c := range []struct {
		release string
		want    bool
	}{
		{"6.18.0-1-amd64", true}, {"5.14.0", true}, {"5.13.19-generic", false}, {"4.19.0", false}, {"5.15", true}, {"weird", true},
	} {
		if got := kernelAtLeast(c.release, 5, 14); got != c.want {
			t.Errorf("kernelAtLeast(%q, 5, 14) = %v, want %v", c.release, got, c.want)
		}
	}
}

// TestKernelSIDCountersLookups: the per-SID lookups and the dump read the
// same counters; a SID without a route is left out; a policy rule that
// sends the lookup of a SID to another table makes KernelSIDCounters fall
// back to the dump, which still finds the SID's own route in main, and
// so does a blackhole rule (the lookup fails).
func TestKernelSIDCountersLookups(t *testing.T) {
	a, _ := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := richNode()
	if _, err := ApplyWith(ctx, a, node, Options{}); err != nil {
		t.Fatal(err)
	}
	var sids []netip.Prefix
	for _, s := range node.SIDs {
		sids = append(sids, s.SID.Masked())
	}
	looked, ok, err := lookupSIDRoutes(a, sids)
	if err != nil || !ok {
		t.Fatalf("lookupSIDRoutes = %v, %v", ok, err)
	}
	dumped, err := dumpMainSIDRoutes(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, sid := range sids {
		if !bytes.Equal(looked[sid], dumped[sid]) || counterAttr(t, looked[sid]) == nil {
			t.Errorf("%s: lookup %x, dump %x", sid, looked[sid], dumped[sid])
		}
	}
	gone := append([]state.LocalSID(nil), node.SIDs...)
	gone = append(gone, state.LocalSID{SID: p("fc00:5::e/128"), Behavior: state.End, Datapath: state.Kernel})
	cs, err := KernelSIDCounters(a, state.Node{SIDs: gone})
	if err != nil || len(cs) != len(node.SIDs) {
		t.Errorf("KernelSIDCounters with a SID without a route = %d SIDs, %v; want %d", len(cs), err, len(node.SIDs))
	}
	for _, args := range [][]string{
		{"ip", "-6", "route", "add", "fc00:1::/64", "dev", "lo", "table", "77"},
		{"ip", "-6", "rule", "add", "pref", "10", "to", "fc00:1::/64", "table", "77"},
	} {
		if _, err := a.Run(ctx, args[0], args[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := lookupSIDRoutes(a, sids); ok || err != nil {
		t.Errorf("lookupSIDRoutes with a rule to table 77 = %v, %v; want false (dump)", ok, err)
	}
	cs, err = KernelSIDCounters(a, node)
	if err != nil || len(cs) != len(node.SIDs) {
		t.Errorf("KernelSIDCounters through the dump = %d SIDs, %v; want %d", len(cs), err, len(node.SIDs))
	}
	// The OPoT verifier's rule: unmarked packets to its SID are
	// blackholed, and the lookup answers EINVAL.
	for _, args := range [][]string{
		{"ip", "-6", "rule", "del", "pref", "10"},
		{"ip", "-6", "rule", "add", "pref", "800", "to", "fc00:1::e/128", "fwmark", "0/0x40000000", "blackhole"},
	} {
		if _, err := a.Run(ctx, args[0], args[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := lookupSIDRoutes(a, sids); ok || err != nil {
		t.Errorf("lookupSIDRoutes with a blackhole rule = %v, %v; want false (dump)", ok, err)
	}
	cs, err = KernelSIDCounters(a, node)
	if err != nil || len(cs) != len(node.SIDs) {
		t.Errorf("KernelSIDCounters past a blackhole rule = %d SIDs, %v; want %d", len(cs), err, len(node.SIDs))
	}
	if res, err := ApplyWith(ctx, a, node, Options{}); err != nil || res.Changes != 0 {
		t.Errorf("re-apply past a blackhole rule = %d changes, %v; want 0", res.Changes, err)
	}
}

// TestKernelSIDCounterNames: the names are the eBPF End's, by SID address.
func TestKernelSIDCounterNames(t *testing.T) {
	c := KernelSIDCounter{SID: p("fc00:2::1:0/112"), KernelSIDCount: KernelSIDCount{Packets: 1, Bytes: 2, Errors: 3}}
	var got []string
	for _, k := range c.Counters() {
		got = append(got, fmt.Sprintf("%s=%d", k.Name, k.Value))
	}
	if want := "sid/fc00:2::1:0/packets=1 sid/fc00:2::1:0/bytes=2 sid/fc00:2::1:0/errors=3"; strings.Join(got, " ") != want {
		t.Errorf("Counters() = %s, want %s", strings.Join(got, " "), want)
	}
}
