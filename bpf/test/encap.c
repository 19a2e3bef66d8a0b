/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Test harness of lib/srv6_encap.h: the same helpers run from tc and XDP
 * under BPF_PROG_TEST_RUN (internal/datapath encap_test.go), their output
 * compared with internal/srv6's codec. Not attached anywhere.
 */
#include "common.h"
#include "counters.h"
#include "srv6_encap.h"

#define ENCAP_TEST_ENCAPS 1
#define ENCAP_TEST_DECAP 2

struct encap_test_cfg {
	__u32 op;        /* ENCAP_TEST_* */
	__u32 nsegs;
	__u32 hop_limit;
	__u32 pad;
	struct in6_addr src;
	struct in6_addr travel[SRCHAIN_MAX_SEGS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct encap_test_cfg);
} encap_test_cfgs SEC(".maps");

static __always_inline __u32 encap_test(struct pctx *c, const int kind)
{
	struct encap_test_cfg *cfg;
	__u32 zero = 0;

	cfg = bpf_map_lookup_elem(&encap_test_cfgs, &zero);
	if (!cfg)
		return DROP_UNSUPPORTED;
	if (cfg->op == ENCAP_TEST_ENCAPS)
		return srv6_encaps(c, kind, &cfg->src, cfg->travel, cfg->nsegs, cfg->hop_limit);
	if (cfg->op == ENCAP_TEST_DECAP)
		return srv6_decap(c, kind);
	return DROP_UNSUPPORTED;
}

SEC("tc")
int srchain_encap_test(struct __sk_buff *skb)
{
	struct pctx c = { .ctx = skb, .p = { .l3off = sizeof(struct ethhdr) } };
	__u32 r;

	ctx_reload(&c, CTX_TC);
	r = encap_test(&c, CTX_TC);
	if (r) {
		count_drop(r);
		return TC_ACT_SHOT;
	}
	return TC_ACT_OK;
}

SEC("xdp")
int srchain_encap_test_xdp(struct xdp_md *ctx)
{
	struct pctx c = { .ctx = ctx, .p = { .l3off = sizeof(struct ethhdr) } };
	__u32 r;

	ctx_reload(&c, CTX_XDP);
	r = encap_test(&c, CTX_XDP);
	if (r) {
		count_drop(r);
		return XDP_DROP;
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
