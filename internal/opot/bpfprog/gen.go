// Package bpfprog loads the OPoT test program (bpf/test/opot.c, the
// library bpf/lib/opot.h) and converts internal/opot's NodeParams to the
// BPF map value. Its tests run the program against the Go model.
package bpfprog

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I../../../bpf/include -I../../../bpf/lib -I/usr/include/x86_64-linux-gnu" -target bpfel -go-package bpfprog -type opot_params -type opot_window -type opot_test_cfg opotTestProg ../../../bpf/test/opot.c
