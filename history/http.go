package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/internal/dnstext"
)

// Limits of the API's parameters.
const (
	DefaultLimit    = 100  // /api/history's limit when absent
	MaxLimit        = 1000 // /api/history's largest limit; more reads this many
	DefaultTopLimit = 10
	MaxTopLimit     = 1000
	DefaultStep     = 600 * time.Second
	MaxStepSeconds  = 366 * 24 * 3600 // a bucket of a year at most: no duration overflows
	defaultSpan     = 24 * time.Hour  // /api/stats/*: from is this before to when absent
)

// Register adds GET /api/history, /api/stats/top and /api/stats/timeline
// to mux. On a nil History (history off, or its database unavailable)
// they answer 503.
func (h *History) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/history", h.serve(h.readHistory))
	mux.HandleFunc("GET /api/stats/top", h.serve(h.readTop))
	mux.HandleFunc("GET /api/stats/timeline", h.serve(h.readTimeline))
}

// A parser reads one endpoint's parameters, noting every problem in p,
// and returns the read they ask for: the store's answer as its JSON
// value.
type parser func(q url.Values, p *params) func(ctx context.Context) (any, error)

// serve answers an endpoint: 503 while the history is off, 400 naming
// every bad parameter, then the read, 503 or 500 when it fails.
func (h *History) serve(parse parser) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.off(w) {
			return
		}
		var p params
		read := parse(r.URL.Query(), &p)
		if p.fail(w) {
			return
		}
		out, err := read(r.Context())
		if err != nil {
			h.internal(w, r, err)
			return
		}
		writeJSON(w, out)
	}
}

func (h *History) off(w http.ResponseWriter) bool {
	if h == nil {
		http.Error(w, "the query history is off (history.enabled, or its database could not be opened: see the log)", http.StatusServiceUnavailable)
		return true
	}
	return false
}

// rowJSON is one row as GET /api/history returns it: the query-log fields
// of spec section 6, with client_name and list.
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

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

const tsLayout = "2006-01-02T15:04:05.000000Z07:00"

func (h *History) readHistory(q url.Values, p *params) func(context.Context) (any, error) {
	f := filter{
		Instance: q.Get("instance"), Client: q.Get("client"), Name: q.Get("name"), Source: q.Get("source"), Upstream: q.Get("upstream"),
		Rcode: -1, Limit: DefaultLimit,
	}
	if v := q.Get("type"); v != "" {
		t, ok := dns.StringToType[strings.ToUpper(v)]
		if !ok {
			n, err := strconv.ParseUint(strings.TrimPrefix(strings.ToUpper(v), "TYPE"), 10, 16)
			if err != nil || n == 0 {
				p.bad("type", "%q is not a DNS type (A, AAAA, HTTPS, TYPE65…)", v)
			}
			t = uint16(n)
		}
		f.Type = t
	}
	if v := q.Get("rcode"); v != "" {
		rc, ok := dns.StringToRcode[strings.ToUpper(v)]
		if !ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 4095 {
				p.bad("rcode", "%q is not an rcode (NOERROR, NXDOMAIN, SERVFAIL, 0…4095)", v)
			}
			rc = n
		}
		f.Rcode = rc
	}
	f.From = p.time(q, "from", time.Time{})
	f.To = p.time(q, "to", time.Time{})
	f.Limit = min(p.int(q, "limit", DefaultLimit, 1), MaxLimit)
	if v := q.Get("cursor"); v != "" {
		c, err := strconv.ParseInt(v, 36, 64)
		if err != nil || c == 0 {
			p.bad("cursor", "%q is not a cursor this API gave", v)
		}
		f.Cursor = c
	}
	return func(ctx context.Context) (any, error) {
		var page page
		if h.mine(f.Instance) {
			var err error
			if page, err = h.st.rows(ctx, f); err != nil {
				return nil, err
			}
		}
		return historyJSON(page, h.instance), nil
	}
}

func historyJSON(page page, instance string) any {
	out := struct {
		Rows []rowJSON `json:"rows"`
		Next *string   `json:"next"`
	}{Rows: make([]rowJSON, 0, len(page.Rows))}
	for _, e := range page.Rows {
		if e.Instance == "" {
			e.Instance = instance
		}
		j := rowJSON{
			TS: e.Time.Format(tsLayout), Instance: e.Instance, Client: optional(e.Client), ClientName: optional(e.ClientName),
			Proto: optional(e.Proto), Rcode: dnstext.Rcode(e.Rcode), Source: optional(e.Source),
			Upstream: optional(e.Upstream), DurationMS: float64(e.Duration.Microseconds()) / 1000, List: optional(e.List),
		}
		if e.QName != "" || e.QType != 0 {
			j.QName, j.QType = &e.QName, optional(dnstext.Type(e.QType))
		}
		out.Rows = append(out.Rows, j)
	}
	if page.Next != 0 {
		next := strconv.FormatInt(page.Next, 36)
		out.Next = &next
	}
	return out
}

func (h *History) readTop(q url.Values, p *params) func(context.Context) (any, error) {
	what := q.Get("what")
	if what == "" {
		what = TopDomains
	}
	switch what {
	case TopDomains, TopBlocked, TopClients, TopUpstreams:
	default:
		p.bad("what", "%q is not one of domains, blocked, clients, upstreams", what)
	}
	from, to := p.span(q, h.now())
	limit := min(p.int(q, "limit", DefaultTopLimit, 1), MaxTopLimit)
	instance := q.Get("instance")
	return func(ctx context.Context) (any, error) {
		counts := []count{}
		if h.mine(instance) {
			var err error
			if counts, err = h.st.top(ctx, what, instance, from, to, limit); err != nil {
				return nil, err
			}
		}
		return topJSON(counts), nil
	}
}

func topJSON(counts []count) any {
	type countJSON struct {
		Key   string `json:"key"`
		Count int64  `json:"count"`
	}
	out := make([]countJSON, len(counts))
	for i, c := range counts {
		out[i] = countJSON{c.Key, c.Count}
	}
	return out
}

func (h *History) readTimeline(q url.Values, p *params) func(context.Context) (any, error) {
	from, to := p.span(q, h.now())
	stepS := p.int(q, "step", int(DefaultStep/time.Second), 1)
	if stepS > MaxStepSeconds {
		p.bad("step", "%d is more than %d (a year)", stepS, MaxStepSeconds)
		stepS = int(DefaultStep / time.Second)
	}
	step := time.Duration(stepS) * time.Second
	// In microseconds: a Duration saturates at 292 years.
	if st := step.Microseconds(); p.ok() && floorDiv(to.UnixMicro()-1, st)-floorDiv(from.UnixMicro(), st)+1 > MaxBuckets {
		p.bad("step", "%s from %s to %s is more than %d buckets", step, from.Format(time.RFC3339), to.Format(time.RFC3339), MaxBuckets)
	}
	instance := q.Get("instance")
	return func(ctx context.Context) (any, error) {
		if !h.mine(instance) {
			return timelineJSON(emptyBuckets(from, to, step)), nil
		}
		buckets, err := h.st.timeline(ctx, instance, from, to, step)
		if err != nil {
			return nil, err
		}
		return timelineJSON(buckets), nil
	}
}

func timelineJSON(buckets []bucket) any {
	type bucketJSON struct {
		TS        string `json:"ts"`
		Total     int64  `json:"total"`
		Forwarded int64  `json:"forwarded"`
		Cached    int64  `json:"cached"`
		Blocked   int64  `json:"blocked"`
		Failed    int64  `json:"failed"`
		Local     int64  `json:"local"`
	}
	out := make([]bucketJSON, len(buckets))
	for i, b := range buckets {
		n := b.N
		out[i] = bucketJSON{
			TS:        b.Time.Format(time.RFC3339),
			Total:     n[outForwarded] + n[outCached] + n[outBlocked] + n[outFailed] + n[outLocal],
			Forwarded: n[outForwarded], Cached: n[outCached], Blocked: n[outBlocked], Failed: n[outFailed], Local: n[outLocal],
		}
	}
	return out
}

// mine reports whether the store may hold rows of instance ("" any): a
// shared one may hold any replica's, this replica's SQLite file only its
// own.
func (h *History) mine(instance string) bool {
	return h.shared || instance == "" || instance == h.instance
}

func (h *History) internal(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client went away
	}
	if errors.Is(err, ErrUnavailable) {
		// DNS is served meanwhile; the dashboard says why it is empty.
		http.Error(w, "the history database is unreachable: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	h.log.Error("history: reading failed: " + err.Error())
	http.Error(w, "reading the history failed: "+err.Error(), http.StatusInternalServerError)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(b, '\n'))
}

// params collects every problem with a request's parameters, so that one
// 400 names them all.
type params struct{ problems []string }

func (p *params) bad(name, format string, args ...any) {
	p.problems = append(p.problems, name+": "+fmt.Sprintf(format, args...))
}

func (p *params) ok() bool { return len(p.problems) == 0 }

func (p *params) fail(w http.ResponseWriter) bool {
	if p.ok() {
		return false
	}
	http.Error(w, strings.Join(p.problems, "\n"), http.StatusBadRequest)
	return true
}

func (p *params) int(q url.Values, name string, def, lo int) int {
	v := q.Get(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo {
		p.bad(name, "%q is not a whole number, %d or more", v, lo)
		return def
	}
	return n
}

// time parses a time parameter: RFC 3339, or unix seconds (a fraction
// allowed).
func (p *params) time(q url.Values, name string, def time.Time) time.Time {
	v := q.Get(name)
	if v == "" {
		return def
	}
	t, err := parseTime(v)
	if err != nil {
		p.bad(name, "%q is neither RFC 3339 nor unix seconds", v)
		return def
	}
	return t
}

func parseTime(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e11 {
		return time.Time{}, errors.New("not a time")
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}

// span is a stats request's [from, to): to defaults to now, from to a day
// before to.
func (p *params) span(q url.Values, now time.Time) (from, to time.Time) {
	to = p.time(q, "to", now)
	from = p.time(q, "from", to.Add(-defaultSpan))
	if p.ok() && !from.Before(to) {
		p.bad("from", "must be before to")
	}
	return from, to
}
