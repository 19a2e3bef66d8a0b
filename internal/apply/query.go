package apply

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/netns"
)

// IngressPrograms returns the names of the BPF programs attached to the tcx
// ingress of interface ifname in ns (what `lab status` and the tests check).
func IngressPrograms(ns *netns.NS, ifname string) ([]string, error) {
	return tcxPrograms(ns, ifname, ebpf.AttachTCXIngress, "ingress")
}

// EgressPrograms is IngressPrograms for the tcx egress hook (the OPoT
// headend stage).
func EgressPrograms(ns *netns.NS, ifname string) ([]string, error) {
	return tcxPrograms(ns, ifname, ebpf.AttachTCXEgress, "egress")
}

func tcxPrograms(ns *netns.NS, ifname string, hook ebpf.AttachType, what string) ([]string, error) {
	l, err := ns.Netlink().LinkByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("find interface %s: %w: %w", ifname, ErrNoInterface, err)
	}
	var names []string
	err = ns.Do(func() error {
		res, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: hook})
		if err != nil {
			return fmt.Errorf("query tcx %s of %s: %w", what, ifname, err)
		}
		for _, p := range res.Programs {
			prog, err := ebpf.NewProgramFromID(p.ID)
			if err != nil {
				return fmt.Errorf("open program %d: %w", p.ID, err)
			}
			info, err := prog.Info()
			prog.Close()
			if err != nil {
				return fmt.Errorf("read program %d info: %w", p.ID, err)
			}
			names = append(names, info.Name)
		}
		return nil
	})
	return names, err
}

// XDPProgram returns the name of the XDP program attached to ifname in
// the namespace ("" when none).
func XDPProgram(ns *netns.NS, ifname string) (string, error) {
	l, err := ns.Netlink().LinkByName(ifname)
	if err != nil {
		return "", fmt.Errorf("find interface %s: %w: %w", ifname, ErrNoInterface, err)
	}
	x := l.Attrs().Xdp
	if x == nil || !x.Attached || x.ProgId == 0 {
		return "", nil
	}
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(x.ProgId))
	if err != nil {
		return "", fmt.Errorf("open program %d: %w", x.ProgId, err)
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		return "", fmt.Errorf("read program %d info: %w", x.ProgId, err)
	}
	return info.Name, nil
}
