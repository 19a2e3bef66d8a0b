package testutil

import (
	"testing"
	"unsafe"
)

// TestSKBLayout: SKB has struct __sk_buff's size and field offsets
// (include/uapi/linux/bpf.h), which the kernel reads it by.
func TestSKBLayout(t *testing.T) {
	var s SKB
	for name, got := range map[string][2]uintptr{
		"size":      {unsafe.Sizeof(s), 192},
		"ifindex":   {unsafe.Offsetof(s.Ifindex), 40},
		"cb":        {unsafe.Offsetof(s.CB), 48},
		"data_meta": {unsafe.Offsetof(s.DataMeta), 140},
		"flow_keys": {unsafe.Offsetof(s.FlowKeys), 144},
		"wire_len":  {unsafe.Offsetof(s.WireLen), 160},
		"gso_segs":  {unsafe.Offsetof(s.GSOSegs), 164},
		"gso_size":  {unsafe.Offsetof(s.GSOSize), 176},
		"hwtstamp":  {unsafe.Offsetof(s.Hwtstamp), 184},
	} {
		if got[0] != got[1] {
			t.Errorf("%s: %d, want %d", name, got[0], got[1])
		}
	}
}
