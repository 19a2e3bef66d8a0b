package bench

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -target bpfel -cflags "-O2 -g -Wall -Werror" xdpgen ../../bpf/xdpgen.c -- -I../../bpf/include -I/usr/include/x86_64-linux-gnu
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -target bpfel -cflags "-O2 -g -Wall -Werror" sink ../../bpf/sink.c -- -I../../bpf/include -I/usr/include/x86_64-linux-gnu
