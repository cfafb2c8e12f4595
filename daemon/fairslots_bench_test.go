package daemon

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// Issue 25, item 2, as a measurement: client A (127.0.0.2) sends 200
// queries a second for names whose upstream answer takes 900 ms, client B
// (127.0.0.3) one query every 20 ms, one at a time, for names answered at
// once, through one udp:// upstream of 64 slots (the cache off, timeouts at
// their defaults). B is measured alone, then after a quiet 3 s A floods
// alone for 2 s (its queries fill the slots and queue), then B is
// measured again for 10 s while A floods on. It reports B's latency alone
// and while A floods, how much of A is answered and how the rest ends,
// and the pool's counters.
//
// About 30 s a run; run it alone:
//
//	go test -run '^$' -bench TwoClients -benchtime 1x ./daemon/
func BenchmarkTwoClients(b *testing.B) {
	const (
		slots    = 64
		slow     = 900 * time.Millisecond
		aRate    = 200
		bEvery   = 20 * time.Millisecond
		unloaded = 5 * time.Second
		quiet    = 3 * time.Second // B silent for two of the pool's epochs: A then starts alone
		warmup   = 2 * time.Second // A alone, filling the pool and queueing, before B asks again
		loaded   = 10 * time.Second
	)
	for range b.N {
		up := wiretest.NewServer(b, func(w *wiretest.Writer, q *dns.Msg) {
			if strings.HasSuffix(q.Question[0].Name, ".slow.test.") {
				wiretest.Delay(slow, wiretest.Answer())(w, q)
				return
			}
			wiretest.Answer()(w, q)
		})
		s := startObserved(b, fmt.Sprintf("[cache]\nenabled = false\n[[upstreams]]\nname = \"up\"\naddress = \"udp://%s\"\nslots = %d\n", up.Addr, slots), false, options{})

		idle := measureB(b, s.udp, unloaded, bEvery)
		time.Sleep(quiet) // a measurement's pacing, not synchronisation

		stop := make(chan struct{})
		var flood floodResult
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			flood = floodA(b, s.udp, aRate, stop)
		}()
		time.Sleep(warmup) // a measurement's pacing, not synchronisation
		busy := measureB(b, s.udp, loaded, bEvery)
		close(stop)
		wg.Wait()

		fs := s.scrape(b)
		refused, _ := fs.Value("nxdns_upstream_share_refused_total")
		exhausted, _ := fs.Value("nxdns_upstream_budget_exhausted_total")
		queued, _ := fs.Value("nxdns_upstream_queued_total")

		b.ReportMetric(ms(percentile(idle.lat, 50)), "B-idle-p50-ms")
		b.ReportMetric(ms(percentile(idle.lat, 99)), "B-idle-p99-ms")
		b.ReportMetric(ms(percentile(busy.lat, 50)), "B-flood-p50-ms")
		b.ReportMetric(ms(percentile(busy.lat, 99)), "B-flood-p99-ms")
		b.ReportMetric(100*float64(flood.rcodes[dns.RcodeSuccess])/float64(flood.sent), "A-answered-%")
		b.ReportMetric(refused, "share-refused")
		b.ReportMetric(exhausted, "budget-exhausted")
		b.Logf("B alone: %d queries, %v; B while A floods: %d queries, %v, max %v",
			len(idle.lat), idle.rcodes, len(busy.lat), busy.rcodes, slices.Max(busy.lat))
		b.Logf("A: %d sent, answers by rcode %v, %d unanswered; pool: share refused %v, budget exhausted %v, queued %v",
			flood.sent, flood.rcodes, flood.sent-flood.answered, refused, exhausted, queued)
	}
}

type bResult struct {
	lat    []time.Duration
	rcodes map[string]int
}

// measureB asks for fast names from 127.0.0.3, one at a time, one every
// `every`, for d, and returns each answer's latency.
func measureB(b *testing.B, server string, d, every time.Duration) bResult {
	c := dialFromLoopback(b, "127.0.0.3", server)
	defer c.Close()
	res := bResult{rcodes: map[string]int{}}
	tick := time.NewTicker(every)
	defer tick.Stop()
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		<-tick.C
		q := wiretest.Query(fmt.Sprintf("b%d.fast.test.", i), dns.TypeA)
		t0 := time.Now()
		if err := c.WriteMsg(q); err != nil {
			b.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(7 * time.Second))
		for {
			r, err := c.ReadMsg()
			if err != nil {
				b.Fatalf("B's query %d: %v", i, err)
			}
			if r.Id == q.Id {
				res.lat = append(res.lat, time.Since(t0))
				res.rcodes[dns.RcodeToString[r.Rcode]]++
				break
			}
		}
	}
	return res
}

type floodResult struct {
	sent, answered int
	rcodes         map[int]int
}

// floodA sends slow names from 127.0.0.2 at rate a second until stop is
// closed, then waits for the answers still due (at most the pool's 5 s
// budget) and counts them by rcode.
func floodA(b *testing.B, server string, rate int, stop <-chan struct{}) floodResult {
	c := dialFromLoopback(b, "127.0.0.2", server)
	defer c.Close()
	res := floodResult{rcodes: map[int]int{}}
	done := make(chan struct{})
	var mu sync.Mutex
	go func() {
		defer close(done)
		for {
			r, err := c.ReadMsg()
			if err != nil {
				return // the read deadline set once sending ends
			}
			mu.Lock()
			res.answered++
			res.rcodes[r.Rcode]++
			mu.Unlock()
		}
	}()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for id := 0; ; id++ {
		select {
		case <-stop:
			c.SetReadDeadline(time.Now().Add(6 * time.Second))
			<-done
			mu.Lock()
			defer mu.Unlock()
			return res
		case <-tick.C:
		}
		q := wiretest.Query(fmt.Sprintf("a%d.slow.test.", id), dns.TypeA)
		q.Id = uint16(id)
		if err := c.WriteMsg(q); err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		res.sent++
		mu.Unlock()
	}
}

func dialFromLoopback(tb testing.TB, local, server string) *dns.Conn {
	tb.Helper()
	d := net.Dialer{LocalAddr: net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(local), 0))}
	nc, err := d.Dial("udp", server)
	if err != nil {
		tb.Fatal(err)
	}
	return &dns.Conn{Conn: nc}
}

func percentile(lat []time.Duration, p int) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
