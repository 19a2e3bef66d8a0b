/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Common includes, limits and conventions for every srchain BPF program.
 *
 * Include this first from an entry file (bpf/end.c, bpf/firewall.c, ...).
 * It pulls the kernel UAPI headers from the system (/usr/include and
 * /usr/include/x86_64-linux-gnu for asm/) and the libbpf helpers vendored
 * in bpf/include; the bpf2go line of each loader package passes the -I
 * flags (see docs/datapath.md).
 *
 * Configuration convention: per-load settings are `volatile const` globals
 * (placed in .rodata, rewritten by the loader before load, so the verifier
 * sees constants and prunes dead branches); runtime state (SIDs, rules,
 * counters) lives in maps. Declare them with SRCHAIN_CONFIG, e.g.
 *
 *     SRCHAIN_CONFIG(__u32, cfg_flags, 0);
 *
 * and set them from Go via CollectionSpec.Variables["cfg_flags"].Set(...).
 */
#ifndef SRCHAIN_COMMON_H
#define SRCHAIN_COMMON_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/seg6.h>

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "drop.h"

/* Largest SRH srchain parses: last entry must be < SRCHAIN_MAX_SEGS.
 * 16 segments = 256 bytes of SIDs, far beyond any chain the compiler
 * emits (seed 004 "header budget"); the bound keeps every loop and
 * segment index provably finite for the verifier.
 */
#define SRCHAIN_MAX_SEGS 16

/* Extension headers skipped before the routing header (Hop-by-Hop and
 * Destination Options may precede it, RFC 8200 4.1).
 */
#define SRCHAIN_MAX_EXTHDRS 4

/* TLVs walked after the segment list (RFC 8754 2.1); more than this is
 * treated as malformed (DROP_TLV_BAD).
 */
#define SRCHAIN_MAX_TLVS 16

/* IPv6 next-header values not in every UAPI header version. */
#ifndef IPPROTO_ROUTING
#define IPPROTO_ROUTING 43
#endif
#ifndef IPPROTO_HOPOPTS
#define IPPROTO_HOPOPTS 0
#endif
#ifndef IPPROTO_DSTOPTS
#define IPPROTO_DSTOPTS 60
#endif

/* Routing header type of the SRH (RFC 8754 2). */
#define SRCHAIN_SRH_TYPE 4

/* Declare a load-time configuration constant (see the header comment). */
#define SRCHAIN_CONFIG(type, name, dflt) volatile const type name = (dflt)

/* pkt is the view both tc and XDP programs share: data/data_end of the
 * linear packet plus the offset of the L3 header. Helpers in bpf/lib take a
 * struct pkt so one implementation serves both attach points; after any
 * call that can move packet data (bpf_skb_pull_data, adjust_room, ...)
 * the caller must rebuild it (CONTRIBUTING: re-derive data/data_end).
 */
struct pkt {
	void *data;
	void *data_end;
	__u32 l3off; /* offset of the IPv4/IPv6 header from data */
};

/* pkt_ptr returns data + off if [off, off+len) lies inside the packet,
 * else NULL. off and len must be bounded for the verifier; callers pass
 * constants or values masked/clamped beforehand.
 */
static __always_inline void *pkt_ptr(const struct pkt *p, __u32 off, __u32 len)
{
	void *ptr = p->data + off;

	if (ptr + len > p->data_end)
		return NULL;
	return ptr;
}

/* ipv6_addr_eq compares two IPv6 addresses as four 32-bit words. */
static __always_inline int ipv6_addr_eq(const struct in6_addr *a, const struct in6_addr *b)
{
	return a->in6_u.u6_addr32[0] == b->in6_u.u6_addr32[0] &&
	       a->in6_u.u6_addr32[1] == b->in6_u.u6_addr32[1] &&
	       a->in6_u.u6_addr32[2] == b->in6_u.u6_addr32[2] &&
	       a->in6_u.u6_addr32[3] == b->in6_u.u6_addr32[3];
}

/* ipv6_addr_copy copies word by word (no memcpy: dst may be packet data). */
static __always_inline void ipv6_addr_copy(struct in6_addr *dst, const struct in6_addr *src)
{
	dst->in6_u.u6_addr32[0] = src->in6_u.u6_addr32[0];
	dst->in6_u.u6_addr32[1] = src->in6_u.u6_addr32[1];
	dst->in6_u.u6_addr32[2] = src->in6_u.u6_addr32[2];
	dst->in6_u.u6_addr32[3] = src->in6_u.u6_addr32[3];
}

#endif /* SRCHAIN_COMMON_H */
