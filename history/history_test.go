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

// Rows of the same microsecond are all kept, each moved to the next free
// one: ties within a batch, and rows whose microseconds an earlier
// batch's rows already hold (the writer then inserts them one by one).
func TestSameMicrosecondKeepsEveryRow(t *testing.T) {
	t.Parallel()
	h := open(t, filepath.Join(t.TempDir(), "history.db"))
	defer h.Close()
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	batches := [][]time.Duration{
		make([]time.Duration, 300), // 300 rows at at: at .. at+299 µs
		make([]time.Duration, 300), // the same again: at+300 µs ..
		{0, 150 * time.Microsecond, time.Millisecond, time.Millisecond, 2 * time.Millisecond}, // some taken, some free
	}
	for _, d := range []time.Duration{0, 1, 2, 3, 4, 5, 6, 7, 8, 9} {
		batches[2] = append(batches[2], 3*time.Millisecond+d*time.Microsecond)
	}
	total := 0
	for b, offsets := range batches {
		for i, off := range offsets {
			h.Record(history.Row{Time: at.Add(off), Client: netip.MustParseAddr("192.168.1.7"), Proto: "udp",
				QName: fmt.Sprintf("b%d-%d.example.", b, i), QType: 1, Source: "pool", Upstream: "quad9"})
		}
		h.Sync()
		total += len(offsets)
	}
	if h.Rows() != uint64(total) || h.Dropped() != 0 {
		t.Fatalf("rows %d dropped %d, want %d and 0", h.Rows(), h.Dropped(), total)
	}
	srv := api(t, h)
	names := map[string]bool{}
	stamps := map[string]bool{}
	q := url.Values{"limit": {"200"}}
	for {
		var page pageJSON
		if code := get(t, srv, "/api/history", q, &page); code != 200 {
			t.Fatalf("status %d", code)
		}
		for _, r := range page.Rows {
			if stamps[r.TS] {
				t.Errorf("two rows at %s", r.TS)
			}
			stamps[r.TS], names[str(r.QName)] = true, true
		}
		if page.Next == nil {
			break
		}
		q.Set("cursor", *page.Next)
	}
	if len(names) != total {
		t.Errorf("%d distinct rows read back, want %d", len(names), total)
	}
	for b, offsets := range batches {
		for i := range offsets {
			if n := fmt.Sprintf("b%d-%d.example.", b, i); !names[n] {
				t.Errorf("row %s missing", n)
			}
		}
	}
	// The counters (whole hours: read from them, not from the rows) count
	// every row once.
	span := url.Values{"from": {at.Truncate(time.Hour).Add(-time.Hour).Format(time.RFC3339)}, "to": {at.Truncate(time.Hour).Add(2 * time.Hour).Format(time.RFC3339)}}
	for _, what := range []string{"clients", "upstreams"} {
		var top []struct {
			Key   string `json:"key"`
			Count int64  `json:"count"`
		}
		if code := get(t, srv, "/api/stats/top", with(span, "what", what), &top); code != 200 {
			t.Fatalf("top %s: status %d", what, code)
		}
		if len(top) != 1 || top[0].Count != int64(total) {
			t.Errorf("top %s: %+v, want one with %d", what, top, total)
		}
	}
	var buckets []struct {
		Total, Forwarded int64
	}
	if code := get(t, srv, "/api/stats/timeline", with(span, "step", "3600"), &buckets); code != 200 {
		t.Fatalf("timeline: status %d", code)
	}
	var sum, fwd int64
	for _, b := range buckets {
		sum, fwd = sum+b.Total, fwd+b.Forwarded
	}
	if sum != int64(total) || fwd != int64(total) {
		t.Errorf("timeline: total %d forwarded %d, want %d", sum, fwd, total)
	}
}

// An in-memory history holds its size bound under a flood of names asked
// once each (every row a new name): deleting old rows frees their names
// too. Before chunks, the names dictionary was swept 5,000 ids a step
// after each deletion and a flood outgrew the bound several times over.
func TestMemoryBoundUnderOneOffNames(t *testing.T) {
	t.Parallel()
	cfg := config.Default().History
	cfg.Path, cfg.MaxMiB = "", 2
	h, err := history.Open(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	limit := cfg.MaxBytes()
	now := time.Now()
	biggest := int64(0)
	const rows = 150000
	for i := range rows {
		h.Record(history.Row{Time: now.Add(time.Duration(i) * time.Microsecond), Client: netip.MustParseAddr("192.0.2.1"),
			Proto: "udp", QName: fmt.Sprintf("n%d.flood-%d.example.", i, i*7919), QType: 1, Source: "pool", Upstream: "fake"})
		if i%5000 == 4999 {
			h.Sync()
			biggest = max(biggest, h.Bytes())
		}
	}
	h.Sync()
	if h.Rows()+h.Dropped() != rows {
		t.Fatalf("%d rows written and %d dropped, want %d in all", h.Rows(), h.Dropped(), rows)
	}
	// The bound is checked after each batch: a batch past it at most.
	if biggest > limit+limit/4 {
		t.Errorf("the database reached %d bytes, bound %d", biggest, limit)
	}
	t.Logf("at most %d bytes of %d", biggest, limit)
}
