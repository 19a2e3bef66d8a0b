package ingress

import (
	"encoding/binary"
	"errors"
	"testing"
)

// TestParseReport: the layout of struct ing_flow_report, and records too
// short or claiming more bytes than they hold are refused.
func TestParseReport(t *testing.T) {
	b := make([]byte, 68+5)
	le := binary.LittleEndian
	le.PutUint64(b, 77)
	b[8], b[8+43] = 0xaa, 0xbb
	le.PutUint32(b[40:], 0x1234)
	le.PutUint32(b[52:], 3)
	le.PutUint32(b[56:], 9)
	le.PutUint32(b[60:], 5)
	le.PutUint32(b[64:], 5)
	copy(b[68:], "hello")
	r, err := ParseReport(b)
	if err != nil || r.KTime != 77 || r.Key[0] != 0xaa || r.Key[43] != 0xbb || r.Pool != 0x1234 || r.Chain != 3 ||
		r.Ifindex != 9 || r.Len != 5 || string(r.Data) != "hello" {
		t.Fatalf("parse: %+v, %v", r, err)
	}
	le.PutUint32(b[64:], 6)
	if _, err := ParseReport(b); !errors.Is(err, ErrBadReport) {
		t.Errorf("caplen past the record: %v", err)
	}
	if _, err := ParseReport(b[:67]); !errors.Is(err, ErrBadReport) {
		t.Errorf("short record: %v", err)
	}
}

func FuzzParseReport(f *testing.F) {
	f.Add(make([]byte, 68))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseReport(b)
		if err == nil && len(r.Data) > len(b) {
			t.Fatalf("data of %d bytes from a %d-byte record", len(r.Data), len(b))
		}
	})
}
