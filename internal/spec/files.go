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
	// O_NONBLOCK: opening a FIFO must not wait for a writer; it is
	// refused below like any other non-regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", Clip(path), unwrapPath(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", Clip(path), unwrapPath(err))
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: %w", Clip(path), ErrNotRegular)
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("read %s: %w (%d bytes, at most %d)", Clip(path), ErrTooLarge, st.Size(), MaxFileSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", Clip(path), unwrapPath(err))
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("read %s: %w (more than %d bytes)", Clip(path), ErrTooLarge, MaxFileSize)
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
