package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// floodEnv sets TestCacheFlood's length, e.g. NXDNSD_FLOOD=60s (the issue's
// figure, what CI runs); unset, the test is skipped.
const floodEnv = "NXDNSD_FLOOD"

// A flood of one-off names cannot evict the names a network asks again and
// again (spec section 10, "Bounds"), and nxdnsd's memory stays bounded: the
// built binary runs with size_mib = 16 while, for the flood's length,
// workers ask random one-off names as fast as they are answered and others
// cycle through 1,000 names. Those 1,000 keep a hit ratio of at least 95 %
// (the upstream counts what reaches it), and nxdnsd's peak resident memory
// (VmHWM) stays within size_mib plus 44 MB: 40 MB of overhead over a
// binary whose idle RSS was 10.8 MiB, plus the 4.4 MiB that idle RSS grew
// by in wave 3 (15.2 MiB: the binary links SQLite, pgx and HTTP/2, and
// nearly doubled). It runs for NXDNSD_FLOOD (CI: 60 s).
func TestCacheFlood(t *testing.T) {
	length, err := time.ParseDuration(os.Getenv(floodEnv))
	if err != nil || length <= 0 {
		t.Skipf("set %s (e.g. 60s) to run the flood test", floodEnv)
	}
	const hot, sizeMiB = 1000, 16
	var hotUpstream atomic.Int64
	up := wiretest.NewServer(t, func(w *wiretest.Writer, q *dns.Msg) {
		if strings.HasPrefix(q.Question[0].Name, "hot") {
			hotUpstream.Add(1)
		}
		r := new(dns.Msg).SetReply(q)
		a := wiretest.A(q.Question[0].Name, 0)
		a.Hdr.Ttl = 3600
		r.Answer = []dns.RR{a}
		w.WriteMsg(r)
	})
	cfg := writeConfig(t, fmt.Sprintf(`
[server]
listen = ["127.0.0.1:0"]
[admin]
listen = ""
[cache]
size_mib = %d
[history]
enabled = false # its own bound (32 MiB in memory) is tested in history/; this measures the cache's
[[upstreams]]
address = "udp://%s"
`, sizeMiB, up.Addr))
	sock := filepath.Join(t.TempDir(), "notify")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	cmd := exec.Command(buildBinary(t), "-c", cfg)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 4096)
	_ = notify.SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound for a broken binary, not a wait for timing
	n, err := notify.Read(buf)
	if err != nil {
		t.Fatalf("no READY=1: %v", err)
	}
	m := regexp.MustCompile(`udp (127\.0\.0\.1:\d+)`).FindStringSubmatch(string(buf[:n]))
	if m == nil {
		t.Fatalf("READY=1 without the bound address: %q", buf[:n])
	}
	addr := m[1]

	// Every hot name asked once: they are then in the cache, as a network's
	// usual names are when a flood begins.
	c := &dns.Client{Net: "udp", Timeout: 3 * time.Second}
	for i := range hot {
		if _, _, err := c.Exchange(wiretest.Query(fmt.Sprintf("hot%d.example.", i), dns.TypeA), addr); err != nil {
			t.Fatal(err)
		}
	}
	hotUpstream.Store(0)

	stop := time.Now().Add(length)
	var hotAsked, floodAsked atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	worker := func(name func(i int) string, count *atomic.Int64) {
		conn, err := net.Dial("udp", addr)
		if err != nil {
			errs <- err
			return
		}
		defer conn.Close()
		buf := make([]byte, 1500)
		for i := 0; time.Now().Before(stop); i++ {
			b, _ := wiretest.Query(name(i), dns.TypeA).Pack()
			if _, err := conn.Write(b); err != nil {
				errs <- err
				return
			}
			_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, err := conn.Read(buf); err != nil {
				continue // lost under load: the next query goes out
			}
			count.Add(1)
		}
	}
	for w := range 4 {
		r := rand.New(rand.NewPCG(uint64(w), 7))
		wg.Go(func() { worker(func(int) string { return fmt.Sprintf("x%d.flood.example.", r.Uint64()) }, &floodAsked) })
	}
	for w := range 2 {
		wg.Go(func() {
			worker(func(i int) string { return fmt.Sprintf("hot%d.example.", (i*7+w*500)%hot) }, &hotAsked)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	peak := procStatus(t, cmd.Process.Pid, "VmHWM")
	hits := 1 - float64(hotUpstream.Load())/float64(hotAsked.Load())
	qps := float64(floodAsked.Load()+hotAsked.Load()) / length.Seconds()
	t.Logf("%v: %d one-off and %d hot queries answered (%.0f per second), hot hit ratio %.4f, nxdnsd's peak RSS %.1f MiB",
		length, floodAsked.Load(), hotAsked.Load(), qps, hits, float64(peak)/(1<<20))
	if qps < 2000 {
		t.Errorf("%.0f queries per second: not a flood (want several thousand)", qps)
	}
	if hits < 0.95 {
		t.Errorf("the hot names' hit ratio fell to %.4f under the flood, want at least 0.95", hits)
	}
	if limit := int64(sizeMiB+44) << 20; peak > limit {
		t.Errorf("nxdnsd's peak RSS %d MiB, want at most size_mib + 44 = %d MiB", peak>>20, limit>>20)
	}
}

// procStatus reads field (in kB) of /proc/PID/status, in bytes.
func procStatus(tb testing.TB, pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
