package spec

import (
	"slices"
	"strings"
	"testing"
)

// TestIngressField: `ingress:` defaults to kernel on routers, takes
// kernel or ebpf, is refused on hosts, and an eBPF ingress refuses a
// chain whose SRH would exceed SRCHAIN_MAX_SEGS.
func TestIngressField(t *testing.T) {
	base := limitsSpec(1, func(int) string { return "r2" }, "kernel", "encap")
	s, err := Check([]byte(base), "in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Node("r1").Ingress != IngressKernel || s.Node("h1").Ingress != "" {
		t.Fatalf("defaults: r1 %q h1 %q", s.Node("r1").Ingress, s.Node("h1").Ingress)
	}
	set := func(spec, node, field string) string {
		return strings.Replace(spec, "{name: "+node+", role: ", "{name: "+node+", "+field+", role: ", 1)
	}
	for _, c := range []struct {
		name string
		yaml string
		want []string
		msg  string
	}{
		{"ebpf", set(base, "r1", "ingress: ebpf"), nil, ""},
		{"kernel", set(base, "r1", "ingress: kernel"), nil, ""},
		{"bad value", set(base, "r1", "ingress: xdp"), []string{"nodes[1].ingress"}, `ingress must be "kernel" or "ebpf", got "xdp"`},
		{"host", set(base, "h1", "ingress: ebpf"), []string{"nodes[0].ingress"}, "a host has no ingress"},
		{"15 NFs", set(limitsSpec(15, func(i int) string { return []string{"r2", "r3"}[i%2] }, "kernel", "encap"), "r1", "ingress: ebpf"), nil, ""},
		{"16 NFs", set(limitsSpec(16, func(i int) string { return []string{"r2", "r3"}[i%2] }, "kernel", "insert"), "r1", "ingress: ebpf"), []string{"chains[0].nfs"}, "17 segments, but node \"r1\" has ingress: ebpf"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Check([]byte(c.yaml), "in.yaml")
			var got []string
			for _, fe := range FieldErrors(err) {
				got = append(got, fe.Path)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("error paths %q, want %q:\n%v", got, c.want, err)
			}
			if c.msg != "" && !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error lacks %q:\n%v", c.msg, err)
			}
		})
	}
}
