package daemon

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/miekg/dns"
	"golang.org/x/crypto/bcrypt"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// With admin.password_hash, a browser at / lands on the login form; a
// wrong password says so, the right one opens the status page, and once
// the session ends the page goes back to the form by itself. This runs
// the form's script under the page's policy (form-action 'none': the
// form is sent by fetch).
func TestLoginPageInABrowser(t *testing.T) {
	ctx := headless(t)
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
[[upstreams]]
name = "primary"
address = "udp://`+up.Addr+`"
`, options{})

	base := "http://" + s.d.AdminAddr().String()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the login form", `location.pathname === "/login" && !!document.querySelector("#password")`)

	login := func(pw string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#password"), pw)); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#submit"))); err != nil {
			t.Fatal(err)
		}
	}
	login("open sesame?")
	waitFor(ctx, t, "that the password is wrong", textOf("#error")+` === "Wrong password."`)
	login("open sesame")
	// The form replaces the page: a poll would be cut short by the
	// navigation, a wait for an element of the new page is not.
	waitVisible(ctx, t, "#upstreams")
	waitFor(ctx, t, "the status page with its upstream",
		`location.pathname === "/" && [...document.querySelectorAll("#upstreams tbody tr")].map(r => r.dataset.upstream).join() === "primary"`)

	// The session ends (here by a logout from the page's own origin): the
	// next refresh meets 401 and goes back to the form.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?refresh=250")); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the status page again", `document.querySelectorAll("#upstreams tbody tr").length === 1`)
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch("/api/auth/logout", {method: "POST"}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	if err != nil || status != 204 {
		t.Fatalf("the logout from the page: %d, %v", status, err)
	}
	waitVisible(ctx, t, "#password")
	waitFor(ctx, t, "the login form after the logout", `location.pathname === "/login" && !!document.querySelector("#password")`)

	// The page's own button logs out.
	login("open sesame")
	waitVisible(ctx, t, "#logout")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#logout"))); err != nil {
		t.Fatal(err)
	}
	waitVisible(ctx, t, "#password")
	// The logout removed the cookie: / sends the browser back to the
	// form. (That nxdnsd ends the session itself, for a client that
	// keeps the cookie, is tested in package admin.)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the login form for the old cookie", `location.pathname === "/login"`)
	cookies, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`))
	if err != nil || cookies != "" {
		t.Errorf("cookies the page's script can read: %q (%v), want none: the session cookie is HttpOnly", cookies, err)
	}
}

// waitVisible waits until the page, whichever it has become, shows an
// element matching sel.
func waitVisible(ctx context.Context, t *testing.T, sel string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		t.Fatalf("the page never showed %s: %v", sel, err)
	}
}
