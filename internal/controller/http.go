package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/srchain/srchain/api"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/store"
)

// maxBody bounds a request body: a whole spec, the largest object the
// API takes, as large as a spec file may be.
const maxBody = spec.MaxSpecSize

// Route is one operation of the API, as registered on the mux and listed
// in api/openapi.json (a test keeps the two equal).
type Route struct {
	Method, Path string
	handle       http.HandlerFunc
}

// Routes lists the API's operations.
func (c *Controller) Routes() []Route {
	rs := []Route{
		{"GET", "/v1/openapi.json", serveOpenAPI},
		{"GET", "/v1/spec", c.getSpec},
		{"PUT", "/v1/spec", c.putSpec},
		{"PATCH", "/v1/spec", c.patchSpec},
		{"GET", "/v1/nodes/{name}/desired", c.getDesired},
		{"GET", "/v1/nodes/{name}/status", c.getStatus},
		{"POST", "/v1/opot/rotate", c.postRotate},
	}
	for _, k := range Kinds {
		rs = append(rs,
			Route{"GET", "/v1/" + k, c.list(k)},
			Route{"POST", "/v1/" + k, c.create(k)},
			Route{"GET", "/v1/" + k + "/{name}", c.get(k)},
			Route{"PUT", "/v1/" + k + "/{name}", c.put(k)},
			Route{"DELETE", "/v1/" + k + "/{name}", c.remove(k)},
		)
	}
	return rs
}

// Handler serves the API; every request must carry the bearer token.
func (c *Controller) Handler(token string) http.Handler {
	mux := http.NewServeMux()
	for _, r := range c.Routes() {
		mux.HandleFunc(r.Method+" "+r.Path, r.handle)
	}
	return logged(requireToken(token, mux))
}

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(api.OpenAPI)
}

func (c *Controller) getSpec(w http.ResponseWriter, r *http.Request) {
	doc, rev, err := c.Spec(r.Context())
	if err != nil {
		fail(w, r, err)
		return
	}
	b, err := doc.encode()
	if err != nil {
		fail(w, r, err)
		return
	}
	setETag(w, rev)
	writeRaw(w, http.StatusOK, b)
}

// putSpec replaces the whole spec.
func (c *Controller) putSpec(w http.ResponseWriter, r *http.Request) {
	in, ok := readDoc(w, r)
	if !ok {
		return
	}
	c.write(w, r, http.StatusOK, func(d *Doc) error {
		*d = *in
		return nil
	})
}

// patchSpec merges a spec into the stored one: name, sid_format, routing
// and the pools when given, and every object created or replaced by id
// (kubectl apply).
func (c *Controller) patchSpec(w http.ResponseWriter, r *http.Request) {
	in, ok := readDoc(w, r)
	if !ok {
		return
	}
	c.write(w, r, http.StatusOK, func(d *Doc) error {
		if in.Name != "" {
			d.Name = in.Name
		}
		if in.SIDFormat != nil {
			d.SIDFormat = in.SIDFormat
		}
		if in.Routing != "" {
			d.Routing = in.Routing
		}
		if in.Pools != nil {
			d.Pools = in.Pools
		}
		for _, k := range Kinds {
			l, index := d.list(k), d.index(k)
			for _, raw := range *in.list(k) {
				id, _ := objectID(k, raw) // checked by readDoc
				if i, ok := index[id]; ok {
					(*l)[i] = raw
				} else {
					index[id] = len(*l)
					*l = append(*l, raw)
				}
			}
		}
		d.ids = nil // appended to behind find's back
		return nil
	})
}

// readDoc decodes a spec document body; unknown top-level keys and
// objects without an id are refused.
func readDoc(w http.ResponseWriter, r *http.Request) (*Doc, bool) {
	b, err := readJSONObject(w, r)
	if err != nil {
		fail(w, r, err)
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	d := &Doc{}
	if err := dec.Decode(d); err != nil {
		fail(w, r, fmt.Errorf("%w: %v", errBadObject, err))
		return nil, false
	}
	for _, k := range Kinds {
		l := d.list(k)
		seen := map[string]bool{}
		for i, raw := range *l {
			obj, err := compactObject(raw)
			if err != nil {
				fail(w, r, fmt.Errorf("%s[%d]: %w", k, i, err))
				return nil, false
			}
			id, err := objectID(k, obj)
			if err != nil {
				fail(w, r, fmt.Errorf("%s[%d]: %w", k, i, err))
				return nil, false
			}
			if seen[id] {
				fail(w, r, fmt.Errorf("%s[%d]: %w: %s appears twice", k, i, errBadObject, id))
				return nil, false
			}
			seen[id] = true
			(*l)[i] = obj
		}
	}
	return d, true
}

func (c *Controller) list(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		doc, rev, err := c.Spec(r.Context())
		if err != nil {
			fail(w, r, err)
			return
		}
		items := *doc.list(kind)
		if items == nil {
			items = []json.RawMessage{}
		}
		setETag(w, rev)
		writeJSON(w, http.StatusOK, map[string]any{"items": items})
	}
}

func (c *Controller) get(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		doc, rev, err := c.Spec(r.Context())
		if err != nil {
			fail(w, r, err)
			return
		}
		i := doc.find(kind, r.PathValue("name"))
		if i < 0 {
			fail(w, r, fmt.Errorf("%s/%s: %w", kind, r.PathValue("name"), ErrNotFound))
			return
		}
		setETag(w, rev)
		writeRaw(w, http.StatusOK, (*doc.list(kind))[i])
	}
}

// create adds an object; one with the same id is a conflict.
func (c *Controller) create(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		obj, id, ok := readObject(w, r, kind, "")
		if !ok {
			return
		}
		// Location only once the write succeeded: the id passed the
		// spec's validation then, and an error answer never echoes an
		// unchecked name in a header (issue 38, Low).
		c.writeAt(w, r, http.StatusCreated, "/v1/"+kind+"/"+url.PathEscape(id), func(d *Doc) error {
			if d.find(kind, id) >= 0 {
				return fmt.Errorf("%s/%s: %w", kind, id, ErrExists)
			}
			d.upsert(kind, id, obj)
			return nil
		})
	}
}

// put creates or replaces the object named in the path.
func (c *Controller) put(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		obj, id, ok := readObject(w, r, kind, r.PathValue("name"))
		if !ok {
			return
		}
		c.write(w, r, http.StatusOK, func(d *Doc) error {
			d.upsert(kind, id, obj)
			return nil
		})
	}
}

func (c *Controller) remove(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("name")
		c.write(w, r, http.StatusOK, func(d *Doc) error {
			i := d.find(kind, id)
			if i < 0 {
				return fmt.Errorf("%s/%s: %w", kind, id, ErrNotFound)
			}
			d.remove(kind, i)
			return nil
		})
	}
}

// readObject reads one object; with a path name the body's id must match
// it (a body without a name takes the path's, links excepted: their id
// may come from their endpoints).
func readObject(w http.ResponseWriter, r *http.Request, kind, pathName string) (json.RawMessage, string, bool) {
	b, err := readJSONObject(w, r)
	if err == nil {
		b, err = compactObject(b)
	}
	if err == nil && pathName != "" && kind != KindLinks {
		b, err = withName(b, pathName)
	}
	var id string
	if err == nil {
		id, err = objectID(kind, b)
	}
	if err == nil && pathName != "" && id != pathName {
		err = fmt.Errorf("%w: body is %s/%s, path is %s/%s", errBadObject, kind, id, kind, pathName)
	}
	if err != nil {
		fail(w, r, err)
		return nil, "", false
	}
	return b, id, true
}

// write runs one Update with the request's If-Match and answers its
// Result.
func (c *Controller) write(w http.ResponseWriter, r *http.Request, code int, edit func(*Doc) error) {
	c.writeAt(w, r, code, "", edit)
}

// writeAt is write that sets Location to loc on success.
func (c *Controller) writeAt(w http.ResponseWriter, r *http.Request, code int, loc string, edit func(*Doc) error) {
	ifMatch, err := parseIfMatch(r.Header.Get("If-Match"))
	if err != nil {
		fail(w, r, err)
		return
	}
	res, err := c.Update(r.Context(), ifMatch, edit)
	if err != nil {
		fail(w, r, err)
		return
	}
	setETag(w, res.Revision)
	if loc != "" {
		w.Header().Set("Location", loc)
	}
	writeJSON(w, code, res)
}

func (c *Controller) getDesired(w http.ResponseWriter, r *http.Request) {
	ns, err := c.Desired(r.Context(), r.PathValue("name"))
	if err != nil {
		fail(w, r, err)
		return
	}
	setETag(w, ns.Generation)
	writeJSON(w, http.StatusOK, ns)
}

func (c *Controller) getStatus(w http.ResponseWriter, r *http.Request) {
	st, err := c.NodeStatus(r.Context(), r.PathValue("name"))
	if err != nil {
		fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// errBodyTooLarge: a body over maxBody (413).
var errBodyTooLarge = errors.New("request body too large")

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, fmt.Errorf("%w: over %d bytes", errBodyTooLarge, tooLarge.Limit)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read body: %v", errBadObject, err)
	}
	return b, nil
}

// readJSONObject reads a body that must be exactly one JSON object
// (checkJSON).
func readJSONObject(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := readBody(w, r)
	if err != nil {
		return nil, err
	}
	if err := checkJSON(b); err != nil {
		return nil, err
	}
	return b, nil
}

// checkJSON accepts exactly one JSON object with only whitespace around
// it and no duplicate key in any object: encoding/json alone takes the
// first value of `{} x` or `{}{}` and ignores the rest, decodes `null`
// into an empty spec (a PUT that wiped every node's state, issue 38 item
// 5), and keeps the last of two equal keys, where spec files refuse them
// (internal/spec's decoder). Keys are compared decoded, so "a" and
// "\u0061" are the same key (RFC 8259 section 4 leaves duplicates'
// meaning open; refusing them is the only reading that cannot differ
// from a client's). Linear in the body: json.Valid, then one pass over
// the bytes without copying keys (BenchmarkCheckJSON, a PATCH of 10,000
// chains, 1.2 MB: 11-18 ms on a loaded 2-vCPU machine, where walking
// json.Decoder.Token took 59 ms; the write itself takes 0.6-0.9 s).
func checkJSON(b []byte) error {
	t := bytes.TrimLeft(b, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("%w: the body must be a JSON object", errBadObject)
	}
	if !json.Valid(b) {
		// The decoder's message says what and where.
		var v any
		err := json.Unmarshal(b, &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return fmt.Errorf("%w: %v", errBadObject, err)
	}
	return duplicateKeys(b)
}

// duplicateKeys finds a key given twice in one object of b, which must
// be valid JSON (checkJSON).
func duplicateKeys(b []byte) error {
	type frame struct {
		object  bool
		wantKey bool
		keys    [][]byte            // the first keys: most objects are small
		set     map[string]struct{} // all keys, once there are many
	}
	var stack []frame
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{':
			stack = append(stack, frame{object: true, wantKey: true})
		case '[':
			stack = append(stack, frame{})
		case '}', ']':
			stack = stack[:len(stack)-1]
		case ',':
			if n := len(stack); n > 0 && stack[n-1].object {
				stack[n-1].wantKey = true
			}
		case '"':
			start, escaped := i, false
			for i++; b[i] != '"'; i++ {
				if b[i] == '\\' {
					escaped = true
					i++
				}
			}
			n := len(stack)
			if n == 0 || !stack[n-1].wantKey {
				continue
			}
			f := &stack[n-1]
			f.wantKey = false
			key := b[start+1 : i] // no copy unless escaped
			if escaped {
				var k string
				if err := json.Unmarshal(b[start:i+1], &k); err != nil {
					return fmt.Errorf("%w: %v", errBadObject, err)
				}
				key = []byte(k)
			}
			var dup bool
			if f.set != nil {
				_, dup = f.set[string(key)]
				f.set[string(key)] = struct{}{}
			} else {
				dup = slices.ContainsFunc(f.keys, func(k []byte) bool { return bytes.Equal(k, key) })
				f.keys = append(f.keys, key)
				if len(f.keys) > 16 {
					f.set = make(map[string]struct{}, 2*len(f.keys))
					for _, k := range f.keys {
						f.set[string(k)] = struct{}{}
					}
					f.keys = nil
				}
			}
			if dup {
				return fmt.Errorf("%w: duplicate key %s (at byte %d)", errBadObject, spec.Clip(string(key)), start)
			}
		}
	}
	return nil
}

// parseIfMatch reads an ETag as setETag writes it ("123"); 0 means none.
func parseIfMatch(v string) (int64, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "*" {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.Trim(strings.TrimPrefix(v, "W/"), `"`), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: If-Match %q is not a revision this API gave", errBadObject, v)
	}
	return n, nil
}

func setETag(w http.ResponseWriter, rev int64) {
	w.Header().Set("ETag", `"`+strconv.FormatInt(rev, 10)+`"`)
}

// errorBody is every error answer.
type errorBody struct {
	Error    string    `json:"error"`
	Problems []Problem `json:"problems,omitempty"`
}

// fail answers err with its status: 400 bad body, 404, 409 (exists or
// stale If-Match), 413 over the body's or etcd's limits, 422 invalid spec
// with its problems (capped, see invalid), 503 store unavailable, 500
// otherwise.
func fail(w http.ResponseWriter, r *http.Request, err error) {
	var inv *InvalidError
	switch {
	case errors.As(err, &inv):
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Error: "invalid spec", Problems: inv.Problems})
	case errors.Is(err, errBadObject):
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
	case errors.Is(err, ErrNotFound):
		writeJSON(w, http.StatusNotFound, errorBody{Error: err.Error()})
	case errors.Is(err, ErrExists), errors.Is(err, ErrStale):
		writeJSON(w, http.StatusConflict, errorBody{Error: err.Error()})
	case errors.Is(err, store.ErrTooLarge), errors.Is(err, errBodyTooLarge):
		writeJSON(w, http.StatusRequestEntityTooLarge, errorBody{Error: err.Error()})
	case r.Context().Err() != nil && errors.Is(err, context.Canceled):
		// The client went away (the store calls end with its request):
		// nobody to answer, and no error of ours to log.
		slog.Debug("api request: client gone", "method", r.Method, "path", r.URL.Path)
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "request cancelled"})
	case errors.Is(err, store.ErrUnavailable):
		// The store's name and the cause, never the spec: the client can
		// retry, the operator sees which etcd to look at.
		slog.Warn("api request: store unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: err.Error()})
	default:
		slog.Error("api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "internal error (see the controller's log)"})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		slog.Error("encode answer", "err", err)
		code, b = http.StatusInternalServerError, []byte(`{"error":"encode answer"}`)
	}
	writeRaw(w, code, b)
}

func writeRaw(w http.ResponseWriter, code int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
	w.Write([]byte("\n"))
}

// statusRecorder remembers the status for the request log.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// logged logs each request at debug level: method, path and status, never
// headers (the token is one).
func logged(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		slog.Debug("api", "method", r.Method, "path", r.URL.Path, "status", rec.code)
	})
}
