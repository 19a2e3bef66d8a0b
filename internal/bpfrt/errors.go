package bpfrt

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// LoadError is a failed program load. Its message carries the whole
// verifier log when the verifier refused the program (the only way to
// see why), and it unwraps to the underlying error, so callers can still
// errors.As it to *ebpf.VerifierError.
type LoadError struct {
	What string // e.g. "load end program"
	Err  error
}

func (e *LoadError) Error() string {
	var ve *ebpf.VerifierError
	if errors.As(e.Err, &ve) {
		return fmt.Sprintf("%s: %+v", e.What, ve)
	}
	return fmt.Sprintf("%s: %v", e.What, e.Err)
}

func (e *LoadError) Unwrap() error { return e.Err }

// WrapLoad wraps a load error as a *LoadError (nil stays nil).
func WrapLoad(what string, err error) error {
	if err == nil {
		return nil
	}
	return &LoadError{What: what, Err: err}
}

// ErrNoInode is returned when a file system reports no inode.
var ErrNoInode = errors.New("no inode")
