package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/miekg/dns"
	"golang.org/x/crypto/bcrypt"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// The dashboard with blocking (issue 29), logged in with a password so
// that every state change goes with the session cookie and passes the
// Origin check: a click on a query log row's Block makes the next query
// for that name blocked with EDE 15 "blocked by rule", and Allow on the
// blocked row undoes it; pause and resume from the header; a list whose
// server fails shows stale with its error after a click on Refresh; the
// clients view gives each client's groups. The history is off: the log is
// the recent queries (TestDashboardEndToEndInABrowser blocks from the
// history's log).
func TestDashboardBlockingInABrowser(t *testing.T) {
	ctx := headless(t)
	noDialogs(ctx, t)
	up := wiretest.NewServer(t, func(w *wiretest.Writer, q *dns.Msg) {
		wiretest.Answer(wiretest.A(q.Question[0].Name, 1))(w, q)
	})
	good := newListServer(t, "0.0.0.0 ads.example\n")
	broken := newListServer(t, "0.0.0.0 tracker.example\n||metrics.example^\n")
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
[blocking]
[[blocking.lists]]
name = "ads"
source = "`+good.URL+`/hosts.txt"
[[blocking.lists]]
name = "trackers"
source = "`+broken.URL+`/hosts.txt"
[[blocking.groups]]
name = "kids"
clients = ["127.0.0.2"]
lists = ["ads", "trackers"]
`+upstreamTOML(up.Addr), options{})
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.d.blocking.Refresh(rctx, ""); err != nil {
		t.Fatal(err)
	}
	broken.fail.Store(true) // its next fetch fails: the copy in force stays, stale

	query := func(name string) *dns.Msg {
		t.Helper()
		return ask(t, "udp", s.udp, withEDNS(wiretest.Query(name, dns.TypeA)))
	}
	for _, name := range []string{"www.example.com.", "cdn.example.net.", "www.example.com."} {
		if r := query(name); edeBlocked(r) != "" {
			t.Fatalf("%s blocked before any rule: %q", name, edeBlocked(r))
		}
	}
	askFrom(t, "udp", s.udp, "127.0.0.2", withEDNS(wiretest.Query("ads.example.", dns.TypeA)))

	base := "http://" + s.d.AdminAddr().String()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/?refresh=250#log")); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the login form", `location.pathname === "/login" && !!document.querySelector("#password")`)
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#password"), "open sesame"), chromedp.Click(chromedp.CSS("#submit"))); err != nil {
		t.Fatal(err)
	}
	waitVisible(ctx, t, "#upstreams")
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?refresh=250#log")); err != nil {
		t.Fatal(err)
	}

	// Search the log, then block the name from its row.
	waitFor(ctx, t, "the query log with block buttons", `document.querySelectorAll("#log tr.logrow button.block").length >= 3`)
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("f-name"), "www.example")); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the search's rows",
		`[...document.querySelectorAll("#log tr.logrow td.name")].map(td => td.textContent).join() === "www.example.com.,www.example.com."`)
	click(ctx, t, "#log tr.logrow button.block")
	waitFor(ctx, t, "that the name is blocked", textOf("#log-msg")+` === "Blocked www.example.com for every client (a custom rule; remove it under Lists)."`)
	r := query("www.example.com.")
	if got := edeBlocked(r); got != "blocked by rule" || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "0.0.0.0" {
		t.Fatalf("www.example.com. after the click: EDE %q, answers %v; want 0.0.0.0 with EDE 15 blocked by rule", got, r.Answer)
	}

	// The blocked query's row offers Allow, which wins over the rule.
	waitFor(ctx, t, "the blocked row, with Allow",
		`!!document.querySelector("#log tr.logrow button.allow") && `+textOf("#log tr.logrow td:nth-child(4) .sub")+` === "blocked · rule"`)
	click(ctx, t, "#log tr.logrow button.allow")
	waitFor(ctx, t, "that the name is allowed", textOf("#log-msg")+`.startsWith("Allowed www.example.com for every client")`)
	if r := query("www.example.com."); edeBlocked(r) != "" {
		t.Fatalf("www.example.com. after Allow: EDE %q, want the upstream's answer", edeBlocked(r))
	}

	// Pause and resume from the header.
	if r := askFrom(t, "udp", s.udp, "127.0.0.2", withEDNS(wiretest.Query("ads.example.", dns.TypeA))); edeBlocked(r) != "blocked by ads" {
		t.Fatalf("ads.example. for the kids: EDE %q, want blocked by ads", edeBlocked(r))
	}
	waitFor(ctx, t, "blocking on", textOf("#blocking-state")+` === "blocking on"`)
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("pause-for"), "0"), chromedp.Click(chromedp.ID("pause"))); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "blocking paused", textOf("#blocking-state")+` === "blocking paused" && `+textOf("#pause")+` === "Resume blocking"`)
	if r := askFrom(t, "udp", s.udp, "127.0.0.2", withEDNS(wiretest.Query("ads.example.", dns.TypeA))); edeBlocked(r) != "" {
		t.Fatalf("ads.example. while paused: EDE %q, want the upstream's answer", edeBlocked(r))
	}
	click(ctx, t, "#pause")
	waitFor(ctx, t, "blocking on again", textOf("#blocking-state")+` === "blocking on"`)
	if r := askFrom(t, "udp", s.udp, "127.0.0.2", withEDNS(wiretest.Query("ads.example.", dns.TypeA))); edeBlocked(r) != "blocked by ads" {
		t.Fatalf("ads.example. after resume: EDE %q, want blocked by ads", edeBlocked(r))
	}

	// The lists: a refresh of the broken one leaves it stale, with its error.
	click(ctx, t, `#tabs button[data-view="lists"]`)
	waitFor(ctx, t, "both lists ok", `[...document.querySelectorAll("#lists tr.list")].map(r => r.dataset.list + ":" + r.querySelector(".state .pill").textContent).join() === "ads:ok,trackers:ok"`)
	waitFor(ctx, t, "the custom rules added here", `[...document.querySelectorAll("#rules tr.rule")].map(r => r.textContent).join("|") === "www.example.comblockadded hereRemove|www.example.comallowadded hereRemove"`)
	click(ctx, t, `#lists tr[data-list="trackers"] button`)
	waitFor(ctx, t, "the broken list stale, with its error and its rules in force",
		textOf(`#lists tr[data-list="trackers"] .state .pill`)+` === "stale" && `+
			textOf(`#lists tr[data-list="trackers"] .stale-age`)+`.startsWith("the copy in force is ") && `+
			textOf(`#lists tr[data-list="trackers"] td.last-error .err`)+`.includes("500") && `+
			textOf(`#lists tr[data-list="trackers"] td:nth-child(3)`)+` === "2" && `+
			textOf(`#lists tr[data-list="ads"] .state .pill`)+` === "ok"`)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the error under the state on a phone", textOf(`#lists tr[data-list="trackers"] .narrow-error`)+`.includes("500")`)
	fits(ctx, t, "the lists")

	// The clients and their groups.
	click(ctx, t, `#tabs button[data-view="clients"]`)
	waitFor(ctx, t, "both clients with their groups",
		textOf(`#clients tr[data-client="127.0.0.1"] td:nth-child(2)`)+` === "default" && `+
			textOf(`#clients tr[data-client="127.0.0.2"] td:nth-child(2)`)+` === "kids"`)
	fits(ctx, t, "the clients")
	click(ctx, t, `#tabs button[data-view="log"]`)
	fits(ctx, t, "the query log")
	if body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`)); strings.Contains(body, "HTTP 4") {
		t.Errorf("the page shows a failed request:\n%s", body)
	}
}
