package spec

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestExamplesValid(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*.yaml")
	if len(files) < 3 {
		t.Fatalf("want at least 3 examples, found %d", len(files))
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%s:\n%v", f, err)
		}
	}
}

// wantErr is one "# error: PATH ~ SUBSTRING" line of a bad example; PATH
// "-" is the document itself.
type wantErr struct{ path, substr string }

func wantErrors(t *testing.T, data []byte) []wantErr {
	var out []wantErr
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, "# error: ")
		if !ok {
			continue
		}
		path, sub, _ := strings.Cut(rest, " ~ ")
		path = strings.TrimSpace(path)
		if path == "-" {
			path = ""
		}
		out = append(out, wantErr{path, strings.TrimSpace(sub)})
	}
	if len(out) == 0 {
		t.Fatal("bad example has no '# error:' lines")
	}
	return out
}

// TestBadExamples checks that each invalid spec yields exactly the errors
// its header lists (same paths, same count, messages containing the given
// text), each with a line number.
func TestBadExamples(t *testing.T) {
	files, _ := filepath.Glob("../../examples/bad/*.yaml")
	if len(files) < 10 {
		t.Fatalf("want at least 10 bad examples, found %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want := wantErrors(t, data)
			_, err = Load(f)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			got := FieldErrors(err)
			var gotPaths, wantPaths []string
			for _, g := range got {
				gotPaths = append(gotPaths, g.Path)
				if g.Line == 0 {
					t.Errorf("no line number: %v", g)
				}
				if g.File != f {
					t.Errorf("file = %q, want %q", g.File, f)
				}
			}
			for _, w := range want {
				wantPaths = append(wantPaths, w.path)
			}
			slices.Sort(gotPaths)
			slices.Sort(wantPaths)
			if !slices.Equal(gotPaths, wantPaths) {
				t.Errorf("error paths\n got %q\nwant %q\nerrors:\n%v", gotPaths, wantPaths, err)
			}
			for _, w := range want {
				if !slices.ContainsFunc(got, func(g *FieldError) bool {
					return g.Path == w.path && strings.Contains(g.Msg, w.substr)
				}) {
					t.Errorf("no error at %q containing %q; got:\n%v", w.path, w.substr, err)
				}
			}
		})
	}
}

func TestFieldErrorFormat(t *testing.T) {
	src := "name: q\nnodes:\n  - {name: h1, role: host}\nchains:\n  - name: c\n    nfs: [a, b, ids9]\n"
	_, err := Check([]byte(src), "x.yaml")
	fes := FieldErrors(err)
	i := slices.IndexFunc(fes, func(e *FieldError) bool { return e.Path == "chains[0].nfs[2]" })
	if i < 0 {
		t.Fatalf("no error for chains[0].nfs[2]:\n%v", err)
	}
	if got, want := fes[i].Error(), `x.yaml:6:17: chains[0].nfs[2]: unknown NF "ids9"`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// A missing field is reported where its parent is.
	j := slices.IndexFunc(fes, func(e *FieldError) bool { return e.Path == "chains[0].ingress" })
	if j < 0 || fes[j].Line != 5 {
		t.Errorf("missing ingress not located at line 5: %v", err)
	}
}

func TestDefaults(t *testing.T) {
	s, err := Parse([]byte(`
name: d
nodes: [{name: r1, role: router}]
links: [{endpoints: []}]
nfs: [{name: a, node: r1}]
chains:
  - {name: c4, match: {dst: ["10.0.0.0/8"]}}
  - {name: c6, match: {dst: ["fc00::/16"]}}
  - {name: ci, mode: insert, match: {dst: ["fc00::/16"]}}
traffic: [{name: p}]
`), "d.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.SIDFormat != (SIDFormat{LocatorBits: 64, FunctionBits: 48, ArgsBits: 16}) {
		t.Errorf("sid_format = %+v", s.SIDFormat)
	}
	if s.Nodes[0].Datapath != DatapathKernel || s.Links[0].MTU != 1500 {
		t.Errorf("node/link defaults: %+v %+v", s.Nodes[0], s.Links[0])
	}
	if nf := s.NFs[0]; nf.Kind != "forward" || nf.Behavior != BehaviorEnd || !nf.IsSRAware() {
		t.Errorf("nf defaults: %+v", nf)
	}
	if s.Chains[0].Mode != ModeEncap || s.Chains[0].EgressBehavior != EgressDX4 || s.Chains[1].EgressBehavior != EgressDT6 || s.Chains[2].EgressBehavior != "" {
		t.Errorf("chain defaults: %+v", s.Chains)
	}
	if s.Traffic[0].Proto != ProtoICMP {
		t.Errorf("probe proto = %q", s.Traffic[0].Proto)
	}
	// An explicit zero is kept, so Validate can reject it.
	s, _ = Parse([]byte("name: d\nlinks: [{mtu: 0}]\n"), "d.yaml")
	if s.Links[0].MTU != 0 {
		t.Errorf("explicit mtu 0 overwritten: %d", s.Links[0].MTU)
	}
}

func TestSIDAllocation(t *testing.T) {
	f := SIDFormat{LocatorBits: 64, FunctionBits: 48, ArgsBits: 16}
	loc := netip.MustParsePrefix("fc00:2::/64")
	if got := f.MakeSID(loc, 0xf1); got != netip.MustParseAddr("fc00:2::f1:0") {
		t.Errorf("MakeSID = %s", got)
	}
	if got := f.Function(netip.MustParseAddr("fc00:2::f1:0")); got != 0xf1 {
		t.Errorf("Function = %#x", got)
	}
	g := SIDFormat{LocatorBits: 48, FunctionBits: 32, ArgsBits: 0}
	if got := g.MakeSID(netip.MustParsePrefix("fc00:0:2::/48"), 0xabcd1234); got != netip.MustParseAddr("fc00:0:2:abcd:1234::") {
		t.Errorf("MakeSID 48/32 = %s", got)
	}
	if got := (SIDFormat{LocatorBits: 32, FunctionBits: 96, ArgsBits: 0}).MakeSID(netip.MustParsePrefix("fc00:1::/32"), 5); got != netip.MustParseAddr("fc00:1::5") {
		t.Errorf("MakeSID 32/96 = %s", got)
	}

	s := &Spec{SIDFormat: f,
		Nodes: []Node{{Name: "r1", Role: RoleRouter, Locator: loc}},
		NFs: []NF{
			{Name: "a", Node: "r1"},
			{Name: "b", Node: "r1", SID: netip.MustParseAddr("fc00:2::2:0")},
			{Name: "c", Node: "r1"},
		},
		Chains: []Chain{{Name: "c", Egress: "r1", Mode: ModeEncap}},
	}
	plan := s.SIDs()
	want := map[string]string{"a": "fc00:2::1:0/112", "b": "fc00:2::2:0/112", "c": "fc00:2::3:0/112"}
	for nf, w := range want {
		if got := plan.NF[nf].String(); got != w {
			t.Errorf("NF %s SID = %s, want %s", nf, got, w)
		}
	}
	if got := plan.Egress["c"].String(); got != "fc00:2::4:0/112" {
		t.Errorf("egress SID = %s", got)
	}
}

func TestPortRange(t *testing.T) {
	for in, want := range map[string]PortRange{"80": {80, 80}, "1000-2000": {1000, 2000}, " 5 - 6 ": {5, 6}} {
		var p PortRange
		if err := p.UnmarshalText([]byte(in)); err != nil || p != want {
			t.Errorf("%q -> %v, %v", in, p, err)
		}
	}
	for _, in := range []string{"", "0", "65536", "9-8", "a", "1-", "-3", "1-2-3"} {
		var p PortRange
		if err := p.UnmarshalText([]byte(in)); err == nil {
			t.Errorf("%q accepted as %v", in, p)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for name, src := range map[string]string{
		"empty":      "",
		"two docs":   "name: a\n---\nname: b\n",
		"merge key":  "a: &x {name: q}\n<<: *x\n",
		"scalar doc": "just a string\n",
		"dup key":    "name: a\nname: b\n",
	} {
		if _, err := Check([]byte(src), "t.yaml"); err == nil {
			t.Errorf("%s: accepted", name)
		} else if len(FieldErrors(err)) == 0 {
			t.Errorf("%s: not a FieldError: %v", name, err)
		}
	}
}

// TestAliasBomb checks that exponential alias expansion is cut off.
func TestAliasBomb(t *testing.T) {
	src := "a: &a [x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for i := 0; i < 8; i++ {
		n := string(rune('b' + i))
		src += n + ": &" + n + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
		prev = n
	}
	src += "nodes: *" + prev + "\n"
	if _, err := Check([]byte(src), "bomb.yaml"); err == nil {
		t.Fatal("accepted")
	}

	// Inside an NF's config, in a spec that is otherwise valid: the one
	// error is the size. Decoding stops there, so validating what was
	// read would report everything after it as missing (here the NF's
	// name, kind and node).
	b, err := os.ReadFile("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := "{a: &a [x, x, x, x, x, x, x, x, x]"
	prev = "a"
	for i := 0; i < 8; i++ {
		n := string(rune('b' + i))
		cfg += ", " + n + ": &" + n + " [" + strings.Repeat("*"+prev+", ", 8) + "*" + prev + "]"
		prev = n
	}
	cfg += "}"
	text := strings.Replace(string(b), "{name: fw, kind: forward, node: r2}", "{config: "+cfg+", name: fw, kind: forward, node: r2}", 1)
	_, err = Check([]byte(text), "bomb.yaml")
	fes := FieldErrors(err)
	if len(fes) != 1 || !strings.Contains(fes[0].Msg, "document too large") {
		t.Fatalf("errors %v, want the size alone", err)
	}
}

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../../examples/*.yaml")
	bad, _ := filepath.Glob("../../examples/bad/*.yaml")
	for _, p := range append(files, bad...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Check(data, "fuzz.yaml")
		if s == nil && err == nil {
			t.Fatal("nil spec and nil error")
		}
		for _, fe := range FieldErrors(err) {
			_ = fe.Error()
		}
		if s != nil {
			_ = s.SIDs()
			for i := range s.Chains {
				_, _ = s.ChainPath(&s.Chains[i])
			}
		}
	})
}

// testKinds stands for internal/kind in this package's tests (the kinds
// import spec, so spec's tests cannot import them): forward, firewall and
// netfilter and proxy exist, and "test-kind" reports what its config lacks.
type testKinds struct{}

func (testKinds) Names() []string {
	return []string{"firewall", "forward", "netfilter", "proxy", "test-kind"}
}

func (testKinds) Check(s *Spec, nf *NF, path string) (bool, []error) {
	switch nf.Kind {
	case "forward", "firewall", "netfilter", "proxy":
		return true, nil
	case "test-kind":
		if nf.Config.Kind != yaml.MappingNode || len(nf.Config.Content) == 0 {
			return true, []error{s.ErrorAt(path, nil, "config needs rules")}
		}
		return true, []error{s.ErrorAt(path+".rules", nf.Config.Content[1], "bad rule")}
	}
	return false, nil
}

func init() { SetKinds(testKinds{}) }

func TestKindChecks(t *testing.T) {
	src := `name: k
nodes: [{name: r1, role: router, locator: "fc00:1::/64"}]
links:
  - endpoints:
      - {node: r1, interface: eth0, addresses: ["fc00:a1::2/64"]}
      - {node: h1, interface: eth0, addresses: ["fc00:a1::1/64"]}
nfs:
  - {name: a, kind: test-kind, node: r1}
  - name: b
    kind: test-kind
    node: r1
    config:
      rules: [x]
  - {name: c, kind: opot, node: r1}
`
	_, err := Check([]byte(src), "k.yaml")
	var got []string
	for _, fe := range FieldErrors(err) {
		got = append(got, fe.Error())
	}
	want := []string{
		`k.yaml:6:10: links[0].endpoints[1].node: unknown node "h1"`,
		`k.yaml:8:5: nfs[0].config: config needs rules`,
		`k.yaml:13:14: nfs[1].config.rules: bad rule`,
		`k.yaml:14:15: nfs[2].kind: unknown NF kind "opot" (kinds: firewall, forward, netfilter, proxy, test-kind)`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestEchoBounded: a huge string in the spec is echoed in errors only in
// part (a 10 MB lab name used to be echoed in full).
func TestEchoBounded(t *testing.T) {
	huge := strings.Repeat("x", 10<<20)
	src := "name: " + huge + "\nnodes: [{name: r1, role: router, locator: \"fc00:1::/64\"}]\nnfs:\n  - {name: a, kind: " + huge + ", node: r1}\n" +
		"? " + huge + "\n: 1\n"
	_, err := Check([]byte(src), "k.yaml")
	fes := FieldErrors(err)
	if len(fes) < 3 {
		t.Fatalf("errors: %d", len(fes))
	}
	for _, fe := range fes {
		if n := len(fe.Error()); n > 1024 {
			t.Errorf("error of %d bytes at %s", n, fe.Path)
		}
	}
}

// Load reads only a regular file of at most MaxSpecSize bytes, and every
// read problem is a *fs.PathError ("read spec PATH: ..."), which the CLI
// reports as unreadable, not as an invalid spec.
func TestLoadReadRules(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Truncate(MaxSpecSize+1), f.Close()); err != nil { // sparse: no 32 MiB written
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want error
	}{
		{big, ErrTooLarge},
		{fifo, ErrNotRegular}, // not a wait for a writer
		{dir, ErrNotRegular},
		{"/dev/zero", ErrNotRegular}, // not an endless read
		{filepath.Join(dir, "absent.yaml"), fs.ErrNotExist},
	} {
		_, err := Load(tc.path)
		var pe *fs.PathError
		if !errors.Is(err, tc.want) || !errors.As(err, &pe) || pe.Op != "read spec" || pe.Path != tc.path {
			t.Errorf("Load(%s): %v, want a read spec error wrapping %v", tc.path, err, tc.want)
		}
	}
}

// A switch left empty ("opot:") is an error, not false; "opot: false"
// and leaving it out are fine.
func TestEmptyBool(t *testing.T) {
	b, err := os.ReadFile("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ line, want string }{
		{"    opot:\n", "chains[0].opot: expected true or false, got an empty value"},
		{"    opot: ~\n", "chains[0].opot: expected true or false, got an empty value"},
		{"    opot: false\n", ""},
		{"", ""},
	} {
		src := strings.Replace(string(b), "    nfs: [fw]\n", "    nfs: [fw]\n"+tc.line, 1)
		_, err := Check([]byte(src), "t.yaml")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.line, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v, want %q", tc.line, err, tc.want)
		}
	}
}

// A document that is not UTF-8 is refused at its first bad byte, with
// line and column (characters).
func TestNotUTF8(t *testing.T) {
	_, err := Check([]byte("name: a\n# café\nnodes:\n  - é\xff\n"), "t.yaml")
	fes := FieldErrors(err)
	if len(fes) != 1 || fes[0].Line != 4 || fes[0].Col != 6 || fes[0].Msg != "not UTF-8: byte 0xff" {
		t.Fatalf("got %v (%+v)", err, fes)
	}
}
