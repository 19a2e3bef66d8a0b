package spec

import _ "embed"

// Schema is the JSON Schema (Draft 2020-12) of the spec's shape, for
// editors; `srchain schema` prints it. A test keeps it in step with the
// yaml tags of the Go types, both ways.
//
//go:embed schema.json
var Schema []byte
