/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* xdpfwd: the XDP ceiling of the pipeline benchmark (issue 13). Plain
 * IPv6 forwarding in XDP and nothing else: FIB lookup of the destination,
 * hop limit - 1, MACs, XDP_REDIRECT. An XDP SRv6 stage can at best match
 * it; bench scenario `pipeline` reports every XDP case as a fraction of
 * it. Anything the FIB does not resolve goes to the stack.
 */
#include "common.h"
#include "counters.h"
#include "fib.h"

SEC("xdp")
int xdpfwd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	struct bpf_fib_lookup params;

	if ((void *)(ip6 + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IPV6) || ip6->hop_limit <= 1)
		return XDP_PASS;
	if (fib_lookup_ip6(ctx, &params, ip6, ctx->ingress_ifindex) != BPF_FIB_LKUP_RET_SUCCESS)
		return XDP_PASS;
	ip6_dec_hop_limit(ip6);
	fib_set_macs(eth, &params);
	return bpf_redirect(params.ifindex, 0);
}

char _license[] SEC("license") = "Dual BSD/GPL";
