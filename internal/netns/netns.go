// Package netns manages named network namespaces (the ones `ip netns`
// lists) for the lab, the benchmarks and the tests: create, enter, run
// commands inside, delete. Every namespace srchain makes carries a prefix so
// that cleanup can find exactly what srchain made and nothing else.
package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/vishvananda/netlink"
	vns "github.com/vishvananda/netns"
)

// ErrExists is returned by Create when the namespace is already there.
var ErrExists = errors.New("namespace exists")

// NS is a named network namespace.
type NS struct {
	Name   string
	handle vns.NsHandle
	nl     *netlink.Handle
	// current: the process's own namespace (Current), which may have no
	// name under /run/netns; commands then run directly in it.
	current bool
}

// Create makes a new named namespace, brings its loopback up and opens it.
func Create(name string) (*NS, error) {
	if _, err := os.Stat("/run/netns/" + name); err == nil {
		return nil, fmt.Errorf("create namespace %s: %w", name, ErrExists)
	}
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("create namespace %s: %s: %w", name, strings.TrimSpace(string(out)), err)
	}
	ns, err := Open(name)
	if err != nil {
		_ = deleteNamed(name)
		return nil, err
	}
	lo, err := ns.nl.LinkByName("lo")
	if err == nil {
		err = ns.nl.LinkSetUp(lo)
	}
	if err != nil {
		ns.Close()
		_ = deleteNamed(name)
		return nil, fmt.Errorf("bring up lo in %s: %w", name, err)
	}
	return ns, nil
}

// Open opens an existing named namespace.
func Open(name string) (*NS, error) {
	h, err := vns.GetFromName(name)
	if err != nil {
		return nil, fmt.Errorf("open namespace %s: %w", name, err)
	}
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("open netlink in %s: %w", name, err)
	}
	return &NS{Name: name, handle: h, nl: nl}, nil
}

// Netlink returns the netlink handle bound to the namespace.
func (n *NS) Netlink() *netlink.Handle { return n.nl }

// Handle returns the namespace file handle (e.g. for netlink.LinkSetNsFd).
func (n *NS) Handle() vns.NsHandle { return n.handle }

// Close releases the handles; the namespace stays.
func (n *NS) Close() {
	if n.nl != nil {
		n.nl.Close()
		n.nl = nil
	}
	if n.handle.IsOpen() {
		n.handle.Close()
	}
}

// Delete closes the handles and removes the namespace.
func (n *NS) Delete() error {
	n.Close()
	return deleteNamed(n.Name)
}

// Delete removes a named namespace; a missing one is not an error.
func Delete(name string) error { return deleteNamed(name) }

func deleteNamed(name string) error {
	if _, err := os.Stat("/run/netns/" + name); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
		return fmt.Errorf("delete namespace %s: %s: %w", name, strings.TrimSpace(string(out)), err)
	}
	return nil
}

// Do runs fn on an OS thread that has entered the namespace. Sockets and
// BPF links created inside fn belong to the namespace and stay usable from
// any goroutine afterwards.
func (n *NS) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// The thread is never unlocked: if restoring the original
		// namespace failed it must die with its goroutine, not be reused.
		runtime.LockOSThread()
		orig, err := vns.Get()
		if err != nil {
			errc <- fmt.Errorf("get current namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := vns.Set(n.handle); err != nil {
			errc <- fmt.Errorf("enter namespace %s: %w", n.Name, err)
			return
		}
		ferr := fn()
		if err := vns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("leave namespace %s: %w", n.Name, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Command returns a command that runs inside the namespace (ip netns exec).
func (n *NS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if n.current {
		// The host's namespace (or the one `ip netns exec` put this
		// process in): "ip netns exec host" would name nothing.
		return exec.CommandContext(ctx, name, args...)
	}
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Run runs a command inside the namespace and returns its standard output;
// on failure the error carries standard error.
func (n *NS) Run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := n.Command(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("run %s %s in %s: %s: %w", name, strings.Join(args, " "), n.Name, strings.TrimSpace(stderr.String()), err)
	}
	return stdout.String(), nil
}

// Sysctl writes a sysctl inside the namespace (key in dotted form).
func (n *NS) Sysctl(key, value string) error {
	path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	return n.Do(func() error {
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
			return fmt.Errorf("set sysctl %s=%s in %s: %w", key, value, n.Name, err)
		}
		return nil
	})
}

// List returns the names of existing namespaces that start with prefix.
func List(prefix string) ([]string, error) {
	ents, err := os.ReadDir("/run/netns")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Current opens the namespace this process runs in (the host's, for an
// agent on a host) under the given name; the name only labels it (logs,
// the BPF pin directory). Close releases it; never Delete it.
func Current(name string) (*NS, error) {
	h, err := vns.GetFromPath("/proc/self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("open current namespace: %w", err)
	}
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("open netlink in current namespace: %w", err)
	}
	return &NS{Name: name, handle: h, nl: nl, current: true}, nil
}
