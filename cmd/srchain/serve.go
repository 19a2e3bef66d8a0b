package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/net/netutil"

	"github.com/srchain/srchain/internal/controller"
	"github.com/srchain/srchain/internal/store"
)

// Defaults of `srchain serve` and of the client commands.
const (
	defaultDataDir = "/var/lib/srchain"
	defaultListen  = "127.0.0.1:7373"
	defaultServer  = "http://" + defaultListen
)

type serveOptions struct {
	listen, dataDir, tokenFile string
	etcdEndpoints              []string
	etcdClient, etcdPeer       string
	tlsCert, tlsKey            string
	etcdPKI                    string
	// insecureEtcd lets the embedded etcd listen beyond loopback without
	// mutual TLS (refused otherwise: store.ErrInsecure).
	insecureEtcd bool
	// storeTimeout bounds every etcd call of a request (0: store's default).
	storeTimeout time.Duration
	http         httpLimits
}

// httpLimits are the API server's limits (issue 38, item 2): without
// them any local user, token or not, could hold connections open until
// the process runs out of file descriptors.
type httpLimits struct {
	// readHeader bounds the time to send a request's headers, from the
	// connection's accept (or the previous answer) on; read the whole
	// request, body included; write the answer from the end of the
	// headers on; idle a keep-alive connection between requests.
	readHeader, read, write, idle time.Duration
	// maxConns caps the connections served at once; past it, new ones
	// wait in the kernel's accept queue (no file descriptor of ours)
	// until one ends.
	maxConns int
	// maxHeaderBytes caps a request's header block.
	maxHeaderBytes int
}

// defaultHTTPLimits: a 32 MiB spec (the largest body) must get through a
// slow link in read; the answer to GET /v1/spec at the 20,000 chain limit
// (a few MB) and a rotation that waits up to 600 s for agents
// (wait_seconds) must fit in write.
var defaultHTTPLimits = httpLimits{
	readHeader:     10 * time.Second,
	read:           2 * time.Minute,
	write:          11 * time.Minute,
	idle:           2 * time.Minute,
	maxConns:       512,
	maxHeaderBytes: 64 << 10,
}

// orDefaults is l with its zero fields (callers that build serveOptions
// themselves) set to defaultHTTPLimits': no limit is ever "none".
func (l httpLimits) orDefaults() httpLimits {
	d := defaultHTTPLimits
	for _, f := range []struct{ v, def *time.Duration }{{&l.readHeader, &d.readHeader}, {&l.read, &d.read}, {&l.write, &d.write}, {&l.idle, &d.idle}} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	if l.maxConns <= 0 {
		l.maxConns = d.maxConns
	}
	if l.maxHeaderBytes <= 0 {
		l.maxHeaderBytes = d.maxHeaderBytes
	}
	return l
}

func newServeCmd(e *env) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the controller: northbound REST API (/v1) on etcd",
		Long: "serve runs srchain's controller (docs/controller.md). Orchestrators and\n" +
			"`srchain apply/get` submit topology, NFs and chains through its REST API; it\n" +
			"validates and compiles them like a YAML spec and stores each node's desired\n" +
			"state in etcd: an embedded single-node etcd under --data-dir by default, or an\n" +
			"external cluster with --etcd-endpoints. Every request needs the bearer token\n" +
			"of --token-file (created, mode 0600, under --data-dir when absent).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// e.ctx, cancelled by main on SIGINT/SIGTERM, stops serving.
			return runServe(cmd.Context(), o, func(addr string) {
				slog.Info("controller listening", "addr", addr)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", defaultListen, "API address (loopback by default)")
	f.StringVar(&o.dataDir, "data-dir", defaultDataDir, "embedded etcd data and the generated token")
	f.StringVar(&o.tokenFile, "token-file", "", "API bearer token file (default DATA-DIR/token, generated if absent)")
	f.StringSliceVar(&o.etcdEndpoints, "etcd-endpoints", nil, "external etcd cluster (comma-separated URLs) instead of the embedded one")
	f.StringVar(&o.etcdClient, "etcd-listen-client", "http://127.0.0.1:2379", "embedded etcd: client URL (agents connect here)")
	f.StringVar(&o.etcdPeer, "etcd-listen-peer", "http://127.0.0.1:2380", "embedded etcd: peer URL")
	f.StringVar(&o.tlsCert, "tls-cert", "", "serve HTTPS with this certificate (PEM)")
	f.StringVar(&o.tlsKey, "tls-key", "", "key of --tls-cert (PEM)")
	f.StringVar(&o.etcdPKI, "etcd-pki", "", "certificates (`srchain certs`) for mutual TLS with etcd and per-node etcd users: an agent reads only its node's keys (embedded etcd: --etcd-listen-client must be https://)")
	f.BoolVar(&o.insecureEtcd, "insecure-etcd", false, "let the embedded etcd listen beyond loopback without --etcd-pki (anyone reaching it can rewrite every node's state)")
	f.DurationVar(&o.storeTimeout, "store-timeout", store.DefaultTimeout, "bound on each etcd call of a request: past it the API answers 503")
	o.http = defaultHTTPLimits
	f.DurationVar(&o.http.readHeader, "http-read-header-timeout", o.http.readHeader, "time a client has to send a request's headers")
	f.DurationVar(&o.http.read, "http-read-timeout", o.http.read, "time a client has to send a whole request, body included")
	f.DurationVar(&o.http.write, "http-write-timeout", o.http.write, "time to write an answer (covers POST /v1/opot/rotate's wait_seconds)")
	f.DurationVar(&o.http.idle, "http-idle-timeout", o.http.idle, "time a keep-alive connection may stay idle")
	f.IntVar(&o.http.maxConns, "http-max-conns", o.http.maxConns, "connections served at once (more wait to be accepted)")
	return cmd
}

// runServe serves until ctx ends; ready gets the bound address.
func runServe(ctx context.Context, o serveOptions, ready func(addr string)) error {
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return errors.New("serve: --tls-cert and --tls-key go together")
	}
	tokenFile := o.tokenFile
	if tokenFile == "" {
		tokenFile = filepath.Join(o.dataDir, "token")
	}
	token, err := controller.LoadOrCreateToken(tokenFile)
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, store.Config{
		Endpoints: o.etcdEndpoints,
		DataDir:   o.dataDir,
		ClientURL: o.etcdClient,
		PeerURL:   o.etcdPeer,
		// etcd's own log (errors only; it also reports its listeners
		// closing at every stop as errors) stays out of the API's; its
		// fatal errors (a full disk) also go to stderr.
		LogFile:  filepath.Join(o.dataDir, "etcd.log"),
		PKI:      o.etcdPKI,
		Insecure: o.insecureEtcd,
		Timeout:  o.storeTimeout,
	})
	if err != nil {
		return err
	}
	defer st.Close()

	l, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", o.listen, err)
	}
	if tcp, ok := l.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() && o.tlsCert == "" {
		slog.Warn("API reachable beyond loopback without TLS: the bearer token crosses the network in clear; use --tls-cert/--tls-key", "addr", l.Addr())
	}
	lim := o.http.orDefaults()
	if lim.maxConns > 0 {
		l = netutil.LimitListener(l, lim.maxConns)
	}
	srv := &http.Server{
		Handler:           controller.New(st).Handler(token),
		ReadHeaderTimeout: lim.readHeader,
		ReadTimeout:       lim.read,
		WriteTimeout:      lim.write,
		IdleTimeout:       lim.idle,
		MaxHeaderBytes:    lim.maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
	done := make(chan error, 1)
	go func() {
		if o.tlsCert != "" {
			done <- srv.ServeTLS(l, o.tlsCert, o.tlsKey)
		} else {
			done <- srv.Serve(l)
		}
	}()
	slog.Info("controller ready", "token_file", tokenFile, "etcd", etcdDesc(o)) // the token's path, never the token
	if ready != nil {
		ready(l.Addr().String())
	}
	select {
	case err := <-done:
		slog.Error("API server failed", "err", err)
		return fmt.Errorf("serve: %w", err)
	case err := <-st.Err():
		srv.Close()
		slog.Error("embedded etcd failed", "err", err)
		return fmt.Errorf("embedded etcd failed: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	if !plannedStop(ctx) {
		// Not SIGINT/SIGTERM: whatever it was must not look like a
		// clean stop to systemd's Restart=on-failure.
		errs = append(errs, fmt.Errorf("serve: stopped: %w", context.Cause(ctx)))
	}
	if err := srv.Shutdown(sctx); err != nil && !strings.Contains(err.Error(), "closed") {
		errs = append(errs, fmt.Errorf("shut down API: %w", err))
	}
	return errors.Join(errs...)
}

func etcdDesc(o serveOptions) string {
	if len(o.etcdEndpoints) > 0 {
		return strings.Join(o.etcdEndpoints, ",")
	}
	return "embedded " + o.etcdClient + ", data " + filepath.Join(o.dataDir, "etcd")
}
