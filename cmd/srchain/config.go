package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// DefaultConfigDir holds the config files of the long-running commands,
// as /etc/frr does for FRR's daemons. The .deb ships them as conffiles
// with every key commented out (packaging/etc/).
const DefaultConfigDir = "/etc/srchain"

// defaultConfigFiles names the file under the config directory that a
// command reads when --config is not given (and the file exists).
var defaultConfigFiles = map[string]string{
	"srchain agent": "agent.yaml",
	"srchain serve": "serve.yaml",
}

// errConfigKey marks a key of a config file that is no flag of the command.
var errConfigKey = errors.New("unknown key")

// notInConfig are flags a config file must not set: they choose the file
// itself, print something instead of running, or pick a one-off action
// (agent --uninstall must never come from a unit's config file).
var notInConfig = map[string]bool{"config": true, "help": true, "version": true, "uninstall": true}

// loadConfig applies the config file of cmd: --config when given (it must
// exist), else the command's default file under e.configDir when there is
// one. An empty configDir (tests) reads no default file.
func (e *env) loadConfig(cmd *cobra.Command) error {
	path := e.configFile
	if path == "" {
		name, ok := defaultConfigFiles[cmd.CommandPath()]
		if !ok || e.configDir == "" {
			return nil
		}
		path = filepath.Join(e.configDir, name)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	return applyConfig(cmd.Flags(), path, data)
}

// applyConfig sets the flags of fs from a YAML mapping whose keys are the
// flags' long names (`node: r1`, `etcd-endpoints: [URL, URL]`,
// `lease-ttl: 15s`): one function for every command, so a config key
// means exactly what the flag means, default and parsing included. A flag
// given on the command line wins (it is already Changed when this runs,
// cobra having parsed the arguments). Unknown keys, duplicate keys and
// values that are not scalars (or lists for list flags) are errors naming
// the key, the file and the line: a misspelt key must not be ignored.
func applyConfig(fset *pflag.FlagSet, path string, data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("parse config %s: %w", path, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil // empty, or only comments: the shipped defaults
	}
	m := doc.Content[0]
	if m.Kind == yaml.ScalarNode && m.Tag == "!!null" {
		return nil
	}
	if m.Kind != yaml.MappingNode {
		return fmt.Errorf("config %s line %d: want a mapping of flag names to values", path, m.Line)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		name := k.Value
		if seen[name] {
			return fmt.Errorf("config %s line %d: key %q given twice", path, k.Line, name)
		}
		seen[name] = true
		f := fset.Lookup(name)
		if f == nil || notInConfig[name] {
			return fmt.Errorf("config %s line %d: %w %q (keys are the command's long flag names)", path, k.Line, errConfigKey, name)
		}
		if f.Changed {
			continue
		}
		vals, err := configValues(v)
		if err != nil {
			return fmt.Errorf("config %s line %d: key %q: %w", path, v.Line, name, err)
		}
		// A list flag given a YAML list takes its items as they are
		// (commas included); given one value it parses it as on the
		// command line (comma-separated).
		if sv, ok := f.Value.(pflag.SliceValue); ok && v.Kind == yaml.SequenceNode {
			if err := sv.Replace(vals); err != nil {
				return fmt.Errorf("config %s line %d: key %q: %w", path, v.Line, name, err)
			}
			f.Changed = true
			continue
		}
		if len(vals) != 1 {
			return fmt.Errorf("config %s line %d: key %q takes one value, not a list", path, v.Line, name)
		}
		if err := fset.Set(name, vals[0]); err != nil {
			return fmt.Errorf("config %s line %d: key %q: %w", path, v.Line, name, err)
		}
	}
	return nil
}

// configValues turns a YAML value into the strings a flag would get on
// the command line: a scalar is one, a list of scalars several.
func configValues(v *yaml.Node) ([]string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return nil, errors.New("no value (quote an empty string: \"\")")
		}
		return []string{v.Value}, nil
	case yaml.SequenceNode:
		vals := make([]string, 0, len(v.Content))
		for _, it := range v.Content {
			if it.Kind != yaml.ScalarNode || it.Tag == "!!null" {
				return nil, errors.New("want a list of plain values")
			}
			vals = append(vals, it.Value)
		}
		return vals, nil
	}
	return nil, errors.New("want a value or a list of values, not a mapping")
}
