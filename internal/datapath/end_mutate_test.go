package datapath

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/testutil"
)

// TestEndMutations runs randomly corrupted SRv6 packets (seeded, so
// reproducible) through the tc program and requires it to agree with the
// codec's reference End (srv6.MutateEnd) on every one: same drop reason,
// or the same rewritten bytes. Known, documented model differences are
// skipped (see docs/datapath.md).
func TestEndMutations(t *testing.T) {
	env := newTestEnv(t)
	base := [][]byte{
		srv6Pkt(t, sidEnd, 64, srhFor(sidEnd, routed, routed2)),
		srv6Pkt(t, sidEnd, 64, withSRH(srhFor(sidEnd, routed, routed2), func(s *srv6.SRH) {
			s.TLVs = []srv6.TLV{{Type: 0x80, Value: []byte{1, 2, 3, 4}}, {Type: srv6.TLVPad1}, {Type: srv6.TLVPadN, Value: []byte{0}}}
		})),
		withHBH(srv6Pkt(t, sidEnd, 3, srhFor(sidEnd, routed))),
	}
	rng := rand.New(rand.NewPCG(8986, 8754))
	const iterations = 4000
	checked, skipped := 0, 0
	outcomes := map[string]int{}
	err := env.ns.Do(func() error {
		for i := 0; i < iterations; i++ {
			pkt := append([]byte(nil), base[rng.IntN(len(base))]...)
			// Corrupt 1-3 bytes after the destination address (the DA
			// stays the SID, so the program must take the packet).
			for n := 1 + rng.IntN(3); n > 0; n-- {
				off := 40 + rng.IntN(len(pkt)-40)
				if rng.IntN(4) == 0 {
					off = 4 + rng.IntN(4) // payload length, next header, hop limit
				}
				pkt[off] = byte(rng.Uint32())
			}
			if rng.IntN(8) == 0 {
				pkt = pkt[:40+rng.IntN(len(pkt)-40)]
			}
			ref, hlStack, refErr := mutateEndHL(pkt)
			if skipModelDifference(pkt, refErr) {
				skipped++
				continue
			}
			frame := ether(pkt)
			passBefore, err := env.end.PassCounts()
			if err != nil {
				return err
			}
			before, err := bpfrt.ReadDropCounts(env.end.objs.DropCounters)
			if err != nil {
				return err
			}
			out := make([]byte, len(frame)+64)
			opts := &ebpf.RunOptions{Data: frame, DataOut: out, Context: testutil.SKB{IngressIfindex: uint32(env.in), Ifindex: uint32(env.in)}}
			ret, err := env.end.Program().Run(opts)
			if err != nil {
				return err
			}
			after, err := bpfrt.ReadDropCounts(env.end.objs.DropCounters)
			if err != nil {
				return err
			}
			var reason drop.Reason
			for r := range after {
				if after[r] != before[r] {
					reason = drop.Reason(r)
				}
			}
			passAfter, err := env.end.PassCounts()
			if err != nil {
				return err
			}
			if pass := movedPass(passBefore, passAfter); pass != "" {
				// Handed untouched to the kernel's own End: its result
				// is the kernel's (test/e2e/end_diff_test.go).
				if ret != tcActOK || reason != drop.None || !bytes.Equal(opts.DataOut[:len(frame)], frame) {
					t.Errorf("case %d: passed (%s) but verdict %d reason %s or bytes changed\npkt %x", i, pass, ret, reason, pkt)
				}
				checked++
				outcomes["pass/"+pass]++
				continue
			}
			if errors.Is(refErr, srv6.ErrBadTLV) && kernelTLVsTile(pkt) && pkt[7] > 1 {
				// The kernel's TLV reading accepts it: End as the
				// kernel does it (the program follows the kernel).
				if off := rawSRHOff(pkt); off > 0 && pkt[off+3] > 0 {
					sl := int(pkt[off+3]) - 1
					ref, refErr = append([]byte(nil), pkt...), nil
					ref[off+srv6.SRHOffSegmentsLeft]--
					copy(ref[24:40], pkt[off+8+16*sl:off+24+16*sl])
					ref[7]--
				}
			}
			if refErr != nil {
				want := srv6.Reason(refErr)
				if want == drop.SRHTooManySegs && reason == drop.SRHBadLen {
					// The kernel's order (seg6_validate_srh): the
					// header length is checked first.
					want = drop.SRHBadLen
				}
				if ret != tcActShot || reason != want {
					t.Errorf("case %d: program verdict %d reason %s, model %s (%v)\npkt %x", i, ret, reason, want, refErr, pkt)
				}
			} else {
				var want []byte
				switch {
				case hlStack && ret == tcActOK:
					// Hop limit <= 1: rewritten, hop limit left
					// to ip6_forward (Time Exceeded).
					want = ether(ref)
				case hlStack:
					t.Errorf("case %d: verdict %d reason %s, want TC_ACT_OK (hop limit %d)\npkt %x", i, ret, reason, pkt[7], pkt)
					continue
				case ret == tcActRedirect:
					want = srv6.Ether(nhMAC, env.outMAC, srv6.EtherTypeIPv6, ref)
				case ret == tcActOK:
					ref[7]++
					want = ether(ref)
				case ret == tcActShot && reason == drop.TLVBad && !kernelTLVsTile(pkt):
					// The model reads Pad1 as one byte (RFC 8754),
					// the kernel as type + length; the program
					// follows the kernel, which drops.
					checked++
					outcomes["tlv-bad (kernel reading)"]++
					continue
				default:
					t.Errorf("case %d: verdict %d reason %s, model forwards\npkt %x", i, ret, reason, pkt)
					continue
				}
				if !bytes.Equal(opts.DataOut, want) {
					t.Errorf("case %d: bytes differ\npkt  %x\n got %x\nwant %x", i, pkt, opts.DataOut, want)
				}
			}
			checked++
			if refErr != nil {
				outcomes[reason.String()]++
			} else {
				outcomes[map[uint32]string{tcActRedirect: "redirect", tcActOK: "stack"}[ret]]++
			}
			if t.Failed() && checked > 20 {
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d mutated packets agreed with srv6.MutateEnd, %d skipped (documented differences); outcomes %v", checked, skipped, outcomes)
}

// kernelTLVsTile reports whether the TLV area of pkt's SRH tiles when
// read as the kernel's seg6_validate_srh reads it (every TLV, type 0
// included, is type + length + value).
func kernelTLVsTile(pkt []byte) bool {
	off := rawSRHOff(pkt)
	if off == 0 {
		return true
	}
	end := off + (int(pkt[off+1])+1)*8
	i := off + 8 + (int(pkt[off+4])+1)*16
	if i > end || end > len(pkt) {
		return true
	}
	for i < end {
		if i+2 > end || i+2 > len(pkt) {
			return false
		}
		i += 2 + int(pkt[i+1])
	}
	return i == end
}

// rawSRHOff is the offset of the routing header behind IPv6 and any
// Hop-by-Hop / Destination Options headers, 0 when there is none whole.
func rawSRHOff(pkt []byte) int {
	if len(pkt) < 40 {
		return 0
	}
	nh, off := pkt[6], 40
	for nh == srv6.ProtoHopByHop || nh == srv6.ProtoDestOpts {
		if off+2 > len(pkt) {
			return 0
		}
		nh, off = pkt[off], off+(int(pkt[off+1])+1)*8
	}
	if nh != srv6.ProtoRouting || off+8 > len(pkt) || off+(int(pkt[off+1])+1)*8 > len(pkt) {
		return 0
	}
	return off
}

// movedPass names the pass reason whose counter moved ("" none).
func movedPass(before, after map[string]uint64) string {
	for r, v := range after {
		if v != before[r] {
			return r
		}
	}
	return ""
}

// mutateEndHL is srv6.MutateEnd for the datapath's hop limit handling:
// a packet the model rejects only for its hop limit (<= 1) is rewritten
// anyway and handed to the stack (toStack), with the hop limit unchanged.
func mutateEndHL(pkt []byte) (ref []byte, toStack bool, err error) {
	ref, err = srv6.MutateEnd(pkt)
	if !errors.Is(err, srv6.ErrHopLimit) {
		return ref, false, err
	}
	hl := append([]byte(nil), pkt...)
	hl[7] = 64
	ref, err = srv6.MutateEnd(hl)
	if err != nil {
		return nil, false, err
	}
	ref[7] = pkt[7]
	return ref, true, nil
}

// skipModelDifference reports packets where the program deliberately
// differs from srv6.MutateEnd: SL = last entry + 1 (legal per RFC 8986
// S06, rejected by the model), H-flagged HMAC TLVs (kernel-compatible
// drop), jumbograms (payload length 0) and trailing bytes (trimmed).
func skipModelDifference(pkt []byte, refErr error) bool {
	if len(pkt) >= 6 && pkt[4] == 0 && pkt[5] == 0 {
		return true
	}
	if len(pkt) >= 6 && 40+int(pkt[4])<<8+int(pkt[5]) < len(pkt) {
		return true
	}
	s, off, err := srv6.FindSRH(pkt)
	if err == nil && s.Flags&0x08 != 0 {
		return true
	}
	if errors.Is(refErr, srv6.ErrSLOverLast) && off > 0 && off+5 <= len(pkt) && int(pkt[off+3]) == int(pkt[off+4])+1 {
		return true
	}
	return false
}
