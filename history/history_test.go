package history_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/admin/admintest"
	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/history"
)

func open(t testing.TB, path string) *history.History {
	t.Helper()
	cfg := config.Default().History
	cfg.Path = path
	h, err := history.Open(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// openPostgres opens a history in the PostgreSQL database at url, as
// replica instance.
func openPostgres(t testing.TB, url, instance string) *history.History {
	t.Helper()
	cfg := config.Default().History
	cfg.Postgres, cfg.Instance = url, instance
	h, err := history.Open(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// api serves h's handlers on a loopback listener.
func api(t testing.TB, h *history.History) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

type rowJSON struct {
	TS         string  `json:"ts"`
	Instance   string  `json:"instance"`
	Client     *string `json:"client"`
	ClientName *string `json:"client_name"`
	Proto      *string `json:"proto"`
	QName      *string `json:"qname"`
	QType      *string `json:"qtype"`
	Rcode      string  `json:"rcode"`
	Source     *string `json:"source"`
	Upstream   *string `json:"upstream"`
	DurationMS float64 `json:"duration_ms"`
	List       *string `json:"list"`
}

type pageJSON struct {
	Rows []rowJSON `json:"rows"`
	Next *string   `json:"next"`
}

func get(t testing.TB, srv *httptest.Server, path string, q url.Values, out any) int {
	t.Helper()
	return fetch(t, srv, path, q, out, false)
}

// checked is get with the body validated against openapi.yaml.
func checked(t testing.TB, srv *httptest.Server, path string, q url.Values, out any) int {
	t.Helper()
	return fetch(t, srv, path, q, out, true)
}

func fetch(t testing.TB, srv *httptest.Server, path string, q url.Values, out any, validate bool) int {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusInternalServerError {
		t.Logf("%s: %s", path, body)
	}
	if resp.StatusCode == http.StatusOK {
		if validate {
			admintest.Require(t, path, resp.StatusCode, body)
		}
		if out != nil {
			if err := json.Unmarshal(body, out); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
	}
	return resp.StatusCode
}

func str(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

var t0 = time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)

// Rows of every source and proto value come back as they went in, newest
// first, with null for what a row does not have; a restart keeps them.
func TestRowsRoundTrip(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "history.db")
	h := open(t, path)
	sources := []string{"special", "local", "cache", "stale", "forward_zone", "pool", "blocked", "refused", ""}
	protos := []string{"udp", "tcp", "tls", "https"}
	now := time.Now().Truncate(time.Microsecond)
	var want []history.Row
	for i, src := range sources {
		r := history.Row{
			Time: now.Add(time.Duration(i) * time.Millisecond), Client: netip.MustParseAddr("192.168.1.20"),
			Proto: protos[i%len(protos)], QName: fmt.Sprintf("Host%d.Example.COM.", i), QType: 28,
			Rcode: i % 4, Source: src, Duration: time.Duration(i) * 1250 * time.Microsecond,
		}
		switch src {
		case "pool":
			r.Upstream = "quad9"
		case "forward_zone":
			r.Upstream = "192.168.1.1:53"
		case "blocked":
			r.List, r.ClientName = "oisd", "tablet"
		case "":
			r.QName, r.QType = "", 0
		}
		want = append(want, r)
		h.Record(r)
	}
	h.Sync()
	if h.Rows() != uint64(len(want)) || h.Dropped() != 0 {
		t.Fatalf("rows %d dropped %d, want %d and 0", h.Rows(), h.Dropped(), len(want))
	}
	check := func(h *history.History) {
		var page pageJSON
		if code := checked(t, api(t, h), "/api/history", url.Values{}, &page); code != 200 {
			t.Fatalf("status %d", code)
		}
		if len(page.Rows) != len(want) || page.Next != nil {
			t.Fatalf("%d rows, next %v; want %d, null", len(page.Rows), str(page.Next), len(want))
		}
		for i, got := range page.Rows {
			w := want[len(want)-1-i]
			ts, _ := time.Parse(time.RFC3339Nano, got.TS)
			wantName, wantType := "<null>", "<null>"
			if w.QName != "" {
				wantName, wantType = fmt.Sprintf("host%d.example.com.", len(want)-1-i), "AAAA"
			}
			wantOpt := func(s string) string {
				if s == "" {
					return "<null>"
				}
				return s
			}
			rcodes := []string{"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN"}
			if !ts.Equal(w.Time) || str(got.Client) != "192.168.1.20" || str(got.ClientName) != wantOpt(w.ClientName) ||
				str(got.Proto) != w.Proto || str(got.QName) != wantName || str(got.QType) != wantType ||
				got.Rcode != rcodes[w.Rcode] || str(got.Source) != wantOpt(w.Source) || str(got.Upstream) != wantOpt(w.Upstream) ||
				got.DurationMS != float64(w.Duration.Microseconds())/1000 || str(got.List) != wantOpt(w.List) {
				t.Errorf("row %d: got %+v\nwant %+v", i, got, w)
			}
		}
	}
	check(h)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	h = open(t, path)
	defer h.Close()
	check(h)
}

// An in-memory history (path "") answers its readers while the writer
// writes: memdb has no write-ahead log, so each side waits for the other
// briefly instead of failing "database is locked".
func TestMemoryReadsWhileWriting(t *testing.T) {
	t.Parallel()
	h := open(t, "")
	defer h.Close()
	srv := api(t, h)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10 {
			for j := range 300 {
				h.Record(history.Row{Time: time.Now(), QName: fmt.Sprintf("n%d-%d.example.", i, j), QType: 1, Source: "pool", Upstream: "quad9"})
			}
			h.Sync()
		}
	}()
	for i := 0; ; i++ {
		for _, p := range []string{"/api/history", "/api/stats/top", "/api/stats/timeline"} {
			if code := get(t, srv, p, url.Values{"name": {"example"}}, nil); code != 200 {
				t.Fatalf("%s while writing: %d", p, code)
			}
		}
		select {
		case <-done:
			if h.Rows() != 3000 || h.Dropped() != 0 {
				t.Errorf("rows %d, dropped %d; want 3000, 0", h.Rows(), h.Dropped())
			}
			return
		default:
		}
	}
}
