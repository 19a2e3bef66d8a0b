package spec

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type schemaNode struct {
	Ref                  string                 `json:"$ref"`
	Type                 any                    `json:"type"`
	Properties           map[string]*schemaNode `json:"properties"`
	Items                *schemaNode            `json:"items"`
	AdditionalProperties json.RawMessage        `json:"additionalProperties"`
	Enum                 []string               `json:"enum"`
	Defs                 map[string]*schemaNode `json:"$defs"`
}

// TestSchemaMatchesTypes walks the Go types and the schema together: every
// yaml-tagged field has a schema property and every schema property a
// field, objects forbid additional properties, lists are lists.
func TestSchemaMatchesTypes(t *testing.T) {
	var root schemaNode
	if err := json.Unmarshal(Schema, &root); err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	resolve := func(n *schemaNode) *schemaNode {
		for n != nil && n.Ref != "" {
			name, ok := strings.CutPrefix(n.Ref, "#/$defs/")
			if !ok || root.Defs[name] == nil {
				t.Fatalf("bad $ref %q", n.Ref)
			}
			n = root.Defs[name]
		}
		return n
	}
	var walk func(path string, typ reflect.Type, n *schemaNode)
	walk = func(path string, typ reflect.Type, n *schemaNode) {
		n = resolve(n)
		if n == nil {
			t.Errorf("%s: no schema", path)
			return
		}
		switch {
		case typ.Kind() == reflect.Pointer:
			walk(path, typ.Elem(), n)
		case typ == reflect.TypeOf(yaml.Node{}), typ == reflect.TypeOf(netip.Prefix{}),
			typ == reflect.TypeOf(netip.Addr{}), typ == reflect.TypeOf(PortRange{}):
			// Scalars (or free-form config) in YAML.
		case typ.Kind() == reflect.Map:
			// A map (chains[].args): an object whose values follow
			// additionalProperties.
			var vals schemaNode
			if n.Type != "object" || json.Unmarshal(n.AdditionalProperties, &vals) != nil || vals.Type == nil {
				t.Errorf("%s: schema is not an object with typed additionalProperties", path)
			}
		case typ.Kind() == reflect.Slice:
			if n.Type != "array" || n.Items == nil {
				t.Errorf("%s: schema is not an array", path)
				return
			}
			walk(path+"[]", typ.Elem(), n.Items)
		case typ.Kind() == reflect.Struct:
			if n.Type != "object" {
				t.Errorf("%s: schema type %v, want object", path, n.Type)
			}
			if string(n.AdditionalProperties) != "false" {
				t.Errorf("%s: schema must set additionalProperties: false", path)
			}
			fields := yamlFields(typ)
			for name, idx := range fields {
				p, ok := n.Properties[name]
				if !ok {
					t.Errorf("%s.%s: yaml field missing from schema", path, name)
					continue
				}
				walk(path+"."+name, typ.Field(idx).Type, p)
			}
			for name := range n.Properties {
				if _, ok := fields[name]; !ok {
					t.Errorf("%s.%s: schema property has no Go field", path, name)
				}
			}
		}
	}
	walk("spec", reflect.TypeOf(Spec{}), &root)
	// The kind enum is checked against the registered kinds in
	// internal/kinds/all, where every kind is linked in.
}
