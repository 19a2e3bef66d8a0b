package trace

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"

	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/testutil"
)

// TestPcapWriter: frames of several nodes and interfaces become one
// pcapng file with an interface per node:iface, in the order they were
// first seen, every frame with its bytes, wire length and nanosecond
// timestamp; pcapgo reads it back and tcpdump (when installed, required
// in CI) lists every packet.
func TestPcapWriter(t *testing.T) {
	mac := []byte{2, 0, 0, 0, 0, 1}
	f1 := srv6.Ether(mac, mac, srv6.EtherTypeIPv6, srv6.UDP6(netip.MustParseAddr("fc00::1"), netip.MustParseAddr("fc00::2"), 1, 2, []byte("one")))
	f2 := srv6.Ether(mac, mac, srv6.EtherTypeIPv4, srv6.UDP4(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 1, 2, []byte("two")))
	t0 := time.Unix(1764316800, 123456789)
	evs := []Event{
		{Node: "r1", Interface: "eth0", Time: t0, Len: len(f1), Frame: f1},
		{Node: "r2", Interface: "eth1", Time: t0.Add(time.Microsecond), Len: 3000, Frame: f2}, // truncated capture
		{Node: "r1", Interface: "eth0", Time: t0.Add(2 * time.Microsecond), Len: len(f2), Frame: f2},
		{Node: "r3", Interface: "eth0", Inferred: true}, // no bytes: skipped
	}
	var buf bytes.Buffer
	w := NewPcapWriter(&buf)
	for _, ev := range evs {
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "trace.pcapng")
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	r, err := pcapgo.NewNgReader(bytes.NewReader(buf.Bytes()), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		intf, err := r.Interface(ci.InterfaceIndex)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, intf.Name)
		ev := evs[len(got)-1]
		if !bytes.Equal(data, ev.Frame) || ci.Length != max(ev.Len, len(ev.Frame)) || !ci.Timestamp.Equal(ev.Time) {
			t.Errorf("packet %d: %d bytes, length %d, time %v; want %d, %d, %v", len(got), len(data), ci.Length, ci.Timestamp,
				len(ev.Frame), ev.Len, ev.Time)
		}
	}
	if strings.Join(got, " ") != "r1:eth0 r2:eth1 r1:eth0" {
		t.Errorf("packets on interfaces %v, want r1:eth0 r2:eth1 r1:eth0", got)
	}

	testutil.RequireTool(t, "tcpdump")
	out, err := exec.Command("tcpdump", "-nn", "-r", file).CombinedOutput()
	if err != nil {
		t.Fatalf("tcpdump -r: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "UDP"); n != 3 {
		t.Errorf("tcpdump read %d UDP packets, want 3:\n%s", n, out)
	}
}
