package bench

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -target bpfel -cflags "-O2 -g -Wall -Werror" xdpgen ../../bpf/bench/xdpgen.c -- -I../../bpf/include -I../../bpf/lib -I/usr/include/x86_64-linux-gnu
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -target bpfel -cflags "-O2 -g -Wall -Werror" sink ../../bpf/bench/sink.c -- -I../../bpf/include -I../../bpf/lib -I/usr/include/x86_64-linux-gnu
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -target bpfel -cflags "-O2 -g -Wall -Werror" xdpfwd ../../bpf/bench/xdpfwd.c -- -I../../bpf/include -I../../bpf/lib -I/usr/include/x86_64-linux-gnu
