package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/srchain/srchain/internal/controller"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/pki"
	"github.com/srchain/srchain/internal/state"
)

// labAgentsTimeout bounds how long `lab up --agents` waits for the
// controller to answer and for every agent to apply its node.
const labAgentsTimeout = 2 * time.Minute

// startAgents is `lab up --agents` after the namespaces and links exist:
// it starts `srchain serve` (an embedded etcd on loopback with mutual TLS
// and a user per node, a token of its own) and one `srchain agent
// --netns` per node as processes of their own,
// all recorded in the lab so that `lab down` stops them, submits the spec
// through the API and waits until every agent has applied its node. So a
// lab exercises the distributed path (API, etcd, watch, agent, applier)
// end to end; without --agents `lab up` applies directly.
func startAgents(ctx context.Context, out io.Writer, rec *lab.Record, net *state.Network, specFile string, opts lab.Options) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("start agents: find the srchain binary: %w", err)
	}
	dir := lab.AgentsDir(opts, rec.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("start agents: %w", err)
	}
	doc, err := os.ReadFile(specFile)
	if err != nil {
		return fmt.Errorf("start agents: %w", err)
	}
	jdoc, err := controller.DocFromYAML(doc)
	if err != nil {
		return fmt.Errorf("start agents: %w", err)
	}
	tokenFile := filepath.Join(dir, "token")
	token, err := controller.LoadOrCreateToken(tokenFile)
	if err != nil {
		return fmt.Errorf("start agents: %w", err)
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	api := fmt.Sprintf("127.0.0.1:%d", ports[0])
	etcd := fmt.Sprintf("https://127.0.0.1:%d", ports[1])
	// Mutual TLS with etcd, one etcd user per node: each agent reads its
	// own node's state only, as in a deployment (docs/controller.md).
	certs := filepath.Join(dir, "pki")
	var names []string
	for _, n := range net.Nodes {
		names = append(names, n.Name)
	}
	if err := pki.Generate(certs, names, nil); err != nil {
		return fmt.Errorf("start agents: %w", err)
	}
	start := func(logName string, args ...string) error {
		lf, err := os.OpenFile(filepath.Join(dir, logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("start agents: %w", err)
		}
		defer lf.Close()
		// An empty --config: a lab's serve and agents must not pick up
		// the host's /etc/srchain/{serve,agent}.yaml (a router that runs
		// the packaged units may build labs too).
		cmd := exec.Command(self, append(args, "--config", os.DevNull)...)
		cmd.Stdout, cmd.Stderr = lf, lf
		// A session of its own: the process outlives this command and
		// no terminal signal reaches it; lab down stops it by PID.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start %s: %w", args[0], err)
		}
		err = lab.AddPID(rec.Name, cmd.Process.Pid, opts)
		_ = cmd.Process.Release()
		return err
	}
	if err := start("serve.log", "serve", "--listen", api, "--data-dir", filepath.Join(dir, "serve"), "--token-file", tokenFile,
		"--etcd-listen-client", etcd, "--etcd-listen-peer", fmt.Sprintf("http://127.0.0.1:%d", ports[2]), "--etcd-pki", certs); err != nil {
		return err
	}
	cl := &controller.Client{Server: "http://" + api, Token: token}
	wctx, cancel := context.WithTimeout(ctx, labAgentsTimeout)
	defer cancel()
	if err := until(wctx, "the controller to answer", func() (bool, error) {
		return apiUp(wctx, cl), nil
	}); err != nil {
		return err
	}
	if err := cl.Do(wctx, "PUT", "/v1/spec", jdoc, nil); err != nil {
		return fmt.Errorf("start agents: submit %s: %w", specFile, err)
	}
	for _, n := range net.Nodes {
		if err := start("agent-"+n.Name+".log", "agent", "--node", n.Name, "--netns", rec.Namespaces[n.Name],
			"--etcd-endpoints", etcd, "--etcd-pki", certs, "--state-dir", filepath.Join(dir, "agent")); err != nil {
			return err
		}
	}
	for _, n := range net.Nodes {
		if err := until(wctx, "agent "+n.Name+" to apply its node", func() (bool, error) {
			var st controller.Status
			if err := cl.Do(wctx, "GET", "/v1/nodes/"+n.Name+"/status", nil, &st); err != nil {
				return false, nil
			}
			if st.LastError != "" {
				return false, fmt.Errorf("agent %s: %s", n.Name, st.LastError)
			}
			return st.InSync, nil
		}); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "controller http://%s (token in %s), etcd %s (mutual TLS, certificates in %s), %d agents in sync; logs in %s\n",
		api, tokenFile, etcd, certs, len(net.Nodes), dir)
	return nil
}

// apiUp reports whether the API answers at all (an unknown node is a 404,
// which still means it is up).
func apiUp(ctx context.Context, cl *controller.Client) bool {
	var apiErr *controller.APIError
	err := cl.Do(ctx, "GET", "/v1/spec", nil, nil)
	return err == nil || errors.As(err, &apiErr)
}

func until(ctx context.Context, what string, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freePorts returns n loopback TCP ports free a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
