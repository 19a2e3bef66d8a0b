// Package all links every NF kind into a program: import it for its side
// effects (the CLI, the lab's tests, the e2e tests and the compiler's
// golden tests do). A new kind adds one line here.
package all

import (
	_ "github.com/srchain/srchain/internal/bgp"             // BGP speaker (routing: bgp), seed 004 / issue 12
	_ "github.com/srchain/srchain/internal/ingress"         // eBPF ingress program (ingress: ebpf)
	_ "github.com/srchain/srchain/internal/kinds/end"       // forward (End, End.X) and the End program
	_ "github.com/srchain/srchain/internal/kinds/firewall"  // SERA firewall, seed 000
	_ "github.com/srchain/srchain/internal/kinds/netfilter" // End.AN.NF, seed 002
	_ "github.com/srchain/srchain/internal/kinds/proxy"     // SR proxies for legacy NFs, seed 001
	_ "github.com/srchain/srchain/internal/legacynf"        // legacy NF nodes (role legacy-nf), seed 001
	_ "github.com/srchain/srchain/internal/opotdp"          // OPoT stages (chains[].opot), seed 003
	_ "github.com/srchain/srchain/internal/pipeline"        // the per-node XDP pipeline (issue 13)
)
