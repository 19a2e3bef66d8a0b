// Package api holds the controller's OpenAPI 3 document, served at
// /v1/openapi.json; internal/controller tests that it lists exactly the
// routes the server registers.
package api

import _ "embed"

// OpenAPI is openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte
