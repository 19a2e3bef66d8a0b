/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Arithmetic modulo the Mersenne prime p = 2^61 - 1 for ordered proof of
 * transit (docs/opot.md "The prime and the multiply"). eBPF has a 64-bit
 * multiply that keeps only the low half and no 128-bit type, so the
 * product is built from 32-bit limbs and folded with 2^61 = 1 (mod p).
 * The C twin of MulMod61/AddMod61/Reduce61 in internal/opot/field.go
 * (line for line but for addmod61's branch-free select); the test
 * program bpf/test/opot.c compares them.
 */
#ifndef SRCHAIN_OPOT_MATH_H
#define SRCHAIN_OPOT_MATH_H

#include "common.h"

#define OPOT_P61 ((1ULL << 61) - 1)

/* mulmod61 returns a*b mod p for a, b < 2^61. With a = a1 2^32 + a0 and
 * b = b1 2^32 + b0: a*b = hi 2^64 + mid 2^32 + lo, and 2^64 = 8,
 * mid 2^32 = (mid >> 29) + (mid mod 2^29) 2^32, lo = (lo >> 61) +
 * (lo mod 2^61) modulo p. The five terms sum below 2^63; one fold brings
 * the sum below 2^61 + 4 and one conditional subtract makes it canonical.
 */
static __always_inline __u64 mulmod61(__u64 a, __u64 b)
{
	__u64 a0 = a & 0xffffffff, a1 = a >> 32; /* a1 < 2^29 */
	__u64 b0 = b & 0xffffffff, b1 = b >> 32;
	__u64 lo = a0 * b0;                      /* < 2^64 */
	__u64 mid = a0 * b1 + a1 * b0;           /* < 2^62 */
	__u64 hi = a1 * b1;                      /* < 2^58 */
	__u64 s = (hi << 3) + (mid >> 29) + ((mid & ((1ULL << 29) - 1)) << 32) +
		  (lo >> 61) + (lo & OPOT_P61);

	s = (s & OPOT_P61) + (s >> 61);
	if (s >= OPOT_P61)
		s -= OPOT_P61;
	return s;
}

/* addmod61 returns a+b mod p for canonical a, b (< p). Without a
 * branch: a+b is at or above p about half the time on random values, a
 * branch the CPU cannot predict. a+b-p < p < 2^61, so it is negative as
 * a signed number exactly when a+b < p, and its sign bit, spread by an
 * arithmetic shift, selects whether p goes back in. The barrier keeps
 * the compiler from turning the mask back into a branch (BPF has no
 * conditional move).
 */
static __always_inline __u64 addmod61(__u64 a, __u64 b)
{
	__u64 s = a + b - OPOT_P61, m;

	m = (__u64)((__s64)s >> 63);
	asm volatile("" : "+r"(m));
	return s + (m & OPOT_P61);
}

/* reduce61 returns x mod p for any 64-bit x. */
static __always_inline __u64 reduce61(__u64 x)
{
	x = (x & OPOT_P61) + (x >> 61);
	if (x >= OPOT_P61)
		x -= OPOT_P61;
	return x;
}

#endif /* SRCHAIN_OPOT_MATH_H */
