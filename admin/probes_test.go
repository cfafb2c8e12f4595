package admin

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/admin/admintest"
	"github.com/nxdnsd/nxdnsd/metrics"
)

// /readyz follows the upstreams, /livez only whether DNS is served: a
// liveness probe never fails because every upstream is down.
func TestLivenessAndReadiness(t *testing.T) {
	healthy := actors.Status{Name: "a"}
	backoff := actors.Status{Name: "b", InBackoff: true}
	var live atomic.Bool
	live.Store(true)
	p := &fakePool{}
	s := New(Config{Listen: "127.0.0.1:0", Metrics: metrics.New(metrics.Config{}), Pool: p, Live: live.Load})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	base := "http://" + s.Addr().String()

	for _, tc := range []struct {
		name      string
		st        []actors.Status
		live      bool
		livez     int
		readyz    int
		readyBody string
	}{
		{"one healthy of two", []actors.Status{backoff, healthy}, true, 200, 200, "ready\n"},
		{"every upstream in backoff", []actors.Status{backoff, backoff}, true, 200, 503, "no enabled upstream is healthy\n"},
		{"no upstream", nil, true, 200, 503, "no enabled upstream is healthy\n"},
		{"not serving DNS", []actors.Status{healthy}, false, 503, 200, "ready\n"},
	} {
		p.st = tc.st
		live.Store(tc.live)
		synced := p.synced.Load()
		resp, body := get(t, "GET", base+"/livez")
		if resp.StatusCode != tc.livez {
			t.Errorf("%s: /livez %d, want %d", tc.name, resp.StatusCode, tc.livez)
		}
		resp, body = get(t, "GET", base+"/readyz")
		if resp.StatusCode != tc.readyz || string(body) != tc.readyBody {
			t.Errorf("%s: /readyz %d %q, want %d %q", tc.name, resp.StatusCode, body, tc.readyz, tc.readyBody)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
			t.Errorf("%s: /readyz Content-Type %q", tc.name, ct)
		}
		if p.synced.Load() != synced+1 {
			t.Errorf("%s: /readyz synced the pool %d times, want once", tc.name, p.synced.Load()-synced)
		}
	}

	// Without Live, /livez answers 200 while the server runs.
	_, base2 := startServer(t, &fakePool{})
	if resp, _ := get(t, "GET", base2+"/livez"); resp.StatusCode != 200 {
		t.Errorf("/livez without Live: %d", resp.StatusCode)
	}
	if resp, _ := get(t, "POST", base2+"/readyz"); resp.StatusCode != 405 {
		t.Errorf("POST /readyz: %d, want 405", resp.StatusCode)
	}
}

// openapi.yaml describes both probes with every status they answer.
func TestProbesAreDescribed(t *testing.T) {
	data, err := os.ReadFile(admintest.OpenAPIPath())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]struct {
			Get struct {
				Responses map[string]struct {
					Content map[string]any `yaml:"content"`
				} `yaml:"responses"`
			} `yaml:"get"`
		} `yaml:"paths"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for path, codes := range map[string][]int{"/livez": {200, 503}, "/readyz": {200, 503}} {
		op, ok := doc.Paths[path]
		if !ok {
			t.Errorf("%s: not in openapi.yaml", path)
			continue
		}
		for _, code := range codes {
			r, ok := op.Get.Responses[strconv.Itoa(code)]
			if !ok {
				t.Errorf("%s: no %d response", path, code)
				continue
			}
			if _, ok := r.Content["text/plain; charset=utf-8"]; !ok {
				t.Errorf("%s %d: no text/plain content", path, code)
			}
		}
	}
}
