package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"gopkg.in/yaml.v3"
)

// Client talks to the API (the CLI's `apply` and `get`).
type Client struct {
	// Server is the base URL, e.g. http://127.0.0.1:7443.
	Server string
	Token  string
	HTTP   *http.Client
}

// APIError is an error answer from the server.
type APIError struct {
	Status int
	Body   errorBody
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "server answered %d: %s", e.Status, e.Body.Error)
	for _, p := range e.Body.Problems {
		b.WriteString("\n  ")
		if p.Object != "" {
			b.WriteString(p.Object + ": ")
		}
		if p.Path != "" {
			b.WriteString(p.Path + ": ")
		}
		b.WriteString(p.Message)
	}
	return b.String()
}

// Do sends one request and decodes a 2xx answer into out (when not nil).
func (c *Client) Do(ctx context.Context, method, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.Server, "/")+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read answer to %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &APIError{Status: resp.StatusCode}
		if json.Unmarshal(b, &e.Body) != nil || e.Body.Error == "" {
			e.Body.Error = strings.TrimSpace(string(b))
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decode answer to %s %s: %w", method, path, err)
	}
	return nil
}

// ErrNotSpec: a YAML file whose top level is not a mapping.
var ErrNotSpec = errors.New("not a spec document")

// DocFromYAML turns a YAML spec into the API's JSON spec document. Lab
// traffic (probes) is dropped: the controller does not run probes.
func DocFromYAML(data []byte) ([]byte, error) {
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("decode spec: %w", err)
	}
	if top == nil {
		return nil, ErrNotSpec
	}
	delete(top, "traffic")
	b, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("encode spec as JSON: %w", err)
	}
	return b, nil
}
