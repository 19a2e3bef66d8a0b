package bpfrt

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/testutil"
)

// TestDetachPinned: a pinned, attached tcx link leaves its hook and its
// pin; a link detached by hand (severed) is only unpinned, without error;
// no pin is not an error.
func TestDetachPinned(t *testing.T) {
	testutil.RequireRoot(t)
	name := fmt.Sprintf("srct-r%ddetach", os.Getpid())
	_ = netns.Delete(name)
	ns, err := netns.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ns.Delete(); err != nil {
			t.Error(err)
		}
	}()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.SchedCLS,
		License:      "GPL",
		Instructions: asm.Instructions{asm.LoadImm(asm.R0, -1, asm.DWord), asm.Return()}, // TCX_NEXT
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	pinDir, err := os.MkdirTemp("/sys/fs/bpf", "srct-detach-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(pinDir)
	pin := filepath.Join(pinDir, "link")

	attach := func() link.Link {
		t.Helper()
		var l link.Link
		err := ns.Do(func() error {
			lo, err := ns.Netlink().LinkByName("lo")
			if err != nil {
				return err
			}
			l, err = link.AttachTCX(link.TCXOptions{Interface: lo.Attrs().Index, Program: prog, Attach: ebpf.AttachTCXIngress})
			if err != nil {
				return err
			}
			return l.Pin(pin)
		})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	attachedOnLo := func() bool {
		t.Helper()
		var on bool
		err := ns.Do(func() error {
			var err error
			on, err = Attached(prog, Hook{Ifindex: 1})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return on
	}

	l := attach()
	l.Close() // the pin keeps it
	if !attachedOnLo() {
		t.Fatal("program not attached after AttachTCX")
	}
	if err := DetachPinned(pin); err != nil {
		t.Fatalf("detach attached: %v", err)
	}
	if attachedOnLo() {
		t.Error("program still attached after DetachPinned")
	}
	if _, err := os.Stat(pin); !os.IsNotExist(err) {
		t.Errorf("pin left behind: %v", err)
	}

	l = attach()
	if err := l.Detach(); err != nil { // by hand, as `bpftool link detach`
		t.Fatal(err)
	}
	l.Close()
	if err := DetachPinned(pin); err != nil {
		t.Errorf("detach severed: %v", err)
	}
	if _, err := os.Stat(pin); !os.IsNotExist(err) {
		t.Errorf("severed pin left behind: %v", err)
	}
	if err := DetachPinned(pin); err != nil {
		t.Errorf("no pin: %v", err)
	}
}
