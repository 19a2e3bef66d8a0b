/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* srchain's one XDP program per interface: the pipeline dispatcher
 * (lib/pipeline.h explains the pipeline, docs/pipeline.md the order).
 *
 * It gives the packet fresh metadata (whatever an earlier XDP hop left
 * is dropped), records the active generation in it, and tail-calls the
 * first stage present. A driver that cannot make room for metadata gets
 * every packet handed to the stack, where the tc twins of all stages run
 * in the same order: slower, never unfiltered.
 */
#include "common.h"
#include "pipeline.h"

SEC("xdp")
int srchain_pipe_xdp(struct xdp_md *ctx)
{
	struct pipe_meta *m;
	struct pipe_cfg *cfg = pipe_conf();
	__u32 gen;
	long metalen = (long)ctx->data - (long)ctx->data_meta;

	if (!cfg || !cfg->cookie)
		goto abort;
	gen = cfg->gen & 1;
	/* Exactly sizeof(*m) bytes of metadata, whatever was there. */
	if (metalen != sizeof(*m) && bpf_xdp_adjust_meta(ctx, (int)metalen - (int)sizeof(*m)))
		goto abort;
	m = (void *)(long)ctx->data_meta;
	if ((void *)(m + 1) > (void *)(long)ctx->data)
		goto abort;
	m->cookie = cfg->cookie;
	m->gen = gen;
	m->done = 0;
	pipe_from(ctx, gen, 0);
	/* No stage in this generation: the stack. */
	pipe_count(PIPE_DISPATCH, PIPE_OUT_PASS);
	return XDP_PASS;
abort:
	pipe_count(PIPE_DISPATCH, PIPE_OUT_ABORTED);
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
