package netns

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtool commands (linux/ethtool.h): generic receive offload, transmit
// checksum offload, TCP and generic segmentation offload.
const (
	ethtoolGGRO    = 0x0000002b
	ethtoolSGRO    = 0x0000002c
	ethtoolGTXCSUM = 0x00000016
	ethtoolSTXCSUM = 0x00000017
	ethtoolGTSO    = 0x0000001e
	ethtoolSTSO    = 0x0000001f
	ethtoolGGSO    = 0x00000023
	ethtoolSGSO    = 0x00000024
)

// ethtoolValue is struct ethtool_value.
type ethtoolValue struct {
	cmd  uint32
	data uint32
}

// ifreqData is struct ifreq with its union holding a pointer.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data uintptr
	_    [16]byte // rest of the union
}

// ethtool runs one SIOCETHTOOL value command on ifname inside the
// namespace (the socket belongs to the namespace it is created in).
func (n *NS) ethtool(ifname string, v *ethtoolValue) error {
	if len(ifname) >= unix.IFNAMSIZ {
		return fmt.Errorf("ethtool %s: interface name too long", ifname)
	}
	return n.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("ethtool %s: socket: %w", ifname, err)
		}
		defer unix.Close(fd)
		var req ifreqData
		copy(req.name[:], ifname)
		req.data = uintptr(unsafe.Pointer(v))
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&req))); errno != 0 {
			return fmt.Errorf("ethtool %s in %s: %w", ifname, n.Name, errno)
		}
		return nil
	})
}

// GRO reports whether generic receive offload is on for ifname.
func (n *NS) GRO(ifname string) (bool, error) { return n.feature(ifname, ethtoolGGRO, "gro") }

// SetGRO turns generic receive offload on or off for ifname.
func (n *NS) SetGRO(ifname string, on bool) error {
	return n.setFeature(ifname, ethtoolSGRO, "gro", on)
}

// TxChecksum reports whether transmit checksum offload is on for ifname.
func (n *NS) TxChecksum(ifname string) (bool, error) {
	return n.feature(ifname, ethtoolGTXCSUM, "tx checksum offload")
}

// SetTxChecksum turns transmit checksum offload on or off for ifname
// (off also turns off the offloads that depend on it, TSO among them).
func (n *NS) SetTxChecksum(ifname string, on bool) error {
	return n.setFeature(ifname, ethtoolSTXCSUM, "tx checksum offload", on)
}

// Segmentation reports whether TCP and generic segmentation offload
// (TSO, GSO) are on for ifname: whether it sends GSO packets as they are.
func (n *NS) Segmentation(ifname string) (tso, gso bool, err error) {
	if tso, err = n.feature(ifname, ethtoolGTSO, "tso"); err != nil {
		return false, false, err
	}
	gso, err = n.feature(ifname, ethtoolGGSO, "gso")
	return tso, gso, err
}

// SetTSO turns TCP segmentation offload on or off for ifname.
func (n *NS) SetTSO(ifname string, on bool) error {
	return n.setFeature(ifname, ethtoolSTSO, "tso", on)
}

// SetGSO turns generic segmentation offload on or off for ifname. With
// TSO and GSO off the kernel segments a GSO packet before the device
// sends it.
func (n *NS) SetGSO(ifname string, on bool) error {
	return n.setFeature(ifname, ethtoolSGSO, "gso", on)
}

// feature reads one ethtool value (a G* command).
func (n *NS) feature(ifname string, cmd uint32, name string) (bool, error) {
	v := ethtoolValue{cmd: cmd}
	if err := n.ethtool(ifname, &v); err != nil {
		return false, fmt.Errorf("read %s: %w", name, err)
	}
	return v.data != 0, nil
}

// setFeature writes one ethtool value (an S* command).
func (n *NS) setFeature(ifname string, cmd uint32, name string, on bool) error {
	v := ethtoolValue{cmd: cmd}
	if on {
		v.data = 1
	}
	if err := n.ethtool(ifname, &v); err != nil {
		return fmt.Errorf("set %s: %w", name, err)
	}
	return nil
}
