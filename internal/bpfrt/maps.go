package bpfrt

import "github.com/cilium/ebpf"

// CloseMaps closes every map of ms: the replacements a loader opened
// for a load (the loaded collection holds its own references).
func CloseMaps(ms map[string]*ebpf.Map) {
	for _, m := range ms {
		m.Close()
	}
}
