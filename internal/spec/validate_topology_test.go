package spec

import (
	"fmt"
	"strings"
	"testing"
)

// twoNodes is h1 - r1 with r1's interface named ifname.
func twoNodes(name, ifname string) string {
	return fmt.Sprintf(`name: %s
nodes:
  - {name: h1, role: host}
  - {name: r1, role: router, locator: "fc00:1::/64"}
links:
  - endpoints:
      - {node: h1, interface: eth0, addresses: ["fc00:a1::1/64"]}
      - {node: r1, interface: %q, addresses: ["fc00:a1::2/64"]}
`, name, ifname)
}

func validate(t *testing.T, doc string) []*FieldError {
	t.Helper()
	s, err := Parse([]byte(doc), "t.yaml")
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return FieldErrors(s.Validate())
}

// TestInterfaceNames: names the kernel or srchain's sysctl paths refuse
// (net.ipv6.conf.<if>.*: eth1.100 became the path eth1/100, all and
// default are the conf directories themselves) are refused by validate
// with the field path, instead of failing at apply.
func TestInterfaceNames(t *testing.T) {
	const path = "links[0].endpoints[1].interface"
	for _, bad := range []string{"eth1.100", "all", "default", "lo", "a/b", "a:b", ".", "..", "a b",
		"sixteen-bytes-xx", strings.Repeat("x", 100)} {
		errs := validate(t, twoNodes("t", bad))
		if len(errs) != 1 || errs[0].Path != path {
			t.Errorf("interface %q: errors %v, want one at %s", bad, errs, path)
		}
	}
	for _, good := range []string{"eth1", "eth1-100", "veth_a", "fifteen-bytes-x"} {
		if errs := validate(t, twoNodes("t", good)); len(errs) != 0 {
			t.Errorf("interface %q: %v", good, errs)
		}
	}
}

// TestLongNamesClipped: a name refused for its length is not repeated in
// full (a 10 MB lab name made a 10 MB error).
func TestLongNamesClipped(t *testing.T) {
	long := strings.Repeat("a", 10<<20)
	errs := validate(t, twoNodes(long, strings.Repeat("b", 1<<20)))
	if len(errs) != 2 {
		t.Fatalf("errors %v, want 2", errs)
	}
	for _, e := range errs {
		if len(e.Error()) > 400 {
			t.Errorf("%s: error is %d bytes", e.Path, len(e.Error()))
		}
		if !strings.Contains(e.Msg, "bytes)") {
			t.Errorf("%s: %.100q does not say how long the name was", e.Path, e.Msg)
		}
	}
}

// TestRouting: routing is static (default) or bgp; anything else is an
// error at the field.
func TestRouting(t *testing.T) {
	for _, c := range []struct {
		routing string
		bad     bool
	}{{"", false}, {"static", false}, {"bgp", false}, {"ospf", true}, {"BGP", true}} {
		doc := twoNodes("t", "eth0")
		if c.routing != "" {
			doc += "routing: " + c.routing + "\n"
		}
		errs := validate(t, doc)
		switch {
		case c.bad && (len(errs) != 1 || errs[0].Path != "routing"):
			t.Errorf("routing %q: %v, want one error at routing", c.routing, errs)
		case !c.bad && len(errs) != 0:
			t.Errorf("routing %q: %v", c.routing, errs)
		}
	}
}

// TestTunnelSource: nodes[].tunnel_source is a router's global IPv6
// unicast address outside every locator and not another node's; anything
// else is refused at its field.
func TestTunnelSource(t *testing.T) {
	const path = "nodes[1].tunnel_source"
	doc := func(node int, addr string) string {
		d := twoNodes("t", "eth0")
		d = strings.Replace(d, "  - {name: r2, role: router}", "", 1)
		line := []string{"{name: h1, role: host", `{name: r1, role: router, locator: "fc00:1::/64"`}[node]
		return strings.Replace(d, line, line+`, tunnel_source: "`+addr+`"`, 1)
	}
	for _, good := range []string{"fc00:ff::1", "2001:db8::1", "fc00:a1::2"} {
		if errs := validate(t, doc(1, good)); len(errs) != 0 {
			t.Errorf("tunnel_source %s: %v", good, errs)
		}
	}
	for _, bad := range []string{"10.0.0.1", "fe80::1", "ff02::1", "::1", "fc00:1::5", "fc00:a1::1", "::ffff:10.0.0.1"} {
		errs := validate(t, doc(1, bad))
		if len(errs) != 1 || errs[0].Path != path {
			t.Errorf("tunnel_source %s: errors %v, want one at %s", bad, errs, path)
		}
	}
	if errs := validate(t, doc(0, "fc00:ff::1")); len(errs) != 1 || errs[0].Path != "nodes[0].tunnel_source" {
		t.Errorf("tunnel_source on a host: errors %v, want one at nodes[0].tunnel_source", errs)
	}
}
