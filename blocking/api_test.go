package blocking

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/admin/admintest"
	"github.com/nxdnsd/nxdnsd/metrics/metricstest"
)

// apiServer serves m's API on a loopback listener.
func apiServer(tb testing.TB, m *Manager) *httptest.Server {
	tb.Helper()
	mux := http.NewServeMux()
	m.Register(mux)
	ts := httptest.NewServer(mux)
	tb.Cleanup(ts.Close)
	return ts
}

func call(tb testing.TB, ts *httptest.Server, method, path, body string, wantStatus int, out any) {
	tb.Helper()
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		tb.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, wantStatus)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		tb.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	if method == "GET" && resp.StatusCode == http.StatusOK {
		p, _, _ := strings.Cut(path, "?")
		admintest.Require(tb, p, resp.StatusCode, b) // the body is what openapi.yaml says
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			tb.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// GET /api/blocking, pause for a time and until resumed, resume: what the
// queries get follows, and so does /api/blocking/check.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)}
	path := writeList(t, t.TempDir(), "l.txt", "ads.example")
	m := startManager(t, Options{Config: blockingConfig(t, fmt.Sprintf("[[blocking.lists]]\nname = \"l\"\nsource = %q\n", path)), Now: clock.now})
	ts := apiServer(t, m)
	var st map[string]any
	call(t, ts, "GET", "/api/blocking", "", 200, &st)
	if fmt.Sprint(st) != "map[enabled:true paused:false paused_until:<nil>]" {
		t.Errorf("GET /api/blocking = %v", st)
	}
	call(t, ts, "POST", "/api/blocking/pause", `{"seconds":300}`, 200, &st)
	if st["paused"] != true || st["paused_until"] != "2026-12-01T18:05:00Z" {
		t.Errorf("paused for 300 s: %v", st)
	}
	if d := decide(t, m.Engine(), client1, "ads.example."); d.Blocked {
		t.Error("blocked while paused")
	}
	var check CheckResult
	call(t, ts, "GET", "/api/blocking/check?name=ads.example&client=127.0.0.1", "", 200, &check)
	if check.Blocked || !check.Paused {
		t.Errorf("check while paused: %+v", check)
	}
	clock.add(301 * time.Second)
	if d := decide(t, m.Engine(), client1, "ads.example."); !d.Blocked {
		t.Error("not blocked after the pause ended")
	}
	call(t, ts, "POST", "/api/blocking/pause", "", 200, &st)
	if st["paused"] != true || st["paused_until"] != nil {
		t.Errorf("paused until resumed: %v", st)
	}
	clock.add(1000 * time.Hour)
	if d := decide(t, m.Engine(), client1, "ads.example."); d.Blocked {
		t.Error("blocked while paused until resumed")
	}
	call(t, ts, "POST", "/api/blocking/resume", "", 200, &st)
	if st["paused"] != false {
		t.Errorf("resumed: %v", st)
	}
	if d := decide(t, m.Engine(), client1, "ads.example."); !d.Blocked {
		t.Error("not blocked after resume")
	}
	call(t, ts, "POST", "/api/blocking/pause", `{"seconds":-1}`, 400, nil)
	call(t, ts, "POST", "/api/blocking/pause", `{"secs":1}`, 400, nil)
}

// /api/blocking/check gives the decision, its list, rule and groups, in
// the spec's shape; /api/lists lists every list.
func TestCheckAndLists(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeList(t, dir, "l.txt", "||ads.example^", "bad line here")
	m := startManager(t, Options{Config: blockingConfig(t, fmt.Sprintf(`[[blocking.lists]]
name = "stevenblack"
source = %q
[[blocking.lists]]
name = "off"
source = "https://user:pw@example.org/off.txt?key=k"
enabled = false
[[blocking.groups]]
name = "default"
lists = ["stevenblack"]
`, path))})
	ts := apiServer(t, m)
	var raw map[string]any
	call(t, ts, "GET", "/api/blocking/check?name=www.ADS.example.&client=127.0.0.1", "", 200, &raw)
	b, _ := json.Marshal(raw)
	if want := `{"allowed":false,"blocked":true,"groups":["default"],"list":"stevenblack","paused":false,"rule":"||ads.example^"}`; string(b) != want {
		t.Errorf("check = %s, want %s", b, want)
	}
	call(t, ts, "GET", "/api/blocking/check?name=fine.example&client=::1", "", 200, &raw)
	if raw["blocked"] != false || raw["list"] != nil || raw["rule"] != nil {
		t.Errorf("check of an unblocked name = %v", raw)
	}
	call(t, ts, "GET", "/api/blocking/check?name=a..b&client=127.0.0.1", "", 400, nil)
	call(t, ts, "GET", "/api/blocking/check?name=a.b&client=nobody", "", 400, nil)

	var lists struct{ Lists []map[string]any }
	call(t, ts, "GET", "/api/lists", "", 200, &lists)
	if len(lists.Lists) != 2 {
		t.Fatalf("lists = %v", lists)
	}
	l0, l1 := lists.Lists[0], lists.Lists[1]
	if l0["name"] != "stevenblack" || l0["kind"] != "block" || l0["state"] != "ok" || l0["rules"] != 1.0 || l0["skipped"] != 1.0 ||
		l0["updated_at"] == nil || l0["checked_at"] == nil || l0["last_error"] != nil {
		t.Errorf("lists[0] = %v", l0)
	}
	if l1["state"] != "disabled" || l1["source"] != "https://example.org/off.txt" || l1["updated_at"] != nil {
		t.Errorf("lists[1] = %v (the source must lose its user info and query)", l1)
	}
	var refreshing map[string]any
	call(t, ts, "POST", "/api/lists/refresh?name=stevenblack", "", 202, &refreshing)
	call(t, ts, "POST", "/api/lists/refresh", "", 202, &refreshing)
	call(t, ts, "POST", "/api/lists/refresh?name=nope", "", 404, nil)
}

// Custom rules added through the API are in force at once, kept in
// state_dir across restarts, and removed by DELETE; the file's own rules
// are shown and cannot be deleted there.
func TestAPIRules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := blockingConfig(t, fmt.Sprintf("[blocking]\nstate_dir = %q\nblock = [\"file.example\"]\n", dir))
	m := startManager(t, Options{Config: cfg})
	ts := apiServer(t, m)
	call(t, ts, "POST", "/api/rules", `{"kind":"block","rule":"||api.example^"}`, 201, nil)
	call(t, ts, "POST", "/api/rules", `{"kind":"block","rule":"||api.example^"}`, 200, nil)
	call(t, ts, "POST", "/api/rules", `{"kind":"allow","rule":"ok.api.example"}`, 201, nil)
	call(t, ts, "POST", "/api/rules", `{"kind":"block","rule":"a b c"}`, 400, nil)
	call(t, ts, "POST", "/api/rules", `{"kind":"deny","rule":"x.example"}`, 400, nil)
	if d := decide(t, m.Engine(), client1, "x.api.example."); !d.Blocked || d.List != "rule" {
		t.Errorf("the API's rule is not in force: %+v", d)
	}
	if d := decide(t, m.Engine(), client1, "ok.api.example."); d.Blocked {
		t.Errorf("the API's allow rule is not in force: %+v", d)
	}
	m.Close()

	m2 := startManager(t, Options{Config: cfg})
	ts2 := apiServer(t, m2)
	var rules struct{ Rules []RuleStatus }
	call(t, ts2, "GET", "/api/rules", "", 200, &rules)
	want := []RuleStatus{{"block", "file.example", "config"}, {"block", "||api.example^", "api"}, {"allow", "ok.api.example", "api"}}
	if fmt.Sprint(rules.Rules) != fmt.Sprint(want) {
		t.Errorf("rules after a restart = %v, want %v", rules.Rules, want)
	}
	if d := decide(t, m2.Engine(), client1, "x.api.example."); !d.Blocked {
		t.Error("the API's rule is not in force after a restart")
	}
	call(t, ts2, "DELETE", "/api/rules", `{"kind":"block","rule":"||api.example^"}`, 200, nil)
	call(t, ts2, "DELETE", "/api/rules", `{"kind":"block","rule":"||api.example^"}`, 404, nil)
	call(t, ts2, "DELETE", "/api/rules", `{"kind":"block","rule":"file.example"}`, 409, nil)
	if d := decide(t, m2.Engine(), client1, "x.api.example."); d.Blocked {
		t.Error("the deleted rule is still in force")
	}
	if d := decide(t, m2.Engine(), client1, "file.example."); !d.Blocked {
		t.Error("the file's rule is not in force")
	}
}

// SIGHUP: a list whose source changed is loaded afresh, a file list is
// read again, an unchanged URL list keeps its copy (the very same set),
// a removed list goes, and groups take effect at once.
func TestReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var mu sync.Mutex
	requests := map[string]int{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests[r.URL.Path]++
		mu.Unlock()
		_, _ = w.Write(hostsBody(strings.Trim(r.URL.Path, "/"), 5))
	}))
	defer ts.Close()
	file := writeList(t, dir, "f.txt", "file1.example")
	src := func(bSource string, extra string) string {
		return fmt.Sprintf("[[blocking.lists]]\nname = \"a\"\nsource = %q\n[[blocking.lists]]\nname = \"b\"\nsource = %q\n[[blocking.lists]]\nname = \"f\"\nsource = %q\n%s",
			ts.URL+"/a", ts.URL+bSource, file, extra)
	}
	m := startManager(t, Options{Config: blockingConfig(t, src("/b", "[[blocking.lists]]\nname = \"gone\"\nsource = \""+ts.URL+"/gone\"\n"))})
	if err := m.Refresh(context.Background(), "a"); err != nil { // the start's fetches are done after this
		t.Fatal(err)
	}
	m.mu.Lock()
	aSet := m.lists[0].set
	m.mu.Unlock()
	writeList(t, dir, "f.txt", "file2.example")
	m.Reload(blockingConfig(t, src("/b2", `[[blocking.groups]]
name = "other"
clients = ["192.0.2.0/24"]
lists = ["a"]
`)))
	if err := m.Refresh(context.Background(), "f"); err != nil { // waits for the reload's fetches, queued before
		t.Fatal(err)
	}
	m.mu.Lock()
	keptA := m.lists[0].set == aSet
	n := len(m.lists)
	m.mu.Unlock()
	if !keptA || n != 3 {
		t.Errorf("after the reload: a kept its set %v, %d lists; want true, 3", keptA, n)
	}
	far := mustAddr("192.0.2.7")
	if d := decide(t, m.Engine(), far, "b20.example."); d.Blocked {
		t.Error("the group of the reload does not apply")
	}
	if d := decide(t, m.Engine(), client1, "b20.example."); d.Blocked {
		t.Error("the default group still has the reloaded lists (none configured: it holds none)")
	}
	m.Reload(blockingConfig(t, src("/b2", "")))
	if err := m.Refresh(context.Background(), "f"); err != nil {
		t.Fatal(err)
	}
	for name, blocked := range map[string]bool{"b20.example.": true, "b0.example.": false, "file2.example.": true, "file1.example.": false, "gone0.example.": false, "a0.example.": true} {
		if d := decide(t, m.Engine(), client1, name); d.Blocked != blocked {
			t.Errorf("after the reloads, %s blocked %v, want %v", name, d.Blocked, blocked)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if requests["/b2"] != 1 {
		t.Errorf("the changed source was fetched %d times, want 1 (%v)", requests["/b2"], requests)
	}
}

// The blocking families are in the exposition from start, with HELP texts
// and types, and pass Prometheus's linter; blocks are counted by list.
func TestMetrics(t *testing.T) {
	t.Parallel()
	path := writeList(t, t.TempDir(), "l.txt", "ads.example", "b.example")
	m := startManager(t, Options{Config: blockingConfig(t, fmt.Sprintf("[blocking]\nblock = [\"mine.example\"]\n[[blocking.lists]]\nname = \"l\"\nsource = %q\n", path))})
	decide(t, m.Engine(), client1, "ads.example.")
	decide(t, m.Engine(), client1, "ads.example.")
	decide(t, m.Engine(), client1, "mine.example.")
	decide(t, m.Engine(), client1, "fine.example.")
	if _, err := m.Check("ads.example", client1); err != nil { // not counted
		t.Fatal(err)
	}
	var b bytes.Buffer
	m.WritePrometheus(&b)
	problems, err := metricstest.Lint(b.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	fs, err := metricstest.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"nxdns_blocked_total", "nxdns_blocking_rules", "nxdns_blocking_list_fetches_total", "nxdns_blocking_list_age_seconds"} {
		if fs[f] == nil || fs[f].Help == "" {
			t.Errorf("%s missing or without HELP", f)
		}
	}
	for _, c := range []struct {
		family string
		labels []string
		want   float64
	}{
		{"nxdns_blocked_total", []string{"list", "l"}, 2},
		{"nxdns_blocked_total", []string{"list", "rule"}, 1},
		{"nxdns_blocking_rules", []string{"list", "l"}, 2},
		{"nxdns_blocking_rules", []string{"list", "rule"}, 1},
		{"nxdns_blocking_list_fetches_total", []string{"list", "l", "result", "updated"}, 1},
		{"nxdns_blocking_list_fetches_total", []string{"list", "l", "result", "failed"}, 0},
	} {
		if v, ok := fs.Value(c.family, c.labels...); !ok || v != c.want {
			t.Errorf("%s%v = %v %v, want %v", c.family, c.labels, v, ok, c.want)
		}
	}
}

// blocking.enabled = false loads nothing and blocks nothing; the lists say
// disabled.
func TestDisabled(t *testing.T) {
	t.Parallel()
	path := writeList(t, t.TempDir(), "l.txt", "ads.example")
	m := startManager(t, Options{Config: blockingConfig(t, fmt.Sprintf("[blocking]\nenabled = false\nblock = [\"x.example\"]\n[[blocking.lists]]\nname = \"l\"\nsource = %q\n", path))})
	if d := decide(t, m.Engine(), client1, "ads.example."); d.Blocked {
		t.Error("blocked while disabled")
	}
	if d := decide(t, m.Engine(), client1, "x.example."); d.Blocked {
		t.Error("a custom rule blocks while disabled")
	}
	if st := m.Lists()[0]; st.State != StateDisabled || st.Rules != 0 {
		t.Errorf("%+v, want disabled", st)
	}
}
