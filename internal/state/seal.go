package state

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Seal sets n.Digest to the SHA-256 of n's JSON form without the digest
// (secrets included, so a rotated key changes it). The compiler seals
// every node it produces.
func (n *Node) Seal() error {
	d, err := n.digest()
	if err != nil {
		return err
	}
	n.Digest = d
	return nil
}

// Sealed reports whether n.Digest matches n's content (false for a node
// edited after Seal, or never sealed).
func (n *Node) Sealed() bool {
	d, err := n.digest()
	return err == nil && n.Digest != "" && d == n.Digest
}

func (n *Node) digest() (string, error) {
	c := *n
	c.Digest = ""
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encode node %s: %w", n.Name, err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Redacted returns a copy of net whose secrets carry no value, for
// display (`srchain plan`); net is not changed. Digests stay those of the
// real state.
func (net *Network) Redacted() *Network {
	out := *net
	out.Nodes = slices.Clone(net.Nodes)
	for i := range out.Nodes {
		secrets := slices.Clone(out.Nodes[i].Secrets)
		for j := range secrets {
			secrets[j].Value, secrets[j].Redacted = nil, true
		}
		out.Nodes[i].Secrets = secrets
	}
	return &out
}

// ErrVersion: a state written in another format version (e.g. a lab
// record from an older srchain); recompile it from its spec.
var ErrVersion = errors.New("desired state format version differs")

// CheckVersion tells whether net was written in this FormatVersion;
// consumers of stored state (lab records, agents) call it before use.
func (net *Network) CheckVersion() error {
	if net.Version != FormatVersion {
		return fmt.Errorf("state of %s is version %d, this srchain reads %d: %w", net.Name, net.Version, FormatVersion, ErrVersion)
	}
	return nil
}
