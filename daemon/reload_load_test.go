package daemon

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// reloadLoadEnv sets TestNoQueryLostAcrossReloads's length, e.g.
// NXDNSD_RELOAD_LOAD=30s (the figure); unset, it runs 5 s.
const reloadLoadEnv = "NXDNSD_RELOAD_LOAD"

// Reload load: 2,000 queries a second (16 UDP and 4 TCP clients, 100 a
// second each, each waiting for its answer) to local records, a forward
// zone and the pool, while the configuration is reloaded every second:
// every other reload keeps the upstream list (the local record changes),
// the others change it (an upstream added ahead, one removed). Every query
// is answered, and answered right: no query is lost or refused because of
// a reload (spec section 9). The upstreams take 5 ms to answer, so that
// queries are in flight at the swaps; the test checks they were.
func TestNoQueryLostAcrossReloads(t *testing.T) {
	if testing.Short() {
		t.Skip("a load test")
	}
	length := 5 * time.Second
	if v := os.Getenv(reloadLoadEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a duration", reloadLoadEnv, v)
		}
		length = d
	}
	const (
		udpClients, tcpClients = 16, 4
		perClient              = 100 // queries a second
	)
	slow := func() wiretest.Handler { return wiretest.Delay(5*time.Millisecond, wiretest.Answer()) }
	ups := []*wiretest.Server{wiretest.NewServer(t, slow()), wiretest.NewServer(t, slow()), wiretest.NewServer(t, slow())}
	zone := wiretest.NewServer(t, slow())
	// Two upstream lists: {u0, u1}, and {u2, u0} with u0 kept.
	lists := [2][]int{{0, 1}, {2, 0}}
	src := func(list int, nas string) string {
		var b strings.Builder
		b.WriteString("[upstream]\nattempt_timeout_ms = 1000\ntotal_timeout_ms = 2000\n")
		for _, i := range lists[list] {
			fmt.Fprintf(&b, "[[upstreams]]\nname = \"u%d\"\naddress = \"udp://%s\"\n", i, ups[i].Addr)
		}
		fmt.Fprintf(&b, "[[forward_zones]]\nzone = \"lan.\"\nresolver = %q\n", zone.Addr)
		fmt.Fprintf(&b, "[[local_records]]\nname = \"nas.home.\"\ntype = \"A\"\nvalue = %q\n", nas)
		return b.String()
	}
	nas := [2]string{"192.168.1.10", "192.168.1.20"}
	s := startDaemon(t, src(0, nas[0]))

	var sent, answered atomic.Int64
	var wrongMu sync.Mutex
	var wrong []string
	fail := func(format string, args ...any) {
		wrongMu.Lock()
		defer wrongMu.Unlock()
		if len(wrong) < 10 {
			wrong = append(wrong, fmt.Sprintf(format, args...))
		}
	}
	stop := make(chan struct{})
	var clients sync.WaitGroup
	client := func(id int, proto, addr string) {
		conn, err := dns.Dial(proto, addr)
		if err != nil {
			fail("client %d: %v", id, err)
			return
		}
		defer conn.Close()
		// Periods from 9 to 11 ms, 10 on average: the clients' phases
		// drift apart instead of sending in bursts.
		period := time.Second/perClient - time.Millisecond + time.Duration(id)*2*time.Millisecond/(udpClients+tcpClients)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			var q *dns.Msg
			var ok func(*dns.Msg) bool
			switch i % 3 {
			case 0:
				q, ok = wiretest.Query(fmt.Sprintf("q%d-%d.example.", id, i), dns.TypeA), answeredWith("192.0.2.1")
			case 1:
				q, ok = wiretest.Query(fmt.Sprintf("h%d-%d.lan.", id, i), dns.TypeA), answeredWith("192.0.2.1")
			default:
				q, ok = wiretest.Query("nas.home.", dns.TypeA), answeredWith(nas[:]...)
			}
			sent.Add(1)
			r, err := exchangeOn(conn, q, 4*time.Second)
			switch {
			case err != nil:
				fail("%s %s: %v", proto, q.Question[0].Name, err)
			case !ok(r):
				fail("%s %s: %s with %v", proto, q.Question[0].Name, dns.RcodeToString[r.Rcode], r.Answer)
			default:
				answered.Add(1)
			}
		}
	}
	for i := range udpClients + tcpClients {
		proto := "udp"
		if i >= udpClients {
			proto = "tcp"
		}
		clients.Go(func() { client(i, proto, s.addr(proto)) })
	}

	// Reload every second; count the reloads that left queries running on
	// the generation they replaced.
	reloads, changed, inFlight := 0, 0, 0
	list := 0
	tick := time.NewTicker(time.Second)
	end := time.After(length)
	for running := true; running; {
		select {
		case <-end:
			running = false
			continue
		case <-tick.C:
		}
		if reloads%2 == 1 {
			list = 1 - list
			changed++
		}
		old := s.d.front.current()
		if err := reload(s.d, src(list, nas[(reloads+1)%2])); err != nil {
			t.Errorf("reload %d: %v", reloads+1, err)
		}
		if old.atRetire > 0 {
			inFlight++
		}
		reloads++
	}
	tick.Stop()
	close(stop)
	clients.Wait()

	t.Logf("%d reloads (%d changing the upstream list, %d with queries in flight on the old generation); %d queries sent, %d answered right (%.0f a second)",
		reloads, changed, inFlight, sent.Load(), answered.Load(), float64(sent.Load())/length.Seconds())
	for _, w := range wrong {
		t.Error(w)
	}
	if answered.Load() != sent.Load() {
		t.Errorf("%d of %d queries not answered right", sent.Load()-answered.Load(), sent.Load())
	}
	if reloads < 2 || changed == 0 || reloads-changed == 0 {
		t.Errorf("%d reloads, %d of them changing the upstream list: too few to test anything", reloads, changed)
	}
	if inFlight == 0 {
		t.Error("no reload had queries in flight on the generation it replaced: the load did not overlap the swaps")
	}
	fs := scrapeDaemon(t, s.d)
	if ok, bad := metricValue(t, fs, "nxdns_config_reloads_total", "result", "success"), metricValue(t, fs, "nxdns_config_reloads_total", "result", "failure"); ok != float64(reloads) || bad != 0 {
		t.Errorf("reloads counted: success %v failure %v, want %d and 0", ok, bad, reloads)
	}
	// Each list's first upstream answers its queries (u1 is a standby).
	for _, i := range []int{lists[0][0], lists[1][0]} {
		if ups[i].UDPQueries() == 0 {
			t.Errorf("u%d saw no query: the upstream lists did not both serve", i)
		}
	}
}

// answeredWith returns a check that an answer is NOERROR with one A record
// holding one of addrs.
func answeredWith(addrs ...string) func(*dns.Msg) bool {
	return func(r *dns.Msg) bool {
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			return false
		}
		a, ok := r.Answer[0].(*dns.A)
		if !ok {
			return false
		}
		for _, want := range addrs {
			if a.A.String() == want {
				return true
			}
		}
		return false
	}
}

// exchangeOn sends q on conn and reads until the answer with q's ID comes
// or timeout passes; answers to earlier queries that timed out are
// skipped.
func exchangeOn(conn *dns.Conn, q *dns.Msg, timeout time.Duration) (*dns.Msg, error) {
	deadline := time.Now().Add(timeout)
	_ = conn.SetDeadline(deadline)
	if err := conn.WriteMsg(q); err != nil {
		return nil, err
	}
	for {
		r, err := conn.ReadMsg()
		if err != nil {
			return nil, err
		}
		if r.Id == q.Id {
			return r, nil
		}
	}
}
