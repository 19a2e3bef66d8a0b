// Package deps pins the module's direct dependencies while the packages
// that use them are being written in parallel. Delete once they all import
// their dependencies themselves.
package deps

import (
	_ "github.com/cilium/ebpf"
	_ "github.com/cilium/ebpf/link"
	_ "gopkg.in/yaml.v3"
)
