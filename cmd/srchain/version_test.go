package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionFlagAgrees: `srchain --version` and `srchain version` print
// the same line, for a plain build ("dev") and for one stamped by
// `make dist` (-X main.version=...).
func TestVersionFlagAgrees(t *testing.T) {
	defer func(v string) { version = v }(version)
	for _, v := range []string{"dev", "v1.2.0-3-g6460e7f-dirty"} {
		version = v
		flagOut, _, err := runCLI(t, "--version")
		if err != nil {
			t.Fatalf("--version: %v", err)
		}
		cmdOut, _, err := runCLI(t, "version")
		if err != nil {
			t.Fatalf("version: %v", err)
		}
		if flagOut != cmdOut || !strings.HasPrefix(cmdOut, "srchain "+v) || strings.Count(cmdOut, "\n") != 1 {
			t.Errorf("version %s: --version printed %q, version printed %q", v, flagOut, cmdOut)
		}
		if v != "dev" && cmdOut != "srchain "+v+"\n" {
			t.Errorf("stamped version: %q", cmdOut)
		}
	}
}

// TestLogFlags: --log-format json gives one JSON object per record on the
// command's stderr, --log-level filters, --verbose still means debug, and
// bad values are refused before the command runs.
func TestLogFlags(t *testing.T) {
	defer func(l *slog.Logger) { slog.SetDefault(l) }(slog.Default())
	run := func(args ...string) (string, error) {
		e, _, errOut := testEnv(context.Background())
		root := newRootCmd(e)
		root.SetArgs(args)
		if err := root.ExecuteContext(e.ctx); err != nil {
			return "", err
		}
		// The command installed its logger as the default: log through it.
		slog.Debug("d")
		slog.Info("i", "k", "v")
		slog.Warn("w")
		return errOut.String(), nil
	}
	out, err := run("--log-format", "json", "--log-level", "info", "version")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("json at info: %d records, want 2 (info, warn): %q", len(lines), out)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil || rec["msg"] != "i" || rec["k"] != "v" || rec["level"] != "INFO" {
		t.Errorf("json record %q: %v %v", lines[0], rec, err)
	}
	out, err = run("--log-level", "WARN", "version")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "level=WARN msg=w") {
		t.Errorf("text at warn: %q", out)
	}
	out, err = run("--log-level", "warn", "-v", "version")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out, "\n") != 3 || !strings.Contains(out, "level=DEBUG msg=d") {
		t.Errorf("-v: %q", out)
	}
	for _, args := range [][]string{{"--log-format", "xml", "version"}, {"--log-level", "loud", "version"}} {
		if _, err := run(args...); !errors.Is(err, errLogFlag) {
			t.Errorf("%v: error %v, want errLogFlag", args, err)
		}
	}
}

// TestGenMan: one page per visible command, built from the flags, with no
// page for the hidden generator itself and no build-date footer.
func TestGenMan(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := runCLI(t, "gen-man", dir); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "srchain-agent.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`.TH "SRCHAIN" "1"`, `\fB--node\fP`, `\fB--config\fP`, `\fB--log-format\fP`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("srchain-agent.1 lacks %q", want)
		}
	}
	if strings.Contains(string(page), "Auto generated") {
		t.Error("srchain-agent.1 carries cobra's dated footer")
	}
	for _, name := range []string{"srchain.1", "srchain-serve.1", "srchain-version.1"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "srchain-gen-man.1")); err == nil {
		t.Error("the hidden gen-man command got a page")
	}
}
