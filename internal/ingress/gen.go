package ingress

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I../../bpf/include -I../../bpf/lib -I/usr/include/x86_64-linux-gnu" -target bpfel -go-package ingress -type ing_policy -type ing_config -type ing_flow_key -type ing_flow ingressProg ../../bpf/ingress.c
