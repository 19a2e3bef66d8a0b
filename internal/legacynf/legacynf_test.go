package legacynf

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/srchain/srchain/internal/nft"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/kinds/kindtest"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

func TestTransaction(t *testing.T) {
	tx := Transaction("chain c {\n  counter\n}", []string{"eth0", "eth1"})
	lines := strings.Split(tx, "\n")
	if lines[nft.Prologue] != "chain c {" {
		t.Errorf("ruleset line 1 is transaction line %d, want %d:\n%s", lineOf(lines, "chain c {"), nft.Prologue+1, tx)
	}
	for _, want := range []string{
		`comment "` + nft.Digest("chain c {\n  counter\n}") + `"`,
		"table inet " + CaptureTable + " {",
		"counter in_1_srv6 {}",
		`iifname "eth1" ip6 nexthdr { 4, 41, 43 } counter name "in_1_srv6"`,
		`oifname "eth0" meta nfproto ipv4 counter name "out_0_ipv4"`,
		`comment "` + nft.Digest(captureBody([]string{"eth0", "eth1"})) + `"`,
	} {
		if !strings.Contains(tx, want) {
			t.Errorf("transaction lacks %q:\n%s", want, tx)
		}
	}
}

func lineOf(lines []string, s string) int {
	for i, l := range lines {
		if l == s {
			return i + 1
		}
	}
	return -1
}

func TestCheckRuleset(t *testing.T) {
	testutil.RequireTool(t, "nft")
	testutil.RequireRoot(t)
	if err := CheckRuleset("chain f {\n type filter hook forward priority filter; policy drop;\n ct state established accept\n}\n"); err != nil {
		t.Errorf("good ruleset: %v", err)
	}
	var ne *nft.Error
	if err := CheckRuleset("chain f {\n type filter hook forward priority filter;\n ct state bogus accept\n}\n"); !errors.As(err, &ne) || ne.Line != 3 {
		t.Errorf("bad ruleset: %v", err)
	}
}

// TestQdiscMatches: tc reads a tbf's burst back rounded.
func TestQdiscMatches(t *testing.T) {
	r := state.RateLimit{Interface: "eth0", RateKbit: 100000, BurstBytes: 65536, LatencyMS: 50}
	q := qdisc{Kind: "tbf"}
	q.Options.Rate, q.Options.Burst = 12500000, 65525
	if !q.matches(r) {
		t.Error("65525 read back for 65536 does not match")
	}
	q.Options.Burst = 32768
	if q.matches(r) {
		t.Error("another burst matches")
	}
	q.Options.Burst, q.Options.Rate = 65536, 1000000
	if q.matches(r) {
		t.Error("another rate matches")
	}
}

func program(t *testing.T, cfg state.LegacyNFConfig) state.Program {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return state.Program{Kind: Program, Interfaces: cfg.Capture, Config: b}
}

func TestDecode(t *testing.T) {
	if _, err := Decode(state.Program{Kind: "proxy"}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("wrong kind: %v", err)
	}
	p := program(t, state.LegacyNFConfig{RateLimits: []state.RateLimit{{Interface: "eth0"}}})
	if _, err := Decode(p); !errors.Is(err, ErrBadConfig) {
		t.Errorf("zero rate: %v", err)
	}
}

// TestDriver: Apply loads the ruleset, the capture and the rate limiter
// and is idempotent; Check reports each thing removed by hand and Apply
// repairs it; the capture counts what the node forwards; a ruleset nft
// rejects fails Apply and leaves the running one; a foreign root qdisc
// is refused, never replaced; Remove leaves nothing of srchain's.
func TestDriver(t *testing.T) {
	testutil.RequireTool(t, "nft")
	testutil.RequireTool(t, "tc")
	a, b := kindtest.Pair(t, "l")
	ctx := context.Background()
	d := Driver{}
	cfg := state.LegacyNFConfig{
		Ruleset:    "chain input {\n  type filter hook input priority filter; policy accept;\n  meta l4proto ipv6-icmp counter accept\n}\n",
		RateLimits: []state.RateLimit{{Interface: "eth0", RateKbit: 8000, BurstBytes: 32768, LatencyMS: 50}},
		Capture:    []string{"eth0"},
	}
	p := program(t, cfg)
	node := state.Node{Name: "nf"}
	t.Cleanup(func() { _ = d.Remove(ctx, a, node, p) })
	undo, err := d.Apply(ctx, a, node, p)
	if err != nil || undo == nil {
		t.Fatalf("first apply: undo %v, %v", undo != nil, err)
	}
	drift := func() string {
		t.Helper()
		dr, err := d.Check(ctx, a, node, p)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(dr, "\n")
	}
	if dr := drift(); dr != "" {
		t.Fatalf("drift after apply: %s", dr)
	}
	if undo, err := d.Apply(ctx, a, node, p); err != nil || undo != nil {
		t.Fatalf("second apply changed something: undo %v, %v", undo != nil, err)
	}
	// Traffic: b pings a; a's capture counts IPv6 in and out, no SRv6.
	if _, err := b.Run(ctx, "ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", kindtest.AddrA.Addr().String()); err != nil {
		t.Fatal(err)
	}
	cs, err := d.Counters(ctx, a, node, p)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, c := range cs {
		got[c.Name] = c.Value
	}
	if got["capture/in/eth0/ipv6"] < 3 || got["capture/out/eth0/ipv6"] < 3 || got["capture/in/eth0/srv6"] != 0 || got["ratelimit/eth0/packets"] < 3 {
		t.Errorf("counters %v", got)
	}
	for what, breakIt := range map[string][]string{
		"table inet srchain_nf missing":                                {"nft", "delete", "table", "inet", Table},
		"table inet srchain_capture missing":                           {"nft", "delete", "table", "inet", CaptureTable},
		"rate limiter on eth0: want tbf 8000 kbit/s burst 32768, have": {"tc", "qdisc", "del", "dev", "eth0", "root"},
	} {
		if _, err := a.Run(ctx, breakIt[0], breakIt[1:]...); err != nil {
			t.Fatal(err)
		}
		if dr := drift(); !strings.Contains(dr, what) {
			t.Errorf("drift %q lacks %q", dr, what)
		}
		if undo, err := d.Apply(ctx, a, node, p); err != nil || undo == nil {
			t.Fatalf("repair %s: undo %v, %v", what, undo != nil, err)
		}
		if dr := drift(); dr != "" {
			t.Errorf("drift after repairing %s: %s", what, dr)
		}
	}
	// A ruleset nft rejects: Apply fails at its line, the old one runs.
	bad := cfg
	bad.Ruleset = "chain input {\n  type filter hook input priority filter;\n  ct state bogus accept\n}\n"
	var ne *nft.Error
	if _, err := d.Apply(ctx, a, node, program(t, bad)); !errors.As(err, &ne) || ne.Line != 3 {
		t.Errorf("bad ruleset: %v", err)
	}
	if dr := drift(); dr != "" {
		t.Errorf("the old ruleset does not run after a rejected one: %s", dr)
	}
	// A root qdisc srchain did not make is refused, and left alone.
	if _, err := a.Run(ctx, "tc", "qdisc", "replace", "dev", "eth0", "root", "pfifo", "limit", "100"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Apply(ctx, a, node, p); !errors.Is(err, ErrForeignQdisc) {
		t.Errorf("foreign qdisc: %v", err)
	}
	if q, err := rootQdisc(ctx, a, "eth0"); err != nil || q.Kind != "pfifo" {
		t.Errorf("foreign qdisc after apply: %+v, %v", q, err)
	}
	if err := d.Remove(ctx, a, node, p); err != nil {
		t.Fatal(err)
	}
	for _, tbl := range []string{Table, CaptureTable} {
		if l, err := nft.ListTable(ctx, a, tbl); err != nil || l != "" {
			t.Errorf("table %s after remove: %q, %v", tbl, l, err)
		}
	}
	if q, err := rootQdisc(ctx, a, "eth0"); err != nil || q.Kind != "pfifo" {
		t.Errorf("remove touched a foreign qdisc: %+v, %v", q, err)
	}
}
