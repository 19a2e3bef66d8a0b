package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
)

// errLogFlag marks a bad --log-format or --log-level value.
var errLogFlag = errors.New("bad log flag")

// newLogger builds the process logger from --log-format, --log-level and
// --verbose. text is slog's logfmt-like TextHandler (what an operator
// reads in `journalctl -u srchain-agent`); json is one object per line for
// a log collector. --verbose is kept from before --log-level existed: it
// lowers the level to debug, never raises it.
func newLogger(w io.Writer, format, level string, verbose bool) (*slog.Logger, error) {
	var lv slog.Level
	// UnmarshalText takes debug/info/warn/error in any case, and offsets
	// such as "info+2" (log/slog Level.UnmarshalText).
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("parse --log-level %q (debug, info, warn or error): %w", level, errLogFlag)
	}
	if verbose && lv > slog.LevelDebug {
		lv = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("parse --log-format %q (text or json): %w", format, errLogFlag)
}
