package end_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/datapath"
	"github.com/srchain/srchain/internal/kind"
	_ "github.com/srchain/srchain/internal/kinds/end"
	"github.com/srchain/srchain/internal/kinds/kindtest"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/opotdp"
	"github.com/srchain/srchain/internal/pipeline"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

func p(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func ad(s string) netip.Addr  { return netip.MustParseAddr(s) }

func endLinkPin(pin string, ifindex int) string {
	return fmt.Sprintf("%s/tcx_ingress_%d", pin, ifindex)
}

// pair is two namespaces with eth0 and the pin directory of the first
// removed at the end.
func pair(t *testing.T, tag string) *netns.NS {
	a, _ := kindtest.Pair(t, tag)
	t.Cleanup(func() { _ = os.RemoveAll(kind.PinDir(a)) })
	return a
}

func endNode() state.Node {
	return state.Node{
		Name:       "r2",
		Interfaces: []state.Interface{{Name: "eth0", Addrs: []netip.Prefix{p("fc00:12::2/64")}}},
		SIDs: []state.LocalSID{
			{SID: p("fc00:2::f1/128"), Behavior: state.End, Datapath: state.EBPF},
			{SID: p("fc00:2::f2/128"), Behavior: state.EndX, NH6: ad("fc00:12::1"), OIF: "eth0", Datapath: state.EBPF},
		},
		Programs: []state.Program{{Kind: "end", Interfaces: []string{"eth0"}}},
	}
}

// openFDs counts this process's BPF file descriptors (programs, maps,
// links: anon_inode:bpf-*). Other descriptors come and go with the Go
// runtime and the netlink library (a CI run once saw one more socket),
// and say nothing about a kept End handle.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(target, "anon_inode:bpf") {
			n++
		}
	}
	return n
}

// TestApplyEndStalePin: a link pin whose link no longer runs on the
// interface does not count as attached: re-apply attaches the program.
// Apply holds no End handle (file descriptors) once it returned.
func TestApplyEndStalePin(t *testing.T) {
	a := pair(t, "e")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := endNode()
	if err := apply.Apply(ctx, a, node); err != nil { // pins exist from here on
		t.Fatal(err)
	}
	fds := openFDs(t)
	if res, err := apply.ApplyWith(ctx, a, node, apply.Options{}); err != nil || res.Changes != 0 {
		t.Fatalf("re-apply = %d changes, %v", res.Changes, err)
	}
	l, _ := a.Netlink().LinkByName("eth0")
	pin := endLinkPin(kind.PinDir(a), l.Attrs().Index)
	// Sever the link from the interface; its pin stays.
	pl, err := link.LoadPinnedLink(pin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pl.Detach(); err != nil {
		t.Fatalf("detach pinned link: %v", err)
	}
	pl.Close()
	if names, _ := apply.IngressPrograms(a, "eth0"); len(names) != 0 {
		t.Fatalf("programs after detach: %v", names)
	}
	if missing, err := apply.CheckPrograms(ctx, a, node); err != nil || len(missing) == 0 {
		t.Errorf("check with a stale pin = %v, %v; want the program reported", missing, err)
	}
	res, err := apply.ApplyWith(ctx, a, node, apply.Options{})
	if err != nil || res.Changes == 0 {
		t.Fatalf("apply over a stale pin = %d changes, %v; want the program attached again", res.Changes, err)
	}
	if names, _ := apply.IngressPrograms(a, "eth0"); !slices.Equal(names, []string{"srchain_end"}) {
		t.Errorf("ingress programs = %v, want [srchain_end]", names)
	}
	if missing, err := apply.CheckPrograms(ctx, a, node); err != nil || len(missing) != 0 {
		t.Errorf("check after re-attach = %v, %v", missing, err)
	}
	if res, err := apply.ApplyWith(ctx, a, node, apply.Options{}); err != nil || res.Changes != 0 {
		t.Errorf("re-apply = %d changes, %v; want 0", res.Changes, err)
	}
	if now := openFDs(t); now > fds {
		t.Errorf("%d file descriptors open after three applies, %d before: the End handle is kept", now, fds)
	}
}

// TestApplyEndOtherBuild: an End link that runs other code (what an
// older srchain left attached) is reported by Check and swapped for this
// build's End by the next apply, which otherwise leaves it alone.
func TestApplyEndOtherBuild(t *testing.T) {
	a := pair(t, "ob")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := endNode()
	if err := apply.Apply(ctx, a, node); err != nil {
		t.Fatal(err)
	}
	l, _ := a.Netlink().LinkByName("eth0")
	pl, err := link.LoadPinnedLink(endLinkPin(kind.PinDir(a), l.Attrs().Index), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	other := testutil.OtherBuild(t, ebpf.SchedCLS, "srchain_end")
	if err := pl.Update(other); err != nil {
		t.Fatal(err)
	}
	if missing, err := apply.CheckPrograms(ctx, a, node); err != nil || len(missing) != 1 || !strings.Contains(missing[0], "another build's code") {
		t.Errorf("check with another build's End = %v, %v", missing, err)
	}
	res, err := apply.ApplyWith(ctx, a, node, apply.Options{})
	if err != nil || res.Changes == 0 {
		t.Fatalf("apply over another build's End = %d changes, %v; want it swapped", res.Changes, err)
	}
	if same, err := bpfrt.LinkRuns(pl, other); err != nil || same {
		t.Errorf("the End link still runs the other build's code (%v)", err)
	}
	if missing, err := apply.CheckPrograms(ctx, a, node); err != nil || len(missing) != 0 {
		t.Errorf("check after the swap = %v, %v", missing, err)
	}
	if res, err := apply.ApplyWith(ctx, a, node, apply.Options{}); err != nil || res.Changes != 0 {
		t.Errorf("re-apply = %d changes, %v; want 0", res.Changes, err)
	}
}

// TestApplyEndSIDUndo: a SID whose entry differs is rewritten, and a failed
// apply restores the old entry; Check reports the difference.
func TestApplyEndSIDUndo(t *testing.T) {
	a := pair(t, "u")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := endNode()
	if err := apply.Apply(ctx, a, node); err != nil {
		t.Fatal(err)
	}
	sid := ad("fc00:2::f2")
	other := ad("fc00:12::9")
	setSID := func(b datapath.Behavior, oif int, nh6 netip.Addr) {
		t.Helper()
		end, err := datapath.LoadEnd(datapath.EndOptions{PinPath: kind.PinDir(a)})
		if err != nil {
			t.Fatal(err)
		}
		defer end.Close()
		if err := end.SetSID(sid, b, oif, nh6); err != nil {
			t.Fatal(err)
		}
	}
	getSID := func() datapath.SIDEntry {
		t.Helper()
		end, err := datapath.LoadEnd(datapath.EndOptions{PinPath: kind.PinDir(a)})
		if err != nil {
			t.Fatal(err)
		}
		defer end.Close()
		e, ok, err := end.SID(sid)
		if err != nil || !ok {
			t.Fatalf("sid %s: %v, %v", sid, ok, err)
		}
		return e
	}
	l, _ := a.Netlink().LinkByName("eth0")
	setSID(datapath.BehaviorEndX, l.Attrs().Index, other)
	changed := getSID()
	missing, err := apply.CheckPrograms(ctx, a, node)
	if err != nil || len(missing) != 1 || !strings.Contains(missing[0], "want End.X") {
		t.Errorf("check with a changed sid = %q, %v", missing, err)
	}

	failing := node
	failing.Programs = append(slices.Clone(node.Programs), state.Program{Kind: "boom"})
	drivers := kind.Drivers()
	drivers["boom"] = apply.DriverFunc(func(*netns.NS, state.Node, state.Program) (func() error, error) {
		return nil, errors.New("injected failure")
	})
	if _, err := apply.ApplyWith(ctx, a, failing, apply.Options{Drivers: drivers}); err == nil || strings.Contains(err.Error(), "roll back") {
		t.Fatalf("apply with failing driver = %v, want the injected failure and a clean roll back", err)
	}
	if got := getSID(); got != changed {
		t.Errorf("sid after a failed apply = %+v, want the old entry %+v", got, changed)
	}
	if names, _ := apply.IngressPrograms(a, "eth0"); !slices.Equal(names, []string{"srchain_end"}) {
		t.Errorf("ingress programs after a failed re-apply = %v", names)
	}
	res, err := apply.ApplyWith(ctx, a, node, apply.Options{})
	if err != nil || res.Changes != 1 {
		t.Fatalf("apply = %d changes, %v; want 1 (the sid)", res.Changes, err)
	}
	if got := getSID(); got.NH6 != ad("fc00:12::1") {
		t.Errorf("sid after apply = %+v", got)
	}
	if missing, err := apply.CheckPrograms(ctx, a, node); err != nil || len(missing) != 0 {
		t.Errorf("check after apply = %v, %v", missing, err)
	}
}

// TestCheckProgramsByName: another program on the interface is not the
// End program.
func TestCheckProgramsByName(t *testing.T) {
	a := pair(t, "n")
	ctx := context.Background()
	node := state.Node{Name: "r2", Programs: []state.Program{{Kind: "end", Interfaces: []string{"eth0"}}}}
	if err := os.MkdirAll(kind.PinDir(a), 0o700); err != nil {
		t.Fatal(err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "decoy", Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}}) // TCX_NEXT
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	l, _ := a.Netlink().LinkByName("eth0")
	var tl link.Link
	if err := a.Do(func() (err error) {
		tl, err = link.AttachTCX(link.TCXOptions{Interface: l.Attrs().Index, Program: prog, Attach: ebpf.AttachTCXIngress})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	missing, err := apply.CheckPrograms(ctx, a, node)
	if err != nil || !slices.Contains(missing, "program end (srchain_end) not attached on eth0") {
		t.Errorf("check with only a decoy attached = %q, %v", missing, err)
	}
}

// TestApplyEndRecreatedNamespace: a namespace deleted and created again
// under the same name keeps its pin directory (maps, the old link pins,
// the old namespace's claim): Check reports the program missing, Apply
// attaches it again and claims the directory, and a re-apply changes
// nothing.
func TestApplyEndRecreatedNamespace(t *testing.T) {
	a := pair(t, "r")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := endNode()
	if err := apply.Apply(ctx, a, node); err != nil {
		t.Fatal(err)
	}
	a.Close() // no handle keeps the old namespace alive
	a = pair(t, "r")
	if _, err := os.Stat(kind.PinDir(a)); err != nil {
		t.Fatalf("pin dir of the old namespace: %v", err)
	}
	if missing, err := apply.CheckPrograms(ctx, a, node); err != nil || !slices.Contains(missing, "program end (srchain_end) not attached on eth0") {
		t.Errorf("check in the recreated namespace = %q, %v; want the program reported", missing, err)
	}
	res, err := apply.ApplyWith(ctx, a, node, apply.Options{})
	if err != nil || res.Changes == 0 {
		t.Fatalf("apply in the recreated namespace = %d changes, %v; want the program attached", res.Changes, err)
	}
	if names, _ := apply.IngressPrograms(a, "eth0"); !slices.Equal(names, []string{"srchain_end"}) {
		t.Errorf("ingress programs = %v, want [srchain_end]", names)
	}
	if missing, err := apply.CheckPrograms(ctx, a, node); err != nil || len(missing) != 0 {
		t.Errorf("check after apply = %q, %v", missing, err)
	}
	if res, err := apply.ApplyWith(ctx, a, node, apply.Options{}); err != nil || res.Changes != 0 {
		t.Errorf("re-apply = %d changes, %v; want 0", res.Changes, err)
	}
}

// TestCheckEndForeignClaim: link pins recorded for another namespace
// (the pin directory's claim, bpfrt.ClaimPinDir) are not this
// namespace's, whatever program runs: Check reports the program, Apply
// attaches it afresh under this namespace's claim. The program tag and
// map IDs of the link's program match; they decide nothing.
func TestCheckEndForeignClaim(t *testing.T) {
	a := pair(t, "c")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := endNode()
	if err := apply.Apply(ctx, a, node); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(kind.PinDir(a))
	if err != nil {
		t.Fatal(err)
	}
	moved := false
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "netns-") {
			if err := os.Rename(kind.PinDir(a)+"/"+e.Name(), kind.PinDir(a)+"/netns-1-2"); err != nil {
				t.Fatal(err)
			}
			moved = true
		}
	}
	if !moved {
		t.Fatalf("no namespace claim in %s: %v", kind.PinDir(a), ents)
	}
	if missing, err := apply.CheckPrograms(ctx, a, node); err != nil || len(missing) != 1 || !strings.Contains(missing[0], "eth0") {
		t.Errorf("check under another namespace's claim = %q, %v; want the program on eth0 reported", missing, err)
	}
	res, err := apply.ApplyWith(ctx, a, node, apply.Options{})
	if err != nil || res.Changes == 0 {
		t.Fatalf("apply = %d changes, %v; want the program attached afresh", res.Changes, err)
	}
	if names, _ := apply.IngressPrograms(a, "eth0"); !slices.Equal(names, []string{"srchain_end"}) {
		t.Errorf("ingress programs = %v, want [srchain_end]", names)
	}
	if missing, err := apply.CheckPrograms(ctx, a, node); err != nil || len(missing) != 0 {
		t.Errorf("check after apply = %q, %v", missing, err)
	}
}

// TestApplyEndARGSSID: a SID with ARGS bits (LOC+FUNCT /120) is stored
// under its masked address with its length, Check accepts it as applied,
// and the SID keeps its kernel seg6local route as the slow path (issue
// 8: the map held the masked SID, the program looked the destination up
// exactly and dropped every packet).
func TestApplyEndARGSSID(t *testing.T) {
	a := pair(t, "g")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := endNode()
	node.SIDs = append(node.SIDs, state.LocalSID{SID: p("fc00:2::100/120"), Behavior: state.End, Datapath: state.EBPF})
	if err := apply.Apply(ctx, a, node); err != nil {
		t.Fatal(err)
	}
	end, err := datapath.LoadEnd(datapath.EndOptions{PinPath: kind.PinDir(a)})
	if err != nil {
		t.Fatal(err)
	}
	e, ok, err := end.SID(ad("fc00:2::100"))
	end.Close()
	if err != nil || !ok || e.Bits != 120 || e.Behavior != datapath.BehaviorEnd {
		t.Fatalf("SID(fc00:2::100) = %+v, %v, %v; want End /120", e, ok, err)
	}
	if missing, err := apply.CheckPrograms(ctx, a, node); err != nil || len(missing) != 0 {
		t.Errorf("check = %v, %v", missing, err)
	}
	if res, err := apply.ApplyWith(ctx, a, node, apply.Options{}); err != nil || res.Changes != 0 {
		t.Errorf("re-apply = %d changes, %v; want 0", res.Changes, err)
	}
	out, err := a.Run(ctx, "ip", "-6", "route", "show", "fc00:2::100/120")
	if err != nil || !strings.Contains(out, "seg6local") {
		t.Errorf("kernel route of the eBPF SID (slow path) = %q, %v", out, err)
	}
}

// TestApplyEndXDP: an End config with XDP attaches the XDP twin too
// (pinned, found again by a re-apply that changes nothing, reported by
// Check when detached by hand), and a config without it takes the twin
// away again while tc keeps serving.
func TestApplyEndXDP(t *testing.T) {
	a := pair(t, "x")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := endNode()
	node.Programs[0].XDP = true
	node.Programs = append(node.Programs, state.Program{Kind: state.ProgramPipeline, Interfaces: node.Programs[0].Interfaces,
		Config: []byte(`{"stages":["end"]}`)})
	if err := apply.Apply(ctx, a, node); err != nil {
		t.Fatal(err)
	}
	xdpName := func() string {
		name, err := apply.XDPProgram(a, "eth0")
		if err != nil {
			t.Fatal(err)
		}
		return name
	}
	if got := xdpName(); got != pipeline.ProgName {
		t.Fatalf("xdp program on eth0 = %q, want %s", got, pipeline.ProgName)
	}
	m, err := pipeline.OpenMaps(pipeline.NodeDir(a))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	active, err := m.Active()
	if err != nil || len(active) != 1 || active[pipeline.End] == 0 {
		t.Errorf("pipeline runs %v, %v; want the end stage only", active, err)
	}
	if missing, err := apply.CheckPrograms(ctx, a, node); err != nil || len(missing) != 0 {
		t.Errorf("check = %v, %v", missing, err)
	}
	if res, err := apply.ApplyWith(ctx, a, node, apply.Options{}); err != nil || res.Changes != 0 {
		t.Errorf("re-apply = %d changes, %v; want 0", res.Changes, err)
	}
	// Another srchain build's End stage pinned (what an older release
	// left): the next apply pins this build's, and the pipeline runs it.
	other := testutil.OtherBuild(t, ebpf.XDP, "srchain_end_xdp")
	if err := pipeline.PinStage(pipeline.NodeDir(a), pipeline.End, other); err != nil {
		t.Fatal(err)
	}
	if missing, err := apply.CheckPrograms(ctx, a, node); err != nil || !strings.Contains(strings.Join(missing, "\n"), "end stage (or an older build's)") {
		t.Errorf("check with another build's End stage = %q, %v", missing, err)
	}
	if res, err := apply.ApplyWith(ctx, a, node, apply.Options{}); err != nil || res.Changes == 0 {
		t.Fatalf("apply over another build's End stage = %d changes, %v; want a change", res.Changes, err)
	}
	staged, err := ebpf.LoadPinnedProgram(pipeline.StagePin(pipeline.NodeDir(a), pipeline.End), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer staged.Close()
	if same, err := bpfrt.SameCode(staged, other); err != nil || same {
		t.Errorf("the End stage pin still holds the other build's code (%v)", err)
	}
	sinfo, _ := staged.Info()
	sid, _ := sinfo.ID()
	if active, err := m.Active(); err != nil || active[pipeline.End] != sid {
		t.Errorf("pipeline runs %v, %v; want the End stage %d", active, err, sid)
	}
	// Detached by hand: unpin and close the link, as an operator with
	// bpftool would.
	l, err := a.Netlink().LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	pin := fmt.Sprintf("%s/xdp_%d", pipeline.NodeDir(a), l.Attrs().Index)
	lk, err := link.LoadPinnedLink(pin, nil)
	if err != nil {
		t.Fatalf("xdp link pin: %v", err)
	}
	if err := lk.Unpin(); err != nil {
		t.Fatal(err)
	}
	if err := lk.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing the last reference releases the link after an RCU grace
	// period; wait for the kernel to say so.
	for i := 0; xdpName() != "" && i < 100; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if missing, err := apply.CheckPrograms(ctx, a, node); err != nil || len(missing) != 1 || !strings.Contains(missing[0], "not attached at xdp") {
		t.Errorf("check after detach = %v, %v; want the missing dispatcher", missing, err)
	}
	if err := apply.Apply(ctx, a, node); err != nil || xdpName() != pipeline.ProgName {
		t.Fatalf("repair: %v, xdp %q", err, xdpName())
	}
	prev := node
	node = endNode()
	if _, err := apply.ApplyWith(ctx, a, node, apply.Options{Remove: &prev}); err != nil {
		t.Fatal(err)
	}
	if got := xdpName(); got != "" {
		t.Errorf("xdp program after the node dropped xdp = %q, want none", got)
	}
	if active, err := m.Active(); err != nil || len(active) != 0 {
		t.Errorf("pipeline after the node dropped xdp runs %v, %v; want nothing", active, err)
	}
	if missing, err := apply.CheckPrograms(ctx, a, node); err != nil || len(missing) != 0 {
		t.Errorf("check tc only = %v, %v", missing, err)
	}
}

// opotNode is endNode with an OPoT chain whose transit at fc00:2::f1 the
// End does itself (the OPoT program applied first pins the maps); with
// inEnd false the End program is not told so.
func opotNode(t *testing.T, inEnd bool) state.Node {
	t.Helper()
	node := endNode()
	cfg, err := json.Marshal(state.OPoTConfig{Chains: []state.OPoTChain{{
		Name: "c", Profile: 1, Role: state.OPoTTransit, Hop: 1, K: 3, SID: ad("fc00:2::f1"), Last: ad("fc00:9::c"), InEnd: true,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	node.Secrets = []state.Secret{kindtest.OPoTTransitSecret(t, "c")}
	end := node.Programs[0]
	if inEnd {
		end.Config = json.RawMessage(`{"opot":true}`)
	}
	node.Programs = []state.Program{{Kind: state.ProgramOPoT, Interfaces: []string{"eth0"}, Config: cfg}, end}
	return node
}

// The End told to do the transit (EndConfig.OPoT) reads the OPoT
// driver's pinned maps, which Check verifies; told no longer, it is
// swapped for one that does not (Check against the OPoT config then
// reports it). No OPoT stage runs on the interface either way.
func TestApplyEndOPoT(t *testing.T) {
	a := pair(t, "op")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	with, without := opotNode(t, true), opotNode(t, false)
	const want = "end program on eth0 does not read the node's opot maps (the transit in the end)"
	for i, step := range []struct {
		apply state.Node
		drift bool
	}{{without, true}, {with, false}, {with, false}, {without, true}} {
		if err := apply.Apply(ctx, a, step.apply); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		drift, err := apply.CheckPrograms(ctx, a, with)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(drift, want); got != step.drift {
			t.Errorf("step %d: drift %q, want the opot maps unread: %v", i, drift, step.drift)
		}
		progs, err := apply.IngressPrograms(a, "eth0")
		if err != nil || !slices.Equal(progs, []string{"srchain_end"}) {
			t.Errorf("step %d: eth0 tcx ingress runs %v (%v), want srchain_end alone", i, progs, err)
		}
	}
}

// wrapped is a driver whose Apply first calls before (the state of the
// node at the moment that driver runs).
type wrapped struct {
	kind.Driver
	before func()
}

func (w wrapped) Apply(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	w.before()
	return w.Driver.Apply(ctx, ns, node, p)
}

// finishing is a Finisher whose Finish first calls before.
type finishing struct {
	kind.Driver
	before func()
}

func (f finishing) Finish(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	f.before()
	return f.Driver.(kind.Finisher).Finish(ctx, ns, node, p)
}

// TestApplyEndOPoTHitlessXDP: moving a chain's transit from the XDP
// pipeline's OPoT stage into the XDP End keeps the stage in the pipeline
// (held) in front of the End that reads the maps until the OPoT driver's
// Finish marks the entry; the pipeline's Finish then drops the stage.
// Moving it back, the stage joins the running pipeline before the entry
// is unmarked. At no point does the active pipeline run an End that
// does not do the transit without the stage that does.
func TestApplyEndOPoTHitlessXDP(t *testing.T) {
	a := pair(t, "ox")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	xdp := func(n state.Node, stages string) state.Node {
		n.Programs[1].XDP = true
		return withPipeline(n, stages)
	}
	stage := xdp(stageNode(t), `["opot","end"]`)
	stage.Programs[0].XDP = true
	inEnd := xdp(opotNode(t, true), `["end"]`)
	dir := pipeline.NodeDir(a)
	m, err := pipeline.OpenMaps(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	pinned := func(s pipeline.Stage) ebpf.ProgramID {
		p, err := ebpf.LoadPinnedProgram(pipeline.StagePin(dir, s), nil)
		if err != nil {
			return 0
		}
		defer p.Close()
		id, _ := bpfrt.ProgramID(p)
		return id
	}
	active := func() map[pipeline.Stage]ebpf.ProgramID {
		got, err := m.Active()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if err := apply.Apply(ctx, a, stage); err != nil {
		t.Fatal(err)
	}
	if got := active(); got[pipeline.OPoT] == 0 || got[pipeline.End] == 0 || chainFlags(t, a) != 0 {
		t.Fatalf("transit at the xdp stage: pipeline %v, flags %#x", got, chainFlags(t, a))
	}
	drivers := kind.Drivers()
	ran := false
	drivers[state.ProgramOPoT] = finishing{Driver: drivers[state.ProgramOPoT], before: func() {
		ran = true
		got := active()
		if got[pipeline.OPoT] == 0 || got[pipeline.End] != pinned(pipeline.End) || chainFlags(t, a) != 0 {
			t.Errorf("before the opot finish: pipeline %v (end stage pinned %d), flags %#x; want the held opot stage in front of the new end, no mark",
				got, pinned(pipeline.End), chainFlags(t, a))
		}
	}}
	if _, err := apply.ApplyWith(ctx, a, inEnd, apply.Options{Drivers: drivers}); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("the opot driver's finish did not run")
	}
	if got := active(); len(got) != 1 || got[pipeline.End] != pinned(pipeline.End) || chainFlags(t, a) != opotdp.ChainInEnd || pipeline.StagePinned(dir, pipeline.OPoT) {
		t.Errorf("after the move: pipeline %v, flags %#x, opot stage pinned %v; want the end alone, marked, unpinned",
			got, chainFlags(t, a), pipeline.StagePinned(dir, pipeline.OPoT))
	}
	if drift, err := apply.CheckPrograms(ctx, a, inEnd); err != nil || len(drift) != 0 {
		t.Errorf("drift %q, %v", drift, err)
	}
	if res, err := apply.ApplyWith(ctx, a, inEnd, apply.Options{}); err != nil || res.Changes != 0 {
		t.Errorf("re-apply in the end: %d changes, %v; want none", res.Changes, err)
	}

	// Back to the stage: it joins the running pipeline in front of the
	// End that still reads the maps before the entry loses its mark, so
	// when the End driver swaps the End, the stage does the transit.
	drivers = kind.Drivers()
	ran = false
	drivers["end"] = wrapped{Driver: drivers["end"], before: func() {
		ran = true
		if got := active(); got[pipeline.OPoT] != pinned(pipeline.OPoT) || got[pipeline.OPoT] == 0 || chainFlags(t, a) != 0 {
			t.Errorf("when the end is applied: pipeline %v (opot stage pinned %d), flags %#x; want the opot stage running, no mark",
				got, pinned(pipeline.OPoT), chainFlags(t, a))
		}
	}}
	if _, err := apply.ApplyWith(ctx, a, stage, apply.Options{Drivers: drivers}); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("the end driver did not run")
	}
	if got := active(); len(got) != 2 || got[pipeline.OPoT] != pinned(pipeline.OPoT) || got[pipeline.End] != pinned(pipeline.End) {
		t.Errorf("back at the stage: pipeline %v, want the pinned opot and end stages", got)
	}
	if drift, err := apply.CheckPrograms(ctx, a, stage); err != nil || len(drift) != 0 {
		t.Errorf("drift %q, %v", drift, err)
	}
	if res, err := apply.ApplyWith(ctx, a, stage, apply.Options{}); err != nil || res.Changes != 0 {
		t.Errorf("re-apply at the stage: %d changes, %v; want none", res.Changes, err)
	}
}

// withPipeline adds n's pipeline program (last, as the compiler puts it)
// running stages (a JSON list).
func withPipeline(n state.Node, stages string) state.Node {
	n.Programs = append(n.Programs, state.Program{Kind: state.ProgramPipeline, Interfaces: []string{"eth0"},
		Config: []byte(`{"stages":` + stages + `}`)})
	return n
}

// stageNode is opotNode(t, false) with the chain's transit done by the
// OPoT stage on eth0.
func stageNode(t *testing.T) state.Node {
	t.Helper()
	n := opotNode(t, false)
	var cfg state.OPoTConfig
	if err := json.Unmarshal(n.Programs[0].Config, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Chains[0].InEnd, cfg.Ingress = false, []string{"eth0"}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Programs[0].Config = raw
	return n
}

// chainFlags reads the flags of opotNode's chain entry.
func chainFlags(t *testing.T, a *netns.NS) uint32 {
	t.Helper()
	m, err := ebpf.LoadPinnedMap(opotdp.PinDir(a)+"/opot_chains", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var ch opotdp.Chain
	if err := m.Lookup(&opotdp.ChainKey{Last: ad("fc00:9::c").As16()}, &ch); err != nil {
		t.Fatal(err)
	}
	return ch.Flags
}

// Moving a chain's transit from the OPoT stage into the End and back is
// hitless (docs/opot.md "Changing sides"): whenever the End is swapped,
// the program that stops doing the transit is the one the chain's mark
// does not name yet. Into the End, the entry is still unmarked and the
// stage still attached when the End driver runs (the old End does not
// read the maps), and marked with the stage gone once the apply is done
// (the OPoT driver's Finish). Out of it, the stage is attached and the
// entry unmarked before the End that reads the maps goes.
func TestApplyEndOPoTHitless(t *testing.T) {
	a := pair(t, "oh")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stage, inEnd := stageNode(t), opotNode(t, true)
	flags := func() uint32 { return chainFlags(t, a) }
	ingress := func() []string {
		t.Helper()
		progs, err := apply.IngressPrograms(a, "eth0")
		if err != nil {
			t.Fatal(err)
		}
		return progs
	}
	withStage := []string{"srchain_opot_transit", "srchain_end"}
	if err := apply.Apply(ctx, a, stage); err != nil {
		t.Fatal(err)
	}
	if got := ingress(); !slices.Equal(got, withStage) || flags() != 0 {
		t.Fatalf("transit at the stage: eth0 runs %v, flags %#x", got, flags())
	}
	for i, step := range []struct {
		node      state.Node
		flags     uint32 // when the End driver runs, and after
		after     uint32
		runsAfter []string
	}{
		{inEnd, 0, opotdp.ChainInEnd, []string{"srchain_end"}},
		{stage, 0, 0, withStage},
	} {
		drivers := kind.Drivers()
		ran := false
		drivers["end"] = wrapped{Driver: drivers["end"], before: func() {
			ran = true
			if got := ingress(); !slices.Equal(got, withStage) || flags() != step.flags {
				t.Errorf("step %d: when the end is applied, eth0 runs %v and the chain's flags are %#x; want %v and %#x",
					i, got, flags(), withStage, step.flags)
			}
		}}
		if _, err := apply.ApplyWith(ctx, a, step.node, apply.Options{Drivers: drivers}); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if !ran {
			t.Fatalf("step %d: the end driver did not run", i)
		}
		if got := ingress(); !slices.Equal(got, step.runsAfter) || flags() != step.after {
			t.Errorf("step %d: after the apply eth0 runs %v, flags %#x; want %v, %#x", i, got, flags(), step.runsAfter, step.after)
		}
		if drift, err := apply.CheckPrograms(ctx, a, step.node); err != nil || len(drift) != 0 {
			t.Errorf("step %d: drift %q, %v", i, drift, err)
		}
	}
}
