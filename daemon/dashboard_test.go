package daemon

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/miekg/dns"
	"golang.org/x/crypto/bcrypt"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// hostileName is a query name that is markup: the page must show it as
// text, never run it.
const hostileName = "<img src=x onerror=alert(1)>."

// fitsJS is true when the page, as laid out now, needs no horizontal
// scrolling: neither the document nor any of its tables' boxes is wider
// than what shows.
const fitsJS = `document.documentElement.scrollWidth <= window.innerWidth &&
	[...document.querySelectorAll(".scroll")].every(e => e.offsetParent === null || e.scrollWidth <= e.clientWidth + 1)`

// widthsJS says, for a failure, how wide the document and each table box
// are.
const widthsJS = `"document " + document.documentElement.scrollWidth + " of " + window.innerWidth + "; " +
	[...document.querySelectorAll(".scroll")].filter(e => e.offsetParent !== null).map(e => (e.querySelector("table") || {}).id + " " + e.scrollWidth + " of " + e.clientWidth).join(", ")`

// noDialogs fails the test if the page ever opens a dialog (an alert
// that markup from the network ran).
func noDialogs(ctx context.Context, t *testing.T) *atomic.Bool {
	t.Helper()
	var opened atomic.Bool
	err := chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			opened.Store(true)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if opened.Load() {
			t.Error("the page opened a dialog: markup from the network ran")
		}
	})
	return &opened
}

// The dashboard without a history (issue 29; what a configuration or a
// build without one shows): with a password it opens after the login;
// every view fits a 390-pixel-wide screen; a query name that is markup,
// sent over UDP, shows as text in the recent queries and in the query
// log, which searches the recent queries and says why; the views that
// need the history say so instead of breaking the page, and the lists
// view says that no list is configured.
func TestDashboardWithoutHistoryInABrowser(t *testing.T) {
	ctx := headless(t)
	opened := noDialogs(ctx, t)
	up := wiretest.NewServer(t, func(w *wiretest.Writer, q *dns.Msg) {
		wiretest.Answer(wiretest.A(q.Question[0].Name, 1))(w, q)
	})
	hash, err := bcrypt.GenerateFromPassword([]byte("open sesame"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	s := runDaemon(t, `[server]
listen = ["127.0.0.1:0"]
[admin]
listen = "127.0.0.1:0"
password_hash = "`+string(hash)+`"
[history]
enabled = false
[[upstreams]]
name = "a-primary-upstream-with-a-long-name"
address = "udp://`+up.Addr+`"
`, options{version: "1.2.3-test"})
	names := []string{
		"example.com.",
		"a-label-of-sixty-characters-that-does-not-break-anywhere-xyz0.example.org.",
		hostileName,
	}
	for _, name := range names {
		ask(t, "udp", s.udp, wiretest.Query(name, dns.TypeA))
	}

	base := "http://" + s.d.AdminAddr().String()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/?refresh=250")); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the login form", `location.pathname === "/login" && !!document.querySelector("#password")`)
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#password"), "open sesame"), chromedp.Click(chromedp.CSS("#submit"))); err != nil {
		t.Fatal(err)
	}
	waitVisible(ctx, t, "#upstreams")
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?refresh=250")); err != nil {
		t.Fatal(err)
	}

	// The hostile name is text, in the recent queries.
	waitFor(ctx, t, "the three queries, the hostile name as text",
		`[...document.querySelectorAll("#queries tr.query td.name")].map(td => td.textContent).join(" ").includes("<img") && `+
			`document.querySelectorAll("#queries tr.query").length === 3`)
	waitFor(ctx, t, "that the history is missing, said in the overview",
		textOf("#chart-note")+`.includes("history") && `+textOf("#top-note")+`.includes("history") && `+textOf("#share-blocked")+` === "–"`)
	fits(ctx, t, "the overview")

	// The query log searches the recent queries, saying why.
	click(ctx, t, `#tabs button[data-view="log"]`)
	waitFor(ctx, t, "the query log of the recent queries",
		textOf("#log-note")+`.includes("Only the 3 most recent queries are searched") && document.querySelectorAll("#log tr.logrow").length === 3`)
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("f-name"), "onerror")); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the search for the hostile name",
		`[...document.querySelectorAll("#log tr.logrow td.name")].map(td => td.textContent).join() !== "" && `+
			`[...document.querySelectorAll("#log tr.logrow td.name")].every(td => td.textContent.startsWith("<img"))`)
	fits(ctx, t, "the query log")

	click(ctx, t, `#tabs button[data-view="lists"]`)
	waitFor(ctx, t, "the lists view, saying there is no list to show",
		`(`+textOf("#lists-note")+` !== "" || `+textOf("#lists tbody")+` === "No list is configured ([[blocking.lists]]).") && `+textOf("#rules tbody")+` !== ""`)
	fits(ctx, t, "the lists")

	// A link to a view (or an edited address) opens it.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(location.hash = "#clients", true)`)); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the client of the recent queries",
		textOf("#clients-note")+`.includes("history") && `+textOf(`#clients tr[data-client="127.0.0.1"] td.num`)+` === "3"`)
	fits(ctx, t, "the clients")

	imgs, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("img").length`))
	if err != nil {
		t.Fatal(err)
	}
	if imgs != 0 || opened.Load() {
		t.Errorf("the hostile name became markup: %d img elements, a dialog opened: %v", imgs, opened.Load())
	}
}

// fits fails the test when the page, at its current width, scrolls
// sideways.
func fits(ctx context.Context, t *testing.T, what string) {
	t.Helper()
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fitsJS))
	if err != nil {
		t.Fatal(err)
	}
	widths, err := chromedp.Run(ctx, chromedp.Evaluate[string](widthsJS))
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Errorf("%s scrolls sideways: %s", what, widths)
	}
}

func click(ctx context.Context, t *testing.T, sel string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		t.Fatalf("clicking %s: %v", sel, err)
	}
}

// screenshot writes a PNG of the whole page to the file env names, or to
// a temporary one.
func screenshot(ctx context.Context, t *testing.T, env, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := os.Getenv(env)
	if path == "" {
		path = filepath.Join(t.TempDir(), name)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}
