// Package drop names the reasons srchain's datapath programs drop packets.
//
// The list mirrors bpf/lib/drop.h one to one (a test keeps them in step);
// the numeric values index the per-CPU drop counter map of every program.
package drop

import "fmt"

// Reason is why a datapath program dropped a packet.
type Reason uint32

// Reasons, in the order and with the values of enum srchain_drop_reason.
const (
	None Reason = iota
	PktTruncated
	NoSRH
	SRHTruncated
	SRHBadType
	SRHBadLen
	SRHSLOverLast
	SRHTooManySegs
	SRHSLZero
	HopLimit
	Reserved10 // was fib-fail: no program emits it
	TLVBad
	FWRule
	FWPrecond
	FWArgsUnknown
	ProxyNoCache
	OPoTVerify
	OPoTReplay
	OPoTNoTLV
	AdjustRoom
	Reserved20 // was mtu: no program emits it
	Unsupported
	OPoTNoProfile
	OPoTStale
	OPoTSeqExhausted
	ANFNoSlot
	ANFStale
	ANFTooBig
	ANFNoRoute
	ProxyWrongInner
	ProxyTTL
	ProxyFlowMiss
	ProxyCacheFull
	ProxyHdrTooBig
	ProxyOPoTMiss
	ProxyL2NoRoute
	FlowReportFull
	OPoTGSO
	OPoTBypass
	IngTooBig
	Max // number of reasons; not a reason
)

var names = [...]string{
	None:             "none",
	PktTruncated:     "pkt-truncated",
	NoSRH:            "no-srh",
	SRHTruncated:     "srh-truncated",
	SRHBadType:       "srh-bad-type",
	SRHBadLen:        "srh-bad-len",
	SRHSLOverLast:    "srh-sl-over-last",
	SRHTooManySegs:   "srh-too-many-segs",
	SRHSLZero:        "srh-sl-zero",
	HopLimit:         "hop-limit",
	Reserved10:       "reserved-10",
	TLVBad:           "tlv-bad",
	FWRule:           "fw-rule",
	FWPrecond:        "fw-precondition",
	FWArgsUnknown:    "fw-args-unknown",
	ProxyNoCache:     "proxy-no-cache",
	OPoTVerify:       "opot-verify",
	OPoTReplay:       "opot-replay",
	OPoTNoTLV:        "opot-no-tlv",
	AdjustRoom:       "adjust-room",
	Reserved20:       "reserved-20",
	Unsupported:      "unsupported",
	OPoTNoProfile:    "opot-no-profile",
	OPoTStale:        "opot-stale",
	OPoTSeqExhausted: "opot-seq-exhausted",
	ANFNoSlot:        "anf-no-slot",
	ANFStale:         "anf-stale",
	ANFTooBig:        "anf-too-big",
	ANFNoRoute:       "anf-no-route",
	ProxyWrongInner:  "proxy-wrong-inner",
	ProxyTTL:         "proxy-ttl",
	ProxyFlowMiss:    "proxy-flow-miss",
	ProxyCacheFull:   "proxy-cache-full",
	ProxyHdrTooBig:   "proxy-hdr-too-big",
	ProxyOPoTMiss:    "proxy-opot-miss",
	ProxyL2NoRoute:   "proxy-l2-no-route",
	FlowReportFull:   "flow-report-full",
	OPoTGSO:          "opot-gso",
	OPoTBypass:       "opot-bypass",
	IngTooBig:        "ing-too-big",
}

// String returns the reason's stable name, as used in counters and metrics.
func (r Reason) String() string {
	if r < Max {
		return names[r]
	}
	return fmt.Sprintf("reason-%d", uint32(r))
}

// Counts holds one counter per reason, summed over CPUs.
type Counts [Max]uint64

// NonZero returns the reasons with a non-zero count, keyed by name.
func (c Counts) NonZero() map[string]uint64 {
	m := make(map[string]uint64)
	for i, v := range c {
		if v != 0 {
			m[Reason(i).String()] = v
		}
	}
	return m
}
