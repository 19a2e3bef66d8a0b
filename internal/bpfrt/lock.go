package bpfrt

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Lock modes of LockDir.
const (
	Shared    = syscall.LOCK_SH // readers: counters, lookups
	Exclusive = syscall.LOCK_EX // writers: read-modify-write of pinned maps
)

// LockDir takes an advisory flock(2) on the directory dir (bpffs
// directories can be flocked; plain files cannot be created there) and
// returns its release. Every process that changes pinned objects under
// dir takes it Exclusive around its read-modify-write (e.g. handing out
// a counter slot), readers may take it Shared. The kernel drops the lock
// when the process dies, so a crash never leaves it held. dir "" (nothing
// pinned: the objects are private to this process) takes no lock.
func LockDir(dir string, mode int) (release func(), err error) {
	if dir == "" {
		return func() {}, nil
	}
	if mode != Shared && mode != Exclusive {
		return nil, fmt.Errorf("lock %s: %w: mode %d", dir, ErrBadMode, mode)
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), mode)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { f.Close() }, nil // closing the last fd releases the lock
}

// ErrBadMode is returned for a lock mode other than Shared or Exclusive.
var ErrBadMode = errors.New("bad lock mode")
