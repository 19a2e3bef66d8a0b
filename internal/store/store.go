// Package store keeps the controller's state in etcd: the spec the
// northbound API accepted and the desired state of every node, which
// agents watch. It starts an embedded single-node etcd (the default, data
// under a directory) or connects to an external cluster; it adds no
// consensus or replication of its own (DESIGN.md: no home-made store).
//
// Layout (docs/controller.md):
//
//	/srchain/v1/spec                 the spec document without its chains (JSON)
//	/srchain/v1/spec/chains/NNNNNNNN chain NNNNNNNN of the spec (its position)
//	/srchain/v1/nodes/NAME/desired   the node's desired state (JSON): its base
//	/srchain/v1/nodes/NAME/desired/chains/CHAIN
//	                                 what CHAIN adds to it (state.Part)
//	/srchain/v1/nodes/NAME/status    the node's agent's report, under its lease
//	/srchain/v1/nodes/NAME/agent     written once by an agent at start, no lease
//
// A node's desired state is its base (state.Split) joined with its parts:
// a change to one chain writes that chain's parts and the bases of the
// nodes they are on, not every node's whole state. A node's generation is
// the etcd mod revision of its base key: the controller writes the base
// whenever anything of the node changes, and nothing of a node that did
// not change. Every write is one etcd transaction guarded by
// the spec key's mod revision, so a reader never sees half a change and
// two writers cannot both build on the same spec.
package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/srchain/srchain/internal/pki"
	"github.com/srchain/srchain/internal/slogzap"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
)

// Keys.
const (
	Prefix           = "/srchain/v1/"
	SpecKey          = Prefix + "spec"
	SpecChainsPrefix = SpecKey + "/chains/"
	NodesPrefix      = Prefix + "nodes/"
)

// SpecChainKey is where the spec's chain at position i lives: chains are
// stored one per key, so that a change to one chain writes that chain,
// not the whole spec (1.2 MB at 10,000 chains, kept by etcd for every
// revision until compaction).
func SpecChainKey(i int) string { return fmt.Sprintf("%s%08d", SpecChainsPrefix, i) }

// DesiredKey is where node's desired state lives: its base at the key,
// its parts under PartsPrefix. Watching it as a prefix sees both.
func DesiredKey(node string) string { return NodesPrefix + node + "/desired" }

// PartsPrefix is where node's parts live, one key per chain.
func PartsPrefix(node string) string { return DesiredKey(node) + "/chains/" }

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
	// ErrUnavailable: etcd did not answer a call within Config.Timeout,
	// or said it cannot serve (the API answers 503).
	ErrUnavailable = errors.New("store (etcd) unavailable")
	// ErrInsecure: the embedded etcd would listen beyond loopback
	// without mutual TLS, and Config.Insecure does not allow it.
	ErrInsecure = errors.New("embedded etcd beyond loopback without mutual TLS")
)

// DefaultTimeout bounds each call to etcd (Config.Timeout): a request to
// a store that is down gets its 503 in that time, instead of waiting on
// a gRPC connection that may never come back (issue 38, item 9).
const DefaultTimeout = 5 * time.Second

// errCallTimeout is the cause of a call's context running out of
// Config.Timeout, told apart from the caller's own cancellation.
var errCallTimeout = errors.New("no answer from etcd in time")

// Limits of the embedded etcd: a spec with thousands of chains and its
// per-node states exceed etcd's defaults (1.5 MiB per request, 128
// operations per transaction): a spec written at once puts one key per
// chain for the chain itself, one on its ingress and one on its egress
// (more when it splits into pathlets), so up to about 5 x spec.MaxChains
// operations. An external
// cluster needs the same --max-request-bytes and --max-txn-ops
// (docs/controller.md).
const (
	MaxRequestBytes = 64 << 20
	MaxTxnOps       = 1 << 18
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
	// PKI is a directory of certificates (internal/pki) for mutual TLS
	// with etcd; empty: plain HTTP on loopback. The embedded etcd then
	// serves https with client certificate auth and etcd's RBAC on: the
	// store's client is the root user, and every node whose desired state
	// it writes gets a user (its certificate's common name) whose role
	// reaches only that node's keys. User picks this client's certificate
	// (default pki.RootName).
	PKI, User string
	// Insecure lets the embedded etcd listen on a non-loopback client
	// URL without PKI, and on a non-loopback peer URL at all (its peer
	// side never has TLS). Without it either is refused (ErrInsecure):
	// anyone who reaches that etcd can write every node's desired state.
	Insecure bool
	// Timeout bounds each etcd call (0: DefaultTimeout).
	Timeout time.Duration
}

// Store is an open etcd (embedded or external).
type Store struct {
	cli  *clientv3.Client
	etcd *embed.Etcd
	// auth: etcd RBAC is on; users holds the nodes that have their user
	// and role (ensureNode).
	auth  bool
	mu    sync.Mutex
	users map[string]bool
	// timeout bounds each call (Bound).
	timeout   time.Duration
	closeOnce sync.Once
}

// Bound is ctx limited to the store's per-call timeout; Failed tells
// its running out from the caller's cancellation.
func (s *Store) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return s.bound(ctx, 1)
}

func (s *Store) bound(ctx context.Context, times time.Duration) (context.Context, context.CancelFunc) {
	t := s.timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	return context.WithTimeoutCause(ctx, times*t, errCallTimeout)
}

// Failed marks err, returned by a call made with ctx from Bound, as
// ErrUnavailable when the store's timeout ran out or etcd answered
// Unavailable; other errors are returned as they are.
func Failed(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	if errors.Is(context.Cause(ctx), errCallTimeout) || status.Code(err) == codes.Unavailable ||
		errors.Is(err, rpctypes.ErrNoLeader) || errors.Is(err, rpctypes.ErrTimeout) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// Open starts the embedded etcd or connects to the external cluster.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if len(cfg.Endpoints) > 0 {
		tc, err := clientTLS(cfg)
		if err != nil {
			return nil, err
		}
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:          cfg.Endpoints,
			DialTimeout:        5 * time.Second,
			MaxCallSendMsgSize: MaxRequestBytes,
			MaxCallRecvMsgSize: MaxRequestBytes,
			Context:            ctx,
			TLS:                tc,
			Logger:             slogzap.New("etcd-client"), // --log-format
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
		return &Store{cli: cli, auth: tc != nil, users: map[string]bool{}, timeout: cfg.Timeout}, nil
	}
	st, err := openEmbedded(ctx, cfg)
	if err != nil {
		return nil, err
	}
	st.timeout = cfg.Timeout
	return st, nil
}

// checkExposure refuses an embedded etcd that anyone on the network could
// write to (issue 38, item 4): a client URL beyond loopback needs PKI
// (mutual TLS and per-node users), a peer URL beyond loopback is never
// protected (a single-member cluster has no peers to talk to). Insecure
// lets both through with a warning.
func checkExposure(cfg Config, client, peer *url.URL) error {
	var open []string
	if !loopback(client) && cfg.PKI == "" {
		open = append(open, "client URL "+client.String()+" without --etcd-pki")
	}
	if !loopback(peer) {
		open = append(open, "peer URL "+peer.String()+" (never TLS)")
	}
	if len(open) == 0 {
		return nil
	}
	if !cfg.Insecure {
		return fmt.Errorf("start embedded etcd: %w: %s; anyone reaching it can write every node's desired state: "+
			"use loopback URLs, --etcd-pki with an https client URL, or --insecure-etcd to accept that", ErrInsecure, strings.Join(open, ", "))
	}
	slog.Warn("embedded etcd reachable beyond loopback without authentication (--insecure-etcd): anyone reaching it can write every node's desired state",
		"exposed", strings.Join(open, ", "))
	return nil
}

// loopback reports whether u's host is a loopback address or localhost
// (0.0.0.0, [::] and names are not: they reach other hosts).
func loopback(u *url.URL) bool {
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// clientTLS is the client side of cfg.PKI (nil without one): the CA and
// cfg.User's certificate.
func clientTLS(cfg Config) (*tls.Config, error) {
	return ClientTLS(cfg.PKI, cfg.User)
}

// ClientTLS is the TLS configuration of an etcd client of user (default
// pki.RootName) from the certificates in dir (internal/pki); nil, nil for
// no dir. Agents connect with their node's certificate.
func ClientTLS(dir, user string) (*tls.Config, error) {
	cfg := Config{PKI: dir, User: user}
	if cfg.PKI == "" {
		return nil, nil
	}
	user = cfg.User
	if user == "" {
		user = pki.RootName
	}
	info := transport.TLSInfo{CertFile: pki.CertFile(cfg.PKI, user), KeyFile: pki.KeyFile(cfg.PKI, user),
		TrustedCAFile: filepath.Join(cfg.PKI, pki.CAFile)}
	tc, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load etcd client certificate of %s: %w", user, err)
	}
	return tc, nil
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
		lg, err := etcdLogger(cfg.LogFile, os.Stderr)
		if err != nil {
			return nil, err
		}
		ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
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
	if err := checkExposure(cfg, cu, pu); err != nil {
		return nil, err
	}
	if cfg.PKI != "" {
		if cu.Scheme != "https" {
			return nil, fmt.Errorf("embedded etcd with certificates: client URL %s: want https", client)
		}
		ec.ClientTLSInfo = transport.TLSInfo{CertFile: pki.CertFile(cfg.PKI, pki.ServerName), KeyFile: pki.KeyFile(cfg.PKI, pki.ServerName),
			TrustedCAFile: filepath.Join(cfg.PKI, pki.CAFile), ClientCertAuth: true}
	}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	e, err := startEtcd(ec)
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
	if cfg.PKI == "" {
		return &Store{cli: v3client.New(e.Server), etcd: e}, nil
	}
	// With certificates the store talks to its etcd as the root user,
	// over TLS (the in-process client carries no identity).
	tc, err := clientTLS(Config{PKI: cfg.PKI})
	if err != nil {
		e.Close()
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, TLS: tc, Context: ctx,
		MaxCallSendMsgSize: MaxRequestBytes, MaxCallRecvMsgSize: MaxRequestBytes, Logger: slogzap.New("etcd-client")})
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("connect embedded etcd: %w", err)
	}
	st := &Store{cli: cli, etcd: e, auth: true, users: map[string]bool{}}
	if err := st.enableAuth(ctx); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// enableAuth turns etcd's RBAC on with a root user that has no password:
// it authenticates by its certificate's common name only.
func (s *Store) enableAuth(ctx context.Context) error {
	if _, err := s.cli.UserAddWithOptions(ctx, pki.RootName, "", &clientv3.UserAddOptions{NoPassword: true}); err != nil &&
		!errors.Is(err, rpctypes.ErrUserAlreadyExist) && !errors.Is(err, rpctypes.ErrUserEmpty) {
		if errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrUserNotFound) {
			return nil // auth is on already (a restart): root works, that is all we need
		}
		return fmt.Errorf("add etcd root user: %w", err)
	}
	if _, err := s.cli.UserGrantRole(ctx, pki.RootName, "root"); err != nil {
		return fmt.Errorf("grant etcd root role: %w", err)
	}
	if _, err := s.cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("enable etcd auth: %w", err)
	}
	return nil
}

// ensureNode gives node an etcd user (its certificate's common name) and a
// role that reads and writes only /srchain/v1/nodes/<node>/: an agent
// sees its own desired state (OPoT keys included) and writes its own
// status, nothing of another node's.
func (s *Store) ensureNode(ctx context.Context, node string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.auth || s.users[node] {
		return nil
	}
	role := "node-" + node
	prefix := NodesPrefix + node + "/"
	if _, err := s.cli.RoleAdd(ctx, role); err != nil && !errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
		return fmt.Errorf("add etcd role %s: %w", role, err)
	}
	if _, err := s.cli.RoleGrantPermission(ctx, role, prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
		return fmt.Errorf("grant etcd role %s: %w", role, err)
	}
	if _, err := s.cli.UserAddWithOptions(ctx, node, "", &clientv3.UserAddOptions{NoPassword: true}); err != nil && !errors.Is(err, rpctypes.ErrUserAlreadyExist) {
		return fmt.Errorf("add etcd user %s: %w", node, err)
	}
	if _, err := s.cli.UserGrantRole(ctx, node, role); err != nil {
		return fmt.Errorf("grant etcd role %s to %s: %w", role, node, err)
	}
	s.users[node] = true
	return nil
}

// startEtcd is embed.StartEtcd with its panics turned into errors: etcd
// panics while it bootstraps on a full disk ("failed to create WAL: no
// space left on device"), and serve should then stop with that one line,
// not a stack trace.
func startEtcd(ec *embed.Config) (e *embed.Etcd, err error) {
	defer func() {
		if r := recover(); r != nil {
			// The cause (the error field) went to etcd's log and, at
			// panic level, to stderr (etcdLogger).
			err = fmt.Errorf("%v", r)
		}
	}()
	return embed.StartEtcd(ec)
}

// etcdLogger is the embedded etcd's logger: errors to path (created
// 0600: etcd logs request details), and fatal errors to stderr as well.
// etcd ends the process with os.Exit(1) on a fatal error (a full disk,
// a corrupt WAL): without the stderr copy that exit left no message
// anywhere an operator looks first (issue 38, Low).
func etcdLogger(path string, stderr io.Writer) (*zap.Logger, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open etcd log: %w", err)
	}
	// A log created 0644 by an earlier version is narrowed as well.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("open etcd log: %w", err)
	}
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	core := zapcore.NewTee(
		zapcore.NewCore(enc, zapcore.AddSync(f), zapcore.ErrorLevel),
		zapcore.NewCore(enc.Clone(), zapcore.Lock(zapcore.AddSync(stderr)), zapcore.DPanicLevel),
	)
	return zap.New(core, zap.ErrorOutput(zapcore.AddSync(f))), nil
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

// Close closes the client and stops the embedded etcd; a second Close
// does nothing (embed.Etcd.Close panics when called twice).
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() { err = s.close() })
	return err
}

func (s *Store) close() error {
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
	// Generation is the mod revision of the node's base key.
	Generation int64
	// State is the base, Parts the parts by chain name.
	State []byte
	Parts map[string][]byte
}

// Snapshot is the spec and every node's desired state read at one etcd
// revision.
type Snapshot struct {
	// SpecRevision is the spec key's mod revision, 0 when no spec was
	// ever stored; Commit is guarded by it.
	SpecRevision int64
	// Spec is the spec document without its chains, Chains the chains
	// in order (nil when none is stored apart: a spec written by a
	// build that kept them in the document).
	Spec    []byte
	Chains  [][]byte
	Desired map[string]Desired
}

// ParseDesiredKey tells a node's base key (chain "") and part keys from
// the other keys under NodesPrefix.
func ParseDesiredKey(key string) (node, chain string, ok bool) {
	rest, ok := strings.CutPrefix(key, NodesPrefix)
	if !ok {
		return "", "", false
	}
	node, rest, ok = strings.Cut(rest, "/")
	switch {
	case !ok:
		return "", "", false
	case rest == "desired":
		return node, "", true
	}
	chain, ok = strings.CutPrefix(rest, "desired/chains/")
	return node, chain, ok && chain != ""
}

// Read returns a consistent snapshot (one transaction, one revision).
func (s *Store) Read(ctx context.Context) (*Snapshot, error) {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(SpecKey),
		clientv3.OpGet(NodesPrefix, clientv3.WithPrefix()),
		clientv3.OpGet(SpecChainsPrefix, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, Failed(ctx, fmt.Errorf("read spec: %w", err))
	}
	snap := &Snapshot{Desired: map[string]Desired{}}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		snap.SpecRevision, snap.Spec = kvs[0].ModRevision, kvs[0].Value
	}
	// Keys sort by position (zero-padded); they must be 0..n-1.
	for i, kv := range resp.Responses[2].GetResponseRange().Kvs {
		if string(kv.Key) != SpecChainKey(i) {
			return nil, fmt.Errorf("read spec: chain key %s where %s was expected", kv.Key, SpecChainKey(i))
		}
		snap.Chains = append(snap.Chains, kv.Value)
	}
	parts := map[string]map[string][]byte{}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		node, chain, ok := ParseDesiredKey(string(kv.Key))
		switch {
		case !ok:
		case chain == "":
			snap.Desired[node] = Desired{Generation: kv.ModRevision, State: kv.Value}
		default:
			if parts[node] == nil {
				parts[node] = map[string][]byte{}
			}
			parts[node][chain] = kv.Value
		}
	}
	for node, d := range snap.Desired {
		d.Parts = parts[node]
		snap.Desired[node] = d
	}
	return snap, nil
}

// Write is one change: the new spec, node states to put and nodes whose
// desired state goes away.
type Write struct {
	// Spec is the spec document without its chains; Chains the chains
	// to write by position (a nil value deletes one).
	Spec    []byte
	Chains  map[int][]byte
	Put     map[string]NodeWrite
	Removed []string
}

// NodeWrite is one node's change: its base, always written (the
// generation), and the parts that changed.
type NodeWrite struct {
	State []byte
	// Parts to write; a nil value deletes the part.
	Parts map[string][]byte
}

// Commit stores w in one transaction if the spec key's mod revision is
// still base (0: no spec yet); otherwise it returns ErrConflict. It
// returns the new spec revision.
func (s *Store) Commit(ctx context.Context, base int64, w Write) (int64, error) {
	// A commit carries up to MaxRequestBytes (a whole spec at the chain
	// limit: about 1.5 s on the project's machines): four times the
	// bound of a read, so that a busy etcd is not reported down. A write
	// reads first, so a store already down is still found out in one
	// timeout.
	ctx, cancel := s.bound(ctx, 4)
	defer cancel()
	for node := range w.Put {
		if err := s.ensureNode(ctx, node); err != nil {
			return 0, Failed(ctx, err)
		}
	}
	ops := []clientv3.Op{clientv3.OpPut(SpecKey, string(w.Spec))}
	for i, b := range w.Chains {
		if b == nil {
			ops = append(ops, clientv3.OpDelete(SpecChainKey(i)))
		} else {
			ops = append(ops, clientv3.OpPut(SpecChainKey(i), string(b)))
		}
	}
	for node, nw := range w.Put {
		ops = append(ops, clientv3.OpPut(DesiredKey(node), string(nw.State)))
		for chain, b := range nw.Parts {
			if b == nil {
				ops = append(ops, clientv3.OpDelete(PartsPrefix(node)+chain))
			} else {
				ops = append(ops, clientv3.OpPut(PartsPrefix(node)+chain, string(b)))
			}
		}
	}
	for _, node := range w.Removed {
		ops = append(ops, clientv3.OpDelete(DesiredKey(node)), clientv3.OpDelete(PartsPrefix(node), clientv3.WithPrefix()))
	}
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(SpecKey), "=", base)).
		Then(ops...).
		Commit()
	if errors.Is(err, rpctypes.ErrRequestTooLarge) || errors.Is(err, rpctypes.ErrTooManyOps) {
		return 0, fmt.Errorf("store spec (%d operations, %d bytes of spec): %w: %v", len(ops), len(w.Spec), ErrTooLarge, err)
	}
	if err != nil {
		return 0, Failed(ctx, fmt.Errorf("store spec: %w", err))
	}
	if !resp.Succeeded {
		return 0, ErrConflict
	}
	return resp.Header.Revision, nil
}

// Node reads one node's desired state and its agent's status (nil when
// the agent never reported).
func (s *Store) Node(ctx context.Context, node string) (d Desired, ok bool, status []byte, err error) {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(DesiredKey(node), clientv3.WithPrefix()),
		clientv3.OpGet(StatusKey(node)),
	).Commit()
	if err != nil {
		return Desired{}, false, nil, Failed(ctx, fmt.Errorf("read node %s: %w", node, err))
	}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		n, chain, isDesired := ParseDesiredKey(string(kv.Key))
		switch {
		case !isDesired || n != node:
		case chain == "":
			d.Generation, d.State, ok = kv.ModRevision, kv.Value, true
		default:
			if d.Parts == nil {
				d.Parts = map[string][]byte{}
			}
			d.Parts[chain] = kv.Value
		}
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		status = kvs[0].Value
	}
	return d, ok, status, nil
}
