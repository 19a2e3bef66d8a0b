package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/srchain/srchain/internal/controller"
	"github.com/srchain/srchain/internal/fwstate"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/store"
)

// The controller at scale with simulated agents (`srchain bench api
// --simulate`, issue 12: controller and agent CPU and memory at 10,000
// chains and 100 agents): a k-ary fat tree (internal/fwstate, every
// switch a node: 80 at k = 8, 125 at k = 10) with n chains is submitted
// with PUT /v1/spec, and one simulated agent per node watches its desired
// key as a real agent does, decodes the state it receives and writes a
// status. Nothing is applied (no namespaces, no root needed): the run
// measures the controller, etcd and the agents' watch-and-decode path.

// APISimPoint is one fat tree's run.
type APISimPoint struct {
	K      int `json:"k"`
	Nodes  int `json:"nodes"`
	Chains int `json:"chains"`
	// Deploy is from PUT /v1/spec to the last agent's status written;
	// CPU the process's user + system time over it (controller, etcd,
	// agents); MaxRSSMB the process's peak resident memory after it.
	Deploy, CPU time.Duration
	MaxRSSMB    int64
	// StateBytes is the size of every node's stored desired state.
	StateBytes int
}

// RunAPISim runs one fat tree of size k with n chains.
func RunAPISim(ctx context.Context, k, n int, log *slog.Logger) (p APISimPoint, err error) {
	doc, err := fwstate.FatTree(k, n, 1)
	if err != nil {
		return p, err
	}
	s, err := spec.Parse(doc, "fat-tree.yaml")
	if err != nil {
		return p, err
	}
	jdoc, err := controller.DocFromYAML(doc)
	if err != nil {
		return p, err
	}
	w, err := startController(ctx)
	if err != nil {
		return p, err
	}
	defer func() { err = errors.Join(err, w.close()) }()

	cli := w.st.Client()
	rev, err := cli.Get(ctx, store.SpecKey)
	if err != nil {
		return p, fmt.Errorf("api sim: %w", err)
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	bytes, errs := 0, []error{}
	for _, nd := range s.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := simAgent(actx, cli, nd.Name, rev.Header.Revision+1)
			mu.Lock()
			defer mu.Unlock()
			bytes += b
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	cpu0 := cpuTime()
	t0 := time.Now()
	if err := w.cl.Do(ctx, "PUT", "/v1/spec", jdoc, nil); err != nil {
		return p, fmt.Errorf("put spec: %w", err)
	}
	wg.Wait()
	p = APISimPoint{K: k, Nodes: len(s.Nodes), Chains: n, Deploy: time.Since(t0), CPU: cpuTime() - cpu0,
		MaxRSSMB: maxRSSMB(), StateBytes: bytes}
	log.Info("api sim", "k", k, "nodes", p.Nodes, "chains", n, "deploy", p.Deploy.Round(time.Millisecond), "cpu", p.CPU.Round(time.Millisecond))
	return p, errors.Join(errs...)
}

// simAgent is an agent without an applier: it watches node's desired
// state from revision rev, decodes the first state it receives as the
// agent does (the node's base and parts, state.DecodeStored) and writes
// its status. It returns the size of the state.
func simAgent(ctx context.Context, cli *clientv3.Client, node string, rev int64) (int, error) {
	parts := map[string][]byte{}
	for resp := range cli.Watch(ctx, store.DesiredKey(node), clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if err := resp.Err(); err != nil {
			return 0, fmt.Errorf("watch %s: %w", node, err)
		}
		for _, ev := range resp.Events {
			_, chain, ok := store.ParseDesiredKey(string(ev.Kv.Key))
			if !ok || ev.Type != clientv3.EventTypePut {
				continue
			}
			if chain != "" {
				parts[chain] = ev.Kv.Value
				continue
			}
			net, err := state.DecodeStored(ev.Kv.Value, parts)
			if err != nil {
				return 0, fmt.Errorf("state of %s: %w", node, err)
			}
			if net.Nodes[0].Name != node {
				return 0, fmt.Errorf("state of %s holds node %s", node, net.Nodes[0].Name)
			}
			st, _ := json.Marshal(map[string]any{"node": node, "applied_generation": ev.Kv.ModRevision})
			if _, err := cli.Put(ctx, store.StatusKey(node), string(st)); err != nil {
				return 0, fmt.Errorf("write status of %s: %w", node, err)
			}
			size := len(ev.Kv.Value)
			for _, b := range parts {
				size += len(b)
			}
			return size, nil
		}
	}
	return 0, fmt.Errorf("watch %s: %w", node, ctx.Err())
}

// WriteAPISim prints the runs as a markdown table.
func WriteAPISim(w io.Writer, pts []APISimPoint) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	fmt.Fprintln(tw, "| k\t| nodes (agents)\t| chains\t| deploy\t| CPU\t| peak RSS\t| desired state, all nodes\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|---\t|---\t|")
	for _, p := range pts {
		fmt.Fprintf(tw, "| %d\t| %d\t| %d\t| %s\t| %s\t| %d MB\t| %.1f MB\t|\n", p.K, p.Nodes, p.Chains,
			secs(p.Deploy.Seconds()), secs(p.CPU.Seconds()), p.MaxRSSMB, float64(p.StateBytes)/1e6)
	}
	return tw.Flush()
}
