package apply

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// RTProto is the routing protocol number srchain gives the routes and
// policy rules it writes (rtm_protocol, FRA_PROTOCOL; `ip route` shows
// "proto 83"). It tells srchain's routes and rules from everyone else's on
// a host, so that Options.Owned can remove those the desired state does
// not name even when no record says they were written (an agent killed in
// the middle of an apply, a lost state file: issue 38 item 3). 83 is free
// in iproute2's rt_protos and in the kernel's RTPROT_* list (routing
// daemons use 8-20, 42, 99 and 186-192). Routes and rules written by
// srchain before it tagged them carry the kernel's default (boot) and are
// left alone.
const RTProto = 83

// pruneOwned removes the routes and rules tagged RTProto that the desired
// state does not hold (Options.Owned): whatever state the node was in,
// srchain's part of it is then exactly the desired state's. It runs after
// prune, so what the previous state named is already gone, and it reads
// every table: the agent asks for it only on full applies and drift
// checks, which read the node back anyway.
func (a *applier) pruneOwned() error {
	if !a.owned {
		return nil
	}
	h := a.ns.Netlink()
	want := map[routeKey]bool{}
	for _, r := range a.node.Routes {
		nr, err := RouteFor(r, a.ifindexOrZero)
		if err != nil {
			return err
		}
		want[keyOf(nr, nr.Family)] = true
	}
	for _, s := range a.node.SIDs {
		nr, err := SIDRoute(s, 0, a.ifindexOrZero)
		if err != nil {
			return err
		}
		want[keyOf(nr, nr.Family)] = true
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := h.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC, Protocol: RTProto},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			return fmt.Errorf("list routes: %w", err)
		}
		for _, r := range rs {
			k := keyOf(&r, fam)
			if want[k] {
				continue
			}
			old := restorable(r)
			what := "route " + k.dst
			if k.table != unix.RT_TABLE_MAIN {
				what += fmt.Sprintf(" table %d", k.table)
			}
			if err := a.change("delete unnamed "+what,
				func() error { return wrap(h.RouteDel(&old), "delete %s", what) },
				func() error { return h.RouteAdd(&old) }); err != nil {
				return err
			}
			if v, ok := a.views[fam]; ok {
				delete(v.best, k)
			}
		}
	}
	rules := map[string]bool{}
	for _, r := range a.node.Rules {
		nr, err := RuleFor(r)
		if err != nil {
			return err
		}
		rules[ruleSig(nr)] = true
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		have, err := a.ruleView(fam)
		if err != nil {
			return err
		}
		for sig, r := range have {
			if r.Protocol != RTProto || rules[sig] {
				continue
			}
			old := r
			if err := a.change("delete unnamed rule "+sig,
				func() error { return wrap(h.RuleDel(&old), "delete rule %s", sig) },
				func() error { return h.RuleAdd(&old) }); err != nil {
				return err
			}
			delete(have, sig)
		}
	}
	return nil
}
