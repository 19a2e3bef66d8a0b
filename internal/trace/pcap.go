package trace

import (
	"fmt"
	"io"
	"runtime"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// PcapWriter writes captured frames as a pcapng file (Wireshark,
// tcpdump, tshark read it): one interface description per node and
// interface, named "node:iface", kernel timestamps in nanoseconds,
// the frame's wire length with the bytes the capture kept (at most
// SnapLen). The pcapng encoding is gopacket's (pcapgo).
type PcapWriter struct {
	out io.Writer
	w   *pcapgo.NgWriter
	ifs map[string]int
}

// SnapLen is how many bytes of a frame the capture keeps.
const SnapLen = ringFrame - 64

// NewPcapWriter writes to out; Flush before closing it.
func NewPcapWriter(out io.Writer) *PcapWriter {
	return &PcapWriter{out: out, ifs: map[string]int{}}
}

func iface(name string) pcapgo.NgInterface {
	return pcapgo.NgInterface{Name: name, OS: runtime.GOOS, LinkType: layers.LinkTypeEthernet,
		SnapLength: SnapLen, TimestampResolution: 9}
}

// Write adds ev's frame. An event without bytes (inferred, or from a
// capture that kept none) is skipped.
func (p *PcapWriter) Write(ev Event) error {
	if len(ev.Frame) == 0 {
		return nil
	}
	name := ev.Node + ":" + ev.Interface
	id, ok := p.ifs[name]
	if !ok {
		var err error
		if p.w == nil {
			opts := pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{
				Hardware: runtime.GOARCH, OS: runtime.GOOS, Application: "srchain lab trace"}}
			p.w, err = pcapgo.NewNgWriterInterface(p.out, iface(name), opts)
			id = 0
		} else {
			id, err = p.w.AddInterface(iface(name))
		}
		if err != nil {
			return fmt.Errorf("write pcapng interface %s: %w", name, err)
		}
		p.ifs[name] = id
	}
	n := max(ev.Len, len(ev.Frame))
	ci := gopacket.CaptureInfo{Timestamp: ev.Time, CaptureLength: len(ev.Frame), Length: n, InterfaceIndex: id}
	if err := p.w.WritePacket(ci, ev.Frame); err != nil {
		return fmt.Errorf("write pcapng packet: %w", err)
	}
	return nil
}

// Flush writes out what is buffered. A writer that saw no frame writes
// nothing (an empty file).
func (p *PcapWriter) Flush() error {
	if p.w == nil {
		return nil
	}
	if err := p.w.Flush(); err != nil {
		return fmt.Errorf("write pcapng: %w", err)
	}
	return nil
}
