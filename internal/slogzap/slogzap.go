// Package slogzap sends the zap logs of the etcd client library through
// log/slog, so every line srchain writes follows --log-format and
// --log-level (etcd's clientv3 otherwise builds its own zap production
// logger: JSON on stderr at info, whatever the operator chose).
package slogzap

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New returns a zap logger that writes to slog.Default() at the time of
// each record (the CLI installs its logger before any command runs),
// every record tagged component=name.
func New(name string) *zap.Logger {
	return zap.New(&core{attrs: []slog.Attr{slog.String("component", name)}})
}

// core is a zapcore.Core over slog: fields become attributes, zap levels
// the nearest slog level (DPanic, Panic, Fatal are errors: zap itself
// still panics or exits after writing them).
type core struct {
	attrs []slog.Attr
}

func level(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (c *core) Enabled(l zapcore.Level) bool {
	return slog.Default().Enabled(context.Background(), level(l))
}

func (c *core) With(fields []zapcore.Field) zapcore.Core {
	attrs := append(append([]slog.Attr(nil), c.attrs...), toAttrs(fields)...)
	return &core{attrs: attrs}
}

func (c *core) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *core) Write(e zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(e.Time, level(e.Level), e.Message, 0)
	r.AddAttrs(c.attrs...)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(toAttrs(fields)...)
	return slog.Default().Handler().Handle(context.Background(), r)
}

func (c *core) Sync() error { return nil }

// toAttrs encodes zap fields with zap's own map encoder (so every field
// type, errors and objects included, gets its usual value).
func toAttrs(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	attrs := make([]slog.Attr, 0, len(fields))
	for _, f := range fields {
		f.AddTo(enc)
		// Keep zap's field order: read each key right after adding it.
		if v, ok := enc.Fields[f.Key]; ok {
			attrs = append(attrs, slog.Any(f.Key, v))
			delete(enc.Fields, f.Key)
		}
	}
	// Fields that wrote under other keys (namespaces, inline objects).
	for k, v := range enc.Fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	return attrs
}
