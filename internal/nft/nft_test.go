package nft

import (
	"errors"
	"strings"
	"testing"
)

func TestParseError(t *testing.T) {
	for _, tc := range []struct {
		stderr string
		line   int
		msg    string
	}{
		{"/dev/stdin:7:2-6: Error: No symbol type information\n bogus here\n ^^^^^\n", 7 - Prologue, "Error: No symbol type information"},
		{"/dev/stdin:2:1-3: Error: Could not process rule\n", 0, "Error: Could not process rule"},
		{"netlink: Error: Could not process rule: Operation not permitted\n", 0, "netlink: Error: Could not process rule: Operation not permitted"},
		{"something else\nmore", 0, "something else"},
	} {
		e := ParseError(tc.stderr, Prologue)
		if e.Line != tc.line || e.Msg != tc.msg {
			t.Errorf("ParseError(%q) = %+v, want line %d msg %q", tc.stderr, e, tc.line, tc.msg)
		}
	}
}

// TestReplace: the body starts at line Prologue + 1 and the table's
// comment names the body.
func TestReplace(t *testing.T) {
	tx := Replace("t", "chain c {\n}")
	lines := strings.Split(tx, "\n")
	if lines[Prologue] != "chain c {" {
		t.Errorf("body starts at line %d, want %d:\n%s", strings.Index(tx, "chain"), Prologue+1, tx)
	}
	if !strings.HasPrefix(tx, "table inet t\ndelete table inet t\n") || !strings.Contains(tx, Digest("chain c {\n}")) {
		t.Errorf("transaction:\n%s", tx)
	}
	if Digest("a") == Digest("b") {
		t.Error("digests collide")
	}
}

// TestContained: a body may not close the table it is loaded into.
func TestContained(t *testing.T) {
	for _, tc := range []struct {
		body string
		line int // 0: contained
	}{
		{"chain in {\n  type filter hook input priority 0; policy accept;\n}\n", 0},
		{"set s { type ipv6_addr; elements = { ::1 } }\n", 0},
		{"chain c { counter comment \"a } b\" }\n", 0},
		{"chain c { # } closes nothing\n}\n", 0},
		{"}\nflush ruleset\ntable inet srchain_nf {\n", 1},
		{"chain c {\n}\n}\n", 3},
	} {
		err := Contained(tc.body)
		var ne *Error
		switch {
		case tc.line == 0 && err != nil:
			t.Errorf("%q: %v, want contained", tc.body, err)
		case tc.line != 0 && (!errors.As(err, &ne) || ne.Line != tc.line):
			t.Errorf("%q: %v, want an error at line %d", tc.body, err, tc.line)
		}
	}
}
