package controller

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/srchain/srchain/api"
	"github.com/srchain/srchain/internal/spec"
)

var update = flag.Bool("update", false, "rewrite api/openapi.json")

// TestOpenAPIRoutes: every route the server registers is in the
// document, and the document lists no route the server lacks.
func TestOpenAPIRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatalf("api/openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi = %q, want 3.x", doc.OpenAPI)
	}
	var documented, registered []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method != "parameters" {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	for _, r := range (&Controller{}).Routes() {
		registered = append(registered, r.Method+" "+r.Path)
	}
	slices.Sort(documented)
	slices.Sort(registered)
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in api/openapi.json", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			t.Errorf("api/openapi.json documents %s, which the server does not register", d)
		}
	}
}

// TestOpenAPIServed: /v1/openapi.json is the committed document.
func TestOpenAPIServed(t *testing.T) {
	var served json.RawMessage
	newEnv(t).must("GET", "/v1/openapi.json", "", &served)
	if !bytes.Equal(bytes.TrimSpace(served), bytes.TrimSpace(api.OpenAPI)) {
		t.Error("served document differs from api/openapi.json")
	}
}

// TestOpenAPIRefs: every $ref in the document points at a schema it
// defines.
func TestOpenAPIRefs(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	var v any
	json.Unmarshal(api.OpenAPI, &v)
	n := 0
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if r, ok := x["$ref"].(string); ok {
				n++
				name, ok := strings.CutPrefix(r, "#/components/schemas/")
				if _, defined := doc.Components.Schemas[name]; !ok || !defined {
					t.Errorf("$ref %q does not resolve", r)
				}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	if n == 0 {
		t.Error("no $ref found: the document lost its schemas")
	}
}

// TestOpenAPIUpToDate: the committed document is what openAPIDoc makes
// (so its object schemas are internal/spec's); go test -update rewrites it.
func TestOpenAPIUpToDate(t *testing.T) {
	want := openAPIDoc(t)
	if *update {
		if err := os.WriteFile("../../api/openapi.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(api.OpenAPI, want) {
		t.Errorf("api/openapi.json is out of date: run go test ./internal/controller/ -run TestOpenAPIUpToDate -update")
	}
}

type obj = map[string]any

func ref(name string) obj { return obj{"$ref": "#/components/schemas/" + name} }

func jsonBody(schema obj) obj {
	return obj{"content": obj{"application/json": obj{"schema": schema}}}
}

func answer(desc string, schema obj) obj {
	a := obj{"description": desc}
	if schema != nil {
		a["content"] = obj{"application/json": obj{"schema": schema}}
	}
	return a
}

// openAPIDoc builds the document: paths from a table that mirrors
// Routes, schemas of the spec objects from internal/spec/schema.json.
func openAPIDoc(t *testing.T) []byte {
	var specSchema struct {
		Defs map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(spec.Schema, &specSchema); err != nil {
		t.Fatal(err)
	}
	schemas := obj{}
	for name, raw := range specSchema.Defs {
		var v any
		fixed := strings.ReplaceAll(string(raw), `"#/$defs/`, `"#/components/schemas/`)
		if err := json.Unmarshal([]byte(fixed), &v); err != nil {
			t.Fatal(err)
		}
		schemas[name] = v
	}
	schemas["specDocument"] = obj{
		"type":                 "object",
		"description":          "A spec as in YAML (docs/spec.md), in JSON; traffic (lab probes) is not accepted here.",
		"additionalProperties": false,
		"properties": obj{
			"name":       ref("name"),
			"sid_format": ref("sidFormat"),
			"nodes":      obj{"type": "array", "items": ref("node")},
			"links":      obj{"type": "array", "items": ref("link")},
			"nfs":        obj{"type": "array", "items": ref("nf")},
			"chains":     obj{"type": "array", "items": ref("chain")},
		},
	}
	schemas["writeResult"] = obj{
		"type":     "object",
		"required": []string{"revision", "changed", "removed"},
		"properties": obj{
			"revision": obj{"type": "integer", "description": "New spec revision (also the ETag)."},
			"changed":  obj{"type": "array", "items": obj{"type": "string"}, "description": "Nodes whose desired state and generation changed."},
			"removed":  obj{"type": "array", "items": obj{"type": "string"}, "description": "Nodes whose desired state was deleted."},
		},
	}
	schemas["rotateRequest"] = obj{
		"type":                 "object",
		"additionalProperties": false,
		"properties": obj{
			"chains":       obj{"type": "array", "items": obj{"type": "string"}, "description": "Chains to rotate; every chain with opot when absent."},
			"wait_seconds": obj{"type": "number", "minimum": 0, "maximum": 600, "description": "How long to wait for the members' agents (default 60)."},
		},
	}
	schemas["rotateResult"] = obj{
		"type":     "object",
		"required": []string{"rotations", "keys_revision", "switch_revision"},
		"properties": obj{
			"rotations": obj{"type": "array", "items": obj{
				"type": "object",
				"properties": obj{
					"chain":   obj{"type": "string"},
					"slot":    obj{"type": "integer", "description": "The slot with the new keys, which the headend now starts packets with."},
					"headend": obj{"type": "string"},
					"nodes":   obj{"type": "array", "items": obj{"type": "string"}, "description": "Member nodes, by hop."},
				},
			}},
			"keys_revision":   obj{"type": "integer", "description": "Spec revision of the write with the new keys."},
			"switch_revision": obj{"type": "integer", "description": "Spec revision of the headends' switch."},
		},
	}
	schemas["error"] = obj{
		"type":     "object",
		"required": []string{"error"},
		"properties": obj{
			"error": obj{"type": "string"},
			"problems": obj{"type": "array", "items": obj{
				"type":     "object",
				"required": []string{"message"},
				"properties": obj{
					"path":    obj{"type": "string", "description": "Field path in the spec document, e.g. chains[3].nfs[0]."},
					"object":  obj{"type": "string", "description": "KIND/ID of the object the path is in, e.g. chains/web."},
					"message": obj{"type": "string"},
				},
			}},
		},
	}
	schemas["nodeState"] = obj{
		"type": "object",
		"properties": obj{
			"node":       obj{"type": "string"},
			"generation": obj{"type": "integer", "description": "Grows only when this node's desired state changes (etcd mod revision of its key)."},
			"state":      obj{"type": "object", "description": "internal/state Network holding this node and its links; secrets redacted."},
		},
	}
	schemas["nodeStatus"] = obj{
		"type": "object",
		"properties": obj{
			"node":               obj{"type": "string"},
			"desired_generation": obj{"type": "integer"},
			"applied_generation": obj{"type": []string{"integer", "null"}, "description": "Generation the node's agent last applied; null when no agent is up or none applied yet."},
			"in_sync":            obj{"type": "boolean", "description": "An agent is up and applied the desired generation."},
			"agent":              obj{"type": "string", "enum": []string{"unknown", "up", "down"}, "description": "up: its status is kept alive by its etcd lease; down: an agent registered but its lease expired; unknown: no agent ever registered."},
			"last_error":         obj{"type": "string", "description": "The agent's last apply or drift check failure (a failed apply is rolled back)."},
			"drift":              obj{"type": "array", "items": obj{"type": "string"}, "description": "What the agent's last periodic check found different (re-applied since)."},
			"report":             obj{"type": "object", "description": "The agent's status document as written (applied and desired generation, applies, changes, last error, drift, times, version)."},
			"report_error":       obj{"type": "string", "description": "Why the agent's status document could not be read (not JSON); report is then absent and in_sync false."},
		},
	}

	errs := obj{
		"400": answer("Body is not exactly one JSON object (nothing after it, no duplicate key), lacks an id or does not match the path.", ref("error")),
		"401": answer("Missing or wrong bearer token; the connection is closed.", ref("error")),
		"503": answer("The store (etcd) did not answer in time (serve --store-timeout) or is unavailable; a write may or may not have been stored.", ref("error")),
	}
	writeAnswers := func(okCode, okDesc string) obj {
		a := obj{
			okCode: answer(okDesc, ref("writeResult")),
			"409":  answer("Object exists (POST) or If-Match revision is stale.", ref("error")),
			"413":  answer("The body exceeds 32 MiB, or the write exceeds the etcd cluster's limits (request size, operations per transaction); nothing stored.", ref("error")),
			"422":  answer("The spec would be invalid: its problems with their paths (the first 100, then a count); nothing stored.", ref("error")),
		}
		for k, v := range errs {
			a[k] = v
		}
		return a
	}
	readAnswers := func(desc string, schema obj) obj {
		return obj{"200": answer(desc, schema), "401": errs["401"], "404": answer("No such object.", ref("error")), "503": errs["503"]}
	}
	ifMatch := obj{"name": "If-Match", "in": "header", "required": false,
		"description": "Spec revision (an ETag this API gave): the write fails with 409 if the spec changed since.",
		"schema":      obj{"type": "string"}}
	name := obj{"name": "name", "in": "path", "required": true, "schema": obj{"type": "string"},
		"description": "Object name; an unnamed link is NODE:IF,NODE:IF of its endpoints."}

	paths := obj{
		"/v1/openapi.json": obj{"get": obj{"summary": "This document.", "operationId": "openapi",
			"responses": obj{"200": answer("OpenAPI 3 document.", obj{"type": "object"}), "401": errs["401"]}}},
		"/v1/spec": obj{
			"get": obj{"summary": "The whole stored spec.", "operationId": "getSpec",
				"responses": obj{"200": answer("Spec document; ETag is its revision.", ref("specDocument")), "401": errs["401"]}},
			"put": obj{"summary": "Replace the whole spec (objects not in the body are deleted).", "operationId": "putSpec",
				"parameters": []any{ifMatch}, "requestBody": jsonBody(ref("specDocument")), "responses": writeAnswers("200", "Stored.")},
			"patch": obj{"summary": "Merge a spec: set name/sid_format when given, create or replace each object by id (srchain apply).", "operationId": "patchSpec",
				"parameters": []any{ifMatch}, "requestBody": jsonBody(ref("specDocument")), "responses": writeAnswers("200", "Stored.")},
		},
		"/v1/nodes/{name}/desired": obj{"get": obj{"summary": "A node's desired state and generation (what its agent applies).", "operationId": "getDesired",
			"parameters": []any{name}, "responses": readAnswers("Desired state.", ref("nodeState"))}},
		"/v1/nodes/{name}/status": obj{"get": obj{"summary": "A node's status: desired and applied generation, agent up or down, drift.", "operationId": "getStatus",
			"parameters": []any{name}, "responses": readAnswers("Status.", ref("nodeStatus"))}},
		"/v1/opot/rotate": obj{"post": obj{"summary": "New OPoT keys for chains, without dropping packets: the free slot on every member, then (once their agents applied it) the headends' switch (docs/opot.md \"Rotation\").", "operationId": "rotateOPoT",
			"requestBody": jsonBody(ref("rotateRequest")),
			"responses": obj{
				"200": answer("Rotated: keys stored and applied, headends switched; ETag is the switch's revision.", ref("rotateResult")),
				"400": errs["400"], "401": errs["401"],
				"404": answer("No such OPoT chain, or no spec stored.", ref("error")),
				"409": answer("The spec changed while the rotation was written.", ref("error")),
				"504": answer("The new keys are stored but not every member's agent applied them in time: the headends were not switched (harmless; rotate again).", ref("error")),
			}}},
	}
	schemaOf := map[string]string{KindNodes: "node", KindLinks: "link", KindNFs: "nf", KindChains: "chain"}
	for _, k := range Kinds {
		s := ref(schemaOf[k])
		paths["/v1/"+k] = obj{
			"get": obj{"summary": "List " + k + ".", "operationId": "list_" + k,
				"responses": obj{"200": answer("Items in spec order.", obj{"type": "object", "properties": obj{"items": obj{"type": "array", "items": s}}}), "401": errs["401"]}},
			"post": obj{"summary": "Create one of " + k + ".", "operationId": "create_" + k,
				"parameters": []any{ifMatch}, "requestBody": jsonBody(s), "responses": writeAnswers("201", "Created; Location names it.")},
		}
		paths["/v1/"+k+"/{name}"] = obj{
			"get": obj{"summary": "Get one of " + k + ".", "operationId": "get_" + k,
				"parameters": []any{name}, "responses": readAnswers("The object as submitted.", s)},
			"put": obj{"summary": "Create or replace one of " + k + ".", "operationId": "put_" + k,
				"parameters": []any{name, ifMatch}, "requestBody": jsonBody(s), "responses": writeAnswers("200", "Stored.")},
			"delete": obj{"summary": "Delete one of " + k + ".", "operationId": "delete_" + k,
				"parameters": []any{name, ifMatch}, "responses": func() obj {
					a := writeAnswers("200", "Deleted.")
					a["404"] = answer("No such object.", ref("error"))
					return a
				}()},
		}
	}
	doc := obj{
		"openapi": "3.1.0",
		"info": obj{"title": "srchain controller", "version": "v1",
			"description": "Northbound API of srchain's controller (docs/controller.md). Every request needs Authorization: Bearer TOKEN."},
		"security": []any{obj{"bearer": []any{}}},
		"paths":    paths,
		"components": obj{
			"securitySchemes": obj{"bearer": obj{"type": "http", "scheme": "bearer"}},
			"schemas":         schemas,
		},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}
