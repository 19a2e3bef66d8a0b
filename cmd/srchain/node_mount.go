package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// nodeReexecEnv marks the process that hostMounts re-executed, so it
// never re-executes again.
const nodeReexecEnv = "SRCHAIN_NODE_HOST_MOUNTS"

// hostMounts makes `ip netns exec NS srchain node ...` see the host's
// BPF pins. `ip netns exec` runs its command in a private mount
// namespace with a fresh /sys (MACHINE-NOTES), where /sys/fs/bpf is not
// bpffs: programs could not be pinned, and pins made there would vanish
// with the process. When that is the case, the command is executed again
// by nsenter in the mount namespace of the nearest ancestor process that
// has another one (the shell that ran `ip netns exec`), or PID 1's: only
// the mount namespace changes, the network namespace stays the one the
// operator chose. It returns only when nothing needs
// doing (or cannot be done: then the drivers report the missing pins).
func hostMounts(sub string) error {
	if !slices.Contains(os.Args, "node") || !slices.Contains(os.Args, sub) {
		// Not this process's own command line (a test running the
		// command in-process): re-executing os.Args would run another.
		return nil
	}
	var fs unix.Statfs_t
	if err := unix.Statfs("/sys/fs/bpf", &fs); err == nil && fs.Type == unix.BPF_FS_MAGIC {
		return nil
	}
	if os.Getenv(nodeReexecEnv) != "" {
		return nil
	}
	target := hostMountNS()
	if target == "" {
		return nil // no other mount namespace to use: the drivers report missing pins
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	args := append([]string{nsenter, "--mount=" + target, "--", exe}, os.Args[1:]...)
	env := append(os.Environ(), nodeReexecEnv+"=1")
	if err := syscall.Exec(nsenter, args, env); err != nil {
		return fmt.Errorf("enter the host's mount namespace: %w", err)
	}
	return nil
}

// hostMountNS returns the /proc path of a mount namespace other than
// this process's: its nearest ancestor's that differs (a few levels up),
// else PID 1's; "" when none can be opened.
func hostMountNS() string {
	var self unix.Stat_t
	if unix.Stat("/proc/self/ns/mnt", &self) != nil {
		return ""
	}
	other := func(pid int) string {
		p := fmt.Sprintf("/proc/%d/ns/mnt", pid)
		var st unix.Stat_t
		if unix.Stat(p, &st) != nil || (st.Ino == self.Ino && st.Dev == self.Dev) {
			return ""
		}
		if f, err := os.Open(p); err == nil {
			f.Close()
			return p
		}
		return ""
	}
	pid := os.Getppid()
	for range 4 {
		if pid <= 1 {
			break
		}
		if p := other(pid); p != "" {
			return p
		}
		pid = parentOf(pid)
	}
	return other(1)
}

// parentOf reads a process's parent from /proc (0 when unknown).
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}
