// Package legacynf drives the software of a legacy (SR-unaware) network
// function node (spec role legacy-nf, docs/proxy.md): its nftables
// ruleset in table inet srchain_nf, its tc tbf rate limiters and the
// capture counters (table inet srchain_capture) that show what it saw:
// plain IPv4/IPv6 packets, never SRv6. Its SR proxy runs on the router
// in front of it (internal/kinds/proxy).
package legacynf

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/srchain/srchain/internal/netns"
)

// Tables srchain owns on a legacy NF node.
const (
	// Table holds the spec's ruleset (its body).
	Table = "srchain_nf"
	// CaptureTable counts, per interface and direction, the IPv4 and
	// IPv6 packets and among them those still carrying SRv6 (a routing
	// header or an encapsulated packet right after the IPv6 header).
	CaptureTable = "srchain_capture"
)

// prologue is how many transaction lines come before the ruleset's
// first line (Transaction), to map nft's line numbers back.
const prologue = 4

// Families the capture counts.
var captureKinds = []string{"ipv4", "ipv6", "srv6"}

// Transaction is the nft script that replaces both of srchain's tables
// in one transaction: either the new ruleset and capture are in place or,
// when any line fails, the old ones keep running.
func Transaction(body string, capture []string) string {
	var b strings.Builder
	b.WriteString("table inet " + Table + "\n")
	b.WriteString("delete table inet " + Table + "\n")
	b.WriteString("table inet " + Table + " {\n")
	b.WriteString("comment \"" + Digest(body) + "\"\n")
	b.WriteString(body)
	if body != "" && !strings.HasSuffix(body, "\n") {
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	b.WriteString(captureScript(capture))
	return b.String()
}

// captureScript is the capture table: named counters in_<i>_<kind> and
// out_<i>_<kind> for the i-th interface of capture (sorted by the
// compiler), at the first prerouting and the last postrouting priority.
func captureScript(capture []string) string {
	var b strings.Builder
	b.WriteString("table inet " + CaptureTable + "\n")
	b.WriteString("delete table inet " + CaptureTable + "\n")
	b.WriteString("table inet " + CaptureTable + " {\n")
	b.WriteString("comment \"" + Digest(strings.Join(capture, ",")) + "\"\n")
	for i := range capture {
		for _, dir := range []string{"in", "out"} {
			for _, k := range captureKinds {
				fmt.Fprintf(&b, "counter %s {}\n", counterName(dir, i, k))
			}
		}
	}
	for _, dir := range []string{"in", "out"} {
		hook, prio, match := "prerouting", "-400", "iifname"
		if dir == "out" {
			hook, prio, match = "postrouting", "400", "oifname"
		}
		fmt.Fprintf(&b, "chain %s {\ntype filter hook %s priority %s; policy accept;\n", dir, hook, prio)
		for i, ifn := range capture {
			fmt.Fprintf(&b, "%s %q meta nfproto ipv4 counter name %q\n", match, ifn, counterName(dir, i, "ipv4"))
			fmt.Fprintf(&b, "%s %q meta nfproto ipv6 counter name %q\n", match, ifn, counterName(dir, i, "ipv6"))
			fmt.Fprintf(&b, "%s %q ip6 nexthdr { 4, 41, 43 } counter name %q\n", match, ifn, counterName(dir, i, "srv6"))
		}
		b.WriteString("}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

func counterName(dir string, i int, kind string) string {
	return fmt.Sprintf("%s_%d_%s", dir, i, kind)
}

// Digest names a ruleset in its table's comment, so Check can tell
// whether the table runs the desired ruleset without parsing listings.
func Digest(body string) string {
	sum := sha256.Sum256([]byte(body))
	return "srchain ruleset " + hex.EncodeToString(sum[:8])
}

// NftError is nft's first error at the ruleset's line (1 = its first
// line; 0 when nft named no line inside it).
type NftError struct {
	Line int
	Msg  string
}

func (e *NftError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("ruleset line %d: nft: %s", e.Line, e.Msg)
	}
	return "nft: " + e.Msg
}

var nftLoc = regexp.MustCompile(`^[^:\s]*:(\d+):[0-9-]+: (Error: .*)$`)

func parseNftError(stderr string) *NftError {
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if m := nftLoc.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			n -= prologue
			if n < 1 {
				n = 0
			}
			return &NftError{Line: n, Msg: m[2]}
		}
	}
	msg := strings.TrimSpace(stderr)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return &NftError{Msg: msg}
}

// CheckRuleset runs `nft --check` on the ruleset's transaction in a
// throwaway network namespace (unshare -n as root, -rn otherwise). It
// returns an *NftError when nft rejects it, nil when nft accepts it or
// cannot run here (apply checks again, for real).
func CheckRuleset(body string) error {
	if _, err := exec.LookPath("nft"); err != nil {
		return nil
	}
	args := []string{"-n", "nft", "-c", "-f", "-"}
	if os.Geteuid() != 0 {
		args = append([]string{"-r"}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", args...)
	cmd.Stdin = strings.NewReader(Transaction(body, nil))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		return nil
	}
	if !strings.Contains(stderr.String(), "Error:") || strings.Contains(stderr.String(), "Operation not permitted") {
		return nil
	}
	return parseNftError(stderr.String())
}

// run runs a tool in ns (the current namespace when ns is nil).
func run(ctx context.Context, ns *netns.NS, stdin, name string, args ...string) (string, string, error) {
	var cmd *exec.Cmd
	if ns == nil {
		cmd = exec.CommandContext(ctx, name, args...)
	} else {
		cmd = ns.Command(ctx, name, args...)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// load replaces srchain's tables in ns in one nft transaction.
func load(ctx context.Context, ns *netns.NS, body string, capture []string) error {
	_, stderr, err := run(ctx, ns, Transaction(body, capture), "nft", "-f", "-")
	if err != nil {
		if strings.Contains(stderr, "Error:") {
			return fmt.Errorf("load ruleset: %w", parseNftError(stderr))
		}
		return fmt.Errorf("load ruleset: %s: %w", strings.TrimSpace(stderr), err)
	}
	return nil
}

// listTable returns `nft list table inet NAME`, "" when it does not exist.
func listTable(ctx context.Context, ns *netns.NS, name string) (string, error) {
	out, stderr, err := run(ctx, ns, "", "nft", "list", "table", "inet", name)
	if err != nil {
		if strings.Contains(stderr, "No such file") {
			return "", nil
		}
		return "", fmt.Errorf("list table %s: %s: %w", name, strings.TrimSpace(stderr), err)
	}
	return out, nil
}

// restoreTables puts back tables as listed by listTable ("" deletes).
func restoreTables(ctx context.Context, ns *netns.NS, listings map[string]string) error {
	var b strings.Builder
	for _, name := range []string{Table, CaptureTable} {
		b.WriteString("table inet " + name + "\ndelete table inet " + name + "\n" + listings[name] + "\n")
	}
	if _, stderr, err := run(ctx, ns, b.String(), "nft", "-f", "-"); err != nil {
		return fmt.Errorf("restore tables: %s: %w", strings.TrimSpace(stderr), err)
	}
	return nil
}

// ErrNoCounters: the capture table is not there to read.
var ErrNoCounters = errors.New("capture counters missing")
