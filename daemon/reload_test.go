package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
	zapobserver "go.uber.org/zap/zaptest/observer"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/metrics/metricstest"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// reloadSrc completes src as startDaemon does: loopback port 0, no admin
// server, no cache, unless src says otherwise.
func reloadSrc(src string) string {
	if !strings.Contains(src, "[server]") {
		src = "[server]\nlisten = [\"127.0.0.1:0\"]\n" + src
	}
	if !strings.Contains(src, "[admin]") {
		src += "\n[admin]\nlisten = \"\"\n"
	}
	return withoutCacheOrHistory(src)
}

// reload applies src (completed by reloadSrc) to d.
func reload(d *Daemon, src string) error {
	return d.Reload(func() (*config.Config, error) { return config.Parse([]byte(reloadSrc(src))) })
}

func mustReload(tb testing.TB, d *Daemon, src string) {
	tb.Helper()
	if err := reload(d, src); err != nil {
		tb.Fatalf("reload: %v", err)
	}
}

// scrapeDaemon renders d's metrics.
func scrapeDaemon(tb testing.TB, d *Daemon) metricstest.Families {
	tb.Helper()
	var b bytes.Buffer
	d.metrics.WritePrometheus(&b)
	fs, err := metricstest.Parse(&b)
	if err != nil {
		tb.Fatal(err)
	}
	return fs
}

// answerA asks name's A record over UDP and returns the answer's address,
// or its rcode when it has none.
func answerA(tb testing.TB, addr, name string) string {
	tb.Helper()
	r := ask(tb, "udp", addr, wiretest.Query(name, dns.TypeA))
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
		return dns.RcodeToString[r.Rcode]
	}
	if a, ok := r.Answer[0].(*dns.A); ok {
		return a.A.String()
	}
	return r.Answer[0].String()
}

// pathConfig is one configuration of TestReloadAppliesTheNewConfiguration:
// a named upstream, the resolver of lan., and nas.home.'s address.
func pathConfig(name, up, zone, nas string) string {
	return fmt.Sprintf(`[[upstreams]]
name = %q
address = "udp://%s"
[[forward_zones]]
zone = "lan."
resolver = %q
[[local_records]]
name = "nas.home."
type = "A"
value = %q
`, name, up, zone, nas)
}

// A reload changes the upstreams, the forward zones and the local records
// for the queries after it; the metrics follow (the new upstream's series
// exist, the removed one's are gone, the reload is counted).
func TestReloadAppliesTheNewConfiguration(t *testing.T) {
	upA := wiretest.NewServer(t, wiretest.Answer(wiretest.A("example.com.", 1)))
	upB := wiretest.NewServer(t, wiretest.Answer(wiretest.A("example.com.", 2)))
	zoneA := wiretest.NewServer(t, wiretest.Answer(wiretest.A("host.lan.", 3)))
	zoneB := wiretest.NewServer(t, wiretest.Answer(wiretest.A("host.lan.", 4)))
	s := startDaemon(t, pathConfig("a", upA.Addr, zoneA.Addr, "192.168.1.10"))

	check := func(when, pool, zone, nas string) {
		t.Helper()
		for name, want := range map[string]string{"example.com.": pool, "host.lan.": zone, "nas.home.": nas} {
			if got := answerA(t, s.udp, name); got != want {
				t.Errorf("%s: %s answered %s, want %s", when, name, got, want)
			}
		}
	}
	check("before", "192.0.2.2", "192.0.2.4", "192.168.1.10")
	mustReload(t, s.d, pathConfig("b", upB.Addr, zoneB.Addr, "192.168.1.20"))
	check("after", "192.0.2.3", "192.0.2.5", "192.168.1.20")
	if upA.UDPQueries() != 1 || zoneA.UDPQueries() != 1 {
		t.Errorf("the old upstream and resolver saw %d and %d queries, want 1 each (before the reload)", upA.UDPQueries(), zoneA.UDPQueries())
	}

	fs := scrapeDaemon(t, s.d)
	if err := metricstest.CheckSpec(fs, []string{"b"}, []string{"lan."}); err != nil {
		t.Error(err)
	}
	if _, ok := fs.Value("nxdns_upstream_success_total", "upstream", "a"); ok {
		t.Error("the removed upstream a still has its series")
	}
	if v := metricValue(t, fs, "nxdns_upstream_attempts_total", "upstream", "b", "outcome", "answer"); v != 1 {
		t.Errorf("b's answers: %v, want 1", v)
	}
	if ok, fail := metricValue(t, fs, "nxdns_config_reloads_total", "result", "success"), metricValue(t, fs, "nxdns_config_reloads_total", "result", "failure"); ok != 1 || fail != 0 {
		t.Errorf("reloads: success %v failure %v, want 1 and 0", ok, fail)
	}
}

// An upstream whose name, address, ip, ca_file and slots are unchanged is
// the same upstream after the reload: its actor, health counters and
// transport carry on, whatever else changed (its priority, the policy).
// One that changed any of them is new. Mutation check: building every
// upstream afresh in build fails the identity and the counts.
func TestReloadKeepsUnchangedUpstreams(t *testing.T) {
	a := wiretest.NewServer(t, wiretest.Answer())
	b := wiretest.NewServer(t, wiretest.Answer())
	c := wiretest.NewServer(t, wiretest.Answer())
	src := func(extra string, ups ...string) string {
		return "[upstream]\nfailure_threshold = 2\n" + extra + strings.Join(ups, "")
	}
	up := func(name, addr string, slots int) string {
		return fmt.Sprintf("[[upstreams]]\nname = %q\naddress = \"udp://%s\"\nslots = %d\n", name, addr, slots)
	}
	s := startDaemon(t, src("", up("a", a.Addr, 8), up("b", b.Addr, 8)))
	for i := range 3 {
		ask(t, "udp", s.udp, wiretest.Query(fmt.Sprintf("q%d.example.", i), dns.TypeA))
	}
	before := s.d.Pool()
	before.Sync()
	aBefore := before.Status()[0]

	// a moves to second place, b's slots change, c is added ahead of them.
	mustReload(t, s.d, src("backoff_ms = 2000\n", up("c", c.Addr, 8), up("a", a.Addr, 8), up("b", b.Addr, 16)))
	after := s.d.Pool()
	if after == before || after.Upstream(1) != before.Upstream(0) {
		t.Fatal("a is not the same upstream after the reload")
	}
	if after.Upstream(2) == before.Upstream(1) {
		t.Error("b, its slots changed, is the old upstream")
	}
	after.Sync()
	if st := after.Status()[1]; st.Name != "a" || st.Successes != aBefore.Successes || aBefore.Successes != 3 {
		t.Errorf("a after the reload: %+v, want its 3 successes", st)
	}
	if v := metricValue(t, scrapeDaemon(t, s.d), "nxdns_upstream_attempts_total", "upstream", "a", "outcome", "answer"); v != 3 {
		t.Errorf("a's attempts series after the reload: %v answers, want 3", v)
	}
	ask(t, "udp", s.udp, wiretest.Query("after.example.", dns.TypeA))
	if c.UDPQueries() != 1 {
		t.Errorf("the new first upstream saw %d queries, want 1", c.UDPQueries())
	}
}

// A query in flight when a reload removes its upstream finishes on it: it
// is answered, not lost, and the upstream's transport is closed only
// after. Mutation check: closing the old generation at once (not waiting
// for its queries) fails the query.
func TestReloadLetsQueriesInFlightFinish(t *testing.T) {
	received := make(chan string, 1)
	release, open := releaser(t)
	slow := wiretest.NewServer(t, wiretest.Notify(received, wiretest.Gate(release, wiretest.Answer(wiretest.A("slow.example.", 1)))))
	other := wiretest.NewServer(t, wiretest.Answer())
	s := startDaemon(t, upstreamTOML(slow.Addr))
	answer := askAsync(t, s.udp, "slow.example.")
	<-received // the query is at the upstream

	mustReload(t, s.d, upstreamTOML(other.Addr))
	if got := answerA(t, s.udp, "fresh.example."); got != "192.0.2.1" {
		t.Errorf("a query after the reload: %s, want the new upstream's answer", got)
	}
	open()
	r := <-answer
	if r == nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.2" {
		t.Fatalf("the query in flight at the reload: %v", r)
	}
}

// The answer cache survives a reload: a name cached before it is answered
// from the cache after it, even with every upstream replaced.
func TestReloadKeepsTheCache(t *testing.T) {
	a := wiretest.NewServer(t, wiretest.Answer())
	b := wiretest.NewServer(t, wiretest.Answer())
	s := startDaemon(t, upstreamTOML(a.Addr)+cacheTOML(""))
	ask(t, "udp", s.udp, wiretest.Query("cached.example.", dns.TypeA))
	mustReload(t, s.d, upstreamTOML(b.Addr)+cacheTOML(""))
	ask(t, "udp", s.udp, wiretest.Query("cached.example.", dns.TypeA))
	if a.UDPQueries() != 1 || b.UDPQueries() != 0 {
		t.Errorf("upstream queries: old %d new %d, want 1 and 0 (the second answer from the cache)", a.UDPQueries(), b.UDPQueries())
	}
}

// An invalid file changes nothing: the daemon keeps answering on the
// running configuration, every problem is logged with its TOML path, and
// the failure is counted.
func TestReloadInvalidChangesNothing(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	core, logs := zapobserver.New(zap.DebugLevel)
	cfg, err := config.Parse([]byte(reloadSrc(upstreamTOML(up.Addr) + "[[local_records]]\nname = \"nas.home.\"\ntype = \"A\"\nvalue = \"192.168.1.10\"\n")))
	if err != nil {
		t.Fatal(err)
	}
	d := startWithLog(t, cfg, zap.New(core))
	udp, _ := d.Addrs()
	addr := udp[0].String()

	bad := upstreamTOML(up.Addr) + `
[upstream]
total_timeout_ms = 0
[[local_records]]
name = "nas.home."
type = "A"
value = "not an address"
`
	if err := reload(d, bad); err == nil {
		t.Fatal("an invalid configuration reloaded")
	}
	if got := answerA(t, addr, "nas.home."); got != "192.168.1.10" {
		t.Errorf("after the failed reload nas.home. is %s, want the running 192.168.1.10", got)
	}
	if got := answerA(t, addr, "pool.example."); got != "192.0.2.1" {
		t.Errorf("after the failed reload the pool answered %s", got)
	}
	var paths []string
	for _, e := range logs.FilterMessage("reload: configuration problem").All() {
		paths = append(paths, e.ContextMap()["path"].(string))
	}
	if want := []string{"upstream.total_timeout_ms", "local_records[0].value"}; strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Errorf("problems logged at %v, want %v", paths, want)
	}
	if logs.FilterMessage("reload failed; the running configuration stays").Len() != 1 {
		t.Error("no summary line for the failed reload")
	}

	// A file that cannot be read at all is a failure too.
	gone := errors.New("open /etc/nxdnsd/nxdns.toml: no such file or directory")
	if err := d.Reload(func() (*config.Config, error) { return nil, gone }); !errors.Is(err, gone) {
		t.Errorf("unreadable file: %v", err)
	}
	fs := scrapeDaemon(t, d)
	if ok, fail := metricValue(t, fs, "nxdns_config_reloads_total", "result", "success"), metricValue(t, fs, "nxdns_config_reloads_total", "result", "failure"); ok != 0 || fail != 2 {
		t.Errorf("reloads: success %v failure %v, want 0 and 2", ok, fail)
	}
}

// startWithLog starts a daemon on cfg logging to log, shut down with the
// test.
func startWithLog(tb testing.TB, cfg *config.Config, log *zap.Logger) *Daemon {
	tb.Helper()
	d, err := newDaemon(cfg, log, options{})
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { shutdownDaemon(tb, d) })
	return d
}

func shutdownDaemon(tb testing.TB, d *Daemon) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		tb.Errorf("shutdown: %v", err)
	}
}

// A new listen address is bound before the old one is closed; one that
// cannot be bound fails the reload and changes nothing.
func TestReloadRebindsListeners(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	listen := func(addrs ...string) string {
		return `[server]
listen = ["` + strings.Join(addrs, `", "`) + `"]
` + upstreamTOML(up.Addr)
	}
	s := startDaemon(t, listen("127.0.0.1:0"))
	old := s.udp

	// Add an address: both answer.
	mustReload(t, s.d, listen("127.0.0.1:0", "127.0.0.2:0"))
	udp, tcp := s.d.Addrs()
	if len(udp) != 2 || udp[0].String() != old || len(tcp) != 2 {
		t.Fatalf("after adding an address: udp %v tcp %v", udp, tcp)
	}
	for _, a := range udp {
		if got := answerA(t, a.String(), "x.example."); got != "192.0.2.1" {
			t.Errorf("%s answered %s", a, got)
		}
	}
	added := udp[1].String()

	// An address in use: the reload fails and both addresses still serve.
	taken, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	if err := reload(s.d, listen("127.0.0.1:0", "127.0.0.2:0", taken.LocalAddr().String())); err == nil {
		t.Fatal("a reload onto an address in use succeeded")
	}
	if udp, _ := s.d.Addrs(); len(udp) != 2 {
		t.Errorf("after the failed reload: %v, want the 2 running addresses", udp)
	}

	// Remove the first address: once the reload's background work is done,
	// it is closed, and the other still serves.
	mustReload(t, s.d, listen("127.0.0.2:0"))
	s.d.bg.Wait()
	if udp, _ := s.d.Addrs(); len(udp) != 1 || udp[0].String() != added {
		t.Fatalf("after removing the first address: %v", udp)
	}
	if got := answerA(t, added, "y.example."); got != "192.0.2.1" {
		t.Errorf("%s answered %s", added, got)
	}
	if c, err := net.Dial("tcp", s.tcp); err == nil {
		c.Close()
		t.Errorf("the removed address %s still accepts TCP", s.tcp)
	}
}

// Keys a reload cannot apply keep their running values, and the reload
// names them; the rest of the file is applied.
func TestReloadPinsWhatNeedsARestart(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	core, logs := zapobserver.New(zap.DebugLevel)
	cfg, err := config.Parse([]byte(reloadSrc(upstreamTOML(up.Addr) + cacheTOML("size_mib = 8"))))
	if err != nil {
		t.Fatal(err)
	}
	d := startWithLog(t, cfg, zap.New(core))
	mustReload(t, d, `
[server]
listen = ["127.0.0.1:0"]
max_concurrent_queries = 100
allow = ["127.0.0.0/8"]
[upstream]
failure_threshold = 7
[cache]
enabled = true
size_mib = 32
prefetch = false
[log]
level = "debug"
`+upstreamTOML(up.Addr))
	d.mu.Lock()
	run := d.cfg
	d.mu.Unlock()
	if run.Server.MaxConcurrentQueries != 4096 || run.Cache.SizeMiB != 8 || run.Log.Level != "info" {
		t.Errorf("restart-only keys applied: max_concurrent_queries %d, size_mib %d, log.level %s",
			run.Server.MaxConcurrentQueries, run.Cache.SizeMiB, run.Log.Level)
	}
	if run.Upstream.FailureThreshold != 7 || run.Cache.Prefetch || len(run.Server.AllowPrefixes) != 1 {
		t.Errorf("live keys not applied: failure_threshold %d, prefetch %v, allow %v",
			run.Upstream.FailureThreshold, run.Cache.Prefetch, run.Server.AllowPrefixes)
	}
	warned := logs.FilterMessage("reload: these settings take effect at the next restart; their running values stay").All()
	if len(warned) != 1 {
		t.Fatalf("%d warnings about restart-only keys, want 1", len(warned))
	}
	// Without a level to set (New, not Run), log.level needs a restart.
	want := []any{"server.max_concurrent_queries", "cache.size_mib", "log.level"}
	if got := warned[0].ContextMap()["keys"]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("keys named: %v, want %v", got, want)
	}
}
