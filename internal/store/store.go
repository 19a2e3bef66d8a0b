// Package store keeps the controller's state in etcd: the spec the
// northbound API accepted and the desired state of every node, which
// agents watch. It starts an embedded single-node etcd (the default, data
// under a directory) or connects to an external cluster; it adds no
// consensus or replication of its own (DESIGN.md: no home-made store).
//
// Layout (docs/controller.md):
//
//	/srchain/v1/spec                 the spec document (JSON)
//	/srchain/v1/nodes/NAME/desired   the node's desired state (JSON)
//	/srchain/v1/nodes/NAME/status    the node's agent's report, under its lease
//	/srchain/v1/nodes/NAME/agent     written once by an agent at start, no lease
//
// A node's generation is the etcd mod revision of its desired key: it
// grows only when the key is written, and Commit writes a node's key only
// when its bytes change. Every write is one etcd transaction guarded by
// the spec key's mod revision, so a reader never sees half a change and
// two writers cannot both build on the same spec.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
)

// Keys.
const (
	Prefix      = "/srchain/v1/"
	SpecKey     = Prefix + "spec"
	NodesPrefix = Prefix + "nodes/"
)

// DesiredKey is where node's desired state lives.
func DesiredKey(node string) string { return NodesPrefix + node + "/desired" }

// StatusKey is where node's agent reports (applied generation, drift),
// under a lease: the key disappears with an agent that stopped.
func StatusKey(node string) string { return NodesPrefix + node + "/status" }

// AgentKey is written by node's agent at start, without a lease: a node
// that has it but no status had an agent that is now down.
func AgentKey(node string) string { return NodesPrefix + node + "/agent" }

// Errors callers branch on.
var (
	// ErrConflict is returned by Commit when the spec changed since the
	// revision the write was built on.
	ErrConflict = errors.New("spec changed concurrently")
	// ErrTooLarge: the write exceeds the etcd cluster's request size or
	// operations per transaction.
	ErrTooLarge = errors.New("write exceeds etcd's limits (--max-request-bytes, --max-txn-ops)")
)

// Limits of the embedded etcd: a spec with thousands of chains and its
// per-node states exceed etcd's defaults (1.5 MiB per request, 128
// operations per transaction). An external cluster needs the same
// --max-request-bytes and --max-txn-ops (docs/controller.md).
const (
	MaxRequestBytes = 64 << 20
	MaxTxnOps       = 1 << 16
)

// Config says which etcd to use.
type Config struct {
	// Endpoints of an external etcd cluster; empty starts an embedded one.
	Endpoints []string
	// DataDir holds the embedded etcd's data (DataDir/etcd).
	DataDir string
	// ClientURL and PeerURL are where the embedded etcd listens
	// (defaults http://127.0.0.1:2379 and :2380: loopback only).
	ClientURL, PeerURL string
	// MaxRequestBytes and MaxTxnOps override the embedded etcd's limits
	// (0: the package's defaults; tests set small ones).
	MaxRequestBytes, MaxTxnOps uint
	// LogFile receives the embedded etcd's log (errors only); empty
	// means stderr.
	LogFile string
}

// Store is an open etcd (embedded or external).
type Store struct {
	cli  *clientv3.Client
	etcd *embed.Etcd
}

// Open starts the embedded etcd or connects to the external cluster.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if len(cfg.Endpoints) > 0 {
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:          cfg.Endpoints,
			DialTimeout:        5 * time.Second,
			MaxCallSendMsgSize: MaxRequestBytes,
			MaxCallRecvMsgSize: MaxRequestBytes,
			Context:            ctx,
		})
		if err != nil {
			return nil, fmt.Errorf("connect etcd %s: %w", strings.Join(cfg.Endpoints, ","), err)
		}
		// Fail now, not at the first API call, when the cluster is away.
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := cli.Get(sctx, SpecKey, clientv3.WithCountOnly()); err != nil {
			cli.Close()
			return nil, fmt.Errorf("reach etcd %s: %w", strings.Join(cfg.Endpoints, ","), err)
		}
		return &Store{cli: cli}, nil
	}
	return openEmbedded(ctx, cfg)
}

func openEmbedded(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("open embedded etcd: no data directory")
	}
	dir := filepath.Join(cfg.DataDir, "etcd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create etcd directory: %w", err)
	}
	ec := embed.NewConfig()
	ec.Name = "srchain"
	ec.Dir = dir
	ec.LogLevel = "error"
	if cfg.LogFile != "" {
		ec.LogOutputs = []string{cfg.LogFile}
	}
	ec.MaxRequestBytes, ec.MaxTxnOps = MaxRequestBytes, MaxTxnOps
	if cfg.MaxRequestBytes > 0 {
		ec.MaxRequestBytes = cfg.MaxRequestBytes
	}
	if cfg.MaxTxnOps > 0 {
		ec.MaxTxnOps = cfg.MaxTxnOps
	}
	// Keep the last 1000 revisions: history is for watchers catching up,
	// not an archive.
	ec.AutoCompactionMode = "revision"
	ec.AutoCompactionRetention = "1000"
	client, peer := cfg.ClientURL, cfg.PeerURL
	if client == "" {
		client = "http://127.0.0.1:2379"
	}
	if peer == "" {
		peer = "http://127.0.0.1:2380"
	}
	cu, err := url.Parse(client)
	if err != nil {
		return nil, fmt.Errorf("parse etcd client URL: %w", err)
	}
	pu, err := url.Parse(peer)
	if err != nil {
		return nil, fmt.Errorf("parse etcd peer URL: %w", err)
	}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("start embedded etcd: %w", err)
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, errors.New("start embedded etcd: not ready after 60s")
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("start embedded etcd: %w", ctx.Err())
	}
	slog.Debug("embedded etcd ready", "dir", dir, "client", client)
	return &Store{cli: v3client.New(e.Server), etcd: e}, nil
}

// Err reports a fatal error of the embedded etcd (a listener that
// failed); nil, which never fires, for an external cluster.
func (s *Store) Err() <-chan error {
	if s.etcd == nil {
		return nil
	}
	return s.etcd.Err()
}

// Client is the etcd client (for watchers and tests).
func (s *Store) Client() *clientv3.Client { return s.cli }

// Close closes the client and stops the embedded etcd.
func (s *Store) Close() error {
	err := s.cli.Close()
	if s.etcd != nil {
		s.etcd.Close()
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("close etcd client: %w", err)
	}
	return nil
}

// Desired is one node's stored desired state.
type Desired struct {
	// Generation is the mod revision of the node's key.
	Generation int64
	State      []byte
}

// Snapshot is the spec and every node's desired state read at one etcd
// revision.
type Snapshot struct {
	// SpecRevision is the spec key's mod revision, 0 when no spec was
	// ever stored; Commit is guarded by it.
	SpecRevision int64
	Spec         []byte
	Desired      map[string]Desired
}

// Read returns a consistent snapshot (one transaction, one revision).
func (s *Store) Read(ctx context.Context) (*Snapshot, error) {
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(SpecKey),
		clientv3.OpGet(NodesPrefix, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	snap := &Snapshot{Desired: map[string]Desired{}}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		snap.SpecRevision, snap.Spec = kvs[0].ModRevision, kvs[0].Value
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		rest := strings.TrimPrefix(string(kv.Key), NodesPrefix)
		if node, ok := strings.CutSuffix(rest, "/desired"); ok {
			snap.Desired[node] = Desired{Generation: kv.ModRevision, State: kv.Value}
		}
	}
	return snap, nil
}

// Write is one change: the new spec, node states to put and nodes whose
// desired state goes away.
type Write struct {
	Spec    []byte
	Put     map[string][]byte
	Removed []string
}

// Commit stores w in one transaction if the spec key's mod revision is
// still base (0: no spec yet); otherwise it returns ErrConflict. It
// returns the new spec revision.
func (s *Store) Commit(ctx context.Context, base int64, w Write) (int64, error) {
	ops := []clientv3.Op{clientv3.OpPut(SpecKey, string(w.Spec))}
	for node, b := range w.Put {
		ops = append(ops, clientv3.OpPut(DesiredKey(node), string(b)))
	}
	for _, node := range w.Removed {
		ops = append(ops, clientv3.OpDelete(DesiredKey(node)))
	}
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(SpecKey), "=", base)).
		Then(ops...).
		Commit()
	if errors.Is(err, rpctypes.ErrRequestTooLarge) || errors.Is(err, rpctypes.ErrTooManyOps) {
		return 0, fmt.Errorf("store spec (%d operations, %d bytes of spec): %w: %v", len(ops), len(w.Spec), ErrTooLarge, err)
	}
	if err != nil {
		return 0, fmt.Errorf("store spec: %w", err)
	}
	if !resp.Succeeded {
		return 0, ErrConflict
	}
	return resp.Header.Revision, nil
}

// Node reads one node's desired state and its agent's status (nil when
// the agent never reported).
func (s *Store) Node(ctx context.Context, node string) (d Desired, ok bool, status []byte, err error) {
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(DesiredKey(node)),
		clientv3.OpGet(StatusKey(node)),
	).Commit()
	if err != nil {
		return Desired{}, false, nil, fmt.Errorf("read node %s: %w", node, err)
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		d, ok = Desired{Generation: kvs[0].ModRevision, State: kvs[0].Value}, true
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		status = kvs[0].Value
	}
	return d, ok, status, nil
}
