package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// TestPlanRedactsSecrets: a node's secret material never appears in
// plan's output, text or JSON, whole or for one node; the state itself
// keeps it.
func TestPlanRedactsSecrets(t *testing.T) {
	s, err := spec.Load("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	net, err := compile.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("opot-share-0123456789abcdef")
	net.Nodes[0].Secrets = []state.Secret{{Name: "opot/c1/share", NF: "fw", Value: key}}
	node := net.Nodes[0].Name
	for _, c := range []struct {
		node   string
		asJSON bool
	}{{"", false}, {"", true}, {node, false}, {node, true}} {
		var out bytes.Buffer
		if err := writePlan(&out, s, net, c.node, c.asJSON, "quickstart.yaml"); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		for _, leak := range []string{string(key), base64.StdEncoding.EncodeToString(key)} {
			if strings.Contains(got, leak) {
				t.Errorf("plan (node %q, json %v) shows the secret:\n%s", c.node, c.asJSON, got)
			}
		}
		if !strings.Contains(got, "opot/c1/share") || !strings.Contains(got, "redacted") {
			t.Errorf("plan (node %q, json %v) does not say a secret was redacted:\n%s", c.node, c.asJSON, got)
		}
		if c.asJSON && c.node == "" {
			var back state.Network
			if err := json.Unmarshal(out.Bytes(), &back); err != nil || !back.Nodes[0].Secrets[0].Redacted {
				t.Errorf("json: %v, %+v", err, back.Nodes[0].Secrets)
			}
		}
	}
	if string(net.Nodes[0].Secrets[0].Value) != string(key) {
		t.Error("redaction changed the state itself")
	}
}
