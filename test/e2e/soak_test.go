package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/controller"
)

// soakDuration is how long TestSoak injects faults: 45 s in CI (the whole
// test stays under 90 s), SRCHAIN_SOAK=10m (any Go duration) for the long
// form (docs/controller.md, "Soak"; run it with a -timeout above it).
func soakDuration(t *testing.T) time.Duration {
	v := os.Getenv("SRCHAIN_SOAK")
	if v == "" {
		return 45 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("SRCHAIN_SOAK=%q: want a duration such as 10m", v)
	}
	return d
}

// soakStats are the figures a soak reports.
type soakStats struct {
	writes, acked, unanswered, refused  atomic.Int64 // valid writes and what became of them
	malformed, rejected, accepted       atomic.Int64 // malformed writes: 4xx answers, anything else
	unauth                              atomic.Int64 // requests without the token answered 401
	idle, halfClosed, midResponse       atomic.Int64 // abusive connections opened
	serveKills, serveStops, agentKills  atomic.Int64 // faults
	notAnswered4xx, serve5xxOnMalformed atomic.Int64
}

// chainModel is what the store may hold for one chain after the writes
// made to it: the answered writes fix it, an unanswered one (the
// controller killed or stopped meanwhile) may or may not have landed.
type chainModel struct {
	mu       sync.Mutex
	possible map[string]map[int]bool // chain -> dports it may have (0: absent)
}

func (m *chainModel) set(name string, v int, certain bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if certain || m.possible[name] == nil {
		m.possible[name] = map[int]bool{}
		if !certain {
			m.possible[name][0] = true // it had no value before
		}
	}
	m.possible[name][v] = true
}

// soakChain is a valid chain of the benchmark's shape on port dport.
func soakChain(dport int) []byte {
	return fmt.Appendf(nil, `{"ingress":"r1","egress":"r3","match":{"dst":["fc00:a4::/64"],"proto":"udp","dport":"%d"},"nfs":["fw"]}`, dport)
}

// malformedBodies are writes the API must refuse with a 4xx: syntax
// errors, wrong types, invalid values, unknown references, a deep nest,
// null, trailing data after the value, duplicate keys (issue 38 item 5).
var malformedBodies = []string{
	`{`, `[]`, `"chain"`, `123`, `{"ingress":5}`, `{"ingress":"r1"}`,
	`{"ingress":"nosuch","egress":"r3","match":{"dst":["fc00:a4::/64"]},"nfs":["fw"]}`,
	`{"ingress":"r1","egress":"r3","match":{"dst":["fc00:a4::/64"],"proto":"udp","dport":"99999"},"nfs":["fw"]}`,
	`{"ingress":"r1","egress":"r3","match":{"dst":["not-a-prefix"]},"nfs":["fw"]}`,
	`{"ingress":"r1","egress":"r3","match":{"dst":["fc00:a4::/64"]},"nfs":["nosuch"]}`,
	`{"ingress":"r1","egress":"r3","match":{"dst":["fc00:a4::/64"]},"nfs":["fw"],"unknown":1}`,
	"\xff\xfe\x00garbage",
	strings.Repeat("[", 20000) + strings.Repeat("]", 20000),
	`{"name":"` + strings.Repeat("\u00e9", 3000) + `","ingress":"r1"}`,
	`null`, `{} x`, `{}{}`, `{},{}`,
	`{"ingress":"r1","egress":"r3","match":{"dst":["fc00:a4::/64"]},"nfs":["fw"]}` + "\n\n{",
	`{"ingress":"r1","ingress":"r2","egress":"r3","match":{"dst":["fc00:a4::/64"]},"nfs":["fw"]}`,
}

// TestSoak: a controller and its agents (`lab up --agents`) under a
// stream of valid and malformed writes, idle, half-closed and
// mid-response-closed connections, and faults: the controller with its
// embedded etcd killed (SIGKILL) and restarted, stopped (SIGSTOP) and
// continued, agents killed and restarted. At the end every process is
// alive, every acknowledged write is in the store, and every node holds
// its desired state and nothing more (issue 38, "soak and abuse test").
func TestSoak(t *testing.T) {
	dur := soakDuration(t)
	l := upAgentLab(t, "z")
	seed := uint64(time.Now().UnixNano())
	t.Logf("soak for %v, seed %d", dur, seed)
	// A bigger spec: GET /v1/spec answers ~150 KB, so a client can
	// close in the middle of the answer.
	l.must("PATCH", "/v1/spec", benchChains(1000), nil)
	l.inSync("r1", time.Time{}, 2*time.Minute)

	var st soakStats
	model := &chainModel{possible: map[string]map[int]bool{}}
	soakCl := &controller.Client{Server: l.cl.Server, Token: l.cl.Token, HTTP: &http.Client{Timeout: 5 * time.Second}}
	noToken := &controller.Client{Server: l.cl.Server, Token: "wrong", HTTP: &http.Client{Timeout: 5 * time.Second}}
	addr := strings.TrimPrefix(l.cl.Server, "http://")

	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var wg sync.WaitGroup
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	// procMu guards the processes' PIDs: the fault goroutine replaces
	// them, the end of the test reads them.
	var procMu sync.Mutex
	stopped := false // serve is SIGSTOPped
	defer func() {
		procMu.Lock()
		if stopped {
			syscall.Kill(l.serve.pid, syscall.SIGCONT)
		}
		procMu.Unlock()
	}()

	// Writers: valid writes to chains s0..s49, and malformed ones.
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for ctx.Err() == nil {
				i := rng.IntN(50)
				name := fmt.Sprintf("s%d", i)
				switch op := rng.IntN(10); {
				case op < 5: // upsert
					dport := 20000 + 100*i + rng.IntN(100)
					if w == 1 {
						dport = 30000 + 100*i + rng.IntN(100)
						name = fmt.Sprintf("t%d", i)
					}
					st.writes.Add(1)
					soakWrite(&st, model, name, dport, soakCl.Do(ctx, "PUT", "/v1/chains/"+name, soakChain(dport), nil))
				case op < 6: // delete
					if w == 1 {
						name = fmt.Sprintf("t%d", i)
					}
					st.writes.Add(1)
					err := soakCl.Do(ctx, "DELETE", "/v1/chains/"+name, nil, nil)
					var ae *controller.APIError
					if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
						err = nil // absent either way
					}
					soakWrite(&st, model, name, 0, err)
				case op < 9:
					body := malformedBodies[rng.IntN(len(malformedBodies))]
					path := "/v1/chains/bad" + name
					method := "PUT"
					if rng.IntN(2) == 0 {
						method, path = "POST", "/v1/chains"
					}
					st.malformed.Add(1)
					err := soakCl.Do(ctx, method, path, []byte(body), nil)
					var ae *controller.APIError
					switch {
					case errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500:
						st.rejected.Add(1)
					case errors.As(err, &ae) && ae.Status >= 500:
						st.serve5xxOnMalformed.Add(1)
					case err == nil:
						st.accepted.Add(1)
						t.Errorf("malformed %s %s %.80q accepted", method, path, body)
					default:
						st.notAnswered4xx.Add(1) // the controller was down
						time.Sleep(100 * time.Millisecond)
					}
				default:
					var ae *controller.APIError
					if err := noToken.Do(ctx, "PUT", "/v1/chains/"+name, soakChain(1), nil); errors.As(err, &ae) {
						if ae.Status != http.StatusUnauthorized {
							t.Errorf("write without the token: %d, want 401", ae.Status)
						}
						st.unauth.Add(1)
					} else if err == nil {
						t.Errorf("write without the token accepted")
					}
				}
			}
		}()
	}

	// Abusive connections.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, 7))
		for ctx.Err() == nil {
			time.Sleep(time.Duration(50+rng.IntN(150)) * time.Millisecond)
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				continue // the controller is down
			}
			switch rng.IntN(3) {
			case 0: // idle, held open
				if len(idle) < 40 {
					idle = append(idle, c)
					st.idle.Add(1)
					continue
				}
				c.Close()
			case 1: // half a request, then our side closed for writing
				fmt.Fprintf(c, "GET /v1/spec HTTP/1.1\r\nHost: x\r\nAuthoriz")
				c.(*net.TCPConn).CloseWrite()
				c.SetReadDeadline(time.Now().Add(time.Second))
				io.Copy(io.Discard, c)
				c.Close()
				st.halfClosed.Add(1)
			case 2: // a full request, the answer dropped after 100 bytes
				fmt.Fprintf(c, "GET /v1/spec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", l.cl.Token)
				c.SetReadDeadline(time.Now().Add(2 * time.Second))
				io.ReadFull(c, make([]byte, 100))
				c.(*net.TCPConn).SetLinger(0) // RST, as a client that died
				c.Close()
				st.midResponse.Add(1)
			}
		}
	}()

	// Faults, one every few seconds: the first three of each kind in
	// turn, then at random.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, 9))
		every := min(12*time.Second, dur/4)
		nodes := make([]string, 0, len(l.agents))
		for n := range l.agents {
			nodes = append(nodes, n)
		}
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(every):
			}
			kind := i % 3
			if i >= 3 {
				kind = rng.IntN(3)
			}
			switch kind {
			case 0: // controller and etcd killed, back 1-3 s later
				procMu.Lock()
				l.kill(l.serve)
				procMu.Unlock()
				st.serveKills.Add(1)
				time.Sleep(time.Duration(1000+rng.IntN(2000)) * time.Millisecond)
				procMu.Lock()
				l.restart(l.serve)
				procMu.Unlock()
			case 1: // an agent killed (maybe mid-apply), restarted
				n := nodes[rng.IntN(len(nodes))]
				procMu.Lock()
				l.kill(l.agents[n])
				l.restart(l.agents[n])
				procMu.Unlock()
				st.agentKills.Add(1)
			case 2: // controller and etcd stopped for 2-4 s
				procMu.Lock()
				syscall.Kill(l.serve.pid, syscall.SIGSTOP)
				stopped = true
				procMu.Unlock()
				st.serveStops.Add(1)
				time.Sleep(time.Duration(2000+rng.IntN(2000)) * time.Millisecond)
				procMu.Lock()
				syscall.Kill(l.serve.pid, syscall.SIGCONT)
				stopped = false
				procMu.Unlock()
			}
		}
	}()
	wg.Wait()
	start := time.Now()

	// The end: every process alive, every acknowledged write stored,
	// every node as desired.
	l.until("the controller to answer", time.Minute, func() bool { return l.do("GET", "/v1/spec", nil, nil) == nil })
	if !running(l.serve.pid) {
		t.Errorf("serve (pid %d) is not running", l.serve.pid)
	}
	for n, p := range l.agents {
		if !running(p.pid) {
			t.Errorf("agent %s (pid %d) is not running", n, p.pid)
		}
	}
	var spec struct {
		Chains []struct {
			Name  string `json:"name"`
			Match struct {
				DPort string `json:"dport"`
			} `json:"match"`
		} `json:"chains"`
	}
	l.must("GET", "/v1/spec", nil, &spec)
	stored := map[string]int{}
	for _, c := range spec.Chains {
		var v int
		fmt.Sscan(c.Match.DPort, &v)
		stored[c.Name] = v
	}
	for name, possible := range model.possible {
		if !possible[stored[name]] {
			t.Errorf("chain %s: stored dport %d (0: absent), acknowledged writes allow %v", name, stored[name], possible)
		}
	}
	for n := range l.agents {
		l.inSync(n, time.Time{}, 2*time.Minute)
		l.asDesired(n)
	}
	t.Logf("soak %v: valid writes %d (acknowledged %d, unanswered %d, refused %d); malformed %d (4xx %d, 5xx %d, unanswered %d, accepted %d); "+
		"401 %d; connections idle %d, half-closed %d, closed mid-response %d; faults: serve killed %d, serve stopped %d, agents killed %d; "+
		"all in sync %v after the end",
		dur, st.writes.Load(), st.acked.Load(), st.unanswered.Load(), st.refused.Load(), st.malformed.Load(), st.rejected.Load(),
		st.serve5xxOnMalformed.Load(), st.notAnswered4xx.Load(), st.accepted.Load(), st.unauth.Load(), st.idle.Load(), st.halfClosed.Load(),
		st.midResponse.Load(), st.serveKills.Load(), st.serveStops.Load(), st.agentKills.Load(), time.Since(start).Round(time.Millisecond))
	if st.acked.Load() == 0 || st.serveKills.Load() == 0 || st.agentKills.Load() == 0 || st.serveStops.Load() == 0 {
		t.Errorf("the soak did not exercise everything: %d writes acknowledged, %d serve kills, %d agent kills, %d serve stops",
			st.acked.Load(), st.serveKills.Load(), st.agentKills.Load(), st.serveStops.Load())
	}
}

// soakWrite records the outcome of a valid write of v (0: delete) to name.
func soakWrite(st *soakStats, m *chainModel, name string, v int, err error) {
	var ae *controller.APIError
	switch {
	case err == nil:
		st.acked.Add(1)
		m.set(name, v, true)
	case errors.As(err, &ae) && ae.Status < 500:
		st.refused.Add(1) // not applied
	default:
		// Unanswered, or a 5xx: it may have landed.
		st.unanswered.Add(1)
		m.set(name, v, false)
		time.Sleep(100 * time.Millisecond) // the controller is down: no busy loop
	}
}
