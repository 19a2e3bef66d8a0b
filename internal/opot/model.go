package opot

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// RND layout (docs/opot.md "RND layout"). The headend's RND is not 61
// random bits: its high bits carry the sequence number, so the sequence
// number is covered by the proof itself (changing it changes RND, which
// the verifier detects) without trusting an unauthenticated header field:
//
//	bit 63..61  zero (RND < P61)
//	bit 60..17  sequence number, 44 bits, 1 .. MaxSeq
//	bit 16..0   17 bits from the per-packet random source
const (
	SeqBits  = 44
	RandBits = 17
	// MaxSeq is the last sequence number of a profile; then the headend
	// stops (rotate keys long before: at 10 Mpps 2^44 packets last 20
	// days). It is one less than all ones so RND never equals P61.
	MaxSeq = 1<<SeqBits - 2
)

// Errors of the data plane model; each becomes a named drop reason of
// the eBPF programs (verifier failures counted per chain).
var (
	// ErrSeqExhausted: the headend used every sequence number of the
	// profile.
	ErrSeqExhausted = errors.New("opot sequence numbers exhausted")
	// ErrNoProfile: the TLV names a slot without a profile here.
	ErrNoProfile = errors.New("opot slot has no profile")
	// ErrVerify: CML != RND + s (mod p), or the deciphered RND or CML is
	// not a field element (a legitimate packet never has one).
	ErrVerify = errors.New("opot verification failed")
	// ErrReplay: the sequence number was already accepted.
	ErrReplay = errors.New("opot replayed packet")
	// ErrStale: the sequence number is left of the anti-replay window
	// (older than the window allows, or zero).
	ErrStale = errors.New("opot sequence number outside window")
	// ErrRole: a node was asked to act in a role it does not have.
	ErrRole = errors.New("opot node role")
)

// PackRND builds the headend's RND from a sequence number and the random
// source's output (only its low RandBits bits are used).
func PackRND(seq uint64, random uint32) (uint64, error) {
	if seq == 0 || seq > MaxSeq {
		return 0, fmt.Errorf("pack rnd: sequence %d: %w", seq, ErrSeqExhausted)
	}
	return seq<<RandBits | uint64(random)&(1<<RandBits-1), nil
}

// SeqOf returns the sequence number inside a deciphered RND.
func SeqOf(rnd uint64) uint64 { return rnd >> RandBits }

// hop adds node n's term to cml: CML_j = CML_{j-1} + (y_j + z_j) LPC_j
// (seed 003 Eq. 4) with y_j + z_j = Share + r (POLY-2 pre-evaluated).
func hop(f Field, n NodeParams, r, cml uint64) uint64 {
	return f.Add(cml, f.Mul(f.Add(n.Share, r), n.LPC))
}

// Init is the headend (seed 003 Algorithm 1 lines 3-7): CML_{-1} = 0,
// add the headend's term for the canonical per-packet value r, cipher
// both with the headend's mask.
func Init(f Field, n NodeParams, slot uint8, r uint64) (Meta, error) {
	if n.Role != RoleHeadend {
		return Meta{}, fmt.Errorf("init: %s node: %w", n.Role, ErrRole)
	}
	if r >= f.p {
		return Meta{}, fmt.Errorf("init: rnd %d not below p: %w", r, ErrVerify)
	}
	cml := hop(f, n, r, 0)
	return Meta{Slot: slot, RND: r ^ n.Enc.R, CML: cml ^ n.Enc.CML}, nil
}

// decipher undoes the previous node's mask (XOR with d_j = c_{j-1}).
func decipher(n NodeParams, m Meta) (r, cml uint64) {
	return m.RND ^ n.Dec.R, m.CML ^ n.Dec.CML
}

// Transit is an NF node (seed 003 Algorithm 1 lines 19-21, Eq. 4):
// decipher with d_j, update CML, cipher with c_j. It reduces the
// deciphered values modulo p instead of rejecting them: a packet from
// the wrong predecessor deciphers to garbage that may not be a field
// element, and the seed lets such "invalid values propagate to
// succeeding nodes" (III-A4) so that the verifier, not the transit,
// drops and counts it. A legitimate packet is never dropped here.
func Transit(f Field, n NodeParams, m Meta) (Meta, error) {
	if n.Role != RoleTransit {
		return Meta{}, fmt.Errorf("transit: %s node: %w", n.Role, ErrRole)
	}
	r, cml := decipher(n, m)
	r, cml = f.Reduce(r), f.Reduce(cml)
	cml = hop(f, n, r, cml)
	return Meta{Slot: m.Slot, RND: r ^ n.Enc.R, CML: cml ^ n.Enc.CML}, nil
}

// Verify is the verifier, the chain's last node v_{k-1}, seed 003
// III-A3 and Algorithm 1 line 25: decipher with d_{k-1}, require both
// values to be field elements, add its own term and accept iff
// CML_{k-1} == (RND + s) mod p. It returns the deciphered RND, from
// which the caller takes the sequence number.
func Verify(f Field, n NodeParams, m Meta) (uint64, error) {
	if n.Role != RoleVerifier {
		return 0, fmt.Errorf("verify: %s node: %w", n.Role, ErrRole)
	}
	r, cml := decipher(n, m)
	// Canonical values only: with RND + p accepted as RND, flipping bits
	// 61 and 0 of a replay would half the time add exactly p, leaving the
	// proof intact but changing the sequence number read from the bits
	// (docs/opot.md).
	if r >= f.p || cml >= f.p {
		return 0, ErrVerify
	}
	if hop(f, n, r, cml) != f.Add(r, n.Secret) {
		return 0, ErrVerify
	}
	return r, nil
}

// Headend is the chain's ingress state for one slot: its parameters and
// the sequence counter (one per chain and slot; the eBPF headend uses an
// atomic add on a map value).
type Headend struct {
	f    Field
	n    NodeParams
	slot uint8
	seq  uint64
}

// NewHeadend returns the headend of profile p using slot.
func NewHeadend(p *Profile, slot uint8) (*Headend, error) {
	if slot >= Slots {
		return nil, fmt.Errorf("new headend: slot %d: %w", slot, ErrProfile)
	}
	n, err := p.Node(0)
	if err != nil {
		return nil, fmt.Errorf("new headend: %w", err)
	}
	return &Headend{f: p.Field(), n: n, slot: slot}, nil
}

// Next builds the TLV of the next packet; random is the per-packet
// random source's output (bpf_get_prandom_u32 in the data plane).
func (h *Headend) Next(random uint32) (Meta, error) {
	if h.f.p != P61 {
		return Meta{}, fmt.Errorf("headend: rnd layout needs p = 2^61-1: %w", ErrProfile)
	}
	rnd, err := PackRND(h.seq+1, random)
	if err != nil {
		return Meta{}, fmt.Errorf("headend: %w", err)
	}
	h.seq++
	return Init(h.f, h.n, h.slot, rnd)
}

// Verifier is the chain's egress state: per slot, the verifier's
// parameters and an anti-replay window (a new profile in a slot starts a
// new window: its sequence numbers start again at 1).
type Verifier struct {
	slots [Slots]*verifierSlot
}

type verifierSlot struct {
	f Field
	n NodeParams
	w *Window
}

// Install puts profile p into slot with an anti-replay window of
// windowSize sequence numbers, replacing what the slot held.
func (v *Verifier) Install(slot uint8, p *Profile, windowSize int) error {
	if slot >= Slots {
		return fmt.Errorf("install slot %d: %w", slot, ErrProfile)
	}
	n, err := p.Node(p.K() - 1)
	if err != nil {
		return fmt.Errorf("install slot %d: %w", slot, err)
	}
	w, err := NewWindow(windowSize)
	if err != nil {
		return fmt.Errorf("install slot %d: %w", slot, err)
	}
	v.slots[slot] = &verifierSlot{f: p.Field(), n: n, w: w}
	return nil
}

// Remove empties slot (after a rotation has drained).
func (v *Verifier) Remove(slot uint8) {
	if slot < Slots {
		v.slots[slot] = nil
	}
}

// Check verifies one packet's TLV and, if it verifies, consumes its
// sequence number. The proof comes first, then the window check and
// update. RFC 4303 section 3.4.3 checks the window before an expensive
// ICV, but the proof here costs one multiply. Proving first means a path
// deviation is always ErrVerify (never a window verdict read from
// garbage), ErrReplay always means "a valid proof seen before", and the
// eBPF verifier needs one locked section (check + update). The window
// moves only for packets whose proof verified, so forgeries cannot move
// it.
func (v *Verifier) Check(m Meta) (seq uint64, err error) {
	if m.Slot >= Slots || v.slots[m.Slot] == nil {
		return 0, fmt.Errorf("check slot %d: %w", m.Slot, ErrNoProfile)
	}
	s := v.slots[m.Slot]
	rnd, err := Verify(s.f, s.n, m)
	if err != nil {
		return 0, err
	}
	seq = SeqOf(rnd)
	if err := s.w.Check(seq); err != nil {
		return seq, err
	}
	s.w.Update(seq)
	return seq, nil
}

// String is redacted: a Headend holds key material.
func (h *Headend) String() string {
	return fmt.Sprintf("opot.Headend{slot=%d seq=%d keys=%s}", h.slot, h.seq, redacted)
}

// Format makes every verb print String.
func (h *Headend) Format(st fmt.State, _ rune) { _, _ = io.WriteString(st, h.String()) }

// String is redacted: a Verifier holds key material.
func (v *Verifier) String() string {
	var b strings.Builder
	b.WriteString("opot.Verifier{")
	for i, s := range v.slots {
		if s != nil {
			fmt.Fprintf(&b, "slot%d: top=%d keys=%s ", i, s.w.Top(), redacted)
		}
	}
	return strings.TrimSpace(b.String()) + "}"
}

// Format makes every verb print String.
func (v *Verifier) Format(st fmt.State, _ rune) { _, _ = io.WriteString(st, v.String()) }

// MaxChainsPerNode is OPOT_MAX_PROFILES (bpf/lib/opot.h): the OPoT
// chains one node takes part in, each given a node-local index below it.
const MaxChainsPerNode = 1024

// SlotKey names one profile slot of one chain on a node: the chain's
// node-local index and the slot.
type SlotKey struct {
	Index, Slot uint32
}

// Array is the key of the data plane's per-slot arrays (parameters,
// sequence counters, windows; bpf/lib/opot.h opot_slot_index).
func (k SlotKey) Array() uint32 { return k.Index*Slots + k.Slot }
