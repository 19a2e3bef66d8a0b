// Package flock takes exclusive advisory locks (flock(2)) on existing
// files or directories, so that several srchain processes serialize their
// read-modify-write of shared state (lab records, pinned BPF maps).
package flock

import (
	"errors"
	"os"
	"syscall"
)

// Exclusive blocks until it holds an exclusive lock on path (a directory
// works, which matters on bpffs where plain files cannot be created) and
// returns the function that releases it. The lock is also released if the
// process dies.
func Exclusive(path string) (release func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil // closing the last fd releases the lock
}
