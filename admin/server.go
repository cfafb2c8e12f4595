// Package admin is nxdnsd's HTTP interface on admin.listen: the status
// page at GET /, GET /metrics in the Prometheus text format, the JSON of
// GET /api/health, /api/queries and /api/stats, and the probes /livez and
// /readyz (spec section 8, described by openapi.yaml at the repository
// root).
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/actors"
)

// Timeouts of the admin server. A scrape or a health check is one small
// request answered from memory; these only stop a slow or idle client from
// holding a connection (and a goroutine) for long.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 10 * time.Second
	IdleTimeout       = 60 * time.Second
	maxHeaderBytes    = 8 << 10
)

// MaxConns is how many connections the admin listener keeps open at once
// (issue 16: 3,000 half-sent requests held 3,014 descriptors for 5 s). A
// connection past it displaces the oldest one that is not being answered
// (idle between requests, or its request not yet read whole), so that a
// probe is answered while a client holds many half-sent requests; when
// every one is being answered, the new one is closed. A scrape, a probe
// and a browser take a few.
const MaxConns = 64

// MetricsContentType is the Prometheus text exposition format, version
// 0.0.4.
const MetricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// Metrics renders the metrics; *metrics.Metrics implements it.
type Metrics interface {
	WritePrometheus(w io.Writer)
}

// Pool is what the health report reads; *actors.Pool implements it.
type Pool interface {
	Sync()
	Status() []actors.Status
	// NetworkWindow is how long a local error speaks for the network
	// (actors.NetworkOf).
	NetworkWindow() time.Duration
}

var _ Pool = (*actors.Pool)(nil)

// Config is what a Server serves.
type Config struct {
	// Listen is the "IP:PORT" to bind; port 0 picks one (see Addr). The
	// configuration's default is loopback, the one address that serves
	// the whole API without a password (see Auth).
	Listen string

	Metrics Metrics     // required
	Pool    Pool        // required
	Logger  *zap.Logger // or nil

	// Live reports whether the process serves DNS, for /livez; nil means
	// it always does.
	Live func() bool

	// Queries, or nil, are the recent queries of GET /api/queries and the
	// status page; nil reads as none kept.
	Queries Queries

	// Counters, or nil, are what GET /api/stats sums up (and the status
	// page shows); *metrics.Metrics implements it. nil reads as zeros.
	Counters Counters

	// Version is nxdnsd's version, which the status page shows.
	Version string

	// Auth is who may use the admin API (spec section 13; authmw.go).
	Auth AuthConfig

	// Allow reports whether a client may use the admin API
	// (server.allow); the others are answered 403. Nil allows everyone.
	Allow func(netip.Addr) bool

	// Routes, or nil, mounts more of the API on the same mux, behind the
	// same checks: the blocking API of spec section 11
	// (blocking.Manager.Register).
	Routes func(mux *http.ServeMux)

	// Hosts are the names (or IPs) a request's Host may give beside the
	// listener's own address, loopback and localhost (admin.hosts); any
	// other Host is answered 421 (host.go).
	Hosts []string
}

// Server is the admin HTTP server. Start it once and Shutdown it once.
type Server struct {
	cfg  Config
	log  *zap.Logger
	http *http.Server

	rate    rate      // the query counter's recent history, for GET /api/stats
	started time.Time // set by New: when nxdnsd started, near enough
	hosts   hostSet   // cfg.Hosts, for checkHost

	mu          sync.Mutex // guards following
	ln          net.Listener
	done        chan struct{} // closed when Serve and the rate sampler have returned; nil before Start
	stopSampler chan struct{} // closed by Shutdown

	shutdownOnce sync.Once
	shutdownErr  error
}

// New returns a Server for cfg; nothing listens until Start.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, log: cfg.Logger, started: time.Now(), hosts: newHostSet(cfg.Hosts)}
	s.rate.add(s.started, s.totals().Queries)
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.http = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          zap.NewStdLog(s.log.Named("admin")),
		ConnState:         trackConn,
	}
	// Run by Shutdown once the listener is closed.
	s.http.RegisterOnShutdown(func() {
		s.mu.Lock()
		ln := s.ln
		s.mu.Unlock()
		if l, ok := ln.(*capListener); ok {
			l.closeUnanswered()
		}
	})
	return s
}

// Handler returns the routes: GET (and HEAD) / (the status page),
// /metrics, /api/health, /api/queries, /api/stats, /livez and /readyz,
// and those cfg.Routes mounts; any other method gets 405, any other path
// 404. A client outside
// cfg.Allow gets 403, then a Host that does not name the listener 421
// (checkHost).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", s.serveMetrics)
	mux.HandleFunc("GET /api/health", s.serveHealth)
	mux.HandleFunc("GET /livez", s.serveLive)
	mux.HandleFunc("GET /readyz", s.serveReady)
	mux.HandleFunc("GET /{$}", serveStatusPage)
	mux.HandleFunc("GET /api/queries", s.serveQueries)
	mux.HandleFunc("GET /api/stats", s.serveStats)
	if s.cfg.Routes != nil {
		s.cfg.Routes(mux)
	}
	mux = s.withAuth(mux) // spec section 13: sessions, tokens, Origin (authmw.go)
	h := s.checkHost(mux)
	if s.cfg.Allow == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ap, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil || !s.cfg.Allow(ap.Addr().Unmap()) {
			http.Error(w, "403 forbidden: this address is not in server.allow", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Start binds cfg.Listen and serves in the background.
func (s *Server) Start() error {
	ap, err := netip.ParseAddrPort(s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("admin: parsing listen address %q: %w", s.cfg.Listen, err)
	}
	inner, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("admin: listening on %s: %w", s.cfg.Listen, err)
	}
	ln := &capListener{Listener: inner, max: MaxConns}
	s.mu.Lock()
	s.ln, s.done, s.stopSampler = ln, make(chan struct{}), make(chan struct{})
	done, stop := s.done, s.stopSampler
	s.mu.Unlock()
	if !ap.Addr().IsLoopback() && s.cfg.Auth.PasswordHash == "" {
		s.log.Warn("admin.listen is not a loopback address and has no password: serving only /metrics, /livez and /readyz",
			zap.String("listen", s.cfg.Listen))
	}
	s.log.Info("serving", zap.String("proto", "http"), zap.Stringer("addr", ln.Addr()))
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin server stopped", zap.Error(err))
		}
	})
	wg.Go(func() { s.sampleRate(stop) })
	go func() {
		wg.Wait()
		close(done)
	}()
	return nil
}

// Addr returns the bound address, or the zero AddrPort before Start.
func (s *Server) Addr() netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return netip.AddrPort{}
	}
	ap, _ := netip.ParseAddrPort(s.ln.Addr().String())
	return ap
}

// Shutdown stops accepting, lets requests in progress finish until ctx is
// done, then closes every connection. It returns once the server's
// goroutines have ended; ctx.Err() if it had to cut requests short.
// Later calls return the first call's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		s.mu.Lock()
		done, stop := s.done, s.stopSampler
		s.mu.Unlock()
		if done == nil {
			return
		}
		close(stop)
		if err := s.http.Shutdown(ctx); err != nil {
			s.shutdownErr = err
			_ = s.http.Close()
		}
		<-done
	})
	return s.shutdownErr
}

func (s *Server) serveMetrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", MetricsContentType)
	w.Header().Set("Cache-Control", "no-store")
	s.cfg.Metrics.WritePrometheus(w)
}

func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	// Sync first: a client that just got an answer sees its outcome.
	s.cfg.Pool.Sync()
	h, code := HealthOf(s.health())
	body, err := json.Marshal(h)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

// serveLive answers a liveness probe: 200 while the process serves DNS,
// whatever the upstreams' health, so that a probe never restarts nxdnsd
// because the WAN is down.
func (s *Server) serveLive(w http.ResponseWriter, _ *http.Request) {
	if s.cfg.Live != nil && !s.cfg.Live() {
		probeAnswer(w, http.StatusServiceUnavailable, "not serving DNS\n")
		return
	}
	probeAnswer(w, http.StatusOK, "ok\n")
}

// health returns the upstreams' states and the network's, read now.
func (s *Server) health() ([]actors.Status, actors.Network) {
	st := s.cfg.Pool.Status()
	return st, actors.NetworkOf(st, time.Now(), s.cfg.Pool.NetworkWindow())
}

// serveReady answers a readiness probe: 200 when at least one enabled
// upstream is healthy and the network is not down, else 503 (every one
// in backoff, half-open included, or no way out of this host).
func (s *Server) serveReady(w http.ResponseWriter, _ *http.Request) {
	s.cfg.Pool.Sync() // as /api/health: an answer already seen is counted
	st, net := s.health()
	if net.Down {
		probeAnswer(w, http.StatusServiceUnavailable, "the network is down: no upstream can be reached from this host\n")
		return
	}
	for _, u := range st {
		if !u.InBackoff {
			probeAnswer(w, http.StatusOK, "ready\n")
			return
		}
	}
	probeAnswer(w, http.StatusServiceUnavailable, "no enabled upstream is healthy\n")
}

func probeAnswer(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

// capListener keeps at most max connections open: past it, Accept closes
// the oldest connection not being answered, or else the new one.
type capListener struct {
	net.Listener
	max int

	mu     sync.Mutex // guards following
	conns  []*capConn // open, oldest first
	peak   int        // the most open at once, for tests
	closed bool       // shutting down: closeUnanswered ran, no more are admitted
}

// capConn is a connection of a capListener. The admin server's ConnState
// hook (trackConn) says when it is being answered.
type capConn struct {
	net.Conn
	l        *capListener
	answered bool // a request read whole and not yet answered: guarded by l.mu
	once     sync.Once
}

// Accept returns the next connection, having closed one to keep within
// max.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &capConn{Conn: nc, l: l}
		victim, ok := l.admit(c)
		if victim != nil {
			_ = victim.Close()
		}
		if ok {
			return c, nil
		}
		_ = nc.Close()
	}
}

// admit counts c in, and returns the connection it displaces, if any; or
// false when every open connection is being answered.
func (l *capListener) admit(c *capConn) (victim *capConn, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, false
	}
	if len(l.conns) >= l.max {
		i := slices.IndexFunc(l.conns, func(o *capConn) bool { return !o.answered })
		if i < 0 {
			return nil, false
		}
		victim = l.conns[i]
		l.conns = slices.Delete(l.conns, i, i+1)
	}
	l.conns = append(l.conns, c)
	l.peak = max(l.peak, len(l.conns))
	return victim, true
}

// closeUnanswered closes every connection that is not being answered and
// admits no more. The admin server calls it as it shuts down: net/http
// closes idle connections itself, but gives one that never sent a request
// (a browser's preconnection) five seconds first, which a shutdown's
// budget may not have.
func (l *capListener) closeUnanswered() {
	l.mu.Lock()
	l.closed = true
	var idle []*capConn
	for _, c := range l.conns {
		if !c.answered {
			idle = append(idle, c)
		}
	}
	l.mu.Unlock()
	for _, c := range idle {
		_ = c.Close()
	}
}

// Close closes c and counts it out.
func (c *capConn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		c.l.mu.Lock()
		if i := slices.Index(c.l.conns, c); i >= 0 {
			c.l.conns = slices.Delete(c.l.conns, i, i+1)
		}
		c.l.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}

// trackConn is the admin server's ConnState hook: net/http reports
// StateActive once a request's header has been read whole, StateIdle
// once it is answered.
func trackConn(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*capConn)
	if !ok {
		return
	}
	c.l.mu.Lock()
	c.answered = state == http.StateActive
	c.l.mu.Unlock()
}
