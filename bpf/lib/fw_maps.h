/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* SERA firewall (seed 000), part 1 of 5: constants, table layouts and
 * maps. The tables are built by internal/firewall (Compile + Load), whose
 * Go types mirror the structs here.
 *
 * The firewall headers, by role (katran/cilium style):
 *   fw_maps.h       ABI with internal/firewall: ids, structs, maps
 *   fw_extract.h    the packet as the rules see it (struct fw_view)
 *   fw_classify.h   bit-vector classification
 *   fw_actions.h    verdicts that rewrite the packet (SEG6 targets),
 *                   SID scope, eval-args
 *   fw_ratelimit.h  token bucket of the ICMPv6 errors
 *
 * Classification is bpf-iptables' linear bit-vector search: every field
 * value maps (LPM trie for addresses and interfaces, arrays for the small
 * integer domains) to a bitmap id; bitmap id -> one bit per rule. The
 * packet's rule is the first set bit of the AND of its fields' bitmaps.
 * Each bitmap carries a summary (bit w set iff word w is non-zero), so the
 * search first ANDs the summaries and then visits only candidate words:
 * the cost is bounded by FW_MAX_WORDS, not by the number of rules, and for
 * typical rule sets it is a handful of words whatever the rule count.
 */
#ifndef SRCHAIN_FW_MAPS_H
#define SRCHAIN_FW_MAPS_H

#include "common.h"

#define FW_MAX_RULES 10240
#define FW_MAX_WORDS (FW_MAX_RULES / 64)
#define FW_SUM_WORDS 3 /* ceil(FW_MAX_WORDS / 64) */

/* Field ids: internal/firewall Field. The first FW_NADDR are looked up in
 * fw_lpm, the others in fw_idx.
 */
enum {
	FW_F_SRC, FW_F_DST, FW_F_INNER_SRC, FW_F_INNER_DST, FW_F_PSID, FW_F_NSID,
	FW_F_LSID, FW_F_IIF, FW_F_OIF, FW_F_ASID,
	FW_F_PROTO, FW_F_SPORT, FW_F_DPORT, FW_F_SRH, FW_F_NEXTHDR, FW_F_HDRLEN,
	FW_F_SEGS, FW_F_LAST, FW_F_TAG,
	FW_F_FAM,  /* 4 or 6: the family of the packet -s/-d are read from */
	FW_F_IFAM, /* 4 or 6: the family of the inner (original) packet */
	FW_NFIELDS,
};
#define FW_NADDR (FW_F_ASID + 1)
#define FW_NINT (FW_NFIELDS - FW_NADDR)

/* fw_idx layout: for each integer field, Domain()+1 slots (the last is
 * "absent"), in field order. Mirrored by firewall.idxBase.
 */
#define FW_D8 257
#define FW_D16 65537
#define FW_IDX_PROTO 0
#define FW_IDX_SPORT (FW_IDX_PROTO + FW_D8)
#define FW_IDX_DPORT (FW_IDX_SPORT + FW_D16)
#define FW_IDX_SRH (FW_IDX_DPORT + FW_D16)
#define FW_IDX_NEXTHDR (FW_IDX_SRH + 3)
#define FW_IDX_HDRLEN (FW_IDX_NEXTHDR + FW_D8)
#define FW_IDX_SEGS (FW_IDX_HDRLEN + FW_D8)
#define FW_IDX_LAST (FW_IDX_SEGS + FW_D8)
#define FW_IDX_TAG (FW_IDX_LAST + FW_D8)
#define FW_IDX_FAM (FW_IDX_TAG + FW_D16)
#define FW_IDX_IFAM (FW_IDX_FAM + FW_D8)
#define FW_IDX_SIZE (FW_IDX_IFAM + FW_D8)

/* Verdicts: internal/firewall Verdict. */
#define FW_ACT_ACCEPT 1
#define FW_ACT_DROP 2
#define FW_ACT_REJECT 3
#define FW_ACT_GO_NEXT 4
#define FW_ACT_SKIP_NEXT 5
#define FW_ACT_GO_LAST 6
#define FW_ACT_EVAL_ARGS 7

#define FW_MODE_BASIC 0
#define FW_MODE_ADVANCED 1

struct fw_bitmap {
	__u64 sum[FW_SUM_WORDS];
	__u64 w[FW_MAX_WORDS];
};

struct fw_lpm_key {
	__u32 prefixlen; /* 8 (field byte) + address bits */
	__u8 field;
	__u8 addr[16];
} __attribute__((packed));

/* Per prefix field: bitmap of a present value no prefix matched, of an
 * absent value.
 */
struct fw_fdef {
	__u32 nomatch;
	__u32 absent;
};

/* Double buffering: every table holds two generations (fw_cfg slots 0
 * and 1, keys offset by the generation); fw_gen says which one packets
 * use. The loader fills the idle generation and flips fw_gen (one word):
 * a packet sees one whole rule set, old or new, never a mix.
 */
#define FW_GENS 2
#define FW_LPM_GEN 16 /* fw_lpm field byte: field + 16 * generation */
#define FW_RULE_SLOTS (FW_MAX_RULES + 1)

struct fw_config {
	__u32 gen;       /* this slot's generation (0 or 1): key offsets */
	__u32 mode;      /* FW_MODE_* */
	__u32 used;      /* bit f: some rule tests field f */
	__u32 nrules;    /* rules loaded; slot nrules of fw_rules is the policy */
	__u32 args_bits; /* eval-args: low bits of the active SID (0..64) */
	__u32 nused;     /* number of used fields, listed in fields[] */
	__u8 fields[24]; /* the used fields' ids, in order (FW_NFIELDS used) */
	/* SR actions apply only to packets addressed to the NF's SID prefix
	 * (sid/sid_len; sid_len 255: any destination). Others are accepted.
	 */
	struct in6_addr sid;
	__u32 sid_len;
	__u32 icmp_rate; /* Parameter Problems per second and CPU (burst the same) */
	__u8 hash[32];   /* SHA-256 of the rule set and settings (Config.Hash) */
};

/* eval-args key: ARGS value of one generation. */
struct fw_args_key {
	__u64 args;
	__u64 gen;
};

struct fw_rule {
	__u32 verdict;
};

struct fw_count {
	__u64 packets;
	__u64 bytes;
};

/* max_entries of the table maps are set by the loader to what the rule
 * set needs; the values here are the defaults of an empty set.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_bitmap);
} fw_bitmaps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fw_lpm_key);
	__type(value, __u32);
} fw_lpm SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_GENS * FW_IDX_SIZE);
	__type(key, __u32);
	__type(value, __u32);
} fw_idx SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_GENS * FW_NADDR);
	__type(key, __u32);
	__type(value, struct fw_fdef);
} fw_fdef SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_GENS);
	__type(key, __u32);
	__type(value, struct fw_config);
} fw_cfg SEC(".maps");

/* The generation packets use (0 or 1). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} fw_gen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_GENS * FW_RULE_SLOTS);
	__type(key, __u32);
	__type(value, struct fw_rule);
} fw_rules SEC(".maps");

/* Per generation: a new rule set starts from zero. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_GENS * FW_RULE_SLOTS);
	__type(key, __u32);
	__type(value, struct fw_count);
} fw_rule_counters SEC(".maps");

/* eval-args: ARGS value -> FW_ACT_* (never EVAL_ARGS). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FW_GENS * 256);
	__type(key, struct fw_args_key);
	__type(value, __u32);
} fw_args SEC(".maps");

/* The packet as the rules see it (internal/firewall View). */
struct fw_view {
	struct in6_addr addr[FW_NADDR];
	__u8 present[FW_NADDR];
	__u32 val[FW_NINT]; /* absent: the field's domain size */
	__u32 uids[FW_NFIELDS]; /* classify: bitmap id of each field */
	__u32 tmp;              /* ipv6_walk scratch word (ipv6_forget) */
};

/* Per-CPU scratch for the view: it does not fit the 512-byte stack next
 * to the classifier's state.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_view);
} fw_scratch SEC(".maps");

#endif /* SRCHAIN_FW_MAPS_H */
