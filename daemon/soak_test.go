package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/metrics/metricstest"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// Soak bounds: the load runs for soakLoad or until every client has sent
// soakQueriesPerClient queries, whichever comes first.
const (
	soakLoad             = 20 * time.Second
	soakClients          = 6
	soakQueriesPerClient = 4000
	soakBurst            = 48              // datagrams a burst client sends at once, past the cap
	soakClientTimeout    = 2 * time.Second // far above the daemon's 100 ms budget; only a lost answer waits for it

	// What may be left over once the daemon is gone: the runtime keeps a
	// little for itself (a GC worker, a timer), and freed heap is not all
	// returned at once.
	soakGoroutineSlack = 2
	soakFDSlack        = 2
	soakHeapSlack      = 8 << 20
)

// A bounded soak of the whole daemon: clients send a mix of queries over
// UDP and TCP — special names, local records, forward zones that answer,
// stall and truncate, pool names through upstreams that stall, refuse,
// send garbage or the wrong ID, are not there at all, or answer (and
// names that every upstream refuses or stalls on) — plus
// bursts past the concurrency cap, malformed queries and TCP clients that
// lie about lengths or never finish a prefix. Budgets are tiny (attempt
// 50 ms, total 100 ms, backoff from 50 ms) so that failures, backoffs and
// probes cycle many times; the forward zones' read timeout is 300 ms (at
// 100 ms the answering zone's TCP exchanges expired under the race
// detector on a machine at a load average of 19), and TCP's idle timeout
// 1 s (at 300 ms an honest client's connection was closed before its
// query arrived, on the same machine). Every answer must have the right
// ID and an rcode its source can give. Once the daemon has shut down,
// goroutines, open file descriptors and heap must be back near where they
// were before it started.
//
// Not parallel: it measures the whole process.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test: skipped with -short")
	}
	base := takeBaseline(t)
	ignore := goleak.IgnoreCurrent()

	// The fakes are closed before the measurement, not by their cleanup:
	// a stalled fake holds a goroutine per query it swallowed.
	var fakes []*wiretest.Server
	fake := func(h wiretest.Handler) string {
		f := wiretest.NewServer(t, h)
		fakes = append(fakes, f)
		return f.Addr
	}
	answering := fake(soakUpstream(wiretest.Answer()))
	upstreams := []struct{ name, address string }{
		{"stall", "udp://" + fake(wiretest.Stall)},
		{"garbage", "udp://" + fake(wiretest.Garbage)},
		{"refused", "udp://" + fake(wiretest.Rcode(dns.RcodeRefused))},
		{"wrong-id", "tcp://" + fake(wiretest.WrongID)},
		{"closed", "udp://" + wiretest.Refusing(t)},
		{"truncating", "udp://" + fake(soakUpstream(wiretest.Truncating(3)))},
		{"answering", "udp://" + answering},
		{"answering-tcp", "tcp://" + answering},
	}
	var src strings.Builder
	src.WriteString(`[server]
listen = ["127.0.0.1:0"]
tcp_idle_timeout_ms = 1000
max_concurrent_queries = 32
[upstream]
attempt_timeout_ms = 50
total_timeout_ms = 100
read_timeout_ms = 300
failure_threshold = 2
backoff_ms = 50
backoff_max_ms = 400
[[local_records]]
name = "nas.lan."
type = "A"
value = "192.168.1.10"
[[local_records]]
name = "files.lan."
type = "CNAME"
value = "nas.lan."
`)
	for _, u := range upstreams {
		fmt.Fprintf(&src, "[[upstreams]]\nname = %q\naddress = %q\nslots = 8\n", u.name, u.address)
	}
	for _, z := range []struct{ zone, resolver string }{
		{"home.", fake(wiretest.Answer())},
		{"stall.home.", fake(wiretest.Stall)},
		{"big.home.", fake(wiretest.Truncating(40))},
	} {
		fmt.Fprintf(&src, "[[forward_zones]]\nzone = %q\nresolver = %q\n", z.zone, z.resolver)
	}
	// Started here rather than with startObserved, whose cleanup would
	// keep the daemon reachable: once it has shut down, nothing must hold
	// its memory.
	cfg, err := config.Parse([]byte(fmt.Sprintf("[admin]\nlisten = \"127.0.0.1:0\"\n[query_log]\npath = %q\nattempts = true\n%s",
		filepath.Join(t.TempDir(), "query.log"), src.String())))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	d, err := newDaemon(cfg, nil, options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	shutdown := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := d.Shutdown(ctx)
		d = nil
		return err
	}
	t.Cleanup(func() {
		if d != nil { // the test ended before its own shutdown
			_ = shutdown()
		}
	})
	udp, tcp := d.Addrs()
	srv := &started{d: d, udp: udp[0].String(), tcp: tcp[0].String()}
	admin := "http://" + d.AdminAddr().String()
	// The scrapes' connections must not outlive the daemon into the
	// measurement: no keep-alive.
	scraper := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: soakClientTimeout}

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), soakLoad)
	defer cancel()
	tally := newSoakTally()
	var wg sync.WaitGroup
	for i := range soakClients {
		wg.Go(func() { soakClient(ctx, srv, uint64(i), tally) })
	}
	wg.Go(func() { soakBursts(ctx, srv.udp, tally) })
	wg.Go(func() { soakAbuse(ctx, srv, tally) })
	wg.Go(func() { soakScrapes(ctx, scraper, admin, tally) })
	wg.Wait()
	loadTime := time.Since(start)

	fs := soakMetrics(t, scraper, admin)
	if v := metricValue(t, fs, "nxdns_panics_total"); v != 0 {
		t.Errorf("nxdns_panics_total = %v after the soak, want 0", v)
	}
	tally.report(t, loadTime, metricValue(t, fs, "nxdns_overload_refused_total"))
	// Under load means before the shutdown: the stalling fakes still hold
	// a goroutine for each query they swallowed.
	loaded := takeBaseline(t)

	srv = nil
	if err := shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	for _, f := range fakes {
		f.Close()
	}
	scraper.CloseIdleConnections()

	// goleak retries while goroutines wind down; it waits for nothing else.
	if err := goleak.Find(ignore); err != nil {
		t.Errorf("goroutines left after shutdown: %v", err)
	}
	after := takeBaseline(t)
	t.Logf("goroutines: baseline %d, under load %d, after shutdown %d", base.goroutines, loaded.goroutines, after.goroutines)
	t.Logf("open fds:   baseline %d, under load %d, after shutdown %d", base.fds, loaded.fds, after.fds)
	t.Logf("heap inuse: baseline %.1f MiB, under load %.1f MiB, after shutdown %.1f MiB",
		mib(base.heap), mib(loaded.heap), mib(after.heap))
	if after.goroutines > base.goroutines+soakGoroutineSlack {
		t.Errorf("%d goroutines after shutdown, baseline %d", after.goroutines, base.goroutines)
	}
	if base.fds >= 0 && after.fds > base.fds+soakFDSlack {
		t.Errorf("%d open file descriptors after shutdown, baseline %d:\n%s", after.fds, base.fds, strings.Join(openFDs(), "\n"))
	}
	if after.heap > base.heap+soakHeapSlack {
		t.Errorf("heap in use %.1f MiB after shutdown, baseline %.1f MiB", mib(after.heap), mib(base.heap))
	}
}

// soakMetrics reads and parses /metrics.
func soakMetrics(tb testing.TB, c *http.Client, admin string) metricstest.Families {
	tb.Helper()
	resp, err := c.Get(admin + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("/metrics: %s", resp.Status)
	}
	fs, err := metricstest.Parse(resp.Body)
	if err != nil {
		tb.Fatalf("/metrics does not parse: %v", err)
	}
	return fs
}

// usage is a process measurement.
type usage struct {
	goroutines int
	fds        int    // -1 where /proc/self/fd does not exist
	heap       uint64 // HeapInuse after two collections
}

func takeBaseline(tb testing.TB) usage {
	tb.Helper()
	// The first network use creates the runtime's poller descriptors; do
	// it before the baseline so they count in it.
	if c, err := net.ListenPacket("udp", "127.0.0.1:0"); err == nil {
		c.Close()
	}
	// Two collections: sync.Pool keeps its objects through one.
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fds := -1
	if open := openFDs(); open != nil {
		fds = len(open)
	}
	return usage{goroutines: runtime.NumGoroutine(), fds: fds, heap: ms.HeapInuse}
}

// openFDs lists the process's open file descriptors with what they are,
// for counting and for the failure message; nil without /proc.
func openFDs() []string {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil
	}
	names, err := d.Readdirnames(-1)
	d.Close() // its own descriptor was among the names
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range names {
		target, err := os.Readlink("/proc/self/fd/" + n)
		if err != nil {
			continue // the directory's own descriptor, closed above
		}
		out = append(out, n+" -> "+target)
	}
	sort.Strings(out)
	return out
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
