package daemon

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/transport"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// findChromium returns the path of a Chromium (or Chrome) binary, or ""
// when none is installed.
func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// headless starts a headless Chromium for the test, with a fresh profile
// and the flags that keep it off the network (this machine's closed
// network refuses its background connections), and returns a tab's
// context. The browser is closed, and its process waited for, at cleanup.
func headless(t *testing.T) context.Context {
	t.Helper()
	path := findChromium()
	if path == "" {
		t.Skip("prerequisite missing: Chromium is not installed, so the status page is not tested in a browser here (CI installs it: apt-get install chromium)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1024, 900),
	}
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium's sandbox refuses to run as root
	}
	// A bound for the whole browser session: a page that never shows what
	// it should fails the test instead of hanging it.
	ctx, cancelTimeout := context.WithTimeout(context.Background(), 60*time.Second)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tab, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser process to exit
		cancelTimeout()
	})
	return tab
}

// textOf is a JavaScript expression for the trimmed text of the first
// element matching sel, "" when there is none.
func textOf(sel string) string {
	return fmt.Sprintf(`((document.querySelector(%q) || {}).textContent || "").trim()`, sel)
}

// waitFor polls the page until the JavaScript condition js is true; the
// page changes only by its own refreshes, so this is the test's way of
// waiting for one, never a sleep.
func waitFor(ctx context.Context, t *testing.T, what, js string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("the page never showed %s: %v\nthe page reads:\n%s", what, err, body)
	}
}

// The status page in a real browser: it shows the upstreams, the counters
// and the recent queries with their trails; it follows the primary into
// backoff, with its last error, without a reload; and once the admin
// server is gone it says that nxdnsd cannot be reached. The screenshot it
// takes is docs/status-page.png when NXDNSD_SCREENSHOT names that path
// (go test -run TestStatusPageInABrowser ./daemon/ with
// NXDNSD_SCREENSHOT=$PWD/docs/status-page.png).
func TestStatusPageInABrowser(t *testing.T) {
	ctx := headless(t)

	var blackhole atomic.Bool
	primary := wiretest.NewServer(t, func(w *wiretest.Writer, q *dns.Msg) {
		if blackhole.Load() {
			wiretest.Stall(w, q)
			return
		}
		wiretest.Answer(wiretest.A(q.Question[0].Name, 1))(w, q)
	})
	secondary := wiretest.NewServer(t, func(w *wiretest.Writer, q *dns.Msg) {
		wiretest.Answer(wiretest.A(q.Question[0].Name, 2))(w, q)
	})
	// The primary's backoff outlasts the test, so what the page shows is
	// the blackhole's doing, not a probe's; an attempt expires in 300 ms.
	s := runDaemon(t, `[server]
listen = ["127.0.0.1:0"]
[admin]
listen = "127.0.0.1:0"
[upstream]
attempt_timeout_ms = 300
total_timeout_ms = 2000
failure_threshold = 1
backoff_ms = 60000
backoff_max_ms = 60000
[[upstreams]]
name = "primary"
address = "udp://`+primary.Addr+`"
slots = 8
[[upstreams]]
name = "secondary"
address = "udp://`+secondary.Addr+`"
slots = 4
[[local_records]]
name = "nas.lan."
type = "A"
value = "192.0.2.10"
[cache]
enabled = true
`, options{version: "1.2.3-test"})

	for _, name := range []string{"example.com.", "example.com.", "www.example.org.", "nas.lan."} {
		ask(t, "udp", s.udp, wiretest.Query(name, dns.TypeA))
	}

	page := "http://" + s.d.AdminAddr().String() + "/?refresh=250"
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "both upstreams, healthy, in priority order",
		`[...document.querySelectorAll("#upstreams tbody tr")].map(r => r.dataset.upstream + ":" + r.querySelector(".state").textContent).join(",") === "primary:healthy,secondary:healthy"`)
	waitFor(ctx, t, "the primary's slots", textOf(`tr[data-upstream="primary"] td:nth-child(3)`)+` === "0 of 8"`)
	waitFor(ctx, t, "the counters: 4 answered, one cache hit of 3 lookups",
		textOf("#answered")+` === "4" && `+textOf("#servfail")+` === "0" && `+textOf("#hit-ratio")+` === "33.3 %" && `+textOf("#budget")+` === "0"`)
	waitFor(ctx, t, "what the cache's count counts", textOf("#hit-ratio-k")+` === "cache hit ratio; 2 entries, failures included"`)
	waitFor(ctx, t, "the version", textOf("#meta")+`.includes("version 1.2.3-test")`)
	waitFor(ctx, t, "the recent queries, newest first",
		`[...document.querySelectorAll("#queries tr.query td.name")].map(td => td.textContent).join(",") === "nas.lan.,www.example.org.,example.com.,example.com."`)

	// One click away: the trail of the query the primary answered.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#queries tr.query:nth-child(2)`))); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the trail of www.example.org.", textOf("#queries tr.trail li")+`.startsWith("primary: answer, ")`)

	// The primary goes silent: the next query expires there and fails
	// over, and the primary is in backoff with its error, on the page as
	// it refreshes itself.
	blackhole.Store(true)
	if r := ask(t, "udp", s.udp, wiretest.Query("after.example.net.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("after the blackhole: %s, want the secondary's answer", dns.RcodeToString[r.Rcode])
	}
	waitFor(ctx, t, "the primary in backoff with the time left until its probe, with its last error a moment ago",
		textOf(`tr[data-upstream="primary"] .state`)+`.startsWith("backoff, next probe in ") && `+
			textOf(`tr[data-upstream="primary"] .state`)+`.endsWith(" s") && `+
			textOf(`tr[data-upstream="primary"] .last-error .err`)+` !== "" && `+
			textOf(`tr[data-upstream="primary"] .last-error .sub`)+`.endsWith(" s ago") && `+
			textOf(`tr[data-upstream="secondary"] .state`)+` === "healthy" && `+
			textOf("#pool-status")+` === "degraded"`)
	waitFor(ctx, t, "the failover's trail, still open after refreshes",
		textOf("#queries tr.query td.name")+` === "after.example.net." && document.querySelectorAll("#queries tr.trail").length === 1`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#queries tr.query`))); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the failover's trail: expired at the primary, answered by the secondary",
		`[...document.querySelectorAll("#queries tr.query.open:first-child + tr.trail li")].map(li => li.textContent.split(",")[0]).join(" ") === "primary: expired secondary: answer"`)

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("the screenshot is not a PNG (%d bytes)", len(png))
	}
	shot := os.Getenv("NXDNSD_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "status-page.png")
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shot)

	// The admin server stops: the page says nxdnsd cannot be reached and
	// marks its figures as old, without a reload.
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.d.admin.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "that nxdnsd cannot be reached",
		`document.body.classList.contains("offline") && getComputedStyle(document.getElementById("conn")).display !== "none" && `+
			textOf("#conn")+`.startsWith("Cannot reach nxdnsd at ") && `+textOf("#conn")+`.includes("are not current")`)
	banner, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("conn")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(banner, s.d.AdminAddr().String()) {
		t.Errorf("the banner %q does not say where it looked", banner)
	}
}

// unroutable is an upstream transport that, while cut is set, fails every
// exchange (probes included) as this host's stack does with no route to
// the upstream, and otherwise passes it on.
type unroutable struct {
	transport.Exchanger
	cut *atomic.Bool
}

func (u unroutable) Exchange(ctx context.Context, q *transport.Query, expiry time.Time) (transport.Answer, error) {
	if u.cut.Load() {
		return transport.Answer{}, &net.OpError{Op: "dial", Net: "udp", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}
	}
	return u.Exchanger.Exchange(ctx, q, expiry)
}

// The status page with the network down (issue 24): the badge says
// "network down", not "all upstreams healthy", a banner says the
// upstreams are not to blame and gives the host's last local error, and
// each upstream reads healthy but unreachable from here; once a route
// returns, the next probe's answer clears it, and the last local error
// stays as a line under the table. The screenshot, at 1280 px, is
// docs/status-page-network-down.png when NXDNSD_SCREENSHOT_NETDOWN names
// that path.
func TestStatusPageNetworkDown(t *testing.T) {
	ctx := headless(t)
	var cut atomic.Bool
	cut.Store(true)
	var addrs []string
	for i := range 2 {
		up := wiretest.NewServer(t, wiretest.Answer(wiretest.A("example.com.", i)))
		addrs = append(addrs, up.Addr)
	}
	s := runDaemon(t, `[server]
listen = ["127.0.0.1:0"]
[admin]
listen = "127.0.0.1:0"
[upstream]
backoff_ms = 200
backoff_max_ms = 2000
probe_timeout_ms = 500
[[upstreams]]
name = "quad9"
address = "udp://`+addrs[0]+`"
[[upstreams]]
name = "cloudflare"
address = "udp://`+addrs[1]+`"
`, options{version: "1.2.3-test", exchanger: func(_ int, x transport.Exchanger) transport.Exchanger { return unroutable{x, &cut} }})
	for _, name := range []string{"example.com.", "www.example.org."} {
		if r := ask(t, "udp", s.udp, wiretest.Query(name, dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
			t.Fatalf("%s without a route: %s, want SERVFAIL", name, dns.RcodeToString[r.Rcode])
		}
	}

	page := "http://" + s.d.AdminAddr().String() + "/?refresh=250"
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the network down, with the host's error, the upstreams not blamed",
		textOf("#pool-status")+` === "network down" && document.querySelector("#pool-status").classList.contains("down") && `+
			`getComputedStyle(document.getElementById("network")).display !== "none" && `+
			textOf("#network")+`.startsWith("The network is down: no upstream can be reached from this host.") && `+
			textOf("#network .err")+`.startsWith("Last local error: dial udp: connect: network is unreachable (") && `+
			`[...document.querySelectorAll("#upstreams tbody .state")].map(td => td.textContent).join(",") === "healthy, no route from here,healthy, no route from here" && `+
			textOf(`tr[data-upstream="quad9"] .last-error`)+` === "none recorded against it" && `+textOf("#local-error")+` === ""`)
	waitFor(ctx, t, "the queries' trails: local errors", textOf("#servfail")+` === "2"`)

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := os.Getenv("NXDNSD_SCREENSHOT_NETDOWN")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "status-page-network-down.png")
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shot)

	// A route returns: the next probe (backoff_ms after the last) answers.
	cut.Store(false)
	waitFor(ctx, t, "the network back, the last local error kept below the table",
		textOf("#pool-status")+` === "all upstreams healthy" && getComputedStyle(document.getElementById("network")).display === "none" && `+
			textOf("#local-error")+`.startsWith("Last local error (no route from this host, blamed on no upstream): dial udp: connect: network is unreachable (") && `+
			`[...document.querySelectorAll("#upstreams tbody .state")].map(td => td.textContent).join(",") === "healthy,healthy"`)
}
