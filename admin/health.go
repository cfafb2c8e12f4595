package admin

import (
	"net/http"
	"time"

	"github.com/nxdnsd/nxdnsd/actors"
)

// Values of Health.Status (spec section 8).
const (
	StatusOK       = "ok"       // every enabled upstream is healthy
	StatusDegraded = "degraded" // some are in backoff (or loop)
	StatusDown     = "down"     // all are in backoff (or loop), or the network is down; the response is 503
)

// Values of Health.Reason, given with StatusDown only.
const (
	ReasonNetwork   = "network"   // this host has no way out: recent attempts and probes ended in local errors and none answered
	ReasonUpstreams = "upstreams" // every enabled upstream is in backoff (or loops)
)

// Values of UpstreamHealth.State.
const (
	StateHealthy = "healthy"
	StateBackoff = "backoff" // in backoff, until a probe's answer heals it
	StateLoop    = "loop"    // it forwards back to nxdnsd: out of service until a loop check no longer comes back
)

// Health is the body of GET /api/health, described by openapi.yaml.
type Health struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"` // why it is down; only with StatusDown

	// LastLocalError is the most recent local error (no route, network
	// unreachable, no sockets) of any upstream's attempts or probes,
	// which is recorded against no upstream; null before any.
	LastLocalError   *string    `json:"last_local_error"`
	LastLocalErrorAt *time.Time `json:"last_local_error_at"`

	Upstreams []UpstreamHealth `json:"upstreams"` // in priority order
}

// UpstreamHealth is one enabled upstream's state. Nullable fields are
// pointers: null until there is something to say.
type UpstreamHealth struct {
	Name                string     `json:"name"`
	Address             string     `json:"address"`
	State               string     `json:"state"`
	Slots               int        `json:"slots"`
	InFlight            int        `json:"in_flight"`
	Successes           uint64     `json:"successes"`
	Failures            uint64     `json:"failures"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	BackoffUntil        *time.Time `json:"backoff_until"`      // null unless in backoff or loop; when the next probe (or loop check) is due (in the past while it runs)
	LastError           *string    `json:"last_error"`         // the last recorded failure's error (an attempt's or a probe's), null before any
	LastErrorAt         *time.Time `json:"last_error_at"`      // when that failure was recorded
	SRTTMs              *float64   `json:"srtt_ms"`            // smoothed round-trip time (RFC 6298), null before the first answer
	RTTVarMs            *float64   `json:"rttvar_ms"`          // its variation, null likewise
	LastProbeAt         *time.Time `json:"last_probe_at"`      // when the last health probe ended, null before one
	LastProbeOutcome    *string    `json:"last_probe_outcome"` // how it ended (an attempt outcome's name), null before one
}

// HealthOf builds the health report of the upstreams in st and of the
// network as net reads it (actors.NetworkOf over st), and the HTTP status
// that goes with it: 503 when the network is down, or when every upstream
// is in backoff or loops (and so when there is none), else 200.
func HealthOf(st []actors.Status, net actors.Network) (Health, int) {
	h := Health{Upstreams: make([]UpstreamHealth, len(st))}
	if net.LastError != nil {
		msg := net.LastError.Error()
		h.LastLocalError, h.LastLocalErrorAt = &msg, utc(net.LastErrorAt)
	}
	backoff := 0
	for i, s := range st {
		u := UpstreamHealth{
			Name:                s.Name,
			Address:             s.Address,
			State:               StateHealthy,
			Slots:               s.Slots,
			InFlight:            s.InFlight,
			Successes:           s.Successes,
			Failures:            s.Failures,
			ConsecutiveFailures: s.ConsecutiveFailures,
		}
		if s.InBackoff || s.Loop {
			backoff++
			u.State = StateBackoff
			if s.Loop {
				u.State = StateLoop
			}
			u.BackoffUntil = utc(s.BackoffUntil)
		}
		if s.LastError != nil {
			msg := s.LastError.Error()
			u.LastError = &msg
			u.LastErrorAt = utc(s.LastErrorAt)
		}
		if s.RTT.Samples > 0 {
			u.SRTTMs, u.RTTVarMs = millis(s.RTT.SRTT), millis(s.RTT.RTTVar)
		}
		if !s.LastProbeAt.IsZero() {
			o := s.LastProbeOutcome.String()
			u.LastProbeAt, u.LastProbeOutcome = utc(s.LastProbeAt), &o
		}
		h.Upstreams[i] = u
	}
	switch {
	case net.Down:
		// The cause before its effects: upstreams in backoff too are
		// the network's doing.
		h.Status, h.Reason = StatusDown, ReasonNetwork
		return h, http.StatusServiceUnavailable
	case backoff == len(st):
		h.Status, h.Reason = StatusDown, ReasonUpstreams
		return h, http.StatusServiceUnavailable
	case backoff > 0:
		h.Status = StatusDegraded
	default:
		h.Status = StatusOK
	}
	return h, http.StatusOK
}

// millis returns d in milliseconds, to the microsecond.
func millis(d time.Duration) *float64 {
	ms := float64(d.Microseconds()) / 1000
	return &ms
}

// utc returns t in UTC without its monotonic reading, or nil for the zero
// time.
func utc(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC().Round(0)
	return &t
}
