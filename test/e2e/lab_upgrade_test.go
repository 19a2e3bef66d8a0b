package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

// TestLabUpgrade: what an upgraded srchain finds on a running lab, every
// tcx link srchain pinned running another build's code, is reported by
// lab status; re-applying each node (`lab apply NAME`) puts this build's
// programs back in every link, whatever driver pinned it, and every probe
// of the spec passes again. One lab per driver with tcx links: the
// firewall (sera-firewall), the SR proxies, End.AN.NF, OPoT's stages and
// the eBPF ingress (the End's: TestApplyEndOtherBuild). The OPoT and
// ingress drivers used to swap such links without counting a change,
// and their Checks did not see them.
func TestLabUpgrade(t *testing.T) {
	requireRoot(t)
	for i, file := range []string{"sera-firewall.yaml", "proxy-testbed.yaml", "anf-testbed.yaml", "opot-testbed.yaml", "ingress-ebpf.yaml"} {
		t.Run(file, func(t *testing.T) { labUpgrade(t, file, fmt.Sprintf("u%d", i)) })
	}
}

// tcxLinkPins lists the pinned tcx links under the lab node's pin
// directory.
func tcxLinkPins(t *testing.T, netName, node string) []string {
	t.Helper()
	var out []string
	dir := filepath.Join(kind.PinRoot, lab.NSName(netName, node))
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		l, err := link.LoadPinnedLink(path, nil)
		if err != nil {
			return nil // a map or program pin
		}
		defer l.Close()
		if info, err := l.Info(); err == nil && info.TCX() != nil {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// linkProgram is the name of the program the link pinned at path runs.
func linkProgram(t *testing.T, path string) string {
	t.Helper()
	prog, err := bpfrt.PinnedLinkProgram(path)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	return info.Name
}

func labUpgrade(t *testing.T, file, tag string) {
	s, net := example(t, file, tag)
	opts := up(t, net)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	other := testutil.OtherBuild(t, ebpf.SchedCLS, "other_build")
	swapped := map[string][]string{} // node -> link pins
	for _, n := range net.Nodes {
		for _, path := range tcxLinkPins(t, net.Name, n.Name) {
			l, err := link.LoadPinnedLink(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = l.Update(other)
			l.Close()
			if err != nil {
				t.Fatalf("put another build's program in %s: %v", path, err)
			}
			swapped[n.Name] = append(swapped[n.Name], path)
		}
	}
	if len(swapped) == 0 {
		t.Fatalf("%s: no tcx link pinned in the lab", file)
	}
	sts, err := lab.Status(ctx, net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if len(swapped[st.Node]) > 0 && !strings.Contains(strings.Join(st.Problems, "\n"), "another build's code") {
			t.Errorf("status of %s with another build's links: %q", st.Node, st.Problems)
		}
	}
	for _, n := range net.Nodes {
		if len(swapped[n.Name]) == 0 {
			continue
		}
		applyNode(t, ctx, net.Name, n, opts)
		for _, path := range swapped[n.Name] {
			if got := linkProgram(t, path); got == "other_build" {
				t.Errorf("%s: %s still runs another build's program after apply", n.Name, path)
			}
		}
	}
	if sts, err = lab.Status(ctx, net.Name, opts); err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if !st.OK() {
			t.Errorf("status of %s after the apply: %q", st.Node, st.Problems)
		}
	}
	pr, err := lab.NewProber(net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	for _, p := range probes(s) {
		if res, out := run(t, pr, p); !res.OK {
			t.Errorf("probe %s after the upgrade:\n%s", p.Name, out)
		}
	}
}

// applyNode re-applies node n of the lab, as `lab apply NAME` does.
func applyNode(t *testing.T, ctx context.Context, netName string, n state.Node, opts lab.Options) {
	t.Helper()
	ns, err := lab.Open(netName, n.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if res, err := apply.ApplyWith(ctx, ns, n, apply.Options{}); err != nil || res.Changes == 0 {
		t.Errorf("apply %s over another build's links: %d changes, %v; want the links swapped", n.Name, res.Changes, err)
	}
}
