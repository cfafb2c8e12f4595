// Package config holds nxdnsd's configuration: the types, their defaults,
// loading from TOML (unknown keys are errors), validation that reports every
// problem with its TOML path, and the embedded default configuration.
package config

import (
	"crypto/tls"
	"crypto/x509"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// Config is the whole configuration file. Field comments give the TOML key;
// defaults live in Default. Fields tagged `toml:"-"` are not keys: they hold
// what validation parsed from the keys beside them, so that the rest of
// nxdnsd takes typed values and parses nothing again.
type Config struct {
	Server       Server         `toml:"server"`
	Upstream     UpstreamPolicy `toml:"upstream"`
	Upstreams    []Upstream     `toml:"upstreams"`
	ForwardZones []ForwardZone  `toml:"forward_zones"`
	LocalRecords []LocalRecord  `toml:"local_records"`
	Cache        Cache          `toml:"cache"`
	QueryLog     QueryLog       `toml:"query_log"`
	History      History        `toml:"history"`
	Admin        Admin          `toml:"admin"`
	Log          Log            `toml:"log"`
	Clients      Clients        `toml:"clients"`  // spec section 15; clients.go
	Blocking     Blocking       `toml:"blocking"` // blocking.go

	// UpstreamsFromDefault is set by Load and Parse, read from no key, when
	// the file has no [[upstreams]] at all: Upstreams are then the embedded
	// default's (spec section 8), which nxdnsd says at start.
	UpstreamsFromDefault bool `toml:"-"`
}

// Server is the [server] table: where clients reach nxdnsd.
type Server struct {
	Listen               []string `toml:"listen"`                 // each address served on UDP and TCP
	TCPIdleTimeoutMS     int      `toml:"tcp_idle_timeout_ms"`    // a TCP client must deliver a whole query within this
	MaxTCPConnections    int      `toml:"max_tcp_connections"`    // concurrent client TCP connections
	MaxConcurrentQueries int      `toml:"max_concurrent_queries"` // queries served at once; past it, REFUSED
	Allow                []string `toml:"allow"`                  // CIDR prefixes of the clients served; others get REFUSED

	// AllowPrefixes is Allow parsed by validation (Load, Parse, Validate),
	// read from no key.
	AllowPrefixes []netip.Prefix `toml:"-"`

	RebindProtection bool     `toml:"rebind_protection"` // strip private addresses from the pool's answers for public names
	RebindAllow      []string `toml:"rebind_allow"`      // names (and the names below them) exempt, e.g. "plex.direct."
	// RebindAllowNames is RebindAllow as validation made it (Load, Parse,
	// Validate): lower-case, fully qualified; read from no key.
	RebindAllowNames []string `toml:"-"`

	// The encrypted listeners and their certificate (spec section 14,
	// config/tlslisten.go).
	TLSListen   []string `toml:"tls_listen"`   // DNS over TLS (RFC 7858) addresses
	HTTPSListen []string `toml:"https_listen"` // DNS over HTTPS (RFC 8484) addresses
	CertFile    string   `toml:"cert_file"`    // PEM certificate chain of both
	KeyFile     string   `toml:"key_file"`     // PEM private key of cert_file

	// Certificate is cert_file and key_file loaded by validation, read
	// from no key; nil when neither is set.
	Certificate *tls.Certificate `toml:"-"`
}

// UpstreamPolicy is the [upstream] table: the pool's budget and health policy.
type UpstreamPolicy struct {
	AttemptTimeoutMS int `toml:"attempt_timeout_ms"` // observation interval of one attempt
	TotalTimeoutMS   int `toml:"total_timeout_ms"`   // one query's whole budget in the pool
	ReadTimeoutMS    int `toml:"read_timeout_ms"`    // one whole forward-zone exchange
	FailureThreshold int `toml:"failure_threshold"`  // consecutive recorded failures before backoff
	BackoffMS        int `toml:"backoff_ms"`         // first backoff
	BackoffMaxMS     int `toml:"backoff_max_ms"`     // backoff ceiling
	ProbeTimeoutMS   int `toml:"probe_timeout_ms"`   // observation interval of one health probe

	// Bootstrap is the IP:PORT resolvers asked, over plain DNS, for the
	// host names of tls and https upstreams without ip; empty: the
	// upstreams that need no lookup themselves are asked. Never the
	// system resolver.
	Bootstrap []string `toml:"bootstrap"`

	// BootstrapAddrs is Bootstrap parsed by validation (Load, Parse,
	// Validate), read from no key; nil when Bootstrap is empty.
	BootstrapAddrs []netip.AddrPort `toml:"-"`
}

// Upstream is one [[upstreams]] entry. Priority is its position in the list.
type Upstream struct {
	Name    string `toml:"name"`    // unique; defaults to Address
	Address string `toml:"address"` // udp://IP:PORT, tcp://IP:PORT, tls://HOST:PORT, https://HOST/PATH
	IP      string `toml:"ip"`      // tls/https: pins the dial address; HOST stays the TLS name
	Slots   int    `toml:"slots"`   // most exchanges in flight at once, 1..4096
	CAFile  string `toml:"ca_file"` // tls/https: trust this PEM CA instead of the system roots
	Enabled *bool  `toml:"enabled"` // nil (key absent) means true

	// Set by validation (Load, Parse, Validate), read from no key: the
	// values above parsed once, for transport.NewTransport.
	Addr    transport.Address `toml:"-"` // Address parsed
	DialIP  netip.Addr        `toml:"-"` // IP parsed; the zero Addr when IP is ""
	RootCAs *x509.CertPool    `toml:"-"` // the certificates of CAFile; nil when CAFile is "" (the system roots)
}

// A configuration that came from Load or Parse has been validated, so these
// conversions never see a negative or overflowing value: every millisecond
// setting is in 1..MaxMilliseconds.

// AttemptTimeout is attempt_timeout_ms as a duration.
func (p UpstreamPolicy) AttemptTimeout() time.Duration { return ms(p.AttemptTimeoutMS) }

// TotalTimeout is total_timeout_ms as a duration.
func (p UpstreamPolicy) TotalTimeout() time.Duration { return ms(p.TotalTimeoutMS) }

// ReadTimeout is read_timeout_ms as a duration.
func (p UpstreamPolicy) ReadTimeout() time.Duration { return ms(p.ReadTimeoutMS) }

// Backoff is backoff_ms as a duration.
func (p UpstreamPolicy) Backoff() time.Duration { return ms(p.BackoffMS) }

// BackoffMax is backoff_max_ms as a duration.
func (p UpstreamPolicy) BackoffMax() time.Duration { return ms(p.BackoffMaxMS) }

// ProbeTimeout is probe_timeout_ms as a duration.
func (p UpstreamPolicy) ProbeTimeout() time.Duration { return ms(p.ProbeTimeoutMS) }

// TCPIdleTimeout is tcp_idle_timeout_ms as a duration.
func (s Server) TCPIdleTimeout() time.Duration { return ms(s.TCPIdleTimeoutMS) }

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// IsEnabled reports whether the upstream takes part in the pool.
func (u Upstream) IsEnabled() bool { return u.Enabled == nil || *u.Enabled }

// ForwardZone is one [[forward_zones]] entry.
type ForwardZone struct {
	Zone     string `toml:"zone"`     // fully qualified; queries at or below it
	Resolver string `toml:"resolver"` // IP:PORT of the one resolver for the zone
}

// LocalRecord is one [[local_records]] entry, answered by nxdnsd itself.
type LocalRecord struct {
	Name  string `toml:"name"`
	Type  string `toml:"type"` // A, AAAA, CNAME, TXT, PTR
	Value string `toml:"value"`
	TTL   int    `toml:"ttl"`

	// RR is the record, built by validation (Load, Parse, Validate) and
	// read from no key: a *dns.A, *dns.AAAA, *dns.CNAME, *dns.TXT or
	// *dns.PTR of class IN, its owner and any target lower-case and fully
	// qualified, a TXT value one string escaped as dns.TXT packs it (byte
	// for byte). The query path answers with it as it is.
	RR dns.RR `toml:"-"`
}

// Cache is the [cache] table: the answer cache (spec section 10).
type Cache struct {
	Enabled              bool   `toml:"enabled"`
	SizeMiB              int    `toml:"size_mib"`                // memory bound for cached answers
	MinTTLS              int    `toml:"min_ttl_s"`               // clamp of a positive answer's TTL
	MaxTTLS              int    `toml:"max_ttl_s"`               //
	NegativeMaxTTLS      int    `toml:"negative_max_ttl_s"`      // cap of an NXDOMAIN/NODATA answer's TTL (RFC 2308)
	FailureTTLS          int    `toml:"failure_ttl_s"`           // a failed resolution is remembered this long (RFC 9520); 0 off
	Prefetch             bool   `toml:"prefetch"`                // refresh an entry asked in the last 10 % of its TTL
	ServeStale           bool   `toml:"serve_stale"`             // RFC 8767
	StaleMaxAgeS         int    `toml:"stale_max_age_s"`         // how long past expiry an answer may be served
	StaleAnswerTTLS      int    `toml:"stale_answer_ttl_s"`      // the TTL a stale answer carries
	StaleClientTimeoutMS int    `toml:"stale_client_timeout_ms"` // a stale answer goes out when resolution takes longer
	Path                 string `toml:"path"`                    // warm restart: saved here at shutdown, loaded at start; "" off
}

// Seconds of the [cache] table as durations.
func (c Cache) MinTTL() time.Duration         { return sec(c.MinTTLS) }
func (c Cache) MaxTTL() time.Duration         { return sec(c.MaxTTLS) }
func (c Cache) NegativeMaxTTL() time.Duration { return sec(c.NegativeMaxTTLS) }
func (c Cache) FailureTTL() time.Duration     { return sec(c.FailureTTLS) }
func (c Cache) StaleMaxAge() time.Duration    { return sec(c.StaleMaxAgeS) }
func (c Cache) StaleAnswerTTL() time.Duration { return sec(c.StaleAnswerTTLS) }

// StaleClientTimeout is stale_client_timeout_ms as a duration.
func (c Cache) StaleClientTimeout() time.Duration { return ms(c.StaleClientTimeoutMS) }

func sec(n int) time.Duration { return time.Duration(n) * time.Second }

// QueryLog is the [query_log] table.
type QueryLog struct {
	Path     string `toml:"path"`     // "" off, "-" stdout, else a file
	Attempts bool   `toml:"attempts"` // also log each pool query's attempt trail
}

// Admin is the [admin] table.
type Admin struct {
	Listen        string `toml:"listen"`         // HTTP: the status page, /metrics, /api/*; "" disables
	RecentQueries int    `toml:"recent_queries"` // queries kept in memory for the status page and /api/queries; 0 off

	// Hosts are the names (or IPs) beside the listener's own address and
	// localhost that a request's Host may give; others are answered 421
	// (spec section 13: DNS rebinding). Empty by default.
	Hosts []string `toml:"hosts"`

	// PasswordHash is the dashboard's password as `nxdnsd -hash-password`
	// prints its hash (bcrypt); "" is none (spec section 13).
	PasswordHash string `toml:"password_hash"`

	// Tokens are the [[admin.tokens]]: bearer tokens for scripts,
	// checked when PasswordHash is set.
	Tokens []AdminToken `toml:"tokens"`
}

// AdminToken is one [[admin.tokens]] entry.
type AdminToken struct {
	Name string `toml:"name"` // unique; named in the log
	Hash string `toml:"hash"` // the token's hash, as `nxdnsd -hash-password` prints it
	Role string `toml:"role"` // read: GET only; admin: everything
}

// Log is the [log] table.
type Log struct {
	Level string `toml:"level"` // debug, info, warn, error
}
