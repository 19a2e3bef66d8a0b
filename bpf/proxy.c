/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* SR proxies for SR-unaware NFs (seed 001; behaviours, maps and limits:
 * lib/proxy.h):
 *   srchain_proxy_sr  tc ingress of the SR-facing interface: packets to a
 *                     proxy SID go to their NF (SR -> NF);
 *   srchain_proxy_nf  tc ingress of each IFACE-IN: packets from the NF get
 *                     their SR header back and are forwarded (NF -> SR);
 *                     packets to a proxy SID arriving there are served as
 *                     by srchain_proxy_sr (one-armed NFs);
 *   srchain_proxy_xdp the proxy stage of the node's XDP pipeline (both
 *                     sides, where the tc programs are attached), and
 *                     the twins srchain_proxy_{sr,nf}_xdp attached alone.
 * Packets that are not the proxy's pass on untouched with TC_ACT_UNSPEC
 * (PROXY_NEXT): on a tcx hook the next program runs (a firewall, End or
 * ingress program after the proxy on the same interface), and after the
 * last one the stack gets them, as with TC_ACT_OK; TC_ACT_OK would end
 * the chain there. Not the proxy's: non-IPv6 frames and IPv6 not to a
 * proxy SID on the SR side; frames on an interface that is no SID's
 * IFACE-IN; IFACE-IN's own control traffic (ND, MLD, RS, ARP,
 * link-local, multicast, broadcast; counted "control"). A packet the
 * proxy served and hands to the stack itself (rewritten, when its FIB
 * lookup cannot forward it) ends the chain with TC_ACT_OK: later
 * programs must not see it twice in two forms.
 */
#include "common.h"
#include "counters.h"
#include "proxy.h"
#include "pipeline.h"

/* proxy_sid_of returns the SID entry index of the IPv6 packet's DA, or -1. */
static __always_inline int proxy_sid_of(const struct pkt *p, __u32 *idx)
{
	struct ipv6hdr *ip6 = pkt_ptr(p, p->l3off, sizeof(*ip6));
	__u32 *i;

	if (!ip6)
		return -1;
	i = bpf_map_lookup_elem(&proxy_sids, &ip6->daddr);
	if (!i)
		return -1;
	*idx = *i;
	return 0;
}

/* proxy_load makes the Ethernet + fixed L3 header linear. */
static __always_inline int proxy_load(struct pctx *c, __u32 need)
{
	ctx_reload(c, CTX_TC);
	if (pkt_ptr(&c->p, 0, need))
		return 0;
	if (bpf_skb_pull_data(c->ctx, need))
		return -1;
	ctx_reload(c, CTX_TC);
	return pkt_ptr(&c->p, 0, need) ? 0 : -1;
}

SEC("tc")
int srchain_proxy_sr(struct __sk_buff *skb)
{
	struct pctx c = { .ctx = skb, .p = { .l3off = sizeof(struct ethhdr) } };
	__u32 idx = 0;

	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return PROXY_NEXT;
	if (proxy_load(&c, sizeof(struct ethhdr) + sizeof(struct ipv6hdr)))
		return PROXY_NEXT;
	if (proxy_sid_of(&c.p, &idx))
		return PROXY_NEXT;
	/* The whole header stack linear (SRH, extension headers, inner). */
	bpf_skb_pull_data(skb, skb->len < CTX_MAX_ROOM ? skb->len : CTX_MAX_ROOM);
	return proxy_sr_run(skb, idx);
}

SEC("tc")
int srchain_proxy_nf(struct __sk_buff *skb)
{
	struct pctx c = { .ctx = skb, .p = { .l3off = sizeof(struct ethhdr) } };
	struct ethhdr *eth;
	__u32 key = skb->ingress_ifindex, idx = 0, *i;
	__be16 proto;

	i = bpf_map_lookup_elem(&proxy_nf, &key);
	if (!i)
		return PROXY_NEXT;
	idx = *i;
	if (proxy_load(&c, sizeof(struct ethhdr)))
		return PROXY_NEXT;
	eth = pkt_ptr(&c.p, 0, sizeof(*eth));
	if (!eth)
		return PROXY_NEXT;
	proto = eth->h_proto;
	if (proto == bpf_htons(ETH_P_IPV6) || proto == bpf_htons(ETH_P_IP)) {
		bpf_skb_pull_data(skb, skb->len < CTX_MAX_ROOM ? skb->len : CTX_MAX_ROOM);
		ctx_reload(&c, CTX_TC);
	}
	if (proto == bpf_htons(ETH_P_IPV6)) {
		__u32 sidx = 0;

		if (!proxy_sid_of(&c.p, &sidx))
			return proxy_sr_run(skb, sidx);
	}
	if (proxy_control_of(&c.p, proto, idx)) {
		proxy_count(idx, PS_CONTROL);
		return PROXY_NEXT;
	}
	if (proxy_is_l2(idx))
		return proxy_nf_l2_run(skb, idx);
	return proxy_nf_run(skb, idx, proto);
}

/* PROXY_XDP_NEXT: the XDP entries below found nothing of the proxy's in
 * the frame. The twins pass it on (XDP_PASS), the pipeline stage hands it
 * to the node's next stage; XDP_PASS from an entry means "tc decides"
 * (its tc twin serves, drops and counts it).
 */
#define PROXY_XDP_NEXT (-1)

/* proxy_sr_xdp_entry is the SR side at XDP: packets to a proxy SID whose
 * NF next hop a FIB lookup resolves out of IFACE-OUT are served, every
 * other packet to a proxy SID goes to tc untouched. Multicast and
 * broadcast frames go to tc too (XDP has no pkt_type).
 */
static __always_inline int proxy_sr_xdp_entry(struct xdp_md *ctx)
{
	struct pctx c = { .ctx = ctx, .p = { .l3off = sizeof(struct ethhdr) } };
	struct ethhdr *eth;
	__u32 idx = 0;

	ctx_reload(&c, CTX_XDP);
	eth = pkt_ptr(&c.p, 0, sizeof(*eth));
	if (!eth || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return PROXY_XDP_NEXT;
	if (proxy_sid_of(&c.p, &idx))
		return PROXY_XDP_NEXT;
	if (eth->h_dest[0] & 1)
		return XDP_PASS;
	return proxy_sr_xdp_run(ctx, idx);
}

/* proxy_nf_xdp_entry is the NF side at XDP on the IFACE-IN of SID entry
 * idx: packets from the NF get their SR header back and leave by a FIB
 * redirect without an skb on this node; packets to a proxy SID (one-armed
 * NFs) are served as on the SR side. Control traffic, multicast, and
 * everything it cannot finish go to tc untouched.
 */
static __always_inline int proxy_nf_xdp_entry(struct xdp_md *ctx, __u32 idx)
{
	struct pctx c = { .ctx = ctx, .p = { .l3off = sizeof(struct ethhdr) } };
	struct ethhdr *eth;
	__be16 proto;
	int l2;

	ctx_reload(&c, CTX_XDP);
	eth = pkt_ptr(&c.p, 0, sizeof(*eth));
	if (!eth)
		return XDP_PASS;
	/* An L2 service carries broadcast and multicast frames too. */
	l2 = proxy_is_l2(idx);
	if (!l2 && (eth->h_dest[0] & 1))
		return XDP_PASS;
	proto = eth->h_proto;
	if (proto == bpf_htons(ETH_P_IPV6)) {
		__u32 sidx = 0;

		if (!proxy_sid_of(&c.p, &sidx))
			return proxy_sr_xdp_run(ctx, sidx);
	}
	if (proxy_control_of(&c.p, proto, idx))
		return XDP_PASS;
	if (l2)
		return proxy_nf_l2_xdp_run(ctx, idx);
	return proxy_nf_xdp_run(ctx, idx, proto);
}

/* srchain_proxy_sr_xdp is the XDP twin of srchain_proxy_sr (the software
 * analogue of seed 001's offloaded SR->NF path), attached on its own
 * (Proxy.AttachXDP; the bench): srchain_proxy_sr must be attached to the
 * same interface, for what it passes.
 */
SEC("xdp")
int srchain_proxy_sr_xdp(struct xdp_md *ctx)
{
	int v = proxy_sr_xdp_entry(ctx);

	return v == PROXY_XDP_NEXT ? XDP_PASS : v;
}

/* srchain_proxy_nf_xdp is the XDP twin of srchain_proxy_nf on an
 * IFACE-IN (the NF side of the offload), attached on its own as
 * srchain_proxy_sr_xdp is.
 */
SEC("xdp")
int srchain_proxy_nf_xdp(struct xdp_md *ctx)
{
	__u32 key = ctx->ingress_ifindex, *i;

	i = bpf_map_lookup_elem(&proxy_nf, &key);
	if (!i)
		return XDP_PASS;
	return proxy_nf_xdp_entry(ctx, *i);
}

/* srchain_proxy_xdp is the proxy stage of the node's XDP pipeline
 * (lib/pipeline.h; docs/pipeline.md), one program for every interface:
 * on an IFACE-IN it is srchain_proxy_nf_xdp, on an SR-side interface
 * (proxy_sr_ifs) srchain_proxy_sr_xdp, exactly where the tc programs
 * are attached; elsewhere, and for what is not the proxy's, the next
 * stage takes the packet. What it passes goes to the stack, where the tc
 * proxy (and every tc stage) runs.
 */
SEC("xdp")
int srchain_proxy_xdp(struct xdp_md *ctx)
{
	__u32 key = ctx->ingress_ifindex, *i;
	int v = PROXY_XDP_NEXT;

	i = bpf_map_lookup_elem(&proxy_nf, &key);
	if (i)
		v = proxy_nf_xdp_entry(ctx, *i);
	else if (bpf_map_lookup_elem(&proxy_sr_ifs, &key))
		v = proxy_sr_xdp_entry(ctx);
	if (v == PROXY_XDP_NEXT)
		return pipe_next(ctx, PIPE_PROXY);
	return pipe_ret(PIPE_PROXY, v);
}

char _license[] SEC("license") = "Dual BSD/GPL";
