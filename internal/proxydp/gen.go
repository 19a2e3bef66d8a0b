package proxydp

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I../../bpf/include -I../../bpf/lib -I/usr/include/x86_64-linux-gnu" -target bpfel -go-package proxydp -type proxy_sid -type proxy_hdr -type proxy_flow -type proxy_flow_key proxyProg ../../bpf/proxy.c
