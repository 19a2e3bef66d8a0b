package opot

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrSlot: a rotation step does not fit the keyring's state (activating
// an empty slot, retiring the active one, rotating while both slots are
// in use).
var ErrSlot = errors.New("opot slot")

// Keyring is one chain's two profile slots on the control side. A
// rotation (docs/opot.md "Two slots"): Rotate puts the new profile in
// the free slot, the verifier and the transits install it, Activate
// switches the headend, and Retire empties the old slot once its packets
// have drained. Printing a Keyring prints redacted profiles.
type Keyring struct {
	Active   uint8
	Profiles [Slots]*Profile
}

// NewKeyring returns a keyring whose slot 0 holds p and is active.
func NewKeyring(p *Profile) *Keyring {
	return &Keyring{Profiles: [Slots]*Profile{p}}
}

// Rotate installs p in the inactive slot and returns that slot. The
// inactive slot must be empty (retire the previous rotation first).
func (r *Keyring) Rotate(p *Profile) (uint8, error) {
	next := 1 - r.Active
	if r.Profiles[next] != nil {
		return 0, fmt.Errorf("rotate: slot %d still in use: %w", next, ErrSlot)
	}
	r.Profiles[next] = p
	return next, nil
}

// Activate makes slot the headend's slot.
func (r *Keyring) Activate(slot uint8) error {
	if slot >= Slots || r.Profiles[slot] == nil {
		return fmt.Errorf("activate slot %d: empty: %w", slot, ErrSlot)
	}
	r.Active = slot
	return nil
}

// Retire empties slot; the active slot cannot be retired.
func (r *Keyring) Retire(slot uint8) error {
	if slot >= Slots || slot == r.Active {
		return fmt.Errorf("retire slot %d: active or out of range: %w", slot, ErrSlot)
	}
	r.Profiles[slot] = nil
	return nil
}

// MarshalSecrets encodes both slots with their key material (for 0600
// files only).
func (r *Keyring) MarshalSecrets() ([]byte, error) {
	out := struct {
		Active uint8                  `json:"active"`
		Slots  [Slots]json.RawMessage `json:"slots"`
	}{Active: r.Active}
	for i, p := range r.Profiles {
		out.Slots[i] = json.RawMessage("null")
		if p != nil {
			b, err := p.MarshalSecrets()
			if err != nil {
				return nil, fmt.Errorf("marshal keyring slot %d: %w", i, err)
			}
			out.Slots[i] = b
		}
	}
	return json.Marshal(out)
}

// UnmarshalKeyring decodes Keyring.MarshalSecrets output.
func UnmarshalKeyring(b []byte) (*Keyring, error) {
	var in struct {
		Active uint8             `json:"active"`
		Slots  []json.RawMessage `json:"slots"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("unmarshal keyring: %w", err)
	}
	if len(in.Slots) != Slots {
		return nil, fmt.Errorf("unmarshal keyring: %d slots: %w", len(in.Slots), ErrSlot)
	}
	r := &Keyring{Active: in.Active}
	for i, raw := range in.Slots {
		if string(raw) == "null" {
			continue
		}
		p, err := UnmarshalSecrets(raw)
		if err != nil {
			return nil, fmt.Errorf("unmarshal keyring slot %d: %w", i, err)
		}
		r.Profiles[i] = p
	}
	if r.Active >= Slots || r.Profiles[r.Active] == nil {
		return nil, fmt.Errorf("unmarshal keyring: active slot %d empty: %w", r.Active, ErrSlot)
	}
	return r, nil
}
