package controller

import (
	"context"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/srchain/srchain/internal/store"
)

// TestStatusAgentStates: a node's agent is unknown until one registers,
// up while its leased status is there (with its applied generation and
// drift), and down once the lease is gone (here revoked; an expired lease
// deletes the key the same way).
func TestStatusAgentStates(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.must("PUT", "/v1/spec", quickstart(t), nil)
	get := func() Status {
		t.Helper()
		var st Status
		e.must("GET", "/v1/nodes/r1/status", "", &st)
		return st
	}
	if st := get(); st.Agent != AgentUnknown || st.AppliedGeneration != nil || st.InSync {
		t.Fatalf("before any agent: %+v", st)
	}
	cli := e.st.Client()
	if _, err := cli.Put(ctx, store.AgentKey("r1"), `{}`); err != nil {
		t.Fatal(err)
	}
	if st := get(); st.Agent != AgentDown {
		t.Errorf("registered, no status: agent %q, want down", st.Agent)
	}
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	desired := get().DesiredGeneration
	report := fmt.Sprintf(`{"applied_generation":%d,"drift":["route 10.0.4.0/24"],"last_error":""}`, desired)
	if _, err := cli.Put(ctx, store.StatusKey("r1"), report, clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	st := get()
	if st.Agent != AgentUp || st.AppliedGeneration == nil || *st.AppliedGeneration != desired || !st.InSync ||
		len(st.Drift) != 1 || string(st.Report) != report {
		t.Errorf("agent up and in sync: %+v", st)
	}
	// A new desired generation: up but not in sync.
	e.must("PUT", "/v1/chains/web4", `{"ingress":"r1","egress":"r3","match":{"dst":["10.0.4.0/25"]},"nfs":["fw"]}`, nil)
	if st := get(); st.Agent != AgentUp || st.InSync || st.DesiredGeneration == desired {
		t.Errorf("after a change the agent has not applied: %+v", st)
	}
	if _, err := cli.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	if st := get(); st.Agent != AgentDown || st.AppliedGeneration != nil || st.InSync || st.Report != nil {
		t.Errorf("lease gone: %+v, want down", st)
	}
}
