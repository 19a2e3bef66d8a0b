package netfilter

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

// Table is the nftables table srchain owns on a node with a netfilter
// NF (family inet: IPv4 and IPv6 inner packets alike). The ruleset is
// its body.
const Table = "srchain_anf"

// prologue lines in front of the ruleset in the transaction (Transaction).
const prologue = 4

// Transaction is the nft script that replaces srchain's table with one
// holding body, atomically: nft runs a file as one transaction, so
// either the new table is in place or, when any line fails, the old one
// keeps running (seed 002's rules stay unmodified nftables).
func Transaction(body string) string {
	var b strings.Builder
	b.WriteString("table inet " + Table + "\n")
	b.WriteString("delete table inet " + Table + "\n")
	b.WriteString("table inet " + Table + " {\n")
	b.WriteString("comment \"" + Digest(body) + "\"\n")
	b.WriteString(body)
	if !strings.HasSuffix(body, "\n") {
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// Digest names a ruleset in the table's comment, so Check can tell
// whether the table runs the desired ruleset without parsing nft's
// listing.
func Digest(body string) string {
	sum := sha256.Sum256([]byte(body))
	return "srchain ruleset " + hex.EncodeToString(sum[:8])
}

// ErrNftUnavailable: nft (or a namespace to check in) cannot be run here.
var ErrNftUnavailable = errors.New("nft unavailable")

// NftError is nft's first error, with the line in the ruleset (1 = its
// first line; 0 when nft named no line inside it).
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

// parseNftError turns nft's stderr into an NftError at the ruleset's line.
func parseNftError(stderr string) *NftError {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for _, l := range lines {
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

// CheckRuleset runs `nft --check` on the transaction in a throwaway
// network namespace (unshare -n as root, unshare -rn otherwise), so the
// check sees the same parser and kernel as apply without touching any
// real ruleset. It returns an *NftError when nft rejects the ruleset and
// nil when it accepts it or cannot run here (no nft, no namespaces):
// apply checks again, for real.
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
	cmd.Stdin = strings.NewReader(Transaction(body))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if !strings.Contains(stderr.String(), "Error:") || strings.Contains(stderr.String(), "Operation not permitted") {
		return nil // could not check here (no namespaces, no privilege)
	}
	return parseNftError(stderr.String())
}

// nftRun runs nft in ns with stdin.
func nftRun(ctx context.Context, ns *netns.NS, stdin string, args ...string) (string, string, error) {
	var cmd *exec.Cmd
	if ns == nil {
		cmd = exec.CommandContext(ctx, "nft", args...)
	} else {
		cmd = ns.Command(ctx, "nft", args...)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// LoadRuleset replaces srchain's table in ns with body in one nft
// transaction. When nft rejects it the error is an *NftError and the
// table that ran before keeps running.
func LoadRuleset(ctx context.Context, ns *netns.NS, body string) error {
	_, stderr, err := nftRun(ctx, ns, Transaction(body), "-f", "-")
	if err != nil {
		if strings.Contains(stderr, "Error:") {
			return fmt.Errorf("load ruleset: %w", parseNftError(stderr))
		}
		return fmt.Errorf("load ruleset: %s: %w", strings.TrimSpace(stderr), err)
	}
	return nil
}

// currentTable returns `nft list table inet srchain_anf` in ns, "" when
// the table does not exist.
func currentTable(ctx context.Context, ns *netns.NS) (string, error) {
	out, stderr, err := nftRun(ctx, ns, "", "list", "table", "inet", Table)
	if err != nil {
		if strings.Contains(stderr, "No such file") {
			return "", nil
		}
		return "", fmt.Errorf("list table %s: %s: %w", Table, strings.TrimSpace(stderr), err)
	}
	return out, nil
}

// restoreTable puts back a table listed by currentTable ("" deletes it).
func restoreTable(ctx context.Context, ns *netns.NS, listing string) error {
	script := "table inet " + Table + "\ndelete table inet " + Table + "\n" + listing
	if _, stderr, err := nftRun(ctx, ns, script, "-f", "-"); err != nil {
		return fmt.Errorf("restore table %s: %s: %w", Table, strings.TrimSpace(stderr), err)
	}
	return nil
}

// removeTable deletes srchain's table (absent: nothing to do).
func removeTable(ctx context.Context, ns *netns.NS) error {
	return restoreTable(ctx, ns, "")
}
