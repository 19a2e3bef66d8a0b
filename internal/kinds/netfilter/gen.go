package netfilter

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I../../../bpf/include -I../../../bpf/lib -I/usr/include/x86_64-linux-gnu" -target bpfel -go-package netfilter -type anf_sid -type anf_sid_key anfProg ../../../bpf/anf.c
