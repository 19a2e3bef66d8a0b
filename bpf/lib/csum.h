/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Internet checksum helpers (RFC 1071) shared by srchain programs.
 *
 * The one's-complement sum of 32-bit words is byte-order neutral (RFC
 * 1071 2 (B)), so sums are accumulated over network-order words in a
 * __u64 and folded once at the end.
 */
#ifndef SRCHAIN_CSUM_H
#define SRCHAIN_CSUM_H

#include "common.h"

/* csum_fold64 folds a 64-bit sum of 32-bit words to 16 bits (not yet
 * complemented).
 */
static __always_inline __u16 csum_fold64(__u64 sum)
{
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

/* csum_ipv6_pseudo sums the IPv6 pseudo-header of an upper-layer packet
 * of len bytes and next header proto (RFC 8200 8.1).
 */
static __always_inline __u64 csum_ipv6_pseudo(const struct in6_addr *src, const struct in6_addr *dst,
					      __u32 len, __u8 proto)
{
	__u64 sum = 0;
	int i;

	for (i = 0; i < 4; i++)
		sum += dst->in6_u.u6_addr32[i] + (__u64)src->in6_u.u6_addr32[i];
	return sum + bpf_htonl(len) + (__u64)bpf_htonl(proto);
}

/* skb_csum_replace folds the change of size bytes (a multiple of 4 that
 * start at an even offset of the packet, so the sum is position free)
 * from before to after into skb->csum: the CHECKSUM_COMPLETE fix-up after
 * a rewrite in place (a no-op for other checksum states). tc only.
 */
static __always_inline void skb_csum_replace(struct __sk_buff *skb, void *before, void *after,
					     __u32 size)
{
	bpf_csum_update(skb, bpf_csum_diff(before, size, after, size, 0));
}

/* csum_diff16 is what replacing the 16 bytes old with new adds to a
 * one's-complement sum, folded to 16 bits: new's 32-bit words plus the
 * complements of old's (RFC 1624), the bytes as the CPU loads them. A
 * block at an odd offset from where the sum starts adds its sum
 * byte-swapped (RFC 1071 2 (B)): odd says so.
 */
static __always_inline __u16 csum_diff16(const __u64 old[2], const __u64 new[2], int odd)
{
	__u64 sum = 0;
	__u16 d;
	int i;

	for (i = 0; i < 2; i++)
		sum += (new[i] & 0xffffffff) + (new[i] >> 32) + (~old[i] & 0xffffffff) + (~old[i] >> 32);
	d = csum_fold64(sum);
	if (odd)
		d = (__u16)((d << 8) | (d >> 8));
	return d;
}

#endif /* SRCHAIN_CSUM_H */
