package pipeline

// Placement is where a program kind runs in a node's pipeline.
type Placement struct {
	Stage Stage
	// XDP: the kind has an XDP stage program (else it runs at tc only).
	XDP bool
}

// placements is the pipeline order (docs/pipeline.md): filters first
// (the SERA firewall, then netfilter on the inner packet), then the
// behaviours that rewrite and forward. The End goes after the proxy and
// OPoT transit because both must act on a packet before its End does.
var placements = map[string]Placement{
	"firewall":  {Firewall, true},
	"netfilter": {Netfilter, false},
	"proxy":     {Proxy, false},
	"opot":      {OPoT, true},
	"end":       {End, true},
	"ingress":   {Ingress, true},
}

// Place returns where programs of kind run. A kind the pipeline does not
// know runs first and at tc only: nothing may forward before it.
func Place(kind string) Placement {
	if p, ok := placements[kind]; ok {
		return p
	}
	return Placement{Stage: Firewall}
}
