package daemon

import (
	"net/http"
	"testing"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// admin.hosts reaches the admin server: a name of it is served, another
// name gets 421 (spec section 13, issue 25).
func TestAdminHostsFromConfig(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer(wiretest.A("example.com.", 1)))
	s := startDaemon(t, "[admin]\nlisten = \"127.0.0.1:0\"\nhosts = [\"nxdns.lan\"]\n"+upstreamTOML(up.Addr))
	admin := "http://" + s.d.AdminAddr().String()
	for host, want := range map[string]int{
		"nxdns.lan:8053": http.StatusOK,
		"localhost":      http.StatusOK,
		"evil.example":   http.StatusMisdirectedRequest,
	} {
		req, err := http.NewRequest(http.MethodGet, admin+"/api/health", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /api/health, Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}
