package blocking

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// Register mounts the blocking API of spec section 11 on mux:
//
//	GET    /api/lists            the lists and their state
//	POST   /api/lists/refresh    fetch all now, or ?name=N
//	GET    /api/blocking         enabled, paused, paused_until
//	POST   /api/blocking/pause   {"seconds":300}; 0 or absent: until resumed
//	POST   /api/blocking/resume
//	GET    /api/blocking/check   ?name=N&client=IP: the decision
//	GET    /api/rules            the custom rules
//	POST   /api/rules            {"kind":"block","rule":"ads.example"}
//	DELETE /api/rules            the same body
//
// Who may call what (spec section 13) is the admin server's to enforce
// around mux.
func (m *Manager) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/lists", m.serveLists)
	mux.HandleFunc("POST /api/lists/refresh", m.serveRefresh)
	mux.HandleFunc("GET /api/blocking", m.serveBlocking)
	mux.HandleFunc("POST /api/blocking/pause", m.servePause)
	mux.HandleFunc("POST /api/blocking/resume", m.serveResume)
	mux.HandleFunc("GET /api/blocking/check", m.serveCheck)
	mux.HandleFunc("GET /api/rules", m.serveRules)
	mux.HandleFunc("POST /api/rules", m.serveAddRule)
	mux.HandleFunc("DELETE /api/rules", m.serveDeleteRule)
}

// ListStatus is one list as GET /api/lists shows it.
type ListStatus struct {
	Name      string     `json:"name"`
	Kind      string     `json:"kind"`
	Source    string     `json:"source"` // user info and query redacted
	State     string     `json:"state"`  // loading, ok, stale, disabled
	Rules     int        `json:"rules"`  // in force
	Skipped   int        `json:"skipped"`
	UpdatedAt *time.Time `json:"updated_at"` // when the copy in force was fetched; null: no copy
	CheckedAt *time.Time `json:"checked_at"` // the last fetch attempt; null: none yet
	LastError *string    `json:"last_error"` // the last fetch's error; null when it succeeded
	AgeS      *float64   `json:"age_s"`      // age of the copy in force, seconds; null: no copy
}

// Lists is the state of every configured list, in configured order.
func (m *Manager) Lists() []ListStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	out := make([]ListStatus, 0, len(m.lists))
	for _, l := range m.lists {
		st := ListStatus{Name: l.cfg.Name, Kind: l.cfg.Kind, Source: redactSource(l.cfg.Source), State: l.state}
		if l.set != nil {
			st.Rules, st.Skipped = l.set.rules, l.set.skipped
			t := l.updatedAt.UTC()
			st.UpdatedAt = &t
			age := now.Sub(l.updatedAt).Seconds()
			st.AgeS = &age
		}
		if !l.checkedAt.IsZero() {
			t := l.checkedAt.UTC()
			st.CheckedAt = &t
		}
		if l.lastError != "" {
			e := l.lastError
			st.LastError = &e
		}
		out = append(out, st)
	}
	return out
}

func (m *Manager) serveLists(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"lists": m.Lists()})
}

func (m *Manager) serveRefresh(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	if name != "" && !m.hasList(name) {
		writeError(w, http.StatusNotFound, "no list is named "+name)
		return
	}
	m.mu.Lock()
	started := m.done != nil
	m.mu.Unlock()
	if !started {
		writeError(w, http.StatusServiceUnavailable, "blocking is not running")
		return
	}
	if !m.enqueue(request{all: name == "", names: []string{name}}) {
		writeError(w, http.StatusServiceUnavailable, "refreshes are already queued; try again later")
		return
	}
	var refreshing any = "all"
	if name != "" {
		refreshing = []string{name}
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"refreshing": refreshing})
}

// PauseStatus is GET /api/blocking.
type PauseStatus struct {
	Enabled     bool       `json:"enabled"`
	Paused      bool       `json:"paused"`
	PausedUntil *time.Time `json:"paused_until"` // null while not paused, or paused until resumed
}

// Pause stops blocking for d, or until Resume when d is 0.
func (m *Manager) Pause(d time.Duration) {
	if d <= 0 {
		m.engine.paused.Store(pausedForever)
		return
	}
	m.engine.paused.Store(m.now().Add(d).UnixNano())
}

// Resume resumes blocking.
func (m *Manager) Resume() { m.engine.paused.Store(0) }

// Pausing is whether blocking is paused now, and until when.
func (m *Manager) Pausing() PauseStatus {
	m.mu.Lock()
	st := PauseStatus{Enabled: m.cfg.Enabled}
	m.mu.Unlock()
	switch p := m.engine.paused.Load(); {
	case p == pausedForever:
		st.Paused = true
	case p != 0 && m.now().UnixNano() < p:
		st.Paused = true
		t := time.Unix(0, p).UTC()
		st.PausedUntil = &t
	}
	return st
}

func (m *Manager) serveBlocking(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, m.Pausing())
}

// maxPauseS bounds a pause: a year, far from overflowing a duration.
const maxPauseS = 366 * 24 * 3600

func (m *Manager) servePause(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Seconds *int64 `json:"seconds"`
	}
	if err := readJSON(r, &body); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "the body must be {\"seconds\":N}: "+err.Error())
		return
	}
	var d time.Duration
	if body.Seconds != nil {
		if *body.Seconds < 0 || *body.Seconds > maxPauseS {
			writeError(w, http.StatusBadRequest, "seconds must be in 0..31622400")
			return
		}
		d = time.Duration(*body.Seconds) * time.Second
	}
	m.Pause(d)
	writeJSON(w, http.StatusOK, m.Pausing())
}

func (m *Manager) serveResume(w http.ResponseWriter, _ *http.Request) {
	m.Resume()
	writeJSON(w, http.StatusOK, m.Pausing())
}

// CheckResult is GET /api/blocking/check.
type CheckResult struct {
	Blocked bool     `json:"blocked"`
	Allowed bool     `json:"allowed"` // an allow rule matched (and won)
	List    *string  `json:"list"`    // the list (or "rule") that decided; null: no rule matched
	Rule    *string  `json:"rule"`    // the rule that decided, as a list writes it
	Groups  []string `json:"groups"`  // the client's groups
	Paused  bool     `json:"paused"`  // blocking is paused: nothing is blocked now
}

// Check is the decision a query of name (presentation form, final dot
// optional) from client would get now. It is not counted in the metrics.
func (m *Manager) Check(name string, client netip.Addr) (CheckResult, error) {
	wire, ok := WireName(name)
	if !ok {
		return CheckResult{}, errBadName
	}
	res := CheckResult{Groups: []string{}}
	s := m.engine.snap.Load()
	if s == nil {
		return res, nil
	}
	res.Paused = m.engine.pausedNow()
	var union listBits
	g, lists := s.groupsOf(client, nil, &union)
	var d Decision
	s.decideWire(wire, lists, &d) // WireName makes only well-formed names
	d.groups = g
	res.Groups = d.GroupNames()
	if res.Paused {
		d.Blocked = false
	}
	res.Blocked, res.Allowed = d.Blocked, d.Allowed
	if d.List != "" {
		list, text := d.List, d.Rule(wire)
		res.List, res.Rule = &list, &text
	}
	return res, nil
}

var errBadName = errors.New("not a domain name")

func (m *Manager) serveCheck(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	client, err := netip.ParseAddr(q.Get("client"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "client must be an IP address")
		return
	}
	res, err := m.Check(q.Get("name"), client)
	if err != nil {
		writeError(w, http.StatusBadRequest, "name must be a domain name")
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// RuleStatus is one custom rule as GET /api/rules shows it.
type RuleStatus struct {
	Kind   string `json:"kind"`
	Rule   string `json:"rule"`
	Origin string `json:"origin"` // config (the file's block and allow) or api
}

// Rules is every custom rule: the configuration's, then the API's.
func (m *Manager) Rules() []RuleStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []RuleStatus{}
	for _, s := range m.custom.block {
		out = append(out, RuleStatus{Kind: "block", Rule: s, Origin: "config"})
	}
	for _, s := range m.custom.allow {
		out = append(out, RuleStatus{Kind: "allow", Rule: s, Origin: "config"})
	}
	for _, r := range m.custom.api {
		out = append(out, RuleStatus{Kind: r.Kind, Rule: r.Rule, Origin: "api"})
	}
	return out
}

// AddRule adds a custom rule, in force at once and kept in state_dir. It
// reports false when the rule was there already.
func (m *Manager) AddRule(r APIRule) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	added, err := m.custom.add(r)
	if added {
		m.publishLocked()
	}
	return added, err
}

// DeleteRule removes a custom rule added through the API.
func (m *Manager) DeleteRule(r APIRule) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.custom.remove(r); err != nil {
		return err
	}
	m.publishLocked()
	return nil
}

func (m *Manager) serveRules(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"rules": m.Rules()})
}

func (m *Manager) serveAddRule(w http.ResponseWriter, r *http.Request) {
	var body APIRule
	if err := readJSON(r, &body); err != nil {
		writeError(w, http.StatusBadRequest, `the body must be {"kind":"block","rule":"ads.example"}`)
		return
	}
	added, err := m.AddRule(body)
	switch {
	case errors.Is(err, ErrBadRule):
		writeError(w, http.StatusBadRequest, err.Error())
	case err != nil:
		writeError(w, http.StatusInternalServerError, "saving the rules: "+err.Error())
	case added:
		writeJSON(w, http.StatusCreated, map[string]any{"rules": m.Rules()})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"rules": m.Rules()})
	}
}

func (m *Manager) serveDeleteRule(w http.ResponseWriter, r *http.Request) {
	var body APIRule
	if err := readJSON(r, &body); err != nil {
		writeError(w, http.StatusBadRequest, `the body must be {"kind":"block","rule":"ads.example"}`)
		return
	}
	switch err := m.DeleteRule(body); {
	case errors.Is(err, ErrNoRule):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrConfigRule):
		writeError(w, http.StatusConflict, err.Error())
	case err != nil:
		writeError(w, http.StatusInternalServerError, "saving the rules: "+err.Error())
	default:
		writeJSON(w, http.StatusOK, map[string]any{"rules": m.Rules()})
	}
}

// maxBody bounds a request body: a rule is at most a line.
const maxBody = 16 << 10

func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a failed write is the client's problem
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// WireName converts a name in presentation form (final dot optional, no
// escapes) to wire format, for the API and tests. It reports false for
// what is not a name.
func WireName(name string) ([]byte, bool) {
	name = strings.TrimSuffix(name, ".")
	if name == "" || len(name) > 253 || strings.Contains(name, "\\") {
		return nil, false
	}
	out := make([]byte, 0, len(name)+2)
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 {
			return nil, false
		}
		out = append(out, byte(len(label)))
		out = append(out, label...)
	}
	return append(out, 0), true
}
