// Package datapath loads and drives srchain's eBPF programs: the tc End /
// End.X program (LoadEnd) and the helpers other loaders share (per-CPU
// counter reading, TCX attachment, map pinning).
//
// The C lives in bpf/ at the repository root; bpf2go compiles it and the
// generated Go and object files are committed (docs/datapath.md).
package datapath

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I../../bpf/include -I../../bpf/lib -I/usr/include/x86_64-linux-gnu" -target bpfel -go-package datapath -type sid_entry -type sid_len_set endProg ../../bpf/end.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I../../bpf/include -I../../bpf/lib -I/usr/include/x86_64-linux-gnu" -target bpfel -go-package datapath endXdpProg ../../bpf/end_xdp.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I../../bpf/include -I../../bpf/lib -I/usr/include/x86_64-linux-gnu" -target bpfel -go-package datapath -type encap_test_cfg encapTestProg ../../bpf/test/encap.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I../../bpf/include -I../../bpf/lib -I/usr/include/x86_64-linux-gnu" -target bpfel -go-package datapath csumTestProg ../../bpf/test/csum.c
