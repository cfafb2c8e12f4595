package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/history"
	"github.com/nxdnsd/nxdnsd/metrics"
)

// browserTab starts a headless Chromium off the network (as package
// daemon's tests do) and returns a tab, closed at cleanup; it skips the
// test when no Chromium is installed.
func browserTab(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Skip("prerequisite missing: Chromium is not installed (CI installs it: apt-get install chromium)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.UserDataDir(t.TempDir()), chromedp.Headless, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	ctx, cancelTimeout := context.WithTimeout(context.Background(), 60*time.Second)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tab, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		cancelTimeout()
	})
	return tab
}

func pageText(sel string) string {
	return fmt.Sprintf(`((document.querySelector(%q) || {}).textContent || "").trim()`, sel)
}

// pageShows polls the page until js is true (the page changes by its own
// refreshes; this waits for one, never sleeps).
func pageShows(ctx context.Context, t *testing.T, what, js string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("the page never showed %s: %v\nthe page reads:\n%s", what, err, body)
	}
}

func do(ctx context.Context, t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// noSideways is true when neither the document nor a table's box is wider
// than what shows.
const noSideways = `document.documentElement.scrollWidth <= window.innerWidth &&
	[...document.querySelectorAll(".scroll")].every(e => e.offsetParent === null || e.scrollWidth <= e.clientWidth + 1)`

// dashboardHistory is a history of the last 24 hours: 1,440 queries, one
// a minute, the first 20 minutes' worth of them at once in the newest
// bucket, from three clients (two named), answered by the pool, the
// cache, a block list, and a few failed; and one query named as markup.
func dashboardHistory(t *testing.T, now time.Time) *history.History {
	t.Helper()
	h, err := history.Open(config.History{Enabled: true, RetentionDays: 7, MaxMiB: 32}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Error(err)
		}
	})
	clients := []struct {
		addr netip.Addr
		name string
	}{
		{netip.MustParseAddr("192.168.1.20"), "tablet"},
		{netip.MustParseAddr("192.168.1.21"), "laptop"},
		{netip.MustParseAddr("192.168.1.64"), ""},
	}
	names := []string{"www.example.com.", "cdn.example.net.", "mail.example.org.", "api.example.com.", "www.example.com."}
	for i := range 1440 {
		// Busier in the evening: every third minute of the last 6 hours
		// counts twice.
		ts := now.Add(-time.Duration(i) * time.Minute)
		c := clients[i%3]
		row := history.Row{Time: ts, Client: c.addr, ClientName: c.name, Proto: "udp", QName: names[i%5], QType: dns.TypeA,
			Rcode: dns.RcodeSuccess, Source: "pool", Upstream: "quad9", Duration: 12 * time.Millisecond}
		switch {
		case i%7 == 0:
			row.QName, row.Source, row.Upstream, row.List, row.Duration = "ads.tracker.example.", "blocked", "", "stevenblack", 0
		case i%4 == 1:
			row.Source, row.Upstream, row.Duration = "cache", "", 0
		case i%97 == 3:
			row.Rcode = dns.RcodeServerFailure
		}
		h.Record(row)
		if i < 360 && i%3 == 0 {
			row.Time = ts.Add(-time.Second)
			h.Record(row)
		}
	}
	h.Record(history.Row{Time: now, Client: clients[2].addr, Proto: "udp", QName: "<img src=x onerror=alert(1)>.", QType: dns.TypeA,
		Rcode: dns.RcodeNameError, Source: "pool", Upstream: "quad9", Duration: 20 * time.Millisecond})
	h.Sync()
	return h
}

// The dashboard's history views against the history's own handlers
// (package history's Register, rows recorded straight into it): the
// 24-hour chart by outcome and the share blocked, the top lists, the
// query log searched by name and by source through /api/history, the
// clients with their names and counts, and a name that is markup shown
// as text; without the blocking API (404) the lists view says so; at
// 390 px nothing scrolls sideways. Its screenshots are
// docs/dashboard.png (1280 px) and docs/dashboard-phone.png (390 px)
// when NXDNSD_SCREENSHOT_DASHBOARD names docs/ (go test -run
// TestDashboardHistoryInABrowser ./admin/ with
// NXDNSD_SCREENSHOT_DASHBOARD=$PWD/docs).
func TestDashboardHistoryInABrowser(t *testing.T) {
	ctx := browserTab(t)
	now := time.Now()
	h := dashboardHistory(t, now)
	m := metrics.New(metrics.Config{Upstreams: []string{"quad9", "cloudflare"}})
	pool := &fakePool{st: []actors.Status{
		{Name: "quad9", Address: "tls://dns.quad9.net:853", Slots: 32, InFlight: 1, Successes: 1203},
		{Name: "cloudflare", Address: "https://cloudflare-dns.com/dns-query", Slots: 32, Successes: 41, Failures: 2,
			LastError: fmt.Errorf("expired after 1.5 s"), LastErrorAt: now.Add(-40 * time.Minute)},
	}}
	base := startWith(t, Config{Metrics: m, Pool: pool, Queries: fakeQueries{n: 4}, Version: "1.4.0",
		Counters: fakeCounters{metrics.Totals{Queries: 1561, NoError: 1540, NXDomain: 10, ServFail: 11, CacheOn: true,
			CacheHit: 334, CacheMiss: 1003, CacheEntries: 412, BudgetExhausted: 0}},
		Routes: func(mux *http.ServeMux) { h.Register(mux) }})

	do(ctx, t, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/?refresh=250"))
	// 1,440 queries, 120 of them twice, and the hostile one.
	pageShows(ctx, t, "the chart of 1,561 queries by outcome",
		pageText("#chart-sum")+`.startsWith("1,561 queries: ") && `+
			`[...document.querySelectorAll("#chart svg g")].reduce((n, g) => n + Number(g.dataset.total), 0) === 1561 && `+
			`document.querySelectorAll("#chart svg rect.s-blocked").length > 100 && document.querySelectorAll("#chart svg rect.s-failed").length > 5`)
	blocked := 0
	for i := range 1440 {
		if i%7 == 0 {
			blocked++
			if i < 360 && i%3 == 0 {
				blocked++
			}
		}
	}
	pageShows(ctx, t, "the share blocked", pageText("#share-blocked")+fmt.Sprintf(` === "%.1f %%"`, 100*float64(blocked)/1561))
	pageShows(ctx, t, "the top lists",
		pageText("#top-domains tr:first-child td.name")+` === "www.example.com." && `+
			pageText("#top-blocked tr:first-child td.name")+` === "ads.tracker.example." && `+
			`document.querySelectorAll("#top-blocked tr").length === 1 && `+
			`document.querySelectorAll("#top-clients tr").length === 3 && `+
			pageText("#top-clients tr:first-child td.name")+` === "tablet192.168.1.20" && `+
			`[...document.querySelectorAll("#top-domains td.name")].some(td => td.textContent === "<img src=x onerror=alert(1)>.")`)
	shot(ctx, t, "dashboard.png")

	// The query log, searched through the history.
	do(ctx, t, chromedp.Click(chromedp.CSS(`#tabs button[data-view="log"]`)))
	pageShows(ctx, t, "the history's newest rows", pageText("#log-meta")+` === "newest first; the newest 100 that match" && `+pageText("#log-note")+` === ""`)
	do(ctx, t, chromedp.SendKeys(chromedp.ID("f-name"), "MAIL.example"))
	pageShows(ctx, t, "the rows named mail.example.org.",
		`document.querySelectorAll("#log tr.logrow").length === 100 && `+
			`[...document.querySelectorAll("#log tr.logrow td.name")].every(td => td.textContent === "mail.example.org.")`)
	setField(ctx, t, "f-name", "")
	setField(ctx, t, "f-source", "blocked")
	pageShows(ctx, t, "the blocked rows, with the list",
		`document.querySelectorAll("#log tr.logrow").length === 100 && `+
			`[...document.querySelectorAll("#log tr.logrow td:nth-child(4) .sub")].every(s => s.textContent === "blocked · stevenblack")`)
	setField(ctx, t, "f-source", "")
	setField(ctx, t, "f-name", "onerror")
	pageShows(ctx, t, "the hostile name, as text",
		`document.querySelectorAll("#log tr.logrow").length === 1 && `+pageText("#log tr.logrow td.name")+` === "<img src=x onerror=alert(1)>."`)

	// No blocking API here (404): the lists view says so, the header has
	// no pause button and the log's rows no Block button.
	pageShows(ctx, t, "no block buttons without blocking", `document.querySelectorAll("#log button").length === 0 && document.getElementById("pausebox").hidden`)
	do(ctx, t, chromedp.Click(chromedp.CSS(`#tabs button[data-view="lists"]`)))
	pageShows(ctx, t, "that there is no blocking", pageText("#lists-note")+` === "This nxdnsd has no blocking, so there are no lists." && `+
		pageText("#rules tbody")+` === "This nxdnsd has no blocking, so there are no custom rules." && document.getElementById("refresh-all").hidden`)

	// The clients, named from the history's rows.
	do(ctx, t, chromedp.Click(chromedp.CSS(`#tabs button[data-view="clients"]`)))
	pageShows(ctx, t, "the clients with their names and counts",
		pageText(`#clients tr[data-client="192.168.1.20"] td.name`)+` === "tablet192.168.1.20" && `+
			pageText(`#clients tr[data-client="192.168.1.64"] td.name`)+` === "192.168.1.64" && `+
			`[...document.querySelectorAll("#clients tr[data-client] td.num")].reduce((n, td) => n + Number(td.textContent.replace(/,/g, "")), 0) === 1561`)

	// On a phone: nothing scrolls sideways, in any view.
	do(ctx, t, chromedp.EmulateViewport(390, 844))
	for _, view := range []string{"clients", "log", "lists", "overview"} {
		do(ctx, t, chromedp.Click(chromedp.CSS(`#tabs button[data-view="`+view+`"]`)))
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](noSideways))
		if err != nil || !ok {
			t.Errorf("the %s view scrolls sideways at 390 px (%v)", view, err)
		}
	}
	pageShows(ctx, t, "the chart on the phone", `document.querySelectorAll("#chart svg g").length > 100`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.scrollTo(0, 0), true`)); err != nil {
		t.Fatal(err)
	}
	shot(ctx, t, "dashboard-phone.png")
	imgs, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("img").length`))
	if err != nil || imgs != 0 {
		t.Errorf("img elements on the page: %d (%v), want none: a name became markup", imgs, err)
	}
}

// setField sets a filter's value as a user would, with its change event.
func setField(ctx context.Context, t *testing.T, id, value string) {
	t.Helper()
	js := fmt.Sprintf(`(e => { e.value = %q; return e.dispatchEvent(new Event("change", {bubbles: true})); })(document.getElementById(%q))`, value, id)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil {
		t.Fatalf("setting %s: %v", id, err)
	}
}

// shot writes a PNG of the whole page to $NXDNSD_SCREENSHOT_DASHBOARD/name,
// or to a temporary directory.
func shot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()) // what shows: smaller than the whole page
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("NXDNSD_SCREENSHOT_DASHBOARD")
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}
