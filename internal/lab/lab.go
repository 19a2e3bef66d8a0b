// Package lab deploys a whole desired state (internal/state) on one machine:
// one network namespace per node, one veth pair per link, then the applier
// per node. It is srchain's embedded default, the analogue of the seeds'
// testbeds, used by `srchain lab`, the demo and the end-to-end tests.
//
// Before it creates anything, Up records what it is about to create in
// StateDir/<lab>.json (the desired state goes next to it, in
// StateDir/<lab>.state); Down works from that record alone, so it removes
// everything even after Up (or the machine's srchain process) crashed
// half-way. Update (`lab apply FILE`) changes a running lab to a new
// desired state by applying only the difference.
package lab

import (
	"bytes"
	"context"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/srchain/srchain/internal/spec"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/bgp"
	"github.com/srchain/srchain/internal/flock"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// Errors callers branch on.
var (
	ErrExists   = errors.New("lab already exists")
	ErrNotFound = errors.New("no such lab")
	ErrNoNode   = errors.New("no such node in lab")
	ErrBadName  = errors.New("bad lab or node name")
)

// DefaultStateDir holds one record per lab.
const DefaultStateDir = "/run/srchain/labs"

// Options tune the lab functions; the zero value is fine.
type Options struct {
	// StateDir overrides DefaultStateDir (tests).
	StateDir string
	Logger   *slog.Logger
	// Drivers overrides the registered program drivers (tests).
	Drivers map[string]apply.ProgramDriver
}

func (o Options) dir() string {
	if o.StateDir != "" {
		return o.StateDir
	}
	return DefaultStateDir
}

func (o Options) log() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}

// Record is what a lab is made of, written before it is made.
type Record struct {
	Name string `json:"name"`
	// Source is the spec file the lab was built from, if any.
	Source     string            `json:"source,omitempty"`
	Created    time.Time         `json:"created"`
	Namespaces map[string]string `json:"namespaces"` // node -> namespace
	Links      []state.Link      `json:"links"`
	// Procs are processes started inside the lab (traffic sinks, NFs);
	// Down stops exactly these, each only while its PID still names the
	// process that was recorded.
	Procs []Proc `json:"procs,omitempty"`
	// LegacyPIDs are PIDs recorded without a start time by older
	// versions; Down cannot tell them from a reused PID: it never signals
	// them and warns which are still running (PID and command line).
	LegacyPIDs []int `json:"pids,omitempty"`
	// Network is the desired state, for Status and Update. It is kept in
	// <lab>.state next to the record, in gob (a 10,000-chain state is
	// megabytes, and gob reads it about 5 times faster than JSON, which
	// `lab apply FILE` pays on every change); records written by older
	// versions hold it here, in JSON.
	Network *state.Network `json:"network,omitempty"`
}

// Proc is a process the lab started: its PID and its start time (field 22
// of /proc/<pid>/stat, clock ticks since boot), which tells it from a later
// process that got the same PID.
type Proc struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// Names must be usable in namespace names, bpffs pin directories (which
// refuse '.') and file names. A lab name has no '_', which separates it
// from the node in namespace names (NSName).
var (
	nameRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$`)
	labNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,31}$`)
)

// NSName is the namespace of node in lab: src-<lab>_<node>. Lab names hold
// no '_', so the first '_' ends the lab name and no two (lab, node) pairs
// share a namespace (with '-' as separator, lab "rela" node "z-x" and lab
// "rela-z" node "x" both gave src-rela-z-x). Not '.': the namespace name
// is also the BPF pin directory, and bpffs refuses names with a dot.
func NSName(lab, node string) string { return "src-" + lab + "_" + node }

// clip bounds a name echoed in an error (spec.Clip).
var clip = spec.Clip

// checkLabName returns ErrBadName, naming what was refused in bounded form.
func checkLabName(verb, lab string) error {
	if !labNameRE.MatchString(lab) {
		return fmt.Errorf("%s %s: %w (want 1-32 letters, digits or '-')", verb, clip(lab), ErrBadName)
	}
	return nil
}

func recordPath(o Options, lab string) string { return filepath.Join(o.dir(), lab+".json") }

func statePath(o Options, lab string) string { return filepath.Join(o.dir(), lab+".state") }

// writeState replaces the desired state file of a lab (write, then
// rename, so a crash never leaves half of it).
func writeState(o Options, lab string, net *state.Network) error {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(net); err != nil {
		return fmt.Errorf("encode lab state: %w", err)
	}
	f, err := os.CreateTemp(o.dir(), lab+".state.tmp*")
	if err != nil {
		return fmt.Errorf("write lab state: %w", err)
	}
	_, err = f.Write(b.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), statePath(o, lab))
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write lab state: %w", err)
	}
	return nil
}

// readState reads the desired state file of a lab; nil if there is none
// (yet: Up writes it right after claiming the record).
func readState(o Options, lab string) (*state.Network, error) {
	b, err := os.ReadFile(statePath(o, lab))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lab state %s: %w", lab, err)
	}
	var net state.Network
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&net); err != nil {
		return nil, fmt.Errorf("decode lab state %s: %w", lab, err)
	}
	return &net, nil
}

// desired returns the lab's recorded desired state, refusing one that is
// missing (Up writes it right after claiming the record) or written in
// another state format (state.CheckVersion: a lab made by an older
// srchain is recompiled with `lab apply FILE`, or rebuilt).
func (r *Record) desired() (*state.Network, error) {
	if r.Network == nil {
		return nil, fmt.Errorf("lab %s: the record has no desired state yet (lab being created?): %w", r.Name, ErrBusy)
	}
	if err := r.Network.CheckVersion(); err != nil {
		return nil, fmt.Errorf("lab %s: %w", r.Name, err)
	}
	return r.Network, nil
}

// withoutNetwork is r as the JSON record stores it.
func withoutNetwork(r *Record) *Record {
	c := *r
	c.Network = nil
	return &c
}

func encodeRecord(o Options, r *Record) ([]byte, error) {
	if err := os.MkdirAll(o.dir(), 0o755); err != nil {
		return nil, fmt.Errorf("create lab state dir: %w", err)
	}
	// Compact: a 10,000-chain record is megabytes, written on every
	// `lab apply FILE`.
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode lab record: %w", err)
	}
	return b, nil
}

// writeTemp writes b to a new temporary file next to the records (its
// name does not end in .json, so List ignores it).
func writeTemp(o Options, name string, b []byte) (string, error) {
	f, err := os.CreateTemp(o.dir(), name+".json.tmp*")
	if err != nil {
		return "", fmt.Errorf("write lab record: %w", err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write lab record: %w", err)
	}
	return f.Name(), nil
}

// writeRecord replaces the record of r.Name. Callers hold the state dir
// lock (lockDir).
func writeRecord(o Options, r *Record) error {
	if r.Network != nil {
		if err := writeState(o, r.Name, r.Network); err != nil {
			return err
		}
	}
	b, err := encodeRecord(o, withoutNetwork(r))
	if err != nil {
		return err
	}
	// Write then rename, so a crash never leaves half a record.
	tmp, err := writeTemp(o, r.Name, b)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, recordPath(o, r.Name)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write lab record: %w", err)
	}
	return nil
}

// claimRecord writes the record of a new lab and fails with ErrExists if
// the lab has a record already: the record is linked into place, which
// fails if the name exists, so of two concurrent `lab up` only one wins,
// even against a process that does not take the lock.
func claimRecord(o Options, r *Record) error {
	b, err := encodeRecord(o, withoutNetwork(r))
	if err != nil {
		return err
	}
	tmp, err := writeTemp(o, r.Name, b)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, recordPath(o, r.Name)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("lab up %s: %w (run `srchain lab down %s` first)", r.Name, ErrExists, r.Name)
		}
		return fmt.Errorf("write lab record: %w", err)
	}
	// The lab is ours now: its state goes next to the record (a failure
	// here is cleaned up by Up's Down like any other).
	if r.Network != nil {
		return writeState(o, r.Name, r.Network)
	}
	return nil
}

// lockDir takes an exclusive flock on the state directory: whoever changes
// records (Up's claim, AddPID, Down) holds it, so no read-modify-write of
// a record is lost and Down never races an update of the record it
// removes. The returned function releases it.
func lockDir(o Options) (func(), error) {
	if err := os.MkdirAll(o.dir(), 0o755); err != nil {
		return nil, fmt.Errorf("create lab state dir: %w", err)
	}
	release, err := flock.Exclusive(o.dir())
	if err != nil {
		return nil, fmt.Errorf("lock lab state dir: %w", err)
	}
	return release, nil
}

// Load reads the record of lab.
func Load(lab string, opts Options) (*Record, error) {
	if err := checkLabName("load lab", lab); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(recordPath(opts, lab))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("load lab %s: %w", lab, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load lab %s: %w", lab, err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode lab record %s: %w", lab, err)
	}
	// Down deletes the namespaces and pin directories a record names, as
	// root: a record planted in a writable state dir must not name
	// anything but this lab's own (e.g. "../../etc" as a namespace).
	if r.Name != lab {
		return nil, fmt.Errorf("load lab %s: the record names lab %s: %w", lab, clip(r.Name), ErrBadName)
	}
	for node, ns := range r.Namespaces {
		if !nameRE.MatchString(node) || ns != NSName(lab, node) {
			return nil, fmt.Errorf("load lab %s: node %s has namespace %s, not %s: %w", lab, clip(node), clip(ns), NSName(lab, clip(node)), ErrBadName)
		}
	}
	if r.Network == nil {
		if r.Network, err = readState(opts, lab); err != nil {
			return nil, err
		}
	}
	return &r, nil
}

// List returns the names of the recorded labs.
func List(opts Options) ([]string, error) {
	ents, err := os.ReadDir(opts.dir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list labs: %w", err)
	}
	var out []string
	for _, e := range ents {
		if n, ok := cutSuffix(e.Name(), ".json"); ok {
			out = append(out, n)
		}
	}
	return out, nil
}

func cutSuffix(s, suf string) (string, bool) {
	if len(s) > len(suf) && s[len(s)-len(suf):] == suf {
		return s[:len(s)-len(suf)], true
	}
	return s, false
}

// UpOptions are the options of Up.
type UpOptions struct {
	Options
	// Source is recorded for `lab status` (the spec file).
	Source string
	// SkipApply makes the namespaces and links only: agents apply the
	// nodes (`lab up --agents`).
	SkipApply bool
}

// AgentsDir is where `lab up --agents` keeps the lab's controller data
// (embedded etcd, token), the agents' state files and the logs; Down
// removes it.
func AgentsDir(o Options, lab string) string { return filepath.Join(o.dir(), lab+".agents") }

// Up builds the lab for net: namespaces, links, then every node's state.
// On failure it removes what it made. A lab of the same name must not exist.
func Up(ctx context.Context, net *state.Network, opts UpOptions) (*Record, error) {
	log := opts.log().With("lab", net.Name)
	if err := checkLabName("lab up", net.Name); err != nil {
		return nil, err
	}
	rec := &Record{Name: net.Name, Source: opts.Source, Created: time.Now().UTC(),
		Namespaces: map[string]string{}, Links: net.Links, Network: net}
	for _, n := range net.Nodes {
		if !nameRE.MatchString(n.Name) {
			return nil, fmt.Errorf("lab up %s: node %s: %w", net.Name, clip(n.Name), ErrBadName)
		}
		rec.Namespaces[n.Name] = NSName(net.Name, n.Name)
	}
	release, err := lockUp(opts.Options, net.Name)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := claim(opts.Options, rec); err != nil {
		return nil, err
	}
	// From here on the lab is ours: a failure removes what we made.
	fail := func(err error) (*Record, error) {
		if derr := down(context.WithoutCancel(ctx), net.Name, opts.Options); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, err
	}
	nss := map[string]*netns.NS{}
	defer func() {
		for _, ns := range nss {
			ns.Close()
		}
	}()
	for _, n := range net.Nodes {
		ns, err := netns.Create(rec.Namespaces[n.Name])
		if err != nil {
			return fail(fmt.Errorf("lab up %s: %w", net.Name, err))
		}
		nss[n.Name] = ns
	}
	for _, l := range net.Links {
		if err := addLink(nss, l); err != nil {
			return fail(fmt.Errorf("lab up %s: %w", net.Name, err))
		}
	}
	for _, n := range net.Nodes {
		if opts.SkipApply {
			break
		}
		if err := ctx.Err(); err != nil {
			return fail(fmt.Errorf("lab up %s: %w", net.Name, err))
		}
		if _, err := apply.ApplyWith(ctx, nss[n.Name], n, apply.Options{Drivers: opts.Drivers, Logger: log}); err != nil {
			return fail(fmt.Errorf("lab up %s: %w", net.Name, err))
		}
	}
	// routing: bgp: the lab is up when every router has learned the
	// locators (the probes would fail before).
	if !opts.SkipApply {
		wctx, cancel := context.WithTimeout(ctx, BGPConvergence)
		defer cancel()
		if err := bgp.Converged(wctx, nss, net.Nodes); err != nil {
			return fail(fmt.Errorf("lab up %s: %w", net.Name, err))
		}
	}
	log.Debug("lab up", "nodes", len(net.Nodes), "links", len(net.Links))
	return rec, nil
}

// BGPConvergence bounds how long Up waits for `routing: bgp` routers to
// learn each other's locators.
const BGPConvergence = 30 * time.Second

// ErrBusy: the lab is being created by a running Up.
var ErrBusy = errors.New("lab is being created")

func upLockPath(o Options, lab string) string { return filepath.Join(o.dir(), lab+".up.lock") }

// lockUp takes the lab's Up lock (a flock on <dir>/<lab>.up.lock holding
// the PID of the creator) for the whole of Up, so that Down refuses to
// remove a lab while it is being made. The returned function removes the
// file and releases the lock.
//
// The state directory may be writable by others (--state-dir), so the
// file is opened with O_NOFOLLOW and must be a regular file: a planted
// symlink or FIFO is refused, never followed or truncated. A lock left by
// an Up that was killed holds no flock: the next Up takes it over and the
// next Down removes it (checkNotUp). Whoever removes the file holds its
// flock, and whoever locks it checks afterwards that the path still names
// the file it locked, so a lock is never taken on an unlinked file.
func lockUp(o Options, lab string) (func(), error) {
	if err := os.MkdirAll(o.dir(), 0o755); err != nil {
		return nil, fmt.Errorf("create lab state dir: %w", err)
	}
	path := upLockPath(o, lab)
	for range 10 {
		f, err := openLock(path, os.O_RDWR|os.O_CREATE)
		if err != nil {
			return nil, fmt.Errorf("lab up %s: lock: %w", lab, err)
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != nil && !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lab up %s: lock: %w", lab, err)
		}
		if !samePath(f, path) {
			// Removed or replaced since we opened it: a Down cleaned a
			// stale lock, or an Up finished. Try the new file.
			f.Close()
			continue
		}
		if err != nil {
			f.Close()
			// Another Up of this lab is running: it exists (being made).
			return nil, fmt.Errorf("lab up %s: %w (%w)", lab, ErrExists, busy(path, lab))
		}
		if err := f.Truncate(0); err == nil {
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		}
		return func() {
			os.Remove(path)
			f.Close()
		}, nil
	}
	return nil, fmt.Errorf("lab up %s: lock %s keeps changing: %w", lab, path, ErrBusy)
}

// errNotRegular: a lock path names something else than a regular file.
var errNotRegular = errors.New("not a regular file")

// openLock opens a lock file without following a symlink and without
// blocking on a FIFO, and refuses anything but a regular file.
func openLock(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o644)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("open %s: is a symlink, refusing to follow it: %w", path, errNotRegular)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("open %s: %s: %w", path, fi.Mode().Type(), errNotRegular)
	}
	// A hard link to another file would have that file truncated (the
	// lock records its holder in it), where fs.protected_hardlinks is off.
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink != 1 {
		f.Close()
		return nil, fmt.Errorf("open %s: %d hard links: %w", path, st.Nlink, errNotRegular)
	}
	return f, nil
}

// samePath reports whether path still names the file open as f.
func samePath(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(path)
	return err == nil && os.SameFile(a, b)
}

// busy names the PID recorded in a held Up lock.
func busy(path, lab string) error {
	pid := "?"
	if f, err := openLock(path, os.O_RDONLY); err == nil {
		b := make([]byte, 32)
		n, _ := f.Read(b)
		f.Close()
		if p, err := strconv.Atoi(strings.TrimSpace(string(b[:n]))); err == nil {
			pid = strconv.Itoa(p)
		}
	}
	return fmt.Errorf("lab %s is being created by pid %s: %w", lab, pid, ErrBusy)
}

// checkNotUp fails with ErrBusy while an Up of lab holds its Up lock, and
// removes a stale lock (one nobody holds: its Up was killed).
func checkNotUp(o Options, verb, lab string) error {
	path := upLockPath(o, lab)
	f, err := openLock(path, os.O_RDONLY)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if errors.Is(err, errNotRegular) {
		// Not ours (an Up refuses it too): leave it, it blocks nothing.
		o.log().Warn("ignoring a lab up lock that is not a regular file", "path", path, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s %s: check up lock: %w", verb, lab, err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("%s %s: %w", verb, lab, busy(path, lab))
		}
		return fmt.Errorf("%s %s: check up lock: %w", verb, lab, err)
	}
	if samePath(f, path) {
		// Stale: remove it while holding its lock (see lockUp).
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s %s: remove stale up lock: %w", verb, lab, err)
		}
		o.log().Debug("removed a stale lab up lock", "path", path)
	}
	return nil
}

// claim checks that nothing of the lab exists yet and records it, under
// the state dir lock.
func claim(o Options, rec *Record) error {
	unlock, err := lockDir(o)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := Load(rec.Name, o); err == nil {
		return fmt.Errorf("lab up %s: %w (run `srchain lab down %s` first)", rec.Name, ErrExists, rec.Name)
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	names := slices.Sorted(maps.Values(rec.Namespaces))
	for _, name := range names {
		if _, err := os.Stat("/run/netns/" + name); err == nil {
			return fmt.Errorf("lab up %s: namespace %s is left from an unrecorded lab (`srchain lab down %s` removes it): %w",
				rec.Name, name, rec.Name, ErrExists)
		}
	}
	return claimRecord(o, rec)
}

// addLink creates the veth pair of l directly inside both namespaces under
// their final names, so nothing ever appears in the host namespace and
// names like eth0 cannot clash with the host's.
func addLink(nss map[string]*netns.NS, l state.Link) error {
	a, ok := nss[l.A.Node]
	if !ok {
		return fmt.Errorf("add link %s-%s: %q: %w", l.A.Node, l.B.Node, l.A.Node, ErrNoNode)
	}
	b, ok := nss[l.B.Node]
	if !ok {
		return fmt.Errorf("add link %s-%s: %q: %w", l.A.Node, l.B.Node, l.B.Node, ErrNoNode)
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: l.A.Interface, MTU: l.MTU, Namespace: netlink.NsFd(a.Handle())},
		PeerName:      l.B.Interface,
		PeerMTU:       uint32(max(l.MTU, 0)),
		PeerNamespace: netlink.NsFd(b.Handle()),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("add link %s:%s-%s:%s: %w", l.A.Node, l.A.Interface, l.B.Node, l.B.Interface, err)
	}
	return nil
}

// Down removes everything the lab's record names: processes it started,
// BPF pins, namespaces (and with them the veths), then the record.
// Missing pieces are not errors, so Down also finishes a crashed Up or Down.
// While an Up of the lab is still running it refuses with ErrBusy.
func Down(ctx context.Context, lab string, opts Options) error {
	if err := checkLabName("lab down", lab); err != nil {
		return err
	}
	if err := checkNotUp(opts, "lab down", lab); err != nil {
		return err
	}
	return down(ctx, lab, opts)
}

// down is Down without the Up check, for Up's own cleanup.
func down(ctx context.Context, lab string, opts Options) error {
	unlock, err := lockDir(opts)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := Load(lab, opts)
	if errors.Is(err, ErrNotFound) {
		return downOrphans(lab, opts, err)
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range rec.Procs {
		errs = append(errs, stopProc(p, opts.log()))
	}
	// PIDs recorded without a start time (older records) may name another
	// process by now, so Down never signals them: it lists those still
	// running, with their command line, for the operator to check and
	// stop by hand, before the record that names them goes away.
	if left := legacyRunning(rec.LegacyPIDs); len(left) > 0 {
		opts.log().Warn("left running: processes recorded by an older srchain without a start time "+
			"(their PIDs may name other processes now); check and stop them by hand",
			"lab", lab, "processes", strings.Join(left, "; "))
	}
	names := make([]string, 0, len(rec.Namespaces))
	for _, ns := range rec.Namespaces {
		names = append(names, ns)
	}
	slices.Sort(names)
	for _, ns := range names {
		// Daemons first (FRR): they would keep the namespace alive.
		errs = append(errs, kind.StopDaemons(ns))
		if err := os.RemoveAll(apply.PinRoot + "/" + ns); err != nil {
			errs = append(errs, fmt.Errorf("remove pins of %s: %w", ns, err))
		}
		errs = append(errs, netns.Delete(ns))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lab down %s: %w", lab, err)
	}
	if err := os.Remove(statePath(opts, lab)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("lab down %s: %w", lab, err)
	}
	if err := os.RemoveAll(AgentsDir(opts, lab)); err != nil {
		return fmt.Errorf("lab down %s: %w", lab, err)
	}
	if err := os.Remove(recordPath(opts, lab)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("lab down %s: %w", lab, err)
	}
	opts.log().Debug("lab down", "lab", lab)
	return nil
}

// legacyRunning returns "PID (command line)" for each of pids that still
// exists.
func legacyRunning(pids []int) []string {
	var out []string
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil {
			continue // gone
		}
		cmd := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
		out = append(out, fmt.Sprintf("%d (%s)", pid, cmd))
	}
	return out
}

// downOrphans removes namespaces named like lab's when its record is gone
// (deleted by hand), except those another lab's record claims (the prefix
// src-<lab>_ is the lab's alone, but a record may name any namespace).
// With nothing to remove it returns notFound.
func downOrphans(lab string, opts Options, notFound error) error {
	_ = os.Remove(statePath(opts, lab)) // a state without its record means nothing
	names, err := netns.List(NSName(lab, ""))
	if err != nil || len(names) == 0 {
		return notFound
	}
	claimed := map[string]bool{}
	others, _ := List(opts)
	for _, o := range others {
		if r, err := Load(o, opts); err == nil {
			for _, ns := range r.Namespaces {
				claimed[ns] = true
			}
		}
	}
	var errs []error
	removed := 0
	for _, ns := range names {
		if claimed[ns] {
			continue
		}
		if err := os.RemoveAll(apply.PinRoot + "/" + ns); err != nil {
			errs = append(errs, fmt.Errorf("remove pins of %s: %w", ns, err))
		}
		errs = append(errs, netns.Delete(ns))
		removed++
	}
	if removed == 0 {
		return notFound
	}
	opts.log().Warn("lab had no record; removed its namespaces", "lab", lab, "namespaces", removed)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lab down %s: %w", lab, err)
	}
	return nil
}

// procStart returns the start time of process pid (field 22 of
// /proc/<pid>/stat, clock ticks after boot).
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("process %d: %w", pid, syscall.ESRCH)
		}
		return 0, fmt.Errorf("read start time of process %d: %w", pid, err)
	}
	return parseStart(string(b))
}

// parseStart extracts field 22 (starttime) of a /proc/<pid>/stat line.
// Field 2, the command, is in parentheses and may itself hold spaces and
// parentheses, so fields are counted after the last ')'.
func parseStart(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse process stat %q: no command field", stat)
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return 0, fmt.Errorf("parse process stat: %d fields after the command, want at least 20", len(f))
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse process start time: %w", err)
	}
	return v, nil
}

// stopProc terminates a process the lab started: SIGTERM, then SIGKILL
// after a grace period. It works through a pidfd opened before the start
// time is checked, so the signals reach the recorded process or nothing:
// a process that is gone is fine, and a PID that now names another
// process (same PID, other start time) is left alone.
func stopProc(p Proc, log *slog.Logger) error {
	if p.PID <= 1 {
		return nil
	}
	fd, err := unix.PidfdOpen(p.PID, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return fmt.Errorf("stop pid %d: open pidfd: %w", p.PID, err)
	}
	defer unix.Close(fd)
	// The pidfd names the process that had the PID when it was opened; if
	// that process is still the one recorded now, it was then too.
	start, err := procStart(p.PID)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stop pid %d: %w", p.PID, err)
	}
	if start != p.Start {
		log.Warn("not stopping a process: its PID was reused", "pid", p.PID, "recorded_start", p.Start, "start", start)
		return nil
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return fmt.Errorf("stop pid %d: %w", p.PID, err)
	}
	if exited(fd, time.Second) {
		return nil
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill pid %d: %w", p.PID, err)
	}
	return nil
}

// exited waits up to d for the process of pidfd fd to exit (the pidfd
// becomes readable).
func exited(fd int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0
	}
}

// AddPID records a process started inside lab so that Down stops it. It
// records the process's start time with it, so Down never signals another
// process that got the same PID later.
func AddPID(lab string, pid int, opts Options) error {
	start, err := procStart(pid)
	if err != nil {
		return fmt.Errorf("record pid %d in lab %s: %w", pid, lab, err)
	}
	unlock, err := lockDir(opts)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := Load(lab, opts)
	if err != nil {
		return err
	}
	p := Proc{PID: pid, Start: start}
	if slices.Contains(rec.Procs, p) {
		return nil
	}
	rec.Procs = append(rec.Procs, p)
	return writeRecord(opts, rec)
}

// Open opens the namespace of node in lab; the caller closes it.
func Open(lab, node string, opts Options) (*netns.NS, error) {
	rec, err := Load(lab, opts)
	if err != nil {
		return nil, err
	}
	return openNode(rec, node)
}

// Stdio are the standard streams of a command Exec runs (nil: none).
type Stdio struct {
	In       io.Reader
	Out, Err io.Writer
}

// Exec runs argv inside node's namespace with the given standard streams
// and returns its error (an *exec.ExitError for a non-zero exit).
func Exec(ctx context.Context, lab, node string, argv []string, stdio Stdio, opts Options) error {
	if len(argv) == 0 {
		return fmt.Errorf("exec in %s: empty command", node)
	}
	ns, err := Open(lab, node, opts)
	if err != nil {
		return err
	}
	defer ns.Close()
	cmd := ns.Command(ctx, argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio.In, stdio.Out, stdio.Err
	return cmd.Run()
}
