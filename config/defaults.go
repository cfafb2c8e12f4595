package config

import (
	_ "embed"
	"math"
	"net/netip"
)

// Defaults of the keys that live inside array-of-tables elements, which
// Default cannot carry because it has no elements. Values per spec section 2.
const (
	DefaultSlots = 32  // upstreams[i].slots
	DefaultTTL   = 300 // local_records[i].ttl, in seconds
)

// Limits the validation enforces.
const (
	// MaxEnabledUpstreams is the contract's cap on the pool (spec section
	// 2). Disabled entries do not count: a long list with a few parked
	// entries is a normal way to keep alternatives at hand.
	MaxEnabledUpstreams = 64

	// MaxSlots bounds upstreams[i].slots. Each slot is one exchange in
	// flight; past a few thousand an upstream is being flooded, not used.
	MaxSlots = 4096

	// MaxTTL is the largest TTL RFC 2181 section 8 allows.
	MaxTTL = math.MaxInt32

	// MaxMilliseconds bounds every *_ms setting (about 24.8 days). Larger
	// values are typos, and the bound keeps every time.Duration built from
	// a setting far from overflow.
	MaxMilliseconds = math.MaxInt32

	// DefaultRecentQueries is admin.recent_queries' default: a few minutes
	// of a household's queries, under a megabyte.
	DefaultRecentQueries = 1000

	// MaxRecentQueries bounds admin.recent_queries: each kept query
	// holds under 1 KiB (its trail included), so the bound is under
	// 100 MiB.
	MaxRecentQueries = 100000

	// MaxCacheMiB bounds cache.size_mib: 64 GiB, far beyond any board,
	// and far from overflowing a byte count.
	MaxCacheMiB = 64 << 10

	// maxTXTLen is the most one DNS character-string holds (RFC 1035
	// section 3.3); a local TXT record is one such string.
	maxTXTLen = 255
)

// Default returns the configuration every absent key falls back to (spec
// section 2). It has no upstreams, so on its own it does not validate: the
// embedded default (LoadDefault) adds them. Each call returns fresh slices.
func Default() Config {
	return Config{
		Server: Server{
			Listen:               []string{"127.0.0.1:1053"},
			TCPIdleTimeoutMS:     10000,
			MaxTCPConnections:    1024,
			MaxConcurrentQueries: 4096,
			Allow:                DefaultAllow(),
			AllowPrefixes:        defaultAllowPrefixes(),
			RebindProtection:     true,
		},
		Upstream: UpstreamPolicy{
			AttemptTimeoutMS: 2500,
			TotalTimeoutMS:   5000,
			ReadTimeoutMS:    2000,
			FailureThreshold: 3,
			BackoffMS:        1000,
			BackoffMaxMS:     30000,
			ProbeTimeoutMS:   1000,
			Bootstrap:        nil, // through the upstreams with an ip
		},
		Cache: Cache{
			Enabled:              true,
			SizeMiB:              16,
			MinTTLS:              0,
			MaxTTLS:              86400,
			NegativeMaxTTLS:      3600,
			FailureTTLS:          5,
			Prefetch:             true,
			ServeStale:           true,
			StaleMaxAgeS:         86400,
			StaleAnswerTTLS:      30,
			StaleClientTimeoutMS: 1800,
			Path:                 "",
		},
		QueryLog: QueryLog{Path: "", Attempts: false},
		History:  defaultHistory(),
		Admin:    Admin{Listen: "127.0.0.1:8053", RecentQueries: DefaultRecentQueries},
		Log:      Log{Level: "info"},
		Clients:  defaultClients(),
		Blocking: defaultBlocking(),
	}
}

// DefaultAllow is server.allow's default: loopback and the private,
// shared, link-local and unique-local ranges, the clients of a home or
// edge network (spec section 2).
func DefaultAllow() []string {
	return []string{"127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
		"100.64.0.0/10", "169.254.0.0/16", "fc00::/7", "fe80::/10"}
}

func defaultAllowPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, a := range DefaultAllow() {
		out = append(out, netip.MustParsePrefix(a))
	}
	return out
}

// newUpstream is an [[upstreams]] element before its keys are decoded onto
// it. Name has no static default: it falls back to the address after
// decoding (see finishElement).
func newUpstream() Upstream { return Upstream{Slots: DefaultSlots} }

// newLocalRecord is a [[local_records]] element before its keys are decoded.
func newLocalRecord() LocalRecord { return LocalRecord{TTL: DefaultTTL} }

// DefaultTOML is the embedded default configuration: every key at its
// default, documented, with two upstreams. It is what nxdnsd runs on when
// started without -c, and the example shipped to users. Do not modify it.
//
//go:embed default.toml
var DefaultTOML []byte

// defaultUpstreams is the embedded default's [[upstreams]], fresh on each
// call, which a file naming no upstream takes. Empty only if DefaultTOML
// were broken (the package's tests rule that out); validation then says
// that no upstream is configured.
func defaultUpstreams() []Upstream {
	cfg, err := LoadDefault()
	if err != nil {
		return nil
	}
	return cfg.Upstreams
}

// LoadDefault parses and validates DefaultTOML. It fails only if the
// embedded file is broken, which the package's tests rule out.
func LoadDefault() (*Config, error) { return Parse(DefaultTOML) }
