package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/agent"
	"github.com/srchain/srchain/internal/controller"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/store"
)

// The northbound benchmark (`srchain bench api`, issue 12): the
// controller (`srchain serve`'s handler on an embedded etcd) and one real
// agent per node of the control bench's spec (ControlSpec), each applying
// its namespace, all in this process. Per round and chain count it times
//   - APIStepDeploy: PUT /v1/spec with n chains until every agent reports
//     the desired generation applied (the controller's status API);
//   - APIStepChange: PUT /v1/chains/<c> adding fw2 to one chain (and back,
//     alternately) until the ingress's kernel route for that chain carries
//     the new segment list: what the datapath forwards with, read with
//     netlink every millisecond. --changes samples per round.

// API bench steps.
const (
	APIStepDeploy = "api: spec in, every agent in sync"
	// APIStepDeployCPU is the CPU time (user + system) this process, the
	// controller, its etcd and every agent, spent on APIStepDeploy.
	APIStepDeployCPU = "api: CPU time of that deploy (controller, etcd, agents)"
	APIStepChange    = "api: 1 chain changed, ingress route updated"
)

// APIOptions tune RunAPI.
type APIOptions struct {
	Chains  []int
	Rounds  int
	Changes int // chain changes timed per round
	Logger  *slog.Logger
	// Prefix names the namespaces (<Prefix><chains>-<node>), at most 8
	// characters.
	Prefix string
}

// APIPoint is a ControlPoint with the 99th percentile (change latency).
type APIPoint struct {
	ControlPoint
	P99 float64 `json:"p99_seconds"`
}

// RunAPI runs every round of every chain count. Namespaces, agents and
// the store it made are removed when a round ends, also on failure.
func RunAPI(ctx context.Context, o APIOptions) ([]APIPoint, error) {
	if o.Rounds < 1 || o.Changes < 1 || len(o.Chains) == 0 || o.Prefix == "" || len(o.Prefix) > 8 {
		return nil, fmt.Errorf("api bench: need rounds and changes >= 1, chain counts and a prefix of 1..8 characters: %w", ErrBadOptions)
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	var out []APIPoint
	for _, n := range o.Chains {
		if n < 2 {
			return nil, fmt.Errorf("api bench: %d chains: want at least 2: %w", n, ErrBadOptions)
		}
		times := map[string][]time.Duration{}
		for r := range o.Rounds {
			got, err := apiRound(ctx, o, n, log)
			if err != nil {
				return out, fmt.Errorf("api bench %d chains, round %d: %w", n, r+1, err)
			}
			for k, d := range got {
				times[k] = append(times[k], d...)
			}
			log.Info("api round", "chains", n, "round", r+1, "deploy", got[APIStepDeploy][0].Round(time.Millisecond),
				"cpu", got[APIStepDeployCPU][0].Round(time.Millisecond), "max_rss_mb", maxRSSMB())
		}
		for _, step := range []string{APIStepDeploy, APIStepDeployCPU, APIStepChange} {
			secs := make([]float64, len(times[step]))
			for i, d := range times[step] {
				secs[i] = d.Seconds()
			}
			sum, _ := Summarize(secs)
			slices.Sort(secs)
			p99 := secs[min(len(secs)-1, len(secs)*99/100)]
			out = append(out, APIPoint{ControlPoint: ControlPoint{Chains: n, Step: step, Rounds: times[step], Summary: sum}, P99: p99})
		}
	}
	return out, nil
}

type apiWorld struct {
	st      *store.Store
	srv     *http.Server
	cl      *controller.Client
	nss     map[string]*netns.NS
	cancels []context.CancelFunc
	done    []chan error
	dir     string
}

func (w *apiWorld) close() error {
	var errs []error
	for _, c := range w.cancels {
		c()
	}
	for _, d := range w.done {
		<-d
	}
	if w.srv != nil {
		errs = append(errs, w.srv.Close())
	}
	if w.st != nil {
		errs = append(errs, w.st.Close())
	}
	for _, ns := range w.nss {
		errs = append(errs, ns.Delete())
	}
	errs = append(errs, os.RemoveAll(w.dir))
	return errors.Join(errs...)
}

func loopbackURL() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return "http://" + l.Addr().String(), nil
}

// apiRound sets up the store, the controller, the namespaces and the
// agents, deploys n chains through the API, times o.Changes chain changes
// and tears everything down.
func apiRound(ctx context.Context, o APIOptions, n int, log *slog.Logger) (got map[string][]time.Duration, err error) {
	name := fmt.Sprintf("%s%d", o.Prefix, n)
	doc := ControlSpec(name, n, false)
	net0, err := compileSpec(doc, name+".yaml")
	if err != nil {
		return nil, err
	}
	w, err := startController(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, w.close()) }()

	// One namespace per node and the links, as the lab makes them; the
	// agents apply everything else.
	for _, nd := range net0.Nodes {
		ns, err := netns.Create(fmt.Sprintf("%s-%s", name, nd.Name))
		if err != nil {
			return nil, err
		}
		w.nss[nd.Name] = ns
	}
	for _, lk := range net0.Links {
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: lk.A.Interface, MTU: lk.MTU, Namespace: netlink.NsFd(w.nss[lk.A.Node].Handle())},
			PeerName:      lk.B.Interface,
			PeerMTU:       uint32(max(lk.MTU, 0)),
			PeerNamespace: netlink.NsFd(w.nss[lk.B.Node].Handle()),
		}
		if err := netlink.LinkAdd(veth); err != nil {
			return nil, fmt.Errorf("api bench: add link %v: %w", lk, err)
		}
	}
	for _, nd := range net0.Nodes {
		// With a state file, as `srchain agent` keeps one.
		a, err := agent.New(agent.Config{Node: nd.Name, NS: w.nss[nd.Name], Client: w.st.Client(), Version: "bench",
			Resync: time.Hour, Logger: log.With("node", nd.Name), StateFile: filepath.Join(w.dir, "agent", nd.Name+".json")})
		if err != nil {
			return nil, err
		}
		actx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- a.Run(actx) }()
		w.cancels, w.done = append(w.cancels, cancel), append(w.done, done)
	}

	got = map[string][]time.Duration{}
	jdoc, err := controller.DocFromYAML(doc)
	if err != nil {
		return nil, err
	}
	cpu0 := cpuTime()
	t0 := time.Now()
	if err := w.cl.Do(ctx, "PUT", "/v1/spec", jdoc, nil); err != nil {
		return nil, fmt.Errorf("put spec: %w", err)
	}
	if err := w.inSync(ctx, net0.Nodes, 5*time.Minute); err != nil {
		return nil, err
	}
	got[APIStepDeploy] = []time.Duration{time.Since(t0)}
	got[APIStepDeployCPU] = []time.Duration{cpuTime() - cpu0}

	// The changed chain has a destination prefix of its own (odd index):
	// its SR policy is a route in r1's main table.
	idx := n/2 | 1
	chain := fmt.Sprintf("c%d", idx)
	dst := netip.MustParsePrefix(fmt.Sprintf("fd00:%x::/64", idx))
	var c map[string]any
	if err := w.cl.Do(ctx, "GET", "/v1/chains/"+chain, nil, &c); err != nil {
		return nil, fmt.Errorf("get chain: %w", err)
	}
	r1 := w.nss["r1"]
	base, err := segCount(r1, dst)
	if err != nil {
		return nil, err
	}
	for i := range o.Changes {
		want := base
		if i%2 == 0 {
			c["nfs"] = []string{"fw", "fw2"}
			want = base + 1
		} else {
			c["nfs"] = []string{"fw"}
		}
		body, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("encode chain: %w", err)
		}
		t0 := time.Now()
		if err := w.cl.Do(ctx, "PUT", "/v1/chains/"+chain, body, nil); err != nil {
			return nil, fmt.Errorf("put chain: %w", err)
		}
		for {
			k, err := segCount(r1, dst)
			if err != nil {
				return nil, err
			}
			if k == want {
				break
			}
			if time.Since(t0) > time.Minute {
				return nil, fmt.Errorf("change %d: route %s still has %d segments after a minute, want %d", i, dst, k, want)
			}
			time.Sleep(time.Millisecond)
		}
		got[APIStepChange] = append(got[APIStepChange], time.Since(t0))
	}
	return got, nil
}

// startController starts an embedded etcd and the controller's API on
// loopback ports, with its data in a new temporary directory.
func startController(ctx context.Context) (w *apiWorld, err error) {
	dir, err := os.MkdirTemp("", "srchain-api-bench-")
	if err != nil {
		return nil, fmt.Errorf("api bench: %w", err)
	}
	w = &apiWorld{dir: dir, nss: map[string]*netns.NS{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, w.close())
		}
	}()
	curl, err := loopbackURL()
	if err != nil {
		return nil, err
	}
	purl, err := loopbackURL()
	if err != nil {
		return nil, err
	}
	if w.st, err = store.Open(ctx, store.Config{DataDir: dir, ClientURL: curl, PeerURL: purl, LogFile: filepath.Join(dir, "etcd.log")}); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("api bench: listen: %w", err)
	}
	const token = "bench-token"
	w.srv = &http.Server{Handler: controller.New(w.st).Handler(token), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = w.srv.Serve(l) }()
	w.cl = &controller.Client{Server: "http://" + l.Addr().String(), Token: token}
	return w, nil
}

// inSync waits until every node's agent applied its desired generation.
func (w *apiWorld) inSync(ctx context.Context, nodes []state.Node, limit time.Duration) error {
	end := time.Now().Add(limit)
	for _, nd := range nodes {
		for {
			var st controller.Status
			if err := w.cl.Do(ctx, "GET", "/v1/nodes/"+nd.Name+"/status", nil, &st); err != nil {
				return fmt.Errorf("status of %s: %w", nd.Name, err)
			}
			if st.LastError != "" {
				return fmt.Errorf("agent %s: %s", nd.Name, st.LastError)
			}
			if st.InSync {
				break
			}
			if time.Now().After(end) {
				return fmt.Errorf("agent %s not in sync after %v", nd.Name, limit)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// segCount is the number of segments of the seg6 encap route that
// matches dst in ns (0: another route, or none): one RTM_GETROUTE with
// RTM_F_FIB_MATCH, not a dump of the 10,000-route table per poll.
func segCount(ns *netns.NS, dst netip.Prefix) (int, error) {
	rs, err := ns.Netlink().RouteGetWithOptions(dst.Addr().AsSlice(), &netlink.RouteGetOptions{FIBMatch: true})
	if err != nil {
		return 0, fmt.Errorf("read route %s: %w", dst, err)
	}
	for _, r := range rs {
		if e, ok := r.Encap.(*netlink.SEG6Encap); ok {
			return len(e.Segments), nil
		}
	}
	return 0, nil
}

// WriteAPI prints the points as a markdown table: per chain count and
// step, the median, min..max and 99th percentile over the samples.
func WriteAPI(w io.Writer, pts []APIPoint) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	fmt.Fprintln(tw, "| chains\t| step\t| median\t| min .. max\t| p99\t| samples\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|---\t|")
	for _, p := range pts {
		fmt.Fprintf(tw, "| %d\t| %s\t| %s\t| %s .. %s\t| %s\t| %d\t|\n", p.Chains, p.Step,
			secs(p.Summary.Median), secs(p.Summary.Min), secs(p.Summary.Max), secs(p.P99), p.Summary.N)
	}
	return tw.Flush()
}

// cpuTime is this process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// maxRSSMB is this process's peak resident memory in MiB.
func maxRSSMB() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss / 1024 // kilobytes on Linux
}
