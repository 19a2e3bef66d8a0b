/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* A small context abstraction so that packet-moving helpers are written
 * once for tc and XDP (the way cilium's ctx_* wrappers let its lib/srv6.h
 * serve both).
 *
 * A struct pctx holds the program's context and the struct pkt view of
 * it. kind (CTX_TC or CTX_XDP) is a compile-time constant at every call
 * site: helpers are always inlined and clang folds the other attach
 * point's branch away, so each program only calls helpers its type may.
 * Every helper that moves packet data re-derives c->p before returning
 * (CONTRIBUTING: re-derive data/data_end after adjust_room/adjust_head);
 * pointers taken before the call are invalid after it.
 */
#ifndef SRCHAIN_CTX_H
#define SRCHAIN_CTX_H

#include "common.h"

#define CTX_TC 0
#define CTX_XDP 1

/* Largest header block the push/pull helpers move: outer IPv6 + an SRH
 * of SRCHAIN_MAX_SEGS segments + TLVs and extension headers, bounded so
 * offsets stay provably small for the verifier.
 */
#define CTX_MAX_ROOM 1024

/* BPF_F_ADJ_ROOM_DECAP_L3_IPV4/6 (Linux 6.3): set skb->protocol to the
 * inner family when shrinking. Debian 12's UAPI headers (6.1) lack them;
 * the values are the kernel's.
 */
#ifndef BPF_F_ADJ_ROOM_DECAP_L3_IPV4
#define BPF_F_ADJ_ROOM_DECAP_L3_IPV4 (1ULL << 7)
#define BPF_F_ADJ_ROOM_DECAP_L3_IPV6 (1ULL << 8)
#endif

struct pctx {
	void *ctx; /* struct __sk_buff * or struct xdp_md * */
	struct pkt p;
};

/* ctx_reload re-derives c->p.data/data_end from the context. */
static __always_inline void ctx_reload(struct pctx *c, const int kind)
{
	if (kind == CTX_XDP) {
		struct xdp_md *x = c->ctx;

		c->p.data = (void *)(long)x->data;
		c->p.data_end = (void *)(long)x->data_end;
	} else {
		struct __sk_buff *s = c->ctx;

		c->p.data = (void *)(long)s->data;
		c->p.data_end = (void *)(long)s->data_end;
	}
}

/* ctx_l3_len is the length of the packet from the L3 header on. */
static __always_inline __u32 ctx_l3_len(const struct pctx *c, const int kind)
{
	if (kind == CTX_XDP)
		return c->p.data_end - c->p.data - c->p.l3off;
	return ((struct __sk_buff *)c->ctx)->len - c->p.l3off;
}

/* ctx_mac_move copies the Ethernet header (l3off bytes, 14) from offset
 * from to offset to; the regions do not overlap (|from - to| >= 14).
 */
static __always_inline int ctx_mac_move(struct pctx *c, __u32 from, __u32 to)
{
	struct ethhdr *src = pkt_ptr(&c->p, from & (CTX_MAX_ROOM - 1), sizeof(*src));
	struct ethhdr *dst = pkt_ptr(&c->p, to & (CTX_MAX_ROOM - 1), sizeof(*dst));

	if (!src || !dst)
		return -1;
	__builtin_memcpy(dst, src, sizeof(*dst));
	return 0;
}

/* ctx_push makes len bytes of room between the Ethernet
 * header and the L3 header (tc: bpf_skb_adjust_room at the MAC layer
 * with flags, which the kernel needs to fix skb->protocol and the GSO
 * state of an encapsulation; XDP: bpf_xdp_adjust_head and the Ethernet
 * header moved to the new front). The room's contents are undefined
 * (XDP) or zero (tc); the caller writes all of it. Returns 0 or -1.
 */
static __always_inline int ctx_push(struct pctx *c, const int kind, __u32 len, __u64 tc_flags)
{
	if (len >= CTX_MAX_ROOM)
		return -1;
	if (kind == CTX_XDP) {
		if (bpf_xdp_adjust_head(c->ctx, -(int)len))
			return -1;
		ctx_reload(c, kind);
		return ctx_mac_move(c, len, 0);
	}
	if (bpf_skb_adjust_room(c->ctx, len, BPF_ADJ_ROOM_MAC, tc_flags))
		return -1;
	ctx_reload(c, kind);
	return 0;
}

/* ctx_pull removes the len bytes right after the Ethernet header (the
 * inverse of ctx_push). Returns 0 or -1; after -1 the packet may be
 * half-rewritten and must be dropped.
 */
static __always_inline int ctx_pull(struct pctx *c, const int kind, __u32 len, __u64 tc_flags)
{
	if (len >= CTX_MAX_ROOM)
		return -1;
	if (kind == CTX_XDP) {
		if (ctx_mac_move(c, 0, len))
			return -1;
		if (bpf_xdp_adjust_head(c->ctx, (int)len))
			return -1;
		ctx_reload(c, kind);
		return 0;
	}
	if (bpf_skb_adjust_room(c->ctx, -(__s32)len, BPF_ADJ_ROOM_MAC, tc_flags))
		return -1;
	ctx_reload(c, kind);
	return 0;
}

/* ctx_csum_complete reports whether a tc packet is CHECKSUM_COMPLETE,
 * the only state whose skb->csum a rewrite must fix: bpf_csum_update
 * adds to skb->csum (adding 0 changes nothing) and returns it only then,
 * -ENOTSUPP otherwise. Callers skip their bpf_csum_diff work when it is
 * not (the common case on veths and most NICs' receive path), which
 * costs more than the rewrite itself. Always 0 at XDP.
 */
static __always_inline int ctx_csum_complete(struct pctx *c, const int kind)
{
	if (kind != CTX_TC)
		return 0;
	return bpf_csum_update(c->ctx, 0) >= 0;
}

#endif /* SRCHAIN_CTX_H */
