package state

// ProgramLegacyNF is the program kind of a legacy NF node's software
// (internal/legacynf): its nftables ruleset, its rate limiters and the
// capture counters that show what it saw.
const ProgramLegacyNF = "legacy-nf"

// LegacyNFConfig is the typed configuration of a legacy NF node's
// program (Program.Config).
type LegacyNFConfig struct {
	// Ruleset is the nft text loaded into table inet srchain_nf (the
	// spec's ruleset or its file's text; "" : no table of rules, the NF
	// only forwards).
	Ruleset string `json:"ruleset,omitempty"`
	// RulesetFile is where the ruleset came from, for messages only.
	RulesetFile string `json:"ruleset_file,omitempty"`
	// RateLimits are tc tbf root qdiscs, sorted by interface.
	RateLimits []RateLimit `json:"rate_limits,omitempty"`
	// Capture lists the interfaces whose packets are counted (by family,
	// and whether they still carry SRv6), sorted.
	Capture []string `json:"capture"`
}

// RateLimit is one tc tbf qdisc.
type RateLimit struct {
	Interface  string `json:"interface"`
	RateKbit   int    `json:"rate_kbit"`
	BurstBytes int    `json:"burst_bytes"`
	LatencyMS  int    `json:"latency_ms"`
}

// Proxy behaviours (draft-ietf-spring-sr-service-programming section 6):
// SIDs served by an SR proxy program in front of a legacy NF.
const (
	EndAS     Behavior = "End.AS"      // static proxy
	EndAD     Behavior = "End.AD"      // dynamic proxy
	EndADFlow Behavior = "End.AD.flow" // dynamic proxy, cache per inner flow
	EndAM     Behavior = "End.AM"      // masquerading proxy
	EndAMNAT  Behavior = "End.AM.NAT"  // masquerading proxy, NAT variant
)

// IsProxy reports whether b is an SR proxy behaviour.
func (b Behavior) IsProxy() bool {
	switch b {
	case EndAS, EndAD, EndADFlow, EndAM, EndAMNAT:
		return true
	}
	return false
}

// ProgramDatapath marks a SID served by its NF's own program (an SR
// proxy): the kernel has no such behaviour, so the node routes the SID
// to a blackhole and a packet the program does not take is dropped,
// never forwarded around the NF.
const ProgramDatapath Datapath = "program"
