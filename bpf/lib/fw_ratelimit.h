/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* SERA firewall: rate limit of the ICMPv6 errors it sends (RFC 4443
 * 2.4 (f)), a token bucket per CPU.
 */
#ifndef SRCHAIN_FW_RATELIMIT_H
#define SRCHAIN_FW_RATELIMIT_H

#include "common.h"

/* Token bucket of the ICMPv6 errors (RFC 4443 2.4 (f)), per CPU. */
struct fw_bucket {
	__u64 tokens;
	__u64 last; /* ns */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_bucket);
} fw_icmp_bucket SEC(".maps");

/* fw_icmp_allow takes a token from this CPU's bucket: rate per second,
 * burst rate. Returns 0 when the error must not be sent.
 */
static __always_inline int fw_icmp_allow(__u32 rate)
{
	struct fw_bucket *b;
	__u32 zero = 0;
	__u64 now, el, add;

	b = bpf_map_lookup_elem(&fw_icmp_bucket, &zero);
	if (!b)
		return 0;
	now = bpf_ktime_get_ns();
	el = now - b->last;
	if (el >= 1000000000ULL) {
		b->tokens = rate;
		b->last = now;
	} else {
		add = el * rate / 1000000000ULL;
		if (add) {
			b->tokens += add;
			if (b->tokens > rate)
				b->tokens = rate;
			/* Advance by the time the whole tokens took, not
			 * to now: the fraction of a token carries over.
			 */
			b->last += add * 1000000000ULL / rate;
		}
	}
	if (!b->tokens)
		return 0;
	b->tokens -= 1;
	return 1;
}

#endif /* SRCHAIN_FW_RATELIMIT_H */
