package spec

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// A minimal JSON Schema checker for the keywords schema.json uses, so the
// tests can prove that every example satisfies the schema editors see.
type jschema map[string]any

func checkSchema(root, s jschema, v any, path string) []string {
	if ref, ok := s["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/$defs/")
		def, _ := root["$defs"].(map[string]any)[name].(map[string]any)
		if def == nil {
			return []string{path + ": bad $ref " + ref}
		}
		return checkSchema(root, def, v, path)
	}
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, path+": "+fmt.Sprintf(format, args...)) }
	if alts, ok := s["oneOf"].([]any); ok {
		n := 0
		for _, a := range alts {
			if len(checkSchema(root, a.(map[string]any), v, path)) == 0 {
				n++
			}
		}
		if n != 1 {
			fail("matches %d of oneOf", n)
		}
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if e == v {
				found = true
			}
		}
		if !found {
			fail("%v not in enum", v)
		}
	}
	switch t := s["type"]; t {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			fail("not an object")
			return errs
		}
		props, _ := s["properties"].(map[string]any)
		for _, r := range asList(s["required"]) {
			if _, ok := m[r.(string)]; !ok {
				fail("missing %s", r)
			}
		}
		for k, val := range m {
			p, ok := props[k].(map[string]any)
			if !ok {
				if s["additionalProperties"] == false {
					fail("unexpected %s", k)
				}
				continue
			}
			errs = append(errs, checkSchema(root, p, val, path+"."+k)...)
		}
	case "array":
		l, ok := v.([]any)
		if !ok {
			fail("not an array")
			return errs
		}
		if mn, ok := s["minItems"].(float64); ok && float64(len(l)) < mn {
			fail("fewer than %v items", mn)
		}
		if mx, ok := s["maxItems"].(float64); ok && float64(len(l)) > mx {
			fail("more than %v items", mx)
		}
		if it, ok := s["items"].(map[string]any); ok {
			for i, e := range l {
				errs = append(errs, checkSchema(root, it, e, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			fail("not a string: %v", v)
			return errs
		}
		if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			fail("%q does not match %s", str, p)
		}
		if mx, ok := s["maxLength"].(float64); ok && float64(len(str)) > mx {
			fail("%q longer than %v", str, mx)
		}
	case "integer":
		f, ok := v.(float64)
		if !ok || f != math.Trunc(f) {
			fail("not an integer: %v", v)
			return errs
		}
		if mn, ok := s["minimum"].(float64); ok && f < mn {
			fail("%v < %v", f, mn)
		}
		if mx, ok := s["maximum"].(float64); ok && f > mx {
			fail("%v > %v", f, mx)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			fail("not a boolean")
		}
	case nil:
	default:
		fail("checker does not know type %v", t)
	}
	return errs
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// yamlToJSON decodes YAML into the JSON data model (numbers as float64).
func yamlToJSON(t *testing.T, data []byte) any {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestExamplesMatchSchema(t *testing.T) {
	var root jschema
	if err := json.Unmarshal(Schema, &root); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../../examples/*.yaml")
	extra, _ := filepath.Glob("../compile/testdata/*.yaml")
	for _, f := range append(files, extra...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if errs := checkSchema(root, root, yamlToJSON(t, data), "spec"); len(errs) > 0 {
			t.Errorf("%s does not match the schema:\n%s", f, strings.Join(errs, "\n"))
		}
	}
	// And the schema rejects what strict decoding rejects (the three
	// unknown keys, and the chain's nfs that its misspelt "nf" leaves out).
	data, _ := os.ReadFile("../../examples/bad/unknown-field.yaml")
	if errs := checkSchema(root, root, yamlToJSON(t, data), "spec"); len(errs) != 4 {
		t.Errorf("unknown-field.yaml: want 4 schema errors, got %q", errs)
	}
}
