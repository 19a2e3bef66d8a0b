package spec

import (
	"fmt"
	"slices"
)

// Pool is a set of interchangeable NF instances (seed 004, per-flow
// setup): a chain that names the pool in its nfs places each new flow on
// one instance, chosen when the flow's first packet reaches the chain's
// eBPF ingress (internal/flowsetup); the flow's later packets stay there.
type Pool struct {
	Name string   `yaml:"name"`
	NFs  []string `yaml:"nfs"`
	// Pick is PickLeastLoaded (fewest active flows, the default) or
	// PickHash (a hash of the flow's 5-tuple).
	Pick string `yaml:"pick"`
}

// Pool pick methods (state.PickLeastLoaded, state.PickHash).
const (
	PickLeastLoaded = "least-loaded"
	PickHash        = "hash"
)

// MaxPoolNFs is ING_MAX_VARIANTS (bpf/lib/ingress.h): instances of a pool.
const MaxPoolNFs = 8

// Pool returns the pool named name, or nil.
func (s *Spec) Pool(name string) *Pool {
	for i := range s.Pools {
		if s.Pools[i].Name == name {
			return &s.Pools[i]
		}
	}
	return nil
}

// resolvePools puts, in each chain that names a pool in its nfs (and no
// NF of that name), the pool's first instance in its place and records
// the pool on the chain: everything that walks a chain's NFs sees a
// concrete chain (the first variant), and the pool is there for the
// ingress. Only the first pool of a chain is resolved; validate reports
// any other.
func (s *Spec) resolvePools() {
	for i := range s.Chains {
		c := &s.Chains[i]
		c.PoolAt = -1
		for k, name := range c.NFs {
			p := s.Pool(name)
			if p == nil || s.NF(name) != nil || len(p.NFs) == 0 {
				continue
			}
			c.Pool, c.PoolAt = name, k
			c.NFs[k] = p.NFs[0]
			break
		}
	}
	for i := range s.Pools {
		if s.Pools[i].Pick == "" {
			s.Pools[i].Pick = PickLeastLoaded
		}
	}
}

// Variant is chain c with instance v of its pool in the pool's place.
func (s *Spec) Variant(c *Chain, v int) Chain {
	out := *c
	p := s.Pool(c.Pool)
	if p == nil || c.PoolAt < 0 || c.PoolAt >= len(c.NFs) || v >= len(p.NFs) {
		return out
	}
	out.NFs = slices.Clone(c.NFs)
	out.NFs[c.PoolAt] = p.NFs[v]
	return out
}

// pools checks the pools and the chains that use them.
func (v *validator) pools() {
	s := v.s
	names := make([]string, len(s.Pools))
	for i, p := range s.Pools {
		path := fmt.Sprintf("pools[%d]", i)
		names[i] = p.Name
		if v.name(path+".name", "pool", p.Name, MaxName) && s.NF(p.Name) != nil {
			v.add(path+".name", "pool name %q is also an NF's name", p.Name)
		}
		if len(p.NFs) < 2 || len(p.NFs) > MaxPoolNFs {
			v.add(path+".nfs", "a pool needs 2..%d NFs, got %d", MaxPoolNFs, len(p.NFs))
		}
		kind := ""
		for k, name := range p.NFs {
			nf := s.NF(name)
			switch {
			case nf == nil:
				v.add(fmt.Sprintf("%s.nfs[%d]", path, k), "unknown NF %q", name)
			case slices.Index(p.NFs, name) != k:
				v.add(fmt.Sprintf("%s.nfs[%d]", path, k), "NF %q is in the pool twice", name)
			case kind != "" && nf.Kind != kind:
				v.add(fmt.Sprintf("%s.nfs[%d]", path, k), "NF %q is of kind %s, the pool's first of kind %s: a pool's instances are interchangeable", name, nf.Kind, kind)
			case nf.Kind != DefaultKind && nf.Kind != "firewall":
				v.add(fmt.Sprintf("%s.nfs[%d]", path, k), "NF %q is of kind %s; pools hold forward and firewall NFs", name, nf.Kind)
			}
			if nf != nil && kind == "" {
				kind = nf.Kind
			}
		}
		if p.Pick != PickLeastLoaded && p.Pick != PickHash {
			v.add(path+".pick", "pick must be %q or %q, got %q", PickLeastLoaded, PickHash, p.Pick)
		}
	}
	v.unique("pool", names, func(i int) string { return fmt.Sprintf("pools[%d].name", i) })
	for i := range s.Chains {
		c := &s.Chains[i]
		if c.Pool == "" {
			continue
		}
		p := fmt.Sprintf("chains[%d]", i)
		for k, name := range c.NFs {
			if k != c.PoolAt && s.Pool(name) != nil && s.NF(name) == nil {
				v.add(fmt.Sprintf("%s.nfs[%d]", p, k), "pool %q: a chain may name one pool (it already names %q)", name, c.Pool)
			}
		}
		in := s.Node(c.Ingress)
		switch {
		case in != nil && in.Ingress != IngressEBPF:
			v.add(p+".ingress", "chain names pool %q: per-flow setup needs the eBPF ingress on %q (ingress: ebpf)", c.Pool, c.Ingress)
		case c.Mode != ModeEncap:
			v.add(p+".mode", "chain names pool %q: pools need encap mode", c.Pool)
		case c.OPoT || c.Compression != "" || c.Splits():
			v.add(p+".nfs", "chain names pool %q: no opot, compression or pathlets with a pool", c.Pool)
		}
	}
}

// poolVariants runs the per-chain path checks on every other instance of
// the chain's pool (the first is the chain itself).
func (v *validator) poolVariants(p string, c *Chain) {
	pool := v.s.Pool(c.Pool)
	if pool == nil {
		return
	}
	for k := 1; k < len(pool.NFs); k++ {
		if v.s.NF(pool.NFs[k]) == nil {
			return
		}
		alt := v.s.Variant(c, k)
		v.path(p, &alt)
		v.segments(p, &alt)
	}
}
