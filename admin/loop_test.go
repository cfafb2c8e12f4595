package admin

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/admin/admintest"
)

// An upstream found looping is "loop", with its reason and its next
// check, and counts as out of service in the pool's status; the body
// validates against openapi.yaml, whose state enum must name "loop".
//
// Mutation check: dropping "loop" from the enum of openapi.yaml fails
// the schema check; leaving the state at "backoff" fails the state check.
func TestHealthShowsALoop(t *testing.T) {
	healthy := actors.Status{Name: "a", Address: "udp://192.0.2.1:53", Slots: 4}
	loop := actors.Status{Name: "router", Address: "udp://192.168.1.1:53", Slots: 4, InBackoff: true, Loop: true,
		BackoffUntil: t0.Add(30 * time.Second), LastError: actors.ErrLoop, LastErrorAt: t0}
	for _, tc := range []struct {
		name   string
		st     []actors.Status
		status string
		code   int
	}{
		{"one of two loops", []actors.Status{loop, healthy}, StatusDegraded, 200},
		{"the only one loops", []actors.Status{loop}, StatusDown, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, code := HealthOf(tc.st, actors.Network{})
			if h.Status != tc.status || code != tc.code {
				t.Errorf("status %s (%d), want %s (%d)", h.Status, code, tc.status, tc.code)
			}
			u := h.Upstreams[0]
			if u.State != StateLoop || u.LastError == nil || *u.LastError != actors.ErrLoop.Error() ||
				u.BackoffUntil == nil || !u.BackoffUntil.Equal(t0.Add(30*time.Second)) {
				t.Errorf("looping upstream: state %q, last error %v, next check %v", u.State, u.LastError, u.BackoffUntil)
			}
			body, err := json.Marshal(h)
			if err != nil {
				t.Fatal(err)
			}
			admintest.RequireHealth(t, code, body)
			if !strings.Contains(string(body), `"state":"loop"`) {
				t.Errorf("body %s", body)
			}
		})
	}
}

// The schema knows exactly the three states.
func TestSchemaStates(t *testing.T) {
	body := func(state string) []byte {
		return []byte(fmt.Sprintf(`{"status":"degraded","last_local_error":null,"last_local_error_at":null,"upstreams":[{"name":"a","address":"udp://192.0.2.1:53","state":%q,"slots":1,"in_flight":0,`+
			`"successes":0,"failures":0,"consecutive_failures":0,"backoff_until":null,"last_error":null,"last_error_at":null,`+
			`"srtt_ms":null,"rttvar_ms":null,"last_probe_at":null,"last_probe_outcome":null}]}`, state))
	}
	for _, s := range []string{StateHealthy, StateBackoff, StateLoop} {
		if err := admintest.CheckHealth(200, body(s)); err != nil {
			t.Errorf("state %q: %v", s, err)
		}
	}
	if err := admintest.CheckHealth(200, body("looping")); err == nil {
		t.Error(`state "looping": accepted`)
	}
}
