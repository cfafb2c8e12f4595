package admin

import (
	"bytes"
	"regexp"
	"testing"
)

// maxPageBytes is issue 29's bound on the dashboard: its HTML, script
// and style together, uncompressed, so that a phone on a weak Wi-Fi
// opens it at once and a small board serves it from memory.
const maxPageBytes = 150 << 10

// The page stays light: one file, all of it inline, at most 150 KB.
func TestDashboardIsLight(t *testing.T) {
	if n := len(statusPage); n > maxPageBytes {
		t.Errorf("the dashboard is %d bytes, more than %d", n, maxPageBytes)
	}
	t.Logf("the dashboard: %d bytes (at most %d)", len(statusPage), maxPageBytes)
}

// Everything the page needs is in it: no script, style, image or font
// from elsewhere, which its policy would refuse anyway, and no markup
// made from strings (every name from the network is put in as text).
func TestDashboardIsSelfContained(t *testing.T) {
	// The chart's SVG elements are made in SVG's namespace, a name and
	// not an address.
	page := bytes.ReplaceAll(statusPage, []byte(`"http://www.w3.org/2000/svg"`), nil)
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`<script[^>]+src=`),
		regexp.MustCompile(`<link[^>]+href=`),
		regexp.MustCompile(`(?i)https?://`),
		regexp.MustCompile(`@import|url\(`),
		regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(`),
	} {
		if loc := re.FindIndex(page); loc != nil {
			t.Errorf("the dashboard has %q (%s)", page[loc[0]:loc[1]], re)
		}
	}
}
