// Package opotdp loads the OPoT data-plane programs (bpf/opot.c): the
// headend after the kernel's seg6 encap, the transit stage in front of
// an End, the verifier in front of the egress decap (docs/opot.md).
package opotdp

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I../../bpf/include -I../../bpf/lib -I/usr/include/x86_64-linux-gnu" -target bpfel -go-package opotdp -type opot_params -type opot_chain_key -type opot_chain -type opot_window -type opot_egress_key opotProg ../../bpf/opot.c
