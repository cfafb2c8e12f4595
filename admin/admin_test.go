package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/admin/admintest"
	"github.com/nxdnsd/nxdnsd/metrics"
	"github.com/nxdnsd/nxdnsd/metrics/metricstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	t0      = time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	refused = errors.New("upstream refused the query")
)

func TestHealthStatusRules(t *testing.T) {
	healthy := actors.Status{Name: "a", Address: "udp://192.0.2.1:53", Slots: 4}
	backoff := actors.Status{Name: "b", Address: "udp://192.0.2.2:53", Slots: 4, InBackoff: true,
		BackoffUntil: t0.Add(time.Second), Failures: 3, ConsecutiveFailures: 3, LastError: refused, LastErrorAt: t0}
	probing := backoff
	probing.BackoffUntil = t0.Add(-time.Second) // the backoff ended; its probe is running
	probing.LastProbeAt, probing.LastProbeOutcome = t0.Add(-3*time.Second), actors.OutcomeExpired
	for _, tc := range []struct {
		name   string
		st     []actors.Status
		status string
		code   int
	}{
		{"all healthy", []actors.Status{healthy, healthy}, StatusOK, 200},
		{"some in backoff", []actors.Status{backoff, healthy}, StatusDegraded, 200},
		{"all in backoff", []actors.Status{backoff, backoff}, StatusDown, 503},
		{"a probe running counts as backoff", []actors.Status{probing}, StatusDown, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, code := HealthOf(tc.st, actors.Network{})
			if h.Status != tc.status || code != tc.code {
				t.Errorf("status %s (%d), want %s (%d)", h.Status, code, tc.status, tc.code)
			}
			if want := map[bool]string{true: ReasonUpstreams}[tc.status == StatusDown]; h.Reason != want {
				t.Errorf("reason %q, want %q", h.Reason, want)
			}
			body, err := json.Marshal(h)
			if err != nil {
				t.Fatal(err)
			}
			admintest.RequireHealth(t, code, body)
		})
	}

	h, _ := HealthOf([]actors.Status{healthy, backoff}, actors.Network{})
	a, b := h.Upstreams[0], h.Upstreams[1]
	if a.State != StateHealthy || a.BackoffUntil != nil || a.LastError != nil || a.LastErrorAt != nil {
		t.Errorf("healthy upstream: %+v", a)
	}
	if b.State != StateBackoff || !b.BackoffUntil.Equal(t0.Add(time.Second)) || *b.LastError != refused.Error() || !b.LastErrorAt.Equal(t0) {
		t.Errorf("upstream in backoff: %+v", b)
	}
	if a.SRTTMs != nil || a.RTTVarMs != nil || a.LastProbeAt != nil || a.LastProbeOutcome != nil {
		t.Errorf("before any answer or probe: srtt %v rttvar %v last probe %v %v, want null", a.SRTTMs, a.RTTVarMs, a.LastProbeAt, a.LastProbeOutcome)
	}
}

// The smoothed RTT is in milliseconds to the microsecond, and the last
// probe is when and how it ended; both validate against openapi.yaml.
func TestHealthShowsRTTAndLastProbe(t *testing.T) {
	st := actors.Status{Name: "a", Address: "udp://192.0.2.1:53", Slots: 4,
		RTT:         actors.RTT{SRTT: 11250 * time.Microsecond, RTTVar: 6250*time.Microsecond + 400, Samples: 2},
		LastProbeAt: t0.Add(12 * time.Millisecond).In(time.FixedZone("CET", 3600)), LastProbeOutcome: actors.OutcomePeerFault}
	h, code := HealthOf([]actors.Status{st}, actors.Network{})
	u := h.Upstreams[0]
	if u.SRTTMs == nil || *u.SRTTMs != 11.25 || u.RTTVarMs == nil || *u.RTTVarMs != 6.25 {
		t.Errorf("srtt %v rttvar %v, want 11.25 and 6.25 ms", u.SRTTMs, u.RTTVarMs)
	}
	if u.LastProbeAt == nil || !u.LastProbeAt.Equal(t0.Add(12*time.Millisecond)) || u.LastProbeAt.Location() != time.UTC ||
		u.LastProbeOutcome == nil || *u.LastProbeOutcome != "peer_fault" {
		t.Errorf("last probe %v %v, want 18:00:00.012 UTC, peer_fault", u.LastProbeAt, u.LastProbeOutcome)
	}
	body, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	admintest.RequireHealth(t, code, body)
	if !strings.Contains(string(body), `"srtt_ms":11.25,"rttvar_ms":6.25,"last_probe_at":"2026-11-29T18:00:00.012Z","last_probe_outcome":"peer_fault"`) {
		t.Errorf("body %s", body)
	}
}

func TestSchemaRefusesWhatItDoesNotDescribe(t *testing.T) {
	good := `{"status":"ok","last_local_error":null,"last_local_error_at":null,"upstreams":[{"name":"a","address":"udp://192.0.2.1:53","state":"healthy","slots":1,"in_flight":0,` +
		`"successes":0,"failures":0,"consecutive_failures":0,"backoff_until":null,"last_error":null,"last_error_at":null,` +
		`"srtt_ms":null,"rttvar_ms":null,"last_probe_at":null,"last_probe_outcome":null}]}`
	if err := admintest.CheckHealth(200, []byte(good)); err != nil {
		t.Fatalf("a good body: %v", err)
	}
	for name, tc := range map[string]struct {
		code int
		body string
	}{
		"unknown status":        {200, strings.Replace(good, `"ok"`, `"fine"`, 1)},
		"unknown state":         {200, strings.Replace(good, `"healthy"`, `"sick"`, 1)},
		"missing field":         {200, strings.Replace(good, `"in_flight":0,`, ``, 1)},
		"extra field":           {200, strings.Replace(good, `"slots":1,`, `"slots":1,"weight":2,`, 1)},
		"bad date":              {200, strings.Replace(good, `"last_error_at":null`, `"last_error_at":"yesterday"`, 1)},
		"unknown probe outcome": {200, strings.Replace(good, `"last_probe_outcome":null`, `"last_probe_outcome":"fine"`, 1)},
		"srtt as a string":      {200, strings.Replace(good, `"srtt_ms":null`, `"srtt_ms":"12ms"`, 1)},
		"negative rttvar":       {200, strings.Replace(good, `"rttvar_ms":null`, `"rttvar_ms":-1`, 1)},
		"missing last probe":    {200, strings.Replace(good, `"last_probe_at":null,`, ``, 1)},
		"undocumented status":   {500, good},
		"a reason while ok":     {200, strings.Replace(good, `"ok"`, `"ok","reason":"network"`, 1)},
		"down without a reason": {503, strings.Replace(good, `"ok"`, `"down"`, 1)},
		"an unknown reason":     {503, strings.Replace(good, `"ok"`, `"down","reason":"dns"`, 1)},
		"no last local error":   {200, strings.Replace(good, `"last_local_error":null,`, ``, 1)},
		"not JSON":              {200, `status: ok`},
	} {
		if err := admintest.CheckHealth(tc.code, []byte(tc.body)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// fakePool serves fixed statuses and counts Sync calls. Its network
// window is an hour: a local error of the test's is recent.
type fakePool struct {
	st     []actors.Status
	synced atomic.Int32
}

func (p *fakePool) Sync()                        { p.synced.Add(1) }
func (p *fakePool) Status() []actors.Status      { return p.st }
func (p *fakePool) NetworkWindow() time.Duration { return time.Hour }

func startServer(tb testing.TB, p *fakePool) (*Server, string) {
	tb.Helper()
	m := metrics.New(metrics.Config{Upstreams: []string{"a"}})
	s := New(Config{Listen: "127.0.0.1:0", Metrics: m, Pool: p})
	if err := s.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Shutdown(context.Background()); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
	})
	return s, "http://" + s.Addr().String()
}

func get(tb testing.TB, method, url string) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp, body
}

func TestServesMetricsAndHealth(t *testing.T) {
	p := &fakePool{st: []actors.Status{{Name: "a", Address: "udp://192.0.2.1:53", Slots: 2, InBackoff: true, BackoffUntil: t0}}}
	s, base := startServer(t, p)
	if !s.Addr().Addr().IsLoopback() || s.Addr().Port() == 0 {
		t.Errorf("bound %v", s.Addr())
	}

	resp, body := get(t, "GET", base+"/metrics")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != MetricsContentType {
		t.Errorf("/metrics: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	fs, err := metricstest.Parse(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	if err := metricstest.CheckSpec(fs, []string{"a"}, nil); err != nil {
		t.Error(err)
	}

	resp, body = get(t, "GET", base+"/api/health")
	if resp.StatusCode != 503 || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("/api/health with its only upstream in backoff: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	admintest.RequireHealth(t, resp.StatusCode, body)
	if p.synced.Load() != 1 {
		t.Errorf("the health check synced the pool %d times, want 1", p.synced.Load())
	}

	if resp, _ := get(t, "HEAD", base+"/api/health"); resp.StatusCode != 503 {
		t.Errorf("HEAD /api/health: %d", resp.StatusCode)
	}
	for _, method := range []string{"POST", "PUT", "DELETE"} {
		resp, _ := get(t, method, base+"/api/health")
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s /api/health: %d, want 405", method, resp.StatusCode)
		}
	}
	if resp, _ := get(t, "GET", base+"/api/nothing"); resp.StatusCode != 404 {
		t.Errorf("unknown path: %d, want 404", resp.StatusCode)
	}
}

func TestServerTimeoutsAreSet(t *testing.T) {
	s := New(Config{Listen: "127.0.0.1:0"})
	if s.http.ReadHeaderTimeout <= 0 || s.http.ReadTimeout <= 0 || s.http.WriteTimeout <= 0 || s.http.IdleTimeout <= 0 {
		t.Errorf("timeouts: header %v read %v write %v idle %v", s.http.ReadHeaderTimeout, s.http.ReadTimeout, s.http.WriteTimeout, s.http.IdleTimeout)
	}
}

func TestStartErrors(t *testing.T) {
	for _, addr := range []string{"localhost:8053", "127.0.0.1"} {
		if err := New(Config{Listen: addr}).Start(); err == nil {
			t.Errorf("Start on %q succeeded", addr)
		}
	}
	s, _ := startServer(t, &fakePool{})
	if err := New(Config{Listen: s.Addr().String()}).Start(); err == nil {
		t.Error("a second server bound a port in use")
	}
}

func TestShutdownTwiceAndBeforeStart(t *testing.T) {
	if err := New(Config{Listen: "127.0.0.1:0"}).Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown before Start: %v", err)
	}
	s, _ := startServer(t, &fakePool{})
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The cleanup shuts it down again.
}

// With the network down the report is down for the network's sake, with
// the last local error, even while every upstream is healthy (a local
// error records nothing) and even while some are in backoff; the last
// local error is shown when the network is up too.
func TestHealthNetworkDown(t *testing.T) {
	noRoute := errors.New("dial udp 9.9.9.9:53: connect: network is unreachable")
	healthy := actors.Status{Name: "a", Address: "udp://9.9.9.9:53", Slots: 4}
	backoff := actors.Status{Name: "b", Address: "udp://192.0.2.2:53", Slots: 4, InBackoff: true, BackoffUntil: t0}
	down := actors.Network{Down: true, LastError: noRoute, LastErrorAt: t0.In(time.FixedZone("CET", 3600))}
	for _, tc := range []struct {
		name   string
		st     []actors.Status
		net    actors.Network
		status string
		reason string
		code   int
	}{
		{"every upstream healthy", []actors.Status{healthy, healthy}, down, StatusDown, ReasonNetwork, 503},
		{"some in backoff too", []actors.Status{healthy, backoff}, down, StatusDown, ReasonNetwork, 503},
		{"all in backoff too", []actors.Status{backoff, backoff}, down, StatusDown, ReasonNetwork, 503},
		{"back up, the error kept", []actors.Status{healthy}, actors.Network{LastError: noRoute, LastErrorAt: t0}, StatusOK, "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, code := HealthOf(tc.st, tc.net)
			if h.Status != tc.status || h.Reason != tc.reason || code != tc.code {
				t.Errorf("status %s reason %q (%d), want %s %q (%d)", h.Status, h.Reason, code, tc.status, tc.reason, tc.code)
			}
			if h.LastLocalError == nil || *h.LastLocalError != noRoute.Error() || h.LastLocalErrorAt == nil ||
				!h.LastLocalErrorAt.Equal(t0) || h.LastLocalErrorAt.Location() != time.UTC {
				t.Errorf("last local error %v at %v, want %q at %v UTC", h.LastLocalError, h.LastLocalErrorAt, noRoute, t0)
			}
			body, err := json.Marshal(h)
			if err != nil {
				t.Fatal(err)
			}
			admintest.RequireHealth(t, code, body)
		})
	}
	h, _ := HealthOf([]actors.Status{healthy}, actors.Network{})
	body, _ := json.Marshal(h)
	if !strings.Contains(string(body), `"status":"ok","last_local_error":null,"last_local_error_at":null,`) {
		t.Errorf("before any local error: %s", body)
	}
}

// The server reads the network from the pool's statuses at the time of
// the request: /api/health and /readyz say it is down while every
// upstream's last word is a recent local error, and no longer once one
// has answered since.
func TestServesNetworkDown(t *testing.T) {
	noRoute := errors.New("connect: network is unreachable")
	now := time.Now()
	cut := actors.Status{Name: "a", Address: "udp://9.9.9.9:53", Slots: 4, LastLocalError: noRoute, LastLocalErrorAt: now}
	p := &fakePool{st: []actors.Status{cut}}
	_, base := startServer(t, p)

	resp, body := get(t, "GET", base+"/api/health")
	admintest.RequireHealth(t, resp.StatusCode, body)
	var h Health
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || h.Status != StatusDown || h.Reason != ReasonNetwork || h.Upstreams[0].State != StateHealthy {
		t.Errorf("network down: %d %s", resp.StatusCode, body)
	}
	if resp, body := get(t, "GET", base+"/readyz"); resp.StatusCode != 503 || !strings.HasPrefix(string(body), "the network is down") {
		t.Errorf("/readyz with the network down: %d %q", resp.StatusCode, body)
	}

	answered := cut
	answered.LastRecordedAt = now.Add(time.Millisecond)
	p.st = []actors.Status{answered}
	resp, body = get(t, "GET", base+"/api/health")
	admintest.RequireHealth(t, resp.StatusCode, body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"status":"ok","last_local_error":"connect: network is unreachable"`) {
		t.Errorf("after an answer: %d %s", resp.StatusCode, body)
	}
	if resp, body := get(t, "GET", base+"/readyz"); resp.StatusCode != 200 {
		t.Errorf("/readyz after an answer: %d %q", resp.StatusCode, body)
	}
}
