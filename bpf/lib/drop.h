/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Named drop reasons shared by every srchain datapath program.
 *
 * Mirrored by internal/drop (Go); a unit test checks that both lists agree,
 * so add a reason here and in internal/drop/drop.go together, and only ever
 * append (the numbers are ABI: they index pinned per-CPU counter maps).
 * A reason no program emits any more is renamed DROP_RESERVED_<n>, never
 * removed; a test (internal/drop) checks every other reason is emitted
 * by some program, or is listed there as awaiting its kind.
 */
#ifndef SRCHAIN_DROP_H
#define SRCHAIN_DROP_H

enum srchain_drop_reason {
	DROP_NONE = 0,            /* not a drop; slot unused */
	DROP_PKT_TRUNCATED,       /* L2/L3/L4 header shorter than its fixed part */
	DROP_NO_SRH,              /* packet to a SID that needs an SRH has none */
	DROP_SRH_TRUNCATED,       /* packet ends before hdr ext len says the SRH does */
	DROP_SRH_BAD_TYPE,        /* routing header type != 4 (RFC 8754 2) */
	DROP_SRH_BAD_LEN,         /* hdr ext len does not hold last entry + 1 segments */
	DROP_SRH_SL_OVER_LAST,    /* segments left > last entry (RFC 8754 4.3.1.1) */
	DROP_SRH_TOO_MANY_SEGS,   /* last entry >= SRCHAIN_MAX_SEGS */
	DROP_SRH_SL_ZERO,         /* SL = 0 where the behavior needs SL > 0 (RFC 8986 4.1) */
	DROP_HOP_LIMIT,           /* hop limit exhausted: End's Go model (End hands it to the stack); SR proxies End.AD/AD.flow/AM on the way in (ICMPv6 Time Exceeded sent, lib/proxy.h) */
	DROP_RESERVED_10,         /* was fib-fail: a FIB miss goes to the stack (lib/fib.h) */
	DROP_TLV_BAD,             /* malformed SRH TLV */
	DROP_FW_RULE,             /* firewall rule verdict DROP/REJECT */
	DROP_FW_PRECOND,          /* SR action precondition failed (e.g. skip-next with SL < 2) */
	DROP_FW_ARGS_UNKNOWN,     /* eval-args: ARGS value with no action */
	DROP_PROXY_NO_CACHE,      /* dynamic proxy: no cached header stack for IFACE-IN yet (lib/proxy.h) */
	DROP_OPOT_VERIFY,         /* OPoT verification failed at egress (OPoT kind, to come) */
	DROP_OPOT_REPLAY,         /* OPoT nonce seen before */
	DROP_OPOT_NO_TLV,         /* OPoT TLV missing or malformed */
	DROP_ADJUST_ROOM,         /* bpf_skb_adjust_room / store failed */
	DROP_RESERVED_20,         /* was mtu: too big goes to the stack (FIB_SLOT_MTU) */
	DROP_UNSUPPORTED,         /* valid packet the behavior does not handle */
	DROP_OPOT_NO_PROFILE,     /* OPoT TLV names a slot with no profile here (lib/opot.h) */
	DROP_OPOT_STALE,          /* OPoT sequence number left of the anti-replay window, or 0 */
	DROP_OPOT_SEQ_EXHAUSTED,  /* OPoT headend used every sequence number of the slot */
	DROP_ANF_NO_SLOT,         /* End.AN.NF restore: packet without srchain's mark bits (lib/anf.h) */
	DROP_ANF_STALE,           /* End.AN.NF restore: stash slot empty, reused or older than the age limit */
	DROP_ANF_TOO_BIG,         /* End.AN.NF restore: re-encapsulated packet exceeds the next hop's MTU */
	DROP_ANF_NO_ROUTE,        /* End.AN.NF restore: no route to the next SID */
	DROP_PROXY_WRONG_INNER,   /* SR proxy: next header after the outer headers is not the SID's inner type, or IFACE-IN got the other family (lib/proxy.h) */
	DROP_PROXY_TTL,           /* SR proxy: inner hop limit / TTL <= 1 on the way back from the NF (ICMPv6 Time Exceeded sent for IPv6) */
	DROP_PROXY_FLOW_MISS,     /* End.AD.flow: no live cache entry for the returning flow (none, idle or evicted) */
	DROP_PROXY_CACHE_FULL,    /* End.AD.flow: the flow cache refused the new entry */
	DROP_PROXY_HDR_TOO_BIG,   /* End.AD/AD.flow: outer header stack longer than PROXY_HDR_MAX */
	DROP_PROXY_OPOT_MISS,     /* End.AD/AD.flow with OPoT: a packet from the NF whose OPoT TLV the proxy did not keep */
	DROP_PROXY_L2_NO_ROUTE,   /* End.AS/AD, Ethernet inner: the restored destination has no resolved route (the stack cannot take the frame) */
	DROP_FLOW_REPORT_FULL,    /* ingress, pool chain: a new flow's first packet found the report ring full (the flow-setup loop is behind or not running) */
	DROP_OPOT_GSO,            /* OPoT: a GSO packet would carry one proof for all its segments (headend, SR proxy from its NF; docs/opot.md "GSO") */
	DROP_OPOT_BYPASS,         /* OPoT: a packet to a chain's egress SID (LOC+FUNCT, any ARGS) that is not the chain's last segment with its proof: no SRH, SL > 0, segment[0] or DA not the SID (lib/opot_egress.h) */
	DROP_ING_TOO_BIG,         /* eBPF ingress: a packet too big for its chain's path MTU, answered with Packet Too Big / fragmentation needed (RFC 4443 3, RFC 1191) unless rate-limited */
	DROP_MAX,
};

#endif /* SRCHAIN_DROP_H */
