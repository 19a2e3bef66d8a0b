package spec

import "testing"

// TestPathSetUnder: a validation error is dropped when its field, or a
// field above it, failed to decode; siblings and fields that only share
// a name prefix are kept.
func TestPathSetUnder(t *testing.T) {
	set := failedPaths([]*FieldError{{Path: "chains[3].match"}, {Path: "nodes[1]"}})
	for path, want := range map[string]bool{
		"chains[3].match":        true,
		"chains[3].match.dst[7]": true,
		"chains[3].matchx":       false,
		"chains[3].nfs":          false,
		"chains[30].match":       false,
		"nodes[1].name":          true,
		"nodes[1]":               true,
		"nodes[10]":              false,
		"":                       false,
	} {
		if got := set.under(path); got != want {
			t.Errorf("under(%q) = %v, want %v", path, got, want)
		}
	}
	if !failedPaths([]*FieldError{{Path: ""}}).under("anything.at[1].all") {
		t.Error("a failed document must cover every path")
	}
	if failedPaths(nil).under("x") {
		t.Error("no failed path covers nothing")
	}
}

// TestNearest: a misspelt key is matched to the field meant when it is
// a typo (one or two edits, a prefix), and to nothing otherwise.
func TestNearest(t *testing.T) {
	fields := map[string]int{"name": 0, "nodes": 1, "nfs": 2, "locator": 3, "role": 4, "links": 5}
	for key, want := range map[string]string{
		"nod":     "nodes",
		"nf":      "nfs",
		"locater": "locator",
		"rol":     "role",
		"nmae":    "name",
		"colour":  "",
		"x":       "",
		"linx":    "links",
	} {
		if got := nearest(key, fields); got != want {
			t.Errorf("nearest(%q) = %q, want %q", key, got, want)
		}
	}
}
