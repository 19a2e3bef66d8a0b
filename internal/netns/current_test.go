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
