package store

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func freeURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}

func open(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	client := freeURL(t)
	st, err := Open(context.Background(), Config{DataDir: dir, ClientURL: client, PeerURL: freeURL(t), LogFile: filepath.Join(dir, "etcd.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, client
}

// TestCommitGuard: a write built on a stale spec revision is refused and
// stores nothing, not even the node states it carried.
func TestCommitGuard(t *testing.T) {
	ctx := context.Background()
	st, _ := open(t)
	rev1, err := st.Commit(ctx, 0, Write{Spec: []byte(`{"v":1}`), Put: map[string]NodeWrite{"r1": {State: []byte("a"), Parts: map[string][]byte{"c1": []byte("p1")}}, "r2": {State: []byte("b")}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(ctx, 0, Write{Spec: []byte(`{"v":"stale"}`), Put: map[string]NodeWrite{"r1": {State: []byte("stale")}}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("commit on base 0 after a write: %v, want ErrConflict", err)
	}
	rev2, err := st.Commit(ctx, rev1, Write{Spec: []byte(`{"v":2}`), Put: map[string]NodeWrite{"r2": {State: []byte("c"), Parts: map[string][]byte{"c2": []byte("p2")}}}, Removed: []string{"r1"}})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(snap.Spec) != `{"v":2}` || snap.SpecRevision != rev2 {
		t.Errorf("spec %s at %d, want {\"v\":2} at %d", snap.Spec, snap.SpecRevision, rev2)
	}
	if len(snap.Desired) != 1 || string(snap.Desired["r2"].State) != "c" || snap.Desired["r2"].Generation != rev2 ||
		len(snap.Desired["r2"].Parts) != 1 || string(snap.Desired["r2"].Parts["c2"]) != "p2" {
		t.Errorf("desired = %+v, want only r2=c with part c2=p2 at generation %d", snap.Desired, rev2)
	}
	// The removed node's parts went with it; a part is deleted by a nil.
	if resp, err := st.Client().Get(ctx, PartsPrefix("r1"), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Errorf("parts of removed r1 left: %v %v", resp, err)
	}
	rev3, err := st.Commit(ctx, rev2, Write{Spec: []byte(`{"v":3}`), Put: map[string]NodeWrite{"r2": {State: []byte("c"), Parts: map[string][]byte{"c2": nil}}}})
	if err != nil {
		t.Fatal(err)
	}
	if d, ok, _, err := st.Node(ctx, "r2"); err != nil || !ok || len(d.Parts) != 0 || d.Generation != rev3 {
		t.Errorf("after deleting part c2: %+v %v %v, want no parts at generation %d", d, ok, err, rev3)
	}
	// A status key under the node is not mistaken for desired state.
	if _, err := st.Client().Put(ctx, StatusKey("r2"), `{"applied_generation":1}`); err != nil {
		t.Fatal(err)
	}
	d, ok, status, err := st.Node(ctx, "r2")
	if err != nil || !ok || string(d.State) != "c" || string(status) != `{"applied_generation":1}` {
		t.Errorf("Node(r2) = %+v %v %s %v", d, ok, status, err)
	}
	if snap, _ := st.Read(ctx); len(snap.Desired) != 1 {
		t.Errorf("status key read as desired state: %+v", snap.Desired)
	}
}

// TestExternalEndpoints: --etcd-endpoints reaches a running etcd (here
// the embedded one of another store) and sees its data.
func TestExternalEndpoints(t *testing.T) {
	ctx := context.Background()
	st, client := open(t)
	if _, err := st.Commit(ctx, 0, Write{Spec: []byte(`{"v":1}`)}); err != nil {
		t.Fatal(err)
	}
	ext, err := Open(ctx, Config{Endpoints: []string{client}})
	if err != nil {
		t.Fatal(err)
	}
	defer ext.Close()
	snap, err := ext.Read(ctx)
	if err != nil || string(snap.Spec) != `{"v":1}` {
		t.Errorf("external read: %s, %v", snap.Spec, err)
	}
}

// TestSpecChains: the spec's chains live one per key, in order; a nil
// deletes one.
func TestSpecChains(t *testing.T) {
	ctx := context.Background()
	st, _ := open(t)
	rev, err := st.Commit(ctx, 0, Write{Spec: []byte(`{}`), Chains: map[int][]byte{0: []byte("a"), 1: []byte("b"), 2: []byte("c")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(ctx, rev, Write{Spec: []byte(`{}`), Chains: map[int][]byte{1: []byte("B"), 2: nil}}); err != nil {
		t.Fatal(err)
	}
	snap, err := st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Chains) != 2 || string(snap.Chains[0]) != "a" || string(snap.Chains[1]) != "B" {
		t.Errorf("chains %q, want [a B]", snap.Chains)
	}
	// A gap is a broken store, not a shorter spec.
	if _, err := st.Client().Delete(ctx, SpecChainKey(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Read(ctx); err == nil {
		t.Error("read a spec whose chain 0 is missing")
	}
}
