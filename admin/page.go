package admin

import (
	_ "embed"
	"net/http"
)

// statusPage is the status page: one HTML file with its CSS and
// JavaScript inline, so that it needs nothing but the admin API it reads
// (/api/health, /api/stats, /api/queries), and works without a network
// beyond nxdnsd.
//
//go:embed status.html
var statusPage []byte

// statusPagePolicy lets the page run its own inline script and style and
// fetch from its own origin, and nothing else: no asset from elsewhere
// can creep in, and no other site can frame it.
const statusPagePolicy = "default-src 'none'; connect-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func serveStatusPage(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache") // a new binary's page at the next load
	h.Set("Content-Security-Policy", statusPagePolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(statusPage)
}
