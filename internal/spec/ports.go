package spec

import (
	"errors"
	"strconv"
	"strings"
)

// ErrBadPorts is returned by PortRange.UnmarshalText.
var ErrBadPorts = errors.New("bad port range")

// PortRange is an inclusive TCP/UDP port range written "80" or "1000-2000";
// the zero value means any port.
type PortRange struct {
	From, To uint16
}

// IsZero reports whether the range is unset.
func (p PortRange) IsZero() bool { return p.From == 0 && p.To == 0 }

// UnmarshalText parses "N" or "N-M" with 1 <= N <= M <= 65535.
func (p *PortRange) UnmarshalText(b []byte) error {
	lo, hi, isRange := strings.Cut(strings.TrimSpace(string(b)), "-")
	from, err := strconv.ParseUint(strings.TrimSpace(lo), 10, 16)
	if err != nil || from == 0 {
		return ErrBadPorts
	}
	to := from
	if isRange {
		to, err = strconv.ParseUint(strings.TrimSpace(hi), 10, 16)
		if err != nil || to < from {
			return ErrBadPorts
		}
	}
	p.From, p.To = uint16(from), uint16(to)
	return nil
}

// MarshalText writes the form UnmarshalText reads.
func (p PortRange) MarshalText() ([]byte, error) {
	if p.From == p.To {
		return []byte(strconv.Itoa(int(p.From))), nil
	}
	return []byte(strconv.Itoa(int(p.From)) + "-" + strconv.Itoa(int(p.To))), nil
}

// maxRulePort is the highest port an ip rule's sport/dport range may
// contain: the kernel refuses ranges that include 65535 (EINVAL).
const maxRulePort = 65534

// rangeText is the range as the spec writes it ("80", "1024-65535").
func rangeText(p PortRange) string {
	b, _ := p.MarshalText()
	return string(b)
}
