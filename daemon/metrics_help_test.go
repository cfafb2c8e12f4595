package daemon

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/metrics"
	"github.com/nxdnsd/nxdnsd/metrics/metricstest"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// Every family a running daemon's /metrics has — the pool's, the cache's,
// the forward zones', the probes', the library's runtime and process
// families, whatever is added next — is TYPEd and has a HELP text, and
// nxdnsd's own families have a text of nxdnsd's, not the library's
// fallback (spec section 7: every metric has a HELP text; issue 24). This
// scrapes the registry the daemon builds, over HTTP, not a metric set put
// together by the test, so a family the daemon exposes cannot be left out.
// Mutation check: deleting nxdns_forward_zone_queries_total from the help
// table, or writing a family with an empty HELP, fails it.
func TestDaemonExpositionHasHelpForEveryFamily(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer(wiretest.A("example.com.", 1)))
	lan := wiretest.NewServer(t, wiretest.Answer(wiretest.A("nas.lan.", 2)))
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
[server]
listen = ["127.0.0.1:0"]
[[upstreams]]
name = "up"
address = "udp://%s"
[[forward_zones]]
zone = "lan."
resolver = %q
[admin]
listen = "127.0.0.1:0"
[cache]
enabled = true
`, up.Addr, lan.Addr)))
	if err != nil {
		t.Fatal(err)
	}
	d := startConfig(t, cfg, nil, options{}).d

	// A query through the forward zone and one through the pool, so
	// their families have counted something.
	udp, _ := d.Addrs()
	for _, name := range []string{"nas.lan.", "example.com."} {
		c := &dns.Client{Timeout: 3 * time.Second}
		if r, _, err := c.Exchange(wiretest.Query(name, dns.TypeA), udp[0].String()); err != nil || r.Rcode != dns.RcodeSuccess {
			t.Fatalf("%s: %v, %v", name, r, err)
		}
	}

	resp, err := http.Get("http://" + d.AdminAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d, %v", resp.StatusCode, err)
	}

	// The spec's families are all there, so the checks below see them.
	fs, err := metricstest.Parse(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	if err := metricstest.CheckSpec(fs, []string{"up"}, []string{"lan."}); err != nil {
		t.Fatal(err)
	}

	// The raw lines, not the parser's view of them: a HELP line without a
	// text, or none at all, is what a scraper sees.
	helps, types := map[string]string{}, map[string]bool{}
	var order []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, text, _ := strings.Cut(rest, " ")
			helps[name] = strings.TrimSpace(text)
		} else if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, _, _ := strings.Cut(rest, " ")
			types[name] = true
			order = append(order, name)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	fallback := fallbackHelp(t)
	ours := 0
	for _, name := range order {
		text, ok := helps[name]
		switch {
		case !ok:
			t.Errorf("%s: TYPE without a HELP line", name)
		case text == "":
			t.Errorf("%s: empty HELP text", name)
		case strings.HasPrefix(name, "nxdns_") && text == fallback:
			t.Errorf("%s: HELP is the library's fallback, not a text of nxdnsd's (metrics/help.go)", name)
		}
		if strings.HasPrefix(name, "nxdns_") {
			ours++
		}
	}
	for name := range helps {
		if !types[name] {
			t.Errorf("%s: HELP without a TYPE line", name)
		}
	}
	if ours < len(metricstest.Spec) {
		t.Errorf("%d nxdns_ families TYPEd, want at least the spec's %d", ours, len(metricstest.Spec))
	}
}

// fallbackHelp is the HELP text the metrics package writes for a family
// its help table does not know, learnt the way a scraper would: from an
// exposition holding such a family.
func fallbackHelp(tb testing.TB) string {
	tb.Helper()
	const family = "not_a_family_of_anyone"
	m := metrics.New(metrics.Config{})
	m.RegisterWriter(func(w io.Writer) {
		fmt.Fprintf(w, "# HELP %s\n# TYPE %s gauge\n%s 1\n", family, family, family)
	})
	var b bytes.Buffer
	m.WritePrometheus(&b)
	for line := range strings.Lines(b.String()) {
		if text, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "# HELP "+family+" "); ok && text != "" {
			return text
		}
	}
	tb.Fatalf("no HELP text for %s in %q", family, b.String())
	return ""
}
