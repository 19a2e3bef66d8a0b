// Package nft runs the real nft for the kinds that own nftables tables
// (End.AN.NF's srchain_anf, a legacy NF's srchain_nf and its capture
// table): atomic table replacement in one transaction, the ruleset
// check in a throwaway namespace, listings, and nft's errors mapped back
// to the line of the spec's ruleset.
package nft

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/srchain/srchain/internal/netns"
)

// Replace is the start of a transaction that replaces table (family
// inet) with one holding body: nft runs a file as one transaction, so
// either the new table is in place or, when any line fails, the old one
// keeps running. The table's comment carries Digest(body), so a check
// can tell what runs without parsing listings. Prologue is how many
// lines come before body's first.
func Replace(table, body string) string {
	var b strings.Builder
	b.WriteString("table inet " + table + "\n")
	b.WriteString("delete table inet " + table + "\n")
	b.WriteString("table inet " + table + " {\n")
	b.WriteString("comment \"" + Digest(body) + "\"\n")
	b.WriteString(body)
	if body != "" && !strings.HasSuffix(body, "\n") {
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// Contained reports a body that would close the table Replace opens for
// it: a `}` at its top level ends the table, and what follows runs on
// the whole namespace (`flush ruleset` would empty every table there, not
// only srchain's). Braces inside strings and comments do not count.
// An *Error names the line.
func Contained(body string) error {
	depth := 0
	for i, line := range strings.Split(body, "\n") {
		quoted := false
	chars:
		for _, r := range line {
			switch {
			case r == '"':
				quoted = !quoted
			case quoted:
			case r == '#':
				break chars
			case r == '{':
				depth++
			case r == '}':
				if depth--; depth < 0 {
					return &Error{Line: i + 1, Msg: "this } would close srchain's table: a ruleset holds the chains, sets and maps of its own table only"}
				}
			}
		}
	}
	return nil
}

// Prologue is the number of lines Replace writes before the body.
const Prologue = 4

// Digest names a ruleset in its table's comment.
func Digest(body string) string {
	sum := sha256.Sum256([]byte(body))
	return "srchain ruleset " + hex.EncodeToString(sum[:8])
}

// Error is nft's first error at the ruleset's line (1 = its first line;
// 0 when nft named no line inside it).
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("ruleset line %d: nft: %s", e.Line, e.Msg)
	}
	return "nft: " + e.Msg
}

var loc = regexp.MustCompile(`^[^:\s]*:(\d+):[0-9-]+: (Error: .*)$`)

// ParseError turns nft's stderr into an Error at the ruleset's line, for
// a transaction with prologue lines before the ruleset.
func ParseError(stderr string, prologue int) *Error {
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if m := loc.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			n -= prologue
			if n < 1 {
				n = 0
			}
			return &Error{Line: n, Msg: m[2]}
		}
	}
	msg := strings.TrimSpace(stderr)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return &Error{Msg: msg}
}

// Check runs `nft --check` on script in a throwaway network namespace
// (unshare -n as root, unshare -rn otherwise), so the check sees the
// same parser and kernel as apply without touching any real ruleset. It
// returns an *Error when nft rejects the script and nil when it accepts
// it or cannot run here (no nft, no namespaces): apply checks again, for
// real. ifaces are the interfaces the ruleset's node will have: they are
// made in the namespace first (veths), since nft resolves `iif`/`oif`
// names when it loads a rule. One script and set of interfaces is
// checked once per process (validate and compile both ask).
func Check(script string, prologue int, ifaces ...string) error {
	key := strings.Join(append([]string{script}, ifaces...), "\x00")
	checked.Lock()
	err, ok := checked.m[key]
	checked.Unlock()
	if ok {
		return err
	}
	err = check(script, prologue, ifaces)
	checked.Lock()
	if checked.m == nil || len(checked.m) >= maxChecked {
		checked.m = map[string]error{} // a long-running controller sees many
	}
	checked.m[key] = err
	checked.Unlock()
	return err
}

var checked struct {
	sync.Mutex
	m map[string]error
}

// maxChecked bounds the memo of Check: past it, it starts afresh.
const maxChecked = 1024

// mkLinks makes each argument an interface (a veth, whose peer is
// ckN), then runs nft -c on stdin; exit 99: an interface could not be
// made.
const mkLinks = `n=0
for i; do
	ip link show "$i" >/dev/null 2>&1 && continue
	n=$((n+1))
	ip link add "$i" type veth peer name "ck$n" >/dev/null 2>&1 || exit 99
done
exec nft -c -f -`

func check(script string, prologue int, ifaces []string) error {
	if _, err := exec.LookPath("nft"); err != nil {
		return nil
	}
	args := append([]string{"-n", "sh", "-c", mkLinks, "sh"}, ifaces...)
	if os.Geteuid() != 0 {
		args = append([]string{"-r"}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", args...)
	cmd.Stdin = strings.NewReader(script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		return nil
	}
	if !strings.Contains(stderr.String(), "Error:") || strings.Contains(stderr.String(), "Operation not permitted") {
		return nil // could not check here (no namespaces, no privilege, no interfaces)
	}
	return ParseError(stderr.String(), prologue)
}

// Run runs a tool in ns (the current namespace when ns is nil) with stdin.
func Run(ctx context.Context, ns *netns.NS, stdin, name string, args ...string) (string, string, error) {
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

// Load runs the transaction script in ns. When nft rejects it the error
// wraps an *Error and the tables that ran before keep running.
func Load(ctx context.Context, ns *netns.NS, script string, prologue int) error {
	_, stderr, err := Run(ctx, ns, script, "nft", "-f", "-")
	if err != nil {
		if strings.Contains(stderr, "Error:") {
			return fmt.Errorf("load ruleset: %w", ParseError(stderr, prologue))
		}
		return fmt.Errorf("load ruleset: %s: %w", strings.TrimSpace(stderr), err)
	}
	return nil
}

// ListTable returns `nft list table inet NAME` in ns, "" when the table
// does not exist.
func ListTable(ctx context.Context, ns *netns.NS, name string) (string, error) {
	out, stderr, err := Run(ctx, ns, "", "nft", "list", "table", "inet", name)
	if err != nil {
		if strings.Contains(stderr, "No such file") {
			return "", nil
		}
		return "", fmt.Errorf("list table %s: %s: %w", name, strings.TrimSpace(stderr), err)
	}
	return out, nil
}

// Restore puts back tables as listed by ListTable ("" deletes a table),
// in one transaction.
func Restore(ctx context.Context, ns *netns.NS, listings map[string]string, tables ...string) error {
	var b strings.Builder
	for _, name := range tables {
		b.WriteString("table inet " + name + "\ndelete table inet " + name + "\n" + listings[name] + "\n")
	}
	if _, stderr, err := Run(ctx, ns, b.String(), "nft", "-f", "-"); err != nil {
		return fmt.Errorf("restore tables %s: %s: %w", strings.Join(tables, ", "), strings.TrimSpace(stderr), err)
	}
	return nil
}
