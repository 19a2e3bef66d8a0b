package netns

import (
	"context"
	"fmt"
	"github.com/srchain/srchain/internal/testutil"
	"os"
	"strings"
	"testing"
)

func TestCreateDoDelete(t *testing.T) {
	testutil.RequireRoot(t)
	name := fmt.Sprintf("srct-ns-%d", os.Getpid())
	ns, err := Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Delete() })
	if _, err := Create(name); err == nil {
		t.Fatal("second Create succeeded")
	}
	out, err := ns.Run(context.Background(), "ip", "-o", "link", "show", "lo")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "UP") {
		t.Fatalf("lo not up: %s", out)
	}
	if err := ns.Sysctl("net.ipv6.conf.all.forwarding", "1"); err != nil {
		t.Fatal(err)
	}
	got, _ := ns.Run(context.Background(), "sysctl", "-n", "net.ipv6.conf.all.forwarding")
	if strings.TrimSpace(got) != "1" {
		t.Fatalf("forwarding=%q", got)
	}
	names, err := List("srct-ns-")
	if err != nil || len(names) == 0 {
		t.Fatalf("List: %v %v", names, err)
	}
	if err := ns.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/run/netns/" + name); err == nil {
		t.Fatal("namespace still there")
	}
}
