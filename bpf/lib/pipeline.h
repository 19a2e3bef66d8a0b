/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The per-node XDP pipeline (issue 13; docs/pipeline.md).
 *
 * XDP runs one program per interface, so srchain attaches exactly one:
 * the dispatcher (bpf/pipeline.c). It tail-calls the node's stages in a
 * fixed order, the same order their tc twins have at tcx ingress:
 *
 *   firewall -> netfilter -> opot -> proxy -> end -> ingress
 *
 * A stage that is done with a packet returns its verdict (drop, tx,
 * redirect, or pass to the stack and its tc programs); a stage that has
 * nothing to do with it (not its SID, accepted by the rules) hands it to
 * the next stage present (pipe_next). An empty slot is skipped; after
 * the last stage the packet goes to the stack (XDP_PASS).
 *
 * Why tail calls (not freplace or a libxdp multi-dispatcher): a stage
 * must be able to say "go on" or "I am done", and only the dispatcher's
 * order may decide who comes next. With tail calls each stage program
 * keeps its own type, maps and verifier budget (the firewall and the End
 * are verified separately: 32k and 4k instructions would not fit one
 * program), the JIT turns constant-index tail calls into direct jumps,
 * and the whole order lives in a prog array the loader rewrites.
 *
 * Atomic changes. There are two prog arrays (generations); a packet
 * runs entirely in the one pipe_config named when the dispatcher saw it
 * (the dispatcher writes it into the packet's XDP metadata, struct
 * pipe_meta). The loader fills the idle one with the new pipeline,
 * flips pipe_config.gen with one map write, then empties the old one
 * from the last stage to the first: a packet still in the old one meets a
 * missing later stage (it goes to the stack and the tc programs, which
 * run every stage too) but never a later stage without an earlier one.
 * So no packet ever runs an End without the firewall in front of it.
 *
 * Metadata also tells the tc twins what already ran: a packet the XDP
 * firewall accepted carries PIPE_DONE_FW, and the tc firewall lets it by
 * without classifying it again (it would count it twice and apply an SR
 * action twice); one the XDP OPoT stage updated or verified carries
 * PIPE_DONE_OPOT, and the tc OPoT stages leave it alone (a second
 * update would spoil the proof, a second check would call it a replay). The mark carries the node's cookie (pipe_ret says why
 * that is enough when a frame leaves with it).
 */
#ifndef SRCHAIN_PIPELINE_H
#define SRCHAIN_PIPELINE_H

#include "common.h"

/* Stage slots, in pipeline order. Mirrored by internal/pipeline.Stage. */
enum pipe_stage {
	PIPE_FIREWALL = 0,
	PIPE_NETFILTER = 1,
	PIPE_OPOT = 2, /* before the proxy: End.AM's transit is done on the packet before the proxy rewrites it */
	PIPE_PROXY = 3,
	PIPE_END = 4,
	PIPE_INGRESS = 5,
	PIPE_STAGES = 8, /* slots per generation; ABI of the pinned maps */
};

/* What a stage did with a packet: pipe_stats[stage * PIPE_NOUT + out].
 * Mirrored by internal/pipeline. The dispatcher counts under stage
 * PIPE_DISPATCH (= PIPE_STAGES).
 */
enum pipe_outcome {
	PIPE_OUT_NEXT = 0, /* handed to the next stage (not counted for the dispatcher:
			    * what entered is the first stage's total) */
	PIPE_OUT_PASS,     /* to the stack (tc programs, kernel) */
	PIPE_OUT_DROP,
	PIPE_OUT_TX,
	PIPE_OUT_REDIRECT,
	PIPE_OUT_ABORTED, /* dispatcher: no metadata room, all to tc */
	PIPE_NOUT = 8,
};

#define PIPE_DISPATCH PIPE_STAGES

#define PIPE_DONE_FW 0x1
#define PIPE_DONE_OPOT 0x2 /* the XDP OPoT stage updated or verified the proof */

/* pipe_meta sits right in front of the packet (data - sizeof). cookie is
 * the node's (pipe_config): XDP metadata can survive forwarding inside the
 * kernel, and another node's mark must never make this node's tc
 * firewall skip a packet.
 */
struct pipe_meta {
	__u32 cookie;
	__u16 gen;
	__u16 done;
};

/* pipe_config: the active generation and the node's cookie (random, never
 * 0; 0 means the object is not part of a node's pipeline).
 */
struct pipe_cfg {
	__u32 gen;
	__u32 cookie;
};

/* One prog array per generation, indexed by stage: every tail call has
 * a constant key, which the JIT turns into a direct jump (an index
 * computed from the generation would be an indirect one, a retpoline).
 */
struct pipe_progs {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, PIPE_STAGES);
	__type(key, __u32);
	__type(value, __u32);
};

struct pipe_progs pipe_progs0 SEC(".maps");
struct pipe_progs pipe_progs1 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pipe_cfg);
} pipe_config SEC(".maps");

static __always_inline struct pipe_cfg *pipe_conf(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&pipe_config, &zero);
}

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, (PIPE_STAGES + 1) * PIPE_NOUT);
	__type(key, __u32);
	__type(value, __u64);
} pipe_stats SEC(".maps");

static __always_inline void pipe_count(__u32 stage, __u32 out)
{
	__u32 key = stage * PIPE_NOUT + out;
	__u64 *v = bpf_map_lookup_elem(&pipe_stats, &key);

	if (v)
		*v += 1;
}

/* pipe_meta_of returns the packet's pipeline metadata, or NULL when the
 * packet did not come through the dispatcher (a stage attached on its
 * own, as the datapath tests do). In XDP the metadata is always this
 * node's: the dispatcher writes it afresh for every packet, so no cookie
 * check (and no map lookup) is needed here, only at tc (pipe_tc_done).
 */
static __always_inline struct pipe_meta *pipe_meta_of(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	struct pipe_meta *m = (void *)(long)ctx->data_meta;

	if ((void *)(m + 1) > data)
		return NULL;
	return m;
}

/* pipe_from tail-calls the first stage at or after first of generation
 * gen; it returns only when no later stage is present.
 */
static __always_inline void pipe_from(struct xdp_md *ctx, __u32 gen, const __u32 first)
{
	if (gen & 1) {
#pragma unroll
		for (__u32 i = 0; i < PIPE_STAGES; i++) {
			if (i >= first)
				bpf_tail_call(ctx, &pipe_progs1, i);
		}
	} else {
#pragma unroll
		for (__u32 i = 0; i < PIPE_STAGES; i++) {
			if (i >= first)
				bpf_tail_call(ctx, &pipe_progs0, i);
		}
	}
}

/* pipe_next: stage has nothing to do with the packet; the next stage
 * present takes it (or the stack, after the last one).
 */
static __always_inline int pipe_next(struct xdp_md *ctx, const __u32 stage)
{
	struct pipe_meta *m = pipe_meta_of(ctx);

	pipe_count(stage, PIPE_OUT_NEXT);
	if (m)
		pipe_from(ctx, m->gen, stage + 1);
	return XDP_PASS;
}

/* pipe_mark records in the metadata that stage bit done ran (for the tc
 * twins); no metadata: nothing to record.
 */
static __always_inline void pipe_mark(struct xdp_md *ctx, __u16 done)
{
	struct pipe_meta *m = pipe_meta_of(ctx);

	if (m)
		m->done |= done;
}

/* pipe_done reports whether an earlier stage of this packet's run
 * recorded done (pipe_mark). The End and the SR proxy ask it before an
 * OPoT transit: when the OPoT driver marks a chain's entry for them
 * (OPOT_CHAIN_IN_END) while a packet is between the OPoT stage, which
 * read the entry unmarked, and them, the stage has updated that packet's
 * proof already (docs/opot.md "Changing sides").
 */
static __always_inline int pipe_done(struct xdp_md *ctx, __u16 done)
{
	struct pipe_meta *m = pipe_meta_of(ctx);

	return m && (m->done & done);
}

/* pipe_ret counts the stage's final verdict and returns it. The
 * metadata may leave with a redirected frame: it is harmless there, the
 * next XDP hop's dispatcher writes its own, and a tc firewall only
 * trusts a mark carrying its own node's cookie, which only this node's
 * dispatcher writes (every interface of the node runs it).
 */
static __always_inline int pipe_ret(const __u32 stage, int verdict)
{
	__u32 out;

	switch (verdict) {
	case XDP_PASS:
		out = PIPE_OUT_PASS;
		break;
	case XDP_DROP:
		out = PIPE_OUT_DROP;
		break;
	case XDP_TX:
		out = PIPE_OUT_TX;
		break;
	case XDP_REDIRECT:
		out = PIPE_OUT_REDIRECT;
		break;
	default:
		out = PIPE_OUT_ABORTED;
	}
	pipe_count(stage, out);
	return verdict;
}

/* pipe_tc_done reports whether a packet at tc carries the XDP pipeline's
 * mark done (the XDP twin of this tc program already handled it). A
 * global function, verified once on its own: inlined, its metadata
 * pointer costs the firewall's verification a third more states.
 */
__attribute__((noinline)) int pipe_tc_done(struct __sk_buff *skb, __u16 done)
{
	void *data;
	struct pipe_meta *m;
	struct pipe_cfg *cfg;

	if (!skb)
		return 0;
	data = (void *)(long)skb->data;
	m = (void *)(long)skb->data_meta;
	if ((void *)(m + 1) > data)
		return 0;
	cfg = pipe_conf();
	if (!cfg || !cfg->cookie || m->cookie != cfg->cookie)
		return 0;
	return (m->done & done) != 0;
}

#endif /* SRCHAIN_PIPELINE_H */
