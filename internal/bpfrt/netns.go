package bpfrt

import (
	"fmt"
	"os"
	"syscall"
)

// NetnsID identifies a network namespace for as long as it exists: the
// device and inode of its nsfs file (what `ip netns identify` and
// `stat -L /proc/self/ns/net` compare). A namespace deleted and created
// again under the same name gets a new inode, so state recorded with the
// old ID (pins of links on its interfaces) is recognised as stale without
// guessing from ifindexes or program tags.
type NetnsID struct {
	Dev, Ino uint64
}

func (id NetnsID) String() string { return fmt.Sprintf("netns-%d-%d", id.Dev, id.Ino) }

// CurrentNetns returns the ID of the calling thread's network namespace
// (call it inside netns.NS.Do for a lab node; the goroutine must stay on
// its locked OS thread).
func CurrentNetns() (NetnsID, error) {
	return NetnsOf("/proc/thread-self/ns/net")
}

// NetnsOf returns the ID of the namespace file at path (a /proc/<pid>/ns/net
// or a bind mount such as /run/netns/<name>).
func NetnsOf(path string) (NetnsID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return NetnsID{}, fmt.Errorf("identify netns %s: %w", path, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return NetnsID{}, fmt.Errorf("identify netns %s: %w", path, ErrNoInode)
	}
	return NetnsID{Dev: uint64(st.Dev), Ino: st.Ino}, nil
}
