// Package bgp runs the BGP speaker of a router in a `routing: bgp` spec
// (issue 12): FRR's zebra and bgpd in the node's namespace, one eBGP
// session per link to another router, advertising the router's locators
// and installing the ones its peers advertise (docs/spec.md "Routing").
//
// Why FRR and not GoBGP as a library: zebra installs and withdraws the
// learned routes in the kernel itself (GoBGP keeps a RIB only; srchain
// would have to write the RIB-to-FIB sync, next-hop resolution included),
// a stopped speaker's peers withdraw its routes at once (NOTIFICATION) or
// after the hold time, and FRR is what operators already run on Linux
// routers. The daemons run detached under kind.DaemonDir, so an agent or
// `srchain lab` can exit and start again without touching the sessions.
package bgp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// FRRDir is where Debian's frr package puts the daemons.
const FRRDir = "/usr/lib/frr"

// Errors callers branch on.
var (
	// ErrNoFRR: FRR is not installed.
	ErrNoFRR = errors.New("frr is not installed (apt install frr)")
	// ErrBadConfig: the program's configuration is not a usable BGPConfig.
	ErrBadConfig = errors.New("bad bgp config")
)

func init() { kind.RegisterDriver(state.ProgramBGP, Driver{}) }

// Driver applies ProgramBGP programs.
type Driver struct{}

// daemon is one FRR daemon of a node.
type daemon struct{ name, conf string }

func daemons(c state.BGPConfig, host string) []daemon {
	return []daemon{{"zebra", ZebraConf(host)}, {"bgpd", BGPDConf(c, host)}}
}

// ZebraConf is zebra's configuration: nothing but the name; zebra
// installs what bgpd learns in the main table (proto bgp, metric 20).
func ZebraConf(host string) string {
	return "hostname " + host + "\nlog timestamp precision 3\n"
}

// BGPDConf renders bgpd's configuration for c. The choices:
//   - `no bgp ebgp-requires-policy`: FRR 8 sends and accepts nothing on
//     eBGP without a route map (RFC 8212); srchain's sessions are between
//     its own routers, which advertise only their locators;
//   - `no bgp network import-check`: a locator is not a route on its own
//     router (its SIDs are), and must be advertised anyway;
//   - timers 1 s keepalive / 3 s hold, connect retry 1 s: a router whose
//     speaker dies without a NOTIFICATION loses its locator within 3 s
//     (a stopped one sends a NOTIFICATION and loses it at once);
//   - IPv6 unicast only: link subnets and IPv4 stay static.
func BGPDConf(c state.BGPConfig, host string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "hostname %s\nlog timestamp precision 3\n!\n", host)
	fmt.Fprintf(&b, "router bgp %d\n", c.ASN)
	fmt.Fprintf(&b, " bgp router-id %s\n", c.RouterID)
	b.WriteString(" no bgp ebgp-requires-policy\n no bgp network import-check\n no bgp default ipv4-unicast\n timers bgp 1 3\n")
	for _, n := range c.Neighbors {
		fmt.Fprintf(&b, " neighbor %s remote-as %d\n neighbor %s timers connect 1\n neighbor %s description %s\n", n.Addr, n.ASN, n.Addr, n.Addr, n.Interface)
	}
	b.WriteString(" !\n address-family ipv6 unicast\n")
	for _, p := range c.Networks {
		fmt.Fprintf(&b, "  network %s\n", p)
	}
	for _, n := range c.Neighbors {
		fmt.Fprintf(&b, "  neighbor %s activate\n", n.Addr)
	}
	b.WriteString(" exit-address-family\n!\n")
	return b.String()
}

func config(p state.Program) (state.BGPConfig, error) {
	var c state.BGPConfig
	if err := json.Unmarshal(p.Config, &c); err != nil {
		return c, fmt.Errorf("decode bgp config: %w", err)
	}
	if c.ASN == 0 || !c.RouterID.Is4() {
		return c, fmt.Errorf("decode bgp config: asn %d router id %s: %w", c.ASN, c.RouterID, ErrBadConfig)
	}
	return c, nil
}

func paths(dir, name string) (conf, pid, log string) {
	return filepath.Join(dir, name+".conf"), filepath.Join(dir, name+".pid"), filepath.Join(dir, name+".log")
}

// Apply writes the configuration and starts zebra and bgpd where they do
// not run; a changed configuration restarts bgpd (its sessions reset, the
// learned routes come back within seconds).
func (Driver) Apply(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	c, err := config(p)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"zebra", "bgpd"} {
		if _, err := os.Stat(filepath.Join(FRRDir, d)); err != nil {
			return nil, fmt.Errorf("start %s: %w", d, ErrNoFRR)
		}
	}
	dir := kind.DaemonDir(ns.Name)
	if err := makeDir(dir); err != nil {
		return nil, err
	}
	var started []string
	undo := func() error {
		var errs []error
		for i := len(started) - 1; i >= 0; i-- {
			_, pid, _ := paths(dir, started[i])
			errs = append(errs, kind.StopDaemon(pid, dir))
		}
		return errors.Join(errs...)
	}
	for _, d := range daemons(c, node.Name) {
		conf, pid, _ := paths(dir, d.name)
		old, _ := os.ReadFile(conf)
		changed := !bytes.Equal(old, []byte(d.conf))
		if changed {
			if err := writeFile(conf, d.conf); err != nil {
				return nil, errors.Join(err, undo())
			}
		}
		if kind.DaemonPID(pid, dir) != 0 {
			if !changed {
				continue
			}
			if err := kind.StopDaemon(pid, dir); err != nil {
				return nil, errors.Join(err, undo())
			}
		}
		if err := start(ctx, ns, dir, d.name); err != nil {
			return nil, errors.Join(err, undo())
		}
		started = append(started, d.name)
	}
	return undo, nil
}

// start runs one FRR daemon detached (-d) in ns, with every path inside
// dir, and waits for its pid file (and, for zebra, the socket bgpd
// connects to).
func start(ctx context.Context, ns *netns.NS, dir, name string) error {
	conf, pid, log := paths(dir, name)
	_ = os.Remove(pid)
	args := []string{"-d", "-f", conf, "-i", pid, "-z", filepath.Join(dir, "zserv.api"),
		"--vty_socket", dir, "-P", "0", "--log", "file:" + log}
	if name == "bgpd" {
		args = append(args, "-p", "179")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(FRRDir, name), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Started from a thread inside ns, so the daemon lives there (also for
	// an agent in the host namespace, which ip netns exec cannot name).
	if err := ns.Do(cmd.Run); err != nil {
		return fmt.Errorf("start %s in %s: %s: %w", name, ns.Name, strings.TrimSpace(out.String()), err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for kind.DaemonPID(pid, dir) == 0 || (name == "zebra" && !exists(filepath.Join(dir, "zserv.api"))) {
		if time.Now().After(deadline) {
			tail, _ := os.ReadFile(log)
			return fmt.Errorf("start %s in %s: not running after 10 s: %s", name, ns.Name, lastLines(string(tail), 3))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// Check reports daemons that do not run or run another configuration.
func (Driver) Check(_ context.Context, ns *netns.NS, node state.Node, p state.Program) ([]string, error) {
	c, err := config(p)
	if err != nil {
		return nil, err
	}
	dir := kind.DaemonDir(ns.Name)
	var drift []string
	for _, d := range daemons(c, node.Name) {
		conf, pid, _ := paths(dir, d.name)
		if kind.DaemonPID(pid, dir) == 0 {
			drift = append(drift, "bgp: "+d.name+" not running")
			continue
		}
		if old, _ := os.ReadFile(conf); !bytes.Equal(old, []byte(d.conf)) {
			drift = append(drift, "bgp: "+d.name+" runs another configuration")
		}
	}
	missing, err := Missing(ns, c)
	if err != nil {
		return drift, err
	}
	for _, p := range missing {
		drift = append(drift, "bgp: no route to "+p.String())
	}
	return drift, nil
}

// Missing lists the prefixes of c.Expect with no route in ns's main table.
func Missing(ns *netns.NS, c state.BGPConfig) ([]netip.Prefix, error) {
	rs, err := ns.Netlink().RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	have := map[netip.Prefix]bool{}
	for _, r := range rs {
		if r.Dst == nil {
			continue
		}
		a, ok := netip.AddrFromSlice(r.Dst.IP)
		ones, _ := r.Dst.Mask.Size()
		if ok {
			have[netip.PrefixFrom(a.Unmap(), ones)] = true
		}
	}
	var out []netip.Prefix
	for _, p := range c.Expect {
		if !have[p] {
			out = append(out, p)
		}
	}
	return out, nil
}

// Converged waits until every BGP program of the given nodes finds the
// locators it expects (Missing), or ctx ends; then it says which are still
// missing. `lab up` calls it after applying every node: the sessions come
// up as the later nodes start, within seconds.
func Converged(ctx context.Context, nss map[string]*netns.NS, nodes []state.Node) error {
	for {
		var left []string
		for _, n := range nodes {
			for _, p := range n.Programs {
				if p.Kind != state.ProgramBGP {
					continue
				}
				c, err := config(p)
				if err != nil {
					return err
				}
				ns := nss[n.Name]
				if ns == nil {
					continue
				}
				m, err := Missing(ns, c)
				if err != nil {
					return err
				}
				for _, pfx := range m {
					left = append(left, n.Name+": "+pfx.String())
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for bgp: no route yet at %s: %w", strings.Join(left, ", "), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Remove stops bgpd and zebra (zebra removes the routes it installed).
func (Driver) Remove(_ context.Context, ns *netns.NS, _ state.Node, _ state.Program) error {
	return kind.StopDaemons(ns.Name)
}

// Counters: the routes BGP installed in the main table (proto bgp).
func (Driver) Counters(_ context.Context, ns *netns.NS, _ state.Node, _ state.Program) ([]kind.Counter, error) {
	rs, err := ns.Netlink().RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Protocol: unix.RTPROT_BGP}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return nil, fmt.Errorf("list bgp routes: %w", err)
	}
	return []kind.Counter{{Name: "bgp/routes", Value: uint64(len(rs))}}, nil
}

// makeDir creates dir for the daemons, which drop root for the frr user
// (they must be able to write their pid files, logs and sockets there).
func makeDir(dir string) error {
	// The parents must let the frr user through; dir is its own.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(dir), err)
	}
	if err := os.Mkdir(dir, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	u, err := user.Lookup("frr")
	if err != nil {
		return fmt.Errorf("find the frr user: %w: %w", ErrNoFRR, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return fmt.Errorf("chown %s: %w", dir, err)
	}
	return nil
}

func writeFile(path, s string) error {
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
