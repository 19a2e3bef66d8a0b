/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Test harness of lib/opot.h: headend, transit and verifier run from tc
 * and XDP under BPF_PROG_TEST_RUN (internal/opot/bpfprog), their output
 * compared with the Go model in internal/opot. The operation and the
 * chain come from a one-entry config map; OPOT_TEST_MULMOD and
 * OPOT_TEST_ADDMOD are map-driven (a, b in, a*b or a+b mod p out). Not
 * attached anywhere; the End and decap programs get the same calls when
 * OPoT is wired into them.
 */
#include "common.h"
#include "counters.h"
#include "ctx.h"
#include "srh.h"
#include "opot.h"

#define OPOT_TEST_HEADEND 1
#define OPOT_TEST_TRANSIT 2
#define OPOT_TEST_VERIFY 3
#define OPOT_TEST_MULMOD 4
#define OPOT_TEST_ADDMOD 5

struct opot_test_cfg {
	__u32 op;      /* OPOT_TEST_* */
	__u32 profile;
	__u32 slot;    /* headend: the active slot */
	__u32 pad;
	__u64 a, b;    /* mulmod, addmod inputs */
	__u64 res;     /* their result; verify: the accepted sequence number */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct opot_test_cfg);
} opot_test_cfgs SEC(".maps");

static __always_inline __u32 opot_test(struct pctx *c, const int kind)
{
	struct opot_test_cfg *cfg;
	struct srh_info si = {};
	__u32 zero = 0, off = 0, r;
	__u64 seq = 0;

	cfg = bpf_map_lookup_elem(&opot_test_cfgs, &zero);
	if (!cfg)
		return DROP_UNSUPPORTED;
	if (cfg->op == OPOT_TEST_MULMOD) {
		cfg->res = mulmod61(cfg->a, cfg->b);
		return DROP_NONE;
	}
	if (cfg->op == OPOT_TEST_ADDMOD) {
		cfg->res = addmod61(cfg->a, cfg->b);
		return DROP_NONE;
	}
	r = srh_locate(&c->p, &si);
	if (r)
		return r;
	r = srh_validate(&c->p, &si);
	if (r)
		return r;
	r = opot_find(c, kind, &si, &off);
	if (r)
		return r;
	switch (cfg->op) {
	case OPOT_TEST_HEADEND:
		return opot_headend(&c->p, off, cfg->profile, cfg->slot);
	case OPOT_TEST_TRANSIT:
		return opot_transit(&c->p, off, cfg->profile);
	case OPOT_TEST_VERIFY:
		r = opot_verify(&c->p, off, cfg->profile, &seq);
		cfg->res = seq;
		return r;
	}
	return DROP_UNSUPPORTED;
}

SEC("tc")
int srchain_opot_test(struct __sk_buff *skb)
{
	struct pctx c = { .ctx = skb, .p = { .l3off = sizeof(struct ethhdr) } };
	__u32 r;

	ctx_reload(&c, CTX_TC);
	r = opot_test(&c, CTX_TC);
	if (r) {
		count_drop(r);
		return TC_ACT_SHOT;
	}
	return TC_ACT_OK;
}

SEC("xdp")
int srchain_opot_test_xdp(struct xdp_md *ctx)
{
	struct pctx c = { .ctx = ctx, .p = { .l3off = sizeof(struct ethhdr) } };
	__u32 r;

	ctx_reload(&c, CTX_XDP);
	r = opot_test(&c, CTX_XDP);
	if (r) {
		count_drop(r);
		return XDP_DROP;
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
