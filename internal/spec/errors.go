package spec

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrInvalid is wrapped by every error Parse and Validate return, so callers
// can tell a bad spec from an I/O failure.
var ErrInvalid = errors.New("invalid spec")

// FieldError is one problem in a spec, located by field path and position.
type FieldError struct {
	File string
	// Path is the field path, e.g. chains[1].nfs[2]; empty for the document.
	Path      string
	Line, Col int
	Msg       string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:%d:", e.Line, e.Col)
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap lets errors.Is(err, ErrInvalid) hold for every FieldError.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// FieldErrors flattens an error returned by Parse, Validate or Load into its
// FieldErrors (nil for other errors).
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if fe, ok := err.(*FieldError); ok {
			out = append(out, fe)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}

// pos is a 1-based line and column in the YAML file.
type pos struct {
	line, col int
	block     bool // a block scalar (| or >): its text starts on the next line
}

// BlockScalar reports whether the value at path is a block scalar (`|`
// or `>`), whose content starts on the line after the one ErrorAt gives,
// so that a line inside it (an nft error's) maps to a line of the file.
func (s *Spec) BlockScalar(path string) bool { return s.pos[path].block }

// errorf makes a FieldError positioned at path, or at its closest ancestor
// that the file mentions (a missing field is reported where its parent is).
func (s *Spec) errorf(path, format string, args ...any) *FieldError {
	fe := &FieldError{File: s.File, Path: cutEcho(path), Msg: fmt.Sprintf(format, clipArgs(args)...)}
	for p := path; ; {
		if at, ok := s.pos[p]; ok {
			fe.Line, fe.Col = at.line, at.col
			break
		}
		if p == "" {
			break
		}
		p = parentPath(p)
	}
	return fe
}

// parentPath strips the last element: a.b[2] -> a.b -> a -> "".
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// MaxEcho bounds how much of a string from the input an error message
// (or a field path made of the input's keys) repeats: a 10 MB name must
// not make a 10 MB error.
const MaxEcho = 128

// cutEcho cuts s to MaxEcho bytes (on a rune boundary) and marks the cut.
func cutEcho(s string) string {
	if len(s) <= MaxEcho {
		return s
	}
	cut := MaxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("...(%d bytes)", len(s))
}

// clipArgs clips the string arguments of an error message.
func clipArgs(args []any) []any {
	out := args
	for i, a := range args {
		if str, ok := a.(string); ok && len(str) > MaxEcho {
			if &out[0] == &args[0] {
				out = append([]any(nil), args...)
			}
			out[i] = cutEcho(str)
		}
	}
	return out
}
