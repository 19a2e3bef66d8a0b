/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Test harness of lib/csum.h csum_diff16 (the End's CHECKSUM_COMPLETE
 * fix-up after an OPoT transit, lib/end_opot.h) under BPF_PROG_TEST_RUN
 * (internal/datapath csum_test.go): the packet is old (16 bytes), new
 * (16 bytes), odd (1 byte); the program writes the 2-byte result over
 * the first two bytes. Not attached anywhere.
 */
#include "common.h"
#include "csum.h"

SEC("xdp")
int srchain_csum_test(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *b = data;
	__u16 d;

	if (data + 33 > end)
		return XDP_ABORTED;
	d = csum_diff16((const __u64 *)b, (const __u64 *)(b + 16), b[32]);
	__builtin_memcpy(b, &d, sizeof(d));
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
