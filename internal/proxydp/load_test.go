package proxydp

import (
	"testing"

	"github.com/srchain/srchain/internal/testutil"
)

// TestLoad: both programs pass the verifier.
func TestLoad(t *testing.T) {
	testutil.RequireRoot(t)
	p, err := Load(Options{FlowCapacity: 1024})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
