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
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/srchain/srchain/internal/agent"
	"github.com/srchain/srchain/internal/hostnode"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/slogzap"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/store"
)

type agentOptions struct {
	node, netns, stateDir string
	metricsListen         string
	etcdEndpoints         []string
	ttl, resync           time.Duration
	etcdPKI               string
	uninstall             bool
}

func newAgentCmd(e *env) *cobra.Command {
	var o agentOptions
	cmd := &cobra.Command{
		Use:   "agent --node NAME",
		Short: "Apply one node's desired state from etcd, report status, repair drift",
		Long: "agent watches the desired state the controller (`srchain serve`) stores for\n" +
			"--node in etcd and applies it with the same applier and NF drivers as `lab`, in\n" +
			"this host's network namespace (or --netns). It reports its status under an etcd\n" +
			"lease (a stopped agent shows as down after --lease-ttl), checks for drift every\n" +
			"--resync and repairs it. A restarted agent adopts what is in place: on a node\n" +
			"already as desired its first apply changes nothing (docs/controller.md).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAgent(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.node, "node", "", "the spec's node this agent applies (required)")
	f.StringVar(&o.netns, "netns", "", "apply in this named network namespace (lab, tests) instead of the agent's own")
	f.StringSliceVar(&o.etcdEndpoints, "etcd-endpoints", []string{"http://127.0.0.1:2379"}, "etcd client URLs (comma-separated): serve's embedded etcd or the external cluster")
	f.StringVar(&o.stateDir, "state-dir", filepath.Join(defaultDataDir, "agent"), "keeps the last applied state across restarts (NODE.json, NODE@NETNS.json)")
	f.DurationVar(&o.ttl, "lease-ttl", agent.DefaultTTL, "status lease TTL: how long a stopped agent still shows as up")
	f.DurationVar(&o.resync, "resync", agent.DefaultResync, "drift check and repair period")
	f.StringVar(&o.etcdPKI, "etcd-pki", "", "certificates (`srchain certs`): connect to etcd with mutual TLS as the node's user (DIR/NODE.pem, DIR/NODE-key.pem, DIR/ca.pem)")
	f.StringVar(&o.metricsListen, "metrics-listen", "", "serve Prometheus /metrics on this address, e.g. 127.0.0.1:9472 (default: off; docs/metrics.md)")
	f.BoolVar(&o.uninstall, "uninstall", false, "remove what srchain applied to this node (its programs, routes, SIDs and rules, srchain_* nft tables, pins) and the agent's state files, then exit (docs/deploy.md)")
	_ = cmd.MarkFlagRequired("node")
	return cmd
}

// runAgent runs the agent until ctx ends (main cancels it on SIGINT and
// SIGTERM).
func runAgent(ctx context.Context, o agentOptions) error {
	if o.node == "" || strings.ContainsAny(o.node, "/\x00") {
		return fmt.Errorf("agent: bad node name %q", o.node)
	}
	var ns *netns.NS
	var err error
	if o.netns != "" {
		ns, err = netns.Open(o.netns)
	} else {
		ns, err = netns.Current("host")
	}
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer ns.Close()
	if o.uninstall {
		return uninstallAgent(ctx, ns, o)
	}
	tc, err := store.ClientTLS(o.etcdPKI, o.node)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:          o.etcdEndpoints,
		DialTimeout:        5 * time.Second,
		MaxCallRecvMsgSize: store.MaxRequestBytes,
		Context:            ctx,
		TLS:                tc,
		Logger:             slogzap.New("etcd-client"), // --log-format
	})
	if err != nil {
		return fmt.Errorf("agent: connect etcd %s: %w", strings.Join(o.etcdEndpoints, ","), err)
	}
	defer cli.Close()
	stateFile := agentStateFile(o)
	a, err := agent.New(agent.Config{Node: o.node, NS: ns, Client: cli, TTL: o.ttl, Resync: o.resync,
		StateFile: stateFile, Version: version})
	if err != nil {
		return err
	}
	if o.metricsListen != "" {
		l, err := net.Listen("tcp", o.metricsListen)
		if err != nil {
			return fmt.Errorf("agent: metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", a.MetricsHandler())
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				slog.Error("metrics server", "err", err)
			}
		}()
		defer srv.Close()
		slog.Info("serving metrics", "addr", l.Addr().String()+"/metrics")
	}
	slog.Info("agent started", "node", o.node, "netns", ns.Name, "etcd", strings.Join(o.etcdEndpoints, ","))
	if err := a.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if ctx.Err() != nil && !plannedStop(ctx) {
		// Not SIGINT/SIGTERM: must not look like a clean stop to
		// systemd's Restart=on-failure (issue 38, item 1).
		return fmt.Errorf("agent: stopped: %w", context.Cause(ctx))
	}
	return nil
}

// agentStateFile is the agent's state file ("" without --state-dir).
func agentStateFile(o agentOptions) string {
	if o.stateDir == "" {
		return ""
	}
	// Per namespace too: two labs on one host may both have an r1.
	name := o.node + ".json"
	if o.netns != "" {
		name = o.node + "@" + o.netns + ".json"
	}
	return filepath.Join(o.stateDir, name)
}

// uninstallAgent removes from the node what the agent applied, as `node
// reset` does (internal/hostnode): the programs, routes, SIDs and rules
// of its state files through the drivers, every route and rule tagged
// srchain's, the srchain_* nft tables and the pins; then its state files.
// It needs no etcd. Sysctls and MTUs are restored only where `node
// apply` recorded them.
func uninstallAgent(ctx context.Context, ns *netns.NS, o agentOptions) error {
	file := agentStateFile(o)
	var applied *state.Node
	if file != "" {
		var problems []error
		applied, problems = agent.Applied(file)
		for _, p := range problems {
			slog.Warn("agent state unreadable; removing what carries srchain's marks only", "err", p)
		}
	}
	done, err := hostnode.Reset(ctx, ns, o.node, hostnode.Options{StateDir: filepath.Dir(o.stateDir), Remove: applied})
	for _, d := range done {
		slog.Info("uninstall", "node", o.node, "netns", ns.Name, "done", d)
	}
	if err != nil && !errors.Is(err, hostnode.ErrNoRecord) {
		return fmt.Errorf("agent: uninstall: %w", err)
	}
	if file != "" {
		if err := agent.RemoveFiles(file); err != nil {
			return fmt.Errorf("agent: uninstall: %w", err)
		}
	}
	slog.Info("uninstalled", "node", o.node, "netns", ns.Name)
	return nil
}
