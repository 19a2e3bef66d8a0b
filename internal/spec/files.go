package spec

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// MaxFileSize bounds a file a spec names (a firewall's rules_file): the
// file is read into memory and inlined into the desired state.
const MaxFileSize = 1 << 20

// MaxSpecSize bounds a spec file and a spec sent to the controller's
// API (internal/controller maxBody): 20,000 chains fit several times
// over (the YAML node bound, nodeLimit, grows with the size); past it a file is a
// mistake (a log, a device, a generator gone wrong), refused before it is
// read into memory and decoded.
const MaxSpecSize = 32 << 20

// Errors of ReadFile callers may branch on.
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("file too large")
)

type readResult struct {
	data []byte
	err  error
}

// ReadFile reads a file the spec names: name is relative to the spec
// file's directory (or absolute). Only regular files of at most
// MaxFileSize bytes are read (a device such as /dev/zero, a FIFO or a
// directory is an error, not a hang or an out-of-memory). Each name is
// read once per Spec, so validate and compile see the same bytes. Errors
// name the file but never echo its content.
func (s *Spec) ReadFile(name string) ([]byte, error) {
	if r, ok := s.files[name]; ok {
		return r.data, r.err
	}
	data, err := readBounded(s.RefPath(name))
	if s.files == nil {
		s.files = map[string]readResult{}
	}
	s.files[name] = readResult{data, err}
	return data, err
}

// RefPath resolves a file name from the spec against the spec file's
// directory.
func (s *Spec) RefPath(name string) string {
	if name == "" || filepath.IsAbs(name) || s.File == "" {
		return name
	}
	return filepath.Join(filepath.Dir(s.File), name)
}

func readBounded(path string) ([]byte, error) {
	data, err := readLimited(path, MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", Clip(path), err)
	}
	return data, nil
}

// readLimited reads path if it is a regular file of at most max bytes.
// Its errors do not name the file; the caller does.
func readLimited(path string, max int64) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer; it is
	// refused below like any other non-regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, unwrapPath(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, unwrapPath(err)
	}
	if !st.Mode().IsRegular() {
		return nil, ErrNotRegular
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%w (%d bytes, at most %d)", ErrTooLarge, st.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, unwrapPath(err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w (more than %d bytes)", ErrTooLarge, max)
	}
	return data, nil
}

// unwrapPath drops the *PathError's own copy of the path (already named).
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
