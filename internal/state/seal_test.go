package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/netip"
	"testing"
)

func TestSeal(t *testing.T) {
	n := Node{Name: "r1", Routes: []Route{{Dst: netip.MustParsePrefix("fc00::/64")}}}
	if n.Sealed() {
		t.Fatal("unsealed node reports sealed")
	}
	if err := n.Seal(); err != nil {
		t.Fatal(err)
	}
	if !n.Sealed() {
		t.Fatal("sealed node does not verify")
	}
	d := n.Digest
	n.Secrets = []Secret{{Name: "k", Value: []byte{1}}}
	if n.Sealed() {
		t.Error("a new secret leaves the digest valid")
	}
	n.Secrets = nil
	if err := n.Seal(); err != nil || n.Digest != d {
		t.Errorf("same content, digest %s then %s", d, n.Digest)
	}
}

// TestRedacted: the redacted copy carries no secret value, the original
// keeps its own (no shared backing arrays).
func TestRedacted(t *testing.T) {
	key := []byte("secret-share")
	net := &Network{Version: FormatVersion, Nodes: []Node{{Name: "r1", Secrets: []Secret{{Name: "opot/c/share", NF: "p", Value: key}}}}}
	r := net.Redacted()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, key) || bytes.Contains(b, []byte("c2VjcmV0LXNoYXJl")) {
		t.Errorf("redacted JSON holds the secret: %s", b)
	}
	if !r.Nodes[0].Secrets[0].Redacted || r.Nodes[0].Secrets[0].Name != "opot/c/share" {
		t.Errorf("redacted secret %+v", r.Nodes[0].Secrets[0])
	}
	if string(net.Nodes[0].Secrets[0].Value) != string(key) || net.Nodes[0].Secrets[0].Redacted {
		t.Error("Redacted changed the original")
	}
}

func TestCheckVersion(t *testing.T) {
	if err := (&Network{Version: FormatVersion}).CheckVersion(); err != nil {
		t.Error(err)
	}
	var old Network // a version 1 record had no version field
	if err := json.Unmarshal([]byte(`{"name":"q","nodes":[]}`), &old); err != nil {
		t.Fatal(err)
	}
	if err := old.CheckVersion(); !errors.Is(err, ErrVersion) {
		t.Errorf("old state: %v", err)
	}
}
