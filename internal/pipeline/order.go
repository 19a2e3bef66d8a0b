package pipeline

// Placement is where a program kind runs in a node's pipeline.
type Placement struct {
	Stage Stage
	// XDP: the kind has an XDP stage program (else it runs at tc only).
	XDP bool
	// OnePerNode: every program of the kind on a node is one loaded
	// program, so several of them are one stage (the SR proxies: one
	// proxy serves every proxy NF of a router).
	OnePerNode bool
}

// placements is the pipeline order (docs/pipeline.md): filters first
// (the SERA firewall, then netfilter on the inner packet), then the
// behaviours that rewrite and forward. OPoT goes before the proxy, as
// its tc stage goes in front of the proxy's programs: an End.AM proxy
// sends the packet to its NF with the proof in it, updated by the stage
// while the DA is still the proxy SID. The End goes after both because
// both must act on a packet before its End does.
var placements = map[string]Placement{
	"firewall":  {Stage: Firewall, XDP: true},
	"netfilter": {Stage: Netfilter},
	"opot":      {Stage: OPoT, XDP: true},
	"proxy":     {Stage: Proxy, XDP: true, OnePerNode: true},
	"end":       {Stage: End, XDP: true},
	"ingress":   {Stage: Ingress, XDP: true},
}

// Place returns where programs of kind run. A kind the pipeline does not
// know runs first and at tc only: nothing may forward before it.
func Place(kind string) Placement {
	if p, ok := placements[kind]; ok {
		return p
	}
	return Placement{Stage: Firewall}
}
