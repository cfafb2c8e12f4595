package blocking

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/metrics/metricstest"
)

// hostsBody is a hosts list of n names, prefix0.example and on.
func hostsBody(prefix string, n int) []byte {
	var b bytes.Buffer
	b.WriteString("# a hosts list\n")
	for i := range n {
		fmt.Fprintf(&b, "0.0.0.0 %s%d.example\n", prefix, i)
	}
	return b.Bytes()
}

// scripted is a list server that answers each request with the next step
// of its script, and records the requests' conditional headers.
type scripted struct {
	mu    sync.Mutex
	steps []http.HandlerFunc
	seen  []http.Header
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.seen = append(s.seen, r.Header.Clone())
	var step http.HandlerFunc
	if len(s.steps) > 0 {
		step, s.steps = s.steps[0], s.steps[1:]
	}
	s.mu.Unlock()
	if step == nil {
		http.Error(w, "script over", http.StatusTeapot)
		return
	}
	step(w, r)
}

func (s *scripted) header(i int, key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.seen) {
		return "(no request)"
	}
	return s.seen[i].Get(key)
}

func serveBody(body []byte, etag string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if etag != "" {
			w.Header().Set("ETag", etag)
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}
}

func serveStatus(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}

// serveTruncated declares the whole body and sends half of it: the
// server then closes the connection.
func serveTruncated(body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body[:len(body)/2])
	}
}

func urlList(name, url string) string {
	return fmt.Sprintf("[[blocking.lists]]\nname = %q\nsource = %q\n", name, url)
}

func refresh(tb testing.TB, m *Manager, name string) ListStatus {
	tb.Helper()
	if err := m.Refresh(context.Background(), name); err != nil {
		tb.Fatal(err)
	}
	for _, st := range m.Lists() {
		if st.Name == name {
			return st
		}
	}
	tb.Fatalf("no list %q", name)
	return ListStatus{}
}

// fetches reads nxdns_blocking_list_fetches_total{list,result}.
func fetches(tb testing.TB, m *Manager, list, result string) float64 {
	tb.Helper()
	var b bytes.Buffer
	m.WritePrometheus(&b)
	fs, err := metricstest.Parse(&b)
	if err != nil {
		tb.Fatal(err)
	}
	v, ok := fs.Value("nxdns_blocking_list_fetches_total", "list", list, "result", result)
	if !ok {
		tb.Fatalf("no nxdns_blocking_list_fetches_total{list=%q,result=%q}", list, result)
	}
	return v
}

// A list served, then 304, then 500, then a truncated body, then a body
// one tenth the size: the rules in force never drop, each failure keeps
// the copy in force and says so (stale, the error, counted), and the
// smaller body is taken when it comes a second time in a row.
func TestRefreshKeepsTheCopyInForce(t *testing.T) {
	t.Parallel()
	full, other, tenth := hostsBody("a", 1000), hostsBody("b", 1000), hostsBody("c", 100)
	srv := &scripted{steps: []http.HandlerFunc{
		serveBody(full, `"v1"`),
		func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("If-None-Match") == `"v1"` {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			serveBody(full, `"v1"`)(w, r)
		},
		serveStatus(http.StatusInternalServerError),
		serveTruncated(other),
		serveBody(tenth, ""),
		serveBody(tenth, ""),
	}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	m := NewManager(Options{Config: blockingConfig(t, urlList("l", ts.URL+"/hosts.txt"))})
	defer m.Close()
	if st := m.Lists()[0]; st.State != StateLoading || st.Rules != 0 {
		t.Fatalf("before any fetch: %+v, want loading", st)
	}
	m.Start(context.Background()) // fetches once at start: the first step
	inForce := func(step string, wantRules int, wantState string) {
		t.Helper()
		st := m.Lists()[0]
		if st.Rules != wantRules || st.State != wantState {
			t.Errorf("after %s: %d rules, state %s (error %v); want %d, %s", step, st.Rules, st.State, deref(st.LastError), wantRules, wantState)
		}
		if d := decide(t, m.Engine(), client1, "a999.example."); wantRules == 1000 && (!d.Blocked || d.List != "l") {
			t.Errorf("after %s: a999.example is not blocked by l: %+v", step, d)
		}
		if d := decide(t, m.Engine(), client1, "b1.example."); d.Blocked {
			t.Errorf("after %s: a name of the truncated body is in force", step)
		}
	}
	refresh(t, m, "l") // waits for the start's fetch, then fetches again: the 304
	inForce("200 then 304", 1000, StateOK)
	if got := srv.header(1, "If-None-Match"); got != `"v1"` {
		t.Errorf("second request's If-None-Match = %q, want the ETag", got)
	}
	if got := srv.header(0, "Accept-Encoding"); !strings.Contains(got, "gzip") {
		t.Errorf("Accept-Encoding = %q, want gzip", got)
	}
	st := refresh(t, m, "l")
	inForce("500", 1000, StateStale)
	if st.LastError == nil || !strings.Contains(*st.LastError, "500") || st.AgeS == nil || st.UpdatedAt == nil || !st.CheckedAt.After(*st.UpdatedAt) {
		t.Errorf("stale list: %+v; want the error, the age and checked_at after updated_at", st)
	}
	refresh(t, m, "l")
	inForce("a truncated body", 1000, StateStale)
	st = refresh(t, m, "l")
	inForce("a body a tenth the size", 1000, StateStale)
	if st.LastError == nil || !strings.Contains(*st.LastError, "fewer than half") {
		t.Errorf("the tenth body's error = %v, want fewer than half", deref(st.LastError))
	}
	st = refresh(t, m, "l")
	if st.Rules != 100 || st.State != StateOK || st.LastError != nil {
		t.Errorf("the same smaller body twice: %+v, want its 100 rules in force", st)
	}
	if d := decide(t, m.Engine(), client1, "c99.example."); !d.Blocked {
		t.Error("the smaller body's names are not in force")
	}
	for result, want := range map[string]float64{"updated": 2, "unchanged": 1, "failed": 3} {
		if got := fetches(t, m, "l", result); got != want {
			t.Errorf("fetches{result=%q} = %v, want %v", result, got, want)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// The last good copy in state_dir is in force when Start returns, before
// any download has finished: the server holds its answer until the test
// has looked.
func TestStateCopyServedAtStart(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	arrived := make(chan struct{}, 4)
	var hold atomic.Bool // set once the first Manager is done
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hold.Load() {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		serveBody(hostsBody("a", 10), `"v1"`)(w, r)
	}))
	defer ts.Close()
	defer close(release)
	dir := t.TempDir()
	cfg := blockingConfig(t, fmt.Sprintf("[blocking]\nstate_dir = %q\n", dir)+urlList("l", ts.URL+"/l.txt?token=secret"))

	m1 := startManager(t, Options{Config: cfg})
	if st := refresh(t, m1, "l"); st.State != StateOK || st.Rules != 10 {
		t.Fatalf("the first fetch: %+v", st)
	}
	m1.Close()
	hold.Store(true)

	m2 := NewManager(Options{Config: cfg})
	defer m2.Close()
	m2.Start(context.Background())
	if d := decide(t, m2.Engine(), client1, "a3.example."); !d.Blocked {
		t.Error("the copy in state_dir is not in force at start")
	}
	st := m2.Lists()[0]
	if st.State != StateOK || st.Rules != 10 || st.UpdatedAt == nil || st.CheckedAt != nil {
		t.Errorf("at start: %+v; want the copy's 10 rules, its updated_at, no check yet", st)
	}
	if strings.Contains(st.Source, "secret") {
		t.Errorf("source %q shows the URL's query", st.Source)
	}
	<-arrived // the background fetch did start
}

// A body over max_list_mib is refused, counted decompressed: a small
// gzip body that inflates past the cap is refused too.
func TestBodyOverMaxListMiB(t *testing.T) {
	t.Parallel()
	big := hostsBody("big", 60000) // about 1.3 MiB
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gz" {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			_, _ = zw.Write(big)
			_ = zw.Close()
			return
		}
		_, _ = w.Write(big)
	}))
	defer ts.Close()
	m := startManager(t, Options{Config: blockingConfig(t, "[blocking]\nmax_list_mib = 1\n"+urlList("plain", ts.URL+"/plain")+urlList("gz", ts.URL+"/gz"))})
	for _, name := range []string{"plain", "gz"} {
		st := refresh(t, m, name)
		if st.Rules != 0 || st.State != StateLoading || st.LastError == nil || !strings.Contains(*st.LastError, "max_list_mib") {
			t.Errorf("%s: %+v (error %s); want refused for max_list_mib", name, st, deref(st.LastError))
		}
		if got := fetches(t, m, name, "failed"); got != 2 {
			t.Errorf("%s: fetches{failed} = %v, want 2 (start and refresh)", name, got)
		}
	}
}

// A gzip-encoded body is accepted and decoded.
func TestGzipBody(t *testing.T) {
	t.Parallel()
	body := hostsBody("z", 500)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			http.Error(w, "gzip only", http.StatusNotAcceptable)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = zw.Write(body)
		_ = zw.Close()
	}))
	defer ts.Close()
	m := startManager(t, Options{Config: blockingConfig(t, urlList("z", ts.URL))})
	if st := refresh(t, m, "z"); st.Rules != 500 || st.State != StateOK {
		t.Errorf("gzip list: %+v (error %s), want 500 rules", st, deref(st.LastError))
	}
}

// Five redirects are followed, a sixth is refused.
func TestRedirectsBounded(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/r/"))
		if n > 0 {
			http.Redirect(w, r, "/r/"+strconv.Itoa(n-1), http.StatusFound)
			return
		}
		_, _ = w.Write(hostsBody("r", 3))
	}))
	defer ts.Close()
	m := startManager(t, Options{Config: blockingConfig(t, urlList("five", ts.URL+"/r/5")+urlList("six", ts.URL+"/r/6"))})
	if st := refresh(t, m, "five"); st.Rules != 3 {
		t.Errorf("five redirects: %+v (error %s), want the list", st, deref(st.LastError))
	}
	if st := refresh(t, m, "six"); st.Rules != 0 || st.LastError == nil || !strings.Contains(*st.LastError, "redirects") {
		t.Errorf("six redirects: %+v (error %s), want refused", st, deref(st.LastError))
	}
}

// Without the daemon's dialer, a list host named by name is not resolved
// at all (never by the system resolver): the fetch fails and says why.
func TestNoSystemResolver(t *testing.T) {
	t.Parallel()
	m := startManager(t, Options{Config: blockingConfig(t, urlList("named", "http://lists.invalid/l.txt"))})
	st := refresh(t, m, "named")
	if st.LastError == nil || !strings.Contains(*st.LastError, "no resolver") {
		t.Errorf("%+v (error %s), want no resolver", st, deref(st.LastError))
	}
}

// The injected dialer is what reaches the list host: the daemon resolves
// through its own pool there.
func TestInjectedDialer(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(serveBody(hostsBody("d", 2), ""))
	defer ts.Close()
	var mu sync.Mutex
	var dialled []string
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialled = append(dialled, addr)
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, ts.Listener.Addr().String())
	}
	m := startManager(t, Options{Config: blockingConfig(t, urlList("d", "http://lists.example:8080/d.txt")), DialContext: dial})
	if st := refresh(t, m, "d"); st.Rules != 2 {
		t.Errorf("%+v (error %s)", st, deref(st.LastError))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialled) == 0 || dialled[0] != "lists.example:8080" {
		t.Errorf("dialled %q, want lists.example:8080", dialled)
	}
}

// A state_dir that cannot hold the copy does not keep a list from being
// fetched and put in force: only the copy for the next start is lost.
func TestUnwritableStateDir(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(serveBody(hostsBody("w", 3), ""))
	defer ts.Close()
	notADir := writeList(t, t.TempDir(), "file", "x")
	m := startManager(t, Options{Config: blockingConfig(t, fmt.Sprintf("[blocking]\nstate_dir = %q\n", notADir)+urlList("w", ts.URL))})
	if st := refresh(t, m, "w"); st.Rules != 3 || st.State != StateOK {
		t.Errorf("%+v (error %s), want the list in force", st, deref(st.LastError))
	}
}

// A failed fetch is retried after a minute, then two, four…, never later
// than refresh_h; a success goes back to refresh_h. Before, a list whose
// host was down at boot waited a whole refresh_h with no copy.
func TestRetryDelay(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	for _, c := range []struct {
		failures int
		want     time.Duration
	}{{0, day}, {1, time.Minute}, {2, 2 * time.Minute}, {5, 16 * time.Minute}, {11, 1024 * time.Minute}, {12, day}, {1000, day}} {
		if got := retryDelay(c.failures, day); got != c.want {
			t.Errorf("retryDelay(%d) = %v, want %v", c.failures, got, c.want)
		}
	}
	if got := retryDelay(3, time.Hour); got != 4*time.Minute {
		t.Errorf("retryDelay(3, 1h) = %v", got)
	}
	// The list's own count: a failure, then a success.
	ts := httptest.NewServer(&scripted{steps: []http.HandlerFunc{serveStatus(500), serveStatus(500), serveBody(hostsBody("r", 2), "")}})
	defer ts.Close()
	m := startManager(t, Options{Config: blockingConfig(t, urlList("r", ts.URL))})
	refresh(t, m, "r") // the start's fetch and this one failed
	m.mu.Lock()
	next, checked := m.lists[0].nextCheck(day), m.lists[0].checkedAt
	m.mu.Unlock()
	if next.Sub(checked) != 2*time.Minute {
		t.Errorf("after two failures the next check is %v after the last, want 2m", next.Sub(checked))
	}
	refresh(t, m, "r")
	m.mu.Lock()
	next, checked = m.lists[0].nextCheck(day), m.lists[0].checkedAt
	m.mu.Unlock()
	if next.Sub(checked) != day {
		t.Errorf("after a success the next check is %v after the last, want refresh_h", next.Sub(checked))
	}
}
