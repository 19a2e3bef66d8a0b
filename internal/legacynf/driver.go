package legacynf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/nft"
	"github.com/srchain/srchain/internal/state"
)

// Program is the state.Program kind this package drives.
const Program = state.ProgramLegacyNF

func init() { kind.RegisterDriver(Program, Driver{}) }

// ErrForeignQdisc: an interface already has a root qdisc of another
// kind than srchain's tbf; srchain never replaces it.
var ErrForeignQdisc = errors.New("foreign root qdisc")

// ErrBadConfig: a program whose config is not a legacy NF's.
var ErrBadConfig = errors.New("bad legacy-nf program config")

// Decode reads a legacy-nf program's typed config.
func Decode(p state.Program) (state.LegacyNFConfig, error) {
	var c state.LegacyNFConfig
	if p.Kind != Program {
		return c, fmt.Errorf("program %q: %w", p.Kind, ErrBadConfig)
	}
	if err := json.Unmarshal(p.Config, &c); err != nil {
		return c, fmt.Errorf("decode legacy-nf config: %w: %w", ErrBadConfig, err)
	}
	for _, r := range c.RateLimits {
		if r.Interface == "" || r.RateKbit < 1 || r.BurstBytes < 1 || r.LatencyMS < 1 {
			return c, fmt.Errorf("rate limit on %q: %w", r.Interface, ErrBadConfig)
		}
	}
	return c, nil
}

// Driver makes a legacy NF node's software real: nftables tables and
// tc tbf qdiscs. It needs no BPF and pins nothing.
type Driver struct{}

// Apply loads the ruleset and the capture table in one nft transaction
// (a ruleset nft rejects changes nothing) and puts each rate limiter in
// place as the interface's root qdisc. What is already as desired is
// left alone (nil undo); the undo restores the tables and qdiscs this
// call replaced.
func (Driver) Apply(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := Decode(p)
	if err != nil {
		return nil, err
	}
	var undo kind.Undo
	fail := func(err error) (func() error, error) {
		return undo.Fail(fmt.Errorf("legacy nf %s: %w", node.Name, err))
	}
	ok, err := tablesCurrent(ctx, ns, c)
	if err != nil {
		return fail(err)
	}
	if !ok {
		prev := map[string]string{}
		for _, t := range []string{Table, CaptureTable} {
			if prev[t], err = nft.ListTable(ctx, ns, t); err != nil {
				return fail(err)
			}
		}
		if err := load(ctx, ns, c.Ruleset, c.Capture); err != nil {
			return fail(err)
		}
		undo.Add(func() error { return restoreTables(context.WithoutCancel(ctx), ns, prev) })
	}
	for _, r := range c.RateLimits {
		have, err := rootQdisc(ctx, ns, r.Interface)
		if err != nil {
			return fail(err)
		}
		if have.matches(r) {
			continue
		}
		if have.Kind != "" && have.Kind != "tbf" {
			return fail(fmt.Errorf("rate limiter on %s: %w: the interface has a %s root qdisc srchain did not make", r.Interface, ErrForeignQdisc, have.Kind))
		}
		if err := setTBF(ctx, ns, r); err != nil {
			return fail(err)
		}
		undo.Add(func() error { return restoreQdisc(context.WithoutCancel(ctx), ns, r.Interface, have) })
	}
	return undo.Result(), nil
}

// tablesCurrent reports whether both tables run the desired digests.
func tablesCurrent(ctx context.Context, ns *netns.NS, c state.LegacyNFConfig) (bool, error) {
	rs, err := nft.ListTable(ctx, ns, Table)
	if err != nil {
		return false, err
	}
	ct, err := nft.ListTable(ctx, ns, CaptureTable)
	if err != nil {
		return false, err
	}
	return strings.Contains(rs, nft.Digest(c.Ruleset)) && strings.Contains(ct, nft.Digest(captureBody(c.Capture))), nil
}

// Check reports how the node differs from p, changing nothing.
func (Driver) Check(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]string, error) {
	c, err := Decode(p)
	if err != nil {
		return nil, err
	}
	var drift []string
	rs, err := nft.ListTable(ctx, ns, Table)
	if err != nil {
		return nil, err
	}
	switch {
	case rs == "":
		drift = append(drift, fmt.Sprintf("table inet %s missing (the legacy NF's ruleset)", Table))
	case !strings.Contains(rs, nft.Digest(c.Ruleset)):
		drift = append(drift, fmt.Sprintf("table inet %s holds another ruleset than the spec's", Table))
	}
	ct, err := nft.ListTable(ctx, ns, CaptureTable)
	if err != nil {
		return nil, err
	}
	switch {
	case ct == "":
		drift = append(drift, fmt.Sprintf("table inet %s missing (capture counters)", CaptureTable))
	case !strings.Contains(ct, nft.Digest(captureBody(c.Capture))):
		drift = append(drift, fmt.Sprintf("table inet %s counts other interfaces than %s", CaptureTable, strings.Join(c.Capture, ", ")))
	}
	for _, r := range c.RateLimits {
		have, err := rootQdisc(ctx, ns, r.Interface)
		if err != nil {
			return nil, err
		}
		if !have.matches(r) {
			drift = append(drift, fmt.Sprintf("rate limiter on %s: want tbf %d kbit/s burst %d, have %s", r.Interface, r.RateKbit, r.BurstBytes, have))
		}
	}
	return drift, nil
}

// Remove deletes srchain's tables and the rate limiters that are still
// srchain's (a tbf root qdisc).
func (Driver) Remove(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) error {
	c, err := Decode(p)
	if err != nil {
		return err
	}
	errs := []error{restoreTables(ctx, ns, map[string]string{})}
	for _, r := range c.RateLimits {
		have, err := rootQdisc(ctx, ns, r.Interface)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if have.Kind == "tbf" {
			errs = append(errs, restoreQdisc(ctx, ns, r.Interface, qdisc{}))
		}
	}
	return errors.Join(errs...)
}

// Counters: what the NF saw and sent per interface
// (capture/in/IF/ipv4, .../ipv6, .../srv6; the same with out), and per
// rate limiter its sent packets and drops (ratelimit/IF/...).
func (Driver) Counters(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]kind.Counter, error) {
	c, err := Decode(p)
	if err != nil {
		return nil, err
	}
	have, err := captureCounters(ctx, ns)
	if err != nil {
		return nil, err
	}
	var out []kind.Counter
	for _, dir := range []string{"in", "out"} {
		for i, ifn := range c.Capture {
			for _, k := range captureKinds {
				v, ok := have[counterName(dir, i, k)]
				if !ok {
					return nil, fmt.Errorf("read capture of %s: counter %s: %w", ifn, counterName(dir, i, k), ErrNoCounters)
				}
				out = append(out, kind.Counter{Name: "capture/" + dir + "/" + ifn + "/" + k, Value: v})
			}
		}
	}
	for _, r := range c.RateLimits {
		q, err := rootQdisc(ctx, ns, r.Interface)
		if err != nil {
			return nil, err
		}
		out = append(out,
			kind.Counter{Name: "ratelimit/" + r.Interface + "/packets", Value: q.Packets},
			kind.Counter{Name: "ratelimit/" + r.Interface + "/drops", Value: q.Drops})
	}
	return out, nil
}

// captureCounters reads the packets of every named counter of the
// capture table.
func captureCounters(ctx context.Context, ns *netns.NS) (map[string]uint64, error) {
	out, stderr, err := nft.Run(ctx, ns, "", "nft", "-j", "list", "counters", "table", "inet", CaptureTable)
	if err != nil {
		if strings.Contains(stderr, "No such file") {
			return nil, fmt.Errorf("read capture: table inet %s: %w", CaptureTable, ErrNoCounters)
		}
		return nil, fmt.Errorf("read capture: %s: %w", strings.TrimSpace(stderr), err)
	}
	var doc struct {
		Nftables []struct {
			Counter *struct {
				Name    string `json:"name"`
				Table   string `json:"table"`
				Packets uint64 `json:"packets"`
			} `json:"counter"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, fmt.Errorf("decode nft counters: %w", err)
	}
	m := map[string]uint64{}
	for _, e := range doc.Nftables {
		if e.Counter != nil && e.Counter.Table == CaptureTable {
			m[e.Counter.Name] = e.Counter.Packets
		}
	}
	return m, nil
}

// qdisc is an interface's root qdisc as tc shows it ("" kind: none or
// the default).
type qdisc struct {
	Kind    string `json:"kind"`
	Root    bool   `json:"root"`
	Packets uint64 `json:"packets"`
	Drops   uint64 `json:"drops"`
	Options struct {
		Rate  uint64 `json:"rate"`  // bytes per second
		Burst uint64 `json:"burst"` // bytes
		Lat   uint64 `json:"lat"`   // microseconds
	} `json:"options"`
}

func (q qdisc) String() string {
	if q.Kind == "" {
		return "no root qdisc"
	}
	if q.Kind != "tbf" {
		return "root qdisc " + q.Kind
	}
	return "tbf " + strconv.FormatUint(q.Options.Rate*8/1000, 10) + " kbit/s burst " + strconv.FormatUint(q.Options.Burst, 10)
}

// matches reports whether q is r. The kernel keeps the burst as a time
// at the rate, so tc reads it back rounded (65536 bytes at 100 Mbit/s
// are 65525): a burst within 0.2% is the same.
func (q qdisc) matches(r state.RateLimit) bool {
	burst := uint64(r.BurstBytes)
	slack := burst/500 + 2
	return q.Kind == "tbf" && q.Options.Rate == uint64(r.RateKbit)*1000/8 &&
		q.Options.Burst+slack >= burst && q.Options.Burst <= burst+slack
}

// rootQdisc reads the root qdisc of ifname.
func rootQdisc(ctx context.Context, ns *netns.NS, ifname string) (qdisc, error) {
	out, stderr, err := nft.Run(ctx, ns, "", "tc", "-s", "-j", "qdisc", "show", "dev", ifname, "root")
	if err != nil {
		return qdisc{}, fmt.Errorf("show qdisc of %s: %s: %w", ifname, strings.TrimSpace(stderr), err)
	}
	var qs []qdisc
	if err := json.Unmarshal([]byte(out), &qs); err != nil {
		return qdisc{}, fmt.Errorf("decode qdisc of %s: %w", ifname, err)
	}
	for _, q := range qs {
		if q.Root && q.Kind != "noqueue" && q.Kind != "pfifo_fast" && q.Kind != "mq" {
			return q, nil
		}
	}
	return qdisc{}, nil
}

func tbfArgs(ifname string, rateKbit, burst int, latencyUS uint64) []string {
	return []string{"qdisc", "replace", "dev", ifname, "root", "tbf",
		"rate", strconv.Itoa(rateKbit) + "kbit", "burst", strconv.Itoa(burst),
		"latency", strconv.FormatUint(latencyUS, 10) + "us"}
}

func setTBF(ctx context.Context, ns *netns.NS, r state.RateLimit) error {
	if _, stderr, err := nft.Run(ctx, ns, "", "tc", tbfArgs(r.Interface, r.RateKbit, r.BurstBytes, uint64(r.LatencyMS)*1000)...); err != nil {
		return fmt.Errorf("set rate limiter on %s: %s: %w", r.Interface, strings.TrimSpace(stderr), err)
	}
	return nil
}

// restoreQdisc puts back a root qdisc read by rootQdisc: a tbf with its
// settings, or none (deletes srchain's). Another kind srchain did not
// make is never touched: Apply replaced only a tbf or nothing.
func restoreQdisc(ctx context.Context, ns *netns.NS, ifname string, q qdisc) error {
	var args []string
	switch q.Kind {
	case "":
		args = []string{"qdisc", "del", "dev", ifname, "root"}
	case "tbf":
		args = tbfArgs(ifname, int(q.Options.Rate*8/1000), int(q.Options.Burst), q.Options.Lat)
	default:
		return nil
	}
	if _, stderr, err := nft.Run(ctx, ns, "", "tc", args...); err != nil && !strings.Contains(stderr, "Cannot delete qdisc with handle of zero") {
		return fmt.Errorf("restore qdisc of %s: %s: %w", ifname, strings.TrimSpace(stderr), err)
	}
	return nil
}
