package compile

import "github.com/srchain/srchain/internal/spec"

// Fixed header sizes the MSS leaves out (RFC 9293 3.7.1, RFC 6691: the
// MSS counts the TCP payload only, options are the sender's to subtract).
const (
	ipv4Header = 20
	ipv6Header = 40
	tcpHeader  = 20
)

// MSSFor is the largest MSS whose segments fit chain ch's path with its
// SR overhead: the smallest MTU of the links from the ingress through
// every NF to the egress (and on to the destination in insert mode,
// where the SRH stays in the packet), less ch.Overhead(), the inner IP
// header and the TCP header. ok is false for a chain no TCP takes.
func MSSFor(s *spec.Spec, ch *spec.Chain) (int, bool, error) {
	if ch.Match.Proto != "" && ch.Match.Proto != spec.ProtoTCP {
		return 0, false, nil
	}
	hops, err := s.ChainPath(ch)
	if err != nil {
		return 0, false, err
	}
	mtu := spec.MaxMTU
	for _, h := range hops {
		mtu = min(mtu, s.Links[h.Link].MTU)
	}
	if ch.Mode == spec.ModeInsert {
		for _, l := range s.Links {
			mtu = min(mtu, l.MTU) // the rest of the way is the network's: take its smallest link
		}
	}
	inner := ipv6Header
	if ch.Family() == 4 {
		inner = ipv4Header
	}
	return mtu - ch.Overhead() - inner - tcpHeader, true, nil
}
