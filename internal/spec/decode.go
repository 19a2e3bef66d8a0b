package spec

import (
	"bytes"
	"cmp"
	"encoding"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// minNodes is the least bound on the YAML nodes a document may expand to
// (nodeLimit): small documents get this many whatever their size, so an
// alias-using spec of a few kilobytes still decodes.
const minNodes = 200_000

// bytesPerNode sizes the bound on larger documents: a document may expand
// to len/bytesPerNode nodes. A chain of the benchmark's shape
// (internal/controller/bench_test.go benchChain) is ~14 nodes in ~150
// bytes of JSON or ~130 of YAML, ~10 bytes a node; 4 leaves room for
// denser specs while alias expansion ("billion laughs") stays bounded by
// the input: a document never costs more nodes than a quarter of its
// bytes, and at most MaxSpecSize/4 (8 Mi) nodes in all. A fixed 200,000
// refused 20,000 chains, the documented maximum, at ~18,170 (issue 38).
const bytesPerNode = 4

// nodeLimit is the YAML node bound of a document of size bytes.
func nodeLimit(size int) int {
	return max(minNodes, min(size, MaxSpecSize)/bytesPerNode)
}

// Load reads, decodes and validates the spec at path. The error, if any,
// joins every problem found (FieldError values; see FieldErrors).
func Load(path string) (*Spec, error) {
	// Only a regular file of at most MaxSpecSize bytes (ReadFile's rules):
	// "srchain plan /dev/zero" is an error, not a hang. A *fs.PathError,
	// "read spec /x.yaml: no such file or directory", which callers tell
	// from an invalid spec.
	data, err := readLimited(path, MaxSpecSize)
	if err != nil {
		return nil, &fs.PathError{Op: "read spec", Path: path, Err: err}
	}
	return Check(data, path)
}

// Check decodes and validates data. Fields that failed to decode are not
// validated again, so each problem is reported once.
func Check(data []byte, filename string) (*Spec, error) {
	s, err := Parse(data, filename)
	if s == nil {
		return nil, err
	}
	if s.truncated {
		return s, err
	}
	decodeErrs := FieldErrors(err)
	fes := slices.Clone(decodeErrs)
	failed := failedPaths(decodeErrs)
	for path := range s.tainted {
		failed[path] = true
	}
	for _, e := range FieldErrors(s.Validate()) {
		if !failed.under(e.Path) {
			fes = append(fes, e)
		}
	}
	if len(fes) == 0 {
		return s, nil
	}
	// Report in file order, as a compiler would.
	slices.SortStableFunc(fes, func(a, b *FieldError) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	all := make([]error, len(fes))
	for i, e := range fes {
		all[i] = e
	}
	return s, errors.Join(all...)
}

// pathSet holds the paths of fields that failed to decode.
type pathSet map[string]bool

func failedPaths(errs []*FieldError) pathSet {
	set := pathSet{}
	for _, e := range errs {
		set[e.Path] = true
	}
	return set
}

// under reports whether path is a failed path or lies below one ("" is
// the whole document). It looks up path's ancestors (cut at each "." and
// "["), so checking every validation error costs the errors' length, not
// their number times the decode errors' (issue 38: a body with 40,000
// bad entries took minutes).
func (set pathSet) under(path string) bool {
	if len(set) == 0 {
		return false
	}
	if set[""] || set[path] {
		return true
	}
	for i := 0; i < len(path); i++ {
		if (path[i] == '.' || path[i] == '[') && set[path[:i]] {
			return true
		}
	}
	return false
}

// Parse decodes one YAML document strictly and applies defaults (see
// applyDefaults). It does not validate meaning. On a YAML syntax error it
// returns a nil Spec; on field errors (unknown key, wrong type, bad
// address) it returns the partly decoded Spec and every such error.
func Parse(data []byte, filename string) (*Spec, error) {
	s := &Spec{File: filename, pos: map[string]pos{}, tainted: map[string]bool{}}
	if fe := notUTF8(data); fe != nil {
		fe.File = filename
		return nil, fe
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, s.errorf("", "empty document")
		}
		return nil, syntaxError(filename, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, syntaxError(filename, err)
		}
		return nil, &FieldError{File: filename, Line: extra.Line, Col: extra.Column, Msg: "more than one YAML document"}
	}
	d := decoder{s: s, lines: bytes.Split(data, []byte("\n")), maxNodes: nodeLimit(len(data))}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	d.value(root, reflect.ValueOf(s).Elem(), "")
	s.applyDefaults()
	return s, errors.Join(d.errs...)
}

// notUTF8 reports where a UTF-8 document (no UTF-16 byte order mark,
// which yaml.v3 decodes itself) first breaks the encoding: yaml.v3 says
// only "invalid leading UTF-8 octet", without a position.
func notUTF8(data []byte) *FieldError {
	if utf8.Valid(data) || bytes.HasPrefix(data, []byte{0xfe, 0xff}) || bytes.HasPrefix(data, []byte{0xff, 0xfe}) {
		return nil
	}
	line, col := 1, 1
	for len(data) > 0 {
		r, n := utf8.DecodeRune(data)
		if r == utf8.RuneError && n <= 1 {
			return &FieldError{Line: line, Col: col, Msg: fmt.Sprintf("not UTF-8: byte 0x%02x", data[0])}
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		data = data[n:]
	}
	return nil
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// syntaxError turns a yaml.v3 parse error into a FieldError with its line.
func syntaxError(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	fe := &FieldError{File: file, Msg: msg}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		fe.Line, _ = strconv.Atoi(m[1])
		fe.Col = 1
		fe.Msg = strings.TrimSpace(strings.TrimPrefix(msg, m[0]+":"))
	}
	return fe
}

// decoder walks a yaml.Node tree into Go values by reflection. It is
// stricter than yaml.v3's own decoding (unknown keys, duplicate keys and
// type mismatches are errors) and records the position of every field.
type decoder struct {
	s     *Spec
	errs  []error
	nodes int
	// maxNodes is nodeLimit of the source's size.
	maxNodes int
	lines    [][]byte // the source, for tagOK
	// runes caches the characters of the non-ASCII lines srcAt looked at
	// (columns count characters); ASCII lines are indexed directly. A JSON
	// document (the API's) is one line of megabytes: converting it per
	// scalar made decoding quadratic.
	runes map[int][]rune
	ascii map[int]bool // per line: only ASCII characters
}

var (
	yamlNodeType  = reflect.TypeOf(yaml.Node{})
	textUnmarshal = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

func (d *decoder) fail(path string, n *yaml.Node, format string, args ...any) {
	fe := &FieldError{File: d.s.File, Path: cutEcho(path), Msg: fmt.Sprintf(format, clipArgs(args)...)}
	if n != nil {
		fe.Line, fe.Col = n.Line, n.Column
	}
	d.errs = append(d.errs, fe)
}

func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	d.nodes++
	if d.nodes > d.maxNodes {
		if d.nodes == d.maxNodes+1 {
			d.fail(path, n, "document too large (more than %d YAML nodes after aliases)", d.maxNodes)
			d.s.truncated = true
		}
		return
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			d.fail(path, n, "unresolved alias")
			return
		}
		n = n.Alias
	}
	if _, ok := d.s.pos[path]; !ok {
		d.s.pos[path] = pos{n.Line, n.Column, false}
	}
	if !d.tagOK(n, path) {
		return
	}
	t := v.Type()
	if t == yamlNodeType {
		// An NF's config, decoded later by its kind: give the kind a
		// tree without aliases, so that `rules: *x` and `- *r9` mean
		// what they mean in YAML (the anchored value) and not the
		// alias's name. Errors inside an aliased value point at the
		// anchor (docs/spec.md).
		v.Set(reflect.ValueOf(*d.expand(n, path)))
		return
	}
	if isNull(n) {
		// A bare "opot:" is not false: a switch is said or left out.
		if t.Kind() == reflect.Bool {
			d.fail(path, n, "expected true or false, got an empty value")
		}
		return // leave the zero value; Validate reports required fields
	}
	if reflect.PointerTo(t).Implements(textUnmarshal) {
		if n.Kind != yaml.ScalarNode {
			d.fail(path, n, "expected %s, got %s", typeName(t), kindName(n))
			return
		}
		u := v.Addr().Interface().(encoding.TextUnmarshaler)
		if n.Value == "" {
			d.fail(path, n, "empty %s", typeName(t))
			return
		}
		if err := u.UnmarshalText([]byte(n.Value)); err != nil {
			d.fail(path, n, "bad %s %q", typeName(t), n.Value)
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		d.value(n, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		d.mapping(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(path, n, "expected a list, got %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.value(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.fail(path, n, "expected a string, got %s", kindName(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Int:
		i, err := strconv.ParseInt(n.Value, 0, 32)
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || err != nil {
			d.fail(path, n, "expected an integer, got %s", kindName(n))
			return
		}
		v.SetInt(i)
	case reflect.Uint64:
		u, err := strconv.ParseUint(n.Value, 0, 64)
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || err != nil {
			d.fail(path, n, "expected a non-negative integer, got %s", kindName(n))
			return
		}
		v.SetUint(u)
	case reflect.Map:
		// String keys only (chains[].args): each key once.
		if n.Kind != yaml.MappingNode || t.Key().Kind() != reflect.String {
			d.fail(path, n, "expected a mapping, got %s", kindName(n))
			return
		}
		m := reflect.MakeMapWithSize(t, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Value == "<<" {
				d.fail(path, k, "mapping keys must be strings")
				continue
			}
			key := reflect.ValueOf(k.Value).Convert(t.Key())
			if m.MapIndex(key).IsValid() {
				d.fail(path+"."+k.Value, k, "duplicate key %q", k.Value)
				continue
			}
			e := reflect.New(t.Elem()).Elem()
			d.value(val, e, path+"."+k.Value)
			m.SetMapIndex(key, e)
		}
		v.Set(m)
	case reflect.Bool:
		b, err := strconv.ParseBool(n.Value)
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || err != nil {
			d.fail(path, n, "expected true or false, got %s", kindName(n))
			return
		}
		v.SetBool(b)
	default:
		// Only reachable if a spec type gains a field kind the decoder
		// does not know; report rather than panic.
		d.fail(path, n, "internal: cannot decode into %s", t)
	}
}

// tagOK refuses explicit YAML tags other than the core schema's (!!str,
// !!int, ...). A local tag is never meaningful in a spec, and the common
// one is an accident: an unquoted firewall rule `- ! -p tcp -j DROP` is the
// string "-p tcp -j DROP" with the tag "!", i.e. the negation silently
// dropped and the rule inverted.
//
// yaml.v3 resolves the non-specific tag "!" to !!str without marking the
// node as tagged, so a plain scalar is checked against the source: it
// starts at its '!' while its value does not.
func (d *decoder) tagOK(n *yaml.Node, path string) bool {
	tag := ""
	switch {
	case n.Style&yaml.TaggedStyle != 0 && !strings.HasPrefix(n.Tag, "!!"):
		tag = n.Tag
	case n.Kind == yaml.ScalarNode && n.Style == 0 && d.srcAt(n) == '!' && !strings.HasPrefix(n.Value, "!"):
		tag = "!"
	}
	if tag == "" {
		return true
	}
	d.fail(path, n, "YAML tag %q is not allowed (a value starting with '!' must be quoted)", tag)
	return false
}

// srcAt is the source byte where n starts (0 if unknown).
func (d *decoder) srcAt(n *yaml.Node) byte {
	if n.Line < 1 || n.Line > len(d.lines) {
		return 0
	}
	b := d.lines[n.Line-1]
	if n.Column < 1 {
		return 0
	}
	ascii, ok := d.ascii[n.Line]
	if !ok {
		ascii = isASCII(b)
		if d.ascii == nil {
			d.ascii = map[int]bool{}
		}
		d.ascii[n.Line] = ascii
	}
	if ascii {
		if n.Column > len(b) {
			return 0
		}
		return b[n.Column-1]
	}
	l, ok := d.runes[n.Line]
	if !ok {
		l = []rune(string(b))
		if d.runes == nil {
			d.runes = map[int][]rune{}
		}
		d.runes[n.Line] = l
	}
	if n.Column > len(l) {
		return 0
	}
	return byte(min(l[n.Column-1], 0x7f))
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// expand copies n with every alias replaced by a copy of its anchored
// node, counting the copies against d.maxNodes (an alias bomb is caught
// here as in the rest of the document).
func (d *decoder) expand(n *yaml.Node, path string) *yaml.Node {
	for n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			d.fail(path, n, "unresolved alias")
			return &yaml.Node{}
		}
		n = n.Alias
	}
	if !d.tagOK(n, path) {
		return &yaml.Node{}
	}
	c := *n
	c.Anchor = ""
	if len(n.Content) > 0 {
		c.Content = make([]*yaml.Node, 0, len(n.Content))
		for _, item := range n.Content {
			d.nodes++
			if d.nodes > d.maxNodes {
				if d.nodes == d.maxNodes+1 {
					d.fail(path, n, "document too large (more than %d YAML nodes after aliases)", d.maxNodes)
					d.s.truncated = true
				}
				return &yaml.Node{}
			}
			c.Content = append(c.Content, d.expand(item, path))
		}
	}
	return &c
}

// mapping decodes a YAML mapping into a struct by yaml tags.
func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(path, n, "expected a mapping, got %s", kindName(n))
		return
	}
	fields := yamlFields(v.Type())
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := k.Value
		fpath := key
		if path != "" {
			fpath = path + "." + key
		}
		if k.Kind != yaml.ScalarNode {
			d.fail(path, k, "mapping keys must be strings")
			continue
		}
		if key == "<<" {
			d.fail(path, k, "merge keys (<<) are not supported")
			continue
		}
		idx, ok := fields[key]
		if !ok {
			near := nearest(key, fields)
			if near == "" {
				d.fail(fpath, k, "unknown field %q", key)
				continue
			}
			d.fail(fpath, k, "unknown field %q (did you mean %q?)", key, near)
			// The field meant is missing because of the typo: what its
			// own checks say (required, at least one...) only echoes it.
			if path != "" {
				d.s.tainted[path+"."+near] = true
			} else {
				d.s.tainted[near] = true
			}
			continue
		}
		if seen[key] {
			d.fail(fpath, k, "duplicate field %q", key)
			continue
		}
		seen[key] = true
		d.s.pos[fpath] = pos{k.Line, k.Column, val.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0}
		d.value(val, v.Field(idx), fpath)
	}
}

// nearest is the field name closest to key by edit distance, when it
// is close enough to be a typo (at most 2 edits, and at most half of
// key's letters), or a prefix of key or key of it ("nod" for "nodes");
// "" otherwise. Ties go to the name that sorts first.
func nearest[V any](key string, fields map[string]V) string {
	best, bestD := "", 3
	for name := range fields {
		dist := editDistance(key, name)
		if len(key) >= 3 && (strings.HasPrefix(name, key) || strings.HasPrefix(key, name)) {
			dist = min(dist, 1)
		} else if dist > 2 || dist*2 > len(key) {
			continue
		}
		if dist < bestD || dist == bestD && name < best {
			best, bestD = name, dist
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// yamlFields maps yaml tag names to struct field indexes.
func yamlFields(t reflect.Type) map[string]int {
	m := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := yamlName(f)
		if name == "" {
			continue
		}
		m[name] = i
	}
	return m
}

// yamlName is the YAML key of a struct field, "" when it has none.
func yamlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag := f.Tag.Get("yaml")
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" || name == "" {
		return ""
	}
	return name
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

func typeName(t reflect.Type) string {
	switch t {
	case reflect.TypeOf(netip.Prefix{}):
		return "prefix"
	case reflect.TypeOf(netip.Addr{}):
		return "address"
	case reflect.TypeOf(PortRange{}):
		return "port range"
	}
	return t.String()
}
