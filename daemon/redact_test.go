package daemon

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// A DoH upstream's path, often an account's secret, is shown nowhere: not
// in /api/health's name, address or last error, not in /metrics, not in the
// query log (issue 16). Before the fix all of them showed the whole URL.
func TestDoHPathRedacted(t *testing.T) {
	const secret = "abc123secret"
	ca := wiretest.NewCA(t)
	srv := wiretest.NewHTTPSServer(t, ca.Certificate(t, wiretest.TLSName), http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		http.Error(rw, "down", http.StatusBadGateway)
	}))
	_, port, _ := net.SplitHostPort(srv.Addr)
	s := startObserved(t, fmt.Sprintf(`
[[upstreams]]
address = "https://%s:%s/%s"
ip = "127.0.0.1"
ca_file = %q
`, wiretest.TLSName, port, secret, ca.WriteFile(t)), true, options{})

	if r := ask(t, "udp", s.udp, wiretest.Query("example.com.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s, want SERVFAIL from a failing upstream", dns.RcodeToString[r.Rcode])
	}
	_, h := s.health(t)
	u := h.Upstreams[0]
	want := fmt.Sprintf("https://%s:%s/…", wiretest.TLSName, port)
	if u.Name != want || u.Address != want || u.LastError == nil || strings.Contains(*u.LastError, secret) {
		t.Errorf("/api/health shows name %q, address %q, last error %v; want %q and no path", u.Name, u.Address, *u.LastError, want)
	}
	for _, path := range []string{"/api/health", "/metrics"} {
		if _, body := s.get(t, path); strings.Contains(string(body), secret) {
			t.Errorf("%s shows the path", path)
		}
	}
	s.d.qlog.Sync()
	log, err := os.ReadFile(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), secret) || !strings.Contains(string(log), want) {
		t.Errorf("the query log shows the path, or not the upstream:\n%s", log)
	}
}
