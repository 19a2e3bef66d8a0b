package state

import "net/netip"

// ProgramBGP is the node-wide program of a router in a `routing: bgp`
// spec: FRR's zebra and bgpd in the node's namespace, which advertise the
// router's locators and install the ones learned from its peers
// (internal/bgp).
const ProgramBGP = "bgp"

// BGPConfig is the typed configuration of a ProgramBGP program.
type BGPConfig struct {
	// ASN is the router's private 4-byte AS number (RFC 6996).
	ASN uint32 `json:"asn"`
	// RouterID is the BGP identifier (an IPv4-formatted number).
	RouterID netip.Addr `json:"router_id"`
	// Neighbors are the eBGP sessions, one per link to another router.
	Neighbors []BGPNeighbor `json:"neighbors,omitempty"`
	// Networks are the prefixes the router advertises: its locators.
	Networks []netip.Prefix `json:"networks,omitempty"`
	// Expect are the other routers' locators this router learns once
	// BGP has converged (routers it reaches over BGP sessions): the
	// driver's Check reports each one missing from the routing table, and
	// `lab up` waits for none to be missing.
	Expect []netip.Prefix `json:"expect,omitempty"`
}

// BGPNeighbor is one eBGP peer, reached over a link's IPv6 addresses.
type BGPNeighbor struct {
	Addr netip.Addr `json:"addr"`
	ASN  uint32     `json:"asn"`
	// Interface is the local end of the link (for the operator).
	Interface string `json:"interface"`
}
