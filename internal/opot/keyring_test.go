package opot

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestKeyringRotation(t *testing.T) {
	rng := seeded(31)
	gen := func() *Profile {
		p, err := GenerateFrom(rng, 3)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	old, next := gen(), gen()
	r := NewKeyring(old)
	if err := r.Activate(1); !errors.Is(err, ErrSlot) {
		t.Errorf("activate empty slot: %v", err)
	}
	slot, err := r.Rotate(next)
	if err != nil || slot != 1 {
		t.Fatalf("Rotate = %d, %v", slot, err)
	}
	if _, err := r.Rotate(gen()); !errors.Is(err, ErrSlot) {
		t.Errorf("second rotation before retiring: %v", err)
	}
	if err := r.Activate(slot); err != nil {
		t.Fatal(err)
	}
	if err := r.Retire(1); !errors.Is(err, ErrSlot) {
		t.Errorf("retire the active slot: %v", err)
	}
	if err := r.Retire(0); err != nil || r.Profiles[0] != nil {
		t.Fatalf("retire the old slot: %v", err)
	}

	b, err := r.MarshalSecrets()
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalKeyring(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Active != 1 || back.Profiles[0] != nil || back.Profiles[1].Fingerprint() != next.Fingerprint() {
		t.Errorf("keyring round trip: active %d, slots %v", back.Active, back.Profiles)
	}
	for _, bad := range []string{`{`, `{"active":0,"slots":[null]}`, `{"active":0,"slots":[null,null]}`} {
		if _, err := UnmarshalKeyring([]byte(bad)); err == nil {
			t.Errorf("UnmarshalKeyring(%s) accepted", bad)
		}
	}

	// Printing the keyring, directly or as JSON, stays redacted.
	j, _ := json.Marshal(r)
	for _, out := range []string{fmt.Sprintf("%v %+v %#v", r, *r, r), string(j)} {
		for _, s := range secretStrings(t, next) {
			if len(s) >= 6 && strings.Contains(out, s) {
				t.Fatalf("keyring output %q contains secret %s", out, s)
			}
		}
	}
}

func TestUnmarshalSecretsStrict(t *testing.T) {
	f, _ := NewField(53)
	p, err := NewProfile(f, fig2Poly1, fig2Poly2, fig2X, make([]Mask, 3))
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.MarshalSecrets()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := UnmarshalSecrets(b); !errors.Is(err, ErrProfile) {
		t.Errorf("loading a profile without masks (plain PoT): %v, want ErrProfile", err)
	}
}
