package kind

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DaemonRoot holds one directory per namespace for the daemons drivers
// start there (FRR for `routing: bgp`): configuration, sockets, logs and
// pid files. Daemons run detached and survive the srchain process that
// started them (an agent restart adopts them); StopDaemons ends them.
const DaemonRoot = "/run/srchain/daemons"

// DaemonDir is the daemon directory of the namespace called ns.
func DaemonDir(ns string) string { return filepath.Join(DaemonRoot, ns) }

// DaemonPID returns the PID in pidfile if it names a live process whose
// command line mentions dir (every daemon srchain starts gets paths inside
// its namespace's directory on its command line, so a PID reused by an
// unrelated process is never taken for the daemon); 0 otherwise.
func DaemonPID(pidfile, dir string) int {
	b, err := os.ReadFile(pidfile)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0
	}
	cmd, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !strings.Contains(string(cmd), dir+"/") {
		return 0
	}
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// A zombie has exited: field 3 (after the command in parentheses) is Z.
	if i := strings.LastIndexByte(string(st), ')'); i >= 0 && strings.HasPrefix(string(st[i:]), ") Z") {
		return 0
	}
	return pid
}

// StopDaemon ends the daemon of pidfile (SIGTERM, SIGKILL after two
// seconds) if DaemonPID names one, through a pidfd so that the signal
// reaches that process or none.
func StopDaemon(pidfile, dir string) error {
	pid := DaemonPID(pidfile, dir)
	if pid == 0 {
		return nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stop daemon %d: %w", pid, err)
	}
	defer unix.Close(fd)
	if DaemonPID(pidfile, dir) != pid { // checked again now that fd pins it
		return nil
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return fmt.Errorf("stop daemon %d: %w", pid, err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(fds, 50); err == nil && n > 0 {
			return nil
		}
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill daemon %d: %w", pid, err)
	}
	return nil
}

// StopDaemons ends every daemon with a pid file in the directory of
// namespace ns and removes the directory (lab down, before the namespace
// goes: a daemon would otherwise keep a deleted namespace alive).
func StopDaemons(ns string) error {
	dir := DaemonDir(ns)
	pids, err := filepath.Glob(filepath.Join(dir, "*.pid"))
	if err != nil {
		return fmt.Errorf("stop daemons of %s: %w", ns, err)
	}
	var errs []error
	for _, p := range pids {
		errs = append(errs, StopDaemon(p, dir))
	}
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove daemon directory of %s: %w", ns, err))
	}
	return errors.Join(errs...)
}
