package netns

import "testing"

// TestCurrent: the agent's own namespace opens under the given label and
// its netlink handle works (its loopback is there).
func TestCurrent(t *testing.T) {
	ns, err := Current("host")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if ns.Name != "host" {
		t.Errorf("name %q, want host", ns.Name)
	}
	if _, err := ns.Netlink().LinkByName("lo"); err != nil {
		t.Errorf("lo in the current namespace: %v", err)
	}
}

// TestCurrentCommand: a command for the current namespace runs the tool
// itself, not `ip netns exec NAME` (the label names no namespace).
func TestCurrentCommand(t *testing.T) {
	ns, err := Current("no-such-netns-label")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if out, err := ns.Run(t.Context(), "true"); err != nil {
		t.Errorf("run in the current namespace: %v (%q)", err, out)
	}
}
