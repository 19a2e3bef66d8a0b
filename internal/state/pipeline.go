package state

// ProgramPipeline is the node-wide program that owns the XDP hook of
// every interface of a `datapath: xdp` router (internal/pipeline).
const ProgramPipeline = "pipeline"

// PipelineConfig is the typed configuration of a node's pipeline program
// (Program.Config of kind ProgramPipeline).
type PipelineConfig struct {
	// Stages are the XDP stages in run order (internal/pipeline stage
	// names: firewall, end, ingress): each one's program has XDP set.
	// None: the XDP hook stays free.
	Stages []string `json:"stages,omitempty"`
	// TC says why programs of the node run at tc only although the node
	// asked for XDP (docs/pipeline.md): a stage XDP cannot run, and
	// every stage after it, which must not forward before it.
	TC string `json:"tc,omitempty"`
}
