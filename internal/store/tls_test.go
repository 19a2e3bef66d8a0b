package store

import (
	"context"
	"crypto/tls"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/srchain/srchain/internal/pki"
)

// TestMutualTLS: with certificates the embedded etcd takes only clients
// with a certificate from the CA, and a node's agent reads and writes its
// own node's keys only: not another node's desired state (OPoT keys live
// there), not the spec.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	certs := filepath.Join(dir, "pki")
	if err := pki.Generate(certs, []string{"r1", "r2"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := pki.Generate(certs, []string{"r3"}, nil); !errors.Is(err, pki.ErrExists) {
		t.Errorf("second Generate: %v, want ErrExists (never overwrite a key)", err)
	}
	url := "https://" + strings.TrimPrefix(freeURL(t), "http://")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := Open(ctx, Config{DataDir: dir, ClientURL: url, PeerURL: freeURL(t), PKI: certs,
		LogFile: filepath.Join(dir, "etcd.log")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Commit(ctx, 0, Write{Spec: []byte("spec"), Put: map[string]NodeWrite{"r1": {State: []byte("one")}, "r2": {State: []byte("two")}}}); err != nil {
		t.Fatal(err)
	}
	client := func(user string) *clientv3.Client {
		tc, err := ClientTLS(certs, user)
		if err != nil {
			t.Fatal(err)
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, TLS: tc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	r1 := client("r1")
	resp, err := r1.Get(ctx, DesiredKey("r1"))
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "one" {
		t.Fatalf("r1 reads its desired state: %v %v", resp, err)
	}
	if _, err := r1.Put(ctx, StatusKey("r1"), "ok"); err != nil {
		t.Errorf("r1 writes its status: %v", err)
	}
	for _, k := range []string{DesiredKey("r2"), SpecKey, NodesPrefix} {
		if _, err := r1.Get(ctx, k, clientv3.WithPrefix()); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("r1 reads %s: %v, want permission denied", k, err)
		}
	}
	if _, err := r1.Put(ctx, StatusKey("r2"), "forged"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("r1 writes r2's status: %v, want permission denied", err)
	}
	// No certificate: the TLS handshake fails, nothing is read.
	plain, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 2 * time.Second,
		TLS: mustNoCert(t, certs)})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
	defer scancel()
	if _, err := plain.Get(sctx, DesiredKey("r1")); err == nil {
		t.Error("a client without a certificate read r1's desired state")
	} else if !strings.Contains(err.Error(), "certificate") && !errors.Is(err, context.DeadlineExceeded) {
		t.Logf("no-certificate client: %v", err)
	}
}

// mustNoCert trusts the CA but presents no certificate.
func mustNoCert(t *testing.T, certs string) *tls.Config {
	t.Helper()
	tc, err := ClientTLS(certs, "r1")
	if err != nil {
		t.Fatal(err)
	}
	tc = tc.Clone()
	tc.Certificates = nil
	tc.GetClientCertificate = nil
	return tc
}
