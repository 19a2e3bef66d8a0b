package slogzap

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestThroughSlog: a zap record comes out of the default slog handler,
// as JSON when that is the handler, with the level filter of slog and the
// fields as attributes.
func TestThroughSlog(t *testing.T) {
	defer func(l *slog.Logger) { slog.SetDefault(l) }(slog.Default())
	var buf bytes.Buffer
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	lg := New("etcd-client").With(zap.String("target", "etcd-endpoints"))
	lg.Debug("hidden")
	lg.Warn("retrying of unary invoker failed", zap.Int("attempt", 3), zap.Error(errors.New("deadline exceeded")))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d records, want 1 (debug filtered): %q", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"level": "WARN", "msg": "retrying of unary invoker failed", "component": "etcd-client",
		"target": "etcd-endpoints", "attempt": float64(3), "error": "deadline exceeded"} {
		if rec[k] != want {
			t.Errorf("%s = %v, want %v (record %s)", k, rec[k], want, lines[0])
		}
	}
	buf.Reset()
	lg.Error("e")
	if !strings.Contains(buf.String(), `"level":"ERROR"`) {
		t.Errorf("error record %q", buf.String())
	}
}
