package bpfrt

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Hook is one attachment point: an interface's tcx ingress (or, with
// Egress, its tcx egress) or its XDP hook, in the caller's network
// namespace.
type Hook struct {
	Ifindex int
	XDP     bool
	// Egress: the tcx egress hook (not with XDP).
	Egress bool
}

// String is also the hook's link pin name under a pin directory
// ("tcx_ingress_<ifindex>", "tcx_egress_<ifindex>", "xdp_<ifindex>").
func (h Hook) String() string {
	if h.XDP {
		return fmt.Sprintf("xdp_%d", h.Ifindex)
	}
	if h.Egress {
		return fmt.Sprintf("tcx_egress_%d", h.Ifindex)
	}
	return fmt.Sprintf("tcx_ingress_%d", h.Ifindex)
}

// attachType is the tcx attach type of a tc hook.
func (h Hook) attachType() ebpf.AttachType {
	if h.Egress {
		return ebpf.AttachTCXEgress
	}
	return ebpf.AttachTCXIngress
}

// AttachOptions configure Attach.
type AttachOptions struct {
	// Pin, when set, is the bpffs path of the hook's link: a link pinned
	// there that is attached at the hook in this namespace is taken over
	// and replaced by the program (an atomic program swap, no gap); a
	// stale one (interface or namespace gone, link elsewhere) is removed.
	// A new link is pinned there.
	Pin string
	// Head puts a tcx program first on the interface (before programs
	// already there, e.g. a firewall in front of End).
	Head bool
	// Before, when set (and not Head), puts a tcx program right before
	// that program (the eBPF ingress before End, after a firewall).
	Before ebpf.ProgramID
	// Logger receives stale-pin notices; nil means slog.Default().
	Logger *slog.Logger
}

// Attach attaches prog at h in the current network namespace (call it
// inside netns.NS.Do for a lab node): tcx ingress, or XDP in native mode
// where the driver has it. reused reports that a pinned link was taken
// over.
func Attach(h Hook, prog *ebpf.Program, o AttachOptions) (l link.Link, reused bool, err error) {
	if prog == nil { // e.g. a loader that opened only the maps
		return nil, false, fmt.Errorf("attach %s: no program loaded", h)
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	if o.Pin != "" {
		l, err := takeOver(h, o.Pin, prog, log)
		if err != nil || l != nil {
			return l, l != nil, err
		}
	}
	if h.XDP {
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: h.Ifindex})
	} else {
		opts := link.TCXOptions{Interface: h.Ifindex, Program: prog, Attach: h.attachType()}
		if o.Head {
			opts.Anchor = link.Head()
		} else if o.Before != 0 {
			opts.Anchor = link.BeforeProgramByID(o.Before)
		}
		l, err = link.AttachTCX(opts)
	}
	if err != nil {
		return nil, false, fmt.Errorf("attach %s: %w", h, err)
	}
	if o.Pin != "" {
		if err := l.Pin(o.Pin); err != nil {
			l.Close()
			return nil, false, fmt.Errorf("pin link %s: %w", h, err)
		}
	}
	return l, false, nil
}

// AttachPinned is Attach for a link that o.Pin keeps: the handle is
// closed at once, the program stays attached.
func AttachPinned(h Hook, prog *ebpf.Program, o AttachOptions) error {
	if o.Pin == "" {
		return fmt.Errorf("attach %s: no pin to keep the link", h)
	}
	l, _, err := Attach(h, prog, o)
	if err != nil {
		return err
	}
	return l.Close()
}

// Detach removes the link (and its pin when pinned): the program leaves
// the hook.
func Detach(h Hook, l link.Link, pinned bool) error {
	if pinned {
		if err := l.Unpin(); err != nil {
			l.Close()
			return fmt.Errorf("unpin link %s: %w", h, err)
		}
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("detach %s: %w", h, err)
	}
	return nil
}

// DetachPinned detaches the tcx or XDP link pinned at path and removes
// the pin (no pin: nothing to do). A link that is already severed (its
// interface or namespace went away, or someone detached it by hand) is
// only unpinned: detaching it again would fail for nothing.
func DetachPinned(path string) error {
	l, err := link.LoadPinnedLink(path, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open link pin %s: %w", path, err)
	}
	defer l.Close()
	if info, err := l.Info(); err == nil {
		attached := false
		if ti := info.TCX(); ti != nil && ti.Ifindex != 0 {
			attached = true
		}
		if xi := info.XDP(); xi != nil && xi.Ifindex != 0 {
			attached = true
		}
		if attached {
			if err := l.Detach(); err != nil {
				return fmt.Errorf("detach link %s: %w", path, err)
			}
		}
	}
	if err := l.Unpin(); err != nil {
		return fmt.Errorf("unpin link %s: %w", path, err)
	}
	return nil
}

// takeOver returns the link pinned at pin, updated to prog, when it
// really is attached at h in the current network namespace. A stale pin
// (the interface or namespace was deleted and the link severed, the link
// sits on another interface, the pin is not a link, the update fails) is
// removed and its link closed; it then returns nil, nil and the caller
// attaches afresh. No pin: nil, nil.
func takeOver(h Hook, pin string, prog *ebpf.Program, log *slog.Logger) (link.Link, error) {
	l, err := link.LoadPinnedLink(pin, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		log.Warn("stale link pin removed", "at", h.String(), "pin", pin, "reason", err.Error())
		if err := os.Remove(pin); err != nil {
			return nil, fmt.Errorf("remove stale link pin %s: %w", h, err)
		}
		return nil, nil
	}
	live, why := LinkAttachedHere(l, h)
	if live {
		err := l.Update(prog)
		if err == nil {
			return l, nil
		}
		why = "update: " + err.Error()
	}
	log.Warn("stale link pin replaced", "at", h.String(), "pin", pin, "reason", why)
	if err := l.Unpin(); err != nil {
		l.Close()
		return nil, fmt.Errorf("unpin stale link %s: %w", h, err)
	}
	if err := l.Close(); err != nil {
		return nil, fmt.Errorf("close stale link %s: %w", h, err)
	}
	return nil, nil
}

// LinkRuns reports whether link l runs prog's code (SameCode). A link
// pinned by an older srchain runs other code under the same name; a
// driver that keeps attached links across applies swaps such a link.
func LinkRuns(l link.Link, prog *ebpf.Program) (bool, error) {
	cur, err := LinkProgram(l)
	if err != nil {
		return false, err
	}
	defer cur.Close()
	return SameCode(cur, prog)
}

// LinkProgram opens the program link l runs.
func LinkProgram(l link.Link) (*ebpf.Program, error) {
	li, err := l.Info()
	if err != nil {
		return nil, fmt.Errorf("link info: %w", err)
	}
	prog, err := ebpf.NewProgramFromID(li.Program)
	if err != nil {
		return nil, fmt.Errorf("open the link's program: %w", err)
	}
	return prog, nil
}

// PinnedLinkProgram opens the program the link pinned at pin runs: what
// a driver that swaps the link's program keeps to swap it back on undo.
func PinnedLinkProgram(pin string) (*ebpf.Program, error) {
	l, err := link.LoadPinnedLink(pin, nil)
	if err != nil {
		return nil, fmt.Errorf("open link %s: %w", pin, err)
	}
	defer l.Close()
	prog, err := LinkProgram(l)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pin, err)
	}
	return prog, nil
}

// PinnedLinkRuns opens the link pinned at pin and reports whether it is
// attached at h in the current network namespace (LinkAttachedHere) and,
// when prog is not nil, whether it runs prog's code (LinkRuns). A pin
// that cannot be opened is neither.
func PinnedLinkRuns(pin string, h Hook, prog *ebpf.Program) (attached, runs bool) {
	l, err := link.LoadPinnedLink(pin, nil)
	if err != nil {
		return false, false
	}
	defer l.Close()
	if attached, _ = LinkAttachedHere(l, h); !attached || prog == nil {
		return attached, false
	}
	runs, _ = LinkRuns(l, prog)
	return attached, runs
}

// SameCode reports whether two loaded programs are the same program or
// were loaded from the same instructions: the kernel's tag, which leaves
// out map references, so a program loaded again with new maps is the
// same code, and one of another srchain build is not.
func SameCode(a, b *ebpf.Program) (bool, error) {
	ai, err := a.Info()
	if err != nil {
		return false, fmt.Errorf("program info: %w", err)
	}
	bi, err := b.Info()
	if err != nil {
		return false, fmt.Errorf("program info: %w", err)
	}
	return ai.Tag == bi.Tag, nil
}

// LinkAttachedHere reports whether l is attached at h in the current
// network namespace, and if not, why. It asks the kernel: the tcx link's
// ID must be among the programs on h's tcx ingress here, the XDP link's
// program must be the one the interface runs here. A link severed when
// its namespace or interface went away fails both, whatever ifindex a
// recreated interface got.
func LinkAttachedHere(l link.Link, h Hook) (bool, string) {
	info, err := l.Info()
	if err != nil {
		return false, "link info: " + err.Error()
	}
	if h.XDP {
		xi := info.XDP()
		if xi == nil {
			return false, fmt.Sprintf("not an xdp link (%v)", info.Type)
		}
		if int(xi.Ifindex) != h.Ifindex {
			return false, fmt.Sprintf("link on ifindex %d", xi.Ifindex)
		}
		id, err := XDPProgramID(h.Ifindex)
		if err != nil {
			return false, err.Error()
		}
		if id != info.Program {
			return false, fmt.Sprintf("interface runs xdp program %d, link has %d", id, info.Program)
		}
		return true, ""
	}
	ti := info.TCX()
	if ti == nil {
		return false, fmt.Sprintf("not a tcx link (%v)", info.Type)
	}
	if int(ti.Ifindex) != h.Ifindex {
		return false, fmt.Sprintf("link on ifindex %d", ti.Ifindex)
	}
	atts, err := tcxPrograms(h.Ifindex, h.attachType())
	if err != nil {
		return false, err.Error()
	}
	for _, a := range atts {
		if a.Link == info.ID {
			return true, ""
		}
	}
	return false, fmt.Sprintf("link %d not on ifindex %d (%s) in this namespace", info.ID, h.Ifindex, h)
}

// TCXAttachment is one program on a tcx hook.
type TCXAttachment struct {
	Program ebpf.ProgramID
	Link    link.ID // 0 when attached without a link
}

// TCXIngress lists the programs on ifindex's tcx ingress in the current
// network namespace, in run order.
func TCXIngress(ifindex int) ([]TCXAttachment, error) {
	return tcxPrograms(ifindex, ebpf.AttachTCXIngress)
}

// TCXEgress lists the programs on ifindex's tcx egress in the current
// network namespace, in run order.
func TCXEgress(ifindex int) ([]TCXAttachment, error) {
	return tcxPrograms(ifindex, ebpf.AttachTCXEgress)
}

func tcxPrograms(ifindex int, at ebpf.AttachType) ([]TCXAttachment, error) {
	res, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: at})
	if err != nil {
		return nil, fmt.Errorf("query tcx %v of ifindex %d: %w", at, ifindex, err)
	}
	out := make([]TCXAttachment, 0, len(res.Programs))
	for _, p := range res.Programs {
		a := TCXAttachment{Program: p.ID}
		a.Link, _ = p.LinkID()
		out = append(out, a)
	}
	return out, nil
}

// ProgramName returns the kernel name of the loaded program id.
func ProgramName(id ebpf.ProgramID) (string, error) {
	p, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return "", fmt.Errorf("open program %d: %w", id, err)
	}
	defer p.Close()
	info, err := p.Info()
	if err != nil {
		return "", fmt.Errorf("read program %d info: %w", id, err)
	}
	return info.Name, nil
}

// TCXNames lists the names of the programs on h's tcx hook in the
// current network namespace, in run order.
func TCXNames(h Hook) ([]string, error) {
	atts, err := tcxPrograms(h.Ifindex, h.attachType())
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(atts))
	for _, a := range atts {
		n, err := ProgramName(a.Program)
		if err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, nil
}

// XDPProgramID returns the id of the XDP program on ifindex in the
// current network namespace (0: none).
func XDPProgramID(ifindex int) (ebpf.ProgramID, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return 0, fmt.Errorf("open netlink: %w", err)
	}
	defer h.Close()
	l, err := h.LinkByIndex(ifindex)
	if err != nil {
		return 0, fmt.Errorf("find ifindex %d: %w", ifindex, err)
	}
	if x := l.Attrs().Xdp; x != nil && x.Attached {
		return ebpf.ProgramID(x.ProgId), nil
	}
	return 0, nil
}

// ProgramID returns a loaded program's kernel id.
func ProgramID(p *ebpf.Program) (ebpf.ProgramID, error) {
	info, err := p.Info()
	if err != nil {
		return 0, fmt.Errorf("program info: %w", err)
	}
	id, ok := info.ID()
	if !ok {
		return 0, fmt.Errorf("program info: %w: no id", ErrBadMap)
	}
	return id, nil
}

// Attached reports whether prog runs at h in the current network
// namespace, asking the kernel (BPF_PROG_QUERY for tcx, netlink for
// XDP), not any bookkeeping. An ifindex that does not exist is an error.
func Attached(prog *ebpf.Program, h Hook) (bool, error) {
	id, err := ProgramID(prog)
	if err != nil {
		return false, fmt.Errorf("check attachment at %s: %w", h, err)
	}
	if h.XDP {
		have, err := XDPProgramID(h.Ifindex)
		if err != nil {
			return false, fmt.Errorf("check attachment at %s: %w", h, err)
		}
		return have == id, nil
	}
	atts, err := tcxPrograms(h.Ifindex, h.attachType())
	if err != nil {
		return false, fmt.Errorf("check attachment at %s: %w", h, err)
	}
	for _, a := range atts {
		if a.Program == id {
			return true, nil
		}
	}
	return false, nil
}

// RemovePinDir detaches every link pinned in dir whose name isLink
// accepts (a link whose last pin goes would otherwise run on until an RCU
// grace period ends), then removes dir with the maps and programs pinned
// there. No dir: nothing to do.
func RemovePinDir(dir string, isLink func(name string) bool) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read pin dir: %w", err)
	}
	var errs []error
	for _, e := range ents {
		if isLink(e.Name()) {
			errs = append(errs, DetachPinned(dir+"/"+e.Name()))
		}
	}
	errs = append(errs, os.RemoveAll(dir))
	return errors.Join(errs...)
}
