package bpfrt

import (
	"os"
	"strings"

	"github.com/cilium/ebpf"
)

// ShrinkUnused makes every map of spec whose name starts with prefix and
// that is not in keep as small as the kernel allows. It is for maps an
// object declares because a shared header does (bpf/lib/opot.h declares
// the OPoT driver's maps for every program that includes it) but that the
// program, as configured, never reads: they are created all the same,
// and at their declared size some take megabytes of locked memory.
func ShrinkUnused(spec *ebpf.CollectionSpec, prefix string, keep map[string]*ebpf.Map) {
	for name, ms := range spec.Maps {
		if _, ok := keep[name]; ok || !strings.HasPrefix(name, prefix) {
			continue
		}
		switch ms.Type {
		case ebpf.RingBuf:
			ms.MaxEntries = uint32(os.Getpagesize())
		default:
			ms.MaxEntries = 1
		}
	}
}
