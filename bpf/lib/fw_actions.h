/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* SERA firewall: verdicts that rewrite or look at the packet: the SEG6
 * targets (go-next, skip-next, go-last), the NF's SID scope and eval-args.
 */
#ifndef SRCHAIN_FW_ACTIONS_H
#define SRCHAIN_FW_ACTIONS_H

#include "common.h"
#include "srh.h"
#include "fw_maps.h"
#include "fw_extract.h"

/* Words the SR actions rewrite, for the CHECKSUM_COMPLETE fix-up (as in
 * bpf/end.c): the destination and the SRH word holding segments left.
 */
struct fw_words {
	struct in6_addr daddr;
	__be32 srhw0;
};

static __always_inline int fw_words_read(const struct pkt *p, const struct srh_info *si,
					 struct fw_words *w)
{
	struct ipv6hdr *ip6 = pkt_ptr(p, si->ip6off, sizeof(*ip6));
	__be32 *srhw = pkt_ptr(p, si->srhoff, 4);

	if (!ip6 || !srhw)
		return -1;
	ipv6_addr_copy(&w->daddr, &ip6->daddr);
	w->srhw0 = *srhw;
	return 0;
}

/* fw_seg6 performs a SEG6 target action (seed 000 V.B, Listing 3):
 *   go-next   SL >= 1: SL -= 1, DA = segment[SL]   (RFC 8986 4.1 End)
 *   skip-next SL >= 2: SL -= 2, DA = segment[SL]
 *   go-last   SL >= 1: SL = 0,  DA = segment[0]
 * A failed precondition (or a non-SR packet) is DROP_FW_PRECOND. The hop
 * limit is left to the stack, which forwards the packet (lib/fib.h
 * policy), so it is decremented exactly once.
 */
static __always_inline __u32 fw_seg6(const struct pkt *p, const struct fw_pkt *fp, __u32 act)
{
	struct ipv6hdr *ip6;
	struct srh_fixed *srh;
	struct in6_addr *seg;
	__u32 sl;

	if (!fp->sr)
		return DROP_FW_PRECOND;
	sl = fp->si.sl;
	if (act == FW_ACT_GO_NEXT) {
		if (sl < 1)
			return DROP_FW_PRECOND;
		sl -= 1;
	} else if (act == FW_ACT_SKIP_NEXT) {
		if (sl < 2)
			return DROP_FW_PRECOND;
		sl -= 2;
	} else {
		if (sl < 1)
			return DROP_FW_PRECOND;
		sl = 0;
	}
	ip6 = pkt_ptr(p, fp->si.ip6off, sizeof(*ip6));
	srh = srh_fixed_hdr(p, &fp->si);
	seg = srh_segment(p, &fp->si, sl);
	if (!ip6 || !srh || !seg)
		return DROP_SRH_TRUNCATED;
	srh->segments_left = sl;
	ipv6_addr_copy(&ip6->daddr, seg);
	return DROP_NONE;
}

/* fw_in_sid reports whether da lies in the NF's SID prefix. */
static __always_inline int fw_in_sid(const struct in6_addr *da, const struct fw_config *cfg)
{
	__u32 len = cfg->sid_len, i;

	if (len > 128)
		return 1;
#pragma unroll
	for (i = 0; i < 4; i++) {
		__u32 bits = len > 32 * i ? len - 32 * i : 0, mask;

		if (bits > 32)
			bits = 32;
		mask = bits ? ~0U << (32 - bits) : 0;
		if ((bpf_ntohl(da->in6_u.u6_addr32[i]) ^ bpf_ntohl(cfg->sid.in6_u.u6_addr32[i])) & mask)
			return 0;
	}
	return 1;
}

/* fw_args_verdict: eval-args. The low args_bits of the active SID (the
 * destination address) select the action in fw_args (seed 000 V.B,
 * sysctl ip6t_seg6_args). Returns 0 for an unknown value.
 */
static __always_inline __u32 fw_args_verdict(const struct in6_addr *da, __u32 bits, __u32 gen)
{
	__u64 lo = ((__u64)bpf_ntohl(da->in6_u.u6_addr32[2]) << 32) | bpf_ntohl(da->in6_u.u6_addr32[3]);
	struct fw_args_key k;
	__u32 *act;

	if (bits < 64)
		lo &= (1ULL << bits) - 1;
	k.args = lo;
	k.gen = gen & 1;
	act = bpf_map_lookup_elem(&fw_args, &k);
	if (!act || *act == FW_ACT_EVAL_ARGS || *act == 0)
		return 0;
	return *act;
}

#endif /* SRCHAIN_FW_ACTIONS_H */
